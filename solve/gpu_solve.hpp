// The GPU side of spade's solve phase, used by the Solver facade (include/spade/solver.hpp); internal header
// of solve/. Four pieces:
//   GpuSolvePlan   - the supernodal solve plan: built from the symbolic factor alone (the schedule of
//                    supernodal_schedule.hpp, every device allocation, the pattern on the device), then fed
//                    the factor's values range by range as the host factorization finishes them; each range
//                    is copied up and selectively inverted on the GPU at once (narrow diagonal blocks by the
//                    warp kernel, wide ones by cuSOLVER trtri and cuBLAS trsm). Solves A X = B for device
//                    X and B in passes of up to 8 right-hand sides (kernels/supernodal_solve.cu), and on
//                    request with an FP32 copy of the panels (refinement's corrections); refines a pass's
//                    right-hand sides as one CUDA graph with a GpuResidual (refine()).
//                    The plan of an LU factor (lu.hpp) holds two such panel sets, [L11; L21] and
//                    [U11^T; U12^T], on the same schedule: the forward sweep of A x = b runs on L's and the
//                    backward sweep on U's, A^T x = b the other way round (see upload_lu and finish_lu).
//   GpuResidual    - A on the device for iterative refinement: R = B - A X and the Oettli-Prager backward
//                    error in one pass over A (kernels/residual.cu), a step's update X + D in the same
//                    pass, and the refinement's vectors, kept from one call to the next.
//   GpuLuCorrection - the correction of an LU's replaced pivots (LuCorrection, lu.hpp) on the device, built
//                    from the plan's own solves: a corrected solve is two solves with the plan and one
//                    with the small matrix K.
//   HostRegistration - page-locks the host factor's values (cudaHostRegister) so uploads run as DMA.
// Everything here uses the CUDA device that is current when the object is created; every call must be made
// with that device current. Errors: ResourceError for CUDA, cuBLAS and cuSOLVER failures (out of
// memory included), InvalidInput for misuse, NumericalError for what the kernels report (a zero pivot, a
// spin-wait that gave up).
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "spade/lu.hpp"
#include "spade/solve.hpp"
#include "spade/sparse_matrix.hpp"
#include "spade/symbolic.hpp"
#include "partitioned_inverse.hpp"
#include "supernodal_schedule.hpp"

namespace spade {

namespace kernels {
struct SupernodalWorkspace;
}
class GpuResidual;

/// Device memory of a GpuSolvePlan, in bytes, known before any allocation.
struct GpuSolveMemory {
  std::size_t factor = 0;     ///< the panels (M_s) in FP64; an LU's two sets
  std::size_t pattern = 0;    ///< row indices, supernode arrays, permutation, schedule, counters
  std::size_t workspace = 0;  ///< acc, y, x for passes of max_width right-hand sides
  std::size_t inversion = 0;  ///< the trsm inversion's k x k workspace (known before allocation) and
                              ///< cuSOLVER's trtri workspace (known once the plan has a cuSOLVER handle)
  std::size_t total() const { return factor + pattern + workspace + inversion; }
};

class GpuSolvePlan {
 public:
  /// Widest pass: right-hand sides solved together by one forward and one backward launch.
  static constexpr int kMaxWidth = 8;
  /// Diagonal blocks wider than SupernodalSchedule::kMidInverse and at most this wide are inverted by cuBLAS
  /// trsm on the identity, with L11 in a k x k workspace (at most 32 MiB); wider ones by cuSOLVER trtri in
  /// place.
  static constexpr int kTrsmInverseColumns = 2048;

  /// The plan's device memory for passes of `max_width` right-hand sides (1, 2, 4 or 8); `lu` for the plan
  /// of an LU factor whose structure is S.
  static GpuSolveMemory memory_estimate(const SymbolicFactor& S, const SupernodalSchedule& schedule,
                                        int max_width = kMaxWidth, bool lu = false);
  /// The same for a Cholesky plan on `structure` (schedule: build_schedule(*structure.solve)), its merged
  /// pieces' staging and maps included.
  static GpuSolveMemory memory_estimate(const SolveStructure& structure, const SupernodalSchedule& schedule,
                                        int max_width = kMaxWidth);

  /// Allocates everything and uploads the pattern, the permutation and the schedule on the current
  /// device; synchronous. No values yet: solves refuse until finish_values().
  GpuSolvePlan(std::shared_ptr<const SymbolicFactor> symbolic, SupernodalSchedule schedule,
               int max_width = kMaxWidth);

  /// The plan of a Cholesky factor whose supernodes the solve merges into the pieces of `structure`
  /// (partitioned_inverse.hpp; schedule: build_schedule(*structure.solve)). Uploads still take the factor's
  /// values and supernode numbers; a merged piece is inverted once all of its supernodes are uploaded.
  GpuSolvePlan(SolveStructure structure, SupernodalSchedule schedule, int max_width = kMaxWidth);

  /// The plan of an LU factor of the analysis `lu` (schedule: build_schedule(*lu->structure)); the same,
  /// plus the second panel set and the row and column scalings (which the sweeps apply as they read b and
  /// write x: kernels::SupernodalPass). Values come through upload_lu().
  GpuSolvePlan(std::shared_ptr<const LuSymbolic> lu, SupernodalSchedule schedule, int max_width = kMaxWidth);

  bool is_lu() const { return lu_ != nullptr; }
  ~GpuSolvePlan();
  GpuSolvePlan(const GpuSolvePlan&) = delete;
  GpuSolvePlan& operator=(const GpuSolvePlan&) = delete;

  /// Starts a new set of values: the device copy is unusable until finish_values().
  void begin_values();

  /// Copies the panels of the factor's supernodes first .. last (inclusive) from `values` (the
  /// NumericFactor's host values, laid out by panel_offset) and inverts their diagonal blocks,
  /// asynchronously on the upload stream. A partitioned plan copies the range once, places its panels in
  /// their pieces on the GPU, and inverts a merged piece when the last of its supernodes arrives. The host
  /// values must not change until finish_values() returns. Call from one thread.
  void upload(const double* values, index_t first, index_t last);

  /// The LU plan's upload of supernodes first .. last (inclusive), after begin_values(), as the
  /// factorization finishes them (LuProgress): their L panels (from l_values, laid out by panel_offset)
  /// and packed U panels (from u_values, as LuFactor::u_values()) are copied up and rearranged on the GPU
  /// into M^L = [L11; L21] and M^U = [U11^T; U12^T] (kernels/supernodal_kernels.hpp; the packed U panels
  /// pass through M^L's memory of the range, which they do not outgrow, before the L panels arrive there),
  /// and both are selectively inverted, as a Cholesky's panel, asynchronously on the upload stream. The
  /// host values must not change until finish_values() returns. Call from one thread.
  void upload_lu(const double* l_values, const double* u_values, index_t first, index_t last);

  /// The LU plan's index maps, once F (a factor of this plan's analysis, after its uploads) is complete.
  /// F's row interchanges inside its diagonal blocks (Q C = L U) become positions: position p of a
  /// supernode's columns holds C's row q(p) after the interchanges, and M^L's row indices below the
  /// diagonal blocks are positions (pos(t) for C's row t), so the forward sweep of L reads the right-hand
  /// side through q once and needs no interchange on the device. The sweeps then are the Cholesky's with
  /// one panel set each:
  ///   A x = b:    Dr and Pr, then q, forward with M^L; backward with M^U; then Dc (gpu_solve.cu).
  ///   A^T x = b:  Dc, forward with M^U; backward with M^L, whose solution is in positions; then q^{-1}, Pr^T
  ///               and Dr.
  /// Then call finish_values(F.generation()). Throws InvalidInput when this is not an LU plan, F is of
  /// another analysis or invalid; ResourceError for CUDA.
  void finish_lu(const LuFactor& F);

  /// upload_lu of every supernode of F, then finish_lu(F): the whole factor after its factorization.
  void upload_lu(const LuFactor& F);

  /// Waits for every upload and inversion, checks the inversion's status, and marks the device values as
  /// those of factorization `generation` (NumericFactor::generation()). Throws NumericalError (singular)
  /// for a zero pivot, ResourceError for a CUDA error, InvalidInput when a partitioned plan did not receive
  /// every supernode exactly once.
  void finish_values(std::uint64_t generation);

  /// Copies the device's selectively inverted panels (M_s = [V; W], laid out as the solve structure's
  /// values: structure().solve->panel_offset) to `host` (panel_offset.back() doubles): an LU plan's M^L, or
  /// with `upper` its M^U. For tests and diagnostics; synchronous. InvalidInput for `upper` on a Cholesky plan.
  void copy_values_to_host(double* host, bool upper = false) const;

  /// The generation of the values on the device, 0 when none are complete.
  std::uint64_t generation() const { return generation_; }

  /// Solves A X = B: B and X are n x nrhs, column-major, leading dimensions ldb, ldx >= max(1, n), DEVICE
  /// memory, original numbering; X may equal B (in place) and must not overlap it otherwise. `generation`
  /// must be that of the values on the device (InvalidInput otherwise: the factor changed since it was
  /// uploaded). Runs on stream() (which waits for the legacy default stream) in passes of at most
  /// max_width() right-hand sides, with a second stream that starts after stream()'s earlier work and
  /// joins back into it, and synchronizes. A solve of one pass whose arguments (B, X, ldb, ldx, nrhs,
  /// `single`, `trans`) recur is replayed from a CUDA graph of its two sweeps from the second time on (up
  /// to four such graphs kept, the least recently used replaced; none while tracing).
  /// Throws NumericalError (no_progress) when a spin-wait gave up (the plan's state is restored first).
  /// An LU plan solves A^T X = B with `trans` yes (a Cholesky plan ignores it: A is symmetric).
  /// With `single` the sweeps read the FP32 copy of the panels (make_single_copy(), for this generation;
  /// InvalidInput otherwise) and still compute in FP64: a solve with the factor rounded to FP32, for the
  /// corrections of mixed-precision refinement.
  void solve(const double* B, index_t ldb, double* X, index_t ldx, index_t nrhs, std::uint64_t generation,
             Transpose trans = Transpose::no, bool single = false);

  /// The most corrections refine() takes (its history has room for them); a refinement allowed more runs
  /// step by step on the host (refine_loop). Each correction must halve berr, so 64 span 19 orders of it.
  static constexpr int kDeviceRefineSteps = 64;

  /// Iterative refinement of A X = B with this plan's solves and `residual`'s evaluations, entirely on the
  /// device, the host waiting once at the end: refine_loop's stopping rules (solve/refine_loop.hpp) are
  /// evaluated after each evaluation by kernels::launch_refine_step, which sets the conditional nodes of a
  /// CUDA graph: the first solve into iterate[0] and its evaluation, then a WHILE node whose body is a
  /// correction D = solve(R) with the evaluation of iterate[0] + D into iterate[1], and under an IF node
  /// the same from iterate[1] back into iterate[0] (the iterates alternate, as in the Solver's host loop,
  /// so that an iterate is not copied). With `single` the corrections solve with the FP32 copy of the
  /// panels (make_single_copy() for this generation; InvalidInput otherwise) until one fails to halve berr:
  /// each correction's solve is then an IF/ELSE node on its precision, and where an FP32 correction made
  /// things worse an IF node copies the kept iterate into the worse one's block and evaluates it again
  /// (refine_loop's restore and evaluate). Saves the host's round trip per step, which on a small factor
  /// costs as much as a solve (docs/benchmarks/solve.md, "A refinement as one graph").
  /// Captured the second time its arguments recur (as the pass graphs: up to four kept, the least recently
  /// used replaced): at a key's first sight, and while captures are off (set_capture), this does nothing
  /// and returns false, and the caller refines on the host. Otherwise returns true with `result` (the
  /// history, as refine_loop's) and `solution`, the block (0 or 1) of `iterate` that holds the solution.
  /// B, iterate[0], iterate[1], R, D: n x nrhs, leading dimension n, DEVICE memory, no two overlapping;
  /// 1 <= nrhs <= max_width(), n >= 1, 0 <= options.max_steps <= kDeviceRefineSteps (InvalidInput
  /// otherwise, and for a `generation` that is not the device values'); options.corrections is not read.
  /// `residual` holds this plan's A, on stream(); an LU plan solves A X = B. Throws NumericalError
  /// (no_progress) when a spin-wait gave up, as solve(); ResourceError for CUDA.
  bool refine(GpuResidual& residual, const double* B, double* const iterate[2], double* R, double* D, index_t nrhs,
              std::uint64_t generation, const RefineOptions& options, bool single, RefinementResult& result,
              int& solution);

  /// Makes the FP32 copy of the current values that solve(..., single) reads, on stream() (synchronous;
  /// single_copy_bytes() of device memory, allocated at the first call and kept; again after each new set
  /// of values). Returns false, and makes none, when that memory is more than half of the device's free
  /// memory or when an entry of the inverted panels exceeds FP32's range; true when the copy is there.
  /// InvalidInput before finish_values(); ResourceError for CUDA.
  bool make_single_copy();
  std::size_t single_copy_bytes() const;

  /// Whether a sweep of this plan is bandwidth-bound by Brent's estimate (partitioned_inverse.hpp, at the
  /// plan's own structure): the bytes of its panels over gpu_bandwidth_estimate() exceed the hand-offs
  /// (kSolveHandoffSeconds) along its longest path. Where it is, reading the FP32 copy saves up to half a
  /// sweep; where it is not (small factors), next to nothing. Computed at construction.
  bool bandwidth_bound() const { return bandwidth_bound_; }

  /// Forward and backward sweep times of the last solve (CUDA events), seconds: summed over the passes of
  /// each lane, the larger lane's (a solve of more than max_width() right-hand sides runs its passes
  /// alternately on two workspaces at once, each with half the grid).
  double last_forward_seconds() const { return forward_seconds_; }
  double last_backward_seconds() const { return backward_seconds_; }
  int last_passes() const { return passes_; }

  /// The median over `reps` solves of one right-hand side (after two untimed ones) of the forward plus the
  /// backward sweep time (CUDA events, seconds); b is a constant vector in device memory of the call's own.
  /// The Solver's measured choice of the partitioned inverse's band (partitioned_inverse.hpp) reads it.
  /// Needs finish_values(); synchronous. Throws InvalidInput for reps < 1, and as solve().
  double time_solve(int reps);

  const SupernodalSchedule& schedule() const { return schedule_; }
  /// The supernodes the solve runs on (unpartitioned for an LU plan and for the first constructor).
  const SolveStructure& structure() const { return structure_; }
  const GpuSolveMemory& memory() const { return memory_; }
  int max_width() const { return max_width_; }
  cudaStream_t stream() const { return solve_stream_; }

  /// Whether solve() and refine() may capture new CUDA graphs (on by default; graphs already captured are
  /// still launched). A capture fails, and fails the other thread's work, when another thread synchronizes
  /// the device meanwhile, as destroying a cuBLAS or cuSOLVER handle does: the Solver turns it off while
  /// the partitioned inverse's thread works beside its solves. Off, a recurring one-pass solve is launched
  /// directly and refine() returns false.
  void set_capture(bool allowed) { capture_allowed_ = allowed; }

  /// Polls before a spin-wait gives up (0: the default of kernels/sync.cuh). For tests. Synchronous.
  void set_spin_limit(long long polls);

  /// Diagnosis of the critical path: while on, every pass records per-task timestamps (ns), and trace()
  /// returns those of the last pass: task t's forward {taken, dependencies met, done} at 3t .. 3t+2 and its
  /// backward at 3 (tasks + t) .. (kernels/supernodal_kernels.hpp, SupernodalPass::trace). Off by default.
  void set_trace(bool on);
  std::vector<unsigned long long> trace() const;

 private:
  struct Device;  // device arrays, handles, events, pass graphs
  struct Sweeps;  // the forward and backward sweeps' views of the panels, and an LU's scalings
  Sweeps sweeps(Transpose trans) const;
  /// Lane `lane`'s workspace of a pass (Device::Lane).
  kernels::SupernodalWorkspace workspace(int lane) const;
  /// Throws NumericalError (no_progress), after reset_workspace(), where the status read back into
  /// Device::status_host reports a spin-wait that gave up.
  void check_solve_status();
  /// What keys the refinement graph (refine()).
  struct RefineKey {
    std::uint64_t residual = 0;  // GpuResidual::id()
    const double* b = nullptr;
    double *x0 = nullptr, *x1 = nullptr, *r = nullptr, *d = nullptr;
    int nrhs = 0, max_steps = 0;
    double tolerance = 0;
    bool single = false;
    const float* single_values = nullptr;  // the FP32 copies the corrections read (Device::single_values,
    const float* single_upper = nullptr;   // and an LU's single_values_u)
    bool operator==(const RefineKey& o) const {
      return residual == o.residual && b == o.b && x0 == o.x0 && x1 == o.x1 && r == o.r && d == o.d &&
             nrhs == o.nrhs && max_steps == o.max_steps && tolerance == o.tolerance && single == o.single &&
             single_values == o.single_values && single_upper == o.single_upper;
    }
  };
  struct RefineGraph;  // a key and its graph (Device::refine_graphs)
  /// Captures refine()'s graph for g's key into g.
  void capture_refinement(GpuResidual& residual, RefineGraph& g);
  /// What can change between two one-pass solves of a plan: the arguments that key its CUDA graphs.
  struct PassKey {
    const double* b = nullptr;
    const double* x = nullptr;
    long long ldb = 0, ldx = 0;
    int nrhs = 0, width = 0;
    bool single = false, transposed = false;
    const float* single_forward = nullptr;  // the FP32 copies the sweeps read (null until made)
    const float* single_backward = nullptr;
    bool operator==(const PassKey& o) const {
      return b == o.b && x == o.x && ldb == o.ldb && ldx == o.ldx && nrhs == o.nrhs && width == o.width &&
             single == o.single && transposed == o.transposed && single_forward == o.single_forward &&
             single_backward == o.single_backward;
    }
  };
  /// The CUDA graph of a one-pass solve whose arguments `key` recur (Device::graphs): null the first time a
  /// key is seen (the caller launches the pass directly), then captured once from `enqueue(stream, event
  /// record flags)` and replayed. Throws ResourceError for a CUDA failure.
  template <typename Enqueue>
  cudaGraphExec_t pass_graph(const PassKey& key, const Enqueue& enqueue);
  GpuSolvePlan(SolveStructure structure, std::shared_ptr<const LuSymbolic> lu, SupernodalSchedule schedule,
               int max_width);
  void reset_workspace();
  void warm_up_inversion();
  /// The most rows below the diagonal block among the supernodes [first, last) of the solve structure.
  long long most_rows_below(const index_t* first, const index_t* last) const;
  /// Selective inversion of supernodes first .. last of the panel set `values` on the upload stream; the
  /// large ones' trtri info goes to info[i] for large_inverse[i].
  void invert_range(double* values, int* info, index_t first, index_t last);
  /// Selective inversion of a supernode wider than kMidInverse on the upload stream (cuBLAS trsm, cuSOLVER trtri);
  /// trtri's info goes to the device int `info`.
  void invert_large(index_t s, double* values, int* info);

  SolveStructure structure_;
  std::shared_ptr<const SymbolicFactor> symbolic_;  // structure_.solve: what the schedule and the kernels see
  std::shared_ptr<const LuSymbolic> lu_;  // null for a Cholesky plan
  std::vector<index_t> arrived_;          // per solve supernode: its parts uploaded since begin_values()
  SupernodalSchedule schedule_;
  int max_width_;
  GpuSolveMemory memory_;
  cudaStream_t upload_stream_ = nullptr;
  cudaStream_t solve_stream_ = nullptr;
  cudaStream_t lane_stream_ = nullptr;  // the second lane's (Device::Lane)
  std::unique_ptr<Device> device_;
  std::uint64_t generation_ = 0;
  std::uint64_t single_generation_ = 0;  // the generation of the FP32 copy, 0 when there is none
  std::uint64_t single_refused_ = 0;     // the generation make_single_copy() last tried to copy
  bool bandwidth_bound_ = false;
  bool capture_allowed_ = true;
  int grid_[2][4] = {};  // blocks of a pass, by [panels in FP32][width_slot]
  double forward_seconds_ = 0, backward_seconds_ = 0;
  int passes_ = 0;
};

/// A on the device for refinement, in CSR (a symmetric A's CSC arrays are its CSR arrays; any other A is
/// transposed on the host first), and the refinement's device vectors (workspace()).
class GpuResidual {
 public:
  /// Uploads A (square; a symmetric one with both triangles stored); work goes on `stream`. Throws
  /// InvalidInput for a non-square A, ResourceError when nnz(A) does not fit 32-bit indices or for a
  /// CUDA failure.
  GpuResidual(const SparseMatrix& A, cudaStream_t stream);
  ~GpuResidual();
  GpuResidual(const GpuResidual&) = delete;
  GpuResidual& operator=(const GpuResidual&) = delete;

  /// New values, same pattern (InvalidInput otherwise).
  void update_values(const SparseMatrix& A);

  /// R = B - A X and the worst backward error: max over the nrhs columns and rows of
  /// |b - A x|_i / (|A| |x| + |b|)_i (0 where numerator and denominator vanish, Inf where only the denominator
  /// does; NaN where a residual is NaN) and the largest ||b - A x||_inf, in one pass over A
  /// (kernels::launch_residual; ceil(nrhs / 8) passes for several columns). B, X, R: n x nrhs, leading
  /// dimension n, DEVICE memory; R aliases neither B nor X. Synchronizes.
  RefinementStep evaluate(const double* B, const double* X, double* R, index_t nrhs);

  /// A refinement step's update and its evaluation in the same pass over A: X_new = X + D, R = B - A X_new
  /// and its backward error as evaluate(). B, X, D, X_new, R: n x nrhs, leading dimension n, DEVICE memory;
  /// X_new and R alias none of the others. Synchronizes.
  RefinementStep evaluate_corrected(const double* B, const double* X, const double* D, double* X_new, double* R,
                                    index_t nrhs);

  /// The pass of evaluate() (D and X_new null) or evaluate_corrected(), enqueued on `stream` without
  /// reading the result back: its two maxima go to `result` (two 64-bit words of DEVICE memory holding
  /// zeros, kernels::launch_residual). For capture into a CUDA graph (GpuSolvePlan::refine).
  void enqueue(const double* B, const double* X, const double* D, double* X_new, double* R, index_t nrhs,
               unsigned long long* result, cudaStream_t stream) const;

  /// A number no other GpuResidual of this process has: what a graph holding this object's arrays is keyed by.
  std::uint64_t id() const { return id_; }

  /// At least `count` doubles of device memory for the refinement's vectors, kept from one call to the
  /// next (a refinement allocates nothing once it has run with as many right-hand sides) and freed with
  /// this object; a larger count replaces the block (its contents are not kept). Ordered on the stream
  /// this object was created on, and complete on return: usable on any stream. ResourceError when the
  /// device's memory does not hold it.
  double* workspace(std::size_t count);
  /// Bytes of workspace() held now (read by other threads: the Solver's memory checks).
  std::size_t workspace_bytes() const { return workspace_bytes_.load(std::memory_order_relaxed); }

  /// Later work goes on `stream` (the Solver's solves switch between two plans' streams); waits for the
  /// work on the current one first. Memory it allocated stays ordered on the stream it was allocated on,
  /// which must outlive this object.
  void set_stream(cudaStream_t stream);

 private:
  struct Device;
  std::uint64_t id_;
  index_t n_ = 0;
  offset_t nnz_ = 0;
  int group_ = 4;            // lanes per row of the residual kernel (kernels::residual_group)
  bool transposed_ = false;  // the device holds A^T's CSC arrays (A was not symmetric)
  cudaStream_t stream_;
  cudaStream_t home_;        // the stream of construction, where device memory is allocated and freed
  std::atomic<std::size_t> workspace_bytes_{0};
  std::unique_ptr<Device> device_;

  RefinementStep pass(const double* B, const double* X, const double* D, double* X_new, double* R, index_t nrhs);
};

/// The correction of an LU factor's replaced pivots on the device, for the corrected solves of the
/// GpuSolvePlan that holds the factor: LuCorrection's formula (lu.hpp; Sherman-Morrison-Woodbury, W. W.
/// Hager, SIAM Review 31(2), 1989) with K = D^{-1} - V^T G U built from the plan's own solves G, so that
/// the corrected solve is the exact inverse of A plus the GPU solve's own backward error (a K built from
/// the host's solves would add the difference of the two solves, amplified by K^{-1}, which on
/// ill-conditioned factors spoils refinement); LU factored and solved with by cuSOLVER getrf / getrs.
class GpuLuCorrection {
 public:
  /// Builds K for F (k = F.perturbed_pivots() >= 1) from k solves with `plan`, which holds F's values at
  /// F's current generation, in panels of up to 64 right-hand sides; device memory ordered on
  /// plan.stream(), which must outlive this object. Synchronous. Throws InvalidInput for k = 0 or a plan
  /// that does not hold F's values; NumericalError (not_finite) when a solve with F overflows,
  /// (singular) naming the perturbed column of A when K is exactly singular (then so is A); ResourceError
  /// for CUDA and cuSOLVER failures (out of memory included).
  GpuLuCorrection(const LuFactor& F, GpuSolvePlan& plan);
  ~GpuLuCorrection();
  GpuLuCorrection(const GpuLuCorrection&) = delete;
  GpuLuCorrection& operator=(const GpuLuCorrection&) = delete;

  index_t rank() const { return k_; }
  /// Whether K was built from F at its current generation (as LuCorrection::built_for).
  bool built_for(const LuFactor& F) const { return &F == factor_ && F.generation() == generation_; }

  /// Solves A X = B (A^T X = B with trans yes) in place, A being the matrix F was made from (F = A + U D
  /// V^T): Y = G X by the plan, then X = Y + G U K^{-1} V^T Y (the transposed system: X = Y + G^T V K^{-T}
  /// U^T Y), the second solve with the plan in W. X: n x nrhs, leading dimension ldx >= n; W: n x nrhs,
  /// leading dimension n, overwritten; both DEVICE memory. Adds both solves' sweep times (seconds) and
  /// passes to forward_seconds, backward_seconds and passes. Runs on plan.stream() and synchronizes (the
  /// plan's solves do). Throws InvalidInput where the plan no longer holds F's values, and as
  /// GpuSolvePlan::solve; ResourceError for a cuSOLVER failure.
  void solve(GpuSolvePlan& plan, double* X, index_t ldx, index_t nrhs, Transpose trans, double* W,
             double& forward_seconds, double& backward_seconds, int& passes);

 private:
  struct Device;
  const LuFactor* factor_ = nullptr;
  std::uint64_t generation_ = 0;
  index_t k_ = 0;
  std::unique_ptr<Device> device_;
};

/// Page-locks [data, data + bytes) for the object's lifetime (cudaHostRegister). ok() is false when the
/// driver refused (the memory is then used pageable: uploads are slower, nothing else changes).
class HostRegistration {
 public:
  HostRegistration(const void* data, std::size_t bytes);
  ~HostRegistration();
  HostRegistration(const HostRegistration&) = delete;
  HostRegistration& operator=(const HostRegistration&) = delete;
  bool ok() const { return ok_; }
  const void* data() const { return data_; }

 private:
  void* data_;
  bool ok_ = false;
};

/// Brings up cuBLAS and cuSOLVER on the current device (a handle of each, created and destroyed)
/// and loads the solve kernels' modules, so that a plan built later does not pay their start-up (on a small
/// factor, that start-up is most of what a caller would wait for after the factorization). The Solver calls
/// it on its probe thread, beside the analysis. Throws ResourceError for a CUDA or library failure.
void load_gpu_libraries();

/// The current device in one line: name, compute capability, multiprocessors and free / total memory.
std::string gpu_description();

/// The current device's memory bandwidth for a stream of reads, bytes per second: 0.9 of the peak that its
/// memory clock and bus width give (about the measured copy bandwidth's share of the peak,
/// docs/BENCHMARKS.md). The partitioned inverse's cost model reads it. Throws ResourceError for a CUDA failure.
double gpu_bandwidth_estimate();

/// Free and total memory of the current device, bytes.
void gpu_memory(std::size_t& free_bytes, std::size_t& total_bytes);

}  // namespace spade
