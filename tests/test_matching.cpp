// Tests of the maximum-product matching with scaling (ordering/matching.cpp): golden small cases, the
// result's properties on random matrices larger than a warp, optimality against all permutations for
// n <= 7, structurally singular matrices (the named row or column is checked to be unmatchable by an
// independent maximum matching), bad input, and every real unsymmetric or symmetric indefinite matrix of
// ../shared/matrices.
//
// The properties are an optimality certificate (linear programming duality, Duff and Koster 2001, sec. 5):
// if |Dr A Dc| <= 1 everywhere and = 1 on the matching, then for every perfect matching s,
// prod_j |a(s(j), j)| = prod_j |(Dr A Dc)(s(j), j)| / (prod Dr * prod Dc) <= 1 / (prod Dr * prod Dc), which
// our matching attains.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "error_of.hpp"
#include "spade/error.hpp"
#include "spade/matching.hpp"
#include "spade/matrix_market.hpp"
#include "test_matrices.hpp"

namespace spade {
namespace {

using spade::testing::error_of;

/// A dense n x n matrix (column-major, 0 = no entry) as a SparseMatrix of its nonzeros.
SparseMatrix from_dense(index_t n, const std::vector<double>& a) {
  std::vector<std::int64_t> rows, cols;
  std::vector<double> values;
  for (index_t j = 0; j < n; ++j)
    for (index_t i = 0; i < n; ++i)
      if (a[i + static_cast<std::size_t>(j) * n] != 0) {
        rows.push_back(i);
        cols.push_back(j);
        values.push_back(a[i + static_cast<std::size_t>(j) * n]);
      }
  return SparseMatrix::from_triplets(n, n, rows, cols, values);
}

/// A(i, j) as stored, or 0.
double entry(const SparseMatrix& A, index_t i, index_t j) {
  const auto begin = A.row_ind().begin() + A.col_ptr()[j], end = A.row_ind().begin() + A.col_ptr()[j + 1];
  const auto it = std::lower_bound(begin, end, i);
  return it != end && *it == i ? A.values()[it - A.row_ind().begin()] : 0.0;
}

/// Size of a maximum matching on the nonzero entries of A, ignoring column `skip` (-1: none), by simple
/// augmenting depth-first searches (Kuhn's method; independent of the code under test).
index_t structural_rank(const SparseMatrix& A, index_t skip = -1) {
  const index_t n = A.cols();
  std::vector<index_t> col_of_row(static_cast<std::size_t>(A.rows()), -1);
  std::vector<index_t> visited(static_cast<std::size_t>(A.rows()), -1);
  std::function<bool(index_t, index_t)> augment = [&](index_t j, index_t stamp) {
    for (offset_t p = A.col_ptr()[j]; p < A.col_ptr()[j + 1]; ++p) {
      const index_t i = A.row_ind()[p];
      if (A.values()[p] == 0 || visited[i] == stamp) continue;
      visited[i] = stamp;
      if (col_of_row[i] == -1 || augment(col_of_row[i], stamp)) {
        col_of_row[i] = j;
        return true;
      }
    }
    return false;
  };
  index_t rank = 0;
  for (index_t j = 0; j < n; ++j)
    if (j != skip) rank += augment(j, j);
  return rank;
}

/// Checks everything the contract promises about m for A: a permutation whose entries are nonzero,
/// positive normal scalings, |scaled entries| <= 1 and |scaled matched entries| = 1 within 1e-12.
void expect_valid(const SparseMatrix& A, const MaximumProductMatching& m, const std::string& name) {
  const index_t n = A.cols();
  ASSERT_EQ(m.row_perm.size(), static_cast<std::size_t>(n)) << name;
  ASSERT_EQ(m.row_scale.size(), static_cast<std::size_t>(n)) << name;
  ASSERT_EQ(m.col_scale.size(), static_cast<std::size_t>(n)) << name;
  std::vector<index_t> sorted = m.row_perm;
  std::sort(sorted.begin(), sorted.end());
  std::vector<index_t> identity(static_cast<std::size_t>(n));
  std::iota(identity.begin(), identity.end(), 0);
  ASSERT_EQ(sorted, identity) << name << ": row_perm is not a permutation";
  for (index_t k = 0; k < n; ++k) {
    EXPECT_TRUE(std::isnormal(m.row_scale[k]) && m.row_scale[k] > 0) << name << " row_scale[" << k << "]";
    EXPECT_TRUE(std::isnormal(m.col_scale[k]) && m.col_scale[k] > 0) << name << " col_scale[" << k << "]";
  }
  const SparseMatrix B = scale(A, m.row_scale, m.col_scale);
  double largest = 0;
  for (const double b : B.values()) largest = std::max(largest, std::abs(b));
  EXPECT_LE(largest, 1 + 1e-12) << name;
  double worst_diagonal = 0;
  for (index_t j = 0; j < n; ++j)
    worst_diagonal = std::max(worst_diagonal, std::abs(std::abs(entry(B, m.row_perm[j], j)) - 1));
  EXPECT_LE(worst_diagonal, 1e-12) << name;
}

/// sum_j log |a(row_perm[j], j)|: the log of the product the matching maximizes.
double log_product(const SparseMatrix& A, const std::vector<index_t>& row_perm) {
  double sum = 0;
  for (index_t j = 0; j < A.cols(); ++j) sum += std::log(std::abs(entry(A, row_perm[j], j)));
  return sum;
}

/// A random n x n matrix with about `per_column` entries per column plus the entries of a random
/// permutation (so a perfect matching exists), magnitudes 10^U(-decades, decades) with random signs; with
/// decades = 0 every entry is 1 (2 where two fall on the same place): a pattern, all ties.
SparseMatrix random_matrix(index_t n, int per_column, std::mt19937& rng, double decades = 6) {
  std::uniform_int_distribution<index_t> row(0, n - 1);
  std::uniform_real_distribution<double> exponent(-decades, decades);
  std::vector<index_t> sigma(static_cast<std::size_t>(n));
  std::iota(sigma.begin(), sigma.end(), 0);
  std::shuffle(sigma.begin(), sigma.end(), rng);
  std::vector<std::int64_t> rows, cols;
  std::vector<double> values;
  auto add = [&](index_t i, index_t j) {
    rows.push_back(i);
    cols.push_back(j);
    values.push_back(decades == 0 ? 1.0 : (rng() % 2 ? 1 : -1) * std::pow(10.0, exponent(rng)));
  };
  for (index_t j = 0; j < n; ++j) {
    add(sigma[j], j);
    for (int k = 0; k < per_column; ++k) add(row(rng), j);
  }
  return SparseMatrix::from_triplets(n, n, rows, cols, values);
}

// The tridiagonal 4 x 4 below has exactly five perfect matchings (|s(j) - j| <= 1): the identity (product
// 1), swapping rows 0,1 (2 * 5 = 10), rows 1,2 (4 * 3 = 12), rows 2,3 (6 * 2 = 12), and both 0,1 and 2,3
// (2 * 5 * 6 * 2 = 120), the unique maximum: column 0 takes row 1, 1 takes 0, 2 takes 3, 3 takes 2. Each of
// those entries is its column's largest, so after the row permutation every ratio |a_jj| / max_i |a_ij| is
// 1; before it they are 1/2, 1/5, 1/6, 1/2 (geometric mean 120^(-1/4)).
const std::vector<double> tridiagonal = {1, 2, 0, 0,  //
                                         5, 1, 4, 0,  //
                                         0, 3, 1, 6,  //
                                         0, 0, 2, 1};

TEST(Matching, GoldenTridiagonal) {
  const SparseMatrix A = from_dense(4, tridiagonal);
  const MaximumProductMatching m = maximum_product_matching(A);
  EXPECT_EQ(m.row_perm, (std::vector<index_t>{1, 0, 3, 2}));
  expect_valid(A, m, "tridiagonal");

  const DiagonalMagnitude before = diagonal_magnitude(A);
  EXPECT_DOUBLE_EQ(before.min_ratio, 1.0 / 6);
  EXPECT_NEAR(before.geometric_mean, std::pow(120.0, -0.25), 1e-15);
  EXPECT_EQ(before.zero_diagonals, 0);
  const SparseMatrix PA = permute_rows(A, m.row_perm);
  for (index_t j = 0; j < 4; ++j) EXPECT_EQ(entry(PA, j, j), entry(A, m.row_perm[j], j));
  const DiagonalMagnitude matched = diagonal_magnitude(PA);
  EXPECT_EQ(matched.min_ratio, 1);
  EXPECT_EQ(matched.geometric_mean, 1);
  const DiagonalMagnitude scaled = diagonal_magnitude(permute_rows(scale(A, m.row_scale, m.col_scale), m.row_perm));
  EXPECT_NEAR(scaled.min_ratio, 1, 1e-12);
  EXPECT_NEAR(scaled.geometric_mean, 1, 1e-12);
}

// A zero diagonal that the matching must fill: [[0, 1, 0], [2, 0, 1], [0, 3, 4]] (row-wise). Perfect
// matchings: rows (1, 0, 2) with product 2 * 1 * 4 = 8, and rows (1, 2, ?) needs row 0 in column 2, which is
// empty there; so the only one is (1, 0, 2). Before it, two diagonal entries are missing.
TEST(Matching, GoldenZeroDiagonal) {
  const SparseMatrix A = from_dense(3, {0, 2, 0, 1, 0, 3, 0, 1, 4});
  const MaximumProductMatching m = maximum_product_matching(A);
  EXPECT_EQ(m.row_perm, (std::vector<index_t>{1, 0, 2}));
  expect_valid(A, m, "zero diagonal");
  const DiagonalMagnitude before = diagonal_magnitude(A);
  EXPECT_EQ(before.zero_diagonals, 2);
  EXPECT_EQ(before.min_ratio, 0);
  EXPECT_EQ(before.geometric_mean, 0);
  const DiagonalMagnitude matched = diagonal_magnitude(permute_rows(A, m.row_perm));
  EXPECT_EQ(matched.zero_diagonals, 0);
  EXPECT_NEAR(matched.geometric_mean, std::cbrt(1.0 / 3), 1e-15);  // ratios 2 of 2, 1 of 3, 4 of 4
  EXPECT_NEAR(matched.min_ratio, 1.0 / 3, 1e-15);
}

TEST(Matching, EmptyAndOneByOne) {
  const MaximumProductMatching empty = maximum_product_matching(SparseMatrix());
  EXPECT_TRUE(empty.row_perm.empty());
  const SparseMatrix A = from_dense(1, {-8});
  const MaximumProductMatching m = maximum_product_matching(A);
  EXPECT_EQ(m.row_perm, std::vector<index_t>{0});
  expect_valid(A, m, "1 x 1");
}

TEST(Matching, RandomMatricesLargerThanAWarp) {
  std::mt19937 rng(29);
  for (const index_t n : {33, 64, 100, 257, 1000})
    for (const int per_column : {1, 3, 8})
      for (const double decades : {6.0, 0.0}) {
        const SparseMatrix A = random_matrix(n, per_column, rng, decades);
        const std::string name = "n = " + std::to_string(n) + ", " + std::to_string(per_column) +
                                 " per column, magnitudes over 1e+-" + std::to_string(decades);
        expect_valid(A, maximum_product_matching(A), name);
      }
}

TEST(Matching, OptimalAgainstAllPermutations) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> exponent(-3, 3);
  for (index_t n = 1; n <= 7; ++n)
    for (int trial = 0; trial < 30; ++trial) {
      // Dense with probability 1/2 per entry, plus a random permutation's entries.
      std::vector<index_t> sigma(static_cast<std::size_t>(n));
      std::iota(sigma.begin(), sigma.end(), 0);
      std::shuffle(sigma.begin(), sigma.end(), rng);
      std::vector<double> a(static_cast<std::size_t>(n) * n, 0);
      for (index_t j = 0; j < n; ++j)
        for (index_t i = 0; i < n; ++i)
          if (sigma[j] == i || rng() % 2)
            a[i + static_cast<std::size_t>(j) * n] = (rng() % 2 ? 1 : -1) * std::pow(10.0, exponent(rng));
      const SparseMatrix A = from_dense(n, a);
      double best = -std::numeric_limits<double>::infinity();
      std::vector<index_t> perm(static_cast<std::size_t>(n));
      std::iota(perm.begin(), perm.end(), 0);
      do {
        double sum = 0;
        for (index_t j = 0; j < n && sum > -std::numeric_limits<double>::infinity(); ++j)
          sum += std::log(std::abs(a[perm[j] + static_cast<std::size_t>(j) * n]));
        best = std::max(best, sum);
      } while (std::next_permutation(perm.begin(), perm.end()));
      const MaximumProductMatching m = maximum_product_matching(A);
      const std::string name = "n = " + std::to_string(n) + ", trial " + std::to_string(trial);
      expect_valid(A, m, name);
      EXPECT_NEAR(log_product(A, m.row_perm), best, 1e-12 * (1 + std::abs(best))) << name;
    }
}

TEST(Matching, ExplicitZerosAreNotEdges) {
  // Column 1 stores only an explicit zero: it is empty for the matching.
  const SparseMatrix A = SparseMatrix::from_triplets(2, 2, {0, 1, 1}, {0, 1, 0}, {1, 0, 1});
  try {
    maximum_product_matching(A);
    FAIL() << "no exception";
  } catch (const StructurallySingular& e) {
    EXPECT_EQ(e.side(), StructurallySingular::Side::column);
    EXPECT_EQ(e.index(), 1);
    EXPECT_EQ(e.kind(), NumericalError::Kind::singular);
    EXPECT_NE(std::string(e.what()).find("column 1 (0-based) has no nonzero entry"), std::string::npos) << e.what();
  }
}

TEST(Matching, EmptyRow) {
  const SparseMatrix A = from_dense(3, {1, 0, 1, 1, 0, 0, 0, 0, 1});  // row 1 has no entry
  try {
    maximum_product_matching(A);
    FAIL() << "no exception";
  } catch (const StructurallySingular& e) {
    EXPECT_EQ(e.side(), StructurallySingular::Side::row);
    EXPECT_EQ(e.index(), 1);
    EXPECT_NE(std::string(e.what()).find("row 1 (0-based) has no nonzero entry"), std::string::npos) << e.what();
  }
}

/// The column named by StructurallySingular is one that a maximum matching leaves unmatched: A has
/// structural rank < n, and removing the column does not lower it.
void expect_truly_unmatchable(const SparseMatrix& A, const std::string& name) {
  try {
    maximum_product_matching(A);
    ADD_FAILURE() << name << ": no exception";
  } catch (const StructurallySingular& e) {
    const index_t rank = structural_rank(A);
    EXPECT_LT(rank, A.cols()) << name;
    if (e.side() == StructurallySingular::Side::column) {
      EXPECT_EQ(structural_rank(A, static_cast<index_t>(e.index())), rank) << name << ": " << e.what();
    } else {
      const SparseMatrix T = A.transpose();
      EXPECT_EQ(T.col_ptr()[e.index() + 1], T.col_ptr()[e.index()]) << name << ": " << e.what();
    }
  }
}

TEST(Matching, HallViolatorIsNamed) {
  // Columns 0 and 1 have their entries only in row 0 (rows 1 and 2 are reached through column 2).
  const SparseMatrix A = from_dense(3, {1, 0, 0, 2, 0, 0, 1, 1, 1});
  try {
    maximum_product_matching(A);
    FAIL() << "no exception";
  } catch (const StructurallySingular& e) {
    EXPECT_EQ(e.side(), StructurallySingular::Side::column);
    EXPECT_EQ(e.index(), 1);
    EXPECT_NE(std::string(e.what()).find("column 1 (0-based) cannot be matched: it and 1 other column have nonzero "
                                         "entries in only 1 row"),
              std::string::npos)
        << e.what();
  }
  expect_truly_unmatchable(A, "3 x 3");
}

TEST(Matching, RandomStructurallySingular) {
  std::mt19937 rng(32);
  for (const index_t n : {40, 100, 300})
    for (int trial = 0; trial < 5; ++trial) {
      // k + 1 random columns get their entries only in k random rows; every row also gets an entry in
      // another column, so no row is empty.
      const int k = 1 + trial;
      std::vector<index_t> order(static_cast<std::size_t>(n));
      std::iota(order.begin(), order.end(), 0);
      std::shuffle(order.begin(), order.end(), rng);
      const std::vector<index_t> tight_cols(order.begin(), order.begin() + k + 1);
      std::shuffle(order.begin(), order.end(), rng);
      const std::vector<index_t> tight_rows(order.begin(), order.begin() + k);
      const SparseMatrix R = random_matrix(n, 3, rng);
      std::vector<std::int64_t> rows, cols;
      std::vector<double> values;
      auto is_tight = [&](index_t j) { return std::find(tight_cols.begin(), tight_cols.end(), j) != tight_cols.end(); };
      for (index_t j = 0; j < n; ++j)
        if (!is_tight(j))
          for (offset_t p = R.col_ptr()[j]; p < R.col_ptr()[j + 1]; ++p) {
            rows.push_back(R.row_ind()[p]);
            cols.push_back(j);
            values.push_back(R.values()[p]);
          }
      for (const index_t j : tight_cols)
        for (const index_t i : tight_rows) {
          rows.push_back(i);
          cols.push_back(j);
          values.push_back(1 + static_cast<double>(rng() % 100));
        }
      std::uniform_int_distribution<index_t> any(0, n - 1);
      for (index_t i = 0; i < n; ++i) {
        index_t j;
        do j = any(rng);
        while (is_tight(j));
        rows.push_back(i);
        cols.push_back(j);
        values.push_back(0.5);
      }
      const SparseMatrix A = SparseMatrix::from_triplets(n, n, rows, cols, values);
      expect_truly_unmatchable(A, "n = " + std::to_string(n) + ", k = " + std::to_string(k));
    }
}

TEST(Matching, BadInput) {
  const SparseMatrix rect = SparseMatrix::from_triplets(3, 2, {0, 1}, {0, 1}, {1, 1});
  EXPECT_NE(error_of<InvalidInput>([&] { maximum_product_matching(rect); }).find("square, but it is 3 x 2"),
            std::string::npos);
  EXPECT_NE(error_of<InvalidInput>([&] { diagonal_magnitude(rect); }).find("3 x 2"), std::string::npos);
  for (const double bad : {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()}) {
    const SparseMatrix A = SparseMatrix::from_triplets(2, 2, {0, 1, 1}, {0, 0, 1}, {1, bad, 1});
    const std::string message = error_of<InvalidInput>([&] { maximum_product_matching(A); });
    EXPECT_NE(message.find("A(1, 0) is"), std::string::npos) << message;
    EXPECT_NE(message.find("must be finite"), std::string::npos) << message;
    EXPECT_NE(error_of<InvalidInput>([&] { diagonal_magnitude(A); }).find("A(1, 0)"), std::string::npos);
  }
  const SparseMatrix A = from_dense(2, {1, 2, 3, 4});
  EXPECT_NE(error_of<InvalidInput>([&] { permute_rows(A, {0, 0}); }).find("not a permutation"), std::string::npos);
  EXPECT_NE(error_of<InvalidInput>([&] { permute_rows(A, {0}); }).find("1 entries"), std::string::npos);
  EXPECT_NE(error_of<InvalidInput>([&] { scale(A, {1, 1}, {1}); }).find("2 x 2"), std::string::npos);
}

/// Lower bidiagonal, diagonal d and subdiagonal 1: the diagonal is the only perfect matching, and scaling it
/// needs Dr(j + 1) / Dr(j) <= d down the rows, so factors spanning d^(1 - n) in all.
SparseMatrix graded_bidiagonal(index_t n, double d) {
  std::vector<double> a(static_cast<std::size_t>(n) * n, 0);
  for (index_t j = 0; j < n; ++j) {
    a[j + static_cast<std::size_t>(j) * n] = d;
    if (j + 1 < n) a[j + 1 + static_cast<std::size_t>(j) * n] = 1;
  }
  return from_dense(n, a);
}

TEST(Matching, GradedMatrixScalesWithinRange) {
  // Factors over 1e-500: representable only when the exponents are centred (about 1e-200 .. 1e300).
  const SparseMatrix A = graded_bidiagonal(6, 1e-100);
  expect_valid(A, maximum_product_matching(A), "graded bidiagonal");
}

TEST(Matching, ScalingOutOfRangeIsNamed) {
  // Factors over 1e-900: no double range holds them.
  try {
    maximum_product_matching(graded_bidiagonal(4, 1e-300));
    FAIL() << "no exception";
  } catch (const StructurallySingular& e) {
    FAIL() << e.what();
  } catch (const NumericalError& e) {
    EXPECT_EQ(e.kind(), NumericalError::Kind::not_finite);
    EXPECT_NE(std::string(e.what()).find("outside the range of double"), std::string::npos) << e.what();
  }
}

// Every real unsymmetric and symmetric indefinite matrix of ../shared/matrices (README.md there): a valid
// matching with its certificate, or a structural singularity whose column is truly unmatchable.
TEST(Matching, RealMatrices) {
  const char* files[] = {
      "NSR8K.mtx.gz", "add32.mtx.gz", "adder_dcop_05.mtx.gz", "arc130.mtx.gz", "basker_matrix1.mtx.gz",
      "bayer10.mtx.gz", "bfw782a.mtx.gz", "bfw782b.mtx.gz", "bp_1200.mtx.gz", "cryg2500.mtx.gz", "ex14.mtx.gz",
      "fs_183_1.mtx.gz", "fs_183_6.mtx.gz", "gemat12.mtx.gz", "impcol_a.mtx.gz", "impcol_d.mtx.gz", "impcol_e.mtx.gz",
      "mbeacxc.mtx.gz", "nnc1374.mtx.gz", "olm1000.mtx.gz", "orsirr_1.mtx.gz", "orsirr_2.mtx.gz", "pores_1.mtx.gz",
      "rajat19.mtx.gz", "sherman3.mtx.gz", "utm300.mtx.gz", "watt_2.mtx.gz", "west0067.mtx.gz", "west0479.mtx.gz",
      // symmetric indefinite
      "c-62.mtx.gz", "hangGlider_2.mtx.gz", "reorientation_1.mtx.gz", "sherman1.mtx.gz"};
  std::string missing;
  for (const char* file : files) {
    if (!spade::testing::matrix_exists(file)) {
      missing += std::string(" ") + file;
      continue;
    }
    SCOPED_TRACE(file);
    const SparseMatrix A = read_matrix_market(spade::testing::matrix_path(file));
    try {
      const MaximumProductMatching m = maximum_product_matching(A);
      expect_valid(A, m, file);
      const DiagonalMagnitude before = diagonal_magnitude(A), after = diagonal_magnitude(permute_rows(A, m.row_perm));
      EXPECT_EQ(after.zero_diagonals, 0);
      EXPECT_GE(after.geometric_mean, before.geometric_mean * (1 - 1e-12));  // the maximized product
    } catch (const StructurallySingular& e) {
      expect_truly_unmatchable(A, std::string(file) + ": " + e.what());
    }
  }
  if (!missing.empty())
    GTEST_SKIP() << "not found in " << spade::testing::matrix_dir() << ":" << missing
                 << " (set SPADE_MATRICES to the folder of ../shared/matrices)";
}

}  // namespace
}  // namespace spade
