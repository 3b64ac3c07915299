// Fill-reducing orderings for sparse factorizations: a symmetric permutation P chosen from the pattern of a
// square matrix A so that the factor of P A P^T has few nonzeros.
//
// Convention (the one AMD and METIS use): perm[k] is the original (0-based) index of the k-th pivot, so the
// factored matrix is (P A P^T)(k, l) = A(perm[k], perm[l]), and iperm = inverse_permutation(perm) gives the
// position of original index i: iperm[perm[k]] = k.
//
// References: Amestoy, Davis, Duff, "An approximate minimum degree ordering algorithm", SIAM J. Matrix
// Anal. Appl. 17(4), 1996 (SuiteSparse AMD); Karypis, Kumar, "A fast and high quality multilevel scheme for
// partitioning irregular graphs", SIAM J. Sci. Comput. 20(1), 1998 (METIS nested dissection); Davis, Gilbert,
// Larimore, Ng, "A column approximate minimum degree ordering algorithm", ACM Trans. Math. Softw. 30(3), 2004
// (SuiteSparse COLAMD).
#pragma once

#include <string>
#include <vector>

#include "spade/sparse_matrix.hpp"

namespace spade {

enum class OrderingMethod {
  natural,  ///< the identity: factor A as it is numbered
  amd,      ///< approximate minimum degree (SuiteSparse AMD, default Control parameters)
  metis,    ///< multilevel nested dissection (METIS_NodeND, default options)
  colamd,   ///< column approximate minimum degree on A's own (unsymmetric) pattern (SuiteSparse COLAMD,
            ///< default knobs): the ordering SuperLU_DIST offers for an LU with static pivoting, applied
            ///< symmetrically; for a symmetric pattern it orders A^T A and is rarely better than AMD
};

/// Parses "natural", "amd", "metis" or "colamd" (exact, lower case). Throws InvalidInput naming the valid
/// names otherwise.
OrderingMethod parse_ordering_method(const std::string& name);

/// The name parse_ordering_method accepts: "natural", "amd", "metis" or "colamd".
std::string to_string(OrderingMethod method);

/// Fill-reducing ordering of the square matrix `A` (n x n, host memory) from its pattern only: values are
/// never read. amd and metis read both triangles and symmetrize the pattern as A + A^T, the diagonal
/// ignored; colamd reads A's pattern as it is (its columns), diagonal included.
/// Returns perm (length n, a permutation of 0..n-1) with perm[k] = the original index of the k-th pivot.
/// amd: amd_order (amd_l_order when the symmetrized pattern has more than 2^31 - 1 entries);
/// metis: METIS_NodeND; colamd: colamd (colamd_l when A has more than 2^31 - 1 entries); natural: the
/// identity. Every method returns the identity when n <= 1 or A has no
/// off-diagonal entries (no order has any fill then).
/// Throws InvalidInput for a non-square matrix; ResourceError when AMD, METIS or COLAMD reports failure (the message
/// names the status code), when the graph is too large for METIS's 32-bit idx_t, or when the library
/// returns something that is not a permutation.
std::vector<index_t> fill_reducing_ordering(const SparseMatrix& A, OrderingMethod method);

/// The inverse permutation: iperm[perm[k]] = k. Throws InvalidInput when `perm` is not a permutation of
/// 0..perm.size()-1.
std::vector<index_t> inverse_permutation(const std::vector<index_t>& perm);

}  // namespace spade
