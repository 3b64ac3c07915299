// Symbolic analysis: etree, postorder, column counts, supernodes, supernodal row structure.
// See include/spade/symbolic.hpp for the contracts and the papers followed.
#include "spade/symbolic.hpp"

#include <algorithm>
#include <chrono>
#include <limits>
#include <numeric>
#include <string>

#include "spade/error.hpp"

namespace spade {
namespace {

// The strictly lower triangle of a square pattern, column by column (rows sorted, all > column).
struct LowerPattern {
  index_t n = 0;
  std::vector<offset_t> ptr;
  std::vector<index_t> rows;
};

// Liu's elimination-tree algorithm with path compression. Row k's entries left of the diagonal are
// visited through the transposed lower triangle (row_ptr/row_cols), in increasing k.
std::vector<index_t> etree_of(const LowerPattern& L) {
  const index_t n = L.n;
  std::vector<offset_t> row_ptr(static_cast<std::size_t>(n) + 1, 0);
  for (index_t i : L.rows) ++row_ptr[i + 1];
  std::partial_sum(row_ptr.begin(), row_ptr.end(), row_ptr.begin());
  std::vector<index_t> row_cols(L.rows.size());
  {
    std::vector<offset_t> next(row_ptr.begin(), row_ptr.end() - 1);
    for (index_t j = 0; j < n; ++j)
      for (offset_t p = L.ptr[j]; p < L.ptr[j + 1]; ++p) row_cols[next[L.rows[p]]++] = j;
  }
  std::vector<index_t> parent(n, -1), ancestor(n, -1);
  for (index_t k = 0; k < n; ++k) {
    for (offset_t p = row_ptr[k]; p < row_ptr[k + 1]; ++p) {
      // Climb from column j < k to the root of its current subtree, compressing the path to k.
      for (index_t i = row_cols[p]; i != -1 && i < k;) {
        const index_t next = ancestor[i];
        ancestor[i] = k;
        if (next == -1) parent[i] = k;
        i = next;
      }
    }
  }
  return parent;
}

// Gilbert-Ng-Peyton column counts: for each row subtree, count the skeleton leaves and subtract the
// overlaps at least common ancestors found with a disjoint-set forest (path compression).
std::vector<index_t> col_counts_of(const LowerPattern& L, const std::vector<index_t>& parent,
                                   const std::vector<index_t>& post) {
  const index_t n = L.n;
  std::vector<index_t> first(n, -1), max_first(n, -1), prev_leaf(n, -1), ancestor(n);
  std::vector<index_t> delta(n, 0);
  // first[j] = postorder position of the first descendant of j; delta[j] starts at 1 for leaves.
  for (index_t k = 0; k < n; ++k) {
    index_t j = post[k];
    delta[j] = (first[j] == -1) ? 1 : 0;
    for (; j != -1 && first[j] == -1; j = parent[j]) first[j] = k;
  }
  std::iota(ancestor.begin(), ancestor.end(), 0);
  for (index_t k = 0; k < n; ++k) {
    const index_t j = post[k];
    if (parent[j] != -1) --delta[parent[j]];
    for (offset_t p = L.ptr[j]; p < L.ptr[j + 1]; ++p) {
      const index_t i = L.rows[p];  // entry (i, j), i > j: is j a leaf of row subtree i?
      if (first[j] <= max_first[i]) continue;
      max_first[i] = first[j];
      const index_t prev = prev_leaf[i];
      prev_leaf[i] = j;
      ++delta[j];
      if (prev == -1) continue;  // first leaf of row subtree i
      index_t q = prev;          // least common ancestor of prev and j
      while (q != ancestor[q]) q = ancestor[q];
      for (index_t s = prev; s != q;) {
        const index_t up = ancestor[s];
        ancestor[s] = q;
        s = up;
      }
      --delta[q];
    }
    if (parent[j] != -1) ancestor[j] = parent[j];
  }
  std::vector<index_t> counts(delta);
  for (index_t k = 0; k < n; ++k) {  // children before parents: accumulate in postorder
    const index_t j = post[k];
    if (parent[j] != -1) counts[parent[j]] += counts[j];
  }
  return counts;
}

void require_square(const SparseMatrix& A, const char* who) {
  if (!A.is_square())
    throw InvalidInput(std::string(who) + ": matrix must be square, got " + std::to_string(A.rows()) + " x " +
                       std::to_string(A.cols()));
}

// Lower triangle (diagonal included) of C = P A P^T for perm/iperm, with the source of each value in A.
// Only A's entries on or below the diagonal are read; the pattern must be symmetric.
void permuted_lower(const SparseMatrix& A, const std::vector<index_t>& iperm, std::vector<offset_t>& ptr,
                    std::vector<index_t>& rows, std::vector<offset_t>& source) {
  const index_t n = A.cols();
  ptr.assign(static_cast<std::size_t>(n) + 1, 0);
  for (index_t j = 0; j < n; ++j)
    for (offset_t p = A.col_ptr()[j]; p < A.col_ptr()[j + 1]; ++p) {
      const index_t i = A.row_ind()[p];
      if (i >= j) ++ptr[std::min(iperm[i], iperm[j]) + 1];
    }
  std::partial_sum(ptr.begin(), ptr.end(), ptr.begin());
  rows.resize(static_cast<std::size_t>(ptr[n]));
  source.resize(static_cast<std::size_t>(ptr[n]));
  std::vector<offset_t> next(ptr.begin(), ptr.end() - 1);
  for (index_t j = 0; j < n; ++j)
    for (offset_t p = A.col_ptr()[j]; p < A.col_ptr()[j + 1]; ++p) {
      const index_t i = A.row_ind()[p];
      if (i < j) continue;
      const index_t a = iperm[i], b = iperm[j];
      const offset_t q = next[std::min(a, b)]++;
      rows[q] = std::max(a, b);
      source[q] = p;
    }
  // Sort each column by row (source follows).
  std::vector<std::pair<index_t, offset_t>> buf;
  for (index_t j = 0; j < n; ++j) {
    buf.clear();
    for (offset_t p = ptr[j]; p < ptr[j + 1]; ++p) buf.emplace_back(rows[p], source[p]);
    std::sort(buf.begin(), buf.end());
    for (offset_t p = ptr[j]; p < ptr[j + 1]; ++p) {
      rows[p] = buf[p - ptr[j]].first;
      source[p] = buf[p - ptr[j]].second;
    }
  }
}

LowerPattern strict_part(index_t n, const std::vector<offset_t>& ptr, const std::vector<index_t>& rows) {
  LowerPattern L;
  L.n = n;
  L.ptr.assign(static_cast<std::size_t>(n) + 1, 0);
  L.rows.reserve(rows.size());
  for (index_t j = 0; j < n; ++j) {
    for (offset_t p = ptr[j]; p < ptr[j + 1]; ++p)
      if (rows[p] > j) L.rows.push_back(rows[p]);
    L.ptr[j + 1] = static_cast<offset_t>(L.rows.size());
  }
  return L;
}

offset_t trapezoid_entries(offset_t cols, offset_t rows) { return cols * rows - cols * (cols - 1) / 2; }

// The elimination tree of P A P^T for an ordering perm: the etree, its postorder and the column counts, kept
// so that analyze() relabels them for the chosen ordering instead of recomputing them; and the predicted
// nnz(L) and flops (without supernodes) from the counts.
struct OrderingAnalysis {
  std::vector<index_t> parent;
  std::vector<index_t> post;
  std::vector<index_t> col_counts;
  offset_t nnz_l = 0;
  double flops = 0;
};

OrderingAnalysis analyze_ordering(const SparseMatrix& A, const std::vector<index_t>& perm) {
  std::vector<offset_t> ptr, source;
  std::vector<index_t> rows;
  permuted_lower(A, inverse_permutation(perm), ptr, rows, source);
  const LowerPattern L = strict_part(A.cols(), ptr, rows);
  OrderingAnalysis a;
  a.parent = etree_of(L);
  a.post = postorder(a.parent);
  a.col_counts = col_counts_of(L, a.parent, a.post);
  for (index_t c : a.col_counts) {
    a.nnz_l += c;
    a.flops += static_cast<double>(c) * c;
  }
  return a;
}

bool pattern_is_symmetric(const SparseMatrix& A) {
  const SparseMatrix t = A.transpose();
  return t.col_ptr() == A.col_ptr() && t.row_ind() == A.row_ind();
}

}  // namespace

std::vector<index_t> etree(const SparseMatrix& A) {
  require_square(A, "etree");
  return etree_of(strict_part(A.cols(), A.col_ptr(), A.row_ind()));
}

std::vector<index_t> postorder(const std::vector<index_t>& parent) {
  const index_t n = static_cast<index_t>(parent.size());
  // Children lists in increasing order: push in decreasing order onto singly linked lists.
  std::vector<index_t> head(n, -1), next(n, -1);
  for (index_t j = n - 1; j >= 0; --j) {
    const index_t p = parent[j];
    if (p < -1 || p >= n || p == j) throw InvalidInput("postorder: parent[" + std::to_string(j) + "] is invalid");
    if (p == -1) continue;
    next[j] = head[p];
    head[p] = j;
  }
  std::vector<index_t> post;
  post.reserve(n);
  std::vector<index_t> stack;
  for (index_t root = 0; root < n; ++root) {
    if (parent[root] != -1) continue;
    stack.push_back(root);
    while (!stack.empty()) {
      const index_t j = stack.back();
      const index_t child = head[j];
      if (child == -1) {
        stack.pop_back();
        post.push_back(j);
      } else {
        head[j] = next[child];  // consume the child, then descend into it
        stack.push_back(child);
      }
    }
  }
  if (static_cast<index_t>(post.size()) != n) throw InvalidInput("postorder: parent array has a cycle");
  return post;
}

std::vector<index_t> col_counts(const SparseMatrix& A, const std::vector<index_t>& parent,
                                const std::vector<index_t>& post) {
  require_square(A, "col_counts");
  if (parent.size() != static_cast<std::size_t>(A.cols()) || post.size() != parent.size())
    throw InvalidInput("col_counts: parent and post must have n entries");
  return col_counts_of(strict_part(A.cols(), A.col_ptr(), A.row_ind()), parent, post);
}

namespace {

// Steps 2 to 6 of the analysis, after the ordering perm0 (with its etree analysis `chosen`) is known.
void finish_analysis(SymbolicFactor* S, const SparseMatrix& A, const std::vector<index_t>& perm0,
                     const OrderingAnalysis& chosen, const SupernodeOptions& relax,
                     std::chrono::steady_clock::time_point ordered);

std::shared_ptr<SymbolicFactor> start_analysis(const SparseMatrix& A) {
  require_square(A, "analyze");
  if (!pattern_is_symmetric(A))
    throw InvalidInput("analyze: Cholesky needs a symmetric matrix, but the pattern of A is not symmetric");
  auto S = std::make_shared<SymbolicFactor>();
  S->n = A.cols();
  S->a_col_ptr = A.col_ptr();
  S->a_row_ind = A.row_ind();
  return S;
}

}  // namespace

std::shared_ptr<const SymbolicFactor> analyze(const SparseMatrix& A, const std::vector<index_t>& perm,
                                              OrderingMethod method, const SupernodeOptions& supernodes) {
  auto S = start_analysis(A);
  if (perm.size() != static_cast<std::size_t>(A.cols()))
    throw InvalidInput("analyze: the ordering has " + std::to_string(perm.size()) + " entries, the matrix " +
                       std::to_string(A.cols()) + " columns");
  inverse_permutation(perm);  // throws InvalidInput unless perm is a permutation
  const auto start = std::chrono::steady_clock::now();
  S->ordering = method;
  const OrderingAnalysis chosen = analyze_ordering(A, perm);
  const auto ordered = std::chrono::steady_clock::now();
  S->ordering_seconds = std::chrono::duration<double>(ordered - start).count();
  finish_analysis(S.get(), A, perm, chosen, supernodes, ordered);
  return S;
}

std::shared_ptr<const SymbolicFactor> analyze(const SparseMatrix& A, const AnalyzeOptions& options) {
  auto S = start_analysis(A);
  const index_t n = A.cols();
  const auto start = std::chrono::steady_clock::now();
  // 1. Fill-reducing ordering. Automatic: AMD, and METIS too when AMD's factor is both fill-heavy and
  //    flop-heavy (CHOLMOD's rule: nnz(L) >= 5 nnz(tril(A)) and flops >= 500 nnz(L)); the smaller nnz(L) wins.
  std::vector<index_t> perm0;
  OrderingAnalysis chosen;
  if (options.ordering) {
    S->ordering = *options.ordering;
    perm0 = fill_reducing_ordering(A, S->ordering);
    chosen = analyze_ordering(A, perm0);
  } else {
    S->ordering = OrderingMethod::amd;
    perm0 = fill_reducing_ordering(A, OrderingMethod::amd);
    chosen = analyze_ordering(A, perm0);
    const double lower_nnz = 0.5 * static_cast<double>(A.nnz() + n);
    if (static_cast<double>(chosen.nnz_l) >= 5 * lower_nnz &&
        chosen.flops >= 500 * static_cast<double>(chosen.nnz_l)) {
      std::vector<index_t> nd = fill_reducing_ordering(A, OrderingMethod::metis);
      OrderingAnalysis metis = analyze_ordering(A, nd);
      if (metis.nnz_l < chosen.nnz_l) {
        perm0 = std::move(nd);
        chosen = std::move(metis);
        S->ordering = OrderingMethod::metis;
      }
    }
  }
  const auto ordered = std::chrono::steady_clock::now();
  S->ordering_seconds = std::chrono::duration<double>(ordered - start).count();

  finish_analysis(S.get(), A, perm0, chosen, options.supernodes, ordered);
  return S;
}

namespace {

void finish_analysis(SymbolicFactor* S, const SparseMatrix& A, const std::vector<index_t>& perm0,
                     const OrderingAnalysis& chosen, const SupernodeOptions& relax,
                     std::chrono::steady_clock::time_point ordered) {
  const index_t n = A.cols();
  // 2. Compose the ordering with its etree postorder, so that C = P A P^T is postordered. A postorder only
  //    relabels the etree (column post[k] of perm0's matrix becomes column k of C, with the same fill), so
  //    C's etree and column counts are the chosen ordering's, renumbered rather than recomputed.
  S->perm.resize(n);
  for (index_t k = 0; k < n; ++k) S->perm[k] = perm0[chosen.post[k]];
  S->iperm = inverse_permutation(S->perm);
  permuted_lower(A, S->iperm, S->c_ptr, S->c_rows, S->c_source);
  const std::vector<index_t> ipost = inverse_permutation(chosen.post);
  S->parent.resize(n);
  S->col_counts.resize(n);
  for (index_t k = 0; k < n; ++k) {
    const index_t p = chosen.parent[chosen.post[k]];
    S->parent[k] = p == -1 ? index_t{-1} : ipost[p];
    S->col_counts[k] = chosen.col_counts[chosen.post[k]];
  }

  // 3. Fundamental supernodes: j joins j-1's supernode when j is j-1's parent, has it as only child, and
  //    the column counts shrink by exactly one.
  std::vector<index_t> num_children(n, 0);
  for (index_t j = 0; j < n; ++j)
    if (S->parent[j] != -1) ++num_children[S->parent[j]];
  std::vector<index_t> fbegin;
  for (index_t j = 0; j < n; ++j) {
    const bool extends = j > 0 && S->parent[j - 1] == j && num_children[j] == 1 &&
                         S->col_counts[j - 1] == S->col_counts[j] + 1;
    if (!extends) fbegin.push_back(j);
  }
  fbegin.push_back(n);
  const index_t nf = static_cast<index_t>(fbegin.size()) - 1;

  // 4. Relaxed amalgamation, from the root down: a supernode joins the group right after it when that
  //    group holds its parent (children are numbered just before their parents).
  std::vector<index_t> fsuper_of(n);
  for (index_t s = 0; s < nf; ++s)
    for (index_t j = fbegin[s]; j < fbegin[s + 1]; ++j) fsuper_of[j] = s;
  auto fparent = [&](index_t s) {
    const index_t p = S->parent[fbegin[s + 1] - 1];
    return p == -1 ? index_t{-1} : fsuper_of[p];
  };
  {
    // State of the group that starts at fundamental supernode s+1 (groups grow downwards).
    index_t group_cols = 0;
    offset_t group_rows = 0;        // rows of the group's first column (diagonal block included)
    offset_t group_true_nnz = 0;    // nonzeros of the group counted with the fundamental column counts
    std::vector<char> starts(nf, 1);  // starts[s]: s begins a relaxed group
    for (index_t s = nf - 1; s >= 0; --s) {
      const index_t cols = fbegin[s + 1] - fbegin[s];
      const offset_t rows = S->col_counts[fbegin[s]];
      const offset_t true_nnz = trapezoid_entries(cols, rows);
      bool merge = false;
      if (relax.relax && s + 1 < nf && fparent(s) == s + 1) {
        const offset_t k = cols + group_cols;
        const offset_t m = cols + group_rows;
        const double zeros = static_cast<double>(trapezoid_entries(k, m) - (true_nnz + group_true_nnz));
        const double z = zeros / static_cast<double>(trapezoid_entries(k, m));
        merge = k <= relax.nrelax[0] || (k <= relax.nrelax[1] && z < relax.zrelax[0]) ||
                (k <= relax.nrelax[2] && z < relax.zrelax[1]) || z < relax.zrelax[2];
      }
      if (merge) {
        starts[s + 1] = 0;
        group_cols += cols;
        group_rows += cols;
        group_true_nnz += true_nnz;
      } else {
        group_cols = cols;
        group_rows = rows;
        group_true_nnz = true_nnz;
      }
    }
    for (index_t s = 0; s < nf; ++s)
      if (starts[s]) S->supernode_begin.push_back(fbegin[s]);
    S->supernode_begin.push_back(n);
  }
  const index_t ns = static_cast<index_t>(S->supernode_begin.size()) - 1;
  S->num_supernodes = ns;
  S->supernode_of.resize(n);
  for (index_t s = 0; s < ns; ++s)
    for (index_t j = S->supernode_begin[s]; j < S->supernode_begin[s + 1]; ++j) S->supernode_of[j] = s;

  // 5. Row structure of each supernode: its columns, then the union of A's rows below it and its children's
  //    rows below it (children come first in the numbering, so they are done when s is reached).
  S->row_ptr.assign(static_cast<std::size_t>(ns) + 1, 0);
  S->super_parent.assign(ns, -1);
  std::vector<index_t> mark(n, -1), child_head(ns, -1), child_next(ns, -1), below;
  for (index_t s = 0; s < ns; ++s) {
    const index_t f = S->supernode_begin[s], l = S->supernode_begin[s + 1];
    below.clear();
    auto add = [&](index_t i) {
      if (i >= l && mark[i] != s) {
        mark[i] = s;
        below.push_back(i);
      }
    };
    for (index_t j = f; j < l; ++j)
      for (offset_t p = S->c_ptr[j]; p < S->c_ptr[j + 1]; ++p) add(S->c_rows[p]);
    for (index_t c = child_head[s]; c != -1; c = child_next[c])
      for (offset_t p = S->row_ptr[c] + S->supernode_cols(c); p < S->row_ptr[c + 1]; ++p) add(S->row_indices[p]);
    std::sort(below.begin(), below.end());
    for (index_t j = f; j < l; ++j) S->row_indices.push_back(j);
    S->row_indices.insert(S->row_indices.end(), below.begin(), below.end());
    S->row_ptr[s + 1] = static_cast<offset_t>(S->row_indices.size());
    if (!below.empty()) {
      const index_t p = S->supernode_of[below.front()];
      S->super_parent[s] = p;
      child_next[s] = child_head[p];
      child_head[p] = s;
    }
  }

  // 6. Panel offsets, nnz(L) and operation counts.
  S->panel_offset.assign(static_cast<std::size_t>(ns) + 1, 0);
  for (index_t s = 0; s < ns; ++s) {
    const offset_t k = S->supernode_cols(s), m = S->supernode_rows(s);
    if (m > std::numeric_limits<offset_t>::max() / std::max<offset_t>(k, 1) - S->panel_offset[s])
      throw ResourceError("analyze: the factor's panels overflow 64-bit offsets");
    S->panel_offset[s + 1] = S->panel_offset[s] + k * m;
    S->nnz_l += trapezoid_entries(k, m);
    for (offset_t c = 0; c < k; ++c) {
      const double cj = static_cast<double>(m - c);
      S->flops += cj * cj;
    }
  }
  S->solve_flops = 4.0 * static_cast<double>(S->nnz_l) - 2.0 * n;
  S->symbolic_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - ordered).count();
}

}  // namespace

}  // namespace spade
