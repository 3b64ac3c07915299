// spade error types: three tiers (the design page in README.md).
//   InvalidInput   - misuse or bad data from the caller: malformed files, wrong shapes, non-square or
//                    non-symmetric input where symmetry is required, NaN/Inf values.
//   ResourceError  - the machine cannot do it: out of memory, sizes that overflow the index types,
//                    CUDA errors, a missing GPU, failures reported by METIS or other libraries.
//   NumericalError - the arithmetic broke down: a matrix that is not positive definite (with the column),
//                    a zero pivot or diagonal (with the row), a spin-wait that timed out on the GPU.
// Every spade function that can fail throws one of these; none returns success on failure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace spade {

/// Base of every exception spade throws. `what()` is one readable line.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

/// Misuse or bad input data (the caller can fix it).
class InvalidInput : public Error {
 public:
  explicit InvalidInput(const std::string& message) : Error(message) {}
};

/// Not enough memory, index overflow, CUDA or library failure, no GPU.
class ResourceError : public Error {
 public:
  explicit ResourceError(const std::string& message) : Error(message) {}
};

/// Numerical breakdown. `index()` is the failing column (or row), 0-based in the numbering the message
/// names (for factorizations: the user's original numbering), or -1 when no single index applies.
class NumericalError : public Error {
 public:
  enum class Kind { not_positive_definite, singular, not_finite, no_progress };
  NumericalError(Kind kind, std::int64_t index, const std::string& message)
      : Error(message), kind_(kind), index_(index) {}
  Kind kind() const noexcept { return kind_; }
  std::int64_t index() const noexcept { return index_; }

 private:
  Kind kind_;
  std::int64_t index_;
};

/// Input text (a token of a file, a path, a command-line value) made safe to put in a one-line message:
/// at most `max_chars` bytes of `text` are kept, never splitting a UTF-8 character; valid UTF-8 passes
/// through, while control bytes, DEL, a backslash and every byte of an invalid UTF-8 sequence are written
/// as C escapes (`\n`, `\t`, `\\`, `\xHH`); when text is cut, "... (N bytes in all)" follows. Never
/// throws except std::bad_alloc.
std::string printable(std::string_view text, std::size_t max_chars = 40);

/// printable(text, max_chars) between single quotes: `'text'` or `'tex'... (N bytes in all)`.
std::string quote(std::string_view text, std::size_t max_chars = 40);

}  // namespace spade
