// Host supernodal triangular solves. Per supernode: the diagonal block with trsv/trsm (or a scalar loop
// for narrow supernodes, where a BLAS call costs more than the arithmetic), the block below with
// gemv/gemm, gathered from or scattered to the rows of the supernode's structure. A large supernode's BLAS work
// is split over up to the factor's threads (core/parallel_blas.hpp).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "../core/parallel_blas.hpp"
#include "../core/out_of_memory.hpp"
#include "../core/messages.hpp"
#include "spade/error.hpp"
#include "spade/solve.hpp"

namespace spade {
namespace {

// Supernodes narrower than this are solved by scalar loops instead of BLAS calls.
constexpr int kNarrow = 8;

void check_shape(const NumericFactor& F, index_t nrhs, index_t ld, const char* who) {
  if (!F.valid())
    throw InvalidInput(std::string(who) + ": the factor is not usable: its last factorization failed");
  if (nrhs < 0) throw InvalidInput(std::string(who) + ": nrhs must be >= 0, got " + std::to_string(nrhs));
  if (ld < std::max<index_t>(1, F.symbolic().n))
    throw InvalidInput(std::string(who) + ": leading dimension " + std::to_string(ld) + " is smaller than n = " +
                       std::to_string(F.symbolic().n));
}

std::size_t max_below(const SymbolicFactor& S) {
  std::size_t most = 0;
  for (index_t s = 0; s < S.num_supernodes; ++s)
    most = std::max<std::size_t>(most, static_cast<std::size_t>(S.supernode_rows(s) - S.supernode_cols(s)));
  return most;
}

void forward_sweep(const NumericFactor& F, double* Y, index_t nrhs, index_t ldy) {
  check_shape(F, nrhs, ldy, "forward_solve");
  const SymbolicFactor& S = F.symbolic();
  std::vector<double> t(max_below(S) * static_cast<std::size_t>(nrhs));
  const int nr = nrhs, ld = ldy, threads = F.threads();
  SerialBlasScope serial_blas;
  for (index_t s = 0; s < S.num_supernodes; ++s) {
    const index_t f = S.supernode_begin[s];
    const int k = S.supernode_cols(s), m = S.supernode_rows(s), below = m - k;
    const index_t* rows = S.row_indices.data() + S.row_ptr[s];
    const double* L = F.panel(s);
    if (k < kNarrow) {
      for (index_t r = 0; r < nrhs; ++r) {
        double* y = Y + static_cast<offset_t>(r) * ldy;
        for (int c = 0; c < k; ++c) {
          const double* lc = L + static_cast<offset_t>(c) * m;
          const double yc = (y[f + c] /= lc[c]);
          for (int i = c + 1; i < m; ++i) y[rows[i]] -= lc[i] * yc;
        }
      }
      continue;
    }
    parallel_trsm('L', 'L', 'N', 'N', k, nr, 1.0, L, m, Y + f, ld, threads);
    if (below == 0) continue;
    parallel_gemm('N', 'N', below, nr, k, 1.0, L + k, m, Y + f, ld, 0.0, t.data(), below, threads);
    for (index_t r = 0; r < nrhs; ++r)
      for (int i = 0; i < below; ++i)
        Y[rows[k + i] + static_cast<offset_t>(r) * ldy] -= t[i + static_cast<offset_t>(r) * below];
  }
}

void backward_sweep(const NumericFactor& F, double* Y, index_t nrhs, index_t ldy) {
  check_shape(F, nrhs, ldy, "backward_solve");
  const SymbolicFactor& S = F.symbolic();
  std::vector<double> t(max_below(S) * static_cast<std::size_t>(nrhs));
  const int nr = nrhs, ld = ldy, threads = F.threads();
  SerialBlasScope serial_blas;
  for (index_t s = S.num_supernodes - 1; s >= 0; --s) {
    const index_t f = S.supernode_begin[s];
    const int k = S.supernode_cols(s), m = S.supernode_rows(s), below = m - k;
    const index_t* rows = S.row_indices.data() + S.row_ptr[s];
    const double* L = F.panel(s);
    if (k < kNarrow) {
      for (index_t r = 0; r < nrhs; ++r) {
        double* y = Y + static_cast<offset_t>(r) * ldy;
        for (int c = k - 1; c >= 0; --c) {
          const double* lc = L + static_cast<offset_t>(c) * m;
          double sum = y[f + c];
          for (int i = c + 1; i < m; ++i) sum -= lc[i] * y[rows[i]];
          y[f + c] = sum / lc[c];
        }
      }
      continue;
    }
    if (below > 0) {
      for (index_t r = 0; r < nrhs; ++r)
        for (int i = 0; i < below; ++i)
          t[i + static_cast<offset_t>(r) * below] = Y[rows[k + i] + static_cast<offset_t>(r) * ldy];
      parallel_gemm('T', 'N', k, nr, below, -1.0, L + k, m, t.data(), below, 1.0, Y + f, ld, threads);
    }
    parallel_trsm('L', 'L', 'T', 'N', k, nr, 1.0, L, m, Y + f, ld, threads);
  }
}

void solve_permuted(const NumericFactor& F, double* X, index_t nrhs, index_t ldx) {
  check_shape(F, nrhs, ldx, "solve");
  const SymbolicFactor& S = F.symbolic();
  const index_t n = S.n;
  for (index_t r = 0; r < nrhs; ++r)
    for (index_t i = 0; i < n; ++i)
      if (!std::isfinite(X[i + static_cast<offset_t>(r) * ldx]))
        throw InvalidInput("solve: right-hand side entry " + entry_name("B", i, r) + " is not finite");
  std::vector<double> W(static_cast<std::size_t>(n) * nrhs);
  for (index_t r = 0; r < nrhs; ++r)
    for (index_t k = 0; k < n; ++k) W[k + static_cast<offset_t>(r) * n] = X[S.perm[k] + static_cast<offset_t>(r) * ldx];
  forward_sweep(F, W.data(), nrhs, std::max<index_t>(n, 1));
  backward_sweep(F, W.data(), nrhs, std::max<index_t>(n, 1));
  for (index_t r = 0; r < nrhs; ++r)
    for (index_t k = 0; k < n; ++k) X[S.perm[k] + static_cast<offset_t>(r) * ldx] = W[k + static_cast<offset_t>(r) * n];
}

}  // namespace

void forward_solve(const NumericFactor& F, double* Y, index_t nrhs, index_t ldy) {
  out_of_memory_is_resource_error("forward_solve", [&] { forward_sweep(F, Y, nrhs, ldy); });
}

void backward_solve(const NumericFactor& F, double* Y, index_t nrhs, index_t ldy) {
  out_of_memory_is_resource_error("backward_solve", [&] { backward_sweep(F, Y, nrhs, ldy); });
}

void solve_in_place(const NumericFactor& F, double* X, index_t nrhs, index_t ldx) {
  out_of_memory_is_resource_error("solve", [&] { solve_permuted(F, X, nrhs, ldx); });
}

}  // namespace spade
