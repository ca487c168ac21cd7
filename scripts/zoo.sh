#!/usr/bin/env bash
# Compiles the model zoo with foundryc and checks each model against PyTorch's outputs: a sweep
# of real models, never part of ctest or CI. Export the zoo first (needs PyTorch, torchvision,
# timm and transformers; see scripts/zoo/README.md):
#
#   python3 scripts/zoo/export.py /tmp/foundry-zoo
#   scripts/zoo.sh [ZOO_DIR] [--only a,b] [--kinds core,raw] [--compile-timeout 300] [--atol X --rtol Y]
#   scripts/zoo.sh ZOO_DIR --resume        (keep the results of an interrupted sweep, do the rest)
#   scripts/zoo.sh ZOO_DIR --table-only    (print ZOO_DIR/zoo.json's table again, compile nothing)
#
# ZOO_DIR defaults to ${TMPDIR:-/tmp}/foundry-zoo. Each archive (model.pt2: core ATen,
# model.raw.pt2: training IR) is compiled into a fresh ZOO_DIR/NAME/out.KIND, with the compile
# cache in ZOO_DIR/.cache (not the user's), and run with foundry-run on inputs/ against expected/,
# and on each cases/bN of a dynamic-batch model. The table goes to stdout and ZOO_DIR/zoo.md, the
# same data to ZOO_DIR/zoo.json, progress to stderr, each archive's logs to NAME/out.KIND.log.
# Tools: $FOUNDRYC and $FOUNDRY_RUN, default ${BUILD_DIR:-build}/foundryc and foundry-run.
# Needs only python3 (standard library).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="${BUILD_DIR:-$here/../build}"
export FOUNDRYC="${FOUNDRYC:-$build/foundryc}" FOUNDRY_RUN="${FOUNDRY_RUN:-$build/foundry-run}"

zoo="${TMPDIR:-/tmp}/foundry-zoo"
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
  zoo="$1"
  shift
fi
for tool in "$FOUNDRYC" "$FOUNDRY_RUN"; do
  [ -x "$tool" ] || { echo "zoo.sh: error: $tool is not built (ninja -C build foundryc foundry-run)" >&2; exit 1; }
done
[ -d "$zoo" ] || { echo "zoo.sh: error: $zoo does not exist; export the zoo first: python3 $here/zoo/export.py $zoo" >&2; exit 1; }
exec python3 "$here/zoo/sweep.py" "$zoo" "$@"
