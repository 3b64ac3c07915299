// How messages name a position in the user's matrix. spade's indices are 0-based; a Matrix Market file
// (and most users reading one) count from 1. Every message that names a row, a column or an entry of the
// user's matrix says which count it uses and gives the 1-based one beside it, so that "A(1, 0)" cannot be
// mistaken for the file's (1, 0).
#pragma once

#include <cstdint>
#include <string>

namespace spade {

/// "column 3 (0-based, original numbering; 4 counting from 1)"
inline std::string column_name(std::int64_t j) {
  return "column " + std::to_string(j) + " (0-based, original numbering; " + std::to_string(j + 1) +
         " counting from 1)";
}

/// "A(1, 0) (0-based; (2, 1) counting from 1)" for matrix "A" and entry (1, 0).
inline std::string entry_name(const char* matrix, std::int64_t i, std::int64_t j) {
  return std::string(matrix) + "(" + std::to_string(i) + ", " + std::to_string(j) + ") (0-based; (" +
         std::to_string(i + 1) + ", " + std::to_string(j + 1) + ") counting from 1)";
}

}  // namespace spade
