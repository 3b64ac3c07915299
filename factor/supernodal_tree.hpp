// What the supernodal factorizations (Cholesky, LU) share: the left-looking update lists and the parallel
// walk over the assembly tree. Internal header of factor/.
#pragma once

#include <omp.h>

#include <algorithm>
#include <exception>
#include <limits>
#include <mutex>
#include <queue>
#include <utility>
#include <vector>

#include "../core/parallel_blas.hpp"
#include "spade/symbolic.hpp"

namespace spade::detail {

/// The left-looking update lists of S: for each supernode t, the descendants d whose rows reach t's
/// columns, in increasing d, as updates[update_ptr[t] .. update_ptr[t+1]-1] = Update{d, p} with p the
/// position in d's row list of its first row inside t. Returns the largest update block, (rows of d from p
/// on) x (rows of d inside t) entries: the work space a factorization needs.
template <class Update>
std::size_t build_update_lists(const SymbolicFactor& S, std::vector<offset_t>& update_ptr, std::vector<Update>& updates) {
  const index_t ns = S.num_supernodes;
  std::size_t work_size = 0;
  update_ptr.assign(static_cast<std::size_t>(ns) + 1, 0);
  // Two passes over every supernode's rows below its diagonal block: count, then fill (ascending d).
  for (int pass = 0; pass < 2; ++pass) {
    std::vector<offset_t> next(update_ptr.begin(), update_ptr.end() - 1);
    for (index_t d = 0; d < ns; ++d) {
      const offset_t begin = S.row_ptr[d], m = S.supernode_rows(d);
      index_t last = -1;
      for (offset_t p = S.supernode_cols(d); p < m; ++p) {
        const index_t t = S.supernode_of[S.row_indices[begin + p]];
        if (t == last) continue;
        last = t;
        if (pass == 0) {
          ++update_ptr[t + 1];
        } else {
          updates[next[t]++] = Update{d, static_cast<index_t>(p)};
          offset_t q = p;  // the block is rows p .. m-1 of d by the rows of d inside t
          while (q < m && S.supernode_of[S.row_indices[begin + q]] == t) ++q;
          work_size = std::max(work_size, static_cast<std::size_t>((m - p) * (q - p)));
        }
      }
    }
    if (pass == 0) {
      for (index_t t = 0; t < ns; ++t) update_ptr[t + 1] += update_ptr[t];
      updates.resize(static_cast<std::size_t>(update_ptr[ns]));
    }
  }
  return work_size;
}

/// Independent subtrees for the threads, largest first, and the supernodes above them in increasing order
/// (Geist and Ng 1989): the heaviest subtree is split at its root while it holds more than 1/(4 threads) of
/// the work (k m^2 for a supernode of k columns and m rows). One thread: everything is "top".
inline void plan_subtrees(const SymbolicFactor& S, int threads, std::vector<index_t>& subtree_roots,
                          std::vector<index_t>& top) {
  const index_t ns = S.num_supernodes;
  subtree_roots.clear();
  top.clear();
  if (threads <= 1) {
    for (index_t s = 0; s < ns; ++s) top.push_back(s);
    return;
  }
  std::vector<double> work(ns, 0.0);
  std::vector<std::vector<index_t>> children(ns);
  double total = 0;
  for (index_t s = 0; s < ns; ++s) {
    const double k = S.supernode_cols(s), m = S.supernode_rows(s);
    work[s] += k * m * m;  // about the flops of its updates and its own factorization
    if (S.super_parent[s] != -1) {
      work[S.super_parent[s]] += work[s];
      children[S.super_parent[s]].push_back(s);
    } else {
      total += work[s];
    }
  }
  auto lighter = [&](index_t a, index_t b) { return work[a] < work[b]; };
  std::priority_queue<index_t, std::vector<index_t>, decltype(lighter)> heap(lighter);
  for (index_t s = 0; s < ns; ++s)
    if (S.super_parent[s] == -1) heap.push(s);
  const double limit = total / (4.0 * threads);
  while (!heap.empty() && work[heap.top()] > limit) {
    const index_t s = heap.top();
    heap.pop();
    top.push_back(s);
    for (index_t c : children[s]) heap.push(c);
  }
  while (!heap.empty()) {
    subtree_roots.push_back(heap.top());
    heap.pop();
  }
  std::sort(top.begin(), top.end());  // children before parents
}

/// The threads of a factorization of S: `requested` when positive; for 0 (automatic) omp_get_max_threads(),
/// but no more than one per kMultiplyAddsPerThread of S's work (the sum of k m^2 multiply-adds for supernodes of
/// k columns and m rows, as plan_subtrees counts it),
/// the grain below which a thread costs more (the parallel region, the subtrees' hand-out) than its share
/// saves (the measurements: docs/BENCHMARKS.md, the LU on the 16-core host). Either is clamped to
/// omp_get_num_procs() - processors_left, and to at least one.
inline int factorization_threads(const SymbolicFactor& S, int requested, int processors_left) {
  int threads = requested > 0 ? requested : omp_get_max_threads();
  if (requested <= 0) {
    double work = 0;
    for (index_t s = 0; s < S.num_supernodes; ++s) {
      const double k = S.supernode_cols(s), m = S.supernode_rows(s);
      work += k * m * m;
    }
    threads = threads_for(work, kMultiplyAddsPerThread, threads);
  }
  return std::max(1, std::min(threads, omp_get_num_procs() - std::max(processors_left, 0)));
}

// Columns of the block of an update that one thread of a team computes with one gemm in the owner-computes
// update of a supernode at the top of the tree, all of the update's rows in the thread's block of the panel at
// once: each gemm packs both of its operands, so a thread's rows are not split further (fewer rows a gemm repack
// the columns' operand for fewer products: docs/benchmarks/blas_threads.md), and 512 columns bound its workspace
// (the block's rows x 512) while packing the rows' operand again only every 512 columns.
constexpr int kUpdateChunk = 512;

/// Boundaries b[0] = 0 < ... < b.back() = rows of at most `blocks` consecutive row blocks of [0, rows), each of
/// about the same total weight(r) (a row's share of the work).
template <class Weight>
std::vector<int> row_blocks(int rows, int blocks, Weight weight) {
  double total = 0;
  for (int r = 0; r < rows; ++r) total += weight(r);
  std::vector<int> bounds{0};
  double sum = 0;
  for (int r = 0; r < rows; ++r) {
    sum += weight(r);
    if (r + 1 < rows && sum >= total * static_cast<double>(bounds.size()) / blocks) bounds.push_back(r + 1);
  }
  if (rows > 0) bounds.push_back(rows);
  return bounds;
}

/// Owner computes over a team for the updates of one supernode: runs gather(lo, hi, w) once for every row block
/// [lo, hi) of `blocks` (boundaries, from row_blocks), shared out over `team` threads (dynamic), w a workspace of
/// (hi - lo) x kUpdateChunk entries private to the calling thread. No two blocks share a row, so the threads
/// write disjoint rows and need no barrier between updates. The workspaces live in `team_work`, grown as needed
/// and kept for the factorization's later teams, so that the system zeroes their pages once per factorization, not
/// once per supernode; the caller releases it after the factorization.
template <class Gather>
void gather_on_team(int team, const std::vector<int>& blocks, std::vector<double>& team_work, Gather&& gather) {
  const int count = static_cast<int>(blocks.size()) - 1;
  int widest = 0;
  for (int b = 0; b < count; ++b) widest = std::max(widest, blocks[b + 1] - blocks[b]);
  const std::size_t need = static_cast<std::size_t>(team) * widest * kUpdateChunk;
  if (team_work.size() < need) team_work.resize(need);
  parallel_region(team, [&](int me, int) {
    double* w = team_work.data() + static_cast<offset_t>(me) * widest * kUpdateChunk;
#pragma omp for schedule(dynamic, 1)
    for (int b = 0; b < count; ++b) gather(blocks[b], blocks[b + 1], w);
  });
}

/// The positions [first, last) among rows[begin .. end-1] (a supernode's sorted row list) whose places in the
/// target panel, relpos[rows[p]] (increasing with p), lie in [lo, hi).
inline std::pair<int, int> positions_in(const index_t* rows, int begin, int end, const index_t* relpos, int lo,
                                        int hi) {
  auto at = [&](int bound) {
    return static_cast<int>(std::partition_point(rows + begin, rows + end, [&](index_t r) { return relpos[r] < bound; }) -
                            rows);
  };
  return {at(lo), at(hi)};
}

/// Factors every supernode of S once, children before parents: the subtrees (plan_subtrees) on `threads` OpenMP
/// threads, one supernode on one thread, then its top supernodes one after another, each on a team of no more
/// threads than its work keeps busy (kMultiplyAddsPerThread). Every BLAS call runs at one thread
/// (core/parallel_blas.hpp): no BLAS or OpenMP setting of the process changes. factor(s, team, relpos, work)
/// factors supernode s on `team` threads with a relpos workspace of n entries and a work workspace of work_size
/// entries (a team allocates its own); done(first, last) reports a finished contiguous range. The first error
/// of the lowest-numbered supernode is rethrown, so the report does not depend on the threads.
template <class Factor, class Done>
void factor_over_tree(const SymbolicFactor& S, const std::vector<index_t>& subtree_roots,
                      const std::vector<index_t>& top, int threads, std::size_t work_size,
                      Factor&& factor, Done&& done) {
  // Subtree of supernode s: the contiguous range first_descendant[s] .. s (the numbering is a postorder).
  std::vector<index_t> first_descendant(S.num_supernodes);
  for (index_t s = 0; s < S.num_supernodes; ++s) first_descendant[s] = s;
  for (index_t s = 0; s < S.num_supernodes; ++s)
    if (S.super_parent[s] != -1)
      first_descendant[S.super_parent[s]] = std::min(first_descendant[S.super_parent[s]], first_descendant[s]);

  std::mutex error_mutex;
  index_t error_supernode = std::numeric_limits<index_t>::max();
  std::exception_ptr error;
  auto record = [&](index_t s) {
    std::lock_guard<std::mutex> lock(error_mutex);
    if (s < error_supernode) {
      error_supernode = s;
      error = std::current_exception();
    }
  };
  SerialBlasScope serial_blas;
  if (!subtree_roots.empty()) {
    const index_t count = static_cast<index_t>(subtree_roots.size());
#pragma omp parallel num_threads(threads)
    {
      omp_set_num_threads(1);  // this thread's BLAS calls at one thread, also in an inactive (nested) team
      // Allocated inside the try below: no exception may leave an OpenMP region.
      std::vector<index_t> relpos;
      std::vector<double> work;
      bool workspace = false;
#pragma omp for schedule(dynamic, 1)
      for (index_t t = 0; t < count; ++t) {
        const index_t root = subtree_roots[t];
        index_t s = first_descendant[root];
        try {
          if (!workspace) {
            relpos.resize(S.n);
            work.resize(work_size);
            workspace = true;
          }
          for (; s <= root; ++s) factor(s, 1, relpos, work);
          done(first_descendant[root], root);
        } catch (...) {
          record(s);
        }
      }
    }
  }
  if (!error) {
    auto team_of = [&](index_t s) {
      const double k = S.supernode_cols(s), m = S.supernode_rows(s);
      return threads_for(k * m * m, kMultiplyAddsPerThread, threads);
    };
    std::vector<index_t> relpos(S.n);
    std::vector<double> work(work_size);
    for (index_t s : top) {
      factor(s, team_of(s), relpos, work);
      done(s, s);
    }
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace spade::detail
