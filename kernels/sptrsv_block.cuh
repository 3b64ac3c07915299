// Pieces shared by the two level_block kernels (kernels/sptrsv_block.cu: levels staged in shared memory;
// kernels/sptrsv_block_direct.cu: levels too large for that, read ahead into registers).
#pragma once

#include "kernels/sptrsv_common.cuh"

namespace spade::kernels::sptrsv {

/// Entries per lane of a row read into registers before the row's level; the rest come when it is solved.
constexpr int kLevelBlockEntries = 4;

/// The threads of the block: at most 1024 when a lane holds one right-hand side, 512 when it holds
/// kRhsPerPass (registers).
constexpr int level_block_max_threads(int rhs_per_lane) { return rhs_per_lane == 1 ? 1024 : 512; }

/// The solution values of the rows solved so far: a ring in shared memory indexed by the row in level
/// order, and all of them in y (device memory) once rows can leave the ring.
template <typename T, int R>
struct Ring {
  T* values;        ///< shared memory: ring[(p & mask) * R + r]
  index_t mask;     ///< ring size - 1 (a power of two)
  const T* y;       ///< device memory: y[r * n + p]
  index_t n;
  /// Right-hand side r of row j, for a reader in a level ending at row `end`: the ring holds every row
  /// from end - size on (no row of the level can have overwritten them).
  __device__ T get(index_t j, int r, index_t end) const {
    return j >= end - mask - 1 ? values[(j & mask) * R + r] : y[std::int64_t(r) * n + j];
  }
};

/// Reduces over the V lanes of a group that are S lanes apart (every lane of the warp must call it).
template <int V, int S = 1, typename T>
__device__ inline T group_sum(T v) {
#pragma unroll
  for (int offset = V / 2 * S; offset >= S; offset /= 2) v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}

/// Row p's solution for right-hand sides r0 .. r0 + RL - 1 (those below rhs.nr) from b, the sum of its
/// entries and the inverse of its diagonal (a multiplication on the critical path instead of a division),
/// written to the ring, y (when rows leave the ring) and x.
template <typename T, int R, int RL>
__device__ inline void finish_row(const Ring<T, R>& ring, T* y, bool write_y, const RhsPass<T>& rhs, index_t p,
                                  index_t ui, int r0, const T (&b)[RL], const T (&sum)[RL], T inv_d) {
#pragma unroll
  for (int j = 0; j < RL; ++j) {
    const int r = r0 + j;
    if (r < rhs.nr) {
      const T v = (b[j] - sum[j]) * inv_d;
      ring.values[(p & ring.mask) * R + r] = v;
      if (write_y) y[std::int64_t(r) * ring.n + p] = v;
      rhs.x[ui + std::int64_t(r) * rhs.ldx] = v;
    }
  }
}

/// sum[j] += the entries k = begin, begin + V, ... < end (columns ind[k], values val[k]) times right-hand
/// side r0 + j of their columns (j < RL, r0 + j < nr), for a reader in a level ending at row level_end.
template <typename T, int R, int V, int RL>
__device__ inline void add_entries(const index_t* ind, const T* val, const Ring<T, R>& ring, int nr, int r0,
                                   index_t begin, index_t end, index_t level_end, T (&sum)[RL]) {
  for (index_t k = begin; k < end; k += V) {
    const index_t j = ind[k];
    const T a = val[k];
#pragma unroll
    for (int t = 0; t < RL; ++t)
      if (r0 + t < nr) sum[t] += a * ring.get(j, r0 + t, level_end);
  }
}

/// Lanes per row for a mean of `entries_per_row` off-diagonal entries: a power of two <= 32, enough for
/// kLevelBlockEntries entries per lane.
inline int lanes_per_row(double entries_per_row) {
  int lanes = 1;
  while (lanes < kWarpSize && lanes * kLevelBlockEntries < entries_per_row) lanes *= 2;
  return lanes;
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
/// registers one or two levels ahead.
template <typename T>
void solve_level_block_direct(const LowerPart<T>& L, const std::int32_t* level_ptr, int nlev, int max_rows,
                              double entries_per_row, T* y, const RhsPass<T>& rhs, cudaStream_t stream);

}  // namespace spade::kernels::sptrsv
