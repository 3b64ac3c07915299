// Small SPD problems shared by the solve tests, beside the library's grid Laplacians (generators.hpp).
#pragma once

#include <cstdint>
#include <vector>

#include "spade/sparse_matrix.hpp"

namespace spade::testing {

/// The n x n tridiagonal SPD matrix with 2 on the diagonal and -1 beside it. With the natural ordering and
/// no supernode relaxation its supernodes are its columns (the last two merge), in one chain.
inline SparseMatrix tridiagonal(index_t n) {
  std::vector<std::int64_t> r, c;
  std::vector<double> v;
  for (index_t i = 0; i < n; ++i) {
    r.push_back(i), c.push_back(i), v.push_back(2.0);
    if (i + 1 < n) {
      r.push_back(i + 1), c.push_back(i), v.push_back(-1.0);
      r.push_back(i), c.push_back(i + 1), v.push_back(-1.0);
    }
  }
  return SparseMatrix::from_triplets(n, n, r, c, v);
}

/// diag(A, B) for square A and B: a matrix whose elimination forest has (at least) two trees.
inline SparseMatrix block_diagonal(const SparseMatrix& A, const SparseMatrix& B) {
  std::vector<std::int64_t> r, c;
  std::vector<double> v;
  const SparseMatrix* blocks[2] = {&A, &B};
  index_t shift = 0;
  for (const SparseMatrix* M : blocks) {
    for (index_t j = 0; j < M->cols(); ++j)
      for (offset_t p = M->col_ptr()[j]; p < M->col_ptr()[j + 1]; ++p) {
        r.push_back(M->row_ind()[p] + shift);
        c.push_back(j + shift);
        v.push_back(M->values()[p]);
      }
    shift += M->cols();
  }
  return SparseMatrix::from_triplets(shift, shift, r, c, v);
}

}  // namespace spade::testing
