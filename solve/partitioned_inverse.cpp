// The solve's partition of the assembly tree (see partitioned_inverse.hpp).
#include "partitioned_inverse.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>
#include <string>

#include "spade/error.hpp"

namespace spade {
namespace {

/// depth[s]: supernodes from s to its root, 1 at a root. Throws unless parents follow their children.
std::vector<index_t> depths(const SymbolicFactor& S, const char* who) {
  const index_t ns = S.num_supernodes;
  std::vector<index_t> depth(static_cast<std::size_t>(ns), 1);
  for (index_t s = ns - 1; s >= 0; --s) {
    const index_t p = S.super_parent[s];
    if (p < 0) continue;
    if (p <= s || p >= ns)
      throw InvalidInput(std::string(who) + ": the supernodes are not numbered children before parents");
    depth[s] = depth[p] + 1;
  }
  return depth;
}

/// head[s]: the supernode that heads s's piece for `band`.
std::vector<index_t> heads(const SymbolicFactor& S, const std::vector<index_t>& depth, index_t band) {
  const index_t ns = S.num_supernodes;
  std::vector<index_t> head(static_cast<std::size_t>(ns));
  for (index_t s = ns - 1; s >= 0; --s) {
    const index_t p = S.super_parent[s];
    head[s] = (p < 0 || (depth[s] - 1) % band == 0) ? s : head[p];
  }
  return head;
}

/// Stored entries of a panel with k columns and m rows: its lower triangle and the rectangle below.
double stored(double k, double m) { return k * (k + 1) / 2 + (m - k) * k; }

}  // namespace

SolveStructure unpartitioned(std::shared_ptr<const SymbolicFactor> factor) {
  if (!factor) throw InvalidInput("unpartitioned: no symbolic factor");
  SolveStructure out;
  const std::size_t ns = static_cast<std::size_t>(factor->num_supernodes);
  out.target.resize(ns);
  for (std::size_t s = 0; s < ns; ++s) out.target[s] = static_cast<index_t>(s);
  out.column_offset.assign(ns, 0);
  out.parts.assign(ns, 1);
  out.row_position.resize(factor->row_indices.size());
  for (std::size_t s = 0; s < ns; ++s)
    for (offset_t q = factor->row_ptr[s]; q < factor->row_ptr[s + 1]; ++q)
      out.row_position[q] = static_cast<index_t>(q - factor->row_ptr[s]);
  out.solve = factor;
  out.factor = std::move(factor);
  return out;
}

namespace {

/// The two terms of partition_estimate: pieces along the longest path and stored entries.
struct PartitionCost {
  index_t longest = 0;
  double entries = 0;
};

PartitionCost partition_cost(const SymbolicFactor& S, const SupernodalSchedule& schedule,
                             const std::vector<index_t>& depth, index_t band) {
  const index_t ns = S.num_supernodes;
  PartitionCost out;
  const std::vector<index_t> head = heads(S, depth, band);
  // Columns of each piece, and rows below it: the union of its supernodes' rows outside the piece.
  std::vector<double> cols(static_cast<std::size_t>(ns), 0), below(static_cast<std::size_t>(ns), 0);
  std::vector<index_t> mark(static_cast<std::size_t>(S.n), -1);
  for (index_t s = 0; s < ns; ++s) {
    const index_t h = head[s];
    cols[h] += S.supernode_cols(s);
    for (offset_t q = S.row_ptr[s] + S.supernode_cols(s); q < S.row_ptr[s + 1]; ++q) {
      const index_t r = S.row_indices[q];
      if (head[S.supernode_of[r]] == h || mark[r] == h) continue;
      mark[r] = h;
      below[h] += 1;
    }
  }
  for (index_t s = 0; s < ns; ++s)
    if (head[s] == s) out.entries += stored(cols[s], cols[s] + below[s]);
  // inner[s]: the most pieces below s's piece on a path through s. A piece counts one at its head; a
  // subtree that the schedule solves as one group (units 0) counts one in all.
  std::vector<index_t> inner(static_cast<std::size_t>(ns), 0);
  for (index_t s = 0; s < ns; ++s) {
    const index_t up = head[s] != s ? inner[s] : schedule.units[s] == 0 ? 1 : inner[s] + 1;
    const index_t p = S.super_parent[s];
    if (p >= 0)
      inner[p] = std::max(inner[p], up);
    else
      out.longest = std::max(out.longest, up);
  }
  return out;
}

void check_schedule(const SymbolicFactor& S, const SupernodalSchedule& schedule, const char* who) {
  if (schedule.units.size() != static_cast<std::size_t>(S.num_supernodes))
    throw InvalidInput(std::string(who) + ": the schedule is not of this factor");
}

}  // namespace

SweepTerms partition_terms(const SymbolicFactor& S, const SupernodalSchedule& schedule, index_t band,
                           double handoff_seconds, double bytes_per_second) {
  if (band < 1) throw InvalidInput("partition_estimate: band must be >= 1");
  check_schedule(S, schedule, "partition_estimate");
  const PartitionCost c = partition_cost(S, schedule, depths(S, "partition_estimate"), band);
  return {c.longest * handoff_seconds, 8 * c.entries / bytes_per_second};
}

double partition_estimate(const SymbolicFactor& S, const SupernodalSchedule& schedule, index_t band,
                          double handoff_seconds, double bytes_per_second) {
  const SweepTerms terms = partition_terms(S, schedule, band, handoff_seconds, bytes_per_second);
  return terms.handoffs + terms.bytes;
}

namespace {

/// Brent's estimate at bands 1, 2, ... up to the tree's depth, stopping once the bytes alone exceed the best
/// estimate so far (larger bands fill more): {band, estimate} in band order.
std::vector<std::pair<index_t, double>> band_estimates(const SymbolicFactor& S, const SupernodalSchedule& schedule,
                                                       double handoff_seconds, double bytes_per_second,
                                                       const char* who) {
  if (!(handoff_seconds > 0) || !(bytes_per_second > 0))
    throw InvalidInput(std::string(who) + ": the hand-off cost and the bandwidth must be positive");
  check_schedule(S, schedule, who);
  const std::vector<index_t> depth = depths(S, who);
  const index_t height = depth.empty() ? 1 : *std::max_element(depth.begin(), depth.end());
  std::vector<std::pair<index_t, double>> out;
  double best = std::numeric_limits<double>::infinity();
  for (index_t band = 1; band <= height; ++band) {
    const PartitionCost c = partition_cost(S, schedule, depth, band);
    const double bytes = 8 * c.entries / bytes_per_second;
    if (bytes > best) break;
    out.emplace_back(band, c.longest * handoff_seconds + bytes);
    best = std::min(best, out.back().second);
  }
  return out;
}

/// Ascending estimate, the smaller band first on a tie.
bool estimate_order(const std::pair<index_t, double>& a, const std::pair<index_t, double>& b) {
  return a.second < b.second || (a.second == b.second && a.first < b.first);
}

}  // namespace

index_t choose_partition_band(const SymbolicFactor& S, const SupernodalSchedule& schedule, double handoff_seconds,
                              double bytes_per_second) {
  const auto estimates = band_estimates(S, schedule, handoff_seconds, bytes_per_second, "choose_partition_band");
  return std::min_element(estimates.begin(), estimates.end(), estimate_order)->first;
}

std::vector<index_t> partition_trial_bands(const SymbolicFactor& S, const SupernodalSchedule& schedule,
                                           double handoff_seconds, double bytes_per_second, int count) {
  if (count < 1) throw InvalidInput("partition_trial_bands: count must be >= 1, got " + std::to_string(count));
  auto estimates = band_estimates(S, schedule, handoff_seconds, bytes_per_second, "partition_trial_bands");
  std::stable_sort(estimates.begin(), estimates.end(), estimate_order);
  std::vector<index_t> bands;
  if (estimates.front().first == 1) return bands;  // the model keeps every level: no partitioned inverse
  for (const auto& [band, estimate] : estimates)
    if (band > 1 && static_cast<int>(bands.size()) < count) bands.push_back(band);
  return bands;
}

SolveStructure partition_for_solve(std::shared_ptr<const SymbolicFactor> factor, index_t band) {
  if (!factor) throw InvalidInput("partition_for_solve: no symbolic factor");
  if (band < 1) throw InvalidInput("partition_for_solve: band must be >= 1, got " + std::to_string(band));
  const SymbolicFactor& S = *factor;
  const index_t ns = S.num_supernodes, n = S.n;
  const std::vector<index_t> depth = depths(S, "partition_for_solve");
  if (band == 1) return unpartitioned(std::move(factor));
  const std::vector<index_t> head = heads(S, depth, band);

  SolveStructure out;
  out.band = band;
  out.target.assign(static_cast<std::size_t>(ns), -1);
  out.column_offset.assign(static_cast<std::size_t>(ns), 0);
  out.row_position.assign(S.row_indices.size(), 0);
  // Members of each piece, ascending (a piece's members precede its head in the postorder).
  std::vector<index_t> count(static_cast<std::size_t>(ns) + 1, 0);
  for (index_t s = 0; s < ns; ++s) ++count[head[s] + 1];
  for (index_t s = 0; s < ns; ++s) count[s + 1] += count[s];
  std::vector<index_t> members(static_cast<std::size_t>(ns));
  {
    std::vector<index_t> next(count.begin(), count.end() - 1);
    for (index_t s = 0; s < ns; ++s) members[next[head[s]]++] = s;
  }
  // New numbering: the pieces in the order of their heads, each piece's columns member by member. A
  // piece's members and everything below them precede its head, so children still come before parents.
  std::vector<index_t> new_col(static_cast<std::size_t>(n));
  auto T = std::make_shared<SymbolicFactor>();
  T->n = n;
  T->ordering = S.ordering;
  T->supernode_begin.push_back(0);
  index_t next_col = 0;
  for (index_t h = 0; h < ns; ++h) {
    if (head[h] != h) continue;
    const index_t t = T->num_supernodes++;
    out.parts.push_back(count[h + 1] - count[h]);
    for (index_t i = count[h]; i < count[h + 1]; ++i) {
      const index_t s = members[i];
      out.target[s] = t;
      out.column_offset[s] = next_col - T->supernode_begin[t];
      for (index_t j = S.supernode_begin[s]; j < S.supernode_begin[s + 1]; ++j) new_col[j] = next_col++;
    }
    T->supernode_begin.push_back(next_col);
    if (out.parts.back() > 1) ++out.merged_pieces;
  }
  T->perm.resize(static_cast<std::size_t>(n));
  T->iperm.resize(static_cast<std::size_t>(n));
  for (index_t j = 0; j < n; ++j) {
    T->perm[new_col[j]] = S.perm[j];
    T->iperm[S.perm[j]] = new_col[j];
  }
  // Rows of each new supernode: its columns, then the rows below the piece ascending in the new numbering.
  const index_t nt = T->num_supernodes;
  T->row_ptr.assign(1, 0);
  T->panel_offset.assign(1, 0);
  T->super_parent.assign(static_cast<std::size_t>(nt), -1);
  std::vector<index_t> mark(static_cast<std::size_t>(n), -1), rows;
  for (index_t h = 0; h < ns; ++h) {
    if (head[h] != h) continue;
    const index_t t = out.target[h];
    const index_t f = T->supernode_begin[t], k = T->supernode_begin[t + 1] - f;
    rows.clear();
    for (index_t i = count[h]; i < count[h + 1]; ++i) {
      const index_t s = members[i];
      for (offset_t q = S.row_ptr[s] + S.supernode_cols(s); q < S.row_ptr[s + 1]; ++q) {
        const index_t r = S.row_indices[q];
        if (head[S.supernode_of[r]] == h || mark[r] == h) continue;
        mark[r] = h;
        rows.push_back(new_col[r]);
      }
    }
    std::sort(rows.begin(), rows.end());
    for (index_t j = f; j < f + k; ++j) T->row_indices.push_back(j);
    T->row_indices.insert(T->row_indices.end(), rows.begin(), rows.end());
    const offset_t m = k + static_cast<offset_t>(rows.size());
    T->row_ptr.push_back(T->row_ptr.back() + m);
    if (T->panel_offset.back() > std::numeric_limits<offset_t>::max() / 2 - m * k)
      throw ResourceError("partition_for_solve: the merged panels' entries overflow 64-bit offsets");
    T->panel_offset.push_back(T->panel_offset.back() + m * k);
    T->nnz_l += static_cast<offset_t>(stored(static_cast<double>(k), static_cast<double>(m)));
    if (S.super_parent[h] >= 0) T->super_parent[t] = out.target[S.super_parent[h]];
    // Where each member's rows go in the panel.
    const bool merged = count[h + 1] - count[h] > 1;
    for (index_t i = count[h]; i < count[h + 1]; ++i) {
      const index_t s = members[i];
      for (offset_t q = S.row_ptr[s]; q < S.row_ptr[s + 1]; ++q) {
        if (!merged) {
          out.row_position[q] = static_cast<index_t>(q - S.row_ptr[s]);
          continue;
        }
        const index_t r = new_col[S.row_indices[q]];
        out.row_position[q] = r < f + k ? r - f
                                        : k + static_cast<index_t>(std::lower_bound(rows.begin(), rows.end(), r) -
                                                                   rows.begin());
      }
    }
    if (!merged) {  // an unmerged panel keeps its layout: its rows' order survives the renumbering
      for (offset_t q = S.row_ptr[h] + 1; q < S.row_ptr[h + 1]; ++q)
        if (new_col[S.row_indices[q]] <= new_col[S.row_indices[q - 1]])
          throw InvalidInput("partition_for_solve: a supernode's rows are not ancestors of its columns");
    }
  }
  // The column etree and counts of the new structure, and the column-to-supernode map.
  T->supernode_of.resize(static_cast<std::size_t>(n));
  T->parent.assign(static_cast<std::size_t>(n), -1);
  T->col_counts.resize(static_cast<std::size_t>(n));
  for (index_t t = 0; t < nt; ++t) {
    const index_t f = T->supernode_begin[t], l = T->supernode_begin[t + 1];
    const index_t m = T->supernode_rows(t);
    for (index_t j = f; j < l; ++j) {
      T->supernode_of[j] = t;
      T->col_counts[j] = m - (j - f);
      T->parent[j] = j + 1 < l ? j + 1 : (m > l - f ? T->row_indices[T->row_ptr[t] + (l - f)] : -1);
    }
  }
  T->solve_flops = 4.0 * static_cast<double>(T->nnz_l) - 2.0 * n;
  out.solve = std::move(T);
  out.factor = std::move(factor);
  return out;
}

void partition_values(const SolveStructure& st, const double* factor_values, double* solve_values) {
  const SymbolicFactor& S = *st.factor;
  const SymbolicFactor& T = *st.solve;
  std::fill(solve_values, solve_values + T.panel_offset.back(), 0.0);
  for (index_t s = 0; s < S.num_supernodes; ++s) {
    const index_t t = st.target[s];
    const double* from = factor_values + S.panel_offset[s];
    double* to = solve_values + T.panel_offset[t];
    const offset_t k = S.supernode_cols(s), m = S.supernode_rows(s);
    if (!st.merged(s)) {
      std::memcpy(to, from, static_cast<std::size_t>(k * m) * sizeof(double));
      continue;
    }
    const offset_t mt = T.supernode_rows(t);
    for (offset_t j = 0; j < k; ++j)
      for (offset_t i = j; i < m; ++i)
        to[st.row_position[S.row_ptr[s] + i] + (st.column_offset[s] + j) * mt] = from[i + j * m];
  }
}

}  // namespace spade
