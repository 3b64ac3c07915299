// Fill-reducing orderings (see include/spade/ordering.hpp): the pattern of A + A^T without its diagonal is
// built once as an adjacency structure (sorted, no duplicates) and handed to AMD or METIS; COLAMD gets A's own
// column pattern.
#include "spade/ordering.hpp"

#include <amd.h>
#include <colamd.h>
#include <metis.h>

#include <algorithm>
#include <limits>
#include <numeric>
#include <type_traits>

#include "spade/error.hpp"

namespace spade {
namespace {

/// Undirected graph of a square matrix: the neighbours of vertex j are adj[ptr[j] .. ptr[j+1]), sorted.
struct AdjacencyGraph {
  std::vector<offset_t> ptr;  ///< size n + 1
  std::vector<index_t> adj;   ///< size ptr[n]: the off-diagonal pattern of A + A^T, column by column
};

AdjacencyGraph symmetrized_graph(const SparseMatrix& A) {
  const index_t n = A.cols();
  const auto& ap = A.col_ptr();
  const auto& ai = A.row_ind();
  // Pattern of A^T: column j of A^T lists the columns of row j of A, in increasing order.
  std::vector<offset_t> tp(static_cast<std::size_t>(n) + 1, 0);
  for (const index_t i : ai) ++tp[i + 1];
  std::partial_sum(tp.begin(), tp.end(), tp.begin());
  std::vector<index_t> ti(ai.size());
  {
    std::vector<offset_t> next(tp.begin(), tp.end() - 1);
    for (index_t j = 0; j < n; ++j)
      for (offset_t p = ap[j]; p < ap[j + 1]; ++p) ti[next[ai[p]]++] = j;
  }
  // Merge column j of A with column j of A^T, dropping the diagonal and duplicates. Pass 0 counts, pass 1
  // fills.
  AdjacencyGraph g;
  g.ptr.assign(static_cast<std::size_t>(n) + 1, 0);
  for (int pass = 0; pass < 2; ++pass) {
    if (pass == 1) {
      std::partial_sum(g.ptr.begin(), g.ptr.end(), g.ptr.begin());
      g.adj.resize(static_cast<std::size_t>(g.ptr[n]));
    }
    for (index_t j = 0; j < n; ++j) {
      offset_t p = ap[j], q = tp[j], out = pass == 1 ? g.ptr[j] : 0;
      while (p < ap[j + 1] || q < tp[j + 1]) {
        index_t i;
        if (q == tp[j + 1] || (p < ap[j + 1] && ai[p] < ti[q]))
          i = ai[p++];
        else if (p == ap[j + 1] || ti[q] < ai[p])
          i = ti[q++];
        else {
          i = ai[p++];
          ++q;
        }
        if (i == j) continue;
        if (pass == 0)
          ++g.ptr[j + 1];
        else
          g.adj[out++] = i;
      }
    }
  }
  return g;
}

/// Throws ResourceError unless perm is a permutation of 0..n-1 (a library returned something invalid).
void check_permutation(const std::vector<index_t>& perm, index_t n, const char* library) {
  std::vector<char> seen(static_cast<std::size_t>(n), 0);
  bool valid = perm.size() == static_cast<std::size_t>(n);
  for (std::size_t k = 0; valid && k < perm.size(); ++k) {
    valid = perm[k] >= 0 && perm[k] < n && !seen[perm[k]];
    if (valid) seen[perm[k]] = 1;
  }
  if (!valid) throw ResourceError(std::string(library) + " returned an ordering that is not a permutation");
}

std::vector<index_t> amd_ordering(const AdjacencyGraph& g, index_t n) {
  double control[AMD_CONTROL], info[AMD_INFO];
  amd_defaults(control);
  std::vector<index_t> perm(static_cast<std::size_t>(n));
  long status;
  if (g.ptr[n] <= std::numeric_limits<int>::max()) {
    static_assert(std::is_same_v<index_t, int>, "amd_order takes int row indices");
    const std::vector<int> ptr(g.ptr.begin(), g.ptr.end());
    status = amd_order(n, ptr.data(), g.adj.data(), perm.data(), control, info);
  } else {
    const std::vector<SuiteSparse_long> ptr(g.ptr.begin(), g.ptr.end()), adj(g.adj.begin(), g.adj.end());
    std::vector<SuiteSparse_long> p(static_cast<std::size_t>(n));
    status = amd_l_order(n, ptr.data(), adj.data(), p.data(), control, info);
    perm.assign(p.begin(), p.end());
  }
  if (status != AMD_OK && status != AMD_OK_BUT_JUMBLED)
    throw ResourceError("AMD failed with status " + std::to_string(status) +
                        (status == AMD_OUT_OF_MEMORY ? " (AMD_OUT_OF_MEMORY)"
                         : status == AMD_INVALID     ? " (AMD_INVALID)"
                                                     : ""));
  return perm;
}

std::vector<index_t> metis_ordering(const AdjacencyGraph& g, index_t n) {
  if (g.ptr[n] > std::numeric_limits<idx_t>::max())
    throw ResourceError("METIS: the graph has " + std::to_string(g.ptr[n]) +
                        " adjacency entries, more than its idx_t holds (" +
                        std::to_string(std::numeric_limits<idx_t>::max()) + ")");
  idx_t nvtxs = n;
  std::vector<idx_t> xadj(g.ptr.begin(), g.ptr.end());
  std::vector<idx_t> adjncy(g.adj.begin(), g.adj.end());
  std::vector<idx_t> perm(static_cast<std::size_t>(n)), iperm(static_cast<std::size_t>(n));
  idx_t options[METIS_NOPTIONS];
  METIS_SetDefaultOptions(options);
  const int status = METIS_NodeND(&nvtxs, xadj.data(), adjncy.data(), nullptr, options, perm.data(), iperm.data());
  if (status != METIS_OK)
    throw ResourceError("METIS_NodeND failed with status " + std::to_string(status) +
                        (status == METIS_ERROR_INPUT    ? " (METIS_ERROR_INPUT)"
                         : status == METIS_ERROR_MEMORY ? " (METIS_ERROR_MEMORY)"
                                                        : " (METIS_ERROR)"));
  return std::vector<index_t>(perm.begin(), perm.end());
}

// COLAMD on the columns of A (Davis, Gilbert, Larimore, Ng 2004). colamd overwrites its input, so it gets a
// copy of the row indices with the elbow room colamd_recommended asks for; p returns the ordering.
std::vector<index_t> colamd_ordering(const SparseMatrix& A) {
  const index_t n = A.cols();
  double knobs[COLAMD_KNOBS];
  colamd_set_defaults(knobs);
  const offset_t nnz = A.nnz();
  int status = 0;
  std::vector<index_t> perm(static_cast<std::size_t>(n));
  if (nnz <= std::numeric_limits<int>::max() / 3) {  // colamd_recommended's elbow room fits in an int
    static_assert(std::is_same_v<index_t, int>, "colamd takes int row indices");
    int stats[COLAMD_STATS];
    const std::size_t len = colamd_recommended(static_cast<int>(nnz), n, n);
    std::vector<int> rows(len), p(A.col_ptr().begin(), A.col_ptr().end());
    std::copy(A.row_ind().begin(), A.row_ind().end(), rows.begin());
    const int ok = colamd(n, n, static_cast<int>(len), rows.data(), p.data(), knobs, stats);
    status = ok ? stats[COLAMD_STATUS] : std::min(stats[COLAMD_STATUS], -1);
    std::copy(p.begin(), p.end() - 1, perm.begin());
  } else {
    SuiteSparse_long stats[COLAMD_STATS];
    const std::size_t len = colamd_l_recommended(nnz, n, n);
    if (len == 0) throw ResourceError("COLAMD: the matrix is too large for its workspace");
    std::vector<SuiteSparse_long> rows(len), p(A.col_ptr().begin(), A.col_ptr().end());
    std::copy(A.row_ind().begin(), A.row_ind().end(), rows.begin());
    const SuiteSparse_long ok = colamd_l(n, n, static_cast<SuiteSparse_long>(len), rows.data(), p.data(), knobs, stats);
    status = ok ? static_cast<int>(stats[COLAMD_STATUS]) : std::min(static_cast<int>(stats[COLAMD_STATUS]), -1);
    std::copy(p.begin(), p.end() - 1, perm.begin());
  }
  if (status < 0)
    throw ResourceError("COLAMD failed with status " + std::to_string(status) +
                        (status == COLAMD_ERROR_out_of_memory ? " (COLAMD_ERROR_out_of_memory)" : ""));
  return perm;
}

}  // namespace

OrderingMethod parse_ordering_method(const std::string& name) {
  if (name == "natural") return OrderingMethod::natural;
  if (name == "amd") return OrderingMethod::amd;
  if (name == "metis") return OrderingMethod::metis;
  if (name == "colamd") return OrderingMethod::colamd;
  throw InvalidInput("unknown ordering method '" + name + "' (valid: natural, amd, metis, colamd)");
}

std::string to_string(OrderingMethod method) {
  switch (method) {
    case OrderingMethod::natural: return "natural";
    case OrderingMethod::amd: return "amd";
    case OrderingMethod::metis: return "metis";
    case OrderingMethod::colamd: return "colamd";
  }
  throw InvalidInput("to_string: invalid OrderingMethod value " + std::to_string(static_cast<int>(method)));
}

std::vector<index_t> fill_reducing_ordering(const SparseMatrix& A, OrderingMethod method) {
  if (!A.is_square())
    throw InvalidInput("fill_reducing_ordering: the matrix must be square, got " + std::to_string(A.rows()) +
                       " x " + std::to_string(A.cols()));
  const index_t n = A.cols();
  std::vector<index_t> perm(static_cast<std::size_t>(n));
  std::iota(perm.begin(), perm.end(), 0);
  if (n <= 1 || method == OrderingMethod::natural) return perm;
  const AdjacencyGraph g = symmetrized_graph(A);
  if (g.ptr[n] == 0) return perm;  // no off-diagonal entries: no order has fill (and AMD rejects an empty Ai)
  switch (method) {
    case OrderingMethod::natural:
      return perm;
    case OrderingMethod::amd:
      perm = amd_ordering(g, n);
      check_permutation(perm, n, "AMD");
      return perm;
    case OrderingMethod::metis:
      perm = metis_ordering(g, n);
      check_permutation(perm, n, "METIS");
      return perm;
    case OrderingMethod::colamd:
      perm = colamd_ordering(A);
      check_permutation(perm, n, "COLAMD");
      return perm;
  }
  throw InvalidInput("fill_reducing_ordering: invalid OrderingMethod value " +
                     std::to_string(static_cast<int>(method)));
}

std::vector<index_t> inverse_permutation(const std::vector<index_t>& perm) {
  const std::size_t n = perm.size();
  std::vector<index_t> iperm(n, -1);
  for (std::size_t k = 0; k < n; ++k) {
    const index_t i = perm[k];
    if (i < 0 || static_cast<std::size_t>(i) >= n || iperm[i] != -1)
      throw InvalidInput("inverse_permutation: perm is not a permutation of 0.." + std::to_string(n - 1) +
                         " (perm[" + std::to_string(k) + "] = " + std::to_string(i) + ")");
    iperm[i] = static_cast<index_t>(k);
  }
  return iperm;
}

}  // namespace spade
