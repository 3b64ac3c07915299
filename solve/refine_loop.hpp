// The iterative-refinement loop shared by the host and the GPU solves (internal header of solve/): the
// stopping rules of LAPACK's xPORFS with the componentwise backward error of Oettli and Prager (1964).
#pragma once

#include <limits>

#include "spade/solve.hpp"

namespace spade {

/// The backward error at which refinement stops: options.tolerance, or 2 eps where that is 0 or less.
inline double refine_tolerance(const RefineOptions& options) {
  return options.tolerance > 0 ? options.tolerance : 2 * std::numeric_limits<double>::epsilon();
}

/// Runs refinement through `ops`, which owns B, X, a correction/residual block D and a copy of the previous
/// X, wherever they live:
///   ops.first_solve()      X = solve(B)
///   ops.evaluate()         D = B - A X; returns its RefinementStep (worst over the right-hand sides)
///   ops.save()             keeps X (a copy, or the block that holds it while the next X goes to another)
///   ops.correct()          D = solve(D); X += D (or at the next evaluate(), in the same pass as the residual)
///   ops.restore()          X = the X that save() kept
///   ops.single()           whether correct() solves with the factor rounded to FP32 (mixed precision)
///   ops.use_fp64()         later corrections solve with the FP64 factor
/// Stops when berr <= tolerance (converged), when a correction fails to halve berr (stagnated: the better
/// of the last two iterates is kept), or after options.max_steps corrections. A correction in FP32 that
/// fails to halve berr does not stop it: the better of the two iterates stays and the corrections go on in
/// FP64 (the rounded factor contracts too little where kappa(A) 2^-24 approaches 1).
template <class Ops>
RefinementResult refine_loop(Ops& ops, const RefineOptions& options) {
  const double tolerance = refine_tolerance(options);
  ops.first_solve();
  RefinementResult result;
  RefinementStep current = ops.evaluate();  // of the X that ops holds
  result.steps.push_back(current);
  for (int step = 1;; ++step) {
    if (current.berr <= tolerance) {
      result.converged = true;
      result.stop = RefinementResult::Stop::converged;
      break;
    }
    if (step > options.max_steps) {
      result.stop = RefinementResult::Stop::max_steps;
      break;
    }
    ops.save();
    const bool single = ops.single();
    ops.correct();
    RefinementStep now = ops.evaluate();
    now.single = single;
    result.steps.push_back(now);
    if (now.berr > tolerance && now.berr > current.berr / 2) {
      if (single) {
        ops.use_fp64();
        if (now.berr < current.berr) {
          current = now;
        } else {
          ops.restore();
          ops.evaluate();  // D again for the restored X
        }
        continue;
      }
      result.stop = RefinementResult::Stop::stagnated;
      if (now.berr < current.berr) {
        current = now;
        break;
      }
      result.solution = current;  // undo the step that made things worse
      ops.restore();
      return result;
    }
    current = now;
  }
  result.solution = current;
  return result;
}

/// The corrected stage of an LU's refinement (lu_solve_refined of lu.hpp, and the Solver's on the GPU),
/// which starts again from B after the first stage `result` stopped above its tolerance: appends the
/// stage's steps, marked corrected, to `result` and takes its solution where it converged or is no worse.
/// Returns false where the first stage's solution stays: the caller then puts that stage's X back.
inline bool merge_corrected_stage(RefinementResult& result, const RefinementResult& stage) {
  for (RefinementStep step : stage.steps) {
    step.corrected = true;
    result.steps.push_back(step);
  }
  if (!(stage.converged || stage.solution.berr <= result.solution.berr)) return false;
  result.solution = stage.solution;
  result.converged = stage.converged;
  result.stop = stage.stop;
  return true;
}

}  // namespace spade
