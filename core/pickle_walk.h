// The pickle walk behind pickle_budget.h (internal to core/pickle_budget.cc): the
// abstract values, the allow-list and the Walk that runs the pickle machine
// over them. Walk's opcode machine is pickle_walk.cc; what a call of an
// allowed constructor costs is pickle_constructors.cc.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/pickle_budget.h"
#include "core/status.h"

namespace dolsot::pickle_walk {

constexpr std::uint64_t kHuge = std::numeric_limits<std::uint64_t>::max();

inline std::uint64_t Add(std::uint64_t a, std::uint64_t b) { return a > kHuge - b ? kHuge : a + b; }
inline std::uint64_t Mul(std::uint64_t a, std::uint64_t b) {
  return (a != 0 && b > kHuge / a) ? kHuge : a * b;
}

// What the real unpickler allocates, in bytes (CPython's sizes, rounded up).
constexpr std::uint64_t kPush = 32;         // a value made or referenced: its header, a stack slot
constexpr std::uint64_t kSlot = 8;          // a list's, tuple's or deque's element
constexpr std::uint64_t kEntry = 32;        // a dict's or set's entry (with its share of the table)
constexpr std::uint64_t kInstance = 64;      // an instance of an allowed constructor
constexpr std::uint64_t kMemoSlot = 16;     // the memo is an array of pointers that doubles
constexpr std::uint64_t kIteratedStr = 64;  // iterating a str makes one str per character
constexpr std::uint64_t kIteratedInt = 32;  // iterating a range makes one int per element
// Number text the host converts: int(str) is quadratic in its digits (Python
// refuses more than 4300 of them by default; a host may have lifted that).
constexpr std::uint64_t kMaxNumberText = 4300;
// Bits of an int fed to Decimal or Fraction (gcd, base conversion: quadratic).
constexpr std::uint64_t kMaxNumberBits = 14300;
constexpr std::uint8_t kMaxItems = 8;       // a tuple's items the walk keeps (call arguments)

// The allow-list, each with the rule that costs a call of it.
enum class Global : std::uint8_t {
  kNone, kSet, kFrozenSet, kByteArray, kComplex, kSlice, kRange, kList, kDict, kTuple, kStr,
  kBytes, kInt, kFloat, kBool, kOrderedDict, kDeque, kCounter, kDate, kDateTime, kTime,
  kTimeDelta, kTimeZone, kDecimal, kFraction, kUuid,
};

struct GlobalName {
  const char* module;
  const char* name;
  Global global;
};

constexpr std::array<GlobalName, 25> kGlobals = {{
    {"builtins", "set", Global::kSet},           {"builtins", "frozenset", Global::kFrozenSet},
    {"builtins", "bytearray", Global::kByteArray}, {"builtins", "complex", Global::kComplex},
    {"builtins", "slice", Global::kSlice},       {"builtins", "range", Global::kRange},
    {"builtins", "list", Global::kList},         {"builtins", "dict", Global::kDict},
    {"builtins", "tuple", Global::kTuple},       {"builtins", "str", Global::kStr},
    {"builtins", "bytes", Global::kBytes},       {"builtins", "int", Global::kInt},
    {"builtins", "float", Global::kFloat},       {"builtins", "bool", Global::kBool},
    {"collections", "OrderedDict", Global::kOrderedDict},
    {"collections", "deque", Global::kDeque},    {"collections", "Counter", Global::kCounter},
    {"datetime", "date", Global::kDate},         {"datetime", "datetime", Global::kDateTime},
    {"datetime", "time", Global::kTime},         {"datetime", "timedelta", Global::kTimeDelta},
    {"datetime", "timezone", Global::kTimeZone}, {"decimal", "Decimal", Global::kDecimal},
    {"fractions", "Fraction", Global::kFraction}, {"uuid", "UUID", Global::kUuid},
}};

inline std::string GlobalText(Global global) {
  for (const GlobalName& entry : kGlobals) {
    if (entry.global == global) return std::string(entry.module) + "." + entry.name;
  }
  return "?";
}

enum class Kind : std::uint8_t {
  kEmpty,  // an unset memo slot
  kNone, kBool, kInt, kFloat, kStr, kBytes, kByteArray, kTuple, kRange,
  kGlobal,     // an allowed name itself
  kContainer,  // a list, dict, set, frozenset, deque, Counter or OrderedDict (in the arena)
  kObject,     // another instance of an allowed constructor
};

constexpr std::uint8_t kExact = 1;  // kInt: `small` holds its value
constexpr std::uint8_t kText = 2;   // kStr / kBytes: `small` is its offset in the data
constexpr std::uint8_t kItems = 4;  // kTuple: `small` indexes its items in items_

// An abstract value: what it is and how big, never its contents.
struct Value {
  std::uint64_t length = 0;     // str / bytes: bytes; tuple: items; range: its length; int: bits
  std::uint64_t hash_work = 1;  // steps to hash it (a tuple hashes its items, every time)
  std::uint64_t small = 0;      // see the flags; kContainer: its arena index
  Kind kind = Kind::kEmpty;
  Global global = Global::kNone;  // kGlobal: which; kContainer / kObject: its type
  std::uint8_t flags = 0;
  std::uint8_t items = 0;
  std::uint32_t depth = 0;
};
static_assert(sizeof(Value) <= 32, "the walk charges kPush per value it holds");

// A mutable container, shared by every reference to it (stack, memo, items).
struct Container {
  std::uint64_t length = 0;
  std::uint64_t element_hash_work = 0;  // steps to hash every element once
  std::uint32_t depth = 1;
  Global type = Global::kList;
};

// The pickle opcodes the walk knows.
namespace op {
constexpr std::uint8_t kMark = '(', kStop = '.', kPop = '0', kPopMark = '1', kDup = '2',
    kFloat = 'F', kInt = 'I', kBinInt = 'J', kBinInt1 = 'K', kLong = 'L', kBinInt2 = 'M',
    kNone = 'N', kReduce = 'R', kString = 'S', kBinString = 'T', kShortBinString = 'U',
    kUnicode = 'V', kBinUnicode = 'X', kAppend = 'a', kBuild = 'b', kGlobal = 'c', kDict = 'd',
    kEmptyDict = '}', kAppends = 'e', kGet = 'g', kBinGet = 'h', kLongBinGet = 'j', kList = 'l',
    kEmptyList = ']', kPut = 'p', kBinPut = 'q', kLongBinPut = 'r', kSetItem = 's', kTuple = 't',
    kEmptyTuple = ')', kSetItems = 'u', kBinFloat = 'G', kProto = 0x80, kNewObj = 0x81,
    kTuple1 = 0x85, kTuple2 = 0x86, kTuple3 = 0x87, kNewTrue = 0x88, kNewFalse = 0x89,
    kLong1 = 0x8a, kLong4 = 0x8b, kBinBytes = 'B', kShortBinBytes = 'C',
    kShortBinUnicode = 0x8c, kBinUnicode8 = 0x8d, kBinBytes8 = 0x8e, kEmptySet = 0x8f,
    kAddItems = 0x90, kFrozenSet = 0x91, kNewObjEx = 0x92, kStackGlobal = 0x93,
    kMemoize = 0x94, kFrame = 0x95, kByteArray8 = 0x96;
}  // namespace op

class Walk {
 public:
  // The walk's working memory, kept per thread between walks (a tool call's
  // pickle is walked on every call: no allocation for a small one).
  struct Scratch {
    std::vector<Value> stack, memo, items, popped;
    std::vector<std::size_t> marks;
    std::vector<Container> arena;
  };

  Walk(std::string_view data, std::uint64_t max_bytes, Scratch& scratch)
      : data_(data),
        max_(max_bytes),
        stack_(scratch.stack),
        marks_(scratch.marks),
        memo_(scratch.memo),
        arena_(scratch.arena),
        items_(scratch.items),
        popped_(scratch.popped) {}

  // Walks the data: true with shape() set, or false with error() saying why.
  bool Run();
  PickleShape shape() const { return shape_; }
  const Status& error() const { return error_; }

 private:
  // ---- reading the data
  bool Read(std::size_t n, std::string_view* out);
  bool ReadCount(std::size_t width, std::uint64_t* count);
  bool ReadLine(std::string_view* line);

  // ---- refusals
  // Each records why in error_ and answers false.
  bool Refuse(std::string why) {
    error_ = InvalidArgument(std::move(why));
    return false;
  }
  bool Malformed(const char* what) {
    return Refuse(std::string("malformed pickle: ") + what + " at byte " + std::to_string(at_));
  }
  bool OverBudget(const std::string& what);
  bool Charge(std::uint64_t bytes, const char* what);
  bool ChargeFor(std::uint64_t bytes, const std::string& what);

  // ---- the stack
  std::size_t Fence() const { return marks_.empty() ? 0 : marks_.back(); }
  // Pushes `value`; `cost`: what it allocates (kPush: a new object; kSlot: a
  // reference, a singleton or a cached small int).
  // Pushes an int, built in place (the hot opcodes: no Value copied).
  bool PushInt(std::uint64_t bits, bool exact, std::int64_t value) {
    const bool cached = exact && value >= -5 && value <= 256;  // CPython's small ints
    charged_ = Add(charged_, cached ? kSlot : kPush);
    if (charged_ > max_ || (stack_.size() + 1) * kPush > max_) {
      return OverBudget("values on the unpickler's stack");
    }
    Value& pushed = stack_.emplace_back();
    pushed.kind = Kind::kInt;
    pushed.length = bits;
    pushed.hash_work = 1 + bits / 64;
    if (exact) {
      pushed.flags = kExact;
      pushed.small = static_cast<std::uint64_t>(value);
    }
    return true;
  }
  bool Push(const Value& value, std::uint64_t cost = kPush) {
    // The common case inline; the refusal (and its message) out of line.
    charged_ = Add(charged_, cost);
    if (charged_ <= max_ && (stack_.size() + 1) * kPush <= max_) {
      stack_.push_back(value);
      return true;
    }
    return OverBudget("values on the unpickler's stack");
  }
  bool Pop(Value* out);
  bool PopMark(std::vector<Value>* items);
  bool CheckDepth(std::uint32_t depth);

  // ---- values
  Value Int(std::uint64_t bits, bool exact, std::int64_t value) const;
  Value Text(Kind kind, std::size_t offset, std::uint64_t length) const;
  bool Tuple(std::vector<Value>& items);
  bool NewContainer(Global type, std::uint64_t length, std::uint64_t element_hash_work,
                      std::uint32_t depth, Value* out);
  std::uint32_t Depth(const Value& value) const;
  std::string_view TextOf(const Value& value) const;
  const Value* Item(const Value& tuple, std::size_t index) const;

  // ---- opcodes that call or fill
  bool AddTo(const Value& target, std::vector<Value>& items, bool pairs);
  bool Memo(std::uint64_t index, bool put);
  bool StackGlobal(std::string_view module, std::string_view name);
  bool Call(const Value& callable, const Value& args, bool newobj);
  bool Construct(Global global, const std::vector<const Value*>& args, Value* out);
  bool FromIterable(Global global, const Value& source, Value* out);
  bool Build();

  std::string_view data_;
  std::uint64_t max_;
  std::size_t at_ = 0;
  std::uint64_t charged_ = 0;
  bool named_ = false;
  PickleShape shape_ = PickleShape::kPlain;
  Status error_;
  std::vector<Value>& stack_;
  std::vector<std::size_t>& marks_;
  // The memo: dense while its indices come in order (as a pickler writes
  // them), sparse past that, so the walk's own memory follows the data's
  // size whatever index a pickle names.
  std::vector<Value>& memo_;
  std::unordered_map<std::uint64_t, Value> sparse_memo_;
  std::uint64_t memo_capacity_ = 0;  // the unpickler's memo array: the largest index + 1
  std::uint64_t memo_set_ = 0;
  std::vector<Container>& arena_;
  std::vector<Value>& items_;
  std::vector<Value>& popped_;  // what the last PopMark took
};

// Bytes a character of the str that is this UTF-8 takes in CPython (PEP
// 393): 4 when any is past U+FFFF, 2 past U+00FF, else 1.
inline std::uint64_t StrWidth(std::string_view utf8) {
  std::uint64_t width = 1;
  for (unsigned char byte : utf8) {
    if (byte >= 0xF0) return 4;
    if (byte >= 0xC4) width = 2;  // a lead byte of U+0100 and past
  }
  return width;
}

inline Value Scalar(Kind kind) {
  Value v;
  v.kind = kind;
  return v;
}

}  // namespace dolsot::pickle_walk
