// `dolsot serve [--stop | --status] [--json]`: runs the server of the
// current DOLSOT_CACHE_DIR in the foreground (for debugging or systemd),
// stops it, or says how it is. Reached only when "serve" is the first
// argument, so a cell "serve" stays reachable: dolsot -s x -- serve.
#pragma once

#include <ostream>

namespace dolsot::cli {

// argv[0] is "serve".
int ServeCommand(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

}  // namespace dolsot::cli
