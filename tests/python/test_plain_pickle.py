"""plain_pickle (bindings/plain_pickle.h): the host decodes a session's pickle
with pickle.loads only when it names nothing. The property that matters is
soundness: whatever it calls plain, an unpickler that refuses every name
loads exactly as pickle.loads does, for well-formed pickles and for
thousands of mangled ones."""

from __future__ import annotations

import collections
import datetime
import decimal
import io
import os
import pickle
import pickletools
import random

import pytest

from dolsot import _tools
from dolsot._dolsot import plain_pickle


class _NamedSomething(Exception):
    pass


class _NoNames(pickle.Unpickler):
    def find_class(self, module, name):
        raise _NamedSomething(f"{module}.{name}")

    def persistent_load(self, pid):
        raise _NamedSomething(f"persistent id {pid!r}")


PLAIN = [
    None, True, False, 0, 1, -1, 255, 65536, 2**31, -(2**70), 10**400, 1.5, float("inf"),
    "", "x", "é" * 300, "a" * 70000, b"", b"\x00" * 300, bytearray(b"abc"),
    [], [1, [2, [3]]], (), (1,), (1, 2), (1, 2, 3), (1, 2, 3, 4), {}, {"a": [1, {"b": ()}]},
    set(), {1, 2, 3}, frozenset({"a"}), ((), {}), (("q", 3), {"k": 2, "upper": True}),
]
NAMED = [
    decimal.Decimal("1.5"), datetime.date(2026, 12, 4), collections.OrderedDict(a=1),
    complex(1, 2), range(3), slice(1, 2), ValueError("x"), [decimal.Decimal(1)],
]


def _outcome(load, data):
    try:
        return ("ok", load(data))
    except _NamedSomething as error:
        return ("named", str(error))
    except Exception as error:  # noqa: BLE001 - a malformed pickle: which error is its own business
        return ("error", type(error).__name__)


def _no_names(data):
    return _NoNames(io.BytesIO(data)).load()


_NAMING = {"GLOBAL", "STACK_GLOBAL", "INST", "OBJ", "REDUCE", "BUILD", "NEWOBJ", "NEWOBJ_EX",
           "EXT1", "EXT2", "EXT4", "PERSID", "BINPERSID", "NEXT_BUFFER", "READONLY_BUFFER"}


def _naming_opcodes(data):
    found = []
    try:
        for opcode, _arg, _pos in pickletools.genops(data):
            if opcode.name in _NAMING:
                found.append(opcode.name)
            if opcode.name == "STOP":
                break
    except Exception:  # noqa: BLE001 - malformed from here on: loading stops here too
        pass
    return found


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_plain_data_is_plain_and_loads_alike(protocol):
    for value in PLAIN:
        if isinstance(value, (set, frozenset)) and protocol < 4:
            continue  # older protocols name set
        if isinstance(value, bytearray) and protocol < 5:
            continue  # ... and bytearray
        if isinstance(value, bytes) and protocol < 3:
            continue  # ... and bytes
        data = pickle.dumps(value, protocol)
        assert plain_pickle(data), value
        assert repr(pickle.loads(data)) == repr(_no_names(data))


def test_anything_that_names_or_calls_is_not_plain():
    for value in NAMED:
        assert not plain_pickle(pickle.dumps(value, 5)), value

    class Evil:
        def __reduce__(self):
            return (os.system, ("true",))

    assert not plain_pickle(pickle.dumps(Evil(), 5))
    assert not plain_pickle(pickle.dumps([1, 2], 0))  # protocol 0's text opcodes
    assert not plain_pickle(b"")  # no STOP
    assert not plain_pickle(b"\x80\x05N")  # no STOP
    assert not plain_pickle(b"\x8c\xffabc.")  # a count past the end
    assert not plain_pickle(b"\x8d" + (2**63).to_bytes(8, "little") + b".")
    out_of_band = pickle.dumps(pickle.PickleBuffer(b"xyz"), 5, buffer_callback=lambda b: False)
    assert not plain_pickle(out_of_band)
    with pytest.raises(TypeError):
        plain_pickle("not bytes")


def test_whatever_is_called_plain_loads_without_a_name_even_mangled():
    rng = random.Random(17)
    seeds = [pickle.dumps(v, p) for v in PLAIN + NAMED for p in (2, 4, 5)]
    plain_seen = 0
    for _ in range(20000):
        data = bytearray(rng.choice(seeds))
        for _ in range(rng.randint(1, 4)):
            spot = rng.randrange(len(data))
            action = rng.random()
            if action < 0.5:
                data[spot] = rng.randrange(256)
            elif action < 0.75:
                del data[spot]
            else:
                data.insert(spot, rng.randrange(256))
        data = bytes(data)
        if not plain_pickle(data):
            continue
        plain_seen += 1
        assert _outcome(_no_names, data)[0] != "named", data
        # CPython's own opcode table (pickletools) reads the same stream: no
        # opcode up to STOP (or up to where decoding fails) names or calls.
        assert not _naming_opcodes(data), data
    assert plain_seen > 1000  # the property was exercised


def test_the_host_decodes_plain_pickles_without_the_allow_list_and_the_rest_with_it():
    host = _tools.ToolHost({}, None, "safe")
    assert host.loads(pickle.dumps(((1, "a"), {"k": [2]}), 5)) == ((1, "a"), {"k": [2]})
    assert host.loads(pickle.dumps(decimal.Decimal("2.5"), 5)) == decimal.Decimal("2.5")
    class Evil:
        def __reduce__(self):
            return (os.system, ("true",))

    with pytest.raises(pickle.UnpicklingError, match="posix.system|os.system"):
        host.loads(pickle.dumps(Evil(), 5))
