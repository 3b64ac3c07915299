// UMFPACK and KLU behind tests/lu_reference.hpp.
#include "lu_reference.hpp"

#include <klu.h>
#include <umfpack.h>

#include <string>

#include "spade/error.hpp"

namespace spade::testing {

struct LuReference::State {
  Library library;
  int n = 0;
  std::vector<int> ptr, ind;
  std::vector<double> values;
  void* umf_symbolic = nullptr;
  void* umf_numeric = nullptr;
  double control[UMFPACK_CONTROL];
  double info[UMFPACK_INFO];
  klu_common common;
  klu_symbolic* klu_sym = nullptr;
  klu_numeric* klu_num = nullptr;

  ~State() {
    if (umf_numeric) umfpack_di_free_numeric(&umf_numeric);
    if (umf_symbolic) umfpack_di_free_symbolic(&umf_symbolic);
    if (klu_num) klu_free_numeric(&klu_num, &common);
    if (klu_sym) klu_free_symbolic(&klu_sym, &common);
  }
};

namespace {

void umfpack_check(int status, const char* what) {
  if (status == UMFPACK_OK) return;
  if (status == UMFPACK_WARNING_singular_matrix)
    throw NumericalError(NumericalError::Kind::singular, -1, std::string(what) + ": UMFPACK finds the matrix singular");
  throw ResourceError(std::string(what) + ": UMFPACK failed with status " + std::to_string(status));
}

void klu_check(const klu_common& c, const char* what) {
  if (c.status == KLU_OK) return;
  if (c.status == KLU_SINGULAR)
    throw NumericalError(NumericalError::Kind::singular, -1, std::string(what) + ": KLU finds the matrix singular");
  throw ResourceError(std::string(what) + ": KLU failed with status " + std::to_string(c.status));
}

}  // namespace

LuReference::LuReference(Library library, const SparseMatrix& A) : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.library = library;
  s.n = A.rows();
  s.ptr.assign(A.col_ptr().begin(), A.col_ptr().end());
  s.ind.assign(A.row_ind().begin(), A.row_ind().end());
  s.values = A.values();
  umfpack_di_defaults(s.control);
  klu_defaults(&s.common);
}

LuReference::~LuReference() = default;

void LuReference::analyze() {
  State& s = *state_;
  if (s.library == Library::umfpack) {
    if (s.umf_symbolic) umfpack_di_free_symbolic(&s.umf_symbolic);
    umfpack_check(umfpack_di_symbolic(s.n, s.n, s.ptr.data(), s.ind.data(), s.values.data(), &s.umf_symbolic,
                                      s.control, s.info),
                  "umfpack_di_symbolic");
  } else {
    if (s.klu_sym) klu_free_symbolic(&s.klu_sym, &s.common);
    s.klu_sym = klu_analyze(s.n, s.ptr.data(), s.ind.data(), &s.common);
    klu_check(s.common, "klu_analyze");
  }
}

void LuReference::factorize() {
  State& s = *state_;
  if (s.library == Library::umfpack) {
    if (s.umf_numeric) umfpack_di_free_numeric(&s.umf_numeric);
    umfpack_check(umfpack_di_numeric(s.ptr.data(), s.ind.data(), s.values.data(), s.umf_symbolic, &s.umf_numeric,
                                     s.control, s.info),
                  "umfpack_di_numeric");
  } else {
    if (s.klu_num) klu_free_numeric(&s.klu_num, &s.common);
    s.klu_num = klu_factor(s.ptr.data(), s.ind.data(), s.values.data(), s.klu_sym, &s.common);
    klu_check(s.common, "klu_factor");
  }
}

std::vector<double> LuReference::solve(const std::vector<double>& B, int nrhs) {
  State& s = *state_;
  std::vector<double> X(B);
  if (s.library == Library::umfpack) {
    for (int r = 0; r < nrhs; ++r)
      umfpack_check(umfpack_di_solve(UMFPACK_A, s.ptr.data(), s.ind.data(), s.values.data(),
                                     X.data() + static_cast<std::size_t>(r) * s.n,
                                     B.data() + static_cast<std::size_t>(r) * s.n, s.umf_numeric, s.control, s.info),
                    "umfpack_di_solve");
  } else {
    klu_solve(s.klu_sym, s.klu_num, s.n, nrhs, X.data(), &s.common);
    klu_check(s.common, "klu_solve");
  }
  return X;
}

double LuReference::estimated_flops() const {
  const State& s = *state_;
  if (s.library == Library::umfpack) return s.umf_symbolic ? s.info[UMFPACK_FLOPS_ESTIMATE] : -1.0;
  return s.klu_sym ? s.klu_sym->est_flops : -1.0;
}

}  // namespace spade::testing
