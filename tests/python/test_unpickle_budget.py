"""Bytes from a session have a size (issue 36 §3): a session's pickle is
walked within the host's budget (max_unpickle_mb, bindings/pickle_budget.h)
before anything is built, so a small pickle cannot become a big value, or
take the host's time, in the host. Each class of blow-up is refused with an
error naming the budget, and the host's peak memory does not move."""

from __future__ import annotations

import collections
import datetime
import decimal
import fractions
import pickle
import uuid

import pytest

import dolsot
from dolsot import _tools
from dolsot.store import MemoryStore

MiB = 1 << 20


def _call(function, *args):
    """An object whose pickle is `function(*args)` (REDUCE)."""

    class Call:
        def __reduce__(self):
            return (function, args)

    return Call()


def _body(value) -> bytes:
    """pickle.dumps(value, 5) without its PROTO, FRAME and STOP, to splice."""
    data = pickle.dumps(value, 5)
    assert data[:2] == b"\x80\x05" and data[-1:] == b"."
    data = data[2:-1]
    if data[:1] == b"\x95":
        data = data[9:]
    return data


def _peak_kib() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise AssertionError("no VmHWM")


def _reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")  # resets VmHWM to the current RSS


def _refused(data: bytes, host=None) -> str:
    """The refusal of `data`, checking that decoding it grew the host's peak
    memory by less than 32 MiB (what the refused values would take is
    hundreds of MiB and more)."""
    host = host or _tools.ToolHost({}, None, "safe")
    _reset_peak()
    before = _peak_kib()
    with pytest.raises(pickle.UnpicklingError) as refused:
        host.loads(data)
    assert _peak_kib() - before < 32 * 1024, "the host's memory grew while decoding"
    return str(refused.value)


BLOW_UPS = {
    # constructors fed a lazy range, or a size
    "list(range)": _call(list, range(2 * 10**7)),
    "tuple(range)": _call(tuple, range(2 * 10**7)),
    "set(range)": _call(set, range(10**7)),
    "frozenset(range)": _call(frozenset, range(10**7)),
    "deque(range)": _call(collections.deque, range(10**8)),
    "Counter(range)": _call(collections.Counter, range(10**7)),
    "OrderedDict(range)": _call(collections.OrderedDict, range(10**8)),
    "dict(range)": _call(dict, range(10**8)),
    "bytearray(n)": _call(bytearray, 300 * MiB),
    "bytes(n)": _call(bytes, 10**9),
    "bytes(range)": _call(bytes, range(10**9)),
    "bytes(huge int)": _call(bytes, 2**100),
    "list(range(huge))": _call(list, range(2**100)),
    "list(str)": _call(list, "é" * (3 * MiB)),
    "bytearray(str, enc)": _call(bytearray, "x" * (20 * MiB), "latin-1"),
}
# A value built once, copied by a constructor each time the memo hands it out.
_SHARED = list(range(10**5))
BLOW_UPS["memo copies"] = [_call(list, _SHARED) for _ in range(2000)]
BLOW_UPS["memo copies into sets"] = [_call(set, _SHARED) for _ in range(500)]


@pytest.mark.parametrize("name", sorted(BLOW_UPS))
def test_each_constructor_blow_up_is_refused_naming_the_budget(name):
    message = _refused(pickle.dumps(BLOW_UPS[name], 5))
    assert "budget" in message and "max_unpickle_mb" in message, message
    assert "64 MiB" in message


def test_the_default_budget_is_64_mib():
    assert _tools.DEFAULT_MAX_UNPICKLE_MB == 64
    assert _tools.ToolHost({}, None, "safe").max_unpickle_bytes == 64 * MiB


@pytest.mark.parametrize("opcode", [b"\x8e", b"\x8d", b"\x96", b"B", b"X", b"T"])
def test_a_declared_length_past_the_data_allocates_nothing(opcode):
    width = 8 if opcode in (b"\x8e", b"\x8d", b"\x96") else 4
    for declared in (2**31 - 1, 2**40, 2**63 - 1):
        if declared >= 2 ** (8 * width):
            continue
        data = b"\x80\x05" + opcode + declared.to_bytes(width, "little") + b"abc."
        message = _refused(data)
        assert "budget" in message or "past the data" in message, message


def test_a_str_is_charged_by_its_widest_character():
    # 30 MiB of ASCII is a 30 MiB str; one character past U+FFFF makes
    # CPython store every character in 4 bytes: 120 MiB.
    host = _tools.ToolHost({}, None, "safe")
    assert len(host.loads(pickle.dumps("a" * (30 * MiB), 5))) == 30 * MiB
    message = _refused(pickle.dumps("a" * (30 * MiB) + "\U0001F600", 5))
    assert "budget" in message and "str" in message


def test_a_memo_index_cannot_grow_the_memo():
    # LONG_BINPUT 0x0fffffff: CPython zero-fills a memo array of twice that.
    message = _refused(b"\x80\x05]r\xff\xff\xff\x0f.")
    assert "budget" in message and "memo" in message


def test_deep_nesting_is_refused():
    depth = 200_000
    data = b"\x80\x05" + b"]" * depth + b"a" * (depth - 1) + b"."
    message = _refused(data)
    assert "deeper" in message and "1000" in message and "budget" in message
    # A tuple nested deeper than the limit would also recurse in hash().
    data = b"\x80\x05" + b")" + b"\x85" * 5000 + b"."
    assert "deeper" in _refused(data)


def test_hashing_a_shared_tuple_dag_is_refused():
    dag = ()
    for _ in range(80):
        dag = (dag, dag)  # 2**80 leaves, 81 tuples: hash() would never return
    data = b"\x80\x05\x8f(" + _body(dag) + b"\x90."  # EMPTY_SET MARK dag ADDITEMS
    message = _refused(data)
    assert "hash" in message and "budget" in message
    # The same value as a plain list element hashes nothing: it is decoded
    # (shared, as it was: compared by identity, never walked).
    loaded = _tools.ToolHost({}, None, "safe").loads(pickle.dumps([dag], 5))[0]
    assert loaded[0] is loaded[1] and loaded[0][0] is loaded[0][1]


@pytest.mark.parametrize("value", [
    _call(int, "9" * 100_000),
    _call(int, b"9" * 100_000, 10),
    _call(int, decimal.Decimal("1e999999")),
    _call(fractions.Fraction, "1e999999999"),
    _call(fractions.Fraction, decimal.Decimal("1e999999999")),
    _call(fractions.Fraction, 3**200_000, 7**100_000),
    _call(str, 7**200_000),
    _call(str, b"x" * 100, "punycode"),
    _call(str, b"x" * 100, "utf-8", "a_handler_the_host_registered"),
    _call(bytes, "x" * 100, "utf-8", "a_handler_the_host_registered"),
    _call(complex, "1" * 100_000),
    _call(float, decimal.Decimal("1e999999999")),
])
def test_conversions_that_cost_more_than_their_bytes_are_refused(value):
    message = _refused(pickle.dumps(value, 5))
    assert "budget" in message, message


def test_unknown_names_and_state_on_classes_are_refused():
    import os

    assert "posix.system" in _refused(pickle.dumps(_call(os.system, "true"), 5))
    # BUILD on a class (setattr(Counter, 'most_common', ...)) would change it in the host.
    data = (b"\x80\x05\x8c\x0bcollections\x8c\x07Counter\x93"
            b"N}\x8c\x0bmost_common\x8c\x01x\x8c\x01y\x86s\x86b.")
    assert "state" in _refused(data)
    assert callable(collections.Counter.most_common)


def test_cheap_decodes_of_named_values_still_pass():
    host = _tools.ToolHost({}, None, "safe")
    values = [
        decimal.Decimal("1e999999999"), decimal.Decimal("-0.000123"), fractions.Fraction(3, 7),
        datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc),
        datetime.date(2026, 1, 2), datetime.time(1, 2), datetime.timedelta(days=3),
        datetime.timezone(datetime.timedelta(hours=2), "X"), uuid.UUID(int=12345),
        complex(1, 2), slice(1, 10, 2), range(10**30), collections.OrderedDict(a=1, b=[2]),
        collections.deque([1, 2], maxlen=5), collections.Counter("abracadabra"),
        {1, 2, (3, 4)}, frozenset({"a"}), bytearray(b"xyz"), 10**4000, [[[[]]]],
    ]
    assert host.loads(pickle.dumps(_call(str, b"caf\xc3\xa9", "utf-8", "replace"), 5)) == "café"
    for protocol in (3, 4, 5):  # protocol 2 names _codecs.encode for bytes
        for value in values:
            assert host.loads(pickle.dumps(value, protocol)) == value, (protocol, value)


def test_large_values_under_the_budget_pass():
    host = _tools.ToolHost({}, None, "safe")
    for value in (list(range(10**6)), b"x" * (40 * MiB), "é" * (10 * MiB), set(range(10**5)),
                  {str(i): [i, float(i)] for i in range(10**5)}, collections.deque(range(10**6)),
                  [decimal.Decimal(i) for i in range(10**4)], 2**(8 * MiB)):
        assert host.loads(pickle.dumps(value, 5)) == value


def test_the_option_moves_the_limit():
    value = pickle.dumps(b"x" * (3 * MiB), 5)
    small = _tools.ToolHost({}, None, "safe", max_unpickle_mb=2)
    message = _refused(value, small)
    assert "2 MiB" in message and "max_unpickle_mb" in message
    assert _tools.ToolHost({}, None, "safe", max_unpickle_mb=4).loads(value) == b"x" * (3 * MiB)
    big = pickle.dumps(_call(bytes, 100 * MiB), 5)
    _refused(big)
    assert len(_tools.ToolHost({}, None, "safe", max_unpickle_mb=256).loads(big)) == 100 * MiB
    # unpickle="full" trusts the session (it could run any code anyway).
    assert _tools.ToolHost({}, None, "full", max_unpickle_mb=1).loads(value) == b"x" * (3 * MiB)


@pytest.mark.parametrize("backend", [dolsot.Repl, dolsot.InProcessSession])
def test_both_backends_take_the_option_in_one_call_shape(backend):
    kwargs = {"store": MemoryStore()} if backend is dolsot.Repl else {}
    with backend(typecheck=False, final="SUBMIT", max_unpickle_mb=8, **kwargs) as b:
        r = b.run("s", "SUBMIT([1, 2])")
        assert r.ok and r.returned == [1, 2], r.error
    with pytest.raises(ValueError, match="max_unpickle_mb"):
        backend(max_unpickle_mb=0, **kwargs)


@pytest.mark.parametrize("bad, error", [
    ("64", TypeError), (1.5, TypeError), (True, TypeError), (0, ValueError), (-1, ValueError),
    (2**40, ValueError),
])
def test_a_malformed_option_is_a_clear_error(bad, error):
    with pytest.raises(error, match="max_unpickle_mb"):
        dolsot.Repl(store=MemoryStore(), max_unpickle_mb=bad)


FINAL = (
    "class Big:\n"
    "    def __reduce__(self):\n"
    "        return (list, (range(2 * 10**7),))\n"
)


def test_a_repl_refuses_a_final_answer_and_tool_arguments_over_the_budget():
    seen = []
    with dolsot.Repl(store=MemoryStore(), typecheck=False, final="SUBMIT",
                     tools={"take": seen.append, "echo": lambda value: len(value)}) as b:
        _reset_peak()
        before = _peak_kib()
        r = b.run("s", FINAL + "SUBMIT(Big())")
        assert not r.ok and r.error_type == "UnpicklingError", r.error
        assert "budget" in r.error and "64 MiB" in r.error and not r.has_returned
        r = b.run("s", "take(Big())")
        assert not r.ok and "budget" in r.error and "take()" in r.error, r.error
        # The fast path (plain pickles: C, tool_calls_from_python.cc) walks too.
        r = b.run("s", "take(list(range(3 * 10**6)))")
        assert not r.ok and "budget" in r.error, r.error
        assert seen == []
        assert _peak_kib() - before < 64 * 1024, "the host's memory grew"
        # Under the budget, both still work.
        r = b.run("s", "echo(list(range(10**5)))")
        assert r.ok and r.value == str(10**5), r.error
        r = b.run("s", "SUBMIT(bytes(10**6))")
        assert r.ok and r.returned == bytes(10**6), r.error
    with dolsot.Repl(store=MemoryStore(), typecheck=False, final="SUBMIT",
                     max_unpickle_mb=256) as b:
        r = b.run("s", FINAL.replace("2 * 10**7", "10**6") + "SUBMIT(Big())")
        assert r.ok and r.returned == list(range(10**6)), r.error


def test_a_length_past_the_data_is_malformed():
    assert _tools.ToolHost({}, None, "safe").loads(b"\x80\x05C\x03abc.") == b"abc"
    assert "past the data" in _refused(b"\x80\x05C\x09abc.")
