// The reference BLAS/LAPACK routines spade's host code calls (Fortran interface, 32-bit integers: the
// LP64 OpenBLAS that Debian ships), and OpenBLAS's thread-count control. Internal header.
#pragma once

extern "C" {
void dpotrf_(const char* uplo, const int* n, double* a, const int* lda, int* info);
void dtrtri_(const char* uplo, const char* diag, const int* n, double* a, const int* lda, int* info);
void dtrsm_(const char* side, const char* uplo, const char* transa, const char* diag, const int* m, const int* n,
            const double* alpha, const double* a, const int* lda, double* b, const int* ldb);
void dtrsv_(const char* uplo, const char* trans, const char* diag, const int* n, const double* a, const int* lda,
            double* x, const int* incx);
void dsyrk_(const char* uplo, const char* trans, const int* n, const int* k, const double* alpha, const double* a,
            const int* lda, const double* beta, double* c, const int* ldc);
void dgemm_(const char* transa, const char* transb, const int* m, const int* n, const int* k, const double* alpha,
            const double* a, const int* lda, const double* b, const int* ldb, const double* beta, double* c,
            const int* ldc);
void dgemv_(const char* trans, const int* m, const int* n, const double* alpha, const double* a, const int* lda,
            const double* x, const int* incx, const double* beta, double* y, const int* incy);
void dgetrf_(const int* m, const int* n, double* a, const int* lda, int* ipiv, int* info);
void dgetrs_(const char* trans, const int* n, const int* nrhs, const double* a, const int* lda, const int* ipiv,
             double* b, const int* ldb, int* info);
int openblas_get_num_threads(void);
void openblas_set_num_threads(int num_threads);
}

namespace spade {

// The one place that calls OpenBLAS-only symbols: everything else sets BLAS threads through these.

/// Sets OpenBLAS's thread count for the lifetime of the object, and restores the count it found after.
/// Process-wide: Debian 12's OpenBLAS 0.3.21 has no safe per-thread count (its OpenMP variant takes the
/// count from the calling thread's omp_get_max_threads(), but threads calling at different counts above 1
/// rewrite its global count and worker buffers under each other and get wrong products:
/// docs/benchmarks/blas_threads.md).
class BlasThreads {
 public:
  explicit BlasThreads(int threads) : saved_(openblas_get_num_threads()) { set(threads); }
  ~BlasThreads() { openblas_set_num_threads(saved_); }
  BlasThreads(const BlasThreads&) = delete;
  BlasThreads& operator=(const BlasThreads&) = delete;

  /// Changes the count while the object lives (no call when it is already `threads`).
  void set(int threads) {
    if (threads != current_) openblas_set_num_threads(current_ = threads);
  }

 private:
  int saved_;
  int current_ = -1;
};

/// OpenBLAS's thread count from now on, for programs that own the process (the benchmark drivers).
inline void set_blas_threads(int threads) { openblas_set_num_threads(threads); }

}  // namespace spade
