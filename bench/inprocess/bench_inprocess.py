"""Benchmark: a trivial cell's round trip through InProcessSession (worker
thread, capture, timeout included) against a Python-level REPL step measured
in the same run (parse, split the trailing expression, exec, repr, stdout
captured via redirect_stdout, a SIGALRM timer armed and disarmed).

Usage: PYTHONPATH=<builddir>/python python bench/inprocess/bench_inprocess.py
Prints medians (µs per cell over batches) and the ratio; with --repl, also
dolsot.repl.Repl (snapshots off, checkpoints off) in the same run; with
--gap-ms, cells are that far apart (each timed alone), as when an agent thinks
between cells.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import io
import signal
import statistics
import sys
import time

from dolsot.inprocess import InProcessSession


def _on_alarm(signum, frame):  # pragma: no cover - never fires in the bench
    raise TimeoutError("cell timed out")


class PythonRepl:
    """The peer: the usual Python-level REPL step."""

    def __init__(self, timeout: float) -> None:
        self.namespace: dict = {}
        self.timeout = timeout
        signal.signal(signal.SIGALRM, _on_alarm)

    def step(self, code: str):
        tree = ast.parse(code, "<cell>", "exec")
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        out = io.StringIO()
        signal.setitimer(signal.ITIMER_REAL, self.timeout)
        try:
            with contextlib.redirect_stdout(out):
                exec(compile(tree, "<cell>", "exec"), self.namespace)
                value = eval(compile(last, "<cell>", "eval"), self.namespace) if last else None
                text = None if value is None else repr(value)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        return text, out.getvalue()


def per_cell_us(fn, code: str, cells: int, gap: float = 0.0) -> float:
    if gap <= 0:
        start = time.perf_counter()
        for _ in range(cells):
            fn(code)
        return (time.perf_counter() - start) / cells * 1e6
    total = 0.0  # cells `gap` seconds apart (an agent thinking): each timed alone
    for _ in range(cells):
        time.sleep(gap)
        start = time.perf_counter()
        fn(code)
        total += time.perf_counter() - start
    return total / cells * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", type=int, default=15)
    parser.add_argument("--cells", type=int, default=2000)
    parser.add_argument("--code", default="1 + 1")
    parser.add_argument("--repl", action="store_true", help="also measure Repl")
    parser.add_argument("--gated", action="store_true",
                        help="also measure a session with the AST gate (and its runtime half)")
    parser.add_argument("--gap-ms", type=float, default=0.0,
                        help="idle time between cells (each cell then timed alone)")
    args = parser.parse_args()

    repl = PythonRepl(timeout=20.0)
    session = InProcessSession(timeout=20.0)
    run = lambda code: session.run("bench", code)  # noqa: E731
    assert repl.step(args.code)[0] == run(args.code).value
    other = None
    if args.repl:
        from dolsot.repl import Repl
        from dolsot.store import MemoryStore

        other = Repl(store=MemoryStore(), snapshots=False, checkpoint="off", typecheck=False)
        run_repl = lambda code: other.run("bench", code)  # noqa: E731
        assert run_repl(args.code).value == run(args.code).value
    gated_session = None
    if args.gated:
        from dolsot.sandbox import AstGate, Policy

        gated_session = InProcessSession(timeout=20.0, gate=AstGate(Policy()), typecheck=False)
        run_gated = lambda code: gated_session.run("bench", code)  # noqa: E731
        assert run_gated(args.code).value == run(args.code).value
    peer, ours, theirs, gated = [], [], [], []
    for _ in range(args.batches):  # interleaved, so load changes hit all alike
        gap = args.gap_ms / 1000
        peer.append(per_cell_us(repl.step, args.code, args.cells, gap))
        ours.append(per_cell_us(run, args.code, args.cells, gap))
        if gated_session is not None:
            gated.append(per_cell_us(run_gated, args.code, args.cells, gap))
        if other is not None:
            theirs.append(per_cell_us(run_repl, args.code, max(1, args.cells // 10), gap))
    session.close()
    if gated_session is not None:
        gated_session.close()
    if other is not None:
        other.close()
    p, o = statistics.median(peer), statistics.median(ours)
    print(f"python {sys.version.split()[0]}, cell {args.code!r}, "
          f"{args.batches} batches x {args.cells} cells"
          + (f", {args.gap_ms:g} ms apart" if args.gap_ms > 0 else ""))
    print(f"python-level REPL step : median {p:8.2f} us/cell")
    print(f"InProcessSession.run   : median {o:8.2f} us/cell")
    print(f"ratio (ours / peer)    : {o / p:.2f}x")
    if gated:
        g = statistics.median(gated)
        print(f"gated (AstGate) .run   : median {g:8.2f} us/cell ({g / p:.2f}x the peer, "
              f"+{g - o:.2f} us over ungated)")
    if theirs:
        t = statistics.median(theirs)
        print(f"Repl.run (no snapshots): median {t:8.2f} us/cell ({t / o:.1f}x InProcessSession)")


if __name__ == "__main__":
    main()
