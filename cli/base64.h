// Base64 (RFC 4648, standard alphabet, padded): how MCP carries binary
// content such as a cell's PNG figures inside JSON, and how the server's
// frames carry byte strings (cwd, code, output) that need not be UTF-8.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace dolsot::cli {

std::string Base64Encode(std::string_view bytes);
// nullopt for anything but canonical, padded base64.
std::optional<std::string> Base64Decode(std::string_view text);

}  // namespace dolsot::cli
