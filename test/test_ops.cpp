// The op registry: schema parsing, argument binding, and shape/dtype rules.
// Expected values follow PyTorch's documented semantics.
#include <catch2/catch.hpp>
#include <memory>

#include "foundry/ops/registry.h"
#include "foundry/support/error.h"

namespace foundry::test {

namespace {

using Kind = Arg::Kind;

// Owns the values that hand-built nodes point to.
struct Values {
  std::vector<std::unique_ptr<Value>> owned;
  Arg tensor(DType dtype, std::vector<int64_t> sizes) {
    auto v = std::make_unique<Value>();
    v->type = shape::make_type(dtype, std::move(sizes));
    owned.push_back(std::move(v));
    return Arg::of_tensor(owned.back().get());
  }
  Arg f32(std::vector<int64_t> sizes) { return tensor(DType::Float32, std::move(sizes)); }
};

Arg tensor_list(std::vector<Arg> tensors, Kind kind = Kind::TensorList) {
  Arg a;
  a.kind = kind;
  for (const Arg& t : tensors) a.tensors.push_back(t.tensor);
  return a;
}

const OpInfo& op(const std::string& name) {
  const OpInfo* info = find_op(name);
  REQUIRE(info != nullptr);
  return *info;
}

std::unique_ptr<Node> bind(const std::string& name, const std::vector<RawArg>& raw) {
  auto node = std::make_unique<Node>();
  node->op = &op(name);
  node->target = name;
  node->args = bind_arguments(*node->op, raw, &node->arg_names);
  return node;
}

std::vector<TensorType> infer(const std::string& name, const std::vector<RawArg>& raw) {
  auto node = bind(name, raw);
  return node->op->infer(*node);
}

TensorType infer1(const std::string& name, const std::vector<RawArg>& raw) {
  auto outs = infer(name, raw);
  REQUIRE(outs.size() == 1);
  return outs[0];
}

using Sizes = std::vector<int64_t>;

}  // namespace

TEST_CASE("parse_schema reads names, overloads, kwarg-only args and defaults", "[ops][fast]") {
  OpSchema s = parse_schema("add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor");
  CHECK(s.name == "add");
  CHECK(s.overload == "Tensor");
  REQUIRE(s.args.size() == 3);
  CHECK(s.args[0].type == "Tensor");
  CHECK_FALSE(s.args[1].kwarg_only);
  CHECK(s.args[2].kwarg_only);
  CHECK(s.args[2].default_text == "1");
  CHECK(s.returns == std::vector<std::string>{"Tensor"});

  OpSchema r = parse_schema("relu(Tensor self) -> Tensor");
  CHECK(r.name == "relu");
  CHECK(r.overload.empty());
}

TEST_CASE("parse_schema handles annotated, list and optional types", "[ops][fast]") {
  OpSchema s = parse_schema(
      "f.x(Tensor(a!) self, Tensor?[] indices, int[2] stride=[0,0], float[]? scales=None, "
      "str mode=\"none\", SymInt? start=None, *, MemoryFormat? memory_format=contiguous_format, "
      "float eps=1e-05, int dim=-1) -> (Tensor values, Tensor indices)");
  REQUIRE(s.args.size() == 9);
  CHECK(s.args[0].type == "Tensor");
  CHECK(s.args[0].alias == "a!");
  CHECK(s.args[1].type == "Tensor?[]");
  CHECK_FALSE(s.args[1].optional);
  CHECK(s.args[2].type == "int[2]");
  CHECK(s.args[2].default_text == "[0,0]");
  CHECK(s.args[3].type == "float[]?");
  CHECK(s.args[3].optional);
  CHECK(s.args[4].default_text == "\"none\"");
  CHECK(s.args[5].optional);
  CHECK(s.args[6].kwarg_only);
  CHECK(s.args[6].default_text == "contiguous_format");
  CHECK(s.args[7].default_text == "1e-05");
  CHECK(s.args[8].default_text == "-1");
  CHECK(s.returns == std::vector<std::string>{"Tensor", "Tensor"});

  OpSchema split = parse_schema("split_with_sizes(Tensor(a -> *) self, SymInt[] split_sizes, int dim=0) -> Tensor(a)[]");
  CHECK(split.args[0].alias == "a -> *");
  CHECK(split.returns == std::vector<std::string>{"Tensor[]"});
  CHECK(parse_schema("_assert_scalar(Scalar self, str assert_msg) -> ()").returns.empty());
  CHECK_THROWS_AS(parse_schema("broken(Tensor self -> Tensor"), InternalError);
  CHECK_THROWS_AS(parse_schema("broken(Tensor) -> Tensor"), InternalError);
}

TEST_CASE("every ops.def schema parses and the tier-1 names are found", "[ops][fast]") {
  CHECK(all_ops().size() >= 180);
  for (const char* name : {"add.Tensor", "native_layer_norm", "max_pool2d_with_indices", "sym_size.int",
                           "_assert_scalar", "index.Tensor", "var_mean.correction", "hardswish_"})
    CHECK(find_op(name) != nullptr);
  CHECK(find_op("torch.ops.aten.relu.default") == find_op("relu"));
  CHECK(find_op("torch.ops.aten.no_such_op.default") == nullptr);
  CHECK(short_op_name("torch.ops.aten.add.Tensor") == "add.Tensor");
  CHECK(short_op_name("torch.ops.aten.relu.default") == "relu");
}

TEST_CASE("an in-place op with no row of its own is derived from its functional row", "[ops][fast]") {
  Values v;
  const OpInfo& lt = op("lt_.Tensor");  // not in ops.def: derived from lt.Tensor
  CHECK(lt.schema.text == "lt_.Tensor(Tensor(a!) self, Tensor other) -> Tensor(a!)");
  CHECK(lt.schema.args[0].alias == "a!");
  CHECK(&op("torch.ops.aten.lt_.Tensor") == &lt);  // derived once, then the same row
  // The result is self, whatever the functional op gives (lt gives bool).
  CHECK(infer1("lt_.Tensor", {{"self", v.f32({2, 3})}, {"other", v.f32({3})}}).dtype == DType::Float32);
  CHECK(infer1("relu_", {{"self", v.f32({4})}}).sizes == Sizes{4});
  // Only "NAME_" of a functional "NAME(Tensor self, ...) -> Tensor"; dunder names are not in-place.
  CHECK(find_op("conv2d_") == nullptr);  // conv2d(Tensor input, ...)
  CHECK(find_op("split_.Tensor") == nullptr);  // returns a list
  CHECK(find_op("no_such_op_") == nullptr);
  CHECK(functional_op_name("add_.Scalar") == "add.Scalar");
  CHECK(functional_op_name("__and__.Tensor").empty());
  CHECK(functional_op_name("relu").empty());
}

TEST_CASE("messages name a target one way: ATen's as aten.NAME, other libraries' by namespace", "[ops][fast]") {
  CHECK(qualified_op_name("add.Tensor") == "aten.add.Tensor");
  CHECK(qualified_op_name("torch.ops.transformers.grouped_mm_fallback") == "transformers.grouped_mm_fallback");
  CHECK(shown_target("torch.ops.aten.relu.default") == "aten.relu.default");  // as the file has it
  CHECK(shown_target("no_such_op.Tensor") == "aten.no_such_op.Tensor");       // a node's short name
  CHECK(shown_target("torch.ops.higher_order.cond") == "higher_order.cond");
  CHECK(shown_target("_operator.add") == "_operator.add");
  CHECK(shown_target("torch.sym_float") == "torch.sym_float");
  CHECK(shown_target("evil\n(name)").front() == '"');  // not a plain name: quoted
}

TEST_CASE("bind_arguments fills defaults in schema order", "[ops][fast]") {
  Values v;
  std::vector<std::string> names;
  auto args = bind_arguments(op("add.Tensor"), {{"self", v.f32({2})}, {"other", v.f32({2})}}, &names);
  CHECK(names == std::vector<std::string>{"self", "other", "alpha"});
  REQUIRE(args.size() == 3);
  CHECK(args[2].kind == Kind::Int);
  CHECK(args[2].i == 1);

  auto conv = bind("conv2d", {{"input", v.f32({1, 3, 8, 8})}, {"weight", v.f32({4, 3, 3, 3})}});
  CHECK(conv->arg("bias").is_none());
  CHECK(conv->arg("stride").ints == Sizes{1, 1});
  CHECK(conv->arg("padding").ints == Sizes{0, 0});
  CHECK(conv->arg("groups").i == 1);

  auto pool = bind("max_pool2d_with_indices", {{"self", v.f32({1, 1, 4, 4})}, {"kernel_size", Arg::of_ints({2, 2})}});
  CHECK(pool->arg("stride").kind == Kind::IntList);
  CHECK(pool->arg("stride").ints.empty());
  CHECK(pool->arg("dilation").ints == Sizes{1, 1});
  CHECK(pool->arg("ceil_mode").kind == Kind::Bool);

  auto ln = bind("layer_norm", {{"input", v.f32({2, 4})}, {"normalized_shape", Arg::of_ints({4})}});
  CHECK(ln->arg("eps").kind == Kind::Float);
  CHECK(ln->arg("eps").f == Approx(1e-5));
  CHECK(bind("gelu", {{"self", v.f32({2})}})->arg("approximate").s == "none");
  CHECK(bind("contiguous", {{"self", v.f32({2})}})->arg("memory_format").kind == Kind::MemoryFormat);
  CHECK(bind("sum.dim_IntList", {{"self", v.f32({2})}, {"dim", Arg::none()}})->arg("dtype").is_none());
}

TEST_CASE("bind_arguments accepts numbers in Tensor slots and ints in float slots", "[ops][fast]") {
  Values v;
  auto add = bind("add.Tensor", {{"self", v.f32({2})}, {"other", Arg::of_float(2.5)}});
  CHECK(add->arg("other").kind == Kind::Float);
  auto kw = bind("add.Tensor", {{"self", v.f32({2})}, {"other", Arg::of_int(1)}, {"alpha", Arg::of_int(2), true}});
  CHECK(kw->arg("alpha").i == 2);
  auto drop = bind("dropout", {{"input", v.f32({2})}, {"p", Arg::of_int(0)}, {"train", Arg::of_bool(false)}});
  CHECK(drop->arg("p").kind == Kind::Float);
  auto index = bind("index.Tensor", {{"self", v.f32({3})}, {"indices", tensor_list({v.tensor(DType::Int64, {2})})}});
  CHECK(index->arg("indices").kind == Kind::OptTensorList);
}

TEST_CASE("bind_arguments binds unnamed arguments positionally", "[ops][fast]") {
  Values v;
  auto args = bind_arguments(op("transpose.int"), {{"", v.f32({2, 3})}, {"", Arg::of_int(0)}, {"", Arg::of_int(1)}}, nullptr);
  REQUIRE(args.size() == 3);
  CHECK(args[2].i == 1);
  CHECK_THROWS_AS(bind_arguments(op("relu"), {{"", v.f32({2})}, {"", v.f32({2})}}, nullptr), UserError);
}

TEST_CASE("bind_arguments rejects wrong, unknown and missing arguments", "[ops][fast]") {
  Values v;
  auto message = [&](const std::string& name, const std::vector<RawArg>& raw) {
    try {
      bind_arguments(op(name), raw, nullptr);
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  using Catch::Matchers::Contains;
  CHECK_THAT(message("add.Tensor", {{"self", v.f32({2})}, {"other", Arg::of_ints({1, 2})}}),
             Contains("other") && Contains("Tensor"));
  CHECK_THAT(message("add.Tensor", {{"self", v.f32({2})}}), Contains("other") && Contains("missing"));
  CHECK_THAT(message("relu", {{"self", v.f32({2})}, {"bogus", Arg::of_int(1)}}), Contains("bogus"));
  CHECK_THAT(message("sum.dim_IntList", {{"self", v.f32({2})}, {"dim", Arg::of_float(1.5)}}), Contains("dim"));
  CHECK_THAT(message("clamp", {{"self", v.f32({2})}, {"min", v.f32({2})}}), Contains("min"));
  CHECK_THAT(message("add.Tensor", {{"self", v.f32({2})}, {"other", v.f32({2})}, {"self", v.f32({2})}}),
             Contains("self") && Contains("twice"));
}

TEST_CASE("shape rules refuse sizes that depend on run-time symbolic ints", "[ops][fast]") {
  Values v;
  Arg symbolic;
  symbolic.kind = Kind::SymInt;
  symbolic.tensor = v.tensor(DType::Int64, {}).tensor;
  CHECK_THROWS_WITH(infer("slice.Tensor", {{"self", v.f32({5})}, {"start", symbolic}}), Catch::Contains("start"));
  CHECK_THROWS_AS(infer("select.int", {{"self", v.f32({5})}, {"dim", Arg::of_int(0)}, {"index", symbolic}}), UserError);
  // A SymInt operand of a pointwise op promotes like a Python int.
  CHECK(infer1("mul.Tensor", {{"self", v.tensor(DType::Int32, {3})}, {"other", symbolic}}).dtype == DType::Int32);
}

TEST_CASE("pointwise rules broadcast", "[ops][fast]") {
  Values v;
  TensorType out = infer1("add.Tensor", {{"self", v.f32({2, 1, 3})}, {"other", v.f32({4, 1})}});
  CHECK(out.sizes == Sizes{2, 4, 3});
  CHECK(out.dtype == DType::Float32);
  CHECK_THROWS_AS(infer("mul.Tensor", {{"self", v.f32({2, 3})}, {"other", v.f32({4})}}), UserError);
  TensorType where = infer1("where.self", {{"condition", v.tensor(DType::Bool, {3, 1})},
                                           {"self", v.f32({1, 4})}, {"other", Arg::of_float(0.0)}});
  CHECK(where.sizes == Sizes{3, 4});
  CHECK(where.dtype == DType::Float32);
}

TEST_CASE("type promotion with wrapped scalars and 0-d tensors", "[ops][fast]") {
  Values v;
  auto add = [&](Arg a, Arg b) { return infer1("add.Tensor", {{"self", a}, {"other", b}}).dtype; };
  // Wrapped numbers only raise the category.
  CHECK(add(v.tensor(DType::Int32, {3}), Arg::of_float(1.5)) == DType::Float32);
  CHECK(add(v.tensor(DType::Int32, {3}), Arg::of_int(7)) == DType::Int32);
  CHECK(add(v.tensor(DType::Bool, {3}), Arg::of_int(7)) == DType::Int64);
  CHECK(add(v.tensor(DType::Float16, {3}), Arg::of_float(1.5)) == DType::Float16);
  CHECK(add(v.tensor(DType::UInt8, {3}), Arg::of_int(300)) == DType::UInt8);
  // 0-d tensors: the dim>0 operand decides unless the 0-d one is of a higher category.
  CHECK(add(v.tensor(DType::Int32, {3}), v.tensor(DType::Int64, {})) == DType::Int32);
  CHECK(add(v.tensor(DType::Float16, {3}), v.tensor(DType::Float64, {})) == DType::Float16);
  CHECK(add(v.tensor(DType::Int64, {3}), v.tensor(DType::Float64, {})) == DType::Float64);
  CHECK(add(v.tensor(DType::Int32, {}), v.tensor(DType::Int64, {})) == DType::Int64);
  CHECK(add(v.tensor(DType::Int32, {3}), v.tensor(DType::Float16, {3})) == DType::Float16);
  // True division and float-valued ops go to the default dtype; comparisons give bool.
  CHECK(infer1("div.Tensor", {{"self", v.tensor(DType::Int64, {3})}, {"other", Arg::of_int(2)}}).dtype == DType::Float32);
  CHECK(infer1("div.Tensor_mode", {{"self", v.tensor(DType::Int64, {3})}, {"other", Arg::of_int(2)},
                                   {"rounding_mode", Arg::of_string("floor")}}).dtype == DType::Int64);
  CHECK(infer1("sin", {{"self", v.tensor(DType::Int32, {3})}}).dtype == DType::Float32);
  CHECK(infer1("abs", {{"self", v.tensor(DType::Int32, {3})}}).dtype == DType::Int32);
  CHECK(infer1("lt.Scalar", {{"self", v.f32({3})}, {"other", Arg::of_int(0)}}).dtype == DType::Bool);
  CHECK(infer1("clamp", {{"self", v.tensor(DType::Int64, {3})}, {"min", Arg::of_float(0.5)}}).dtype == DType::Float32);
  CHECK(infer1("pow.Scalar", {{"self", Arg::of_float(2.0)}, {"exponent", v.tensor(DType::Int64, {3})}}).dtype == DType::Float32);
}

TEST_CASE("reduction rules: dims, keepdim, dtypes", "[ops][fast]") {
  Values v;
  Arg x = v.f32({2, 3, 4});
  CHECK(infer1("sum.dim_IntList", {{"self", x}, {"dim", Arg::of_ints({-1})}}).sizes == Sizes{2, 3});
  CHECK(infer1("sum.dim_IntList", {{"self", x}, {"dim", Arg::of_ints({0, -1})}, {"keepdim", Arg::of_bool(true)}}).sizes == Sizes{1, 3, 1});
  CHECK(infer1("sum.dim_IntList", {{"self", x}, {"dim", Arg::none()}}).sizes == Sizes{});
  CHECK(infer1("amax", {{"self", x}, {"dim", Arg::of_ints({})}, {"keepdim", Arg::of_bool(true)}}).sizes == Sizes{1, 1, 1});
  CHECK(infer1("sum", {{"self", v.tensor(DType::Bool, {5})}}).dtype == DType::Int64);
  CHECK(infer1("sum", {{"self", v.tensor(DType::Int32, {5})}}).dtype == DType::Int64);
  CHECK(infer1("sum", {{"self", v.tensor(DType::Int32, {5})}, {"dtype", Arg::of_dtype(DType::Int32)}}).dtype == DType::Int32);
  CHECK(infer1("cumsum", {{"self", v.tensor(DType::Int32, {5})}, {"dim", Arg::of_int(0)}}).dtype == DType::Int64);
  CHECK(infer1("argmax", {{"self", x}}).sizes == Sizes{});
  CHECK(infer1("argmax", {{"self", x}, {"dim", Arg::of_int(1)}}).dtype == DType::Int64);
  CHECK(infer1("any.dim", {{"self", v.tensor(DType::Int64, {2, 3})}, {"dim", Arg::of_int(1)}}).dtype == DType::Bool);
  CHECK_THROWS_AS(infer("mean.dim", {{"self", v.tensor(DType::Int64, {2})}, {"dim", Arg::of_ints({0})}}), UserError);
  CHECK_THROWS_AS(infer("sum.dim_IntList", {{"self", x}, {"dim", Arg::of_ints({3})}}), UserError);

  auto max = infer("max.dim", {{"self", x}, {"dim", Arg::of_int(-2)}, {"keepdim", Arg::of_bool(true)}});
  REQUIRE(max.size() == 2);
  CHECK(max[0].sizes == Sizes{2, 1, 4});
  CHECK(max[0].dtype == DType::Float32);
  CHECK(max[1].dtype == DType::Int64);
  auto var_mean = infer("var_mean.correction", {{"self", x}, {"dim", Arg::of_ints({1})}});
  REQUIRE(var_mean.size() == 2);
  CHECK(var_mean[1].sizes == Sizes{2, 4});
}

TEST_CASE("view and shape rules", "[ops][fast]") {
  Values v;
  Arg x = v.f32({2, 3, 4});
  CHECK(infer1("view", {{"self", x}, {"size", Arg::of_ints({-1, 4})}}).sizes == Sizes{6, 4});
  CHECK_THROWS_AS(infer("view", {{"self", x}, {"size", Arg::of_ints({-1, 5})}}), UserError);
  CHECK_THROWS_AS(infer("view", {{"self", x}, {"size", Arg::of_ints({-1, -1})}}), UserError);
  CHECK(infer1("permute", {{"self", x}, {"dims", Arg::of_ints({2, 0, -2})}}).sizes == Sizes{4, 2, 3});
  CHECK(infer1("expand", {{"self", v.f32({3, 1})}, {"size", Arg::of_ints({2, -1, 4})}}).sizes == Sizes{2, 3, 4});
  CHECK(infer1("squeeze.dims", {{"self", v.f32({1, 3, 1})}, {"dim", Arg::of_ints({0, 1})}}).sizes == Sizes{3, 1});
  CHECK(infer1("unsqueeze", {{"self", x}, {"dim", Arg::of_int(-1)}}).sizes == Sizes{2, 3, 4, 1});
  CHECK(infer1("select.int", {{"self", x}, {"dim", Arg::of_int(1)}, {"index", Arg::of_int(-1)}}).sizes == Sizes{2, 4});
  CHECK(infer1("flatten.using_ints", {{"self", x}, {"start_dim", Arg::of_int(1)}}).sizes == Sizes{2, 12});
  CHECK(infer1("diagonal", {{"self", v.f32({3, 4})}, {"offset", Arg::of_int(1)}}).sizes == Sizes{3});
  CHECK(infer1("diagonal", {{"self", v.f32({3, 4})}, {"offset", Arg::of_int(-2)}}).sizes == Sizes{1});
  CHECK(infer1("diagonal", {{"self", x}, {"dim1", Arg::of_int(1)}, {"dim2", Arg::of_int(2)}}).sizes == Sizes{2, 3});
  CHECK(infer1("unfold", {{"self", v.f32({10})}, {"dimension", Arg::of_int(0)}, {"size", Arg::of_int(3)},
                          {"step", Arg::of_int(2)}}).sizes == Sizes{4, 3});
  CHECK(infer1("constant_pad_nd", {{"self", x}, {"pad", Arg::of_ints({1, 2, -1, 0})}}).sizes == Sizes{2, 2, 7});
  CHECK(infer1("repeat", {{"self", v.f32({2, 3})}, {"repeats", Arg::of_ints({2, 1, 2})}}).sizes == Sizes{2, 2, 6});

  auto split = infer("split_with_sizes", {{"self", x}, {"split_sizes", Arg::of_ints({1, 2})}, {"dim", Arg::of_int(1)}});
  REQUIRE(split.size() == 2);
  CHECK(split[1].sizes == Sizes{2, 2, 4});
  CHECK(split[0].sizes == Sizes{2, 1, 4});
}

TEST_CASE("slice clamps its bounds like Python", "[ops][fast]") {
  Values v;
  Arg x = v.f32({10, 2});
  auto len = [&](Arg start, Arg end, int64_t step) {
    return infer1("slice.Tensor", {{"self", x}, {"start", start}, {"end", end}, {"step", Arg::of_int(step)}}).sizes[0];
  };
  CHECK(len(Arg::of_int(-3), Arg::none(), 1) == 3);
  CHECK(len(Arg::of_int(2), Arg::of_int(100), 3) == 3);  // 2, 5, 8
  CHECK(len(Arg::of_int(8), Arg::of_int(2), 1) == 0);
  CHECK(len(Arg::of_int(-100), Arg::of_int(5), 1) == 5);
  CHECK(len(Arg::none(), Arg::of_int(std::numeric_limits<int64_t>::max()), 4) == 3);
}

TEST_CASE("cat promotes and skips legacy empty tensors", "[ops][fast]") {
  Values v;
  Arg list = tensor_list({v.f32({2, 3}), v.tensor(DType::Float64, {4, 3}), v.f32({0})});
  TensorType out = infer1("cat", {{"tensors", list}});
  CHECK(out.sizes == Sizes{6, 3});
  CHECK(out.dtype == DType::Float64);
  CHECK(infer1("cat", {{"tensors", tensor_list({v.f32({2, 3}), v.f32({2, 1})})}, {"dim", Arg::of_int(-1)}}).sizes == Sizes{2, 4});
  CHECK_THROWS_AS(infer("cat", {{"tensors", tensor_list({v.f32({2, 3}), v.f32({2, 1})})}}), UserError);
}

TEST_CASE("convolution and pooling output sizes", "[ops][fast]") {
  Values v;
  TensorType conv = infer1("convolution", {{"input", v.f32({1, 3, 32, 32})}, {"weight", v.f32({16, 3, 3, 3})},
      {"bias", Arg::none()}, {"stride", Arg::of_ints({2, 2})}, {"padding", Arg::of_ints({1, 1})},
      {"dilation", Arg::of_ints({1, 1})}, {"transposed", Arg::of_bool(false)},
      {"output_padding", Arg::of_ints({0, 0})}, {"groups", Arg::of_int(1)}});
  CHECK(conv.sizes == Sizes{1, 16, 16, 16});
  // Transposed: (8 - 1) * 2 - 2 * 1 + (3 - 1) + 1 + 1 = 16; channels = weight[1] * groups.
  TensorType deconv = infer1("convolution", {{"input", v.f32({1, 16, 8, 8})}, {"weight", v.f32({16, 4, 3, 3})},
      {"bias", Arg::none()}, {"stride", Arg::of_ints({2, 2})}, {"padding", Arg::of_ints({1, 1})},
      {"dilation", Arg::of_ints({1, 1})}, {"transposed", Arg::of_bool(true)},
      {"output_padding", Arg::of_ints({1, 1})}, {"groups", Arg::of_int(2)}});
  CHECK(deconv.sizes == Sizes{1, 8, 16, 16});
  TensorType grouped = infer1("conv2d", {{"input", v.f32({2, 8, 10, 10})}, {"weight", v.f32({8, 1, 3, 3})},
                                         {"dilation", Arg::of_ints({2, 2})}, {"groups", Arg::of_int(8)}});
  CHECK(grouped.sizes == Sizes{2, 8, 6, 6});

  auto pool = [&](int64_t in, int64_t k, int64_t s, int64_t p, bool ceil) {
    auto outs = infer("max_pool2d_with_indices", {{"self", v.f32({1, 1, in, in})}, {"kernel_size", Arg::of_ints({k, k})},
        {"stride", Arg::of_ints({s, s})}, {"padding", Arg::of_ints({p, p})}, {"ceil_mode", Arg::of_bool(ceil)}});
    REQUIRE(outs.size() == 2);
    CHECK(outs[1].dtype == DType::Int64);
    return outs[0].sizes[2];
  };
  CHECK(pool(5, 2, 2, 0, false) == 2);
  CHECK(pool(5, 2, 2, 0, true) == 3);
  CHECK(pool(6, 3, 2, 1, true) == 4);
  CHECK(pool(5, 2, 2, 1, true) == 3);  // a 4th window would start in the right padding
  CHECK(infer1("avg_pool2d", {{"self", v.f32({1, 2, 7, 7})}, {"kernel_size", Arg::of_ints({3, 3})}}).sizes == Sizes{1, 2, 2, 2});
  CHECK(infer1("adaptive_avg_pool2d", {{"self", v.f32({1, 2, 7, 7})}, {"output_size", Arg::of_ints({1, 1})}}).sizes == Sizes{1, 2, 1, 1});
  Arg scales;
  scales.kind = Kind::FloatList;
  scales.floats = {2.0, 1.5};
  CHECK(infer1("upsample_nearest2d.vec", {{"input", v.f32({1, 1, 3, 5})}, {"output_size", Arg::none()},
                                          {"scale_factors", scales}}).sizes == Sizes{1, 1, 6, 7});
}

TEST_CASE("matrix products and normalization", "[ops][fast]") {
  Values v;
  CHECK(infer1("addmm", {{"self", v.f32({4})}, {"mat1", v.f32({2, 3})}, {"mat2", v.f32({3, 4})}}).sizes == Sizes{2, 4});
  CHECK(infer1("bmm", {{"self", v.f32({5, 2, 3})}, {"mat2", v.f32({5, 3, 4})}}).sizes == Sizes{5, 2, 4});
  CHECK_THROWS_AS(infer("mm", {{"self", v.f32({2, 3})}, {"mat2", v.f32({4, 3})}}), UserError);
  CHECK(infer1("linear", {{"input", v.f32({2, 7, 3})}, {"weight", v.f32({5, 3})}}).sizes == Sizes{2, 7, 5});

  auto ln = infer("native_layer_norm", {{"input", v.f32({2, 3, 4})}, {"normalized_shape", Arg::of_ints({4})},
                                        {"weight", Arg::none()}, {"bias", Arg::none()}, {"eps", Arg::of_float(1e-5)}});
  REQUIRE(ln.size() == 3);
  CHECK(ln[0].sizes == Sizes{2, 3, 4});
  CHECK(ln[1].sizes == Sizes{2, 3, 1});
  auto gn = infer("native_group_norm", {{"input", v.f32({2, 6, 5})}, {"weight", Arg::none()}, {"bias", Arg::none()},
      {"N", Arg::of_int(2)}, {"C", Arg::of_int(6)}, {"HxW", Arg::of_int(5)}, {"group", Arg::of_int(3)}, {"eps", Arg::of_float(1e-5)}});
  REQUIRE(gn.size() == 3);
  CHECK(gn[2].sizes == Sizes{2, 3});
  auto bn = infer("_native_batch_norm_legit_no_training", {{"input", v.f32({2, 3, 4})}, {"weight", Arg::none()},
      {"bias", Arg::none()}, {"running_mean", v.f32({3})}, {"running_var", v.f32({3})},
      {"momentum", Arg::of_float(0.1)}, {"eps", Arg::of_float(1e-5)}});
  REQUIRE(bn.size() == 3);
  CHECK(bn[1].sizes == Sizes{0});
}

TEST_CASE("advanced indexing and gathers", "[ops][fast]") {
  Values v;
  Arg x = v.f32({5, 6, 7});
  Arg none = Arg::none();
  auto index = [&](std::vector<Arg> indices) {
    Arg list;
    list.kind = Kind::OptTensorList;
    for (const Arg& i : indices) list.tensors.push_back(i.tensor);
    return infer1("index.Tensor", {{"self", x}, {"indices", list}}).sizes;
  };
  CHECK(index({none, v.tensor(DType::Int64, {2, 3})}) == Sizes{5, 2, 3, 7});
  CHECK(index({v.tensor(DType::Int64, {2, 1}), v.tensor(DType::Int64, {3})}) == Sizes{2, 3, 7});
  // Index tensors separated by a slice go first.
  CHECK(index({v.tensor(DType::Int64, {4}), none, v.tensor(DType::Int64, {4})}) == Sizes{4, 6});
  CHECK(infer1("index_select", {{"self", x}, {"dim", Arg::of_int(1)}, {"index", v.tensor(DType::Int64, {9})}}).sizes == Sizes{5, 9, 7});
  CHECK(infer1("gather", {{"self", x}, {"dim", Arg::of_int(0)}, {"index", v.tensor(DType::Int64, {1, 2, 3})}}).sizes == Sizes{1, 2, 3});
  TensorType emb = infer1("embedding", {{"weight", v.f32({10, 4})}, {"indices", v.tensor(DType::Int64, {2, 3})}});
  CHECK(emb.sizes == Sizes{2, 3, 4});
}

TEST_CASE("factories infer their dtype", "[ops][fast]") {
  CHECK(infer1("full", {{"size", Arg::of_ints({2, 3})}, {"fill_value", Arg::of_int(1)}}).dtype == DType::Int64);
  CHECK(infer1("full", {{"size", Arg::of_ints({2})}, {"fill_value", Arg::of_float(1.0)}}).dtype == DType::Float32);
  CHECK(infer1("full", {{"size", Arg::of_ints({2})}, {"fill_value", Arg::of_bool(true)}}).dtype == DType::Bool);
  CHECK(infer1("scalar_tensor", {{"s", Arg::of_int(3)}}).dtype == DType::Float32);
  TensorType ints = infer1("arange.start_step", {{"start", Arg::of_int(0)}, {"end", Arg::of_int(10)}, {"step", Arg::of_int(3)}});
  CHECK(ints.dtype == DType::Int64);
  CHECK(ints.sizes == Sizes{4});
  TensorType floats = infer1("arange.start_step", {{"start", Arg::of_int(1)}, {"end", Arg::of_float(2.5)}, {"step", Arg::of_float(0.5)}});
  CHECK(floats.dtype == DType::Float32);
  CHECK(floats.sizes == Sizes{3});
  Values v;
  CHECK(infer1("_to_copy", {{"self", v.f32({2})}, {"dtype", Arg::of_dtype(DType::Float16)}}).dtype == DType::Float16);
  CHECK(infer("_assert_scalar", {{"self", Arg::of_bool(true)}, {"assert_msg", Arg::of_string("x")}}).empty());
}

}  // namespace foundry::test
