// Left-looking supernodal Cholesky (Ng and Peyton 1993; the update/scatter scheme of CHOLMOD's
// supernodal factorization): each supernode gathers the updates of its descendants with syrk/gemm into a
// dense workspace, scatters them into its panel through relative row positions, then runs potrf on its
// diagonal block and trsm on the block below. See include/spade/cholesky.hpp.
#include "spade/cholesky.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>
#include <mutex>
#include <new>
#include <queue>
#include <string>

#include "../core/blas.hpp"
#include "../core/messages.hpp"
#include "spade/error.hpp"

namespace spade {
namespace {

// Below these sizes the scalar loops beat a BLAS/LAPACK call: updates of at most kSmallUpdate multiply-adds,
// and supernodes of at most kNarrow columns.
constexpr offset_t kSmallUpdate = 2048;
constexpr int kNarrow = 8;
// Work (about k m^2 multiply-adds for a supernode of k columns and m rows) that keeps one BLAS thread busy.
constexpr double kFlopsPerBlasThread = 4e6;

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
  threads_ = std::min(options.threads > 0 ? options.threads : omp_get_max_threads(), omp_get_num_procs());
  try {
    values_.resize(static_cast<std::size_t>(symbolic_->panel_offset.back()));
  } catch (const std::bad_alloc&) {
    throw ResourceError("factorize: out of memory for the factor (" +
                        std::to_string(symbolic_->panel_offset.back()) + " entries)");
  }
  try {
    build_update_lists();
    plan_subtrees();
  } catch (const std::bad_alloc&) {
    throw ResourceError("factorize: out of memory for the update lists");
  }
  refactorize(A);
}

void NumericFactor::build_update_lists() {
  const SymbolicFactor& S = *symbolic_;
  const index_t ns = S.num_supernodes;
  update_ptr_.assign(static_cast<std::size_t>(ns) + 1, 0);
  // Two passes over every supernode's rows below its diagonal block: count, then fill (ascending d).
  for (int pass = 0; pass < 2; ++pass) {
    std::vector<offset_t> next(update_ptr_.begin(), update_ptr_.end() - 1);
    for (index_t d = 0; d < ns; ++d) {
      const offset_t begin = S.row_ptr[d], m = S.supernode_rows(d);
      index_t last = -1;
      for (offset_t p = S.supernode_cols(d); p < m; ++p) {
        const index_t t = S.supernode_of[S.row_indices[begin + p]];
        if (t == last) continue;
        last = t;
        if (pass == 0) {
          ++update_ptr_[t + 1];
        } else {
          updates_[next[t]++] = Update{d, static_cast<index_t>(p)};
          offset_t q = p;  // the block is rows p .. m-1 of d by the rows of d inside t
          while (q < m && S.supernode_of[S.row_indices[begin + q]] == t) ++q;
          work_size_ = std::max(work_size_, static_cast<std::size_t>((m - p) * (q - p)));
        }
      }
    }
    if (pass == 0) {
      for (index_t t = 0; t < ns; ++t) update_ptr_[t + 1] += update_ptr_[t];
      updates_.resize(static_cast<std::size_t>(update_ptr_[ns]));
    }
  }
}

// Splits the assembly tree into independent subtrees for the threads and a top part (Geist and Ng 1989):
// the heaviest subtree is split at its root while it holds more than 1/(4 threads) of the flops.
void NumericFactor::plan_subtrees() {
  const SymbolicFactor& S = *symbolic_;
  const index_t ns = S.num_supernodes;
  subtree_roots_.clear();
  top_.clear();
  if (threads_ <= 1) {
    for (index_t s = 0; s < ns; ++s) top_.push_back(s);
    return;
  }
  std::vector<double> work(ns, 0.0);
  std::vector<std::vector<index_t>> children(ns);
  double total = 0;
  for (index_t s = 0; s < ns; ++s) {
    const double k = S.supernode_cols(s), m = S.supernode_rows(s);
    work[s] += k * m * m;  // about the flops of its updates, potrf and trsm
    if (S.super_parent[s] != -1) {
      work[S.super_parent[s]] += work[s];
      children[S.super_parent[s]].push_back(s);
    } else {
      total += work[s];
    }
  }
  auto lighter = [&](index_t a, index_t b) { return work[a] < work[b]; };
  std::priority_queue<index_t, std::vector<index_t>, decltype(lighter)> heap(lighter);
  for (index_t s = 0; s < ns; ++s)
    if (S.super_parent[s] == -1) heap.push(s);
  const double limit = total / (4.0 * threads_);
  while (!heap.empty() && work[heap.top()] > limit) {
    const index_t s = heap.top();
    heap.pop();
    top_.push_back(s);
    for (index_t c : children[s]) heap.push(c);
  }
  while (!heap.empty()) {
    subtree_roots_.push_back(heap.top());
    heap.pop();
  }
  std::sort(top_.begin(), top_.end());  // children before parents
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
  // Subtree of supernode s: the contiguous range first_descendant[s] .. s (the numbering is a postorder).
  std::vector<index_t> first_descendant(S.num_supernodes);
  for (index_t s = 0; s < S.num_supernodes; ++s) first_descendant[s] = s;
  for (index_t s = 0; s < S.num_supernodes; ++s)
    if (S.super_parent[s] != -1)
      first_descendant[S.super_parent[s]] = std::min(first_descendant[S.super_parent[s]], first_descendant[s]);

  // The first error of the lowest-numbered supernode wins, so the report does not depend on the threads.
  std::mutex error_mutex;
  index_t error_supernode = std::numeric_limits<index_t>::max();
  std::exception_ptr error;
  auto record = [&](index_t s) {
    std::lock_guard<std::mutex> lock(error_mutex);
    if (s < error_supernode) {
      error_supernode = s;
      error = std::current_exception();
    }
  };
  if (!subtree_roots_.empty()) {
    BlasThreads blas(1);
    const index_t count = static_cast<index_t>(subtree_roots_.size());
#pragma omp parallel num_threads(threads_)
    {
      // Allocated inside the try below: no exception may leave an OpenMP region.
      std::vector<index_t> relpos;
      std::vector<double> work;
      bool workspace = false;
#pragma omp for schedule(dynamic, 1)
      for (index_t t = 0; t < count; ++t) {
        const index_t root = subtree_roots_[t];
        index_t s = first_descendant[root];
        try {
          if (!workspace) {
            relpos.resize(S.n);
            work.resize(work_size_);
            workspace = true;
          }
          for (; s <= root; ++s) factor_supernode(s, A, relpos, work);
          if (progress_) progress_(*this, first_descendant[root], root);
        } catch (...) {
          record(s);
        }
      }
    }
  }
  if (!error) {
    // Threaded BLAS at the top, with no more threads than the supernode's work keeps busy (OpenBLAS
    // splits even small products across every thread it is given, which costs more than it saves).
    BlasThreads blas(threads_);
    std::vector<index_t> relpos(S.n);
    std::vector<double> work(work_size_);
    for (index_t s : top_) {
      const double k = S.supernode_cols(s), m = S.supernode_rows(s);
      const int wanted = static_cast<int>(std::clamp(k * m * m / kFlopsPerBlasThread, 1.0, double(threads_)));
      blas.set(wanted);
      factor_supernode(s, A, relpos, work);
      if (progress_) progress_(*this, s, s);
    }
  }
  if (error) std::rethrow_exception(error);
}

void NumericFactor::factor_supernode(index_t s, const SparseMatrix& A, std::vector<index_t>& relpos,
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
    double* w = work.data();
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
    int info = 0;
    dpotrf_("L", &k, panel, &m, &info);
    if (info > 0) throw not_positive_definite(f + info - 1);
    if (m > k) {
      const int below = m - k;
      dtrsm_("R", "L", "T", "N", &below, &k, &one, panel, &m, panel + k, &m);
    }
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
