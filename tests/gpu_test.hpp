// Shared by the GPU tests: skip visibly when no CUDA device is present (CI has none).
#pragma once

#include <gtest/gtest.h>

#include "../kernels/cuda_check.hpp"

#define SPADE_REQUIRE_GPU()                                                                  \
  do {                                                                                       \
    if (!::spade::cuda_device_available())                                                   \
      GTEST_SKIP() << "no CUDA device on this machine: GPU test skipped (run on the device)"; \
  } while (0)
