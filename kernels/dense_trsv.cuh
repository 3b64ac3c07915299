// Device building blocks of the dense triangular solves (issue 3), after J. D. Hogg, "A fast dense
// triangular solve in CUDA", SIAM J. Sci. Comput. 35(3), 2013 (summary in ../docs and ../shared/papers.md).
//
// Everything works on 32 x 32 tiles of a column-major lower-triangular matrix L. A tile "in use
// orientation" is the tile of L (non-transposed solve) or of L^T (transposed solve), so that the same code
// serves both directions: lane r of a warp owns row r of the tile in use orientation, and every product is
// a row of the tile times a column of the right-hand side block. Transposed tiles are transposed once, when
// they are cached in shared memory (Hogg 2013, section on the transpose solve), so that global reads stay
// coalesced in both directions. (The multi-block kernel's transposed solve with one right-hand side keeps
// its off-diagonal tiles as loaded instead: each lane multiplies its row of L by its own x and the lanes'
// sums are reduced once per task, kernels/dense_trsv.cu.)
//
// Right-hand sides come in panels of K columns (K a compile-time constant: 1, 4 or 8); a panel of one
// tile is stored in shared memory as `xs[c * K + k]` (row c, column k), so every lane reads the same address
// (a broadcast, conflict-free).
//
// Shared-memory tiles are stored row-major with the padded stride kTileLd = 33, so that both a row-wise
// store (lane = column) and a column-wise store (lane = row) are free of bank conflicts for 4- and 8-byte
// elements.
//
// Synchronization contract of every function here: "warp" functions must be called by all 32 lanes of one
// warp together (convergent), and synchronize only that warp (__syncwarp); "block" functions must be called
// by every thread of the block and end with __syncthreads(). Inter-block ordering goes through published
// values only (below): a solved x value is stored once, with a relaxed atomic store, into a buffer that
// held the all-ones "unpublished" bit pattern, and a consumer polls the values themselves, so each value
// is its own ready flag: no fence and no separate flag on the critical path (Liu et al. 2016 and
// YuenyeungSpTRSV 2021 use the same idea for sparse solves).
// Minimum architecture: Volta (sm_70; independent thread scheduling, __nanosleep); built for sm_90.
#pragma once

#include <cstring>
#include <type_traits>

#include "kernels/sync.cuh"

namespace spade::kernels::dense {

/// Unsigned integer of the size of T (the bit pattern of a published value).
template <typename T>
using bits_of = std::conditional_t<sizeof(T) == 8, unsigned long long, unsigned int>;

/// The "not yet published" bit pattern: all ones, a NaN that arithmetic never produces (publish_value
/// replaces it by the canonical NaN, so that a NaN solution still counts as published). Unlike the
/// sparse solves' Sentinel (kernels/sptrsv_common.cuh), it reads as "not yet" in both precisions, because
/// one workspace's buffers serve FP64 and FP32 launches, and it can be set with a byte memset.
template <typename T>
constexpr bits_of<T> kUnpublished = ~bits_of<T>(0);

/// Loads the bits of a value of a publication buffer (kernels/sync.cuh load_relaxed).
template <typename T>
__device__ inline bits_of<T> load_published(const T* p) {
  return load_relaxed(reinterpret_cast<bits_of<T>*>(const_cast<T*>(p)));
}

/// Publishes v (kernels/sync.cuh store_relaxed); the unpublished pattern becomes the canonical NaN.
template <typename T>
__device__ inline void publish_value(T* p, T v) {
  bits_of<T> b;
  memcpy(&b, &v, sizeof(T));
  if (b == kUnpublished<T>) b = sizeof(T) == 8 ? bits_of<T>(0x7ff8000000000000ull) : bits_of<T>(0x7fc00000u);
  store_relaxed(reinterpret_cast<bits_of<T>*>(p), b);
}

template <typename T>
__device__ inline T value_of(bits_of<T> b) {
  T v;
  memcpy(&v, &b, sizeof(T));
  return v;
}

constexpr int kTile = 32;                  ///< tile edge, one row per lane
constexpr int kTileLd = kTile + 1;         ///< padded row stride of a tile in shared memory
constexpr int kTileSmem = kTile * kTileLd; ///< elements of one shared-memory tile

/// A zero in device memory, never written: the address that warp_load_tile reads for the elements
/// outside a partial tile.
static __device__ double zero_f64 = 0.0;
static __device__ float zero_f32 = 0.0f;

template <typename T>
__device__ inline const T* zero_element() {
  if constexpr (std::is_same_v<T, double>)
    return &zero_f64;
  else
    return &zero_f32;
}

/// Warp: loads the tile whose top-left element is `a` (column-major, leading dimension `lda`) into
/// registers, lane r getting row r: `row[c] = a[r + c * lda]` for r < rows, c < cols, zero elsewhere.
/// Global memory, read-only for the whole kernel. The loads of a column are coalesced (256 bytes for
/// FP64); all 32 are issued before any is used.
template <typename T>
__device__ inline void warp_load_tile(const T* __restrict__ a, long long lda, int rows, int cols,
                                      T (&row)[kTile]) {
  const int lane = threadIdx.x % kTile;
  // Hide lda from the optimizer so that it walks the columns with one pointer instead of hoisting 32
  // 64-bit column offsets out of the caller's loop (64 registers that pushed the FP64 kernels into spills).
  asm volatile("" : "+l"(lda));
  // Every lane loads from a valid address, the element outside the tile from a zero in device memory:
  // no load can leave the allocation however the compiler schedules it (compute-sanitizer caught guarded
  // loads of an earlier version hoisted out of their guard), and no value is selected after its load. A
  // select after the load (`inside ? value : 0`) made the compiler wait for the loads of the next tile
  // in the middle of the current one: L^T at n = 8192 took 612.7 us instead of 181.7 us (H100).
  const T* p = a + lane;
  const T* const zero = zero_element<T>();
#pragma unroll
  for (int c = 0; c < kTile; ++c, p += lda) {
    const bool inside = lane < rows && c < cols;
    row[c] = __ldg(inside ? p : zero);
  }
}

/// Warp: stores a tile held as rows (lane r holds row r of a tile A) into shared memory `s` in use
/// orientation: A itself if `transpose` is false, A^T otherwise. Ends with __syncwarp().
template <typename T>
__device__ inline void warp_store_tile(const T (&row)[kTile], T* s, bool transpose) {
  const int lane = threadIdx.x % kTile;
  if (transpose) {
#pragma unroll
    for (int c = 0; c < kTile; ++c) s[c * kTileLd + lane] = row[c];
  } else {
#pragma unroll
    for (int c = 0; c < kTile; ++c) s[lane * kTileLd + c] = row[c];
  }
  __syncwarp();
}

/// Warp: lane r reads row r of a shared-memory tile (written by warp_store_tile) into registers.
template <typename T>
__device__ inline void warp_read_tile(const T* s, T (&row)[kTile]) {
  const int lane = threadIdx.x % kTile;
#pragma unroll
  for (int c = 0; c < kTile; ++c) row[c] = s[lane * kTileLd + c];
}

/// Warp: `acc[k] += sum_c row[c] * xs[c * K + k]`, the gemv (K = 1) or gemm (K > 1) of one tile with a
/// K-column panel in shared memory. For K = 1 four partial sums shorten the dependent FMA chain.
template <typename T, int K>
__device__ inline void warp_tile_matvec(const T (&row)[kTile], const T* xs, T (&acc)[K]) {
  if constexpr (K == 1) {
    T part[4] = {T(0), T(0), T(0), T(0)};
#pragma unroll
    for (int c = 0; c < kTile; ++c) part[c % 4] = fma(row[c], xs[c], part[c % 4]);
    acc[0] += (part[0] + part[1]) + (part[2] + part[3]);
  } else {
#pragma unroll
    for (int c = 0; c < kTile; ++c) {
#pragma unroll
      for (int k = 0; k < K; ++k) acc[k] = fma(row[c], xs[c * K + k], acc[k]);
    }
  }
}

/// Warp: solves one triangular tile in registers, the latency-bound step of Hogg 2013. Lane r holds row r
/// of the tile in use orientation (`row`, lower-triangular if `upper` is false, upper-triangular
/// otherwise) and row r of the K right-hand sides (`v`, overwritten by the solution). Only the first
/// `valid` rows and columns take part; lanes r >= valid return zero. Non-unit diagonal: a zero diagonal
/// element in a valid row is reported as kStatusZeroPivot with index `row0 + r` (the result is then Inf or
/// NaN, never silently repaired). 32 dependent steps of one shuffle and one FMA each.
template <typename T, int K>
__device__ inline void warp_solve_tile(const T (&row)[kTile], T (&v)[K], bool upper, bool unit, int valid,
                                       DeviceStatus* status, int row0) {
  const int lane = threadIdx.x % kTile;
  T diag = T(1);
  if (!unit) {
#pragma unroll
    for (int c = 0; c < kTile; ++c)
      if (c == lane) diag = row[c];
    if (lane < valid && diag == T(0)) report_status(status, kStatusZeroPivot, row0 + lane);
  }
  const T dinv = (lane < valid) ? T(1) / diag : T(0);
  if (!upper) {
#pragma unroll
    for (int c = 0; c < kTile; ++c) {
#pragma unroll
      for (int k = 0; k < K; ++k) {
        if (lane == c) v[k] *= dinv;
        const T xc = __shfl_sync(0xffffffffu, v[k], c);
        if (lane > c) v[k] = fma(-row[c], xc, v[k]);
      }
    }
  } else {
#pragma unroll
    for (int c = kTile - 1; c >= 0; --c) {
#pragma unroll
      for (int k = 0; k < K; ++k) {
        if (lane == c) v[k] *= dinv;
        const T xc = __shfl_sync(0xffffffffu, v[k], c);
        if (lane < c) v[k] = fma(-row[c], xc, v[k]);
      }
    }
  }
}

/// Warp: inverts one lower-triangular tile by Higham's stable recursive method (Du Croz & Higham 1992;
/// Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed., section 14.2.2): for [A 0; B C],
/// invert A and C recursively, then solve C X = -B A^{-1} for the off-diagonal block by forward
/// substitution with the original C. Bottom-up over blocks of 1, 2, 4, 8, 16.
///   row  - the tile in registers, lane r holding row r (rows/columns past the matrix set to the identity);
///          only the strict lower triangle is read, and the diagonal unless `unit`.
///   m    - shared memory (kTileSmem elements, row-major with stride kTileLd): receives the inverse, with
///          zeros above the diagonal.
///   orig - shared-memory scratch (kTileSmem elements): a copy of the tile.
/// Non-unit diagonal: a zero diagonal element of row r < valid is reported as kStatusZeroPivot, index
/// row0 + r (the inverse then holds Inf/NaN).
template <typename T>
__device__ inline void warp_invert_tile(const T (&row)[kTile], T* m, T* orig, bool unit, int valid,
                                        DeviceStatus* status, int row0) {
  const int lane = threadIdx.x % kTile;
#pragma unroll
  for (int c = 0; c < kTile; ++c) {
    const T value = (c < lane) ? row[c] : (c == lane ? (unit ? T(1) : row[c]) : T(0));
    orig[lane * kTileLd + c] = value;
    m[lane * kTileLd + c] = value;
  }
  __syncwarp();
  const T d = orig[lane * kTileLd + lane];
  if (lane < valid && d == T(0)) report_status(status, kStatusZeroPivot, row0 + lane);
  m[lane * kTileLd + lane] = T(1) / d;
  __syncwarp();
#pragma unroll
  for (int s = 1; s < kTile; s *= 2) {
    // T = B * A^{-1} for every pair of s x s diagonal blocks at base = 2 s p: 16 s elements.
    constexpr int kMaxPerLane = kTile / 4;
    T t[kMaxPerLane];
#pragma unroll
    for (int q = 0; q < kMaxPerLane; ++q) {
      const int e = lane + q * kTile;
      t[q] = T(0);
      if (e < 16 * s) {
        const int pair = e / (s * s), i = (e % (s * s)) / s, j = e % s;
        const int base = 2 * s * pair;
        T sum = T(0);
        for (int l = j; l < s; ++l) sum = fma(m[(base + s + i) * kTileLd + base + l], m[(base + l) * kTileLd + base + j], sum);
        t[q] = sum;
      }
    }
    __syncwarp();
#pragma unroll
    for (int q = 0; q < kMaxPerLane; ++q) {
      const int e = lane + q * kTile;
      if (e < 16 * s) {
        const int pair = e / (s * s), i = (e % (s * s)) / s, j = e % s;
        const int base = 2 * s * pair;
        m[(base + s + i) * kTileLd + base + j] = -t[q];
      }
    }
    __syncwarp();
    // Solve C X = -B A^{-1} column by column (16 columns over all pairs), with the original C.
    if (lane < 16) {
      const int pair = lane / s, j = lane % s, base = 2 * s * pair;
      for (int i = 0; i < s; ++i) {
        T x = m[(base + s + i) * kTileLd + base + j];
        for (int l = 0; l < i; ++l) x = fma(-orig[(base + s + i) * kTileLd + base + s + l], m[(base + s + l) * kTileLd + base + j], x);
        m[(base + s + i) * kTileLd + base + j] = x * m[(base + s + i) * kTileLd + base + s + i];
      }
    }
    __syncwarp();
  }
}

/// Block: the diagonal step of one block row of P tiles by substitution (Hogg 2013: the critical path).
/// Solves D y = r in place, D the P x P block-triangular diagonal block in use orientation (lower for the
/// non-transposed solve, upper for the transposed one).
///   diag  - shared memory, P (P + 1) / 2 tiles (kTileSmem elements each): the tile of L at tile row q,
///           tile column p (q >= p) at index q (q + 1) / 2 + p, stored transposed when `transpose`
///           (warp_store_tile).
///   r     - shared memory, P panels of 32 x K (`r[(p * kTile + c) * K + k]`): the right-hand sides of the
///           block row on entry, the solution on exit.
///   tiles - number of tiles of the block row inside the matrix (1..P); `last_valid` rows in the last one.
///   x, ldx, row0 - global destination of the solution (rows row0 ..), written for rows < n and columns
///           < nrhs; each value is also published (publish_value) at pub[row + k * ldp].
/// Needs >= P warps: warp 0 solves the diagonal tiles one after the other (warp_solve_tile), warps 1.. apply
/// each solved panel to the rest of the block row. Every thread of the block must call it; contains
/// 2 tiles - 1 __syncthreads(), the last one after the global writes.
template <typename T, int K, int P>
__device__ inline void block_solve_diagonal(const T* diag, T* r, bool transpose, bool unit, int tiles,
                                            int last_valid, T* x, long long ldx, T* pub, long long ldp, int row0,
                                            int n, int nrhs, DeviceStatus* status) {
  const int lane = threadIdx.x % kTile, warp = threadIdx.x / kTile;
  for (int step = 0; step < tiles; ++step) {
    const int p = transpose ? tiles - 1 - step : step;
    const int valid = (p == tiles - 1) ? last_valid : kTile;
    T* rp = r + p * kTile * K;
    if (warp == 0) {
      T row[kTile];
      warp_read_tile(diag + (p * (p + 1) / 2 + p) * kTileSmem, row);
      T v[K];
#pragma unroll
      for (int k = 0; k < K; ++k) v[k] = rp[lane * K + k];
      warp_solve_tile<T, K>(row, v, transpose, unit, valid, status, row0 + p * kTile);
#pragma unroll
      for (int k = 0; k < K; ++k) {
        rp[lane * K + k] = v[k];
        const int gr = row0 + p * kTile + lane;
        if (gr < n && k < nrhs) {
          x[gr + k * ldx] = v[k];
          publish_value(pub + gr + k * ldp, v[k]);
        }
      }
    }
    __syncthreads();
    if (step == tiles - 1) break;
    const int remaining = tiles - 1 - step;
    if (warp >= 1 && warp <= remaining) {
      const int q = transpose ? p - warp : p + warp;
      const int stored = transpose ? p * (p + 1) / 2 + q : q * (q + 1) / 2 + p;
      T row[kTile];
      warp_read_tile(diag + stored * kTileSmem, row);
      T acc[K];
#pragma unroll
      for (int k = 0; k < K; ++k) acc[k] = T(0);
      warp_tile_matvec<T, K>(row, rp, acc);
      T* rq = r + q * kTile * K;
#pragma unroll
      for (int k = 0; k < K; ++k) rq[lane * K + k] -= acc[k];
    }
    __syncthreads();
  }
}

/// Block: the diagonal step of one block row with an explicitly inverted diagonal block (Hogg 2013's
/// explicit inversion): y = D^{-1} r as one block-parallel product instead of P dependent solves.
///   diag  - as for block_solve_diagonal, but holding the tiles of D^{-1} (lower-triangular, tile (q, p)
///           at q (q + 1) / 2 + p, transposed when `transpose`), i.e. the inverse of the whole 32P x 32P
///           diagonal block, from dense_trsv_invert_diagonal.
///   r     - shared memory, P panels of 32 x K: the right-hand sides (read only).
///   stage - shared memory, W panels of 32 x K: the warps' partial sums.
///   x, ldx, pub, ldp, row0, n, nrhs - global destination and publication, as for block_solve_diagonal.
/// W warps (W a multiple of P): warp w takes tile row w % P and every (W / P)-th tile of it. Every thread
/// of the block must call it; contains 2 __syncthreads(), the last one after the global writes.
template <typename T, int K, int P, int W>
__device__ inline void block_apply_inverse(const T* diag, const T* r, T* stage, bool transpose, int tiles, T* x,
                                           long long ldx, T* pub, long long ldp, int row0, int n, int nrhs) {
  static_assert(W % P == 0, "the warps must split evenly over the tile rows");
  const int lane = threadIdx.x % kTile, warp = threadIdx.x / kTile;
  const int q = warp % P;
  T acc[K];
#pragma unroll
  for (int k = 0; k < K; ++k) acc[k] = T(0);
  if (q < tiles) {
    for (int p = warp / P; p < tiles; p += W / P) {
      if (transpose ? p < q : p > q) continue;
      T row[kTile];
      warp_read_tile(diag + (transpose ? p * (p + 1) / 2 + q : q * (q + 1) / 2 + p) * kTileSmem, row);
      warp_tile_matvec<T, K>(row, r + p * kTile * K, acc);
    }
  }
#pragma unroll
  for (int k = 0; k < K; ++k) stage[(warp * kTile + lane) * K + k] = acc[k];
  __syncthreads();
  for (int e = threadIdx.x; e < P * kTile * K; e += W * kTile) {
    const int tq = e / (kTile * K), within = e % (kTile * K);
    T sum = T(0);
    for (int w = tq; w < W; w += P) sum += stage[w * kTile * K + within];
    const int gr = row0 + tq * kTile + within / K, k = within % K;
    if (gr < n && k < nrhs) {
      x[gr + k * ldx] = sum;
      publish_value(pub + gr + k * ldp, sum);
    }
  }
  __syncthreads();
}

}  // namespace spade::kernels::dense
