# The OpenMP build of OpenBLAS (Debian: libopenblas-openmp-dev), BLAS and LAPACK in one library, as the imported
# target spade::openblas. spade calls BLAS at one thread and threads dense work itself (core/parallel_blas.hpp);
# the OpenMP build leaves its global state alone for such calls, so spade changes no process-wide thread setting.
# The pthread build has only a process-wide thread count, and the serial build returns wrong products when several
# threads call it at once (docs/benchmarks/blas_threads.md), so neither is taken, even where it is the system's
# default libblas: the library is linked by its path in the openblas-openmp folder, which the build tree's and the
# installed program's run path name. Used by spade's build and by the installed package config, so that the
# exported static libraries name this target, not a path. Sets SPADE_OPENBLAS_FOUND and the cache variable
# SPADE_OPENBLAS_LIBRARY.
set(_spade_openblas_dirs "")
string(REPLACE ":" ";" _spade_env_prefixes "$ENV{CMAKE_PREFIX_PATH}")
foreach(prefix IN LISTS CMAKE_PREFIX_PATH _spade_env_prefixes CMAKE_SYSTEM_PREFIX_PATH)
  list(APPEND _spade_openblas_dirs "${prefix}/lib/${CMAKE_LIBRARY_ARCHITECTURE}/openblas-openmp"
                                   "${prefix}/lib/openblas-openmp")
endforeach()
find_library(SPADE_OPENBLAS_LIBRARY NAMES openblas PATHS ${_spade_openblas_dirs} NO_DEFAULT_PATH)
unset(_spade_openblas_dirs)
unset(_spade_env_prefixes)

if(NOT SPADE_OPENBLAS_LIBRARY)
  set(SPADE_OPENBLAS_FOUND FALSE)
  return()
endif()
set(SPADE_OPENBLAS_FOUND TRUE)
if(NOT TARGET spade::openblas)
  add_library(spade::openblas SHARED IMPORTED)
  set_target_properties(spade::openblas PROPERTIES IMPORTED_LOCATION "${SPADE_OPENBLAS_LIBRARY}")
endif()
