# Build options, the CUDA architectures, and the generated version header (include/spade/version.h).
#
#   BUILD_TESTING           the tests (GoogleTest; CHOLMOD and Eigen as references); default ON
#   SPADE_BUILD_CLI         the spade program (CLI11, nlohmann_json); default ON
#   SPADE_BUILD_BENCHMARKS  the benchmark drivers (CHOLMOD, CLI11, nlohmann_json, cuBLAS/cuSPARSE); default ON
#   SPADE_BUILD_PYTHON      the Python module spade (Python 3 headers, pybind11; NumPy, SciPy, pytest to
#                           test it); default ON
#
# The libraries themselves need only BLAS/LAPACK (OpenBLAS), OpenMP, zlib, METIS, SuiteSparse AMD and the
# CUDA toolkit (cmake/dependencies.cmake); every other dependency is found only for the option that needs it.
option(BUILD_TESTING "Build the tests (needs GoogleTest, CHOLMOD and Eigen)" ON)
option(SPADE_BUILD_CLI "Build the spade program (needs CLI11 and nlohmann_json)" ON)
option(SPADE_BUILD_BENCHMARKS "Build the benchmark drivers (need CHOLMOD, CLI11 and nlohmann_json)" ON)
option(SPADE_BUILD_PYTHON "Build the Python module spade (needs Python 3 and pybind11)" ON)

# CMAKE_INSTALL_INCLUDEDIR and the other install folders, before any target names them in its
# $<INSTALL_INTERFACE:...> include directories (cmake/install.cmake installs there).
include(GNUInstallDirs)

# Installed programs and the Python module keep the run-time search paths of libraries outside the
# system's (the CUDA toolkit's in /usr/local/cuda); set before any target is made.
set(CMAKE_INSTALL_RPATH_USE_LINK_PATH ON)

# The static libraries are linked into shared objects too (the Python module), so they are compiled as
# position-independent code.
set(CMAKE_POSITION_INDEPENDENT_CODE ON)

# include/spade/version.h: the version as C preprocessor macros (usable from C and C++).
configure_file(${PROJECT_SOURCE_DIR}/include/spade/version.h.in ${PROJECT_BINARY_DIR}/include/spade/version.h @ONLY)
