// Supernodal LU with static pivoting on the host, for square unsymmetric and symmetric indefinite matrices.
//
// The analysis (analyze_lu) permutes and scales A once, from its values, so that large entries sit on the
// diagonal: M = Pr Dr A Dc, with Pr, Dr, Dc from the maximum-product matching (matching.hpp, Duff and
// Koster 2001). A fill-reducing ordering P is then applied symmetrically, C = P M P^T, and C is analyzed on
// the symmetrized pattern of M + M^T: L and U^T share the SymbolicFactor of that pattern (symbolic.hpp),
// its supernodes, row structure and assembly tree. This is the static pivoting of SuperLU_DIST:
// X. S. Li and J. W. Demmel, "SuperLU_DIST: A scalable distributed-memory sparse direct solver for
// unsymmetric linear systems", ACM Trans. Math. Softw. 29(2), 2003.
//
// The numeric factorization (LuFactor) is left-looking and supernodal, with BLAS-3 updates from the
// descendants (gemm) and parallel over independent subtrees of the assembly tree, as the Cholesky
// (cholesky.hpp). Inside a supernode's diagonal block it pivots by rows (partial pivoting restricted to
// that block, so the structure stays the analysis'); a pivot smaller in magnitude than
// pivot_tolerance * ||M||_1 (sqrt(eps) by default) is replaced by that value with its sign and counted (Li
// and Demmel's tiny-pivot replacement). The factor is then of A plus one entry per replaced pivot
// (LuFactor::perturbations): iterative refinement with the original A (lu_solve_refined) recovers what the
// perturbation lost, first with the factor alone, then with the perturbation's exact low-rank correction
// (LuCorrection), or says that it could not.
//
// Indices are 0-based; all memory is host memory.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "spade/ordering.hpp"
#include "spade/solve.hpp"
#include "spade/sparse_matrix.hpp"
#include "spade/symbolic.hpp"

namespace spade {

struct LuAnalyzeOptions {
  /// Fill-reducing ordering of M: empty means automatic (analyze()'s rule on the pattern of M + M^T: AMD,
  /// and METIS too when AMD's predicted factor is fill- and flop-heavy); amd and metis order M + M^T;
  /// colamd orders M's own columns (fill_reducing_ordering); natural keeps M's numbering.
  std::optional<OrderingMethod> ordering;
  SupernodeOptions supernodes;  ///< relaxation of the shared supernodes, as for the Cholesky
};

/// The result of analyze_lu: immutable, shared by every LuFactor built from it.
///
/// Numbering: M(k, j) = row_scale[i] * A(i, j) * col_scale[j] with i = row_perm[k]; the factored matrix is
/// C = P M P^T, C(k, l) = M(perm[k], perm[l]) with perm = structure->perm. A X = B is solved as
/// C Z = P Pr Dr B, X = Dc P^T Z.
struct LuSymbolic {
  index_t n = 0;
  std::vector<index_t> row_perm;   ///< the matching's row permutation (matching.hpp), size n
  std::vector<double> row_scale;   ///< Dr, indexed by A's row, size n
  std::vector<double> col_scale;   ///< Dc, indexed by A's column, size n
  /// The analysis of the pattern of M + M^T with its diagonal: perm, etree, supernodes, row structure and
  /// panel offsets of L (the same layout holds U^T; LuFactor documents its storage).
  std::shared_ptr<const SymbolicFactor> structure;

  // Where C's entries come from, for the numeric assembly: column j of C has the entries on and below the
  // diagonal lower_ptr[j] .. lower_ptr[j+1]-1 (row lower_index[p] >= j); row i of C has the entries right
  // of the diagonal upper_ptr[i] .. upper_ptr[i+1]-1 (column upper_index[p] > i). Each takes the value
  // A.values()[source[p]] * scale_of[p], the scaling Dr(row) Dc(column) of that entry.
  std::vector<offset_t> lower_ptr, upper_ptr;                ///< size n + 1 each
  std::vector<index_t> lower_index, upper_index;
  std::vector<offset_t> lower_source, upper_source;
  std::vector<double> lower_scale, upper_scale;
  std::vector<offset_t> a_col_ptr;  ///< pattern of the analyzed A: a factorization checks that its matrix
  std::vector<index_t> a_row_ind;   ///< has exactly this pattern

  offset_t nnz_lu = 0;        ///< entries of L and U as stored: 2 nnz(L) - n (unit diagonal of L not stored)
  double flops = 0;           ///< operations of the numeric factorization, 2x the Cholesky count of the
                              ///< structure (an update of L and one of U for each of its multiply-adds)
  double solve_flops = 0;     ///< operations of one solve with L and U: 2 structure->solve_flops
  double matching_seconds = 0;  ///< wall time of the maximum-product matching and scaling
  double ordering_seconds = 0;  ///< of the fill-reducing ordering (structure->ordering_seconds)
  double symbolic_seconds = 0;  ///< of the rest: the symmetrized pattern, its analysis, the assembly maps
};

/// Analyzes the square matrix A for an LU: reads its pattern and its values (the matching chooses Pr, Dr
/// and Dc from the values; a refactorization with other values keeps them). Throws InvalidInput for a
/// non-square A or a NaN/Inf value (naming the entry); StructurallySingular (matching.hpp) when A has an
/// empty row or column or no perfect matching, naming a row or column; NumericalError (not_finite) when no
/// scaling in double balances A; ResourceError when memory runs out or a size overflows.
std::shared_ptr<const LuSymbolic> analyze_lu(const SparseMatrix& A, const LuAnalyzeOptions& options = {});

class LuFactor;

/// Progress of an LU factorization, as FactorProgress (cholesky.hpp) for the Cholesky: called from the
/// factoring threads with (first, last) once supernodes first .. last hold their final L and U panels in
/// factor.l_values() and factor.u_values() and their pivots; ranges never overlap and cover every supernode
/// once; thread-safe, quick, no exceptions; it may read only the reported panels and pivots.
using LuProgress = std::function<void(const LuFactor& factor, index_t first, index_t last)>;

struct LuFactorOptions {
  /// Threads, as FactorOptions::threads of the Cholesky: independent subtrees on this many OpenMP threads,
  /// then a team of up to this many on each large supernode at the top; BLAS at one thread a call.
  /// 0 means automatic, as for the Cholesky: omp_get_max_threads(), no more than the factor's work keeps
  /// busy. Clamped to omp_get_num_procs() - processors_left; threads() reports the count used.
  int threads = 0;
  /// Processors left to the caller's other threads, as FactorOptions::processors_left.
  int processors_left = 0;
  /// Called as supernodes become final (see LuProgress); empty for none. Kept for refactorize().
  LuProgress progress;
  /// A pivot of magnitude below pivot_tolerance * ||M||_1 is replaced by that value (M the permuted and
  /// scaled matrix, whose entries the matching bounds by 1). Small, the replacements are few and each adds
  /// little to A, but the factor's growth is up to 1 / pivot_tolerance per replaced pivot; a larger value
  /// bounds the growth and replaces more pivots, whose change LuCorrection then undoes exactly
  /// (kLuCorrectedPivotTolerance). In (0, 1]; kept for refactorize().
  double pivot_tolerance = 1.4901161193847656e-08;  // sqrt(eps)
};

/// The pivot tolerance at which Solver refactors an LU whose refinement stagnated with perturbed pivots:
/// each replaced pivot then grows the factor by a factor of about 1e2 instead of 1e8 (1 / tolerance), so
/// that solves with the factor keep the digits LuCorrection needs to undo the replacements
/// (docs/benchmarks/lu_correction.md).
constexpr double kLuCorrectedPivotTolerance = 1e-2;

/// A replaced pivot as a change of one entry of A: the factor is of A + sum over perturbations of
/// delta e_row e_col^T (A's numbering, 0-based).
struct PivotPerturbation {
  index_t row = 0, col = 0;
  double delta = 0;
};

/// The numeric LU factor Q C = L U of C (LuSymbolic), with Q the row interchanges inside the diagonal blocks.
///
/// Storage, for supernode s of structure with k = supernode_cols(s), m = supernode_rows(s), its columns
/// f .. f+k-1 and the rows below it rows[k..m-1] (structure->row_indices), all column-major:
///   l_panel(s): m x k, leading dimension m, at structure->panel_offset[s]. The top k x k block holds the
///     diagonal block's factors as LAPACK's getrf leaves them (unit lower L11 below the diagonal, U11 on
///     and above it); below it, L21 (rows rows[k..m-1]).
///   u_panel(s): (m - k) x k, leading dimension m - k: U12^T, so u_panel(s)[r + c (m-k)] = U(f + c, rows[k + r]).
///   pivots(s): k entries; row f + c of the diagonal block was interchanged with row pivots(s)[c] (C's
///     numbering, in f + c .. f + k - 1), in order c = 0 .. k-1, when column f + c was factored. The rows of
///     earlier supernodes' L panels are stored in the order before these interchanges (the solves apply
///     them as the factorization did).
class LuFactor {
 public:
  /// Factorizes A, which must have exactly the pattern `symbolic` was analyzed with, with the analysis'
  /// row permutation and scaling. Throws InvalidInput if A's pattern differs or A has a NaN or Inf value
  /// (naming the entry); NumericalError (not_finite) naming a column, in A's numbering, whose factor
  /// overflowed; ResourceError if memory runs out. A tiny or zero pivot is no error: it is replaced and
  /// counted (perturbed_pivots()).
  LuFactor(std::shared_ptr<const LuSymbolic> symbolic, const SparseMatrix& A, const LuFactorOptions& options = {});

  /// Factorizes new values with the same pattern (and the analysis' row permutation and scaling), reusing
  /// the analysis and this object's memory. Same errors as the constructor; after an error valid() is
  /// false and the solves refuse the factor (InvalidInput) until a refactorization succeeds.
  void refactorize(const SparseMatrix& A);

  bool valid() const noexcept { return valid_; }
  const LuSymbolic& symbolic() const noexcept { return *symbolic_; }
  const std::shared_ptr<const LuSymbolic>& symbolic_ptr() const noexcept { return symbolic_; }
  const SymbolicFactor& structure() const noexcept { return *symbolic_->structure; }

  /// Pivots of the last factorization whose magnitude was below pivot_threshold() and was replaced by it.
  index_t perturbed_pivots() const noexcept { return static_cast<index_t>(perturbations_.size()); }
  /// The replaced pivots of the last factorization, in the order of the pivots (size perturbed_pivots()).
  const std::vector<PivotPerturbation>& perturbations() const noexcept { return perturbations_; }
  /// pivot_tolerance * ||M||_1 of the last factorization.
  double pivot_threshold() const noexcept { return pivot_threshold_; }
  double pivot_tolerance() const noexcept { return pivot_tolerance_; }
  int threads() const noexcept { return threads_; }

  /// Increases with every factorization (construction included); a GPU copy of the values records the
  /// generation it copied, so that it cannot be used once the values have changed.
  std::uint64_t generation() const noexcept { return generation_; }

  /// All L panels, back to back at structure().panel_offset (panel_offset.back() entries), and all U
  /// panels, back to back in supernode order ((m - k) k entries each, as u_panel()).
  const std::vector<double>& l_values() const noexcept { return l_values_; }
  const std::vector<double>& u_values() const noexcept { return u_values_; }

  const double* l_panel(index_t s) const noexcept { return l_values_.data() + structure().panel_offset[s]; }
  const double* u_panel(index_t s) const noexcept { return u_values_.data() + u_offset_[s]; }
  const index_t* pivots(index_t s) const noexcept { return pivots_.data() + structure().supernode_begin[s]; }

 private:
  friend std::vector<index_t> lu_row_order(const LuFactor& F);
  std::vector<index_t> row_order() const;  // lu_row_order without its validity check
  struct Update {
    index_t source;
    index_t first_row;
  };
  void factor_all(const SparseMatrix& A);
  // Supernode s on `team` threads (factor/supernodal_tree.hpp, factor_over_tree).
  void factor_supernode(index_t s, int team, const SparseMatrix& A, std::vector<index_t>& relpos,
                        std::vector<double>& work);
  // The updates of s's descendants into its L and U^T panels: on the calling thread (w: work_size_ entries), or
  // on a team whose threads own blocks of the panels' rows (workspaces in team_work_).
  void gather_updates(index_t s, const std::vector<index_t>& relpos, double* w);
  void gather_updates_on_team(index_t s, int team, const std::vector<index_t>& relpos);

  std::shared_ptr<const LuSymbolic> symbolic_;
  LuProgress progress_;
  int threads_ = 1;
  bool valid_ = false;
  std::uint64_t generation_ = 0;
  double pivot_threshold_ = 0;
  double pivot_tolerance_ = 0;
  std::vector<PivotPerturbation> perturbations_;
  std::vector<double> pivot_delta_;  // size n: what was added to the pivot at each position of Q C
  std::vector<double> l_values_, u_values_;
  std::vector<offset_t> u_offset_;  // size num_supernodes + 1
  std::vector<index_t> pivots_;     // size n
  std::vector<offset_t> update_ptr_;
  std::vector<Update> updates_;
  std::size_t work_size_ = 0;
  std::vector<index_t> subtree_roots_, top_;
  std::vector<double> team_work_;  // the teams' workspaces during a factorization (empty after)
};

/// The rows of F's diagonal blocks after their interchanges: order[p] is C's row (LuSymbolic's numbering) at
/// position p once every supernode's pivots (LuFactor::pivots) are applied in the factorization's order,
/// so that (Q C)(p, :) = C(order[p], :) in Q C = L U. Size n. Throws InvalidInput for an invalid factor.
std::vector<index_t> lu_row_order(const LuFactor& F);

/// Which system a solve with an LU factor solves.
enum class Transpose { no, yes };  ///< A X = B, or A^T X = B

/// Solves A X = B (trans no) or A^T X = B (trans yes) in place with the factor of A: X holds B on entry and
/// the solution on exit, n x nrhs, column-major, leading dimension ldx >= max(1, n), A's numbering (the
/// permutations and scalings are applied inside). Threads: up to F.threads() on the large supernodes' products.
/// Throws InvalidInput for an invalid factor, nrhs < 0, ldx < max(1, n), or a NaN/Inf in B (with its row and
/// column); ResourceError if memory runs out.
void lu_solve_in_place(const LuFactor& F, double* X, index_t nrhs, index_t ldx, Transpose trans = Transpose::no);

/// The exact solve of A despite replaced pivots: the factor F is of A + E with E = U D V^T, one entry
/// delta_i at (row_i, col_i) per replaced pivot (LuFactor::perturbations), U = [e_row_i], V = [e_col_i],
/// D = diag(delta_i), rank k = F.perturbed_pivots(). By the Sherman-Morrison-Woodbury formula,
///   A^{-1} = (A + E)^{-1} + (A + E)^{-1} U K^{-1} V^T (A + E)^{-1},   K = D^{-1} - V^T (A + E)^{-1} U,
/// and A^{-T} the same with the transposes (K^T): a corrected solve is two solves with F and one with the
/// k x k matrix K, LU-factored here (LAPACK getrf) from k solves with F. W. W. Hager, "Updating the
/// inverse of a matrix", SIAM Review 31(2), 1989. Rounding is that of the solves with F, so the correction
/// helps where F's growth is moderate (kLuCorrectedPivotTolerance); iterative refinement (lu_solve_refined)
/// removes what rounding leaves. Memory: k^2 doubles for K, n x min(k, 64) while it is built; host memory.
class LuCorrection {
 public:
  /// Builds K for F's last factorization (k solves with F, in panels of 64 right-hand sides; threads: as
  /// lu_solve_in_place). Throws InvalidInput for an invalid factor; NumericalError (singular), naming
  /// the perturbed column of A, when K is exactly singular (then so is A); NumericalError (not_finite) when
  /// a solve with F overflows; ResourceError when memory runs out.
  explicit LuCorrection(const LuFactor& F);

  /// Whether lu_solve_refined builds the correction for F: F has perturbed pivots, k of them, and K's k^2
  /// entries are no more than the factor's (LuSymbolic::nnz_lu), so that the correction costs at most the
  /// factor's memory again and its k solves at most about sqrt(nnz_lu) solves.
  static bool worthwhile(const LuFactor& F) noexcept;

  index_t rank() const noexcept { return static_cast<index_t>(perturbations_.size()); }
  /// F's generation (LuFactor::generation) that K was built from.
  std::uint64_t generation() const noexcept { return generation_; }
  /// Whether K was built from F at its current generation (solve_in_place accepts F).
  bool built_for(const LuFactor& F) const noexcept { return &F == factor_ && F.generation() == generation_; }

  /// Solves A X = B (trans no) or A^T X = B (trans yes) in place as lu_solve_in_place does, with the
  /// correction applied: X is n x nrhs, column-major, leading dimension ldx >= max(1, n), A's numbering.
  /// F must be the factor this was built from, at the same generation. Throws InvalidInput for another
  /// factor or generation and as lu_solve_in_place; NumericalError (not_finite) when a solve overflows;
  /// ResourceError when memory runs out.
  void solve_in_place(const LuFactor& F, double* X, index_t nrhs, index_t ldx, Transpose trans = Transpose::no) const;

 private:
  const LuFactor* factor_ = nullptr;
  std::uint64_t generation_ = 0;
  std::vector<PivotPerturbation> perturbations_;
  std::vector<double> K_;  // k x k, getrf's factors
  std::vector<int> ipiv_;
};

/// Solves A X = B (trans no) or A^T X = B (trans yes) with iterative refinement in two stages, A being the
/// matrix F factored (A's numbering, n x n). First classical refinement: solve_refined (solve.hpp) with
/// lu_solve_in_place and the residual with the original A (or A^T). When that stagnates above the tolerance
/// with steps left and F has perturbed pivots, classical refinement starts again from B with the corrected
/// solve of `correction` (built here from F when null and LuCorrection::worthwhile; it must be built for F
/// at its current generation), each step taking two solves with F: the same stopping rule (tolerance, a
/// step that fails to halve berr, the better iterate kept), the steps of both stages (the second one's
/// first solve included) counted against options.max_steps, and the better of the two stages' solutions
/// returned. The steps of the second stage say so (RefinementStep::corrected); the result says when
/// refinement stopped above the tolerance
/// (stop == stagnated) or ran out of steps. Each replaced pivot perturbs the factor by a rank-one term, so
/// the correction removes what refinement with F alone cannot (M. Arioli, I. S. Duff, S. Gratton and
/// S. Pralet, "A note on GMRES preconditioned by a perturbed LDL^T decomposition with static pivoting",
/// SIAM J. Sci. Comput. 29(5), 2007, bound the same effect through GMRES's iteration count). B (n x nrhs,
/// leading dimension ldb) is not modified; X (leading dimension ldx) receives the solution; host memory.
/// Throws as solve_refined and LuCorrection, and InvalidInput when A's order differs from F's.
RefinementResult lu_solve_refined(const SparseMatrix& A, const LuFactor& F, const double* B, index_t ldb, double* X,
                                  index_t ldx, index_t nrhs, Transpose trans = Transpose::no,
                                  const RefineOptions& options = {}, const LuCorrection* correction = nullptr);

}  // namespace spade
