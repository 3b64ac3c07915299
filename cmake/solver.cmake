# The solve phase on the GPU and the Solver facade (issue 28): the supernodal kernels in kernels/, the GPU
# plan and the facade in solve/, their tests and the benchmark driver against cuSPARSE and the host solve.
add_library(spade_solver STATIC
  solve/solver.cpp
  solve/gpu_solve.cu
  kernels/supernodal_solve.cu
  kernels/residual.cu
)
target_include_directories(spade_solver PRIVATE ${PROJECT_SOURCE_DIR})  # solve/, kernels/; the public headers come with spade_host
target_compile_options(spade_solver PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${SPADE_WARNINGS}>
                       $<$<COMPILE_LANGUAGE:CUDA>:-lineinfo -Xcompiler=-Wall,-Wextra>)
target_link_libraries(spade_solver
  PUBLIC spade_host
  PRIVATE CUDA::cudart CUDA::cublas CUDA::cusolver spade::openblas)
set_target_properties(spade_solver PROPERTIES EXPORT_NAME solver)

if(BUILD_TESTING)

# Host-only: the schedule's properties and its host reference against the host solve (runs in CI).
add_executable(test_schedule tests/test_schedule.cpp)
target_link_libraries(test_schedule PRIVATE spade_host GTest::gtest_main)
target_compile_definitions(test_schedule PRIVATE SPADE_DEFAULT_MATRIX_DIR="${SPADE_DEFAULT_MATRIX_DIR}")
target_compile_options(test_schedule PRIVATE ${SPADE_WARNINGS})
gtest_discover_tests(test_schedule)

# The facade on every placement; the GPU parts skip visibly without a GPU.
add_executable(test_solver tests/test_solver.cpp)
target_include_directories(test_solver PRIVATE ${CMAKE_SOURCE_DIR})
target_link_libraries(test_solver PRIVATE spade_solver CUDA::cudart spade::openblas GTest::gtest_main)
target_compile_definitions(test_solver PRIVATE SPADE_DEFAULT_MATRIX_DIR="${SPADE_DEFAULT_MATRIX_DIR}")
target_compile_options(test_solver PRIVATE ${SPADE_WARNINGS})
gtest_discover_tests(test_solver DISCOVERY_TIMEOUT 60)
endif()

if(SPADE_BUILD_BENCHMARKS)

add_executable(bench_solve drivers/bench_solve.cu)
target_include_directories(bench_solve PRIVATE ${CMAKE_SOURCE_DIR})
target_link_libraries(bench_solve PRIVATE spade_solver CUDA::cudart CUDA::cusparse CLI11::CLI11 nlohmann_json::nlohmann_json)
target_compile_definitions(bench_solve PRIVATE SPADE_DEFAULT_MATRIX_DIR="${SPADE_DEFAULT_MATRIX_DIR}")
target_compile_options(bench_solve PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>)

add_executable(bench_lu_solve drivers/bench_lu_solve.cu)
target_include_directories(bench_lu_solve PRIVATE ${CMAKE_SOURCE_DIR})
target_link_libraries(bench_lu_solve PRIVATE spade_solver CUDA::cudart CUDA::cusparse CLI11::CLI11 nlohmann_json::nlohmann_json)
target_compile_definitions(bench_lu_solve PRIVATE SPADE_DEFAULT_MATRIX_DIR="${SPADE_DEFAULT_MATRIX_DIR}")
target_compile_options(bench_lu_solve PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>)
endif()
