// Host solves with a supernodal LU factor (include/spade/lu.hpp). A X = B: the forward sweep applies each
// supernode's row interchanges, its unit L11 and L21, in the order the factorization did (so the earlier
// supernodes' L rows, stored before the interchanges, meet the right-hand side in the same order); the
// backward sweep U12, U11. A^T X = B runs the transposes of those operations in reverse: U^T forward, then
// L^T and the interchanges backward.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "../core/parallel_blas.hpp"
#include "../core/messages.hpp"
#include "../core/out_of_memory.hpp"
#include "spade/error.hpp"
#include "spade/lu.hpp"

namespace spade {
namespace {

void check_call(const LuFactor& F, index_t nrhs, index_t ld, const char* who) {
  if (!F.valid()) throw InvalidInput(std::string(who) + ": the factor is not usable: its last factorization failed");
  if (nrhs < 0) throw InvalidInput(std::string(who) + ": nrhs must be >= 0, got " + std::to_string(nrhs));
  if (ld < std::max<index_t>(1, F.symbolic().n))
    throw InvalidInput(std::string(who) + ": leading dimension " + std::to_string(ld) + " is smaller than n = " +
                       std::to_string(F.symbolic().n));
}

// The rows below supernode s of Y (n x nrhs, leading dimension ldy) gathered into t (below x nrhs).
void gather(const double* Y, index_t ldy, const index_t* rows, int below, index_t nrhs, double* t) {
  for (index_t r = 0; r < nrhs; ++r)
    for (int i = 0; i < below; ++i) t[i + static_cast<offset_t>(r) * below] = Y[rows[i] + static_cast<offset_t>(r) * ldy];
}

// Y(rows, :) -= t, t below x nrhs.
void scatter_subtract(double* Y, index_t ldy, const index_t* rows, int below, index_t nrhs, const double* t) {
  for (index_t r = 0; r < nrhs; ++r)
    for (int i = 0; i < below; ++i) Y[rows[i] + static_cast<offset_t>(r) * ldy] -= t[i + static_cast<offset_t>(r) * below];
}

void swap_rows(double* Y, index_t ldy, index_t nrhs, index_t a, index_t b) {
  if (a == b) return;
  for (index_t r = 0; r < nrhs; ++r) std::swap(Y[a + static_cast<offset_t>(r) * ldy], Y[b + static_cast<offset_t>(r) * ldy]);
}

// Y := C^{-1} Y (trans no) or C^{-T} Y (trans yes) in C's numbering.
void solve_permuted(const LuFactor& F, double* Y, index_t nrhs, index_t ldy, Transpose trans) {
  const SymbolicFactor& S = F.structure();
  std::size_t most = 0;
  for (index_t s = 0; s < S.num_supernodes; ++s)
    most = std::max<std::size_t>(most, static_cast<std::size_t>(S.supernode_rows(s) - S.supernode_cols(s)));
  std::vector<double> t(most * static_cast<std::size_t>(nrhs));
  const int nr = nrhs, ld = ldy, threads = F.threads();
  SerialBlasScope serial_blas;
  auto parts = [&](index_t s, index_t& f, int& k, int& m, int& below, const index_t*& rows) {
    f = S.supernode_begin[s];
    k = S.supernode_cols(s);
    m = S.supernode_rows(s);
    below = m - k;
    rows = S.row_indices.data() + S.row_ptr[s] + k;
  };
  index_t f;
  int k, m, below;
  const index_t* rows;
  if (trans == Transpose::no) {
    for (index_t s = 0; s < S.num_supernodes; ++s) {
      parts(s, f, k, m, below, rows);
      const double* L = F.l_panel(s);
      const index_t* piv = F.pivots(s);
      for (int c = 0; c < k; ++c) swap_rows(Y, ldy, nrhs, f + c, piv[c]);
      parallel_trsm('L', 'L', 'N', 'U', k, nr, 1.0, L, m, Y + f, ld, threads);
      if (below == 0) continue;
      parallel_gemm('N', 'N', below, nr, k, 1.0, L + k, m, Y + f, ld, 0.0, t.data(), below, threads);
      scatter_subtract(Y, ldy, rows, below, nrhs, t.data());
    }
    for (index_t s = S.num_supernodes - 1; s >= 0; --s) {
      parts(s, f, k, m, below, rows);
      if (below > 0) {
        gather(Y, ldy, rows, below, nrhs, t.data());
        parallel_gemm('T', 'N', k, nr, below, -1.0, F.u_panel(s), below, t.data(), below, 1.0, Y + f, ld, threads);
      }
      parallel_trsm('L', 'U', 'N', 'N', k, nr, 1.0, F.l_panel(s), m, Y + f, ld, threads);
    }
  } else {
    for (index_t s = 0; s < S.num_supernodes; ++s) {
      parts(s, f, k, m, below, rows);
      parallel_trsm('L', 'U', 'T', 'N', k, nr, 1.0, F.l_panel(s), m, Y + f, ld, threads);
      if (below == 0) continue;
      parallel_gemm('N', 'N', below, nr, k, 1.0, F.u_panel(s), below, Y + f, ld, 0.0, t.data(), below, threads);
      scatter_subtract(Y, ldy, rows, below, nrhs, t.data());
    }
    for (index_t s = S.num_supernodes - 1; s >= 0; --s) {
      parts(s, f, k, m, below, rows);
      const double* L = F.l_panel(s);
      if (below > 0) {
        gather(Y, ldy, rows, below, nrhs, t.data());
        parallel_gemm('T', 'N', k, nr, below, -1.0, L + k, m, t.data(), below, 1.0, Y + f, ld, threads);
      }
      parallel_trsm('L', 'L', 'T', 'U', k, nr, 1.0, L, m, Y + f, ld, threads);
      const index_t* piv = F.pivots(s);
      for (int c = k - 1; c >= 0; --c) swap_rows(Y, ldy, nrhs, f + c, piv[c]);
    }
  }
}

void solve_with(const LuFactor& F, double* X, index_t nrhs, index_t ldx, Transpose trans) {
  check_call(F, nrhs, ldx, "solve");
  const LuSymbolic& L = F.symbolic();
  const index_t n = L.n;
  for (index_t r = 0; r < nrhs; ++r)
    for (index_t i = 0; i < n; ++i)
      if (!std::isfinite(X[i + static_cast<offset_t>(r) * ldx]))
        throw InvalidInput("solve: right-hand side entry " + entry_name("B", i, r) + " is not finite");
  if (n == 0 || nrhs == 0) return;
  const std::vector<index_t>& perm = L.structure->perm;
  // Position k of C's numbering holds A's row rk = row_perm[perm[k]] and A's column ck = perm[k].
  std::vector<double> Y(static_cast<std::size_t>(n) * nrhs);
  for (index_t r = 0; r < nrhs; ++r) {
    const double* x = X + static_cast<offset_t>(r) * ldx;
    double* y = Y.data() + static_cast<offset_t>(r) * n;
    for (index_t k = 0; k < n; ++k) {
      const index_t rk = L.row_perm[perm[k]], ck = perm[k];
      y[k] = trans == Transpose::no ? L.row_scale[rk] * x[rk] : L.col_scale[ck] * x[ck];
    }
  }
  solve_permuted(F, Y.data(), nrhs, n, trans);
  for (index_t r = 0; r < nrhs; ++r) {
    double* x = X + static_cast<offset_t>(r) * ldx;
    const double* y = Y.data() + static_cast<offset_t>(r) * n;
    for (index_t k = 0; k < n; ++k) {
      const index_t rk = L.row_perm[perm[k]], ck = perm[k];
      if (trans == Transpose::no)
        x[ck] = L.col_scale[ck] * y[k];
      else
        x[rk] = L.row_scale[rk] * y[k];
    }
  }
}

}  // namespace

void lu_solve_in_place(const LuFactor& F, double* X, index_t nrhs, index_t ldx, Transpose trans) {
  out_of_memory_is_resource_error("solve", [&] { solve_with(F, X, nrhs, ldx, trans); });
}

}  // namespace spade
