// CHOLMOD (SuiteSparse) as the reference that tests and benchmarks compare spade with. Not part of the
// spade library: only tests/ and drivers/ link it.
#pragma once

#include <memory>
#include <vector>

#include "spade/sparse_matrix.hpp"

namespace spade::testing {

/// CHOLMOD's supernodal Cholesky of a symmetric positive definite A (both triangles stored; CHOLMOD reads
/// the lower one), with CHOLMOD's default ordering choice (AMD, and METIS when AMD's fill is high).
/// Throws spade::NumericalError if CHOLMOD finds A not positive definite, spade::ResourceError on other
/// CHOLMOD failures.
class CholmodReference {
 public:
  explicit CholmodReference(const SparseMatrix& A);
  ~CholmodReference();
  CholmodReference(const CholmodReference&) = delete;
  CholmodReference& operator=(const CholmodReference&) = delete;

  void analyze();    ///< cholmod_analyze (ordering + symbolic)
  void factorize();  ///< cholmod_factorize (numeric; analyze first)
  /// cholmod_solve(CHOLMOD_A) of an n x nrhs column-major B (leading dimension n); returns X.
  std::vector<double> solve(const std::vector<double>& B, int nrhs);
  double nnz_l() const;  ///< entries of L as CHOLMOD stores it
  double flops() const;  ///< CHOLMOD's flop count of the factorization (Common->fl)

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace spade::testing
