// Maximum-product matching with scaling (see include/spade/matching.hpp), following Duff and Koster, "On
// algorithms for permuting large entries to the diagonal of a sparse matrix", SIAM J. Matrix Anal. Appl.
// 22(4), 2001: the weighted bipartite matching problem on the cost c(i, j) = log a_j - log |a(i, j)| (>= 0,
// a_j the largest magnitude in column j), solved as a minimum-cost perfect matching by shortest augmenting
// paths with dual variables (their section 4), the duals giving the scaling (their section 5).
//
// Invariants kept between augmentations (u for rows, v for columns):
//   reduced cost  r(i, j) = c(i, j) - u_i - v_j >= 0 for every nonzero entry,
//   r(i, j) = 0 for every matched entry.
// Each unmatched column j0 is matched by one Dijkstra search over alternating paths (column -> row along a
// nonzero entry with length r, row -> its matched column with length 0); with dist the distances to rows and
// L the distance of the first free row settled, u_i += dist_i - L and v_{col of i} -= dist_i - L for every
// row settled with dist_i < L, and v_j0 += L, keep both invariants after the path is flipped (the shortest
// path distances, truncated at L, are feasible potentials for the reduced costs).
#include "spade/matching.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <queue>
#include <string>
#include <utility>

#include "spade/ordering.hpp"

namespace spade {
namespace {

constexpr double infinity = std::numeric_limits<double>::infinity();

std::string entry_name(index_t i, index_t j) { return "A(" + std::to_string(i) + ", " + std::to_string(j) + ")"; }

/// Throws InvalidInput naming the first NaN or infinite value (column by column).
void require_finite(const SparseMatrix& A, const char* routine) {
  for (index_t j = 0; j < A.cols(); ++j)
    for (offset_t p = A.col_ptr()[j]; p < A.col_ptr()[j + 1]; ++p)
      if (!std::isfinite(A.values()[p]))
        throw InvalidInput(std::string(routine) + ": " + entry_name(A.row_ind()[p], j) + " is " +
                           std::to_string(A.values()[p]) + "; the matrix must be finite");
}

void require_square(const SparseMatrix& A, const char* routine) {
  if (!A.is_square())
    throw InvalidInput(std::string(routine) + ": the matrix must be square, but it is " + std::to_string(A.rows()) +
                       " x " + std::to_string(A.cols()));
}

std::string exponent_text(double e) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.4g", e);
  return buffer;
}

}  // namespace

MaximumProductMatching maximum_product_matching(const SparseMatrix& A) {
  constexpr const char* routine = "maximum_product_matching";
  require_square(A, routine);
  require_finite(A, routine);
  const index_t n = A.cols();
  const auto& ap = A.col_ptr();
  const auto& ai = A.row_ind();
  const auto& ax = A.values();

  // Column maxima, empty columns and rows (zero values are not edges), and the costs c(i, j) per entry
  // (infinite for a zero value, so that every loop below can skip it).
  std::vector<double> log_col_max(static_cast<std::size_t>(n));
  std::vector<char> row_has_entry(static_cast<std::size_t>(n), 0);
  std::vector<double> cost(ax.size(), infinity);
  for (index_t j = 0; j < n; ++j) {
    double col_max = 0;
    for (offset_t p = ap[j]; p < ap[j + 1]; ++p) {
      col_max = std::max(col_max, std::abs(ax[p]));
      if (ax[p] != 0) row_has_entry[ai[p]] = 1;
    }
    if (col_max == 0)
      throw StructurallySingular(StructurallySingular::Side::column, j,
                                 std::string(routine) + ": the matrix is structurally singular: column " +
                                     std::to_string(j) + " (0-based) has no nonzero entry");
    log_col_max[j] = std::log(col_max);
    for (offset_t p = ap[j]; p < ap[j + 1]; ++p)
      if (ax[p] != 0) cost[p] = log_col_max[j] - std::log(std::abs(ax[p]));
  }
  for (index_t i = 0; i < n; ++i)
    if (!row_has_entry[i])
      throw StructurallySingular(StructurallySingular::Side::row, i,
                                 std::string(routine) + ": the matrix is structurally singular: row " +
                                     std::to_string(i) + " (0-based) has no nonzero entry");

  // Initial duals (Duff and Koster, section 4): u_i = min_j c(i, j), v_j = min_i c(i, j) - u_i; then a
  // greedy matching on the entries whose reduced cost is exactly 0.
  std::vector<double> u(static_cast<std::size_t>(n), infinity), v(static_cast<std::size_t>(n), infinity);
  for (offset_t p = 0; p < static_cast<offset_t>(cost.size()); ++p) u[ai[p]] = std::min(u[ai[p]], cost[p]);
  for (index_t j = 0; j < n; ++j)
    for (offset_t p = ap[j]; p < ap[j + 1]; ++p) v[j] = std::min(v[j], cost[p] - u[ai[p]]);
  std::vector<index_t> row_of_col(static_cast<std::size_t>(n), -1), col_of_row(static_cast<std::size_t>(n), -1);
  for (index_t j = 0; j < n; ++j)
    for (offset_t p = ap[j]; p < ap[j + 1]; ++p) {
      const index_t i = ai[p];
      if (col_of_row[i] == -1 && cost[p] - u[i] == v[j]) {
        row_of_col[j] = i;
        col_of_row[i] = j;
        break;
      }
    }

  // Shortest augmenting paths, one Dijkstra search per unmatched column. Rounding can make a reduced cost a
  // few ulps negative; it is read as 0.
  std::vector<double> dist(static_cast<std::size_t>(n), infinity);
  std::vector<index_t> pred(static_cast<std::size_t>(n), -1);  ///< pred[i]: the column the path reaches row i from
  std::vector<char> settled(static_cast<std::size_t>(n), 0);
  std::vector<index_t> touched, settled_rows;
  using Item = std::pair<double, index_t>;
  std::priority_queue<Item, std::vector<Item>, std::greater<Item>> heap;
  for (index_t j0 = 0; j0 < n; ++j0) {
    if (row_of_col[j0] != -1) continue;
    // bound: the shortest path to a free row found so far. A path at least that long cannot be shorter than
    // the one the search will end with, so it is not followed (Duff and Koster's bound on the search).
    double bound = infinity;
    auto relax = [&](index_t j, double base) {
      for (offset_t p = ap[j]; p < ap[j + 1]; ++p) {
        const index_t k = ai[p];
        if (settled[k] || cost[p] == infinity) continue;
        const double d = base + std::max(0.0, cost[p] - u[k] - v[j]);
        if (d < dist[k] && d < bound) {
          if (dist[k] == infinity) touched.push_back(k);
          dist[k] = d;
          pred[k] = j;
          heap.emplace(d, k);
          if (col_of_row[k] == -1) bound = d;
        }
      }
    };
    relax(j0, 0.0);
    index_t free_row = -1;
    double shortest = 0;
    while (!heap.empty()) {
      const auto [d, i] = heap.top();
      heap.pop();
      if (settled[i] || d > dist[i]) continue;
      settled[i] = 1;
      settled_rows.push_back(i);
      if (col_of_row[i] == -1) {
        free_row = i;
        shortest = d;
        break;
      }
      relax(col_of_row[i], d);
    }
    if (free_row == -1) {
      // Every row reached is matched to one of the other columns reached: these k columns have their
      // nonzero entries in k - 1 rows (Hall's condition fails), so no perfect matching exists and column j0
      // stays unmatched in a maximum matching.
      const std::size_t k = settled_rows.size() + 1;
      throw StructurallySingular(
          StructurallySingular::Side::column, j0,
          std::string(routine) + ": the matrix is structurally singular: column " + std::to_string(j0) +
              " (0-based) cannot be matched: it and " + std::to_string(k - 1) + " other column" + (k == 2 ? "" : "s") +
              " have nonzero entries in only " + std::to_string(k - 1) + " row" + (k == 2 ? "" : "s"));
    }
    for (const index_t i : settled_rows) {
      if (i == free_row) continue;
      const double delta = dist[i] - shortest;  // <= 0
      u[i] += delta;
      v[col_of_row[i]] -= delta;
    }
    v[j0] += shortest;
    for (index_t i = free_row;;) {
      const index_t j = pred[i];
      const index_t previous = row_of_col[j];
      row_of_col[j] = i;
      col_of_row[i] = j;
      if (j == j0) break;
      i = previous;
    }
    for (const index_t i : touched) {
      dist[i] = infinity;
      pred[i] = -1;
      settled[i] = 0;
    }
    touched.clear();
    settled_rows.clear();
    heap = {};
  }

  // Scaling exponents: log Dr_i = u_i + t, log Dc_j = v_j - log a_j - t. Any constant t leaves every reduced
  // cost unchanged; this t minimizes the largest |log| of any factor, so that none overflows or underflows
  // needlessly (a matrix graded along a long path of the matching needs factors over a wide range).
  MaximumProductMatching m;
  m.row_perm = std::move(row_of_col);
  m.row_scale.resize(static_cast<std::size_t>(n));
  m.col_scale.resize(static_cast<std::size_t>(n));
  if (n == 0) return m;
  std::vector<double> col_exponent(static_cast<std::size_t>(n));
  for (index_t j = 0; j < n; ++j) col_exponent[j] = v[j] - log_col_max[j];
  const auto [u_min, u_max] = std::minmax_element(u.begin(), u.end());
  const auto [c_min, c_max] = std::minmax_element(col_exponent.begin(), col_exponent.end());
  // max_k |exponent_k| = max(max(u_max, -c_min) + t, max(-u_min, c_max) - t), smallest where both are equal.
  const double t = (std::max(-*u_min, *c_max) - std::max(*u_max, -*c_min)) / 2;
  auto scaling = [&](double exponent, const char* side, index_t index) {
    const double s = std::exp(exponent);
    if (!std::isnormal(s))
      throw NumericalError(NumericalError::Kind::not_finite, index,
                           std::string(routine) + ": the scaling factor of " + side + " " + std::to_string(index) +
                               " (0-based), exp(" + exponent_text(exponent) +
                               "), is outside the range of double: the matrix is too strongly graded to scale");
    return s;
  };
  for (index_t i = 0; i < n; ++i) m.row_scale[i] = scaling(u[i] + t, "row", i);
  for (index_t j = 0; j < n; ++j) m.col_scale[j] = scaling(col_exponent[j] - t, "column", j);
  return m;
}

SparseMatrix permute_rows(const SparseMatrix& A, const std::vector<index_t>& row_perm) {
  if (row_perm.size() != static_cast<std::size_t>(A.rows()))
    throw InvalidInput("permute_rows: row_perm has " + std::to_string(row_perm.size()) + " entries, but A has " +
                       std::to_string(A.rows()) + " rows");
  const std::vector<index_t> position = inverse_permutation(row_perm);
  std::vector<index_t> rows(A.row_ind().size());
  std::vector<double> values(A.values().size());
  std::vector<std::pair<index_t, double>> column;
  for (index_t j = 0; j < A.cols(); ++j) {
    column.clear();
    for (offset_t p = A.col_ptr()[j]; p < A.col_ptr()[j + 1]; ++p)
      column.emplace_back(position[A.row_ind()[p]], A.values()[p]);
    std::sort(column.begin(), column.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    offset_t p = A.col_ptr()[j];
    for (const auto& [i, x] : column) {
      rows[p] = i;
      values[p++] = x;
    }
  }
  return SparseMatrix(A.rows(), A.cols(), A.col_ptr(), std::move(rows), std::move(values));
}

SparseMatrix scale(const SparseMatrix& A, const std::vector<double>& row_scale, const std::vector<double>& col_scale) {
  if (row_scale.size() != static_cast<std::size_t>(A.rows()) || col_scale.size() != static_cast<std::size_t>(A.cols()))
    throw InvalidInput("scale: row_scale and col_scale have " + std::to_string(row_scale.size()) + " and " +
                       std::to_string(col_scale.size()) + " entries, but A is " + std::to_string(A.rows()) + " x " +
                       std::to_string(A.cols()));
  std::vector<double> values = A.values();
  for (index_t j = 0; j < A.cols(); ++j)
    for (offset_t p = A.col_ptr()[j]; p < A.col_ptr()[j + 1]; ++p)
      values[p] = row_scale[A.row_ind()[p]] * values[p] * col_scale[j];
  return SparseMatrix(A.rows(), A.cols(), A.col_ptr(), A.row_ind(), std::move(values));
}

DiagonalMagnitude diagonal_magnitude(const SparseMatrix& A) {
  constexpr const char* routine = "diagonal_magnitude";
  require_square(A, routine);
  require_finite(A, routine);
  DiagonalMagnitude d;
  if (A.cols() == 0) return d;
  d.min_ratio = infinity;
  double log_sum = 0;
  for (index_t j = 0; j < A.cols(); ++j) {
    double col_max = 0, diagonal = 0;
    for (offset_t p = A.col_ptr()[j]; p < A.col_ptr()[j + 1]; ++p) {
      col_max = std::max(col_max, std::abs(A.values()[p]));
      if (A.row_ind()[p] == j) diagonal = std::abs(A.values()[p]);
    }
    const double ratio = diagonal > 0 ? diagonal / col_max : 0;
    d.min_ratio = std::min(d.min_ratio, ratio);
    if (ratio > 0)
      log_sum += std::log(ratio);
    else
      ++d.zero_diagonals;
  }
  d.geometric_mean = d.zero_diagonals == 0 ? std::exp(log_sum / A.cols()) : 0;
  return d;
}

}  // namespace spade
