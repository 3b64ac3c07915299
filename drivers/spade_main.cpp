// spade: the command-line program.
//
//   spade solve A.mtx [--rhs b.mtx] [--nrhs k] [--ordering auto|amd|metis|colamd|natural] [--refine N]
//                     [--factorization auto|cholesky|lu]
//                     [--out x.mtx] [--json report.json] [--threads T] [--device auto|gpu|cpu]
//                     [--partitioned-inverse]
//                     [--pattern-values reject|ones|laplacian]
//   spade info A.mtx [--pattern-values ...] [--ordering ...] [--json report.json]
//   spade --version
//   spade demo [--grid N] [--nrhs k] [--ordering ...] [--refine N] [--out x.mtx] [--json ...] [--threads T]
//              [--device ...]
//
// solve and demo read (or generate) A, then hand it to the library's Solver facade (spade/solver.hpp):
// order, analyze, factor (with the GPU solve plan built beside the host factorization), solve and refine
// on the GPU when one is usable (--device auto), and print a report on stdout (report.hpp); --json writes
// the same report as JSON. Without --rhs the right-hand sides are b = A x_true for the known
// x_true(i, r) = 1 + sin(i + r), and the report adds the forward error.
// Progress goes to stderr. Every error ends the program with one line `spade: error: <message>` on stderr
// and the exit status 2 (invalid input or command-line usage), 3 (numerical breakdown), 4 (resources:
// memory, files that cannot be written) or 1 (anything else).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "report.hpp"
#include "spade/cholesky.hpp"
#include "spade/error.hpp"
#include "spade/generators.hpp"
#include "spade/matching.hpp"
#include "spade/matrix_market.hpp"
#include "spade/ordering.hpp"
#include "spade/solve.hpp"
#include "spade/solver.hpp"
#include "spade/symbolic.hpp"
#include "spade/version.h"

namespace {

using spade::index_t;
using spade::offset_t;

constexpr int exit_invalid_input = 2;
constexpr int exit_numerical = 3;
constexpr int exit_resource = 4;
constexpr int exit_other = 1;

/// The options of `solve`, `info` and `demo` (each command uses its own subset).
struct Options {
  std::string matrix;             ///< solve, info: the Matrix Market file
  index_t grid = 40;              ///< demo: the grid is grid^3
  std::string rhs;                ///< solve: right-hand sides file, empty = b from a known solution
  index_t nrhs = 0;               ///< right-hand sides; 0 = not given (1, or the --rhs file's columns)
  std::string ordering = "auto";  ///< "auto" or a name parse_ordering_method accepts
  int refine = 10;                ///< maximum refinement steps
  std::string out;                ///< solution file, empty = none
  std::string json;               ///< JSON report file, empty = none
  int threads = 0;                ///< 0 = automatic (FactorOptions::threads)
  std::string device = "auto";    ///< where the solves run: "auto", "gpu" or "cpu"
  std::string factorization = "auto";  ///< "auto", "cholesky" or "lu" (solve, demo)
  std::string pattern_values = "reject";  ///< "reject", "ones" or "laplacian"
  bool quiet = false;                     ///< no progress lines on stderr
  bool partitioned_inverse = true;        ///< SolverOptions::partitioned_inverse
  std::string corrections = "auto";       ///< RefineOptions::corrections: "auto", "fp32" or "fp64"
  spade::CorrectionPrecision correction_precision = spade::CorrectionPrecision::automatic;  ///< parsed

  // Parsed from the strings above by parse_names(), before any work is done.
  std::optional<spade::OrderingMethod> ordering_method;  ///< empty: automatic
  spade::PatternValues pattern = spade::PatternValues::reject;
  spade::Placement placement = spade::Placement::automatic;
  spade::Factorization factorization_kind = spade::Factorization::automatic;
};

/// Progress lines on stderr: "[spade] <phase> ... <seconds> s". A phase that throws leaves its line open;
/// fail() closes it so the error message that follows stands on a line of its own.
class Progress {
 public:
  void set_quiet(bool quiet) { quiet_ = quiet; }

  /// Runs f() as the phase `what` and returns its wall time in seconds.
  template <typename F>
  double run(const std::string& what, F&& f) {
    if (!quiet_) {
      std::fprintf(stderr, "[spade] %s ... ", what.c_str());
      std::fflush(stderr);
      open_ = true;
    }
    const auto t0 = std::chrono::steady_clock::now();
    f();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!quiet_) std::fprintf(stderr, "%.3f s\n", seconds);
    open_ = false;
    return seconds;
  }

  void fail() {
    if (open_) std::fprintf(stderr, "failed\n");
    open_ = false;
  }

 private:
  bool quiet_ = false;
  bool open_ = false;
};

/// Fills o.ordering_method and o.pattern from their names. Throws InvalidInput for an unknown name.
void parse_names(Options& o) {
  if (o.ordering != "auto") {
    try {
      o.ordering_method = spade::parse_ordering_method(o.ordering);
    } catch (const spade::InvalidInput&) {
      throw spade::InvalidInput("unknown --ordering '" + o.ordering +
                                "'; expected auto, amd, metis, colamd or natural");
    }
  }
  try {
    o.factorization_kind = spade::parse_factorization(o.factorization);
  } catch (const spade::InvalidInput&) {
    throw spade::InvalidInput("unknown --factorization '" + o.factorization + "'; expected auto, cholesky or lu");
  }
  try {
    o.placement = spade::parse_placement(o.device);
  } catch (const spade::InvalidInput&) {
    throw spade::InvalidInput("unknown --device '" + o.device + "'; expected auto, gpu or cpu");
  }
  try {
    o.correction_precision = spade::parse_correction_precision(o.corrections);
  } catch (const spade::InvalidInput&) {
    throw spade::InvalidInput("unknown --corrections '" + o.corrections + "'; expected auto, fp32 or fp64");
  }
  if (o.pattern_values == "reject")
    o.pattern = spade::PatternValues::reject;
  else if (o.pattern_values == "ones")
    o.pattern = spade::PatternValues::ones;
  else if (o.pattern_values == "laplacian")
    o.pattern = spade::PatternValues::laplacian;
  else
    throw spade::InvalidInput("unknown --pattern-values '" + o.pattern_values +
                              "'; expected reject, ones or laplacian");
}

/// Sizes and symmetry of A as stored.
spade::cli::InputSummary summarize(const spade::SparseMatrix& A) {
  spade::cli::InputSummary s;
  s.rows = A.rows();
  s.cols = A.cols();
  s.nnz = A.nnz();
  for (index_t j = 0; j < A.cols(); ++j)
    for (offset_t p = A.col_ptr()[j]; p < A.col_ptr()[j + 1]; ++p) {
      s.nnz_lower += A.row_ind()[p] >= j;
      s.diagonal_entries += A.row_ind()[p] == j;
    }
  if (A.is_square()) {
    const spade::SparseMatrix t = A.transpose();
    s.pattern_symmetric = t.col_ptr() == A.col_ptr() && t.row_ind() == A.row_ind();
    s.symmetric = s.pattern_symmetric && t.values() == A.values();
  }
  return s;
}

/// Reads the matrix file, records the "read" phase and the input summary.
spade::SparseMatrix read_input(const Options& o, Progress& progress, spade::cli::Report& report) {
  spade::MatrixMarketOptions mm;
  mm.pattern_values = o.pattern;
  spade::MatrixMarketInfo info;
  spade::SparseMatrix A;
  const double seconds =
      progress.run("reading " + spade::printable(o.matrix, 200), [&] { A = spade::read_matrix_market(o.matrix, mm, &info); });
  report.phases.push_back({"read", seconds, 0});
  report.input = summarize(A);
  report.input.source = o.matrix;
  report.input.field = info.field;
  report.input.symmetry = info.symmetry;
  report.input.file_entries = info.stored_entries;
  return A;
}

/// Records the "order" and "symbolic" phases and the analysis summary of S.
void record_analysis(const spade::SymbolicFactor& S, const Options& o, spade::cli::Report& report) {
  report.phases.push_back({"order", S.ordering_seconds, 0});
  report.phases.push_back({"symbolic", S.symbolic_seconds, 0});
  spade::cli::AnalysisSummary a;
  a.ordering_requested = o.ordering;
  a.ordering = spade::to_string(S.ordering);
  a.supernodes = S.num_supernodes;
  a.nnz_l = S.nnz_l;
  a.fill_ratio = report.input.nnz_lower > 0 ? static_cast<double>(S.nnz_l) / report.input.nnz_lower : 0;
  a.flops = S.flops;
  a.solve_flops = S.solve_flops;
  report.analysis = a;
}

/// Records the "matching" phase and how the maximum-product matching and its scaling (static pivoting for
/// a later LU) change the diagonal of the square A. For info, a structurally singular A is described, not
/// an error.
void record_matching(const spade::SparseMatrix& A, Progress& progress, spade::cli::Report& report) {
  spade::cli::MatchingSummary s;
  s.original = spade::diagonal_magnitude(A);
  std::optional<spade::MaximumProductMatching> m;
  const double seconds = progress.run("maximum-product matching and scaling", [&] {
    try {
      m = spade::maximum_product_matching(A);
    } catch (const spade::StructurallySingular& e) {
      s.singular = e.what();
    }
  });
  report.phases.push_back({"matching", seconds, 0});
  if (m) {
    s.matched = spade::diagonal_magnitude(spade::permute_rows(A, m->row_perm));
    s.scaled = spade::diagonal_magnitude(spade::permute_rows(spade::scale(A, m->row_scale, m->col_scale), m->row_perm));
    for (index_t j = 0; j < A.cols(); ++j) s.rows_moved += m->row_perm[j] != j;
  }
  report.matching = s;
}

std::string analysis_label(const Options& o) { return "analysis (ordering " + o.ordering + ", symbolic)"; }

/// x_true(i, r) = 1 + sin(i + r): every entry of order one, columns different from each other.
std::vector<double> known_solution(index_t n, index_t nrhs) {
  std::vector<double> x(static_cast<std::size_t>(n) * nrhs);
  for (index_t r = 0; r < nrhs; ++r)
    for (index_t i = 0; i < n; ++i) x[i + static_cast<std::size_t>(r) * n] = 1 + std::sin(static_cast<double>(i) + r);
  return x;
}

/// max over columns of ||x - x_true||_inf / ||x_true||_inf.
double forward_error(const std::vector<double>& x, const std::vector<double>& x_true, index_t n, index_t nrhs) {
  double worst = 0;
  for (index_t r = 0; r < nrhs; ++r) {
    double diff = 0, norm = 0;
    for (index_t i = 0; i < n; ++i) {
      const std::size_t k = i + static_cast<std::size_t>(r) * n;
      diff = std::max(diff, std::abs(x[k] - x_true[k]));
      norm = std::max(norm, std::abs(x_true[k]));
    }
    worst = std::max(worst, norm > 0 ? diff / norm : diff);
  }
  return worst;
}

/// Writes the JSON report; a file that cannot be opened, written or closed is a ResourceError.
void write_json(const std::string& path, const spade::cli::Report& report) {
  std::ofstream file(path);
  file << to_json(report).dump(2) << '\n';
  file.close();  // flushes: a full disk shows only here
  if (!file) throw spade::ResourceError("cannot write the JSON report " + spade::quote(path, 200));
}

/// Prints the report on stdout and flushes it; a failed write (a full disk, a closed pipe) is a
/// ResourceError rather than a success with no report.
void print_report(const spade::cli::Report& report) {
  spade::cli::print_report(stdout, report);
  if (std::fflush(stdout) != 0 || std::ferror(stdout))
    throw spade::ResourceError(std::string("cannot write the report to standard output: ") + std::strerror(errno));
}

/// A file of the user's name that failed after reading: the library's messages start with the phase
/// ("analyze: ", "factorize: "), the user knows the file. Rethrows e's type with `source: ` in place.
template <typename F>
void about_source(const std::string& source, F&& f) {
  const auto message = [&](const std::exception& e) {
    std::string what = e.what();
    for (const char* phase : {"analyze: ", "factorize: ", "solve: ", "solve_refined: "})
      if (what.rfind(phase, 0) == 0) what.erase(0, std::strlen(phase));
    return source + ": " + what;
  };
  try {
    f();
  } catch (const spade::NumericalError& e) {
    throw spade::NumericalError(e.kind(), e.index(), message(e));
  } catch (const spade::InvalidInput& e) {
    throw spade::InvalidInput(message(e));
  }
}

/// Factor, solve and refine A X = B; fills the remaining phases and the solve summary.
void factor_and_solve(const spade::SparseMatrix& A, const Options& o, Progress& progress, spade::cli::Report& report) {
  const std::string source = spade::printable(report.input.source, 200);
  // The shape first, before any arithmetic with A: square and not empty (the analysis checks the rest).
  if (!A.is_square())
    throw spade::InvalidInput(source + ": the solver needs a square matrix, this one is " + std::to_string(A.rows()) +
                              " x " + std::to_string(A.cols()));
  const index_t n = A.rows();
  if (n == 0) throw spade::InvalidInput(source + ": the matrix is 0 x 0; there is nothing to solve");
  spade::SolverOptions options;
  options.analyze.ordering = o.ordering_method;
  options.factorization = o.factorization_kind;
  options.threads = o.threads;
  options.placement = o.placement;
  options.partitioned_inverse = o.partitioned_inverse;
  options.refine.max_steps = o.refine;
  options.refine.corrections = o.correction_precision;
  spade::Solver solver(options);
  progress.run(analysis_label(o), [&] { about_source(source, [&] { solver.analyze(A); }); });
  record_analysis(solver.symbolic(), o, report);

  spade::cli::SolveSummary s;
  s.max_steps = o.refine;
  std::vector<double> B, x_true;
  if (!o.rhs.empty()) {
    spade::DenseMatrix b;
    spade::DenseMatrixMarketOptions shape;
    shape.rows = n;
    const double seconds = progress.run("reading " + spade::printable(o.rhs, 200), [&] {
      try {
        b = spade::read_dense_matrix_market(o.rhs, shape);
      } catch (const spade::InvalidInput& e) {
        throw spade::InvalidInput("--rhs " + std::string(e.what()) + " (A is " + std::to_string(n) + " x " +
                                  std::to_string(n) + ")");
      }
    });
    report.phases.push_back({"read_rhs", seconds, 0});
    const std::string name = spade::printable(o.rhs, 200);
    if (b.cols == 0) throw spade::InvalidInput("--rhs " + name + " has no columns");
    if (o.nrhs != 0 && o.nrhs != b.cols)
      throw spade::InvalidInput("--nrhs " + std::to_string(o.nrhs) + " disagrees with --rhs " + name +
                                ", which has " + std::to_string(b.cols) + " columns");
    if (b.cols > std::numeric_limits<index_t>::max())
      throw spade::ResourceError("--rhs " + name + " has " + std::to_string(b.cols) + " columns, more than " +
                                 std::to_string(std::numeric_limits<index_t>::max()));
    s.nrhs = static_cast<index_t>(b.cols);
    s.rhs_source = o.rhs;
    B = std::move(b.values);
  } else {
    s.nrhs = o.nrhs != 0 ? o.nrhs : 1;
    s.rhs_source = "b = A x_true, x_true(i, r) = 1 + sin(i + r)";
    x_true = known_solution(n, s.nrhs);
    B.resize(x_true.size());
    for (index_t r = 0; r < s.nrhs; ++r)
      A.multiply(x_true.data() + static_cast<std::size_t>(r) * n, B.data() + static_cast<std::size_t>(r) * n);
    // Each entry of A is finite, but |A| |x_true| can still overflow: that is A's fault, not a right-hand
    // side's (the user gave none).
    for (std::size_t k = 0; k < B.size(); ++k)
      if (!std::isfinite(B[k]))
        throw spade::InvalidInput(source + ": the generated right-hand side b = A x_true overflows in row " +
                                  std::to_string(k % n + 1) + " (1-based): A's entries are too large; scale "
                                  "A, or give --rhs");
  }

  progress.run("numeric factorization", [&] { about_source(source, [&] { solver.factorize(A); }); });
  const spade::Report& r = solver.report();
  auto phase = [&](const char* name) {
    for (const spade::PhaseTime& p : r.phases)
      if (p.name == name) report.phases.push_back({p.name, p.seconds, p.gflops_per_second});
  };
  // The factorization's figures; again after the refinement when it re-analyzed an LU with another ordering.
  const auto record_factorization = [&] {
    const bool lu_factor = r.factorization == spade::Factorization::lu;
    report.phases.erase(std::remove_if(report.phases.begin(), report.phases.end(),
                                       [&](const spade::cli::Phase& p) {
                                         return p.name == "numeric" ||
                                                (lu_factor && (p.name == "matching" || p.name == "order" || p.name == "symbolic"));
                                       }),
                        report.phases.end());
    if (lu_factor) {
      // The LU's analysis (done by analyze(), or by factorize() when `auto` left the Cholesky) replaces the
      // Cholesky's in the report.
      phase("matching");
      phase("order");
      phase("symbolic");
      const spade::LuSymbolic& lu = solver.lu_factor().symbolic();
      spade::cli::AnalysisSummary a;
      a.ordering_requested = o.ordering;
      a.ordering = spade::to_string(lu.structure->ordering);
      a.lu = true;
      a.supernodes = lu.structure->num_supernodes;
      a.nnz_l = lu.nnz_lu;
      a.fill_ratio = static_cast<double>(lu.nnz_lu) / static_cast<double>(std::max<offset_t>(A.nnz(), 1));
      a.flops = lu.flops;
      a.solve_flops = lu.solve_flops;
      report.analysis = a;
    }
    phase("numeric");
    s.factorization_requested = o.factorization;
    s.factorization = spade::to_string(r.factorization);
    s.factorization_reason = r.factorization_reason;
    s.perturbed_pivots = r.perturbed_pivots;
    s.threads = r.threads;
    s.placement_requested = o.device;
    s.gpu = r.gpu;
    s.placement_reason = r.placement_reason;
  };
  record_factorization();

  // The plain solve is timed on its own; solve_refined then starts again from B (its first solve is part of
  // the "refine" phase), so the two phases can be read separately.
  std::vector<double> X = B;
  progress.run(r.gpu ? "solve on the GPU" : "solve on the host", [&] { solver.solve(X.data(), s.nrhs, n); });
  phase("solve");
  s.solve_times = r.last_solve;

  spade::RefinementResult result;
  progress.run("solve with iterative refinement", [&] { result = solver.solve_refined(B.data(), n, X.data(), n, s.nrhs); });
  phase("refine");
  if (r.factorization_reason != s.factorization_reason) record_factorization();  // an LU re-analyzed
  // The partitioned inverse's thread is joined here rather than at exit, so that the report can say when it
  // was ready (the solves above used it if it was by then).
  solver.wait_for_partitioned_inverse();
  s.plan = r.plan;
  s.steps = result.steps;
  s.stop = result.stop;
  s.berr = result.solution.berr;
  s.residual_norm = result.solution.residual_norm;
  if (!x_true.empty()) s.forward_error = forward_error(X, x_true, n, s.nrhs);
  // A backward error of a few eps says nothing about the forward error of an ill-conditioned A: report
  // kappa_1(A) and the bound it implies (a few more solves, each with one column).
  progress.run("condition estimate", [&] {
    s.condition = spade::condition_estimate(
        A, [&](double* x, index_t k, index_t ld) { solver.solve(x, k, ld); },
        [&](double* x, index_t k, index_t ld) { solver.solve_transposed(x, k, ld); });
  });
  s.forward_error_bound = s.condition * std::max(s.berr, std::numeric_limits<double>::epsilon());
  // Static pivoting that refinement could not repair is a clear error, not a report of a wrong answer:
  // perturbed pivots, refinement short of its target, and an error bound that promises no correct digit.
  if (r.factorization == spade::Factorization::lu && r.perturbed_pivots > 0 && !result.converged &&
      s.forward_error_bound >= 1) {
    char line[200];
    std::snprintf(line, sizeof line, "%d tiny pivots were perturbed, refinement stopped (%s) at berr = %.3g, and "
                  "kappa_1(A) * berr = %.3g", static_cast<int>(r.perturbed_pivots),
                  spade::cli::to_string(result.stop).c_str(), result.solution.berr, s.forward_error_bound);
    const std::size_t tried = r.factorization_reason.find("(static pivoting: ");
    throw spade::NumericalError(spade::NumericalError::Kind::singular, -1,
                                source + ": the matrix is numerically singular, or too ill-conditioned for the LU "
                                         "with static pivoting: " + line +
                                    (tried == std::string::npos ? "" : "; " + r.factorization_reason.substr(tried)));
  }

  if (!o.out.empty()) {
    spade::write_dense_matrix_market(o.out, spade::DenseMatrix{n, s.nrhs, std::move(X)});
    s.output = o.out;
  }
  report.solve = s;
}

/// The accuracy warning of the report (if any) once more on stderr, where a script's user sees it (also
/// under --quiet, which silences progress only).
void warn_about_accuracy(const spade::cli::Report& report) {
  if (!report.solve) return;
  if (const std::string warning = spade::cli::accuracy_warning(*report.solve); !warning.empty())
    std::fprintf(stderr, "spade: warning: %s\n", warning.c_str());
}

int run_solve(const Options& o, Progress& progress) {
  spade::cli::Report report;
  report.command = "solve";
  const spade::SparseMatrix A = read_input(o, progress, report);
  factor_and_solve(A, o, progress, report);
  if (!o.json.empty()) write_json(o.json, report);
  print_report(report);
  warn_about_accuracy(report);
  return 0;
}

int run_demo(const Options& o, Progress& progress) {
  spade::cli::Report report;
  report.command = "demo";
  spade::SparseMatrix A;
  const std::string grid = std::to_string(o.grid);
  const double seconds = progress.run("generating the 3D Poisson problem on a " + grid + "^3 grid",
                                      [&] { A = spade::laplacian_3d(o.grid, o.grid, o.grid); });
  report.phases.push_back({"generate", seconds, 0});
  report.input = summarize(A);
  report.input.source = "generated: 3D Poisson, 7-point Laplacian on a " + grid + " x " + grid + " x " + grid +
                        " grid, Dirichlet boundary";
  factor_and_solve(A, o, progress, report);
  if (!o.json.empty()) write_json(o.json, report);
  print_report(report);
  warn_about_accuracy(report);
  return 0;
}

int run_info(const Options& o, Progress& progress) {
  spade::cli::Report report;
  report.command = "info";
  const spade::SparseMatrix A = read_input(o, progress, report);
  if (A.is_square() && A.rows() > 0) record_matching(A, progress, report);
  if (!report.input.pattern_symmetric)
    report.analysis_skipped = A.is_square() ? "Cholesky needs a symmetric pattern; this one is not symmetric"
                                            : "Cholesky needs a square matrix";
  else {
    spade::AnalyzeOptions options;
    options.ordering = o.ordering_method;
    std::shared_ptr<const spade::SymbolicFactor> S;
    progress.run(analysis_label(o), [&] { about_source(report.input.source, [&] { S = spade::analyze(A, options); }); });
    record_analysis(*S, o, report);
  }
  if (!o.json.empty()) write_json(o.json, report);
  print_report(report);
  return 0;
}

void add_common_options(CLI::App* command, Options& o) {
  command->add_option("--ordering", o.ordering,
                      "fill-reducing ordering: amd, metis, colamd (on A's columns, for the LU), natural, or auto "
                      "(AMD; METIS too when AMD's factor is fill- and flop-heavy, keeping the smaller nnz(L))")
      ->capture_default_str();
  command->add_option("--json", o.json, "also write the report as JSON to this file");
  command->add_flag("-q,--quiet", o.quiet, "no progress lines on stderr");
}

void add_solve_options(CLI::App* command, Options& o) {
  add_common_options(command, o);
  command->add_option("--nrhs", o.nrhs, "right-hand sides (default 1, or the columns of --rhs)")
      ->check(CLI::Range(1, std::numeric_limits<index_t>::max()));
  command->add_option("--refine", o.refine, "maximum iterative refinement steps (0: plain solve)")
      ->check(CLI::Range(0, std::numeric_limits<int>::max()))
      ->capture_default_str();
  command->add_option("--out", o.out, "write the solution to this Matrix Market array file");
  command->add_option("--threads", o.threads, "threads of the factorization and the host solve (default: OMP_NUM_THREADS or all cores, fewer for a small factor)")
      ->check(CLI::Range(1, 4096));
  command->add_option("--factorization", o.factorization,
                      "auto (Cholesky for symmetric input, the LU when it is not positive definite, saying so; the "
                      "LU for unsymmetric input), cholesky, or lu (static pivoting)")
      ->capture_default_str();
  command->add_option("--device", o.device,
                      "where the solves run: auto (the GPU when one is usable and the factor fits, else the host), "
                      "gpu (an error when it cannot) or cpu")
      ->capture_default_str();
  command->add_flag("--partitioned-inverse,!--no-partitioned-inverse", o.partitioned_inverse,
                    "GPU solve of a Cholesky factor: also build, without waiting for it, a plan of dense inverted "
                    "pieces of merged tree levels, used once ready (faster solves on small factors)")
      ->capture_default_str();
  command->add_option("--corrections", o.corrections,
                      "precision of the GPU refinement's corrections: auto (fp32 where the GPU solve is "
                      "bandwidth-bound), fp32 (the factor rounded to FP32, half its bytes; fp64 again where one "
                      "stalls; residuals and solution stay FP64) or fp64")
      ->capture_default_str();
}

/// CLI11's ExistingFile with the path quoted short in its message (spade::quote): a file that exists and
/// is not a folder.
std::string existing_file(std::string& path) {
  std::error_code ec;
  const std::filesystem::file_status status = std::filesystem::status(path, ec);
  if (!std::filesystem::exists(status)) return "no such file " + spade::quote(path, 200);
  if (std::filesystem::is_directory(status)) return spade::quote(path, 200) + " is a folder, not a file";
  return "";
}

void add_file_options(CLI::App* command, Options& o) {
  command->add_option("matrix", o.matrix, "sparse SPD matrix, Matrix Market coordinate (.mtx or .mtx.gz)")
      ->required()
      ->check(CLI::Validator(existing_file, "FILE"));
  command
      ->add_option("--pattern-values", o.pattern_values,
                   "values for a pattern file: reject, ones or laplacian (shifted graph Laplacian)")
      ->capture_default_str();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"spade: sparse Cholesky solver (order, analyze, factor, solve, refine) with a lab-notebook report"};
  app.set_version_flag("--version", "spade " SPADE_VERSION_STRING);
  app.require_subcommand(1);
  Options o;
  CLI::App* solve = app.add_subcommand("solve", "solve A X = B for a sparse symmetric positive definite A");
  add_file_options(solve, o);
  solve->add_option("--rhs", o.rhs, "right-hand sides, Matrix Market array or coordinate (default: b = A x_true)")
      ->check(CLI::Validator(existing_file, "FILE"));
  add_solve_options(solve, o);
  CLI::App* info = app.add_subcommand("info", "describe a matrix file, its maximum-product matching and scaling, and the fill of its Cholesky factor");
  add_file_options(info, o);
  add_common_options(info, o);
  CLI::App* demo = app.add_subcommand("demo", "solve the 3D Poisson problem (7-point Laplacian on an N^3 grid)");
  demo->add_option("--grid", o.grid, "grid points per dimension N")
      ->check(CLI::Range(1, std::numeric_limits<index_t>::max()))
      ->capture_default_str();
  add_solve_options(demo, o);

  // spade's own messages quote input through spade::quote already; any other (CLI11's quote a
  // command-line value whole, a standard exception) passes through printable(): one line, a few hundred
  // bytes at most.
  const auto print_error = [](const std::string& message) {
    std::fprintf(stderr, "spade: error: %s\n", message.c_str());
  };
  const auto print_foreign_error = [&](const std::string& message) { print_error(spade::printable(message, 600)); };
  if (argc > 1 && argv[1][0] != '-' && std::string(argv[1]) != "solve" && std::string(argv[1]) != "info" &&
      std::string(argv[1]) != "demo") {
    print_error("unknown command " + spade::quote(argv[1]) + "; expected solve, info or demo (see spade --help)");
    return exit_invalid_input;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    print_foreign_error(std::string(e.what()) + " (see spade --help)");
    return exit_invalid_input;
  }

  Progress progress;
  progress.set_quiet(o.quiet);
  const auto error = [&](const std::exception& e, int status) {
    progress.fail();
    if (dynamic_cast<const spade::Error*>(&e) != nullptr)
      print_error(e.what());
    else
      print_foreign_error(e.what());
    return status;
  };
  try {
    parse_names(o);
    if (*solve) return run_solve(o, progress);
    if (*info) return run_info(o, progress);
    return run_demo(o, progress);
  } catch (const spade::InvalidInput& e) {
    return error(e, exit_invalid_input);
  } catch (const spade::NumericalError& e) {
    return error(e, exit_numerical);
  } catch (const spade::ResourceError& e) {
    return error(e, exit_resource);
  } catch (const std::bad_alloc&) {
    return error(spade::ResourceError("out of memory"), exit_resource);
  } catch (const std::exception& e) {
    return error(e, exit_other);
  }
}
