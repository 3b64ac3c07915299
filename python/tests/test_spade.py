"""Tests of the Python module spade: solutions against scipy.sparse.linalg.spsolve on the real SPD matrices
and generated Laplacians, every input format, 1-D and 2-D right-hand sides, refactorization, refinement,
the report, every error path, and the GIL released while spade works.

The real matrices are read from $SPADE_MATRICES, else $SPADE_DEFAULT_MATRIX_DIR (set by ctest), else
../shared/matrices beside the checkout; tests that need them skip, saying so, when the folder is absent.
"""

import gzip
import os
import pathlib
import threading
import time

import numpy as np
import numpy.linalg
import pytest
import scipy.io
import scipy.sparse as sp
import scipy.sparse.linalg as spla

import spade

EPS = np.finfo(float).eps

# The SPD matrices of ../shared/matrices (its README), without mdual_lap (258,569 rows: SciPy's SuperLU
# reference would dominate the suite's time).
REAL_SPD = ["494_bus", "662_bus", "LF10", "LFAT5", "Trefethen_500", "bcsstk01", "bcsstk02", "bcsstk04",
            "bcsstk13", "bcsstk14", "bcsstk16", "gr_30_30", "lund_a", "mesh1e1", "nos1", "nos5", "tomography",
            "4elt_lap"]


def matrix_dir():
    for candidate in (os.environ.get("SPADE_MATRICES"), os.environ.get("SPADE_DEFAULT_MATRIX_DIR")):
        if candidate:
            return pathlib.Path(candidate)
    return pathlib.Path(__file__).resolve().parents[3] / "shared" / "matrices"


def read_real(name):
    path = matrix_dir() / f"{name}.mtx.gz"
    if not path.exists():
        pytest.skip(f"{path} is absent (set SPADE_MATRICES to the folder of the real test matrices)")
    with gzip.open(path, "rb") as f:
        return sp.csc_matrix(scipy.io.mmread(f))


def laplacian_2d(nx, ny, fmt="csc"):
    """The 5-point Laplacian on an nx x ny grid (SPD), both triangles."""
    tx = sp.diags([-1, 2, -1], [-1, 0, 1], shape=(nx, nx))
    ty = sp.diags([-1, 2, -1], [-1, 0, 1], shape=(ny, ny))
    return sp.kronsum(tx, ty, format=fmt)


def condition_estimate(A, solve):
    """kappa_1(A) estimated by Higham's 1-norm estimator, with spade's solve for A^{-1}."""
    n = A.shape[0]
    inverse = spla.LinearOperator((n, n), matvec=solve, rmatvec=solve, dtype=float)
    return spla.onenormest(A) * spla.onenormest(inverse)


def backward_error(A, b, x):
    """max_i |b - A x|_i / (|A| |x| + |b|)_i (Oettli-Prager), 0 where both vanish."""
    r = np.abs(b - A @ x)
    d = abs(A) @ np.abs(x) + np.abs(b)
    with np.errstate(invalid="ignore", divide="ignore"):
        q = np.where(d > 0, r / d, np.where(r > 0, np.inf, 0))
    return q.max()


# ---- solutions ----

@pytest.mark.parametrize("name", REAL_SPD)
def test_real_matrices_match_spsolve(name):
    A = read_real(name)
    n = A.shape[0]
    rng = np.random.default_rng(7)
    b = rng.standard_normal(n)
    chol = spade.Cholesky(A)
    x = chol.solve(b)
    x_ref = spla.spsolve(A, b)
    kappa = condition_estimate(A, chol.solve)
    # Both solvers are backward stable: each solution is within kappa * (a few eps) of the exact one.
    tolerance = max(1e3 * kappa * EPS, 1e-13)
    assert np.linalg.norm(x - x_ref, np.inf) <= tolerance * np.linalg.norm(x_ref, np.inf)
    assert backward_error(A, b, x) < 1e-12
    x_refined, history = chol.solve_refined(b)
    assert history["final_berr"] < 1e-14
    assert backward_error(A, b, x_refined) < 1e-14


@pytest.mark.parametrize("ordering", ["auto", "amd", "metis", "natural"])
@pytest.mark.parametrize("device", ["auto", "cpu"])
def test_orderings_and_placements(ordering, device):
    A = laplacian_2d(20, 15)
    x_true = np.sin(np.arange(A.shape[0]))
    chol = spade.Cholesky(A, ordering=ordering, threads=2, device=device)
    np.testing.assert_allclose(chol.solve(A @ x_true), x_true, rtol=0, atol=1e-11)
    report = chol.report()
    assert report["threads"] == 2 and report["placement"] == device
    assert report["analysis"]["ordering"] == (ordering if ordering != "auto" else report["analysis"]["ordering"])
    assert report["analysis"]["ordering"] in ("amd", "metis", "natural")
    if device == "cpu":
        assert not chol.on_gpu and not report["gpu"]


@pytest.mark.parametrize("device", ["auto", "cpu"])
def test_partitioned_inverse(device):
    A = laplacian_2d(30, 25)
    x_true = np.cos(np.arange(A.shape[0]))
    chol = spade.Cholesky(A, device=device, partitioned_inverse=True)
    np.testing.assert_allclose(chol.solve(A @ x_true), x_true, rtol=0, atol=1e-11)
    plan = chol.report().get("plan")
    if chol.on_gpu:
        assert plan["partition_band"] > 1
    else:
        assert plan is None


@pytest.mark.parametrize("corrections", ["auto", "fp32", "fp64"])
def test_correction_precisions_refine_to_a_few_eps(corrections):
    A = laplacian_2d(40, 30)
    x_true = 1 + np.sin(np.arange(A.shape[0]))
    chol = spade.Cholesky(A, corrections=corrections)
    X, history = chol.solve_refined(A @ x_true)
    np.testing.assert_allclose(X, x_true, rtol=0, atol=1e-11)
    assert history["final_berr"] < 1e-14


@pytest.mark.parametrize("fmt", ["csc", "csr", "coo", "lil", "dok", "bsr", "dia"])
@pytest.mark.parametrize("kind", ["matrix", "array"])
def test_every_scipy_format(fmt, kind):
    A = laplacian_2d(7, 6, fmt="csc")
    A = (sp.csc_matrix(A) if kind == "matrix" else sp.csc_array(A)).asformat(fmt)
    b = np.arange(A.shape[0], dtype=float)
    np.testing.assert_allclose(spade.factorized(A, device="cpu")(b), spla.spsolve(sp.csc_matrix(A), b),
                               rtol=1e-12, atol=1e-12)


def test_integer_values_int64_indices_and_unsorted_duplicates():
    A = sp.csc_matrix(laplacian_2d(5, 4)).astype(np.int64)
    A.indices = A.indices.astype(np.int64)
    A.indptr = A.indptr.astype(np.int64)
    b = np.ones(A.shape[0])
    x_ref = spla.spsolve(A.astype(float), b)
    np.testing.assert_allclose(spade.Cholesky(A).solve(b), x_ref, rtol=1e-12)
    # Unsorted indices and a split duplicate entry: summed on a copy, the caller's matrix is untouched.
    coo = sp.coo_matrix(laplacian_2d(5, 4))
    rows = np.concatenate([coo.row, [0]])
    cols = np.concatenate([coo.col, [0]])
    vals = np.concatenate([coo.data, [1.0]])
    vals[np.flatnonzero((coo.row == 0) & (coo.col == 0))[0]] -= 1.0
    D = sp.csc_matrix((vals, (rows, cols)), shape=coo.shape)
    D.has_canonical_format = False
    D.indices = D.indices.copy()
    before = (D.indptr.copy(), D.indices.copy(), D.data.copy())
    np.testing.assert_allclose(spade.Cholesky(D).solve(b), x_ref, rtol=1e-12)
    for a, c in zip(before, (D.indptr, D.indices, D.data)):
        np.testing.assert_array_equal(a, c)


def test_csc_with_int32_indices_is_not_converted(monkeypatch):
    A = sp.csc_matrix(laplacian_2d(6, 6))
    assert A.indices.dtype == np.int32 and A.has_canonical_format

    def no_conversion(*args, **kwargs):
        raise AssertionError("a CSC matrix was converted")
    monkeypatch.setattr(sp.csc_matrix, "tocsc", no_conversion)
    monkeypatch.setattr(sp.csc_matrix, "copy", no_conversion)
    monkeypatch.setattr(sp.csc_matrix, "sum_duplicates", no_conversion)
    spade.Cholesky(A)


def test_one_and_two_dimensional_right_hand_sides():
    A = laplacian_2d(9, 8)
    n = A.shape[0]
    rng = np.random.default_rng(1)
    X_true = rng.standard_normal((n, 5))
    B = A @ X_true
    B_c = np.ascontiguousarray(B)  # C order in, the same shape out
    solve = spade.factorized(A)
    X = solve(B_c)
    assert X.shape == (n, 5)
    np.testing.assert_allclose(X, X_true, atol=1e-11)
    np.testing.assert_array_equal(B_c, B)  # not modified
    x = solve(B[:, 2])
    assert x.shape == (n,)
    np.testing.assert_allclose(x, X_true[:, 2], atol=1e-11)
    np.testing.assert_allclose(solve(B[:, 1:2]), X_true[:, 1:2], atol=1e-11)  # (n, 1) stays 2-D
    np.testing.assert_allclose(solve(B[::2].repeat(2, axis=0)[:n, 0] * 0 + B[:, 0]), X_true[:, 0], atol=1e-11)
    assert solve(list(B[:, 0])).shape == (n,)


def test_refactorize_and_solve_refined_history():
    A = laplacian_2d(10, 10)
    n = A.shape[0]
    x_true = 1 + np.sin(np.arange(n))
    chol = spade.Cholesky(A, refine=5)
    chol.refactorize(3 * A)
    np.testing.assert_allclose(chol.solve(3 * (A @ x_true)), x_true, atol=1e-11)
    B = np.column_stack([A @ x_true, 2 * (A @ x_true)]) * 3
    X, history = chol.solve_refined(B)
    assert X.shape == (n, 2)
    np.testing.assert_allclose(X[:, 1], 2 * x_true, atol=1e-11)
    assert len(history["berr"]) == len(history["residual_norm"]) >= 1
    assert len(history["berr"]) <= 1 + 5
    assert history["stop"] in ("converged", "stagnated", "max_steps")
    assert history["final_berr"] <= history["berr"][0]
    assert history["final_berr"] < 1e-14
    report = chol.report()
    for phase in ("order", "symbolic", "numeric", "solve", "refine"):
        assert report["phases"][phase]["seconds"] >= 0
    assert report["analysis"]["n"] == n and report["analysis"]["nnz_l"] > 0
    assert report["placement"] == "auto" and isinstance(report["placement_reason"], str)
    assert report["last_solve"]["nrhs"] >= 1


def test_version():
    assert spade.__version__.count(".") == 2


# ---- errors ----

def test_not_positive_definite_names_the_column():
    A = sp.lil_matrix(laplacian_2d(6, 5))
    A[17, 17] = -1.0
    with pytest.raises(spade.NotPositiveDefiniteError) as error:
        spade.Cholesky(A.tocsc())
    assert error.value.column == 17 and error.value.kind == "not_positive_definite"
    assert isinstance(error.value, numpy.linalg.LinAlgError) and isinstance(error.value, spade.NumericalError)
    assert "17" in str(error.value)
    # The same through a refactorization; solves then refuse until a refactorization succeeds.
    good = laplacian_2d(6, 5)
    chol = spade.Cholesky(good)
    with pytest.raises(numpy.linalg.LinAlgError):
        chol.refactorize(A.tocsc())
    with pytest.raises(ValueError, match="factoriz"):
        chol.solve(np.ones(30))
    chol.refactorize(good)
    chol.solve(np.ones(30))


@pytest.mark.parametrize("bad, match", [
    (np.eye(3), "scipy.sparse"),
    (sp.csc_matrix(np.ones((3, 4))), "square"),
    (sp.csc_matrix(np.array([[2.0, 1.0], [0.0, 2.0]])), "symmetric"),
    (sp.csc_matrix(np.array([[2.0, 1.0], [1.5, 2.0]])), "symmetric"),
    (sp.csc_matrix(np.array([[2.0, 1j], [-1j, 2.0]])), "real"),
    (sp.csc_matrix(np.array([[np.nan, 0.0], [0.0, 1.0]])), ""),
    (sp.csc_matrix(np.array([[np.inf, 0.0], [0.0, 1.0]])), ""),
])
def test_bad_matrices_are_value_errors(bad, match):
    with pytest.raises(ValueError, match=match):
        spade.Cholesky(bad)


def test_bad_options_are_value_errors():
    A = laplacian_2d(3, 3)
    with pytest.raises(ValueError, match="ordering"):
        spade.Cholesky(A, ordering="camd")
    with pytest.raises(ValueError, match="gpu"):
        spade.Cholesky(A, device="tpu")
    with pytest.raises(ValueError, match="threads"):
        spade.Cholesky(A, threads=-1)
    with pytest.raises(ValueError, match="refine"):
        spade.Cholesky(A, refine=-1)
    with pytest.raises(ValueError, match="fp32"):
        spade.Cholesky(A, corrections="fp16")


def test_bad_right_hand_sides_and_patterns_are_value_errors():
    A = laplacian_2d(4, 4)
    chol = spade.Cholesky(A)
    for b in (np.ones(15), np.ones((16, 2, 1)), np.ones((17, 2)), np.ones((16, 0)), np.ones(16) * 1j):
        with pytest.raises(ValueError):
            chol.solve(b)
    with pytest.raises(ValueError):
        chol.solve_refined(np.ones(3))
    b = np.ones(16)
    b[5] = np.nan
    with pytest.raises(ValueError):
        chol.solve(b)
    with pytest.raises(ValueError):
        chol.refactorize(laplacian_2d(5, 5))
    other = sp.csc_matrix(A + sp.diags([0.5, 0.5], [-15, 15], shape=(16, 16)))
    with pytest.raises(ValueError, match="pattern"):
        chol.refactorize(other)


def test_resource_errors():
    A = laplacian_2d(4, 4)
    probe = spade.Cholesky(A)
    if probe.on_gpu:
        pytest.skip("a usable GPU is present: device='gpu' succeeds, so its resource error cannot be provoked")
    with pytest.raises(spade.ResourceError, match="placement gpu") as error:
        spade.Cholesky(A, device="gpu")
    assert isinstance(error.value, RuntimeError)


# ---- the GIL ----

def ticks_inside(call):
    """Runs call() while another thread wakes every millisecond and records the time; returns the number of
    wake-ups in the middle half of the call and the call's duration. With the GIL held throughout the call,
    no wake-up can land in its middle (the Python code around the call is at its ends)."""
    stamps = []
    done = threading.Event()

    def tick():
        while not done.is_set():
            stamps.append(time.perf_counter())
            time.sleep(0.001)

    ticker = threading.Thread(target=tick)
    ticker.start()
    try:
        time.sleep(0.01)
        t0 = time.perf_counter()
        call()
        t1 = time.perf_counter()
    finally:
        done.set()
        ticker.join()
    quarter = (t1 - t0) / 4
    return sum(t0 + quarter <= t <= t1 - quarter for t in stamps), t1 - t0


def test_gil_is_released_during_factorization_and_solves():
    A = laplacian_2d(300, 300)  # 90,000 unknowns: tens of milliseconds or more in each phase
    B = np.ones((A.shape[0], 8))
    chol = None

    def factor():
        nonlocal chol
        chol = spade.Cholesky(A, device="cpu", threads=1)

    for what, call in (("the factorization", factor), ("the solve", lambda: chol.solve(B)),
                       ("the refined solve", lambda: chol.solve_refined(B))):
        ticks, seconds = ticks_inside(call)
        assert seconds < 0.02 or ticks >= 2, f"no other thread ran during {what} ({seconds:.3f} s)"
