// Allocation-failure torture of the factorization and the host solves, after CHOLMOD's Tcov tests: this
// program replaces the global operator new so that, when armed, its k-th call fails with std::bad_alloc.
// For every k until a run no longer meets the failure, the run must throw ResourceError (never crash,
// never std::bad_alloc, never terminate from inside an OpenMP region), leak nothing (the sanitizer build
// of scripts/sanitize.sh runs LeakSanitizer over this program), and leave a factor that is either usable
// and correct or, after a failed refactorization, refused by the solves until a refactorization succeeds.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <memory>
#include <new>
#include <vector>

#include "spade/cholesky.hpp"
#include "spade/error.hpp"
#include "spade/generators.hpp"
#include "spade/solve.hpp"
#include "spade/symbolic.hpp"

namespace {

/// > 0: armed; the allocation that brings it from 1 to 0 fails. Counted over every thread.
std::atomic<long> countdown{0};

void* allocate(std::size_t size) {
  if (countdown.load(std::memory_order_relaxed) > 0 && countdown.fetch_sub(1) == 1) throw std::bad_alloc();
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}

}  // namespace

void* operator new(std::size_t size) { return allocate(size); }
void* operator new[](std::size_t size) { return allocate(size); }
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  try {
    return allocate(size);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
void* operator new[](std::size_t size, const std::nothrow_t& tag) noexcept { return operator new(size, tag); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

namespace spade {
namespace {

/// Runs f with the k-th allocation failing, for k = 1, 2, ... until f runs without meeting the failure.
/// Every failed run must throw ResourceError; after each, `check` runs unarmed. Returns the allocations
/// of the successful run (k - 1).
long torture(const std::function<void()>& f, const std::function<void()>& check = [] {}) {
  for (long k = 1;; ++k) {
    countdown = k;
    bool resource_error = false;
    try {
      f();
    } catch (const ResourceError& e) {
      resource_error = true;
    } catch (const std::exception& e) {
      countdown = 0;
      ADD_FAILURE() << "allocation " << k << " failed and gave another exception: " << e.what();
      return k;
    }
    const bool met = countdown <= 0;
    countdown = 0;
    if (!met) {
      std::printf("%ld allocations, each made to fail once\n", k - 1);
      EXPECT_FALSE(resource_error) << "allocation " << k << ": a ResourceError without a failed allocation";
      return k - 1;
    }
    EXPECT_TRUE(resource_error) << "allocation " << k << " failed, yet the run reported success";
    check();
    if (::testing::Test::HasFailure()) return k;
  }
}

FactorOptions two_threads() {
  FactorOptions o;
  o.threads = 2;  // the subtree-parallel path as well as the top of the tree (at most the machine's cores)
  return o;
}

/// A small SPD problem, factored once unarmed: the OpenMP runtime initializes itself and its thread pool
/// on first use (allocating), which is not part of any factorization under test.
struct Problem {
  SparseMatrix A = laplacian_2d(12, 9);
  std::shared_ptr<const SymbolicFactor> S = analyze(A);
  std::vector<double> x_true, b;
  Problem() {
    const index_t n = A.rows();
    for (index_t i = 0; i < n; ++i) x_true.push_back(1 + std::sin(static_cast<double>(i)));
    b.resize(n);
    A.multiply(x_true.data(), b.data());
    NumericFactor warm_up(S, A, two_threads());
  }
  /// max_i |x_i - x_true_i| / max_i |x_true_i|
  double error_of(const std::vector<double>& x) const {
    double diff = 0, norm = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      diff = std::max(diff, std::abs(x[i] - x_true[i]));
      norm = std::max(norm, std::abs(x_true[i]));
    }
    return diff / norm;
  }
};

constexpr double tolerance = 1e3 * std::numeric_limits<double>::epsilon();

TEST(AllocationFaults, EveryAllocationOfTheFactorizationIsAResourceError) {
  const Problem p;
  const long allocations = torture([&] { NumericFactor F(p.S, p.A, two_threads()); });
  EXPECT_GT(allocations, 5);
}

TEST(AllocationFaults, AFailedRefactorizationIsRefusedUntilARefactorizationSucceeds) {
  const Problem p;
  NumericFactor F(p.S, p.A, two_threads());
  torture([&] { F.refactorize(p.A); },
          [&] {
            EXPECT_FALSE(F.valid());
            std::vector<double> x = p.b;
            EXPECT_THROW(solve_in_place(F, x.data(), 1, p.A.rows()), InvalidInput);
            F.refactorize(p.A);
            ASSERT_TRUE(F.valid());
            solve_in_place(F, x.data(), 1, p.A.rows());
            EXPECT_LT(p.error_of(x), tolerance);
          });
}

TEST(AllocationFaults, EveryAllocationOfTheSolveIsAResourceErrorAndTheFactorStaysUsable) {
  const Problem p;
  const NumericFactor F(p.S, p.A, two_threads());
  std::vector<double> x(p.b.size());
  const long allocations = torture([&] {
    std::copy(p.b.begin(), p.b.end(), x.begin());  // no allocation of the test's own in the run
    solve_in_place(F, x.data(), 1, p.A.rows());
  });
  EXPECT_GT(allocations, 0);
  EXPECT_LT(p.error_of(x), tolerance);
}

TEST(AllocationFaults, EveryAllocationOfTheRefinedSolveIsAResourceError) {
  const Problem p;
  const NumericFactor F(p.S, p.A, two_threads());
  const index_t n = p.A.rows();
  std::vector<double> x(n);
  RefinementResult result;
  const long allocations = torture([&] { result = solve_refined(p.A, F, p.b.data(), n, x.data(), n, 1); });
  EXPECT_GT(allocations, 0);
  EXPECT_LT(p.error_of(x), tolerance);
  EXPECT_LT(result.solution.berr, tolerance);
}

}  // namespace
}  // namespace spade
