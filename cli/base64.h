// Base64 (RFC 4648, standard alphabet, padded): how MCP carries binary
// content such as a cell's PNG figures inside JSON.
#pragma once

#include <string>
#include <string_view>

namespace dolsot::cli {

std::string Base64Encode(std::string_view bytes);

}  // namespace dolsot::cli
