// Dense triangular-solve kernels and their host launchers (issue 3), after J. D. Hogg, "A fast dense
// triangular solve in CUDA", SIAM J. Sci. Comput. 35(3), 2013. Contracts: include/spade/dense_trsv.hpp
// (host API) and kernels/dense_trsv.cuh (device building blocks).
//
// One kernel serves every n. The matrix is cut into block rows of P tiles (32 P rows). Thread blocks take
// block rows dynamically through an atomic ticket, in solve order (top-down for L, bottom-up for L^T), so a
// block only ever waits for block rows that running blocks own: no deadlock whatever order the hardware
// dispatches blocks in (Hogg 2013). A block row is processed in three phases:
//   1. cache the diagonal block (its P (P + 1) / 2 tiles of L, or of its inverse if given) in shared
//      memory, transposed for the transposed solve, while nothing waits on it;
//   2. the bulk: every warp streams the off-diagonal tiles of one tile row in the order their x becomes
//      available, each tile loaded into registers one step ahead (two buffers used in turn, never copied)
//      before the warp polls the published x it multiplies (the next tile's x is loaded while the current
//      one is multiplied); the transposed solve with one right-hand side accumulates per lane and reduces
//      across the lanes once per task instead of transposing every tile;
//   3. reduce the warps' partial sums, solve the diagonal block from shared memory (one block-parallel
//      product with its inverse, block_apply_inverse, or P dependent tile solves, block_solve_diagonal),
//      write x to the caller's X and publish each value (kernels/dense_trsv.cuh: every value is its own
//      ready flag, so a hand-off costs one read of the values instead of a fence, a flag and a read).
// A block row with more than 128 off-diagonal columns is split (unless options.chunk_columns is 0): its
// owner task multiplies the 128 columns next to the diagonal and solves the diagonal block; the columns
// left of those go in chunks of options.chunk_columns to other tasks, which add their partial sums into a
// per-row global buffer and count themselves done, so that the long rows near the end do not each stream
// through a single multiprocessor. Right-hand sides go in panels of K columns, up to 64 panels per launch,
// each panel with its own tasks: their chains of block rows overlap. Tasks are numbered block row by block
// row in solve order, then panel by panel, then chunk by chunk with the owner last, so every wait is on a
// smaller ticket. The grid is persistent (one task per resident block at a time); the last block to exit
// resets the ticket counters, each owner clears its row's partial sums and chunk count and resets its
// share of the other publication buffer (launches alternate between two), so the next launch needs no
// memset.

#include "spade/dense_trsv.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

#include "kernels/cuda_check.hpp"
#include "kernels/dense_trsv.cuh"
#include "spade/error.hpp"

namespace spade::kernels::dense {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * kTile;
constexpr int kMaxPanel = 8;  // right-hand sides per panel
constexpr int kMaxPanelsPerLaunch = 64;
constexpr int kInvBlock = 128;  // edge of the inverted diagonal blocks (the largest block row)
constexpr int kInvTiles = kInvBlock / kTile;
constexpr int kCombineThreads = 1024;
constexpr int kQuickPolls = 32;  // polls without sleeping before a bounded wait starts backing off
// Tile columns next to the diagonal that the owner of a split block row multiplies itself: 128 columns,
// one tile per warp for 64-row block rows and two for 128-row ones, all loaded into registers before the
// owner waits. (Two 128-column block columns were measured slower: the owner's tiles of the block column
// next to the diagonal were then loaded only after the block column before it arrived.)
constexpr int kNearTiles = kInvBlock / kTile;

/// Off-diagonal tile columns of solve-order block row t.
template <int P, bool Trans>
__host__ __device__ inline int row_columns(int t, int ntiles, int nbr) {
  return Trans ? (t == 0 ? 0 : ntiles - (nbr - t) * P) : t * P;
}

/// Off-diagonal tile columns of block row t left to the non-owner chunks: all but the kNearTiles next to
/// the diagonal, which the owner keeps (0 when the row is not split, chunk_tiles == 0).
template <int P, bool Trans>
__host__ __device__ inline int far_columns(int t, int ntiles, int nbr, int chunk_tiles) {
  return chunk_tiles == 0 ? 0 : max(0, row_columns<P, Trans>(t, ntiles, nbr) - kNearTiles);
}

/// Tasks of solve-order block row t (per right-hand-side panel): the far columns in chunks of chunk_tiles,
/// then the owner.
template <int P, bool Trans>
__host__ __device__ inline int row_chunks(int t, int ntiles, int nbr, int chunk_tiles) {
  const int far = far_columns<P, Trans>(t, ntiles, nbr, chunk_tiles);
  return 1 + (far == 0 ? 0 : (far + chunk_tiles - 1) / chunk_tiles);
}

/// Tile (gq, gp) (global tile indices inside one inverted 128-block) of the inverse buffer (ld kInvBlock).
template <typename T>
__device__ inline T* inverse_tile(T* inv, int gq, int gp) {
  return inv + std::size_t(gq / kInvTiles) * kInvBlock * kInvBlock + (gq % kInvTiles) * kTile +
         (gp % kInvTiles) * kTile * kInvBlock;
}

// Counters in the workspace: [0] ticket, [1] exits, [2, 3] unused; the status after them.
constexpr int kTicket = 0, kExits = 1, kCounterInts = 4;

/// The transposed solve with one right-hand side accumulates per lane (no shared-memory transpose);
/// with panels of K > 1 columns the tiles are transposed in a per-warp shared-memory scratch.
template <int K, bool Trans>
constexpr bool kLaneAccumulate = Trans && K == 1;
template <int K, bool Trans>
constexpr bool kTransposeScratch = Trans && !kLaneAccumulate<K, Trans>;

template <typename T, int K, int P, bool Trans>
constexpr std::size_t trsm_smem_bytes() {
  return sizeof(T) * (std::size_t(P * (P + 1) / 2) * kTileSmem  // diagonal block
                      + std::size_t(kWarps) * 2 * kTile * K      // per-warp x panels (2) / partial sums
                      + (kTransposeScratch<K, Trans> ? std::size_t(kWarps) * kTileSmem : 0)  // transpose scratch
                      + std::size_t(P) * kTile * K);             // right-hand sides of the block row
}

template <typename T, int K, int P, bool Trans>
__global__ void __launch_bounds__(kThreads, 1)
    trsm_kernel(int n, int nrhs, const T* __restrict__ L, long long lda, const T* __restrict__ inv, T* X,
                long long ldx, bool unit, int chunk_tiles, int panels, int* counters,
                DeviceStatus* status, int* chunks_done, T* partial, T* pub, T* pub_other, long long ldp,
                long long reset_count) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* const diag = reinterpret_cast<T*>(smem_raw);
  T* const stage = diag + P * (P + 1) / 2 * kTileSmem;
  T* const scratch = stage + kWarps * 2 * kTile * K;
  constexpr bool kLaneAcc = kLaneAccumulate<K, Trans>;
  T* const r = scratch + (kTransposeScratch<K, Trans> ? kWarps * kTileSmem : 0);
  __shared__ int row_s, panel_s, chunk_s, chunks_s;
  __shared__ int failed_s;

  const int lane = threadIdx.x % kTile, warp = threadIdx.x / kTile;
  const int ntiles = (n + kTile - 1) / kTile;
  const int nbr = (ntiles + P - 1) / P;
  T* const xs = stage + warp * 2 * kTile * K;
  T* const sc = scratch + warp * kTileSmem;

  // Thread 0: first ticket of block row scan_row (tickets only grow). Tickets go block row by block row;
  // inside a block row, panel by panel; inside a panel, chunk by chunk, the owner last.
  int scan_row = 0, scan_first = 0;
  for (;;) {
    if (threadIdx.x == 0) {
      const int ticket = take_ticket(&counters[kTicket]);
      while (scan_row < nbr &&
             ticket >= scan_first + panels * row_chunks<P, Trans>(scan_row, ntiles, nbr, chunk_tiles))
        scan_first += panels * row_chunks<P, Trans>(scan_row++, ntiles, nbr, chunk_tiles);
      const int per_panel = scan_row < nbr ? row_chunks<P, Trans>(scan_row, ntiles, nbr, chunk_tiles) : 1;
      row_s = scan_row;
      panel_s = (ticket - scan_first) / per_panel;
      chunk_s = (ticket - scan_first) % per_panel;
      chunks_s = per_panel;
      failed_s = 0;
    }
    __syncthreads();
    const int t = row_s, chunk = chunk_s, chunks = chunks_s, panel = panel_s;
    if (t >= nbr) break;
    // This task's right-hand-side panel: its columns of X, its publication columns, its row sums.
    T* const Xp = X + std::size_t(panel) * K * ldx;
    T* const pubp = pub + std::size_t(panel) * K * ldp;
    const int prhs = min(K, nrhs - panel * K);
    const int slot_row = panel * nbr + t;
    // The last chunk of a block row owns it: it holds the columns nearest the diagonal (the critical
    // path), adds the other chunks' partial sums, solves the diagonal block and publishes the row.
    const bool owner = chunk == chunks - 1;
    const int brow = Trans ? nbr - 1 - t : t;
    const int tile0 = brow * P;
    const int tiles = min(P, ntiles - tile0);
    const int row0 = tile0 * kTile;
    const int last_valid = n - (tile0 + tiles - 1) * kTile;

    // 1. Cache the diagonal block (of L, or of its inverse): tile (q, p), q >= p, at q (q + 1) / 2 + p.
    for (int idx = warp; owner && idx < P * (P + 1) / 2; idx += kWarps) {
      int q = 0;
      while ((q + 1) * (q + 2) / 2 <= idx) ++q;
      const int p = idx - q * (q + 1) / 2;
      if (q >= tiles) continue;
      T row[kTile];
      if (inv != nullptr)
        warp_load_tile(inverse_tile(inv, tile0 + q, tile0 + p), kInvBlock, kTile, kTile, row);
      else
        warp_load_tile(L + (row0 + q * kTile) + (row0 + p * kTile) * lda, lda, min(kTile, n - row0 - q * kTile),
                       min(kTile, n - row0 - p * kTile), row);
      warp_store_tile(row, diag + idx * kTileSmem, Trans);
    }
    // Right-hand sides of the block row (only this block writes these rows).
    for (int e = threadIdx.x; owner && e < P * kTile * K; e += kThreads) {
      const int k = e / (P * kTile), rr = e % (P * kTile), gr = row0 + rr;
      r[rr * K + k] = (gr < n && k < prhs) ? __ldcg(Xp + gr + k * ldx) : T(0);
    }

    // 2. The bulk of this chunk: warp w takes tile row w % P and every (kWarps / P)-th tile column.
    T acc[K];
#pragma unroll
    for (int k = 0; k < K; ++k) acc[k] = T(0);
    const int tr = tile0 + warp % P;
    if (tr < ntiles) {
      // Tile columns [begin, end) in solve order: the owner takes the kNearTiles next to the diagonal (all
      // of them when the row is not split), chunk c the far columns c * chunk_tiles ...
      const int far = far_columns<P, Trans>(t, ntiles, nbr, chunk_tiles);
      const int begin = owner ? far : chunk * chunk_tiles;
      const int end = owner ? row_columns<P, Trans>(t, ntiles, nbr) : min(far, (chunk + 1) * chunk_tiles);
      const int stride = kWarps / P;
      const int rows_tr = min(kTile, n - tr * kTile);
      auto load = [&](int m, T(&row)[kTile]) {
        if (Trans) {
          const int tc = ntiles - 1 - m;
          warp_load_tile(L + tc * kTile + tr * kTile * lda, lda, min(kTile, n - tc * kTile), rows_tr, row);
        } else {
          warp_load_tile(L + tr * kTile + m * kTile * lda, lda, rows_tr, kTile, row);
        }
      };
      auto column = [&](int m) { return Trans ? ntiles - 1 - m : m; };
      // Loads this lane's published x rows of tile column tc into registers (rows past n and columns
      // past nrhs read as zero); true if all of this lane's are published (vote for the tile).
      auto load_x = [&](int tc, T(&v)[K]) {
        const int xr = tc * kTile + lane;
        bool ready = true;
#pragma unroll
        for (int k = 0; k < K; ++k) {
          v[k] = T(0);
          if (xr < n && k < prhs) {
            const bits_of<T> b = load_published(pubp + xr + k * ldp);
            ready = ready && b != kUnpublished<T>;
            v[k] = value_of<T>(b);
          }
        }
        return ready;
      };
      auto put_x = [&](const T(&v)[K], T* slot) {
#pragma unroll
        for (int k = 0; k < K; ++k) slot[lane * K + k] = v[k];
      };
      // Waits (bounded) until tile column tc is published and stages it into slot.
      auto wait_x = [&](int tc, T* slot) {
        T v[K];
        Backoff backoff;
        backoff.quick = kQuickPolls;
        while (!__all_sync(0xffffffffu, load_x(tc, v)))
          if (!backoff.pause(status, t)) return false;
        put_x(v, slot);
        return true;
      };
      // The owner of a split row folds the other chunks' partial sums of its tile row into acc (warps
      // w < P) just before its tiles next to the diagonal, which wait on the block row solved just before:
      // the other chunks have had the most time by then, and the owner is not yet on the critical path.
      T* const row_partial = partial + std::size_t(slot_row) * P * kTile * K;
      bool fetched = !(owner && chunks > 1 && warp < P);
      auto fetch_partials = [&]() {
        int ok = 1;
        if (lane == 0) {
          int seen = acquire_load(&chunks_done[slot_row]);
          for (int poll = 0; poll < kQuickPolls && seen < chunks - 1; ++poll) seen = acquire_load(&chunks_done[slot_row]);
          if (seen < chunks - 1 && !wait_at_least(&chunks_done[slot_row], chunks - 1, status, t)) ok = 0;
        }
        if (!__shfl_sync(0xffffffffu, ok, 0)) return false;
        T* const mine = row_partial + (warp % P) * kTile * K + lane * K;
#pragma unroll
        for (int k = 0; k < K; ++k) {
          acc[k] += __ldcg(mine + k);
          mine[k] = T(0);
        }
        fetched = true;
        return true;
      };
      // Two tile buffers used in turn (process(a, b) then process(b, a)), so that a tile is never copied
      // from one to the other: a register copy waits for the loads, which put a memory latency in the
      // middle of the previous tile's work (Nsight Compute, L^T at n = 16384).
      T tile_a[kTile], tile_b[kTile];
      T acc_lane[kLaneAcc ? kTile : 1];  // kLaneAcc: lane r's products with its x for every column
#pragma unroll
      for (int c = 0; c < (kLaneAcc ? kTile : 1); ++c) acc_lane[c] = T(0);
      T x_lane = T(0);      // kLaneAcc: this lane's x of the current tile column
      bool staged = false;  // x of the current tile already loaded (found published during the previous tile)
      int m = begin + warp / P;
      // One tile column m of the bulk: issue the loads of the tile after it into `next`, wait for the x of
      // m, multiply `cur`. False when a wait timed out.
      auto process = [&](int j, T(&cur)[kTile], T(&next)[kTile]) {
        const bool more = m + stride < end;
        if (more) load(m + stride, next);
        const bool near_diagonal = Trans ? column(m) < tile0 + tiles + P : column(m) >= tile0 - P;
        if (!fetched && near_diagonal && !fetch_partials()) return false;
        if constexpr (kLaneAcc) {
          // L^T with one right-hand side: lane r holds row r of the tile of L and x of that row, and adds
          // its products to all 32 columns; one reduction across the lanes after the last tile replaces a
          // shared-memory transpose per tile.
          if (!staged) {
            T v[1];
            Backoff backoff;
            backoff.quick = kQuickPolls;
            while (!__all_sync(0xffffffffu, load_x(column(m), v)))
              if (!backoff.pause(status, t)) return false;
            x_lane = v[0];
          }
          T xnext[1] = {T(0)};
          const bool next_lane_ready = more && load_x(column(m + stride), xnext);
#pragma unroll
          for (int c = 0; c < kTile; ++c) acc_lane[c] = fma(cur[c], x_lane, acc_lane[c]);
          staged = __all_sync(0xffffffffu, next_lane_ready);
          x_lane = xnext[0];
        } else {
          T* const slot = xs + (j & 1) * kTile * K;
          if (!staged && !wait_x(column(m), slot)) return false;
          // Issue the loads of the next tile's x now; they arrive while this tile is multiplied.
          T xnext[K];
          const bool next_lane_ready = more && load_x(column(m + stride), xnext);
          __syncwarp();
          if (Trans) {
            warp_store_tile(cur, sc, true);
            warp_read_tile(sc, cur);
          }
          warp_tile_matvec<T, K>(cur, slot, acc);
          staged = __all_sync(0xffffffffu, next_lane_ready);
          if (staged) put_x(xnext, xs + ((j + 1) & 1) * kTile * K);
          __syncwarp();
        }
        m += stride;
        return true;
      };
      bool ok = true;
      if (m < end) load(m, tile_a);
#pragma unroll 1
      for (int j = 0; ok && m < end; j += 2) {
        ok = process(j, tile_a, tile_b);
        if (ok && m < end) ok = process(j + 1, tile_b, tile_a);
      }
      if (!ok && lane == 0) failed_s = 1;
      if constexpr (kLaneAcc) {
        // Reduce-scatter across the lanes: after the step of width w, entry i < w holds column
        // i + (lane & ~(w - 1) & 31) summed over the 32 / w lanes that share those bits of `lane`; after
        // the last step entry 0 is column `lane` summed over the warp.
#pragma unroll
        for (int step = 1; step < kTile; step *= 2) {
          const int w = kTile / 2 / step;
          const bool upper = (lane & w) != 0;
#pragma unroll
          for (int i = 0; i < w; ++i) {
            const T send = upper ? acc_lane[i] : acc_lane[i + w];
            const T keep = upper ? acc_lane[i + w] : acc_lane[i];
            acc_lane[i] = keep + __shfl_xor_sync(0xffffffffu, send, w);
          }
        }
        acc[0] += acc_lane[0];
      }
      if (!fetched && !failed_s && !fetch_partials() && lane == 0) failed_s = 1;
    }

    // 3. Reduce the warps' partial sums. A non-owner chunk adds them into the row's global partial sums
    //    and counts itself done (release); the owner (which folded the other chunks' sums in during the
    //    bulk, clearing them for the next launch) subtracts them from the right-hand sides.
#pragma unroll
    for (int k = 0; k < K; ++k) xs[lane * K + k] = acc[k];
    __syncthreads();
    if (failed_s) break;
    T* const row_partial = partial + std::size_t(slot_row) * P * kTile * K;
    if (!owner) {
      for (int e = threadIdx.x; e < P * kTile * K; e += kThreads) {
        const int q = e / (kTile * K), within = e % (kTile * K);
        T sum = T(0);
        for (int w = q; w < kWarps; w += P) sum += stage[w * 2 * kTile * K + within];
        atomicAdd(row_partial + e, sum);
      }
      __syncthreads();
      if (threadIdx.x == 0) release_add(&chunks_done[slot_row], 1);
      continue;
    }
    for (int e = threadIdx.x; e < P * kTile * K; e += kThreads) {
      const int q = e / (kTile * K), within = e % (kTile * K);
      T sum = T(0);
      for (int w = q; w < kWarps; w += P) sum += stage[w * 2 * kTile * K + within];
      r[e] -= sum;
    }
    if (chunks > 1 && threadIdx.x == 0) device_atomic_int(chunks_done[slot_row]).store(0, cuda::memory_order_relaxed);
    __syncthreads();
    if (inv != nullptr)
      block_apply_inverse<T, K, P, kWarps>(diag, r, stage, Trans, tiles, Xp, ldx, pubp, ldp, row0, n, prhs);
    else
      block_solve_diagonal<T, K, P>(diag, r, Trans, unit, tiles, last_valid, Xp, ldx, pubp, ldp, row0, n, prhs,
                                    status);
    // Reset this block row's share of the other publication buffer (what the launch before wrote there),
    // so that the next launch finds it unpublished.
    const long long owners = (long long)nbr * panels, share = (reset_count + owners - 1) / owners;
    for (long long e = slot_row * share + threadIdx.x; e < min((slot_row + 1) * share, reset_count); e += kThreads)
      reinterpret_cast<bits_of<T>*>(pub_other)[e] = kUnpublished<T>;
  }

  // The last block out resets the counters for the next launch (every ticket has been taken by then).
  if (threadIdx.x == 0) {
    if (device_atomic_int(counters[kExits]).fetch_add(1, cuda::memory_order_acq_rel) == int(gridDim.x) - 1) {
      device_atomic_int(counters[kTicket]).store(0, cuda::memory_order_relaxed);
      device_atomic_int(counters[kExits]).store(0, cuda::memory_order_relaxed);
    }
  }
}

/// Step 1 of the inversion: one warp per 32 x 32 diagonal tile (all kInvTiles tiles of every 128-block,
/// tiles past n becoming the identity): load, pad with the identity, invert (Higham), store column-major
/// into the diagonal position of its 128-block.
template <typename T>
__global__ void __launch_bounds__(kTile) invert_tiles_kernel(int n, const T* __restrict__ L, long long lda, T* inv,
                                                             bool unit, DeviceStatus* status) {
  __shared__ T m[kTileSmem];
  __shared__ T orig[kTileSmem];
  const int lane = threadIdx.x, t = blockIdx.x;
  const int valid = max(0, min(kTile, n - t * kTile));
  T row[kTile];
  warp_load_tile(L + std::size_t(min(t * kTile, n - 1)) * (lda + 1), lda, valid, valid, row);
#pragma unroll
  for (int c = 0; c < kTile; ++c)
    if (lane >= valid || c >= valid) row[c] = (lane == c) ? T(1) : T(0);
  warp_invert_tile(row, m, orig, unit, valid, status, t * kTile);
  T* out = inverse_tile(inv, t, t);
#pragma unroll
  for (int c = 0; c < kTile; ++c) out[c * kInvBlock + lane] = m[lane * kTileLd + c];
}

/// Steps 2 and 3 of the inversion: combine inverted diagonal blocks of size s (32, then 64) into blocks of
/// size 2 s inside each 128-block, by the same recursion one level up (Higham; Hogg 2013): with A^{-1} and
/// C^{-1} known, the off-diagonal block of [A 0; B C]^{-1} is X = -C^{-1} (B A^{-1}). One thread block per
/// pair (blockIdx.x: 128-block, blockIdx.y: pair). Dynamic shared memory: 3 s (s + 1) elements.
template <typename T>
__global__ void __launch_bounds__(kCombineThreads) combine_inverse_kernel(int n, const T* __restrict__ L, long long lda, T* inv,
                                                              int s) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* const b = reinterpret_cast<T*>(smem_raw);  // B, then B A^{-1}
  T* const a = b + s * (s + 1);                   // A^{-1}
  T* const c = a + s * (s + 1);                   // C^{-1}
  const int ld = s + 1;
  const int local = blockIdx.y * 2 * s;                        // first row of A inside the 128-block
  const long long base = (long long)blockIdx.x * kInvBlock + local;  // first row of A in L
  T* const block = inv + std::size_t(blockIdx.x) * kInvBlock * kInvBlock;
  for (int e = threadIdx.x; e < s * s; e += blockDim.x) {
    const int i = e % s, j = e / s;
    const long long row = base + s + i, col = base + j;
    b[i * ld + j] = (row < n && col < n) ? L[row + col * lda] : T(0);
    a[i * ld + j] = (i >= j) ? block[(local + i) + std::size_t(local + j) * kInvBlock] : T(0);
    c[i * ld + j] = (i >= j) ? block[(local + s + i) + std::size_t(local + s + j) * kInvBlock] : T(0);
  }
  __syncthreads();
  constexpr int kMaxPerThread = 64 * 64 / kCombineThreads;
  T t[kMaxPerThread];
#pragma unroll
  for (int q = 0; q < kMaxPerThread; ++q) {
    const int e = threadIdx.x + q * blockDim.x;
    t[q] = T(0);
    if (e < s * s) {
      const int i = e % s, j = e / s;
      for (int l = j; l < s; ++l) t[q] = fma(b[i * ld + l], a[l * ld + j], t[q]);
    }
  }
  __syncthreads();
#pragma unroll
  for (int q = 0; q < kMaxPerThread; ++q) {
    const int e = threadIdx.x + q * blockDim.x;
    if (e < s * s) b[(e % s) * ld + e / s] = t[q];
  }
  __syncthreads();
  for (int e = threadIdx.x; e < s * s; e += blockDim.x) {
    const int i = e % s, j = e / s;
    T sum = T(0);
    for (int l = 0; l <= i; ++l) sum = fma(c[i * ld + l], b[l * ld + j], sum);
    block[(local + s + i) + std::size_t(local + j) * kInvBlock] = -sum;
  }
}

/// One launch: nrhs right-hand sides (columns of X) in panels of K columns.
template <typename T, int K, int P, bool Trans>
void launch_trsm(int n, int nrhs, const T* L, int lda, const T* inv, T* X, int ldx, bool unit, int chunk_tiles,
                 DenseTrsvWorkspace& ws, cudaStream_t stream) {
  auto* kernel = &trsm_kernel<T, K, P, Trans>;
  constexpr std::size_t smem = trsm_smem_bytes<T, K, P, Trans>();
  // Once per instantiation: raise the dynamic shared-memory limit and read the occupancy.
  static const int blocks_per_sm = [&] {
    SPADE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    int blocks = 0;
    SPADE_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, kThreads, smem));
    if (blocks < 1) throw ResourceError("dense_trsm: kernel does not fit on a multiprocessor");
    return blocks;
  }();
  const int ntiles = (n + kTile - 1) / kTile;
  const int nbr = (ntiles + P - 1) / P;
  const int panels = (nrhs + K - 1) / K;
  long long tasks = 0;
  for (int t = 0; t < nbr; ++t) tasks += row_chunks<P, Trans>(t, ntiles, nbr, chunk_tiles);
  tasks *= panels;
  if (tasks > std::numeric_limits<int>::max())
    throw InvalidInput("dense_trsm: " + std::to_string(tasks) + " tasks in one launch overflow the int ticket; "
                       "lower options.panels_per_launch or raise options.chunk_columns");
  const int grid = int(std::min<long long>(tasks, blocks_per_sm * ws.multiprocessors()));
  // Per block row and panel: a count of finished chunks and the chunks' partial sums (P * 32 * K values).
  const std::size_t slots = std::size_t(panels) * (ntiles + kInvTiles);
  const std::size_t done_bytes = (slots * sizeof(int) + 255) / 256 * 256;
  const std::size_t partial_bytes = slots * kTile * K * sizeof(T);
  char* const aux = static_cast<char*>(ws.scratch(done_bytes + partial_bytes, stream));
  // Publication: column k of the launch's solution at pub + k * ldp.
  const long long ldp = std::int64_t(ntiles) * kTile;
  const std::size_t columns = std::max(panels * K, kMaxPanel);
  const auto buffers = ws.publication(columns * ldp * sizeof(T), ((nrhs - 1) * ldp + n) * sizeof(T), stream);
  const long long reset_count = (buffers.other_dirty_bytes + sizeof(T) - 1) / sizeof(T);
  int* counters = ws.device_counters();
  auto* status = reinterpret_cast<DeviceStatus*>(counters + kCounterInts);
  kernel<<<grid, kThreads, smem, stream>>>(n, nrhs, L, lda, inv, X, ldx, unit, chunk_tiles, panels,
                                           counters, status, reinterpret_cast<int*>(aux),
                                           reinterpret_cast<T*>(aux + done_bytes), static_cast<T*>(buffers.current),
                                           static_cast<T*>(buffers.other), ldp, reset_count);
  SPADE_CUDA_CHECK_LAUNCH();
}

template <typename T, int K, int P>
void dispatch_trans(bool trans, int n, int nrhs, const T* L, int lda, const T* inv, T* X, int ldx, bool unit,
                    int chunk_tiles, DenseTrsvWorkspace& ws, cudaStream_t stream) {
  if (trans)
    launch_trsm<T, K, P, true>(n, nrhs, L, lda, inv, X, ldx, unit, chunk_tiles, ws, stream);
  else
    launch_trsm<T, K, P, false>(n, nrhs, L, lda, inv, X, ldx, unit, chunk_tiles, ws, stream);
}

template <typename T, int K>
void dispatch_rows(int rows_per_block, bool trans, int n, int nrhs, const T* L, int lda, const T* inv, T* X,
                   int ldx, bool unit, int chunk_tiles, DenseTrsvWorkspace& ws, cudaStream_t stream) {
  switch (rows_per_block) {
    case 32: dispatch_trans<T, K, 1>(trans, n, nrhs, L, lda, inv, X, ldx, unit, chunk_tiles, ws, stream); break;
    case 64: dispatch_trans<T, K, 2>(trans, n, nrhs, L, lda, inv, X, ldx, unit, chunk_tiles, ws, stream); break;
    default: dispatch_trans<T, K, 4>(trans, n, nrhs, L, lda, inv, X, ldx, unit, chunk_tiles, ws, stream); break;
  }
}

void require(bool ok, const std::string& message) {
  if (!ok) throw InvalidInput(message);
}

}  // namespace
}  // namespace spade::kernels::dense

namespace spade {

using namespace spade::kernels::dense;

DenseTrsvWorkspace::DenseTrsvWorkspace() {
  int device = 0;
  SPADE_CUDA_CHECK(cudaGetDevice(&device));
  SPADE_CUDA_CHECK(cudaDeviceGetAttribute(&multiprocessors_, cudaDevAttrMultiProcessorCount, device));
  static_assert(sizeof(kernels::DeviceStatus) % sizeof(int) == 0, "the status follows the counters");
  const std::size_t bytes = kCounterInts * sizeof(int) + sizeof(kernels::DeviceStatus);
  SPADE_CUDA_CHECK(cudaMalloc(&counters_, bytes));
  SPADE_CUDA_CHECK(cudaMemset(counters_, 0, bytes));
}

void DenseTrsvWorkspace::set_spin_limit(long long polls) {
  if (polls < 0) throw InvalidInput("DenseTrsvWorkspace::set_spin_limit: polls = " + std::to_string(polls) + " < 0");
  auto* status = reinterpret_cast<kernels::DeviceStatus*>(counters_ + kCounterInts);
  SPADE_CUDA_CHECK(cudaMemcpy(&status->spin_limit, &polls, sizeof(polls), cudaMemcpyHostToDevice));
}

DenseTrsvWorkspace::~DenseTrsvWorkspace() {
  cudaFree(published_);
  cudaFree(scratch_);
  cudaFree(counters_);
}

DenseTrsvWorkspace::Publication DenseTrsvWorkspace::publication(std::size_t bytes, std::size_t written,
                                                                cudaStream_t stream) {
  if (bytes > published_bytes_) {
    SPADE_CUDA_CHECK(cudaStreamSynchronize(stream));
    SPADE_CUDA_CHECK(cudaFree(published_));
    published_ = nullptr;
    published_bytes_ = 0;
    SPADE_CUDA_CHECK(cudaMalloc(&published_, 2 * bytes));
    published_bytes_ = bytes;
    SPADE_CUDA_CHECK(cudaMemsetAsync(published_, 0xff, 2 * bytes, stream));
    dirty_[0] = dirty_[1] = 0;
  }
  epoch_ ^= 1;
  char* const base = static_cast<char*>(published_);
  Publication p{base + epoch_ * published_bytes_, base + (epoch_ ^ 1) * published_bytes_, dirty_[epoch_ ^ 1]};
  dirty_[epoch_] = written;
  dirty_[epoch_ ^ 1] = 0;
  return p;
}

void* DenseTrsvWorkspace::scratch(std::size_t bytes, cudaStream_t stream) {
  if (bytes > scratch_bytes_) {
    SPADE_CUDA_CHECK(cudaStreamSynchronize(stream));
    SPADE_CUDA_CHECK(cudaFree(scratch_));
    scratch_ = nullptr;
    scratch_bytes_ = 0;
    SPADE_CUDA_CHECK(cudaMalloc(&scratch_, bytes));
    scratch_bytes_ = bytes;
    SPADE_CUDA_CHECK(cudaMemsetAsync(scratch_, 0, bytes, stream));
  }
  return scratch_;
}

void DenseTrsvWorkspace::check(cudaStream_t stream) {
  SPADE_CUDA_CHECK(cudaStreamSynchronize(stream));
  kernels::DeviceStatus status{};
  SPADE_CUDA_CHECK(cudaMemcpy(&status, counters_ + kCounterInts, sizeof(status), cudaMemcpyDeviceToHost));
  if (status.code == kernels::kStatusOk) return;
  SPADE_CUDA_CHECK(cudaMemset(counters_, 0, (kCounterInts + 2) * sizeof(int)));  // counters, code, index
  if (scratch_ != nullptr) SPADE_CUDA_CHECK(cudaMemset(scratch_, 0, scratch_bytes_));
  if (published_ != nullptr) SPADE_CUDA_CHECK(cudaMemset(published_, 0xff, 2 * published_bytes_));
  dirty_[0] = dirty_[1] = 0;
  if (status.code == kernels::kStatusZeroPivot)
    throw NumericalError(NumericalError::Kind::singular, status.index,
                         "dense triangular solve: zero diagonal element in row " + std::to_string(status.index));
  throw NumericalError(NumericalError::Kind::no_progress, status.index,
                       "dense triangular solve: a spin-wait timed out (block row ticket " +
                           std::to_string(status.index) + "): a dependency never arrived");
}

std::size_t dense_trsv_inverse_size(int n) {
  require(n >= 0, "dense_trsv_inverse_size: n = " + std::to_string(n) + " < 0");
  return std::size_t((n + kInvBlock - 1) / kInvBlock) * kInvBlock * kInvBlock;
}

template <typename T>
void dense_trsv_invert_diagonal(Diagonal diag, int n, const T* L, int lda, T* inv, DenseTrsvWorkspace& ws,
                                cudaStream_t stream) {
  require(n >= 0, "dense_trsv_invert_diagonal: n = " + std::to_string(n) + " < 0");
  require(lda >= std::max(1, n), "dense_trsv_invert_diagonal: lda = " + std::to_string(lda) + " < max(1, n)");
  if (n == 0) return;
  require(L != nullptr, "dense_trsv_invert_diagonal: L is null");
  require(inv != nullptr, "dense_trsv_invert_diagonal: inv is null");
  auto* status = reinterpret_cast<kernels::DeviceStatus*>(ws.device_counters() + kCounterInts);
  const int blocks = (n + kInvBlock - 1) / kInvBlock;
  invert_tiles_kernel<T><<<blocks * kInvTiles, kTile, 0, stream>>>(n, L, lda, inv, diag == Diagonal::unit, status);
  SPADE_CUDA_CHECK_LAUNCH();
  static const bool configured = [] {
    const int most = 3 * 64 * 65 * int(sizeof(T));
    SPADE_CUDA_CHECK(cudaFuncSetAttribute(&combine_inverse_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, most));
    return true;
  }();
  (void)configured;
  for (int s = kTile; s < kInvBlock; s *= 2) {
    const dim3 grid(blocks, kInvBlock / (2 * s));
    combine_inverse_kernel<T><<<grid, kCombineThreads, 3 * s * (s + 1) * sizeof(T), stream>>>(n, L, lda, inv, s);
    SPADE_CUDA_CHECK_LAUNCH();
  }
}

template <typename T>
void dense_trsm(Transpose trans, Diagonal diag, int n, int nrhs, const T* L, int lda, const T* inv, T* X, int ldx,
                DenseTrsvWorkspace& ws, cudaStream_t stream, const DenseTrsvOptions& options) {
  require(n >= 0, "dense_trsm: n = " + std::to_string(n) + " < 0");
  require(nrhs >= 0, "dense_trsm: nrhs = " + std::to_string(nrhs) + " < 0");
  require(lda >= std::max(1, n), "dense_trsm: lda = " + std::to_string(lda) + " < max(1, n)");
  require(ldx >= std::max(1, n), "dense_trsm: ldx = " + std::to_string(ldx) + " < max(1, n)");
  const int rows = options.rows_per_block;
  require(rows == 0 || rows == 32 || rows == 64 || rows == 128,
          "dense_trsm: options.rows_per_block = " + std::to_string(rows) + " is not 0, 32, 64 or 128");
  const int chunk = options.chunk_columns;
  require(chunk == DenseTrsvOptions::kAutoChunk || (chunk >= 0 && chunk % kInvBlock == 0),
          "dense_trsm: options.chunk_columns = " + std::to_string(chunk) +
              " is not kAutoChunk (-1) or a non-negative multiple of 128");
  const int panels = options.panels_per_launch;
  require(panels >= 0 && panels <= kMaxPanelsPerLaunch,
          "dense_trsm: options.panels_per_launch = " + std::to_string(panels) + " is not in 0 .. " +
              std::to_string(kMaxPanelsPerLaunch));
  const bool t = trans == Transpose::yes, unit = diag == Diagonal::unit;
  const int auto_chunk = nrhs == 1 && n > 8192 ? 512 : 0;
  const int chunk_tiles = (chunk == DenseTrsvOptions::kAutoChunk ? auto_chunk : chunk) / kTile;
  if (n == 0 || nrhs == 0) return;
  require(L != nullptr, "dense_trsm: L is null");
  require(X != nullptr, "dense_trsm: X is null");
  const int rows_per_block = rows != 0 ? rows : n <= 32 ? 32 : n <= 64 ? 64 : 128;
  // Panels of 8 columns (4 or 1 when nrhs is smaller), up to `panels` of them per launch.
  const int width = nrhs == 1 ? 1 : nrhs <= 4 ? 4 : kMaxPanel;
  const int per_launch = width * (panels != 0 ? panels : kMaxPanelsPerLaunch);
  for (int first = 0; first < nrhs; first += per_launch) {
    const int count = std::min(per_launch, nrhs - first);
    T* Xp = X + std::size_t(first) * ldx;
    if (width == 1)
      dispatch_rows<T, 1>(rows_per_block, t, n, count, L, lda, inv, Xp, ldx, unit, chunk_tiles, ws, stream);
    else if (width == 4)
      dispatch_rows<T, 4>(rows_per_block, t, n, count, L, lda, inv, Xp, ldx, unit, chunk_tiles, ws, stream);
    else
      dispatch_rows<T, 8>(rows_per_block, t, n, count, L, lda, inv, Xp, ldx, unit, chunk_tiles, ws, stream);
  }
}

template <typename T>
void dense_trsv(Transpose trans, Diagonal diag, int n, const T* L, int lda, const T* inv, T* x,
                DenseTrsvWorkspace& ws, cudaStream_t stream, const DenseTrsvOptions& options) {
  dense_trsm<T>(trans, diag, n, 1, L, lda, inv, x, std::max(1, n), ws, stream, options);
}

#define SPADE_DENSE_TRSV_INSTANTIATE(T)                                                                          \
  template void dense_trsv_invert_diagonal<T>(Diagonal, int, const T*, int, T*, DenseTrsvWorkspace&,            \
                                              cudaStream_t);                                                    \
  template void dense_trsm<T>(Transpose, Diagonal, int, int, const T*, int, const T*, T*, int,                  \
                              DenseTrsvWorkspace&, cudaStream_t, const DenseTrsvOptions&);                      \
  template void dense_trsv<T>(Transpose, Diagonal, int, const T*, int, const T*, T*, DenseTrsvWorkspace&,       \
                              cudaStream_t, const DenseTrsvOptions&);
SPADE_DENSE_TRSV_INSTANTIATE(double)
SPADE_DENSE_TRSV_INSTANTIATE(float)
#undef SPADE_DENSE_TRSV_INSTANTIATE

}  // namespace spade
