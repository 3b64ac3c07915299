// Symbolic analysis for the supernodal Cholesky factorization P A P^T = L L^T.
//
// The analysis reads only the pattern of A. It is done once per pattern and gives an immutable
// SymbolicFactor that numeric factorizations (and refactorizations with new values) share.
//
// The steps, each a named routine below so it can be tested on its own:
//   fill-reducing ordering (ordering.hpp) -> etree (Liu 1986) -> postorder -> column counts
//   (Gilbert, Ng and Peyton 1994) -> fundamental supernodes -> relaxed amalgamation (as CHOLMOD's
//   cholmod_super_symbolic, Ashcraft and Grimes 1989) -> supernodal row structure and assembly tree.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "spade/ordering.hpp"
#include "spade/sparse_matrix.hpp"

namespace spade {

/// Elimination tree of a symmetric matrix, reading only the entries of `A` strictly below the diagonal
/// (the lower triangle; A must be square, its upper triangle is ignored). Returns parent[j] = the parent
/// of column j, or -1 for a root. Liu's algorithm with path compression (Liu 1986), O(nnz(A) log n).
/// Throws InvalidInput if A is not square.
std::vector<index_t> etree(const SparseMatrix& A);

/// Postorder of a forest given by `parent` (parent[j] > j is not required). Returns post with
/// post[k] = the k-th node in postorder; children are visited in increasing index order, so a
/// postordered tree is numbered children-before-parents with every subtree contiguous.
/// Throws InvalidInput if `parent` is not a forest (an out-of-range parent or a cycle).
std::vector<index_t> postorder(const std::vector<index_t>& parent);

/// Column counts of the Cholesky factor: col_counts[j] = nnz(L(:, j)) including the diagonal, for the
/// matrix whose strictly lower triangle is read from `A` (upper ignored), given its etree and a postorder
/// of it. Gilbert, Ng and Peyton, "An efficient algorithm to compute row and column counts for sparse
/// Cholesky factorization", SIAM J. Matrix Anal. Appl. 15(4), 1994: O(nnz(A) α(nnz, n)).
std::vector<index_t> col_counts(const SparseMatrix& A, const std::vector<index_t>& parent,
                                const std::vector<index_t>& post);

/// Supernode amalgamation rule (CHOLMOD's defaults, `Common->nrelax` and `Common->zrelax`). A child
/// supernode c whose columns come just before those of its parent s is merged into s when the merged
/// supernode, with k columns and a fraction z of explicit zeros in its lower trapezoid, satisfies
///   k <= nrelax[0], or (k <= nrelax[1] and z < zrelax[0]), or (k <= nrelax[2] and z < zrelax[1]),
///   or z < zrelax[2].
/// Relaxed supernodes trade a few stored zeros for fewer, larger dense blocks (Ashcraft and Grimes 1989).
struct SupernodeOptions {
  index_t nrelax[3] = {4, 16, 48};
  double zrelax[3] = {0.8, 0.1, 0.05};
  bool relax = true;  ///< false: fundamental supernodes only
};

struct AnalyzeOptions {
  /// Fill-reducing ordering; empty means automatic: AMD, and METIS nested dissection as well when AMD's
  /// predicted factor is both fill-heavy and flop-heavy (nnz(L) >= 5 nnz(tril(A)) and flops >= 500 nnz(L),
  /// the rule of CHOLMOD's default strategy); then the ordering with the smaller predicted nnz(L) is kept.
  std::optional<OrderingMethod> ordering;
  SupernodeOptions supernodes;
};

/// The result of the symbolic analysis: immutable, shared by every NumericFactor built from it.
///
/// Numbering: the factored matrix is C = P A P^T with C(k, l) = A(perm[k], perm[l]); `perm` already
/// includes the etree postorder, so supernodes are contiguous ranges of columns of C and children are
/// numbered before their parents. All indices are 0-based.
struct SymbolicFactor {
  index_t n = 0;
  OrderingMethod ordering = OrderingMethod::natural;  ///< the method that produced perm
  std::vector<index_t> perm;                          ///< perm[k] = original index of column k of C
  std::vector<index_t> iperm;                         ///< iperm[perm[k]] = k
  std::vector<index_t> parent;                        ///< etree of C (postordered): parent[j] > j or -1
  std::vector<index_t> col_counts;                    ///< nnz of each column of L, diagonal included
                                                      ///< (fundamental, before relaxation)

  // Supernodes: supernode s holds columns supernode_begin[s] .. supernode_begin[s+1]-1 of C. Its panel in
  // the numeric factor is a dense column-major block with `supernode_rows(s)` rows: first its own columns
  // (the diagonal block), then the rows below, listed in row_indices[row_ptr[s] .. row_ptr[s+1]), ascending.
  index_t num_supernodes = 0;
  std::vector<index_t> supernode_begin;  ///< size num_supernodes + 1
  std::vector<offset_t> row_ptr;         ///< size num_supernodes + 1
  std::vector<index_t> row_indices;      ///< rows of each supernode, its own columns first
  std::vector<index_t> supernode_of;     ///< supernode_of[j] = supernode holding column j
  std::vector<index_t> super_parent;     ///< assembly tree: parent supernode, or -1 for a root
  std::vector<offset_t> panel_offset;    ///< offset of supernode s's panel in the values array, size +1

  // Where each entry of the lower triangle of C comes from, for numeric assembly: for column j of C, the
  // entries c_ptr[j] .. c_ptr[j+1]-1 have row c_rows[p] >= j and take the value A.values()[c_source[p]].
  std::vector<offset_t> c_ptr;
  std::vector<index_t> c_rows;
  std::vector<offset_t> c_source;
  std::vector<offset_t> a_col_ptr;  ///< pattern of the analyzed A: a factorization checks that its
  std::vector<index_t> a_row_ind;   ///< matrix has exactly this pattern

  offset_t nnz_l = 0;        ///< entries of L as stored (relaxed supernodes, explicit zeros included)
  double flops = 0;          ///< floating-point operations of the numeric factorization, sum_j c_j^2 over
                             ///< the stored columns (c_j = stored nnz of column j of L), as CHOLMOD counts
  double solve_flops = 0;    ///< operations of one forward plus backward solve: 4 nnz(L) - 2 n
  double ordering_seconds = 0;  ///< wall time of the fill-reducing ordering(s) and their fill prediction
  double symbolic_seconds = 0;  ///< wall time of the rest of the analysis

  index_t supernode_cols(index_t s) const { return supernode_begin[s + 1] - supernode_begin[s]; }
  index_t supernode_rows(index_t s) const { return static_cast<index_t>(row_ptr[s + 1] - row_ptr[s]); }
};

/// Analyzes a square matrix with a symmetric pattern: reads both triangles of A's pattern (values are not
/// read). Throws InvalidInput if A is not square or its pattern is not symmetric, ResourceError if
/// nnz(L) or the panel offsets would overflow 64-bit offsets or memory cannot be had.
std::shared_ptr<const SymbolicFactor> analyze(const SparseMatrix& A, const AnalyzeOptions& options = {});

/// analyze() with a fill-reducing ordering computed elsewhere (the LU's COLAMD on its unsymmetric matrix,
/// lu.hpp): perm (length n, perm[k] = the original index of the k-th pivot) is composed with its etree
/// postorder as analyze() composes its own; `method` is what SymbolicFactor::ordering records. Same errors
/// as analyze(), and InvalidInput when perm is not a permutation of 0..n-1.
std::shared_ptr<const SymbolicFactor> analyze(const SparseMatrix& A, const std::vector<index_t>& perm,
                                              OrderingMethod method, const SupernodeOptions& supernodes = {});

}  // namespace spade
