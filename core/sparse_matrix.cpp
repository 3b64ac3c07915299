#include "spade/sparse_matrix.hpp"

#include <algorithm>
#include <limits>
#include <numeric>
#include <string>

#include "spade/error.hpp"

namespace spade {

SparseMatrix::SparseMatrix(index_t nrows, index_t ncols, std::vector<offset_t> col_ptr,
                           std::vector<index_t> row_ind, std::vector<double> values)
    : nrows_(nrows), ncols_(ncols), col_ptr_(std::move(col_ptr)), row_ind_(std::move(row_ind)),
      values_(std::move(values)) {
  if (nrows < 0 || ncols < 0) throw InvalidInput("SparseMatrix: negative dimension");
  if (col_ptr_.size() != static_cast<std::size_t>(ncols) + 1)
    throw InvalidInput("SparseMatrix: col_ptr must have ncols + 1 = " + std::to_string(ncols + 1) +
                       " entries, has " + std::to_string(col_ptr_.size()));
  if (col_ptr_[0] != 0) throw InvalidInput("SparseMatrix: col_ptr[0] must be 0");
  for (index_t j = 0; j < ncols; ++j)
    if (col_ptr_[j + 1] < col_ptr_[j])
      throw InvalidInput("SparseMatrix: col_ptr decreases at column " + std::to_string(j));
  const offset_t nz = col_ptr_.back();
  if (row_ind_.size() != static_cast<std::size_t>(nz) || values_.size() != static_cast<std::size_t>(nz))
    throw InvalidInput("SparseMatrix: row_ind and values must have nnz = " + std::to_string(nz) + " entries");
  for (index_t j = 0; j < ncols; ++j) {
    for (offset_t p = col_ptr_[j]; p < col_ptr_[j + 1]; ++p) {
      const index_t i = row_ind_[p];
      if (i < 0 || i >= nrows)
        throw InvalidInput("SparseMatrix: row index " + std::to_string(i) + " out of range in column " +
                           std::to_string(j));
      if (p > col_ptr_[j] && row_ind_[p - 1] >= i)
        throw InvalidInput("SparseMatrix: row indices of column " + std::to_string(j) +
                           " are not strictly increasing");
    }
  }
}

SparseMatrix SparseMatrix::from_triplets(std::int64_t nrows, std::int64_t ncols, const std::vector<std::int64_t>& rows,
                                         const std::vector<std::int64_t>& cols, const std::vector<double>& values) {
  constexpr std::int64_t max_index = std::numeric_limits<index_t>::max();
  if (nrows < 0 || ncols < 0) throw InvalidInput("SparseMatrix: negative dimension");
  if (nrows > max_index || ncols > max_index)
    throw ResourceError("SparseMatrix: dimension " + std::to_string(std::max(nrows, ncols)) +
                        " overflows 32-bit indices (at most " + std::to_string(max_index) + ")");
  if (rows.size() != cols.size() || rows.size() != values.size())
    throw InvalidInput("SparseMatrix: triplet arrays have different lengths");
  const std::size_t nz = rows.size();
  std::vector<offset_t> count(static_cast<std::size_t>(ncols) + 1, 0);
  for (std::size_t k = 0; k < nz; ++k) {
    if (rows[k] < 0 || rows[k] >= nrows || cols[k] < 0 || cols[k] >= ncols)
      throw InvalidInput("SparseMatrix: entry (" + std::to_string(rows[k]) + ", " + std::to_string(cols[k]) +
                         ") out of range for a " + std::to_string(nrows) + " x " + std::to_string(ncols) +
                         " matrix");
    ++count[cols[k] + 1];
  }
  std::partial_sum(count.begin(), count.end(), count.begin());
  // Bucket by column, then sort each column by row and sum duplicates.
  std::vector<std::pair<index_t, double>> entries(nz);
  std::vector<offset_t> next(count.begin(), count.end() - 1);
  for (std::size_t k = 0; k < nz; ++k)
    entries[next[cols[k]]++] = {static_cast<index_t>(rows[k]), values[k]};
  std::vector<offset_t> col_ptr(static_cast<std::size_t>(ncols) + 1, 0);
  std::vector<index_t> row_ind;
  std::vector<double> vals;
  row_ind.reserve(nz);
  vals.reserve(nz);
  for (std::int64_t j = 0; j < ncols; ++j) {
    auto first = entries.begin() + count[j], last = entries.begin() + count[j + 1];
    std::stable_sort(first, last, [](const auto& a, const auto& b) { return a.first < b.first; });
    for (auto it = first; it != last; ++it) {
      if (static_cast<offset_t>(row_ind.size()) > col_ptr[j] && row_ind.back() == it->first)
        vals.back() += it->second;
      else {
        row_ind.push_back(it->first);
        vals.push_back(it->second);
      }
    }
    col_ptr[j + 1] = static_cast<offset_t>(row_ind.size());
  }
  return SparseMatrix(static_cast<index_t>(nrows), static_cast<index_t>(ncols), std::move(col_ptr),
                      std::move(row_ind), std::move(vals));
}

SparseMatrix SparseMatrix::transpose() const {
  std::vector<offset_t> ptr(static_cast<std::size_t>(nrows_) + 1, 0);
  for (index_t i : row_ind_) ++ptr[i + 1];
  std::partial_sum(ptr.begin(), ptr.end(), ptr.begin());
  std::vector<index_t> ind(row_ind_.size());
  std::vector<double> val(values_.size());
  std::vector<offset_t> next(ptr.begin(), ptr.end() - 1);
  for (index_t j = 0; j < ncols_; ++j)
    for (offset_t p = col_ptr_[j]; p < col_ptr_[j + 1]; ++p) {
      const offset_t q = next[row_ind_[p]]++;
      ind[q] = j;
      val[q] = values_[p];
    }
  SparseMatrix t;
  t.nrows_ = ncols_;
  t.ncols_ = nrows_;
  t.col_ptr_ = std::move(ptr);
  t.row_ind_ = std::move(ind);
  t.values_ = std::move(val);
  return t;
}

bool SparseMatrix::is_symmetric() const {
  if (!is_square()) return false;
  const SparseMatrix t = transpose();
  return t.col_ptr_ == col_ptr_ && t.row_ind_ == row_ind_ && t.values_ == values_;
}

void SparseMatrix::multiply(const double* x, double* y) const {
  std::fill(y, y + nrows_, 0.0);
  for (index_t j = 0; j < ncols_; ++j) {
    const double xj = x[j];
    for (offset_t p = col_ptr_[j]; p < col_ptr_[j + 1]; ++p) y[row_ind_[p]] += values_[p] * xj;
  }
}

}  // namespace spade
