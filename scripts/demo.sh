#!/usr/bin/env bash
# Sets up and builds foundryc, compiles a bundled sample model and runs it against PyTorch's
# reference outputs:   scripts/demo.sh [SAMPLE]   (default: pointwise; see samples/)
set -euo pipefail
cd "$(dirname "$0")/.."
sample="${1:-pointwise}"
BUILD_DIR="${BUILD_DIR:-build}"
export BUILD_DIR
scripts/setup.sh foundryc foundry-run  # not the test suite: scripts/test.sh builds that
out="out/$sample"
"$BUILD_DIR/foundryc" "samples/$sample/model.pt2" -o "$out" --dump-ir
echo "demo: compiled samples/$sample/model.pt2 into $out/ (sources, model.h, model.so; IR dumps in $out/debug/)"
"$BUILD_DIR/foundry-run" "$out" --inputs "samples/$sample/inputs" --expected "samples/$sample/expected" --bench 100
