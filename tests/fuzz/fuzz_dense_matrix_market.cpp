// libFuzzer target: the right-hand-side reader (spade::parse_dense_matrix_market, array or coordinate) on
// arbitrary bytes. Every input must either parse into rows * cols values or throw a spade::Error whose
// message is one short line; anything else is a finding.
// Run: build-sanitize/fuzz_dense_matrix_market -max_total_time=600 scratch/ tests/fuzz/corpus/dense
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "spade/error.hpp"
#include "spade/matrix_market.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  spade::DenseMatrixMarketOptions options;
  options.max_entries = 1 << 20;  // a coordinate file's missing entries are stored zeros: bound the memory
  try {
    const spade::DenseMatrix m = spade::parse_dense_matrix_market(text, "fuzz_rhs.mtx", options);
    if (m.rows < 0 || m.cols < 0 || m.values.size() != static_cast<std::size_t>(m.rows * m.cols)) std::abort();
  } catch (const spade::Error& e) {
    const std::string message = e.what();
    if (message.find('\n') != std::string::npos || message.size() > 600) std::abort();
  }
  return 0;
}
