// The structure the GPU solve runs on: the factor's assembly tree cut into pieces of `band` consecutive
// levels, each piece merged into one supernode whose diagonal block the plan inverts whole. Internal header
// of solve/.
//
// This is the partitioned inverse of F. L. Alvarado and R. Schreiber ("Optimal parallel solution of sparse
// triangular systems", SIAM J. Sci. Comput. 14(2), 1993) with fill allowed: L = L_1 L_2 ... L_q by pieces,
// and each L_i^{-1} is stored instead of L_i. The selective inversion (supernodal_schedule.hpp) already
// stores every supernode's diagonal block inverted; merging a piece of supernodes makes one dense block of
// their columns (the zeros between them become stored entries, and its inverse and W = L21 L11^{-1} fill
// in), so that a sweep hands off once per piece instead of once per supernode.
//
// Why: on a small factor a sweep is its critical chain of supernodes, each costing a hand-off and a round
// trip to memory (docs/benchmarks/solve.md, "Where the time goes"), while its bytes stream in far less.
// Merging trades bytes for hand-offs. A model ranks the bands, the clock decides. The model is Brent's
// bound on a sweep (R. P. Brent, "The parallel evaluation of general arithmetic expressions", J. ACM 21(2),
// 1974: time <= work / rate + critical path):
//     estimate(band) = pieces on the longest path x hand-off + bytes of the merged factor / bandwidth.
// On a large factor the bytes dominate and the band stays 1 (no merge; choose_partition_band). On a small
// one the Solver builds the plan at the bands of the smallest estimates (partition_trial_bands), times a
// solve on each, and keeps the fastest: the estimate orders the bands well but does not find the best
// one (it was 1.1-1.9x behind the best band on 7 of 20 factors swept in docs/benchmarks/solve.md,
// "The band rule against every band": merged pieces stream at about half the bandwidth it assumes, and a
// piece on the path costs more behind a large one than the one hand-off it is priced at).
#pragma once

#include <memory>
#include <vector>

#include "spade/sparse_matrix.hpp"
#include "spade/symbolic.hpp"
#include "supernodal_schedule.hpp"

namespace spade {

/// The factor's structure and the solve's, with the maps from one to the other.
struct SolveStructure {
  std::shared_ptr<const SymbolicFactor> factor;  ///< the factor's (the layout of its host values)
  /// The solve's: one supernode per piece, columns renumbered so that a piece's are contiguous (children
  /// still before parents), perm composed accordingly, rows ascending in the new numbering; the numeric
  /// assembly arrays (c_ptr, c_rows, c_source, a_col_ptr, a_row_ind) are empty. The same object as
  /// `factor` when band == 1.
  std::shared_ptr<const SymbolicFactor> solve;
  index_t band = 1;              ///< tree levels per piece
  index_t merged_pieces = 0;     ///< supernodes of `solve` made of more than one of the factor's

  // Per supernode s of the factor (num_supernodes entries):
  std::vector<index_t> target;         ///< its supernode in `solve`
  std::vector<index_t> column_offset;  ///< s's first column among target[s]'s columns (0 when unmerged)
  /// Per supernode of `solve`: how many of the factor's it holds.
  std::vector<index_t> parts;
  /// Per entry of factor->row_indices: the row's position in its supernode's target panel
  /// (0 .. supernode_rows(target) - 1; an unmerged supernode's rows keep their places).
  std::vector<index_t> row_position;

  /// Whether the factor's supernode s shares its solve supernode with others.
  bool merged(index_t s) const { return parts[target[s]] > 1; }
};

/// The structure of band 1: `solve` is `factor`, nothing merged.
SolveStructure unpartitioned(std::shared_ptr<const SymbolicFactor> factor);

/// Cuts the assembly tree of `factor` into pieces: a supernode at depth d (1 at a root) heads a piece when
/// it is a root or (d - 1) is a multiple of `band`, and belongs to its parent's piece otherwise. Each piece
/// becomes one supernode of the solve structure. O(stored row indices + n log n). Throws InvalidInput for
/// band < 1 or a factor whose supernodes are not numbered children before parents; ResourceError when the
/// merged panels' entries would overflow 64-bit offsets.
SolveStructure partition_for_solve(std::shared_ptr<const SymbolicFactor> factor, index_t band);

/// Brent's estimate of one sweep of `factor` cut with `band` (seconds): the pieces along the longest path of
/// the tree (a subtree that `schedule`, the factor's own, solves as one group counts one) times
/// handoff_seconds, plus the bytes of the merged panels' stored triangles and rectangles (8 per value) over
/// bytes_per_second.
double partition_estimate(const SymbolicFactor& factor, const SupernodalSchedule& schedule, index_t band,
                          double handoff_seconds, double bytes_per_second);

/// partition_estimate's two terms, seconds: the hand-offs along the longest path, and the bytes over the
/// bandwidth. Their sum is the estimate.
struct SweepTerms {
  double handoffs = 0;
  double bytes = 0;
};
SweepTerms partition_terms(const SymbolicFactor& factor, const SupernodalSchedule& schedule, index_t band,
                           double handoff_seconds, double bytes_per_second);

/// The band of smallest partition_estimate (the smaller band on a tie), trying 1, 2, ... up to the tree's
/// depth and stopping once the bytes alone exceed the best estimate. Pure host function of the pattern and
/// the two device constants. Throws InvalidInput for non-positive constants.
index_t choose_partition_band(const SymbolicFactor& factor, const SupernodalSchedule& schedule,
                              double handoff_seconds, double bytes_per_second);

/// The bands at which the Solver builds and times the partitioned inverse's plan: those of the `count`
/// smallest estimates among the bands choose_partition_band weighs, band 1 left out, the smallest estimate
/// first (so the first is choose_partition_band's choice); empty where that choice is band 1. Pure host
/// function. Throws InvalidInput for non-positive constants or count < 1.
std::vector<index_t> partition_trial_bands(const SymbolicFactor& factor, const SupernodalSchedule& schedule,
                                           double handoff_seconds, double bytes_per_second, int count);

/// The most bands the Solver times (partition_trial_bands' count). Every band of a tree up to 13 deep
/// (bcsstk14's, where the estimate put the best band sixth; docs/benchmarks/solve.md, "The band chosen by
/// timing"); on the deeper trees there (up to 24) the bytes bound of choose_band_by_timing
/// (solve/solver.cpp) skips the wide bands, and the best was among the first three timed. Each band costs
/// one plan built, fed and timed on a thread beside the caller's solves, 5-20 ms on those factors.
constexpr int kPartitionTrials = 12;
/// Solves timed per band (the median is taken), after two untimed ones.
constexpr int kPartitionTrialSolves = 5;

/// The hand-off cost per supernode on a sweep's critical chain that the plan assumes: the middle of what the
/// traced sweeps measured (docs/benchmarks/solve.md).
constexpr double kSolveHandoffSeconds = 2.5e-6;

/// Host reference of the plan's upload: the factor's values (laid out by factor->panel_offset) in the
/// solve structure's layout (solve->panel_offset): unmerged panels copied, merged ones scattered into
/// their piece's dense panel, zeros elsewhere (above each diagonal block included).
void partition_values(const SolveStructure& structure, const double* factor_values, double* solve_values);

}  // namespace spade
