// Level-scheduled sparse triangular solves (R. Li, "On parallel solution of sparse triangular linear
// systems in CUDA", 2017): the unknowns of one level are independent, so each level is one launch and the
// launch boundary is the only synchronization. LEVR: a warp per row of CSR gathers its row; LEVC: a warp
// per column of CSC finishes its unknown and scatters the updates into x with atomics. LEVR also runs on
// a part renumbered in level order (L.perm set, jlev null: level l is the rows level_ptr[l] to
// level_ptr[l + 1]), reading and writing x through L.perm. LEVR's launches are recorded once as a CUDA
// graph and replayed (LevrGraph): the host launches a level in 2.2-3.5 us, a graph's replay starts the next
// in about 1 us (H100, with programmatic dependent launch).
//
// Right-hand sides: the lanes are split among the R right-hand sides of the pass (RhsLanes: for R = 8,
// four lanes per right-hand side, each taking every fourth entry), so a lane does one right-hand side's
// arithmetic, one load or atomic per entry, and a row's sums are reduced over four lanes (2 shuffles) rather
// than over the warp for each of the R right-hand sides (40 shuffles and R loads per entry and lane).
#include <utility>

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

/// The right-hand side of a graph's replay, read from L2 (ld.global.cg), the point of coherence: it changes
/// between replays.
template <typename T>
__device__ inline RhsPass<T> load_rhs(const RhsPass<T>* d) {
  RhsPass<T> r;
  r.b = reinterpret_cast<const T*>(__ldcg(reinterpret_cast<const unsigned long long*>(&d->b)));
  r.ldb = __ldcg(&d->ldb);
  r.x = reinterpret_cast<T*>(__ldcg(reinterpret_cast<const unsigned long long*>(&d->x)));
  r.ldx = __ldcg(&d->ldx);
  r.nr = __ldcg(&d->nr);
  return r;
}

/// One level. The right-hand side is `pass`, or *from where from is set (a graph's later levels); a set
/// `publish` (a graph's first level) receives `pass` for them. A level reads *from before its wait: it
/// starts after the level before it has started, and a graph's second level only after the first has
/// completed. One thread per block reads it, for the block (H100, one right-hand side, every warp reading
/// it against one read per block: lap3d7 128^3 1.35 against 0.85 ms, mdual_lap 0.145 against 0.089).
template <typename T, int R>
__global__ void levr_kernel(LowerPart<T> L, const std::int32_t* jlev, std::int32_t begin, std::int32_t end,
                            RhsPass<T> pass, const RhsPass<T>* from, RhsPass<T>* publish) {
  start_next_level();
  if (publish != nullptr && blockIdx.x == 0 && threadIdx.x == 0) *publish = pass;
  __shared__ RhsPass<T> shared_rhs;
  if (from != nullptr) {
    if (threadIdx.x == 0) shared_rhs = load_rhs(from);
    __syncthreads();
  }
  const RhsPass<T> rhs = from != nullptr ? shared_rhs : pass;
  const RhsLanes<R> lanes(threadIdx.x % kWarpSize);
  const std::int32_t pos = begin + (blockIdx.x * blockDim.x + threadIdx.x) / kWarpSize;
  if (pos >= end) return;
  const index_t i = jlev != nullptr ? jlev[pos] : pos;
  const bool mine = lanes.r < rhs.nr;
  const std::int64_t xcol = std::int64_t(lanes.r) * rhs.ldx;
  // Everything but x before the wait: the row's first entries, its diagonal and b.
  const std::int32_t row_end = L.ptr[i + 1];
  std::int32_t k = L.ptr[i] + lanes.slot;
  const bool first = mine && k < row_end;
  const T a0 = first ? L.val[k] : T(0);
  const index_t c0 = first ? caller_row(L, L.ind[k]) : 0;
  const index_t ui = caller_row(L, i);
  const T bi = mine && lanes.slot == 0 ? rhs.b[ui + std::int64_t(lanes.r) * rhs.ldb] : T(0);
  const T d = L.diag[i];
  wait_for_previous_level();
  T sum = first ? a0 * rhs.x[c0 + xcol] : T(0);
  if (mine)
    for (k += RhsLanes<R>::kSlots; k < row_end; k += RhsLanes<R>::kSlots)
      sum += L.val[k] * rhs.x[caller_row(L, L.ind[k]) + xcol];
  sum = RhsLanes<R>::slot_sum(sum);
  if (mine && lanes.slot == 0) rhs.x[ui + xcol] = (bi - sum) / d;
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
/// (`overlap`, compute capability 9.0). In a graph (desc set) the first level publishes the right-hand side
/// to desc and the second waits for the first to complete.
template <typename T, int R>
void launch_levr(const LowerPart<T>& L, const std::int32_t* jlev, const std::int32_t* level_ptr_host, int nlev,
                 const RhsPass<T>& rhs, RhsPass<T>* desc, bool overlap, cudaStream_t stream) {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.blockDim = dim3(kBlockThreads);
  config.stream = stream;
  config.attrs = &attribute;
  const int first_overlapped = desc != nullptr ? 2 : 1;
  for (int l = 0; l < nlev; ++l) {
    const std::int32_t begin = level_ptr_host[l], end = level_ptr_host[l + 1];
    config.gridDim = dim3(blocks_for(end - begin, kBlockWarps));
    // The first level reads b before its wait: it waits for what came before it in the stream.
    config.numAttrs = overlap && l >= first_overlapped ? 1 : 0;
    const RhsPass<T>* from = desc != nullptr && l > 0 ? desc : nullptr;
    RhsPass<T>* publish = desc != nullptr && l == 0 ? desc : nullptr;
    cuda_check(cudaLaunchKernelEx(&config, levr_kernel<T, R>, L, jlev, begin, end, rhs, from, publish),
               "levr_kernel", __FILE__, __LINE__);
  }
}

template <typename T>
void launch_levr(const LowerPart<T>& L, const std::int32_t* jlev, const std::int32_t* level_ptr_host, int nlev,
                 const RhsPass<T>& rhs, RhsPass<T>* desc, cudaStream_t stream) {
  const bool overlap = cuda_device_major() >= 9;  // programmatic dependent launch
  if (rhs.nr == 1)
    launch_levr<T, 1>(L, jlev, level_ptr_host, nlev, rhs, desc, overlap, stream);
  else
    launch_levr<T, kRhsPerPass>(L, jlev, level_ptr_host, nlev, rhs, desc, overlap, stream);
}

}  // namespace

template <typename T>
LevrGraph<T>::LevrGraph(LevrGraph&& o) noexcept
    : graph_(std::exchange(o.graph_, nullptr)), exec_(std::exchange(o.exec_, nullptr)),
      first_(std::exchange(o.first_, nullptr)) {}

template <typename T>
LevrGraph<T>& LevrGraph<T>::operator=(LevrGraph&& o) noexcept {
  std::swap(graph_, o.graph_);
  std::swap(exec_, o.exec_);
  std::swap(first_, o.first_);
  return *this;
}

template <typename T>
LevrGraph<T>::~LevrGraph() {
  if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
  if (graph_ != nullptr) cudaGraphDestroy(graph_);
}

template <typename T>
void LevrGraph<T>::record(const LowerPart<T>& L, const std::int32_t* jlev, const std::int32_t* level_ptr_host,
                          int nlev, const RhsPass<T>& rhs, RhsPass<T>* desc) {
  // Captured on a stream of its own: the caller's may be the legacy default stream, which cannot be.
  cudaStream_t capture = nullptr;
  cuda_check(cudaStreamCreateWithFlags(&capture, cudaStreamNonBlocking), "cudaStreamCreateWithFlags", __FILE__,
             __LINE__);
  cudaGraph_t graph = nullptr;
  cudaError_t e = cudaStreamBeginCapture(capture, cudaStreamCaptureModeThreadLocal);
  if (e == cudaSuccess) {
    try {
      launch_levr(L, jlev, level_ptr_host, nlev, rhs, desc, capture);
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
  std::size_t roots = 1;
  cudaGraphNode_t first = nullptr;
  e = cudaGraphGetRootNodes(graph, &first, &roots);
  cudaGraphExec_t exec = nullptr;
  if (e == cudaSuccess) e = cudaGraphInstantiate(&exec, graph, 0);
  if (e != cudaSuccess) {
    cudaGraphDestroy(graph);
    cuda_check(e, "instantiating levr's graph", __FILE__, __LINE__);
  }
  graph_ = graph;
  exec_ = exec;
  first_ = first;
}

template <typename T>
void LevrGraph<T>::solve(const LowerPart<T>& L, const std::int32_t* jlev, const std::int32_t* level_ptr_host,
                         int nlev, const RhsPass<T>& rhs, RhsPass<T>* desc, cudaStream_t stream) {
  if (nlev == 0) return;
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  cuda_check(cudaStreamIsCapturing(stream, &capturing), "cudaStreamIsCapturing", __FILE__, __LINE__);
  if (capturing != cudaStreamCaptureStatusNone) {
    launch_levr<T>(L, jlev, level_ptr_host, nlev, rhs, nullptr, stream);
    return;
  }
  if (exec_ == nullptr) record(L, jlev, level_ptr_host, nlev, rhs, desc);
  // This solve's right-hand side into the first level's node.
  LowerPart<T> part = L;
  const std::int32_t* levels = jlev;
  std::int32_t begin = level_ptr_host[0], end = level_ptr_host[1];
  RhsPass<T> pass = rhs;
  const RhsPass<T>* from = nullptr;
  RhsPass<T>* publish = desc;
  void* args[] = {&part, &levels, &begin, &end, &pass, &from, &publish};
  cudaKernelNodeParams params{};
  params.func = rhs.nr == 1 ? reinterpret_cast<void*>(levr_kernel<T, 1>)
                            : reinterpret_cast<void*>(levr_kernel<T, kRhsPerPass>);
  params.gridDim = dim3(blocks_for(end - begin, kBlockWarps));
  params.blockDim = dim3(kBlockThreads);
  params.kernelParams = args;
  cuda_check(cudaGraphExecKernelNodeSetParams(exec_, first_, &params), "cudaGraphExecKernelNodeSetParams",
             __FILE__, __LINE__);
  cuda_check(cudaGraphLaunch(exec_, stream), "cudaGraphLaunch", __FILE__, __LINE__);
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
