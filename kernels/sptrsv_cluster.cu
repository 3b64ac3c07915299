// cluster: the level sets (R. Li 2017) of the rows renumbered in level order, every level split over the
// thread blocks of one thread block cluster (compute capability 9.0, up to 16 SMs) per right-hand side.
// level_block (kernels/sptrsv_block.cu) solves a level inside one SM, a __syncthreads between levels (J. D.
// Hogg 2013's in-kernel synchronization); wide levels need more SMs, and a hand-off between SMs through
// device memory (fused_level) costs about 2 us per level on the H100. Inside a cluster the blocks exchange
// solution values through distributed shared memory instead (drivers/bench_cluster_sync.cu measured the
// ways of doing that; docs/benchmarks/sptrsv.md, version 14):
//
//  - every entry (row r, column c) of the part has a slot in the shared-memory ring of the block that
//    solves r; the rows of level l in block b read their entries' slots, which lie in one run (the segment
//    of (l, b)), in the order of the entries;
//  - whoever solves row c pushes x[c] into the slot of every entry of column c with st.async, which counts
//    the bytes on the reader's mbarrier for the reader's level (mbarrier l mod R, R = D + 1, D the most
//    levels between a row and a row it reads); the reader arms that mbarrier with the segment's bytes and
//    waits for the phase, which completes once every value of the segment has arrived;
//  - a relaxed cluster barrier (execution only, about 0.13 us) between levels keeps a slot from being
//    written before its previous value was read: the ring holds D + 1 levels' segments, and a push of level l
//    (to readers of levels l + 1 .. l + D) waits for the barrier that every block passes after its rows of
//    level l - 1.
//
// A thread (or V lanes) per row, the row data read into registers one level ahead as in
// kernels/sptrsv_block_direct.cu (blocks of at most kClusterMaxThreads threads, so that the registers hold
// it without spilling). Waits are bounded by the plan's spin limit: a wait that gives up
// records kStatusSpinTimeout and the block goes on without waiting (wrong values, reported by check()),
// so the barriers stay matched and the kernel ends.
#include "kernels/cluster.cuh"
#include "kernels/sptrsv_block.cuh"

namespace spade::kernels::sptrsv {
namespace {

namespace cl = kernels::cluster;

/// Bytes before the ring in shared memory: the mbarriers (8 bytes each), padded to 16.
constexpr int kBarrierBytes = 8 * (kClusterMaxDistance + 1);
static_assert(kBarrierBytes % 16 == 0, "the ring starts 16-byte aligned");

constexpr int kThreads = 256;
constexpr int C = kClusterBlocks;

/// Dynamic shared memory of a cluster block: the mbarriers and the ring of values of value_bytes each.
int cluster_shared_bytes(const ClusterLayout& c, std::size_t value_bytes) {
  return kBarrierBytes + int(value_bytes << c.ring_log2);
}

/// The first row of block b's share of the level with rows [first, next) (C shares, sizes differ by at
/// most one; C a power of two, so the division is a shift).
__host__ __device__ inline index_t share_begin(index_t first, index_t next, int b) {
  return first + index_t((std::uint64_t(b) * std::uint64_t(next - first) + C - 1) / C);
}

// ---- analysis ----

/// The largest of v over the warp, added to *out with one atomicMax per warp.
__device__ inline void warp_max_to(int v, int* out) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) v = max(v, __shfl_xor_sync(kFullMask, v, offset));
  if ((threadIdx.x & (kWarpSize - 1)) == 0) atomicMax(out, v);
}

/// row_level[p]: the level of row p of the level-ordered part (the last l with level_ptr[l] <= p).
__global__ void row_levels_kernel(index_t n, int nlev, const std::int32_t* level_ptr, int* row_level) {
  const index_t p = blockIdx.x * index_t(blockDim.x) + threadIdx.x;
  if (p >= n) return;
  int lo = 0, hi = nlev - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (level_ptr[mid] <= p) lo = mid;
    else hi = mid - 1;
  }
  row_level[p] = lo;
}

/// measures[kDistance] := the most levels between a row and a column it reads.
__global__ void distance_kernel(index_t n, const std::int32_t* ptr, const index_t* ind, const int* row_level,
                                int* measures) {
  const index_t p = blockIdx.x * index_t(blockDim.x) + threadIdx.x;
  int d = 0;
  if (p < n) {
    const int l = row_level[p];
    for (std::int32_t k = ptr[p]; k < ptr[p + 1]; ++k) d = max(d, l - row_level[ind[k]]);
  }
  warp_max_to(d, &measures[kClusterDistance]);
}

/// Thread i = b * nlev + l: the rows of block b's share of level l into share_rows[i], its entries into
/// count[i]; measures[kClusterRows] := the most rows of a share.
__global__ void shares_kernel(int nlev, const std::int32_t* level_ptr, const std::int32_t* ptr, int2* share_rows,
                              std::int32_t* count, int* measures) {
  const std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
  int rows = 0;
  if (i < std::int64_t(nlev) * C) {
    const int b = int(i / nlev), l = int(i % nlev);
    const index_t first = level_ptr[l], next = level_ptr[l + 1];
    const index_t begin = share_begin(first, next, b), end = share_begin(first, next, b + 1);
    share_rows[i] = make_int2(begin, end);
    count[i] = ptr[end] - ptr[begin];
    rows = end - begin;
  }
  warp_max_to(rows, &measures[kClusterRows]);
}

/// measures[kClusterWindow] := the most entries of D + 1 consecutive levels in one block (segment: the
/// exclusive scan of the shares' entries, block-major).
__global__ void window_kernel(int nlev, const std::int32_t* segment, int* measures) {
  const std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
  int w = 0;
  if (i < std::int64_t(nlev) * C) {
    const int b = int(i / nlev), l = int(i % nlev);
    const int last = min(l + measures[kClusterDistance] + 1, nlev);
    w = segment[std::int64_t(b) * nlev + last] - segment[i];
  }
  warp_max_to(w, &measures[kClusterWindow]);
}

/// A thread per row p of level l in block b: row_slot[p] = the ring slot of its first entry, and for each
/// entry (p, c) a push code in column c's list (order inside a list: whichever thread comes first).
__global__ void pushes_kernel(index_t n, ClusterLayout c, const int* row_level, const std::int32_t* ptr,
                              const index_t* ind, int* cursor, std::int32_t* row_slot, std::uint32_t* push) {
  const index_t p = blockIdx.x * index_t(blockDim.x) + threadIdx.x;
  if (p >= n) return;
  const int l = row_level[p];
  const index_t first = c.level_ptr[l], next = c.level_ptr[l + 1];
  const int b = int(std::int64_t(p - first) * C / (next - first));
  const index_t begin = share_begin(first, next, b);
  const std::int64_t block_first = std::int64_t(b) * c.nlev;
  const std::int32_t base = c.segment[block_first + l] - c.segment[block_first] + ptr[p] - ptr[begin];
  const std::int32_t mask = (std::int32_t(1) << c.ring_log2) - 1;
  row_slot[p] = base & mask;
  const std::uint32_t tag = (std::uint32_t(l % cluster_barriers(c)) << 16) | (std::uint32_t(b) << 20);
  for (std::int32_t k = ptr[p]; k < ptr[p + 1]; ++k) {
    const index_t col = ind[k];
    const int at = atomicAdd(&cursor[col], 1);
    push[c.push_ptr[col] + at] = std::uint32_t((base + k - ptr[p]) & mask) | tag;
  }
}

// ---- solve ----

#if SPADE_CLUSTER_ARCH
/// Sends x to the slot and mbarrier a push code names.
template <typename T>
__device__ inline void push_value(std::uint32_t code, T x, unsigned ring, unsigned barriers) {
  const unsigned block = code >> 20, barrier = (code >> 16) & 15u, slot = code & 0xffffu;
  cl::store_async(cl::map_to_rank(ring + slot * unsigned(sizeof(T)), block), x,
                  cl::map_to_rank(barriers + 8u * barrier, block));
}
#endif

/// The data of one row read ahead of its level: its entry and push ranges, first ring slot, caller's
/// index, the first K entries' values and push codes of this lane, b and the diagonal.
template <typename T>
struct RowAhead {
  index_t p = -1;
  std::int32_t k0 = 0, k1 = 0, u0 = 0, u1 = 0, slot = 0;
  index_t ui = 0;
  T val[kLevelBlockEntries];
  std::uint32_t code[kLevelBlockEntries];
  T b = T(0), d = T(1);
};

template <typename T, int V>
__global__ void __launch_bounds__(kClusterMaxThreads, 1)
    cluster_kernel(LowerPart<T> L, ClusterLayout c, RhsPass<T> pass, DeviceStatus* status) {
#if SPADE_CLUSTER_ARCH
  constexpr int K = kLevelBlockEntries;
  extern __shared__ __align__(16) unsigned char cluster_shared[];
  const unsigned barriers = cl::shared_address(cluster_shared);
  T* ring = reinterpret_cast<T*>(cluster_shared + kBarrierBytes);
  const unsigned ring_address = cl::shared_address(ring);
  const std::int32_t mask = (std::int32_t(1) << c.ring_log2) - 1;
  const int R = cluster_barriers(c), nlev = c.nlev;
  const int rank = int(cl::rank());
  const index_t n = L.n;
  RhsPass<T> rhs = pass;
  rhs.b += std::int64_t(blockIdx.x / C) * rhs.ldb;
  rhs.x += std::int64_t(blockIdx.x / C) * rhs.ldx;
  const std::int32_t* segment = c.segment + std::int64_t(rank) * nlev;
  auto share_bytes = [&](int l) { return unsigned(segment[l + 1] - segment[l]) * unsigned(sizeof(T)); };
  const long long limit = (status->spin_limit > 0 ? status->spin_limit : kSpinLimit);
  bool failed = false;

  if (threadIdx.x == 0) {
    for (int i = 0; i < R; ++i) cl::init_barrier(barriers + 8u * i, 1);
    cl::fence_barrier_init();
    for (int l = 0; l < R && l < nlev; ++l) cl::expect_bytes(barriers + 8u * l, share_bytes(l));
  }
  cl::sync_all();
  cl::arrive_relaxed();

  const int G = blockDim.x / V, g = threadIdx.x / V, lane = threadIdx.x % V;
  // This block's share of level l: its rows [x, y).
  const int2* shares = c.share_rows + std::int64_t(rank) * nlev;
  auto share_of = [&](int l) { return l < nlev ? shares[l] : make_int2(n, n); };
  // This thread's row of a share, -1 if none.
  auto row_of = [&](int2 share) {
    const index_t p = share.x + g;
    return p < share.y ? p : index_t(-1);
  };
  // Stage A: the row's ranges and slot (level l + 2 at level l); stage B: the rest (level l + 1).
  auto load_a = [&](RowAhead<T>& r, index_t p, std::int32_t& orig) {
    r.p = p;
    r.k0 = p >= 0 ? L.ptr[p] : 0;
    r.k1 = p >= 0 ? L.ptr[p + 1] : 0;
    r.u0 = p >= 0 ? c.push_ptr[p] : 0;
    r.u1 = p >= 0 ? c.push_ptr[p + 1] : 0;
    r.slot = p >= 0 ? c.row_slot[p] : 0;
    orig = p >= 0 ? L.perm[p] : 0;
  };
  auto load_b = [&](RowAhead<T>& r, std::int32_t orig) {
    r.ui = caller_index(orig, n, L.reversed);
#pragma unroll
    for (int t = 0; t < K; ++t) {
      const std::int32_t k = r.k0 + lane + t * V, u = r.u0 + lane + t * V;
      r.val[t] = r.p >= 0 && k < r.k1 ? L.val[k] : T(0);
      r.code[t] = r.p >= 0 && u < r.u1 ? c.push[u] : 0u;
    }
    r.b = r.p >= 0 ? rhs.b[r.ui] : T(0);
    r.d = r.p >= 0 ? L.diag[r.p] : T(1);
  };

  int2 s0 = share_of(0), s1 = share_of(1), s2 = share_of(2);
  RowAhead<T> a, cur;
  std::int32_t orig_a = 0, orig_b = 0;
  load_a(cur, row_of(s0), orig_b);
  load_b(cur, orig_b);
  load_a(a, row_of(s1), orig_a);

  // Level l waits on mbarrier `bar` (l mod R) for its phase of parity l / R mod 2; `last` is level
  // l - 1's mbarrier.
  int bar = 0, last = R - 1;
  unsigned parity = 0;
  for (int l = 0; l < nlev; ++l) {
    // Read ahead: level l + 3's share, stage A of level l + 2, stage B of level l + 1, and the bytes that
    // re-arm level l - 1's mbarrier for level l - 1 + R.
    const int2 s3 = share_of(l + 3);
    RowAhead<T> a2;
    std::int32_t orig_a2 = 0;
    load_a(a2, row_of(s2), orig_a2);
    RowAhead<T> next = a;
    load_b(next, orig_a);
    const bool arm = threadIdx.x == 0 && l >= 1 && l - 1 + R < nlev;
    const unsigned arm_bytes = arm ? share_bytes(l - 1 + R) : 0u;
    const T inv_d = T(1) / cur.d;

    // Wait for the values of level l's entries in this block.
    if (!failed) {
      long long polls = 0;
      while (!cl::try_wait(barriers + 8u * unsigned(bar), parity))
        if (++polls >= limit) {
          report_status(status, kStatusSpinTimeout, int(s0.x));
          failed = true;
          break;
        }
    }

    // The first pass: the row read ahead.
    T sum = T(0);
    if (cur.p >= 0) {
#pragma unroll
      for (int t = 0; t < K; ++t) {
        const std::int32_t j = lane + t * V;
        if (cur.k0 + j < cur.k1) sum += cur.val[t] * ring[(cur.slot + j) & mask];
      }
      for (std::int32_t k = cur.k0 + lane + K * V; k < cur.k1; k += V)
        sum += L.val[k] * ring[(cur.slot + k - cur.k0) & mask];
    }
    sum = group_sum<V>(sum);
    const T x = (cur.b - sum) * inv_d;
    if (cur.p >= 0 && lane == 0) rhs.x[cur.ui] = x;
    // Every thread of every block is done with level l - 1: the pushes may overwrite its slots, and its
    // mbarrier, whose phase every thread has seen complete, can be armed for level l - 1 + R (R >= 2, so
    // before anyone waits for that level; values may arrive before the arming, the phase cannot complete
    // without it).
    cl::wait();
    if (arm) cl::expect_bytes(barriers + 8u * unsigned(last), arm_bytes);
    if (cur.p >= 0) {
#pragma unroll
      for (int t = 0; t < K; ++t)
        if (cur.u0 + lane + t * V < cur.u1) push_value(cur.code[t], x, ring_address, barriers);
      for (std::int32_t u = cur.u0 + lane + K * V; u < cur.u1; u += V)
        push_value(c.push[u], x, ring_address, barriers);
    }
    // Further passes over a share wider than G rows, reading their data as they go.
    for (index_t base = s0.x + G; base < s0.y; base += G) {
      const index_t p = base + g;
      const bool in = p < s0.y;
      const std::int32_t k0 = in ? L.ptr[p] : 0, k1 = in ? L.ptr[p + 1] : 0, slot = in ? c.row_slot[p] : 0;
      T s = T(0);
      for (std::int32_t k = k0 + lane; k < k1; k += V) s += L.val[k] * ring[(slot + k - k0) & mask];
      s = group_sum<V>(s);
      if (in) {
        const index_t ui = caller_row(L, p);
        const T xp = (rhs.b[ui] - s) / L.diag[p];
        if (lane == 0) rhs.x[ui] = xp;
        for (std::int32_t u = c.push_ptr[p] + lane; u < c.push_ptr[p + 1]; u += V)
          push_value(c.push[u], xp, ring_address, barriers);
      }
    }
    cl::arrive_relaxed();

    s0 = s1, s1 = s2, s2 = s3;
    cur = next;
    a = a2;
    orig_a = orig_a2;
    last = bar;
    if (++bar == R) bar = 0, parity ^= 1u;
  }
  // Matches the last arrive: no block leaves while another may still push into it.
  cl::wait();
#endif
}

template <typename T, int V>
cudaLaunchConfig_t launch_config(const ClusterLayout& c, int nr, cudaStream_t stream, cudaLaunchAttribute* attribute) {
  static const cudaError_t configured = [] {
    cudaError_t e = cudaFuncSetAttribute(cluster_kernel<T, V>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         shared_budget());
    if (e == cudaSuccess)
      e = cudaFuncSetAttribute(cluster_kernel<T, V>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    return e;
  }();
  cuda_check(configured, "cudaFuncSetAttribute(cluster_kernel)", __FILE__, __LINE__);
  const long long wanted = (static_cast<long long>(V) * std::max(c.max_rows, 1) + kWarpSize - 1) / kWarpSize * kWarpSize;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(unsigned(C) * unsigned(nr));
  config.blockDim = dim3(unsigned(std::min<long long>(wanted, kClusterMaxThreads)));
  config.dynamicSmemBytes = cluster_shared_bytes(c, sizeof(T));
  config.stream = stream;
  attribute->id = cudaLaunchAttributeClusterDimension;
  attribute->val.clusterDim.x = unsigned(C);
  attribute->val.clusterDim.y = 1;
  attribute->val.clusterDim.z = 1;
  config.attrs = attribute;
  config.numAttrs = 1;
  return config;
}

template <typename T, int V>
bool fits(const ClusterLayout& c) {
  if (cluster_shared_bytes(c, sizeof(T)) > shared_budget()) return false;
  // A build without sm_90 code has an empty kernel.
  cudaFuncAttributes function{};
  if (cudaFuncGetAttributes(&function, cluster_kernel<T, V>) != cudaSuccess || function.binaryVersion < 90) {
    cudaGetLastError();
    return false;
  }
  cudaLaunchAttribute attribute;
  const cudaLaunchConfig_t config = launch_config<T, V>(c, 1, nullptr, &attribute);
  int clusters = 0;
  if (cudaOccupancyMaxActiveClusters(&clusters, cluster_kernel<T, V>, &config) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return clusters >= 1;
}

template <typename T, int V>
void launch(const LowerPart<T>& L, const ClusterLayout& c, const RhsPass<T>& rhs, DeviceStatus* status,
            cudaStream_t stream) {
  cudaLaunchAttribute attribute;
  const cudaLaunchConfig_t config = launch_config<T, V>(c, rhs.nr, stream, &attribute);
  cuda_check(cudaLaunchKernelEx(&config, cluster_kernel<T, V>, L, c, rhs, status), "cudaLaunchKernelEx(cluster_kernel)",
             __FILE__, __LINE__);
}

}  // namespace

void cluster_shares(index_t n, int nlev, const std::int32_t* level_ptr, const std::int32_t* ptr,
                    const index_t* ind, int* row_level, int2* rows, std::int32_t* count, int* measures,
                    cudaStream_t stream) {
  if (n == 0) return;
  row_levels_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(n, nlev, level_ptr, row_level);
  check_launch("row_levels_kernel");
  distance_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(n, ptr, ind, row_level, measures);
  check_launch("distance_kernel");
  shares_kernel<<<blocks_for(std::int64_t(nlev) * C, kThreads), kThreads, 0, stream>>>(nlev, level_ptr, ptr, rows,
                                                                                      count, measures);
  check_launch("shares_kernel");
}

void cluster_window(int nlev, const std::int32_t* segment, int* measures, cudaStream_t stream) {
  if (nlev == 0) return;
  window_kernel<<<blocks_for(std::int64_t(nlev) * C, kThreads), kThreads, 0, stream>>>(nlev, segment, measures);
  check_launch("window_kernel");
}

void cluster_pushes(index_t n, const ClusterLayout& c, const int* row_level, const std::int32_t* ptr,
                    const index_t* ind, int* cursor, std::int32_t* row_slot, std::uint32_t* push,
                    cudaStream_t stream) {
  if (n == 0) return;
  pushes_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(n, c, row_level, ptr, ind, cursor, row_slot, push);
  check_launch("pushes_kernel");
}

template <typename T>
bool cluster_fits(const ClusterLayout& c, double entries_per_row) {
  switch (lanes_per_row(entries_per_row)) {
    case 1: return fits<T, 1>(c);
    case 2: return fits<T, 2>(c);
    case 4: return fits<T, 4>(c);
    case 8: return fits<T, 8>(c);
    case 16: return fits<T, 16>(c);
    default: return fits<T, 32>(c);
  }
}

bool cluster_one_pass(const ClusterLayout& c, double entries_per_row) {
  return static_cast<long long>(c.max_rows) * lanes_per_row(entries_per_row) <= kClusterMaxThreads;
}

template <typename T>
void solve_cluster(const LowerPart<T>& L, const ClusterLayout& c, double entries_per_row, const RhsPass<T>& rhs,
                   DeviceStatus* status, cudaStream_t stream) {
  if (L.n == 0 || c.nlev == 0) return;
  switch (lanes_per_row(entries_per_row)) {
    case 1: launch<T, 1>(L, c, rhs, status, stream); break;
    case 2: launch<T, 2>(L, c, rhs, status, stream); break;
    case 4: launch<T, 4>(L, c, rhs, status, stream); break;
    case 8: launch<T, 8>(L, c, rhs, status, stream); break;
    case 16: launch<T, 16>(L, c, rhs, status, stream); break;
    default: launch<T, 32>(L, c, rhs, status, stream); break;
  }
}

template bool cluster_fits<double>(const ClusterLayout&, double);
template bool cluster_fits<float>(const ClusterLayout&, double);
template void solve_cluster<double>(const LowerPart<double>&, const ClusterLayout&, double, const RhsPass<double>&,
                                    DeviceStatus*, cudaStream_t);
template void solve_cluster<float>(const LowerPart<float>&, const ClusterLayout&, double, const RhsPass<float>&,
                                   DeviceStatus*, cudaStream_t);

}  // namespace spade::kernels::sptrsv
