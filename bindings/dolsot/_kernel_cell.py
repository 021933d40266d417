"""One cell of the Jupyter kernel (``dolsot.kernel``), run by the ``dolsot``
CLI as the agent runs it: ``dolsot --session SID --json [flags]`` with the
code on stdin, through the per-user server. Its JSON document (docs/cli.md,
*Output contract*) is what the kernel shows; the figure files it names are
read and removed.

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

    def run(self, session: str, code: str) -> CellReply:
        argv = [self.cli, "--session", session, "--json", *self.flags]
        with self._lock:
            self._interrupted = False
            self._child = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                           stderr=subprocess.PIPE, env=self.env, cwd=self.cwd)
        try:
            out, err = self._child.communicate(code.encode("utf-8", "surrogatepass"))
        finally:
            with self._lock:
                child, self._child = self._child, None
            if child.poll() is None:  # communicate() itself failed: never leave it running
                child.kill()
                child.wait()
        return self._reply(child.returncode, out, err)

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

    def _reply(self, code: int, out: bytes, err: bytes) -> CellReply:
        notes = err.decode("utf-8", "replace")
        try:
            doc = json.loads(out)
        except ValueError:
            doc = None
        if not isinstance(doc, dict):
            # dolsot itself refused or failed (exit 2: bad flags, a bad id) or
            # was stopped before its cell started: its stderr says why.
            interrupted = code in (128 + signal.SIGINT, -signal.SIGINT) or self._interrupted
            kind = "KeyboardInterrupt" if interrupted else "DolsotError"
            message = notes.strip() or f"dolsot exited with status {code} and printed no result"
            return CellReply(ok=False, error=message, error_type=kind,
                             outcome="interrupted" if interrupted else "refused")
        reply = CellReply(ok=bool(doc.get("ok")), stdout=doc.get("stdout") or "",
                          value=doc.get("value"), error=doc.get("error"),
                          error_type=doc.get("error_type"), outcome=doc.get("outcome") or "",
                          held=list(doc.get("held") or []), notes=notes)
        if doc.get("dropped"):
            reply.notes += ("not persisted (cannot be saved): " + ", ".join(doc["dropped"]) + "\n")
        if doc.get("save_error"):
            reply.notes += f"warning: checkpoint not saved: {doc['save_error']}\n"
        for name in doc.get("images") or []:
            try:
                reply.images.append(self._take_figure(name))
            except (OSError, ValueError) as error:
                reply.notes += f"warning: figure {name!r} not shown: {error}\n"
        return reply

    def _take_figure(self, name: str) -> bytes:
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
