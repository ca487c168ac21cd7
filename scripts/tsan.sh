#!/usr/bin/env bash
# Runs the concurrency test (test/test_concurrency.cpp, [concurrency]: one loaded model run from
# 8 threads x 200 times) under ThreadSanitizer.
#
#   scripts/tsan.sh
#
# A small test binary of its own ($TSAN_BUILD_DIR/foundry_tsan_tests, default build-tsan) is built
# with g++ -fsanitize=thread from the test's sources and the runtime half of the library (the
# model loader, .npy I/O, comparisons): what runs in the threads. The models are compiled by an
# ordinary foundryc ($FOUNDRYC, default build/foundryc, built first when missing) with
# -fsanitize=thread added and -fopenmp removed (OpenMP runtimes give TSan false positives), so
# that races inside a model's run are seen too: the g++ foundryc finds first on PATH is a wrapper
# (scripts/compiler_wrappers.sh), with a model cache of its own in the build folder. oneDNN's own
# threads (libgomp) are not instrumented.
#
# Environment: TSAN_BUILD_DIR, FOUNDRYC, TSAN_CXX (default g++; clang 14 cannot compile the
# library's _Float16), TSAN_OPTIONS. Exits non-zero when ThreadSanitizer reports anything (its
# exit code, 66) or a test fails.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"
BUILD="${TSAN_BUILD_DIR:-build-tsan}"
TSAN_CXX="${TSAN_CXX:-g++}"
mkdir -p "$BUILD/obj"
BUILD_ABS="$(cd "$BUILD" && pwd)"

FOUNDRYC="${FOUNDRYC:-build/foundryc}"
if [ ! -x "$FOUNDRYC" ]; then
  echo "tsan.sh: building $FOUNDRYC"
  BUILD_DIR="$(dirname "$FOUNDRYC")" scripts/setup.sh >/dev/null
fi
FOUNDRYC_ABS="$(cd "$(dirname "$FOUNDRYC")" && pwd)/$(basename "$FOUNDRYC")"

flags=(-std=c++20 -O1 -g -fsanitize=thread -fno-omit-frame-pointer -Iinclude -Itest
       "-DFOUNDRY_VERSION=\"tsan\"" "-DFOUNDRY_SOURCE_DIR=\"$ROOT\""
       "-DFOUNDRY_CORPUS_DEFAULT=\"$ROOT/../shared/corpus\"" "-DFOUNDRYC_EXE=\"$FOUNDRYC_ABS\"" "-DFOUNDRY_RUN_EXE=\"$(dirname "$FOUNDRYC_ABS")/foundry-run\""
       "-DFOUNDRY_TEST_DIR=\"$ROOT/test\"")
sources=(test/main.cpp test/support.cpp test/test_concurrency.cpp lib/runtime/*.cpp lib/support/*.cpp
         lib/graph/dtype.cpp)
objs=()
echo "tsan.sh: compiling ${#sources[@]} files into $BUILD"
for src in "${sources[@]}"; do
  obj="$BUILD/obj/$(echo "$src" | tr / _).o"
  objs+=("$obj")
  # Rebuilt when the source is newer (headers are not tracked: remove $BUILD/obj to force).
  if [ ! -f "$obj" ] || [ "$src" -nt "$obj" ]; then
    "$TSAN_CXX" "${flags[@]}" -c "$src" -o "$obj" &
  fi
  while [ "$(jobs -rp | wc -l)" -ge "${TSAN_JOBS:-2}" ]; do wait -n; done
done
wait
"$TSAN_CXX" -fsanitize=thread -o "$BUILD/foundry_tsan_tests" "${objs[@]}" -ldl -lpthread

# shellcheck source=scripts/compiler_wrappers.sh
. scripts/compiler_wrappers.sh
wrap_compilers "$BUILD_ABS/sanitized-bin" tsan 1 -fsanitize=thread -fno-omit-frame-pointer
export XDG_CACHE_HOME="$BUILD_ABS/model-cache"
check_models_instrumented "$FOUNDRYC_ABS" __tsan_
# One known false positive is suppressed: a model's thread_local variables (last_error,
# kernel_error) live in dynamic TLS blocks that glibc allocates in __tls_get_addr and frees in
# _dl_deallocate_tls when a later thread reuses a finished thread's cached stack; that hand-over
# is ordered by glibc's stack-cache lock inside ld.so, which ThreadSanitizer does not see.
cat >"$BUILD_ABS/tsan.supp" <<'SUPP'
race:_dl_deallocate_tls
race:__GI__dl_deallocate_tls
SUPP
export TSAN_OPTIONS="${TSAN_OPTIONS:-second_deadlock_stack=1 suppressions=$BUILD_ABS/tsan.supp}"

echo "tsan.sh: running the [concurrency] tests under ThreadSanitizer"
"$BUILD/foundry_tsan_tests" "[concurrency]"
echo "tsan.sh: no ThreadSanitizer reports, tests passed"
