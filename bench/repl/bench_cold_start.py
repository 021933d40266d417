"""Cold start (issue #39): a Python host's new Repl and its first cell,
against `python -c pass` (the same interpreter) measured in the same run,
arms interleaved in rounds; medians.

Run: PYTHONPATH=<build>/python python bench/repl/bench_cold_start.py [--rounds 20]

Each round starts fresh child processes of the host's interpreter:
- floor: `python -c pass`;
- script: the whole of a script that imports dolsot, makes a Repl, runs
  `1 + 1`, closes it and exits (wall time of the child, start to exit);
- inside another child, timed with perf_counter: `import dolsot`; the Repl
  class's first use (`dolsot.Repl`, which loads the host's side of the
  package); `Repl()` + the first cell (the worker's start, its first
  session, the cell); and a second engine in the same process, Repl() +
  first cell again (what a long-lived host pays for each engine it makes).
With `--typecheck` the Repls keep the default type gate (ty, when
installed) instead of typecheck=False.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

SCRIPT = r"""
import dolsot
from dolsot.store import MemoryStore
r = dolsot.Repl(store=MemoryStore(), **({} if TYPECHECK else {"typecheck": False}))
assert r.run("s", "1 + 1").value == "2"
r.close()
"""

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import dolsot
t1 = time.perf_counter()
Repl = dolsot.Repl
from dolsot.store import MemoryStore
t2 = time.perf_counter()
kw = {} if TYPECHECK else {"typecheck": False}
r = Repl(store=MemoryStore(), **kw)
assert r.run("s", "1 + 1").value == "2"
t3 = time.perf_counter()
r2 = Repl(store=MemoryStore(), **kw)
assert r2.run("s", "1 + 1").value == "2"
t4 = time.perf_counter()
r.close(); r2.close()
print(json.dumps({"import": t1 - t0, "class": t2 - t1, "first": t3 - t2, "second": t4 - t3}))
"""


def wall(args: list[str], env: dict[str, str]) -> tuple[float, str]:
    start = time.perf_counter()
    proc = subprocess.run(args, env=env, capture_output=True, text=True, check=True)
    return time.perf_counter() - start, proc.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--typecheck", action="store_true")
    args = parser.parse_args()
    env = dict(os.environ)
    child = CHILD.replace("TYPECHECK", repr(args.typecheck))
    script_code = SCRIPT.replace("TYPECHECK", repr(args.typecheck))
    floor, script, parts = [], [], {"import": [], "class": [], "first": [], "second": []}
    for _ in range(args.rounds):
        floor.append(wall([sys.executable, "-c", "pass"], env)[0])
        script.append(wall([sys.executable, "-c", script_code], env)[0])
        out = wall([sys.executable, "-c", child], env)[1]
        for key, value in json.loads(out.strip().splitlines()[-1]).items():
            parts[key].append(value)
    ms = lambda xs: statistics.median(xs) * 1000  # noqa: E731
    base = ms(floor)
    print(f"python -c pass                       {base:7.1f} ms")
    print(f"whole script (import, Repl, 1 + 1, close, exit) {ms(script):7.1f} ms  {ms(script) / base:5.2f}x")
    print(f"  import dolsot                      {ms(parts['import']):7.1f} ms  {ms(parts['import']) / base:5.2f}x")
    print(f"  dolsot.Repl's first use            {ms(parts['class']):7.1f} ms  {ms(parts['class']) / base:5.2f}x")
    print(f"  Repl() + first cell, first engine  {ms(parts['first']):7.1f} ms  {ms(parts['first']) / base:5.2f}x")
    print(f"  Repl() + first cell, second engine {ms(parts['second']):7.1f} ms  {ms(parts['second']) / base:5.2f}x")


if __name__ == "__main__":
    main()
