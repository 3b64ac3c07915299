// level_block for levels too large for the shared-memory stages of kernels/sptrsv_block.cu: a thread
// block per right-hand side walks the level sets (R. Li 2017) of the part renumbered in level order, a
// __syncthreads between levels (J. D. Hogg 2013), and reads each level's data from device memory into
// registers ahead of it:
// at level l each group of lanes loads the row pointers and the original index of its row of level l + 2,
// and the first kLevelBlockEntries entries per lane (column and value), the diagonal and b of its row of
// level l + 1, so that no arithmetic waits on a load of its own level. __syncthreads waits for every load
// in flight, so a level costs at least one memory round trip (about 0.9 us on the H100), which the staged
// kernel avoids; here the level's width, not that round trip, is what the block spends its time on.
//
// Solution values live in a shared-memory ring indexed by the row in level order; older rows are read from
// the solution buffer y, written by the same block. A row is solved by V lanes; a level wider than the
// rows one pass covers takes further passes, which read their data when they need it. There is no
// spin-wait: the kernel cannot hang.
#include "kernels/sptrsv_block.cuh"

namespace spade::kernels::sptrsv {
namespace {

/// Bytes of the shared-memory ring (all of it when the solution fits).
constexpr int kRingBytes = 128 * 1024;

/// Stage B of row p (-1: none) with entries [kb, ke) and caller's index ui: this lane's first
/// kLevelBlockEntries entries, b and the diagonal, loaded without being used.
template <typename T, int V>
__device__ inline void load_stage_b(const LowerPart<T>& L, const RhsPass<T>& rhs, int lane, index_t p, index_t kb,
                                    index_t ke, index_t ui, index_t (&ind)[kLevelBlockEntries],
                                    T (&val)[kLevelBlockEntries], T& b, T& d) {
#pragma unroll
  for (int t = 0; t < kLevelBlockEntries; ++t) {
    const index_t k = kb + lane + t * V;
    const bool in = p >= 0 && k < ke;
    ind[t] = in ? L.ind[k] : 0;
    val[t] = in ? L.val[k] : T(0);
  }
  b = p >= 0 ? rhs.b[ui] : T(0);
  d = p >= 0 ? L.diag[p] : T(1);
}

template <typename T, int V>
__global__ void __launch_bounds__(kLevelBlockMaxThreads)
    level_block_direct_kernel(LowerPart<T> L, const std::int32_t* level_ptr, int nlev, T* y, RhsPass<T> pass,
                              int ring_log2) {
  constexpr int K = kLevelBlockEntries;
  extern __shared__ __align__(16) unsigned char level_block_shared[];
  const index_t n = L.n;
  const RhsPass<T> rhs = block_column(pass, y, n);
  const Ring<T> ring{reinterpret_cast<T*>(level_block_shared), (index_t(1) << ring_log2) - 1, y};
  const bool write_y = n > ring.mask + 1;  // else every row stays in the ring
  const int G = blockDim.x / V;            // rows per pass
  const int g = threadIdx.x / V, lane = threadIdx.x % V;
  auto level_begin = [&](int l) { return l <= nlev ? index_t(level_ptr[l]) : n; };

  // The pipeline. q[i] = first row of level l + i. Stage A (level l + 1): the row, its entry range and
  // its row before the renumbering (L.perm). Stage B (level l): the row, its entry range, the caller's
  // index, the first K entries per lane, diagonal and b. A loaded value is used one level later, never
  // right after its load: arithmetic on it (even the caller's index) would wait for memory at every level.
  index_t q0 = level_begin(0), q1 = level_begin(1), q2 = level_begin(2), q3 = level_begin(3);
  index_t pa = q1 + g < q2 ? q1 + g : -1;
  index_t kba = pa >= 0 ? L.ptr[pa] : 0, kea = pa >= 0 ? L.ptr[pa + 1] : 0, oa = pa >= 0 ? L.perm[pa] : 0;
  index_t pb = q0 + g < q1 ? q0 + g : -1;
  index_t kbb = pb >= 0 ? L.ptr[pb] : 0, keb = pb >= 0 ? L.ptr[pb + 1] : 0;
  index_t uib = caller_index(pb >= 0 ? L.perm[pb] : 0, n, L.reversed);
  index_t ind_b[K];
  T val_b[K], b_b, d_b;
  load_stage_b<T, V>(L, rhs, lane, pb, kbb, keb, uib, ind_b, val_b, b_b, d_b);

  for (int l = 0; l < nlev; ++l) {
    // Read ahead: the first row of level l + 4, stage A of level l + 2, stage B of level l + 1.
    const index_t q4 = level_begin(l + 4);
    const index_t pa2 = q2 + g < q3 ? q2 + g : -1;
    const index_t kba2 = pa2 >= 0 ? L.ptr[pa2] : 0, kea2 = pa2 >= 0 ? L.ptr[pa2 + 1] : 0;
    const index_t oa2 = pa2 >= 0 ? L.perm[pa2] : 0;
    const index_t uia = caller_index(oa, n, L.reversed);
    index_t ind_n[K];
    T val_n[K], b_n, d_n;
    load_stage_b<T, V>(L, rhs, lane, pa, kba, kea, uia, ind_n, val_n, b_n, d_n);

    // Level l, first pass: the row of stage B (the diagonal was loaded a level ago: inverting it here
    // overlaps the loads of the sum).
    {
      const T inv_b = T(1) / d_b;
      T sum = T(0);
      if (pb >= 0) {
#pragma unroll
        for (int t = 0; t < K; ++t)
          if (kbb + lane + t * V < keb) sum += val_b[t] * ring.get(ind_b[t], q1);
        sum += add_entries<T, V>(L.ind, L.val, ring, kbb + lane + K * V, keb, q1);
      }
      sum = group_sum<V>(sum);
      if (pb >= 0 && lane == 0) finish_row(ring, y, write_y, rhs, pb, uib, b_b, sum, inv_b);
    }
    // Further passes over a level wider than G rows, reading their data as they go.
    for (index_t base = q0 + G; base < q1; base += G) {
      const index_t p = base + g;
      T sum = p < q1 ? add_entries<T, V>(L.ind, L.val, ring, L.ptr[p] + lane, L.ptr[p + 1], q1) : T(0);
      sum = group_sum<V>(sum);
      if (p < q1 && lane == 0) {
        const index_t ui = caller_row(L, p);
        finish_row(ring, y, write_y, rhs, p, ui, rhs.b[ui], sum, T(1) / L.diag[p]);
      }
    }
    __syncthreads();

    // Shift the pipeline by one level.
    q0 = q1, q1 = q2, q2 = q3, q3 = q4;
    pb = pa, kbb = kba, keb = kea, uib = uia, d_b = d_n, b_b = b_n;
#pragma unroll
    for (int t = 0; t < K; ++t) ind_b[t] = ind_n[t], val_b[t] = val_n[t];
    pa = pa2, kba = kba2, kea = kea2, oa = oa2;
  }
}

template <typename T, int V>
void launch(const LowerPart<T>& L, const std::int32_t* level_ptr, int nlev, int max_rows, T* y,
            const RhsPass<T>& rhs, cudaStream_t stream) {
  const long long wanted = (static_cast<long long>(V) * std::max(max_rows, 1) + kWarpSize - 1) / kWarpSize * kWarpSize;
  const int threads = static_cast<int>(std::min<long long>(wanted, kLevelBlockMaxThreads));
  // The ring: a power of two of rows, no larger than the solution needs nor kRingBytes.
  int ring_log2 = 0;
  while ((std::int64_t(2) << ring_log2) * sizeof(T) <= kRingBytes && (index_t(1) << ring_log2) < L.n) ++ring_log2;
  const int bytes = static_cast<int>((std::size_t(1) << ring_log2) * sizeof(T));
  static const cudaError_t attribute = cudaFuncSetAttribute(
      level_block_direct_kernel<T, V>, cudaFuncAttributeMaxDynamicSharedMemorySize, kRingBytes);
  cuda_check(attribute, "cudaFuncSetAttribute(level_block_direct_kernel)", __FILE__, __LINE__);
  level_block_direct_kernel<T, V><<<rhs.nr, threads, bytes, stream>>>(L, level_ptr, nlev, y, rhs, ring_log2);
  check_launch("level_block_direct_kernel");
}

}  // namespace

template <typename T>
void solve_level_block_direct(const LowerPart<T>& L, const std::int32_t* level_ptr, int nlev, int max_rows,
                              double longest_row, T* y, const RhsPass<T>& rhs, cudaStream_t stream) {
  if (L.n == 0 || nlev == 0) return;
  switch (lanes_per_row(longest_row)) {
    case 1: launch<T, 1>(L, level_ptr, nlev, max_rows, y, rhs, stream); break;
    case 2: launch<T, 2>(L, level_ptr, nlev, max_rows, y, rhs, stream); break;
    case 4: launch<T, 4>(L, level_ptr, nlev, max_rows, y, rhs, stream); break;
    case 8: launch<T, 8>(L, level_ptr, nlev, max_rows, y, rhs, stream); break;
    case 16: launch<T, 16>(L, level_ptr, nlev, max_rows, y, rhs, stream); break;
    default: launch<T, 32>(L, level_ptr, nlev, max_rows, y, rhs, stream); break;
  }
}

template void solve_level_block_direct<double>(const LowerPart<double>&, const std::int32_t*, int, int, double,
                                               double*, const RhsPass<double>&, cudaStream_t);
template void solve_level_block_direct<float>(const LowerPart<float>&, const std::int32_t*, int, int, double,
                                              float*, const RhsPass<float>&, cudaStream_t);

}  // namespace spade::kernels::sptrsv
