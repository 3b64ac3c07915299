// Launchers of the supernodal solve kernels (kernels/supernodal_solve.cu), called by the GPU solve plan
// (solve/gpu_solve.cu). Every pointer here is DEVICE memory; every launch is asynchronous on `stream`.
// The schedule they execute and the arithmetic are described in solve/supernodal_schedule.hpp; the host
// reference is schedule_solve_reference there. Requires sm_70 or newer (kernels/sync.cuh).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/sync.cuh"

namespace spade::kernels {

/// One task as the kernels read it: {first, last, row0, col0} of solve/supernodal_schedule.hpp's SolveTask.
using SupernodalTask = int4;

/// The selectively inverted factor and its schedule, read-only during a solve. Indices 0-based; the
/// supernode arrays have num_supernodes (+1 where marked) entries.
struct SupernodalView {
  const SupernodalTask* tasks;           // forward order
  const SupernodalTask* backward_tasks;  // backward order (the same tasks)
  int num_tasks;
  const int* supernode_begin;        // +1
  const long long* row_ptr;          // +1
  const long long* panel_offset;     // +1
  const int* parent;                 // -1 for a root
  const int* units;                  // tiles of a tiled supernode
  const int* need;                   // forward in-degree in tasks
  const int* row_indices;            // rows of each panel, its own columns first
  const int* perm;                   // perm[k] = original index of column k
  const double* values;              // M_s = [V; W] per panel, column-major, leading dimension m
  const float* values_single;        // the same rounded to FP32, or null (read by PanelPrecision::fp32)
};

/// Which panels a sweep reads: the FP64 values, or their FP32 copy (half the bytes, for the corrections of
/// mixed-precision refinement). Either way the sweep computes in FP64: an FP32 entry is widened as it is
/// loaded, so the only difference is the factor's rounding to FP32 (a relative perturbation of at most
/// 2^-24 per entry).
enum class PanelPrecision { fp64, fp32 };

/// The solve's device state. acc, y and x hold n x K values each (row i's K right-hand sides contiguous, K
/// the pass width); ready and done have one counter per supernode; tickets[0] and tickets[1] are the
/// forward and backward work tickets. Between passes, each pass leaving it so: acc, ready and tickets are
/// zero, and y is zero on the rows of supernodes wider than one tile (which it accumulates atomically) as
/// long as K stays the same (zero y again when K changes). done and x are reset by the forward sweep
/// before the backward sweep uses them. Zero everything once, and again after a pass that failed.
struct SupernodalWorkspace {
  double* acc;  // updates subtracted from the right-hand side, on tiled supernodes' columns
  double* y;    // forward solution (permuted numbering)
  double* x;    // backward solution on tiled supernodes' columns (atomic partial sums)
  int* ready;
  int* done;
  int* tickets;
  DeviceStatus* status;
};

/// One pass: right-hand sides b (n x nrhs, column-major, leading dimension ldb, original numbering) and the
/// solution x_out (same shape, leading dimension ldx); nrhs <= K. x_out may equal b. scale_in and scale_out
/// are null or n values (original numbering): the forward sweep reads scale_in[i] b(i, j) and the backward
/// sweep writes scale_out[i] x(i, j) (an LU's row and column scalings, at no launch of their own).
struct SupernodalPass {
  const double* b;
  long long ldb;
  double* x_out;
  long long ldx;
  int nrhs;
  const double* scale_in;
  const double* scale_out;
  /// Null, or 6 x num_tasks timestamps (ns, %globaltimer) that the sweeps write for a diagnosis of the
  /// critical path: forward task t (of `tasks`) {taken, dependencies met, done} at 3t .. 3t+2, backward
  /// task t (of `backward_tasks`) at 3 (num_tasks + t) ..; a group's "dependencies met" comes after its
  /// staging, a backward tile's "done" when it has counted itself done (before a last tile writes x out).
  unsigned long long* trace;
};

/// Threads per block of the solve kernels (warps work independently, each on its own tasks; four warps a
/// block keep the shared memory of a block, 48-60 KB, a small part of a multiprocessor's).
constexpr int kSupernodalThreads = 128;

/// Blocks per multiprocessor that stay resident for a pass of width K (1, 2, 4 or 8) reading the panels in
/// `precision`: the grid of launch_supernodal_forward/backward is this times the multiprocessor count (the
/// kernels are persistent). An FP32 sweep stages its groups' panels in FP32, so at K = 1 its shared memory
/// leaves room for more blocks than an FP64 sweep's.
int supernodal_blocks_per_sm(int K, bool forward, PanelPrecision precision);

/// Dynamic shared memory of one block for width K in `precision`.
std::size_t supernodal_shared_bytes(int K, PanelPrecision precision);

/// Forward sweep y = L^{-1} P b of one pass of width K in {1, 2, 4, 8}, reading the panels in `precision`
/// (fp32 requires view.values_single).
void launch_supernodal_forward(int K, const SupernodalView& view, const SupernodalWorkspace& ws,
                               const SupernodalPass& pass, PanelPrecision precision, int grid, cudaStream_t stream);

/// Backward sweep x_out = P^T L^{-T} y of one pass (after the forward of the same pass).
void launch_supernodal_backward(int K, const SupernodalView& view, const SupernodalWorkspace& ws,
                                const SupernodalPass& pass, PanelPrecision precision, int grid, cudaStream_t stream);

/// out[i] = in[i] rounded to nearest FP32 for i < count; sets *overflow to 1 (leaves it otherwise) where a
/// finite in[i] is too large for FP32 (it would round to an infinity).
void launch_round_to_single(const double* in, float* out, long long count, int* overflow, cudaStream_t stream);

/// Loads the inversion kernels' module now (CUDA loads kernels lazily, at their first launch), so that the
/// first factorization's uploads do not wait for it.
void load_supernodal_kernels();

/// Selective inversion of the supernodes in list[0 .. count) whose diagonal block is at most 32 wide, in
/// place on `values` (panels as in SupernodalView): V = L11^{-1} by Higham's recursive method (one warp,
/// kernels/dense_trsv.cuh warp_invert_tile; zeros above the diagonal) and W = L21 V. A zero pivot is
/// reported in status as kStatusZeroPivot with the permuted column.
void launch_invert_small(const int* list, int count, const int* supernode_begin, const long long* row_ptr,
                         const long long* panel_offset, double* values, DeviceStatus* status, cudaStream_t stream);

/// The widest diagonal block launch_invert_mid inverts: eight 32 x 32 tiles, one warp each.
constexpr int kInvertMidColumns = 256;

/// Selective inversion of the supernodes in list[0 .. count) whose diagonal block is 33 to
/// kInvertMidColumns wide, in place on `values` (panels as in SupernodalView), in three launches for the
/// whole list, both steps by substitution with the original L11 as cuBLAS's trsm: W = L21 L11^{-1} (W L11 =
/// L21, in blocks of 32 rows; rows_below: the most rows below the diagonal block among the list's
/// supernodes, 0 for none), then V = L11^{-1} (L11 V = I by block forward substitution on 32 x 32 tiles,
/// one thread block per tile column, the diagonal tiles inverted by Higham's method) and V moved into
/// place (zeros above the diagonal). The entries above L11's diagonal are scratch until then.
/// The reason for kernels of our own at these sizes is the host's time: cuBLAS's trsm, the path of wider
/// blocks, enqueues several launches per supernode, and the inversions of the last supernodes are what the
/// caller waits for after a small factorization (docs/benchmarks/solve.md). A zero pivot is reported in
/// status as kStatusZeroPivot with the permuted column.
void launch_invert_mid(const int* list, int count, long long rows_below, const int* supernode_begin,
                       const long long* row_ptr, const long long* panel_offset, double* values, DeviceStatus* status,
                       cudaStream_t stream);

/// The panels of an LU factor (include/spade/lu.hpp) in the layout of a Cholesky's, for the selective
/// inversion, in two steps for the supernodes first .. last:
///  - launch_lu_expand_u: each packed U panel (U12^T, (m - k) x k, leading dimension m - k, at
///    u_offset[s] - packed_origin of `packed`) goes below the diagonal block of u_values's panel (m x k,
///    leading dimension m, at panel_offset[s]);
///  - launch_lu_diagonal_blocks: u_values's diagonal block becomes U11^T (read from l_values, where getrf
///    left U11 on and above the diagonal; zeros above it), then l_values's becomes the unit lower L11 (ones
///    on the diagonal, zeros above). The result [U11^T; U12^T] and [L11; L21] are lower-trapezoidal panels
///    whose selective inversion (launch_invert_small, or cuSOLVER and cuBLAS) serves both sweeps.
/// `packed` may lie in l_values's memory as long as the copy of the L panels follows the first step.
void launch_lu_expand_u(int first, int last, const int* supernode_begin, const long long* row_ptr,
                        const long long* panel_offset, const long long* u_offset, const double* packed,
                        long long packed_origin, double* u_values, cudaStream_t stream);
void launch_lu_diagonal_blocks(int first, int last, const int* supernode_begin, const long long* row_ptr,
                               const long long* panel_offset, double* l_values, double* u_values, cudaStream_t stream);

/// The first step of inverting a wide diagonal block L11 (k x k at `panel`, leading dimension m) by a
/// triangular solve with the identity: L11 moves to `work` (k x k, leading dimension k, zeros above its
/// diagonal), the block becomes the identity, and *info = 1 + the first i with L11(i, i) == 0, or 0 (the
/// convention of LAPACK's and cuSOLVER's trtri). Then cuBLAS trsm with `work` turns the block into L11^{-1}.
void launch_move_diagonal_block(double* panel, long long m, int k, double* work, int* info, cudaStream_t stream);

/// The factor's supernodes as the partitioned solve structure (solve/partitioned_inverse.hpp) places
/// them. Arrays per factor supernode unless said.
struct MergedPanels {
  const int* supernode_begin;      // the factor's, +1
  const long long* row_ptr;        // the factor's, +1
  const long long* panel_offset;   // the factor's, +1: where its panel is in `staged`
  const long long* target_offset;  // the offset of its piece's panel in the solve's values
  const int* target_rows;          // that panel's rows (its leading dimension)
  const int* column_offset;        // its first column among the piece's
  const int* row_position;         // per entry of the factor's row indices: its row in the piece's panel
};

/// Places the staged panels of the factor supernodes first .. last (m x k each, column-major, as the host
/// factor lays them out) in their pieces' panels of `values`: entry (r, j) with r >= j goes to row
/// row_position[r] and column column_offset + j. The rest of a piece's panel is left as it is (zero it
/// first: the entries above a diagonal block are not copied).
void launch_scatter_panels(int first, int last, const MergedPanels& panels, const double* staged, double* values,
                           cudaStream_t stream);

}  // namespace spade::kernels
