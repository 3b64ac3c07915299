// Matrix Market reader and writer (see include/spade/matrix_market.hpp for the contract).
//
// The whole file is read into memory (inflated first when it starts with the gzip magic bytes), then parsed
// line by line; every InvalidInput names the file and the 1-based line: `<file>:<line>: <what>`.
#include "spade/matrix_market.hpp"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <string_view>
#include <utility>

#include "spade/error.hpp"

namespace spade {
namespace {

constexpr std::int64_t max_index = std::numeric_limits<index_t>::max();
constexpr int max_gzip_ratio = 100;
constexpr double gzip_allowance = 64.0 * 1024 * 1024;

// ---- reading the file ------------------------------------------------------------------------------------

std::string read_file(const std::string& path) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!file) throw ResourceError("cannot open " + quote(path, 200) + ": " + std::strerror(errno));
  std::string bytes;
  char buffer[1 << 16];
  std::size_t got;
  while ((got = std::fread(buffer, 1, sizeof buffer, file.get())) > 0) bytes.append(buffer, got);
  if (std::ferror(file.get())) throw ResourceError("cannot read " + quote(path, 200) + ": " + std::strerror(errno));
  return bytes;
}

bool is_gzip(const std::string& bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
         static_cast<unsigned char>(bytes[1]) == 0x8b;
}

/// Inflates a gzip file held in memory, concatenated members included (as `gzip -d` does). Refuses to
/// inflate past max_gzip_ratio * compressed.size() + gzip_allowance bytes (a gzip bomb): Matrix Market text
/// compresses about 3-7 to 1, while deflate can reach about 1000 to 1.
std::string gunzip(const std::string& compressed, const std::string& path) {
  const std::string name = printable(path, 200);
  const double limit = max_gzip_ratio * static_cast<double>(compressed.size()) + gzip_allowance;
  struct Inflater {
    z_stream stream{};
    ~Inflater() { inflateEnd(&stream); }
  } z;
  if (inflateInit2(&z.stream, 16 + MAX_WBITS) != Z_OK)  // 16: expect a gzip header and trailer
    throw ResourceError(name + ": cannot initialize zlib: " + (z.stream.msg ? z.stream.msg : "out of memory"));
  // zlib counts bytes in 32-bit uInt: feed input and offer output in chunks of at most 1 GiB.
  constexpr std::size_t chunk = std::size_t{1} << 30;
  std::string out(std::max<std::size_t>(compressed.size() * 4, 1 << 16), '\0');
  std::size_t produced = 0, consumed = 0;
  for (;;) {
    if (z.stream.avail_in == 0 && consumed < compressed.size()) {
      const std::size_t n = std::min(chunk, compressed.size() - consumed);
      z.stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data() + consumed));
      z.stream.avail_in = static_cast<uInt>(n);
      consumed += n;
    }
    if (produced == out.size()) out.resize(std::min(out.size() * 2, static_cast<std::size_t>(limit) + 1));
    const std::size_t room = std::min(chunk, out.size() - produced);
    z.stream.next_out = reinterpret_cast<Bytef*>(out.data() + produced);
    z.stream.avail_out = static_cast<uInt>(room);
    const int status = inflate(&z.stream, Z_NO_FLUSH);
    produced += room - z.stream.avail_out;
    if (static_cast<double>(produced) > limit)
      throw InvalidInput(name + ": the gzip stream inflates to more than " + std::to_string(max_gzip_ratio) +
                         " times its " + std::to_string(compressed.size()) +
                         " compressed bytes (plus 64 MiB); refused as a likely gzip bomb");
    const bool input_left = z.stream.avail_in > 0 || consumed < compressed.size();
    if (status == Z_STREAM_END) {
      if (!input_left) break;
      inflateReset(&z.stream);  // another gzip member follows
    } else if (status == Z_BUF_ERROR && !input_left && z.stream.avail_out > 0) {
      throw InvalidInput(name + ": corrupt gzip stream: unexpected end of file");
    } else if (status != Z_OK && status != Z_BUF_ERROR) {
      if (status == Z_MEM_ERROR) throw ResourceError(name + ": out of memory while inflating the gzip stream");
      throw InvalidInput(name + ": corrupt gzip stream: " + (z.stream.msg ? z.stream.msg : zError(status)));
    }
  }
  out.resize(produced);
  return out;
}

std::string load_text(const std::string& path) {
  std::string bytes = read_file(path);
  return is_gzip(bytes) ? gunzip(bytes, path) : bytes;
}

// ---- lines and tokens ------------------------------------------------------------------------------------

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

/// Splits off the next whitespace-separated token of `rest` (empty when none is left).
std::string_view next_token(std::string_view& rest) {
  std::size_t b = 0;
  while (b < rest.size() && is_space(rest[b])) ++b;
  std::size_t e = b;
  while (e < rest.size() && !is_space(rest[e])) ++e;
  const std::string_view token = rest.substr(b, e - b);
  rest.remove_prefix(e);
  return token;
}

std::string lowercase(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

/// The lines of a file held in memory, with the 1-based number of the line last returned.
class Lines {
 public:
  /// `name` (a path, or what the caller calls the text) appears in messages through printable().
  Lines(std::string_view text, const std::string& name) : text_(text), name_(printable(name, 200)) {}

  /// The next line (without its end-of-line characters); false at the end of the text.
  bool next(std::string_view& line) {
    if (pos_ >= text_.size()) return false;
    std::size_t end = text_.find('\n', pos_);
    if (end == std::string_view::npos) end = text_.size();
    line = text_.substr(pos_, end - pos_);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    pos_ = end + 1;
    ++number_;
    return true;
  }

  /// The next line that is neither blank nor a `%` comment; false at the end of the text.
  bool next_content(std::string_view& line) {
    while (next(line)) {
      std::string_view rest = line;
      const std::string_view first = next_token(rest);
      if (!first.empty() && first.front() != '%') return true;
    }
    return false;
  }

  std::int64_t number() const { return number_; }
  const std::string& name() const { return name_; }

  /// Throws InvalidInput "<name>:<line>: what" for the line last returned.
  [[noreturn]] void fail(const std::string& what) const { fail_at(number_, what); }
  [[noreturn]] void fail_at(std::int64_t line, const std::string& what) const {
    throw InvalidInput(name_ + ":" + std::to_string(line) + ": " + what);
  }

 private:
  std::string_view text_;
  std::string name_;
  std::size_t pos_ = 0;
  std::int64_t number_ = 0;
};

/// std::from_chars accepts a leading '-' but not '+': drops a '+' that starts a number ("+-1" stays invalid).
std::string_view without_plus(std::string_view token) {
  if (token.size() > 1 && token[0] == '+' && token[1] != '-' && token[1] != '+') token.remove_prefix(1);
  return token;
}

bool parse_int(std::string_view token, std::int64_t& value) {
  token = without_plus(token);
  const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), value);
  return ec == std::errc() && end == token.data() + token.size();
}

/// Parses a decimal floating-point token. Overflow gives +-inf (then rejected as not finite); underflow gives
/// the nearest representable value (zero or subnormal), as strtod does.
bool parse_double(std::string_view token, double& value) {
  token = without_plus(token);
  const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), value);
  if (end != token.data() + token.size()) return false;
  if (ec == std::errc::result_out_of_range) {
    const std::string copy(token);
    value = std::strtod(copy.c_str(), nullptr);
    return true;
  }
  return ec == std::errc();
}

// ---- header ----------------------------------------------------------------------------------------------

enum class Format { coordinate, array };
enum class Field { real, integer, pattern };
enum class Symmetry { general, symmetric, skew_symmetric };

struct Header {
  Format format = Format::coordinate;
  Field field = Field::real;
  Symmetry symmetry = Symmetry::general;
  std::string field_name, symmetry_name;
  std::int64_t rows = 0, cols = 0;
  std::int64_t entries = 0;  ///< coordinate files: entries listed (array files: 0)
};

constexpr const char* banner_form =
    "expected banner '%%MatrixMarket matrix <coordinate|array> <real|integer|pattern> "
    "<general|symmetric|skew-symmetric>'";

/// Reads the banner and the size line; leaves `lines` at the size line.
Header read_header(Lines& lines) {
  std::string_view line;
  if (!lines.next(line)) lines.fail_at(1, std::string("empty file, ") + banner_form);
  std::string_view rest = line;
  const std::string banner = lowercase(next_token(rest));
  const std::string object = lowercase(next_token(rest));
  const std::string format = lowercase(next_token(rest));
  Header h;
  h.field_name = lowercase(next_token(rest));
  h.symmetry_name = lowercase(next_token(rest));
  if (banner != "%%matrixmarket" || h.symmetry_name.empty() || !next_token(rest).empty()) lines.fail(banner_form);
  if (object != "matrix") lines.fail("unsupported object " + quote(object) + " (only 'matrix' is supported)");

  if (format == "coordinate")
    h.format = Format::coordinate;
  else if (format == "array")
    h.format = Format::array;
  else
    lines.fail("unknown format " + quote(format) + " (expected coordinate or array)");

  if (h.field_name == "real")
    h.field = Field::real;
  else if (h.field_name == "integer")
    h.field = Field::integer;
  else if (h.field_name == "pattern")
    h.field = Field::pattern;
  else if (h.field_name == "complex")
    lines.fail("complex matrices are not supported");
  else
    lines.fail("unknown field " + quote(h.field_name) + " (expected real, integer or pattern)");

  if (h.symmetry_name == "general")
    h.symmetry = Symmetry::general;
  else if (h.symmetry_name == "symmetric")
    h.symmetry = Symmetry::symmetric;
  else if (h.symmetry_name == "skew-symmetric")
    h.symmetry = Symmetry::skew_symmetric;
  else if (h.symmetry_name == "hermitian")
    lines.fail("hermitian matrices are not supported");
  else
    lines.fail("unknown symmetry " + quote(h.symmetry_name) + " (expected general, symmetric or skew-symmetric)");

  if (h.field == Field::pattern && h.format == Format::array) lines.fail("an array file cannot have field pattern");
  if (h.field == Field::pattern && h.symmetry == Symmetry::skew_symmetric)
    lines.fail("a pattern file cannot be skew-symmetric");

  const bool coordinate = h.format == Format::coordinate;
  const char* size_form = coordinate ? "expected 'rows cols entries'" : "expected 'rows cols'";
  if (!lines.next_content(line)) lines.fail_at(lines.number() + 1, std::string(size_form) + ", found end of file");
  rest = line;
  std::int64_t sizes[3] = {0, 0, 0};
  for (int k = 0; k < (coordinate ? 3 : 2); ++k)
    if (!parse_int(next_token(rest), sizes[k]) || sizes[k] < 0) lines.fail(size_form);
  if (!next_token(rest).empty()) lines.fail(size_form);
  h.rows = sizes[0];
  h.cols = sizes[1];
  h.entries = sizes[2];
  if (h.symmetry != Symmetry::general && h.rows != h.cols)
    lines.fail("a " + h.symmetry_name + " matrix must be square, got " + std::to_string(h.rows) + " x " +
               std::to_string(h.cols));
  return h;
}

/// Throws ResourceError when the matrix cannot be indexed by index_t, or has a dimension above `limit`.
void check_index_range(const Header& h, const Lines& lines, std::int64_t limit) {
  const std::int64_t big = std::max(h.rows, h.cols);
  if (big > max_index)
    throw ResourceError(lines.name() + ":" + std::to_string(lines.number()) + ": " + std::to_string(h.rows) +
                        " x " + std::to_string(h.cols) + " matrix: dimension " + std::to_string(big) +
                        " overflows 32-bit indices (at most " + std::to_string(max_index) + ")");
  if (big > limit)
    throw ResourceError(lines.name() + ":" + std::to_string(lines.number()) + ": " + std::to_string(h.rows) +
                        " x " + std::to_string(h.cols) + " matrix: dimension " + std::to_string(big) +
                        " exceeds the limit of " + std::to_string(limit) + " set by the caller");
}

/// Parses one value token of `field` (real or integer) and rejects NaN and Inf.
double read_value(Lines& lines, std::string_view token, Field field) {
  double v = 0;
  if (field == Field::integer) {
    std::int64_t iv = 0;
    if (!parse_int(token, iv)) lines.fail("invalid integer value " + quote(token));
    v = static_cast<double>(iv);
  } else if (!parse_double(token, v)) {
    lines.fail("invalid value " + quote(token));
  }
  if (!std::isfinite(v)) lines.fail("value " + quote(token) + " is not finite");
  return v;
}

/// Throws when a non-blank, non-comment line follows the last of the `declared` entries (or values).
void check_no_more_entries(Lines& lines, std::int64_t declared, const char* what) {
  std::string_view line;
  if (lines.next_content(line))
    lines.fail("more " + std::string(what) + " than the " + std::to_string(declared) + " declared in the size line");
}

/// Reads the entry lines of a coordinate file and calls add(i, j, v) (0-based) for each entry, and once
/// more for the mirror image of each off-diagonal entry of a symmetric (v) or skew-symmetric (-v) file.
/// Pattern entries get v = 1.
template <class Add>
void read_coordinate_entries(Lines& lines, const Header& h, Add&& add) {
  const bool has_value = h.field != Field::pattern;
  const char* entry_form = has_value ? "expected 'row col value'" : "expected 'row col'";
  std::string_view line;
  for (std::int64_t k = 0; k < h.entries; ++k) {
    if (!lines.next_content(line))
      lines.fail_at(lines.number() + 1, "truncated: expected " + std::to_string(h.entries) + " entries, found " +
                                            std::to_string(k));
    std::string_view rest = line;
    const std::string_view ti = next_token(rest), tj = next_token(rest);
    const std::string_view tv = has_value ? next_token(rest) : std::string_view("1");
    if (tj.empty() || tv.empty()) lines.fail(entry_form);
    std::int64_t i = 0, j = 0;
    if (!parse_int(ti, i)) lines.fail("invalid row index " + quote(ti));
    if (!parse_int(tj, j)) lines.fail("invalid column index " + quote(tj));
    const double v = read_value(lines, tv, has_value ? h.field : Field::real);
    if (const std::string_view extra = next_token(rest); !extra.empty())
      lines.fail(std::string(entry_form) + ", found extra text " + quote(extra));
    if (i < 1 || i > h.rows)
      lines.fail("row index " + std::to_string(i) + " out of range [1, " + std::to_string(h.rows) + "]");
    if (j < 1 || j > h.cols)
      lines.fail("column index " + std::to_string(j) + " out of range [1, " + std::to_string(h.cols) + "]");
    const std::string where = "(" + std::to_string(i) + ", " + std::to_string(j) + ")";
    if (h.symmetry != Symmetry::general && i < j)
      lines.fail("entry " + where + " above the diagonal in a " + h.symmetry_name +
                 " file (only the lower triangle may be stored)");
    if (h.symmetry == Symmetry::skew_symmetric && i == j)
      lines.fail("diagonal entry " + where + " in a skew-symmetric file");
    add(i - 1, j - 1, v);
    if (i != j && h.symmetry == Symmetry::symmetric) add(j - 1, i - 1, v);
    if (i != j && h.symmetry == Symmetry::skew_symmetric) add(j - 1, i - 1, -v);
  }
  check_no_more_entries(lines, h.entries, "entries");
}

/// The SPD graph Laplacian of the symmetrized off-diagonal pattern of the triplets (see PatternValues).
SparseMatrix laplacian_of_pattern(std::int64_t n, const std::vector<std::int64_t>& rows,
                                  const std::vector<std::int64_t>& cols) {
  std::vector<std::int64_t> r, c;
  r.reserve(2 * rows.size());
  c.reserve(2 * rows.size());
  for (std::size_t k = 0; k < rows.size(); ++k) {
    if (rows[k] == cols[k]) continue;
    r.push_back(rows[k]);
    c.push_back(cols[k]);
    r.push_back(cols[k]);
    c.push_back(rows[k]);
  }
  // from_triplets merges duplicate positions, leaving the pattern of A + A^T without its diagonal.
  const SparseMatrix s = SparseMatrix::from_triplets(n, n, r, c, std::vector<double>(r.size(), 1.0));
  const auto& sp = s.col_ptr();
  const auto& si = s.row_ind();
  std::vector<offset_t> col_ptr(static_cast<std::size_t>(n) + 1, 0);
  std::vector<index_t> row_ind;
  std::vector<double> values;
  row_ind.reserve(si.size() + static_cast<std::size_t>(n));
  values.reserve(si.size() + static_cast<std::size_t>(n));
  for (index_t j = 0; j < n; ++j) {
    // The pattern is symmetric, so the off-diagonal count of column j is that of row j.
    const double degree = static_cast<double>(sp[j + 1] - sp[j]);
    bool diagonal_done = false;
    for (offset_t p = sp[j]; p < sp[j + 1]; ++p) {
      if (!diagonal_done && si[p] > j) {
        row_ind.push_back(j);
        values.push_back(degree + 1);
        diagonal_done = true;
      }
      row_ind.push_back(si[p]);
      values.push_back(-1.0);
    }
    if (!diagonal_done) {
      row_ind.push_back(j);
      values.push_back(degree + 1);
    }
    col_ptr[j + 1] = static_cast<offset_t>(row_ind.size());
  }
  return SparseMatrix(static_cast<index_t>(n), static_cast<index_t>(n), std::move(col_ptr), std::move(row_ind),
                      std::move(values));
}

/// How many of `declared` items to reserve room for: no more than a text of `text_size` characters can
/// hold at `min_chars` characters per item, so that a corrupt size line cannot trigger a huge allocation.
std::size_t reserve_size(std::int64_t declared, std::size_t text_size, std::size_t min_chars) {
  return static_cast<std::size_t>(
      std::min<std::int64_t>(declared, static_cast<std::int64_t>(text_size / min_chars + 1)));
}

DenseMatrix parse_dense(const std::string& text, const std::string& name, const DenseMatrixMarketOptions& options) {
  Lines lines(text, name);
  const Header h = read_header(lines);
  if (h.field == Field::pattern) lines.fail_at(1, "a pattern file has no values to read as a dense matrix");
  if (h.format == Format::array && h.symmetry != Symmetry::general)
    lines.fail_at(1, "only 'general' array files are supported, not " + quote(h.symmetry_name));
  DenseMatrix m;
  m.rows = h.rows;
  m.cols = h.cols;
  if (h.cols != 0 && h.rows > std::numeric_limits<std::int64_t>::max() / 8 / h.cols)
    throw ResourceError(lines.name() + ":" + std::to_string(lines.number()) + ": a dense " + std::to_string(h.rows) +
                        " x " + std::to_string(h.cols) + " matrix is too large");
  const std::int64_t size = h.rows * h.cols;
  if (options.rows >= 0 && h.rows != options.rows)
    lines.fail("the matrix has " + std::to_string(h.rows) + " rows; " + std::to_string(options.rows) +
               " are needed");
  if (size > options.max_entries)
    throw ResourceError(lines.name() + ":" + std::to_string(lines.number()) + ": a dense " + std::to_string(h.rows) +
                        " x " + std::to_string(h.cols) + " matrix exceeds the limit of " +
                        std::to_string(options.max_entries) + " entries set by the caller");
  if (h.format == Format::coordinate) {
    try {
      m.values.assign(static_cast<std::size_t>(size), 0.0);
    } catch (const std::bad_alloc&) {
      throw ResourceError(lines.name() + ": out of memory for a dense " + std::to_string(h.rows) + " x " +
                          std::to_string(h.cols) + " matrix");
    }
    read_coordinate_entries(lines, h, [&](std::int64_t i, std::int64_t j, double v) {
      double& entry = m.values[static_cast<std::size_t>(i + j * h.rows)];
      entry += v;
      if (!std::isfinite(entry))
        lines.fail("entry (" + std::to_string(i + 1) + ", " + std::to_string(j + 1) +
                   ") repeats, and its values sum to a number that is not finite");
    });
    return m;
  }
  // Array: column-major, one value per line. Values are appended as read, so a size line that promises
  // more values than the text holds ends in a truncation error, not in a huge allocation.
  m.values.reserve(reserve_size(size, text.size(), 2));  // a value takes at least two characters, "0\n"
  std::string_view line;
  for (std::int64_t k = 0; k < size; ++k) {
    if (!lines.next_content(line))
      lines.fail_at(lines.number() + 1, "truncated: expected " + std::to_string(size) + " values, found " +
                                            std::to_string(k));
    std::string_view rest = line;
    m.values.push_back(read_value(lines, next_token(rest), h.field));
    if (const std::string_view extra = next_token(rest); !extra.empty())
      lines.fail("expected one value per line, found extra text " + quote(extra));
  }
  check_no_more_entries(lines, size, "values");
  return m;
}

}  // namespace

SparseMatrix parse_matrix_market(const std::string& text, const std::string& name,
                                 const MatrixMarketOptions& options, MatrixMarketInfo* info) {
  Lines lines(text, name);
  const Header h = read_header(lines);
  if (h.format == Format::array)
    lines.fail_at(1, "'array' (dense) format where a sparse 'coordinate' matrix is expected "
                     "(read it with read_dense_matrix_market)");
  if (h.field == Field::pattern && options.pattern_values == PatternValues::reject)
    lines.fail_at(1, "pattern file has no values: choose pattern values 'ones' or 'laplacian' to read it");
  check_index_range(h, lines, options.max_dimension);
  const bool laplacian = h.field == Field::pattern && options.pattern_values == PatternValues::laplacian;
  if (laplacian && h.rows != h.cols)
    lines.fail("laplacian values need a square matrix, got " + std::to_string(h.rows) + " x " +
               std::to_string(h.cols));

  // An entry line takes at least four characters ("1 1\n"); symmetric entries are stored twice.
  const std::size_t mirror = h.symmetry == Symmetry::general ? 1 : 2;
  const std::size_t reserve = mirror * reserve_size(h.entries, text.size(), 4);
  std::vector<std::int64_t> rows, cols;
  std::vector<double> values;
  rows.reserve(reserve);
  cols.reserve(reserve);
  if (!laplacian) values.reserve(reserve);
  read_coordinate_entries(lines, h, [&](std::int64_t i, std::int64_t j, double v) {
    rows.push_back(i);
    cols.push_back(j);
    if (!laplacian) values.push_back(v);
  });
  SparseMatrix a = laplacian ? laplacian_of_pattern(h.rows, rows, cols)
                             : SparseMatrix::from_triplets(h.rows, h.cols, rows, cols, values);
  // Each value is finite, but duplicates may sum to Inf (from_triplets adds them up).
  for (index_t j = 0; j < a.cols(); ++j)
    for (offset_t p = a.col_ptr()[j]; p < a.col_ptr()[j + 1]; ++p)
      if (!std::isfinite(a.values()[p]))
        throw InvalidInput(lines.name() + ": the entries at (" + std::to_string(a.row_ind()[p] + 1) + ", " +
                           std::to_string(j + 1) + ") (1-based) repeat, and their values sum to a number that "
                           "is not finite");
  if (info != nullptr) {
    info->field = h.field_name;
    info->symmetry = h.symmetry_name;
    info->rows = h.rows;
    info->cols = h.cols;
    info->stored_entries = h.entries;
  }
  return a;
}

SparseMatrix read_matrix_market(const std::string& path, const MatrixMarketOptions& options,
                                MatrixMarketInfo* info) {
  return parse_matrix_market(load_text(path), path, options, info);
}

DenseMatrix read_dense_matrix_market(const std::string& path, const DenseMatrixMarketOptions& options) {
  return parse_dense(load_text(path), path, options);
}

DenseMatrix parse_dense_matrix_market(const std::string& text, const std::string& name,
                                      const DenseMatrixMarketOptions& options) {
  return parse_dense(text, name, options);
}

void write_dense_matrix_market(const std::string& path, const DenseMatrix& m) {
  if (m.rows < 0 || m.cols < 0 || (m.cols != 0 && m.rows > std::numeric_limits<std::int64_t>::max() / m.cols) ||
      m.values.size() != static_cast<std::size_t>(m.rows * m.cols))
    throw InvalidInput("write_dense_matrix_market: values must hold rows * cols = " + std::to_string(m.rows) +
                       " * " + std::to_string(m.cols) + " entries, has " + std::to_string(m.values.size()));
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "wb"), &std::fclose);
  if (!file) throw ResourceError("cannot open " + quote(path, 200) + " for writing: " + std::strerror(errno));
  std::fprintf(file.get(), "%%%%MatrixMarket matrix array real general\n%lld %lld\n",
               static_cast<long long>(m.rows), static_cast<long long>(m.cols));
  for (const double v : m.values) std::fprintf(file.get(), "%.17g\n", v);
  const bool write_failed = std::ferror(file.get()) != 0;
  const int saved_errno = errno;
  if (std::fclose(file.release()) != 0 || write_failed)
    throw ResourceError("cannot write " + quote(path, 200) + ": " + std::strerror(write_failed ? saved_errno : errno));
}

}  // namespace spade
