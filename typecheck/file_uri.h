// file:// URIs for the paths ty and the gate exchange over LSP.
#pragma once

#include <string>
#include <string_view>

namespace dolsot::typecheck {

// "file://" + `path` (absolute), every byte but unreserved ones and '/'
// percent-encoded.
std::string FileUri(std::string_view path);

// The path of a file:// URI, percent-escapes decoded; other URIs (ty's
// "vendored://stdlib/...") come back unchanged.
std::string PathOfUri(std::string_view uri);

}  // namespace dolsot::typecheck
