// GateMemory: merging, and the checkpoint entry's encoding.
#include "core/gate_memory.h"

#include <cstdint>
#include <utility>

namespace dolsot {
namespace {

// Layout (all integers little-endian): u8 format (1), u8 complete (0/1),
// then two name lists (sealed classes, sealed methods), each u32 count and
// per name u32 length + UTF-8 bytes, strictly ascending, none empty.
constexpr std::uint8_t kEncodingVersion = 1;
constexpr std::uint32_t kMaxNameBytes = 1u << 16;

void PutU32(std::string& out, std::uint32_t value) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFFu));
}

void PutNames(std::string& out, const GateMemory::Names& names) {
  PutU32(out, static_cast<std::uint32_t>(names.size()));
  for (const std::string& name : names) {
    PutU32(out, static_cast<std::uint32_t>(name.size()));
    out += name;
  }
}

class Reader {
 public:
  explicit Reader(std::string_view bytes) : bytes_(bytes) {}
  bool U8(std::uint8_t& value) {
    if (bytes_.size() - at_ < 1) return false;
    value = static_cast<std::uint8_t>(bytes_[at_++]);
    return true;
  }
  bool U32(std::uint32_t& value) {
    if (bytes_.size() - at_ < 4) return false;
    value = 0;
    for (int i = 0; i < 4; ++i) {
      value |= static_cast<std::uint32_t>(static_cast<unsigned char>(bytes_[at_ + i])) << (8 * i);
    }
    at_ += 4;
    return true;
  }
  Status Names(GateMemory::Names& names, const char* what) {
    std::uint32_t count = 0;
    if (!U32(count)) return CorruptError(std::string("gate memory: truncated ") + what);
    for (std::uint32_t i = 0; i < count; ++i) {
      std::uint32_t size = 0;
      if (!U32(size) || size == 0 || size > kMaxNameBytes || bytes_.size() - at_ < size) {
        return CorruptError(std::string("gate memory: a bad name among the ") + what);
      }
      std::string name(bytes_.substr(at_, size));
      at_ += size;
      if (!names.empty() && !(*names.rbegin() < name)) {
        return CorruptError(std::string("gate memory: ") + what + " not in order");
      }
      names.insert(names.end(), std::move(name));
    }
    return Status::Ok();
  }
  bool AtEnd() const { return at_ == bytes_.size(); }

 private:
  std::string_view bytes_;
  std::size_t at_ = 0;
};

}  // namespace

void GateMemory::Merge(const GateMemory& other) {
  sealed_classes.insert(other.sealed_classes.begin(), other.sealed_classes.end());
  sealed_methods.insert(other.sealed_methods.begin(), other.sealed_methods.end());
  complete = complete && other.complete;
}

std::string GateMemory::Encode() const {
  std::string out;
  out.push_back(static_cast<char>(kEncodingVersion));
  out.push_back(complete ? '\1' : '\0');
  PutNames(out, sealed_classes);
  PutNames(out, sealed_methods);
  return out;
}

StatusOr<GateMemory> GateMemory::Decode(std::string_view bytes) {
  Reader reader(bytes);
  std::uint8_t version = 0, complete = 0;
  if (!reader.U8(version) || version != kEncodingVersion) {
    return CorruptError("gate memory: unknown encoding version");
  }
  if (!reader.U8(complete) || complete > 1) return CorruptError("gate memory: bad completeness flag");
  GateMemory memory;
  memory.complete = complete == 1;
  DOLSOT_RETURN_IF_ERROR(reader.Names(memory.sealed_classes, "sealed classes"));
  DOLSOT_RETURN_IF_ERROR(reader.Names(memory.sealed_methods, "sealed methods"));
  if (!reader.AtEnd()) return CorruptError("gate memory: trailing bytes");
  return memory;
}

GateMemory SessionGateMemory::Get() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return memory_;
}

void SessionGateMemory::Set(GateMemory memory) {
  std::lock_guard<std::mutex> lock(mutex_);
  memory_ = std::move(memory);
}

void SessionGateMemory::Learn(const GateMemory& learned) {
  if (learned.empty() && learned.complete) return;
  std::lock_guard<std::mutex> lock(mutex_);
  memory_.Merge(learned);
}

}  // namespace dolsot
