// Tests of Matrix Market I/O (core/matrix_market.cpp) and the grid generators (core/generators.cpp): Laplacians
// and upwind convection-diffusion operators.
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "error_of.hpp"
#include "spade/error.hpp"
#include "spade/generators.hpp"
#include "spade/matrix_market.hpp"
#include "test_matrices.hpp"

namespace spade {
namespace {

namespace fs = std::filesystem;

// ---- helpers ---------------------------------------------------------------------------------------------

using spade::testing::error_of;

SparseMatrix parse(const std::string& text, PatternValues pattern = PatternValues::reject,
                   MatrixMarketInfo* info = nullptr) {
  MatrixMarketOptions options;
  options.pattern_values = pattern;
  return parse_matrix_market(text, "A.mtx", options, info);
}

/// Message of the InvalidInput thrown when parsing `text` as "A.mtx".
std::string parse_error(const std::string& text, PatternValues pattern = PatternValues::reject) {
  return error_of<InvalidInput>([&] { parse(text, pattern); });
}

/// Row-major dense copy of a sparse matrix, for comparisons with small hand-written matrices.
std::vector<std::vector<double>> to_dense(const SparseMatrix& a) {
  std::vector<std::vector<double>> d(a.rows(), std::vector<double>(a.cols(), 0.0));
  for (index_t j = 0; j < a.cols(); ++j)
    for (offset_t p = a.col_ptr()[j]; p < a.col_ptr()[j + 1]; ++p) d[a.row_ind()[p]][j] += a.values()[p];
  return d;
}

using Dense = std::vector<std::vector<double>>;

/// A fresh folder under the system temporary directory, removed with its contents at the end of the test.
class TempDir {
 public:
  TempDir() {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() /
            ("spade_test_io_" + std::to_string(::getpid()) + "_" + test->test_suite_name() + "_" + test->name());
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  ASSERT_TRUE(out.good()) << path;
}

/// Writes `text` as a gzip file with zlib's gzFile interface; mode "ab" appends a second gzip member.
void write_gzip(const std::string& path, const std::string& text, const char* mode = "wb") {
  gzFile gz = gzopen(path.c_str(), mode);
  ASSERT_NE(gz, nullptr) << path;
  ASSERT_EQ(gzwrite(gz, text.data(), static_cast<unsigned>(text.size())), static_cast<int>(text.size()));
  ASSERT_EQ(gzclose(gz), Z_OK);
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

constexpr const char* banner_form =
    "expected banner '%%MatrixMarket matrix <coordinate|array> <real|integer|pattern> "
    "<general|symmetric|skew-symmetric>'";

// ---- reader: formats ---------------------------------------------------------------------------------------

TEST(MatrixMarketRead, RealGeneral) {
  MatrixMarketInfo info;
  const SparseMatrix a = parse(
      "%%MatrixMarket matrix coordinate real general\n"
      "% a comment\n"
      "3 4 4\n"
      "1 1 1.5\n"
      "3 2 -2e3\n"
      "2 4 7\n"
      "1 3 0\n",
      PatternValues::reject, &info);
  EXPECT_EQ(a.rows(), 3);
  EXPECT_EQ(a.cols(), 4);
  EXPECT_EQ(a.nnz(), 4);  // the explicit zero is an entry
  EXPECT_EQ(to_dense(a), (Dense{{1.5, 0, 0, 0}, {0, 0, 0, 7}, {0, -2000, 0, 0}}));
  EXPECT_EQ(info.field, "real");
  EXPECT_EQ(info.symmetry, "general");
  EXPECT_EQ(info.rows, 3);
  EXPECT_EQ(info.cols, 4);
  EXPECT_EQ(info.stored_entries, 4);
}

TEST(MatrixMarketRead, IntegerGeneral) {
  const SparseMatrix a = parse(
      "%%MatrixMarket matrix coordinate integer general\n"
      "2 2 3\n"
      "1 1 -3\n"
      "2 1 +4\n"
      "2 2 9007199254740993\n");  // 2^53 + 1: rounds to the nearest double
  EXPECT_EQ(to_dense(a), (Dense{{-3, 0}, {4, 9007199254740992.0}}));
}

TEST(MatrixMarketRead, PatternGeneralOnes) {
  MatrixMarketInfo info;
  const SparseMatrix a = parse(
      "%%MatrixMarket matrix coordinate pattern general\n"
      "2 3 3\n"
      "1 2\n"
      "2 3\n"
      "2 1\n",
      PatternValues::ones, &info);
  EXPECT_EQ(to_dense(a), (Dense{{0, 1, 0}, {1, 0, 1}}));
  EXPECT_EQ(info.field, "pattern");
}

TEST(MatrixMarketRead, RealSymmetricMirrorsTheLowerTriangle) {
  MatrixMarketInfo info;
  const SparseMatrix a = parse(
      "%%MatrixMarket matrix coordinate real symmetric\n"
      "3 3 4\n"
      "1 1 2\n"
      "2 1 -1\n"
      "3 2 0.5\n"
      "3 3 4\n",
      PatternValues::reject, &info);
  EXPECT_EQ(a.nnz(), 6);
  EXPECT_TRUE(a.is_symmetric());
  EXPECT_EQ(to_dense(a), (Dense{{2, -1, 0}, {-1, 0, 0.5}, {0, 0.5, 4}}));
  EXPECT_EQ(info.symmetry, "symmetric");
  EXPECT_EQ(info.stored_entries, 4);
}

TEST(MatrixMarketRead, IntegerSymmetric) {
  const SparseMatrix a = parse(
      "%%MatrixMarket matrix coordinate integer symmetric\n"
      "2 2 2\n"
      "2 1 3\n"
      "2 2 -1\n");
  EXPECT_EQ(to_dense(a), (Dense{{0, 3}, {3, -1}}));
}

TEST(MatrixMarketRead, PatternSymmetricOnes) {
  const SparseMatrix a = parse(
      "%%MatrixMarket matrix coordinate pattern symmetric\n"
      "3 3 3\n"
      "1 1\n"
      "3 1\n"
      "3 2\n",
      PatternValues::ones);
  EXPECT_EQ(to_dense(a), (Dense{{1, 0, 1}, {0, 0, 1}, {1, 1, 0}}));
}

TEST(MatrixMarketRead, RealSkewSymmetricNegatesTheMirror) {
  const SparseMatrix a = parse(
      "%%MatrixMarket matrix coordinate real skew-symmetric\n"
      "3 3 2\n"
      "2 1 1.5\n"
      "3 2 -2\n");
  EXPECT_EQ(to_dense(a), (Dense{{0, -1.5, 0}, {1.5, 0, 2}, {0, -2, 0}}));
}

TEST(MatrixMarketRead, IntegerSkewSymmetric) {
  MatrixMarketInfo info;
  const SparseMatrix a = parse(
      "%%MatrixMarket matrix coordinate integer skew-symmetric\n"
      "2 2 1\n"
      "2 1 7\n",
      PatternValues::reject, &info);
  EXPECT_EQ(to_dense(a), (Dense{{0, -7}, {7, 0}}));
  EXPECT_EQ(info.field, "integer");
  EXPECT_EQ(info.symmetry, "skew-symmetric");
}

TEST(MatrixMarketRead, DuplicatesAreSummed) {
  const SparseMatrix g = parse(
      "%%MatrixMarket matrix coordinate real general\n"
      "2 2 4\n"
      "1 1 1\n"
      "2 1 5\n"
      "1 1 2.5\n"
      "2 1 -5\n");
  EXPECT_EQ(g.nnz(), 2);  // the cancelled (2, 1) stays an (explicit zero) entry
  EXPECT_EQ(to_dense(g), (Dense{{3.5, 0}, {0, 0}}));
  const SparseMatrix s = parse(
      "%%MatrixMarket matrix coordinate real symmetric\n"
      "2 2 2\n"
      "2 1 1\n"
      "2 1 2\n");
  EXPECT_EQ(to_dense(s), (Dense{{0, 3}, {3, 0}}));
}

TEST(MatrixMarketRead, ExplicitZerosAreKept) {
  const SparseMatrix a = parse(
      "%%MatrixMarket matrix coordinate real symmetric\n"
      "2 2 3\n"
      "1 1 0\n"
      "2 1 0.0\n"
      "2 2 -0\n");
  EXPECT_EQ(a.nnz(), 4);
  EXPECT_EQ(to_dense(a), (Dense{{0, 0}, {0, 0}}));
}

TEST(MatrixMarketRead, CaseInsensitiveBannerCommentsBlankLinesAndWhitespace) {
  const SparseMatrix a = parse(
      "%%matrixmarket MATRIX Coordinate REAL General\r\n"
      "%\r\n"
      "\r\n"
      "   % an indented comment\n"
      "\t\n"
      "  2\t2   2  \r\n"
      "\n"
      "% a comment between entries\n"
      " 1 1\t-.5 \n"
      "2 2 1E-3");  // no final newline
  EXPECT_EQ(to_dense(a), (Dense{{-0.5, 0}, {0, 1e-3}}));
}

TEST(MatrixMarketRead, EmptyMatrices) {
  const SparseMatrix z = parse("%%MatrixMarket matrix coordinate real general\n0 0 0\n");
  EXPECT_EQ(z.rows(), 0);
  EXPECT_EQ(z.cols(), 0);
  const SparseMatrix e = parse("%%MatrixMarket matrix coordinate real symmetric\n3 3 0\n");
  EXPECT_EQ(e.rows(), 3);
  EXPECT_EQ(e.nnz(), 0);
}

TEST(MatrixMarketRead, ValueUnderflowRoundsAndSubnormalsAreExact) {
  const SparseMatrix a = parse(
      "%%MatrixMarket matrix coordinate real general\n"
      "1 3 3\n"
      "1 1 1e-400\n"
      "1 2 4.9406564584124654e-324\n"
      "1 3 1.7976931348623157e308\n");
  EXPECT_EQ(a.values()[0], 0.0);
  EXPECT_EQ(a.values()[1], std::numeric_limits<double>::denorm_min());
  EXPECT_EQ(a.values()[2], std::numeric_limits<double>::max());
}

TEST(MatrixMarketRead, LaplacianOfASymmetrizedPattern) {
  // Off-diagonal pattern {(1,2), (2,1), (3,1)}, symmetrized: edges 1-2 and 1-3; the stored diagonal (2,2)
  // is ignored.
  const SparseMatrix a = parse(
      "%%MatrixMarket matrix coordinate pattern general\n"
      "3 3 4\n"
      "1 2\n"
      "2 1\n"
      "3 1\n"
      "2 2\n",
      PatternValues::laplacian);
  EXPECT_EQ(a.nnz(), 7);
  EXPECT_EQ(to_dense(a), (Dense{{3, -1, -1}, {-1, 2, 0}, {-1, 0, 2}}));
  const SparseMatrix s = parse(
      "%%MatrixMarket matrix coordinate pattern symmetric\n"
      "3 3 1\n"
      "3 2\n",
      PatternValues::laplacian);
  EXPECT_EQ(to_dense(s), (Dense{{1, 0, 0}, {0, 2, -1}, {0, -1, 2}}));
}

TEST(MatrixMarketRead, LaplacianValuesOnlyApplyToPatternFiles) {
  const SparseMatrix a = parse("%%MatrixMarket matrix coordinate real general\n2 2 1\n2 1 5\n",
                               PatternValues::laplacian);
  EXPECT_EQ(to_dense(a), (Dense{{0, 0}, {5, 0}}));
}

// ---- reader: errors ----------------------------------------------------------------------------------------

TEST(MatrixMarketErrors, Banner) {
  EXPECT_EQ(parse_error(""), std::string("A.mtx:1: empty file, ") + banner_form);
  EXPECT_EQ(parse_error("3 3 1\n1 1 1\n"), std::string("A.mtx:1: ") + banner_form);
  EXPECT_EQ(parse_error("%%MatrixMarket matrix coordinate real\n1 1 0\n"), std::string("A.mtx:1: ") + banner_form);
  EXPECT_EQ(parse_error("%%MatrixMarket matrix coordinate real general extra\n1 1 0\n"),
            std::string("A.mtx:1: ") + banner_form);
  EXPECT_EQ(parse_error("%%MatrixMarket vector coordinate real general\n1 1 0\n"),
            "A.mtx:1: unsupported object 'vector' (only 'matrix' is supported)");
  EXPECT_EQ(parse_error("%%MatrixMarket matrix sparse real general\n1 1 0\n"),
            "A.mtx:1: unknown format 'sparse' (expected coordinate or array)");
  EXPECT_EQ(parse_error("%%MatrixMarket matrix coordinate complex general\n1 1 1\n1 1 1 0\n"),
            "A.mtx:1: complex matrices are not supported");
  EXPECT_EQ(parse_error("%%MatrixMarket matrix coordinate real hermitian\n1 1 0\n"),
            "A.mtx:1: hermitian matrices are not supported");
  EXPECT_EQ(parse_error("%%MatrixMarket matrix coordinate quaternion general\n1 1 0\n"),
            "A.mtx:1: unknown field 'quaternion' (expected real, integer or pattern)");
  EXPECT_EQ(parse_error("%%MatrixMarket matrix coordinate real diagonal\n1 1 0\n"),
            "A.mtx:1: unknown symmetry 'diagonal' (expected general, symmetric or skew-symmetric)");
  EXPECT_EQ(parse_error("%%MatrixMarket matrix coordinate pattern skew-symmetric\n1 1 0\n", PatternValues::ones),
            "A.mtx:1: a pattern file cannot be skew-symmetric");
  EXPECT_EQ(parse_error("%%MatrixMarket matrix array pattern general\n1 1\n"),
            "A.mtx:1: an array file cannot have field pattern");
}

TEST(MatrixMarketErrors, ArrayFormatGivenToTheSparseReader) {
  EXPECT_EQ(parse_error("%%MatrixMarket matrix array real general\n2 1\n1\n2\n"),
            "A.mtx:1: 'array' (dense) format where a sparse 'coordinate' matrix is expected (read it with "
            "read_dense_matrix_market)");
}

TEST(MatrixMarketErrors, PatternRejectedByDefault) {
  EXPECT_EQ(parse_error("%%MatrixMarket matrix coordinate pattern general\n2 2 1\n1 2\n"),
            "A.mtx:1: pattern file has no values: choose pattern values 'ones' or 'laplacian' to read it");
}

TEST(MatrixMarketErrors, SizeLine) {
  const std::string banner = "%%MatrixMarket matrix coordinate real general\n% comment\n";
  EXPECT_EQ(parse_error(banner + "3 3\n"), "A.mtx:3: expected 'rows cols entries'");
  EXPECT_EQ(parse_error(banner + "3 3 x\n"), "A.mtx:3: expected 'rows cols entries'");
  EXPECT_EQ(parse_error(banner + "3 -3 1\n1 1 1\n"), "A.mtx:3: expected 'rows cols entries'");
  EXPECT_EQ(parse_error(banner + "3 3 1 9\n1 1 1\n"), "A.mtx:3: expected 'rows cols entries'");
  EXPECT_EQ(parse_error(banner + "3 3 99999999999999999999\n"), "A.mtx:3: expected 'rows cols entries'");
  EXPECT_EQ(parse_error(banner), "A.mtx:3: expected 'rows cols entries', found end of file");
  EXPECT_EQ(parse_error("%%MatrixMarket matrix coordinate real symmetric\n3 4 0\n"),
            "A.mtx:2: a symmetric matrix must be square, got 3 x 4");
  EXPECT_EQ(parse_error("%%MatrixMarket matrix coordinate real skew-symmetric\n4 3 0\n"),
            "A.mtx:2: a skew-symmetric matrix must be square, got 4 x 3");
  EXPECT_EQ(parse_error("%%MatrixMarket matrix coordinate pattern general\n2 3 0\n", PatternValues::laplacian),
            "A.mtx:2: laplacian values need a square matrix, got 2 x 3");
}

TEST(MatrixMarketErrors, SizesBeyond32BitIndicesAreAResourceError) {
  EXPECT_EQ(error_of<ResourceError>([] { parse("%%MatrixMarket matrix coordinate real general\n3000000000 5 0\n"); }),
            "A.mtx:2: 3000000000 x 5 matrix: dimension 3000000000 overflows 32-bit indices (at most 2147483647)");
  EXPECT_EQ(error_of<ResourceError>([] { parse("%%MatrixMarket matrix coordinate real general\n1 2147483648 0\n"); }),
            "A.mtx:2: 1 x 2147483648 matrix: dimension 2147483648 overflows 32-bit indices (at most 2147483647)");
  // The largest 32-bit size is accepted (no entries, so nothing is allocated per row).
  EXPECT_EQ(parse("%%MatrixMarket matrix coordinate real general\n2147483647 1 0\n").rows(), 2147483647);
}

TEST(MatrixMarketErrors, IndicesOutOfRange) {
  const std::string head =
      "%%MatrixMarket matrix coordinate real general\n"
      "% 1\n% 2\n% 3\n"
      "10 10 3\n"
      "1 1 1\n";
  EXPECT_EQ(parse_error(head + "12 3 1\n1 1 1\n"), "A.mtx:7: row index 12 out of range [1, 10]");
  EXPECT_EQ(parse_error(head + "0 3 1\n1 1 1\n"), "A.mtx:7: row index 0 out of range [1, 10]");
  EXPECT_EQ(parse_error(head + "3 11 1\n1 1 1\n"), "A.mtx:7: column index 11 out of range [1, 10]");
  EXPECT_EQ(parse_error(head + "3 -1 1\n1 1 1\n"), "A.mtx:7: column index -1 out of range [1, 10]");
}

TEST(MatrixMarketErrors, TruncatedAndTooLong) {
  const std::string head = "%%MatrixMarket matrix coordinate real general\n4 4 4\n";
  EXPECT_EQ(parse_error(head + "1 1 1\n2 2 2\n"), "A.mtx:5: truncated: expected 4 entries, found 2");
  EXPECT_EQ(parse_error(head + "1 1 1\n2 2 2\n\n% trailing comment\n"),
            "A.mtx:7: truncated: expected 4 entries, found 2");
  EXPECT_EQ(parse_error(head + "1 1 1\n2 2 2\n3 3 3\n4 4 4\n1 2 5\n"),
            "A.mtx:7: more entries than the 4 declared in the size line");
}

TEST(MatrixMarketErrors, MalformedEntries) {
  const std::string real = "%%MatrixMarket matrix coordinate real general\n3 3 1\n";
  EXPECT_EQ(parse_error(real + "1 1\n"), "A.mtx:3: expected 'row col value'");
  EXPECT_EQ(parse_error(real + "1\n"), "A.mtx:3: expected 'row col value'");
  EXPECT_EQ(parse_error(real + "x 1 1\n"), "A.mtx:3: invalid row index 'x'");
  EXPECT_EQ(parse_error(real + "1.5 1 1\n"), "A.mtx:3: invalid row index '1.5'");
  EXPECT_EQ(parse_error(real + "1 2a 1\n"), "A.mtx:3: invalid column index '2a'");
  EXPECT_EQ(parse_error(real + "1 1 abc\n"), "A.mtx:3: invalid value 'abc'");
  EXPECT_EQ(parse_error(real + "1 1 1.2.3\n"), "A.mtx:3: invalid value '1.2.3'");
  EXPECT_EQ(parse_error(real + "1 1 +-1\n"), "A.mtx:3: invalid value '+-1'");
  EXPECT_EQ(parse_error(real + "1 1 1 0\n"), "A.mtx:3: expected 'row col value', found extra text '0'");
  EXPECT_EQ(parse_error("%%MatrixMarket matrix coordinate integer general\n3 3 1\n1 1 1.5\n"),
            "A.mtx:3: invalid integer value '1.5'");
  EXPECT_EQ(parse_error("%%MatrixMarket matrix coordinate pattern general\n3 3 1\n1 1 5\n", PatternValues::ones),
            "A.mtx:3: expected 'row col', found extra text '5'");
}

TEST(MatrixMarketErrors, NonFiniteValues) {
  const std::string real = "%%MatrixMarket matrix coordinate real general\n3 3 2\n1 1 1\n";
  EXPECT_EQ(parse_error(real + "2 2 nan\n"), "A.mtx:4: value 'nan' is not finite");
  EXPECT_EQ(parse_error(real + "2 2 NaN\n"), "A.mtx:4: value 'NaN' is not finite");
  EXPECT_EQ(parse_error(real + "2 2 -inf\n"), "A.mtx:4: value '-inf' is not finite");
  EXPECT_EQ(parse_error(real + "2 2 Infinity\n"), "A.mtx:4: value 'Infinity' is not finite");
  EXPECT_EQ(parse_error(real + "2 2 1e400\n"), "A.mtx:4: value '1e400' is not finite");
  EXPECT_EQ(parse_error(real + "2 2 -1e400\n"), "A.mtx:4: value '-1e400' is not finite");
}

TEST(MatrixMarketErrors, SymmetryViolations) {
  EXPECT_EQ(parse_error("%%MatrixMarket matrix coordinate real symmetric\n3 3 2\n1 1 1\n1 2 1\n"),
            "A.mtx:4: entry (1, 2) above the diagonal in a symmetric file (only the lower triangle may be stored)");
  EXPECT_EQ(parse_error("%%MatrixMarket matrix coordinate pattern symmetric\n3 3 1\n2 3\n", PatternValues::ones),
            "A.mtx:3: entry (2, 3) above the diagonal in a symmetric file (only the lower triangle may be stored)");
  EXPECT_EQ(parse_error("%%MatrixMarket matrix coordinate real skew-symmetric\n3 3 1\n1 3 1\n"),
            "A.mtx:3: entry (1, 3) above the diagonal in a skew-symmetric file (only the lower triangle may be "
            "stored)");
  EXPECT_EQ(parse_error("%%MatrixMarket matrix coordinate integer skew-symmetric\n3 3 2\n2 1 1\n2 2 4\n"),
            "A.mtx:4: diagonal entry (2, 2) in a skew-symmetric file");
}

// ---- reader: files and gzip ------------------------------------------------------------------------------

const std::string small_file =
    "%%MatrixMarket matrix coordinate real symmetric\n"
    "% a small test matrix\n"
    "3 3 4\n"
    "1 1 4\n"
    "2 1 -1\n"
    "2 2 4\n"
    "3 3 0.25\n";

TEST(MatrixMarketFiles, PlainAndGzipReadTheSame) {
  TempDir dir;
  write_text(dir.file("a.mtx"), small_file);
  write_gzip(dir.file("a.mtx.gz"), small_file);
  write_gzip(dir.file("gzip_without_suffix.mtx"), small_file);  // detected by magic bytes, not by name
  const Dense expected{{4, -1, 0}, {-1, 4, 0}, {0, 0, 0.25}};
  MatrixMarketInfo info;
  EXPECT_EQ(to_dense(read_matrix_market(dir.file("a.mtx"))), expected);
  EXPECT_EQ(to_dense(read_matrix_market(dir.file("a.mtx.gz"), {}, &info)), expected);
  EXPECT_EQ(info.stored_entries, 4);
  EXPECT_EQ(to_dense(read_matrix_market(dir.file("gzip_without_suffix.mtx"))), expected);
}

TEST(MatrixMarketFiles, ConcatenatedGzipMembers) {
  TempDir dir;
  const std::string path = dir.file("two_members.mtx.gz");
  const std::size_t split = small_file.size() / 2;
  write_gzip(path, small_file.substr(0, split));
  write_gzip(path, small_file.substr(split), "ab");
  EXPECT_EQ(to_dense(read_matrix_market(path)), (Dense{{4, -1, 0}, {-1, 4, 0}, {0, 0, 0.25}}));
}

TEST(MatrixMarketFiles, ErrorsNameThePath) {
  TempDir dir;
  const std::string path = dir.file("bad.mtx.gz");
  write_gzip(path, "%%MatrixMarket matrix coordinate real general\n2 2 1\n3 1 1\n");
  EXPECT_EQ(error_of<InvalidInput>([&] { read_matrix_market(path); }),
            path + ":3: row index 3 out of range [1, 2]");
}

TEST(MatrixMarketFiles, MissingFileIsAResourceError) {
  TempDir dir;
  const std::string path = dir.file("absent.mtx");
  EXPECT_EQ(error_of<ResourceError>([&] { read_matrix_market(path); }),
            "cannot open '" + path + "': No such file or directory");
  EXPECT_EQ(error_of<ResourceError>([&] { read_dense_matrix_market(path); }),
            "cannot open '" + path + "': No such file or directory");
}

TEST(MatrixMarketFiles, CorruptGzip) {
  TempDir dir;
  std::string text = small_file;
  for (int k = 0; k < 200; ++k) text += "% padding so that the deflate stream is long enough to damage\n";
  write_gzip(dir.file("good.mtx.gz"), text);
  const std::string good = read_bytes(dir.file("good.mtx.gz"));
  ASSERT_GT(good.size(), 40u);

  const std::string truncated = dir.file("truncated.mtx.gz");
  write_text(truncated, good.substr(0, good.size() / 2));
  EXPECT_EQ(error_of<InvalidInput>([&] { read_matrix_market(truncated); }),
            truncated + ": corrupt gzip stream: unexpected end of file");

  // The gzip trailer is CRC-32 then the length, each 4 bytes.
  std::string bad_crc = good;
  bad_crc[bad_crc.size() - 8] ^= 0x5a;
  const std::string crc_path = dir.file("bad_crc.mtx.gz");
  write_text(crc_path, bad_crc);
  EXPECT_EQ(error_of<InvalidInput>([&] { read_matrix_market(crc_path); }),
            crc_path + ": corrupt gzip stream: incorrect data check");

  std::string bad_length = good;
  bad_length[bad_length.size() - 1] ^= 0x01;
  const std::string length_path = dir.file("bad_length.mtx.gz");
  write_text(length_path, bad_length);
  EXPECT_EQ(error_of<InvalidInput>([&] { read_matrix_market(length_path); }),
            length_path + ": corrupt gzip stream: incorrect length check");

  // Damaged deflate data: zlib reports an invalid code or distance, or (if it still decodes) a CRC mismatch.
  std::string flipped = good;
  for (std::size_t k = 12; k < flipped.size() - 8; k += 3) flipped[k] = static_cast<char>(~flipped[k]);
  const std::string flipped_path = dir.file("flipped.mtx.gz");
  write_text(flipped_path, flipped);
  const std::string message = error_of<InvalidInput>([&] { read_matrix_market(flipped_path); });
  EXPECT_EQ(message.rfind(flipped_path + ": corrupt gzip stream: ", 0), 0u) << message;

  const std::string only_magic = dir.file("only_magic.mtx.gz");
  write_text(only_magic, "\x1f\x8b");
  EXPECT_EQ(error_of<InvalidInput>([&] { read_matrix_market(only_magic); }),
            only_magic + ": corrupt gzip stream: unexpected end of file");
}

TEST(MatrixMarketFiles, GzipBombIsRefusedEarly) {
  TempDir dir;
  // 160 MiB of blanks after a valid banner deflate to about 160 KB, a ratio near 1000: past the limit of
  // 100 times that plus 64 MiB.
  const std::string path = dir.file("bomb.mtx.gz");
  gzFile gz = gzopen(path.c_str(), "wb9");
  ASSERT_NE(gz, nullptr);
  const std::string banner = "%%MatrixMarket matrix coordinate real general\n";
  ASSERT_EQ(gzwrite(gz, banner.data(), static_cast<unsigned>(banner.size())), static_cast<int>(banner.size()));
  const std::string blanks(1 << 20, ' ');
  for (int k = 0; k < 160; ++k)
    ASSERT_EQ(gzwrite(gz, blanks.data(), static_cast<unsigned>(blanks.size())), static_cast<int>(blanks.size()));
  ASSERT_EQ(gzclose(gz), Z_OK);
  const std::string message = error_of<InvalidInput>([&] { read_matrix_market(path); });
  EXPECT_NE(message.find("refused as a likely gzip bomb"), std::string::npos) << message;
  EXPECT_EQ(message.rfind(path + ": ", 0), 0u) << message;
}

// ---- hostile input in messages -----------------------------------------------------------------------------

TEST(QuotedInput, ShortTextIsKeptAndEscaped) {
  EXPECT_EQ(quote("abc"), "'abc'");
  EXPECT_EQ(quote("a\nb\tc\\"), "'a\\nb\\tc\\\\'");
  EXPECT_EQ(quote(std::string("\x01\x7f", 2)), "'\\x01\\x7f'");
  EXPECT_EQ(quote("caf\xc3\xa9"), "'caf\xc3\xa9'");                // valid UTF-8 passes through
  EXPECT_EQ(quote("\xff\xc3("), "'\\xff\\xc3('");                 // invalid bytes are escaped
  EXPECT_EQ(quote("\xed\xa0\x80"), "'\\xed\\xa0\\x80'");       // a UTF-16 surrogate is not UTF-8
  EXPECT_EQ(quote("\xe0\x80\x80"), "'\\xe0\\x80\\x80'");       // nor an overlong form
}

TEST(QuotedInput, LongTextIsCutOnACharacterBoundaryWithItsLength) {
  EXPECT_EQ(quote(std::string(1000000, 'x'), 5), "'xxxxx'... (1000000 bytes in all)");
  EXPECT_EQ(printable("ab\xc3\xa9", 3), "ab... (4 bytes in all)");  // never half a character
  EXPECT_EQ(printable(std::string(10, 'y'), 10), "yyyyyyyyyy");
}

TEST(MatrixMarketErrors, HugeAndBinaryTokensAreQuotedShortAndEscaped) {
  const std::string huge(1 << 20, 'x');
  EXPECT_EQ(parse_error("%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 " + huge + "\n"),
            "A.mtx:3: invalid value '" + std::string(40, 'x') + "'... (1048576 bytes in all)");
  EXPECT_EQ(parse_error("%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 \x01\xff\x1b[31m\n"),
            "A.mtx:3: invalid value '\\x01\\xff\\x1b[31m'");
  EXPECT_EQ(parse_error("%%MatrixMarket matrix " + huge + " real general\n"),
            "A.mtx:1: unknown format '" + std::string(40, 'x') + "'... (1048576 bytes in all) (expected coordinate or array)");
  const std::string message = error_of<InvalidInput>(
      [&] { parse_matrix_market("%%MatrixMarket matrix coordinate real general\n2 2 1\n3 1 1\n", huge); });
  EXPECT_LT(message.size(), 300u);
  EXPECT_NE(message.find("(1048576 bytes in all)"), std::string::npos) << message;
}

TEST(MatrixMarketErrors, DuplicatesThatSumToInfinity) {
  EXPECT_EQ(parse_error("%%MatrixMarket matrix coordinate real general\n2 2 2\n2 1 1e308\n2 1 1e308\n"),
            "A.mtx: the entries at (2, 1) (1-based) repeat, and their values sum to a number that is not finite");
  EXPECT_EQ(error_of<InvalidInput>([] {
              parse_dense_matrix_market("%%MatrixMarket matrix coordinate real general\n2 1 2\n2 1 -1e308\n"
                                        "2 1 -1e308\n", "b.mtx");
            }),
            "b.mtx:4: entry (2, 1) repeats, and its values sum to a number that is not finite");
}

TEST(MatrixMarketErrors, CallerLimitsComeBeforeAnyAllocation) {
  MatrixMarketOptions sparse;
  sparse.max_dimension = 1000;
  EXPECT_EQ(error_of<ResourceError>([&] {
              parse_matrix_market("%%MatrixMarket matrix coordinate real general\n3 2000000000 0\n", "A.mtx", sparse);
            }),
            "A.mtx:2: 3 x 2000000000 matrix: dimension 2000000000 exceeds the limit of 1000 set by the caller");
  DenseMatrixMarketOptions dense;
  dense.max_entries = 1000;
  EXPECT_EQ(error_of<ResourceError>([&] {
              parse_dense_matrix_market("%%MatrixMarket matrix coordinate real general\n3 1000000000 0\n", "b.mtx",
                                        dense);
            }),
            "b.mtx:2: a dense 3 x 1000000000 matrix exceeds the limit of 1000 entries set by the caller");
  dense.rows = 4;
  EXPECT_EQ(error_of<InvalidInput>([&] {
              parse_dense_matrix_market("%%MatrixMarket matrix array real general\n3 1\n1\n2\n3\n", "b.mtx", dense);
            }),
            "b.mtx:2: the matrix has 3 rows; 4 are needed");
}

// ---- dense reader and writer -------------------------------------------------------------------------------

TEST(DenseMatrixMarket, WriteReadRoundTripIsExact) {
  TempDir dir;
  DenseMatrix m;
  m.rows = 3;
  m.cols = 3;
  m.values = {1.0 / 3.0,
              -0.0,
              std::numeric_limits<double>::denorm_min(),
              std::numeric_limits<double>::max(),
              -std::numeric_limits<double>::min(),
              3.141592653589793,
              1e-300,
              -123456789.123456789,
              0.1};
  const std::string path = dir.file("x.mtx");
  write_dense_matrix_market(path, m);
  EXPECT_EQ(read_bytes(path).rfind("%%MatrixMarket matrix array real general\n3 3\n", 0), 0u);
  const DenseMatrix r = read_dense_matrix_market(path);
  EXPECT_EQ(r.rows, 3);
  EXPECT_EQ(r.cols, 3);
  ASSERT_EQ(r.values.size(), m.values.size());
  EXPECT_EQ(std::memcmp(r.values.data(), m.values.data(), m.values.size() * sizeof(double)), 0);  // -0 too
}

TEST(DenseMatrixMarket, EmptyRoundTrip) {
  TempDir dir;
  DenseMatrix m;
  m.rows = 4;
  m.cols = 0;
  write_dense_matrix_market(dir.file("e.mtx"), m);
  const DenseMatrix r = read_dense_matrix_market(dir.file("e.mtx"));
  EXPECT_EQ(r.rows, 4);
  EXPECT_EQ(r.cols, 0);
  EXPECT_TRUE(r.values.empty());
}

TEST(DenseMatrixMarket, ArrayIsColumnMajor) {
  TempDir dir;
  write_gzip(dir.file("b.mtx.gz"),
             "%%MatrixMarket matrix array integer general\n% comment\n2 3\n1\n2\n3\n4\n5\n-6\n");
  const DenseMatrix r = read_dense_matrix_market(dir.file("b.mtx.gz"));
  EXPECT_EQ(r.rows, 2);
  EXPECT_EQ(r.cols, 3);
  EXPECT_EQ(r.values, (std::vector<double>{1, 2, 3, 4, 5, -6}));
}

TEST(DenseMatrixMarket, CoordinateFillsMissingWithZero) {
  TempDir dir;
  write_text(dir.file("c.mtx"),
             "%%MatrixMarket matrix coordinate real general\n3 2 3\n2 1 1.5\n3 2 -1\n2 1 1\n");
  const DenseMatrix r = read_dense_matrix_market(dir.file("c.mtx"));
  EXPECT_EQ(r.values, (std::vector<double>{0, 2.5, 0, 0, 0, -1}));
  write_text(dir.file("s.mtx"), "%%MatrixMarket matrix coordinate real symmetric\n2 2 2\n2 1 3\n2 2 1\n");
  EXPECT_EQ(read_dense_matrix_market(dir.file("s.mtx")).values, (std::vector<double>{0, 3, 3, 1}));
}

TEST(DenseMatrixMarket, Errors) {
  TempDir dir;
  const auto dense_error = [&](const std::string& text) {
    write_text(dir.file("d.mtx"), text);
    return error_of<InvalidInput>([&] { read_dense_matrix_market(dir.file("d.mtx")); });
  };
  const std::string p = dir.file("d.mtx");
  EXPECT_EQ(dense_error("%%MatrixMarket matrix array real general\n2 3\n1\n2\n"),
            p + ":5: truncated: expected 6 values, found 2");
  EXPECT_EQ(dense_error("%%MatrixMarket matrix array real general\n1 2\n1\n2\n3\n"),
            p + ":5: more values than the 2 declared in the size line");
  EXPECT_EQ(dense_error("%%MatrixMarket matrix array real general\n1 2\n1 2\n2\n"),
            p + ":3: expected one value per line, found extra text '2'");
  EXPECT_EQ(dense_error("%%MatrixMarket matrix array real general\n2 1\n1\nnan\n"),
            p + ":4: value 'nan' is not finite");
  EXPECT_EQ(dense_error("%%MatrixMarket matrix array real general\n2 1 5\n1\n2\n"), p + ":2: expected 'rows cols'");
  EXPECT_EQ(dense_error("%%MatrixMarket matrix array real symmetric\n2 2\n1\n2\n3\n"),
            p + ":1: only 'general' array files are supported, not 'symmetric'");
  EXPECT_EQ(dense_error("%%MatrixMarket matrix coordinate pattern general\n2 2 1\n1 1\n"),
            p + ":1: a pattern file has no values to read as a dense matrix");
  EXPECT_EQ(dense_error("%%MatrixMarket matrix coordinate real general\n2 2 1\n1 3 1\n"),
            p + ":3: column index 3 out of range [1, 2]");
  // A size line that promises more values than the file holds is a truncation, not a huge allocation.
  EXPECT_EQ(dense_error("%%MatrixMarket matrix array real general\n100000 100000\n1\n"),
            p + ":4: truncated: expected 10000000000 values, found 1");
  write_text(p, "%%MatrixMarket matrix array real general\n4000000000 4000000000\n");
  EXPECT_EQ(error_of<ResourceError>([&] { read_dense_matrix_market(p); }),
            p + ":2: a dense 4000000000 x 4000000000 matrix is too large");
}

TEST(DenseMatrixMarket, WriterErrors) {
  TempDir dir;
  DenseMatrix m;
  m.rows = 2;
  m.cols = 2;
  m.values = {1, 2, 3};
  EXPECT_EQ(error_of<InvalidInput>([&] { write_dense_matrix_market(dir.file("w.mtx"), m); }),
            "write_dense_matrix_market: values must hold rows * cols = 2 * 2 entries, has 3");
  m.values.push_back(4);
  const std::string path = dir.file("no_such_folder/w.mtx");
  EXPECT_EQ(error_of<ResourceError>([&] { write_dense_matrix_market(path, m); }),
            "cannot open '" + path + "' for writing: No such file or directory");
}

// ---- real matrices ---------------------------------------------------------------------------------------

/// One row of the table in the matrix folder's README.md.
struct ReadmeRow {
  std::int64_t rows = 0, stored = 0, full_nnz = 0;
  std::string field, symmetry;
};

/// The README table, by file name (empty when the README is absent).
std::map<std::string, ReadmeRow> readme_table() {
  std::map<std::string, ReadmeRow> table;
  std::ifstream in(testing::matrix_path("README.md"));
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    std::stringstream s(line);
    std::string cell;
    while (std::getline(s, cell, '|')) {
      const auto b = cell.find_first_not_of(' '), e = cell.find_last_not_of(' ');
      cells.push_back(b == std::string::npos ? "" : cell.substr(b, e - b + 1));
    }
    // | file | collection id | rows | stored entries | full nnz | field | symmetry | ...
    if (cells.size() < 8 || cells[1].find(".mtx") == std::string::npos) continue;
    ReadmeRow row;
    row.rows = std::stoll(cells[3]);
    row.stored = std::stoll(cells[4]);
    row.full_nnz = std::stoll(cells[5]);
    row.field = cells[6];
    row.symmetry = cells[7];
    table[cells[1]] = row;
  }
  return table;
}

void expect_matches_readme(const std::string& file) {
  SPADE_REQUIRE_MATRIX(file);
  const auto table = readme_table();
  const auto it = table.find(file);
  ASSERT_NE(it, table.end()) << file << " has no row in " << testing::matrix_path("README.md");
  MatrixMarketOptions options;
  options.pattern_values = PatternValues::ones;
  MatrixMarketInfo info;
  const SparseMatrix a = read_matrix_market(testing::matrix_path(file), options, &info);
  EXPECT_EQ(a.rows(), it->second.rows);
  EXPECT_EQ(a.nnz(), it->second.full_nnz);
  EXPECT_EQ(info.stored_entries, it->second.stored);
  EXPECT_EQ(info.field, it->second.field);
  EXPECT_EQ(info.symmetry, it->second.symmetry);
  if (info.symmetry == "symmetric") {
    EXPECT_TRUE(a.is_symmetric());
  }
}

TEST(RealMatrices, Bus494) { expect_matches_readme("494_bus.mtx.gz"); }
TEST(RealMatrices, Bcsstk16) { expect_matches_readme("bcsstk16.mtx.gz"); }
TEST(RealMatrices, MdualLap) { expect_matches_readme("mdual_lap.mtx.gz"); }
TEST(RealMatrices, NotreDameWwwPatternAsOnes) { expect_matches_readme("NotreDame_www.mtx.gz"); }
TEST(RealMatrices, C62) { expect_matches_readme("c-62.mtx.gz"); }

TEST(RealMatrices, EveryFileInTheReadme) {
  const auto table = readme_table();
  if (table.empty()) GTEST_SKIP() << "no README.md table in " << testing::matrix_dir();
  int read = 0;
  for (const auto& [file, row] : table) {
    if (!testing::matrix_exists(file)) continue;
    SCOPED_TRACE(file);
    expect_matches_readme(file);
    ++read;
  }
  EXPECT_GT(read, 0);
}

TEST(RealMatrices, LaplacianOfTheGraphFileEqualsTheLapFile) {
  SPADE_REQUIRE_MATRIX("4elt_graph.mtx.gz");
  SPADE_REQUIRE_MATRIX("4elt_lap.mtx.gz");
  MatrixMarketOptions options;
  options.pattern_values = PatternValues::laplacian;
  const SparseMatrix g = read_matrix_market(testing::matrix_path("4elt_graph.mtx.gz"), options);
  const SparseMatrix l = read_matrix_market(testing::matrix_path("4elt_lap.mtx.gz"));
  EXPECT_EQ(g.col_ptr(), l.col_ptr());
  EXPECT_EQ(g.row_ind(), l.row_ind());
  EXPECT_EQ(g.values(), l.values());
}

// ---- generators ------------------------------------------------------------------------------------------

/// The grid Laplacian built the slow way: every pair of nodes within the stencil, through triplets.
SparseMatrix brute_force_laplacian(int nx, int ny, int nz, int reach, double diagonal) {
  std::vector<std::int64_t> r, c;
  std::vector<double> v;
  for (int z = 0; z < nz; ++z)
    for (int y = 0; y < ny; ++y)
      for (int x = 0; x < nx; ++x)
        for (int z2 = 0; z2 < nz; ++z2)
          for (int y2 = 0; y2 < ny; ++y2)
            for (int x2 = 0; x2 < nx; ++x2) {
              const int dx = std::abs(x - x2), dy = std::abs(y - y2), dz = std::abs(z - z2);
              const bool neighbour = dx <= 1 && dy <= 1 && dz <= 1 && dx + dy + dz >= 1 && dx + dy + dz <= reach;
              if (!neighbour && dx + dy + dz != 0) continue;
              r.push_back(x + nx * (y + ny * z));
              c.push_back(x2 + nx * (y2 + ny * z2));
              v.push_back(dx + dy + dz == 0 ? diagonal : -1.0);
            }
  const std::int64_t n = std::int64_t{nx} * ny * nz;
  return SparseMatrix::from_triplets(n, n, r, c, v);
}

void expect_same(const SparseMatrix& a, const SparseMatrix& b) {
  EXPECT_EQ(a.rows(), b.rows());
  EXPECT_EQ(a.col_ptr(), b.col_ptr());
  EXPECT_EQ(a.row_ind(), b.row_ind());
  EXPECT_EQ(a.values(), b.values());
}

TEST(Generators, MatchTheBruteForceConstruction) {
  for (const auto& [nx, ny] : std::vector<std::pair<int, int>>{{1, 1}, {1, 5}, {5, 1}, {2, 2}, {4, 3}, {7, 6}}) {
    SCOPED_TRACE(std::to_string(nx) + " x " + std::to_string(ny));
    expect_same(laplacian_2d(nx, ny, Stencil::five_point), brute_force_laplacian(nx, ny, 1, 1, 4));
    expect_same(laplacian_2d(nx, ny, Stencil::nine_point), brute_force_laplacian(nx, ny, 1, 3, 8));
  }
  for (const auto& [nx, ny, nz] : std::vector<std::tuple<int, int, int>>{{1, 1, 1}, {1, 1, 4}, {3, 2, 4}, {4, 4, 4}}) {
    SCOPED_TRACE(std::to_string(nx) + " x " + std::to_string(ny) + " x " + std::to_string(nz));
    expect_same(laplacian_3d(nx, ny, nz, Stencil::seven_point), brute_force_laplacian(nx, ny, nz, 1, 6));
    expect_same(laplacian_3d(nx, ny, nz, Stencil::twenty_seven_point), brute_force_laplacian(nx, ny, nz, 3, 26));
  }
}

TEST(Generators, FivePointOnThreeByThree) {
  const SparseMatrix a = laplacian_2d(3, 3);
  const Dense d = to_dense(a);
  // Node 4 is the centre (1, 1): neighbours 1, 3, 5, 7.
  EXPECT_EQ(d[4], (std::vector<double>{0, -1, 0, -1, 4, -1, 0, -1, 0}));
  // Node 0 is the corner (0, 0): neighbours 1 and 3.
  EXPECT_EQ(d[0], (std::vector<double>{4, -1, 0, -1, 0, 0, 0, 0, 0}));
}

TEST(Generators, SizesAndEntryCounts) {
  for (const std::int64_t nx : {1, 2, 3, 17, 64})
    for (const std::int64_t ny : {1, 4, 31}) {
      const SparseMatrix five = laplacian_2d(static_cast<index_t>(nx), static_cast<index_t>(ny));
      EXPECT_EQ(five.rows(), nx * ny);
      EXPECT_EQ(five.cols(), nx * ny);
      EXPECT_EQ(five.nnz(), 5 * nx * ny - 2 * nx - 2 * ny);
      const SparseMatrix nine = laplacian_2d(static_cast<index_t>(nx), static_cast<index_t>(ny), Stencil::nine_point);
      EXPECT_EQ(nine.nnz(), (3 * nx - 2) * (3 * ny - 2));
      for (const std::int64_t nz : {1, 5}) {
        const auto [x, y, z] = std::tuple<index_t, index_t, index_t>(static_cast<index_t>(nx),
                                                                      static_cast<index_t>(ny),
                                                                      static_cast<index_t>(nz));
        const SparseMatrix seven = laplacian_3d(x, y, z);
        EXPECT_EQ(seven.rows(), nx * ny * nz);
        EXPECT_EQ(seven.nnz(), 7 * nx * ny * nz - 2 * (nx * ny + ny * nz + nx * nz));
        EXPECT_EQ(laplacian_3d(x, y, z, Stencil::twenty_seven_point).nnz(), (3 * nx - 2) * (3 * ny - 2) * (3 * nz - 2));
      }
    }
}

TEST(Generators, LargeGrids) {
  const SparseMatrix a = laplacian_2d(1024, 1024);
  EXPECT_EQ(a.rows(), 1024 * 1024);
  EXPECT_EQ(a.nnz(), 5LL * 1024 * 1024 - 4 * 1024);
  const SparseMatrix b = laplacian_3d(128, 128, 128);
  EXPECT_EQ(b.rows(), 128 * 128 * 128);
  EXPECT_EQ(b.nnz(), 7LL * 128 * 128 * 128 - 6 * 128 * 128);
}

/// Checks symmetry and row sums: zero for interior nodes, positive for nodes on the boundary.
void expect_symmetric_with_dirichlet_row_sums(const SparseMatrix& a, int nx, int ny, int nz) {
  EXPECT_TRUE(a.is_symmetric());
  std::vector<double> ones(a.cols(), 1.0), sums(a.rows());
  a.multiply(ones.data(), sums.data());
  for (int z = 0; z < nz; ++z)
    for (int y = 0; y < ny; ++y)
      for (int x = 0; x < nx; ++x) {
        const bool interior =
            x > 0 && x < nx - 1 && y > 0 && y < ny - 1 && (nz == 1 || (z > 0 && z < nz - 1));
        const double s = sums[x + nx * (y + ny * z)];
        if (interior) {
          EXPECT_EQ(s, 0.0) << "(" << x << ", " << y << ", " << z << ")";
        } else {
          EXPECT_GT(s, 0.0) << "(" << x << ", " << y << ", " << z << ")";
        }
      }
}

TEST(Generators, SymmetricWithDirichletRowSums) {
  expect_symmetric_with_dirichlet_row_sums(laplacian_2d(9, 7), 9, 7, 1);
  expect_symmetric_with_dirichlet_row_sums(laplacian_2d(9, 7, Stencil::nine_point), 9, 7, 1);
  expect_symmetric_with_dirichlet_row_sums(laplacian_3d(6, 5, 4), 6, 5, 4);
  expect_symmetric_with_dirichlet_row_sums(laplacian_3d(6, 5, 4, Stencil::twenty_seven_point), 6, 5, 4);
}

TEST(Generators, ConvectionDiffusionEntriesOnThreeByThree) {
  // Wind +2 along x, -0.5 along y: row i's upstream neighbours are x - 1 and y + 1.
  const Dense d = to_dense(convection_diffusion_2d(3, 3, 2.0, -0.5));
  // Node 4, the centre (1, 1): diagonal 4 + 2 + 0.5; x - 1 (node 3) -3, x + 1 (node 5) -1, y - 1 (node 1)
  // -1, y + 1 (node 7) -1.5.
  EXPECT_EQ(d[4], (std::vector<double>{0, -1, 0, -3, 6.5, -1, 0, -1.5, 0}));
  // Node 0, the corner (0, 0): only the downstream x + 1 and the upstream y + 1.
  EXPECT_EQ(d[0], (std::vector<double>{6.5, -1, 0, -1.5, 0, 0, 0, 0, 0}));
  // Column 4: node 5 (x + 1) has node 4 upstream, node 1 (y - 1) too.
  EXPECT_EQ(d[5][4], -3.0);
  EXPECT_EQ(d[3][4], -1.0);
  EXPECT_EQ(d[1][4], -1.5);
  EXPECT_EQ(d[7][4], -1.0);
}

TEST(Generators, ConvectionDiffusion3dEntries) {
  const index_t nx = 4, ny = 3, nz = 5;
  const Dense d = to_dense(convection_diffusion_3d(nx, ny, nz, -1.0, 0.25, 3.0));
  const auto node = [&](index_t x, index_t y, index_t z) { return x + nx * (y + ny * z); };
  const index_t i = node(1, 1, 2);
  EXPECT_EQ(d[i][i], 6 + 1 + 0.25 + 3);
  EXPECT_EQ(d[i][node(0, 1, 2)], -1.0);   // x - 1: downstream of a negative wx
  EXPECT_EQ(d[i][node(2, 1, 2)], -2.0);   // x + 1: upstream
  EXPECT_EQ(d[i][node(1, 0, 2)], -1.25);  // y - 1: upstream of wy > 0
  EXPECT_EQ(d[i][node(1, 2, 2)], -1.0);
  EXPECT_EQ(d[i][node(1, 1, 1)], -4.0);   // z - 1: upstream of wz > 0
  EXPECT_EQ(d[i][node(1, 1, 3)], -1.0);
}

TEST(Generators, ConvectionDiffusionIsAnUnsymmetricMMatrix) {
  for (const SparseMatrix& a : {convection_diffusion_2d(9, 7, 1.0, 0.5), convection_diffusion_2d(5, 6, -3.0, 0.0),
                                convection_diffusion_3d(6, 5, 4, 1.0, 0.5, 0.25),
                                convection_diffusion_3d(3, 4, 5, 0.0, -2.0, 7.0)}) {
    EXPECT_FALSE(a.is_symmetric());
    EXPECT_EQ(a.transpose().col_ptr(), a.col_ptr());  // the pattern is the Laplacian's, symmetric
    EXPECT_EQ(a.transpose().row_ind(), a.row_ind());
    // An M-matrix by diagonal dominance: positive diagonal, off-diagonals <= 0, every row and column sum
    // >= 0 (up to rounding of the wind sums) and some > 0.
    std::vector<double> row_sum(a.rows(), 0.0), col_sum(a.cols(), 0.0), diagonal_sum(a.rows(), 0.0);
    for (index_t j = 0; j < a.cols(); ++j)
      for (offset_t p = a.col_ptr()[j]; p < a.col_ptr()[j + 1]; ++p) {
        const index_t i = a.row_ind()[p];
        const double v = a.values()[p];
        if (i == j) {
          EXPECT_GT(v, 0.0);
          diagonal_sum[i] = v;
        } else {
          EXPECT_LE(v, 0.0) << i << ", " << j;
        }
        row_sum[i] += v;
        col_sum[j] += v;
      }
    index_t strict_rows = 0;
    for (index_t i = 0; i < a.rows(); ++i) {
      EXPECT_GE(row_sum[i], -1e-14 * diagonal_sum[i]) << "row " << i;
      EXPECT_GE(col_sum[i], -1e-14 * diagonal_sum[i]) << "column " << i;
      if (row_sum[i] > 0.5) ++strict_rows;
    }
    EXPECT_GT(strict_rows, 0);
  }
  // Zero wind is the Laplacian.
  expect_same(convection_diffusion_2d(7, 5, 0.0, 0.0), laplacian_2d(7, 5));
  expect_same(convection_diffusion_3d(4, 3, 5, 0.0, 0.0, 0.0), laplacian_3d(4, 3, 5));
}

TEST(Generators, Errors) {
  EXPECT_EQ(error_of<InvalidInput>([] { laplacian_2d(0, 3); }),
            "laplacian_2d: grid sizes must be positive, got 0 x 3");
  EXPECT_EQ(error_of<InvalidInput>([] { laplacian_3d(2, -1, 2); }),
            "laplacian_3d: grid sizes must be positive, got 2 x -1 x 2");
  EXPECT_EQ(error_of<InvalidInput>([] { laplacian_2d(3, 3, Stencil::seven_point); }),
            "laplacian_2d: stencil must be five_point or nine_point");
  EXPECT_EQ(error_of<InvalidInput>([] { laplacian_3d(3, 3, 3, Stencil::nine_point); }),
            "laplacian_3d: stencil must be seven_point or twenty_seven_point");
  EXPECT_EQ(error_of<ResourceError>([] { laplacian_2d(65536, 32768); }),
            "laplacian_2d: a 65536 x 32768 grid has more than 2147483647 nodes (32-bit indices)");
  EXPECT_EQ(error_of<ResourceError>([] { laplacian_3d(2048, 1024, 1024); }),
            "laplacian_3d: a 2048 x 1024 x 1024 grid has more than 2147483647 nodes (32-bit indices)");
  const index_t m = std::numeric_limits<index_t>::max();
  EXPECT_EQ(error_of<ResourceError>([&] { laplacian_3d(m, m, m, Stencil::twenty_seven_point); }),
            "laplacian_3d: a 2147483647 x 2147483647 x 2147483647 grid has more than 2147483647 nodes (32-bit "
            "indices)");
  EXPECT_EQ(error_of<InvalidInput>([] { convection_diffusion_2d(0, 3, 1.0, 1.0); }),
            "convection_diffusion_2d: grid sizes must be positive, got 0 x 3");
  EXPECT_EQ(error_of<InvalidInput>([] { convection_diffusion_2d(3, 3, std::nan(""), 1.0); }),
            "convection_diffusion_2d: the wind must be finite, got (nan, 1.000000)");
  EXPECT_THROW(convection_diffusion_3d(2, 2, 2, 0.0, 0.0, std::numeric_limits<double>::infinity()), InvalidInput);
}

}  // namespace
}  // namespace spade
