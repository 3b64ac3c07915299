// Supernodal Cholesky factorization P A P^T = L L^T on the host (left-looking, dense blocks through
// LAPACK/BLAS: potrf on the diagonal block, trsm below it, syrk/gemm for the updates from descendants, as
// in Ng and Peyton 1993 and CHOLMOD's supernodal method), parallel over independent subtrees of the
// assembly tree, then with a team of threads on each large supernode at the top. Every BLAS call runs at one
// thread; no process-wide OpenMP or BLAS setting changes (factor/supernodal_tree.hpp, core/parallel_blas.hpp).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "spade/sparse_matrix.hpp"
#include "spade/symbolic.hpp"

namespace spade {

class NumericFactor;

/// Progress of a factorization: called with the factor being computed and (first, last) once supernodes
/// first .. last (inclusive, a contiguous range of the postordered supernodes, 0-based) hold their final
/// values in factor.values(). During one successful factorization the ranges never overlap and together
/// cover every supernode exactly once; a range is reported after each independent subtree and after each
/// supernode at the top of the tree, so a consumer (the GPU solve plan uploading panels) can start on a
/// range while the rest is still being factored. It is called from the factoring threads, several at once:
/// it must be thread-safe, quick, and must not throw (an exception it throws fails the factorization as
/// that supernode's error would). It may read only the reported panels.
using FactorProgress = std::function<void(const NumericFactor& factor, index_t first, index_t last)>;

struct FactorOptions {
  /// Threads for the factorization and the host solves of the factor: independent subtrees run on this many
  /// OpenMP threads; then the supernodes at the top of the tree run one after another, each on a team of up to
  /// this many threads (no more than one per 4e6 of its k m^2). 0 means automatic: omp_get_max_threads()
  /// (OMP_NUM_THREADS), but no more than the factor's work keeps busy (one thread per 4e6 of the sum of k m^2
  /// over the supernodes, factor/supernodal_tree.hpp; a small matrix factors faster on fewer threads). Either is
  /// clamped to omp_get_num_procs() - processors_left; threads() reports the count used. BLAS runs at one
  /// thread a call, and the calling thread's OpenMP count is as it was after.
  int threads = 0;
  /// Processors left to the caller's other threads: the threads are clamped to omp_get_num_procs() minus
  /// this many (at least one). The Solver leaves one to the thread that feeds the GPU solve plan beside
  /// the factorization, which otherwise waits for a processor each time a range of supernodes arrives.
  int processors_left = 0;
  /// Called as supernodes become final (see FactorProgress); empty for none. Kept for refactorize().
  FactorProgress progress;
};

/// The numeric factor: for each supernode s of the shared SymbolicFactor, a dense column-major panel of
/// supernode_rows(s) x supernode_cols(s) entries (leading dimension supernode_rows(s)) at
/// values()[panel_offset[s]]: the lower triangle of the diagonal block L11 (its strict upper triangle holds
/// zeros and is not referenced) on top of the block L21 below. Host memory.
class NumericFactor {
 public:
  /// Factorizes A, which must have exactly the pattern `symbolic` was analyzed with. Reads the lower
  /// triangle of A and checks that the upper triangle mirrors it.
  /// Throws InvalidInput if A's pattern differs from the analyzed one, A is not symmetric, or A has a NaN or
  /// Inf value (with its row and column); NumericalError (kind not_positive_definite) naming the first
  /// column, in A's original numbering, whose pivot is not positive, or (kind singular) whose pivot lost
  /// all significant digits (L_jj^2 <= eps * a_jj); ResourceError if memory runs out.
  NumericFactor(std::shared_ptr<const SymbolicFactor> symbolic, const SparseMatrix& A,
                const FactorOptions& options = {});

  /// Factorizes new values with the same pattern, reusing the symbolic analysis and this object's memory.
  /// Same errors as the constructor; after an error valid() is false and the solves refuse the factor
  /// (InvalidInput) until a refactorization succeeds.
  void refactorize(const SparseMatrix& A);

  /// False after a failed refactorization.
  bool valid() const noexcept { return valid_; }

  /// Counts the factorizations of this object (1 after the constructor, incremented at the start of every
  /// refactorize(), failed ones included). A copy of the values made elsewhere (the GPU solve plan's)
  /// records the generation it copied, so that it cannot be used once the values have changed.
  std::uint64_t generation() const noexcept { return generation_; }

  const SymbolicFactor& symbolic() const noexcept { return *symbolic_; }
  const std::shared_ptr<const SymbolicFactor>& symbolic_ptr() const noexcept { return symbolic_; }
  const std::vector<double>& values() const noexcept { return values_; }
  const double* panel(index_t s) const noexcept { return values_.data() + symbolic_->panel_offset[s]; }
  int threads() const noexcept { return threads_; }

 private:
  // For each supernode t, the descendants d whose rows reach t's columns: d, and the position in d's row
  // list of its first row inside t (left-looking update lists, built once per factor by
  // factor/supernodal_tree.hpp).
  struct Update {
    index_t source;
    index_t first_row;
  };
  void factor_all(const SparseMatrix& A);  // refactorize() without the bookkeeping of valid_
  // Supernode s on `team` threads (factor/supernodal_tree.hpp, factor_over_tree).
  void factor_supernode(index_t s, int team, const SparseMatrix& A, std::vector<index_t>& relpos,
                        std::vector<double>& work);
  // The updates of s's descendants into its panel: on the calling thread (w: work_size_ entries), or on a team
  // whose threads own blocks of the panel's rows (workspaces in team_work_).
  void gather_updates(index_t s, const std::vector<index_t>& relpos, double* w);
  void gather_updates_on_team(index_t s, int team, const std::vector<index_t>& relpos);

  std::shared_ptr<const SymbolicFactor> symbolic_;
  int threads_ = 1;
  FactorProgress progress_;
  bool valid_ = false;
  std::uint64_t generation_ = 0;
  std::vector<double> values_;
  std::vector<offset_t> update_ptr_;
  std::vector<Update> updates_;
  std::size_t work_size_ = 0;           // largest update block (entries)
  std::vector<index_t> subtree_roots_;  // independent subtrees, largest first
  std::vector<index_t> top_;            // supernodes above them, in order
  std::vector<double> team_work_;       // the teams' workspaces during a factorization (empty after)
};

}  // namespace spade
