// GPU tests of the dense triangular solves (issue 3) against host BLAS (OpenBLAS dtrsm_), on fresh random
// well-conditioned triangles. Every test needs a GPU and skips visibly without one.
//
// The triangles are diagonally dominant by rows and by columns: off-diagonal entries uniform in
// [-1, 1] / n, diagonal uniform in [1.5, 2] (or unit), so ||L||_inf and ||L^{-1}||_inf stay O(1) at any n
// (a triangle with O(1) random off-diagonals is exponentially ill-conditioned). The tolerance is
// 4 n eps kappa, with kappa a bound on the condition number computed from the dominance margin.
// Everything the kernels must not read (the strict upper triangle, rows n..lda-1, the diagonal when it is
// unit) holds NaN, and so do rows n..ldx-1 of the right-hand sides, which must come back untouched; the
// inverse buffer is poisoned with NaN before every inversion.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "spade/dense_trsv.hpp"
#include "spade/error.hpp"
#include "tests/gpu_test.hpp"

extern "C" void dtrsm_(const char* side, const char* uplo, const char* transa, const char* diag, const int* m,
                       const int* n, const double* alpha, const double* a, const int* lda, double* b,
                       const int* ldb);

namespace {

using spade::DenseTrsvOptions;
using spade::DenseTrsvWorkspace;
using spade::Diagonal;
using spade::Transpose;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t count) : count_(std::max<std::size_t>(count, 1)) {
    SPADE_CUDA_CHECK(cudaMalloc(&data_, count_ * sizeof(T)));
  }
  ~DeviceBuffer() { cudaFree(data_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  T* get() const { return data_; }
  void upload(const std::vector<T>& host) {
    SPADE_CUDA_CHECK(cudaMemcpy(data_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> download(std::size_t count) const {
    std::vector<T> host(count);
    SPADE_CUDA_CHECK(cudaMemcpy(host.data(), data_, count * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }

 private:
  std::size_t count_;
  T* data_ = nullptr;
};

/// A random diagonally dominant lower triangle (column-major, leading dimension lda, NaN outside the
/// lower triangle) and the bound on its condition number used by the tolerance.
struct Triangle {
  int n = 0, lda = 0;
  std::vector<double> a;
  double kappa = 1;  // >= max(kappa_inf(L), kappa_1(L)) for both diagonals
};

Triangle make_triangle(int n, int lda, std::uint64_t seed) {
  Triangle t;
  t.n = n;
  t.lda = lda;
  t.a.assign(std::size_t(lda) * n, kNaN);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> off(-1.0, 1.0), diag(1.5, 2.0);
  std::vector<double> row_sum(n, 0.0), col_sum(n, 0.0);
  for (int j = 0; j < n; ++j) {
    t.a[j + std::size_t(j) * lda] = diag(rng);
    for (int i = j + 1; i < n; ++i) {
      const double v = off(rng) / n;
      t.a[i + std::size_t(j) * lda] = v;
      row_sum[i] += std::abs(v);
      col_sum[j] += std::abs(v);
    }
  }
  // kappa <= ||L|| / min(|d| - off-diagonal sum), rows for the inf-norm and columns for the 1-norm; the
  // unit diagonal (d = 1) is the worse case of the two.
  double norm = 0, margin = 1;
  for (int i = 0; i < n; ++i) {
    norm = std::max({norm, 2.0 + row_sum[i], 2.0 + col_sum[i]});
    margin = std::min({margin, 1.0 - row_sum[i], 1.0 - col_sum[i]});
  }
  t.kappa = norm / margin;
  return t;
}

/// Right-hand sides: n x nrhs with leading dimension ldx, rows n..ldx-1 NaN.
std::vector<double> make_rhs(int n, int nrhs, int ldx, std::uint64_t seed) {
  std::vector<double> b(std::size_t(ldx) * nrhs, kNaN);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (int k = 0; k < nrhs; ++k)
    for (int i = 0; i < n; ++i) b[i + std::size_t(k) * ldx] = u(rng);
  return b;
}

/// Host reference: X := op(L)^{-1} X in double precision (OpenBLAS).
std::vector<double> reference(const Triangle& t, Transpose trans, Diagonal diag, int nrhs, int ldx,
                              std::vector<double> x) {
  const char side = 'L', uplo = 'L', tr = trans == Transpose::yes ? 'T' : 'N', dg = diag == Diagonal::unit ? 'U' : 'N';
  const double one = 1.0;
  dtrsm_(&side, &uplo, &tr, &dg, &t.n, &nrhs, &one, t.a.data(), &t.lda, x.data(), &ldx);
  return x;
}

template <typename T>
std::vector<T> cast(const std::vector<double>& v) {
  return std::vector<T>(v.begin(), v.end());
}

template <typename T>
constexpr double epsilon() {
  return std::numeric_limits<T>::epsilon();
}

/// The matrix on the device in precision T, with the diagonal switched between its values and NaN.
template <typename T>
class DeviceTriangle {
 public:
  explicit DeviceTriangle(const Triangle& t) : t_(t), buffer_(t.a.size()) {
    buffer_.upload(cast<T>(t.a));
  }
  const T* get() const { return buffer_.get(); }
  /// Unit diagonal: overwrite the stored diagonal with NaN (it must never be read); else restore it.
  void set_diagonal(Diagonal diag) {
    std::vector<T> d(t_.n);
    for (int i = 0; i < t_.n; ++i) d[i] = diag == Diagonal::unit ? T(kNaN) : T(t_.a[i + std::size_t(i) * t_.lda]);
    SPADE_CUDA_CHECK(cudaMemcpy2D(buffer_.get(), (t_.lda + 1) * sizeof(T), d.data(), sizeof(T), sizeof(T), t_.n,
                                  cudaMemcpyHostToDevice));
  }

 private:
  const Triangle& t_;
  DeviceBuffer<T> buffer_;
};

struct Variant {
  Transpose trans;
  Diagonal diag;
  bool inverted;
  int rows_per_block;
  int chunk_columns;
  int panels_per_launch = 0;
};

std::string describe(int n, int nrhs, const Variant& v) {
  return "n=" + std::to_string(n) + " nrhs=" + std::to_string(nrhs) +
         (v.trans == Transpose::yes ? " L^T" : " L") + (v.diag == Diagonal::unit ? " unit" : " non-unit") +
         (v.inverted ? " inverted" : " substitution") + " rows_per_block=" + std::to_string(v.rows_per_block) +
         " chunk_columns=" + std::to_string(v.chunk_columns) + " panels_per_launch=" + std::to_string(v.panels_per_launch);
}

/// Runs one solve on the device and compares with the host reference `ref` (for the same b).
/// Returns false (after recording a failure) when the error or the untouched padding is wrong.
template <typename T>
bool check_solve(const Triangle& t, DeviceTriangle<T>& dL, const Variant& v, int nrhs, int ldx,
                 const std::vector<double>& b, const std::vector<double>& ref, DenseTrsvWorkspace& ws) {
  const int n = t.n;
  const std::string what = describe(n, nrhs, v);
  DeviceBuffer<T> dX(b.size());
  dX.upload(cast<T>(b));
  DeviceBuffer<T> dInv(spade::dense_trsv_inverse_size(n));
  if (v.inverted) {
    std::vector<T> poison(spade::dense_trsv_inverse_size(n), T(kNaN));
    dInv.upload(poison);
    spade::dense_trsv_invert_diagonal<T>(v.diag, n, dL.get(), t.lda, dInv.get(), ws, nullptr);
  }
  DenseTrsvOptions options;
  options.rows_per_block = v.rows_per_block;
  options.chunk_columns = v.chunk_columns;
  options.panels_per_launch = v.panels_per_launch;
  spade::dense_trsm<T>(v.trans, v.diag, n, nrhs, dL.get(), t.lda, v.inverted ? dInv.get() : nullptr, dX.get(), ldx,
                       ws, nullptr, options);
  ws.check(nullptr);
  const std::vector<T> x = dX.download(b.size());
  double err = 0, norm = 0;
  for (int k = 0; k < nrhs; ++k) {
    for (int i = 0; i < ldx; ++i) {
      const std::size_t e = i + std::size_t(k) * ldx;
      if (i >= n) {
        if (!std::isnan(double(x[e]))) {
          ADD_FAILURE() << what << ": padding row " << i << " of column " << k << " was written";
          return false;
        }
        continue;
      }
      if (!std::isfinite(double(x[e]))) {
        ADD_FAILURE() << what << ": x[" << i << ", " << k << "] = " << double(x[e]);
        return false;
      }
      err = std::max(err, std::abs(double(x[e]) - ref[e]));
      norm = std::max(norm, std::abs(ref[e]));
    }
  }
  const double rel = err / norm, tol = 4.0 * n * epsilon<T>() * t.kappa;
  if (!(rel <= tol)) {
    ADD_FAILURE() << what << ": ||x - x_ref|| / ||x_ref|| = " << rel << " > " << tol;
    return false;
  }
  return true;
}

/// Every variant of `variants` for one n, nrhs in `rhs_counts`; lda and ldx larger than n when `pad`.
template <typename T>
bool sweep_one(int n, int lda, const std::vector<int>& rhs_counts, const std::vector<Variant>& variants,
               DenseTrsvWorkspace& ws, std::uint64_t seed) {
  const Triangle t = make_triangle(n, lda, seed);
  DeviceTriangle<T> dL(t);
  for (int nrhs : rhs_counts) {
    const int ldx = n + (n % 3);
    const std::vector<double> b = make_rhs(n, nrhs, ldx, seed + 7 * nrhs);
    // The device sees b rounded to T; the reference solves the same rounded system in double.
    std::vector<double> bt(b.size());
    for (std::size_t e = 0; e < b.size(); ++e) bt[e] = double(T(b[e]));
    Triangle tt = t;
    for (double& value : tt.a) value = double(T(value));
    for (Transpose trans : {Transpose::no, Transpose::yes}) {
      for (Diagonal diag : {Diagonal::non_unit, Diagonal::unit}) {
        dL.set_diagonal(diag);
        const std::vector<double> ref = reference(tt, trans, diag, nrhs, ldx, bt);
        for (const Variant& v : variants) {
          if (v.trans != trans || v.diag != diag) continue;
          if (!check_solve<T>(t, dL, v, nrhs, ldx, bt, ref, ws)) return false;
        }
      }
    }
  }
  return true;
}

std::vector<Variant> all_variants(const std::vector<int>& rows_per_block,
                                  const std::vector<int>& chunks = {DenseTrsvOptions::kAutoChunk}) {
  std::vector<Variant> out;
  for (Transpose trans : {Transpose::no, Transpose::yes})
    for (Diagonal diag : {Diagonal::non_unit, Diagonal::unit})
      for (bool inverted : {false, true})
        for (int rows : rows_per_block)
          for (int chunk : chunks) out.push_back({trans, diag, inverted, rows, chunk});
  return out;
}

TEST(DenseTrsv, EverySizeUpTo300Double) {
  SPADE_REQUIRE_GPU();
  DenseTrsvWorkspace ws;
  const std::vector<Variant> variants = all_variants({0, 32, 64, 128});
  for (int n = 1; n <= 300; ++n)
    ASSERT_TRUE(sweep_one<double>(n, n + (n % 4), {1, 3, 16}, variants, ws, 1000 + n)) << "n = " << n;
}

TEST(DenseTrsv, EverySizeUpTo300Float) {
  SPADE_REQUIRE_GPU();
  DenseTrsvWorkspace ws;
  const std::vector<Variant> variants = all_variants({0});
  for (int n = 1; n <= 300; ++n)
    ASSERT_TRUE(sweep_one<float>(n, n + (n % 4), {1, 3, 16}, variants, ws, 5000 + n)) << "n = " << n;
}

// A few sizes (a partial tile, a partial block row, several block rows, block rows split into chunks)
// for compute-sanitizer memcheck and racecheck, which are too slow for the full sweep.
TEST(DenseTrsv, SanitizerSizes) {
  SPADE_REQUIRE_GPU();
  DenseTrsvWorkspace ws;
  const std::vector<Variant> variants = all_variants({0, 32}, {0, 128});
  for (int n : {1, 37, 100, 290, 700})
    ASSERT_TRUE(sweep_one<double>(n, n + 1, {1, 3}, variants, ws, 300 + n)) << "n = " << n;
}

TEST(DenseTrsv, LargeSizesDouble) {
  SPADE_REQUIRE_GPU();
  DenseTrsvWorkspace ws;
  const std::vector<Variant> variants = all_variants({0});
  for (int n : {513, 1000, 2065, 4099, 8197})
    ASSERT_TRUE(sweep_one<double>(n, n + 3, {1}, variants, ws, 9000 + n)) << "n = " << n;
  for (int n : {1000, 4099})
    ASSERT_TRUE(sweep_one<double>(n, n, {3, 16}, variants, ws, 9500 + n)) << "n = " << n;
  ASSERT_TRUE(sweep_one<double>(2065, 2066, {1, 16}, all_variants({32, 64}, {0, 128, 512}), ws, 9900));
}

// Right-hand sides in one launch or in several (panels of 8, 4 or 1 columns, the last one partial), with
// block rows of 32, 64 and 128 rows split into chunks of 128 and 512 columns.
TEST(DenseTrsv, PanelsPerLaunch) {
  SPADE_REQUIRE_GPU();
  DenseTrsvWorkspace ws;
  std::vector<Variant> variants;
  for (const Variant& base : all_variants({32, 64, 128}, {128, 512}))
    for (int panels : {0, 1, 2}) {
      Variant v = base;
      v.panels_per_launch = panels;
      variants.push_back(v);
    }
  for (int n : {300, 1100})
    ASSERT_TRUE(sweep_one<double>(n, n + 2, {1, 4, 20}, variants, ws, 13000 + n)) << "n = " << n;
}

TEST(DenseTrsv, LargeSizesFloat) {
  SPADE_REQUIRE_GPU();
  DenseTrsvWorkspace ws;
  for (int n : {777, 4099})
    ASSERT_TRUE(sweep_one<float>(n, n + 1, {1, 16}, all_variants({0}), ws, 12000 + n)) << "n = " << n;
}

TEST(DenseTrsv, Size20000Double) {
  SPADE_REQUIRE_GPU();
  DenseTrsvWorkspace ws;
  ASSERT_TRUE(sweep_one<double>(20000, 20001, {1}, all_variants({0}), ws, 20000));
}

// One workspace across launches that shrink and grow n, change the number of right-hand sides and switch
// precision: every launch must find the publication buffer it polls reset, whatever the launch before it
// (two launches back, on the same buffer) wrote there.
TEST(DenseTrsv, WorkspaceReuseAcrossSizesPanelsAndPrecisions) {
  SPADE_REQUIRE_GPU();
  DenseTrsvWorkspace ws;
  const std::vector<Variant> variants = all_variants({0});
  std::uint64_t seed = 15000;
  for (int n : {700, 65, 1000, 300, 1, 129, 1000, 2}) {
    ASSERT_TRUE(sweep_one<double>(n, n, {1, 9}, variants, ws, ++seed)) << "n = " << n;
    ASSERT_TRUE(sweep_one<float>(n, n + 1, {3}, variants, ws, ++seed)) << "n = " << n;
  }
}

TEST(DenseTrsv, ZeroDiagonalIsReportedWithItsRow) {
  SPADE_REQUIRE_GPU();
  DenseTrsvWorkspace ws;
  const int n = 100, row = 37;
  Triangle t = make_triangle(n, n, 42);
  t.a[row + std::size_t(row) * n] = 0.0;
  DeviceTriangle<double> dL(t);
  DeviceBuffer<double> dx(n), dinv(spade::dense_trsv_inverse_size(n));
  dx.upload(make_rhs(n, 1, n, 43));
  for (bool inverted : {false, true}) {
    if (inverted) spade::dense_trsv_invert_diagonal<double>(Diagonal::non_unit, n, dL.get(), n, dinv.get(), ws, nullptr);
    else spade::dense_trsv<double>(Transpose::no, Diagonal::non_unit, n, dL.get(), n, nullptr, dx.get(), ws, nullptr);
    try {
      ws.check(nullptr);
      ADD_FAILURE() << "zero diagonal not reported (inverted = " << inverted << ")";
    } catch (const spade::NumericalError& e) {
      EXPECT_EQ(e.kind(), spade::NumericalError::Kind::singular);
      EXPECT_EQ(e.index(), row);
    }
  }
  // The workspace is usable again after the error.
  EXPECT_TRUE(sweep_one<double>(n, n, {1}, all_variants({0}), ws, 44));
}

TEST(DenseTrsv, InvalidArgumentsThrowBeforeLaunching) {
  SPADE_REQUIRE_GPU();
  DenseTrsvWorkspace ws;
  DeviceBuffer<double> buf(64 * 64);
  double* p = buf.get();
  using spade::InvalidInput;
  EXPECT_THROW(spade::dense_trsm<double>(Transpose::no, Diagonal::unit, -1, 1, p, 1, nullptr, p, 1, ws, nullptr), InvalidInput);
  EXPECT_THROW(spade::dense_trsm<double>(Transpose::no, Diagonal::unit, 8, -1, p, 8, nullptr, p, 8, ws, nullptr), InvalidInput);
  EXPECT_THROW(spade::dense_trsm<double>(Transpose::no, Diagonal::unit, 8, 1, p, 7, nullptr, p, 8, ws, nullptr), InvalidInput);
  EXPECT_THROW(spade::dense_trsm<double>(Transpose::no, Diagonal::unit, 8, 1, p, 8, nullptr, p, 7, ws, nullptr), InvalidInput);
  EXPECT_THROW(spade::dense_trsm<double>(Transpose::no, Diagonal::unit, 8, 1, nullptr, 8, nullptr, p, 8, ws, nullptr), InvalidInput);
  EXPECT_THROW(spade::dense_trsm<double>(Transpose::no, Diagonal::unit, 8, 1, p, 8, nullptr, nullptr, 8, ws, nullptr), InvalidInput);
  DenseTrsvOptions bad;
  bad.rows_per_block = 48;
  EXPECT_THROW(spade::dense_trsm<double>(Transpose::no, Diagonal::unit, 8, 1, p, 8, nullptr, p, 8, ws, nullptr, bad), InvalidInput);
  bad.rows_per_block = 0;
  bad.chunk_columns = -2;
  EXPECT_THROW(spade::dense_trsm<double>(Transpose::no, Diagonal::unit, 8, 1, p, 8, nullptr, p, 8, ws, nullptr, bad), InvalidInput);
  bad.chunk_columns = 100;
  EXPECT_THROW(spade::dense_trsm<double>(Transpose::no, Diagonal::unit, 8, 1, p, 8, nullptr, p, 8, ws, nullptr, bad), InvalidInput);
  bad.chunk_columns = 0;
  bad.panels_per_launch = -1;
  EXPECT_THROW(spade::dense_trsm<double>(Transpose::no, Diagonal::unit, 8, 1, p, 8, nullptr, p, 8, ws, nullptr, bad), InvalidInput);
  bad.panels_per_launch = 65;
  EXPECT_THROW(spade::dense_trsm<double>(Transpose::no, Diagonal::unit, 8, 1, p, 8, nullptr, p, 8, ws, nullptr, bad), InvalidInput);
  EXPECT_THROW(spade::dense_trsv_invert_diagonal<double>(Diagonal::unit, 8, p, 4, p, ws, nullptr), InvalidInput);
  EXPECT_THROW(spade::dense_trsv_invert_diagonal<double>(Diagonal::unit, 8, p, 8, nullptr, ws, nullptr), InvalidInput);
  EXPECT_NO_THROW(spade::dense_trsm<double>(Transpose::no, Diagonal::unit, 0, 1, nullptr, 1, nullptr, nullptr, 1, ws, nullptr));
  EXPECT_NO_THROW(ws.check(nullptr));
}

// A corrupted ticket counter makes the block with ticket 1 wait for a block row nobody computes: the
// bounded spin-wait must report it (NumericalError no_progress) instead of hanging. A small spin limit
// keeps the wait to milliseconds; the workspace is usable again afterwards.
TEST(DenseTrsv, SpinWaitTimeoutIsReported) {
  SPADE_REQUIRE_GPU();
  DenseTrsvWorkspace ws;
  ws.set_spin_limit(1 << 14);
  EXPECT_THROW(ws.set_spin_limit(-1), spade::InvalidInput);
  const int n = 64;
  const Triangle t = make_triangle(n, n, 7);
  DeviceTriangle<double> dL(t);
  DeviceBuffer<double> dx(n);
  dx.upload(make_rhs(n, 1, n, 8));
  const int ticket = 1;
  SPADE_CUDA_CHECK(cudaMemcpy(ws.device_counters(), &ticket, sizeof(int), cudaMemcpyHostToDevice));
  DenseTrsvOptions options;
  options.rows_per_block = 32;
  spade::dense_trsv<double>(Transpose::no, Diagonal::non_unit, n, dL.get(), n, nullptr, dx.get(), ws, nullptr, options);
  try {
    ws.check(nullptr);
    ADD_FAILURE() << "timeout not reported";
  } catch (const spade::NumericalError& e) {
    EXPECT_EQ(e.kind(), spade::NumericalError::Kind::no_progress);
  }
  EXPECT_TRUE(sweep_one<double>(n, n, {1}, all_variants({0}), ws, 9));
}

}  // namespace
