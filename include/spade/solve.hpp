// Host solves with a NumericFactor: the supernodal forward (L) and backward (L^T) sweeps, the whole
// solve A X = B with the permutation applied, and iterative refinement with the componentwise backward
// error of Oettli and Prager (1964). These are also the CPU fallback of spade's GPU solve.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "spade/cholesky.hpp"
#include "spade/sparse_matrix.hpp"

namespace spade {

/// Y := L^{-1} Y for the factor's L, in the factor's (permuted) numbering. Y is n x nrhs, column-major,
/// leading dimension ldy >= n, host memory. Throws InvalidInput for nrhs < 0 or ldy < max(1, n).
void forward_solve(const NumericFactor& F, double* Y, index_t nrhs, index_t ldy);

/// Y := L^{-T} Y, same conventions as forward_solve.
void backward_solve(const NumericFactor& F, double* Y, index_t nrhs, index_t ldy);

/// Solves A X = B in place: X holds B on entry and the solution on exit, n x nrhs, column-major, leading
/// dimension ldx >= n, host memory, original numbering (the permutation is applied inside). Threads (here and in
/// the sweeps): the large supernodes' products are split over up to F.threads() threads, from 65,536 entries
/// (core/parallel_blas.hpp); the diagonal blocks are solved on the calling thread.
/// Throws InvalidInput for nrhs < 0 or ldx < max(1, n), or a NaN/Inf in B (with its row and column).
void solve_in_place(const NumericFactor& F, double* X, index_t nrhs, index_t ldx);

/// RefineOptions::corrections.
enum class CorrectionPrecision { automatic, fp32, fp64 };

/// "auto", "fp32" or "fp64"; InvalidInput otherwise.
CorrectionPrecision parse_correction_precision(const std::string& name);

struct RefineOptions {
  int max_steps = 10;    ///< at most this many correction steps after the first solve
  double tolerance = 0;  ///< stop once berr <= tolerance; 0 means 2 * machine epsilon
  /// The precision of the corrections A d = r of refinement on the GPU (the host solves in FP64 only).
  /// With fp32, mixed-precision refinement: the corrections solve with the factor rounded to FP32, half its
  /// bytes (the sweeps still compute in FP64), while the first solve, the residuals, the backward errors and
  /// the updates x += d stay FP64. The rounding perturbs the factor by at most 2^-24 relative per entry, so
  /// such a correction contracts the error while kappa(A) 2^-24 is well below 1 (Buttari, Dongarra, Kurzak,
  /// Luszczek and Tomov, ACM TOMS 34(4), 2008; Carson and Higham, SISC 40(2), 2018); where one fails to
  /// halve berr above the tolerance, the later corrections solve in FP64. automatic takes fp32 where a GPU
  /// sweep is bandwidth-bound, which is where half the bytes saves time: where the factor's bytes over the
  /// GPU's bandwidth exceed the supernodes' hand-offs along the tree's longest path (large factors; on a
  /// small one a sweep is its chain of hand-offs, and an FP32 correction that stalls would cost an FP64 step
  /// more). fp32 is not possible, and fp64 is used, where the FP32 copy would take more than half the GPU's
  /// free memory or an entry of the factor's inverted blocks exceeds FP32's range.
  CorrectionPrecision corrections = CorrectionPrecision::automatic;
};

/// One row of the refinement history: the state after the first solve (step 0) and after each correction.
struct RefinementStep {
  double residual_norm = 0;  ///< max over right-hand sides of ||b - A x||_inf
  double berr = 0;           ///< max over right-hand sides and rows of |b - A x|_i / (|A| |x| + |b|)_i
  /// How this step's correction d of A d = r was solved: false for step 0 and for a solve with the factor,
  /// true for a solve with the factor and the low-rank correction of its perturbed pivots (LuCorrection of
  /// lu.hpp; lu_solve_refined and the Solver's refinement of such an LU take them).
  bool corrected = false;
  /// This step's correction was solved with the factor rounded to FP32 (RefineOptions::corrections).
  bool single = false;
};

struct RefinementResult {
  std::vector<RefinementStep> steps;  ///< steps[0] is the unrefined solution, then one per correction
                                      ///< (with the factor alone first, then any corrected ones)
  RefinementStep solution;            ///< the returned X (the last step, or the one before it when the last
                                      ///< made things worse and was undone)
  bool converged = false;             ///< berr reached the tolerance
  enum class Stop { converged, stagnated, max_steps } stop = Stop::max_steps;
};

/// An in-place solve X := A^{-1} X of nrhs columns with leading dimension ldx (host memory): the solve that
/// refinement corrects with (solve_in_place with a host factor, or any other solve of the same A).
using SolveFunction = std::function<void(double* X, index_t nrhs, index_t ldx)>;

/// Solves A X = B with iterative refinement: x = solve(b); repeat r = b - A x (double), berr = Oettli-Prager
/// backward error; stop when berr <= tolerance, when a step fails to halve berr (stagnation: the previous,
/// better iterate is kept), or after max_steps corrections; else x += solve(r).
/// A is the matrix that was factored (original numbering, both triangles); B and X are n x nrhs,
/// column-major, host memory, with leading dimensions ldb, ldx >= n; B is not modified. `solve` is called
/// on X (leading dimension ldx) and on residual blocks (leading dimension n).
/// Throws InvalidInput for mismatched sizes or a NaN/Inf in B, and whatever `solve` throws.
RefinementResult solve_refined(const SparseMatrix& A, const SolveFunction& solve, const double* B, index_t ldb,
                               double* X, index_t ldx, index_t nrhs, const RefineOptions& options = {});

/// solve_refined with the host solve of F (solve_in_place). Throws InvalidInput as above and when A's order
/// differs from F's.
RefinementResult solve_refined(const SparseMatrix& A, const NumericFactor& F, const double* B, index_t ldb, double* X,
                               index_t ldx, index_t nrhs, const RefineOptions& options = {});

/// kappa_1(A) = ||A||_1 ||A^{-1}||_1 for a symmetric nonsingular A (original numbering), ||A^{-1}||_1
/// estimated by LAPACK's dlacn2 (Hager and Higham; the estimator of LAPACK's dpocon) from a few solves
/// (usually 4 or 5 calls of `solve` with one column, leading dimension n). An estimate: a lower bound,
/// rarely off by more than a factor of 3. The forward error of a solution with componentwise backward
/// error berr is about kappa_1(A) * berr at most. Returns 0 for a 0 x 0 matrix. Throws InvalidInput if A
/// is not square, ResourceError if memory runs out, and whatever `solve` throws.
double condition_estimate(const SparseMatrix& A, const SolveFunction& solve);

/// condition_estimate for any square nonsingular A: dlacn2 asks for solves with A (`solve`) and with A^T
/// (`solve_transposed`), one column each, leading dimension n. Same errors.
double condition_estimate(const SparseMatrix& A, const SolveFunction& solve, const SolveFunction& solve_transposed);

/// Componentwise backward error max_i |b - A x|_i / (|A| |x| + |b|)_i of one solution (Oettli-Prager), and
/// the infinity norm of the residual; rows where both numerator and denominator vanish count as 0.
RefinementStep backward_error(const SparseMatrix& A, const double* b, const double* x);

}  // namespace spade
