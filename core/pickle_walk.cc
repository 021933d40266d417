// The pickle machine over abstract values (see pickle_walk.h): reading the
// data, the stack and the memo, and every opcode but the constructors' cost.
#include "core/pickle_walk.h"

#include <algorithm>
#include <cstring>

namespace dolsot::pickle_walk {

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

}  // namespace dolsot::pickle_walk
