#!/usr/bin/env bash
# Prepares a Debian 12 machine for foundryc and builds it.
#
#   scripts/setup.sh [--no-build] [TARGET...]
#
# Installs the build and test dependencies with apt (skipped when all are installed already, so a
# rerun is fast), then configures and builds into $BUILD_DIR (default: build) with CMake and Ninja:
# everything, or only the named targets (scripts/demo.sh: foundryc foundry-run, without the test
# suite). Needs root for apt, or sudo when not root. Idempotent.
set -euo pipefail

usage() {
  echo "usage: $0 [--no-build] [TARGET...]   (environment: BUILD_DIR, default build)" >&2
}

build=1
targets=()
for arg in "$@"; do
  case "$arg" in
    --no-build) build=0 ;;
    -h | --help) usage; exit 0 ;;
    -*) usage; exit 2 ;;
    *) targets+=("$arg") ;;
  esac
done

cd "$(dirname "$0")/.."
BUILD_DIR="${BUILD_DIR:-build}"

# GNU OpenMP comes with g++ (libgomp); do not add libomp-dev.
packages=(
  build-essential cmake ninja-build clang libclang-rt-14-dev pkg-config
  libcli11-dev libspdlog-dev nlohmann-json3-dev catch2 libzip-dev zlib1g-dev libxxhash-dev
  libdnnl-dev libsleef-dev libopenblas-dev liblapacke-dev
  python3 python3-numpy zip unzip
  ccache  # the compiler-launcher test (--cxx-launcher ccache)
)

log="$(mktemp "${TMPDIR:-/tmp}/foundry-setup.XXXXXX")"
trap 'rm -f "$log"' EXIT

# Runs a command with its output in the log; on failure shows the log and stops.
quietly() {
  if ! "$@" >"$log" 2>&1; then
    echo "setup.sh: FAILED: $*" >&2
    tail -n 60 "$log" >&2
    exit 1
  fi
}

missing=()
for p in "${packages[@]}"; do
  if [ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)" != installed ]; then
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -gt 0 ]; then
  sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
      sudo=(sudo)
    else
      echo "setup.sh: need root (or sudo) to install: ${missing[*]}" >&2
      exit 1
    fi
  fi
  echo "setup.sh: installing ${missing[*]}"
  quietly "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
  quietly "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  echo "setup.sh: all packages already installed"
fi

if [ "$build" -eq 0 ]; then
  exit 0
fi

echo "setup.sh: configuring $BUILD_DIR"
# A unity build (each library's files compiled a batch at a time, their headers parsed once per
# batch) in CI, whose build is made once; a developer's incremental build recompiles one file.
unity="${FOUNDRY_UNITY_BUILD:-$([ "${CI:-}" = true ] && echo ON || echo OFF)}"
quietly cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_UNITY_BUILD="$unity"
echo "setup.sh: building $BUILD_DIR${targets[*]:+ (${targets[*]})}"
# Compiler errors go straight to the terminal; ninja prints little else.
cmake --build "$BUILD_DIR" ${targets[@]:+--target "${targets[@]}"}
echo "setup.sh: done"
