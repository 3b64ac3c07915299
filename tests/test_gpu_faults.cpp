// GPU memory faults (run on the device; skipped without a GPU): a device memory limit set before the plan
// is built, below what the plan needs, gives the host fallback with the right answer under placement auto
// and a clear ResourceError under placement gpu, never a wrong answer.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gpu_test.hpp"
#include "spade/error.hpp"
#include "spade/generators.hpp"
#include "spade/solver.hpp"

namespace spade {
namespace {

struct Problem {
  SparseMatrix A = laplacian_3d(12, 12, 12);
  std::vector<double> x_true, b;
  Problem() {
    const index_t n = A.rows();
    for (index_t i = 0; i < n; ++i) x_true.push_back(1 + std::sin(static_cast<double>(i)));
    b.resize(n);
    A.multiply(x_true.data(), b.data());
  }
};

SolverOptions limited(Placement placement, std::size_t bytes) {
  SolverOptions o;
  o.placement = placement;
  o.device_memory_limit = bytes;
  return o;
}

TEST(GpuMemoryLimit, BelowWhatThePlanNeedsFallsBackToTheHostUnderAuto) {
  SPADE_REQUIRE_GPU();
  const Problem p;
  const index_t n = p.A.rows();
  // First the plan's real need, then a limit one byte below it.
  Solver unlimited(limited(Placement::gpu, 0));
  unlimited.analyze(p.A);
  unlimited.factorize(p.A);
  ASSERT_TRUE(unlimited.report().gpu);
  const std::size_t need = unlimited.report().plan->device_bytes;
  for (const std::size_t limit : {std::size_t{1}, need - 1}) {
    Solver solver(limited(Placement::automatic, limit));
    solver.analyze(p.A);
    solver.factorize(p.A);
    EXPECT_FALSE(solver.report().gpu);
    EXPECT_NE(solver.report().placement_reason.find("device memory limit"), std::string::npos)
        << solver.report().placement_reason;
    std::vector<double> x(n);
    const RefinementResult r = solver.solve_refined(p.b.data(), n, x.data(), n, 1);
    double error = 0;
    for (index_t i = 0; i < n; ++i) error = std::max(error, std::abs(x[i] - p.x_true[i]));
    EXPECT_LT(error, 1e-10);
    EXPECT_LT(r.solution.berr, 1e-14);
  }
}

TEST(GpuMemoryLimit, BelowWhatThePlanNeedsIsAResourceErrorUnderGpu) {
  SPADE_REQUIRE_GPU();
  const Problem p;
  Solver solver(limited(Placement::gpu, 1));
  solver.analyze(p.A);
  try {
    solver.factorize(p.A);
    FAIL() << "placement gpu with a 1-byte device memory limit factorized";
  } catch (const ResourceError& e) {
    EXPECT_NE(std::string(e.what()).find("device memory limit"), std::string::npos) << e.what();
  }
  std::vector<double> x = p.b;
  EXPECT_THROW(solver.solve(x.data(), 1, p.A.rows()), InvalidInput);  // no factor to solve with
}

}  // namespace
}  // namespace spade
