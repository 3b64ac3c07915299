// Static pivoting for unsymmetric matrices: a maximum-product bipartite matching of rows to columns, with
// the row and column scalings that come from its dual variables (the "maximize the product of the diagonal"
// job, job 5, of Duff and Koster's MC64).
//
// For a square A, the matching is the row permutation sigma that maximizes prod_j |a(sigma(j), j)|, found as
// a minimum-cost perfect matching with the cost c(i, j) = log a_j - log |a(i, j)|, a_j = max_i |a(i, j)| the
// largest magnitude of column j, by shortest augmenting paths (Dijkstra on reduced costs, one search per
// column) that keep dual variables u (rows) and v (columns) with c(i, j) - u_i - v_j >= 0 on every entry and
// = 0 on the matched ones. The scalings Dr = exp(u), Dc = exp(v) / a then make every entry of Dr A Dc at
// most 1 in magnitude and the matched entries exactly 1 (up to rounding).
//
// Reference: I. S. Duff and J. Koster, "On algorithms for permuting large entries to the diagonal of a
// sparse matrix", SIAM J. Matrix Anal. Appl. 22(4), 2001, sections 4 and 5 (cost, duals and scaling).
// MC64 itself (HSL) is not used: Debian's SuperLU and SuperLU_DIST ship mc64ad only as a stub that aborts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "spade/error.hpp"
#include "spade/sparse_matrix.hpp"

namespace spade {

/// A square matrix has no perfect matching on its nonzero entries (it is singular for any values on that
/// pattern). index() (from NumericalError, kind() == singular) is the row or column, 0-based, that side()
/// says: an empty row, an empty column, or a column that some maximum matching leaves unmatched (one of k
/// columns whose nonzero entries lie in only k - 1 rows; the message gives k).
class StructurallySingular : public NumericalError {
 public:
  enum class Side { row, column };
  StructurallySingular(Side side, std::int64_t index, const std::string& message)
      : NumericalError(Kind::singular, index, message), side_(side) {}
  Side side() const noexcept { return side_; }

 private:
  Side side_;
};

/// The result of maximum_product_matching for an n x n matrix A (host memory, 0-based).
struct MaximumProductMatching {
  /// Size n, a permutation of 0..n-1: row_perm[j] is the original row matched to column j, so the row-
  /// permuted matrix P A has (P A)(j, k) = A(row_perm[j], k) and its diagonal is A(row_perm[j], j) (the
  /// convention of fill_reducing_ordering: position k holds original index row_perm[k]).
  std::vector<index_t> row_perm;
  /// Size n, Dr, indexed by original row: positive, finite and normal.
  std::vector<double> row_scale;
  /// Size n, Dc, indexed by column: positive, finite and normal.
  std::vector<double> col_scale;
};

/// Maximum-product matching of the square matrix A with the scalings of its duals (see the file comment):
/// with B(i, j) = row_scale[i] * A(i, j) * col_scale[j], |B(i, j)| <= 1 for every entry and
/// |B(row_perm[j], j)| = 1 for every column j, both up to a few ulps of rounding in exp and log. An entry
/// whose value is 0 is not an edge of the bipartite graph. Time O(n (nnz + n) log n) in the worst case.
/// Throws InvalidInput for a non-square A or a value that is NaN or infinite (naming the entry);
/// StructurallySingular when A has an empty row or column (after ignoring zero values) or no perfect
/// matching; NumericalError (kind not_finite, index = the row or column named in the message) when a
/// scaling factor is outside the normal range of double (a matrix graded beyond 1e-308..1e308 along a
/// matching, which no diagonal scaling in double can balance).
MaximumProductMatching maximum_product_matching(const SparseMatrix& A);

/// The row permutation of A: B(k, j) = A(row_perm[k], j), B of the same shape as A, entries (explicit zeros
/// included) kept. Throws InvalidInput when row_perm is not a permutation of 0..A.rows()-1.
SparseMatrix permute_rows(const SparseMatrix& A, const std::vector<index_t>& row_perm);

/// The scaled matrix B(i, j) = row_scale[i] * A(i, j) * col_scale[j], same pattern. Throws InvalidInput
/// when the lengths are not A.rows() and A.cols().
SparseMatrix scale(const SparseMatrix& A, const std::vector<double>& row_scale, const std::vector<double>& col_scale);

/// How large the diagonal of a square A is relative to its columns: ratio_j = |a_jj| / max_i |a_ij|, taken
/// as 0 when a_jj is not stored, is 0, or column j has no nonzero value. A maximum-product matching
/// maximizes the geometric mean over the row permutations; its scaling makes every ratio 1.
struct DiagonalMagnitude {
  double min_ratio = 0;        ///< min_j ratio_j (0 for n = 0)
  double geometric_mean = 0;   ///< (prod_j ratio_j)^(1 / n): 0 when any ratio is 0 (and for n = 0)
  index_t zero_diagonals = 0;  ///< columns j with ratio_j = 0 (a_jj not stored, or 0)
};

/// The diagonal magnitude of the square matrix A. Throws InvalidInput for a non-square A or a value that is
/// NaN or infinite (naming the entry).
DiagonalMagnitude diagonal_magnitude(const SparseMatrix& A);

}  // namespace spade
