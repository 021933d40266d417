"""The binding proof against random cells (embedded/read_only_cell.h, #39):
a cell the proof lets skip its rollback point and checkpoint (loops,
branches, defs, calls of functions whose bodies were proven, changes in
place of what the namespace alone holds) must leave a promoted snapshot, and
a session restored from its journal, exactly where the cell left the
session. Each test runs one random program, cell by cell, in a Repl
(rollback on, the default) and in an InProcessSession (no fork, no proof:
the reference), kills the Repl's runner at random points (the snapshot
replays what the cells after it bound), and after every cell compares the
two namespaces: every value's repr, every function's code, defaults and
annotations, and which names share one object. At the end the Repl is
closed and the session restored from its store (base plus journal frames),
and its values compared again (a checkpoint saves a session name by name,
docs/checkpoint-format.md, so which names shared an object is not kept by
a restore, with or without the proof).

A failure prints the seed and the cells: the program replays exactly."""

from __future__ import annotations

import random

import dolsot
import pytest
from dolsot.store import FileStore

NAMES = ["a", "b", "c", "items", "table", "word"]
FUNCTIONS = ["f", "g", "h"]

# The state as a value: sorted (name, kind, what it holds); SHARING: for
# each mutable object, the names that share it. Expressions, so they bind
# nothing (general-path cells on the Repl, changing nothing).
VALUES = (
    "sorted((k, type(v).__name__, "
    "(v.__code__.co_code.hex(), v.__code__.co_names, "
    "repr([x for x in v.__code__.co_consts if type(x).__name__ != 'code']), "
    "v.__defaults__, repr(v.__annotations__), "
    "v.__qualname__, v.__doc__) if type(v).__name__ == 'function' else repr(v)) "
    "for k, v in globals().items() if not k.startswith('__'))"
)
SHARING = (
    "sorted(sorted(k for k, w in globals().items() if w is v and not k.startswith('__')) "
    "for v in {id(v): v for k, v in globals().items() if type(v) in (list, dict, set)}.values())"
)


class Program:
    """Random cells over a few names, most of them of a shape the proof
    may accept, some just past it."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)

    def value(self, depth: int = 0) -> str:
        r = self.rng
        choices = [
            lambda: str(r.randint(-5, 50)),
            lambda: repr(r.choice(["x", "yz", "", "abc def"])),
            lambda: r.choice(NAMES),
            lambda: f"len({r.choice(['items', 'word', 'table'])})",
            lambda: f"{r.choice(FUNCTIONS)}({r.randint(0, 6)})",
            lambda: f"[{self.value(depth + 1)}, {self.value(depth + 1)}]" if depth < 2 else "0",
            lambda: f"{{{self.value(depth + 1)!s}: 1}}" if depth < 1 else "()",
            lambda: f"[i * 2 for i in range({r.randint(0, 4)})]",
            lambda: f"{r.choice(NAMES)} + {r.choice(NAMES)}",
            lambda: f"word.split()",
            lambda: f"sorted(table)",
        ]
        return r.choice(choices)()

    def statement(self, indent: str = "") -> str:
        r = self.rng
        name = r.choice(NAMES)
        kinds = [
            lambda: f"{name} = {self.value()}",
            lambda: f"{name} += {self.value()}",
            lambda: f"items.append({self.value()})",
            lambda: f"items[{r.randint(-2, 2)}] = {self.value()}",
            lambda: f"table[{self.value()!s}] = {self.value()}",
            lambda: f"table.update({{{r.randint(0, 3)}: {self.value()}}})",
            lambda: f"{name} = {r.choice(NAMES)}",  # aliasing
            lambda: f"items.append({r.choice(NAMES)})",  # nesting, maybe aliasing
            lambda: f"{name}, {r.choice(NAMES)} = {self.value()}, {self.value()}",
            lambda: f"word = {r.choice(['word.upper()', 'word.strip()', repr('a b')])}",
            lambda: f"items.sort(key=len) if all(isinstance(v, str) for v in items) else items.reverse()",
            lambda: f"items.pop() if items else None",
            lambda: f"{r.choice(FUNCTIONS)}({self.value()})",
            # Changed in place, then let go: another name holding it must
            # not see the change go unrecorded.
            lambda: f"{name}.append(7) if isinstance({name}, list) else None\n{indent}{name} = 0",
            lambda: f"if isinstance({name}, list) and {name}:\n{indent}    {name}[0] = 8\n{indent}{name} = {self.value()}",
            lambda: f"{name} = sorted([3, 1, 2, {self.value()}], key=lambda v: str(v))",
            lambda: f"{r.choice(FUNCTIONS)} = lambda x: x + 1",  # a lambda as a function
            lambda: f"del {name}",  # the general path
            lambda: f"import math\n{indent}{name} = math.floor(2.5)",  # the general path
        ]
        return indent + r.choice(kinds)()

    def definition(self) -> str:
        r = self.rng
        name = r.choice(FUNCTIONS)
        bodies = [
            "    return x * 2",
            "    acc = []\n    for i in range(x % 5):\n        acc.append(i)\n    return acc",
            "    items.append(x)\n    return len(items)",  # changes a global in place
            f"    return {r.choice(FUNCTIONS)}(x - 1) if isinstance(x, int) and x > 0 else 0",
            "    table[x] = word\n    return table",
            "    global a\n    a = x\n    return a",  # not proven: calls take the general path
            "    return [v for v in items if v == x]",
        ]
        default = r.choice(["", ", k=2", ", k=(1, 'two')", ", k=[]"])
        note = r.choice(["", ": int", ": list[int]", ": 'str'"])
        return f"def {name}(x{note}{default}):\n{r.choice(bodies)}"

    def cell(self) -> str:
        r = self.rng
        kind = r.random()
        if kind < 0.15:
            return self.definition()
        if kind < 0.2:  # defined and called in one cell
            definition = self.definition()
            name = definition.split("(", 1)[0][len("def "):]
            return f"{definition}\n{name}({r.randint(0, 4)})"
        if kind < 0.35:
            body = "\n".join(self.statement("    ") for _ in range(r.randint(1, 2)))
            return f"for _i in range({r.randint(0, 3)}):\n{body}"
        if kind < 0.45:
            return f"if {r.choice(NAMES)}:\n{self.statement('    ')}\nelse:\n{self.statement('    ')}"
        return "\n".join(self.statement() for _ in range(r.randint(1, 3)))


SETUP = "a = 1\nb = 'b'\nc = [1, 2]\nitems = [3, 'x']\ntable = {'k': 1}\nword = 'hello world'\n" + "\n".join(
    f"def {name}(x):\n    return x" for name in FUNCTIONS)


def dump(backend, code=VALUES + ", " + SHARING) -> str:
    result = backend.run("s", code)
    assert result.ok, result.error
    return result.value


@pytest.mark.parametrize("seed", range(24))
def test_random_programs_roll_back_and_restore_exactly(tmp_path, seed):
    program = Program(seed)
    cells = [program.cell() for _ in range(60)]
    store = FileStore(str(tmp_path / "store"))
    repl = dolsot.Repl(store=store, typecheck=False, checkpoint_delay=3600)
    reference = dolsot.InProcessSession(typecheck=False)
    ran = [SETUP]
    try:
        assert repl.run("s", SETUP).ok and reference.run("s", SETUP).ok
        rng = random.Random(seed + 1000)
        for cell in cells:
            ran.append(cell)
            got, want = repl.run("s", cell), reference.run("s", cell)
            assert got.ok == want.ok, (seed, ran, got.error, want.error)
            if rng.random() < 0.3:
                killed = repl.run("s", "import os\nos._exit(3)")
                assert not killed.ok and "rolled back" in killed.error, killed.error
            assert dump(repl) == dump(reference), (seed, ran)
        want = dump(reference, VALUES)
    finally:
        repl.close()
        reference.close()
    # Restored from the store: the last whole checkpoint and the journal
    # frames after it.
    restored = dolsot.Repl(store=FileStore(str(tmp_path / "store")), typecheck=False)
    try:
        assert dump(restored, VALUES) == want, (seed, ran)
    finally:
        restored.close()
