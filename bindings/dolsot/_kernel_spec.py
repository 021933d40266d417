"""``dolsot kernel install``: writes the kernelspec of ``dolsot.kernel``
through jupyter_client's ``KernelSpecManager`` (the places Jupyter looks).

The spec's argv names this interpreter by the path it was started as (a
venv's ``bin/python``, never resolved to the base interpreter the venv
links to): the kernel then imports the dolsot of that environment and runs
the CLI beside it, so the spec keeps working whichever venv is active when
Jupyter starts it, and names the CLI itself only when that is not the one
beside the interpreter.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Callable

from dolsot._kernel_cell import find_cli


def kernelspec(session: str, flags: list[str], cli: str | None = None,
               display_name: str | None = None) -> dict:
    argv = [sys.executable, "-m", "dolsot.kernel", "--session", session]
    if cli:
        argv += ["--cli", cli]
    argv += [*flags, "-f", "{connection_file}"]
    return {"argv": argv, "display_name": display_name or f"dolsot ({session})",
            "language": "python", "interrupt_mode": "signal",
            "metadata": {"dolsot": {"session": session}}}


def install_main(argv: list[str], prog: str, add_run_flags: Callable, run_flags: Callable,
                 session_arg: Callable) -> int:
    parser = argparse.ArgumentParser(prog=prog, description="Write the kernelspec of dolsot's "
                                     "Jupyter kernel.")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--user", action="store_true", help="for this user (Jupyter's data dir)")
    where.add_argument("--sys-prefix", action="store_true",
                       help=f"into this environment ({sys.prefix})")
    where.add_argument("--prefix", help="into PREFIX/share/jupyter/kernels/")
    parser.add_argument("--name", default=None,
                        help="the kernel's name (default: dolsot-SESSION)")
    parser.add_argument("--display-name", default=None, help="default: dolsot (SESSION)")
    parser.add_argument("--session", type=session_arg, default="notebook",
                        help="the session the kernel opens (default: notebook)")
    add_run_flags(parser)
    args = parser.parse_args(argv)

    from jupyter_client.kernelspec import KernelSpecManager, _is_valid_kernel_name

    name = args.name or f"dolsot-{args.session}".lower()
    if not _is_valid_kernel_name(name):
        parser.error(f"--name {name!r}: a kernel name is ASCII letters, digits, '.', '_' and '-'")
    try:
        cli = find_cli()
    except FileNotFoundError as error:
        parser.error(str(error))
    beside = Path(sys.executable).parent / "dolsot"
    pinned = None if os.path.realpath(cli) == os.path.realpath(beside) else os.path.abspath(cli)
    spec = kernelspec(args.session, run_flags(args), pinned, args.display_name)
    prefix = sys.prefix if args.sys_prefix else args.prefix
    with tempfile.TemporaryDirectory() as staging:
        with open(os.path.join(staging, "kernel.json"), "w") as f:
            json.dump(spec, f, indent=1)
        try:
            dest = KernelSpecManager().install_kernel_spec(staging, name, user=args.user,
                                                           replace=True, prefix=prefix)
        except OSError as error:
            print(f"{prog}: error: cannot write the kernelspec: {error} (--user or --sys-prefix "
                  "install where you may write)", file=sys.stderr)
            return 1
    print(f"installed kernelspec {name} in {dest}")
    return 0
