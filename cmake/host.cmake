# The host pipeline: matrix types and I/O (core/), orderings, symbolic and numeric factorization, host solve.
add_library(spade_host
  core/sparse_matrix.cpp
)
target_include_directories(spade_host PUBLIC ${CMAKE_SOURCE_DIR}/include
  PRIVATE ${METIS_INCLUDE_DIR} ${SUITESPARSE_INCLUDE_DIR})
target_compile_options(spade_host PRIVATE ${SPADE_WARNINGS})
target_link_libraries(spade_host
  PUBLIC OpenMP::OpenMP_CXX
  PRIVATE ${METIS_LIBRARY} ${AMD_LIBRARY} ${COLAMD_LIBRARY} ${SUITESPARSECONFIG_LIBRARY}
          LAPACK::LAPACK BLAS::BLAS ZLIB::ZLIB)
