# The host pipeline: matrix types and I/O (core/), orderings, symbolic and numeric factorization, host solve.
add_library(spade_host
  core/error.cpp
  core/parallel_blas.cpp
  core/sparse_matrix.cpp
  factor/symbolic.cpp
  factor/cholesky.cpp
  factor/lu.cpp
  solve/host_solve.cpp
  solve/lu_solve.cpp
  solve/lu_correction.cpp
  solve/lu_refine.cpp
  solve/refine.cpp
  solve/condition.cpp
  solve/supernodal_schedule.cpp
  solve/partitioned_inverse.cpp
  core/matrix_market.cpp
  core/generators.cpp
  ordering/ordering.cpp
  ordering/matching.cpp
)
target_include_directories(spade_host PUBLIC
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
  $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/include>  # the generated version.h
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_compile_options(spade_host PRIVATE ${SPADE_WARNINGS})
target_link_libraries(spade_host
  PUBLIC OpenMP::OpenMP_CXX
  PRIVATE spade::metis spade::amd spade::colamd spade::openblas ZLIB::ZLIB)
set_target_properties(spade_host PROPERTIES EXPORT_NAME host)

if(BUILD_TESTING)

# spade's threading of dense BLAS work, and that no process-wide setting changes: the program exports its
# symbols so that its goto_set_num_threads takes the place of OpenBLAS's (tests/test_parallel_blas.cpp).
add_executable(test_parallel_blas tests/test_parallel_blas.cpp)
target_link_libraries(test_parallel_blas PRIVATE spade_host spade::openblas GTest::gtest_main ${CMAKE_DL_LIBS})
set_target_properties(test_parallel_blas PROPERTIES ENABLE_EXPORTS ON)
target_compile_options(test_parallel_blas PRIVATE ${SPADE_WARNINGS})
gtest_discover_tests(test_parallel_blas)

add_executable(test_io tests/test_io.cpp)
target_link_libraries(test_io PRIVATE spade_host GTest::gtest_main ZLIB::ZLIB)
target_compile_definitions(test_io PRIVATE SPADE_DEFAULT_MATRIX_DIR="${SPADE_DEFAULT_MATRIX_DIR}")
target_compile_options(test_io PRIVATE ${SPADE_WARNINGS})
gtest_discover_tests(test_io)

add_executable(test_ordering tests/test_ordering.cpp)
target_include_directories(test_ordering PRIVATE ${SUITESPARSE_INCLUDE_DIR})
target_link_libraries(test_ordering PRIVATE spade_host GTest::gtest_main ${CHOLMOD_LIBRARY}
                      ${SUITESPARSECONFIG_LIBRARY})
target_compile_definitions(test_ordering PRIVATE SPADE_DEFAULT_MATRIX_DIR="${SPADE_DEFAULT_MATRIX_DIR}")
target_compile_options(test_ordering PRIVATE ${SPADE_WARNINGS})
gtest_discover_tests(test_ordering)

add_executable(test_matching tests/test_matching.cpp)
target_link_libraries(test_matching PRIVATE spade_host GTest::gtest_main)
target_compile_definitions(test_matching PRIVATE SPADE_DEFAULT_MATRIX_DIR="${SPADE_DEFAULT_MATRIX_DIR}")
target_compile_options(test_matching PRIVATE ${SPADE_WARNINGS})
gtest_discover_tests(test_matching)
endif()

if(BUILD_TESTING OR SPADE_BUILD_BENCHMARKS)
# CHOLMOD as the reference for tests and benchmarks (never linked into spade itself).
add_library(spade_cholmod_reference tests/cholmod_reference.cpp)
target_include_directories(spade_cholmod_reference PUBLIC ${CMAKE_SOURCE_DIR}/tests PRIVATE ${SUITESPARSE_INCLUDE_DIR})
target_link_libraries(spade_cholmod_reference PUBLIC spade_host PRIVATE ${CHOLMOD_LIBRARY} ${SUITESPARSECONFIG_LIBRARY})
endif()

if(BUILD_TESTING)
add_executable(test_cholesky tests/test_cholesky.cpp)
target_link_libraries(test_cholesky PRIVATE spade_host spade_cholmod_reference Eigen3::Eigen spade::openblas
                                            GTest::gtest_main)
target_compile_definitions(test_cholesky PRIVATE SPADE_DEFAULT_MATRIX_DIR="${SPADE_DEFAULT_MATRIX_DIR}")
target_compile_options(test_cholesky PRIVATE ${SPADE_WARNINGS})
gtest_discover_tests(test_cholesky)
endif()

if(SPADE_BUILD_BENCHMARKS)

add_executable(bench_cholesky drivers/bench_cholesky.cpp)
target_link_libraries(bench_cholesky PRIVATE spade_host spade_cholmod_reference CLI11::CLI11 nlohmann_json::nlohmann_json
                      spade::openblas)
target_compile_definitions(bench_cholesky PRIVATE SPADE_DEFAULT_MATRIX_DIR="${SPADE_DEFAULT_MATRIX_DIR}")
target_compile_options(bench_cholesky PRIVATE ${SPADE_WARNINGS})
endif()

if(BUILD_TESTING OR SPADE_BUILD_BENCHMARKS)
# UMFPACK and KLU as the references of the LU's tests and benchmark (never linked into spade itself).
find_library(UMFPACK_LIBRARY umfpack REQUIRED)
find_library(KLU_LIBRARY klu REQUIRED)
add_library(spade_lu_reference tests/lu_reference.cpp)
target_include_directories(spade_lu_reference PUBLIC ${CMAKE_SOURCE_DIR}/tests PRIVATE ${SUITESPARSE_INCLUDE_DIR})
target_link_libraries(spade_lu_reference PUBLIC spade_host PRIVATE ${UMFPACK_LIBRARY} ${KLU_LIBRARY}
                      ${SUITESPARSECONFIG_LIBRARY})
endif()

if(BUILD_TESTING)
add_executable(test_lu tests/test_lu.cpp)
target_link_libraries(test_lu PRIVATE spade_host spade_lu_reference spade::openblas GTest::gtest_main)
target_compile_definitions(test_lu PRIVATE SPADE_DEFAULT_MATRIX_DIR="${SPADE_DEFAULT_MATRIX_DIR}")
target_compile_options(test_lu PRIVATE ${SPADE_WARNINGS})
gtest_discover_tests(test_lu)
endif()

if(SPADE_BUILD_BENCHMARKS)
add_executable(bench_lu drivers/bench_lu.cpp)
target_link_libraries(bench_lu PRIVATE spade_host spade_lu_reference CLI11::CLI11 nlohmann_json::nlohmann_json
                      spade::openblas)
target_compile_definitions(bench_lu PRIVATE SPADE_DEFAULT_MATRIX_DIR="${SPADE_DEFAULT_MATRIX_DIR}")
target_compile_options(bench_lu PRIVATE ${SPADE_WARNINGS})
endif()
