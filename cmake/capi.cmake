# The C interface (include/spade/spade.h, bindings/c_api.cpp): a thin client of the Solver facade, and its
# test written in C (tests/test_capi.c, compiled as C99).
add_library(spade_c STATIC bindings/c_api.cpp)
target_link_libraries(spade_c PUBLIC spade_solver)
target_compile_options(spade_c PRIVATE ${SPADE_WARNINGS})
set_target_properties(spade_c PROPERTIES EXPORT_NAME c)

if(BUILD_TESTING)
  add_executable(test_capi tests/test_capi.c)
  set_target_properties(test_capi PROPERTIES C_STANDARD 99 C_STANDARD_REQUIRED ON C_EXTENSIONS OFF
                        LINKER_LANGUAGE CXX)  # spade's libraries are C++: the C++ driver links them
  target_compile_options(test_capi PRIVATE -Wall -Wextra -pedantic)
  find_package(Threads REQUIRED)
  target_link_libraries(test_capi PRIVATE spade_c CUDA::cudart m Threads::Threads)
  add_test(NAME test_capi COMMAND test_capi)
endif()
