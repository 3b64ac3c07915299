#!/usr/bin/env bash
# Installs what spade needs to build and test, from Debian packages. Safe to re-run: does nothing when
# everything is already there. nvcc (CUDA 13) is expected in /usr/local/cuda, as on every machine here.
set -euo pipefail
packages=(build-essential cmake ninja-build pkg-config zlib1g-dev libopenblas-openmp-dev libmetis-dev
          libsuitesparse-dev libgtest-dev libeigen3-dev libcli11-dev nlohmann-json3-dev
          python3-dev python3-pybind11 python3-numpy python3-scipy python3-pytest python3-matplotlib
          clang libclang-rt-14-dev libomp-14-dev)  # the sanitizer and fuzzing build (scripts/sanitize.sh)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  echo "spade: installing ${missing[*]}"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
if ! command -v nvcc >/dev/null && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "spade: nvcc (CUDA 13) not found in PATH or /usr/local/cuda/bin: install the CUDA toolkit" >&2
  exit 1
fi
