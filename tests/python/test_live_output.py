"""Live output (issue #40), one suite over every backend (conftest.py's
`backend`): run(..., on_output=, on_image=) sees what a cell writes while it
runs, in order with its tool calls and figures; a timeout or a crash still
delivers what came before; a callback that raises or is slow costs the cell
nothing; max_output bounds the stream as it bounds the Result; astream and
arun take the same."""

from __future__ import annotations

import asyncio
import logging
import threading
import time

import pytest

import dolsot

pytestmark = pytest.mark.timeout(60)


class Recorder:
    """on_output/on_image that record, in order, what they saw and on which thread."""

    def __init__(self):
        self.events: list[tuple[str, object]] = []
        self.threads: set[int] = set()
        self.lock = threading.Lock()

    def output(self, text):
        with self.lock:
            self.threads.add(threading.get_ident())
            self.events.append(("out", text))

    def image(self, png):
        with self.lock:
            self.threads.add(threading.get_ident())
            self.events.append(("image", png))

    def note(self, what):
        with self.lock:
            self.events.append((what, None))

    def text(self):
        return "".join(value for kind, value in self.events if kind == "out")

    def merged(self):
        """Consecutive text joined into one event (chunks may merge or split)."""
        out: list[tuple[str, object]] = []
        for kind, value in self.events:
            if kind == "out" and out and out[-1][0] == "out":
                out[-1] = ("out", out[-1][1] + value)
            else:
                out.append((kind, value))
        return out


def test_a_chunk_arrives_while_the_cell_still_runs(backend):
    # The cell prints, then loops for ever; only the callback, once it has
    # seen the first chunk, ends it (interrupt). So the chunk came while the
    # cell ran, or the run would end at its timeout instead.
    seen = Recorder()
    ended_by = []

    def on_output(text):
        seen.output(text)
        if "first" in seen.text() and not ended_by:
            ended_by.append("interrupt")
            backend.interrupt("live")

    r = backend.run("live", "print('first', flush=True)\nwhile True:\n    pass",
                    on_output=on_output, timeout=30)
    assert ended_by == ["interrupt"]
    assert (r.ok, r.exit_code) == (False, 130)
    assert seen.text().startswith("first")  # its "\n" may come after run() returned
    assert "first" in r.stdout
    assert threading.get_ident() not in seen.threads


def test_output_past_the_first_64_kib_still_arrives_while_the_cell_runs(backend):
    # A Repl's session process batches a cell's output past its first 64 KiB:
    # a batch the cell leaves waiting must still go out while the cell runs.
    # (~83,000 characters: past 64 KiB, within the default max_output.)
    seen = Recorder()
    ended_by = []

    def on_output(text):
        seen.output(text)
        if "marker" in seen.text() and not ended_by:
            ended_by.append("interrupt")
            backend.interrupt("late")

    r = backend.run("late", "for i in range(7000):\n    print('filler', i)\n"
                            "print('marker')\nwhile True:\n    pass",
                    on_output=on_output, timeout=30)
    assert ended_by == ["interrupt"]
    assert r.exit_code == 130


def test_result_is_unchanged_and_every_chunk_comes_before_run_returns(backend):
    seen = Recorder()
    code = "import sys\nfor i in range(200):\n    print(i)\nsys.stderr.write('err\\n')\n'v'"
    r = backend.run("c", code, on_output=seen.output)
    plain = backend.run("d", code)
    assert seen.text() == r.stdout == plain.stdout
    assert (r.ok, r.value, r.held) == (plain.ok, plain.value, plain.held)


def test_order_across_stdout_stderr_and_tool_calls(backend):
    seen = Recorder()
    backend.tools = {"note": lambda: seen.note("tool")}
    r = backend.run("c", "import sys\nprint('a')\nsys.stderr.write('b\\n')\nnote()\n"
                         "print('c')\nnote()\nsys.stderr.write('d\\n')",
                    on_output=seen.output)
    assert r.ok, r.error
    assert seen.merged() == [("out", "a\nb\n"), ("tool", None), ("out", "c\n"), ("tool", None),
                             ("out", "d\n")]


def test_order_with_tool_calls_holds_past_the_first_64_kib(backend):
    seen = Recorder()
    backend.tools = {"note": lambda: seen.note("tool")}
    r = backend.run("c", "for i in range(7000):\n    print('filler', i)\n"
                         "print('a')\nnote()\nprint('c')", on_output=seen.output)
    assert r.ok, r.error
    merged = seen.merged()
    assert [kind for kind, _ in merged] == ["out", "tool", "out"]
    assert merged[0][1].endswith("filler 6999\na\n") and merged[2][1] == "c\n"


def test_figures_come_as_shown_in_order_with_the_text(backend):
    pytest.importorskip("matplotlib")
    seen = Recorder()
    r = backend.run("c", "import matplotlib.pyplot as plt\nprint('before')\n"
                         "plt.plot([1, 2, 3]); plt.show()\nprint('after')",
                    on_output=seen.output, on_image=seen.image)
    assert r.ok, r.error
    merged = seen.merged()
    assert [kind for kind, _ in merged] == ["out", "image", "out"]
    assert merged[0][1] == "before\n" and merged[2][1] == "after\n"
    assert merged[1][1] == r.images[0] and merged[1][1].startswith(b"\x89PNG")


def test_a_timeout_still_delivers_what_came_before(backend):
    seen = Recorder()
    r = backend.run("t", "print('started', flush=True)\nwhile True:\n    pass", timeout=0.5,
                    on_output=seen.output)
    assert r.exit_code == 124
    assert seen.text() == "started\n"


def test_a_crash_still_delivers_what_came_before(backend):
    if not backend.capabilities.crash_survival:
        pytest.skip("a crashing cell takes an in-process host down")
    seen = Recorder()
    r = backend.run("x", "import os\nprint('before the crash', flush=True)\nos._exit(3)",
                    on_output=seen.output)
    assert not r.ok
    assert seen.text() == "before the crash\n"


def test_a_raising_callback_is_logged_once_and_the_cell_goes_on(backend, caplog):
    calls = []

    def on_output(text):
        calls.append(text)
        raise ValueError("callback bug")

    with caplog.at_level(logging.ERROR, logger="dolsot"):
        r = backend.run("c", "import time\nfor i in range(3):\n    print(i, flush=True)\n"
                             "    time.sleep(0.02)\n'done'", on_output=on_output)
    assert (r.ok, r.value, r.stdout) == (True, "'done'", "0\n1\n2\n")
    assert "".join(calls) == "0\n1\n2\n"
    records = [rec for rec in caplog.records if rec.name == "dolsot"]
    assert len(records) == 1
    assert "on_output raised" in records[0].getMessage()
    assert records[0].exc_info[0] is ValueError


def test_a_slow_callback_does_not_hold_the_cell_back(backend):
    # Each call takes 50 ms; the cell writes 2000 flushed lines. Called once
    # per line that would be 100 s (past the test's timeout): the queue merges
    # what waits, so it is called a few times with everything, in order.
    calls = []

    def slow(text):
        calls.append(text)
        time.sleep(0.05)  # the slowness under test, not a synchronisation

    r = backend.run("c", "for i in range(2000):\n    print(i, flush=True)", on_output=slow)
    assert r.ok
    assert "".join(calls) == r.stdout == "".join(f"{i}\n" for i in range(2000))
    assert len(calls) < 200


def test_max_output_bounds_the_stream_then_one_notice(backend):
    seen = Recorder()
    r = backend.run("c", "for i in range(30):\n    print('x' * 9999)", on_output=seen.output)
    cap = 100_000  # the default max_output
    text = seen.text()
    assert text[:cap] == ("x" * 9999 + "\n") * 10
    notice = text[cap:]
    assert "output past 100000 characters is not streamed" in notice
    assert "x" not in notice.replace("exactly", "")
    assert "characters cut" in r.stdout  # the Result keeps head and tail, as always


def test_bad_callbacks_are_refused_naming_the_argument(backend):
    with pytest.raises(TypeError, match="'on_output' must be a callable or None, not int"):
        backend.run("c", "1", on_output=3)
    with pytest.raises(TypeError, match="'on_image' must be a callable or None, not str"):
        backend.run("c", "1", on_image="png")


def test_arun_takes_on_output(backend):
    seen = Recorder()
    r = asyncio.run(backend.arun("c", "print('async')", on_output=seen.output))
    assert r.ok and seen.text() == "async\n"


def test_astream_yields_chunks_then_the_result_last(backend):
    async def collect():
        return [item async for item in backend.astream("c", "for i in range(3):\n"
                                                             "    print(i, flush=True)\n42")]

    items = asyncio.run(collect())
    *chunks, result = items
    assert all(isinstance(chunk, str) for chunk in chunks)
    assert "".join(chunks) == "0\n1\n2\n"
    assert isinstance(result, dolsot.Result) and result.value == "42"


def test_leaving_astream_early_interrupts_the_cell(backend):
    async def first_chunk_only():
        stream = backend.astream("s", "print('go', flush=True)\nwhile True:\n    pass",
                                 timeout=30)
        first = await stream.__anext__()
        await stream.aclose()
        return first

    assert asyncio.run(first_chunk_only()) in ("go", "go\n")  # print writes "go", then "\n"
    assert backend.run("s", "1 + 1").value == "2"


def _doc_blocks():
    """(line, body) of docs/live-output.md's python blocks."""
    import pathlib
    import re

    doc = pathlib.Path(__file__).resolve().parents[2] / "docs" / "live-output.md"
    blocks, lines, i = [], doc.read_text().splitlines(), 0
    while i < len(lines):
        if re.fullmatch(r"```python", lines[i].strip()):
            start, body = i + 1, []
            i += 1
            while lines[i].strip() != "```":
                body.append(lines[i])
                i += 1
            blocks.append((start, "\n".join(body) + "\n"))
        i += 1
    return blocks


@pytest.mark.parametrize("line, body", _doc_blocks(),
                         ids=[f"live-output.md:{b[0]}" for b in _doc_blocks()])
def test_the_docs_blocks_run_as_written(tmp_path, line, body):
    import subprocess
    import sys

    script = tmp_path / "block.py"
    script.write_text(body)
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert proc.stdout.strip(), "each block prints what it shows"
