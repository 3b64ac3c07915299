// spade._spade: the compiled half of the Python module `spade` (python/spade/__init__.py is the other half:
// SciPy input, shapes and docstrings for users). A thin client of spade::Solver: one _Solver per
// factorization, the GIL released while spade analyzes, factors and solves, and spade's errors raised as
// Python exceptions:
//   InvalidInput   -> ValueError
//   NumericalError -> spade.NumericalError (a numpy.linalg.LinAlgError) with .column and .kind, or its
//                     subclass spade.NotPositiveDefiniteError
//   ResourceError  -> spade.ResourceError (a RuntimeError); std::bad_alloc -> MemoryError
// The Python classes of the exceptions are made in __init__.py and handed over by _set_exceptions().
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "spade/error.hpp"
#include "spade/solver.hpp"
#include "spade/version.h"

namespace py = pybind11;

namespace {

// The exception classes of spade/__init__.py (set once, at import, and kept alive for the process: handles,
// so that nothing is released after the interpreter has finalized).
py::handle numerical_error_class, not_positive_definite_class, resource_error_class;

std::string kind_name(spade::NumericalError::Kind kind) {
  switch (kind) {
    case spade::NumericalError::Kind::not_positive_definite: return "not_positive_definite";
    case spade::NumericalError::Kind::singular: return "singular";
    case spade::NumericalError::Kind::not_finite: return "not_finite";
    case spade::NumericalError::Kind::no_progress: return "no_progress";
  }
  return "unknown";
}

/// A SparseMatrix from CSC arrays that __init__.py has already made int64 (indptr), int32 (indices) and
/// float64 (data), one-dimensional and contiguous; SparseMatrix validates them and keeps its own copy.
spade::SparseMatrix to_sparse(std::int64_t n, const py::array_t<std::int64_t, py::array::c_style>& indptr,
                              const py::array_t<std::int32_t, py::array::c_style>& indices,
                              const py::array_t<double, py::array::c_style>& data) {
  if (n < 0 || n > INT32_MAX) throw spade::ResourceError("the matrix order " + std::to_string(n) + " exceeds 2^31 - 1");
  if (indptr.ndim() != 1 || indices.ndim() != 1 || data.ndim() != 1 || indptr.size() != n + 1)
    throw spade::InvalidInput("CSC arrays of the wrong shape");
  if (indices.size() != data.size())
    throw spade::InvalidInput("indices has " + std::to_string(indices.size()) + " entries but data " +
                              std::to_string(data.size()));
  return spade::SparseMatrix(static_cast<spade::index_t>(n), static_cast<spade::index_t>(n),
                             std::vector<spade::offset_t>(indptr.data(), indptr.data() + indptr.size()),
                             std::vector<spade::index_t>(indices.data(), indices.data() + indices.size()),
                             std::vector<double>(data.data(), data.data() + data.size()));
}

/// The Solver and the matrix order; every method is the Solver's, with the GIL released around its work.
class PySolver {
 public:
  PySolver(const std::string& ordering, int threads, const std::string& device, int refine, double tolerance,
           bool partitioned_inverse, const std::string& corrections) {
    spade::SolverOptions options;
    if (ordering != "auto") options.analyze.ordering = spade::parse_ordering_method(ordering);
    if (threads < 0) throw spade::InvalidInput("threads must be >= 0 (0: OpenMP's default), got " + std::to_string(threads));
    if (refine < 0) throw spade::InvalidInput("refine must be >= 0, got " + std::to_string(refine));
    if (!(tolerance >= 0)) throw spade::InvalidInput("tolerance must be >= 0");
    options.threads = threads;
    options.placement = spade::parse_placement(device);
    options.refine.max_steps = refine;
    options.refine.tolerance = tolerance;
    options.refine.corrections = spade::parse_correction_precision(corrections);
    options.partitioned_inverse = partitioned_inverse;
    solver_ = std::make_unique<spade::Solver>(options);
  }

  void analyze(std::int64_t n, const py::array_t<std::int64_t, py::array::c_style>& indptr,
               const py::array_t<std::int32_t, py::array::c_style>& indices,
               const py::array_t<double, py::array::c_style>& data) {
    const spade::SparseMatrix A = to_sparse(n, indptr, indices, data);
    py::gil_scoped_release unlocked;
    solver_->analyze(A);
  }

  void factorize(std::int64_t n, const py::array_t<std::int64_t, py::array::c_style>& indptr,
                 const py::array_t<std::int32_t, py::array::c_style>& indices,
                 const py::array_t<double, py::array::c_style>& data) {
    const spade::SparseMatrix A = to_sparse(n, indptr, indices, data);
    py::gil_scoped_release unlocked;
    solver_->factorize(A);
  }

  /// X (n x nrhs, Fortran order, float64, writable) := A^{-1} X.
  void solve(py::array X) {
    const auto [n, nrhs] = block_shape(X, true);
    double* x = static_cast<double*>(X.mutable_data());
    py::gil_scoped_release unlocked;
    solver_->solve(x, nrhs, std::max<spade::index_t>(n, 1));
  }

  /// X := the refined solution of A X = B (both n x nrhs, Fortran order); returns the history as
  /// (berr per step, residual norm per step, stop).
  py::tuple solve_refined(const py::array& B, py::array X) {
    const auto [n, nrhs] = block_shape(X, true);
    if (block_shape(B, false) != std::make_pair(n, nrhs)) throw spade::InvalidInput("B and X differ in shape");
    const double* b = static_cast<const double*>(B.data());
    double* x = static_cast<double*>(X.mutable_data());
    const spade::index_t ld = std::max<spade::index_t>(n, 1);
    spade::RefinementResult r;
    {
      py::gil_scoped_release unlocked;
      r = solver_->solve_refined(b, ld, x, ld, nrhs);
    }
    std::vector<double> berr, residual;
    for (const spade::RefinementStep& s : r.steps) {
      berr.push_back(s.berr);
      residual.push_back(s.residual_norm);
    }
    const char* stop = r.stop == spade::RefinementResult::Stop::converged   ? "converged"
                       : r.stop == spade::RefinementResult::Stop::stagnated ? "stagnated"
                                                                            : "max_steps";
    return py::make_tuple(berr, residual, stop, r.solution.berr, r.solution.residual_norm);
  }

  /// The report's figures (spade::Report and the analysis) as a dict.
  py::dict report() const {
    const spade::Report& r = solver_->report();
    py::dict d;
    py::dict phases;
    for (const spade::PhaseTime& p : r.phases) {
      py::dict phase;
      phase["seconds"] = p.seconds;
      phase["gflops_per_second"] = p.gflops_per_second;
      phases[py::str(p.name)] = phase;
    }
    d["phases"] = phases;
    d["threads"] = r.threads;
    d["placement"] = spade::to_string(r.placement);
    d["gpu"] = r.gpu;
    d["placement_reason"] = r.placement_reason;
    const spade::SymbolicFactor& S = solver_->symbolic();
    py::dict analysis;
    analysis["n"] = S.n;
    analysis["ordering"] = spade::to_string(S.ordering);
    analysis["supernodes"] = S.num_supernodes;
    analysis["nnz_l"] = S.nnz_l;
    analysis["flops"] = S.flops;
    analysis["solve_flops"] = S.solve_flops;
    d["analysis"] = analysis;
    if (r.plan) {
      const spade::GpuPlanReport& p = *r.plan;
      py::dict plan;
      plan["device"] = p.device;
      plan["device_bytes"] = p.device_bytes;
      plan["factor_bytes"] = p.factor_bytes;
      plan["max_width"] = p.max_width;
      plan["groups"] = p.groups;
      plan["tiles"] = p.tiles;
      plan["tree_height"] = p.tree_height;
      plan["partition_band"] = p.partition_band;
      plan["merged_pieces"] = p.merged_pieces;
      plan["partitioned_seconds"] = p.partitioned_seconds;
      plan["partitioned_problem"] = p.partitioned_problem;
      py::list trials;
      for (const spade::PartitionTrial& t : p.partition_trials) {
        py::dict trial;
        trial["band"] = t.band;
        trial["seconds"] = t.seconds;
        trials.append(trial);
      }
      plan["partition_trials"] = trials;
      plan["plan_seconds"] = p.plan_seconds;
      plan["upload_seconds"] = p.upload_seconds;
      plan["visible_seconds"] = p.visible_seconds;
      d["plan"] = plan;
    } else {
      d["plan"] = py::none();
    }
    if (r.last_solve) {
      const spade::SolveTimes& t = *r.last_solve;
      py::dict solve;
      solve["gpu"] = t.gpu;
      solve["nrhs"] = t.nrhs;
      solve["passes"] = t.passes;
      solve["partitioned"] = t.partitioned;
      solve["forward_seconds"] = t.forward_seconds;
      solve["backward_seconds"] = t.backward_seconds;
      solve["seconds"] = t.seconds;
      d["last_solve"] = solve;
    } else {
      d["last_solve"] = py::none();
    }
    return d;
  }

  bool on_gpu() const { return solver_->on_gpu(); }

 private:
  /// (n, nrhs) of a block that __init__.py has made two-dimensional, float64, Fortran-ordered (and
  /// writable when it receives a solution): spade reads and writes it in place, so nothing here converts.
  static std::pair<spade::index_t, spade::index_t> block_shape(const py::array& X, bool writable) {
    if (X.ndim() != 2 || !X.dtype().is(py::dtype::of<double>()) || !(X.flags() & py::array::f_style) ||
        (writable && !X.writeable()))
      throw spade::InvalidInput("a right-hand-side block must be a 2-D float64 array in Fortran order");
    if (X.shape(0) > INT32_MAX || X.shape(1) > INT32_MAX)
      throw spade::ResourceError("the right-hand-side block is too large for 32-bit indices");
    return {static_cast<spade::index_t>(X.shape(0)), static_cast<spade::index_t>(X.shape(1))};
  }

  std::unique_ptr<spade::Solver> solver_;
};

}  // namespace

PYBIND11_MODULE(_spade, m) {
  m.doc() = "spade's compiled core; use the package `spade` (its __init__.py), not this module.";
  m.attr("__version__") = SPADE_VERSION_STRING;

  m.def("_set_exceptions", [](py::object numerical, py::object not_positive_definite, py::object resource) {
    numerical_error_class = numerical.release();
    not_positive_definite_class = not_positive_definite.release();
    resource_error_class = resource.release();
  });

  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const spade::InvalidInput& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const spade::NumericalError& e) {
      const bool npd = e.kind() == spade::NumericalError::Kind::not_positive_definite;
      py::handle cls = npd ? not_positive_definite_class : numerical_error_class;
      py::object error = cls(e.what(), e.index(), kind_name(e.kind()));
      PyErr_SetObject(cls.ptr(), error.ptr());
    } catch (const spade::ResourceError& e) {
      PyErr_SetString(resource_error_class.ptr(), e.what());
    }
  });

  py::class_<PySolver>(m, "_Solver")
      .def(py::init<const std::string&, int, const std::string&, int, double, bool, const std::string&>())
      .def("analyze", &PySolver::analyze)
      .def("factorize", &PySolver::factorize)
      .def("solve", &PySolver::solve)
      .def("solve_refined", &PySolver::solve_refined)
      .def("report", &PySolver::report)
      .def("on_gpu", &PySolver::on_gpu);
}
