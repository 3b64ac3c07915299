// The residual and backward error of iterative refinement on the GPU, in one pass over A (called by
// solve/gpu_solve.cu's GpuResidual). Every pointer here is DEVICE memory; launches are asynchronous on
// `stream`. The host reference is solve/refine.cpp's residual_and_error (spade::backward_error).
#pragma once

#include <cuda_runtime.h>

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

}  // namespace spade::kernels
