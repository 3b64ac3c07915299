// The problems of the LU benchmarks (bench_lu on the host, bench_lu_solve on the GPU): the default set and
// the problem behind a name.
#pragma once

#include <cstdio>
#include <functional>
#include <string>

#include "spade/generators.hpp"
#include "spade/matrix_market.hpp"
#include "spade/sparse_matrix.hpp"
#include "../tests/test_matrices.hpp"

namespace spade::bench {

/// Every square, real-valued unsymmetric or symmetric indefinite matrix of ../shared/matrices (its
/// README.md) with more than 50,000 nonzeros in the full matrix: basker_matrix1 (unsymmetric, 288,510),
/// bayer10 (unsymmetric, 94,926), c-62 (symmetric indefinite, 559,343), ex14 (numerically symmetric with zero
/// diagonal entries, stored general, 66,775).
inline const char* const kLuMatrices[] = {"basker_matrix1", "bayer10", "c-62", "ex14"};

/// The generated operators of the default set: the 2D 1024^2 and 3D 64^3 upwind convection-diffusion.
inline const char* const kLuGenerated[] = {"cd2d_1024", "cd3d_64"};

/// Wind of the generated operators, in grid units (convection_diffusion_2d/3d): a cell Peclet number of 1
/// along x, smaller along the other axes.
constexpr double kWindX = 1.0, kWindY = 0.5, kWindZ = 0.25;

struct Problem {
  std::string name;
  bool generated = false;
  std::function<spade::SparseMatrix()> make;
};

/// A problem by name: cdNd_M is the generated N-dimensional operator on an M^N grid (N = 2 or 3); any other
/// name is the file NAME.mtx.gz of the matrix folder (tests/test_matrices.hpp: SPADE_MATRICES, else the
/// shared/matrices folder beside the source tree).
inline Problem problem_named(const std::string& name) {
  int size = 0;
  char tail = 0;
  if (std::sscanf(name.c_str(), "cd2d_%d%c", &size, &tail) == 1 && size > 0)
    return {name, true, [size] { return spade::convection_diffusion_2d(size, size, kWindX, kWindY); }};
  if (std::sscanf(name.c_str(), "cd3d_%d%c", &size, &tail) == 1 && size > 0)
    return {name, true, [size] { return spade::convection_diffusion_3d(size, size, size, kWindX, kWindY, kWindZ); }};
  return {name, false, [name] { return spade::read_matrix_market(spade::testing::matrix_path(name + ".mtx.gz")); }};
}

}  // namespace spade::bench
