// spade behind Eigen's sparse-solver interface: EigenCholesky (the interface of Eigen::SimplicialLLT) for
// symmetric positive definite matrices, EigenLU (the interface of Eigen::SparseLU) for any square matrix.
//
//   spade::EigenCholesky<Eigen::SparseMatrix<double>> solver;   // reads the lower triangle
//   solver.compute(A);                                           // or analyzePattern(A); factorize(A);
//   if (solver.info() != Eigen::Success) { ... solver.errorMessage() ... }
//   Eigen::VectorXd x = solver.solve(b);                         // b: a vector or a matrix of columns
//
//   spade::EigenLU<Eigen::SparseMatrix<double>> lu(A);           // reads all of A
//   Eigen::VectorXd x = lu.solve(b), y = lu.transpose().solve(b); // A x = b, A^T y = b, both refined
//
// Header only; link spade_solver and Eigen3::Eigen. Thin clients of spade's Solver facade (solver.hpp).
// EigenCholesky: the ordering and analysis (symbolic.hpp), the supernodal Cholesky P A P^T = L L^T on the
// host (cholesky.hpp), and the solve without refinement where SolverOptions::placement puts it (by default
// on the GPU when one is usable, with the GPU plan built beside the factorization; else on the host).
// EigenLU: the supernodal LU with static pivoting on the host (lu.hpp, after X. S. Li and J. W. Demmel,
// "SuperLU_DIST: A scalable distributed-memory sparse direct solver for unsymmetric linear systems", ACM
// Trans. Math. Softw. 29(2), 2003), its solves where SolverOptions::placement puts them (as for
// EigenCholesky), with iterative refinement.
#pragma once

#include <Eigen/Core>
#include <Eigen/SparseCore>
#include <algorithm>
#include <exception>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "spade/cholesky.hpp"
#include "spade/error.hpp"
#include "spade/lu.hpp"
#include "spade/solve.hpp"
#include "spade/solver.hpp"
#include "spade/sparse_matrix.hpp"
#include "spade/symbolic.hpp"

namespace spade {

namespace eigen_detail {

/// The outcome of an Eigen adapter's last analyzePattern(), factorize() or compute(), in Eigen's terms.
class Status {
 public:
  Eigen::ComputationInfo info() const noexcept { return info_; }
  const std::string& message() const noexcept { return message_; }
  std::exception_ptr error() const noexcept { return error_; }

  /// Runs f, mapping spade's exceptions to info(): NumericalError (StructurallySingular among them) to
  /// Eigen::NumericalIssue; InvalidInput, ResourceError and std::bad_alloc to Eigen::InvalidInput. Anything
  /// else propagates.
  template <typename F>
  void guard(F&& f) {
    info_ = Eigen::Success;
    message_.clear();
    error_ = nullptr;
    try {
      f();
    } catch (const NumericalError& e) {
      fail(Eigen::NumericalIssue, e.what());
    } catch (const Error& e) {
      fail(Eigen::InvalidInput, e.what());
    } catch (const std::bad_alloc&) {
      fail(Eigen::InvalidInput, "out of memory");
    }
  }

 private:
  void fail(Eigen::ComputationInfo info, const char* message) {
    info_ = info;
    message_ = message;
    error_ = std::current_exception();
  }

  Eigen::ComputationInfo info_ = Eigen::Success;
  std::string message_;
  std::exception_ptr error_;
};

/// The spade matrix (sorted CSC, 0-based) that A stands for when the triangle(s) UpLo selects are read:
/// Eigen::Lower or Eigen::Upper mirror that triangle across the diagonal (whatever A stores on the other
/// side is ignored); Eigen::Lower | Eigen::Upper takes A as it is. Throws InvalidInput for a non-square A,
/// ResourceError when n does not fit index_t; `who` names the adapter in the messages.
template <int UpLo, typename MatrixType>
SparseMatrix to_spade(const MatrixType& A, const char* who) {
  if (A.rows() != A.cols())
    throw InvalidInput(std::string(who) + ": the matrix must be square, got " + std::to_string(A.rows()) + " x " +
                       std::to_string(A.cols()));
  if (A.rows() > std::numeric_limits<index_t>::max())
    throw ResourceError(std::string(who) + ": n = " + std::to_string(A.rows()) +
                        " does not fit spade's 32-bit indices");
  const index_t n = static_cast<index_t>(A.rows());
  constexpr bool full = UpLo == (Eigen::Lower | Eigen::Upper);
  const auto selected = [](Eigen::Index i, Eigen::Index j) {
    return full || (UpLo == Eigen::Lower ? i >= j : i <= j);
  };
  // Counting sort into CSC: entry (i, j) of the selected triangle lands in column j, and off the
  // diagonal (unless both triangles are given) its mirror (j, i) lands in column i.
  std::vector<offset_t> col_ptr(static_cast<std::size_t>(n) + 1, 0);
  for (Eigen::Index j = 0; j < n; ++j)
    for (typename MatrixType::InnerIterator it(A, j); it; ++it)
      if (selected(it.row(), j)) {
        ++col_ptr[j + 1];
        if (!full && it.row() != j) ++col_ptr[it.row() + 1];
      }
  for (index_t j = 0; j < n; ++j) col_ptr[j + 1] += col_ptr[j];
  std::vector<offset_t> next(col_ptr.begin(), col_ptr.end() - 1);
  std::vector<index_t> row_ind(static_cast<std::size_t>(col_ptr[n]));
  std::vector<double> values(row_ind.size());
  for (Eigen::Index j = 0; j < n; ++j)
    for (typename MatrixType::InnerIterator it(A, j); it; ++it)
      if (selected(it.row(), j)) {
        const offset_t p = next[j]++;
        row_ind[p] = static_cast<index_t>(it.row());
        values[p] = it.value();
        if (!full && it.row() != j) {
          const offset_t q = next[it.row()]++;
          row_ind[q] = static_cast<index_t>(j);
          values[q] = it.value();
        }
      }
  // Columns come out sorted when A's are (mirrored rows arrive in increasing j, ahead of or behind the
  // column's own rows); sort the others (Eigen allows unsorted inner indices).
  std::vector<std::pair<index_t, double>> column;
  for (index_t j = 0; j < n; ++j) {
    const auto begin = row_ind.begin() + col_ptr[j], end = row_ind.begin() + col_ptr[j + 1];
    if (std::is_sorted(begin, end)) continue;
    column.clear();
    for (offset_t p = col_ptr[j]; p < col_ptr[j + 1]; ++p) column.emplace_back(row_ind[p], values[p]);
    std::sort(column.begin(), column.end());
    for (offset_t p = col_ptr[j]; p < col_ptr[j + 1]; ++p) std::tie(row_ind[p], values[p]) = column[p - col_ptr[j]];
  }
  return SparseMatrix(n, n, std::move(col_ptr), std::move(row_ind), std::move(values));
}

/// Throws InvalidInput (naming `who`) unless a right-hand side of rows x cols fits a matrix of order n.
inline void check_rhs(Eigen::Index rows, Eigen::Index cols, index_t n, const char* who) {
  if (rows != n)
    throw InvalidInput(std::string(who) + ": the right-hand side has " + std::to_string(rows) +
                       " rows, the matrix " + std::to_string(n));
  if (cols > std::numeric_limits<index_t>::max())
    throw InvalidInput(std::string(who) + ": too many right-hand sides");
}

}  // namespace eigen_detail

/// Sparse Cholesky solver with Eigen's interface, for symmetric positive definite matrices.
///
/// MatrixType: `Eigen::SparseMatrix<double, Eigen::ColMajor, StorageIndex>` (compressed or not; any
/// signed StorageIndex, but n must fit spade's 32-bit index_t).
///
/// UpLo says which triangle of the given matrix is read, as in Eigen::SimplicialLLT:
///   Eigen::Lower (default): only the entries on and below the diagonal are read and mirrored above it; any
///                           entries stored above the diagonal are ignored. Use it when only the lower
///                           triangle is stored, and also for full storage.
///   Eigen::Upper:           the same with the upper triangle.
///   Eigen::Lower | Eigen::Upper: both triangles are stored and read as they are; spade checks that pattern
///                           and values are symmetric (InvalidInput otherwise).
///
/// Errors follow Eigen's convention: analyzePattern, factorize and compute never throw for bad data or
/// numerical failure; they set info() and keep the message (errorMessage()) and the spade exception (error()):
///   Eigen::InvalidInput   - spade::InvalidInput (non-square, non-symmetric, NaN/Inf, a factorize() whose
///                           pattern differs from the analyzed one) or spade::ResourceError (out of memory,
///                           sizes that overflow the index types)
///   Eigen::NumericalIssue - spade::NumericalError (not positive definite or numerically singular; the
///                           message and NumericalError::index() name the column, 0-based, in A's numbering)
/// Misuse throws spade::InvalidInput: factorize() before a successful analyzePattern(), solve() without a
/// successful factorization, or a right-hand side whose row count is not rows(); solve() also throws
/// InvalidInput for a NaN/Inf in b, and ResourceError or NumericalError (no_progress) when the GPU fails.
template <typename MatrixType, int UpLo = Eigen::Lower>
class EigenCholesky {
  static_assert(std::is_same<typename MatrixType::Scalar, double>::value, "spade::EigenCholesky needs double values");
  static_assert(!MatrixType::IsRowMajor, "spade::EigenCholesky needs a column-major (CSC) Eigen::SparseMatrix");
  static_assert(UpLo == Eigen::Lower || UpLo == Eigen::Upper || UpLo == (Eigen::Lower | Eigen::Upper),
                "UpLo must be Eigen::Lower, Eigen::Upper or Eigen::Lower | Eigen::Upper");

 public:
  using Scalar = double;
  using StorageIndex = typename MatrixType::StorageIndex;
  enum { UpLoMode = UpLo };

  /// A solver with spade's default options (automatic ordering, OpenMP's default thread count, solves on
  /// the GPU when one is usable).
  EigenCholesky() = default;

  /// A solver with the given options (ordering, supernode relaxation, threads, placement); they apply from
  /// the next analyzePattern().
  explicit EigenCholesky(const SolverOptions& options) : options_(options) {}

  /// Same as EigenCholesky() followed by compute(A).
  explicit EigenCholesky(const MatrixType& A) { compute(A); }

  /// Orders and analyzes the pattern of A (of the triangle(s) UpLo selects; values are not read). Discards
  /// any earlier analysis and factorization. Sets info().
  void analyzePattern(const MatrixType& A) {
    solver_ = std::make_unique<Solver>(options_);
    analyzed_ = factored_ = false;
    status_.guard([&] {
      const SparseMatrix S = eigen_detail::to_spade<UpLo>(A, "EigenCholesky");
      solver_->analyze(S);
      analyzed_ = true;
    });
  }

  /// Factorizes A, which must have the pattern given to analyzePattern() (values may change: calling
  /// factorize() again refactorizes, reusing the analysis, the factor's memory and the GPU plan). Sets
  /// info(); after a failure the previous factorization is gone too. Throws InvalidInput if there is no
  /// successful analysis.
  void factorize(const MatrixType& A) {
    if (!analyzed_)
      throw InvalidInput("EigenCholesky::factorize: call analyzePattern() (or compute()) first, successfully");
    factored_ = false;
    status_.guard([&] {
      const SparseMatrix S = eigen_detail::to_spade<UpLo>(A, "EigenCholesky");
      solver_->factorize(S);
      factored_ = true;
    });
  }

  /// analyzePattern(A) then, if it succeeded, factorize(A).
  EigenCholesky& compute(const MatrixType& A) {
    analyzePattern(A);
    if (status_.info() == Eigen::Success) factorize(A);
    return *this;
  }

  /// X = A^{-1} B for a dense B with rows() rows and any number of columns (B is not modified). Returns a
  /// column-major dense matrix with B's column count (a VectorXd for a VectorXd). Throws InvalidInput without
  /// a successful factorization, for a row count other than rows(), or for a NaN/Inf in B.
  template <typename Rhs>
  Eigen::Matrix<double, Eigen::Dynamic, Rhs::ColsAtCompileTime> solve(const Eigen::MatrixBase<Rhs>& B) const {
    if (!factored_) throw InvalidInput("EigenCholesky::solve: no successful factorization (see info())");
    const index_t n = solver_->symbolic().n;
    eigen_detail::check_rhs(B.rows(), B.cols(), n, "EigenCholesky::solve");
    Eigen::Matrix<double, Eigen::Dynamic, Rhs::ColsAtCompileTime> X = B;
    solver_->solve(X.data(), static_cast<index_t>(X.cols()), std::max<index_t>(1, n));
    return X;
  }

  /// Eigen::Success, Eigen::InvalidInput or Eigen::NumericalIssue for the last analyzePattern(),
  /// factorize() or compute() (Eigen::Success before any of them).
  Eigen::ComputationInfo info() const noexcept { return status_.info(); }

  /// The order n of the analyzed matrix (0 before a successful analyzePattern()).
  Eigen::Index rows() const noexcept { return analyzed_ ? solver_->symbolic().n : 0; }
  Eigen::Index cols() const noexcept { return rows(); }

  /// The symbolic factor of the last successful analyzePattern() (ordering, supernodes, predicted nnz(L)
  /// and flops), or null.
  std::shared_ptr<const SymbolicFactor> symbolic() const noexcept {
    return analyzed_ ? solver_->symbolic_ptr() : nullptr;
  }

  /// The numeric factor of the last successful factorize(), or null.
  const NumericFactor* numeric() const noexcept { return factored_ ? &solver_->factor() : nullptr; }

  /// The facade's report (placement and why, the GPU plan, phase times); empty before analyzePattern().
  const Report* report() const noexcept { return solver_ ? &solver_->report() : nullptr; }

  /// The message of the error behind info(), empty after success.
  const std::string& errorMessage() const noexcept { return status_.message(); }

  /// The spade exception behind info() (rethrow it to read NumericalError::kind() and index()), or null.
  std::exception_ptr error() const noexcept { return status_.error(); }

 private:
  SolverOptions options_;
  std::unique_ptr<Solver> solver_;
  bool analyzed_ = false;
  bool factored_ = false;
  eigen_detail::Status status_;
};

/// Sparse LU solver with the interface of Eigen::SparseLU, for square matrices: unsymmetric, symmetric
/// indefinite, or with zeros on the diagonal. spade's supernodal LU with static pivoting (lu.hpp, after Li
/// and Demmel 2003): a maximum-product matching permutes and scales A so that large entries sit on the
/// diagonal, a fill-reducing ordering is applied symmetrically, and the factorization pivots only inside
/// supernodes' diagonal blocks, replacing tiny pivots (counted); every solve then refines iteratively
/// against A, which recovers what a replacement lost or says that it could not.
///
/// MatrixType: `Eigen::SparseMatrix<double, Eigen::ColMajor, StorageIndex>` (compressed or not, inner
/// indices sorted or not; any signed StorageIndex, but n must fit spade's 32-bit index_t). Indices are
/// 0-based. All of A is read (both triangles), never modified; the factor, a copy of A (the Solver's, for
/// the refinement of A X = B) and A^T (this adapter's, for that of A^T X = B) live in host memory, and the
/// factor on the GPU too when the solves run there (SolverOptions::placement; report()->gpu says where).
///
/// Where it differs from Eigen::SparseLU:
///   - analyzePattern(A) reads A's values as well as its pattern (the matching chooses the row permutation
///     and the scaling from them); factorize() with other values on that pattern keeps them, so a
///     refactorization whose values differ much from the analyzed ones may perturb more pivots. Call
///     compute() (or analyzePattern() again) to choose them anew.
///   - A structurally singular A (no perfect matching: an empty row or column, or k columns with entries
///     in only k - 1 rows) is found by analyzePattern() already: info() is Eigen::NumericalIssue there.
///   - A numerically singular or nearly singular A is no failure of factorize(): its tiny pivots are
///     replaced (report()->perturbed_pivots) and info() is Eigen::Success. Whether a solution is good
///     shows in lastRefinement() after each solve (converged, berr).
///   - The transposed solve is transpose().solve(B), as in Eigen 3.4's SparseLU; no adjoint() (the values
///     are real), determinant or access to L, U and the permutations (they are LuFactor's, numeric()).
///
/// Errors follow Eigen's convention as for EigenCholesky: analyzePattern, factorize and compute never
/// throw for bad data or numerical failure; they set info() and keep errorMessage() and error():
///   Eigen::InvalidInput   - spade::InvalidInput (non-square, NaN/Inf, a factorize() whose pattern differs
///                           from the analyzed one) or spade::ResourceError (out of memory, sizes that
///                           overflow the index types)
///   Eigen::NumericalIssue - spade::StructurallySingular (naming a row or column, 0-based) or
///                           spade::NumericalError (not_finite: no scaling in double balances A) from
///                           analyzePattern(); spade::NumericalError (not_finite: the factor overflowed,
///                           naming a column in A's numbering) from factorize()
/// Misuse throws spade::InvalidInput: factorize() before a successful analyzePattern(), solve() without a
/// successful factorization, a right-hand side whose row count is not rows(), and a NaN/Inf in it. With
/// placement gpu, a GPU that cannot take the factor is a failure of factorize() (Eigen::InvalidInput, as
/// other spade::ResourceErrors). solve() throws spade::NumericalError (singular) when the correction of the
/// replaced pivots (spade::LuCorrection, built where refinement needs it) finds A exactly singular.
template <typename MatrixType>
class EigenLU {
  static_assert(std::is_same<typename MatrixType::Scalar, double>::value, "spade::EigenLU needs double values");
  static_assert(!MatrixType::IsRowMajor, "spade::EigenLU needs a column-major (CSC) Eigen::SparseMatrix");

 public:
  using Scalar = double;
  using StorageIndex = typename MatrixType::StorageIndex;

  /// A solver with spade's default options (automatic ordering, OpenMP's default thread count, refinement
  /// up to 10 steps to a backward error of 2 eps).
  EigenLU() : EigenLU(SolverOptions{}) {}

  /// A solver with the given options: ordering and supernode relaxation (options.analyze), threads, and
  /// the refinement of every solve (options.refine; max_steps = 0 solves once and still reports berr).
  /// They apply from the next analyzePattern(). options.factorization is set to lu; options.placement says
  /// where the solves run (automatic: the GPU when one is usable).
  explicit EigenLU(const SolverOptions& options) : options_(options) { options_.factorization = Factorization::lu; }

  /// Same as EigenLU() followed by compute(A).
  explicit EigenLU(const MatrixType& A) : EigenLU() { compute(A); }

  /// The transposed system's view of a factorized solver (transpose()): solve(B) gives A^{-T} B.
  class Transposed {
   public:
    /// X = A^{-T} B, refined against A^T; otherwise as EigenLU::solve().
    template <typename Rhs>
    Eigen::Matrix<double, Eigen::Dynamic, Rhs::ColsAtCompileTime> solve(const Eigen::MatrixBase<Rhs>& B) const {
      return lu_.solve_system(B, Transpose::yes);
    }

   private:
    friend class EigenLU;
    explicit Transposed(const EigenLU& lu) : lu_(lu) {}
    const EigenLU& lu_;
  };

  /// Analyzes A: the matching and scaling (from A's values), the fill-reducing ordering and the symbolic
  /// factorization of the symmetrized pattern. Discards any earlier analysis and factorization. Sets info().
  void analyzePattern(const MatrixType& A) {
    solver_ = std::make_unique<Solver>(options_);
    analyzed_ = factored_ = false;
    a_transposed_.reset();
    refinement_.reset();
    status_.guard([&] {
      solver_->analyze(eigen_detail::to_spade<Eigen::Lower | Eigen::Upper>(A, "EigenLU"));
      analyzed_ = true;
    });
  }

  /// Factorizes A, which must have the pattern given to analyzePattern() (values may change: calling
  /// factorize() again refactorizes, reusing the analysis and the factor's memory). Sets info(); after a
  /// failure the previous factorization is gone too. Throws InvalidInput if there is no successful analysis.
  void factorize(const MatrixType& A) {
    if (!analyzed_) throw InvalidInput("EigenLU::factorize: call analyzePattern() (or compute()) first, successfully");
    factored_ = false;
    a_transposed_.reset();
    refinement_.reset();
    status_.guard([&] {
      const SparseMatrix S = eigen_detail::to_spade<Eigen::Lower | Eigen::Upper>(A, "EigenLU");
      solver_->factorize(S);
      a_transposed_ = S.transpose();
      factored_ = true;
    });
  }

  /// analyzePattern(A) then, if it succeeded, factorize(A).
  EigenLU& compute(const MatrixType& A) {
    analyzePattern(A);
    if (status_.info() == Eigen::Success) factorize(A);
    return *this;
  }

  /// X = A^{-1} B for a dense B with rows() rows and any number of columns (B is not modified), with
  /// iterative refinement against A (options.refine); lastRefinement() holds its history. Returns a
  /// column-major dense matrix with B's column count (a VectorXd for a VectorXd). A refinement that stops
  /// above its tolerance is no error: lastRefinement() says so. Throws InvalidInput without a successful
  /// factorization, for a row count other than rows(), or for a NaN/Inf in B.
  template <typename Rhs>
  Eigen::Matrix<double, Eigen::Dynamic, Rhs::ColsAtCompileTime> solve(const Eigen::MatrixBase<Rhs>& B) const {
    return solve_system(B, Transpose::no);
  }

  /// The transposed system: transpose().solve(B) is A^{-T} B, as solve() otherwise. Valid while this solver
  /// lives; it reads the factorization current when solve() is called.
  Transposed transpose() const noexcept { return Transposed(*this); }

  /// Eigen::Success, Eigen::InvalidInput or Eigen::NumericalIssue for the last analyzePattern(),
  /// factorize() or compute() (Eigen::Success before any of them).
  Eigen::ComputationInfo info() const noexcept { return status_.info(); }

  /// The order n of the analyzed matrix (0 before a successful analyzePattern()).
  Eigen::Index rows() const noexcept { return analyzed_ ? solver_->symbolic().n : 0; }
  Eigen::Index cols() const noexcept { return rows(); }

  /// The analysis of the symmetrized pattern shared by L and U^T (ordering, supernodes), or null before a
  /// successful analyzePattern().
  std::shared_ptr<const SymbolicFactor> symbolic() const noexcept {
    return analyzed_ ? solver_->symbolic_ptr() : nullptr;
  }

  /// The LU factor of the last successful factorize() (its LuSymbolic holds the matching's permutation and
  /// scaling), or null.
  const LuFactor* numeric() const noexcept { return factored_ ? &solver_->lu_factor() : nullptr; }

  /// The facade's report, empty before analyzePattern(): phase times ("matching", "order", "symbolic",
  /// "numeric", "solve", "refine"), the threads, and perturbed_pivots, the tiny pivots the last
  /// factorize() replaced.
  const Report* report() const noexcept { return solver_ ? &solver_->report() : nullptr; }

  /// The refinement of the last solve() or transpose().solve() since the last successful factorize():
  /// steps[0] is the unrefined solution, solution.berr the componentwise backward error of the returned
  /// one, converged whether it reached options.refine's tolerance, stop why it ended. Empty otherwise.
  const std::optional<RefinementResult>& lastRefinement() const noexcept { return refinement_; }

  /// The message of the error behind info(), empty after success.
  const std::string& errorMessage() const noexcept { return status_.message(); }

  /// The spade exception behind info() (rethrow it to read NumericalError::kind() and index(), or
  /// StructurallySingular::side()), or null.
  std::exception_ptr error() const noexcept { return status_.error(); }

 private:
  /// A X = B or A^T X = B with refinement, recording it in refinement_. The solver's state changes under a
  /// const solve (its report, the refinement record), as for Eigen's solvers: one thread at a time.
  template <typename Rhs>
  Eigen::Matrix<double, Eigen::Dynamic, Rhs::ColsAtCompileTime> solve_system(const Eigen::MatrixBase<Rhs>& B,
                                                                             Transpose trans) const {
    const char* who = trans == Transpose::no ? "EigenLU::solve" : "EigenLU::transpose().solve";
    if (!factored_) throw InvalidInput(std::string(who) + ": no successful factorization (see info())");
    const index_t n = solver_->symbolic().n, ld = std::max<index_t>(1, n);
    eigen_detail::check_rhs(B.rows(), B.cols(), n, who);
    const Eigen::Matrix<double, Eigen::Dynamic, Rhs::ColsAtCompileTime> rhs = B;
    Eigen::Matrix<double, Eigen::Dynamic, Rhs::ColsAtCompileTime> X(B.rows(), B.cols());
    const index_t nrhs = static_cast<index_t>(B.cols());
    refinement_.reset();
    if (trans == Transpose::no) {
      refinement_ = solver_->solve_refined(rhs.data(), ld, X.data(), ld, nrhs);
    } else {
      Solver& solver = *solver_;
      const SolveFunction solve_transposed = [&solver](double* Y, index_t k, index_t ldy) {
        solver.solve_transposed(Y, k, ldy);
      };
      refinement_ =
          solve_refined(*a_transposed_, solve_transposed, rhs.data(), ld, X.data(), ld, nrhs, options_.refine);
    }
    return X;
  }

  SolverOptions options_;
  std::unique_ptr<Solver> solver_;
  std::optional<SparseMatrix> a_transposed_;  // A^T of the last successful factorize(), for the residuals of A^T X = B
  bool analyzed_ = false;
  bool factored_ = false;
  mutable std::optional<RefinementResult> refinement_;
  eigen_detail::Status status_;
};

}  // namespace spade
