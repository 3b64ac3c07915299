// The supernodal solve schedule and its host reference (see supernodal_schedule.hpp).
#include "supernodal_schedule.hpp"

#include <algorithm>
#include <limits>
#include <string>

#include "../core/parallel_blas.hpp"
#include "spade/error.hpp"

namespace spade {
namespace {

/// Children of every supernode (and, under the index num_supernodes, the roots), ascending, in CSR form.
struct Children {
  std::vector<index_t> ptr, list;
  Children(const SymbolicFactor& S) : ptr(static_cast<std::size_t>(S.num_supernodes) + 2, 0) {
    const index_t ns = S.num_supernodes;
    auto slot = [&](index_t s) { return S.super_parent[s] < 0 ? ns : S.super_parent[s]; };
    for (index_t s = 0; s < ns; ++s) ++ptr[slot(s) + 1];
    for (index_t p = 0; p <= ns; ++p) ptr[p + 1] += ptr[p];
    list.resize(static_cast<std::size_t>(ns));
    std::vector<index_t> next(ptr.begin(), ptr.end() - 1);
    for (index_t s = 0; s < ns; ++s) list[next[slot(s)]++] = s;  // ascending within each parent
  }
};

/// Supernode s's panel of the selectively inverted factor, as the reference reads it.
struct Panel {
  index_t f, k, m;         // first column, columns, rows
  const double* M;         // [V; W], column-major, leading dimension m
  const index_t* rows;     // its row indices
  double at(index_t row, index_t c) const { return M[row + static_cast<offset_t>(c) * m]; }
};

Panel panel_of(const SymbolicFactor& S, const double* inverted, index_t s) {
  return Panel{S.supernode_begin[s], S.supernode_cols(s), S.supernode_rows(s), inverted + S.panel_offset[s],
               S.row_indices.data() + S.row_ptr[s]};
}

}  // namespace

SupernodalSchedule build_schedule(const SymbolicFactor& S) {
  using Schedule = SupernodalSchedule;
  const index_t ns = S.num_supernodes;
  Schedule out;
  out.units.assign(static_cast<std::size_t>(ns), 0);
  out.need.assign(static_cast<std::size_t>(ns), 0);

  // Subtree sizes; the supernodes are numbered in a postorder of the assembly tree, so children come first.
  std::vector<offset_t> sub_entries(ns, 0);
  std::vector<index_t> sub_cols(ns, 0), sub_count(ns, 0), first(ns);
  std::vector<index_t> path_cols(ns, 0);
  for (index_t s = 0; s < ns; ++s) first[s] = s;
  for (index_t s = 0; s < ns; ++s) {
    const offset_t k = S.supernode_cols(s), m = S.supernode_rows(s);
    sub_entries[s] += k * m;
    sub_cols[s] += static_cast<index_t>(k);
    sub_count[s] += 1;
    const index_t p = S.super_parent[s];
    if (p < 0) continue;
    if (p <= s) throw InvalidInput("build_schedule: the supernodes are not numbered children before parents");
    sub_entries[p] = std::min(sub_entries[p] + sub_entries[s], std::numeric_limits<offset_t>::max() / 2);
    sub_cols[p] += sub_cols[s];
    sub_count[p] += sub_count[s];
    first[p] = std::min(first[p], first[s]);
  }
  for (index_t s = ns - 1; s >= 0; --s) {
    const index_t p = S.super_parent[s];
    path_cols[s] = S.supernode_cols(s) + (p < 0 ? 0 : path_cols[p]);
    out.critical_columns = std::max(out.critical_columns, path_cols[s]);
  }
  std::vector<char> small(ns);
  for (index_t s = 0; s < ns; ++s) {
    small[s] = sub_entries[s] <= Schedule::kGroupEntries && sub_cols[s] <= Schedule::kGroupColumns;
    if (s - first[s] + 1 != sub_count[s])
      throw InvalidInput("build_schedule: the subtree of supernode " + std::to_string(s) + " is not contiguous");
  }

  // Levels: depth[s] = supernodes from s to its root (1 at a root); the height of a tiled supernode counts
  // the tasks below it (a group 1).
  std::vector<index_t> depth(ns, 1);
  for (index_t s = ns - 1; s >= 0; --s)
    if (S.super_parent[s] >= 0) depth[s] = depth[S.super_parent[s]] + 1;
  std::vector<index_t> child_height(ns, 0), task_height(ns, 0);
  // Sort keys of the tasks, in the order they are made: forward (level) and backward (height).
  std::vector<index_t> level, tall;

  // Groups: runs of consecutive small children of one parent (or consecutive small roots), packed greedily
  // while the group stays within kGroupEntries and kGroupColumns. Consecutive children's subtrees are
  // adjacent in a postorder, so a run is one contiguous range.
  const Children children(S);
  for (index_t p = 0; p <= ns; ++p) {
    if (p < ns && small[p]) continue;  // inside a group already
    index_t start = -1, last = -1, cols = 0;
    offset_t entries = 0;
    auto flush = [&] {
      if (start < 0) return;
      out.tasks.push_back(SolveTask{start, last, -1, 0});
      level.push_back(p < ns ? depth[p] + 1 : 1);
      tall.push_back(0);
      out.grouped_supernodes += last - start + 1;
      if (p < ns) {
        ++out.need[p];
        child_height[p] = std::max<index_t>(child_height[p], 1);
      }
      start = -1;
    };
    for (index_t q = children.ptr[p]; q < children.ptr[p + 1]; ++q) {
      const index_t c = children.list[q];
      if (!small[c]) {
        flush();
        continue;
      }
      if (start >= 0 && (entries + sub_entries[c] > Schedule::kGroupEntries ||
                         cols + sub_cols[c] > Schedule::kGroupColumns))
        flush();
      if (start < 0) {
        start = first[c];
        entries = 0;
        cols = 0;
      } else if (first[c] != last + 1) {
        throw InvalidInput("build_schedule: sibling subtrees are not adjacent in the supernode numbering");
      }
      entries += sub_entries[c];
      cols += sub_cols[c];
      last = c;
    }
    flush();
  }
  out.num_groups = static_cast<index_t>(out.tasks.size());

  // Tiled supernodes: every supernode outside the groups; heights count tiled supernodes (for the report)
  // and tasks (for the backward order).
  std::vector<index_t> height(ns, 0), tiled_child_height(ns, 0);
  for (index_t s = 0; s < ns; ++s) {
    if (small[s]) continue;
    height[s] = tiled_child_height[s] + 1;
    task_height[s] = child_height[s] + 1;
    out.height = std::max(out.height, height[s]);
    const index_t p = S.super_parent[s];
    if (p >= 0) {
      tiled_child_height[p] = std::max(tiled_child_height[p], height[s]);
      child_height[p] = std::max(child_height[p], task_height[s]);
    }
  }
  const index_t T = Schedule::kTile;
  for (index_t s = 0; s < ns; ++s) {
    if (small[s]) continue;
    ++out.tiled_supernodes;
    const index_t k = S.supernode_cols(s), m = S.supernode_rows(s);
    offset_t count = 0;
    for (index_t col0 = 0; col0 < k; col0 += T)
      for (index_t row0 = col0; row0 < m; row0 += T, ++count) {
        out.tasks.push_back(SolveTask{s, s, row0, col0});
        level.push_back(depth[s]);
        tall.push_back(task_height[s]);
      }
    if (count > std::numeric_limits<index_t>::max() / 4 ||
        out.tasks.size() > static_cast<std::size_t>(std::numeric_limits<index_t>::max() / 4))
      throw ResourceError("build_schedule: too many tiles for 32-bit counters");
    out.units[s] = static_cast<index_t>(count);
    const index_t p = S.super_parent[s];
    if (p >= 0) {
      if (static_cast<offset_t>(out.need[p]) + count > std::numeric_limits<index_t>::max() / 4)
        throw ResourceError("build_schedule: too many tiles for 32-bit counters");
      out.need[p] += static_cast<index_t>(count);
    }
  }

  // The two orders (stable: tiles of a supernode stay together, in row order within column blocks).
  std::vector<std::size_t> order(out.tasks.size());
  for (std::size_t t = 0; t < order.size(); ++t) order[t] = t;
  std::vector<std::size_t> backward = order;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return level[a] > level[b]; });
  std::stable_sort(backward.begin(), backward.end(), [&](std::size_t a, std::size_t b) {
    return tall[a] != tall[b] ? tall[a] > tall[b] : level[a] < level[b];
  });
  std::vector<SolveTask> forward(out.tasks.size());
  out.backward.resize(out.tasks.size());
  for (std::size_t t = 0; t < order.size(); ++t) {
    forward[t] = out.tasks[order[t]];
    out.backward[t] = out.tasks[backward[t]];
  }
  out.tasks = std::move(forward);

  for (index_t s = 0; s < ns; ++s) {
    const index_t k = S.supernode_cols(s);
    (k <= Schedule::kSmallInverse ? out.small_inverse : k <= Schedule::kMidInverse ? out.mid_inverse : out.large_inverse)
        .push_back(s);
  }
  return out;
}

void invert_supernodes_reference(const SymbolicFactor& S, double* values) {
  const double one = 1.0;
  SerialBlasScope serial_blas;
  for (index_t s = 0; s < S.num_supernodes; ++s) {
    const int k = S.supernode_cols(s), m = S.supernode_rows(s), below = m - k;
    double* panel = values + S.panel_offset[s];
    if (below > 0) dtrsm_("R", "L", "N", "N", &below, &k, &one, panel, &m, panel + k, &m);
    int info = 0;
    dtrtri_("L", "N", &k, panel, &m, &info);
    if (info > 0)
      throw NumericalError(NumericalError::Kind::singular, S.perm[S.supernode_begin[s] + info - 1],
                           "invert_supernodes_reference: zero diagonal entry in supernode " + std::to_string(s));
    for (int c = 1; c < k; ++c)
      for (int r = 0; r < c; ++r) panel[r + static_cast<offset_t>(c) * m] = 0.0;
  }
}

void schedule_solve_reference(const SymbolicFactor& S, const SupernodalSchedule& schedule, const double* inverted,
                              const double* B, index_t ldb, double* X, index_t ldx, index_t nrhs) {
  const index_t n = S.n;
  if (nrhs < 0 || ldb < std::max<index_t>(1, n) || ldx < std::max<index_t>(1, n))
    throw InvalidInput("schedule_solve_reference: need nrhs >= 0 and leading dimensions >= max(1, n)");
  const index_t T = SupernodalSchedule::kTile;
  std::vector<double> acc(n), y(n), x(n), local(SupernodalSchedule::kGroupColumns);
  for (index_t j = 0; j < nrhs; ++j) {
    const double* b = B + static_cast<offset_t>(j) * ldb;
    std::fill(acc.begin(), acc.end(), 0.0);
    std::fill(y.begin(), y.end(), 0.0);
    std::fill(x.begin(), x.end(), 0.0);
    // Forward: z = M_s r_s, rows < k into y, the rest subtracted from the rows below.
    for (const SolveTask& t : schedule.tasks) {
      if (t.row0 < 0) {
        const index_t lo = S.supernode_begin[t.first], hi = S.supernode_begin[t.last + 1];
        for (index_t c = lo; c < hi; ++c) local[c - lo] = b[S.perm[c]];
        for (index_t s = t.first; s <= t.last; ++s) {
          const Panel P = panel_of(S, inverted, s);
          for (index_t row = 0; row < P.m; ++row) {
            double z = 0;
            for (index_t c = 0; c < P.k; ++c) z += P.at(row, c) * local[P.f - lo + c];
            if (row < P.k)
              y[P.f + row] = z;
            else if (P.rows[row] < hi)
              local[P.rows[row] - lo] -= z;
            else
              acc[P.rows[row]] += z;
          }
        }
      } else {
        const Panel P = panel_of(S, inverted, t.first);
        const index_t c_end = std::min(P.k, t.col0 + T), r_end = std::min(P.m, t.row0 + T);
        for (index_t row = t.row0; row < r_end; ++row) {
          double z = 0;
          for (index_t c = t.col0; c < c_end; ++c) z += P.at(row, c) * (b[S.perm[P.f + c]] - acc[P.f + c]);
          if (row < P.k)
            y[P.f + row] += z;
          else
            acc[P.rows[row]] += z;
        }
      }
    }
    // Backward: x_s = M_s^T [y_s; -x(rows)].
    for (const SolveTask& t : schedule.backward) {
      if (t.row0 < 0) {
        const index_t lo = S.supernode_begin[t.first], hi = S.supernode_begin[t.last + 1];
        for (index_t s = t.last; s >= t.first; --s) {
          const Panel P = panel_of(S, inverted, s);
          for (index_t c = 0; c < P.k; ++c) {
            double sum = 0;
            for (index_t row = 0; row < P.m; ++row) {
              const index_t r = P.rows[row];
              sum += P.at(row, c) * (row < P.k ? y[P.f + row] : -(r < hi ? local[r - lo] : x[r]));
            }
            local[P.f - lo + c] = sum;
          }
        }
        for (index_t c = lo; c < hi; ++c) x[c] = local[c - lo];
      } else {
        const Panel P = panel_of(S, inverted, t.first);
        const index_t c_end = std::min(P.k, t.col0 + T), r_end = std::min(P.m, t.row0 + T);
        for (index_t c = t.col0; c < c_end; ++c) {
          double sum = 0;
          for (index_t row = t.row0; row < r_end; ++row)
            sum += P.at(row, c) * (row < P.k ? y[P.f + row] : -x[P.rows[row]]);
          x[P.f + c] += sum;
        }
      }
    }
    double* out = X + static_cast<offset_t>(j) * ldx;
    for (index_t i = 0; i < n; ++i) out[S.perm[i]] = x[i];
  }
}

}  // namespace spade
