// Shared by the tests whose tolerances scale with the condition number.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "spade/solve.hpp"
#include "spade/sparse_matrix.hpp"

extern "C" void dlacn2_(const int* n, double* v, double* x, int* isgn, double* est, int* kase, int* isave);

namespace spade::testing {

/// kappa_1(A) = ||A||_1 ||A^{-1}||_1, the inverse's norm estimated by LAPACK's dlacn2 (Hager's method as
/// refined by Higham, the estimator of LAPACK's dpocon) from `solve`; A symmetric, so A^{-1} and A^{-T}
/// are the same solve, and kappa_1 = kappa_inf.
inline double condition_estimate(const SparseMatrix& A, const SolveFunction& solve) {
  const int n = A.cols();
  double norm = 0;
  for (index_t j = 0; j < n; ++j) {
    double column = 0;
    for (offset_t k = A.col_ptr()[j]; k < A.col_ptr()[j + 1]; ++k) column += std::abs(A.values()[k]);
    norm = std::max(norm, column);
  }
  std::vector<double> v(n), x(n);
  std::vector<int> isgn(n);
  int kase = 0, isave[3] = {0, 0, 0};
  double inverse_norm = 0;
  do {
    dlacn2_(&n, v.data(), x.data(), isgn.data(), &inverse_norm, &kase, isave);
    if (kase != 0) solve(x.data(), 1, n);
  } while (kase != 0);
  return norm * inverse_norm;
}

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
