#!/usr/bin/env bash
# scripts/bench.sh --device cuda on models compiled on another machine, in two steps, as
# scripts/gpu_test.sh does for the tests:
#   scripts/gpu_bench.sh --build MODELS_DIR [--only a,b] [--pack PACK_DIR]   here (CUDA toolkit, no
#       GPU): compiles each model of MODELS_DIR (folders with model.pt2 and inputs/, such as
#       scripts/zoo/export.py's or the corpus's models/) with --device cuda and packs the compiled
#       folders, the archives and .npy files the PyTorch side and the checks read, and foundry-run
#       with the libraries it loads that the GPU host lacks, into PACK_DIR/gpu_bench.tar.xz
#       (default .dev/gpu_bench).
#   scripts/gpu_bench.sh --run [--pack PACK_DIR] [bench.sh options...]   there: unpacks into
#       /tmp/foundry-gpu-bench and runs bench.sh --device cuda --no-compile on the packed models
#       (PyTorch from $FOUNDRY_BENCH_PYTHON, as for bench.sh).
# The archives of PyTorch's side must be loadable by the GPU host's PyTorch (export them with the
# same or an older release).
# --cpu-target TARGET (with --build and with --run): the models are compiled for that host's CPU
# instead (foundryc --target=TARGET, e.g. avx512) and timed there by bench.sh on the CPU, against
# eager and torch.compile on its cores (bench.sh's --threads, --baseline-env... pass through).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mode=${1:-}
shift || true
pack=$root/.dev/gpu_bench
only=""
models=""
cpu_target=""
if [[ $mode == --build ]]; then
  models=${1:?usage: gpu_bench.sh --build MODELS_DIR [--only a,b] [--pack DIR]}
  shift
fi
bench_args=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --pack) pack=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --cpu-target) cpu_target=$2; shift 2 ;;
    *) bench_args+=("$1"); shift ;;
  esac
done

if [[ $mode == --build ]]; then
  build=$root/build
  ninja -C "$build" -j2 foundryc foundry-run >/dev/null
  stage=$(mktemp -d /tmp/foundry-gpu-bench-XXXXXX)
  trap 'rm -rf "$stage"' EXIT
  mkdir -p "$stage/bin" "$stage/lib" "$stage/models" "$stage/compiled"
  names=$(if [[ -n $only ]]; then tr ',' '\n' <<<"$only"; else ls "$models"; fi)
  for n in $names; do
    [[ -f $models/$n/model.pt2 ]] || continue
    start=$(date +%s.%N)
    target_args=(--device cuda)
    [[ -n $cpu_target ]] && target_args=(--target="$cpu_target")
    if ! "$build/foundryc" "$models/$n/model.pt2" -o "$stage/compiled/$n" "${target_args[@]}" -q; then
      echo "gpu_bench: $n did not compile; left out" >&2
      rm -rf "$stage/compiled/$n"
      continue
    fi
    printf '%-40s compiled in %.1f s\n' "$n" "$(echo "$(date +%s.%N) - $start" | bc)" >&2
    mkdir -p "$stage/models/$n"
    for f in model.pt2 inputs expected meta.json; do
      [[ -e $models/$n/$f ]] && cp -r "$models/$n/$f" "$stage/models/$n/"
    done
  done
  find "$stage/compiled" \( -name '*.cu' -o -name '*.cpp' -o -name '*.h' -o -name CMakeLists.txt \
    -o -name exports.map -o -name '*.txt' \) -delete
  cp "$build/foundry-run" "$stage/bin/"
  # The libraries foundry-run and the models load (oneDNN, SLEEF, LAPACK... for CPU models).
  { ldd "$build/foundry-run" "$stage"/compiled/*/model.so | awk '/=> \// {print $3}' | sort -u |
      grep -v -E '/(libc|libm|libpthread|libdl|librt|libstdc\+\+|libgcc_s)\.so' || true; } | xargs -r -I{} cp -L {} "$stage/lib/"
  mkdir -p "$pack"
  # xz -9 (a 64 MiB window): the pack and the project must fit the device's 64 MiB per call.
  tar -C "$stage" -cf - . | xz -9 -T2 >"$pack/gpu_bench.tar.xz"
  echo "packed $(ls "$stage/compiled" | wc -l) models, $(du -h "$pack/gpu_bench.tar.xz" | cut -f1), into $pack/gpu_bench.tar.xz"
elif [[ $mode == --run ]]; then
  dest=/tmp/foundry-gpu-bench
  rm -rf "$dest" && mkdir -p "$dest"
  tar -C "$dest" -xJf "$pack/gpu_bench.tar.xz"
  export LD_LIBRARY_PATH=$dest/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
  device_args=(--device cuda)
  [[ -n $cpu_target ]] && device_args=()
  FOUNDRY_RUN=$dest/bin/foundry-run FOUNDRYC=/bin/false exec "$root/scripts/bench.sh" "${device_args[@]}" --no-compile \
    --prebuilt "$dest/compiled" --models-dir "$dest/models" "${bench_args[@]}"
else
  echo "usage: scripts/gpu_bench.sh --build MODELS_DIR [--only a,b] [--pack DIR] [--cpu-target T] | --run [--pack DIR] [--cpu-target T] [bench.sh options]" >&2
  exit 2
fi
