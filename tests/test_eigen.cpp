// Conformance of spade::EigenCholesky (include/spade/eigen.hpp) with Eigen's sparse-solver interface, in
// the manner of Eigen's test/sparse_solver.h: every entry point is compared with Eigen::SimplicialLLT on
// random sparse SPD matrices, in full, lower and upper storage, with one and several right-hand sides,
// and the right-hand side must come back unmodified. Failures must set info(), misuse must throw.
#include "spade/eigen.hpp"  // first: the adapter must compile on its own

#include <gtest/gtest.h>

#include <Eigen/SparseCholesky>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

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

}  // namespace
