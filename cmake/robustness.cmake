# Hostile input and faults (issue 32): the allocation-failure torture of the factorization and the host
# solves (host only, so it also runs in the sanitizer build), the bad-input test of the CLI, and the
# libFuzzer targets of the readers (SPADE_FUZZ, clang; run by scripts/sanitize.sh).
if(BUILD_TESTING)
  add_executable(test_faults tests/test_faults.cpp)
  target_link_libraries(test_faults PRIVATE spade_host GTest::gtest_main)
  target_compile_options(test_faults PRIVATE ${SPADE_WARNINGS})
  gtest_discover_tests(test_faults)
endif()

if(SPADE_FUZZ)
  foreach(target fuzz_matrix_market fuzz_dense_matrix_market)
    add_executable(${target} tests/fuzz/${target}.cpp)
    target_link_libraries(${target} PRIVATE spade_host)
    target_compile_options(${target} PRIVATE ${SPADE_WARNINGS} -fsanitize=fuzzer)
    target_link_options(${target} PRIVATE -fsanitize=fuzzer)
  endforeach()
endif()

# Runs the built program on hostile files it generates (SPADE_BINARY is its path).
if(BUILD_TESTING AND SPADE_ENABLE_CUDA AND SPADE_BUILD_CLI)
  add_executable(test_bad_input tests/test_bad_input.cpp)
  target_link_libraries(test_bad_input PRIVATE GTest::gtest_main ZLIB::ZLIB)
  target_compile_definitions(test_bad_input PRIVATE SPADE_BINARY="$<TARGET_FILE:spade>")
  target_compile_options(test_bad_input PRIVATE ${SPADE_WARNINGS})
  add_dependencies(test_bad_input spade)
  gtest_discover_tests(test_bad_input)
endif()

# GPU memory faults: the host fallback or a clear error (skipped without a GPU).
if(BUILD_TESTING AND SPADE_ENABLE_CUDA)
  add_executable(test_gpu_faults tests/test_gpu_faults.cpp)
  target_include_directories(test_gpu_faults PRIVATE ${CMAKE_SOURCE_DIR})
  target_link_libraries(test_gpu_faults PRIVATE spade_solver CUDA::cudart GTest::gtest_main)
  target_compile_options(test_gpu_faults PRIVATE ${SPADE_WARNINGS})
  gtest_discover_tests(test_gpu_faults)
endif()
