// auto's rule for the sparse triangular solve: a cost model per algorithm from the level statistics and the
// device (contract and formulas in include/spade/sptrsv.hpp, sptrsv_auto_rule). Host code only, so that the
// rule is tested without a GPU.
#include <algorithm>
#include <string>

#include "spade/error.hpp"
#include "spade/sptrsv.hpp"

namespace spade {
namespace {

/// Predicted one-right-hand-side time (us) of a level-scheduled candidate: a fixed cost, a cost per level,
/// and the entries over the throughput of the SMs it runs on.
double predict(const SptrsvDeviceModel& d, double levels, double entries, double per_level, double sms,
               double entries_per_sm_us) {
  return d.fixed_us + levels * per_level + entries / (sms * entries_per_sm_us);
}

double several_factor(SptrsvAlgorithm a) { return sptrsv_several_over_one(a); }

/// The candidate of smallest predicted time among `list` (each time multiplied by several_factor when
/// `several`), skipping `excluded`.
SptrsvAlgorithm fastest(const std::vector<SptrsvPrediction>& list, bool several,
                        SptrsvAlgorithm excluded = SptrsvAlgorithm::automatic) {
  SptrsvAlgorithm best = SptrsvAlgorithm::levr;
  double best_us = -1;
  for (const SptrsvPrediction& p : list) {
    if (p.algorithm == excluded) continue;
    const double us = p.us * (several ? several_factor(p.algorithm) : 1.0);
    if (best_us < 0 || us < best_us) best = p.algorithm, best_us = us;
  }
  return best;
}

/// Whether cluster solves every level's share in one pass of its block for one right-hand side: the share
/// of the widest level, ceil(widest / 16) rows, times the lanes a row gets (a power of two, one lane per 4
/// entries of the mean row, at most 32) within 512 threads (kernels/sptrsv_kernels.hpp: kClusterMaxThreads;
/// the analysis checks the layout itself as well).
bool cluster_one_pass(const SptrsvShape& s) {
  const double entries_per_row = s.n > 0 ? double(s.off_diagonal_nnz) / s.n : 0;
  long long lanes = 1;
  while (lanes < 32 && lanes * 4 < entries_per_row) lanes *= 2;
  return (static_cast<long long>(s.max_rows_per_level) + 15) / 16 * lanes <= 512;
}

bool level_ordered(SptrsvAlgorithm a) { return a == SptrsvAlgorithm::level_block || a == SptrsvAlgorithm::cluster; }

}  // namespace

double sptrsv_several_over_one(SptrsvAlgorithm a) {
  switch (a) {
    case SptrsvAlgorithm::level_block: return 1.0;
    case SptrsvAlgorithm::cluster: return 1.2;
    case SptrsvAlgorithm::levr: return 1.1;
    case SptrsvAlgorithm::thread: return 2.64;
    case SptrsvAlgorithm::fused: return 2.39;
    case SptrsvAlgorithm::fused_level: return 3.26;
    default: return 2.0;
  }
}

SptrsvShape sptrsv_shape(const SptrsvStats& stats) {
  SptrsvShape shape;
  shape.n = stats.n;
  shape.off_diagonal_nnz = stats.off_diagonal_nnz;
  shape.levels = stats.levels;
  shape.max_rows_per_level = stats.max_rows_per_level;
  shape.max_nnz_per_row = stats.max_nnz_per_row;
  return shape;
}

SptrsvAutoChoice sptrsv_auto_rule(const SptrsvShape& s, const SptrsvDeviceModel& d) {
  if (s.n < 0 || s.off_diagonal_nnz < 0 || s.levels < 0 || s.max_rows_per_level < 0 || s.max_nnz_per_row < 0)
    throw InvalidInput("sptrsv_auto_rule: negative statistics (n = " + std::to_string(s.n) + ")");
  const double sms = std::max(d.sm_count, 1);
  const double levels = s.levels, entries = double(s.n) + double(s.off_diagonal_nnz);
  SptrsvAutoChoice c;
  const bool long_rows = s.max_nnz_per_row > kSptrsvLongRow;
  // levr pays split_level_us per level where most levels hold a split row, as on a factor; a few long rows
  // among short ones (a circuit's ground node) leave its levels at level_launch_us.
  const double mean_row = s.n > 0 ? double(s.off_diagonal_nnz) / s.n : 0;
  const bool split_levels = long_rows && mean_row > kSptrsvSplitMeanRow;
  c.levr_us =
      predict(d, levels, entries, split_levels ? d.split_level_us : d.level_launch_us, sms, d.sm_entries_per_us);
  c.predicted.push_back({SptrsvAlgorithm::levr, c.levr_us});

  // Rows longer than kSptrsvOneBlockLongestRow keep level_block out of the predictions, but not out of the
  // trials: timed, a misprediction costs a trial, and its chain pieces solve a factor's long dense rows a
  // warp a row (kernels/sptrsv_block.cu).
  const bool timed = long_rows && s.levels >= kSptrsvTrialLevels;
  if ((s.max_nnz_per_row <= kSptrsvOneBlockLongestRow || timed) && s.max_rows_per_level <= kSptrsvOneBlockWidestLevel)
    c.predicted.push_back(
        {SptrsvAlgorithm::level_block, predict(d, levels, entries, d.block_barrier_us, 1, d.block_entries_per_us)});
  if (d.compute_major >= 9)
    c.predicted.push_back(
        {SptrsvAlgorithm::cluster,
         d.cluster_start_us + predict(d, levels, entries, d.cluster_barrier_us, 16, d.cluster_entries_per_us)});
  std::stable_sort(c.predicted.begin(), c.predicted.end(),
                   [](const SptrsvPrediction& a, const SptrsvPrediction& b) { return a.us < b.us; });
  c.one = fastest(c.predicted, false, cluster_one_pass(s) ? SptrsvAlgorithm::automatic : SptrsvAlgorithm::cluster);
  c.several = fastest(c.predicted, true);
  c.one_fallback = fastest(c.predicted, false, SptrsvAlgorithm::cluster);
  c.several_fallback = fastest(c.predicted, true, SptrsvAlgorithm::cluster);
  // fused runs on the triangle in the caller's order: only where nothing else needs the level-ordered copy.
  const double mean_rows = s.levels > 0 ? double(s.n) / s.levels : 0;
  const double fused_best = predict(d, levels, entries, d.handoff_us, sms, d.sm_entries_per_us);
  if (timed) {
    for (SptrsvAlgorithm a : {c.one, SptrsvAlgorithm::fused_level, SptrsvAlgorithm::thread, SptrsvAlgorithm::fused})
      if (a != SptrsvAlgorithm::levr && int(c.trials.size()) < kSptrsvMaxTrials &&
          std::find(c.trials.begin(), c.trials.end(), a) == c.trials.end())
        c.trials.push_back(a);
  }
  c.try_fused = c.trials.empty() && c.one == SptrsvAlgorithm::levr && !level_ordered(c.several) && s.levels > 1 &&
                double(s.max_rows_per_level) > kSptrsvSkewedLevels * mean_rows && fused_best < c.levr_us;
  return c;
}

}  // namespace spade
