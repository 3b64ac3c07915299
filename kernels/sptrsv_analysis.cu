// Analysis kernels of the sparse triangular solve: validation, the internal lower form, transposition,
// level sets by Kahn's topological sort (Li 2017), in-degree counts (Liu et al. 2016) and the row chunks of
// the thread/warp fusion (YuenyeungSpTRSV 2021). Contracts in sptrsv_kernels.hpp.
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <climits>

#include "kernels/sptrsv_common.cuh"

namespace spade::kernels::sptrsv {
namespace {

constexpr int kThreads = 256;

// inspect, scatter and perm_fill: a warp takes 32 consecutive segments (rows or columns), lane l holding
// segment first + l, and sweeps their entries as one range, 32 consecutive entries at a time, each lane
// finding the segment of its entry among the lanes' ends. Loads and stores stay coalesced whatever the
// lengths: a warp per segment leaves most lanes idle on short ones (3D grids: 3 to 13 entries), a lane per
// segment scatters its stores, and a lane alone would keep a long one (arrow matrices such as c-62:
// thousands of entries) busy for the whole analysis.

/// The lane whose segment holds entry k, where lane l holds `end`, the end of its segment, the segments
/// are consecutive and k lies below lane 31's end: the number of lanes whose segment ends at or before k.
__device__ inline int owner_lane(std::int32_t end, std::int32_t k) {
  int lane = 0;
#pragma unroll
  for (int step = kWarpSize / 2; step > 0; step /= 2)
    if (__shfl_sync(kFullMask, end, lane + step - 1) <= k) lane += step;
  return lane;
}

/// inspect_kernel's result for one segment: the first problem found (a kBad* code, 0 if none) and the
/// diagonal entry's position (-1 if absent), gathered in shared memory from the lanes that see its entries.
struct Inspection {
  int code;
  std::int32_t dpos;
};

/// The problem with entry k (index q) of segment o, which starts at begin, or 0.
template <typename T>
__device__ inline int entry_problem(const InputTriangle<T>& in, index_t o, std::int32_t begin, std::int32_t k,
                                    index_t q) {
  // Entries on the wrong side: for CSR lower the column must not exceed the row, and so on.
  const bool inner_le_outer = (in.csr == in.lower);
  if (q < 0 || q >= in.n) return kBadIndex;
  if (k > begin && q <= in.ind[k - 1]) return kUnsorted;
  if (inner_le_outer ? q > o : q < o) return kWrongTriangle;
  return 0;
}

constexpr int kInspectWarps = kThreads / kWarpSize;

template <typename T>
__global__ void __launch_bounds__(kThreads)
    inspect_kernel(InputTriangle<T> in, std::int32_t* count, T* diag, std::int32_t* diag_src,
                   unsigned long long* bad, int* zero_row, int* max_count, int* level) {
  __shared__ Inspection found[kInspectWarps][kWarpSize];
  const index_t first = (blockIdx.x * index_t(blockDim.x) + threadIdx.x) / kWarpSize * kWarpSize;
  if (first >= in.n) return;  // the whole warp
  const int lane = threadIdx.x % kWarpSize;
  Inspection* mine = found[threadIdx.x / kWarpSize];
  const index_t o = first + lane;
  const bool active = o < in.n;
  const std::int32_t begin = active ? in.ptr[o] : 0, end = active ? in.ptr[o + 1] : 0;
  const bool bad_pointer = active && (begin < 0 || end < begin || end > in.nnz ||
                                      (o == in.n - 1 && end != in.nnz) || (o == 0 && begin != 0));
  mine[lane] = {bad_pointer ? int(kBadPointer) : 0, -1};
  __syncwarp();
  if (!__any_sync(kFullMask, bad_pointer)) {
    // The segments are consecutive: sweep [first segment's begin, last active segment's end).
    const std::int32_t from = __shfl_sync(kFullMask, begin, 0);
    const std::int32_t to = __shfl_sync(kFullMask, end, int(min(in.n - first, index_t(kWarpSize))) - 1);
    const std::int32_t lane_end = active ? end : to;
    for (std::int32_t base = from; base < to; base += kWarpSize) {
      const std::int32_t k = base + lane;
      const int owner = owner_lane(lane_end, min(k, to - 1));
      const std::int32_t b = __shfl_sync(kFullMask, begin, owner);
      if (k >= to) continue;
      const index_t q = in.ind[k], s = first + owner;
      const int problem = entry_problem(in, s, b, k, q);
      if (problem != 0) atomicMax(&mine[owner].code, problem);
      else if (q == s) mine[owner].dpos = k;
    }
  } else if (active && !bad_pointer) {
    // Malformed input: a lane per segment, so that the first bad segment is still the one reported.
    for (std::int32_t k = begin; k < end; ++k) {
      const index_t q = in.ind[k];
      const int problem = entry_problem(in, o, begin, k, q);
      if (problem != 0) {
        mine[lane].code = problem;
        break;
      }
      if (q == o) mine[lane].dpos = k;
    }
  }
  __syncwarp();
  const Inspection r = active ? mine[lane] : Inspection{0, -1};
  // Off-diagonal entries kept: none of a bad segment (scatter_kernel then copies nothing of it).
  const std::int32_t kept = active && r.code == 0 ? end - begin - (r.dpos >= 0 ? 1 : 0) : 0;
  if (max_count != nullptr) {
    const int top = __reduce_max_sync(kFullMask, kept);
    if (lane == 0) atomicMax(max_count, top);
  }
  if (!active) return;
  const index_t internal = in.lower ? o : in.n - 1 - o;
  if (level != nullptr) level[internal] = 0;
  count[internal] = kept;
  if (r.code != 0) {
    atomicMin(bad, (static_cast<unsigned long long>(o) << 8) | static_cast<unsigned long long>(r.code));
    return;
  }
  diag_src[internal] = r.dpos;
  const T d = in.unit ? T(1) : (r.dpos < 0 ? T(0) : in.val[r.dpos]);
  diag[internal] = d;
  if (d == T(0)) atomicMin(zero_row, o);
}

template <typename T>
__global__ void scatter_kernel(InputTriangle<T> in, const std::int32_t* out_ptr, const std::int32_t* diag_src,
                               index_t* out_ind, T* out_val, std::int32_t* src, int* kept) {
  if (blockIdx.x == 0 && threadIdx.x == 0) *kept = out_ptr[in.n];
  const index_t first = (blockIdx.x * index_t(blockDim.x) + threadIdx.x) / kWarpSize * kWarpSize;
  if (first >= in.n) return;  // the whole warp
  const int lane = threadIdx.x % kWarpSize;
  const index_t o = first + lane;
  const bool active = o < in.n;
  const std::int32_t begin = active ? in.ptr[o] : 0, end = active ? in.ptr[o + 1] : 0;
  // A malformed segment anywhere in the warp (inspect_kernel reported it, and the analysis stops): nothing.
  if (__any_sync(kFullMask, active && (begin < 0 || end < begin || end > in.nnz))) return;
  const index_t internal = in.lower ? o : in.n - 1 - o;
  const std::int32_t base = active ? out_ptr[internal] : 0, last = active ? out_ptr[internal + 1] - 1 : -1;
  const std::int32_t dpos = active && last >= base ? diag_src[internal] : -1;
  const std::int32_t from = __shfl_sync(kFullMask, begin, 0);
  const std::int32_t to = __shfl_sync(kFullMask, end, int(min(in.n - first, index_t(kWarpSize))) - 1);
  const std::int32_t lane_end = active ? end : to;
  const bool reversed = !in.lower;
  for (std::int32_t at = from; at < to; at += kWarpSize) {
    const std::int32_t k = at + lane;
    const int owner = owner_lane(lane_end, min(k, to - 1));
    const std::int32_t b = __shfl_sync(kFullMask, begin, owner), d = __shfl_sync(kFullMask, dpos, owner);
    const std::int32_t first_out = __shfl_sync(kFullMask, base, owner), last_out = __shfl_sync(kFullMask, last, owner);
    // Nothing off the diagonal, or a segment inspect_kernel found bad (count 0): last_out < first_out.
    if (k >= to || k == d || last_out < first_out) continue;
    const std::int32_t rank = k - b - (d >= 0 && k > d ? 1 : 0);
    // Reversed numbering turns increasing indices into decreasing ones: fill the segment from its end.
    const std::int32_t pos = reversed ? last_out - rank : first_out + rank;
    const index_t q = in.ind[k];
    out_ind[pos] = reversed ? in.n - 1 - q : q;
    out_val[pos] = in.val[k];
    src[pos] = k;
  }
}

__global__ void histogram_kernel(std::int32_t nnz, const index_t* ind, std::int32_t* count, const int* limit) {
  const std::int32_t k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < nnz && (limit == nullptr || k < *limit)) atomicAdd(&count[ind[k]], 1);
}

__global__ void count_max_kernel(index_t n, const std::int32_t* count, int* max_count) {
  const index_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicMax(max_count, count[i]);
}

__global__ void outer_of_kernel(index_t n, const std::int32_t* ptr, index_t* outer) {
  const index_t o = blockIdx.x * blockDim.x + threadIdx.x;
  if (o >= n) return;
  for (std::int32_t k = ptr[o]; k < ptr[o + 1]; ++k) outer[k] = o;
}

__global__ void iota_kernel(std::int32_t count, std::int32_t* out) {
  const std::int32_t k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < count) out[k] = k;
}

template <typename T>
__global__ void transpose_gather_kernel(std::int32_t nnz, const std::int32_t* order, const index_t* outer,
                                        const T* val, const std::int32_t* src, index_t* out_ind, T* out_val,
                                        std::int32_t* out_src) {
  const std::int32_t t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= nnz) return;
  const std::int32_t k = order[t];
  out_ind[t] = outer[k];
  out_val[t] = val[k];
  out_src[t] = src[k];
}

/// Rows with more entries of earlier chunks still to take than this are swept by the whole warp, 32 loads
/// at a time; a lane alone has only a few of its loads in flight at once.
constexpr std::int32_t kLevelsLongRow = kWarpSize;

/// Raises lev to the largest stored level of the entries j = from, from + step, ... below to, all of them
/// entries of earlier chunks, whose level is known, and returns the first entry whose level is not (to if
/// none). A max does not care about order: the sweep does not stop at the first unknown entry, so its
/// loads do not wait on one another.
template <int step>
__device__ inline std::int32_t take_known(const index_t* ind, int* level, std::int32_t from, std::int32_t to,
                                          int& lev) {
  std::int32_t unknown = to;
#pragma unroll 4
  for (std::int32_t j = from; j < to; j += step) {
    const int l = load_relaxed(&level[ind[j]]);
    lev = max(lev, l);
    if (l == 0) unknown = min(unknown, j);
  }
  return unknown;
}

// Kahn's sort seen from the rows (Li 2017): row i's level is fixed once every row it depends on has one,
// i.e. once its last incoming edge is removed. level[i] holds level + 1 so that 0 means "not yet known";
// the value is its own flag (relaxed store and loads, nothing else is published with it).
//
// Thread-level chunks as in the solve of YuenyeungSpTRSV 2021 (thread_chunk in sptrsv_fused.cu): a warp
// takes 32 consecutive rows, chunks handed out in index order by block tickets, a lane per row, writing-
// first. A row's entries of earlier chunks (a prefix: columns are sorted) are swept from memory in every
// pass, from the first one not known yet (take_known); its entries inside the chunk (at most 31, its last
// ones) are taken in order by a shuffle from the producing lane once a ballot shows it done, step after
// step while some lane can take one; a lane stores its level the moment its last entry is in. Rows with
// many entries of earlier chunks left (arrow matrices: thousands) are swept by the whole warp instead, one
// after another, at the start of a pass. The lowest lane not done waits only on earlier chunks, which are
// running, or on lanes below it, so the chunk always progresses; a pass that takes nothing backs off, and
// on giving up every lane stores what it has, so that no waiter hangs. One atomicMax per warp.
//
// Chain chunks: where every row's only entry inside the chunk is the row above (i - 1) or there is none,
// as in grids numbered line by line, the chunk's levels are chains and need no step per row: the stored
// level of lane l is (l + 1) + max(e_j - j) over the lanes j from the head of its chain (the nearest lane
// at or below l without the entry i - 1) to l, e_j being the largest stored level among lane j's entries
// of earlier chunks; one segmented max-scan of five shuffles per pass, and lane l stores its level once
// the lanes from its head to itself have all of theirs (a chunk that straddles two grid lines holds two
// chains, and the second must not wait for the first).
__global__ void __launch_bounds__(kBlockThreads)
    levels_csr_kernel(index_t n, const std::int32_t* ptr, const index_t* ind, int* level, int* max_level,
                      const unsigned long long* bad, Schedule s) {
  const int ticket = block_ticket(s.tickets);
  const int lane = threadIdx.x % kWarpSize;
  const index_t first = (ticket * kBlockWarps + threadIdx.x / kWarpSize) * kWarpSize;
  if (first < n && (bad == nullptr || *bad == ~0ull)) {
    const index_t i = first + lane;
    const bool active = i < n;
    std::int32_t k = active ? ptr[i] : 0;
    const std::int32_t end = active ? ptr[i + 1] : 0;
    std::int32_t inner = end;  // the first entry inside the chunk
    while (inner > k && ind[inner - 1] >= first) --inner;
    int lev = 0;  // the largest stored level taken so far; the row's own stored level once done
    bool done = !active;
    auto finish = [&] {
      store_relaxed(&level[i], ++lev);
      done = true;
    };
    const bool follows = active && end - inner == 1 && ind[inner] == i - 1;  // i - 1 its only entry inside
    const bool chain = __all_sync(kFullMask, !active || end == inner || follows);
    // The head of lane's chain: the nearest lane at or below it that does not follow the one above.
    const int head = kWarpSize - 1 - __clz(__ballot_sync(kFullMask, !follows) & (0xffffffffu >> (31 - lane)));
    if (active && k == end && !chain) finish();
    unsigned ready = __ballot_sync(kFullMask, done);
    Backoff backoff;
    while (ready != kFullMask) {
      const std::int32_t before = k;
      const unsigned long_rows = __ballot_sync(kFullMask, !done && inner - k > kLevelsLongRow);
      for (unsigned rows = long_rows; rows != 0; rows &= rows - 1) {
        const int r = __ffs(rows) - 1;
        int part = 0;
        const std::int32_t from = __shfl_sync(kFullMask, k, r) + lane, to = __shfl_sync(kFullMask, inner, r);
        const std::int32_t unknown = __reduce_min_sync(kFullMask, take_known<kWarpSize>(ind, level, from, to, part));
        part = __reduce_max_sync(kFullMask, part);
        if (lane == r) {
          k = unknown;
          lev = max(lev, part);
        }
      }
      if (!done && k < inner && !((long_rows >> lane) & 1u)) k = take_known<1>(ind, level, k, inner, lev);
      bool progressed = k > before;
      if (chain) {
        // max(e_j - j) over the lanes of the chain up to this one: e_j - j from a lane still to finish,
        // its own scan result from one done (its stored level is that + j + 1).
        int best = !active ? INT_MIN / 2 : done ? lev - 1 - lane : lev - lane;
#pragma unroll
        for (int d = 1; d < kWarpSize; d *= 2) {
          const int below = __shfl_up_sync(kFullMask, best, d);
          if (lane - d >= head) best = max(best, below);
        }
        // A lane finishes once every lane from the head of its chain to itself has all its entries of
        // earlier chunks: a chain publishes row by row as they come, whatever the other chains wait for.
        const unsigned waiting = __ballot_sync(kFullMask, active && k < inner);
        const unsigned from_head = (0xffffffffu >> (31 - lane)) & ~((1u << head) - 1u);
        if (!done && (waiting & from_head) == 0) {
          lev = best + lane;  // finish() adds the 1
          finish();
          progressed = true;
        }
        ready = __ballot_sync(kFullMask, done);
      } else {
        if (!done && k == end) finish();
        ready = __ballot_sync(kFullMask, done);
        // At most kWarpSize shuffle steps per pass, so that a dense chunk still polls now and then.
#pragma unroll 1
        for (int step = 0; step < kWarpSize; ++step) {
          int src = lane;
          bool take = false;
          if (!done && k >= inner && k < end) {
            src = ind[k] - first;
            take = (ready >> src) & 1u;
          }
          if (!__any_sync(kFullMask, take)) break;
          const int l = __shfl_sync(kFullMask, lev, src);
          if (take) {
            lev = max(lev, l);
            progressed = true;
            ++k;
          }
          if (!done && k == end) finish();
          ready = __ballot_sync(kFullMask, done);
        }
      }
      if (__any_sync(kFullMask, progressed)) {
        backoff.reset();
      } else if (__any_sync(kFullMask, !backoff.pause(s.status, i))) {
        if (!done) finish();
      }
      ready = __ballot_sync(kFullMask, done);
    }
    const int top = __reduce_max_sync(kFullMask, lev);
    if (lane == 0) atomicMax(max_level, top);
  }
  block_finished(s.tickets, gridDim.x);
}

// Kahn's sort seen from the columns: a warp per column; lane 0 waits until the in-degree counter shows
// every incoming edge removed (acquire), then the lanes remove the outgoing edges: atomicMax of the level
// below, one release fence, then the counter increments.
__global__ void __launch_bounds__(kBlockThreads)
    levels_csc_kernel(index_t n, const std::int32_t* ptr, const index_t* ind, const std::int32_t* indeg, int* level,
                      int* removed, int* max_level, Schedule s) {
  const int ticket = block_ticket(s.tickets);
  const int lane = threadIdx.x % kWarpSize;
  const index_t j = ticket * kBlockWarps + threadIdx.x / kWarpSize;
  if (j < n) {
    int lev = 0;
    if (lane == 0) {
      wait_at_least(&removed[j], indeg[j], s.status, j);
      // Final now: every predecessor has raised it. Stored as level + 1, as levels_csr stores it.
      lev = device_atomic_int(level[j]).load(cuda::memory_order_relaxed);
      device_atomic_int(level[j]).store(lev + 1, cuda::memory_order_relaxed);
      atomicMax(max_level, lev + 1);
    }
    lev = __shfl_sync(kFullMask, lev, 0);
    for (std::int32_t k = ptr[j] + lane; k < ptr[j + 1]; k += kWarpSize)
      device_atomic_int(level[ind[k]]).fetch_max(lev + 1, cuda::memory_order_relaxed);
    cuda::atomic_thread_fence(cuda::memory_order_release, cuda::thread_scope_device);
    for (std::int32_t k = ptr[j] + lane; k < ptr[j + 1]; k += kWarpSize)
      device_atomic_int(removed[ind[k]]).fetch_add(1, cuda::memory_order_relaxed);
  }
  block_finished(s.tickets, gridDim.x);
}

/// level_sets' sort input: the stored levels (level + 1) become the levels, and order_in the identity.
__global__ void level_keys_kernel(index_t n, int* level, std::int32_t* order_in) {
  const index_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  level[i] -= 1;
  order_in[i] = i;
}

__global__ void level_ptr_kernel(index_t n, const int* nlev, const int* sorted_level, std::int32_t* level_ptr) {
  const index_t t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < n && (t == 0 || sorted_level[t] != sorted_level[t - 1])) level_ptr[sorted_level[t]] = t;
  if (t == 0) level_ptr[*nlev] = n;
}

__global__ void levr_piece_count_kernel(index_t n, const std::int32_t* ptr, const std::int32_t* jlev,
                                        std::int32_t* count) {
  const index_t p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= n) return;
  const index_t i = jlev != nullptr ? jlev[p] : p;
  count[p] = max(1, (ptr[i + 1] - ptr[i] + kLevrPiece - 1) / kLevrPiece);
}

__global__ void levr_piece_fill_kernel(index_t n, const std::int32_t* ptr, const std::int32_t* jlev,
                                       const std::int32_t* piece_ptr, LevrPiece* piece) {
  const index_t p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= n) return;
  const index_t i = jlev != nullptr ? jlev[p] : p;
  const std::int32_t base = piece_ptr[p], pieces = piece_ptr[p + 1] - base;
  const std::int32_t slot = pieces > 1 ? base - p : -1;
  for (std::int32_t j = 0; j < pieces; ++j) piece[base + j] = {i, ptr[i] + j * kLevrPiece, slot, pieces};
}

__global__ void level_piece_ptr_kernel(index_t n, const int* nlev, const std::int32_t* level_ptr,
                                       const std::int32_t* piece_ptr, std::int32_t* level_piece_ptr) {
  const index_t l = blockIdx.x * blockDim.x + threadIdx.x;
  if (l <= *nlev && l <= n) level_piece_ptr[l] = piece_ptr[level_ptr[l]];
}

__global__ void split_in_degree_kernel(index_t n, const std::int32_t* ptr, const index_t* ind,
                                       std::int32_t* global_deg, std::int32_t* local_deg) {
  const index_t j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= n) return;
  for (std::int32_t k = ptr[j]; k < ptr[j + 1]; ++k) {
    const index_t i = ind[k];
    atomicAdd(i / kBlockWarps == j / kBlockWarps ? &local_deg[i] : &global_deg[i], 1);
  }
}

__device__ inline bool chunk_is_warp_level(index_t n, const std::int32_t* ptr, double threshold, index_t c) {
  const index_t first = c * kWarpSize, end = min(first + kWarpSize, n);
  return double(ptr[end] - ptr[first]) > threshold * double(end - first);
}

__global__ void chunk_items_kernel(index_t n, const std::int32_t* ptr, double threshold, std::int32_t* per_chunk) {
  const index_t c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= (n + kWarpSize - 1) / kWarpSize) return;
  per_chunk[c] = chunk_is_warp_level(n, ptr, threshold, c) ? min(kWarpSize, n - c * kWarpSize) : 1;
}

__global__ void chunk_fill_kernel(index_t n, const std::int32_t* ptr, double threshold, const std::int32_t* item_base,
                                  std::int32_t* items, int* nitems) {
  const index_t c = blockIdx.x * blockDim.x + threadIdx.x;
  const index_t nchunks = (n + kWarpSize - 1) / kWarpSize;
  if (c == 0) *nitems = item_base[nchunks];
  if (c >= nchunks) return;
  const index_t first = c * kWarpSize, end = min(first + kWarpSize, n);
  const std::int32_t base = item_base[c];
  if (chunk_is_warp_level(n, ptr, threshold, c)) {
    for (index_t i = first; i < end; ++i) items[base + (i - first)] = kWarpRowBit | i;
  } else {
    items[base] = first;
  }
}

template <typename T>
__global__ void gather_values_kernel(index_t n, std::int32_t nnz, const T* values, const std::int32_t* src,
                                     const std::int32_t* diag_src, bool unit, bool reversed,
                                     const std::int32_t* perm, T* val, T* diag, int* zero_row) {
  const std::int32_t t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < nnz) val[t] = values[src[t]];
  if (t < n) {
    const T d = unit ? T(1) : (diag_src[t] < 0 ? T(0) : values[diag_src[t]]);
    diag[t] = d;
    const index_t row = perm != nullptr ? perm[t] : t;
    if (d == T(0)) atomicMin(zero_row, reversed ? n - 1 - row : row);
  }
}

template <typename T>
__global__ void perm_count_kernel(index_t n, const std::int32_t* ptr, const std::int32_t* jlev, const T* diag,
                                  const std::int32_t* diag_src, std::int32_t* inv, std::int32_t* count,
                                  T* out_diag, std::int32_t* out_diag_src) {
  const index_t r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= n) return;
  const index_t i = jlev[r];
  inv[i] = r;
  count[r] = ptr[i + 1] - ptr[i];
  out_diag[r] = diag[i];
  out_diag_src[r] = diag_src[i];
}

// The rows of the warp swept as one range of the output (as scatter_kernel): the output segments are
// consecutive, their sources are not.
template <typename T>
__global__ void perm_fill_kernel(index_t n, const std::int32_t* ptr, const index_t* ind, const T* val,
                                 const std::int32_t* src, const std::int32_t* jlev, const std::int32_t* inv,
                                 const std::int32_t* out_ptr, index_t* out_ind, T* out_val, std::int32_t* out_src) {
  const index_t first = (blockIdx.x * index_t(blockDim.x) + threadIdx.x) / kWarpSize * kWarpSize;
  if (first >= n) return;  // the whole warp
  const int lane = threadIdx.x % kWarpSize;
  const index_t r = first + lane;
  const bool active = r < n;
  const std::int32_t begin = active ? ptr[jlev[r]] : 0, base = active ? out_ptr[r] : 0;
  const std::int32_t from = __shfl_sync(kFullMask, base, 0);
  const std::int32_t to = out_ptr[min(first + kWarpSize, n)];
  const std::int32_t lane_end = active ? out_ptr[r + 1] : to;
  for (std::int32_t at = from; at < to; at += kWarpSize) {
    const std::int32_t t = at + lane;
    const int owner = owner_lane(lane_end, min(t, to - 1));
    const std::int32_t k = __shfl_sync(kFullMask, begin, owner) + (t - __shfl_sync(kFullMask, base, owner));
    if (t >= to) continue;
    out_ind[t] = inv[ind[k]];
    out_val[t] = val[k];
    out_src[t] = src[k];
  }
}

template <typename T>
__global__ void fill_sentinel_kernel(std::int64_t count, T* y) {
  const std::int64_t k = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k < count) y[k] = Sentinel<T>::value();
}

}  // namespace

template <typename T>
void inspect_triangle(const InputTriangle<T>& in, std::int32_t* count, T* diag, std::int32_t* diag_src,
                      unsigned long long* bad, int* zero_row, int* max_count, int* level, cudaStream_t stream) {
  if (in.n == 0) return;
  inspect_kernel<<<blocks_for(in.n, kThreads), kThreads, 0, stream>>>(in, count, diag, diag_src, bad, zero_row,
                                                                     max_count, level);
  check_launch("inspect_kernel");
}

template <typename T>
void scatter_same_orientation(const InputTriangle<T>& in, const std::int32_t* out_ptr, const std::int32_t* diag_src,
                              index_t* out_ind, T* out_val, std::int32_t* src, int* kept, cudaStream_t stream) {
  scatter_kernel<<<blocks_for(std::max<index_t>(in.n, 1), kThreads), kThreads, 0, stream>>>(in, out_ptr, diag_src,
                                                                                          out_ind, out_val, src, kept);
  check_launch("scatter_kernel");
}

void histogram(std::int32_t nnz, const index_t* ind, std::int32_t* count, cudaStream_t stream, const int* limit) {
  if (nnz == 0) return;
  histogram_kernel<<<blocks_for(nnz, kThreads), kThreads, 0, stream>>>(nnz, ind, count, limit);
  check_launch("histogram_kernel");
}

void count_max(index_t n, const std::int32_t* count, int* max_count, cudaStream_t stream) {
  if (n == 0) return;
  count_max_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(n, count, max_count);
  check_launch("count_max_kernel");
}

int key_bits(long long value) {
  int bits = 1;
  while ((1ll << bits) <= value) ++bits;
  return bits;
}

std::size_t scan_temp_bytes(index_t n) {
  std::size_t bytes = 0;
  cuda_check(cub::DeviceScan::ExclusiveSum(nullptr, bytes, static_cast<const std::int32_t*>(nullptr),
                                           static_cast<std::int32_t*>(nullptr), n + 1),
             "cub scan size", __FILE__, __LINE__);
  return bytes;
}

std::size_t sort_temp_bytes(std::int32_t count, int end_bit) {
  std::size_t bytes = 0;
  cuda_check(cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<const int*>(nullptr),
                                             static_cast<int*>(nullptr), static_cast<const std::int32_t*>(nullptr),
                                             static_cast<std::int32_t*>(nullptr), std::max(count, 1), 0, end_bit),
             "cub sort size", __FILE__, __LINE__);
  return bytes;
}

void exclusive_scan(index_t n, const std::int32_t* in, std::int32_t* out, void* temp, std::size_t temp_bytes,
                    cudaStream_t stream) {
  // n + 1 items: out[0] = 0 comes from the scan itself (no memset before it); in[n] is read, never summed.
  cuda_check(cub::DeviceScan::ExclusiveSum(temp, temp_bytes, in, out, n + 1, stream), "cub scan", __FILE__, __LINE__);
}

template <typename T>
void transpose_lower(index_t n, std::int32_t nnz, const std::int32_t* ptr, const index_t* ind, const T* val,
                     const std::int32_t* src, std::int32_t* out_ptr, index_t* out_ind, T* out_val,
                     std::int32_t* out_src, const TransposeWork& work, cudaStream_t stream) {
  cuda_check(cudaMemsetAsync(work.counts, 0, sizeof(std::int32_t) * (std::size_t(n) + 1), stream), "cudaMemsetAsync",
             __FILE__, __LINE__);
  histogram(nnz, ind, work.counts, stream);
  exclusive_scan(n, work.counts, out_ptr, work.temp, work.temp_bytes, stream);
  if (nnz == 0) return;
  outer_of_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(n, ptr, work.outer);
  check_launch("outer_of_kernel");
  iota_kernel<<<blocks_for(nnz, kThreads), kThreads, 0, stream>>>(nnz, work.order_in);
  check_launch("iota_kernel");
  // Entries are enumerated by increasing outer index, so the stable sort by inner index leaves each new
  // segment sorted.
  std::size_t bytes = work.temp_bytes;
  cuda_check(cub::DeviceRadixSort::SortPairs(work.temp, bytes, ind, work.keys_out, work.order_in, work.order_out, nnz,
                                             0, key_bits(n), stream),
             "cub radix sort", __FILE__, __LINE__);
  transpose_gather_kernel<<<blocks_for(nnz, kThreads), kThreads, 0, stream>>>(nnz, work.order_out, work.outer, val,
                                                                            src, out_ind, out_val, out_src);
  check_launch("transpose_gather_kernel");
}

void levels_csr(index_t n, const std::int32_t* ptr, const index_t* ind, int* level, int* max_level,
                const unsigned long long* bad, const Schedule& s, cudaStream_t stream) {
  if (n == 0) return;
  const int blocks = blocks_for((n + kWarpSize - 1) / kWarpSize, kBlockWarps);
  levels_csr_kernel<<<blocks, kBlockThreads, 0, stream>>>(n, ptr, ind, level, max_level, bad, s);
  check_launch("levels_csr_kernel");
}

void levels_csc(index_t n, const std::int32_t* ptr, const index_t* ind, const std::int32_t* indeg, int* level,
                int* work, int* max_level, const Schedule& s, cudaStream_t stream) {
  if (n == 0) return;
  levels_csc_kernel<<<blocks_for(n, kBlockWarps), kBlockThreads, 0, stream>>>(n, ptr, ind, indeg, level, work,
                                                                             max_level, s);
  check_launch("levels_csc_kernel");
}

void level_sets(index_t n, const int* nlev, int levels, int* level, std::int32_t* jlev, std::int32_t* level_ptr,
                std::int32_t* order_in, int* keys_out, void* temp, std::size_t temp_bytes, cudaStream_t stream) {
  if (n == 0) return;
  level_keys_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(n, level, order_in);
  check_launch("level_keys_kernel");
  std::size_t bytes = temp_bytes;
  const int bits = levels > 0 ? key_bits(levels - 1) : key_bits(n);
  cuda_check(cub::DeviceRadixSort::SortPairs(temp, bytes, level, keys_out, order_in, jlev, n, 0, bits, stream),
             "cub radix sort", __FILE__, __LINE__);
  level_ptr_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(n, nlev, keys_out, level_ptr);
  check_launch("level_ptr_kernel");
}

void levr_pieces(index_t n, const std::int32_t* ptr, const std::int32_t* jlev, const std::int32_t* level_ptr,
                 const int* nlev, std::int32_t* count, std::int32_t* piece_ptr, LevrPiece* piece,
                 std::int32_t* level_piece_ptr, void* temp, std::size_t temp_bytes, cudaStream_t stream) {
  if (n == 0) return;
  levr_piece_count_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(n, ptr, jlev, count);
  check_launch("levr_piece_count_kernel");
  exclusive_scan(n, count, piece_ptr, temp, temp_bytes, stream);
  levr_piece_fill_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(n, ptr, jlev, piece_ptr, piece);
  check_launch("levr_piece_fill_kernel");
  level_piece_ptr_kernel<<<blocks_for(std::int64_t(n) + 1, kThreads), kThreads, 0, stream>>>(n, nlev, level_ptr,
                                                                                           piece_ptr, level_piece_ptr);
  check_launch("level_piece_ptr_kernel");
}

void split_in_degree(index_t n, const std::int32_t* ptr, const index_t* ind, std::int32_t* global_deg,
                     std::int32_t* local_deg, cudaStream_t stream) {
  if (n == 0) return;
  split_in_degree_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(n, ptr, ind, global_deg, local_deg);
  check_launch("split_in_degree_kernel");
}

void fused_items(index_t n, const std::int32_t* ptr, double threshold, std::int32_t* items, int* nitems,
                 std::int32_t* per_chunk, std::int32_t* base, void* temp, std::size_t temp_bytes,
                 cudaStream_t stream) {
  const index_t nchunks = (n + kWarpSize - 1) / kWarpSize;
  if (nchunks > 0) {
    chunk_items_kernel<<<blocks_for(nchunks, kThreads), kThreads, 0, stream>>>(n, ptr, threshold, per_chunk);
    check_launch("chunk_items_kernel");
  }
  exclusive_scan(nchunks, per_chunk, base, temp, temp_bytes, stream);
  chunk_fill_kernel<<<blocks_for(nchunks + 1, kThreads), kThreads, 0, stream>>>(n, ptr, threshold, base, items,
                                                                                nitems);
  check_launch("chunk_fill_kernel");
}

template <typename T>
void gather_values(index_t n, std::int32_t nnz, const T* values, const std::int32_t* src,
                   const std::int32_t* diag_src, bool unit, bool reversed, const std::int32_t* perm, T* val,
                   T* diag, int* zero_row, cudaStream_t stream) {
  const long long work = std::max<long long>(n, nnz);
  if (work == 0) return;
  gather_values_kernel<<<blocks_for(work, kThreads), kThreads, 0, stream>>>(n, nnz, values, src, diag_src, unit,
                                                                            reversed, perm, val, diag, zero_row);
  check_launch("gather_values_kernel");
}

template <typename T>
void perm_count(index_t n, const std::int32_t* ptr, const std::int32_t* jlev, const T* diag,
                const std::int32_t* diag_src, std::int32_t* inv, std::int32_t* count, T* out_diag,
                std::int32_t* out_diag_src, cudaStream_t stream) {
  if (n == 0) return;
  perm_count_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(n, ptr, jlev, diag, diag_src, inv, count,
                                                                      out_diag, out_diag_src);
  check_launch("perm_count_kernel");
}

template <typename T>
void perm_fill(index_t n, const std::int32_t* ptr, const index_t* ind, const T* val, const std::int32_t* src,
               const std::int32_t* jlev, const std::int32_t* inv, const std::int32_t* out_ptr, index_t* out_ind,
               T* out_val, std::int32_t* out_src, cudaStream_t stream) {
  if (n == 0) return;
  perm_fill_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(n, ptr, ind, val, src, jlev, inv, out_ptr,
                                                                    out_ind, out_val, out_src);
  check_launch("perm_fill_kernel");
}

template <typename T>
void fill_sentinel(std::int64_t count, T* y, cudaStream_t stream) {
  if (count == 0) return;
  fill_sentinel_kernel<<<blocks_for(count, kThreads), kThreads, 0, stream>>>(count, y);
  check_launch("fill_sentinel_kernel");
}

#define SPADE_SPTRSV_ANALYSIS(T)                                                                                   \
  template void inspect_triangle<T>(const InputTriangle<T>&, std::int32_t*, T*, std::int32_t*,                     \
                                    unsigned long long*, int*, int*, int*, cudaStream_t);                          \
  template void scatter_same_orientation<T>(const InputTriangle<T>&, const std::int32_t*, const std::int32_t*,      \
                                            index_t*, T*, std::int32_t*, int*, cudaStream_t);                      \
  template void transpose_lower<T>(index_t, std::int32_t, const std::int32_t*, const index_t*, const T*,           \
                                   const std::int32_t*, std::int32_t*, index_t*, T*, std::int32_t*,                \
                                   const TransposeWork&, cudaStream_t);                                            \
  template void gather_values<T>(index_t, std::int32_t, const T*, const std::int32_t*, const std::int32_t*, bool,  \
                                 bool, const std::int32_t*, T*, T*, int*, cudaStream_t);                           \
  template void perm_count<T>(index_t, const std::int32_t*, const std::int32_t*, const T*, const std::int32_t*,    \
                              std::int32_t*, std::int32_t*, T*, std::int32_t*, cudaStream_t);                      \
  template void perm_fill<T>(index_t, const std::int32_t*, const index_t*, const T*, const std::int32_t*,          \
                             const std::int32_t*, const std::int32_t*, const std::int32_t*, index_t*, T*,          \
                             std::int32_t*, cudaStream_t);                                                         \
  template void fill_sentinel<T>(std::int64_t, T*, cudaStream_t);
SPADE_SPTRSV_ANALYSIS(double)
SPADE_SPTRSV_ANALYSIS(float)
#undef SPADE_SPTRSV_ANALYSIS

}  // namespace spade::kernels::sptrsv
