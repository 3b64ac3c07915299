// End-to-end tests of the `spade` program (drivers/spade_main.cpp): runs the built binary (SPADE_BINARY)
// on small Matrix Market files written to a temporary folder and checks the exit status, the report on
// stdout, the --out and --json files, and for every kind of bad input the one-line error on stderr.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <zlib.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "../kernels/cuda_check.hpp"
#include "spade/version.h"
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

constexpr double eps = std::numeric_limits<double>::epsilon();

struct Outcome {
  int status = -1;  ///< exit status, or -1 when the program did not exit normally (a crash)
  std::string out;  ///< stdout
  std::string err;  ///< stderr
};

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_file(const fs::path& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

/// The nx x ny five-point Laplacian (diagonal 4, -1 per grid neighbour), lower triangle, as a
/// `coordinate real symmetric` file; `diagonal_override` >= 0 replaces the diagonal of that node by -1.
std::string laplacian_file(int nx, int ny, int diagonal_override = -1) {
  std::vector<std::string> entries;
  for (int y = 0; y < ny; ++y)
    for (int x = 0; x < nx; ++x) {
      const int j = x + nx * y;
      entries.push_back(std::to_string(j + 1) + " " + std::to_string(j + 1) + (j == diagonal_override ? " -1" : " 4"));
      if (x + 1 < nx) entries.push_back(std::to_string(j + 2) + " " + std::to_string(j + 1) + " -1");
      if (y + 1 < ny) entries.push_back(std::to_string(j + nx + 1) + " " + std::to_string(j + 1) + " -1");
    }
  std::string text = "%%MatrixMarket matrix coordinate real symmetric\n% a test Laplacian\n";
  text += std::to_string(nx * ny) + " " + std::to_string(nx * ny) + " " + std::to_string(entries.size()) + "\n";
  for (const std::string& e : entries) text += e + "\n";
  return text;
}

/// A dense `array real general` file, column-major values.
std::string array_file(int rows, int cols, const std::vector<double>& values) {
  std::ostringstream s;
  s.precision(17);
  s << "%%MatrixMarket matrix array real general\n" << rows << " " << cols << "\n";
  for (const double v : values) s << v << "\n";
  return s.str();
}

/// Reads a dense `array` file as written by spade: rows, cols and the column-major values.
struct Dense {
  int rows = 0, cols = 0;
  std::vector<double> values;
};
Dense read_array(const fs::path& path) {
  std::istringstream in(read_file(path));
  std::string line;
  while (std::getline(in, line) && !line.empty() && line[0] == '%') {
  }
  Dense d;
  std::istringstream(line) >> d.rows >> d.cols;
  for (double v; in >> v;) d.values.push_back(v);
  return d;
}

/// The solution the program uses when no --rhs is given: x_true(i, r) = 1 + sin(i + r).
double x_true(int i, int r) { return 1 + std::sin(static_cast<double>(i) + r); }

class Cli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string pattern = (fs::temp_directory_path() / "spade_test_cli_XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  static fs::path path(const std::string& name) { return dir_ / name; }

  /// Writes `text` to a file in the temporary folder and returns its path.
  static std::string file(const std::string& name, const std::string& text) {
    write_file(path(name), text);
    return path(name).string();
  }

  /// Runs `spade <args>` (args are passed to the shell as written), with `environment` (shell assignments
  /// such as "CUDA_VISIBLE_DEVICES=") before it.
  static Outcome spade(const std::string& args, const std::string& environment = "") {
    const fs::path err = path("stderr.txt");
    const std::string command = environment + " " + std::string(SPADE_BINARY) + " " + args + " 2>'" + err.string() + "'";
    Outcome run;
    FILE* pipe = popen(command.c_str(), "r");
    if (pipe == nullptr) return run;
    char buffer[4096];
    for (std::size_t got; (got = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) run.out.append(buffer, got);
    const int status = pclose(pipe);
    run.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    run.err = read_file(err);
    return run;
  }

  /// The run failed with `status`, nothing on stdout, and stderr ends in exactly one line
  /// `spade: error: ...` containing every one of `fragments` (progress lines may come before it).
  static void expect_error(const Outcome& run, int status, const std::vector<std::string>& fragments) {
    EXPECT_EQ(run.status, status) << run.err;
    EXPECT_EQ(run.out, "") << "stdout must stay clean on error";
    const std::vector<std::string> lines = lines_of(run.err);
    ASSERT_FALSE(lines.empty());
    int error_lines = 0;
    for (const std::string& line : lines) error_lines += line.find("error") != std::string::npos;
    EXPECT_EQ(error_lines, 1) << run.err;
    const std::string& last = lines.back();
    EXPECT_EQ(last.rfind("spade: error: ", 0), 0u) << run.err;
    for (const std::string& f : fragments) EXPECT_NE(last.find(f), std::string::npos) << "'" << f << "' in: " << last;
  }

  static fs::path dir_;
};

fs::path Cli::dir_;

TEST_F(Cli, SolveWritesReportSolutionAndJson) {
  const std::string A = file("lap.mtx", laplacian_file(12, 10));
  const Outcome run = spade("solve " + A + " --out " + path("x.mtx").string() + " --json " + path("r.json").string());
  ASSERT_EQ(run.status, 0) << run.err;
  for (const char* expected : {"lap.mtx", "120 x 120", "nnz(L)", "supernodes", "fill ratio", "GFlop", "numeric",
                               "refine", "berr", "forward error", "stop", "written to"})
    EXPECT_NE(run.out.find(expected), std::string::npos) << expected << " missing from:\n" << run.out;
  EXPECT_NE(run.err.find("[spade] numeric factorization ... "), std::string::npos) << run.err;

  // The solution round-trips through the --out file: close to x_true.
  const Dense x = read_array(path("x.mtx"));
  ASSERT_EQ(x.rows, 120);
  ASSERT_EQ(x.cols, 1);
  ASSERT_EQ(x.values.size(), 120u);
  for (int i = 0; i < 120; ++i) EXPECT_NEAR(x.values[i], x_true(i, 0), 1e3 * eps) << i;

  // The JSON twin holds the same fields.
  const nlohmann::json j = nlohmann::json::parse(read_file(path("r.json")));
  EXPECT_EQ(j["command"], "solve");
  EXPECT_EQ(j["input"]["rows"], 120);
  EXPECT_EQ(j["input"]["nnz"], 120 * 5 - 2 * 12 - 2 * 10);
  EXPECT_EQ(j["input"]["symmetric"], true);
  EXPECT_EQ(j["input"]["field"], "real");
  EXPECT_GT(j["analysis"]["nnz_l"].get<long>(), 0);
  EXPECT_GT(j["analysis"]["supernodes"].get<int>(), 0);
  EXPECT_GE(j["analysis"]["fill_ratio"].get<double>(), 1.0);
  EXPECT_TRUE(j["phases"].contains("numeric"));
  EXPECT_TRUE(j["phases"]["numeric"].contains("gflops_per_second"));
  EXPECT_GT(j["threads"].get<int>(), 0);
  const nlohmann::json& s = j["solve"];
  EXPECT_EQ(s["nrhs"], 1);
  EXPECT_EQ(s["max_steps"], 10);
  ASSERT_FALSE(s["steps"].empty());
  EXPECT_TRUE(s["steps"][0].contains("berr"));
  EXPECT_LE(s["berr"].get<double>(), 4 * eps);
  EXPECT_LE(s["forward_error"].get<double>(), 1e3 * eps);
  EXPECT_EQ(s["stop"], "converged");
  EXPECT_EQ(s["output"], path("x.mtx").string());
}

TEST_F(Cli, SolveWithRightHandSideFile) {
  const std::string A = file("lap_rhs.mtx", laplacian_file(5, 4));
  // b = A e for two columns e = ones and e = 2 * ones: row sums of the Laplacian are 4 - neighbours.
  std::vector<double> b;
  for (int scale = 1; scale <= 2; ++scale)
    for (int y = 0; y < 4; ++y)
      for (int x = 0; x < 5; ++x) b.push_back(scale * (4.0 - (x > 0) - (x < 4) - (y > 0) - (y < 3)));
  const std::string B = file("b.mtx", array_file(20, 2, b));
  const Outcome run = spade("solve " + A + " --rhs " + B + " --nrhs 2 --out " + path("x2.mtx").string() + " --json " +
                            path("r2.json").string());
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(run.out.find("forward error"), std::string::npos) << "no forward error without a known solution";
  const Dense x = read_array(path("x2.mtx"));
  ASSERT_EQ(x.cols, 2);
  for (int r = 0; r < 2; ++r)
    for (int i = 0; i < 20; ++i) EXPECT_NEAR(x.values[i + 20 * r], r + 1.0, 1e3 * eps);
  const nlohmann::json j = nlohmann::json::parse(read_file(path("r2.json")));
  EXPECT_EQ(j["solve"]["nrhs"], 2);
  EXPECT_TRUE(j["solve"]["forward_error"].is_null());
}

TEST_F(Cli, SeveralKnownRightHandSidesAndNoRefinement) {
  const std::string A = file("lap_nrhs.mtx", laplacian_file(6, 6));
  const Outcome run = spade("solve " + A + " --nrhs 3 --refine 0 --out " + path("x3.mtx").string() + " --json " +
                            path("r3.json").string());
  ASSERT_EQ(run.status, 0) << run.err;
  const Dense x = read_array(path("x3.mtx"));
  ASSERT_EQ(x.cols, 3);
  for (int r = 0; r < 3; ++r)
    for (int i = 0; i < 36; ++i) EXPECT_NEAR(x.values[i + 36 * r], x_true(i, r), 1e3 * eps);
  const nlohmann::json j = nlohmann::json::parse(read_file(path("r3.json")));
  EXPECT_EQ(j["solve"]["nrhs"], 3);
  EXPECT_EQ(j["solve"]["steps"].size(), 1u) << "--refine 0 is the plain solve";
  EXPECT_TRUE(j["solve"]["berr"].is_number());
}

TEST_F(Cli, EveryOrderingByName) {
  const std::string A = file("lap_ord.mtx", laplacian_file(9, 7));
  for (const std::string name : {"natural", "amd", "metis"}) {
    const std::string json = path("ord_" + name + ".json").string();
    const Outcome run = spade("solve " + A + " --ordering " + name + " --threads 1 --json " + json);
    ASSERT_EQ(run.status, 0) << run.err;
    const nlohmann::json j = nlohmann::json::parse(read_file(json));
    EXPECT_EQ(j["analysis"]["ordering"], name);
    EXPECT_EQ(j["threads"], 1);
  }
}

TEST_F(Cli, GzipAndPatternFiles) {
  const std::string text = laplacian_file(7, 5);
  const std::string gz = path("lap.mtx.gz").string();
  gzFile out = gzopen(gz.c_str(), "wb");
  ASSERT_NE(out, nullptr);
  ASSERT_EQ(gzwrite(out, text.data(), static_cast<unsigned>(text.size())), static_cast<int>(text.size()));
  ASSERT_EQ(gzclose(out), Z_OK);
  EXPECT_EQ(spade("solve " + gz).status, 0);

  const std::string P =
      file("pattern.mtx", "%%MatrixMarket matrix coordinate pattern symmetric\n3 3 5\n1 1\n2 1\n2 2\n3 2\n3 3\n");
  const Outcome run = spade("solve " + P + " --pattern-values laplacian");
  EXPECT_EQ(run.status, 0) << run.err;
  EXPECT_NE(run.out.find("pattern symmetric"), std::string::npos) << run.out;
  EXPECT_EQ(spade("solve " + P + " --pattern-values ones --factorization cholesky").status, 3)
      << "the all-ones 3 x 3 pattern is not SPD";
}

TEST_F(Cli, Info) {
  const std::string A = file("lap_info.mtx", laplacian_file(8, 8));
  const Outcome run = spade("info " + A + " --ordering amd --json " + path("info.json").string());
  ASSERT_EQ(run.status, 0) << run.err;
  for (const char* expected : {"64 x 64", "real symmetric", "symmetric      yes", "diagonal       64 of 64", "amd",
                               "supernodes", "nnz(L)", "flops", "order", "symbolic"})
    EXPECT_NE(run.out.find(expected), std::string::npos) << expected << " missing from:\n" << run.out;
  EXPECT_EQ(run.out.find("berr"), std::string::npos) << "info does not solve";
  const nlohmann::json j = nlohmann::json::parse(read_file(path("info.json")));
  EXPECT_EQ(j["command"], "info");
  EXPECT_EQ(j["analysis"]["ordering"], "amd");
  EXPECT_FALSE(j.contains("solve"));

  // A matrix Cholesky cannot take is still described; the analysis says why it was skipped.
  const std::string N =
      file("info_general.mtx", "%%MatrixMarket matrix coordinate real general\n2 2 3\n1 1 4\n2 1 1\n2 2 4\n");
  const Outcome general = spade("info " + N);
  ASSERT_EQ(general.status, 0) << general.err;
  EXPECT_NE(general.out.find("symmetric      no"), std::string::npos) << general.out;
  EXPECT_NE(general.out.find("skipped"), std::string::npos) << general.out;
  EXPECT_NE(general.out.find("diagonal       2 of 2"), std::string::npos) << general.out;
}

TEST_F(Cli, InfoOnUnsymmetricMatrixReportsTheMatching) {
  // The tridiagonal golden case of test_matching.cpp with A(0, 3) = 0.5 added (the pattern is no longer
  // symmetric; the maximum product stays 2 * 5 * 6 * 2 = 120 > 0.5 * 2 * 4 * 6): every row moves, the diagonal
  // ratios go from 1/2, 1/5, 1/6, 1/2 (geometric mean 120^(-1/4)) to 1.
  const std::string A = file("tridiag_unsym.mtx",
                             "%%MatrixMarket matrix coordinate real general\n4 4 11\n1 1 1\n2 1 2\n1 2 5\n2 2 1\n"
                             "3 2 4\n2 3 3\n3 3 1\n4 3 6\n3 4 2\n4 4 1\n1 4 0.5\n");
  const Outcome run = spade("info " + A + " --json " + path("unsym.json").string());
  ASSERT_EQ(run.status, 0) << run.err;
  for (const char* expected :
       {"symmetric      no (pattern no, values no)", "Cholesky needs a symmetric pattern", "maximum-product matching",
        "  A                       1.667e-01   3.021e-01        0 of 4",
        "  P A (matched)           1.000e+00   1.000e+00        0 of 4", "P Dr A Dc (scaled)", "rows moved     4 of 4",
        "matching  "})
    EXPECT_NE(run.out.find(expected), std::string::npos) << expected << " missing from:\n" << run.out;
  const nlohmann::json j = nlohmann::json::parse(read_file(path("unsym.json")));
  EXPECT_EQ(j["input"]["pattern_symmetric"], false);
  EXPECT_EQ(j["input"]["symmetric"], false);
  const nlohmann::json& m = j["matching"];
  EXPECT_NEAR(m["original"]["min_ratio"].get<double>(), 1.0 / 6, 1e-15);
  EXPECT_NEAR(m["original"]["geometric_mean"].get<double>(), std::pow(120.0, -0.25), 1e-15);
  EXPECT_EQ(m["original"]["zero_diagonals"], 0);
  EXPECT_EQ(m["matched"]["min_ratio"], 1.0);
  EXPECT_NEAR(m["scaled"]["min_ratio"].get<double>(), 1, 1e-12);
  EXPECT_NEAR(m["scaled"]["geometric_mean"].get<double>(), 1, 1e-12);
  EXPECT_EQ(m["rows_moved"], 4);
  EXPECT_TRUE(m["structurally_singular"].is_null());
  EXPECT_TRUE(j["analysis"].is_null());
  EXPECT_TRUE(j["phases"].contains("matching"));

  // The Cholesky refuses the matrix (the default, auto, takes the LU).
  expect_error(spade("solve " + A + " --factorization cholesky"), 2, {"symmetric"});

  // No perfect matching: columns 0 and 1 have their entries only in row 0. info describes it, naming column 1.
  const std::string S = file("hall.mtx",
                             "%%MatrixMarket matrix coordinate real general\n3 3 5\n1 1 1\n1 2 2\n1 3 1\n2 3 1\n"
                             "3 3 1\n");
  const Outcome singular = spade("info " + S + " --json " + path("hall.json").string());
  ASSERT_EQ(singular.status, 0) << singular.err;
  EXPECT_NE(singular.out.find("structurally singular: column 1 (0-based) cannot be matched"), std::string::npos)
      << singular.out;
  const nlohmann::json h = nlohmann::json::parse(read_file(path("hall.json")));
  EXPECT_NE(h["matching"]["structurally_singular"].get<std::string>().find("column 1"), std::string::npos);
  EXPECT_TRUE(h["matching"]["matched"].is_null());
  EXPECT_EQ(h["matching"]["original"]["zero_diagonals"], 1);
}

TEST_F(Cli, Demo) {
  const Outcome run = spade("demo --grid 8 --json " + path("demo.json").string());
  ASSERT_EQ(run.status, 0) << run.err;
  for (const char* expected : {"3D Poisson", "512 x 512", "nnz(L)", "numeric", "berr", "forward error", "stop"})
    EXPECT_NE(run.out.find(expected), std::string::npos) << expected << " missing from:\n" << run.out;
  const nlohmann::json j = nlohmann::json::parse(read_file(path("demo.json")));
  EXPECT_EQ(j["command"], "demo");
  EXPECT_EQ(j["input"]["rows"], 512);
  EXPECT_EQ(j["input"]["nnz"], 512 * 7 - 6 * 64);
  EXPECT_TRUE(j["input"]["field"].is_null());
  EXPECT_LE(j["solve"]["forward_error"].get<double>(), 1e3 * eps);
}

TEST_F(Cli, OneByOne) {
  const std::string A = file("one.mtx", "%%MatrixMarket matrix coordinate real symmetric\n1 1 1\n1 1 4\n");
  const Outcome run = spade("solve " + A + " --out " + path("x1.mtx").string());
  ASSERT_EQ(run.status, 0) << run.err;
  const Dense x = read_array(path("x1.mtx"));
  ASSERT_EQ(x.values.size(), 1u);
  EXPECT_NEAR(x.values[0], x_true(0, 0), 4 * eps);
}

TEST_F(Cli, QuietLeavesOnlyTheErrorLine) {
  const Outcome run =
      spade("solve " + file("q.mtx", "%%MatrixMarket matrix coordinate real symmetric\n2 2 1\n") + " -q");
  EXPECT_EQ(run.status, 2);
  EXPECT_EQ(lines_of(run.err).size(), 1u) << run.err;
  expect_error(run, 2, {"q.mtx"});
}

TEST_F(Cli, MissingFile) { expect_error(spade("solve " + path("nowhere.mtx").string()), 2, {"nowhere.mtx"}); }

TEST_F(Cli, MalformedBanner) {
  const std::string A = file("banner.mtx", "%%MatrixMarket matrix coordinat real symmetric\n1 1 1\n1 1 4\n");
  expect_error(spade("solve " + A), 2, {"banner.mtx:1:", "coordinat"});
}

TEST_F(Cli, TruncatedFileNamesTheLine) {
  const std::string A = file("trunc.mtx", "%%MatrixMarket matrix coordinate real symmetric\n3 3 5\n1 1 4\n2 1 -1\n");
  expect_error(spade("solve " + A), 2, {"trunc.mtx:", "truncated"});
  const Outcome run = spade("solve " + A);
  // The file has 4 lines; the third entry was expected on line 5.
  EXPECT_NE(run.err.find("trunc.mtx:5:"), std::string::npos) << run.err;
}

TEST_F(Cli, CorruptGzip) {
  std::string bytes = "\x1f\x8b\x08";
  bytes += std::string("\0\0\0\0\0\0\x03", 7) + "this is not a deflate stream";
  expect_error(spade("solve " + file("corrupt.mtx.gz", bytes)), 2, {"corrupt.mtx.gz", "gzip"});
}

TEST_F(Cli, IndexOutOfRange) {
  const std::string A = file("range.mtx", "%%MatrixMarket matrix coordinate real symmetric\n3 3 2\n1 1 4\n4 1 -1\n");
  expect_error(spade("solve " + A), 2, {"range.mtx:4:", "out of range"});
}

TEST_F(Cli, NonSquare) {
  const std::string A = file("rect.mtx", "%%MatrixMarket matrix coordinate real general\n3 2 2\n1 1 4\n2 2 4\n");
  expect_error(spade("solve " + A), 2, {"square", "3 x 2"});
}

TEST_F(Cli, NotSymmetricPattern) {
  const std::string A =
      file("nonsym.mtx", "%%MatrixMarket matrix coordinate real general\n2 2 3\n1 1 4\n2 1 1\n2 2 4\n");
  expect_error(spade("solve " + A + " --factorization cholesky"), 2, {"symmetric"});
}

TEST_F(Cli, NotSymmetricValues) {
  const std::string A =
      file("nonsymval.mtx", "%%MatrixMarket matrix coordinate real general\n2 2 4\n1 1 4\n2 1 1\n1 2 2\n2 2 4\n");
  expect_error(spade("solve " + A + " --factorization cholesky"), 2, {"symmetric", "mirror"});
}

TEST_F(Cli, NotPositiveDefiniteNamesTheOriginalColumn) {
  // Node 23 of a 7 x 5 grid gets the diagonal -1; AMD reorders, the message must still say column 23.
  const std::string A = file("notpd.mtx", laplacian_file(7, 5, 23));
  expect_error(spade("solve " + A + " --ordering amd --factorization cholesky"), 3,
               {"not positive definite", "column 23 ", "original"});
}

TEST_F(Cli, NotFiniteValue) {
  const std::string A = file("nan.mtx", "%%MatrixMarket matrix coordinate real symmetric\n2 2 2\n1 1 nan\n2 2 4\n");
  expect_error(spade("solve " + A), 2, {"nan.mtx:3:", "not finite"});
}

TEST_F(Cli, PatternFileNeedsPatternValues) {
  const std::string A = file("pat.mtx", "%%MatrixMarket matrix coordinate pattern symmetric\n2 2 2\n1 1\n2 2\n");
  expect_error(spade("solve " + A), 2, {"pat.mtx", "pattern"});
  expect_error(spade("solve " + A + " --pattern-values zeros"), 2, {"--pattern-values", "zeros"});
}

TEST_F(Cli, RightHandSideWithWrongRowCount) {
  const std::string A = file("lap_b.mtx", laplacian_file(3, 3));
  const std::string B = file("b_short.mtx", array_file(8, 1, std::vector<double>(8, 1.0)));
  expect_error(spade("solve " + A + " --rhs " + B), 2, {"--rhs", "8 rows", "9 x 9"});
  const std::string B2 = file("b_two.mtx", array_file(9, 2, std::vector<double>(18, 1.0)));
  expect_error(spade("solve " + A + " --rhs " + B2 + " --nrhs 3"), 2, {"--nrhs 3", "2 columns"});
}

TEST_F(Cli, UnknownOrdering) {
  const std::string A = file("lap_o.mtx", laplacian_file(3, 3));
  expect_error(spade("solve " + A + " --ordering camd"), 2, {"--ordering", "camd", "colamd"});
  expect_error(spade("solve " + A + " --factorization qr"), 2, {"--factorization", "qr", "lu"});
}

TEST_F(Cli, FactorizationAutoTakesTheLuForUnsymmetricAndIndefiniteInput) {
  const std::string U =
      file("lu.mtx", "%%MatrixMarket matrix coordinate real general\n3 3 6\n1 1 4\n2 1 1\n1 2 2\n2 2 4\n3 2 1\n3 3 2\n");
  const Outcome run = spade("solve " + U + " --json " + path("lu.json").string());
  ASSERT_EQ(run.status, 0) << run.err;
  for (const char* expected : {"LU: the pattern of A is not symmetric", "perturbed pivots 0", "nnz(L+U)", "converged",
                               spade::cuda_device_available() ? "placement        GPU: " : "placement        host solve: "})
    EXPECT_NE(run.out.find(expected), std::string::npos) << expected << "\n" << run.out;
  const nlohmann::json j = nlohmann::json::parse(std::ifstream(path("lu.json")));
  EXPECT_EQ(j["factorization"]["used"], "lu");
  EXPECT_EQ(j["factorization"]["requested"], "auto");
  EXPECT_EQ(j["analysis"]["lu"], true);
  EXPECT_TRUE(j["phases"].contains("matching"));
  EXPECT_LE(j["solve"]["berr"].get<double>(), 1e-15);
  // Symmetric but not positive definite: auto tries the Cholesky, then says why it took the LU.
  const std::string N = file("notpd_auto.mtx", laplacian_file(7, 5, 23));
  const Outcome fallback = spade("solve " + N + " --ordering colamd");
  ASSERT_EQ(fallback.status, 0) << fallback.err;
  EXPECT_NE(fallback.out.find("LU: the Cholesky found A not positive definite"), std::string::npos) << fallback.out;
  EXPECT_NE(fallback.out.find("colamd"), std::string::npos) << fallback.out;
  // Numerically singular (proportional rows): perturbed pivots that refinement cannot repair are an error.
  const std::string S =
      file("singular_lu.mtx", "%%MatrixMarket matrix coordinate real general\n2 2 4\n1 1 1\n2 1 2\n1 2 1\n2 2 2\n");
  const std::string b = file("inconsistent.mtx", "%%MatrixMarket matrix array real general\n2 1\n1\n0\n");
  expect_error(spade("solve " + S + " --rhs " + b), 3, {"numerically singular", "replaced pivots", "column"});
  // An LU solves on the GPU like a Cholesky factor: --device gpu insists, and without a GPU is a clear error.
  expect_error(spade("solve " + U + " --device gpu", "CUDA_VISIBLE_DEVICES="), 4, {"placement gpu", "no usable GPU"});
  if (spade::cuda_device_available()) {
    const Outcome gpu = spade("solve " + U + " --device gpu");
    ASSERT_EQ(gpu.status, 0) << gpu.err;
    EXPECT_NE(gpu.out.find("placement        GPU: "), std::string::npos) << gpu.out;
  }
  // --factorization lu on an SPD matrix.
  const Outcome lu = spade("solve " + file("spd_lu.mtx", laplacian_file(4, 4)) + " --factorization lu --nrhs 2");
  ASSERT_EQ(lu.status, 0) << lu.err;
  EXPECT_NE(lu.out.find("LU requested"), std::string::npos) << lu.out;
}

TEST_F(Cli, EmptyMatrix) {
  const std::string A = file("empty.mtx", "%%MatrixMarket matrix coordinate real symmetric\n0 0 0\n");
  expect_error(spade("solve " + A), 2, {"empty.mtx", "0 x 0"});
}

TEST_F(Cli, UnwritableOutputIsAResourceError) {
  const std::string A = file("lap_w.mtx", laplacian_file(3, 3));
  expect_error(spade("solve " + A + " --out " + path("no/such/folder/x.mtx").string()), 4, {"x.mtx"});
}

TEST_F(Cli, DeviceCpuSolvesOnTheHost) {
  const std::string A = file("lap_cpu.mtx", laplacian_file(6, 5));
  const Outcome run = spade("solve " + A + " --device cpu --json " + path("cpu.json").string());
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_NE(run.out.find("placement        host solve (placement cpu) (--device cpu)"), std::string::npos) << run.out;
  const nlohmann::json j = nlohmann::json::parse(read_file(path("cpu.json")));
  EXPECT_EQ(j["placement"]["requested"], "cpu");
  EXPECT_EQ(j["placement"]["gpu"], false);
  EXPECT_TRUE(j["placement"]["plan"].is_null());
  EXPECT_TRUE(j["solve"]["sweeps"].is_null());
}

TEST_F(Cli, WithoutAGpuAutoFallsBackAndSaysSoAndGpuIsAnError) {
  // CUDA_VISIBLE_DEVICES='' hides every GPU, as a machine without one would.
  const std::string A = file("lap_nogpu.mtx", laplacian_file(7, 6));
  const Outcome run = spade("solve " + A + " --json " + path("nogpu.json").string(), "CUDA_VISIBLE_DEVICES=");
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_NE(run.out.find("placement        host solve: no usable GPU"), std::string::npos) << run.out;
  const nlohmann::json j = nlohmann::json::parse(read_file(path("nogpu.json")));
  EXPECT_EQ(j["placement"]["gpu"], false);
  EXPECT_LE(j["solve"]["berr"].get<double>(), 4 * eps);
  expect_error(spade("solve " + A + " --device gpu", "CUDA_VISIBLE_DEVICES="), 4, {"placement gpu", "no usable GPU"});
}

TEST_F(Cli, DemoSolvesOnTheGpuWhenThereIsOne) {
  const Outcome run = spade("demo --grid 12 --nrhs 3 --json " + path("demo_gpu.json").string());
  ASSERT_EQ(run.status, 0) << run.err;
  const nlohmann::json j = nlohmann::json::parse(read_file(path("demo_gpu.json")));
  EXPECT_LE(j["solve"]["forward_error"].get<double>(), 1e3 * eps);
  if (!spade::cuda_device_available()) {
    EXPECT_EQ(j["placement"]["gpu"], false);
    GTEST_SKIP() << "no CUDA device on this machine: the demo solved on the host (checked above)";
  }
  EXPECT_EQ(j["placement"]["gpu"], true) << j["placement"]["reason"];
  EXPECT_NE(run.out.find("placement        GPU: "), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("gpu sweeps       forward"), std::string::npos) << run.out;
  EXPECT_GT(j["placement"]["plan"]["tiles"].get<int>() + j["placement"]["plan"]["groups"].get<int>(), 0);
  EXPECT_GT(j["solve"]["sweeps"]["forward_seconds"].get<double>(), 0);
  EXPECT_EQ(j["solve"]["sweeps"]["passes"], 1);
}

TEST_F(Cli, PartitionedInverseWhenThereIsAGpu) {
  const std::string A = file("lap_part.mtx", laplacian_file(40, 30));
  const Outcome run = spade("solve " + A + " --partitioned-inverse --json " + path("part.json").string());
  ASSERT_EQ(run.status, 0) << run.err;
  const nlohmann::json j = nlohmann::json::parse(read_file(path("part.json")));
  EXPECT_LE(j["solve"]["forward_error"].get<double>(), 1e3 * eps);
  if (!spade::cuda_device_available()) {
    EXPECT_EQ(j["placement"]["gpu"], false);
    GTEST_SKIP() << "no CUDA device on this machine: the flag was accepted and the host solved (checked above)";
  }
  EXPECT_GT(j["placement"]["plan"]["partition_band"].get<int>(), 1);
  EXPECT_GT(j["placement"]["plan"]["merged_pieces"].get<int>(), 0);
  EXPECT_NE(run.out.find("partitioned inverse: "), std::string::npos) << run.out;
}

TEST_F(Cli, UnknownDevice) {
  const std::string A = file("lap_dev.mtx", laplacian_file(3, 3));
  expect_error(spade("solve " + A + " --device tpu"), 2, {"--device", "tpu"});
  expect_error(spade("solve " + A + " --corrections fp16"), 2, {"--corrections", "fp16", "fp32"});
}

TEST_F(Cli, UsageErrors) {
  expect_error(spade(""), 2, {"subcommand"});
  expect_error(spade("solve"), 2, {"matrix"});
  expect_error(spade("demo --grid 0"), 2, {"--grid"});
  expect_error(spade("demo --no-such-option"), 2, {"--no-such-option"});
  const Outcome help = spade("--help");
  EXPECT_EQ(help.status, 0);
  EXPECT_NE(help.out.find("solve"), std::string::npos);
}

TEST_F(Cli, Version) {
  const Outcome version = spade("--version");
  EXPECT_EQ(version.status, 0);
  EXPECT_EQ(version.out, "spade " SPADE_VERSION_STRING "\n");
}

}  // namespace
