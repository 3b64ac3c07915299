// Benchmark of the host pipeline against CHOLMOD, in the same process on the same matrices: analyze
// (ordering + symbolic), numeric factorization and one solve (forward + backward, one right-hand side).
// Median of repeated runs. spade runs on --threads threads (its own teams, every BLAS call on one thread);
// CHOLMOD's OpenBLAS (the OpenMP build, which takes the calling thread's OpenMP count) on --cholmod-threads.
// Prints a markdown table (docs/BENCHMARKS.md keeps the latest one, with the command that made it); --json
// writes the same figures for scripts/plot_benchmarks.py (drivers/bench_json.hpp).
#include <CLI/CLI.hpp>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "bench_host.hpp"
#include "bench_json.hpp"
#include "cholmod_reference.hpp"
#include "spade/cholesky.hpp"
#include "spade/generators.hpp"
#include "spade/matrix_market.hpp"
#include "spade/solve.hpp"
#include "spade/symbolic.hpp"

namespace {

using spade::bench::cpu_name;
using spade::bench::median;
using spade::bench::seconds;

struct Problem {
  std::string name;
  std::function<spade::SparseMatrix()> make;
  bool by_default = true;  ///< run without --only (the small ones are for quick checks of the driver)
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"spade host factorization benchmark against CHOLMOD"};
  int threads = 2, cholmod_threads = 0, factor_repeats = 3, solve_repeats = 10;
  std::string matrix_dir = SPADE_DEFAULT_MATRIX_DIR;
  std::vector<std::string> only;
  std::string json_path;
  app.add_option("--threads", threads, "spade's threads (OpenMP over subtrees, then teams on the large supernodes)")
      ->check(CLI::PositiveNumber);
  app.add_option("--cholmod-threads", cholmod_threads, "CHOLMOD's OpenBLAS threads (default: --threads)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--factor-repeats", factor_repeats, "factorizations timed (median)")->check(CLI::PositiveNumber);
  app.add_option("--solve-repeats", solve_repeats, "solves timed (median)")->check(CLI::PositiveNumber);
  app.add_option("--matrices", matrix_dir, "folder of the real matrices (mdual_lap.mtx.gz)");
  app.add_option("--only", only, "run only these problems (mdual_lap, lap2d_1024, lap3d_64; also the small "
                               "lap2d_128 and lap3d_16, which run only when named)");
  app.add_option("--json", json_path, "also write the figures as JSON to this file (drivers/bench_json.hpp)");
  CLI11_PARSE(app, argc, argv);
  if (cholmod_threads == 0) cholmod_threads = threads;
  if (const char* env = std::getenv("SPADE_MATRICES")) matrix_dir = env;

  std::vector<Problem> problems = {
      {"mdual_lap", [&] { return spade::read_matrix_market(matrix_dir + "/mdual_lap.mtx.gz"); }},
      {"lap2d_1024", [] { return spade::laplacian_2d(1024, 1024); }},
      {"lap3d_64", [] { return spade::laplacian_3d(64, 64, 64); }},
      {"lap2d_128", [] { return spade::laplacian_2d(128, 128); }, false},
      {"lap3d_16", [] { return spade::laplacian_3d(16, 16, 16); }, false},
  };
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  std::printf("Host: %s, %u hardware threads. spade: %d threads (OpenMP over subtrees, then teams on the "
              "large supernodes); CHOLMOD: %d OpenBLAS threads. Median of %d factorizations and %d solves "
              "(1 right-hand side).\n\n",
              cpu_name().c_str(), std::thread::hardware_concurrency(), threads, cholmod_threads, factor_repeats,
              solve_repeats);
  std::printf("| matrix | n | nnz(A) | nnz(L) spade | nnz(L) CHOLMOD | ordering | analyze s spade | analyze s CHOLMOD "
              "| factor s spade | factor s CHOLMOD | factor CHOLMOD/spade | solve ms spade | solve ms CHOLMOD | "
              "solve CHOLMOD/spade | berr spade |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const Problem& p : problems) {
    if (only.empty() ? !p.by_default : std::find(only.begin(), only.end(), p.name) == only.end()) continue;
    spade::SparseMatrix A;
    try {
      A = p.make();
    } catch (const std::exception& e) {
      std::printf("| %s | skipped: %s |\n", p.name.c_str(), e.what());
      rows.push_back({{"matrix", p.name}, {"skipped", e.what()}});
      continue;
    }
    const spade::index_t n = A.rows();
    std::vector<double> b(n), x(n);
    for (spade::index_t i = 0; i < n; ++i) b[i] = 1.0 + std::sin(static_cast<double>(i));

    std::shared_ptr<const spade::SymbolicFactor> S;
    const double analyze_spade = seconds([&] { S = spade::analyze(A); });
    spade::FactorOptions fopt;
    fopt.threads = threads;
    std::vector<double> tf, ts;
    std::unique_ptr<spade::NumericFactor> F;
    for (int r = 0; r < factor_repeats; ++r)
      tf.push_back(seconds([&] { F = std::make_unique<spade::NumericFactor>(S, A, fopt); }));
    for (int r = 0; r < solve_repeats + 1; ++r) {
      x = b;
      const double t = seconds([&] { spade::solve_in_place(*F, x.data(), 1, n); });
      if (r > 0) ts.push_back(t);  // the first solve warms the caches
    }
    const double berr = spade::backward_error(A, b.data(), x.data()).berr;

    omp_set_num_threads(cholmod_threads);
    spade::testing::CholmodReference cholmod(A);
    const double analyze_cholmod = seconds([&] { cholmod.analyze(); });
    std::vector<double> cf, cs;
    for (int r = 0; r < factor_repeats; ++r) cf.push_back(seconds([&] { cholmod.factorize(); }));
    for (int r = 0; r < solve_repeats + 1; ++r) {
      const double t = seconds([&] { cholmod.solve(b, 1); });
      if (r > 0) cs.push_back(t);
    }
    const double f_spade = median(tf), f_cholmod = median(cf), s_spade = median(ts), s_cholmod = median(cs);
    std::printf("| %s | %d | %lld | %.3g | %.3g | %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.1f | %.1f | %.2f | %.1e |\n",
                p.name.c_str(), n, static_cast<long long>(A.nnz()), static_cast<double>(S->nnz_l), cholmod.nnz_l(),
                spade::to_string(S->ordering).c_str(), analyze_spade, analyze_cholmod, f_spade, f_cholmod,
                f_cholmod / f_spade, 1e3 * s_spade, 1e3 * s_cholmod, s_cholmod / s_spade, berr);
    std::fflush(stdout);
    const std::vector<spade::bench::Comparison> comparisons = {
        {"analysis", analyze_spade, {{"CHOLMOD", analyze_cholmod}}},
        {"factorization", f_spade, {{"CHOLMOD", f_cholmod}}},
        {"solve, 1 rhs", s_spade, {{"CHOLMOD", s_cholmod}}},
    };
    rows.push_back({{"matrix", p.name},
                    {"n", n},
                    {"nnz_a", A.nnz()},
                    {"nnz_l", S->nnz_l},
                    {"nnz_l_cholmod", cholmod.nnz_l()},
                    {"ordering", spade::to_string(S->ordering)},
                    {"comparisons", spade::bench::to_json(comparisons)},
                    {"berr", berr}});
  }
  if (!json_path.empty()) {
    nlohmann::ordered_json document = {
        {"benchmark", "bench_cholesky"},
        {"machine", {{"cpu", cpu_name()}, {"hardware_threads", std::thread::hardware_concurrency()}}},
        {"settings",
         {{"threads", threads}, {"cholmod_threads", cholmod_threads}, {"factor_repeats", factor_repeats},
          {"solve_repeats", solve_repeats}}},
        {"rows", rows}};
    try {
      spade::bench::write_json_file(json_path, document);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "bench_cholesky: %s\n", e.what());
      return 1;
    }
  }
  return 0;
}
