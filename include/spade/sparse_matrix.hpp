// spade::SparseMatrix: a real sparse matrix in compressed sparse column (CSC) form, 0-based.
//
// Storage is always the whole matrix (both triangles of a symmetric matrix are stored); routines that
// need only one triangle document which one they read. Row indices are 32-bit (`index_t`), so n is at
// most 2^31 - 1; column pointers are 64-bit (`offset_t`), so nnz may exceed 2^31.
#pragma once

#include <cstdint>
#include <vector>

namespace spade {

using index_t = std::int32_t;   ///< row / column index, 0-based
using offset_t = std::int64_t;  ///< position in an index or value array

/// A real CSC matrix whose invariants hold after construction: col_ptr has ncols+1 entries starting at 0
/// and non-decreasing, row indices lie in [0, nrows) and are strictly increasing inside each column, and
/// values has one entry per row index. Values may be any double, NaN included: checks for finite values
/// are made by the routines that need them (the factorization), so a caller can still inspect such data.
class SparseMatrix {
 public:
  /// The empty 0 x 0 matrix.
  SparseMatrix() : col_ptr_(1, 0) {}

  /// Takes the three CSC arrays (host memory) and validates them.
  /// Throws InvalidInput naming the first violated invariant (negative sizes, bad col_ptr, an index out
  /// of range, unsorted or duplicate row indices in a column, size mismatch).
  SparseMatrix(index_t nrows, index_t ncols, std::vector<offset_t> col_ptr, std::vector<index_t> row_ind,
               std::vector<double> values);

  /// Builds a matrix from 0-based coordinate triplets (any order); duplicate entries are summed, as the
  /// Matrix Market convention and CHOLMOD do. Explicit zeros are kept as entries.
  /// Throws InvalidInput for an index out of range or arrays of different lengths; ResourceError if
  /// nrows or ncols is negative or too large for index_t.
  static SparseMatrix from_triplets(std::int64_t nrows, std::int64_t ncols, const std::vector<std::int64_t>& rows,
                                    const std::vector<std::int64_t>& cols, const std::vector<double>& values);

  index_t rows() const noexcept { return nrows_; }
  index_t cols() const noexcept { return ncols_; }
  offset_t nnz() const noexcept { return col_ptr_.back(); }
  bool is_square() const noexcept { return nrows_ == ncols_; }

  const std::vector<offset_t>& col_ptr() const noexcept { return col_ptr_; }
  const std::vector<index_t>& row_ind() const noexcept { return row_ind_; }
  const std::vector<double>& values() const noexcept { return values_; }
  /// Mutable values (same pattern): for refactorization with new numbers.
  std::vector<double>& values() noexcept { return values_; }

  /// The transpose (a new CSC matrix, sorted).
  SparseMatrix transpose() const;

  /// True when the matrix is square and equal to its transpose, pattern and values exactly.
  bool is_symmetric() const;

  /// y := A x (host), x of length cols(), y of length rows().
  void multiply(const double* x, double* y) const;

 private:
  index_t nrows_ = 0;
  index_t ncols_ = 0;
  std::vector<offset_t> col_ptr_;
  std::vector<index_t> row_ind_;
  std::vector<double> values_;
};

}  // namespace spade
