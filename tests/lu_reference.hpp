// UMFPACK and KLU (SuiteSparse) as the references that the LU's tests and benchmark compare spade with. Not
// part of the spade library: only tests/ and drivers/ link them.
#pragma once

#include <memory>
#include <vector>

#include "spade/sparse_matrix.hpp"

namespace spade::testing {

/// A sparse LU of a square A (CSC, 0-based, host memory) by one of the references, with its phases apart:
/// analyze() (ordering and symbolic analysis), factorize() (numeric; after analyze), solve() of A X = B for
/// an n x nrhs column-major B (leading dimension n), returning X. The library's default parameters
/// (UMFPACK: its ordering strategy and two refinement steps inside solve; KLU: AMD with BTF).
/// Throws spade::NumericalError when the library finds A singular, spade::ResourceError on its other failures.
class LuReference {
 public:
  enum class Library { umfpack, klu };
  LuReference(Library library, const SparseMatrix& A);
  ~LuReference();
  LuReference(const LuReference&) = delete;
  LuReference& operator=(const LuReference&) = delete;

  void analyze();
  void factorize();
  std::vector<double> solve(const std::vector<double>& B, int nrhs);

  /// The library's own estimate of the numeric factorization's floating-point operations, after analyze():
  /// UMFPACK's Info[UMFPACK_FLOPS_ESTIMATE] (an upper bound computed before its numeric pivoting), KLU's
  /// Symbolic->est_flops (AMD's count, summed over the BTF blocks). Negative when the library gives none.
  double estimated_flops() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace spade::testing
