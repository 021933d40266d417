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
