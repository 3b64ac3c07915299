// The GPU solve's schedule (solve/supernodal_schedule.hpp) without a GPU: its structure on a golden chain,
// its invariants on generated and real matrices, and its host reference (selective inversion and the
// tiled sweeps) against the host supernodal solve; the same for the partitioned inverse's merged
// structure (solve/partitioned_inverse.hpp), and the properties of its band rule.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>
#include <random>
#include <vector>

#include "../solve/partitioned_inverse.hpp"
#include "../solve/supernodal_schedule.hpp"
#include "condition.hpp"
#include "spade/cholesky.hpp"
#include "spade/error.hpp"
#include "spade/generators.hpp"
#include "spade/matrix_market.hpp"
#include "spade/solve.hpp"
#include "spade/symbolic.hpp"
#include "test_matrices.hpp"
#include "test_problems.hpp"

namespace spade {
namespace {

constexpr double kEps = std::numeric_limits<double>::epsilon();
using Schedule = SupernodalSchedule;

AnalyzeOptions natural_unrelaxed() {
  AnalyzeOptions o;
  o.ordering = OrderingMethod::natural;
  o.supernodes.relax = false;
  return o;
}

TEST(Schedule, GoldenChain) {
  // 200 columns in a chain: supernodes 0..197 of one column (rows j, j+1) and supernode 198 of the last two
  // (the fundamental-supernode rule merges them). The bottom 64 form one group whose parent is supernode 64;
  // the other 135 are one tile each, in a chain of height 135.
  const auto S = analyze(testing::tridiagonal(200), natural_unrelaxed());
  ASSERT_EQ(S->num_supernodes, 199);
  const Schedule s = build_schedule(*S);
  ASSERT_EQ(s.num_groups, 1);
  EXPECT_EQ(s.tasks[0].first, 0);
  EXPECT_EQ(s.tasks[0].last, 63);
  EXPECT_LT(s.tasks[0].row0, 0);
  EXPECT_EQ(s.grouped_supernodes, 64);
  EXPECT_EQ(s.tiled_supernodes, 135);
  EXPECT_EQ(s.height, 135);
  EXPECT_EQ(s.critical_columns, 200);
  ASSERT_EQ(s.tasks.size(), 136u);
  for (index_t t = 1; t < 136; ++t) {
    EXPECT_EQ(s.tasks[t].first, 63 + t);
    EXPECT_EQ(s.tasks[t].row0, 0);
    EXPECT_EQ(s.tasks[t].col0, 0);
  }
  EXPECT_EQ(s.need[64], 1);  // the group
  for (index_t j = 65; j < 199; ++j) EXPECT_EQ(s.need[j], 1) << j;
  for (index_t j = 64; j < 199; ++j) EXPECT_EQ(s.units[j], 1) << j;
  for (index_t j = 0; j < 64; ++j) EXPECT_EQ(s.units[j] + s.need[j], 0) << j;
  EXPECT_EQ(s.small_inverse.size(), 199u);
  EXPECT_TRUE(s.large_inverse.empty());
}

TEST(Schedule, DiagonalMatrixIsAForestOfGroups) {
  // 1000 roots of one column each: consecutive roots pack into groups of kGroupColumns.
  std::vector<std::int64_t> idx(1000);
  for (index_t i = 0; i < 1000; ++i) idx[i] = i;
  const SparseMatrix D = SparseMatrix::from_triplets(1000, 1000, idx, idx, std::vector<double>(1000, 3.0));
  const Schedule s = build_schedule(*analyze(D, natural_unrelaxed()));
  EXPECT_EQ(s.tiled_supernodes, 0);
  EXPECT_EQ(s.num_groups, (1000 + Schedule::kGroupColumns - 1) / Schedule::kGroupColumns);
  EXPECT_EQ(s.grouped_supernodes, 1000);
}

TEST(Schedule, OneDenseSupernode) {
  // A dense 100 x 100 SPD matrix is one supernode: 4 column blocks of 32, with 4 + 3 + 2 + 1 tiles on and
  // below the diagonal.
  std::vector<std::int64_t> r, c;
  std::vector<double> v;
  for (index_t j = 0; j < 100; ++j)
    for (index_t i = 0; i < 100; ++i) r.push_back(i), c.push_back(j), v.push_back(i == j ? 200.0 : 1.0);
  const auto S = analyze(SparseMatrix::from_triplets(100, 100, r, c, v));
  ASSERT_EQ(S->num_supernodes, 1);
  const Schedule s = build_schedule(*S);
  EXPECT_EQ(s.num_groups, 0);
  ASSERT_EQ(s.tasks.size(), 10u);
  EXPECT_EQ(s.units[0], 10);
  EXPECT_EQ(s.need[0], 0);
  EXPECT_EQ(s.mid_inverse, std::vector<index_t>{0});
  EXPECT_TRUE(s.large_inverse.empty());
}

/// Checks every invariant the kernels rely on.
void check_invariants(const SymbolicFactor& S, const Schedule& s, const std::string& what) {
  const index_t ns = S.num_supernodes, T = Schedule::kTile;
  std::vector<index_t> task_group(ns, -1);  // group task holding each grouped supernode
  std::vector<index_t> last_task(ns, -1);   // last tile task of each tiled supernode
  std::vector<index_t> first_task(ns, -1);
  std::vector<index_t> releases(ns, 0);     // tasks that release each supernode's forward counter
  for (index_t t = 0; t < static_cast<index_t>(s.tasks.size()); ++t) {
    const SolveTask& task = s.tasks[t];
    if (task.row0 < 0) {
      const index_t lo = S.supernode_begin[task.first], hi = S.supernode_begin[task.last + 1];
      EXPECT_LE(hi - lo, Schedule::kGroupColumns) << what;
      offset_t entries = 0;
      const index_t parent = S.super_parent[task.last];
      for (index_t j = task.first; j <= task.last; ++j) {
        EXPECT_EQ(task_group[j], -1) << what << ": supernode " << j << " in two groups";
        task_group[j] = t;
        entries += static_cast<offset_t>(S.supernode_cols(j)) * S.supernode_rows(j);
        // Closed under descendants: every member's parent is a member or the group's one parent.
        const index_t p = S.super_parent[j];
        if (p < task.first || p > task.last) {
          EXPECT_EQ(p, parent) << what << ": group with two parents";
        }
      }
      EXPECT_LE(entries, Schedule::kGroupEntries) << what;
      if (parent >= 0) ++releases[parent];  // once per group
    } else {
      EXPECT_EQ(task.first, task.last);
      EXPECT_GE(task.row0, task.col0) << what;
      EXPECT_EQ(task.row0 % T, 0);
      EXPECT_EQ(task.col0 % T, 0);
      EXPECT_LT(task.row0, S.supernode_rows(task.first));
      EXPECT_LT(task.col0, S.supernode_cols(task.first));
      if (first_task[task.first] < 0) first_task[task.first] = t;
      last_task[task.first] = t;
      const index_t p = S.super_parent[task.first];
      if (p >= 0) ++releases[p];
    }
  }
  std::map<std::pair<index_t, index_t>, int> seen;
  for (const SolveTask& task : s.tasks)
    if (task.row0 >= 0) ++seen[{task.first, task.row0 * 1000003 + task.col0}];
  for (const auto& [key, count] : seen) EXPECT_EQ(count, 1) << what << ": duplicate tile";
  index_t tiled = 0;
  for (index_t j = 0; j < ns; ++j) {
    const bool grouped = task_group[j] >= 0, tiles = first_task[j] >= 0;
    EXPECT_NE(grouped, tiles) << what << ": supernode " << j;
    if (!tiles) continue;
    ++tiled;
    // Every tile of the lower block triangle, contiguous in the task list.
    const index_t k = S.supernode_cols(j), m = S.supernode_rows(j);
    index_t expected = 0;
    for (index_t c0 = 0; c0 < k; c0 += T) expected += (m - c0 + T - 1) / T;
    EXPECT_EQ(s.units[j], expected) << what;
    EXPECT_EQ(last_task[j] - first_task[j] + 1, expected) << what;
    // The parent (tiled) comes after every task of the child: a topological order.
    const index_t p = S.super_parent[j];
    if (p >= 0) {
      ASSERT_GE(first_task[p], 0) << what << ": a tiled supernode under a grouped one";
      EXPECT_GT(first_task[p], last_task[j]) << what;
    }
  }
  for (index_t j = 0; j < ns; ++j) {  // groups come before their parent's tiles
    const index_t g = task_group[j], p = S.super_parent[j];
    if (g >= 0 && p >= 0 && task_group[p] < 0) {
      EXPECT_LT(g, first_task[p]) << what;
    }
  }
  // The backward order holds the same tasks, parents before children.
  ASSERT_EQ(s.backward.size(), s.tasks.size()) << what;
  std::vector<index_t> back_first(ns, -1), back_last(ns, -1);
  std::map<std::tuple<index_t, index_t, index_t, index_t>, int> forward_set, backward_set;
  for (index_t t = 0; t < static_cast<index_t>(s.backward.size()); ++t) {
    const SolveTask& task = s.backward[t];
    ++backward_set[{task.first, task.last, task.row0, task.col0}];
    for (index_t j = task.first; j <= task.last; ++j) {
      if (back_first[j] < 0) back_first[j] = t;
      back_last[j] = t;
    }
  }
  for (const SolveTask& task : s.tasks) ++forward_set[{task.first, task.last, task.row0, task.col0}];
  EXPECT_EQ(forward_set, backward_set) << what;
  for (index_t j = 0; j < ns; ++j) {
    const index_t p = S.super_parent[j];
    if (p >= 0 && (task_group[j] < 0 || task_group[j] != task_group[p])) {
      EXPECT_LT(back_last[p], back_first[j]) << what << ": supernode " << j << " before its parent";
    }
  }
  for (index_t j = 0; j < ns; ++j) {
    if (first_task[j] < 0) continue;
    EXPECT_EQ(s.need[j], releases[j]) << what << ": supernode " << j;
  }
  EXPECT_EQ(tiled, s.tiled_supernodes);
  EXPECT_EQ(s.small_inverse.size() + s.mid_inverse.size() + s.large_inverse.size(), static_cast<std::size_t>(ns));
  for (index_t j : s.small_inverse) EXPECT_LE(S.supernode_cols(j), Schedule::kSmallInverse) << what;
  for (index_t j : s.mid_inverse) {
    EXPECT_GT(S.supernode_cols(j), Schedule::kSmallInverse) << what;
    EXPECT_LE(S.supernode_cols(j), Schedule::kMidInverse) << what;
  }
  for (index_t j : s.large_inverse) EXPECT_GT(S.supernode_cols(j), Schedule::kMidInverse) << what;
}

TEST(Schedule, InvariantsOnGeneratedMatrices) {
  const std::vector<std::pair<std::string, SparseMatrix>> cases = {
      {"lap2d 5-point 60x50", laplacian_2d(60, 50)},
      {"lap2d 9-point 40x40", laplacian_2d(40, 40, Stencil::nine_point)},
      {"lap3d 7-point 16^3", laplacian_3d(16, 16, 16)},
      {"lap3d 27-point 12^3", laplacian_3d(12, 12, 12, Stencil::twenty_seven_point)},
      {"tridiagonal 3000", testing::tridiagonal(3000)}};
  for (const auto& [name, A] : cases) {
    for (const OrderingMethod o : {OrderingMethod::amd, OrderingMethod::metis, OrderingMethod::natural}) {
      AnalyzeOptions options;
      options.ordering = o;
      const auto S = analyze(A, options);
      check_invariants(*S, build_schedule(*S), name + " " + to_string(o));
    }
  }
}

TEST(Schedule, InvariantsOnRealMatrices) {
  for (const char* file : testing::spd_matrices()) {
    if (!testing::matrix_exists(file)) continue;
    const auto S = analyze(read_matrix_market(testing::matrix_path(file)));
    check_invariants(*S, build_schedule(*S), file);
  }
}

TEST(Schedule, SelectiveInversionReference) {
  // M_s = [V; W] with V L11 = I and W L11 = L21, on supernodes of many widths.
  const SparseMatrix A = laplacian_3d(14, 14, 14, Stencil::twenty_seven_point);
  const auto S = analyze(A);
  const NumericFactor F(S, A);
  std::vector<double> M = F.values();
  invert_supernodes_reference(*S, M.data());
  for (index_t s = 0; s < S->num_supernodes; ++s) {
    const index_t k = S->supernode_cols(s), m = S->supernode_rows(s);
    const double* L = F.panel(s);
    const double* P = M.data() + S->panel_offset[s];
    for (index_t r = 0; r < m; ++r)
      for (index_t c = 0; c < k; ++c) {
        // (M L11)(r, c) is the identity for r < k, and L21 for r >= k.
        double sum = 0, scale = 0;
        for (index_t l = c; l < k; ++l) {
          sum += P[r + l * m] * L[l + c * m];
          scale += std::abs(P[r + l * m] * L[l + c * m]);
        }
        const double expected = r < k ? (r == c ? 1.0 : 0.0) : L[r + c * m];
        EXPECT_LE(std::abs(sum - expected), 64 * kEps * std::max(scale, 1.0)) << s << " " << r << " " << c;
        if (r < c) {
          EXPECT_EQ(P[r + c * m], 0.0) << "V is lower triangular";
        }
      }
  }
}

/// ||X - Y||_inf / ||Y||_inf over every column.
double relative_difference(const std::vector<double>& X, const std::vector<double>& Y) {
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < X.size(); ++i) {
    diff = std::max(diff, std::abs(X[i] - Y[i]));
    norm = std::max(norm, std::abs(Y[i]));
  }
  return diff / norm;
}

/// The schedule's host reference against the host solve, nrhs = 3, in place and not: the difference must
/// stay within what the condition number allows.
void check_reference_solve(const SparseMatrix& A, const AnalyzeOptions& options, const std::string& what) {
  const auto S = analyze(A, options);
  const NumericFactor F(S, A);
  const Schedule schedule = build_schedule(*S);
  std::vector<double> M = F.values();
  invert_supernodes_reference(*S, M.data());
  const index_t n = A.rows(), nrhs = 3;
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> B(static_cast<std::size_t>(n) * nrhs);
  for (double& b : B) b = u(rng);
  std::vector<double> host = B, X(B.size(), std::nan("")), in_place = B;
  solve_in_place(F, host.data(), nrhs, n);
  schedule_solve_reference(*S, schedule, M.data(), B.data(), n, X.data(), n, nrhs);
  schedule_solve_reference(*S, schedule, M.data(), in_place.data(), n, in_place.data(), n, nrhs);
  const double kappa =
      condition_estimate(A, [&F](double* x, index_t k, index_t ld) { solve_in_place(F, x, k, ld); });
  EXPECT_LE(relative_difference(X, host), 100 * kEps * kappa) << what << ", kappa_1 about " << kappa;
  EXPECT_EQ(X, in_place) << what;
}

TEST(Schedule, ReferenceSolveMatchesHostSolve) {
  AnalyzeOptions automatic;
  check_reference_solve(laplacian_2d(80, 70), automatic, "lap2d 80x70");
  check_reference_solve(laplacian_2d(50, 50, Stencil::nine_point), automatic, "lap2d9 50x50");
  check_reference_solve(laplacian_3d(20, 20, 20), automatic, "lap3d 20^3");
  check_reference_solve(laplacian_3d(14, 14, 14, Stencil::twenty_seven_point), automatic, "lap3d27 14^3");
  check_reference_solve(testing::tridiagonal(500), natural_unrelaxed(), "tridiagonal chain");
}

TEST(Schedule, ReferenceSolveOnRealMatrices) {
  for (const char* file : {"bcsstk14.mtx.gz", "bcsstk16.mtx.gz", "4elt_lap.mtx.gz", "nos5.mtx.gz", "tomography.mtx.gz"}) {
    if (!testing::matrix_exists(file)) {
      std::printf("[ skipped  ] %s not found in %s\n", file, testing::matrix_dir().c_str());
      continue;
    }
    check_reference_solve(read_matrix_market(testing::matrix_path(file)), AnalyzeOptions{}, file);
  }
}

// ---- The partitioned inverse (solve/partitioned_inverse.hpp) ----

/// The merged structure against the factor's: a valid supernodal structure in its own right (checked by
/// the schedule's invariants too), the maps consistent, unmerged panels unchanged but for the numbering.
void check_partition(const SolveStructure& P, const std::string& what) {
  const SymbolicFactor& S = *P.factor;
  const SymbolicFactor& T = *P.solve;
  const index_t n = S.n, ns = S.num_supernodes, nt = T.num_supernodes;
  ASSERT_EQ(T.n, n) << what;
  std::vector<char> seen(n, 0);
  for (index_t j = 0; j < n; ++j) {
    ASSERT_FALSE(seen[T.perm[j]]) << what;
    seen[T.perm[j]] = 1;
    ASSERT_EQ(T.iperm[T.perm[j]], j) << what;
  }
  ASSERT_EQ(T.supernode_begin.front(), 0);
  ASSERT_EQ(T.supernode_begin.back(), n);
  index_t parts = 0, merged = 0;
  for (index_t t = 0; t < nt; ++t) {
    const index_t f = T.supernode_begin[t], k = T.supernode_cols(t), m = T.supernode_rows(t);
    ASSERT_GT(k, 0) << what;
    for (index_t i = 0; i < m; ++i) {
      const index_t r = T.row_indices[T.row_ptr[t] + i];
      if (i < k) {
        ASSERT_EQ(r, f + i) << what;
      } else {
        ASSERT_GT(r, i == k ? f + k - 1 : T.row_indices[T.row_ptr[t] + i - 1]) << what;
      }
      if (i == k) {
        ASSERT_EQ(T.supernode_of[r], T.super_parent[t]) << what << ": the parent holds the first row below";
      }
    }
    if (m == k) {
      ASSERT_EQ(T.super_parent[t], -1) << what;
    }
    ASSERT_EQ(T.panel_offset[t + 1] - T.panel_offset[t], static_cast<offset_t>(k) * m) << what;
    parts += P.parts[t];
    merged += P.parts[t] > 1;
  }
  EXPECT_EQ(parts, ns) << what;
  EXPECT_EQ(merged, P.merged_pieces) << what;
  for (index_t s = 0; s < ns; ++s) {
    const index_t t = P.target[s];
    ASSERT_EQ(P.merged(s), P.parts[t] > 1) << what;
    // Every column of s lands in t, in order, and every row keeps its original index.
    for (index_t j = 0; j < S.supernode_cols(s); ++j)
      ASSERT_EQ(T.perm[T.supernode_begin[t] + P.column_offset[s] + j], S.perm[S.supernode_begin[s] + j]) << what;
    for (offset_t q = S.row_ptr[s]; q < S.row_ptr[s + 1]; ++q) {
      const index_t row_t = T.row_indices[T.row_ptr[t] + P.row_position[q]];
      ASSERT_EQ(T.perm[row_t], S.perm[S.row_indices[q]]) << what << ", supernode " << s;
      if (!P.merged(s)) {
        ASSERT_EQ(P.row_position[q], q - S.row_ptr[s]) << what << ": an unmerged panel keeps its rows";
      }
    }
    if (!P.merged(s)) {
      ASSERT_EQ(T.supernode_rows(t), S.supernode_rows(s)) << what;
      ASSERT_EQ(P.column_offset[s], 0) << what;
    }
  }
  check_invariants(T, build_schedule(T), what);
}

TEST(PartitionedInverse, StructureInvariants) {
  const std::vector<std::pair<std::string, SparseMatrix>> cases = {
      {"lap2d 5-point 60x50", laplacian_2d(60, 50)},
      {"lap3d 27-point 12^3", laplacian_3d(12, 12, 12, Stencil::twenty_seven_point)},
      {"two blocks", testing::block_diagonal(laplacian_2d(20, 20), laplacian_3d(6, 6, 6))}};
  for (const auto& [name, A] : cases)
    for (const index_t band : {1, 2, 3, 5, 1000}) {
      const SolveStructure P = partition_for_solve(analyze(A), band);
      ASSERT_NO_FATAL_FAILURE(check_partition(P, name + ", band " + std::to_string(band)));
      if (band == 1) {
        EXPECT_EQ(P.solve, P.factor);
      }
      if (band == 1000) {
        EXPECT_EQ(P.solve->num_supernodes, name == "two blocks" ? 2 : 1) << name << ": one piece per tree";
      }
    }
  const auto chain = analyze(testing::tridiagonal(300), natural_unrelaxed());
  for (const index_t band : {2, 7, 64})
    ASSERT_NO_FATAL_FAILURE(check_partition(partition_for_solve(chain, band), "chain, band " + std::to_string(band)));
  for (const char* file : {"bcsstk14.mtx.gz", "4elt_lap.mtx.gz"}) {
    if (!testing::matrix_exists(file)) {
      std::printf("[ skipped  ] %s not found in %s\n", file, testing::matrix_dir().c_str());
      continue;
    }
    const auto S = analyze(read_matrix_market(testing::matrix_path(file)));
    for (const index_t band : {2, 4, 6})
      ASSERT_NO_FATAL_FAILURE(check_partition(partition_for_solve(S, band), std::string(file) + ", band " + std::to_string(band)));
  }
  EXPECT_THROW(partition_for_solve(chain, 0), InvalidInput);
  EXPECT_THROW(partition_for_solve(nullptr, 2), InvalidInput);
}

/// The schedule's host reference on the merged structure (values scattered by partition_values, merged
/// pieces inverted whole) against the host solve of the factor, nrhs 3.
void check_partitioned_solve(const SparseMatrix& A, const AnalyzeOptions& options, index_t band, const std::string& what) {
  const auto S = analyze(A, options);
  const NumericFactor F(S, A);
  const SolveStructure P = partition_for_solve(S, band);
  const SymbolicFactor& T = *P.solve;
  std::vector<double> M(static_cast<std::size_t>(T.panel_offset.back()), std::nan(""));
  partition_values(P, F.values().data(), M.data());
  invert_supernodes_reference(T, M.data());
  const index_t n = A.rows(), nrhs = 3;
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> B(static_cast<std::size_t>(n) * nrhs);
  for (double& b : B) b = u(rng);
  std::vector<double> host = B, X(B.size(), std::nan(""));
  solve_in_place(F, host.data(), nrhs, n);
  schedule_solve_reference(T, build_schedule(T), M.data(), B.data(), n, X.data(), n, nrhs);
  const double kappa =
      condition_estimate(A, [&F](double* x, index_t k, index_t ld) { solve_in_place(F, x, k, ld); });
  EXPECT_LE(relative_difference(X, host), 100 * kEps * kappa)
      << what << ", band " << band << " (" << P.merged_pieces << " merged pieces), kappa_1 about " << kappa;
}

TEST(PartitionedInverse, ReferenceSolveMatchesHostSolve) {
  AnalyzeOptions automatic;
  for (const index_t band : {2, 3, 6, 1000}) {
    check_partitioned_solve(laplacian_2d(80, 70), automatic, band, "lap2d 80x70");
    check_partitioned_solve(laplacian_3d(14, 14, 14, Stencil::twenty_seven_point), automatic, band, "lap3d27 14^3");
    check_partitioned_solve(testing::tridiagonal(500), natural_unrelaxed(), band, "tridiagonal chain");
  }
  for (const char* file : {"bcsstk14.mtx.gz", "bcsstk16.mtx.gz", "4elt_lap.mtx.gz", "nos5.mtx.gz"}) {
    if (!testing::matrix_exists(file)) {
      std::printf("[ skipped  ] %s not found in %s\n", file, testing::matrix_dir().c_str());
      continue;
    }
    const SparseMatrix A = read_matrix_market(testing::matrix_path(file));
    for (const index_t band : {3, 6}) check_partitioned_solve(A, AnalyzeOptions{}, band, file);
    // One dense piece per tree, as the band rule takes on the smallest factors (n = 1806 here).
    if (std::string(file) == "bcsstk14.mtx.gz") check_partitioned_solve(A, AnalyzeOptions{}, 1000, file);
  }
}

TEST(PartitionedInverse, BandRuleMinimizesItsEstimate) {
  const std::vector<std::pair<std::string, SparseMatrix>> cases = {
      {"lap2d 60x50", laplacian_2d(60, 50)},
      {"lap3d 16^3", laplacian_3d(16, 16, 16)},
      {"chain", testing::tridiagonal(400)}};
  for (const auto& [name, A] : cases) {
    const auto S = analyze(A, name == "chain" ? natural_unrelaxed() : AnalyzeOptions{});
    const Schedule schedule = build_schedule(*S);
    // Free hand-offs: nothing to gain from merging.
    EXPECT_EQ(choose_partition_band(*S, schedule, 1e-30, 3e12), 1) << name;
    // Free bytes: the band that leaves the fewest pieces on the longest path, and no band does better.
    const index_t latency_band = choose_partition_band(*S, schedule, 1.0, 1e300);
    const double fewest = partition_estimate(*S, schedule, latency_band, 1.0, 1e300);
    EXPECT_LT(fewest, partition_estimate(*S, schedule, 1, 1.0, 1e300)) << name;
    for (index_t band = 1; band <= 60; ++band)
      EXPECT_LE(fewest, partition_estimate(*S, schedule, band, 1.0, 1e300)) << name << ", band " << band;
    // The device constants: the choice is never worse than no merge by the estimate.
    const index_t band = choose_partition_band(*S, schedule, kSolveHandoffSeconds, 3e12);
    EXPECT_LE(partition_estimate(*S, schedule, band, kSolveHandoffSeconds, 3e12),
              partition_estimate(*S, schedule, 1, kSolveHandoffSeconds, 3e12))
        << name;
  }
  // A factor whose bytes dominate keeps its supernodes: lap3d 24^3 on a slow memory.
  const auto big = analyze(laplacian_3d(24, 24, 24));
  EXPECT_EQ(choose_partition_band(*big, build_schedule(*big), kSolveHandoffSeconds, 1e10), 1);
  EXPECT_THROW(choose_partition_band(*big, build_schedule(*big), 0, 1e10), InvalidInput);
  EXPECT_THROW(partition_estimate(*big, build_schedule(*analyze(laplacian_2d(5, 5))), 1, 1, 1), InvalidInput);
}

TEST(PartitionedInverse, TrialBandsFollowTheEstimate) {
  const std::vector<std::pair<std::string, SparseMatrix>> cases = {
      {"lap2d 60x50", laplacian_2d(60, 50)},
      {"lap3d 12^3", laplacian_3d(12, 12, 12)},
      {"lap3d27 10^3", laplacian_3d(10, 10, 10, Stencil::twenty_seven_point)},
      {"chain", testing::tridiagonal(400)}};
  for (const auto& [name, A] : cases) {
    const auto S = analyze(A, name == "chain" ? natural_unrelaxed() : AnalyzeOptions{});
    const Schedule schedule = build_schedule(*S);
    for (const int count : {1, 3, kPartitionTrials, 1000}) {
      const std::vector<index_t> bands = partition_trial_bands(*S, schedule, kSolveHandoffSeconds, 3e12, count);
      const std::string what = name + ", count " + std::to_string(count);
      // The model's choice first, then bands of no smaller estimate, each once, none of them 1.
      ASSERT_FALSE(bands.empty()) << what;
      EXPECT_LE(static_cast<int>(bands.size()), count) << what;
      EXPECT_EQ(bands.front(), choose_partition_band(*S, schedule, kSolveHandoffSeconds, 3e12)) << what;
      for (std::size_t i = 0; i < bands.size(); ++i) {
        EXPECT_GT(bands[i], 1) << what;
        EXPECT_EQ(std::count(bands.begin(), bands.end(), bands[i]), 1) << what;
        if (i > 0) {
          EXPECT_LE(partition_estimate(*S, schedule, bands[i - 1], kSolveHandoffSeconds, 3e12),
                    partition_estimate(*S, schedule, bands[i], kSolveHandoffSeconds, 3e12))
              << what << ", position " << i;
        }
      }
      // Fewer asked for: a prefix of more.
      const std::vector<index_t> all = partition_trial_bands(*S, schedule, kSolveHandoffSeconds, 3e12, 1000);
      EXPECT_TRUE(std::equal(bands.begin(), bands.end(), all.begin())) << what;
    }
  }
  // Where the model keeps every level, nothing to time.
  const auto big = analyze(laplacian_3d(24, 24, 24));
  EXPECT_TRUE(partition_trial_bands(*big, build_schedule(*big), kSolveHandoffSeconds, 1e10, kPartitionTrials).empty());
  EXPECT_THROW(partition_trial_bands(*big, build_schedule(*big), kSolveHandoffSeconds, 1e10, 0), InvalidInput);
  EXPECT_THROW(partition_trial_bands(*big, build_schedule(*big), -1, 1e10, 1), InvalidInput);
}

}  // namespace
}  // namespace spade
