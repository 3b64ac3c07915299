"""spade: a sparse Cholesky solver for symmetric positive definite systems A x = b, on SciPy.

    import numpy as np, scipy.sparse as sp, spade
    A = sp.diags([-1, 2, -1], [-1, 0, 1], shape=(100, 100), format="csc")
    x = spade.factorized(A)(np.ones(100))          # as scipy.sparse.linalg.factorized
    chol = spade.Cholesky(A, ordering="metis")     # or keep the factor: solve, refactorize, solve_refined
    x, history = chol.solve_refined(np.ones(100))

The matrix is any scipy.sparse matrix or array, square, with both triangles stored (the whole symmetric
matrix, as SciPy holds it), real. spade orders it (AMD or METIS), analyzes and factors it on the host, and
solves on the GPU when one is usable (device="auto"), else on the host; see spade's README for the phases.

Errors: ValueError for bad input (shapes, non-symmetric or non-square matrices, NaN/Inf, unknown option
names); NotPositiveDefiniteError (a NumericalError, itself a numpy.linalg.LinAlgError) with the failing
column for a matrix that is not positive definite; MemoryError when memory runs out; ResourceError (a
RuntimeError) for other resource failures (CUDA, a GPU that device="gpu" cannot use, index overflow).

The GIL is released while spade analyzes, factors and solves, so other Python threads run meanwhile.
"""

import numpy as np
import numpy.linalg
import scipy.sparse

from . import _spade

__version__ = _spade.__version__

__all__ = ["Cholesky", "factorized", "NumericalError", "NotPositiveDefiniteError", "ResourceError",
           "__version__"]


class NumericalError(numpy.linalg.LinAlgError):
    """The arithmetic broke down.

    Attributes:
        column: the failing column (0-based, in the numbering of the matrix given), or -1 when no single
            column applies.
        kind: "not_positive_definite", "singular", "not_finite" or "no_progress" (a GPU solve gave up).
    """

    def __init__(self, message, column=-1, kind="unknown"):
        super().__init__(message)
        self.column = column
        self.kind = kind


class NotPositiveDefiniteError(NumericalError):
    """The matrix is not positive definite: the factorization met a non-positive pivot at `column`."""


class ResourceError(RuntimeError):
    """The machine cannot do it: CUDA or library failures, a missing GPU under device="gpu", index overflow."""


_spade._set_exceptions(NumericalError, NotPositiveDefiniteError, ResourceError)


def _csc_arrays(A):
    """(n, indptr int64, indices int32, data float64) of a square scipy.sparse matrix or array.

    A CSC matrix in canonical form (sorted indices, no duplicates) with float64 data and 32-bit indices is
    not converted: its indices and data are handed over as they are, and only indptr (n + 1 entries) is
    widened to spade's 64-bit column pointers; spade's own matrix then takes one copy of the arrays. Any
    other format is converted with SciPy (tocsc), duplicates summed and indices sorted on a copy; A is
    never modified.
    """
    if not scipy.sparse.issparse(A):
        raise ValueError(f"A must be a scipy.sparse matrix or array, not {type(A).__name__}")
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"A must be square, got shape {A.shape}")
    if not (np.issubdtype(A.dtype, np.floating) or np.issubdtype(A.dtype, np.integer)
            or A.dtype == np.bool_):
        raise ValueError(f"A must be real, got dtype {A.dtype}")
    n = A.shape[0]
    if n > np.iinfo(np.int32).max:
        raise ValueError(f"A has order {n}; spade's indices are 32-bit (at most 2^31 - 1)")
    if A.format != "csc":
        A = A.tocsc()
    if not A.has_canonical_format:
        A = A.copy()
        A.sum_duplicates()  # also sorts the indices
    indices = A.indices if A.indices.dtype == np.int32 else A.indices.astype(np.int32)
    indptr = A.indptr.astype(np.int64, copy=False)
    data = A.data.astype(np.float64, copy=False)
    return n, indptr, np.ascontiguousarray(indices), np.ascontiguousarray(data)


def _rhs_block(b, n, what="b"):
    """b as an n x nrhs float64 Fortran-ordered copy, and whether b was 1-D."""
    if scipy.sparse.issparse(b):
        b = b.toarray()
    b = np.asarray(b)
    if not (np.issubdtype(b.dtype, np.floating) or np.issubdtype(b.dtype, np.integer)):
        raise ValueError(f"{what} must be real, got dtype {b.dtype}")
    if b.ndim == 1:
        if b.shape[0] != n:
            raise ValueError(f"{what} has shape {b.shape}, but A is {n} x {n}")
        return np.array(b, dtype=np.float64, order="F", copy=True).reshape(n, 1, order="F"), True
    if b.ndim == 2:
        if b.shape[0] != n:
            raise ValueError(f"{what} has shape {b.shape}, but A is {n} x {n}")
        if b.shape[1] == 0:
            raise ValueError(f"{what} has no columns")
        return np.array(b, dtype=np.float64, order="F", copy=True), False
    raise ValueError(f"{what} must be 1-D (n,) or 2-D (n, nrhs), got {b.ndim} dimensions")


class Cholesky:
    """The Cholesky factorization P A P^T = L L^T of a sparse symmetric positive definite A, ready to solve.

    Cholesky(A, ordering="auto", threads=0, device="auto", refine=10, tolerance=0.0,
             partitioned_inverse=True, corrections="auto")

    Args:
        A: scipy.sparse matrix or array, n x n, symmetric (both triangles stored), positive definite.
        ordering: "auto" (AMD, and METIS as well when AMD's factor is fill- and flop-heavy, keeping the
            smaller predicted fill), "amd", "metis", "colamd" (COLAMD on
            the columns of A) or "natural".
        threads: threads of the factorization and the host solve; 0 means OpenMP's default
            (OMP_NUM_THREADS or every core).
        device: where the solves run, as the CLI's --device: "auto" (the GPU when one is usable and the
            factor fits, else the host), "gpu" (a ResourceError when it cannot) or "cpu".
        refine: the most refinement steps solve_refined makes.
        tolerance: solve_refined stops once the backward error is at most this; 0 means 2 eps.
        partitioned_inverse: the GPU solve of the factor also builds, without waiting for it, a plan of
            dense inverted pieces of merged tree levels and solves on it once it is ready (the CLI's
            --partitioned-inverse): faster solves on small factors. False: the per-supernode plan alone.
        corrections: the precision of solve_refined's corrections on the GPU, as the CLI's --corrections:
            "auto" (FP32 where the GPU solve is bandwidth-bound, else FP64), "fp32" (mixed precision: the
            corrections read the factor rounded to FP32, and go back to FP64 where one fails to halve the
            backward error) or "fp64". The host solves in FP64 whatever this says.

    Raises:
        ValueError: A is not a square real sparse matrix, not symmetric, has NaN/Inf values; an unknown
            ordering, device or corrections name, negative threads or refine.
        NotPositiveDefiniteError: A is not positive definite (.column names the column).
        MemoryError, ResourceError: as in the module docstring.
    """

    def __init__(self, A, ordering="auto", threads=0, device="auto", refine=10, tolerance=0.0,
                 partitioned_inverse=True, corrections="auto"):
        n, indptr, indices, data = _csc_arrays(A)
        self._n = n
        self._solver = _spade._Solver(str(ordering), int(threads), str(device), int(refine), float(tolerance),
                                      bool(partitioned_inverse), str(corrections))
        self._solver.analyze(n, indptr, indices, data)
        self._solver.factorize(n, indptr, indices, data)

    @property
    def shape(self):
        """(n, n)."""
        return (self._n, self._n)

    @property
    def on_gpu(self):
        """True when the solves run on the GPU."""
        return self._solver.on_gpu()

    def refactorize(self, A):
        """Factorizes new values of A with the same sparsity pattern, reusing the analysis (and GPU plan).

        Raises ValueError for a different pattern or shape, NotPositiveDefiniteError as the constructor.
        After a failure, solves raise ValueError until a refactorization succeeds.
        """
        n, indptr, indices, data = _csc_arrays(A)
        if n != self._n:
            raise ValueError(f"A is {n} x {n}, but this factorization is of order {self._n}")
        self._solver.factorize(n, indptr, indices, data)

    def solve(self, b):
        """The solution x of A x = b, without refinement.

        Args:
            b: array_like, shape (n,) or (n, nrhs); not modified.
        Returns:
            ndarray of float64, the shape of b.
        Raises:
            ValueError for a wrong shape, NaN/Inf in b, or after a failed refactorization.
        """
        X, one_dimensional = _rhs_block(b, self._n)
        self._solver.solve(X)
        return X[:, 0] if one_dimensional else X

    __call__ = solve

    def solve_refined(self, b):
        """The solution of A x = b with iterative refinement, and the refinement's history.

        Args:
            b: array_like, shape (n,) or (n, nrhs); not modified.
        Returns:
            (x, history): x as in solve(); history a dict with "berr" and "residual_norm" (lists, one entry
            per step: the unrefined solution, then each correction; maxima over the right-hand sides of the
            componentwise backward error of Oettli and Prager and of the residual's infinity norm), "stop"
            ("converged", "stagnated" or "max_steps"), and the returned x's "final_berr" and
            "final_residual_norm" (a last step that made things worse is undone).
        Raises:
            as solve().
        """
        B, one_dimensional = _rhs_block(b, self._n)
        X = np.zeros_like(B, order="F")
        berr, residual, stop, final_berr, final_residual = self._solver.solve_refined(B, X)
        history = {"berr": berr, "residual_norm": residual, "stop": stop, "final_berr": final_berr,
                   "final_residual_norm": final_residual}
        return (X[:, 0] if one_dimensional else X), history

    def report(self):
        """The report's figures as a dict: "phases" (name -> {"seconds", "gflops_per_second"} for "order",
        "symbolic", "numeric", "solve", "refine"), "threads", "placement" (requested), "gpu",
        "placement_reason", "analysis" (n, ordering, supernodes, nnz_l, flops, solve_flops), "plan" (the
        GPU plan, or None) and "last_solve" (or None)."""
        return self._solver.report()


def factorized(A, **options):
    """Factors A and returns a function solve(b) -> x, as scipy.sparse.linalg.factorized does.

    A is symmetric positive definite (see Cholesky); options are Cholesky's. The returned callable takes b
    of shape (n,) or (n, nrhs) and returns x of the same shape. Raises as Cholesky.
    """
    return Cholesky(A, **options).solve
