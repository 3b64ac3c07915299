// Conformance of spade's Eigen adapters (include/spade/eigen.hpp) with Eigen's sparse-solver interface, in
// the manner of Eigen's test/sparse_solver.h: every entry point is compared with Eigen's own solver on
// random sparse matrices with one and several right-hand sides, and the right-hand side must come back
// unmodified. EigenCholesky against Eigen::SimplicialLLT on SPD matrices in full, lower and upper storage;
// EigenLU against Eigen::SparseLU on unsymmetric matrices with zeros on the diagonal (A X = B and
// A^T X = B), and on a real unsymmetric matrix of ../shared/matrices. Failures must set info(), misuse
// must throw.
#include "spade/eigen.hpp"  // first: the adapter must compile on its own

#include <gtest/gtest.h>

#include <Eigen/SparseCholesky>
#include <Eigen/SparseLU>

#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "../kernels/cuda_check.hpp"
#include "spade/matching.hpp"
#include "spade/matrix_market.hpp"
#include "test_matrices.hpp"

namespace {

using SpMat = Eigen::SparseMatrix<double>;
using Full = spade::EigenCholesky<SpMat, Eigen::Lower | Eigen::Upper>;
using Lower = spade::EigenCholesky<SpMat, Eigen::Lower>;
using Upper = spade::EigenCholesky<SpMat, Eigen::Upper>;

constexpr double eps = std::numeric_limits<double>::epsilon();
// The test matrices are strictly diagonally dominant with margin 1 (condition numbers of order ten), so two
// backward-stable Cholesky solvers agree to a modest multiple of eps.
constexpr double tolerance = 1000 * eps;

/// A random n x n SPD matrix, both triangles stored: about `per_column` random off-diagonal pairs (i, j),
/// (j, i) per column with values in [-1, 1], and a diagonal of 1 + the row's absolute sum.
SpMat random_spd(int n, int per_column, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> index(0, n - 1);
  std::uniform_real_distribution<double> value(-1, 1);
  std::vector<Eigen::Triplet<double>> t;
  for (int j = 0; j < n; ++j)
    for (int k = 0; k < per_column; ++k) {
      const int i = index(gen);
      if (i == j) continue;
      const double v = value(gen);
      t.emplace_back(i, j, v);
      t.emplace_back(j, i, v);
    }
  SpMat A(n, n);
  A.setFromTriplets(t.begin(), t.end());
  Eigen::VectorXd diagonal = Eigen::VectorXd::Ones(n);
  for (int j = 0; j < n; ++j)
    for (SpMat::InnerIterator it(A, j); it; ++it) diagonal[it.row()] += std::abs(it.value());
  for (int j = 0; j < n; ++j) A.coeffRef(j, j) = diagonal[j];
  A.makeCompressed();
  return A;
}

Eigen::MatrixXd random_dense(Eigen::Index rows, Eigen::Index cols, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> value(-1, 1);
  Eigen::MatrixXd B(rows, cols);
  for (Eigen::Index j = 0; j < cols; ++j)
    for (Eigen::Index i = 0; i < rows; ++i) B(i, j) = value(gen);
  return B;
}

/// The reference: Eigen's own sparse Cholesky on the full matrix.
Eigen::MatrixXd reference_solve(const SpMat& A, const Eigen::MatrixXd& B) {
  Eigen::SimplicialLLT<SpMat> llt(A);
  EXPECT_EQ(llt.info(), Eigen::Success);
  return llt.solve(B);
}

double relative_difference(const Eigen::MatrixXd& x, const Eigen::MatrixXd& reference) {
  return (x - reference).norm() / reference.norm();
}

SpMat lower_of(const SpMat& A) { return A.triangularView<Eigen::Lower>(); }
SpMat upper_of(const SpMat& A) { return A.triangularView<Eigen::Upper>(); }

TEST(EigenCholesky, FullStorageOneRightHandSide) {
  const SpMat A = random_spd(300, 4, 1);
  const Eigen::VectorXd b = random_dense(300, 1, 2);
  const Eigen::VectorXd b_copy = b;
  Full solver(A);
  ASSERT_EQ(solver.info(), Eigen::Success) << solver.errorMessage();
  EXPECT_TRUE(solver.errorMessage().empty());
  EXPECT_EQ(solver.rows(), 300);
  EXPECT_EQ(solver.cols(), 300);
  const auto x = solver.solve(b);
  static_assert(std::is_same<std::decay_t<decltype(x)>, Eigen::VectorXd>::value, "a vector for a vector");
  EXPECT_LE(relative_difference(x, reference_solve(A, b)), tolerance);
  EXPECT_EQ(b, b_copy) << "solve() modified the right-hand side";
}

TEST(EigenCholesky, LowerStorageSeveralRightHandSides) {
  const SpMat A = random_spd(400, 3, 3);
  const Eigen::MatrixXd B = random_dense(400, 5, 4);
  const Eigen::MatrixXd B_copy = B;
  Lower solver(lower_of(A));
  ASSERT_EQ(solver.info(), Eigen::Success) << solver.errorMessage();
  const Eigen::MatrixXd X = solver.solve(B);
  ASSERT_EQ(X.cols(), 5);
  EXPECT_LE(relative_difference(X, reference_solve(A, B)), tolerance);
  EXPECT_EQ(B, B_copy) << "solve() modified the right-hand side";
}

TEST(EigenCholesky, UpperStorage) {
  const SpMat A = random_spd(250, 5, 5);
  const Eigen::MatrixXd B = random_dense(250, 2, 6);
  Upper solver(upper_of(A));
  ASSERT_EQ(solver.info(), Eigen::Success) << solver.errorMessage();
  EXPECT_LE(relative_difference(solver.solve(B), reference_solve(A, B)), tolerance);
}

TEST(EigenCholesky, LowerModeIgnoresTheUpperTriangle) {
  const SpMat A = random_spd(200, 4, 7);
  // Full storage whose upper triangle holds other numbers (and an extra entry): only the lower one counts,
  // as for SimplicialLLT<..., Lower>.
  SpMat M = A;
  for (int j = 0; j < M.outerSize(); ++j)
    for (SpMat::InnerIterator it(M, j); it; ++it)
      if (it.row() < j) it.valueRef() *= 3;
  M.coeffRef(0, 199) += 5;
  const Eigen::VectorXd b = random_dense(200, 1, 8);
  Lower solver(M);
  ASSERT_EQ(solver.info(), Eigen::Success) << solver.errorMessage();
  EXPECT_LE(relative_difference(solver.solve(b), reference_solve(A, b)), tolerance);
}

TEST(EigenCholesky, FixedColumnCountKeepsItsType) {
  const SpMat A = random_spd(100, 3, 9);
  const Eigen::Matrix<double, Eigen::Dynamic, 3> B = random_dense(100, 3, 10);
  Full solver(A);
  const auto X = solver.solve(B);
  static_assert(std::is_same<std::decay_t<decltype(X)>, Eigen::Matrix<double, Eigen::Dynamic, 3>>::value,
                "the column count of B is kept");
  EXPECT_LE(relative_difference(X, reference_solve(A, B)), tolerance);
}

TEST(EigenCholesky, ComputeEqualsAnalyzePatternThenFactorize) {
  const SpMat A = random_spd(300, 4, 11);
  const Eigen::MatrixXd B = random_dense(300, 3, 12);
  Lower one;
  one.compute(A);
  Lower two;
  two.analyzePattern(A);
  ASSERT_EQ(two.info(), Eigen::Success);
  ASSERT_NE(two.symbolic(), nullptr);
  EXPECT_EQ(two.numeric(), nullptr);
  two.factorize(A);
  ASSERT_EQ(one.info(), Eigen::Success);
  ASSERT_EQ(two.info(), Eigen::Success);
  EXPECT_EQ(one.symbolic()->perm, two.symbolic()->perm);
  EXPECT_EQ(one.symbolic()->nnz_l, two.symbolic()->nnz_l);
  EXPECT_LE(relative_difference(two.solve(B), one.solve(B)), 10 * eps);
}

TEST(EigenCholesky, FactorizeAgainRefactorizesWithNewValues) {
  const SpMat A1 = random_spd(350, 4, 13);
  SpMat A2 = A1;  // same pattern, new values, still diagonally dominant
  for (int j = 0; j < A2.outerSize(); ++j)
    for (SpMat::InnerIterator it(A2, j); it; ++it) it.valueRef() = it.row() == j ? it.value() + 2 : -0.5 * it.value();
  const Eigen::MatrixXd B = random_dense(350, 2, 14);
  Lower solver;
  solver.analyzePattern(A1);
  const auto symbolic = solver.symbolic();
  solver.factorize(A1);
  ASSERT_EQ(solver.info(), Eigen::Success);
  const spade::NumericFactor* numeric = solver.numeric();
  EXPECT_LE(relative_difference(solver.solve(B), reference_solve(A1, B)), tolerance);
  solver.factorize(A2);
  ASSERT_EQ(solver.info(), Eigen::Success) << solver.errorMessage();
  EXPECT_EQ(solver.symbolic(), symbolic) << "refactorization must reuse the analysis";
  EXPECT_EQ(solver.numeric(), numeric) << "refactorization must reuse the numeric factor";
  EXPECT_LE(relative_difference(solver.solve(B), reference_solve(A2, B)), tolerance);
}

TEST(EigenCholesky, EveryOrderingGivesTheSameSolution) {
  const SpMat A = random_spd(300, 4, 15);
  const Eigen::VectorXd b = random_dense(300, 1, 16);
  const Eigen::VectorXd reference = reference_solve(A, b);
  for (const spade::OrderingMethod method :
       {spade::OrderingMethod::natural, spade::OrderingMethod::amd, spade::OrderingMethod::metis}) {
    spade::SolverOptions options;
    options.analyze.ordering = method;
    options.threads = 1;
    Lower solver(options);
    solver.compute(A);
    ASSERT_EQ(solver.info(), Eigen::Success) << solver.errorMessage();
    EXPECT_EQ(solver.symbolic()->ordering, method);
    EXPECT_LE(relative_difference(solver.solve(b), reference), tolerance) << spade::to_string(method);
  }
}

TEST(EigenCholesky, UncompressedMatrix) {
  const SpMat A = random_spd(200, 3, 17);
  SpMat U = A;
  U.uncompress();
  ASSERT_FALSE(U.isCompressed());
  const Eigen::VectorXd b = random_dense(200, 1, 18);
  Full solver(U);
  ASSERT_EQ(solver.info(), Eigen::Success) << solver.errorMessage();
  EXPECT_LE(relative_difference(solver.solve(b), reference_solve(A, b)), tolerance);
}

TEST(EigenCholesky, SixtyFourBitStorageIndex) {
  const SpMat A = random_spd(200, 3, 19);
  const Eigen::SparseMatrix<double, Eigen::ColMajor, std::int64_t> L = lower_of(A);
  const Eigen::VectorXd b = random_dense(200, 1, 20);
  spade::EigenCholesky<Eigen::SparseMatrix<double, Eigen::ColMajor, std::int64_t>> solver(L);
  ASSERT_EQ(solver.info(), Eigen::Success) << solver.errorMessage();
  EXPECT_LE(relative_difference(solver.solve(b), reference_solve(A, b)), tolerance);
}

TEST(EigenCholesky, NotPositiveDefiniteIsANumericalIssue) {
  SpMat A = random_spd(200, 3, 21);
  A.coeffRef(57, 57) = -1;
  Lower solver(A);
  EXPECT_EQ(solver.info(), Eigen::NumericalIssue);
  EXPECT_NE(solver.errorMessage().find("not positive definite"), std::string::npos) << solver.errorMessage();
  ASSERT_NE(solver.error(), nullptr);
  try {
    std::rethrow_exception(solver.error());
  } catch (const spade::NumericalError& e) {
    EXPECT_EQ(e.kind(), spade::NumericalError::Kind::not_positive_definite);
    EXPECT_EQ(e.index(), 57) << "the failing column, in A's numbering";
  } catch (...) {
    ADD_FAILURE() << "error() holds something other than a spade::NumericalError";
  }
  EXPECT_EQ(solver.numeric(), nullptr);
  EXPECT_THROW(solver.solve(Eigen::VectorXd::Ones(200)), spade::InvalidInput);

  // The solver recovers with a good matrix.
  const SpMat good = random_spd(200, 3, 22);
  solver.compute(good);
  EXPECT_EQ(solver.info(), Eigen::Success) << solver.errorMessage();
  EXPECT_TRUE(solver.errorMessage().empty());
  EXPECT_EQ(solver.error(), nullptr);
}

TEST(EigenCholesky, FailedRefactorizationDropsTheOldFactor) {
  const SpMat A = random_spd(100, 3, 23);
  SpMat bad = A;
  bad.coeffRef(10, 10) = -1;
  Lower solver(A);
  ASSERT_EQ(solver.info(), Eigen::Success);
  solver.factorize(bad);
  EXPECT_EQ(solver.info(), Eigen::NumericalIssue);
  EXPECT_THROW(solver.solve(Eigen::VectorXd::Ones(100)), spade::InvalidInput);
}

TEST(EigenCholesky, NonSymmetricFullStorageIsInvalidInput) {
  SpMat A = random_spd(100, 3, 24);
  for (SpMat::InnerIterator it(A, 50); it; ++it)
    if (it.row() != 50) {
      it.valueRef() += 0.25;  // A(row, 50) no longer equals A(50, row)
      break;
    }
  Full solver(A);
  EXPECT_EQ(solver.info(), Eigen::InvalidInput);
  EXPECT_NE(solver.errorMessage().find("symmetric"), std::string::npos) << solver.errorMessage();
}

TEST(EigenCholesky, NonSquareIsInvalidInput) {
  const SpMat A(5, 4);
  Lower solver(A);
  EXPECT_EQ(solver.info(), Eigen::InvalidInput);
  EXPECT_NE(solver.errorMessage().find("square"), std::string::npos) << solver.errorMessage();
  EXPECT_EQ(solver.symbolic(), nullptr);
}

TEST(EigenCholesky, NotFiniteValueIsInvalidInput) {
  SpMat A = random_spd(50, 3, 25);
  A.coeffRef(7, 7) = std::numeric_limits<double>::quiet_NaN();
  Lower solver(A);
  EXPECT_EQ(solver.info(), Eigen::InvalidInput);
  EXPECT_FALSE(solver.errorMessage().empty());
}

TEST(EigenCholesky, FactorizeWithAnotherPatternIsInvalidInput) {
  const SpMat A = random_spd(100, 3, 26);
  const SpMat other = random_spd(100, 3, 27);
  Lower solver;
  solver.analyzePattern(A);
  solver.factorize(other);
  EXPECT_EQ(solver.info(), Eigen::InvalidInput);
  EXPECT_NE(solver.errorMessage().find("pattern"), std::string::npos) << solver.errorMessage();
}

TEST(EigenCholesky, MisuseThrows) {
  const SpMat A = random_spd(60, 3, 28);
  Lower solver;
  EXPECT_EQ(solver.info(), Eigen::Success);
  EXPECT_EQ(solver.rows(), 0);
  EXPECT_THROW(solver.factorize(A), spade::InvalidInput);
  EXPECT_THROW(solver.solve(Eigen::VectorXd::Ones(60)), spade::InvalidInput);
  solver.analyzePattern(A);
  EXPECT_THROW(solver.solve(Eigen::VectorXd::Ones(60)), spade::InvalidInput);
  solver.factorize(A);
  ASSERT_EQ(solver.info(), Eigen::Success);
  EXPECT_THROW(solver.solve(Eigen::VectorXd::Ones(59)), spade::InvalidInput);
  Eigen::VectorXd b = Eigen::VectorXd::Ones(60);
  b[3] = std::numeric_limits<double>::infinity();
  EXPECT_THROW(solver.solve(b), spade::InvalidInput);
}

TEST(EigenCholesky, OneByOne) {
  SpMat A(1, 1);
  A.insert(0, 0) = 4;
  Lower solver(A);
  ASSERT_EQ(solver.info(), Eigen::Success) << solver.errorMessage();
  const Eigen::VectorXd x = solver.solve(Eigen::VectorXd::Constant(1, 2.0));
  EXPECT_NEAR(x[0], 0.5, 4 * eps);
}

TEST(EigenCholesky, EmptyMatrix) {
  const SpMat A(0, 0);
  Lower solver(A);
  ASSERT_EQ(solver.info(), Eigen::Success) << solver.errorMessage();
  EXPECT_EQ(solver.rows(), 0);
  const Eigen::MatrixXd X = solver.solve(Eigen::MatrixXd(0, 2));
  EXPECT_EQ(X.rows(), 0);
  EXPECT_EQ(X.cols(), 2);
}

// ---- EigenLU ---------------------------------------------------------------------------------------------

using LU = spade::EigenLU<SpMat>;

/// A random n x n unsymmetric matrix that only a row permutation makes factorable without pivoting: D with
/// about `per_column` random off-diagonal entries per column (values in [-1, 1]; neither pattern nor values
/// symmetric) and a diagonal of 1 + the row's absolute sum (strictly diagonally dominant by rows, so
/// kappa_inf(D) is of order ten), then D's rows permuted at random, which leaves most of the diagonal zero.
SpMat random_unsymmetric(int n, int per_column, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> index(0, n - 1);
  std::uniform_real_distribution<double> value(-1, 1);
  std::vector<double> row_sum(n, 1.0);
  std::vector<Eigen::Triplet<double>> off;
  for (int j = 0; j < n; ++j)
    for (int k = 0; k < per_column; ++k) {
      const int i = index(gen);
      if (i == j) continue;
      const double v = value(gen);
      off.emplace_back(i, j, v);
      row_sum[i] += std::abs(v);  // duplicates are summed: the bound still holds
    }
  std::vector<int> row_of(n);
  std::iota(row_of.begin(), row_of.end(), 0);
  std::shuffle(row_of.begin(), row_of.end(), gen);
  std::vector<Eigen::Triplet<double>> t;
  for (const auto& e : off) t.emplace_back(row_of[e.row()], e.col(), e.value());
  for (int i = 0; i < n; ++i) t.emplace_back(row_of[i], i, row_sum[i]);
  SpMat A(n, n);
  A.setFromTriplets(t.begin(), t.end());
  A.makeCompressed();
  return A;
}

/// The reference: Eigen's own sparse LU (partial pivoting) for A X = B or A^T X = B.
Eigen::MatrixXd reference_lu_solve(const SpMat& A, const Eigen::MatrixXd& B, bool transposed = false) {
  Eigen::SparseLU<SpMat> lu(A);
  EXPECT_EQ(lu.info(), Eigen::Success) << lu.lastErrorMessage();
  return transposed ? Eigen::MatrixXd(lu.transpose().solve(B)) : Eigen::MatrixXd(lu.solve(B));
}

/// max over rows and columns of |B - A X|_i / (|A| |X| + |B|)_i: the componentwise backward error (Oettli
/// and Prager), computed here independently of spade's refinement.
double backward_error(const SpMat& A, const Eigen::MatrixXd& X, const Eigen::MatrixXd& B) {
  const Eigen::MatrixXd R = (B - A * X).cwiseAbs();
  const Eigen::MatrixXd scale = A.cwiseAbs() * X.cwiseAbs() + B.cwiseAbs();
  double berr = 0;
  for (Eigen::Index j = 0; j < R.cols(); ++j)
    for (Eigen::Index i = 0; i < R.rows(); ++i)
      if (scale(i, j) > 0) berr = std::max(berr, R(i, j) / scale(i, j));
  return berr;
}

TEST(EigenLU, OneRightHandSide) {
  const SpMat A = random_unsymmetric(300, 4, 101);
  int zero_diagonal = 0;
  for (int j = 0; j < 300; ++j) zero_diagonal += A.coeff(j, j) == 0;
  ASSERT_GT(zero_diagonal, 200) << "the test needs the matching";
  const Eigen::VectorXd b = random_dense(300, 1, 102);
  const Eigen::VectorXd b_copy = b;
  LU solver(A);
  ASSERT_EQ(solver.info(), Eigen::Success) << solver.errorMessage();
  EXPECT_TRUE(solver.errorMessage().empty());
  EXPECT_EQ(solver.rows(), 300);
  EXPECT_EQ(solver.cols(), 300);
  EXPECT_FALSE(solver.lastRefinement().has_value());
  const auto x = solver.solve(b);
  static_assert(std::is_same<std::decay_t<decltype(x)>, Eigen::VectorXd>::value, "a vector for a vector");
  EXPECT_LE(relative_difference(x, reference_lu_solve(A, b)), tolerance);
  EXPECT_EQ(b, b_copy) << "solve() modified the right-hand side";
  ASSERT_TRUE(solver.lastRefinement().has_value());
  EXPECT_TRUE(solver.lastRefinement()->converged);
  EXPECT_LE(solver.lastRefinement()->solution.berr, 2 * eps);
  EXPECT_LE(backward_error(A, x, b), 4 * eps);
  ASSERT_NE(solver.report(), nullptr);
  EXPECT_EQ(solver.report()->factorization, spade::Factorization::lu);
  EXPECT_EQ(solver.report()->perturbed_pivots, 0);
  EXPECT_EQ(solver.report()->gpu, spade::cuda_device_available()) << solver.report()->placement_reason;
}

TEST(EigenLU, SeveralRightHandSides) {
  const SpMat A = random_unsymmetric(400, 3, 103);
  const Eigen::MatrixXd B = random_dense(400, 5, 104);
  const Eigen::MatrixXd B_copy = B;
  LU solver(A);
  ASSERT_EQ(solver.info(), Eigen::Success) << solver.errorMessage();
  const Eigen::MatrixXd X = solver.solve(B);
  ASSERT_EQ(X.cols(), 5);
  EXPECT_LE(relative_difference(X, reference_lu_solve(A, B)), tolerance);
  EXPECT_EQ(B, B_copy) << "solve() modified the right-hand side";
  EXPECT_LE(backward_error(A, X, B), 4 * eps);
}

TEST(EigenLU, TransposedSolve) {
  const SpMat A = random_unsymmetric(350, 4, 105);
  const Eigen::MatrixXd B = random_dense(350, 3, 106);
  const Eigen::MatrixXd B_copy = B;
  LU solver(A);
  ASSERT_EQ(solver.info(), Eigen::Success) << solver.errorMessage();
  const Eigen::MatrixXd X = solver.transpose().solve(B);
  EXPECT_LE(relative_difference(X, reference_lu_solve(A, B, true)), tolerance);
  EXPECT_EQ(B, B_copy) << "transpose().solve() modified the right-hand side";
  const SpMat At = A.transpose();
  EXPECT_LE(backward_error(At, X, B), 4 * eps);
  ASSERT_TRUE(solver.lastRefinement().has_value());
  EXPECT_TRUE(solver.lastRefinement()->converged);
  // A vector stays a vector; A^T X = B and A X = B are different systems.
  const Eigen::VectorXd b = B.col(0);
  const auto xt = solver.transpose().solve(b);
  static_assert(std::is_same<std::decay_t<decltype(xt)>, Eigen::VectorXd>::value, "a vector for a vector");
  EXPECT_LE(relative_difference(xt, X.col(0)), 10 * eps);
  EXPECT_GT(relative_difference(solver.solve(b), X.col(0)), 1e-3);
}

TEST(EigenLU, FixedColumnCountKeepsItsType) {
  const SpMat A = random_unsymmetric(100, 3, 107);
  const Eigen::Matrix<double, Eigen::Dynamic, 3> B = random_dense(100, 3, 108);
  LU solver(A);
  const auto X = solver.solve(B);
  static_assert(std::is_same<std::decay_t<decltype(X)>, Eigen::Matrix<double, Eigen::Dynamic, 3>>::value,
                "the column count of B is kept");
  EXPECT_LE(relative_difference(X, reference_lu_solve(A, B)), tolerance);
}

TEST(EigenLU, ComputeEqualsAnalyzePatternThenFactorize) {
  const SpMat A = random_unsymmetric(300, 4, 109);
  const Eigen::MatrixXd B = random_dense(300, 3, 110);
  LU one;
  one.compute(A);
  LU two;
  two.analyzePattern(A);
  ASSERT_EQ(two.info(), Eigen::Success) << two.errorMessage();
  ASSERT_NE(two.symbolic(), nullptr);
  EXPECT_EQ(two.numeric(), nullptr);
  two.factorize(A);
  ASSERT_EQ(one.info(), Eigen::Success);
  ASSERT_EQ(two.info(), Eigen::Success);
  EXPECT_EQ(one.symbolic()->perm, two.symbolic()->perm);
  EXPECT_EQ(one.numeric()->symbolic().row_perm, two.numeric()->symbolic().row_perm);
  EXPECT_LE(relative_difference(two.solve(B), one.solve(B)), 10 * eps);
}

TEST(EigenLU, FactorizeAgainRefactorizesWithNewValues) {
  const SpMat A1 = random_unsymmetric(350, 4, 111);
  SpMat A2 = A1;  // same pattern, new values; the dominant entries stay where the matching put them
  for (int j = 0; j < A2.outerSize(); ++j)
    for (SpMat::InnerIterator it(A2, j); it; ++it) it.valueRef() *= std::abs(it.value()) > 1 ? 1.5 : -0.5;
  const Eigen::MatrixXd B = random_dense(350, 2, 112);
  LU solver;
  solver.analyzePattern(A1);
  const auto symbolic = solver.symbolic();
  solver.factorize(A1);
  ASSERT_EQ(solver.info(), Eigen::Success) << solver.errorMessage();
  const spade::LuFactor* numeric = solver.numeric();
  EXPECT_LE(relative_difference(solver.solve(B), reference_lu_solve(A1, B)), tolerance);
  solver.factorize(A2);
  ASSERT_EQ(solver.info(), Eigen::Success) << solver.errorMessage();
  EXPECT_EQ(solver.symbolic(), symbolic) << "refactorization must reuse the analysis";
  EXPECT_EQ(solver.numeric(), numeric) << "refactorization must reuse the numeric factor";
  EXPECT_FALSE(solver.lastRefinement().has_value()) << "a refinement of the old factor";
  EXPECT_LE(relative_difference(solver.solve(B), reference_lu_solve(A2, B)), tolerance);
  EXPECT_LE(relative_difference(solver.transpose().solve(B), reference_lu_solve(A2, B, true)), tolerance)
      << "the transposed solve must refine against the new A";
}

TEST(EigenLU, EveryOrderingGivesTheSameSolution) {
  const SpMat A = random_unsymmetric(300, 4, 113);
  const Eigen::VectorXd b = random_dense(300, 1, 114);
  const Eigen::VectorXd reference = reference_lu_solve(A, b);
  for (const spade::OrderingMethod method : {spade::OrderingMethod::natural, spade::OrderingMethod::amd,
                                             spade::OrderingMethod::metis, spade::OrderingMethod::colamd}) {
    spade::SolverOptions options;
    options.analyze.ordering = method;
    options.threads = 1;
    LU solver(options);
    solver.compute(A);
    ASSERT_EQ(solver.info(), Eigen::Success) << solver.errorMessage();
    EXPECT_EQ(solver.symbolic()->ordering, method);
    EXPECT_LE(relative_difference(solver.solve(b), reference), tolerance) << spade::to_string(method);
  }
}

TEST(EigenLU, UncompressedSixtyFourBitMatrix) {
  const SpMat A = random_unsymmetric(200, 3, 115);
  Eigen::SparseMatrix<double, Eigen::ColMajor, std::int64_t> U = A;
  U.uncompress();
  ASSERT_FALSE(U.isCompressed());
  const Eigen::VectorXd b = random_dense(200, 1, 116);
  spade::EigenLU<Eigen::SparseMatrix<double, Eigen::ColMajor, std::int64_t>> solver(U);
  ASSERT_EQ(solver.info(), Eigen::Success) << solver.errorMessage();
  EXPECT_LE(relative_difference(solver.solve(b), reference_lu_solve(A, b)), tolerance);
}

TEST(EigenLU, TinyPivotIsReplacedReportedAndRefinedAway) {
  // [1 1; 1 1 + d], d tiny: the second pivot is below sqrt(eps) ||A|| and replaced (tests/test_lu.cpp has
  // the same matrix); refinement recovers the solution of the nonsingular matrix (kappa about 4e12).
  const double d = 1e-12;
  SpMat A(2, 2);
  A.insert(0, 0) = 1;
  A.insert(1, 0) = 1;
  A.insert(0, 1) = 1;
  A.insert(1, 1) = 1 + d;
  spade::SolverOptions options;
  options.analyze.ordering = spade::OrderingMethod::natural;
  options.analyze.supernodes.relax = false;
  LU solver(options);
  solver.compute(A);
  ASSERT_EQ(solver.info(), Eigen::Success) << solver.errorMessage();
  EXPECT_EQ(solver.report()->perturbed_pivots, 1);
  EXPECT_EQ(solver.numeric()->perturbed_pivots(), 1);
  const Eigen::Vector2d b(2, 2 + d);  // x = (1, 1)
  const Eigen::VectorXd x = solver.solve(b);
  ASSERT_TRUE(solver.lastRefinement().has_value());
  EXPECT_GT(solver.lastRefinement()->steps.size(), 1u) << "the perturbed factor needs refinement";
  EXPECT_LE(solver.lastRefinement()->solution.berr, 1e-12);
}

TEST(EigenLU, NumericallySingularIsReportedNotHidden) {
  // Structurally nonsingular, two equal columns: the factorization succeeds with replaced pivots, and the
  // refinement of an inconsistent system says that it did not converge, or the solve that A is singular.
  SpMat A(3, 3);
  A.insert(0, 0) = 1;
  A.insert(1, 0) = 2;
  A.insert(0, 1) = 1;
  A.insert(1, 1) = 2;
  A.insert(2, 2) = 3;
  LU solver(A);
  ASSERT_EQ(solver.info(), Eigen::Success) << solver.errorMessage();
  EXPECT_GE(solver.report()->perturbed_pivots, 1);
  // The correction of the replaced pivots finds A singular, or the refinement says it did not converge.
  try {
    solver.solve(Eigen::Vector3d(1, 0, 1));
    ASSERT_TRUE(solver.lastRefinement().has_value());
    EXPECT_FALSE(solver.lastRefinement()->converged);
    EXPECT_NE(solver.lastRefinement()->stop, spade::RefinementResult::Stop::converged);
  } catch (const spade::NumericalError& e) {
    EXPECT_EQ(e.kind(), spade::NumericalError::Kind::singular) << e.what();
  }
}

TEST(EigenLU, StructurallySingularIsANumericalIssue) {
  // Columns 0 and 1 have entries in row 0 only: no perfect matching, whatever the values.
  SpMat A(3, 3);
  A.insert(0, 0) = 1;
  A.insert(0, 1) = 2;
  A.insert(1, 2) = 3;
  A.insert(2, 2) = 4;
  LU solver(A);
  EXPECT_EQ(solver.info(), Eigen::NumericalIssue);
  EXPECT_FALSE(solver.errorMessage().empty());
  ASSERT_NE(solver.error(), nullptr);
  try {
    std::rethrow_exception(solver.error());
  } catch (const spade::StructurallySingular& e) {
    EXPECT_EQ(e.kind(), spade::NumericalError::Kind::singular);
    EXPECT_GE(e.index(), 0);
  } catch (...) {
    ADD_FAILURE() << "error() holds something other than a spade::StructurallySingular";
  }
  EXPECT_EQ(solver.symbolic(), nullptr);
  EXPECT_EQ(solver.numeric(), nullptr);
  EXPECT_THROW(solver.solve(Eigen::VectorXd::Ones(3)), spade::InvalidInput);
  EXPECT_THROW(solver.factorize(A), spade::InvalidInput);

  // An empty column too; then the solver recovers with a good matrix.
  SpMat empty_column(3, 3);
  empty_column.insert(0, 0) = 1;
  empty_column.insert(1, 0) = 1;
  empty_column.insert(2, 2) = 1;
  solver.compute(empty_column);
  EXPECT_EQ(solver.info(), Eigen::NumericalIssue);
  solver.compute(random_unsymmetric(50, 3, 117));
  EXPECT_EQ(solver.info(), Eigen::Success) << solver.errorMessage();
  EXPECT_TRUE(solver.errorMessage().empty());
  EXPECT_EQ(solver.error(), nullptr);
}

TEST(EigenLU, BadInputIsInvalidInput) {
  LU non_square(SpMat(5, 4));
  EXPECT_EQ(non_square.info(), Eigen::InvalidInput);
  EXPECT_NE(non_square.errorMessage().find("square"), std::string::npos) << non_square.errorMessage();

  SpMat nan = random_unsymmetric(50, 3, 118);
  nan.coeffRef(7, 3) = std::numeric_limits<double>::quiet_NaN();
  LU not_finite(nan);
  EXPECT_EQ(not_finite.info(), Eigen::InvalidInput);
  EXPECT_FALSE(not_finite.errorMessage().empty());

  const SpMat A = random_unsymmetric(100, 3, 119);
  LU other_pattern;
  other_pattern.analyzePattern(A);
  ASSERT_EQ(other_pattern.info(), Eigen::Success);
  other_pattern.factorize(random_unsymmetric(100, 3, 120));
  EXPECT_EQ(other_pattern.info(), Eigen::InvalidInput);
  EXPECT_NE(other_pattern.errorMessage().find("pattern"), std::string::npos) << other_pattern.errorMessage();
  EXPECT_THROW(other_pattern.solve(Eigen::VectorXd::Ones(100)), spade::InvalidInput);

  // A NaN in a refactorization drops the old factor.
  LU refactorized(A);
  ASSERT_EQ(refactorized.info(), Eigen::Success);
  SpMat bad = A;
  bad.valuePtr()[0] = std::numeric_limits<double>::infinity();
  refactorized.factorize(bad);
  EXPECT_EQ(refactorized.info(), Eigen::InvalidInput);
  EXPECT_EQ(refactorized.numeric(), nullptr);
  EXPECT_THROW(refactorized.transpose().solve(Eigen::VectorXd::Ones(100)), spade::InvalidInput);
}

TEST(EigenLU, PlacementGpuSolvesOnTheGpuOrFailsToFactorize) {
  spade::SolverOptions gpu;
  gpu.placement = spade::Placement::gpu;
  const SpMat A = random_unsymmetric(300, 4, 122);
  const Eigen::VectorXd b = random_dense(300, 1, 123);
  LU solver(gpu);
  solver.compute(A);
  if (!spade::cuda_device_available()) {
    EXPECT_EQ(solver.info(), Eigen::InvalidInput);
    EXPECT_NE(solver.errorMessage().find("placement gpu"), std::string::npos) << solver.errorMessage();
    return;
  }
  ASSERT_EQ(solver.info(), Eigen::Success) << solver.errorMessage();
  EXPECT_TRUE(solver.report()->gpu);
  EXPECT_LE(relative_difference(solver.solve(b), reference_lu_solve(A, b)), tolerance);
  EXPECT_LE(solver.lastRefinement()->solution.berr, 2 * eps);
  const Eigen::VectorXd y = solver.transpose().solve(b);
  const SpMat At = A.transpose();
  EXPECT_LE(backward_error(At, y, b), 4 * eps);
}

TEST(EigenLU, MisuseThrows) {
  const SpMat A = random_unsymmetric(60, 3, 121);
  LU solver;
  EXPECT_EQ(solver.info(), Eigen::Success);
  EXPECT_EQ(solver.rows(), 0);
  EXPECT_EQ(solver.report(), nullptr);
  EXPECT_THROW(solver.factorize(A), spade::InvalidInput);
  EXPECT_THROW(solver.solve(Eigen::VectorXd::Ones(60)), spade::InvalidInput);
  solver.analyzePattern(A);
  EXPECT_THROW(solver.solve(Eigen::VectorXd::Ones(60)), spade::InvalidInput);
  EXPECT_THROW(solver.transpose().solve(Eigen::VectorXd::Ones(60)), spade::InvalidInput);
  solver.factorize(A);
  ASSERT_EQ(solver.info(), Eigen::Success);
  EXPECT_THROW(solver.solve(Eigen::VectorXd::Ones(59)), spade::InvalidInput);
  EXPECT_THROW(solver.transpose().solve(Eigen::VectorXd::Ones(61)), spade::InvalidInput);
  Eigen::VectorXd b = Eigen::VectorXd::Ones(60);
  b[3] = std::numeric_limits<double>::infinity();
  EXPECT_THROW(solver.solve(b), spade::InvalidInput);
  EXPECT_THROW(solver.transpose().solve(b), spade::InvalidInput);
}

TEST(EigenLU, OneByOneAndEmpty) {
  SpMat A(1, 1);
  A.insert(0, 0) = -4;
  LU solver(A);
  ASSERT_EQ(solver.info(), Eigen::Success) << solver.errorMessage();
  EXPECT_NEAR(solver.solve(Eigen::VectorXd::Constant(1, 2.0))[0], -0.5, 4 * eps);
  EXPECT_NEAR(solver.transpose().solve(Eigen::VectorXd::Constant(1, 2.0))[0], -0.5, 4 * eps);

  LU empty{SpMat(0, 0)};
  ASSERT_EQ(empty.info(), Eigen::Success) << empty.errorMessage();
  EXPECT_EQ(empty.rows(), 0);
  const Eigen::MatrixXd X = empty.solve(Eigen::MatrixXd(0, 2));
  EXPECT_EQ(X.rows(), 0);
  EXPECT_EQ(X.cols(), 2);
}

TEST(EigenLU, RealUnsymmetricMatrix) {
  // orsirr_1 (Harwell-Boeing, oil reservoir simulation; n = 1030): unsymmetric pattern and values.
  const std::string file = "orsirr_1.mtx.gz";
  SPADE_REQUIRE_MATRIX(file);
  const spade::SparseMatrix S = spade::read_matrix_market(spade::testing::matrix_path(file));
  std::vector<Eigen::Triplet<double>> t;
  for (spade::index_t j = 0; j < S.cols(); ++j)
    for (spade::offset_t p = S.col_ptr()[j]; p < S.col_ptr()[j + 1]; ++p)
      t.emplace_back(S.row_ind()[p], j, S.values()[p]);
  SpMat A(S.rows(), S.cols());
  A.setFromTriplets(t.begin(), t.end());
  const Eigen::MatrixXd B = random_dense(A.rows(), 2, 122);
  LU solver(A);
  ASSERT_EQ(solver.info(), Eigen::Success) << solver.errorMessage();
  Eigen::SparseLU<SpMat> reference(A);
  ASSERT_EQ(reference.info(), Eigen::Success) << reference.lastErrorMessage();
  // At least as accurate as Eigen's partial pivoting, in the backward error that refinement drives down.
  const Eigen::MatrixXd X = solver.solve(B);
  EXPECT_TRUE(solver.lastRefinement()->converged) << solver.lastRefinement()->solution.berr;
  EXPECT_LE(backward_error(A, X, B), std::max(backward_error(A, reference.solve(B), B), 4 * eps));
  const Eigen::MatrixXd Xt = solver.transpose().solve(B);
  const SpMat At = A.transpose();
  const Eigen::MatrixXd Xt_reference = reference.transpose().solve(B);
  EXPECT_LE(backward_error(At, Xt, B), std::max(backward_error(At, Xt_reference, B), 4 * eps));
}

}  // namespace
