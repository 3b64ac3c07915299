# The Python module `spade` (python/spade/__init__.py on the compiled bindings/python_module.cpp, through
# pybind11), built into <build>/python/spade so that `PYTHONPATH=<build>/python python3 -c "import spade"`
# works from the build tree, with its pytest tests (python/tests). Debian packages only: python3-dev,
# python3-pybind11, python3-numpy, python3-scipy, python3-pytest.
#
# The interpreter is Debian's /usr/bin/python3 unless Python3_EXECUTABLE names another: NumPy and SciPy come
# from Debian packages, which only that interpreter sees.
if(NOT DEFINED Python3_EXECUTABLE AND EXISTS /usr/bin/python3)
  set(Python3_EXECUTABLE /usr/bin/python3)
endif()
find_package(Python3 COMPONENTS Interpreter Development.Module)
if(Python3_FOUND)
  find_package(pybind11 2.6 CONFIG)
endif()
if(NOT Python3_FOUND OR NOT pybind11_FOUND)
  message(FATAL_ERROR "The Python module needs Python 3 with its headers and pybind11 (Debian: python3-dev, "
                      "python3-pybind11; scripts/install-deps.sh installs them), or configure with "
                      "-DSPADE_BUILD_PYTHON=OFF")
endif()

set(SPADE_PYTHON_DIR ${PROJECT_BINARY_DIR}/python/spade)
# NO_EXTRAS: no link-time optimization (the module is a thin layer over static libraries built without it).
pybind11_add_module(spade_python MODULE NO_EXTRAS bindings/python_module.cpp)
target_link_libraries(spade_python PRIVATE spade_solver)
target_compile_options(spade_python PRIVATE ${SPADE_WARNINGS})
set_target_properties(spade_python PROPERTIES OUTPUT_NAME _spade LIBRARY_OUTPUT_DIRECTORY ${SPADE_PYTHON_DIR})
# The package's Python half beside the compiled module (copied at build time, so edits are picked up).
add_custom_command(OUTPUT ${SPADE_PYTHON_DIR}/__init__.py
                   COMMAND ${CMAKE_COMMAND} -E copy ${PROJECT_SOURCE_DIR}/python/spade/__init__.py ${SPADE_PYTHON_DIR}/__init__.py
                   DEPENDS ${PROJECT_SOURCE_DIR}/python/spade/__init__.py)
add_custom_target(spade_python_package ALL DEPENDS ${SPADE_PYTHON_DIR}/__init__.py)
add_dependencies(spade_python spade_python_package)

set(SPADE_INSTALL_PYTHONDIR lib/python3/dist-packages CACHE PATH "Where cmake --install puts the Python package spade")
install(TARGETS spade_python LIBRARY DESTINATION ${SPADE_INSTALL_PYTHONDIR}/spade)
install(FILES ${PROJECT_SOURCE_DIR}/python/spade/__init__.py DESTINATION ${SPADE_INSTALL_PYTHONDIR}/spade)

if(BUILD_TESTING)
  # The tests need NumPy, SciPy and pytest in that interpreter; without them the test skips, saying so.
  execute_process(COMMAND ${Python3_EXECUTABLE} -c "import numpy, scipy, pytest"
                  RESULT_VARIABLE spade_python_imports OUTPUT_QUIET ERROR_QUIET)
  if(spade_python_imports EQUAL 0)
    add_test(NAME python_tests
             COMMAND ${Python3_EXECUTABLE} -m pytest -q -p no:cacheprovider ${PROJECT_SOURCE_DIR}/python/tests)
    set_tests_properties(python_tests PROPERTIES
      ENVIRONMENT "PYTHONPATH=${PROJECT_BINARY_DIR}/python;PYTHONDONTWRITEBYTECODE=1;SPADE_DEFAULT_MATRIX_DIR=${SPADE_DEFAULT_MATRIX_DIR}"
      TIMEOUT 600)
  else()
    add_test(NAME python_tests COMMAND ${CMAKE_COMMAND} -E echo
             "SKIP: ${Python3_EXECUTABLE} lacks numpy, scipy or pytest (scripts/install-deps.sh installs them)")
    set_tests_properties(python_tests PROPERTIES SKIP_REGULAR_EXPRESSION "SKIP:")
  endif()
endif()
