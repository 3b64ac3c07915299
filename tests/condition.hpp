// Shared by the tests whose tolerances scale with the condition number (spade::condition_estimate).
#pragma once

#include <string>
#include <vector>

#include "spade/solve.hpp"

namespace spade::testing {

/// The SPD matrices of ../shared/matrices (its README's table).
inline const std::vector<const char*>& spd_matrices() {
  static const std::vector<const char*> files = {
      "494_bus.mtx.gz",  "662_bus.mtx.gz",  "LF10.mtx.gz",     "LFAT5.mtx.gz",    "Trefethen_500.mtx.gz",
      "bcsstk01.mtx.gz", "bcsstk02.mtx.gz", "bcsstk04.mtx.gz", "bcsstk13.mtx.gz", "bcsstk14.mtx.gz",
      "bcsstk16.mtx.gz", "gr_30_30.mtx.gz", "lund_a.mtx.gz",   "mesh1e1.mtx.gz",  "nos1.mtx.gz",
      "nos5.mtx.gz",     "tomography.mtx.gz", "4elt_lap.mtx.gz", "mdual_lap.mtx.gz"};
  return files;
}

/// A test name from a matrix file name ("bcsstk16.mtx.gz" -> "bcsstk16").
inline std::string matrix_test_name(const std::string& file) { return file.substr(0, file.find('.')); }

}  // namespace spade::testing
