// Matrix Market I/O (https://math.nist.gov/MatrixMarket/formats.html), plain `.mtx` or gzip `.mtx.gz`.
//
// Sparse input: `%%MatrixMarket matrix coordinate {real|integer|pattern} {general|symmetric|skew-symmetric}`.
// Indices in the file are 1-based; the result is a 0-based spade::SparseMatrix holding the whole matrix
// (a symmetric or skew-symmetric file's stored triangle is mirrored). Duplicate entries are summed;
// explicit zeros are kept as entries. Complex and hermitian files are rejected.
// Dense input/output (right-hand sides, solutions): `%%MatrixMarket matrix array real general`,
// column-major.
//
// Parsing rules: the banner's words are case-insensitive; blank lines and `%` comment lines may appear
// anywhere after the banner; tokens are separated by spaces or tabs, lines end in LF or CRLF. The lower
// triangle (i >= j) is what a symmetric file stores; a skew-symmetric one stores the strict lower triangle.
// Numbers may carry a leading '+'; integer-field values must be integers; a real value too small for a
// double rounds to zero or a subnormal, one too large is rejected as not finite. Error messages have the
// form `<file>:<line>: <what>` (line numbers 1-based), e.g. `A.mtx:7: row index 12 out of range [1, 10]`.
#pragma once

#include <cstdint>
#include <limits>
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
              ///< (the convention of ../shared/matrices/*_lap.mtx); stored diagonal entries are
              ///< ignored, and the matrix must be square (InvalidInput otherwise)
};

struct MatrixMarketOptions {
  PatternValues pattern_values = PatternValues::reject;
  /// Rows or columns above this are refused (ResourceError) before anything is allocated: the compressed
  /// columns take 8 bytes per column whatever the number of entries. The default is the index limit.
  std::int64_t max_dimension = std::numeric_limits<index_t>::max();
};

/// What the header and size line of a file said (filled by read_matrix_market when asked, on success only).
struct MatrixMarketInfo {
  std::string field;     ///< "real", "integer" or "pattern"
  std::string symmetry;  ///< "general", "symmetric" or "skew-symmetric"
  std::int64_t rows = 0, cols = 0;
  std::int64_t stored_entries = 0;  ///< entries listed in the file
};

/// Reads a sparse coordinate matrix from `path` (gzip-compressed when it starts with the gzip magic bytes,
/// whatever its name). Throws InvalidInput with the file name and line number for a malformed or truncated
/// file (bad banner, bad size line, too few or too many entries, an unparsable number, an index out of
/// range, an entry above the diagonal of a symmetric or skew-symmetric file, a diagonal entry of a
/// skew-symmetric file), duplicate entries whose values sum to Inf, a corrupt gzip stream (zlib's message)
/// or one that inflates to more than 100 times its compressed size plus 64 MiB (a gzip bomb), an unsupported header (complex, hermitian,
/// an unknown word, or the dense `array` format), a pattern file under PatternValues::reject, or a NaN/Inf
/// value; ResourceError if the file cannot be opened or read, or rows or cols exceed 2^31 - 1 or
/// options.max_dimension. Input text quoted in a message is cut and escaped (spade::quote).
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

/// Shape requirements checked after the size line, before anything is allocated.
struct DenseMatrixMarketOptions {
  std::int64_t rows = -1;  ///< the number of rows the caller needs (InvalidInput otherwise); -1: any
  /// rows * cols above this is refused (ResourceError): a coordinate file may declare a huge matrix in a
  /// few bytes, and its missing entries are zeros that must be stored.
  std::int64_t max_entries = std::numeric_limits<std::int64_t>::max();
};

/// Reads a dense matrix: an `array real|integer general` file, or a `coordinate` file (real or integer, any
/// symmetry; missing entries are zero, duplicates summed). Same errors as read_matrix_market, except that a
/// pattern file is always rejected, a row count other than options.rows is InvalidInput, and the size
/// limit is options.max_entries and the memory for rows * cols doubles (ResourceError).
DenseMatrix read_dense_matrix_market(const std::string& path, const DenseMatrixMarketOptions& options = {});

/// Same, from the text of a file held in memory (`name` is used in error messages).
DenseMatrix parse_dense_matrix_market(const std::string& text, const std::string& name = "<memory>",
                                      const DenseMatrixMarketOptions& options = {});

/// Writes `m` as `%%MatrixMarket matrix array real general` with 17 significant digits (round-trips
/// doubles exactly; NaN and Inf are written as `nan` and `inf`, which the readers reject). Throws
/// InvalidInput if m.values does not hold rows * cols entries, ResourceError if the file cannot be written.
void write_dense_matrix_market(const std::string& path, const DenseMatrix& m);

}  // namespace spade
