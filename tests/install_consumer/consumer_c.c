/* A user's C program against an installed spade (spade/spade.h): solves the 1D Laplacian tridiag(-1, 2, -1)
   of order 50 with a known solution on the host. Exits 0 on success, 1 with a message otherwise. */
#include <math.h>
#include <stdio.h>

#include <spade/spade.h>

#define N 50

int main(void) {
  int64_t col_ptr[N + 1];
  int32_t row_ind[3 * N];
  double values[3 * N], x[N], x_true[N];
  int64_t p = 0;
  for (int j = 0; j < N; ++j) {
    col_ptr[j] = p;
    if (j > 0) { row_ind[p] = j - 1; values[p++] = -1; }
    row_ind[p] = j; values[p++] = 2;
    if (j + 1 < N) { row_ind[p] = j + 1; values[p++] = -1; }
    x_true[j] = 1 + j % 7;
  }
  col_ptr[N] = p;
  for (int i = 0; i < N; ++i) x[i] = 2 * x_true[i] - (i > 0 ? x_true[i - 1] : 0) - (i + 1 < N ? x_true[i + 1] : 0);

  const spade_csc A = {N, col_ptr, row_ind, values};
  spade_options options = SPADE_OPTIONS_INIT;
  options.placement = SPADE_PLACEMENT_CPU;
  spade_analysis* analysis = NULL;
  spade_factor* factor = NULL;
  if (spade_analyze(&A, &options, &analysis) != SPADE_SUCCESS || spade_factorize(analysis, &A, &factor) != SPADE_SUCCESS ||
      spade_solve(factor, 1, x, N, SPADE_MEMORY_HOST) != SPADE_SUCCESS) {
    fprintf(stderr, "consumer_c: %s\n", spade_last_error());
    return 1;
  }
  double error = 0;
  for (int i = 0; i < N; ++i) error = fmax(error, fabs(x[i] - x_true[i]));
  spade_factor_free(factor);
  spade_analysis_free(analysis);
  if (!(error < 1e-12)) {
    fprintf(stderr, "consumer_c: error %g\n", error);
    return 1;
  }
  printf("spade %s from C: max error %.1e\n", spade_version(), error);
  return 0;
}
