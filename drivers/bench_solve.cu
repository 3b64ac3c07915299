// bench_solve: spade's GPU solve phase against its baselines, in one process on the same factor.
//
// For each matrix: analyze and factorize through the Solver facade (the GPU plan built beside the host
// factorization), then time on the same factor L:
//   - spade's GPU solve, forward + backward sweeps (CUDA events around the two kernels of each pass, as the
//     facade reports them; right-hand sides already on the device), nrhs = 1 and 16;
//   - spade's host supernodal solve (solve_in_place, wall clock, --threads BLAS threads), nrhs = 1;
//   - cuSPARSE SpSV (nrhs = 1) and SpSM (nrhs = 16) on spade's L exported to CSR (32-bit indices): L y = b
//     then L^T x = y, both analyses done beforehand (their time is reported apart), CUDA events;
//   - the floor: L's values and row indices (12 bytes per entry, CSR-equivalent) read twice, over the
//     copy bandwidth measured here (a device-to-device copy, bytes read plus written);
//   - the plan's build time, the time the caller waits after the host factorization returns (first
//     factorization and refactorization), and a refined solution with two correction steps, timed three
//     ways in one loop: the corrections' precision chosen by the rule, forced to FP32, forced to FP64,
//     against a plain solve timed in the same loop (wall clock, medians of 10);
//   - where the Solver builds a partitioned inverse (SolverOptions::partitioned_inverse, on unless
//     --no-partitioned-inverse), when it was ready after each factorization; the solves are timed once it
//     is (the steady state of many solves per factorization).
// Medians of repeated runs after warm-up. Prints one markdown table, the device and the command line;
// --json writes the same figures for scripts/plot_benchmarks.py (drivers/bench_json.hpp). --band-sweep
// prints instead, per matrix, the partitioned inverse's solve at every band against the band rule's estimate;
// --visible-reps N the wait after the factorization over N fresh Solvers per matrix (its spread).
#include <CLI/CLI.hpp>
#include <cuda_runtime.h>
#include <cusparse.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "../core/blas.hpp"
#include "../kernels/cuda_check.hpp"
#include "../kernels/residual_kernels.hpp"
#include "bench_cuda.hpp"
#include "bench_json.hpp"
#include "../solve/gpu_solve.hpp"
#include "../solve/supernodal_schedule.hpp"
#include "spade/error.hpp"
#include "spade/generators.hpp"
#include "spade/matrix_market.hpp"
#include "spade/solve.hpp"
#include "spade/solver.hpp"
#include "../tests/test_matrices.hpp"

namespace {

using spade::index_t;
using spade::offset_t;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? NAN : v[v.size() / 2];
}

using spade::bench::Csr;
using spade::bench::DeviceVector;
using spade::bench::copy_bandwidth;
using spade::bench::event_median;

/// spade's L (the host factor, not inverted) in CSR.
Csr factor_to_csr(const spade::NumericFactor& F) {
  const spade::SymbolicFactor& S = F.symbolic();
  Csr L;
  L.n = S.n;
  if (S.nnz_l > std::numeric_limits<int>::max()) throw spade::ResourceError("nnz(L) does not fit cuSPARSE's 32-bit CSR");
  L.ptr.assign(static_cast<std::size_t>(S.n) + 1, 0);
  for (index_t s = 0; s < S.num_supernodes; ++s) {
    const index_t k = S.supernode_cols(s), m = S.supernode_rows(s);
    const index_t* rows = S.row_indices.data() + S.row_ptr[s];
    for (index_t c = 0; c < k; ++c)
      for (index_t r = c; r < m; ++r) ++L.ptr[rows[r] + 1];
  }
  for (index_t i = 0; i < S.n; ++i) L.ptr[i + 1] += L.ptr[i];
  L.col.resize(L.ptr[S.n]);
  L.val.resize(L.ptr[S.n]);
  std::vector<int> next(L.ptr.begin(), L.ptr.end() - 1);
  for (index_t s = 0; s < S.num_supernodes; ++s) {  // columns ascending: rows come out sorted
    const index_t f = S.supernode_begin[s], k = S.supernode_cols(s), m = S.supernode_rows(s);
    const index_t* rows = S.row_indices.data() + S.row_ptr[s];
    const double* panel = F.panel(s);
    for (index_t c = 0; c < k; ++c)
      for (index_t r = c; r < m; ++r) {
        L.col[next[rows[r]]] = f + c;
        L.val[next[rows[r]]++] = panel[r + static_cast<offset_t>(c) * m];
      }
  }
  return L;
}

struct CusparseTimes {
  double analysis = NAN, spsv = NAN, spsm = NAN;
  double error = 0;  // max relative difference of its nrhs = 1 solution from spade's
};

/// cuSPARSE SpSV (L then L^T, one right-hand side) and SpSM (16) on L; b and x are device vectors.
CusparseTimes run_cusparse(const Csr& L, const std::vector<double>& b, const std::vector<double>& x_spade, int nrhs16,
                           int reps) {
  CusparseTimes t;
  cusparseHandle_t handle;
  CUSPARSE_CHECK(cusparseCreate(&handle));
  const index_t n = L.n;
  DeviceVector<int> ptr(L.ptr), col(L.col);
  DeviceVector<double> val(L.val), db(b), dy(static_cast<std::size_t>(n)), dx(static_cast<std::size_t>(n));
  cusparseSpMatDescr_t A = spade::bench::csr_descriptor(L, ptr, col, val, CUSPARSE_FILL_MODE_LOWER, CUSPARSE_DIAG_TYPE_NON_UNIT);
  const double one = 1.0;
  cusparseDnVecDescr_t vb, vy, vx;
  CUSPARSE_CHECK(cusparseCreateDnVec(&vb, n, db.p, CUDA_R_64F));
  CUSPARSE_CHECK(cusparseCreateDnVec(&vy, n, dy.p, CUDA_R_64F));
  CUSPARSE_CHECK(cusparseCreateDnVec(&vx, n, dx.p, CUDA_R_64F));
  cusparseSpSVDescr_t fwd, bwd;
  CUSPARSE_CHECK(cusparseSpSV_createDescr(&fwd));
  CUSPARSE_CHECK(cusparseSpSV_createDescr(&bwd));
  std::size_t bytes_f = 0, bytes_b = 0;
  CUSPARSE_CHECK(cusparseSpSV_bufferSize(handle, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, A, vb, vy, CUDA_R_64F,
                                         CUSPARSE_SPSV_ALG_DEFAULT, fwd, &bytes_f));
  CUSPARSE_CHECK(cusparseSpSV_bufferSize(handle, CUSPARSE_OPERATION_TRANSPOSE, &one, A, vy, vx, CUDA_R_64F,
                                         CUSPARSE_SPSV_ALG_DEFAULT, bwd, &bytes_b));
  DeviceVector<char> buf_f(bytes_f), buf_b(bytes_b);
  t.analysis = spade::bench::seconds([&] {
    CUSPARSE_CHECK(cusparseSpSV_analysis(handle, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, A, vb, vy, CUDA_R_64F,
                                         CUSPARSE_SPSV_ALG_DEFAULT, fwd, buf_f.p));
    CUSPARSE_CHECK(cusparseSpSV_analysis(handle, CUSPARSE_OPERATION_TRANSPOSE, &one, A, vy, vx, CUDA_R_64F,
                                         CUSPARSE_SPSV_ALG_DEFAULT, bwd, buf_b.p));
    SPADE_CUDA_CHECK(cudaDeviceSynchronize());
  });
  t.spsv = event_median(
      [&] {
        CUSPARSE_CHECK(cusparseSpSV_solve(handle, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, A, vb, vy, CUDA_R_64F,
                                          CUSPARSE_SPSV_ALG_DEFAULT, fwd));
        CUSPARSE_CHECK(cusparseSpSV_solve(handle, CUSPARSE_OPERATION_TRANSPOSE, &one, A, vy, vx, CUDA_R_64F,
                                          CUSPARSE_SPSV_ALG_DEFAULT, bwd));
      },
      1, reps);
  // cuSPARSE solves the permuted system: compare with spade's solution in the same numbering.
  std::vector<double> x(n);
  SPADE_CUDA_CHECK(cudaMemcpy(x.data(), dx.p, n * sizeof(double), cudaMemcpyDeviceToHost));
  double diff = 0, norm = 0;
  for (index_t i = 0; i < n; ++i) {
    diff = std::max(diff, std::abs(x[i] - x_spade[i]));
    norm = std::max(norm, std::abs(x_spade[i]));
  }
  t.error = diff / norm;
  cusparseSpSV_destroyDescr(fwd);
  cusparseSpSV_destroyDescr(bwd);
  cusparseDestroyDnVec(vb);
  cusparseDestroyDnVec(vy);
  cusparseDestroyDnVec(vx);

  // SpSM with 16 right-hand sides.
  DeviceVector<double> mb(static_cast<std::size_t>(n) * nrhs16), my(mb.count), mx(mb.count);
  for (int j = 0; j < nrhs16; ++j)
    SPADE_CUDA_CHECK(cudaMemcpy(mb.p + static_cast<std::size_t>(j) * n, db.p, n * sizeof(double), cudaMemcpyDeviceToDevice));
  cusparseDnMatDescr_t B, Y, X;
  CUSPARSE_CHECK(cusparseCreateDnMat(&B, n, nrhs16, n, mb.p, CUDA_R_64F, CUSPARSE_ORDER_COL));
  CUSPARSE_CHECK(cusparseCreateDnMat(&Y, n, nrhs16, n, my.p, CUDA_R_64F, CUSPARSE_ORDER_COL));
  CUSPARSE_CHECK(cusparseCreateDnMat(&X, n, nrhs16, n, mx.p, CUDA_R_64F, CUSPARSE_ORDER_COL));
  cusparseSpSMDescr_t sf, sb;
  CUSPARSE_CHECK(cusparseSpSM_createDescr(&sf));
  CUSPARSE_CHECK(cusparseSpSM_createDescr(&sb));
  const cusparseOperation_t N = CUSPARSE_OPERATION_NON_TRANSPOSE, T = CUSPARSE_OPERATION_TRANSPOSE;
  CUSPARSE_CHECK(cusparseSpSM_bufferSize(handle, N, N, &one, A, B, Y, CUDA_R_64F, CUSPARSE_SPSM_ALG_DEFAULT, sf, &bytes_f));
  CUSPARSE_CHECK(cusparseSpSM_bufferSize(handle, T, N, &one, A, Y, X, CUDA_R_64F, CUSPARSE_SPSM_ALG_DEFAULT, sb, &bytes_b));
  DeviceVector<char> sbuf_f(bytes_f), sbuf_b(bytes_b);
  CUSPARSE_CHECK(cusparseSpSM_analysis(handle, N, N, &one, A, B, Y, CUDA_R_64F, CUSPARSE_SPSM_ALG_DEFAULT, sf, sbuf_f.p));
  CUSPARSE_CHECK(cusparseSpSM_analysis(handle, T, N, &one, A, Y, X, CUDA_R_64F, CUSPARSE_SPSM_ALG_DEFAULT, sb, sbuf_b.p));
  t.spsm = event_median(
      [&] {
        CUSPARSE_CHECK(cusparseSpSM_solve(handle, N, N, &one, A, B, Y, CUDA_R_64F, CUSPARSE_SPSM_ALG_DEFAULT, sf));
        CUSPARSE_CHECK(cusparseSpSM_solve(handle, T, N, &one, A, Y, X, CUDA_R_64F, CUSPARSE_SPSM_ALG_DEFAULT, sb));
      },
      1, std::max(1, reps / 2));
  cusparseSpSM_destroyDescr(sf);
  cusparseSpSM_destroyDescr(sb);
  cusparseDestroyDnMat(B);
  cusparseDestroyDnMat(Y);
  cusparseDestroyDnMat(X);
  cusparseDestroySpMat(A);
  cusparseDestroy(handle);
  return t;
}

/// Where a sweep's time goes, from a traced solve: its span, and its critical chain (forward: from the
/// supernode that finished last down through the children that released it last; backward: from the task
/// that finished last up through the parents it waited for, to a supernode that waits for none: a root,
/// or one whose tiles all lie in its diagonal block, which read no x of an ancestor) split into hand-offs
/// (a supernode's first waiting tile past its wait, minus the moment the last task it waited for counted
/// itself done) and work (from there, or where it waits for nothing from its first tile's start, to its
/// last tile's end), microseconds.
struct SweepTrace {
  double span = 0;
  int chain = 0;           // supernodes on the critical chain
  double handoffs = 0;     // summed along the chain
  double work = 0;         // summed along the chain, the group at its end included
  double median_handoff = 0;  // over every tiled supernode with a dependency
};

struct TraceStats {
  SweepTrace forward, backward;
};

TraceStats trace_solve(const spade::NumericFactor& F, const std::vector<double>& b, index_t band) {
  // The solver's structure: the factor's supernodes merged into pieces of `band` tree levels.
  spade::SolveStructure structure = spade::partition_for_solve(F.symbolic_ptr(), band);
  const spade::SymbolicFactor& S = *structure.solve;
  spade::SupernodalSchedule schedule = spade::build_schedule(S);
  spade::GpuSolvePlan plan(std::move(structure), std::move(schedule), 1);
  plan.begin_values();
  plan.upload(F.values().data(), 0, F.symbolic().num_supernodes - 1);
  plan.finish_values(F.generation());
  plan.set_trace(true);
  const index_t n = S.n;
  DeviceVector<double> db(b), dx(static_cast<std::size_t>(n));
  for (int r = 0; r < 3; ++r) plan.solve(db.p, n, dx.p, n, 1, F.generation());
  const std::vector<unsigned long long> t = plan.trace();
  const std::size_t T = plan.schedule().tasks.size();
  const index_t ns = S.num_supernodes;
  TraceStats out;
  for (int sweep = 0; sweep < 2; ++sweep) {
    const std::vector<spade::SolveTask>& tasks = sweep == 0 ? plan.schedule().tasks : plan.schedule().backward;
    const unsigned long long* tr = t.data() + (sweep == 0 ? 0 : 3 * T);
    // Per supernode: when its first tile passed its wait (met: of the tiles that wait; started: of any,
    // a backward diagonal-block tile passing none), when its last tile finished; per task: the supernode
    // its completion releases (forward: the parent; backward: its own).
    std::vector<unsigned long long> met(ns, ~0ull), started(ns, ~0ull), finish(ns, 0);
    unsigned long long lo = ~0ull, hi = 0;
    for (std::size_t k = 0; k < T; ++k) {
      lo = std::min(lo, tr[3 * k]);
      hi = std::max(hi, tr[3 * k + 2]);
      const spade::SolveTask& task = tasks[k];
      if (task.row0 < 0) continue;
      finish[task.first] = std::max(finish[task.first], tr[3 * k + 2]);
      started[task.first] = std::min(started[task.first], tr[3 * k + 1]);
      if (sweep == 1 && !spade::backward_tile_waits(S, task)) continue;  // passed no wait
      met[task.first] = std::min(met[task.first], tr[3 * k + 1]);
    }
    // Forward: s waits for the tasks of its children; backward: for its parent's tiles.
    std::vector<unsigned long long> release(ns, 0);
    std::vector<std::size_t> last_task(ns, T);
    for (std::size_t k = 0; k < T; ++k) {
      const spade::SolveTask& task = tasks[k];
      const index_t waiter = sweep == 0 ? S.super_parent[task.last] : -1;
      if (waiter >= 0 && tr[3 * k + 2] >= release[waiter]) release[waiter] = tr[3 * k + 2], last_task[waiter] = k;
    }
    if (sweep == 1)
      for (index_t s = 0; s < ns; ++s)
        if (S.super_parent[s] >= 0 && finish[S.super_parent[s]] > 0) release[s] = finish[S.super_parent[s]];
    std::vector<double> handoffs;
    for (index_t s = 0; s < ns; ++s)
      if (met[s] != ~0ull && release[s] > 0) handoffs.push_back((static_cast<double>(met[s]) - release[s]) * 1e-3);
    SweepTrace& st = sweep == 0 ? out.forward : out.backward;
    st.span = (hi - lo) * 1e-3;
    st.median_handoff = median(handoffs);
    if (sweep == 0) {
      // From the tiled supernode that finished last down through the children that released it last.
      index_t s = -1;
      for (index_t j = 0; j < ns; ++j)
        if (finish[j] > 0 && (s < 0 || finish[j] > finish[s])) s = j;
      while (s >= 0) {
        ++st.chain;
        st.work += (static_cast<double>(finish[s]) - started[s]) * 1e-3;
        const std::size_t k = last_task[s];
        if (k == T) break;
        st.handoffs += (static_cast<double>(met[s]) - release[s]) * 1e-3;
        if (tasks[k].row0 < 0) {  // a group ends the chain
          st.work += (static_cast<double>(tr[3 * k + 2]) - tr[3 * k]) * 1e-3;
          break;
        }
        s = tasks[k].first;
      }
    } else {
      // From the task that finished last up through the parents.
      std::size_t k = 0;
      for (std::size_t j = 0; j < T; ++j)
        if (tr[3 * j + 2] > tr[3 * k + 2]) k = j;
      index_t s = tasks[k].row0 < 0 ? S.super_parent[tasks[k].last] : tasks[k].first;
      st.work += tasks[k].row0 < 0 ? (static_cast<double>(tr[3 * k + 2]) - tr[3 * k + 1]) * 1e-3 : 0;
      while (s >= 0) {
        ++st.chain;
        const bool waits = met[s] != ~0ull && release[s] > 0;
        st.work += (static_cast<double>(finish[s]) - (waits ? met[s] : started[s])) * 1e-3;
        if (!waits) break;  // nothing of an ancestor read: the chain starts here
        st.handoffs += (static_cast<double>(met[s]) - release[s]) * 1e-3;
        s = S.super_parent[s];
      }
    }
  }
  return out;
}

/// One refinement step's residual and backward error, nrhs = 1 and 16: spade's one pass over A, as the
/// refinement calls it (GpuResidual::evaluate: zeroing the two maxima, the kernel, their copy back and the
/// wait for it; wall clock) and its kernel alone (CUDA events), against cuSPARSE's product r = b - A x alone
/// (SpMV, SpMM; CUDA events), which the backward error needs twice (A x and |A| |x|); floor: A's values and
/// column indices (12 bytes an entry), its row pointers and three vectors (x, b, r) over the copy bandwidth.
struct ResidualTimes {
  double spade[2] = {NAN, NAN}, kernel[2] = {NAN, NAN}, cusparse[2] = {NAN, NAN}, floor[2] = {NAN, NAN};
  int group = 0, longest_row = 0;
};

ResidualTimes time_residual(const spade::SparseMatrix& A, double bandwidth, int reps) {
  ResidualTimes out;
  const index_t n = A.rows();
  const spade::SparseMatrix At = A.transpose();  // its CSC arrays are A's CSR arrays
  Csr csr;
  csr.n = n;
  csr.ptr.assign(At.col_ptr().begin(), At.col_ptr().end());
  csr.col.assign(At.row_ind().begin(), At.row_ind().end());
  csr.val = At.values();
  for (index_t i = 0; i < n; ++i) out.longest_row = std::max(out.longest_row, csr.ptr[i + 1] - csr.ptr[i]);
  out.group = spade::kernels::residual_group(out.longest_row, n, spade::cuda_device_attribute(cudaDevAttrMultiProcessorCount));
  cudaStream_t stream;
  SPADE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cusparseHandle_t handle;
  CUSPARSE_CHECK(cusparseCreate(&handle));
  DeviceVector<int> ptr(csr.ptr), col(csr.col);
  DeviceVector<double> val(csr.val);
  DeviceVector<unsigned long long> maxima(2);
  const int widths[2] = {1, 16};
  for (int w = 0; w < 2; ++w) {
    const index_t nrhs = widths[w];
    std::mt19937_64 rng(2);
    std::uniform_real_distribution<double> u(-1, 1);
    std::vector<double> h(static_cast<std::size_t>(n) * nrhs);
    for (double& v : h) v = u(rng);
    DeviceVector<double> B(h), X(h), R(h.size());
    out.floor[w] = (12.0 * static_cast<double>(A.nnz()) + 4.0 * (n + 1) + 24.0 * static_cast<double>(h.size())) /
                   bandwidth;
    {
      spade::GpuResidual residual(A, stream);
      std::vector<double> t;
      for (int r = 0; r < reps + 2; ++r) {
        const double s = spade::bench::seconds([&] { residual.evaluate(B.p, X.p, R.p, nrhs); });
        if (r >= 2) t.push_back(s);
      }
      out.spade[w] = median(t);
    }
    out.kernel[w] = event_median(
        [&] {
          SPADE_CUDA_CHECK(cudaMemsetAsync(maxima.p, 0, 2 * sizeof(unsigned long long)));
          spade::kernels::launch_residual({n, ptr.p, col.p, val.p}, {B.p, X.p}, R.p, nrhs, out.group, maxima.p, nullptr);
        },
        2, reps);
    cusparseSpMatDescr_t M;
    CUSPARSE_CHECK(cusparseCreateCsr(&M, n, n, A.nnz(), ptr.p, col.p, val.p, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                                     CUSPARSE_INDEX_BASE_ZERO, CUDA_R_64F));
    const double minus_one = -1, one = 1;
    std::size_t bytes = 0;
    if (nrhs == 1) {
      cusparseDnVecDescr_t vx, vr;
      CUSPARSE_CHECK(cusparseCreateDnVec(&vx, n, X.p, CUDA_R_64F));
      CUSPARSE_CHECK(cusparseCreateDnVec(&vr, n, R.p, CUDA_R_64F));
      CUSPARSE_CHECK(cusparseSpMV_bufferSize(handle, CUSPARSE_OPERATION_NON_TRANSPOSE, &minus_one, M, vx, &one, vr,
                                             CUDA_R_64F, CUSPARSE_SPMV_ALG_DEFAULT, &bytes));
      DeviceVector<char> buffer(bytes);
      out.cusparse[w] = event_median(
          [&] {
            CUSPARSE_CHECK(cusparseSpMV(handle, CUSPARSE_OPERATION_NON_TRANSPOSE, &minus_one, M, vx, &one, vr, CUDA_R_64F,
                                        CUSPARSE_SPMV_ALG_DEFAULT, buffer.p));
          },
          2, reps);
      cusparseDestroyDnVec(vx);
      cusparseDestroyDnVec(vr);
    } else {
      cusparseDnMatDescr_t mx, mr;
      CUSPARSE_CHECK(cusparseCreateDnMat(&mx, n, nrhs, n, X.p, CUDA_R_64F, CUSPARSE_ORDER_COL));
      CUSPARSE_CHECK(cusparseCreateDnMat(&mr, n, nrhs, n, R.p, CUDA_R_64F, CUSPARSE_ORDER_COL));
      const cusparseOperation_t N = CUSPARSE_OPERATION_NON_TRANSPOSE;
      CUSPARSE_CHECK(cusparseSpMM_bufferSize(handle, N, N, &minus_one, M, mx, &one, mr, CUDA_R_64F,
                                             CUSPARSE_SPMM_ALG_DEFAULT, &bytes));
      DeviceVector<char> buffer(bytes);
      out.cusparse[w] = event_median(
          [&] {
            CUSPARSE_CHECK(cusparseSpMM(handle, N, N, &minus_one, M, mx, &one, mr, CUDA_R_64F, CUSPARSE_SPMM_ALG_DEFAULT,
                                        buffer.p));
          },
          2, reps);
      cusparseDestroyDnMat(mx);
      cusparseDestroyDnMat(mr);
    }
    cusparseDestroySpMat(M);
  }
  cusparseDestroy(handle);
  SPADE_CUDA_CHECK(cudaStreamDestroy(stream));
  return out;
}

struct Row {
  std::string name;
  index_t n = 0;
  offset_t nnz_l = 0, nnz_a = 0;
  index_t supernodes = 0, groups = 0, tiles = 0, height = 0, critical = 0, band = 1;
  double floor = 0, gpu1 = 0, gpu1_fwd = 0, gpu1_bwd = 0, gpu16 = 0, host1 = 0;
  CusparseTimes cusparse;
  double refined = 0, refined_berr = 0;
  double refined_call = 0;  // a plain solve's wall clock, timed in the refinement's loop
  double call_host = 0, refined_host = 0;  // host arrays in and out (copies included)
  int refined_steps = 0;
  // The same refinement with the corrections' precision forced (RefineOptions::corrections): every one in
  // FP32 (FP64 after one stalls), every one in FP64.
  double refined_fp32 = 0, refined_fp64 = 0;
  int refined_fp32_steps = 0, refined_fp64_steps = 0;
  double factor = 0, plan = 0, visible = 0, refactor = 0, revisible = 0;
  // The partitioned inverse: seconds after the factorization (first, refactorization) until it held the
  // values (NaN: none), and whether the timed solves ran on it.
  double ready = NAN, reready = NAN;
  std::vector<spade::PartitionTrial> trials;  // the bands the Solver timed (the fastest kept)
  bool solved_partitioned = false;
  double error = 0;  // GPU against host solve, nrhs = 1
  TraceStats trace;
  ResidualTimes residual;
};

/// "first (refactor)" milliseconds until the partitioned inverse was ready, "-" without one; a star where
/// the timed solves did not run on it.
std::string ready_cell(const Row& r) {
  if (std::isnan(r.ready) && std::isnan(r.reready)) return "-";
  char cell[64];
  std::snprintf(cell, sizeof cell, "%.2f (%.2f)%s", r.ready * 1e3, r.reready * 1e3, r.solved_partitioned ? "" : " *");
  return cell;
}

/// A matrix of ../shared/matrices by name, or a generated Laplacian: lap2d_N (5-point, N x N), lap3d_N
/// (7-point, N^3), lap3d27_N (27-point, N^3).
spade::SparseMatrix load(const std::string& name) {
  int m = 0;
  char tail = 0;  // as bench_lu_problems.hpp reads its generated names: a trailing character rejects the name
  if (std::sscanf(name.c_str(), "lap2d_%d%c", &m, &tail) == 1 && m > 0) return spade::laplacian_2d(m, m);
  if (std::sscanf(name.c_str(), "lap3d_%d%c", &m, &tail) == 1 && m > 0) return spade::laplacian_3d(m, m, m);
  if (std::sscanf(name.c_str(), "lap3d27_%d%c", &m, &tail) == 1 && m > 0)
    return spade::laplacian_3d(m, m, m, spade::Stencil::twenty_seven_point);
  return spade::read_matrix_market(spade::testing::matrix_path(name + ".mtx.gz"));
}

/// The options of every Solver here: the GPU solve, `threads` host threads, the partitioned inverse or not.
spade::SolverOptions gpu_options(int threads, bool partitioned) {
  spade::SolverOptions options;
  options.placement = spade::Placement::gpu;
  options.threads = threads;
  options.partitioned_inverse = partitioned;
  return options;
}

/// The host factorization's time in the last factorize() (the report's "numeric" phase).
double numeric_seconds(const spade::Report& report) {
  for (const spade::PhaseTime& p : report.phases)
    if (p.name == "numeric") return p.seconds;
  return NAN;
}

Row run_matrix(const std::string& name, double bandwidth, int threads, int reps, bool baselines, bool partitioned) {
  Row row;
  row.name = name;
  const spade::SparseMatrix A = load(name);
  const index_t n = A.rows();
  row.n = n;
  row.nnz_a = A.nnz();
  spade::Solver solver(gpu_options(threads, partitioned));
  solver.analyze(A);
  solver.factorize(A);
  const spade::Report& report = solver.report();
  row.factor = numeric_seconds(report);
  row.plan = report.plan->plan_seconds;
  row.visible = report.plan->visible_seconds;
  if (solver.wait_for_partitioned_inverse()) row.ready = report.plan->partitioned_seconds;
  solver.factorize(A);  // a refactorization: the plan is reused, only values stream
  row.refactor = numeric_seconds(report);
  row.revisible = report.plan->visible_seconds;
  // The solves below are timed on the partitioned inverse where there is one (the steady state).
  if (solver.wait_for_partitioned_inverse()) row.reready = report.plan->partitioned_seconds;
  const spade::SymbolicFactor& S = solver.symbolic();
  row.nnz_l = S.nnz_l;
  row.supernodes = S.num_supernodes;
  row.groups = report.plan->groups;
  row.tiles = report.plan->tiles;
  row.height = report.plan->tree_height;
  row.critical = report.plan->critical_columns;
  row.band = report.plan->partition_band;
  row.trials = report.plan->partition_trials;
  row.floor = 2.0 * static_cast<double>(S.nnz_l) * (sizeof(double) + sizeof(int)) / bandwidth;

  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> b(n);
  for (double& v : b) v = u(rng);

  // spade GPU, right-hand sides on the device (the solve overwrites them: restore before each run).
  auto gpu_times = [&](index_t nrhs, int runs, double& sweeps, double& fwd, double& bwd) {
    std::vector<double> B(static_cast<std::size_t>(n) * nrhs);
    for (index_t j = 0; j < nrhs; ++j) std::copy(b.begin(), b.end(), B.begin() + static_cast<std::size_t>(j) * n);
    DeviceVector<double> pristine(B), work(B.size());
    std::vector<double> t, f, w;
    for (int r = 0; r < runs + 2; ++r) {
      SPADE_CUDA_CHECK(cudaMemcpy(work.p, pristine.p, B.size() * sizeof(double), cudaMemcpyDeviceToDevice));
      solver.solve(work.p, nrhs, n, spade::Memory::device);
      if (r < 2) continue;
      row.solved_partitioned = report.last_solve->partitioned;
      f.push_back(report.last_solve->forward_seconds);
      w.push_back(report.last_solve->backward_seconds);
      t.push_back(report.last_solve->forward_seconds + report.last_solve->backward_seconds);
    }
    sweeps = median(t), fwd = median(f), bwd = median(w);
    std::vector<double> x(n);
    SPADE_CUDA_CHECK(cudaMemcpy(x.data(), work.p, n * sizeof(double), cudaMemcpyDeviceToHost));
    return x;
  };
  double unused = 0;
  const std::vector<double> x_gpu = gpu_times(1, reps, row.gpu1, row.gpu1_fwd, row.gpu1_bwd);
  gpu_times(16, std::max(3, reps / 2), row.gpu16, unused, unused);

  // Host solve.
  std::vector<double> x_host = b;
  {
    std::vector<double> t;
    for (int r = 0; r < 4; ++r) {
      std::vector<double> x = b;
      const double s = spade::bench::seconds([&] { spade::solve_in_place(solver.factor(), x.data(), 1, n); });
      if (r >= 1) t.push_back(s);
      x_host = x;
    }
    row.host1 = median(t);
  }
  double diff = 0, norm = 0;
  for (index_t i = 0; i < n; ++i) {
    diff = std::max(diff, std::abs(x_gpu[i] - x_host[i]));
    norm = std::max(norm, std::abs(x_host[i]));
  }
  row.error = diff / norm;

  // The same with host arrays, as a caller with host data sees it: one plain solve, one refined.
  {
    std::vector<double> t, u;
    spade::RefineOptions r2;
    r2.max_steps = 2;
    r2.tolerance = 1e-300;
    std::vector<double> x(n);
    for (int r = 0; r < 6; ++r) {
      std::vector<double> y = b;
      const double s = spade::bench::seconds([&] { solver.solve(y.data(), 1, n); });
      const double s2 = spade::bench::seconds([&] { solver.solve_refined(b.data(), n, x.data(), n, 1, r2); });
      if (r >= 1) t.push_back(s), u.push_back(s2);
    }
    row.call_host = median(t);
    row.refined_host = median(u);
  }

  // Refined solution, two correction steps, everything on the device; a plain solve alternates with the
  // three refinements, so that the ratio's two terms are timed in the same stretch of the run.
  {
    DeviceVector<double> db(b), dx(static_cast<std::size_t>(n)), work(b);
    std::vector<double> t[3], plain;
    spade::RefineOptions r2[3];
    for (spade::RefineOptions& o : r2) {
      o.max_steps = 2;
      o.tolerance = 1e-300;  // never "converged": two corrections unless one stagnates
    }
    r2[1].corrections = spade::CorrectionPrecision::fp32;
    r2[2].corrections = spade::CorrectionPrecision::fp64;
    int* steps[3] = {&row.refined_steps, &row.refined_fp32_steps, &row.refined_fp64_steps};
    for (int r = 0; r < 12; ++r) {
      SPADE_CUDA_CHECK(cudaMemcpy(work.p, db.p, static_cast<std::size_t>(n) * sizeof(double), cudaMemcpyDeviceToDevice));
      const double call = spade::bench::seconds([&] { solver.solve(work.p, 1, n, spade::Memory::device); });
      if (r >= 2) plain.push_back(call);
      for (int k = 0; k < 3; ++k) {  // the three kinds alternate
        spade::RefinementResult result;
        const double s =
            spade::bench::seconds([&] { result = solver.solve_refined(db.p, n, dx.p, n, 1, r2[k], spade::Memory::device); });
        if (r >= 2) t[k].push_back(s);
        *steps[k] = static_cast<int>(result.steps.size()) - 1;
        if (k == 0) row.refined_berr = result.solution.berr;
      }
    }
    row.refined = median(t[0]);
    row.refined_fp32 = median(t[1]);
    row.refined_fp64 = median(t[2]);
    row.refined_call = median(plain);
  }

  row.trace = trace_solve(solver.factor(), b, row.band);

  if (baselines) {
    // cuSPARSE in the permuted numbering: b permuted, compared with spade's permuted solution.
    const Csr L = factor_to_csr(solver.factor());
    std::vector<double> pb(n), px(n);
    for (index_t k = 0; k < n; ++k) pb[k] = b[S.perm[k]], px[k] = x_host[S.perm[k]];
    row.cusparse = run_cusparse(L, pb, px, 16, std::max(3, reps / 4));
    row.residual = time_residual(A, bandwidth, reps);
  }
  return row;
}

/// The p-th quantile (0..1) of v, by the nearest rank.
double quantile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5)];
}

/// --visible-reps N: the wait after the factorization, which moves by milliseconds from run to run on small
/// factors (host scheduling), over N fresh Solvers of one matrix (analyze, factorize, refactorize each):
/// median, 10th and 90th percentiles and the largest, of the first factorization's and the
/// refactorization's, beside the median factorization time. Prints one table row.
void visible_reps(const std::string& name, int threads, int reps, bool partitioned) {
  const spade::SparseMatrix A = load(name);
  std::vector<double> factor, visible, refactor, revisible;
  for (int r = 0; r < reps; ++r) {
    spade::Solver solver(gpu_options(threads, partitioned));
    solver.analyze(A);
    solver.factorize(A);
    factor.push_back(numeric_seconds(solver.report()));
    visible.push_back(solver.report().plan->visible_seconds);
    solver.wait_for_partitioned_inverse();
    solver.factorize(A);
    refactor.push_back(numeric_seconds(solver.report()));
    revisible.push_back(solver.report().plan->visible_seconds);
    solver.wait_for_partitioned_inverse();
  }
  const auto cell = [](const std::vector<double>& v) {
    char text[96];
    std::snprintf(text, sizeof text, "%.2f (%.2f-%.2f, %.2f)", median(v) * 1e3, quantile(v, 0.1) * 1e3,
                  quantile(v, 0.9) * 1e3, *std::max_element(v.begin(), v.end()) * 1e3);
    return std::string(text);
  };
  std::printf("| %s | %d | %.2f | %s | %.1f%% | %.2f | %s | %.1f%% |\n", name.c_str(), reps, median(factor) * 1e3,
              cell(visible).c_str(), 100 * median(visible) / median(factor), median(refactor) * 1e3,
              cell(revisible).c_str(), 100 * median(revisible) / median(refactor));
  std::fflush(stdout);
}

/// The bands a Solver timed for its partitioned inverse, " band: us" each, in the order timed.
void print_trials(const std::vector<spade::PartitionTrial>& trials) {
  for (const spade::PartitionTrial& t : trials) std::printf(" %d: %.1f", t.band, t.seconds * 1e6);
}

/// --band-sweep: the partitioned inverse's plan at every band of one matrix's factor, measured against the
/// band rule's estimate (partition_estimate, one sweep; doubled here for the two), one right-hand side on
/// the device, median of 20 after 3 warm-up solves (CUDA events). Prints one table row per band, up to the
/// assembly tree's depth ("(model)" marks the estimate's choice), then the bands a Solver timed on the same
/// matrix and the one it kept.
void band_sweep(const std::string& name, int threads) {
  const spade::SparseMatrix A = load(name);
  spade::AnalyzeOptions ao;
  const auto S = spade::analyze(A, ao);
  spade::FactorOptions fo;
  fo.threads = threads;
  const spade::NumericFactor F(S, A, fo);
  const spade::SupernodalSchedule base = spade::build_schedule(*S);
  const double bandwidth = spade::gpu_bandwidth_estimate();  // as the Solver
  const index_t chosen = spade::choose_partition_band(*S, base, spade::kSolveHandoffSeconds, bandwidth);
  const index_t n = S->n;
  const std::vector<double> b(n, 1.0);
  DeviceVector<double> db(b);
  // Up to the tree's depth in supernodes: beyond it every band merges the same pieces.
  std::vector<index_t> depth(static_cast<std::size_t>(S->num_supernodes), 1);
  index_t deepest = 1;
  for (index_t s = S->num_supernodes - 1; s >= 0; --s) {  // parents follow their children
    const index_t p = S->super_parent[s];
    if (p >= 0) depth[s] = depth[p] + 1;
    deepest = std::max(deepest, depth[s]);
  }
  for (index_t band = 1; band <= deepest; ++band) {
    spade::SolveStructure structure = spade::partition_for_solve(S, band);
    const std::shared_ptr<const spade::SymbolicFactor> T = structure.solve;
    const double bytes = static_cast<double>(T->panel_offset.back()) * sizeof(double) +
                         static_cast<double>(T->row_ptr.back()) * sizeof(int);
    const double estimate = 2 * spade::partition_estimate(*S, base, band, spade::kSolveHandoffSeconds, bandwidth);
    spade::SupernodalSchedule schedule = spade::build_schedule(*T);
    const std::size_t tasks = schedule.tasks.size();
    spade::GpuSolvePlan plan(std::move(structure), std::move(schedule), 1);
    plan.begin_values();
    plan.upload(F.values().data(), 0, S->num_supernodes - 1);
    plan.finish_values(F.generation());
    std::vector<double> t;
    for (int r = 0; r < 23; ++r) {
      SPADE_CUDA_CHECK(cudaMemcpy(db.p, b.data(), n * sizeof(double), cudaMemcpyHostToDevice));
      plan.solve(db.p, n, db.p, n, 1, F.generation());
      if (r >= 3) t.push_back(plan.last_forward_seconds() + plan.last_backward_seconds());
    }
    std::printf("| %s | %d%s | %d | %zu | %.1f | %.1f | %.1f |\n", name.c_str(), band, band == chosen ? " (model)" : "",
                T->num_supernodes, tasks, bytes * 1e-6, estimate * 1e6, median(t) * 1e6);
    std::fflush(stdout);
  }
  // The Solver's own measured choice on the same matrix, for comparison with the sweep above.
  spade::Solver solver(gpu_options(threads, true));
  solver.analyze(A);
  solver.factorize(A);
  if (solver.wait_for_partitioned_inverse()) {
    std::printf("| %s | the Solver's timed bands:", name.c_str());
    print_trials(solver.report().plan->partition_trials);
    std::printf("; kept %d | | | | | |\n", solver.report().plan->partition_band);
  }
}

/// A row of the table as JSON (drivers/bench_json.hpp): the speedup comparisons, the floor of one solve, and
/// the table's other figures in seconds.
nlohmann::ordered_json row_json(const Row& r) {
  spade::bench::Comparison one{"solve, 1 rhs", r.gpu1, {}};
  if (!std::isnan(r.cusparse.spsv)) one.baselines.push_back({"cuSPARSE SpSV", r.cusparse.spsv});
  one.baselines.push_back({"host solve", r.host1});
  spade::bench::Comparison sixteen{"solve, 16 rhs", r.gpu16, {}};
  if (!std::isnan(r.cusparse.spsm)) sixteen.baselines.push_back({"cuSPARSE SpSM", r.cusparse.spsm});
  auto sweep = [](const SweepTrace& t) {
    return nlohmann::ordered_json{{"span_us", t.span}, {"chain_supernodes", t.chain}, {"chain_handoffs_us", t.handoffs},
                                  {"chain_work_us", t.work}, {"median_handoff_us", t.median_handoff}};
  };
  return {{"matrix", r.name},
          {"n", r.n},
          {"nnz_l", r.nnz_l},
          {"supernodes", r.supernodes},
          {"groups", r.groups},
          {"tiles", r.tiles},
          {"tree_height", r.height},
          {"partition_band", r.band},
          {"comparisons", spade::bench::to_json({one, sixteen})},
          {"floor_seconds", r.floor},
          {"forward_seconds", r.gpu1_fwd},
          {"backward_seconds", r.gpu1_bwd},
          {"refined_seconds", r.refined},
          {"refined_call_seconds", r.refined_call},
          {"refined_steps", r.refined_steps},
          {"refined_fp32_seconds", r.refined_fp32},
          {"refined_fp32_steps", r.refined_fp32_steps},
          {"refined_fp64_seconds", r.refined_fp64},
          {"refined_fp64_steps", r.refined_fp64_steps},
          {"host_arrays_call_seconds", r.call_host},
          {"host_arrays_refined_seconds", r.refined_host},
          {"factor_seconds", r.factor},
          {"plan_seconds", r.plan},
          {"visible_seconds", r.visible},
          {"refactor_visible_seconds", r.revisible},
          {"partitioned_ready_seconds", std::isnan(r.ready) ? nlohmann::ordered_json() : nlohmann::ordered_json(r.ready)},
          {"refactor_partitioned_ready_seconds",
           std::isnan(r.reready) ? nlohmann::ordered_json() : nlohmann::ordered_json(r.reready)},
          {"solved_partitioned", r.solved_partitioned},
          {"error_against_host", r.error},
          {"residual_seconds", {{"spade", {r.residual.spade[0], r.residual.spade[1]}},
                                {"spade_kernel", {r.residual.kernel[0], r.residual.kernel[1]}},
                                {"cusparse_product", {r.residual.cusparse[0], r.residual.cusparse[1]}},
                                {"floor", {r.residual.floor[0], r.residual.floor[1]}},
                                {"nrhs", {1, 16}},
                                {"group", r.residual.group},
                                {"longest_row", r.residual.longest_row}}},
          {"trace", {{"forward", sweep(r.trace.forward)}, {"backward", sweep(r.trace.backward)}}}};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_solve: spade's GPU solve phase against cuSPARSE and the host solve"};
  std::vector<std::string> matrices = {"bcsstk14", "bcsstk13", "4elt_lap", "bcsstk16",  "mdual_lap",
                                       "lap2d_1024", "lap3d_64", "lap3d27_48"};
  int threads = 16, reps = 30;
  bool no_baselines = false;
  bool no_partitioned = false;
  app.add_option("--matrices", matrices, "matrices: files of ../shared/matrices without .mtx.gz, or generated lap2d_N, "
                                         "lap3d_N, lap3d27_N (N a grid side)")
      ->capture_default_str();
  app.add_option("--threads", threads, "host threads (factorization and host solve)")->capture_default_str();
  app.add_option("--reps", reps, "timed GPU solves per matrix (median)")->capture_default_str();
  app.add_flag("--no-baselines", no_baselines, "skip cuSPARSE (its analysis of a large L takes seconds)");
  app.add_flag("--no-partitioned-inverse", no_partitioned,
               "the per-supernode plan alone (SolverOptions::partitioned_inverse = false)");
  std::string json_path;
  app.add_option("--json", json_path, "also write the figures as JSON to this file (drivers/bench_json.hpp)");
  bool sweep_bands = false;
  app.add_flag("--band-sweep", sweep_bands,
               "instead of the table: the partitioned inverse's plan at every band of each factor, measured against "
               "the band rule's estimate");
  int visible_runs = 0;
  app.add_option("--visible-reps", visible_runs,
                 "instead of the table: the wait after the factorization over this many fresh Solvers per matrix");
  CLI11_PARSE(app, argc, argv);
  if (visible_runs > 0) {
    try {
      std::printf("device: %s\nhost threads: %d\n\n", spade::gpu_description().c_str(), threads);
      std::printf("| matrix | Solvers | factor ms (median) | visible ms: median (10th-90th percentile, largest) | "
                  "visible / factor (medians) | refactor ms | visible after it, ms | visible / refactor |\n"
                  "|---|---|---|---|---|---|---|---|\n");
      for (const std::string& name : matrices) visible_reps(name, threads, visible_runs, !no_partitioned);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "bench_solve: %s\n", e.what());
      return 1;
    }
    return 0;
  }
  if (sweep_bands) {
    try {
      std::printf("device: %s\nhost threads: %d\n\n", spade::gpu_description().c_str(), threads);
      std::printf("| matrix | band | pieces | tasks | merged MB | estimate us (both sweeps) | measured us (fwd + bwd) |\n"
                  "|---|---|---|---|---|---|---|\n");
      for (const std::string& name : matrices) band_sweep(name, threads);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "bench_solve: %s\n", e.what());
      return 1;
    }
    return 0;
  }
  const bool partitioned = !no_partitioned;
  try {
    const double bandwidth = copy_bandwidth();
    const double read_only = spade::bench::read_bandwidth();
    std::printf("device: %s\ncopy bandwidth (read + write): %.3f TB/s; a read-only stream: %.3f TB/s\nhost threads: %d\n\n",
                spade::gpu_description().c_str(), bandwidth * 1e-12, read_only * 1e-12, threads);
    std::printf("| matrix | n | nnz(L) | supernodes | groups / tiles | height (band) | floor ms | GPU ms (fwd + bwd) | GPU / floor "
                "| SpSV ms | SpSV / GPU | host ms | host / GPU | GPU 16 rhs ms | 16 / 1 | SpSM 16 ms | SpSM / GPU "
                "| refined ms (steps) | refined / call | refined, corrections FP32 / FP64 ms (steps) "
                "| host arrays: call ms, refined ms, ratio | factor s | plan s "
                "| visible ms (refactor) | visible / factor | partitioned ready ms (refactor) | GPU vs host |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    std::fflush(stdout);
    std::vector<Row> rows;
    for (const std::string& name : matrices) {
      if (name.rfind("lap", 0) != 0 && !spade::testing::matrix_exists(name + ".mtx.gz")) {
        std::printf("| %s | not found in %s |\n", name.c_str(), spade::testing::matrix_dir().c_str());
        continue;
      }
      rows.push_back(run_matrix(name, bandwidth, threads, reps, !no_baselines, partitioned));
      const Row& r = rows.back();
      std::printf("| %s | %d | %.3g | %d | %d / %d | %d (%d) | %.4f | %.4f (%.4f + %.4f) | %.2f | %.3f | %.0fx | %.3f | %.0fx "
                  "| %.4f | %.2f | %.3f | %.0fx | %.4f (%d) | %.2f | %.4f (%d) / %.4f (%d) | %.3f, %.3f, %.2f | %.3f | %.3f | %.2f (%.2f) | %.1f%% "
                  "| %s | %.1e |\n",
                  r.name.c_str(), r.n, static_cast<double>(r.nnz_l), r.supernodes, r.groups, r.tiles, r.height, r.band,
                  r.floor * 1e3, r.gpu1 * 1e3, r.gpu1_fwd * 1e3, r.gpu1_bwd * 1e3, r.gpu1 / r.floor,
                  r.cusparse.spsv * 1e3, r.cusparse.spsv / r.gpu1, r.host1 * 1e3, r.host1 / r.gpu1, r.gpu16 * 1e3,
                  r.gpu16 / r.gpu1, r.cusparse.spsm * 1e3, r.cusparse.spsm / r.gpu16, r.refined * 1e3, r.refined_steps,
                  r.refined / r.refined_call, r.refined_fp32 * 1e3, r.refined_fp32_steps, r.refined_fp64 * 1e3,
                  r.refined_fp64_steps, r.call_host * 1e3, r.refined_host * 1e3, r.refined_host / r.call_host,
                  r.factor, r.plan, r.visible * 1e3, r.revisible * 1e3,
                  100 * r.visible / r.factor, ready_cell(r).c_str(), r.error);
      std::fflush(stdout);
      if (r.cusparse.error > 1e-8) std::printf("  (cuSPARSE differs from spade by %.1e on %s)\n", r.cusparse.error, r.name.c_str());
    }
    std::printf("\nThe partitioned inverse's bands as the Solver timed them (one solve, us; the fastest kept):\n\n");
    for (const Row& r : rows) {
      if (r.trials.empty()) continue;
      std::printf("- %s:", r.name.c_str());
      print_trials(r.trials);
      std::printf("; kept %d\n", r.band);
    }
    std::printf("\nWhere a sweep's time goes (one traced solve, nrhs = 1, %%globaltimer; us): the sweep's span, its "
                "floor (L read once), and its critical chain of supernodes split into hand-offs (a supernode's first "
                "waiting tile past its wait minus the end of the last task it waited for) and work; backward, the chain "
                "goes up to a supernode that waits for none.\n\n");
    std::printf("| matrix | sweep | span | floor | chain (supernodes) | chain hand-offs | chain work | median hand-off |\n");
    std::printf("|---|---|---|---|---|---|---|---|\n");
    for (const Row& r : rows)
      for (int sweep = 0; sweep < 2; ++sweep) {
        const SweepTrace& t = sweep == 0 ? r.trace.forward : r.trace.backward;
        std::printf("| %s | %s | %.1f | %.1f | %d | %.1f | %.1f | %.2f |\n", r.name.c_str(),
                    sweep == 0 ? "forward" : "backward", t.span, r.floor * 0.5e6, t.chain, t.handoffs, t.work,
                    t.median_handoff);
      }
    if (!no_baselines) {
      std::printf("\nOne refinement step's residual and backward error (ms): spade's one pass over A as refinement calls "
                  "it (GpuResidual::evaluate, wall clock, the wait for its two maxima included) and its kernel alone "
                  "(CUDA events), against cuSPARSE's r = b - A x alone (SpMV / SpMM, CUDA events), which the backward "
                  "error needs twice (A x, |A| |x|); floor: A (12 bytes an entry), its row pointers and x, b, r.\n\n");
      std::printf("| matrix | entries per row: mean, longest (lanes per row) | nrhs | spade evaluate | spade kernel | cuSPARSE product "
                  "| cuSPARSE / spade kernel | floor | spade kernel / floor |\n|---|---|---|---|---|---|---|---|---|\n");
      for (const Row& r : rows)
        for (int w = 0; w < 2; ++w)
          std::printf("| %s | %.1f, %d (%d) | %d | %.4f | %.4f | %.4f | %.2f | %.4f | %.2f |\n", r.name.c_str(),
                      r.nnz_a / static_cast<double>(r.n), r.residual.longest_row, r.residual.group, w == 0 ? 1 : 16, r.residual.spade[w] * 1e3,
                      r.residual.kernel[w] * 1e3, r.residual.cusparse[w] * 1e3, r.residual.cusparse[w] / r.residual.kernel[w],
                      r.residual.floor[w] * 1e3, r.residual.kernel[w] / r.residual.floor[w]);
    }
    if (!json_path.empty()) {
      nlohmann::ordered_json rows_json = nlohmann::ordered_json::array();
      for (const Row& r : rows) rows_json.push_back(row_json(r));
      spade::bench::write_json_file(
          json_path, {{"benchmark", "bench_solve"},
                      {"floor", "L's values and row indices (12 bytes an entry) read in both sweeps at the copy bandwidth"},
                      {"machine",
                       {{"device", spade::gpu_description()},
                        {"copy_bandwidth_bytes_per_second", bandwidth},
                        {"read_bandwidth_bytes_per_second", read_only}}},
                      {"settings", {{"threads", threads}, {"reps", reps}, {"baselines", !no_baselines}, {"partitioned_inverse", partitioned}}},
                      {"rows", rows_json}});
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_solve: %s\n", e.what());
    return 1;
  }
  return 0;
}
