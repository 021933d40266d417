#!/usr/bin/env bash
# Sets up what the demo runs (scripts/setup.sh --demo: the CLI, the worker
# and the Python module, no test suites), then drives a real multi-cell
# session through the dolsot CLI with the example toolbox
# (examples/toolbox/mytools), printing what an agent host would see: stdout,
# stderr and the exit code.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/setup.sh" --demo >&2
export PATH="$ROOT/.venv/bin:$PATH"
export PYTHONPATH="$ROOT/examples/toolbox${PYTHONPATH:+:$PYTHONPATH}"
export DOLSOT_CACHE_DIR="$ROOT/build/demo-sessions"

bold() { printf '\033[1m%s\033[0m\n' "$*"; }
# Quotes an argument for display the way a person would type it.
shown() {
  if [[ "$1" =~ ^[A-Za-z0-9_:./=-]+$ ]]; then printf '%s' "$1"; else printf '"%s"' "${1//\"/\\\"}"; fi
}
# Runs one CLI call and shows both streams and the exit code, as an agent sees them.
agent() {
  local out err code
  local line="$ dolsot" arg
  for arg in "$@"; do line+=" $(shown "$arg")"; done
  bold "$line"
  out="$(mktemp)"; err="$(mktemp)"
  set +e; dolsot "$@" >"$out" 2>"$err"; code=$?; set -e
  [[ -s "$out" ]] && sed 's/^/  stdout| /' "$out"
  [[ -s "$err" ]] && sed 's/^/  stderr| /' "$err"
  echo "  exit  | $code"
  rm -f "$out" "$err"
  echo
}

# CLI calls go through a server that keeps the session live; stop it at the end.
trap 'dolsot serve --stop >/dev/null 2>&1 || true' EXIT
dolsot --reset demo >/dev/null 2>&1 || true
TB=(--toolbox mytools:mt --session demo)

agent "${TB[@]}" "print(mt.help())"
agent "${TB[@]}" "rows = mt.load('orders'); len(rows)"
agent "${TB[@]}" "best = mt.top(rows, 2); [r['item'] for r in best]"
agent "${TB[@]}" "mt.total(rows, 'price')"
agent "${TB[@]}" "mt.load('returns')"
agent "${TB[@]}" "mt.top(rows, n='2')"
agent "${TB[@]}" "args = (1,)"
agent "${TB[@]}" "mt.add(*args)"
agent "${TB[@]}" --timeout 1 "print('working...'); n = 0
while True:
    n += 1"
agent "${TB[@]}" "len(rows), 'state survived the killed cell'"
agent "${TB[@]}" --json "mt.total(best)"
agent --list-sessions
