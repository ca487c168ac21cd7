# Sourced by scripts/sanitize.sh and scripts/tsan.sh: makes the C++ compiler that foundryc runs
# for a model add sanitizer flags.
#
#   wrap_compilers DIR LABEL DROP_OPENMP FLAG...
#
# foundryc runs $CXX, else `g++` from PATH, and CMake (the --emit=source test) runs $CXX, else
# `c++`: $CXX is unset, and both names are written into DIR as scripts that call the
# real compiler with FLAG... added (and -fopenmp removed when DROP_OPENMP is 1), and DIR goes first
# on PATH. `--version` is prefixed with LABEL, so foundryc's cache key, which includes the
# compiler's identity, never hands a plain model.so to a sanitized run or back. The models are
# built at -O1 (after the compile's own -O3), as the sanitizers' documentation advises: an
# instrumented model then compiles in half the time (squeezenet1_1's externs.cpp: 26 s -> 13 s),
# which is most of the sanitized test run.
wrap_compilers() {
  local dir="$1" label="$2" drop_openmp="$3"
  shift 3
  mkdir -p "$dir"
  local name real
  for name in g++ c++; do
    real="$(command -v "$name")" || continue
    case "$real" in "$dir"/*) continue ;; esac  # already wrapped in this shell
    cat >"$dir/$name" <<WRAP
#!/usr/bin/env bash
# Written by scripts/compiler_wrappers.sh: $real with $label.
if [ "\$1" = --version ]; then printf '%s ' '$label'; exec "$real" --version; fi
args=()
for a in "\$@"; do
  if [ "$drop_openmp" = 1 ] && [ "\$a" = -fopenmp ]; then continue; fi
  args+=("\$a")
done
exec "$real" $* "\${args[@]}" -O1
WRAP
    chmod +x "$dir/$name"
  done
  export PATH="$dir:$PATH"
  unset CXX
}

# Fails unless FOUNDRYC, run now, builds samples/pointwise into a model.so that calls the
# sanitizer's runtime (an undefined symbol starting with PREFIX, e.g. __tsan_): the wrappers
# above are only a convention between two programs, so check that it holds.
check_models_instrumented() {
  local foundryc="$1" prefix="$2" tmp
  tmp="$(mktemp -d "${TMPDIR:-/tmp}/foundry-wrapcheck.XXXXXX")"
  if "$foundryc" samples/pointwise/model.pt2 -o "$tmp/out" -q &&
     nm -D --undefined-only "$tmp/out/model.so" | grep -q " $prefix"; then
    rm -rf "$tmp"
    return 0
  fi
  rm -rf "$tmp"
  echo "$0: error: $foundryc did not build an instrumented model.so (no $prefix* symbols)" >&2
  return 1
}
