# Sparse triangular-solve kernels on the GPU (issue 4): the plan in solve/, the kernel families in kernels/.
add_library(spade_sptrsv STATIC
  solve/sptrsv.cu
  solve/sptrsv_rule.cpp
  kernels/sptrsv_analysis.cu
  kernels/sptrsv_level.cu
  kernels/sptrsv_selfsched.cu
  kernels/sptrsv_fused.cu
  kernels/sptrsv_block.cu
  kernels/sptrsv_block_direct.cu
  kernels/sptrsv_cluster.cu
)
target_include_directories(spade_sptrsv
  PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include> $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
  PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(spade_sptrsv PUBLIC CUDA::cudart)
target_compile_options(spade_sptrsv PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>)
set_target_properties(spade_sptrsv PROPERTIES EXPORT_NAME sptrsv)

if(BUILD_TESTING)

add_executable(test_sptrsv tests/test_sptrsv.cu)
target_include_directories(test_sptrsv PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(test_sptrsv PRIVATE spade_sptrsv spade_host GTest::gtest_main)
target_compile_definitions(test_sptrsv PRIVATE SPADE_DEFAULT_MATRIX_DIR="${SPADE_DEFAULT_MATRIX_DIR}")
gtest_discover_tests(test_sptrsv DISCOVERY_MODE PRE_TEST)
endif()

if(SPADE_BUILD_BENCHMARKS)

add_executable(bench_sptrsv drivers/bench_sptrsv.cu)
target_include_directories(bench_sptrsv PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(bench_sptrsv PRIVATE spade_sptrsv spade_host CUDA::cusparse nlohmann_json::nlohmann_json)
target_compile_definitions(bench_sptrsv PRIVATE SPADE_DEFAULT_MATRIX_DIR="${SPADE_DEFAULT_MATRIX_DIR}")

# Thread block clusters need sm_90 whatever the project's architectures are.
add_executable(bench_cluster_sync drivers/bench_cluster_sync.cu)
target_include_directories(bench_cluster_sync PRIVATE ${CMAKE_SOURCE_DIR}/include ${CMAKE_SOURCE_DIR})
target_link_libraries(bench_cluster_sync PRIVATE CUDA::cudart)
target_compile_options(bench_cluster_sync PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>)
set_target_properties(bench_cluster_sync PROPERTIES CUDA_ARCHITECTURES 90)
endif()
