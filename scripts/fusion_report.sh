#!/usr/bin/env bash
# Prints, for every corpus model, the kernels and bytes moved per run with fusion and with
# --no-fusion (from manifest.json; no C++ compiler runs).   scripts/fusion_report.sh [CORPUS]
set -euo pipefail
cd "$(dirname "$0")/.."
corpus="${1:-${FOUNDRY_CORPUS:-../shared/corpus}}"
foundryc="${FOUNDRYC:-build/foundryc}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
field() { /usr/bin/python3 -c "import json,sys; m=json.load(open(sys.argv[1])); print($2)" "$1"; }
printf '%-20s %9s %9s %14s %14s %7s\n' model kernels unfused "bytes fused" "bytes unfused" ratio
for dir in "$corpus"/models/*/; do
  name="$(basename "$dir")"
  "$foundryc" "$dir/model.pt2" -o "$tmp/$name.f" --stop-after=codegen -q
  "$foundryc" "$dir/model.pt2" -o "$tmp/$name.u" --stop-after=codegen -q --no-fusion
  kf="$(field "$tmp/$name.f/manifest.json" "len(m['kernels'])")"
  ku="$(field "$tmp/$name.u/manifest.json" "len(m['kernels'])")"
  bf="$(field "$tmp/$name.f/manifest.json" "m['bytes_moved']")"
  bu="$(field "$tmp/$name.u/manifest.json" "m['bytes_moved']")"
  printf '%-20s %9s %9s %14s %14s %7.2f\n' "$name" "$kf" "$ku" "$bf" "$bu" "$(echo "$bu / $bf" | bc -l)"
done
