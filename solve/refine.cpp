// Iterative refinement with the componentwise backward error of Oettli and Prager (1964); the stopping
// rule follows LAPACK's xPORFS (stop at berr <= tolerance, when berr fails to halve, or after max_steps).
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "../core/messages.hpp"
#include "spade/error.hpp"
#include "refine_loop.hpp"
#include "../core/out_of_memory.hpp"
#include "spade/solve.hpp"

namespace spade {

namespace {

/// The residual r = b - A x (n entries, written to r) and its componentwise backward error.
RefinementStep residual_and_error(const SparseMatrix& A, const double* b, const double* x, double* r) {
  const index_t n = A.rows();
  std::copy(b, b + n, r);
  std::vector<double> scale(n);
  for (index_t i = 0; i < n; ++i) scale[i] = std::abs(b[i]);
  for (index_t j = 0; j < A.cols(); ++j) {
    const double xj = x[j];
    for (offset_t p = A.col_ptr()[j]; p < A.col_ptr()[j + 1]; ++p) {
      const double a = A.values()[p];
      r[A.row_ind()[p]] -= a * xj;
      scale[A.row_ind()[p]] += std::abs(a * xj);
    }
  }
  RefinementStep step;
  for (index_t i = 0; i < n; ++i) {
    const double ri = std::abs(r[i]);
    step.residual_norm = std::max(step.residual_norm, ri);
    if (ri == 0) continue;
    step.berr = std::max(step.berr, scale[i] > 0 ? ri / scale[i] : std::numeric_limits<double>::infinity());
  }
  return step;
}

/// The worst step over the nrhs columns; R (n x nrhs, leading dimension n) receives the residuals.
RefinementStep evaluate(const SparseMatrix& A, const double* B, index_t ldb, const double* X, index_t ldx,
                        index_t nrhs, double* R) {
  RefinementStep worst;
  const offset_t n = A.rows();
  for (index_t r = 0; r < nrhs; ++r) {
    const RefinementStep s = residual_and_error(A, B + static_cast<offset_t>(r) * ldb,
                                                X + static_cast<offset_t>(r) * ldx, R + r * n);
    worst.residual_norm = std::max(worst.residual_norm, s.residual_norm);
    worst.berr = std::max(worst.berr, s.berr);
  }
  return worst;
}

}  // namespace

CorrectionPrecision parse_correction_precision(const std::string& name) {
  if (name == "auto") return CorrectionPrecision::automatic;
  if (name == "fp32") return CorrectionPrecision::fp32;
  if (name == "fp64") return CorrectionPrecision::fp64;
  throw InvalidInput("unknown correction precision '" + name + "'; expected auto, fp32 or fp64");
}

RefinementStep backward_error(const SparseMatrix& A, const double* b, const double* x) {
  return out_of_memory_is_resource_error("backward_error", [&] {
    std::vector<double> r(A.rows());
    return residual_and_error(A, b, x, r.data());
  });
}

namespace {

RefinementResult refine_with(const SparseMatrix& A, const SolveFunction& solve, const double* B, index_t ldb,
                             double* X, index_t ldx, index_t nrhs, const RefineOptions& options) {
  const index_t n = A.rows();
  if (!A.is_square()) throw InvalidInput("solve_refined: A must be square");
  if (nrhs < 0 || ldb < std::max<index_t>(1, n) || ldx < std::max<index_t>(1, n))
    throw InvalidInput("solve_refined: need nrhs >= 0 and leading dimensions >= n");
  for (index_t r = 0; r < nrhs; ++r)
    for (index_t i = 0; i < n; ++i)
      if (!std::isfinite(B[i + static_cast<offset_t>(r) * ldb]))
        throw InvalidInput("solve: right-hand side entry " + entry_name("B", i, r) + " is not finite");
  // D holds the residual B - A X of the latest evaluation, then the correction solved from it.
  std::vector<double> D(static_cast<std::size_t>(n) * nrhs), previous(D.size());
  struct HostOps {
    const SparseMatrix& A;
    const SolveFunction& solve;
    const double* B;
    index_t ldb;
    double* X;
    index_t ldx, nrhs, n;
    std::vector<double>& D;
    std::vector<double>& previous;
    void first_solve() {
      for (index_t r = 0; r < nrhs; ++r)
        std::copy(B + static_cast<offset_t>(r) * ldb, B + static_cast<offset_t>(r) * ldb + n, X + static_cast<offset_t>(r) * ldx);
      solve(X, nrhs, ldx);
    }
    RefinementStep evaluate() { return spade::evaluate(A, B, ldb, X, ldx, nrhs, D.data()); }
    void save() {
      for (index_t r = 0; r < nrhs; ++r)
        std::copy(X + static_cast<offset_t>(r) * ldx, X + static_cast<offset_t>(r) * ldx + n,
                  previous.data() + static_cast<offset_t>(r) * n);
    }
    void correct() {
      solve(D.data(), nrhs, std::max<index_t>(n, 1));
      for (index_t r = 0; r < nrhs; ++r)
        for (index_t i = 0; i < n; ++i) X[i + static_cast<offset_t>(r) * ldx] += D[i + static_cast<offset_t>(r) * n];
    }
    void restore() {
      for (index_t r = 0; r < nrhs; ++r)
        std::copy(previous.data() + static_cast<offset_t>(r) * n, previous.data() + static_cast<offset_t>(r + 1) * n,
                  X + static_cast<offset_t>(r) * ldx);
    }
    bool single() const { return false; }  // the host solves in FP64 only
    void use_fp64() {}
  } ops{A, solve, B, ldb, X, ldx, nrhs, n, D, previous};
  return refine_loop(ops, options);
}

}  // namespace

RefinementResult solve_refined(const SparseMatrix& A, const SolveFunction& solve, const double* B, index_t ldb,
                               double* X, index_t ldx, index_t nrhs, const RefineOptions& options) {
  return out_of_memory_is_resource_error(
      "solve_refined", [&] { return refine_with(A, solve, B, ldb, X, ldx, nrhs, options); });
}

RefinementResult solve_refined(const SparseMatrix& A, const NumericFactor& F, const double* B, index_t ldb, double* X,
                               index_t ldx, index_t nrhs, const RefineOptions& options) {
  const index_t n = F.symbolic().n;
  if (A.rows() != n || A.cols() != n)
    throw InvalidInput("solve_refined: A is " + std::to_string(A.rows()) + " x " + std::to_string(A.cols()) +
                       " but the factor is of order " + std::to_string(n));
  return solve_refined(
      A, [&F](double* Y, index_t k, index_t ld) { solve_in_place(F, Y, k, ld); }, B, ldb, X, ldx, nrhs, options);
}

}  // namespace spade
