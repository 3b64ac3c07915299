// The report of one `spade` run: what was read or generated, what the analysis predicted, how long each
// phase took and how accurate the solution is. The driver fills a Report as the phases run; it is printed
// for people (print_report, a lab-notebook page on stdout) and written as its machine-readable twin
// (to_json, the same fields under the same names).
#pragma once

#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "spade/matching.hpp"
#include "spade/solve.hpp"
#include "spade/solver.hpp"
#include "spade/sparse_matrix.hpp"

namespace spade::cli {

/// The input matrix as read (or generated), before any analysis.
struct InputSummary {
  std::string source;             ///< the file's path, or a description of the generated problem
  std::string field;              ///< Matrix Market header field ("real", ...); empty for a generated matrix
  std::string symmetry;           ///< Matrix Market header symmetry ("symmetric", ...); empty for a generated matrix
  std::int64_t file_entries = 0;  ///< entries listed in the file (one triangle of a symmetric file)
  index_t rows = 0, cols = 0;
  offset_t nnz = 0;               ///< stored entries of the whole matrix (both triangles)
  offset_t nnz_lower = 0;         ///< stored entries on or below the diagonal
  offset_t diagonal_entries = 0;  ///< stored entries on the diagonal
  bool pattern_symmetric = false;
  bool symmetric = false;  ///< pattern and values
};

/// What the symbolic analysis predicts.
struct AnalysisSummary {
  std::string ordering_requested;  ///< "auto", "amd", "metis", "colamd" or "natural"
  bool lu = false;                 ///< an LU: nnz_l counts L and U (2 nnz(L) - n), fill_ratio is over nnz(A)
  std::string ordering;            ///< the method that produced the permutation
  index_t supernodes = 0;
  offset_t nnz_l = 0;      ///< entries of L as stored (relaxed supernodes)
  double fill_ratio = 0;   ///< nnz_l / nnz(lower triangle of A)
  double flops = 0;        ///< factorization
  double solve_flops = 0;  ///< one forward plus backward solve, one right-hand side
};

/// Static pivoting for LU (info on a square matrix): the maximum-product matching with its scaling
/// (spade/matching.hpp) and how it moves large entries to the diagonal.
struct MatchingSummary {
  DiagonalMagnitude original;  ///< A
  std::optional<DiagonalMagnitude> matched;  ///< P A, rows permuted by the matching; empty when singular
  std::optional<DiagonalMagnitude> scaled;   ///< P Dr A Dc, also scaled; empty when singular
  index_t rows_moved = 0;                    ///< columns j whose matched row is not j
  std::string singular;  ///< the StructurallySingular message when A has no perfect matching, else empty
};

/// One timed phase: its name ("read", "generate", "read_rhs", "matching", "order", "symbolic", "numeric", "solve",
/// "refine"), wall seconds, and the rate in GFlop/s when the phase has a flop count (0 otherwise).
struct Phase {
  std::string name;
  double seconds = 0;
  double gflops_per_second = 0;
};

/// The solve and the refinement.
struct SolveSummary {
  int threads = 0;  ///< threads of the factorization and the host solve (spade's teams; BLAS at one thread a call)
  std::string factorization_requested;  ///< --factorization: "auto", "cholesky" or "lu"
  std::string factorization;           ///< the one used: "cholesky" or "lu"
  std::string factorization_reason;    ///< why, one line (spade::Report::factorization_reason)
  index_t perturbed_pivots = 0;        ///< LU: tiny pivots replaced by sqrt(eps) ||A|| (spade::Report)
  std::string placement_requested;     ///< --device: "auto", "gpu" or "cpu"
  bool gpu = false;                    ///< the solves ran on the GPU
  std::string placement_reason;        ///< why there, one line (spade::Report::placement_reason)
  std::optional<GpuPlanReport> plan;   ///< the GPU plan, when the solves ran on the GPU
  std::optional<SolveTimes> solve_times;  ///< the timed plain solve (sweep times on the GPU)
  index_t nrhs = 0;
  std::string rhs_source;             ///< the --rhs file, or how b was made from a known solution
  int max_steps = 0;                  ///< --refine
  std::vector<RefinementStep> steps;  ///< steps[0]: the plain solve; then one per correction
  RefinementResult::Stop stop = RefinementResult::Stop::max_steps;
  double berr = 0;                      ///< of the returned solution, max over right-hand sides
  double residual_norm = 0;             ///< ||b - A x||_inf of the returned solution, max over columns
  std::optional<double> forward_error;  ///< max over columns of ||x - x_true||_inf / ||x_true||_inf
  double condition = 0;                 ///< kappa_1(A), estimated (spade::condition_estimate)
  double forward_error_bound = 0;       ///< condition * max(berr, eps): what the forward error may reach
  std::string output;                   ///< where the solution was written (--out), or empty
};

struct Report {
  std::string command;  ///< "solve", "info" or "demo"
  InputSummary input;
  std::optional<AnalysisSummary> analysis;
  std::string analysis_skipped;  ///< why there is no analysis (info on a matrix Cholesky cannot take)
  std::optional<MatchingSummary> matching;  ///< info on a square matrix
  std::vector<Phase> phases;
  std::optional<SolveSummary> solve;
};

/// The stop reason as the report names it: "converged", "stagnated" or "max_steps".
std::string to_string(RefinementResult::Stop stop);

/// The warning for a solution whose forward error may be large (forward_error_bound above sqrt(eps):
/// half the digits or more may be wrong), or an empty string.
std::string accuracy_warning(const SolveSummary& s);

/// Writes the report for people to `out`.
void print_report(std::FILE* out, const Report& report);

/// The report as JSON, keys in the printed order.
nlohmann::ordered_json to_json(const Report& report);

}  // namespace spade::cli
