// The machine-readable twin of a benchmark driver's tables (--json FILE), read by scripts/plot_benchmarks.py:
//
//   {"benchmark": "bench_solve", "machine": {...}, "settings": {...}, "floor": "what the floor reads",
//    "rows": [{"matrix": "bcsstk16", "n": 4884, ...,
//              "comparisons": [{"what": "solve, 1 rhs", "spade_seconds": 1.2e-4,
//                               "baselines": {"cuSPARSE SpSV": 5.1e-3, "host solve": 9.0e-3}}, ...],
//              "floor_seconds": 4.4e-5}, ...]}
//
// Every time is in seconds, a median as the table says. "comparisons" are what the speedup plot shows
// (baseline time / spade time per matrix); "floor_seconds", where a driver has one, is the time of moving the
// data that the operation must read at the measured copy bandwidth, as the document's "floor" says (the plot
// shows spade's time against it).
// The driver's other figures follow under their table names.
#pragma once

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace spade::bench {

/// One timed operation of spade and the same operation by the baselines.
struct Comparison {
  std::string what;
  double spade_seconds = 0;
  std::vector<std::pair<std::string, double>> baselines;  ///< (name, seconds); a baseline not run is left out
};

inline nlohmann::ordered_json to_json(const std::vector<Comparison>& comparisons) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const Comparison& c : comparisons) {
    nlohmann::ordered_json baselines = nlohmann::ordered_json::object();
    for (const auto& [name, seconds] : c.baselines) baselines[name] = seconds;
    list.push_back({{"what", c.what}, {"spade_seconds", c.spade_seconds}, {"baselines", baselines}});
  }
  return list;
}

/// Writes the document to `path` (two-space indentation); throws std::runtime_error when it cannot.
inline void write_json_file(const std::string& path, const nlohmann::ordered_json& document) {
  std::ofstream file(path);
  file << document.dump(2) << '\n';
  if (!file) throw std::runtime_error("cannot write " + path);
}

}  // namespace spade::bench
