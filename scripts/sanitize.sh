#!/usr/bin/env bash
# Builds foundryc and the tests with AddressSanitizer and UndefinedBehaviorSanitizer
# (FOUNDRY_SANITIZE=ON) into build-asan and runs the [fast] tests under them.
#
#   scripts/sanitize.sh [CATCH2 TEST SPEC...]   (default "[fast]")
#
# Environment: ASAN_BUILD_DIR (default build-asan), SAN_JOBS (build parallelism, default 2),
# SAN_OPT (the build's optimization and debug flags, default "-O0 -g1": the three largest batches
# compiled in 63, 105 and 80 s at -O1 and in 22, 38 and 33 s at -O0, back to back on an idle
# 2-core machine; the tests, which spend their time in the compiler subprocesses building the
# models with flags of their own, ran about 10% longer), SAN_MODELS=0 to compile the generated
# models without sanitizers, SAN_SHARDS (test processes run side by side, default 2; 1 runs the
# tests in one process), FOUNDRY_UNITY_BUILD=OFF to build the library a file at a time (default ON:
# a unity build, a batch of files per compile).
#
# Generated models are compiled with the sanitizers too (SAN_MODELS=1, the default): the g++ and
# c++ that foundryc and CMake find first on PATH add -fsanitize=address,undefined
# (scripts/compiler_wrappers.sh), with a model cache of its own ($ASAN_BUILD_DIR/model-cache).
# The tests use the same compiler as the build (g++ by default: $SAN_CXX to change), since one
# process cannot load two sanitizer runtimes.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${ASAN_BUILD_DIR:-build-asan}"
SAN_CXX="${SAN_CXX:-g++}"

log="$(mktemp "${TMPDIR:-/tmp}/foundry-asan.XXXXXX")"
trap 'rm -f "$log"' EXIT
echo "sanitize.sh: configuring $BUILD (FOUNDRY_SANITIZE=ON, $SAN_CXX)"
if ! env -u CXX cmake -S . -B "$BUILD" -G Ninja -DCMAKE_CXX_COMPILER="$SAN_CXX" -DFOUNDRY_SANITIZE=ON \
     -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_UNITY_BUILD="${FOUNDRY_UNITY_BUILD:-ON}" \
     "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=${SAN_OPT:--O0 -g1}" >"$log" 2>&1; then
  cat "$log" >&2
  exit 1
fi
echo "sanitize.sh: building $BUILD"
cmake --build "$BUILD" -j "${SAN_JOBS:-2}"

BUILD_ABS="$(cd "$BUILD" && pwd)"
if [ "${SAN_MODELS:-1}" = 1 ]; then
  # shellcheck source=scripts/compiler_wrappers.sh
  . scripts/compiler_wrappers.sh
  wrap_compilers "$BUILD_ABS/sanitized-bin" asan+ubsan 0 -fsanitize=address,undefined -fno-omit-frame-pointer
  export XDG_CACHE_HOME="$BUILD_ABS/model-cache"
  check_models_instrumented "$BUILD/foundryc" __asan_
fi

# Leaks are reported (and fail the run) at exit; UB stops with a stack.
# intercept_tls_get_addr=0: with glibc 2.36, LeakSanitizer's scan of the dynamic TLS of a
# sanitized model.so that runs oneDNN's OpenMP threads reads a bogus range and crashes ("Tracer
# caught signal 11") after the test has passed; without the interception it scans static TLS only.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=1:intercept_tls_get_addr=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
spec=("$@")
[ "${#spec[@]}" -gt 0 ] || spec=("[fast]")
shards="${SAN_SHARDS:-2}"
echo "sanitize.sh: running foundry_tests ${spec[*]} under ASan+UBSan in $shards processes"
if [ "$shards" -le 1 ]; then
  exec "$BUILD/test/foundry_tests" "${spec[@]}"
fi
# The tests, dealt round-robin to $shards processes (the suite's tests may run concurrently, as
# ctest -j runs them): a test is mostly one compiler or one instrumented foundryc at a time, so
# one process leaves a core idle. Each shard gets a file of names, Catch's special characters escaped.
shard_dir="$(mktemp -d "${TMPDIR:-/tmp}/foundry-asan-shards.XXXXXX")"
trap 'rm -f "$log"; rm -rf "$shard_dir"' EXIT
# (Catch's exit status after a listing is the number of tests listed.)
"$BUILD/test/foundry_tests" --list-test-names-only "${spec[@]}" >"$shard_dir/all" || true
sed -e '/^$/d' -e 's/[]\\,[*~"]/\\&/g' "$shard_dir/all" |
  awk -v n="$shards" -v dir="$shard_dir" '{ print > (dir "/names." (NR % n)) }'
if [ ! -s "$shard_dir/names.1" ] && [ ! -s "$shard_dir/names.0" ]; then
  echo "sanitize.sh: error: no test matches ${spec[*]}" >&2
  exit 1
fi
# The shards' compiles share one compile cache, as a ctest run's do (test/CMakeLists.txt).
export FOUNDRY_TEST_CACHE="$shard_dir/cache"
pids=()
for ((k = 0; k < shards; k++)); do
  [ -f "$shard_dir/names.$k" ] || continue
  "$BUILD/test/foundry_tests" -f "$shard_dir/names.$k" >"$shard_dir/log.$k" 2>&1 &
  pids+=("$!:$k")
done
failed=0
for entry in "${pids[@]}"; do
  pid="${entry%%:*}" k="${entry##*:}"
  status=0
  wait "$pid" || status=$?
  echo "sanitize.sh: shard $k of $shards ($(wc -l <"$shard_dir/names.$k") tests) exited with $status"
  cat "$shard_dir/log.$k"
  [ "$status" = 0 ] || failed=1
done
exit "$failed"
