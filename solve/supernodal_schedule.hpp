// The schedule of spade's supernodal GPU solve, built from the symbolic factor alone (no values), and the
// host reference of the solve it drives. Internal header of solve/; the GPU plan (gpu_solve.hpp) uploads
// the schedule and the kernels (kernels/supernodal_solve.cu) execute it.
//
// The solve works on the selectively inverted factor (P. Raghavan, "Efficient parallel sparse triangular
// solution using selective inversion", Parallel Processing Letters 8(1), 1998; the partitioned inverse of
// F. L. Alvarado and R. Schreiber, "Optimal parallel solution of sparse triangular systems", SIAM J. Sci.
// Comput. 14(2), 1993): the panel of supernode s, L_s = [L11; L21] (m x k, column-major, rows as in
// SymbolicFactor), is replaced by M_s = [V; W] with V = L11^{-1} (lower triangular, zeros above the
// diagonal) and W = L21 L11^{-1}. Then with r_s the right-hand side on s's columns after the updates of its
// descendants,
//   forward   y_s = V r_s,  and the rows below receive  r(rows) -= W r_s,  i.e. z = M_s r_s;
//   backward  x_s = V^T y_s - W^T x(rows) = M_s^T [y_s; -x(rows)].
// Each supernode is one dense matrix-vector product (gemm for several right-hand sides) with no
// dependency inside it, so a large supernode splits into independent tiles that many warps stream at
// once, and the only critical path left is the assembly tree.
//
// Dependencies follow the assembly tree: in the forward sweep a supernode needs its children to be done
// (each child needs its own children, so every descendant that updates s is done); in the backward sweep
// its rows below the diagonal block need its parent (whose rows contain them, and which needed its own
// parent), while a tile of its diagonal block reads only y and needs nothing. Counters in tasks: a
// supernode is done when all its tasks are.
#pragma once

#include <cstdint>
#include <vector>

#include "spade/sparse_matrix.hpp"
#include "spade/symbolic.hpp"

namespace spade {

/// One task of the solve, handed to one warp. Two kinds:
///  - group (row0 < 0): supernodes first .. last, a contiguous postorder range that is a union of complete
///    sibling subtrees (every descendant of a member is a member; all subtree roots share one parent). One
///    warp solves them one after another, keeping the right-hand side of the group's columns in shared
///    memory; only updates of rows outside the group go to global memory (atomics).
///  - tile (row0 >= 0): rows row0 .. row0+kTile-1 and columns col0 .. col0+kTile-1 (clipped to the panel)
///    of supernode first (== last), row0 >= col0 (tiles strictly above V's diagonal are zero and skipped).
///    A group's rows are at most its entries (every supernode has a column), so kGroupEntries bounds both.
struct SolveTask {
  index_t first = 0;
  index_t last = 0;
  index_t row0 = -1;
  index_t col0 = 0;
};

struct SupernodalSchedule {
  /// Rows and columns of a tile: one warp holds a tile in registers (32 values a lane) while it waits.
  static constexpr int kTile = 32;
  /// A group holds at most this many panel entries and columns: half a tile's worth of data, so that the
  /// whole group sits in the warp's shared-memory slice and its supernodes follow one another without
  /// a round trip to memory.
  static constexpr offset_t kGroupEntries = 512;
  static constexpr index_t kGroupColumns = 64;
  /// Supernodes at most kSmallInverse wide are inverted by one warp on the GPU (a 32 x 32 tile), those at
  /// most kMidInverse wide by one thread block each (32 x 32 tiles, kernels/supernodal_kernels.hpp
  /// launch_invert_mid), wider ones by cuBLAS's trsm or cuSOLVER's trtri.
  static constexpr index_t kSmallInverse = 32;
  static constexpr index_t kMidInverse = 256;

  /// The tasks in the order the forward sweep hands them out: by decreasing distance to the root (a task's
  /// level: 1 for a root's tiles, one more per supernode below), the highest-level-first rule of Hu ("Parallel
  /// sequencing and assembly line problems", Operations Research 9(6), 1961), which keeps the tasks whose
  /// completion the most work still waits for at the head of the queue; a child's level exceeds its
  /// parent's, so the order is topological. Tiles of one supernode are contiguous.
  std::vector<SolveTask> tasks;
  /// The same tasks in the backward sweep's order: by decreasing height (the longest chain of tasks below,
  /// groups counting one), parents before children.
  std::vector<SolveTask> backward;
  index_t num_groups = 0;  ///< group tasks

  /// Per supernode (num_supernodes entries):
  std::vector<index_t> units;  ///< tasks that finish a tiled supernode (its tiles); 0 inside groups
  std::vector<index_t> need;   ///< forward in-degree in tasks: tiles of tiled children plus groups whose
                               ///< subtree roots are children; 0 inside groups
  /// Supernodes whose diagonal block is inverted by the warp kernel (k <= kSmallInverse), by the block
  /// kernel (k <= kMidInverse) and by cuBLAS or cuSOLVER (the others), each ascending.
  std::vector<index_t> small_inverse;
  std::vector<index_t> mid_inverse;
  std::vector<index_t> large_inverse;

  index_t tiled_supernodes = 0;
  index_t grouped_supernodes = 0;
  index_t height = 0;             ///< longest chain of tiled supernodes (0 when every supernode is grouped)
  index_t critical_columns = 0;   ///< columns along the longest root-to-leaf path (diagonal blocks)
};

/// Whether tile task t (row0 >= 0) waits for its supernode's parent in the backward sweep: only a tile with
/// rows below the diagonal block reads the ancestors' x (kernels/supernodal_solve.cu, backward_tile).
inline bool backward_tile_waits(const SymbolicFactor& S, const SolveTask& t) {
  return t.row0 + SupernodalSchedule::kTile > S.supernode_cols(t.first);
}

/// Builds the schedule from the pattern alone. O(num_supernodes + tiles). Throws ResourceError when the
/// tile count does not fit index_t.
SupernodalSchedule build_schedule(const SymbolicFactor& S);

/// Host reference of the GPU's selective inversion, in place on a factor's values laid out as
/// NumericFactor's (panel_offset, column-major, leading dimension supernode_rows(s)): V = L11^{-1} by LAPACK
/// dtrtri (its strict upper triangle set to zero) and W = L21 L11^{-1} by BLAS dtrsm, for every supernode.
/// Throws NumericalError (singular) if a diagonal entry is zero.
void invert_supernodes_reference(const SymbolicFactor& S, double* values);

/// Host reference of the GPU solve: runs the schedule's tasks one after another, forward and backward in
/// their orders, with the arithmetic of the kernels (tiles of M_s, groups supernode by supernode)
/// on `inverted` (from invert_supernodes_reference). B and X are n x nrhs, column-major, leading
/// dimensions ldb, ldx >= n, host memory, original numbering (the permutation is applied inside); X may
/// equal B. Throws InvalidInput for nrhs < 0 or a leading dimension < max(1, n).
void schedule_solve_reference(const SymbolicFactor& S, const SupernodalSchedule& schedule, const double* inverted,
                              const double* B, index_t ldb, double* X, index_t ldx, index_t nrhs);

}  // namespace spade
