#!/usr/bin/env bash
# The GPU half of the tests (README "GPU (CUDA)"), in two steps on two machines:
#   scripts/gpu_test.sh --build [PACK_DIR]   here (CUDA toolkit, no GPU): builds foundry_tests,
#       the [cuda] tests' models and the OpInfo sweep's batches (nvcc), and packs what the GPU
#       host needs into PACK_DIR/gpu_test.tar.xz (default .dev/cuda): the test binary, the
#       libraries it loads that the GPU host lacks (ldd), the built models, and the corpus files
#       the tests read (inputs and references only).
#   scripts/gpu_test.sh --run [PACK_DIR]     there (a GPU, the CUDA runtime, cuBLAS and cuDNN 9,
#       which the models load from the system: they are not packed; no foundryc dependencies):
#       unpacks into /tmp/foundry-gpu-test and runs the [cuda] tests that need a GPU on the
#       prebuilt models.
set -euo pipefail
mode=${1:-}
root=$(cd "$(dirname "$0")/.." && pwd)
pack=${2:-$root/.dev/cuda}

if [[ $mode == --build ]]; then
  build=$root/build
  ninja -C "$build" -j2 foundry_tests foundryc foundry-run
  stage=$(mktemp -d /tmp/foundry-gpu-pack-XXXXXX)
  trap 'rm -rf "$stage"' EXIT
  export FOUNDRY_CUDA_BUILD=$stage/build
  # Builds the models and the sweep (no GPU here: the running parts say SKIPPED).
  "$build/test/foundry_tests" "cuda: --device cuda builds the supported corpus models" | tail -2
  "$build/test/foundry_tests" "cuda: an index out of range inside a kernel is reported and never a silent result" | tail -2
  "$build/test/foundry_tests" "cuda: mlp_dynamic at batches 1 100 and 4096 matches the CPU-compiled model" | tail -2
  "$build/test/foundry_tests" "cuda: cuDNN convolutions (1-d 2-d 3-d grouped unbatched) match PyTorch on the GPU" | tail -2
  "$build/test/foundry_tests" "cuda: tier-1 OpInfo samples (every 4th) match PyTorch on the GPU" | tail -3
  "$build/test/foundry_tests" "cuda: float16\, bfloat16 and float64 MLPs match PyTorch on the GPU" | tail -2
  "$build/test/foundry_tests" "cuda: the corpus models' raw exports (training IR) match PyTorch on the GPU" | tail -2
  "$build/test/foundry_tests" "cuda: --allow-tf32 models match PyTorch within TF32's error" | tail -2
  "$build/test/foundry_tests" "cuda: reductions split however short (forced) match PyTorch on the GPU" | tail -2
  "$build/test/foundry_tests" "cuda: a CNN with a dynamic batch\, height and width matches PyTorch at every size" | tail -2
  rm -rf "$stage/build/cache" "$stage/build/dynamic/cpu"
  find "$stage/build" \( -name '*.o' -o -name 'batch*.cu' -o -name 'foundry_*.h' -o -name '*.cu' -o -name wrapper.cpp -o -name model.h \
    -o -name CMakeLists.txt -o -name exports.map \) -delete
  mkdir -p "$stage/bin" "$stage/lib" "$stage/corpus/models" "$stage/corpus/opinfo"
  cp "$build/test/foundry_tests" "$stage/bin/"
  # Every library foundry_tests loads apart from glibc's and the C++ runtime's.
  ldd "$build/test/foundry_tests" | awk '/=> \// {print $3}' |
    grep -v -E '/(libc|libm|libpthread|libdl|librt|libstdc\+\+|libgcc_s)\.so' | xargs -r -I{} cp -L {} "$stage/lib/"
  corpus=${FOUNDRY_CORPUS:-$root/../shared/corpus}
  for m in pointwise pointwise_64k mlp mlp_dynamic norm_softmax reductions encoder_layer small_cnn squeezenet1_1 mobilenet_v3_small; do
    mkdir -p "$stage/corpus/models/$m"
    cp -r "$corpus/models/$m/inputs" "$corpus/models/$m/expected" "$corpus/models/$m/meta.json" "$stage/corpus/models/$m/"
  done
  cp "$corpus/opinfo/tier1.txt" "$corpus/opinfo/other.txt" "$stage/corpus/opinfo/"
  { awk 'NR % 4 == 1' "$corpus/opinfo/tier1.txt"; ls "$corpus/opinfo" | grep -E '^nn_functional_conv[123]d__'; } | sort -u | while read -r s; do
    mkdir -p "$stage/corpus/opinfo/$s"
    cp -r "$corpus/opinfo/$s/inputs" "$corpus/opinfo/$s/expected" "$corpus/opinfo/$s/meta.json" "$stage/corpus/opinfo/$s/"
  done
  mkdir -p "$stage/test"
  cp "$root/test/known_failures_cuda.txt" "$stage/test/"
  mkdir -p "$stage/samples/dyn_image"
  cp -r "$root/samples/dyn_image/cases" "$stage/samples/dyn_image/"
  for s in "$root"/test/data/conv/*/; do
    mkdir -p "$stage/test/data/conv/$(basename "$s")"
    cp -r "$s/inputs" "$s/expected" "$stage/test/data/conv/$(basename "$s")/"
  done
  for d in "$root"/test/data/half_floats/*/; do
    m=$(basename "$d")
    mkdir -p "$stage/test/data/half_floats/$m"
    cp -r "$d/inputs" "$d/expected" "$stage/test/data/half_floats/$m/"
  done
  mkdir -p "$pack"
  # xz -9: a 64 MiB window, so the copies of one model's weights (core, raw, TF32 builds) pack once
  # (58 MB with tar -J, 29 MB so): the pack and the project must fit the device's 64 MiB per call.
  tar -C "$stage" -cf - . | xz -9 -T2 >"$pack/gpu_test.tar.xz"
  cp "$0" "$pack/gpu_test.sh"
  echo "packed $(du -h "$pack/gpu_test.tar.xz" | cut -f1) into $pack/gpu_test.tar.xz"
elif [[ $mode == --run ]]; then
  dest=/tmp/foundry-gpu-test
  rm -rf "$dest" && mkdir -p "$dest"
  tar -C "$dest" -xJf "$pack/gpu_test.tar.xz"
  export LD_LIBRARY_PATH=$dest/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
  export FOUNDRY_CORPUS=$dest/corpus FOUNDRY_CUDA_BUILD=$dest/build FOUNDRY_CUDA_PREBUILT=1
  export FOUNDRY_TEST_SOURCE_DIR=$dest/test
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
  cd "$dest"
  "$dest/bin/foundry_tests" "cuda: corpus models match PyTorch on the GPU,cuda: cuDNN convolutions (1-d 2-d 3-d grouped unbatched) match PyTorch on the GPU,cuda: mlp_dynamic at batches 1 100 and 4096 matches the CPU-compiled model,cuda: an index out of range inside a kernel is reported and never a silent result,cuda: tier-1 OpInfo samples (every 4th) match PyTorch on the GPU,cuda: NAME_run_cuda replays its CUDA graph\, with new pointers too\, and refuses bad arguments,cuda: one model runs correctly from 8 host threads at once,cuda: float16\, bfloat16 and float64 MLPs match PyTorch on the GPU,cuda: the corpus models' raw exports (training IR) match PyTorch on the GPU,cuda: --allow-tf32 models match PyTorch within TF32's error,cuda: reductions split however short (forced) match PyTorch on the GPU,cuda: a CNN with a dynamic batch\, height and width matches PyTorch at every size" "${@:3}"
else
  echo "usage: scripts/gpu_test.sh --build [PACK_DIR] | --run [PACK_DIR]" >&2
  exit 2
fi
