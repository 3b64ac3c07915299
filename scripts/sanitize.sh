#!/usr/bin/env bash
# The sanitizer and fuzzing step of scripts/test.sh: a host-only build (SPADE_ENABLE_CUDA=OFF) with clang
# and -fsanitize=address,undefined, halting at the first report; its whole test suite (LeakSanitizer
# included); then each libFuzzer target for SPADE_FUZZ_SECONDS (default 60) over its seed corpus in
# tests/fuzz/corpus (new inputs go to a scratch folder; the seeds are not modified).
# Run a fuzzer longer by hand: build-sanitize/fuzz_matrix_market -max_total_time=3600 /tmp/mm \
#   tests/fuzz/corpus/matrix_market   (and fuzz_dense_matrix_market with tests/fuzz/corpus/dense).
set -euo pipefail
cd "$(dirname "$0")/.."
build=build-sanitize
fuzz_seconds=${SPADE_FUZZ_SECONDS:-60}
flags="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -fsanitize=fuzzer-no-link"
CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPADE_ENABLE_CUDA=OFF \
  -DSPADE_BUILD_CLI=OFF -DSPADE_BUILD_BENCHMARKS=OFF -DSPADE_BUILD_PYTHON=OFF \
  -DSPADE_FUZZ=ON -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" >/dev/null
cmake --build "$build" --parallel "$(nproc)"

export ASAN_OPTIONS=halt_on_error=1:abort_on_error=1:detect_leaks=1:strict_string_checks=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
(cd "$build" && ctest --output-on-failure --parallel "$(nproc)")

for target in matrix_market dense_matrix_market; do
  case $target in
    matrix_market) corpus=tests/fuzz/corpus/matrix_market ;;
    dense_matrix_market) corpus=tests/fuzz/corpus/dense ;;
  esac
  scratch=$(mktemp -d)
  echo "spade: fuzzing $target for ${fuzz_seconds} s"
  status=0
  "$build/fuzz_$target" -max_total_time="$fuzz_seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
    -artifact_prefix="$build/fuzz_${target}_" "$scratch" "$corpus" >"$build/fuzz_$target.log" 2>&1 || status=$?
  grep -E "^#[0-9]+ +DONE|^Done|SUMMARY|ERROR" "$build/fuzz_$target.log" || true
  rm -rf "$scratch"
  if [ "$status" -ne 0 ]; then
    tail -n 60 "$build/fuzz_$target.log"
    echo "spade: fuzz_$target found a failure; the input is $build/fuzz_${target}_*" >&2
    exit 1
  fi
done
