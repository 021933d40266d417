// `dolsot serve [--stop | --status] [--json]`: runs the server of the
// current DOLSOT_CACHE_DIR in the foreground (for debugging or systemd),
// stops it, or says how it is. Reached when "serve" is the first argument,
// or follows global flags (command_line.h: only --json may, passed on as
// serve's own: dolsot --json serve --status); a cell "serve" goes after
// "--": dolsot -s x -- serve.
#pragma once

#include <ostream>

namespace dolsot::cli {

// argv[0] is "serve".
int ServeCommand(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

}  // namespace dolsot::cli
