// spade::Solver: the one door to spade's phases for every interface (the CLI, the Eigen adapter, and later
// the C API and the Python module). It owns the phases and their concurrency:
//
//   analyze(A)     ordering and symbolic analysis (symbolic.hpp); meanwhile a second thread brings up the
//                  GPU (its CUDA context), so that the plan can be built at once.
//   factorize(A)   the host supernodal Cholesky (cholesky.hpp) and, beside it on its own thread and CUDA
//                  streams, the GPU solve plan: built from the symbolic factor alone, then fed each range
//                  of supernodes as the factorization finishes it (copied up and selectively inverted on
//                  the GPU at once). Calling it again refactorizes: the plan is reused and only new values
//                  stream. Returns when the factor is ready where the solves run.
//   solve(X)       A X = B in place, on the GPU (supernodal forward and backward sweeps over the assembly
//                  tree, solve/supernodal_schedule.hpp) or on the host (solve.hpp).
//   solve_refined  iterative refinement with the original A; on the GPU the residual, the backward error
//                  and the iterates stay on the device (one pass over A per step, kernels/residual.cu).
//
// Placement (SolverOptions::placement): `automatic` solves on the GPU when one is usable and the factor
// fits in its memory, else on the host, and report().placement_reason says why; `gpu` insists (a missing
// GPU or too little memory is a ResourceError); `cpu` never touches CUDA. A GPU failure during a
// factorization (out of memory, a failed upload) is an error under `gpu` and a fallback to the host under
// `automatic`; a GPU failure during a solve is always an error, never a wrong answer.
//
// Factorization (SolverOptions::factorization): `cholesky` (the default) needs a symmetric positive definite
// A; `lu` takes any square A through the supernodal LU with static pivoting (lu.hpp), whose analysis reads
// A's values as well (the matching); `automatic` analyzes for Cholesky when A's pattern is symmetric and for
// the LU otherwise, and at factorize() switches to the LU, saying why in report().factorization_reason, when
// A's values are not symmetric or the Cholesky finds A not positive definite. An LU factor solves on the
// GPU too, with the same placement rules: its plan is built beside the factorization and fed both
// triangles' panels as the factorization finishes them; its row interchanges become index maps once it
// returns (GpuSolvePlan::upload_lu and finish_lu in solve/gpu_solve.hpp). Where an LU's perturbed pivots
// stall refinement, the correction of its replaced pivots (LuCorrection) recovers what refinement with the
// factor alone cannot, on the GPU as on the host (GpuLuCorrection in solve/gpu_solve.hpp).
//
// Threads: options.threads is used by the factorization (OpenMP over subtrees, teams on the large supernodes at
// the top, BLAS at one thread a call: no process-wide OpenMP or BLAS setting changes) and the host solve; the
// plan's threads (one per plan: the per-supernode one and the partitioned inverse's) call
// neither OpenMP nor BLAS. A Solver is used from one thread at a time
// (its own plan thread aside). Library code never prints.
//
// Errors (error.hpp): InvalidInput for misuse (a phase out of order, wrong shapes, NaN/Inf in host
// right-hand sides, a matrix whose pattern differs from the analyzed one), ResourceError for memory and
// CUDA failures, NumericalError from the factorization (not positive definite at a column) or the GPU
// (a spin-wait that gave up). After a failed factorize() the solver refuses to solve until a factorize()
// succeeds.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "spade/cholesky.hpp"
#include "spade/lu.hpp"
#include "spade/solve.hpp"
#include "spade/sparse_matrix.hpp"
#include "spade/symbolic.hpp"

namespace spade {

/// Where the solves run.
enum class Placement { automatic, gpu, cpu };

/// Where a caller's right-hand sides and solutions live.
enum class Memory { host, device };

/// "auto", "gpu" or "cpu".
std::string to_string(Placement placement);
/// The placement named "auto", "gpu" or "cpu"; throws InvalidInput for another name.
Placement parse_placement(const std::string& name);

/// Which factorization the solver uses (see the file comment).
enum class Factorization { automatic, cholesky, lu };

/// "auto", "cholesky" or "lu".
std::string to_string(Factorization factorization);
/// The factorization named "auto", "cholesky" or "lu"; throws InvalidInput for another name.
Factorization parse_factorization(const std::string& name);

struct SolverOptions {
  AnalyzeOptions analyze;                      ///< ordering and supernode relaxation (of the LU's too)
  Factorization factorization = Factorization::cholesky;  ///< see the file comment
  /// Factorization and host solve; 0 = automatic (FactorOptions::threads); at most omp_get_num_procs(), and
  /// one fewer while the GPU solve plan is fed beside a factorization (FactorOptions::processors_left).
  int threads = 0;
  Placement placement = Placement::automatic;  ///< see the file comment
  RefineOptions refine;                        ///< for solve_refined
  /// Bytes of device memory the GPU solve may take; 0: the GPU's free memory. A plan that needs more is
  /// not built: `automatic` solves on the host (report().placement_reason says why), `gpu` throws
  /// ResourceError. Set before analyze(); it leaves room for other work on the GPU, and tests the fallback.
  std::size_t device_memory_limit = 0;
  /// The GPU solve of a Cholesky factor also builds the partitioned inverse (solve/partitioned_inverse.hpp:
  /// tree levels merged into dense pieces whose inverses are stored), as a second plan, on a thread of its
  /// own: its candidate bands are ranked by a cost model beside the factorization; once the per-supernode
  /// plan holds the factor, the plan is built and fed at each of up to twelve of them and timed, and the
  /// fastest is kept (once per analysis; GpuPlanReport::partition_trials lists them). Each sweep of it hands
  /// off once per piece, so on a small factor its solves run faster; its pieces' inversions take longer than
  /// the supernodes', so nothing waits for them: solves use the per-supernode plan until the partitioned one
  /// holds the current factorization's values (SolveTimes::partitioned says which one ran; the two agree to
  /// rounding, both backward stable), and wait_for_partitioned_inverse() waits for it. Where the cost model
  /// keeps one level per piece (large factors: the merged bytes would cost more than the hand-offs save) no
  /// second plan is built. The LU's plan ignores it.
  bool partitioned_inverse = true;
};

/// A timed phase: "order", "symbolic", "numeric", "solve" or "refine" (the latest of each), wall seconds,
/// and GFlop/s where the phase has a flop count (0 otherwise).
struct PhaseTime {
  std::string name;
  double seconds = 0;
  double gflops_per_second = 0;
};

/// One band at which the partitioned inverse's plan was built and timed (the measured choice of the band).
struct PartitionTrial {
  index_t band = 0;
  double seconds = 0;  ///< forward + backward sweep of one right-hand side, median of 5 (CUDA events)
};

/// What the GPU solve plan is and what building and feeding it cost.
struct GpuPlanReport {
  std::string device;              ///< the GPU in one line
  std::size_t device_bytes = 0;    ///< device memory of the plan (factor, pattern, workspace, inversion)
  std::size_t factor_bytes = 0;    ///< of which the factor's values
  int max_width = 0;               ///< right-hand sides per pass
  index_t groups = 0;              ///< warp tasks that solve whole small subtrees
  index_t grouped_supernodes = 0;  ///< supernodes inside them
  index_t tiles = 0;               ///< 32 x 32 tile tasks of the larger supernodes
  index_t tiled_supernodes = 0;
  index_t tree_height = 0;         ///< longest chain of tiled supernodes (hand-offs per sweep, plus one group)
  index_t critical_columns = 0;    ///< diagonal-block columns along the longest path of the assembly tree
  /// Partitioned inverse: tree levels merged into one supernode of the solve (1: none), and the merged
  /// supernodes it made. Until the partitioned inverse is ready (a solve used it, or
  /// wait_for_partitioned_inverse() returned) the cost model's first choice; then the fastest band timed
  /// (solve/partitioned_inverse.hpp: the model ranks the bands, the clock decides).
  index_t partition_band = 1;
  index_t merged_pieces = 0;
  /// The bands timed, in the order timed (empty before the partitioned inverse is ready, and where none was
  /// built).
  std::vector<PartitionTrial> partition_trials;
  /// Seconds after the factorization returned when the partitioned inverse held its values (known once a
  /// solve used it or wait_for_partitioned_inverse() returned; 0 before, or when there is none).
  double partitioned_seconds = 0;
  /// Why a partitioned inverse that was chosen (partition_band > 1) is not used: its plan did not fit the
  /// device memory or failed (the per-supernode plan solves instead); empty otherwise.
  std::string partitioned_problem;
  index_t small_inverses = 0;      ///< diagonal blocks inverted by the warp kernel (at most 32 wide)
  index_t mid_inverses = 0;        ///< by the block kernel, one thread block each (33 to 256 wide)
  index_t large_inverses = 0;      ///< by cuBLAS trsm or cuSOLVER trtri (wider)
  double plan_seconds = 0;         ///< building the plan, beside the factorization (0 when reused)
  double upload_seconds = 0;       ///< first value upload to the last inversion
  double visible_seconds = 0;      ///< what the caller waited for after the host factorization returned
  bool pinned = false;             ///< the host factor was page-locked for the uploads (from the first
                                   ///< refactorization on: the first factorization uploads pageable memory)
};

/// The last solve: where it ran and how long each sweep took.
struct SolveTimes {
  bool gpu = false;
  index_t nrhs = 0;
  bool partitioned = false;       ///< GPU: the partitioned inverse's plan ran it (SolverOptions::partitioned_inverse)
  int passes = 0;                 ///< GPU passes (up to max_width right-hand sides each)
  double forward_seconds = 0;     ///< GPU: forward sweeps, CUDA events, summed over passes
  double backward_seconds = 0;    ///< GPU: backward sweeps
  double seconds = 0;             ///< the whole call, wall clock (copies between host and device included)
};

/// The solver's report, filled as the phases run (the CLI prints it; report-writing is up to the caller).
struct Report {
  std::vector<PhaseTime> phases;             ///< with "matching" for an LU
  Factorization factorization = Factorization::cholesky;  ///< the one in use: cholesky or lu
  std::string factorization_reason;          ///< why, one line (requested, or what `automatic` saw)
  index_t perturbed_pivots = 0;              ///< LU: tiny pivots replaced in the last factorization
  int threads = 0;                   ///< of the factorization and the host solve
  Placement placement = Placement::automatic;  ///< requested
  bool gpu = false;                  ///< the solves run on the GPU
  std::string placement_reason;      ///< why they run where they do, one line
  std::optional<GpuPlanReport> plan; ///< when a GPU plan exists
  std::optional<SolveTimes> last_solve;
};

class Solver {
 public:
  explicit Solver(const SolverOptions& options = {});
  ~Solver();
  Solver(const Solver&) = delete;
  Solver& operator=(const Solver&) = delete;

  /// Orders and analyzes A's pattern (square, symmetric pattern; values are not read) for the Cholesky, or
  /// A for the LU (values read by the matching). Discards any earlier analysis, factor and plan. Throws as
  /// analyze() in symbolic.hpp or analyze_lu() in lu.hpp.
  void analyze(const SparseMatrix& A);

  /// Factorizes A (the analyzed pattern; for the Cholesky symmetric values, positive definite) on the host,
  /// with the GPU plan built and fed beside it when the solves go to the GPU. A later call refactorizes
  /// with new values. Throws InvalidInput before analyze() or for a different pattern, NumericalError for a
  /// matrix that is not positive definite (naming the column; under `automatic` the LU is used instead),
  /// ResourceError as in the file comment.
  void factorize(const SparseMatrix& A);

  /// Solves A X = B in place: X holds B on entry (n x nrhs, column-major, leading dimension ldx >= max(1,
  /// n), original numbering) and the solution on return, in host or device memory as `memory` says
  /// (device memory needs a GPU). Synchronous. Throws InvalidInput without a successful factorization, for
  /// bad shapes, or for a NaN/Inf in host right-hand sides; NumericalError (no_progress) or ResourceError
  /// when the GPU fails. An LU factored again by solve_refined at kLuCorrectedPivotTolerance solves with the
  /// correction of its replaced pivots, where the solves run (NumericalError (singular) when it finds A
  /// singular).
  void solve(double* X, index_t nrhs, index_t ldx, Memory memory = Memory::host);

  /// Solves A^T X = B in place, X in host memory (as solve()), where solve() runs: the LU's transposed
  /// solve, or solve() itself for a Cholesky factor. Same errors as solve().
  void solve_transposed(double* X, index_t nrhs, index_t ldx);

  /// Solves A X = B with iterative refinement (options.refine; the rules of solve.hpp's solve_refined)
  /// against the last factorized A, where solve() runs; an LU refines in the two stages of
  /// lu_solve_refined (lu.hpp: with the factor, then, where its replaced pivots stall that, again from B
  /// with the correction of those pivots; on the GPU the correction's k x k matrix is built from k solves
  /// with the GPU plan itself, so that it matches the solves it corrects). Where that does not converge,
  /// the LU is factored again at kLuCorrectedPivotTolerance (lu.hpp: more pivots replaced, the factor's
  /// growth bounded) and refined with the correction; this analysis' later factorizations keep that
  /// tolerance, and its solves, plain ones included, are corrected (the factor alone is of a matrix far
  /// from A), on the GPU or the host as placed (report().placement_reason says which).
  /// report().factorization_reason says so, with both outcomes. B (leading dimension ldb) is not modified;
  /// X (ldx) receives the solution; both in host or device memory as `memory` says. On the GPU the iterates
  /// stay on the device until the end (device X with leading dimension n, or one column, apart from B
  /// holds them; its contents are undefined after an error), and the refinement's other vectors (three
  /// to seven n x nrhs blocks, in chunks of columns that fit a quarter of the free device memory) stay
  /// allocated for later calls until the next analyze() or the Solver's end (report().plan->device_bytes
  /// does not count them). Same errors as solve(), and as factorize() while factoring again;
  /// NumericalError (singular) when the correction finds A singular.
  RefinementResult solve_refined(const double* B, index_t ldb, double* X, index_t ldx, index_t nrhs,
                                 Memory memory = Memory::host);
  /// The same with these refinement options instead of options().refine.
  RefinementResult solve_refined(const double* B, index_t ldb, double* X, index_t ldx, index_t nrhs,
                                 const RefineOptions& refine, Memory memory = Memory::host);

  /// The analysis (throws InvalidInput before analyze()).
  const SymbolicFactor& symbolic() const;
  std::shared_ptr<const SymbolicFactor> symbolic_ptr() const;
  /// The host Cholesky factor (throws InvalidInput before a successful factorize(), or for an LU).
  const NumericFactor& factor() const;
  /// The LU factor (throws InvalidInput before a successful factorize(), or for a Cholesky factor).
  const LuFactor& lu_factor() const;
  /// True when solves run on the GPU.
  bool on_gpu() const;
  const Report& report() const;
  const SolverOptions& options() const;

  /// Waits until the partitioned inverse of the current factorization is on the GPU (or known not to come:
  /// none chosen, no GPU plan, or GpuPlanReport::partitioned_problem), so that every later solve uses it.
  /// Returns whether they will. Never throws for the partitioned inverse's own failure (the per-supernode
  /// plan solves instead, and the report says why).
  bool wait_for_partitioned_inverse();

  /// Polls before a GPU spin-wait gives up (0: the default). For tests that provoke a timeout.
  void set_gpu_spin_limit(long long polls);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace spade
