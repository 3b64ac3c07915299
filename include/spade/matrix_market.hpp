// Matrix Market I/O (https://math.nist.gov/MatrixMarket/formats.html), plain `.mtx` or gzip `.mtx.gz`.
//
// Sparse input: `%%MatrixMarket matrix coordinate {real|integer|pattern} {general|symmetric|skew-symmetric}`.
// Indices in the file are 1-based; the result is a 0-based spade::SparseMatrix holding the whole matrix
// (a symmetric or skew-symmetric file's stored triangle is mirrored). Duplicate entries are summed;
// explicit zeros are kept as entries. Complex and hermitian files are rejected.
// Dense input/output (right-hand sides, solutions): `%%MatrixMarket matrix array real general`,
// column-major.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "spade/sparse_matrix.hpp"

namespace spade {

/// What to do with a `pattern` file, which has no values.
enum class PatternValues {
  reject,     ///< throw InvalidInput (the default: a solver should not invent numbers silently)
  ones,       ///< every stored entry becomes 1
  laplacian,  ///< graph Laplacian of the symmetrized pattern, shifted to be SPD: a_ij = -1 for each
              ///< off-diagonal entry, a_ii = (number of off-diagonal entries in row i) + 1
              ///< (the convention of ../shared/matrices/*_lap.mtx)
};

struct MatrixMarketOptions {
  PatternValues pattern_values = PatternValues::reject;
};

/// What the header and size line of a file said (filled by read_matrix_market when asked).
struct MatrixMarketInfo {
  std::string field;     ///< "real", "integer" or "pattern"
  std::string symmetry;  ///< "general", "symmetric" or "skew-symmetric"
  std::int64_t rows = 0, cols = 0;
  std::int64_t stored_entries = 0;  ///< entries listed in the file
};

/// Reads a sparse coordinate matrix from `path` (gzip-compressed when it starts with the gzip magic bytes,
/// whatever its name). Throws InvalidInput with the file name and line number for a malformed or truncated
/// file (bad banner, bad size line, too few or too many entries, an unparsable number, an index out of
/// range, an entry above the diagonal of a symmetric file), a corrupt gzip stream, a pattern file under
/// PatternValues::reject, or a NaN/Inf value; ResourceError if the file cannot be opened or the sizes
/// overflow 32-bit indices.
SparseMatrix read_matrix_market(const std::string& path, const MatrixMarketOptions& options = {},
                                MatrixMarketInfo* info = nullptr);

/// Same, from the text of a file held in memory (`name` is used in error messages).
SparseMatrix parse_matrix_market(const std::string& text, const std::string& name = "<memory>",
                                 const MatrixMarketOptions& options = {}, MatrixMarketInfo* info = nullptr);

/// A dense column-major matrix, host memory: entry (i, j) is values[i + j * rows].
struct DenseMatrix {
  std::int64_t rows = 0, cols = 0;
  std::vector<double> values;
};

/// Reads a dense matrix: an `array real|integer general` file, or a `coordinate` file (missing entries are
/// zero). Same errors as read_matrix_market.
DenseMatrix read_dense_matrix_market(const std::string& path);

/// Writes `m` as `%%MatrixMarket matrix array real general` with 17 significant digits (round-trips
/// doubles exactly). Throws ResourceError if the file cannot be written.
void write_dense_matrix_market(const std::string& path, const DenseMatrix& m);

}  // namespace spade
