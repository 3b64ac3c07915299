// Iterative refinement with an LU factor (include/spade/lu.hpp): classical refinement with the factor first
// (solve_refined of solve.hpp), then, where perturbed pivots keep it above its tolerance, classical
// refinement again with the solve corrected for those pivots (LuCorrection): the factor is of A plus a
// matrix of rank at most the number of replaced pivots, which refinement with the factor alone does not
// remove when the replacements are large against A's own pivots.
#include <algorithm>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "../core/out_of_memory.hpp"
#include "refine_loop.hpp"
#include "spade/error.hpp"
#include "spade/lu.hpp"

namespace spade {

RefinementResult lu_solve_refined(const SparseMatrix& A, const LuFactor& F, const double* B, index_t ldb, double* X,
                                  index_t ldx, index_t nrhs, Transpose trans, const RefineOptions& options,
                                  const LuCorrection* correction) {
  const index_t n = F.symbolic().n;
  if (A.rows() != n || A.cols() != n)
    throw InvalidInput("solve_refined: A is " + std::to_string(A.rows()) + " x " + std::to_string(A.cols()) +
                       " but the factor is of order " + std::to_string(n));
  if (correction && !correction->built_for(F))
    throw InvalidInput("solve_refined: the correction was built for another factor or an earlier factorization");
  return out_of_memory_is_resource_error("solve_refined", [&] {
    const SolveFunction solve = [&F, trans](double* Y, index_t k, index_t ld) { lu_solve_in_place(F, Y, k, ld, trans); };
    const SparseMatrix At = trans == Transpose::yes ? A.transpose() : SparseMatrix();
    const SparseMatrix& M = trans == Transpose::yes ? At : A;  // the matrix of the system solved
    RefinementResult result = solve_refined(M, solve, B, ldb, X, ldx, nrhs, options);
    const int used = static_cast<int>(result.steps.size()) - 1;
    if (result.converged || used >= options.max_steps) return result;
    std::optional<LuCorrection> built;
    if (!correction) {
      if (!LuCorrection::worthwhile(F)) return result;
      correction = &built.emplace(F);
    }
    if (correction->rank() == 0) return result;

    // The corrected stage starts afresh from B: its first solve is one of the steps left. The better of the
    // two stages' solutions is kept.
    const std::size_t ld = static_cast<std::size_t>(std::max<index_t>(n, 1));
    std::vector<double> first(ld * nrhs);
    for (index_t c = 0; c < nrhs; ++c)
      std::copy(X + static_cast<offset_t>(c) * ldx, X + static_cast<offset_t>(c) * ldx + n, first.begin() + c * ld);
    const SolveFunction corrected = [&F, correction, trans](double* Y, index_t k, index_t ldy) {
      correction->solve_in_place(F, Y, k, ldy, trans);
    };
    RefineOptions rest = options;
    rest.max_steps = options.max_steps - used - 1;
    if (!merge_corrected_stage(result, solve_refined(M, corrected, B, ldb, X, ldx, nrhs, rest)))
      for (index_t c = 0; c < nrhs; ++c)
        std::copy(first.begin() + c * ld, first.begin() + c * ld + n, X + static_cast<offset_t>(c) * ldx);
    return result;
  });
}

}  // namespace spade
