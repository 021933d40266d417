"""`dolsot kernel` (issue 41 §2): a Jupyter kernel whose cells run in a dolsot
session through the CLI, driven here as Jupyter drives it (jupyter_client's
KernelManager and its channels, nbclient for a notebook). Each test has its
own cache directory and server (test_cli.Dolsot), and its own kernelspec,
written by `dolsot kernel install --prefix` into a temporary directory.
"""
from __future__ import annotations

import base64
import json
import os
import pathlib
import re
import subprocess
import sys
import time

import pytest

jupyter_client = pytest.importorskip("jupyter_client")  # the extra dolsot[kernel]
from jupyter_client import KernelManager  # noqa: E402
from jupyter_client.kernelspec import KernelSpecManager  # noqa: E402

from process_tree import descendants  # noqa: E402
from test_cli import CLI, Dolsot, _cli_is_built, assert_gone  # noqa: E402,F401 (autouse)

pytestmark = [pytest.mark.timeout(180)]

REPO = pathlib.Path(__file__).resolve().parents[2]
DOCS = REPO / "docs" / "jupyter.md"


@pytest.fixture
def agent(tmp_path):
    """The agent's side: the CLI with a private cache dir and server."""
    helper = Dolsot(tmp_path, serve=True)
    # A `while True` cell ends by the interrupt under test, never by the timeout.
    helper.env["DOLSOT_TIMEOUT"] = "120"
    yield helper
    helper.stop_servers()


def agent_json(agent, session: str, code: str) -> dict:
    proc = agent("--session", session, "--json", code)
    return json.loads(proc.stdout)


def install(agent, prefix: pathlib.Path, *args: str, env: dict | None = None):
    return subprocess.run([str(CLI), "kernel", "install", "--prefix", str(prefix), *args],
                          env={**agent.env, **(env or {})}, capture_output=True, text=True,
                          timeout=120)


class Notebook:
    """A started kernel and its client."""

    def __init__(self, km: KernelManager):
        self.km = km
        self.client = km.client()
        self.client.start_channels()
        self.client.wait_for_ready(timeout=120)

    def run(self, code: str, timeout: float = 120) -> tuple[dict, list[tuple[str, dict]]]:
        """The execute_reply's content and the iopub messages of the cell."""
        messages = []
        # stop_on_error=False: after an error reply ipykernel aborts the
        # requests that reach it before its own "stop aborting" message,
        # which the next cell of a test can outrun (Jupyter's behaviour for
        # every kernel, not this one's).
        reply = self.client.execute_interactive(code, timeout=timeout, stop_on_error=False,
                                                output_hook=messages.append)
        outputs = [(m["msg_type"], m["content"]) for m in messages
                   if m["msg_type"] not in ("status", "execute_input")]
        return reply["content"], coalesce(outputs)

    def value(self, code: str) -> str:
        content, outputs = self.run(code)
        assert content["status"] == "ok", content
        results = [c["data"]["text/plain"] for t, c in outputs if t == "execute_result"]
        assert len(results) == 1, outputs
        return results[0]

    def complete(self, code: str) -> list[str]:
        reply = self.client.complete(code, len(code), reply=True, timeout=120)
        return reply["content"]["matches"]

    def shutdown(self):
        self.client.stop_channels()
        if self.km.has_kernel:
            self.km.shutdown_kernel()


def coalesce(outputs: list[tuple[str, dict]]) -> list[tuple[str, dict]]:
    """Adjacent `stream` messages of one stream joined, as every Jupyter
    front end shows them: a cell's output streams in chunks as it prints."""
    joined: list[tuple[str, dict]] = []
    for kind, content in outputs:
        if (kind == "stream" and joined and joined[-1][0] == "stream"
                and joined[-1][1]["name"] == content["name"]):
            joined[-1] = ("stream", {**joined[-1][1], "text": joined[-1][1]["text"] + content["text"]})
        else:
            joined.append((kind, content))
    return joined


def kernel_manager(prefix: pathlib.Path, name: str) -> KernelManager:
    specs = KernelSpecManager(kernel_dirs=[str(prefix / "share" / "jupyter" / "kernels")])
    return KernelManager(kernel_name=name, kernel_spec_manager=specs)


def start(agent, tmp_path, *install_args: str, name: str = "dolsot-test",
          interrupt_mode: str | None = None) -> Notebook:
    prefix = tmp_path / "prefix"
    proc = install(agent, prefix, "--name", name, *install_args)
    assert proc.returncode == 0, proc.stderr
    if interrupt_mode:
        spec_file = prefix / "share" / "jupyter" / "kernels" / name / "kernel.json"
        spec = json.loads(spec_file.read_text())
        spec_file.write_text(json.dumps({**spec, "interrupt_mode": interrupt_mode}))
    km = kernel_manager(prefix, name)
    # Started where the agent runs, with its environment: one worker profile.
    km.start_kernel(env=dict(agent.env), cwd=str(agent.toolbox_dir))
    return Notebook(km)


@pytest.fixture
def notebook(agent, tmp_path):
    nb = start(agent, tmp_path, "--session", "work")
    yield nb
    nb.shutdown()


def wait_for(path: pathlib.Path, seconds: float = 60):
    """A file the cell creates: the cell is running (bounded poll)."""
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.01)


def test_execute_streams_output_and_the_value(notebook):
    content, outputs = notebook.run("print('hello')\n6 * 7")
    assert content["status"] == "ok", content
    assert outputs == [
        ("stream", {"name": "stdout", "text": "hello\n"}),
        ("execute_result", {"execution_count": content["execution_count"],
                            "data": {"text/plain": "42"}, "metadata": {}}),
    ]


def cell_messages(nb: Notebook, msg_id: str, on_message, timeout: float = 120) -> list[dict]:
    """The iopub messages of cell `msg_id` up to its idle status, each handed
    to `on_message` as it arrives (while the cell still runs)."""
    messages = []
    deadline = time.monotonic() + timeout
    while True:
        msg = nb.client.get_iopub_msg(timeout=max(1.0, deadline - time.monotonic()))
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return messages
        if msg["msg_type"] not in ("status", "execute_input"):
            messages.append(msg)
            on_message(msg)


def test_output_streams_while_the_cell_runs(notebook, tmp_path):
    # The cell prints step i, then waits for a file the test writes only once
    # the notebook has shown "step i": each line is shown before the cell goes on.
    gates = tmp_path / "gates"
    gates.mkdir()
    code = ("import os, time\n"
            "for i in range(4):\n"
            "    print(f'step {i}', flush=True)\n"
            f"    while not os.path.exists(os.path.join({str(gates)!r}, str(i))):\n"
            "        time.sleep(0.01)\n"
            "'done'")
    shown = []

    def on_message(msg):
        if msg["msg_type"] == "stream":
            shown.append(msg["content"]["text"])
            for line in "".join(shown).splitlines():
                if line.startswith("step "):
                    (gates / line.split()[1]).touch()

    msg_id = notebook.client.execute(code)
    messages = cell_messages(notebook, msg_id, on_message)
    reply = notebook.client.get_shell_msg(timeout=120)
    assert reply["content"]["status"] == "ok", reply["content"]
    outputs = coalesce([(m["msg_type"], m["content"]) for m in messages])
    # Each line once, then the value.
    assert outputs == [
        ("stream", {"name": "stdout", "text": "step 0\nstep 1\nstep 2\nstep 3\n"}),
        ("execute_result", {"execution_count": reply["content"]["execution_count"],
                            "data": {"text/plain": "'done'"}, "metadata": {}}),
    ]


def test_a_shown_figure_is_displayed_while_the_cell_runs(agent, notebook, tmp_path):
    gate = tmp_path / "seen"
    code = ("import os, time\nimport matplotlib.pyplot as plt\n"
            "plt.plot([1, 3, 2])\nplt.show()\n"
            f"while not os.path.exists({str(gate)!r}):\n    time.sleep(0.01)\n"
            "plt.plot([2, 1])\nNone")  # left open: shown at the cell's end

    def on_message(msg):
        if msg["msg_type"] == "display_data":
            gate.touch()

    msg_id = notebook.client.execute(code)
    messages = cell_messages(notebook, msg_id, on_message)
    reply = notebook.client.get_shell_msg(timeout=120)
    assert reply["content"]["status"] == "ok", reply["content"]
    images = [m["content"]["data"]["image/png"] for m in messages
              if m["msg_type"] == "display_data"]
    assert len(images) == 2, [m["msg_type"] for m in messages]
    assert all(base64.b64decode(png).startswith(b"\x89PNG\r\n\x1a\n") for png in images)
    assert images[0] != images[1]
    assert not list(agent.toolbox_dir.glob("dolsot-*.png"))


def test_interrupt_while_output_streams(agent, notebook, tmp_path):
    assert notebook.run("x = 1")[0]["status"] == "ok"
    msg_id = notebook.client.execute(
        "import time\nx = 2\nn = 0\nwhile True:\n    n += 1\n    print(n, flush=True)\n"
        "    time.sleep(0.01)", stop_on_error=False)
    interrupted = []

    def on_message(msg):
        if msg["msg_type"] == "stream" and not interrupted:
            interrupted.append(True)
            notebook.km.interrupt_kernel()

    messages = cell_messages(notebook, msg_id, on_message)
    reply = notebook.client.get_shell_msg(timeout=120)
    assert reply["parent_header"]["msg_id"] == msg_id
    assert reply["content"]["ename"] == "KeyboardInterrupt", reply["content"]
    streamed = "".join(m["content"]["text"] for m in messages
                       if m["msg_type"] == "stream" and m["content"]["name"] == "stdout")
    lines = streamed.splitlines()
    assert lines and lines == [str(i) for i in range(1, len(lines) + 1)], streamed  # once, in order
    assert notebook.value("x") == "1"
    assert agent_json(agent, "work", "x")["value"] == "1"


def test_state_is_kept_across_executes(notebook):
    assert notebook.run("import math\nrows = [1, 2]\ndef f(n):\n    return n * 10")[0]["status"] == "ok"
    assert notebook.run("rows.append(3)")[0]["status"] == "ok"
    assert notebook.value("f(sum(rows)), math.pi > 3") == "(60, True)"


def test_the_agent_and_the_kernel_share_one_live_session(agent, notebook, tmp_path):
    assert agent_json(agent, "work", "x = 41")["ok"]
    assert notebook.value("x + 1") == "42"
    assert notebook.run("y = x * 2")[0]["status"] == "ok"
    assert agent_json(agent, "work", "y")["value"] == "82"
    # Live, not restored: a thread the agent started is still running for
    # the kernel (a checkpoint cannot hold one).
    started = agent_json(agent, "work", "import threading\nev = threading.Event()\n"
                                        "t = threading.Thread(target=ev.wait)\nt.start()")
    assert started["ok"], started
    assert notebook.value("t.is_alive()") == "True"
    assert agent_json(agent, "work", "ev.set(); t.join(); t.is_alive()")["value"] == "False"


def test_session_magic_switches_the_notebook(agent, notebook):
    assert notebook.run("x = 'work'")[0]["status"] == "ok"
    content, outputs = notebook.run("%session other\nx = 'other'\nx")
    assert content["status"] == "ok", content
    assert outputs[0] == ("stream", {"name": "stdout", "text": "session: other\n"})
    assert outputs[1][1]["data"]["text/plain"] == "'other'"
    assert agent_json(agent, "other", "x")["value"] == "'other'"
    assert agent_json(agent, "work", "x")["value"] == "'work'"
    content, outputs = notebook.run("%session")
    assert outputs == [("stream", {"name": "stdout", "text": "session: other\n"})]
    # A bad name switches nothing and says why.
    for bad in ("../etc", "all", "-x", "a" * 129):
        content, outputs = notebook.run(f"%session {bad}")
        assert content["status"] == "error" and content["ename"] == "UsageError", content
        assert "not a session id" in content["evalue"], content
    content, _ = notebook.run("%session work other")
    assert (content["ename"], content["evalue"]) == (
        "UsageError", "%session takes one session id, not 2 words: %session NAME"), content
    assert notebook.run("%session work")[0]["status"] == "ok"
    assert notebook.value("x") == "'work'"


def test_an_error_shows_the_traceback_the_agent_reads(agent, notebook):
    assert notebook.run("def boom(d):\n    return 1 / d")[0]["status"] == "ok"
    content, outputs = notebook.run("print('before')\nboom(0)")
    assert content["status"] == "error"
    assert (content["ename"], content["evalue"]) == ("ZeroDivisionError", "division by zero")
    assert outputs[0] == ("stream", {"name": "stdout", "text": "before\n"})
    assert outputs[1] == ("error", {k: content[k] for k in ("ename", "evalue", "traceback")})
    seen = "\n".join(content["traceback"])
    agents = agent_json(agent, "work", "print('before')\nboom(0)")["error"]
    # The same text; only the cells' numbers differ (each call is a new cell).
    number = re.compile(r"<cell \d+>")
    assert number.sub("<cell N>", seen) == number.sub("<cell N>", agents)
    assert 'in boom\n    return 1 / d' in seen


def test_a_figure_is_displayed_as_png_and_its_file_removed(agent, notebook):
    content, outputs = notebook.run("import os\nimport matplotlib.pyplot as plt\n"
                                    "plt.plot([1, 3, 2])\n'MPLBACKEND' in os.environ")
    assert content["status"] == "ok", content
    # The kernel's own MPLBACKEND (ipykernel's inline backend) is not the cell's.
    assert outputs[-1] == ("execute_result", {"execution_count": content["execution_count"],
                                              "data": {"text/plain": "False"}, "metadata": {}})
    images = [c["data"]["image/png"] for t, c in outputs if t == "display_data"]
    assert len(images) == 1, outputs
    assert base64.b64decode(images[0]).startswith(b"\x89PNG\r\n\x1a\n")
    assert not list(agent.toolbox_dir.glob("dolsot-*.png"))


@pytest.mark.parametrize("mode", ["signal", "message"])
def test_interrupt_stops_the_cell_and_the_session_keeps_its_state(agent, tmp_path, mode):
    nb = start(agent, tmp_path, "--session", "work", interrupt_mode=mode)
    try:
        assert nb.run("x = 1")[0]["status"] == "ok"
        marker = tmp_path / "running"
        msg_id = nb.client.execute(f"x = 2\nopen({str(marker)!r}, 'w').close()\nwhile True:\n    pass",
                                   stop_on_error=False)
        wait_for(marker)
        nb.km.interrupt_kernel()
        reply = nb.client.get_shell_msg(timeout=120)
        assert reply["parent_header"]["msg_id"] == msg_id
        assert reply["content"]["status"] == "error", reply["content"]
        assert reply["content"]["ename"] == "KeyboardInterrupt", reply["content"]
        # Rolled back to the state before the cell, and still answering.
        assert nb.value("x") == "1"
        assert agent_json(agent, "work", "x")["value"] == "1"
    finally:
        nb.shutdown()


def test_completion_offers_the_session_names_and_leaves_no_trace(agent, notebook):
    assert agent_json(agent, "work", "alpha_rows = [1]\nalpha_total = 3\nimport math")["ok"]
    assert notebook.complete("alpha_") == ["alpha_rows", "alpha_total"]
    assert notebook.complete("print(alp") == ["alpha_rows", "alpha_total"]
    assert "math" in notebook.complete("ma") and "max" in notebook.complete("ma")
    assert notebook.complete("import") == ["import"]
    assert notebook.complete("math.p") == []  # attributes would take a cell that runs code
    after = agent_json(agent, "work", "alpha_total")
    assert (after["value"], after["stdout"], after["held"], after["dropped"]) == \
        ("3", "", ["alpha_rows", "alpha_total", "math"], [])


AGENT_CELLS = ["radius = 2.0\ncount = 0", "count += 1", "print(count)\ncount * 10"]
FAILING_CELL = "count += 1\nraise ValueError(f'count is {count}')"


def test_completion_leaves_the_agents_cell_numbers_and_state_alone(agent, notebook):
    # The same cells in two sessions; the kernel completes in one of them
    # between the agent's cells. The agent must see the very same answers.
    def agent_run(session, complete):
        answers = []
        for code in AGENT_CELLS:
            answers.append(agent_json(agent, session, code))
            if complete:
                assert "radius" in notebook.complete("ra")
                assert notebook.complete("cou") == ["count"]
        answers.append(agent_json(agent, session, FAILING_CELL))
        return answers

    control = agent_run("control", complete=False)
    watched = agent_run("work", complete=True)
    assert watched == control
    assert re.search(r'File "<cell \d+>", line 2', watched[-1]["error"]), watched[-1]["error"]
    assert "ValueError: count is 2" in watched[-1]["error"], watched[-1]["error"]
    assert agent_json(agent, "work", "count")["value"] == "2"


def test_completion_offers_the_toolbox_aliases(agent, tmp_path):
    nb = start(agent, tmp_path, "--session", "tools", "--toolbox", "mytools:mt")
    try:
        assert nb.complete("mt") == ["mt"]  # the alias: the session itself holds no names yet
        assert nb.value("mt.add(2, 3)") == "5"
    finally:
        nb.shutdown()


def test_install_writes_a_usable_kernelspec(agent, tmp_path):
    prefix = tmp_path / "prefix"
    proc = install(agent, prefix, "--session", "tools", "--name", "dk", "--toolbox", "mytools:mt",
                   "--timeout", "30")
    assert proc.returncode == 0, proc.stderr
    spec_dir = prefix / "share" / "jupyter" / "kernels" / "dk"
    assert f"in {spec_dir}" in proc.stdout
    spec = json.loads((spec_dir / "kernel.json").read_text())
    argv = spec["argv"]
    assert pathlib.Path(argv[0]).is_file() and argv[1:3] == ["-m", "dolsot.kernel"], argv
    assert argv[-2:] == ["-f", "{connection_file}"]
    assert ["--session", "tools"] == argv[3:5] and "--toolbox" in argv and "mytools:mt" in argv
    assert spec["display_name"] == "dolsot (tools)" and spec["language"] == "python"
    km = kernel_manager(prefix, "dk")
    km.start_kernel(env=dict(agent.env), cwd=str(agent.toolbox_dir))
    nb = Notebook(km)
    try:
        assert nb.value("mt.add(2, 3)") == "5"
    finally:
        nb.shutdown()
    assert agent_json(agent, "tools", "1 + 1")["ok"]


def test_install_for_the_user_writes_into_jupyters_data_dir(agent, tmp_path):
    data = tmp_path / "jupyter-data"
    proc = subprocess.run([str(CLI), "kernel", "install", "--user", "--session", "s1"],
                          env={**agent.env, "JUPYTER_DATA_DIR": str(data)},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads((data / "kernels" / "dolsot-s1" / "kernel.json").read_text())["argv"][4] == "s1"


@pytest.mark.parametrize("args, phrase", [
    (["install", "--session", "../x"], "is not a session id"),
    (["install", "--name", "a/b"], "--name 'a/b'"),
    (["install", "--user", "--prefix", "/tmp"], "not allowed with argument"),
    (["--bogus", "-f", "x.json"], "unrecognized arguments: --bogus"),
    (["--session", "work"], "-f CONNECTION_FILE is required"),
    (["--cli", "/nonexistent/dolsot", "-f", "x.json"], "is not an executable file"),
    (["--session", "a b", "-f", "x.json"], "is not a session id"),
])
def test_bad_kernel_arguments_exit_2_naming_the_problem(agent, tmp_path, args, phrase):
    proc = subprocess.run([str(CLI), "kernel", *args], env=agent.env, capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert phrase in proc.stderr, proc.stderr
    assert not list(tmp_path.glob("**/kernel.json"))


@pytest.mark.parametrize("now", [False, True], ids=["shutdown", "kill"])
def test_no_child_outlives_the_kernel(agent, tmp_path, now):
    nb = start(agent, tmp_path, "--session", "work")
    try:
        assert nb.run("x = 1")[0]["status"] == "ok"
        marker = tmp_path / "running"
        nb.client.execute(f"x = 2\nopen({str(marker)!r}, 'w').close()\nwhile True:\n    pass")
        wait_for(marker)
        kernel_pid = nb.km.provisioner.process.pid
        tree = [kernel_pid, *descendants(kernel_pid, every_thread=True)]
        assert len(tree) >= 2, tree  # the kernel and the CLI running the cell
        nb.client.stop_channels()
        nb.km.shutdown_kernel(now=now)
        assert_gone(tree)
    finally:
        nb.shutdown()
    # The cell was stopped in the session, which kept its state.
    assert agent_json(agent, "work", "x")["value"] == "1"


# Runs a notebook with nbclient in its own process: nbclient's run_sync keeps
# a runner thread and zmq sockets for the rest of the process that calls it,
# which would open and close descriptors under later tests' fd-leak checks.
RUN_NOTEBOOK = """
import sys, nbformat
from jupyter_client import KernelManager
from jupyter_client.kernelspec import KernelSpecManager
from nbclient import NotebookClient
kernels, name, path, cwd = sys.argv[1:]
nb = nbformat.read(path, as_version=4)
km = KernelManager(kernel_name=name, kernel_spec_manager=KernelSpecManager(kernel_dirs=[kernels]))
# Output streams in chunks as the cell prints it: joined, as front ends show it.
client = NotebookClient(nb, km=km, timeout=120, coalesce_streams=True,
                        resources={"metadata": {"path": cwd}})
try:
    client.execute()
finally:
    if km.has_kernel:  # a km handed to nbclient is not shut down by it
        km.shutdown_kernel()
nbformat.write(nb, path)
"""


def test_a_notebook_runs_with_nbclient(agent, tmp_path):
    nbformat = pytest.importorskip("nbformat")
    pytest.importorskip("nbclient")

    prefix = tmp_path / "prefix"
    assert install(agent, prefix, "--session", "nb", "--name", "dolsot-nb").returncode == 0
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("data = [3, 1, 2]\nprint(sorted(data))"),
        nbformat.v4.new_code_cell("import matplotlib.pyplot as plt\nplt.plot(data)\nNone"),
        nbformat.v4.new_code_cell("len(data)"),
    ])
    path = tmp_path / "nb.ipynb"
    nbformat.write(nb, str(path))
    proc = subprocess.run(
        [sys.executable, "-c", RUN_NOTEBOOK, str(prefix / "share" / "jupyter" / "kernels"),
         "dolsot-nb", str(path), str(agent.toolbox_dir)],
        env={**os.environ, **{k: v for k, v in agent.env.items() if k.startswith("DOLSOT_")}},
        capture_output=True, text=True, timeout=170)
    assert proc.returncode == 0, proc.stderr
    nb = nbformat.read(str(path), as_version=4)
    first, second, third = (cell.outputs for cell in nb.cells)
    assert first == [nbformat.from_dict({"output_type": "stream", "name": "stdout",
                                         "text": "[1, 2, 3]\n"})]
    assert second[0]["output_type"] == "display_data" and "image/png" in second[0]["data"]
    assert third[0]["data"]["text/plain"] == "3"
    assert agent_json(agent, "nb", "data")["value"] == "[3, 1, 2]"


def doc_blocks() -> list[tuple[int, str, str]]:
    """(line, language, body) of docs/jupyter.md's sh and python blocks."""
    blocks, lines = [], DOCS.read_text().splitlines()
    i = 0
    while i < len(lines):
        fence = re.fullmatch(r"```(\w+)", lines[i].strip())
        if not fence:
            i += 1
            continue
        start, body = i + 1, []
        i += 1
        while lines[i].strip() != "```":
            body.append(lines[i])
            i += 1
        if fence.group(1) in ("sh", "python"):
            blocks.append((start, fence.group(1), "\n".join(body) + "\n"))
        i += 1
    return blocks


@pytest.mark.parametrize("line, language, body", doc_blocks(),
                         ids=[f"jupyter.md:{b[0]}" for b in doc_blocks()])
def test_the_docs_blocks_run_as_written(tmp_path, line, language, body):
    # As tests/python/test_docs.py runs them (a temp dir, a private cache dir
    # and server, the build's dolsot first on PATH), and with a private
    # Jupyter data dir, where `install --user` writes.
    work = tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOLSOT_")}
    env.pop("PYTHONPATH", None)
    env.update(PATH=os.pathsep.join([str(CLI.parent), str(pathlib.Path(sys.executable).parent),
                                     env.get("PATH", "")]),
               DOLSOT_CACHE_DIR=str(tmp_path / "cache"), JUPYTER_DATA_DIR=str(tmp_path / "jupyter"))
    script = work / ("block.py" if language == "python" else "block.sh")
    script.write_text(body)
    command = [sys.executable, str(script)] if language == "python" else \
        ["bash", "-e", "-o", "pipefail", str(script)]
    try:
        proc = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True,
                              timeout=150)
    finally:
        if (tmp_path / "cache").is_dir():
            stop = subprocess.run([str(CLI), "serve", "--stop"], env=env, capture_output=True,
                                  timeout=120)
            assert stop.returncode == 0, stop.stderr
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert (tmp_path / "jupyter" / "kernels" / "dolsot-work" / "kernel.json").is_file()
    if language == "python":
        assert proc.stdout.splitlines()[-1] == "[{'text/plain': '42'}]", proc.stdout
    else:
        assert "dolsot-work" in proc.stdout
