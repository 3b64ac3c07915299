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

namespace spade::kernels::sptrsv {
namespace {

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
  const index_t ui = caller_index(i, L.n, L.reversed);
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
  const index_t ui = caller_index(i, L.n, L.reversed);
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
// lane per pass, all lanes together), entries inside the chunk are shuffled from the producing lane once
// the ballot shows it solved. A lane writes its unknown the moment its last entry is in. The lowest
// unsolved lane only waits on earlier chunks or on lanes below it, so the loop always progresses; a pass in
// which no lane progresses backs off.
template <typename T, int R>
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
  const index_t ui = caller_index(active ? i : 0, L.n, L.reversed);
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
  while (ready != kFullMask) {
    bool progressed = false;
    const unsigned below = (1u << lane) - 1u;
    const bool lowest = (ready & below) == below;  // every lane below is solved: the chunk waits for this one
    // Entries of earlier chunks that are ready now.
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
    // At most one entry inside the chunk per pass: the shuffle needs every lane.
    int src = lane;
    bool take = false;
    T a = T(0);
    if (!solved && k < end && L.ind[k] >= first) {
      src = L.ind[k] - first;
      take = (ready >> src) & 1u;
      a = L.val[k];
    }
    if (__any_sync(kFullMask, take)) {
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const T v = __shfl_sync(kFullMask, acc[r], src);
        if (take) acc[r] -= a * v;
      }
    }
    if (take) ++k, progressed = true;
    if (!solved && k == end) finish();
    if (__any_sync(kFullMask, progressed)) {
      backoff.reset();
    } else if (__any_sync(kFullMask, !backoff.pause(status, i))) {
      // Gave up (the error is reported): write what there is so that no waiter hangs on this chunk.
      if (!solved) finish();
    }
    ready = __ballot_sync(kFullMask, solved);
  }
}

template <typename T, int R>
__global__ void __launch_bounds__(kBlockThreads)
    fused_kernel(LowerPart<T> L, const std::int32_t* items, int nitems, Buffers<T> y, RhsPass<T> rhs, Schedule s) {
  const int ticket = block_ticket(s.tickets);
  const int item = ticket * kBlockWarps + threadIdx.x / kWarpSize;
  if (item < nitems) {
    const std::int32_t code = items[item];
    if (code & kWarpRowBit)
      warp_row<T, R>(L, rhs, y, code & ~kWarpRowBit, s.status);
    else
      thread_chunk<T, R>(L, rhs, y, code, s.status);
  }
  block_finished(s.tickets, gridDim.x);
}

}  // namespace

template <typename T>
void solve_fused(const LowerPart<T>& L, const std::int32_t* items, int nitems, T* y_cur, T* y_next,
                 const RhsPass<T>& rhs, const Schedule& s, cudaStream_t stream) {
  if (nitems == 0) return;
  const int blocks = blocks_for(nitems, kBlockWarps);
  const Buffers<T> y{y_cur, y_next, L.n};
  if (rhs.nr == 1)
    fused_kernel<T, 1><<<blocks, kBlockThreads, 0, stream>>>(L, items, nitems, y, rhs, s);
  else
    fused_kernel<T, kRhsPerPass><<<blocks, kBlockThreads, 0, stream>>>(L, items, nitems, y, rhs, s);
  check_launch("fused_kernel");
}

template void solve_fused<double>(const LowerPart<double>&, const std::int32_t*, int, double*, double*,
                                  const RhsPass<double>&, const Schedule&, cudaStream_t);
template void solve_fused<float>(const LowerPart<float>&, const std::int32_t*, int, float*, float*,
                                 const RhsPass<float>&, const Schedule&, cudaStream_t);

}  // namespace spade::kernels::sptrsv
