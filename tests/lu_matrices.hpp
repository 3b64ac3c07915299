// Shared by the LU tests (test_lu on the host, test_solver on the GPU): the real unsymmetric and symmetric
// indefinite matrices of ../shared/matrices, what refinement achieves on those whose factor has perturbed
// pivots, and random unsymmetric matrices.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "spade/sparse_matrix.hpp"

namespace spade::testing {

// A random unsymmetric n x n matrix: a band of width `band` plus `extra` random entries per column, values in
// [-1, 1]; with `zero_diagonal` the diagonal is left out, so that only the matching makes the LU work.
inline SparseMatrix random_unsymmetric(index_t n, int band, int extra, bool zero_diagonal, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> value(-1.0, 1.0);
  std::uniform_int_distribution<index_t> row(0, n - 1);
  std::vector<std::int64_t> r, c;
  std::vector<double> v;
  for (index_t j = 0; j < n; ++j) {
    for (index_t i = std::max<index_t>(0, j - band); i <= std::min<index_t>(n - 1, j + band); ++i) {
      if (zero_diagonal && i == j) continue;
      r.push_back(i), c.push_back(j), v.push_back(value(gen));
    }
    for (int e = 0; e < extra; ++e) {
      const index_t i = row(gen);
      if (zero_diagonal && i == j) continue;
      r.push_back(i), c.push_back(j), v.push_back(value(gen));
    }
  }
  return SparseMatrix::from_triplets(n, n, r, c, v);
}

// Every square, real-valued unsymmetric or symmetric indefinite matrix of ../shared/matrices (the pattern-only
// files have no values to factor).
inline const char* const kLuMatrices[] = {
    "NSR8K.mtx.gz",      "add32.mtx.gz",     "adder_dcop_05.mtx.gz", "arc130.mtx.gz",     "basker_matrix1.mtx.gz",
    "bayer10.mtx.gz",    "bfw782a.mtx.gz",   "bfw782b.mtx.gz",       "bp_1200.mtx.gz",    "c-62.mtx.gz",
    "cryg2500.mtx.gz",   "ex14.mtx.gz",      "fs_183_1.mtx.gz",      "fs_183_6.mtx.gz",   "gemat12.mtx.gz",
    "hangGlider_2.mtx.gz", "impcol_a.mtx.gz", "impcol_d.mtx.gz",     "impcol_e.mtx.gz",   "mbeacxc.mtx.gz",
    "nnc1374.mtx.gz",    "olm1000.mtx.gz",   "orsirr_1.mtx.gz",      "orsirr_2.mtx.gz",   "pores_1.mtx.gz",
    "rajat19.mtx.gz",    "reorientation_1.mtx.gz", "sherman1.mtx.gz", "sherman3.mtx.gz",  "utm300.mtx.gz",
    "watt_2.mtx.gz",     "west0067.mtx.gz",  "west0479.mtx.gz"};

// Nonsingular matrices (UMFPACK solves them) whose factor has perturbed pivots (NSR8K 777, nnc1374 20,
// rajat19 6, cryg2500 1) and on which refinement with the factor alone stagnates: lu_solve_refined continues
// with the correction of the replaced pivots (LuCorrection). It reaches the target on rajat19 and cryg2500
// (both systems), always. On NSR8K and nnc1374 the default tolerance's growth leaves the solves too
// inaccurate for the correction (NSR8K's first residual is about 1e35): each system "may stagnate", and the
// test demands an honest outcome, converged to the target or a result that says it did not; a factor at
// kLuCorrectedPivotTolerance then converges on both (what Solver does: test_solver).
struct PerturbedCase {
  const char* file;
  bool converges, transposed_converges;  ///< true: must converge; false: may stagnate (and must say so)
};
inline const PerturbedCase kPerturbed[] = {{"NSR8K.mtx.gz", false, false},
                                           {"cryg2500.mtx.gz", true, true},
                                           {"nnc1374.mtx.gz", false, false},
                                           {"rajat19.mtx.gz", true, true}};

inline const PerturbedCase* perturbed_case(const std::string& file) {
  for (const PerturbedCase& c : kPerturbed)
    if (file == c.file) return &c;
  return nullptr;
}

/// A test name for a kLuMatrices parameter: the file name without its extensions, '-' as '_'.
inline std::string lu_matrix_test_name(const ::testing::TestParamInfo<const char*>& info) {
  std::string name = info.param;
  name = name.substr(0, name.find('.'));
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

}  // namespace spade::testing
