// spade's own threading of dense BLAS/LAPACK work: core/parallel_blas.hpp.
#include "parallel_blas.hpp"

#include <cstdint>

#include "spade/sparse_matrix.hpp"

namespace spade {
namespace {

// Columns per block of parallel_cholesky_panel, and rows per tile of its trailing update and trsm: tiles of
// 256 x 256 run near a core's peak in single-threaded dgemm, and a root separator of thousands of columns still
// leaves tens of them to share out at each step.
constexpr int kPanelBlock = 256;
// Strips per thread in parallel_gemm and parallel_trsm, so that dynamic scheduling can even out the strips.
constexpr int kStripsPerThread = 4;

// [begin, end) of strip i of `count` strips of [0, n).
int strip_begin(int n, int count, int i) { return static_cast<int>(static_cast<std::int64_t>(n) * i / count); }

int strips_for(int n, int threads, int smallest) {
  return std::max(1, std::min(threads * kStripsPerThread, n / std::max(smallest, 1)));
}

}  // namespace

void parallel_gemm(char transa, char transb, int m, int n, int k, double alpha, const double* a, int lda,
                   const double* b, int ldb, double beta, double* c, int ldc, int threads) {
  if (n == 1 && transb == 'N') {  // C is a column and B a contiguous vector: a gemv
    if (transa == 'N')
      parallel_gemv('N', m, k, alpha, a, lda, b, beta, c, threads);
    else
      parallel_gemv('T', k, m, alpha, a, lda, b, beta, c, threads);
    return;
  }
  const int t = threads_for(static_cast<double>(m) * n * k, kMultiplyAddsPerThread, threads);
  if (t == 1) {
    dgemm_(&transa, &transb, &m, &n, &k, &alpha, a, &lda, b, &ldb, &beta, c, &ldc);
    return;
  }
  const bool by_rows = m >= n;
  const int len = by_rows ? m : n, strips = strips_for(len, t, 16);
  parallel_region(t, [&](int, int) {
#pragma omp for schedule(dynamic, 1)
    for (int i = 0; i < strips; ++i) {
      const int s0 = strip_begin(len, strips, i), size = strip_begin(len, strips, i + 1) - s0;
      if (by_rows) {
        const double* as = transa == 'N' ? a + s0 : a + static_cast<offset_t>(s0) * lda;
        dgemm_(&transa, &transb, &size, &n, &k, &alpha, as, &lda, b, &ldb, &beta, c + s0, &ldc);
      } else {
        const double* bs = transb == 'N' ? b + static_cast<offset_t>(s0) * ldb : b + s0;
        dgemm_(&transa, &transb, &m, &size, &k, &alpha, a, &lda, bs, &ldb, &beta, c + static_cast<offset_t>(s0) * ldc,
               &ldc);
      }
    }
  });
}

void parallel_trsm(char side, char uplo, char transa, char diag, int m, int n, double alpha, const double* a,
                   int lda, double* b, int ldb, int threads) {
  if (side == 'L' && n == 1 && alpha == 1.0) {  // one right-hand side: a trsv
    const int inc = 1;
    dtrsv_(&uplo, &transa, &diag, &m, a, &lda, b, &inc);
    return;
  }
  const bool left = side == 'L';
  const int order = left ? m : n, len = left ? n : m;  // the triangle's order; the independent dimension
  const int t = threads_for(0.5 * order * order * len, kMultiplyAddsPerThread, threads);
  if (t == 1 || len < 2) {
    dtrsm_(&side, &uplo, &transa, &diag, &m, &n, &alpha, a, &lda, b, &ldb);
    return;
  }
  const int strips = strips_for(len, t, 1);
  parallel_region(t, [&](int, int) {
#pragma omp for schedule(dynamic, 1)
    for (int i = 0; i < strips; ++i) {
      const int s0 = strip_begin(len, strips, i), size = strip_begin(len, strips, i + 1) - s0;
      if (left)
        dtrsm_(&side, &uplo, &transa, &diag, &m, &size, &alpha, a, &lda, b + static_cast<offset_t>(s0) * ldb, &ldb);
      else
        dtrsm_(&side, &uplo, &transa, &diag, &size, &n, &alpha, a, &lda, b + s0, &ldb);
    }
  });
}

void parallel_gemv(char trans, int m, int n, double alpha, const double* a, int lda, const double* x, double beta,
                   double* y, int threads) {
  const int inc = 1;
  const int t = static_cast<double>(m) * n >= kEntriesForTeam ? threads : 1;
  if (t <= 1) {
    dgemv_(&trans, &m, &n, &alpha, a, &lda, x, &inc, &beta, y, &inc);
    return;
  }
  const int len = trans == 'N' ? m : n;  // y's length, split into one strip per thread
  parallel_region(t, [&](int me, int team) {
    const int s0 = strip_begin(len, team, me), size = strip_begin(len, team, me + 1) - s0;
    if (size == 0) return;
    if (trans == 'N')
      dgemv_(&trans, &size, &n, &alpha, a + s0, &lda, x, &inc, &beta, y + s0, &inc);
    else
      dgemv_(&trans, &m, &size, &alpha, a + static_cast<offset_t>(s0) * lda, &lda, x, &inc, &beta, y + s0, &inc);
  });
}

int parallel_cholesky_panel(int m, int k, double* a, int lda, int threads) {
  const double one = 1.0, minus_one = -1.0;
  const int below = m - k;
  const double multiply_adds = static_cast<double>(k) * k * k / 3 + 0.5 * k * k * static_cast<double>(below);
  const int t = threads_for(multiply_adds, kMultiplyAddsPerThread, threads);
  int info = 0;
  if (t == 1 || k <= kPanelBlock) {
    dpotrf_("L", &k, a, &lda, &info);
    if (info == 0 && below > 0) dtrsm_("R", "L", "T", "N", &below, &k, &one, a, &lda, a + k, &lda);
    return info;
  }
  parallel_region(t, [&](int, int) {
    for (int j0 = 0; j0 < k; j0 += kPanelBlock) {
      const int jb = std::min(kPanelBlock, k - j0);
      double* ajj = a + j0 + static_cast<offset_t>(j0) * lda;
#pragma omp single
      {
        int block_info = 0;
        dpotrf_("L", &jb, ajj, &lda, &block_info);
        if (block_info > 0) info = j0 + block_info;
      }
      if (info > 0) break;  // read after the single's barrier: every thread leaves at the same block
      // Rows below the block: L(r, block) = A(r, block) L(block, block)^{-T}, in tiles of rows.
      const int first = j0 + jb, row_tiles = (m - first + kPanelBlock - 1) / kPanelBlock;
#pragma omp for schedule(dynamic, 1)
      for (int i = 0; i < row_tiles; ++i) {
        const int r0 = first + i * kPanelBlock, rows = std::min(kPanelBlock, m - r0);
        dtrsm_("R", "L", "T", "N", &rows, &jb, &one, ajj, &lda, a + r0 + static_cast<offset_t>(j0) * lda, &lda);
      }
      // The trailing columns: A(r, c) -= L(r, block) L(c, block)^T for the tiles on and below the diagonal.
      const int col_tiles = (k - first + kPanelBlock - 1) / kPanelBlock;
#pragma omp for collapse(2) schedule(dynamic, 1)
      for (int ci = 0; ci < col_tiles; ++ci)
        for (int ri = 0; ri < row_tiles; ++ri) {
          if (ri < ci) continue;
          const int c0 = first + ci * kPanelBlock, cols = std::min(kPanelBlock, k - c0);
          const int r0 = first + ri * kPanelBlock, rows = std::min(kPanelBlock, m - r0);
          const double* lr = a + r0 + static_cast<offset_t>(j0) * lda;
          const double* lc = a + c0 + static_cast<offset_t>(j0) * lda;
          double* target = a + r0 + static_cast<offset_t>(c0) * lda;
          if (ri == ci) {  // the diagonal tile's triangle, then its rows below the tile's columns (past column k)
            dsyrk_("L", "N", &cols, &jb, &minus_one, lc, &lda, &one, target, &lda);
            const int rest = rows - cols;
            if (rest > 0)
              dgemm_("N", "T", &rest, &cols, &jb, &minus_one, lr + cols, &lda, lc, &lda, &one, target + cols, &lda);
          } else {
            dgemm_("N", "T", &rows, &cols, &jb, &minus_one, lr, &lda, lc, &lda, &one, target, &lda);
          }
        }
    }
  });
  return info;
}

}  // namespace spade
