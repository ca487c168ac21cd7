#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/fuzz_frontend.cpp, fuzz/fuzz_pipeline.cpp) with clang,
# AddressSanitizer and UndefinedBehaviorSanitizer, and runs each for SECONDS (default 60).
#
#   scripts/fuzz.sh [SECONDS]
#
# Environment:
#   FUZZ_BUILD_DIR    build folder (default build-fuzz)
#   FUZZ_TARGETS      targets to run (default "fuzz_frontend fuzz_pipeline")
#   FUZZ_KEEP_GOING=1 keep fuzzing after a crash (libFuzzer -fork=1 -ignore_crashes=1 ...)
#   FUZZ_JOBS         build parallelism (default 2)
#   FOUNDRY_UNITY_BUILD=OFF  the library a file at a time (default ON: a batch of files per compile)
#
# Each target's working corpus lives in $FUZZ_BUILD_DIR/corpus/<target> (kept between runs, so
# coverage accumulates) and is seeded from fuzz/seeds/, the samples' archives and model.json files,
# and a few corpus OpInfo samples when ../shared/corpus exists. Crashes, leaks, timeouts and
# out-of-memory inputs are written to fuzz/regressions/<target>-crash-<sha1> (libFuzzer's
# -artifact_prefix); replay one with `$FUZZ_BUILD_DIR/<target> FILE`. Exits 1 when a run found
# something new, 0 otherwise. Only foundry::UserError counts as a normal answer to a bad input
# (see fuzz/fuzz_common.h).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-60}"
case "$seconds" in '' | *[!0-9]*) echo "usage: $0 [SECONDS]" >&2; exit 2 ;; esac
BUILD="${FUZZ_BUILD_DIR:-build-fuzz}"
TARGETS="${FUZZ_TARGETS:-fuzz_frontend fuzz_pipeline}"
CXX_FUZZ="${FUZZ_CXX:-clang++}"

if ! command -v "$CXX_FUZZ" >/dev/null 2>&1; then
  echo "fuzz.sh: $CXX_FUZZ not found (apt-get install clang libclang-rt-14-dev)" >&2
  exit 1
fi

# -O1 -gline-tables-only (as OSS-Fuzz builds), and no NDEBUG: assertions stay on.
echo "fuzz.sh: configuring $BUILD"
log="$(mktemp "${TMPDIR:-/tmp}/foundry-fuzz.XXXXXX")"
trap 'rm -f "$log"' EXIT
if ! cmake -S . -B "$BUILD" -G Ninja -DCMAKE_CXX_COMPILER="$CXX_FUZZ" -DFOUNDRY_FUZZ=ON \
     -DFOUNDRY_BUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_UNITY_BUILD="${FOUNDRY_UNITY_BUILD:-ON}" \
     "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only" >"$log" 2>&1; then
  cat "$log" >&2
  exit 1
fi
echo "fuzz.sh: building $TARGETS"
# shellcheck disable=SC2086
cmake --build "$BUILD" -j "${FUZZ_JOBS:-2}" --target $TARGETS

# Seeds: small files in fuzz/seeds/, plus what the tree and the corpus hold.
seeds="$BUILD/seeds"
rm -rf "$seeds"
mkdir -p "$seeds"
cp fuzz/seeds/* "$seeds"/ 2>/dev/null || true
for s in samples/*/; do
  name="$(basename "$s")"
  [ -f "$s/model.pt2" ] || continue
  cp "$s/model.pt2" "$seeds/sample-$name.pt2"
  if command -v unzip >/dev/null 2>&1; then
    unzip -p "$s/model.pt2" '*/models/model.json' >"$seeds/sample-$name.json" 2>/dev/null || rm -f "$seeds/sample-$name.json"
  fi
done
corpus="${FOUNDRY_CORPUS:-../shared/corpus}"
if [ -d "$corpus/opinfo" ]; then
  for op in add__float32__0 sum__float32__0 softmax__float32__0 matmul__float32__0 cat__float32__0 \
            index_select__float32__0 where__float32__0 mean__float32__0 view__float32__0 nn_functional_conv2d__float32__0; do
    [ -f "$corpus/opinfo/$op/model.pt2" ] && cp "$corpus/opinfo/$op/model.pt2" "$seeds/opinfo-$op.pt2"
  done
fi

# The targets' scratch files (the extracted archive that bare model.json inputs go into) live here,
# and a crashed run's leftovers are removed at the end.
fuzz_tmp="$(mktemp -d "${TMPDIR:-/tmp}/foundry-fuzz-run.XXXXXX")"
trap 'rm -f "$log"; rm -rf "$fuzz_tmp"' EXIT

mkdir -p fuzz/regressions
before="$(ls fuzz/regressions)"
status=0
for t in $TARGETS; do
  work="$BUILD/corpus/$t"
  mkdir -p "$work"
  # fuzz_pipeline compiles and runs one input in 16 with g++ under ASan (fuzz/compile_and_run.h,
  # its own limits: 300 s to compile, 120 s to run): a minute or more on a busy machine is no hang.
  timeout=30
  [ "$t" = fuzz_pipeline ] && [ "${FOUNDRY_FUZZ_COMPILE_EVERY:-16}" != 0 ] && timeout=480
  # -report_slow_units: libFuzzer's default (10 s) writes a "slow-unit" artifact, which would
  # count as a finding, for any input slower than that: the compiled one in 16 usually is.
  flags=(-max_total_time="$seconds" -timeout="$timeout" -report_slow_units="$timeout"
         -rss_limit_mb=2560 -max_len=131072
         -print_final_stats=1 -print_funcs=0 -dict=fuzz/model_json.dict
         -artifact_prefix="fuzz/regressions/$t-")
  if [ "${FUZZ_KEEP_GOING:-0}" = 1 ]; then
    flags+=(-fork=1 -ignore_crashes=1 -ignore_ooms=1 -ignore_timeouts=1)
  fi
  echo "fuzz.sh: running $t for ${seconds}s (corpus $work)"
  # The targets print libFuzzer's progress lines; keep the tail and the stats.
  if ! TMPDIR="$fuzz_tmp" ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=0:detect_leaks=1}" \
       UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}" \
       "$BUILD/$t" "${flags[@]}" "$work" "$seeds" >"$BUILD/$t.log" 2>&1; then
    status=1
  fi
  grep -E '^(#[0-9]+ +DONE|stat::|Done [0-9]+ runs)|ERROR|FINDING|SUMMARY' "$BUILD/$t.log" | tail -n 20 || true
done

after="$(ls fuzz/regressions)"
new="$(comm -13 <(echo "$before" | sort) <(echo "$after" | sort) | grep -v '^$' || true)"
if [ -n "$new" ]; then
  echo "fuzz.sh: NEW FINDINGS in fuzz/regressions/ (replay: $BUILD/<target> FILE):"
  echo "$new" | sed 's/^/  /'
  exit 1
fi
if [ "$status" -ne 0 ]; then
  echo "fuzz.sh: a fuzzer exited with an error (see $BUILD/*.log)" >&2
  exit 1
fi
echo "fuzz.sh: no findings"
