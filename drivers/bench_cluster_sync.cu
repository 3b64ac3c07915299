// What one level step costs inside a thread block cluster (compute capability 9.0), the measurements behind
// the next step of the sparse triangular solve (docs/benchmarks/sptrsv.md, version 14): a level solved by
// several SMs needs a barrier between levels and an exchange of solution values between the SMs' shared
// memories (distributed shared memory), and the question is which way of ordering that exchange is cheap.
//
// usage: bench_cluster_sync
//
// One cluster of C blocks loops 20,000 times over a step; each thread stores a value, the step
// synchronizes, and each thread reads a value another thread (another block, where C > 1) stored, so the
// steps form a dependent chain. The ways of synchronizing:
//   syncthreads      one block, __syncthreads (what level_block pays per level)
//   barrier rel/acq  barrier.cluster.arrive.release + wait.acquire, then a read of the next block's
//                    shared memory (ld.shared::cluster)
//   barrier relaxed  barrier.cluster.arrive.relaxed + wait: an execution barrier without memory ordering
//                    (the values read are the block's own: not a valid exchange between blocks)
//   fence + relaxed  fence.acq_rel.cluster, the relaxed barrier, then the remote read
//   st.async         each thread pushes its value into the next block's shared memory with st.async,
//                    which counts the bytes on that block's mbarrier (complete_tx); the receiver waits for
//                    the phase, then the relaxed barrier keeps a slot from being overwritten while read
//   remote arrive    a local store, mbarrier.arrive.release.cluster on the next block's mbarrier (one per
//                    warp), the wait, the remote read, then the relaxed barrier
// Times: CUDA events around the launch, median of 5, divided by the steps.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "kernels/cluster.cuh"
#include "kernels/cuda_check.hpp"

namespace {

constexpr int kSteps = 20000;
constexpr int kMaxThreads = 1024;

enum Mode { syncthreads, barrier_release, barrier_relaxed, fence_relaxed, store_async, remote_arrive, kModes };
const char* kModeNames[kModes] = {"syncthreads", "barrier rel/acq", "barrier relaxed", "fence + relaxed", "st.async",
                                  "remote arrive"};

namespace cl = spade::kernels::cluster;

__device__ __forceinline__ void cluster_barrier_relaxed() {
  cl::arrive_relaxed();
  cl::wait();
}
/// Waits for the phase of the given parity to complete (no bound: a probe whose phases always complete).
__device__ __forceinline__ void wait_phase(unsigned barrier, unsigned parity) {
  while (!cl::try_wait(barrier, parity)) {
  }
}

__global__ void __launch_bounds__(kMaxThreads) step_loop(Mode mode, double* out) {
  __shared__ double slot[2][kMaxThreads];
  __shared__ __align__(8) unsigned long long phase_barrier[2];
  const unsigned rank = cl::rank(), blocks = cl::blocks();
  const unsigned next = (rank + 1) % blocks, previous = (rank + blocks - 1) % blocks;
  const int t = threadIdx.x, partner = t ^ 1;
  double acc = t;
  slot[0][t] = acc;
  slot[1][t] = acc;
  if (t == 0) {
    const unsigned arrivals = mode == remote_arrive ? blockDim.x / 32 : 1;
    for (int s = 0; s < 2; ++s)
      cl::init_barrier(cl::shared_address(&phase_barrier[s]), arrivals);
    cl::fence_barrier_init();
  }
  cl::sync_all();
  unsigned own_barrier[2], next_barrier[2], next_slot[2], previous_slot[2];
  for (int s = 0; s < 2; ++s) {
    own_barrier[s] = cl::shared_address(&phase_barrier[s]);
    next_barrier[s] = cl::map_to_rank(own_barrier[s], next);
    next_slot[s] = cl::map_to_rank(cl::shared_address(&slot[s][t]), next);
    previous_slot[s] = cl::map_to_rank(cl::shared_address(&slot[s][partner]), previous);
  }
  for (int i = 0; i < kSteps; ++i) {
    const int s = i & 1;
    const unsigned parity = (i >> 1) & 1;
    double v = 0;
    switch (mode) {
      case syncthreads:
        slot[s][t] = acc;
        __syncthreads();
        v = slot[s][partner];
        break;
      case barrier_release:
        slot[s][t] = acc;
        cl::sync_all();
        v = cl::load_remote(previous_slot[s]);
        break;
      case barrier_relaxed:
        slot[s][t] = acc;
        cluster_barrier_relaxed();
        v = slot[s][partner];
        break;
      case fence_relaxed:
        slot[s][t] = acc;
        cl::fence_acq_rel();
        cluster_barrier_relaxed();
        v = cl::load_remote(previous_slot[s]);
        break;
      case store_async:
        if (t == 0) cl::expect_bytes(own_barrier[s], blockDim.x * sizeof(double));
        cl::store_async(next_slot[s], acc, next_barrier[s]);
        wait_phase(own_barrier[s], parity);
        v = slot[s][partner];
        cluster_barrier_relaxed();
        break;
      case remote_arrive:
        slot[s][t] = acc;
        __syncwarp();
        if (t % 32 == 0) cl::arrive_remote_release(next_barrier[s]);
        wait_phase(own_barrier[s], parity);
        v = cl::load_remote(previous_slot[s]);
        cluster_barrier_relaxed();
        break;
      default: break;
    }
    acc = 0.5 * acc + 0.25 * v;
  }
  cl::sync_all();
  out[blockIdx.x * kMaxThreads + t] = acc;
}

/// Microseconds per step, median of 5 launches of one cluster of `blocks` blocks.
double time_step(Mode mode, int blocks, int threads, double* out) {
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(blocks);
  config.blockDim = dim3(threads);
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeClusterDimension;
  attribute[0].val.clusterDim.x = blocks;
  attribute[0].val.clusterDim.y = 1;
  attribute[0].val.clusterDim.z = 1;
  config.attrs = attribute;
  config.numAttrs = 1;
  cudaEvent_t start, stop;
  SPADE_CUDA_CHECK(cudaEventCreate(&start));
  SPADE_CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<float> ms;
  for (int rep = 0; rep < 5; ++rep) {
    SPADE_CUDA_CHECK(cudaEventRecord(start));
    SPADE_CUDA_CHECK(cudaLaunchKernelEx(&config, step_loop, mode, out));
    SPADE_CUDA_CHECK(cudaEventRecord(stop));
    SPADE_CUDA_CHECK(cudaEventSynchronize(stop));
    float t = 0;
    SPADE_CUDA_CHECK(cudaEventElapsedTime(&t, start, stop));
    ms.push_back(t);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(ms.begin(), ms.end());
  return ms[2] * 1e3 / kSteps;
}

}  // namespace

int main() {
  try {
    int device = 0, major = 0;
    SPADE_CUDA_CHECK(cudaGetDevice(&device));
    SPADE_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    if (major < 9) {
      std::fprintf(stderr, "bench_cluster_sync: thread block clusters need compute capability 9.0 or newer\n");
      return 1;
    }
    cudaDeviceProp prop{};
    SPADE_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    SPADE_CUDA_CHECK(cudaFuncSetAttribute(step_loop, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    double* out = nullptr;
    SPADE_CUDA_CHECK(cudaMalloc(&out, sizeof(double) * 16 * kMaxThreads));
    std::printf("Device: %s. One step: store, synchronize, read a value another block stored (us, median of 5 "
                "launches of %d steps).\n\n| step | threads | 1 block | 2 blocks | 8 blocks | 16 blocks |\n"
                "|---|---|---|---|---|---|\n",
                prop.name, kSteps);
    for (int threads : {256, 1024})
      for (int m = 0; m < kModes; ++m) {
        const Mode mode = static_cast<Mode>(m);
        std::printf("| %s | %d |", kModeNames[m], threads);
        for (int blocks : {1, 2, 8, 16}) {
          if ((mode == syncthreads) != (blocks == 1)) {
            std::printf(" - |");
            continue;
          }
          std::printf(" %.3f |", time_step(mode, blocks, threads, out));
        }
        std::printf("\n");
      }
    cudaFree(out);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_cluster_sync: %s\n", e.what());
    return 1;
  }
  return 0;
}
