// Shared by the GPU benchmark drivers: a device copy of a host vector, freed on destruction, the check of
// cuSPARSE's status codes (a failure becomes a spade::ResourceError naming the call), a triangle in CSR and
// its cuSPARSE descriptor, the device's copy and read bandwidths, and CUDA-event timing.
#pragma once

#include <cuda_runtime.h>
#include <cusparse.h>

#include <algorithm>
#include <cstddef>
#include <string>
#include <functional>
#include <vector>

#include "bench_host.hpp"

#include "../kernels/cuda_check.hpp"
#include "spade/error.hpp"

#define CUSPARSE_CHECK(call)                                                                    \
  do {                                                                                          \
    const cusparseStatus_t status_ = (call);                                                    \
    if (status_ != CUSPARSE_STATUS_SUCCESS)                                                     \
      throw spade::ResourceError(std::string(#call) + ": " + cusparseGetErrorString(status_)); \
  } while (0)

namespace spade::bench {

/// `count` elements of device memory (cudaMalloc), optionally filled from a host vector.
template <typename U>
struct DeviceVector {
  U* p = nullptr;
  std::size_t count = 0;
  explicit DeviceVector(std::size_t c) : count(c) { SPADE_CUDA_CHECK(cudaMalloc(&p, std::max<std::size_t>(c, 1) * sizeof(U))); }
  explicit DeviceVector(const std::vector<U>& h) : DeviceVector(h.size()) {
    SPADE_CUDA_CHECK(cudaMemcpy(p, h.data(), h.size() * sizeof(U), cudaMemcpyHostToDevice));
  }
  ~DeviceVector() { cudaFree(p); }
  DeviceVector(const DeviceVector&) = delete;
  DeviceVector& operator=(const DeviceVector&) = delete;
  std::vector<U> download() const {
    std::vector<U> h(count);
    SPADE_CUDA_CHECK(cudaMemcpy(h.data(), p, count * sizeof(U), cudaMemcpyDeviceToHost));
    return h;
  }
};

/// A triangle of a factor in CSR for cuSPARSE: n x n, 32-bit indices, row i's entries by increasing column.
struct Csr {
  int n = 0;
  std::vector<int> ptr, col;
  std::vector<double> val;
};

/// cuSPARSE's descriptor of T, whose arrays are on the device in ptr, col and val, with its fill mode and
/// diagonal type set. The caller destroys it (cusparseDestroySpMat).
inline cusparseSpMatDescr_t csr_descriptor(const Csr& T, const DeviceVector<int>& ptr, const DeviceVector<int>& col,
                                           const DeviceVector<double>& val, cusparseFillMode_t fill,
                                           cusparseDiagType_t diag) {
  cusparseSpMatDescr_t M;
  CUSPARSE_CHECK(cusparseCreateCsr(&M, T.n, T.n, T.ptr[T.n], ptr.p, col.p, val.p, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                                   CUSPARSE_INDEX_BASE_ZERO, CUDA_R_64F));
  CUSPARSE_CHECK(cusparseSpMatSetAttribute(M, CUSPARSE_SPMAT_FILL_MODE, &fill, sizeof(fill)));
  CUSPARSE_CHECK(cusparseSpMatSetAttribute(M, CUSPARSE_SPMAT_DIAG_TYPE, &diag, sizeof(diag)));
  return M;
}

/// Events around `run` on the legacy stream, median over `reps` after `warm` warm-ups, seconds.
inline double event_median(const std::function<void()>& run, int warm, int reps) {
  cudaEvent_t e0, e1;
  SPADE_CUDA_CHECK(cudaEventCreate(&e0));
  SPADE_CUDA_CHECK(cudaEventCreate(&e1));
  std::vector<double> t;
  for (int r = 0; r < warm + reps; ++r) {
    SPADE_CUDA_CHECK(cudaEventRecord(e0));
    run();
    SPADE_CUDA_CHECK(cudaEventRecord(e1));
    SPADE_CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    SPADE_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    if (r >= warm) t.push_back(ms * 1e-3);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return median(t);
}

namespace detail {
/// Sums a[i] over a grid-stride loop (16-byte loads) and writes nothing unless the sum is a value no test
/// array holds: a read-only stream the compiler cannot drop.
__global__ void read_stream_kernel(const double2* __restrict__ a, long long count, double* sink) {
  double s = 0;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const double2 v = __ldg(a + i);
    s += v.x + v.y;
  }
  if (s == -1.0) *sink = s;
}
}  // namespace detail

/// Read bandwidth in bytes/s of a read-only stream over 1 GiB (8 blocks of 256 threads per
/// multiprocessor), median of the last 10 of 30 passes: what a kernel that only reads can reach, against
/// which a solve sweep's rate of reading its panels compares (docs/benchmarks/solve.md, "What bounds a
/// large sweep"). Reads run slower for a few milliseconds after a copy such as copy_bandwidth()'s, hence
/// the 20 untimed passes first.
inline double read_bandwidth() {
  const std::size_t bytes = std::size_t(1) << 30;
  DeviceVector<double2> a(bytes / sizeof(double2));
  DeviceVector<double> sink(1);
  SPADE_CUDA_CHECK(cudaMemset(a.p, 0, bytes));
  int sms = 0;
  SPADE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const double seconds = event_median(
      [&] {
        detail::read_stream_kernel<<<8 * sms, 256>>>(a.p, static_cast<long long>(a.count), sink.p);
        SPADE_CUDA_CHECK(cudaGetLastError());
      },
      20, 10);
  return bytes / seconds;
}

/// Copy bandwidth in bytes/s (read plus written) of a 1 GiB device-to-device copy, median of 10.
inline double copy_bandwidth() {
  const std::size_t bytes = std::size_t(1) << 30;
  DeviceVector<char> a(bytes), b(bytes);
  SPADE_CUDA_CHECK(cudaMemset(a.p, 1, bytes));
  const double seconds =
      event_median([&] { SPADE_CUDA_CHECK(cudaMemcpy(b.p, a.p, bytes, cudaMemcpyDeviceToDevice)); }, 2, 10);
  return 2.0 * bytes / seconds;
}

}  // namespace spade::bench
