// Two kinds of failure: a user error (bad input file, unsupported op, wrong shape: exit 1) and an
// internal error (a broken invariant inside foundryc: a bug, exit 3).
#pragma once
#include <stdexcept>
#include <string>

namespace foundry {

class UserError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

// FOUNDRY_CHECK(cond, msg): an invariant of our own; failing it is a foundryc bug.
#define FOUNDRY_CHECK(cond, msg)                                                            \
  do {                                                                                       \
    if (!(cond))                                                                             \
      throw ::foundry::InternalError(std::string(__FILE__) + ":" + std::to_string(__LINE__) + \
                                     ": " + (msg));                                         \
  } while (0)

// Text from the input file, made safe to show in a one-line message or a comment.
std::string quote_untrusted(const std::string& s, size_t max_len = 80);

// A whole message made safe to print on a terminal, whatever text from the input it carries: one
// line (newlines become spaces), control characters (C0, DEL and the C1 range, which terminals
// read as escape sequences) as \xNN, and cut after `max_len` bytes with the count of the rest.
// The last line of defence where messages are printed; names are still quoted where they are
// put into a message.
constexpr size_t kMaxMessageBytes = 2048;
std::string printable_message(const std::string& s, size_t max_len = kMaxMessageBytes);

}  // namespace foundry
