// The test helpers that check generated text: count_occurrences and the FileCheck-style
// file_check, including that each directive fails when the text does not have what it says.
#include <catch2/catch.hpp>

#include <string>

#include "support.h"

namespace {

const std::string kText =
    "void cpp_fused_add_0(const float* in_ptr0, float* out_ptr0) {\n"
    "  #pragma omp simd\n"
    "  for (int64_t i0 = 0; i0 < 1024; i0 += 8) {\n"
    "    auto tmp0 = foundry_vec::load(in_ptr0 + i0);\n"
    "    foundry_vec::store(out_ptr0 + i0, tmp0);\n"
    "  }\n"
    "}\n";

bool contains(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

}  // namespace

TEST_CASE("count_occurrences counts every occurrence, overlapping ones too", "[support][fast]") {
  CHECK(count_occurrences("abcabc", "abc") == 2);
  CHECK(count_occurrences("aaaa", "aa") == 3);
  CHECK(count_occurrences("abc", "x") == 0);
  CHECK(count_occurrences(kText, "in_ptr0") == 2);
}

TEST_CASE("file_check: directives that hold pass", "[support][fast]") {
  CHECK(file_check(kText, R"(
    CHECK: void cpp_fused_add_0(
    CHECK-SAME: float* out_ptr0
    CHECK-NEXT: #pragma omp simd
    CHECK-NEXT: for (int64_t i0 = 0; i0 < 1024; i0 += 8)
    CHECK-NOT: out_ptr0
    CHECK: foundry_vec::load(in_ptr0 + i0)
    CHECK: foundry_vec::store(out_ptr0 + i0, {{tmp[0-9]+}})
    CHECK-NOT: foundry_vec::load
  )") == "");
  // A CHECK continues after the end of the previous match, on the same line too.
  CHECK(file_check("a b a\n", "CHECK: a\nCHECK: b\nCHECK: a") == "");
  // Regex metacharacters outside {{...}} are literal.
  CHECK(file_check("x[i0] = (y + 1.5) * z;\n", "CHECK: x[i0] = (y + 1.5) * z;") == "");
  CHECK(file_check("x[i0] = y;\n", "CHECK: x{{\\[i[0-9]\\]}} = y") == "");
}

TEST_CASE("file_check: a CHECK that is not there fails, naming it and where the search started", "[support][fast]") {
  std::string failure = file_check(kText, "CHECK: #pragma omp simd\nCHECK: #pragma omp parallel");
  CHECK(contains(failure, "\"CHECK: #pragma omp parallel\" not matched"));
  CHECK(contains(failure, "the search started on line 2"));
  CHECK(contains(failure, "  3 |   for (int64_t i0"));
  // Order matters: a pattern only before the previous match is not found.
  CHECK(file_check(kText, "CHECK: foundry_vec::store\nCHECK: foundry_vec::load") != "");
  // Literal text: '.' does not match any character outside {{...}}.
  CHECK(file_check("ab\n", "CHECK: a.") != "");
}

TEST_CASE("file_check: CHECK-NEXT fails unless on the very next line", "[support][fast]") {
  CHECK(file_check(kText, "CHECK: void cpp_fused_add_0\nCHECK-NEXT: for (") != "");
  CHECK(file_check(kText, "CHECK: #pragma omp simd\nCHECK-NEXT: for (") == "");
  std::string failure = file_check(kText, "CHECK: i0 += 8\nCHECK-NEXT: foundry_vec::store");
  CHECK(contains(failure, "\"CHECK-NEXT: foundry_vec::store\" not matched"));
  CHECK(contains(failure, "line 4"));
}

TEST_CASE("file_check: CHECK-SAME fails unless later on the same line", "[support][fast]") {
  CHECK(file_check(kText, "CHECK: void cpp_fused_add_0(\nCHECK-SAME: out_ptr0") == "");
  CHECK(file_check(kText, "CHECK: float* out_ptr0\nCHECK-SAME: in_ptr0") != "");  // earlier on the line
  CHECK(file_check(kText, "CHECK: #pragma omp simd\nCHECK-SAME: for (") != "");   // on the next line
}

TEST_CASE("file_check: CHECK-NOT fails when the pattern is between the matches around it", "[support][fast]") {
  std::string failure = file_check(kText, "CHECK: #pragma omp simd\nCHECK-NOT: load\nCHECK: store");
  CHECK(contains(failure, "\"CHECK-NOT: load\" failed: it occurs on line 4"));
  CHECK(file_check(kText, "CHECK: store\nCHECK-NOT: load") == "");  // only before the match
  CHECK(file_check(kText, "CHECK-NOT: parallel\nCHECK: simd") == "");
  CHECK(file_check(kText, "CHECK-NOT: void\nCHECK: simd") != "");   // before the first match
  CHECK(file_check(kText, "CHECK: simd\nCHECK-NOT: }") != "");      // up to the end
}

TEST_CASE("file_check: malformed check lists fail", "[support][fast]") {
  CHECK(file_check(kText, "no directives here") == "no CHECK directives in the check list");
  CHECK(contains(file_check(kText, "CHECK-NEXT: void"), "has no previous match to follow"));
}
