// A user's program against an installed spade: solves a generated 3D Poisson problem through the Solver
// facade on the host and checks the refined backward error. Exits 0 on success, 1 with a message otherwise.
#include <cstdio>
#include <vector>

#include <spade/error.hpp>
#include <spade/generators.hpp>
#include <spade/solver.hpp>
#include <spade/version.h>

int main() {
  try {
    const spade::SparseMatrix A = spade::laplacian_3d(8, 8, 8);
    spade::SolverOptions options;
    options.placement = spade::Placement::cpu;
    spade::Solver solver(options);
    solver.analyze(A);
    solver.factorize(A);
    const std::vector<double> b(static_cast<std::size_t>(A.rows()), 1.0);
    std::vector<double> x(b.size());
    const spade::RefinementResult r = solver.solve_refined(b.data(), A.rows(), x.data(), A.rows(), 1);
    if (!(r.solution.berr < 1e-14)) {
      std::fprintf(stderr, "consumer: backward error %g\n", r.solution.berr);
      return 1;
    }
    std::printf("spade %s: n = %d, berr = %.2e\n", SPADE_VERSION_STRING, A.rows(), r.solution.berr);
    return 0;
  } catch (const spade::Error& e) {
    std::fprintf(stderr, "consumer: %s\n", e.what());
    return 1;
  }
}
