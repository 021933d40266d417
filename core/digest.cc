// XXH3-128 through xxHash's header alone (XXH_INLINE_ALL): nothing to link,
// and no symbol of it is exported to a host that links dolsot.
#include "core/digest.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace dolsot {

struct DigestBuilder::State {
  XXH3_state_t xxh;
};

DigestBuilder::DigestBuilder() : state_(std::make_unique<State>()) {
  XXH3_INITSTATE(&state_->xxh);
  XXH3_128bits_reset(&state_->xxh);
}

DigestBuilder::~DigestBuilder() = default;

void DigestBuilder::Update(std::string_view bytes) {
  if (!bytes.empty()) XXH3_128bits_update(&state_->xxh, bytes.data(), bytes.size());
}

Digest128 DigestBuilder::Finish() const {
  const XXH128_hash_t hash = XXH3_128bits_digest(&state_->xxh);
  return Digest128{hash.low64, hash.high64};
}

Digest128 DigestOf(std::string_view bytes) {
  const XXH128_hash_t hash = XXH3_128bits(bytes.data(), bytes.size());
  return Digest128{hash.low64, hash.high64};
}

}  // namespace dolsot
