"""Entry point of a Repl worker: the engine's worker loop, run by the extension
module in this very interpreter.

A Python host starts it as ``python -c "...dolsot._worker...main()"`` with its
own ``sys.executable``; the CLI installed by the wheel starts the
``dolsot-worker`` console script beside it, which pip wrote for the
environment's own interpreter. Either way it serves the host on the socket
named by the DOLSOT_WORKER_FD environment variable (set by the host); it is not
meant to be run by hand.
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
    _empty_main_module()
    rc = _run_worker(int(fd_text))
    stderr.flush()
    exit_now(rc)


def _empty_main_module() -> None:
    """Sessions use __main__ as their namespace: whatever started this process
    (``python -m``, a console script with its imports and ``__file__``) leaves
    names there; only those of a bare ``python -c`` stay."""
    main_module = sys.modules["__main__"]
    left_by_launcher = ("__file__", "__cached__")
    for name in [n for n in vars(main_module) if not n.startswith("__") or n in left_by_launcher]:
        delattr(main_module, name)


if __name__ == "__main__":
    main()
