# Dependencies, each found only when something that is built needs it (the options in cmake/options.cmake).
# The libraries' own dependencies are also what the installed package config finds again for a consumer
# (cmake/spadeConfig.cmake.in): keep the two lists in step.

# ---- the libraries ----
include(${CMAKE_CURRENT_LIST_DIR}/spadeOpenBLAS.cmake)  # spade::openblas: OpenBLAS's OpenMP build
if(NOT SPADE_OPENBLAS_FOUND)
  message(FATAL_ERROR "The OpenMP build of OpenBLAS (Debian: libopenblas-openmp-dev) was not found in an "
                      "openblas-openmp folder; run scripts/install-deps.sh")
endif()
find_package(OpenMP REQUIRED COMPONENTS CXX)
find_package(ZLIB REQUIRED)
if(SPADE_ENABLE_CUDA)
  find_package(CUDAToolkit REQUIRED)
endif()
include(${CMAKE_CURRENT_LIST_DIR}/spadeOrderingLibraries.cmake)  # spade::metis, spade::amd, spade::colamd
if(NOT SPADE_ORDERING_LIBRARIES_FOUND)
  message(FATAL_ERROR "METIS or SuiteSparse AMD/COLAMD not found (${SPADE_ORDERING_LIBRARIES_MISSING}); "
                      "run scripts/install-deps.sh")
endif()

# ---- the program and the benchmark drivers ----
if(SPADE_BUILD_CLI OR SPADE_BUILD_BENCHMARKS)
  find_package(CLI11 REQUIRED)
  find_package(nlohmann_json REQUIRED)
endif()

# ---- references for the tests and benchmarks (never linked into spade's libraries) ----
if(BUILD_TESTING)
  find_package(GTest REQUIRED)
  find_package(Eigen3 REQUIRED NO_MODULE)
endif()
if(BUILD_TESTING OR SPADE_BUILD_BENCHMARKS)
  find_library(CHOLMOD_LIBRARY cholmod REQUIRED)
endif()
