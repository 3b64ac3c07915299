// The supernodal solve kernels (kernels/supernodal_kernels.hpp): persistent, synchronization-free sweeps
// over the schedule of solve/supernodal_schedule.hpp, and the warp-level selective inversion of narrow
// supernodes.
//
// Every warp of a sweep takes tasks through an atomic ticket in the schedule's order, so a task only waits
// on tasks that earlier tickets handed to running warps (Liu et al., "A synchronization-free algorithm for
// parallel sparse triangular solves", Euro-Par 2016; Hogg 2013's dynamic block-row assignment). A task
// first loads everything that does not depend on the sweep (its part of M_s = [V; W], its row indices,
// the right-hand side b or the forward result y), then waits on its supernode's counter (relaxed polls,
// one acquire fence: kernels/sync.cuh), reads the few values its dependencies produced, multiplies, adds
// its results atomically where other tasks add too, and releases the counter its dependents wait on. So
// on the critical path of the assembly tree a hand-off costs the wait, one round trip to L2 and the
// arithmetic, not the panel's loads (Hogg 2013: separate the data request from its use). Spin-waits are
// bounded and report kStatusSpinTimeout.
//
// Layout of the vectors: row i's K right-hand sides are contiguous (acc[i * K + j]), so one row index
// gathers or scatters all K values of a row.
#include <cuda/atomic>

#include <algorithm>
#include <type_traits>

#include "kernels/cuda_check.hpp"
#include "kernels/dense_trsv.cuh"
#include "kernels/supernodal_kernels.hpp"

namespace spade::kernels {
namespace {

constexpr int kTile = 32;            // rows and columns of a tile (solve/supernodal_schedule.hpp)
constexpr int kGroupEntries = 512;   // panel entries of a group, hence also its rows
constexpr int kGroupColumns = 64;    // columns of a group, hence also its supernodes
constexpr unsigned kFull = 0xffffffffu;

/// Per-warp shared memory for width K and panel type V: a group's panels (in V: an FP32 sweep stages half
/// the bytes, and so fits a fifth block of warps on a multiprocessor at K = 1), rows and supernode offsets,
/// its columns' right-hand sides (forward) or solution (backward) and forward result y; for K = 1 the
/// solution on a group's rows outside the group (backward). A tile uses the same space from `base` as
/// scratch: forward, its right-hand side (32 K doubles) and for K > 1 its results' transpose (32 (K + 1));
/// backward for K > 1, the tile's transpose and right-hand sides (32 x 32 + 32 K).
template <int K, typename V>
struct WarpSmem {
  static constexpr int kExternal = K == 1 ? kGroupEntries : 0;
  static constexpr std::size_t kGroupBytes =
      (2 * kGroupColumns * K + kExternal) * sizeof(double) + kGroupEntries * sizeof(V);
  static constexpr std::size_t kTileBytes = (K == 1 ? 0 : kTile * kTile + kTile * K) * sizeof(double);
  static constexpr std::size_t kRegionBytes = ((kGroupBytes > kTileBytes ? kGroupBytes : kTileBytes) + 7) / 8 * 8;
  static constexpr std::size_t kInts = kGroupEntries + 3 * (kGroupColumns + 1);
  static constexpr std::size_t kBytes = (kRegionBytes + kInts * sizeof(int) + 15) / 16 * 16;
  static_assert(kTile * (2 * K + 1) * sizeof(double) <= kRegionBytes, "a forward tile's scratch fits");
  double* base;      // the region of doubles and panels, from the start (a tile's scratch)
  double* rhs;       // kGroupColumns * K: forward right-hand side / backward solution on the group's columns
  double* forward;   // kGroupColumns * K: y on the group's columns (forward: staged for one coalesced store)
  double* external;  // kExternal: backward, K = 1: x on the group's rows that lie outside it
  V* panel;          // kGroupEntries
  int* rows;         // kGroupEntries
  int* first_col;    // kGroupColumns + 1, relative to the group's first column
  int* first_row;    // relative to the group's first row index
  int* first_entry;  // relative to the group's first panel entry
  __device__ explicit WarpSmem(char* bytes) {
    double* d = reinterpret_cast<double*>(bytes);
    base = d;
    rhs = d;
    forward = rhs + kGroupColumns * K;
    external = forward + kGroupColumns * K;
    panel = reinterpret_cast<V*>(external + kExternal);
    int* i = reinterpret_cast<int*>(bytes + kRegionBytes);
    rows = i;
    first_col = rows + kGroupEntries;
    first_row = first_col + kGroupColumns + 1;
    first_entry = first_row + kGroupColumns + 1;
  }
};

/// The panel values a sweep reads: the FP64 panels, or their FP32 copy (SupernodalView::values_single).
template <typename V>
__device__ inline const V* panel_values(const SupernodalView& v) {
  if constexpr (std::is_same_v<V, double>)
    return v.values;
  else
    return v.values_single;
}

template <typename V>
struct Supernode {
  int f;              // first column
  int k;              // columns
  int m;              // rows
  long long rp;       // first of its row indices
  const V* panel;
};

template <typename V>
__device__ inline Supernode<V> supernode(const SupernodalView& v, int s) {
  Supernode<V> n;
  n.f = v.supernode_begin[s];
  n.k = v.supernode_begin[s + 1] - n.f;
  n.rp = v.row_ptr[s];
  n.m = static_cast<int>(v.row_ptr[s + 1] - n.rp);
  n.panel = panel_values<V>(v) + v.panel_offset[s];
  return n;
}

/// Warp: lane 0 waits until *counter >= target (bounded, acquire); the answer goes to every lane.
__device__ inline bool warp_wait(int* counter, int target, DeviceStatus* status, int who) {
  int ok = 1;
  if ((threadIdx.x & 31) == 0) ok = wait_at_least(counter, target, status, who);
  ok = __shfl_sync(kFull, ok, 0);
  __syncwarp();
  return ok != 0;
}

/// Lane 0 records the time (ns) in slot `slot` of the pass's trace, if it has one.
__device__ inline void stamp(const SupernodalPass& p, long long slot) {
  if (p.trace == nullptr || (threadIdx.x & 31) != 0) return;
  unsigned long long now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  p.trace[slot] = now;
}

/// The pass's right-hand side b(orig, j), scaled by scale_in[orig] where the pass has a scaling.
__device__ inline double pass_rhs(const SupernodalPass& p, long long orig, int j) {
  const double b = p.b[orig + j * p.ldb];
  return p.scale_in != nullptr ? p.scale_in[orig] * b : b;
}

/// Writes the solution's x(orig, j), scaled by scale_out[orig] where the pass has a scaling.
__device__ inline void write_solution(const SupernodalPass& p, long long orig, int j, double x) {
  p.x_out[orig + j * p.ldx] = p.scale_out != nullptr ? p.scale_out[orig] * x : x;
}

/// Loads *p (in FP64), or 0 where `inside` is false, without ever forming an address outside the data (the
/// load reads a zero in device memory instead; see warp_load_tile in kernels/dense_trsv.cuh).
template <typename V>
__device__ inline double load_or_zero(const V* p, bool inside) {
  return static_cast<double>(__ldg(inside ? p : dense::zero_element<V>()));
}

/// Warp: dst[e] = load(e) for e < count, each lane with B loads in flight before it stores any (a loop
/// of load-store pairs costs a memory round trip per 32 elements: the store waits for its load, and the
/// next load may not pass a store that could alias it).
template <int B, typename T, typename Load>
__device__ inline void warp_copy(T* dst, int count, Load load) {
  const int lane = threadIdx.x & 31;
  for (int e0 = 0; e0 < count; e0 += 32 * B) {
    T t[B];
#pragma unroll
    for (int i = 0; i < B; ++i) {
      const int e = e0 + lane + 32 * i;
      t[i] = e < count ? load(e) : T{};
    }
#pragma unroll
    for (int i = 0; i < B; ++i) {
      const int e = e0 + lane + 32 * i;
      if (e < count) dst[e] = t[i];
    }
  }
}

/// One step of a transposing butterfly over N values: lanes whose bit `half` is clear keep p[0 .. half),
/// the others p[half .. 2 half) (moved down), and each adds the partner lane's copy of the half it keeps.
template <int half, int N>
__device__ inline void butterfly_step(double (&p)[N]) {
  const bool upper = (threadIdx.x & half) != 0;
#pragma unroll
  for (int i = 0; i < half; ++i) {
    const double send = upper ? p[i] : p[i + half];
    const double keep = upper ? p[i + half] : p[i];
    p[i] = keep + __shfl_xor_sync(kFull, send, half);
  }
}

/// Warp: lane L holds p[c], its row's products for the columns c of a 32-column tile; returns to lane L
/// the sum over the 32 lanes of p[L]: five butterfly steps, 31 shuffles. Overwrites p.
__device__ inline double reduce_columns32(double (&p)[32]) {
  butterfly_step<16>(p);
  butterfly_step<8>(p);
  butterfly_step<4>(p);
  butterfly_step<2>(p);
  butterfly_step<1>(p);
  return p[0];
}

/// The same for an 8-column strip: returns to lane L the sum over all lanes of p[L & 7] (three butterfly
/// steps, then a reduction over lane bits 3 and 4: 9 shuffles).
__device__ inline double reduce_columns8(double (&p)[8]) {
  butterfly_step<4>(p);
  butterfly_step<2>(p);
  butterfly_step<1>(p);
  double sum = p[0];
  sum += __shfl_xor_sync(kFull, sum, 8);
  sum += __shfl_xor_sync(kFull, sum, 16);
  return sum;
}

/// Warp: a tile's 32 x 32 block of M_s into registers, lane r holding row row0 + r: a[c] = M(row0 + r, col0 + c),
/// zero outside the panel. The 32 loads are coalesced (one per column) and all in flight at once.
template <typename V>
__device__ inline void load_tile(const Supernode<V>& n, int row0, int col0, double (&a)[kTile]) {
  const int row = row0 + (threadIdx.x & 31);
  const int ncols = min(kTile, n.k - col0);
  const V* p = n.panel + static_cast<long long>(col0) * n.m + row;
#pragma unroll
  for (int c = 0; c < kTile; ++c) a[c] = load_or_zero(p + static_cast<long long>(c) * n.m, row < n.m && c < ncols);
}

// ---- forward: z = M_s r_s; rows < k are y_s, the rest is subtracted from the rows below ----

template <int K, typename V>
__device__ bool forward_tile(const SupernodalView& v, const SupernodalWorkspace& w, const SupernodalPass& p, int s,
                             int row0, int col0, double* scratch, long long slot) {
  const int lane = threadIdx.x & 31;
  const Supernode<V> n = supernode<V>(v, s);
  const int ncols = min(kTile, n.k - col0), row = row0 + lane;
  const long long base = static_cast<long long>(n.f + col0) * K;  // the tile's columns in acc, y and x
  // Before the wait: the tile, the row's target, b on the tile's columns into rs (32 x K, element e =
  // c K + j, so that the acc values below arrive in contiguous lanes); zero past the panel, where the
  // tile's zeros meet it (shared memory holds whatever earlier kernels left, NaN included).
  double a[kTile];
  load_tile(n, row0, col0, a);
  const int target = row < n.m && row >= n.k ? v.row_indices[n.rp + row] : -1;
  double* rs = scratch;
  warp_copy<K>(rs, kTile * K, [&](int e) {
    const int c = e / K, j = e % K;
    return c < ncols && j < p.nrhs ? pass_rhs(p, v.perm[n.f + col0 + c], j) : 0.0;
  });
  if (row0 == col0) {  // one tile per column block: it clears that block's backward sums
    for (int e = lane; e < ncols * K; e += 32) w.x[base + e] = 0.0;
    if (row0 == 0 && lane == 0) store_relaxed(&w.done[s], 0);
  }
  const int need = v.need[s];
  if (need > 0 && !warp_wait(&w.ready[s], need, w.status, s)) return false;
  stamp(p, slot + 1);
  // r_s = b minus the updates of the descendants (each lane its own elements of rs, coalesced).
  double updates[K];
#pragma unroll
  for (int i = 0; i < K; ++i) {
    const int e = lane + 32 * i;
    updates[i] = e < ncols * K ? __ldcg(&w.acc[base + e]) : 0.0;
  }
#pragma unroll
  for (int i = 0; i < K; ++i) rs[lane + 32 * i] -= updates[i];
  __syncwarp();
  double z[K];
#pragma unroll
  for (int j = 0; j < K; ++j) z[j] = 0.0;
#pragma unroll
  for (int c = 0; c < kTile; ++c)
#pragma unroll
    for (int j = 0; j < K; ++j) z[j] = fma(a[c], rs[c * K + j], z[j]);
  if constexpr (K == 1) {
    if (row < n.k) {
      double* yr = w.y + n.f + row;
      if (n.k > kTile)  // several column blocks add into y_s
        atomicAdd(yr, z[0]);
      else
        *yr = z[0];
    } else if (row < n.m) {
      atomicAdd(w.acc + target, z[0]);
    }
  } else {
    // Row r's K results go out from K contiguous lanes (a transpose through shared memory, rows padded
    // to K + 1 against bank conflicts): a store or atomic then covers 32 / K rows' 64-byte spans instead
    // of 32 rows' single values, a quarter of the L2 sectors at K = 8.
    double* Z = scratch + kTile * K;
#pragma unroll
    for (int j = 0; j < K; ++j) Z[lane * (K + 1) + j] = z[j];
    __syncwarp();
#pragma unroll
    for (int i = 0; i < K; ++i) {  // every lane in every round: the shuffle needs them all
      const int e = lane + 32 * i, r = e / K, j = e % K, rr = row0 + r;
      const int t = __shfl_sync(kFull, target, r);
      if (rr >= n.m) continue;
      const double value = Z[r * (K + 1) + j];
      if (rr < n.k) {
        double* yr = w.y + static_cast<long long>(n.f + rr) * K + j;
        if (n.k > kTile)
          atomicAdd(yr, value);
        else
          *yr = value;
      } else {
        atomicAdd(w.acc + static_cast<long long>(t) * K + j, value);
      }
    }
  }
  __syncwarp();
  if (lane == 0) {
    const int parent = v.parent[s];
    if (parent >= 0) release_add(&w.ready[parent], 1);
  }
  return true;
}

/// Warp: a group's supernode offsets, panels and row indices into shared memory (two rounds of loads:
/// the offsets, then everything they locate).
template <int K, typename V>
__device__ void stage_group(const SupernodalView& v, int first, int last, const WarpSmem<K, V>& sm) {
  const int lane = threadIdx.x & 31;
  const int count = last - first + 1;
  const int lo = v.supernode_begin[first];
  const long long rp0 = v.row_ptr[first], po0 = v.panel_offset[first];
  const int rows = static_cast<int>(v.row_ptr[last + 1] - rp0);
  const int entries = static_cast<int>(v.panel_offset[last + 1] - po0);
  for (int i = lane; i <= count; i += 32) {
    sm.first_col[i] = v.supernode_begin[first + i] - lo;
    sm.first_row[i] = static_cast<int>(v.row_ptr[first + i] - rp0);
    sm.first_entry[i] = static_cast<int>(v.panel_offset[first + i] - po0);
  }
  const V* values = panel_values<V>(v);
  warp_copy<8>(sm.panel, entries, [&](int e) { return __ldg(values + po0 + e); });
  warp_copy<8>(sm.rows, rows, [&](int i) { return __ldg(v.row_indices + rp0 + i); });
}

/// A group: supernodes first .. last one after another out of shared memory; the group's columns'
/// right-hand side stays in shared memory, updates of rows outside the group go to acc.
template <int K, typename V>
__device__ void forward_group(const SupernodalView& v, const SupernodalWorkspace& w, const SupernodalPass& p,
                              int first, int last, const WarpSmem<K, V>& sm, long long slot) {
  const int lane = threadIdx.x & 31;
  const int lo = v.supernode_begin[first], hi = v.supernode_begin[last + 1];
  for (int c = lane; c < hi - lo; c += 32) {
    const long long orig = v.perm[lo + c];
#pragma unroll
    for (int j = 0; j < K; ++j) sm.rhs[c * K + j] = j < p.nrhs ? pass_rhs(p, orig, j) : 0.0;
  }
  stage_group<K, V>(v, first, last, sm);
  __syncwarp();
  stamp(p, slot + 1);
  for (int i = 0; i <= last - first; ++i) {
    const int f = sm.first_col[i], k = sm.first_col[i + 1] - f;
    const int r0 = sm.first_row[i], m = sm.first_row[i + 1] - r0;
    const V* P = sm.panel + sm.first_entry[i];
    const double* r = sm.rhs + f * K;
    for (int rb = 0; rb < m; rb += 32) {
      const int row = rb + lane;
      double z[K];
#pragma unroll
      for (int j = 0; j < K; ++j) z[j] = 0.0;
      int outside = -1;  // the row's index where it lies outside the group
      if (row < m) {
        for (int c = 0; c < k; ++c) {
          const double a = P[row + c * m];
#pragma unroll
          for (int j = 0; j < K; ++j) z[j] = fma(a, r[c * K + j], z[j]);
        }
        if (row < k) {
#pragma unroll
          for (int j = 0; j < K; ++j) sm.forward[(f + row) * K + j] = z[j];
        } else {
          const int target = sm.rows[r0 + row];
          if (target < hi) {
#pragma unroll
            for (int j = 0; j < K; ++j) sm.rhs[(target - lo) * K + j] -= z[j];
          } else {
            outside = target;
          }
        }
      }
      if (outside >= 0)
#pragma unroll
        for (int j = 0; j < K; ++j) atomicAdd(w.acc + static_cast<long long>(outside) * K + j, z[j]);
    }
    __syncwarp();  // the next supernode reads what this one subtracted
  }
  // y on the group's columns, staged in shared memory, goes out in contiguous lanes.
  for (int e = lane; e < (hi - lo) * K; e += 32) w.y[static_cast<long long>(lo) * K + e] = sm.forward[e];
  __syncwarp();
  if (lane == 0) {
    const int parent = v.parent[last];
    if (parent >= 0) release_add(&w.ready[parent], 1);
  }
}

template <int K, typename V>
__global__ void __launch_bounds__(kSupernodalThreads)
    forward_kernel(SupernodalView v, SupernodalWorkspace w, SupernodalPass p) {
  extern __shared__ __align__(16) char smem[];
  const int lane = threadIdx.x & 31;
  const WarpSmem<K, V> sm(smem + (threadIdx.x >> 5) * WarpSmem<K, V>::kBytes);
  if (blockIdx.x == 0 && threadIdx.x == 0) w.tickets[1] = 0;  // the backward sweep's, idle until then
  for (;;) {
    int t = 0;
    if (lane == 0) t = take_ticket(&w.tickets[0]);
    t = __shfl_sync(kFull, t, 0);
    if (t >= v.num_tasks) return;
    const SupernodalTask task = v.tasks[t];
    const long long slot = 3ll * t;
    stamp(p, slot);
    if (task.z < 0) {
      forward_group<K, V>(v, w, p, task.x, task.y, sm, slot);
    } else if (!forward_tile<K, V>(v, w, p, task.x, task.z, task.w, sm.base, slot)) {
      return;  // a wait gave up; the status says why
    }
    stamp(p, slot + 2);
  }
}

// ---- backward: x_s = M_s^T [y_s; -x(rows below)] ----

template <int K, typename V>
__device__ bool backward_tile(const SupernodalView& v, const SupernodalWorkspace& w, const SupernodalPass& p, int s,
                              int row0, int col0, double* scratch, long long slot) {
  const int lane = threadIdx.x & 31;
  const Supernode<V> n = supernode<V>(v, s);
  const int ncols = min(kTile, n.k - col0), row = row0 + lane;
  // Before the wait: the tile, the targets, y on the diagonal block's rows (the forward sweep's, final):
  // for K > 1 element e = r K + j of the tile's 32 x K right-hand side per lane (yv[i] is e = lane + 32 i),
  // so that contiguous lanes read contiguous values.
  double a[kTile];
  load_tile(n, row0, col0, a);
  const int target = row < n.m && row >= n.k ? v.row_indices[n.rp + row] : -1;
  double yv[K];
#pragma unroll
  for (int i = 0; i < K; ++i) {
    const int e = lane + 32 * i, rr = row0 + e / K;
    yv[i] = rr < n.k ? __ldcg(&w.y[static_cast<long long>(n.f + row0) * K + e]) : 0.0;
  }
  // Only rows below the diagonal block read the ancestors' x: a tile of the diagonal block needs nothing
  // of the backward sweep and does not wait (the host's copy of this rule: backward_tile_waits in
  // solve/supernodal_schedule.hpp).
  const int parent = row0 + kTile <= n.k ? -1 : v.parent[s];
  if (parent >= 0 && !warp_wait(&w.done[parent], v.units[parent], w.status, s)) return false;
  stamp(p, slot + 1);
  const long long base = static_cast<long long>(n.f + col0) * K;  // the tile's columns in x
  if constexpr (K == 1) {
    const double vv = target >= 0 ? -__ldcg(&w.x[target]) : yv[0];
#pragma unroll
    for (int c = 0; c < kTile; ++c) a[c] *= vv;
    const double sum = reduce_columns32(a);
    if (lane < ncols) atomicAdd(w.x + base + lane, sum);
  } else {
    // (A^T R) for the K right-hand sides R through shared memory: lane r stores its row of the tile as
    // column r of the transpose (the XOR swizzle keeps both the stores and the column reads free of
    // bank conflicts), then lane c sums its column against the rows' values: no shuffles. The sums go
    // out through a second transpose (rows padded to K + 1), K contiguous lanes per column.
    double* T = scratch;
    double* R = scratch + kTile * kTile;
#pragma unroll
    for (int i = 0; i < K; ++i) {
      const int e = lane + 32 * i, t = __shfl_sync(kFull, target, e / K);
      if (t >= 0) yv[i] = -__ldcg(&w.x[static_cast<long long>(t) * K + e % K]);
    }
#pragma unroll
    for (int i = 0; i < K; ++i) R[lane + 32 * i] = yv[i];
#pragma unroll
    for (int c = 0; c < kTile; ++c) T[c * kTile + (lane ^ c)] = a[c];
    __syncwarp();
    double sum[K];
#pragma unroll
    for (int j = 0; j < K; ++j) sum[j] = 0.0;
#pragma unroll
    for (int r = 0; r < kTile; ++r) {
      const double t = T[lane * kTile + (r ^ lane)];
#pragma unroll
      for (int j = 0; j < K; ++j) sum[j] = fma(t, R[r * K + j], sum[j]);
    }
    __syncwarp();  // every lane has read T before it holds the sums
    double* S = T;
#pragma unroll
    for (int j = 0; j < K; ++j) S[lane * (K + 1) + j] = sum[j];
    __syncwarp();
#pragma unroll
    for (int i = 0; i < K; ++i) {
      const int e = lane + 32 * i;
      if (e < ncols * K) atomicAdd(w.x + base + e, S[(e / K) * (K + 1) + e % K]);
    }
  }
  __syncwarp();
  int before = 0;
  if (lane == 0) before = device_atomic_int(w.done[s]).fetch_add(1, cuda::memory_order_acq_rel);
  before = __shfl_sync(kFull, before, 0);
  stamp(p, slot + 2);
  if (before == v.units[s] - 1) {
    // The last tile of s: every partial sum of x_s is in. Write x_s out and restore the invariants of
    // acc, y and ready for the next pass (kernels/supernodal_kernels.hpp).
    __syncwarp();
    const long long first = static_cast<long long>(n.f) * K;
    for (int e0 = 0; e0 < n.k * K; e0 += 32 * K) {  // each lane's K loads in flight before its stores
      double xv[K];
      int orig[K];
#pragma unroll
      for (int i = 0; i < K; ++i) {
        const int e = e0 + lane + 32 * i;
        xv[i] = e < n.k * K ? __ldcg(&w.x[first + e]) : 0.0;
        orig[i] = e < n.k * K ? v.perm[n.f + e / K] : 0;
      }
#pragma unroll
      for (int i = 0; i < K; ++i) {
        const int e = e0 + lane + 32 * i, j = e % K;
        if (e >= n.k * K) continue;
        if (j < p.nrhs) write_solution(p, orig[i], j, xv[i]);
        w.acc[first + e] = 0.0;
        if (n.k > kTile) w.y[first + e] = 0.0;
      }
    }
    if (lane == 0) store_relaxed(&w.ready[s], 0);
  }
  return true;
}

template <int K, typename V>
__device__ bool backward_group(const SupernodalView& v, const SupernodalWorkspace& w, const SupernodalPass& p,
                               int first, int last, const WarpSmem<K, V>& sm, long long slot) {
  const int lane = threadIdx.x & 31;
  const int lo = v.supernode_begin[first], hi = v.supernode_begin[last + 1];
  // Before the wait: the group, y on its columns (final), the permutation of its columns.
  stage_group<K, V>(v, first, last, sm);
  int orig[kGroupColumns / 32];
#pragma unroll
  for (int h = 0; h < kGroupColumns / 32; ++h) {
    const int c = lane + 32 * h;
    orig[h] = c < hi - lo ? v.perm[lo + c] : 0;
  }
  warp_copy<8>(sm.forward, (hi - lo) * K, [&](int e) { return __ldcg(&w.y[static_cast<long long>(lo) * K + e]); });
  __syncwarp();  // the staging is visible to every lane (a root group has no wait, whose barrier would do)
  const int parent = v.parent[last];
  if (parent >= 0 && !warp_wait(&w.done[parent], v.units[parent], w.status, first)) return false;
  stamp(p, slot + 1);
  const int rows = sm.first_row[last - first + 1];
  if constexpr (K == 1) {  // the solution outside the group, one round trip for the whole group
    warp_copy<8>(sm.external, rows, [&](int i) {
      const int t = sm.rows[i];
      return t >= hi ? __ldcg(&w.x[t]) : 0.0;
    });
  }
  __syncwarp();
  for (int i = last - first; i >= 0; --i) {
    const int f = sm.first_col[i], k = sm.first_col[i + 1] - f;
    const int r0 = sm.first_row[i], m = sm.first_row[i + 1] - r0;
    const V* P = sm.panel + sm.first_entry[i];
    double* xo = sm.rhs + f * K;
    for (int c = lane; c < k; c += 32)
#pragma unroll
      for (int j = 0; j < K; ++j) xo[c * K + j] = 0.0;
    __syncwarp();
    // One column (most supernodes of a 2D mesh's factor): each lane sums over its own rows and the warp
    // reduces once per supernode, instead of a reduction over 8 mostly empty columns per 32 rows.
    double column[K];
#pragma unroll
    for (int j = 0; j < K; ++j) column[j] = 0.0;
    for (int rb = 0; rb < m; rb += 32) {  // warp-uniform: the shuffles below need every lane
      const int row = rb + lane;
      const bool active = row < m;
      double vv[K];
#pragma unroll
      for (int j = 0; j < K; ++j) vv[j] = 0.0;
      if (active) {
        if (row < k) {
#pragma unroll
          for (int j = 0; j < K; ++j) vv[j] = sm.forward[(f + row) * K + j];
        } else {
          const int t = sm.rows[r0 + row];
          if (t < hi) {
#pragma unroll
            for (int j = 0; j < K; ++j) vv[j] = -sm.rhs[(t - lo) * K + j];
          } else if constexpr (K == 1) {
            vv[0] = -sm.external[r0 + row];
          } else {
#pragma unroll
            for (int j = 0; j < K; ++j) vv[j] = -__ldcg(&w.x[static_cast<long long>(t) * K + j]);
          }
        }
      }
      if (k == 1) {
        const double a = active ? P[row] : 0.0;
#pragma unroll
        for (int j = 0; j < K; ++j) column[j] = fma(a, vv[j], column[j]);
        continue;
      }
      for (int c0 = 0; c0 < k; c0 += 8) {
        double a[8];
#pragma unroll
        for (int q = 0; q < 8; ++q) a[q] = active && c0 + q < k ? P[row + (c0 + q) * m] : 0.0;
#pragma unroll
        for (int j = 0; j < K; ++j) {
          double part[8];
#pragma unroll
          for (int q = 0; q < 8; ++q) part[q] = a[q] * vv[j];
          const double sum = reduce_columns8(part);
          if (lane < 8 && c0 + lane < k) xo[(c0 + lane) * K + j] += sum;
        }
      }
    }
    if (k == 1) {
      if constexpr (K == 8) {
        const double sum = reduce_columns8(column);  // lane L: the sum of column[L & 7]
        if (lane < 8) xo[lane] = sum;
      } else {
#pragma unroll
        for (int j = 0; j < K; ++j) {
          double sum = column[j];
#pragma unroll
          for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(kFull, sum, offset);
          if (lane == 0) xo[j] = sum;
        }
      }
    }
    __syncwarp();  // x_s is final before the group's descendants of s read it
  }
  stamp(p, slot + 2);
#pragma unroll
  for (int h = 0; h < kGroupColumns / 32; ++h) {
    const int c = lane + 32 * h;
    if (c < hi - lo)
#pragma unroll
      for (int j = 0; j < K; ++j)
        if (j < p.nrhs) write_solution(p, orig[h], j, sm.rhs[c * K + j]);
  }
  __syncwarp();  // every lane is done with the shared memory before the warp's next task writes it
  return true;
}

template <int K, typename V>
__global__ void __launch_bounds__(kSupernodalThreads)
    backward_kernel(SupernodalView v, SupernodalWorkspace w, SupernodalPass p) {
  extern __shared__ __align__(16) char smem[];
  const int lane = threadIdx.x & 31;
  const WarpSmem<K, V> sm(smem + (threadIdx.x >> 5) * WarpSmem<K, V>::kBytes);
  if (blockIdx.x == 0 && threadIdx.x == 0) w.tickets[0] = 0;  // the forward sweep's, done by now
  for (;;) {
    int t = 0;
    if (lane == 0) t = take_ticket(&w.tickets[1]);
    t = __shfl_sync(kFull, t, 0);
    if (t >= v.num_tasks) return;
    const SupernodalTask task = v.backward_tasks[t];
    const long long slot = 3ll * (v.num_tasks + t);
    stamp(p, slot);
    const bool ok = task.z < 0 ? backward_group<K, V>(v, w, p, task.x, task.y, sm, slot)
                               : backward_tile<K, V>(v, w, p, task.x, task.z, task.w, sm.base, slot);
    if (!ok) return;
  }
}

// ---- selective inversion of narrow supernodes ----

constexpr int kInvertWarps = 2;  // two 32 x 33 FP64 tiles per warp in static shared memory

__global__ void __launch_bounds__(kInvertWarps * 32)
    invert_small_kernel(const int* list, int count, const int* supernode_begin, const long long* row_ptr,
                        const long long* panel_offset, double* values, DeviceStatus* status) {
  __shared__ double inverse[kInvertWarps][dense::kTileSmem];
  __shared__ double scratch[kInvertWarps][dense::kTileSmem];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int index = blockIdx.x * kInvertWarps + warp;
  if (index >= count) return;
  const int s = list[index];
  const int f = supernode_begin[s], k = supernode_begin[s + 1] - f;
  const int m = static_cast<int>(row_ptr[s + 1] - row_ptr[s]);
  double* panel = values + panel_offset[s];
  const double* V = inverse[warp];
  double row[dense::kTile];
  dense::warp_load_tile(panel, m, k, k, row);
#pragma unroll
  for (int c = 0; c < dense::kTile; ++c)
    if (c == lane && lane >= k) row[c] = 1.0;  // [L11 0; 0 I], whose inverse is [V 0; 0 I]
  dense::warp_invert_tile(row, inverse[warp], scratch[warp], false, k, status, f);
  // W = L21 V, one row per lane (all of the row's loads before its stores).
  for (int r0 = k; r0 < m; r0 += 32) {
    const int r = r0 + lane;
    if (r >= m) continue;
    double l[dense::kTile];
#pragma unroll
    for (int c = 0; c < dense::kTile; ++c)
      l[c] = *(c < k ? panel + r + static_cast<long long>(c) * m : dense::zero_element<double>());
#pragma unroll
    for (int j = 0; j < dense::kTile; ++j) {
      if (j >= k) break;
      double sum = 0.0;
#pragma unroll
      for (int c = j; c < dense::kTile; ++c) sum = fma(l[c], V[c * dense::kTileLd + j], sum);
      panel[r + static_cast<long long>(j) * m] = sum;
    }
  }
  // V over L11 (with its zeros above the diagonal).
  if (lane < k)
    for (int c = 0; c < k; ++c) panel[lane + static_cast<long long>(c) * m] = V[lane * dense::kTileLd + c];
}

// ---- selective inversion of mid-size supernodes (32 < k <= kInvertMidColumns) ----
//
// Both steps solve with the original L11 by substitution, as cuBLAS's trsm does for wider blocks: the
// residuals W L11 - L21 and L11 V - I stay of the order of eps |W| |L11| and eps |L11| |V| (Du Croz &
// Higham, "Stability of methods for matrix inversion", IMA J. Numer. Anal. 12, 1992), which is what the
// solve's backward error rests on. Forming W as L21 V, or V from already inverted trailing blocks, would
// carry the inverse's forward error, up to cond(L11) eps, into the solve. Hence W first, then V.
//
// The last supernodes of a factorization are inverted while the caller waits (docs/benchmarks/solve.md),
// so these kernels are built for latency: W's blocks read L11 from shared memory, one tile column at a
// time, and each tile column of V has a block of its own.

constexpr int kMidTiles = kInvertMidColumns / dense::kTile;  // tiles of the widest block: one warp each
constexpr int kMidThreads = kMidTiles * 32;
constexpr int kMidRows = 32;       // rows of W per block of mid_w_kernel
constexpr int kMidRowBlocks = 64;  // the most blocks of rows a supernode gets; they stride over the rest
constexpr int kMidWLd = kInvertMidColumns + 1;  // odd: a warp's lanes on 32 rows of a column hit distinct banks
constexpr std::size_t kMidWSmem =
    (std::size_t(kMidRows) * kMidWLd + std::size_t(kInvertMidColumns) * dense::kTileLd) * sizeof(double);
constexpr std::size_t kMidVSmem = (2ull * kMidTiles + 1) * dense::kTileSmem * sizeof(double);
constexpr int kMidPairs = kMidTiles * (kMidTiles + 1) / 2;  // tiles on and below the diagonal
constexpr int kMidPlaceThreads = 256;

/// W = L21 L11^{-1} in place (W L11 = L21 by substitution with the original L11, before it is inverted) for
/// the supernode list[blockIdx.x]: blockIdx.y strides over its blocks of kMidRows rows, each staged in
/// shared memory. Per tile of 32 columns, from the last to the first, with L11's rows from the tile's first
/// on in shared memory: the columns right of it (solved) are subtracted by all threads, then one warp
/// solves the tile's triangle, a row per lane in registers, from its last column to its first.
__global__ void __launch_bounds__(kMidThreads)
    mid_w_kernel(const int* list, const int* supernode_begin, const long long* row_ptr,
                 const long long* panel_offset, double* values) {
  extern __shared__ __align__(16) double mid_smem[];
  double* const w = mid_smem;                       // w[i * kMidWLd + c]: row i of the block, column c
  double* const l = mid_smem + kMidRows * kMidWLd;  // l[q * kTileLd + c] = L11(c0 + q, c0 + c)
  const int s = list[blockIdx.x];
  const int k = supernode_begin[s + 1] - supernode_begin[s];
  const long long m = row_ptr[s + 1] - row_ptr[s];
  double* const panel = values + panel_offset[s];
  const int tiles = (k + 31) / 32;
  const int lane = threadIdx.x & 31;
  for (long long r0 = k + static_cast<long long>(blockIdx.y) * kMidRows; r0 < m;
       r0 += static_cast<long long>(gridDim.y) * kMidRows) {
    const int rows = m - r0 < kMidRows ? static_cast<int>(m - r0) : kMidRows;
    __syncthreads();  // the previous block of rows is written back
    for (int e = threadIdx.x; e < kMidRows * k; e += blockDim.x) {
      const int i = e % kMidRows, c = e / kMidRows;
      w[i * kMidWLd + c] = i < rows ? panel[(r0 + i) + static_cast<long long>(c) * m] : 0.0;
    }
    for (int t = tiles - 1; t >= 0; --t) {
      const int c0 = t * 32, width = min(32, k - c0), c1 = c0 + width, below = k - c0;
      __syncthreads();  // the previous tile is solved and `l` is free
      // L11(c0 .. k-1, c0 .. c1-1); the diagonal tile's entries above its diagonal are not read.
      for (int e = threadIdx.x; e < below * dense::kTile; e += blockDim.x) {
        const int q = e % below, c = e / below;
        l[q * dense::kTileLd + c] = (c < width && q >= c) ? panel[(c0 + q) + static_cast<long long>(c0 + c) * m] : 0.0;
      }
      __syncthreads();
      if (c1 < k) {
        // Lane i's row, columns warp + kMidTiles t of the tile: kColumns independent sums.
        constexpr int kColumns = dense::kTile / kMidTiles;
        const int warp = threadIdx.x >> 5;
        double sum[kColumns];
#pragma unroll
        for (int t = 0; t < kColumns; ++t) sum[t] = w[lane * kMidWLd + c0 + warp + kMidTiles * t];
        for (int q = c1; q < k; ++q) {
          const double x = w[lane * kMidWLd + q];
#pragma unroll
          for (int t = 0; t < kColumns; ++t) sum[t] = fma(-x, l[(q - c0) * dense::kTileLd + warp + kMidTiles * t], sum[t]);
        }
#pragma unroll
        for (int t = 0; t < kColumns; ++t)
          if (warp + kMidTiles * t < width) w[lane * kMidWLd + c0 + warp + kMidTiles * t] = sum[t];
      }
      __syncthreads();
      if (threadIdx.x < 32) {
        // x L(tile) = r: x_c = r_c / L(c, c) from the last column, each subtracted from the columns left of it.
        double x[dense::kTile];
#pragma unroll
        for (int c = 0; c < dense::kTile; ++c) x[c] = c < width ? w[lane * kMidWLd + c0 + c] : 0.0;
#pragma unroll
        for (int c = dense::kTile - 1; c >= 0; --c) {
          if (c >= width) continue;
          x[c] /= l[c * dense::kTileLd + c];
#pragma unroll
          for (int q = 0; q < c; ++q) x[q] = fma(-x[c], l[c * dense::kTileLd + q], x[q]);
        }
#pragma unroll
        for (int c = 0; c < dense::kTile; ++c)
          if (c < width) w[lane * kMidWLd + c0 + c] = x[c];
      }
    }
    __syncthreads();
    for (int e = threadIdx.x; e < kMidRows * k; e += blockDim.x) {
      const int i = e % kMidRows, c = e / kMidRows;
      if (i < rows) panel[(r0 + i) + static_cast<long long>(c) * m] = w[i * kMidWLd + c];
    }
  }
}

/// V = L11^{-1} by block forward substitution L11 V = I on 32 x 32 tiles, one block per tile column j
/// (blockIdx.y) of the supernode list[blockIdx.x]: its warps invert the diagonal tiles p >= j
/// (warp_invert_tile, Higham's method, into shared memory); then tile rows p = j, j + 1, ... are finished
/// one after another, V(p, j) = -L(p, p)^{-1} sum over q = j .. p-1 of L(p, q) V(q, j) (V(j, j) =
/// L(j, j)^{-1}; its product spread over all warps), and each finished tile is added into the sums of the
/// rows below it at once, warp i holding row i's sum. The other columns' blocks read L11's lower triangle
/// meanwhile, so V(p, j) goes, transposed, where nothing is read: its strictly lower entries to tile (j, p)
/// above the diagonal (mid_v_place_kernel moves them down and sets the diagonal).
__global__ void __launch_bounds__(kMidThreads)
    mid_v_kernel(const int* list, const int* supernode_begin, const long long* row_ptr,
                 const long long* panel_offset, double* values, DeviceStatus* status) {
  extern __shared__ __align__(16) double mid_smem[];
  double* const inverse = mid_smem;                                 // the inverted diagonal tiles
  double* const scratch = mid_smem + kMidTiles * dense::kTileSmem;  // per warp
  double* const finished = scratch + kMidTiles * dense::kTileSmem;  // V(p, j) of the current step
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int s = list[blockIdx.x], j = blockIdx.y;
  const int f = supernode_begin[s], k = supernode_begin[s + 1] - f;
  const int tiles = (k + 31) / 32;
  if (j >= tiles) return;
  const long long m = row_ptr[s + 1] - row_ptr[s];
  double* const panel = values + panel_offset[s];
  double* const mine = scratch + warp * dense::kTileSmem;
  const int r = warp * 32 + lane;  // this lane's row of L11 (of tile row `warp`)
  if (warp >= j && warp < tiles) {
    const int valid = min(32, k - warp * 32);
    double row[dense::kTile];
#pragma unroll
    for (int c = 0; c < dense::kTile; ++c)
      row[c] = (lane < valid && c <= lane) ? panel[r + static_cast<long long>(warp * 32 + c) * m] : (lane == c ? 1.0 : 0.0);
    dense::warp_invert_tile(row, inverse + warp * dense::kTileSmem, mine, false, valid, status, f + warp * 32);
  }
  __syncthreads();
  double sum[dense::kTile];  // row r of warp's tile row's sum, sum over finished q of L(warp, q) V(q, j)
#pragma unroll
  for (int c = 0; c < dense::kTile; ++c) sum[c] = 0.0;
  for (int p = j; p < tiles; ++p) {
    const bool below = warp > p && warp < tiles;
    double l[dense::kTile];  // L(warp, p), loaded before the wait for V(p, j)
#pragma unroll
    for (int q = 0; q < dense::kTile; ++q)
      l[q] = (below && r < k && p * 32 + q < k) ? panel[r + static_cast<long long>(p * 32 + q) * m] : 0.0;
    // V(p, j): the inverted diagonal tile, or -L(p, p)^{-1} times the sum of tile row p (staged in its
    // warp's scratch), by all warps: lane c of a warp forms column c of kRows rows.
    const double* d = inverse + p * dense::kTileSmem;
    if (p == j) {
      if (warp == p)
#pragma unroll
        for (int c = 0; c < dense::kTile; ++c) finished[lane * dense::kTileLd + c] = d[lane * dense::kTileLd + c];
    } else {
      const double* staged = scratch + p * dense::kTileSmem;
      if (warp == p)
#pragma unroll
        for (int c = 0; c < dense::kTile; ++c) mine[lane * dense::kTileLd + c] = sum[c];
      __syncthreads();
      constexpr int kRows = dense::kTile / kMidTiles;
      double v[kRows];
#pragma unroll
      for (int i = 0; i < kRows; ++i) v[i] = 0.0;
#pragma unroll
      for (int q = 0; q < dense::kTile; ++q) {
        const double x = staged[q * dense::kTileLd + lane];
#pragma unroll
        for (int i = 0; i < kRows; ++i) v[i] = fma(d[(warp * kRows + i) * dense::kTileLd + q], x, v[i]);
      }
#pragma unroll
      for (int i = 0; i < kRows; ++i) finished[(warp * kRows + i) * dense::kTileLd + lane] = -v[i];
    }
    __syncthreads();  // V(p, j) is in `finished`
    // V(p * 32 + i, j * 32 + lane) to row j * 32 + lane, column p * 32 + i: above the diagonal, coalesced.
    for (int i = warp; i < dense::kTile; i += kMidTiles) {
      const int row = p * 32 + i, col = j * 32 + lane;
      if (row < k && col < row) panel[col + static_cast<long long>(row) * m] = finished[i * dense::kTileLd + lane];
    }
    if (below) {
      // sum(warp) += L(warp, p) V(p, j)
#pragma unroll
      for (int q = 0; q < dense::kTile; ++q)
#pragma unroll
        for (int c = 0; c < dense::kTile; ++c) sum[c] = fma(l[q], finished[q * dense::kTileLd + c], sum[c]);
    }
    __syncthreads();  // `finished` is read before the next V(p, j) replaces it
  }
}

/// The last step of mid_v_kernel for the supernode list[blockIdx.x] and the tile (P, Q), P >= Q, that
/// blockIdx.y numbers: V(P, Q) from its transposed copy in tile (Q, P) into place, zeros above the
/// diagonal, and V's diagonal 1 / L(i, i) (as warp_invert_tile forms it, from the diagonal still there).
__global__ void __launch_bounds__(kMidPlaceThreads)
    mid_v_place_kernel(const int* list, const int* supernode_begin, const long long* row_ptr,
                       const long long* panel_offset, double* values) {
  __shared__ double t[dense::kTile][dense::kTileLd];  // t[a][b] = V(P * 32 + a, Q * 32 + b)
  const int s = list[blockIdx.x];
  const int k = supernode_begin[s + 1] - supernode_begin[s];
  const long long m = row_ptr[s + 1] - row_ptr[s];
  double* const panel = values + panel_offset[s];
  int P = 0, Q = static_cast<int>(blockIdx.y);
  while (Q > P) Q -= ++P;
  if (P * 32 >= k) return;
  const int lane = threadIdx.x & 31;
  constexpr int kRowsPerPass = kMidPlaceThreads / 32;
  for (int b = threadIdx.x >> 5; b < dense::kTile; b += kRowsPerPass) {
    const int row = Q * 32 + lane, col = P * 32 + b;  // V(col, row), above the diagonal
    t[b][lane] = (row < col && col < k) ? panel[row + static_cast<long long>(col) * m] : 0.0;
  }
  __syncthreads();
  for (int b = threadIdx.x >> 5; b < dense::kTile; b += kRowsPerPass) {
    if (P > Q && P * 32 + b < k) panel[(Q * 32 + lane) + static_cast<long long>(P * 32 + b) * m] = 0.0;
    const int row = P * 32 + lane, col = Q * 32 + b;
    if (row >= k || col >= k) continue;
    double& lower = panel[row + static_cast<long long>(col) * m];
    lower = row > col ? t[lane][b] : (row == col ? 1.0 / lower : 0.0);
  }
}

// ---- the panels of an LU factor ----

constexpr int kLuPanelThreads = 128;

/// One block per supernode (a grid-stride loop over first .. last).
__global__ void __launch_bounds__(kLuPanelThreads)
    lu_expand_u_kernel(int first, int last, const int* supernode_begin, const long long* row_ptr,
                       const long long* panel_offset, const long long* u_offset, const double* packed,
                       long long packed_origin, double* u_values) {
  for (int s = first + blockIdx.x; s <= last; s += gridDim.x) {
    const int k = supernode_begin[s + 1] - supernode_begin[s];
    const long long m = row_ptr[s + 1] - row_ptr[s], below = m - k;
    const double* from = packed + (u_offset[s] - packed_origin);
    double* to = u_values + panel_offset[s] + k;
    for (long long e = threadIdx.x; e < below * k; e += blockDim.x) {
      const long long c = e / below, r = e - c * below;
      to[r + c * m] = from[e];
    }
  }
}

__global__ void __launch_bounds__(kLuPanelThreads)
    lu_diagonal_blocks_kernel(int first, int last, const int* supernode_begin, const long long* row_ptr,
                              const long long* panel_offset, double* l_values, double* u_values) {
  for (int s = first + blockIdx.x; s <= last; s += gridDim.x) {
    const int k = supernode_begin[s + 1] - supernode_begin[s];
    const long long m = row_ptr[s + 1] - row_ptr[s];
    double* l = l_values + panel_offset[s];
    double* u = u_values + panel_offset[s];
    const int entries = k * k;
    for (int e = threadIdx.x; e < entries; e += blockDim.x) {
      const int j = e / k, i = e - j * k;
      u[i + j * m] = i >= j ? l[j + i * m] : 0.0;  // U11^T(i, j) = U11(j, i)
    }
    __syncthreads();  // every U11 entry is read before L11's block is overwritten
    for (int e = threadIdx.x; e < entries; e += blockDim.x) {
      const int j = e / k, i = e - j * k;
      if (i <= j) l[i + j * m] = i == j ? 1.0 : 0.0;
    }
    __syncthreads();  // the next supernode of this block starts after
  }
}

/// One block per supernode (a grid-stride loop over first .. last).
__global__ void __launch_bounds__(kLuPanelThreads)
    scatter_panels_kernel(int first, int last, MergedPanels m, const double* staged, double* values) {
  for (int s = first + blockIdx.x; s <= last; s += gridDim.x) {
    const int k = m.supernode_begin[s + 1] - m.supernode_begin[s];
    const long long rows = m.row_ptr[s + 1] - m.row_ptr[s];
    const double* from = staged + m.panel_offset[s];
    double* to = values + m.target_offset[s];
    const long long ld = m.target_rows[s];
    const int* position = m.row_position + m.row_ptr[s];
    const long long column0 = m.column_offset[s];
    for (long long e = threadIdx.x; e < rows * k; e += blockDim.x) {
      const long long j = e / rows, r = e - j * rows;
      if (r >= j) to[position[r] + (column0 + j) * ld] = from[e];  // the zeros above the diagonal stay
    }
  }
}

/// work (k x k, leading dimension k) = the diagonal block of `panel` (leading dimension m) with zeros above
/// its diagonal, and the block becomes the identity.
__global__ void __launch_bounds__(kLuPanelThreads)
    move_diagonal_block_kernel(double* panel, long long m, int k, double* work) {
  const long long count = static_cast<long long>(k) * k;
  for (long long e = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; e < count;
       e += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long j = e / k, i = e - j * k;
    double* entry = panel + i + j * m;
    work[e] = i >= j ? *entry : 0.0;
    if (i >= j) *entry = i == j ? 1.0 : 0.0;
  }
}

/// *info = 1 + the first i with work(i, i) == 0, or 0 (LAPACK's convention), one block.
__global__ void __launch_bounds__(kLuPanelThreads) first_zero_diagonal_kernel(const double* work, int k, int* info) {
  __shared__ int first;
  if (threadIdx.x == 0) first = k;
  __syncthreads();
  for (int i = threadIdx.x; i < k; i += blockDim.x)
    if (work[i + static_cast<long long>(i) * k] == 0.0) atomicMin(&first, i);
  __syncthreads();
  if (threadIdx.x == 0) *info = first < k ? first + 1 : 0;
}

int lu_panel_grid(int first, int last) { return std::max(1, std::min(last - first + 1, 1 << 16)); }

using SweepKernel = void (*)(SupernodalView, SupernodalWorkspace, SupernodalPass);

/// The sweep kernel of width K for a direction and a panel precision: the one place that picks among them.
template <int K>
SweepKernel sweep_kernel(bool forward, PanelPrecision precision) {
  const bool fp32 = precision == PanelPrecision::fp32;
  if (forward) return fp32 ? forward_kernel<K, float> : forward_kernel<K, double>;
  return fp32 ? backward_kernel<K, float> : backward_kernel<K, double>;
}

template <int K>
void sweep_for(bool forward, const SupernodalView& v, const SupernodalWorkspace& w, const SupernodalPass& p,
               PanelPrecision precision, int grid, cudaStream_t stream) {
  sweep_kernel<K>(forward, precision)<<<grid, kSupernodalThreads, supernodal_shared_bytes(K, precision), stream>>>(
      v, w, p);
  SPADE_CUDA_CHECK_LAUNCH();
}

/// Resident blocks per multiprocessor of a sweep kernel of width K in `precision` (its dynamic shared
/// memory allowed first).
template <int K>
int blocks_for(bool forward, PanelPrecision precision) {
  const int bytes = static_cast<int>(supernodal_shared_bytes(K, precision));
  const void* kernel = reinterpret_cast<const void*>(sweep_kernel<K>(forward, precision));
  SPADE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  int blocks = 0;
  SPADE_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, kSupernodalThreads, bytes));
  return blocks;
}

/// out[i] = in[i] rounded to FP32; *overflow = 1 where a finite in[i] rounds to an infinity.
__global__ void round_to_single_kernel(const double* in, float* out, long long count, int* overflow) {
  bool over = false;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const double x = in[i];
    const float y = __double2float_rn(x);
    out[i] = y;
    over = over || (isinf(y) && !isinf(x));
  }
  if (__any_sync(kFull, over) && (threadIdx.x & 31) == 0) atomicExch(overflow, 1);
}

[[noreturn]] void bad_width(int K) {
  throw InvalidInput("supernodal solve: pass width " + std::to_string(K) + " is not 1, 2, 4 or 8");
}

}  // namespace

void launch_scatter_panels(int first, int last, const MergedPanels& panels, const double* staged, double* values,
                           cudaStream_t stream) {
  if (first > last) return;
  scatter_panels_kernel<<<lu_panel_grid(first, last), kLuPanelThreads, 0, stream>>>(first, last, panels, staged, values);
  SPADE_CUDA_CHECK_LAUNCH();
}

void launch_lu_expand_u(int first, int last, const int* supernode_begin, const long long* row_ptr,
                        const long long* panel_offset, const long long* u_offset, const double* packed,
                        long long packed_origin, double* u_values, cudaStream_t stream) {
  if (first > last) return;
  lu_expand_u_kernel<<<lu_panel_grid(first, last), kLuPanelThreads, 0, stream>>>(
      first, last, supernode_begin, row_ptr, panel_offset, u_offset, packed, packed_origin, u_values);
  SPADE_CUDA_CHECK_LAUNCH();
}

void launch_lu_diagonal_blocks(int first, int last, const int* supernode_begin, const long long* row_ptr,
                               const long long* panel_offset, double* l_values, double* u_values, cudaStream_t stream) {
  if (first > last) return;
  lu_diagonal_blocks_kernel<<<lu_panel_grid(first, last), kLuPanelThreads, 0, stream>>>(
      first, last, supernode_begin, row_ptr, panel_offset, l_values, u_values);
  SPADE_CUDA_CHECK_LAUNCH();
}

std::size_t supernodal_shared_bytes(int K, PanelPrecision precision) {
  const bool fp32 = precision == PanelPrecision::fp32;
  std::size_t per_warp = 0;
  switch (K) {
    case 1: per_warp = fp32 ? WarpSmem<1, float>::kBytes : WarpSmem<1, double>::kBytes; break;
    case 2: per_warp = fp32 ? WarpSmem<2, float>::kBytes : WarpSmem<2, double>::kBytes; break;
    case 4: per_warp = fp32 ? WarpSmem<4, float>::kBytes : WarpSmem<4, double>::kBytes; break;
    case 8: per_warp = fp32 ? WarpSmem<8, float>::kBytes : WarpSmem<8, double>::kBytes; break;
    default: bad_width(K);
  }
  return per_warp * (kSupernodalThreads / 32);
}

int supernodal_blocks_per_sm(int K, bool forward, PanelPrecision precision) {
  switch (K) {
    case 1: return blocks_for<1>(forward, precision);
    case 2: return blocks_for<2>(forward, precision);
    case 4: return blocks_for<4>(forward, precision);
    case 8: return blocks_for<8>(forward, precision);
  }
  bad_width(K);
}

void launch_supernodal_forward(int K, const SupernodalView& v, const SupernodalWorkspace& w,
                               const SupernodalPass& p, PanelPrecision precision, int grid, cudaStream_t stream) {
  switch (K) {
    case 1: return sweep_for<1>(true, v, w, p, precision, grid, stream);
    case 2: return sweep_for<2>(true, v, w, p, precision, grid, stream);
    case 4: return sweep_for<4>(true, v, w, p, precision, grid, stream);
    case 8: return sweep_for<8>(true, v, w, p, precision, grid, stream);
  }
  bad_width(K);
}

void launch_supernodal_backward(int K, const SupernodalView& v, const SupernodalWorkspace& w,
                                const SupernodalPass& p, PanelPrecision precision, int grid, cudaStream_t stream) {
  switch (K) {
    case 1: return sweep_for<1>(false, v, w, p, precision, grid, stream);
    case 2: return sweep_for<2>(false, v, w, p, precision, grid, stream);
    case 4: return sweep_for<4>(false, v, w, p, precision, grid, stream);
    case 8: return sweep_for<8>(false, v, w, p, precision, grid, stream);
  }
  bad_width(K);
}

void launch_round_to_single(const double* in, float* out, long long count, int* overflow, cudaStream_t stream) {
  if (count <= 0) return;
  const int threads = 256;
  const int grid = static_cast<int>(std::min<long long>((count + threads - 1) / threads, 8192));
  round_to_single_kernel<<<grid, threads, 0, stream>>>(in, out, count, overflow);
  SPADE_CUDA_CHECK_LAUNCH();
}

void load_supernodal_kernels() {
  int blocks = 0;
  SPADE_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, invert_small_kernel, kInvertWarps * 32, 0));
  // The mid-size W and V kernels need more than the default 48 KB of dynamic shared memory.
  SPADE_CUDA_CHECK(cudaFuncSetAttribute(mid_v_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kMidVSmem)));
  SPADE_CUDA_CHECK(cudaFuncSetAttribute(mid_w_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kMidWSmem)));
  SPADE_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, mid_v_kernel, kMidThreads, kMidVSmem));
  if (blocks < 1) throw ResourceError("the mid-size inversion kernel does not fit on this GPU");
  SPADE_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, mid_w_kernel, kMidThreads, kMidWSmem));
  if (blocks < 1) throw ResourceError("the mid-size inversion kernel does not fit on this GPU");
}

void launch_move_diagonal_block(double* panel, long long m, int k, double* work, int* info, cudaStream_t stream) {
  if (k <= 0) return;
  const long long count = static_cast<long long>(k) * k;
  const int grid = static_cast<int>(std::min<long long>((count + kLuPanelThreads - 1) / kLuPanelThreads, 4096));
  move_diagonal_block_kernel<<<grid, kLuPanelThreads, 0, stream>>>(panel, m, k, work);
  SPADE_CUDA_CHECK_LAUNCH();
  first_zero_diagonal_kernel<<<1, kLuPanelThreads, 0, stream>>>(work, k, info);
  SPADE_CUDA_CHECK_LAUNCH();
}

void launch_invert_small(const int* list, int count, const int* supernode_begin, const long long* row_ptr,
                         const long long* panel_offset, double* values, DeviceStatus* status, cudaStream_t stream) {
  if (count <= 0) return;
  const int grid = (count + kInvertWarps - 1) / kInvertWarps;
  invert_small_kernel<<<grid, kInvertWarps * 32, 0, stream>>>(list, count, supernode_begin, row_ptr, panel_offset,
                                                              values, status);
  SPADE_CUDA_CHECK_LAUNCH();
}

void launch_invert_mid(const int* list, int count, long long rows_below, const int* supernode_begin,
                       const long long* row_ptr, const long long* panel_offset, double* values, DeviceStatus* status,
                       cudaStream_t stream) {
  if (count <= 0) return;
  if (rows_below > 0) {  // W first: it solves with L11 before L11 is inverted
    const long long row_blocks = std::min<long long>((rows_below + kMidRows - 1) / kMidRows, kMidRowBlocks);
    const dim3 grid(static_cast<unsigned>(count), static_cast<unsigned>(row_blocks));
    mid_w_kernel<<<grid, kMidThreads, kMidWSmem, stream>>>(list, supernode_begin, row_ptr, panel_offset, values);
    SPADE_CUDA_CHECK_LAUNCH();
  }
  mid_v_kernel<<<dim3(static_cast<unsigned>(count), kMidTiles), kMidThreads, kMidVSmem, stream>>>(
      list, supernode_begin, row_ptr, panel_offset, values, status);
  SPADE_CUDA_CHECK_LAUNCH();
  mid_v_place_kernel<<<dim3(static_cast<unsigned>(count), kMidPairs), kMidPlaceThreads, 0, stream>>>(
      list, supernode_begin, row_ptr, panel_offset, values);
  SPADE_CUDA_CHECK_LAUNCH();
}

}  // namespace spade::kernels
