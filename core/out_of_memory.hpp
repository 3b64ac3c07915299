// Turns the standard library's out-of-memory exception into spade's ResourceError at a public entry point,
// so that a caller sees one of the three tiers of include/spade/error.hpp whatever allocation failed.
#pragma once

#include <new>
#include <string>
#include <utility>

#include "spade/error.hpp"

namespace spade {

/// Returns f(); std::bad_alloc thrown inside becomes ResourceError("<what>: out of memory").
template <class F>
decltype(auto) out_of_memory_is_resource_error(const char* what, F&& f) {
  try {
    return std::forward<F>(f)();
  } catch (const std::bad_alloc&) {
    throw ResourceError(std::string(what) + ": out of memory");
  }
}

}  // namespace spade
