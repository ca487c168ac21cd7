// quote_untrusted and printable_message: file text made safe for one-line messages and generated comments.
#include "foundry/support/error.h"

namespace foundry {

namespace {
// Appends `\xNN`.
void append_hex_escape(unsigned char c, std::string& out) {
  static const char* kHex = "0123456789abcdef";
  out += "\\x";
  out += kHex[c >> 4];
  out += kHex[c & 15];
}

// Appends the escaped form of one byte.
void escape_byte(unsigned char c, std::string& out) {
  switch (c) {
    case '"': out += "\\\""; return;
    case '\\': out += "\\\\"; return;
    case '\n': out += "\\n"; return;
    case '\r': out += "\\r"; return;
    case '\t': out += "\\t"; return;
    default: break;
  }
  // Control characters, DEL and every non-ASCII byte become \xNN: the result is plain ASCII, so it
  // cannot carry terminal escapes, invalid UTF-8, or comment terminators spread over lines.
  if (c < 0x20 || c >= 0x7f) return append_hex_escape(c, out);
  out += static_cast<char>(c);
}
}  // namespace

std::string quote_untrusted(const std::string& s, size_t max_len) {
  std::string out = "\"";
  std::string piece;
  size_t shown = 0;  // characters of escaped text emitted so far (without the quotes)
  for (size_t i = 0; i < s.size(); ++i) {
    piece.clear();
    if (s[i] == '/' && i > 0 && s[i - 1] == '*')
      piece = "\\x2f";  // "*/" would end a C comment that quotes this text
    else
      escape_byte(static_cast<unsigned char>(s[i]), piece);
    if (shown + piece.size() > max_len) {
      out += "...";
      break;
    }
    out += piece;
    shown += piece.size();
  }
  out += '"';
  return out;
}

std::string printable_message(const std::string& s, size_t max_len) {
  std::string out;
  size_t i = 0;
  for (; i < s.size() && out.size() < max_len; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    bool c1 = c == 0xc2 && i + 1 < s.size() && (static_cast<unsigned char>(s[i + 1]) & 0xe0) == 0x80;  // U+0080..U+009F
    if (c == '\n' || c == '\r') {
      out += ' ';
    } else if (c < 0x20 || c == 0x7f || c1) {
      if (c1) c = static_cast<unsigned char>(s[++i]);
      append_hex_escape(c, out);
    } else {
      out += static_cast<char>(c);
    }
  }
  if (i < s.size()) out += "... (" + std::to_string(s.size() - i) + " more bytes)";
  return out;
}

}  // namespace foundry
