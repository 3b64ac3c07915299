// libFuzzer target: the sparse Matrix Market reader (spade::parse_matrix_market) on arbitrary bytes.
// Every input must either parse or throw a spade::Error whose message is one short line; anything else
// (a crash, a sanitizer report, another exception, a long or multi-line message) is a finding.
// The last byte picks the pattern-values rule, so that all three readings are explored.
// Run: build-sanitize/fuzz_matrix_market -max_total_time=600 scratch/ tests/fuzz/corpus/matrix_market
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "spade/error.hpp"
#include "spade/matrix_market.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  spade::MatrixMarketOptions options;
  const spade::PatternValues rules[] = {spade::PatternValues::reject, spade::PatternValues::ones,
                                        spade::PatternValues::laplacian};
  options.pattern_values = rules[size == 0 ? 0 : data[size - 1] % 3];
  // The compressed columns cost 8 bytes per column whatever the file holds: keep the fuzzer's memory small.
  options.max_dimension = 1 << 16;
  try {
    const spade::SparseMatrix a = spade::parse_matrix_market(text, "fuzz.mtx", options);
    if (a.rows() > options.max_dimension || a.cols() > options.max_dimension) std::abort();
  } catch (const spade::Error& e) {
    const std::string message = e.what();
    if (message.find('\n') != std::string::npos || message.size() > 600) std::abort();
  }
  return 0;
}
