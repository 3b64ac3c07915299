// The errors of an LU's low-rank correction, the host's (LuCorrection, lu.hpp) and the GPU's
// (GpuLuCorrection, gpu_solve.hpp), in one wording; internal header of solve/.
#pragma once

#include <string>

#include "../core/messages.hpp"
#include "spade/error.hpp"
#include "spade/sparse_matrix.hpp"

namespace spade {

/// K, the correction of k replaced pivots, is exactly singular at the pivot of A's column `col`: so is A.
inline NumericalError correction_singular(index_t k, index_t col) {
  return NumericalError(NumericalError::Kind::singular, col,
                        "solve: A is numerically singular: the correction of its " + std::to_string(k) +
                            " replaced pivots is exactly singular at the pivot of " + column_name(col));
}

/// A solve with the factor overflowed at `index` while doing `what`.
inline NumericalError correction_overflow(index_t index, const char* what) {
  return NumericalError(NumericalError::Kind::not_finite, index,
                        std::string("solve: ") + what + " overflowed: the LU factor's growth is too large");
}

}  // namespace spade
