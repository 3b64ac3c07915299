// Self-scheduled sparse triangular solves in one launch, with no global barrier:
//  - SLFR and SLFC (R. Li 2017): a warp per unknown, warps mapped to unknowns in level order (jlev), so a
//    warp waits only on unknowns of lower levels, which were handed out before it;
//  - syncfree (W. Liu, A. Li, J. Hogg, I. Duff, B. Vinter, Euro-Par 2016): a warp per column in index
//    order; updates to columns of the same thread block go to a scratchpad (shared-memory) copy of
//    left_sum and of the in-degree counter, the rest to global memory.
// Work is handed out by block tickets (kernels/sync.cuh), never by blockIdx. Flags and counters are never
// reset between solves: launch number `epoch` waits for flag == epoch (SLFR) or counter == epoch * degree
// (SLFC, syncfree), so each solve needs no memset.
#include "kernels/sptrsv_common.cuh"

namespace spade::kernels::sptrsv {
namespace {

// SLFR: every lane waits (relaxed polls, then an acquire fence) on the flags of its own columns, then the warp reduces; lane r writes
// right-hand side r and lane 0 publishes the row with a release store after a __syncwarp.
template <typename T, int R>
__global__ void __launch_bounds__(kBlockThreads) slfr_kernel(LowerPart<T> L, const std::int32_t* jlev, int* flag,
                                                             int epoch, RhsPass<T> rhs, Schedule s) {
  const int ticket = block_ticket(s.tickets);
  const int lane = threadIdx.x % kWarpSize;
  const std::int32_t pos = ticket * kBlockWarps + threadIdx.x / kWarpSize;
  if (pos < L.n) {
    const index_t i = jlev[pos];
    const index_t ui = caller_index(i, L.n, L.reversed);
    // b and the diagonal are read before waiting, off the critical path.
    const T d = L.diag[i];
    const T bi = lane < rhs.nr && lane < R ? rhs.b[ui + std::int64_t(lane) * rhs.ldb] : T(0);
    T sum[R] = {};
    for (std::int32_t k = L.ptr[i] + lane; k < L.ptr[i + 1]; k += kWarpSize) {
      const index_t c = L.ind[k];
      if (!wait_at_least(&flag[c], epoch, s.status, i)) break;
      const index_t uc = caller_index(c, L.n, L.reversed);
      const T a = L.val[k];
#pragma unroll
      for (int r = 0; r < R; ++r)
        if (r < rhs.nr) sum[r] += a * rhs.x[uc + std::int64_t(r) * rhs.ldx];
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const T total = warp_sum(sum[r]);
      if (lane == r && r < rhs.nr) rhs.x[ui + std::int64_t(r) * rhs.ldx] = (bi - total) / d;
    }
    __syncwarp();
    if (lane == 0) release_store(&flag[i], epoch);
  }
  block_finished(s.tickets, gridDim.x);
}

// SLFC (jlev != nullptr) and syncfree (kScratchpad): lane 0 waits until the in-degree counter(s) show every
// update arrived, lane r finishes right-hand side r from b and left_sum (resetting left_sum for the next
// solve), then the lanes add the column times x into left_sum of the rows below: all atomic adds of a lane
// first, one release fence, then the counter increments.
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
  const index_t base = ticket * kBlockWarps;
  const std::int32_t pos = base + threadIdx.x / kWarpSize;
  if (pos < L.n) {
    const index_t j = kScratchpad ? pos : jlev[pos];
    const index_t uj = caller_index(j, L.n, L.reversed);
    // b and the diagonal are read before waiting, off the critical path.
    const T d = L.diag[j];
    const T bj = lane < rhs.nr && lane < R ? rhs.b[uj + std::int64_t(lane) * rhs.ldb] : T(0);
    if (lane == 0) {
      if (wait_at_least(&counter[j], epoch * global_deg[j], s.status, j) && kScratchpad)
        wait_at_least<cuda::thread_scope_block>(&s_count[j - base], local_deg[j], s.status, j);
    }
    __syncwarp();
    T mine = T(0);
    if (lane < rhs.nr && lane < R) {
      T left = load_relaxed(&left_sum[std::int64_t(j) * R + lane]);
      if (kScratchpad) left += cuda::atomic_ref<T, cuda::thread_scope_block>(s_left[(j - base) * R + lane])
                                   .load(cuda::memory_order_relaxed);
      left_sum[std::int64_t(j) * R + lane] = T(0);
      mine = (bj - left) / d;
      rhs.x[uj + std::int64_t(lane) * rhs.ldx] = mine;
    }
    T xj[R];
#pragma unroll
    for (int r = 0; r < R; ++r) xj[r] = __shfl_sync(kFullMask, mine, r);
    const std::int32_t begin = L.ptr[j], end = L.ptr[j + 1];
    bool any_global = false;
    for (std::int32_t k = begin + lane; k < end; k += kWarpSize) {
      const index_t i = L.ind[k];
      const T a = L.val[k];
      const bool local = kScratchpad && i < base + kBlockWarps;
#pragma unroll
      for (int r = 0; r < R; ++r) {
        if (r >= rhs.nr) continue;
        if (local)
          atomicAdd(&s_left[(i - base) * R + r], a * xj[r]);
        else
          atomicAdd(&left_sum[std::int64_t(i) * R + r], a * xj[r]);
      }
      if (local)
        cuda::atomic_ref<int, cuda::thread_scope_block>(s_count[i - base]).fetch_add(1, cuda::memory_order_release);
      else
        any_global = true;
    }
    if (any_global) {
      cuda::atomic_thread_fence(cuda::memory_order_release, cuda::thread_scope_device);
      for (std::int32_t k = begin + lane; k < end; k += kWarpSize) {
        const index_t i = L.ind[k];
        if (!(kScratchpad && i < base + kBlockWarps))
          device_atomic_int(counter[i]).fetch_add(1, cuda::memory_order_relaxed);
      }
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
