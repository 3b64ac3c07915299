// Level-scheduled sparse triangular solves (R. Li, "On parallel solution of sparse triangular linear
// systems in CUDA", 2017): the unknowns of one level are independent, so each level is one launch and the
// launch boundary is the only synchronization. LEVR: a warp per row of CSR gathers its row; LEVC: a warp
// per column of CSC finishes its unknown and scatters the updates into x with atomics.
#include "kernels/sptrsv_common.cuh"

namespace spade::kernels::sptrsv {
namespace {

template <typename T, int R>
__global__ void levr_kernel(LowerPart<T> L, const std::int32_t* jlev, std::int32_t begin, std::int32_t end,
                            RhsPass<T> rhs) {
  const int lane = threadIdx.x % kWarpSize;
  const std::int32_t pos = begin + (blockIdx.x * blockDim.x + threadIdx.x) / kWarpSize;
  if (pos >= end) return;
  const index_t i = jlev[pos];
  T sum[R] = {};
  for (std::int32_t k = L.ptr[i] + lane; k < L.ptr[i + 1]; k += kWarpSize) {
    const index_t c = caller_index(L.ind[k], L.n, L.reversed);
    const T a = L.val[k];
#pragma unroll
    for (int r = 0; r < R; ++r)
      if (r < rhs.nr) sum[r] += a * rhs.x[c + std::int64_t(r) * rhs.ldx];
  }
  const index_t ui = caller_index(i, L.n, L.reversed);
  const T d = L.diag[i];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const T s = warp_sum(sum[r]);
    if (lane == r && r < rhs.nr) rhs.x[ui + std::int64_t(r) * rhs.ldx] = (rhs.b[ui + std::int64_t(r) * rhs.ldb] - s) / d;
  }
}

template <typename T, int R>
__global__ void levc_kernel(LowerPart<T> L, const std::int32_t* jlev, std::int32_t begin, std::int32_t end,
                            RhsPass<T> rhs) {
  const int lane = threadIdx.x % kWarpSize;
  const std::int32_t pos = begin + (blockIdx.x * blockDim.x + threadIdx.x) / kWarpSize;
  if (pos >= end) return;
  const index_t j = jlev[pos];
  const index_t uj = caller_index(j, L.n, L.reversed);
  const T d = L.diag[j];
  // x[j] holds b[j] minus every update of the earlier levels; all lanes read it before lane r rewrites it.
  T xj[R];
#pragma unroll
  for (int r = 0; r < R; ++r) xj[r] = r < rhs.nr ? rhs.x[uj + std::int64_t(r) * rhs.ldx] / d : T(0);
  __syncwarp();
#pragma unroll
  for (int r = 0; r < R; ++r)
    if (lane == r && r < rhs.nr) rhs.x[uj + std::int64_t(r) * rhs.ldx] = xj[r];
  for (std::int32_t k = L.ptr[j] + lane; k < L.ptr[j + 1]; k += kWarpSize) {
    const index_t ui = caller_index(L.ind[k], L.n, L.reversed);
    const T a = L.val[k];
#pragma unroll
    for (int r = 0; r < R; ++r)
      if (r < rhs.nr) atomicAdd(&rhs.x[ui + std::int64_t(r) * rhs.ldx], -a * xj[r]);
  }
}

constexpr int kLevelWarps = 8;

template <typename T, int R, typename Kernel>
void run_levels(Kernel kernel, const LowerPart<T>& L, const std::int32_t* jlev, const std::int32_t* level_ptr_host,
                int nlev, const RhsPass<T>& rhs, cudaStream_t stream) {
  for (int l = 0; l < nlev; ++l) {
    const std::int32_t begin = level_ptr_host[l], end = level_ptr_host[l + 1];
    kernel<<<blocks_for(end - begin, kLevelWarps), kLevelWarps * kWarpSize, 0, stream>>>(L, jlev, begin, end, rhs);
    check_launch("level kernel");
  }
}

}  // namespace

template <typename T>
void solve_levr(const LowerPart<T>& L, const std::int32_t* jlev, const std::int32_t* level_ptr_host, int nlev,
                const RhsPass<T>& rhs, cudaStream_t stream) {
  if (rhs.nr == 1)
    run_levels<T, 1>(levr_kernel<T, 1>, L, jlev, level_ptr_host, nlev, rhs, stream);
  else
    run_levels<T, kRhsPerPass>(levr_kernel<T, kRhsPerPass>, L, jlev, level_ptr_host, nlev, rhs, stream);
}

template <typename T>
void solve_levc(const LowerPart<T>& L, const std::int32_t* jlev, const std::int32_t* level_ptr_host, int nlev,
                const RhsPass<T>& rhs, cudaStream_t stream) {
  if (rhs.x != rhs.b)
    cuda_check(cudaMemcpy2DAsync(rhs.x, sizeof(T) * rhs.ldx, rhs.b, sizeof(T) * rhs.ldb, sizeof(T) * L.n, rhs.nr,
                                 cudaMemcpyDeviceToDevice, stream),
               "cudaMemcpy2DAsync", __FILE__, __LINE__);
  if (rhs.nr == 1)
    run_levels<T, 1>(levc_kernel<T, 1>, L, jlev, level_ptr_host, nlev, rhs, stream);
  else
    run_levels<T, kRhsPerPass>(levc_kernel<T, kRhsPerPass>, L, jlev, level_ptr_host, nlev, rhs, stream);
}

template void solve_levr<double>(const LowerPart<double>&, const std::int32_t*, const std::int32_t*, int,
                                 const RhsPass<double>&, cudaStream_t);
template void solve_levr<float>(const LowerPart<float>&, const std::int32_t*, const std::int32_t*, int,
                                const RhsPass<float>&, cudaStream_t);
template void solve_levc<double>(const LowerPart<double>&, const std::int32_t*, const std::int32_t*, int,
                                 const RhsPass<double>&, cudaStream_t);
template void solve_levc<float>(const LowerPart<float>&, const std::int32_t*, const std::int32_t*, int,
                                const RhsPass<float>&, cudaStream_t);

}  // namespace spade::kernels::sptrsv
