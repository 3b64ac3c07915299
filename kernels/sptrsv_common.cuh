// Device helpers shared by the sparse triangular-solve kernels: block tickets, index mapping, warp
// reductions and the "not yet solved" sentinel that lets a value be its own ready flag.
#pragma once

#include <cuda/atomic>

#include <cstdint>

#include "kernels/cuda_check.hpp"
#include "kernels/sptrsv_kernels.hpp"
#include "kernels/sync.cuh"

namespace spade::kernels::sptrsv {

constexpr unsigned kFullMask = 0xffffffffu;

__device__ inline index_t caller_index(index_t i, index_t n, bool reversed) { return reversed ? n - 1 - i : i; }

/// The caller's unknown of row i of L, through L.perm when the rows are renumbered.
template <typename T>
__device__ inline index_t caller_row(const LowerPart<T>& L, index_t i) {
  return caller_index(L.perm != nullptr ? L.perm[i] : i, L.n, L.reversed);
}

/// The block's ticket: thread 0 takes the next one and the block shares it. Blocks are numbered by the
/// order in which they *start*, so a block only ever waits on work of blocks that are already running.
__device__ inline int block_ticket(int* tickets) {
  __shared__ int ticket;
  if (threadIdx.x == 0) ticket = take_ticket(&tickets[0]);
  __syncthreads();
  return ticket;
}

/// Called once per block by thread 0 after it took its ticket: the last block to get here has seen every
/// block take its ticket, so it can zero both counters for the next launch (kernel boundaries order it).
__device__ inline void block_finished(int* tickets, int nblocks) {
  if (threadIdx.x != 0) return;
  if (device_atomic_int(tickets[1]).fetch_add(1, cuda::memory_order_relaxed) == nblocks - 1) {
    tickets[0] = 0;
    tickets[1] = 0;
  }
}

/// A signalling NaN with a fixed payload: arithmetic never produces one (it quiets NaNs), so a value that
/// came out of (b - sum) / d can never be mistaken for it.
template <typename T>
struct Sentinel;
template <>
struct Sentinel<double> {
  static constexpr unsigned long long bits = 0x7ff4a5a5a5a5a5a5ull;
  __device__ static double value() { return __longlong_as_double(static_cast<long long>(bits)); }
  __device__ static bool is(double v) { return static_cast<unsigned long long>(__double_as_longlong(v)) == bits; }
};
template <>
struct Sentinel<float> {
  static constexpr unsigned bits = 0x7f8a5a5au;
  __device__ static float value() { return __int_as_float(static_cast<int>(bits)); }
  __device__ static bool is(float v) { return static_cast<unsigned>(__float_as_int(v)) == bits; }
};

/// Lanes of a warp split among kRows rows, R * S lanes a row, S of them a right-hand side (R and S powers of
/// two): lane = row * R * S + r * S + slot, so that the S lanes of right-hand side r take every S-th entry
/// of a row or column and each lane does the arithmetic of one right-hand side, as in a one-rhs solve,
/// instead of looping over all R. The lanes of one (row, r) are adjacent: slot_sum reduces them with
/// log2(S) shuffles (2 for a warp a row and R = 8) instead of a full warp reduction per right-hand side.
template <int R, int S>
struct RowLanes {
  static_assert(R * S <= kWarpSize && kWarpSize % (R * S) == 0 && (S & (S - 1)) == 0, "lanes must tile a warp");
  static constexpr int kRows = kWarpSize / (R * S);
  static constexpr int kSlots = S;
  int row;   ///< the warp's row of this lane
  int r;     ///< its right-hand side
  int slot;  ///< its position among the S lanes of (row, r)
  __device__ explicit RowLanes(int lane) : row(lane / (R * S)), r(lane % (R * S) / S), slot(lane % S) {}
  /// Sum over the S lanes of this lane's (row, r), every lane of the warp calling it; every lane gets it.
  template <typename T>
  __device__ static T slot_sum(T v) {
#pragma unroll
    for (int offset = S / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(kFullMask, v, offset);
    return v;
  }
};

/// A warp a row (or column) split among R right-hand sides: 32 / R lanes each (with R = 1, a lane per
/// entry, 32 at a time).
template <int R>
using RhsLanes = RowLanes<R, kWarpSize / R>;

/// Sums s[0..R) over the warp with log2(R) transposing steps (each lane keeps half of its values and sends
/// the other half to its partner) and then plain butterfly steps: R - 1 + log2(32 / R) shuffles instead of
/// 5 R (9 instead of 40 for R = 8). Lane l returns the total of right-hand side l / (32 / R). Every lane of
/// the warp must call it; s is destroyed.
template <typename T, int R>
__device__ inline T warp_sum_multi(T (&s)[R], int lane) {
  int offset = kWarpSize / 2;
#pragma unroll
  for (int half = R / 2; half >= 1; half /= 2, offset /= 2) {
    const bool upper = (lane & offset) != 0;
#pragma unroll
    for (int j = 0; j < half; ++j) {
      const T send = upper ? s[j] : s[j + half];
      const T keep = upper ? s[j + half] : s[j];
      s[j] = keep + __shfl_xor_sync(kFullMask, send, offset);
    }
  }
  T v = s[0];
#pragma unroll
  for (; offset > 0; offset /= 2) v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}

/// Reads one unknown's first nr values y[r * stride] (r < nr) once; true when none is the sentinel. The
/// value is its own flag: written by one relaxed atomic store with no other data published with it, so
/// neither side needs a fence. Entries r >= nr of v are set to 0.
template <typename T, int R>
__device__ inline bool try_values(T* y, std::int64_t stride, int nr, T (&v)[R]) {
  bool ready = true;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if (r < nr) {
      v[r] = load_relaxed(y + r * stride);
      ready = ready && !Sentinel<T>::is(v[r]);
    } else {
      v[r] = T(0);
    }
  }
  return ready;
}

inline void check_launch(const char* what) {
  cuda_check(cudaGetLastError(), what, __FILE__, __LINE__);
}

inline int blocks_for(long long work, int per_block) { return static_cast<int>((work + per_block - 1) / per_block); }

}  // namespace spade::kernels::sptrsv
