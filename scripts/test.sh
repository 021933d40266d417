#!/usr/bin/env bash
# Sets everything up (scripts/setup.sh) and runs every test: the GoogleTest
# suites through ctest, then pytest against the dolsot package setup.sh put
# into .venv (the build tree's); tests/python/test_install.py builds and
# installs the sdist and the wheel the way users do (marked `packaging`).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/setup.sh" --tests
export PATH="$ROOT/.venv/bin:$PATH"

echo "== ctest (GoogleTest) =="
ctest --test-dir "$ROOT/build" --output-on-failure -j 2 --timeout 600

echo "== pytest =="
# Run from tests/ so the .venv's package (not the source tree) is imported.
cd "$ROOT/tests"
python -m pytest -q -p no:cacheprovider python "$@"
