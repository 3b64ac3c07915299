// Printing the run report (see report.hpp).
#include "report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

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

void print_matching(std::FILE* out, const MatchingSummary& m, index_t n) {
  std::fprintf(out, "matching         maximum-product matching with row and column scaling (static pivoting for LU)\n");
  std::fprintf(out, "  |a_jj| / max_i |a_ij|   smallest    geometric mean   zero diagonals\n");
  const auto row = [&](const char* name, const DiagonalMagnitude& d) {
    std::fprintf(out, "  %-22s  %.3e   %.3e        %d of %d\n", name, d.min_ratio, d.geometric_mean,
                 d.zero_diagonals, n);
  };
  row("A", m.original);
  if (m.matched) row("P A (matched)", *m.matched);
  if (m.scaled) row("P Dr A Dc (scaled)", *m.scaled);
  if (m.singular.empty())
    std::fprintf(out, "  rows moved     %d of %d\n", m.rows_moved, n);
  else
    std::fprintf(out, "  singular       %s\n", m.singular.c_str());
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
  if (a.lu)
    std::fprintf(out, "  nnz(L+U)       %lld (fill ratio nnz(L+U) / nnz(A) = %.2f)\n", static_cast<long long>(a.nnz_l),
                 a.fill_ratio);
  else
    std::fprintf(out, "  nnz(L)         %lld (fill ratio nnz(L) / nnz(lower A) = %.2f)\n",
                 static_cast<long long>(a.nnz_l), a.fill_ratio);
  std::fprintf(out, "  flops          %.4g GFlop factorization, %.4g GFlop per solve and right-hand side\n",
               a.flops * 1e-9, a.solve_flops * 1e-9);
}

void print_placement(std::FILE* out, const SolveSummary& s) {
  std::fprintf(out, "factorization    %s (--factorization %s)\n", s.factorization_reason.c_str(),
               s.factorization_requested.c_str());
  if (s.factorization == "lu")
    std::fprintf(out, "perturbed pivots %d (tiny pivots replaced; refinement recovers them, with their low-rank "
                      "correction where the factor alone stalls)\n",
                 s.perturbed_pivots);
  std::fprintf(out, "placement        %s (--device %s)\n", s.placement_reason.c_str(), s.placement_requested.c_str());
  if (s.plan) {
    const GpuPlanReport& p = *s.plan;
    std::fprintf(out, "gpu plan         %d groups (%d small supernodes, one warp each), %d tiles of 32 x 32 over %d "
                      "supernodes, height %d\n",
                 p.groups, p.grouped_supernodes, p.tiles, p.tiled_supernodes, p.tree_height);
    if (p.partition_band > 1) {
      std::fprintf(out, "                 partitioned inverse: %d tree levels per piece, %d merged supernodes; ",
                   p.partition_band, p.merged_pieces);
      if (!p.partitioned_problem.empty())
        std::fprintf(out, "not used: %s\n", p.partitioned_problem.c_str());
      else
        std::fprintf(out, "ready %.4f s after the factorization\n", p.partitioned_seconds);
      if (!p.partition_trials.empty()) {
        std::fprintf(out, "                 bands timed (levels per piece: one solve, us):");
        for (const spade::PartitionTrial& t : p.partition_trials) std::fprintf(out, " %d: %.1f", t.band, t.seconds * 1e6);
        std::fprintf(out, "; the fastest kept\n");
      }
    }
    std::fprintf(out, "                 diagonal blocks inverted on the GPU: %d by the warp kernel, %d by the block "
                      "kernel, %d by cuBLAS trsm or cuSOLVER trtri\n",
                 p.small_inverses, p.mid_inverses, p.large_inverses);
    std::fprintf(out, "                 %.3f GiB on the device; plan %.4f s beside the factorization; values streamed "
                      "in %.4f s (%s); %.4f s visible after it\n",
                 p.device_bytes / 1073741824.0, p.plan_seconds, p.upload_seconds, p.pinned ? "pinned" : "pageable",
                 p.visible_seconds);
  }
  if (s.solve_times && s.solve_times->gpu)
    std::fprintf(out, "gpu sweeps       forward %.4f ms, backward %.4f ms (%d pass%s of up to %d right-hand sides%s)\n",
                 s.solve_times->forward_seconds * 1e3, s.solve_times->backward_seconds * 1e3, s.solve_times->passes,
                 s.solve_times->passes == 1 ? "" : "es", s.plan ? s.plan->max_width : 0,
                 s.solve_times->partitioned ? "; on the partitioned inverse" : "");
}

void print_solve(std::FILE* out, const SolveSummary& s) {
  std::fprintf(out, "refinement (%d right-hand side%s: %s)\n", s.nrhs, s.nrhs == 1 ? "" : "s", s.rhs_source.c_str());
  std::fprintf(out, "  step   ||b - A x||_inf   berr        correction\n");
  for (std::size_t k = 0; k < s.steps.size(); ++k) {
    const RefinementStep& step = s.steps[k];
    std::fprintf(out, "  %4zu   %15.3e   %9.3e   ", k, step.residual_norm, step.berr);
    if (k == 0)
      std::fprintf(out, "(first solve)\n");
    else if (step.corrected && !s.steps[k - 1].corrected)
      std::fprintf(out, "restart: corrected solve of b (two solves)\n");
    else if (step.corrected)
      std::fprintf(out, "corrected solve (two solves)\n");
    else if (step.single)
      std::fprintf(out, "one solve, factor in FP32\n");
    else
      std::fprintf(out, "one solve\n");
  }
  std::fprintf(out, "result\n");
  std::fprintf(out, "  berr           %.3e (componentwise backward error, Oettli-Prager; max over right-hand sides)\n",
               s.berr);
  std::fprintf(out, "  ||b - A x||    %.3e (inf-norm)\n", s.residual_norm);
  if (s.forward_error)
    std::fprintf(out, "  forward error  %.3e (||x - x_true||_inf / ||x_true||_inf)\n", *s.forward_error);
  std::fprintf(out, "  stop           %s\n", stop_explanation(s).c_str());
  std::fprintf(out, "  condition      %.1e (kappa_1(A), estimated with LAPACK's dlacn2 from solves with the factor)\n",
               s.condition);
  std::fprintf(out, "  error bound    %.1e (kappa_1(A) * max(berr, eps): how large ||x - x_exact|| / ||x_exact|| may be)\n",
               s.forward_error_bound);
  if (const std::string warning = accuracy_warning(s); !warning.empty())
    std::fprintf(out, "  warning        %s\n", warning.c_str());
  if (!s.output.empty()) std::fprintf(out, "  solution       written to %s\n", s.output.c_str());
}

}  // namespace

std::string accuracy_warning(const SolveSummary& s) {
  if (!(s.forward_error_bound > std::sqrt(std::numeric_limits<double>::epsilon()))) return "";
  char line[200];
  std::snprintf(line, sizeof line,
                "A is ill-conditioned (kappa_1 about %.1e): the solution may have a relative error up to %.1e, "
                "whatever berr says",
                s.condition, s.forward_error_bound);
  return line;
}

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
  std::fprintf(out, "spade %s: %s, factored on the host, solved %s\n\n",
               report.command.c_str(),
               report.solve && report.solve->factorization == "lu" ? "sparse LU Q P Dr A Dc P^T = L U (static pivoting)"
                                                                    : "sparse Cholesky P A P^T = L L^T", report.solve && report.solve->gpu ? "on the GPU" : "on the host");
  print_input(out, report.input);
  if (report.matching) print_matching(out, *report.matching, report.input.rows);
  print_analysis(out, report);
  if (report.solve)
    std::fprintf(out, "threads          %d (factorization and host solve; each BLAS call on one)\n",
                 report.solve->threads);
  if (report.solve) print_placement(out, *report.solve);
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
  if (report.matching) {
    const MatchingSummary& m = *report.matching;
    const auto magnitude = [](const std::optional<DiagonalMagnitude>& d) {
      if (!d) return ordered_json();
      return ordered_json{
          {"min_ratio", d->min_ratio}, {"geometric_mean", d->geometric_mean}, {"zero_diagonals", d->zero_diagonals}};
    };
    j["matching"] = {{"original", magnitude(m.original)},
                     {"matched", magnitude(m.matched)},
                     {"scaled", magnitude(m.scaled)},
                     {"rows_moved", m.singular.empty() ? ordered_json(m.rows_moved) : ordered_json()},
                     {"structurally_singular", m.singular.empty() ? ordered_json() : ordered_json(m.singular)}};
  }
  if (report.analysis) {
    const AnalysisSummary& a = *report.analysis;
    j["analysis"] = {{"ordering_requested", a.ordering_requested},
                     {"ordering", a.ordering},
                     {"supernodes", a.supernodes},
                     {"nnz_l", a.nnz_l},
                     {"lu", a.lu},
                     {"fill_ratio", a.fill_ratio},
                     {"flops", a.flops},
                     {"solve_flops", a.solve_flops}};
  } else {
    j["analysis"] = nullptr;
    j["analysis_skipped"] = report.analysis_skipped;
  }
  if (report.solve) {
    const SolveSummary& s = *report.solve;
    j["threads"] = s.threads;
    ordered_json placement = {{"requested", s.placement_requested}, {"gpu", s.gpu}, {"reason", s.placement_reason}};
    if (s.plan) {
      const GpuPlanReport& p = *s.plan;
      ordered_json trials = ordered_json::array();
      for (const spade::PartitionTrial& t : p.partition_trials) trials.push_back({{"band", t.band}, {"seconds", t.seconds}});
      placement["plan"] = {{"device", p.device},
                           {"device_bytes", p.device_bytes},
                           {"factor_bytes", p.factor_bytes},
                           {"max_width", p.max_width},
                           {"groups", p.groups},
                           {"grouped_supernodes", p.grouped_supernodes},
                           {"tiles", p.tiles},
                           {"tiled_supernodes", p.tiled_supernodes},
                           {"tree_height", p.tree_height},
                           {"critical_columns", p.critical_columns},
                           {"partition_band", p.partition_band},
                           {"merged_pieces", p.merged_pieces},
                           {"partitioned_seconds", p.partitioned_seconds},
                           {"partitioned_problem", p.partitioned_problem},
                           {"partition_trials", trials},
                           {"kernels", {{"solve", "supernodal forward/backward sweeps: one warp per group or 32 x 32 "
                                                  "tile, dependency counters on the assembly tree"},
                                        {"inverse_warp", p.small_inverses},
                                        {"inverse_block", p.mid_inverses},
                                        {"inverse_cusolver", p.large_inverses}}},
                           {"plan_seconds", p.plan_seconds},
                           {"upload_seconds", p.upload_seconds},
                           {"visible_seconds", p.visible_seconds},
                           {"pinned", p.pinned}};
    } else {
      placement["plan"] = nullptr;
    }
    j["placement"] = placement;
    j["factorization"] = {{"requested", s.factorization_requested},
                          {"used", s.factorization},
                          {"reason", s.factorization_reason},
                          {"perturbed_pivots", s.perturbed_pivots}};
  }
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
      steps.push_back({{"step", k},
                       {"residual_norm", s.steps[k].residual_norm},
                       {"berr", s.steps[k].berr},
                       {"corrected", s.steps[k].corrected},
                       {"single", s.steps[k].single}});
    ordered_json sweeps = nullptr;
    if (s.solve_times && s.solve_times->gpu)
      sweeps = {{"passes", s.solve_times->passes},
                {"forward_seconds", s.solve_times->forward_seconds},
                {"backward_seconds", s.solve_times->backward_seconds},
                {"partitioned", s.solve_times->partitioned}};
    j["solve"] = {{"nrhs", s.nrhs},
                  {"gpu", s.gpu},
                  {"sweeps", sweeps},
                  {"rhs_source", s.rhs_source},
                  {"max_steps", s.max_steps},
                  {"steps", steps},
                  {"stop", to_string(s.stop)},
                  {"berr", s.berr},
                  {"residual_norm", s.residual_norm},
                  {"forward_error", s.forward_error ? ordered_json(*s.forward_error) : ordered_json()},
                  {"condition_estimate", s.condition},
                  {"forward_error_bound", s.forward_error_bound},
                  {"warning", accuracy_warning(s).empty() ? ordered_json() : ordered_json(accuracy_warning(s))},
                  {"output", s.output.empty() ? ordered_json() : ordered_json(s.output)}};
  }
  return j;
}

}  // namespace spade::cli
