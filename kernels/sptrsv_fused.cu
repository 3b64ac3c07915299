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
#include "kernels/sptrsv_common.cuh"

namespace spade::kernels::sptrsv {
namespace {

template <typename T, int R>
__device__ inline void publish(const LowerPart<T>& L, const RhsPass<T>& rhs, T* y_cur, T* y_next, index_t i,
                               const T (&v)[R]) {
  const index_t ui = caller_index(i, L.n, L.reversed);
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if (r < rhs.nr) {
      store_relaxed(&y_cur[std::int64_t(i) * R + r], v[r]);
      rhs.x[ui + std::int64_t(r) * rhs.ldx] = v[r];
    }
    y_next[std::int64_t(i) * R + r] = Sentinel<T>::value();
  }
}

/// What a row needs besides its dependencies: read before waiting, so that the load latency is not on the
/// critical path of the dependency chain.
template <typename T, int R>
struct RowInputs {
  T b[R];
  T d;
};

template <typename T, int R>
__device__ inline RowInputs<T, R> load_inputs(const LowerPart<T>& L, const RhsPass<T>& rhs, index_t i) {
  RowInputs<T, R> in;
  const index_t ui = caller_index(i, L.n, L.reversed);
#pragma unroll
  for (int r = 0; r < R; ++r) in.b[r] = r < rhs.nr ? rhs.b[ui + std::int64_t(r) * rhs.ldb] : T(0);
  in.d = L.diag[i];
  return in;
}

template <typename T, int R>
__device__ inline void solve_row(const RowInputs<T, R>& in, const T (&sum)[R], T (&v)[R]) {
#pragma unroll
  for (int r = 0; r < R; ++r) v[r] = (in.b[r] - sum[r]) / in.d;
}

// A warp per row: the lanes take 32 entries at a time and poll them together (one warp-wide load per
// poll, never 32 lanes spinning apart), then reduce.
template <typename T, int R>
__device__ void warp_row(const LowerPart<T>& L, const RhsPass<T>& rhs, T* y_cur, T* y_next, index_t i,
                         DeviceStatus* status) {
  const int lane = threadIdx.x % kWarpSize;
  RowInputs<T, R> in{};
  if (lane == 0) in = load_inputs<T, R>(L, rhs, i);
  T sum[R] = {};
  Backoff backoff;
  bool abort = false;
  for (std::int32_t base = L.ptr[i]; base < L.ptr[i + 1] && !abort; base += kWarpSize) {
    const std::int32_t k = base + lane;
    bool have = k >= L.ptr[i + 1];
    T* yc = have ? nullptr : &y_cur[std::int64_t(L.ind[k]) * R];
    T v[R] = {};
    while (true) {
      if (!have) have = try_values(yc, rhs.nr, v);
      if (__all_sync(kFullMask, have)) break;
      abort = __any_sync(kFullMask, !backoff.pause(status, i));
      if (abort) break;
    }
    if (k < L.ptr[i + 1]) {
      const T a = L.val[k];
#pragma unroll
      for (int r = 0; r < R; ++r) sum[r] += a * v[r];
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r) sum[r] = warp_sum(sum[r]);
  if (lane == 0) {
    T v[R];
    solve_row(in, sum, v);
    publish(L, rhs, y_cur, y_next, i, v);
  }
}

// A thread per row of a 32-row chunk, writing-first: in every pass each unsolved lane takes as many of its
// ready entries as it can, in column order; entries of earlier chunks are polled in memory (one load per
// lane per pass, all lanes together), entries inside the chunk are shuffled from the producing lane once
// the ballot shows it solved. A lane writes its unknown the moment its last entry is in. The lowest
// unsolved lane only waits on earlier chunks or on lanes below it, so the loop always progresses; a pass in
// which no lane progresses backs off.
template <typename T, int R>
__device__ void thread_chunk(const LowerPart<T>& L, const RhsPass<T>& rhs, T* y_cur, T* y_next, index_t first,
                             DeviceStatus* status) {
  const int lane = threadIdx.x % kWarpSize;
  const index_t i = first + lane;
  const bool active = i < L.n;
  std::int32_t k = active ? L.ptr[i] : 0;
  const std::int32_t end = active ? L.ptr[i + 1] : 0;
  RowInputs<T, R> in{};
  if (active) in = load_inputs<T, R>(L, rhs, i);
  T sum[R] = {};
  T mine[R] = {};
  bool solved = !active;
  if (active && k == end) {
    solve_row(in, sum, mine);
    publish(L, rhs, y_cur, y_next, i, mine);
    solved = true;
  }
  unsigned ready = __ballot_sync(kFullMask, solved);
  Backoff backoff;
  while (ready != kFullMask) {
    bool progressed = false;
    // Entries of earlier chunks that are ready now.
    while (!solved && k < end && L.ind[k] < first) {
      T v[R];
      if (!try_values(&y_cur[std::int64_t(L.ind[k]) * R], rhs.nr, v)) break;
      const T a = L.val[k];
#pragma unroll
      for (int r = 0; r < R; ++r) sum[r] += a * v[r];
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
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const T v = __shfl_sync(kFullMask, mine[r], src);
      if (take) sum[r] += a * v;
    }
    if (take) ++k, progressed = true;
    if (!solved && k == end) {
      solve_row(in, sum, mine);
      publish(L, rhs, y_cur, y_next, i, mine);
      solved = true;
    }
    if (__any_sync(kFullMask, progressed)) {
      backoff.reset();
    } else if (__any_sync(kFullMask, !backoff.pause(status, i))) {
      // Gave up (the error is reported): write what there is so that no waiter hangs on this chunk.
      if (!solved) {
        solve_row(in, sum, mine);
        publish(L, rhs, y_cur, y_next, i, mine);
        solved = true;
      }
    }
    ready = __ballot_sync(kFullMask, solved);
  }
}

template <typename T, int R>
__global__ void __launch_bounds__(kBlockThreads)
    fused_kernel(LowerPart<T> L, const std::int32_t* items, int nitems, T* y_cur, T* y_next, RhsPass<T> rhs,
                 Schedule s) {
  const int ticket = block_ticket(s.tickets);
  const int item = ticket * kBlockWarps + threadIdx.x / kWarpSize;
  if (item < nitems) {
    const std::int32_t code = items[item];
    if (code & kWarpRowBit)
      warp_row<T, R>(L, rhs, y_cur, y_next, code & ~kWarpRowBit, s.status);
    else
      thread_chunk<T, R>(L, rhs, y_cur, y_next, code, s.status);
  }
  block_finished(s.tickets, gridDim.x);
}

}  // namespace

template <typename T>
void solve_fused(const LowerPart<T>& L, const std::int32_t* items, int nitems, T* y_cur, T* y_next,
                 const RhsPass<T>& rhs, const Schedule& s, cudaStream_t stream) {
  if (nitems == 0) return;
  const int blocks = blocks_for(nitems, kBlockWarps);
  if (rhs.nr == 1)
    fused_kernel<T, 1><<<blocks, kBlockThreads, 0, stream>>>(L, items, nitems, y_cur, y_next, rhs, s);
  else
    fused_kernel<T, kRhsPerPass><<<blocks, kBlockThreads, 0, stream>>>(L, items, nitems, y_cur, y_next, rhs, s);
  check_launch("fused_kernel");
}

template void solve_fused<double>(const LowerPart<double>&, const std::int32_t*, int, double*, double*,
                                  const RhsPass<double>&, const Schedule&, cudaStream_t);
template void solve_fused<float>(const LowerPart<float>&, const std::int32_t*, int, float*, float*,
                                 const RhsPass<float>&, const Schedule&, cudaStream_t);

}  // namespace spade::kernels::sptrsv
