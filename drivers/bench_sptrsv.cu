// Benchmark of the sparse triangular solve (include/spade/sptrsv.hpp) against cuSPARSE SpSV / SpSM and the
// bandwidth floor, printing markdown tables (docs/benchmarks/sptrsv.md).
//
// usage: bench_sptrsv [--evaluate] [--algorithms NAME,NAME,...] [--json FILE] [name-filter ...]
//   --evaluate    issue 30's set: every square matrix of the folder with more than 10,000 nonzeros (not
//                 50,000), the generated grids, and spade's Cholesky factor L of every one of those that is
//                 SPD (forward with L, backward with L^T, both CSR; analyze + NumericFactor, exported as
//                 drivers/bench_solve.cu does); analyses timed 3 times, each solve's repetitions capped at
//                 about 25 ms; ends with the verdict table (auto against cuSPARSE and the best named)
//   --algorithms  the algorithms to time (names of spade::to_string, "auto" included; default all of them)
//   --json        also write the figures for scripts/plot_benchmarks.py (drivers/bench_json.hpp)
//   name-filter   only triangles whose name contains one of the filters (a factor's are NAME_L and NAME_Lt,
//                 so that "tomography_L" selects that factor's two triangles without the pattern's)
//
// Each matrix gives L = strictly lower part of its pattern plus a stored unit diagonal, CSR, non-unit
// solve type (the diagonal is read, as cuSPARSE reads it); off-diagonal values are random in [-1, 1] scaled
// by 0.9 / max(entries in the row, entries in the column), so L is diagonally dominant. Solve times are
// medians of CUDA-event timings after warm-up; analysis times are medians of 7 host wall clock timings
// around the whole analysis including its allocations and the final synchronization, for cuSPARSE
// (bufferSize + buffer allocation + analysis; also the same with the buffer allocated before the timing, the
// analysis call alone) and for spade (plan construction, its allocations included) alike; the first solve
// after the analysis is timed the same way, once (levr records its CUDA graph in it). auto times its trial
// candidates on its first solves (SptrsvPlan::choosing): its solves are timed after it has chosen, and
// the verdict reports what its choosing solves cost beyond as many solves of its choice. The floor is the
// bytes of L (values, indices, row pointers) and of b and x once, over the measured device-to-device copy
// bandwidth.
// A "-" in cluster's columns: its layout does not fit that matrix (the plan ran fused_level instead).
#include <cusparse.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <limits>
#include <utility>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "drivers/bench_cuda.hpp"
#include "drivers/bench_json.hpp"
#include "kernels/cuda_check.hpp"
#include "kernels/sync.cuh"
#include "spade/cholesky.hpp"
#include "spade/error.hpp"
#include "spade/symbolic.hpp"
#include "spade/generators.hpp"
#include "spade/matrix_market.hpp"
#include "spade/sptrsv.hpp"
#include "tests/test_matrices.hpp"

namespace {

using spade::index_t;
using spade::offset_t;
using spade::SptrsvAlgorithm;

/// The algorithms timed (all by default; --algorithms chooses), and whether auto is one of them.
std::vector<SptrsvAlgorithm> timed_algorithms = {SptrsvAlgorithm::levr,     SptrsvAlgorithm::levc,
                                                 SptrsvAlgorithm::slfr,     SptrsvAlgorithm::slfc,
                                                 SptrsvAlgorithm::syncfree, SptrsvAlgorithm::thread,
                                                 SptrsvAlgorithm::fused,    SptrsvAlgorithm::fused_level,
                                                 SptrsvAlgorithm::level_block, SptrsvAlgorithm::cluster};
bool time_auto = true;
/// --evaluate: about this many ms of repetitions per solve timing (100 otherwise), analyses timed this often.
double solve_budget_ms = 100;
int analysis_timings = 7;

using spade::bench::copy_bandwidth;
using spade::bench::DeviceVector;

/// CSR of L (strictly lower pattern of a, unit diagonal stored last in each row).
struct HostCsr {
  index_t n = 0;
  std::vector<std::int32_t> ptr;
  std::vector<index_t> col;
  std::vector<double> val;
};

HostCsr lower_with_unit_diagonal(const spade::SparseMatrix& a) {
  const index_t n = a.cols();
  std::vector<index_t> row_count(n, 0), col_count(n, 0);
  for (index_t j = 0; j < n; ++j)
    for (offset_t k = a.col_ptr()[j]; k < a.col_ptr()[j + 1]; ++k)
      if (a.row_ind()[k] > j) ++row_count[a.row_ind()[k]], ++col_count[j];
  HostCsr L;
  L.n = n;
  L.ptr.assign(std::size_t(n) + 1, 0);
  for (index_t i = 0; i < n; ++i) L.ptr[i + 1] = L.ptr[i] + row_count[i] + 1;
  L.col.resize(L.ptr[n]);
  L.val.resize(L.ptr[n]);
  std::vector<std::int32_t> next(L.ptr.begin(), L.ptr.end() - 1);
  std::mt19937_64 rng(2024);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  // Columns in increasing order: each row receives its entries sorted.
  for (index_t j = 0; j < n; ++j)
    for (offset_t k = a.col_ptr()[j]; k < a.col_ptr()[j + 1]; ++k) {
      const index_t i = a.row_ind()[k];
      if (i <= j) continue;
      L.col[next[i]] = j;
      L.val[next[i]++] = dist(rng) * 0.9 / std::max(row_count[i], col_count[j]);
    }
  for (index_t i = 0; i < n; ++i) L.col[next[i]] = i, L.val[next[i]] = 1.0;
  return L;
}

/// spade's Cholesky factor of the SPD matrix a (analyze + NumericFactor, the default ordering) in CSR: L
/// (lower, row i's entries by increasing column) and L^T (upper), 32-bit indices, as drivers/bench_solve.cu
/// exports it for cuSPARSE. Throws NumericalError where a is not positive definite.
std::pair<HostCsr, HostCsr> factor_triangles(const spade::SparseMatrix& a) {
  const std::shared_ptr<const spade::SymbolicFactor> symbolic = spade::analyze(a);
  const spade::NumericFactor F(symbolic, a);
  const spade::SymbolicFactor& S = *symbolic;
  if (S.nnz_l > std::numeric_limits<int>::max()) throw spade::ResourceError("nnz(L) does not fit 32-bit CSR");
  HostCsr L, U;
  L.n = U.n = S.n;
  L.ptr.assign(std::size_t(S.n) + 1, 0);
  U.ptr.assign(std::size_t(S.n) + 1, 0);
  for (index_t s = 0; s < S.num_supernodes; ++s) {
    const index_t f = S.supernode_begin[s], k = S.supernode_cols(s), m = S.supernode_rows(s);
    const index_t* rows = S.row_indices.data() + S.row_ptr[s];
    for (index_t c = 0; c < k; ++c) {
      U.ptr[f + c + 1] += m - c;
      for (index_t r = c; r < m; ++r) ++L.ptr[rows[r] + 1];
    }
  }
  for (index_t i = 0; i < S.n; ++i) L.ptr[i + 1] += L.ptr[i], U.ptr[i + 1] += U.ptr[i];
  L.col.resize(L.ptr[S.n]);
  L.val.resize(L.ptr[S.n]);
  U.col.resize(U.ptr[S.n]);
  U.val.resize(U.ptr[S.n]);
  std::vector<std::int32_t> next(L.ptr.begin(), L.ptr.end() - 1);
  for (index_t s = 0; s < S.num_supernodes; ++s) {  // columns ascending: L's rows come out sorted
    const index_t f = S.supernode_begin[s], k = S.supernode_cols(s), m = S.supernode_rows(s);
    const index_t* rows = S.row_indices.data() + S.row_ptr[s];
    const double* panel = F.panel(s);
    for (index_t c = 0; c < k; ++c) {
      std::int32_t u = U.ptr[f + c];  // row f + c of L^T is column f + c of L, rows ascending
      for (index_t r = c; r < m; ++r) {
        const double v = panel[r + static_cast<offset_t>(c) * m];
        L.col[next[rows[r]]] = f + c;
        L.val[next[rows[r]]++] = v;
        U.col[u] = rows[r];
        U.val[u++] = v;
      }
    }
  }
  return {std::move(L), std::move(U)};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

/// Median event time (ms) of `run` after two warm-up runs; repetitions sized to about solve_budget_ms (3 to
/// 100); a run of more than 200 ms is timed once, after one warm-up.
double time_solve(const std::function<void()>& run) {
  cudaEvent_t start, stop;
  SPADE_CUDA_CHECK(cudaEventCreate(&start));
  SPADE_CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<double> times;
  auto once = [&] {
    SPADE_CUDA_CHECK(cudaEventRecord(start));
    run();
    SPADE_CUDA_CHECK(cudaEventRecord(stop));
    SPADE_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    SPADE_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    return double(ms);
  };
  const double first = once();
  if (first > 200) return once();
  once();
  const int reps = std::clamp(int(solve_budget_ms / std::max(first, 1e-3)), 3, 100);
  for (int r = 0; r < reps; ++r) times.push_back(once());
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return median(times);
}

/// Median host wall-clock time (ms) of `run` (which must synchronize), over `reps` runs (analysis_timings
/// when negative: a median of 7 rather than 3 keeps one slow cudaMalloc in a short analysis from setting
/// the figure).
double time_host(const std::function<void()>& run, int reps = -1) {
  if (reps < 0) reps = analysis_timings;
  std::vector<double> times;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return median(times);
}

/// Two thread blocks on different SMs (each asks for more than half of an SM's shared memory) pass a
/// value back and forth `hops` times through device memory, the way the solve kernels hand a solved
/// unknown to a waiting row: one relaxed store, relaxed polls without sleeping. Block b takes the hops
/// b, b + 2, ...; a poll gives up after `limit` tries and sets *failed.
__global__ void handoff_kernel(double* value, int hops, long long limit, int* failed) {
  extern __shared__ char keep_apart[];
  if (threadIdx.x != 0) return;
  keep_apart[0] = 0;
  for (int k = blockIdx.x; k < hops; k += 2) {
    long long polls = 0;
    while (spade::kernels::load_relaxed(value) != double(k))
      if (++polls == limit) {
        *failed = 1;
        return;
      }
    spade::kernels::store_relaxed(value, double(k + 1));
  }
}

/// One-way latency (us) of a hand-off between two SMs through device memory, the floor of one step of a
/// dependency chain that crosses warps in a sync-free kernel: a launch of 20,000 hops timed like the solves
/// (the 8-byte reset before each launch is inside the timing, a few microseconds of about 10 ms).
double handoff_latency_us() {
  const int hops = 20000;
  const int smem = 120 * 1024;
  SPADE_CUDA_CHECK(cudaFuncSetAttribute(handoff_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  DeviceVector<double> value(1);
  DeviceVector<int> failed(1);
  SPADE_CUDA_CHECK(cudaMemset(failed.p, 0, sizeof(int)));
  const double ms = time_solve([&] {
    SPADE_CUDA_CHECK(cudaMemset(value.p, 0, sizeof(double)));
    handoff_kernel<<<2, 32, smem>>>(value.p, hops, 1ll << 30, failed.p);
    SPADE_CUDA_CHECK(cudaGetLastError());
  });
  if (failed.download()[0] != 0) throw spade::ResourceError("hand-off benchmark: a poll gave up");
  return ms * 1e3 / hops;
}

double relative_error(const std::vector<double>& x, const std::vector<double>& ref) {
  double err = 0, scale = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i])) return NAN;
    err = std::max(err, std::abs(x[i] - ref[i]));
    scale = std::max(scale, std::abs(ref[i]));
  }
  return err / std::max(scale, 1e-300);
}

struct Result {
  double analysis = NAN, solve = NAN, solve8 = NAN;
  double first = NAN;   // the first solve after the analysis (one right-hand side), host wall clock
  double moving = NAN;  // levr: a solve whose x alternates between two buffers (and so between its two graphs)
  // auto: its solves of one right-hand side until it had chosen (the first one included), host wall clock
  // each, and how many.
  double choosing = 0;
  int choosing_solves = 0;
  bool ok = true;
  SptrsvAlgorithm choice = SptrsvAlgorithm::automatic, choice8 = SptrsvAlgorithm::automatic;  // what ran
};

struct Row {
  std::string name;
  spade::SptrsvStats stats;
  spade::SptrsvStats auto_stats;  // auto's plan: its trials
  std::int64_t nnz = 0;
  double floor = 0, floor8 = 0;
  Result cusparse;
  double cusparse_call = NAN;  // cuSPARSE's analysis with its buffer allocated beforehand
  std::vector<Result> ours;    // timed_algorithms order
  Result automatic;
};

struct CusparseRun {
  cusparseHandle_t handle = nullptr;
  CusparseRun() { CUSPARSE_CHECK(cusparseCreate(&handle)); }
  ~CusparseRun() { cusparseDestroy(handle); }
};

Row run_matrix(const std::string& name, const HostCsr& L, double bandwidth, cusparseHandle_t handle,
               spade::TriangleKind triangle = spade::TriangleKind::lower) {
  const index_t n = L.n;
  const int nrhs = 8;
  Row row;
  row.name = name;
  row.nnz = L.ptr[n];
  const double matrix_bytes = double(row.nnz) * (8 + 4) + double(n + 1) * 4;
  row.floor = (matrix_bytes + 2.0 * 8 * n) / bandwidth * 1e3;
  row.floor8 = (matrix_bytes + 2.0 * 8 * n * nrhs) / bandwidth * 1e3;

  DeviceVector<std::int32_t> ptr(L.ptr);
  DeviceVector<index_t> col(L.col);
  DeviceVector<double> val(L.val);
  std::vector<double> b_host(std::size_t(n) * nrhs);
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  for (double& v : b_host) v = dist(rng);
  DeviceVector<double> b(b_host), x(std::size_t(n) * nrhs), x_ref(std::size_t(n) * nrhs);

  // cuSPARSE SpSV and SpSM.
  cusparseSpMatDescr_t A;
  CUSPARSE_CHECK(cusparseCreateCsr(&A, n, n, row.nnz, ptr.p, col.p, val.p, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                                   CUSPARSE_INDEX_BASE_ZERO, CUDA_R_64F));
  cusparseFillMode_t fill =
      triangle == spade::TriangleKind::lower ? CUSPARSE_FILL_MODE_LOWER : CUSPARSE_FILL_MODE_UPPER;
  cusparseDiagType_t diag = CUSPARSE_DIAG_TYPE_NON_UNIT;
  CUSPARSE_CHECK(cusparseSpMatSetAttribute(A, CUSPARSE_SPMAT_FILL_MODE, &fill, sizeof(fill)));
  CUSPARSE_CHECK(cusparseSpMatSetAttribute(A, CUSPARSE_SPMAT_DIAG_TYPE, &diag, sizeof(diag)));
  cusparseDnVecDescr_t vb, vx;
  CUSPARSE_CHECK(cusparseCreateDnVec(&vb, n, b.p, CUDA_R_64F));
  CUSPARSE_CHECK(cusparseCreateDnVec(&vx, n, x_ref.p, CUDA_R_64F));
  const double alpha = 1.0;
  const auto op = CUSPARSE_OPERATION_NON_TRANSPOSE;
  // Descriptors and buffers of every timed analysis are kept and destroyed after the timing. One analysis
  // allocates its buffer (given: null) or takes one allocated before the timing (the call alone).
  std::vector<cusparseSpSVDescr_t> sv_descrs;
  std::vector<void*> sv_buffers;
  std::size_t sv_bytes = 0;
  auto sv_analysis = [&](void* given) {
    cusparseSpSVDescr_t d;
    CUSPARSE_CHECK(cusparseSpSV_createDescr(&d));
    sv_descrs.push_back(d);
    CUSPARSE_CHECK(cusparseSpSV_bufferSize(handle, op, &alpha, A, vb, vx, CUDA_R_64F, CUSPARSE_SPSV_ALG_DEFAULT, d,
                                           &sv_bytes));
    void* buffer = given;
    if (buffer == nullptr) {
      SPADE_CUDA_CHECK(cudaMalloc(&buffer, std::max<std::size_t>(sv_bytes, 1)));
      sv_buffers.push_back(buffer);
    }
    CUSPARSE_CHECK(cusparseSpSV_analysis(handle, op, &alpha, A, vb, vx, CUDA_R_64F, CUSPARSE_SPSV_ALG_DEFAULT, d,
                                         buffer));
    SPADE_CUDA_CHECK(cudaDeviceSynchronize());
  };
  row.cusparse.analysis = time_host([&] { sv_analysis(nullptr); });
  std::vector<void*> spare(analysis_timings);
  for (void*& buffer : spare) {
    SPADE_CUDA_CHECK(cudaMalloc(&buffer, std::max<std::size_t>(sv_bytes, 1)));
    sv_buffers.push_back(buffer);
  }
  row.cusparse_call = time_host([&] {
    sv_analysis(spare.back());
    spare.pop_back();
  });
  // cuSPARSE solves with the descriptor of the last analysis of A: one of an earlier analysis measured
  // 20-50% slower on the H100 (c-62 0.117 against 0.079 ms, NotreDame_www 0.376 against 0.303).
  cusparseSpSVDescr_t sv = sv_descrs.back();
  auto sv_solve = [&] {
    CUSPARSE_CHECK(cusparseSpSV_solve(handle, op, &alpha, A, vb, vx, CUDA_R_64F, CUSPARSE_SPSV_ALG_DEFAULT, sv));
  };
  row.cusparse.first = time_host([&] { sv_solve(); SPADE_CUDA_CHECK(cudaDeviceSynchronize()); }, 1);
  row.cusparse.solve = time_solve(sv_solve);
  const std::vector<double> ref1 = x_ref.download();
  for (cusparseSpSVDescr_t d : sv_descrs) cusparseSpSV_destroyDescr(d);
  for (void* buffer : sv_buffers) cudaFree(buffer);

  cusparseDnMatDescr_t mb, mx;
  CUSPARSE_CHECK(cusparseCreateDnMat(&mb, n, nrhs, n, b.p, CUDA_R_64F, CUSPARSE_ORDER_COL));
  CUSPARSE_CHECK(cusparseCreateDnMat(&mx, n, nrhs, n, x_ref.p, CUDA_R_64F, CUSPARSE_ORDER_COL));
  cusparseSpSMDescr_t sm;
  CUSPARSE_CHECK(cusparseSpSM_createDescr(&sm));
  std::size_t sm_bytes = 0;
  CUSPARSE_CHECK(cusparseSpSM_bufferSize(handle, op, op, &alpha, A, mb, mx, CUDA_R_64F, CUSPARSE_SPSM_ALG_DEFAULT, sm,
                                         &sm_bytes));
  DeviceVector<char> sm_buffer(sm_bytes);
  CUSPARSE_CHECK(cusparseSpSM_analysis(handle, op, op, &alpha, A, mb, mx, CUDA_R_64F, CUSPARSE_SPSM_ALG_DEFAULT, sm,
                                       sm_buffer.p));
  row.cusparse.solve8 = time_solve([&] {
    CUSPARSE_CHECK(cusparseSpSM_solve(handle, op, op, &alpha, A, mb, mx, CUDA_R_64F, CUSPARSE_SPSM_ALG_DEFAULT, sm));
  });
  const std::vector<double> ref8 = x_ref.download();
  cusparseSpSM_destroyDescr(sm);
  cusparseDestroyDnMat(mb);
  cusparseDestroyDnMat(mx);
  cusparseDestroyDnVec(vb);
  cusparseDestroyDnVec(vx);
  cusparseDestroySpMat(A);

  const spade::DeviceTriangle<double> view{n, L.ptr[n], ptr.p, col.p, val.p, spade::SparseFormat::csr, triangle,
                                           spade::DiagonalKind::non_unit};
  auto measure = [&](SptrsvAlgorithm a, Result& r) {
    spade::SptrsvOptions options;
    options.algorithm = a;
    std::vector<std::unique_ptr<spade::SptrsvPlan<double>>> plans;  // destroyed after the timing
    r.analysis = time_host([&] { plans.push_back(std::make_unique<spade::SptrsvPlan<double>>(view, options)); });
    spade::SptrsvPlan<double>& plan = *plans.back();
    r.first = time_host([&] { plan.solve(b.p, x.p); SPADE_CUDA_CHECK(cudaDeviceSynchronize()); }, 1);
    // auto's trials run on its first solves: the steady state is timed after them.
    auto choose = [&](int width) {
      for (int k = 0; plan.choosing(width) && k < 16; ++k) {
        const double ms = time_host(
            [&] {
              plan.solve(b.p, n, x.p, n, width);
              SPADE_CUDA_CHECK(cudaDeviceSynchronize());
            },
            1);
        if (width == 1) r.choosing += ms, ++r.choosing_solves;
      }
    };
    r.choosing = r.first;
    r.choosing_solves = 1;
    choose(1);
    r.solve = time_solve([&] { plan.solve(b.p, x.p); });
    if (a == SptrsvAlgorithm::levr) {
      int turn = 0;
      r.moving = time_solve([&] { plan.solve(b.p, x.p + std::size_t(n) * (turn++ % 2)); });
    }
    plan.check();
    const std::vector<double> x1 = x.download();
    r.ok = relative_error(std::vector<double>(x1.begin(), x1.begin() + n), ref1) < 1e-10;
    choose(nrhs);
    r.solve8 = time_solve([&] { plan.solve(b.p, n, x.p, n, nrhs); });
    plan.check();
    r.ok = r.ok && relative_error(x.download(), ref8) < 1e-10;
    r.choice = plan.algorithm();
    r.choice8 = plan.algorithm(nrhs);
    if (a != SptrsvAlgorithm::automatic && r.choice != a)  // cluster did not fit: its column shows "-"
      r.analysis = r.solve = r.solve8 = r.first = std::nan("");
    return plan.stats();
  };
  for (SptrsvAlgorithm a : timed_algorithms) {
    row.ours.emplace_back();
    const spade::SptrsvStats got = measure(a, row.ours.back());
    if (a == SptrsvAlgorithm::levr) row.stats = got;  // the level sets' statistics
  }
  if (time_auto) row.auto_stats = measure(SptrsvAlgorithm::automatic, row.automatic);
  if (row.stats.n == 0) {  // levr not timed: its plan still gives the level sets' statistics
    spade::SptrsvOptions options;
    options.algorithm = SptrsvAlgorithm::levr;
    row.stats = spade::SptrsvPlan<double>(view, options).stats();
  }
  return row;
}

std::string fmt(double v, bool ok = true) {
  char buf[32];
  if (std::isnan(v)) return "-";
  std::snprintf(buf, sizeof buf, v < 0.1 ? "%.4f" : (v < 10 ? "%.3f" : "%.1f"), v);
  return ok ? buf : std::string(buf) + " (wrong)";
}

/// "1.23x", or "-" where a time is missing (auto not timed).
std::string ratio(double v) {
  char buf[32];
  if (!std::isfinite(v) || v == 0) return "-";
  std::snprintf(buf, sizeof buf, "%.2fx", v);
  return buf;
}

void print_tables(const std::vector<Row>& rows) {
  std::printf("\n### One right-hand side: solve time (ms, median)\n\n");
  std::printf("| matrix | n | nnz(L) | levels | rows/level | nnz/row | floor | cuSPARSE SpSV |");
  for (SptrsvAlgorithm a : timed_algorithms) std::printf(" %s |", spade::to_string(a));
  std::printf(" auto (choice) | best / cuSPARSE | auto / cuSPARSE |\n|---|");
  for (std::size_t c = 0; c < 10 + timed_algorithms.size(); ++c) std::printf("---|");
  std::printf("\n");
  double log_best = 0, log_auto = 0;
  int slower_best = 0, slower_auto = 0;
  for (const Row& r : rows) {
    std::printf("| %s | %d | %lld | %d | %.0f | %.2f | %s | %s |", r.name.c_str(), r.stats.n, (long long)r.nnz,
                r.stats.levels, r.stats.rows_per_level, r.stats.nnz_per_row + 1, fmt(r.floor).c_str(),
                fmt(r.cusparse.solve).c_str());
    double best = time_auto && r.automatic.ok ? r.automatic.solve : INFINITY;
    for (const Result& o : r.ours) {
      std::printf(" %s |", fmt(o.solve, o.ok).c_str());
      if (o.ok) best = std::min(best, o.solve);
    }
    const double sb = r.cusparse.solve / best, sa = r.cusparse.solve / r.automatic.solve;
    log_best += std::log(sb);
    log_auto += std::log(sa);
    slower_best += sb < 1;
    slower_auto += sa < 1;
    std::printf(" %s (%s) | %s | %s |\n", fmt(r.automatic.solve, r.automatic.ok).c_str(),
                time_auto ? spade::to_string(r.automatic.choice) : "not timed", ratio(sb).c_str(), ratio(sa).c_str());
  }
  const double count = std::max<std::size_t>(rows.size(), 1);
  std::printf("\nGeometric-mean speedup over cuSPARSE SpSV: best %s, auto %s; slower than cuSPARSE: best on %d, "
              "auto on %d of %zu matrices.\n",
              ratio(std::exp(log_best / count)).c_str(), ratio(std::exp(log_auto / count)).c_str(), slower_best,
              slower_auto, rows.size());

  std::printf("\n### Analysis time (ms, host wall clock, median of 7)\n\nThe first-solve columns: the first solve "
              "after the analysis (one right-hand side, host wall clock, once), where levr records its graph. The "
              "last: levr's solve (CUDA events, median) with x alternating between two buffers, which replays its "
              "two graphs in turn (the second reads b and x from device memory). cuSPARSE SpSV: bufferSize, "
              "cudaMalloc of the buffer and SpSV_analysis; call alone: the same with the buffer allocated before "
              "the timing.\n\n"
              "| matrix | cuSPARSE SpSV | cuSPARSE call alone |");
  for (SptrsvAlgorithm a : timed_algorithms) std::printf(" %s |", spade::to_string(a));
  std::printf(" auto | first solve: cuSPARSE | levr | auto | levr solve, x moving |\n|---|---|---|");
  for (std::size_t c = 0; c <= timed_algorithms.size() + 4; ++c) std::printf("---|");
  std::printf("\n");
  int auto_slower = 0, auto_slower_call = 0, best_slower = 0;
  const auto levr_at = std::find(timed_algorithms.begin(), timed_algorithms.end(), SptrsvAlgorithm::levr);
  for (const Row& r : rows) {
    std::printf("| %s | %s | %s |", r.name.c_str(), fmt(r.cusparse.analysis).c_str(), fmt(r.cusparse_call).c_str());
    for (const Result& o : r.ours) std::printf(" %s |", fmt(o.analysis).c_str());
    const Result levr =
        levr_at == timed_algorithms.end() ? Result{} : r.ours[std::size_t(levr_at - timed_algorithms.begin())];
    std::printf(" %s | %s | %s | %s | %s |\n", fmt(r.automatic.analysis).c_str(), fmt(r.cusparse.first).c_str(),
                fmt(levr.first).c_str(), fmt(r.automatic.first).c_str(), fmt(levr.moving).c_str());
    auto_slower += r.automatic.analysis > r.cusparse.analysis;
    auto_slower_call += r.automatic.analysis > r.cusparse_call;
    // The analysis of the named algorithm that solved one right-hand side fastest.
    const Result* best = nullptr;
    for (const Result& o : r.ours)
      if (o.ok && !std::isnan(o.solve) && (best == nullptr || o.solve < best->solve)) best = &o;
    best_slower += best != nullptr && best->analysis > r.cusparse.analysis;
  }
  std::printf("\nAnalysis slower than cuSPARSE's: auto on %d of %zu matrices (than cuSPARSE's call alone on %d), the "
              "fastest named algorithm's on %d.\n",
              auto_slower, rows.size(), auto_slower_call, best_slower);

  std::printf("\n### Eight right-hand sides: solve time (ms, median)\n\n| matrix | floor | cuSPARSE SpSM |");
  for (SptrsvAlgorithm a : timed_algorithms) std::printf(" %s |", spade::to_string(a));
  std::printf(" auto (choice) | best / SpSM | auto / SpSM |\n|---|---|---|");
  for (std::size_t c = 0; c < timed_algorithms.size() + 3; ++c) std::printf("---|");
  std::printf("\n");
  double log8_best = 0, log8_auto = 0;
  for (const Row& r : rows) {
    std::printf("| %s | %s | %s |", r.name.c_str(), fmt(r.floor8).c_str(), fmt(r.cusparse.solve8).c_str());
    double best = time_auto && r.automatic.ok ? r.automatic.solve8 : INFINITY;
    for (const Result& o : r.ours) {
      std::printf(" %s |", fmt(o.solve8, o.ok).c_str());
      if (o.ok) best = std::min(best, o.solve8);
    }
    const double sb = r.cusparse.solve8 / best, sa = r.cusparse.solve8 / r.automatic.solve8;
    log8_best += std::log(sb);
    log8_auto += std::log(sa);
    std::printf(" %s (%s) | %s | %s |\n", fmt(r.automatic.solve8, r.automatic.ok).c_str(),
                time_auto ? spade::to_string(r.automatic.choice8) : "not timed", ratio(sb).c_str(), ratio(sa).c_str());
  }
  std::printf("\nGeometric-mean speedup over cuSPARSE SpSM (8 right-hand sides): best %s, auto %s.\n",
              ratio(std::exp(log8_best / count)).c_str(), ratio(std::exp(log8_auto / count)).c_str());
  // What 8 right-hand sides cost against 1, per algorithm (the dependency chain is the same).
  std::printf("\nTime of 8 right-hand sides over time of 1 (geometric mean over the matrices): cuSPARSE %.2f",
              [&] {
                double l = 0;
                for (const Row& r : rows) l += std::log(r.cusparse.solve8 / r.cusparse.solve);
                return std::exp(l / count);
              }());
  for (std::size_t a = 0; a < timed_algorithms.size() + (time_auto ? 1 : 0); ++a) {
    double l = 0;
    int timed = 0;  // matrices the algorithm ran on (cluster's layout does not fit every one)
    for (const Row& r : rows) {
      const Result& o = a < timed_algorithms.size() ? r.ours[a] : r.automatic;
      if (std::isnan(o.solve)) continue;
      l += std::log(o.solve8 / o.solve);
      ++timed;
    }
    std::printf(", %s %.2f", a < timed_algorithms.size() ? spade::to_string(timed_algorithms[a]) : "auto",
                std::exp(l / std::max(timed, 1)));
  }
  std::printf(".\n");
}

/// --evaluate: per triangle, cuSPARSE, every named algorithm's best, auto's choice and times, and the ratios
/// the issue's targets read; then the set's geometric mean and the triangles that miss a target.
void print_verdict(const std::vector<Row>& rows) {
  std::printf("\n### Verdict: auto against cuSPARSE and the best named algorithm (ms; analyses host wall clock, "
              "median of %d)\n\n| matrix | n | nnz | levels | SpSV | SpSM (8) | SpSV analysis | best named (1) | "
              "best named (8) | auto choice (1/8) | auto (1) | auto (8) | auto analysis | cuSPARSE / auto (1) | "
              "SpSM / auto (8) | auto / best named (1) | auto / best named (8) |\n|---|---|---|---|---|---|---|---|"
              "---|---|---|---|---|---|---|---|---|\n",
              analysis_timings);
  double log_sum = 0, log_sum8 = 0;
  int counted = 0;
  std::vector<std::string> slower, behind, slower_analysis;
  double trial_extra = 0;  // the most auto's choosing solves took beyond as many solves of its choice
  std::string trial_extra_name = "none";
  for (const Row& r : rows) {
    double best = INFINITY, best8 = INFINITY;
    std::string best_name = "-", best8_name = "-";
    for (std::size_t a = 0; a < timed_algorithms.size(); ++a) {
      const Result& o = r.ours[a];
      if (!o.ok || std::isnan(o.solve)) continue;
      if (o.solve < best) best = o.solve, best_name = spade::to_string(timed_algorithms[a]);
      if (o.solve8 < best8) best8 = o.solve8, best8_name = spade::to_string(timed_algorithms[a]);
    }
    const Result& a = r.automatic;
    const double s1 = r.cusparse.solve / a.solve, s8 = r.cusparse.solve8 / a.solve8;
    const double b1 = a.solve / best, b8 = a.solve8 / best8;
    std::printf("| %s | %d | %lld | %d | %s | %s | %s | %s (%s) | %s (%s) | %s/%s%s | %s | %s | %s | %s | %s | %s | %s |\n",
                r.name.c_str(), r.stats.n, (long long)r.nnz, r.stats.levels, fmt(r.cusparse.solve).c_str(),
                fmt(r.cusparse.solve8).c_str(), fmt(r.cusparse.analysis).c_str(), fmt(best).c_str(), best_name.c_str(),
                fmt(best8).c_str(), best8_name.c_str(), spade::to_string(a.choice), spade::to_string(a.choice8),
                a.ok ? "" : " (wrong)", fmt(a.solve).c_str(), fmt(a.solve8).c_str(), fmt(a.analysis).c_str(),
                ratio(s1).c_str(), ratio(s8).c_str(), ratio(b1).c_str(), ratio(b8).c_str());
    if (!a.ok || !std::isfinite(s1)) {
      slower.push_back(r.name + " (auto wrong or not run)");
      continue;
    }
    log_sum += std::log(s1);
    log_sum8 += std::log(s8);
    ++counted;
    if (s1 < 1 || s8 < 1) {
      char buf[96];
      std::snprintf(buf, sizeof buf, " (%.2fx / %.2fx)", s1, s8);
      slower.push_back(r.name + buf);
    }
    if (b1 > 1.15) {
      char buf[96];
      std::snprintf(buf, sizeof buf, " (%s %.2fx behind %s)", spade::to_string(a.choice), b1, best_name.c_str());
      behind.push_back(r.name + buf);
    }
    if (a.analysis > r.cusparse.analysis) slower_analysis.push_back(r.name);
    const double extra = a.choosing - a.choosing_solves * a.solve;
    if (a.choosing_solves > 1 && extra > trial_extra) {
      trial_extra = extra;
      trial_extra_name = r.name + " (" + std::to_string(a.choosing_solves) + " solves)";
    }
  }
  auto list = [](const std::vector<std::string>& v) {
    std::string out;
    for (const std::string& s : v) out += (out.empty() ? "" : ", ") + s;
    return out.empty() ? std::string("none") : out;
  };
  const double count = std::max(counted, 1);
  std::printf("\nSummary over %zu triangles: geometric mean cuSPARSE SpSV / auto %.2fx, SpSM / auto (8 right-hand "
              "sides) %.2fx. auto slower than cuSPARSE (SpSV or SpSM) on %zu: %s. auto more than 15%% behind the "
              "best named algorithm (one right-hand side) on %zu: %s. auto's analysis slower than cuSPARSE's on "
              "%zu: %s. auto's first solves of one right-hand side until it had chosen (host wall clock, each "
              "synchronized) took at most %.3f ms more than as many solves of its choice: %s.\n",
              rows.size(), std::exp(log_sum / count), std::exp(log_sum8 / count), slower.size(), list(slower).c_str(),
              behind.size(), list(behind).c_str(), slower_analysis.size(), list(slower_analysis).c_str(), trial_extra,
              trial_extra_name.c_str());
}

/// The figures as JSON (drivers/bench_json.hpp): spade's auto against cuSPARSE SpSV (1 rhs) and SpSM (8), or,
/// where auto was not timed, the fastest correct algorithm, named in "spade_algorithm"; every algorithm's
/// times follow. Times in seconds (the tables print milliseconds).
nlohmann::ordered_json rows_json(const std::vector<Row>& rows) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const Row& r : rows) {
    std::string algorithm = "auto";
    double one = time_auto && r.automatic.ok ? r.automatic.solve : INFINITY;
    double eight = time_auto && r.automatic.ok ? r.automatic.solve8 : INFINITY;
    nlohmann::ordered_json algorithms = nlohmann::ordered_json::object();
    for (std::size_t a = 0; a < timed_algorithms.size(); ++a) {
      const Result& o = r.ours[a];
      algorithms[spade::to_string(timed_algorithms[a])] = {{"ok", o.ok}, {"solve_seconds", o.solve * 1e-3},
                                                           {"solve8_seconds", o.solve8 * 1e-3},
                                                           {"analysis_seconds", o.analysis * 1e-3}};
      if (!(time_auto && r.automatic.ok) && o.ok && o.solve < one) {
        one = o.solve, eight = o.solve8;
        algorithm = spade::to_string(timed_algorithms[a]);
      }
    }
    if (!std::isfinite(one)) continue;  // nothing of spade's ran correctly: no comparison to plot
    const std::vector<spade::bench::Comparison> comparisons = {
        {"solve, 1 rhs", one * 1e-3, {{"cuSPARSE SpSV", r.cusparse.solve * 1e-3}}},
        {"solve, 8 rhs", eight * 1e-3, {{"cuSPARSE SpSM", r.cusparse.solve8 * 1e-3}}},
    };
    list.push_back({{"matrix", r.name},
                    {"n", r.stats.n},
                    {"nnz_l", r.nnz},
                    {"levels", r.stats.levels},
                    {"spade_algorithm", algorithm},
                    {"auto_choice", time_auto ? spade::to_string(r.automatic.choice) : "not timed"},
                    {"comparisons", spade::bench::to_json(comparisons)},
                    {"floor_seconds", r.floor * 1e-3},
                    {"floor8_seconds", r.floor8 * 1e-3},
                    {"cusparse_analysis_seconds", r.cusparse.analysis * 1e-3},
                    {"auto_analysis_seconds", r.automatic.analysis * 1e-3},
                    {"auto_choice8", time_auto ? spade::to_string(r.automatic.choice8) : "not timed"},
                    {"algorithms", algorithms}});
  }
  return list;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::vector<std::string> filters;
    std::string json_path;
    bool evaluate = false;
    for (int a = 1; a < argc; ++a) {
      const std::string arg = argv[a];
      if (arg == "--evaluate") {
        evaluate = true;
        solve_budget_ms = 25;
        analysis_timings = 3;
        continue;
      }
      if (arg == "--json") {
        if (++a == argc) throw spade::InvalidInput("--json needs a file name");
        json_path = argv[a];
        continue;
      }
      if (arg != "--algorithms") {
        filters.push_back(arg);
        continue;
      }
      if (++a == argc) throw spade::InvalidInput("--algorithms needs a comma-separated list of names");
      timed_algorithms.clear();
      time_auto = false;
      std::string list = argv[a];
      for (std::size_t start = 0; start <= list.size();) {
        const std::size_t comma = std::min(list.find(',', start), list.size());
        const SptrsvAlgorithm algorithm = spade::sptrsv_algorithm_from_string(list.substr(start, comma - start));
        if (algorithm == SptrsvAlgorithm::automatic)
          time_auto = true;
        else
          timed_algorithms.push_back(algorithm);
        start = comma + 1;
      }
    }
    auto wanted = [&](const std::string& name) {
      if (filters.empty()) return true;
      for (const std::string& f : filters)
        if (name.find(f) != std::string::npos) return true;
      return false;
    };
    cudaDeviceProp prop;
    SPADE_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    const double bandwidth = copy_bandwidth();
    std::printf("Device: %s (%d SMs); measured copy bandwidth %.0f GB/s (read + write); one hand-off between "
                "two SMs through device memory %.2f us\n",
                prop.name, prop.multiProcessorCount, bandwidth / 1e9, handoff_latency_us());
    CusparseRun cusparse;
    std::vector<Row> rows;
    auto add_csr = [&](const std::string& name, const HostCsr& L, spade::TriangleKind triangle) {
      std::fprintf(stderr, "%s ...\n", name.c_str());
      rows.push_back(run_matrix(name, L, bandwidth, cusparse.handle, triangle));
      const Row& r = rows.back();
      std::fprintf(stderr, "  n %d, nnz %lld, levels %d, rows/level %.0f, nnz/row %.2f, floor %.4f/%.4f ms; cuSPARSE %.4f ms "
                   "(analysis %.3f, call alone %.3f), SpSM %.4f ms; spade:", r.stats.n, (long long)r.nnz, r.stats.levels,
                   r.stats.rows_per_level, r.stats.nnz_per_row + 1, r.floor, r.floor8, r.cusparse.solve,
                   r.cusparse.analysis, r.cusparse_call, r.cusparse.solve8);
      for (std::size_t a = 0; a < timed_algorithms.size(); ++a)
        std::fprintf(stderr, " %s %.4f/%.4f (analysis %.3f)%s", spade::to_string(timed_algorithms[a]), r.ours[a].solve,
                     r.ours[a].solve8, r.ours[a].analysis, r.ours[a].ok ? "" : " WRONG");
      const Result& a = r.automatic;
      std::fprintf(stderr,
                   "; auto=%s/%s %.4f/%.4f (analysis %.3f, %d candidates, %d timed solves; its first %d solves "
                   "of one took %.3f, %.3f more than as many of its choice)\n",
                   spade::to_string(a.choice), spade::to_string(a.choice8), a.solve, a.solve8, a.analysis,
                   r.auto_stats.auto_candidates, r.auto_stats.auto_trials, a.choosing_solves, a.choosing,
                   a.choosing - a.choosing_solves * a.solve);
    };
    auto add = [&](const std::string& name, const std::function<spade::SparseMatrix()>& make) {
      if (!wanted(name)) return;
      add_csr(name, lower_with_unit_diagonal(make()), spade::TriangleKind::lower);
    };
    const std::filesystem::path dir = spade::testing::matrix_dir();
    std::vector<std::string> files;
    if (std::filesystem::is_directory(dir))
      for (const auto& e : std::filesystem::directory_iterator(dir))
        if (e.path().string().find(".mtx") != std::string::npos) files.push_back(e.path().string());
    std::sort(files.begin(), files.end());
    spade::MatrixMarketOptions mm;
    mm.pattern_values = spade::PatternValues::ones;
    std::vector<std::pair<std::string, std::string>> spd;  // (name, file): their factors come after the grids
    for (const std::string& file : files) {
      const std::string name = std::filesystem::path(file).filename().string();
      const std::string stem = name.substr(0, name.find(".mtx"));
      if (!wanted(stem + "_L") && !wanted(stem + "_Lt")) continue;  // a filter that names the stem names both
      const spade::SparseMatrix a = spade::read_matrix_market(file, mm);
      if (!a.is_square() || a.nnz() <= (evaluate ? 10000 : 50000)) continue;
      add(stem, [&] { return a; });
      if (evaluate && a.is_symmetric()) spd.emplace_back(stem, file);
    }
    using spade::Stencil;
    const std::vector<std::pair<index_t, index_t>> grids2 = {{1024, 1024}, {512, 2048}, {256, 4096}, {128, 8192}, {64, 16384}};
    const std::vector<std::array<index_t, 3>> grids3 = {
        {128, 128, 128}, {64, 128, 256}, {64, 64, 512}, {32, 64, 1024}, {32, 32, 2048}};
    add("lap3d7_100x100x100", [] { return spade::laplacian_3d(100, 100, 100, Stencil::seven_point); });
    for (Stencil s : {Stencil::seven_point, Stencil::twenty_seven_point})
      for (auto g : grids3)
        add("lap3d" + std::string(s == Stencil::seven_point ? "7" : "27") + "_" + std::to_string(g[0]) + "x" +
                std::to_string(g[1]) + "x" + std::to_string(g[2]),
            [=] { return spade::laplacian_3d(g[0], g[1], g[2], s); });
    for (Stencil s : {Stencil::five_point, Stencil::nine_point})
      for (const auto& g : grids2)
        add("lap2d" + std::string(s == Stencil::five_point ? "5" : "9") + "_" + std::to_string(g.first) + "x" +
                std::to_string(g.second),
            [=] { return spade::laplacian_2d(g.first, g.second, s); });
    // spade's Cholesky factors of the SPD ones (a pattern file read with ones is not): forward with L,
    // backward with L^T.
    for (const auto& [stem, file] : spd) {
      if (!wanted(stem + "_L") && !wanted(stem + "_Lt")) continue;
      std::pair<HostCsr, HostCsr> factor;
      try {
        factor = factor_triangles(spade::read_matrix_market(file));
      } catch (const spade::NumericalError&) {
        continue;  // not positive definite
      } catch (const spade::InvalidInput&) {
        continue;  // no values (a pattern file) or not symmetric in value
      }
      if (wanted(stem + "_L")) add_csr(stem + "_L", factor.first, spade::TriangleKind::lower);
      if (wanted(stem + "_Lt")) add_csr(stem + "_Lt", factor.second, spade::TriangleKind::upper);
    }
    print_tables(rows);
    if (evaluate) print_verdict(rows);
    if (!json_path.empty())
      spade::bench::write_json_file(
          json_path,
          {{"benchmark", "bench_sptrsv"},
           {"floor", "L (values, indices, row pointers), b and x moved once at the copy bandwidth"},
           {"machine", {{"device", prop.name}, {"copy_bandwidth_bytes_per_second", bandwidth}}},
           {"rows", rows_json(rows)}});
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_sptrsv: %s\n", e.what());
    return 1;
  }
  return 0;
}
