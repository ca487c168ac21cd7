// The values PyTorch accepts for the string arguments of the ops in ops.def, each with the reason
// ATen gives when refusing another: a string argument is an enumeration in disguise, and the
// lowerings branch on it, so an unknown value must stop at binding rather than fall through to
// some default branch (gelu(approximate='junk') would silently compute the exact GELU).
#include "foundry/ops/registry.h"
#include "foundry/support/error.h"

namespace foundry {
namespace {

struct StringChoices {
  std::string_view op, arg;
  std::vector<std::string_view> values;  // empty: free text
  std::string_view refusal;              // ATen's wording; the value given is appended
};

const std::vector<StringChoices>& table() {
  static const std::vector<StringChoices> choices = {
      {"gelu", "approximate", {"none", "tanh"}, "approximate argument must be either none or tanh, got "},
      // None (true division) is not a string: the binder passes it as none.
      {"div.Tensor_mode", "rounding_mode", {"trunc", "floor"},
       "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found "},
      {"scatter_reduce.two", "reduce", {"sum", "prod", "mean", "amax", "amin"},
       "reduce argument must be either sum, prod, mean, amax or amin, got "},
      {"pad", "mode", {"constant", "reflect", "replicate", "circular"},
       "padding mode must be constant, reflect, replicate or circular, got "},
      {"einsum", "equation", {}, ""},  // parsed by the op's rule (einsum.h)
      {"conv1d.padding", "padding", {"valid", "same"}, "Invalid padding string: "},
      {"conv2d.padding", "padding", {"valid", "same"}, "Invalid padding string: "},
      {"conv3d.padding", "padding", {"valid", "same"}, "Invalid padding string: "},
      {"meshgrid.indexing", "indexing", {"ij", "xy"}, "torch.meshgrid: indexing must be one of \"xy\" or \"ij\", but received: "},
      {"scatter.reduce", "reduce", {"add", "multiply"}, "reduce argument must be either add or multiply, got "},
      {"index_reduce", "reduce", {"prod", "mean", "amax", "amin"},
       "index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got "},
      {"searchsorted.Tensor", "side", {"left", "right"}, "side can only be 'left' or 'right' but got "},
      {"_assert_scalar", "assert_msg", {}, ""},  // a message, only ever printed (quoted)
      {"_linalg_eigh", "UPLO", {"L", "U"}, "Expected UPLO argument to be 'L' or 'U', but got "},
      // gesdd, gesvd, gesvdj, gesvda: CUDA drivers; on the CPU ATen runs gesdd whatever it says.
      {"_linalg_svd", "driver", {"gesdd", "gesvd", "gesvdj", "gesvda"}, "driver must be gesdd, gesvd, gesvdj or gesvda, got "},
  };
  return choices;
}

// The row of an op's string argument; an in-place op ("gelu_") shares its functional op's.
const StringChoices* find_choices(std::string_view op, std::string_view arg) {
  for (const std::string& name : {std::string(op), functional_op_name(op)})
    for (const StringChoices& c : table())
      if (c.op == name && c.arg == arg) return &c;
  return nullptr;
}

}  // namespace

bool has_string_rule(std::string_view op, std::string_view arg) { return find_choices(op, arg) != nullptr; }

void check_string_argument(std::string_view op, std::string_view arg, const std::string& value) {
  const StringChoices* c = find_choices(op, arg);
  // Every str argument of ops.def has a row (test_ops.cpp checks): a missing one is ours.
  if (!c) throw InternalError("no accepted values listed for string argument '" + std::string(arg) + "' of " + std::string(op));
  if (c->values.empty()) return;
  for (std::string_view allowed : c->values)
    if (value == allowed) return;
  throw UserError(std::string(op) + ": " + std::string(c->refusal) + quote_untrusted(value, 40));
}

}  // namespace foundry
