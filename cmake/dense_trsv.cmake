# Dense triangular-solve kernels for supernode diagonal blocks (issue 3): kernels/dense_trsv.{cuh,cu},
# include/spade/dense_trsv.hpp, their GPU tests and the benchmark driver against cuBLAS.
add_library(spade_dense_trsv STATIC kernels/dense_trsv.cu)
target_include_directories(spade_dense_trsv
  PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include> $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
  PRIVATE ${PROJECT_SOURCE_DIR})
target_compile_options(spade_dense_trsv PRIVATE
  $<$<COMPILE_LANGUAGE:CUDA>:-lineinfo -Xcompiler=-Wall,-Wextra>)
target_link_libraries(spade_dense_trsv PUBLIC CUDA::cudart)
set_target_properties(spade_dense_trsv PROPERTIES EXPORT_NAME dense_trsv)

if(BUILD_TESTING)

add_executable(test_dense_trsv tests/test_dense_trsv.cu)
target_include_directories(test_dense_trsv PRIVATE ${PROJECT_SOURCE_DIR})
target_compile_options(test_dense_trsv PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>)
target_link_libraries(test_dense_trsv PRIVATE spade_dense_trsv GTest::gtest_main spade::openblas)
gtest_discover_tests(test_dense_trsv DISCOVERY_MODE PRE_TEST)
endif()

if(SPADE_BUILD_BENCHMARKS)

add_executable(bench_dense_trsv drivers/bench_dense_trsv.cu)
target_include_directories(bench_dense_trsv PRIVATE ${PROJECT_SOURCE_DIR})
target_compile_options(bench_dense_trsv PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>)
target_link_libraries(bench_dense_trsv PRIVATE spade_dense_trsv CUDA::cublas nlohmann_json::nlohmann_json)
endif()
