#!/usr/bin/env bash
# Installs the dependencies (scripts/install-deps.sh) and builds spade in ./build (Release).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build --parallel "$(nproc)"
