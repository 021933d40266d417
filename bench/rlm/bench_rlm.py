"""RLM loop benchmark: one dspy.RLM forward pass of 10 scripted iterations
(DummyLM) on each CodeInterpreter, medians and same-run ratios.

Run: python bench/rlm/bench_rlm.py [--repeats 15] [--write docs/bench/rlm.md]
with the venv that has dolsot[dspy]; the peers of requirements/bench.txt
(dspy-monty-interpreter) are pip-installed into it when missing. Peers:
dolsot's Repl and InProcessSession, MontyInterpreter, dspy's LocalInterpreter
(a CPython subprocess) and dspy's PythonInterpreter (Deno + Pyodide; measured
only when it starts). A null interpreter (canned outputs, no code run) gives
the floor: RLM's and DummyLM's own cost, which every row includes.
Configurations are interleaved in rounds so background load hits them alike.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def ensure_peers() -> None:
    if importlib.util.find_spec("dspy_monty_interpreter") is None:
        requirements = os.path.join(ROOT, "requirements", "bench.txt")
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-r", requirements], check=True)


ensure_peers()

import dspy  # noqa: E402
from dspy.primitives.code_interpreter import FinalOutput  # noqa: E402
from dspy.utils import DummyLM  # noqa: E402

from dolsot.dspy import DolsotInterpreter  # noqa: E402

# Plain Python every interpreter here runs (Monty takes a subset): data
# exploration, a user tool, llm_query, an error the model recovers from, SUBMIT.
STEPS = [
    "print(len(context))",
    "words = context.split()\nprint(len(words))",
    "hits = [w for w in words if w.startswith('a')]\nprint(len(hits))",
    "v = lookup(key='alpha')\nprint(v)",
    "s = llm_query(prompt='summarise ' + context[:50])\nprint(s[:20])",
    "counts = {}\nfor w in words:\n    counts[w] = counts.get(w, 0) + 1\nprint(len(counts))",
    "top = sorted(counts.items(), key=lambda kv: -kv[1])[:3]\nprint(top)",
    "print(undefined_name)",
    "total = sum(len(w) for w in words)\nprint(total)",
    "SUBMIT(answer=str(total))",
]
SCRIPT = [{"reasoning": f"step {i}", "code": code} for i, code in enumerate(STEPS, start=1)]
VOCABULARY = ["alpha", "beta", "gamma", "delta", "apple", "river", "stone", "amber", "cloud", "night"]


def lookup(key: str) -> str:
    """Looks a key up in the host's table."""
    return key.upper()


def make_context(size: int) -> str:
    words, length, i = [], 0, 0
    while length < size:
        word = VOCABULARY[(i * 7 + i // 3) % len(VOCABULARY)]
        words.append(word)
        length += len(word) + 1
        i += 1
    return " ".join(words)


class NullInterpreter:
    """Runs nothing: canned outputs, SUBMIT on the last step (the floor)."""

    execution_instructions = ""

    def __init__(self):
        self.tools, self.output_fields, self.calls = {}, None, 0

    def start(self):
        pass

    def execute(self, code, variables=None):
        if "__dspy" in code or "_dspy" in code:
            return None  # the facade's set-up
        self.calls += 1
        return FinalOutput({"answer": "0"}) if code.startswith("SUBMIT") else "ok"

    def shutdown(self):
        pass


def factories():
    from dspy_monty_interpreter import MontyInterpreter

    out = {
        "null (RLM + DummyLM only)": NullInterpreter,
        "dolsot Repl": DolsotInterpreter.factory(backend="repl"),
        "dolsot Repl, checkpoint='async'": DolsotInterpreter.factory(backend="repl", checkpoint="async"),
        "dolsot Repl, snapshots=False": DolsotInterpreter.factory(backend="repl", snapshots=False),
        "dolsot InProcessSession": DolsotInterpreter.factory(backend="inprocess"),
        "MontyInterpreter (dspy-monty-interpreter)": MontyInterpreter.factory(),
        "dspy LocalInterpreter": dspy.LocalInterpreter if hasattr(dspy, "LocalInterpreter") else None,
        "dspy PythonInterpreter (Deno/Pyodide)": dspy.PythonInterpreter,
    }
    if out["dspy LocalInterpreter"] is None:
        from dspy.primitives.local_interpreter import LocalInterpreter

        out["dspy LocalInterpreter"] = LocalInterpreter
    return out


class ThinkingLM(DummyLM):
    """DummyLM that takes ``think`` seconds per answer, as a model does."""

    def __init__(self, answers, think: float):
        super().__init__(answers)
        self.think = think

    def forward(self, *args, **kwargs):
        time.sleep(self.think)  # the model's latency, simulated (this is a benchmark, not a test)
        return super().forward(*args, **kwargs)


def one_forward(factory, context: str, think: float = 0.0) -> tuple[float, object]:
    rlm = dspy.RLM("context -> answer", max_iters=10, tools=[lookup], interpreter_factory=factory,
                   sub_lm=DummyLM([{"response": "a short summary"}] * 4))
    lm = ThinkingLM(SCRIPT, think) if think else DummyLM(SCRIPT)
    start = time.perf_counter()
    with dspy.context(lm=lm):
        prediction = rlm(context=context)
    return time.perf_counter() - start, prediction


def check(name: str, prediction, context: str) -> str | None:
    expected = str(sum(len(w) for w in context.split()))
    if name.startswith("null"):
        return None
    outputs = [step["output"] for step in prediction.trajectory]
    if prediction.answer != expected or len(outputs) != len(STEPS):
        return f"wrong run: answer {prediction.answer!r} (want {expected}), {len(outputs)} iterations"
    return None


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--sizes", default="1000,1000000", help="context sizes in characters")
    parser.add_argument("--think-ms", default="0,50", help="the model's simulated latency per iteration")
    parser.add_argument("--write", help="write the markdown table to this file")
    args = parser.parse_args()

    sizes = [int(s) for s in args.sizes.split(",")]
    candidates = factories()
    usable, failed = {}, {}
    small = make_context(sizes[0])
    for name, factory in candidates.items():
        try:
            _, prediction = one_forward(factory, small)  # also warms imports and caches
            problem = check(name, prediction, small)
        except Exception as error:  # noqa: BLE001 - a peer that cannot run is reported
            problem = f"{type(error).__name__}: {str(error).splitlines()[0][:300]}"
        if problem:
            failed[name] = problem
        else:
            usable[name] = factory

    rows = []
    thinks = [float(t) / 1e3 for t in args.think_ms.split(",")]
    for size, think in [(size, think) for think in thinks for size in sizes]:
        context = make_context(size)
        times: dict[str, list[float]] = {name: [] for name in usable}
        for _ in range(args.repeats):
            for name, factory in usable.items():
                elapsed, prediction = one_forward(factory, context, think)
                problem = check(name, prediction, context)
                if problem:
                    raise SystemExit(f"{name}: {problem}")
                times[name].append(elapsed)
        floor = statistics.median(times["null (RLM + DummyLM only)"])
        base = None
        for name in usable:
            median = statistics.median(times[name])
            over = median - floor
            if name == "dolsot Repl":
                base = over
            rows.append([size, think, name, median, over, None])
        for row in rows:
            if row[0] == size and row[1] == think and base and not row[2].startswith("null"):
                row[5] = row[4] / base

    lines = [
        f"python {sys.version.split()[0]}, dspy {dspy.__version__}, {args.repeats} forward passes per row, "
        f"interleaved; load average {os.getloadavg()[0]:.2f}",
        "",
        "| context | model latency | interpreter | forward pass, p50 | over the null floor | vs dolsot Repl |",
        "|---|---|---|---|---|---|",
    ]
    for size, think, name, median, over, ratio in rows:
        ratio_text = "" if ratio is None else f"{ratio:.2f}x"
        over_text = "" if name.startswith("null") else ms(over)
        lines.append(f"| {size:,} chars | {think * 1e3:.0f} ms | {name} | {ms(median)} | {over_text} | {ratio_text} |")
    for name, problem in failed.items():
        lines.append(f"\nNot measured: **{name}**: {problem}")
    text = "\n".join(lines)
    print(text)
    if args.write:
        with open(args.write, "w", encoding="utf-8") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
