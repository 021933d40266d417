"""The Backend protocol both backends satisfy, and the shared async twin."""

from __future__ import annotations

import functools
from types import ModuleType
from typing import (
    TYPE_CHECKING, Any, AsyncIterator, Callable, Iterable, Mapping, Optional, Protocol, Union,
    runtime_checkable,
)

from dolsot._dolsot import validate_toolbox
from dolsot.errors import InvalidToolbox

if TYPE_CHECKING:
    from dolsot._dolsot import Capabilities, Result, SessionInfo

InjectValue = Union[ModuleType, str]
"""A toolbox: a module object or an importable module name."""

OnOutput = Callable[[str], Any]
"""``on_output(text)``: a chunk of the cell's stdout and stderr, as it is written."""

OnImage = Callable[[bytes], Any]
"""``on_image(png)``: a figure's PNG bytes, as the cell shows it."""

Gate = Callable[[str], Optional[Iterable[Any]]]
"""A gate: ``gate(code)`` returns findings (empty or None: the cell may run);
any finding, or an exception, rejects the cell (it does not run)."""


@runtime_checkable
class Backend(Protocol):
    """What Repl and InProcessSession both offer, with one call shape.

    Both subclass the one C++ ``Backend`` binding (``dolsot._dolsot.Backend``),
    which holds every method below but ``arun``. ``branch`` and ``namespace``
    are optional: a backend without them (see ``capabilities``) raises
    ``dolsot.Unsupported``.
    """

    def run(
        self,
        session_id: str,
        code: str,
        *,
        timeout: float | None = None,
        variables: dict[str, Any] | None = None,
        on_output: OnOutput | None = None,
        on_image: OnImage | None = None,
    ) -> Result: ...

    async def arun(
        self,
        session_id: str,
        code: str,
        *,
        timeout: float | None = None,
        variables: dict[str, Any] | None = None,
        on_output: OnOutput | None = None,
        on_image: OnImage | None = None,
    ) -> Result: ...

    def astream(
        self,
        session_id: str,
        code: str,
        *,
        timeout: float | None = None,
        variables: dict[str, Any] | None = None,
        on_image: OnImage | None = None,
    ) -> AsyncIterator[str | Result]: ...

    @property
    def tools(self) -> dict[str, Callable[..., Any]]: ...

    @property
    def final(self) -> str | None: ...

    def interrupt(self, session_id: str) -> None: ...

    @property
    def capabilities(self) -> Capabilities: ...

    def sessions(self) -> list[SessionInfo]: ...

    def reset(self, session_id: str) -> int: ...

    def branch(self, source_id: str, new_id: str) -> None: ...

    def namespace(self, session_id: str) -> dict: ...

    def close(self) -> None: ...


class ToolsMixin:
    """``tools`` (a live dict: a change takes effect from the next cell) and
    ``final`` (the final-answer function's name), kept by the backend's
    ToolHost (``dolsot._tools``)."""

    _dolsot_tools: Any

    @property
    def tools(self) -> dict[str, Callable[..., Any]]:
        host = self.__dict__.get("_dolsot_tools")
        if host is None:
            raise TypeError(f"{type(self).__name__}.tools: __init__ did not run")
        return host.tools

    @tools.setter
    def tools(self, tools: Mapping[str, Callable[..., Any]]) -> None:
        if not isinstance(tools, Mapping):
            raise TypeError(f"tools must be a dict of names to callables, not {type(tools).__name__}")
        self._dolsot_tools.tools = dict(tools)

    @property
    def final(self) -> str | None:
        return self._dolsot_tools.final


class AsyncRunMixin:
    """Gives a backend with a blocking, GIL-releasing ``run`` its ``arun`` and
    ``astream`` twins."""

    async def arun(
        self,
        session_id: str,
        code: str,
        *,
        timeout: float | None = None,
        variables: dict[str, Any] | None = None,
        on_output: OnOutput | None = None,
        on_image: OnImage | None = None,
    ) -> Result:
        import asyncio  # here, not at the top: `import dolsot` stays free of asyncio's ~35 ms

        loop = asyncio.get_running_loop()
        live: dict[str, Any] = {}  # passed only when given: a run() without them stays valid
        if on_output is not None:
            live["on_output"] = on_output
        if on_image is not None:
            live["on_image"] = on_image
        call = functools.partial(
            self.run, session_id, code, timeout=timeout, variables=variables, **live  # type: ignore[attr-defined]
        )
        return await loop.run_in_executor(None, call)

    async def astream(
        self,
        session_id: str,
        code: str,
        *,
        timeout: float | None = None,
        variables: dict[str, Any] | None = None,
        on_image: OnImage | None = None,
    ) -> AsyncIterator[str | Result]:
        """Yields each chunk of the cell's output (a ``str``) as it comes, then
        its ``Result``, last. The cell runs on the loop's default executor, and
        the chunks reach this loop through ``call_soon_threadsafe``, so the
        caller needs no thread of its own. Leaving the iteration early
        interrupts the cell."""
        import asyncio  # see arun

        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Any] = asyncio.Queue()
        finished = object()

        def deliver(text: str) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, text)

        def run() -> Result:
            try:
                return self.run(  # type: ignore[attr-defined, no-any-return]
                    session_id, code, timeout=timeout, variables=variables,
                    on_output=deliver, on_image=on_image,
                )
            finally:
                # After every chunk: run() makes all its callbacks before it returns.
                loop.call_soon_threadsafe(queue.put_nowait, finished)

        running = loop.run_in_executor(None, run)
        done = False
        try:
            while True:
                item = await queue.get()
                if item is finished:
                    break
                yield item
            done = True
            yield await running
        finally:
            if not done and not running.done():
                self.interrupt(session_id)  # type: ignore[attr-defined]
                await asyncio.shield(running)


def toolbox_module_names(inject: Mapping[str, InjectValue] | None) -> dict[str, str]:
    """alias -> importable module name; raises InvalidToolbox for anything else."""
    if inject is None:
        return {}
    if not isinstance(inject, Mapping):
        raise InvalidToolbox(f"inject must map aliases to modules, got {type(inject).__name__}")
    out: dict[str, str] = {}
    for alias, value in inject.items():
        if not isinstance(alias, str):
            raise InvalidToolbox(f"toolbox alias {alias!r} is not a str")
        if isinstance(value, ModuleType):
            validate_toolbox(alias)  # one rule for every door (core/toolbox_name.h)
            out[alias] = value.__name__
        elif isinstance(value, str):
            validate_toolbox(alias, value)
            out[alias] = value
        else:
            raise InvalidToolbox(
                f"toolbox {alias!r} must be a module or an importable module name, "
                f"got {type(value).__name__} {value!r:.60}"
            )
    return out


def check_argument(name: str, value: object, types: tuple[type, ...], what: str) -> None:
    """Raises a TypeError naming ``name`` and what it accepts, unless ``value``
    is None or one of ``types`` (a bool is never taken for a number)."""
    if value is None:
        return
    if isinstance(value, bool) and bool not in types:
        ok = False
    else:
        ok = isinstance(value, types)
    if not ok:
        raise TypeError(f"{name} must be {what}, got {type(value).__name__} {value!r:.60}")


# The constructor arguments both backends take, or either one, and what each
# accepts: one table, so Repl and InProcessSession say the same thing.
_CONFIG_ARGUMENTS: dict[str, tuple[tuple[type, ...], str]] = {
    "timeout": ((int, float), "a number of seconds or None"),
    "max_output": ((int,), "an int (characters; 0: no cap) or None"),
    "max_repr": ((int,), "an int (characters; 0: no cap) or None"),
    "max_text": ((int,), "an int (characters; 0: no cap) or None"),
    "snapshots": ((bool,), "True or False"),
    "checkpoint": ((str,), "'sync', 'async', 'off' or None"),
    "checkpoint_delay": ((int, float), "a number of seconds (0 to 3600) or None"),
    "max_live_sessions": ((int,), "an int or None"),
    "typecheck": ((bool,), "True, False or None"),
    "ty_bin": ((str,), "a path or None"),
    "accept_weaker_walls": ((bool,), "True or False"),
}


def checked_config(**arguments: object) -> dict[str, object]:
    """check_argument for each of a backend's constructor arguments, in the
    order given, by the one table of what each accepts; returns them, to be
    passed on to the C++ constructor as they are."""
    for name, value in arguments.items():
        types, what = _CONFIG_ARGUMENTS[name]
        check_argument(name, value, types, what)
    return arguments
