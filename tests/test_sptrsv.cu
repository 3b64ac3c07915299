// Sparse triangular solve on the GPU (include/spade/sptrsv.hpp) against a serial host reference: every
// algorithm, lower and upper, CSR and CSC, unit and non-unit, 1 and 8 right-hand sides, on generated grids
// (including the aspect-ratio series of Li 2017), random long chains, a dense triangle, a diagonal matrix
// and the real matrices of ../shared/matrices (lower triangle of the pattern plus the diagonal).
//
// Values: off-diagonal entries are random in [-1, 1] scaled by 0.9 / max(entries in the row, entries in the
// column), the diagonal random in [1, 2]. Every row and every column of L is then strictly diagonally
// dominant (off-diagonal absolute sum <= 0.9 |diagonal|), for L and for U = L^T, so errors shrink along a
// dependency chain and a forward-error bound of c * eps * (longest row + 2) relative to max |x| is valid.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "spade/error.hpp"
#include "spade/generators.hpp"
#include "spade/matrix_market.hpp"
#include "spade/sparse_matrix.hpp"
#include "kernels/sptrsv_kernels.hpp"
#include "spade/sptrsv.hpp"
#include "tests/gpu_test.hpp"
#include "tests/test_matrices.hpp"

namespace spade {
namespace {

/// Every algorithm, or the ones named in SPADE_SPTRSV_ALGORITHMS (comma-separated, as to_string writes
/// them), so that a slow sanitizer run can take one family at a time.
std::vector<SptrsvAlgorithm> tested_algorithms() {
  const char* names = std::getenv("SPADE_SPTRSV_ALGORITHMS");
  if (names == nullptr || *names == '\0')
    return {SptrsvAlgorithm::automatic, SptrsvAlgorithm::levr,     SptrsvAlgorithm::levc,
            SptrsvAlgorithm::slfr,      SptrsvAlgorithm::slfc,     SptrsvAlgorithm::syncfree,
            SptrsvAlgorithm::thread,    SptrsvAlgorithm::fused,    SptrsvAlgorithm::fused_level,
            SptrsvAlgorithm::level_block, SptrsvAlgorithm::cluster};
  std::vector<SptrsvAlgorithm> chosen;
  std::stringstream list(names);
  for (std::string name; std::getline(list, name, ',');) chosen.push_back(sptrsv_algorithm_from_string(name));
  return chosen;
}
const std::vector<SptrsvAlgorithm> kAlgorithms = tested_algorithms();

/// Device buffer for the tests. upload() and poison() wait for the device: a copy from pageable memory or a
/// memset on the legacy default stream may still be in flight when they return, and a solve on a
/// non-blocking stream is not ordered after them.
template <typename U>
class DeviceVector {
 public:
  explicit DeviceVector(std::size_t count) : count_(count) { SPADE_CUDA_CHECK(cudaMalloc(&p_, std::max<std::size_t>(count, 1) * sizeof(U))); }
  explicit DeviceVector(const std::vector<U>& host) : DeviceVector(host.size()) { upload(host); }
  ~DeviceVector() { cudaFree(p_); }
  DeviceVector(const DeviceVector&) = delete;
  DeviceVector& operator=(const DeviceVector&) = delete;
  void upload(const std::vector<U>& host) {
    SPADE_CUDA_CHECK(cudaMemcpy(p_, host.data(), host.size() * sizeof(U), cudaMemcpyHostToDevice));
    SPADE_CUDA_CHECK(cudaDeviceSynchronize());
  }
  std::vector<U> download() const {
    std::vector<U> host(count_);
    SPADE_CUDA_CHECK(cudaMemcpy(host.data(), p_, count_ * sizeof(U), cudaMemcpyDeviceToHost));
    return host;
  }
  void poison() {  // all-ones bits: NaN
    SPADE_CUDA_CHECK(cudaMemset(p_, 0xff, count_ * sizeof(U)));
    SPADE_CUDA_CHECK(cudaDeviceSynchronize());
  }
  U* get() const { return p_; }

 private:
  U* p_ = nullptr;
  std::size_t count_;
};

/// A lower triangle L (CSC, sorted) with diagonally dominant values, and its transpose.
struct Triangle {
  SparseMatrix lower;   // L, diagonal stored
  SparseMatrix lower_t; // L^T
  index_t max_row = 0;  // most off-diagonal entries in a row or column
};

/// Lower triangle of the pattern of `a` plus the diagonal (strictly lower only when `with_diagonal` is
/// false), with the values described in the file comment.
Triangle make_triangle(const SparseMatrix& a, std::uint64_t seed, bool with_diagonal = true) {
  const index_t n = a.cols();
  std::vector<index_t> row_count(n, 0), col_count(n, 0);
  for (index_t j = 0; j < n; ++j)
    for (offset_t k = a.col_ptr()[j]; k < a.col_ptr()[j + 1]; ++k)
      if (a.row_ind()[k] > j) ++row_count[a.row_ind()[k]], ++col_count[j];
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(-1.0, 1.0), diag(1.0, 2.0);
  std::vector<offset_t> ptr(1, 0);
  std::vector<index_t> rows;
  std::vector<double> vals;
  Triangle t;
  for (index_t j = 0; j < n; ++j) {
    if (with_diagonal) rows.push_back(j), vals.push_back(diag(rng));
    for (offset_t k = a.col_ptr()[j]; k < a.col_ptr()[j + 1]; ++k) {
      const index_t i = a.row_ind()[k];
      if (i <= j) continue;
      rows.push_back(i);
      vals.push_back(unit(rng) * 0.9 / std::max(row_count[i], col_count[j]));
    }
    ptr.push_back(static_cast<offset_t>(rows.size()));
    t.max_row = std::max({t.max_row, row_count[j], col_count[j]});
  }
  t.lower = SparseMatrix(n, n, std::move(ptr), std::move(rows), std::move(vals));
  t.lower_t = t.lower.transpose();
  return t;
}

/// x = T^{-1} b on the host, T = L (lower) or L^T (upper), read from L's CSC arrays; unit: diagonal 1.
std::vector<double> reference_solve(const SparseMatrix& L, bool upper, bool unit, const std::vector<double>& b,
                                    int nrhs) {
  const index_t n = L.cols();
  std::vector<double> x = b;
  for (int r = 0; r < nrhs; ++r) {
    double* xr = x.data() + std::size_t(r) * n;
    if (!upper) {
      for (index_t j = 0; j < n; ++j) {
        double d = 1, xj = xr[j];
        for (offset_t k = L.col_ptr()[j]; k < L.col_ptr()[j + 1]; ++k)
          if (L.row_ind()[k] == j && !unit) d = L.values()[k];
        xj /= d;
        xr[j] = xj;
        for (offset_t k = L.col_ptr()[j]; k < L.col_ptr()[j + 1]; ++k)
          if (L.row_ind()[k] > j) xr[L.row_ind()[k]] -= L.values()[k] * xj;
      }
    } else {
      for (index_t j = n - 1; j >= 0; --j) {
        double d = 1, s = xr[j];
        for (offset_t k = L.col_ptr()[j]; k < L.col_ptr()[j + 1]; ++k) {
          const index_t i = L.row_ind()[k];
          if (i == j) {
            if (!unit) d = L.values()[k];
          } else {
            s -= L.values()[k] * xr[i];
          }
        }
        xr[j] = s / d;
      }
    }
  }
  return x;
}

struct Variant {
  SparseFormat format;
  TriangleKind triangle;
  DiagonalKind diagonal;
};

std::string describe(SptrsvAlgorithm a, const Variant& v, int nrhs) {
  return std::string(to_string(a)) + (v.format == SparseFormat::csr ? " csr" : " csc") +
         (v.triangle == TriangleKind::lower ? " lower" : " upper") +
         (v.diagonal == DiagonalKind::unit ? " unit" : " non-unit") + " nrhs=" + std::to_string(nrhs);
}

/// The device arrays of T in one variant: CSC of L is CSR of U = L^T, and the other way round.
template <typename T>
struct DeviceMatrix {
  DeviceVector<std::int32_t> ptr;
  DeviceVector<index_t> ind;
  DeviceVector<T> val;
  DeviceTriangle<T> view;

  static std::vector<std::int32_t> narrow(const std::vector<offset_t>& p) { return {p.begin(), p.end()}; }
  static std::vector<T> cast(const std::vector<double>& v) { return {v.begin(), v.end()}; }
  DeviceMatrix(const Triangle& t, const Variant& v)
      : ptr(narrow(source(t, v).col_ptr())), ind(source(t, v).row_ind()), val(cast(source(t, v).values())) {
    view = {t.lower.cols(), static_cast<std::int32_t>(source(t, v).nnz()), ptr.get(), ind.get(), val.get(), v.format,
            v.triangle, v.diagonal};
  }
  static const SparseMatrix& source(const Triangle& t, const Variant& v) {
    const bool l_arrays = (v.format == SparseFormat::csc) == (v.triangle == TriangleKind::lower);
    return l_arrays ? t.lower : t.lower_t;
  }
};

std::vector<double> random_rhs(index_t n, int nrhs, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<double> b(std::size_t(n) * nrhs);
  for (double& v : b) v = dist(rng);
  return b;
}

/// max |x - ref| / max |ref|; NaN anywhere gives NaN.
double relative_error(const std::vector<double>& x, const std::vector<double>& ref) {
  double err = 0, scale = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i])) return std::numeric_limits<double>::quiet_NaN();
    err = std::max(err, std::abs(x[i] - ref[i]));
    scale = std::max(scale, std::abs(ref[i]));
  }
  return scale > 0 ? err / scale : err;
}

template <typename T>
double tolerance(const Triangle& t) {
  return 64.0 * std::numeric_limits<T>::epsilon() * (t.max_row + 2);
}

/// Solves with `plan` `repeats` times (fresh right-hand sides each time) and checks every answer.
template <typename T>
void check_solves(SptrsvPlan<T>& plan, const Triangle& t, const Variant& v, int nrhs, int repeats,
                  const std::string& what) {
  const index_t n = t.lower.cols();
  DeviceVector<T> b(std::size_t(n) * nrhs), x(std::size_t(n) * nrhs);
  for (int rep = 0; rep < repeats; ++rep) {
    const std::vector<double> b_host = random_rhs(n, nrhs, 1000 + rep);
    b.upload(std::vector<T>(b_host.begin(), b_host.end()));
    x.poison();
    plan.solve(b.get(), n, x.get(), n, nrhs);
    ASSERT_NO_THROW(plan.check()) << what;
    const std::vector<T> x_dev = x.download();
    const std::vector<double> ref =
        reference_solve(t.lower, v.triangle == TriangleKind::upper, v.diagonal == DiagonalKind::unit, b_host, nrhs);
    const double err = relative_error(std::vector<double>(x_dev.begin(), x_dev.end()), ref);
    ASSERT_LE(err, tolerance<T>(t)) << what << ", solve " << rep << " of " << repeats;
  }
}

template <typename T>
void check_algorithm(const Triangle& t, SptrsvAlgorithm a, const Variant& v, int nrhs, int repeats = 1) {
  const DeviceMatrix<T> m(t, v);
  SptrsvOptions options;
  options.algorithm = a;
  SptrsvPlan<T> plan(m.view, options);
  // cluster runs fused_level where its layout does not fit (ClusterOnWideLevels checks where it must fit).
  if (a == SptrsvAlgorithm::cluster)
    EXPECT_TRUE(plan.algorithm() == a || plan.algorithm() == SptrsvAlgorithm::fused_level);
  else if (a != SptrsvAlgorithm::automatic)
    EXPECT_EQ(plan.algorithm(), a);
  check_solves(plan, t, v, nrhs, repeats, describe(a, v, nrhs) + " n=" + std::to_string(t.lower.cols()));
}

std::vector<Variant> all_variants() {
  std::vector<Variant> out;
  for (SparseFormat f : {SparseFormat::csr, SparseFormat::csc})
    for (TriangleKind tr : {TriangleKind::lower, TriangleKind::upper})
      for (DiagonalKind d : {DiagonalKind::non_unit, DiagonalKind::unit}) out.push_back({f, tr, d});
  return out;
}

void check_every_variant(const Triangle& t) {
  for (SptrsvAlgorithm a : kAlgorithms)
    for (const Variant& v : all_variants())
      for (int nrhs : {1, 8}) {
        check_algorithm<double>(t, a, v, nrhs);
        if (::testing::Test::HasFatalFailure()) return;
      }
}

/// A random lower pattern with a chain through every row (i depends on i - 1) plus `extra` random
/// earlier columns per row: n levels, the longest dependency chain possible.
SparseMatrix random_chain(index_t n, int extra, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::int64_t> rows, cols;
  std::vector<double> vals;
  for (index_t i = 0; i < n; ++i) {
    rows.push_back(i), cols.push_back(i), vals.push_back(1);
    if (i == 0) continue;
    rows.push_back(i), cols.push_back(i - 1), vals.push_back(1);
    for (int e = 0; e < extra; ++e) {
      const index_t j = std::uniform_int_distribution<index_t>(0, i - 1)(rng);
      if (j != i - 1) rows.push_back(i), cols.push_back(j), vals.push_back(1);
    }
  }
  // Duplicates are summed by from_triplets; values are replaced by make_triangle anyway.
  return SparseMatrix::from_triplets(n, n, rows, cols, vals);
}

SparseMatrix dense_lower(index_t n) {
  std::vector<std::int64_t> rows, cols;
  std::vector<double> vals;
  for (index_t j = 0; j < n; ++j)
    for (index_t i = j; i < n; ++i) rows.push_back(i), cols.push_back(j), vals.push_back(1);
  return SparseMatrix::from_triplets(n, n, rows, cols, vals);
}

SparseMatrix diagonal(index_t n) {
  std::vector<std::int64_t> idx(n);
  for (index_t i = 0; i < n; ++i) idx[i] = i;
  return SparseMatrix::from_triplets(n, n, idx, idx, std::vector<double>(n, 1.0));
}

TEST(SptrsvNames, RoundTrip) {
  for (SptrsvAlgorithm a : kAlgorithms) EXPECT_EQ(sptrsv_algorithm_from_string(to_string(a)), a);
  EXPECT_THROW(sptrsv_algorithm_from_string("cusparse"), InvalidInput);
}

// ---- auto's rule (sptrsv_auto_rule): a host function, tested without a GPU ----

SptrsvShape shape_of(index_t n, double entries_per_row, index_t levels, index_t widest, index_t longest_row) {
  SptrsvShape s;
  s.n = n;
  s.off_diagonal_nnz = static_cast<std::int64_t>(entries_per_row * n);
  s.levels = levels;
  s.max_rows_per_level = widest;
  s.max_nnz_per_row = longest_row;
  return s;
}

bool predicts(const SptrsvAutoChoice& c, SptrsvAlgorithm a) {
  for (const SptrsvPrediction& p : c.predicted)
    if (p.algorithm == a) return true;
  return false;
}

// Table: statistics and device -> what the rule states. The shapes are those of bench_sptrsv's triangles
// (docs/benchmarks/sptrsv.md) and of the issue's, entries per row rounded.
TEST(SptrsvRule, Table) {
  const SptrsvDeviceModel h100;  // the defaults: an H100
  struct Case {
    const char* what;
    SptrsvShape shape;
    SptrsvAlgorithm one;
    bool exactly = true;  ///< false: `one` is what the rule must not take
  };
  const std::vector<Case> cases = {
      {"8 wide levels (bayer10)", shape_of(13436, 4.1, 8, 3000, 30), SptrsvAlgorithm::levr},
      {"2 levels, rows of 5,000 (c-62)", shape_of(41731, 6.2, 2, 40000, 5059), SptrsvAlgorithm::levr},
      {"1,044 levels of 15 rows (4elt)", shape_of(15606, 2.94, 1044, 60, 10), SptrsvAlgorithm::level_block},
      {"16,447 levels of 64 rows (lap2d5 64 x 16384)", shape_of(1048576, 2.0, 16447, 64, 2),
       SptrsvAlgorithm::level_block},
      {"2,047 levels of 512 rows (lap2d5 1024^2)", shape_of(1048576, 2.0, 2047, 1024, 2), SptrsvAlgorithm::cluster},
      {"382 levels of 5,490 rows (lap3d7 128^3)", shape_of(2097152, 3.0, 382, 12000, 3), SptrsvAlgorithm::levr},
      {"190 levels of 292 rows, 7 per row (an FE mesh)", shape_of(55476, 7, 190, 600, 20),
       SptrsvAlgorithm::level_block, false},
      {"255 levels of 191 rows, 14 per row (3D materials)", shape_of(48600, 14, 255, 400, 30),
       SptrsvAlgorithm::level_block, false},
      {"6,339 levels of 2 rows (a CFD Jacobian)", shape_of(15444, 6, 6339, 10, 40), SptrsvAlgorithm::level_block},
      // Widest levels beyond kSptrsvOneBlockWidestLevel rows: levr, not one block.
      {"35 levels, the widest of 1,242 rows (gemat12)", shape_of(4929, 3.8, 35, 1242, 43), SptrsvAlgorithm::levr},
      {"50 levels, the widest of 2,127 rows (sherman3)", shape_of(5005, 1.5, 50, 2127, 3), SptrsvAlgorithm::levr},
      {"65 levels, the widest of 938 rows (rajat01)", shape_of(6833, 2.7, 65, 938, 15), SptrsvAlgorithm::levr},
      {"52 levels, the widest of 431 rows (add32)", shape_of(4960, 1.9, 52, 431, 8), SptrsvAlgorithm::level_block},
      // A few rows of 1,309 entries among rows of 2: levr's levels cost a launch, not a split (adder_dcop_05).
      {"14 levels, a mean row of 2, the longest 1,309", shape_of(1813, 2.05, 14, 805, 1309), SptrsvAlgorithm::levr},
  };
  for (const Case& c : cases) {
    const SptrsvAutoChoice got = sptrsv_auto_rule(c.shape, h100);
    if (c.exactly)
      EXPECT_EQ(got.one, c.one) << c.what << ": " << to_string(got.one);
    else
      EXPECT_NE(got.one, c.one) << c.what;
    EXPECT_FALSE(got.predicted.empty());
    for (std::size_t k = 1; k < got.predicted.size(); ++k)
      EXPECT_LE(got.predicted[k - 1].us, got.predicted[k].us) << c.what << ": predictions sorted";
    EXPECT_NE(got.one_fallback, SptrsvAlgorithm::cluster) << c.what;
    EXPECT_NE(got.several_fallback, SptrsvAlgorithm::cluster) << c.what;
  }
}

// Rows longer than kSptrsvOneBlockLongestRow never go to one thread block untimed; on levels too wide for
// it, not at all, however many levels. With enough levels to time the candidates, level_block is one.
TEST(SptrsvRule, LongRowsGoToOneBlockOnlyWhenTimed) {
  const SptrsvDeviceModel h100;
  for (index_t levels : {10, 1000, 10000, 100000})
    for (index_t longest : {kSptrsvOneBlockLongestRow + 1, index_t(4096), index_t(20000)}) {
      const SptrsvAutoChoice c = sptrsv_auto_rule(shape_of(262144, 150, levels, 50000, longest), h100);
      EXPECT_FALSE(predicts(c, SptrsvAlgorithm::level_block)) << levels << " levels, rows of " << longest;
      EXPECT_NE(c.one, SptrsvAlgorithm::level_block);
      EXPECT_NE(c.several, SptrsvAlgorithm::level_block);
    }
  // The same narrow levels with short rows do go to one block.
  EXPECT_EQ(sptrsv_auto_rule(shape_of(20000, 4, 10000, 4, 8), h100).one, SptrsvAlgorithm::level_block);
  // Long rows on narrow levels: never predicted with too few levels to time, timed with enough (a
  // factor's: bcsstk16's L, 1,576 levels of up to 260 rows, rows of up to 971 entries).
  for (index_t levels : {10, 31}) {
    const SptrsvAutoChoice c = sptrsv_auto_rule(shape_of(4884, 173, levels, 260, 971), h100);
    EXPECT_TRUE(c.trials.empty());
    EXPECT_NE(c.one, SptrsvAlgorithm::level_block) << levels << " levels";
  }
  const SptrsvAutoChoice factor = sptrsv_auto_rule(shape_of(4884, 173, 1576, 260, 971), h100);
  EXPECT_NE(std::find(factor.trials.begin(), factor.trials.end(), SptrsvAlgorithm::level_block), factor.trials.end());
}

// Monotone: more levels over the same entries (narrower levels) never move the choice away from
// level_block, more entries over the same levels never move it away from levr; a faster device (more SMs)
// never predicts levr slower.
TEST(SptrsvRule, Monotone) {
  const SptrsvDeviceModel h100;
  for (double per_row : {1.0, 3.0, 8.0, 30.0}) {
    bool block = false;
    for (index_t levels = 1; levels <= 1 << 20; levels *= 2) {
      const SptrsvAutoChoice c = sptrsv_auto_rule(shape_of(1 << 20, per_row, levels, (1 << 20) / levels, 64), h100);
      if (block) EXPECT_EQ(c.one, SptrsvAlgorithm::level_block) << per_row << " per row, " << levels << " levels";
      block = block || c.one == SptrsvAlgorithm::level_block;
    }
    EXPECT_TRUE(block) << "narrow enough levels go to level_block (" << per_row << " per row)";
  }
  for (index_t levels : {4, 100, 3000}) {
    bool levr = false;
    for (double per_row = 0.5; per_row <= 256; per_row *= 2) {
      const SptrsvAutoChoice c = sptrsv_auto_rule(shape_of(1 << 18, per_row, levels, 1 << 18, 256), h100);
      if (levr) EXPECT_EQ(c.one, SptrsvAlgorithm::levr) << per_row << " per row, " << levels << " levels";
      levr = levr || c.one == SptrsvAlgorithm::levr;
    }
  }
  SptrsvDeviceModel bigger = h100;
  bigger.sm_count *= 2;
  const SptrsvShape s = shape_of(1 << 20, 5, 500, 4000, 10);
  EXPECT_LE(sptrsv_auto_rule(s, bigger).levr_us, sptrsv_auto_rule(s, h100).levr_us);
}

// cluster needs compute capability 9.0, and for one right-hand side a 16th of the widest level in one
// pass of its block (512 threads); several right-hand sides favour level_block (a block each, side by
// side).
TEST(SptrsvRule, ClusterAndSeveralRightHandSides) {
  SptrsvDeviceModel older;
  older.compute_major = 8;
  const SptrsvShape grid = shape_of(1048576, 2.0, 2047, 1024, 2);
  const SptrsvAutoChoice c = sptrsv_auto_rule(grid, older);
  EXPECT_FALSE(predicts(c, SptrsvAlgorithm::cluster));
  EXPECT_NE(c.one, SptrsvAlgorithm::cluster);
  EXPECT_NE(c.several, SptrsvAlgorithm::cluster);
  const SptrsvDeviceModel h100;
  SptrsvShape wide = grid;
  wide.max_rows_per_level = 16 * 600;  // shares of 600 rows: two passes
  EXPECT_NE(sptrsv_auto_rule(wide, h100).one, SptrsvAlgorithm::cluster);
  EXPECT_EQ(sptrsv_auto_rule(grid, h100).one, SptrsvAlgorithm::cluster);
  // 4,351 levels of 241 rows: level_block within a few percent of cluster for one, ahead for several.
  EXPECT_EQ(sptrsv_auto_rule(shape_of(1048576, 2.0, 4351, 256, 2), h100).several, SptrsvAlgorithm::level_block);
}

// fused is timed only where the levels are skewed (a few wide, many thin), levr is the pick, and nothing
// needs the level-ordered copy; never on uniform levels.
TEST(SptrsvRule, FusedTrialOnlyOnSkewedLevels) {
  const SptrsvDeviceModel h100;
  // 275 levels, the widest holding most rows (a web graph).
  const SptrsvAutoChoice skewed = sptrsv_auto_rule(shape_of(325729, 1.4, 275, 200000, 60), h100);
  EXPECT_EQ(skewed.one, SptrsvAlgorithm::levr);
  EXPECT_TRUE(skewed.try_fused);
  // mdual_lap (the widest level 8.4 times the mean) and sherman3 (21 times): levr without a trial.
  for (const SptrsvShape& s : {shape_of(2097152, 3.0, 382, 8000, 3), shape_of(15606, 2.94, 1044, 60, 10),
                               shape_of(13436, 4.1, 8, 3000, 30), shape_of(258569, 1.98, 44, 49428, 4),
                               shape_of(5005, 1.5, 50, 2127, 3)}) {
    const SptrsvAutoChoice c = sptrsv_auto_rule(s, h100);
    EXPECT_FALSE(c.try_fused) << s.levels << " levels";
  }
}

// Rows longer than kSptrsvLongRow over at least kSptrsvTrialLevels levels (a Cholesky factor's shape):
// the rule lists candidates to time, levr never among them, at most kSptrsvMaxTrials, fused_level and
// thread included; none with short rows or few levels (c-62: 2 levels of rows of 5,000 entries).
TEST(SptrsvRule, LongRowsAreTimed) {
  const SptrsvDeviceModel h100;
  for (const SptrsvShape& s : {shape_of(15606, 29, 463, 200, 4000), shape_of(2003, 143, 676, 10, 1900),
                               shape_of(500, 41, 139, 8, 400)}) {
    const SptrsvAutoChoice c = sptrsv_auto_rule(s, h100);
    EXPECT_FALSE(c.trials.empty()) << s.levels << " levels";
    EXPECT_LE(int(c.trials.size()), kSptrsvMaxTrials);
    EXPECT_FALSE(c.try_fused);
    for (SptrsvAlgorithm a : c.trials) EXPECT_NE(a, SptrsvAlgorithm::levr);
    EXPECT_NE(std::find(c.trials.begin(), c.trials.end(), SptrsvAlgorithm::fused_level), c.trials.end());
    EXPECT_NE(std::find(c.trials.begin(), c.trials.end(), SptrsvAlgorithm::thread), c.trials.end());
  }
  for (const SptrsvShape& s : {shape_of(41731, 6.2, 2, 40000, 5059), shape_of(15606, 2.94, 1044, 60, 10)})
    EXPECT_TRUE(sptrsv_auto_rule(s, h100).trials.empty()) << s.levels << " levels";
  EXPECT_GT(sptrsv_several_over_one(SptrsvAlgorithm::fused_level), sptrsv_several_over_one(SptrsvAlgorithm::levr));
}

TEST(SptrsvRule, EmptyAndBadStatistics) {
  const SptrsvDeviceModel h100;
  const SptrsvAutoChoice empty = sptrsv_auto_rule(SptrsvShape{}, h100);
  EXPECT_FALSE(empty.try_fused);
  EXPECT_NE(empty.one, SptrsvAlgorithm::automatic);
  EXPECT_THROW(sptrsv_auto_rule(shape_of(-1, 0, 0, 0, 0), h100), InvalidInput);
}

TEST(Sptrsv, EveryVariantOnLaplacian2d9Point) {
  SPADE_REQUIRE_GPU();
  check_every_variant(make_triangle(laplacian_2d(40, 30, Stencil::nine_point), 1));
}

TEST(Sptrsv, EveryVariantOnRandomLongChain) {
  SPADE_REQUIRE_GPU();
  check_every_variant(make_triangle(random_chain(3000, 4, 7), 2));
}

TEST(Sptrsv, EveryVariantOnDenseTriangle) {
  SPADE_REQUIRE_GPU();
  check_every_variant(make_triangle(dense_lower(300), 3));
}

TEST(Sptrsv, EveryVariantOnDiagonal) {
  SPADE_REQUIRE_GPU();
  check_every_variant(make_triangle(diagonal(1000), 4));
}

TEST(Sptrsv, ImpliedUnitDiagonal) {
  SPADE_REQUIRE_GPU();
  const Triangle t = make_triangle(laplacian_3d(12, 10, 9, Stencil::twenty_seven_point), 5, false);
  for (SptrsvAlgorithm a : kAlgorithms)
    for (SparseFormat f : {SparseFormat::csr, SparseFormat::csc})
      for (TriangleKind tr : {TriangleKind::lower, TriangleKind::upper})
        check_algorithm<double>(t, a, {f, tr, DiagonalKind::unit}, 1);
}

TEST(Sptrsv, OddRightHandSideCountsAndLeadingDimensions) {
  SPADE_REQUIRE_GPU();
  const Triangle t = make_triangle(random_chain(700, 3, 11), 6);
  const index_t n = t.lower.cols(), ld = n + 5;
  for (SptrsvAlgorithm a : kAlgorithms)
    for (int nrhs : {3, 11, 13}) {
      const Variant v{SparseFormat::csr, TriangleKind::lower, DiagonalKind::non_unit};
      const DeviceMatrix<double> m(t, v);
      SptrsvOptions options;
      options.algorithm = a;
      SptrsvPlan<double> plan(m.view, options);
      std::vector<double> b_host(std::size_t(ld) * nrhs, 0.0), b_packed = random_rhs(n, nrhs, 5);
      for (int r = 0; r < nrhs; ++r)
        std::copy_n(b_packed.begin() + std::size_t(r) * n, n, b_host.begin() + std::size_t(r) * ld);
      DeviceVector<double> b(b_host), x(std::size_t(ld) * nrhs);
      x.poison();
      plan.solve(b.get(), ld, x.get(), ld, nrhs);
      plan.check();
      const std::vector<double> x_host = x.download(), ref = reference_solve(t.lower, false, false, b_packed, nrhs);
      std::vector<double> x_packed(std::size_t(n) * nrhs);
      for (int r = 0; r < nrhs; ++r)
        std::copy_n(x_host.begin() + std::size_t(r) * ld, n, x_packed.begin() + std::size_t(r) * n);
      EXPECT_LE(relative_error(x_packed, ref), tolerance<double>(t)) << describe(a, v, nrhs);
    }
}

// One plan solving 8, then fewer, then more right-hand sides than a pass holds: the per-pass scratch of
// a wide solve must not leak into a narrower one or the other way round.
TEST(Sptrsv, ChangingRightHandSideCountsOnOnePlan) {
  SPADE_REQUIRE_GPU();
  const Triangle t = make_triangle(laplacian_3d(12, 11, 10, Stencil::seven_point), 15);
  for (SptrsvAlgorithm a : kAlgorithms) {
    const Variant v{SparseFormat::csr, TriangleKind::lower, DiagonalKind::non_unit};
    const DeviceMatrix<double> m(t, v);
    SptrsvOptions options;
    options.algorithm = a;
    SptrsvPlan<double> plan(m.view, options);
    for (int nrhs : {8, 3, 1, 13, 8, 5})
      check_solves(plan, t, v, nrhs, 1, describe(a, v, nrhs) + " (changing counts)");
    if (HasFatalFailure()) return;
  }
}

TEST(Sptrsv, InPlaceSolve) {
  SPADE_REQUIRE_GPU();
  const Triangle t = make_triangle(laplacian_2d(33, 31), 8);
  const index_t n = t.lower.cols();
  for (SptrsvAlgorithm a : kAlgorithms)
    for (int nrhs : {1, 8}) {
      const Variant v{SparseFormat::csc, TriangleKind::upper, DiagonalKind::non_unit};
      const DeviceMatrix<double> m(t, v);
      SptrsvOptions options;
      options.algorithm = a;
      SptrsvPlan<double> plan(m.view, options);
      const std::vector<double> b_host = random_rhs(n, nrhs, 9);
      DeviceVector<double> bx(b_host);
      plan.solve(bx.get(), n, bx.get(), n, nrhs);
      plan.check();
      EXPECT_LE(relative_error(bx.download(), reference_solve(t.lower, true, false, b_host, nrhs)),
                tolerance<double>(t))
          << describe(a, v, nrhs);
    }
}

TEST(Sptrsv, SinglePrecision) {
  SPADE_REQUIRE_GPU();
  const Triangle t = make_triangle(laplacian_2d(50, 40, Stencil::nine_point), 10);
  for (SptrsvAlgorithm a : kAlgorithms)
    for (int nrhs : {1, 8})
      check_algorithm<float>(t, a, {SparseFormat::csr, TriangleKind::lower, DiagonalKind::non_unit}, nrhs);
}

// Each algorithm 50 times in a row on the same plan, a fresh right-hand side each time: no hang (a
// spin-wait that gave up would throw from check()), no wrong answer, no stale state between solves.
TEST(Sptrsv, FiftySolvesOnOnePlan) {
  SPADE_REQUIRE_GPU();
  const Triangle grid = make_triangle(laplacian_2d(128, 128, Stencil::nine_point), 12);
  const Triangle chain = make_triangle(random_chain(20000, 2, 13), 14);
  for (const Triangle* t : {&grid, &chain})
    for (SptrsvAlgorithm a : kAlgorithms) {
      check_algorithm<double>(*t, a, {SparseFormat::csr, TriangleKind::lower, DiagonalKind::non_unit}, 1, 50);
      check_algorithm<double>(*t, a, {SparseFormat::csc, TriangleKind::upper, DiagonalKind::non_unit}, 8, 50);
    }
}

// The aspect-ratio grids of Li 2017 (about a million unknowns in 2D, two million in 3D).
TEST(Sptrsv, AspectRatioGrids) {
  SPADE_REQUIRE_GPU();
  struct Grid {
    index_t nx, ny, nz;
    Stencil stencil;
  };
  const std::vector<Grid> grids = {
      {1024, 1024, 0, Stencil::five_point}, {512, 2048, 0, Stencil::five_point}, {256, 4096, 0, Stencil::nine_point},
      {128, 8192, 0, Stencil::five_point},  {64, 16384, 0, Stencil::nine_point}, {128, 128, 128, Stencil::seven_point},
      {64, 128, 256, Stencil::seven_point}, {64, 64, 512, Stencil::twenty_seven_point},
      {32, 64, 1024, Stencil::seven_point}, {32, 32, 2048, Stencil::twenty_seven_point}};
  for (const Grid& g : grids) {
    const Triangle t = make_triangle(g.nz == 0 ? laplacian_2d(g.nx, g.ny, g.stencil)
                                               : laplacian_3d(g.nx, g.ny, g.nz, g.stencil),
                                     20 + g.nx);
    for (SptrsvAlgorithm a : kAlgorithms)
      check_algorithm<double>(t, a, {SparseFormat::csr, TriangleKind::lower, DiagonalKind::non_unit}, 1);
    check_algorithm<double>(t, SptrsvAlgorithm::automatic,
                            {SparseFormat::csc, TriangleKind::upper, DiagonalKind::unit}, 8);
    if (HasFatalFailure()) return;
  }
}

// Every real matrix of ../shared/matrices: lower triangle of the pattern plus the diagonal.
TEST(Sptrsv, RealMatrices) {
  SPADE_REQUIRE_GPU();
  const std::filesystem::path dir = testing::matrix_dir();
  if (!std::filesystem::is_directory(dir)) GTEST_SKIP() << "no matrix folder " << dir;
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.path().string().find(".mtx") != std::string::npos) files.push_back(entry.path().string());
  std::sort(files.begin(), files.end());
  ASSERT_FALSE(files.empty());
  MatrixMarketOptions options;
  options.pattern_values = PatternValues::ones;
  for (const std::string& file : files) {
    SCOPED_TRACE(file);
    const SparseMatrix a = read_matrix_market(file, options);
    if (!a.is_square()) continue;
    const Triangle t = make_triangle(a, 30);
    for (SptrsvAlgorithm alg : kAlgorithms) {
      check_algorithm<double>(t, alg, {SparseFormat::csr, TriangleKind::lower, DiagonalKind::non_unit}, 1);
      check_algorithm<double>(t, alg, {SparseFormat::csc, TriangleKind::upper, DiagonalKind::unit}, 8);
    }
    if (HasFatalFailure()) return;
  }
}

TEST(Sptrsv, UpdateValuesReusesThePlan) {
  SPADE_REQUIRE_GPU();
  const Triangle first = make_triangle(laplacian_2d(30, 20), 40), second = make_triangle(laplacian_2d(30, 20), 41);
  for (SptrsvAlgorithm a : kAlgorithms)
    for (SparseFormat f : {SparseFormat::csr, SparseFormat::csc}) {
      const Variant v{f, TriangleKind::upper, DiagonalKind::non_unit};
      const DeviceMatrix<double> m1(first, v), m2(second, v);
      SptrsvOptions options;
      options.algorithm = a;
      SptrsvPlan<double> plan(m1.view, options);
      plan.update_values(m2.val.get());
      check_solves(plan, second, v, 1, 2, describe(a, v, 1) + " after update_values");
    }
}

/// `a` with the entries (i, j) and (j, i) added (value 1).
SparseMatrix with_entry(const SparseMatrix& a, index_t i, index_t j) {
  std::vector<std::int64_t> rows, cols;
  std::vector<double> vals;
  for (index_t c = 0; c < a.cols(); ++c)
    for (offset_t k = a.col_ptr()[c]; k < a.col_ptr()[c + 1]; ++k)
      rows.push_back(a.row_ind()[k]), cols.push_back(c), vals.push_back(a.values()[k]);
  rows.push_back(i), cols.push_back(j), vals.push_back(1);
  rows.push_back(j), cols.push_back(i), vals.push_back(1);
  return SparseMatrix::from_triplets(a.rows(), a.cols(), rows, cols, vals);
}

/// auto's choice on a plan must be one that sptrsv_auto_rule allows on the plan's own statistics: its
/// one-right-hand-side pick or fallback (cluster's layout may not fit), fused where the rule asked for
/// fused's trial; passes of several run its several-right-hand-side pick or fallback.
template <typename T>
void expect_rule_choice(const SptrsvPlan<T>& plan, const std::string& what) {
  const SptrsvAutoChoice c = sptrsv_auto_rule(sptrsv_shape(plan.stats()), SptrsvDeviceModel::current());
  const SptrsvAlgorithm one = plan.algorithm(1), several = plan.algorithm(8);
  const auto trial = [&](SptrsvAlgorithm a) {
    return std::find(c.trials.begin(), c.trials.end(), a) != c.trials.end();
  };
  EXPECT_TRUE(one == c.one || one == c.one_fallback || (c.try_fused && one == SptrsvAlgorithm::fused) || trial(one))
      << what << ": auto ran " << to_string(one) << ", the rule says " << to_string(c.one);
  EXPECT_TRUE(several == c.several || several == c.several_fallback || trial(several))
      << what << ": auto ran " << to_string(several) << " for several, the rule says " << to_string(c.several);
}

// A 27-point grid of about 430 rows and 5,800 entries per level whose last row also reads the first, every
// level back, so that cluster's layout does not fit: auto's choice is one the rule allows, its solves are
// right for 1, 8, 9 and 11 right-hand sides, before and after new values.
TEST(Sptrsv, AutoWhereClusterDoesNotFit) {
  SPADE_REQUIRE_GPU();
  const SparseMatrix base = laplacian_3d(96, 96, 16, Stencil::twenty_seven_point);
  const SparseMatrix grid = with_entry(base, base.rows() - 1, 0);
  const Triangle first = make_triangle(grid, 42), second = make_triangle(grid, 43);
  for (const Variant& v : {Variant{SparseFormat::csr, TriangleKind::lower, DiagonalKind::non_unit},
                           Variant{SparseFormat::csc, TriangleKind::upper, DiagonalKind::unit}}) {
    const DeviceMatrix<double> m1(first, v), m2(second, v);
    SptrsvPlan<double> plan(m1.view);
    expect_rule_choice(plan, describe(SptrsvAlgorithm::automatic, v, 1));
    for (int nrhs : {1, 8, 9, 11}) check_solves(plan, first, v, nrhs, 2, describe(plan.algorithm(nrhs), v, nrhs));
    plan.update_values(m2.val.get());
    for (int nrhs : {1, 8})
      check_solves(plan, second, v, nrhs, 1, describe(plan.algorithm(nrhs), v, nrhs) + " after update_values");
  }
}

/// Two levels of `half` rows each: row half + i reads row i (and row i + 1 when there is one).
SparseMatrix two_wide_levels(index_t half) {
  std::vector<std::int64_t> rows, cols;
  std::vector<double> vals;
  for (index_t i = 0; i < 2 * half; ++i) {
    rows.push_back(i), cols.push_back(i), vals.push_back(1);
    if (i < half) continue;
    rows.push_back(i), cols.push_back(i - half), vals.push_back(1);
    if (i + 1 < 2 * half) rows.push_back(i), cols.push_back(i - half + 1), vals.push_back(1);
  }
  return SparseMatrix::from_triplets(2 * half, 2 * half, rows, cols, vals);
}

// cluster where its layout must fit (on a GPU of compute capability 9.0): 3D grids of 7 and 27 points
// (rows reading 1 and 7 levels back, 1 and 4 lanes per row), a 9-point 2D grid, and two levels of
// 20,000 rows (shares of 1,250 rows: more than one pass of a block); both orientations and diagonals,
// 1, 8, 9 and 11 right-hand sides, in place, single precision, after update_values; and a long random
// chain (rows reading thousands of levels back), where the plan runs fused_level.
TEST(Sptrsv, ClusterOnWideLevels) {
  SPADE_REQUIRE_GPU();
  int device = 0, major = 0;
  SPADE_CUDA_CHECK(cudaGetDevice(&device));
  SPADE_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  if (major < 9) GTEST_SKIP() << "cluster needs compute capability 9.0; this GPU has " << major << ".x";
  SptrsvOptions options;
  options.algorithm = SptrsvAlgorithm::cluster;
  const std::vector<SparseMatrix> grids = {laplacian_3d(40, 30, 20, Stencil::seven_point),
                                           laplacian_3d(24, 20, 16, Stencil::twenty_seven_point),
                                           laplacian_2d(300, 200, Stencil::nine_point), two_wide_levels(20000)};
  for (std::size_t gi = 0; gi < grids.size(); ++gi) {
    SCOPED_TRACE("matrix " + std::to_string(gi));
    const Triangle first = make_triangle(grids[gi], 60 + gi), second = make_triangle(grids[gi], 70 + gi);
    for (const Variant& v : all_variants()) {
      const DeviceMatrix<double> m1(first, v), m2(second, v);
      SptrsvPlan<double> plan(m1.view, options);
      ASSERT_EQ(plan.algorithm(), SptrsvAlgorithm::cluster) << describe(SptrsvAlgorithm::cluster, v, 1);
      ASSERT_EQ(plan.algorithm(8), SptrsvAlgorithm::cluster);
      for (int nrhs : {1, 8, 9, 11}) check_solves(plan, first, v, nrhs, 2, describe(SptrsvAlgorithm::cluster, v, nrhs));
      plan.update_values(m2.val.get());
      check_solves(plan, second, v, 1, 1, describe(SptrsvAlgorithm::cluster, v, 1) + " after update_values");
      if (HasFatalFailure()) return;
    }
    // In place and in single precision.
    const Variant v{SparseFormat::csr, TriangleKind::lower, DiagonalKind::non_unit};
    const index_t n = first.lower.cols();
    const DeviceMatrix<double> m(first, v);
    SptrsvPlan<double> plan(m.view, options);
    const std::vector<double> b_host = random_rhs(n, 8, 61);
    DeviceVector<double> bx(b_host);
    plan.solve(bx.get(), n, bx.get(), n, 8);
    plan.check();
    const std::vector<double> ref = reference_solve(first.lower, false, false, b_host, 8);
    EXPECT_LE(relative_error(bx.download(), ref), tolerance<double>(first)) << "in place";
    const DeviceMatrix<float> mf(first, v);
    SptrsvPlan<float> plan_f(mf.view, options);
    ASSERT_EQ(plan_f.algorithm(), SptrsvAlgorithm::cluster);
    check_solves(plan_f, first, v, 8, 1, "cluster float");
  }
  const Triangle chain = make_triangle(random_chain(3000, 4, 7), 2);
  const DeviceMatrix<double> mc(chain, {SparseFormat::csr, TriangleKind::lower, DiagonalKind::non_unit});
  EXPECT_EQ(SptrsvPlan<double>(mc.view, options).algorithm(), SptrsvAlgorithm::fused_level);
}

/// The level of each row of L on the host (0 for a row with no dependency).
std::vector<index_t> host_levels(const SparseMatrix& L) {
  const index_t n = L.cols();
  std::vector<index_t> level(n, 0);
  for (index_t j = 0; j < n; ++j)
    for (offset_t k = L.col_ptr()[j]; k < L.col_ptr()[j + 1]; ++k)
      if (L.row_ind()[k] > j) level[L.row_ind()[k]] = std::max(level[L.row_ind()[k]], level[j] + 1);
  return level;
}

/// Levels of L on the host: their count and the most rows in one.
std::pair<index_t, index_t> host_level_sets(const SparseMatrix& L) {
  const std::vector<index_t> level = host_levels(L);
  const index_t count = level.empty() ? 0 : *std::max_element(level.begin(), level.end()) + 1;
  std::vector<index_t> rows(count, 0);
  for (index_t l : level) ++rows[l];
  return {count, rows.empty() ? 0 : *std::max_element(rows.begin(), rows.end())};
}

/// A chain through every row plus, every 997th row, `wide` random earlier columns (rows longer than a
/// warp: the level analysis sweeps them with the whole warp).
SparseMatrix chain_with_long_rows(index_t n, int wide, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::int64_t> rows, cols;
  for (index_t i = 0; i < n; ++i) {
    rows.push_back(i), cols.push_back(i);
    if (i > 0) rows.push_back(i), cols.push_back(i - 1);
    if (i % 997 == 0 && i > 1)
      for (int e = 0; e < wide; ++e)
        rows.push_back(i), cols.push_back(std::uniform_int_distribution<index_t>(0, i - 2)(rng));
  }
  return SparseMatrix::from_triplets(n, n, rows, cols, std::vector<double>(rows.size(), 1.0));
}

// auto's measured choice: a chain of 6,000 levels with rows of 300 entries every 997 rows, where the rule
// asks for trials; the analysis builds the candidates, its first solves time them (each one right), the
// plan stops choosing within two solves a candidate plus one, keeps a choice the rule allows, and the
// winners' solves are right for 1, 8 and 9 right-hand sides, before and after new values, with check().
TEST(Sptrsv, AutoTimesCandidatesOnItsFirstSolves) {
  SPADE_REQUIRE_GPU();
  const SparseMatrix chain = chain_with_long_rows(6000, 300, 7);
  const Triangle first = make_triangle(chain, 51), second = make_triangle(chain, 52);
  ASSERT_GT(first.max_row, kSptrsvLongRow);
  bool timed = false;
  for (const Variant& v : all_variants()) {
    const DeviceMatrix<double> m1(first, v), m2(second, v);
    SptrsvPlan<double> plan(m1.view);
    // The orientation decides whether the long lines are rows of the internal lower triangle.
    const bool long_rows = plan.stats().max_nnz_per_row > kSptrsvLongRow && plan.stats().levels >= kSptrsvTrialLevels;
    const int candidates = plan.stats().auto_candidates;
    if (long_rows) {
      EXPECT_GE(candidates, 2) << describe(SptrsvAlgorithm::automatic, v, 1);
      EXPECT_TRUE(plan.choosing(1)) << describe(SptrsvAlgorithm::automatic, v, 1);
    }
    EXPECT_EQ(plan.stats().auto_trials, 0) << "the analysis times nothing";
    timed = timed || plan.choosing(1);
    for (int nrhs : {1, 8}) {
      // An untimed and a timed solve a candidate (two candidates for several), and one that finds them
      // finished (check_solves' check() waits for each).
      const int solves = 2 * std::max(candidates, 2) + 1;
      check_solves(plan, first, v, nrhs, solves, describe(plan.algorithm(nrhs), v, nrhs) + " while choosing");
      EXPECT_FALSE(plan.choosing(nrhs)) << describe(SptrsvAlgorithm::automatic, v, nrhs) << " after " << solves
                                        << " solves";
    }
    if (long_rows) EXPECT_GE(plan.stats().auto_trials, candidates > 1 ? 1 : 0);
    expect_rule_choice(plan, describe(SptrsvAlgorithm::automatic, v, 1));
    for (int nrhs : {1, 8, 9}) check_solves(plan, first, v, nrhs, 3, describe(plan.algorithm(nrhs), v, nrhs));
    plan.update_values(m2.val.get());
    for (int nrhs : {1, 8})
      check_solves(plan, second, v, nrhs, 2, describe(plan.algorithm(nrhs), v, nrhs) + " after update_values");
    plan.check();
    if (HasFatalFailure()) return;
  }
  EXPECT_TRUE(timed) << "no variant took the measured path";
}

// Solves captured into a graph time nothing: auto keeps choosing, the graph's solve is right, and the
// first solve outside the capture times a candidate. New values while choosing reach every candidate.
TEST(Sptrsv, AutoChoosesOutsideStreamCaptures) {
  SPADE_REQUIRE_GPU();
  const SparseMatrix chain = chain_with_long_rows(6000, 300, 8);
  const Triangle first = make_triangle(chain, 61), second = make_triangle(chain, 62);
  const Variant v{SparseFormat::csr, TriangleKind::lower, DiagonalKind::non_unit};
  const DeviceMatrix<double> m1(first, v), m2(second, v);
  cudaStream_t stream = nullptr;
  SPADE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  {
    SptrsvPlan<double> plan(m1.view, {}, stream);
    ASSERT_TRUE(plan.choosing(1)) << "the rule asks for no trials on this triangle";
    const index_t n = first.lower.cols();
    const std::vector<double> b_host = random_rhs(n, 1, 63);
    DeviceVector<double> b(b_host), x(static_cast<std::size_t>(n));
    x.poison();
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    SPADE_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    plan.solve(b.get(), x.get(), stream);
    SPADE_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    SPADE_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    SPADE_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    SPADE_CUDA_CHECK(cudaStreamSynchronize(stream));
    EXPECT_EQ(plan.stats().auto_trials, 0);
    EXPECT_TRUE(plan.choosing(1));
    const std::vector<double> ref = reference_solve(first.lower, false, false, b_host, 1);
    const std::vector<double> got = x.download();
    EXPECT_LE(relative_error(got, ref), tolerance<double>(first)) << "captured solve";
    SPADE_CUDA_CHECK(cudaGraphExecDestroy(exec));
    SPADE_CUDA_CHECK(cudaGraphDestroy(graph));
    // New values while choosing, then the trials: every candidate solves with them.
    plan.update_values(m2.val.get(), stream);
    const int solves = 2 * plan.stats().auto_candidates + 1;
    for (int k = 0; k < solves; ++k) {
      x.poison();
      plan.solve(b.get(), x.get(), stream);
      plan.check(stream);
      const std::vector<double> ref2 = reference_solve(second.lower, false, false, b_host, 1);
      ASSERT_LE(relative_error(x.download(), ref2), tolerance<double>(second)) << "solve " << k;
    }
    EXPECT_GE(plan.stats().auto_trials, 1);
    EXPECT_FALSE(plan.choosing(1));
  }
  SPADE_CUDA_CHECK(cudaStreamDestroy(stream));
}

// The level sets are symbolic: their count and widest level match the host's exactly, from CSR (a pull
// per row, one chunk or several per warp by the size) and from CSC (a push per column), on grids larger
// and smaller than the rows the resident warps hold with one chunk each, long chains, long rows, a dense
// triangle and a diagonal.
TEST(Sptrsv, LevelSetsMatchTheHost) {
  SPADE_REQUIRE_GPU();
  const std::vector<SparseMatrix> patterns = {laplacian_3d(64, 64, 64, Stencil::seven_point),
                                              laplacian_3d(70, 60, 50, Stencil::twenty_seven_point),
                                              laplacian_2d(120, 90, Stencil::nine_point),
                                              chain_with_long_rows(250000, 80, 3),
                                              chain_with_long_rows(5000, 40, 4),
                                              random_chain(3000, 4, 7),
                                              dense_lower(300),
                                              diagonal(1000)};
  SptrsvOptions options;
  options.algorithm = SptrsvAlgorithm::levr;
  for (std::size_t pi = 0; pi < patterns.size(); ++pi) {
    const Triangle t = make_triangle(patterns[pi], 80 + pi);
    const auto [levels, widest] = host_level_sets(t.lower);
    for (SparseFormat f : {SparseFormat::csr, SparseFormat::csc}) {
      const Variant v{f, TriangleKind::lower, DiagonalKind::non_unit};
      const DeviceMatrix<double> m(t, v);
      const SptrsvPlan<double> plan(m.view, options);
      EXPECT_EQ(plan.stats().levels, levels) << "matrix " << pi << describe(options.algorithm, v, 1);
      EXPECT_EQ(plan.stats().max_rows_per_level, widest) << "matrix " << pi << describe(options.algorithm, v, 1);
    }
  }
}

/// level_block's lanes per row as SptrsvStats::level_block_lanes states them, from the host's level sets
/// of L (diagonal stored): 4 entries a lane for the mean over the packed levels of each one's longest row
/// (a chain's: entries in levels before the piece), a level of r rows counting at most 4096 / r entries.
int host_level_block_lanes(const SparseMatrix& L) {
  namespace ks = kernels::sptrsv;
  const index_t n = L.cols();
  const std::vector<index_t> level = host_levels(L);
  std::vector<std::vector<index_t>> column_levels(n);  // each row's off-diagonal entries: their columns' levels
  for (index_t j = 0; j < n; ++j)
    for (offset_t k = L.col_ptr()[j]; k < L.col_ptr()[j + 1]; ++k)
      if (L.row_ind()[k] > j) column_levels[L.row_ind()[k]].push_back(level[j]);
  const index_t count = n == 0 ? 0 : *std::max_element(level.begin(), level.end()) + 1;
  std::vector<long long> rows(count, 0), longest(count, 0);
  for (index_t i = 0; i < n; ++i) {
    ++rows[level[i]];
    longest[level[i]] = std::max<long long>(longest[level[i]], static_cast<long long>(column_levels[i].size()));
  }
  // The packed levels (runs of narrow levels as chain pieces): a level counts its longest row, a chain
  // the most entries a row of the piece has in levels before the piece.
  std::vector<std::int32_t> level_ptr{0};
  std::vector<index_t> level_at;  // the level that starts at each position of level order
  for (index_t l = 0; l < count; ++l) {
    level_at.resize(std::size_t(level_ptr.back()) + 1, l);
    level_ptr.push_back(level_ptr.back() + static_cast<std::int32_t>(rows[l]));
  }
  level_at.resize(std::size_t(level_ptr.back()) + 1, count);
  long long sum = 0, summed = 0;
  for (const ks::PackLevel& p : ks::level_pack_levels(level_ptr)) {
    const index_t l0 = level_at[std::size_t(p.first_row)];
    long long row_max = longest[l0];
    if (p.kind == ks::PackKind::chain) {
      row_max = 0;
      const index_t l1 = level_at[std::size_t(p.first_row + p.rows)];
      for (index_t i = 0; i < n; ++i) {
        if (level[i] < l0 || level[i] >= l1) continue;
        const std::vector<index_t>& c = column_levels[i];
        row_max = std::max<long long>(row_max, std::count_if(c.begin(), c.end(), [&](index_t cl) { return cl < l0; }));
      }
    }
    sum += std::min<long long>(row_max, 4096 / p.rows);
    ++summed;
  }
  const double mean = summed > 0 ? double(sum) / summed : 0.0;
  int lanes = 1;
  while (lanes < 32 && lanes * 4 < mean) lanes *= 2;
  return lanes;
}

/// Rows [0, n) on the diagonal only, rows [n, 2n) each with `wide` entries in the first half: two levels
/// of n rows, the second of long rows (bandwidth-free, so the levels stay that wide).
SparseMatrix two_wide_levels(index_t n, int wide, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::int64_t> rows, cols;
  for (index_t i = 0; i < 2 * n; ++i) {
    rows.push_back(i), cols.push_back(i);
    if (i >= n)
      for (int e = 0; e < wide; ++e)
        rows.push_back(i), cols.push_back(std::uniform_int_distribution<index_t>(0, n - 1)(rng));
  }
  return SparseMatrix::from_triplets(2 * n, 2 * n, rows, cols, std::vector<double>(rows.size(), 1.0));
}

/// A lower band: row i holds columns i - band .. i (one row per level, each `band` long but the first).
SparseMatrix lower_band(index_t n, index_t band) {
  std::vector<std::int64_t> rows, cols;
  for (index_t i = 0; i < n; ++i)
    for (index_t j = std::max<index_t>(0, i - band); j <= i; ++j) rows.push_back(i), cols.push_back(j);
  return SparseMatrix::from_triplets(n, n, rows, cols, std::vector<double>(rows.size(), 1.0));
}

// level_block's lanes per row follow the longest row of each level: few on short rows and on wide levels
// (two levels of 2,000 rows, the second of rows of 100 entries: 1 lane, where the mean longest row would
// ask for 16), a warp where a triangle's rows are long (a dense triangle), 16 on a band of 60.
TEST(Sptrsv, LevelBlockLanesFollowTheLongestRows) {
  SPADE_REQUIRE_GPU();
  const std::vector<SparseMatrix> patterns = {dense_lower(300),
                                              lower_band(2000, 60),
                                              two_wide_levels(2000, 100, 6),
                                              laplacian_2d(120, 90, Stencil::nine_point),
                                              laplacian_3d(40, 40, 40, Stencil::twenty_seven_point),
                                              chain_with_long_rows(5000, 40, 4),
                                              chain_with_long_rows(3000, 200, 5),
                                              random_chain(3000, 4, 7),
                                              diagonal(1000)};
  SptrsvOptions options;
  options.algorithm = SptrsvAlgorithm::level_block;
  std::vector<int> seen;
  for (std::size_t pi = 0; pi < patterns.size(); ++pi) {
    const Triangle t = make_triangle(patterns[pi], 90 + pi);
    const int lanes = host_level_block_lanes(t.lower);
    seen.push_back(lanes);
    for (SparseFormat f : {SparseFormat::csr, SparseFormat::csc}) {
      const Variant v{f, TriangleKind::lower, DiagonalKind::non_unit};
      const DeviceMatrix<double> m(t, v);
      const SptrsvPlan<double> plan(m.view, options);
      EXPECT_EQ(plan.stats().level_block_lanes, lanes) << "matrix " << pi << describe(options.algorithm, v, 1);
    }
  }
  EXPECT_EQ(seen[0], 32);      // the dense triangle: rows of up to 299 entries, one per level
  EXPECT_EQ(seen[1], 16);      // the band
  EXPECT_EQ(seen[2], 1);       // the two wide levels
  EXPECT_EQ(seen.back(), 1);   // the diagonal
}

/// Levels as `segments` say: a positive entry w is one level of w rows (each reads the last row before it
/// and up to `extra` random earlier rows), a negative entry -c a run of c single-row levels (each row reads
/// the row before it and up to `run_extra` random earlier rows, `extra` where negative; repeated columns are
/// summed).
SparseMatrix levels_and_runs(const std::vector<int>& segments, int extra, std::uint64_t seed, int run_extra = -1) {
  std::mt19937_64 rng(seed);
  std::vector<std::int64_t> rows, cols;
  index_t next = 0;
  for (const int seg : segments) {
    const index_t first = next, count = std::abs(seg);
    for (index_t i = first; i < first + count; ++i) {
      rows.push_back(i), cols.push_back(i);
      const index_t dep = seg > 0 ? first - 1 : i - 1;  // the row that sets the level
      if (dep < 0) continue;
      rows.push_back(i), cols.push_back(dep);
      for (int e = 0; e < (seg < 0 && run_extra >= 0 ? run_extra : extra); ++e)
        rows.push_back(i), cols.push_back(std::uniform_int_distribution<index_t>(0, dep)(rng));
    }
    next += count;
  }
  return SparseMatrix::from_triplets(next, next, rows, cols, std::vector<double>(rows.size(), 1.0));
}

// level_block's packed levels (host, no GPU), table-style: every row once, in order, each packed level
// starting on a level set; a chain piece is kChainMinRun or more consecutive level sets of at most
// kChainRows rows in all and no more than one pass of the block (level_block_pass_rows: twice the mean
// width, at most the widest), taken greedily (a level set stays a level where the sets from it on that fit
// a piece are fewer than kChainMinRun or hold more than kChainMaxRowsPerLevel rows a set); where the pieces
// remove fewer than kChainMinSaving of the levels, the levels as they are.
TEST(SptrsvLevelPack, RunsOfNarrowLevelsBecomeChainPieces) {
  namespace ks = kernels::sptrsv;
  struct Case {
    std::vector<int> widths;
    std::vector<std::pair<int, int>> pieces;  // expected (levels, rows) of each chain piece in order
  };
  // A wide level, then a tail of narrow ones (the shape of tomography's levels): one pass takes 32 rows.
  const std::vector<int> tail = {354, 24, 1, 1, 2, 1, 3, 2, 2, 3, 4, 4, 2, 1, 1, 1, 3, 3, 3, 1, 2, 2, 1};
  std::vector<int> split(30, 2);  // runs of narrow levels between sets wider than a piece: passes of 10
  split.insert(split.begin() + 10, 40);
  split.insert(split.begin() + 20, 40);
  std::vector<int> factor(100, 1);  // a wide level and a chain: passes of 4 rows
  factor.front() = 100;
  std::vector<std::pair<int, int>> fours(24, {4, 4});
  fours.emplace_back(3, 3);
  const std::vector<Case> cases = {
      {{}, {}},
      {{1}, {}},
      {{5}, {}},
      {{1, 1, 1}, {}},         // a pass of one row: no piece
      {{40, 1, 1, 1}, {{3, 3}}},
      {{3, 1, 1, 1, 2}, {{3, 3}}},    // passes of 3 rows
      {{60, 30, 1, 1, 1}, {{3, 3}}},   // 30, 1, 1 would hold more than kChainMaxRowsPerLevel a set
      {{60, 5, 5, 5, 5, 5, 5}, {}},    // sets of 5 rows
      {{16, 16, 1}, {}},               // two sets fill a pass: fewer than kChainMinRun
      {std::vector<int>(40, 2), {}},   // passes of 2 rows
      {{9, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3}, {}},  // passes of 8
      {{40, 40, 40, 1, 1, 1, 40, 40, 40, 40, 40, 40, 40, 40, 40, 40, 40, 40, 40, 40, 40, 40}, {}},  // 2 of 22 saved
      {tail, {{15, 31}, {6, 12}}},
      {split, {{5, 10}, {5, 10}, {5, 10}, {4, 8}, {5, 10}, {5, 10}}},
      {factor, fours}};
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::PrintToString(c.widths));
    std::vector<std::int32_t> level_ptr{0};
    for (int w : c.widths) level_ptr.push_back(level_ptr.back() + w);
    const std::vector<ks::PackLevel> pack =
        ks::level_pack_levels(c.widths.empty() ? std::vector<std::int32_t>{} : level_ptr);
    std::vector<std::pair<int, int>> pieces;
    std::size_t l = 0;  // the level set where the next packed level starts
    for (std::size_t m = 0; m < pack.size(); ++m) {
      const ks::PackLevel& p = pack[m];
      ASSERT_LT(l, c.widths.size()) << "packed level " << m;
      ASSERT_EQ(p.first_row, level_ptr[l]) << "packed level " << m;
      if (p.kind == ks::PackKind::level) {
        EXPECT_EQ(p.rows, c.widths[l]);
        ++l;
        continue;
      }
      ASSERT_EQ(p.kind, ks::PackKind::chain) << "packed level " << m;
      std::size_t e = l;
      while (e < c.widths.size() && level_ptr[e + 1] - p.first_row <= p.rows) ++e;
      ASSERT_EQ(level_ptr[e], p.first_row + p.rows) << "a piece ends inside a level set";
      EXPECT_LE(p.rows, ks::kChainRows);
      EXPECT_LE(p.rows, ks::level_block_pass_rows(level_ptr.back(), static_cast<long long>(c.widths.size()),
                                                  *std::max_element(c.widths.begin(), c.widths.end())));
      EXPECT_GE(e - l, std::size_t(ks::kChainMinRun));
      EXPECT_LE(p.rows, static_cast<long long>(ks::kChainMaxRowsPerLevel) * static_cast<long long>(e - l));
      pieces.emplace_back(static_cast<int>(e - l), p.rows);
      l = e;
    }
    EXPECT_EQ(l, c.widths.size());
    EXPECT_EQ(pieces, c.pieces);
  }
}

// level_block on runs of narrow levels between wide levels (the shape of a Cholesky factor's dense blocks
// beside its sparse part, and of tomography's tail), which it solves as chain pieces: a run of single-row
// levels at the start and at the end, runs of 2 and of 1, a run of rows longer than a warp, a run longer
// than the solution ring (its rows read rows that left the ring), runs whose rows read most rows of their
// piece and many before it, pieces too large to stage whose rows read rows that left the ring (20,000 rows
// before them), runs of levels of 2-5 rows (pieces with rows side by side) with short and with long rows,
// n = 1; double and single precision, lower and upper, 1, 3 and 8 right-hand sides, 20 solves on a plan,
// new values.
TEST(Sptrsv, LevelBlockRunsOfNarrowLevels) {
  SPADE_REQUIRE_GPU();
  std::vector<int> far_runs(100, 200);
  far_runs.insert(far_runs.end(), {-64, -40});
  const std::vector<SparseMatrix> patterns = {
      levels_and_runs({-5, 400, -2, 300, -1, 200, 1, 250, -700, 33, -3}, 3, 21),
      levels_and_runs({500, -300, 64, -40}, 60, 22),
      levels_and_runs({300, 2, 3, 1, 4, 2, 2, 5, 1, 3, 2, 2, 40, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
                       -5, 3, 3, 31, 1, 1},
                      4, 27),
      levels_and_runs({354, 24, 1, 1, 2, 1, 3, 2, 2, 3, 4, 4, 2, 1, 1, 1, 3, 3, 3, 1, 2, 2, 1, 2, 3, 4, 1, 1},
                      150, 28),
      levels_and_runs({-2, 200, -40000, 7}, 2, 23),
      levels_and_runs({-1}, 0, 24),
      levels_and_runs({300, -33, 100, -64, 5, -3, -97}, 200, 25),
      levels_and_runs(far_runs, 2, 26, 100)};
  for (std::size_t pi = 0; pi < patterns.size(); ++pi) {
    SCOPED_TRACE("pattern " + std::to_string(pi));
    const Triangle t = make_triangle(patterns[pi], 60 + pi);
    for (int nrhs : {1, 3, 8}) {
      const int repeats = nrhs == 1 ? 20 : 1;
      check_algorithm<double>(t, SptrsvAlgorithm::level_block,
                              {SparseFormat::csr, TriangleKind::lower, DiagonalKind::non_unit}, nrhs, repeats);
      check_algorithm<float>(t, SptrsvAlgorithm::level_block,
                             {SparseFormat::csc, TriangleKind::upper, DiagonalKind::unit}, nrhs);
      if (HasFatalFailure()) return;
    }
    // New values for the chains' dense solves and sums.
    const Triangle second = make_triangle(patterns[pi], 80 + pi);
    const Variant v{SparseFormat::csr, TriangleKind::lower, DiagonalKind::non_unit};
    const DeviceMatrix<double> m1(t, v), m2(second, v);
    SptrsvOptions options;
    options.algorithm = SptrsvAlgorithm::level_block;
    SptrsvPlan<double> plan(m1.view, options);
    plan.update_values(m2.val.get());
    check_solves(plan, second, v, 1, 2, "level_block after update_values");
  }
}

// A 7-point grid of about 1,200 rows per level (178 levels): auto's choice is one the rule allows, its
// solves right for 1, 8, 9 and 16 right-hand sides.
TEST(Sptrsv, AutoOnWideLevels) {
  SPADE_REQUIRE_GPU();
  const Triangle t = make_triangle(laplacian_3d(60, 60, 60, Stencil::seven_point), 44);
  for (const Variant& v : {Variant{SparseFormat::csr, TriangleKind::lower, DiagonalKind::non_unit},
                           Variant{SparseFormat::csc, TriangleKind::upper, DiagonalKind::unit}}) {
    const DeviceMatrix<double> m(t, v);
    SptrsvPlan<double> plan(m.view);
    expect_rule_choice(plan, describe(SptrsvAlgorithm::automatic, v, 1));
    for (int nrhs : {1, 8, 9, 16}) check_solves(plan, t, v, nrhs, 2, describe(plan.algorithm(nrhs), v, nrhs));
  }
}

/// nlev levels of `width` rows: row q of level l reads rows q and q + 1 (mod width) of level l - 1 and,
/// when `far`, one random row of the levels below that and from level `back` on row 7q (mod width) of level
/// l - back.
SparseMatrix far_reading_levels(index_t width, int nlev, int back, bool far, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::int64_t> rows, cols;
  for (int l = 0; l < nlev; ++l)
    for (index_t q = 0; q < width; ++q) {
      const std::int64_t r = std::int64_t(l) * width + q;
      rows.push_back(r), cols.push_back(r);
      if (l == 0) continue;
      const std::int64_t below = std::int64_t(l - 1) * width;
      rows.push_back(r), cols.push_back(below + q);
      rows.push_back(r), cols.push_back(below + (q + 1) % width);
      if (!far) continue;
      if (l >= 2) rows.push_back(r), cols.push_back(std::uniform_int_distribution<std::int64_t>(0, below - 1)(rng));
      if (l >= back) rows.push_back(r), cols.push_back(std::int64_t(l - back) * width + (7 * q) % width);
    }
  return SparseMatrix::from_triplets(width * nlev, width * nlev, rows, cols, std::vector<double>(rows.size(), 1.0));
}

// 40 levels of 2,000 rows, rows reading the level below and (far) 20 levels back: auto's choice is one the
// rule allows, its solves right in every orientation and format, 1, 8, 9 and 16 right-hand sides.
TEST(Sptrsv, AutoOnFewWideLevels) {
  SPADE_REQUIRE_GPU();
  for (bool far : {true, false}) {
    SCOPED_TRACE(far ? "reading far back" : "reading the level below");
    const Triangle t = make_triangle(far_reading_levels(2000, 40, 20, far, 9), 45);
    for (const Variant& v : all_variants()) {
      const DeviceMatrix<double> m(t, v);
      SptrsvPlan<double> plan(m.view);
      expect_rule_choice(plan, describe(SptrsvAlgorithm::automatic, v, 1));
      for (int nrhs : {1, 8, 9, 16}) check_solves(plan, t, v, nrhs, 2, describe(plan.algorithm(nrhs), v, nrhs));
      if (HasFatalFailure()) return;
    }
  }
}

/// nlev levels of `width` rows (level `wide_level`, where given: `wide_width` rows): row q of level l reads
/// rows q .. q + reads - 1 (modulo its width) of level l - 1.
SparseMatrix banded_levels(index_t width, int nlev, int reads, int wide_level = -1, index_t wide_width = 0) {
  std::vector<std::int64_t> rows, cols;
  std::int64_t below = 0, start = 0;  // the first rows of levels l - 1 and l
  index_t below_width = 0;
  for (int l = 0; l < nlev; ++l) {
    const index_t w = l == wide_level ? wide_width : width;
    for (index_t q = 0; q < w; ++q) {
      const std::int64_t r = start + q;
      rows.push_back(r), cols.push_back(r);
      if (l > 0)
        for (int k = 0; k < reads; ++k) rows.push_back(r), cols.push_back(below + (q + k) % below_width);
    }
    below = start, below_width = w, start += w;
  }
  return SparseMatrix::from_triplets(start, start, rows, cols, std::vector<double>(rows.size(), 1.0));
}

// 12 levels of 3,000 rows, and 40 levels of 3,000 rows of 3 entries below the diagonal; and 40 levels of
// 1,000 rows but one of 9,000 (where a 16th of the widest level takes two passes of a cluster block, so
// the rule never gives one right-hand side to cluster). auto's choice is one the rule allows, its solves
// right in every orientation and format, 1, 8 and 9 right-hand sides.
TEST(Sptrsv, AutoOnBandedLevels) {
  SPADE_REQUIRE_GPU();
  const std::vector<SparseMatrix> patterns = {banded_levels(3000, 12, 2), banded_levels(3000, 40, 3),
                                              banded_levels(1000, 40, 3, 20, 9000)};
  for (std::size_t pi = 0; pi < patterns.size(); ++pi) {
    SCOPED_TRACE("pattern " + std::to_string(pi));
    const Triangle t = make_triangle(patterns[pi], 47 + pi);
    for (const Variant& v : all_variants()) {
      const DeviceMatrix<double> m(t, v);
      SptrsvPlan<double> plan(m.view);
      expect_rule_choice(plan, describe(SptrsvAlgorithm::automatic, v, 1));
      if (pi == 2) EXPECT_NE(plan.algorithm(), SptrsvAlgorithm::cluster);
      for (int nrhs : {1, 8, 9}) check_solves(plan, t, v, nrhs, 1, describe(plan.algorithm(nrhs), v, nrhs));
      if (HasFatalFailure()) return;
    }
  }
}

/// Three levels: `width` rows with no entry below the diagonal, then `width` rows reading 4 random rows of
/// level 0, then `width` rows reading 3 random rows of the levels below; every 50th row of the last two
/// levels reads 40-199 more (so rows of up to and beyond kLevrPiece = 64 entries), and the last row of each
/// reads every row of level 0 (`width` entries: many pieces).
SparseMatrix long_row_levels(index_t width, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::int64_t> rows, cols;
  for (int l = 0; l < 3; ++l)
    for (index_t q = 0; q < width; ++q) {
      const std::int64_t r = std::int64_t(l) * width + q;
      rows.push_back(r), cols.push_back(r);
      if (l == 0) continue;
      const std::int64_t below = std::int64_t(l) * width;
      auto read = [&](std::int64_t c) { rows.push_back(r), cols.push_back(c); };
      read(std::int64_t(l - 1) * width + q);  // the level below
      for (int k = 0; k < 3; ++k) read(std::uniform_int_distribution<std::int64_t>(0, below - 1)(rng));
      if (q % 50 == 7)
        for (int k = 0, more = 40 + q % 160; k < more; ++k)
          read(std::uniform_int_distribution<std::int64_t>(0, below - 1)(rng));
      if (q == width - 1)
        for (index_t c = 0; c < width; ++c) read(c);
    }
  return SparseMatrix::from_triplets(3 * width, 3 * width, rows, cols, std::vector<double>(rows.size(), 1.0));
}

// levr splits rows of more than 64 entries into pieces solved by several warps, the last piece to
// finish solving the row: 3 levels (auto runs levr too), rows of up to 6,000 entries, every orientation
// and format, 1, 8 and 9 right-hand sides, 20 solves in a row on each plan (a piece's sums and count are
// set back to zero for the next solve).
TEST(Sptrsv, LevrSplitsLongRows) {
  SPADE_REQUIRE_GPU();
  const Triangle t = make_triangle(long_row_levels(6000, 19), 49);
  ASSERT_GT(t.max_row, 5000);
  for (SptrsvAlgorithm a : {SptrsvAlgorithm::levr, SptrsvAlgorithm::automatic})
    for (const Variant& v : all_variants()) {
      const DeviceMatrix<double> m(t, v);
      SptrsvOptions options;
      options.algorithm = a;
      SptrsvPlan<double> plan(m.view, options);
      if (a == SptrsvAlgorithm::automatic) {
        expect_rule_choice(plan, describe(a, v, 1));
      } else {
        ASSERT_EQ(plan.algorithm(), SptrsvAlgorithm::levr) << describe(a, v, 1);
        ASSERT_EQ(plan.algorithm(8), SptrsvAlgorithm::levr) << describe(a, v, 8);
      }
      for (int nrhs : {1, 8, 9}) check_solves(plan, t, v, nrhs, 20, describe(a, v, nrhs));
      if (HasFatalFailure()) return;
    }
}

// levr replays a CUDA graph recorded at its first solve of each width: later solves with other buffers,
// counts and leading dimensions, on a stream of the caller's and on the legacy default stream, store them
// where the graph's kernels read them before the replay; a solve on a stream the caller is capturing
// launches the levels into the caller's graph instead. Short rows in the caller's order and on auto's
// level-ordered part (auto on 160 far-reading levels of 500 rows), where x is copied out after the last level; longer rows and
// rows split into pieces, where the levels store x.
TEST(Sptrsv, LevrGraphFollowsEachSolvesBuffers) {
  SPADE_REQUIRE_GPU();
  const char* names[] = {"short rows, caller's order", "short rows, level-ordered part", "longer rows",
                         "rows in pieces"};
  for (int kind = 0; kind < 4; ++kind) {
    SCOPED_TRACE(names[kind]);
    const SparseMatrix pattern = kind == 0   ? far_reading_levels(2000, 40, 20, false, 17)
                                 : kind == 1 ? far_reading_levels(500, 160, 20, true, 17)
                                 : kind == 2 ? banded_levels(2000, 40, 6)
                                             : long_row_levels(3000, 21);
    const Triangle t = make_triangle(pattern, 46);
    const index_t n = t.lower.cols();
    const Variant v{SparseFormat::csr, TriangleKind::upper, DiagonalKind::non_unit};
    const DeviceMatrix<double> m(t, v);
    SptrsvOptions options;
    options.algorithm = kind == 1 ? SptrsvAlgorithm::automatic : SptrsvAlgorithm::levr;
    SptrsvPlan<double> plan(m.view, options);
    // auto (kind 1): cluster predicted, its layout unfit (rows read 20 levels back), levr on the part
    // renumbered for it; whatever auto runs, its solves are checked.
    if (kind != 1) ASSERT_EQ(plan.algorithm(8), SptrsvAlgorithm::levr);
    cudaStream_t stream = nullptr;
    SPADE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    int call = 0;
    for (int nrhs : {1, 8, 1, 3, 8, 11, 1}) {
      for (bool captured : {false, true}) {
        if (captured && plan.algorithm(nrhs) != SptrsvAlgorithm::levr) continue;
        const index_t ld = n + 3 * call;
        std::vector<double> b_host(std::size_t(ld) * nrhs, 0.0), b_packed = random_rhs(n, nrhs, 77 + call);
        for (int r = 0; r < nrhs; ++r)
          std::copy_n(b_packed.begin() + std::size_t(r) * n, n, b_host.begin() + std::size_t(r) * ld);
        DeviceVector<double> b(b_host), x(std::size_t(ld) * nrhs);
        x.poison();
        const cudaStream_t s = call % 2 == 0 ? stream : nullptr;
        if (captured) {
          cudaGraph_t graph = nullptr;
          cudaGraphExec_t exec = nullptr;
          SPADE_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
          plan.solve(b.get(), ld, x.get(), ld, nrhs, stream);
          SPADE_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
          SPADE_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
          SPADE_CUDA_CHECK(cudaGraphLaunch(exec, stream));
          SPADE_CUDA_CHECK(cudaStreamSynchronize(stream));
          cudaGraphExecDestroy(exec);
          cudaGraphDestroy(graph);
        } else {
          plan.solve(b.get(), ld, x.get(), ld, nrhs, s);
        }
        plan.check(s);
        const std::vector<double> x_host = x.download(), ref = reference_solve(t.lower, true, false, b_packed, nrhs);
        std::vector<double> x_packed(std::size_t(n) * nrhs);
        for (int r = 0; r < nrhs; ++r)
          std::copy_n(x_host.begin() + std::size_t(r) * ld, n, x_packed.begin() + std::size_t(r) * n);
        EXPECT_LE(relative_error(x_packed, ref), tolerance<double>(t))
            << "nrhs " << nrhs << (captured ? ", captured" : "") << ", call " << call;
        ++call;
      }
    }
    SPADE_CUDA_CHECK(cudaStreamDestroy(stream));
  }
}

// levr's solves with other buffers, queued behind each other on one stream with no wait between them:
// the first pair of buffers replays the first graph, the others the second, and each replay of it reads
// the right-hand side stored for it (the store is ordered after the replays before it, which read the one
// it overwrites). 40 levels, 1 and 8 right-hand sides, six pairs of buffers, three rounds.
TEST(Sptrsv, LevrGraphQueuedSolvesKeepTheirBuffers) {
  SPADE_REQUIRE_GPU();
  const Triangle t = make_triangle(banded_levels(2000, 40, 6), 51);
  const index_t n = t.lower.cols();
  const Variant v{SparseFormat::csr, TriangleKind::lower, DiagonalKind::non_unit};
  const DeviceMatrix<double> m(t, v);
  SptrsvOptions options;
  options.algorithm = SptrsvAlgorithm::levr;
  SptrsvPlan<double> plan(m.view, options);
  cudaStream_t stream = nullptr;
  SPADE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  constexpr int kBuffers = 6;
  for (int nrhs : {1, 8}) {
    std::vector<std::vector<double>> ref;
    std::vector<std::unique_ptr<DeviceVector<double>>> b, x;
    for (int k = 0; k < kBuffers; ++k) {
      const std::vector<double> b_host = random_rhs(n, nrhs, 300 + 10 * nrhs + k);
      ref.push_back(reference_solve(t.lower, false, false, b_host, nrhs));
      b.push_back(std::make_unique<DeviceVector<double>>(b_host));
      x.push_back(std::make_unique<DeviceVector<double>>(std::size_t(n) * nrhs));
    }
    for (int round = 0; round < 3; ++round) {
      for (int k = 0; k < kBuffers; ++k) x[k]->poison();
      for (int k = 0; k < kBuffers; ++k) plan.solve(b[k]->get(), n, x[k]->get(), n, nrhs, stream);
      plan.check(stream);
      for (int k = 0; k < kBuffers; ++k)
        EXPECT_LE(relative_error(x[k]->download(), ref[k]), tolerance<double>(t))
            << "nrhs " << nrhs << ", round " << round << ", buffers " << k;
    }
  }
  SPADE_CUDA_CHECK(cudaStreamDestroy(stream));
}

TEST(SptrsvErrors, ZeroDiagonalNamesTheRow) {
  SPADE_REQUIRE_GPU();
  Triangle t = make_triangle(laplacian_2d(10, 10), 50);
  // Row 37 of L: its diagonal is the first entry of column 37.
  t.lower.values()[t.lower.col_ptr()[37]] = 0.0;
  t.lower_t = t.lower.transpose();
  for (const Variant& v : all_variants()) {
    const DeviceMatrix<double> m(t, v);
    if (v.diagonal == DiagonalKind::unit) {
      EXPECT_NO_THROW(SptrsvPlan<double>{m.view});
      continue;
    }
    try {
      SptrsvPlan<double> plan(m.view);
      ADD_FAILURE() << "no error for a zero diagonal";
    } catch (const NumericalError& e) {
      EXPECT_EQ(e.kind(), NumericalError::Kind::singular);
      EXPECT_EQ(e.index(), 37);
    }
  }
}

TEST(SptrsvErrors, MissingDiagonalIsSingularUnlessUnit) {
  SPADE_REQUIRE_GPU();
  const Triangle t = make_triangle(laplacian_2d(8, 8), 51, false);
  const DeviceMatrix<double> m(t, {SparseFormat::csr, TriangleKind::lower, DiagonalKind::non_unit});
  try {
    SptrsvPlan<double> plan(m.view);
    ADD_FAILURE() << "no error for a missing diagonal";
  } catch (const NumericalError& e) {
    EXPECT_EQ(e.kind(), NumericalError::Kind::singular);
    EXPECT_EQ(e.index(), 0);
  }
}

TEST(SptrsvErrors, UpdateValuesWithZeroDiagonal) {
  SPADE_REQUIRE_GPU();
  const Triangle t = make_triangle(laplacian_2d(8, 8), 52);
  const Variant v{SparseFormat::csc, TriangleKind::upper, DiagonalKind::non_unit};
  const DeviceMatrix<double> m(t, v);
  std::vector<double> vals = DeviceMatrix<double>::source(t, v).values();
  // CSC of U = L^T: the diagonal is the last entry of each column; zero that of column 5.
  vals[DeviceMatrix<double>::source(t, v).col_ptr()[6] - 1] = 0.0;
  DeviceVector<double> d_vals(vals);
  // Every algorithm: fused_level keeps the diagonal in level order and must still name the caller's row.
  for (SptrsvAlgorithm a : kAlgorithms) {
    SptrsvOptions options;
    options.algorithm = a;
    SptrsvPlan<double> plan(m.view, options);
    try {
      plan.update_values(d_vals.get());
      ADD_FAILURE() << to_string(a) << ": no error for a zero diagonal";
    } catch (const NumericalError& e) {
      EXPECT_EQ(e.index(), 5) << to_string(a);
    }
  }
}

// A spin-wait that can never finish is reported, within milliseconds, and the plan solves correctly
// afterwards. The test hook starts the work tickets at 1 (as DenseTrsv.SpinWaitTimeoutIsReported does for
// the dense workspace): the first thread block's unknowns are never solved, so their dependents on the
// long chain wait until the spin limit.
TEST(SptrsvErrors, SpinWaitTimeoutIsReported) {
  SPADE_REQUIRE_GPU();
  const Triangle t = make_triangle(random_chain(2000, 2, 55), 56);
  const Variant v{SparseFormat::csr, TriangleKind::lower, DiagonalKind::non_unit};
  const DeviceMatrix<double> m(t, v);
  const index_t n = t.lower.cols();
  for (SptrsvAlgorithm a : {SptrsvAlgorithm::slfr, SptrsvAlgorithm::slfc, SptrsvAlgorithm::syncfree,
                            SptrsvAlgorithm::thread, SptrsvAlgorithm::fused, SptrsvAlgorithm::fused_level})
    for (int nrhs : {1, 8}) {
      SptrsvOptions options;
      options.algorithm = a;
      SptrsvPlan<double> plan(m.view, options);
      EXPECT_THROW(plan.set_spin_limit(-1), InvalidInput);
      plan.set_spin_limit(1 << 14);
      DeviceVector<double> b(random_rhs(n, nrhs, 57)), x(std::size_t(n) * nrhs);
      const int first_ticket = 1;
      SPADE_CUDA_CHECK(
          cudaMemcpy(plan.device_tickets_for_testing(), &first_ticket, sizeof(int), cudaMemcpyHostToDevice));
      const auto start = std::chrono::steady_clock::now();
      plan.solve(b.get(), n, x.get(), n, nrhs);
      try {
        plan.check();
        ADD_FAILURE() << describe(a, v, nrhs) << ": timeout not reported";
      } catch (const NumericalError& e) {
        EXPECT_EQ(e.kind(), NumericalError::Kind::no_progress) << describe(a, v, nrhs);
        EXPECT_GE(e.index(), 0);
        EXPECT_LT(e.index(), n);
      }
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      EXPECT_LT(ms, 1000.0) << describe(a, v, nrhs) << ": the timeout took " << ms << " ms";
      // The limit survives check()'s reset: a second stall gives up as soon (the default limit would wait
      // seconds).
      SPADE_CUDA_CHECK(
          cudaMemcpy(plan.device_tickets_for_testing(), &first_ticket, sizeof(int), cudaMemcpyHostToDevice));
      const auto again = std::chrono::steady_clock::now();
      plan.solve(b.get(), n, x.get(), n, nrhs);
      EXPECT_THROW(plan.check(), NumericalError) << describe(a, v, nrhs) << ": second timeout not reported";
      const double ms_again =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - again).count();
      EXPECT_LT(ms_again, 1000.0) << describe(a, v, nrhs) << ": the second timeout took " << ms_again << " ms";
      // The plan is valid again, at the default limit: legitimate waits of an instrumented run (memcheck)
      // can outlast 1 << 14 polls.
      plan.set_spin_limit(0);
      check_solves(plan, t, v, nrhs, 2, describe(a, v, nrhs) + " after a timeout");
      if (HasFatalFailure()) return;
    }
}

// A candidate of auto's trials that gave up waiting is reported by check() after it lost and its memory
// went back: the test hook stalls the timed solve of the second candidate (fused_level or thread, which
// take work tickets; each candidate runs an untimed solve, then a timed one), which then waits out 2^20
// polls, far longer than a solve, so another candidate wins; check() reports it once, and the plan solves
// correctly afterwards.
TEST(SptrsvErrors, AutoReportsALosingCandidateThatGaveUp) {
  SPADE_REQUIRE_GPU();
  const Triangle t = make_triangle(chain_with_long_rows(6000, 300, 9), 64);
  const Variant v{SparseFormat::csr, TriangleKind::lower, DiagonalKind::non_unit};
  const DeviceMatrix<double> m(t, v);
  const index_t n = t.lower.cols();
  SptrsvPlan<double> plan(m.view);
  ASSERT_TRUE(plan.choosing(1)) << "the rule asks for no trials on this triangle";
  ASSERT_GE(plan.stats().auto_candidates, 2);
  plan.set_spin_limit(1 << 20);
  DeviceVector<double> b(random_rhs(n, 1, 65)), x(static_cast<std::size_t>(n));
  for (int k = 0; k < 2 * plan.stats().auto_candidates + 1 && plan.choosing(1); ++k) {
    if (k == 3) {
      const int first_ticket = 1;
      SPADE_CUDA_CHECK(
          cudaMemcpy(plan.device_tickets_for_testing(), &first_ticket, sizeof(int), cudaMemcpyHostToDevice));
    }
    plan.solve(b.get(), x.get());
    SPADE_CUDA_CHECK(cudaDeviceSynchronize());
  }
  EXPECT_FALSE(plan.choosing(1));
  try {
    plan.check();
    ADD_FAILURE() << "the stalled candidate was not reported";
  } catch (const NumericalError& e) {
    EXPECT_EQ(e.kind(), NumericalError::Kind::no_progress);
    EXPECT_GE(e.index(), 0);
    EXPECT_LT(e.index(), n);
    const std::string what = e.what();
    EXPECT_TRUE(what.find("(fused_level)") != std::string::npos || what.find("(thread)") != std::string::npos) << what;
    EXPECT_EQ(what.find(std::string("(") + to_string(plan.algorithm(1)) + ")"), std::string::npos)
        << "the stalled candidate won: " << what;
  }
  EXPECT_NO_THROW(plan.check()) << "reported twice";
  plan.set_spin_limit(0);
  check_solves(plan, t, v, 1, 2, "after the stalled candidate lost");
}

TEST(SptrsvErrors, EntryOutsideTheTriangle) {
  SPADE_REQUIRE_GPU();
  const Triangle t = make_triangle(laplacian_2d(6, 6), 53);
  // L's CSC arrays read as an upper CSC triangle: every off-diagonal entry is below the diagonal.
  const DeviceMatrix<double> m(t, {SparseFormat::csc, TriangleKind::lower, DiagonalKind::non_unit});
  DeviceTriangle<double> wrong = m.view;
  wrong.triangle = TriangleKind::upper;
  EXPECT_THROW(SptrsvPlan<double>{wrong}, InvalidInput);
}

// Every algorithm: the CSR level analysis runs before the host has checked the input and must do nothing
// with a bad one (no hang, no out-of-range read), the error coming with the level count.
TEST(SptrsvErrors, UnsortedOrOutOfRangeIndices) {
  SPADE_REQUIRE_GPU();
  // 3x3 lower CSR: row 2 lists columns 1, 0 (unsorted), then a copy with column 7.
  DeviceVector<std::int32_t> ptr(std::vector<std::int32_t>{0, 1, 2, 5});
  DeviceVector<index_t> unsorted(std::vector<index_t>{0, 1, 1, 0, 2}), out_of_range(std::vector<index_t>{0, 1, 0, 7, 2});
  DeviceVector<double> val(std::vector<double>{1, 1, 0.1, 0.1, 1});
  for (SptrsvAlgorithm algorithm : kAlgorithms) {
    SCOPED_TRACE(to_string(algorithm));
    SptrsvOptions options;
    options.algorithm = algorithm;
    DeviceTriangle<double> a{3, 5, ptr.get(), unsorted.get(), val.get()};
    EXPECT_THROW((SptrsvPlan<double>{a, options}), InvalidInput);
    a.ind = out_of_range.get();
    EXPECT_THROW((SptrsvPlan<double>{a, options}), InvalidInput);
  }
}

// The analysis sweeps rows of more than 32 entries with a whole warp: problems there are found and
// name their row too. A 50 x 50 dense lower CSR triangle; row 45 (46 entries) is broken past entry 32.
TEST(SptrsvErrors, ProblemsInLongRowsNameTheRow) {
  SPADE_REQUIRE_GPU();
  const index_t n = 50, bad_row = 45;
  std::vector<std::int32_t> ptr{0};
  std::vector<index_t> ind;
  for (index_t i = 0; i < n; ++i) {
    for (index_t j = 0; j <= i; ++j) ind.push_back(j);
    ptr.push_back(std::int32_t(ind.size()));
  }
  const std::vector<double> values(ind.size(), 1.0);
  DeviceVector<std::int32_t> d_ptr(ptr);
  DeviceVector<double> d_val(values);
  const std::int32_t at = ptr[bad_row] + 40;  // column 40 of row 45
  auto expect_named = [&](std::vector<index_t> broken, const char* what) {
    DeviceVector<index_t> d_ind(broken);
    const DeviceTriangle<double> a{n, std::int32_t(ind.size()), d_ptr.get(), d_ind.get(), d_val.get()};
    for (SptrsvAlgorithm algorithm : kAlgorithms) {
      SptrsvOptions options;
      options.algorithm = algorithm;
      try {
        SptrsvPlan<double> plan(a, options);
        ADD_FAILURE() << what << ", " << to_string(algorithm) << ": no error";
      } catch (const InvalidInput& e) {
        EXPECT_NE(std::string(e.what()).find("row 45 "), std::string::npos)
            << what << ", " << to_string(algorithm) << ": " << e.what();
      }
    }
  };
  std::vector<index_t> broken = ind;
  std::swap(broken[at], broken[at + 1]);
  expect_named(broken, "unsorted");
  broken = ind;
  broken[ptr[bad_row + 1] - 1] = bad_row + 2;  // still increasing, but above the diagonal
  expect_named(broken, "outside the triangle");
  broken = ind;
  broken[ptr[bad_row + 1] - 1] = n + 7;
  expect_named(broken, "out of range");
}

TEST(SptrsvErrors, BadArguments) {
  SPADE_REQUIRE_GPU();
  const Triangle t = make_triangle(laplacian_2d(6, 6), 54);
  const DeviceMatrix<double> m(t, {SparseFormat::csr, TriangleKind::lower, DiagonalKind::non_unit});
  DeviceTriangle<double> bad = m.view;
  bad.ptr = nullptr;
  EXPECT_THROW(SptrsvPlan<double>{bad}, InvalidInput);
  bad = m.view;
  bad.n = -1;
  EXPECT_THROW(SptrsvPlan<double>{bad}, InvalidInput);
  bad = m.view;
  bad.nnz -= 1;  // ptr[n] no longer matches
  EXPECT_THROW(SptrsvPlan<double>{bad}, InvalidInput);
  bad = m.view;
  bad.n = INT_MAX;  // n + 1 row pointers do not fit 32-bit indices: refused before anything is read
  EXPECT_THROW(SptrsvPlan<double>{bad}, ResourceError);
  SptrsvPlan<double> plan(m.view);
  DeviceVector<double> b(36), x(36);
  EXPECT_THROW(plan.solve(b.get(), 36, x.get(), 36, 0), InvalidInput);
  EXPECT_THROW(plan.solve(b.get(), 35, x.get(), 36, 1), InvalidInput);
  EXPECT_THROW(plan.solve(nullptr, 36, x.get(), 36, 1), InvalidInput);
}

}  // namespace
}  // namespace spade
