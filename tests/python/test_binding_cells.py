"""Binding cells (embedded/read_only_cell.h, issue #22): a cell proven to
change only the names it binds, to plain values (`x += 1`, `y = [x, name]`),
forks no rollback point and writes no checkpoint at once. The host keeps
those values for the snapshot from before it (replayed if a later cell is
killed), and their checkpoint waits up to `checkpoint_delay` so the cells in
between share it: the next cell after the delay takes it, or a timer does
while the session is idle, and close() does before the session goes.

What is asserted: which cells save (a counting store), that a rollback after
binding cells is exact, that the timer writes the deferred checkpoint while
the session is idle (a host killed after that loses nothing), that a close
and a restart see the last state, and that what the proof cannot vouch for
(aliasing, a running thread, sync checkpoints) takes the general path."""

from __future__ import annotations

import os
import textwrap

import dolsot
import pytest
from counting_store import CountingStore
from dolsot.store import FileStore
from process_tree import sigkill_once_it_says


def ok(repl, code, **kwargs):
    result = repl.run("s", code, **kwargs)
    assert result.ok, (code, result.error)
    return result


def settled_saves(repl, store):
    """The saves once every checkpoint on its way has landed."""
    repl.sessions()  # flushes the saver
    return store.saves


@pytest.fixture
def lazy():
    """A Repl whose binding cells' checkpoints wait an hour: until close."""
    store = CountingStore()
    repl = dolsot.Repl(store=store, typecheck=False, checkpoint_delay=3600)
    ok(repl, "x = 0; name = 'dolsot'; box = [1, 2]")
    settled_saves(repl, store)
    yield repl, store
    repl.close()


BINDING = ["x += 1", "y = x * 2", "y = [x, name]", "z = {'k': x, 'v': (1, 2.5)}",
           "a = b = (x, 'b')", "s = {1, 2}\nt = len(name)", "w = sorted(box)", "u = None",
           # In place, on a list the namespace alone holds.
           "box.append(x)", "box[0] = 'first'", "box.sort(reverse=True)", "box[1] += 5",
           # Loops, branches, defs, and what only the namespace holds changed in place.
           "box += [3]", "x = 1; x += 1", "y, z = 1, 2", "box.count(1)",
           "for i in range(5):\n    if i % 2:\n        box.append(i)",
           "def f(v, k=2):\n    return v * k", "def g(v: int) -> list[int]:\n    return [v]"]

GENERAL = [
    "alias = box",           # a second name for one list: a copy would not be the same list
    "t = (box,)",            # a list held by a new tuple too
    "r = range(3)",          # a value marshal does not write
    "y = box\nbox.append(3)",  # changed in place while a second name holds it
    "box.append(box)",       # holds itself
    "def f(v, acc=[]):\n    return acc",  # a mutable default: no recipe makes it again
    "def f():\n    pass\nh = f",  # a function two names hold
    "import math",
    "class C:\n    pass",
]


@pytest.mark.parametrize("code", BINDING)
def test_a_binding_cell_writes_no_checkpoint_until_the_delay(lazy, code):
    repl, store = lazy
    before = store.saves
    ok(repl, code)
    ok(repl, "x + 1")
    assert settled_saves(repl, store) == before, code


@pytest.mark.parametrize("code", GENERAL)
def test_other_cells_are_checkpointed_at_once(lazy, code):
    repl, store = lazy
    before = store.saves
    ok(repl, code)
    assert settled_saves(repl, store) == before + 1, code


def test_a_kill_after_binding_cells_rolls_back_to_exactly_the_state_before_it(lazy):
    repl, _ = lazy
    ok(repl, "x += 1")
    ok(repl, "y = [x, name]")
    ok(repl, "x += 10")
    ok(repl, "box.append(x)")
    killed = repl.run("s", "x = 99\nbox.clear()\nwhile True: pass", timeout=0.5)
    assert killed.exit_code == 124 and "rolled back" in killed.error
    assert ok(repl, "x, y, name, box").value == "(11, [1, 'dolsot'], 'dolsot', [1, 2, 11])"
    # The restored list is the session's own: it changes in place as before.
    ok(repl, "y.append(3)")
    assert ok(repl, "y").value == "[1, 'dolsot', 3]"
    # Numbering goes on past the binding cells: a function defined now
    # names its own cell in a traceback, not an earlier one's.
    ok(repl, "def f():\n    raise ValueError('here')")
    failed = repl.run("s", "f()")
    assert "ValueError: here" in failed.error
    cells = [int(part.split(">")[0]) for part in failed.error.split("<cell ")[1:]]
    assert cells and min(cells) >= 8, failed.error


def test_a_crash_in_the_cell_after_binding_cells_loses_none_of_them(lazy):
    repl, _ = lazy
    for _ in range(3):
        ok(repl, "x += 1")
    crashed = repl.run("s", "import os; os._exit(3)")
    assert not crashed.ok and "rolled back" in crashed.error
    assert ok(repl, "x").value == "3"


def test_close_writes_what_binding_cells_changed_and_a_restart_sees_it(tmp_path):
    repl = dolsot.Repl(store=FileStore(str(tmp_path)), typecheck=False, checkpoint_delay=3600)
    ok(repl, "x = 0")
    for _ in range(5):
        ok(repl, "x += 1")
    ok(repl, "y = (x, 'last')")
    repl.close()
    again = dolsot.Repl(store=FileStore(str(tmp_path)), typecheck=False)
    try:
        assert ok(again, "x, y").value == "(5, (5, 'last'))"
    finally:
        again.close()


def test_the_timer_writes_the_checkpoint_of_an_idle_session():
    store = CountingStore()
    repl = dolsot.Repl(store=store, typecheck=False, checkpoint_delay=0.2)
    try:
        ok(repl, "x = 0")
        settled_saves(repl, store)
        store.saved.clear()
        before = store.saves
        ok(repl, "x += 1")
        ok(repl, "x += 1")
        assert store.saved.wait(30), "no checkpoint while the session was idle"
        assert store.saves == before + 1  # the two cells shared it
        fresh = dolsot.Repl(store=store.inner, typecheck=False)
        try:
            assert ok(fresh, "x").value == "2"
        finally:
            fresh.close()
    finally:
        repl.close()


def test_a_host_killed_once_the_delay_has_passed_loses_nothing(tmp_path):
    # The host runs binding cells, waits until the timer's checkpoint is in
    # the store, says so, and is killed with SIGKILL: no close, no flush.
    host = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
        import dolsot
        from counting_store import CountingStore
        from dolsot.store import FileStore

        store = CountingStore(FileStore({str(tmp_path)!r}))
        repl = dolsot.Repl(store=store, typecheck=False, checkpoint_delay=0.2)
        assert repl.run("s", "x = 0").ok
        repl.sessions()  # its checkpoint has landed
        store.saved.clear()
        for _ in range(4):
            assert repl.run("s", "x += 1").ok
        assert store.saved.wait(30)
        print("durable", flush=True)
        sys.stdin.read()
    """)
    sigkill_once_it_says(host)
    again = dolsot.Repl(store=FileStore(str(tmp_path)), typecheck=False)
    try:
        assert ok(again, "x").value == "4"
    finally:
        again.close()


def test_a_running_thread_takes_the_general_path(lazy):
    repl, store = lazy
    ok(repl, "import threading\nstop = threading.Event()\n"
             "t = threading.Thread(target=stop.wait, daemon=True)\nt.start()")
    before = settled_saves(repl, store)
    ok(repl, "x += 1")  # a thread of the session's is alive: it could change anything
    assert settled_saves(repl, store) == before + 1
    ok(repl, "stop.set(); t.join()")


def test_sync_checkpoints_save_every_binding_cell_before_it_returns():
    store = CountingStore()
    repl = dolsot.Repl(store=store, typecheck=False, checkpoint="sync")
    try:
        ok(repl, "x = 0")
        before = store.saves
        ok(repl, "x += 1")
        assert store.saves == before + 1
    finally:
        repl.close()


def test_with_the_fast_paths_off_every_cell_is_checkpointed(monkeypatch):
    monkeypatch.setenv("DOLSOT_READ_ONLY_CELLS", "0")
    store = CountingStore()
    repl = dolsot.Repl(store=store, typecheck=False, checkpoint_delay=3600)
    try:
        ok(repl, "x = 0")
        before = settled_saves(repl, store)
        ok(repl, "x += 1")
        assert settled_saves(repl, store) == before + 1
    finally:
        repl.close()


@pytest.mark.parametrize("value", [-1, 3601, float("nan")])
def test_a_bad_delay_is_refused_naming_it(value):
    with pytest.raises(dolsot.ConfigError, match="checkpoint_delay"):
        dolsot.Repl(checkpoint_delay=value)


def test_a_bad_delay_variable_is_refused_naming_it(monkeypatch):
    monkeypatch.setenv("DOLSOT_CHECKPOINT_DELAY", "soon")
    with pytest.raises(dolsot.ConfigError, match="DOLSOT_CHECKPOINT_DELAY"):
        dolsot.Repl()


def test_a_name_rebound_to_a_plain_value_is_no_longer_dropped_after_a_rollback(lazy):
    repl, _ = lazy
    held = ok(repl, "import threading\nlock = threading.Lock()")
    assert "lock" in held.dropped
    ok(repl, "lock = 1")  # a binding cell: plain now
    assert "lock" not in ok(repl, "x + 1").dropped
    killed = repl.run("s", "while True: pass", timeout=0.5)
    assert killed.exit_code == 124
    # The promoted snapshot replayed `lock = 1`; a read-only cell reports the
    # verdict on what the session holds now, not on the lock.
    after = ok(repl, "lock + 1")
    assert after.value == "2" and "lock" not in after.dropped


# Cells the binding proof must turn away, each a way a change could escape
# the values a binding cell hands the host: after each, a kill rolls back
# to the snapshot plus those values, which must be exactly the state after
# the cell.
ESCAPES = [
    # A list another name holds too, changed and then let go.
    ("shared = [1]\nother = shared", "shared.append(7)\nshared = 0", "other", "[1, 7]"),
    ("shared = [[1]]\ninner = shared[0]", "shared[0].append(7)\nshared = 0", "inner", "[1, 7]"),
    # A builtin the proof does not trust, read before the cell binds its name.
    ("keep = [1]", "exec('keep.append(7)')\nexec = 0", "keep", "[1, 7]"),
    ("keep = [1]", "[exec('keep.append(7)') for exec in [exec]]", "keep", "[1, 7]"),
    # A def's function called in the cell that makes it (its body, which
    # imports, was never proven), directly or through a proven function.
    ("keep = [1]", "def push():\n    import sys\n    keep.append(7)\npush()", "keep", "[1, 7]"),
    ("keep = [1]\ndef outer():\n    return inner()",
     "def inner():\n    import sys\n    keep.append(7)\nouter()", "keep", "[1, 7]"),
    # A function whose body was never proven (it imports), called.
    ("keep = [1]\ndef push():\n    import sys\n    keep.append(7)", "push()", "keep", "[1, 7]"),
    # A proven function whose default was made mutable afterwards.
    ("def push(x, acc=()):\n    acc.append(x)\n    return acc\nkeep = [1]\npush.__defaults__ = (keep,)",
     "push(7)", "keep", "[1, 7]"),
]


@pytest.mark.parametrize("setup, cell, name, after", ESCAPES)
def test_what_a_binding_cell_cannot_carry_is_never_lost_by_a_rollback(lazy, setup, cell, name, after):
    repl, _ = lazy
    ok(repl, setup)
    ok(repl, cell)
    killed = repl.run("s", "import os\nos._exit(3)")
    assert not killed.ok and "rolled back" in killed.error
    assert ok(repl, name).value == after


def test_defs_loops_and_calls_of_proven_functions_roll_back_exactly(lazy):
    repl, store = lazy
    before = store.saves
    ok(repl, "def double(v: int, k=2) -> int:\n    '''Twice.'''\n    return v * k")
    ok(repl, "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)")
    ok(repl, "total = 0\nfor i in range(100):\n    total += double(i) % 7")
    ok(repl, "box.append(fib(10))")
    assert settled_saves(repl, store) == before  # all binding cells: nothing saved yet
    killed = repl.run("s", "total = -1\nwhile True: pass", timeout=0.5)
    assert killed.exit_code == 124 and "rolled back" in killed.error
    assert ok(repl, "total, box, fib(12), double(4)").value == "(296, [1, 2, 55], 144, 8)"
    assert ok(repl, "double.__doc__, double.__annotations__, double.__defaults__").value == (
        "('Twice.', {'v': <class 'int'>, 'return': <class 'int'>}, (2,))")
    # The promoted snapshot made `double` again from its recipe: a traceback
    # through it still shows its cell's line.
    failed = repl.run("s", "double('x', None)")
    assert "return v * k" in failed.error, failed.error
    # And it is still proven: calling it is read-only again.
    before = settled_saves(repl, store)
    ok(repl, "double(5)")
    assert settled_saves(repl, store) == before


def test_functions_a_binding_cell_defined_are_restored_from_the_journal(tmp_path):
    store = FileStore(str(tmp_path / "store"))
    repl = dolsot.Repl(store=store, typecheck=False, checkpoint_delay=0)
    ok(repl, "base = 1")
    ok(repl, "def scaled(v: list[int] | None = None, *, k: float = 1.5) -> str:\n    return str(v) * int(k)")
    ok(repl, "words = [scaled([i]) for i in range(2)]")
    repl.close()
    restored = dolsot.Repl(store=FileStore(str(tmp_path / "store")), typecheck=False)
    try:
        assert ok(restored, "words, scaled([3], k=2.0)").value == "(['[0]', '[1]'], '[3][3]')"
        assert ok(restored, "scaled.__annotations__").value == (
            "{'v': list[int] | None, 'k': <class 'float'>, 'return': <class 'str'>}")
        failed = restored.run("s", "scaled(1, k=None)")
        assert "return str(v) * int(k)" in failed.error, failed.error
    finally:
        restored.close()


def test_variables_the_session_still_holds_leave_its_cells_provable(lazy):
    # An agent's `context`, sent with every cell: bound once, then only
    # named (the host sends a digest); a cell that finds the session still
    # holding it binds nothing anew, so the proofs still apply.
    repl, store = lazy
    ok(repl, "len(context)", variables={"context": "abc"})  # bound anew, plain: a binding
    saved = settled_saves(repl, store)
    ok(repl, "n = len(context)", variables={"context": "abc"})
    ok(repl, "for ch in context:\n    n += 1", variables={"context": "abc"})
    assert settled_saves(repl, store) == saved
    ok(repl, "context = 'changed'")
    ok(repl, "n += len(context)", variables={"context": "abc"})  # bound again, plain: a binding
    assert settled_saves(repl, store) == saved
    killed = repl.run("s", "import os\nos._exit(3)", variables={"context": "abc"})
    assert not killed.ok and "rolled back" in killed.error
    assert ok(repl, "n, context", variables={"context": "abc"}).value == "(9, 'abc')"


# Variables bound anew (#39): plain data (a pickle that names nothing)
# replacing plain data or nothing is one of the cell's bindings, so the
# cell stays provable; anything else takes the general path.
def test_a_cell_binding_plain_variables_anew_writes_no_checkpoint_and_rolls_back_exactly(lazy):
    repl, store = lazy
    saved = settled_saves(repl, store)
    ok(repl, "total = len(data) + x", variables={"data": (1, "two", (3, 4.5, None)), "word": "w"})
    ok(repl, "print(word)", variables={"word": "again"})  # bound again, read-only otherwise
    ok(repl, "x += 1", variables={"word": "third"})
    assert settled_saves(repl, store) == saved
    # The rollback point holds the values, not the host's digests of them.
    killed = repl.run("s", "import os\nos._exit(3)")
    assert not killed.ok and "rolled back" in killed.error
    assert ok(repl, "data, word, total, x").value == "((1, 'two', (3, 4.5, None)), 'third', 3, 1)"
    # Named again without its value changing: the session that took over
    # holds copies, so the host sends it again, and the cell sees it.
    assert ok(repl, "word", variables={"word": "third"}).value == "'third'"
    # A list is kept by the session too (to bind it again when it is not
    # resent, as it is after a cell changed it in place): no list the
    # namespace alone holds, so its cell takes the general path.
    saved = settled_saves(repl, store)
    ok(repl, "x += 1", variables={"rows": [[1, 2], {"k": "v"}]})
    assert settled_saves(repl, store) == saved + 1


class RunsWhenLoaded:
    """A host value whose pickle runs code in the session when it is loaded."""

    def __reduce__(self):
        return (exec, ("import __main__\n__main__.box.append('loaded')",))


def test_variables_that_are_not_plain_data_take_the_general_path(lazy):
    repl, store = lazy
    import datetime

    for variables in ({"when": datetime.date(2026, 12, 7)}, {"number": 1j}, {"made": RunsWhenLoaded()}):
        saved = settled_saves(repl, store)
        ok(repl, "x = 1", variables=variables)
        assert settled_saves(repl, store) == saved + 1, variables
    # Plain data replacing what runs code when it is let go.
    ok(repl, "class Noisy:\n    def __del__(self):\n        box.append('let go')\nnoisy = Noisy()")
    saved = settled_saves(repl, store)
    ok(repl, "x = 2", variables={"noisy": "plain"})
    assert settled_saves(repl, store) == saved + 1
    killed = repl.run("s", "import os\nos._exit(3)")
    assert not killed.ok and "rolled back" in killed.error
    assert ok(repl, "x, noisy, number, str(when), made, box").value == (
        "(2, 'plain', 1j, '2026-12-07', None, [1, 2, 'loaded', 'let go'])")


def test_functions_a_first_cell_defines_or_a_restore_brings_back_are_proven_again():
    # A session's first cell takes the general path (a checkpoint is owed),
    # but what its defs made is what the proof saw; a restored session's
    # functions are proven again when their code is what their cell's
    # source compiles to, and not when it was swapped for other code.
    store = CountingStore()
    with dolsot.Repl(store=store, typecheck=False, checkpoint_delay=3600) as repl:
        ok(repl, "def double(v):\n    return v * 2\ndef swapped(v):\n    return v\n"
                 "def other(v):\n    return [v]\ncounter = [0]")
        before = settled_saves(repl, store)
        assert ok(repl, "double(21)").value == "42"
        assert settled_saves(repl, store) == before  # read-only
        ok(repl, "import sys\nswapped.__code__ = other.__code__.replace(co_name='swapped')")
    with dolsot.Repl(store=store, typecheck=False, checkpoint_delay=3600) as repl:
        assert ok(repl, "double(5), swapped(1)").value == "(10, [1])"  # restores: general
        before = settled_saves(repl, store)
        assert ok(repl, "double(4)").value == "8"
        assert settled_saves(repl, store) == before
        ok(repl, "swapped(2)")  # its code is not its def's: not proven
        assert settled_saves(repl, store) == before + 1


def test_a_binding_cell_that_raised_halfway_is_rolled_back_to_exactly_where_it_stopped(lazy):
    # The proof holds for each statement that ran: what the cell changed
    # before it raised is in its names' values, which the host keeps.
    repl, store = lazy
    before = store.saves
    failed = repl.run("s", "box.append(7)\nx += 1\ny = undefined_name\nx += 100")
    assert not failed.ok and "NameError" in failed.error
    assert settled_saves(repl, store) == before  # no checkpoint: a binding cell
    killed = repl.run("s", "import os\nos._exit(3)")
    assert not killed.ok and "rolled back" in killed.error
    assert ok(repl, "box, x").value == "([1, 2, 7], 1)"


# Host tools (#39): a cell that calls one stays proven when what crosses is
# plain data: arguments the C pickler writes by itself, a reply whose pickle
# names nothing. Anything else may run code of the session's or build
# objects the proof did not see, and the cell takes the general path after
# all; so does a call of anything that is not a stub as dolsot made it.
def lookup(key=None):
    if not isinstance(key, str):
        return key
    return {"plain": [1, "two", 3.0, None, {"k": (1, 2)}], "empty": None}.get(key, key)


def dated(year):
    import datetime

    return datetime.date(year, 1, 2)  # its pickle names datetime.date


def taken(*args, **kwargs):
    return len(args) + len(kwargs)  # plain, whatever it was given


def failing(message):
    raise ValueError(message)


@pytest.fixture
def tooled(lazy):
    repl, store = lazy
    repl.tools = {"lookup": lookup, "dated": dated, "failing": failing, "taken": taken}
    ok(repl, "x = 0")  # tools bound
    settled_saves(repl, store)
    return repl, store


TOOL_BINDING = [
    "v = lookup(key='plain')", "v = lookup('plain')\nbox.append(len(v))", "x = len(lookup(key='k' * 3))",
    "lookup(key='empty')", "print(lookup(key=[1, {2: 'b'}, (3.5, b'x', bytearray(b'y'))]))",
    "y = [taken(i, k=i) for i in range(3)]",
]
TOOL_GENERAL = [
    "v = dated(2020)",                                   # the reply imports datetime to be read
    "v = taken(key=1j)",                                 # complex pickles through copyreg
    "v = taken(range(3))",                               # so does range
    "v = taken({1, frozenset({2})}) + taken([x, (1.5j,)])",
]


@pytest.mark.parametrize("code", TOOL_BINDING)
def test_a_cell_calling_a_host_tool_with_plain_data_writes_no_checkpoint(tooled, code):
    repl, store = tooled
    before = store.saves
    ok(repl, code)
    assert settled_saves(repl, store) == before, code


@pytest.mark.parametrize("code", TOOL_GENERAL)
def test_a_tool_call_whose_data_is_not_plain_takes_the_general_path(tooled, code):
    repl, store = tooled
    before = store.saves
    ok(repl, code)
    assert settled_saves(repl, store) == before + 1, code


def test_a_tool_error_in_a_proven_cell_takes_the_general_path(tooled):
    repl, store = tooled
    before = store.saves
    failed = repl.run("s", "box.append(9)\nv = failing('no')")
    assert not failed.ok and "ValueError: no" in failed.error
    assert settled_saves(repl, store) == before + 1
    crashed = repl.run("s", "import os\nos._exit(3)")
    assert not crashed.ok and "rolled back" in crashed.error
    assert ok(repl, "box").value == "[1, 2, 9]"


def test_rollback_after_proven_tool_calls_is_exact(tooled):
    repl, _ = tooled
    ok(repl, "v = lookup(key='plain')\nbox.append(lookup(key=5))")
    ok(repl, "x += len(lookup(key='abc'))")
    crashed = repl.run("s", "v.clear(); box.clear()\nimport os\nos._exit(3)")
    assert not crashed.ok and "rolled back" in crashed.error
    assert ok(repl, "v, box, x").value == "([1, 'two', 3.0, None, {'k': (1, 2)}], [1, 2, 5], 3)"
    # The restored values are the session's own, as before.
    ok(repl, "v.append(lookup(key='empty'))")
    assert ok(repl, "v[-1] is None and len(v)").value == "6"


# What a cell may do to the stubs, and to pickling, before a cell that
# looks provable calls a tool: each makes the call append to `box`, which a
# binding cell's copies would not carry (the cell does not name `box`); the
# general path forks the state after it, so the rollback keeps it.
TAMPERED = [
    # The stub's code swapped for other code with as many free variables.
    "import builtins\n"
    "def outer():\n    name = transport = failed = None\n"
    "    def tool(*args, **kwargs):\n        import __main__\n        __main__.box.append('ran')\n"
    "        return (name, transport, failed) and 1\n    return tool\n"
    "builtins.lookup.__code__ = outer().__code__",
    # Its closure's transport swapped (a cell's contents can be set).
    "import builtins\nstub = builtins.lookup\n"
    "def evil(name, args, kwargs, failed):\n    box.append('ran')\n    return 1\n"
    "stub.__closure__[stub.__code__.co_freevars.index('transport')].cell_contents = evil\n"
    "del stub",
    # A function made from the stub's own code with a closure of the cell's.
    "import builtins, types\nstub = builtins.lookup\n"
    "def evil(name, args, kwargs, failed):\n    box.append('ran')\n    return 1\n"
    "cells = tuple(types.CellType(evil if n == 'transport' else c.cell_contents)\n"
    "              for n, c in zip(stub.__code__.co_freevars, stub.__closure__))\n"
    "builtins.lookup = types.FunctionType(stub.__code__, {}, 'lookup', None, cells)\n"
    "del stub, cells",
    # pickle's functions replaced before the session's first call.
    "import pickle\nreal = pickle.dumps\n"
    "def dumps(*args, **kwargs):\n    box.append('ran')\n    return real(*args, **kwargs)\n"
    "pickle.dumps = dumps",
    # ... or _pickle's module renamed and a function of another C module put there.
    "import pickle, _pickle, marshal\nimport __main__\n"
    "def loads(data):\n    __main__.box.append('ran')\n    return [1]\n"
    "pickle.loads = loads",
]


@pytest.mark.parametrize("setup", TAMPERED)
def test_a_tampered_tool_call_is_never_taken_for_a_proven_one(setup):
    store = CountingStore()
    with dolsot.Repl(store=store, typecheck=False, checkpoint_delay=3600) as repl:
        repl.tools = {"lookup": lookup}
        ok(repl, "box = []")
        ok(repl, setup)
        before = settled_saves(repl, store)
        ok(repl, "v = lookup(key='plain')")
        assert settled_saves(repl, store) == before + 1  # the general path
        crashed = repl.run("s", "import os\nos._exit(3)")
        assert not crashed.ok and "rolled back" in crashed.error
        assert ok(repl, "box").value == "['ran']"


def test_a_copyreg_reducer_runs_and_is_kept_through_a_rollback(tooled):
    # A reducer the session registers for complex runs when an argument is
    # pickled: the cell is not a binding cell, so what it did survives.
    repl, store = tooled
    ok(repl, "import copyreg\ndef reduce(c):\n    box.append('reduced')\n    return complex, (c.real, c.imag)\n"
             "copyreg.pickle(complex, reduce)")
    before = settled_saves(repl, store)
    ok(repl, "v = taken(key=2j)")
    assert settled_saves(repl, store) == before + 1
    crashed = repl.run("s", "import os\nos._exit(3)")
    assert not crashed.ok and "rolled back" in crashed.error
    assert ok(repl, "box, v").value == "([1, 2, 'reduced'], 1)"


def test_a_rollback_and_a_restart_keep_the_order_names_were_bound_in(tmp_path):
    # globals() is a dict: its order is the session's state too. Binding
    # cells' values are replayed (into the snapshot, from the journal) in
    # the order their names were first bound, not sorted.
    listing = "[k for k in globals() if not k.startswith('__')]"
    repl = dolsot.Repl(store=FileStore(str(tmp_path)), typecheck=False, checkpoint_delay=3600)
    try:
        ok(repl, "import json")  # the general path: the snapshot holds this
        ok(repl, "zeta = 1")
        ok(repl, "alpha = 2; mid = [3]; b2 = 'x'; b10 = 'y'")
        # One cell binding many names: the proof reports them in no order.
        many = [f"n{(i * 7) % 53}" for i in range(53)]
        ok(repl, "; ".join(f"{name} = {i}" for i, name in enumerate(many)))
        ok(repl, "zeta += 1")
        # (Listing globals() is a cell that takes the general path: only after.)
        order = str(["json", "zeta", "alpha", "mid", "b2", "b10", *many])
        crashed = repl.run("s", "import os; os._exit(3)")
        assert not crashed.ok and "rolled back" in crashed.error
        assert ok(repl, listing).value == order
        assert ok(repl, "(zeta, alpha, mid, b2, b10)").value == "(2, 2, [3], 'x', 'y')"
    finally:
        repl.close()
    again = dolsot.Repl(store=FileStore(str(tmp_path)), typecheck=False)
    try:
        assert ok(again, listing).value == order
    finally:
        again.close()
