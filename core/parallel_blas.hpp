// spade's own threading of dense BLAS/LAPACK work. Internal header.
//
// spade links the OpenMP build of OpenBLAS and never changes a process-wide thread setting: every BLAS call it
// makes runs at one thread (the calling thread's OpenMP thread count, a per-thread setting, held at 1 by
// SerialBlasScope), and where one operation should use several threads, the functions below split it into
// independent pieces and run them on an OpenMP team of spade's own, each piece one single-threaded BLAS call.
// OpenBLAS's OpenMP build returns before touching any state of its own when the caller's count is 1 or the caller
// is inside an active parallel region (common_thread.h, num_cpu_avail); at any other count it rewrites its global
// thread count and worker buffers, which is unsafe beside another thread's BLAS calls
// (docs/benchmarks/blas_threads.md). Matrices are column-major with Fortran BLAS semantics (32-bit dimensions).
#pragma once

#include <omp.h>

#include <algorithm>

#include "blas.hpp"

namespace spade {

/// While it lives, the calling thread's OpenMP thread count (nthreads-var, per thread) is 1, so that its BLAS
/// calls, and those of the parallel regions it opens (whose threads inherit the count), run at one thread and
/// leave OpenBLAS's global state alone. Restores the count it found. Every library function that calls BLAS or
/// LAPACK holds one.
class SerialBlasScope {
 public:
  SerialBlasScope() : saved_(omp_get_max_threads()) { omp_set_num_threads(1); }
  ~SerialBlasScope() { omp_set_num_threads(saved_); }
  SerialBlasScope(const SerialBlasScope&) = delete;
  SerialBlasScope& operator=(const SerialBlasScope&) = delete;

 private:
  int saved_;
};

// Multiply-adds of a level-3 operation per thread of its team: below this share another thread costs more (opening
// the team, its share of the packing) than it saves. Also the factorization's grain per thread for a supernode's
// k m^2 and for the whole factor's work (supernodal_tree.hpp).
constexpr double kMultiplyAddsPerThread = 4e6;
// Matrix entries (512 KB) from which a level-2 product (gemv) is split, over every thread offered: a memory-bound
// product streams faster on more cores, and one team size for all of them keeps the OpenMP runtime from resizing
// its team between calls; teams sized to the product, and a lower threshold, were slower on the host solve
// (docs/benchmarks/blas_threads.md).
constexpr double kEntriesForTeam = 65536;

/// Threads for `work` units at `grain` units per thread: work / grain, clamped to [1, most].
inline int threads_for(double work, double grain, int most) {
  return static_cast<int>(std::clamp(work / grain, 1.0, static_cast<double>(std::max(most, 1))));
}

/// Runs body(thread, threads) on a team of `threads` OpenMP threads, each with its BLAS calls at one thread; body's
/// worksharing constructs (omp for, single, barrier) bind to that team. For one thread, body runs on the caller,
/// inside a team of its own where the caller is in a parallel region (such as a thread of the factorization's
/// subtree phase), whose worksharing it must not join. body must not throw.
template <class Body>
void parallel_region(int threads, Body&& body) {
  if (threads <= 1 && omp_get_level() == 0) {
    body(0, 1);
    return;
  }
#pragma omp parallel num_threads(std::max(threads, 1))
  {
    omp_set_num_threads(1);  // also where the team is inactive (nested in a user's region): BLAS at one thread
    body(omp_get_thread_num(), omp_get_num_threads());
  }
}

/// C = alpha op(A) op(B) + beta C (dgemm's arguments), on at most `threads` threads: strips of C's longer side.
void parallel_gemm(char transa, char transb, int m, int n, int k, double alpha, const double* a, int lda,
                   const double* b, int ldb, double beta, double* c, int ldc, int threads);

/// B = alpha op(A)^{-1} B (side 'L') or alpha B op(A)^{-1} (side 'R') (dtrsm's arguments), on at most `threads`
/// threads: strips of B's columns (side 'L') or rows (side 'R'), which are independent. One column (side 'L') is a
/// dtrsv on the caller: a triangular solve's blocks depend on each other, and a team's barriers between them cost
/// more than they save (docs/benchmarks/blas_threads.md).
void parallel_trsm(char side, char uplo, char transa, char diag, int m, int n, double alpha, const double* a,
                   int lda, double* b, int ldb, int threads);

/// y = alpha op(A) x + beta y (dgemv's arguments, unit strides): one strip of y per thread, on all `threads` threads
/// from kEntriesForTeam entries of A, else on the caller.
void parallel_gemv(char trans, int m, int n, double alpha, const double* a, int lda, const double* x, double beta,
                   double* y, int threads);

/// The Cholesky factorization of an m x k panel (m >= k) in place, as dpotrf on its top k x k block (lower
/// triangle) followed by dtrsm of the m - k rows below with the factor's transpose, on at most `threads` threads:
/// right-looking by blocks of columns (a block's diagonal by dpotrf on one thread, the rows below it
/// by dtrsm and the trailing columns by dsyrk/dgemm on tiles shared out over the team). Returns 0, or as
/// dpotrf's info the 1-based column whose pivot is not positive (columns before it are factored). Blocks of 256.
int parallel_cholesky_panel(int m, int k, double* a, int lda, int threads);

}  // namespace spade
