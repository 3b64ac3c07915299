// spade's own threading of dense BLAS work (core/parallel_blas.hpp): each split operation against the same
// operation as one single-threaded BLAS call, on fresh random inputs at sizes that make teams, with odd sizes,
// every triangle and transpose, one right-hand side and empty operands; and the promise behind it, that a
// factorization or solve on several threads changes no process-wide setting: OpenBLAS's global thread count is
// never written (its setter is interposed here and counted) and the calling thread's OpenMP count comes back
// as it was.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../core/parallel_blas.hpp"
#include "spade/cholesky.hpp"
#include "spade/generators.hpp"
#include "spade/lu.hpp"
#include "spade/solve.hpp"
#include "spade/symbolic.hpp"

extern "C" {
int openblas_get_num_threads(void);
int openblas_get_parallel(void);
void openblas_set_num_threads(int threads);

// Every write of OpenBLAS's global thread count goes through goto_set_num_threads (openblas_set_num_threads,
// and the OpenMP build's calls at a count other than its global one). This definition, exported from the test
// program, takes the place of OpenBLAS's for its calls through the PLT, counts them, and forwards.
std::atomic<int> goto_set_num_threads_calls{0};
void goto_set_num_threads(int threads) {
  static auto real = reinterpret_cast<void (*)(int)>(dlsym(RTLD_NEXT, "goto_set_num_threads"));
  ++goto_set_num_threads_calls;
  if (real) real(threads);
}
}

namespace spade {
namespace {

constexpr double kEps = std::numeric_limits<double>::epsilon();
// More threads than CI's two cores: teams oversubscribe, but the split and its results do not depend on it.
constexpr int kThreads = 4;

std::vector<double> random_matrix(int rows, int cols, std::mt19937& gen) {
  std::uniform_real_distribution<double> value(-1.0, 1.0);
  std::vector<double> a(static_cast<std::size_t>(std::max(rows, 1)) * std::max(cols, 0));
  for (double& x : a) x = value(gen);
  return a;
}

// A well-conditioned triangle: random entries with a dominant diagonal (both triangles filled; BLAS reads one).
std::vector<double> random_triangle(int n, std::mt19937& gen) {
  std::vector<double> a = random_matrix(n, n, gen);
  for (int i = 0; i < n; ++i) a[i + static_cast<std::size_t>(i) * n] = n + 1.0;
  for (double& x : a) x /= std::sqrt(static_cast<double>(n));
  return a;
}

double max_abs(const std::vector<double>& x) {
  double m = 0;
  for (double v : x) m = std::max(m, std::abs(v));
  return m;
}

double max_difference(const std::vector<double>& x, const std::vector<double>& y) {
  double m = 0;
  for (std::size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}

TEST(ParallelBlas, ThreadsForClampsTheShare) {
  EXPECT_EQ(threads_for(0, kMultiplyAddsPerThread, 8), 1);
  EXPECT_EQ(threads_for(3.9 * kMultiplyAddsPerThread, kMultiplyAddsPerThread, 8), 3);
  EXPECT_EQ(threads_for(1e12, kMultiplyAddsPerThread, 8), 8);
  EXPECT_EQ(threads_for(1e12, kMultiplyAddsPerThread, 0), 1);
}

TEST(ParallelBlas, GemmMatchesOneCall) {
  std::mt19937 gen(11);
  struct Shape {
    int m, n, k;
  };
  // Teams by rows and by columns, sizes that do not divide, one column (a gemv), and empty products.
  for (const Shape sh : {Shape{517, 301, 97}, Shape{97, 613, 211}, Shape{700, 1, 300}, Shape{0, 40, 30},
                         Shape{40, 0, 30}, Shape{300, 300, 0}}) {
    for (char ta : {'N', 'T'})
      for (char tb : {'N', 'T'}) {
        SCOPED_TRACE(std::to_string(sh.m) + " x " + std::to_string(sh.n) + " x " + std::to_string(sh.k) + " " + ta + tb);
        const int lda = (ta == 'N' ? sh.m : sh.k) + 3, ldb = (tb == 'N' ? sh.k : sh.n) + 2, ldc = sh.m + 1;
        const std::vector<double> a = random_matrix(lda, ta == 'N' ? sh.k : sh.m, gen);
        const std::vector<double> b = random_matrix(ldb, tb == 'N' ? sh.n : sh.k, gen);
        const std::vector<double> c0 = random_matrix(ldc, sh.n, gen);
        std::vector<double> expected = c0, got = c0;
        const double alpha = -0.75, beta = 0.5;
        {
          SerialBlasScope serial;
          dgemm_(&ta, &tb, &sh.m, &sh.n, &sh.k, &alpha, a.data(), &lda, b.data(), &ldb, &beta, expected.data(), &ldc);
          parallel_gemm(ta, tb, sh.m, sh.n, sh.k, alpha, a.data(), lda, b.data(), ldb, beta, got.data(), ldc, kThreads);
        }
        EXPECT_LE(max_difference(got, expected), 4 * (sh.k + 1) * kEps * (max_abs(expected) + 1));
      }
  }
}

TEST(ParallelBlas, TrsmMatchesOneCall) {
  std::mt19937 gen(12);
  for (char side : {'L', 'R'})
    for (char uplo : {'L', 'U'})
      for (char trans : {'N', 'T'})
        for (char diag : {'N', 'U'})
          for (const int rhs : {1, 37, 260}) {
            const int order = 333, m = side == 'L' ? order : rhs, n = side == 'L' ? rhs : order;
            SCOPED_TRACE((std::string{side, uplo, trans, diag}) + " rhs " + std::to_string(rhs));
            const std::vector<double> a = random_triangle(order, gen);
            const int ldb = m + 5;
            const std::vector<double> b0 = random_matrix(ldb, n, gen);
            std::vector<double> expected = b0, got = b0;
            const double alpha = rhs == 1 ? 1.0 : 2.0;  // one right-hand side at alpha 1 is a trsv
            {
              SerialBlasScope serial;
              dtrsm_(&side, &uplo, &trans, &diag, &m, &n, &alpha, a.data(), &order, expected.data(), &ldb);
              parallel_trsm(side, uplo, trans, diag, m, n, alpha, a.data(), order, got.data(), ldb, kThreads);
            }
            EXPECT_LE(max_difference(got, expected), 1e3 * kEps * (max_abs(expected) + 1));
          }
}

TEST(ParallelBlas, GemvMatchesOneCall) {
  std::mt19937 gen(13);
  for (char trans : {'N', 'T'})
    // Split (from 65,536 entries), not split, and empty.
    for (const auto& [m, n] : {std::pair{1001, 357}, std::pair{357, 1001}, std::pair{5, 3}, std::pair{0, 9}}) {
      SCOPED_TRACE(std::string{trans} + " " + std::to_string(m) + " x " + std::to_string(n));
      const int lda = m + 7;
      const std::vector<double> a = random_matrix(lda, n, gen);
      const std::vector<double> x = random_matrix(trans == 'N' ? n : m, 1, gen);
      const std::vector<double> y0 = random_matrix(trans == 'N' ? m : n, 1, gen);
      std::vector<double> expected = y0, got = y0;
      const double alpha = 1.5, beta = -1.0;
      const int inc = 1;
      {
        SerialBlasScope serial;
        dgemv_(&trans, &m, &n, &alpha, a.data(), &lda, x.data(), &inc, &beta, expected.data(), &inc);
        parallel_gemv(trans, m, n, alpha, a.data(), lda, x.data(), beta, got.data(), kThreads);
      }
      EXPECT_LE(max_difference(got, expected), 4 * (std::max(m, n) + 1) * kEps * (max_abs(expected) + 1));
    }
}

// A random SPD m x m matrix: symmetric entries in (-1, 1) / m off the diagonal, 1 on it (diagonally dominant).
// The panel's rows past k are only read as the block below.
std::vector<double> random_spd_panel(int m, std::mt19937& gen) {
  std::uniform_real_distribution<double> value(-1.0, 1.0);
  std::vector<double> a(static_cast<std::size_t>(m) * m, 1.0);
  for (int j = 0; j < m; ++j)
    for (int i = j + 1; i < m; ++i)
      a[i + static_cast<std::size_t>(j) * m] = a[j + static_cast<std::size_t>(i) * m] = value(gen) / m;
  return a;
}

TEST(ParallelBlas, CholeskyPanelMatchesPotrfAndTrsm) {
  std::mt19937 gen(15);
  struct Shape {
    int m, k;
  };
  // Blocks of 256 columns: several with a partial last one, a panel without rows below, a panel whose last
  // column block is narrower than the row tiles that cross into the rows below, and one block only.
  for (const Shape sh : {Shape{1100, 600}, Shape{600, 600}, Shape{900, 520}, Shape{400, 256}}) {
    SCOPED_TRACE(std::to_string(sh.m) + " x " + std::to_string(sh.k));
    const std::vector<double> a = random_spd_panel(sh.m, gen);  // the first k columns are the panel
    const int lda = sh.m;
    std::vector<double> expected(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(lda) * sh.k), got = expected;
    int info = 0;
    {
      SerialBlasScope serial;
      dpotrf_("L", &sh.k, expected.data(), &lda, &info);
      ASSERT_EQ(info, 0);
      const int below = sh.m - sh.k;
      const double one = 1.0;
      if (below > 0) dtrsm_("R", "L", "T", "N", &below, &sh.k, &one, expected.data(), &lda, expected.data() + sh.k, &lda);
      info = parallel_cholesky_panel(sh.m, sh.k, got.data(), lda, kThreads);
    }
    EXPECT_EQ(info, 0);
    double diff = 0;
    for (int j = 0; j < sh.k; ++j)  // the lower part: the strict upper triangle is not referenced
      for (int i = j; i < sh.m; ++i)
        diff = std::max(diff, std::abs(got[i + static_cast<std::size_t>(j) * lda] - expected[i + static_cast<std::size_t>(j) * lda]));
    EXPECT_LE(diff, 1e3 * kEps * max_abs(expected));
  }
}

TEST(ParallelBlas, CholeskyPanelNamesTheFirstBadPivot) {
  std::mt19937 gen(16);
  const int m = 700, k = 600;
  for (const int bad : {0, 255, 256, 300, 599}) {
    std::vector<double> a = random_spd_panel(m, gen);
    a[bad + static_cast<std::size_t>(bad) * m] = -1e3;  // this pivot is negative whatever came before
    int info = 0;
    {
      SerialBlasScope serial;
      info = parallel_cholesky_panel(m, k, a.data(), m, kThreads);
    }
    EXPECT_EQ(info, bad + 1);
  }
}

// ---- no process-wide setting changes -------------------------------------------------------------------

TEST(ProcessSettings, OpenBlasIsItsOpenMPBuild) {
  // 0 sequential, 1 pthreads, 2 OpenMP: the build whose calls at one thread leave its global state alone.
  EXPECT_EQ(openblas_get_parallel(), 2);
}

TEST(ProcessSettings, TheSetterIsSeenHere) {
  // The interposed setter counts OpenBLAS's own calls: the check below would pass vacuously otherwise.
  const int before = goto_set_num_threads_calls, count = openblas_get_num_threads(), icv = omp_get_max_threads();
  openblas_set_num_threads(count == 1 ? 2 : 1);
  openblas_set_num_threads(count);
  EXPECT_GE(goto_set_num_threads_calls - before, 2);
  EXPECT_EQ(openblas_get_num_threads(), count);
  omp_set_num_threads(icv);  // OpenBLAS 0.3.21's setter also sets the caller's OpenMP count
}

TEST(ProcessSettings, FactorizationsAndSolvesOnSeveralThreadsChangeNone) {
  // Supernodes large enough for teams (a 3D grid's top separators; a dense block), on 3 threads, while this
  // thread's own OpenMP count is 5 and another thread calls BLAS at its own count.
  const SparseMatrix A = laplacian_3d(22, 22, 22);
  const SparseMatrix U = convection_diffusion_3d(18, 18, 18, 1.0, 0.5, 0.25);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(5);
  const int global = openblas_get_num_threads(), calls = goto_set_num_threads_calls;

  std::atomic<bool> stop{false};
  std::thread neighbour([&] {  // BLAS at one thread from a thread of the user's
    omp_set_num_threads(1);
    std::vector<double> x(512 * 512, 1.0), y(512 * 512);
    const int n = 512;
    const double one = 1.0, zero = 0.0;
    while (!stop) dgemm_("N", "N", &n, &n, &n, &one, x.data(), &n, x.data(), &n, &zero, y.data(), &n);
  });

  FactorOptions fo;
  fo.threads = 3;
  const NumericFactor F(analyze(A), A, fo);
  std::vector<double> B(static_cast<std::size_t>(A.rows()) * 5, 1.0);
  solve_in_place(F, B.data(), 1, A.rows());
  solve_in_place(F, B.data(), 5, A.rows());
  LuFactorOptions lo;
  lo.threads = 3;
  const LuFactor L(analyze_lu(U), U, lo);
  std::vector<double> C(static_cast<std::size_t>(U.rows()) * 5, 1.0);
  lu_solve_in_place(L, C.data(), 5, U.rows());
  lu_solve_in_place(L, C.data(), 1, U.rows(), Transpose::yes);
  stop = true;
  neighbour.join();

  EXPECT_EQ(goto_set_num_threads_calls - calls, 0) << "OpenBLAS's global thread count was written";
  EXPECT_EQ(openblas_get_num_threads(), global);
  EXPECT_EQ(omp_get_max_threads(), 5) << "the calling thread's OpenMP count was not restored";
  EXPECT_EQ(F.threads(), std::min(3, omp_get_num_procs()));
  omp_set_num_threads(saved);
}

}  // namespace
}  // namespace spade
