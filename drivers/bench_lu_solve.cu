// bench_lu_solve: the GPU solve of spade's LU factor against its baselines, in one process on the same factor.
//
// For each problem (bench_lu_problems.hpp: the unsymmetric and indefinite matrices of ../shared/matrices with
// more than 50,000 nonzeros and the generated convection-diffusion operators), analyze and factorize through
// the Solver facade (factorization lu, placement gpu), then time on the same factor Q C = L U:
//   - spade's GPU solve of A x = b, forward (L) + backward (U) sweeps, CUDA events as the facade reports them
//     (right-hand sides already on the device), nrhs = 1 and 16, and of A^T x = b, nrhs = 1;
//   - spade's host LU solve (lu_solve_in_place, wall clock, --threads BLAS threads), nrhs = 1;
//   - cuSPARSE SpSV on spade's L (unit lower, rows in the positions after the interchanges) and U exported to
//     CSR (32-bit indices): L y = b then U z = y, analyses done beforehand (their time reported apart),
//     CUDA events; its solution is compared with the host solve's;
//   - the floor: the entries of L and U (values and indices, 12 bytes each, CSR-equivalent) read once over
//     the copy bandwidth measured here;
//   - the plan's build time (beside the factorization) and the time the caller waits after the host
//     factorization returns (the upload and inversion of both panel sets).
// Medians of repeated runs after warm-up. Prints one markdown table, the device and the settings; --json
// writes the same figures (drivers/bench_json.hpp). --band-terms prints instead, with no GPU, what a
// partitioned inverse of the factor (solve/partitioned_inverse.hpp) would be at every band: the pieces
// along the longest path of a sweep and the entries of one merged panel set, the two terms that bound a
// sweep from below.
#include <CLI/CLI.hpp>
#include <cuda_runtime.h>
#include <cusparse.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "../core/blas.hpp"
#include "../kernels/cuda_check.hpp"
#include "../solve/gpu_solve.hpp"
#include "../solve/partitioned_inverse.hpp"
#include "../solve/supernodal_schedule.hpp"
#include "bench_cuda.hpp"
#include "bench_host.hpp"
#include "bench_json.hpp"
#include "bench_lu_problems.hpp"
#include "spade/error.hpp"
#include "spade/lu.hpp"
#include "spade/solver.hpp"

namespace {

using spade::index_t;
using spade::offset_t;
using spade::bench::DeviceVector;
using spade::bench::median;
using spade::bench::seconds;

using spade::bench::Csr;

/// L (strictly lower, its unit diagonal implied) and U (upper, diagonal included) of Q C = L U in CSR: L's
/// rows are positions (a row below a diagonal block is C's row t at position pos(t)), U's rows and both
/// triangles' columns are C's columns. order: lu_row_order(F).
void lu_to_csr(const spade::LuFactor& F, const std::vector<index_t>& order, Csr& L, Csr& U) {
  const spade::SymbolicFactor& S = F.structure();
  const index_t n = S.n;
  if (2 * S.nnz_l > std::numeric_limits<int>::max()) throw spade::ResourceError("nnz(L+U) does not fit 32-bit CSR");
  std::vector<index_t> pos(static_cast<std::size_t>(n));
  for (index_t p = 0; p < n; ++p) pos[order[p]] = p;
  // Each entry once: (row, column, value) into its triangle, counted first, then placed. A row's entries come
  // by increasing (supernode, column), so every row comes out sorted.
  auto visit = [&](auto&& emit) {
    for (index_t s = 0; s < S.num_supernodes; ++s) {
      const index_t f = S.supernode_begin[s], k = S.supernode_cols(s), m = S.supernode_rows(s);
      const index_t* rows = S.row_indices.data() + S.row_ptr[s];
      const double* l = F.l_panel(s);
      const double* u = F.u_panel(s);
      for (index_t c = 0; c < k; ++c) {
        for (index_t r = 0; r <= c; ++r) emit(U, f + r, f + c, l[r + static_cast<offset_t>(c) * m]);  // U11
        for (index_t r = c + 1; r < k; ++r) emit(L, f + r, f + c, l[r + static_cast<offset_t>(c) * m]);  // L11
        for (index_t r = k; r < m; ++r) emit(L, pos[rows[r]], f + c, l[r + static_cast<offset_t>(c) * m]);  // L21
      }
      for (index_t r = k; r < m; ++r)  // U12: row f + c, column rows[r], by increasing column within a row
        for (index_t c = 0; c < k; ++c) emit(U, f + c, rows[r], u[(r - k) + static_cast<offset_t>(c) * (m - k)]);
    }
  };
  for (Csr* T : {&L, &U}) {
    T->n = n;
    T->ptr.assign(static_cast<std::size_t>(n) + 1, 0);
  }
  visit([](Csr& T, index_t row, index_t, double) { ++T.ptr[row + 1]; });
  std::vector<int> next_l, next_u;
  for (Csr* T : {&L, &U}) {
    for (index_t i = 0; i < n; ++i) T->ptr[i + 1] += T->ptr[i];
    T->col.resize(T->ptr[n]);
    T->val.resize(T->ptr[n]);
  }
  next_l.assign(L.ptr.begin(), L.ptr.end() - 1);
  next_u.assign(U.ptr.begin(), U.ptr.end() - 1);
  visit([&](Csr& T, index_t row, index_t column, double value) {
    int& slot = (&T == &L ? next_l : next_u)[row];
    T.col[slot] = column;
    T.val[slot++] = value;
  });
}

struct CusparseTimes {
  double analysis = NAN, spsv = NAN;
  std::vector<double> z;  // its solution, C's column numbering
};

/// cuSPARSE SpSV: L y = b (unit lower) then U z = y; b in positions.
CusparseTimes run_cusparse(const Csr& L, const Csr& U, const std::vector<double>& b, int reps) {
  CusparseTimes t;
  cusparseHandle_t handle;
  CUSPARSE_CHECK(cusparseCreate(&handle));
  const index_t n = L.n;
  DeviceVector<int> lp(L.ptr), lc(L.col), up(U.ptr), uc(U.col);
  DeviceVector<double> lv(L.val), uv(U.val), db(b), dy(static_cast<std::size_t>(n)), dz(static_cast<std::size_t>(n));
  cusparseSpMatDescr_t Ld = spade::bench::csr_descriptor(L, lp, lc, lv, CUSPARSE_FILL_MODE_LOWER, CUSPARSE_DIAG_TYPE_UNIT);
  cusparseSpMatDescr_t Ud = spade::bench::csr_descriptor(U, up, uc, uv, CUSPARSE_FILL_MODE_UPPER, CUSPARSE_DIAG_TYPE_NON_UNIT);
  const double one = 1.0;
  const cusparseOperation_t op = CUSPARSE_OPERATION_NON_TRANSPOSE;
  cusparseDnVecDescr_t vb, vy, vz;
  CUSPARSE_CHECK(cusparseCreateDnVec(&vb, n, db.p, CUDA_R_64F));
  CUSPARSE_CHECK(cusparseCreateDnVec(&vy, n, dy.p, CUDA_R_64F));
  CUSPARSE_CHECK(cusparseCreateDnVec(&vz, n, dz.p, CUDA_R_64F));
  cusparseSpSVDescr_t fwd, bwd;
  CUSPARSE_CHECK(cusparseSpSV_createDescr(&fwd));
  CUSPARSE_CHECK(cusparseSpSV_createDescr(&bwd));
  std::size_t bytes_f = 0, bytes_b = 0;
  CUSPARSE_CHECK(cusparseSpSV_bufferSize(handle, op, &one, Ld, vb, vy, CUDA_R_64F, CUSPARSE_SPSV_ALG_DEFAULT, fwd, &bytes_f));
  CUSPARSE_CHECK(cusparseSpSV_bufferSize(handle, op, &one, Ud, vy, vz, CUDA_R_64F, CUSPARSE_SPSV_ALG_DEFAULT, bwd, &bytes_b));
  DeviceVector<char> buf_f(bytes_f), buf_b(bytes_b);
  t.analysis = seconds([&] {
    CUSPARSE_CHECK(cusparseSpSV_analysis(handle, op, &one, Ld, vb, vy, CUDA_R_64F, CUSPARSE_SPSV_ALG_DEFAULT, fwd, buf_f.p));
    CUSPARSE_CHECK(cusparseSpSV_analysis(handle, op, &one, Ud, vy, vz, CUDA_R_64F, CUSPARSE_SPSV_ALG_DEFAULT, bwd, buf_b.p));
    SPADE_CUDA_CHECK(cudaDeviceSynchronize());
  });
  t.spsv = spade::bench::event_median(
      [&] {
        CUSPARSE_CHECK(cusparseSpSV_solve(handle, op, &one, Ld, vb, vy, CUDA_R_64F, CUSPARSE_SPSV_ALG_DEFAULT, fwd));
        CUSPARSE_CHECK(cusparseSpSV_solve(handle, op, &one, Ud, vy, vz, CUDA_R_64F, CUSPARSE_SPSV_ALG_DEFAULT, bwd));
      },
      1, reps);
  t.z = dz.download();
  cusparseSpSV_destroyDescr(fwd);
  cusparseSpSV_destroyDescr(bwd);
  cusparseDestroyDnVec(vb);
  cusparseDestroyDnVec(vy);
  cusparseDestroyDnVec(vz);
  cusparseDestroySpMat(Ld);
  cusparseDestroySpMat(Ud);
  cusparseDestroy(handle);
  return t;
}

double relative_difference(const std::vector<double>& x, const std::vector<double>& reference) {
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    diff = std::max(diff, std::abs(x[i] - reference[i]));
    norm = std::max(norm, std::abs(reference[i]));
    if (std::isnan(x[i])) return NAN;
  }
  return norm > 0 ? diff / norm : diff;
}

struct Row {
  std::string name;
  index_t n = 0;
  double nnz_lu = 0;
  index_t perturbed = 0;
  index_t supernodes = 0, groups = 0, tiles = 0, height = 0;
  double floor = 0, gpu1 = 0, gpu1_fwd = 0, gpu1_bwd = 0, gpu16 = 0, gpu_t = 0, host1 = 0;
  CusparseTimes cusparse;
  double factor = 0, plan = 0, visible = 0;
  double error = 0, cusparse_error = NAN;  // against the host solve, nrhs = 1
};

Row run_problem(const std::string& name, double bandwidth, int threads, int reps, bool baselines) {
  Row row;
  row.name = name;
  const spade::SparseMatrix A = spade::bench::problem_named(name).make();
  const index_t n = A.rows();
  row.n = n;
  spade::SolverOptions options;
  options.placement = spade::Placement::gpu;
  options.factorization = spade::Factorization::lu;
  options.threads = threads;
  spade::Solver solver(options);
  solver.analyze(A);
  solver.factorize(A);
  const spade::Report& report = solver.report();
  for (const spade::PhaseTime& p : report.phases)
    if (p.name == "numeric") row.factor = p.seconds;
  row.plan = report.plan->plan_seconds;
  row.visible = report.plan->visible_seconds;
  row.groups = report.plan->groups;
  row.tiles = report.plan->tiles;
  row.height = report.plan->tree_height;
  const spade::LuFactor& F = solver.lu_factor();
  const spade::LuSymbolic& S = F.symbolic();
  row.nnz_lu = static_cast<double>(S.nnz_lu);
  row.perturbed = F.perturbed_pivots();
  row.supernodes = S.structure->num_supernodes;
  row.floor = row.nnz_lu * (sizeof(double) + sizeof(int)) / bandwidth;

  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> b(n);
  for (double& v : b) v = u(rng);

  // spade GPU, right-hand sides on the device (the solve overwrites them: restore before each run).
  auto gpu_times = [&](index_t nrhs, int runs, double& sweeps, double* fwd, double* bwd) {
    std::vector<double> B(static_cast<std::size_t>(n) * nrhs);
    for (index_t j = 0; j < nrhs; ++j) std::copy(b.begin(), b.end(), B.begin() + static_cast<std::size_t>(j) * n);
    DeviceVector<double> pristine(B), work(B.size());
    std::vector<double> t, f, w;
    for (int r = 0; r < runs + 2; ++r) {
      SPADE_CUDA_CHECK(cudaMemcpy(work.p, pristine.p, B.size() * sizeof(double), cudaMemcpyDeviceToDevice));
      solver.solve(work.p, nrhs, n, spade::Memory::device);
      if (r < 2) continue;
      f.push_back(report.last_solve->forward_seconds);
      w.push_back(report.last_solve->backward_seconds);
      t.push_back(report.last_solve->forward_seconds + report.last_solve->backward_seconds);
    }
    sweeps = median(t);
    if (fwd) *fwd = median(f);
    if (bwd) *bwd = median(w);
    std::vector<double> x(n);
    SPADE_CUDA_CHECK(cudaMemcpy(x.data(), work.p, n * sizeof(double), cudaMemcpyDeviceToHost));
    return x;
  };
  const std::vector<double> x_gpu = gpu_times(1, reps, row.gpu1, &row.gpu1_fwd, &row.gpu1_bwd);
  gpu_times(16, std::max(3, reps / 2), row.gpu16, nullptr, nullptr);
  {  // A^T x = b: host arrays through solve_transposed; the sweeps' events as the facade reports them
    std::vector<double> t;
    for (int r = 0; r < reps + 2; ++r) {
      std::vector<double> x = b;
      solver.solve_transposed(x.data(), 1, n);
      if (r >= 2) t.push_back(report.last_solve->forward_seconds + report.last_solve->backward_seconds);
    }
    row.gpu_t = median(t);
  }

  std::vector<double> x_host = b;
  {
    std::vector<double> t;
    for (int r = 0; r < 4; ++r) {
      std::vector<double> x = b;
      const double s = seconds([&] { spade::lu_solve_in_place(F, x.data(), 1, n); });
      if (r >= 1) t.push_back(s);
      x_host = x;
    }
    row.host1 = median(t);
  }
  row.error = relative_difference(x_gpu, x_host);

  if (baselines) {
    // cuSPARSE solves Q C z = L U z = c with c in positions: c(p) = Dr(i) b(i), i = A's row of C's row q(p);
    // then x = Dc P^T z in A's numbering.
    Csr L, U;
    const std::vector<index_t> order = spade::lu_row_order(F);
    lu_to_csr(F, order, L, U);
    const std::vector<index_t>& perm = S.structure->perm;
    std::vector<double> c(n), x(n);
    for (index_t p = 0; p < n; ++p) {
      const index_t i = S.row_perm[perm[order[p]]];
      c[p] = S.row_scale[i] * b[i];
    }
    row.cusparse = run_cusparse(L, U, c, std::max(3, reps / 4));
    for (index_t k = 0; k < n; ++k) x[perm[k]] = S.col_scale[perm[k]] * row.cusparse.z[k];
    row.cusparse_error = relative_difference(x, x_host);
  }
  return row;
}

nlohmann::ordered_json row_json(const Row& r) {
  spade::bench::Comparison one{"solve, 1 rhs", r.gpu1, {}};
  if (!std::isnan(r.cusparse.spsv)) one.baselines.push_back({"cuSPARSE SpSV (L, U)", r.cusparse.spsv});
  one.baselines.push_back({"host LU solve", r.host1});
  return {{"matrix", r.name},
          {"n", r.n},
          {"nnz_lu", r.nnz_lu},
          {"perturbed_pivots", r.perturbed},
          {"supernodes", r.supernodes},
          {"groups", r.groups},
          {"tiles", r.tiles},
          {"tree_height", r.height},
          {"comparisons", spade::bench::to_json({one})},
          {"floor_seconds", r.floor},
          {"forward_seconds", r.gpu1_fwd},
          {"backward_seconds", r.gpu1_bwd},
          {"nrhs16_seconds", r.gpu16},
          {"transposed_seconds", r.gpu_t},
          {"cusparse_analysis_seconds", r.cusparse.analysis},
          {"factor_seconds", r.factor},
          {"plan_seconds", r.plan},
          {"visible_seconds", r.visible},
          {"error_against_host", r.error},
          {"cusparse_error_against_host", r.cusparse_error}};
}

/// --band-terms: per band of the partitioned inverse of the problem's LU structure, the pieces along a
/// sweep's longest path (a subtree solved as one group counts one) and the stored entries of one merged
/// panel set (L's or U's; the forward sweep reads one, the backward the other), from the pattern alone,
/// up to the band where the entries exceed 64 times the unmerged ones or a sweep's path is one piece.
void band_terms(const std::string& name) {
  const spade::SparseMatrix A = spade::bench::problem_named(name).make();
  const std::shared_ptr<const spade::LuSymbolic> lu = spade::analyze_lu(A);
  const std::shared_ptr<const spade::SymbolicFactor> S = lu->structure;
  const spade::SupernodalSchedule schedule = spade::build_schedule(*S);
  const double entries1 = static_cast<double>(S->panel_offset.back());
  for (index_t band = 1;; ++band) {
    // A unit hand-off and an infinite bandwidth: the first term counts the pieces on the path.
    const spade::SweepTerms t = spade::partition_terms(*S, schedule, band, 1.0, 1e300);
    const spade::SolveStructure structure = spade::partition_for_solve(S, band);
    const double entries = static_cast<double>(structure.solve->panel_offset.back());
    std::printf("| %s | %d | %.0f | %d | %.3g | %.1f |\n", name.c_str(), band, t.handoffs, structure.merged_pieces,
                entries, entries / entries1);
    if (entries > 64 * entries1 || t.handoffs <= 1) break;  // beyond: more bytes, or no change
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_lu_solve: the GPU solve of spade's LU factor against cuSPARSE SpSV and the host solve"};
  std::vector<std::string> problems(std::begin(spade::bench::kLuMatrices), std::end(spade::bench::kLuMatrices));
  problems.insert(problems.end(), std::begin(spade::bench::kLuGenerated), std::end(spade::bench::kLuGenerated));
  int threads = 16, reps = 20;
  bool no_baselines = false;
  app.add_option("--matrices", problems, "files of ../shared/matrices without .mtx.gz, or cd2d_M / cd3d_M (generated)")
      ->capture_default_str();
  app.add_option("--threads", threads, "host threads (factorization and host solve)")->capture_default_str();
  app.add_option("--reps", reps, "timed GPU solves per problem (median)")->capture_default_str();
  app.add_flag("--no-baselines", no_baselines, "skip cuSPARSE");
  std::string json_path;
  app.add_option("--json", json_path, "also write the figures as JSON to this file (drivers/bench_json.hpp)");
  bool terms = false;
  app.add_flag("--band-terms", terms,
               "print, with no GPU, the partitioned inverse's pieces on a sweep's path and merged entries per band");
  CLI11_PARSE(app, argc, argv);
  try {
    if (terms) {
      std::printf("| matrix | band | pieces on a sweep's path | merged pieces | entries of a panel set | / band 1 |\n"
                  "|---|---|---|---|---|---|\n");
      for (const std::string& name : problems) band_terms(name);
      return 0;
    }
    const double bandwidth = spade::bench::copy_bandwidth();
    std::printf("device: %s\ncopy bandwidth (read + write): %.3f TB/s\nhost threads: %d\n\n",
                spade::gpu_description().c_str(), bandwidth * 1e-12, threads);
    std::printf("| matrix | n | nnz(L+U) | perturbed | supernodes | groups / tiles | height | floor ms | GPU ms (L + U) | GPU / floor | SpSV ms (L, U) | SpSV / GPU "
                "| host ms | host / GPU | GPU 16 rhs ms | 16 / 1 | GPU A^T ms | factor s | plan s | visible ms "
                "| visible / factor | GPU vs host | SpSV vs host |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    std::fflush(stdout);
    std::vector<Row> rows;
    for (const std::string& name : problems) {
      if (!spade::bench::problem_named(name).generated && !spade::testing::matrix_exists(name + ".mtx.gz")) {
        std::printf("| %s | not found in %s |\n", name.c_str(), spade::testing::matrix_dir().c_str());
        continue;
      }
      rows.push_back(run_problem(name, bandwidth, threads, reps, !no_baselines));
      const Row& r = rows.back();
      std::printf("| %s | %d | %.3g | %d | %d | %d / %d | %d | %.4f | %.4f (%.4f + %.4f) | %.2f | %.3f | %.1fx | %.3f | %.1fx | %.4f | %.2f "
                  "| %.4f | %.3f | %.3f | %.1f | %.1f%% | %.1e | %.1e |\n",
                  r.name.c_str(), r.n, r.nnz_lu, r.perturbed, r.supernodes, r.groups, r.tiles, r.height, r.floor * 1e3, r.gpu1 * 1e3, r.gpu1_fwd * 1e3,
                  r.gpu1_bwd * 1e3, r.gpu1 / r.floor, r.cusparse.spsv * 1e3, r.cusparse.spsv / r.gpu1, r.host1 * 1e3,
                  r.host1 / r.gpu1, r.gpu16 * 1e3, r.gpu16 / r.gpu1, r.gpu_t * 1e3, r.factor, r.plan, r.visible * 1e3,
                  100 * r.visible / r.factor, r.error, r.cusparse_error);
      std::fflush(stdout);
    }
    if (!json_path.empty()) {
      nlohmann::ordered_json rows_json = nlohmann::ordered_json::array();
      for (const Row& r : rows) rows_json.push_back(row_json(r));
      spade::bench::write_json_file(
          json_path, {{"benchmark", "bench_lu_solve"},
                      {"floor", "L's and U's values and indices (12 bytes an entry) read once at the copy bandwidth"},
                      {"machine", {{"device", spade::gpu_description()}, {"copy_bandwidth_bytes_per_second", bandwidth}}},
                      {"settings", {{"threads", threads}, {"reps", reps}, {"baselines", !no_baselines}}},
                      {"rows", rows_json}});
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_lu_solve: %s\n", e.what());
    return 1;
  }
  return 0;
}
