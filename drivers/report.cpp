// Printing the run report (see report.hpp).
#include "report.hpp"

#include <algorithm>

namespace spade::cli {
namespace {

const char* yes_no(bool value) { return value ? "yes" : "no"; }

std::string stop_explanation(const SolveSummary& s) {
  switch (s.stop) {
    case RefinementResult::Stop::converged:
      return "converged (berr <= 2 eps = 4.4e-16)";
    case RefinementResult::Stop::stagnated:
      return "stagnated (a correction failed to halve berr; the better iterate is kept)";
    case RefinementResult::Stop::max_steps:
      break;
  }
  return "max_steps (" + std::to_string(s.max_steps) + " correction step" + (s.max_steps == 1 ? "" : "s") +
         " allowed by --refine)";
}

void print_input(std::FILE* out, const InputSummary& in) {
  std::fprintf(out, "input\n");
  if (in.field.empty())
    std::fprintf(out, "  matrix         %s\n", in.source.c_str());
  else
    std::fprintf(out, "  matrix         %s (Matrix Market coordinate %s %s, %lld entries listed)\n", in.source.c_str(),
                 in.field.c_str(), in.symmetry.c_str(), static_cast<long long>(in.file_entries));
  std::fprintf(out, "  size           %d x %d, nnz(A) = %lld (lower triangle %lld)\n", in.rows, in.cols,
               static_cast<long long>(in.nnz), static_cast<long long>(in.nnz_lower));
  std::fprintf(out, "  symmetric      %s (pattern %s, values %s)\n", yes_no(in.symmetric), yes_no(in.pattern_symmetric),
               yes_no(in.symmetric));
  std::fprintf(out, "  diagonal       %lld of %d entries stored\n", static_cast<long long>(in.diagonal_entries),
               std::min(in.rows, in.cols));
}

void print_analysis(std::FILE* out, const Report& report) {
  std::fprintf(out, "analysis\n");
  if (!report.analysis) {
    std::fprintf(out, "  skipped        %s\n", report.analysis_skipped.c_str());
    return;
  }
  const AnalysisSummary& a = *report.analysis;
  if (a.ordering_requested == "auto")
    std::fprintf(out, "  ordering       %s (chosen automatically, see --help)\n", a.ordering.c_str());
  else
    std::fprintf(out, "  ordering       %s\n", a.ordering.c_str());
  std::fprintf(out, "  supernodes     %d\n", a.supernodes);
  std::fprintf(out, "  nnz(L)         %lld (fill ratio nnz(L) / nnz(lower A) = %.2f)\n",
               static_cast<long long>(a.nnz_l), a.fill_ratio);
  std::fprintf(out, "  flops          %.4g GFlop factorization, %.4g GFlop per solve and right-hand side\n",
               a.flops * 1e-9, a.solve_flops * 1e-9);
}

void print_solve(std::FILE* out, const SolveSummary& s) {
  std::fprintf(out, "refinement (%d right-hand side%s: %s)\n", s.nrhs, s.nrhs == 1 ? "" : "s", s.rhs_source.c_str());
  std::fprintf(out, "  step   ||b - A x||_inf   berr\n");
  for (std::size_t k = 0; k < s.steps.size(); ++k)
    std::fprintf(out, "  %4zu   %15.3e   %9.3e\n", k, s.steps[k].residual_norm, s.steps[k].berr);
  std::fprintf(out, "result\n");
  std::fprintf(out, "  berr           %.3e (componentwise backward error, Oettli-Prager; max over right-hand sides)\n",
               s.berr);
  std::fprintf(out, "  ||b - A x||    %.3e (inf-norm)\n", s.residual_norm);
  if (s.forward_error)
    std::fprintf(out, "  forward error  %.3e (||x - x_true||_inf / ||x_true||_inf)\n", *s.forward_error);
  std::fprintf(out, "  stop           %s\n", stop_explanation(s).c_str());
  if (!s.output.empty()) std::fprintf(out, "  solution       written to %s\n", s.output.c_str());
}

}  // namespace

std::string to_string(RefinementResult::Stop stop) {
  switch (stop) {
    case RefinementResult::Stop::converged:
      return "converged";
    case RefinementResult::Stop::stagnated:
      return "stagnated";
    case RefinementResult::Stop::max_steps:
      break;
  }
  return "max_steps";
}

void print_report(std::FILE* out, const Report& report) {
  std::fprintf(out, "spade %s: sparse Cholesky P A P^T = L L^T on the host\n\n", report.command.c_str());
  print_input(out, report.input);
  print_analysis(out, report);
  if (report.solve)
    std::fprintf(out, "threads          %d OpenMP (subtrees of the factorization), %d OpenBLAS\n",
                 report.solve->openmp_threads, report.solve->blas_threads);
  std::fprintf(out, "phases           seconds    GFlop/s\n");
  for (const Phase& p : report.phases) {
    if (p.gflops_per_second > 0)
      std::fprintf(out, "  %-12s %9.4f  %9.2f\n", p.name.c_str(), p.seconds, p.gflops_per_second);
    else
      std::fprintf(out, "  %-12s %9.4f\n", p.name.c_str(), p.seconds);
  }
  if (report.solve) print_solve(out, *report.solve);
}

nlohmann::ordered_json to_json(const Report& report) {
  using nlohmann::ordered_json;
  ordered_json j;
  j["command"] = report.command;
  const InputSummary& in = report.input;
  j["input"] = {{"source", in.source},
                {"field", in.field.empty() ? ordered_json() : ordered_json(in.field)},
                {"symmetry", in.symmetry.empty() ? ordered_json() : ordered_json(in.symmetry)},
                {"file_entries", in.field.empty() ? ordered_json() : ordered_json(in.file_entries)},
                {"rows", in.rows},
                {"cols", in.cols},
                {"nnz", in.nnz},
                {"nnz_lower", in.nnz_lower},
                {"diagonal_entries", in.diagonal_entries},
                {"pattern_symmetric", in.pattern_symmetric},
                {"symmetric", in.symmetric}};
  if (report.analysis) {
    const AnalysisSummary& a = *report.analysis;
    j["analysis"] = {{"ordering_requested", a.ordering_requested},
                     {"ordering", a.ordering},
                     {"supernodes", a.supernodes},
                     {"nnz_l", a.nnz_l},
                     {"fill_ratio", a.fill_ratio},
                     {"flops", a.flops},
                     {"solve_flops", a.solve_flops}};
  } else {
    j["analysis"] = nullptr;
    j["analysis_skipped"] = report.analysis_skipped;
  }
  if (report.solve) j["threads"] = {{"openmp", report.solve->openmp_threads}, {"blas", report.solve->blas_threads}};
  ordered_json phases = ordered_json::object();
  for (const Phase& p : report.phases) {
    phases[p.name] = {{"seconds", p.seconds}};
    if (p.gflops_per_second > 0) phases[p.name]["gflops_per_second"] = p.gflops_per_second;
  }
  j["phases"] = phases;
  if (report.solve) {
    const SolveSummary& s = *report.solve;
    ordered_json steps = ordered_json::array();
    for (std::size_t k = 0; k < s.steps.size(); ++k)
      steps.push_back({{"step", k}, {"residual_norm", s.steps[k].residual_norm}, {"berr", s.steps[k].berr}});
    j["solve"] = {{"nrhs", s.nrhs},
                  {"rhs_source", s.rhs_source},
                  {"max_steps", s.max_steps},
                  {"steps", steps},
                  {"stop", to_string(s.stop)},
                  {"berr", s.berr},
                  {"residual_norm", s.residual_norm},
                  {"forward_error", s.forward_error ? ordered_json(*s.forward_error) : ordered_json()},
                  {"output", s.output.empty() ? ordered_json() : ordered_json(s.output)}};
  }
  return j;
}

}  // namespace spade::cli
