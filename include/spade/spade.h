/* spade's C interface (C99; also valid C++): the Cholesky solve of A X = B for a sparse symmetric positive
 * definite A, through the same phases, options and placement as the C++ facade spade::Solver
 * (spade/solver.hpp), of which this is a thin client.
 *
 *   spade_options opt = spade_default_options();          (or SPADE_OPTIONS_INIT)
 *   spade_analysis* an = NULL;  spade_factor* f = NULL;
 *   if (spade_analyze(&A, &opt, &an) != SPADE_SUCCESS) puts(spade_last_error());
 *   spade_factorize(an, &A, &f);                         factor (a later spade_refactorize: new values)
 *   spade_solve(f, 1, x, n, SPADE_MEMORY_HOST);          x holds b on entry, the solution on return
 *   spade_factor_free(f);  spade_analysis_free(an);
 *
 * Matrices: A is n x n in compressed sparse column form, 0-based, with both triangles stored (the whole
 * symmetric matrix, as spade::SparseMatrix), row indices strictly increasing inside each column; col_ptr
 * has n + 1 entries (64-bit), row_ind and values col_ptr[n] entries; host memory. spade copies what it
 * needs: the caller's arrays may be freed or changed after each call returns.
 * Dense blocks (right-hand sides B, solutions X): n x nrhs, column-major, leading dimension >= max(1, n), in
 * host memory or, with SPADE_MEMORY_DEVICE, CUDA device memory (needs the solves on the GPU).
 *
 * Errors: every function that can fail returns a spade_status. On failure, spade_last_error() gives a
 * one-line message and spade_last_error_column() the column (0-based, the caller's numbering) where it
 * applies; both are per thread and describe the last failed call of that thread. Output handles are
 * written only on success (set to NULL on failure). No function prints, aborts or lets a C++ exception out.
 *
 * Threads: a handle is used by one thread at a time; different handles may be used concurrently.
 */
#ifndef SPADE_SPADE_H
#define SPADE_SPADE_H

#include <stdint.h>

#include "spade/version.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Results of every call. The three failure tiers are those of spade/error.hpp. */
typedef enum spade_status {
  SPADE_SUCCESS = 0,
  SPADE_INVALID_INPUT = 1,   /* misuse or bad data: NULL arguments, bad shapes or CSC arrays, a phase out
                                of order, a pattern that differs from the analyzed one, NaN/Inf values */
  SPADE_RESOURCE_ERROR = 2,  /* out of memory, index overflow, CUDA or library failure, no usable GPU */
  SPADE_NUMERICAL_ERROR = 3, /* breakdown: spade_last_numerical_kind() says which, with the column */
  SPADE_INTERNAL_ERROR = 4   /* anything else (a bug): the message says what */
} spade_status;

/* What broke down, for SPADE_NUMERICAL_ERROR (spade::NumericalError::Kind). */
typedef enum spade_numerical_kind {
  SPADE_NUMERICAL_NONE = 0,              /* the last failure was not numerical */
  SPADE_NOT_POSITIVE_DEFINITE = 1,       /* a non-positive pivot at spade_last_error_column() */
  SPADE_SINGULAR = 2,                    /* a zero pivot */
  SPADE_NOT_FINITE = 3,                  /* a NaN or Inf appeared */
  SPADE_NO_PROGRESS = 4                  /* a GPU spin-wait gave up */
} spade_numerical_kind;

typedef enum spade_ordering {
  SPADE_ORDERING_AUTO = 0,   /* AMD, and METIS as well when AMD's factor is fill- and flop-heavy; keeps the
                                ordering with the smaller predicted nnz(L) (CHOLMOD's rule) */
  SPADE_ORDERING_AMD = 1,    /* approximate minimum degree (SuiteSparse AMD) */
  SPADE_ORDERING_METIS = 2,  /* nested dissection (METIS_NodeND) */
  SPADE_ORDERING_NATURAL = 3, /* no permutation */
  SPADE_ORDERING_COLAMD = 4   /* column approximate minimum degree on A's columns (SuiteSparse COLAMD) */
} spade_ordering;

/* Where the solves run (the CLI's --device). */
typedef enum spade_placement {
  SPADE_PLACEMENT_AUTO = 0, /* the GPU when one is usable (sm_70 or newer) and the factor fits, else the host */
  SPADE_PLACEMENT_GPU = 1,  /* the GPU, or SPADE_RESOURCE_ERROR when it cannot */
  SPADE_PLACEMENT_CPU = 2   /* the host; CUDA is never touched */
} spade_placement;

/* The precision of spade_solve_refined's corrections A d = r on the GPU (RefineOptions::corrections; the
   host solves in FP64 whatever this says). */
typedef enum spade_corrections {
  SPADE_CORRECTIONS_AUTO = 0, /* FP32 where the GPU solve is bandwidth-bound (large factors), else FP64 */
  SPADE_CORRECTIONS_FP32 = 1, /* mixed precision: the corrections read the factor rounded to FP32 (half its
                                 bytes; residuals, backward errors and X stay FP64), FP64 again after one
                                 fails to halve the backward error */
  SPADE_CORRECTIONS_FP64 = 2
} spade_corrections;

/* Where the caller's right-hand sides and solutions live. */
typedef enum spade_memory { SPADE_MEMORY_HOST = 0, SPADE_MEMORY_DEVICE = 1 } spade_memory;

/* Options of an analysis and of the factor and solves made from it. Start from spade_default_options() or
   SPADE_OPTIONS_INIT, then change fields. */
typedef struct spade_options {
  spade_ordering ordering;   /* default SPADE_ORDERING_AUTO */
  int threads;               /* factorization and host solve threads; 0 (default) = OpenMP's default */
  spade_placement placement; /* default SPADE_PLACEMENT_AUTO */
  int refine_max_steps;      /* spade_solve_refined: at most this many corrections; default 10 */
  double refine_tolerance;   /* stop once berr <= this; 0 (default) = 2 * machine epsilon */
  int partitioned_inverse;   /* nonzero (default 1): a Cholesky factor's GPU solve also builds, without
                                waiting for it, a plan of dense inverted pieces of merged tree levels, and
                                solves on it once it is ready (SolverOptions::partitioned_inverse; faster
                                solves on small factors); 0: the per-supernode plan alone */
  spade_corrections refine_corrections; /* default SPADE_CORRECTIONS_AUTO */
} spade_options;

#define SPADE_OPTIONS_INIT {SPADE_ORDERING_AUTO, 0, SPADE_PLACEMENT_AUTO, 10, 0.0, 1, SPADE_CORRECTIONS_AUTO}

/* A sparse matrix given by the caller (see the file comment): n x n, CSC, 0-based, host memory. */
typedef struct spade_csc {
  int32_t n;
  const int64_t* col_ptr; /* n + 1 entries, col_ptr[0] = 0, non-decreasing */
  const int32_t* row_ind; /* col_ptr[n] entries, in [0, n), strictly increasing in each column */
  const double* values;   /* col_ptr[n] entries; may be NULL for spade_analyze (only the pattern is read) */
} spade_csc;

/* Figures of an analysis. */
typedef struct spade_analysis_info {
  int32_t n;
  int64_t nnz_l;          /* entries of the factor L (the lower triangle, diagonal included) */
  int32_t supernodes;
  double flops;           /* of the factorization */
  spade_ordering ordering; /* the ordering used (never SPADE_ORDERING_AUTO) */
} spade_analysis_info;

/* Why the refinement stopped (spade::RefinementResult::Stop). */
typedef enum spade_refine_stop {
  SPADE_REFINE_CONVERGED = 0,  /* berr reached the tolerance */
  SPADE_REFINE_STAGNATED = 1,  /* a step failed to halve berr; the better iterate before it is returned */
  SPADE_REFINE_MAX_STEPS = 2   /* refine_max_steps corrections were made */
} spade_refine_stop;

/* Outcome of spade_solve_refined: berr and residual_norm are maxima over the right-hand sides of the
   componentwise backward error max_i |b - A x|_i / (|A| |x| + |b|)_i (Oettli-Prager) and of ||b - A x||_inf. */
typedef struct spade_refinement {
  int steps;              /* corrections made after the first solve */
  double first_berr;      /* berr of the unrefined solution */
  double berr;            /* berr of the returned X */
  double residual_norm;   /* ||b - A x||_inf of the returned X */
  spade_refine_stop stop;
} spade_refinement;

/* The ordering, the symbolic analysis and the Solver that owns the later phases. */
typedef struct spade_analysis spade_analysis;
/* The numeric factor of one analysis (and, with the solves on the GPU, its device plan). */
typedef struct spade_factor spade_factor;

/* The options' defaults (the same as SPADE_OPTIONS_INIT). */
spade_options spade_default_options(void);

/* "MAJOR.MINOR.PATCH" of the library linked (SPADE_VERSION_STRING of the headers compiled against). */
const char* spade_version(void);

/* The message of the calling thread's last failed call ("" before any failure). Valid until that thread's
   next failing call. */
const char* spade_last_error(void);
/* The column (0-based, the caller's numbering) of the calling thread's last failure, or -1 where none
   applies (always set with SPADE_NOT_POSITIVE_DEFINITE). */
int64_t spade_last_error_column(void);
/* The kind of the calling thread's last SPADE_NUMERICAL_ERROR; SPADE_NUMERICAL_NONE after another failure. */
spade_numerical_kind spade_last_numerical_kind(void);

/* Orders and analyzes the pattern of A (values are not read and may be NULL). options may be NULL (the
   defaults). On success *analysis is a new handle, freed with spade_analysis_free.
   SPADE_INVALID_INPUT for NULL arguments, bad CSC arrays, an unknown option value, a pattern that is not
   symmetric; SPADE_RESOURCE_ERROR for memory or a failure of METIS/AMD. */
spade_status spade_analyze(const spade_csc* A, const spade_options* options, spade_analysis** analysis);

/* The analysis' figures. SPADE_INVALID_INPUT for NULL arguments. */
spade_status spade_analysis_get_info(const spade_analysis* analysis, spade_analysis_info* info);

/* Frees an analysis (NULL is allowed). Its factor, if one is alive, must be freed first. */
void spade_analysis_free(spade_analysis* analysis);

/* Factorizes A (the analyzed pattern, symmetric values, positive definite) on the host, with the GPU plan
   built beside it when the solves go to the GPU. One factor per analysis at a time: the factor refers to
   its analysis, which must outlive it. On success *factor is a new handle, freed with spade_factor_free.
   SPADE_INVALID_INPUT for NULL arguments, a second live factor, a different pattern, NaN/Inf or
   non-symmetric values; SPADE_NUMERICAL_ERROR (SPADE_NOT_POSITIVE_DEFINITE with the column) for a matrix
   that is not positive definite; SPADE_RESOURCE_ERROR for memory, or a GPU that placement GPU cannot use. */
spade_status spade_factorize(spade_analysis* analysis, const spade_csc* A, spade_factor** factor);

/* Factorizes new values of the same pattern in place (the analysis and the GPU plan are reused). The errors
   of spade_factorize; after a failure the factor refuses to solve until a refactorization succeeds. */
spade_status spade_refactorize(spade_factor* factor, const spade_csc* A);

/* Frees a factor (NULL is allowed); its analysis may then be factorized again. */
void spade_factor_free(spade_factor* factor);

/* 1 when the solves run on the GPU, 0 on the host; reason (may be NULL) receives why, one line, valid while
   the factor lives and is not refactorized. SPADE_INVALID_INPUT for a NULL factor or on_gpu. */
spade_status spade_factor_placement(const spade_factor* factor, int* on_gpu, const char** reason);

/* Solves A X = B in place: X holds B on entry (n x nrhs, column-major, leading dimension ldx >= max(1, n))
   and the solution on return, in host or device memory as `memory` says. nrhs >= 1. Synchronous.
   SPADE_INVALID_INPUT for bad arguments, a NaN/Inf in host right-hand sides, a failed refactorization,
   device memory without the GPU solve; SPADE_NUMERICAL_ERROR or SPADE_RESOURCE_ERROR when the GPU fails. */
spade_status spade_solve(spade_factor* factor, int32_t nrhs, double* X, int32_t ldx, spade_memory memory);

/* Solves A X = B with iterative refinement against the last factorized A (options refine_max_steps and
   refine_tolerance): B (ldb) is not modified, X (ldx) receives the solution; both n x nrhs, column-major,
   in `memory`. result may be NULL. The errors of spade_solve. */
spade_status spade_solve_refined(spade_factor* factor, int32_t nrhs, const double* B, int32_t ldb, double* X,
                                 int32_t ldx, spade_memory memory, spade_refinement* result);

#ifdef __cplusplus
}
#endif

#endif /* SPADE_SPADE_H */
