"""Type stubs for dolsot's C++ core module. Use the dolsot package instead."""

import enum
from typing import Any, Callable, Iterable, Mapping, Sequence

class Outcome(enum.Enum):
    """What happened to a cell (Result.outcome)."""

    OK = 0
    ERROR = 1
    TIMEOUT = 2
    INTERRUPTED = 3
    CRASHED = 4
    REJECTED = 5
    WORKER_LOST = 6

class Result:
    """What one cell returns, identical for every backend."""

    def __init__(
        self,
        *,
        ok: bool = True,
        value: str | None = None,
        stdout: str = "",
        error: str | None = None,
        exit_code: int = 0,
        held: Sequence[str] = (),
        dropped: Sequence[str] = (),
        outcome: Outcome | None = None,
        error_type: str | None = None,
        save_error: str | None = None,
        images: Sequence[bytes] = (),
        max_text: int | None = None,
    ) -> None: ...
    @property
    def ok(self) -> bool: ...
    @property
    def outcome(self) -> Outcome: ...
    @property
    def save_error(self) -> str | None: ...
    @property
    def error_type(self) -> str | None: ...
    @property
    def returned(self) -> Any: ...
    @property
    def has_returned(self) -> bool: ...
    @property
    def value(self) -> str | None: ...
    @property
    def stdout(self) -> str: ...
    @property
    def error(self) -> str | None: ...
    @property
    def exit_code(self) -> int: ...
    @property
    def held(self) -> list[str]: ...
    @property
    def dropped(self) -> list[str]: ...
    @property
    def images(self) -> list[bytes]: ...
    @property
    def max_text(self) -> int: ...
    @property
    def text(self) -> str: ...

class SessionInfo:
    """One stored or live session."""

    def __init__(self, id: str, size_bytes: int, last_used: float) -> None: ...
    @property
    def id(self) -> str: ...
    @property
    def size_bytes(self) -> int: ...
    @property
    def last_used(self) -> float: ...

class FileStore:
    def __init__(self, path: str | None = None, *, ttl_days: int | None = None) -> None: ...
    @property
    def path(self) -> str: ...
    @property
    def ttl_days(self) -> int: ...
    def load(self, sid: str) -> bytes | None: ...
    def save(self, sid: str, blob: bytes) -> None: ...
    def append(self, sid: str, data: bytes) -> None: ...
    def delete(self, sid: str) -> int: ...
    def list(self) -> list[SessionInfo]: ...

class MemoryStore:
    def __init__(self) -> None: ...
    def load(self, sid: str) -> bytes | None: ...
    def save(self, sid: str, blob: bytes) -> None: ...
    def append(self, sid: str, data: bytes) -> None: ...
    def delete(self, sid: str) -> int: ...
    def list(self) -> list[SessionInfo]: ...

class Capabilities:
    """What a backend can promise."""

    @property
    def hard_timeout(self) -> bool: ...
    @property
    def crash_survival(self) -> bool: ...
    @property
    def live_objects(self) -> bool: ...
    @property
    def sandbox(self) -> bool: ...
    @property
    def tools(self) -> bool: ...
    @property
    def branch(self) -> bool: ...
    @property
    def durable(self) -> bool: ...

class Backend:
    """The one interface of both backends; every method is bound here once."""

    def run(
        self,
        session_id: str,
        code: str,
        *,
        timeout: float | None = None,
        variables: dict[str, Any] | None = None,
        on_output: Callable[[str], Any] | None = None,
        on_image: Callable[[bytes], Any] | None = None,
    ) -> Result: ...
    def interrupt(self, session_id: str) -> None: ...
    @property
    def capabilities(self) -> Capabilities: ...
    def sessions(self) -> list[SessionInfo]: ...
    def reset(self, session_id: str) -> int: ...
    def branch(self, source_id: str, new_id: str) -> None: ...
    def namespace(self, session_id: str) -> dict[str, Any]: ...
    def close(self) -> None: ...

class InProcessSession(Backend):
    def __init__(
        self,
        inject: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        max_output: int | None = None,
        gate: Callable[[str], Iterable[Any] | None] | None = None,
        typecheck: bool | None = None,
        ty_bin: str | None = None,
        max_repr: int | None = None,
        max_text: int | None = None,
    ) -> None: ...
    @property
    def leaked_threads(self) -> int: ...

class Repl(Backend):
    def __init__(
        self,
        toolboxes: Mapping[str, str],
        *,
        store: Any = None,
        timeout: float | None = None,
        max_output: int | None = None,
        snapshots: bool = True,
        checkpoint: str | None = None,
        max_live_sessions: int | None = None,
        gate: Callable[[str], Iterable[Any] | None] | None = None,
        typecheck: bool | None = None,
        python_path: Sequence[str] = (),
        worker_command: Sequence[str] = (),
        worker_environment: Sequence[str] = (),
        python_executable: str = "",
        max_repr: int | None = None,
        max_text: int | None = None,
        sandbox: Any = None,
        accept_weaker_walls: bool = False,
    ) -> None: ...
    def _sandbox_layers(self) -> list[tuple[str, bool, str]]: ...
    def _await_spare_for_testing(self, seconds: float) -> bool: ...
    @property
    def worker_pid(self) -> int: ...

class _SandboxModule:
    class Finding:
        """One reason the AST gate rejects a cell."""

        @property
        def rule(self) -> str: ...
        @property
        def message(self) -> str: ...
        @property
        def line(self) -> int: ...
        @property
        def column(self) -> int: ...
        @property
        def start_byte(self) -> int: ...
        @property
        def end_byte(self) -> int: ...

    class Policy:
        """What cells may import and use. Immutable."""

        def __init__(
            self,
            *,
            allowed_modules: Iterable[str] | None = None,
            denied_names: Iterable[str] = (),
            allowed_dunders: Iterable[str] | None = None,
            toolboxes: Mapping[str, str] | None = None,
            max_source_bytes: int = 8388608,
            max_findings: int = 50,
            private_in_plain_methods: bool = True,
        ) -> None: ...
        @property
        def allowed_modules(self) -> frozenset[str]: ...
        @property
        def denied_names(self) -> frozenset[str]: ...
        @property
        def allowed_dunders(self) -> frozenset[str]: ...
        @property
        def toolbox_aliases(self) -> frozenset[str]: ...
        @property
        def max_source_bytes(self) -> int: ...
        @property
        def private_in_plain_methods(self) -> bool: ...
        @property
        def max_findings(self) -> int: ...

    @staticmethod
    def check_ast(code: str | bytes, policy: _SandboxModule.Policy | None = None) -> list[_SandboxModule.Finding]: ...
    @staticmethod
    def rules() -> list[tuple[str, str]]: ...

_sandbox: _SandboxModule

def validate_session_id(session_id: str) -> None: ...
def _parse_flag(name: str, raw: str) -> bool: ...
def validate_toolbox(alias: str, module: str | None = None) -> None: ...
def resolve_config(
    *,
    cache_dir: str | None = None,
    ttl_days: int | None = None,
    timeout: float | None = None,
    max_output: int | None = None,
    typecheck: bool | None = None,
    ty_bin: str | None = None,
    max_repr: int | None = None,
    max_text: int | None = None,
) -> dict[str, Any]: ...
def _run_worker(fd: int) -> int: ...
def _check_sandbox(sandbox: Any) -> None: ...

def plain_pickle(data: bytes) -> bool:
    """Whether a pickle builds only plain data (names nothing, calls nothing)."""

def check_pickle(data: bytes, max_bytes: int) -> bool:
    """Walks a session's pickle within a budget of max_bytes: whether it is
    plain; raises pickle.UnpicklingError saying why it is refused."""

def safe_pickle_globals() -> list[tuple[str, str]]:
    """The (module, name) pairs a session's pickle may name when unpickle='safe'."""
