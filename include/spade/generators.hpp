// Generated test problems: Laplacians on regular grids with Dirichlet boundaries (symmetric positive
// definite), as used by the sparse triangular-solve literature (Li 2017) and spade's default demo.
#pragma once

#include "spade/sparse_matrix.hpp"

namespace spade {

enum class Stencil {
  five_point,         ///< 2D: diagonal 4, -1 for each of the 4 edge neighbours inside the grid
  nine_point,         ///< 2D: diagonal 8, -1 for each of the 8 neighbours (edges and corners)
  seven_point,        ///< 3D: diagonal 6, -1 for each of the 6 face neighbours
  twenty_seven_point  ///< 3D: diagonal 26, -1 for each of the 26 neighbours
};

/// nx * ny grid, natural (x fastest) numbering: node (x, y) is x + nx * y. Stencil five_point or
/// nine_point. Throws InvalidInput for a 3D stencil or a non-positive size, ResourceError when nx * ny or
/// the number of entries overflows the index types.
SparseMatrix laplacian_2d(index_t nx, index_t ny, Stencil stencil = Stencil::five_point);

/// nx * ny * nz grid, node (x, y, z) is x + nx * (y + ny * z). Stencil seven_point or twenty_seven_point.
/// Same errors as laplacian_2d.
SparseMatrix laplacian_3d(index_t nx, index_t ny, index_t nz, Stencil stencil = Stencil::seven_point);

}  // namespace spade
