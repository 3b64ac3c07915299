// The C interface (include/spade/spade.h): handles around spade::Solver, options translated to
// SolverOptions, and every C++ exception turned into a status code and the calling thread's last error.
#include "spade/spade.h"

#include <cmath>
#include <cstdint>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "spade/error.hpp"
#include "spade/solver.hpp"

// An analysis owns the Solver (the facade owns every phase); its factor is a view of that Solver's factor.
struct spade_analysis {
  explicit spade_analysis(const spade::SolverOptions& options) : solver(options) {}
  spade::Solver solver;
  bool has_factor = false;  // a spade_factor handle is alive
};

struct spade_factor {
  spade_analysis* analysis = nullptr;
};

namespace {

struct LastError {
  std::string message;
  std::int64_t column = -1;
  spade_numerical_kind kind = SPADE_NUMERICAL_NONE;
};
thread_local LastError last_error;

spade_status fail(spade_status status, const std::string& message, std::int64_t column = -1,
                  spade_numerical_kind kind = SPADE_NUMERICAL_NONE) {
  last_error.message = message;
  last_error.column = column;
  last_error.kind = kind;
  return status;
}

spade_numerical_kind to_c(spade::NumericalError::Kind kind) {
  switch (kind) {
    case spade::NumericalError::Kind::not_positive_definite: return SPADE_NOT_POSITIVE_DEFINITE;
    case spade::NumericalError::Kind::singular: return SPADE_SINGULAR;
    case spade::NumericalError::Kind::not_finite: return SPADE_NOT_FINITE;
    case spade::NumericalError::Kind::no_progress: return SPADE_NO_PROGRESS;
  }
  return SPADE_NUMERICAL_NONE;
}

/// Runs f() and maps what it throws to a status (the three tiers of spade/error.hpp).
template <typename F>
spade_status guarded(F&& f) noexcept {
  try {
    f();
    return SPADE_SUCCESS;
  } catch (const spade::InvalidInput& e) {
    return fail(SPADE_INVALID_INPUT, e.what());
  } catch (const spade::NumericalError& e) {
    return fail(SPADE_NUMERICAL_ERROR, e.what(), e.index(), to_c(e.kind()));
  } catch (const spade::ResourceError& e) {
    return fail(SPADE_RESOURCE_ERROR, e.what());
  } catch (const std::bad_alloc&) {
    return fail(SPADE_RESOURCE_ERROR, "out of memory");
  } catch (const std::exception& e) {
    return fail(SPADE_INTERNAL_ERROR, e.what());
  } catch (...) {
    return fail(SPADE_INTERNAL_ERROR, "an unknown C++ exception");
  }
}

void require(bool ok, const char* function, const char* what) {
  if (!ok) throw spade::InvalidInput(std::string(function) + ": " + what);
}

spade::SolverOptions to_solver_options(const spade_options& o) {
  spade::SolverOptions options;
  switch (o.ordering) {
    case SPADE_ORDERING_AUTO: break;
    case SPADE_ORDERING_AMD: options.analyze.ordering = spade::OrderingMethod::amd; break;
    case SPADE_ORDERING_METIS: options.analyze.ordering = spade::OrderingMethod::metis; break;
    case SPADE_ORDERING_COLAMD: options.analyze.ordering = spade::OrderingMethod::colamd; break;
    case SPADE_ORDERING_NATURAL: options.analyze.ordering = spade::OrderingMethod::natural; break;
    default: throw spade::InvalidInput("spade_analyze: options->ordering " + std::to_string(o.ordering) + " is not a spade_ordering");
  }
  switch (o.placement) {
    case SPADE_PLACEMENT_AUTO: options.placement = spade::Placement::automatic; break;
    case SPADE_PLACEMENT_GPU: options.placement = spade::Placement::gpu; break;
    case SPADE_PLACEMENT_CPU: options.placement = spade::Placement::cpu; break;
    default: throw spade::InvalidInput("spade_analyze: options->placement " + std::to_string(o.placement) + " is not a spade_placement");
  }
  switch (o.refine_corrections) {
    case SPADE_CORRECTIONS_AUTO: options.refine.corrections = spade::CorrectionPrecision::automatic; break;
    case SPADE_CORRECTIONS_FP32: options.refine.corrections = spade::CorrectionPrecision::fp32; break;
    case SPADE_CORRECTIONS_FP64: options.refine.corrections = spade::CorrectionPrecision::fp64; break;
    default:
      throw spade::InvalidInput("spade_analyze: options->refine_corrections " + std::to_string(o.refine_corrections) +
                                " is not a spade_corrections");
  }
  require(o.threads >= 0, "spade_analyze", "options->threads must be >= 0");
  require(o.refine_max_steps >= 0, "spade_analyze", "options->refine_max_steps must be >= 0");
  require(std::isfinite(o.refine_tolerance) && o.refine_tolerance >= 0, "spade_analyze",
          "options->refine_tolerance must be finite and >= 0");
  options.threads = o.threads;
  options.refine.max_steps = o.refine_max_steps;
  options.refine.tolerance = o.refine_tolerance;
  options.partitioned_inverse = o.partitioned_inverse != 0;
  return options;
}

/// A copy of the caller's CSC arrays as a validated SparseMatrix (zeros for values when `values` is NULL and
/// only the pattern is read).
spade::SparseMatrix to_sparse(const spade_csc* A, const char* function, bool pattern_only) {
  require(A != nullptr, function, "A is NULL");
  require(A->n >= 0, function, "A->n is negative");
  require(A->col_ptr != nullptr, function, "A->col_ptr is NULL");
  const std::int64_t nnz = A->col_ptr[A->n];
  require(A->col_ptr[0] == 0 && nnz >= 0, function, "A->col_ptr must start at 0 and end at nnz >= 0");
  require(nnz == 0 || A->row_ind != nullptr, function, "A->row_ind is NULL");
  require(pattern_only || nnz == 0 || A->values != nullptr, function, "A->values is NULL");
  std::vector<spade::offset_t> col_ptr(A->col_ptr, A->col_ptr + A->n + 1);
  std::vector<spade::index_t> row_ind(A->row_ind, A->row_ind + nnz);
  std::vector<double> values = A->values != nullptr ? std::vector<double>(A->values, A->values + nnz)
                                                    : std::vector<double>(static_cast<std::size_t>(nnz), 0.0);
  return spade::SparseMatrix(A->n, A->n, std::move(col_ptr), std::move(row_ind), std::move(values));
}

spade::Memory to_memory(spade_memory memory, const char* function) {
  if (memory == SPADE_MEMORY_HOST) return spade::Memory::host;
  if (memory == SPADE_MEMORY_DEVICE) return spade::Memory::device;
  throw spade::InvalidInput(std::string(function) + ": memory " + std::to_string(memory) + " is not a spade_memory");
}

spade_ordering to_c(spade::OrderingMethod method) {
  switch (method) {
    case spade::OrderingMethod::amd: return SPADE_ORDERING_AMD;
    case spade::OrderingMethod::metis: return SPADE_ORDERING_METIS;
    case spade::OrderingMethod::natural: return SPADE_ORDERING_NATURAL;
    case spade::OrderingMethod::colamd: return SPADE_ORDERING_COLAMD;
  }
  return SPADE_ORDERING_AUTO;
}

}  // namespace

extern "C" {

spade_options spade_default_options(void) {
  const spade_options defaults = SPADE_OPTIONS_INIT;
  return defaults;
}

const char* spade_version(void) { return SPADE_VERSION_STRING; }

const char* spade_last_error(void) { return last_error.message.c_str(); }

int64_t spade_last_error_column(void) { return last_error.column; }

spade_numerical_kind spade_last_numerical_kind(void) { return last_error.kind; }

spade_status spade_analyze(const spade_csc* A, const spade_options* options, spade_analysis** analysis) {
  return guarded([&] {
    require(analysis != nullptr, "spade_analyze", "analysis is NULL");
    *analysis = nullptr;
    const spade::SolverOptions solver_options = to_solver_options(options ? *options : spade_default_options());
    const spade::SparseMatrix matrix = to_sparse(A, "spade_analyze", true);
    auto handle = std::make_unique<spade_analysis>(solver_options);
    handle->solver.analyze(matrix);
    *analysis = handle.release();
  });
}

spade_status spade_analysis_get_info(const spade_analysis* analysis, spade_analysis_info* info) {
  return guarded([&] {
    require(analysis != nullptr && info != nullptr, "spade_analysis_get_info", "analysis or info is NULL");
    const spade::SymbolicFactor& S = analysis->solver.symbolic();
    info->n = S.n;
    info->nnz_l = S.nnz_l;
    info->supernodes = S.num_supernodes;
    info->flops = S.flops;
    info->ordering = to_c(S.ordering);
  });
}

void spade_analysis_free(spade_analysis* analysis) { delete analysis; }

spade_status spade_factorize(spade_analysis* analysis, const spade_csc* A, spade_factor** factor) {
  return guarded([&] {
    require(factor != nullptr, "spade_factorize", "factor is NULL");
    *factor = nullptr;
    require(analysis != nullptr, "spade_factorize", "analysis is NULL");
    require(!analysis->has_factor, "spade_factorize",
            "this analysis already has a factor; free it first, or use spade_refactorize for new values");
    const spade::SparseMatrix matrix = to_sparse(A, "spade_factorize", false);
    auto handle = std::make_unique<spade_factor>();
    handle->analysis = analysis;
    analysis->solver.factorize(matrix);
    analysis->has_factor = true;
    *factor = handle.release();
  });
}

spade_status spade_refactorize(spade_factor* factor, const spade_csc* A) {
  return guarded([&] {
    require(factor != nullptr, "spade_refactorize", "factor is NULL");
    factor->analysis->solver.factorize(to_sparse(A, "spade_refactorize", false));
  });
}

void spade_factor_free(spade_factor* factor) {
  if (factor == nullptr) return;
  factor->analysis->has_factor = false;
  delete factor;
}

spade_status spade_factor_placement(const spade_factor* factor, int* on_gpu, const char** reason) {
  return guarded([&] {
    require(factor != nullptr && on_gpu != nullptr, "spade_factor_placement", "factor or on_gpu is NULL");
    const spade::Solver& solver = factor->analysis->solver;
    *on_gpu = solver.on_gpu() ? 1 : 0;
    if (reason != nullptr) *reason = solver.report().placement_reason.c_str();
  });
}

spade_status spade_solve(spade_factor* factor, int32_t nrhs, double* X, int32_t ldx, spade_memory memory) {
  return guarded([&] {
    require(factor != nullptr, "spade_solve", "factor is NULL");
    require(nrhs >= 1, "spade_solve", "nrhs must be >= 1");
    require(X != nullptr, "spade_solve", "X is NULL");
    factor->analysis->solver.solve(X, nrhs, ldx, to_memory(memory, "spade_solve"));
  });
}

spade_status spade_solve_refined(spade_factor* factor, int32_t nrhs, const double* B, int32_t ldb, double* X,
                                 int32_t ldx, spade_memory memory, spade_refinement* result) {
  return guarded([&] {
    require(factor != nullptr, "spade_solve_refined", "factor is NULL");
    require(nrhs >= 1, "spade_solve_refined", "nrhs must be >= 1");
    require(B != nullptr && X != nullptr, "spade_solve_refined", "B or X is NULL");
    const spade::RefinementResult r =
        factor->analysis->solver.solve_refined(B, ldb, X, ldx, nrhs, to_memory(memory, "spade_solve_refined"));
    if (result != nullptr) {
      result->steps = static_cast<int>(r.steps.size()) - 1;
      result->first_berr = r.steps.empty() ? r.solution.berr : r.steps.front().berr;
      result->berr = r.solution.berr;
      result->residual_norm = r.solution.residual_norm;
      result->stop = r.stop == spade::RefinementResult::Stop::converged   ? SPADE_REFINE_CONVERGED
                     : r.stop == spade::RefinementResult::Stop::stagnated ? SPADE_REFINE_STAGNATED
                                                                          : SPADE_REFINE_MAX_STEPS;
    }
  });
}

}  // extern "C"
