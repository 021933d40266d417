"""`dolsot mcp` progress (issue #40): a `run` tools/call that carries a
progressToken gets `notifications/progress` while the cell runs, with the
output so far in `message`, before its result; the server serves other
sessions meanwhile. Driven by the official SDK's client (`progress_callback`)."""

from __future__ import annotations

import anyio
import pytest

from test_mcp import Server, run_async

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def server(tmp_path):
    return Server(tmp_path)


def test_progress_carries_the_output_so_far_while_the_cell_runs(server, tmp_path):
    # The cell prints, then waits for a file only the progress callback
    # creates, once it has seen that output: without progress the cell would
    # run into its timeout.
    release = tmp_path / "release"
    code = (f"import os, time\nprint('first', flush=True)\n"
            f"while not os.path.exists({str(release)!r}):\n    time.sleep(0.01)\n"
            f"print('second')")
    seen: list[tuple[float, str | None]] = []

    async def on_progress(progress, total, message):
        seen.append((progress, message))
        if message and "first" in message:
            release.touch()

    async def main():
        async with server.session() as session:
            return await session.call_tool("run", {"session": "p", "code": code, "timeout": 30},
                                           progress_callback=on_progress)

    result = run_async(main())
    assert result.is_error is False, result
    assert result.structured_content["stdout"] == "first\nsecond\n"
    assert seen and seen[0][1].startswith("first")
    assert "second" not in seen[0][1]
    progress = [value for value, _ in seen]
    assert progress == sorted(set(progress)), "progress increases with every notification"


def test_other_sessions_are_served_while_one_streams(server, tmp_path):
    release = tmp_path / "release"
    code = (f"import os, time\nprint('waiting', flush=True)\n"
            f"while not os.path.exists({str(release)!r}):\n    time.sleep(0.01)\n'done'")

    async def main():
        async with server.session() as session:
            streaming = anyio.Event()
            results = {}

            async def on_progress(progress, total, message):
                streaming.set()

            async def long_call():
                results["long"] = await session.call_tool(
                    "run", {"session": "long", "code": code, "timeout": 30},
                    progress_callback=on_progress)

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(long_call)
                await streaming.wait()
                results["other"] = await session.call_tool("run", {"session": "other",
                                                                   "code": "6 * 7"})
                release.touch()
            return results

    results = run_async(main())
    assert results["other"].structured_content["value"] == "42"
    assert results["long"].structured_content["value"] == "'done'"
