// spade::SptrsvPlan: sparse triangular solve T x = b on the GPU, analysed once and solved many times.
//
// For users who solve with the same sparse triangle many times (ILU and Gauss-Seidel preconditioners, the
// sparse parts of spade's own factors) and as the engine for the narrow supernodes at the bottom of the
// elimination tree. The papers followed are summarised in ../shared/papers.md:
//   - level scheduling LEVR / LEVC and self-scheduling SLFR / SLFC, warps mapped to unknowns in level order,
//     level sets by a Kahn topological sort on the GPU: R. Li, "On parallel solution of sparse triangular
//     linear systems in CUDA", 2017;
//   - synchronization-free CSC with in-degree counters, left_sum and a scratchpad for updates inside a
//     thread block: W. Liu, A. Li, J. Hogg, I. Duff, B. Vinter, Euro-Par 2016;
//   - thread-level "writing-first" CSR and its fusion with warp-level rows in 32-row chunks chosen by
//     nonzeros per row: F. Zhang, J. Su, W. Liu et al., "YuenyeungSpTRSV", IEEE TPDS 32(9), 2021.
//
// The matrix. A square n x n triangle in device memory, CSR or CSC, 0-based, 32-bit row/column pointers and
// indices (so at most 2^31 - 1 entries), indices strictly increasing inside each row (CSR) or column (CSC). Lower (entries with
// column <= row) or upper (column >= row); an entry on the wrong side is InvalidInput. The diagonal:
//   - DiagonalKind::non_unit: the diagonal is read from the stored entries; a missing or zero diagonal entry
//     is NumericalError (kind singular) naming the row;
//   - DiagonalKind::unit: the diagonal is 1; stored diagonal entries, if any, are ignored (so a strictly
//     triangular matrix with an implied unit diagonal and a matrix with a stored diagonal both work).
// The plan copies what it needs into its own device arrays: the caller's arrays may be freed or changed
// after the constructor returns (new values with the same pattern go in through update_values).
//
// Right-hand sides. b and x are dense column-major n x nrhs blocks in device memory with leading dimensions
// ldb, ldx >= n. x may alias b exactly (an in-place solve); other overlaps are not allowed.
//
// Streams and errors. The constructor runs the analysis on `stream` and synchronizes it (it reads sizes
// back to the host). solve() only enqueues work on `stream` and never synchronizes; a failure inside a
// kernel (a bounded spin-wait that gave up) is recorded on the device and reported by check(), the one
// synchronizing query, which throws NumericalError (kind no_progress) and restores the plan's scratch so
// that later solves are valid again (how long a wait may last: set_spin_limit). A plan's scratch is shared
// by its solves: use one plan from one stream at a time (or give each stream its own plan). Requires
// compute capability 7.0 or newer (independent thread scheduling): every kernel hands out work through
// atomic tickets in dependency order, publishes with release and reads with acquire ordering
// (cuda::atomic_ref), and spins for a bounded time only.
//
// Thrown: InvalidInput for bad arguments or a malformed matrix (naming the argument or the first bad row /
// column), ResourceError for CUDA errors and sizes beyond 32-bit indices, NumericalError as above.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "spade/sparse_matrix.hpp"

namespace spade {

enum class SparseFormat { csr, csc };
enum class TriangleKind { lower, upper };
enum class DiagonalKind { non_unit, unit };

/// The kernel families, each selectable by name (to_string / sptrsv_algorithm_from_string).
enum class SptrsvAlgorithm {
  automatic,  ///< "auto": the algorithm of smallest predicted time by sptrsv_auto_rule (below), from the
              ///< triangle's level analysis and the device. Where the rule cannot tell its candidates
              ///< apart (SptrsvAutoChoice::trials: rows longer than kSptrsvLongRow entries, as in Cholesky
              ///< factors, where the level statistics mispredicted by 2-3x, docs/benchmarks/sptrsv.md; or
              ///< try_fused: fused against levr on triangles of a few wide levels and many thin ones) the
              ///< analysis builds every candidate on the triangle it validated and analysed once, and the
              ///< plan's first solves time them: the first solves of one right-hand side run each candidate
              ///< twice in turn, the second solve timed with events on its stream (the first may pay what later
              ///< ones do not: module loading, cold caches); once their solves have finished, the fastest
              ///< runs one right-hand side from then on and the losers' memory is freed (until then the
              ///< plan holds every candidate's; passes of several do not time them). Where it is not
              ///< the rule's own pick, the first passes of several right-hand sides then time it against
              ///< that pick (levr's prediction competes instead of a timed solve). Every solve is a
              ///< correct solve by one candidate. SptrsvPlan::algorithm(nrhs) tells which algorithm a
              ///< solve runs once SptrsvPlan::choosing(nrhs) is false
  levr,       ///< "levr": level sets, one launch per level, a warp per row on CSR (Li 2017); rows of at
              ///< most 4 entries several to a warp where no row has more, rows of more than 64 entries split
              ///< into pieces of 64, a warp each (the last piece to finish solves the row, so the order of
              ///< the additions varies in the last bits). The launches are recorded as a CUDA graph at the
              ///< first solve of one right-hand side and at the first of several (that solve pays the
              ///< recording, about 5-7 us per level on an H100) and replayed
  levc,       ///< "levc": level sets, one launch per level, a warp per column on CSC with atomic updates (Li 2017)
  slfr,       ///< "slfr": self-scheduling, a warp per row in level order, waits on ready flags (Li 2017)
  slfc,       ///< "slfc": self-scheduling, a warp per column in level order, in-degree counters (Li 2017)
  syncfree,   ///< "syncfree": a warp per column in index order, in-degree counters, left_sum and a
              ///< shared-memory scratchpad for updates inside the thread block (Liu et al. 2016)
  thread,     ///< "thread": a thread per row on CSR, writing-first (YuenyeungSpTRSV 2021)
  fused,      ///< "fused": 32-row chunks solved at thread level or a warp per row by nonzeros per row
              ///< (YuenyeungSpTRSV 2021)
  fused_level,  ///< "fused_level": fused on the rows renumbered in level order (the level sets of Li 2017),
                ///< so that chunks and tickets follow the levels: for wide dependency fronts (3D grids)
                ///< that index order cannot keep in flight; the analysis holds a second copy of the triangle
  level_block,  ///< "level_block": one thread block solves the level sets (Li 2017) of the rows renumbered
                ///< in level order, a barrier inside the block between levels instead of a launch (Hogg
                ///< 2013's in-kernel synchronization); for narrow levels, where every hand-off between SMs
                ///< costs more than a level's work. Levels of at most 300 rows on average are copied into
                ///< shared memory ahead of their turn (cp.async, a multistage pipeline; a level too large
                ///< for a stage is read from device memory); wider ones are read into registers ahead. In
                ///< the first case, where they remove an eighth of the levels, runs of narrow levels (a
                ///< factor's supernodes, a dense tail) are solved as chain pieces of up to 32 rows and 4
                ///< a level, each one warp's forward substitution (kernels/sptrsv_block.cu). Several
                ///< right-hand sides run one thread block each, side by side on separate SMs, in about the
                ///< time of one. Holds a second copy of the triangle as fused_level does, and a third,
                ///< packed by level, for the copies
  cluster,      ///< "cluster": the level sets (Li 2017) of the rows renumbered in level order, each level split
                ///< over the 16 thread blocks of one thread block cluster per right-hand side (compute
                ///< capability 9.0); solution values go straight into the shared memory of the blocks that
                ///< read them (st.async, counted on their mbarriers), a cluster barrier between levels: for
                ///< levels too wide for one SM. Needs rows that read nothing more than D <= 15 levels back and
                ///< a block's share of the entries of D + 1 consecutive levels to fit its shared memory;
                ///< where they do not (or on an older GPU) the plan runs fused_level, and algorithm() says so
};

/// "auto", "levr", "levc", "slfr", "slfc", "syncfree", "thread", "fused", "fused_level", "level_block",
/// "cluster".
const char* to_string(SptrsvAlgorithm algorithm);
/// Inverse of to_string; throws InvalidInput for an unknown name.
SptrsvAlgorithm sptrsv_algorithm_from_string(const std::string& name);

/// A triangular matrix in device memory (see the file comment for the contract). Not owned.
template <typename T>
struct DeviceTriangle {
  index_t n = 0;                          ///< rows = columns
  std::int32_t nnz = 0;                   ///< stored entries; must equal ptr[n]
  const std::int32_t* ptr = nullptr;      ///< device, n + 1 row (CSR) or column (CSC) pointers, ptr[0] = 0
  const index_t* ind = nullptr;           ///< device, ptr[n] column (CSR) or row (CSC) indices
  const T* values = nullptr;              ///< device, ptr[n] values
  SparseFormat format = SparseFormat::csr;
  TriangleKind triangle = TriangleKind::lower;
  DiagonalKind diagonal = DiagonalKind::non_unit;
};

struct SptrsvOptions {
  SptrsvAlgorithm algorithm = SptrsvAlgorithm::automatic;
  /// fused: a 32-row chunk whose mean number of off-diagonal entries per row exceeds this is solved with
  /// a warp per row, otherwise with a thread per row (YuenyeungSpTRSV's threshold). Set from our H200
  /// runs: 27-point grids (about 13 per row) ran 5x faster at thread level than at warp level, bcsstk16
  /// (about 29 per row) 2x faster at warp level.
  double fusion_threshold = 20.0;
  /// true: the analysis also allocates the scratch of passes of several right-hand sides (one or two
  /// blocks of 8 n values, by the algorithm), so that no solve allocates; false: it does not, a solve of
  /// nrhs > 1 throws InvalidInput, and auto chooses for one right-hand side only.
  bool several_rhs = true;
};

/// Cheap statistics of the analysed triangle (off-diagonal entries only). levels and rows_per_level are 0
/// when the algorithm needed no level analysis, max_rows_per_level when it needed no level sets (auto
/// always builds both: its rule reads them).
struct SptrsvStats {
  index_t n = 0;
  std::int64_t off_diagonal_nnz = 0;
  index_t max_nnz_per_row = 0;
  double nnz_per_row = 0;  ///< off_diagonal_nnz / n
  index_t levels = 0;      ///< length of the longest dependency chain (level sets of Kahn's sort)
  index_t max_rows_per_level = 0;
  double rows_per_level = 0;  ///< n / levels
  /// level_block's lanes per row where the plan built level_block (0 otherwise): the power of two <= 32
  /// that gives 4 entries a lane to the mean over its packed levels of each one's longest row, a level of
  /// r rows counting at most 4096 / r entries; where runs of narrow levels are packed as chain pieces, a
  /// piece counts as a level whose rows hold their entries before the piece (kernels/sptrsv_block.cu).
  int level_block_lanes = 0;
  int auto_candidates = 0;  ///< auto: the candidates its first solves time, the own pick included (0: the rule alone)
  int auto_trials = 0;      ///< auto: the solves timed so far (passes of one right-hand side and of several)
};

/// What auto's rule reads of a triangle: the statistics of its strictly lower part after the level analysis
/// (SptrsvStats' fields of the same names).
struct SptrsvShape {
  index_t n = 0;
  std::int64_t off_diagonal_nnz = 0;
  index_t levels = 0;              ///< level sets (longest dependency chain)
  index_t max_rows_per_level = 0;  ///< the widest level
  index_t max_nnz_per_row = 0;     ///< the longest row (off-diagonal entries)
};

/// The shape an analysis measured (its SptrsvStats' fields of the same names): what auto's rule read of it.
SptrsvShape sptrsv_shape(const SptrsvStats& stats);

/// The device properties and per-step costs of auto's cost model. The costs are those measured on an H100
/// (132 SMs) by bench_sptrsv (docs/benchmarks/sptrsv.md, v23 tables: per-level slopes of the 2D and 3D grid
/// series, 1,000 to 33,000 levels), the throughputs per SM so that they scale with the SM count.
struct SptrsvDeviceModel {
  int sm_count = 132;
  int compute_major = 9;             ///< cluster needs 9 or more
  double fixed_us = 3.0;             ///< one solve's launch and its first wait
  double level_launch_us = 1.05;     ///< levr: the next level's kernel of its replayed graph
  double block_barrier_us = 0.40;    ///< level_block: a barrier inside one thread block
  double cluster_barrier_us = 0.93;  ///< cluster: a cluster-wide barrier
  double cluster_start_us = 15;      ///< cluster: its launch and first levels beyond fixed_us (fitted to
                                     ///< bayer10's 8 levels, docs/benchmarks/sptrsv.md)
  double handoff_us = 0.35;          ///< one value handed between SMs through device memory (bench_sptrsv's
                                     ///< header line measures it on the device at hand)
  double sm_entries_per_us = 760;    ///< entries (value, index, gathered x) one SM consumes per us in levr
  double block_entries_per_us = 1400;   ///< ... in level_block's one block, its levels staged in shared memory
  double cluster_entries_per_us = 2500; ///< ... in one block of a cluster, its solution values pushed to it
  /// The cost per level below comes from bench_sptrsv --evaluate (docs/benchmarks/sptrsv.md: the Cholesky
  /// factors 4elt_lap_L, bcsstk16_L, tomography_L, mdual_lap_L and their transposes).
  double split_level_us = 2.4;  ///< levr where rows are split into pieces (2.2-2.5 us per level measured)
  /// The SM count and compute capability of the current CUDA device, the costs above. Throws ResourceError.
  static SptrsvDeviceModel current();
};

/// A predicted solve time of one right-hand side (microseconds).
struct SptrsvPrediction {
  SptrsvAlgorithm algorithm;
  double us;
};

/// auto's choice for one triangle on one device (sptrsv_auto_rule).
struct SptrsvAutoChoice {
  SptrsvAlgorithm one = SptrsvAlgorithm::levr;        ///< runs one right-hand side
  SptrsvAlgorithm one_fallback = SptrsvAlgorithm::levr;  ///< where `one` is cluster and its layout does
                                                         ///< not fit, or a share of a level takes two passes
  SptrsvAlgorithm several = SptrsvAlgorithm::levr;    ///< runs passes of several right-hand sides
  SptrsvAlgorithm several_fallback = SptrsvAlgorithm::levr;  ///< where `several` is cluster and does not fit
  /// Time fused on one of the first solves; keep it for one right-hand side where it beats levr_us.
  bool try_fused = false;
  double levr_us = 0;
  /// Where rows are longer than kSptrsvLongRow: the candidates the analysis builds and the first solves
  /// time, in this order (at most kSptrsvMaxTrials; `one` first where it is not levr, whose prediction
  /// competes instead: its first solve records its CUDA graph). Empty: the predictions decide.
  std::vector<SptrsvAlgorithm> trials;
  std::vector<SptrsvPrediction> predicted;  ///< every candidate, one right-hand side, fastest first
};

/// auto's rule, a pure host function. Each candidate's time for one right-hand side is predicted as
/// (fixed cost) + (levels) x (its cost per level) + (entries, diagonal included) / (its throughput):
///   levr         fixed + L * level_launch + W / (sm_count * sm_entries)       a kernel per level, whole GPU
///   level_block  fixed + L * block_barrier + W / block_entries                one SM, barriers in the block
///   cluster      fixed + cluster_start + L * cluster_barrier + W / (16 * cluster_entries)   16 SMs (cc 9)
/// and the smallest wins (the per-level costs are the hand-offs of Li 2017's level scheduling and of Hogg
/// 2013's in-kernel synchronization; the throughput term is the work). level_block is never a candidate
/// where a level has more than kSptrsvOneBlockWidestLevel rows, nor where a row has more than
/// kSptrsvOneBlockLongestRow entries unless the candidates are timed (below): a level waits for
/// its longest row, which the prediction does not see. Several right-hand sides: the same predictions times 1.1 (levr), 1.0 (level_block,
/// a block per right-hand side side by side) and 1.2 (cluster), the 8-over-1 ratios of the v23 tables.
/// cluster runs one right-hand side only where a 16th of the widest level takes one pass of its block.
/// fused (YuenyeungSpTRSV) pays a hand-off per dependency instead of a level (fixed + L * handoff +
/// W / (sm_count * sm_entries) at best) but only where the dependencies stay off its critical path, which
/// the level statistics do not tell: where levr wins above, the widest level holds more than
/// kSptrsvSkewedLevels times the mean rows per level (many thin levels) and fused's best case beats levr's
/// prediction, try_fused asks the first solves to time it.
/// Rows longer than kSptrsvLongRow (levr splits them into pieces) with a mean row above kSptrsvSplitMeanRow:
/// levr's cost per level is split_level_us.
/// There the level statistics mispredict the chunked kernels and do not tell fused_level, thread and fused
/// apart (4elt_lap_L ran fastest with fused_level, 4elt_lap_Lt with thread: docs/benchmarks/sptrsv.md), so
/// with at least kSptrsvTrialLevels levels `trials` lists `one` (unless levr), fused_level, thread and
/// fused, the first kSptrsvMaxTrials distinct ones, for the first solves to time (and try_fused is false).
/// Throws InvalidInput for negative sizes.
SptrsvAutoChoice sptrsv_auto_rule(const SptrsvShape& shape, const SptrsvDeviceModel& device);

/// Several right-hand sides over one, the ratio of a pass of 8 to a solve of 1 that auto assumes for each
/// algorithm: levr 1.1, level_block 1.0, cluster 1.2 (v23 tables), thread 2.64, fused 2.39, fused_level
/// 3.26 (geometric means of the evaluation in docs/benchmarks/sptrsv.md), others 2.0.
double sptrsv_several_over_one(SptrsvAlgorithm algorithm);

/// The longest row (off-diagonal entries) that auto still predicts for one thread block (level_block)
/// without timing it.
constexpr index_t kSptrsvOneBlockLongestRow = 512;
/// The widest level (rows) that auto still gives to one thread block (level_block). In the evaluation
/// (docs/benchmarks/sptrsv.md) level_block ran 1.17-1.85 times behind levr on sherman3, rajat01 and gemat12 (widest levels
/// of 938-2,127 rows, which its block's warps take in many passes) and ahead of it on add32 (431 rows).
constexpr index_t kSptrsvOneBlockWidestLevel = 512;
/// The widest level over the mean rows per level from which auto times fused. The reason: in the
/// evaluation (docs/benchmarks/sptrsv.md) fused ran clearly ahead of levr on one triangle with short rows,
/// NotreDame_www, whose levels are skewed far beyond this ratio; on the triangles below it the trial cost
/// time and levr matched fused or beat it.
constexpr double kSptrsvSkewedLevels = 32.0;
/// The longest row (off-diagonal entries) above which auto times candidates on its first solves (levr's piece).
constexpr index_t kSptrsvLongRow = 64;
/// The mean row (off-diagonal entries) above which levr's cost per level is split_level_us where rows are
/// longer than kSptrsvLongRow: the evaluation's factors (means of 28 to 173 entries) paid
/// 2.2-2.5 us per level, adder_dcop_05 (a mean of 2, rows up to 1,309) 1.3 us and NSR8K (5, up to 557) 1.6.
constexpr double kSptrsvSplitMeanRow = 16.0;
/// The fewest levels at which auto times candidates: with fewer, levr's launches cost little and the
/// chunked kernels lose on rows of thousands of entries (c-62 in the evaluation).
constexpr index_t kSptrsvTrialLevels = 32;
/// The most trial candidates the rule lists (SptrsvAutoChoice::trials).
constexpr int kSptrsvMaxTrials = 3;

/// The reusable analysis of one triangle for one algorithm: a move-only owner of device memory.
template <typename T>
class SptrsvPlan {
 public:
  /// Validates `a`, copies it into the layout the algorithm needs (upper triangles are solved as lower
  /// ones in reversed numbering) and builds level sets where the algorithm needs them (auto always), once;
  /// then builds, on that analysis, the state of the algorithm (of each of auto's picks and candidates):
  /// in-degree counts, row chunks, levr's pieces, the rows renumbered in level order (one copy shared by
  /// fused_level, level_block and cluster), the packed levels, cluster's layout, and the scratch of its
  /// solves. One device allocation holds the analysis, one more each state (and one each the level-ordered
  /// copy and the packed levels), taken stream-ordered on `stream` from the current device's memory pool
  /// (cudaMallocAsync: the application's pool settings, such as a release threshold, apply), or by
  /// cudaMalloc on a device without memory pools. The destructor waits for the plan's last solve (an event
  /// recorded by every solve outside a stream capture), not for the device, and gives pool memory back
  /// stream-ordered (cudaFreeAsync; cudaFree, which waits for the device, without pools). auto's analysis
  /// applies its rule to the level statistics and, where the rule asks for trials, builds the candidates its
  /// first solves time (SptrsvAlgorithm::automatic); it times nothing itself. The analysis synchronizes
  /// `stream` at its end (the results, with the level pointers); before that once to check the input where
  /// the matrix is transposed or its level sets come from CSC (the CSR level kernel does nothing on bad input
  /// and need not wait) and once after the level analysis (the level count); after it, the builds once each
  /// where the chunked kernels' work items are counted (thread, fused, fused_level), where levr's pieces are
  /// laid out, and where cluster's layout is measured, and twice where level_block's levels are packed.
  /// Throws as described in the file comment.
  SptrsvPlan(const DeviceTriangle<T>& a, const SptrsvOptions& options = {}, cudaStream_t stream = nullptr);
  ~SptrsvPlan();
  SptrsvPlan(SptrsvPlan&&) noexcept;
  SptrsvPlan& operator=(SptrsvPlan&&) noexcept;
  SptrsvPlan(const SptrsvPlan&) = delete;
  SptrsvPlan& operator=(const SptrsvPlan&) = delete;

  /// Enqueues x := T^{-1} b for nrhs columns (device pointers, column-major, ldb and ldx >= n). The
  /// columns are solved 8 at a time (one self-scheduled launch, or one sweep of level launches, per 8; the
  /// last pass takes the rest). levr replays the graph it recorded at its first solve of that width (the
  /// first solve records it, with that solve's b, x, leading dimensions and count as its arguments). A
  /// solve with others replays a second graph, recorded at the first such solve, whose kernels read them
  /// from device memory (a one-thread kernel stores them there first where they changed; up to 18% slower
  /// than the first graph for several right-hand sides on narrow levels). On a stream the caller is
  /// capturing it launches the levels into the caller's graph instead. A solve allocates no memory and
  /// never synchronizes, so it may be captured in any capture mode (the graph must not outlive the
  /// plan); outside a capture it records the plan's event on `stream`. While auto is choosing (choosing()),
  /// a pass outside a capture may run a trial candidate, timed with events on `stream`, or ask without
  /// waiting whether the timed passes have finished, then keep the fastest and free the losers'
  /// memory stream-ordered on `stream`; inside a capture it runs the current pick. A plan runs one solve at a time:
  /// solves on different streams must be ordered by the caller. Throws InvalidInput for null pointers,
  /// nrhs < 1, a leading dimension < n or nrhs > 1 on a plan built with several_rhs = false;
  /// ResourceError for CUDA errors.
  void solve(const T* b, index_t ldb, T* x, index_t ldx, int nrhs, cudaStream_t stream = nullptr);
  /// One right-hand side.
  void solve(const T* b, T* x, cudaStream_t stream = nullptr) { solve(b, n(), x, n(), 1, stream); }

  /// Synchronizes `stream` and throws NumericalError (kind no_progress, index = the unknown that waited)
  /// if a solve enqueued since the last check gave up waiting; the plan is usable again afterwards.
  void check(cudaStream_t stream = nullptr);

  /// Polls before a spin-wait of this plan's solve kernels gives up, so that check() throws NumericalError
  /// (kind no_progress); 0 (the default) means kernels::kSpinLimit of kernels/sync.cuh, several seconds of
  /// waiting, far beyond any legitimate wait. Tests that provoke a timeout set it small (1 << 14 polls
  /// give up within milliseconds). The limit stays in force across check()'s restoring of the scratch.
  /// Synchronous: returns once the device holds it (a blocking copy); do not call while a solve of this
  /// plan is in flight. Throws InvalidInput for a negative value, ResourceError for a CUDA error.
  void set_spin_limit(long long polls);

  /// Test hook: device pointer to the two work-ticket counters {next ticket, blocks finished} of the
  /// algorithm that runs the next solve of one right-hand side (auto's next candidate to time while it is
  /// choosing; of several too, where it is the same; each algorithm of a plan has its own), zero between
  /// launches. A test that writes 1 to the first one (a plain cudaMemcpy,
  /// no launch in flight) makes the next self-scheduled solve (slfr, slfc, syncfree, thread, fused) hand
  /// out tickets from 1: the first thread block's unknowns are never solved and their dependents wait until
  /// the spin limit, which check() then reports as no_progress, restoring the counters. levr and levc take
  /// no tickets. Not for use outside tests.
  int* device_tickets_for_testing() const;

  /// New values for the same pattern (device, same length and order as the constructor's `values`).
  /// Synchronizes `stream`; throws NumericalError (singular, with the row) for a zero on a non-unit
  /// diagonal.
  void update_values(const T* values, cudaStream_t stream = nullptr);

  index_t n() const;
  /// The algorithm a solve of nrhs right-hand sides runs (never automatic: what auto chose); nrhs > 1
  /// names the algorithm of the passes of several columns (a last pass of one column runs algorithm(1)),
  /// algorithm(1) on a plan built with several_rhs = false (which runs no such passes). While
  /// choosing(nrhs), the pick before the trials: solves may run other candidates.
  SptrsvAlgorithm algorithm(int nrhs = 1) const;
  /// Whether auto is still choosing among candidates by timing the solves of nrhs right-hand sides (one,
  /// or passes of several for nrhs > 1): true from the analysis until the first solves of that width have
  /// timed each candidate and a later solve has found their passes finished; passes of several choose
  /// after one right-hand side has. Always false for named algorithms and where the rule alone decides.
  bool choosing(int nrhs = 1) const;
  const SptrsvStats& stats() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

extern template class SptrsvPlan<double>;
extern template class SptrsvPlan<float>;

}  // namespace spade
