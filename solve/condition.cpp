// The 1-norm condition estimate of include/spade/solve.hpp: ||A||_1 times LAPACK's estimate of
// ||A^{-1}||_1 (dlacn2: Hager's method as refined by Higham, "FORTRAN codes for estimating the one-norm of
// a real or complex matrix", ACM TOMS 1988; the estimator of LAPACK's dpocon), from solves with A.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "../core/out_of_memory.hpp"
#include "../core/parallel_blas.hpp"
#include "spade/error.hpp"
#include "spade/solve.hpp"

extern "C" void dlacn2_(const int* n, double* v, double* x, int* isgn, double* est, int* kase, int* isave);

namespace spade {

double condition_estimate(const SparseMatrix& A, const SolveFunction& solve) {
  return condition_estimate(A, solve, solve);  // A symmetric: A^{-1} and A^{-T} are the same solve
}

double condition_estimate(const SparseMatrix& A, const SolveFunction& solve, const SolveFunction& solve_transposed) {
  if (!A.is_square())
    throw InvalidInput("condition_estimate: A must be square, got " + std::to_string(A.rows()) + " x " +
                       std::to_string(A.cols()));
  return out_of_memory_is_resource_error("condition_estimate", [&] {
    const int n = A.cols();
    if (n == 0) return 0.0;
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
      {
        SerialBlasScope serial_blas;  // dlacn2's level-1 BLAS (the solves below set their own threads)
        dlacn2_(&n, v.data(), x.data(), isgn.data(), &inverse_norm, &kase, isave);
      }
      if (kase == 1) solve(x.data(), 1, n);
      if (kase == 2) solve_transposed(x.data(), 1, n);
    } while (kase != 0);
    return norm * inverse_norm;
  });
}

}  // namespace spade
