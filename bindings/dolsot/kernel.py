"""``dolsot kernel``: a Jupyter kernel whose cells run in a dolsot session,
the very session an agent drives with the CLI (docs/jupyter.md).

Needs the extra ``dolsot[kernel]`` (ipykernel, jupyter_client). Built on
ipykernel's machinery as a wrapper kernel: a ``Kernel`` subclass launched by
``IPKernelApp``. Each cell is one ``dolsot --session SID --json-lines`` call
(the CLI the agent runs, through the per-user server; ``_kernel_cell.py``),
so the person sees what the agent sees: the cell's output as it prints it,
its figures as ``image/png`` as it shows them, its value, the same traceback
text. Completion reads the session's names with ``dolsot --names``, which
runs nothing in the session. A first line ``%session NAME`` switches the
notebook to another session.

    python -m dolsot.kernel [--session SID] [run flags] -f CONNECTION_FILE
    python -m dolsot.kernel install [--user | --sys-prefix | --prefix DIR]
                                    [--name NAME] [--session SID] [run flags]

(``dolsot kernel ...`` is the same, with the interpreter dolsot belongs to.)
The run flags are the CLI's (``--toolbox``, ``--timeout``, ``--gate``,
``--sandbox``, ...): give the ones the agent gives, or the session is
restored without its toolboxes or under other walls.
"""

from __future__ import annotations

import argparse
import base64
import builtins
import keyword
import os
import platform
import re
import sys
from dataclasses import dataclass, field

try:
    from ipykernel.kernelbase import Kernel
except ImportError as error:  # pragma: no cover - exercised only without ipykernel
    raise ImportError(
        f"dolsot.kernel needs ipykernel ({error}); install it with: pip install 'dolsot[kernel]'"
    ) from error

import dolsot
from dolsot._kernel_cell import CellReply, CliCell, cell_environment, find_cli, session_id_problem

__all__ = ["DolsotKernel", "main"]

DEFAULT_SESSION = "notebook"
_SESSION_LINE = re.compile(r"[ \t]*%session(?=\s|$)(?P<args>[^\n]*)(?:\n|$)")
_NAME_BEFORE_CURSOR = re.compile(r"[A-Za-z_][A-Za-z0-9_]*$")


@dataclass
class KernelSettings:
    session: str = DEFAULT_SESSION
    cli: str = ""
    flags: list[str] = field(default_factory=list)   # the CLI's run flags, as given
    env: dict[str, str] = field(default_factory=dict)
    cwd: str = "."


class DolsotKernel(Kernel):
    """A wrapper kernel: cells go to the dolsot CLI; nothing runs in here."""

    implementation = "dolsot"
    implementation_version = dolsot.__version__
    language = "python"
    language_version = platform.python_version()
    language_info = {
        "name": "python",
        "version": platform.python_version(),
        "mimetype": "text/x-python",
        "file_extension": ".py",
        "pygments_lexer": "python3",
        "codemirror_mode": {"name": "python", "version": 3},
    }
    banner = f"dolsot {dolsot.__version__}: cells run in a dolsot session (%session NAME switches)"
    settings = KernelSettings()  # set by main() before the app creates the kernel

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.session_id = self.settings.session
        # Launched by main(); a kernel class launched some other way finds
        # the CLI itself and runs with the process's environment.
        self._cells = CliCell(self.settings.cli or find_cli(), self.settings.flags,
                              self.settings.env or cell_environment(dict(os.environ)),
                              self.settings.cwd)

    # Interrupts. The CLI child shares the kernel's process group, so
    # Jupyter's SIGINT to the group reaches it directly; the kernel itself
    # keeps ignoring SIGINT (IPKernelApp's init_signal) instead of taking a
    # KeyboardInterrupt in its own code, and a control-channel interrupt
    # goes to the child alone: exactly one SIGINT either way.
    def pre_handler_hook(self):
        pass

    def post_handler_hook(self):
        pass

    def _send_interrupt_children(self):
        self._cells.interrupt()

    async def do_shutdown(self, restart):
        self._cells.stop()
        return {"status": "ok", "restart": restart}

    async def do_execute(self, code, silent, store_history=True, user_expressions=None,
                         allow_stdin=False, *, cell_meta=None, cell_id=None):
        switch = _SESSION_LINE.match(code)
        if switch:
            args = switch.group("args").split()
            if len(args) > 1:
                return self._error(silent, "UsageError",
                                   f"%session takes one session id, not {len(args)} words: "
                                   "%session NAME")
            if args:
                name = args[0]
                problem = session_id_problem(name)
                if problem:
                    return self._error(silent, "UsageError",
                                       f"%session: {name!r} is not a session id: {problem}")
                self.session_id = name
            if not silent:
                self._stream("stdout", f"session: {self.session_id}\n")
            code = code[switch.end():]
        if not code.strip():
            return self._ok()
        on_stdout = on_image = None
        if not silent:  # the cell's output and figures as they come
            on_stdout = lambda text: self._stream("stdout", text)  # noqa: E731
            on_image = self._display_png
        try:
            reply = self._cells.run(self.session_id, code, on_stdout, on_image)
        except OSError as error:  # the CLI cannot be started (moved, deleted)
            return self._error(silent, "DolsotError",
                               f"cannot run the dolsot CLI {self._cells.cli!r}: {error}")
        if not silent:
            self._show(reply)
        if reply.ok:
            return self._ok()
        return self._error(silent, reply.error_type or reply.outcome, reply.error or "",
                           reply.error_value)

    async def do_complete(self, code, cursor_pos):
        cursor_pos = len(code) if cursor_pos is None else cursor_pos
        before = code[:cursor_pos]
        token = _NAME_BEFORE_CURSOR.search(before)
        prefix = token.group(0) if token else ""
        start = cursor_pos - len(prefix)
        matches: list[str] = []
        # A bare name: the session's names and the toolboxes' aliases, then
        # builtins and keywords. After a dot it would take running code in
        # the session (dir()): not offered.
        if not before[:start].rstrip().endswith("."):
            pool = [*sorted({*self._cells.names(self.session_id), *self._toolbox_aliases()}),
                    *sorted(dir(builtins)), *keyword.kwlist]
            seen: set[str] = set()
            for name in pool:
                if name.startswith(prefix) and not name.startswith("__") and name not in seen:
                    seen.add(name)
                    matches.append(name)
        return {"matches": matches, "cursor_start": start, "cursor_end": cursor_pos,
                "metadata": {}, "status": "ok"}

    def _toolbox_aliases(self) -> list[str]:
        """The aliases of the kernel's --toolbox flags (MODULE:ALIAS): bound in
        the session, never among the names it saves."""
        flags = self._cells.flags
        return [flags[i + 1].rpartition(":")[2] for i, flag in enumerate(flags[:-1])
                if flag == "--toolbox"]

    # iopub. The cell's stdout and figures went out as they came (run's
    # callbacks); `reply` holds what is left to show.
    def _show(self, reply: CellReply) -> None:
        if reply.stdout:
            self._stream("stdout", reply.stdout)
        if reply.notes:
            self._stream("stderr", reply.notes)
        for png in reply.images:
            self._display_png(png)
        if reply.value is not None:
            self.send_response(self.iopub_socket, "execute_result", {
                "execution_count": self.execution_count,
                "data": {"text/plain": reply.value}, "metadata": {}})

    def _display_png(self, png: bytes) -> None:
        self.send_response(self.iopub_socket, "display_data", {
            "data": {"image/png": base64.b64encode(png).decode("ascii"),
                     "text/plain": "<Figure>"},
            "metadata": {}})

    def _stream(self, name: str, text: str) -> None:
        self.send_response(self.iopub_socket, "stream", {"name": name, "text": text})

    def _ok(self) -> dict:
        return {"status": "ok", "execution_count": self.execution_count,
                "payload": [], "user_expressions": {}}

    def _error(self, silent: bool, ename: str, text: str, evalue: str | None = None) -> dict:
        """The error reply; its iopub `error` carries the traceback text as
        the agent reads it, one line per entry."""
        content = {"ename": ename, "evalue": evalue if evalue is not None else text,
                   "traceback": text.splitlines() or [text]}
        if not silent:
            self.send_response(self.iopub_socket, "error", content)
        return {"status": "error", "execution_count": self.execution_count, **content}


# --- command line ----------------------------------------------------------

def _add_run_flags(parser: argparse.ArgumentParser) -> None:
    """The CLI's run flags, passed on to every cell's call as given (the CLI
    checks their values)."""
    group = parser.add_argument_group("the dolsot CLI's run flags (dolsot --help)")
    for flag in ("--toolbox", "--mount"):
        group.add_argument(flag, action="append", default=[], metavar="SPEC")
    for flag in ("--timeout", "--max-repr", "--max-text", "--memory"):
        group.add_argument(flag, metavar="N")
    for flag in ("--gate", "--sandbox", "--network", "--accept-weaker-walls", "--no-serve"):
        group.add_argument(flag, action="store_true")


def _run_flags(args: argparse.Namespace) -> list[str]:
    flags: list[str] = []
    for flag in ("--toolbox", "--mount"):
        for value in getattr(args, flag[2:].replace("-", "_")):
            flags += [flag, value]
    for flag in ("--timeout", "--max-repr", "--max-text", "--memory"):
        value = getattr(args, flag[2:].replace("-", "_"))
        if value is not None:
            flags += [flag, value]
    for flag in ("--gate", "--sandbox", "--network", "--accept-weaker-walls", "--no-serve"):
        if getattr(args, flag[2:].replace("-", "_")):
            flags.append(flag)
    return flags


def _session_arg(value: str) -> str:
    problem = session_id_problem(value)
    if problem:
        raise argparse.ArgumentTypeError(f"{value!r} is not a session id: {problem}")
    return value


def _parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog, description="A Jupyter kernel whose cells run in a dolsot session.")
    parser.add_argument("--session", type=_session_arg, default=DEFAULT_SESSION,
                        help=f"the session the notebook opens (default: {DEFAULT_SESSION})")
    parser.add_argument("--cli", help="the dolsot CLI to run cells with (default: DOLSOT_CLI, "
                                      "else the one beside this Python, else PATH)")
    parser.add_argument("-f", dest="connection_file", metavar="CONNECTION_FILE",
                        help="the connection file Jupyter gives the kernel")
    _add_run_flags(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    prog = "dolsot kernel" if os.environ.get("DOLSOT_CLI") else "python -m dolsot.kernel"
    if argv[:1] == ["install"]:
        from dolsot._kernel_spec import install_main
        return install_main(argv[1:], prog + " install", _add_run_flags, _run_flags, _session_arg)
    args = _parser(prog).parse_args(argv)
    if not args.connection_file:
        print(f"{prog}: error: -f CONNECTION_FILE is required (Jupyter starts the kernel with it; "
              f"`{prog} install` writes the kernelspec)", file=sys.stderr)
        return 2
    try:
        cli = find_cli(args.cli)
    except FileNotFoundError as error:
        print(f"{prog}: error: {error}", file=sys.stderr)
        return 2
    # The environment as the kernel was launched, before ipykernel adds its
    # own (MPLBACKEND): the cells' calls carry it, as an agent's carry theirs.
    DolsotKernel.settings = KernelSettings(session=args.session, cli=cli, flags=_run_flags(args),
                                           env=cell_environment(dict(os.environ)),
                                           cwd=os.getcwd())
    from ipykernel.kernelapp import IPKernelApp
    IPKernelApp.launch_instance(argv=["-f", args.connection_file], kernel_class=DolsotKernel)
    return 0


if __name__ == "__main__":
    sys.exit(main())
