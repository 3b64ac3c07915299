// The residual and backward error of refinement in one pass over A (see residual_kernels.hpp).
#include "kernels/residual_kernels.hpp"

#include <algorithm>
#include <string>

#include "kernels/cuda_check.hpp"

namespace spade::kernels {
namespace {

constexpr int kResidualThreads = 256;
constexpr int kColumnsPerPass = 8;  // columns of X summed in registers per pass over a row

/// max that keeps a NaN (fmax drops one).
__device__ double max_keeping_nan(double a, double b) { return (b != b) ? b : (a != a) ? a : fmax(a, b); }

/// Rows in groups of G lanes; a warp takes 32 / G consecutive rows per step of a grid-stride loop whose
/// trip count is the same for all its lanes (the shuffles need every lane). C: columns per pass (1 or 8).
/// With `Corrected` the pass's X is X + D, formed as it is read and written to X_new (row i's by the
/// lanes that own row i).
template <int G, int C, bool Corrected>
__global__ void __launch_bounds__(kResidualThreads) residual_kernel(CsrView A, const double* __restrict__ B,
                                                                     const double* __restrict__ X,
                                                                     const double* __restrict__ D,
                                                                     double* __restrict__ X_new,
                                                                     double* __restrict__ R, int nrhs,
                                                                     unsigned long long* result) {
  constexpr int kRowsPerWarp = 32 / G;
  const int lane = threadIdx.x & 31;
  const int sub = lane % G;
  const long long warp = (blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x) >> 5;
  const long long warps = (static_cast<long long>(gridDim.x) * blockDim.x) >> 5;
  const long long n = A.n;
  double norm = 0, berr = 0;
  for (long long first = warp * kRowsPerWarp; first < n; first += warps * kRowsPerWarp) {
    const long long row = first + lane / G;
    const int begin = row < n ? A.row_ptr[row] : 0;
    const int end = row < n ? A.row_ptr[row + 1] : 0;
    for (int c0 = 0; c0 < nrhs; c0 += C) {
      double ax[C], abs_ax[C];
#pragma unroll
      for (int c = 0; c < C; ++c) ax[c] = abs_ax[c] = 0;
      for (int p = begin + sub; p < end; p += G) {
        const double a = A.values[p];
        const long long j = A.col_ind[p];
#pragma unroll
        for (int c = 0; c < C; ++c)
          if (C == 1 || c0 + c < nrhs) {
            const long long e = j + (c0 + c) * n;
            const double t = a * (Corrected ? X[e] + D[e] : X[e]);
            ax[c] += t;
            abs_ax[c] += fabs(t);
          }
      }
#pragma unroll
      for (int c = 0; c < C; ++c)
#pragma unroll
        for (int offset = G / 2; offset > 0; offset /= 2) {
          ax[c] += __shfl_xor_sync(0xffffffffu, ax[c], offset, G);
          abs_ax[c] += __shfl_xor_sync(0xffffffffu, abs_ax[c], offset, G);
        }
      if (sub == 0 && row < n) {
#pragma unroll
        for (int c = 0; c < C; ++c)
          if (C == 1 || c0 + c < nrhs) {
            const long long i = row + (c0 + c) * n;
            if (Corrected) X_new[i] = X[i] + D[i];
            const double b = B[i], r = b - ax[c];
            R[i] = r;
            const double ri = fabs(r), denominator = abs_ax[c] + fabs(b);
            norm = max_keeping_nan(norm, ri);
            if (ri != 0)  // a NaN denominator gives NaN
              berr = max_keeping_nan(berr, denominator == 0 ? __longlong_as_double(0x7ff0000000000000ll)
                                                            : ri / denominator);
          }
      }
    }
  }
  for (int offset = 16; offset > 0; offset /= 2) {
    norm = max_keeping_nan(norm, __shfl_xor_sync(0xffffffffu, norm, offset));
    berr = max_keeping_nan(berr, __shfl_xor_sync(0xffffffffu, berr, offset));
  }
  // One atomic pair per block: atomics of every warp on the same two words would serialize at the L2.
  __shared__ double block_max[2][kResidualThreads / 32];
  if (lane == 0) {
    block_max[0][threadIdx.x >> 5] = norm;
    block_max[1][threadIdx.x >> 5] = berr;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kResidualThreads / 32; ++w) {
      norm = max_keeping_nan(norm, block_max[0][w]);
      berr = max_keeping_nan(berr, block_max[1][w]);
    }
    // Non-negative doubles (and a positive NaN) order as their bit patterns.
    if (norm != 0) atomicMax(result, static_cast<unsigned long long>(__double_as_longlong(fabs(norm))));
    if (berr != 0) atomicMax(result + 1, static_cast<unsigned long long>(__double_as_longlong(fabs(berr))));
  }
}

/// Resident blocks per multiprocessor of residual_kernel<G, C, Corrected>, queried once (every refinement
/// step launches it; the answer depends on the kernel and the architecture only, and a wrong one on a
/// second, different GPU would change the grid's size, never the result).
template <int G, int C, bool Corrected>
int blocks_per_sm() {
  static const int blocks = [] {
    int per_sm = 0;
    SPADE_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, residual_kernel<G, C, Corrected>,
                                                                   kResidualThreads, 0));
    return std::max(per_sm, 1);
  }();
  return blocks;
}

/// The grid-stride loop gives every block the same share of rows, so the grid is what stays resident at
/// once (blocks beyond it would run as a second, partial wave after the first), and no more blocks than
/// the rows need.
template <int G, int C, bool Corrected>
void launch_kernel(const CsrView& A, const ResidualInput& in, double* R, int nrhs, unsigned long long* result,
                   cudaStream_t stream) {
  const long long resident = static_cast<long long>(blocks_per_sm<G, C, Corrected>()) *
                             cuda_device_attribute(cudaDevAttrMultiProcessorCount);
  const long long needed = (static_cast<long long>(A.n) * G + kResidualThreads - 1) / kResidualThreads;
  const int grid = static_cast<int>(std::max(1LL, std::min(needed, resident)));
  residual_kernel<G, C, Corrected><<<grid, kResidualThreads, 0, stream>>>(A, in.B, in.X, in.D, in.X_new, R, nrhs, result);
}

template <int G, bool Corrected>
void launch_columns(const CsrView& A, const ResidualInput& in, double* R, int nrhs, unsigned long long* result,
                    cudaStream_t stream) {
  if (nrhs == 1)
    launch_kernel<G, 1, Corrected>(A, in, R, nrhs, result, stream);
  else
    launch_kernel<G, kColumnsPerPass, Corrected>(A, in, R, nrhs, result, stream);
}

template <int G>
void launch_group(const CsrView& A, const ResidualInput& in, double* R, int nrhs, unsigned long long* result,
                  cudaStream_t stream) {
  if (in.D != nullptr)
    launch_columns<G, true>(A, in, R, nrhs, result, stream);
  else
    launch_columns<G, false>(A, in, R, nrhs, result, stream);
}

__global__ void refine_step_kernel(RefineState* state, RefineTurn turn, int written, int max_steps, double tolerance,
                                   bool single, const int* solve_status, RefineHandles handles) {
  RefineState& st = *state;
  double* norms = reinterpret_cast<double*>(state + 1);
  double* berrs = norms + max_steps + 1;
  double* singles = berrs + max_steps + 1;
  const double norm = __longlong_as_double(static_cast<long long>(st.result[0]));
  const double berr = __longlong_as_double(static_cast<long long>(st.result[1]));
  st.result[0] = st.result[1] = 0;
  if (turn == RefineTurn::redo) {
    st.current = written;
    st.redo = 0;
    return;
  }
  const bool first = turn == RefineTurn::first;
  if (first) {
    st.steps = 0;
    st.current = written;
    st.current_step = 0;
    st.single = single ? 1 : 0;
  }
  const int s = st.steps;
  norms[s] = norm;
  berrs[s] = berr;
  singles[s] = first ? 0.0 : st.single;
  st.steps = s + 1;
  int stop = kRefineGoing, redo = 0;
  if (solve_status != nullptr && *solve_status != 0) {
    stop = kRefineSolveFailed;
  } else if (first) {
    if (berr <= tolerance)
      stop = kRefineConverged;
    else if (max_steps < 1)
      stop = kRefineMaxSteps;
  } else {
    const double kept = berrs[st.current_step];
    // The comparisons of refine_loop, so that a NaN takes the same way (it goes on to max_steps).
    if (berr > tolerance && berr > kept / 2) {
      if (st.single) {  // FP64 from here; the better iterate goes on
        st.single = 0;
        if (berr < kept) {
          st.current = written;
          st.current_step = s;
        } else {
          redo = 1;
        }
        if (s >= max_steps) {
          stop = kRefineMaxSteps;
          redo = 0;
        }
      } else {
        stop = kRefineStagnated;
        if (berr < kept) {
          st.current = written;
          st.current_step = s;
        }
      }
    } else {
      st.current = written;
      st.current_step = s;
      if (berr <= tolerance)
        stop = kRefineConverged;
      else if (s >= max_steps)
        stop = kRefineMaxSteps;
    }
  }
  st.stop = stop;
  st.redo = redo;
  const unsigned go = stop == kRefineGoing ? 1u : 0u;
  if (handles.mask & RefineHandles::kLoop) cudaGraphSetConditional(handles.loop, go);
  if (handles.mask & RefineHandles::kNext) cudaGraphSetConditional(handles.next, go);
  if (handles.mask & RefineHandles::kPrecision) cudaGraphSetConditional(handles.precision, st.single ? 1u : 0u);
  if (handles.mask & RefineHandles::kRedo) cudaGraphSetConditional(handles.redo, redo ? 1u : 0u);
}

}  // namespace

int residual_group(long long longest_row, long long n, int multiprocessors) {
  const long long covering = static_cast<long long>(multiprocessors) * kResidualThreads;
  int group = 1;
  while (group < 32 && (longest_row > 8LL * group || n * group < covering)) group *= 2;
  return group;
}

void launch_residual(const CsrView& A, const ResidualInput& in, double* R, int nrhs, int group,
                     unsigned long long* result, cudaStream_t stream) {
  if (A.n <= 0 || nrhs <= 0) return;
  if ((in.D == nullptr) != (in.X_new == nullptr))
    throw InvalidInput("launch_residual: a correction D needs X_new, and X_new a correction D");
  switch (group) {
    case 1: launch_group<1>(A, in, R, nrhs, result, stream); break;
    case 2: launch_group<2>(A, in, R, nrhs, result, stream); break;
    case 4: launch_group<4>(A, in, R, nrhs, result, stream); break;
    case 8: launch_group<8>(A, in, R, nrhs, result, stream); break;
    case 16: launch_group<16>(A, in, R, nrhs, result, stream); break;
    case 32: launch_group<32>(A, in, R, nrhs, result, stream); break;
    default: throw InvalidInput("launch_residual: group must be 1, 2, 4, 8, 16 or 32, not " + std::to_string(group));
  }
  SPADE_CUDA_CHECK_LAUNCH();
}

void launch_refine_step(RefineState* state, RefineTurn turn, int written, int max_steps, double tolerance,
                        bool single, const int* solve_status, const RefineHandles& handles, cudaStream_t stream) {
  refine_step_kernel<<<1, 1, 0, stream>>>(state, turn, written, max_steps, tolerance, single, solve_status, handles);
  SPADE_CUDA_CHECK_LAUNCH();
}

}  // namespace spade::kernels
