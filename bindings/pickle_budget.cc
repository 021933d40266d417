// What a session's pickle would build in the host (see pickle_budget.h).
#include "bindings/pickle_budget.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <new>
#include <unordered_map>

namespace dolsot::bindings {
namespace {

constexpr std::uint64_t kHuge = std::numeric_limits<std::uint64_t>::max();

std::uint64_t Add(std::uint64_t a, std::uint64_t b) { return a > kHuge - b ? kHuge : a + b; }
std::uint64_t Mul(std::uint64_t a, std::uint64_t b) {
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

std::string GlobalText(Global global) {
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

bool Walk::Read(std::size_t n, std::string_view* out) {
  if (n > data_.size() - at_) return false;
  *out = data_.substr(at_, n);
  at_ += n;
  return true;
}

bool Walk::ReadCount(std::size_t width, std::uint64_t* count) {
  if (width > data_.size() - at_) return false;
  // Little-endian, accumulated in a register (a char read may alias *count).
  std::uint64_t value = 0;
  const auto* bytes = reinterpret_cast<const unsigned char*>(data_.data() + at_);
  for (std::size_t i = 0; i < width; ++i) value |= static_cast<std::uint64_t>(bytes[i]) << (8 * i);
  at_ += width;
  *count = value;
  return true;
}

bool Walk::ReadLine(std::string_view* line) {
  const std::size_t end = data_.find('\n', at_);
  if (end == std::string_view::npos) return false;
  *line = data_.substr(at_, end - at_);
  at_ = end + 1;
  return true;
}

bool Walk::OverBudget(const std::string& what) {
  std::string budget = max_ % (std::uint64_t{1} << 20) == 0
                           ? std::to_string(max_ >> 20) + " MiB"
                           : std::to_string(max_) + " bytes";
  return Refuse("the session's pickle would build more than the host's budget for bytes from a "
                "session (" + budget + ", Repl(max_unpickle_mb=...)) allows: " + what);
}

bool Walk::Charge(std::uint64_t bytes, const char* what) {
  charged_ = Add(charged_, bytes);
  if (charged_ > max_) return OverBudget(what);
  return true;
}

bool Walk::ChargeFor(std::uint64_t bytes, const std::string& what) {
  return Charge(bytes, what.c_str());
}

bool Walk::CheckDepth(std::uint32_t depth) {
  if (depth <= kMaxPickleDepth) return true;
  return Refuse("the session's pickle nests values deeper than the host's budget for bytes "
                "from a session allows (" + std::to_string(kMaxPickleDepth) + " levels)");
}

bool Walk::Pop(Value* out) {
  if (stack_.size() <= Fence()) return false;
  *out = stack_.back();
  stack_.pop_back();
  return true;
}

bool Walk::PopMark(std::vector<Value>* items) {
  if (marks_.empty()) return false;
  const std::size_t mark = marks_.back();
  marks_.pop_back();
  items->assign(stack_.begin() + static_cast<std::ptrdiff_t>(mark), stack_.end());
  stack_.resize(mark);
  return true;
}

Value Walk::Int(std::uint64_t bits, bool exact, std::int64_t value) const {
  Value v;
  v.kind = Kind::kInt;
  v.length = bits;
  v.hash_work = 1 + bits / 64;
  if (exact) {
    v.flags = kExact;
    v.small = static_cast<std::uint64_t>(value);
  }
  return v;
}

Value Walk::Text(Kind kind, std::size_t offset, std::uint64_t length) const {
  Value v;
  v.kind = kind;
  v.length = length;
  v.flags = kText;
  v.small = offset;
  return v;
}

std::string_view Walk::TextOf(const Value& value) const {
  if (!(value.flags & kText)) return {};
  return data_.substr(static_cast<std::size_t>(value.small), static_cast<std::size_t>(value.length));
}

const Value* Walk::Item(const Value& tuple, std::size_t index) const {
  if (tuple.kind != Kind::kTuple || !(tuple.flags & kItems) || index >= tuple.items) return nullptr;
  return &items_[static_cast<std::size_t>(tuple.small) + index];
}

std::uint32_t Walk::Depth(const Value& value) const {
  if (value.kind == Kind::kContainer) return arena_[static_cast<std::size_t>(value.small)].depth;
  return value.depth;
}

bool Walk::Tuple(std::vector<Value>& items) {
  Value tuple;
  tuple.kind = Kind::kTuple;
  tuple.length = items.size();
  std::uint32_t depth = 0;
  for (const Value& item : items) {
    tuple.hash_work = Add(tuple.hash_work, item.hash_work);
    depth = std::max(depth, Depth(item));
  }
  tuple.depth = depth + 1;
  bool status = CheckDepth(tuple.depth);
  if (!status) return status;
  status = Charge(Mul(items.size(), kSlot), "a tuple's items");
  if (!status) return status;
  if (items.size() <= kMaxItems) {
    // The walk keeps these items (a call's arguments): charged at its cost.
    status = Charge(Mul(items.size(), kPush - kSlot), "a tuple's items");
    if (!status) return status;
    tuple.flags = kItems;
    tuple.items = static_cast<std::uint8_t>(items.size());
    tuple.small = items_.size();
    items_.insert(items_.end(), items.begin(), items.end());
  }
  return Push(tuple);
}

bool Walk::NewContainer(Global type, std::uint64_t length, std::uint64_t element_hash_work,
                          std::uint32_t depth, Value* out) {
  bool status = CheckDepth(depth);
  if (!status) return status;
  Value v;
  v.kind = Kind::kContainer;
  v.global = type;
  v.small = arena_.size();
  // A frozenset hashes once, from its entries' stored hashes.
  v.hash_work = type == Global::kFrozenSet ? Add(1, length) : 1;
  arena_.push_back({length, element_hash_work, depth, type});
  *out = v;
  return true;
}

// APPEND(S) (pairs false) into a list or a deque (its pickle's items),
// SETITEM(S) (pairs true) into a dict, ADDITEMS into a set: anything else is refused (the unpickler would call
// the target's own append / extend / __setitem__ / add).
bool Walk::AddTo(const Value& target, std::vector<Value>& items, bool pairs) {
  if (target.kind != Kind::kContainer) {
    return Refuse("the session's pickle adds items to something that is not a container");
  }
  Container& container = arena_[static_cast<std::size_t>(target.small)];
  const bool is_dict = container.type == Global::kDict || container.type == Global::kOrderedDict ||
                       container.type == Global::kCounter;
  const bool wants_pairs = is_dict;
  const bool is_set = container.type == Global::kSet;
  const bool is_sequence = container.type == Global::kList || container.type == Global::kDeque;
  if (pairs != wants_pairs || (!pairs && !is_sequence && !is_set) ||
      (pairs && items.size() % 2 != 0)) {
    return Refuse("the session's pickle adds items to a " + GlobalText(container.type) +
                  " in a way the host does not decode");
  }
  const std::uint64_t added = pairs ? items.size() / 2 : items.size();
  std::uint64_t hash_work = 0;
  std::uint32_t depth = container.depth;
  for (std::size_t i = 0; i < items.size(); ++i) {
    const bool key = !pairs || i % 2 == 0;
    if (key && (is_dict || is_set)) hash_work = Add(hash_work, items[i].hash_work);
    if (key) container.element_hash_work = Add(container.element_hash_work, items[i].hash_work);
    depth = std::max(depth, Depth(items[i]) + 1);
  }
  bool status = CheckDepth(depth);
  if (!status) return status;
  container.depth = depth;
  container.length = Add(container.length, added);
  status = Charge(Mul(added, (is_dict || is_set) ? kEntry : kSlot), "a container's elements");
  if (!status) return status;
  return Charge(hash_work, "hashing a container's keys");
}

bool Walk::Memo(std::uint64_t index, bool put) {
  const bool dense = index < memo_.size() || index <= 2 * memo_.size() + 1024;
  if (put) {
    if (stack_.size() <= Fence()) return Malformed("memo put of an empty stack");
    const Value& top = stack_.back();
    if (index >= memo_capacity_) {
      // The unpickler's memo array grows to twice the index, zero-filled.
      bool status = Charge(Mul(Add(index, 1) - memo_capacity_, 2 * kMemoSlot), "the memo");
      if (!status) return status;
      memo_capacity_ = index + 1;
    }
    Value* slot = nullptr;
    if (dense) {
      if (index >= memo_.size()) memo_.resize(static_cast<std::size_t>(index) + 1);
      slot = &memo_[static_cast<std::size_t>(index)];
      if (auto it = sparse_memo_.find(index); slot->kind == Kind::kEmpty && it != sparse_memo_.end()) {
        *slot = it->second;  // put sparsely before the dense part reached it
        sparse_memo_.erase(it);
      }
    } else {
      slot = &sparse_memo_[index];
    }
    if (slot->kind == Kind::kEmpty) ++memo_set_;
    *slot = top;
    return true;
  }
  const Value* found = nullptr;
  if (index < memo_.size() && memo_[static_cast<std::size_t>(index)].kind != Kind::kEmpty) {
    found = &memo_[static_cast<std::size_t>(index)];
  } else if (auto it = sparse_memo_.find(index); it != sparse_memo_.end()) {
    found = &it->second;
  }
  if (found == nullptr || found->kind == Kind::kEmpty) {
    return Malformed("memo get of a value never put");
  }
  return Push(*found, kSlot);  // a reference
}

bool Walk::StackGlobal(std::string_view module, std::string_view name) {
  for (const GlobalName& entry : kGlobals) {
    if (module == entry.module && name == entry.name) {
      named_ = true;
      Value v;
      v.kind = Kind::kGlobal;
      v.global = entry.global;
      return Push(v);
    }
  }
  return Refuse("the pickle names " + std::string(module) + "." + std::string(name) +
                ", which is not allowed to cross from the session into the host (unpickle='safe' "
                "takes plain data only: str, bytes, numbers, lists, tuples, dicts, sets, "
                "datetime, Decimal...; pass unpickle='full' to trust the session's code)");
}

// REDUCE, NEWOBJ, NEWOBJ_EX: `callable(*args)`, costed before it is made.
// NEWOBJ's `cls.__new__(cls, *args)` is costed as the call (it never builds
// more: several types build nothing until __init__).
bool Walk::Call(const Value& callable, const Value& args, bool newobj) {
  named_ = true;
  if (callable.kind != Kind::kGlobal) {
    return Refuse(std::string("the session's pickle calls something that is not an allowed "
                              "constructor (") + (newobj ? "NEWOBJ" : "REDUCE") + ")");
  }
  if (args.kind != Kind::kTuple || !(args.flags & kItems)) {
    return Refuse("the session's pickle calls " + GlobalText(callable.global) +
                  " with arguments the host cannot size (at most " +
                  std::to_string(kMaxItems) + ", in a tuple)");
  }
  std::vector<const Value*> arguments;
  for (std::size_t i = 0; i < args.items; ++i) arguments.push_back(Item(args, i));
  Value made;
  bool status = Construct(callable.global, arguments, &made);
  if (!status) return status;
  return Push(made);
}

// Bytes a character of the str that is this UTF-8 takes in CPython (PEP
// 393): 4 when any is past U+FFFF, 2 past U+00FF, else 1.
std::uint64_t StrWidth(std::string_view utf8) {
  std::uint64_t width = 1;
  for (unsigned char byte : utf8) {
    if (byte >= 0xF0) return 4;
    if (byte >= 0xC4) width = 2;  // a lead byte of U+0100 and past
  }
  return width;
}

Value Scalar(Kind kind) {
  Value v;
  v.kind = kind;
  return v;
}

bool IsNumber(const Value& v) {
  return v.kind == Kind::kInt || v.kind == Kind::kFloat || v.kind == Kind::kBool;
}
bool IsBytesLike(const Value& v) { return v.kind == Kind::kBytes || v.kind == Kind::kByteArray; }

// How many elements iterating `v` yields, and what each costs to make;
// false when the walk cannot tell (the call is refused).
bool Iterated(const Value& v, const std::vector<Container>& arena, std::uint64_t* count,
              std::uint64_t* each, std::uint64_t* hash_work) {
  *each = 0;
  switch (v.kind) {
    case Kind::kStr:
      *count = v.length;  // bytes: at least as many as characters
      *each = kIteratedStr;
      *hash_work = v.length;
      return true;
    case Kind::kBytes:
    case Kind::kByteArray:
      *count = v.length;  // small ints: cached
      *hash_work = v.length;
      return true;
    case Kind::kRange:
      *count = v.length;  // kHuge when its bounds are huge ints: over any budget
      *each = kIteratedInt;
      *hash_work = v.length;
      return true;
    case Kind::kTuple:
      *count = v.length;
      *hash_work = v.hash_work - 1;
      return true;
    case Kind::kContainer: {
      const Container& container = arena[static_cast<std::size_t>(v.small)];
      *count = container.length;
      *hash_work = container.element_hash_work;
      return true;
    }
    default:
      return false;
  }
}

bool Walk::FromIterable(Global global, const Value& source, Value* out) {
  std::uint64_t count = 0, each = 0, hash_work = 0;
  const std::string what = GlobalText(global) + "() of ";
  if (!Iterated(source, arena_, &count, &each, &hash_work)) {
    return Refuse("the session's pickle calls " + GlobalText(global) +
                  "() on a value the host's budget for bytes from a session cannot size");
  }
  const std::uint32_t depth = std::max<std::uint32_t>(Depth(source), 1);
  std::uint64_t per = kSlot;
  bool hashes = false;
  switch (global) {
    case Global::kSet: case Global::kFrozenSet: case Global::kDict: case Global::kOrderedDict:
    case Global::kCounter:
      per = kEntry + (global == Global::kCounter ? kIteratedInt : 0);
      hashes = true;
      break;
    case Global::kBytes: case Global::kByteArray:
      per = 1;
      break;
    default:
      break;
  }
  bool status = ChargeFor(Mul(count, Add(per, each)),
                            what + std::to_string(count) + " elements");
  if (!status) return status;
  if (hashes) {
    status = ChargeFor(hash_work, what + "elements that take " + std::to_string(hash_work) +
                                      " steps to hash");
    if (!status) return status;
  }
  switch (global) {
    case Global::kBytes: case Global::kByteArray:
      out->kind = global == Global::kBytes ? Kind::kBytes : Kind::kByteArray;
      out->length = count;
      return true;
    case Global::kTuple:
      out->kind = Kind::kTuple;
      out->length = count;
      out->hash_work = Add(1, hash_work);
      out->depth = depth;
      return CheckDepth(depth);
    default:
      return NewContainer(global, count, hash_work, depth, out);
  }
}

// The cost rule of each allowed constructor (see pickle_budget.h).
bool Walk::Construct(Global global, const std::vector<const Value*>& args, Value* out) {
  const std::size_t n = args.size();
  const Value* a0 = n > 0 ? args[0] : nullptr;
  const Value* a1 = n > 1 ? args[1] : nullptr;
  const std::string name = GlobalText(global);
  auto refuse = [&](const char* why) {
    return Refuse("the session's pickle calls " + name + "() " + why +
                  ", which the host's budget for bytes from a session cannot cost");
  };
  auto number_text = [&](const Value& v) {
    return (v.kind == Kind::kStr || IsBytesLike(v)) && v.length <= kMaxNumberText;
  };
  // An encoding the host decodes in linear time, with a builtin error
  // handler: no codec or handler of the pickle's choosing (a host may have
  // registered its own).
  const Value* a2 = n > 2 ? args[2] : nullptr;
  auto plain_encoding = [&](const Value* v) {
    if (v == nullptr) return true;
    const std::string_view text = TextOf(*v);
    const std::string_view errors = a2 == nullptr ? "strict" : TextOf(*a2);
    return v->kind == Kind::kStr &&
           (text == "latin-1" || text == "latin1" || text == "utf-8" || text == "utf8" ||
            text == "ascii") &&
           (errors == "strict" || errors == "ignore" || errors == "replace" ||
            errors == "backslashreplace" || errors == "surrogateescape");
  };
  bool status = Charge(kInstance, "an object");
  if (!status) return status;
  out->kind = Kind::kObject;
  out->global = global;
  switch (global) {
    case Global::kList: case Global::kTuple: case Global::kSet: case Global::kFrozenSet:
    case Global::kDict: case Global::kOrderedDict: case Global::kCounter: case Global::kDeque:
      if (n == 0) {
        if (global == Global::kTuple) {
          out->kind = Kind::kTuple;
          return true;
        }
        return NewContainer(global, 0, 0, 1, out);
      }
      if (n > (global == Global::kDeque ? 2u : 1u)) return refuse("with too many arguments");
      if (global == Global::kDeque && a1 != nullptr && a1->kind != Kind::kInt &&
          a1->kind != Kind::kNone) {
        return refuse("with a maxlen that is not an int");
      }
      return FromIterable(global == Global::kDeque ? Global::kDeque : global, *a0, out);
    case Global::kBytes: case Global::kByteArray:
      if (n == 0) {
        out->kind = global == Global::kBytes ? Kind::kBytes : Kind::kByteArray;
        return true;
      }
      if (a0->kind == Kind::kInt || a0->kind == Kind::kBool) {  // bytes(n): n zero bytes
        if (n != 1) return refuse("with too many arguments");
        const std::uint64_t size = a0->kind == Kind::kBool ? 1
                                   : (a0->flags & kExact) ? a0->small : kHuge;
        if (static_cast<std::int64_t>(size) < 0 && size != kHuge) return refuse("of a negative size");
        status = ChargeFor(size, name + "(" + (size == kHuge ? std::string("a huge int")
                                                             : std::to_string(size)) + ")");
        if (!status) return status;
        out->kind = global == Global::kBytes ? Kind::kBytes : Kind::kByteArray;
        out->length = size;
        return true;
      }
      if (a0->kind == Kind::kStr) {  // (str, encoding[, errors])
        if (n > 3 || !plain_encoding(a1)) return refuse("with an encoding it does not decode");
        status = ChargeFor(Mul(a0->length, 4), name + "() of a str");
        if (!status) return status;
        out->kind = global == Global::kBytes ? Kind::kBytes : Kind::kByteArray;
        out->length = Mul(a0->length, 4);
        return true;
      }
      if (n != 1) return refuse("with too many arguments");
      return FromIterable(global, *a0, out);
    case Global::kStr:
      if (n == 0) {
        out->kind = Kind::kStr;
        return true;
      }
      if (n == 1 && (a0->kind == Kind::kStr || IsBytesLike(*a0) || a0->kind == Kind::kFloat ||
                     a0->kind == Kind::kBool || a0->kind == Kind::kNone ||
                     (a0->kind == Kind::kInt && a0->length <= 64))) {
        status = ChargeFor(Add(Mul(a0->length, 4), 8), "str() of a value");  // repr(bytes): \xNN
        if (!status) return status;
      } else if (n >= 2 && n <= 3 && IsBytesLike(*a0) && plain_encoding(a1)) {
        status = ChargeFor(Mul(a0->length, 4), "str() of bytes");
        if (!status) return status;
      } else {
        return refuse("with arguments it does not decode");
      }
      out->kind = Kind::kStr;
      out->length = Add(Mul(a0->length, 4), 8);
      out->flags = 0;
      return true;
    case Global::kInt:
      if (n == 0 || (n == 1 && IsNumber(*a0)) ||
          (n <= 2 && number_text(*a0) && (a1 == nullptr || a1->kind == Kind::kInt))) {
        const std::uint64_t bits = n == 0 ? 1
                                   : a0->kind == Kind::kInt   ? a0->length
                                   : a0->kind == Kind::kFloat ? 1024
                                                              : Mul(a0->length, 6);
        *out = Int(bits, false, 0);
        return Charge(bits / 8, "an int");
      }
      return refuse("with arguments it does not decode (a number, or at most 4300 digits)");
    case Global::kFloat: case Global::kComplex: case Global::kBool:
      for (const Value* arg : args) {
        const bool fine = global == Global::kBool || IsNumber(*arg) || number_text(*arg);
        if (!fine || n > 2) return refuse("with arguments it does not decode (numbers)");
      }
      out->kind = global == Global::kFloat ? Kind::kFloat
                  : global == Global::kBool ? Kind::kBool
                                            : Kind::kObject;
      return true;
    case Global::kSlice:
      if (n < 1 || n > 3) return refuse("with too many arguments");
      for (const Value* arg : args) out->depth = std::max(out->depth, Depth(*arg) + 1);
      return CheckDepth(out->depth);
    case Global::kRange: {
      if (n < 1 || n > 3) return refuse("with too many arguments");
      std::int64_t bounds[3] = {0, 0, 1};
      bool exact = true;
      for (std::size_t i = 0; i < n; ++i) {
        if (args[i]->kind != Kind::kInt && args[i]->kind != Kind::kBool) {
          return refuse("with arguments that are not ints");
        }
        if (!(args[i]->flags & kExact)) exact = false;
        bounds[n == 1 ? 1 : i] = static_cast<std::int64_t>(args[i]->small);
      }
      out->kind = Kind::kRange;
      out->length = kHuge;  // lazy: what iterates it is refused
      if (exact && bounds[2] != 0) {
        const __int128 start = bounds[0], stop = bounds[1], step = bounds[2];
        const __int128 span = step > 0 ? stop - start : start - stop;
        const __int128 each = step > 0 ? step : -step;
        out->length = span <= 0 ? 0 : static_cast<std::uint64_t>((span + each - 1) / each);
      }
      return true;
    }
    case Global::kDate: case Global::kDateTime: case Global::kTime: case Global::kTimeDelta:
    case Global::kTimeZone: case Global::kUuid:
      if (n > kMaxItems) return refuse("with too many arguments");
      for (const Value* arg : args) {
        const bool scalar = IsNumber(*arg) || arg->kind == Kind::kNone ||
                            ((arg->kind == Kind::kStr || IsBytesLike(*arg)) && arg->length <= 256) ||
                            (arg->kind == Kind::kObject &&
                             (arg->global == Global::kTimeZone || arg->global == Global::kTimeDelta));
        if (!scalar) return refuse("with arguments it does not decode (small scalars)");
      }
      return true;
    case Global::kDecimal:
      if (n > 1) return refuse("with too many arguments");
      if (n == 1 && !(a0->kind == Kind::kStr ||
                      (a0->kind == Kind::kInt && a0->length <= kMaxNumberBits) ||
                      a0->kind == Kind::kFloat || a0->kind == Kind::kBool ||
                      (a0->kind == Kind::kObject && a0->global == Global::kDecimal))) {
        return refuse("with arguments it does not decode (a str or a number)");
      }
      return n == 1 && a0->kind == Kind::kStr ? Charge(a0->length, "a Decimal") : true;
    case Global::kFraction:
      if (n > 2) return refuse("with too many arguments");
      for (const Value* arg : args) {
        const std::string_view text = TextOf(*arg);
        const bool fine =
            (arg->kind == Kind::kInt && arg->length <= kMaxNumberBits) || arg->kind == Kind::kBool ||
            (arg->kind == Kind::kObject && arg->global == Global::kFraction) ||
            (n == 1 && arg->kind == Kind::kFloat) ||
            (n == 1 && arg->kind == Kind::kStr && (arg->flags & kText) &&
             arg->length <= kMaxNumberText && text.find_first_of("eE") == std::string_view::npos);
        if (!fine) {
          return refuse("with arguments it does not decode (ints of at most 14300 bits, or a "
                        "str of at most 4300 characters without an exponent)");
        }
      }
      return true;
    case Global::kNone:
      break;
  }
  return refuse("in a way the host does not decode");
}

// BUILD: state set on an instance the pickle made (never on a class): only
// a dict of attributes, only on an object or a Counter/OrderedDict/deque.
bool Walk::Build() {
  named_ = true;
  Value state, target;
  if (!Pop(&state) || !Pop(&target)) return Malformed("BUILD without a target");
  const bool instance = target.kind == Kind::kObject ||
                        (target.kind == Kind::kContainer && target.global != Global::kList &&
                         target.global != Global::kDict);
  const bool dict_state = state.kind == Kind::kContainer && state.global == Global::kDict;
  if (!instance || !dict_state) {
    return Refuse("the session's pickle sets state on something the host does not let it "
                  "(BUILD takes a dict, on an instance the pickle made)");
  }
  bool status = Charge(Mul(arena_[static_cast<std::size_t>(state.small)].length, kEntry),
                         "an object's attributes");
  if (!status) return status;
  stack_.push_back(target);  // back where it was: charged when first pushed
  return true;
}

bool Walk::Run() {
  std::vector<Value>& items = popped_;
  // Declared once: a Value made per opcode costs more than most opcodes.
  bool status = true;
  Value a, b, c;
  std::string_view bytes;
  std::uint64_t count = 0;
  while (at_ < data_.size()) {
    const auto code = static_cast<std::uint8_t>(data_[at_++]);
    const std::size_t start = at_;
    switch (code) {
      case op::kProto:
        if (!Read(1, &bytes)) return Malformed("truncated PROTO");
        break;
      case op::kFrame:
        if (!ReadCount(8, &count)) return Malformed("truncated FRAME");
        if (count > data_.size() - at_) return Malformed("a FRAME longer than the data");
        break;
      case op::kStop:
        if (stack_.size() != 1 || !marks_.empty()) return Malformed("STOP with a stack not of one value");
        shape_ = named_ ? PickleShape::kNamed : PickleShape::kPlain;
        return true;
      case op::kMark:
        marks_.push_back(stack_.size());
        break;
      case op::kPop:
        if (!marks_.empty() && marks_.back() == stack_.size()) {
          marks_.pop_back();
        } else if (!Pop(&a)) {
          return Malformed("POP of an empty stack");
        }
        break;
      case op::kPopMark:
        if (!PopMark(&items)) return Malformed("POP_MARK without a MARK");
        break;
      case op::kDup:
        if (stack_.size() <= Fence()) return Malformed("DUP of an empty stack");
        status = Push(stack_.back(), kSlot);
        break;
      case op::kNone: status = Push(Scalar(Kind::kNone), kSlot); break;
      case op::kNewTrue: case op::kNewFalse: status = Push(Scalar(Kind::kBool), kSlot); break;
      case op::kBinInt:
        if (!ReadCount(4, &count)) return Malformed("truncated BININT");
        status = PushInt(32, true, static_cast<std::int32_t>(static_cast<std::uint32_t>(count)));
        break;
      case op::kBinInt1:
        if (!ReadCount(1, &count)) return Malformed("truncated BININT1");
        status = PushInt(8, true, static_cast<std::int64_t>(count));
        break;
      case op::kBinInt2:
        if (!ReadCount(2, &count)) return Malformed("truncated BININT2");
        status = PushInt(16, true, static_cast<std::int64_t>(count));
        break;
      case op::kLong1: case op::kLong4: {
        if (!ReadCount(code == op::kLong1 ? 1 : 4, &count)) return Malformed("truncated LONG");
        if (code == op::kLong4 && count > 0x7fffffff) return Malformed("a negative LONG4 size");
        if (!Read(static_cast<std::size_t>(count), &bytes)) return Malformed("a LONG past the data's end");
        std::int64_t value = 0;
        const bool exact = count <= 8;
        if (exact && count > 0) {
          std::uint64_t raw = 0;
          for (std::size_t i = 0; i < count; ++i) {
            raw |= static_cast<std::uint64_t>(static_cast<std::uint8_t>(bytes[i])) << (8 * i);
          }
          if (count < 8 && (static_cast<std::uint8_t>(bytes[count - 1]) & 0x80)) {
            raw |= ~std::uint64_t{0} << (8 * count);  // sign-extend
          }
          value = static_cast<std::int64_t>(raw);
        }
        status = Charge(count, "an int");
        if (status) status = PushInt(Mul(count, 8), exact, value);
        break;
      }
      case op::kInt: case op::kLong: case op::kFloat: case op::kString: case op::kUnicode: {
        std::string_view line;
        if (!ReadLine(&line)) return Malformed("a text argument without its newline");
        if ((code == op::kInt || code == op::kLong) && line.size() > kMaxNumberText) {
          return Refuse("the session's pickle writes an int of more than 4300 digits as text");
        }
        named_ = true;  // protocol 0's text: the allow-list unpickler reads it
        status = Charge(line.size(), "a text value");
        if (!status) break;
        if (code == op::kInt || code == op::kLong) {
          if (code == op::kInt && (line == "00" || line == "01")) {
            a = Scalar(Kind::kBool);
          } else {
            a = Int(Add(Mul(line.size(), 4), 1), false, 0);
          }
        } else if (code == op::kFloat) {
          a = Scalar(Kind::kFloat);
        } else {
          a = Text(code == op::kString ? Kind::kBytes : Kind::kStr, start, line.size());
          a.flags = 0;  // escaped: its text is not its value
        }
        status = Push(a);
        break;
      }
      case op::kBinFloat:
        if (!Read(8, &bytes)) return Malformed("truncated BINFLOAT");
        status = Push(Scalar(Kind::kFloat));
        break;
      case op::kShortBinString: case op::kBinString: case op::kShortBinUnicode:
      case op::kBinUnicode: case op::kBinUnicode8: case op::kShortBinBytes: case op::kBinBytes:
      case op::kBinBytes8: case op::kByteArray8: {
        const std::size_t width = (code == op::kShortBinString || code == op::kShortBinUnicode ||
                                   code == op::kShortBinBytes) ? 1
                                  : (code == op::kBinUnicode8 || code == op::kBinBytes8 ||
                                     code == op::kByteArray8) ? 8 : 4;
        if (!ReadCount(width, &count)) return Malformed("a truncated length");
        // A declared length past the data's end is refused before anything is
        // allocated (CPython allocates a bytes object of the declared size first).
        if (count > max_) {
          return OverBudget("a str or bytes that declares " + std::to_string(count) + " bytes");
        }
        if (count > data_.size() - at_) return Malformed("a declared length past the data's end");
        const std::size_t offset = at_;
        at_ += static_cast<std::size_t>(count);
        const Kind kind = (code == op::kShortBinUnicode || code == op::kBinUnicode ||
                           code == op::kBinUnicode8) ? Kind::kStr
                          : code == op::kByteArray8 ? Kind::kByteArray : Kind::kBytes;
        // A str takes 1, 2 or 4 bytes a character, by its widest one: the
        // UTF-8 lead bytes say which (a character no more than its bytes).
        status = Charge(kind == Kind::kStr ? Mul(count, StrWidth(data_.substr(offset, count)))
                                           : count,
                        "a str or bytes");
        if (status) status = Push(Text(kind, offset, count));
        break;
      }
      case op::kEmptyTuple: items.clear(); status = Tuple(items); break;
      case op::kTuple1: case op::kTuple2: case op::kTuple3: {
        const std::size_t n = code - op::kTuple1 + 1u;
        if (stack_.size() < Fence() + n) return Malformed("TUPLE of too few values");
        items.assign(stack_.end() - static_cast<std::ptrdiff_t>(n), stack_.end());
        stack_.resize(stack_.size() - n);
        status = Tuple(items);
        break;
      }
      case op::kTuple:
        if (!PopMark(&items)) return Malformed("TUPLE without a MARK");
        status = Tuple(items);
        break;
      case op::kEmptyList: case op::kEmptyDict: case op::kEmptySet: case op::kList:
      case op::kDict: case op::kFrozenSet: {
        const Global type = (code == op::kEmptyList || code == op::kList) ? Global::kList
                            : (code == op::kEmptyDict || code == op::kDict) ? Global::kDict
                            : code == op::kEmptySet ? Global::kSet : Global::kFrozenSet;
        const bool marked = code == op::kList || code == op::kDict || code == op::kFrozenSet;
        if (marked && !PopMark(&items)) return Malformed("a container without a MARK");
        status = Charge(kInstance, "a container");
        if (status) status = NewContainer(type == Global::kFrozenSet ? Global::kSet : type, 0, 0, 1, &a);
        if (status && marked) status = AddTo(a, items, type == Global::kDict);
        if (status && type == Global::kFrozenSet) {
          arena_[static_cast<std::size_t>(a.small)].type = Global::kFrozenSet;
          a.global = Global::kFrozenSet;
          a.hash_work = Add(1, arena_[static_cast<std::size_t>(a.small)].length);
        }
        if (status) status = Push(a);
        break;
      }
      case op::kAppend: case op::kSetItem:
        items.clear();
        if (!Pop(&a)) return Malformed("APPEND/SETITEM of an empty stack");
        if (code == op::kSetItem && !Pop(&b)) return Malformed("SETITEM of one value");
        if (code == op::kSetItem) items.push_back(b);
        items.push_back(a);
        if (stack_.size() <= Fence()) return Malformed("APPEND/SETITEM without a target");
        status = AddTo(stack_.back(), items, code == op::kSetItem);
        break;
      case op::kAppends: case op::kSetItems: case op::kAddItems:
        if (!PopMark(&items)) return Malformed("APPENDS/SETITEMS/ADDITEMS without a MARK");
        if (stack_.size() <= Fence()) return Malformed("APPENDS/SETITEMS/ADDITEMS without a target");
        status = AddTo(stack_.back(), items, code == op::kSetItems);
        break;
      case op::kGet: case op::kPut: {
        named_ = true;
        std::string_view line;
        if (!ReadLine(&line) || line.empty() || line.size() > 10 ||
            line.find_first_not_of("0123456789") != std::string_view::npos) {
          return Malformed("a bad memo index");
        }
        std::uint64_t index = 0;
        for (char digit : line) index = index * 10 + static_cast<std::uint64_t>(digit - '0');
        status = Memo(index, code == op::kPut);
        break;
      }
      case op::kBinGet: case op::kBinPut: case op::kLongBinGet: case op::kLongBinPut:
        if (!ReadCount(code == op::kBinGet || code == op::kBinPut ? 1 : 4, &count)) {
          return Malformed("a truncated memo index");
        }
        status = Memo(count, code == op::kBinPut || code == op::kLongBinPut);
        break;
      case op::kMemoize:
        status = Memo(memo_set_, true);
        break;
      case op::kGlobal: {
        std::string_view module, name;
        if (!ReadLine(&module) || !ReadLine(&name)) return Malformed("a truncated GLOBAL");
        status = StackGlobal(module, name);
        break;
      }
      case op::kStackGlobal:
        if (!Pop(&b) || !Pop(&a)) return Malformed("STACK_GLOBAL of too few values");
        if (a.kind != Kind::kStr || b.kind != Kind::kStr || !(a.flags & kText) || !(b.flags & kText)) {
          return Refuse("the session's pickle names a global by something other than two strs");
        }
        status = StackGlobal(TextOf(a), TextOf(b));
        break;
      case op::kReduce: case op::kNewObj:
        if (!Pop(&b) || !Pop(&a)) return Malformed("REDUCE/NEWOBJ of too few values");
        status = Call(a, b, code == op::kNewObj);
        break;
      case op::kNewObjEx:
        if (!Pop(&c) || !Pop(&b) || !Pop(&a)) return Malformed("NEWOBJ_EX of too few values");
        if (c.kind != Kind::kContainer || arena_[static_cast<std::size_t>(c.small)].length != 0) {
          return Refuse("the session's pickle calls a constructor with keyword arguments");
        }
        status = Call(a, b, true);
        break;
      case op::kBuild:
        status = Build();
        break;
      default:
        return Refuse("the session's pickle uses opcode " + std::to_string(code) +
                      " (persistent ids, extension codes, INST/OBJ and out-of-band buffers "
                      "do not cross into the host)");
    }
    if (!status) return status;
  }
  return Malformed("no STOP");
}

}  // namespace

StatusOr<PickleShape> WalkPickle(std::string_view data, std::uint64_t max_bytes) {
  thread_local Walk::Scratch scratch;
  auto reset = [](auto& vector) {
    vector.clear();
    // A big walk's memory goes back once it is over.
    if (vector.capacity() > 4096) vector.shrink_to_fit();
  };
  try {
    Walk walk(data, max_bytes, scratch);
    StatusOr<PickleShape> shape =
        walk.Run() ? StatusOr<PickleShape>(walk.shape()) : StatusOr<PickleShape>(walk.error());
    reset(scratch.stack), reset(scratch.memo), reset(scratch.items), reset(scratch.popped);
    reset(scratch.marks), reset(scratch.arena);
    return shape;
  } catch (const std::bad_alloc&) {
    reset(scratch.stack), reset(scratch.memo), reset(scratch.items), reset(scratch.popped);
    reset(scratch.marks), reset(scratch.arena);
    // The walk holds no more than a few times the data's size; a host that
    // cannot spare that cannot decode it either.
    return InvalidArgument("the host ran out of memory walking the session's pickle (" +
                           std::to_string(data.size()) + " bytes)");
  }
}

const std::vector<std::pair<std::string, std::string>>& SafePickleGlobals() {
  static const auto* names = [] {
    auto* list = new std::vector<std::pair<std::string, std::string>>();
    for (const GlobalName& entry : kGlobals) list->emplace_back(entry.module, entry.name);
    return list;
  }();
  return *names;
}

}  // namespace dolsot::bindings
