// What a call of an allowed constructor would build (Walk::Construct,
// Walk::FromIterable; see pickle_walk.h), costed from the abstract values of
// its arguments before the unpickler could make the call.
#include <algorithm>

#include "core/pickle_walk.h"

namespace dolsot::pickle_walk {
namespace {

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

}  // namespace

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

}  // namespace dolsot::pickle_walk
