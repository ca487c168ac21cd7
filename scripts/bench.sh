#!/usr/bin/env bash
# Benchmarks foundryc on the corpus models against PyTorch eager and torch.compile (Inductor),
# with STREAM add as the bandwidth roofline. A benchmark, not a test: never part of ctest or CI.
#
#   scripts/bench.sh [--quick] [--models a,b] [--threads 1,N] [--out-dir DIR] [--json-out FILE]
#   scripts/bench.sh --compile-only --out-dir DIR --foundryc-args=--target=avx512
#   scripts/bench.sh --no-compile --prebuilt DIR/compiled    (on a host with no foundryc build)
#   scripts/bench.sh --baseline OLD/foundryc                 (this build against an earlier one, same run)
#   scripts/bench.sh --models-dir DIR                        (any folder of models, e.g. scripts/zoo's exports)
#   scripts/bench.sh --threads 1,16 --rounds 5               (foundryc timed 5 times per thread count, the
#                                                             counts alternating; medians of the rounds,
#                                                             with their range in the scaling table)
#   scripts/bench.sh --threads 1,16 --rounds 7 --rotate-cpus (each round's processes timed on one CPU, the
#                                                             next CPU each round: thread counts compared
#                                                             on the same cores)
#   scripts/bench.sh --threads 1,16 --rounds 5 --torch-rounds 3 (PyTorch too in 3 processes per mode and
#                                                             thread count; medians of their medians)
#   scripts/bench.sh --device cuda                           (on the GPU: against eager, torch.compile and
#                                                             its reduce-overhead mode; CUDA add as roofline)
#   scripts/bench.sh --help                                  (all options)
#
# The table goes to stdout, progress to stderr, the results to bench-results.json.
# Tools: $FOUNDRYC and $FOUNDRY_RUN, default ${BUILD_DIR:-build}/foundryc and foundry-run.
# Corpus: ${FOUNDRY_CORPUS:-../shared/corpus}.
# PyTorch (>= 2.9, with NumPy) for the baselines: $FOUNDRY_BENCH_PYTHON if set; else the venv
# ${FOUNDRY_BENCH_VENV:-~/.cache/foundry/bench-venv}, made and filled with `pip install torch numpy`
# on first use (a download of several GB, once per machine; extra pip arguments, such as another
# package index, in $FOUNDRY_BENCH_PIP_ARGS). Under CI (CI set) nothing is downloaded.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

# Exits 0 when $1 is a python with numpy and torch >= 2.9 (torch.export.load of these archives).
torch_ok() {
  "$1" - <<'PY' >/dev/null 2>&1
import sys, numpy, torch
major, minor = (int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
sys.exit((major, minor) < (2, 9))
PY
}

want_torch=1
for arg in "$@"; do
  case "$arg" in --no-torch | --compile-only | -h | --help) want_torch=0 ;; esac
done

torch_python=""
no_torch=""
if [ "$want_torch" = 1 ]; then
  if [ -n "${FOUNDRY_BENCH_PYTHON:-}" ]; then
    if ! torch_ok "$FOUNDRY_BENCH_PYTHON"; then
      echo "bench.sh: error: FOUNDRY_BENCH_PYTHON=$FOUNDRY_BENCH_PYTHON has no torch >= 2.9 with numpy" >&2
      exit 1
    fi
    torch_python="$FOUNDRY_BENCH_PYTHON"
  else
    venv="${FOUNDRY_BENCH_VENV:-$HOME/.cache/foundry/bench-venv}"
    if torch_ok "$venv/bin/python"; then
      torch_python="$venv/bin/python"
    elif [ -n "${CI:-}" ]; then
      no_torch="no torch in $venv, and CI does not download it"
    else
      echo "bench.sh: installing torch and numpy into $venv (several GB, once per machine)" >&2
      # shellcheck disable=SC2086  # FOUNDRY_BENCH_PIP_ARGS is a list of words
      if { [ -x "$venv/bin/pip" ] || python3 -m venv "$venv"; } &&
        "$venv/bin/pip" install -q ${FOUNDRY_BENCH_PIP_ARGS:-} torch numpy && torch_ok "$venv/bin/python"; then
        torch_python="$venv/bin/python"
      else
        no_torch="could not install torch >= 2.9 into $venv (see pip's message above)"
      fi
    fi
  fi
  if [ -z "$torch_python" ]; then
    # Debian's python3-torch (1.13) cannot load a .pt2 (torch.export came in 2.1), so there is
    # no fallback baseline: the PyTorch columns stay empty.
    no_torch="$no_torch; Debian's python3-torch (1.13) cannot load .pt2 archives"
    echo "bench.sh: warning: no PyTorch baseline: $no_torch" >&2
  fi
fi

# The orchestrator needs the standard library, plus NumPy for models without recorded inputs
# (pointwise_64m): the torch python has both; else the first python3 with NumPy.
py="$torch_python"
if [ -z "$py" ]; then
  py=python3
  for cand in python3 /usr/bin/python3; do
    if "$cand" -c 'import numpy' >/dev/null 2>&1; then py="$cand" && break; fi
  done
fi
FOUNDRY_BENCH_TORCH_PYTHON="$torch_python" FOUNDRY_BENCH_NO_TORCH="$no_torch" \
  exec "$py" "$here/bench/bench.py" "$@"
