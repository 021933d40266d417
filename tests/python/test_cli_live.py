"""The CLI prints a cell's stdout as it comes (issue #40), through the server
and directly: the first line of a streaming cell is read before the process
exits; the bytes and exit codes are exactly what they were (test_cli.py's
contract cases run through the same code); --json still prints one document
at the end; a cut output is the Result's head, cut marker and tail."""

from __future__ import annotations

import json
import subprocess

import pytest

from test_cli import CLI, dolsot  # noqa: F401 (the fixture: direct and through the server)

pytestmark = pytest.mark.timeout(120)


def test_the_first_line_is_read_before_the_process_exits(dolsot, tmp_path):  # noqa: F811
    # The cell prints, then waits for a file the test writes only once it
    # has read that line from the CLI's stdout.
    release = tmp_path / "release"
    code = (f"import os, time\nprint('first', flush=True)\n"
            f"while not os.path.exists({str(release)!r}):\n    time.sleep(0.01)\n"
            f"print('second')\n42")
    proc = subprocess.Popen([str(CLI), "--session", "live", "--timeout", "60", code],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dolsot.env,
                            cwd=dolsot.toolbox_dir)
    try:
        first = proc.stdout.readline()
        assert proc.poll() is None, "the CLI exited before the test released the cell"
        release.touch()
        rest, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert first == b"first\n"
    assert first + rest == b"first\nsecond\n42\n"
    assert proc.returncode == 0, err


def test_a_cut_output_prints_as_before(dolsot):  # noqa: F811
    r = dolsot("--session", "big", "for i in range(50000):\n    print(i)",
               env={"DOLSOT_MAX_OUTPUT": "1000"})
    assert r.returncode == 0, r.stderr
    out = r.stdout.decode()
    assert out.startswith("0\n1\n2\n") and out.endswith("49998\n49999\n")
    assert out.count("characters cut from the middle") == 1
    assert out.count("\n0\n") == 0, "the head is printed once"


def test_json_is_still_one_document(dolsot):  # noqa: F811
    r = dolsot("--json", "--session", "j", "print('a')\n1")
    assert r.returncode == 0, r.stderr
    document = json.loads(r.stdout)
    assert (document["stdout"], document["value"]) == ("a\n", "1")


# --json-lines: the output as JSON lines while the cell runs, the --json
# document last (the Jupyter kernel reads it).

def json_lines(data: bytes) -> tuple[list[dict], dict]:
    """The chunk objects and the document (the last line, the one with "ok")."""
    lines = [json.loads(line) for line in data.decode().splitlines()]
    assert lines and "ok" in lines[-1], lines
    assert not any("ok" in line for line in lines[:-1]), lines
    return lines[:-1], lines[-1]


def merged(chunks: list[dict]) -> list[dict]:
    """Adjacent stdout chunks joined (where a chunk ends is timing)."""
    out: list[dict] = []
    for chunk in chunks:
        if "stdout" in chunk and out and "stdout" in out[-1]:
            out[-1] = {"stdout": out[-1]["stdout"] + chunk["stdout"]}
        else:
            out.append(chunk)
    return out


def test_json_lines_streams_before_the_document(dolsot, tmp_path):  # noqa: F811
    release = tmp_path / "release"
    code = (f"import os, time\nprint('first', flush=True)\n"
            f"while not os.path.exists({str(release)!r}):\n    time.sleep(0.01)\n"
            f"print('second')\n42")
    proc = subprocess.Popen([str(CLI), "--session", "jl", "--json-lines", "--timeout", "60", code],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dolsot.env,
                            cwd=dolsot.toolbox_dir)
    try:
        first = proc.stdout.readline()
        assert proc.poll() is None, "the CLI exited before the test released the cell"
        release.touch()
        rest, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    # A chunk of what the cell printed (chunks may split a line).
    assert list(json.loads(first)) == ["stdout"] and "first\n".startswith(json.loads(first)["stdout"])
    chunks, document = json_lines(first + rest)
    assert all(list(chunk) == ["stdout"] for chunk in chunks), chunks
    assert "".join(chunk["stdout"] for chunk in chunks) == "first\nsecond\n"
    # The document is --json's, field for field.
    plain = dolsot("--json", "--session", "jl", "print('first')\nprint('second')\n42")
    expected = json.loads(plain.stdout)
    assert list(document) == list(expected)
    assert {k: document[k] for k in ("ok", "value", "stdout", "outcome", "exit_code")} == \
        {"ok": True, "value": "42", "stdout": "first\nsecond\n", "outcome": "ok", "exit_code": 0}
    assert err == b""


def test_json_lines_shows_figures_once(dolsot):  # noqa: F811
    code = ("import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()\n"
            "print('between')\nplt.plot([2, 1])\nNone")  # the second is left open
    r = dolsot("--session", "fig", "--json-lines", code)
    assert r.returncode == 0, r.stderr
    chunks, document = json_lines(r.stdout)
    chunks = merged(chunks)
    # The shown figure comes before the text printed after it, the one left
    # open at the cell's end.
    assert chunks == [{"image": "dolsot-fig-1.png"}, {"stdout": "between\n"},
                      {"image": "dolsot-fig-2.png"}], chunks
    assert document["images"] == ["dolsot-fig-1.png", "dolsot-fig-2.png"]
    files = sorted(p.name for p in dolsot.toolbox_dir.glob("dolsot-fig-*.png"))
    assert files == ["dolsot-fig-1.png", "dolsot-fig-2.png"]  # none written twice
    for name in files:
        assert (dolsot.toolbox_dir / name).read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def test_json_lines_streams_only_the_head_of_a_cut_output(dolsot):  # noqa: F811
    r = dolsot("--session", "bigj", "--json-lines", "for i in range(50000):\n    print(i)",
               env={"DOLSOT_MAX_OUTPUT": "1000"})
    assert r.returncode == 0, r.stderr
    chunks, document = json_lines(r.stdout)
    streamed = "".join(chunk["stdout"] for chunk in chunks)
    assert streamed.startswith("0\n1\n2\n") and len(streamed) <= 500
    assert document["stdout"].startswith(streamed)
    assert document["stdout"].count("characters cut from the middle") == 1


def test_json_lines_errors_and_refusals(dolsot):  # noqa: F811
    r = dolsot("--session", "e", "--json-lines", "print('a')\n1 / 0")
    assert r.returncode == 1
    chunks, document = json_lines(r.stdout)
    assert document["error_type"] == "ZeroDivisionError" and document["stdout"] == "a\n"
    for args in (["--json-lines", "--list-sessions"], ["--json-lines", "--reset", "e"],
                 ["mcp", "--json-lines"]):
        refused = dolsot(*args)
        assert refused.returncode == 2 and refused.stdout == b"", (args, refused.stderr)


def test_ctrl_c_while_output_streams_interrupts_the_cell(dolsot, tmp_path):  # noqa: F811
    import signal
    assert dolsot("--session", "ctl", "x = 1").returncode == 0
    proc = subprocess.Popen([str(CLI), "--session", "ctl", "--timeout", "60",
                             "import time\nx = 2\nwhile True:\n    print('tick', flush=True)\n"
                             "    time.sleep(0.005)"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dolsot.env,
                            cwd=dolsot.toolbox_dir)
    try:
        assert proc.stdout.readline() == b"tick\n"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert set(out.decode().split()) <= {"tick"}
    assert dolsot("--session", "ctl", "x").stdout == b"1\n"


# --names: a session's names, running nothing in it.

def test_names_runs_nothing_in_the_session(dolsot):  # noqa: F811
    cells = ["import math\nradius = 2.0\ncount = 0", "count += 1"]
    failing = "count += 1\nraise ValueError(count)"
    for session, ask in (("control", False), ("watched", True)):
        for code in cells:
            assert dolsot("--session", session, code).returncode == 0
            if ask:
                r = dolsot("--names", session, "--json")
                assert r.returncode == 0, r.stderr
                document = json.loads(r.stdout)
                assert document["session"] == session
                assert document["names"] == ["count", "math", "radius"]
                # Through the server the record of the live session; directly its checkpoint.
                assert document["source"] == ("live" if dolsot.env["DOLSOT_SERVE"] == "1"
                                              else "checkpoint")
                assert dolsot("--names", session).stdout == b"count\nmath\nradius\n"
    control = dolsot("--session", "control", "--json", failing)
    watched = dolsot("--session", "watched", "--json", failing)
    assert json.loads(watched.stdout) == json.loads(control.stdout)  # same <cell N>, same count
    assert "<cell 3>" in json.loads(watched.stdout)["error"]


def test_names_keeps_what_the_checkpoint_cannot(dolsot):  # noqa: F811
    # A name that cannot be saved (a lock) is live only: through the server
    # --names lists it; directly only the checkpoint's names are there.
    assert dolsot("--session", "lk", "import threading\nlock = threading.Lock()\nn = 1").returncode == 0
    names = json.loads(dolsot("--names", "lk", "--json").stdout)["names"]
    if dolsot.env["DOLSOT_SERVE"] == "1":
        assert names == ["lock", "n", "threading"]
    else:
        assert names == ["n", "threading"]


def test_names_of_no_session_and_bad_ids(dolsot):  # noqa: F811
    r = dolsot("--names", "never-ran", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"session": "never-ran", "names": [], "source": "none"}
    assert dolsot("--names", "never-ran").stdout == b""
    for args, phrase in ((["--names", "../x"], "session id"),
                         (["--names", "a", "--reset", "a"], "cannot be combined"),
                         (["--names", "a", "--session", "a", "1"], "cannot be combined")):
        r = dolsot(*args)
        assert r.returncode == 2 and r.stdout == b"", (args, r.stderr)
        assert phrase in r.stderr.decode(), r.stderr
