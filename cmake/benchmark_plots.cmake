# The benchmark plots (scripts/plot_benchmarks.py on the drivers' --json output), with a test that runs the
# host driver bench_cholesky on two small generated problems and plots its JSON (cmake/test_plots.cmake).
# The GPU drivers' plots are made on the GPU machine (docs/BENCHMARKS.md says how).
if(BUILD_TESTING AND SPADE_BUILD_BENCHMARKS)
  if(NOT DEFINED Python3_EXECUTABLE AND EXISTS /usr/bin/python3)
    set(Python3_EXECUTABLE /usr/bin/python3)  # Debian's, which sees python3-matplotlib (cmake/python.cmake)
  endif()
  find_package(Python3 COMPONENTS Interpreter)
  set(spade_matplotlib 1)
  if(Python3_Interpreter_FOUND)
    execute_process(COMMAND ${Python3_EXECUTABLE} -c "import matplotlib, numpy"
                    RESULT_VARIABLE spade_matplotlib OUTPUT_QUIET ERROR_QUIET)
  endif()
  if(spade_matplotlib EQUAL 0)
    add_test(NAME benchmark_plots
             COMMAND ${CMAKE_COMMAND} -DBENCH=$<TARGET_FILE:bench_cholesky> -DPYTHON=${Python3_EXECUTABLE}
                     -DSCRIPT=${PROJECT_SOURCE_DIR}/scripts/plot_benchmarks.py
                     -DWORK_DIR=${PROJECT_BINARY_DIR}/benchmark_plots -P ${PROJECT_SOURCE_DIR}/cmake/test_plots.cmake)
  else()
    add_test(NAME benchmark_plots COMMAND ${CMAKE_COMMAND} -E echo
             "SKIP: no Python 3 with matplotlib and numpy (scripts/install-deps.sh installs python3-matplotlib)")
    set_tests_properties(benchmark_plots PROPERTIES SKIP_REGULAR_EXPRESSION "SKIP:")
  endif()
endif()
