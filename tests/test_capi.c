/* Tests of the C interface (include/spade/spade.h), compiled as C99: the phases on generated 2D Laplacians
 * against known solutions, refactorization, refinement, placement, device memory (with a GPU; the CUDA
 * runtime's C interface allocates it), and every error path with its status,
 * message and column. Prints one line per check that fails (and "SKIP: ..." for the GPU checks that need a
 * GPU); exits 0 when every check passed. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "spade/spade.h"

static int failures = 0;

#define CHECK(cond)                                                                  \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      ++failures;                                                                    \
      fprintf(stderr, "%s:%d: CHECK(%s) failed (last error: %s)\n", __FILE__, __LINE__, #cond, \
              spade_last_error());                                                   \
    }                                                                                \
  } while (0)

/* A status and a message that names `word`. */
#define CHECK_FAILS(call, status, word)                                               \
  do {                                                                                \
    spade_status s_ = (call);                                                         \
    if (s_ != (status) || strstr(spade_last_error(), (word)) == NULL) {               \
      ++failures;                                                                     \
      fprintf(stderr, "%s:%d: %s gave status %d, message '%s'; expected %d naming '%s'\n", __FILE__, \
              __LINE__, #call, (int)s_, spade_last_error(), (int)(status), (word));   \
    }                                                                                 \
  } while (0)

/* The nx x ny five-point Laplacian (4 on the diagonal, -1 per grid neighbour), both triangles, CSC, scaled
   by `scale`; the node `negative` (or -1 for none) gets -1 on its diagonal. The arrays are malloc'ed. */
typedef struct {
  spade_csc csc;
  int64_t* col_ptr;
  int32_t* row_ind;
  double* values;
} Matrix;

static Matrix laplacian(int nx, int ny, double scale, int negative) {
  Matrix m;
  const int n = nx * ny;
  m.col_ptr = malloc(sizeof(int64_t) * (n + 1));
  m.row_ind = malloc(sizeof(int32_t) * 5 * n);
  m.values = malloc(sizeof(double) * 5 * n);
  int64_t p = 0;
  for (int j = 0; j < n; ++j) {
    const int x = j % nx, y = j / nx;
    m.col_ptr[j] = p;
    /* rows in increasing order: j - nx, j - 1, j, j + 1, j + nx */
    if (y > 0) { m.row_ind[p] = j - nx; m.values[p++] = -scale; }
    if (x > 0) { m.row_ind[p] = j - 1; m.values[p++] = -scale; }
    m.row_ind[p] = j; m.values[p++] = (j == negative ? -1.0 : 4.0) * scale;
    if (x + 1 < nx) { m.row_ind[p] = j + 1; m.values[p++] = -scale; }
    if (y + 1 < ny) { m.row_ind[p] = j + nx; m.values[p++] = -scale; }
  }
  m.col_ptr[n] = p;
  m.csc.n = n;
  m.csc.col_ptr = m.col_ptr;
  m.csc.row_ind = m.row_ind;
  m.csc.values = m.values;
  return m;
}

static void free_matrix(Matrix* m) {
  free(m->col_ptr);
  free(m->row_ind);
  free(m->values);
}

/* y := A x for the CSC matrix. */
static void multiply(const spade_csc* A, const double* x, double* y) {
  for (int i = 0; i < A->n; ++i) y[i] = 0;
  for (int j = 0; j < A->n; ++j)
    for (int64_t p = A->col_ptr[j]; p < A->col_ptr[j + 1]; ++p) y[A->row_ind[p]] += A->values[p] * x[j];
}

/* max_ij |X - X_true| / max |X_true| over an n x nrhs block with leading dimension ldx. */
static double relative_error(const double* X, int ldx, const double* X_true, int n, int nrhs) {
  double diff = 0, norm = 0;
  for (int r = 0; r < nrhs; ++r)
    for (int i = 0; i < n; ++i) {
      diff = fmax(diff, fabs(X[i + (size_t)r * ldx] - X_true[i + (size_t)r * n]));
      norm = fmax(norm, fabs(X_true[i + (size_t)r * n]));
    }
  return diff / norm;
}

static void test_version(void) {
  CHECK(strcmp(spade_version(), SPADE_VERSION_STRING) == 0);
  CHECK(SPADE_VERSION == SPADE_VERSION_MAJOR * 10000 + SPADE_VERSION_MINOR * 100 + SPADE_VERSION_PATCH);
  const spade_options a = spade_default_options(), b = SPADE_OPTIONS_INIT;
  CHECK(a.ordering == b.ordering && a.threads == b.threads && a.placement == b.placement &&
        a.refine_max_steps == b.refine_max_steps && a.refine_tolerance == b.refine_tolerance &&
        a.partitioned_inverse == b.partitioned_inverse && a.partitioned_inverse == 1 &&
        a.refine_corrections == b.refine_corrections && a.refine_corrections == SPADE_CORRECTIONS_AUTO);
  CHECK(a.ordering == SPADE_ORDERING_AUTO && a.placement == SPADE_PLACEMENT_AUTO && a.refine_max_steps == 10);
}

/* analyze, factorize, solve (nrhs = 3, ldx > n), solve_refined, refactorize, on the given placement. */
static void test_phases(spade_placement placement, spade_ordering ordering) {
  Matrix m = laplacian(12, 9, 1.0, -1);
  const int n = m.csc.n, nrhs = 3, ldx = n + 5;
  spade_options options = spade_default_options();
  options.placement = placement;
  options.ordering = ordering;
  options.threads = 2;
  spade_analysis* analysis = NULL;
  spade_factor* factor = NULL;
  CHECK(spade_analyze(&m.csc, &options, &analysis) == SPADE_SUCCESS && analysis != NULL);
  spade_analysis_info info;
  CHECK(spade_analysis_get_info(analysis, &info) == SPADE_SUCCESS);
  CHECK(info.n == n && info.nnz_l >= (m.col_ptr[n] + n) / 2 && info.supernodes >= 1 && info.flops > 0);
  CHECK(info.ordering != SPADE_ORDERING_AUTO);
  if (ordering != SPADE_ORDERING_AUTO) CHECK(info.ordering == ordering);
  CHECK(spade_factorize(analysis, &m.csc, &factor) == SPADE_SUCCESS && factor != NULL);
  int on_gpu = -1;
  const char* reason = NULL;
  CHECK(spade_factor_placement(factor, &on_gpu, &reason) == SPADE_SUCCESS && reason != NULL && reason[0] != 0);
  if (placement == SPADE_PLACEMENT_CPU) CHECK(on_gpu == 0);

  double* X_true = malloc(sizeof(double) * n * nrhs);
  double* B = malloc(sizeof(double) * n * nrhs);
  double* X = malloc(sizeof(double) * ldx * nrhs);
  for (int r = 0; r < nrhs; ++r) {
    for (int i = 0; i < n; ++i) X_true[i + r * n] = 1 + sin(i + r);
    multiply(&m.csc, X_true + r * n, B + r * n);
    for (int i = 0; i < n; ++i) X[i + r * ldx] = B[i + r * n];
  }
  CHECK(spade_solve(factor, nrhs, X, ldx, SPADE_MEMORY_HOST) == SPADE_SUCCESS);
  CHECK(relative_error(X, ldx, X_true, n, nrhs) < 1e-12);

  spade_refinement result;
  for (int i = 0; i < ldx * nrhs; ++i) X[i] = 0;
  CHECK(spade_solve_refined(factor, nrhs, B, n, X, ldx, SPADE_MEMORY_HOST, &result) == SPADE_SUCCESS);
  CHECK(result.berr < 1e-14 && result.berr <= result.first_berr && result.steps >= 0);
  CHECK(result.stop == SPADE_REFINE_CONVERGED || result.stop == SPADE_REFINE_STAGNATED);
  CHECK(relative_error(X, ldx, X_true, n, nrhs) < 1e-12);
  CHECK(spade_solve_refined(factor, 1, B, n, X, ldx, SPADE_MEMORY_HOST, NULL) == SPADE_SUCCESS);

  /* New values, same pattern: 2 A x = b gives half the solution. */
  Matrix twice = laplacian(12, 9, 2.0, -1);
  CHECK(spade_refactorize(factor, &twice.csc) == SPADE_SUCCESS);
  for (int r = 0; r < nrhs; ++r)
    for (int i = 0; i < n; ++i) X[i + r * ldx] = 2 * B[i + r * n];
  CHECK(spade_solve(factor, nrhs, X, ldx, SPADE_MEMORY_HOST) == SPADE_SUCCESS);
  CHECK(relative_error(X, ldx, X_true, n, nrhs) < 1e-12);

  spade_factor_free(factor);
  /* A freed factor lets the analysis be factorized again. */
  CHECK(spade_factorize(analysis, &m.csc, &factor) == SPADE_SUCCESS);
  spade_factor_free(factor);
  spade_analysis_free(analysis);
  free_matrix(&twice);
  free_matrix(&m);
  free(X_true);
  free(B);
  free(X);
}

static void test_errors(void) {
  Matrix m = laplacian(6, 5, 1.0, -1);
  const int n = m.csc.n;
  spade_options options = spade_default_options();
  options.placement = SPADE_PLACEMENT_CPU;
  spade_analysis* analysis = (spade_analysis*)&options; /* garbage that must be overwritten with NULL */
  spade_factor* factor = NULL;

  /* Arguments and options. */
  CHECK_FAILS(spade_analyze(NULL, &options, &analysis), SPADE_INVALID_INPUT, "A is NULL");
  CHECK(analysis == NULL);
  CHECK(spade_last_error_column() == -1 && spade_last_numerical_kind() == SPADE_NUMERICAL_NONE);
  CHECK_FAILS(spade_analyze(&m.csc, &options, NULL), SPADE_INVALID_INPUT, "analysis is NULL");
  spade_options bad = options;
  bad.ordering = (spade_ordering)7;
  CHECK_FAILS(spade_analyze(&m.csc, &bad, &analysis), SPADE_INVALID_INPUT, "ordering");
  bad = options;
  bad.placement = (spade_placement)-1;
  CHECK_FAILS(spade_analyze(&m.csc, &bad, &analysis), SPADE_INVALID_INPUT, "placement");
  bad = options;
  bad.threads = -2;
  CHECK_FAILS(spade_analyze(&m.csc, &bad, &analysis), SPADE_INVALID_INPUT, "threads");
  bad = options;
  bad.refine_corrections = (spade_corrections)3;
  CHECK_FAILS(spade_analyze(&m.csc, &bad, &analysis), SPADE_INVALID_INPUT, "refine_corrections");
  bad = options;
  bad.refine_tolerance = NAN;
  CHECK_FAILS(spade_analyze(&m.csc, &bad, &analysis), SPADE_INVALID_INPUT, "refine_tolerance");

  /* Bad CSC arrays: unsorted rows in column 0, an index out of range, a non-symmetric pattern. */
  m.row_ind[0] = 1;
  m.row_ind[1] = 0;
  CHECK(spade_analyze(&m.csc, &options, &analysis) == SPADE_INVALID_INPUT);
  m.row_ind[0] = 0;
  m.row_ind[1] = n;
  CHECK(spade_analyze(&m.csc, &options, &analysis) == SPADE_INVALID_INPUT);
  m.row_ind[1] = 1;
  CHECK(analysis == NULL);
  {
    /* 2 x 2 with only A(1, 0) off the diagonal. */
    const int64_t col_ptr[] = {0, 2, 3};
    const int32_t row_ind[] = {0, 1, 1};
    const double values[] = {2, 1, 2};
    const spade_csc lower = {2, col_ptr, row_ind, values};
    CHECK(spade_analyze(&lower, &options, &analysis) == SPADE_INVALID_INPUT && analysis == NULL);
  }

  /* Phases and shapes. */
  CHECK(spade_analyze(&m.csc, NULL, &analysis) == SPADE_SUCCESS); /* NULL options: the defaults */
  spade_analysis_free(analysis);
  {
    spade_csc pattern = m.csc; /* the analysis reads no values */
    pattern.values = NULL;
    CHECK(spade_analyze(&pattern, &options, &analysis) == SPADE_SUCCESS);
    CHECK_FAILS(spade_factorize(analysis, &pattern, &factor), SPADE_INVALID_INPUT, "values is NULL");
    spade_analysis_free(analysis);
  }
  CHECK(spade_analyze(&m.csc, &options, &analysis) == SPADE_SUCCESS);
  CHECK_FAILS(spade_factorize(analysis, NULL, &factor), SPADE_INVALID_INPUT, "A is NULL");
  CHECK(factor == NULL);
  Matrix other = laplacian(5, 6, 1.0, -1); /* same n, another pattern */
  CHECK_FAILS(spade_factorize(analysis, &other.csc, &factor), SPADE_INVALID_INPUT, "pattern");
  CHECK(spade_factorize(analysis, &m.csc, &factor) == SPADE_SUCCESS);
  spade_factor* second = NULL;
  CHECK_FAILS(spade_factorize(analysis, &m.csc, &second), SPADE_INVALID_INPUT, "already has a factor");
  double* X = malloc(sizeof(double) * n * 2);
  double* B = malloc(sizeof(double) * n * 2);
  for (int i = 0; i < 2 * n; ++i) B[i] = X[i] = 1;
  CHECK_FAILS(spade_solve(factor, 0, X, n, SPADE_MEMORY_HOST), SPADE_INVALID_INPUT, "nrhs");
  CHECK_FAILS(spade_solve(factor, 1, X, n - 1, SPADE_MEMORY_HOST), SPADE_INVALID_INPUT, "leading dimension");
  CHECK_FAILS(spade_solve(factor, 1, NULL, n, SPADE_MEMORY_HOST), SPADE_INVALID_INPUT, "X is NULL");
  CHECK_FAILS(spade_solve(NULL, 1, X, n, SPADE_MEMORY_HOST), SPADE_INVALID_INPUT, "factor is NULL");
  CHECK_FAILS(spade_solve(factor, 1, X, n, (spade_memory)5), SPADE_INVALID_INPUT, "spade_memory");
  /* Device memory on a host-only solver (placement cpu): refused before any pointer is read. */
  CHECK_FAILS(spade_solve(factor, 1, X, n, SPADE_MEMORY_DEVICE), SPADE_INVALID_INPUT, "device memory");
  CHECK_FAILS(spade_solve_refined(factor, 2, B, n - 1, X, n, SPADE_MEMORY_HOST, NULL), SPADE_INVALID_INPUT,
              "leading dimension");
  B[3] = NAN;
  CHECK(spade_solve(factor, 2, B, n, SPADE_MEMORY_HOST) == SPADE_INVALID_INPUT);
  CHECK(spade_solve_refined(factor, 2, B, n, X, n, SPADE_MEMORY_HOST, NULL) == SPADE_INVALID_INPUT);

  /* A refactorization with another pattern fails, and the factor refuses to solve until one succeeds. */
  CHECK_FAILS(spade_refactorize(factor, &other.csc), SPADE_INVALID_INPUT, "pattern");
  CHECK_FAILS(spade_solve(factor, 1, X, n, SPADE_MEMORY_HOST), SPADE_INVALID_INPUT, "factoriz");
  CHECK(spade_refactorize(factor, &m.csc) == SPADE_SUCCESS);

  /* Not positive definite: the column, in the caller's numbering; the factor then refuses to solve until
     a refactorization succeeds. */
  const int column = 17;
  Matrix indefinite = laplacian(6, 5, 1.0, column);
  CHECK(spade_refactorize(factor, &indefinite.csc) == SPADE_NUMERICAL_ERROR);
  CHECK(spade_last_numerical_kind() == SPADE_NOT_POSITIVE_DEFINITE);
  CHECK(spade_last_error_column() == column);
  CHECK_FAILS(spade_solve(factor, 1, X, n, SPADE_MEMORY_HOST), SPADE_INVALID_INPUT, "factoriz");
  CHECK(spade_last_error_column() == -1);
  CHECK(spade_refactorize(factor, &m.csc) == SPADE_SUCCESS);
  for (int i = 0; i < n; ++i) X[i] = 1;
  CHECK(spade_solve(factor, 1, X, n, SPADE_MEMORY_HOST) == SPADE_SUCCESS);
  spade_factor_free(factor);

  /* The same from a first factorization: no factor handle comes back. */
  factor = NULL;
  CHECK(spade_factorize(analysis, &indefinite.csc, &factor) == SPADE_NUMERICAL_ERROR && factor == NULL);
  CHECK(spade_last_error_column() == column);
  /* NaN in the values. */
  indefinite.values[0] = NAN;
  CHECK(spade_factorize(analysis, &indefinite.csc, &factor) != SPADE_SUCCESS && factor == NULL);
  spade_analysis_free(analysis);

  CHECK_FAILS(spade_analysis_get_info(NULL, NULL), SPADE_INVALID_INPUT, "NULL");
  spade_analysis_free(NULL);
  spade_factor_free(NULL);

  free_matrix(&indefinite);
  free_matrix(&other);
  free_matrix(&m);
  free(X);
  free(B);
}

/* With the solves on the GPU: right-hand sides and solutions in device memory, plain and refined (the
   corrections forced to FP32: mixed-precision refinement through the C options). */
static void test_device_memory(void) {
  Matrix m = laplacian(20, 16, 1.0, -1);
  const int n = m.csc.n, nrhs = 2;
  spade_options options = spade_default_options();
  options.placement = SPADE_PLACEMENT_GPU;
  options.refine_corrections = SPADE_CORRECTIONS_FP32;
  spade_analysis* analysis = NULL;
  spade_factor* factor = NULL;
  CHECK(spade_analyze(&m.csc, &options, &analysis) == SPADE_SUCCESS);
  CHECK(spade_factorize(analysis, &m.csc, &factor) == SPADE_SUCCESS);
  const size_t bytes = sizeof(double) * n * nrhs;
  double* X_true = malloc(bytes);
  double* B = malloc(bytes);
  double* X = malloc(bytes);
  for (int r = 0; r < nrhs; ++r) {
    for (int i = 0; i < n; ++i) X_true[i + r * n] = 1 + sin(i + 2 * r);
    multiply(&m.csc, X_true + r * n, B + r * n);
  }
  double *dB = NULL, *dX = NULL;
  CHECK(cudaMalloc((void**)&dB, bytes) == cudaSuccess && cudaMalloc((void**)&dX, bytes) == cudaSuccess);
  CHECK(cudaMemcpy(dX, B, bytes, cudaMemcpyHostToDevice) == cudaSuccess);
  CHECK(spade_solve(factor, nrhs, dX, n, SPADE_MEMORY_DEVICE) == SPADE_SUCCESS);
  CHECK(cudaMemcpy(X, dX, bytes, cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(relative_error(X, n, X_true, n, nrhs) < 1e-12);
  spade_refinement result;
  CHECK(cudaMemcpy(dB, B, bytes, cudaMemcpyHostToDevice) == cudaSuccess);
  CHECK(cudaMemset(dX, 0, bytes) == cudaSuccess);
  CHECK(spade_solve_refined(factor, nrhs, dB, n, dX, n, SPADE_MEMORY_DEVICE, &result) == SPADE_SUCCESS);
  CHECK(result.berr < 1e-14);
  CHECK(cudaMemcpy(X, dX, bytes, cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(relative_error(X, n, X_true, n, nrhs) < 1e-12);
  cudaFree(dB);
  cudaFree(dX);
  spade_factor_free(factor);
  spade_analysis_free(analysis);
  free_matrix(&m);
  free(X_true);
  free(B);
  free(X);
}

/* Placement gpu: without a usable GPU the factorization is a resource error that says why. */
static void test_gpu_placement(void) {
  Matrix m = laplacian(8, 8, 1.0, -1);
  spade_options options = spade_default_options();
  spade_analysis* analysis = NULL;
  spade_factor* factor = NULL;
  CHECK(spade_analyze(&m.csc, &options, &analysis) == SPADE_SUCCESS);
  CHECK(spade_factorize(analysis, &m.csc, &factor) == SPADE_SUCCESS);
  int on_gpu = 0;
  const char* reason = NULL;
  char why[512] = "";
  CHECK(spade_factor_placement(factor, &on_gpu, &reason) == SPADE_SUCCESS);
  if (reason != NULL) snprintf(why, sizeof why, "%s", reason); /* valid only while the factor lives */
  spade_factor_free(factor);
  spade_analysis_free(analysis);
  if (on_gpu) {
    printf("placement auto: %s; running the GPU placement\n", why);
    test_phases(SPADE_PLACEMENT_GPU, SPADE_ORDERING_AUTO);
    test_device_memory();
  } else {
    printf("SKIP: the GPU solve (placement gpu, device memory) needs a usable GPU; placement auto says: %s\n",
           why);
    options.placement = SPADE_PLACEMENT_GPU;
    CHECK(spade_analyze(&m.csc, &options, &analysis) == SPADE_SUCCESS);
    CHECK_FAILS(spade_factorize(analysis, &m.csc, &factor), SPADE_RESOURCE_ERROR, "placement gpu");
    CHECK(factor == NULL);
    spade_analysis_free(analysis);
  }
  free_matrix(&m);
}

/* The last error is per thread: a failure in another thread leaves this thread's message and column alone. */
typedef struct {
  spade_status status; /* of the failing call in the other thread */
  int own_message;     /* whether that thread then read its own message */
} OtherThread;

static void* fail_elsewhere(void* arg) {
  OtherThread* other = arg;
  other->status = spade_solve(NULL, 1, NULL, 1, SPADE_MEMORY_HOST);
  other->own_message = strstr(spade_last_error(), "factor is NULL") != NULL;
  return NULL;
}

static void test_thread_local_last_error(void) {
  Matrix indefinite = laplacian(4, 4, 1.0, 5);
  spade_options options = spade_default_options();
  options.placement = SPADE_PLACEMENT_CPU;
  spade_analysis* analysis = NULL;
  spade_factor* factor = NULL;
  CHECK(spade_analyze(&indefinite.csc, &options, &analysis) == SPADE_SUCCESS);
  CHECK(spade_factorize(analysis, &indefinite.csc, &factor) == SPADE_NUMERICAL_ERROR);
  OtherThread other = {SPADE_SUCCESS, 0};
  pthread_t thread;
  CHECK(pthread_create(&thread, NULL, fail_elsewhere, &other) == 0);
  CHECK(pthread_join(thread, NULL) == 0);
  CHECK(other.status == SPADE_INVALID_INPUT && other.own_message == 1);
  CHECK(spade_last_numerical_kind() == SPADE_NOT_POSITIVE_DEFINITE && spade_last_error_column() == 5);
  CHECK(strstr(spade_last_error(), "factor is NULL") == NULL);
  spade_analysis_free(analysis);
  free_matrix(&indefinite);
}

int main(void) {
  test_version();
  test_phases(SPADE_PLACEMENT_CPU, SPADE_ORDERING_AUTO);
  test_phases(SPADE_PLACEMENT_CPU, SPADE_ORDERING_METIS);
  test_phases(SPADE_PLACEMENT_AUTO, SPADE_ORDERING_AMD);
  test_phases(SPADE_PLACEMENT_CPU, SPADE_ORDERING_NATURAL);
  test_errors();
  test_thread_local_last_error();
  test_gpu_placement();
  if (failures > 0) {
    fprintf(stderr, "test_capi: %d checks failed\n", failures);
    return 1;
  }
  printf("test_capi: all checks passed\n");
  return 0;
}
