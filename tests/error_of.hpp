// Shared by the tests that assert error messages.
#pragma once

#include <exception>
#include <functional>
#include <string>

namespace spade::testing {

/// The message of the exception of type E that `f` throws, or a description of what happened instead.
template <class E>
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("wrong exception type: ") + e.what();
  }
  return "no exception";
}

}  // namespace spade::testing
