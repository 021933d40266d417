"""One cell of the Jupyter kernel (``dolsot.kernel``), run by the ``dolsot``
CLI as the agent runs it: ``dolsot --session SID --json-lines [flags]`` with
the code on stdin, through the per-user server. While the cell runs, the CLI
prints its stdout and the figures it shows as JSON lines, which the kernel
passes on as they come; the last line is the ``--json`` document (docs/cli.md,
*Output contract*), of which the kernel shows what was not shown live. The
figure files the CLI names are read and removed.

Completion reads the session's names with ``dolsot --names SID --json``,
which runs nothing in the session (``CliCell.names``).

The CLI child stays in the kernel's process group: Jupyter's interrupt,
terminate and kill (``killpg`` on that group) reach it directly, and a
control-channel interrupt is sent to it alone (``CliCell.interrupt``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

# The CLI's session id rule (core/session_id.h), checked here so that
# `%session` refuses a bad name before anything is switched.
_SESSION_ID = re.compile(r"[A-Za-z0-9._-]{1,128}")
# A figure file as the CLI names it (dolsot-SID-N.png in its working directory).
_FIGURE = re.compile(r"dolsot-[A-Za-z0-9._-]{1,128}-[0-9]{1,9}\.png")
# Variables of the kernel's own launch, never a cell's business (jupyter_client
# and ipykernel set them); without them a kernel started from the agent's
# directory and environment shares the agent's worker profile (docs/cli.md).
_LAUNCH_VARIABLES = re.compile(r"(JPY|IPY)_[A-Z_]*")


def session_id_problem(name: str) -> str | None:
    """Why `name` is not a session id the CLI takes, or None."""
    if not _SESSION_ID.fullmatch(name):
        return "a session id is 1-128 characters of [A-Za-z0-9._-]"
    if name[0] in ".-":
        return "a session id does not start with '.' or '-'"
    if name == "all":
        return "'all' is reserved (dolsot --reset all)"
    return None


def cell_environment(environ: dict[str, str]) -> dict[str, str]:
    """The environment the kernel's CLI calls run with: the kernel's own as
    it was launched, without the launcher's variables."""
    return {k: v for k, v in environ.items() if not _LAUNCH_VARIABLES.fullmatch(k)}


def find_cli(explicit: str | None = None) -> str:
    """The dolsot CLI the kernel runs cells with: `explicit` (``--cli``), else
    ``DOLSOT_CLI`` (set by ``dolsot kernel``), else the one beside this
    interpreter (a wheel installs both in one scripts directory), else PATH."""
    for candidate in (explicit, os.environ.get("DOLSOT_CLI")):
        if candidate:
            if not (os.path.isfile(candidate) and os.access(candidate, os.X_OK)):
                raise FileNotFoundError(f"the dolsot CLI {candidate!r} is not an executable file")
            return candidate
    beside = Path(sys.executable).parent / "dolsot"  # not resolved: a venv's bin/
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("dolsot")
    if found:
        return found
    raise FileNotFoundError("the dolsot CLI was found neither beside "
                            f"{sys.executable} nor on PATH; pass --cli PATH or set DOLSOT_CLI")


@dataclass
class CellReply:
    """What a cell gave, as the kernel shows it."""
    ok: bool
    stdout: str = ""
    value: str | None = None
    error: str | None = None        # the traceback text the agent reads
    error_type: str | None = None
    outcome: str = "ok"
    held: list[str] = field(default_factory=list)
    notes: str = ""                 # the CLI's own stderr lines, banners
    images: list[bytes] = field(default_factory=list)
    # `stdout` and `images` hold only what was not passed on live (the
    # callbacks of CliCell.run saw the rest).

    @property
    def error_value(self) -> str:
        """The exception's message: the traceback's last line after `Type: `."""
        last = (self.error or "").rstrip().rsplit("\n", 1)[-1]
        prefix = f"{self.error_type}: "
        return last[len(prefix):] if self.error_type and last.startswith(prefix) else last


class CliCell:
    """Runs cells through the CLI, one at a time; `interrupt` may be called
    from another thread (the control channel's) while one runs."""

    def __init__(self, cli: str, flags: list[str], env: dict[str, str], cwd: str):
        self.cli, self.flags, self.env, self.cwd = cli, list(flags), dict(env), cwd
        self._lock = threading.Lock()
        self._child: subprocess.Popen | None = None
        self._interrupted = False

    def run(self, session: str, code: str, on_stdout: Optional[Callable[[str], None]] = None,
            on_image: Optional[Callable[[bytes], None]] = None) -> CellReply:
        """Runs `code`; `on_stdout(text)` and `on_image(png)` are called on this
        thread as the cell prints and shows them, before this returns."""
        argv = [self.cli, "--session", session, "--json-lines", *self.flags]
        with self._lock:
            self._interrupted = False
            self._child = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                           stderr=subprocess.PIPE, env=self.env, cwd=self.cwd)
            child = self._child
        live = _LiveLines(self, on_stdout, on_image)
        errors: list[bytes] = []
        # stderr drains on a thread of its own while this one reads stdout,
        # so neither pipe fills up and stops the CLI.
        drain = threading.Thread(target=lambda: errors.append(child.stderr.read()),
                                 name="dolsot-kernel-stderr", daemon=True)
        try:
            drain.start()
            try:
                child.stdin.write(code.encode("utf-8", "surrogatepass"))
                child.stdin.close()
            except BrokenPipeError:  # the CLI exited without reading it: its stderr says why
                pass
            for line in iter(child.stdout.readline, b""):
                live.take(line)
            child.wait()
        finally:
            with self._lock:
                self._child = None
            if child.poll() is None:  # reading itself failed: never leave it running
                child.kill()
                child.wait()
            if drain.ident is not None:  # started
                drain.join()
            child.stdout.close()
            child.stderr.close()
        return self._reply(child.returncode, live, b"".join(errors))

    def names(self, session: str) -> list[str]:
        """The names `session` holds, read without running anything in it
        (its cell counter, namespace and checkpoint stay as they are):
        ``dolsot --names SID --json``. Empty when it cannot tell."""
        argv = [self.cli, "--names", session, "--json"]
        if "--no-serve" in self.flags:
            argv.append("--no-serve")
        try:
            proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True,
                                  env=self.env, cwd=self.cwd, timeout=60)
            doc = json.loads(proc.stdout)
        except (OSError, ValueError, subprocess.TimeoutExpired):
            return []
        names = doc.get("names") if isinstance(doc, dict) else None
        if proc.returncode != 0 or not isinstance(names, list):
            return []
        return [name for name in names if isinstance(name, str)]

    def interrupt(self) -> bool:
        """Sends SIGINT to the running CLI (it interrupts its cell: the session
        rolls back and keeps its state). False when no cell runs."""
        with self._lock:
            if self._child is None or self._child.poll() is not None:
                return False
            self._interrupted = True
            self._child.send_signal(signal.SIGINT)
            return True

    def stop(self) -> None:
        """Ends a running call (the kernel is shutting down): SIGTERM, which the
        CLI takes as an interrupt of its cell, then waits for it."""
        with self._lock:
            child = self._child
            if child is not None and child.poll() is None:
                child.send_signal(signal.SIGTERM)
        if child is not None:
            try:
                child.wait(timeout=90)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()

    def _reply(self, code: int, live: "_LiveLines", err: bytes) -> CellReply:
        notes = err.decode("utf-8", "replace")
        doc = live.document
        if not isinstance(doc, dict):
            # dolsot itself refused or failed (exit 2: bad flags, a bad id) or
            # was stopped before its cell started: its stderr says why.
            interrupted = code in (128 + signal.SIGINT, -signal.SIGINT) or self._interrupted
            kind = "KeyboardInterrupt" if interrupted else "DolsotError"
            message = notes.strip() or f"dolsot exited with status {code} and printed no result"
            return CellReply(ok=False, error=message, error_type=kind,
                             outcome="interrupted" if interrupted else "refused")
        stdout = doc.get("stdout") or ""
        # What went live is the head of the Result's stdout (cli/live_stdout.h):
        # only the rest is still to show.
        shown = os.path.commonprefix([stdout, live.stdout])
        reply = CellReply(ok=bool(doc.get("ok")), stdout=stdout[len(shown):],
                          value=doc.get("value"), error=doc.get("error"),
                          error_type=doc.get("error_type"), outcome=doc.get("outcome") or "",
                          held=list(doc.get("held") or []), notes=notes)
        if doc.get("dropped"):
            reply.notes += ("not persisted (cannot be saved): " + ", ".join(doc["dropped"]) + "\n")
        if doc.get("save_error"):
            reply.notes += f"warning: checkpoint not saved: {doc['save_error']}\n"
        reply.notes += live.notes
        for name in doc.get("images") or []:
            if name in live.images:  # shown live; its file is gone already
                continue
            try:
                reply.images.append(self.take_figure(name))
            except (OSError, ValueError) as error:
                reply.notes += f"warning: figure {name!r} not shown: {error}\n"
        return reply

    def take_figure(self, name: str) -> bytes:
        # The CLI wrote it with O_EXCL in our working directory: it is ours
        # to read and remove. Anything else is not read.
        if not isinstance(name, str) or not _FIGURE.fullmatch(name):
            raise ValueError(f"the dolsot CLI named an unexpected figure file: {name!r}")
        path = os.path.join(self.cwd, name)
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as f:
            data = f.read()
        os.unlink(path)
        return data


class _LiveLines:
    """The CLI's --json-lines stdout, line by line: {"stdout": TEXT} and
    {"image": PATH} while the cell runs, then the document (the object with
    "ok") last."""

    def __init__(self, cell: CliCell, on_stdout, on_image):
        self.cell, self.on_stdout, self.on_image = cell, on_stdout, on_image
        self.stdout = ""           # the text passed on live
        self.images: set[str] = set()  # the figure files passed on (read and removed)
        self.notes = ""
        self.document: dict | None = None

    def take(self, line: bytes) -> None:
        try:
            item = json.loads(line)
        except ValueError:
            item = None
        if not isinstance(item, dict) or self.document is not None:
            self.notes += f"warning: the dolsot CLI printed an unexpected line: {line[:200]!r}\n"
        elif "ok" in item:
            self.document = item
        elif isinstance(item.get("stdout"), str):
            self.stdout += item["stdout"]
            if self.on_stdout is not None:
                self.on_stdout(item["stdout"])
        elif isinstance(item.get("image"), str):
            name = item["image"]
            self.images.add(name)
            try:
                png = self.cell.take_figure(name)
            except (OSError, ValueError) as error:
                self.notes += f"warning: figure {name!r} not shown: {error}\n"
                return
            if self.on_image is not None:
                self.on_image(png)
