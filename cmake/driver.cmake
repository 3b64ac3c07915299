# The spade command-line program (drivers/spade_main.cpp, drivers/report.{hpp,cpp}) and the Eigen adapter
# (include/spade/eigen.hpp, header only), with their tests.
if(SPADE_BUILD_CLI)
add_executable(spade drivers/spade_main.cpp drivers/report.cpp)
target_link_libraries(spade PRIVATE spade_solver CLI11::CLI11 nlohmann_json::nlohmann_json)
target_compile_options(spade PRIVATE ${SPADE_WARNINGS})
endif()

if(BUILD_TESTING AND SPADE_BUILD_CLI)
# Runs the built program on small generated files; SPADE_BINARY is its path.
add_executable(test_cli tests/test_cli.cpp)
target_link_libraries(test_cli PRIVATE GTest::gtest_main nlohmann_json::nlohmann_json ZLIB::ZLIB CUDA::cudart)
target_include_directories(test_cli PRIVATE ${CMAKE_SOURCE_DIR}/include ${PROJECT_BINARY_DIR}/include)
target_compile_definitions(test_cli PRIVATE SPADE_BINARY="$<TARGET_FILE:spade>")
target_compile_options(test_cli PRIVATE ${SPADE_WARNINGS})
add_dependencies(test_cli spade)
gtest_discover_tests(test_cli)
endif()

if(BUILD_TESTING)
add_executable(test_eigen tests/test_eigen.cpp)
target_link_libraries(test_eigen PRIVATE spade_solver Eigen3::Eigen GTest::gtest_main CUDA::cudart)
target_compile_definitions(test_eigen PRIVATE SPADE_DEFAULT_MATRIX_DIR="${SPADE_DEFAULT_MATRIX_DIR}")
target_compile_options(test_eigen PRIVATE ${SPADE_WARNINGS})
gtest_discover_tests(test_eigen)
endif()
