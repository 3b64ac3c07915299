// Level scheduling inside one thread block (level_block): the level sets of R. Li, "On parallel solution of
// sparse triangular linear systems in CUDA" (2017), solved level after level as in LEVR, but with a
// __syncthreads between two levels instead of a kernel launch, as J. D. Hogg, "A fast dense triangular solve
// in CUDA" (SISC 2013) replaced launch synchronization by synchronization inside one kernel.
//
// Why one block. Every other kernel hands a value from one SM to another through device memory, which
// costs 0.4 us alone and about 1 us while thousands of warps poll (docs/benchmarks/sptrsv.md, version 9);
// a level then costs 1.5-2.5 us, and cuSPARSE SpSV spends about as much. Inside one SM no value crosses
// device memory, so when the levels are narrow (a few hundred rows or fewer: thin 2D grids, long chains,
// structural matrices) one block walks the levels faster, and one SM's bandwidth is enough for a level.
//
// What a level costs. __syncthreads waits for every load in flight, so a level that loads its own data
// from device memory costs at least one memory round trip (about 0.9 us on the H100, version 11 of
// docs/benchmarks/sptrsv.md). Asynchronous copies into shared memory (cp.async) are waited for only by
// cp.async.wait_group, not by the barrier, so the kernel copies every level's data into shared memory
// kLead levels ahead, a multistage pipeline as in the main loops of dense GEMM kernels on Ampere and
// Hopper; a level then reads only shared memory. The plan packs each level into one contiguous region
// (level_pack_fill), so a level's copy is one run of 16-byte chunks, and a 32-byte descriptor says where
// it is. The copies run in three tiers, each kLead levels behind the one whose data it needs: the
// descriptor, the level's region, and b gathered through the caller's row numbers in that region. They are
// issued by copying warps of their own, beside the warps that solve rows, so that the two instruction
// streams overlap instead of adding up within a level (every instruction of a level is on its critical
// path: a level's warps have nothing else to hide latency behind). Each copying thread commits one group
// per level and waits for all but its kLead - 1 latest groups before the barrier, which makes every copy
// issued kLead levels ago visible to the block. Before the barrier each group of solving lanes reads its
// row of the next level from shared memory into registers, so after the barrier a level only waits for
// the values of its dependencies.
//
// This kernel runs when the levels are narrow (kStagedRowsPerLevel) and every level's arrays before its
// entries fit a stage; otherwise kernels/sptrsv_block_direct.cu reads the levels into registers ahead of
// them. A level whose region is larger than a stage the layout affords (level_block_stage_cap) stages
// only those arrays and reads its entries from device memory: one large level then costs its own round
// trips instead of moving every level to the direct kernel. The solving warps cover one pass of rows (level_block_pass_rows: twice the mean level width);
// wider levels take further passes over their stage. Solution
// values live in a shared-memory ring indexed by the row in level order: a row's dependencies are mostly
// in the levels just before it, which the ring still holds; older ones are read from the solution buffer y
// in device memory, written by the same block (visible after __syncthreads).
//
// A row is solved by V lanes, each taking every V-th entry, then a reduction over the V lanes. V is a
// power of two up to 32 with kLevelBlockEntries entries per lane for the mean over the levels of each
// level's longest row: a level lasts as long as its longest row, so the mean row undercounts where row
// lengths are skewed (a factor's dense rows beside short ones). A level too wide for one pass of the block
// at that many lanes counts for less (level_pack_sizes_kernel): there passes, not rows, set its time
// (docs/benchmarks/sptrsv.md, "level_block's lanes per row"). The plan stores the inverse of the diagonal,
// so a row ends with a multiplication instead of a division on the critical path. There is no spin-wait:
// the kernel cannot hang.
//
// Chains. A run of narrow levels (a Cholesky factor's supernodes, the dense tail of a structural or
// tomography triangle) would cost a level a set of one to a few rows, each a chain of dependent
// instructions (docs/benchmarks/sptrsv.md, "Where level_block's time goes"). The plan packs consecutive
// narrow level sets into pieces of up to a warp's rows and no more than one pass of the block
// (level_pack_levels), each packed as one level: its rows' sums over columns before the piece, V lanes a
// row as a level's rows, then (after a barrier of the solving warps) the entries among its rows, which one
// warp applies by forward substitution, lane i holding row i, each solved value a shuffle and one
// multiply-add per lane as in the dense kernels (kernels/dense_trsv.cuh; J. D. Hogg, SISC 2013): no
// reduction and no block barrier a level. Only packs with chains run the kernel that solves them: it
// spends more on every level, not only on the chains (docs/benchmarks/sptrsv.md, "Chains of single-row
// levels as one warp's forward substitution"), so the plan packs chains only where they remove at least
// kChainMinSaving of the levels (level_pack_levels).
//
// Many right-hand sides: a thread block per right-hand side, each on its own SM walking every level with
// its own copies of the levels (block_column). A level's cost is its chain of dependent instructions, not
// its arithmetic, so the right-hand sides run side by side at the speed of one; solving them together in
// one block (lanes over the right-hand sides) multiplied the warps that every level waits for (H100,
// docs/benchmarks/sptrsv.md, version 13).
#include <algorithm>
#include <climits>

#include "kernels/sptrsv_block.cuh"

namespace spade::kernels::sptrsv {
namespace {

/// Levels between issuing a tier of copies and reading what it copied.
constexpr int kLead = 4;
/// Ring slots of descriptors, stages and b: each holds a level's data from the copy's issue to its last
/// read, 3 kLead + 2, 2 kLead + 2 and kLead + 2 levels.
constexpr int kDescSlots = 16;
constexpr int kStages = 2 * kLead + 2;
constexpr int kRhsSlots = kLead + 2;
static_assert(kDescSlots >= 3 * kLead + 2, "descriptor ring too small");
/// The staged kernel runs levels of at most this many rows on average; wider ones cost more instructions
/// per level than the direct kernel's memory round trip (H100: staged 3.9 against 4.6 ms at 241 rows per
/// level, lap2d5 256 x 4096; 4.6 against 3.7 ms at 410, lap2d5 512 x 2048).
constexpr int kStagedRowsPerLevel = 300;
static_assert(kChainRows <= 32, "a chain's b fits a slot of b, which holds at least 32 rows (plan_layout)");
/// The solution ring's fewest rows (plan_layout shrinks stages and b slots before the ring).
constexpr long long kMinRingRows = 256;
/// Levels the pipeline runs ahead before the first level is solved.
constexpr int kPrologue = 3 * kLead + 1;

__host__ __device__ constexpr long long round16(long long bytes) { return (bytes + 15) / 16 * 16; }

/// A packed level (LevelDesc) staged at `stage`, its region in device memory at `region`: the entries are
/// read from the stage where the level is staged whole, else from the region.
template <typename T>
struct LevelView {
  const std::int32_t* ptr;
  const index_t* caller;
  const T* inv_diag;
  const index_t* ind;
  const T* val;
  __device__ LevelView(const unsigned char* stage, const unsigned char* region, const LevelDesc& d)
      : ptr(reinterpret_cast<const std::int32_t*>(stage)),
        caller(reinterpret_cast<const index_t*>(stage + d.caller)),
        inv_diag(reinterpret_cast<const T*>(stage + d.inv_diag)),
        ind(reinterpret_cast<const index_t*>((d.ind < d.bytes ? stage : region) + d.ind)),
        val(reinterpret_cast<const T*>((d.ind < d.bytes ? stage : region) + d.val)) {}
};

__device__ inline unsigned shared_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

/// Copies 16 bytes (both addresses 16-byte aligned).
__device__ inline void copy_async_16(void* dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(shared_address(dst)), "l"(src) : "memory");
}

/// Copies one element of 4 or 8 bytes (aligned to its size).
template <typename U>
__device__ inline void copy_async_element(U* dst, const U* src) {
  static_assert(sizeof(U) == 4 || sizeof(U) == 8, "cp.async copies 4, 8 or 16 bytes");
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(shared_address(dst)), "l"(src), "n"(sizeof(U))
               : "memory");
}

__device__ inline void commit_copies() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

/// Waits until at most kLead - 1 of this thread's groups of copies are still in flight.
__device__ inline void wait_copies() { asm volatile("cp.async.wait_group %0;\n" ::"n"(kLead - 1) : "memory"); }

/// Where a launch keeps its data in shared memory (byte offsets) and how much a stage and a b slot hold.
struct Layout {
  int solver_threads;  ///< the threads that solve rows; the rest of the block copies
  int stage_bytes;  ///< the largest packed level a stage holds
  int rhs_rows;     ///< rows of a level whose b a slot holds
  int ring_log2;    ///< the solution ring holds 2^ring_log2 rows
  int stages, rhs, ring, rhs_slot_bytes, total;
};

/// A group's row of a level, read before the level: the row (-1: none), its entries [kb, ke) in the
/// level, the caller's index, this lane's first kLevelBlockEntries entries (`in_ring`: the ring holds
/// the solution of each), b and the inverse of the diagonal.
template <typename T>
struct RowRegs {
  index_t p = -1, ui = 0;
  int kb = 0, ke = 0;
  bool in_ring = true;
  index_t ind[kLevelBlockEntries] = {};
  T val[kLevelBlockEntries] = {};
  T b = T(0);
  T inv_d = T(1);
};

/// Row i of a level starting at row q0 into registers, with b from the level's b slot when it holds the
/// row (i < rhs_rows), else from the caller's b. The ring holds the rows from ring_first on.
template <typename T, int V>
__device__ inline RowRegs<T> read_row(const LevelView<T>& v, const T* bslot, int rhs_rows, const RhsPass<T>& rhs,
                                      int lane, index_t q0, int i, index_t ring_first) {
  RowRegs<T> row;
  row.p = q0 + i;
  row.kb = v.ptr[i];
  row.ke = v.ptr[i + 1];
  row.ui = v.caller[i];
  row.inv_d = v.inv_diag[i];
#pragma unroll
  for (int t = 0; t < kLevelBlockEntries; ++t) {
    const int k = row.kb + lane + t * V;
    if (k < row.ke) {
      row.ind[t] = v.ind[k];
      row.val[t] = v.val[k];
      row.in_ring = row.in_ring && row.ind[t] >= ring_first;
    }
  }
  row.b = i < rhs_rows ? bslot[i] : rhs.b[row.ui];
  return row;
}

/// Entries of a chain's forward substitution: the strictly lower triangle of its k rows.
__host__ __device__ constexpr long long chain_entries(long long k) { return k * (k - 1) / 2; }

/// Where a level's arrays after its diagonal start (bytes), its diagonal at `inv_diag` for k rows: a
/// chain's forward-substitution entries.
template <typename T>
__host__ __device__ constexpr long long after_diagonal(long long inv_diag, long long k) {
  return inv_diag + round16(static_cast<long long>(sizeof(T)) * k);
}

/// The entries of row i (ptr, ind: the part's arrays) in columns before `first`, summed over the warp;
/// every lane gets the count.
__device__ inline int entries_before(const std::int32_t* ptr, const index_t* ind, long long i, long long first,
                                     int lane) {
  int before = 0;
  for (long long k = ptr[i] + lane; k < ptr[i + 1]; k += kWarpSize) before += ind[k] < first;
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) before += __shfl_xor_sync(kFullMask, before, offset);
  return before;
}

/// A chain piece (LevelDesc d, rows = -k; v its view, staged at `stage`), b of its rows in `bslot`, solved
/// by the block's `solvers` threads. Its rows' sums over columns before the piece first,
/// V lanes a row as the kernel's levels take them, each row's (b - sum) / diagonal into the ring; after a
/// barrier of the solvers, warp 0 applies the entries among the rows (divided by their rows' diagonals,
/// column j holding rows j + 1 to k - 1), lane i holding row i: column j's value is final once columns 0
/// to j - 1 are applied, so lane j broadcasts it and every lane below applies it, a shuffle and a
/// multiply-add a row where a level each would cost a barrier and a reduction.
template <typename T, int V>
__device__ void solve_chain(const LevelView<T>& v, const unsigned char* stage, const T* bslot, LevelDesc d,
                            const Ring<T>& ring, T* y, bool write_y, const RhsPass<T>& rhs, int solvers) {
  const int k = -d.rows, warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const index_t q0 = d.first_row;
  const auto* column = reinterpret_cast<const T*>(stage + after_diagonal<T>(d.inv_diag, k));
  // The sums, G rows a pass (the loop's bounds are the same for every lane of a warp: group_sum shuffles).
  const int G = solvers / V, g = threadIdx.x / V, gl = threadIdx.x % V;
  for (int base = 0; base < k; base += G) {
    const int i = base + g;
    const bool in = i < k;
    T sum = in ? add_entries<T, V>(v.ind, v.val, ring, v.ptr[i] + gl, v.ptr[i + 1], q0 + k) : T(0);
    sum = group_sum<V>(sum);
    if (in && gl == 0) ring.values[(q0 + i) & ring.mask] = (bslot[i] - sum) * v.inv_diag[i];
  }
  asm volatile("bar.sync 1, %0;" ::"r"(solvers) : "memory");
  if (warp != 0) return;
  const bool in = lane < k;
  T t = in ? ring.values[(q0 + lane) & ring.mask] : T(0);
  T entry = k > 1 && lane >= 1 && in ? column[lane - 1] : T(0);
  for (int j = 0; j + 1 < k; ++j) {
    const T* after = column + (k - 1 - j);
    // The next column's entry first: its load is off the chain of broadcasts.
    const T following = j + 2 < k && lane >= j + 2 && in ? after[lane - j - 2] : T(0);
    const T xj = __shfl_sync(kFullMask, t, j);
    if (lane > j) t -= entry * xj;
    entry = following;
    column = after;
  }
  if (in) {
    const index_t p = q0 + lane;
    ring.values[p & ring.mask] = t;
    if (write_y) y[p] = t;
    rhs.x[v.caller[lane]] = t;
  }
}

template <typename T, int V, bool Chains>
__global__ void __launch_bounds__(kLevelBlockMaxThreads)
    level_block_kernel(LevelPack<T> pack, T* y, RhsPass<T> pass, Layout lay) {
  constexpr int K = kLevelBlockEntries;
  extern __shared__ __align__(16) unsigned char level_block_shared[];
  unsigned char* const shared = level_block_shared;
  LevelDesc* const desc_ring = reinterpret_cast<LevelDesc*>(shared);  // [kDescSlots]
  const index_t n = pack.n;
  const int nlev = pack.nlev;
  const RhsPass<T> rhs = block_column(pass, y, n);
  const Ring<T> ring{reinterpret_cast<T*>(shared + lay.ring), (index_t(1) << lay.ring_log2) - 1, y};
  const bool write_y = n > ring.mask + 1;  // else every row stays in the ring
  // Warps [0, solvers) solve the rows; the others only copy, at the same time.
  const int solvers = lay.solver_threads, t = threadIdx.x;
  const bool copier = t >= solvers;
  const int ct = t - solvers, nct = blockDim.x - solvers;
  const int G = solvers / V;  // rows per pass
  const int g = t / V, lane = t % V;
  // Every level's arrays before its entries fit a stage (launch_staged): level m (descriptor d) is read
  // from its stage, its entries too where it is staged whole (LevelView).
  auto stage = [&](int m) { return shared + lay.stages + (m % kStages) * lay.stage_bytes; };
  auto rhs_slot = [&](int m) { return reinterpret_cast<T*>(shared + lay.rhs + (m % kRhsSlots) * lay.rhs_slot_bytes); };
  auto view = [&](int m, const LevelDesc& d) {
    return LevelView<T>(stage(m), pack.data + std::int64_t(d.chunk) * 16, d);
  };

  RowRegs<T> next;                    // the group's row of the level about to be solved
  index_t next_first = 0, next_rows = 0;  // and that level's rows
  for (int l = -kPrologue; l < nlev; ++l) {
    if (Chains && !copier && l >= 0 && next_rows < 0) {
      // A chain piece (rows = -k).
      const LevelDesc d = desc_ring[l % kDescSlots];
      solve_chain<T, V>(view(l, d), stage(l), rhs_slot(l), d, ring, y, write_y, rhs, solvers);
    } else if (!copier && l >= 0) {
      // Level l: rows [q0, q1), the first pass from registers.
      const index_t q0 = next_first, q1 = q0 + next_rows;
      {
        T sum = T(0);
        if (next.p >= 0) {
          // Entries in the ring (the usual case) are read without a branch on where they are.
          if (next.in_ring) {
#pragma unroll
            for (int k = 0; k < K; ++k)
              if (next.kb + lane + k * V < next.ke) sum += next.val[k] * ring.values[next.ind[k] & ring.mask];
          } else {
#pragma unroll
            for (int k = 0; k < K; ++k)
              if (next.kb + lane + k * V < next.ke) sum += next.val[k] * ring.get(next.ind[k], q1);
          }
          if (next.kb + lane + K * V < next.ke) {
            const LevelView<T> v = view(l, desc_ring[l % kDescSlots]);
            sum += add_entries<T, V>(v.ind, v.val, ring, next.kb + lane + K * V, next.ke, q1);
          }
        }
        sum = group_sum<V>(sum);
        if (next.p >= 0 && lane == 0) finish_row(ring, y, write_y, rhs, next.p, next.ui, next.b, sum, next.inv_d);
      }
      // Further passes over a level wider than G rows.
      if (next_rows > G) {
        const LevelView<T> v = view(l, desc_ring[l % kDescSlots]);
        const T* bslot = rhs_slot(l);
        for (int base = G; base < next_rows; base += G) {
          const int i = base + g;
          const bool in = i < next_rows;
          T sum = in ? add_entries<T, V>(v.ind, v.val, ring, v.ptr[i] + lane, v.ptr[i + 1], q1) : T(0);
          sum = group_sum<V>(sum);
          if (in && lane == 0) {
            const index_t ui = v.caller[i];
            finish_row(ring, y, write_y, rhs, q0 + i, ui, i < lay.rhs_rows ? bslot[i] : rhs.b[ui], sum, v.inv_diag[i]);
          }
        }
      }
    }

    // The copies of this level, each tier kLead levels behind the one whose data it needs.
    if (copier) {
      const int m0 = l + 3 * kLead + 1;  // the descriptor of level m0
      if (ct < 2 && m0 >= 0 && m0 < nlev)
        copy_async_16(reinterpret_cast<int4*>(&desc_ring[m0 % kDescSlots]) + ct,
                      reinterpret_cast<const int4*>(pack.desc + m0) + ct);
      const int m1 = l + 2 * kLead + 1;  // the packed region of level m1, into its stage
      if (m1 >= 0 && m1 < nlev) {
        const LevelDesc& d = desc_ring[m1 % kDescSlots];
        unsigned char* dst = stage(m1);
        const unsigned char* src = pack.data + std::int64_t(d.chunk) * 16;
        for (int c = ct * 16; c < d.bytes; c += nct * 16) copy_async_16(dst + c, src + c);
      }
      const int m2 = l + kLead + 1;  // b of level m2, gathered through the staged caller's rows
      if (m2 >= 0 && m2 < nlev) {
        const LevelDesc& d = desc_ring[m2 % kDescSlots];
        const index_t* caller = reinterpret_cast<const index_t*>(stage(m2) + d.caller);
        T* bslot = rhs_slot(m2);
        for (int row = ct; row < min(abs(d.rows), lay.rhs_rows); row += nct)  // a chain: -d.rows <= rhs_rows
          copy_async_element(bslot + row, rhs.b + caller[row]);
      }
      commit_copies();
      wait_copies();
    } else if (l + 1 >= 0 && l + 1 < nlev) {
      // The group's row of level l + 1 into registers (its stage and b were complete at the last barrier).
      const LevelDesc d = desc_ring[(l + 1) % kDescSlots];
      next = g < d.rows ? read_row<T, V>(view(l + 1, d), rhs_slot(l + 1), lay.rhs_rows, rhs, lane, d.first_row, g,
                                         d.first_row + d.rows - ring.mask - 1)
                        : RowRegs<T>{};
      next_first = d.first_row;
      next_rows = d.rows;
    }
    __syncthreads();
  }
}

/// The shared-memory layout for levels of at most max_rows rows and max_bytes packed bytes within
/// `budget` bytes; the solution ring takes what is left (at most n rows).
template <typename T>
Layout plan_layout(index_t n, int max_rows, long long max_bytes, int budget) {
  constexpr long long kMinStage = 1024, row_bytes = sizeof(T);
  long long stage = round16(std::max(max_bytes, 16LL));
  long long rows = std::min<long long>(1024, (std::max(max_rows, 1) + 31) / 32 * 32);
  const long long head = round16(kDescSlots * sizeof(LevelDesc));
  while (head + kStages * stage + kRhsSlots * round16(rows * row_bytes) + kMinRingRows * row_bytes > budget &&
         (stage > kMinStage || rows > 32)) {
    stage = std::max(kMinStage, round16(stage * 3 / 4));
    rows = std::max(32LL, (rows * 3 / 4 + 31) / 32 * 32);
  }
  Layout lay{};
  lay.stage_bytes = static_cast<int>(stage);
  lay.rhs_rows = static_cast<int>(rows);
  lay.rhs_slot_bytes = static_cast<int>(round16(rows * row_bytes));
  lay.stages = static_cast<int>(head);
  lay.rhs = lay.stages + kStages * lay.stage_bytes;
  lay.ring = lay.rhs + kRhsSlots * lay.rhs_slot_bytes;
  lay.ring_log2 = 0;
  while ((index_t(1) << lay.ring_log2) < n && lay.ring + (2LL << lay.ring_log2) * row_bytes <= budget)
    ++lay.ring_log2;
  lay.total = lay.ring + static_cast<int>((1LL << lay.ring_log2) * row_bytes);
  return lay;
}

}  // namespace

template <typename T>
long long level_block_stage_cap(int max_rows) {
  static const int budget = shared_budget();
  const long long rows = std::min<long long>(1024, (std::max(max_rows, 1) + 31) / 32 * 32);
  const long long head = round16(kDescSlots * sizeof(LevelDesc));
  const long long left =
      budget - head - kRhsSlots * round16(rows * static_cast<long long>(sizeof(T))) - kMinRingRows * sizeof(T);
  return std::max(0LL, left / kStages / 16 * 16);
}

namespace {

template <typename T, int V, bool Chains>
void launch(const LevelPack<T>& pack, Layout lay, int budget, T* y, const RhsPass<T>& rhs, cudaStream_t stream) {
  // A copying warp per 256 copies of a level (16-byte chunks of its stage and values of b), up to 4.
  // V lanes for each row of one pass (level_block_pass_rows); wider levels take further passes over their
  // stage.
  const long long copies = lay.stage_bytes / 16 + lay.rhs_rows;
  const int copiers = kWarpSize * static_cast<int>(std::min<long long>(4, (copies + 255) / 256));
  const long long wanted = V * level_block_pass_rows(pack.n, pack.levels, pack.max_rows);
  lay.solver_threads = static_cast<int>(
      std::min<long long>((wanted + kWarpSize - 1) / kWarpSize * kWarpSize, kLevelBlockMaxThreads - copiers));
  const int threads = lay.solver_threads + copiers;
  static const cudaError_t attribute =
      cudaFuncSetAttribute(level_block_kernel<T, V, Chains>, cudaFuncAttributeMaxDynamicSharedMemorySize, budget);
  cuda_check(attribute, "cudaFuncSetAttribute(level_block_kernel)", __FILE__, __LINE__);
  level_block_kernel<T, V, Chains><<<rhs.nr, threads, lay.total, stream>>>(pack, y, rhs, lay);
  check_launch("level_block_kernel");
}

/// launch with the lanes per row of the pack's longest rows.
template <typename T, bool Chains>
void launch_lanes(const LevelPack<T>& pack, Layout lay, int budget, T* y, const RhsPass<T>& rhs, cudaStream_t stream) {
  switch (lanes_per_row(pack.longest_row)) {
    case 1: launch<T, 1, Chains>(pack, lay, budget, y, rhs, stream); break;
    case 2: launch<T, 2, Chains>(pack, lay, budget, y, rhs, stream); break;
    case 4: launch<T, 4, Chains>(pack, lay, budget, y, rhs, stream); break;
    case 8: launch<T, 8, Chains>(pack, lay, budget, y, rhs, stream); break;
    case 16: launch<T, 16, Chains>(pack, lay, budget, y, rhs, stream); break;
    default: launch<T, 32, Chains>(pack, lay, budget, y, rhs, stream); break;
  }
}

/// The staged kernel when the levels are narrow (at most kStagedRowsPerLevel rows on average) and every
/// one fits a stage (true), else nothing (false).
template <typename T>
bool launch_staged(const LevelPack<T>& pack, T* y, const RhsPass<T>& rhs, cudaStream_t stream) {
  static const int budget = shared_budget();
  const Layout lay = plan_layout<T>(pack.n, pack.max_rows, pack.max_bytes, budget);
  if (lay.stage_bytes < pack.max_bytes || pack.n > static_cast<long long>(kStagedRowsPerLevel) * pack.levels)
    return false;
  if (pack.chains)
    launch_lanes<T, true>(pack, lay, budget, y, rhs, stream);
  else
    launch_lanes<T, false>(pack, lay, budget, y, rhs, stream);
  return true;
}

/// A warp per packed level: the level's descriptor and size, and the entries that set its lanes per row
/// added to *longest_rows: its longest row (a chain: the most entries a row has before the piece, which
/// set the block's width as a level's rows would), but no more than kLevelBlockEntries per lane of a block
/// whose threads each take one lane of the level's rows (a wider level takes several passes, each as long
/// as its longest row, so more lanes per row only add passes there).
template <typename T>
__global__ void level_pack_sizes_kernel(int npack, const PackLevel* levels, const std::int32_t* ptr,
                                        const index_t* ind, long long stage_cap, LevelDesc* desc,
                                        std::int32_t* chunks, int* max_chunks, unsigned long long* longest_rows) {
  const long long warp = (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (warp >= npack) return;
  const int m = static_cast<int>(warp);
  const PackLevel level = levels[m];
  const bool chain = level.kind == PackKind::chain;
  const long long first = level.first_row, rows = level.rows;
  long long entries = 0;
  int longest = 0;
  if (!chain) {
    for (long long i = first + lane; i < first + rows; i += kWarpSize) longest = max(longest, ptr[i + 1] - ptr[i]);
    entries = ptr[first + rows] - ptr[first];
  } else {
    for (long long i = first; i < first + rows; ++i) {
      const int before = entries_before(ptr, ind, i, first, lane);
      longest = max(longest, before);
      entries += before;
    }
  }
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
    longest = max(longest, __shfl_xor_sync(kFullMask, longest, offset));
  if (lane != 0) return;
  const long long one_pass = static_cast<long long>(kLevelBlockEntries) * kLevelBlockMaxThreads / max(rows, 1LL);
  atomicAdd(longest_rows, static_cast<unsigned long long>(min(static_cast<long long>(longest), one_pass)));
  LevelDesc d;
  d.first_row = static_cast<std::int32_t>(first);
  d.rows = static_cast<std::int32_t>(chain ? -rows : rows);
  d.chunk = 0;
  // A chain's forward-substitution entries lie between its diagonal and its columns; it stages the arrays
  // before its columns (level_pack_stage_chains stages the rest where it fits a stage as the other levels
  // set it): up to a warp of rows each as long as a level would otherwise set the stage size, and read
  // from device memory they cost one round trip a piece, not a level a row.
  const long long caller = round16(4 * (rows + 1)), inv_diag = caller + round16(4 * rows);
  const long long ind_at = after_diagonal<T>(inv_diag, rows) +
                           (chain ? round16(static_cast<long long>(sizeof(T)) * chain_entries(rows)) : 0);
  const long long val = ind_at + round16(static_cast<long long>(sizeof(index_t)) * entries);
  const long long bytes = val + round16(static_cast<long long>(sizeof(T)) * entries);
  const long long staged = chain || bytes > stage_cap ? ind_at : bytes;
  const bool fits = bytes <= INT_MAX;
  d.caller = static_cast<std::int32_t>(caller);
  d.inv_diag = static_cast<std::int32_t>(inv_diag);
  d.ind = fits ? static_cast<std::int32_t>(ind_at) : 0;
  d.val = fits ? static_cast<std::int32_t>(val) : 0;
  d.bytes = fits ? static_cast<std::int32_t>(staged) : INT_MAX;
  desc[m] = d;
  chunks[m] = fits ? static_cast<int>(bytes / 16) : INT_MAX;
  atomicMax(max_chunks, fits ? static_cast<int>(staged / 16) : INT_MAX);
}

/// A thread per packed level: a chain whose region is no larger than the most any level stages
/// (max_chunks) is staged whole.
__global__ void level_pack_stage_chains_kernel(int npack, const PackLevel* levels, const std::int32_t* chunks,
                                               const int* max_chunks, LevelDesc* desc) {
  const long long m = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (m >= npack || levels[m].kind != PackKind::chain || chunks[m] > *max_chunks) return;
  desc[m].bytes = chunks[m] * 16;
}

/// A block per packed level: the level's region at chunk offsets[m].
template <typename T>
__global__ void level_pack_fill_kernel(LowerPart<T> L, const PackLevel* levels, const std::int32_t* offsets,
                                       LevelDesc* desc, unsigned char* data) {
  __shared__ std::int32_t kept[kChainRows + 1];  // a chain: each row's entries before the piece
  const int m = blockIdx.x;
  const LevelDesc d = desc[m];
  const PackLevel level = levels[m];
  __syncthreads();  // every thread has read desc[m] before thread 0 rewrites it
  if (threadIdx.x == 0) desc[m].chunk = offsets[m];
  unsigned char* base = data + std::int64_t(offsets[m]) * 16;
  const std::int32_t first = level.first_row, rows = level.rows, e0 = L.ptr[first];
  auto* ptr = reinterpret_cast<std::int32_t*>(base);
  auto* caller = reinterpret_cast<index_t*>(base + d.caller);
  auto* inv_diag = reinterpret_cast<T*>(base + d.inv_diag);
  auto* ind = reinterpret_cast<index_t*>(base + d.ind);
  auto* val = reinterpret_cast<T*>(base + d.val);
  for (int i = threadIdx.x; i < rows; i += blockDim.x) {
    caller[i] = caller_index(L.perm[first + i], L.n, L.reversed);
    inv_diag[i] = T(1) / L.diag[first + i];
  }
  if (level.kind == PackKind::level) {
    const std::int32_t entries = L.ptr[first + rows] - e0;
    for (int i = threadIdx.x; i <= rows; i += blockDim.x) ptr[i] = L.ptr[first + i] - e0;
    for (int k = threadIdx.x; k < entries; k += blockDim.x) {
      ind[k] = L.ind[e0 + k];
      val[k] = L.val[e0 + k];
    }
    return;
  }
  // A chain: each row's entries before the piece in their order (counted, scanned, then compacted), and
  // the entries among its rows divided by their row's diagonal, the triangle's other positions zero.
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize, warps = blockDim.x / kWarpSize;
  auto* column = reinterpret_cast<T*>(base + after_diagonal<T>(d.inv_diag, rows));
  for (long long k = threadIdx.x; k < chain_entries(rows); k += blockDim.x) column[k] = T(0);
  for (int i = warp; i < rows; i += warps) {
    const int before = entries_before(L.ptr, L.ind, first + i, first, lane);
    if (lane == 0) kept[i] = before;
  }
  __syncthreads();  // the counts, and the triangle zeroed
  if (threadIdx.x == 0) {
    std::int32_t sum = 0;
    for (int i = 0; i < rows; ++i) {
      const std::int32_t c = kept[i];
      ptr[i] = kept[i] = sum;
      sum += c;
    }
    ptr[rows] = sum;
  }
  __syncthreads();
  for (int i = warp; i < rows; i += warps) {
    std::int32_t at = kept[i];
    const std::int32_t end = L.ptr[first + i + 1];
    const T inv = T(1) / L.diag[first + i];
    for (std::int32_t k0 = L.ptr[first + i]; k0 < end; k0 += kWarpSize) {
      const std::int32_t k = k0 + lane;
      const bool keep = k < end && L.ind[k] < first;
      const unsigned mask = __ballot_sync(kFullMask, keep);
      if (keep) {
        const std::int32_t to = at + __popc(mask & ((1u << lane) - 1));
        ind[to] = L.ind[k];
        val[to] = L.val[k];
      } else if (k < end) {
        const std::int32_t j = L.ind[k] - first;  // column j of the triangle, row i
        column[chain_entries(rows) - chain_entries(rows - j) + (i - j - 1)] = L.val[k] * inv;
      }
      at += __popc(mask);
    }
  }
}

}  // namespace

std::vector<PackLevel> level_pack_levels(const std::vector<std::int32_t>& level_ptr) {
  std::vector<PackLevel> out;
  const int nlev = level_ptr.empty() ? 0 : static_cast<int>(level_ptr.size()) - 1;
  long long widest = 0;
  for (int l = 0; l < nlev; ++l) widest = std::max<long long>(widest, level_ptr[l + 1] - level_ptr[l]);
  const long long piece_rows =
      nlev == 0 ? 0 : std::min<long long>(kChainRows, level_block_pass_rows(level_ptr[nlev], nlev, widest));
  long long saved = 0;  // levels the chains remove: a piece of m levels replaces them by one
  for (int l = 0; l < nlev;) {
    int count = 0;  // the consecutive levels from l on whose rows fit one piece
    while (l + count < nlev && level_ptr[l + count + 1] - level_ptr[l] <= piece_rows) ++count;
    const std::int32_t rows = level_ptr[l + count] - level_ptr[l];
    if (count < kChainMinRun || rows > static_cast<long long>(kChainMaxRowsPerLevel) * count) {
      out.push_back({level_ptr[l], level_ptr[l + 1] - level_ptr[l], PackKind::level});
      ++l;
      continue;
    }
    out.push_back({level_ptr[l], rows, PackKind::chain});
    saved += count - 1;
    l += count;
  }
  if (saved >= kChainMinSaving * nlev) return out;
  out.clear();  // too few: the levels as they are
  for (int l = 0; l < nlev; ++l) out.push_back({level_ptr[l], level_ptr[l + 1] - level_ptr[l], PackKind::level});
  return out;
}

template <typename T>
void level_pack_sizes(int npack, const PackLevel* levels, const std::int32_t* ptr, const index_t* ind,
                      long long stage_cap, LevelDesc* desc, std::int32_t* chunks, int* max_chunks,
                      unsigned long long* longest_rows, cudaStream_t stream) {
  if (npack == 0) return;
  level_pack_sizes_kernel<T><<<blocks_for(static_cast<long long>(npack) * kWarpSize, kBlockThreads), kBlockThreads,
                               0, stream>>>(npack, levels, ptr, ind, stage_cap, desc, chunks, max_chunks,
                                            longest_rows);
  check_launch("level_pack_sizes_kernel");
}

void level_pack_stage_chains(int npack, const PackLevel* levels, const std::int32_t* chunks, const int* max_chunks,
                             LevelDesc* desc, cudaStream_t stream) {
  if (npack == 0) return;
  level_pack_stage_chains_kernel<<<blocks_for(npack, kBlockThreads), kBlockThreads, 0, stream>>>(
      npack, levels, chunks, max_chunks, desc);
  check_launch("level_pack_stage_chains_kernel");
}

template <typename T>
void level_pack_fill(const LowerPart<T>& L, int npack, const PackLevel* levels, const std::int32_t* offsets,
                     LevelDesc* desc, unsigned char* data, cudaStream_t stream) {
  if (npack == 0) return;
  level_pack_fill_kernel<T><<<npack, kBlockThreads, 0, stream>>>(L, levels, offsets, desc, data);
  check_launch("level_pack_fill_kernel");
}

template <typename T>
void solve_level_block(const LevelPack<T>& pack, const LowerPart<T>& L, const std::int32_t* level_ptr, T* y,
                       const RhsPass<T>& rhs, cudaStream_t stream) {
  if (pack.n == 0 || pack.nlev == 0) return;
  if (!launch_staged(pack, y, rhs, stream))
    solve_level_block_direct(L, level_ptr, pack.levels, pack.max_rows, pack.longest_row, y, rhs, stream);
}

#define SPADE_LEVEL_BLOCK(T)                                                                                      \
  template void level_pack_sizes<T>(int, const PackLevel*, const std::int32_t*, const index_t*, long long,      \
                                    LevelDesc*, std::int32_t*, int*, unsigned long long*, cudaStream_t);         \
  template long long level_block_stage_cap<T>(int);                                                             \
  template void level_pack_fill<T>(const LowerPart<T>&, int, const PackLevel*, const std::int32_t*, LevelDesc*,  \
                                   unsigned char*, cudaStream_t);                                                \
  template void solve_level_block<T>(const LevelPack<T>&, const LowerPart<T>&, const std::int32_t*, T*,            \
                                     const RhsPass<T>&, cudaStream_t);
SPADE_LEVEL_BLOCK(double)
SPADE_LEVEL_BLOCK(float)
#undef SPADE_LEVEL_BLOCK

}  // namespace spade::kernels::sptrsv
