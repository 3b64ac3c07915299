# METIS, SuiteSparse AMD and COLAMD as the imported targets spade::metis, spade::amd and spade::colamd (Debian ships no CMake
# package for METIS; spade uses AMD and COLAMD alone, not the whole of SuiteSparse). Used by spade's own build and by
# the installed package config, so that the exported static libraries name these targets, not paths.
# Sets SPADE_ORDERING_LIBRARIES_FOUND, and SPADE_ORDERING_LIBRARIES_MISSING to what was not found; also the
# cache variables METIS_INCLUDE_DIR, METIS_LIBRARY, SUITESPARSE_INCLUDE_DIR, AMD_LIBRARY, COLAMD_LIBRARY and
# SUITESPARSECONFIG_LIBRARY (the build uses SUITESPARSE_INCLUDE_DIR for CHOLMOD in the tests).
find_path(METIS_INCLUDE_DIR metis.h)
find_library(METIS_LIBRARY metis)
find_path(SUITESPARSE_INCLUDE_DIR amd.h PATH_SUFFIXES suitesparse)
find_library(AMD_LIBRARY amd)
find_library(COLAMD_LIBRARY colamd)
find_library(SUITESPARSECONFIG_LIBRARY suitesparseconfig)

set(SPADE_ORDERING_LIBRARIES_MISSING "")
foreach(var METIS_INCLUDE_DIR METIS_LIBRARY SUITESPARSE_INCLUDE_DIR AMD_LIBRARY COLAMD_LIBRARY SUITESPARSECONFIG_LIBRARY)
  if(NOT ${var})
    list(APPEND SPADE_ORDERING_LIBRARIES_MISSING ${var})
  endif()
endforeach()
if(SPADE_ORDERING_LIBRARIES_MISSING)
  set(SPADE_ORDERING_LIBRARIES_FOUND FALSE)
  return()
endif()
set(SPADE_ORDERING_LIBRARIES_FOUND TRUE)

if(NOT TARGET spade::metis)
  add_library(spade::metis UNKNOWN IMPORTED)
  set_target_properties(spade::metis PROPERTIES IMPORTED_LOCATION "${METIS_LIBRARY}"
                        INTERFACE_INCLUDE_DIRECTORIES "${METIS_INCLUDE_DIR}")
endif()
if(NOT TARGET spade::amd)
  add_library(spade::suitesparseconfig UNKNOWN IMPORTED)
  set_target_properties(spade::suitesparseconfig PROPERTIES IMPORTED_LOCATION "${SUITESPARSECONFIG_LIBRARY}")
  add_library(spade::amd UNKNOWN IMPORTED)
  set_target_properties(spade::amd PROPERTIES IMPORTED_LOCATION "${AMD_LIBRARY}"
                        INTERFACE_INCLUDE_DIRECTORIES "${SUITESPARSE_INCLUDE_DIR}"
                        INTERFACE_LINK_LIBRARIES spade::suitesparseconfig)
endif()
if(NOT TARGET spade::colamd)
  add_library(spade::colamd UNKNOWN IMPORTED)
  set_target_properties(spade::colamd PROPERTIES IMPORTED_LOCATION "${COLAMD_LIBRARY}"
                        INTERFACE_INCLUDE_DIRECTORIES "${SUITESPARSE_INCLUDE_DIR}"
                        INTERFACE_LINK_LIBRARIES spade::suitesparseconfig)
endif()
