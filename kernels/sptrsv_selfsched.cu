// Self-scheduled sparse triangular solves in one launch, with no global barrier:
//  - SLFR and SLFC (R. Li 2017): a warp per unknown, warps mapped to unknowns in level order (jlev), so a
//    warp waits only on unknowns of lower levels, which were handed out before it;
//  - syncfree (W. Liu, A. Li, J. Hogg, I. Duff, B. Vinter, Euro-Par 2016): a warp per column in index
//    order; updates to columns of the same thread block go to a scratchpad (shared-memory) copy of
//    left_sum and of the in-degree counter, the rest to global memory.
// Work is handed out by block tickets (kernels/sync.cuh), never by blockIdx. Flags and counters are never
// reset between solves: launch number `epoch` waits for flag == epoch (SLFR) or counter == epoch * degree
// (SLFC, syncfree), so each solve needs no memset.
//
// Right-hand sides: the waiting is the same for any number of them; for the arithmetic the lanes are
// split among the R right-hand sides of the pass (RhsLanes: for R = 8, four lanes per right-hand side), so
// a lane does one load or one atomic per entry, as in a one-rhs solve, and sums are reduced over four
// lanes instead of over the warp once per right-hand side.
#include "kernels/sptrsv_common.cuh"

namespace spade::kernels::sptrsv {
namespace {

// SLFR: the lanes wait (relaxed polls, then an acquire fence) on the flags of the row's columns, 32 at a
// time; after a __syncwarp every lane has seen every column solved, and the lanes of right-hand side r
// gather their share of the row; lane slot 0 of r writes x, and lane 0 publishes the row with a release
// store after a __syncwarp.
template <typename T, int R>
__global__ void __launch_bounds__(kBlockThreads) slfr_kernel(LowerPart<T> L, const std::int32_t* jlev, int* flag,
                                                             int epoch, RhsPass<T> rhs, Schedule s) {
  const int ticket = block_ticket(s.tickets);
  const int lane = threadIdx.x % kWarpSize;
  const RhsLanes<R> lanes(lane);
  const std::int32_t pos = ticket * kBlockWarps + threadIdx.x / kWarpSize;
  if (pos < L.n) {
    const index_t i = jlev[pos];
    const index_t ui = caller_index(i, L.n, L.reversed);
    const bool mine = lanes.r < rhs.nr;
    const std::int64_t xcol = std::int64_t(lanes.r) * rhs.ldx;
    // b and the diagonal are read before waiting, off the critical path.
    const T d = L.diag[i];
    const T bi = mine && lanes.slot == 0 ? rhs.b[ui + std::int64_t(lanes.r) * rhs.ldb] : T(0);
    const std::int32_t begin = L.ptr[i], end = L.ptr[i + 1];
    for (std::int32_t k = begin + lane; k < end; k += kWarpSize)
      if (!wait_at_least(&flag[L.ind[k]], epoch, s.status, i)) break;
    __syncwarp();
    T sum = T(0);
    if (mine)
      for (std::int32_t k = begin + lanes.slot; k < end; k += RhsLanes<R>::kSlots)
        sum += L.val[k] * rhs.x[caller_index(L.ind[k], L.n, L.reversed) + xcol];
    sum = RhsLanes<R>::slot_sum(sum);
    if (mine && lanes.slot == 0) rhs.x[ui + xcol] = (bi - sum) / d;
    __syncwarp();
    if (lane == 0) release_store(&flag[i], epoch);
  }
  block_finished(s.tickets, gridDim.x);
}

// Many right-hand sides: the lanes of every right-hand side have added their updates of a column; after a
// __syncwarp (which orders the other lanes' atomics before this lane's fence, whose release covers them,
// as for the flag of SLFR) and one release fence, the lanes of the first right-hand side move the
// counters of the column's rows, one increment per entry.
template <int R, bool kScratchpad, typename T>
__device__ inline void publish_counters(const LowerPart<T>& L, std::int32_t begin, std::int32_t end,
                                        const RhsLanes<R>& lanes, index_t base, int* s_count, int* counter) {
  if (end == begin) return;  // uniform over the warp
  __syncwarp();
  cuda::atomic_thread_fence(cuda::memory_order_release, cuda::thread_scope_device);
  if (lanes.r != 0) return;
  for (std::int32_t k = begin + lanes.slot; k < end; k += RhsLanes<R>::kSlots) {
    const index_t i = L.ind[k];
    if (kScratchpad && i < base + kBlockWarps)
      cuda::atomic_ref<int, cuda::thread_scope_block>(s_count[i - base]).fetch_add(1, cuda::memory_order_relaxed);
    else
      device_atomic_int(counter[i]).fetch_add(1, cuda::memory_order_relaxed);
  }
}

// SLFC (jlev != nullptr) and syncfree (kScratchpad): lane 0 waits until the in-degree counter(s) show every
// update arrived; lane slot 0 of right-hand side r finishes it from b and left_sum (resetting left_sum for
// the next solve) and shares it with the other lanes of r; the lanes of r add their share of the column
// times x into left_sum of the rows below (one atomic per entry and lane), then the counters move
// (publish_counters; with one right-hand side each lane publishes its own entries, as the papers do).
template <typename T, int R, bool kScratchpad>
__global__ void __launch_bounds__(kBlockThreads)
    column_kernel(LowerPart<T> L, const std::int32_t* jlev, const std::int32_t* global_deg,
                  const std::int32_t* local_deg, int* counter, int epoch, T* left_sum, RhsPass<T> rhs, Schedule s) {
  __shared__ T s_left[kScratchpad ? kBlockWarps * R : 1];
  __shared__ int s_count[kScratchpad ? kBlockWarps : 1];
  if (kScratchpad && threadIdx.x < kBlockWarps * R) s_left[threadIdx.x] = T(0);
  if (kScratchpad && threadIdx.x < kBlockWarps) s_count[threadIdx.x] = 0;
  const int ticket = block_ticket(s.tickets);  // its __syncthreads also orders the scratchpad zeroing
  const int lane = threadIdx.x % kWarpSize;
  const RhsLanes<R> lanes(lane);
  const index_t base = ticket * kBlockWarps;
  const std::int32_t pos = base + threadIdx.x / kWarpSize;
  if (pos < L.n) {
    const index_t j = kScratchpad ? pos : jlev[pos];
    const index_t uj = caller_index(j, L.n, L.reversed);
    const bool mine = lanes.r < rhs.nr;
    const bool finisher = mine && lanes.slot == 0;
    // b and the diagonal are read before waiting, off the critical path.
    const T d = L.diag[j];
    const T bj = finisher ? rhs.b[uj + std::int64_t(lanes.r) * rhs.ldb] : T(0);
    if (lane == 0) {
      if (wait_at_least(&counter[j], epoch * global_deg[j], s.status, j) && kScratchpad)
        wait_at_least<cuda::thread_scope_block>(&s_count[j - base], local_deg[j], s.status, j);
    }
    __syncwarp();
    T value = T(0);
    if (finisher) {
      T left = load_relaxed(&left_sum[std::int64_t(j) * R + lanes.r]);
      if (kScratchpad)
        left += cuda::atomic_ref<T, cuda::thread_scope_block>(s_left[(j - base) * R + lanes.r])
                    .load(cuda::memory_order_relaxed);
      left_sum[std::int64_t(j) * R + lanes.r] = T(0);
      value = (bj - left) / d;
      rhs.x[uj + std::int64_t(lanes.r) * rhs.ldx] = value;
    }
    const T xj = __shfl_sync(kFullMask, value, lanes.r * RhsLanes<R>::kSlots);
    const std::int32_t begin = L.ptr[j], end = L.ptr[j + 1];
    if constexpr (R == 1) {
      // One right-hand side: each lane publishes its own entries, its atomics first, then (scratchpad)
      // a release increment per entry or one release fence before its global counter increments.
      bool any_global = false;
      for (std::int32_t k = begin + lane; k < end; k += kWarpSize) {
        const index_t i = L.ind[k];
        const T update = L.val[k] * xj;
        if (kScratchpad && i < base + kBlockWarps) {
          atomicAdd(&s_left[i - base], update);
          cuda::atomic_ref<int, cuda::thread_scope_block>(s_count[i - base]).fetch_add(1, cuda::memory_order_release);
        } else {
          atomicAdd(&left_sum[i], update);
          any_global = true;
        }
      }
      if (any_global) {
        cuda::atomic_thread_fence(cuda::memory_order_release, cuda::thread_scope_device);
        for (std::int32_t k = begin + lane; k < end; k += kWarpSize) {
          const index_t i = L.ind[k];
          if (!(kScratchpad && i < base + kBlockWarps))
            device_atomic_int(counter[i]).fetch_add(1, cuda::memory_order_relaxed);
        }
      }
    } else {
      if (mine)
        for (std::int32_t k = begin + lanes.slot; k < end; k += RhsLanes<R>::kSlots) {
          const index_t i = L.ind[k];
          const T update = L.val[k] * xj;
          if (kScratchpad && i < base + kBlockWarps)
            atomicAdd(&s_left[(i - base) * R + lanes.r], update);
          else
            atomicAdd(&left_sum[std::int64_t(i) * R + lanes.r], update);
        }
      publish_counters<R, kScratchpad>(L, begin, end, lanes, base, s_count, counter);
    }
  }
  block_finished(s.tickets, gridDim.x);
}

}  // namespace

template <typename T>
void solve_slfr(const LowerPart<T>& L, const std::int32_t* jlev, int* flag, int epoch, const RhsPass<T>& rhs,
                const Schedule& s, cudaStream_t stream) {
  if (L.n == 0) return;
  const int blocks = blocks_for(L.n, kBlockWarps);
  if (rhs.nr == 1)
    slfr_kernel<T, 1><<<blocks, kBlockThreads, 0, stream>>>(L, jlev, flag, epoch, rhs, s);
  else
    slfr_kernel<T, kRhsPerPass><<<blocks, kBlockThreads, 0, stream>>>(L, jlev, flag, epoch, rhs, s);
  check_launch("slfr_kernel");
}

template <typename T>
void solve_columns(const LowerPart<T>& L, const std::int32_t* jlev, const std::int32_t* global_deg,
                   const std::int32_t* local_deg, int* counter, int epoch, T* left_sum, const RhsPass<T>& rhs,
                   const Schedule& s, cudaStream_t stream) {
  if (L.n == 0) return;
  const int blocks = blocks_for(L.n, kBlockWarps);
  const bool scratchpad = jlev == nullptr;
  if (rhs.nr == 1) {
    if (scratchpad)
      column_kernel<T, 1, true><<<blocks, kBlockThreads, 0, stream>>>(L, jlev, global_deg, local_deg, counter, epoch,
                                                                      left_sum, rhs, s);
    else
      column_kernel<T, 1, false><<<blocks, kBlockThreads, 0, stream>>>(L, jlev, global_deg, local_deg, counter,
                                                                       epoch, left_sum, rhs, s);
  } else {
    if (scratchpad)
      column_kernel<T, kRhsPerPass, true><<<blocks, kBlockThreads, 0, stream>>>(L, jlev, global_deg, local_deg,
                                                                                counter, epoch, left_sum, rhs, s);
    else
      column_kernel<T, kRhsPerPass, false><<<blocks, kBlockThreads, 0, stream>>>(L, jlev, global_deg, local_deg,
                                                                                 counter, epoch, left_sum, rhs, s);
  }
  check_launch("column_kernel");
}

template void solve_slfr<double>(const LowerPart<double>&, const std::int32_t*, int*, int, const RhsPass<double>&,
                                 const Schedule&, cudaStream_t);
template void solve_slfr<float>(const LowerPart<float>&, const std::int32_t*, int*, int, const RhsPass<float>&,
                                const Schedule&, cudaStream_t);
template void solve_columns<double>(const LowerPart<double>&, const std::int32_t*, const std::int32_t*,
                                    const std::int32_t*, int*, int, double*, const RhsPass<double>&, const Schedule&,
                                    cudaStream_t);
template void solve_columns<float>(const LowerPart<float>&, const std::int32_t*, const std::int32_t*,
                                   const std::int32_t*, int*, int, float*, const RhsPass<float>&, const Schedule&,
                                   cudaStream_t);

}  // namespace spade::kernels::sptrsv
