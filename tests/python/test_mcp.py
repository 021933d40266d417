"""`dolsot mcp` end to end, driven by the official MCP SDK's own client
(`mcp.client.stdio.stdio_client` + `ClientSession`) over stdio, plus raw
pipes where the SDK would never send what is tested (malformed lines) or
where the test needs the process itself (stdin closed, SIGTERM).

The binary is found as in test_cli.py ($DOLSOT_CLI, the installed `dolsot`,
or the build tree's). Each test gets its own DOLSOT_CACHE_DIR.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import pathlib
import signal
import subprocess
import textwrap
import time

import anyio
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from host_files import make_host_files
from process_tree import alive, descendants, wait_until_gone
from test_cli import CLI, TOOLBOX

pytestmark = [pytest.mark.timeout(120)]


@pytest.fixture(autouse=True)
def _cli_is_built():
    if CLI is None:
        pytest.fail("the dolsot CLI was not found: set DOLSOT_CLI or DOLSOT_BUILD_DIR, "
                    "or pip install the package", pytrace=False)


class Server:
    """How to start `dolsot mcp`: a private cache dir, a toolbox directory as
    the working directory, the server's stderr in a file."""

    def __init__(self, tmp_path: pathlib.Path):
        self.tmp = tmp_path
        self.cache_dir = tmp_path / "cache"
        self.toolbox_dir = tmp_path / "toolboxes"
        self.toolbox_dir.mkdir()
        (self.toolbox_dir / "mytools.py").write_text(TOOLBOX)
        self.stderr_path = tmp_path / "server-stderr.txt"
        self.env = {"DOLSOT_CACHE_DIR": str(self.cache_dir), "DOLSOT_TYPECHECK": "0"}

    def full_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("DOLSOT_")}
        env.pop("PYTHONPATH", None)
        return {**env, **self.env}

    @contextlib.asynccontextmanager
    async def session(self, *args: str):
        params = StdioServerParameters(command=str(CLI), args=["mcp", *args], env=self.env,
                                       cwd=str(self.toolbox_dir))
        with open(self.stderr_path, "a") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    self.initialized = await session.initialize()
                    yield session

    def popen(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen([str(CLI), "mcp", *args], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=open(self.stderr_path, "ab"),
                                env=self.full_env(), cwd=self.toolbox_dir)


@pytest.fixture
def server(tmp_path):
    return Server(tmp_path)


def run_async(coroutine):
    return asyncio.run(coroutine)


def text_of(result) -> str:
    return result.content[0].text


def wait_for_file(path: pathlib.Path, seconds: float = 30.0) -> None:
    """A bounded poll for a file a cell writes (the cell's own signal)."""
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.01)


async def await_file(path: pathlib.Path, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        await anyio.sleep(0.01)


# --- the SDK's client ----------------------------------------------------------

def test_initialize_and_the_tools_with_their_schemas(server):
    async def main():
        async with server.session("--toolbox", "mytools:mt") as session:
            assert server.initialized.server_info.name == "dolsot"
            # The client offers its newest handshake revision; dolsot speaks it.
            assert server.initialized.protocol_version == "2025-11-25"
            assert server.initialized.capabilities.tools is not None
            return (await session.list_tools()).tools

    tools = {tool.name: tool for tool in run_async(main())}
    assert set(tools) == {"run", "sessions", "reset"}
    run = tools["run"]
    assert run.input_schema["required"] == ["session", "code"]
    assert set(run.input_schema["properties"]) == {"session", "code", "timeout"}
    assert run.input_schema["additionalProperties"] is False
    assert set(run.output_schema["required"]) == {
        "ok", "value", "stdout", "error", "exit_code", "outcome", "error_type", "held",
        "dropped", "save_error", "text", "images"}
    assert "mt (module mytools)" in run.description
    assert tools["reset"].input_schema["required"] == ["session"]
    assert tools["sessions"].output_schema["required"] == ["sessions"]
    assert tools["sessions"].annotations.read_only_hint is True


def test_the_sdks_high_level_client_falls_back_to_initialize(server):
    # mcp.Client's default mode probes server/discover (the 2026 stateless
    # revision), which dolsot does not offer (-32601); the client then
    # negotiates with initialize, as it does with every handshake-era server.
    from mcp import Client

    params = StdioServerParameters(command=str(CLI), args=["mcp"], env=server.env,
                                   cwd=str(server.toolbox_dir))

    async def main():
        async with Client(params) as client:
            result = await client.call_tool("run", {"session": "auto", "code": "3 * 3"})
            return client.protocol_version, result

    version, result = run_async(main())
    assert version == "2025-11-25"
    assert result.structured_content["value"] == "9"


def test_state_is_kept_across_run_calls(server):
    async def main():
        async with server.session() as session:
            first = await session.call_tool("run", {"session": "work", "code": "x = 21"})
            second = await session.call_tool("run", {"session": "work",
                                                     "code": "print('doubling')\nx * 2"})
            listed = await session.call_tool("sessions", {})
            return first, second, listed

    first, second, listed = run_async(main())
    assert first.is_error is False
    assert first.structured_content["held"] == ["x"]
    assert second.is_error is False
    assert second.structured_content["value"] == "42"
    assert second.structured_content["stdout"] == "doubling\n"
    assert second.structured_content["outcome"] == "ok"
    assert text_of(second) == second.structured_content["text"]
    assert "doubling\n42" in text_of(second)
    assert [s["id"] for s in listed.structured_content["sessions"]] == ["work"]


def test_a_timeout_is_124_and_the_session_is_rolled_back(server):
    async def main():
        async with server.session() as session:
            await session.call_tool("run", {"session": "s", "code": "x = 1"})
            killed = await session.call_tool(
                "run", {"session": "s", "code": "x = 2\nwhile True: pass", "timeout": 1})
            after = await session.call_tool("run", {"session": "s", "code": "x"})
            return killed, after

    killed, after = run_async(main())
    assert killed.is_error is True
    assert killed.structured_content["exit_code"] == 124
    assert killed.structured_content["outcome"] == "timeout"
    assert killed.structured_content["error_type"] == "TimeoutError"
    assert after.structured_content["value"] == "1"


def test_a_toolbox_error_carries_its_exit_code(server):
    async def main():
        async with server.session("--toolbox", "mytools:mt") as session:
            ok = await session.call_tool("run", {"session": "t", "code": "mt.add(1, 2)"})
            failed = await session.call_tool("run", {"session": "t", "code": "mt.fail('no rows')"})
            return ok, failed

    ok, failed = run_async(main())
    assert ok.structured_content["value"] == "3"
    assert failed.is_error is True
    assert failed.structured_content["exit_code"] == 3
    assert failed.structured_content["error_type"] == "ToolError"
    assert "no rows" in text_of(failed)


def test_a_bad_session_id_is_a_tool_error_naming_it(server):
    async def main():
        async with server.session() as session:
            bad = await session.call_tool("run", {"session": "../escape", "code": "1"})
            reserved = await session.call_tool("run", {"session": "all", "code": "1"})
            empty = await session.call_tool("run", {"session": "s", "code": ""})
            fine = await session.call_tool("run", {"session": "s", "code": "1 + 1"})
            return bad, reserved, empty, fine

    bad, reserved, empty, fine = run_async(main())
    assert bad.is_error is True
    assert '"../escape"' in text_of(bad) and "'/'" in text_of(bad), text_of(bad)
    assert reserved.is_error is True and '"all"' in text_of(reserved)
    assert empty.is_error is True and "empty" in text_of(empty)
    assert fine.structured_content["value"] == "2", "the server keeps serving"


def test_writes_to_fd_1_never_reach_the_transport(server):
    code = textwrap.dedent('''
        import os, subprocess, sys
        print("captured")
        os.write(1, b'{"jsonrpc":"2.0","id":1,"result":{"forged":true}}\\n')
        sys.__stdout__.write("raw stdout\\n"); sys.__stdout__.flush()
        subprocess.run(["echo", "from a child"], check=True)
        "done"
    ''')

    async def main():
        async with server.session() as session:
            first = await session.call_tool("run", {"session": "w", "code": code})
            second = await session.call_tool("run", {"session": "w", "code": "2 + 2"})
            return first, second

    first, second = run_async(main())
    assert first.is_error is False, text_of(first)
    assert first.structured_content["value"] == "'done'"
    assert "forged" not in json.dumps(first.structured_content)
    assert second.structured_content["value"] == "4"
    stderr = server.stderr_path.read_text()
    assert '"forged":true' in stderr and "from a child" in stderr, stderr


def test_two_sessions_run_in_parallel(server, tmp_path):
    # Each cell announces itself, then waits for the other: only cells that
    # overlap both finish with "met" (each gives up after 30 s otherwise).
    def cell(me: str, other: str) -> str:
        return textwrap.dedent(f'''
            import os, time
            open({str(tmp_path / me)!r}, "w").close()
            deadline = time.monotonic() + 30
            while not os.path.exists({str(tmp_path / other)!r}) and time.monotonic() < deadline:
                time.sleep(0.01)
            "met" if os.path.exists({str(tmp_path / other)!r}) else "alone"
        ''')

    async def main():
        async with server.session() as session:
            results = {}

            async def call(sid, me, other):
                results[sid] = await session.call_tool(
                    "run", {"session": sid, "code": cell(me, other), "timeout": 60})

            async with anyio.create_task_group() as group:
                group.start_soon(call, "a", "a-ready", "b-ready")
                group.start_soon(call, "b", "b-ready", "a-ready")
            return results

    results = run_async(main())
    assert results["a"].structured_content["value"] == "'met'", text_of(results["a"])
    assert results["b"].structured_content["value"] == "'met'", text_of(results["b"])


def test_cancellation_interrupts_the_cell_and_rolls_it_back(server, tmp_path):
    marker = tmp_path / "started"
    code = f"z = 1\nopen({str(marker)!r}, 'w').close()\nwhile True: pass"

    async def main():
        async with server.session() as session:
            await session.call_tool("run", {"session": "c", "code": "y = 0"})
            async with anyio.create_task_group() as group:
                async def long_call():
                    await session.call_tool("run", {"session": "c", "code": code, "timeout": 600})
                group.start_soon(long_call)
                await await_file(marker)
                # Cancelling the caller makes the SDK send notifications/cancelled.
                group.cancel_scope.cancel()
            # Served only once the cancelled cell is gone (one session's cells
            # run in order): a cell still looping would hold it for 600 s.
            return await session.call_tool("run", {"session": "c", "code": "sorted(globals())"})

    after = run_async(main())
    assert after.is_error is False, text_of(after)
    names = after.structured_content["value"]
    assert "'y'" in names and "'z'" not in names, names


def test_a_restarted_server_restores_the_session(server):
    async def first():
        async with server.session() as session:
            return await session.call_tool("run", {"session": "keep",
                                                   "code": "import math\nr = math.pi"})

    async def second():
        async with server.session() as session:
            return await session.call_tool("run", {"session": "keep", "code": "round(r, 2)"})

    assert run_async(first()).is_error is False
    restored = run_async(second())
    assert restored.structured_content["value"] == "3.14", text_of(restored)


def test_with_sync_checkpoints_a_killed_server_loses_nothing_it_answered(server):
    # --checkpoint sync: each cell's state is on disk before its answer, so
    # even SIGKILL right after the answer costs nothing (async, the default,
    # flushes at a clean stop instead).
    proc = server.popen("--checkpoint", "sync")
    try:
        initialize(proc)
        send(proc, {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                    "params": {"name": "run", "arguments": {"session": "d", "code": "kept = 41 + 1"}}})
        assert receive(proc)["result"]["isError"] is False
        tree = descendants(proc.pid, every_thread=True)
        proc.kill()
        proc.wait()
        for pid in tree:  # the worker and the session's processes follow the host
            wait_until_gone(pid)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    async def restarted():
        async with server.session() as session:
            return await session.call_tool("run", {"session": "d", "code": "kept"})

    result = run_async(restarted())
    assert result.structured_content["value"] == "42", text_of(result)


def test_figures_come_back_as_image_blocks(server):
    pytest.importorskip("matplotlib")
    code = "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()"

    async def main():
        async with server.session() as session:
            return await session.call_tool("run", {"session": "fig", "code": code, "timeout": 60})

    result = run_async(main())
    assert result.is_error is False, text_of(result)
    images = [block for block in result.content if block.type == "image"]
    assert len(images) == 1 and result.structured_content["images"] == 1
    assert images[0].mime_type == "image/png"
    assert base64.b64decode(images[0].data).startswith(b"\x89PNG\r\n\x1a\n")


# --- raw pipes ------------------------------------------------------------------

def send(proc: subprocess.Popen, message) -> None:
    line = message if isinstance(message, bytes) else json.dumps(message).encode()
    proc.stdin.write(line + b"\n")
    proc.stdin.flush()


def receive(proc: subprocess.Popen) -> dict:
    line = proc.stdout.readline()
    assert line, "the server closed stdout"
    return json.loads(line)


def initialize(proc: subprocess.Popen) -> None:
    send(proc, {"jsonrpc": "2.0", "id": 0, "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                           "clientInfo": {"name": "raw", "version": "0"}}})
    assert receive(proc)["result"]["protocolVersion"] == "2025-06-18"


def test_bad_input_is_answered_and_the_server_keeps_serving(server):
    proc = server.popen()
    try:
        initialize(proc)
        send(proc, b"this is not json")
        reply = receive(proc)
        assert (reply["id"], reply["error"]["code"]) == (None, -32700)
        send(proc, b'{"jsonrpc":"2.0","id":1,"method":"p\xff"}')
        reply = receive(proc)
        assert reply["error"]["code"] == -32700 and "UTF-8" in reply["error"]["message"]
        # 9 MiB in one line, past the 8 MiB a message may have: refused, skipped.
        send(proc, b'{"jsonrpc":"2.0","id":9,"method":"ping","params":{"x":"' + b"a" * (9 << 20)
             + b'"}}')
        reply = receive(proc)
        assert reply["error"]["code"] == -32600 and "longer than" in reply["error"]["message"]
        send(proc, {"jsonrpc": "2.0", "id": 2, "method": "resources/list"})
        reply = receive(proc)
        assert (reply["id"], reply["error"]["code"]) == (2, -32601)
        send(proc, {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "nope"}})
        reply = receive(proc)
        assert (reply["id"], reply["error"]["code"]) == (3, -32602)
        assert "nope" in reply["error"]["message"]
        send(proc, {"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                    "params": {"name": "run", "arguments": {"session": "s", "code": "6 * 7"}}})
        reply = receive(proc)
        assert reply["id"] == 4 and reply["result"]["structuredContent"]["value"] == "42"
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("how", ["eof", "sigterm"])
def test_stdin_closed_or_sigterm_stops_cells_and_leaves_no_process(server, tmp_path, how):
    pid_file = tmp_path / "sleep.pid"
    code = ("import subprocess\n"
            "p = subprocess.Popen(['sleep', '600'], start_new_session=True)\n"
            f"open({str(pid_file) + '.tmp'!r}, 'w').write(str(p.pid))\n"
            f"import os; os.rename({str(pid_file) + '.tmp'!r}, {str(pid_file)!r})\n"
            "while True: pass")
    proc = server.popen()
    try:
        initialize(proc)
        send(proc, {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                    "params": {"name": "run",
                               "arguments": {"session": "busy", "code": code, "timeout": 600}}})
        wait_for_file(pid_file)
        tree = descendants(proc.pid, every_thread=True)
        sleeper = int(pid_file.read_text())
        assert sleeper in tree and len(tree) >= 3, tree  # worker, session process(es), sleep
        if how == "eof":
            proc.stdin.close()
        else:
            proc.send_signal(signal.SIGTERM)
        # The running cell is interrupted and answered, then the server exits.
        reply = receive(proc)
        assert reply["id"] == 1
        assert reply["result"]["structuredContent"]["exit_code"] == 130
        assert proc.wait(timeout=30) == 0
        for pid in tree:
            assert not alive(pid), (pid, tree)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_bad_flags_are_refused_before_serving(server):
    for args, phrase in [(["--timeout", "0"], "--timeout"),
                         (["--toolbox", "nocolon"], "nocolon"),
                         (["--max-text", "-1"], "--max-text"),
                         (["--checkpoint", "never"], "--checkpoint")]:
        proc = subprocess.run([str(CLI), "mcp", *args], input=b"", capture_output=True,
                              env=server.full_env(), cwd=server.toolbox_dir, timeout=30)
        assert proc.returncode == 2, (args, proc.stderr)
        assert proc.stdout == b""
        assert proc.stderr.decode().startswith("dolsot: error: ") and phrase in proc.stderr.decode()


INITIALIZE_LINE = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                         "clientInfo": {"name": "raw", "version": "0"}}}) + "\n"


@pytest.mark.parametrize("module, source, why", [
    ("no_such_module_xyz", None, "No module named 'no_such_module_xyz'"),
    ("broken_tools", "raise RuntimeError('broken on import')\n", "RuntimeError: broken on import"),
    ("exiting_tools", "import os\nos._exit(7)\n", "exited with status 7"),
])
def test_a_toolbox_that_does_not_import_is_refused_at_start(server, module, source, why):
    # #41 §4: once, `initialize` was answered and then every `run` failed.
    # Now nothing is served: exit 2 with the import error, before any answer,
    # even with an `initialize` already waiting on stdin.
    if source is not None:
        (server.toolbox_dir / f"{module}.py").write_text(source)
    proc = subprocess.run([str(CLI), "mcp", "--toolbox", "mytools:mt", "--toolbox", f"{module}:bad"],
                          input=INITIALIZE_LINE.encode(), capture_output=True,
                          env=server.full_env(), cwd=server.toolbox_dir, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == b""  # no answer to initialize
    stderr = proc.stderr.decode()
    assert stderr.startswith("dolsot: error: "), stderr
    assert "toolbox 'bad'" in stderr and why in stderr, stderr


def test_a_toolbox_that_imports_is_served_as_before(server):
    # The control: the same start with a toolbox that imports answers
    # initialize and runs with it.
    proc = server.popen("--toolbox", "mytools:mt")
    try:
        initialize(proc)
        send(proc, {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                    "params": {"name": "run", "arguments": {"session": "s", "code": "mt.add(2, 3)"}}})
        answer = receive(proc)
        assert answer["result"]["structuredContent"]["value"] == "5", answer
    finally:
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0


# --- --sandbox -------------------------------------------------------------------

def test_sandbox_flags_wall_the_cells_and_a_mount_shows_its_directory(server, tmp_path):
    # The run command's --sandbox, --mount and --memory, parsed by the same
    # code: a host file outside the mounts is not there for a cell, a mounted
    # one is, and the network is gone.
    files = make_host_files(tmp_path)
    secret, data = files["secret"], files["data"]

    async def main():
        async with server.session("--sandbox", "--mount", f"/data={data}",
                                  "--memory", "1024") as session:
            hidden = await session.call_tool(
                "run", {"session": "s", "code": f"open({str(secret)!r}).read()"})
            shown = await session.call_tool(
                "run", {"session": "s", "code": "open('/data/hello.txt').read()"})
            net = await session.call_tool(
                "run", {"session": "s", "code":
                        "import socket\ntry:\n    socket.create_connection(('127.0.0.1', 9), 2)\n"
                        "    'connected'\nexcept OSError as e:\n    type(e).__name__"})
            readonly = await session.call_tool(
                "run", {"session": "s", "code": "open('/data/new.txt', 'w')"})
            return hidden, shown, net, readonly

    hidden, shown, net, readonly = run_async(main())
    assert hidden.is_error is True
    assert "FileNotFoundError" in text_of(hidden), text_of(hidden)
    assert "host secret" not in text_of(hidden)
    assert shown.is_error is False, text_of(shown)
    assert shown.structured_content["value"] == repr("hello from the host\n")
    assert net.is_error is False and net.structured_content["value"] != "'connected'"
    assert readonly.is_error is True and "Read-only file system" in text_of(readonly)
    assert not (data / "new.txt").exists()


def test_without_sandbox_the_same_read_works(server, tmp_path):
    # The control: the file the sandboxed server cannot see is there.
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret\n")

    async def main():
        async with server.session() as session:
            return await session.call_tool(
                "run", {"session": "s", "code": f"open({str(secret)!r}).read()"})

    result = run_async(main())
    assert result.is_error is False and "host secret" in result.structured_content["value"]


def test_bad_sandbox_flags_are_refused_like_the_clis(server):
    for args, phrase in [(["--mount", "/x=/tmp"], "need --sandbox"),
                         (["--sandbox", "--mount", "relative=/tmp"], "absolute"),
                         (["--sandbox", "--mount", "/x=/tmp:bogus"], "mode must be"),
                         (["--sandbox", "--check"], "--check")]:
        proc = subprocess.run([str(CLI), "mcp", *args], input=b"", capture_output=True,
                              env=server.full_env(), cwd=server.toolbox_dir, timeout=30)
        assert proc.returncode == 2, (args, proc.stderr)
        assert proc.stdout == b""
        assert phrase in proc.stderr.decode(), (args, proc.stderr)
