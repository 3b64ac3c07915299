#!/usr/bin/env bash
# README command 2: build spade and run the whole test suite (GPU tests skip visibly without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
(cd build && ctest --output-on-failure --parallel "$(nproc)")
scripts/sanitize.sh  # host-only ASan/UBSan build and its tests, then the fuzzers of the readers
