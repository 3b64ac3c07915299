// Host-callable launchers of the sparse triangular-solve kernels (kernels/sptrsv_*.cu), used by the plan in
// solve/sptrsv.cu. Every launcher enqueues on `stream`, checks the launch and throws ResourceError on a
// CUDA error; none synchronizes.
//
// Internal form. Every triangle is held as a *lower* one: an upper triangle is solved in reversed numbering
// (internal unknown i is the caller's n - 1 - i), which turns it into a lower one. The plan keeps the
// strictly lower part (CSR or CSC, indices sorted, 32-bit pointers) and the diagonal in its own array; the
// caller's unknown of internal unknown i is `reversed ? n - 1 - i : i`.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/sync.cuh"
#include "spade/sparse_matrix.hpp"

namespace spade::kernels::sptrsv {

constexpr int kWarpSize = 32;
/// Warps per thread block of every solve kernel; one ticket hands out a whole block's work.
constexpr int kBlockWarps = 8;
constexpr int kBlockThreads = kWarpSize * kBlockWarps;
/// Right-hand sides per pass of a multi-rhs solve (the kernels are instantiated for 1 and for this many).
constexpr int kRhsPerPass = 8;
/// fused: marks a work item that is one row solved by a whole warp (otherwise a 32-row chunk).
constexpr std::int32_t kWarpRowBit = std::int32_t(1) << 30;

/// The strictly lower part in internal numbering, device memory. CSR: ptr over rows, ind = columns;
/// CSC: ptr over columns, ind = rows.
template <typename T>
struct LowerPart {
  index_t n;
  const std::int32_t* ptr;
  const index_t* ind;
  const T* val;
  const T* diag;  ///< n diagonal values (1 for a unit diagonal)
  bool reversed;  ///< caller's index of internal i is n - 1 - i
  /// The part renumbered in level order (fused_level, level_block, cluster, and auto's levr where its
  /// other pick runs on that part; nullptr otherwise): row i of this part is internal row perm[i] (so the
  /// caller's unknown is caller_index(perm[i])).
  const std::int32_t* perm = nullptr;
};

/// One pass over nr <= R right-hand sides (device, column-major). The kernels run with R = 1 when nr == 1
/// and R = kRhsPerPass otherwise (level_block: a thread block per right-hand side, kernels/sptrsv_block.cuh);
/// per-unknown scratch holds R values per unknown: interleaved in left_sum (right-hand side r of unknown i
/// at i * R + r), rhs-major in the fused and level_block solution buffers (at r * n + i).
template <typename T>
struct RhsPass {
  const T* b;
  index_t ldb;
  T* x;
  index_t ldx;
  int nr;
};

/// LEVR splits a row of more than this many entries into pieces of this many (the last one shorter), each a
/// warp's work in the row's level: a row of 5,059 entries (c-62) no longer holds its level's launch while
/// one warp walks it.
constexpr std::int32_t kLevrPiece = 64;

/// LEVR puts several rows in a warp where no row of the part has more than this many entries (one
/// right-hand side: a lane per entry, 8 rows a warp; eight: a lane per right-hand side, 4 rows a warp).
constexpr int kLevrShortRow = 4;

/// One warp's work in a level of LEVR when rows are split (device, 16 bytes): entries first to
/// min(first + kLevrPiece, end of the row) of row `row` (of the part levr runs on). pieces: how many the row
/// has; slot: for pieces > 1, where the row's partial sums meet (LevrItems::partial and ::arrived), unique
/// among the split rows.
struct alignas(16) LevrPiece {
  std::int32_t row;
  std::int32_t first;
  std::int32_t slot;
  std::int32_t pieces;
};

/// What the warps of a LEVR level work on, device memory. piece null: the rows, position p of a level
/// (level_ptr) being row jlev[p] (jlev null: row p, the part renumbered in level order). piece set:
/// position p is piece[p] (positions then run over pieces, the level pointers over them too); the pieces
/// of a split row add their sums into partial (kRhsPerPass values per slot) and count themselves in
/// arrived; the last to arrive solves the row and sets both back to zero. longest: the most entries of a
/// row or piece (at most kLevrPiece), which picks the lanes a row takes.
template <typename T>
struct LevrItems {
  const std::int32_t* jlev = nullptr;
  const LevrPiece* piece = nullptr;
  T* partial = nullptr;
  int* arrived = nullptr;
  int longest = kLevrPiece;
};

/// Per-launch scheduling state shared by the self-scheduled kernels.
struct Schedule {
  int* tickets;           ///< two ints, zero before the launch, zero again after it (the last block resets)
  DeviceStatus* status;   ///< first error of the launch
};

// ---- analysis (kernels/sptrsv_analysis.cu) ----

/// Error codes of inspect_triangle, in `bad` = (segment << 8) | code (minimum over bad segments).
enum InspectCode : int { kBadPointer = 1, kBadIndex = 2, kUnsorted = 3, kWrongTriangle = 4 };

/// Inputs of inspect_triangle / scatter_same_orientation: the caller's arrays.
template <typename T>
struct InputTriangle {
  index_t n;
  std::int32_t nnz;  ///< must equal ptr[n] (kBadPointer otherwise)
  const std::int32_t* ptr;
  const index_t* ind;
  const T* val;
  bool csr;       ///< segments are rows (else columns)
  bool lower;
  bool unit;
};

/// One warp per segment (row of CSR, column of CSC): validates it, counts its off-diagonal entries into
/// count[internal segment] and writes diag / diag_src (input position of the diagonal entry, -1 if none).
/// bad: atomicMin of (segment << 8 | InspectCode), 0x7fff...ffff if none. zero_row: atomicMin of the
/// caller's row of a zero (or missing) non-unit diagonal, INT32_MAX if none. Where given (device, may be
/// null): *max_count := max(*max_count, count[i]) over the segments (count_max, done here), and
/// level[internal segment] := 0 (the level analysis' array, cleared here rather than by a memset).
template <typename T>
void inspect_triangle(const InputTriangle<T>& in, std::int32_t* count, T* diag, std::int32_t* diag_src,
                      unsigned long long* bad, int* zero_row, int* max_count, int* level, cudaStream_t stream);

/// Copies the off-diagonal entries into the internal lower form in the input's orientation, sorted;
/// out_ptr is the exclusive scan of count, diag_src as inspect_triangle wrote it. src[k] = input position
/// of internal entry k. *kept := out_ptr[n], the entries copied (device).
template <typename T>
void scatter_same_orientation(const InputTriangle<T>& in, const std::int32_t* out_ptr, const std::int32_t* diag_src,
                              index_t* out_ind, T* out_val, std::int32_t* src, int* kept, cudaStream_t stream);

/// count[ind[k]] += 1 over k < nnz, and k < *limit when limit (device) is given (count zeroed by the
/// caller); count_max: *max_count := max(*max_count, count[i]) over i < n.
void histogram(std::int32_t nnz, const index_t* ind, std::int32_t* count, cudaStream_t stream,
               const int* limit = nullptr);
void count_max(index_t n, const std::int32_t* count, int* max_count, cudaStream_t stream);

/// Bytes of temporary device memory exclusive_scan (over n inputs) and sort_pairs (count pairs of
/// end_bit-bit keys) need; the plan allocates them up front with everything else.
std::size_t scan_temp_bytes(index_t n);
std::size_t sort_temp_bytes(std::int32_t count, int end_bit);
/// Number of bits of the keys 0 .. value.
int key_bits(long long value);

/// Exclusive prefix sum of in[0..n) into out[0..n] (out[n] = total), in one scan of n + 1 items: in must
/// hold n + 1 readable entries (the last is read, never summed).
void exclusive_scan(index_t n, const std::int32_t* in, std::int32_t* out, void* temp, std::size_t temp_bytes,
                    cudaStream_t stream);

/// Work arrays of transpose_lower: counts (n + 1) and four of nnz entries.
struct TransposeWork {
  std::int32_t* counts;
  index_t* outer;
  std::int32_t* order_in;
  std::int32_t* order_out;
  index_t* keys_out;
  void* temp;
  std::size_t temp_bytes;  ///< >= scan_temp_bytes(n) and sort_temp_bytes(nnz, key_bits(n))
};

/// Transposes the internal lower part (ptr/ind/val/src with n segments, nnz entries) into out_* (the
/// other orientation), inner indices sorted: a stable radix sort by inner index.
template <typename T>
void transpose_lower(index_t n, std::int32_t nnz, const std::int32_t* ptr, const index_t* ind, const T* val,
                     const std::int32_t* src, std::int32_t* out_ptr, index_t* out_ind, T* out_val,
                     std::int32_t* out_src, const TransposeWork& work, cudaStream_t stream);

/// Level of every unknown (0 for no dependency), the length of the longest chain ending there, by Kahn's
/// topological sort run in one launch (Li 2017 removes the roots level by level, a launch each). csr:
/// a thread per row pulls the levels of its columns, in 32-row chunks as in the fused solve; CSC: a thread
/// per column waits until its in-degree counter shows every incoming edge removed, then removes its
/// outgoing edges (atomicMax of the level, release add of the counter). level and work (n ints, CSC only)
/// zeroed by the caller; indeg: CSC in-degrees. Both leave level[i] = level + 1 (level_sets subtracts the
/// 1 in the pass that starts its sort); *max_level := max level + 1 (the number of levels).
/// levels_csr's bad (device, may be null): inspect_triangle's word; where it shows bad input the kernel
/// computes nothing, so that it may run before the host has checked the input.
void levels_csr(index_t n, const std::int32_t* ptr, const index_t* ind, int* level, int* max_level,
                const unsigned long long* bad, const Schedule& s, cudaStream_t stream);
void levels_csc(index_t n, const std::int32_t* ptr, const index_t* ind, const std::int32_t* indeg, int* level,
                int* work, int* max_level, const Schedule& s, cudaStream_t stream);

/// Level sets: jlev = unknowns sorted by level (stable: index order inside a level), level_ptr[l] = first
/// position of level l, level_ptr[*nlev] = n (nlev: device, the count levels_csr / levels_csc wrote).
/// level: as levels_csr / levels_csc left it (level + 1); holds the levels (0-based) afterwards.
/// levels: that count where the host knows it (the sort then reads key_bits(levels - 1) bits of a level,
/// one radix pass for up to 256 levels), else -1 (key_bits(n) bits). order_in and keys_out: n ints of
/// work; temp: sort_temp_bytes(n, key_bits(n)) bytes.
void level_sets(index_t n, const int* nlev, int levels, int* level, std::int32_t* jlev, std::int32_t* level_ptr,
                std::int32_t* order_in, int* keys_out, void* temp, std::size_t temp_bytes, cudaStream_t stream);

/// fused_level: the strictly lower CSR part renumbered in level order, P L P^T with row r of the result =
/// row jlev[r] of L (level_sets' order, so the result is lower triangular again). perm_count: inv[jlev[r]] = r,
/// count[r] = entries of row jlev[r], diag / diag_src gathered the same way (out_*). perm_fill (after
/// exclusive_scan of count into out_ptr): row r's entries with columns inv[j], in L's order (not sorted:
/// the fused kernel needs no order), val and src carried along.
template <typename T>
void perm_count(index_t n, const std::int32_t* ptr, const std::int32_t* jlev, const T* diag,
                const std::int32_t* diag_src, std::int32_t* inv, std::int32_t* count, T* out_diag,
                std::int32_t* out_diag_src, cudaStream_t stream);
template <typename T>
void perm_fill(index_t n, const std::int32_t* ptr, const index_t* ind, const T* val, const std::int32_t* src,
               const std::int32_t* jlev, const std::int32_t* inv, const std::int32_t* out_ptr, index_t* out_ind,
               T* out_val, std::int32_t* out_src, cudaStream_t stream);

/// LEVR's pieces where some row has more than kLevrPiece entries: count[p] = pieces of the row at position
/// p (jlev[p], or p where jlev is null; at least 1), scanned into piece_ptr (n + 1), then piece[] filled
/// (slot = piece_ptr[p] - p, distinct for split rows, below max_slots = the pieces beyond the first over
/// all rows <= nnz / kLevrPiece) and level_piece_ptr[l] = piece_ptr[level_ptr[l]] for l <= *nlev (device).
/// piece holds n + nnz / kLevrPiece entries at most; count and piece_ptr: n + 1 ints; temp:
/// scan_temp_bytes(n).
void levr_pieces(index_t n, const std::int32_t* ptr, const std::int32_t* jlev, const std::int32_t* level_ptr,
                 const int* nlev, std::int32_t* count, std::int32_t* piece_ptr, LevrPiece* piece,
                 std::int32_t* level_piece_ptr, void* temp, std::size_t temp_bytes, cudaStream_t stream);

/// syncfree scratchpad split: for each entry (row i, column j) of the CSC part, counts it into
/// local_deg[i] when j and i fall in the same block of kBlockWarps columns, else into global_deg[i]
/// (both zeroed by the caller).
void split_in_degree(index_t n, const std::int32_t* ptr, const index_t* ind, std::int32_t* global_deg,
                     std::int32_t* local_deg, cudaStream_t stream);

/// fused: work items over 32-row chunks (YuenyeungSpTRSV): a chunk whose mean off-diagonal count per row
/// exceeds `threshold` becomes one item per row (kWarpRowBit | row), otherwise one item (its first row).
/// items must hold n + 1 entries; *nitems is written on the device. per_chunk and base: nchunks + 1 ints
/// of work (nchunks = ceil(n / 32)); temp: scan_temp_bytes(nchunks) bytes.
void fused_items(index_t n, const std::int32_t* ptr, double threshold, std::int32_t* items, int* nitems,
                 std::int32_t* per_chunk, std::int32_t* base, void* temp, std::size_t temp_bytes,
                 cudaStream_t stream);

/// update_values: val[k] = values[src[k]], diag[i] = unit ? 1 : (diag_src[i] < 0 ? 0 : values[diag_src[i]]);
/// zero_row as in inspect_triangle (row i is internal row perm[i] when perm is given: the level-ordered part).
template <typename T>
void gather_values(index_t n, std::int32_t nnz, const T* values, const std::int32_t* src,
                   const std::int32_t* diag_src, bool unit, bool reversed, const std::int32_t* perm, T* val,
                   T* diag, int* zero_row, cudaStream_t stream);

/// Fills count entries with the "not yet solved" sentinel (a signalling NaN that arithmetic never makes).
template <typename T>
void fill_sentinel(std::int64_t count, T* y, cudaStream_t stream);

// ---- solves ----

/// LEVR: one launch per level, a warp per row, piece of a row or several short rows
/// (kernels/sptrsv_level.cu), recorded once as a CUDA graph and replayed: a graph starts a chain of small
/// kernels about three times faster than the host launches them (H100, 900 kernels with programmatic
/// dependent launch: 1.1 against 3.7 us each). The graph holds the right-hand side of its first solve (b, x,
/// their leading dimensions and the count) as its kernels' argument. Solves with another one replay a
/// second graph, recorded at the first of them, whose kernels read it from one RhsPass in device memory;
/// a one-thread kernel stores it there first where it differs from the last one stored. No solve rewrites
/// a node: the cost of a new buffer does not grow with the levels. (The second graph's levels are up to
/// 18% slower for several right-hand sides on narrow levels, hence the first.) Passes of several
/// right-hand sides also write each solution into `y`, the R values of each unknown side by side, which
/// the later levels read; on rows of at most kLevrShortRow entries, and where x is larger than half the L2
/// cache, x is copied from y after the last level instead of being stored by the levels. Where `stream` is
/// being captured (the caller records a graph of its own), the levels are launched one by one instead,
/// each with the pass as an argument.
template <typename T>
class LevrGraph {
 public:
  LevrGraph() = default;
  LevrGraph(const LevrGraph&) = delete;
  LevrGraph& operator=(const LevrGraph&) = delete;
  ~LevrGraph();
  /// Solves one pass; records the graph on the first call. x may alias b. items: the rows or pieces of
  /// the levels (LevrItems), level l being positions level_ptr_host[l] to level_ptr_host[l + 1] of them.
  /// y: device scratch of n * kRhsPerPass values, used when rhs.nr > 1. L, items, the levels, y and
  /// whether rhs.nr is 1 must be the same in every call (L's values may change).
  void solve(const LowerPart<T>& L, const LevrItems<T>& items, const std::int32_t* level_ptr_host, int nlev,
             const RhsPass<T>& rhs, T* y, cudaStream_t stream);
  /// Where the second graph reads its pass (device, one RhsPass, owned by the caller and kept for the
  /// graph's life), so that a solve allocates nothing. Required before the first solve with other buffers
  /// than the first's (which throws ResourceError without it).
  void set_pass_storage(RhsPass<T>* at) { pass_at_ = at; }

 private:
  /// Records the levels (pass_at: null, the pass as an argument; else read from there) and instantiates
  /// them.
  cudaGraphExec_t record(const LowerPart<T>& L, const LevrItems<T>& items, const std::int32_t* level_ptr_host,
                         int nlev, const RhsPass<T>& rhs, const RhsPass<T>* pass_at, T* y);
  cudaGraphExec_t exec_ = nullptr;           ///< the levels with recorded_ as their argument
  RhsPass<T> recorded_{};                    ///< the pass of the first solve
  cudaGraphExec_t exec_indirect_ = nullptr;  ///< the levels reading the pass from pass_at_
  RhsPass<T>* pass_at_ = nullptr;            ///< device: the pass of the latest other solve
  RhsPass<T> stored_{};                      ///< the pass last enqueued into pass_at_
};
/// LEVC: x := b, then one launch per level, a warp per column adding its updates into x atomically.
template <typename T>
void solve_levc(const LowerPart<T>& L, const std::int32_t* jlev, const std::int32_t* level_ptr_host, int nlev,
                const RhsPass<T>& rhs, cudaStream_t stream);
/// SLFR: a warp per row in level order; flag[i] == epoch once x[i] is written (kernels/sptrsv_selfsched.cu).
template <typename T>
void solve_slfr(const LowerPart<T>& L, const std::int32_t* jlev, int* flag, int epoch, const RhsPass<T>& rhs,
                const Schedule& s, cudaStream_t stream);
/// SLFC (jlev != nullptr: level order, no scratchpad) and syncfree (jlev == nullptr: index order with the
/// scratchpad, local_deg required). counter[i] reaches epoch * global_deg[i] once every update through
/// global memory has arrived; left_sum (n * R) is zero before and after a launch.
template <typename T>
void solve_columns(const LowerPart<T>& L, const std::int32_t* jlev, const std::int32_t* global_deg,
                   const std::int32_t* local_deg, int* counter, int epoch, T* left_sum, const RhsPass<T>& rhs,
                   const Schedule& s, cudaStream_t stream);
/// thread / fused / fused_level (L.perm given): nitems work items (fused_items); y_cur holds sentinels
/// before the launch and the solution (n * R, rhs-major: r * n + i) after it; y_next is reset to sentinels
/// for the next launch.
template <typename T>
void solve_fused(const LowerPart<T>& L, const std::int32_t* items, int nitems, T* y_cur, T* y_next,
                 const RhsPass<T>& rhs, const Schedule& s, cudaStream_t stream);

/// One packed level of level_block (kernels/sptrsv_block.cu): rows [first_row, first_row + rows) of the
/// part renumbered in level order, in one region of 16-byte chunks starting at chunk `chunk` of the pack,
/// of which the first `bytes` go into a stage: the row pointers relative to the level's first entry (rows +
/// 1 ints) at byte 0, the caller's unknown of each row (ints) at byte `caller`, the inverse of the diagonal
/// (T) at `inv_diag`, the columns in level order (ints) at `ind` and the values (T) at `val`, each array
/// padded to a multiple of 16 bytes. A chain piece (PackKind::chain) has rows = -k for its k rows: its
/// arrays hold only the entries in columns before the piece, and between `inv_diag` and `ind` lie the
/// entries among its rows, each divided by its row's diagonal, column after column (column j: rows j + 1 to
/// k - 1). Where a level's or a piece's region does not fit a stage, only the arrays before `ind` are staged
/// (`bytes` = ind) and the columns and values are read from the region in device memory.
struct alignas(16) LevelDesc {
  std::int32_t first_row, rows, chunk, bytes;
  std::int32_t caller, inv_diag, ind, val;
};

/// What level_block does with a packed level.
enum class PackKind : std::int32_t {
  level,  ///< a level set: every row solved at once, the rows of a level side by side
  chain,  ///< a chain piece, the k rows of consecutive narrow level sets (k <= kChainRows): each row's sum
          ///< over columns before the piece at once, then one warp finishes the k rows by forward
          ///< substitution, lane i holding row i, each solved value a broadcast and one multiply-add per
          ///< lane (the dense kernels' inner loop, kernels/dense_trsv.cuh) instead of a level a set
};

/// A packed level: rows [first_row, first_row + rows) in level order, and its kind.
struct PackLevel {
  std::int32_t first_row, rows;
  PackKind kind;
};

/// The most rows of a chain piece: one warp solves it, a lane a row.
constexpr int kChainRows = 32;
/// Pieces of at least this many level sets: a piece costs about two levels (its sums, one pass of the
/// block, then its forward substitution, a few cycles a row, both within one barrier of the block), so it
/// pays from three levels on.
constexpr int kChainMinRun = 3;

/// The most rows a piece may hold per level set it covers, on average: its forward substitution costs a
/// dependent shuffle and multiply-add a row, a level set at least a pass and a barrier of the block (tens
/// of times more), so a piece of few rows a set saves most of its sets' cost and one of wide sets little
/// or nothing (docs/benchmarks/sptrsv.md, "Narrow level sets as chain pieces").
constexpr int kChainMaxRowsPerLevel = 4;

/// The share of the levels that chains must remove (a piece of m level sets: m - 1) for a pack to have
/// them: the kernel that solves chains spends more on every level (kernels/sptrsv_block.cu).
constexpr double kChainMinSaving = 0.125;

/// level_block's rows of a level solved at once (one pass of its solving threads, at least that many):
/// twice the mean level width, no more than the widest level (n rows, `levels` level sets). Every warp
/// runs every level, so idle ones cost time, and the few wider levels take further passes.
inline long long level_block_pass_rows(long long n, long long levels, long long widest) {
  return std::max(1LL, std::min(widest, 2 * ((n + levels - 1) / std::max(levels, 1LL))));
}

/// level_block's packed levels for the level sets level_ptr (host, levels + 1 entries): each level as it is,
/// but the most consecutive level sets whose rows fit one piece (at most kChainRows, and no more than one
/// pass of the block solves at once, level_block_pass_rows, so that the piece's sums cost one pass as a
/// level's rows do), taken greedily from the first set on, packed as one chain piece where they are
/// kChainMinRun or more and hold at most kChainMaxRowsPerLevel rows a set; where those pieces remove at
/// least kChainMinSaving of the levels. Host code.
std::vector<PackLevel> level_pack_levels(const std::vector<std::int32_t>& level_ptr);

/// level_block: entries per lane of a row read into registers before the row's level; the rest come when
/// it is solved.
constexpr int kLevelBlockEntries = 4;

/// level_block: the threads of a block.
constexpr int kLevelBlockMaxThreads = 1024;

/// Lanes per row for rows of `entries_per_row` off-diagonal entries: a power of two <= 32, enough for
/// kLevelBlockEntries entries per lane. level_block passes the mean of each level's longest row (a level
/// waits for its longest row; LevelPack::longest_row); cluster the mean row.
inline int lanes_per_row(double entries_per_row) {
  int lanes = 1;
  while (lanes < kWarpSize && lanes * kLevelBlockEntries < entries_per_row) lanes *= 2;
  return lanes;
}

/// level_block's packed copy of the part, device memory: nlev descriptors and the regions they describe.
template <typename T>
struct LevelPack {
  index_t n;
  int nlev;                   ///< packed levels (PackLevel)
  int levels;                 ///< the part's level sets (a chain counts each of its rows as one)
  const LevelDesc* desc;
  const unsigned char* data;  ///< 16-byte aligned
  int max_rows;               ///< the widest level (sets the block size)
  int max_bytes;              ///< the largest level's staged bytes (sets the stage size)
  bool chains;                ///< whether any packed level is a chain piece
  double longest_row;         ///< mean over the packed levels of each one's longest row (a chain's: its
                              ///< entries before the piece), in off-diagonal entries, capped where a level
                              ///< takes several passes (level_pack_sizes): sets the lanes per row, as a
                              ///< level waits for its longest row
};

/// The most bytes of a packed level that the staged level_block kernel holds in a stage, for levels of at
/// most max_rows rows, on the current device (its shared memory beside the b slots and the smallest
/// solution ring, kernels/sptrsv_block.cu). Host code.
template <typename T>
long long level_block_stage_cap(int max_rows);

/// Sizes of the packed levels `levels` (npack of them, device memory) of the part with row pointers ptr and
/// columns ind: every field of desc[m] but chunk, chunks[m] = 16-byte chunks of level m's region,
/// *max_chunks := the most staged chunks of a level (a region of 2^31 bytes or more gives INT_MAX),
/// *longest_rows += each level's longest row (entries), at most kLevelBlockEntries * kLevelBlockMaxThreads /
/// (the level's rows), a chain's rows counting their entries before the piece. A level whose region
/// exceeds stage_cap bytes (level_block_stage_cap) stages only its arrays before `ind`, as a chain does:
/// its entries are read from device memory, so that one large level does not keep every other from the
/// staged kernel.
template <typename T>
void level_pack_sizes(int npack, const PackLevel* levels, const std::int32_t* ptr, const index_t* ind,
                      long long stage_cap, LevelDesc* desc, std::int32_t* chunks, int* max_chunks,
                      unsigned long long* longest_rows, cudaStream_t stream);
/// After level_pack_sizes: each chain whose region (chunks[m]) is no larger than *max_chunks is staged
/// whole (desc[m].bytes = its region); the others stage only their arrays before `ind`.
void level_pack_stage_chains(int npack, const PackLevel* levels, const std::int32_t* chunks, const int* max_chunks,
                             LevelDesc* desc, cudaStream_t stream);
/// Fills the packed levels from the part L (level order, L.perm given) at the chunk offsets (the exclusive
/// scan of level_pack_sizes' chunks) and sets desc[m].chunk = offsets[m]; run again after the values change.
template <typename T>
void level_pack_fill(const LowerPart<T>& L, int npack, const PackLevel* levels, const std::int32_t* offsets,
                     LevelDesc* desc, unsigned char* data, cudaStream_t stream);

/// level_block: one thread block per right-hand side walks the levels, a __syncthreads between levels.
/// When every level of the pack fits a shared-memory stage, each level's packed data is copied into shared
/// memory ahead of it (kernels/sptrsv_block.cu); otherwise the level-ordered part L (L.perm given; level l
/// is rows [level_ptr[l], level_ptr[l + 1]), level_ptr on the device) is read into registers ahead of each
/// level (kernels/sptrsv_block_direct.cu). y: n * rhs.nr scratch, no initial contents needed. x may alias b.
template <typename T>
void solve_level_block(const LevelPack<T>& pack, const LowerPart<T>& L, const std::int32_t* level_ptr, T* y,
                       const RhsPass<T>& rhs, cudaStream_t stream);

// ---- cluster (kernels/sptrsv_cluster.cu, compute capability 9.0) ----

/// Thread blocks of one cluster (a non-portable cluster size) and the most levels between a row and a row
/// it reads that the cluster solve handles (its mbarriers are numbered by level modulo distance + 1).
constexpr int kClusterBlocks = 16;
constexpr int kClusterMaxDistance = 15;
/// The ring slots of a block are numbered in 16 bits (push codes: slot, mbarrier << 16, block << 20).
constexpr int kClusterMaxRingLog2 = 16;
/// The most threads of a cluster block: at 128 registers a thread holds the rows it reads ahead without
/// spilling (at 1024 threads, 64 registers, it spilled them and waited for each level's loads; with the
/// other changes of version 16, lap2d5 1024^2 went from 4.78 to 2.35 ms on the H100). A share of more rows
/// than fit is solved in further passes.
constexpr int kClusterMaxThreads = 512;
/// Indices of the words cluster_shares and cluster_window compute (zeroed by the caller).
enum ClusterMeasure : int { kClusterDistance = 0, kClusterRows = 1, kClusterWindow = 2 };

/// cluster's layout of the level-ordered part, device memory. Level l's rows [level_ptr[l],
/// level_ptr[l + 1]) are split into kClusterBlocks shares of consecutive rows (share b starts at row
/// level_ptr[l] + ceil(b * size / kClusterBlocks)); every entry has a slot in the ring of the block whose
/// share holds its row, the entries of a share in consecutive slots (modulo the ring size).
struct ClusterLayout {
  int distance = 0;   ///< the most levels between a row and a row it reads
  int ring_log2 = 0;  ///< slots per block's ring: 2^ring_log2, enough for distance + 1 levels' shares
  int max_rows = 0;   ///< the most rows of one share (sets the block size)
  int nlev = 0;
  const std::int32_t* level_ptr = nullptr;  ///< nlev + 1
  const std::int32_t* segment = nullptr;    ///< nlev * kClusterBlocks + 1: exclusive scan of the shares' entries,
                                            ///< block-major (share (b, l) at b * nlev + l)
  const int2* share_rows = nullptr;         ///< nlev * kClusterBlocks: rows [x, y) of share (b, l), block-major
  const std::int32_t* row_slot = nullptr;   ///< n: ring slot of each row's first entry
  const std::int32_t* push_ptr = nullptr;   ///< n + 1: row c's push codes are push[push_ptr[c] ..)
  const std::uint32_t* push = nullptr;      ///< one per entry (r, c), in c's list: r's slot | mbarrier
                                            ///< (level of r mod cluster_barriers) << 16 | r's block << 20
};

/// The mbarriers of a cluster block, used in turn by the levels (level l waits on mbarrier l mod this):
/// distance + 1, at least 2 (a level's mbarrier is armed for its next level one level later).
__host__ __device__ inline int cluster_barriers(const ClusterLayout& c) {
  return c.distance + 1 > 2 ? c.distance + 1 : 2;
}

/// The first measurements of the layout of the level-ordered part (ptr, ind; nlev levels level_ptr):
/// row_level (n ints), rows[b * nlev + l] = the rows [x, y) and count[b * nlev + l] the entries of share
/// (b, l), measures[kClusterDistance] and measures[kClusterRows] (atomic maxima).
void cluster_shares(index_t n, int nlev, const std::int32_t* level_ptr, const std::int32_t* ptr,
                    const index_t* ind, int* row_level, int2* rows, std::int32_t* count, int* measures,
                    cudaStream_t stream);
/// measures[kClusterWindow] := the most entries of distance + 1 consecutive levels' shares of one block
/// (segment: the exclusive scan of cluster_shares' counts).
void cluster_window(int nlev, const std::int32_t* segment, int* measures, cudaStream_t stream);
/// Fills c.row_slot (row_slot) and the push codes (push, at c.push_ptr, the exclusive scan of the
/// entries per column) of the layout c; cursor: n ints zeroed by the caller.
void cluster_pushes(index_t n, const ClusterLayout& c, const int* row_level, const std::int32_t* ptr,
                    const index_t* ind, int* cursor, std::int32_t* row_slot, std::uint32_t* push,
                    cudaStream_t stream);
/// Whether a cluster of kClusterBlocks blocks of this layout can run on the current device (its shared memory
/// fits, the build has sm_90 code, and the occupancy calculator finds room for one cluster).
template <typename T>
bool cluster_fits(const ClusterLayout& c, double entries_per_row);
/// Whether every share of layout c is solved in one pass of its block (its rows times the lanes per row
/// of entries_per_row at most kClusterMaxThreads), where each row is read ahead of its level.
bool cluster_one_pass(const ClusterLayout& c, double entries_per_row);

/// cluster: one thread block cluster per right-hand side walks the levels of the level-ordered part L
/// (L.perm given), each level split over its blocks, solution values pushed into the readers' shared
/// memory (st.async) and counted on their mbarriers, a relaxed cluster barrier between levels. A wait that
/// gives up after status->spin_limit polls reports kStatusSpinTimeout. x may alias b.
template <typename T>
void solve_cluster(const LowerPart<T>& L, const ClusterLayout& c, double entries_per_row, const RhsPass<T>& rhs,
                   DeviceStatus* status, cudaStream_t stream);

}  // namespace spade::kernels::sptrsv
