// The low-rank correction of an LU factor's replaced pivots (LuCorrection, include/spade/lu.hpp): the
// Sherman-Morrison-Woodbury formula on the rank-k change E = U D V^T that static pivoting made to A.
// W. W. Hager, "Updating the inverse of a matrix", SIAM Review 31(2), 1989.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "../core/parallel_blas.hpp"
#include "../core/out_of_memory.hpp"
#include "lu_correction.hpp"
#include "spade/error.hpp"
#include "spade/lu.hpp"

namespace spade {
namespace {

constexpr index_t kBuildPanel = 64;  // right-hand sides per solve while K is built

void check_finite_block(const double* X, index_t n, index_t nrhs, index_t ldx, const char* what) {
  for (index_t r = 0; r < nrhs; ++r)
    for (index_t i = 0; i < n; ++i)
      if (!std::isfinite(X[i + static_cast<offset_t>(r) * ldx])) throw correction_overflow(i, what);
}

}  // namespace

bool LuCorrection::worthwhile(const LuFactor& F) noexcept {
  const double k = static_cast<double>(F.perturbed_pivots());
  return k > 0 && k * k <= static_cast<double>(F.symbolic().nnz_lu);
}

LuCorrection::LuCorrection(const LuFactor& F) {
  if (!F.valid()) throw InvalidInput("LuCorrection: the factor is not usable: its last factorization failed");
  out_of_memory_is_resource_error("LuCorrection", [&] {
    SerialBlasScope serial_blas;
    factor_ = &F;
    generation_ = F.generation();
    perturbations_ = F.perturbations();
    const index_t n = F.symbolic().n, k = rank();
    const index_t ld = std::max<index_t>(n, 1);
    // K = D^{-1} - V^T (A + E)^{-1} U, a panel of U's columns e_row at a time.
    K_.assign(static_cast<std::size_t>(k) * k, 0.0);
    ipiv_.assign(static_cast<std::size_t>(k), 0);
    std::vector<double> panel(static_cast<std::size_t>(ld) * std::min(k, kBuildPanel));
    for (index_t first = 0; first < k; first += kBuildPanel) {
      const index_t width = std::min(kBuildPanel, k - first);
      std::fill(panel.begin(), panel.end(), 0.0);
      for (index_t c = 0; c < width; ++c) panel[perturbations_[first + c].row + static_cast<offset_t>(c) * ld] = 1.0;
      lu_solve_in_place(F, panel.data(), width, ld);
      check_finite_block(panel.data(), n, width, ld, "building the pivots' correction");
      for (index_t c = 0; c < width; ++c)
        for (index_t i = 0; i < k; ++i)
          K_[i + static_cast<offset_t>(first + c) * k] = -panel[perturbations_[i].col + static_cast<offset_t>(c) * ld];
    }
    for (index_t i = 0; i < k; ++i) K_[i + static_cast<offset_t>(i) * k] += 1.0 / perturbations_[i].delta;
    const int ki = static_cast<int>(k);
    int info = 0;
    if (k > 0) dgetrf_(&ki, &ki, K_.data(), &ki, ipiv_.data(), &info);
    if (info > 0) throw correction_singular(k, perturbations_[info - 1].col);
  });
}

void LuCorrection::solve_in_place(const LuFactor& F, double* X, index_t nrhs, index_t ldx, Transpose trans) const {
  if (!built_for(F))
    throw InvalidInput("LuCorrection: the correction was built for another factor or an earlier factorization");
  lu_solve_in_place(F, X, nrhs, ldx, trans);  // checks the call, then Y = (A + E)^{-1} B
  const index_t n = F.symbolic().n, k = rank();
  if (k == 0 || nrhs == 0) return;
  out_of_memory_is_resource_error("solve", [&] {
    check_finite_block(X, n, nrhs, ldx, "the solve with the LU factor");
    // A X = B: X = Y + (A + E)^{-1} U K^{-1} V^T Y. A^T X = B: X = Y + (A + E)^{-T} V K^{-T} U^T Y.
    const bool no = trans == Transpose::no;
    std::vector<double> T(static_cast<std::size_t>(k) * nrhs);
    for (index_t r = 0; r < nrhs; ++r)
      for (index_t i = 0; i < k; ++i) {
        const PivotPerturbation& p = perturbations_[i];
        T[i + static_cast<offset_t>(r) * k] = X[(no ? p.col : p.row) + static_cast<offset_t>(r) * ldx];
      }
    const int ki = static_cast<int>(k), nr = static_cast<int>(nrhs);
    int info = 0;
    SerialBlasScope serial_blas;
    dgetrs_(no ? "N" : "T", &ki, &nr, K_.data(), &ki, ipiv_.data(), T.data(), &ki, &info);
    const index_t ld = std::max<index_t>(n, 1);
    std::vector<double> W(static_cast<std::size_t>(ld) * nrhs, 0.0);
    for (index_t r = 0; r < nrhs; ++r)
      for (index_t i = 0; i < k; ++i) {
        const PivotPerturbation& p = perturbations_[i];
        W[(no ? p.row : p.col) + static_cast<offset_t>(r) * ld] += T[i + static_cast<offset_t>(r) * k];
      }
    check_finite_block(W.data(), n, nrhs, ld, "the pivots' correction");
    lu_solve_in_place(F, W.data(), nrhs, ld, trans);
    check_finite_block(W.data(), n, nrhs, ld, "the pivots' correction");
    for (index_t r = 0; r < nrhs; ++r)
      for (index_t i = 0; i < n; ++i) X[i + static_cast<offset_t>(r) * ldx] += W[i + static_cast<offset_t>(r) * ld];
  });
}

}  // namespace spade
