// Tests of the fill-reducing orderings (ordering/ordering.cpp). Fill is measured as nnz(L) of the Cholesky
// factor of the symmetrized pattern, by a simple elimination-tree count checked against CHOLMOD.
#include <cholmod.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "error_of.hpp"
#include "spade/error.hpp"
#include "spade/generators.hpp"
#include "spade/matrix_market.hpp"
#include "spade/ordering.hpp"
#include "test_matrices.hpp"

namespace spade {
namespace {

constexpr OrderingMethod all_methods[] = {OrderingMethod::natural, OrderingMethod::amd, OrderingMethod::metis,
                                          OrderingMethod::colamd};

using spade::testing::error_of;

bool is_permutation_of_0_to_n(const std::vector<index_t>& perm, index_t n) {
  std::vector<index_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  std::vector<index_t> identity(static_cast<std::size_t>(n));
  std::iota(identity.begin(), identity.end(), 0);
  return sorted == identity;
}

/// nnz(L), diagonal included, of the Cholesky factor of P (A + A^T) P^T, perm[k] = original index of pivot k.
/// Row k of L is the set of nodes reached from the entries of row k of the upper triangle by walking up the
/// elimination tree until k (Davis, "Direct Methods for Sparse Linear Systems", SIAM 2006, sec. 4.1-4.3).
std::int64_t cholesky_nnz(const SparseMatrix& a, const std::vector<index_t>& perm) {
  const index_t n = a.cols();
  std::vector<index_t> iperm(static_cast<std::size_t>(n));
  for (index_t k = 0; k < n; ++k) iperm[perm[k]] = k;
  // upper[k]: the rows i < k of column k of the permuted symmetrized pattern (duplicates are harmless).
  std::vector<std::vector<index_t>> upper(static_cast<std::size_t>(n));
  for (index_t j = 0; j < n; ++j)
    for (offset_t p = a.col_ptr()[j]; p < a.col_ptr()[j + 1]; ++p) {
      const index_t pi = iperm[a.row_ind()[p]], pj = iperm[j];
      if (pi != pj) upper[std::max(pi, pj)].push_back(std::min(pi, pj));
    }
  // Elimination tree (Liu's algorithm with path compression through `ancestor`).
  std::vector<index_t> parent(static_cast<std::size_t>(n), -1), ancestor(static_cast<std::size_t>(n), -1);
  for (index_t k = 0; k < n; ++k)
    for (index_t i : upper[k])
      while (i != -1 && i < k) {
        const index_t next = ancestor[i];
        ancestor[i] = k;
        if (next == -1) parent[i] = k;
        i = next;
      }
  // Row counts: each row subtree walk stops at a node already marked for row k.
  std::vector<index_t> mark(static_cast<std::size_t>(n), -1);
  std::int64_t nnz = 0;
  for (index_t k = 0; k < n; ++k) {
    mark[k] = k;
    ++nnz;
    for (index_t i : upper[k])
      for (; mark[i] != k; i = parent[i]) {
        mark[i] = k;
        ++nnz;
      }
  }
  return nnz;
}

/// CHOLMOD's nnz(L) for the given permutation (simplicial analysis, so no supernodal padding) of a
/// symmetric matrix, read from its lower triangle.
double cholmod_nnz(const SparseMatrix& a, const std::vector<index_t>& perm) {
  cholmod_common common;
  cholmod_start(&common);
  common.nmethods = 1;
  common.method[0].ordering = CHOLMOD_GIVEN;
  common.supernodal = CHOLMOD_SIMPLICIAL;
  cholmod_sparse* c = cholmod_allocate_sparse(a.rows(), a.cols(), a.nnz(), 1, 1, -1, CHOLMOD_PATTERN, &common);
  std::vector<int> given(perm.begin(), perm.end());
  auto* cp = static_cast<int*>(c->p);
  auto* ci = static_cast<int*>(c->i);
  for (index_t j = 0; j <= a.cols(); ++j) cp[j] = static_cast<int>(a.col_ptr()[j]);
  std::copy(a.row_ind().begin(), a.row_ind().end(), ci);
  cholmod_factor* l = cholmod_analyze_p(c, given.data(), nullptr, 0, &common);
  const double lnz = l != nullptr && common.status == CHOLMOD_OK ? common.lnz : -1;
  cholmod_free_factor(&l, &common);
  cholmod_free_sparse(&c, &common);
  cholmod_finish(&common);
  return lnz;
}

SparseMatrix read_pattern(const std::string& file) {
  MatrixMarketOptions options;
  options.pattern_values = PatternValues::ones;
  return read_matrix_market(testing::matrix_path(file), options);
}

// ---- names -------------------------------------------------------------------------------------------------

TEST(OrderingMethodNames, RoundTrip) {
  for (const OrderingMethod m : all_methods) EXPECT_EQ(parse_ordering_method(to_string(m)), m);
  EXPECT_EQ(to_string(OrderingMethod::natural), "natural");
  EXPECT_EQ(to_string(OrderingMethod::amd), "amd");
  EXPECT_EQ(to_string(OrderingMethod::metis), "metis");
  EXPECT_EQ(to_string(OrderingMethod::colamd), "colamd");
}

TEST(OrderingMethodNames, UnknownNameListsTheValidOnes) {
  EXPECT_EQ(error_of<InvalidInput>([] { parse_ordering_method("camd"); }),
            "unknown ordering method 'camd' (valid: natural, amd, metis, colamd)");
  EXPECT_EQ(error_of<InvalidInput>([] { parse_ordering_method("AMD"); }),
            "unknown ordering method 'AMD' (valid: natural, amd, metis, colamd)");
}

// ---- the fill counter used as the oracle ------------------------------------------------------------------

TEST(FillCounter, ArrowMatrix) {
  // Dense first row and column: eliminated first it fills everything, eliminated last nothing.
  const index_t n = 20;
  std::vector<std::int64_t> r, c;
  for (index_t i = 0; i < n; ++i) {
    r.insert(r.end(), {i, 0, i});
    c.insert(c.end(), {0, i, i});
  }
  const SparseMatrix arrow = SparseMatrix::from_triplets(n, n, r, c, std::vector<double>(r.size(), 1.0));
  std::vector<index_t> natural(n), reversed(n);
  std::iota(natural.begin(), natural.end(), 0);
  std::iota(reversed.rbegin(), reversed.rend(), 0);
  EXPECT_EQ(cholesky_nnz(arrow, natural), n * (n + 1) / 2);
  EXPECT_EQ(cholesky_nnz(arrow, reversed), 2 * n - 1);
}

TEST(FillCounter, AgreesWithCholmod) {
  const SparseMatrix grid = laplacian_2d(23, 17, Stencil::nine_point);
  for (const OrderingMethod m : all_methods) {
    const std::vector<index_t> perm = fill_reducing_ordering(grid, m);
    EXPECT_EQ(cholesky_nnz(grid, perm), cholmod_nnz(grid, perm)) << to_string(m);
  }
  for (const char* file : {"494_bus.mtx.gz", "bcsstk16.mtx.gz"}) {
    if (!testing::matrix_exists(file)) continue;
    const SparseMatrix a = read_pattern(file);
    const std::vector<index_t> perm = fill_reducing_ordering(a, OrderingMethod::amd);
    EXPECT_EQ(cholesky_nnz(a, perm), cholmod_nnz(a, perm)) << file;
  }
}

// ---- orderings --------------------------------------------------------------------------------------------

TEST(FillReducingOrdering, ValidPermutationsOnGrids) {
  const SparseMatrix grids[] = {laplacian_2d(30, 20), laplacian_2d(16, 16, Stencil::nine_point),
                                laplacian_3d(9, 8, 7), laplacian_3d(6, 6, 6, Stencil::twenty_seven_point),
                                laplacian_2d(1, 50)};
  for (const SparseMatrix& a : grids)
    for (const OrderingMethod m : all_methods) {
      const std::vector<index_t> perm = fill_reducing_ordering(a, m);
      EXPECT_TRUE(is_permutation_of_0_to_n(perm, a.rows())) << to_string(m) << ", n = " << a.rows();
    }
}

TEST(FillReducingOrdering, NaturalIsTheIdentity) {
  const std::vector<index_t> perm = fill_reducing_ordering(laplacian_2d(5, 4), OrderingMethod::natural);
  std::vector<index_t> identity(20);
  std::iota(identity.begin(), identity.end(), 0);
  EXPECT_EQ(perm, identity);
}

TEST(FillReducingOrdering, AmdAndMetisReduceFillOnA2DGrid) {
  const SparseMatrix a = laplacian_2d(64, 64);
  const std::int64_t natural = cholesky_nnz(a, fill_reducing_ordering(a, OrderingMethod::natural));
  const std::int64_t amd = cholesky_nnz(a, fill_reducing_ordering(a, OrderingMethod::amd));
  const std::int64_t metis = cholesky_nnz(a, fill_reducing_ordering(a, OrderingMethod::metis));
  // Banded natural order: about n * 64 = 262k; minimum degree and nested dissection: O(n log n), ~ 50k.
  EXPECT_GT(natural, 250000);
  EXPECT_LT(amd, natural / 3) << "natural " << natural << ", amd " << amd;
  EXPECT_LT(metis, natural / 3) << "natural " << natural << ", metis " << metis;
  // The inverse of a nested-dissection ordering is a poor ordering: this catches a perm / iperm mix-up.
  EXPECT_LT(metis, cholesky_nnz(a, inverse_permutation(fill_reducing_ordering(a, OrderingMethod::metis))));
}

TEST(FillReducingOrdering, AmdAndMetisReduceFillOnA3DGrid) {
  const SparseMatrix a = laplacian_3d(16, 16, 16);
  const std::int64_t natural = cholesky_nnz(a, fill_reducing_ordering(a, OrderingMethod::natural));
  EXPECT_LT(cholesky_nnz(a, fill_reducing_ordering(a, OrderingMethod::amd)), natural / 2);
  EXPECT_LT(cholesky_nnz(a, fill_reducing_ordering(a, OrderingMethod::metis)), natural / 2);
}

TEST(FillReducingOrdering, ReduceFillOnRealMatrices) {
  // Matrices whose given order is poor (bcsstk16, already banded, is not one of them: see below).
  int tested = 0;
  for (const char* file : {"494_bus.mtx.gz", "west0479.mtx.gz", "4elt_graph.mtx.gz", "c-62.mtx.gz"}) {
    if (!testing::matrix_exists(file)) continue;
    SCOPED_TRACE(file);
    const SparseMatrix a = read_pattern(file);
    const std::int64_t natural = cholesky_nnz(a, fill_reducing_ordering(a, OrderingMethod::natural));
    for (const OrderingMethod m : {OrderingMethod::amd, OrderingMethod::metis}) {
      const std::vector<index_t> perm = fill_reducing_ordering(a, m);
      ASSERT_TRUE(is_permutation_of_0_to_n(perm, a.rows())) << to_string(m);
      EXPECT_LT(cholesky_nnz(a, perm), natural / 2) << to_string(m);
    }
    ++tested;
  }
  if (tested == 0) GTEST_SKIP() << "none of the real matrices found in " << testing::matrix_dir();
}

TEST(FillReducingOrdering, ValidPermutationsOnLargeRealMatrices) {
  // bcsstk16 comes banded (natural fill 610,800 beats AMD's 812,183); mdual_lap has 258,569 rows.
  int tested = 0;
  for (const char* file : {"bcsstk16.mtx.gz", "mdual_lap.mtx.gz"}) {
    if (!testing::matrix_exists(file)) continue;
    SCOPED_TRACE(file);
    const SparseMatrix a = read_pattern(file);
    for (const OrderingMethod m : {OrderingMethod::amd, OrderingMethod::metis})
      EXPECT_TRUE(is_permutation_of_0_to_n(fill_reducing_ordering(a, m), a.rows())) << to_string(m);
    ++tested;
  }
  if (tested == 0) GTEST_SKIP() << "none of the real matrices found in " << testing::matrix_dir();
}

TEST(FillReducingOrdering, ColamdReducesFillOnGridsAndUnsymmetricMatrices) {
  // COLAMD orders A's columns for the factor of A^T A; applied symmetrically it still cuts the fill of a
  // banded grid to less than half the natural order's, and of west0479 to less than two thirds.
  const SparseMatrix grid = laplacian_2d(64, 64);
  EXPECT_LT(cholesky_nnz(grid, fill_reducing_ordering(grid, OrderingMethod::colamd)),
            cholesky_nnz(grid, fill_reducing_ordering(grid, OrderingMethod::natural)) / 2);
  SPADE_REQUIRE_MATRIX("west0479.mtx.gz");
  const SparseMatrix a = read_pattern("west0479.mtx.gz");
  const std::vector<index_t> perm = fill_reducing_ordering(a, OrderingMethod::colamd);
  ASSERT_TRUE(is_permutation_of_0_to_n(perm, a.rows()));
  EXPECT_LT(cholesky_nnz(a, perm), 2 * cholesky_nnz(a, fill_reducing_ordering(a, OrderingMethod::natural)) / 3);
}

/// The pattern of A + A^T with every value 1, or only its upper triangle.
SparseMatrix symmetrized_pattern(const SparseMatrix& a, bool upper_only) {
  std::vector<std::int64_t> r, c;
  for (index_t j = 0; j < a.cols(); ++j)
    for (offset_t p = a.col_ptr()[j]; p < a.col_ptr()[j + 1]; ++p) {
      const index_t i = a.row_ind()[p];
      r.push_back(std::min(i, j));
      c.push_back(std::max(i, j));
      if (!upper_only) {
        r.push_back(std::max(i, j));
        c.push_back(std::min(i, j));
      }
    }
  SparseMatrix s = SparseMatrix::from_triplets(a.rows(), a.cols(), r, c, std::vector<double>(r.size(), 0.0));
  std::fill(s.values().begin(), s.values().end(), 1.0);
  return s;
}

TEST(FillReducingOrdering, UnsymmetricPatternIsSymmetrized) {
  SPADE_REQUIRE_MATRIX("west0479.mtx.gz");
  const SparseMatrix a = read_pattern("west0479.mtx.gz");
  ASSERT_FALSE(a.is_symmetric());
  const SparseMatrix sym = symmetrized_pattern(a, false), upper = symmetrized_pattern(a, true);
  // A, A + A^T, the upper triangle of A + A^T and its transpose all have the same graph.
  for (const OrderingMethod m : {OrderingMethod::amd, OrderingMethod::metis}) {
    SCOPED_TRACE(to_string(m));
    const std::vector<index_t> expected = fill_reducing_ordering(sym, m);
    EXPECT_EQ(fill_reducing_ordering(a, m), expected);
    EXPECT_EQ(fill_reducing_ordering(upper, m), expected);
    EXPECT_EQ(fill_reducing_ordering(upper.transpose(), m), expected);
  }
}

TEST(FillReducingOrdering, ValuesAreNeverRead) {
  SparseMatrix a = laplacian_2d(20, 15);
  const SparseMatrix b = a;
  std::fill(a.values().begin(), a.values().end(), std::numeric_limits<double>::quiet_NaN());
  for (const OrderingMethod m : all_methods) EXPECT_EQ(fill_reducing_ordering(a, m), fill_reducing_ordering(b, m));
}

TEST(FillReducingOrdering, TinyAndEdgelessMatrices) {
  for (const OrderingMethod m : all_methods) {
    SCOPED_TRACE(to_string(m));
    EXPECT_TRUE(fill_reducing_ordering(SparseMatrix(), m).empty());
    EXPECT_EQ(fill_reducing_ordering(SparseMatrix::from_triplets(1, 1, {0}, {0}, {2.0}), m),
              (std::vector<index_t>{0}));
    EXPECT_EQ(fill_reducing_ordering(SparseMatrix::from_triplets(1, 1, {}, {}, {}), m), (std::vector<index_t>{0}));
    // Graphs without edges (diagonal only, or no entries at all) have no fill: the identity.
    const SparseMatrix diagonal = SparseMatrix::from_triplets(6, 6, {0, 1, 2, 3, 4, 5}, {0, 1, 2, 3, 4, 5},
                                                              std::vector<double>(6, 1.0));
    EXPECT_EQ(fill_reducing_ordering(diagonal, m), (std::vector<index_t>{0, 1, 2, 3, 4, 5}));
    EXPECT_EQ(fill_reducing_ordering(SparseMatrix::from_triplets(3, 3, {}, {}, {}), m),
              (std::vector<index_t>{0, 1, 2}));
    // Empty columns beside a connected block.
    const SparseMatrix partly_empty =
        SparseMatrix::from_triplets(7, 7, {1, 4, 4, 6}, {4, 1, 6, 4}, std::vector<double>(4, 1.0));
    EXPECT_TRUE(is_permutation_of_0_to_n(fill_reducing_ordering(partly_empty, m), 7));
    // Two disconnected components.
    const SparseMatrix two = SparseMatrix::from_triplets(4, 4, {0, 1, 2, 3}, {1, 0, 3, 2}, std::vector<double>(4, 1.0));
    EXPECT_TRUE(is_permutation_of_0_to_n(fill_reducing_ordering(two, m), 4));
  }
}

TEST(FillReducingOrdering, NonSquareThrows) {
  const SparseMatrix a = SparseMatrix::from_triplets(3, 4, {0}, {3}, {1.0});
  for (const OrderingMethod m : all_methods)
    EXPECT_EQ(error_of<InvalidInput>([&] { fill_reducing_ordering(a, m); }),
              "fill_reducing_ordering: the matrix must be square, got 3 x 4");
}

// ---- inverse permutation ---------------------------------------------------------------------------------

TEST(InversePermutation, InvertsAndValidates) {
  const std::vector<index_t> perm{2, 0, 3, 1};
  const std::vector<index_t> iperm = inverse_permutation(perm);
  EXPECT_EQ(iperm, (std::vector<index_t>{1, 3, 0, 2}));
  for (index_t k = 0; k < 4; ++k) EXPECT_EQ(iperm[perm[k]], k);
  EXPECT_EQ(inverse_permutation(iperm), perm);
  EXPECT_TRUE(inverse_permutation({}).empty());
  EXPECT_EQ(error_of<InvalidInput>([] { inverse_permutation({0, 2, 2}); }),
            "inverse_permutation: perm is not a permutation of 0..2 (perm[2] = 2)");
  EXPECT_EQ(error_of<InvalidInput>([] { inverse_permutation({0, 3, 1}); }),
            "inverse_permutation: perm is not a permutation of 0..2 (perm[1] = 3)");
  EXPECT_EQ(error_of<InvalidInput>([] { inverse_permutation({-1}); }),
            "inverse_permutation: perm is not a permutation of 0..0 (perm[0] = -1)");
}

}  // namespace
}  // namespace spade
