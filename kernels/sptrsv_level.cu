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
#include <vector>

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

/// One level. One right-hand side: b and x are the caller's. Several (R > 1): b and x are one array y of
/// the R values of each unknown side by side (value r of the caller's unknown u at u * R + r), so that
/// the R lanes reading one entry's column read one segment of R values instead of one in each of R
/// columns; y is gathered from b before the first level and scattered to x after the last (launch_levr).
template <typename T, int R>
__global__ void levr_kernel(LowerPart<T> L, const std::int32_t* jlev, std::int32_t begin, std::int32_t end,
                            RhsPass<T> rhs) {
  start_next_level();
  const RhsLanes<R> lanes(threadIdx.x % kWarpSize);
  const std::int32_t pos = begin + (blockIdx.x * blockDim.x + threadIdx.x) / kWarpSize;
  if (pos >= end) return;
  const index_t i = jlev != nullptr ? jlev[pos] : pos;
  const bool mine = lanes.r < rhs.nr;
  // Value r of unknown u at u * stride + xcol (b: + bcol).
  constexpr int stride = R > 1 ? R : 1;
  const std::int64_t xcol = R > 1 ? lanes.r : std::int64_t(lanes.r) * rhs.ldx;
  const std::int64_t bcol = R > 1 ? lanes.r : std::int64_t(lanes.r) * rhs.ldb;
  // Everything but x before the wait: the row's first entries, its diagonal and b.
  const std::int32_t row_end = L.ptr[i + 1];
  std::int32_t k = L.ptr[i] + lanes.slot;
  const bool first = mine && k < row_end;
  const T a0 = first ? L.val[k] : T(0);
  const std::int64_t c0 = first ? caller_row(L, L.ind[k]) : 0;
  const std::int64_t ui = caller_row(L, i);
  const T bi = mine && lanes.slot == 0 ? rhs.b[ui * stride + bcol] : T(0);
  const T d = L.diag[i];
  wait_for_previous_level();
  T sum = first ? a0 * rhs.x[c0 * stride + xcol] : T(0);
  if (mine)
    for (k += RhsLanes<R>::kSlots; k < row_end; k += RhsLanes<R>::kSlots)
      sum += L.val[k] * rhs.x[std::int64_t(caller_row(L, L.ind[k])) * stride + xcol];
  sum = RhsLanes<R>::slot_sum(sum);
  if (mine && lanes.slot == 0) rhs.x[ui * stride + xcol] = (bi - sum) / d;
}

/// y[u * R + r] := b[u + r * ldb] (0 for r >= nr), for the caller's unknowns u < n.
template <typename T, int R>
__global__ void gather_rhs_kernel(index_t n, RhsPass<T> rhs, T* y) {
  const std::int64_t t = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
  if (t >= std::int64_t(n) * R) return;
  const std::int64_t u = t / R;
  const int r = int(t % R);
  y[t] = r < rhs.nr ? rhs.b[u + std::int64_t(r) * rhs.ldb] : T(0);
}

/// x[u + r * ldx] := y[u * R + r] for r < nr.
template <typename T, int R>
__global__ void scatter_x_kernel(index_t n, const T* y, RhsPass<T> rhs) {
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
/// (`overlap`, compute capability 9.0); several right-hand sides gathered into y (n * R) before the first
/// level and scattered from it after the last.
template <typename T, int R>
void launch_levr(const LowerPart<T>& L, const std::int32_t* jlev, const std::int32_t* level_ptr_host, int nlev,
                 const RhsPass<T>& rhs, T* y, bool overlap, cudaStream_t stream) {
  const int copy_blocks = blocks_for(std::int64_t(L.n) * R, kBlockThreads);
  RhsPass<T> pass = rhs;
  if (R > 1) {
    gather_rhs_kernel<T, R><<<copy_blocks, kBlockThreads, 0, stream>>>(L.n, rhs, y);
    check_launch("gather_rhs_kernel");
    pass = RhsPass<T>{y, R, y, R, R};
  }
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.blockDim = dim3(kBlockThreads);
  config.stream = stream;
  config.attrs = &attribute;
  for (int l = 0; l < nlev; ++l) {
    const std::int32_t begin = level_ptr_host[l], end = level_ptr_host[l + 1];
    config.gridDim = dim3(blocks_for(end - begin, kBlockWarps));
    // The first level reads b before its wait: it waits for what came before it in the stream.
    config.numAttrs = overlap && l > 0 ? 1 : 0;
    cuda_check(cudaLaunchKernelEx(&config, levr_kernel<T, R>, L, jlev, begin, end, pass), "levr_kernel", __FILE__,
               __LINE__);
  }
  if (R > 1) {
    scatter_x_kernel<T, R><<<copy_blocks, kBlockThreads, 0, stream>>>(L.n, y, rhs);
    check_launch("scatter_x_kernel");
  }
}

template <typename T>
void launch_levr(const LowerPart<T>& L, const std::int32_t* jlev, const std::int32_t* level_ptr_host, int nlev,
                 const RhsPass<T>& rhs, T* y, cudaStream_t stream) {
  const bool overlap = cuda_device_major() >= 9;  // programmatic dependent launch
  if (rhs.nr == 1)
    launch_levr<T, 1>(L, jlev, level_ptr_host, nlev, rhs, y, overlap, stream);
  else
    launch_levr<T, kRhsPerPass>(L, jlev, level_ptr_host, nlev, rhs, y, overlap, stream);
}

/// The node that depends on `node` in a chain (one dependent at most). The edge's data is asked for too:
/// without it the query fails on a programmatic edge.
cudaGraphNode_t next_in_chain(cudaGraphNode_t node) {
  cudaGraphNode_t next = nullptr;
  std::size_t count = 1;
#if CUDART_VERSION >= 13000
  cudaGraphEdgeData edge{};
  cuda_check(cudaGraphNodeGetDependentNodes(node, &next, &edge, &count), "cudaGraphNodeGetDependentNodes",
             __FILE__, __LINE__);
#elif CUDART_VERSION >= 12030
  cudaGraphEdgeData edge{};
  cuda_check(cudaGraphNodeGetDependentNodes_v2(node, &next, &edge, &count), "cudaGraphNodeGetDependentNodes",
             __FILE__, __LINE__);
#else
  cuda_check(cudaGraphNodeGetDependentNodes(node, &next, &count), "cudaGraphNodeGetDependentNodes", __FILE__,
             __LINE__);
#endif
  return count == 0 ? nullptr : next;
}

template <typename T>
bool same_pass(const RhsPass<T>& a, const RhsPass<T>& b) {
  return a.b == b.b && a.ldb == b.ldb && a.x == b.x && a.ldx == b.ldx && a.nr == b.nr;
}

}  // namespace

template <typename T>
LevrGraph<T>::~LevrGraph() {
  if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
  if (graph_ != nullptr) cudaGraphDestroy(graph_);
}

template <typename T>
void LevrGraph<T>::record(const LowerPart<T>& L, const std::int32_t* jlev, const std::int32_t* level_ptr_host,
                          int nlev, const RhsPass<T>& rhs, T* y) {
  // Captured on a stream of its own: the caller's may be the legacy default stream, which cannot be.
  cudaStream_t capture = nullptr;
  cuda_check(cudaStreamCreateWithFlags(&capture, cudaStreamNonBlocking), "cudaStreamCreateWithFlags", __FILE__,
             __LINE__);
  cudaGraph_t graph = nullptr;
  cudaError_t e = cudaStreamBeginCapture(capture, cudaStreamCaptureModeThreadLocal);
  if (e == cudaSuccess) {
    try {
      launch_levr(L, jlev, level_ptr_host, nlev, rhs, y, capture);
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
  std::vector<cudaGraphNode_t> nodes(std::size_t(nlev) + (rhs.nr > 1 ? 2 : 0), nullptr);
  try {
    std::size_t roots = 1;
    cuda_check(cudaGraphGetRootNodes(graph, nodes.data(), &roots), "cudaGraphGetRootNodes", __FILE__, __LINE__);
    for (std::size_t l = 1; l < nodes.size(); ++l) nodes[l] = next_in_chain(nodes[l - 1]);
    cuda_check(cudaGraphInstantiate(&exec, graph, 0), "instantiating levr's graph", __FILE__, __LINE__);
  } catch (...) {
    cudaGraphDestroy(graph);
    throw;
  }
  graph_ = graph;
  exec_ = exec;
  nodes_ = std::move(nodes);
  recorded_ = rhs;
}

template <typename T>
void LevrGraph<T>::retarget(const LowerPart<T>& L, const std::int32_t* jlev, const std::int32_t* level_ptr_host,
                            const RhsPass<T>& rhs, T* y) {
  RhsPass<T> pass = rhs;
  cudaKernelNodeParams params{};
  params.blockDim = dim3(kBlockThreads);
  auto set = [&](cudaGraphNode_t node) {
    cuda_check(cudaGraphExecKernelNodeSetParams(exec_, node, &params), "cudaGraphExecKernelNodeSetParams",
               __FILE__, __LINE__);
  };
  if (rhs.nr > 1) {  // the levels work on y: only the gather and the scatter see the caller's arrays
    constexpr int R = kRhsPerPass;
    index_t n = L.n;
    T* values = y;
    params.gridDim = dim3(blocks_for(std::int64_t(n) * R, kBlockThreads));
    void* gather_args[] = {&n, &pass, &values};
    params.func = reinterpret_cast<void*>(gather_rhs_kernel<T, R>);
    params.kernelParams = gather_args;
    set(nodes_.front());
    void* scatter_args[] = {&n, &values, &pass};
    params.func = reinterpret_cast<void*>(scatter_x_kernel<T, R>);
    params.kernelParams = scatter_args;
    set(nodes_.back());
  } else {
    LowerPart<T> part = L;
    const std::int32_t* order = jlev;
    std::int32_t begin = 0, end = 0;
    void* args[] = {&part, &order, &begin, &end, &pass};
    params.func = reinterpret_cast<void*>(levr_kernel<T, 1>);
    params.kernelParams = args;
    for (std::size_t l = 0; l < nodes_.size(); ++l) {
      begin = level_ptr_host[l];
      end = level_ptr_host[l + 1];
      params.gridDim = dim3(blocks_for(end - begin, kBlockWarps));
      set(nodes_[l]);
    }
  }
  recorded_ = rhs;
}

template <typename T>
void LevrGraph<T>::solve(const LowerPart<T>& L, const std::int32_t* jlev, const std::int32_t* level_ptr_host,
                         int nlev, const RhsPass<T>& rhs, T* y, cudaStream_t stream) {
  if (nlev == 0) return;
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  cuda_check(cudaStreamIsCapturing(stream, &capturing), "cudaStreamIsCapturing", __FILE__, __LINE__);
  if (capturing != cudaStreamCaptureStatusNone) {
    launch_levr(L, jlev, level_ptr_host, nlev, rhs, y, stream);
    return;
  }
  if (exec_ == nullptr)
    record(L, jlev, level_ptr_host, nlev, rhs, y);
  else if (!same_pass(rhs, recorded_))
    retarget(L, jlev, level_ptr_host, rhs, y);
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
