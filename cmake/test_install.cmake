# The install-tree test (ctest: install_consumer), run as a script with cmake -P:
#   1. cmake --install BUILD_DIR --prefix WORK_DIR/prefix (a fresh folder each time);
#   2. configure SOURCE_DIR (tests/install_consumer) with only that prefix to find spade in, build it;
#   3. run the consumer programs (C++ and C), and the installed `spade --version`, which must print SPADE_VERSION.
# Any failing step fails the test with its output.
foreach(var BUILD_DIR SOURCE_DIR WORK_DIR GENERATOR SPADE_VERSION)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "test_install.cmake: -D${var}=... is required")
  endif()
endforeach()

function(run_step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "${what} failed (${status}):\n${out}\n${err}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
run_step("cmake --install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
run_step("configuring the consumer" ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR}/build -G ${GENERATOR}
         -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=${prefix} -DSPADE_EXPECTED_VERSION=${SPADE_VERSION})
run_step("building the consumer" ${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run_step("running the consumer" ${WORK_DIR}/build/consumer)
message(STATUS "consumer: ${step_output}")
run_step("running the C consumer" ${WORK_DIR}/build/consumer_c)
message(STATUS "consumer_c: ${step_output}")
run_step("spade --version" ${prefix}/bin/spade --version)
if(NOT step_output MATCHES "${SPADE_VERSION}")
  message(FATAL_ERROR "the installed spade --version printed '${step_output}', not ${SPADE_VERSION}")
endif()
message(STATUS "spade --version: ${step_output}")
