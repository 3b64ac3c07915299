// Left-looking supernodal Cholesky (Ng and Peyton 1993; the update/scatter scheme of CHOLMOD's
// supernodal factorization): each supernode gathers the updates of its descendants with syrk/gemm into a
// dense workspace, scatters them into its panel through relative row positions, then runs potrf on its
// diagonal block and trsm on the block below. See include/spade/cholesky.hpp.
#include "spade/cholesky.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <new>
#include <string>

#include "../core/messages.hpp"
#include "supernodal_tree.hpp"
#include "spade/error.hpp"

namespace spade {
namespace {

// Below these sizes the scalar loops beat a BLAS/LAPACK call: updates of at most kSmallUpdate multiply-adds,
// and supernodes of at most kNarrow columns.
constexpr offset_t kSmallUpdate = 2048;
constexpr int kNarrow = 8;

void check_input(const SymbolicFactor& S, const SparseMatrix& A) {
  if (A.rows() != S.n || A.cols() != S.n || A.col_ptr() != S.a_col_ptr || A.row_ind() != S.a_row_ind)
    throw InvalidInput("factorize: the matrix's pattern differs from the pattern it was analyzed with");
  for (index_t j = 0; j < A.cols(); ++j)
    for (offset_t p = A.col_ptr()[j]; p < A.col_ptr()[j + 1]; ++p)
      if (!std::isfinite(A.values()[p]))
        throw InvalidInput("factorize: " + entry_name("A", A.row_ind()[p], j) + " is " +
                           std::to_string(A.values()[p]) + "; the matrix must be finite");
  // An empty column (no stored entry, so no diagonal either) makes A singular whatever the values.
  for (index_t j = 0; j < A.cols(); ++j)
    if (A.col_ptr()[j] == A.col_ptr()[j + 1])
      throw NumericalError(NumericalError::Kind::singular, j,
                           "factorize: the matrix is singular: " + column_name(j) + " is empty");
  const SparseMatrix t = A.transpose();  // same pattern, since the analyzed pattern is symmetric
  for (index_t j = 0; j < A.cols(); ++j)
    for (offset_t p = A.col_ptr()[j]; p < A.col_ptr()[j + 1]; ++p)
      if (t.values()[p] != A.values()[p])
        throw InvalidInput("factorize: Cholesky needs a symmetric matrix, but " + entry_name("A", A.row_ind()[p], j) +
                           " differs from its mirror entry");
}

}  // namespace

NumericFactor::NumericFactor(std::shared_ptr<const SymbolicFactor> symbolic, const SparseMatrix& A,
                             const FactorOptions& options)
    : symbolic_(std::move(symbolic)), progress_(options.progress) {
  if (!symbolic_) throw InvalidInput("factorize: no symbolic analysis given");
  // No more threads than the machine has processors: more only oversubscribe, and under a memory limit
  // the extra OpenMP and OpenBLAS threads (stacks, BLAS buffers) are what runs out first.
  threads_ = detail::factorization_threads(*symbolic_, options.threads, options.processors_left);
  try {
    values_.resize(static_cast<std::size_t>(symbolic_->panel_offset.back()));
  } catch (const std::bad_alloc&) {
    throw ResourceError("factorize: out of memory for the factor (" +
                        std::to_string(symbolic_->panel_offset.back()) + " entries)");
  }
  try {
    work_size_ = detail::build_update_lists(*symbolic_, update_ptr_, updates_);
    detail::plan_subtrees(*symbolic_, threads_, subtree_roots_, top_);
  } catch (const std::bad_alloc&) {
    throw ResourceError("factorize: out of memory for the update lists");
  }
  refactorize(A);
}

void NumericFactor::refactorize(const SparseMatrix& A) {
  valid_ = false;
  ++generation_;
  try {
    factor_all(A);
  } catch (const std::bad_alloc&) {
    throw ResourceError("factorize: out of memory for the workspace");
  }
  valid_ = true;
}

void NumericFactor::factor_all(const SparseMatrix& A) {
  const SymbolicFactor& S = *symbolic_;
  check_input(S, A);
  struct Release {  // the teams' workspace, also when a supernode fails
    std::vector<double>& work;
    ~Release() { std::vector<double>().swap(work); }
  } release{team_work_};
  detail::factor_over_tree(
      S, subtree_roots_, top_, threads_, work_size_,
      [&](index_t s, int team, std::vector<index_t>& relpos, std::vector<double>& work) {
        factor_supernode(s, team, A, relpos, work);
      },
      [&](index_t first, index_t last) {
        if (progress_) progress_(*this, first, last);
      });
}

void NumericFactor::gather_updates(index_t s, const std::vector<index_t>& relpos, double* w) {
  const SymbolicFactor& S = *symbolic_;
  const index_t f = S.supernode_begin[s], l = S.supernode_begin[s + 1];
  const int m = S.supernode_rows(s);
  double* panel = values_.data() + S.panel_offset[s];
  const double one = 1.0, zero = 0.0;
  for (offset_t u = update_ptr_[s]; u < update_ptr_[s + 1]; ++u) {
    const index_t d = updates_[u].source;
    const int p0 = updates_[u].first_row, md = S.supernode_rows(d), kd = S.supernode_cols(d);
    const index_t* drows = S.row_indices.data() + S.row_ptr[d];
    const double* ld = values_.data() + S.panel_offset[d];
    int p1 = p0;
    while (p1 < md && drows[p1] < l) ++p1;
    const int nk = p1 - p0, nm = md - p0;
    if (static_cast<offset_t>(kd) * nk * nm <= kSmallUpdate) {
      // Small update: subtract the products straight into the panel (a BLAS call would cost more).
      for (int c = 0; c < nk; ++c) {
        double* target = panel + static_cast<offset_t>(drows[p0 + c] - f) * m;
        for (int r = c; r < nm; ++r) {
          double sum = 0;
          for (int t = 0; t < kd; ++t) sum += ld[p0 + r + static_cast<offset_t>(t) * md] * ld[p0 + c + static_cast<offset_t>(t) * md];
          target[relpos[drows[p0 + r]]] -= sum;
        }
      }
      continue;
    }
    dsyrk_("L", "N", &nk, &kd, &one, ld + p0, &md, &zero, w, &nm);
    if (nm > nk) {
      const int below = nm - nk;
      dgemm_("N", "T", &below, &nk, &kd, &one, ld + p1, &md, ld + p0, &md, &zero, w + nk, &nm);
    }
    for (int c = 0; c < nk; ++c) {
      double* target = panel + static_cast<offset_t>(drows[p0 + c] - f) * m;
      const double* wc = w + static_cast<offset_t>(c) * nm;
      for (int r = c; r < nm; ++r) target[relpos[drows[p0 + r]]] -= wc[r];
    }
  }
}

void NumericFactor::gather_updates_on_team(index_t s, int team, const std::vector<index_t>& relpos) {
  const SymbolicFactor& S = *symbolic_;
  const index_t f = S.supernode_begin[s], l = S.supernode_begin[s + 1];
  const int k = l - f, m = S.supernode_rows(s);
  double* panel = values_.data() + S.panel_offset[s];
  // Owner computes: the team shares out blocks of the panel's rows, and a thread gathers into its rows every
  // update that reaches them, so no two threads write one entry and the updates need no barrier between them.
  // Row r of the panel receives min(r + 1, k) columns (the lower triangle).
  const std::vector<int> blocks = detail::row_blocks(m, 4 * team, [k](int r) { return std::min(r + 1, k); });
  constexpr int chunk = detail::kUpdateChunk;
  const double one = 1.0, zero = 0.0;
  detail::gather_on_team(team, blocks, team_work_, [&](int lo, int hi, double* w) {
    for (offset_t u = update_ptr_[s]; u < update_ptr_[s + 1]; ++u) {
      const index_t d = updates_[u].source;
      const int p0 = updates_[u].first_row, md = S.supernode_rows(d), kd = S.supernode_cols(d);
      const index_t* drows = S.row_indices.data() + S.row_ptr[d];
      const double* ld = values_.data() + S.panel_offset[d];
      const auto [first, last] = detail::positions_in(drows, p0, md, relpos.data(), lo, hi);
      if (first == last) continue;
      const int p1 = static_cast<int>(std::lower_bound(drows + p0, drows + md, l) - drows);
      // d's rows first .. last-1 reach the columns of s at d's positions p0 .. min(p1, last)-1 on or left of
      // the diagonal (the column at position c lies on or left of the row at position r exactly when c <= r),
      // in chunks of columns; a chunk's rows start at its first column's position.
      const int cols = std::min(p1, last) - p0;
      for (int c0 = 0; c0 < cols; c0 += chunk) {
        const int width = std::min(chunk, cols - c0), r0 = std::max(first, p0 + c0), rows = last - r0;
        if (static_cast<offset_t>(kd) * width * rows <= kSmallUpdate) {
          for (int c = c0; c < c0 + width; ++c) {
            double* target = panel + static_cast<offset_t>(drows[p0 + c] - f) * m;
            for (int r = std::max(r0, p0 + c); r < last; ++r) {
              double sum = 0;
              for (int t = 0; t < kd; ++t)
                sum += ld[r + static_cast<offset_t>(t) * md] * ld[p0 + c + static_cast<offset_t>(t) * md];
              target[relpos[drows[r]]] -= sum;
            }
          }
          continue;
        }
        dgemm_("N", "T", &rows, &width, &kd, &one, ld + r0, &md, ld + p0 + c0, &md, &zero, w, &rows);
        for (int c = c0; c < c0 + width; ++c) {
          double* target = panel + static_cast<offset_t>(drows[p0 + c] - f) * m;
          const double* wc = w + static_cast<offset_t>(c - c0) * rows;
          for (int r = std::max(r0, p0 + c); r < last; ++r) target[relpos[drows[r]]] -= wc[r - r0];
        }
      }
    }
  });
}

void NumericFactor::factor_supernode(index_t s, int team, const SparseMatrix& A, std::vector<index_t>& relpos,
                                     std::vector<double>& work) {
  const SymbolicFactor& S = *symbolic_;
  const index_t f = S.supernode_begin[s], l = S.supernode_begin[s + 1];
  const int k = l - f, m = S.supernode_rows(s);
  const index_t* rows = S.row_indices.data() + S.row_ptr[s];
  double* panel = values_.data() + S.panel_offset[s];
  std::fill(panel, panel + static_cast<offset_t>(m) * k, 0.0);
  for (int r = 0; r < m; ++r) relpos[rows[r]] = r;

  // Assemble the columns of A (lower triangle of C = P A P^T).
  for (index_t j = f; j < l; ++j)
    for (offset_t p = S.c_ptr[j]; p < S.c_ptr[j + 1]; ++p)
      panel[static_cast<offset_t>(j - f) * m + relpos[S.c_rows[p]]] = A.values()[S.c_source[p]];

  // Updates from descendants: W = L_d(rows >= f) * L_d(rows in [f, l))^T, then panel -= W (scattered).
  if (team > 1)
    gather_updates_on_team(s, team, relpos);
  else
    gather_updates(s, relpos, work.data());

  auto not_positive_definite = [&](index_t j) {
    return NumericalError(NumericalError::Kind::not_positive_definite, S.perm[j],
                          "factorize: the matrix is not positive definite: the pivot of " +
                              column_name(S.perm[j]) + " is not positive");
  };
  if (k <= kNarrow) {
    // Narrow supernode: column-by-column Cholesky of the whole panel (potrf and trsm in one pass).
    for (int c = 0; c < k; ++c) {
      double* lc = panel + static_cast<offset_t>(c) * m;
      for (int t = 0; t < c; ++t) {
        const double* lt = panel + static_cast<offset_t>(t) * m;
        const double factor = lt[c];
        for (int r = c; r < m; ++r) lc[r] -= lt[r] * factor;
      }
      if (!(lc[c] > 0)) throw not_positive_definite(f + c);
      const double pivot = std::sqrt(lc[c]);
      lc[c] = pivot;
      for (int r = c + 1; r < m; ++r) lc[r] /= pivot;
    }
  } else {
    const int info = parallel_cholesky_panel(m, k, panel, m, team);  // potrf, then trsm below
    if (info > 0) throw not_positive_definite(f + info - 1);
  }
  // A pivot that lost all digits to cancellation: L_jj^2 <= eps * a_jj (a_jj is the first entry of column j
  // of C's lower triangle, when stored; a missing diagonal already failed as not positive definite).
  constexpr double eps = std::numeric_limits<double>::epsilon();
  for (int c = 0; c < k; ++c) {
    const index_t col = f + c;
    const offset_t first = S.c_ptr[col];
    const double a_jj = first < S.c_ptr[col + 1] && S.c_rows[first] == col ? A.values()[S.c_source[first]] : 0.0;
    const double pivot = panel[static_cast<offset_t>(c) * m + c];
    if (pivot * pivot <= eps * a_jj) {
      const index_t j = S.perm[f + c];
      throw NumericalError(NumericalError::Kind::singular, j,
                           "factorize: the matrix is numerically singular: the pivot of " + column_name(j) +
                               " lost all significant digits");
    }
  }
}

}  // namespace spade
