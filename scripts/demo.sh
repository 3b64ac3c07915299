#!/usr/bin/env bash
# README command 1: build spade and run its main job on the embedded default: generate a 3D Poisson
# problem, order, analyze, factor, solve, refine, and print the report. Extra arguments go to `spade demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
exec build/spade demo "$@"
