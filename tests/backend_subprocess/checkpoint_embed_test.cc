// Tests for namespace checkpoints (backend_subprocess/checkpoint.h), run inside
// one embedded CPython; every test uses __main__.__dict__ as the session does.
#include "backend_subprocess/checkpoint.h"

#include "embedded/cell_runner.h"
#include "embedded/cell_sources.h"

#include <gtest/gtest.h>
#include <pybind11/embed.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

namespace dolsot {
namespace {

namespace py = pybind11;

bool Contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// The embedded interpreter starts from the base CPython, without the venv
// that holds dill. Until the test main puts the venv's site-packages on
// sys.path, add <repo>/.venv's (the layout scripts/setup.sh makes).
void MakeDillImportable() {
  py::exec(
      "import importlib.util, os, sys\n"
      "if importlib.util.find_spec('dill') is None:\n"
      "    _site = os.path.join(REPO, '.venv', 'lib',\n"
      "        'python%d.%d' % sys.version_info[:2], 'site-packages')\n"
      "    if os.path.isdir(_site):\n"
      "        sys.path.append(_site)\n",
      py::dict(py::arg("REPO") = std::string(__FILE__).substr(
                   0, std::string(__FILE__).rfind("/tests/"))));
}

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    gil_.emplace();
    MakeDillImportable();
    main_ = py::module_::import("__main__").attr("__dict__");
    ClearNames();
  }
  void TearDown() override {
    ClearNames();
    main_ = py::object();
    hidden_ = py::object();
    gil_.reset();
  }

  // Runs "cell" code in __main__, as a session process does.
  void Cell(const char* code) { py::exec(code, main_); }
  // The namespace's whole checkpoint as a delta's base: its digests (and
  // its blob in *blob, when asked).
  BaseDigests Base(std::uint64_t cells_run, std::string* blob = nullptr) {
    SerializedNamespace base = SerializeNamespace(main_.ptr(), {}, cells_run);
    StatusOr<BaseDigests> digests = DigestBase(base.blob);
    EXPECT_TRUE(digests.ok()) << digests.status().ToString();
    if (blob != nullptr) *blob = std::move(base.blob);
    return digests.ok() ? *std::move(digests) : BaseDigests{};
  }
  py::object Eval(const char* expression) { return py::eval(expression, main_); }

  // Removes every non-dunder name from __main__ (a fresh session namespace).
  void ClearNames() {
    py::exec(
        "for _k in [k for k in globals() if not (k.startswith('__') and k.endswith('__'))]:\n"
        "    del globals()[_k]\n"
        "globals().pop('_k', None)\n",
        main_);
  }

  // Serializes __main__, forgets every name, restores: a new process's view.
  RestoredNamespace RoundTrip(SerializedNamespace* saved = nullptr,
                              const std::vector<std::string>& skip = {}) {
    SerializedNamespace serialized = SerializeNamespace(main_.ptr(), skip);
    EXPECT_FALSE(PyErr_Occurred());
    ClearNames();
    StatusOr<RestoredNamespace> restored = RestoreNamespace(main_.ptr(), serialized.blob);
    EXPECT_FALSE(PyErr_Occurred());
    EXPECT_TRUE(restored.ok()) << restored.status().ToString();
    if (restored.ok()) {
      for (const std::string& name : restored->failed) ADD_FAILURE() << "not restored: " << name;
    }
    if (saved != nullptr) *saved = std::move(serialized);
    return restored.ok() ? *restored : RestoredNamespace{};
  }

  // Pops dill from sys.modules for the test's duration (tests may share a
  // process); the popped modules are put back by RestoreDill.
  void HideDill() {
    hidden_ = py::eval(
        "{k: __import__('sys').modules.pop(k) for k in list(__import__('sys').modules)"
        " if k == 'dill' or k.startswith('dill.')}");
  }
  bool DillImported() {
    return py::module_::import("sys").attr("modules").contains("dill");
  }
  void RestoreDill() {
    py::module_::import("sys").attr("modules").attr("update")(hidden_);
  }

  std::optional<py::gil_scoped_acquire> gil_;
  py::object main_;  // __main__.__dict__; null outside a test (no GIL there)
  py::object hidden_;
};

TEST_F(CheckpointTest, PlainDataRoundTrips) {
  Cell(
      "i = 42\nbig = 2**200\nf = 1.5\ns = 'héllo'\nb = b'\\x00\\xff' * 100\nn = None\n"
      "l = [1, 2, [3, 4]]\nd = {'a': 1, 2: (3, 4)}\nt = (1, 'x')\nst = {1, 2}\n"
      "shared = [1]\npair = (shared, shared)\n");
  SerializedNamespace saved;
  RestoredNamespace restored = RoundTrip(&saved);
  EXPECT_TRUE(saved.dropped.empty());
  EXPECT_TRUE(restored.failed.empty());
  EXPECT_EQ(restored.restored.size(), 12u);
  EXPECT_TRUE(Eval("i == 42 and big == 2**200 and f == 1.5 and s == 'héllo'").cast<bool>());
  EXPECT_TRUE(Eval("b == b'\\x00\\xff' * 100 and n is None and l == [1, 2, [3, 4]]").cast<bool>());
  EXPECT_TRUE(Eval("d == {'a': 1, 2: (3, 4)} and t == (1, 'x') and st == {1, 2}").cast<bool>());
  EXPECT_TRUE(Eval("pair[0] is pair[1]").cast<bool>());
}

TEST_F(CheckpointTest, LargeAndMutableBuffersRoundTrip) {
  Cell(
      "import os\n"
      "big = os.urandom(5 << 20)\n"
      "arr = bytearray(os.urandom(1 << 20))\n"
      "text = 'é' * (1 << 20)\n"
      "sums = (hash(big), bytes(arr), hash(text))\n"
      // Pickling `grow` (saved after `arr`) grows `arr`: what was saved for
      // `arr` must not change with it.
      "class Grow:\n"
      "    def __reduce__(self):\n"
      "        arr.extend(b'x' * (1 << 20))\n"
      "        return (int, (5,))\n"
      "grow = Grow()\n");
  SerializedNamespace saved;
  RestoredNamespace restored = RoundTrip(&saved);
  EXPECT_TRUE(saved.dropped.empty());
  EXPECT_TRUE(restored.failed.empty());
  EXPECT_GT(saved.blob.size(), 8u << 20);
  EXPECT_TRUE(Eval("hash(big) == sums[0] and hash(text) == sums[2]").cast<bool>());
  EXPECT_TRUE(Eval("type(arr) is bytearray and bytes(arr) == sums[1]").cast<bool>());
  EXPECT_EQ(Eval("grow").cast<int>(), 5);
}

// The async writer sends the blob as pieces (views of the pickles, no copy):
// their concatenation is the blob, byte for byte, and restores the same.
TEST_F(CheckpointTest, ThePiecesOfANamespaceAreItsBlob) {
  Cell("import math, threading\n"
       "big = bytes(range(256)) * 8192\n"          // 2 MiB: streamed past the pickler's buffer
       "rows = [{'k': i, 'v': str(i)} for i in range(2000)]\n"
       "buf = bytearray(b'xy' * 70000)\n"
       "def f(n):\n    return n + len(rows)\n"
       "lock = threading.Lock()\n"               // dropped
       "empty = b''\n");
  SerializedNamespace built = SerializeNamespace(main_.ptr(), {}, 7);
  NamespacePieces pieces = SerializeNamespacePieces(main_.ptr(), {}, 7);
  EXPECT_FALSE(PyErr_Occurred());
  std::string joined;
  for (std::string_view piece : pieces.pieces) joined.append(piece);
  EXPECT_EQ(pieces.size, joined.size());
  EXPECT_EQ(joined.size(), built.blob.size());
  EXPECT_TRUE(joined == built.blob);
  EXPECT_EQ(pieces.saved, built.saved);
  EXPECT_EQ(pieces.dropped, built.dropped);
  EXPECT_EQ(pieces.dropped, std::vector<std::string>{"lock"});
  ClearNames();
  StatusOr<RestoredNamespace> restored = RestoreNamespace(main_.ptr(), joined);
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  EXPECT_TRUE(restored->failed.empty());
  EXPECT_TRUE(Eval("big == bytes(range(256)) * 8192 and f(1) == 2001 and buf[:2] == b'xy'")
                  .cast<bool>());
}

// A delta against a base names the values whose entries are the base's and
// writes the rest (changed in place, rebound, new), with the counter and the
// cell sources; the base then restored, less what the delta did not keep,
// plus the delta's blob, is the namespace.
TEST_F(CheckpointTest, ADeltaKeepsTheBasesValuesAndWritesWhatChanged) {
  Cell("import math\n"
       "big = bytes(range(256)) * 8192\n"  // 2 MiB: what makes a delta pay
       "rows = [1, 2, 3]\n"
       "same = {'k': 'v'}\n"
       "gone = 'soon'\n"
       "def f(n):\n    return n + 1\n");
  std::string base_blob;
  const BaseDigests digests = Base(5, &base_blob);
  Cell("rows.append(4)\n"         // in place
       "del gone\n"
       "fresh = 'new'\n"
       "def f(n):\n    return n + 2\n");  // rebound
  NamespacePieces delta = SerializeNamespacePieces(main_.ptr(), {}, 9, &digests);
  EXPECT_FALSE(PyErr_Occurred());
  ASSERT_TRUE(delta.delta);
  EXPECT_EQ(delta.delta_of.size, digests.base.size);
  EXPECT_EQ(delta.delta_of.fingerprint, digests.base.fingerprint);
  EXPECT_EQ(delta.kept, (std::vector<std::string>{"big", "math", "same"}));
  std::vector<std::string> saved = delta.saved;
  std::sort(saved.begin(), saved.end());
  EXPECT_EQ(saved, (std::vector<std::string>{"big", "f", "fresh", "math", "rows", "same"}));
  std::string blob;
  for (std::string_view piece : delta.pieces) blob.append(piece);
  EXPECT_EQ(blob.size(), delta.size);
  EXPECT_LT(blob.size(), 64u << 10);  // not the 2 MiB the base holds

  ClearNames();
  StatusOr<RestoredNamespace> from_base = RestoreNamespace(main_.ptr(), base_blob);
  ASSERT_TRUE(from_base.ok()) << from_base.status().ToString();
  for (const std::string& name : from_base->restored) {
    if (!std::binary_search(delta.kept.begin(), delta.kept.end(), name)) {
      ASSERT_EQ(PyDict_DelItemString(main_.ptr(), name.c_str()), 0) << name;
    }
  }
  StatusOr<RestoredNamespace> from_delta = RestoreNamespace(main_.ptr(), blob);
  ASSERT_TRUE(from_delta.ok()) << from_delta.status().ToString();
  EXPECT_TRUE(from_delta->failed.empty());
  EXPECT_EQ(from_delta->cells_run, 9u);
  EXPECT_TRUE(Eval("big == bytes(range(256)) * 8192 and rows == [1, 2, 3, 4] and f(1) == 3 and "
                   "same == {'k': 'v'} and fresh == 'new' and 'gone' not in globals() and "
                   "math.pi > 3")
                  .cast<bool>());
}

// A delta that would write more than it keeps is a whole checkpoint (a new
// base): the values the digests found to be the base's are pickled again.
// A restore then reads one blob, not a base and a delta as large.
TEST_F(CheckpointTest, ACheckpointWritingMoreThanItKeepsIsWhole) {
  Cell("big = bytes(range(256)) * 8192\nsmall = 'kept'\n");
  const BaseDigests digests = Base(1);
  Cell("big = bytes(reversed(range(256))) * 8192\n");
  NamespacePieces pieces = SerializeNamespacePieces(main_.ptr(), {}, 2, &digests);
  EXPECT_FALSE(PyErr_Occurred());
  EXPECT_FALSE(pieces.delta);
  EXPECT_TRUE(pieces.kept.empty());
  EXPECT_GT(pieces.size, 2u << 20);
  std::vector<std::string> saved = pieces.saved;
  std::sort(saved.begin(), saved.end());
  EXPECT_EQ(saved, (std::vector<std::string>{"big", "small"}));
  std::string blob;
  for (std::string_view piece : pieces.pieces) blob.append(piece);
  ClearNames();
  StatusOr<RestoredNamespace> restored = RestoreNamespace(main_.ptr(), blob);
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  EXPECT_EQ(restored->cells_run, 2u);
  EXPECT_TRUE(Eval("big == bytes(reversed(range(256))) * 8192 and small == 'kept'").cast<bool>());

  Cell("big = bytes(range(256)) * 8192\n");  // equal again: the base's value
  NamespacePieces again = SerializeNamespacePieces(main_.ptr(), {}, 3, &digests);
  EXPECT_TRUE(again.delta);
  EXPECT_EQ(again.kept, (std::vector<std::string>{"big", "small"}));
}

// Pickling runs the cell's code (__reduce__), which may find the digesting
// pickler's `write` through gc and keep it: called after the checkpoint, it
// raises instead of reaching freed memory.
TEST_F(CheckpointTest, AWriteKeptFromTheDigestingPicklerRaisesAfterward) {
  Cell("import gc, types\n"
       "big = bytes(range(256)) * 8192\n"
       "kept_writes = []\n"
       "class Spy:\n"
       "    def __reduce__(self):\n"
       "        for o in gc.get_objects():\n"
       "            if isinstance(o, types.BuiltinFunctionType) and \\\n"
       "                    type(getattr(o, '__self__', None)).__name__ == 'PyCapsule':\n"
       "                kept_writes.append(o)\n"
       "        return (Spy, ())\n"
       "spy = Spy()\n");
  const BaseDigests digests = Base(1);
  NamespacePieces delta = SerializeNamespacePieces(main_.ptr(), {}, 2, &digests);
  EXPECT_FALSE(PyErr_Occurred());
  EXPECT_TRUE(delta.delta);
  ASSERT_TRUE(Eval("len(kept_writes) > 0").cast<bool>()) << "the spy found no digesting write";
  EXPECT_THROW(Eval("kept_writes[0](b'after')"), py::error_already_set);
  PyErr_Clear();
  Cell("kept_writes.clear()\n");
}

TEST_F(CheckpointTest, PlainDataDoesNotImportDill) {
  HideDill();
  Cell("import os\nx = [1, 2, 3]\ny = {'k': b'v'}\nz = 'text'\n");
  SerializedNamespace saved;
  RestoredNamespace restored = RoundTrip(&saved);
  const bool imported = DillImported();
  RestoreDill();
  EXPECT_FALSE(imported) << "serializing plain data imported dill";
  EXPECT_EQ(saved.saved.size(), 4u);
  EXPECT_TRUE(restored.failed.empty());
}

TEST_F(CheckpointTest, CellDefinedFunctionsClassesInstancesAndLambdasRoundTrip) {
  Cell(
      "K = 10\n"
      "def add(x):\n    return x + K\n"
      "class Point:\n"
      "    def __init__(self, x, y):\n        self.x, self.y = x, y\n"
      "    def norm2(self):\n        return self.x ** 2 + self.y ** 2\n"
      "p = Point(3, 4)\n"
      "points = [Point(1, 1), Point(2, 2)]\n"
      "square = lambda v: v * v\n"
      "class Holder:\n    pass\n"
      "h = Holder()\nh.fn = lambda: 7\n");
  SerializedNamespace saved;
  RestoredNamespace restored = RoundTrip(&saved);
  EXPECT_TRUE(saved.dropped.empty());
  EXPECT_TRUE(restored.failed.empty());
  EXPECT_EQ(Eval("add(1)").cast<int>(), 11);
  EXPECT_EQ(Eval("p.norm2()").cast<int>(), 25);
  EXPECT_TRUE(Eval("isinstance(p, Point) and all(isinstance(q, Point) for q in points)")
                  .cast<bool>());
  EXPECT_EQ(Eval("square(9)").cast<int>(), 81);
  EXPECT_EQ(Eval("h.fn()").cast<int>(), 7);
  // A definition restored by value still sees the session's globals.
  Cell("K = 100\n");
  EXPECT_EQ(Eval("add(1)").cast<int>(), 101);
  EXPECT_EQ(Eval("Point(0, 5).norm2()").cast<int>(), 25);
}

TEST_F(CheckpointTest, CellDefinitionsKeepTheirIdentityAcrossNames) {
  Cell(
      "import dataclasses\n"
      "class Base:\n    def hello(self):\n        return 'base'\n"
      "class Child(Base):\n    pass\n"
      "def make():\n    return Child()\n"
      "@dataclasses.dataclass\n"
      "class Row:\n    key: str\n    value: int = 0\n"
      "rows = [Row('a', 1), Row('b')]\n"
      "c = Child()\n"
      // Rebinding moves Base after Child in the namespace: the restore must
      // retry Child once Base is back.
      "_b = Base\ndel Base\nBase = _b\ndel _b\n");
  SerializedNamespace saved;
  RestoredNamespace restored = RoundTrip(&saved);
  EXPECT_TRUE(saved.dropped.empty());
  EXPECT_TRUE(restored.failed.empty());
  EXPECT_TRUE(Eval("Child.__bases__[0] is Base and issubclass(Child, Base)").cast<bool>());
  EXPECT_TRUE(Eval("isinstance(c, Child) and isinstance(c, Base) and c.hello() == 'base'")
                  .cast<bool>());
  EXPECT_TRUE(Eval("type(make()) is Child").cast<bool>());
  EXPECT_TRUE(Eval("rows == [Row('a', 1), Row('b', 0)] and type(rows[0]) is Row").cast<bool>());
}

TEST_F(CheckpointTest, NamespaceOtherThanMainRoundTripsByValue) {
  py::dict source;
  source["__name__"] = "not_a_module";
  py::exec(
      "def f():\n    return 3\n"
      "class C:\n    def m(self):\n        return f() + 1\n"
      "c = C()\nsquare = lambda v: v * v\ndata = [1, 2]\n",
      source);
  SerializedNamespace saved = SerializeNamespace(source.ptr(), {});
  EXPECT_TRUE(saved.dropped.empty());
  py::dict target;
  StatusOr<RestoredNamespace> restored = RestoreNamespace(target.ptr(), saved.blob);
  ASSERT_TRUE(restored.ok());
  EXPECT_TRUE(restored->failed.empty());
  EXPECT_EQ(py::eval("c.m() + square(2)", target).cast<int>(), 8);
  EXPECT_TRUE(py::eval("data == [1, 2]", target).cast<bool>());
}

TEST_F(CheckpointTest, ModulesAreStoredByReference) {
  Cell("import os\nimport json as js\nimport os.path as osp\nfrom collections import abc\n");
  SerializedNamespace saved;
  RestoredNamespace restored = RoundTrip(&saved);
  EXPECT_TRUE(restored.failed.empty());
  EXPECT_TRUE(Eval("os is __import__('sys').modules['os'] and js is __import__('json')")
                  .cast<bool>());
  EXPECT_TRUE(Eval("osp is __import__('sys').modules['os'].path").cast<bool>());
  EXPECT_TRUE(Eval("abc is __import__('collections.abc').abc").cast<bool>());
  // A reference is the module's name, not its contents.
  EXPECT_LT(saved.blob.size(), 400u);
}

TEST_F(CheckpointTest, UnserializableValuesAreDroppedWithoutSinkingTheRest) {
  Cell(
      "import threading, socket\n"
      "lock = threading.Lock()\n"
      "sock = socket.socket()\n"
      "gen = (i for i in range(3))\n"
      "fh = open(__import__('os').devnull)\n"
      "orphan = __import__('types').ModuleType('not_importable_anywhere')\n"
      "keep = [1, 2, 3]\n");
  SerializedNamespace saved = SerializeNamespace(main_.ptr(), {});
  EXPECT_FALSE(PyErr_Occurred());
  for (const char* name : {"lock", "sock", "gen", "fh", "orphan"}) {
    EXPECT_TRUE(Contains(saved.dropped, name)) << name;
    EXPECT_FALSE(Contains(saved.saved, name)) << name;
  }
  EXPECT_TRUE(Contains(saved.saved, "keep"));
  // Serializing changed nothing: the dropped values are still usable.
  EXPECT_EQ(Eval("next(gen)").cast<int>(), 0);
  EXPECT_TRUE(Eval("lock.acquire(blocking=False)").cast<bool>());
  Cell("sock.close()\nfh.close()\n");
  ClearNames();
  StatusOr<RestoredNamespace> restored = RestoreNamespace(main_.ptr(), saved.blob);
  ASSERT_TRUE(restored.ok());
  EXPECT_TRUE(Eval("keep == [1, 2, 3]").cast<bool>());
  EXPECT_FALSE(main_.contains("lock"));
}

TEST_F(CheckpointTest, ExceptionsWhilePicklingAreCaughtPerName) {
  Cell(
      "class Boom:\n"
      "    def __reduce__(self):\n        raise ValueError('no')\n"
      "boom = Boom()\n"
      "class Interrupting:\n"
      "    def __reduce__(self):\n        raise KeyboardInterrupt\n"
      "intr = Interrupting()\n"
      "deep = []\n"
      "_cur = deep\n"
      "for _ in range(100000):\n    _cur.append([]); _cur = _cur[0]\n"
      "del _cur\n"
      "fine = 'still here'\n");
  SerializedNamespace saved = SerializeNamespace(main_.ptr(), {});
  EXPECT_FALSE(PyErr_Occurred());
  EXPECT_TRUE(Contains(saved.dropped, "boom"));
  EXPECT_TRUE(Contains(saved.dropped, "intr"));
  EXPECT_TRUE(Contains(saved.dropped, "deep"));
  EXPECT_TRUE(Contains(saved.saved, "fine"));
  EXPECT_TRUE(Contains(saved.saved, "Boom"));
}

TEST_F(CheckpointTest, DundersAndSkippedNamesAreNotSaved) {
  Cell("import json as tool\nx = 1\n__secret__ = 2\n");
  SerializedNamespace saved = SerializeNamespace(main_.ptr(), {"tool"});
  EXPECT_EQ(saved.saved, (std::vector<std::string>{"x"}));
  EXPECT_TRUE(saved.dropped.empty());
}

TEST_F(CheckpointTest, ValueWhoseClassVanishedIsListedAsFailed) {
  Cell(
      "import sys, types\n"
      "_m = types.ModuleType('ckpt_vanishing_module')\n"
      "exec('class Gone:\\n    pass\\n', _m.__dict__)\n"
      "sys.modules['ckpt_vanishing_module'] = _m\n"
      "obj = _m.Gone()\n"
      "mod = _m\n"
      "other = {'a': 1}\n"
      "del _m\n");
  SerializedNamespace saved = SerializeNamespace(main_.ptr(), {});
  ASSERT_TRUE(Contains(saved.saved, "obj"));
  ASSERT_TRUE(Contains(saved.saved, "mod"));
  Cell("del sys.modules['ckpt_vanishing_module']\n");
  ClearNames();
  StatusOr<RestoredNamespace> restored = RestoreNamespace(main_.ptr(), saved.blob);
  EXPECT_FALSE(PyErr_Occurred());
  ASSERT_TRUE(restored.ok());
  EXPECT_TRUE(Contains(restored->failed, "obj"));
  EXPECT_TRUE(Contains(restored->failed, "mod"));
  EXPECT_TRUE(Contains(restored->restored, "other"));
  EXPECT_FALSE(main_.contains("obj"));
  EXPECT_EQ(Eval("other['a']").cast<int>(), 1);
}

TEST_F(CheckpointTest, ForeignTruncatedAndCorruptedBlobsAreRejectedUntouched) {
  Cell("a = [1, 2, 3]\nb = 'x' * 50\nimport os\ndef f():\n    return 1\n");
  // As the host stores it: with the gate memory attached (without it, a bit
  // flip turning version 3 into 2 would leave a valid version 2 blob).
  std::string blob = SerializeNamespace(main_.ptr(), {}).blob;
  GateMemory memory;
  memory.sealed_classes = {"A"};
  ASSERT_TRUE(AttachGateMemory(blob, memory).ok());
  py::dict target;
  auto expect_corrupt = [&](std::string_view bad, const std::string& what) {
    StatusOr<RestoredNamespace> restored = RestoreNamespace(target.ptr(), bad);
    ASSERT_FALSE(restored.ok()) << what;
    EXPECT_EQ(restored.status().code(), ErrorCode::kCorrupt) << what;
    EXPECT_FALSE(PyErr_Occurred()) << what;
    EXPECT_EQ(py::len(target), 0u) << what;
  };
  expect_corrupt("", "empty");
  expect_corrupt("\x80\x05\x95\x00", "a pickle");
  expect_corrupt(std::string(1000, 'A'), "text");
  for (size_t size = 0; size < blob.size(); ++size) {
    expect_corrupt(std::string_view(blob).substr(0, size), "truncated to " + std::to_string(size));
  }
  expect_corrupt(blob + '\0', "trailing byte");
  // The header alone with an entry count of zero (what a writer cut short
  // after the header would leave): damage, not an empty session.
  std::string header_only = blob.substr(0, 16);
  header_only.replace(12, 4, std::string(4, '\0'));
  expect_corrupt(header_only, "an entry count of zero");
  // Every single-bit flip is caught (framing checks or the entry CRC-32C).
  for (size_t bit = 0; bit < blob.size() * 8; ++bit) {
    std::string flipped = blob;
    flipped[bit / 8] = static_cast<char>(flipped[bit / 8] ^ (1 << (bit % 8)));
    expect_corrupt(flipped, "bit " + std::to_string(bit));
    // The host's reading of the memory: damage, or (version 3 read as 2) a
    // memory it does not trust.
    StatusOr<GateMemory> read = ReadGateMemory(flipped);
    EXPECT_TRUE(!read.ok() || !read->complete) << "bit " << bit;
  }
  // Random multi-byte damage: never a crash, never a partial restore.
  std::mt19937 random(12345);
  for (int round = 0; round < 2000; ++round) {
    std::string damaged = blob.substr(0, random() % (blob.size() + 1));
    for (int k = 0; k < 4 && !damaged.empty(); ++k) {
      damaged[random() % damaged.size()] = static_cast<char>(random());
    }
    if (damaged == blob) continue;
    expect_corrupt(damaged, "random round " + std::to_string(round));
  }
  StatusOr<RestoredNamespace> intact = RestoreNamespace(target.ptr(), blob);
  ASSERT_TRUE(intact.ok());
  EXPECT_EQ(intact->restored.size(), 4u);
}

// A function keeps the source of the cell it was defined in through a
// checkpoint, and the session keeps its cell counter: a restore registers the
// source again, over what a new process registered under that name.
TEST_F(CheckpointTest, CellSourcesAndTheCellCounterTravelWithTheBlob) {
  const std::string source = "def f():\n    return 1 / 0  # f's own line\n";
  RegisterCellSource("<cell 7>", source);
  main_["_src"] = source;
  Cell("exec(compile(_src, '<cell 7>', 'exec'))\ndel _src\n"
       // Defined under "<string>": not a cell, so no source is kept for it (a
       // source under any other name than a cell's fails the restore below).
       "def g():\n    return 2\n"
       "n = 5\n");
  SerializedNamespace saved = SerializeNamespace(main_.ptr(), {}, 9);
  EXPECT_EQ(saved.saved, (std::vector<std::string>{"f", "g", "n"}));
  RegisterCellSource("<cell 7>", "y = 2  # another process's cell 7\n");
  ClearNames();
  StatusOr<RestoredNamespace> restored = RestoreNamespace(main_.ptr(), saved.blob);
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  EXPECT_EQ(restored->restored, (std::vector<std::string>{"f", "g", "n"}));
  EXPECT_TRUE(restored->failed.empty());
  EXPECT_EQ(restored->cells_run, 9u);
  EXPECT_EQ(RegisteredCellSource("<cell 7>"), source);
  Cell("import traceback\n"
       "try:\n    f()\nexcept ZeroDivisionError as e:\n"
       "    _tb = ''.join(traceback.format_exception(type(e), e, e.__traceback__))\n");
  const std::string traceback = Eval("_tb").cast<std::string>();
  EXPECT_NE(traceback.find("File \"<cell 7>\", line 2, in f"), std::string::npos) << traceback;
  EXPECT_NE(traceback.find("f's own line"), std::string::npos) << traceback;
}

TEST_F(CheckpointTest, VersionOneBlobsAreStillRead) {
  Cell("a = [1, 2]\n");
  const std::string blob = SerializeNamespace(main_.ptr(), {}, 3).blob;
  // Version 1 had no codecs 4 and 5: the same blob without its last entry
  // (the counter: crc, codec, name length, "<cells>", size, u64) is one.
  const size_t counter_entry = 4 + 1 + 4 + 7 + 8 + 8;
  ASSERT_GT(blob.size(), counter_entry);
  std::string v1 = blob.substr(0, blob.size() - counter_entry);
  ASSERT_EQ(v1[8], 3);
  ASSERT_EQ(v1[12], 2);  // two entries: a and the counter
  v1[8] = 1;
  v1[12] = 1;
  ClearNames();
  StatusOr<RestoredNamespace> restored = RestoreNamespace(main_.ptr(), v1);
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  EXPECT_EQ(restored->restored, std::vector<std::string>{"a"});
  EXPECT_EQ(restored->cells_run, 0u);
  // A version 1 blob holding a version 2 codec is damage.
  std::string relabelled = blob;
  relabelled[8] = 1;
  py::dict target;
  StatusOr<RestoredNamespace> refused = RestoreNamespace(target.ptr(), relabelled);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), ErrorCode::kCorrupt);
  EXPECT_NE(refused.status().message().find("unknown codec 5"), std::string::npos)
      << refused.status().message();
  EXPECT_EQ(py::len(target), 0u);
}

// Version 3: the host attaches the AST gate's memory (codec 6); the session's
// restore skips it, the host reads it back. Older blobs carry none: the
// memory they give is incomplete (the gate then assumes the worst).
TEST_F(CheckpointTest, TheGateMemoryRidesInTheBlob) {
  Cell("a = [1, 2]\n");
  std::string blob = SerializeNamespace(main_.ptr(), {}, 3).blob;
  ASSERT_EQ(blob[8], 3);
  StatusOr<GateMemory> none = ReadGateMemory(blob);
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_FALSE(none->complete);  // a session-written blob alone says nothing
  GateMemory memory;
  memory.sealed_classes = {"A", "D"};
  memory.sealed_methods = {"m"};
  ASSERT_TRUE(AttachGateMemory(blob, memory).ok());
  StatusOr<GateMemory> read = ReadGateMemory(blob);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(*read, memory);
  // Attached again (a later save of the same blob): replaced, not doubled.
  memory.sealed_classes.insert("E");
  ASSERT_TRUE(AttachGateMemory(blob, memory).ok());
  EXPECT_EQ(*ReadGateMemory(blob), memory);
  ClearNames();
  StatusOr<RestoredNamespace> restored = RestoreNamespace(main_.ptr(), blob);
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  EXPECT_EQ(restored->restored, std::vector<std::string>{"a"});
  EXPECT_EQ(restored->cells_run, 3u);
  // Damage in the memory's entry is damage of the blob.
  std::string flipped = blob;
  flipped[flipped.size() - 1] ^= 1;
  EXPECT_EQ(ReadGateMemory(flipped).status().code(), ErrorCode::kCorrupt);
  // No blob: a new session, whose memory is complete and empty.
  StatusOr<GateMemory> fresh = ReadGateMemory("");
  ASSERT_TRUE(fresh.ok());
  EXPECT_TRUE(fresh->complete && fresh->empty());
  // A version 2 blob (the same without the memory, relabelled): incomplete.
  std::string v2 = SerializeNamespace(main_.ptr(), {}, 3).blob;
  v2[8] = 2;
  StatusOr<GateMemory> old = ReadGateMemory(v2);
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  EXPECT_FALSE(old->complete);
  EXPECT_TRUE(RestoreNamespace(py::dict().ptr(), v2).ok());
  // Only a current blob takes a memory.
  EXPECT_EQ(AttachGateMemory(v2, memory).code(), ErrorCode::kCorrupt);
  std::string junk = "not a checkpoint";
  EXPECT_EQ(AttachGateMemory(junk, memory).code(), ErrorCode::kCorrupt);
}

TEST_F(CheckpointTest, EmptyNamespaceAndNonDictGlobals) {
  SerializedNamespace empty = SerializeNamespace(main_.ptr(), {});
  EXPECT_TRUE(empty.saved.empty());
  StatusOr<RestoredNamespace> restored = RestoreNamespace(main_.ptr(), empty.blob);
  ASSERT_TRUE(restored.ok());
  EXPECT_TRUE(restored->restored.empty());
  py::list not_a_dict;
  SerializedNamespace from_list = SerializeNamespace(not_a_dict.ptr(), {});
  EXPECT_TRUE(from_list.saved.empty());
  EXPECT_FALSE(PyErr_Occurred());
  StatusOr<RestoredNamespace> into_list = RestoreNamespace(not_a_dict.ptr(), empty.blob);
  ASSERT_FALSE(into_list.ok());
  EXPECT_EQ(into_list.status().code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace dolsot
