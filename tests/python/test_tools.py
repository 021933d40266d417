"""Host tools, per-call variables, final answers and error_type (issue #17),
on both backends with one call shape."""

from __future__ import annotations

import asyncio
import os
import threading

import pytest

import dolsot
from dolsot.store import MemoryStore


class Missing(Exception):
    exit_code = 3


def _make(kind, **kwargs):
    if kind == "repl":
        kwargs.setdefault("store", MemoryStore())
        return dolsot.Repl(typecheck=False, **kwargs)
    return dolsot.InProcessSession(typecheck=False, timeout=20, **kwargs)


@pytest.fixture(params=["inprocess", "repl"])
def kind(request):
    return request.param


@pytest.fixture
def make(kind):
    made = []

    def factory(**kwargs):
        backend = _make(kind, **kwargs)
        made.append(backend)
        return backend

    yield factory
    for backend in made:
        backend.close()


def search(query, k=2, *, upper=False):
    hit = query.upper() if upper else query
    return [hit] * k


def lookup(name):
    raise Missing(f"{name} not found")


async def double(x):
    await asyncio.sleep(0)
    return 2 * x


def test_arguments_defaults_and_keywords_cross(make):
    b = make(tools={"search": search})
    assert b.capabilities.tools is True
    assert b.run("s", "search('a')").value == "['a', 'a']"
    assert b.run("s", "search('a', 3, upper=True)").value == "['A', 'A', 'A']"
    r = b.run("s", "search()")
    assert not r.ok and r.error_type == "TypeError" and "query" in r.error


def test_async_tools_are_awaited(make):
    b = make(tools={"double": double})
    assert b.run("s", "double(21)").value == "42"


def test_a_tool_exception_reraises_with_its_type_message_and_exit_code(make):
    b = make(tools={"lookup": lookup})
    r = b.run("s", "lookup('ada')")
    assert not r.ok
    assert r.error_type == "Missing"
    assert "ada not found" in r.error
    assert r.exit_code == 3
    # A builtin exception is the very type in the cell.
    b.tools["boom"] = lambda: {}["key"]
    r = b.run("s", "try:\n    boom()\nexcept KeyError as e:\n    caught = repr(e)\ncaught")
    assert r.ok and r.value == "\"KeyError('key')\""


def _inner_lookup(name):
    return {}[name]


def chained_lookup(name):
    try:
        return _inner_lookup(name)
    except KeyError as error:
        raise Missing(f"{name} not found") from error


def test_a_tool_error_shows_no_host_path_on_either_backend(make):
    # What the model reads when a tool raises: the cell's line, the
    # exception's type and message; no frame of the host's (its files,
    # dolsot's own), the chain the tool raised from included.
    b = make(tools={"lookup": chained_lookup, "adouble": double})
    here = os.path.basename(__file__)
    printed = (
        "import traceback\n"
        "try:\n    lookup('ada')\nexcept Exception:\n    traceback.print_exc()\n"
        "try:\n    adouble()\nexcept TypeError:\n    traceback.print_exc()"
    )
    r = b.run("s", "lookup('ada')")
    assert not r.ok and r.error_type == "Missing" and "ada not found" in r.error
    shown = b.run("s", printed)
    assert shown.ok, shown.error
    assert "Missing: ada not found" in shown.stdout and "TypeError" in shown.stdout, shown.stdout
    for text in (r.error, shown.stdout):
        assert here not in text and "dolsot/" not in text and "_inner_lookup" not in text, text
        assert "/" not in text.replace("<dolsot host tools>", ""), text


def test_tools_are_never_held_and_can_change_between_cells(make):
    b = make(tools={"search": search})
    r = b.run("s", "x = search('q', 1)")
    assert r.held == ["x"]
    b.tools["extra"] = lambda: 7
    assert b.run("s", "extra()").value == "7"
    del b.tools["extra"]
    r = b.run("s", "extra()")
    assert not r.ok and r.error_type == "NameError"
    # A cell may shadow a tool with a name of its own.
    r = b.run("s", "search = 5\nsearch")
    assert r.value == "5" and "search" in r.held


def test_tools_called_from_threads_the_cell_starts(make):
    b = make(tools={"search": search})
    code = (
        "import threading\n"
        "out = []\n"
        "ts = [threading.Thread(target=lambda i=i: out.append(search(str(i), 1)[0])) for i in range(8)]\n"
        "[t.start() for t in ts]; [t.join() for t in ts]\n"
        "sorted(out)"
    )
    r = b.run("s", code)
    assert r.ok, r.error
    assert r.value == str(sorted(str(i) for i in range(8)))


def test_nested_calls_and_a_tool_that_runs_a_cell_elsewhere(make):
    b = make(tools={"search": search})
    assert b.run("s", "search(search('z', 1)[0], 2)").value == "['z', 'z']"
    b.tools["sub"] = lambda code: b.run("helper", code).value
    assert b.run("s", "sub('6 * 7')").value == "'42'"


def test_an_unpicklable_argument_or_result_is_a_clear_error(make, kind):
    b = make(tools={"search": search, "lock": threading.Lock})
    r = b.run("s", "import threading\nsearch(threading.Lock())")
    r2 = b.run("s", "lock()")
    if kind == "repl":
        assert not r.ok and r.error_type == "TypeError"
        assert "search" in r.error and "lock" in r.error.lower()
        assert not r2.ok and "lock" in r2.error and "cannot be pickled" in r2.error
    else:  # in-process, values are the objects themselves
        assert r.ok and r2.ok
    assert b.run("s", "1 + 1").value == "2"  # the session is fine


def test_a_slow_tool_does_not_block_other_sessions(make):
    gate = threading.Event()
    b = make(tools={"wait": lambda: gate.wait(20)})
    results = {}
    slow = threading.Thread(target=lambda: results.setdefault("slow", b.run("slow", "wait()")))
    slow.start()
    try:
        assert b.run("other", "2 + 2").value == "4"
    finally:
        gate.set()
        slow.join()
    assert results["slow"].value == "True"


def test_a_killed_cell_abandons_its_tool_and_the_session_survives(make, kind):
    release = threading.Event()
    started = threading.Event()

    def slow():
        started.set()
        release.wait(30)
        return "late"

    b = make(tools={"slow": slow})
    b.run("s", "kept = 1")
    r = b.run("s", "slow()", timeout=1)
    assert started.is_set()
    assert r.outcome == dolsot.Outcome.TIMEOUT and r.error_type == "TimeoutError"
    release.set()
    after = b.run("s", "kept")
    if kind == "repl":  # rolled back, result of the abandoned tool dropped
        assert after.ok and after.value == "1"
    else:  # a cooperative timeout: the cell's thread ends once the tool returns
        assert after.value == "1" or after.outcome in (dolsot.Outcome.OK,)


def test_a_repl_session_restored_from_its_checkpoint_gets_the_current_tools():
    store = MemoryStore()
    with dolsot.Repl(store=store, typecheck=False, tools={"search": search}) as first:
        first.run("s", "def f():\n    return search('r', 1)")
    with dolsot.Repl(store=store, typecheck=False, tools={"search": lambda q, k=2: ["new"]}) as second:
        r = second.run("s", "f()")
        assert r.value == "['new']", r.error
        assert r.held == ["f"]


def test_variables_are_bound_before_the_cell_and_resent_only_when_changed(make):
    b = make()
    context = "x" * 1_000_000
    r = b.run("s", "len(ctx)", variables={"ctx": context})
    assert r.value == "1000000" and r.held == ["ctx"]
    assert b.run("s", "ctx = 'mine'\nlen(ctx)").value == "4"
    # The same object again rebinds the name (without resending it to a Repl).
    assert b.run("s", "len(ctx)", variables={"ctx": context}).value == "1000000"
    data = [1, 2]
    assert b.run("s", "sum(d)", variables={"d": data}).value == "3"
    data.append(3)  # the same list, changed: sent again
    assert b.run("s", "sum(d)", variables={"d": data}).value == "6"
    with pytest.raises(TypeError, match="variables"):
        b.run("s", "1", variables=[("a", 1)])  # type: ignore[arg-type]
    with pytest.raises(dolsot.ConfigError, match="keyword"):
        b.run("s", "1", variables={"class": 1})


def test_a_variable_sent_to_a_rolled_back_cell_is_sent_again():
    with dolsot.Repl(store=MemoryStore(), typecheck=False) as b:
        big = "y" * 100_000
        r = b.run("s", "import os; os._exit(3)", variables={"v": big})
        assert r.outcome == dolsot.Outcome.CRASHED
        assert b.run("s", "len(v)", variables={"v": big}).value == "100000"


def test_final_answers_come_back_as_data(make, kind):
    b = make(final="SUBMIT")
    r = b.run("s", "x = 1\nSUBMIT({'answer': 42, 'items': [1, 2]})\nx = 2")
    assert r.ok and r.outcome == dolsot.Outcome.OK and r.has_returned
    assert r.returned == {"answer": 42, "items": [1, 2]}
    assert b.run("s", "x").value == "1"  # the cell ended at SUBMIT
    assert b.run("s", "SUBMIT(answer='a', score=0.5)").returned == {"answer": "a", "score": 0.5}
    assert b.run("s", "SUBMIT(1, 2)").returned == (1, 2)
    plain = b.run("s", "3")
    assert not plain.has_returned and plain.returned is None
    if kind == "inprocess":  # the object itself
        sentinel = object()
        b.tools["give"] = lambda: sentinel
        assert b.run("s", "SUBMIT(give())").returned is sentinel


def test_a_repl_refuses_to_unpickle_code_from_a_session_unless_trusted(tmp_path):
    marker = tmp_path / "pwned"
    code = (
        "class Evil:\n"
        "    def __reduce__(self):\n"
        f"        return (open, ({str(marker)!r}, 'w'))\n"
        "SUBMIT(Evil())"
    )
    seen = []
    with dolsot.Repl(store=MemoryStore(), typecheck=False, final="SUBMIT",
                     tools={"take": seen.append}) as b:
        r = b.run("s", code)
        assert not r.ok and r.error_type == "UnpicklingError" and "io.open" in r.error
        assert "Traceback" not in r.error
        r = b.run("s", code.replace("SUBMIT(Evil())", "take(Evil())"))
        assert not r.ok and r.error_type == "UnpicklingError", r.error
        assert seen == []
        r = b.run("s", "import pathlib\nSUBMIT(pathlib.PurePosixPath('/x'))")
        assert not r.ok and "pathlib" in r.error
    assert not marker.exists()
    with dolsot.Repl(store=MemoryStore(), typecheck=False, final="SUBMIT", unpickle="full") as b:
        r = b.run("s", "import pathlib\nSUBMIT(pathlib.PurePosixPath('/x'))")
        assert r.ok and str(r.returned) == "/x"
    with pytest.raises(ValueError, match="unpickle"):
        dolsot.Repl(store=MemoryStore(), unpickle="maybe")


def test_error_type_names_every_kind_of_failure(make):
    b = make()
    assert b.run("s", "1/0").error_type == "ZeroDivisionError"
    assert b.run("s", "def f(:").error_type == "SyntaxError"
    assert b.run("s", "raise SystemExit(4)").error_type == "SystemExit"
    assert b.run("s", "while True: pass", timeout=0.5).error_type == "TimeoutError"
    assert b.run("s", "1").error_type is None


def test_bad_tools_and_final_names_are_refused(kind):
    with pytest.raises(TypeError, match="not callable"):
        _make(kind, tools={"x": 3})
    b = _make(kind, tools={"print": print})
    try:
        with pytest.raises(dolsot.ConfigError, match="builtin"):
            b.run("s", "1")
        b.tools = {"ok_tool": print}
        b.tools["__x__"] = print
        with pytest.raises(dolsot.ConfigError, match="__"):
            b.run("s", "1")
    finally:
        b.close()


def test_closing_with_a_tool_in_flight_leaves_no_worker():
    release = threading.Event()
    b = dolsot.Repl(store=MemoryStore(), typecheck=False, tools={"hang": lambda: release.wait(30)})
    box = {}
    t = threading.Thread(target=lambda: box.setdefault("r", b.run("s", "hang()", timeout=2)))
    t.start()
    t.join()
    pid = b.worker_pid
    b.close()
    release.set()
    assert box["r"].outcome == dolsot.Outcome.TIMEOUT
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_a_repl_tool_knows_which_session_called_it():
    with dolsot.Repl(store=MemoryStore(), typecheck=False,
                     tools={"who": lambda: dolsot.calling_session.get()}) as b:
        assert b.run("alpha", "who()").value == "'alpha'"
        assert b.run("beta", "who()").value == "'beta'"
    assert dolsot.calling_session.get() is None


def test_run_returns_at_the_deadline_while_a_tool_on_the_cells_own_pipes_still_runs():
    # A Repl cell's calls go on pipes of the cell's own, read by a host
    # thread that runs each call itself; run() must still come back at the
    # deadline while that thread is inside the tool.
    release = threading.Event()
    ended = threading.Event()
    seen = {}

    def slow():
        seen["thread"] = threading.current_thread().name
        seen["released"] = release.wait(60)  # True only once the test releases it
        ended.set()
        return "late"

    with dolsot.Repl(store=MemoryStore(), typecheck=False,
                     tools={"slow": slow, "one": lambda: 1}) as b:
        b.run("s", "kept = 1")
        r = b.run("s", "one(); slow()", timeout=1)
        returned_before_the_tool = not ended.is_set()
        release.set()
        assert ended.wait(60)
        assert returned_before_the_tool
        assert seen["released"] is True
        assert seen["thread"].startswith("dolsot-tool-pipes")
        assert r.outcome == dolsot.Outcome.TIMEOUT and r.error_type == "TimeoutError"
        # Rolled back; the abandoned reply went nowhere, and the next cell's
        # calls are answered in order.
        assert b.run("s", "kept").value == "1"
        assert b.run("s", "[one() + one() for _ in range(50)][-1]").value == "2"


def test_a_tool_called_from_four_cell_threads_at_once_runs_four_times_at_once(make, kind):
    # The barrier passes only when all four calls are in the host together: one
    # waits on the cell's own pipes, the others came the runner's socket.
    barrier = threading.Barrier(4, timeout=30)
    names = set()
    lock = threading.Lock()

    def meet(i):
        with lock:
            names.add(threading.current_thread().name)
        barrier.wait()
        return i * 10

    b = make(tools={"meet": meet})
    code = (
        "import threading\n"
        "out = []\n"
        "ts = [threading.Thread(target=lambda i=i: out.append(meet(i))) for i in range(4)]\n"
        "[t.start() for t in ts]; [t.join() for t in ts]\n"
        "sorted(out)"
    )
    for _ in range(3):
        barrier.reset()
        names.clear()
        r = b.run("s", code, timeout=60)
        assert r.ok, r.error
        assert r.value == "[0, 10, 20, 30]"
        assert len(names) == 4
        if kind == "repl":
            assert sum(name.startswith("dolsot-tool-pipes") for name in names) == 1


def test_closing_a_repl_ends_its_tool_pipes_threads():
    earlier = set(threading.enumerate())  # other backends' threads are not this one's
    with dolsot.Repl(store=MemoryStore(), typecheck=False, tools={"one": lambda: 1}) as b:
        assert b.run("a", "one() + one()").value == "2"
        assert b.run("b", "one()").value == "1"
        servers = [t for t in threading.enumerate()
                   if t.name.startswith("dolsot-tool-pipes") and t not in earlier]
        assert servers  # the cells' calls were served on their own pipes
    for thread in servers:
        thread.join(30)
        assert not thread.is_alive(), thread.name


def test_calls_from_many_threads_each_get_their_own_answer(make):
    # Calls from eight threads interleave on the cell's own pipes and the
    # runner's (whichever is free): every reply must reach its own caller.
    b = make(tools={"echo": lambda i, j: (i, j)})
    code = (
        "import threading\n"
        "bad = []\n"
        "def work(i):\n"
        "    for j in range(200):\n"
        "        if echo(i, j) != (i, j):\n"
        "            bad.append((i, j))\n"
        "ts = [threading.Thread(target=work, args=(i,)) for i in range(8)]\n"
        "[t.start() for t in ts]; [t.join() for t in ts]\n"
        "(len(bad), echo('last', 0))"
    )
    r = b.run("s", code, timeout=120)
    assert r.ok, r.error
    assert r.value == "(0, ('last', 0))"


def test_a_sandboxed_repl_calls_tools_over_the_cells_own_pipes():
    names = set()

    def add(a, b):
        names.add(threading.current_thread().name)
        return a + b

    with dolsot.Repl(store=MemoryStore(), typecheck=False, sandbox=dolsot.Sandbox(),
                     tools={"add": add}) as b:
        r = b.run("s", "sum(add(i, 1) for i in range(100))")
        assert r.ok, r.error
        assert r.value == "5050"
    assert len(names) == 1 and names.pop().startswith("dolsot-tool-pipes")


def test_a_tool_returning_an_awaitable_is_awaited_on_the_cells_own_pipes():
    # Not an `async def`: the host learns it only from the value returned.
    with dolsot.Repl(store=MemoryStore(), typecheck=False,
                     tools={"later": lambda x: double(x)}) as b:
        assert b.run("s", "later(4), later(x=5)").value == "(8, 10)"


def test_a_trusting_repl_takes_any_picklable_argument():
    with dolsot.Repl(store=MemoryStore(), typecheck=False, unpickle="full",
                     tools={"name_of": lambda p, *, suffix="": p.name + suffix}) as b:
        r = b.run("s", "import pathlib\nname_of(pathlib.PurePosixPath('/a/b.txt'), suffix='!')")
        assert r.ok and r.value == "'b.txt!'", r.error


def test_a_stub_kept_after_its_tool_was_removed_says_it_is_gone():
    with dolsot.Repl(store=MemoryStore(), typecheck=False,
                     tools={"search": search, "other": lambda: 1}) as b:
        assert b.run("s", "kept = search\nkept('x', 1)").value == "['x']"
        del b.tools["search"]
        r = b.run("s", "kept('x', 1)")
        assert not r.ok and r.error_type == "LookupError"
        assert "search() is not available in the host any more" in r.error
        assert b.run("s", "other()").value == "1"  # the cell's other tools still answer


def test_the_cells_transport_refuses_malformed_calls_with_a_clear_error():
    # What a cell's code could do with the stub's transport: no hang, no crash.
    with dolsot.Repl(store=MemoryStore(), typecheck=False, tools={"search": search}) as b:
        grab = ("tr = [c.cell_contents for c in search.__closure__\n"
                "      if getattr(c.cell_contents, '__name__', '') == 'transport'][0]\n")
        r = b.run("s", grab + "tr('search', ['not', 'a tuple'], {}, None)")
        assert not r.ok and r.error_type == "TypeError" and "transport(name: str" in r.error
        r = b.run("s", "tr('search', (), {}, None)")  # the tool raises: failed(...) is not callable
        assert not r.ok and r.error_type == "TypeError"
        r = b.run("s", "def failed(*a):\n    raise LookupError(a[3])\ntr('nosuch', (), {}, failed)")
        assert not r.ok and r.error_type == "LookupError"
        assert b.run("s", "tr('search', ('q',), {'k': 1}, failed)").value == "['q']"


def test_a_stub_called_after_its_cell_ended_fails_clearly_and_never_hangs():
    # A thread of the cell keeps calling once the cell is over; the next cell
    # has no tools, so wherever the call falls, it fails with a clear error.
    with dolsot.Repl(store=MemoryStore(), typecheck=False, tools={"noop": lambda: None}) as b:
        code = (
            "import threading\n"
            "called = threading.Event()\n"
            "outcome = []\n"
            "def loop(stub=noop):\n"
            "    try:\n"
            "        while True:\n"
            "            stub()\n"
            "            called.set()\n"
            "    except BaseException as error:\n"
            "        outcome.append((type(error).__name__, str(error)))\n"
            "t = threading.Thread(target=loop, daemon=True)\n"
            "t.start()\n"
            "called.wait()\n"
        )
        assert b.run("s", code).ok
        del b.tools["noop"]
        r = b.run("s", "t.join()\noutcome[0]")
        assert r.ok, r.error
        kind, message = eval(r.value)  # noqa: S307 - a tuple of two str the cell printed
        # Sent after the cell ended, in flight when it ended, or landed in the next cell.
        clear = {
            "ConnectionError": ("can be called only while a cell runs",
                                "the cell ended before the host answered"),
            "LookupError": ("is not available in the host any more",),
        }
        assert any(text in message for text in clear.get(kind, ())), r.value
        assert b.run("s", "1 + 1").value == "2"
