"""The AST gate's per-session memory (#23 §5, docs/gate.md "The gate's
memory"): a class whose plain methods read `self._x` is sealed in the cell that
defines it and in every later cell of its session, on both backends, across
rollbacks, restores from a checkpoint, branch() and reset()."""

from __future__ import annotations

import copy
import struct

import pytest

from dolsot import Repl
from dolsot.inprocess import InProcessSession
from dolsot.sandbox import AstGate, Policy, check_ast
from dolsot.store import MemoryStore

POLICY = Policy()
PWN = "        self._deepcopy_dispatch[int] = lambda x, memo: 'pwned'\n"
DEFINE = "class A:\n    LIMIT = 3\n    def __init__(self):\n        self._n = 0\n" \
         "    def m(self):\n        self._n += 1\n        return self._n\n" \
         "    def pwn(self):\n" + PWN
USE = "a = A()\nprint(a.m(), a.m(), A.LIMIT, isinstance(a, A), type(a) is A)\n"
USED = "1 2 3 True True\n"
# Later cells that hand a sealed method a host object as `self`, or hand the
# class on: each refused whatever the backend.
LATER_ATTACKS = [
    "import copy\nA.pwn(copy)\n",
    "import copy\nf = A.pwn\nf(copy)\n",
    "import copy\nB = A\nB.pwn(copy)\n",
    "import copy\ntype(A()).pwn(copy)\n",
    "import copy\nclass D(A):\n    @classmethod\n    def c(cls, o):\n        cls.pwn(o)\nD.c(copy)\n",
    "import copy\nclass D(A):\n    @classmethod\n    def c(cls, o):\n        super().pwn(o)\nD.c(copy)\n",
    "import copy\nfor k in [A]:\n    k.pwn(copy)\n",
    "import copy\ndef keep(k):\n    k.pwn(copy)\n    return k\n@keep\nclass D(A):\n    pass\n",
    "import copy\nmatch copy:\n    case A.pwn:\n        pass\n",
]


def undo_deepcopy() -> None:
    copy._deepcopy_dispatch[int] = copy._deepcopy_atomic


@pytest.fixture(params=["inprocess", "repl"])
def backend(request):
    if request.param == "inprocess":
        session = InProcessSession(gate=AstGate(POLICY), typecheck=False)
    else:
        session = Repl(store=MemoryStore(), gate=AstGate(POLICY), typecheck=False, checkpoint="sync")
    try:
        yield session
    finally:
        session.close()
        undo_deepcopy()


def refused(result, rule: str = "private-attribute") -> bool:
    return (not result.ok) and "rejected by the gate" in result.error and rule in result.error


def test_a_sealed_class_is_used_normally_in_later_cells(backend) -> None:
    first = backend.run("s", DEFINE)
    assert first.ok, first.error
    second = backend.run("s", USE)
    assert second.ok, second.error
    assert second.stdout == USED
    third = backend.run("s", "class D(A):\n    pass\nprint(D().m(), D.LIMIT)\n")
    assert third.ok and third.stdout == "1 3\n", third.error


@pytest.mark.parametrize("attack", LATER_ATTACKS)
def test_later_cells_cannot_call_a_sealed_method_with_a_host_object(backend, attack) -> None:
    assert backend.run("s", DEFINE).ok
    result = backend.run("s", attack)
    assert refused(result), result.error
    assert copy.deepcopy(1) == 1


def test_subclassing_with_a_host_base_in_a_later_cell_is_refused(backend) -> None:
    assert backend.run("s", DEFINE).ok
    assert backend.run("s", "import json\nBase = json.JSONDecoder\n").ok
    result = backend.run("s", "class D(A, Base):\n    pass\n")
    assert refused(result), result.error
    assert "earlier cell sealed" in result.error
    # Own bases are fine.
    assert backend.run("s", "class E:\n    pass\nclass D(A, E):\n    pass\nprint(D().m())\n").ok


def test_the_name_stays_sealed_after_it_is_rebound(backend) -> None:
    assert backend.run("s", DEFINE).ok
    assert backend.run("s", "A = 5\n").ok
    assert refused(backend.run("s", "x = A\n"))


def test_a_refused_cell_seals_nothing(backend) -> None:
    # Refused (a denied import) although it defines a sealed class: B stays free.
    assert refused(backend.run("s", "import os\nclass B:\n    def m(self):\n        return self._x\n"),
                   "import-denied")
    assert backend.run("s", "B = 1\nx = B\n").ok


def test_a_cell_that_raises_after_binding_keeps_its_names_sealed(backend) -> None:
    result = backend.run("s", DEFINE + "raise ValueError('after the class')\n")
    assert not result.ok and "ValueError" in result.error
    assert "A" in result.held
    assert refused(backend.run("s", "import copy\nA.pwn(copy)\n"))
    assert copy.deepcopy(1) == 1


def test_reset_frees_the_name(backend) -> None:
    assert backend.run("s", DEFINE).ok
    assert backend.reset("s") == 1
    result = backend.run("s", "A = [1]\nx = A\nprint(x)\n")
    assert result.ok and result.stdout == "[1]\n", result.error


def test_the_memory_is_per_session(backend) -> None:
    assert backend.run("s", DEFINE).ok
    assert backend.run("other", "A = [1]\nx = A\n").ok


def test_a_timed_out_cell_in_process_keeps_its_names_sealed() -> None:
    # The cell's thread runs on past its deadline (until the engine's
    # KeyboardInterrupt lands): what it bound stays, so it stays sealed.
    session = InProcessSession(gate=AstGate(POLICY), typecheck=False)
    try:
        result = session.run("s", DEFINE + "while True:\n    pass\n", timeout=0.5)
        assert result.outcome.name.lower() == "timeout", result.outcome
        assert refused(session.run("s", "import copy\nA.pwn(copy)\n"))
    finally:
        session.close()
        undo_deepcopy()


def repl(store, **kw) -> Repl:
    return Repl(store=store, gate=AstGate(POLICY), typecheck=False, checkpoint="sync", **kw)


def test_a_rolled_back_cell_seals_nothing() -> None:
    # Repl: a timed-out cell is rolled back to the state before it; its class
    # is gone from the session and its name from the memory.
    with repl(MemoryStore()) as r:
        result = r.run("s", DEFINE + "while True:\n    pass\n", timeout=1)
        assert result.outcome.name.lower() == "timeout", result.outcome
        assert "A" not in result.held
        free = r.run("s", "A = [2]\nx = A\nprint(x)\n")
        assert free.ok and free.stdout == "[2]\n", free.error


def test_the_memory_survives_a_restore_from_the_checkpoint() -> None:
    store = MemoryStore()
    with repl(store) as r:
        assert r.run("s", DEFINE).ok
    with repl(store) as r:  # a new Repl: the session comes back from the store
        assert refused(r.run("s", "import copy\nA.pwn(copy)\n"))
        used = r.run("s", USE)
        assert used.ok and used.stdout == USED, used.error
    assert copy.deepcopy(1) == 1


def test_branch_copies_the_memory() -> None:
    with repl(MemoryStore()) as r:
        assert r.run("s", DEFINE).ok
        r.branch("s", "t")
        assert refused(r.run("t", "import copy\nA.pwn(copy)\n"))
        used = r.run("t", USE)
        assert used.ok and used.stdout == USED, used.error
        # Sealed in the branch only from here on: the source does not learn it.
        assert r.run("t", "class B(A):\n    pass\n").ok
        assert r.run("s", "B = 1\nx = B\n").ok
        assert refused(r.run("t", "x = B\n"))
    assert copy.deepcopy(1) == 1


def without_gate_memory(blob: bytes) -> bytes:
    """The same checkpoint as a version 2 writer made it: no gate memory
    (codec 6) entry, version 2 (docs/checkpoint-format.md)."""
    assert blob[:8] == b"DOLSOTNS"
    version, count = struct.unpack_from("<II", blob, 8)
    assert version == 3
    out, at, kept = [], 16, 0
    for _ in range(count):
        name_len = struct.unpack_from("<I", blob, at + 5)[0]
        size = struct.unpack_from("<Q", blob, at + 9 + name_len)[0]
        end = at + 17 + name_len + size
        if blob[at + 4] != 6:
            out.append(blob[at:end])
            kept += 1
        at = end
    assert at == len(blob) and kept == count - 1
    return b"DOLSOTNS" + struct.pack("<II", 2, kept) + b"".join(out)


def test_a_session_restored_from_an_older_checkpoint_refuses_plain_methods() -> None:
    store = MemoryStore()
    with repl(store) as r:
        assert r.run("s", "x = 1\n").ok
    store.save("s", without_gate_memory(store.load("s")))
    with repl(store) as r:
        result = r.run("s", DEFINE)
        assert refused(result), result.error
        assert "restored from a checkpoint" in result.error
        # Dunder methods, properties and class methods do not need the memory.
        ok = r.run("s", "class C:\n    def __init__(self):\n        self._n = 4\n"
                        "    def __len__(self):\n        return self._n\nprint(len(C()), x)\n")
        assert ok.ok and ok.stdout == "4 1\n", ok.error
    with repl(store) as r:  # saved again (version 3): still incomplete
        assert refused(r.run("s", DEFINE))


def test_check_ast_alone_refuses_plain_methods() -> None:
    findings = check_ast(DEFINE)
    assert [f.rule for f in findings] == ["private-attribute"] * 3
