#!/usr/bin/env bash
# The reliability checks that CI runs after the test suite (.ci/run), each with its wall time:
#  1. a representative part of the suite under AddressSanitizer + UndefinedBehaviorSanitizer, the
#     generated models built with them too: every [fast] test (every test file has some; a test
#     that takes over 7 s in a Release build is not [fast]) but those of the build stage, which
#     compile models again and again to test the cache (a quarter of the stage's time; the one that
#     reads damaged cache entries stays), one in
#     $FOUNDRY_SWEEP_EVERY (default 20) of the tier-1 sweeps, and, named so that they stay in
#     whatever their other tags become, the compiled models that must stay inside their buffers:
#     [bounds] (issue 16 class 1: scatter, index_put and gather with indices from the caller,
#     in range and out of it) and the threaded kernel with index checks (class 2) (scripts/sanitize.sh);
#  2. the concurrency test under ThreadSanitizer, its models built without OpenMP (scripts/tsan.sh);
#  3. each libFuzzer target for $FUZZ_SECONDS (default 30), a crash failing the run
#     (scripts/fuzz.sh; fuzz/README.md).
# The whole suite under the sanitizers, by hand: scripts/sanitize.sh '*'.
set -euo pipefail
cd "$(dirname "$0")/.."

step() {
  local start=$SECONDS
  echo "reliability.sh: $*"
  "$@"
  echo "reliability.sh: $1 passed in $((SECONDS - start)) s"
}

export FOUNDRY_SWEEP_EVERY="${FOUNDRY_SWEEP_EVERY:-20}"
step scripts/sanitize.sh "[fast]~[build],[sweep],[bounds],threads: a kernel with index checks runs on threads and collects their errors,build: a damaged or swapped cache entry is a miss*"
unset FOUNDRY_SWEEP_EVERY
step scripts/tsan.sh
step scripts/fuzz.sh "${FUZZ_SECONDS:-30}"
