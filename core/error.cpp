// Quoting of input text in error messages (include/spade/error.hpp): a hostile file or command line must
// not be able to make a message long, multi-line, or invalid UTF-8.
#include "spade/error.hpp"

namespace spade {
namespace {

/// Length of the valid UTF-8 sequence that starts text[i] (RFC 3629: no overlong forms, no surrogates,
/// nothing above U+10FFFF), or 0 when the bytes there are not one.
std::size_t utf8_length(std::string_view text, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char c = byte(i);
  std::size_t length;
  unsigned char low = 0x80, high = 0xbf;  // the allowed range of the second byte
  if (c >= 0xc2 && c <= 0xdf) {
    length = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    length = 3;
    if (c == 0xe0) low = 0xa0;
    if (c == 0xed) high = 0x9f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    length = 4;
    if (c == 0xf0) low = 0x90;
    if (c == 0xf4) high = 0x8f;
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  if (byte(i + 1) < low || byte(i + 1) > high) return 0;
  for (std::size_t k = 2; k < length; ++k)
    if (byte(i + k) < 0x80 || byte(i + k) > 0xbf) return 0;
  return length;
}

/// The escaped form of the longest prefix of `text` of at most max_chars bytes that ends on a character
/// boundary; `consumed` is that prefix's length.
std::string escape_prefix(std::string_view text, std::size_t max_chars, std::size_t& consumed) {
  static const char hex[] = "0123456789abcdef";
  std::string out;
  std::size_t i = 0;
  while (i < text.size()) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    const std::size_t length = c >= 0x80 ? utf8_length(text, i) : 1;
    if (i + (length == 0 ? 1 : length) > max_chars) break;
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7f || length == 0) {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out.append(text.substr(i, length));
    }
    i += length == 0 ? 1 : length;
  }
  consumed = i;
  return out;
}

std::string length_note(std::string_view text, std::size_t consumed) {
  return consumed < text.size() ? "... (" + std::to_string(text.size()) + " bytes in all)" : "";
}

}  // namespace

std::string printable(std::string_view text, std::size_t max_chars) {
  std::size_t consumed = 0;
  std::string out = escape_prefix(text, max_chars, consumed);
  return out + length_note(text, consumed);
}

std::string quote(std::string_view text, std::size_t max_chars) {
  std::size_t consumed = 0;
  const std::string body = escape_prefix(text, max_chars, consumed);
  return "'" + body + "'" + length_note(text, consumed);
}

}  // namespace spade
