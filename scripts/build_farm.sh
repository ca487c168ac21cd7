#!/usr/bin/env bash
# The build-farm recipe's figures: compiles every model of a folder with samples/build_farm's
# Makefile (`make -jJOBS`) three times and prints one table:
#   cold          empty foundryc cache, empty launcher cache
#   warm          the foundryc cache from the cold build (another checkout, another machine)
#   launcher only a new, empty foundryc cache beside the launcher's warm one (a machine that
#                 shares only the ccache/sccache storage, or a new foundryc version)
#
#   scripts/build_farm.sh [--launcher ccache|sccache|none] [--jobs N] [MODELS_DIR]
#
# MODELS_DIR defaults to the corpus's models (../shared/corpus/models). FOUNDRYC: the compiler to
# time (default build/foundryc). Everything is written under a temporary folder, removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."

launcher=ccache
jobs="$(nproc)"
models="${FOUNDRY_CORPUS:-../shared/corpus}/models"
while [ $# -gt 0 ]; do
  case "$1" in
    --launcher) launcher="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    -h | --help) sed -n 2,13p "$0"; exit 0 ;;
    -*) echo "build_farm.sh: unknown option $1" >&2; exit 2 ;;
    *) models="$1"; shift ;;
  esac
done
models="$(cd "$models" && pwd)"
foundryc="$(realpath "${FOUNDRYC:-build/foundryc}")"
[ "$launcher" = none ] || command -v "$launcher" >/dev/null || { echo "build_farm.sh: $launcher not found" >&2; exit 1; }

work="$(mktemp -d "${TMPDIR:-/tmp}/foundry-farm.XXXXXX")"
cleanup() {
  [ "$launcher" = sccache ] && sccache --stop-server >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
export CCACHE_DIR="$work/ccache" CCACHE_CONFIGPATH="$work/ccache.conf" SCCACHE_DIR="$work/sccache"
: > "$CCACHE_CONFIGPATH"
if [ "$launcher" = sccache ]; then
  sccache --stop-server >/dev/null 2>&1 || true
  sccache --start-server >/dev/null
fi

# Compile hits and misses so far, as "HITS MISSES".
launcher_counts() {
  case "$launcher" in
    ccache) ccache --print-stats | awk '/^(direct|preprocessed)_cache_hit\t/ {h += $2} /^cache_miss\t/ {m = $2} END {print h + 0, m + 0}' ;;
    sccache) sccache --show-stats | awk '/^Cache hits / && !/rate/ {h = $NF} /^Cache misses / && !/rate/ {m = $NF} END {print h + 0, m + 0}' ;;
    *) echo "0 0" ;;
  esac
}

n_models="$(ls "$models"/*/model.pt2 | wc -l)"
echo "build_farm.sh: $n_models models from $models, make -j$jobs, launcher: $launcher, $(nproc) cores"
printf '| build | wall time (s) | foundryc cache hits | launcher misses (compiles run) | launcher hits |\n|---|---|---|---|---|\n'
run() {  # NAME CACHE_DIR
  local before after start end
  before="$(launcher_counts)"
  start="$(date +%s.%N)"
  make -s -C samples/build_farm -j"$jobs" FOUNDRYC="$foundryc" MODELS="$models" OUT="$work/out-$1" \
    CACHE_DIR="$2" LAUNCHER="$([ "$launcher" = none ] || echo "$launcher")" > "$work/$1.txt"
  end="$(date +%s.%N)"
  after="$(launcher_counts)"
  local hits misses launcher_hits
  hits="$(grep -c 'from the cache' "$work/$1.txt" || true)"
  launcher_hits=$(( ${after% *} - ${before% *} ))
  misses=$(( ${after#* } - ${before#* } ))
  printf '| %s | %.1f | %s of %s | %s | %s |\n' "$1" "$(awk "BEGIN {print $end - $start}")" "$hits" "$n_models" \
    "$misses" "$launcher_hits"
}
run cold "$work/cache"
run warm "$work/cache"
run launcher-only "$work/cache2"
