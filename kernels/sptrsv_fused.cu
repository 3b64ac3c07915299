// Thread-level and warp-level sparse triangular solve on CSR, fused (F. Zhang, J. Su, W. Liu et al.,
// "YuenyeungSpTRSV", IEEE TPDS 32(9), 2021). Rows are cut into 32-row chunks; a chunk with few nonzeros per
// row is solved by one warp with a thread per row, a chunk with many by a warp per row, all mapped through
// one array of work items handed out in index order by block tickets.
//
// Thread level, writing-first: each thread accumulates every dependency that is ready and writes its
// unknown as soon as the last one arrives, with no separate deadlock-avoidance phase. Dependencies on rows
// of earlier chunks are read from memory; dependencies inside the chunk (the x-neighbour chains of a grid)
// are taken from the producing lane with a shuffle once a ballot shows it solved, so a chain of 32 rows
// costs 32 warp steps instead of 32 memory round trips. Lanes poll together, one warp-wide load per pass:
// 32 lanes spinning apart multiply the polling traffic that slows down the producers.
//
// A pass polls memory once, then takes shuffle steps for as long as some lane can take an entry inside the
// chunk, so that a chain whose outside entries are in runs through the chunk at shuffle speed instead of
// one step per memory round trip (docs/benchmarks/sptrsv.md, version 9: NotreDame_www 0.162 -> 0.110 ms,
// lap2d5 1024^2 4.71 -> 3.38 ms on an H100).
//
// Waiting costs the producers: every resident warp that polls slows the hand-off of the ones on the
// critical path (a probe on the H100 measured one hand-off at 0.39 us alone and 1.0 us with 6 blocks per
// SM polling with 256 ns sleeps, 0.43 us when they sleep 2 us). So a warp whose last pass took nothing
// looks one step further back: its lowest unsolved lane, which the chunk waits for, also reads the last
// dependency of the row it waits on. While that one is unsolved the row is at least two hand-offs away
// and the warp sleeps up to kFarSleepNs between polls; otherwise up to Backoff::kShortSleepNs (256 ns).
//
// Level order (fused_level). The plan may renumber the rows in level order first (P L P^T, lower again;
// L.perm maps a row back to the caller's unknown). Index order keeps in flight only the chunks that the
// resident warps hold, the next ~200,000 rows: on a 128^3 grid that is 12 of the 128 planes, while one
// level of the front crosses all of them, so the solve advances plane group by plane group. In level order
// the same warps hold the next levels, whatever their width (lap3d7 128^3: 2.81 -> 1.03 ms on an H100;
// docs/benchmarks/sptrsv.md, version 10). A chunk's rows are then mostly of one level and their entries
// come from the levels just below, so with one right-hand side a lane reads up to kLevelOrderBatch of them
// per round trip.
//
// Ready flags: the solution buffer y starts as a signalling-NaN sentinel, and a value is its own flag
// (one relaxed atomic store, one relaxed atomic load). Two buffers alternate between launches: while one
// is being solved into, every row resets its entry of the other, so no launch needs a separate fill.
//
// Many right-hand sides (R = kRhsPerPass per launch). The dependency chain is the one of a single
// right-hand side; only the arithmetic per row grows, so the kernel keeps what a waiting row costs close
// to the one-rhs kernel:
//  - a lane keeps one array per row: b minus the entries taken so far, then the solution (no separate
//    copies of b, of the sum and of the solution), so that a 32-row chunk needs fewer registers and more
//    chunks stay resident (index-order scheduling needs them in flight; ptxas: 80 registers per thread
//    for R = 8, 3 blocks per SM, where separate arrays took 114, 2 blocks; 40 for R = 1);
//  - y is rhs-major (right-hand side r of unknown i at y[r * n + i]). A lane reads all R values of an
//    entry at its first try; once that found the entry unsolved, the lane polls only the entry's first
//    right-hand side until it is there, unless it is the lowest unsolved lane of its chunk, which the
//    whole chunk waits for and which reads all R in every pass. Waiting lanes thus poll one word each,
//    adjacent across the chunk, as in a one-rhs solve (polling all R values interleaved, as before, was
//    32 times the one-rhs polling traffic), while ready entries cost one read as before;
//  - warp rows reduce their R sums with one transposing warp reduction (9 shuffles for R = 8, not 40).
#include "kernels/sptrsv_common.cuh"

#include <algorithm>

namespace spade::kernels::sptrsv {
namespace {

/// Longest sleep between polls of a warp whose wait is at least two hand-offs long (see the file comment;
/// 1024 ns measured better than 2048 and 4096 on the thin 2D grids, version 9).
constexpr unsigned kFarSleepNs = 1024;

/// fused_level, one right-hand side: entries of earlier chunks read together per round trip (4 took lap3d7
/// 128^3 from 1.03 to 0.79 ms and lap2d9 64x16384 from 58.9 to 33.9 ms on an H100, version 10; with 4 the
/// kernel needs 47 registers (ptxas, FP64), five blocks per SM).
constexpr int kLevelOrderBatch = 4;

/// The solution buffers of one launch, rhs-major: right-hand side r of unknown i at [r * stride + i].
template <typename T>
struct Buffers {
  T* cur;   ///< sentinels before the launch, the solution after it
  T* next;  ///< reset to sentinels during the launch, for the next one
  std::int64_t stride;
};

/// Publishes row i's solution v (r < nr) in y and x, and resets its entries of the next buffer (all R:
/// a later launch may use more right-hand sides than this one).
template <typename T, int R>
__device__ inline void publish(const LowerPart<T>& L, const RhsPass<T>& rhs, const Buffers<T>& y, index_t i,
                               const T (&v)[R]) {
  const index_t ui = caller_row(L, i);
#pragma unroll
  for (int r = 0; r < R; ++r)
    if (r < rhs.nr) store_relaxed(&y.cur[r * y.stride + i], v[r]);
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if (r < rhs.nr) rhs.x[ui + std::int64_t(r) * rhs.ldx] = v[r];
    y.next[r * y.stride + i] = Sentinel<T>::value();
  }
}

// A warp per row: the lanes take 32 entries at a time and poll them together (one warp-wide load per
// poll, never 32 lanes spinning apart), then reduce. b and the diagonal are read before waiting, so that
// their load latency is not on the critical path of the dependency chain.
template <typename T, int R>
__device__ void warp_row(const LowerPart<T>& L, const RhsPass<T>& rhs, const Buffers<T>& y, index_t i,
                         DeviceStatus* status) {
  const int lane = threadIdx.x % kWarpSize;
  const RhsLanes<R> lanes(lane);
  const int my_r = lanes.r;  // the right-hand side whose total warp_sum_multi gives this lane
  const bool finisher = lanes.slot == 0 && my_r < rhs.nr;
  const index_t ui = caller_row(L, i);
  const T bi = finisher ? rhs.b[ui + std::int64_t(my_r) * rhs.ldb] : T(0);
  const T d = L.diag[i];
  T sum[R] = {};
  Backoff backoff;
  bool abort = false;
  const std::int32_t end = L.ptr[i + 1];
  for (std::int32_t base = L.ptr[i]; base < end && !abort; base += kWarpSize) {
    const std::int32_t k = base + lane;
    bool have = k >= end;
    T* yc = have ? nullptr : y.cur + L.ind[k];
    T v[R] = {};
    while (true) {
      if (!have) have = try_values(yc, y.stride, rhs.nr, v);
      if (__all_sync(kFullMask, have)) break;
      abort = __any_sync(kFullMask, !backoff.pause(status, i));
      if (abort) break;
    }
    if (k < end) {
      const T a = L.val[k];
#pragma unroll
      for (int r = 0; r < R; ++r) sum[r] += a * v[r];
    }
  }
  const T total = warp_sum_multi(sum, lane);
  if (finisher) {
    const T value = (bi - total) / d;
    store_relaxed(&y.cur[my_r * y.stride + i], value);
    rhs.x[ui + std::int64_t(my_r) * rhs.ldx] = value;
  }
  if (lane < R) y.next[lane * y.stride + i] = Sentinel<T>::value();
}

// A thread per row of a 32-row chunk, writing-first: in every pass each unsolved lane takes as many of its
// ready entries as it can, in column order; entries of earlier chunks are polled in memory (one load per
// lane per pass, all lanes together), then entries inside the chunk are shuffled from the producing lanes,
// step after step while any lane can take one. A lane writes its unknown the moment its last entry is in.
// The lowest unsolved lane only waits on earlier chunks or on lanes below it, so the loop always
// progresses; a pass in which no lane progresses backs off, longer when the wait is far (kFarSleepNs).
template <typename T, int R, int Batch>
__device__ void thread_chunk(const LowerPart<T>& L, const RhsPass<T>& rhs, const Buffers<T>& y, index_t first,
                             DeviceStatus* status) {
  const int lane = threadIdx.x % kWarpSize;
  const index_t i = first + lane;
  const bool active = i < L.n;
  std::int32_t k = active ? L.ptr[i] : 0;
  const std::int32_t end = active ? L.ptr[i + 1] : 0;
  // acc: b minus the entries taken while the row is unsolved, its solution once solved (what the lanes
  // above shuffle out). b and the diagonal are read before waiting, off the critical path.
  T acc[R];
  const index_t ui = caller_row(L, active ? i : 0);
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = active && r < rhs.nr ? rhs.b[ui + std::int64_t(r) * rhs.ldb] : T(0);
  const T d = active ? L.diag[i] : T(1);
  bool solved = !active;
  auto finish = [&] {
#pragma unroll
    for (int r = 0; r < R; ++r) acc[r] /= d;
    publish(L, rhs, y, i, acc);
    solved = true;
  };
  if (active && k == end) finish();
  unsigned ready = __ballot_sync(kFullMask, solved);
  bool waiting = false;  // R > 1: the entry at k was not solved at its last full read
  Backoff backoff;
  bool quiet = false;          // the last pass took nothing
  std::int32_t probe_k = -1;   // the entry whose probe row is `probe`
  index_t probe = -1;          // the last dependency of the row at entry probe_k (-1: that row has none)
  while (ready != kFullMask) {
    bool progressed = false;
    const unsigned below = (1u << lane) - 1u;
    const bool lowest = (ready & below) == below;  // every lane below is solved: the chunk waits for this one
    // After a quiet pass the lowest lane reads its probe row beside its own poll (both loads in flight).
    const bool probing = quiet && lowest && !solved && k < end;
    T probed = T(0);
    if (probing) {
      if (probe_k != k) {
        const index_t j = L.ind[k];
        const std::int32_t begin_j = L.ptr[j], end_j = L.ptr[j + 1];
        probe = end_j > begin_j ? L.ind[end_j - 1] : -1;
        probe_k = k;
      }
      if (probe >= 0) probed = load_relaxed(y.cur + probe);
    }
    // Entries of earlier chunks that are ready now.
    if constexpr (R == 1 && Batch > 1) {
      // Level order (fused_level): the entries of a row come from the levels just below it and mostly
      // arrive together, so the lane reads up to Batch of them with independent loads, one round trip for
      // all, and takes the ready ones in order.
      while (!solved && k < end) {
        index_t c[Batch];
#pragma unroll
        for (int t = 0; t < Batch; ++t) c[t] = k + t < end ? L.ind[k + t] : first;
        int nb = 0;  // the entries of earlier chunks among the next Batch
#pragma unroll
        for (int t = 0; t < Batch; ++t)
          if (nb == t && c[t] < first) nb = t + 1;
        if (nb == 0) break;
        T v[Batch] = {};
#pragma unroll
        for (int t = 0; t < Batch; ++t)
          if (t < nb) v[t] = load_relaxed(y.cur + c[t]);
        int taken = 0;
#pragma unroll
        for (int t = 0; t < Batch; ++t)
          if (taken == t && t < nb && !Sentinel<T>::is(v[t])) {
            acc[0] -= L.val[k + t] * v[t];
            taken = t + 1;
          }
        k += taken;
        progressed = progressed || taken > 0;
        if (taken < nb) break;
      }
    } else {
      while (!solved && k < end && L.ind[k] < first) {
        T* yc = y.cur + L.ind[k];
        // R > 1: a lane that waits on this entry, and that the chunk does not wait for yet, polls only the
        // entry's first right-hand side and reads all R once that one is there.
        if (R > 1 && waiting && !lowest && Sentinel<T>::is(load_relaxed(yc))) break;
        T v[R];
        if (!try_values(yc, y.stride, rhs.nr, v)) {
          waiting = true;
          break;
        }
        const T a = L.val[k];
#pragma unroll
        for (int r = 0; r < R; ++r) acc[r] -= a * v[r];
        waiting = false;
        progressed = true;
        ++k;
      }
    }
    if (!solved && k == end) finish();
    ready = __ballot_sync(kFullMask, solved);
    // Entries inside the chunk, one shuffle step at a time (the shuffle needs every lane), while some lane
    // can take one; at most kWarpSize steps per pass, so that a dense chunk still polls now and then.
#pragma unroll 1
    for (int step = 0; step < kWarpSize; ++step) {
      int src = lane;
      bool take = false;
      T a = T(0);
      if (!solved && k < end && L.ind[k] >= first) {
        src = L.ind[k] - first;
        take = (ready >> src) & 1u;
        a = L.val[k];
      }
      if (!__any_sync(kFullMask, take)) break;
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const T v = __shfl_sync(kFullMask, acc[r], src);
        if (take) acc[r] -= a * v;
      }
      if (take) ++k, progressed = true;
      if (!solved && k == end) finish();
      ready = __ballot_sync(kFullMask, solved);
    }
    const bool far = probing && probe >= 0 && Sentinel<T>::is(probed);
    backoff.cap = __any_sync(kFullMask, far) ? kFarSleepNs : Backoff::kShortSleepNs;
    quiet = !__any_sync(kFullMask, progressed);
    if (!quiet) {
      backoff.reset();
    } else if (__any_sync(kFullMask, !backoff.pause(status, i))) {
      // Gave up (the error is reported): write what there is so that no waiter hangs on this chunk.
      if (!solved) finish();
    }
    ready = __ballot_sync(kFullMask, solved);
  }
}

// Registers for six blocks per SM with one right-hand side in index order (40; ptxas, FP64), five in level
// order (47: the batched reads), three for R = kRhsPerPass (80). Level order then runs one block per SM
// (one_block_per_sm below).
template <typename T, int R, int Batch>
__global__ void __launch_bounds__(kBlockThreads, R == 1 ? (Batch > 1 ? 5 : 6) : 3)
    fused_kernel(LowerPart<T> L, const std::int32_t* items, int nitems, Buffers<T> y, RhsPass<T> rhs, Schedule s) {
  const int ticket = block_ticket(s.tickets);
  const int item = ticket * kBlockWarps + threadIdx.x / kWarpSize;
  if (item < nitems) {
    const std::int32_t code = items[item];
    if (code & kWarpRowBit)
      warp_row<T, R>(L, rhs, y, code & ~kWarpRowBit, s.status);
    else
      thread_chunk<T, R, Batch>(L, rhs, y, code, s.status);
  }
  block_finished(s.tickets, gridDim.x);
}

/// Level order keeps one block per SM: it asks for more than half of an SM's shared memory (unused), so no
/// second block fits. Fewer waiting warps make every hand-off faster, and in level order the 132 resident
/// blocks still hold the next several levels of a 3D grid (H100, docs/benchmarks/sptrsv.md, version 11:
/// lap3d7 128^3 0.863 -> 0.789 ms, lap3d27 128^3 2.53 -> 2.26, lap2d9 64x16384 39.3 -> 30.9; two to four
/// blocks per SM were slower than five). Index order needs every resident warp (version 9).
template <typename T, int R, int Batch>
int one_block_per_sm() {
  static const int bytes = [] {
    int device = 0, per_sm = 0, per_block = 0;
    cuda_check(cudaGetDevice(&device), "cudaGetDevice", __FILE__, __LINE__);
    cuda_check(cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device),
               "cudaDeviceGetAttribute", __FILE__, __LINE__);
    cuda_check(cudaDeviceGetAttribute(&per_block, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
               "cudaDeviceGetAttribute", __FILE__, __LINE__);
    const int wanted = std::min(per_sm / 2 + 1, per_block);
    cuda_check(cudaFuncSetAttribute(fused_kernel<T, R, Batch>, cudaFuncAttributeMaxDynamicSharedMemorySize, wanted),
               "cudaFuncSetAttribute(fused_kernel)", __FILE__, __LINE__);
    return wanted;
  }();
  return bytes;
}

}  // namespace

template <typename T>
void solve_fused(const LowerPart<T>& L, const std::int32_t* items, int nitems, T* y_cur, T* y_next,
                 const RhsPass<T>& rhs, const Schedule& s, cudaStream_t stream) {
  if (nitems == 0) return;
  const int blocks = blocks_for(nitems, kBlockWarps);
  const Buffers<T> y{y_cur, y_next, L.n};
  const bool level_order = L.perm != nullptr;
  if (rhs.nr > 1) {
    const int bytes = level_order ? one_block_per_sm<T, kRhsPerPass, 1>() : 0;
    fused_kernel<T, kRhsPerPass, 1><<<blocks, kBlockThreads, bytes, stream>>>(L, items, nitems, y, rhs, s);
  } else if (level_order) {
    const int bytes = one_block_per_sm<T, 1, kLevelOrderBatch>();
    fused_kernel<T, 1, kLevelOrderBatch><<<blocks, kBlockThreads, bytes, stream>>>(L, items, nitems, y, rhs, s);
  } else {
    fused_kernel<T, 1, 1><<<blocks, kBlockThreads, 0, stream>>>(L, items, nitems, y, rhs, s);
  }
  check_launch("fused_kernel");
}

template void solve_fused<double>(const LowerPart<double>&, const std::int32_t*, int, double*, double*,
                                  const RhsPass<double>&, const Schedule&, cudaStream_t);
template void solve_fused<float>(const LowerPart<float>&, const std::int32_t*, int, float*, float*,
                                 const RhsPass<float>&, const Schedule&, cudaStream_t);

}  // namespace spade::kernels::sptrsv
