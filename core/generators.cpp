// Grid Laplacians and upwind convection-diffusion operators (see include/spade/generators.hpp). The CSC
// arrays are written column by column: the
// neighbours of node (x, y, z) are visited in lexicographic (dz, dy, dx) order, which is increasing node
// order, so every column comes out sorted without a triplet sort.
#include "spade/generators.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <new>
#include <string>

#include "spade/error.hpp"

namespace spade {
namespace {

/// Whether the stencil couples a node to its neighbour at offset (dx, dy, dz), each in {-1, 0, 1}.
bool in_stencil(Stencil stencil, int dx, int dy, int dz) {
  const int distance = std::abs(dx) + std::abs(dy) + std::abs(dz);
  switch (stencil) {
    case Stencil::five_point:
    case Stencil::seven_point:
      return distance == 1;
    case Stencil::nine_point:
    case Stencil::twenty_seven_point:
      return distance >= 1;
  }
  return false;
}

/// Neighbours of an interior node, the diagonal entry of every row.
int stencil_neighbours(Stencil stencil) {
  switch (stencil) {
    case Stencil::five_point: return 4;
    case Stencil::nine_point: return 8;
    case Stencil::seven_point: return 6;
    case Stencil::twenty_seven_point: return 26;
  }
  return 0;
}

/// Number of stored entries: the number of (node, neighbour-or-self) pairs inside the grid. Along one axis of
/// length m there are m self pairs and 2 (m - 1) neighbour pairs; full boxes multiply those counts.
std::int64_t count_entries(Stencil stencil, std::int64_t nx, std::int64_t ny, std::int64_t nz) {
  const std::int64_t n = nx * ny * nz;
  switch (stencil) {
    case Stencil::five_point:
    case Stencil::seven_point:  // nz = 1 for five_point, so its z term vanishes
      return n + 2 * ((nx - 1) * ny * nz + nx * (ny - 1) * nz + nx * ny * (nz - 1));
    case Stencil::nine_point:
    case Stencil::twenty_seven_point:
      return (3 * nx - 2) * (3 * ny - 2) * (3 * nz - 2);
  }
  return 0;
}

/// The nx * ny * nz grid Laplacian plus the first-order upwind convection term of `wind` (wind[k] along axis
/// k, 0 for a Laplacian; only with five_point or seven_point); `who` names the public function in messages,
/// and a 2D grid has nz = 1 and wind[2] = 0.
SparseMatrix grid_operator(const std::string& who, bool three_d, std::int64_t nx, std::int64_t ny, std::int64_t nz,
                           Stencil stencil, const std::array<double, 3>& wind) {
  constexpr std::int64_t max_index = std::numeric_limits<index_t>::max();
  const std::string grid =
      std::to_string(nx) + " x " + std::to_string(ny) + (three_d ? " x " + std::to_string(nz) : std::string());
  if (nx <= 0 || ny <= 0 || nz <= 0) throw InvalidInput(who + ": grid sizes must be positive, got " + grid);
  // Each size is below 2^31, so nx * ny fits in 64 bits; test before multiplying by nz.
  if (nx * ny > max_index || nx * ny * nz > max_index)
    throw ResourceError(who + ": a " + grid + " grid has more than " + std::to_string(max_index) +
                        " nodes (32-bit indices)");
  const std::int64_t n = nx * ny * nz;
  const std::int64_t nnz = count_entries(stencil, nx, ny, nz);  // at most 27 n: no overflow
  // Dirichlet: the same diagonal on the boundary. Upwinding adds |wind[k]| to the diagonal and to the
  // coupling with the upstream neighbour along axis k.
  const double diagonal = stencil_neighbours(stencil) + std::abs(wind[0]) + std::abs(wind[1]) + std::abs(wind[2]);

  std::vector<offset_t> col_ptr;
  std::vector<index_t> row_ind;
  std::vector<double> values;
  try {
    col_ptr.resize(static_cast<std::size_t>(n) + 1);
    row_ind.resize(static_cast<std::size_t>(nnz));
    values.resize(static_cast<std::size_t>(nnz));
  } catch (const std::bad_alloc&) {
    throw ResourceError(who + ": out of memory for " + std::to_string(n) + " rows and " +
                        std::to_string(nnz) + " entries");
  }
  offset_t p = 0;
  col_ptr[0] = 0;
  for (std::int64_t z = 0; z < nz; ++z)
    for (std::int64_t y = 0; y < ny; ++y)
      for (std::int64_t x = 0; x < nx; ++x) {
        const std::int64_t j = x + nx * (y + ny * z);
        for (int dz = -1; dz <= 1; ++dz) {
          if (z + dz < 0 || z + dz >= nz) continue;
          for (int dy = -1; dy <= 1; ++dy) {
            if (y + dy < 0 || y + dy >= ny) continue;
            for (int dx = -1; dx <= 1; ++dx) {
              if (x + dx < 0 || x + dx >= nx) continue;
              const bool self = dx == 0 && dy == 0 && dz == 0;
              if (!self && !in_stencil(stencil, dx, dy, dz)) continue;
              // Row i = j + offset has column j as its neighbour at -offset, upstream along the offset's
              // axis when the wind blows the offset's way: A(i, j) = -1 - max(d * wind[k], 0), d = +-1.
              const double upwind = dx != 0 ? dx * wind[0] : dy != 0 ? dy * wind[1] : dz * wind[2];
              row_ind[p] = static_cast<index_t>(j + dx + nx * (dy + ny * dz));
              values[p] = self ? diagonal : -1.0 - std::max(upwind, 0.0);
              ++p;
            }
          }
        }
        col_ptr[j + 1] = p;
      }
  return SparseMatrix(static_cast<index_t>(n), static_cast<index_t>(n), std::move(col_ptr), std::move(row_ind),
                      std::move(values));
}

}  // namespace

SparseMatrix laplacian_2d(index_t nx, index_t ny, Stencil stencil) {
  if (stencil != Stencil::five_point && stencil != Stencil::nine_point)
    throw InvalidInput("laplacian_2d: stencil must be five_point or nine_point");
  return grid_operator("laplacian_2d", false, nx, ny, 1, stencil, {0.0, 0.0, 0.0});
}

SparseMatrix laplacian_3d(index_t nx, index_t ny, index_t nz, Stencil stencil) {
  if (stencil != Stencil::seven_point && stencil != Stencil::twenty_seven_point)
    throw InvalidInput("laplacian_3d: stencil must be seven_point or twenty_seven_point");
  return grid_operator("laplacian_3d", true, nx, ny, nz, stencil, {0.0, 0.0, 0.0});
}

SparseMatrix convection_diffusion_2d(index_t nx, index_t ny, double wx, double wy) {
  if (!std::isfinite(wx) || !std::isfinite(wy))
    throw InvalidInput("convection_diffusion_2d: the wind must be finite, got (" + std::to_string(wx) + ", " +
                       std::to_string(wy) + ")");
  return grid_operator("convection_diffusion_2d", false, nx, ny, 1, Stencil::five_point, {wx, wy, 0.0});
}

SparseMatrix convection_diffusion_3d(index_t nx, index_t ny, index_t nz, double wx, double wy, double wz) {
  if (!std::isfinite(wx) || !std::isfinite(wy) || !std::isfinite(wz))
    throw InvalidInput("convection_diffusion_3d: the wind must be finite, got (" + std::to_string(wx) + ", " +
                       std::to_string(wy) + ", " + std::to_string(wz) + ")");
  return grid_operator("convection_diffusion_3d", true, nx, ny, nz, Stencil::seven_point, {wx, wy, wz});
}

}  // namespace spade
