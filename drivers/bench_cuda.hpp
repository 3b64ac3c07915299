// Shared by the GPU benchmark drivers: a device copy of a host vector, freed on destruction, and the
// check of cuSPARSE's status codes (a failure becomes a spade::ResourceError naming the call).
#pragma once

#include <cuda_runtime.h>
#include <cusparse.h>

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

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

}  // namespace spade::bench
