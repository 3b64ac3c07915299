// Thread block cluster primitives (compute capability 9.0, PTX ISA 8.0): distributed shared memory
// addresses, the cluster barrier, mbarriers with transaction counts, and st.async, the store into another
// block's shared memory that counts its bytes on that block's mbarrier. Used by the cluster solve
// (kernels/sptrsv_cluster.cu) and measured by drivers/bench_cluster_sync.cu. The functions do not exist in
// device code below sm_90 (the host pass sees them); kernels that may be built for older GPUs guard their
// bodies with SPADE_CLUSTER_ARCH.
#pragma once

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define SPADE_CLUSTER_ARCH 1
#else
#define SPADE_CLUSTER_ARCH 0
#endif

namespace spade::kernels::cluster {

/// The shared-memory (shared::cta) address of a generic pointer into this block's shared memory.
__device__ __forceinline__ unsigned shared_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

#if !defined(__CUDA_ARCH__) || SPADE_CLUSTER_ARCH
/// This block's rank in its cluster.
__device__ __forceinline__ unsigned rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
/// Blocks in this cluster.
__device__ __forceinline__ unsigned blocks() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_nctarank;\n" : "=r"(r));
  return r;
}
/// The shared::cluster address of the same shared-memory location in block `rank` of the cluster.
__device__ __forceinline__ unsigned map_to_rank(unsigned address, unsigned rank) {
  unsigned out;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(out) : "r"(address), "r"(rank));
  return out;
}
__device__ __forceinline__ double load_remote(unsigned address) {
  double v;
  asm volatile("ld.shared::cluster.f64 %0, [%1];\n" : "=d"(v) : "r"(address) : "memory");
  return v;
}
/// Every thread of the cluster: arrive with release, wait with acquire (a full memory barrier).
__device__ __forceinline__ void sync_all() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
/// The two halves of the cluster barrier without memory ordering: an execution barrier only. Each thread
/// alternates arrive and wait.
__device__ __forceinline__ void arrive_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wait() { asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void fence_acq_rel() { asm volatile("fence.acq_rel.cluster;\n" ::: "memory"); }

/// mbarrier at shared address `barrier`: initialise with `arrivals` expected arrivals, then make the
/// initialisation visible to the cluster (before any other block may arrive or store to it).
__device__ __forceinline__ void init_barrier(unsigned barrier, unsigned arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(barrier), "r"(arrivals) : "memory");
}
__device__ __forceinline__ void fence_barrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
/// One arrival on this block's mbarrier that also expects `bytes` more bytes in the current phase.
__device__ __forceinline__ void expect_bytes(unsigned barrier, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(barrier), "r"(bytes) : "memory");
}
/// One arrival with release at cluster scope on another block's mbarrier.
__device__ __forceinline__ void arrive_remote_release(unsigned remote_barrier) {
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(remote_barrier) : "memory");
}
/// Stores v at shared::cluster address `remote` and counts its bytes on the mbarrier `remote_barrier` of
/// the same block (complete_tx); a reader that sees the phase complete sees the value.
__device__ __forceinline__ void store_async(unsigned remote, double v, unsigned remote_barrier) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.f64 [%0], %1, [%2];\n" ::"r"(remote), "d"(v),
               "r"(remote_barrier)
               : "memory");
}
__device__ __forceinline__ void store_async(unsigned remote, float v, unsigned remote_barrier) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.f32 [%0], %1, [%2];\n" ::"r"(remote), "f"(v),
               "r"(remote_barrier)
               : "memory");
}
/// One poll: true once the phase of the given parity of this block's mbarrier has completed; the values
/// stored into this block with st.async for that phase are then visible (their complete_tx is what
/// completes the phase). Acquire at block scope: at cluster scope the wait also invalidates the L1 cache
/// (CCTL.IVALL), which ncu showed costing the cluster solve about 4% of its time, and only shared memory is
/// exchanged. The hardware may suspend the thread for a short, system-dependent time before it answers
/// false.
__device__ __forceinline__ bool try_wait(unsigned barrier, unsigned parity) {
  unsigned done;
  asm volatile(
      "{\n .reg .pred p;\n"
      " mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      " selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(barrier), "r"(parity)
      : "memory");
  return done != 0;
}
#endif

}  // namespace spade::kernels::cluster
