#!/usr/bin/env bash
# Sets up everything dolsot needs on a fresh machine, idempotently:
#   1. Debian packages (CLI11, GoogleTest, redis-server for the RedisStore
#      tests) at pinned versions, via apt-get;
#   2. a virtual environment .venv with the pinned PyPI packages;
#   3. the registry source distributions of tree-sitter and its Python grammar;
#   4. the CMake build (build/), compiled once, and that build put into .venv
#      as a development install (the dolsot package, the dolsot CLI and
#      dolsot-worker), so nothing is compiled a second time for a wheel; the
#      wheel and the sdist are built and tested by tests/python/test_install.py.
# Quick when nothing changed. Usage: scripts/setup.sh [--demo | --tests] [--no-package]
#   --demo        only what scripts/demo.sh runs: the dolsot CLI, dolsot-worker
#                 and the dolsot Python package, built from a configuration
#                 without the test suites and benchmarks, with the Debian and
#                 PyPI packages they need (requirements/build.txt, dill); no
#                 GoogleTest, redis-server, or test-only PyPI packages
#   --tests       also what only the tests need: clang and its sanitizer runtimes,
#                 which build the AST gate's fuzzer (scripts/test.sh passes it)
#   --no-package  do not put the build into .venv
set -euo pipefail
FOR_TESTS=0; FOR_DEMO=0; PACKAGE=1
for arg in "$@"; do
  case "$arg" in
    --tests) FOR_TESTS=1 ;;
    --demo) FOR_DEMO=1 ;;
    --no-package) PACKAGE=0 ;;
    *) echo "setup.sh: unknown option '$arg' (known: --demo, --tests, --no-package)" >&2; exit 2 ;;
  esac
done
if ((FOR_TESTS && FOR_DEMO)); then
  echo "setup.sh: --demo and --tests exclude each other" >&2; exit 2
fi
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
say() { printf '\033[1m[setup]\033[0m %s\n' "$*" >&2; }

# --- 1. Debian packages -------------------------------------------------------
# Pinned per Debian release; an unknown release takes the candidate and says so.
# clang and its runtimes build the AST gate's fuzzer (a short run is a test):
# installed with --tests only. redis-server: the RedisStore tests start their
# own on a free loopback port.
# BUILD_PACKAGES build the library, the CLI and the worker; TEST_PACKAGES
# (GoogleTest, redis-server) only the tests, so --demo skips them.
codename="$(. /etc/os-release && echo "${VERSION_CODENAME:-unknown}")"
case "$codename" in
  bookworm)
    BUILD_PACKAGES=(libcli11-dev=2.1.2+ds-1 nlohmann-json3-dev=3.11.2-2 libxxhash-dev=0.8.1-1)
    TEST_PACKAGES=(libgtest-dev=1.12.1-0.2 libgmock-dev=1.12.1-0.2 redis-server=5:7.0.15-1~deb12u10)
    FUZZ_PACKAGES=(clang=1:14.0-55.7~deb12u1 libclang-rt-14-dev=1:14.0.6-12) ;;
  trixie)
    BUILD_PACKAGES=(libcli11-dev=2.4.1+ds-2 nlohmann-json3-dev=3.11.3-1 libxxhash-dev=0.8.3-2)
    TEST_PACKAGES=(libgtest-dev=1.16.0-1 libgmock-dev=1.16.0-1 redis-server)
    FUZZ_PACKAGES=(clang=1:19.0-63 libclang-rt-19-dev=1:19.1.7-3+b1) ;;
  *)
    BUILD_PACKAGES=(libcli11-dev nlohmann-json3-dev libxxhash-dev)
    TEST_PACKAGES=(libgtest-dev libgmock-dev redis-server)
    FUZZ_PACKAGES=(clang) ;;
esac
PACKAGES=("${BUILD_PACKAGES[@]}")
((FOR_DEMO)) || PACKAGES+=("${TEST_PACKAGES[@]}")
((FOR_TESTS)) && PACKAGES+=("${FUZZ_PACKAGES[@]}")
missing=()
for spec in "${PACKAGES[@]}"; do
  pkg="${spec%%=*}"
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$spec")
done
if ((${#missing[@]})); then
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  say "installing Debian packages: ${missing[*]}"
  $SUDO apt-get update -qq
  specs=()
  for spec in "${missing[@]}"; do
    pkg="${spec%%=*}"; ver=""
    [[ "$spec" == *=* ]] && ver="${spec#*=}"
    if [[ -z "$ver" ]] || apt-cache madison "$pkg" | awk -F'|' '{gsub(/ /, "", $2); print $2}' | grep -qxF "$ver"; then
      specs+=("$spec")
    elif apt-cache show "$pkg" >/dev/null 2>&1; then
      say "warning: $pkg=$ver is not available on Debian '$codename'; taking the candidate"
      specs+=("$pkg")
    else
      say "warning: $pkg is not available on Debian '$codename'; skipping it"
    fi
  done
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${specs[@]}" >/dev/null
fi

# --- 2. the virtual environment ---------------------------------------------
PY="${DOLSOT_PYTHON:-python3}"
if [[ ! -x .venv/bin/python ]] || ! .venv/bin/python -c 'import sys' 2>/dev/null; then
  say "creating .venv with $($PY --version)"
  rm -rf .venv
  "$PY" -m venv .venv
fi
# Everything pinned (the tests'), or with --demo what the build and a cell
# need: requirements/build.txt and dill (checkpoints of cell-defined
# functions), pinned in test.txt. A full install also serves the demo.
stamp=".venv/.dolsot-requirements"
demo_stamp=".venv/.dolsot-requirements-demo"
want="$(cat requirements/*.txt | sha256sum | cut -d' ' -f1)"
demo_pins=(-r requirements/build.txt "$(grep -m1 '^dill==' requirements/test.txt)")
want_demo="$(printf '%s\n' "${demo_pins[@]}" | cat - requirements/build.txt | sha256sum | cut -d' ' -f1)"
if ((FOR_DEMO)); then
  if [[ "$(cat "$stamp" 2>/dev/null)" != "$want" && "$(cat "$demo_stamp" 2>/dev/null)" != "$want_demo" ]]; then
    say "installing the build's pinned PyPI packages into .venv (pybind11, scikit-build-core, cmake, ninja, dill)"
    .venv/bin/python -m pip install --quiet --disable-pip-version-check "${demo_pins[@]}"
    echo "$want_demo" > "$demo_stamp"
  fi
elif [[ "$(cat "$stamp" 2>/dev/null)" != "$want" ]]; then
  say "installing pinned PyPI packages into .venv (the build's and the tests')"
  .venv/bin/python -m pip install --quiet --disable-pip-version-check \
    -r requirements/build.txt -r requirements/test.txt
  echo "$want" > "$stamp"
fi
export PATH="$ROOT/.venv/bin:$PATH"

# --- 3 and 4. the build -----------------------------------------------------
# CMake fetches the tree-sitter sdists into .deps/ with pip (hash-checked).
# Configured again when packages came meanwhile (clang for --tests after a
# demo: the fuzzer's targets appear only once CMake finds it).
# --demo configures a fresh build/ without the test suites and benchmarks
# (GoogleTest is not needed then); any other mode turns them on again.
if ((FOR_DEMO)); then SUITES=OFF; else SUITES=ON; fi
configured_suites="$(sed -n 's/^DOLSOT_BUILD_TESTS:BOOL=//p' build/CMakeCache.txt 2>/dev/null || true)"
if [[ ! -f build/build.ninja ]] || ((${#missing[@]})) || [[ "$SUITES" == ON && "$configured_suites" == OFF ]]; then
  say "configuring build/ (test suites and benchmarks: $SUITES)"
  cmake -S . -B build -G Ninja -DPython_EXECUTABLE="$ROOT/.venv/bin/python" \
        -DCMAKE_INSTALL_PREFIX="$ROOT/build/install" \
        -DDOLSOT_BUILD_TESTS="$SUITES" -DDOLSOT_BUILD_BENCH="$SUITES" >/dev/null
fi
# Ninja's [N/M] lines, thinned to one in 25 (and the last): a first build
# compiles for minutes, and this says how far it is.
progress() {
  awk '/^\[[0-9]+\/[0-9]+\]/ { split(substr($1, 2, length($1) - 2), n, "/");
                                if (n[1] > 0 && (n[1] % 25 == 0 || n[1] == n[2])) {
                                  printf "\033[1m[setup]\033[0m   %d of %d steps done\n", n[1], n[2]; fflush() }
                                next }
       { print; fflush() }' >&2
}
if ((FOR_DEMO)); then
  say "building the dolsot CLI, dolsot-worker and the Python module (no tests: about 180 compile steps, minutes on a first build without ccache)"
  cmake --build build -j "$(nproc)" --target dolsot_cli dolsot-worker _dolsot | progress
else
  say "building everything: the library, the CLI, the worker, the tests and the benchmarks (a first build: many minutes)"
  cmake --build build -j "$(nproc)" | progress
fi

if ((PACKAGE)); then
  # The build tree's package (build/python/dolsot, with its _dolsot module) on
  # .venv's path, and its two programs on .venv's bin/: what `pip install .`
  # would install, from the one build. A dolsot pip installed earlier goes.
  if .venv/bin/python -m pip show --quiet --disable-pip-version-check dolsot >/dev/null 2>&1; then
    say "removing the dolsot pip installed into .venv (replaced by the build tree's)"
    .venv/bin/python -m pip uninstall --quiet --disable-pip-version-check -y dolsot
  fi
  site="$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_path("platlib"))')"
  echo "$ROOT/build/python" > "$site/dolsot-build-tree.pth"
  ln -sf "$ROOT/build/cli/dolsot" .venv/bin/dolsot
  ln -sf "$ROOT/build/backend_subprocess/dolsot-worker" .venv/bin/dolsot-worker
fi
say "ready"
