// Where tests and benchmarks find the real matrices of ../shared/matrices: the directory named by the
// environment variable SPADE_MATRICES, else the `shared/matrices` folder beside the source tree (compiled
// in as SPADE_DEFAULT_MATRIX_DIR). Tests skip visibly when a file is absent.
#pragma once

#include <cstdlib>
#include <fstream>
#include <string>

namespace spade::testing {

inline std::string matrix_dir() {
  if (const char* env = std::getenv("SPADE_MATRICES"); env != nullptr && *env != '\0') return env;
  return SPADE_DEFAULT_MATRIX_DIR;
}

/// Full path of a matrix file in matrix_dir() (e.g. "mdual_lap.mtx.gz").
inline std::string matrix_path(const std::string& file) { return matrix_dir() + "/" + file; }

inline bool matrix_exists(const std::string& file) { return std::ifstream(matrix_path(file)).good(); }

}  // namespace spade::testing

/// Skips the current test, saying why, when `file` is not in matrix_dir().
#define SPADE_REQUIRE_MATRIX(file)                                                                       \
  do {                                                                                                   \
    if (!::spade::testing::matrix_exists(file))                                                          \
      GTEST_SKIP() << "matrix " << (file) << " not found in " << ::spade::testing::matrix_dir()          \
                   << " (set SPADE_MATRICES to the folder of ../shared/matrices)";                       \
  } while (0)
