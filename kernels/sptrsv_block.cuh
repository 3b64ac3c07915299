// Pieces shared by the two level_block kernels (kernels/sptrsv_block.cu: levels staged in shared memory;
// kernels/sptrsv_block_direct.cu: levels too large for that, read ahead into registers).
#pragma once

#include "kernels/sptrsv_common.cuh"

namespace spade::kernels::sptrsv {

/// The columns of a multi-rhs pass (RhsPass) that the kernels solve, one per thread block: block c takes
/// right-hand side c (b, x and y offset by c columns), so the right-hand sides run side by side on
/// separate SMs at the speed of one, each block walking every level.
template <typename T>
__device__ inline RhsPass<T> block_column(RhsPass<T> rhs, T*& y, index_t n) {
  const int c = blockIdx.x;
  rhs.b += std::int64_t(c) * rhs.ldb;
  rhs.x += std::int64_t(c) * rhs.ldx;
  rhs.nr = 1;
  y += std::int64_t(c) * n;
  return rhs;
}

/// The solution values of the rows solved so far: a ring in shared memory indexed by the row in level
/// order, and all of them in y (device memory) once rows can leave the ring.
template <typename T>
struct Ring {
  T* values;        ///< shared memory: ring[p & mask]
  index_t mask;     ///< ring size - 1 (a power of two)
  const T* y;       ///< device memory: y[p]
  /// The solution of row j, for a reader in a level ending at row `end`: the ring holds every row from
  /// end - size on (no row of the level can have overwritten them).
  __device__ T get(index_t j, index_t end) const { return j >= end - mask - 1 ? values[j & mask] : y[j]; }
};

/// Reduces over the V adjacent lanes of a group (every lane of the warp must call it).
template <int V, typename T>
__device__ inline T group_sum(T v) {
#pragma unroll
  for (int offset = V / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}

/// Row p's solution from b, the sum of its entries and the inverse of its diagonal (a multiplication on
/// the critical path instead of a division), written to the ring, y (when rows leave the ring) and x.
template <typename T>
__device__ inline void finish_row(const Ring<T>& ring, T* y, bool write_y, const RhsPass<T>& rhs, index_t p,
                                  index_t ui, T b, T sum, T inv_d) {
  const T v = (b - sum) * inv_d;
  ring.values[p & ring.mask] = v;
  if (write_y) y[p] = v;
  rhs.x[ui] = v;
}

/// The sum of the entries k = begin, begin + V, ... < end (columns ind[k], values val[k]) times the
/// solution of their columns, for a reader in a level ending at row level_end. The entries go in batches
/// of kAddBatch a lane, each batch's loads issued before any is used: a long row's entries are on its
/// level's critical path, and read from device memory (a level or a chain piece too large to stage) each
/// load waited for alone would cost a round trip. The additions keep the order of k.
template <typename T, int V>
__device__ inline T add_entries(const index_t* ind, const T* val, const Ring<T>& ring, index_t begin, index_t end,
                                index_t level_end) {
  constexpr int kAddBatch = 4;
  T sum = T(0);
  for (index_t k0 = begin; k0 < end; k0 += kAddBatch * V) {
    index_t column[kAddBatch];
    T value[kAddBatch];
#pragma unroll
    for (int t = 0; t < kAddBatch; ++t) {
      const bool in = k0 + t * V < end;
      column[t] = in ? ind[k0 + t * V] : 0;
      value[t] = in ? val[k0 + t * V] : T(0);
    }
#pragma unroll
    for (int t = 0; t < kAddBatch; ++t)
      if (k0 + t * V < end) sum += value[t] * ring.get(column[t], level_end);
  }
  return sum;
}

/// The largest dynamic shared memory a block may ask for on the current device (bytes).
inline int shared_budget() {
  int device = 0, bytes = 0;
  cuda_check(cudaGetDevice(&device), "cudaGetDevice", __FILE__, __LINE__);
  cuda_check(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
             "cudaDeviceGetAttribute(MaxSharedMemoryPerBlockOptin)", __FILE__, __LINE__);
  return bytes;
}

/// level_block for levels too large to stage (kernels/sptrsv_block_direct.cu): the same walk over the
/// level-ordered part L (L.perm given, levels level_ptr), each level's data read from device memory into
/// registers one or two levels ahead, a block per right-hand side (y: rhs.nr columns of n).
template <typename T>
void solve_level_block_direct(const LowerPart<T>& L, const std::int32_t* level_ptr, int nlev, int max_rows,
                              double longest_row, T* y, const RhsPass<T>& rhs, cudaStream_t stream);

}  // namespace spade::kernels::sptrsv
