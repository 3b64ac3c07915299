// Iterative refinement with an LU factor (include/spade/lu.hpp): classical refinement first (solve_refined of
// solve.hpp), then, where perturbed pivots keep it above its tolerance, GMRES-IR: each outer step computes
// the residual r = b - A x in double and solves the correction equation A d = r by restarted GMRES with the
// factor as right preconditioner (A M^{-1} u = r, d = M^{-1} u, M = the perturbed L U). M^{-1} A differs from
// the identity by a matrix of rank at most the number of perturbed pivots (plus rounding), so GMRES converges
// in about that many iterations where one solve with M does not. M. Arioli, I. S. Duff, S. Gratton and
// S. Pralet, "A note on GMRES preconditioned by a perturbed LDL^T decomposition with static pivoting",
// SIAM J. Sci. Comput. 29(5), 2007; E. Carson and N. J. Higham, "Accelerating the solution of linear systems
// by iterative refinement in three precisions", SIAM J. Sci. Comput. 40(2), 2018 (GMRES-IR, here with every
// precision double).
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "../core/blas.hpp"
#include "../core/out_of_memory.hpp"
#include "refine_loop.hpp"
#include "spade/error.hpp"
#include "spade/lu.hpp"

namespace spade {
namespace {

double norm2(const double* x, index_t n) {
  double scale = 0;
  for (index_t i = 0; i < n; ++i) scale = std::max(scale, std::abs(x[i]));
  if (scale == 0) return 0;
  double sum = 0;
  for (index_t i = 0; i < n; ++i) sum += (x[i] / scale) * (x[i] / scale);
  return scale * std::sqrt(sum);
}

/// Restarted flexible GMRES (FGMRES, Saad 1993) with right preconditioning on A d = r (one column, length n):
/// d receives the correction, started from 0. The preconditioned vectors z_j = M^{-1} v_j are kept and
/// d = Z y is formed from them: the computed M^{-1} of a factor with large growth is far from linear in
/// rounding, so forming M^{-1} (V y) afresh, as plain right-preconditioned GMRES does, loses the accuracy
/// the Arnoldi relation promised. Stops when ||r - A d||_2 <= tolerance ||r||_2 (the recurrence's
/// estimate; each restart recomputes the true residual), when a restart cycle fails to halve the true
/// residual, or after max_iterations iterations. Orthogonalization by classical Gram-Schmidt applied twice
/// (BLAS dgemv), the Hessenberg matrix reduced by Givens rotations. `precondition` applies M^{-1} in place
/// to one column. Returns the iterations taken.
template <class Precondition>
int gmres(const SparseMatrix& A, const Precondition& precondition, const double* r, double* d, int restart,
          double tolerance, int max_iterations) {
  const index_t n = A.rows();
  const int ni = static_cast<int>(n), m = restart, one_i = 1;
  std::fill(d, d + n, 0.0);
  const double r_norm = norm2(r, n);
  if (r_norm == 0) return 0;
  const double target = tolerance * r_norm;
  std::vector<double> V(static_cast<std::size_t>(n) * (m + 1)), Z(static_cast<std::size_t>(n) * m);
  std::vector<double> H(static_cast<std::size_t>(m + 1) * m);
  std::vector<double> cs(m), sn(m), g(m + 1), h(m + 1), w(n);
  const double one = 1.0, zero = 0.0, minus_one = -1.0;
  int iterations = 0;
  std::vector<double> residual(r, r + n);  // r - A d, d = 0 at the start
  double beta = r_norm;
  while (beta > target && iterations < max_iterations) {
    for (index_t i = 0; i < n; ++i) V[i] = residual[i] / beta;
    std::fill(g.begin(), g.end(), 0.0);
    g[0] = beta;
    int j = 0;
    for (; j < m && iterations < max_iterations;) {
      double* v_next = V.data() + static_cast<std::size_t>(n) * (j + 1);
      double* z = Z.data() + static_cast<std::size_t>(n) * j;
      std::copy(V.begin() + static_cast<std::ptrdiff_t>(n) * j, V.begin() + static_cast<std::ptrdiff_t>(n) * (j + 1), z);
      precondition(z);
      A.multiply(z, w.data());
      // h = V_j^T w, w -= V_j h, twice (CGS2): orthogonal to working accuracy.
      const int cols = j + 1;
      double* hj = H.data() + static_cast<std::size_t>(m + 1) * j;
      std::fill(hj, hj + m + 1, 0.0);
      for (int pass = 0; pass < 2; ++pass) {
        dgemv_("T", &ni, &cols, &one, V.data(), &ni, w.data(), &one_i, &zero, h.data(), &one_i);
        dgemv_("N", &ni, &cols, &minus_one, V.data(), &ni, h.data(), &one_i, &one, w.data(), &one_i);
        for (int i = 0; i < cols; ++i) hj[i] += h[i];
      }
      const double h_next = norm2(w.data(), n);
      hj[j + 1] = h_next;
      if (h_next > 0)
        for (index_t i = 0; i < n; ++i) v_next[i] = w[i] / h_next;
      for (int i = 0; i < j; ++i) {  // the earlier rotations on the new column
        const double a = hj[i], b = hj[i + 1];
        hj[i] = cs[i] * a + sn[i] * b;
        hj[i + 1] = -sn[i] * a + cs[i] * b;
      }
      const double rho = std::hypot(hj[j], hj[j + 1]);
      cs[j] = rho > 0 ? hj[j] / rho : 1.0;
      sn[j] = rho > 0 ? hj[j + 1] / rho : 0.0;
      hj[j] = rho;
      hj[j + 1] = 0;
      g[j + 1] = -sn[j] * g[j];
      g[j] = cs[j] * g[j];
      ++j;
      ++iterations;
      // A zero subdiagonal (h_next == 0) is the lucky breakdown: the Krylov space holds the solution.
      if (std::abs(g[j]) <= target || h_next == 0 || rho == 0) break;
    }
    // y = R^{-1} g (R the rotated Hessenberg matrix, upper triangular j x j), d += Z_j y. A zero
    // diagonal of R (rho == 0: A M^{-1} singular on the Krylov space) ends the cycle before it.
    int k = j;
    while (k > 0 && H[static_cast<std::size_t>(m + 1) * (k - 1) + (k - 1)] == 0) --k;
    if (k == 0) break;
    const int ldh = m + 1;
    dtrsv_("U", "N", "N", &k, H.data(), &ldh, g.data(), &one_i);
    dgemv_("N", &ni, &k, &one, Z.data(), &ni, g.data(), &one_i, &one, d, &one_i);
    if (k < j) break;
    A.multiply(d, w.data());
    for (index_t i = 0; i < n; ++i) residual[i] = r[i] - w[i];
    const double before = beta;
    beta = norm2(residual.data(), n);
    // The recurrence's estimate can fall far below the true residual, whose floor is set by the rounding
    // in A M^{-1} (large where the perturbed factor has large growth): a cycle that fails to halve the true
    // residual has reached that floor, and more cycles would not help.
    if (beta > before / 2) break;
  }
  return iterations;
}

}  // namespace

RefinementResult lu_solve_refined(const SparseMatrix& A, const LuFactor& F, const double* B, index_t ldb, double* X,
                                  index_t ldx, index_t nrhs, Transpose trans, const RefineOptions& options) {
  const index_t n = F.symbolic().n;
  if (A.rows() != n || A.cols() != n)
    throw InvalidInput("solve_refined: A is " + std::to_string(A.rows()) + " x " + std::to_string(A.cols()) +
                       " but the factor is of order " + std::to_string(n));
  return out_of_memory_is_resource_error("solve_refined", [&] {
    const SolveFunction solve = [&F, trans](double* Y, index_t k, index_t ld) { lu_solve_in_place(F, Y, k, ld, trans); };
    const SparseMatrix At = trans == Transpose::yes ? A.transpose() : SparseMatrix();
    const SparseMatrix& M = trans == Transpose::yes ? At : A;  // the matrix of the system solved
    RefinementResult result = solve_refined(M, solve, B, ldb, X, ldx, nrhs, options);
    const int used = static_cast<int>(result.steps.size()) - 1;
    if (result.converged || F.perturbed_pivots() == 0 || used >= options.max_steps) return result;

    // GMRES-IR from the classical stage's best iterate, with the steps it left. Each column whose backward
    // error is above the tolerance gets its own GMRES solve; the others keep their solution.
    std::vector<double> R(static_cast<std::size_t>(n) * nrhs), previous(R.size()), berr(nrhs), d(n);
    struct GmresOps {
      const SparseMatrix& M;
      const LuFactor& F;
      Transpose trans;
      const double* B;
      index_t ldb;
      double* X;
      index_t ldx, nrhs, n;
      double tolerance;
      std::vector<double>&R, &previous, &berr, &d;
      std::vector<int>& inner;  // GMRES iterations of each correction, in order
      void first_solve() {}
      RefinementStep evaluate() {
        RefinementStep worst;
        for (index_t c = 0; c < nrhs; ++c) {
          const double* b = B + static_cast<offset_t>(c) * ldb;
          const double* x = X + static_cast<offset_t>(c) * ldx;
          double* r = R.data() + static_cast<offset_t>(c) * n;
          const RefinementStep s = backward_error(M, b, x);
          M.multiply(x, r);
          for (index_t i = 0; i < n; ++i) r[i] = b[i] - r[i];
          berr[c] = s.berr;
          worst.residual_norm = std::max(worst.residual_norm, s.residual_norm);
          worst.berr = std::max(worst.berr, s.berr);
        }
        return worst;
      }
      void save() {
        for (index_t c = 0; c < nrhs; ++c)
          std::copy(X + static_cast<offset_t>(c) * ldx, X + static_cast<offset_t>(c) * ldx + n,
                    previous.begin() + static_cast<std::ptrdiff_t>(c) * n);
      }
      void correct() {
        int iterations = 0;
        const auto precondition = [this](double* z) { lu_solve_in_place(F, z, 1, std::max<index_t>(n, 1), trans); };
        for (index_t c = 0; c < nrhs; ++c) {
          if (berr[c] <= tolerance) continue;
          iterations += gmres(M, precondition, R.data() + static_cast<offset_t>(c) * n, d.data(), kLuGmresRestart,
                         kLuGmresTolerance, kLuGmresMaxIterations);
          double* x = X + static_cast<offset_t>(c) * ldx;
          for (index_t i = 0; i < n; ++i) x[i] += d[i];
        }
        inner.push_back(iterations);
      }
      void restore() {
        for (index_t c = 0; c < nrhs; ++c)
          std::copy(previous.begin() + static_cast<std::ptrdiff_t>(c) * n,
                    previous.begin() + static_cast<std::ptrdiff_t>(c + 1) * n, X + static_cast<offset_t>(c) * ldx);
      }
    };
    // A column whose classical iterate has a residual larger than b itself (the perturbed factor's solve
    // blew up) starts GMRES-IR from x = 0: a correction that has to cancel a huge x loses every digit.
    for (index_t c = 0; c < nrhs; ++c) {
      const double* b = B + static_cast<offset_t>(c) * ldb;
      double* x = X + static_cast<offset_t>(c) * ldx;
      double b_norm = 0;
      for (index_t i = 0; i < n; ++i) b_norm = std::max(b_norm, std::abs(b[i]));
      if (!(backward_error(M, b, x).residual_norm <= b_norm)) std::fill(x, x + n, 0.0);
    }
    RefineOptions rest = options;
    rest.max_steps = options.max_steps - used;
    const double tolerance = options.tolerance > 0 ? options.tolerance : 2 * std::numeric_limits<double>::epsilon();
    std::vector<int> inner;
    GmresOps ops{M, F, trans, B, ldb, X, ldx, nrhs, n, tolerance, R, previous, berr, d, inner};
    const RefinementResult stage = refine_loop(ops, rest);
    for (std::size_t k = 1; k < stage.steps.size(); ++k) {
      RefinementStep step = stage.steps[k];
      step.gmres = true;
      step.inner_iterations = inner[k - 1];
      result.steps.push_back(step);
    }
    result.solution = stage.solution;
    result.converged = stage.converged;
    result.stop = stage.stop;
    return result;
  });
}

}  // namespace spade
