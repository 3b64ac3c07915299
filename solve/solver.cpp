// The Solver facade (include/spade/solver.hpp): the phases, their threads, placement, and the report.
#include "spade/solver.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>
#include <utility>

#include "../kernels/cuda_check.hpp"
#include "gpu_solve.hpp"
#include "refine_loop.hpp"
#include "../core/messages.hpp"
#include "spade/error.hpp"

namespace spade {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

/// Polls `done` for up to a millisecond and says whether it came true. The plan's thread and the caller
/// poll before they sleep: at the end of a small factorization the uploads arrive, and the plan is ready,
/// within less than a millisecond, and polling keeps a sleeping thread's wake-up off that path
/// (docs/benchmarks/solve.md). Each has a processor of its own then (FactorOptions::processors_left).
template <typename Done>
bool poll_briefly(Done done) {
  const auto limit = Clock::now() + std::chrono::milliseconds(1);
  for (unsigned i = 1;; ++i) {
    if (done()) return true;
    if (i % 64 == 0 && Clock::now() > limit) return false;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#else
    std::this_thread::yield();
#endif
  }
}

/// Starts f on a new thread; the system's refusal (std::system_error, e.g. under a memory or process
/// limit) becomes a ResourceError naming `what`.
template <typename F>
std::thread start_thread(const char* what, F&& f) {
  try {
    return std::thread(std::forward<F>(f));
  } catch (const std::system_error& e) {
    throw ResourceError(std::string("cannot start the ") + what + " thread: " + e.what());
  }
}

/// Ranges of finished supernodes, from the factoring threads to the plan's thread.
class RangeQueue {
 public:
  struct Range {
    const double* values;    // a Cholesky factor's values, or an LU's L panels
    const double* u_values;  // an LU's packed U panels; null for a Cholesky factor
    index_t first, last;
  };
  void open() {
    std::lock_guard<std::mutex> lock(mutex_);
    ranges_.clear();
    closed_ = false;
    signaled_ = false;
  }
  void push(Range r) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ranges_.push_back(r);
      signaled_.store(true, std::memory_order_release);
    }
    ready_.notify_one();
  }
  /// Every range queued so far (waiting for one), merged where they are adjacent in the supernode
  /// numbering, so that each upload and inversion launch covers as much as is ready; false once the queue
  /// is closed and empty.
  bool pop_all(std::vector<Range>& out) {
    out.clear();
    poll_briefly([this] { return signaled_.load(std::memory_order_acquire); });
    {
      std::unique_lock<std::mutex> lock(mutex_);
      ready_.wait(lock, [&] { return closed_ || !ranges_.empty(); });
      if (ranges_.empty()) return false;
      out.assign(ranges_.begin(), ranges_.end());
      ranges_.clear();
      signaled_.store(closed_, std::memory_order_relaxed);
    }
    std::sort(out.begin(), out.end(), [](const Range& a, const Range& b) { return a.first < b.first; });
    std::size_t kept = 0;
    for (std::size_t i = 1; i < out.size(); ++i) {
      if (out[i].first == out[kept].last + 1 && out[i].values == out[kept].values && out[i].u_values == out[kept].u_values)
        out[kept].last = out[i].last;
      else
        out[++kept] = out[i];
    }
    out.resize(kept + 1);
    return true;
  }
  void close() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      closed_ = true;
      signaled_.store(true, std::memory_order_release);
    }
    ready_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Range> ranges_;
  bool closed_ = true;
  std::atomic<bool> signaled_{false};  // ranges queued or the queue closed (polled without the mutex)
};

/// Device memory for a caller's block, stream-ordered (cudaMallocAsync / cudaFreeAsync).
class DeviceBlock {
 public:
  DeviceBlock(std::size_t count, cudaStream_t stream) : stream_(stream) {
    SPADE_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&data_), std::max<std::size_t>(count, 1) * sizeof(double), stream));
  }
  ~DeviceBlock() { cudaFreeAsync(data_, stream_); }
  DeviceBlock(const DeviceBlock&) = delete;
  DeviceBlock& operator=(const DeviceBlock&) = delete;
  double* get() const { return data_; }

 private:
  double* data_ = nullptr;
  cudaStream_t stream_;
};

/// Copies an n x nrhs column-major block between leading dimensions (any memory; `kind` says which).
void copy_block(double* dst, index_t ldd, const double* src, index_t lds, index_t n, index_t nrhs, cudaMemcpyKind kind,
                cudaStream_t stream) {
  if (n == 0 || nrhs == 0) return;
  SPADE_CUDA_CHECK(cudaMemcpy2DAsync(dst, static_cast<std::size_t>(ldd) * sizeof(double), src,
                                     static_cast<std::size_t>(lds) * sizeof(double), static_cast<std::size_t>(n) * sizeof(double),
                                     static_cast<std::size_t>(nrhs), kind, stream));
}

/// Whether the n x nrhs blocks at A (leading dimension lda) and B (ldb) share memory: their spans of
/// addresses, first to last entry, meet.
bool overlapping(const double* A, index_t lda, const double* B, index_t ldb, index_t n, index_t nrhs) {
  if (n == 0 || nrhs == 0) return false;
  const auto span = [&](const double* P, index_t ld) {
    const auto first = reinterpret_cast<std::uintptr_t>(P);
    return std::make_pair(first, first + (static_cast<std::uintptr_t>(ld) * (nrhs - 1) + n) * sizeof(double));
  };
  const auto a = span(A, lda), b = span(B, ldb);
  return a.first < b.second && b.first < a.second;
}

void check_finite(const double* X, index_t n, index_t nrhs, index_t ldx) {
  for (index_t r = 0; r < nrhs; ++r)
    for (index_t i = 0; i < n; ++i)
      if (!std::isfinite(X[i + static_cast<offset_t>(r) * ldx]))
        throw InvalidInput("solve: right-hand side entry " + entry_name("B", i, r) + " is not finite");
}

/// Right-hand sides per chunk when `blocks` device blocks of n x chunk doubles must fit in a quarter of the
/// device's free memory (at least one column; ResourceError if not even one fits).
index_t columns_that_fit(index_t n, index_t nrhs, int blocks) {
  std::size_t free_bytes = 0, total_bytes = 0;
  gpu_memory(free_bytes, total_bytes);
  const std::size_t column = static_cast<std::size_t>(std::max<index_t>(n, 1)) * sizeof(double) * blocks;
  const std::size_t fit = free_bytes / 4 / column;
  if (fit == 0)
    throw ResourceError("GPU solve: " + std::to_string(blocks) + " device columns of n = " + std::to_string(n) +
                        " doubles do not fit in the GPU's free memory");
  return static_cast<index_t>(std::min<std::size_t>(fit, static_cast<std::size_t>(std::max<index_t>(nrhs, 1))));
}

/// The refinement of several column chunks as one result: per step the worst over the chunks (a chunk that
/// stopped earlier counts with its last step), converged only if every chunk did, and the least favourable
/// stop reason.
void merge_refinement(RefinementResult& into, const RefinementResult& chunk, bool first) {
  if (first) {
    into = chunk;
    return;
  }
  const std::size_t steps = std::max(into.steps.size(), chunk.steps.size());
  auto at = [](const RefinementResult& r, std::size_t k) { return r.steps[std::min(k, r.steps.size() - 1)]; };
  std::vector<RefinementStep> merged(steps);
  for (std::size_t k = 0; k < steps; ++k) {
    merged[k].residual_norm = std::max(at(into, k).residual_norm, at(chunk, k).residual_norm);
    merged[k].berr = std::max(at(into, k).berr, at(chunk, k).berr);
  }
  into.steps = std::move(merged);
  into.solution.residual_norm = std::max(into.solution.residual_norm, chunk.solution.residual_norm);
  into.solution.berr = std::max(into.solution.berr, chunk.solution.berr);
  into.converged = into.converged && chunk.converged;
  if (chunk.stop != RefinementResult::Stop::converged && into.stop != RefinementResult::Stop::max_steps)
    into.stop = chunk.stop;
}

/// Whether a CUDA device usable by spade is present, and if not, why.
bool probe_device(int& device, std::string& description, std::string& problem) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    cudaGetLastError();
    problem = std::string("no usable GPU (") + (err != cudaSuccess ? cudaGetErrorString(err) : "no CUDA device") + ")";
    return false;
  }
  SPADE_CUDA_CHECK(cudaGetDevice(&device));
  SPADE_CUDA_CHECK(cudaFree(nullptr));  // creates the context now, beside the analysis
  if (cuda_device_major() < 7) {
    problem = "the GPU is older than sm_70, which spade's GPU solve needs";
    return false;
  }
  description = gpu_description();
  return true;
}

}  // namespace

std::string to_string(Placement placement) {
  switch (placement) {
    case Placement::gpu: return "gpu";
    case Placement::cpu: return "cpu";
    case Placement::automatic: break;
  }
  return "auto";
}

Placement parse_placement(const std::string& name) {
  if (name == "auto") return Placement::automatic;
  if (name == "gpu") return Placement::gpu;
  if (name == "cpu") return Placement::cpu;
  throw InvalidInput("unknown placement '" + name + "'; expected auto, gpu or cpu");
}

std::string to_string(Factorization factorization) {
  switch (factorization) {
    case Factorization::cholesky: return "cholesky";
    case Factorization::lu: return "lu";
    case Factorization::automatic: break;
  }
  return "auto";
}

Factorization parse_factorization(const std::string& name) {
  if (name == "auto") return Factorization::automatic;
  if (name == "cholesky") return Factorization::cholesky;
  if (name == "lu") return Factorization::lu;
  throw InvalidInput("unknown factorization '" + name + "'; expected auto, cholesky or lu");
}

struct Solver::Impl {
  SolverOptions options;
  Report report;
  std::shared_ptr<const SymbolicFactor> symbolic;  // the Cholesky's, or the LU's structure
  std::shared_ptr<const LuSymbolic> lu_symbolic;   // set when the factorization is an LU
  std::optional<LuFactor> lu;
  std::optional<SparseMatrix> A;  // the last factorized matrix, for refinement
  std::optional<NumericFactor> factor;

  // The GPU. Destruction runs bottom-up: the registration goes before the factor it pins, the residual
  // (on the plan's stream) before the plan.
  bool device_ok = false;
  int device = 0;
  std::string device_description, device_problem;
  std::unique_ptr<GpuSolvePlan> plan;
  // The partitioned inverse (SolverOptions::partitioned_inverse): a second plan on the merged structure,
  // chosen by a thread of its own beside the factorization, then built and fed the whole factor once the
  // per-supernode plan holds it (feed_partitioned), so that it slows neither. That thread owns `partitioned` and
  // partitioned_problem from its start until it sets partitioned_finished (release) and is joined; solves
  // switch to the plan once it holds the current factorization's values.
  std::unique_ptr<GpuSolvePlan> partitioned;
  std::string partitioned_problem;
  std::optional<SolveStructure> partitioned_structure;  // of trial_bands' first, its plan not built yet
  std::vector<index_t> trial_bands;                     // to time while no plan is kept (choose_band_by_timing)
  std::vector<PartitionTrial> partition_trials;         // the bands timed, in order
  // The residual may run on either plan's stream (set_stream): destroyed before both.
  std::unique_ptr<GpuResidual> residual;
  // The correction of the LU's replaced pivots for the LU plan's solves (gpu_lu_correction), its memory on
  // the plan's stream: destroyed before the plan, and dropped with it.
  std::unique_ptr<GpuLuCorrection> gpu_correction;
  std::unique_ptr<HostRegistration> pinned;
  bool use_gpu = false;  // the current factor's solves run on the GPU

  // The LU's pivot tolerance (LuFactorOptions::pivot_tolerance): the default until a refinement stagnates
  // on replaced pivots, then kLuCorrectedPivotTolerance for this analysis, whose factors solve with the
  // correction of their replaced pivots (built once per factorization, dropped with the factor it was
  // built for).
  double lu_pivot_tolerance = LuFactorOptions{}.pivot_tolerance;
  std::optional<LuCorrection> correction;

  /// Whether this analysis' LU factors at kLuCorrectedPivotTolerance: its solves apply the correction (a
  /// solve with the factor alone is of a matrix far from A).
  bool lu_escalated() const { return lu_symbolic && lu_pivot_tolerance >= kLuCorrectedPivotTolerance; }

  /// The correction of the current LU's replaced pivots, built on first use; null when the LU has none or
  /// LuCorrection::worthwhile says no.
  const LuCorrection* lu_correction() {
    if (!lu || !LuCorrection::worthwhile(*lu)) return nullptr;
    if (!correction || !correction->built_for(*lu)) {
      correction.reset();
      correction.emplace(*lu);
    }
    return &*correction;
  }

  /// The correction of the current LU's replaced pivots for the GPU plan's solves, built from them on first
  /// use; null where lu_correction() would be.
  GpuLuCorrection* gpu_lu_correction() {
    if (!lu || !LuCorrection::worthwhile(*lu)) return nullptr;
    if (!gpu_correction || !gpu_correction->built_for(*lu)) {
      gpu_correction.reset();
      gpu_correction = std::make_unique<GpuLuCorrection>(*lu, *plan);
    }
    return gpu_correction.get();
  }

  /// A X = B (or A^T X = B) with the LU on the host, X in host memory: corrected when lu_escalated().
  void lu_host_solve(double* X, index_t nrhs, index_t ldx, Transpose trans) {
    const LuCorrection* c = lu_escalated() ? lu_correction() : nullptr;
    if (c)
      c->solve_in_place(*lu, X, nrhs, ldx, trans);
    else
      lu_solve_in_place(*lu, X, nrhs, ldx, trans);
  }

  // Streaming a factorization's values to the plan.
  RangeQueue queue;
  std::atomic<bool> streaming{false};

  // The plan's thread of the last factorization. Once it no longer touches the plan, the queue or the
  // factorization's state it sets plan_fed, which the factorization waits for instead of the thread's exit:
  // a thread's exit and join took longer than the rest of that wait on small factors
  // (docs/benchmarks/solve.md). The thread is joined later (join_plan_worker).
  std::thread plan_worker;
  std::mutex plan_fed_mutex;
  std::condition_variable plan_fed_cv;
  std::atomic<bool> plan_fed{false};  // written under plan_fed_mutex, polled without it

  void join_plan_worker() {
    if (plan_worker.joinable()) plan_worker.join();
  }
  void wait_plan_fed() {
    if (poll_briefly([this] { return plan_fed.load(std::memory_order_acquire); })) return;
    std::unique_lock<std::mutex> lock(plan_fed_mutex);
    plan_fed_cv.wait(lock, [this] { return plan_fed.load(std::memory_order_relaxed); });
  }

  // The partitioned inverse's thread. Under partitioned_mutex: the band and pieces it chose (once per
  // analysis, published before it builds its plan, so that factorize() reports them without waiting for
  // the plan), and the word that lets it upload (`partitioned_go`: the values and their generation, once
  // the per-supernode plan holds them) or sends it away (`partitioned_cancel`).
  std::thread partitioned_worker;
  std::atomic<bool> partitioned_finished{false};  // the worker has nothing left to do
  std::mutex partitioned_mutex;
  std::condition_variable partitioned_cv;
  bool partitioned_chosen = false;
  index_t partitioned_band = 1, partitioned_pieces = 0;
  bool partitioned_go = false, partitioned_cancel = false;
  const double* partitioned_values = nullptr;
  std::uint64_t partitioned_generation = 0;
  Clock::time_point factor_returned{}, partitioned_done{};

  Impl() = default;
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  ~Impl() {
    stop_partitioned();
    join_plan_worker();
  }

  void set_phase(const std::string& name, double seconds, double gflops = 0) {
    for (PhaseTime& p : report.phases)
      if (p.name == name) {
        p.seconds = seconds;
        p.gflops_per_second = gflops;
        return;
      }
    report.phases.push_back({name, seconds, gflops});
  }

  /// Analyzes A for the LU (discarding a Cholesky analysis, factor and plan) and records why.
  void analyze_for_lu(const SparseMatrix& A, const std::string& why) {
    stop_partitioned();
    pinned.reset();
    gpu_correction.reset();
    residual.reset();
    plan.reset();
    forget_partitioned();
    report.plan.reset();
    factor.reset();
    lu.reset();
    lu_pivot_tolerance = LuFactorOptions{}.pivot_tolerance;
    LuAnalyzeOptions lo;
    lo.ordering = options.analyze.ordering;
    lo.supernodes = options.analyze.supernodes;
    lu_symbolic = analyze_lu(A, lo);
    symbolic = lu_symbolic->structure;
    report.factorization = Factorization::lu;
    report.factorization_reason = why;
    set_phase("matching", lu_symbolic->matching_seconds);
    set_phase("order", lu_symbolic->ordering_seconds);
    set_phase("symbolic", lu_symbolic->symbolic_seconds);
  }

  /// factorize() of the current analysis, the Cholesky's or the LU's: on the host, with the GPU plan built
  /// and fed on its own thread beside it when the solves go to the GPU (feed_plan).
  void factorize_streaming(const SparseMatrix& A);

  /// The report's placement when the solves run on the host by choice or for want of a usable GPU.
  void host_placement() {
    use_gpu = false;
    report.gpu = false;
    report.placement_reason =
        options.placement == Placement::cpu ? "host solve (placement cpu)" : "host solve: " + device_problem;
  }

  /// The plan failed (`problem`, or the exception `error`): drop it, then fall back to the host solve, or
  /// under placement gpu drop the factor too and throw ResourceError.
  void gpu_failed(const std::string& problem, const std::exception_ptr& error) {
    std::string why = problem;
    if (error) {
      try {
        std::rethrow_exception(error);
      } catch (const std::exception& e) {
        why = std::string("the GPU plan failed: ") + e.what();
      }
    }
    stop_partitioned();
    gpu_correction.reset();
    residual.reset();
    plan.reset();
    forget_partitioned();
    report.plan.reset();
    use_gpu = false;
    report.gpu = false;
    if (options.placement == Placement::gpu) {
      factor.reset();  // placement gpu solves on the GPU or not at all: no factor is left to solve with
      lu.reset();
      throw ResourceError("the GPU solve was requested (placement gpu), but " + why);
    }
    report.placement_reason = "host solve: " + why;
  }

  /// The report's placement once the factor's values are on the GPU; `returned` is when the factorization
  /// returned.
  void gpu_placement(Clock::time_point returned) {
    report.plan->visible_seconds = seconds_since(returned);
    use_gpu = true;
    report.gpu = true;
    report.placement_reason = "GPU: " + device_description;
    if (lu_escalated()) report.placement_reason += "; the LU's replaced pivots are corrected on the GPU";
  }

  /// The generation of the current factor's values.
  std::uint64_t generation() const { return lu ? lu->generation() : factor->generation(); }

  /// The GPU solve of A X = B (A^T X = B with trans yes) in place, X in host or device memory; fills the
  /// GPU fields of `times`.
  void gpu_solve(double* X, index_t nrhs, index_t ldx, Memory memory, Transpose trans, SolveTimes& times);

  void require_factor(const char* who) const {
    if (lu_symbolic) {
      if (!lu || !lu->valid())
        throw InvalidInput(std::string(who) + ": no successful factorization (call factorize() first)");
      return;
    }
    if (!factor || !factor->valid())
      throw InvalidInput(std::string(who) + ": no successful factorization (call factorize() first)");
  }

  void check_shape(index_t nrhs, index_t ld, const char* who) const {
    const index_t n = symbolic->n;
    if (nrhs < 0) throw InvalidInput(std::string(who) + ": nrhs must be >= 0, got " + std::to_string(nrhs));
    if (ld < std::max<index_t>(1, n))
      throw InvalidInput(std::string(who) + ": leading dimension " + std::to_string(ld) + " is smaller than n = " +
                         std::to_string(n));
  }

  /// Device bytes of the refinement's copy of A and of its vectors (GpuResidual::workspace).
  std::size_t refinement_bytes() const {
    return static_cast<std::size_t>(A->nnz()) * (sizeof(double) + sizeof(int)) +
           static_cast<std::size_t>(A->rows() + 1) * sizeof(int) + (residual ? residual->workspace_bytes() : 0);
  }

  /// Why `what` cannot have `wanted` more bytes of device memory (plus 64 MiB of headroom) when the solver's
  /// GPU objects would then hold `total` (against options.device_memory_limit); empty when it can.
  std::string memory_problem(const char* what, std::size_t wanted, std::size_t total) const {
    std::size_t free_bytes = 0, total_bytes = 0;
    gpu_memory(free_bytes, total_bytes);
    const std::size_t limit = options.device_memory_limit, headroom = std::size_t(64) << 20;
    if (wanted + headroom <= free_bytes && (limit == 0 || total + headroom <= limit)) return {};
    char line[240];
    if (limit > 0 && limit < free_bytes)
      std::snprintf(line, sizeof line, "%s needs %.2f GiB of device memory, the device memory limit is %.2f GiB", what,
                    (total + headroom) / 1073741824.0, limit / 1073741824.0);
    else
      std::snprintf(line, sizeof line, "%s needs %.2f GiB of device memory, %.2f GiB are free", what,
                    (wanted + headroom) / 1073741824.0, free_bytes / 1073741824.0);
    return line;
  }

  /// Builds the plan and its residual; returns an empty string, or why the GPU cannot take this factor.
  std::string build_plan() {
    const auto t0 = Clock::now();
    SupernodalSchedule schedule = build_schedule(*symbolic);
    const std::size_t need =
        GpuSolvePlan::memory_estimate(*symbolic, schedule, GpuSolvePlan::kMaxWidth, lu_symbolic != nullptr).total() +
        refinement_bytes();
    if (std::string problem = memory_problem("the GPU solve", need, need); !problem.empty()) return problem;
    plan = lu_symbolic ? std::make_unique<GpuSolvePlan>(lu_symbolic, std::move(schedule))
                       : std::make_unique<GpuSolvePlan>(symbolic, std::move(schedule));
    residual = std::make_unique<GpuResidual>(*A, plan->stream());
    GpuPlanReport r;
    const SupernodalSchedule& s = plan->schedule();
    r.device = device_description;
    r.device_bytes = plan->memory().total();
    r.factor_bytes = plan->memory().factor;
    r.max_width = plan->max_width();
    r.groups = s.num_groups;
    r.grouped_supernodes = s.grouped_supernodes;
    r.tiles = static_cast<index_t>(s.tasks.size()) - s.num_groups;
    r.tiled_supernodes = s.tiled_supernodes;
    r.tree_height = s.height;
    r.critical_columns = s.critical_columns;
    r.small_inverses = static_cast<index_t>(s.small_inverse.size());
    r.mid_inverses = static_cast<index_t>(s.mid_inverse.size());
    r.large_inverses = static_cast<index_t>(s.large_inverse.size());
    r.plan_seconds = seconds_since(t0);
    report.plan = r;
    return {};
  }

  /// The plan's thread during one factorization: plan (once), then every range the factorization
  /// reports, then (an LU's index maps and) the wait for the last inversion. `existing` is the values of a factor that exists
  /// before this factorization (a refactorization), page-locked here for the uploads; a first
  /// factorization's values are uploaded from pageable memory, since a failing constructor frees them
  /// and registered memory must outlive its registration. Sets `problem` to why the GPU cannot take the
  /// factor; exceptions go to `error`. Sets plan_fed last.
  void feed_plan(const double* existing, const std::atomic<bool>& factor_failed, std::string& problem,
                 std::exception_ptr& error) {
    std::vector<RangeQueue::Range> ranges;
    try {
      SPADE_CUDA_CHECK(cudaSetDevice(device));
      if (!plan) {
        problem = build_plan();
      } else {
        residual->update_values(*A);
        report.plan->plan_seconds = 0;
      }
      if (problem.empty()) {
        if (existing != nullptr && (!pinned || pinned->data() != existing))
          pinned = std::make_unique<HostRegistration>(
              existing, static_cast<std::size_t>(symbolic->panel_offset.back()) * sizeof(double));
        plan->begin_values();
        Clock::time_point first_upload{};
        bool any = false;
        while (queue.pop_all(ranges)) {
          if (!any) first_upload = Clock::now();
          any = true;
          for (const RangeQueue::Range& range : ranges) {
            if (lu_symbolic)
              plan->upload_lu(range.values, range.u_values, range.first, range.last);
            else
              plan->upload(range.values, range.first, range.last);
          }
        }
        if (!factor_failed) {  // the factorization has returned (the queue is closed): the factor is complete
          if (lu_symbolic) plan->finish_lu(*lu);
          plan->finish_values(generation());
          report.plan->upload_seconds = any ? seconds_since(first_upload) : 0;
          report.plan->pinned = pinned && pinned->ok();
        }
      }
    } catch (...) {
      error = std::current_exception();
    }
    while (queue.pop_all(ranges)) {
    }  // drain what a failed plan left
    {
      std::lock_guard<std::mutex> lock(plan_fed_mutex);
      plan_fed.store(true, std::memory_order_release);
    }
    plan_fed_cv.notify_all();
  }

  /// Whether this factorization gets a partitioned inverse: asked for, a Cholesky factor, no failure of it
  /// so far, and a band above 1 (or none chosen yet).
  bool wants_partitioned() const {
    return options.partitioned_inverse && !lu_symbolic && partitioned_problem.empty() &&
           (!partitioned_chosen || partitioned_band > 1);
  }

  void publish_choice(index_t band, index_t pieces) {
    {
      std::lock_guard<std::mutex> lock(partitioned_mutex);
      partitioned_band = band;
      partitioned_pieces = pieces;
      partitioned_chosen = true;
    }
    partitioned_cv.notify_all();
  }

  /// The partitioned inverse's thread during one factorization. Beside the factorization (once per
  /// analysis): the bands to time (partition_trial_bands) and the structure of the first, whose band is
  /// published as the choice so far. Then, once the per-supernode plan holds the new values
  /// (go_partitioned): while no plan is kept, the measured choice (choose_band_by_timing); then the whole
  /// factor in one upload to the kept plan and the wait for its last inversion. Its failures stay here
  /// (partitioned_problem): the per-supernode plan solves instead.
  void feed_partitioned() {
    try {
      SPADE_CUDA_CHECK(cudaSetDevice(device));
      if (!partitioned_chosen) {
        const SupernodalSchedule schedule = build_schedule(*symbolic);
        trial_bands =
            partition_trial_bands(*symbolic, schedule, kSolveHandoffSeconds, gpu_bandwidth_estimate(), kPartitionTrials);
        if (trial_bands.empty()) {
          publish_choice(1, 0);
        } else {
          partitioned_structure = partition_for_solve(symbolic, trial_bands.front());
          publish_choice(trial_bands.front(), partitioned_structure->merged_pieces);
        }
      }
      // The rest waits until the per-supernode plan holds the values, so that it takes no processor time
      // from the factorization and no GPU time from that plan's uploads.
      const double* values = nullptr;
      std::uint64_t generation = 0;
      {
        std::unique_lock<std::mutex> lock(partitioned_mutex);
        partitioned_cv.wait(lock, [this] { return partitioned_go || partitioned_cancel; });
        if (!partitioned_cancel) values = partitioned_values, generation = partitioned_generation;
      }
      if (values != nullptr && !partitioned && !trial_bands.empty()) choose_band_by_timing(values, generation);
      if (values != nullptr && partitioned && partitioned->generation() != generation) {
        partitioned->begin_values();
        partitioned->upload(values, 0, symbolic->num_supernodes - 1);
        partitioned->finish_values(generation);
      }
      if (partitioned && partitioned->generation() == generation && generation != 0) partitioned_done = Clock::now();
    } catch (const std::exception& e) {
      // The plan stays (the residual may hold memory on its stream) but serves no solve again.
      partitioned_problem = std::string("the partitioned inverse failed: ") + e.what();
    }
    if (!partitioned_chosen) publish_choice(1, 0);
    partitioned_finished.store(true, std::memory_order_release);
  }

  /// The measured choice of the band (partitioned_inverse.hpp): the plan of each of trial_bands in turn,
  /// fed `values` and timed (GpuSolvePlan::time_solve); the fastest is kept as `partitioned`, the others
  /// freed as the next is built. A band whose merged panels alone, read once by each sweep at the device's
  /// bandwidth, take longer than the fastest solve so far is skipped, and so is one that does not fit the
  /// device memory beside the plans kept. A cancel (a new factorization) stops the trials: the fastest so
  /// far is kept, and where none was timed the next factorization's thread starts them again.
  void choose_band_by_timing(const double* values, std::uint64_t generation) {
    const double bandwidth = gpu_bandwidth_estimate();
    std::unique_ptr<GpuSolvePlan> best;
    double best_seconds = 0;
    std::string problem;
    std::size_t next = 0;
    for (; next < trial_bands.size(); ++next) {
      {
        std::lock_guard<std::mutex> lock(partitioned_mutex);
        if (partitioned_cancel) break;
      }
      const index_t band = trial_bands[next];
      SolveStructure structure = partitioned_structure && partitioned_structure->band == band
                                     ? std::move(*partitioned_structure)
                                     : partition_for_solve(symbolic, band);
      partitioned_structure.reset();
      const double bytes = static_cast<double>(structure.solve->panel_offset.back()) * sizeof(double);
      if (best && 2 * bytes / bandwidth >= best_seconds) continue;
      SupernodalSchedule merged = build_schedule(*structure.solve);
      const std::size_t need = GpuSolvePlan::memory_estimate(structure, merged).total();
      // Beside the per-supernode plan (complete: go_partitioned comes after it), the residual and the
      // fastest plan so far.
      const std::size_t others = plan->memory().total() + refinement_bytes() + (best ? best->memory().total() : 0);
      if (std::string why = memory_problem("the partitioned inverse", need, need + others); !why.empty()) {
        if (problem.empty()) problem = why;
        continue;
      }
      const index_t pieces = structure.merged_pieces;
      auto candidate = std::make_unique<GpuSolvePlan>(std::move(structure), std::move(merged));
      candidate->begin_values();
      candidate->upload(values, 0, symbolic->num_supernodes - 1);
      candidate->finish_values(generation);
      const double seconds = candidate->time_solve(kPartitionTrialSolves);
      partition_trials.push_back({band, seconds});
      if (!best || seconds < best_seconds) {
        best = std::move(candidate);
        best_seconds = seconds;
        std::lock_guard<std::mutex> lock(partitioned_mutex);
        partitioned_band = band;
        partitioned_pieces = pieces;
      }
    }
    if (!best) {
      if (next == trial_bands.size()) partitioned_problem = problem;  // every band was refused its memory
      return;
    }
    trial_bands.clear();
    partitioned = std::move(best);
  }

  /// Lets the partitioned inverse's thread upload the current factor (whose per-supernode plan is ready).
  void go_partitioned() {
    {
      std::lock_guard<std::mutex> lock(partitioned_mutex);
      partitioned_values = factor->values().data();
      partitioned_generation = factor->generation();
      partitioned_go = true;
    }
    partitioned_cv.notify_all();
  }

  /// Joins the finished (or closed and cancelled) worker and copies what it leaves into the report.
  void join_partitioned() {
    partitioned_worker.join();
    if (!report.plan) return;
    report.plan->partitioned_problem = partitioned_problem;
    report.plan->partition_band = partitioned_band;
    report.plan->merged_pieces = partitioned_pieces;
    report.plan->partition_trials = partition_trials;
    if (partitioned && partitioned->generation() != 0)
      report.plan->partitioned_seconds = std::chrono::duration<double>(partitioned_done - factor_returned).count();
  }

  /// Cancels the partitioned inverse's upload (unless it has started) and joins its thread.
  void stop_partitioned() {
    if (!partitioned_worker.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(partitioned_mutex);
      partitioned_cancel = true;
    }
    partitioned_cv.notify_all();
    join_partitioned();
  }

  /// stop_partitioned(), and the partitioned inverse of this analysis is forgotten. After residual.reset():
  /// the residual may hold memory on the plan's stream.
  void forget_partitioned() {
    stop_partitioned();
    partitioned.reset();
    partitioned_structure.reset();
    trial_bands.clear();
    partition_trials.clear();
    partitioned_problem.clear();
    partitioned_chosen = false;
    partitioned_band = 1;
    partitioned_pieces = 0;
  }

  /// The plan this solve runs on: the partitioned inverse's once it holds the current values (its thread,
  /// finished, is joined here; a running one is not waited for), else the per-supernode plan. The residual
  /// moves to that plan's stream, and the plan captures graphs only where that thread is not running.
  GpuSolvePlan& solving_plan(bool& used_partitioned) {
    if (partitioned_worker.joinable() && partitioned_finished.load(std::memory_order_acquire)) join_partitioned();
    used_partitioned = !partitioned_worker.joinable() && partitioned && partitioned_problem.empty() &&
                       partitioned->generation() == generation();
    GpuSolvePlan& p = used_partitioned ? *partitioned : *plan;
    residual->set_stream(p.stream());
    // No graph captures while the partitioned inverse's thread uploads and times beside this one: its
    // handles' destruction synchronizes the device, which fails a capture (GpuSolvePlan::set_capture).
    p.set_capture(!partitioned_worker.joinable());
    return p;
  }
};

Solver::Solver(const SolverOptions& options) : impl_(std::make_unique<Impl>()) {
  impl_->options = options;
  impl_->report.placement = options.placement;
  if (options.placement == Placement::cpu) impl_->device_problem = "placement cpu keeps this solver off the GPU";
}

Solver::~Solver() = default;

void Solver::analyze(const SparseMatrix& A) {
  Impl& s = *impl_;
  s.stop_partitioned();
  s.pinned.reset();
  s.gpu_correction.reset();
  s.residual.reset();
  s.plan.reset();
  s.forget_partitioned();
  s.factor.reset();
  s.lu.reset();
  s.A.reset();
  s.symbolic.reset();
  s.lu_symbolic.reset();
  s.use_gpu = false;
  s.report = Report{};
  s.report.placement = s.options.placement;
  // The CUDA context takes a while to come up: do it beside the analysis.
  std::thread probe;
  std::exception_ptr probe_error;
  if (s.options.placement != Placement::cpu && !s.device_ok) {
    probe = start_thread("GPU probe", [&] {
      try {
        s.device_ok = probe_device(s.device, s.device_description, s.device_problem);
        if (s.device_ok) load_gpu_libraries();
      } catch (...) {
        probe_error = std::current_exception();
      }
    });
  }
  try {
    const Factorization wanted = s.options.factorization;
    bool symmetric_pattern = true;
    if (wanted == Factorization::automatic && A.is_square()) {
      const SparseMatrix t = A.transpose();
      symmetric_pattern = t.col_ptr() == A.col_ptr() && t.row_ind() == A.row_ind();
    }
    if (wanted == Factorization::lu) {
      s.analyze_for_lu(A, "LU requested");
    } else if (!symmetric_pattern) {
      s.analyze_for_lu(A, "LU: the pattern of A is not symmetric");
    } else {
      s.symbolic = spade::analyze(A, s.options.analyze);
      s.report.factorization = Factorization::cholesky;
      s.report.factorization_reason =
          wanted == Factorization::cholesky ? "Cholesky requested" : "Cholesky: the pattern of A is symmetric";
    }
  } catch (...) {
    if (probe.joinable()) probe.join();
    throw;
  }
  if (probe.joinable()) probe.join();
  if (probe_error) {
    try {
      std::rethrow_exception(probe_error);
    } catch (const std::exception& e) {
      s.device_ok = false;
      s.device_problem = std::string("the GPU could not be initialized: ") + e.what();
    }
  }
  if (s.lu_symbolic) return;  // its phases are recorded
  s.set_phase("order", s.symbolic->ordering_seconds);
  s.set_phase("symbolic", s.symbolic->symbolic_seconds);
}

void Solver::factorize(const SparseMatrix& A) {
  Impl& s = *impl_;
  if (!s.symbolic) throw InvalidInput("Solver::factorize: call analyze() first");
  if (s.lu_symbolic || s.options.factorization != Factorization::automatic) {
    s.factorize_streaming(A);
    return;
  }
  // automatic: the Cholesky where it can, else the LU, saying why.
  std::string why;
  if (A.rows() == s.symbolic->n && A.cols() == s.symbolic->n && !A.is_symmetric()) {
    why = "LU: A's values are not symmetric";
  } else {
    try {
      s.factorize_streaming(A);
      return;
    } catch (const NumericalError& e) {
      if (e.kind() != NumericalError::Kind::not_positive_definite) throw;
      why = std::string("LU: the Cholesky found A not positive definite (") + e.what() + ")";
    }
  }
  s.analyze_for_lu(A, why);
  s.factorize_streaming(A);
}

void Solver::Impl::factorize_streaming(const SparseMatrix& A) {
  Impl& s = *this;
  const Placement placement = s.options.placement;
  if (placement == Placement::gpu && !s.device_ok)
    throw ResourceError("the GPU solve was requested (placement gpu), but " + s.device_problem);
  if (A.rows() != s.symbolic->n || A.cols() != s.symbolic->n)
    throw InvalidInput("factorize: the matrix is " + std::to_string(A.rows()) + " x " + std::to_string(A.cols()) +
                       ", the analysis was of order " + std::to_string(s.symbolic->n));
  // The partitioned inverse's uploads read the factor's values, which this factorization replaces.
  s.stop_partitioned();
  s.join_plan_worker();
  s.A = A;
  const bool try_gpu = placement != Placement::cpu && s.device_ok;

  std::atomic<bool> factor_failed{false};
  std::string problem;
  std::exception_ptr gpu_error;
  if (try_gpu) {
    s.queue.open();
    s.streaming = true;
    // A Cholesky factor's values are page-locked for a refactorization's uploads; an LU's go up pageable.
    const double* existing = s.factor ? s.factor->values().data() : nullptr;
    s.plan_fed.store(false, std::memory_order_relaxed);
    s.plan_worker =
        start_thread("GPU plan", [&, existing] { s.feed_plan(existing, factor_failed, problem, gpu_error); });
    if (s.wants_partitioned()) {
      s.partitioned_go = s.partitioned_cancel = false;
      s.partitioned_finished = false;
      try {
        s.partitioned_worker = start_thread("partitioned inverse", [&s] { s.feed_partitioned(); });
      } catch (...) {
        factor_failed = true;
        s.streaming = false;
        s.queue.close();
        s.join_plan_worker();
        throw;
      }
    }
  }
  // The plan's thread takes a processor of its own beside a first factorization (a refactorization keeps
  // its factor's threads): with a factoring thread on every processor it waits for the scheduler each time
  // a range arrives, and the caller waits for it after the factorization (docs/benchmarks/solve.md).
  const int processors_left = try_gpu ? 1 : 0;
  const auto t0 = Clock::now();
  try {
    if (s.lu_symbolic) {
      if (s.lu) {
        s.lu->refactorize(A);
      } else {
        LuFactorOptions fo;
        fo.threads = s.options.threads;
        fo.processors_left = processors_left;
        fo.pivot_tolerance = s.lu_pivot_tolerance;
        fo.progress = [impl = &s](const LuFactor& f, index_t first, index_t last) {
          if (impl->streaming) impl->queue.push({f.l_values().data(), f.u_values().data(), first, last});
        };
        s.gpu_correction.reset();  // a new factor may take the old one's address and generation
        s.correction.reset();
        s.lu.emplace(s.lu_symbolic, A, fo);
      }
    } else if (s.factor) {
      s.factor->refactorize(A);
    } else {
      FactorOptions fo;
      fo.threads = s.options.threads;
      fo.processors_left = processors_left;
      fo.progress = [impl = &s](const NumericFactor& f, index_t first, index_t last) {
        if (impl->streaming) impl->queue.push({f.values().data(), nullptr, first, last});
      };
      s.factor.emplace(s.symbolic, A, fo);
    }
  } catch (...) {
    factor_failed = true;
    s.streaming = false;
    s.queue.close();
    s.join_plan_worker();
    s.stop_partitioned();
    if (s.plan) s.plan->begin_values();  // the device copy is not of any valid factor
    throw;
  }
  const double numeric = seconds_since(t0);
  s.streaming = false;
  s.queue.close();
  const auto returned = Clock::now();
  s.factor_returned = returned;
  if (s.plan_worker.joinable()) s.wait_plan_fed();
  const double flops = s.lu_symbolic ? s.lu_symbolic->flops : s.symbolic->flops;
  s.report.threads = s.lu ? s.lu->threads() : s.factor->threads();
  if (s.lu) s.report.perturbed_pivots = s.lu->perturbed_pivots();
  s.set_phase("numeric", numeric, numeric > 0 ? flops * 1e-9 / numeric : 0);

  if (!try_gpu) {
    s.host_placement();
    return;
  }
  if (gpu_error || !problem.empty()) {
    s.gpu_failed(problem, gpu_error);
    return;
  }
  if (s.partitioned_worker.joinable()) {  // the band is chosen before the plan is built: no wait for the plan
    std::unique_lock<std::mutex> lock(s.partitioned_mutex);
    s.partitioned_cv.wait(lock, [&s] { return s.partitioned_chosen; });
  }
  s.report.plan->partition_band = s.partitioned_band;
  s.report.plan->merged_pieces = s.partitioned_pieces;
  s.report.plan->partitioned_seconds = 0;
  s.gpu_placement(returned);
  if (s.partitioned_worker.joinable()) s.go_partitioned();  // it finishes on its own
}

void Solver::Impl::gpu_solve(double* X, index_t nrhs, index_t ldx, Memory memory, Transpose trans, SolveTimes& times) {
  times.gpu = true;
  const std::uint64_t gen = generation();
  GpuSolvePlan& plan = solving_plan(times.partitioned);
  // An escalated LU's solves are corrected (GpuLuCorrection), with a device block W for the second solve.
  GpuLuCorrection* corrected = lu_escalated() ? gpu_lu_correction() : nullptr;
  const auto solve_block = [&](double* Y, index_t ldy, index_t k, double* W) {
    if (corrected) {
      corrected->solve(plan, Y, ldy, k, trans, W, times.forward_seconds, times.backward_seconds, times.passes);
      return;
    }
    plan.solve(Y, ldy, Y, ldy, k, gen, trans);
    times.forward_seconds += plan.last_forward_seconds();
    times.backward_seconds += plan.last_backward_seconds();
    times.passes += plan.last_passes();
  };
  const index_t n = symbolic->n;
  const cudaStream_t stream = plan.stream();
  if (memory == Memory::device && !corrected) {
    solve_block(X, ldx, nrhs, nullptr);
    return;
  }
  // Host columns go through a device block, and W, in chunks that fit the GPU's memory.
  if (memory == Memory::host) check_finite(X, n, nrhs, ldx);
  const bool host = memory == Memory::host;
  const index_t ld = std::max<index_t>(n, 1), chunk = columns_that_fit(n, nrhs, (host ? 1 : 0) + (corrected ? 1 : 0));
  std::optional<DeviceBlock> block, W;
  if (host) block.emplace(static_cast<std::size_t>(n) * chunk, stream);
  if (corrected) W.emplace(static_cast<std::size_t>(n) * chunk, stream);
  for (index_t c = 0; c < nrhs; c += chunk) {
    const index_t k = std::min(chunk, nrhs - c);
    double* Xc = X + static_cast<offset_t>(c) * ldx;
    double* W_block = W ? W->get() : nullptr;
    if (!host) {
      solve_block(Xc, ldx, k, W_block);
      continue;
    }
    copy_block(block->get(), ld, Xc, ldx, n, k, cudaMemcpyHostToDevice, stream);
    solve_block(block->get(), ld, k, W_block);
    copy_block(Xc, ldx, block->get(), ld, n, k, cudaMemcpyDeviceToHost, stream);
    SPADE_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
}

void Solver::solve(double* X, index_t nrhs, index_t ldx, Memory memory) {
  Impl& s = *impl_;
  s.require_factor("Solver::solve");
  s.check_shape(nrhs, ldx, "Solver::solve");
  const index_t n = s.symbolic->n;
  const auto t0 = Clock::now();
  SolveTimes times;
  times.nrhs = nrhs;
  if (s.use_gpu) {
    s.gpu_solve(X, nrhs, ldx, memory, Transpose::no, times);
  } else if (s.lu && memory == Memory::device) {
    if (!s.device_ok) throw InvalidInput("Solver::solve: device memory given, but " + s.device_problem);
    std::vector<double> host(static_cast<std::size_t>(n) * nrhs);
    copy_block(host.data(), std::max<index_t>(n, 1), X, ldx, n, nrhs, cudaMemcpyDeviceToHost, nullptr);
    SPADE_CUDA_CHECK(cudaStreamSynchronize(nullptr));
    s.lu_host_solve(host.data(), nrhs, std::max<index_t>(n, 1), Transpose::no);
    copy_block(X, ldx, host.data(), std::max<index_t>(n, 1), n, nrhs, cudaMemcpyHostToDevice, nullptr);
    SPADE_CUDA_CHECK(cudaStreamSynchronize(nullptr));
  } else if (s.lu) {
    s.lu_host_solve(X, nrhs, ldx, Transpose::no);
  } else if (memory == Memory::device) {
    if (!s.device_ok) throw InvalidInput("Solver::solve: device memory given, but " + s.device_problem);
    std::vector<double> host(static_cast<std::size_t>(n) * nrhs);
    copy_block(host.data(), std::max<index_t>(n, 1), X, ldx, n, nrhs, cudaMemcpyDeviceToHost, nullptr);
    SPADE_CUDA_CHECK(cudaStreamSynchronize(nullptr));
    solve_in_place(*s.factor, host.data(), nrhs, std::max<index_t>(n, 1));
    copy_block(X, ldx, host.data(), std::max<index_t>(n, 1), n, nrhs, cudaMemcpyHostToDevice, nullptr);
    SPADE_CUDA_CHECK(cudaStreamSynchronize(nullptr));
  } else {
    solve_in_place(*s.factor, X, nrhs, ldx);
  }
  times.seconds = seconds_since(t0);
  s.report.last_solve = times;
  const double flops = s.lu_symbolic ? s.lu_symbolic->solve_flops : s.symbolic->solve_flops;
  s.set_phase("solve", times.seconds, times.seconds > 0 ? flops * nrhs * 1e-9 / times.seconds : 0);
}

void Solver::solve_transposed(double* X, index_t nrhs, index_t ldx) {
  Impl& s = *impl_;
  if (!s.lu) {
    solve(X, nrhs, ldx);
    return;
  }
  s.require_factor("Solver::solve_transposed");
  s.check_shape(nrhs, ldx, "Solver::solve_transposed");
  const auto t0 = Clock::now();
  SolveTimes times;
  times.nrhs = nrhs;
  if (s.use_gpu) {
    s.gpu_solve(X, nrhs, ldx, Memory::host, Transpose::yes, times);
  } else {
    s.lu_host_solve(X, nrhs, ldx, Transpose::yes);
  }
  times.seconds = seconds_since(t0);
  s.report.last_solve = times;
}

RefinementResult Solver::solve_refined(const double* B, index_t ldb, double* X, index_t ldx, index_t nrhs,
                                       Memory memory) {
  return solve_refined(B, ldb, X, ldx, nrhs, impl_->options.refine, memory);
}

RefinementResult Solver::solve_refined(const double* B, index_t ldb, double* X, index_t ldx, index_t nrhs,
                                       const RefineOptions& refine, Memory memory) {
  Impl& s = *impl_;
  s.require_factor("Solver::solve_refined");
  s.check_shape(nrhs, ldb, "Solver::solve_refined");
  s.check_shape(nrhs, ldx, "Solver::solve_refined");
  const index_t n = s.symbolic->n, ld = std::max<index_t>(n, 1);
  const auto t0 = Clock::now();
  RefinementResult result;
  if (s.use_gpu) {
    if (memory == Memory::host) check_finite(B, n, nrhs, ldb);
    bool partitioned = false;
    GpuSolvePlan& plan = s.solving_plan(partitioned);  // one plan for the whole refinement
    const cudaStream_t stream = plan.stream();
    // An LU with replaced pivots may need a corrected stage (as lu_solve_refined): its first stage's X and
    // the corrected solve's W take two more blocks.
    const bool may_correct = s.lu && LuCorrection::worthwhile(*s.lu);
    // B and X are used where they are (device memory, leading dimension n or one column, X apart from B);
    // every other block (n x chunk, leading dimension n) comes from the residual's workspace, kept from
    // one call to the next: the second iterate, the residual and the correction, B's and X's where they
    // are not used in place, and the corrected stage's two.
    const bool b_in_place = memory == Memory::device && (ldb == ld || nrhs == 1);
    const bool x_in_place = memory == Memory::device && (ldx == ld || nrhs == 1) && !overlapping(B, ldb, X, ldx, n, nrhs);
    const int blocks = 3 + (b_in_place ? 0 : 1) + (x_in_place ? 0 : 1) + (may_correct ? 2 : 0);
    const std::size_t all = static_cast<std::size_t>(ld) * std::max<index_t>(nrhs, 1) * blocks;
    const index_t chunk = s.residual->workspace_bytes() >= all * sizeof(double) ? std::max<index_t>(nrhs, 1)
                                                                               : columns_that_fit(n, nrhs, blocks);
    const std::size_t count = static_cast<std::size_t>(ld) * chunk;
    double* next_block = s.residual->workspace(count * blocks);
    auto block = [&] {
      double* p = next_block;
      next_block += count;
      return p;
    };
    double* const other = block();
    double* const r = block();
    double* const d = block();
    double* const b_copy = b_in_place ? nullptr : block();
    double* const x_copy = x_in_place ? nullptr : block();
    double* const first = may_correct ? block() : nullptr;
    double* const w = may_correct ? block() : nullptr;
    const cudaMemcpyKind in = memory == Memory::host ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToDevice;
    const cudaMemcpyKind out = memory == Memory::host ? cudaMemcpyDeviceToHost : cudaMemcpyDeviceToDevice;
    // The iterates live in two blocks: a correction's evaluation writes X + D into the block that does not
    // hold X (GpuResidual::evaluate_corrected), so that the X saved for a step that makes things worse is
    // never copied, and the update costs no pass of its own.
    struct GpuOps {
      Impl& s;
      GpuSolvePlan& plan;
      const double* b;
      double* iterate[2];  // the two blocks of X
      double *r, *d;       // B - A X, and the correction solved from it
      index_t n, ld, nrhs;
      std::uint64_t generation;
      GpuLuCorrection* correction;  // null: solves with the factor alone
      double* w;                    // the corrected solve's workspace
      bool fp32;                    // corrections read the plan's FP32 copy (never with a correction: its K
                                    // is exact for the FP64 solves it was built from)
      int current = 0, saved = 0;   // the blocks of X and of the X that save() kept
      bool pending = false;         // d holds a correction that the next evaluate() adds to X

      double* x() const { return iterate[current]; }
      void first_solve() {
        pending = false;
        if (!correction) {
          plan.solve(b, ld, x(), ld, nrhs, generation, Transpose::no);
          return;
        }
        copy_block(x(), ld, b, ld, n, nrhs, cudaMemcpyDeviceToDevice, plan.stream());
        corrected_solve(x());
      }
      void corrected_solve(double* y) {
        double forward = 0, backward = 0;
        int passes = 0;
        correction->solve(plan, y, ld, nrhs, Transpose::no, w, forward, backward, passes);
      }
      RefinementStep evaluate() {
        if (!pending) return s.residual->evaluate(b, x(), r, nrhs);
        pending = false;
        const int next = 1 - current;
        const RefinementStep step = s.residual->evaluate_corrected(b, x(), d, iterate[next], r, nrhs);
        current = next;
        return step;
      }
      void save() { saved = current; }
      void correct() {
        if (correction) {  // in place, then r and d trade blocks
          corrected_solve(r);
          std::swap(r, d);
        } else {
          plan.solve(r, ld, d, ld, nrhs, generation, Transpose::no, fp32);
        }
        pending = true;
      }
      void restore() { current = saved; }
      bool single() const { return fp32; }
      void use_fp64() { fp32 = false; }
    };
    // FP32 corrections where asked, by default where they save time: on a bandwidth-bound plan.
    const bool fp32 = (refine.corrections == CorrectionPrecision::fp32 ||
                       (refine.corrections == CorrectionPrecision::automatic && plan.bandwidth_bound())) &&
                      plan.make_single_copy();
    // The whole refinement on the device, as one CUDA graph (GpuSolvePlan::refine), where its corrections
    // solve with the factor alone and one pass solves the right-hand sides: there the host's round trip
    // per step is what a refinement spends beyond its solves on a small factor. (An LU's corrected stage
    // and passes of more right-hand sides keep the host's loop.)
    const bool on_device = !may_correct && n >= 1 && nrhs >= 1 && nrhs <= plan.max_width() &&
                           refine.max_steps >= 0 && refine.max_steps <= GpuSolvePlan::kDeviceRefineSteps;
    for (index_t c = 0; c == 0 || c < nrhs; c += chunk) {  // once for nrhs = 0: the history has step 0
      const index_t k = std::min(chunk, nrhs - c);
      const double* Bc = B + static_cast<offset_t>(c) * ldb;
      double* Xc = X + static_cast<offset_t>(c) * ldx;
      if (!b_in_place) copy_block(b_copy, ld, Bc, ldb, n, k, in, stream);
      GpuOps ops{s, plan, b_in_place ? Bc : b_copy, {x_in_place ? Xc : x_copy, other}, r, d, n, ld, k,
                 s.generation(), nullptr, nullptr, fp32};
      RefinementResult chunk_result;
      const bool graphed = on_device && plan.refine(*s.residual, ops.b, ops.iterate, r, d, k, s.generation(),
                                                    refine, fp32, chunk_result, ops.current);
      if (!graphed) chunk_result = refine_loop(ops, refine);
      // Where that stopped above the tolerance with steps left: the corrected stage, as lu_solve_refined's.
      const int used = static_cast<int>(chunk_result.steps.size()) - 1;
      if (may_correct && !chunk_result.converged && used < refine.max_steps) {
        ops.correction = s.gpu_lu_correction();
        ops.w = w;
        ops.fp32 = false;
        copy_block(first, ld, ops.x(), ld, n, k, cudaMemcpyDeviceToDevice, stream);
        RefineOptions rest = refine;
        rest.max_steps = refine.max_steps - used - 1;
        if (!merge_corrected_stage(chunk_result, refine_loop(ops, rest)))
          copy_block(ops.x(), ld, first, ld, n, k, cudaMemcpyDeviceToDevice, stream);
      }
      merge_refinement(result, chunk_result, c == 0);
      if (ops.x() != Xc) copy_block(Xc, ldx, ops.x(), ld, n, k, out, stream);
      SPADE_CUDA_CHECK(cudaStreamSynchronize(stream));
    }
  } else {
    // An LU refines through lu_solve_refined (with the factor, then with the correction of its replaced
    // pivots where they stall it).
    const SolveFunction host_solve = [&s](double* Y, index_t k, index_t ldy) { solve_in_place(*s.factor, Y, k, ldy); };
    if (memory == Memory::device) {
      if (!s.device_ok) throw InvalidInput("Solver::solve_refined: device memory given, but " + s.device_problem);
      std::vector<double> hb(static_cast<std::size_t>(n) * nrhs), hx(hb.size());
      copy_block(hb.data(), ld, B, ldb, n, nrhs, cudaMemcpyDeviceToHost, nullptr);
      SPADE_CUDA_CHECK(cudaStreamSynchronize(nullptr));
      result = s.lu ? lu_solve_refined(*s.A, *s.lu, hb.data(), ld, hx.data(), ld, nrhs, Transpose::no, refine,
                                       s.lu_correction())
                    : spade::solve_refined(*s.A, host_solve, hb.data(), ld, hx.data(), ld, nrhs, refine);
      copy_block(X, ldx, hx.data(), ld, n, nrhs, cudaMemcpyHostToDevice, nullptr);
      SPADE_CUDA_CHECK(cudaStreamSynchronize(nullptr));
    } else {
      result = s.lu ? lu_solve_refined(*s.A, *s.lu, B, ldb, X, ldx, nrhs, Transpose::no, refine, s.lu_correction())
                    : spade::solve_refined(*s.A, host_solve, B, ldb, X, ldx, nrhs, refine);
    }
  }
  // Static pivoting replaces a pivot where its diagonal block offers no good one. At the default tolerance
  // the replacements are tiny, but each multiplies the factor's growth by up to 1 / tolerance, and the
  // solves can be too inaccurate for refinement to converge, corrected or not (nnc1374, NSR8K:
  // docs/benchmarks/lu_correction.md). An LU whose refinement did not converge with replaced pivots is factored again at
  // kLuCorrectedPivotTolerance, which bounds the growth, and refined with the exact correction of its
  // (more) replaced pivots; later factorizations of this analysis keep that tolerance.
  if (s.lu && !result.converged && s.lu->perturbed_pivots() > 0 && !s.lu_escalated()) {
    char line[240];
    std::snprintf(line, sizeof line,
                  " (static pivoting: %d replaced pivots and refinement stopped at berr %.1e; factored again at "
                  "pivot tolerance %g",
                  static_cast<int>(s.lu->perturbed_pivots()), result.solution.berr, kLuCorrectedPivotTolerance);
    const std::string reason = s.report.factorization_reason + line;
    const auto factor_at = [&s](double tolerance) {
      s.lu_pivot_tolerance = tolerance;
      s.lu.reset();
      s.factorize_streaming(*s.A);
    };
    factor_at(kLuCorrectedPivotTolerance);
    if (LuCorrection::worthwhile(*s.lu)) {
      result = solve_refined(B, ldb, X, ldx, nrhs, refine, memory);
      std::snprintf(line, sizeof line, ": %d replaced pivots, corrected, %s at berr %.1e)",
                    static_cast<int>(s.lu->perturbed_pivots()), result.converged ? "converged" : "stopped",
                    result.solution.berr);
    } else {  // too many to correct: the first factor and its result stay
      std::snprintf(line, sizeof line, ": %d replaced pivots, too many to correct; the first factor kept)",
                    static_cast<int>(s.lu->perturbed_pivots()));
      factor_at(LuFactorOptions{}.pivot_tolerance);
    }
    s.report.factorization_reason = reason + line;
  }
  s.set_phase("refine", seconds_since(t0));
  return result;
}

const SymbolicFactor& Solver::symbolic() const {
  if (!impl_->symbolic) throw InvalidInput("Solver::symbolic: call analyze() first");
  return *impl_->symbolic;
}

std::shared_ptr<const SymbolicFactor> Solver::symbolic_ptr() const { return impl_->symbolic; }

const NumericFactor& Solver::factor() const {
  if (impl_->lu_symbolic) throw InvalidInput("Solver::factor: the factor is an LU (lu_factor())");
  impl_->require_factor("Solver::factor");
  return *impl_->factor;
}

const LuFactor& Solver::lu_factor() const {
  if (!impl_->lu_symbolic) throw InvalidInput("Solver::lu_factor: the factor is a Cholesky (factor())");
  impl_->require_factor("Solver::lu_factor");
  return *impl_->lu;
}

bool Solver::on_gpu() const { return impl_->use_gpu; }
const Report& Solver::report() const { return impl_->report; }
const SolverOptions& Solver::options() const { return impl_->options; }

bool Solver::wait_for_partitioned_inverse() {
  Impl& s = *impl_;
  if (s.partitioned_worker.joinable()) s.join_partitioned();
  return s.use_gpu && s.partitioned && s.partitioned_problem.empty() && s.partitioned->generation() == s.generation();
}

void Solver::set_gpu_spin_limit(long long polls) {
  Impl& s = *impl_;
  if (!s.plan) throw InvalidInput("Solver::set_gpu_spin_limit: no GPU plan");
  if (s.partitioned_worker.joinable()) s.join_partitioned();
  s.plan->set_spin_limit(polls);
  if (s.partitioned) s.partitioned->set_spin_limit(polls);
}

}  // namespace spade
