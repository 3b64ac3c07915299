// Generated test problems on regular grids with Dirichlet boundaries: Laplacians (symmetric positive
// definite), as used by the sparse triangular-solve literature (Li 2017) and spade's default demo, and
// convection-diffusion operators with first-order upwind convection (unsymmetric M-matrices), the LU's
// generated benchmark problems.
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

/// -Laplace(u) + w . grad(u) on an nx * ny grid of unit spacing (numbering as laplacian_2d): the five-point
/// Laplacian plus the first-order upwind difference of the convection term, wind w = (wx, wy) in grid units
/// (the cell Peclet number along each axis: velocity * spacing / diffusion coefficient). Row i of node
/// (x, y): A(i, i) = 4 + |wx| + |wy|; the neighbour at x - 1 has -1 - max(wx, 0), at x + 1 has
/// -1 - max(-wx, 0), and the same along y with wy. With a nonzero wind A is unsymmetric (its pattern is
/// symmetric); for any wind it is an irreducibly diagonally dominant M-matrix (off-diagonals <= 0, every row
/// and column sum >= 0 and > 0 next to the boundary), so nonsingular, and upwinding keeps it so for any
/// Peclet number. Zero wind gives laplacian_2d. Throws InvalidInput for a non-positive size or a NaN/Inf
/// wind, ResourceError as laplacian_2d.
SparseMatrix convection_diffusion_2d(index_t nx, index_t ny, double wx, double wy);

/// The 3D operator of convection_diffusion_2d on an nx * ny * nz grid (numbering as laplacian_3d): the
/// seven-point Laplacian, A(i, i) = 6 + |wx| + |wy| + |wz|, the upwind neighbour along each axis k with
/// -1 - |w_k|, the other with -1. Same properties and errors.
SparseMatrix convection_diffusion_3d(index_t nx, index_t ny, index_t nz, double wx, double wy, double wz);

}  // namespace spade
