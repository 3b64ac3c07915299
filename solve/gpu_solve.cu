// The GPU solve plan, the device residual for refinement, and host page-locking (see gpu_solve.hpp).
#include "gpu_solve.hpp"

#include <cublas_v2.h>
#include <cusolverDn.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <utility>

#include "../kernels/cuda_check.hpp"
#include "../kernels/residual_kernels.hpp"
#include "../kernels/supernodal_kernels.hpp"
#include "lu_correction.hpp"
#include "refine_loop.hpp"
#include "spade/error.hpp"

namespace spade {
namespace {

static_assert(SupernodalSchedule::kTile == 32 && SupernodalSchedule::kGroupEntries == 512 &&
                  SupernodalSchedule::kGroupColumns == 64,
              "kernels/supernodal_solve.cu has the schedule's tile and group sizes built in");
static_assert(sizeof(offset_t) == sizeof(long long), "offsets travel to the device as long long");

void cublas_check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw ResourceError(std::string("cuBLAS error in ") + what + ": status " + std::to_string(static_cast<int>(status)));
}
void cusolver_check(cusolverStatus_t status, const char* what) {
  if (status != CUSOLVER_STATUS_SUCCESS)
    throw ResourceError(std::string("cuSOLVER error in ") + what + ": status " + std::to_string(static_cast<int>(status)));
}

/// Device memory of `count` elements, taken from and returned to the device's memory pool in the order of
/// `stream` (cudaMallocAsync / cudaFreeAsync): freeing never synchronizes the device.
template <typename T>
class DeviceArray {
 public:
  DeviceArray() = default;
  DeviceArray(std::size_t count, cudaStream_t stream) : stream_(stream), count_(count) {
    SPADE_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&data_), std::max<std::size_t>(count, 1) * sizeof(T), stream));
  }
  DeviceArray(const std::vector<T>& host, cudaStream_t stream) : DeviceArray(host.size(), stream) {
    if (!host.empty())
      SPADE_CUDA_CHECK(cudaMemcpyAsync(data_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice, stream));
  }
  ~DeviceArray() {
    if (data_ != nullptr) cudaFreeAsync(data_, stream_);
  }
  DeviceArray(DeviceArray&& o) noexcept { *this = std::move(o); }
  DeviceArray& operator=(DeviceArray&& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(stream_, o.stream_);
    std::swap(count_, o.count_);
    return *this;
  }
  T* get() const { return data_; }
  std::size_t size() const { return count_; }
  void zero(cudaStream_t stream) const {
    SPADE_CUDA_CHECK(cudaMemsetAsync(data_, 0, std::max<std::size_t>(count_, 1) * sizeof(T), stream));
  }

 private:
  T* data_ = nullptr;
  cudaStream_t stream_ = nullptr;
  std::size_t count_ = 0;
};

/// Pinned host memory for small device-to-host reads that ride on a stream.
template <typename T>
class PinnedArray {
 public:
  explicit PinnedArray(std::size_t count) {
    SPADE_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&data_), std::max<std::size_t>(count, 1) * sizeof(T)));
  }
  ~PinnedArray() { cudaFreeHost(data_); }
  PinnedArray(const PinnedArray&) = delete;
  PinnedArray& operator=(const PinnedArray&) = delete;
  T* get() const { return data_; }

 private:
  T* data_ = nullptr;
};

template <typename To, typename From>
std::vector<To> converted(const std::vector<From>& from) {
  return std::vector<To>(from.begin(), from.end());
}

/// The entry of `graphs` (CUDA graphs kept by the key of what they run, at most `most`) for `key`, marked
/// used at `now`; null at a key's first sight, which is remembered in a new entry or in place of the least
/// recently used one (its graph destroyed): a caller with ever new arguments pays no capture.
template <typename Graph, typename Key>
Graph* recurring_graph(std::vector<Graph>& graphs, const Key& key, std::uint64_t now, std::size_t most) {
  auto it = std::find_if(graphs.begin(), graphs.end(), [&](const Graph& g) { return g.key == key; });
  if (it != graphs.end()) {
    it->used = now;
    return &*it;
  }
  if (graphs.size() < most) {
    it = graphs.emplace(graphs.end());
  } else {
    it = std::min_element(graphs.begin(), graphs.end(), [](const Graph& a, const Graph& b) { return a.used < b.used; });
    if (it->exec != nullptr) cudaGraphExecDestroy(it->exec);
    *it = Graph{};
  }
  it->key = key;
  it->used = now;
  return nullptr;
}

int width_for(index_t remaining, int max_width) {
  int width = 1;
  while (width < remaining && width < max_width) width *= 2;
  return width;
}

int width_slot(int width) { return width == 1 ? 0 : width == 2 ? 1 : width == 4 ? 2 : 3; }

/// The offsets of LuFactor's packed U panels (lu.hpp: (m - k) k entries per supernode, in order).
std::vector<long long> packed_u_offsets(const SymbolicFactor& S) {
  std::vector<long long> offset(static_cast<std::size_t>(S.num_supernodes) + 1, 0);
  for (index_t s = 0; s < S.num_supernodes; ++s)
    offset[s + 1] = offset[s] + static_cast<long long>(S.supernode_rows(s) - S.supernode_cols(s)) * S.supernode_cols(s);
  return offset;
}

}  // namespace

// ---- GpuSolvePlan ----

static_assert(SupernodalSchedule::kMidInverse == kernels::kInvertMidColumns,
              "the schedule's block-kernel inversions are those launch_invert_mid takes");

/// A refinement graph (refine()): its key, and from the key's second call its graph and its state
/// (kernels::RefineState and the history), with a pinned copy that the graph's last node writes.
struct GpuSolvePlan::RefineGraph {
  RefineKey key;
  cudaGraphExec_t exec = nullptr;  // null until the key's second refinement
  std::uint64_t used = 0;          // the solve count at its last use
  DeviceArray<double> state;
  std::unique_ptr<PinnedArray<double>> host;
};

struct GpuSolvePlan::Device {
  DeviceArray<double> values;
  DeviceArray<int> row_indices, supernode_begin, parent, units, need, perm, small_list, mid_list, large_info;
  DeviceArray<long long> row_ptr, panel_offset;
  DeviceArray<kernels::SupernodalTask> tasks, backward_tasks;
  // A solve's workspace, twice: the passes of a solve of more than max_width right-hand sides alternate
  // between two lanes, which run at once on their own streams with half the grid each, so that one pass
  // fills the other's latencies (small factors) and its reads of L hit in L2 behind the other's (large).
  struct Lane {
    DeviceArray<double> acc, y, x;
    DeviceArray<int> counters;  // ready (ns), done (ns), tickets (2)
    int last_width = 0;         // pass width whose y invariant holds (kernels/supernodal_kernels.hpp)
  };
  Lane lanes[2];
  cudaEvent_t lanes_start = nullptr, lanes_end = nullptr;  // the second lane's wait for the solve's start, and back
  // An LU plan's: M^U, M^L's row indices (positions), perm_r[p] = A's row of position p, the packed U
  // panels' offsets, Dr and Dc; and the host copies the uploads read.
  DeviceArray<double> values_u, row_scale, col_scale;
  DeviceArray<int> row_indices_l, perm_r;
  DeviceArray<long long> u_offset;
  std::vector<long long> u_offset_host;
  std::vector<int> host_rows_l, host_perm_r;
  cudaEvent_t maps_copied = nullptr;  // the copies of host_rows_l and host_perm_r are done
  // A partitioned plan's: the factor's values as uploaded (its layout), the maps that place them
  // (kernels::MergedPanels), and the solve supernodes whose diagonal blocks an upload completed for the
  // warp and block kernels to invert (pinned host list, copied to small_pending, each upload's warp
  // kernel's list before its block kernel's; written from the start after each begin_values, so an entry
  // is never rewritten while its copy may be in flight).
  DeviceArray<double> staged;
  DeviceArray<int> factor_begin, target_rows, column_offset, row_position, small_pending;
  DeviceArray<long long> factor_row_ptr, factor_panel_offset, target_offset;
  std::unique_ptr<PinnedArray<int>> small_pending_host;
  std::size_t small_pending_used = 0;
  DeviceArray<kernels::DeviceStatus> status;   // [0] solves (both lanes), [1] inversions
  PinnedArray<kernels::DeviceStatus> status_host{2};
  DeviceArray<unsigned long long> trace;  // empty unless tracing
  std::vector<cudaEvent_t> events;  // three per pass: start, between the sweeps, end

  // CUDA graphs of a one-pass solve (its two sweeps and three events), for the solves that recur with the
  // same arguments: a solve launched as a graph reaches the GPU in one submission instead of five, which
  // on a small factor is several microseconds of the solve (docs/benchmarks/solve.md, "A pass as a CUDA
  // graph"). A pass is captured the second time its key is seen (a caller solving with ever new buffers
  // pays no capture), on a stream of its own that is non-blocking, so that the capture makes no implicit
  // dependency on the legacy stream (another thread's work there would fail), and launched on the solve
  // stream.
  struct PassGraph {
    PassKey key;
    cudaGraphExec_t exec = nullptr;  // null until the key's second solve
    std::uint64_t used = 0;          // the solve count at its last use
  };
  static constexpr std::size_t kPassGraphs = 4;  // the least recently used goes when a fifth key comes
  std::vector<PassGraph> graphs;
  std::uint64_t solves = 0;
  cudaStream_t capture_stream = nullptr;
  // The refinement graphs (refine()), kept as the pass graphs, so that a caller alternating refinements
  // (FP32 and FP64 corrections, two sets of buffers) keeps each one's graph.
  std::vector<RefineGraph> refine_graphs;  // at most kPassGraphs, the least recently used replaced

  DeviceArray<char> trtri_work;
  std::vector<char> trtri_host;
  std::size_t trtri_bytes = 0;
  DeviceArray<double> inverse_work;  // L11 of a block inverted by trsm (invert_large)
  // The FP32 copy of the panels (make_single_copy): of `values`, and of an LU's values_u.
  DeviceArray<float> single_values, single_values_u;
  DeviceArray<int> single_overflow;
  cublasHandle_t cublas = nullptr;
  cusolverDnHandle_t cusolver = nullptr;

  ~Device() {
    for (PassGraph& g : graphs)
      if (g.exec != nullptr) cudaGraphExecDestroy(g.exec);
    for (RefineGraph& g : refine_graphs)
      if (g.exec != nullptr) cudaGraphExecDestroy(g.exec);
    if (capture_stream != nullptr) cudaStreamDestroy(capture_stream);
    if (maps_copied != nullptr) cudaEventDestroy(maps_copied);
    if (lanes_start != nullptr) cudaEventDestroy(lanes_start);
    if (lanes_end != nullptr) cudaEventDestroy(lanes_end);
    for (cudaEvent_t e : events) cudaEventDestroy(e);
    if (cusolver != nullptr) cusolverDnDestroy(cusolver);
    if (cublas != nullptr) cublasDestroy(cublas);
  }
};

GpuSolveMemory GpuSolvePlan::memory_estimate(const SymbolicFactor& S, const SupernodalSchedule& schedule,
                                             int max_width, bool lu) {
  GpuSolveMemory m;
  const std::size_t ns = static_cast<std::size_t>(S.num_supernodes), n = static_cast<std::size_t>(S.n);
  m.factor = static_cast<std::size_t>(S.panel_offset.back()) * sizeof(double);
  m.pattern = static_cast<std::size_t>(S.row_ptr.back()) * sizeof(int) + ns * (5 * sizeof(int) + 2 * sizeof(long long)) +
              n * sizeof(int) + 2 * schedule.tasks.size() * sizeof(kernels::SupernodalTask) +
              (schedule.small_inverse.size() + schedule.mid_inverse.size() + schedule.large_inverse.size()) * sizeof(int) +
              2 * (2 * ns + 2) * sizeof(int);
  m.workspace = 2 * 3 * n * static_cast<std::size_t>(max_width) * sizeof(double);  // two lanes
  for (index_t s : schedule.large_inverse) {
    const std::size_t k = static_cast<std::size_t>(S.supernode_cols(s));
    if (k <= static_cast<std::size_t>(kTrsmInverseColumns)) m.inversion = std::max(m.inversion, k * k * sizeof(double));
  }
  if (lu) {
    m.factor *= 2;
    m.pattern += static_cast<std::size_t>(S.row_ptr.back()) * sizeof(int) + n * sizeof(int) + (ns + 1) * sizeof(long long) +
                 schedule.large_inverse.size() * sizeof(int);
    m.workspace += 2 * n * sizeof(double);  // Dr and Dc
  }
  return m;
}

GpuSolveMemory GpuSolvePlan::memory_estimate(const SolveStructure& structure, const SupernodalSchedule& schedule,
                                             int max_width) {
  GpuSolveMemory m = memory_estimate(*structure.solve, schedule, max_width, false);
  if (structure.band > 1) {
    const SymbolicFactor& F = *structure.factor;
    const std::size_t ns = static_cast<std::size_t>(F.num_supernodes);
    m.factor += static_cast<std::size_t>(F.panel_offset.back()) * sizeof(double);
    m.pattern += ns * (4 * sizeof(int) + 3 * sizeof(long long)) + structure.row_position.size() * sizeof(int) +
                 static_cast<std::size_t>(structure.solve->num_supernodes) * sizeof(int);
  }
  return m;
}

namespace {
SolveStructure unpartitioned_or_throw(std::shared_ptr<const SymbolicFactor> symbolic) {
  if (!symbolic) throw InvalidInput("GpuSolvePlan: no symbolic factor");
  return unpartitioned(std::move(symbolic));
}
}  // namespace

GpuSolvePlan::GpuSolvePlan(std::shared_ptr<const SymbolicFactor> symbolic, SupernodalSchedule schedule, int max_width)
    : GpuSolvePlan(unpartitioned_or_throw(std::move(symbolic)), nullptr, std::move(schedule), max_width) {}

GpuSolvePlan::GpuSolvePlan(SolveStructure structure, SupernodalSchedule schedule, int max_width)
    : GpuSolvePlan(std::move(structure), nullptr, std::move(schedule), max_width) {}

GpuSolvePlan::GpuSolvePlan(std::shared_ptr<const LuSymbolic> lu, SupernodalSchedule schedule, int max_width)
    : GpuSolvePlan(unpartitioned_or_throw(lu ? lu->structure : nullptr), lu, std::move(schedule), max_width) {
  if (!lu_) throw InvalidInput("GpuSolvePlan: no LU analysis");
}

GpuSolvePlan::GpuSolvePlan(SolveStructure structure, std::shared_ptr<const LuSymbolic> lu, SupernodalSchedule schedule,
                           int max_width)
    : structure_(std::move(structure)),
      symbolic_(structure_.solve),
      lu_(std::move(lu)),
      schedule_(std::move(schedule)),
      max_width_(max_width) {
  if (!symbolic_ || !structure_.factor) throw InvalidInput("GpuSolvePlan: no symbolic factor");
  if (lu_ && structure_.band > 1) throw InvalidInput("GpuSolvePlan: an LU plan cannot merge supernodes");
  if (schedule_.units.size() != static_cast<std::size_t>(symbolic_->num_supernodes))
    throw InvalidInput("GpuSolvePlan: the schedule is not of the solve structure");
  if (max_width != 1 && max_width != 2 && max_width != 4 && max_width != 8)
    throw InvalidInput("GpuSolvePlan: max_width must be 1, 2, 4 or 8, got " + std::to_string(max_width));
  const SymbolicFactor& S = *symbolic_;
  memory_ = lu_ ? memory_estimate(S, schedule_, max_width_, true) : memory_estimate(structure_, schedule_, max_width_);
  arrived_.assign(static_cast<std::size_t>(S.num_supernodes), 0);
  SPADE_CUDA_CHECK(cudaStreamCreateWithFlags(&upload_stream_, cudaStreamNonBlocking));
  // The solve stream is a blocking one: it waits for the legacy default stream, so a caller's device data
  // written there is ready when a solve starts.
  SPADE_CUDA_CHECK(cudaStreamCreate(&solve_stream_));
  SPADE_CUDA_CHECK(cudaStreamCreate(&lane_stream_));
  device_ = std::make_unique<Device>();
  Device& d = *device_;
  SPADE_CUDA_CHECK(cudaStreamCreateWithFlags(&d.capture_stream, cudaStreamNonBlocking));
  cudaStream_t st = upload_stream_;
  const std::size_t ns = static_cast<std::size_t>(S.num_supernodes), n = static_cast<std::size_t>(S.n);
  d.values = DeviceArray<double>(static_cast<std::size_t>(S.panel_offset.back()), st);
  d.row_indices = DeviceArray<int>(S.row_indices, st);
  d.supernode_begin = DeviceArray<int>(S.supernode_begin, st);
  d.parent = DeviceArray<int>(S.super_parent, st);
  d.units = DeviceArray<int>(schedule_.units, st);
  d.need = DeviceArray<int>(schedule_.need, st);
  d.perm = DeviceArray<int>(S.perm, st);
  d.small_list = DeviceArray<int>(schedule_.small_inverse, st);
  d.mid_list = DeviceArray<int>(schedule_.mid_inverse, st);
  d.large_info = DeviceArray<int>(schedule_.large_inverse.size() * (lu_ ? 2 : 1), st);
  d.row_ptr = DeviceArray<long long>(converted<long long>(S.row_ptr), st);
  d.panel_offset = DeviceArray<long long>(converted<long long>(S.panel_offset), st);
  auto device_tasks = [&](const std::vector<SolveTask>& list) {
    std::vector<kernels::SupernodalTask> tasks(list.size());
    for (std::size_t t = 0; t < tasks.size(); ++t) tasks[t] = make_int4(list[t].first, list[t].last, list[t].row0, list[t].col0);
    return DeviceArray<kernels::SupernodalTask>(tasks, st);
  };
  d.tasks = device_tasks(schedule_.tasks);
  d.backward_tasks = device_tasks(schedule_.backward);
  const std::size_t vector = std::max<std::size_t>(n, 1) * static_cast<std::size_t>(max_width_);
  for (Device::Lane& lane : d.lanes) {
    lane.acc = DeviceArray<double>(vector, st);
    lane.y = DeviceArray<double>(vector, st);
    lane.x = DeviceArray<double>(vector, st);
    lane.counters = DeviceArray<int>(2 * ns + 2, st);
    for (const DeviceArray<double>* a : {&lane.acc, &lane.y, &lane.x}) a->zero(st);
    lane.counters.zero(st);
  }
  SPADE_CUDA_CHECK(cudaEventCreateWithFlags(&d.lanes_start, cudaEventDisableTiming));
  SPADE_CUDA_CHECK(cudaEventCreateWithFlags(&d.lanes_end, cudaEventDisableTiming));
  d.status = DeviceArray<kernels::DeviceStatus>(2, st);
  d.status.zero(st);
  if (lu_) {
    d.values_u = DeviceArray<double>(static_cast<std::size_t>(S.panel_offset.back()), st);
    d.row_indices_l = DeviceArray<int>(S.row_indices.size(), st);
    d.perm_r = DeviceArray<int>(n, st);
    d.u_offset_host = packed_u_offsets(S);
    d.u_offset = DeviceArray<long long>(d.u_offset_host, st);
    SPADE_CUDA_CHECK(cudaEventCreateWithFlags(&d.maps_copied, cudaEventDisableTiming));
    SPADE_CUDA_CHECK(cudaEventRecord(d.maps_copied, st));
    d.row_scale = DeviceArray<double>(lu_->row_scale, st);
    d.col_scale = DeviceArray<double>(lu_->col_scale, st);
  }
  if (structure_.band > 1) {
    const SymbolicFactor& F = *structure_.factor;
    std::vector<int> target_rows;
    std::vector<long long> target_offset;
    for (index_t s = 0; s < F.num_supernodes; ++s) {
      target_rows.push_back(S.supernode_rows(structure_.target[s]));
      target_offset.push_back(S.panel_offset[structure_.target[s]]);
    }
    d.staged = DeviceArray<double>(static_cast<std::size_t>(F.panel_offset.back()), st);
    d.factor_begin = DeviceArray<int>(F.supernode_begin, st);
    d.factor_row_ptr = DeviceArray<long long>(converted<long long>(F.row_ptr), st);
    d.factor_panel_offset = DeviceArray<long long>(converted<long long>(F.panel_offset), st);
    d.target_rows = DeviceArray<int>(target_rows, st);
    d.target_offset = DeviceArray<long long>(target_offset, st);
    d.column_offset = DeviceArray<int>(structure_.column_offset, st);
    d.row_position = DeviceArray<int>(structure_.row_position, st);
    d.small_pending = DeviceArray<int>(ns, st);
    d.small_pending_host = std::make_unique<PinnedArray<int>>(ns);
  }

  cublas_check(cublasCreate(&d.cublas), "cublasCreate");
  cublas_check(cublasSetStream(d.cublas, st), "cublasSetStream");
  cusolver_check(cusolverDnCreate(&d.cusolver), "cusolverDnCreate");
  cusolver_check(cusolverDnSetStream(d.cusolver, st), "cusolverDnSetStream");
  std::size_t host_bytes = 0, work_entries = 0;
  for (index_t s : schedule_.large_inverse) {
    const std::size_t k = static_cast<std::size_t>(S.supernode_cols(s));
    if (k <= static_cast<std::size_t>(kTrsmInverseColumns)) {
      work_entries = std::max(work_entries, k * k);
      continue;
    }
    std::size_t dev = 0, host = 0;
    cusolver_check(cusolverDnXtrtri_bufferSize(d.cusolver, CUBLAS_FILL_MODE_LOWER, CUBLAS_DIAG_NON_UNIT,
                                               S.supernode_cols(s), CUDA_R_64F, d.values.get() + S.panel_offset[s],
                                               S.supernode_rows(s), &dev, &host),
                   "cusolverDnXtrtri_bufferSize");
    d.trtri_bytes = std::max(d.trtri_bytes, dev);
    host_bytes = std::max(host_bytes, host);
  }
  d.trtri_work = DeviceArray<char>(std::max<std::size_t>(d.trtri_bytes, 1), st);
  d.trtri_host.resize(std::max<std::size_t>(host_bytes, 1));
  d.inverse_work = DeviceArray<double>(work_entries, st);
  memory_.inversion = d.trtri_bytes + work_entries * sizeof(double);
  warm_up_inversion();
  kernels::load_supernodal_kernels();

  const SweepTerms terms = partition_terms(S, schedule_, 1, kSolveHandoffSeconds, gpu_bandwidth_estimate());
  bandwidth_bound_ = terms.bytes > terms.handoffs;
  const int sms = cuda_device_attribute(cudaDevAttrMultiProcessorCount);
  for (int width = 1; width <= max_width_; width *= 2)
    for (const kernels::PanelPrecision precision : {kernels::PanelPrecision::fp64, kernels::PanelPrecision::fp32}) {
      const int blocks = std::min(kernels::supernodal_blocks_per_sm(width, true, precision),
                                  kernels::supernodal_blocks_per_sm(width, false, precision));
      if (blocks < 1) throw ResourceError("GpuSolvePlan: the solve kernels do not fit on this GPU");
      grid_[precision == kernels::PanelPrecision::fp32][width_slot(width)] = blocks * sms;
    }
  SPADE_CUDA_CHECK(cudaStreamSynchronize(st));
}

GpuSolvePlan::~GpuSolvePlan() {
  // Work still queued reads the arrays: let it finish before they go back to the pool.
  if (solve_stream_ != nullptr) cudaStreamSynchronize(solve_stream_);
  if (lane_stream_ != nullptr) cudaStreamSynchronize(lane_stream_);
  if (upload_stream_ != nullptr) cudaStreamSynchronize(upload_stream_);
  device_.reset();
  if (lane_stream_ != nullptr) cudaStreamDestroy(lane_stream_);
  if (upload_stream_ != nullptr) {
    cudaStreamSynchronize(upload_stream_);
    cudaStreamDestroy(upload_stream_);
  }
  if (solve_stream_ != nullptr) cudaStreamDestroy(solve_stream_);
}

void GpuSolvePlan::warm_up_inversion() {
  // CUDA loads a kernel at its first launch, cuBLAS's and cuSOLVER's included, and which kernels they
  // launch depends on the block's size: invert an identity panel of each size class of this factor now,
  // beside the factorization, so that the uploads after it wait for no module load. A class is the bit
  // length of k; its tallest panel stands for it, in its own place in the device values, which the real
  // values overwrite later in stream order.
  const SymbolicFactor& S = *symbolic_;
  Device& d = *device_;
  std::map<int, index_t> tallest;
  int widest = 0;
  for (index_t s : schedule_.large_inverse) {
    int bits = 0;
    for (int k = S.supernode_cols(s); k > 0; k >>= 1) ++bits;
    const auto [it, inserted] = tallest.try_emplace(bits, s);
    if (!inserted && S.supernode_rows(s) > S.supernode_rows(it->second)) it->second = s;
    widest = std::max(widest, S.supernode_cols(s));
  }
  if (tallest.empty()) return;
  PinnedArray<double> ones(static_cast<std::size_t>(widest));
  std::fill(ones.get(), ones.get() + widest, 1.0);
  for (const auto& [bits, s] : tallest) {
    const int k = S.supernode_cols(s), m = S.supernode_rows(s);
    double* panel = d.values.get() + S.panel_offset[s];
    SPADE_CUDA_CHECK(cudaMemsetAsync(panel, 0, static_cast<std::size_t>(k) * m * sizeof(double), upload_stream_));
    SPADE_CUDA_CHECK(cudaMemcpy2DAsync(panel, (static_cast<std::size_t>(m) + 1) * sizeof(double), ones.get(), sizeof(double),
                                       sizeof(double), static_cast<std::size_t>(k), cudaMemcpyHostToDevice, upload_stream_));
    invert_large(s, d.values.get(), d.large_info.get());
  }
  SPADE_CUDA_CHECK(cudaStreamSynchronize(upload_stream_));  // `ones` is read by the copies
}

void GpuSolvePlan::begin_values() {
  generation_ = 0;
  single_generation_ = 0;
  std::fill(arrived_.begin(), arrived_.end(), 0);
  if (structure_.band == 1) return;
  // Earlier copies of the pending lists are done once the stream is (finish_values waited for it).
  SPADE_CUDA_CHECK(cudaStreamSynchronize(upload_stream_));
  device_->small_pending_used = 0;
  device_->values.zero(upload_stream_);  // the merged panels' entries that no supernode fills stay zero
}

void GpuSolvePlan::upload(const double* values, index_t first, index_t last) {
  const SymbolicFactor& F = *structure_.factor;
  const SymbolicFactor& S = *symbolic_;
  if (first < 0 || last >= F.num_supernodes || first > last)
    throw InvalidInput("GpuSolvePlan::upload: bad supernode range " + std::to_string(first) + " .. " + std::to_string(last));
  Device& d = *device_;
  const cudaStream_t st = upload_stream_;
  const offset_t begin = F.panel_offset[first], end = F.panel_offset[last + 1];
  if (structure_.band == 1) {
    SPADE_CUDA_CHECK(cudaMemcpyAsync(d.values.get() + begin, values + begin,
                                     static_cast<std::size_t>(end - begin) * sizeof(double), cudaMemcpyHostToDevice, st));
    invert_range(d.values.get(), d.large_info.get(), first, last);
    return;
  }
  // Partitioned: one copy of the range in the factor's layout, one launch that places every panel in its
  // piece, then the inversion of the pieces the range completed (a merged piece once all its parts are in).
  SPADE_CUDA_CHECK(cudaMemcpyAsync(d.staged.get() + begin, values + begin,
                                   static_cast<std::size_t>(end - begin) * sizeof(double), cudaMemcpyHostToDevice, st));
  const kernels::MergedPanels maps{d.factor_begin.get(),  d.factor_row_ptr.get(), d.factor_panel_offset.get(),
                                   d.target_offset.get(), d.target_rows.get(),    d.column_offset.get(),
                                   d.row_position.get()};
  kernels::launch_scatter_panels(static_cast<int>(first), static_cast<int>(last), maps, d.staged.get(), d.values.get(), st);
  int* pending = d.small_pending_host->get() + d.small_pending_used;
  std::vector<index_t> mid, large;
  int small = 0;
  for (index_t s = first; s <= last; ++s) {
    const index_t t = structure_.target[s];
    if (++arrived_[t] != structure_.parts[t]) continue;
    const index_t k = S.supernode_cols(t);
    if (k <= SupernodalSchedule::kSmallInverse)
      pending[small++] = static_cast<int>(t);
    else if (k <= SupernodalSchedule::kMidInverse)
      mid.push_back(t);
    else
      large.push_back(t);
  }
  std::copy(mid.begin(), mid.end(), pending + small);
  const std::size_t listed = static_cast<std::size_t>(small) + mid.size();
  if (listed > 0) {
    int* list = d.small_pending.get() + d.small_pending_used;
    SPADE_CUDA_CHECK(cudaMemcpyAsync(list, pending, listed * sizeof(int), cudaMemcpyHostToDevice, st));
    kernels::launch_invert_small(list, small, d.supernode_begin.get(), d.row_ptr.get(), d.panel_offset.get(),
                                 d.values.get(), d.status.get() + 1, st);
    kernels::launch_invert_mid(list + small, static_cast<int>(mid.size()), most_rows_below(mid.data(), mid.data() + mid.size()),
                               d.supernode_begin.get(), d.row_ptr.get(), d.panel_offset.get(), d.values.get(),
                               d.status.get() + 1, st);
    d.small_pending_used += listed;
  }
  for (index_t t : large) {
    const auto i = std::lower_bound(schedule_.large_inverse.begin(), schedule_.large_inverse.end(), t) -
                   schedule_.large_inverse.begin();
    invert_large(t, d.values.get(), d.large_info.get() + i);
  }
}

void GpuSolvePlan::invert_range(double* values, int* info, index_t first, index_t last) {
  Device& d = *device_;
  const auto range = [&](const std::vector<index_t>& list) {
    const auto lo = std::lower_bound(list.begin(), list.end(), first);
    const auto hi = std::upper_bound(lo, list.end(), last);
    return std::make_pair(lo - list.begin(), hi - list.begin());
  };
  const auto small = range(schedule_.small_inverse);
  kernels::launch_invert_small(d.small_list.get() + small.first, static_cast<int>(small.second - small.first),
                               d.supernode_begin.get(), d.row_ptr.get(), d.panel_offset.get(), values,
                               d.status.get() + 1, upload_stream_);
  const auto mid = range(schedule_.mid_inverse);
  const index_t* mid_first = schedule_.mid_inverse.data() + mid.first;
  kernels::launch_invert_mid(d.mid_list.get() + mid.first, static_cast<int>(mid.second - mid.first),
                             most_rows_below(mid_first, mid_first + (mid.second - mid.first)), d.supernode_begin.get(),
                             d.row_ptr.get(), d.panel_offset.get(), values, d.status.get() + 1, upload_stream_);
  const auto large = range(schedule_.large_inverse);
  for (auto i = large.first; i < large.second; ++i) invert_large(schedule_.large_inverse[i], values, info + i);
}

long long GpuSolvePlan::most_rows_below(const index_t* first, const index_t* last) const {
  long long most = 0;
  for (const index_t* s = first; s != last; ++s)
    most = std::max<long long>(most, symbolic_->supernode_rows(*s) - symbolic_->supernode_cols(*s));
  return most;
}

void GpuSolvePlan::upload_lu(const double* l_values, const double* u_values, index_t first, index_t last) {
  const SymbolicFactor& S = *symbolic_;
  if (!lu_) throw InvalidInput("GpuSolvePlan::upload_lu: this plan is of a Cholesky factor");
  if (first < 0 || last >= S.num_supernodes || first > last)
    throw InvalidInput("GpuSolvePlan::upload_lu: bad supernode range " + std::to_string(first) + " .. " + std::to_string(last));
  Device& d = *device_;
  const cudaStream_t st = upload_stream_;
  const offset_t begin = S.panel_offset[first], end = S.panel_offset[last + 1];
  const long long u_begin = d.u_offset_host[first], u_end = d.u_offset_host[last + 1];
  double* staging = d.values.get() + begin;  // the range's M^L, free until its L panels arrive
  if (u_end > u_begin)
    SPADE_CUDA_CHECK(cudaMemcpyAsync(staging, u_values + u_begin, static_cast<std::size_t>(u_end - u_begin) * sizeof(double),
                                     cudaMemcpyHostToDevice, st));
  kernels::launch_lu_expand_u(static_cast<int>(first), static_cast<int>(last), d.supernode_begin.get(), d.row_ptr.get(),
                              d.panel_offset.get(), d.u_offset.get(), staging, u_begin, d.values_u.get(), st);
  SPADE_CUDA_CHECK(cudaMemcpyAsync(staging, l_values + begin, static_cast<std::size_t>(end - begin) * sizeof(double),
                                   cudaMemcpyHostToDevice, st));
  kernels::launch_lu_diagonal_blocks(static_cast<int>(first), static_cast<int>(last), d.supernode_begin.get(),
                                     d.row_ptr.get(), d.panel_offset.get(), d.values.get(), d.values_u.get(), st);
  invert_range(d.values.get(), d.large_info.get(), first, last);
  invert_range(d.values_u.get(), d.large_info.get() + schedule_.large_inverse.size(), first, last);
}

void GpuSolvePlan::finish_lu(const LuFactor& F) {
  if (!lu_) throw InvalidInput("GpuSolvePlan::finish_lu: this plan is of a Cholesky factor");
  if (F.symbolic_ptr() != lu_) throw InvalidInput("GpuSolvePlan::finish_lu: the factor is of another analysis");
  if (!F.valid()) throw InvalidInput("GpuSolvePlan::finish_lu: the factor's last factorization failed");
  const SymbolicFactor& S = *symbolic_;
  const LuSymbolic& L = *lu_;
  Device& d = *device_;
  // The host maps of an earlier factorization may still be read by their copies.
  SPADE_CUDA_CHECK(cudaEventSynchronize(d.maps_copied));
  // q (order) and pos = q^{-1} of the interchanges.
  const index_t n = S.n;
  const std::vector<index_t> order = lu_row_order(F);
  std::vector<index_t> pos(static_cast<std::size_t>(n));
  for (index_t p = 0; p < n; ++p) pos[order[p]] = p;
  d.host_perm_r.resize(static_cast<std::size_t>(n));
  for (index_t p = 0; p < n; ++p) d.host_perm_r[p] = L.row_perm[S.perm[order[p]]];
  d.host_rows_l.assign(S.row_indices.begin(), S.row_indices.end());
  for (index_t s = 0; s < S.num_supernodes; ++s)
    for (offset_t p = S.row_ptr[s] + S.supernode_cols(s); p < S.row_ptr[s + 1]; ++p) d.host_rows_l[p] = pos[S.row_indices[p]];
  const cudaStream_t st = upload_stream_;
  SPADE_CUDA_CHECK(cudaMemcpyAsync(d.perm_r.get(), d.host_perm_r.data(), d.host_perm_r.size() * sizeof(int),
                                   cudaMemcpyHostToDevice, st));
  SPADE_CUDA_CHECK(cudaMemcpyAsync(d.row_indices_l.get(), d.host_rows_l.data(), d.host_rows_l.size() * sizeof(int),
                                   cudaMemcpyHostToDevice, st));
  SPADE_CUDA_CHECK(cudaEventRecord(d.maps_copied, st));
}

void GpuSolvePlan::upload_lu(const LuFactor& F) {
  if (F.symbolic_ptr() != lu_) throw InvalidInput("GpuSolvePlan::upload_lu: the factor is of another analysis");
  if (symbolic_->num_supernodes > 0)
    upload_lu(F.l_values().data(), F.u_values().data(), 0, symbolic_->num_supernodes - 1);
  finish_lu(F);
}

void GpuSolvePlan::invert_large(index_t s, double* values, int* info) {
  const SymbolicFactor& S = *symbolic_;
  Device& d = *device_;
  const int k = S.supernode_cols(s), m = S.supernode_rows(s);
  double* panel = values + S.panel_offset[s];
  const double one = 1.0;
  // W = L21 L11^{-1} first (it needs L11), then V = L11^{-1} in place; the zeros above L11's diagonal stay.
  if (m > k)
    cublas_check(cublasDtrsm(d.cublas, CUBLAS_SIDE_RIGHT, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, CUBLAS_DIAG_NON_UNIT,
                             m - k, k, &one, panel, m, panel + k, m),
                 "cublasDtrsm");
  if (k <= kTrsmInverseColumns) {
    // V = L11^{-1} I by trsm: twice trtri's operations, yet faster on wide blocks and cheaper to enqueue
    // than cuSOLVER's trtri (the measurements: docs/benchmarks/solve.md).
    kernels::launch_move_diagonal_block(panel, m, k, d.inverse_work.get(), info, upload_stream_);
    cublas_check(cublasDtrsm(d.cublas, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, CUBLAS_DIAG_NON_UNIT, k,
                             k, &one, d.inverse_work.get(), k, panel, m),
                 "cublasDtrsm");
    return;
  }
  cusolver_check(cusolverDnXtrtri(d.cusolver, CUBLAS_FILL_MODE_LOWER, CUBLAS_DIAG_NON_UNIT, k, CUDA_R_64F, panel, m,
                                  d.trtri_work.get(), d.trtri_bytes, d.trtri_host.data(), d.trtri_host.size(), info),
                 "cusolverDnXtrtri");
}

void GpuSolvePlan::finish_values(std::uint64_t generation) {
  const SymbolicFactor& S = *symbolic_;
  Device& d = *device_;
  for (index_t t = 0; t < S.num_supernodes && structure_.band > 1; ++t)
    if (arrived_[t] != structure_.parts[t])
      throw InvalidInput("GpuSolvePlan::finish_values: supernode " + std::to_string(t) + " of the solve received " +
                         std::to_string(arrived_[t]) + " of its " + std::to_string(structure_.parts[t]) +
                         " parts' uploads");
  std::vector<int> info(d.large_info.size());
  if (!info.empty())
    SPADE_CUDA_CHECK(cudaMemcpyAsync(info.data(), d.large_info.get(), info.size() * sizeof(int), cudaMemcpyDeviceToHost,
                                     upload_stream_));
  SPADE_CUDA_CHECK(cudaMemcpyAsync(d.status_host.get() + 1, d.status.get() + 1, sizeof(kernels::DeviceStatus),
                                   cudaMemcpyDeviceToHost, upload_stream_));
  SPADE_CUDA_CHECK(cudaStreamSynchronize(upload_stream_));
  const kernels::DeviceStatus st = d.status_host.get()[1];
  index_t zero_pivot = -1;
  if (st.code == kernels::kStatusZeroPivot) zero_pivot = st.index;
  for (std::size_t i = 0; i < info.size() && zero_pivot < 0; ++i)
    if (info[i] > 0)
      zero_pivot = S.supernode_begin[schedule_.large_inverse[i % schedule_.large_inverse.size()]] + info[i] - 1;
  if (st.code != kernels::kStatusOk || zero_pivot >= 0) {
    d.status.zero(upload_stream_);
    SPADE_CUDA_CHECK(cudaStreamSynchronize(upload_stream_));
    const index_t column = zero_pivot >= 0 && zero_pivot < S.n ? S.perm[zero_pivot] : -1;
    throw NumericalError(NumericalError::Kind::singular, column,
                         "GPU solve plan: a diagonal block of the factor could not be inverted (zero pivot at column " +
                             std::to_string(column) + ", 0-based, original numbering)");
  }
  generation_ = generation;
}

void GpuSolvePlan::copy_values_to_host(double* host, bool upper) const {
  if (upper && !lu_) throw InvalidInput("GpuSolvePlan::copy_values_to_host: a Cholesky plan has no U panels");
  const DeviceArray<double>& values = upper ? device_->values_u : device_->values;
  SPADE_CUDA_CHECK(cudaStreamSynchronize(upload_stream_));
  SPADE_CUDA_CHECK(cudaMemcpy(host, values.get(), values.size() * sizeof(double), cudaMemcpyDeviceToHost));
}

void GpuSolvePlan::reset_workspace() {
  Device& d = *device_;
  SPADE_CUDA_CHECK(cudaStreamSynchronize(lane_stream_));
  for (Device::Lane& lane : d.lanes) {
    for (const DeviceArray<double>* a : {&lane.acc, &lane.y, &lane.x}) a->zero(solve_stream_);
    lane.counters.zero(solve_stream_);
    lane.last_width = 0;
  }
  // Keep the spin limit: clear only code and index of the solves' status.
  SPADE_CUDA_CHECK(cudaMemsetAsync(d.status.get(), 0, 2 * sizeof(int), solve_stream_));
  SPADE_CUDA_CHECK(cudaStreamSynchronize(solve_stream_));
}

void GpuSolvePlan::set_spin_limit(long long polls) {
  if (polls < 0) throw InvalidInput("GpuSolvePlan::set_spin_limit: negative poll count");
  SPADE_CUDA_CHECK(cudaStreamSynchronize(solve_stream_));
  SPADE_CUDA_CHECK(cudaMemcpy(&device_->status.get()->spin_limit, &polls, sizeof(polls), cudaMemcpyHostToDevice));
}

void GpuSolvePlan::set_trace(bool on) {
  SPADE_CUDA_CHECK(cudaStreamSynchronize(solve_stream_));
  device_->trace = on ? DeviceArray<unsigned long long>(6 * schedule_.tasks.size(), solve_stream_)
                      : DeviceArray<unsigned long long>();
  if (on) device_->trace.zero(solve_stream_);
}

std::vector<unsigned long long> GpuSolvePlan::trace() const {
  std::vector<unsigned long long> out(device_->trace.size());
  SPADE_CUDA_CHECK(cudaStreamSynchronize(solve_stream_));
  if (!out.empty())
    SPADE_CUDA_CHECK(cudaMemcpy(out.data(), device_->trace.get(), out.size() * sizeof(unsigned long long),
                                cudaMemcpyDeviceToHost));
  return out;
}

bool GpuSolvePlan::make_single_copy() {
  if (generation_ == 0) throw InvalidInput("GpuSolvePlan::make_single_copy: the plan holds no complete values");
  if (single_generation_ == generation_) return true;
  if (single_refused_ == generation_) return false;
  single_refused_ = generation_;  // a failure below leaves these values refused
  Device& d = *device_;
  const std::size_t count = d.values.size(), sets = lu_ ? 2 : 1;
  if (d.single_values.size() != count) {
    std::size_t free_bytes = 0, total_bytes = 0;
    gpu_memory(free_bytes, total_bytes);
    if (sets * count * sizeof(float) > free_bytes / 2) return false;
    d.single_values = DeviceArray<float>(count, solve_stream_);
    if (lu_) d.single_values_u = DeviceArray<float>(count, solve_stream_);
    d.single_overflow = DeviceArray<int>(1, solve_stream_);
  }
  d.single_overflow.zero(solve_stream_);
  kernels::launch_round_to_single(d.values.get(), d.single_values.get(), static_cast<long long>(count),
                                  d.single_overflow.get(), solve_stream_);
  if (lu_)
    kernels::launch_round_to_single(d.values_u.get(), d.single_values_u.get(), static_cast<long long>(count),
                                    d.single_overflow.get(), solve_stream_);
  int overflow = 0;
  SPADE_CUDA_CHECK(cudaMemcpyAsync(&overflow, d.single_overflow.get(), sizeof(int), cudaMemcpyDeviceToHost, solve_stream_));
  SPADE_CUDA_CHECK(cudaStreamSynchronize(solve_stream_));
  if (overflow != 0) {  // an entry beyond FP32's range: no copy (its memory goes back)
    d.single_values = DeviceArray<float>();
    d.single_values_u = DeviceArray<float>();
    return false;
  }
  single_generation_ = generation_;
  return true;
}

std::size_t GpuSolvePlan::single_copy_bytes() const {
  return device_->values.size() * (lu_ ? 2 : 1) * sizeof(float);
}

struct GpuSolvePlan::Sweeps {
  kernels::SupernodalView forward, backward;
  const double* scale_in = nullptr;  // an LU's scalings (kernels::SupernodalPass)
  const double* scale_out = nullptr;
};

GpuSolvePlan::Sweeps GpuSolvePlan::sweeps(Transpose trans) const {
  const Device& d = *device_;
  const kernels::SupernodalView view{d.tasks.get(),       d.backward_tasks.get(), static_cast<int>(d.tasks.size()),
                                     d.supernode_begin.get(),
                                     d.row_ptr.get(),     d.panel_offset.get(),             d.parent.get(),
                                     d.units.get(),       d.need.get(),                     d.row_indices.get(),
                                     d.perm.get(),        d.values.get(),
                                     d.single_values.get()};
  Sweeps sweep{view, view};
  if (!lu_) return sweep;
  // An LU's sweeps: one panel set each, L's with its rows in positions and q folded into its permutation;
  // the sweeps apply the scalings as they read b and write x.
  kernels::SupernodalView lower = view, upper = view;
  lower.row_indices = d.row_indices_l.get();
  lower.perm = d.perm_r.get();
  upper.values = d.values_u.get();
  upper.values_single = d.single_values_u.get();
  const bool plain = trans == Transpose::no;
  sweep.forward = plain ? lower : upper;
  sweep.backward = plain ? upper : lower;
  sweep.scale_in = plain ? d.row_scale.get() : d.col_scale.get();
  sweep.scale_out = plain ? d.col_scale.get() : d.row_scale.get();
  return sweep;
}

kernels::SupernodalWorkspace GpuSolvePlan::workspace(int lane) const {
  const Device& d = *device_;
  const Device::Lane& l = d.lanes[lane];
  const std::size_t ns = static_cast<std::size_t>(symbolic_->num_supernodes);
  return {l.acc.get(), l.y.get(), l.x.get(), l.counters.get(), l.counters.get() + ns, l.counters.get() + 2 * ns,
          d.status.get()};
}

template <typename Enqueue>
cudaGraphExec_t GpuSolvePlan::pass_graph(const PassKey& key, const Enqueue& enqueue) {
  Device& d = *device_;
  Device::PassGraph* const g = recurring_graph(d.graphs, key, ++d.solves, Device::kPassGraphs);
  if (g == nullptr) return nullptr;  // first sight: launched directly
  if (g->exec != nullptr) return g->exec;
  if (!capture_allowed_) return nullptr;
  cudaGraph_t graph = nullptr;
  SPADE_CUDA_CHECK(cudaStreamBeginCapture(d.capture_stream, cudaStreamCaptureModeThreadLocal));
  try {
    enqueue(d.capture_stream, cudaEventRecordExternal);  // the events become the graph's own record nodes
  } catch (...) {
    cudaStreamEndCapture(d.capture_stream, &graph);
    if (graph != nullptr) cudaGraphDestroy(graph);
    throw;
  }
  SPADE_CUDA_CHECK(cudaStreamEndCapture(d.capture_stream, &graph));
  const cudaError_t made = cudaGraphInstantiate(&g->exec, graph, 0);
  cudaGraphDestroy(graph);
  if (made != cudaSuccess) g->exec = nullptr;
  SPADE_CUDA_CHECK(made);
  return g->exec;
}

double GpuSolvePlan::time_solve(int reps) {
  if (reps < 1) throw InvalidInput("GpuSolvePlan::time_solve: reps must be >= 1, got " + std::to_string(reps));
  const index_t ld = std::max<index_t>(symbolic_->n, 1);
  DeviceArray<double> b(static_cast<std::size_t>(ld), solve_stream_), x(static_cast<std::size_t>(ld), solve_stream_);
  // Every byte 0x3F: 0.49 in every entry, a right-hand side with no zero to take a shortcut on.
  SPADE_CUDA_CHECK(cudaMemsetAsync(b.get(), 0x3F, static_cast<std::size_t>(ld) * sizeof(double), solve_stream_));
  std::vector<double> seconds;
  for (int r = 0; r < reps + 2; ++r) {
    solve(b.get(), ld, x.get(), ld, 1, generation_);
    if (r >= 2) seconds.push_back(forward_seconds_ + backward_seconds_);
  }
  std::nth_element(seconds.begin(), seconds.begin() + seconds.size() / 2, seconds.end());
  return seconds[seconds.size() / 2];
}

void GpuSolvePlan::solve(const double* B, index_t ldb, double* X, index_t ldx, index_t nrhs, std::uint64_t generation,
                         Transpose trans, bool single) {
  const SymbolicFactor& S = *symbolic_;
  const index_t n = S.n;
  if (generation_ == 0 || generation != generation_)
    throw InvalidInput("GPU solve: the factor's values on the GPU are not those of the current factorization");
  if (single && single_generation_ != generation_)
    throw InvalidInput("GPU solve: no FP32 copy of the current values (make_single_copy first)");
  if (nrhs < 0) throw InvalidInput("GPU solve: nrhs must be >= 0, got " + std::to_string(nrhs));
  if (ldb < std::max<index_t>(1, n) || ldx < std::max<index_t>(1, n))
    throw InvalidInput("GPU solve: leading dimensions " + std::to_string(ldb) + " and " + std::to_string(ldx) +
                       " must be at least n = " + std::to_string(n));
  forward_seconds_ = backward_seconds_ = 0;
  passes_ = 0;
  if (nrhs == 0 || n == 0) return;
  Device& d = *device_;
  const Sweeps sweep = sweeps(trans);
  const int passes = static_cast<int>((nrhs + max_width_ - 1) / max_width_) + 1;
  while (d.events.size() < static_cast<std::size_t>(3 * passes)) {
    cudaEvent_t e;
    SPADE_CUDA_CHECK(cudaEventCreate(&e));
    d.events.push_back(e);
  }
  // Two lanes when there are two passes or more (not while tracing: the trace holds one pass).
  const int lanes = nrhs > max_width_ && d.trace.size() == 0 ? 2 : 1;
  if (lanes == 2) {
    SPADE_CUDA_CHECK(cudaEventRecord(d.lanes_start, solve_stream_));
    SPADE_CUDA_CHECK(cudaStreamWaitEvent(lane_stream_, d.lanes_start, 0));
  }
  std::vector<int> pass_lane;
  for (index_t col = 0; col < nrhs; ++passes_) {
    const int l = passes_ % lanes;
    Device::Lane& lane = d.lanes[l];
    const cudaStream_t stream = l == 0 ? solve_stream_ : lane_stream_;
    const int width = width_for(nrhs - col, max_width_);
    if (width != lane.last_width) {
      lane.y.zero(stream);  // y's zeros follow the pass width (kernels/supernodal_kernels.hpp)
      lane.last_width = width;
    }
    const kernels::SupernodalWorkspace ws = workspace(l);
    const int columns = static_cast<int>(std::min<index_t>(width, nrhs - col));
    kernels::SupernodalPass pass{B + static_cast<offset_t>(col) * ldb,
                                 ldb,
                                 X + static_cast<offset_t>(col) * ldx,
                                 ldx,
                                 columns,
                                 sweep.scale_in,
                                 sweep.scale_out,
                                 d.trace.size() > 0 ? d.trace.get() : nullptr};
    const int grid = std::max(1, grid_[single][width_slot(width)] / lanes);
    cudaEvent_t* e = d.events.data() + 3 * passes_;
    const kernels::PanelPrecision precision = single ? kernels::PanelPrecision::fp32 : kernels::PanelPrecision::fp64;
    const auto enqueue = [&](cudaStream_t on, unsigned event_flags) {
      SPADE_CUDA_CHECK(cudaEventRecordWithFlags(e[0], on, event_flags));
      kernels::launch_supernodal_forward(width, sweep.forward, ws, pass, precision, grid, on);
      SPADE_CUDA_CHECK(cudaEventRecordWithFlags(e[1], on, event_flags));
      kernels::launch_supernodal_backward(width, sweep.backward, ws, pass, precision, grid, on);
      SPADE_CUDA_CHECK(cudaEventRecordWithFlags(e[2], on, event_flags));
    };
    const bool one_pass = nrhs <= max_width_ && d.trace.size() == 0;
    const PassKey key{B, X, ldb, ldx, columns, width, single, lu_ && trans == Transpose::yes,
                      sweep.forward.values_single, sweep.backward.values_single};
    const cudaGraphExec_t graph = one_pass ? pass_graph(key, enqueue) : nullptr;
    if (graph != nullptr)
      SPADE_CUDA_CHECK(cudaGraphLaunch(graph, stream));
    else
      enqueue(stream, cudaEventRecordDefault);
    pass_lane.push_back(l);
    col += width;
  }
  if (lanes == 2) {
    SPADE_CUDA_CHECK(cudaEventRecord(d.lanes_end, lane_stream_));
    SPADE_CUDA_CHECK(cudaStreamWaitEvent(solve_stream_, d.lanes_end, 0));
  }
  SPADE_CUDA_CHECK(cudaMemcpyAsync(d.status_host.get(), d.status.get(), sizeof(kernels::DeviceStatus),
                                   cudaMemcpyDeviceToHost, solve_stream_));
  SPADE_CUDA_CHECK(cudaStreamSynchronize(solve_stream_));
  check_solve_status();
  double forward_sum[2] = {0, 0}, backward_sum[2] = {0, 0};
  for (int p = 0; p < passes_; ++p) {
    float forward = 0, backward = 0;
    SPADE_CUDA_CHECK(cudaEventElapsedTime(&forward, d.events[3 * p], d.events[3 * p + 1]));
    SPADE_CUDA_CHECK(cudaEventElapsedTime(&backward, d.events[3 * p + 1], d.events[3 * p + 2]));
    forward_sum[pass_lane[p]] += forward * 1e-3;
    backward_sum[pass_lane[p]] += backward * 1e-3;
  }
  forward_seconds_ = std::max(forward_sum[0], forward_sum[1]);
  backward_seconds_ = std::max(backward_sum[0], backward_sum[1]);
}

void GpuSolvePlan::check_solve_status() {
  const kernels::DeviceStatus st = device_->status_host.get()[0];
  if (st.code == kernels::kStatusOk) return;
  reset_workspace();
  throw NumericalError(NumericalError::Kind::no_progress, -1,
                       "GPU solve: a spin-wait gave up (supernode " + std::to_string(st.index) +
                           " waited too long for its dependencies); the solve was abandoned");
}

bool GpuSolvePlan::refine(GpuResidual& residual, const double* B, double* const iterate[2], double* R, double* D,
                          index_t nrhs, std::uint64_t generation, const RefineOptions& options, bool single,
                          RefinementResult& result, int& solution) {
  const index_t n = symbolic_->n;
  if (generation_ == 0 || generation != generation_)
    throw InvalidInput("GPU refinement: the factor's values on the GPU are not those of the current factorization");
  if (single && single_generation_ != generation_)
    throw InvalidInput("GPU refinement: no FP32 copy of the current values (make_single_copy first)");
  if (n < 1 || nrhs < 1 || nrhs > max_width_ || options.max_steps < 0 || options.max_steps > kDeviceRefineSteps)
    throw InvalidInput("GPU refinement as one graph: needs n >= 1, 1 <= nrhs <= " + std::to_string(max_width_) +
                       " and 0 <= max_steps <= " + std::to_string(kDeviceRefineSteps) + " (n " + std::to_string(n) +
                       ", nrhs " + std::to_string(nrhs) + ", max_steps " + std::to_string(options.max_steps) + ")");
  Device& d = *device_;
  const RefineKey key{residual.id(),
                      B,
                      iterate[0],
                      iterate[1],
                      R,
                      D,
                      static_cast<int>(nrhs),
                      options.max_steps,
                      refine_tolerance(options),
                      single,
                      single ? d.single_values.get() : nullptr,
                      single ? d.single_values_u.get() : nullptr};
  RefineGraph* const found = recurring_graph(d.refine_graphs, key, ++d.solves, Device::kPassGraphs);
  if (found == nullptr) return false;  // first sight: the caller refines on the host
  RefineGraph& g = *found;
  if (g.exec == nullptr) {
    if (!capture_allowed_) return false;
    capture_refinement(residual, g);
  }
  const int width = width_for(nrhs, max_width_);
  Device::Lane& lane = d.lanes[0];
  if (width != lane.last_width) {
    lane.y.zero(solve_stream_);
    lane.last_width = width;
  }
  SPADE_CUDA_CHECK(cudaGraphLaunch(g.exec, solve_stream_));
  SPADE_CUDA_CHECK(cudaStreamSynchronize(solve_stream_));
  check_solve_status();
  const double* host = g.host->get();
  kernels::RefineState state;
  std::memcpy(&state, host, sizeof state);
  const double* norms = host + sizeof(kernels::RefineState) / sizeof(double);
  const double* berrs = norms + options.max_steps + 1;
  const double* singles = berrs + options.max_steps + 1;
  result = RefinementResult{};
  for (int k = 0; k < state.steps; ++k) {
    RefinementStep step;
    step.residual_norm = norms[k];
    step.berr = berrs[k];
    step.single = singles[k] != 0;
    result.steps.push_back(step);
  }
  result.solution = result.steps.at(static_cast<std::size_t>(state.current_step));
  result.converged = state.stop == kernels::kRefineConverged;
  result.stop = state.stop == kernels::kRefineConverged   ? RefinementResult::Stop::converged
                : state.stop == kernels::kRefineStagnated ? RefinementResult::Stop::stagnated
                                                          : RefinementResult::Stop::max_steps;
  solution = state.current;
  return true;
}

void GpuSolvePlan::capture_refinement(GpuResidual& residual, RefineGraph& g) {
  Device& d = *device_;
  const RefineKey& key = g.key;
  static_assert(sizeof(kernels::RefineState) % sizeof(double) == 0, "the history follows the state in doubles");
  const std::size_t doubles = sizeof(kernels::RefineState) / sizeof(double) + kernels::refine_history_doubles(key.max_steps);
  if (g.state.size() < doubles) {
    g.state = DeviceArray<double>(doubles, solve_stream_);
    g.host = std::make_unique<PinnedArray<double>>(doubles);
  }
  auto* state = reinterpret_cast<kernels::RefineState*>(g.state.get());
  const int* solve_status = &d.status.get()[0].code;
  const Sweeps sweep = sweeps(Transpose::no);
  const kernels::SupernodalWorkspace ws = workspace(0);
  const int width = width_for(key.nrhs, max_width_);
  const long long ld = symbolic_->n;
  const cudaStream_t cs = d.capture_stream;
  double* const x[2] = {key.x0, key.x1};
  const auto pass = [&](const double* b, double* out, bool single) {
    const kernels::SupernodalPass p{b, ld, out, ld, key.nrhs, sweep.scale_in, sweep.scale_out, nullptr};
    const kernels::PanelPrecision precision = single ? kernels::PanelPrecision::fp32 : kernels::PanelPrecision::fp64;
    const int grid = std::max(1, grid_[single][width_slot(width)]);
    kernels::launch_supernodal_forward(width, sweep.forward, ws, p, precision, grid, cs);
    kernels::launch_supernodal_backward(width, sweep.backward, ws, p, precision, grid, cs);
  };
  // The handles: the loop, the second half of its body, and per half (by the block it reads) the precision
  // of its correction and the copy after an FP32 correction that made things worse.
  cudaGraphConditionalHandle loop = 0, next = 0, precision[2] = {0, 0}, redo[2] = {0, 0};
  // An evaluation (of x plus the correction into x_new where there is one) and the rules' turn.
  const auto evaluate = [&](const double* from, const double* correction, double* x_new, kernels::RefineTurn turn,
                            int written, const kernels::RefineHandles& handles) {
    residual.enqueue(key.b, from, correction, x_new, key.r, key.nrhs, state->result, cs);
    kernels::launch_refine_step(state, turn, written, key.max_steps, key.tolerance, key.single, solve_status, handles,
                                cs);
  };
  // Captures `enqueue` into `into` after the nodes `after` and returns the nodes the capture ended on.
  const auto capture = [&](cudaGraph_t into, const std::vector<cudaGraphNode_t>& after, const auto& enqueue) {
    SPADE_CUDA_CHECK(cudaStreamBeginCaptureToGraph(cs, into, after.data(), nullptr, after.size(),
                                                   cudaStreamCaptureModeThreadLocal));
    std::vector<cudaGraphNode_t> leaves;
    cudaGraph_t captured = nullptr;
    try {
      enqueue();
      cudaStreamCaptureStatus status;
      const cudaGraphNode_t* last = nullptr;
      std::size_t count = 0;
      SPADE_CUDA_CHECK(cudaStreamGetCaptureInfo(cs, &status, nullptr, nullptr, &last, nullptr, &count));
      leaves.assign(last, last + count);
    } catch (...) {
      cudaStreamEndCapture(cs, &captured);
      throw;
    }
    SPADE_CUDA_CHECK(cudaStreamEndCapture(cs, &captured));
    return leaves;
  };
  // A conditional node of `type` with `size` bodies on `handle` in `into` after `after`; returns its bodies.
  const auto conditional = [](cudaGraph_t into, const std::vector<cudaGraphNode_t>& after,
                              cudaGraphConditionalHandle handle, cudaGraphConditionalNodeType type, unsigned size,
                              cudaGraphNode_t& node) {
    cudaGraphNodeParams params{};
    params.type = cudaGraphNodeTypeConditional;
    params.conditional.handle = handle;
    params.conditional.type = type;
    params.conditional.size = size;
    SPADE_CUDA_CHECK(cudaGraphAddNode(&node, into, after.data(), nullptr, after.size(), &params));
    return params.conditional.phGraph_out;
  };
  // One step of the loop's body: the correction from block `from`, its evaluation, and with FP32
  // corrections the precision's IF/ELSE before and the copy's IF after. Returns the nodes it ends on.
  const auto half = [&](cudaGraph_t into, int from, unsigned mask) {
    const int to = 1 - from;
    std::vector<cudaGraphNode_t> after;
    if (key.single) {
      cudaGraphNode_t node = nullptr;
      const cudaGraph_t* bodies = conditional(into, after, precision[from], cudaGraphCondTypeIf, 2, node);
      capture(bodies[0], {}, [&] { pass(key.r, key.d, true); });
      capture(bodies[1], {}, [&] { pass(key.r, key.d, false); });
      after = {node};
    }
    const kernels::RefineHandles handles{loop, next, precision[to], redo[from], mask};
    after = capture(into, after, [&] {
      if (!key.single) pass(key.r, key.d, false);
      evaluate(x[from], key.d, x[to], kernels::RefineTurn::correction, to, handles);
    });
    if (key.single) {
      cudaGraphNode_t node = nullptr;
      const cudaGraph_t* bodies = conditional(into, after, redo[from], cudaGraphCondTypeIf, 1, node);
      capture(bodies[0], {}, [&] {
        SPADE_CUDA_CHECK(cudaMemcpyAsync(x[to], x[from], static_cast<std::size_t>(ld) * key.nrhs * sizeof(double),
                                         cudaMemcpyDeviceToDevice, cs));
        evaluate(x[to], nullptr, nullptr, kernels::RefineTurn::redo, to, {});
      });
      after = {node};
    }
    return after;
  };
  using H = kernels::RefineHandles;
  const unsigned with_single = key.single ? H::kPrecision | H::kRedo : 0u;
  cudaGraph_t graph = nullptr;
  SPADE_CUDA_CHECK(cudaGraphCreate(&graph, 0));
  const std::unique_ptr<CUgraph_st, cudaError_t (*)(cudaGraph_t)> owned(graph, cudaGraphDestroy);
  // Every handle reads 0 at each launch until a turn sets it: a body no turn allowed never runs.
  for (cudaGraphConditionalHandle* h : {&loop, &next, &precision[0], &precision[1], &redo[0], &redo[1]})
    if (key.single || h == &loop || h == &next)
      SPADE_CUDA_CHECK(cudaGraphConditionalHandleCreate(h, graph, 0, cudaGraphCondAssignDefault));
  const std::vector<cudaGraphNode_t> first = capture(graph, {}, [&] {
    SPADE_CUDA_CHECK(cudaMemsetAsync(state->result, 0, sizeof state->result, cs));
    pass(key.b, x[0], false);
    evaluate(x[0], nullptr, nullptr, kernels::RefineTurn::first, 0,
             H{loop, next, precision[0], 0, H::kLoop | (key.single ? H::kPrecision : 0u)});
  });
  cudaGraphNode_t while_node = nullptr, if_node = nullptr;
  const cudaGraph_t body = conditional(graph, first, loop, cudaGraphCondTypeWhile, 1, while_node)[0];
  capture(graph, {while_node}, [&] {
    SPADE_CUDA_CHECK(cudaMemcpyAsync(g.host->get(), g.state.get(), doubles * sizeof(double), cudaMemcpyDeviceToHost, cs));
    SPADE_CUDA_CHECK(cudaMemcpyAsync(d.status_host.get(), d.status.get(), sizeof(kernels::DeviceStatus),
                                     cudaMemcpyDeviceToHost, cs));
  });
  const std::vector<cudaGraphNode_t> ended = half(body, 0, H::kLoop | H::kNext | with_single);
  const cudaGraph_t second = conditional(body, ended, next, cudaGraphCondTypeIf, 1, if_node)[0];
  half(second, 1, H::kLoop | with_single);
  const cudaError_t made = cudaGraphInstantiate(&g.exec, graph, 0);
  if (made != cudaSuccess) g.exec = nullptr;
  SPADE_CUDA_CHECK(made);
}

// ---- GpuResidual ----

struct GpuResidual::Device {
  DeviceArray<int> row_ptr, col_ind;
  DeviceArray<double> values;
  DeviceArray<unsigned long long> result;
  PinnedArray<unsigned long long> result_host{2};
  DeviceArray<double> workspace;
};

GpuResidual::GpuResidual(const SparseMatrix& A, cudaStream_t stream) : stream_(stream), home_(stream) {
  static std::atomic<std::uint64_t> made{0};
  id_ = ++made;
  if (!A.is_square()) throw InvalidInput("GpuResidual: A must be square");
  transposed_ = !A.is_symmetric();
  const SparseMatrix At = transposed_ ? A.transpose() : SparseMatrix();
  const SparseMatrix& csr = transposed_ ? At : A;  // its CSC arrays are A's CSR arrays
  if (A.nnz() > std::numeric_limits<int>::max())
    throw ResourceError("GPU refinement: nnz(A) = " + std::to_string(A.nnz()) + " does not fit 32-bit indices");
  n_ = A.rows();
  nnz_ = A.nnz();
  index_t longest_row = 0;
  for (index_t i = 0; i < n_; ++i) longest_row = std::max<index_t>(longest_row, csr.col_ptr()[i + 1] - csr.col_ptr()[i]);
  group_ = kernels::residual_group(longest_row, n_, cuda_device_attribute(cudaDevAttrMultiProcessorCount));
  device_ = std::make_unique<Device>();
  Device& d = *device_;
  d.row_ptr = DeviceArray<int>(converted<int>(csr.col_ptr()), stream);
  d.col_ind = DeviceArray<int>(csr.row_ind(), stream);
  d.values = DeviceArray<double>(static_cast<std::size_t>(nnz_), stream);
  d.result = DeviceArray<unsigned long long>(2, stream);
  update_values(A);
}

GpuResidual::~GpuResidual() {
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
}

void GpuResidual::update_values(const SparseMatrix& A) {
  if (A.rows() != n_ || A.nnz() != nnz_) throw InvalidInput("GpuResidual::update_values: the pattern changed");
  const SparseMatrix At = transposed_ ? A.transpose() : SparseMatrix();
  const std::vector<double>& values = transposed_ ? At.values() : A.values();
  SPADE_CUDA_CHECK(cudaMemcpyAsync(device_->values.get(), values.data(), values.size() * sizeof(double),
                                   cudaMemcpyHostToDevice, stream_));
  SPADE_CUDA_CHECK(cudaStreamSynchronize(stream_));  // At is a temporary, and A's values may change after
}

RefinementStep GpuResidual::pass(const double* B, const double* X, const double* D, double* X_new, double* R,
                                 index_t nrhs) {
  RefinementStep step;
  if (n_ == 0 || nrhs <= 0) return step;
  Device& d = *device_;
  d.result.zero(stream_);
  enqueue(B, X, D, X_new, R, nrhs, d.result.get(), stream_);
  SPADE_CUDA_CHECK(cudaMemcpyAsync(d.result_host.get(), d.result.get(), 2 * sizeof(unsigned long long),
                                   cudaMemcpyDeviceToHost, stream_));
  SPADE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  std::memcpy(&step.residual_norm, d.result_host.get(), sizeof(double));
  std::memcpy(&step.berr, d.result_host.get() + 1, sizeof(double));
  return step;
}

void GpuResidual::enqueue(const double* B, const double* X, const double* D, double* X_new, double* R, index_t nrhs,
                          unsigned long long* result, cudaStream_t stream) const {
  if (n_ == 0 || nrhs <= 0) return;
  const Device& d = *device_;
  kernels::launch_residual({static_cast<int>(n_), d.row_ptr.get(), d.col_ind.get(), d.values.get()}, {B, X, D, X_new},
                           R, static_cast<int>(nrhs), group_, result, stream);
}

RefinementStep GpuResidual::evaluate(const double* B, const double* X, double* R, index_t nrhs) {
  return pass(B, X, nullptr, nullptr, R, nrhs);
}

RefinementStep GpuResidual::evaluate_corrected(const double* B, const double* X, const double* D, double* X_new,
                                               double* R, index_t nrhs) {
  if (D == nullptr || X_new == nullptr) throw InvalidInput("GpuResidual::evaluate_corrected: D and X_new are needed");
  return pass(B, X, D, X_new, R, nrhs);
}

double* GpuResidual::workspace(std::size_t count) {
  Device& d = *device_;
  if (d.workspace.size() < count) {
    SPADE_CUDA_CHECK(cudaStreamSynchronize(stream_));  // no work on the current stream still reads the old block
    d.workspace = DeviceArray<double>();                // which goes first: both need not fit at once
    workspace_bytes_.store(0, std::memory_order_relaxed);
    d.workspace = DeviceArray<double>(count, home_);
    workspace_bytes_.store(count * sizeof(double), std::memory_order_relaxed);
    SPADE_CUDA_CHECK(cudaStreamSynchronize(home_));
  }
  return d.workspace.get();
}

void GpuResidual::set_stream(cudaStream_t stream) {
  if (stream == stream_) return;
  SPADE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  stream_ = stream;
}

// ---- GpuLuCorrection ----

namespace {

/// T(i, r) = sign X(index[i], r) for the k x nrhs block T (leading dimension k).
__global__ void gather_rows_kernel(const double* X, long long ldx, const index_t* index, long long k, long long nrhs,
                                   double sign, double* T) {
  for (long long e = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; e < k * nrhs;
       e += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long r = e / k, i = e - r * k;
    T[e] = sign * X[index[i] + r * ldx];
  }
}

/// W(index[i], r) = T(i, r) for the k x nrhs block T, or 1 for i = r where T is null (unit columns);
/// index holds distinct rows (no two replaced pivots share a row or a column: they are pivots), so no two
/// threads write one entry.
__global__ void scatter_rows_kernel(const double* T, const index_t* index, long long k, long long nrhs, double* W,
                                    long long ldw) {
  for (long long e = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; e < k * nrhs;
       e += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long r = e / k, i = e - r * k;
    if (T != nullptr)
      W[index[i] + r * ldw] = T[e];
    else if (i == r)
      W[index[i] + r * ldw] = 1.0;
  }
}

/// X(:, r) += W(:, r) for the n x nrhs blocks X (leading dimension ldx) and W (ldw).
__global__ void add_block_kernel(double* X, long long ldx, const double* W, long long ldw, long long n, long long nrhs) {
  for (long long e = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; e < n * nrhs;
       e += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long r = e / n, i = e - r * n;
    X[i + r * ldx] += W[i + r * ldw];
  }
}

/// K(i, i) += 1 / delta[i] for the k x k K, and *first_bad = the least column of K holding a NaN or an
/// infinity (left alone where none does).
__global__ void finish_k_kernel(double* K, const double* delta, long long k, int* first_bad) {
  for (long long e = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; e < k * k;
       e += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long j = e / k, i = e - j * k;
    if (i == j) K[e] += 1.0 / delta[i];
    if (!isfinite(K[e])) atomicMin(first_bad, static_cast<int>(j));
  }
}

int grid_for(long long count, int threads) {
  return static_cast<int>(std::min<long long>(std::max<long long>((count + threads - 1) / threads, 1), 4096));
}

}  // namespace

struct GpuLuCorrection::Device {
  DeviceArray<double> K;            // k x k: K, then getrf's factors
  DeviceArray<int> pivots;          // getrf's ipiv, 1-based
  DeviceArray<index_t> rows, cols;  // of the perturbed entries, A's numbering
  DeviceArray<double> T;            // k x nrhs: V^T Y, then K^{-1} V^T Y
  DeviceArray<int> status;          // getrf's info, then the first column of K that is not finite
  cusolverDnHandle_t cusolver = nullptr;
  ~Device() {
    if (cusolver != nullptr) cusolverDnDestroy(cusolver);
  }
};

GpuLuCorrection::GpuLuCorrection(const LuFactor& F, GpuSolvePlan& plan)
    : factor_(&F), generation_(F.generation()), k_(F.perturbed_pivots()), device_(std::make_unique<Device>()) {
  if (k_ == 0) throw InvalidInput("GpuLuCorrection: the factor has no replaced pivots to correct");
  if (!plan.is_lu() || plan.generation() != F.generation())
    throw InvalidInput("GpuLuCorrection: the plan does not hold this factor's values");
  Device& d = *device_;
  const cudaStream_t stream = plan.stream();
  const index_t n = F.symbolic().n, k = k_;
  const std::vector<PivotPerturbation>& perturbations = F.perturbations();
  std::vector<index_t> rows(static_cast<std::size_t>(k)), cols(rows.size());
  std::vector<double> delta(rows.size());
  for (index_t i = 0; i < k; ++i) {
    rows[i] = perturbations[i].row;
    cols[i] = perturbations[i].col;
    delta[i] = perturbations[i].delta;
  }
  d.rows = DeviceArray<index_t>(rows, stream);
  d.cols = DeviceArray<index_t>(cols, stream);
  const DeviceArray<double> deltas(delta, stream);
  d.K = DeviceArray<double>(static_cast<std::size_t>(k) * k, stream);
  d.pivots = DeviceArray<int>(static_cast<std::size_t>(k), stream);
  d.status = DeviceArray<int>(2, stream);
  cusolver_check(cusolverDnCreate(&d.cusolver), "cusolverDnCreate");
  cusolver_check(cusolverDnSetStream(d.cusolver, stream), "cusolverDnSetStream");
  // K = D^{-1} - V^T G U, a panel of U's columns e_row at a time (as many as a quarter of the free memory
  // holds, at most 64).
  std::size_t free_bytes = 0, total_bytes = 0;
  gpu_memory(free_bytes, total_bytes);
  const std::size_t column_bytes = static_cast<std::size_t>(std::max<index_t>(n, 1)) * sizeof(double);
  const index_t panel = static_cast<index_t>(
      std::max<std::size_t>(1, std::min<std::size_t>({static_cast<std::size_t>(k), 64, free_bytes / 4 / column_bytes})));
  const DeviceArray<double> W(static_cast<std::size_t>(n) * panel, stream);
  const int threads = 256;
  for (index_t first = 0; first < k; first += panel) {
    const index_t width = std::min(panel, k - first);
    SPADE_CUDA_CHECK(cudaMemsetAsync(W.get(), 0, static_cast<std::size_t>(n) * width * sizeof(double), stream));
    scatter_rows_kernel<<<grid_for(static_cast<long long>(width) * width, threads), threads, 0, stream>>>(
        nullptr, d.rows.get() + first, width, width, W.get(), n);
    SPADE_CUDA_CHECK_LAUNCH();
    plan.solve(W.get(), n, W.get(), n, width, generation_);
    gather_rows_kernel<<<grid_for(static_cast<long long>(k) * width, threads), threads, 0, stream>>>(
        W.get(), n, d.cols.get(), k, width, -1.0, d.K.get() + static_cast<std::size_t>(first) * k);
    SPADE_CUDA_CHECK_LAUNCH();
  }
  const int no_bad_column = static_cast<int>(k);
  SPADE_CUDA_CHECK(cudaMemcpyAsync(d.status.get() + 1, &no_bad_column, sizeof(int), cudaMemcpyHostToDevice, stream));
  finish_k_kernel<<<grid_for(static_cast<long long>(k) * k, threads), threads, 0, stream>>>(d.K.get(), deltas.get(), k,
                                                                                            d.status.get() + 1);
  SPADE_CUDA_CHECK_LAUNCH();
  int lwork = 0;
  cusolver_check(cusolverDnDgetrf_bufferSize(d.cusolver, k, k, d.K.get(), k, &lwork), "cusolverDnDgetrf_bufferSize");
  const DeviceArray<double> work(static_cast<std::size_t>(std::max(lwork, 1)), stream);
  cusolver_check(cusolverDnDgetrf(d.cusolver, k, k, d.K.get(), k, work.get(), d.pivots.get(), d.status.get()),
                 "cusolverDnDgetrf");
  int status[2] = {0, 0};
  SPADE_CUDA_CHECK(cudaMemcpyAsync(status, d.status.get(), sizeof status, cudaMemcpyDeviceToHost, stream));
  SPADE_CUDA_CHECK(cudaStreamSynchronize(stream));
  if (status[1] < k) throw correction_overflow(perturbations[status[1]].col, "building the pivots' correction");
  if (status[0] > 0) throw correction_singular(k, perturbations[status[0] - 1].col);
}

GpuLuCorrection::~GpuLuCorrection() = default;

void GpuLuCorrection::solve(GpuSolvePlan& plan, double* X, index_t ldx, index_t nrhs, Transpose trans, double* W,
                            double& forward_seconds, double& backward_seconds, int& passes) {
  if (!built_for(*factor_) || plan.generation() != generation_)
    throw InvalidInput("GpuLuCorrection: the plan no longer holds the factor the correction was built for");
  const index_t n = plan.structure().solve->n;
  auto plan_solve = [&](double* Y, index_t ldy) {
    plan.solve(Y, ldy, Y, ldy, nrhs, generation_, trans);
    forward_seconds += plan.last_forward_seconds();
    backward_seconds += plan.last_backward_seconds();
    passes += plan.last_passes();
  };
  plan_solve(X, ldx);  // Y = G X
  if (nrhs == 0 || n == 0) return;
  Device& d = *device_;
  const cudaStream_t stream = plan.stream();
  const std::size_t count = static_cast<std::size_t>(k_) * nrhs;
  if (d.T.size() < count) d.T = DeviceArray<double>(count, stream);
  // A X = B: T = K^{-1} V^T Y, W = G U T. A^T X = B: T = K^{-T} U^T Y, W = G^T V T.
  const bool no = trans == Transpose::no;
  const int threads = 256;
  gather_rows_kernel<<<grid_for(static_cast<long long>(count), threads), threads, 0, stream>>>(
      X, ldx, no ? d.cols.get() : d.rows.get(), k_, nrhs, 1.0, d.T.get());
  SPADE_CUDA_CHECK_LAUNCH();
  cusolver_check(cusolverDnSetStream(d.cusolver, stream), "cusolverDnSetStream");
  cusolver_check(cusolverDnDgetrs(d.cusolver, no ? CUBLAS_OP_N : CUBLAS_OP_T, k_, static_cast<int>(nrhs), d.K.get(),
                                  k_, d.pivots.get(), d.T.get(), k_, d.status.get()),
                 "cusolverDnDgetrs");
  SPADE_CUDA_CHECK(cudaMemsetAsync(W, 0, static_cast<std::size_t>(n) * nrhs * sizeof(double), stream));
  scatter_rows_kernel<<<grid_for(static_cast<long long>(count), threads), threads, 0, stream>>>(
      d.T.get(), no ? d.rows.get() : d.cols.get(), k_, nrhs, W, n);
  SPADE_CUDA_CHECK_LAUNCH();
  plan_solve(W, n);
  add_block_kernel<<<grid_for(static_cast<long long>(n) * nrhs, threads), threads, 0, stream>>>(X, ldx, W, n, n,
                                                                                                 nrhs);
  SPADE_CUDA_CHECK_LAUNCH();
  SPADE_CUDA_CHECK(cudaStreamSynchronize(stream));
}

// ---- host registration and device description ----

HostRegistration::HostRegistration(const void* data, std::size_t bytes) : data_(const_cast<void*>(data)) {
  if (data == nullptr || bytes == 0) return;
  ok_ = cudaHostRegister(data_, bytes, cudaHostRegisterDefault) == cudaSuccess;
  if (!ok_) cudaGetLastError();  // not sticky; the memory stays pageable
}

HostRegistration::~HostRegistration() {
  if (ok_) cudaHostUnregister(data_);
}

void load_gpu_libraries() {
  // Where CUDA loads modules lazily, the first calls of cuBLAS's trsm and cuSOLVER's trtri are slow (the
  // measurements: docs/benchmarks/solve.md, the wait after the factorization); those of a 256 x 256
  // identity load what the plans' inversions use (the plan's warm_up_inversion then loads what its own
  // sizes add).
  constexpr int k = 256;
  struct Handles {
    cudaStream_t stream = nullptr;
    cublasHandle_t cublas = nullptr;
    cusolverDnHandle_t cusolver = nullptr;
    ~Handles() {
      if (stream != nullptr) cudaStreamSynchronize(stream);
      if (cusolver != nullptr) cusolverDnDestroy(cusolver);
      if (cublas != nullptr) cublasDestroy(cublas);
      if (stream != nullptr) cudaStreamDestroy(stream);
    }
  } h;
  SPADE_CUDA_CHECK(cudaStreamCreateWithFlags(&h.stream, cudaStreamNonBlocking));
  cublas_check(cublasCreate(&h.cublas), "cublasCreate");
  cublas_check(cublasSetStream(h.cublas, h.stream), "cublasSetStream");
  cusolver_check(cusolverDnCreate(&h.cusolver), "cusolverDnCreate");
  cusolver_check(cusolverDnSetStream(h.cusolver, h.stream), "cusolverDnSetStream");
  // A 2k x k panel: the identity over k rows of zeros, as a supernode's [L11; L21].
  std::vector<double> identity(2 * k * k, 0.0);
  for (int i = 0; i < k; ++i) identity[i + i * 2 * k] = 1.0;
  DeviceArray<double> panel(identity, h.stream);
  DeviceArray<int> info(1, h.stream);
  const double one = 1.0;
  cublas_check(cublasDtrsm(h.cublas, CUBLAS_SIDE_RIGHT, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, CUBLAS_DIAG_NON_UNIT, k, k,
                           &one, panel.get(), 2 * k, panel.get() + k, 2 * k),
               "cublasDtrsm");
  std::size_t device_bytes = 0, host_bytes = 0;
  cusolver_check(cusolverDnXtrtri_bufferSize(h.cusolver, CUBLAS_FILL_MODE_LOWER, CUBLAS_DIAG_NON_UNIT, k, CUDA_R_64F,
                                             panel.get(), 2 * k, &device_bytes, &host_bytes),
                 "cusolverDnXtrtri_bufferSize");
  DeviceArray<char> work(std::max<std::size_t>(device_bytes, 1), h.stream);
  std::vector<char> host(std::max<std::size_t>(host_bytes, 1));
  cusolver_check(cusolverDnXtrtri(h.cusolver, CUBLAS_FILL_MODE_LOWER, CUBLAS_DIAG_NON_UNIT, k, CUDA_R_64F, panel.get(),
                                  2 * k, work.get(), device_bytes, host.data(), host.size(), info.get()),
                 "cusolverDnXtrtri");
  kernels::load_supernodal_kernels();
  for (int width = 1; width <= GpuSolvePlan::kMaxWidth; width *= 2)
    for (const kernels::PanelPrecision precision : {kernels::PanelPrecision::fp64, kernels::PanelPrecision::fp32}) {
      kernels::supernodal_blocks_per_sm(width, true, precision);
      kernels::supernodal_blocks_per_sm(width, false, precision);
    }
  SPADE_CUDA_CHECK(cudaStreamSynchronize(h.stream));  // `identity` and `host` are read until here
}

void gpu_memory(std::size_t& free_bytes, std::size_t& total_bytes) {
  SPADE_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
}

double gpu_bandwidth_estimate() {
  const double clock_khz = cuda_device_attribute(cudaDevAttrMemoryClockRate);
  const double bus_bits = cuda_device_attribute(cudaDevAttrGlobalMemoryBusWidth);
  const double peak = 2.0 * clock_khz * 1e3 * bus_bits / 8;  // double data rate
  // A device that reports no clock (some virtual ones) gets the H100's measured copy bandwidth.
  return peak > 0 ? 0.9 * peak : 2.99e12;
}

std::string gpu_description() {
  int device = 0;
  SPADE_CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp p;
  SPADE_CUDA_CHECK(cudaGetDeviceProperties(&p, device));
  std::size_t free_bytes = 0, total_bytes = 0;
  gpu_memory(free_bytes, total_bytes);
  char line[512];
  std::snprintf(line, sizeof line, "%s (sm_%d%d, %d SMs, %.1f of %.1f GiB free)", p.name, p.major, p.minor,
                p.multiProcessorCount, free_bytes / 1073741824.0, total_bytes / 1073741824.0);
  return line;
}

}  // namespace spade
