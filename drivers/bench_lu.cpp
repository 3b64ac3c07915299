// Benchmark of the host LU (include/spade/lu.hpp) against UMFPACK and KLU (SuiteSparse, tests/lu_reference.hpp),
// in the same process on the same matrices: analysis, numeric factorization and one solve (one right-hand
// side) of each solver, each phase the median of --reps runs of the whole sequence (wall clock).
//
// The phases compared:
//   spade:   analyze_lu (matching and scaling from the values, fill-reducing ordering, symbolic analysis);
//            LuFactor; one lu_solve_in_place. Backward error of that solve, and after lu_solve_refined
//            (default RefineOptions: at most 10 steps towards 2 eps).
//   UMFPACK: umfpack_di_symbolic; umfpack_di_numeric (its partial pivoting); umfpack_di_solve, which
//            includes UMFPACK's own iterative refinement (at most 2 steps by default).
//   KLU:     klu_analyze (BTF and AMD); klu_factor; klu_solve (no refinement).
// Backward errors are componentwise (spade::backward_error) with the original A; b_i = 1 + sin(i).
//
// Threads: spade runs with its automatic count (LuFactorOptions::threads = 0) under OpenMP's maximum set to
// --threads: at most --threads, fewer for a small factor; the table gives the count used. spade's solve
// runs on the factor's count; UMFPACK's OpenBLAS (the OpenMP build: the main thread's count) on --threads
// threads; KLU uses no BLAS and runs on one thread.
//
// A baseline that is too slow for the set is cut short, never run unbounded: after its analysis, KLU is
// skipped when its own flop estimate exceeds --baseline-limit seconds at 1e9 flop/s (a threshold, not a
// measured rate: KLU factors one column at a time without BLAS); a baseline whose first analysis plus
// factorization takes longer than --baseline-limit seconds is not repeated (its times are that one run).
// The table marks both, and the notes below it say why.
//
// Prints a markdown table (docs/BENCHMARKS.md keeps the latest one, with the command that made it); --json
// writes the same figures for scripts/plot_benchmarks.py (drivers/bench_json.hpp).
#include <CLI/CLI.hpp>
#include <omp.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench_host.hpp"
#include "bench_json.hpp"
#include "bench_lu_problems.hpp"
#include "lu_reference.hpp"
#include "spade/generators.hpp"
#include "spade/lu.hpp"
#include "spade/matrix_market.hpp"
#include "spade/solve.hpp"
#include "test_matrices.hpp"

namespace {

using spade::bench::Problem;
using spade::bench::cpu_name;
using spade::bench::median;
using spade::bench::seconds;
using spade::testing::LuReference;

/// KLU's assumed rate for the skip rule (see the file's comment), flop/s.
constexpr double kKluSkipRate = 1e9;

/// One solver's figures on one matrix: the medians of the runs made, or why there are none.
struct Run {
  std::optional<std::string> failure;  ///< what the solver threw, or why the baseline was skipped
  bool skipped = false;                ///< failure is the skip rule's reason, not an error
  int runs = 0;
  double analyze = 0, factor = 0, solve = 0;
  double berr = 0;  ///< of the last run's solve
};

struct SpadeRun : Run {
  std::string ordering;
  double nnz_lu = 0;
  spade::index_t perturbed = 0;
  int threads = 0;  ///< of the factorization (automatic, at most --threads)
  double berr_refined = 0;
  int refine_steps = 0;
  bool refine_converged = false;
};

SpadeRun run_spade(const spade::SparseMatrix& A, const std::vector<double>& b, int reps) {
  SpadeRun out;
  try {
    spade::LuFactorOptions options;  // automatic threads, at most omp_get_max_threads() = --threads (main)
    const spade::index_t n = A.rows();
    std::vector<double> ta, tf, ts, x;
    std::shared_ptr<const spade::LuSymbolic> S;
    std::unique_ptr<spade::LuFactor> F;
    for (int r = 0; r < reps; ++r) {
      F.reset();  // one factor in memory at a time
      ta.push_back(seconds([&] { S = spade::analyze_lu(A); }));
      tf.push_back(seconds([&] { F = std::make_unique<spade::LuFactor>(S, A, options); }));
      x = b;
      ts.push_back(seconds([&] { spade::lu_solve_in_place(*F, x.data(), 1, n); }));
    }
    out.runs = reps;
    out.analyze = median(ta), out.factor = median(tf), out.solve = median(ts);
    out.berr = spade::backward_error(A, b.data(), x.data()).berr;
    const spade::RefinementResult refined = spade::lu_solve_refined(A, *F, b.data(), n, x.data(), n, 1);
    out.berr_refined = refined.solution.berr;
    out.refine_steps = static_cast<int>(refined.steps.size()) - 1;
    out.refine_converged = refined.converged;
    out.ordering = spade::to_string(S->structure->ordering);
    out.nnz_lu = static_cast<double>(S->nnz_lu);
    out.perturbed = F->perturbed_pivots();
    out.threads = F->threads();
  } catch (const std::exception& e) {
    out.failure = e.what();
  }
  return out;
}

Run run_baseline(LuReference::Library library, const spade::SparseMatrix& A, const std::vector<double>& b,
                 int reps, double limit) {
  Run out;
  try {
    LuReference solver(library, A);
    std::vector<double> ta, tf, ts, x;
    for (int r = 0; r < reps; ++r) {
      ta.push_back(seconds([&] { solver.analyze(); }));
      if (library == LuReference::Library::klu && r == 0 && solver.estimated_flops() > limit * kKluSkipRate) {
        char why[160];
        std::snprintf(why, sizeof why, "its analysis estimates %.2g flops, over %g s at %.0e flop/s",
                      solver.estimated_flops(), limit, kKluSkipRate);
        out.failure = why;
        out.skipped = true;
        return out;
      }
      tf.push_back(seconds([&] { solver.factorize(); }));
      ts.push_back(seconds([&] { x = solver.solve(b, 1); }));
      if (ta[0] + tf[0] > limit) break;  // the first run is over the limit: not repeated
    }
    out.runs = static_cast<int>(tf.size());
    out.analyze = median(ta), out.factor = median(tf), out.solve = median(ts);
    out.berr = spade::backward_error(A, b.data(), x.data()).berr;
  } catch (const std::exception& e) {
    out.failure = e.what();
  }
  return out;
}

/// A cell of times joined by " + ": "skipped" or "error" for a solver that did not run, and "(1 run)" after
/// a baseline cut to fewer runs than asked.
std::string time_cell(const Run& r, const std::vector<double>& values, int reps) {
  if (r.failure) return r.skipped ? "skipped" : "error";
  std::string cell;
  char value[32];
  for (const double v : values) {
    std::snprintf(value, sizeof value, "%.3g", v);
    cell += (cell.empty() ? "" : " + ") + std::string(value);
  }
  return r.runs < reps ? cell + " (" + std::to_string(r.runs) + " run)" : cell;
}

std::string ratio_cell(const Run& baseline, const Run& spade) {
  if (baseline.failure || spade.failure) return "-";
  char cell[32];
  std::snprintf(cell, sizeof cell, "%.2f", baseline.factor / spade.factor);
  return cell;
}

std::string berr_cell(const Run& r, double berr) {
  if (r.failure) return "-";
  char cell[32];
  std::snprintf(cell, sizeof cell, "%.1e", berr);
  return cell;
}

nlohmann::ordered_json to_json(const Run& r) {
  if (r.failure) return {{r.skipped ? "skipped" : "error", *r.failure}};
  return {{"runs", r.runs}, {"analyze", r.analyze}, {"factor", r.factor}, {"solve", r.solve}, {"berr", r.berr}};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"spade host LU benchmark against UMFPACK and KLU"};
  int threads = 2, reps = 3;
  double limit = 30;
  std::vector<std::string> names;
  bool no_generated = false;
  std::string json_path;
  app.add_option("--threads", threads,
                 "spade's threads (OpenMP over subtrees, then teams on the large supernodes) and UMFPACK's "
                 "OpenBLAS threads; KLU runs on one")
      ->check(CLI::PositiveNumber);
  app.add_option("--reps", reps, "runs of analysis, factorization and solve per solver (median)")
      ->check(CLI::PositiveNumber);
  app.add_option("--matrices", names,
                 "problems to run instead of the default set: NAME reads NAME.mtx.gz from $SPADE_MATRICES "
                 "(default " SPADE_DEFAULT_MATRIX_DIR "); cd2d_M and cd3d_M are the generated upwind "
                 "convection-diffusion operators on an M^2 and M^3 grid. Default: basker_matrix1 bayer10 c-62 "
                 "ex14 cd2d_1024 cd3d_64");
  app.add_flag("--no-generated", no_generated, "leave out the generated operators");
  app.add_option("--baseline-limit", limit,
                 "seconds: a baseline whose first analysis + factorization takes longer is not repeated; KLU "
                 "is skipped when its flop estimate exceeds this many seconds at 1e9 flop/s")
      ->check(CLI::PositiveNumber);
  app.add_option("--json", json_path, "also write the figures as JSON to this file (drivers/bench_json.hpp)");
  CLI11_PARSE(app, argc, argv);
  omp_set_num_threads(threads);  // spade's automatic count stays at or below --threads
  if (names.empty()) {
    names.assign(std::begin(spade::bench::kLuMatrices), std::end(spade::bench::kLuMatrices));
    names.insert(names.end(), std::begin(spade::bench::kLuGenerated), std::end(spade::bench::kLuGenerated));
  }

  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  std::vector<std::string> notes;
  std::printf("Host: %s, %u hardware threads. spade: automatic threads, at most %d (OpenMP over subtrees, then "
              "teams on the large supernodes; the count used in its column); UMFPACK: %d OpenBLAS threads; "
              "KLU: 1 thread. "
              "Median of %d run(s) of analysis, factorization and one solve (1 right-hand side), wall clock; "
              "matrices from %s.\n\n",
              cpu_name().c_str(), std::thread::hardware_concurrency(), threads, threads, reps,
              spade::testing::matrix_dir().c_str());
  std::printf("| matrix | n | nnz(A) | ordering | nnz(L+U) spade | perturbed pivots | threads spade | analyze s spade | factor s spade "
              "| solve s spade | UMFPACK sym + num s | UMFPACK solve s | KLU analyze + factor s | KLU solve s | "
              "factor UMFPACK/spade | factor KLU/spade | berr spade | berr spade refined (steps) | berr UMFPACK | "
              "berr KLU |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const std::string& name : names) {
    const Problem p = spade::bench::problem_named(name);
    if (p.generated && no_generated) continue;
    spade::SparseMatrix A;
    try {
      A = p.make();
    } catch (const std::exception& e) {
      std::printf("| %s | skipped: %s |\n", p.name.c_str(), e.what());
      rows.push_back({{"matrix", p.name}, {"skipped", e.what()}});
      continue;
    }
    const spade::index_t n = A.rows();
    std::vector<double> b(n);
    for (spade::index_t i = 0; i < n; ++i) b[i] = 1.0 + std::sin(static_cast<double>(i));

    const SpadeRun s = run_spade(A, b, reps);
    const Run umfpack = run_baseline(LuReference::Library::umfpack, A, b, reps, limit);
    const Run klu = run_baseline(LuReference::Library::klu, A, b, reps, limit);
    for (const auto& [solver, run] : {std::pair<const char*, const Run*>{"spade", &s}, {"UMFPACK", &umfpack},
                                      {"KLU", &klu}}) {
      char cut[160];
      std::snprintf(cut, sizeof cut, "%d run of %d: its first analysis + factorization took over %g s", run->runs,
                    reps, limit);
      if (run->failure) notes.push_back(p.name + ", " + solver + (run->skipped ? ": skipped, " : ": ") + *run->failure);
      else if (run->runs < reps) notes.push_back(p.name + ", " + solver + ": " + cut);
    }
    char spade_cells[256] = "| - | - | - | - | error | error | error ";
    if (!s.failure)
      std::snprintf(spade_cells, sizeof spade_cells, "| %s | %.3g | %d | %d | %.3g | %.3g | %.3g ", s.ordering.c_str(),
                    s.nnz_lu, s.perturbed, s.threads, s.analyze, s.factor, s.solve);
    const std::string umf_factor = time_cell(umfpack, {umfpack.analyze, umfpack.factor}, reps);
    const std::string klu_factor = time_cell(klu, {klu.analyze, klu.factor}, reps);
    char refined[64] = "-";
    if (!s.failure)
      std::snprintf(refined, sizeof refined, "%.1e (%d%s)", s.berr_refined, s.refine_steps,
                    s.refine_converged ? "" : ", not converged");
    std::printf("| %s | %d | %lld %s| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", p.name.c_str(), n,
                static_cast<long long>(A.nnz()), spade_cells, umf_factor.c_str(),
                time_cell(umfpack, {umfpack.solve}, reps).c_str(), klu_factor.c_str(),
                time_cell(klu, {klu.solve}, reps).c_str(), ratio_cell(umfpack, s).c_str(), ratio_cell(klu, s).c_str(),
                berr_cell(s, s.berr).c_str(), refined, berr_cell(umfpack, umfpack.berr).c_str(),
                berr_cell(klu, klu.berr).c_str());
    std::fflush(stdout);

    std::vector<spade::bench::Comparison> comparisons;
    if (!s.failure) {
      comparisons = {{"analysis", s.analyze, {}}, {"factorization", s.factor, {}}, {"solve, 1 rhs", s.solve, {}}};
      for (const auto& [solver, run] : {std::pair<const char*, const Run*>{"UMFPACK", &umfpack}, {"KLU", &klu}}) {
        if (run->failure) continue;
        comparisons[0].baselines.push_back({solver, run->analyze});
        comparisons[1].baselines.push_back({solver, run->factor});
        comparisons[2].baselines.push_back({solver, run->solve});
      }
    }
    nlohmann::ordered_json spade_json = to_json(s);
    if (!s.failure) {
      spade_json["ordering"] = s.ordering;
      spade_json["nnz_lu"] = s.nnz_lu;
      spade_json["perturbed_pivots"] = s.perturbed;
      spade_json["threads"] = s.threads;
      spade_json["berr_refined"] = s.berr_refined;
      spade_json["refinement_steps"] = s.refine_steps;
      spade_json["refinement_converged"] = s.refine_converged;
    }
    rows.push_back({{"matrix", p.name},
                    {"n", n},
                    {"nnz_a", A.nnz()},
                    {"comparisons", spade::bench::to_json(comparisons)},
                    {"spade", spade_json},
                    {"umfpack", to_json(umfpack)},
                    {"klu", to_json(klu)}});
  }
  if (!notes.empty()) {
    std::printf("\n");
    for (const std::string& note : notes) std::printf("- %s\n", note.c_str());
  }
  if (!json_path.empty()) {
    nlohmann::ordered_json document = {
        {"benchmark", "bench_lu"},
        {"machine", {{"cpu", cpu_name()}, {"hardware_threads", std::thread::hardware_concurrency()}}},
        {"settings", {{"threads", threads}, {"reps", reps}, {"baseline_limit_seconds", limit}}},
        {"rows", rows}};
    try {
      spade::bench::write_json_file(json_path, document);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "bench_lu: %s\n", e.what());
      return 1;
    }
  }
  return 0;
}
