// The sparse triangular-solve plan: the analysis every algorithm shares (validation, the internal lower
// form, statistics, level sets, the level-ordered part), one state per algorithm family built on it (levr's
// pieces, in-degrees, row chunks, packed levels, cluster's layout, each with its own device memory), the
// choice of `auto` and its trials on the first solves, and the one dispatch of a solve's passes to their
// states' kernels (kernels/sptrsv_*.cu). Contract in include/spade/sptrsv.hpp.
#include "spade/sptrsv.hpp"

#include <algorithm>
#include <climits>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
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

/// The two events around one timed pass of auto's trials (SptrsvPlan::Impl::Trials), recorded on the
/// solve's stream and read back without waiting once the pass has finished.
class TrialEvents {
 public:
  TrialEvents() {
    SPADE_CUDA_CHECK(cudaEventCreate(&start_));
    if (const cudaError_t status = cudaEventCreate(&stop_); status != cudaSuccess) {
      cudaEventDestroy(start_);
      SPADE_CUDA_CHECK(status);
    }
  }
  ~TrialEvents() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  TrialEvents(const TrialEvents&) = delete;
  TrialEvents& operator=(const TrialEvents&) = delete;

  /// Records the events around `work` (which enqueues on `stream`).
  template <typename Work>
  void record(cudaStream_t stream, Work&& work) {
    SPADE_CUDA_CHECK(cudaEventRecord(start_, stream));
    work();
    SPADE_CUDA_CHECK(cudaEventRecord(stop_, stream));
  }
  /// Whether the timed work has finished; never waits.
  bool finished() const {
    const cudaError_t status = cudaEventQuery(stop_);
    if (status == cudaErrorNotReady) {
      (void)cudaGetLastError();  // not an error: leave no trace of it for the next launch's check
      return false;
    }
    SPADE_CUDA_CHECK(status);
    return true;
  }
  /// The time between the events (the work must have finished), in microseconds.
  double microseconds() const {
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
/// legacy default stream (or on a given stream, release), cudaMalloc's through cudaFree (which itself
/// waits for the device).
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
  ~Slab() { release(nullptr); }
  /// Frees now, stream-ordered on `stream` (after the work enqueued there before) where pooled.
  void release(cudaStream_t stream) {
    if (base_ == nullptr) return;
    if (pooled_)
      cudaFreeAsync(base_, stream);
    else
      cudaFree(base_);
    base_ = nullptr;
  }

 private:
  void* base_ = nullptr;
  std::size_t bytes_ = 0;
  bool pooled_ = false;
};

/// Synchronizes `stream` where the scope it guards is left by an exception: the slabs destroyed in the
/// unwinding free themselves without waiting (Slab), and work of the analysis on `stream` may still read
/// them. Declared after the slabs it protects (or first in a constructor, before whose members it goes).
class SyncOnThrow {
 public:
  explicit SyncOnThrow(cudaStream_t stream) : stream_(stream), exceptions_(std::uncaught_exceptions()) {}
  ~SyncOnThrow() {
    if (std::uncaught_exceptions() > exceptions_) cudaStreamSynchronize(stream_);
  }
  SyncOnThrow(const SyncOnThrow&) = delete;
  SyncOnThrow& operator=(const SyncOnThrow&) = delete;

 private:
  cudaStream_t stream_;
  int exceptions_;
};

/// The most states an auto plan builds: its picks for one and for several right-hand sides, the trial
/// candidates and fused (SptrsvAutoChoice); each that loses auto's trials leaves its solves' status in a
/// slot of its own (Control::retired).
constexpr int kMaxStates = 2 + kSptrsvMaxTrials + 1;

/// Device-side words the analysis reports through, read back in one copy; tickets and status are those of
/// the level analysis' kernels (each algorithm's solves have their own, SolveWords).
struct Control {
  unsigned long long bad;
  unsigned long long level_longest_rows;  // level_block's build: the sum over levels of each one's longest row
  int zero_row;
  int m;
  int max_level;
  int max_count;
  int max_level_chunks;  // level_block's build: the largest packed level, in 16-byte chunks
  int cluster[3];        // cluster's build: ks::ClusterMeasure
  int nitems;            // the chunked kernels' build: work items
  int tickets[2];
  kernels::DeviceStatus status;
  kernels::DeviceStatus retired[kMaxStates];  // the solves' status of the states that lost auto's trials
};

/// The device words of one algorithm's solves: its work tickets and the first failure of a spin-wait.
struct SolveWords {
  int tickets[2];
  kernels::DeviceStatus status;
};

/// The control words as the analysis starts with them, with the plan's spin limit (0: kernels::kSpinLimit).
Control fresh_control(long long spin_limit) {
  Control c{};
  c.bad = ~0ull;
  c.zero_row = INT_MAX;
  c.status.spin_limit = spin_limit;
  return c;
}

SolveWords fresh_words(long long spin_limit) {
  SolveWords w{};
  w.status.spin_limit = spin_limit;
  return w;
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
/// Runs on the rows renumbered in level order (Analysis::level_ordered).
bool runs_in_level_order(SptrsvAlgorithm a) {
  return a == SptrsvAlgorithm::fused_level || a == SptrsvAlgorithm::level_block || a == SptrsvAlgorithm::cluster;
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

// ---- the analysis every algorithm shares ----

/// The internal lower triangle (kernels/sptrsv_kernels.hpp) in one numbering, device memory: the strictly
/// lower part, the diagonal, and where each value sits in the caller's values (update_values gathers
/// through them).
template <typename T>
struct Part {
  std::int32_t* ptr = nullptr;         ///< n + 1 row (CSR) or column (CSC) pointers
  index_t* ind = nullptr;              ///< m column (CSR) or row (CSC) indices
  T* val = nullptr;                    ///< m values
  std::int32_t* src = nullptr;         ///< m: the caller's position of each value
  T* diag = nullptr;                   ///< n diagonal values (1 for a unit diagonal)
  std::int32_t* diag_src = nullptr;    ///< n: the caller's position of each diagonal entry, -1 where none
  const std::int32_t* perm = nullptr;  ///< level order: row i is internal row perm[i]; null in index order
};

/// What the analysis computes once for every algorithm: the validated triangle in the internal lower form
/// (in index order, CSR or CSC as the algorithm runs on it; always CSR for auto), its statistics and, where
/// an algorithm needs them (auto always), its level sets. The rows renumbered in level order are built on
/// first use and shared by every algorithm that runs on them. The work arrays and temporary storage stay
/// allocated for the builds of the algorithms' states, which run after the analysis on the same stream.
template <typename T>
struct Analysis {
  SptrsvStats stats;
  bool reversed = false, unit = false;
  std::int32_t input_nnz = 0, m = 0;  // entries given, off-diagonal entries kept
  long long spin_limit = 0;           // set_spin_limit; every reset of solve words takes it
  Control* control = nullptr;
  Part<T> index;  // the internal lower part in index order
  // The level sets (where computed: level_ptr_host then holds stats.levels + 1 entries).
  std::int32_t* jlev = nullptr;       // device, n: the rows by level, index order inside a level
  std::int32_t* level_ptr = nullptr;  // device, levels + 1: each level's first position in jlev
  std::vector<std::int32_t> level_ptr_host;
  // Free after the analysis, for the states' builds.
  void* temp = nullptr;
  std::size_t temp_bytes = 0;
  std::int32_t* work = nullptr;   // n + 1
  std::int32_t* work2 = nullptr;  // n
  int* level = nullptr;           // n, where the level sets were computed

  void analyse(const DeviceTriangle<T>& a, const SptrsvOptions& options, cudaStream_t stream);
  /// The part renumbered in level order (P L P^T with row r = row jlev[r], lower triangular again): built
  /// at the first call (from `index`, which must be CSR, and the level sets), in an allocation of its own.
  const Part<T>& level_ordered(cudaStream_t stream);
  bool has_level_order() const { return level_order_.has_value(); }
  /// Frees the level-ordered part stream-ordered on `stream`: no work enqueued later may read it.
  void release_level_order(cudaStream_t stream) {
    level_order_.reset();
    level_order_memory_.release(stream);
  }
  ks::LowerPart<T> lower(const Part<T>& p) const { return {stats.n, p.ptr, p.ind, p.val, p.diag, reversed, p.perm}; }
  ks::Schedule schedule() const { return {control->tickets, &control->status}; }
  /// New values for `p` from the caller's `values`; a zero on a non-unit diagonal goes to control->zero_row.
  void gather(const T* values, const Part<T>& p, cudaStream_t stream) {
    ks::gather_values(stats.n, m, values, p.src, p.diag_src, unit, reversed, p.perm, p.val, p.diag,
                      &control->zero_row, stream);
  }

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

 private:
  Slab memory_;              // the control words, level sets, work arrays and the part(s) in index order
  Slab level_order_memory_;  // the level-ordered part
  std::optional<Part<T>> level_order_;
};

template <typename T>
void Analysis<T>::analyse(const DeviceTriangle<T>& a, const SptrsvOptions& options, cudaStream_t stream) {
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
  const SptrsvAlgorithm algorithm = options.algorithm;
  const bool automatic = algorithm == SptrsvAlgorithm::automatic;

  // The analysis' arrays in one allocation. auto's candidates run on CSR.
  const bool want_csr = automatic || needs_csr(algorithm);
  const bool transposed = want_csr != csr;
  const bool levels_needed = needs_levels(algorithm);
  const bool leveled = automatic || levels_needed;
  const index_t nchunks = (n + ks::kWarpSize - 1) / ks::kWarpSize;  // the chunked kernels' work items
  const std::size_t nnz = std::size_t(input_nnz), n1 = std::size_t(n) + 1;
  temp_bytes = std::max(ks::scan_temp_bytes(n), ks::scan_temp_bytes(nchunks));
  if (transposed) temp_bytes = std::max(temp_bytes, ks::sort_temp_bytes(input_nnz, ks::key_bits(n)));
  if (leveled) temp_bytes = std::max(temp_bytes, ks::sort_temp_bytes(n, ks::key_bits(n)));

  Slab layout;
  // The level pointers right behind the control words: read_control brings both back in one copy.
  const auto o_control = layout.add<Control>(1), o_level_ptr = layout.add<std::int32_t>(leveled ? n1 : 0);
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
  memory_ = std::move(layout);
  memory_.allocate(stream);
  control = memory_.at<Control>(o_control);
  temp = memory_.at<char>(o_temp);
  std::int32_t* count = memory_.at<std::int32_t>(o_count);
  index.diag = memory_.at<T>(o_diag);
  index.diag_src = memory_.at<std::int32_t>(o_diag_src);
  std::int32_t* a_ptr = memory_.at<std::int32_t>(o_ptr);
  index_t* a_ind = memory_.at<index_t>(o_ind);
  T* a_val = memory_.at<T>(o_val);
  std::int32_t* a_src = memory_.at<std::int32_t>(o_src);
  if (leveled) level = memory_.at<int>(o_level);
  work = memory_.at<int>(o_work);
  work2 = memory_.at<int>(o_work2);

  // Validation, the diagonal, the internal lower form in the input's orientation.
  Control init = fresh_control(spin_limit);
  SPADE_CUDA_CHECK(cudaMemcpyAsync(control, &init, sizeof(Control), cudaMemcpyHostToDevice, stream));
  const ks::InputTriangle<T> in{n, input_nnz, a.ptr, a.ind, a.values, csr, !reversed, unit};
  // The level array is cleared by the inspection, and the most entries in a row taken there for CSR.
  ks::inspect_triangle(in, count, index.diag, index.diag_src, &control->bad, &control->zero_row,
                       csr ? &control->max_count : nullptr, level, stream);
  ks::exclusive_scan(n, count, a_ptr, temp, temp_bytes, stream);
  ks::scatter_same_orientation(in, a_ptr, index.diag_src, a_ind, a_val, a_src, &control->m, stream);
  // In-degrees (off-diagonal entries per row): the counts of a CSR input, a histogram of a CSC one (over
  // the m entries kept, m read on the device).
  std::int32_t* indeg = count;
  if (!csr) {
    SPADE_CUDA_CHECK(cudaMemsetAsync(work, 0, sizeof(int) * n, stream));
    ks::histogram(input_nnz, a_ind, work, stream, &control->m);
    indeg = work;
    ks::count_max(n, indeg, &control->max_count, stream);
  }

  auto check_input = [&](const Control& got) {
    if (got.bad != ~0ull) {
      const long long segment = static_cast<long long>(got.bad >> 8);
      throw InvalidInput(std::string("sparse triangular solve: ") + (csr ? "row " : "column ") +
                         std::to_string(segment) + " of the " + (reversed ? "upper" : "lower") + " triangle has " +
                         inspect_message(static_cast<int>(got.bad & 0xff)));
    }
    throw_if_singular(got.zero_row);
  };
  if (transposed || (levels_needed && !csr)) {
    // The transposition needs m; the CSC level kernel waits on in-degree counters: run it on validated
    // input only. The CSR level kernel does nothing where the input was found bad, so it does not wait
    // here: the input is checked when the level count comes back.
    const Control c = read_control(stream);
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

  // The form the algorithms run on.
  if (transposed) {
    index.ptr = memory_.at<std::int32_t>(o_tptr);
    index.ind = memory_.at<index_t>(o_tind);
    index.val = memory_.at<T>(o_tval);
    index.src = memory_.at<std::int32_t>(o_tsrc);
    const ks::TransposeWork tw{memory_.at<std::int32_t>(o_tcount), memory_.at<index_t>(o_outer),
                               memory_.at<std::int32_t>(o_order_in), memory_.at<std::int32_t>(o_order_out),
                               memory_.at<index_t>(o_keys_out), temp, temp_bytes};
    ks::transpose_lower(n, m, a_ptr, a_ind, a_val, a_src, index.ptr, index.ind, index.val, index.src, tw, stream);
  } else {
    index.ptr = a_ptr;
    index.ind = a_ind;
    index.val = a_val;
    index.src = a_src;
  }
  int nlev = -1;  // the level count, once read back
  if (leveled) {
    if (automatic)
      ks::levels_csr(n, index.ptr, index.ind, level, &control->max_level, &control->bad, schedule(), stream);
    // The level count, and the input check where it did not come first.
    const Control c = read_control(stream);
    check_input(c);
    m = c.m;
    nlev = c.max_level;
    jlev = memory_.at<std::int32_t>(o_jlev);
    level_ptr = memory_.at<std::int32_t>(o_level_ptr);
    ks::level_sets(n, &control->max_level, nlev, level, jlev, level_ptr, memory_.at<std::int32_t>(o_lev_order),
                   memory_.at<int>(o_lev_keys), temp, temp_bytes, stream);
  }
  // The results, with the level pointers.
  const Control c = read_control(stream, nlev);
  check_input(c);
  if (c.status.code != kernels::kStatusOk)
    throw NumericalError(NumericalError::Kind::no_progress, c.status.index,
                         "sparse triangular solve: the level analysis stopped waiting at unknown " +
                             std::to_string(c.status.index));
  m = c.m;
  stats.off_diagonal_nnz = m;
  stats.nnz_per_row = n > 0 ? double(m) / n : 0;
  stats.max_nnz_per_row = c.max_count;
  if (leveled) {
    stats.levels = c.max_level;
    stats.rows_per_level = c.max_level > 0 ? double(n) / c.max_level : 0;
    for (int l = 0; l < stats.levels; ++l)
      stats.max_rows_per_level = std::max(stats.max_rows_per_level, level_ptr_host[l + 1] - level_ptr_host[l]);
  }
}

template <typename T>
const Part<T>& Analysis<T>::level_ordered(cudaStream_t stream) {
  // The chunks and the tickets of the fused kernel then follow the levels instead of the index order, and
  // a level of level_block or cluster is a contiguous range of rows and of entries. The row counts and the
  // inverse numbering go in the work arrays.
  if (level_order_) return *level_order_;
  const index_t n = stats.n;
  const std::size_t n1 = std::size_t(n) + 1, pnnz = std::size_t(m);
  Slab copy;
  const auto o_pptr = copy.add<std::int32_t>(n1), o_pdiag = copy.add<T>(n), o_pdiag_src = copy.add<std::int32_t>(n),
             o_pind = copy.add<index_t>(pnnz), o_pval = copy.add<T>(pnnz), o_psrc = copy.add<std::int32_t>(pnnz);
  level_order_memory_ = std::move(copy);
  level_order_memory_.allocate(stream);
  Part<T> p;
  p.ptr = level_order_memory_.at<std::int32_t>(o_pptr);
  p.ind = level_order_memory_.at<index_t>(o_pind);
  p.val = level_order_memory_.at<T>(o_pval);
  p.src = level_order_memory_.at<std::int32_t>(o_psrc);
  p.diag = level_order_memory_.at<T>(o_pdiag);
  p.diag_src = level_order_memory_.at<std::int32_t>(o_pdiag_src);
  p.perm = jlev;
  std::int32_t* pcount = work;
  std::int32_t* inv = work2;
  ks::perm_count(n, index.ptr, jlev, index.diag, index.diag_src, inv, pcount, p.diag, p.diag_src, stream);
  ks::exclusive_scan(n, pcount, p.ptr, temp, temp_bytes, stream);
  ks::perm_fill(n, index.ptr, index.ind, index.val, index.src, jlev, inv, p.ptr, p.ind, p.val, p.src, stream);
  level_order_ = p;
  return *level_order_;
}

// ---- one state per algorithm family, each built on the analysis ----

/// What every algorithm's state holds: the part it solves (`L`, in level order where L.perm is set) and its
/// device memory, which starts with the words of its solves (check() reads them).
template <typename T>
struct StateBase {
  ks::LowerPart<T> L{};
  SolveWords* words = nullptr;
  Slab memory;

  ks::Schedule schedule() const { return {words->tickets, &words->status}; }
  /// Allocates `layout` (the words at o_words) as this state's memory and writes fresh words.
  void take(Slab&& layout, std::size_t o_words, long long spin_limit, cudaStream_t stream) {
    memory = std::move(layout);
    memory.allocate(stream);
    words = memory.at<SolveWords>(o_words);
    reset(spin_limit, stream);
  }
  /// check(), after a spin-wait gave up: fresh words (the states with scratch restore it too).
  void reset(long long spin_limit, cudaStream_t stream) {
    const SolveWords init = fresh_words(spin_limit);
    SPADE_CUDA_CHECK(cudaMemcpyAsync(words, &init, sizeof(init), cudaMemcpyHostToDevice, stream));
  }
  /// update_values(), after the values of L changed (level_block packs them again).
  void refresh(cudaStream_t) {}
  /// Frees the state's memory stream-ordered on `stream` (auto's trials, for a loser).
  void release(cudaStream_t stream) { memory.release(stream); }
};

/// levr (Li 2017): a launch per level on CSR, recorded as CUDA graphs (one per pass width) at the first
/// solve and replayed; rows of more than kLevrPiece entries split into pieces.
template <typename T>
struct Levr : StateBase<T> {
  ks::LevrItems<T> items{};
  int nlev = 0;
  const std::int32_t* level_ptr_host = nullptr;  // the levels' first rows (or pieces) among items
  std::vector<std::int32_t> piece_ptr_host;      // each level's first piece, where rows are split
  T* y = nullptr;                                // passes of several: n * kRhsPerPass (null without)
  ks::LevrGraph<T> graph[2];                     // one right-hand side, passes of several

  /// part: the analysis' part in index order, or in level order (auto, where its other pick runs there).
  Levr(Analysis<T>& a, const Part<T>& part, bool several, cudaStream_t stream) {
    const SyncOnThrow guard(stream);
    const index_t n = a.stats.n;
    this->L = a.lower(part);
    nlev = a.stats.levels;
    // The pieces (some row has more than kLevrPiece entries): at most n + m / kLevrPiece of them, and
    // m / kLevrPiece slots of split rows (each split row has at least one piece beyond its first).
    const bool split = a.stats.max_nnz_per_row > ks::kLevrPiece;
    const std::size_t n1 = std::size_t(n) + 1, slots = split ? std::size_t(a.m) / ks::kLevrPiece + 1 : 0;
    Slab layout;
    const auto o_words = layout.add<SolveWords>(1), o_passes = layout.add<ks::RhsPass<T>>(2),
               o_y = layout.add<T>(several ? std::size_t(std::max(n, 1)) * ks::kRhsPerPass : 0);
    const auto o_count = layout.add<std::int32_t>(split ? n1 : 0),
               o_piece_ptr = layout.add<std::int32_t>(split ? n1 : 0),
               o_level = layout.add<std::int32_t>(split ? n1 : 0),
               o_piece = layout.add<ks::LevrPiece>(split ? std::size_t(n) + slots : 0),
               o_partial = layout.add<T>(slots * ks::kRhsPerPass), o_arrived = layout.add<int>(slots);
    this->take(std::move(layout), o_words, a.spin_limit, stream);
    const Slab& mem = this->memory;
    // Where the second graphs read their pass.
    for (int w = 0; w < 2; ++w) graph[w].set_pass_storage(mem.at<ks::RhsPass<T>>(o_passes) + w);
    if (several) y = mem.at<T>(o_y);
    // In level order a level's positions are its rows themselves.
    const std::int32_t* jlev = part.perm != nullptr ? nullptr : a.jlev;
    if (split) {
      T* partial = mem.at<T>(o_partial);
      int* arrived = mem.at<int>(o_arrived);
      SPADE_CUDA_CHECK(cudaMemsetAsync(partial, 0, sizeof(T) * slots * ks::kRhsPerPass, stream));
      SPADE_CUDA_CHECK(cudaMemsetAsync(arrived, 0, sizeof(int) * slots, stream));
      ks::LevrPiece* piece = mem.at<ks::LevrPiece>(o_piece);
      std::int32_t* level_piece_ptr = mem.at<std::int32_t>(o_level);
      ks::levr_pieces(n, part.ptr, jlev, a.level_ptr, &a.control->max_level, mem.at<std::int32_t>(o_count),
                      mem.at<std::int32_t>(o_piece_ptr), piece, level_piece_ptr, a.temp, a.temp_bytes, stream);
      items = {nullptr, piece, partial, arrived};
      piece_ptr_host.resize(std::size_t(nlev) + 1);
      SPADE_CUDA_CHECK(cudaMemcpyAsync(piece_ptr_host.data(), level_piece_ptr,
                                       sizeof(std::int32_t) * piece_ptr_host.size(), cudaMemcpyDeviceToHost, stream));
      SPADE_CUDA_CHECK(cudaStreamSynchronize(stream));
      level_ptr_host = piece_ptr_host.data();
    } else {
      items.jlev = jlev;
      level_ptr_host = a.level_ptr_host.data();
    }
    items.longest = std::min<int>(a.stats.max_nnz_per_row, ks::kLevrPiece);
  }
  SptrsvAlgorithm algorithm() const { return SptrsvAlgorithm::levr; }
  void solve(const ks::RhsPass<T>& rhs, int w, cudaStream_t stream) {
    graph[w].solve(this->L, items, level_ptr_host, nlev, rhs, y, stream);
  }
};

/// levc (Li 2017): a launch per level on CSC, atomic updates.
template <typename T>
struct Levc : StateBase<T> {
  const std::int32_t* jlev = nullptr;
  const std::int32_t* level_ptr_host = nullptr;
  int nlev = 0;

  Levc(Analysis<T>& a, cudaStream_t stream) {
    const SyncOnThrow guard(stream);
    this->L = a.lower(a.index);
    jlev = a.jlev;
    level_ptr_host = a.level_ptr_host.data();
    nlev = a.stats.levels;
    Slab layout;
    const auto o_words = layout.add<SolveWords>(1);
    this->take(std::move(layout), o_words, a.spin_limit, stream);
  }
  SptrsvAlgorithm algorithm() const { return SptrsvAlgorithm::levc; }
  void solve(const ks::RhsPass<T>& rhs, int, cudaStream_t stream) {
    ks::solve_levc(this->L, jlev, level_ptr_host, nlev, rhs, stream);
  }
};

/// slfr, slfc (Li 2017) and syncfree (Liu et al. 2016): self-scheduled warps that wait on ready flags
/// (slfr, CSR) or in-degree counters (slfc, syncfree, CSC); a solve's flags and counters count up to its
/// epoch, so that no solve clears them.
template <typename T>
struct SelfScheduled : StateBase<T> {
  SptrsvAlgorithm kind = SptrsvAlgorithm::slfr;
  const std::int32_t* jlev = nullptr;  // slfr, slfc: the level order; syncfree: null (index order)
  int* flag = nullptr;                 // n: slfr's ready flags, the counters of slfc and syncfree
  std::int32_t* global_deg = nullptr;  // slfc, syncfree: updates through global memory per unknown
  std::int32_t* local_deg = nullptr;   // syncfree: updates through the thread block's scratchpad
  T* left_sum[2] = {nullptr, nullptr};  // slfc, syncfree: R = 1, R = kRhsPerPass (null without several)
  int epoch = 0;
  int max_degree = 1;

  SelfScheduled(Analysis<T>& a, SptrsvAlgorithm algorithm, bool several, cudaStream_t stream) : kind(algorithm) {
    const SyncOnThrow guard(stream);
    const index_t n = a.stats.n;
    this->L = a.lower(a.index);
    const bool columns = kind != SptrsvAlgorithm::slfr, syncfree = kind == SptrsvAlgorithm::syncfree;
    if (!syncfree) jlev = a.jlev;
    const std::size_t n0 = std::size_t(std::max(n, 1)), count8 = n0 * ks::kRhsPerPass;
    Slab layout;
    const auto o_words = layout.add<SolveWords>(1), o_flag = layout.add<int>(n),
               o_gdeg = layout.add<std::int32_t>(columns ? n : 0),
               o_ldeg = layout.add<std::int32_t>(syncfree ? n : 0), o_left = layout.add<T>(columns ? n : 0),
               o_left8 = layout.add<T>(columns && several ? count8 : 0);
    this->take(std::move(layout), o_words, a.spin_limit, stream);
    const Slab& mem = this->memory;
    flag = mem.at<int>(o_flag);
    SPADE_CUDA_CHECK(cudaMemsetAsync(flag, 0, sizeof(int) * n0, stream));
    if (columns) {
      global_deg = mem.at<std::int32_t>(o_gdeg);
      left_sum[0] = mem.at<T>(o_left);
      SPADE_CUDA_CHECK(cudaMemsetAsync(left_sum[0], 0, sizeof(T) * n0, stream));
      if (several) {
        left_sum[1] = mem.at<T>(o_left8);
        SPADE_CUDA_CHECK(cudaMemsetAsync(left_sum[1], 0, sizeof(T) * count8, stream));
      }
      SPADE_CUDA_CHECK(cudaMemsetAsync(global_deg, 0, sizeof(std::int32_t) * n0, stream));
      if (syncfree) {
        local_deg = mem.at<std::int32_t>(o_ldeg);
        SPADE_CUDA_CHECK(cudaMemsetAsync(local_deg, 0, sizeof(std::int32_t) * n0, stream));
        ks::split_in_degree(n, this->L.ptr, this->L.ind, global_deg, local_deg, stream);
      } else {
        // The in-degrees: the off-diagonal entries of each row, the row indices of the CSC part.
        ks::histogram(a.m, this->L.ind, global_deg, stream);
      }
    }
    max_degree = std::max(1, a.stats.max_nnz_per_row);
  }
  SptrsvAlgorithm algorithm() const { return kind; }
  void solve(const ks::RhsPass<T>& rhs, int w, cudaStream_t stream) {
    // flag == epoch (slfr) or counter == epoch * degree: restart from zero before an int overflows.
    if (epoch >= INT_MAX / max_degree - 1) {
      SPADE_CUDA_CHECK(cudaMemsetAsync(flag, 0, sizeof(int) * this->L.n, stream));
      epoch = 0;
    }
    ++epoch;
    if (kind == SptrsvAlgorithm::slfr)
      ks::solve_slfr(this->L, jlev, flag, epoch, rhs, this->schedule(), stream);
    else
      ks::solve_columns(this->L, jlev, global_deg, local_deg, flag, epoch, left_sum[w], rhs, this->schedule(),
                        stream);
  }
  void reset(long long spin_limit, cudaStream_t stream) {
    StateBase<T>::reset(spin_limit, stream);
    const std::size_t n0 = std::size_t(std::max(this->L.n, 1));
    SPADE_CUDA_CHECK(cudaMemsetAsync(flag, 0, sizeof(int) * n0, stream));
    for (int w = 0; w < 2; ++w)
      if (left_sum[w] != nullptr)
        SPADE_CUDA_CHECK(cudaMemsetAsync(left_sum[w], 0, sizeof(T) * n0 * (w == 0 ? 1 : ks::kRhsPerPass), stream));
    epoch = 0;
  }
};

/// thread, fused (YuenyeungSpTRSV 2021) and fused_level (fused on the level-ordered part): work items of
/// 32-row chunks or single rows, taken by tickets; each pass width has two solution buffers used in turn,
/// the one a launch does not solve into reset to sentinels for the next.
template <typename T>
struct Chunked : StateBase<T> {
  SptrsvAlgorithm kind = SptrsvAlgorithm::fused;
  std::int32_t* items = nullptr;  // n + 1
  int nitems = 0;
  T* y[2][2] = {{nullptr, nullptr}, {nullptr, nullptr}};  // [one, several][buffer] (several: null without)
  int parity[2] = {0, 0};                                 // the buffer the next pass of each width solves into

  /// part: index order for thread and fused, level order for fused_level. Synchronizes `stream` (the
  /// count of work items).
  Chunked(Analysis<T>& a, SptrsvAlgorithm algorithm, const Part<T>& part, double fusion_threshold, bool several,
          cudaStream_t stream)
      : kind(algorithm) {
    const SyncOnThrow guard(stream);
    const index_t n = a.stats.n;
    this->L = a.lower(part);
    const index_t nchunks = (n + ks::kWarpSize - 1) / ks::kWarpSize;
    const std::size_t cn = std::size_t(nchunks) + 1, count8 = std::size_t(std::max(n, 1)) * ks::kRhsPerPass;
    Slab layout;
    const auto o_words = layout.add<SolveWords>(1), o_items = layout.add<std::int32_t>(std::size_t(n) + 1),
               o_per_chunk = layout.add<std::int32_t>(cn), o_chunk_base = layout.add<std::int32_t>(cn),
               o_y0 = layout.add<T>(n), o_y1 = layout.add<T>(n), o_y8_0 = layout.add<T>(several ? count8 : 0),
               o_y8_1 = layout.add<T>(several ? count8 : 0);
    this->take(std::move(layout), o_words, a.spin_limit, stream);
    const Slab& mem = this->memory;
    items = mem.at<std::int32_t>(o_items);
    // thread: every chunk at thread level.
    const double threshold = kind == SptrsvAlgorithm::thread ? 1e300 : fusion_threshold;
    ks::fused_items(n, part.ptr, threshold, items, &a.control->nitems, mem.at<std::int32_t>(o_per_chunk),
                    mem.at<std::int32_t>(o_chunk_base), a.temp, a.temp_bytes, stream);
    y[0][0] = mem.at<T>(o_y0);
    y[0][1] = mem.at<T>(o_y1);
    ks::fill_sentinel<T>(n, y[0][0], stream);
    ks::fill_sentinel<T>(n, y[0][1], stream);
    if (several) {  // both start as sentinels
      y[1][0] = mem.at<T>(o_y8_0);
      y[1][1] = mem.at<T>(o_y8_1);
      ks::fill_sentinel<T>(count8, y[1][0], stream);
      ks::fill_sentinel<T>(count8, y[1][1], stream);
    }
    nitems = a.read_control(stream).nitems;
  }
  SptrsvAlgorithm algorithm() const { return kind; }
  void solve(const ks::RhsPass<T>& rhs, int w, cudaStream_t stream) {
    const int cur = parity[w];
    ks::solve_fused(this->L, items, nitems, y[w][cur], y[w][1 - cur], rhs, this->schedule(), stream);
    parity[w] = 1 - cur;
  }
  void reset(long long spin_limit, cudaStream_t stream) {
    StateBase<T>::reset(spin_limit, stream);
    const std::int64_t n0 = std::max(this->L.n, 1);
    for (int w = 0; w < 2; ++w)
      for (int p = 0; p < 2; ++p)
        if (y[w][p] != nullptr) ks::fill_sentinel<T>(n0 * (w == 0 ? 1 : ks::kRhsPerPass), y[w][p], stream);
  }
};

/// level_block: one thread block walks the levels of the level-ordered part, a barrier between levels; the
/// levels packed one region each (kernels/sptrsv_block.cu) for its copies into shared memory.
template <typename T>
struct LevelBlock : StateBase<T> {
  ks::LevelPack<T> pack{};
  const std::int32_t* level_ptr = nullptr;  // device
  ks::PackLevel* levels = nullptr;          // npack: the packed levels (level sets and chain pieces)
  ks::LevelDesc* desc = nullptr;            // npack
  std::int32_t* offsets = nullptr;          // npack + 1: each packed level's first 16-byte chunk in `bytes`
  unsigned char* bytes = nullptr;
  T* y[2] = {nullptr, nullptr};  // scratch of one pass, one right-hand side and several (null without)
  Slab data;                     // the packed levels

  /// Synchronizes `stream` twice (the size of the packed levels). Throws InvalidInput where they exceed
  /// 32-bit offsets.
  LevelBlock(Analysis<T>& a, bool several, cudaStream_t stream) {
    const SyncOnThrow guard(stream);
    const index_t n = a.stats.n;
    const int nlev = a.stats.levels;
    const Part<T>& part = a.level_ordered(stream);
    this->L = a.lower(part);
    level_ptr = a.level_ptr;
    // The packed levels: the level sets, runs of narrow level sets as chain pieces.
    const std::vector<ks::PackLevel> packed_levels = ks::level_pack_levels(a.level_ptr_host);
    const int npack = static_cast<int>(packed_levels.size());
    const bool chains = std::any_of(packed_levels.begin(), packed_levels.end(),
                                    [](const ks::PackLevel& p) { return p.kind == ks::PackKind::chain; });
    // Each packed level in one region of 16-byte chunks: the sizes, their scan (the offsets), then the
    // regions, in an allocation of the total.
    Slab layout;
    const auto o_words = layout.add<SolveWords>(1), o_levels = layout.add<ks::PackLevel>(npack),
               o_desc = layout.add<ks::LevelDesc>(npack),
               o_offsets = layout.add<std::int32_t>(std::size_t(npack) + 1), o_y0 = layout.add<T>(n),
               o_y8 = layout.add<T>(several ? std::size_t(std::max(n, 1)) * ks::kRhsPerPass : 0);
    this->take(std::move(layout), o_words, a.spin_limit, stream);
    const Slab& mem = this->memory;
    levels = mem.at<ks::PackLevel>(o_levels);
    desc = mem.at<ks::LevelDesc>(o_desc);
    offsets = mem.at<std::int32_t>(o_offsets);
    y[0] = mem.at<T>(o_y0);
    if (several) y[1] = mem.at<T>(o_y8);
    // From pageable memory: the call returns once the copy has left packed_levels.
    SPADE_CUDA_CHECK(cudaMemcpyAsync(levels, packed_levels.data(), sizeof(ks::PackLevel) * packed_levels.size(),
                                     cudaMemcpyHostToDevice, stream));
    SPADE_CUDA_CHECK(cudaMemsetAsync(&a.control->max_level_chunks, 0, sizeof(int), stream));
    SPADE_CUDA_CHECK(cudaMemsetAsync(&a.control->level_longest_rows, 0, sizeof(unsigned long long), stream));
    ks::level_pack_sizes<T>(npack, levels, part.ptr, part.ind, ks::level_block_stage_cap<T>(a.stats.max_rows_per_level),
                            desc, a.work, &a.control->max_level_chunks, &a.control->level_longest_rows, stream);
    ks::level_pack_stage_chains(npack, levels, a.work, &a.control->max_level_chunks, desc, stream);
    ks::exclusive_scan(npack, a.work, offsets, a.temp, a.temp_bytes, stream);
    std::int32_t chunks = 0;
    SPADE_CUDA_CHECK(cudaMemcpyAsync(&chunks, offsets + npack, sizeof(chunks), cudaMemcpyDeviceToHost, stream));
    const Control c = a.read_control(stream);
    if (c.max_level_chunks == INT_MAX || chunks < 0)
      throw InvalidInput("sparse triangular solve (level_block): the packed levels are too large (a level of 2 GiB "
                         "or more, or 32 GiB in all); choose another algorithm");
    Slab packed;
    const auto o_data = packed.add<unsigned char>(std::size_t(chunks) * 16);
    data = std::move(packed);
    data.allocate(stream);
    bytes = data.at<unsigned char>(o_data);
    // The padding is copied into shared memory with the data, never read: zero it once.
    SPADE_CUDA_CHECK(cudaMemsetAsync(bytes, 0, std::size_t(chunks) * 16, stream));
    ks::level_pack_fill(this->L, npack, levels, offsets, desc, bytes, stream);
    const double longest_row = npack > 0 ? double(c.level_longest_rows) / npack : 0.0;
    pack = {n, npack, nlev, desc, bytes, a.stats.max_rows_per_level, c.max_level_chunks * 16, chains, longest_row};
    a.stats.level_block_lanes = ks::lanes_per_row(longest_row);
  }
  SptrsvAlgorithm algorithm() const { return SptrsvAlgorithm::level_block; }
  void solve(const ks::RhsPass<T>& rhs, int w, cudaStream_t stream) {
    ks::solve_level_block(pack, this->L, level_ptr, y[w], rhs, stream);
  }
  void refresh(cudaStream_t stream) { ks::level_pack_fill(this->L, pack.nlev, levels, offsets, desc, bytes, stream); }
  void release(cudaStream_t stream) {
    data.release(stream);
    StateBase<T>::release(stream);
  }
};

/// cluster: each level of the level-ordered part split over the 16 thread blocks of a cluster (compute
/// capability 9.0), solution values pushed into the shared memory of the blocks that read them.
template <typename T>
struct Cluster : StateBase<T> {
  ks::ClusterLayout layout{};
  double entries_per_row = 0;  // below the diagonal, as SptrsvStats::nnz_per_row
  bool fits = false;           // false: the layout does not fit (or no sm_90); the state cannot solve

  /// Measures the layout (synchronizing `stream` once) and, where it fits, builds it.
  Cluster(Analysis<T>& a, cudaStream_t stream) {
    // The shares of every level in every block and their entries, the most levels a row reads back, the
    // ring that distance + 1 levels need; then, where the layout fits, the push codes (a histogram of the
    // columns, its scan, a scatter).
    const SyncOnThrow guard(stream);
    const index_t n = a.stats.n;
    const int nlev = a.stats.levels;
    entries_per_row = a.stats.nnz_per_row;
    if (cuda_device_major() < 9 || n == 0 || nlev == 0) return;
    const std::size_t shares = std::size_t(nlev) * ks::kClusterBlocks;
    if (shares >= std::size_t(INT_MAX)) return;
    const Part<T>& part = a.level_ordered(stream);
    this->L = a.lower(part);
    Slab slab;
    const std::size_t temp_bytes = std::max(ks::scan_temp_bytes(index_t(shares)), ks::scan_temp_bytes(n));
    const auto o_words = slab.add<SolveWords>(1), o_temp = slab.add<char>(temp_bytes), o_rows = slab.add<int2>(shares),
               o_count = slab.add<std::int32_t>(shares + 1), o_segment = slab.add<std::int32_t>(shares + 1),
               o_row_slot = slab.add<std::int32_t>(n), o_push_ptr = slab.add<std::int32_t>(std::size_t(n) + 1),
               o_push = slab.add<std::uint32_t>(std::size_t(a.m));
    this->take(std::move(slab), o_words, a.spin_limit, stream);
    const Slab& mem = this->memory;
    void* temp = mem.at<char>(o_temp);
    std::int32_t* share_count = mem.at<std::int32_t>(o_count);
    std::int32_t* segment = mem.at<std::int32_t>(o_segment);
    // The level array is free once the level sets exist (row_level here); so are the work arrays.
    int* row_level = a.level;
    SPADE_CUDA_CHECK(cudaMemsetAsync(a.control->cluster, 0, sizeof(a.control->cluster), stream));
    int2* share_rows = mem.at<int2>(o_rows);
    ks::cluster_shares(n, nlev, a.level_ptr, part.ptr, part.ind, row_level, share_rows, share_count,
                       a.control->cluster, stream);
    ks::exclusive_scan(index_t(shares), share_count, segment, temp, temp_bytes, stream);
    ks::cluster_window(nlev, segment, a.control->cluster, stream);
    const Control c = a.read_control(stream);
    const int distance = c.cluster[ks::kClusterDistance], window = c.cluster[ks::kClusterWindow];
    int ring_log2 = 0;
    while ((1 << ring_log2) < window && ring_log2 <= ks::kClusterMaxRingLog2) ++ring_log2;
    layout = {distance, ring_log2, c.cluster[ks::kClusterRows], nlev, a.level_ptr, segment, share_rows, nullptr,
              nullptr, nullptr};
    if (distance > ks::kClusterMaxDistance || ring_log2 > ks::kClusterMaxRingLog2 ||
        !ks::cluster_fits<T>(layout, entries_per_row)) {
      this->memory = Slab();  // nothing in flight reads it: the read above synchronized `stream`
      layout = {};
      return;
    }
    std::int32_t* counts = a.work;  // n + 1
    std::int32_t* cursor = a.work2;
    std::int32_t* push_ptr = mem.at<std::int32_t>(o_push_ptr);
    SPADE_CUDA_CHECK(cudaMemsetAsync(counts, 0, sizeof(std::int32_t) * n, stream));
    ks::histogram(a.m, part.ind, counts, stream);
    ks::exclusive_scan(n, counts, push_ptr, temp, temp_bytes, stream);
    SPADE_CUDA_CHECK(cudaMemsetAsync(cursor, 0, sizeof(std::int32_t) * n, stream));
    std::int32_t* row_slot = mem.at<std::int32_t>(o_row_slot);
    std::uint32_t* push = mem.at<std::uint32_t>(o_push);
    layout.row_slot = row_slot;
    layout.push_ptr = push_ptr;
    layout.push = push;
    ks::cluster_pushes(n, layout, row_level, part.ptr, part.ind, cursor, row_slot, push, stream);
    fits = true;
  }
  SptrsvAlgorithm algorithm() const { return SptrsvAlgorithm::cluster; }
  void solve(const ks::RhsPass<T>& rhs, int, cudaStream_t stream) {
    ks::solve_cluster(this->L, layout, entries_per_row, rhs, &this->words->status, stream);
  }
};

/// The state of one algorithm: its type says which algorithm a pass runs.
template <typename T>
using AlgorithmState = std::variant<Levr<T>, Levc<T>, SelfScheduled<T>, Chunked<T>, LevelBlock<T>, Cluster<T>>;

/// The one dispatch of a pass: w = 0 one right-hand side, w = 1 kRhsPerPass of them.
template <typename T>
void solve_pass(AlgorithmState<T>& state, const ks::RhsPass<T>& rhs, int w, cudaStream_t stream) {
  std::visit([&](auto& s) { s.solve(rhs, w, stream); }, state);
}
template <typename T>
SptrsvAlgorithm algorithm_of(const AlgorithmState<T>& state) {
  return std::visit([](const auto& s) { return s.algorithm(); }, state);
}
template <typename T>
StateBase<T>& base_of(AlgorithmState<T>& state) {
  return std::visit([](auto& s) -> StateBase<T>& { return s; }, state);
}

/// Builds the state of `algorithm` (never automatic) on the analysis `a`, with the scratch of passes of
/// several right-hand sides where `several`. level_order: levr runs on the level-ordered part (auto, where
/// its other pick runs there). Null where `algorithm` is cluster and its layout does not fit.
template <typename T>
std::shared_ptr<AlgorithmState<T>> make_state(Analysis<T>& a, SptrsvAlgorithm algorithm, bool level_order,
                                              double fusion_threshold, bool several, cudaStream_t stream) {
  using State = AlgorithmState<T>;
  switch (algorithm) {
    case SptrsvAlgorithm::levr:
      return std::make_shared<State>(std::in_place_type<Levr<T>>, a, level_order ? a.level_ordered(stream) : a.index,
                                     several, stream);
    case SptrsvAlgorithm::levc: return std::make_shared<State>(std::in_place_type<Levc<T>>, a, stream);
    case SptrsvAlgorithm::slfr:
    case SptrsvAlgorithm::slfc:
    case SptrsvAlgorithm::syncfree:
      return std::make_shared<State>(std::in_place_type<SelfScheduled<T>>, a, algorithm, several, stream);
    case SptrsvAlgorithm::thread:
    case SptrsvAlgorithm::fused:
      return std::make_shared<State>(std::in_place_type<Chunked<T>>, a, algorithm, a.index, fusion_threshold,
                                     several, stream);
    case SptrsvAlgorithm::fused_level:
      return std::make_shared<State>(std::in_place_type<Chunked<T>>, a, algorithm, a.level_ordered(stream),
                                     fusion_threshold, several, stream);
    case SptrsvAlgorithm::level_block:
      return std::make_shared<State>(std::in_place_type<LevelBlock<T>>, a, several, stream);
    case SptrsvAlgorithm::cluster: {
      auto state = std::make_shared<State>(std::in_place_type<Cluster<T>>, a, stream);
      if (!std::get<Cluster<T>>(*state).fits) return nullptr;
      return state;
    }
    case SptrsvAlgorithm::automatic: break;
  }
  throw InvalidInput("sparse triangular solve: no state for algorithm " + std::string(to_string(algorithm)));
}

/// auto's trials for one pass width (w = 0: one right-hand side, 1: passes of several): candidates, each
/// running two passes of the plan's own solves in turn, the second timed; once every timed pass has
/// finished, the fastest runs that width. An entrant with a prediction competes with it instead of a pass
/// (levr, whose first pass records its graph).
template <typename T>
struct Trials {
  struct Entrant {
    std::shared_ptr<AlgorithmState<T>> state;
    double predicted_us = -1;             // >= 0: not timed, this prediction competes
    bool warm = false;                    // its untimed pass has been enqueued
    std::unique_ptr<TrialEvents> events;  // its timed pass, once enqueued
  };
  std::vector<Entrant> entrants;  // empty: no trial open at this width

  bool open() const { return !entrants.empty(); }
  /// The next entrant to time: the first without a prediction and not timed yet; null once all are.
  Entrant* untimed() {
    const auto it = std::find_if(entrants.begin(), entrants.end(),
                                 [](const Entrant& e) { return e.predicted_us < 0 && e.events == nullptr; });
    return it == entrants.end() ? nullptr : &*it;
  }
};

}  // namespace

template <typename T>
struct SptrsvPlan<T>::Impl {
  using State = AlgorithmState<T>;
  Analysis<T> analysis;
  bool several_rhs = true;  // SptrsvOptions::several_rhs: passes of several right-hand sides can run
  SptrsvAutoChoice choice;  // auto: the rule's choice (trials included)
  // The states that run the passes of one right-hand side and of several (null without several_rhs); one
  // object where both run the same algorithm.
  std::shared_ptr<State> one, several;
  // auto: the trials of each width still open; after those of one right-hand side, passes of several
  // try the winner where the rule listed trial candidates (several_follows).
  Trials<T> trials[2];
  // The states retired after losing a trial, by their slot in Control::retired: algorithm and level order.
  std::vector<std::pair<SptrsvAlgorithm, const std::int32_t*>> retired;
  cudaEvent_t last_solve = nullptr;  // recorded after every solve outside a stream capture

  Impl() = default;
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  /// Waits for this plan's last solve (not for the device) before the members free their memory.
  ~Impl() {
    if (last_solve == nullptr) return;
    cudaEventSynchronize(last_solve);
    cudaEventDestroy(last_solve);
  }

  /// The distinct states that run passes or may still run one (the open trials' entrants): every state
  /// the plan holds.
  std::vector<std::shared_ptr<State>> states() const {
    std::vector<std::shared_ptr<State>> out;
    auto add = [&](const std::shared_ptr<State>& s) {
      if (s != nullptr && std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
    };
    add(one);
    add(several);
    for (const Trials<T>& t : trials)
      for (const typename Trials<T>::Entrant& e : t.entrants) add(e.state);
    return out;
  }
  /// Passes of several try the winner of the trials of one right-hand side where the rule listed trial
  /// candidates (not where it only asked to time fused).
  bool several_follows() const { return several_rhs && !choice.trials.empty(); }

  void build(const DeviceTriangle<T>& a, const SptrsvOptions& options, cudaStream_t stream);
  void choose_automatic(const SptrsvOptions& options, cudaStream_t stream);
  void open_trials(const SptrsvOptions& options, cudaStream_t stream);
  void pass(const ks::RhsPass<T>& rhs, int w, bool capturing, cudaStream_t stream);
  void decide(int w, cudaStream_t stream);
  void retire_losers(const std::vector<std::shared_ptr<State>>& before, cudaStream_t stream);
  SolveWords read_words(State& state, cudaStream_t stream);
};

template <typename T>
void SptrsvPlan<T>::Impl::build(const DeviceTriangle<T>& a, const SptrsvOptions& options, cudaStream_t stream) {
  several_rhs = options.several_rhs;
  analysis.analyse(a, options, stream);
  if (options.algorithm == SptrsvAlgorithm::automatic) {
    choose_automatic(options, stream);
  } else {
    one = make_state(analysis, options.algorithm, false, options.fusion_threshold, several_rhs, stream);
    // cluster gives way to fused_level where its layout does not fit.
    if (one == nullptr)
      one = make_state(analysis, SptrsvAlgorithm::fused_level, false, options.fusion_threshold, several_rhs, stream);
    if (several_rhs) several = one;
  }
  SPADE_CUDA_CHECK(cudaEventCreateWithFlags(&last_solve, cudaEventDisableTiming));
}

template <typename T>
void SptrsvPlan<T>::Impl::choose_automatic(const SptrsvOptions& options, cudaStream_t stream) {
  // The rule reads the level statistics; its picks are built on the analysis, cluster first (where its
  // layout does not fit, or a share of a level takes two passes for one right-hand side, the rule's
  // fallback runs instead).
  const SptrsvStats& st = analysis.stats;
  choice = sptrsv_auto_rule(sptrsv_shape(st), SptrsvDeviceModel::current());
  SptrsvAlgorithm pick_one = choice.one, pick_several = choice.several;
  // levr runs on the level-ordered part where the other pick needs it anyway.
  const bool level_order = runs_in_level_order(pick_one) || (several_rhs && runs_in_level_order(pick_several));
  std::shared_ptr<State> cluster;
  if (pick_one == SptrsvAlgorithm::cluster || (several_rhs && pick_several == SptrsvAlgorithm::cluster)) {
    cluster = make_state(analysis, SptrsvAlgorithm::cluster, level_order, options.fusion_threshold, several_rhs,
                         stream);
    if (cluster == nullptr) {
      if (pick_one == SptrsvAlgorithm::cluster) pick_one = choice.one_fallback;
      if (pick_several == SptrsvAlgorithm::cluster) pick_several = choice.several_fallback;
    } else if (pick_one == SptrsvAlgorithm::cluster &&
               !ks::cluster_one_pass(std::get<Cluster<T>>(*cluster).layout, st.nnz_per_row)) {
      pick_one = choice.one_fallback;
    }
  }
  auto build = [&](SptrsvAlgorithm algorithm, bool for_several) {
    if (algorithm == SptrsvAlgorithm::cluster) return cluster;
    return make_state(analysis, algorithm, level_order, options.fusion_threshold, for_several, stream);
  };
  if (several_rhs && pick_several == pick_one) {
    one = several = build(pick_one, true);
  } else {
    one = build(pick_one, false);
    if (several_rhs) several = build(pick_several, true);
  }
  if (cluster != nullptr && cluster != one && cluster != several)  // unused: let its build finish first
    SPADE_CUDA_CHECK(cudaStreamSynchronize(stream));
  if (st.n > 0 && (!choice.trials.empty() || choice.try_fused)) open_trials(options, stream);
}

template <typename T>
void SptrsvPlan<T>::Impl::open_trials(const SptrsvOptions& options, cudaStream_t stream) {
  // The entrants of the trials of one right-hand side, built here so that no solve allocates: the plan's
  // own pick, timed where the rule lists it and competing with its prediction otherwise (levr, or a
  // fallback), then the rule's other trial candidates, or fused where it asks to time fused against
  // levr. Each entrant runs one of the first solves (docs/benchmarks/sptrsv.md, "Trials on the first
  // solves": in the analysis they cost more than cuSPARSE's whole analysis on short triangles).
  auto predicted = [&](SptrsvAlgorithm alg) {
    for (const SptrsvPrediction& p : choice.predicted)
      if (p.algorithm == alg) return p.us;
    return alg == SptrsvAlgorithm::levr ? choice.levr_us : std::numeric_limits<double>::infinity();
  };
  Trials<T>& t = trials[0];
  const SptrsvAlgorithm own = algorithm_of(*one);
  const bool own_timed = own != SptrsvAlgorithm::levr &&
                         std::find(choice.trials.begin(), choice.trials.end(), own) != choice.trials.end();
  t.entrants.push_back({one, own_timed ? -1.0 : predicted(own), false, nullptr});
  for (SptrsvAlgorithm a : choice.trials) {
    if (a == own || a == choice.one) continue;  // choice.one is not own where cluster's layout did not fit
    std::shared_ptr<State> candidate = make_state(analysis, a, false, options.fusion_threshold, several_rhs, stream);
    if (candidate != nullptr) t.entrants.push_back({candidate, -1.0, false, nullptr});
  }
  if (choice.try_fused)
    t.entrants.push_back(
        {make_state(analysis, SptrsvAlgorithm::fused, false, options.fusion_threshold, false, stream), -1.0, false,
         nullptr});
  analysis.stats.auto_candidates = static_cast<int>(t.entrants.size());
  if (t.entrants.size() == 1) t.entrants.clear();  // nothing to compare: the own pick runs
}

template <typename T>
void SptrsvPlan<T>::Impl::pass(const ks::RhsPass<T>& rhs, int w, bool capturing, cudaStream_t stream) {
  // Where a trial of this width is open (never inside a stream capture, where nothing can be timed), the
  // next entrant runs the pass: its first untimed, as it may pay what later solves do not (CUDA loads a
  // kernel's module at its first launch; its data may come from device memory rather than the L2 cache;
  // docs/benchmarks/sptrsv.md, "Timed on its first solve or on its second"), its second timed. Once all are timed, each pass asks (without
  // waiting) whether they have finished.
  Trials<T>& t = trials[w];
  if (t.open() && !capturing) {
    if (typename Trials<T>::Entrant* e = t.untimed()) {
      State& s = *e->state;
      if (!e->warm) {
        e->warm = true;
        solve_pass(s, rhs, w, stream);
        return;
      }
      e->events = std::make_unique<TrialEvents>();
      e->events->record(stream, [&] { solve_pass(s, rhs, w, stream); });
      ++analysis.stats.auto_trials;
      return;
    }
    decide(w, stream);
  }
  solve_pass(w == 0 ? *one : *several, rhs, w, stream);
}

template <typename T>
void SptrsvPlan<T>::Impl::decide(int w, cudaStream_t stream) {
  // The fastest entrant (the first of equals) runs this width from now on. Where it takes over one
  // right-hand side from another pick, passes of several try it too, against their own pick unless that is
  // levr (never timed: its first pass records a graph); the winner alone takes them over from levr.
  Trials<T>& t = trials[w];
  for (const typename Trials<T>::Entrant& e : t.entrants)
    if (e.events != nullptr && !e.events->finished()) return;
  const std::vector<std::shared_ptr<State>> before = states();  // the losers live until retired below
  std::shared_ptr<State> winner;
  double best = std::numeric_limits<double>::infinity();
  for (const typename Trials<T>::Entrant& e : t.entrants) {
    const double us = e.events != nullptr ? e.events->microseconds() : e.predicted_us;
    if (us < best) best = us, winner = e.state;
  }
  t.entrants.clear();
  if (w == 0) {
    if (several_follows() && winner != one) {
      Trials<T>& s = trials[1];
      if (several != winner && algorithm_of(*several) != SptrsvAlgorithm::levr)
        s.entrants.push_back({several, -1.0, false, nullptr});
      s.entrants.push_back({winner, -1.0, false, nullptr});
      if (s.entrants.size() == 1) {
        s.entrants.clear();
        several = winner;
      }
    }
    one = winner;
  } else {
    several = winner;
  }
  retire_losers(before, stream);
}

template <typename T>
void SptrsvPlan<T>::Impl::retire_losers(const std::vector<std::shared_ptr<State>>& before, cudaStream_t stream) {
  // A state that no pick and no open trial holds any more: its solves' status goes to a retired slot for
  // check(), its memory back stream-ordered on `stream`. Its passes have finished (their events were
  // read); the caller orders solves on different streams, so nothing enqueued before reads it either.
  const std::vector<std::shared_ptr<State>> live = states();
  for (const std::shared_ptr<State>& held : before) {
    if (std::find(live.begin(), live.end(), held) != live.end()) continue;
    State& s = *held;
    const std::size_t slot = retired.size();  // below kMaxStates: each state built retires once
    SPADE_CUDA_CHECK(cudaMemcpyAsync(&analysis.control->retired[slot], &base_of(s).words->status,
                                     sizeof(kernels::DeviceStatus), cudaMemcpyDeviceToDevice, stream));
    retired.emplace_back(algorithm_of(s), base_of(s).L.perm);
    std::visit([&](auto& state) { state.release(stream); }, s);
  }
  // The level-ordered part, where only losers ran on it.
  if (analysis.has_level_order() &&
      std::none_of(live.begin(), live.end(),
                   [](const std::shared_ptr<State>& s) { return base_of(*s).L.perm != nullptr; }))
    analysis.release_level_order(stream);
}

template <typename T>
SolveWords SptrsvPlan<T>::Impl::read_words(State& state, cudaStream_t stream) {
  SolveWords w;
  SPADE_CUDA_CHECK(cudaMemcpyAsync(&w, base_of(state).words, sizeof(w), cudaMemcpyDeviceToHost, stream));
  SPADE_CUDA_CHECK(cudaStreamSynchronize(stream));
  return w;
}

template <typename T>
SptrsvPlan<T>::SptrsvPlan(const DeviceTriangle<T>& a, const SptrsvOptions& options, cudaStream_t stream)
    : impl_(std::make_unique<Impl>()) {
  try {
    impl_->build(a, options, stream);
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
  return impl_->analysis.stats.n;
}
template <typename T>
SptrsvAlgorithm SptrsvPlan<T>::algorithm(int nrhs) const {
  const Impl& p = *impl_;
  return algorithm_of(nrhs > 1 && p.several != nullptr ? *p.several : *p.one);
}
template <typename T>
bool SptrsvPlan<T>::choosing(int nrhs) const {
  const Impl& p = *impl_;
  if (nrhs <= 1 || !p.several_rhs) return p.trials[0].open();
  return p.trials[1].open() || (p.trials[0].open() && p.several_follows());
}
template <typename T>
const SptrsvStats& SptrsvPlan<T>::stats() const {
  return impl_->analysis.stats;
}

template <typename T>
void SptrsvPlan<T>::solve(const T* b, index_t ldb, T* x, index_t ldx, int nrhs, cudaStream_t stream) {
  Impl& p = *impl_;
  const index_t n = p.analysis.stats.n;
  if (nrhs < 1) throw InvalidInput("sparse triangular solve: nrhs = " + std::to_string(nrhs) + " (must be >= 1)");
  if (ldb < std::max(n, 1) || ldx < std::max(n, 1))
    throw InvalidInput("sparse triangular solve: ldb = " + std::to_string(ldb) + ", ldx = " + std::to_string(ldx) +
                       " (both must be >= n = " + std::to_string(n) + ")");
  if (n == 0) return;
  if (b == nullptr || x == nullptr) throw InvalidInput("sparse triangular solve: b or x is null");
  if (nrhs > 1 && !p.several_rhs)
    throw InvalidInput("sparse triangular solve: nrhs = " + std::to_string(nrhs) +
                       " on a plan built with SptrsvOptions::several_rhs = false");
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  SPADE_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
  const bool capturing = capture != cudaStreamCaptureStatusNone;
  for (int first = 0; first < nrhs; first += ks::kRhsPerPass) {
    const int nr = nrhs == 1 ? 1 : std::min(ks::kRhsPerPass, nrhs - first);
    const int w = nr == 1 ? 0 : 1;
    const ks::RhsPass<T> rhs{b + std::int64_t(first) * ldb, ldb, x + std::int64_t(first) * ldx, ldx, nr};
    p.pass(rhs, w, capturing, stream);
  }
  // The destructor waits for this event: outside a capture only (a captured solve runs when the caller
  // launches the graph, which must not outlive the plan).
  if (!capturing) SPADE_CUDA_CHECK(cudaEventRecord(p.last_solve, stream));
}

SptrsvDeviceModel SptrsvDeviceModel::current() {
  SptrsvDeviceModel d;
  d.sm_count = cuda_device_attribute(cudaDevAttrMultiProcessorCount);
  d.compute_major = cuda_device_major();
  return d;
}

template <typename T>
void SptrsvPlan<T>::check(cudaStream_t stream) {
  // Each state that runs passes reports through its own words, each one retired after losing auto's
  // trials through its slot among the control words; every one that gave up is restored, the first is
  // thrown.
  Impl& p = *impl_;
  std::int64_t unknown = -1;
  SptrsvAlgorithm failed = SptrsvAlgorithm::automatic;
  auto report = [&](const kernels::DeviceStatus& status, const std::int32_t* perm, SptrsvAlgorithm algorithm) {
    if (unknown >= 0) return;
    index_t internal = status.index;
    if (perm != nullptr)
      SPADE_CUDA_CHECK(cudaMemcpy(&internal, perm + internal, sizeof(internal), cudaMemcpyDeviceToHost));
    unknown = p.analysis.reversed ? p.analysis.stats.n - 1 - internal : internal;
    failed = algorithm;
  };
  for (const std::shared_ptr<typename Impl::State>& state : p.states()) {
    const SolveWords w = p.read_words(*state, stream);
    if (w.status.code == kernels::kStatusOk) continue;
    std::visit([&](auto& s) { s.reset(p.analysis.spin_limit, stream); }, *state);
    SPADE_CUDA_CHECK(cudaStreamSynchronize(stream));
    report(w.status, base_of(*state).L.perm, algorithm_of(*state));
  }
  if (!p.retired.empty()) {
    const Control c = p.analysis.read_control(stream);
    for (std::size_t k = 0; k < p.retired.size(); ++k) {
      if (c.retired[k].code == kernels::kStatusOk) continue;
      const kernels::DeviceStatus ok{};
      SPADE_CUDA_CHECK(
          cudaMemcpyAsync(&p.analysis.control->retired[k], &ok, sizeof(ok), cudaMemcpyHostToDevice, stream));
      SPADE_CUDA_CHECK(cudaStreamSynchronize(stream));
      report(c.retired[k], p.retired[k].second, p.retired[k].first);
    }
  }
  if (unknown >= 0)
    throw NumericalError(NumericalError::Kind::no_progress, unknown,
                         std::string("sparse triangular solve (") + to_string(failed) +
                             "): a spin-wait gave up at unknown " + std::to_string(unknown));
}

template <typename T>
void SptrsvPlan<T>::set_spin_limit(long long polls) {
  if (polls < 0)
    throw InvalidInput("SptrsvPlan::set_spin_limit: polls = " + std::to_string(polls) + " (must be >= 0)");
  Impl& p = *impl_;
  p.analysis.spin_limit = polls;
  for (const std::shared_ptr<typename Impl::State>& state : p.states())
    SPADE_CUDA_CHECK(
        cudaMemcpy(&base_of(*state).words->status.spin_limit, &polls, sizeof(polls), cudaMemcpyHostToDevice));
}

template <typename T>
int* SptrsvPlan<T>::device_tickets_for_testing() const {
  // While auto's trials of one right-hand side are open, the next entrant to time runs the next solve.
  Impl& p = *impl_;
  const typename Trials<T>::Entrant* next = p.trials[0].untimed();
  return base_of(next != nullptr ? *next->state : *p.one).words->tickets;
}

template <typename T>
void SptrsvPlan<T>::update_values(const T* values, cudaStream_t stream) {
  // Every copy of the values that a state solves on: the part in index order, the level-ordered one, and
  // level_block's packed levels.
  Impl& p = *impl_;
  Analysis<T>& an = p.analysis;
  if (an.input_nnz > 0 && values == nullptr) throw InvalidInput("sparse triangular solve: values is null");
  const int no_zero = INT_MAX;
  SPADE_CUDA_CHECK(cudaMemcpyAsync(&an.control->zero_row, &no_zero, sizeof(int), cudaMemcpyHostToDevice, stream));
  bool index_order = false, level_order = false;
  for (const std::shared_ptr<typename Impl::State>& state : p.states())
    (base_of(*state).L.perm != nullptr ? level_order : index_order) = true;
  if (index_order) an.gather(values, an.index, stream);
  if (level_order) an.gather(values, an.level_ordered(stream), stream);
  for (const std::shared_ptr<typename Impl::State>& state : p.states())
    std::visit([&](auto& s) { s.refresh(stream); }, *state);
  an.throw_if_singular(an.read_control(stream).zero_row);
}

template class SptrsvPlan<double>;
template class SptrsvPlan<float>;

}  // namespace spade
