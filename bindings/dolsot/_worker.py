"""Entry point of a Repl worker started from a Python host's interpreter.

``python -m dolsot._worker`` serves the host on the socket named by the
DOLSOT_WORKER_FD environment variable (set by the host); it is not meant to be
run by hand.
"""

from __future__ import annotations

import os
import sys


def main() -> None:
    fd_text = os.environ.get("DOLSOT_WORKER_FD", "")
    if not fd_text.isdigit():
        sys.stderr.write(
            "dolsot._worker: error: DOLSOT_WORKER_FD is not set; "
            "this module is started by a dolsot host, not by hand\n"
        )
        sys.exit(2)
    from dolsot._dolsot import _run_worker

    exit_now, stderr = os._exit, sys.stderr
    # Sessions use __main__ as their namespace: when this file is __main__
    # (python -m), empty it of this module's own names first.
    main_module = sys.modules["__main__"]
    if getattr(main_module, "__file__", None) == __file__:
        for name in [n for n in vars(main_module) if not n.startswith("__")]:
            delattr(main_module, name)
    rc = _run_worker(int(fd_text))
    stderr.flush()
    exit_now(rc)


if __name__ == "__main__":
    main()
