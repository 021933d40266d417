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
# Quick when nothing changed. Usage: scripts/setup.sh [--tests] [--no-package]
#   --tests       also what only the tests need: clang and its sanitizer runtimes,
#                 which build the AST gate's fuzzer (scripts/test.sh passes it)
#   --no-package  do not put the build into .venv
set -euo pipefail
FOR_TESTS=0; PACKAGE=1
for arg in "$@"; do
  case "$arg" in
    --tests) FOR_TESTS=1 ;;
    --no-package) PACKAGE=0 ;;
    *) echo "setup.sh: unknown option '$arg' (known: --tests, --no-package)" >&2; exit 2 ;;
  esac
done
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
say() { printf '\033[1m[setup]\033[0m %s\n' "$*" >&2; }

# --- 1. Debian packages -------------------------------------------------------
# Pinned per Debian release; an unknown release takes the candidate and says so.
# clang and its runtimes build the AST gate's fuzzer (a short run is a test):
# installed with --tests only. redis-server: the RedisStore tests start their
# own on a free loopback port.
codename="$(. /etc/os-release && echo "${VERSION_CODENAME:-unknown}")"
case "$codename" in
  bookworm)
    PACKAGES=(libcli11-dev=2.1.2+ds-1 libgtest-dev=1.12.1-0.2 libgmock-dev=1.12.1-0.2
              nlohmann-json3-dev=3.11.2-2 libxxhash-dev=0.8.1-1 redis-server=5:7.0.15-1~deb12u10)
    FUZZ_PACKAGES=(clang=1:14.0-55.7~deb12u1 libclang-rt-14-dev=1:14.0.6-12) ;;
  trixie)
    PACKAGES=(libcli11-dev=2.4.1+ds-2 libgtest-dev=1.16.0-1 libgmock-dev=1.16.0-1
              nlohmann-json3-dev=3.11.3-1 libxxhash-dev=0.8.3-2 redis-server)
    FUZZ_PACKAGES=(clang=1:19.0-63 libclang-rt-19-dev=1:19.1.7-3+b1) ;;
  *)
    PACKAGES=(libcli11-dev libgtest-dev libgmock-dev nlohmann-json3-dev libxxhash-dev redis-server)
    FUZZ_PACKAGES=(clang) ;;
esac
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
stamp=".venv/.dolsot-requirements"
want="$(cat requirements/*.txt | sha256sum | cut -d' ' -f1)"
if [[ "$(cat "$stamp" 2>/dev/null)" != "$want" ]]; then
  say "installing pinned PyPI packages into .venv"
  .venv/bin/python -m pip install --quiet --disable-pip-version-check \
    -r requirements/build.txt -r requirements/test.txt
  echo "$want" > "$stamp"
fi
export PATH="$ROOT/.venv/bin:$PATH"

# --- 3 and 4. the build -----------------------------------------------------
# CMake fetches the tree-sitter sdists into .deps/ with pip (hash-checked).
# Configured again when packages came meanwhile (clang for --tests after a
# demo: the fuzzer's targets appear only once CMake finds it).
if [[ ! -f build/build.ninja ]] || ((${#missing[@]})); then
  say "configuring build/"
  cmake -S . -B build -G Ninja -DPython_EXECUTABLE="$ROOT/.venv/bin/python" \
        -DCMAKE_INSTALL_PREFIX="$ROOT/build/install" >/dev/null
fi
say "building"
cmake --build build -j "$(nproc)" | { grep -vE '^\[[0-9]+/[0-9]+\]' || true; }

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
