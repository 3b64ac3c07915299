// Symbolic analysis, supernodal Cholesky and host solve: golden symbolic results, reconstruction and
// solves against dense references on random SPD matrices, the real SPD matrices against CHOLMOD, and the
// numerical error cases.
#include <gtest/gtest.h>

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <limits>
#include <omp.h>
#include <optional>
#include <random>
#include <set>
#include <vector>

#include "cholmod_reference.hpp"
#include "condition.hpp"
#include "spade/cholesky.hpp"
#include "spade/error.hpp"
#include "spade/generators.hpp"
#include "spade/matrix_market.hpp"
#include "spade/solve.hpp"
#include "spade/symbolic.hpp"
#include "test_matrices.hpp"

extern "C" {
void dpotrf_(const char* uplo, const int* n, double* a, const int* lda, int* info);
void dpotrs_(const char* uplo, const int* n, const int* nrhs, const double* a, const int* lda, double* b,
             const int* ldb, int* info);
}

namespace spade {
namespace {

constexpr double kEps = std::numeric_limits<double>::epsilon();

SparseMatrix symmetric_from_lower(index_t n, const std::vector<std::pair<index_t, index_t>>& lower,
                                  const std::vector<double>& offdiag, const std::vector<double>& diag) {
  std::vector<std::int64_t> r, c;
  std::vector<double> v;
  for (std::size_t k = 0; k < lower.size(); ++k) {
    r.push_back(lower[k].first), c.push_back(lower[k].second), v.push_back(offdiag[k]);
    r.push_back(lower[k].second), c.push_back(lower[k].first), v.push_back(offdiag[k]);
  }
  for (index_t j = 0; j < n; ++j) r.push_back(j), c.push_back(j), v.push_back(diag[j]);
  return SparseMatrix::from_triplets(n, n, r, c, v);
}

// Davis, "Direct Methods for Sparse Linear Systems", SIAM 2006, Figure 4.2: an 11 x 11 SPD matrix with
// a_ii = i + 10 (0-based i) and ones off the diagonal.
SparseMatrix davis_figure_4_2() {
  const std::vector<std::pair<index_t, index_t>> lower = {{5, 0}, {6, 0}, {2, 1}, {7, 1}, {9, 2},  {10, 2},
                                                          {5, 3}, {9, 3}, {7, 4}, {10, 4}, {8, 5}, {9, 5},
                                                          {10, 6}, {9, 7}, {10, 7}, {10, 9}};
  std::vector<double> diag(11);
  for (int i = 0; i < 11; ++i) diag[i] = i + 10;
  return symmetric_from_lower(11, lower, std::vector<double>(lower.size(), 1.0), diag);
}

// A random symmetric, strictly diagonally dominant (so SPD) matrix with about `per_col` entries per column
// below the diagonal.
SparseMatrix random_spd(index_t n, int per_col, std::mt19937& rng) {
  std::uniform_int_distribution<index_t> row(0, n - 1);
  std::uniform_real_distribution<double> value(-1.0, 1.0);
  std::set<std::pair<index_t, index_t>> seen;
  std::vector<std::pair<index_t, index_t>> lower;
  std::vector<double> offdiag, diag(n, 1.0);
  for (index_t j = 0; j < n; ++j)
    for (int t = 0; t < per_col; ++t) {
      const index_t i = row(rng);
      if (i <= j || !seen.insert({i, j}).second) continue;
      lower.push_back({i, j});
      offdiag.push_back(value(rng));
      diag[i] += std::abs(offdiag.back());
      diag[j] += std::abs(offdiag.back());
    }
  return symmetric_from_lower(n, lower, offdiag, diag);
}

Eigen::MatrixXd dense(const SparseMatrix& A) {
  Eigen::MatrixXd D = Eigen::MatrixXd::Zero(A.rows(), A.cols());
  for (index_t j = 0; j < A.cols(); ++j)
    for (offset_t p = A.col_ptr()[j]; p < A.col_ptr()[j + 1]; ++p) D(A.row_ind()[p], j) = A.values()[p];
  return D;
}

// L of the factor as a dense matrix in the factor's numbering.
Eigen::MatrixXd dense_factor(const NumericFactor& F) {
  const SymbolicFactor& S = F.symbolic();
  Eigen::MatrixXd L = Eigen::MatrixXd::Zero(S.n, S.n);
  for (index_t s = 0; s < S.num_supernodes; ++s) {
    const index_t f = S.supernode_begin[s], k = S.supernode_cols(s), m = S.supernode_rows(s);
    for (index_t c = 0; c < k; ++c)
      for (index_t r = c; r < m; ++r) L(S.row_indices[S.row_ptr[s] + r], f + c) = F.panel(s)[r + c * m];
  }
  return L;
}

// Structure of L by dense symbolic elimination (the definition), for checking the fast algorithms.
std::vector<std::set<index_t>> brute_force_structure(const SparseMatrix& A) {
  const index_t n = A.cols();
  std::vector<std::set<index_t>> cols(n);
  for (index_t j = 0; j < n; ++j) {
    cols[j].insert(j);
    for (offset_t p = A.col_ptr()[j]; p < A.col_ptr()[j + 1]; ++p)
      if (A.row_ind()[p] > j) cols[j].insert(A.row_ind()[p]);
  }
  for (index_t j = 0; j < n; ++j) {
    auto it = cols[j].upper_bound(j);
    if (it == cols[j].end()) continue;
    const index_t parent = *it;
    for (; it != cols[j].end(); ++it) cols[parent].insert(*it);
  }
  return cols;
}

// C = P A P^T for the inverse permutation iperm (C(iperm[i], iperm[j]) = A(i, j)), pattern only (ones).
SparseMatrix permuted_pattern(const SparseMatrix& A, const std::vector<index_t>& iperm) {
  std::vector<std::int64_t> r, c;
  for (index_t j = 0; j < A.cols(); ++j)
    for (offset_t p = A.col_ptr()[j]; p < A.col_ptr()[j + 1]; ++p)
      r.push_back(iperm[A.row_ind()[p]]), c.push_back(iperm[j]);
  return SparseMatrix::from_triplets(A.rows(), A.cols(), r, c, std::vector<double>(r.size(), 1.0));
}

TEST(Symbolic, GoldenDavisFigure42) {
  const SparseMatrix A = davis_figure_4_2();
  const std::vector<index_t> parent = etree(A);
  EXPECT_EQ(parent, (std::vector<index_t>{5, 2, 7, 5, 7, 6, 8, 9, 9, 10, -1}));
  const std::vector<index_t> post = postorder(parent);
  EXPECT_EQ(post, (std::vector<index_t>{1, 2, 4, 7, 0, 3, 5, 6, 8, 9, 10}));
  EXPECT_EQ(col_counts(A, parent, post), (std::vector<index_t>{3, 3, 4, 3, 3, 4, 4, 3, 3, 2, 1}));
}

TEST(Symbolic, ColumnCountsMatchBruteForceOnRandomMatrices) {
  std::mt19937 rng(11);
  for (index_t n : {1, 2, 7, 40, 200}) {
    const SparseMatrix A = random_spd(n, 3, rng);
    const auto structure = brute_force_structure(A);
    const std::vector<index_t> parent = etree(A);
    const std::vector<index_t> counts = col_counts(A, parent, postorder(parent));
    for (index_t j = 0; j < n; ++j) {
      EXPECT_EQ(counts[j], static_cast<index_t>(structure[j].size())) << "n = " << n << ", column " << j;
      const auto above = structure[j].upper_bound(j);
      EXPECT_EQ(parent[j], above == structure[j].end() ? -1 : *above);
    }
  }
}

TEST(Symbolic, PostorderRejectsCycles) {
  EXPECT_THROW(postorder({1, 0}), InvalidInput);
  EXPECT_THROW(postorder({5}), InvalidInput);
}

TEST(Symbolic, SupernodesCoverTheTrueStructure) {
  std::mt19937 rng(5);
  for (bool relax : {false, true}) {
    const SparseMatrix A = random_spd(300, 4, rng);
    AnalyzeOptions options;
    options.supernodes.relax = relax;
    const auto S = analyze(A, options);
    // Structure of L of the permuted matrix, by brute force.
    const auto structure = brute_force_structure(permuted_pattern(A, S->iperm));
    offset_t true_nnz = 0;
    for (index_t j = 0; j < S->n; ++j) {
      true_nnz += static_cast<offset_t>(structure[j].size());
      const index_t s = S->supernode_of[j];
      const std::set<index_t> rows(S->row_indices.begin() + S->row_ptr[s], S->row_indices.begin() + S->row_ptr[s + 1]);
      for (index_t i : structure[j]) EXPECT_TRUE(rows.count(i)) << "L(" << i << ", " << j << ") missing";
      EXPECT_EQ(S->col_counts[j], static_cast<index_t>(structure[j].size()));
    }
    if (!relax) {
      EXPECT_EQ(S->nnz_l, true_nnz);
    }
    EXPECT_GE(S->nnz_l, true_nnz);
    for (index_t s = 0; s < S->num_supernodes; ++s) {
      EXPECT_TRUE(std::is_sorted(S->row_indices.begin() + S->row_ptr[s], S->row_indices.begin() + S->row_ptr[s + 1]));
      if (S->super_parent[s] != -1) {
        EXPECT_GT(S->super_parent[s], s);
      }
    }
  }
}

// analyze() relabels the etree and column counts of its ordering by the postorder instead of recomputing
// them on C = P A P^T: they must equal etree and col_counts of C, computed from scratch.
TEST(Symbolic, EtreeAndColumnCountsAreThoseOfThePermutedMatrix) {
  const std::vector<SparseMatrix> matrices = {laplacian_2d(30, 20), laplacian_2d(17, 23, Stencil::nine_point),
                                              laplacian_3d(8, 9, 10),
                                              laplacian_3d(20, 20, 20, Stencil::twenty_seven_point)};
  const std::vector<std::optional<OrderingMethod>> orderings = {std::nullopt, OrderingMethod::natural,
                                                                OrderingMethod::amd, OrderingMethod::metis};
  for (std::size_t m = 0; m < matrices.size(); ++m)
    for (const auto& ordering : orderings) {
      AnalyzeOptions options;
      options.ordering = ordering;
      const auto S = analyze(matrices[m], options);
      const SparseMatrix C = permuted_pattern(matrices[m], S->iperm);
      const std::vector<index_t> parent = etree(C);
      EXPECT_EQ(S->parent, parent) << "matrix " << m << ", ordering " << to_string(S->ordering);
      EXPECT_EQ(S->col_counts, col_counts(C, parent, postorder(parent)))
          << "matrix " << m << ", ordering " << to_string(S->ordering);
    }
}

class RandomSpd : public ::testing::TestWithParam<OrderingMethod> {};

TEST_P(RandomSpd, ReconstructsAndSolvesLikeDenseLapack) {
  std::mt19937 rng(static_cast<unsigned>(GetParam()) + 3);
  for (index_t n : {1, 5, 64, 257}) {
    const SparseMatrix A = random_spd(n, 5, rng);
    AnalyzeOptions options;
    options.ordering = GetParam();
    const auto S = analyze(A, options);
    const NumericFactor F(S, A);
    const Eigen::MatrixXd Ad = dense(A);
    Eigen::MatrixXd C(n, n);
    for (index_t i = 0; i < n; ++i)
      for (index_t j = 0; j < n; ++j) C(i, j) = Ad(S->perm[i], S->perm[j]);
    const Eigen::MatrixXd L = dense_factor(F);
    EXPECT_LE((C - L * L.transpose()).norm() / Ad.norm(), 10 * n * kEps) << "n = " << n;

    for (index_t nrhs : {1, 3}) {
      Eigen::MatrixXd B = Eigen::MatrixXd::Random(n, nrhs);
      // Dense LAPACK reference: dpotrf + dpotrs on the whole matrix.
      Eigen::MatrixXd Xref = B, Lref = Ad;
      int info = 0;
      const int nn = n, nr = nrhs;
      dpotrf_("L", &nn, Lref.data(), &nn, &info);
      ASSERT_EQ(info, 0);
      dpotrs_("L", &nn, &nr, Lref.data(), &nn, Xref.data(), &nn, &info);
      ASSERT_EQ(info, 0);
      Eigen::MatrixXd X = B;
      solve_in_place(F, X.data(), nrhs, n);
      // cond(A) is small (diagonally dominant): a bound of n eps on the relative difference is ample.
      EXPECT_LE((X - Xref).norm() / Xref.norm(), 10 * n * kEps) << "n = " << n << ", nrhs = " << nrhs;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Orderings, RandomSpd,
                         ::testing::Values(OrderingMethod::natural, OrderingMethod::amd, OrderingMethod::metis),
                         [](const auto& info) { return to_string(info.param); });

// Two threads against one: independent subtrees (a 2D grid), and supernodes large enough to be factored by teams
// (factor/supernodal_tree.hpp: one thread per 4e6 of k m^2): a dense matrix (one supernode of 450 columns) and a 3D
// grid's top separators; then the host solve on two threads.
TEST(Cholesky, ThreadedFactorMatchesSequential) {
  std::mt19937 rng(21);
  std::vector<std::pair<index_t, index_t>> lower;
  std::vector<double> offdiag;
  const index_t n = 450;
  std::vector<double> diag(n, 1.0);
  std::uniform_real_distribution<double> value(-1.0, 1.0);
  for (index_t j = 0; j < n; ++j)
    for (index_t i = j + 1; i < n; ++i) {
      lower.push_back({i, j});
      offdiag.push_back(value(rng) / n);
    }
  const SparseMatrix dense = symmetric_from_lower(n, lower, offdiag, diag);
  for (const SparseMatrix& A : {laplacian_2d(60, 50, Stencil::nine_point), dense, laplacian_3d(20, 20, 20)}) {
    const auto S = analyze(A);
    FactorOptions one, two;
    one.threads = 1;
    two.threads = 2;
    const NumericFactor F1(S, A, one), F2(S, A, two);
    double diff = 0, norm = 0;
    for (std::size_t k = 0; k < F1.values().size(); ++k) {
      diff = std::max(diff, std::abs(F1.values()[k] - F2.values()[k]));
      norm = std::max(norm, std::abs(F1.values()[k]));
    }
    EXPECT_LE(diff, 1000 * kEps * norm);
    std::vector<double> b(A.rows());
    for (index_t i = 0; i < A.rows(); ++i) b[i] = std::sin(i + 1.0);
    for (int nrhs : {1, 3}) {
      std::vector<double> X(static_cast<std::size_t>(A.rows()) * nrhs);
      for (int r = 0; r < nrhs; ++r)
        std::copy(b.begin(), b.end(), X.begin() + static_cast<std::ptrdiff_t>(r) * A.rows());
      solve_in_place(F2, X.data(), nrhs, A.rows());
      for (int r = 0; r < nrhs; ++r)
        EXPECT_LE(backward_error(A, b.data(), X.data() + static_cast<std::ptrdiff_t>(r) * A.rows()).berr, 20 * kEps);
    }
  }
}

TEST(CholeskyErrors, NotPositiveDefiniteInsideATeamNamesTheColumn) {
  // A dense 450 x 450 matrix whose pivot 300 (in the second block of 256 columns) is negative, factored as one
  // supernode by a team of two: the error names column 300 (natural ordering: the factor's numbering is A's).
  const index_t n = 450;
  std::vector<std::pair<index_t, index_t>> lower;
  std::vector<double> offdiag, diag(n, 2.0);
  for (index_t j = 0; j < n; ++j)
    for (index_t i = j + 1; i < n; ++i) {
      lower.push_back({i, j});
      offdiag.push_back(0.5 / n);
    }
  diag[300] = -1.0;
  const SparseMatrix A = symmetric_from_lower(n, lower, offdiag, diag);
  AnalyzeOptions options;
  options.ordering = OrderingMethod::natural;
  FactorOptions two;
  two.threads = 2;
  try {
    NumericFactor F(analyze(A, options), A, two);
    FAIL() << "no error";
  } catch (const NumericalError& e) {
    EXPECT_EQ(e.kind(), NumericalError::Kind::not_positive_definite);
    EXPECT_EQ(e.index(), 300);
  }
}

TEST(Cholesky, ProcessorsLeftToTheCallerClampTheThreads) {
  // processors_left lowers the ceiling of omp_get_num_procs() (never below one thread), for a requested
  // count and for the automatic one; the factor is the same to rounding.
  const SparseMatrix A = laplacian_3d(24, 24, 24);
  const auto S = analyze(A);
  const int procs = omp_get_num_procs();
  FactorOptions all, left;
  all.threads = left.threads = procs;
  left.processors_left = 1;
  const NumericFactor F(S, A, all), G(S, A, left);
  EXPECT_EQ(F.threads(), procs);
  EXPECT_EQ(G.threads(), std::max(1, procs - 1));
  double diff = 0, scale = 0;  // the teams split the updates by their thread count: not bitwise equal
  for (std::size_t p = 0; p < F.values().size(); ++p) {
    diff = std::max(diff, std::abs(F.values()[p] - G.values()[p]));
    scale = std::max(scale, std::abs(F.values()[p]));
  }
  EXPECT_LE(diff, 1e3 * std::numeric_limits<double>::epsilon() * scale);
  FactorOptions automatic;
  automatic.processors_left = procs;
  EXPECT_EQ(NumericFactor(S, A, automatic).threads(), 1);
  left.threads = 0;
  EXPECT_LE(NumericFactor(S, A, left).threads(), std::max(1, procs - 1));
}

TEST(Cholesky, RefactorizeReusesTheAnalysis) {
  SparseMatrix A = laplacian_3d(12, 10, 9, Stencil::twenty_seven_point);
  const auto S = analyze(A);
  NumericFactor F(S, A);
  for (double& v : A.values()) v *= 2.0;  // same pattern, new values
  F.refactorize(A);
  const NumericFactor fresh(S, A);
  EXPECT_EQ(F.values(), fresh.values());
  std::vector<double> b(A.rows(), 1.0), x(A.rows());
  const RefinementResult r = solve_refined(A, F, b.data(), A.rows(), x.data(), A.rows(), 1);
  EXPECT_TRUE(r.converged);
}

TEST(Cholesky, IterativeRefinementReachesTwoEpsilon) {
  const SparseMatrix A = laplacian_2d(40, 40);
  const auto S = analyze(A);
  const NumericFactor F(S, A);
  const index_t n = A.rows(), nrhs = 2;
  std::vector<double> B(static_cast<std::size_t>(n) * nrhs), X(B.size());
  for (std::size_t i = 0; i < B.size(); ++i) B[i] = std::sin(0.1 * static_cast<double>(i));
  const RefinementResult r = solve_refined(A, F, B.data(), n, X.data(), n, nrhs);
  ASSERT_FALSE(r.steps.empty());
  EXPECT_LE(r.steps.back().berr, 2 * kEps);
  EXPECT_EQ(r.solution.berr, r.steps.back().berr);
  EXPECT_TRUE(r.converged);
}

// ---- errors ----

TEST(CholeskyErrors, NotPositiveDefiniteNamesTheOriginalColumn) {
  // diag(1, 2, -3, 4) plus a coupling: column 2 (0-based, original numbering) has the bad pivot.
  const SparseMatrix A = symmetric_from_lower(4, {{3, 0}}, {0.5}, {1, 2, -3, 4});
  for (OrderingMethod method : {OrderingMethod::natural, OrderingMethod::amd}) {
    AnalyzeOptions options;
    options.ordering = method;
    try {
      NumericFactor F(analyze(A, options), A);
      FAIL() << "no error";
    } catch (const NumericalError& e) {
      EXPECT_EQ(e.kind(), NumericalError::Kind::not_positive_definite);
      EXPECT_EQ(e.index(), 2);
      EXPECT_NE(std::string(e.what()).find("not positive definite: the pivot of column 2"), std::string::npos)
          << e.what();
    }
  }
}

TEST(CholeskyErrors, SingularMatrix) {
  // [[1, 1], [1, 1]]: the second pivot is exactly zero.
  const SparseMatrix A = symmetric_from_lower(2, {{1, 0}}, {1.0}, {1, 1});
  AnalyzeOptions natural;
  natural.ordering = OrderingMethod::natural;
  EXPECT_THROW(NumericFactor(analyze(A, natural), A), NumericalError);
  // A pivot that loses every digit to cancellation: [[0.1, 0.1], [0.1, 0.1 + 1e-18]].
  const SparseMatrix B = symmetric_from_lower(2, {{1, 0}}, {0.1}, {0.1, 0.1 + 1e-18});
  try {
    NumericFactor F(analyze(B, natural), B);
    FAIL() << "no error";
  } catch (const NumericalError& e) {
    EXPECT_TRUE(e.kind() == NumericalError::Kind::singular || e.kind() == NumericalError::Kind::not_positive_definite);
    EXPECT_EQ(e.index(), 1);
  }
}

TEST(CholeskyErrors, MissingDiagonalIsNotPositiveDefinite) {
  const SparseMatrix A = SparseMatrix::from_triplets(3, 3, {0, 2, 1, 0, 2}, {0, 0, 1, 2, 2}, {2, 1, 3, 1, 0});
  // Column 2's only diagonal entry is an explicit zero.
  try {
    NumericFactor F(analyze(A), A);
    FAIL() << "no error";
  } catch (const NumericalError& e) {
    EXPECT_EQ(e.kind(), NumericalError::Kind::not_positive_definite);
    EXPECT_EQ(e.index(), 2);
  }
}

TEST(CholeskyErrors, NonSquareNonSymmetricNanAndPatternMismatch) {
  const SparseMatrix rect = SparseMatrix::from_triplets(2, 3, {0, 1}, {0, 1}, {1, 1});
  EXPECT_THROW(analyze(rect), InvalidInput);
  const SparseMatrix unsym_pattern = SparseMatrix::from_triplets(2, 2, {0, 1, 1}, {0, 0, 1}, {2, 1, 2});
  try {
    analyze(unsym_pattern);
    FAIL() << "no error";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("not symmetric"), std::string::npos);
  }
  const SparseMatrix unsym_values = SparseMatrix::from_triplets(2, 2, {0, 1, 0, 1}, {0, 0, 1, 1}, {2, 1, 0.5, 2});
  EXPECT_THROW(NumericFactor(analyze(unsym_values), unsym_values), InvalidInput);
  const SparseMatrix nan = SparseMatrix::from_triplets(2, 2, {0, 1}, {0, 1}, {1, std::nan("")});
  try {
    NumericFactor F(analyze(nan), nan);
    FAIL() << "no error";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("A(1, 1)"), std::string::npos) << e.what();
  }
  const SparseMatrix A = laplacian_2d(4, 4);
  NumericFactor F(analyze(A), A);
  const SparseMatrix other = laplacian_2d(4, 4, Stencil::nine_point);
  EXPECT_THROW(F.refactorize(other), InvalidInput);
  EXPECT_FALSE(F.valid());
  std::vector<double> ones(16, 1.0);
  EXPECT_THROW(solve_in_place(F, ones.data(), 1, 16), InvalidInput);
  F.refactorize(A);
  std::vector<double> b(16, 1.0);
  b[3] = std::numeric_limits<double>::infinity();
  EXPECT_THROW(solve_in_place(F, b.data(), 1, 16), InvalidInput);
  EXPECT_THROW(solve_in_place(F, b.data(), 1, 15), InvalidInput);
}

TEST(CholeskyErrors, EmptyAndOneByOne) {
  const SparseMatrix empty;
  const NumericFactor F0(analyze(empty), empty);
  EXPECT_EQ(F0.symbolic().n, 0);
  solve_in_place(F0, nullptr, 1, 1);
  const SparseMatrix one = SparseMatrix::from_triplets(1, 1, {0}, {0}, {4.0});
  const NumericFactor F1(analyze(one), one);
  double x = 2.0;
  solve_in_place(F1, &x, 1, 1);
  EXPECT_DOUBLE_EQ(x, 0.5);
}

// ---- real matrices: every SPD matrix of ../shared/matrices, against CHOLMOD ----

class RealSpd : public ::testing::TestWithParam<const char*> {};

TEST_P(RealSpd, RefinedBackwardErrorBelow1e14AndForwardErrorLikeCholmod) {
  const std::string file = GetParam();
  SPADE_REQUIRE_MATRIX(file);
  const SparseMatrix A = read_matrix_market(testing::matrix_path(file));
  const index_t n = A.rows();
  std::vector<double> x_true(n), b(n), x(n);
  for (index_t i = 0; i < n; ++i) x_true[i] = 1.0 + std::sin(static_cast<double>(i));
  A.multiply(x_true.data(), b.data());

  const NumericFactor F(analyze(A), A);
  const RefinementResult r = solve_refined(A, F, b.data(), n, x.data(), n, 1);
  EXPECT_LE(r.steps.back().berr, 1e-14) << file;

  testing::CholmodReference cholmod(A);
  cholmod.analyze();
  cholmod.factorize();
  const std::vector<double> xc = cholmod.solve(b, 1);
  double err = 0, err_cholmod = 0, norm = 0;
  for (index_t i = 0; i < n; ++i) {
    err = std::max(err, std::abs(x[i] - x_true[i]));
    err_cholmod = std::max(err_cholmod, std::abs(xc[i] - x_true[i]));
    norm = std::max(norm, std::abs(x_true[i]));
  }
  // Refined spade is at least about as accurate as unrefined CHOLMOD, or within the forward error its
  // backward error allows (to first order, forward error <= kappa_inf(A) * componentwise backward error):
  // on an ill-conditioned matrix CHOLMOD's error moves with the BLAS kernels (lund_a, kappa_1 about 5e6:
  // CHOLMOD's error 1.7e-13 with OpenBLAS on an AMD EPYC, spade's 2.4e-12).
  const double kappa =
      condition_estimate(A, [&F](double* x, index_t k, index_t ld) { solve_in_place(F, x, k, ld); });
  EXPECT_LE(err / norm, std::max(10 * err_cholmod / norm + 100 * kEps, 4 * kappa * std::max(r.steps.back().berr, kEps)))
      << file << ": kappa_1 about " << kappa << ", CHOLMOD's error " << err_cholmod / norm;
}

INSTANTIATE_TEST_SUITE_P(SharedMatrices, RealSpd, ::testing::ValuesIn(testing::spd_matrices()),
                         [](const auto& info) { return testing::matrix_test_name(info.param); });

}  // namespace
}  // namespace spade
