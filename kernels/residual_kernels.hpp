// The residual and backward error of iterative refinement on the GPU, in one pass over A (called by
// solve/gpu_solve.cu's GpuResidual). Every pointer here is DEVICE memory; launches are asynchronous on
// `stream`. The host reference is solve/refine.cpp's residual_and_error (spade::backward_error).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace spade::kernels {

/// A square n x n matrix in CSR, 0-based, 32-bit indices: row i's entries are values[row_ptr[i] ..
/// row_ptr[i + 1]) in the columns col_ind[...] (any order within a row).
struct CsrView {
  int n;
  const int* row_ptr;  // n + 1
  const int* col_ind;
  const double* values;
};

/// The vectors a residual pass reads: B and X, and optionally a refinement step's correction D, which the
/// pass adds to X as it reads it (the iterate X + D, written to X_new), so that the step's update costs no
/// pass of its own. Each n x nrhs, column-major, leading dimension n, device memory.
struct ResidualInput {
  const double* B = nullptr;
  const double* X = nullptr;
  const double* D = nullptr;  // null: no correction
  double* X_new = nullptr;    // with D: receives X + D; aliases none of B, X and D
};

/// R = B - A X (with a correction: X_new = X + D and R = B - A X_new) and, into result[0] and result[1],
/// the largest |r_i| and the largest componentwise backward error |r_i| / (|A| |x| + |b|)_i (Oettli and
/// Prager, 1964) over the rows and the nrhs columns: 0 where r_i = 0, Inf where only the denominator is
/// 0, NaN where r_i is NaN. The maxima are written as the bit patterns of non-negative doubles by
/// atomicMax, so result must hold zeros (two 64-bit words) before the launch. R: n x nrhs, leading
/// dimension n; it aliases none of the input's vectors. Throws InvalidInput for D without X_new or X_new
/// without D.
///
/// One pass over A instead of cuSPARSE's two SpMVs (A x and |A| |x|) and four vector operations: A's
/// bytes are read once, and no copy of |A| is kept. Rows go to groups of `group` lanes of a warp (1, 2, 4,
/// 8, 16 or 32; residual_group), each lane striding over the row's entries with the row's sums reduced by
/// shuffles: the "CSR-vector" SpMV of Bell and Garland (SC 2009) with groups as narrow as one lane ("CSR-
/// scalar") for short rows. Columns of X go eight at a time, so A is read ceil(nrhs / 8) times. Throws
/// InvalidInput for another group; ResourceError for a CUDA failure.
void launch_residual(const CsrView& A, const ResidualInput& in, double* R, int nrhs, int group,
                     unsigned long long* result, cudaStream_t stream);

/// The lanes per row of launch_residual for n rows whose longest has `longest_row` entries, on a device
/// with `multiprocessors` SMs: the smallest power of two in [1, 32] such that
///  - the longest row takes at most 8 steps of its group: the narrowest group keeps the most rows in
///    flight per warp, which a pass bound by memory needs, but a row is a serial chain of ceil(length /
///    group) steps that the rest of the pass may wait for;
///  - the groups give every multiprocessor a block of work (n x group >= multiprocessors x 256): where
///    rows are too few for that at one lane each, wider groups use lanes that would idle.
/// Formed and checked on the residuals of 35 matrices (docs/benchmarks/solve.md, "The residual").
int residual_group(long long longest_row, long long n, int multiprocessors);

/// A refinement run entirely on the device (GpuSolvePlan::refine): the residual pass's two result words
/// and the stopping rules' state, in device memory, followed in the same allocation by the history (the
/// norms of steps 0 .. max_steps, their backward errors, then 1 where a step's correction was solved in
/// FP32: refine_history_doubles).
struct RefineState {
  unsigned long long result[2];  ///< launch_residual's maxima of the step being evaluated; zeroed once read
  int steps;                     ///< rows of the history written
  int stop;                      ///< a RefineStop
  int current;                   ///< which of the two iterate blocks (0, 1) holds the iterate kept
  int current_step;              ///< that iterate's row of the history
  int single;                    ///< the next correction solves in FP32
  int redo;                      ///< an FP32 correction made things worse: the kept iterate goes into its block
};
enum RefineStop : int {
  kRefineGoing = 0,
  kRefineConverged = 1,
  kRefineStagnated = 2,
  kRefineMaxSteps = 3,
  kRefineSolveFailed = 4,  ///< the solve's status reported a spin-wait that gave up
};
/// Doubles after RefineState that hold the history of a refinement of at most max_steps corrections.
inline std::size_t refine_history_doubles(int max_steps) { return 3 * (static_cast<std::size_t>(max_steps) + 1); }

/// Which evaluation a turn of launch_refine_step follows.
enum class RefineTurn : int {
  first,       ///< of the first solve's iterate: starts a run
  correction,  ///< of an iterate plus its correction
  redo,        ///< of the kept iterate, copied into the block of an FP32 correction that made things worse
};

/// The conditional handles a turn sets (cudaGraphSetConditional; only in a CUDA graph that holds their
/// nodes), those whose bit is in `mask`: `loop` and `next` to 1 where refinement goes on, `precision` to 1
/// where the next correction solves in FP32, `redo` to 1 where the kept iterate must be copied and
/// evaluated again (RefineState::redo).
struct RefineHandles {
  enum : unsigned { kLoop = 1, kNext = 2, kPrecision = 4, kRedo = 8 };
  cudaGraphConditionalHandle loop = 0, next = 0, precision = 0, redo = 0;
  unsigned mask = 0;
};

/// A turn of the stopping rules of refine_loop (solve/refine_loop.hpp: the host reference), on the device,
/// by one thread, after launch_residual wrote state->result, which it reads and zeroes. The iterate just
/// evaluated is in block `written`. A first or correction turn records the step in the history, a first
/// turn starts the run with corrections in FP32 where `single`; the rules: stop when berr <= tolerance
/// (converged); after a correction, where berr > tolerance and berr > half the kept iterate's, an FP64
/// correction stops (stagnated; the new iterate kept only where better), an FP32 one hands over to FP64
/// and goes on, keeping the better iterate (the worse one's block then receives the kept iterate: redo);
/// stop after max_steps corrections; stop when *solve_status (the solve's DeviceStatus code; may be null)
/// is not 0. A redo turn, after that copy and its evaluation, makes block `written` the kept one and sets
/// no handle.
void launch_refine_step(RefineState* state, RefineTurn turn, int written, int max_steps, double tolerance,
                        bool single, const int* solve_status, const RefineHandles& handles, cudaStream_t stream);

}  // namespace spade::kernels
