// Dense triangular solves on the GPU for supernode diagonal blocks (issue 3), following J. D. Hogg,
// "A fast dense triangular solve in CUDA", SIAM J. Sci. Comput. 35(3), 2013, with explicit inversion of
// the 128 x 128 diagonal blocks by Higham's stable recursive method. Device building blocks for use inside
// other kernels (the supernodal solve): kernels/dense_trsv.cuh. Benchmarks: docs/benchmarks/dense_trsv.md.
//
// Conventions shared by every function here:
//  - L is n x n, lower-triangular, column-major with leading dimension lda >= max(1, n), 0-based. Only the
//    lower triangle is read (the diagonal too unless the diagonal is unit); the rest may hold anything.
//  - Right-hand sides X are n x nrhs, column-major, leading dimension ldx >= max(1, n), overwritten by the
//    solution. Rows n .. ldx-1 are never touched.
//  - All matrix and vector pointers are DEVICE pointers. Every call is asynchronous on `stream`: it only
//    enqueues work. Device-side failures (a zero pivot, a spin-wait that timed out) are read by the one
//    synchronizing call, DenseTrsvWorkspace::check.
//  - T is double or float; everything is instantiated for both.
// Throws spade::InvalidInput for bad arguments (naming the argument) before enqueueing anything, and
// spade::ResourceError for CUDA errors (launch failures, out of memory); DenseTrsvWorkspace::check throws
// spade::NumericalError (singular: zero diagonal element; no_progress: spin-wait timeout).
// Requires sm_70 or newer (independent thread scheduling); built and tuned for sm_90.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace spade {

enum class Transpose { no, yes };    ///< solve with L (x := L^{-1} x) or with L^T (x := L^{-T} x)
enum class Diagonal { non_unit, unit };  ///< unit: the diagonal is taken as 1 and never read

/// Tuning knobs of dense_trsm; the defaults are what drivers/bench_dense_trsv found fastest (H100).
struct DenseTrsvOptions {
  static constexpr int kAutoChunk = -1;
  /// Rows per block row of the multi-block kernel: 32, 64 or 128, or 0 to choose by n (the smallest that
  /// covers n up to 64, else 128). A larger block row means fewer inter-block hand-offs on the critical
  /// path, a longer diagonal step per hand-off and more shared memory per block.
  int rows_per_block = 0;
  /// Off-diagonal columns per task, a multiple of 128, 0 for one task per block row, or kAutoChunk (512 for
  /// one right-hand side with n > 8192, else 0). A split block row is owned by the task that
  /// multiplies the 128 columns next to its diagonal and solves the diagonal block; the columns left of
  /// those go in chunks of this many columns to tasks on other thread blocks, whose partial sums meet in
  /// global memory. So the long rows of a large matrix do not each stream through one multiprocessor, and
  /// the owner has few tiles to load once the row before it is solved.
  int chunk_columns = kAutoChunk;
  /// Right-hand-side panels (of 8 columns; 4 or 1 when nrhs is smaller) solved together by one launch,
  /// their tasks interleaved block row by block row, so that their dependency chains overlap; 1 to 64, or
  /// 0 for the default (64). More panels per launch need a larger workspace (publication buffers and
  /// partial sums grow with the right-hand sides of a launch).
  int panels_per_launch = 0;
};

/// Device state of the solves: the work-ticket and exit counters of the multi-block kernel, the device
/// status word (kernels/sync.cuh), a scratch buffer for split block rows (a count and 32 values per 32
/// rows and right-hand side of the largest launch) and two publication buffers (one value per row and
/// right-hand side of the largest launch, at least 8 per row). Each launch leaves the state
/// ready for the next one, so launches need no memset. One workspace serves one stream at a time (two
/// launches in flight at once on different streams must use different workspaces). Created on the current
/// CUDA device.
class DenseTrsvWorkspace {
 public:
  DenseTrsvWorkspace();  ///< allocates 32 bytes of device memory; throws ResourceError on failure
  ~DenseTrsvWorkspace();
  DenseTrsvWorkspace(const DenseTrsvWorkspace&) = delete;
  DenseTrsvWorkspace& operator=(const DenseTrsvWorkspace&) = delete;

  /// Synchronizes `stream` and reads the device status. Throws NumericalError kind `singular` with the
  /// row for a zero diagonal element (non-unit diagonal), kind `no_progress` when a spin-wait timed out
  /// (a dependency that never arrived: a bug, or corrupted counters), ResourceError for a CUDA error. On
  /// error the workspace is reset, so it can be used again.
  void check(cudaStream_t stream);

  /// Polls before a spin-wait of the kernels gives up and reports no_progress (0: the default of
  /// kernels/sync.cuh, seconds of waiting). Tests that provoke a timeout set it small. Synchronous; throws
  /// InvalidInput for a negative value. Do not call while a launch is in flight.
  void set_spin_limit(long long polls);

  /// Device pointer to the counters {ticket, exits, unused, unused}; exposed for tests that provoke a
  /// spin-wait timeout. Do not write them while a launch is in flight.
  int* device_counters() const { return counters_; }
  int multiprocessors() const { return multiprocessors_; }

  /// Zero-initialized device scratch of at least `bytes` (per-block-row chunk counts and partial sums of
  /// dense_trsm, which leaves it zeroed again). Grows when needed: synchronizes `stream`, reallocates and
  /// clears it on `stream`.
  void* scratch(std::size_t bytes, cudaStream_t stream);

  /// The two publication buffers of dense_trsm, for one launch. Each solved x value is published into
  /// `current` as it is computed, and later block rows poll these values (the all-ones bit pattern means
  /// "not yet"); the launch also resets the first `other_dirty_bytes` of `other`, which the launch before
  /// wrote, so the two buffers alternate from launch to launch without a memset. `bytes` is the size the
  /// launch needs per buffer (grows both like scratch(), filled with all-ones bits), `written` how many
  /// leading bytes of `current` the launch may write.
  struct Publication {
    void* current;
    void* other;
    std::size_t other_dirty_bytes;
  };
  Publication publication(std::size_t bytes, std::size_t written, cudaStream_t stream);

 private:
  int* counters_ = nullptr;  // 4 ints of counters, then the kernels::DeviceStatus {code, index, spin_limit}
  int multiprocessors_ = 0;
  void* scratch_ = nullptr;
  std::size_t scratch_bytes_ = 0;
  void* published_ = nullptr;          // two buffers of published_bytes_ each
  std::size_t published_bytes_ = 0;
  std::size_t dirty_[2] = {0, 0};      // leading bytes of each buffer a launch may have written
  int epoch_ = 0;                      // buffer of the last launch
};

/// Number of elements of the inverted-diagonal buffer for an n x n matrix: one 128 x 128 block per
/// diagonal block of 128 rows, ceil(n / 128) * 16384.
std::size_t dense_trsv_inverse_size(int n);

/// Inverts the 128 x 128 diagonal blocks of L once, for reuse by many solves (the supernodal solve inverts
/// once per factorization). `inv` (device, dense_trsv_inverse_size(n) elements) receives block b, the
/// inverse of L[128b .. 128b+127, 128b .. 128b+127], column-major with leading dimension 128 at
/// inv + 16384 b; only its lower triangle is written, and the last block is padded with the identity.
/// Higham's stable recursive method: 32 x 32 tiles inverted by one warp each (off-diagonal halves by
/// substitution), then combined into 64 and 128 blocks (X = -C^{-1} B A^{-1}). Three launches.
/// A zero diagonal element (non-unit) is reported by DenseTrsvWorkspace::check.
template <typename T>
void dense_trsv_invert_diagonal(Diagonal diag, int n, const T* L, int lda, T* inv, DenseTrsvWorkspace& ws,
                                cudaStream_t stream);

/// X := op(L)^{-1} X for nrhs right-hand sides (op(L) = L or L^T). `inv` is either nullptr (the
/// diagonal tiles are solved by substitution, one warp each) or the output of dense_trsv_invert_diagonal
/// for the same L and the same `diag` (the diagonal block of each block row is then applied as one
/// product, Hogg 2013's explicit inversion; the same buffer serves both directions and every
/// rows_per_block, since the diagonal blocks of an inverse are the inverses of the diagonal blocks).
/// Right-hand sides go in panels of at most 8 columns, up to options.panels_per_launch panels per launch;
/// block rows are taken through an atomic ticket and each solved value is published into the workspace's
/// publication buffer, where later block rows poll it (the value is its own ready flag). L (and inv) must not overlap X. The first solve with a larger n
/// than before grows the workspace's scratch and publication buffers, which synchronizes `stream`; later
/// solves are fully asynchronous.
template <typename T>
void dense_trsm(Transpose trans, Diagonal diag, int n, int nrhs, const T* L, int lda, const T* inv, T* X,
                int ldx, DenseTrsvWorkspace& ws, cudaStream_t stream, const DenseTrsvOptions& options = {});

/// x := op(L)^{-1} x for one right-hand side (contiguous, n elements): dense_trsm with nrhs = 1.
template <typename T>
void dense_trsv(Transpose trans, Diagonal diag, int n, const T* L, int lda, const T* inv, T* x,
                DenseTrsvWorkspace& ws, cudaStream_t stream, const DenseTrsvOptions& options = {});

}  // namespace spade
