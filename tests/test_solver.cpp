// The Solver facade (include/spade/solver.hpp) on every placement, and the GPU solve plan
// (solve/gpu_solve.hpp) against its host references: the selective inversion against
// invert_supernodes_reference, the GPU solve against the host supernodal solve (tolerances scaled by eps
// and the condition estimate), refinement on the device, repeated solves and refactorizations, the edge
// shapes of the assembly tree, and the failure paths. GPU tests skip visibly without a GPU; the host and
// fallback paths run everywhere (CI has no GPU). The LU's GPU solve likewise: its two panel sets against a
// host reference, its solves (A X = B and A^T X = B) against lu_solve_in_place, refinement on the real
// unsymmetric and indefinite matrices, refactorizations.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "../core/blas.hpp"
#include "../kernels/residual_kernels.hpp"
#include "../solve/gpu_solve.hpp"
#include "../solve/refine_loop.hpp"
#include "../solve/supernodal_schedule.hpp"
#include "condition.hpp"
#include "error_of.hpp"
#include "gpu_test.hpp"
#include "lu_matrices.hpp"
#include "spade/error.hpp"
#include "spade/generators.hpp"
#include "spade/lu.hpp"
#include "spade/matching.hpp"
#include "spade/matrix_market.hpp"
#include "spade/solver.hpp"
#include "test_matrices.hpp"
#include "test_problems.hpp"

namespace spade {
namespace {

constexpr double kEps = std::numeric_limits<double>::epsilon();

SparseMatrix dense_spd(index_t n) {
  std::vector<std::int64_t> r, c;
  std::vector<double> v;
  for (index_t j = 0; j < n; ++j)
    for (index_t i = 0; i < n; ++i) r.push_back(i), c.push_back(j), v.push_back(i == j ? 2.0 * n : 1.0 / (1 + i + j));
  return SparseMatrix::from_triplets(n, n, r, c, v);
}

/// The n x n Hilbert matrix, 1 / (i + j + 1) (0-based): SPD and famously ill-conditioned (kappa about
/// 1.6e13 at n = 10).
SparseMatrix hilbert(index_t n) {
  std::vector<std::int64_t> rows, cols;
  std::vector<double> v;
  for (index_t j = 0; j < n; ++j)
    for (index_t i = 0; i < n; ++i) rows.push_back(i), cols.push_back(j), v.push_back(1.0 / (i + j + 1));
  return SparseMatrix::from_triplets(n, n, rows, cols, v);
}

/// Fresh random right-hand sides (the seed goes into failure messages through `seed`).
std::vector<double> random_block(index_t n, index_t nrhs, unsigned& seed) {
  seed = std::random_device{}();
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> B(static_cast<std::size_t>(n) * nrhs);
  for (double& b : B) b = u(rng);
  return B;
}

double relative_difference(const std::vector<double>& X, const std::vector<double>& Y) {
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < X.size(); ++i) {
    diff = std::max(diff, std::abs(X[i] - Y[i]));
    norm = std::max(norm, std::abs(Y[i]));
    if (std::isnan(X[i])) return std::numeric_limits<double>::infinity();
  }
  return norm > 0 ? diff / norm : diff;
}

/// Entries of A's longest row (CSC: the count of each row index): residuals summed in two orders differ by at
/// most about (row length) eps |A| |x| per row.
offset_t longest_row(const SparseMatrix& A) {
  std::vector<offset_t> count(A.rows(), 0);
  for (const index_t i : A.row_ind()) ++count[i];
  return count.empty() ? 0 : *std::max_element(count.begin(), count.end());
}

SolverOptions on(Placement placement) {
  SolverOptions o;
  o.placement = placement;
  return o;
}

double condition_of(const SparseMatrix& A, const NumericFactor& F) {
  return condition_estimate(A, [&F](double* x, index_t k, index_t ld) { solve_in_place(F, x, k, ld); });
}

// ---- every placement ----

TEST(Solver, ParsePlacement) {
  EXPECT_EQ(parse_placement("auto"), Placement::automatic);
  EXPECT_EQ(parse_placement("gpu"), Placement::gpu);
  EXPECT_EQ(parse_placement("cpu"), Placement::cpu);
  EXPECT_EQ(to_string(Placement::automatic), "auto");
  EXPECT_NE(testing::error_of<InvalidInput>([] { parse_placement("tpu"); }).find("tpu"), std::string::npos);
}

TEST(Solver, HostPlacementSolvesAndRefines) {
  const SparseMatrix A = laplacian_2d(30, 20);
  Solver solver(on(Placement::cpu));
  solver.analyze(A);
  solver.factorize(A);
  EXPECT_FALSE(solver.on_gpu());
  EXPECT_NE(solver.report().placement_reason.find("placement cpu"), std::string::npos);
  const index_t n = A.rows();
  unsigned seed = 0;
  const std::vector<double> B = random_block(n, 2, seed);
  std::vector<double> X = B, expected = B;
  solver.solve(X.data(), 2, n);
  solve_in_place(solver.factor(), expected.data(), 2, n);
  EXPECT_EQ(X, expected);
  const RefinementResult r = solver.solve_refined(B.data(), n, X.data(), n, 2);
  EXPECT_LE(r.solution.berr, 4 * kEps);
  ASSERT_TRUE(solver.report().last_solve);
  EXPECT_FALSE(solver.report().last_solve->gpu);
}

/// refine_loop's operations with a scripted backward error per evaluation, recording what ran.
struct ScriptedOps {
  explicit ScriptedOps(std::vector<double> script) : berrs(std::move(script)) {}
  std::vector<double> berrs;  // returned by the evaluations in turn
  bool fp32 = true;
  std::size_t next = 0;
  std::string log;
  void first_solve() { log += "solve "; }
  RefinementStep evaluate() {
    RefinementStep step;
    step.berr = step.residual_norm = berrs.at(next++);
    log += "evaluate ";
    return step;
  }
  void save() {}
  void correct() { log += fp32 ? "fp32 " : "fp64 "; }
  void restore() { log += "restore "; }
  bool single() const { return fp32; }
  void use_fp64() { fp32 = false; }
};

TEST(RefineLoop, AnFp32CorrectionThatStallsHandsOverToFp64) {
  RefineOptions options;
  options.tolerance = 1e-15;
  {  // Halving in FP32, then stalling (kept, no better): FP64 from there, which converges.
    ScriptedOps ops({1e-10, 1e-12, 0.9e-12, 1e-16});
    const RefinementResult r = refine_loop(ops, options);
    EXPECT_EQ(ops.log, "solve evaluate fp32 evaluate fp32 evaluate fp64 evaluate ");
    ASSERT_EQ(r.steps.size(), 4u);
    EXPECT_TRUE(r.steps[1].single && r.steps[2].single && !r.steps[3].single);
    EXPECT_TRUE(r.converged);
    EXPECT_EQ(r.solution.berr, 1e-16);
  }
  {  // An FP32 correction that makes things worse is undone, the residual evaluated again, then FP64.
    ScriptedOps ops({1e-10, 1e-9, 1e-10, 1e-16});
    const RefinementResult r = refine_loop(ops, options);
    EXPECT_EQ(ops.log, "solve evaluate fp32 evaluate restore evaluate fp64 evaluate ");
    ASSERT_EQ(r.steps.size(), 3u);
    EXPECT_TRUE(r.steps[1].single);
    EXPECT_FALSE(r.steps[2].single);
    EXPECT_TRUE(r.converged);
  }
  {  // FP64 corrections stop where they stall, as before: the better iterate stays.
    ScriptedOps ops({1e-10, 1e-9, 1e-10, 2e-10});
    const RefinementResult r = refine_loop(ops, options);
    EXPECT_EQ(ops.log, "solve evaluate fp32 evaluate restore evaluate fp64 evaluate restore ");
    EXPECT_EQ(r.stop, RefinementResult::Stop::stagnated);
    EXPECT_EQ(r.solution.berr, 1e-10);
  }
  {  // The FP32 steps count against max_steps.
    options.max_steps = 1;
    ScriptedOps ops({1e-10, 1e-11});
    const RefinementResult r = refine_loop(ops, options);
    EXPECT_EQ(r.stop, RefinementResult::Stop::max_steps);
    EXPECT_EQ(r.solution.berr, 1e-11);
  }
}

TEST(Solver, PhasesOutOfOrderAndBadShapes) {
  const SparseMatrix A = laplacian_2d(6, 5);
  Solver solver(on(Placement::cpu));
  double x = 0;
  EXPECT_NE(testing::error_of<InvalidInput>([&] { solver.factorize(A); }).find("analyze"), std::string::npos);
  solver.analyze(A);
  EXPECT_NE(testing::error_of<InvalidInput>([&] { solver.solve(&x, 1, 30); }).find("factoriz"), std::string::npos);
  solver.factorize(A);
  std::vector<double> X(30, 1.0);
  EXPECT_NE(testing::error_of<InvalidInput>([&] { solver.solve(X.data(), 1, 29); }).find("leading dimension"),
            std::string::npos);
  EXPECT_NE(testing::error_of<InvalidInput>([&] { solver.solve(X.data(), -1, 30); }).find("nrhs"), std::string::npos);
  X[3] = std::nan("");
  EXPECT_NE(testing::error_of<InvalidInput>([&] { solver.solve(X.data(), 1, 30); }).find("not finite"),
            std::string::npos);
  EXPECT_NE(testing::error_of<InvalidInput>([&] { solver.factorize(laplacian_2d(5, 5)); }).find("order"),
            std::string::npos);
}

/// Not positive definite: the error names the column; the solver then refuses to solve until a good
/// refactorization, on whatever placement the machine offers.
void check_not_positive_definite(Placement placement) {
  SparseMatrix A = laplacian_2d(7, 5);
  Solver solver(on(placement));
  solver.analyze(A);
  solver.factorize(A);
  SparseMatrix bad = A;
  for (index_t j = 0; j < bad.cols(); ++j)
    for (offset_t p = bad.col_ptr()[j]; p < bad.col_ptr()[j + 1]; ++p)
      if (j == 23 && bad.row_ind()[p] == 23) bad.values()[p] = -1.0;
  try {
    solver.factorize(bad);
    FAIL() << "no error";
  } catch (const NumericalError& e) {
    EXPECT_EQ(e.kind(), NumericalError::Kind::not_positive_definite);
    EXPECT_EQ(e.index(), 23);
  }
  std::vector<double> X(35, 1.0);
  EXPECT_NE(testing::error_of<InvalidInput>([&] { solver.solve(X.data(), 1, 35); }).find("factoriz"), std::string::npos);
  solver.factorize(A);
  std::vector<double> b(35), x(35, 1.0);
  A.multiply(x.data(), b.data());
  solver.solve(b.data(), 1, 35);
  EXPECT_LE(relative_difference(b, x), 1e3 * kEps);
}

TEST(Solver, NotPositiveDefiniteThenRefactorizeOnTheHost) { check_not_positive_definite(Placement::cpu); }

TEST(Solver, AutomaticPlacementFallsBackWithoutAGpu) {
  if (cuda_device_available()) GTEST_SKIP() << "a GPU is present: the fallback is tested by test_cli with CUDA_VISIBLE_DEVICES=''";
  const SparseMatrix A = laplacian_3d(6, 6, 6);
  Solver solver;
  solver.analyze(A);
  solver.factorize(A);
  EXPECT_FALSE(solver.on_gpu());
  EXPECT_NE(solver.report().placement_reason.find("no usable GPU"), std::string::npos) << solver.report().placement_reason;
  Solver insist(on(Placement::gpu));
  insist.analyze(A);
  EXPECT_NE(testing::error_of<ResourceError>([&] { insist.factorize(A); }).find("placement gpu"), std::string::npos);
}

/// solve_refined of an LU through the facade: refined to 1e-13 with 10 steps at most, on the host.
RefinementResult refine_lu(Solver& solver, const SparseMatrix& A) {
  const index_t n = A.rows();
  std::vector<double> x(n), b(n), X(n);
  for (index_t i = 0; i < n; ++i) x[i] = 1.0 + std::sin(1.0 + i);
  A.multiply(x.data(), b.data());
  RefineOptions refine;
  refine.max_steps = 10;
  refine.tolerance = 1e-13;
  return solver.solve_refined(b.data(), n, X.data(), n, 1, refine);
}

/// A facade with the LU of A analyzed and factored on the host, with `ordering` (empty: automatic).
std::unique_ptr<Solver> host_lu_solver(const SparseMatrix& A, std::optional<OrderingMethod> ordering = {}) {
  SolverOptions options = on(Placement::cpu);
  options.factorization = Factorization::lu;
  options.analyze.ordering = ordering;
  auto solver = std::make_unique<Solver>(options);
  solver->analyze(A);
  solver->factorize(A);
  return solver;
}

TEST(Solver, LuWhoseRefinementStagnatesIsFactoredAgainWithItsPivotsCorrected) {
  // nnc1374 and NSR8K (UMFPACK solves both): at the default pivot tolerance their factors' growth defeats
  // refinement, corrected or not (test_lu). The facade factors them again at kLuCorrectedPivotTolerance and
  // refines with the correction of the replaced pivots: converged, the report says so, and later solves
  // and refinements use that factor (plain solves corrected too).
  for (const char* file : {"nnc1374.mtx.gz", "NSR8K.mtx.gz"}) {
    SPADE_REQUIRE_MATRIX(file);
    const SparseMatrix A = read_matrix_market(testing::matrix_path(file));
    for (const std::optional<OrderingMethod> ordering : {std::optional<OrderingMethod>(), std::optional(OrderingMethod::amd)}) {
      const auto solver = host_lu_solver(A, ordering);
      const RefinementResult result = refine_lu(*solver, A);
      const std::string& reason = solver->report().factorization_reason;
      EXPECT_TRUE(result.converged) << file << ": " << reason;
      EXPECT_LE(result.solution.berr, 1e-13) << file;
      if (reason.find("(static pivoting: ") != std::string::npos) {
        EXPECT_NE(reason.find("corrected, converged"), std::string::npos) << reason;
        EXPECT_EQ(solver->lu_factor().pivot_tolerance(), kLuCorrectedPivotTolerance);
        EXPECT_TRUE(result.steps.back().corrected) << file;
      }
      EXPECT_TRUE(refine_lu(*solver, A).converged) << file << ": later refinements use the corrected factor";
      // A plain solve of a factor at the larger tolerance is the corrected solve (the same backward error,
      // up to the rounding of another BLAS thread count), not the factor's alone (far larger).
      if (solver->lu_factor().pivot_tolerance() < kLuCorrectedPivotTolerance) continue;
      const index_t n = A.rows();
      std::vector<double> b(n);
      for (index_t i = 0; i < n; ++i) b[i] = 1.0 + std::sin(1.0 + i);
      std::vector<double> X = b, corrected = b, alone = b;
      solver->solve(X.data(), 1, n);
      LuCorrection(solver->lu_factor()).solve_in_place(solver->lu_factor(), corrected.data(), 1, n);
      lu_solve_in_place(solver->lu_factor(), alone.data(), 1, n);
      const double berr = backward_error(A, b.data(), X.data()).berr;
      EXPECT_LE(berr, 10 * backward_error(A, b.data(), corrected.data()).berr) << file;
      EXPECT_LT(100 * berr, backward_error(A, b.data(), alone.data()).berr) << file;
    }
  }
}

// ---- the GPU ----

/// Builds a plan from scratch and uploads F's values range by range, as the facade does.
std::unique_ptr<GpuSolvePlan> plan_for(const NumericFactor& F) {
  auto plan = std::make_unique<GpuSolvePlan>(F.symbolic_ptr(), build_schedule(F.symbolic()));
  plan->begin_values();
  const index_t ns = F.symbolic().num_supernodes;
  for (index_t s = 0; s < ns; s += 7) plan->upload(F.values().data(), s, std::min(ns - 1, s + 6));
  plan->finish_values(F.generation());
  return plan;
}

/// A plan's selectively inverted panels (`device`, copied from the GPU) against the host reference,
/// supernode by supernode: within tolerance k eps times the panel's largest entry (k its width), and zeros
/// above V's diagonal. `what` names the panel set in messages.
void check_inverted_panels(const SymbolicFactor& S, const std::vector<double>& device,
                           const std::vector<double>& reference, double tolerance, const std::string& what) {
  for (index_t s = 0; s < S.num_supernodes; ++s) {
    const offset_t begin = S.panel_offset[s], end = S.panel_offset[s + 1];
    double scale = 0, diff = 0;
    for (offset_t p = begin; p < end; ++p) {
      scale = std::max(scale, std::abs(reference[p]));
      diff = std::max(diff, std::abs(device[p] - reference[p]));
      if (std::isnan(device[p])) diff = std::numeric_limits<double>::infinity();
    }
    const index_t k = S.supernode_cols(s);
    ASSERT_LE(diff, tolerance * k * kEps * scale) << what << "supernode " << s << " of width " << k;
    for (index_t c = 1; c < k; ++c)
      for (index_t r = 0; r < c; ++r) ASSERT_EQ(device[begin + r + static_cast<offset_t>(c) * S.supernode_rows(s)], 0.0);
  }
}

TEST(GpuPlan, SelectiveInversionMatchesTheHostReference) {
  SPADE_REQUIRE_GPU();
  // Widths from 1 to several hundred: the warp kernel (<= 32), the block kernel (<= 256), cuBLAS (wider).
  for (const auto& A : {laplacian_3d(18, 18, 18, Stencil::twenty_seven_point), laplacian_2d(90, 80), dense_spd(300)}) {
    const NumericFactor F(analyze(A), A);
    const auto plan = plan_for(F);
    const SymbolicFactor& S = F.symbolic();
    std::vector<double> reference = F.values(), device(reference.size(), std::nan(""));
    invert_supernodes_reference(S, reference.data());
    plan->copy_values_to_host(device.data());
    ASSERT_NO_FATAL_FAILURE(check_inverted_panels(S, device, reference, 64.0, ""));
  }
}

/// A matrix whose first supernode (natural order, no relaxation) is k columns wide with `below` rows under
/// its diagonal block: a dense k x k block, coupled densely to `below` further rows on a path, and one last
/// row coupled to column k only (to none when below is 0), so that column k does not join the supernode.
/// Random entries (seed in `seed`), diagonally dominant.
SparseMatrix supernode_of_width(index_t k, index_t below, unsigned& seed) {
  seed = std::random_device{}();
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  const index_t n = k + below + 1;
  std::vector<std::int64_t> r, c;
  std::vector<double> v;
  const auto add = [&](index_t i, index_t j, double x) {
    r.push_back(i), c.push_back(j), v.push_back(x);
    if (i != j) r.push_back(j), c.push_back(i), v.push_back(x);
  };
  for (index_t j = 0; j < k; ++j) {
    add(j, j, 4.0 * n);
    for (index_t i = j + 1; i < k + below; ++i) add(i, j, u(rng));
  }
  for (index_t i = k; i < n; ++i) {
    add(i, i, 4.0 * n);
    if (i + 1 < n && i + 1 < k + below) add(i + 1, i, u(rng));
  }
  if (below > 0) add(n - 1, k, u(rng));  // else the last row stands alone
  return SparseMatrix::from_triplets(n, n, r, c, v);
}

TEST(GpuPlan, BlockKernelInversionAtEveryTileAndRowBlockCount) {
  SPADE_REQUIRE_GPU();
  // launch_invert_mid's widths, 33 to 256 (two to eight tiles, the last one partial or full), with no rows,
  // one, one block of 32, a partial second block and more blocks than a supernode gets (64), so that its
  // blocks stride; 32 and 257 on either side go to the warp kernel and to cuBLAS.
  AnalyzeOptions natural;
  natural.ordering = OrderingMethod::natural;
  natural.supernodes.relax = false;
  const std::pair<index_t, index_t> cases[] = {{32, 40},  {33, 1},  {48, 600}, {64, 32},  {65, 33},  {100, 0},
                                               {128, 97}, {129, 31}, {200, 64}, {255, 5}, {256, 517}, {97, 2100}, {257, 40}};
  for (const auto& [k, below] : cases) {
    unsigned seed = 0;
    const SparseMatrix A = supernode_of_width(k, below, seed);
    const NumericFactor F(analyze(A, natural), A);
    const SymbolicFactor& S = F.symbolic();
    const std::string what = "k " + std::to_string(k) + ", rows below " + std::to_string(below) + ", seed " +
                             std::to_string(seed) + ": ";
    ASSERT_EQ(S.supernode_cols(0), k) << what;
    ASSERT_EQ(S.supernode_rows(0), k + below) << what;
    const auto plan = plan_for(F);
    std::vector<double> reference = F.values(), device(reference.size(), std::nan(""));
    invert_supernodes_reference(S, reference.data());
    plan->copy_values_to_host(device.data());
    ASSERT_NO_FATAL_FAILURE(check_inverted_panels(S, device, reference, 64.0, what));
  }
}

TEST(GpuPlan, AZeroPivotInAWideBlockIsSingularWithItsColumn) {
  SPADE_REQUIRE_GPU();
  // Values that no factorization makes (a Cholesky factor has no zero pivot): the wide blocks' inversions
  // (the block kernel up to kMidInverse, trsm on the identity above) must still report one, with the
  // column in the original numbering.
  for (const SparseMatrix& A : {laplacian_2d(60, 60), dense_spd(300)}) {
    const NumericFactor F(analyze(A), A);
    const SymbolicFactor& S = F.symbolic();
    index_t wide = -1;
    for (index_t s = 0; s < S.num_supernodes; ++s)
      if (S.supernode_cols(s) > SupernodalSchedule::kSmallInverse) wide = s;
    ASSERT_GE(wide, 0);
    SCOPED_TRACE("a block " + std::to_string(S.supernode_cols(wide)) + " wide");
    std::vector<double> values = F.values();
    const index_t i = S.supernode_cols(wide) / 2;
    values[S.panel_offset[wide] + i + static_cast<offset_t>(i) * S.supernode_rows(wide)] = 0.0;
    GpuSolvePlan plan(F.symbolic_ptr(), build_schedule(S));
    plan.begin_values();
    plan.upload(values.data(), 0, S.num_supernodes - 1);
    try {
      plan.finish_values(F.generation());
      FAIL() << "no error";
    } catch (const NumericalError& e) {
      EXPECT_EQ(e.kind(), NumericalError::Kind::singular);
      EXPECT_EQ(e.index(), S.perm[S.supernode_begin[wide] + i]);
    }
    // The plan takes the good values afterwards.
    plan.begin_values();
    plan.upload(F.values().data(), 0, S.num_supernodes - 1);
    EXPECT_NO_THROW(plan.finish_values(F.generation()));
  }
}

TEST(GpuPlan, PartitionedInverseMatchesTheHostReference) {
  SPADE_REQUIRE_GPU();
  // Pieces of several bands, uploaded in ranges of 7 supernodes from the last range to the first, so that
  // pieces complete in any order: panels against partition_values + the host inversion, then solves
  // (nrhs 1, 3 and 9: one pass, and a full and a partial one) against the host solve.
  AnalyzeOptions chain;
  chain.ordering = OrderingMethod::natural;
  chain.supernodes.relax = false;
  struct Case {
    std::string name;
    SparseMatrix A;
    AnalyzeOptions options;
  };
  std::vector<Case> cases = {{"lap2d 90x80", laplacian_2d(90, 80), {}},
                             {"lap3d27 12^3", laplacian_3d(12, 12, 12, Stencil::twenty_seven_point), {}},
                             {"tridiagonal chain", testing::tridiagonal(700), chain},
                             {"two trees", testing::block_diagonal(laplacian_2d(30, 20), laplacian_3d(7, 7, 7)), {}}};
  if (testing::matrix_exists("bcsstk14.mtx.gz"))
    cases.push_back({"bcsstk14", read_matrix_market(testing::matrix_path("bcsstk14.mtx.gz")), {}});
  else
    std::printf("[ skipped  ] bcsstk14.mtx.gz not found in %s\n", testing::matrix_dir().c_str());
  for (const Case& c : cases) {
    const NumericFactor F(analyze(c.A, c.options), c.A);
    const double kappa = condition_of(c.A, F);
    const index_t n = c.A.rows(), ns = F.symbolic().num_supernodes;
    for (const index_t band : {2, 3, 6, 1000}) {
      const std::string what = c.name + ", band " + std::to_string(band);
      SolveStructure structure = partition_for_solve(F.symbolic_ptr(), band);
      const auto solve_structure = structure.solve;
      const SymbolicFactor& T = *solve_structure;
      GpuSolvePlan plan(std::move(structure), build_schedule(T));
      plan.begin_values();
      for (index_t s = (ns - 1) / 7 * 7; s >= 0; s -= 7) plan.upload(F.values().data(), s, std::min(ns - 1, s + 6));
      plan.finish_values(F.generation());
      std::vector<double> reference(static_cast<std::size_t>(T.panel_offset.back()));
      partition_values(plan.structure(), F.values().data(), reference.data());
      invert_supernodes_reference(T, reference.data());
      std::vector<double> device(reference.size(), std::nan(""));
      plan.copy_values_to_host(device.data());
      ASSERT_NO_FATAL_FAILURE(check_inverted_panels(T, device, reference, 1e3, what + ": "));
      for (const index_t nrhs : {1, 3, 9}) {
        unsigned seed = 0;
        const std::vector<double> B = random_block(n, nrhs, seed);
        std::vector<double> X(B.size()), expected = B;
        solve_in_place(F, expected.data(), nrhs, n);
        double *dB = nullptr, *dX = nullptr;
        ASSERT_EQ(cudaMalloc(&dB, B.size() * sizeof(double)), cudaSuccess);
        ASSERT_EQ(cudaMalloc(&dX, B.size() * sizeof(double)), cudaSuccess);
        ASSERT_EQ(cudaMemcpy(dB, B.data(), B.size() * sizeof(double), cudaMemcpyHostToDevice), cudaSuccess);
        plan.solve(dB, n, dX, n, nrhs, F.generation());
        ASSERT_EQ(cudaMemcpy(X.data(), dX, X.size() * sizeof(double), cudaMemcpyDeviceToHost), cudaSuccess);
        cudaFree(dB);
        cudaFree(dX);
        EXPECT_LE(relative_difference(X, expected), 1000 * kEps * std::max(kappa, 1.0))
            << what << ", nrhs " << nrhs << ", kappa_1 about " << kappa;
      }
    }
  }
  // A piece that never received all its supernodes is an error, not a wrong answer.
  const NumericFactor F(analyze(laplacian_2d(40, 40)), laplacian_2d(40, 40));
  SolveStructure structure = partition_for_solve(F.symbolic_ptr(), 4);
  ASSERT_GT(structure.merged_pieces, 0);
  const auto T = structure.solve;
  GpuSolvePlan plan(std::move(structure), build_schedule(*T));
  plan.begin_values();
  plan.upload(F.values().data(), 0, F.symbolic().num_supernodes - 2);
  EXPECT_THROW(plan.finish_values(F.generation()), InvalidInput);
}

/// The measured choice of the partitioned inverse's band: bands timed once each, none of them 1, every
/// time positive, and the band kept is the fastest of them.
void expect_fastest_band_kept(const GpuPlanReport& plan) {
  const std::vector<PartitionTrial>& trials = plan.partition_trials;
  ASSERT_FALSE(trials.empty());
  EXPECT_LE(static_cast<int>(trials.size()), kPartitionTrials);
  const PartitionTrial* fastest = &trials.front();
  for (const PartitionTrial& t : trials) {
    EXPECT_GT(t.band, 1);
    EXPECT_GT(t.seconds, 0);
    EXPECT_EQ(std::count_if(trials.begin(), trials.end(), [&](const PartitionTrial& u) { return u.band == t.band; }), 1);
    if (t.seconds < fastest->seconds) fastest = &t;
  }
  EXPECT_EQ(plan.partition_band, fastest->band);
}

TEST(GpuSolve, PartitionedInverseThroughTheSolver) {
  SPADE_REQUIRE_GPU();
  // A small factor, where the cost model merges levels: the facade's solves, refinement and
  // refactorizations with new values, before the partitioned inverse is ready (the per-supernode plan, or
  // the partitioned one if it was quick) and after (the partitioned one).
  SolverOptions options = on(Placement::gpu);
  options.partitioned_inverse = true;
  SparseMatrix A = laplacian_2d(60, 50);
  Solver solver(options);
  solver.analyze(A);
  solver.factorize(A);
  ASSERT_TRUE(solver.on_gpu()) << solver.report().placement_reason;
  ASSERT_GT(solver.report().plan->partition_band, 1);
  EXPECT_GT(solver.report().plan->merged_pieces, 0);
  const index_t n = A.rows();
  auto new_values = [&] {
    for (index_t j = 0; j < n; ++j)
      for (offset_t p = A.col_ptr()[j]; p < A.col_ptr()[j + 1]; ++p)
        if (A.row_ind()[p] == j) A.values()[p] += 1.0;
  };
  for (int round = 0; round < 3; ++round) {
    const NumericFactor& F = solver.factor();
    const double kappa = condition_of(A, F);
    for (const bool waited : {false, true}) {
      if (waited) {
        ASSERT_TRUE(solver.wait_for_partitioned_inverse()) << solver.report().plan->partitioned_problem;
        EXPECT_GT(solver.report().plan->partitioned_seconds, 0);
        expect_fastest_band_kept(*solver.report().plan);
      }
      for (const index_t nrhs : {1, 16}) {
        unsigned seed = 0;
        const std::vector<double> B = random_block(n, nrhs, seed);
        std::vector<double> X = B, expected = B;
        solver.solve(X.data(), nrhs, n);
        if (waited) {
          EXPECT_TRUE(solver.report().last_solve->partitioned);
        }
        solve_in_place(F, expected.data(), nrhs, n);
        EXPECT_LE(relative_difference(X, expected), 1000 * kEps * kappa)
            << "round " << round << ", nrhs " << nrhs << (waited ? ", partitioned" : "");
      }
      std::vector<double> b(n, 1.0), x(n);
      EXPECT_LE(solver.solve_refined(b.data(), n, x.data(), n, 1).solution.berr, 1e-14);
    }
    // New values, same pattern: both plans stream them into the same places. In the last round, twice at
    // once: the first refactorization's partitioned uploads are cancelled by the second.
    new_values();
    solver.factorize(A);
    if (round == 1) {
      new_values();
      solver.factorize(A);
    }
  }
}

TEST(GpuSolve, PartitionedInverseTrialsCutShortByARefactorization) {
  SPADE_REQUIRE_GPU();
  // A refactorization right after the first factorization cancels the band's trials wherever they are:
  // the fastest band timed so far is kept (or, with none timed, the next factorization times them), and
  // every solve matches the host's.
  SolverOptions options = on(Placement::gpu);
  options.partitioned_inverse = true;
  SparseMatrix A = laplacian_3d(12, 12, 12);
  const index_t n = A.rows();
  for (int refactorizations = 1; refactorizations <= 3; ++refactorizations) {
    Solver solver(options);
    solver.analyze(A);
    solver.factorize(A);
    ASSERT_TRUE(solver.on_gpu()) << solver.report().placement_reason;
    for (int r = 0; r < refactorizations; ++r) {
      for (index_t j = 0; j < n; ++j)
        for (offset_t p = A.col_ptr()[j]; p < A.col_ptr()[j + 1]; ++p)
          if (A.row_ind()[p] == j) A.values()[p] += 0.5;
      solver.factorize(A);
    }
    ASSERT_TRUE(solver.wait_for_partitioned_inverse()) << solver.report().plan->partitioned_problem;
    expect_fastest_band_kept(*solver.report().plan);
    const NumericFactor& F = solver.factor();
    unsigned seed = 7;
    const std::vector<double> B = random_block(n, 2, seed);
    std::vector<double> X = B, expected = B;
    solver.solve(X.data(), 2, n);
    EXPECT_TRUE(solver.report().last_solve->partitioned);
    solve_in_place(F, expected.data(), 2, n);
    EXPECT_LE(relative_difference(X, expected), 1000 * kEps * condition_of(A, F)) << refactorizations;
  }
}

TEST(GpuSolve, PartitionedInverseThatDoesNotFitLeavesThePerSupernodePlan) {
  SPADE_REQUIRE_GPU();
  // A device memory limit that the per-supernode plan fits in but not both plans: the report says why, and
  // the solves stay on the GPU.
  const SparseMatrix A = laplacian_2d(60, 50);
  SolverOptions options = on(Placement::gpu);
  options.partitioned_inverse = false;
  Solver probe(options);
  probe.analyze(A);
  probe.factorize(A);
  ASSERT_TRUE(probe.on_gpu()) << probe.report().placement_reason;
  const std::size_t refinement = static_cast<std::size_t>(A.nnz()) * 20 + static_cast<std::size_t>(A.rows() + 1) * 4;
  options.partitioned_inverse = true;
  options.device_memory_limit = probe.report().plan->device_bytes + refinement + (std::size_t(64) << 20) + 1024;
  Solver solver(options);
  solver.analyze(A);
  solver.factorize(A);
  ASSERT_TRUE(solver.on_gpu()) << solver.report().placement_reason;
  ASSERT_GT(solver.report().plan->partition_band, 1);
  EXPECT_FALSE(solver.wait_for_partitioned_inverse());
  EXPECT_NE(solver.report().plan->partitioned_problem.find("device memory limit"), std::string::npos)
      << solver.report().plan->partitioned_problem;
  std::vector<double> b(A.rows(), 1.0), x(A.rows());
  EXPECT_LE(solver.solve_refined(b.data(), A.rows(), x.data(), A.rows(), 1).solution.berr, 1e-14);
  solver.solve(b.data(), 1, A.rows());
  ASSERT_TRUE(solver.report().last_solve.has_value());
  EXPECT_TRUE(solver.report().last_solve->gpu);
  EXPECT_FALSE(solver.report().last_solve->partitioned);
}

/// GPU solve against the host solve through the facade, nrhs as given, tolerance C eps kappa_1(A); with
/// `partitioned`, through the partitioned inverse (SolverOptions::partitioned_inverse).
void check_gpu_against_host(const SparseMatrix& A, const std::string& what, const std::vector<index_t>& widths,
                            const AnalyzeOptions& analyze_options = {}, bool partitioned = false) {
  SolverOptions options = on(Placement::gpu);
  options.analyze = analyze_options;
  options.partitioned_inverse = partitioned;
  Solver solver(options);
  solver.analyze(A);
  solver.factorize(A);
  ASSERT_TRUE(solver.on_gpu()) << solver.report().placement_reason;
  const bool merged = partitioned && solver.report().plan->partition_band > 1;
  if (merged) {
    ASSERT_TRUE(solver.wait_for_partitioned_inverse()) << what;
  }
  const NumericFactor& F = solver.factor();
  const double kappa = condition_of(A, F);
  const index_t n = A.rows();
  for (const index_t nrhs : widths) {
    unsigned seed = 0;
    const std::vector<double> B = random_block(n, nrhs, seed);
    std::vector<double> X = B, expected = B;
    solver.solve(X.data(), nrhs, n);
    EXPECT_EQ(solver.report().last_solve->partitioned, merged) << what;
    solve_in_place(F, expected.data(), nrhs, n);
    EXPECT_LE(relative_difference(X, expected), 1000 * kEps * std::max(kappa, 1.0))
        << what << ", nrhs " << nrhs << ", kappa_1 about " << kappa << ", seed " << seed;
  }
}

TEST(GpuSolve, GeneratedLaplacians) {
  SPADE_REQUIRE_GPU();
  const std::vector<index_t> widths = {1, 2, 16, 100};
  check_gpu_against_host(laplacian_2d(200, 150), "lap2d 5-point 200x150", widths);
  check_gpu_against_host(laplacian_2d(120, 120, Stencil::nine_point), "lap2d 9-point 120^2", widths);
  check_gpu_against_host(laplacian_3d(30, 30, 30), "lap3d 7-point 30^3", widths);
  check_gpu_against_host(laplacian_3d(22, 22, 22, Stencil::twenty_seven_point), "lap3d 27-point 22^3", widths);
}

class GpuRealSpd : public ::testing::TestWithParam<const char*> {};

TEST_P(GpuRealSpd, MatchesHostSolveAndRefinesBelow1e14) {
  SPADE_REQUIRE_GPU();
  const std::string file = GetParam();
  SPADE_REQUIRE_MATRIX(file);
  const SparseMatrix A = read_matrix_market(testing::matrix_path(file));
  check_gpu_against_host(A, file, {1, 2, 16, 100});
  check_gpu_against_host(A, file + " (partitioned inverse)", {1, 16}, {}, true);
  for (const bool partitioned : {false, true}) {
    SolverOptions options = on(Placement::gpu);
    options.partitioned_inverse = partitioned;
    Solver solver(options);
    solver.analyze(A);
    solver.factorize(A);
    solver.wait_for_partitioned_inverse();
    const index_t n = A.rows();
    for (const index_t nrhs : {1, 3}) {
      unsigned seed = 0;
      const std::vector<double> B = random_block(n, nrhs, seed);
      std::vector<double> X(B.size(), std::nan(""));
      const RefinementResult r = solver.solve_refined(B.data(), n, X.data(), n, nrhs);
      EXPECT_LE(r.solution.berr, 1e-14) << file << (partitioned ? " (partitioned)" : "") << ", nrhs " << nrhs
                                        << ", seed " << seed;
      // The device's backward error is the host's formula.
      double host_berr = 0;
      for (index_t j = 0; j < nrhs; ++j)
        host_berr = std::max(host_berr, backward_error(A, B.data() + static_cast<offset_t>(j) * n,
                                                       X.data() + static_cast<offset_t>(j) * n).berr);
      // Residuals summed in another order differ by rounding, about (row length) eps relative to
      // |A| |x| + |b| (GpuResidual's own test compares the formula where berr is far above that).
      EXPECT_LE(std::abs(host_berr - r.solution.berr), 2.0 * static_cast<double>(longest_row(A) + 2) * kEps)
          << file << ": host berr " << host_berr << ", device " << r.solution.berr;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(SharedMatrices, GpuRealSpd, ::testing::ValuesIn(testing::spd_matrices()),
                         [](const auto& info) { return testing::matrix_test_name(info.param); });

TEST(GpuSolve, TreeShapes) {
  SPADE_REQUIRE_GPU();
  AnalyzeOptions unrelaxed;
  unrelaxed.ordering = OrderingMethod::natural;
  unrelaxed.supernodes.relax = false;
  // One supernode (several tiles, cuSOLVER's inverse); a chain of 3000 width-1 supernodes (2935 hand-offs
  // per sweep); n = 1; a diagonal matrix (a forest of groups); a dense-ish arrow (one wide root row).
  check_gpu_against_host(dense_spd(200), "one dense supernode", {1, 5, 8});
  check_gpu_against_host(testing::tridiagonal(3000), "chain of width-1 supernodes", {1, 3}, unrelaxed);
  // The same chain through the partitioned inverse: one dense piece of 3000 columns, wider than the trsm
  // inversion takes (cuSOLVER's trtri).
  check_gpu_against_host(testing::tridiagonal(3000), "chain, partitioned", {1, 3}, unrelaxed, true);
  check_gpu_against_host(testing::tridiagonal(1), "n = 1", {1, 2});
  std::vector<std::int64_t> idx(5000);
  for (index_t i = 0; i < 5000; ++i) idx[i] = i;
  std::vector<double> d(5000);
  for (index_t i = 0; i < 5000; ++i) d[i] = 1.0 + i % 7;
  check_gpu_against_host(SparseMatrix::from_triplets(5000, 5000, idx, idx, d), "diagonal", {1, 9});
  // A star: the last column couples to every other, so the root has 2999 children (packed into groups)
  // whose updates all land on one row.
  const index_t hub = 2999;
  std::vector<std::int64_t> r, c;
  std::vector<double> v;
  for (index_t i = 0; i < 3000; ++i) {
    r.push_back(i), c.push_back(i), v.push_back(i == hub ? 4000.0 : 2.0);
    if (i != hub) r.push_back(i), c.push_back(hub), v.push_back(0.5), r.push_back(hub), c.push_back(i), v.push_back(0.5);
  }
  check_gpu_against_host(SparseMatrix::from_triplets(3000, 3000, r, c, v), "star", {1, 4}, unrelaxed);
}

TEST(GpuSolve, HundredSolvesOnOnePlanAndTwentyRefactorizations) {
  SPADE_REQUIRE_GPU();
  SparseMatrix A = laplacian_3d(24, 24, 24);
  Solver solver(on(Placement::gpu));
  solver.analyze(A);
  solver.factorize(A);
  const index_t n = A.rows();
  unsigned seed = 0;
  const std::vector<double> B = random_block(n, 1, seed);
  std::vector<double> expected = B;
  solve_in_place(solver.factor(), expected.data(), 1, n);
  for (int t = 0; t < 100; ++t) {
    std::vector<double> X = B;
    solver.solve(X.data(), 1, n);
    ASSERT_LE(relative_difference(X, expected), 1e4 * kEps) << "solve " << t << ", seed " << seed;
  }
  for (int t = 1; t <= 20; ++t) {
    SparseMatrix At = A;
    for (index_t j = 0; j < n; ++j)
      for (offset_t p = At.col_ptr()[j]; p < At.col_ptr()[j + 1]; ++p)
        if (At.row_ind()[p] == j) At.values()[p] += 0.5 * t;  // stays symmetric and SPD, new values
    solver.factorize(At);
    ASSERT_TRUE(solver.on_gpu());
    EXPECT_EQ(solver.report().plan->plan_seconds, 0.0) << "the plan is reused";
    std::vector<double> X = B, host = B;
    solver.solve(X.data(), 1, n);
    solve_in_place(solver.factor(), host.data(), 1, n);
    ASSERT_LE(relative_difference(X, host), 1e4 * kEps) << "refactorization " << t;
  }
}

TEST(GpuSolve, DeviceMemoryAndRefinementOnTheDevice) {
  SPADE_REQUIRE_GPU();
  const SparseMatrix A = laplacian_2d(100, 90, Stencil::nine_point);
  Solver solver(on(Placement::gpu));
  solver.analyze(A);
  solver.factorize(A);
  const index_t n = A.rows(), nrhs = 3, ld = n + 5;
  unsigned seed = 0;
  std::vector<double> B = random_block(ld, nrhs, seed), expected(B.size());
  expected = B;
  solve_in_place(solver.factor(), expected.data(), nrhs, ld);
  double *dB = nullptr, *dX = nullptr;
  ASSERT_EQ(cudaMalloc(&dB, B.size() * sizeof(double)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dX, B.size() * sizeof(double)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dB, B.data(), B.size() * sizeof(double), cudaMemcpyHostToDevice), cudaSuccess);
  solver.solve(dB, nrhs, ld, Memory::device);
  std::vector<double> X(B.size());
  ASSERT_EQ(cudaMemcpy(X.data(), dB, X.size() * sizeof(double), cudaMemcpyDeviceToHost), cudaSuccess);
  for (index_t j = 0; j < nrhs; ++j)
    for (index_t i = 0; i < n; ++i)
      ASSERT_NEAR(X[i + j * ld], expected[i + j * ld], 1e4 * kEps * std::abs(expected[i + j * ld]) + 1e-12);
  for (index_t j = 0; j < nrhs; ++j)
    for (index_t i = n; i < ld; ++i) EXPECT_EQ(X[i + j * ld], B[i + j * ld]) << "rows past n are not touched";
  ASSERT_EQ(cudaMemcpy(dB, B.data(), B.size() * sizeof(double), cudaMemcpyHostToDevice), cudaSuccess);
  const RefinementResult r = solver.solve_refined(dB, ld, dX, ld, nrhs, Memory::device);
  EXPECT_LE(r.solution.berr, 1e-14);
  ASSERT_EQ(cudaMemcpy(X.data(), dX, X.size() * sizeof(double), cudaMemcpyDeviceToHost), cudaSuccess);
  for (index_t j = 0; j < nrhs; ++j)
    EXPECT_LE(backward_error(A, B.data() + j * ld, X.data() + j * ld).berr, 1e-14);
  cudaFree(dB);
  cudaFree(dX);
}

TEST(GpuSolve, RefinementOnTheDeviceWithBlocksInPlaceOrCopied) {
  SPADE_REQUIRE_GPU();
  // A GPU refinement uses device B and X where they are (leading dimension n, or one column, X apart
  // from B) and copies them otherwise; its other vectors come from a workspace kept between calls (grown
  // for more columns); its iterates alternate between X's block and the workspace, so one or two
  // corrections leave the solution in either. Every case: berr <= 1e-14, B unchanged, rows past n of X
  // untouched, with FP32 and FP64 corrections.
  const SparseMatrix A = laplacian_3d(14, 13, 12, Stencil::twenty_seven_point);
  Solver solver(on(Placement::gpu));
  solver.analyze(A);
  solver.factorize(A);
  ASSERT_TRUE(solver.on_gpu()) << solver.report().placement_reason;
  const index_t n = A.rows();
  struct Case {
    index_t ld, nrhs;
    bool aliased;  // X is B
  };
  const Case cases[] = {{n, 1, false}, {n, 4, false}, {n + 3, 1, false}, {n + 3, 2, false}, {n, 1, true}, {n, 3, true}};
  for (const Case& c : cases)
    for (const int steps : {1, 2})
      for (const CorrectionPrecision precision : {CorrectionPrecision::fp32, CorrectionPrecision::fp64}) {
        const std::string what = "ld n + " + std::to_string(c.ld - n) + ", nrhs " + std::to_string(c.nrhs) +
                                 (c.aliased ? ", X = B" : "") + ", " + std::to_string(steps) + " steps, " +
                                 (precision == CorrectionPrecision::fp32 ? "fp32" : "fp64");
        RefineOptions refine;
        refine.max_steps = steps;
        refine.tolerance = 1e-300;  // every step taken unless one fails to halve berr
        refine.corrections = precision;
        unsigned seed = 0;
        const std::vector<double> B = random_block(c.ld, c.nrhs, seed), sentinel(B.size(), 7.0);
        double *dB = nullptr, *dX = nullptr;
        ASSERT_EQ(cudaMalloc(&dB, B.size() * sizeof(double)), cudaSuccess);
        ASSERT_EQ(cudaMemcpy(dB, B.data(), B.size() * sizeof(double), cudaMemcpyHostToDevice), cudaSuccess);
        if (c.aliased) {
          dX = dB;
        } else {
          ASSERT_EQ(cudaMalloc(&dX, B.size() * sizeof(double)), cudaSuccess);
          ASSERT_EQ(cudaMemcpy(dX, sentinel.data(), B.size() * sizeof(double), cudaMemcpyHostToDevice), cudaSuccess);
        }
        const RefinementResult r = solver.solve_refined(dB, c.ld, dX, c.ld, c.nrhs, refine, Memory::device);
        std::vector<double> X(B.size()), B_after(B.size());
        ASSERT_EQ(cudaMemcpy(X.data(), dX, X.size() * sizeof(double), cudaMemcpyDeviceToHost), cudaSuccess);
        ASSERT_EQ(cudaMemcpy(B_after.data(), dB, B.size() * sizeof(double), cudaMemcpyDeviceToHost), cudaSuccess);
        EXPECT_LE(r.solution.berr, 1e-14) << what;
        EXPECT_GE(r.steps.size(), 2u) << what;
        for (index_t j = 0; j < c.nrhs; ++j) {
          EXPECT_LE(backward_error(A, B.data() + j * c.ld, X.data() + j * c.ld).berr, 1e-14) << what << ", column " << j;
          for (index_t i = n; i < c.ld; ++i)
            ASSERT_EQ(X[i + j * c.ld], c.aliased ? B[i + j * c.ld] : 7.0) << what << ": rows past n are not touched";
        }
        if (!c.aliased) {
          EXPECT_EQ(B_after, B) << what << ": B is not modified";
          cudaFree(dX);
        }
        cudaFree(dB);
      }
}

TEST(GpuSolve, RecurringSolvesReplayedAsGraphsMatchTheHost) {
  SPADE_REQUIRE_GPU();
  // A one-pass solve is captured as a CUDA graph the second time its arguments recur and replayed after
  // (GpuSolvePlan::pass_graph, at most four kept). Six device buffers in turn, three rounds, with widths 1,
  // 3 and 8 and in place or not: graphs made, replayed, evicted and made again, each solve against the
  // host's; then the same plan's FP32 panels (another key) and a pass of two lanes (no graph).
  const SparseMatrix A = laplacian_3d(14, 13, 12, Stencil::twenty_seven_point);
  SolverOptions options = on(Placement::gpu);
  options.partitioned_inverse = false;
  options.refine.corrections = CorrectionPrecision::fp32;
  Solver solver(options);
  solver.analyze(A);
  solver.factorize(A);
  ASSERT_TRUE(solver.on_gpu()) << solver.report().placement_reason;
  const index_t n = A.rows();
  const double kappa = condition_of(A, solver.factor());
  std::vector<double*> buffers(6, nullptr);
  for (double*& p : buffers) ASSERT_EQ(cudaMalloc(&p, 8 * n * sizeof(double)), cudaSuccess);
  for (int round = 0; round < 3; ++round)
    for (std::size_t k = 0; k < buffers.size(); ++k) {
      const index_t nrhs = k % 3 == 0 ? 1 : k % 3 == 1 ? 3 : 8;
      unsigned seed = static_cast<unsigned>(10 * round + k);
      const std::vector<double> B = random_block(n, nrhs, seed);
      std::vector<double> X(B.size()), expected = B;
      solve_in_place(solver.factor(), expected.data(), nrhs, n);
      ASSERT_EQ(cudaMemcpy(buffers[k], B.data(), B.size() * sizeof(double), cudaMemcpyHostToDevice), cudaSuccess);
      solver.solve(buffers[k], nrhs, n, Memory::device);
      ASSERT_EQ(cudaMemcpy(X.data(), buffers[k], X.size() * sizeof(double), cudaMemcpyDeviceToHost), cudaSuccess);
      EXPECT_LE(relative_difference(X, expected), 1000 * kEps * kappa) << "round " << round << ", buffer " << k;
      EXPECT_GT(solver.report().last_solve->forward_seconds, 0) << "round " << round << ", buffer " << k;
    }
  for (double* p : buffers) cudaFree(p);
  // Refinement with FP32 corrections (the plan's own buffers recurring, the FP32 panels another key) and
  // 20 right-hand sides (two lanes) on the same plan.
  for (int t = 0; t < 3; ++t) {
    std::vector<double> b(n, 1.0), x(n);
    EXPECT_LE(solver.solve_refined(b.data(), n, x.data(), n, 1).solution.berr, 1e-14) << t;
  }
  unsigned seed = 99;
  const std::vector<double> B = random_block(n, 20, seed);
  std::vector<double> X = B, expected = B;
  solver.solve(X.data(), 20, n);
  solve_in_place(solver.factor(), expected.data(), 20, n);
  EXPECT_LE(relative_difference(X, expected), 1000 * kEps * kappa);
}

/// A device copy of a host array, freed at scope exit.
struct DeviceCopy {
  explicit DeviceCopy(const std::vector<double>& h) : bytes(std::max<std::size_t>(h.size(), 1) * sizeof(double)) {
    EXPECT_EQ(cudaMalloc(&data, bytes), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(data, h.data(), h.size() * sizeof(double), cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~DeviceCopy() { cudaFree(data); }
  std::vector<double> to_host(std::size_t count) const {
    std::vector<double> h(count);
    EXPECT_EQ(cudaMemcpy(h.data(), data, count * sizeof(double), cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  }
  double* data = nullptr;
  std::size_t bytes;
};

/// kernels::launch_refine_step, refine_loop's stopping rules on the device (GpuSolvePlan::refine), against
/// refine_loop itself on scripted backward errors, corrections starting in FP32 and in FP64, max_steps 0
/// to 4, the turns run as the graph runs them (a redo turn after a correction that asks for one): the same
/// history (berr and precision per step), stop and solution, and the kept iterate in the block the graph's
/// alternation puts it in. The scripts: convergence at once, halving to the tolerance, a stall kept
/// (better) and undone (worse or equal), exactly half (goes on), NaN and infinity (go on to max_steps),
/// infinity after a finite berr (undone).
TEST(RefineLoop, TheDeviceStepDecidesAsTheHostLoop) {
  SPADE_REQUIRE_GPU();
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  const std::vector<std::vector<double>> scripts = {
      {1e-20},
      {0.0},
      {1e-10, 1e-12, 1e-14, 1e-16},
      {1e-10, 1e-12, 0.9e-12, 1e-16},
      {1e-10, 1e-12, 2e-12, 1e-13, 2e-13},
      {1e-10, 1e-10, 1e-10},
      {1e-10, 0.5e-10, 0.25e-10, 0.125e-10, 1e-11},
      {nan, nan, nan, nan, nan},
      {1e-10, nan, 1e-16},
      {inf, inf, inf, inf, inf},  // inf > inf / 2 is false: goes on, as NaN
      {1e-3, inf, inf, 1e-20},
      {1e-10, 1e-9, 1e-10, 2e-10},
  };
  constexpr int kMost = 4;
  const std::size_t doubles = sizeof(kernels::RefineState) / sizeof(double) + kernels::refine_history_doubles(kMost);
  DeviceCopy buffer(std::vector<double>(doubles, 0.0));
  auto* state = reinterpret_cast<kernels::RefineState*>(buffer.data);
  const auto bits = [](double x) {
    unsigned long long b;
    std::memcpy(&b, &x, sizeof b);
    return b;
  };
  const auto turn = [&](double berr, kernels::RefineTurn t, int written, int max_steps, bool single,
                        const int* status) {
    const unsigned long long result[2] = {bits(berr), bits(berr)};
    EXPECT_EQ(cudaMemcpy(state->result, result, sizeof result, cudaMemcpyHostToDevice), cudaSuccess);
    kernels::launch_refine_step(state, t, written, max_steps, 1e-15, single, status, {}, nullptr);
    kernels::RefineState st{};
    EXPECT_EQ(cudaMemcpy(&st, state, sizeof st, cudaMemcpyDeviceToHost), cudaSuccess);
    return st;
  };
  RefineOptions options;
  options.tolerance = 1e-15;
  for (const bool single : {false, true})
    for (std::vector<double> script : scripts)
      for (int max_steps = 0; max_steps <= kMost; ++max_steps) {
        script.resize(2 * kMost + 2, script.back());  // room for the evaluations after restores
        std::string what = std::string(single ? "fp32" : "fp64") + ", max_steps " + std::to_string(max_steps) + ", script";
        for (const double b : script) what += " " + std::to_string(b);
        options.max_steps = max_steps;
        ScriptedOps ops(script);
        ops.fp32 = single;
        const RefinementResult host = refine_loop(ops, options);
        // The graph's turns: the first into block 0, then corrections alternating blocks; a redo turn
        // evaluates the kept iterate again (the script's next berr, as refine_loop's evaluate after restore).
        std::size_t next = 0;
        int written = 0;
        kernels::RefineState st = turn(script.at(next++), kernels::RefineTurn::first, 0, max_steps, single, nullptr);
        while (st.stop == kernels::kRefineGoing) {
          ASSERT_LT(next, script.size()) << what << ": the device went on past the script";
          written = 1 - written;
          st = turn(script[next++], kernels::RefineTurn::correction, written, max_steps, single, nullptr);
          if (st.redo) {
            ASSERT_EQ(st.stop, kernels::kRefineGoing) << what;
            ASSERT_LT(next, script.size()) << what;
            st = turn(script[next++], kernels::RefineTurn::redo, written, max_steps, single, nullptr);
            EXPECT_EQ(st.current, written) << what;
          }
        }
        // refine_loop evaluates an iterate it restored before it sees max_steps; the device skips that.
        const auto ends_with = [&](const std::string& tail) {
          return ops.log.size() >= tail.size() && ops.log.compare(ops.log.size() - tail.size(), tail.size(), tail) == 0;
        };
        const bool restored_last = ends_with("restore evaluate ");
        EXPECT_EQ(next + (restored_last ? 1 : 0), ops.next) << what << ": evaluations (" << ops.log << ")";
        const std::vector<double> h = buffer.to_host(doubles);
        const double* berrs = h.data() + sizeof(kernels::RefineState) / sizeof(double) + max_steps + 1;
        const double* singles = berrs + max_steps + 1;
        ASSERT_EQ(static_cast<std::size_t>(st.steps), host.steps.size()) << what;
        for (int k = 0; k < st.steps; ++k) {
          EXPECT_EQ(bits(berrs[k]), bits(host.steps[k].berr)) << what << ", step " << k;
          EXPECT_EQ(singles[k] != 0, host.steps[k].single) << what << ", step " << k;
        }
        const int expected_stop = host.stop == RefinementResult::Stop::converged   ? kernels::kRefineConverged
                                  : host.stop == RefinementResult::Stop::stagnated ? kernels::kRefineStagnated
                                                                                   : kernels::kRefineMaxSteps;
        EXPECT_EQ(st.stop, expected_stop) << what;
        EXPECT_EQ(bits(berrs[st.current_step]), bits(host.solution.berr)) << what;
        EXPECT_EQ(singles[st.current_step] != 0, host.solution.single) << what;
        // The last iterate written is kept unless the last step was undone (refine_loop's restore).
        const bool undone = ends_with("restore ") || restored_last;
        EXPECT_EQ(st.current, undone ? 1 - written : written) << what << " (" << ops.log << ")";
      }
  // A solve whose status reports a spin-wait that gave up stops the refinement at once.
  DeviceCopy status(std::vector<double>(1, 0.0));
  const int failed = 1;
  ASSERT_EQ(cudaMemcpy(status.data, &failed, sizeof failed, cudaMemcpyHostToDevice), cudaSuccess);
  const kernels::RefineState st =
      turn(1e-3, kernels::RefineTurn::first, 0, 2, false, reinterpret_cast<const int*>(status.data));
  EXPECT_EQ(st.stop, kernels::kRefineSolveFailed);
}

/// refine_loop's operations replaying a refinement's history: the scripted berr of each step, and for the
/// evaluation after a restore (which refine_loop does not read) nothing.
struct ReplayOps : ScriptedOps {
  using ScriptedOps::ScriptedOps;
  bool restored = false;
  void restore() {
    ScriptedOps::restore();
    restored = true;
  }
  RefinementStep evaluate() {
    if (!restored) return ScriptedOps::evaluate();
    restored = false;
    log += "evaluate ";
    return {};
  }
};

/// GpuSolvePlan::refine of B (n x nrhs, host) into device blocks, checked: nothing at the key's first sight,
/// then twice the refinement, whose history replayed through refine_loop gives the same steps, stop and
/// solution; the block it names holds an X whose backward error (host formula) is the solution's (within
/// the rounding of two summation orders); the first step's berr is a plain solve's. Returns the last result.
RefinementResult check_graph_refinement(GpuSolvePlan& plan, GpuResidual& residual, const SparseMatrix& A,
                                        std::uint64_t generation, const std::vector<double>& B, index_t nrhs,
                                        const RefineOptions& options, bool single, const std::string& what) {
  const index_t n = A.rows();
  const double slack = 2.0 * static_cast<double>(longest_row(A) + 2) * kEps;
  const std::vector<double> nan(B.size(), std::nan(""));
  DeviceCopy dB(B), x0(nan), x1(nan), dR(nan), dD(nan);
  double* const iterate[2] = {x0.data, x1.data};
  plan.solve(dB.data, n, x0.data, n, nrhs, generation);
  const RefinementStep plain = residual.evaluate(dB.data, x0.data, dR.data, nrhs);
  RefinementResult result;
  int solution = -1;
  EXPECT_FALSE(plan.refine(residual, dB.data, iterate, dR.data, dD.data, nrhs, generation, options, single, result,
                           solution))
      << what << ": a key's first sight";
  for (int call = 0; call < 2; ++call) {
    EXPECT_TRUE(plan.refine(residual, dB.data, iterate, dR.data, dD.data, nrhs, generation, options, single, result,
                            solution))
        << what;
    if (result.steps.empty() || result.steps.size() > static_cast<std::size_t>(options.max_steps) + 1) {
      ADD_FAILURE() << what << ": " << result.steps.size() << " steps";
      return result;
    }
    std::vector<double> berrs;
    for (const RefinementStep& step : result.steps) berrs.push_back(step.berr);
    ReplayOps ops(berrs);
    ops.fp32 = single;
    const RefinementResult replay = refine_loop(ops, options);
    EXPECT_EQ(replay.steps.size(), result.steps.size()) << what;
    for (std::size_t k = 0; k < std::min(replay.steps.size(), result.steps.size()); ++k)
      EXPECT_EQ(replay.steps[k].single, result.steps[k].single) << what << ", step " << k;
    EXPECT_EQ(replay.stop, result.stop) << what;
    EXPECT_EQ(replay.converged, result.converged) << what;
    EXPECT_EQ(replay.solution.berr, result.solution.berr) << what;
    const auto ends_with = [&](const std::string& tail) {
      return ops.log.size() >= tail.size() && ops.log.compare(ops.log.size() - tail.size(), tail.size(), tail) == 0;
    };
    const bool undone = ends_with("restore ") || ends_with("restore evaluate ");
    const int last = static_cast<int>(result.steps.size() - 1) % 2;  // the block of the last iterate written
    EXPECT_EQ(solution, undone ? 1 - last : last) << what << " (" << ops.log << ")";
    EXPECT_LE(std::abs(result.steps[0].berr - plain.berr), slack * (1 + plain.berr)) << what;
    const std::vector<double> X = (solution == 0 ? x0 : x1).to_host(B.size());
    double berr = 0;
    for (index_t j = 0; j < nrhs; ++j) berr = std::max(berr, backward_error(A, B.data() + j * n, X.data() + j * n).berr);
    EXPECT_LE(std::abs(berr - result.solution.berr), slack * (1 + berr)) << what;
  }
  return result;
}

/// GpuSolvePlan::refine, the refinement as one CUDA graph (check_graph_refinement), corrections in FP64 and
/// in FP32: nrhs 1, 3 and 8 (a whole pass), max_steps 0 to 3, tolerance 2 eps and 1e-300 (every step taken
/// unless one stalls), berr <= 1e-14 after a correction; b = 0 converges at step 0 with x = 0. Hilbert 10
/// (kappa about 1.6e13), whose FP32 corrections cannot contract: FP64 takes over in the graph, the kept
/// iterate copied where an FP32 one made things worse. Misuse is InvalidInput.
TEST(GpuPlan, RefinementAsOneGraph) {
  SPADE_REQUIRE_GPU();
  const SparseMatrix A = laplacian_3d(14, 13, 12, Stencil::twenty_seven_point);
  const NumericFactor F(analyze(A), A);
  const auto plan = plan_for(F);
  ASSERT_TRUE(plan->make_single_copy());
  GpuResidual residual(A, plan->stream());
  const index_t n = A.rows();
  for (const index_t nrhs : {1, 3, 8})
    for (const bool zero : {false, true}) {
      unsigned seed = 0;
      std::vector<double> B = random_block(n, nrhs, seed);
      if (zero) std::fill(B.begin(), B.end(), 0.0);
      for (int max_steps = 0; max_steps <= 3; ++max_steps)
        for (const double tolerance : {0.0, 1e-300})
          for (const bool single : {false, true}) {
            const std::string what = "nrhs " + std::to_string(nrhs) + (zero ? ", b = 0" : "") + ", max_steps " +
                                     std::to_string(max_steps) + ", tolerance " + std::to_string(tolerance) +
                                     (single ? ", fp32" : ", fp64") + ", seed " + std::to_string(seed);
            RefineOptions options;
            options.max_steps = max_steps;
            options.tolerance = tolerance;
            const RefinementResult r =
                check_graph_refinement(*plan, residual, A, F.generation(), B, nrhs, options, single, what);
            if (r.steps.size() > 1) {
              EXPECT_LE(r.solution.berr, 1e-14) << what;
            }
            if (zero) {
              EXPECT_TRUE(r.converged) << what;
              EXPECT_EQ(r.steps.size(), 1u) << what;
            }
          }
    }
  {
    const index_t m = 10;
    const SparseMatrix H = hilbert(m);
    const NumericFactor G(analyze(H), H);
    const auto hilbert = plan_for(G);
    ASSERT_TRUE(hilbert->make_single_copy());
    GpuResidual hilbert_residual(H, hilbert->stream());
    RefineOptions options;
    options.max_steps = 6;
    unsigned seed = 0;
    const std::vector<double> B = random_block(m, 1, seed);
    const RefinementResult r = check_graph_refinement(*hilbert, hilbert_residual, H, G.generation(), B, 1, options, true,
                                                      "Hilbert 10, seed " + std::to_string(seed));
    bool handed_over = false;
    for (std::size_t k = 2; k < r.steps.size(); ++k) handed_over |= r.steps[k - 1].single && !r.steps[k].single;
    EXPECT_TRUE(handed_over || r.converged) << "seed " << seed;
  }
  const std::vector<double> ones(9 * n, 1.0);
  DeviceCopy b(ones), x(ones), y(ones), r(ones), d(ones);
  double* const iterate[2] = {x.data, y.data};
  RefinementResult result;
  int solution = 0;
  RefineOptions options;
  EXPECT_THROW(plan->refine(residual, b.data, iterate, r.data, d.data, 9, F.generation(), options, false, result,
                            solution),
               InvalidInput);
  EXPECT_THROW(plan->refine(residual, b.data, iterate, r.data, d.data, 1, F.generation() + 1, options, false, result,
                            solution),
               InvalidInput);
  options.max_steps = GpuSolvePlan::kDeviceRefineSteps + 1;
  EXPECT_THROW(plan->refine(residual, b.data, iterate, r.data, d.data, 1, F.generation(), options, false, result,
                            solution),
               InvalidInput);
}

/// The one-pass residual kernel against the host's formula, through GpuResidual::evaluate (the group its
/// rule picks; A transposed on the host where it is not symmetric) and through kernels::launch_residual at
/// every group size, each plain (of X = X0 + D, added on the host) and with the correction (of X0 and D,
/// added as the pass reads them): R entry by entry, the largest |r| and the backward error
/// (spade::backward_error per column), within the rounding of two summation orders, (row length + 2) eps
/// relative to |A| |x| + |b|; the corrected pass's X_new equal to X exactly.
void check_residual(const SparseMatrix& A, const std::string& name, const std::vector<double>& B,
                    const std::vector<double>& X0, const std::vector<double>& D, index_t nrhs) {
  const index_t n = A.rows();
  std::vector<double> X(X0.size());
  for (std::size_t i = 0; i < X.size(); ++i) X[i] = X0[i] + D[i];
  const double slack = 2.0 * static_cast<double>(longest_row(A) + 2) * kEps;
  std::vector<double> r(B), scale(B.size());  // the host's residual and |A| |x| + |b|
  for (std::size_t i = 0; i < B.size(); ++i) scale[i] = std::abs(B[i]);
  for (index_t k = 0; k < nrhs; ++k)
    for (index_t j = 0; j < n; ++j)
      for (offset_t p = A.col_ptr()[j]; p < A.col_ptr()[j + 1]; ++p) {
        const double t = A.values()[p] * X[j + static_cast<offset_t>(k) * n];
        r[A.row_ind()[p] + static_cast<offset_t>(k) * n] -= t;
        scale[A.row_ind()[p] + static_cast<offset_t>(k) * n] += std::abs(t);
      }
  RefinementStep host;
  for (index_t k = 0; k < nrhs; ++k) {
    const RefinementStep s = backward_error(A, B.data() + static_cast<offset_t>(k) * n,
                                            X.data() + static_cast<offset_t>(k) * n);
    host.berr = std::max(host.berr, s.berr);
    host.residual_norm = std::max(host.residual_norm, s.residual_norm);
  }
  const double worst_scale = scale.empty() ? 0.0 : *std::max_element(scale.begin(), scale.end());
  auto expect_close = [&](const std::vector<double>& R, const RefinementStep& device, const std::string& how) {
    for (std::size_t i = 0; i < R.size(); ++i)
      ASSERT_LE(std::abs(R[i] - r[i]), slack * scale[i]) << name << how << ", nrhs " << nrhs << ", entry " << i;
    EXPECT_LE(std::abs(device.residual_norm - host.residual_norm), slack * worst_scale) << name << how;
    EXPECT_LE(std::abs(device.berr - host.berr), slack * (1 + host.berr))
        << name << how << ", nrhs " << nrhs << ": host berr " << host.berr << ", device " << device.berr;
  };
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  {
    const std::vector<double> nan(B.size(), std::nan(""));
    DeviceCopy dB(B), dX(X), dX0(X0), dD(D), dR(nan), dX_new(nan);
    auto expect_new_iterate = [&](const std::string& how) {
      const std::vector<double> x_new = dX_new.to_host(X.size());
      for (std::size_t i = 0; i < X.size(); ++i) ASSERT_EQ(x_new[i], X[i]) << name << how << ", entry " << i;
    };
    GpuResidual residual(A, stream);
    const RefinementStep device = residual.evaluate(dB.data, dX.data, dR.data, nrhs);
    expect_close(dR.to_host(B.size()), device, " (GpuResidual)");
    ASSERT_EQ(cudaMemcpy(dR.data, nan.data(), nan.size() * sizeof(double), cudaMemcpyHostToDevice), cudaSuccess);
    const RefinementStep corrected = residual.evaluate_corrected(dB.data, dX0.data, dD.data, dX_new.data, dR.data, nrhs);
    expect_close(dR.to_host(B.size()), corrected, " (GpuResidual, corrected)");
    expect_new_iterate(" (GpuResidual, corrected)");

    const SparseMatrix At = A.transpose();  // its CSC arrays are A's CSR arrays
    const std::vector<int> row_ptr(At.col_ptr().begin(), At.col_ptr().end());
    int *d_row_ptr = nullptr, *d_col_ind = nullptr;
    unsigned long long* d_result = nullptr;
    ASSERT_EQ(cudaMalloc(&d_row_ptr, row_ptr.size() * sizeof(int)), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&d_col_ind, std::max<std::size_t>(At.nnz(), 1) * sizeof(int)), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&d_result, 2 * sizeof(unsigned long long)), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(d_row_ptr, row_ptr.data(), row_ptr.size() * sizeof(int), cudaMemcpyHostToDevice),
              cudaSuccess);
    ASSERT_EQ(cudaMemcpy(d_col_ind, At.row_ind().data(), At.nnz() * sizeof(int), cudaMemcpyHostToDevice),
              cudaSuccess);
    DeviceCopy values(At.values());
    const kernels::CsrView csr{static_cast<int>(n), d_row_ptr, d_col_ind, values.data};
    for (const int group : {1, 2, 4, 8, 16, 32})
      for (const bool with_correction : {false, true}) {
        const std::string how = " (group " + std::to_string(group) + (with_correction ? ", corrected)" : ")");
        ASSERT_EQ(cudaMemset(d_result, 0, 2 * sizeof(unsigned long long)), cudaSuccess);
        ASSERT_EQ(cudaMemcpy(dX_new.data, nan.data(), nan.size() * sizeof(double), cudaMemcpyHostToDevice), cudaSuccess);
        const kernels::ResidualInput input = with_correction
                                                 ? kernels::ResidualInput{dB.data, dX0.data, dD.data, dX_new.data}
                                                 : kernels::ResidualInput{dB.data, dX.data};
        kernels::launch_residual(csr, input, dR.data, static_cast<int>(nrhs), group, d_result, stream);
        unsigned long long result[2];
        ASSERT_EQ(cudaMemcpy(result, d_result, sizeof(result), cudaMemcpyDeviceToHost), cudaSuccess);
        RefinementStep device_step;
        std::memcpy(&device_step.residual_norm, &result[0], sizeof(double));
        std::memcpy(&device_step.berr, &result[1], sizeof(double));
        expect_close(dR.to_host(B.size()), device_step, how);
        if (with_correction) expect_new_iterate(how);
      }
    EXPECT_THROW(kernels::launch_residual(csr, {dB.data, dX.data}, dR.data, static_cast<int>(nrhs), 3, d_result, stream),
                 InvalidInput);
    EXPECT_THROW(kernels::launch_residual(csr, {dB.data, dX0.data, dD.data}, dR.data, static_cast<int>(nrhs), 1,
                                          d_result, stream),
                 InvalidInput);  // a correction with nowhere to put X + D
    cudaFree(d_row_ptr);
    cudaFree(d_col_ind);
    cudaFree(d_result);
  }
  cudaStreamDestroy(stream);
}

/// Rows of every length from empty to longer than two warps, one row dense, unsymmetric values.
SparseMatrix ragged_rows(index_t n, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<std::int64_t> r, c;
  std::vector<double> v;
  for (index_t i = 0; i < n; ++i) {
    const index_t length = i == 7 ? n : i % 11 == 3 ? 0 : static_cast<index_t>(rng() % 80);
    for (index_t t = 0; t < length; ++t) {
      r.push_back(i);
      c.push_back(i == 7 ? t : static_cast<std::int64_t>(rng() % n));
      v.push_back(u(rng));
    }
  }
  return SparseMatrix::from_triplets(n, n, r, c, v);  // duplicates summed
}

TEST(GpuResidual, GroupRule) {  // a host function: runs without a GPU
  for (const long long longest : {1LL, 5LL, 7LL, 8LL, 9LL, 27LL, 81LL, 256LL, 257LL, 5060LL})
    for (const long long n : {1LL, 500LL, 15606LL, 33792LL, 262144LL, 4194304LL})
      for (const int sms : {1, 132}) {
        const int g = kernels::residual_group(longest, n, sms);
        const long long covering = 256LL * sms;
        ASSERT_TRUE(g == 1 || g == 2 || g == 4 || g == 8 || g == 16 || g == 32);
        // Both properties hold at g unless g is the widest; at g / 2 one of them fails (the smallest such g).
        if (g < 32) {
          EXPECT_TRUE(longest <= 8LL * g && n * g >= covering) << longest << " " << n << " " << sms;
        }
        if (g > 1) {
          EXPECT_TRUE(longest > 4LL * g || n * (g / 2) < covering) << longest << " " << n << " " << sms;
        }
      }
  EXPECT_EQ(kernels::residual_group(7, 262144, 132), 1);    // lap3d 64^3: one lane a row
  EXPECT_EQ(kernels::residual_group(27, 110592, 132), 4);   // lap3d27 48^3: 27 entries in 7 steps
  EXPECT_EQ(kernels::residual_group(5060, 41731, 132), 32); // one row of 5,060 entries
  EXPECT_EQ(kernels::residual_group(5, 2500, 132), 16);     // few rows: lanes that would idle
}

TEST(GpuResidual, MatchesTheHostResidualAndBackwardError) {
  SPADE_REQUIRE_GPU();
  std::vector<std::pair<std::string, SparseMatrix>> cases = {
      {"n = 1", laplacian_2d(1, 1)},
      {"tridiagonal 1000", testing::tridiagonal(1000)},
      {"lap2d 40x40", laplacian_2d(40, 40)},
      {"lap3d27 12^3", laplacian_3d(12, 12, 12, Stencil::twenty_seven_point)},
      {"ragged rows 700", ragged_rows(700, std::random_device{}())},
      {"random unsymmetric 900", testing::random_unsymmetric(900, 5, 3, false, std::random_device{}())}};
  for (const char* file : {"bcsstk16.mtx.gz", "basker_matrix1.mtx.gz", "4elt_lap.mtx.gz"})
    if (testing::matrix_exists(file)) cases.emplace_back(file, read_matrix_market(testing::matrix_path(file)));
    else std::printf("[ SKIPPED  ] %s not found in %s\n", file, testing::matrix_dir().c_str());
  for (const auto& [name, A] : cases) {
    const index_t n = A.rows();
    for (const index_t nrhs : {1, 3, 9, 16}) {
      unsigned seed_b = 0, seed_x = 0, seed_d = 0;
      const std::vector<double> B = random_block(n, nrhs, seed_b), X0 = random_block(n, nrhs, seed_x),
                                D = random_block(n, nrhs, seed_d);
      check_residual(A,
                     name + ", seeds " + std::to_string(seed_b) + " " + std::to_string(seed_x) + " " +
                         std::to_string(seed_d),
                     B, X0, D, nrhs);
    }
  }
}

TEST(GpuResidual, ExactSolutionsZerosAndNaN) {
  SPADE_REQUIRE_GPU();
  const SparseMatrix A = laplacian_3d(9, 8, 7);
  const index_t n = A.rows(), nrhs = 2;
  // X an exact solution: B = A X with integer entries, so the residual and berr are exactly 0.
  std::vector<double> X(static_cast<std::size_t>(n) * nrhs), B(X.size(), 0.0);
  for (std::size_t i = 0; i < X.size(); ++i) X[i] = static_cast<double>(static_cast<int>(i % 13) - 6);
  for (index_t k = 0; k < nrhs; ++k)
    for (index_t j = 0; j < n; ++j)
      for (offset_t p = A.col_ptr()[j]; p < A.col_ptr()[j + 1]; ++p)
        B[A.row_ind()[p] + static_cast<offset_t>(k) * n] += A.values()[p] * X[j + static_cast<offset_t>(k) * n];
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  {
    GpuResidual residual(A, stream);
    DeviceCopy dB(B), dX(X), dR(B);
    RefinementStep step = residual.evaluate(dB.data, dX.data, dR.data, nrhs);
    EXPECT_EQ(step.berr, 0.0);
    EXPECT_EQ(step.residual_norm, 0.0);
    for (const double r : dR.to_host(B.size())) ASSERT_EQ(r, 0.0);
    // B = 0 and X = 0: 0 / 0 counts as 0.
    DeviceCopy zero(std::vector<double>(B.size(), 0.0));
    step = residual.evaluate(zero.data, zero.data, dR.data, nrhs);
    EXPECT_EQ(step.berr, 0.0);
    EXPECT_EQ(step.residual_norm, 0.0);
    // A NaN in X shows as NaN in both (never as a small backward error).
    X[n + 5] = std::nan("");
    DeviceCopy dNaN(X);
    step = residual.evaluate(dB.data, dNaN.data, dR.data, nrhs);
    EXPECT_TRUE(std::isnan(step.berr));
    EXPECT_TRUE(std::isnan(step.residual_norm));
  }
  cudaStreamDestroy(stream);
}

TEST(GpuSolve, SpinWaitTimeoutIsAnErrorAndTheNextSolveIsRight) {
  SPADE_REQUIRE_GPU();
  AnalyzeOptions unrelaxed;
  unrelaxed.ordering = OrderingMethod::natural;
  unrelaxed.supernodes.relax = false;
  SolverOptions options = on(Placement::gpu);
  options.analyze = unrelaxed;
  options.partitioned_inverse = false;  // its pieces would shorten the chain
  const SparseMatrix A = testing::tridiagonal(4000);  // a chain: every task waits on the one before
  Solver solver(options);
  solver.analyze(A);
  solver.factorize(A);
  solver.set_gpu_spin_limit(1);
  std::vector<double> X(4000, 1.0);
  try {
    solver.solve(X.data(), 1, 4000);
    FAIL() << "a chain of 3935 waits with a limit of one poll each finished";
  } catch (const NumericalError& e) {
    EXPECT_EQ(e.kind(), NumericalError::Kind::no_progress) << e.what();
  }
  // Refinement queues its solves behind the residual: a solve that gave up is still an error there (the
  // second time, when its arguments recur, within one CUDA graph: GpuSolvePlan::refine), and the plan is
  // still right afterwards.
  std::vector<double> B(4000, 1.0), Y(4000);
  for (int call = 0; call < 2; ++call) {
    try {
      solver.solve_refined(B.data(), 4000, Y.data(), 4000, 1);
      FAIL() << "a refined solve whose sweeps gave up returned (call " << call << ")";
    } catch (const NumericalError& e) {
      EXPECT_EQ(e.kind(), NumericalError::Kind::no_progress) << e.what();
    }
  }
  solver.set_gpu_spin_limit(0);
  std::vector<double> b(4000), x(4000);
  for (index_t i = 0; i < 4000; ++i) x[i] = std::sin(i);
  A.multiply(x.data(), b.data());
  const RefinementResult r = solver.solve_refined(b.data(), 4000, Y.data(), 4000, 1);
  EXPECT_LE(r.solution.berr, 1e-14);
  EXPECT_LE(relative_difference(Y, x), 1e-6);
  solver.solve(b.data(), 1, 4000);
  EXPECT_LE(relative_difference(b, x), 1e-6);
}

TEST(GpuSolve, NotPositiveDefiniteThenRefactorize) {
  SPADE_REQUIRE_GPU();
  check_not_positive_definite(Placement::gpu);
}

// ---- the GPU solve of an LU factor ----

/// Host reference of an LU plan's panels (GpuSolvePlan::upload_lu): M^L = [L11; L21] with L11 unit lower
/// and M^U = [U11^T; U12^T], laid out as F's L panels, each selectively inverted on the host.
void lu_panels_reference(const LuFactor& F, std::vector<double>& lower, std::vector<double>& upper) {
  const SymbolicFactor& S = F.structure();
  lower = F.l_values();
  upper.assign(lower.size(), 0.0);
  for (index_t s = 0; s < S.num_supernodes; ++s) {
    const index_t k = S.supernode_cols(s), m = S.supernode_rows(s);
    double* L = lower.data() + S.panel_offset[s];
    double* U = upper.data() + S.panel_offset[s];
    const double* l = F.l_panel(s);
    const double* u = F.u_panel(s);
    for (index_t j = 0; j < k; ++j)
      for (index_t i = 0; i < k; ++i) {
        U[i + j * m] = i >= j ? l[j + i * m] : 0.0;
        if (i <= j) L[i + j * m] = i == j ? 1.0 : 0.0;
      }
    for (index_t c = 0; c < k; ++c)
      for (index_t r = 0; r < m - k; ++r) U[k + r + c * m] = u[r + c * (m - k)];
  }
  invert_supernodes_reference(S, lower.data());
  invert_supernodes_reference(S, upper.data());
}

TEST(GpuPlan, LuPanelsMatchTheHostReference) {
  SPADE_REQUIRE_GPU();
  // Pivoting inside wide diagonal blocks (random values without a dominant diagonal, and a zero diagonal
  // that only the matching repairs), and a well-conditioned convection-diffusion operator.
  const SparseMatrix matrices[] = {testing::random_unsymmetric(3000, 2, 2, false, 31),
                                   testing::random_unsymmetric(1500, 3, 1, true, 32),
                                   convection_diffusion_2d(60, 50, 1.0, 0.5)};
  bool in_ranges = false;  // every other matrix goes up in ranges of 7 supernodes, as the facade streams them
  for (const SparseMatrix& A : matrices) {
    const auto analysis = analyze_lu(A);
    const LuFactor F(analysis, A);
    GpuSolvePlan plan(analysis, build_schedule(F.structure()));
    plan.begin_values();
    if (in_ranges) {
      const index_t ns = F.structure().num_supernodes;
      for (index_t s = 0; s < ns; s += 7)
        plan.upload_lu(F.l_values().data(), F.u_values().data(), s, std::min(ns - 1, s + 6));
      plan.finish_lu(F);
    } else {
      plan.upload_lu(F);
    }
    in_ranges = !in_ranges;
    plan.finish_values(F.generation());
    std::vector<double> lower, upper;
    lu_panels_reference(F, lower, upper);
    const SymbolicFactor& S = F.structure();
    for (const bool is_upper : {false, true}) {
      const std::vector<double>& reference = is_upper ? upper : lower;
      std::vector<double> device(reference.size(), std::nan(""));
      plan.copy_values_to_host(device.data(), is_upper);
      ASSERT_NO_FATAL_FAILURE(check_inverted_panels(S, device, reference, 1e3, is_upper ? "U panel of " : "L panel of "));
    }
    index_t widest = 0;
    for (index_t s = 0; s < S.num_supernodes; ++s) widest = std::max(widest, S.supernode_cols(s));
    EXPECT_GT(widest, 32) << "the cuSOLVER/cuBLAS inversion is exercised";
  }
  const SparseMatrix A = laplacian_2d(10, 10);
  const auto analysis = analyze_lu(A);
  GpuSolvePlan cholesky_plan(analyze(A), build_schedule(*analyze(A)));
  EXPECT_THROW(cholesky_plan.upload_lu(LuFactor(analysis, A)), InvalidInput);
  std::vector<double> host(1);
  EXPECT_THROW(cholesky_plan.copy_values_to_host(host.data(), true), InvalidInput);
}

std::unique_ptr<Solver> lu_solver_on_gpu(const SparseMatrix& A) {
  SolverOptions options = on(Placement::gpu);
  options.factorization = Factorization::lu;
  auto solver = std::make_unique<Solver>(options);
  solver->analyze(A);
  solver->factorize(A);
  return solver;
}

double lu_condition(const SparseMatrix& A, const LuFactor& F) {
  return condition_estimate(
      A, [&F](double* x, index_t k, index_t ld) { lu_solve_in_place(F, x, k, ld); },
      [&F](double* x, index_t k, index_t ld) { lu_solve_in_place(F, x, k, ld, Transpose::yes); });
}

/// The largest componentwise backward error of the columns of X as solutions of A X = B (n x nrhs, leading
/// dimension n).
double worst_berr(const SparseMatrix& A, const std::vector<double>& B, const std::vector<double>& X, index_t nrhs) {
  const index_t n = A.rows();
  double worst = 0;
  for (index_t j = 0; j < nrhs; ++j)
    worst = std::max(worst, backward_error(A, B.data() + static_cast<offset_t>(j) * n, X.data() + static_cast<offset_t>(j) * n).berr);
  return worst;
}

/// The largest Skeel condition number || |T| |T^{-1}| || (1- and inf-norm) of the triangles that the GPU
/// solve applies as explicit inverses: every supernode's unit lower L11 and upper U11 (the diagonal block
/// of LuFactor's L panel), inverted by LAPACK's dtrtri. O(sum of k^3): for the matrices where it is needed.
double largest_block_condition(const LuFactor& F) {
  const SymbolicFactor& S = F.structure();
  double worst = 1;
  for (index_t s = 0; s < S.num_supernodes; ++s) {
    const int k = static_cast<int>(S.supernode_cols(s)), m = static_cast<int>(S.supernode_rows(s));
    const double* B = F.l_panel(s);
    for (const bool lower : {true, false}) {
      // In triangle T (the diagonal's ones for L11): entries of T and of X = T^{-1}, whose other triangle
      // dtrtri leaves as it found it.
      auto inside = [&](int r, int c) { return lower ? r >= c : r <= c; };
      auto t = [&](int r, int c) {
        return !inside(r, c) ? 0.0 : lower && r == c ? 1.0 : B[r + static_cast<offset_t>(c) * m];
      };
      std::vector<double> X(static_cast<std::size_t>(k) * k);
      for (int c = 0; c < k; ++c)
        for (int r = 0; r < k; ++r) X[r + static_cast<std::size_t>(c) * k] = B[r + static_cast<offset_t>(c) * m];
      int info = 0;
      dtrtri_(lower ? "L" : "U", lower ? "U" : "N", &k, X.data(), &k, &info);
      if (info != 0) return std::numeric_limits<double>::infinity();  // a zero pivot: no bound
      auto x = [&](int r, int c) {
        return !inside(r, c) ? 0.0 : lower && r == c ? 1.0 : X[r + static_cast<std::size_t>(c) * k];
      };
      std::vector<double> rows(static_cast<std::size_t>(k), 0.0);  // row sums of |T| |X|
      double column_max = 0;
      for (int j = 0; j < k; ++j) {
        double column = 0;
        for (int i = 0; i < k; ++i) {
          double e = 0;
          for (int c = 0; c < k; ++c) e += std::abs(t(i, c)) * std::abs(x(c, j));
          rows[i] += e;
          column += e;
        }
        column_max = std::max(column_max, column);
      }
      worst = std::max({worst, column_max, *std::max_element(rows.begin(), rows.end())});
    }
  }
  return worst;
}

/// The GPU's A X = B and A^T X = B against the host's with the same factor. Static pivoting lets |L| |U|
/// outgrow |A|, and the GPU applies explicit inverses of the diagonal blocks where the host substitutes,
/// so the two solutions agree to what their backward errors allow: kappa_1(A) (berr_gpu + berr_host) to
/// first order, with a factor 10 for the estimate (never tighter than 1000 eps kappa_1(A)). The GPU's
/// backward error itself must stay within 100 times the host's (or 100 eps), or where it does not, within
/// 100 eps times the largest Skeel condition number of the inverted diagonal blocks (expect_berr_near_host,
/// for one backward error; block_condition is 0 until computed): applying a computed
/// inverse X of a triangle T leaves a residual of order eps |T| |X| |b| (Du Croz and Higham, IMA J. Numer.
/// Anal. 12, 1992; Higham, "Accuracy and Stability of Numerical Algorithms", 2002, ch. 14), so its
/// backward error grows with cond(T) where substitution's does not (orsirr_1, west0479 and NSR8K's
/// corrected solves pass the first bound for some right-hand sides).
void expect_berr_near_host(double berr_gpu, double berr_host, const LuFactor& F, double& block_condition,
                           const std::string& where) {
  if (berr_gpu <= 100 * std::max(berr_host, kEps)) return;
  if (block_condition == 0) block_condition = largest_block_condition(F);
  EXPECT_LE(berr_gpu, 100 * kEps * block_condition) << where << ", largest block condition " << block_condition;
}

void check_lu_gpu_against_host(Solver& solver, const SparseMatrix& A, const std::string& what,
                               const std::vector<index_t>& widths) {
  ASSERT_TRUE(solver.on_gpu()) << solver.report().placement_reason;
  const LuFactor& F = solver.lu_factor();
  const double kappa = lu_condition(A, F);
  double block_condition = 0;  // computed where the first bound does not hold
  const SparseMatrix At = A.transpose();
  const index_t n = A.rows();
  for (const index_t nrhs : widths)
    for (const Transpose trans : {Transpose::no, Transpose::yes}) {
      unsigned seed = 0;
      const std::vector<double> B = random_block(n, nrhs, seed);
      std::vector<double> X = B, expected = B;
      if (trans == Transpose::no)
        solver.solve(X.data(), nrhs, n);
      else
        solver.solve_transposed(X.data(), nrhs, n);
      ASSERT_TRUE(solver.report().last_solve->gpu);
      lu_solve_in_place(F, expected.data(), nrhs, n, trans);
      const SparseMatrix& M = trans == Transpose::no ? A : At;
      const double berr_gpu = worst_berr(M, B, X, nrhs), berr_host = worst_berr(M, B, expected, nrhs);
      char where[300];
      std::snprintf(where, sizeof where, "%s, %s, nrhs %d, kappa_1 about %.2e, berr GPU %.2e host %.2e, seed %u",
                    what.c_str(), trans == Transpose::no ? "A X = B" : "A^T X = B", static_cast<int>(nrhs), kappa,
                    berr_gpu, berr_host, seed);
      expect_berr_near_host(berr_gpu, berr_host, F, block_condition, where);
      EXPECT_LE(relative_difference(X, expected), kappa * std::max(1000 * kEps, 10 * (berr_gpu + berr_host))) << where;
    }
}

TEST(GpuSolve, LuGeneratedAndRandom) {
  SPADE_REQUIRE_GPU();
  const std::vector<index_t> widths = {1, 3, 8, 16, 100};
  const std::pair<const char*, SparseMatrix> cases[] = {
      {"cd2d 150x120", convection_diffusion_2d(150, 120, 1.0, 0.5)},
      {"cd3d 22^3", convection_diffusion_3d(22, 22, 22, 1.0, 0.5, 0.25)},
      {"random n 4000", testing::random_unsymmetric(4000, 2, 2, false, 41)},
      {"random n 2000, zero diagonal", testing::random_unsymmetric(2000, 3, 1, true, 42)},
      {"1 x 1", SparseMatrix::from_triplets(1, 1, {0}, {0}, {-3.0})}};
  for (const auto& [what, A] : cases) {
    const auto solver = lu_solver_on_gpu(A);
    check_lu_gpu_against_host(*solver, A, what, widths);
  }
}

class GpuLuReal : public ::testing::TestWithParam<const char*> {};

TEST_P(GpuLuReal, MatchesHostSolveAndRefines) {
  SPADE_REQUIRE_GPU();
  const std::string file = GetParam();
  SPADE_REQUIRE_MATRIX(file);
  const SparseMatrix A = read_matrix_market(testing::matrix_path(file));
  SolverOptions options = on(Placement::gpu);
  options.factorization = Factorization::lu;
  Solver solver(options);
  try {
    solver.analyze(A);
  } catch (const StructurallySingular& e) {
    SUCCEED() << file << ": " << e.what();  // the clear error is the admissible outcome (as in test_lu)
    return;
  }
  solver.factorize(A);
  const double kappa = lu_condition(A, solver.lu_factor());
  // Where the factor's perturbed pivots make kappa * eps large, two solutions with it need not agree.
  if (kappa * kEps < 1e-3) check_lu_gpu_against_host(solver, A, file, {1, 2});
  const index_t n = A.rows(), nrhs = 2;
  unsigned seed = 0;
  const std::vector<double> x_true = random_block(n, nrhs, seed);
  std::vector<double> B(x_true.size()), X(x_true.size(), std::nan(""));
  for (index_t r = 0; r < nrhs; ++r) A.multiply(x_true.data() + r * n, B.data() + r * n);
  RefineOptions refine;
  refine.max_steps = 10;
  refine.tolerance = 1e-13;
  const RefinementResult result = solver.solve_refined(B.data(), n, X.data(), n, nrhs, refine);
  // Every one converges: where the default tolerance's factor stagnates (lu_matrices.hpp), the facade
  // factors again at kLuCorrectedPivotTolerance and solves with the correction, on the GPU.
  EXPECT_TRUE(result.converged) << file << ": berr " << result.solution.berr << "; "
                                << solver.report().factorization_reason;
  EXPECT_LE(result.solution.berr, 1e-13) << file << ", seed " << seed;
  EXPECT_TRUE(solver.on_gpu()) << file << ": " << solver.report().placement_reason;
  if (solver.lu_factor().pivot_tolerance() >= kLuCorrectedPivotTolerance) {
    EXPECT_NE(solver.report().placement_reason.find("corrected on the GPU"), std::string::npos) << file;
    // Its plain solves are corrected too, on the GPU: A X = B and A^T X = B as accurate as the host's
    // corrected solves (the rule of check_lu_gpu_against_host).
    const SparseMatrix At = A.transpose();
    const LuCorrection host_correction(solver.lu_factor());
    double block_condition = 0;
    for (const Transpose trans : {Transpose::no, Transpose::yes}) {
      std::vector<double> Y = B, host = B;
      if (trans == Transpose::no)
        solver.solve(Y.data(), nrhs, n);
      else
        solver.solve_transposed(Y.data(), nrhs, n);
      ASSERT_TRUE(solver.report().last_solve->gpu) << file;
      host_correction.solve_in_place(solver.lu_factor(), host.data(), nrhs, n, trans);
      const SparseMatrix& M = trans == Transpose::no ? A : At;
      const double berr_gpu = worst_berr(M, B, Y, nrhs), berr_host = worst_berr(M, B, host, nrhs);
      char where[200];
      std::snprintf(where, sizeof where, "%s, %s: berr GPU %.2e host %.2e", file.c_str(),
                    trans == Transpose::no ? "A X = B" : "A^T X = B", berr_gpu, berr_host);
      expect_berr_near_host(berr_gpu, berr_host, solver.lu_factor(), block_condition, where);
    }
  }
}

TEST(GpuSolve, LuCorrectionMatchesTheHostCorrection) {
  SPADE_REQUIRE_GPU();
  // Random matrices with a zero diagonal at pivot tolerance 0.5: many replaced pivots, a factor of a
  // matrix far from A. The GPU's corrected solves (both systems, one and several right-hand sides, a
  // leading dimension above n) agree with the host's LuCorrection to what their backward errors allow.
  for (const unsigned seed : {3u, 8u}) {
    const index_t n = 700;
    const SparseMatrix A = testing::random_unsymmetric(n, 3, 2, true, seed);
    LuFactorOptions options;
    options.pivot_tolerance = 0.5;
    const auto analysis = analyze_lu(A);
    const LuFactor F(analysis, A, options);
    ASSERT_GT(F.perturbed_pivots(), 32) << "more replaced pivots than a warp";
    const LuCorrection C(F);
    GpuSolvePlan plan(analysis, build_schedule(F.structure()));
    EXPECT_THROW(GpuLuCorrection(F, plan), InvalidInput) << "the plan holds no values yet";
    plan.begin_values();
    plan.upload_lu(F);
    plan.finish_values(F.generation());
    GpuLuCorrection device(F, plan);
    EXPECT_EQ(device.rank(), C.rank());
    EXPECT_TRUE(device.built_for(F));
    const double kappa = condition_estimate(
        A, [&](double* x, index_t k, index_t ld) { C.solve_in_place(F, x, k, ld); },
        [&](double* x, index_t k, index_t ld) { C.solve_in_place(F, x, k, ld, Transpose::yes); });
    for (const index_t nrhs : {1, 3, 9})
      for (const Transpose trans : {Transpose::no, Transpose::yes}) {
        const index_t ldx = n + 5;
        unsigned rhs_seed = seed;
        const std::vector<double> B = random_block(ldx, nrhs, rhs_seed);
        std::vector<double> host = B, gpu(B.size(), 0.0);
        C.solve_in_place(F, host.data(), nrhs, ldx, trans);
        double *X = nullptr, *W = nullptr;
        ASSERT_EQ(cudaMalloc(&X, B.size() * sizeof(double)), cudaSuccess);
        ASSERT_EQ(cudaMalloc(&W, static_cast<std::size_t>(n) * nrhs * sizeof(double)), cudaSuccess);
        ASSERT_EQ(cudaMemcpy(X, B.data(), B.size() * sizeof(double), cudaMemcpyHostToDevice), cudaSuccess);
        double forward = 0, backward = 0;
        int passes = 0;
        device.solve(plan, X, ldx, nrhs, trans, W, forward, backward, passes);
        ASSERT_EQ(cudaMemcpy(gpu.data(), X, B.size() * sizeof(double), cudaMemcpyDeviceToHost), cudaSuccess);
        cudaFree(X);
        cudaFree(W);
        EXPECT_GT(passes, 1) << "two solves with the plan";
        EXPECT_GT(forward + backward, 0.0);
        for (index_t r = 0; r < nrhs; ++r)  // the rows past n are not touched
          for (index_t i = n; i < ldx; ++i) ASSERT_EQ(gpu[i + r * ldx], B[i + r * ldx]);
        std::vector<double> gpu_n, host_n, b_n;
        for (index_t r = 0; r < nrhs; ++r) {
          gpu_n.insert(gpu_n.end(), gpu.begin() + r * ldx, gpu.begin() + r * ldx + n);
          host_n.insert(host_n.end(), host.begin() + r * ldx, host.begin() + r * ldx + n);
          b_n.insert(b_n.end(), B.begin() + r * ldx, B.begin() + r * ldx + n);
        }
        // As check_lu_gpu_against_host: the two agree to what their backward errors allow.
        const SparseMatrix M = trans == Transpose::no ? A : A.transpose();
        const double berr_gpu = worst_berr(M, b_n, gpu_n, nrhs), berr_host = worst_berr(M, b_n, host_n, nrhs);
        char where[200];
        std::snprintf(where, sizeof where, "matrix seed %u, nrhs %d, %s, kappa_1 about %.2e, berr GPU %.2e host %.2e, "
                      "seed %u", seed, static_cast<int>(nrhs), trans == Transpose::no ? "A X = B" : "A^T X = B",
                      kappa, berr_gpu, berr_host, rhs_seed);
        EXPECT_LE(berr_gpu, 100 * std::max(berr_host, kEps)) << where;
        EXPECT_LE(relative_difference(gpu_n, host_n), kappa * std::max(1000 * kEps, 10 * (berr_gpu + berr_host)))
            << where;
      }
  }
  const SparseMatrix A = convection_diffusion_2d(30, 20, 1.0, 0.5);
  const auto analysis = analyze_lu(A);
  const LuFactor F(analysis, A);
  ASSERT_EQ(F.perturbed_pivots(), 0);
  GpuSolvePlan plan(analysis, build_schedule(F.structure()));
  plan.begin_values();
  plan.upload_lu(F);
  plan.finish_values(F.generation());
  EXPECT_THROW(GpuLuCorrection(F, plan), InvalidInput) << "no replaced pivots";
}

INSTANTIATE_TEST_SUITE_P(SharedMatrices, GpuLuReal, ::testing::ValuesIn(testing::kLuMatrices),
                         testing::lu_matrix_test_name);

TEST(GpuSolve, LuTwentyRefactorizationsAndDeviceMemory) {
  SPADE_REQUIRE_GPU();
  const SparseMatrix A = testing::random_unsymmetric(2500, 2, 2, false, 51);
  const auto owner = lu_solver_on_gpu(A);
  Solver& solver = *owner;
  const index_t n = A.rows();
  unsigned seed = 0;
  const std::vector<double> B = random_block(n, 2, seed);
  for (int t = 1; t <= 20; ++t) {
    SparseMatrix At = A;
    for (std::size_t p = 0; p < At.values().size(); ++p) At.values()[p] *= 1.0 + 0.01 * t * std::sin(1.0 + p);
    solver.factorize(At);
    ASSERT_TRUE(solver.on_gpu());
    EXPECT_EQ(solver.report().plan->plan_seconds, 0.0) << "the plan is reused";
    std::vector<double> X = B, host = B;
    solver.solve(X.data(), 2, n);
    lu_solve_in_place(solver.lu_factor(), host.data(), 2, n);
    const double kappa = lu_condition(At, solver.lu_factor());
    ASSERT_LE(relative_difference(X, host), 1000 * kEps * std::max(kappa, 1.0)) << "refactorization " << t;
  }
  // Right-hand sides and solutions in device memory, leading dimension above n.
  const index_t ld = n + 3, nrhs = 3;
  std::vector<double> Bh(static_cast<std::size_t>(ld) * nrhs, 0.0);
  const std::vector<double> Bc = random_block(n, nrhs, seed);
  for (index_t j = 0; j < nrhs; ++j) std::copy_n(Bc.data() + j * n, n, Bh.data() + j * ld);
  double* Bd = nullptr;
  ASSERT_EQ(cudaMalloc(&Bd, Bh.size() * sizeof(double)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(Bd, Bh.data(), Bh.size() * sizeof(double), cudaMemcpyHostToDevice), cudaSuccess);
  solver.solve(Bd, nrhs, ld, Memory::device);
  std::vector<double> Xh(Bh.size());
  ASSERT_EQ(cudaMemcpy(Xh.data(), Bd, Xh.size() * sizeof(double), cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(Bd);
  std::vector<double> X(Bc.size()), expected = Bc;
  for (index_t j = 0; j < nrhs; ++j) std::copy_n(Xh.data() + j * ld, n, X.data() + j * n);
  lu_solve_in_place(solver.lu_factor(), expected.data(), nrhs, n);
  EXPECT_LE(relative_difference(X, expected), 1e6 * kEps);
}

TEST(GpuPlan, Fp32CopySolvesWithTheRoundedPanels) {
  SPADE_REQUIRE_GPU();
  for (const auto& A : {laplacian_3d(18, 18, 18, Stencil::twenty_seven_point), laplacian_2d(90, 80), dense_spd(300)}) {
    const NumericFactor F(analyze(A), A);
    const SymbolicFactor& S = F.symbolic();
    GpuSolvePlan fresh(F.symbolic_ptr(), build_schedule(S));
    EXPECT_NE(testing::error_of<InvalidInput>([&] { fresh.make_single_copy(); }).find("no complete values"),
              std::string::npos);
    const auto plan = plan_for(F);
    const index_t n = S.n;
    double* d = nullptr;
    ASSERT_EQ(cudaMalloc(&d, static_cast<std::size_t>(n) * 16 * sizeof(double)), cudaSuccess);
    EXPECT_NE(testing::error_of<InvalidInput>([&] { plan->solve(d, n, d, n, 1, F.generation(), Transpose::no, true); })
                  .find("no FP32 copy"),
              std::string::npos);
    ASSERT_TRUE(plan->make_single_copy());
    EXPECT_EQ(plan->single_copy_bytes(), static_cast<std::size_t>(S.panel_offset.back()) * sizeof(float));
    // The reference: the host schedule on the device's inverted panels rounded to FP32.
    std::vector<double> rounded(static_cast<std::size_t>(S.panel_offset.back()));
    plan->copy_values_to_host(rounded.data());
    for (double& v : rounded) v = static_cast<float>(v);
    const double kappa = condition_of(A, F);
    for (const index_t nrhs : {1, 3, 16}) {
      unsigned seed = 0;
      const std::vector<double> B = random_block(n, nrhs, seed);
      std::vector<double> expected(B.size()), X(B.size()), X64(B.size());
      schedule_solve_reference(S, plan->schedule(), rounded.data(), B.data(), n, expected.data(), n, nrhs);
      for (const bool single : {true, false}) {
        ASSERT_EQ(cudaMemcpy(d, B.data(), B.size() * sizeof(double), cudaMemcpyHostToDevice), cudaSuccess);
        plan->solve(d, n, d, n, nrhs, F.generation(), Transpose::no, single);
        ASSERT_EQ(cudaMemcpy((single ? X : X64).data(), d, B.size() * sizeof(double), cudaMemcpyDeviceToHost),
                  cudaSuccess);
      }
      EXPECT_LE(relative_difference(X, expected), 1000 * kEps * std::max(kappa, 1.0))
          << "n " << n << ", nrhs " << nrhs << ", seed " << seed;
      // It did read the FP32 copy: the rounding moves the solution by far more than FP64's rounding would.
      EXPECT_GT(relative_difference(X, X64), 1e-12) << "n " << n << ", nrhs " << nrhs;
      EXPECT_LE(relative_difference(X, X64), 1e-4) << "n " << n << ", nrhs " << nrhs;
    }
    cudaFree(d);
  }
}

TEST(GpuPlan, NoFp32CopyOfPanelsBeyondItsRange) {
  SPADE_REQUIRE_GPU();
  // L's entries about 1e-40, its inverted diagonal blocks about 1e40: beyond FP32's 3.4e38.
  SparseMatrix A = laplacian_2d(30, 20);
  std::vector<double> values = A.values();
  for (double& v : values) v *= 1e-80;
  A = SparseMatrix(A.rows(), A.cols(), A.col_ptr(), A.row_ind(), values);
  const NumericFactor F(analyze(A), A);
  const auto plan = plan_for(F);
  EXPECT_FALSE(plan->make_single_copy());
  EXPECT_FALSE(plan->make_single_copy());  // refused again for these values, without a second conversion
  // The Solver's refinement then corrects in FP64 only.
  Solver solver(on(Placement::gpu));
  solver.analyze(A);
  solver.factorize(A);
  const index_t n = A.rows();
  unsigned seed = 0;
  const std::vector<double> B = random_block(n, 1, seed);
  std::vector<double> X(B.size());
  const RefinementResult r = solver.solve_refined(B.data(), n, X.data(), n, 1);
  EXPECT_LE(r.solution.berr, 1e-14) << "seed " << seed;
  for (const RefinementStep& step : r.steps) EXPECT_FALSE(step.single);
}

/// GPU refinement with corrections in FP32 and in FP64: both reach `target`.
void check_mixed_precision_refinement(Solver& solver, const SparseMatrix& A, const std::string& what, double target) {
  const index_t n = A.rows();
  for (const index_t nrhs : {1, 3}) {
    unsigned seed = 0;
    const std::vector<double> B = random_block(n, nrhs, seed);
    std::vector<double> X(B.size(), std::nan("")), X64(B.size(), std::nan(""));
    RefineOptions fp32, fp64;
    fp32.corrections = CorrectionPrecision::fp32;
    fp64.corrections = CorrectionPrecision::fp64;
    const RefinementResult r = solver.solve_refined(B.data(), n, X.data(), n, nrhs, fp32);
    const RefinementResult r64 = solver.solve_refined(B.data(), n, X64.data(), n, nrhs, fp64);
    EXPECT_LE(r.solution.berr, target) << what << ", nrhs " << nrhs << ", seed " << seed;
    EXPECT_LE(r64.solution.berr, target) << what << ", nrhs " << nrhs << ", seed " << seed;
    EXPECT_LE(worst_berr(A, B, X, nrhs), 2 * target) << what << ", nrhs " << nrhs << ", seed " << seed;
    for (const RefinementStep& step : r64.steps) EXPECT_FALSE(step.single) << what;
  }
}

TEST(GpuSolve, MixedPrecisionRefinement) {
  SPADE_REQUIRE_GPU();
  // Corrections of a well-conditioned A in FP32 (the refinement below asks for 1e-17, below what any
  // solution reaches, so that it makes corrections and stops where they stall).
  RefineOptions strict;
  strict.tolerance = 1e-17;
  strict.corrections = CorrectionPrecision::fp32;
  for (const auto& [A, what] : {std::pair{laplacian_3d(30, 30, 30), "lap3d 30^3"},
                                std::pair{laplacian_2d(120, 120, Stencil::nine_point), "lap2d 9-point 120^2"}}) {
    Solver solver(on(Placement::gpu));
    solver.analyze(A);
    solver.factorize(A);
    ASSERT_TRUE(solver.on_gpu());
    ASSERT_NO_FATAL_FAILURE(check_mixed_precision_refinement(solver, A, what, 4 * kEps));
    const index_t n = A.rows();
    unsigned seed = 0;
    const std::vector<double> B = random_block(n, 2, seed);
    std::vector<double> X(B.size());
    const RefinementResult r = solver.solve_refined(B.data(), n, X.data(), n, 2, strict);
    ASSERT_GE(r.steps.size(), 2u) << what;
    EXPECT_TRUE(r.steps[1].single) << what;
    EXPECT_LE(r.solution.berr, 4 * kEps) << what << ", seed " << seed;
  }
  // An unsymmetric LU (convection-diffusion, no replaced pivots), the same way.
  {
    const SparseMatrix A = convection_diffusion_2d(80, 70, 30, -20);
    auto solver = lu_solver_on_gpu(A);
    ASSERT_TRUE(solver->on_gpu());
    ASSERT_NO_FATAL_FAILURE(check_mixed_precision_refinement(*solver, A, "convection-diffusion 80x70", 4 * kEps));
    const index_t n = A.rows();
    unsigned seed = 0;
    const std::vector<double> B = random_block(n, 1, seed);
    std::vector<double> X(B.size());
    const RefinementResult r = solver->solve_refined(B.data(), n, X.data(), n, 1, strict);
    ASSERT_GE(r.steps.size(), 2u);
    EXPECT_TRUE(r.steps[1].single);
  }
  // Hilbert 10 (kappa about 1.6e13, far beyond 2^24): an FP32 correction cannot contract; FP64 takes over.
  {
    const index_t n = 10;
    const SparseMatrix H = hilbert(n);
    Solver solver(on(Placement::gpu));
    solver.analyze(H);
    solver.factorize(H);
    unsigned seed = 0;
    const std::vector<double> B = random_block(n, 1, seed);
    std::vector<double> X(B.size()), X64(B.size());
    RefineOptions fp32, fp64;
    fp32.corrections = CorrectionPrecision::fp32;
    fp64.corrections = CorrectionPrecision::fp64;
    const RefinementResult r = solver.solve_refined(B.data(), n, X.data(), n, 1, fp32);
    const RefinementResult r64 = solver.solve_refined(B.data(), n, X64.data(), n, 1, fp64);
    bool fp32_then_fp64 = false;
    for (std::size_t k = 2; k < r.steps.size(); ++k) fp32_then_fp64 |= r.steps[k - 1].single && !r.steps[k].single;
    if (r64.steps.size() > 1) {  // refinement was needed at all
      EXPECT_TRUE(fp32_then_fp64 || r.converged) << "seed " << seed;
    }
    EXPECT_LE(r.solution.berr, std::max(4 * kEps, 2 * r64.solution.berr)) << "seed " << seed;
  }
}

TEST(GpuSolve, AutomaticCorrectionsAreFp32WhereTheSweepIsBandwidthBound) {
  SPADE_REQUIRE_GPU();
  RefineOptions strict;  // corrections until they stall
  strict.tolerance = 1e-17;
  // A latency-bound factor and a bandwidth-bound one (at the bandwidth of a current data-center GPU: lap3d 40^3
  // was bandwidth-bound at an H100's 3 TB/s, not at an H200's 4.8).
  for (const auto& [A, what, bound] : {std::tuple{laplacian_2d(30, 20), "lap2d 30x20", false},
                                       std::tuple{laplacian_3d(52, 52, 52), "lap3d 52^3", true}}) {
    SolverOptions options = on(Placement::gpu);
    options.partitioned_inverse = false;  // the plan's structure is the factor's
    Solver solver(options);
    solver.analyze(A);
    solver.factorize(A);
    const SymbolicFactor& S = solver.symbolic();
    const SweepTerms terms = partition_terms(S, build_schedule(S), 1, kSolveHandoffSeconds, gpu_bandwidth_estimate());
    EXPECT_EQ(terms.bytes > terms.handoffs, bound) << what << ": hand-offs " << terms.handoffs << " s, bytes "
                                                   << terms.bytes << " s";
    const index_t n = A.rows();
    unsigned seed = 0;
    const std::vector<double> B = random_block(n, 1, seed);
    std::vector<double> X(B.size());
    const RefinementResult r = solver.solve_refined(B.data(), n, X.data(), n, 1, strict);
    ASSERT_GE(r.steps.size(), 2u) << what;
    EXPECT_EQ(r.steps[1].single, terms.bytes > terms.handoffs) << what;
    EXPECT_LE(r.solution.berr, 4 * kEps) << what << ", seed " << seed;
  }
}

TEST(GpuSolve, ReportNamesThePlan) {
  SPADE_REQUIRE_GPU();
  const SparseMatrix A = laplacian_3d(20, 20, 20);
  Solver solver;
  solver.analyze(A);
  solver.factorize(A);
  ASSERT_TRUE(solver.on_gpu()) << solver.report().placement_reason;
  const Report& r = solver.report();
  EXPECT_EQ(r.placement_reason.rfind("GPU: ", 0), 0u);
  ASSERT_TRUE(r.plan);
  EXPECT_GT(r.plan->tiles + r.plan->groups, 0);
  EXPECT_GT(r.plan->device_bytes, r.plan->factor_bytes);
  EXPECT_GT(r.plan->plan_seconds, 0);
  std::vector<double> X(A.rows(), 1.0);
  solver.solve(X.data(), 1, A.rows());
  ASSERT_TRUE(r.last_solve);
  EXPECT_TRUE(r.last_solve->gpu);
  EXPECT_GT(r.last_solve->forward_seconds, 0);
  EXPECT_GT(r.last_solve->backward_seconds, 0);
}

}  // namespace
}  // namespace spade
