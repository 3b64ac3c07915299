// The LU analysis (matching, scaling, ordering, symmetrized structure, assembly maps) and the left-looking
// supernodal LU with static pivoting (Li and Demmel 2003). See include/spade/lu.hpp.
//
// Supernode s gathers the updates of its descendants d: with L_d and U_d^T stored alike (rows of d's
// structure by d's columns), the block of s's columns is L_d(rows >= f) U_d(., columns of s) and the block of
// s's rows right of it is L_d(rows of s) U_d(., columns beyond s), one gemm each, scattered through relative
// row positions as in the Cholesky. Then the diagonal block is factored with row pivoting inside it, L21 and
// U12 follow by two trsm.
#include "spade/lu.hpp"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <new>
#include <numeric>
#include <string>

#include "../core/parallel_blas.hpp"
#include "../core/messages.hpp"
#include "spade/error.hpp"
#include "spade/matching.hpp"
#include "supernodal_tree.hpp"

namespace spade {
namespace {

using Clock = std::chrono::steady_clock;

// Below these sizes scalar loops beat a BLAS call (as in the Cholesky).
constexpr offset_t kSmallUpdate = 2048;
// Columns of the diagonal block factored as one panel before its trailing update.
constexpr int kPanel = 32;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// The pattern of M + M^T with every diagonal entry, values 0: what the structure is analyzed on.
SparseMatrix symmetrized_with_diagonal(const SparseMatrix& M) {
  const index_t n = M.cols();
  const SparseMatrix T = M.transpose();
  std::vector<offset_t> ptr(static_cast<std::size_t>(n) + 1, 0);
  std::vector<index_t> rows;
  rows.reserve(static_cast<std::size_t>(2 * M.nnz() + n));
  for (index_t j = 0; j < n; ++j) {
    offset_t p = M.col_ptr()[j], q = T.col_ptr()[j];
    const offset_t pe = M.col_ptr()[j + 1], qe = T.col_ptr()[j + 1];
    bool diagonal = false;
    auto push = [&](index_t i) {
      if (!diagonal && i > j) {
        rows.push_back(j);
        diagonal = true;
      }
      if (i == j) diagonal = true;
      rows.push_back(i);
    };
    while (p < pe || q < qe) {
      if (q == qe || (p < pe && M.row_ind()[p] < T.row_ind()[q])) {
        push(M.row_ind()[p++]);
      } else if (p == pe || T.row_ind()[q] < M.row_ind()[p]) {
        push(T.row_ind()[q++]);
      } else {
        push(M.row_ind()[p++]);
        ++q;
      }
    }
    if (!diagonal) rows.push_back(j);
    ptr[j + 1] = static_cast<offset_t>(rows.size());
  }
  std::vector<double> values(rows.size(), 0.0);
  return SparseMatrix(n, n, std::move(ptr), std::move(rows), std::move(values));
}

void check_input(const LuSymbolic& S, const SparseMatrix& A) {
  if (A.rows() != S.n || A.cols() != S.n || A.col_ptr() != S.a_col_ptr || A.row_ind() != S.a_row_ind)
    throw InvalidInput("factorize: the matrix's pattern differs from the pattern it was analyzed with");
  for (index_t j = 0; j < A.cols(); ++j)
    for (offset_t p = A.col_ptr()[j]; p < A.col_ptr()[j + 1]; ++p)
      if (!std::isfinite(A.values()[p]))
        throw InvalidInput("factorize: " + entry_name("A", A.row_ind()[p], j) + " is " +
                           std::to_string(A.values()[p]) + "; the matrix must be finite");
}

// LU with row pivoting of the k x k block a (leading dimension lda), in place as LAPACK's getrf leaves it;
// ipiv[c] = the row (0-based in the block) interchanged with row c. A pivot of magnitude below tau becomes
// tau with its sign (+tau for 0); delta[c] receives what was added to pivot c (nonzero exactly where one was
// replaced). Blocked, right-looking: a panel of kPanel columns is factored by rank-1 updates on one thread, its
// interchanges are then applied to the columns left and right of it, and each strip of columns right of it gets
// the block row (trsm) and the trailing block (gemm); the strips are shared out over at most `threads` threads
// (core/parallel_blas.hpp).
void factor_diagonal_block(double* a, int k, int lda, index_t* ipiv, double tau, double* delta, int threads) {
  const double one = 1.0, minus_one = -1.0;
  auto column = [&](int c) { return a + static_cast<offset_t>(c) * lda; };
  // Columns j0 .. j0+nb-1 by rank-1 updates, their interchanges applied inside the panel only.
  auto factor_panel = [&](int j0, int nb) {
    for (int c = j0; c < j0 + nb; ++c) {
      double* ac = column(c);
      int p = c;
      for (int r = c + 1; r < k; ++r)
        if (std::abs(ac[r]) > std::abs(ac[p])) p = r;
      ipiv[c] = p;
      if (p != c)
        for (int t = j0; t < j0 + nb; ++t) std::swap(column(t)[c], column(t)[p]);
      delta[c] = 0;
      if (!(std::abs(ac[c]) >= tau)) {
        const double replaced = std::signbit(ac[c]) ? -tau : tau;
        delta[c] = replaced - ac[c];
        ac[c] = replaced;
      }
      const double inv = 1.0 / ac[c];
      for (int r = c + 1; r < k; ++r) ac[r] *= inv;
      for (int t = c + 1; t < j0 + nb; ++t) {  // the rest of the panel only
        double* at = column(t);
        const double u = at[c];
        if (u != 0)
          for (int r = c + 1; r < k; ++r) at[r] -= ac[r] * u;
      }
    }
  };
  // Columns c0 .. c0+cols-1 left of the panel get its interchanges; right of it, also U12 = L11^{-1} A12 and
  // A22 -= L21 U12.
  auto update_columns = [&](int j0, int nb, int c0, int cols) {
    for (int t = c0; t < c0 + cols; ++t) {
      double* at = column(t);
      for (int c = j0; c < j0 + nb; ++c)
        if (ipiv[c] != c) std::swap(at[c], at[ipiv[c]]);
    }
    if (c0 < j0) return;
    const int below = k - j0 - nb;
    double* a12 = column(c0) + j0;
    dtrsm_("L", "L", "N", "U", &nb, &cols, &one, column(j0) + j0, &lda, a12, &lda);
    if (below > 0)
      dgemm_("N", "N", &below, &cols, &nb, &minus_one, column(j0) + j0 + nb, &lda, a12, &lda, &one, a12 + nb, &lda);
  };
  const int team = threads_for(static_cast<double>(k) * k * k / 3, kMultiplyAddsPerThread, threads);
  if (team == 1) {  // on the caller: no nested team of one per supernode in the factorization's subtree phase
    for (int j0 = 0; j0 < k; j0 += kPanel) {
      const int nb = std::min(kPanel, k - j0), right = k - j0 - nb;
      factor_panel(j0, nb);
      if (j0 > 0) update_columns(j0, nb, 0, j0);
      if (right > 0) update_columns(j0, nb, j0 + nb, right);
    }
    return;
  }
  parallel_region(team, [&](int, int size) {
    for (int j0 = 0; j0 < k; j0 += kPanel) {
      const int nb = std::min(kPanel, k - j0), left = j0, right = k - j0 - nb;
#pragma omp single
      factor_panel(j0, nb);
      // Strips of the columns left and right of the panel, about four per thread.
      const int width = std::max(kPanel, (left + right) / (4 * size) + 1);
      const int left_strips = (left + width - 1) / width, strips = left_strips + (right + width - 1) / width;
#pragma omp for schedule(dynamic, 1)
      for (int i = 0; i < strips; ++i) {
        const int c0 = i < left_strips ? i * width : j0 + nb + (i - left_strips) * width;
        update_columns(j0, nb, c0, std::min(width, (i < left_strips ? left : k) - c0));
      }
    }
  });
}

/// The update of supernode s, whose columns end before column l, by its descendant d: d's rows p0 .. md-1
/// reach s's L panel and its rows p1 .. md-1 (those at or past l) s's U^T panel. d's L panel is md x kd,
/// its packed U^T panel bd x kd (d's rows kd .. md-1).
struct UpdateSource {
  const index_t* rows;
  const double* l;
  const double* u;
  int p0, p1, md, kd, bd;
};

UpdateSource update_source(const SymbolicFactor& S, const double* l_values, const double* u_panel, index_t d,
                           int first_row, index_t l) {
  const index_t* rows = S.row_indices.data() + S.row_ptr[d];
  const int md = S.supernode_rows(d), kd = S.supernode_cols(d);
  const int p1 = static_cast<int>(std::lower_bound(rows + first_row, rows + md, l) - rows);
  return {rows, l_values + S.panel_offset[d], u_panel, first_row, p1, md, kd, md - kd};
}

}  // namespace

std::shared_ptr<const LuSymbolic> analyze_lu(const SparseMatrix& A, const LuAnalyzeOptions& options) {
  if (!A.is_square())
    throw InvalidInput("analyze: the LU needs a square matrix, got " + std::to_string(A.rows()) + " x " +
                       std::to_string(A.cols()));
  try {
    auto S = std::make_shared<LuSymbolic>();
    const index_t n = A.cols();
    S->n = n;
    const auto t0 = Clock::now();
    MaximumProductMatching matching = maximum_product_matching(A);
    S->row_perm = std::move(matching.row_perm);
    S->row_scale = std::move(matching.row_scale);
    S->col_scale = std::move(matching.col_scale);
    S->matching_seconds = seconds_since(t0);

    const auto t1 = Clock::now();
    const SparseMatrix M = permute_rows(A, S->row_perm);
    const SparseMatrix pattern = symmetrized_with_diagonal(M);
    if (options.ordering == OrderingMethod::colamd) {
      const auto t_order = Clock::now();
      const std::vector<index_t> perm = fill_reducing_ordering(M, OrderingMethod::colamd);
      const double colamd_seconds = seconds_since(t_order);
      auto structure = std::const_pointer_cast<SymbolicFactor>(analyze(pattern, perm, OrderingMethod::colamd, options.supernodes));
      structure->ordering_seconds += colamd_seconds;
      S->structure = std::move(structure);
    } else {
      AnalyzeOptions ao;
      ao.ordering = options.ordering;
      ao.supernodes = options.supernodes;
      S->structure = analyze(pattern, ao);
    }
    const SymbolicFactor& F = *S->structure;

    // Assembly maps: entry (i, j) of A is C(k, l) with k = iperm[irow[i]], l = iperm[j].
    const std::vector<index_t> irow = inverse_permutation(S->row_perm);
    S->lower_ptr.assign(static_cast<std::size_t>(n) + 1, 0);
    S->upper_ptr.assign(static_cast<std::size_t>(n) + 1, 0);
    for (index_t j = 0; j < n; ++j)
      for (offset_t p = A.col_ptr()[j]; p < A.col_ptr()[j + 1]; ++p) {
        const index_t k = F.iperm[irow[A.row_ind()[p]]], l = F.iperm[j];
        if (k >= l)
          ++S->lower_ptr[l + 1];
        else
          ++S->upper_ptr[k + 1];
      }
    std::partial_sum(S->lower_ptr.begin(), S->lower_ptr.end(), S->lower_ptr.begin());
    std::partial_sum(S->upper_ptr.begin(), S->upper_ptr.end(), S->upper_ptr.begin());
    S->lower_index.resize(static_cast<std::size_t>(S->lower_ptr[n]));
    S->lower_source.resize(S->lower_index.size());
    S->lower_scale.resize(S->lower_index.size());
    S->upper_index.resize(static_cast<std::size_t>(S->upper_ptr[n]));
    S->upper_source.resize(S->upper_index.size());
    S->upper_scale.resize(S->upper_index.size());
    std::vector<offset_t> lnext(S->lower_ptr.begin(), S->lower_ptr.end() - 1);
    std::vector<offset_t> unext(S->upper_ptr.begin(), S->upper_ptr.end() - 1);
    for (index_t j = 0; j < n; ++j)
      for (offset_t p = A.col_ptr()[j]; p < A.col_ptr()[j + 1]; ++p) {
        const index_t i = A.row_ind()[p];
        const index_t k = F.iperm[irow[i]], l = F.iperm[j];
        const double scale = S->row_scale[i] * S->col_scale[j];
        if (k >= l) {
          const offset_t q = lnext[l]++;
          S->lower_index[q] = k;
          S->lower_source[q] = p;
          S->lower_scale[q] = scale;
        } else {
          const offset_t q = unext[k]++;
          S->upper_index[q] = l;
          S->upper_source[q] = p;
          S->upper_scale[q] = scale;
        }
      }
    S->a_col_ptr = A.col_ptr();
    S->a_row_ind = A.row_ind();
    S->nnz_lu = 2 * F.nnz_l - n;
    S->flops = 2 * F.flops;
    S->solve_flops = 2 * F.solve_flops;
    S->ordering_seconds = F.ordering_seconds;
    S->symbolic_seconds = std::max(0.0, seconds_since(t1) - F.ordering_seconds);
    return S;
  } catch (const std::bad_alloc&) {
    throw ResourceError("analyze: out of memory for the LU analysis");
  }
}

LuFactor::LuFactor(std::shared_ptr<const LuSymbolic> symbolic, const SparseMatrix& A, const LuFactorOptions& options)
    : symbolic_(std::move(symbolic)), progress_(options.progress), pivot_tolerance_(options.pivot_tolerance) {
  if (!symbolic_ || !symbolic_->structure) throw InvalidInput("factorize: no LU analysis given");
  if (!(pivot_tolerance_ > 0 && pivot_tolerance_ <= 1))
    throw InvalidInput("factorize: the pivot tolerance must lie in (0, 1], got " + std::to_string(pivot_tolerance_));
  threads_ = detail::factorization_threads(*symbolic_->structure, options.threads, options.processors_left);
  const SymbolicFactor& S = structure();
  try {
    l_values_.resize(static_cast<std::size_t>(S.panel_offset.back()));
    u_offset_.assign(static_cast<std::size_t>(S.num_supernodes) + 1, 0);
    for (index_t s = 0; s < S.num_supernodes; ++s)
      u_offset_[s + 1] = u_offset_[s] + static_cast<offset_t>(S.supernode_rows(s) - S.supernode_cols(s)) * S.supernode_cols(s);
    u_values_.resize(static_cast<std::size_t>(u_offset_.back()));
    pivots_.resize(static_cast<std::size_t>(S.n));
    pivot_delta_.resize(static_cast<std::size_t>(S.n));
    work_size_ = detail::build_update_lists(S, update_ptr_, updates_);
    detail::plan_subtrees(S, threads_, subtree_roots_, top_);
  } catch (const std::bad_alloc&) {
    throw ResourceError("factorize: out of memory for the LU factor (" +
                        std::to_string(2 * S.panel_offset.back()) + " entries)");
  }
  refactorize(A);
}

std::vector<index_t> LuFactor::row_order() const {
  const SymbolicFactor& S = structure();
  std::vector<index_t> order(static_cast<std::size_t>(S.n));
  for (index_t s = 0; s < S.num_supernodes; ++s) {
    const index_t f = S.supernode_begin[s], k = S.supernode_cols(s);
    const index_t* piv = pivots(s);
    for (index_t c = 0; c < k; ++c) order[f + c] = f + c;
    for (index_t c = 0; c < k; ++c) std::swap(order[f + c], order[piv[c]]);
  }
  return order;
}

std::vector<index_t> lu_row_order(const LuFactor& F) {
  if (!F.valid()) throw InvalidInput("lu_row_order: the factor's last factorization failed");
  return F.row_order();
}

void LuFactor::refactorize(const SparseMatrix& A) {
  valid_ = false;
  ++generation_;
  try {
    factor_all(A);
  } catch (const std::bad_alloc&) {
    throw ResourceError("factorize: out of memory for the workspace");
  }
  valid_ = true;
}

void LuFactor::factor_all(const SparseMatrix& A) {
  const LuSymbolic& L = *symbolic_;
  perturbations_.clear();
  check_input(L, A);
  // ||M||_1: the largest column sum of the scaled matrix (the row permutation does not change it).
  double norm = 0;
  for (index_t j = 0; j < A.cols(); ++j) {
    double sum = 0;
    for (offset_t p = A.col_ptr()[j]; p < A.col_ptr()[j + 1]; ++p)
      sum += std::abs(L.row_scale[A.row_ind()[p]] * A.values()[p]);
    norm = std::max(norm, sum * L.col_scale[j]);
  }
  pivot_threshold_ = pivot_tolerance_ * norm;
  if (!(pivot_threshold_ > 0)) pivot_threshold_ = std::numeric_limits<double>::min();  // A = 0 on its pattern
  struct Release {  // the teams' workspace, also when a supernode fails
    std::vector<double>& work;
    ~Release() { std::vector<double>().swap(work); }
  } release{team_work_};
  detail::factor_over_tree(
      structure(), subtree_roots_, top_, threads_, work_size_,
      [&](index_t s, int team, std::vector<index_t>& relpos, std::vector<double>& work) {
        factor_supernode(s, team, A, relpos, work);
      },
      [&](index_t first, index_t last) {
        if (progress_) progress_(*this, first, last);
      });

  // Each replaced pivot, in A's numbering. Position j of Q C = L U holds row order[j] of C, so pivot j's
  // change is an addition to C(order[j], j), which is M(perm[order[j]], perm[j]) = Dr(i) A(i, col) Dc(col)
  // with i = row_perm[perm[order[j]]] and col = perm[j].
  if (std::all_of(pivot_delta_.begin(), pivot_delta_.end(), [](double d) { return d == 0; })) return;
  const std::vector<index_t> order = row_order();
  const std::vector<index_t>& perm = L.structure->perm;
  for (index_t j = 0; j < L.n; ++j) {
    if (pivot_delta_[j] == 0) continue;
    const index_t i = L.row_perm[perm[order[j]]], col = perm[j];
    perturbations_.push_back({i, col, pivot_delta_[j] / (L.row_scale[i] * L.col_scale[col])});
  }
}

void LuFactor::gather_updates(index_t s, const std::vector<index_t>& relpos, double* w) {
  const SymbolicFactor& S = structure();
  const index_t f = S.supernode_begin[s], l = S.supernode_begin[s + 1];
  const int k = l - f, m = S.supernode_rows(s), below = m - k;
  double* lp = l_values_.data() + S.panel_offset[s];
  double* up = u_values_.data() + u_offset_[s];
  const double one = 1.0, zero = 0.0;
  for (offset_t u = update_ptr_[s]; u < update_ptr_[s + 1]; ++u) {
    const index_t d = updates_[u].source;
    const auto [drows, ld, ud, p0, p1, md, kd, bd] =
        update_source(S, l_values_.data(), u_panel(d), d, updates_[u].first_row, l);
    const int nk = p1 - p0, nm = md - p0, nr = md - p1;
    if (static_cast<offset_t>(kd) * nk * nm <= kSmallUpdate) {
      for (int c = 0; c < nk; ++c) {
        double* target = lp + static_cast<offset_t>(drows[p0 + c] - f) * m;
        double* utarget = up + static_cast<offset_t>(drows[p0 + c] - f) * below;
        for (int r = 0; r < nm; ++r) {
          double sum = 0;
          for (int t = 0; t < kd; ++t)
            sum += ld[p0 + r + static_cast<offset_t>(t) * md] * ud[p0 - kd + c + static_cast<offset_t>(t) * bd];
          target[relpos[drows[p0 + r]]] -= sum;
        }
        for (int r = 0; r < nr; ++r) {
          double sum = 0;
          for (int t = 0; t < kd; ++t)
            sum += ud[p1 - kd + r + static_cast<offset_t>(t) * bd] * ld[p0 + c + static_cast<offset_t>(t) * md];
          utarget[relpos[drows[p1 + r]] - k] -= sum;
        }
      }
      continue;
    }
    dgemm_("N", "T", &nm, &nk, &kd, &one, ld + p0, &md, ud + (p0 - kd), &bd, &zero, w, &nm);
    for (int c = 0; c < nk; ++c) {
      double* target = lp + static_cast<offset_t>(drows[p0 + c] - f) * m;
      const double* wc = w + static_cast<offset_t>(c) * nm;
      for (int r = 0; r < nm; ++r) target[relpos[drows[p0 + r]]] -= wc[r];
    }
    if (nr > 0) {
      dgemm_("N", "T", &nr, &nk, &kd, &one, ud + (p1 - kd), &bd, ld + p0, &md, &zero, w, &nr);
      for (int c = 0; c < nk; ++c) {
        double* target = up + static_cast<offset_t>(drows[p0 + c] - f) * below;
        const double* wc = w + static_cast<offset_t>(c) * nr;
        for (int r = 0; r < nr; ++r) target[relpos[drows[p1 + r]] - k] -= wc[r];
      }
    }
  }
}

void LuFactor::gather_updates_on_team(index_t s, int team, const std::vector<index_t>& relpos) {
  const SymbolicFactor& S = structure();
  const index_t f = S.supernode_begin[s], l = S.supernode_begin[s + 1];
  const int k = l - f, m = S.supernode_rows(s), below = m - k;
  double* lp = l_values_.data() + S.panel_offset[s];
  double* up = u_values_.data() + u_offset_[s];
  // Owner computes, as the Cholesky's: the team shares out blocks of the m + below target rows (the L panel's
  // m rows, then the U^T panel's below rows, each receiving k columns), and a thread gathers into its rows every
  // update that reaches them.
  const std::vector<int> blocks = detail::row_blocks(m + below, 4 * team, [](int) { return 1; });
  constexpr int chunk = detail::kUpdateChunk;
  const double one = 1.0, zero = 0.0;
  detail::gather_on_team(team, blocks, team_work_, [&](int block_lo, int block_hi, double* w) {
    for (offset_t u = update_ptr_[s]; u < update_ptr_[s + 1]; ++u) {
      const index_t d = updates_[u].source;
      const auto [drows, ld, ud, p0, p1, md, kd, bd] =
          update_source(S, l_values_.data(), u_panel(d), d, updates_[u].first_row, l);
      const int nk = p1 - p0;
      // Target rows block_lo .. block_hi-1 of the m + below: L's row R is row R < m, U^T's row R (of
      // relpos k + R) is row m + R. d's rows p0..md-1 reach L's rows, its rows p1..md-1 U^T's.
      for (int part = 0; part < 2; ++part) {
        const bool lower = part == 0;
        const int lo = lower ? std::min(block_lo, m) : std::max(block_lo, m) - m + k;
        const int hi = lower ? std::min(block_hi, m) : std::max(block_hi, m) - m + k;
        if (lo >= hi) continue;
        const auto [first, last] = detail::positions_in(drows, lower ? p0 : p1, md, relpos.data(), lo, hi);
        const int rows = last - first;
        if (rows == 0) continue;
        // L: L_d(first:last) U_d(p0:p1)^T into lp; U^T: U_d(first:last) L_d(p0:p1)^T into up; chunks of columns.
        const double* x = lower ? ld + first : ud + (first - kd);
        const int ldx = lower ? md : bd, ldy = lower ? bd : md;
        double* panel = lower ? lp : up;
        const int ldp = lower ? m : below, shift = lower ? 0 : k;
        for (int c0 = 0; c0 < nk; c0 += chunk) {
          const int width = std::min(chunk, nk - c0);
          const double* y = (lower ? ud + (p0 - kd) : ld + p0) + c0;
          if (static_cast<offset_t>(kd) * width * rows <= kSmallUpdate) {
            for (int c = 0; c < width; ++c) {
              double* target = panel + static_cast<offset_t>(drows[p0 + c0 + c] - f) * ldp;
              for (int r = 0; r < rows; ++r) {
                double sum = 0;
                for (int t = 0; t < kd; ++t)
                  sum += x[r + static_cast<offset_t>(t) * ldx] * y[c + static_cast<offset_t>(t) * ldy];
                target[relpos[drows[first + r]] - shift] -= sum;
              }
            }
            continue;
          }
          dgemm_("N", "T", &rows, &width, &kd, &one, x, &ldx, y, &ldy, &zero, w, &rows);
          for (int c = 0; c < width; ++c) {
            double* target = panel + static_cast<offset_t>(drows[p0 + c0 + c] - f) * ldp;
            const double* wc = w + static_cast<offset_t>(c) * rows;
            for (int r = 0; r < rows; ++r) target[relpos[drows[first + r]] - shift] -= wc[r];
          }
        }
      }
    }
  });
}

void LuFactor::factor_supernode(index_t s, int team, const SparseMatrix& A, std::vector<index_t>& relpos,
                                std::vector<double>& work) {
  const LuSymbolic& L = *symbolic_;
  const SymbolicFactor& S = structure();
  const index_t f = S.supernode_begin[s], l = S.supernode_begin[s + 1];
  const int k = l - f, m = S.supernode_rows(s), below = m - k;
  const index_t* rows = S.row_indices.data() + S.row_ptr[s];
  double* lp = l_values_.data() + S.panel_offset[s];
  double* up = u_values_.data() + u_offset_[s];
  std::fill(lp, lp + static_cast<offset_t>(m) * k, 0.0);
  std::fill(up, up + static_cast<offset_t>(below) * k, 0.0);
  for (int r = 0; r < m; ++r) relpos[rows[r]] = r;

  // Assemble C's columns f..l-1 (on and below the diagonal) and rows f..l-1 (right of the diagonal).
  for (index_t j = f; j < l; ++j) {
    for (offset_t p = L.lower_ptr[j]; p < L.lower_ptr[j + 1]; ++p)
      lp[static_cast<offset_t>(j - f) * m + relpos[L.lower_index[p]]] = A.values()[L.lower_source[p]] * L.lower_scale[p];
    for (offset_t p = L.upper_ptr[j]; p < L.upper_ptr[j + 1]; ++p) {
      const index_t col = L.upper_index[p];
      const double v = A.values()[L.upper_source[p]] * L.upper_scale[p];
      if (col < l)
        lp[static_cast<offset_t>(col - f) * m + (j - f)] = v;
      else
        up[static_cast<offset_t>(j - f) * below + relpos[col] - k] = v;
    }
  }

  // Updates from descendants d, whose rows p0..p1-1 lie in s: the columns of s get
  // L_d(p0:md) U_d(p0:p1)^T, the rows of s right of it get (U_d(p1:md) L_d(p0:p1)^T)^T in U^T form.
  if (team > 1)
    gather_updates_on_team(s, team, relpos);
  else
    gather_updates(s, relpos, work.data());

  // The diagonal block with row pivoting inside it, then L21 = A21 U11^{-1} and U12 = L11^{-1} P A12 (as
  // U12^T = (P A12)^T L11^{-T}).
  index_t* piv = pivots_.data() + f;
  factor_diagonal_block(lp, k, m, piv, pivot_threshold_, pivot_delta_.data() + f, team);
  for (int c = 0; c < k; ++c) {
    if (!std::isfinite(lp[c + static_cast<offset_t>(c) * m])) {
      const index_t j = L.structure->perm[f + c];
      throw NumericalError(NumericalError::Kind::not_finite, j,
                           "factorize: the LU overflowed at the pivot of " + column_name(j) +
                               " (of the permuted and scaled matrix)");
    }
    if (piv[c] != c && below > 0)
      std::swap_ranges(up + static_cast<offset_t>(c) * below, up + static_cast<offset_t>(c + 1) * below,
                       up + static_cast<offset_t>(piv[c]) * below);
    piv[c] += f;
  }
  if (below > 0) {
    parallel_trsm('R', 'U', 'N', 'N', below, k, 1.0, lp, m, lp + k, m, team);
    parallel_trsm('R', 'L', 'T', 'U', below, k, 1.0, lp, m, up, below, team);
  }
}

}  // namespace spade
