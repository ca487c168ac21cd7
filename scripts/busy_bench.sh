#!/usr/bin/env bash
# How compiled models behave on a busy machine: foundry-run --bench at the default thread count,
# with and without other processes keeping the cores busy, under OpenMP wait policies. Prints one
# table of median and p90 per model, machine state and policy.
#
#   scripts/busy_bench.sh [--cores N] [--runs N] [--gap-us G] [--policies "default passive spin10k"] MODEL_OUT_DIR...
#
# --cores N confines everything to the first N cores (taskset), as on an N-core machine; the
# "busy" rows start one spinning process per core first. A policy is `default` (the environment
# as it is: libgomp spins about 300,000 times before sleeping), `passive` (OMP_WAIT_POLICY=passive),
# `active` (OMP_WAIT_POLICY=active) or `spinN` (GOMP_SPINCOUNT=N, e.g. spin10000).
# --gap-us G: every timed run (the model's and the control's) follows a pause of G microseconds, as
# a service's runs follow requests (foundry-run --gap-us); 0, the default, times them back to back.
# FOUNDRY_RUN: the runner (default build/foundry-run).
# After each model, a control row: scripts/bench/busy_control.c, plain arithmetic costing the
# model's idle median in CPU time per run, no threads, no memory traffic, timed the same way. When
# its busy p90 / median is as high as the model's, the tail is the scheduler's time slices, not the
# model's threads.
set -euo pipefail
cd "$(dirname "$0")/.."
cores="$(nproc)"
runs=200
gap_us=0
policies="default passive"
dirs=()
while [ $# -gt 0 ]; do
  case "$1" in
    --cores) cores="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --gap-us) gap_us="$2"; shift 2 ;;
    --policies) policies="$2"; shift 2 ;;
    -h | --help) sed -n 2,19p "$0"; exit 0 ;;
    -*) echo "busy_bench.sh: unknown option $1" >&2; exit 2 ;;
    *) dirs+=("$1"); shift ;;
  esac
done
runner="${FOUNDRY_RUN:-build/foundry-run}"
command -v "$runner" >/dev/null || { echo "busy_bench.sh: $runner not found (set FOUNDRY_RUN)" >&2; exit 1; }
[ "${#dirs[@]}" -gt 0 ] || { echo "busy_bench.sh: no compiled model folders given" >&2; exit 2; }
cpus="0-$((cores - 1))"
control_dir="$(mktemp -d)"
trap 'stop_load; rm -rf "$control_dir"' EXIT
control="$control_dir/busy_control"
cc -O2 scripts/bench/busy_control.c -o "$control"
declare -A idle_median
spinners=()
stop_load() {
  [ "${#spinners[@]}" -eq 0 ] || kill "${spinners[@]}" 2>/dev/null || true
  spinners=()
}
trap stop_load EXIT
start_load() {
  for ((c = 0; c < cores; c++)); do
    taskset -c "$c" sh -c 'while :; do :; done' &
    spinners+=($!)
  done
  sleep 1
}
policy_env() {
  case "$1" in
    default) echo "FOUNDRY_BUSY_BENCH=1" ;;
    passive | active) echo "OMP_WAIT_POLICY=$1" ;;
    spin*) echo "GOMP_SPINCOUNT=${1#spin}" ;;
    *) echo "busy_bench.sh: unknown policy $1" >&2; exit 2 ;;
  esac
}

echo "busy_bench.sh: $cores cores ($cpus), $runs runs per row, ${gap_us} us before each, $(date -u +%FT%TZ)"
printf '| model | machine | policy | median ms | p90 ms | p90 / median |\n|---|---|---|---|---|---|\n'
for state in idle busy; do
  [ "$state" = busy ] && start_load
  for dir in "${dirs[@]}"; do
    name="$(basename "$dir")"
    for policy in $policies; do
      line="$(env "$(policy_env "$policy")" taskset -c "$cpus" timeout 300 "$runner" "$dir" --bench "$runs" --gap-us "$gap_us" 2>&1 | grep '^benchmark:' || echo failed)"
      median="$(echo "$line" | sed -n 's/.*median \([0-9.]*\) ms.*/\1/p')"
      p90="$(echo "$line" | sed -n 's/.*p90 \([0-9.]*\) ms.*/\1/p')"
      ratio="$( [ -n "$median" ] && awk "BEGIN {printf \"%.1f\", $p90 / $median}" || echo -)"
      printf '| %s | %s | %s | %s | %s | %s |\n' "$name" "$state" "$policy" "${median:-failed}" "${p90:--}" "$ratio"
      [ "$state" = idle ] && [ "$policy" = "${policies%% *}" ] && idle_median[$name]="$median"
    done
    target="${idle_median[$name]:-}"
    [ -n "$target" ] || continue
    line="$(taskset -c "$cpus" "$control" "$target" "$runs" "$gap_us")"
    median="$(echo "$line" | sed -n 's/.*median \([0-9.]*\) ms.*/\1/p')"
    p90="$(echo "$line" | sed -n 's/.*p90 \([0-9.]*\) ms.*/\1/p')"
    printf '| control for %s | %s | - | %s | %s | %s |\n' "$name" "$state" "$median" "$p90" \
      "$(awk "BEGIN {printf \"%.1f\", $p90 / $median}")"
  done
  stop_load
done
