# The benchmark-plot test (ctest: benchmark_plots), run as a script with cmake -P: BENCH (bench_cholesky) on
# two small generated problems writes its --json, then PYTHON runs SCRIPT (scripts/plot_benchmarks.py) on it,
# and the PNG file it must write is checked to be one. Any failing step fails the test with its output.
foreach(var BENCH PYTHON SCRIPT WORK_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "test_plots.cmake: -D${var}=... is required")
  endif()
endforeach()
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
execute_process(COMMAND ${BENCH} --only lap2d_128 lap3d_16 --threads 1 --factor-repeats 1 --solve-repeats 1
                        --json ${WORK_DIR}/bench_cholesky.json
                RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "bench_cholesky failed (${status}):\n${out}\n${err}")
endif()
execute_process(COMMAND ${PYTHON} ${SCRIPT} ${WORK_DIR}/bench_cholesky.json --out ${WORK_DIR}
                RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "plot_benchmarks.py failed (${status}):\n${out}\n${err}")
endif()
set(png ${WORK_DIR}/bench_cholesky_speedup.png)
if(NOT EXISTS ${png})
  message(FATAL_ERROR "plot_benchmarks.py did not write ${png}:\n${out}")
endif()
file(READ ${png} magic LIMIT 8 HEX)
if(NOT magic STREQUAL "89504e470d0a1a0a")
  message(FATAL_ERROR "${png} is not a PNG file (it starts with ${magic})")
endif()
message(STATUS "wrote ${out}")
