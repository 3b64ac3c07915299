// The sparse triangular-solve plan: analysis on the GPU (validation, the internal lower form, statistics,
// level sets, in-degrees, row chunks), the choice of `auto`, and the orchestration of the solve kernels
// (kernels/sptrsv_*.cu). Contract in include/spade/sptrsv.hpp.
#include "spade/sptrsv.hpp"

#include <algorithm>
#include <chrono>
#include <climits>
#include <limits>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda_check.hpp"
#include "kernels/sptrsv_kernels.hpp"
#include "spade/error.hpp"

namespace spade {
namespace ks = kernels::sptrsv;

const char* to_string(SptrsvAlgorithm algorithm) {
  switch (algorithm) {
    case SptrsvAlgorithm::automatic: return "auto";
    case SptrsvAlgorithm::levr: return "levr";
    case SptrsvAlgorithm::levc: return "levc";
    case SptrsvAlgorithm::slfr: return "slfr";
    case SptrsvAlgorithm::slfc: return "slfc";
    case SptrsvAlgorithm::syncfree: return "syncfree";
    case SptrsvAlgorithm::thread: return "thread";
    case SptrsvAlgorithm::fused: return "fused";
    case SptrsvAlgorithm::fused_level: return "fused_level";
    case SptrsvAlgorithm::level_block: return "level_block";
    case SptrsvAlgorithm::cluster: return "cluster";
  }
  return "?";
}

SptrsvAlgorithm sptrsv_algorithm_from_string(const std::string& name) {
  for (SptrsvAlgorithm a : {SptrsvAlgorithm::automatic, SptrsvAlgorithm::levr, SptrsvAlgorithm::levc,
                            SptrsvAlgorithm::slfr, SptrsvAlgorithm::slfc, SptrsvAlgorithm::syncfree,
                            SptrsvAlgorithm::thread, SptrsvAlgorithm::fused, SptrsvAlgorithm::fused_level,
                            SptrsvAlgorithm::level_block, SptrsvAlgorithm::cluster})
    if (name == to_string(a)) return a;
  throw InvalidInput("unknown sparse triangular-solve algorithm '" + name +
                     "' (expected auto, levr, levc, slfr, slfc, syncfree, thread, fused, fused_level, "
                     "level_block or cluster)");
}

namespace {

/// A start and a stop event that time work on a stream: auto's trial solves.
class TimingEvents {
 public:
  TimingEvents() {
    SPADE_CUDA_CHECK(cudaEventCreate(&start_));
    if (const cudaError_t status = cudaEventCreate(&stop_); status != cudaSuccess) {
      cudaEventDestroy(start_);
      SPADE_CUDA_CHECK(status);
    }
  }
  ~TimingEvents() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  TimingEvents(const TimingEvents&) = delete;
  TimingEvents& operator=(const TimingEvents&) = delete;

  /// Records the events around `work` (which enqueues on `stream`), waits for the stop event, and returns
  /// the time between them in microseconds.
  template <typename Work>
  double microseconds(cudaStream_t stream, Work&& work) {
    SPADE_CUDA_CHECK(cudaEventRecord(start_, stream));
    work();
    SPADE_CUDA_CHECK(cudaEventRecord(stop_, stream));
    SPADE_CUDA_CHECK(cudaEventSynchronize(stop_));
    float ms = 0;
    SPADE_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    return double(ms) * 1e3;
  }

 private:
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

/// One allocation holding several arrays, laid out first (add) and carved after (at). Every slab is taken in
/// the analysis, stream-ordered from the current device's memory pool (cudaMallocAsync on its stream, so the
/// application's pool settings apply): on an H100 that took 2 us for 2-8 MiB, where cudaMalloc took 45-120
/// us, most of a small matrix's analysis. Without pools (cudaDevAttrMemoryPoolsSupported = 0), cudaMalloc.
/// A solve allocates nothing (a stream being captured would record a graph allocation). The destructor
/// frees without waiting for the device: its owner makes sure that no work still reads the slab (the plan
/// waits for its own last solve, SptrsvPlan::Impl::~Impl); pool memory goes back stream-ordered on the
/// legacy default stream, cudaMalloc's through cudaFree (which itself waits for the device).
class Slab {
 public:
  template <typename U>
  std::size_t add(std::size_t count) {
    const std::size_t offset = (bytes_ + 255) / 256 * 256;
    bytes_ = offset + std::max<std::size_t>(count, 1) * sizeof(U);
    return offset;
  }
  /// Stream-ordered on `stream`, usable by other streams once the caller has synchronized it.
  void allocate(cudaStream_t stream) {
    pooled_ = cuda_device_attribute(cudaDevAttrMemoryPoolsSupported) != 0;
    if (pooled_)
      SPADE_CUDA_CHECK(cudaMallocAsync(&base_, bytes_ == 0 ? 1 : bytes_, stream));
    else
      allocate();
  }
  void allocate() { SPADE_CUDA_CHECK(cudaMalloc(&base_, bytes_ == 0 ? 1 : bytes_)); }
  template <typename U>
  U* at(std::size_t offset) const {
    return reinterpret_cast<U*>(static_cast<char*>(base_) + offset);
  }
  Slab() = default;
  Slab(Slab&& o) noexcept
      : base_(std::exchange(o.base_, nullptr)), bytes_(o.bytes_), pooled_(std::exchange(o.pooled_, false)) {}
  Slab& operator=(Slab&& o) noexcept {
    std::swap(base_, o.base_);
    std::swap(bytes_, o.bytes_);
    std::swap(pooled_, o.pooled_);
    return *this;
  }
  ~Slab() {
    if (base_ == nullptr) return;
    if (pooled_)
      cudaFreeAsync(base_, nullptr);
    else
      cudaFree(base_);
  }

 private:
  void* base_ = nullptr;
  std::size_t bytes_ = 0;
  bool pooled_ = false;
};

/// Device-side words the analysis and the solves report through, read back in one copy.
struct Control {
  unsigned long long bad;
  int zero_row;
  int m;
  int max_level;
  int max_count;
  int max_level_chunks;  // level_block: the largest packed level, in 16-byte chunks
  int cluster[3];        // cluster: ks::ClusterMeasure
  int nitems;
  int tickets[2];
  kernels::DeviceStatus status;
};

/// The control words as every launch needs them, with the plan's spin limit (0: kernels::kSpinLimit).
Control fresh_control(long long spin_limit) {
  Control c{};
  c.bad = ~0ull;
  c.zero_row = INT_MAX;
  c.status.spin_limit = spin_limit;
  return c;
}

bool needs_csr(SptrsvAlgorithm a) {
  return a == SptrsvAlgorithm::levr || a == SptrsvAlgorithm::slfr || a == SptrsvAlgorithm::thread ||
         a == SptrsvAlgorithm::fused || a == SptrsvAlgorithm::fused_level || a == SptrsvAlgorithm::level_block ||
         a == SptrsvAlgorithm::cluster;
}
bool needs_levels(SptrsvAlgorithm a) {
  return a == SptrsvAlgorithm::levr || a == SptrsvAlgorithm::levc || a == SptrsvAlgorithm::slfr ||
         a == SptrsvAlgorithm::slfc || a == SptrsvAlgorithm::fused_level || a == SptrsvAlgorithm::level_block ||
         a == SptrsvAlgorithm::cluster;
}
/// The rows renumbered in level order (a second copy of the part).
bool level_ordered(SptrsvAlgorithm a) {
  return a == SptrsvAlgorithm::fused_level || a == SptrsvAlgorithm::level_block || a == SptrsvAlgorithm::cluster;
}
bool chunked_solve(SptrsvAlgorithm a) {
  return a == SptrsvAlgorithm::thread || a == SptrsvAlgorithm::fused || a == SptrsvAlgorithm::fused_level;
}


const char* inspect_message(int code) {
  switch (code) {
    case ks::kBadPointer: return "pointers out of order or beyond ptr[n]";
    case ks::kBadIndex: return "an index outside [0, n)";
    case ks::kUnsorted: return "indices not strictly increasing";
    case ks::kWrongTriangle: return "an entry outside the triangle";
  }
  return "malformed";
}

}  // namespace

template <typename T>
struct SptrsvPlan<T>::Impl {
  SptrsvAlgorithm algorithm = SptrsvAlgorithm::automatic;
  SptrsvAlgorithm multi_algorithm = SptrsvAlgorithm::automatic;  // passes of several right-hand sides
  SptrsvStats stats;
  bool reversed = false, unit = false;
  std::int32_t input_nnz = 0, m = 0;  // entries given, off-diagonal entries kept
  Slab common, scratch8, level_order;  // level_order: the part renumbered in level order
  Slab pack_index, pack_data;         // level_block: the packed levels (descriptors and offsets, regions)
  Slab cluster_data;                  // cluster: the layout's arrays
  ks::ClusterLayout cluster{};
  Control* control = nullptr;
  // the internal lower part in the format the algorithm runs on
  std::int32_t* ptr = nullptr;
  index_t* ind = nullptr;
  T* val = nullptr;
  std::int32_t* src = nullptr;
  T* diag = nullptr;
  std::int32_t* diag_src = nullptr;
  std::int32_t* perm = nullptr;  // fused_level: row i of the part above is internal row perm[i]
  // per algorithm
  std::int32_t* jlev = nullptr;
  std::int32_t* level_ptr = nullptr;  // device, levels + 1 entries
  std::vector<std::int32_t> level_ptr_host;
  int* flag = nullptr;  // SLFR flags or SLFC / syncfree counters
  std::int32_t* global_deg = nullptr;
  std::int32_t* local_deg = nullptr;
  int max_degree = 1;
  std::int32_t* items = nullptr;
  int nitems = 0;
  T* left_sum[2] = {nullptr, nullptr};  // R = 1, R = kRhsPerPass
  T* y[2][2] = {{nullptr, nullptr}, {nullptr, nullptr}};  // fused: two sentinel buffers; level_block: one
  int parity[2] = {0, 0};
  ks::LevrGraph<T> levr_graph[2];  // levr: one right-hand side, passes of several
  Slab levr_data;                  // levr: the pieces of rows of more than kLevrPiece entries, where some are
  ks::LevrItems<T> levr_items{};
  std::int32_t* level_piece_ptr = nullptr;  // device: each level's first piece
  std::vector<std::int32_t> level_piece_ptr_host;
  ks::LevelPack<T> pack{};
  ks::LevelDesc* pack_desc = nullptr;
  std::int32_t* pack_offsets = nullptr;
  unsigned char* pack_bytes = nullptr;
  int epoch = 0;
  long long spin_limit = 0;  // set_spin_limit; rewritten with every reset of the control words
  bool several_rhs = true;   // SptrsvOptions::several_rhs: the scratch of passes of several is allocated
  cudaEvent_t last_solve = nullptr;  // recorded after every solve outside a stream capture
  SptrsvAutoChoice choice;           // auto: the rule's choice (trials included)
  // auto: the plans of named algorithms that won the trials and run the passes of one right-hand side and
  // of several (null: this plan runs them); one object may run both.
  std::shared_ptr<Impl> runs_one, runs_several;

  Impl() = default;
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  /// Waits for this plan's last solve (not for the device) before the members free their memory.
  ~Impl() {
    if (last_solve == nullptr) return;
    cudaEventSynchronize(last_solve);
    cudaEventDestroy(last_solve);
  }

  ks::LowerPart<T> lower() const { return {stats.n, ptr, ind, val, diag, reversed, perm}; }
  ks::Schedule schedule() const { return {control->tickets, &control->status}; }

  /// Synchronizes `stream` and returns the control words; where levels >= 0, also the level pointers into
  /// level_ptr_host, in the same copy (the analysis lays level_ptr out right behind the control words).
  Control read_control(cudaStream_t stream, int levels = -1) {
    Control c;
    if (levels < 0) {
      SPADE_CUDA_CHECK(cudaMemcpyAsync(&c, control, sizeof(Control), cudaMemcpyDeviceToHost, stream));
      SPADE_CUDA_CHECK(cudaStreamSynchronize(stream));
      return c;
    }
    const std::size_t offset = std::size_t(reinterpret_cast<char*>(level_ptr) - reinterpret_cast<char*>(control));
    level_ptr_host.resize(std::size_t(levels) + 1);
    std::vector<char> bytes(offset + sizeof(std::int32_t) * level_ptr_host.size());
    SPADE_CUDA_CHECK(cudaMemcpyAsync(bytes.data(), control, bytes.size(), cudaMemcpyDeviceToHost, stream));
    SPADE_CUDA_CHECK(cudaStreamSynchronize(stream));
    std::memcpy(&c, bytes.data(), sizeof(Control));
    std::memcpy(level_ptr_host.data(), bytes.data() + offset, sizeof(std::int32_t) * level_ptr_host.size());
    return c;
  }

  void throw_if_singular(int zero_row) const {
    if (zero_row != INT_MAX)
      throw NumericalError(NumericalError::Kind::singular, zero_row,
                           "sparse triangular solve: zero or missing diagonal entry in row " +
                               std::to_string(zero_row) + " of a non-unit triangle");
  }

  void analyse(const DeviceTriangle<T>& a, const SptrsvOptions& options, cudaStream_t stream);
  void build_level_pack(std::int32_t* work, void* temp, std::size_t temp_bytes, cudaStream_t stream);
  bool build_cluster(int nlev, double entries_per_row, int* row_level, std::int32_t* counts, std::int32_t* cursor,
                     cudaStream_t stream);
  void build_levr_pieces(void* temp, std::size_t temp_bytes, cudaStream_t stream);
  void reset_scratch(cudaStream_t stream);
  void allocate_multi_rhs(cudaStream_t stream);
  bool fused_beats(double levr_us, cudaStream_t stream);
  void solve_pass(const ks::RhsPass<T>& rhs, int w, cudaStream_t stream);
  double time_pass(const T* b, T* x, int w, TimingEvents& events, cudaStream_t stream);
  void measure(const DeviceTriangle<T>& a, const SptrsvOptions& options, double analysis_ms, cudaStream_t stream);
  void throw_if_stalled(cudaStream_t stream, const char* what);
  void check_status(cudaStream_t stream);            // check() for this plan's words
  void update(const T* values, cudaStream_t stream);  // update_values() for this plan's copies
};

template <typename T>
void SptrsvPlan<T>::Impl::analyse(const DeviceTriangle<T>& a, const SptrsvOptions& options, cudaStream_t stream) {
  const index_t n = a.n;
  if (n < 0) throw InvalidInput("sparse triangular solve: n = " + std::to_string(n) + " is negative");
  if (n == INT_MAX)  // the scans run over n + 1 items
    throw ResourceError("sparse triangular solve: n = " + std::to_string(n) + " leaves no room for n + 1 in 32-bit "
                        "indices");
  if (a.nnz < 0) throw InvalidInput("sparse triangular solve: nnz = " + std::to_string(a.nnz) + " is negative");
  if (a.ptr == nullptr) throw InvalidInput("sparse triangular solve: ptr is null");
  if (a.nnz > 0 && (a.ind == nullptr || a.values == nullptr))
    throw InvalidInput("sparse triangular solve: ind or values is null");
  if (!(options.fusion_threshold >= 0))
    throw InvalidInput("sparse triangular solve: fusion_threshold must be >= 0");
  input_nnz = a.nnz;
  reversed = a.triangle == TriangleKind::upper;
  unit = a.diagonal == DiagonalKind::unit;
  stats.n = n;
  const bool csr = a.format == SparseFormat::csr;
  algorithm = options.algorithm;
  const bool automatic = algorithm == SptrsvAlgorithm::automatic;
  several_rhs = options.several_rhs;
  // What runs where cluster's layout does not fit: fused_level for the named cluster, the rule's next
  // candidate for auto.
  SptrsvAlgorithm without_cluster = SptrsvAlgorithm::fused_level;
  SptrsvAlgorithm multi_without_cluster = SptrsvAlgorithm::fused_level;

  // Everything the analysis and the solves can need, in one allocation. auto may end with levr or fused;
  // both run on CSR.
  const bool want_csr = automatic || needs_csr(algorithm);
  const bool transposed = want_csr != csr;
  const bool levels_needed = needs_levels(algorithm);
  const bool leveled = automatic || levels_needed;
  // cluster falls back to fused_level where its layout does not fit.
  const bool chunked = automatic || chunked_solve(algorithm) || algorithm == SptrsvAlgorithm::cluster;
  const bool flagged = algorithm == SptrsvAlgorithm::slfr || algorithm == SptrsvAlgorithm::slfc ||
                       algorithm == SptrsvAlgorithm::syncfree;
  const bool columns = algorithm == SptrsvAlgorithm::slfc || algorithm == SptrsvAlgorithm::syncfree;
  const index_t nchunks = (n + ks::kWarpSize - 1) / ks::kWarpSize;
  const std::size_t nnz = std::size_t(input_nnz), n1 = std::size_t(n) + 1;
  std::size_t temp_bytes = std::max(ks::scan_temp_bytes(n), ks::scan_temp_bytes(nchunks));
  if (transposed) temp_bytes = std::max(temp_bytes, ks::sort_temp_bytes(input_nnz, ks::key_bits(n)));
  if (leveled) temp_bytes = std::max(temp_bytes, ks::sort_temp_bytes(n, ks::key_bits(n)));

  Slab layout;
  // The level pointers right behind the control words: read_control brings both back in one copy.
  const auto o_control = layout.add<Control>(1), o_level_ptr = layout.add<std::int32_t>(leveled ? n1 : 0);
  const auto o_passes = layout.add<ks::RhsPass<T>>(2);  // where levr's second graphs read their pass
  const auto o_temp = layout.add<char>(temp_bytes);
  const auto o_count = layout.add<std::int32_t>(n1);
  const auto o_diag = layout.add<T>(n), o_diag_src = layout.add<std::int32_t>(n);
  const auto o_ptr = layout.add<std::int32_t>(n1), o_ind = layout.add<index_t>(nnz), o_val = layout.add<T>(nnz),
             o_src = layout.add<std::int32_t>(nnz);
  const auto o_level = layout.add<int>(leveled ? n : 0), o_work = layout.add<int>(n1),
             o_work2 = layout.add<int>(n);
  const auto o_lev_order = layout.add<std::int32_t>(leveled ? n : 0), o_lev_keys = layout.add<int>(leveled ? n : 0);
  const std::size_t tn = transposed ? nnz : 0;
  const auto o_tcount = layout.add<std::int32_t>(transposed ? n1 : 0);
  const auto o_tptr = layout.add<std::int32_t>(transposed ? n1 : 0), o_tind = layout.add<index_t>(tn),
             o_tval = layout.add<T>(tn), o_tsrc = layout.add<std::int32_t>(tn), o_outer = layout.add<index_t>(tn),
             o_order_in = layout.add<std::int32_t>(tn), o_order_out = layout.add<std::int32_t>(tn),
             o_keys_out = layout.add<index_t>(tn);
  const auto o_jlev = layout.add<std::int32_t>(leveled ? n : 0);
  const auto o_flag = layout.add<int>(flagged ? n : 0), o_gdeg = layout.add<std::int32_t>(columns ? n : 0),
             o_ldeg = layout.add<std::int32_t>(algorithm == SptrsvAlgorithm::syncfree ? n : 0),
             o_left = layout.add<T>(columns ? n : 0);
  const std::size_t cn = chunked ? std::size_t(nchunks) + 1 : 0;
  const auto o_items = layout.add<std::int32_t>(chunked ? n1 : 0), o_per_chunk = layout.add<std::int32_t>(cn),
             o_chunk_base = layout.add<std::int32_t>(cn),
             o_y0 = layout.add<T>(chunked || algorithm == SptrsvAlgorithm::level_block ? n : 0),
             o_y1 = layout.add<T>(chunked ? n : 0);
  common = std::move(layout);
  common.allocate(stream);
  control = common.at<Control>(o_control);
  for (int w = 0; w < 2; ++w) levr_graph[w].set_pass_storage(common.at<ks::RhsPass<T>>(o_passes) + w);
  void* temp = common.at<char>(o_temp);
  std::int32_t* count = common.at<std::int32_t>(o_count);
  diag = common.at<T>(o_diag);
  diag_src = common.at<std::int32_t>(o_diag_src);
  std::int32_t* a_ptr = common.at<std::int32_t>(o_ptr);
  index_t* a_ind = common.at<index_t>(o_ind);
  T* a_val = common.at<T>(o_val);
  std::int32_t* a_src = common.at<std::int32_t>(o_src);
  int* level = common.at<int>(o_level);
  int* work = common.at<int>(o_work);
  int* work2 = common.at<int>(o_work2);

  // Validation, the diagonal, the internal lower form in the input's orientation.
  Control init = fresh_control(spin_limit);
  SPADE_CUDA_CHECK(cudaMemcpyAsync(control, &init, sizeof(Control), cudaMemcpyHostToDevice, stream));
  const ks::InputTriangle<T> in{n, input_nnz, a.ptr, a.ind, a.values, csr, !reversed, unit};
  // The level array is cleared by the inspection, and the most entries in a row taken there for CSR.
  ks::inspect_triangle(in, count, diag, diag_src, &control->bad, &control->zero_row,
                       csr ? &control->max_count : nullptr, leveled ? level : nullptr, stream);
  ks::exclusive_scan(n, count, a_ptr, temp, temp_bytes, stream);
  ks::scatter_same_orientation(in, a_ptr, diag_src, a_ind, a_val, a_src, &control->m, stream);
  // In-degrees (off-diagonal entries per row): the counts of a CSR input, a histogram of a CSC one (over
  // the m entries kept, m read on the device).
  std::int32_t* indeg = count;
  if (!csr) {
    SPADE_CUDA_CHECK(cudaMemsetAsync(work, 0, sizeof(int) * n, stream));
    ks::histogram(input_nnz, a_ind, work, stream, &control->m);
    indeg = work;
    ks::count_max(n, indeg, &control->max_count, stream);
  }

  Control c{};
  auto check_input = [&](const Control& got) {
    if (got.bad != ~0ull) {
      const long long segment = static_cast<long long>(got.bad >> 8);
      throw InvalidInput(std::string("sparse triangular solve: ") + (csr ? "row " : "column ") +
                         std::to_string(segment) + " of the " + (reversed ? "upper" : "lower") + " triangle has " +
                         inspect_message(static_cast<int>(got.bad & 0xff)));
    }
    throw_if_singular(got.zero_row);
  };
  int nlev = -1;  // the level count, once read back
  if (transposed || (levels_needed && !csr)) {
    // The transposition needs m; the CSC level kernel waits on in-degree counters: run it on validated
    // input only. The CSR level kernel does nothing where the input was found bad, so it does not wait
    // here: the input is checked when the level count comes back.
    c = read_control(stream);
    check_input(c);
    m = c.m;
  }
  if (levels_needed) {
    if (csr) {
      ks::levels_csr(n, a_ptr, a_ind, level, &control->max_level, &control->bad, schedule(), stream);
    } else {
      SPADE_CUDA_CHECK(cudaMemsetAsync(work2, 0, sizeof(int) * n, stream));
      ks::levels_csc(n, a_ptr, a_ind, indeg, level, work2, &control->max_level, schedule(), stream);
    }
  }

  // The layout the algorithm runs on.
  if (transposed) {
    ptr = common.at<std::int32_t>(o_tptr);
    ind = common.at<index_t>(o_tind);
    val = common.at<T>(o_tval);
    src = common.at<std::int32_t>(o_tsrc);
    const ks::TransposeWork tw{common.at<std::int32_t>(o_tcount), common.at<index_t>(o_outer),
                               common.at<std::int32_t>(o_order_in), common.at<std::int32_t>(o_order_out),
                               common.at<index_t>(o_keys_out), temp, temp_bytes};
    ks::transpose_lower(n, m, a_ptr, a_ind, a_val, a_src, ptr, ind, val, src, tw, stream);
  } else {
    ptr = a_ptr;
    ind = a_ind;
    val = a_val;
    src = a_src;
  }
  if (leveled) {
    if (automatic) ks::levels_csr(n, ptr, ind, level, &control->max_level, &control->bad, schedule(), stream);
    // The level count, and the input check where it did not come first.
    c = read_control(stream);
    check_input(c);
    m = c.m;
    nlev = c.max_level;
  }
  bool levels_copied = false;  // level_ptr_host holds the level pointers
  if (automatic) {
    // The rule reads the widest level: the level sets first, their pointers back to the host.
    jlev = common.at<std::int32_t>(o_jlev);
    level_ptr = common.at<std::int32_t>(o_level_ptr);
    ks::level_sets(n, &control->max_level, nlev, level, jlev, level_ptr, common.at<std::int32_t>(o_lev_order),
                   common.at<int>(o_lev_keys), temp, temp_bytes, stream);
    read_control(stream, nlev);
    levels_copied = true;
    SptrsvShape shape;
    shape.n = n;
    shape.off_diagonal_nnz = m;
    shape.levels = nlev;
    shape.max_nnz_per_row = c.max_count;
    for (int l = 0; l < nlev; ++l)
      shape.max_rows_per_level = std::max(shape.max_rows_per_level, level_ptr_host[l + 1] - level_ptr_host[l]);
    choice = sptrsv_auto_rule(shape, SptrsvDeviceModel::current());
    algorithm = choice.one;
    multi_algorithm = choice.several;
    without_cluster = choice.one_fallback;
    multi_without_cluster = choice.several_fallback;
  }
  if (multi_algorithm == SptrsvAlgorithm::automatic) multi_algorithm = algorithm;
  const bool level_sets = needs_levels(algorithm) || needs_levels(multi_algorithm);
  if (level_sets && !automatic) {
    jlev = common.at<std::int32_t>(o_jlev);
    level_ptr = common.at<std::int32_t>(o_level_ptr);
    ks::level_sets(n, &control->max_level, nlev, level, jlev, level_ptr,
                   common.at<std::int32_t>(o_lev_order), common.at<int>(o_lev_keys), temp, temp_bytes, stream);
  }
  if (level_ordered(algorithm) || level_ordered(multi_algorithm)) {
    // Rows renumbered in level order (P L P^T, lower triangular again): the chunks and the tickets of the
    // fused kernel then follow the levels instead of the index order, and a level of level_block is a
    // contiguous range of rows and of entries. A second copy of the part, in its
    // own allocation (auto allocates it only when it takes level_block or cluster); the row counts and the inverse
    // numbering go in the analysis' work arrays, free once the levels are known.
    Slab copy;
    const std::size_t pnnz = std::size_t(m);
    const auto o_pptr = copy.add<std::int32_t>(n1), o_pdiag = copy.add<T>(n),
               o_pdiag_src = copy.add<std::int32_t>(n), o_pind = copy.add<index_t>(pnnz),
               o_pval = copy.add<T>(pnnz), o_psrc = copy.add<std::int32_t>(pnnz);
    level_order = std::move(copy);
    level_order.allocate(stream);
    std::int32_t* pptr = level_order.at<std::int32_t>(o_pptr);
    std::int32_t* pcount = work;
    std::int32_t* inv = work2;
    T* pdiag = level_order.at<T>(o_pdiag);
    std::int32_t* pdiag_src = level_order.at<std::int32_t>(o_pdiag_src);
    index_t* pind = level_order.at<index_t>(o_pind);
    T* pval = level_order.at<T>(o_pval);
    std::int32_t* psrc = level_order.at<std::int32_t>(o_psrc);
    ks::perm_count(n, ptr, jlev, diag, diag_src, inv, pcount, pdiag, pdiag_src, stream);
    ks::exclusive_scan(n, pcount, pptr, temp, temp_bytes, stream);
    ks::perm_fill(n, ptr, ind, val, src, jlev, inv, pptr, pind, pval, psrc, stream);
    ptr = pptr;
    ind = pind;
    val = pval;
    src = psrc;
    diag = pdiag;
    diag_src = pdiag_src;
    perm = jlev;
  }
  if (algorithm == SptrsvAlgorithm::cluster || multi_algorithm == SptrsvAlgorithm::cluster) {
    // The level array is free once the level sets exist; so are the work arrays after the renumbering.
    // Where the layout does not fit, cluster gives way to fused_level (auto: to what it would run without
    // cluster).
    const double entries_per_row = n > 0 ? double(m) / n : 0;  // below the diagonal, as stats.nnz_per_row
    if (!build_cluster(nlev, entries_per_row, level, work, work2, stream)) {
      if (algorithm == SptrsvAlgorithm::cluster) algorithm = without_cluster;
      if (multi_algorithm == SptrsvAlgorithm::cluster) multi_algorithm = multi_without_cluster;
    } else if (automatic && !ks::cluster_one_pass(cluster, entries_per_row)) {
      algorithm = without_cluster;
    }
  }
  if (algorithm == SptrsvAlgorithm::levr || multi_algorithm == SptrsvAlgorithm::levr) {
    if (c.max_count > ks::kLevrPiece)
      build_levr_pieces(temp, temp_bytes, stream);
    else
      levr_items.jlev = perm != nullptr ? nullptr : jlev;  // the rows themselves, in the part's order
    levr_items.longest = std::min(c.max_count, ks::kLevrPiece);
  }
  if (flagged) {
    flag = common.at<int>(o_flag);
    SPADE_CUDA_CHECK(cudaMemsetAsync(flag, 0, sizeof(int) * std::max(n, 1), stream));
  }
  if (columns) {
    global_deg = common.at<std::int32_t>(o_gdeg);
    left_sum[0] = common.at<T>(o_left);
    SPADE_CUDA_CHECK(cudaMemsetAsync(left_sum[0], 0, sizeof(T) * std::max(n, 1), stream));
    if (algorithm == SptrsvAlgorithm::syncfree) {
      local_deg = common.at<std::int32_t>(o_ldeg);
      SPADE_CUDA_CHECK(cudaMemsetAsync(global_deg, 0, sizeof(std::int32_t) * std::max(n, 1), stream));
      SPADE_CUDA_CHECK(cudaMemsetAsync(local_deg, 0, sizeof(std::int32_t) * std::max(n, 1), stream));
      ks::split_in_degree(n, ptr, ind, global_deg, local_deg, stream);
    } else {
      SPADE_CUDA_CHECK(cudaMemcpyAsync(global_deg, indeg, sizeof(std::int32_t) * n, cudaMemcpyDeviceToDevice, stream));
    }
  }
  if (chunked_solve(algorithm) || choice.try_fused) {
    items = common.at<std::int32_t>(o_items);
    const double threshold = algorithm == SptrsvAlgorithm::thread ? 1e300 : options.fusion_threshold;
    ks::fused_items(n, ptr, threshold, items, &control->nitems, common.at<std::int32_t>(o_per_chunk),
                    common.at<std::int32_t>(o_chunk_base), temp, temp_bytes, stream);
    y[0][0] = common.at<T>(o_y0);
    y[0][1] = common.at<T>(o_y1);
    ks::fill_sentinel<T>(n, y[0][0], stream);
    ks::fill_sentinel<T>(n, y[0][1], stream);
  }
  if (algorithm == SptrsvAlgorithm::level_block) y[0][0] = common.at<T>(o_y0);
  // The level pointers come back with the control words (each level's first piece just before).
  if (level_piece_ptr != nullptr) {
    level_piece_ptr_host.resize(std::size_t(nlev) + 1);
    SPADE_CUDA_CHECK(cudaMemcpyAsync(level_piece_ptr_host.data(), level_piece_ptr,
                                     sizeof(std::int32_t) * level_piece_ptr_host.size(), cudaMemcpyDeviceToHost,
                                     stream));
  }
  if (several_rhs) allocate_multi_rhs(stream);
  if (last_solve == nullptr) SPADE_CUDA_CHECK(cudaEventCreateWithFlags(&last_solve, cudaEventDisableTiming));
  c = read_control(stream, level_sets && !levels_copied ? nlev : -1);
  check_input(c);
  if (c.status.code != kernels::kStatusOk)
    throw NumericalError(NumericalError::Kind::no_progress, c.status.index,
                         "sparse triangular solve: the level analysis stopped waiting at unknown " +
                             std::to_string(c.status.index));
  m = c.m;
  nitems = c.nitems;
  stats.off_diagonal_nnz = m;
  stats.nnz_per_row = n > 0 ? double(m) / n : 0;
  stats.max_nnz_per_row = c.max_count;
  max_degree = std::max(1, stats.max_nnz_per_row);
  if (needs_levels(algorithm) || automatic) {
    stats.levels = c.max_level;
    stats.rows_per_level = c.max_level > 0 ? double(n) / c.max_level : 0;
  }
  if (level_sets)
    for (int l = 0; l < stats.levels; ++l)
      stats.max_rows_per_level = std::max(stats.max_rows_per_level, level_ptr_host[l + 1] - level_ptr_host[l]);
  if (algorithm == SptrsvAlgorithm::level_block || multi_algorithm == SptrsvAlgorithm::level_block)
    build_level_pack(work, temp, temp_bytes, stream);
  if (choice.try_fused && n > 0 && fused_beats(choice.levr_us, stream)) algorithm = SptrsvAlgorithm::fused;
}

template <typename T>
bool SptrsvPlan<T>::Impl::fused_beats(double levr_us, cudaStream_t stream) {
  // One fused solve of b = 0 (its time does not depend on the values), timed with events; a second one
  // only where the first lost, which may have paid the loading of the kernel's module.
  const index_t n = stats.n;
  Slab trial;
  const auto o_b = trial.add<T>(std::size_t(n)), o_x = trial.add<T>(std::size_t(n));
  trial.allocate(stream);
  T* b = trial.at<T>(o_b);
  SPADE_CUDA_CHECK(cudaMemsetAsync(b, 0, sizeof(T) * n, stream));
  TimingEvents events;
  const ks::RhsPass<T> rhs{b, n, trial.at<T>(o_x), n, 1};
  bool faster = false;
  for (int attempt = 0; attempt < 2 && !faster; ++attempt) {
    const double us = events.microseconds(stream, [&] {
      const int cur = parity[0];
      ks::solve_fused(lower(), items, nitems, y[0][cur], y[0][1 - cur], rhs, schedule(), stream);
      parity[0] = 1 - cur;
    });
    faster = us < levr_us;
  }
  throw_if_stalled(stream, "fused");
  return faster;
}

template <typename T>
void SptrsvPlan<T>::Impl::throw_if_stalled(cudaStream_t stream, const char* what) {
  const Control c = read_control(stream);
  if (c.status.code != kernels::kStatusOk)
    throw NumericalError(NumericalError::Kind::no_progress, c.status.index,
                         std::string("sparse triangular solve: auto's trial of ") + what +
                             " stopped waiting at unknown " + std::to_string(c.status.index));
}

template <typename T>
double SptrsvPlan<T>::Impl::time_pass(const T* b, T* x, int w, TimingEvents& events, cudaStream_t stream) {
  // One warm-up pass (the kernel's module may load), then one timed; the work does not depend on b. w = 0:
  // one right-hand side of `algorithm`; w = 1: kRhsPerPass of multi_algorithm (b and x hold that many
  // columns of n).
  const ks::RhsPass<T> rhs{b, stats.n, x, stats.n, w == 0 ? 1 : ks::kRhsPerPass};
  solve_pass(rhs, w, stream);
  const double us = events.microseconds(stream, [&] { solve_pass(rhs, w, stream); });
  throw_if_stalled(stream, to_string(w == 0 ? algorithm : multi_algorithm));
  return us;
}

template <typename T>
void SptrsvPlan<T>::Impl::measure(const DeviceTriangle<T>& a, const SptrsvOptions& options, double analysis_ms,
                                  cudaStream_t stream) {
  // The rule's trial candidates in its order: this plan's own pick without a build, the others each as a
  // plan of the named algorithm. The fastest measured solve of one right-hand side runs one (levr, never
  // timed, competes with its prediction). Several are judged on passes of kRhsPerPass: the winner of one
  // is timed on such a pass (level_block, a block per right-hand side, takes the time of one) and runs
  // them unless this plan's pick for several was timed as level_block and is faster. Predictions do not
  // compete for several here: on these triangles level_block's and levr's ran 1.6-2.7 times behind the
  // measured passes, and the ratio of a pass of 8 to one of the fused kernels varies from 1.5 to 3.3
  // (docs/benchmarks/sptrsv.md).
  using Clock = std::chrono::steady_clock;
  const auto begin = Clock::now();
  const auto elapsed_ms = [&] { return std::chrono::duration<double, std::milli>(Clock::now() - begin).count(); };
  const double budget_ms = kSptrsvTrialBudget * analysis_ms;
  auto predicted = [&](SptrsvAlgorithm alg) {
    for (const SptrsvPrediction& p : choice.predicted)
      if (p.algorithm == alg) return p.us;
    return std::numeric_limits<double>::infinity();
  };
  const bool own_timed =
      std::find(choice.trials.begin(), choice.trials.end(), algorithm) != choice.trials.end();
  double best_one = own_timed ? std::numeric_limits<double>::infinity() : predicted(algorithm);
  double best_several = std::numeric_limits<double>::infinity();
  Impl* winner = nullptr;  // the plan whose measured solve of one is best_one (null: the prediction)
  const index_t n = stats.n;
  const std::size_t columns = several_rhs ? ks::kRhsPerPass : 1;
  Slab zero;
  const auto o_b = zero.add<T>(columns * n), o_x = zero.add<T>(columns * n);
  zero.allocate(stream);
  T* b = zero.at<T>(o_b);
  T* x = zero.at<T>(o_x);
  SPADE_CUDA_CHECK(cudaMemsetAsync(b, 0, sizeof(T) * columns * n, stream));
  TimingEvents events;
  for (SptrsvAlgorithm t : choice.trials) {
    if (elapsed_ms() >= budget_ms) break;
    std::shared_ptr<Impl> candidate;
    Impl* q = this;
    if (t != algorithm) {
      if (t == choice.one) continue;  // cluster's layout did not fit: its fallback runs here
      candidate = std::make_shared<Impl>();
      SptrsvOptions named = options;
      named.algorithm = t;
      named.several_rhs = several_rhs;
      candidate->spin_limit = spin_limit;
      candidate->analyse(a, named, stream);
      q = candidate.get();
      if (q->algorithm != t) continue;  // a fallback: not the candidate
    }
    const double us = q->time_pass(b, x, 0, events, stream);
    ++stats.auto_trials;
    if (q == this && t == SptrsvAlgorithm::level_block && multi_algorithm == t) best_several = us;
    if (us < best_one) {
      best_one = us;
      runs_one = candidate;
      winner = q;
    }
  }
  if (several_rhs && winner != nullptr && winner->multi_algorithm == winner->algorithm) {
    const double several = winner->algorithm == SptrsvAlgorithm::level_block
                               ? best_one
                               : winner->time_pass(b, x, 1, events, stream);
    if (several < best_several) runs_several = winner == this ? nullptr : runs_one;
  }
  stats.auto_trial_ms = elapsed_ms();
  // The trials' solves have finished (their stop events were waited for): the zero buffers and the losers
  // free themselves here.
}

template <typename T>
void SptrsvPlan<T>::Impl::build_level_pack(std::int32_t* work, void* temp, std::size_t temp_bytes,
                                           cudaStream_t stream) {
  // Each level of the level-ordered part in one region of 16-byte chunks: the sizes, their scan (the
  // offsets), then the regions, in an allocation of the total.
  const int nlev = stats.levels;
  Slab index;
  const auto o_desc = index.add<ks::LevelDesc>(nlev), o_offsets = index.add<std::int32_t>(std::size_t(nlev) + 1);
  pack_index = std::move(index);
  pack_index.allocate(stream);
  pack_desc = pack_index.at<ks::LevelDesc>(o_desc);
  pack_offsets = pack_index.at<std::int32_t>(o_offsets);
  ks::level_pack_sizes<T>(nlev, level_ptr, ptr, pack_desc, work, &control->max_level_chunks, stream);
  ks::exclusive_scan(nlev, work, pack_offsets, temp, temp_bytes, stream);
  std::int32_t chunks = 0;
  SPADE_CUDA_CHECK(cudaMemcpyAsync(&chunks, pack_offsets + nlev, sizeof(chunks), cudaMemcpyDeviceToHost, stream));
  const Control c = read_control(stream);
  if (c.max_level_chunks == INT_MAX || chunks < 0)
    throw InvalidInput("sparse triangular solve (level_block): the packed levels are too large (a level of 2 GiB "
                       "or more, or 32 GiB in all); choose another algorithm");
  Slab data;
  const auto o_data = data.add<unsigned char>(std::size_t(chunks) * 16);
  pack_data = std::move(data);
  pack_data.allocate(stream);
  pack_bytes = pack_data.at<unsigned char>(o_data);
  // The padding is copied into shared memory with the data, never read: zero it once.
  SPADE_CUDA_CHECK(cudaMemsetAsync(pack_bytes, 0, std::size_t(chunks) * 16, stream));
  ks::level_pack_fill(lower(), nlev, pack_offsets, pack_desc, pack_bytes, stream);
  pack = {stats.n, nlev, pack_desc, pack_bytes, stats.max_rows_per_level, c.max_level_chunks * 16,
          stats.nnz_per_row};
}

template <typename T>
void SptrsvPlan<T>::Impl::build_levr_pieces(void* temp, std::size_t temp_bytes, cudaStream_t stream) {
  // levr's pieces (some row has more than kLevrPiece entries): at most n + m / kLevrPiece of them, and
  // m / kLevrPiece slots of split rows (each split row has at least one piece beyond its first).
  const index_t n = stats.n;
  const std::size_t n1 = std::size_t(n) + 1, slots = std::size_t(m) / ks::kLevrPiece + 1;
  Slab layout;
  const auto o_count = layout.add<std::int32_t>(n1), o_piece_ptr = layout.add<std::int32_t>(n1),
             o_level = layout.add<std::int32_t>(n1), o_piece = layout.add<ks::LevrPiece>(std::size_t(n) + slots),
             o_partial = layout.add<T>(slots * ks::kRhsPerPass), o_arrived = layout.add<int>(slots);
  levr_data = std::move(layout);
  levr_data.allocate(stream);
  T* partial = levr_data.at<T>(o_partial);
  int* arrived = levr_data.at<int>(o_arrived);
  SPADE_CUDA_CHECK(cudaMemsetAsync(partial, 0, sizeof(T) * slots * ks::kRhsPerPass, stream));
  SPADE_CUDA_CHECK(cudaMemsetAsync(arrived, 0, sizeof(int) * slots, stream));
  ks::LevrPiece* piece = levr_data.at<ks::LevrPiece>(o_piece);
  level_piece_ptr = levr_data.at<std::int32_t>(o_level);
  ks::levr_pieces(n, ptr, perm != nullptr ? nullptr : jlev, level_ptr, &control->max_level,
                  levr_data.at<std::int32_t>(o_count), levr_data.at<std::int32_t>(o_piece_ptr), piece, level_piece_ptr,
                  temp, temp_bytes, stream);
  levr_items = {nullptr, piece, partial, arrived};
}

template <typename T>
bool SptrsvPlan<T>::Impl::build_cluster(int nlev, double entries_per_row, int* row_level, std::int32_t* counts,
                                        std::int32_t* cursor, cudaStream_t stream) {
  // The shares of every level in every block and their entries, the most levels a row reads back, the
  // ring that distance + 1 levels need; then, where the layout fits, the push codes (a histogram of the
  // columns, its scan, a scatter). counts: n + 1 ints, cursor: n.
  const index_t n = stats.n;
  if (cuda_device_major() < 9 || n == 0 || nlev == 0) return false;
  const std::size_t shares = std::size_t(nlev) * ks::kClusterBlocks;
  if (shares >= std::size_t(INT_MAX)) return false;
  Slab layout;
  const std::size_t temp_bytes = std::max(ks::scan_temp_bytes(index_t(shares)), ks::scan_temp_bytes(n));
  const auto o_temp = layout.add<char>(temp_bytes), o_rows = layout.add<int2>(shares),
             o_count = layout.add<std::int32_t>(shares + 1),
             o_segment = layout.add<std::int32_t>(shares + 1), o_row_slot = layout.add<std::int32_t>(n),
             o_push_ptr = layout.add<std::int32_t>(std::size_t(n) + 1),
             o_push = layout.add<std::uint32_t>(std::size_t(m));
  cluster_data = std::move(layout);
  cluster_data.allocate(stream);
  void* temp = cluster_data.at<char>(o_temp);
  std::int32_t* share_count = cluster_data.at<std::int32_t>(o_count);
  std::int32_t* segment = cluster_data.at<std::int32_t>(o_segment);
  SPADE_CUDA_CHECK(cudaMemsetAsync(control->cluster, 0, sizeof(control->cluster), stream));
  int2* share_rows = cluster_data.at<int2>(o_rows);
  ks::cluster_shares(n, nlev, level_ptr, ptr, ind, row_level, share_rows, share_count, control->cluster, stream);
  ks::exclusive_scan(index_t(shares), share_count, segment, temp, temp_bytes, stream);
  ks::cluster_window(nlev, segment, control->cluster, stream);
  const Control c = read_control(stream);
  const int distance = c.cluster[ks::kClusterDistance], window = c.cluster[ks::kClusterWindow];
  int ring_log2 = 0;
  while ((1 << ring_log2) < window && ring_log2 <= ks::kClusterMaxRingLog2) ++ring_log2;
  cluster = {distance, ring_log2, c.cluster[ks::kClusterRows], nlev, level_ptr, segment, share_rows, nullptr,
             nullptr, nullptr};
  if (distance > ks::kClusterMaxDistance || ring_log2 > ks::kClusterMaxRingLog2 ||
      !ks::cluster_fits<T>(cluster, entries_per_row)) {
    cluster_data = Slab();
    cluster = {};
    return false;
  }
  std::int32_t* push_ptr = cluster_data.at<std::int32_t>(o_push_ptr);
  SPADE_CUDA_CHECK(cudaMemsetAsync(counts, 0, sizeof(std::int32_t) * n, stream));
  ks::histogram(m, ind, counts, stream);
  ks::exclusive_scan(n, counts, push_ptr, temp, temp_bytes, stream);
  SPADE_CUDA_CHECK(cudaMemsetAsync(cursor, 0, sizeof(std::int32_t) * n, stream));
  std::int32_t* row_slot = cluster_data.at<std::int32_t>(o_row_slot);
  std::uint32_t* push = cluster_data.at<std::uint32_t>(o_push);
  cluster.row_slot = row_slot;
  cluster.push_ptr = push_ptr;
  cluster.push = push;
  ks::cluster_pushes(n, cluster, row_level, ptr, ind, cursor, row_slot, push, stream);
  return true;
}

template <typename T>
void SptrsvPlan<T>::Impl::reset_scratch(cudaStream_t stream) {
  const index_t n = std::max(stats.n, 1);
  Control init = fresh_control(spin_limit);
  SPADE_CUDA_CHECK(cudaMemcpyAsync(control, &init, sizeof(Control), cudaMemcpyHostToDevice, stream));
  if (flag != nullptr) SPADE_CUDA_CHECK(cudaMemsetAsync(flag, 0, sizeof(int) * n, stream));
  for (int w = 0; w < 2; ++w) {
    const std::size_t width = w == 0 ? 1 : ks::kRhsPerPass;
    if (left_sum[w] != nullptr) SPADE_CUDA_CHECK(cudaMemsetAsync(left_sum[w], 0, sizeof(T) * n * width, stream));
    for (int p = 0; p < 2; ++p)
      if (y[w][p] != nullptr) ks::fill_sentinel<T>(std::int64_t(n) * width, y[w][p], stream);
  }
  epoch = 0;
}

template <typename T>
void SptrsvPlan<T>::Impl::allocate_multi_rhs(cudaStream_t stream) {
  const bool columns = left_sum[0] != nullptr, second = chunked_solve(multi_algorithm);
  const bool first =
      second || multi_algorithm == SptrsvAlgorithm::level_block || multi_algorithm == SptrsvAlgorithm::levr;
  if (!columns && !first) return;
  const std::size_t count = std::size_t(std::max(stats.n, 1)) * ks::kRhsPerPass;
  Slab layout;
  const std::size_t o_left = layout.add<T>(columns ? count : 0);
  const std::size_t o_y0 = layout.add<T>(first ? count : 0), o_y1 = layout.add<T>(second ? count : 0);
  scratch8 = std::move(layout);
  scratch8.allocate(stream);
  if (columns) {
    left_sum[1] = scratch8.at<T>(o_left);
    SPADE_CUDA_CHECK(cudaMemsetAsync(left_sum[1], 0, sizeof(T) * count, stream));
  }
  if (second) {  // fused: both start as sentinels
    y[1][0] = scratch8.at<T>(o_y0);
    y[1][1] = scratch8.at<T>(o_y1);
    ks::fill_sentinel<T>(count, y[1][0], stream);
    ks::fill_sentinel<T>(count, y[1][1], stream);
  } else if (first) {
    y[1][0] = scratch8.at<T>(o_y0);
  }
}

template <typename T>
SptrsvPlan<T>::SptrsvPlan(const DeviceTriangle<T>& a, const SptrsvOptions& options, cudaStream_t stream)
    : impl_(std::make_unique<Impl>()) {
  try {
    const auto begin = std::chrono::steady_clock::now();
    impl_->analyse(a, options, stream);
    if (options.algorithm == SptrsvAlgorithm::automatic && !impl_->choice.trials.empty() && impl_->stats.n > 0)
      impl_->measure(a, options,
                     std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - begin).count(),
                     stream);
  } catch (...) {
    // The slabs free themselves without waiting: let the analysis' work on `stream` finish first.
    cudaStreamSynchronize(stream);
    throw;
  }
}

template <typename T>
SptrsvPlan<T>::~SptrsvPlan() = default;
template <typename T>
SptrsvPlan<T>::SptrsvPlan(SptrsvPlan&&) noexcept = default;
template <typename T>
SptrsvPlan<T>& SptrsvPlan<T>::operator=(SptrsvPlan&&) noexcept = default;

template <typename T>
index_t SptrsvPlan<T>::n() const {
  return impl_->stats.n;
}
template <typename T>
SptrsvAlgorithm SptrsvPlan<T>::algorithm(int nrhs) const {
  const Impl& p = *impl_;
  if (nrhs > 1) return p.runs_several ? p.runs_several->multi_algorithm : p.multi_algorithm;
  return p.runs_one ? p.runs_one->algorithm : p.algorithm;
}
template <typename T>
const SptrsvStats& SptrsvPlan<T>::stats() const {
  return impl_->stats;
}

template <typename T>
void SptrsvPlan<T>::Impl::solve_pass(const ks::RhsPass<T>& rhs, int w, cudaStream_t stream) {
  // One pass of this plan's algorithm for w = 0 (one right-hand side) or its multi_algorithm (w = 1).
  const index_t n = stats.n;
  const int nlev = stats.levels;
  const ks::LowerPart<T> L = lower();
  const SptrsvAlgorithm pass_algorithm = w == 1 ? multi_algorithm : algorithm;
  switch (pass_algorithm) {
    case SptrsvAlgorithm::levr:
      levr_graph[w].solve(L, levr_items,
                            (levr_items.piece != nullptr ? level_piece_ptr_host : level_ptr_host).data(),
                            nlev, rhs, y[1][0], stream);
      break;
    case SptrsvAlgorithm::levc: ks::solve_levc(L, jlev, level_ptr_host.data(), nlev, rhs, stream); break;
    case SptrsvAlgorithm::slfr:
    case SptrsvAlgorithm::slfc:
    case SptrsvAlgorithm::syncfree: {
      // flag == epoch (SLFR) or counter == epoch * degree: restart from zero before an int overflows.
      if (epoch >= INT_MAX / max_degree - 1) {
        SPADE_CUDA_CHECK(cudaMemsetAsync(flag, 0, sizeof(int) * n, stream));
        epoch = 0;
      }
      ++epoch;
      if (pass_algorithm == SptrsvAlgorithm::slfr)
        ks::solve_slfr(L, jlev, flag, epoch, rhs, schedule(), stream);
      else
        ks::solve_columns(L, pass_algorithm == SptrsvAlgorithm::slfc ? jlev : nullptr, global_deg, local_deg,
                          flag, epoch, left_sum[w], rhs, schedule(), stream);
      break;
    }
    case SptrsvAlgorithm::thread:
    case SptrsvAlgorithm::fused:
    case SptrsvAlgorithm::fused_level: {
      const int cur = parity[w];
      ks::solve_fused(L, items, nitems, y[w][cur], y[w][1 - cur], rhs, schedule(), stream);
      parity[w] = 1 - cur;
      break;
    }
    case SptrsvAlgorithm::level_block:
      ks::solve_level_block(pack, L, level_ptr, y[w][0], rhs, stream);
      break;
    case SptrsvAlgorithm::cluster:
      ks::solve_cluster(L, cluster, stats.nnz_per_row, rhs, &control->status, stream);
      break;
    case SptrsvAlgorithm::automatic: break;
  }
}

template <typename T>
void SptrsvPlan<T>::solve(const T* b, index_t ldb, T* x, index_t ldx, int nrhs, cudaStream_t stream) {
  Impl& p = *impl_;
  const index_t n = p.stats.n;
  if (nrhs < 1) throw InvalidInput("sparse triangular solve: nrhs = " + std::to_string(nrhs) + " (must be >= 1)");
  if (ldb < std::max(n, 1) || ldx < std::max(n, 1))
    throw InvalidInput("sparse triangular solve: ldb = " + std::to_string(ldb) + ", ldx = " + std::to_string(ldx) +
                       " (both must be >= n = " + std::to_string(n) + ")");
  if (n == 0) return;
  if (b == nullptr || x == nullptr) throw InvalidInput("sparse triangular solve: b or x is null");
  if (nrhs > 1 && !p.several_rhs)
    throw InvalidInput("sparse triangular solve: nrhs = " + std::to_string(nrhs) +
                       " on a plan built with SptrsvOptions::several_rhs = false");
  Impl* used[2] = {nullptr, nullptr};
  for (int first = 0; first < nrhs; first += ks::kRhsPerPass) {
    const int nr = nrhs == 1 ? 1 : std::min(ks::kRhsPerPass, nrhs - first);
    const int w = nr == 1 ? 0 : 1;
    const ks::RhsPass<T> rhs{b + std::int64_t(first) * ldb, ldb, x + std::int64_t(first) * ldx, ldx, nr};
    Impl& q = w == 0 ? (p.runs_one ? *p.runs_one : p) : (p.runs_several ? *p.runs_several : p);
    q.solve_pass(rhs, w, stream);
    used[w] = &q;
  }
  // The destructor waits for this event: outside a capture only (a captured solve runs when the caller
  // launches the graph, which must not outlive the plan).
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  SPADE_CUDA_CHECK(cudaStreamIsCapturing(stream, &capturing));
  if (capturing == cudaStreamCaptureStatusNone) {
    SPADE_CUDA_CHECK(cudaEventRecord(p.last_solve, stream));
    for (Impl* q : used)
      if (q != nullptr && q != &p) SPADE_CUDA_CHECK(cudaEventRecord(q->last_solve, stream));
  }
}

SptrsvDeviceModel SptrsvDeviceModel::current() {
  SptrsvDeviceModel d;
  d.sm_count = cuda_device_attribute(cudaDevAttrMultiProcessorCount);
  d.compute_major = cuda_device_major();
  return d;
}

template <typename T>
void SptrsvPlan<T>::check(cudaStream_t stream) {
  // Every plan that runs passes (auto's own and the winners of its trials) reports through its own words.
  Impl& own = *impl_;
  for (Impl* q : {own.runs_one.get(), own.runs_several.get()})
    if (q != nullptr) q->check_status(stream);
  own.check_status(stream);
}

template <typename T>
void SptrsvPlan<T>::Impl::check_status(cudaStream_t stream) {
  Impl& p = *this;
  const Control c = p.read_control(stream);
  if (c.status.code == kernels::kStatusOk) return;
  p.reset_scratch(stream);
  SPADE_CUDA_CHECK(cudaStreamSynchronize(stream));
  index_t internal = c.status.index;
  if (p.perm != nullptr)
    SPADE_CUDA_CHECK(cudaMemcpy(&internal, p.perm + internal, sizeof(internal), cudaMemcpyDeviceToHost));
  const index_t unknown = p.reversed ? p.stats.n - 1 - internal : internal;
  throw NumericalError(NumericalError::Kind::no_progress, unknown,
                       std::string("sparse triangular solve (") + to_string(p.algorithm) +
                           "): a spin-wait gave up at unknown " + std::to_string(unknown));
}

template <typename T>
void SptrsvPlan<T>::set_spin_limit(long long polls) {
  if (polls < 0)
    throw InvalidInput("SptrsvPlan::set_spin_limit: polls = " + std::to_string(polls) + " (must be >= 0)");
  Impl& own = *impl_;
  for (Impl* p : {&own, own.runs_one.get(), own.runs_several.get()}) {
    if (p == nullptr) continue;
    p->spin_limit = polls;
    SPADE_CUDA_CHECK(cudaMemcpy(&p->control->status.spin_limit, &polls, sizeof(polls), cudaMemcpyHostToDevice));
  }
}

template <typename T>
int* SptrsvPlan<T>::device_tickets_for_testing() const {
  return (impl_->runs_one ? *impl_->runs_one : *impl_).control->tickets;
}

template <typename T>
void SptrsvPlan<T>::update_values(const T* values, cudaStream_t stream) {
  Impl& own = *impl_;
  if (own.input_nnz > 0 && values == nullptr) throw InvalidInput("sparse triangular solve: values is null");
  Impl* others[2] = {own.runs_one.get(), own.runs_several == own.runs_one ? nullptr : own.runs_several.get()};
  for (Impl* q : others)
    if (q != nullptr) q->update(values, stream);
  own.update(values, stream);
}

template <typename T>
void SptrsvPlan<T>::Impl::update(const T* values, cudaStream_t stream) {
  Impl& p = *this;
  const int no_zero = INT_MAX;
  SPADE_CUDA_CHECK(cudaMemcpyAsync(&p.control->zero_row, &no_zero, sizeof(int), cudaMemcpyHostToDevice, stream));
  ks::gather_values(p.stats.n, p.m, values, p.src, p.diag_src, p.unit, p.reversed, p.perm, p.val, p.diag,
                    &p.control->zero_row, stream);
  if (p.pack_desc != nullptr)
    ks::level_pack_fill(p.lower(), p.stats.levels, p.pack_offsets, p.pack_desc, p.pack_bytes, stream);
  p.throw_if_singular(p.read_control(stream).zero_row);
}

template class SptrsvPlan<double>;
template class SptrsvPlan<float>;

}  // namespace spade
