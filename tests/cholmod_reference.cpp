#include "cholmod_reference.hpp"

#include <cholmod.h>

#include <cstring>
#include <string>

#include "spade/error.hpp"

namespace spade::testing {

struct CholmodReference::State {
  cholmod_common common;
  cholmod_sparse* A = nullptr;
  cholmod_factor* L = nullptr;
  index_t n = 0;
};

CholmodReference::CholmodReference(const SparseMatrix& A) : state_(std::make_unique<State>()) {
  cholmod_l_start(&state_->common);
  state_->n = A.rows();
  state_->A = cholmod_l_allocate_sparse(A.rows(), A.cols(), A.nnz(), 1, 1, -1, CHOLMOD_REAL, &state_->common);
  if (state_->A == nullptr) throw ResourceError("CHOLMOD: cannot allocate the matrix");
  auto* p = static_cast<SuiteSparse_long*>(state_->A->p);
  auto* i = static_cast<SuiteSparse_long*>(state_->A->i);
  for (std::size_t k = 0; k < A.col_ptr().size(); ++k) p[k] = A.col_ptr()[k];
  for (std::size_t k = 0; k < A.row_ind().size(); ++k) i[k] = A.row_ind()[k];
  std::memcpy(state_->A->x, A.values().data(), A.values().size() * sizeof(double));
}

CholmodReference::~CholmodReference() {
  cholmod_l_free_factor(&state_->L, &state_->common);
  cholmod_l_free_sparse(&state_->A, &state_->common);
  cholmod_l_finish(&state_->common);
}

void CholmodReference::analyze() {
  cholmod_l_free_factor(&state_->L, &state_->common);
  state_->common.supernodal = CHOLMOD_SUPERNODAL;
  state_->L = cholmod_l_analyze(state_->A, &state_->common);
  if (state_->L == nullptr) throw ResourceError("CHOLMOD: analyze failed");
}

void CholmodReference::factorize() {
  cholmod_l_factorize(state_->A, state_->L, &state_->common);
  if (state_->common.status == CHOLMOD_NOT_POSDEF)
    throw NumericalError(NumericalError::Kind::not_positive_definite, static_cast<std::int64_t>(state_->L->minor),
                         "CHOLMOD: matrix not positive definite");
  if (state_->common.status != CHOLMOD_OK) throw ResourceError("CHOLMOD: factorize failed");
}

std::vector<double> CholmodReference::solve(const std::vector<double>& B, int nrhs) {
  cholmod_dense* b = cholmod_l_allocate_dense(state_->n, nrhs, state_->n, CHOLMOD_REAL, &state_->common);
  std::memcpy(b->x, B.data(), B.size() * sizeof(double));
  cholmod_dense* x = cholmod_l_solve(CHOLMOD_A, state_->L, b, &state_->common);
  if (x == nullptr) {
    cholmod_l_free_dense(&b, &state_->common);
    throw ResourceError("CHOLMOD: solve failed");
  }
  std::vector<double> X(static_cast<const double*>(x->x), static_cast<const double*>(x->x) + B.size());
  cholmod_l_free_dense(&x, &state_->common);
  cholmod_l_free_dense(&b, &state_->common);
  return X;
}

double CholmodReference::nnz_l() const { return state_->common.lnz; }
double CholmodReference::flops() const { return state_->common.fl; }

}  // namespace spade::testing
