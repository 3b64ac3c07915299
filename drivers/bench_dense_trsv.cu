// Benchmark of the dense triangular solves (issue 3) against cuBLAS dtrsv / dtrsm in the same process.
// Prints markdown tables (docs/benchmarks/dense_trsv.md).
//
// Method: CUDA events around each call on one stream, calls enqueued back to back, warmed up, median over
// the repetitions. The triangles are diagonally dominant random matrices generated on the device
// (off-diagonals uniform in [-1, 1] / n, diagonal in [1.5, 2]); repeated in-place solves shrink x by at
// most 2x per solve, far from underflow over the repetitions. When the triangle is smaller than 256 MiB,
// the calls rotate over several copies of it so that most calls read it from device memory, not from L2.
// The bandwidth floor is the bytes of the triangle, n (n + 1) / 2 elements, over the copy bandwidth
// measured here (a 1 GiB device-to-device cudaMemcpy, counting bytes read plus bytes written).
//
// usage: bench_dense_trsv [max_n [min_n]] [--json FILE]   (sizes min_n, 2 min_n, ..., max_n; default
// 32 .. 32768); --json writes the figures for scripts/plot_benchmarks.py (drivers/bench_json.hpp).
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "drivers/bench_json.hpp"
#include "kernels/cuda_check.hpp"
#include "spade/dense_trsv.hpp"

namespace {

void cublas_check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "cuBLAS error %d in %s\n", int(status), what);
    std::exit(1);
  }
}
#define CUBLAS_CHECK(call) cublas_check((call), #call)

__global__ void fill_triangle(double* a, long long lda, int n, unsigned long long seed) {
  const long long total = (long long)lda * n;
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total; e += (long long)gridDim.x * blockDim.x) {
    const long long i = e % lda, j = e / lda;
    unsigned long long h = (unsigned long long)e * 0x9E3779B97F4A7C15ull + seed;
    h ^= h >> 31;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 29;
    const double u = double(h >> 11) * (1.0 / 9007199254740992.0);  // [0, 1)
    a[e] = (i == j) ? 1.5 + 0.5 * u : (i > j && i < n) ? (2.0 * u - 1.0) / n : 0.0;
  }
}

__global__ void fill_vector(double* x, long long count, unsigned long long seed) {
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < count; e += (long long)gridDim.x * blockDim.x) {
    unsigned long long h = (unsigned long long)e * 0xD6E8FEB86659FD93ull + seed;
    h ^= h >> 32;
    x[e] = double(h % 2000001) / 1000000.0 - 1.0;
  }
}

/// Timed like the solves, it shows what a launch alone costs (the latency floor of a small solve).
__global__ void empty_kernel() {}

/// Median time in microseconds of `reps` calls of `call(rep)`, after `warmup` calls.
double median_us(int warmup, int reps, const std::function<void(int)>& call, cudaStream_t stream) {
  for (int i = 0; i < warmup; ++i) call(i);
  std::vector<cudaEvent_t> events(reps + 1);
  for (auto& e : events) SPADE_CUDA_CHECK(cudaEventCreate(&e));
  SPADE_CUDA_CHECK(cudaEventRecord(events[0], stream));
  for (int i = 0; i < reps; ++i) {
    call(i);
    SPADE_CUDA_CHECK(cudaEventRecord(events[i + 1], stream));
  }
  SPADE_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<float> ms(reps);
  for (int i = 0; i < reps; ++i) SPADE_CUDA_CHECK(cudaEventElapsedTime(&ms[i], events[i], events[i + 1]));
  for (auto& e : events) SPADE_CUDA_CHECK(cudaEventDestroy(e));
  std::nth_element(ms.begin(), ms.begin() + reps / 2, ms.end());
  return 1000.0 * ms[reps / 2];
}

double copy_bandwidth_gbs(cudaStream_t stream) {
  const std::size_t bytes = std::size_t(1) << 30;
  void *a = nullptr, *b = nullptr;
  SPADE_CUDA_CHECK(cudaMalloc(&a, bytes));
  SPADE_CUDA_CHECK(cudaMalloc(&b, bytes));
  SPADE_CUDA_CHECK(cudaMemsetAsync(a, 1, bytes, stream));
  const double us = median_us(3, 20, [&](int) { SPADE_CUDA_CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, stream)); }, stream);
  SPADE_CUDA_CHECK(cudaFree(a));
  SPADE_CUDA_CHECK(cudaFree(b));
  return 2.0 * bytes / (us * 1e3);
}

struct Row {
  int n;
  double floor_us, cublas_n, ours_n, ours_inv_n, cublas_t, ours_t, ours_inv_t, invert, cublas_16, ours_16,
      ours_16_separate, ours_16_chunked, cublas_16t, ours_16t;
  std::vector<double> variants;  // kVariants, in order
};

/// Variants of the tuning options timed for the variants table (inverted diagonal blocks).
struct Variant {
  spade::Transpose trans;
  int rows_per_block, chunk_columns;
};
constexpr spade::Transpose kN = spade::Transpose::no, kT = spade::Transpose::yes;
const Variant kVariants[] = {
    {kN, 64, 0}, {kN, 128, 0}, {kN, 128, 128}, {kN, 128, 512}, {kN, 128, 1024},
    {kT, 64, 0}, {kT, 128, 0}, {kT, 128, 128}, {kT, 128, 512}, {kT, 128, 1024},
};

std::string fmt(double v, int digits = 1) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

/// The figures as JSON (drivers/bench_json.hpp): one row per n, spade's faster variant (with or without
/// inverted diagonal blocks) against cuBLAS, the floor of one right-hand side.
nlohmann::ordered_json rows_json(const std::vector<Row>& rows) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const Row& r : rows) {
    const double best_n = std::min(r.ours_n, r.ours_inv_n), best_t = std::min(r.ours_t, r.ours_inv_t);
    const std::vector<spade::bench::Comparison> comparisons = {
        {"1 rhs, L", best_n * 1e-6, {{"cuBLAS dtrsv", r.cublas_n * 1e-6}}},
        {"1 rhs, L^T", best_t * 1e-6, {{"cuBLAS dtrsv", r.cublas_t * 1e-6}}},
        {"16 rhs, L", r.ours_16 * 1e-6, {{"cuBLAS dtrsm", r.cublas_16 * 1e-6}}},
        {"16 rhs, L^T", r.ours_16t * 1e-6, {{"cuBLAS dtrsm", r.cublas_16t * 1e-6}}},
    };
    list.push_back({{"matrix", "n = " + std::to_string(r.n)},
                    {"n", r.n},
                    {"comparisons", spade::bench::to_json(comparisons)},
                    {"floor_seconds", r.floor_us * 1e-6},
                    {"ours_n_seconds", r.ours_n * 1e-6},
                    {"ours_inv_n_seconds", r.ours_inv_n * 1e-6},
                    {"ours_t_seconds", r.ours_t * 1e-6},
                    {"ours_inv_t_seconds", r.ours_inv_t * 1e-6},
                    {"inversion_seconds", r.invert * 1e-6}});
  }
  return list;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<const char*> sizes;
  std::string json_path;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--json" && i + 1 < argc)
      json_path = argv[++i];
    else
      sizes.push_back(argv[i]);
  }
  const int max_n = sizes.size() > 0 ? std::atoi(sizes[0]) : 32768;
  const int min_n = sizes.size() > 1 ? std::atoi(sizes[1]) : 32;
  cudaStream_t stream;
  SPADE_CUDA_CHECK(cudaStreamCreate(&stream));
  cublasHandle_t handle;
  CUBLAS_CHECK(cublasCreate(&handle));
  CUBLAS_CHECK(cublasSetStream(handle, stream));
  spade::DenseTrsvWorkspace ws;
  cudaDeviceProp prop{};
  SPADE_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  const double bw = copy_bandwidth_gbs(stream);
  const double empty_us = median_us(3, 41, [&](int) { empty_kernel<<<1, 32, 0, stream>>>(); }, stream);
  std::printf("Device: %s, %d SMs; measured copy bandwidth %.0f GB/s (read + write, 1 GiB cudaMemcpy D2D); "
              "an empty kernel timed like the solves: %.1f us\n\n",
              prop.name, prop.multiProcessorCount, bw, empty_us);

  std::vector<Row> rows;
  for (int n = min_n; n <= max_n; n *= 2) {
    const int lda = n, nrhs = 16;
    const std::size_t elems = std::size_t(lda) * n, bytes = elems * sizeof(double);
    const int copies = int(std::clamp<std::size_t>((std::size_t(256) << 20) / bytes, 1, 8));
    std::vector<double*> L(copies), inv(copies), x(copies), X(copies);
    for (int c = 0; c < copies; ++c) {
      SPADE_CUDA_CHECK(cudaMalloc(&L[c], bytes));
      SPADE_CUDA_CHECK(cudaMalloc(&inv[c], spade::dense_trsv_inverse_size(n) * sizeof(double)));
      SPADE_CUDA_CHECK(cudaMalloc(&x[c], n * sizeof(double)));
      SPADE_CUDA_CHECK(cudaMalloc(&X[c], std::size_t(n) * nrhs * sizeof(double)));
      fill_triangle<<<1024, 256, 0, stream>>>(L[c], lda, n, 12345 + c);
      fill_vector<<<64, 256, 0, stream>>>(x[c], n, 777 + c);
      fill_vector<<<64, 256, 0, stream>>>(X[c], std::size_t(n) * nrhs, 999 + c);
      SPADE_CUDA_CHECK_LAUNCH();
      spade::dense_trsv_invert_diagonal<double>(spade::Diagonal::non_unit, n, L[c], lda, inv[c], ws, stream);
    }
    ws.check(stream);
    const int reps = n >= 16384 ? 15 : 41, warm = 3;
    auto trsv = [&](spade::Transpose t, bool use_inv, int rows_per_block,
                    int chunk_columns = spade::DenseTrsvOptions::kAutoChunk) {
      spade::DenseTrsvOptions o;
      o.rows_per_block = rows_per_block;
      o.chunk_columns = chunk_columns;
      return median_us(warm, reps, [&](int i) {
        const int c = i % copies;
        spade::dense_trsv<double>(t, spade::Diagonal::non_unit, n, L[c], lda, use_inv ? inv[c] : nullptr, x[c], ws, stream, o);
      }, stream);
    };
    auto cublas_trsv = [&](cublasOperation_t op) {
      return median_us(warm, reps, [&](int i) {
        const int c = i % copies;
        CUBLAS_CHECK(cublasDtrsv(handle, CUBLAS_FILL_MODE_LOWER, op, CUBLAS_DIAG_NON_UNIT, n, L[c], lda, x[c], 1));
      }, stream);
    };
    Row r{};
    r.n = n;
    r.floor_us = (double(n) * (n + 1) / 2 * sizeof(double)) / (bw * 1e3);
    r.cublas_n = cublas_trsv(CUBLAS_OP_N);
    r.ours_n = trsv(spade::Transpose::no, false, 0);
    r.ours_inv_n = trsv(spade::Transpose::no, true, 0);
    r.cublas_t = cublas_trsv(CUBLAS_OP_T);
    r.ours_t = trsv(spade::Transpose::yes, false, 0);
    r.ours_inv_t = trsv(spade::Transpose::yes, true, 0);
    for (const Variant& v : kVariants)
      r.variants.push_back(trsv(v.trans, true, v.rows_per_block, v.chunk_columns));
    r.invert = median_us(warm, reps, [&](int i) {
      const int c = i % copies;
      spade::dense_trsv_invert_diagonal<double>(spade::Diagonal::non_unit, n, L[c], lda, inv[c], ws, stream);
    }, stream);
    const int reps16 = n >= 8192 ? 7 : 21;
    const double one = 1.0;
    auto cublas_trsm16 = [&](cublasOperation_t op) {
      return median_us(2, reps16, [&](int i) {
        const int c = i % copies;
        CUBLAS_CHECK(cublasDtrsm(handle, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_LOWER, op, CUBLAS_DIAG_NON_UNIT, n, nrhs,
                                 &one, L[c], lda, X[c], n));
      }, stream);
    };
    auto trsm16 = [&](spade::Transpose t, int panels_per_launch,
                      int chunk_columns = spade::DenseTrsvOptions::kAutoChunk) {
      spade::DenseTrsvOptions o;
      o.panels_per_launch = panels_per_launch;
      o.chunk_columns = chunk_columns;
      return median_us(2, reps16, [&](int i) {
        const int c = i % copies;
        spade::dense_trsm<double>(t, spade::Diagonal::non_unit, n, nrhs, L[c], lda, inv[c], X[c], n, ws, stream, o);
      }, stream);
    };
    r.cublas_16 = cublas_trsm16(CUBLAS_OP_N);
    r.ours_16 = trsm16(kN, 0);
    r.ours_16_separate = trsm16(kN, 1);
    r.ours_16_chunked = trsm16(kN, 0, 512);
    r.cublas_16t = cublas_trsm16(CUBLAS_OP_T);
    r.ours_16t = trsm16(kT, 0);
    ws.check(stream);
    rows.push_back(r);
    for (int c = 0; c < copies; ++c) {
      SPADE_CUDA_CHECK(cudaFree(L[c]));
      SPADE_CUDA_CHECK(cudaFree(inv[c]));
      SPADE_CUDA_CHECK(cudaFree(x[c]));
      SPADE_CUDA_CHECK(cudaFree(X[c]));
    }
    std::fprintf(stderr, "n = %d done\n", n);
  }

  std::printf("### One right-hand side, FP64, non-unit (times in us, median)\n\n");
  std::printf("| n | floor | cuBLAS dtrsv N | ours N | ours N inv | speedup N | %% of copy BW | cuBLAS dtrsv T | ours T | ours T inv | speedup T | T inv / N inv | inversion |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const Row& r : rows) {
    const double best_n = std::min(r.ours_n, r.ours_inv_n), best_t = std::min(r.ours_t, r.ours_inv_t);
    std::printf("| %d | %s | %s | %s | %s | %sx | %s%% | %s | %s | %s | %sx | %s | %s |\n", r.n, fmt(r.floor_us).c_str(),
                fmt(r.cublas_n).c_str(), fmt(r.ours_n).c_str(), fmt(r.ours_inv_n).c_str(), fmt(r.cublas_n / best_n, 2).c_str(),
                fmt(100.0 * r.floor_us / best_n, 0).c_str(), fmt(r.cublas_t).c_str(), fmt(r.ours_t).c_str(),
                fmt(r.ours_inv_t).c_str(), fmt(r.cublas_t / best_t, 2).c_str(), fmt(r.ours_inv_t / r.ours_inv_n, 2).c_str(),
                fmt(r.invert).c_str());
  }
  std::printf("\n### Variants (inverted diagonal blocks; us): direction / rows per block row / chunk columns (0: "
              "unsplit)\n\n| n |");
  for (const Variant& v : kVariants)
    std::printf(" %s %d/%d |", v.trans == spade::Transpose::yes ? "T" : "N", v.rows_per_block, v.chunk_columns);
  std::printf("\n|---:|");
  for (std::size_t i = 0; i < std::size(kVariants); ++i) std::printf("---:|");
  std::printf("\n");
  for (const Row& r : rows) {
    std::printf("| %d |", r.n);
    for (double t : r.variants) std::printf(" %s |", fmt(t).c_str());
    std::printf("\n");
  }
  std::printf("\n### 16 right-hand sides, FP64, non-unit (us)\n\n| n | cuBLAS dtrsm N | ours N (inv) | speedup N | ours N, "
              "one launch per 8 columns | ours N, 512-column chunks | cuBLAS dtrsm T | ours T (inv) | speedup T |\n"
              "|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const Row& r : rows)
    std::printf("| %d | %s | %s | %sx | %s | %s | %s | %s | %sx |\n", r.n, fmt(r.cublas_16).c_str(),
                fmt(r.ours_16).c_str(), fmt(r.cublas_16 / r.ours_16, 2).c_str(), fmt(r.ours_16_separate).c_str(),
                fmt(r.ours_16_chunked).c_str(), fmt(r.cublas_16t).c_str(), fmt(r.ours_16t).c_str(),
                fmt(r.cublas_16t / r.ours_16t, 2).c_str());
  CUBLAS_CHECK(cublasDestroy(handle));
  SPADE_CUDA_CHECK(cudaStreamDestroy(stream));
  if (!json_path.empty()) {
    try {
      spade::bench::write_json_file(
          json_path, {{"benchmark", "bench_dense_trsv"},
                      {"floor", "the triangle, n (n + 1) / 2 doubles, read once at the copy bandwidth"},
                      {"machine", {{"device", prop.name}, {"copy_bandwidth_bytes_per_second", bw * 1e9}}},
                      {"rows", rows_json(rows)}});
    } catch (const std::exception& e) {
      std::fprintf(stderr, "bench_dense_trsv: %s\n", e.what());
      return 1;
    }
  }
  return 0;
}
