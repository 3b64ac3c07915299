// Supernodal LU with static pivoting: random unsymmetric matrices against dense LAPACK getrf/getrs (both
// A X = B and A^T X = B, every ordering, one and two threads), the tiny-pivot replacement, refactorization,
// the real unsymmetric and symmetric indefinite matrices to a backward error of 1e-13 with UMFPACK as the
// reference (the correction of the replaced pivots where they stall refinement with the factor alone, and a
// factor at kLuCorrectedPivotTolerance where the default one's growth defeats both), the correction against
// dense LAPACK, and the bad-input errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "error_of.hpp"
#include "lu_matrices.hpp"
#include "lu_reference.hpp"
#include "spade/error.hpp"
#include "spade/generators.hpp"
#include "spade/lu.hpp"
#include "spade/matching.hpp"
#include "spade/matrix_market.hpp"
#include "test_matrices.hpp"

extern "C" {
void dgetrf_(const int* m, const int* n, double* a, const int* lda, int* ipiv, int* info);
void dgetrs_(const char* trans, const int* n, const int* nrhs, const double* a, const int* lda, const int* ipiv,
             double* b, const int* ldb, int* info);
}

namespace spade {
namespace {

constexpr double kEps = std::numeric_limits<double>::epsilon();
using spade::testing::error_of;
using spade::testing::perturbed_case;
using spade::testing::random_unsymmetric;

std::vector<double> dense_of(const SparseMatrix& A) {
  std::vector<double> d(static_cast<std::size_t>(A.rows()) * A.cols(), 0.0);
  for (index_t j = 0; j < A.cols(); ++j)
    for (offset_t p = A.col_ptr()[j]; p < A.col_ptr()[j + 1]; ++p)
      d[A.row_ind()[p] + static_cast<std::size_t>(j) * A.rows()] += A.values()[p];
  return d;
}

std::vector<double> random_block(index_t n, index_t nrhs, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> value(-1.0, 1.0);
  std::vector<double> b(static_cast<std::size_t>(n) * nrhs);
  for (double& x : b) x = value(gen);
  return b;
}

// max over columns of ||x - y||_inf / ||y||_inf
double relative_difference(const std::vector<double>& x, const std::vector<double>& y, index_t n) {
  double worst = 0;
  for (std::size_t c = 0; c * n < x.size(); ++c) {
    double diff = 0, norm = 0;
    for (index_t i = 0; i < n; ++i) {
      diff = std::max(diff, std::abs(x[c * n + i] - y[c * n + i]));
      norm = std::max(norm, std::abs(y[c * n + i]));
    }
    worst = std::max(worst, diff / norm);
  }
  return worst;
}

struct DenseLu {
  std::vector<double> a;
  std::vector<int> ipiv;
  int n;
  explicit DenseLu(const SparseMatrix& A) : a(dense_of(A)), ipiv(A.rows()), n(A.rows()) {
    int info = 0;
    dgetrf_(&n, &n, a.data(), &n, ipiv.data(), &info);
    EXPECT_EQ(info, 0);
  }
  std::vector<double> solve(std::vector<double> b, int nrhs, Transpose trans) const {
    int info = 0;
    dgetrs_(trans == Transpose::no ? "N" : "T", &n, &nrhs, a.data(), &n, ipiv.data(), b.data(), &n, &info);
    EXPECT_EQ(info, 0);
    return b;
  }
};

// ---- random matrices against dense LAPACK ----------------------------------------------------------------

struct RandomCase {
  index_t n;
  int band, extra;
  bool zero_diagonal;
};

class LuAgainstLapack : public ::testing::TestWithParam<std::optional<OrderingMethod>> {};

TEST_P(LuAgainstLapack, SolvesAndTransposedSolves) {
  // The last two are dense: one supernode of 400 and 450 columns, factored by a team on two threads (its
  // diagonal block's panels, interchanges and updates shared out; factor/lu.cpp).
  const RandomCase cases[] = {{1, 0, 0, false}, {7, 1, 1, false}, {60, 2, 2, true}, {200, 3, 2, false},
                              {300, 1, 4, true}, {400, 400, 0, true}, {450, 450, 0, false}};
  unsigned seed = 1;
  for (const RandomCase& rc : cases) {
    for (int threads : {1, 2}) {
      SCOPED_TRACE("n = " + std::to_string(rc.n) + ", threads " + std::to_string(threads));
      const SparseMatrix A = random_unsymmetric(rc.n, rc.band, rc.extra, rc.zero_diagonal, seed++);
      LuAnalyzeOptions ao;
      ao.ordering = GetParam();
      LuFactorOptions fo;
      fo.threads = threads;
      const LuFactor F(analyze_lu(A, ao), A, fo);
      const DenseLu dense(A);
      const index_t nrhs = 3;
      const std::vector<double> B = random_block(rc.n, nrhs, seed++);
      for (Transpose trans : {Transpose::no, Transpose::yes}) {
        std::vector<double> X = B;
        lu_solve_in_place(F, X.data(), nrhs, rc.n, trans);
        // Random matrices of this size have condition numbers up to about 1e5.
        EXPECT_LT(relative_difference(X, dense.solve(B, nrhs, trans), rc.n), 1e-8)
            << (trans == Transpose::no ? "A X = B" : "A^T X = B");
        std::vector<double> R(X.size());
        const RefinementResult refined =
            lu_solve_refined(A, F, B.data(), rc.n, R.data(), rc.n, nrhs, trans);
        EXPECT_LE(refined.solution.berr, 4 * kEps);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Orderings, LuAgainstLapack,
                         ::testing::Values(std::nullopt, OrderingMethod::natural, OrderingMethod::amd,
                                           OrderingMethod::metis, OrderingMethod::colamd),
                         [](const auto& info) { return info.param ? to_string(*info.param) : std::string("auto"); });

TEST(Lu, LargeSupernodesUseTheBlockedPaths) {
  // A 2D convection-diffusion-like grid with unsymmetric values: supernodes wider than the 32-column panels
  // of the diagonal-block LU and updates above the scalar-loop limit.
  const SparseMatrix grid = laplacian_2d(40, 40);
  std::vector<double> values = grid.values();
  std::mt19937 gen(7);
  std::uniform_real_distribution<double> noise(-0.5, 0.5);
  for (double& v : values) v += noise(gen);
  const SparseMatrix A(grid.rows(), grid.cols(), grid.col_ptr(), grid.row_ind(), values);
  const LuFactor F(analyze_lu(A), A);
  index_t widest = 0;
  for (index_t s = 0; s < F.structure().num_supernodes; ++s) widest = std::max(widest, F.structure().supernode_cols(s));
  EXPECT_GT(widest, 32);
  const DenseLu dense(A);
  const std::vector<double> B = random_block(A.rows(), 2, 3);
  for (Transpose trans : {Transpose::no, Transpose::yes}) {
    std::vector<double> X = B;
    lu_solve_in_place(F, X.data(), 2, A.rows(), trans);
    EXPECT_LT(relative_difference(X, dense.solve(B, 2, trans), A.rows()), 1e-9);
  }
}

TEST(Lu, TinyPivotsAreReplacedCountedAndRefinedAway) {
  // [1 1; 1 1 + d] with d tiny: the second pivot d is below sqrt(eps) ||A|| and replaced; refinement
  // brings the backward error of the (nonsingular, kappa ~ 4e12) matrix back to about 1e-13.
  const double d = 1e-12;
  const SparseMatrix A = SparseMatrix::from_triplets(2, 2, {0, 1, 0, 1}, {0, 0, 1, 1}, {1.0, 1.0, 1.0, 1.0 + d});
  LuAnalyzeOptions ao;
  ao.ordering = OrderingMethod::natural;
  ao.supernodes.relax = false;
  const LuFactor F(analyze_lu(A, ao), A);
  EXPECT_EQ(F.perturbed_pivots(), 1);
  EXPECT_GT(F.pivot_threshold(), 0);
  const std::vector<double> b = {2.0, 2.0 + d};  // x = (1, 1)
  std::vector<double> x(2);
  const RefinementResult r = lu_solve_refined(A, F, b.data(), 2, x.data(), 2, 1);
  EXPECT_GT(r.steps.size(), 1u);  // the perturbed factor needs refinement
  EXPECT_LE(r.solution.berr, 1e-12);
}

TEST(Lu, SingularValuesGiveAPerturbedFactorThatRefinementCannotFix) {
  // Structurally nonsingular, numerically singular (two equal columns): every pivot replacement is
  // counted and refinement says it did not converge.
  const SparseMatrix A =
      SparseMatrix::from_triplets(3, 3, {0, 1, 0, 1, 2}, {0, 0, 1, 1, 2}, {1.0, 2.0, 1.0, 2.0, 3.0});
  const LuFactor F(analyze_lu(A), A);
  EXPECT_GE(F.perturbed_pivots(), 1);
  const std::vector<double> b = {1.0, 0.0, 1.0};  // inconsistent: no solution
  std::vector<double> x(3);
  // The correction of the replaced pivot finds A singular (its k x k matrix is), or refinement says that
  // it did not converge.
  try {
    const RefinementResult r = lu_solve_refined(A, F, b.data(), 3, x.data(), 3, 1);
    EXPECT_FALSE(r.converged);
    EXPECT_NE(r.stop, RefinementResult::Stop::converged);
  } catch (const NumericalError& e) {
    EXPECT_EQ(e.kind(), NumericalError::Kind::singular) << e.what();
  }
}

TEST(Lu, CorrectionUndoesTheReplacedPivotsExactly) {
  // Random matrices with a zero diagonal and a pivot tolerance large enough to replace many pivots: the
  // corrected solve agrees with dense LAPACK getrf/getrs on both systems, though the factor alone is of a
  // matrix far from A; the perturbations are each a single entry of A.
  for (const unsigned seed : {3u, 8u}) {
    const SparseMatrix A = random_unsymmetric(120, 3, 2, true, seed);
    LuFactorOptions options;
    options.pivot_tolerance = 0.5;
    const LuFactor F(analyze_lu(A), A, options);
    ASSERT_GT(F.perturbed_pivots(), 1);
    ASSERT_EQ(F.perturbations().size(), static_cast<std::size_t>(F.perturbed_pivots()));
    for (const PivotPerturbation& p : F.perturbations()) {
      EXPECT_TRUE(p.row >= 0 && p.row < 120 && p.col >= 0 && p.col < 120);
      EXPECT_NE(p.delta, 0.0);
    }
    const LuCorrection C(F);
    EXPECT_EQ(C.rank(), F.perturbed_pivots());
    const DenseLu dense(A);
    const std::vector<double> B = random_block(120, 3, seed);
    for (const Transpose trans : {Transpose::no, Transpose::yes}) {
      std::vector<double> X = B, plain = B;
      C.solve_in_place(F, X.data(), 3, 120, trans);
      lu_solve_in_place(F, plain.data(), 3, 120, trans);
      const std::vector<double> reference = dense.solve(B, 3, trans);
      EXPECT_LT(relative_difference(X, reference, 120), 1e-9) << "seed " << seed;
      EXPECT_GT(relative_difference(plain, reference, 120), 1e-3) << "the factor alone is of another matrix";
    }
  }
}

TEST(Lu, CorrectionRefusesAnotherFactorization) {
  SparseMatrix A = random_unsymmetric(60, 2, 2, true, 5);
  LuFactorOptions options;
  options.pivot_tolerance = 0.5;
  LuFactor F(analyze_lu(A), A, options);
  ASSERT_GT(F.perturbed_pivots(), 0);
  const LuCorrection C(F);
  std::vector<double> x(60, 1.0);
  F.refactorize(A);  // same values, new generation
  EXPECT_THROW(C.solve_in_place(F, x.data(), 1, 60), InvalidInput);
  const LuFactor other(F.symbolic_ptr(), A, options);
  EXPECT_THROW(C.solve_in_place(other, x.data(), 1, 60), InvalidInput);
  std::vector<double> b(60, 1.0);
  EXPECT_THROW(lu_solve_refined(A, F, b.data(), 60, x.data(), 60, 1, Transpose::no, {}, &C), InvalidInput);
  options.pivot_tolerance = 0;
  EXPECT_THROW(LuFactor(F.symbolic_ptr(), A, options), InvalidInput);
  options.pivot_tolerance = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THROW(LuFactor(F.symbolic_ptr(), A, options), InvalidInput);
}

TEST(Lu, RefactorizeWithNewValues) {
  SparseMatrix A = random_unsymmetric(150, 2, 2, false, 11);
  LuFactor F(analyze_lu(A), A);
  for (double& v : A.values()) v *= 1.5;
  A.values()[3] += 0.25;
  F.refactorize(A);
  ASSERT_TRUE(F.valid());
  const DenseLu dense(A);
  const std::vector<double> B = random_block(150, 1, 5);
  std::vector<double> X = B;
  lu_solve_in_place(F, X.data(), 1, 150);
  EXPECT_LT(relative_difference(X, dense.solve(B, 1, Transpose::no), 150), 1e-8);
  // A failed refactorization leaves the factor unusable.
  A.values()[0] = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THROW(F.refactorize(A), InvalidInput);
  EXPECT_FALSE(F.valid());
  EXPECT_THROW(lu_solve_in_place(F, X.data(), 1, 150), InvalidInput);
}

// ---- bad input ----------------------------------------------------------------------------------------

TEST(LuErrors, StructurallySingularNamesARowOrColumn) {
  // Columns 0 and 1 have entries only in row 0: no perfect matching.
  const SparseMatrix A = SparseMatrix::from_triplets(3, 3, {0, 0, 1, 2}, {0, 1, 2, 2}, {1.0, 2.0, 3.0, 4.0});
  try {
    analyze_lu(A);
    FAIL() << "no error";
  } catch (const StructurallySingular& e) {
    EXPECT_EQ(e.kind(), NumericalError::Kind::singular);
    EXPECT_GE(e.index(), 0);
    EXPECT_NE(std::string(e.what()).find(e.side() == StructurallySingular::Side::row ? "row" : "column"),
              std::string::npos)
        << e.what();
  }
}

TEST(LuErrors, EmptyRowAndColumn) {
  const SparseMatrix empty_column = SparseMatrix::from_triplets(3, 3, {0, 1, 2}, {0, 0, 2}, {1.0, 1.0, 1.0});
  EXPECT_THROW(analyze_lu(empty_column), StructurallySingular);
  const SparseMatrix empty_row = SparseMatrix::from_triplets(3, 3, {0, 0, 2}, {0, 1, 2}, {1.0, 1.0, 1.0});
  EXPECT_THROW(analyze_lu(empty_row), StructurallySingular);
}

TEST(LuErrors, NotFiniteAndMisuse) {
  SparseMatrix A = random_unsymmetric(20, 1, 1, false, 3);
  A.values()[5] = std::numeric_limits<double>::infinity();
  EXPECT_THROW(analyze_lu(A), InvalidInput);
  A.values()[5] = 1.0;
  auto S = analyze_lu(A);
  A.values()[7] = std::numeric_limits<double>::quiet_NaN();
  const std::string message = error_of<InvalidInput>([&] { LuFactor F(S, A); });
  EXPECT_NE(message.find("must be finite"), std::string::npos) << message;
  A.values()[7] = 1.0;
  const LuFactor F(S, A);
  std::vector<double> b(20, 1.0);
  b[4] = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THROW(lu_solve_in_place(F, b.data(), 1, 20), InvalidInput);
  EXPECT_THROW(lu_solve_in_place(F, b.data(), 1, 19), InvalidInput);
  EXPECT_THROW(lu_solve_in_place(F, b.data(), -1, 20), InvalidInput);
  EXPECT_THROW(analyze_lu(SparseMatrix::from_triplets(2, 3, {0}, {0}, {1.0})), InvalidInput);
  const SparseMatrix other = random_unsymmetric(20, 2, 1, false, 4);
  EXPECT_THROW(LuFactor(S, other), InvalidInput);
}

// ---- the real matrices ---------------------------------------------------------------------------------

class LuRealMatrix : public ::testing::TestWithParam<const char*> {};

TEST_P(LuRealMatrix, BackwardErrorWithinTenRefinementSteps) {
  const std::string file = GetParam();
  SPADE_REQUIRE_MATRIX(file);
  const SparseMatrix A = read_matrix_market(testing::matrix_path(file));
  const index_t n = A.rows();
  std::shared_ptr<const LuSymbolic> S;
  try {
    S = analyze_lu(A);
  } catch (const StructurallySingular& e) {
    // A clear error naming a row or column is the other admissible outcome.
    SUCCEED() << file << ": " << e.what();
    return;
  }
  const LuFactor F(S, A);
  const index_t nrhs = 2;
  std::vector<double> x_true = random_block(n, nrhs, 17), B(x_true.size());
  for (index_t r = 0; r < nrhs; ++r) A.multiply(x_true.data() + r * n, B.data() + r * n);
  std::vector<double> X(B.size());
  RefineOptions refine;
  refine.max_steps = 10;
  refine.tolerance = 1e-13;
  const RefinementResult result = lu_solve_refined(A, F, B.data(), n, X.data(), n, nrhs, Transpose::no, refine);
  std::vector<double> Xt(B.size());
  const RefinementResult transposed =
      lu_solve_refined(A, F, B.data(), n, Xt.data(), n, nrhs, Transpose::yes, refine);
  if (const testing::PerturbedCase* c = perturbed_case(file)) {
    EXPECT_GT(F.perturbed_pivots(), 0) << file;
    for (const auto& [outcome, converges] : {std::pair{&result, c->converges}, std::pair{&transposed, c->transposed_converges}}) {
      EXPECT_LE(outcome->steps.size(), 11u) << file;
      EXPECT_TRUE(outcome->steps.back().corrected) << file << ": refinement with the factor stagnates, the correction follows";
      if (converges || outcome->converged) {  // a system that may stagnate may also converge
        EXPECT_TRUE(outcome->converged) << file;
        EXPECT_LE(outcome->solution.berr, 1e-13) << file;
      } else {
        EXPECT_FALSE(outcome->converged) << file;
        EXPECT_GT(outcome->solution.berr, refine.tolerance) << file;
        EXPECT_NE(outcome->stop, RefinementResult::Stop::converged) << file;
      }
    }
    // What Solver does where refinement stagnates: a factor at the larger tolerance, whose replaced pivots
    // the correction undoes, converges on both systems.
    LuFactorOptions larger;
    larger.pivot_tolerance = kLuCorrectedPivotTolerance;
    const LuFactor G(S, A, larger);
    EXPECT_GE(G.perturbed_pivots(), F.perturbed_pivots()) << file;
    for (const Transpose trans : {Transpose::no, Transpose::yes}) {
      std::fill(X.begin(), X.end(), 0.0);
      const RefinementResult outcome = lu_solve_refined(A, G, B.data(), n, X.data(), n, nrhs, trans, refine);
      EXPECT_TRUE(outcome.converged) << file << (trans == Transpose::yes ? " (A^T X = B)" : "");
      EXPECT_LE(outcome.solution.berr, 1e-13) << file;
      EXPECT_LE(outcome.steps.size(), 11u) << file;
    }
    return;
  }
  EXPECT_LE(result.solution.berr, 1e-13) << file << ": " << result.steps.size() - 1 << " refinement steps, "
                                         << F.perturbed_pivots() << " perturbed pivots";
  EXPECT_LE(transposed.solution.berr, 1e-13) << file << " (A^T X = B)";
  if (A.nnz() > 300000) return;  // UMFPACK takes most of a minute on c-62: kept out of the quick suite

  // UMFPACK as the reference: spade's refined solution agrees with UMFPACK's as far as the conditioning
  // allows; the difference between two backward-stable solutions is bounded by about kappa * berr, so it
  // is compared only where UMFPACK's own answer is close to x_true.
  testing::LuReference umfpack(testing::LuReference::Library::umfpack, A);
  umfpack.analyze();
  umfpack.factorize();
  const std::vector<double> reference = umfpack.solve(B, nrhs);
  const double umfpack_error = relative_difference(reference, x_true, n);
  if (umfpack_error < 1e-8) {
    EXPECT_LT(relative_difference(X, reference, n), 1e3 * std::max(umfpack_error, 1e-12)) << file;
  }
}

INSTANTIATE_TEST_SUITE_P(SharedMatrices, LuRealMatrix, ::testing::ValuesIn(testing::kLuMatrices),
                         testing::lu_matrix_test_name);

}  // namespace
}  // namespace spade
