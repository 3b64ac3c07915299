# Dense triangular-solve kernels for supernode diagonal blocks (issue 3): kernels/dense_trsv.{cuh,cu},
# include/spade/dense_trsv.hpp, their GPU tests and the benchmark driver against cuBLAS.
add_library(spade_dense_trsv STATIC kernels/dense_trsv.cu)
target_include_directories(spade_dense_trsv PUBLIC ${CMAKE_SOURCE_DIR}/include ${CMAKE_SOURCE_DIR})
target_compile_options(spade_dense_trsv PRIVATE
  $<$<COMPILE_LANGUAGE:CUDA>:-lineinfo -Xcompiler=-Wall,-Wextra>)
target_link_libraries(spade_dense_trsv PUBLIC CUDA::cudart)

add_executable(test_dense_trsv tests/test_dense_trsv.cu)
target_compile_options(test_dense_trsv PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>)
target_link_libraries(test_dense_trsv PRIVATE spade_dense_trsv GTest::gtest_main LAPACK::LAPACK BLAS::BLAS)
gtest_discover_tests(test_dense_trsv DISCOVERY_MODE PRE_TEST)

add_executable(bench_dense_trsv drivers/bench_dense_trsv.cu)
target_compile_options(bench_dense_trsv PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>)
target_link_libraries(bench_dense_trsv PRIVATE spade_dense_trsv CUDA::cublas)
