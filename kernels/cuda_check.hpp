// Host-side CUDA error handling: every CUDA, cuBLAS and cuSPARSE call spade makes goes through these, and a
// failure becomes a spade::ResourceError naming the call, the file and line.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "spade/error.hpp"

namespace spade {

/// Throws ResourceError if `err` is not cudaSuccess (out-of-memory included).
inline void cuda_check(cudaError_t err, const char* what, const char* file, int line) {
  if (err != cudaSuccess)
    throw ResourceError(std::string("CUDA error in ") + what + " (" + file + ":" + std::to_string(line) +
                        "): " + cudaGetErrorString(err));
}

/// True when a usable CUDA device is present (false with no driver, no device or an old driver).
inline bool cuda_device_available() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error so later calls report their own
    return false;
  }
  return count > 0;
}

/// An attribute of the current device (cudaDeviceGetAttribute); throws ResourceError when the query fails.
inline int cuda_device_attribute(cudaDeviceAttr attribute) {
  int device = 0, value = 0;
  cuda_check(cudaGetDevice(&device), "cudaGetDevice", __FILE__, __LINE__);
  cuda_check(cudaDeviceGetAttribute(&value, attribute, device), "cudaDeviceGetAttribute", __FILE__, __LINE__);
  return value;
}

/// The compute capability's major number of the current device (9 for Hopper).
inline int cuda_device_major() { return cuda_device_attribute(cudaDevAttrComputeCapabilityMajor); }

/// The L2 cache of the current device, in bytes.
inline long long cuda_device_l2_bytes() { return cuda_device_attribute(cudaDevAttrL2CacheSize); }

}  // namespace spade

#define SPADE_CUDA_CHECK(call) ::spade::cuda_check((call), #call, __FILE__, __LINE__)
/// After a kernel launch: checks the launch configuration error.
#define SPADE_CUDA_CHECK_LAUNCH() ::spade::cuda_check(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)
