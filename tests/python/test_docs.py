"""Every fenced block of README.md and docs/**/*.md runs as written (#41 §3).

One test per block, named by its file and the line of its opening fence
(`README.md:123`):

- `python` blocks run in a fresh `python` (this interpreter) in a temp dir;
- `sh`, `bash`, `shell` and `console` blocks run with `bash -e -o pipefail`
  in a temp dir, with the build's `dolsot` first on PATH;
- `json` blocks must parse;
- any other language (`text`, `cmake`, `cpp`, ...) is not code to paste and is
  not run; a fence without a language is a failure (a block cannot dodge the
  run by leaving its language out).

Both kinds run with no DOLSOT_* or PYTHONPATH of the caller's, a private
DOLSOT_CACHE_DIR (so a `dolsot` call starts its own server, stopped after
the block) and the block's temp dir as the working directory.

A line of a python or shell block may end with `# -> TEXT`, what it prints:
the test checks that TEXT is a line of the block's stdout, so a value the
docs show is the value a reader gets.

A block that cannot run as written says so on the line before its fence,
`<!-- placeholder: why -->`; it is skipped with that reason, visibly. A block
that sets the project up (scripts/setup.sh, scripts/test.sh, scripts/demo.sh,
pip install, apt-get) must be a placeholder: it would take minutes and change
the machine. The module ends by printing how many blocks ran and how many
were skipped.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

from test_cli import CLI

REPO = pathlib.Path(__file__).resolve().parents[2]
DOC_FILES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]

RUN_AS = {"python": "python", "py": "python", "sh": "shell", "bash": "shell",
          "shell": "shell", "console": "shell", "json": "json"}
# Not run: `text` is not code; code in the others must say why it is not
# run (a placeholder marker), as a python or shell block would.
NOT_RUN = {"text", "cmake", "cpp", "c++", "toml", "ini", "yaml", "diff", "dockerfile"}
PLACEHOLDER = re.compile(r"^\s*<!--\s*placeholder:\s*(.+?)\s*-->\s*$")
FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([\w+-]*)\s*$")
SETS_THE_PROJECT_UP = re.compile(r"scripts/(setup|test|demo)\.sh|\bpip install\b|\bapt-get\b")
EXPECTED = re.compile(r"#\s*->\s*(.+?)\s*$")
README_MAX_LINES = 300


@dataclasses.dataclass(frozen=True)
class Block:
    path: pathlib.Path
    line: int  # 1-based, the opening fence
    language: str
    body: str
    placeholder: str | None  # why it cannot run as written, or None

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"

    @property
    def kind(self) -> str | None:
        return RUN_AS.get(self.language)

    @property
    def expected_lines(self) -> list[str]:
        """What the block says it prints (`# -> TEXT` at a line's end)."""
        return [m.group(1) for line in self.body.splitlines() if (m := EXPECTED.search(line))]


def read_blocks(path: pathlib.Path) -> list[Block]:
    """The fenced blocks of one Markdown file, in order. An unclosed fence
    is a failure of the file, not a block."""
    lines = path.read_text().splitlines()
    blocks = []
    i = 0
    while i < len(lines):
        opened = FENCE.match(lines[i])
        if not opened:
            i += 1
            continue
        indent, fence, language = opened.groups()
        start = i
        body = []
        i += 1
        while i < len(lines) and lines[i].strip() != fence:
            line = lines[i]
            body.append(line[len(indent):] if line.startswith(indent) else line.lstrip())
            i += 1
        assert i < len(lines), f"{path.relative_to(REPO)}:{start + 1}: a fence that never closes"
        previous = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        why = PLACEHOLDER.match(previous)
        blocks.append(Block(path, start + 1, language.lower(), "\n".join(body) + "\n",
                            why.group(1) if why else None))
        i += 1
    return blocks


BLOCKS = [block for path in DOC_FILES for block in read_blocks(path)]
RUNNABLE = [block for block in BLOCKS if block.kind is not None]
COUNTS = {"ran": 0, "skipped": 0}


@pytest.fixture(scope="module", autouse=True)
def _report_counts(request):
    yield
    line = (f"docs blocks: {COUNTS['ran']} ran, {COUNTS['skipped']} skipped as placeholders, "
            f"of {len(RUNNABLE)} python/shell/json blocks in {len(DOC_FILES)} files")
    reporter = request.config.pluginmanager.getplugin("terminalreporter")
    capture = request.config.pluginmanager.getplugin("capturemanager")
    if reporter is None or capture is None:
        print(line)
        return
    with capture.global_and_fixture_disabled():
        reporter.write_line("")
        reporter.write_line(line)


def block_environment(tmp_path: pathlib.Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOLSOT_")}
    env.pop("PYTHONPATH", None)
    path = [str(CLI.parent), str(pathlib.Path(sys.executable).parent), env.get("PATH", "")]
    # A kernelspec a block installs with --user lands here, not in the home.
    env.update(PATH=os.pathsep.join(path), DOLSOT_CACHE_DIR=str(tmp_path / "cache"),
               JUPYTER_DATA_DIR=str(tmp_path / "jupyter"))
    return env


def stop_server(env: dict[str, str]) -> None:
    """Stops the server a block's `dolsot` calls started, if any."""
    if not pathlib.Path(env["DOLSOT_CACHE_DIR"]).is_dir():
        return
    proc = subprocess.run([str(CLI), "serve", "--stop"], capture_output=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()


@pytest.mark.timeout(180)
@pytest.mark.parametrize("block", RUNNABLE, ids=[b.name for b in RUNNABLE])
def test_block_runs_as_written(block: Block, tmp_path):
    if block.placeholder:
        COUNTS["skipped"] += 1
        pytest.skip(f"placeholder: {block.placeholder}")
    if block.kind == "json":
        json.loads(block.body)
        COUNTS["ran"] += 1
        return
    env = block_environment(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    if block.kind == "python":
        script = work / "block.py"
        command = [sys.executable, str(script)]
    else:
        script = tmp_path / "block.sh"
        command = ["bash", "-e", "-o", "pipefail", str(script)]
    script.write_text(block.body)
    try:
        proc = subprocess.run(command, cwd=work, env=env, capture_output=True, timeout=150)
    finally:
        stop_server(env)
    assert proc.returncode == 0, (
        f"{block.name} ({block.language}) failed with exit {proc.returncode}:\n"
        f"--- block ---\n{block.body}--- stdout ---\n{proc.stdout.decode(errors='replace')}"
        f"--- stderr ---\n{proc.stderr.decode(errors='replace')}")
    printed = [line.rstrip() for line in proc.stdout.decode(errors="replace").splitlines()]
    missing = [text for text in block.expected_lines if text not in printed]
    assert not missing, f"{block.name} shows {missing}, but printed:\n" + "\n".join(printed)
    COUNTS["ran"] += 1


def test_every_fence_names_a_language_and_setup_blocks_are_placeholders():
    unnamed = [b.name for b in BLOCKS if not b.language]
    unknown = [f"{b.name} ({b.language})" for b in BLOCKS
               if b.language and b.kind is None and b.language not in NOT_RUN]
    setup = [b.name for b in RUNNABLE
             if b.kind == "shell" and not b.placeholder and SETS_THE_PROJECT_UP.search(b.body)]
    unexplained = [f"{b.name} ({b.language})" for b in BLOCKS
                   if b.language in NOT_RUN - {"text"} and not b.placeholder]
    assert not unnamed, f"fences without a language (say `text` for what is not code): {unnamed}"
    assert not unknown, f"fences in a language this test does not know: {unknown}"
    assert not setup, f"blocks that set the project up must be placeholders: {setup}"
    assert not unexplained, f"code this test cannot run must be marked a placeholder: {unexplained}"


def test_the_readme_is_a_front_door_under_300_lines_with_an_index_of_docs():
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) < README_MAX_LINES
    pages = sorted(p.relative_to(REPO).as_posix() for p in (REPO / "docs").glob("*.md"))
    missing = [page for page in pages if f"]({page})" not in readme]
    assert not missing, f"docs pages the README's index does not link: {missing}"


LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def test_relative_links_between_the_docs_resolve():
    broken = []
    for path in DOC_FILES:
        prose = re.sub(r"`[^`\n]*`", "", path.read_text())  # `f(...)` is code, not a link
        for target in LINK.findall(prose):
            if "://" in target or target.startswith("mailto:"):
                continue
            if not (path.parent / target).exists():
                broken.append(f"{path.relative_to(REPO)} -> {target}")
    assert not broken, broken
