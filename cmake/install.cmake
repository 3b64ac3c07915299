# `cmake --install <build> --prefix P`: the public headers (with the generated version.h), the component
# libraries, the spade program, and a CMake package, so that another project writes
#
#   find_package(spade 0.1 REQUIRED)
#   target_link_libraries(app PRIVATE spade::spade)
#
# Targets (static libraries, position-independent):
#   spade::spade       the Solver facade (solver.hpp, eigen.hpp, the phase headers) and the C interface
#                      (spade.h); what most users link
#   spade::c           the C interface alone (spade.h; a C program links it with a C++ linker)
#   spade::host        the host pipeline alone: Matrix Market, orderings, analysis, factorization, host solve
#   spade::solver      the Solver facade and the GPU solve phase (links spade::host)
#   spade::dense_trsv  the GPU dense triangular solves of dense_trsv.hpp
#   spade::sptrsv      the GPU sparse triangular-solve plans of sptrsv.hpp
# The package config finds the libraries' own dependencies again (OpenBLAS's OpenMP build, OpenMP, zlib, METIS,
# SuiteSparse AMD, the CUDA toolkit's runtime, cuBLAS, cuSOLVER and cuSPARSE); the consumer needs no CUDA
# compiler. Installed under CMAKE_INSTALL_{INCLUDEDIR,LIBDIR,BINDIR}; the package in
# ${CMAKE_INSTALL_LIBDIR}/cmake/spade.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

add_library(spade_library INTERFACE)
target_link_libraries(spade_library INTERFACE spade_solver spade_c)
set_target_properties(spade_library PROPERTIES EXPORT_NAME spade)
add_library(spade::spade ALIAS spade_library)

install(TARGETS spade_library spade_c spade_solver spade_host spade_dense_trsv spade_sptrsv
        EXPORT spadeTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
if(SPADE_BUILD_CLI)
  # The run path names the folder of OpenBLAS's OpenMP build, which is not the system's default libblas.
  set_target_properties(spade PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
  install(TARGETS spade RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/spade DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.hpp" PATTERN "*.h")
install(FILES ${PROJECT_BINARY_DIR}/include/spade/version.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/spade)

set(SPADE_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/spade)
install(EXPORT spadeTargets NAMESPACE spade:: FILE spadeTargets.cmake DESTINATION ${SPADE_INSTALL_CMAKEDIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/spadeConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/spadeConfig.cmake
                              INSTALL_DESTINATION ${SPADE_INSTALL_CMAKEDIR})
# 0.x: a minor version may change the interface, so only the same major.minor is compatible.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/spadeConfigVersion.cmake
                                  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/spadeConfig.cmake ${PROJECT_BINARY_DIR}/spadeConfigVersion.cmake
              ${PROJECT_SOURCE_DIR}/cmake/spadeOrderingLibraries.cmake
              ${PROJECT_SOURCE_DIR}/cmake/spadeOpenBLAS.cmake
        DESTINATION ${SPADE_INSTALL_CMAKEDIR})

# The install-tree test: install into a fresh folder, then configure, build and run the consumer project
# tests/install_consumer against it (cmake/test_install.cmake).
if(BUILD_TESTING AND SPADE_BUILD_CLI)
  add_test(NAME install_consumer
           COMMAND ${CMAKE_COMMAND} -DBUILD_DIR=${PROJECT_BINARY_DIR}
                   -DSOURCE_DIR=${PROJECT_SOURCE_DIR}/tests/install_consumer
                   -DWORK_DIR=${PROJECT_BINARY_DIR}/install_consumer -DGENERATOR=${CMAKE_GENERATOR}
                   -DSPADE_VERSION=${PROJECT_VERSION}
                   -P ${PROJECT_SOURCE_DIR}/cmake/test_install.cmake)
  set_tests_properties(install_consumer PROPERTIES TIMEOUT 300)
endif()
