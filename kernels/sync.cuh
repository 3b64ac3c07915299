// Device-side synchronization primitives shared by every spade kernel that lets one thread block (or warp)
// wait on another inside one launch. Requires Volta or newer (independent thread scheduling, sm_70+).
//
// The rules every kernel follows (Hogg 2013, Liu et al. 2016, Li 2017):
//  - Work is handed out through an atomic ticket in dependency order (`take_ticket`), never by blockIdx,
//    so a waiter only waits on work that has already started and therefore finishes: no deadlock whatever
//    order the hardware dispatches blocks in.
//  - A producer publishes with release ordering after its data writes; a consumer reads the flag or counter
//    with acquire ordering before it reads the data (cuda::atomic_ref, device scope).
//  - Every spin-wait is bounded: after `DeviceStatus::spin_limit` polls (default `kSpinLimit`) with backoff
//    it records an error in a flag the host reads, and gives up instead of hanging the GPU.
#pragma once

#include <cuda/atomic>

#include <cstdint>

namespace spade::kernels {

/// Error codes a kernel writes to its device-side status word (first error wins).
enum StatusCode : int {
  kStatusOk = 0,
  kStatusSpinTimeout = 1,  ///< a bounded spin-wait gave up (a bug, or a dependency that never arrives)
  kStatusZeroPivot = 2,    ///< zero on a non-unit diagonal; the payload is the row
};

/// Device status: a code and a payload (the row or column concerned), and the spin limit the kernels
/// read. Zero-initialize before the first launch; `code` and `index` must be zero at every launch.
struct DeviceStatus {
  int code;
  int index;
  long long spin_limit;  ///< polls before a spin-wait gives up; 0 means kSpinLimit (tests set it small)
};

/// Default polls before a spin-wait gives up. With the __nanosleep backoff below this is several seconds
/// of waiting, orders of magnitude longer than any legitimate wait.
constexpr long long kSpinLimit = 1ll << 26;

using device_atomic_int = cuda::atomic_ref<int, cuda::thread_scope_device>;

/// Takes the next ticket of a global counter (relaxed: the ticket only orders work, data is synchronized
/// through the flags). Called by one thread; broadcast the result to the block or warp yourself.
__device__ inline int take_ticket(int* counter) {
  return device_atomic_int(*counter).fetch_add(1, cuda::memory_order_relaxed);
}

/// Records the first error in `status` (later errors are dropped).
__device__ inline void report_status(DeviceStatus* status, int code, int index) {
  if (device_atomic_int(status->code).load(cuda::memory_order_relaxed) != kStatusOk) return;
  int expected = kStatusOk;
  if (device_atomic_int(status->code).compare_exchange_strong(expected, code, cuda::memory_order_relaxed))
    status->index = index;
}

/// Publishes `value` with release ordering: every write this thread made before (and, after a
/// __syncthreads / __syncwarp, every write of its block or warp) is visible to a thread that acquires it.
__device__ inline void release_store(int* flag, int value) {
  device_atomic_int(*flag).store(value, cuda::memory_order_release);
}

/// Release add (for counters that many producers decrement or increment).
__device__ inline int release_add(int* counter, int value) {
  return device_atomic_int(*counter).fetch_add(value, cuda::memory_order_release);
}

__device__ inline int acquire_load(int* flag) {
  return device_atomic_int(*flag).load(cuda::memory_order_acquire);
}

/// Relaxed device-scope load and store, for values that are their own ready flags (a "not yet" bit
/// pattern until one relaxed store writes the value; nothing else is published with it, so neither side
/// needs a fence). Never cached in L1.
template <typename T>
__device__ inline T load_relaxed(T* p) {
  return cuda::atomic_ref<T, cuda::thread_scope_device>(*p).load(cuda::memory_order_relaxed);
}
template <typename T>
__device__ inline void store_relaxed(T* p, T v) {
  cuda::atomic_ref<T, cuda::thread_scope_device>(*p).store(v, cuda::memory_order_relaxed);
}

/// Spin-wait bookkeeping for every bounded wait: status->spin_limit polls at most (kSpinLimit when 0), the
/// first few without sleeping, then a __nanosleep backoff doubling up to `cap` (kShortSleepNs unless the
/// caller knows its wait is long); gives up early once another thread has reported an error, so one failure does
/// not leave the rest of the grid spinning.
struct Backoff {
  static constexpr unsigned kShortSleepNs = 256;  ///< the default cap
  long long polls = 0;
  long long limit = 0;
  int quick = 4;  ///< polls before the first sleep
  unsigned sleep_ns = 8;
  unsigned cap = kShortSleepNs;  ///< longest sleep (ns); may change between polls
  /// After an unsuccessful poll: false when the wait must give up (kStatusSpinTimeout is then reported
  /// with `who`, unless the wait ends because of another thread's error).
  __device__ bool pause(DeviceStatus* status, int who) {
    if (polls == 0) limit = status->spin_limit > 0 ? status->spin_limit : kSpinLimit;
    if (++polls >= limit) {
      report_status(status, kStatusSpinTimeout, who);
      return false;
    }
    if ((polls & 255) == 0 && device_atomic_int(status->code).load(cuda::memory_order_relaxed) != kStatusOk)
      return false;
    if (polls > quick) {
      __nanosleep(sleep_ns < cap ? sleep_ns : cap);
      if (sleep_ns < cap) sleep_ns *= 2;
    }
    return true;
  }
  __device__ void reset() {
    polls = 0;
    sleep_ns = 8;
  }
};

/// Spins until `*flag >= target`, then acquires at `Scope`; returns false if that never happens (see
/// Backoff). It polls with relaxed loads and fences once after success: an acquire load per poll is a
/// fence per poll, and with thousands of warps polling those fences throttle the producers they wait for.
template <cuda::thread_scope Scope = cuda::thread_scope_device>
__device__ inline bool wait_at_least(int* flag, int target, DeviceStatus* status, int who) {
  Backoff backoff;
  while (cuda::atomic_ref<int, Scope>(*flag).load(cuda::memory_order_relaxed) < target)
    if (!backoff.pause(status, who)) return false;
  cuda::atomic_thread_fence(cuda::memory_order_acquire, Scope);
  return true;
}

}  // namespace spade::kernels
