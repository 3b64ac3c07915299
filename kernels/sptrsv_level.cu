// Level-scheduled sparse triangular solves (R. Li, "On parallel solution of sparse triangular linear
// systems in CUDA", 2017): the unknowns of one level are independent, so each level is one launch and the
// launch boundary is the only synchronization. LEVR: a warp per row of CSR gathers its row (rows of at most
// kLevrShortRow entries: several a warp; a row of more than kLevrPiece entries: a warp per piece, the last
// piece to finish solving the row); LEVC: a warp
// per column of CSC finishes its unknown and scatters the updates into x with atomics. LEVR also runs on
// a part renumbered in level order (L.perm set, jlev null: level l is the rows level_ptr[l] to
// level_ptr[l + 1]), reading and writing x through L.perm. LEVR's launches are recorded once as a CUDA
// graph and replayed (LevrGraph): the host launches a level in 2.2-3.5 us, a graph's replay starts the next
// in about 1 us (H100, with programmatic dependent launch). The graph holds the buffers of its first solve
// (b, x, their leading dimensions and the count) as arguments; solves with other buffers replay a second
// graph whose levels read them from a small block of device memory, which a one-thread kernel rewrites
// before such a replay, so that no solve rewrites the nodes of a graph.
//
// Right-hand sides: the lanes are split among the R right-hand sides of the pass (RowLanes: with a warp a
// row and R = 8, four lanes per right-hand side, each taking every fourth entry), so a lane does one
// right-hand side's arithmetic, one load or atomic per entry, and a row's sums are reduced over four lanes
// (2 shuffles) rather than over the warp for each of the R right-hand sides (40 shuffles and R loads per
// entry and lane).
#include "kernels/sptrsv_common.cuh"

namespace spade::kernels::sptrsv {
namespace {

/// Programmatic dependent launch (compute capability 9.0): the next level's launch may start once every
/// block of this one has started, and its blocks read their rows, diagonals and b while this level
/// finishes; they wait for this level's results (griddepcontrol.wait: the previous grid complete, its
/// writes visible) only before they read x. No level writes what a later one reads before its wait.
__device__ inline void start_next_level() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ inline void wait_for_previous_level() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/// One level. One right-hand side: x is read and written where the caller has it. Several (R > 1): the
/// rows of later levels read y, which holds the R values of each unknown side by side (value r of the
/// caller's unknown u at u * R + r): the R lanes reading one entry's column read one segment of R values
/// instead of one in each of R columns. b is read where the caller has it, before the wait, so its
/// scattered loads cost no latency. A row's solution goes into y and, unless kScatter, into x; kScatter:
/// x is copied from y after the last level (scatter_x_kernel), for short rows (S = 1) and for passes
/// whose x is larger than half the L2 cache, where the scattered stores of a wide level showed. H100, 8
/// right-hand sides, against gathering b into y before the first level too: short rows, lap3d7 128^3
/// 0.63 ms against 0.73, lap2d5 1024^2 1.96 against 2.28; storing x in the levels instead, 1.24 and 3.19.
/// Long rows, scattered against stored in the levels: lap3d27 128^3 (x of 134 MB) 1.55 against 1.63 ms;
/// c-62 (2.7 MB) 0.021 against 0.020, NotreDame_www (21 MB) 0.428 against 0.406.
/// kIndirect: the pass is read from device memory at pass_at, not from `rhs` (before the wait: no level
/// writes it). Slower than an argument for several right-hand sides on narrow levels (H100, 8 right-hand
/// sides, bcsstk13: 1.10 ms against 0.94, ex14 0.48 against 0.43, bayer10 0.018 against 0.017, with b
/// and x marked global as here; the pass read under a branch or with coherent loads did no better), the
/// same for one (bcsstk13 0.625 against 0.639 ms).
template <typename T, int R, int S, int P, bool kScatter, bool kIndirect>
__global__ void levr_kernel(LowerPart<T> L, LevrItems<T> items, std::int32_t begin, std::int32_t end,
                            RhsPass<T> rhs, const RhsPass<T>* __restrict__ pass_at, T* y) {
  using Lanes = RowLanes<R, S>;
  start_next_level();
  if (kIndirect) {
    rhs = *pass_at;
    __builtin_assume(__isGlobal(rhs.b));
    __builtin_assume(__isGlobal(rhs.x));
  }
  const Lanes lanes(threadIdx.x % kWarpSize);
  const std::int32_t warp_first = begin + (blockIdx.x * blockDim.x + threadIdx.x) / kWarpSize * Lanes::kRows;
  if (warp_first >= end) return;
  const std::int32_t pos = warp_first + lanes.row;
  const bool active = pos < end;  // a warp's last rows may lie past the level
  index_t i = 0;
  std::int32_t first = 0, last = 0, slot = -1, pieces = 1;
  if (Lanes::kRows == 1 && items.piece != nullptr) {
    const LevrPiece w = items.piece[pos];
    i = w.row;
    first = w.first;
    slot = w.slot;
    pieces = w.pieces;
    last = min(first + kLevrPiece, L.ptr[i + 1]);
  } else if (active) {
    i = items.jlev != nullptr ? items.jlev[pos] : pos;
    first = L.ptr[i];
    last = L.ptr[i + 1];
  }
  // Everything but x before the wait: the entries, the diagonal and b.
  const std::int32_t k = first + lanes.slot;
  T a[P];
  index_t c[P];
#pragma unroll
  for (int u = 0; u < P; ++u) {
    const bool in = k + u * S < last;
    a[u] = in ? L.val[k + u * S] : T(0);
    c[u] = in ? caller_row(L, L.ind[k + u * S]) : 0;
  }
  const std::int64_t ui = active ? caller_row(L, i) : 0;
  const bool mine = active && lanes.r < rhs.nr;  // lanes of r >= nr solve zeros into y
  const T bi = mine && lanes.slot == 0 ? rhs.b[ui + lanes.r * std::int64_t(rhs.ldb)] : T(0);
  const T d = active ? L.diag[i] : T(1);
  // One right-hand side reads the caller's x, several the side-by-side copy.
  const T* solved = R > 1 ? y : rhs.x;
  auto write = [&](T value) {
    if (R > 1) y[ui * R + lanes.r] = value;
    if (!kScatter && mine) rhs.x[ui + lanes.r * std::int64_t(rhs.ldx)] = value;
  };
  wait_for_previous_level();
  T sum = T(0);
#pragma unroll
  for (int u = 0; u < P; ++u)
    if (k + u * S < last) sum += a[u] * solved[std::int64_t(c[u]) * R + lanes.r];
  for (std::int32_t kb = k + P * S; kb < last; kb += P * S) {
#pragma unroll
    for (int u = 0; u < P; ++u) {
      const bool in = kb + u * S < last;
      a[u] = in ? L.val[kb + u * S] : T(0);
      c[u] = in ? caller_row(L, L.ind[kb + u * S]) : 0;
    }
#pragma unroll
    for (int u = 0; u < P; ++u)
      if (kb + u * S < last) sum += a[u] * solved[std::int64_t(c[u]) * R + lanes.r];
  }
  sum = Lanes::slot_sum(sum);
  if (slot < 0) {
    if (active && lanes.slot == 0) write((bi - sum) / d);
    return;
  }
  // A piece of a split row (one row a warp): its sums into the row's, a fence, then the count (the
  // pattern of the CUDA programming guide's last-block reduction); the piece that counts last reads the
  // total back.
  using Partial = cuda::atomic_ref<T, cuda::thread_scope_device>;
  T& partial = items.partial[std::int64_t(slot) * kRhsPerPass + lanes.r];
  if (lanes.slot == 0) Partial(partial).fetch_add(sum, cuda::memory_order_relaxed);
  __threadfence();
  __syncwarp();
  const int lane = threadIdx.x % kWarpSize;
  bool solves = false;
  if (lane == 0)
    solves = device_atomic_int(items.arrived[slot]).fetch_add(1, cuda::memory_order_relaxed) == pieces - 1;
  if (!__shfl_sync(kFullMask, solves, 0)) return;
  __threadfence();
  if (lanes.slot == 0) write((bi - Partial(partial).exchange(T(0), cuda::memory_order_relaxed)) / d);
  if (lane == 0) items.arrived[slot] = 0;
}

/// LEVR's kernel for a pass of R right-hand sides on n unknowns in rows (or pieces) of at most `longest`
/// entries, and the rows a warp takes.
template <typename T>
struct LevrKernel {
  void (*kernel)(LowerPart<T>, LevrItems<T>, std::int32_t, std::int32_t, RhsPass<T>, const RhsPass<T>*, T*);
  int rows_per_warp;
  bool scatter;  ///< x copied from y after the last level
};
template <typename T, int R, bool kIndirect>
LevrKernel<T> levr_kernel_for(int longest, index_t n) {
  const bool short_rows = longest <= kLevrShortRow;
  if (R == 1)
    return short_rows ? LevrKernel<T>{levr_kernel<T, 1, kLevrShortRow, 1, false, kIndirect>,
                                      kWarpSize / kLevrShortRow, false}
                      : LevrKernel<T>{levr_kernel<T, 1, kWarpSize, 1, false, kIndirect>, 1, false};
  if (short_rows) return {levr_kernel<T, R, 1, kLevrShortRow, true, kIndirect>, kWarpSize / R, true};
  if (2 * std::int64_t(n) * R * std::int64_t(sizeof(T)) > cuda_device_l2_bytes())
    return {levr_kernel<T, R, kWarpSize / R, 4, true, kIndirect>, 1, true};
  return {levr_kernel<T, R, kWarpSize / R, 4, false, kIndirect>, 1, false};
}

/// x[u + r * ldx] := y[u * R + r] for r < nr; kIndirect: the pass from pass_at.
template <typename T, int R, bool kIndirect>
__global__ void scatter_x_kernel(index_t n, const T* y, RhsPass<T> rhs, const RhsPass<T>* __restrict__ pass_at) {
  if (kIndirect) {
    rhs = *pass_at;
    __builtin_assume(__isGlobal(rhs.x));
  }
  const std::int64_t t = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
  if (t >= std::int64_t(n) * R) return;
  const std::int64_t u = t / R;
  const int r = int(t % R);
  if (r < rhs.nr) rhs.x[u + std::int64_t(r) * rhs.ldx] = y[t];
}

template <typename T, int R>
__global__ void levc_kernel(LowerPart<T> L, const std::int32_t* jlev, std::int32_t begin, std::int32_t end,
                            RhsPass<T> rhs) {
  const RhsLanes<R> lanes(threadIdx.x % kWarpSize);
  const std::int32_t pos = begin + (blockIdx.x * blockDim.x + threadIdx.x) / kWarpSize;
  if (pos >= end) return;
  const index_t j = jlev[pos];
  const index_t uj = caller_index(j, L.n, L.reversed);
  const bool mine = lanes.r < rhs.nr;
  const std::int64_t xcol = std::int64_t(lanes.r) * rhs.ldx;
  // x[j] holds b[j] minus every update of the earlier levels; the lanes of r all read it before the
  // first of them rewrites it.
  const T xj = mine ? rhs.x[uj + xcol] / L.diag[j] : T(0);
  __syncwarp();
  if (mine && lanes.slot == 0) rhs.x[uj + xcol] = xj;
  if (mine)
    for (std::int32_t k = L.ptr[j] + lanes.slot; k < L.ptr[j + 1]; k += RhsLanes<R>::kSlots)
      atomicAdd(&rhs.x[caller_index(L.ind[k], L.n, L.reversed) + xcol], -L.val[k] * xj);
}

template <typename T, int R, typename Kernel>
void run_levels(Kernel kernel, const LowerPart<T>& L, const std::int32_t* jlev, const std::int32_t* level_ptr_host,
                int nlev, const RhsPass<T>& rhs, cudaStream_t stream) {
  for (int l = 0; l < nlev; ++l) {
    const std::int32_t begin = level_ptr_host[l], end = level_ptr_host[l + 1];
    kernel<<<blocks_for(end - begin, kBlockWarps), kBlockThreads, 0, stream>>>(L, jlev, begin, end, rhs);
    check_launch("level kernel");
  }
}

/// LEVR's launches, each level allowed to start while the one before finishes where the device can
/// (`overlap`, compute capability 9.0). They take `rhs` as an argument, or, where pass_at is not null (a
/// recorded graph), read it from there.
template <typename T, int R, bool kIndirect>
void launch_levr(const LowerPart<T>& L, const LevrItems<T>& items, const std::int32_t* level_ptr_host, int nlev,
                 const RhsPass<T>& rhs, const RhsPass<T>* pass_at, T* y, bool overlap, cudaStream_t stream) {
  const LevrKernel<T> chosen = levr_kernel_for<T, R, kIndirect>(items.longest, L.n);
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.blockDim = dim3(kBlockThreads);
  config.stream = stream;
  config.attrs = &attribute;
  for (int l = 0; l < nlev; ++l) {
    const std::int32_t begin = level_ptr_host[l], end = level_ptr_host[l + 1];
    config.gridDim = dim3(blocks_for(end - begin, kBlockWarps * chosen.rows_per_warp));
    // The first level reads b before its wait: it waits for what came before it in the stream.
    config.numAttrs = overlap && l > 0 ? 1 : 0;
    cuda_check(cudaLaunchKernelEx(&config, chosen.kernel, L, items, begin, end, rhs, pass_at, R > 1 ? y : nullptr),
               "levr_kernel", __FILE__, __LINE__);
  }
  if (chosen.scatter) {
    const int blocks = blocks_for(std::int64_t(L.n) * R, kBlockThreads);
    scatter_x_kernel<T, R, kIndirect><<<blocks, kBlockThreads, 0, stream>>>(L.n, y, rhs, pass_at);
    check_launch("scatter_x_kernel");
  }
}

template <typename T>
void launch_levr(const LowerPart<T>& L, const LevrItems<T>& items, const std::int32_t* level_ptr_host, int nlev,
                 const RhsPass<T>& rhs, const RhsPass<T>* pass_at, T* y, cudaStream_t stream) {
  const bool overlap = cuda_device_major() >= 9;  // programmatic dependent launch
  const bool multi = rhs.nr > 1;
  if (pass_at == nullptr)
    multi ? launch_levr<T, kRhsPerPass, false>(L, items, level_ptr_host, nlev, rhs, pass_at, y, overlap, stream)
          : launch_levr<T, 1, false>(L, items, level_ptr_host, nlev, rhs, pass_at, y, overlap, stream);
  else
    multi ? launch_levr<T, kRhsPerPass, true>(L, items, level_ptr_host, nlev, rhs, pass_at, y, overlap, stream)
          : launch_levr<T, 1, true>(L, items, level_ptr_host, nlev, rhs, pass_at, y, overlap, stream);
}

template <typename T>
__global__ void store_pass_kernel(RhsPass<T>* pass_at, RhsPass<T> rhs) {
  *pass_at = rhs;
}

template <typename T>
bool same_pass(const RhsPass<T>& a, const RhsPass<T>& b) {
  return a.b == b.b && a.ldb == b.ldb && a.x == b.x && a.ldx == b.ldx && a.nr == b.nr;
}

}  // namespace

template <typename T>
LevrGraph<T>::~LevrGraph() {
  if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
  if (exec_indirect_ != nullptr) cudaGraphExecDestroy(exec_indirect_);
}

template <typename T>
cudaGraphExec_t LevrGraph<T>::record(const LowerPart<T>& L, const LevrItems<T>& items,
                                     const std::int32_t* level_ptr_host, int nlev, const RhsPass<T>& rhs,
                                     const RhsPass<T>* pass_at, T* y) {
  // Captured on a stream of its own: the caller's may be the legacy default stream, which cannot be.
  cudaStream_t capture = nullptr;
  cuda_check(cudaStreamCreateWithFlags(&capture, cudaStreamNonBlocking), "cudaStreamCreateWithFlags", __FILE__,
             __LINE__);
  cudaGraph_t graph = nullptr;
  cudaError_t e = cudaStreamBeginCapture(capture, cudaStreamCaptureModeThreadLocal);
  if (e == cudaSuccess) {
    try {
      launch_levr(L, items, level_ptr_host, nlev, rhs, pass_at, y, capture);
    } catch (...) {
      cudaStreamEndCapture(capture, &graph);
      if (graph != nullptr) cudaGraphDestroy(graph);
      cudaStreamDestroy(capture);
      throw;
    }
    e = cudaStreamEndCapture(capture, &graph);
  }
  cudaStreamDestroy(capture);
  cuda_check(e, "recording levr's graph", __FILE__, __LINE__);
  cudaGraphExec_t exec = nullptr;
  e = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);  // the executable graph does not need it
  cuda_check(e, "instantiating levr's graph", __FILE__, __LINE__);
  return exec;
}

template <typename T>
void LevrGraph<T>::solve(const LowerPart<T>& L, const LevrItems<T>& items, const std::int32_t* level_ptr_host,
                         int nlev, const RhsPass<T>& rhs, T* y, cudaStream_t stream) {
  if (nlev == 0) return;
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  cuda_check(cudaStreamIsCapturing(stream, &capturing), "cudaStreamIsCapturing", __FILE__, __LINE__);
  if (capturing != cudaStreamCaptureStatusNone) {
    launch_levr<T>(L, items, level_ptr_host, nlev, rhs, nullptr, y, stream);
    return;
  }
  if (exec_ == nullptr) {
    exec_ = record(L, items, level_ptr_host, nlev, rhs, nullptr, y);
    recorded_ = rhs;
  }
  if (same_pass(rhs, recorded_)) {
    cuda_check(cudaGraphLaunch(exec_, stream), "cudaGraphLaunch", __FILE__, __LINE__);
    return;
  }
  if (exec_indirect_ == nullptr) {
    if (pass_at_ == nullptr)  // a solve allocates nothing
      throw ResourceError("levr: a solve with other buffers than the first, and no storage for its pass "
                          "(LevrGraph::set_pass_storage)");
    exec_indirect_ = record(L, items, level_ptr_host, nlev, rhs, pass_at_, y);
  }
  if (!same_pass(rhs, stored_)) {
    // Stream-ordered: it runs after the replays before it, which read the pass it overwrites.
    store_pass_kernel<T><<<1, 1, 0, stream>>>(pass_at_, rhs);
    check_launch("store_pass_kernel");
    stored_ = rhs;
  }
  cuda_check(cudaGraphLaunch(exec_indirect_, stream), "cudaGraphLaunch", __FILE__, __LINE__);
}

template <typename T>
void solve_levc(const LowerPart<T>& L, const std::int32_t* jlev, const std::int32_t* level_ptr_host, int nlev,
                const RhsPass<T>& rhs, cudaStream_t stream) {
  if (rhs.x != rhs.b)
    cuda_check(cudaMemcpy2DAsync(rhs.x, sizeof(T) * rhs.ldx, rhs.b, sizeof(T) * rhs.ldb, sizeof(T) * L.n, rhs.nr,
                                 cudaMemcpyDeviceToDevice, stream),
               "cudaMemcpy2DAsync", __FILE__, __LINE__);
  if (rhs.nr == 1)
    run_levels<T, 1>(levc_kernel<T, 1>, L, jlev, level_ptr_host, nlev, rhs, stream);
  else
    run_levels<T, kRhsPerPass>(levc_kernel<T, kRhsPerPass>, L, jlev, level_ptr_host, nlev, rhs, stream);
}

template class LevrGraph<double>;
template class LevrGraph<float>;
template void solve_levc<double>(const LowerPart<double>&, const std::int32_t*, const std::int32_t*, int,
                                 const RhsPass<double>&, cudaStream_t);
template void solve_levc<float>(const LowerPart<float>&, const std::int32_t*, const std::int32_t*, int,
                                const RhsPass<float>&, cudaStream_t);

}  // namespace spade::kernels::sptrsv
