#!/usr/bin/env bash
# Sets up and builds foundryc, then runs the whole test suite (ctest). Extra arguments go to ctest,
# e.g. `scripts/test.sh -L fast` or `scripts/test.sh -R interpret`.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${BUILD_DIR:-build}"
export BUILD_DIR
scripts/setup.sh
ctest --test-dir "$BUILD_DIR" --output-on-failure -j2 "$@"
