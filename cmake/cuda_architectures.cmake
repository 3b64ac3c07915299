# The CUDA architectures, before project() tests the CUDA compiler with them.
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES 90)  # H100 / H200 (sm_90)
endif()

# The GPU kernels need sm_70 or newer (independent thread scheduling, kernels/sync.cuh); the project's
# default is sm_90 (H100/H200). A user may set any list of architectures of sm_70 and newer that the CUDA
# compiler supports (nvcc 13 starts at sm_75), e.g. -DCMAKE_CUDA_ARCHITECTURES="80;90" or "75-virtual" for
# PTX that the driver compiles for newer GPUs. A GPU that none of them runs on fails when the GPU
# solve launches its first kernel (a CUDA error).
foreach(arch IN LISTS CMAKE_CUDA_ARCHITECTURES)
  if(arch MATCHES "^([0-9]+)" AND CMAKE_MATCH_1 LESS 70)
    message(FATAL_ERROR "CMAKE_CUDA_ARCHITECTURES names ${arch}; spade's GPU kernels need sm_70 or newer")
  elseif(arch STREQUAL "all" OR arch STREQUAL "all-major")
    message(FATAL_ERROR "CMAKE_CUDA_ARCHITECTURES=${arch} includes architectures older than sm_70, which "
                        "spade's GPU kernels do not support; list them, e.g. \"75;80;86;89;90\"")
  endif()
endforeach()
