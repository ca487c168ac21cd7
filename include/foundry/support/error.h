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

}  // namespace foundry
