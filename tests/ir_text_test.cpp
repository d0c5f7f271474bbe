// Program text: print -> parse -> print identity over every primitive, parsed
// programs compute what the traced ones do, malformed text gives a located
// ParseError, and verify rejects broken programs naming the equation.
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <sstream>

#include "drx/core/primitive.h"
#include "drx/core/trace.h"
#include "drx/ops/convolution.h"
#include "drx/ops/primitives.h"
#include "drx/ops/windows.h"
#include "drx/transforms/loops.h"
#include "tests/test_util.h"

namespace drx::testing {

namespace {

Type f32t(Shape s) { return Type(DType::f32, std::move(s)); }

// Each program exercises one family through the public ops.
struct Case {
  std::string name;
  std::function<std::vector<Value>(const std::vector<Value>&)> fn;
  std::vector<Type> in_types;
};

std::vector<Case> coverage_cases() {
  std::vector<Case> cases;
  cases.push_back(
      {"constants",
       [](const std::vector<Value>& a) -> std::vector<Value> {
         Value c32 = constant(f32_array({1.5f, -0.0f, 1e-45f, 3.4028235e38f}, {2, 2}));
         Value c64 = constant(f64_array({0.1, 1e300, -2.5e-310}, {3}));
         Value ci32 =
             constant(Array::from_vector<int32_t>({std::numeric_limits<int32_t>::min(), 7}, {2}));
         Value ci64 =
             constant(Array::from_vector<int64_t>({std::numeric_limits<int64_t>::max(), -1}, {2}));
         Value cb = constant(Array::from_vector<bool>({true, false, true}, {3}));
         Value empty = constant(Array(DType::f32, {0, 3}));
         return {a[0] + c32,
                 c64,
                 ci32,
                 ci64,
                 cb,
                 empty,
                 iota({2, 3}, 1, DType::i64),
                 arange(4, DType::f32),
                 fill({2}, 0.25, DType::f64),
                 zeros_like(a[0]),
                 ones_like(a[0])};
       },
       {f32t({2, 2})}});
  cases.push_back({"elementwise",
                   [](const std::vector<Value>& a) -> std::vector<Value> {
                     Value x = a[0], y = a[1];
                     Value p = abs(x) + 1.0;
                     std::vector<Value> out = {neg(x),
                                               exp(x),
                                               log(p),
                                               log1p(abs(x)),
                                               tanh(x),
                                               logistic(x),
                                               sqrt(p),
                                               rsqrt(p),
                                               sign(x),
                                               sin(x),
                                               cos(x),
                                               erf(x),
                                               erf_inv(tanh(x) * 0.5),
                                               gelu(x),
                                               emit1(prims::gelu_grad(), {x}),
                                               square(x),
                                               relu(x),
                                               x + y,
                                               x - y,
                                               x * y,
                                               x / p,
                                               pow(p, y),
                                               pow(p, 2.0),
                                               maximum(x, y),
                                               minimum(x, y),
                                               maximum(x, 0.5),
                                               minimum(x, 0.5),
                                               -x,
                                               2.0 - x,
                                               3.0 / p,
                                               stop_gradient(x),
                                               astype(x, DType::i32)};
                     Value c = less(x, y);
                     out.push_back(where(c, x, y));
                     for (Value b : {less_equal(x, y), greater(x, y), greater_equal(x, y),
                                     equal(x, y), not_equal(x, y)})
                       out.push_back(astype(b, DType::f32));
                     return out;
                   },
                   {f32t({2, 3}), f32t({2, 3})}});
  cases.push_back({"reductions",
                   [](const std::vector<Value>& a) -> std::vector<Value> {
                     Value x = a[0];
                     return {sum(x),
                             sum(x, {1}),
                             sum(x, {0}, true),
                             mean(x),
                             mean(x, {-1}),
                             max(x),
                             max(x, {0}),
                             min(x),
                             min(x, {1}, true),
                             logsumexp(x, {1}),
                             softmax(x, 1),
                             log_softmax(x, 0),
                             detail::layer_norm_normalize(x, 1e-5)[0],
                             detail::layer_norm_normalize(x, 0.0)[1]};
                   },
                   {f32t({3, 4})}});
  cases.push_back({"linalg",
                   [](const std::vector<Value>& a) -> std::vector<Value> {
                     DotDims d{{1}, {1}, {0}, {0}};
                     return {matmul(a[0], a[1]), dot_general(a[2], a[2], d)};
                   },
                   {f32t({2, 3}), f32t({3, 4}), f32t({2, 3, 5})}});
  cases.push_back({"shape",
                   [](const std::vector<Value>& a) -> std::vector<Value> {
                     Value x = a[0];
                     return {reshape(x, {3, 2}),         transpose(x, {1, 0}),
                             broadcast_to(a[1], {2, 3}), broadcast_in_dim(a[1], {3, 2}, {0}),
                             expand_dims(x, 1),          squeeze(expand_dims(x, 0), 0),
                             concatenate({x, x}, 1),     slice(x, {0, 1}, {2, 3})};
                   },
                   {f32t({2, 3}), f32t({3})}});
  cases.push_back({"indexing",
                   [](const std::vector<Value>& a) -> std::vector<Value> {
                     Value idx = constant(Array::from_vector<int32_t>({2, 0, 2}, {3}));
                     return {take(a[0], idx, 1), scatter_add(a[0], idx, a[1], 1),
                             scatter(a[0], idx, a[1], 1), one_hot(idx, 4, DType::f64)};
                   },
                   {f32t({2, 3}), f32t({2, 3})}});
  cases.push_back({"sorting",
                   [](const std::vector<Value>& a) -> std::vector<Value> {
                     Value x = a[0];
                     TopK top = top_k(x, 2);
                     return {sort(x, 0),         argsort(x, 1, true),
                             top.values,         top.indices,
                             argmax(x, 1),       argmin(x, 0, true),
                             cumsum(x, 1, true), cumsum(astype(x, DType::i32), 0)};
                   },
                   {f32t({3, 4})}});
  cases.push_back({"grad",
                   [](const std::vector<Value>& a) -> std::vector<Value> {
                     auto loss = [](Value w, Value x) -> Value {
                       return sum(log_softmax(matmul(x, w), -1) * slice(tanh(w), {0, 0}, {1, 4}));
                     };
                     return {grad(loss)(a[0], a[1])};
                   },
                   {f32t({3, 4}), f32t({2, 3})}});
  cases.push_back({"mapreduce",
                   [](const std::vector<Value>& a) -> std::vector<Value> {
                     auto round = program(
                         {{"clients", 3}},
                         [](Value w, Value xs) -> std::vector<Value> {
                           Value local = map_fn([](Value wi, Value xi) { return tanh(wi * xi); },
                                                broadcast(w), xs);
                           return {reduce_sum(local), reduce_mean(local), reduce_max(local),
                                   reduce_min(local), place(local, "")};
                         },
                         {"", "clients"});
                     return round(a[0], a[1]);
                   },
                   {f32t({2}), f32t({3, 2})}});
  cases.push_back({"nested_placements",
                   [](const std::vector<Value>& a) -> std::vector<Value> {
                     // Clients within groups, and the gradient through both levels.
                     auto round =
                         program({{"groups", 2}, {"clients", 3}},
                                 [](Value w, Value xs) -> std::vector<Value> {
                                   auto loss = [&](Value v) {
                                     Value per_group = map_fn(
                                         [](Value wg, Value xg) {
                                           Value local = map_fn(
                                               [](Value wi, Value xi) { return tanh(wi * xi); },
                                               broadcast(wg, "clients"), xg);
                                           return reduce_mean(local);
                                         },
                                         broadcast(v, "groups"), xs);
                                     return sum(reduce_sum(per_group));
                                   };
                                   return {loss(w), grad(loss)(w), xs * 2.0};
                                 },
                                 {"", "groups.clients"});
                     return round(a[0], a[1]);
                   },
                   {f32t({2}), f32t({2, 3, 2})}});
  cases.push_back({"cond",
                   [](const std::vector<Value>& a) -> std::vector<Value> {
                     Value y = a[1] * 2.0;  // used by the true branch from outside
                     Tree r = cond(
                         greater(sum(a[0]), scalar_like(a[0], 0.0)),
                         [&](const Tree& t) { return Tree(exp(t.value()) + y); },
                         [](const Tree& t) { return Tree(-t.value()); }, Tree(a[0]));
                     return {r.value()};
                   },
                   {f32t({3}), f32t({3})}});
  cases.push_back(
      {"loops",
       [](const std::vector<Value>& a) -> std::vector<Value> {
         Value w = a[1];  // a const of the scan body
         auto [c, ys] = scan(
             [&](const Tree& h, const Tree& x) -> std::pair<Tree, Tree> {
               Value n = tanh(h.value() * w + x.value());
               return {Tree(n), Tree(n * 2.0)};
             },
             Tree(a[1]), Tree(a[0]), ScanOptions{.reverse = true});
         Tree f = fori_loop(
             0, 3,
             [](const Value& i, const Tree& h) { return Tree(h.value() + astype(i, DType::f32)); },
             c);
         Tree l = while_loop(
             [](const Tree& h) { return less(sum(h.value()), scalar_like(sum(h.value()), 50.0)); },
             [](const Tree& h) { return Tree(h.value() * 2.0 + 1.0); }, f);
         return {ys.value(), l.value()};
       },
       {f32t({4, 3}), f32t({3})}});
  cases.push_back({"bitwise_and_rounding",
                   [](const std::vector<Value>& a) -> std::vector<Value> {
                     Value u = a[0] + scalar_like(a[0], 12345.0), s = scalar_like(a[0], 3.0);
                     Value b = astype(a[0], DType::u8), x = a[1] * 3.0;
                     return {bitwise_and(u, s),
                             bitwise_or(u, s),
                             bitwise_xor(u, s),
                             bitwise_not(b),
                             shift_left(u, s),
                             shift_right_logical(u, s),
                             shift_right_arithmetic(astype(u, DType::i32), astype(s, DType::i32)),
                             floor(x),
                             ceil(x),
                             round(x),
                             remainder(x, scalar_like(x, 0.75))};
                   },
                   {Type(DType::u32, {3}), f32t({3})}});
  cases.push_back({"random_bits",
                   [](const std::vector<Value>& a) -> std::vector<Value> {
                     auto [y0, y1] = threefry2x32(a[0], a[0] + scalar_like(a[0], 1.0), a[0],
                                                  a[0] + scalar_like(a[0], 7.0));
                     return {y0, bitcast_convert(bitcast_convert(y1, DType::f32), DType::i32)};
                   },
                   {Type(DType::u32, {3})}});
  cases.push_back({"stablehlo_ops",
                   [](const std::vector<Value>& a) -> std::vector<Value> {
                     Value x = a[0], i = a[1];
                     return {cbrt(x),
                             expm1(x),
                             round_away(x),
                             astype(is_finite(x / x), DType::f32),
                             atan2(x, x + 1.0),
                             pad(x, constant(Array::scalar(1.5f)), {1, -1}, {0, 2}, {1, 0}),
                             reverse(x, {0, 1}),
                             dynamic_slice(x, {i, i}, {1, 2}),
                             dynamic_update_slice(x, slice(x, {0, 0}, {1, 2}), {i, i})};
                   },
                   {f32t({2, 3}), Type(DType::i32, {})}});
  cases.push_back({"windows",
                   [](const std::vector<Value>& a) -> std::vector<Value> {
                     const WindowConfig w{{2, 2}, {1, 2}, {{1, 0}, {0, 1}}, {2, 1}, {1, 1}};
                     return {reduce_window(a[0], "max", w),
                             select_and_scatter_add(a[0], a[1], {{2, 2}, {1, 1}, {}, {}, {}})};
                   },
                   {f32t({3, 4}), f32t({2, 3})}});
  cases.push_back({"convolution",
                   [](const std::vector<Value>& a) -> std::vector<Value> {
                     ConvParams c;
                     c.window_strides = {2, 1};
                     c.padding = {{1, -1}, {0, 2}};
                     c.lhs_dilation = {1, 2};
                     c.rhs_dilation = {2, 1};
                     c.window_reversal = {0, 1};
                     c.dims = {0, 3, {1, 2}, 3, 2, {0, 1}, 0, 3, {1, 2}};
                     c.feature_group_count = 2;
                     return {conv_general_dilated(a[0], a[1], c)};
                   },
                   {f32t({2, 5, 4, 4}), f32t({2, 3, 2, 4})}});
  return cases;
}

Array input_for(const Type& t, uint64_t seed) { return random_array(t.shape, t.dtype, seed); }

std::vector<Array> inputs_for(const Program& p, uint64_t seed) {
  std::vector<Array> args;
  for (const Type& t : p.input_types()) args.push_back(input_for(t, seed++));
  return args;
}

// Checks that parsing `text` throws a ParseError whose message contains every
// one of `parts`.
::testing::AssertionResult ParseFails(const std::string& text,
                                      const std::vector<std::string>& parts) {
  try {
    Program p = parse_program(text);
    return ::testing::AssertionFailure() << "parsed without error:\n" << text;
  } catch (const ParseError& e) {
    std::string msg = e.what();
    for (const std::string& part : parts)
      if (msg.find(part) == std::string::npos)
        return ::testing::AssertionFailure()
               << "message \"" << msg << "\" lacks \"" << part << "\"";
    return ::testing::AssertionSuccess();
  }
}

::testing::AssertionResult VerifyFails(const Program& p, const std::vector<std::string>& parts) {
  try {
    verify(p);
    return ::testing::AssertionFailure() << "verify accepted:\n" << to_string(p);
  } catch (const TypeError& e) {
    std::string msg = e.what();
    for (const std::string& part : parts)
      if (msg.find(part) == std::string::npos)
        return ::testing::AssertionFailure()
               << "message \"" << msg << "\" lacks \"" << part << "\"";
    return ::testing::AssertionSuccess();
  }
}

}  // namespace

// Shared with the fuzz test: printed programs covering every primitive.
std::vector<Program> ir_text_coverage_programs() {
  std::vector<Program> programs;
  for (const Case& c : coverage_cases())
    programs.push_back(trace_function(c.fn, c.in_types, c.name).program);
  return programs;
}

TEST(IrText, CoverageProgramsUseEveryRegisteredPrimitive) {
  std::set<std::string> used;
  for (const Program& p : ir_text_coverage_programs()) collect_primitives(p, used);
  // A new primitive must be added to coverage_cases() so its parameters are
  // known to survive printing and parsing.
  for (const std::string& name : primitive_names())
    EXPECT_TRUE(used.count(name)) << "primitive '" << name
                                  << "' is not used by any round-trip program";
}

TEST(IrText, PrintParsePrintIsIdentity) {
  for (const Program& p : ir_text_coverage_programs()) {
    SCOPED_TRACE(p.name);
    EXPECT_NO_THROW(verify(p));
    std::string text = to_string(p);
    Program q = parse_program(text);
    EXPECT_EQ(to_string(q), text);
    EXPECT_NO_THROW(verify(q));
    EXPECT_EQ(q.name, p.name);
    EXPECT_EQ(q.input_types(), p.input_types());
    EXPECT_EQ(q.output_types(), p.output_types());
    ASSERT_EQ(q.eqns.size(), p.eqns.size());
    for (size_t i = 0; i < p.eqns.size(); ++i) {
      EXPECT_EQ(q.eqns[i].prim, p.eqns[i].prim);
      EXPECT_TRUE(q.eqns[i].params == p.eqns[i].params) << "equation " << i;
    }
    std::ostringstream os;
    os << p;
    EXPECT_EQ(os.str(), text);
  }
}

TEST(IrText, ParsedProgramComputesTheTracedResult) {
  for (const Program& p : ir_text_coverage_programs()) {
    SCOPED_TRACE(p.name);
    Program q = parse_program(to_string(p));
    std::vector<Array> args = inputs_for(p, 17);
    std::vector<Array> want = run(p, args), got = run(q, args);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_TRUE(got[i].bitwise_equal(want[i]))
          << "output " << i << ": " << got[i].str() << " vs " << want[i].str();
  }
}

TEST(IrText, PrintsTheDocumentedFormat) {
  auto f = [](Value x, Value y) { return std::vector<Value>{x + y, sum(x, {0})}; };
  Program p = trace(f, {f32t({2, 3}), f32t({2, 3})}, "add_sum");
  std::string text = to_string(p);
  EXPECT_EQ(
      text.rfind("program @add_sum (%0: f32[2,3], %1: f32[2,3]) -> (f32[2,3], f32[3]) {\n", 0), 0u)
      << text;
  EXPECT_NE(text.find("  %2 = add %0, %1 : f32[2,3]\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  return %2, %"), std::string::npos) << text;
  EXPECT_EQ(text.substr(text.size() - 2), "}\n");
}

TEST(IrText, HandWrittenProgramRunsWithHandComputedResult) {
  // y = sum over axis 1 of (x * iota) + 0.5: rows {1,2,3}·{0,1,2} = 8, {4,5,6}·{0,1,2} = 17.
  const std::string text = R"(
// comments and free layout are allowed
program @main (%0: f32[2,3]) -> (f32[2]) {
  %1 = iota[dimension=1, dtype=f32, shape=[2,3]] : f32[2,3]
  %2 = mul %0, %1 : f32[2,3]
  %3 = sum[axes=[1]] %2 : f32[2]
  %4 = constant[value=f32[]{0.5}] : f32[]
  %5 = broadcast_in_dim[dims=[], shape=[2]] %4 : f32[2]
  %6 = add %3, %5 : f32[2]
  return %6
}
)";
  Program p;
  try {
    p = parse_program(text);
  } catch (const ParseError& e) {
    // Parameter names are owned by the primitives; show them if they changed.
    FAIL() << e.what();
  }
  auto out = run(p, {f32_array({1, 2, 3, 4, 5, 6}, {2, 3})});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(ArrayNear(out[0], {8.5, 17.5}));
}

TEST(IrText, RenumbersVariablesDensely) {
  // Sparse, out-of-order ids parse as written and print densely.
  const std::string text =
      "program @m (%7: f32[2]) -> (f32[2]) {\n"
      "  %3 = neg %7 : f32[2]\n"
      "  %10 = add %3, %7 : f32[2]\n"
      "  return %10\n"
      "}\n";
  Program p = parse_program(text);
  EXPECT_EQ(p.var_types.size(), 11u);
  EXPECT_EQ(p.inputs, std::vector<int>{7});
  EXPECT_EQ(p.outputs, std::vector<int>{10});
  EXPECT_EQ(to_string(p),
            "program @m (%0: f32[2]) -> (f32[2]) {\n"
            "  %1 = neg %0 : f32[2]\n"
            "  %2 = add %1, %0 : f32[2]\n"
            "  return %2\n"
            "}\n");
  EXPECT_TRUE(ArrayNear(run(p, {f32_array({1, -2}, {2})})[0], {0, 0}));
}

TEST(IrText, ZeroInputsAndOutputsAndPlacements) {
  Program p;
  p.name = "weird name";  // not an identifier: printed quoted
  p.placements = {{"clients", 8}, {"groups", 2}};
  std::string text = to_string(p);
  EXPECT_EQ(text, "program @\"weird name\" [clients=8, groups=2] () -> () {\n  return\n}\n");
  Program q = parse_program(text);
  EXPECT_EQ(q.name, "weird name");
  EXPECT_EQ(q.placements, p.placements);
  EXPECT_EQ(to_string(q), text);
}

TEST(IrText, PlacedTypesRoundTrip) {
  Program p;
  int x = p.add_var(Type(DType::f32, {8, 3}, "clients"));
  int y = p.add_var(Type(DType::f32, {8, 3}, "odd place"));
  p.inputs = {x, y};
  p.outputs = {y, x};
  p.placements = {{"clients", 8}};
  std::string text = to_string(p);
  EXPECT_NE(text.find("(%0: f32[8,3]@clients, %1: f32[8,3]@\"odd place\")"), std::string::npos)
      << text;
  Program q = parse_program(text);
  EXPECT_EQ(q.input_types(), p.input_types());
  EXPECT_EQ(q.output_types(), (std::vector<Type>{p.type_of(y), p.type_of(x)}));
  EXPECT_EQ(to_string(q), text);
}

// constant's infer reads only `value`, so extra parameters carry every kind
// of attribute through the printer and the parser.
TEST(IrText, EveryAttributeKindRoundTripsExactly) {
  const double subnormal = std::numeric_limits<double>::denorm_min();
  Params params{
      {"value",
       f32_array({std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                  -std::numeric_limits<float>::infinity(), 0.1f, -0.0f,
                  std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::max(),
                  16777217.0f},
                 {2, 4})},
      {"a_int", int64_t{-9223372036854775807 - 1}},
      {"b_one", 1.0},
      {"c_third", 1.0 / 3.0},
      {"d_tiny", subnormal},
      {"e_big", 1e300},
      {"f_neg_zero", -0.0},
      {"g_nan", std::numeric_limits<double>::quiet_NaN()},
      {"h_inf", -std::numeric_limits<double>::infinity()},
      {"i_str", std::string("quote \" backslash \\ newline \n tab \t byte \x01 high \xff")},
      {"j_ints", std::vector<int64_t>{-1, 0, 9223372036854775807}},
      {"k_empty", std::vector<int64_t>{}},
      {"l_dtype", DType::bool_},
      {"m_f64", f64_array({0.1, -1e-300, 2.0 / 3.0}, {3})},
      {"n_i64",
       Array::from_vector<int64_t>(
           {std::numeric_limits<int64_t>::min(), 0, std::numeric_limits<int64_t>::max()}, {3})},
      {"o_bool", Array::from_vector<bool>({true, false}, {2, 1})},
      {"p_scalar", Array::scalar<int32_t>(-5)},
      {"q_empty", Array(DType::f64, {2, 0})},
      {"weird key", int64_t{3}},
  };
  Program p;
  int out = p.add_var(f32t({2, 4}));
  p.eqns.push_back(Eqn{&primitive("constant"), params, {}, {out}});
  p.outputs = {out};
  ASSERT_NO_THROW(verify(p));
  std::string text = to_string(p);
  EXPECT_NE(text.find("b_one=1.0,"), std::string::npos) << text;
  EXPECT_NE(text.find("f_neg_zero=-0.0,"), std::string::npos) << text;
  EXPECT_NE(text.find("g_nan=nan,"), std::string::npos) << text;
  EXPECT_NE(text.find("h_inf=-inf,"), std::string::npos) << text;
  EXPECT_NE(text.find("j_ints=[-1,0,9223372036854775807]"), std::string::npos) << text;
  EXPECT_NE(text.find("l_dtype=bool,"), std::string::npos) << text;
  EXPECT_NE(text.find("o_bool=bool[2,1]{true, false}"), std::string::npos) << text;
  EXPECT_NE(text.find("value=f32[2,4]{nan, inf, -inf, 0.100000001, -0, "), std::string::npos)
      << text;
  EXPECT_NE(text.find("\"weird key\"=3"), std::string::npos) << text;

  Program q = parse_program(text);
  EXPECT_EQ(to_string(q), text);
  const Params& got = q.eqns.at(0).params;
  // attr_equal compares doubles and arrays bitwise; NaN payloads aside, all
  // values must come back exactly.
  for (const auto& [key, value] : params.items()) {
    if (key == "g_nan") {
      EXPECT_TRUE(std::isnan(got.get_double(key, "test")));
      continue;
    }
    if (key == "value") continue;
    EXPECT_TRUE(got.has(key) && attr_equal(got.at(key, "test"), value)) << key;
  }
  std::vector<float> v = got.get_array("value", "test").to_vector<float>();
  std::vector<float> w = params.get_array("value", "test").to_vector<float>();
  EXPECT_TRUE(std::isnan(v[0]));
  EXPECT_EQ(std::memcmp(v.data() + 1, w.data() + 1, 7 * sizeof(float)), 0);
  EXPECT_TRUE(std::holds_alternative<double>(got.at("b_one", "test")));
  EXPECT_TRUE(std::holds_alternative<int64_t>(got.at("weird key", "test")));
}

TEST(IrText, SubProgramsPrintedOnceUnderUniqueNames) {
  auto body = std::make_shared<Program>(trace([](Value x) { return exp(x); }, {f32t({2})}, "body"));
  auto other = std::make_shared<Program>(
      trace([](Value x) { return neg(x); }, {f32t({2})}, "body"));  // same name, different program
  auto outer = std::make_shared<Program>(trace([](Value x) { return x; }, {f32t({2})}, "outer"));
  // outer refers to body again: it must still be printed once.
  outer->eqns.push_back(
      Eqn{&primitive("constant"),
          Params{{"value", Array::scalar<float>(1)}, {"sub", std::shared_ptr<const Program>(body)}},
          {},
          {outer->add_var(f32t({}))}});
  Program main = trace([](Value x) { return x; }, {f32t({2})}, "main");
  main.eqns.push_back(Eqn{&primitive("constant"),
                          Params{{"value", Array::scalar<float>(2)},
                                 {"a", std::shared_ptr<const Program>(body)},
                                 {"b", std::shared_ptr<const Program>(other)},
                                 {"c", std::shared_ptr<const Program>(outer)},
                                 {"d", std::shared_ptr<const Program>(body)}},
                          {},
                          {main.add_var(f32t({}))}});
  ASSERT_NO_THROW(verify(main));
  std::string text = to_string(main);
  EXPECT_NE(text.find("[a=@body, b=@body_1, c=@outer, d=@body, value="), std::string::npos) << text;
  auto count = [&](const std::string& s) {
    size_t n = 0;
    for (size_t at = text.find(s); at != std::string::npos; at = text.find(s, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("program @"), 4u) << text;
  EXPECT_EQ(count("program @body "), 1u) << text;
  EXPECT_EQ(count("program @body_1 "), 1u) << text;
  EXPECT_EQ(text.rfind("program @main ", 0), 0u) << text;

  Program q = parse_program(text);
  EXPECT_EQ(to_string(q), text);
  const Params& params = q.eqns.back().params;
  // One program object per definition: @body is shared by a, d and outer's reference.
  EXPECT_EQ(&params.get_program("a", "t"), &params.get_program("d", "t"));
  EXPECT_NE(&params.get_program("a", "t"), &params.get_program("b", "t"));
  EXPECT_EQ(&params.get_program("c", "t").eqns.back().params.get_program("sub", "t"),
            &params.get_program("a", "t"));
  EXPECT_EQ(params.get_program("b", "t").eqns.at(0).prim->name(), "neg");
  EXPECT_NO_THROW(verify(q));
}

TEST(IrText, SubProgramsMayBeDefinedInAnyOrder) {
  const std::string text =
      "program @main () -> (f32[]) {\n"
      "  %0 = constant[body=@late, value=f32[]{3}] : f32[]\n"
      "  return %0\n"
      "}\n"
      "program @early () -> () {\n  return\n}\n"
      "program @late () -> () {\n"
      "  %0 = constant[other=@early, value=i32[]{1}] : i32[]\n"
      "  return\n"
      "}\n";
  Program p = parse_program(text);
  EXPECT_EQ(p.eqns[0].params.get_program("body", "t").name, "late");
  EXPECT_TRUE(ArrayNear(run(p, {})[0], {3}));
}

// ---- malformed text ---------------------------------------------------------

const char* const kGood =
    "program @main (%0: f32[2]) -> (f32[2]) {\n"
    "  %1 = neg %0 : f32[2]\n"
    "  return %1\n"
    "}\n";

TEST(IrText, GoodBaselineParses) { EXPECT_NO_THROW(parse_program(kGood)); }

TEST(IrText, TruncatedTextIsAParseError) {
  std::string good = kGood;
  for (size_t n = 0; n + 1 < good.size(); ++n)
    EXPECT_THROW(parse_program(good.substr(0, n)), ParseError) << good.substr(0, n);
  EXPECT_TRUE(ParseFails(good.substr(0, good.find(" f32[2]\n  return")),
                         {"line 2:16", "expected a type such as f32[2,3]", "end of input"}));
  EXPECT_TRUE(ParseFails("", {"line 1:1", "expected 'program'", "end of input"}));
}

TEST(IrText, BadTypesAreParseErrors) {
  EXPECT_TRUE(ParseFails("program @m (%0: f33[2]) -> () {\n  return\n}",
                         {"line 1:17", "unknown dtype 'f33'", "f32, f64"}));
  EXPECT_TRUE(ParseFails("program @m (%0: f32[2) -> () {\n  return\n}",
                         {"line 1:22", "expected ']'", "found ')'"}));
  EXPECT_TRUE(ParseFails("program @m (%0: f32[-2]) -> () {\n  return\n}", {"negative"}));
  EXPECT_TRUE(ParseFails("program @m (%0: f32) -> () {\n  return\n}", {"expected '['"}));
  EXPECT_TRUE(
      ParseFails("program @m (%0: f32[1.5]) -> () {\n  return\n}", {"a dimension", "found '1.5'"}));
  // The placement is the leading axis, so a placed scalar is malformed.
  EXPECT_TRUE(ParseFails("program @m [c=3] (%0: f32[]@c) -> () {\n  return\n}",
                         {"line 1:28", "f32[]@c is placed but has no leading"}));
}

TEST(IrText, UnknownOperationIsAParseError) {
  EXPECT_TRUE(
      ParseFails("program @m (%0: f32[2]) -> (f32[2]) {\n  %1 = frobnicate %0 : f32[2]\n"
                 "  return %1\n}",
                 {"line 2:8", "unknown operation 'frobnicate'"}));
}

TEST(IrText, UndefinedAndRedefinedVariablesAreParseErrors) {
  EXPECT_TRUE(
      ParseFails("program @m (%0: f32[2]) -> (f32[2]) {\n  %1 = neg %5 : f32[2]\n"
                 "  return %1\n}",
                 {"line 2:12", "%5 is not defined"}));
  // Use before definition, even of a variable defined later.
  EXPECT_TRUE(
      ParseFails("program @m (%0: f32[2]) -> (f32[2]) {\n  %1 = neg %2 : f32[2]\n"
                 "  %2 = neg %0 : f32[2]\n  return %1\n}",
                 {"line 2:12", "%2 is not defined"}));
  EXPECT_TRUE(
      ParseFails("program @m (%0: f32[2]) -> (f32[2]) {\n  %1 = neg %1 : f32[2]\n"
                 "  return %1\n}",
                 {"%1 is not defined"}));
  EXPECT_TRUE(
      ParseFails("program @m (%0: f32[2]) -> (f32[2]) {\n  %0 = neg %0 : f32[2]\n"
                 "  return %0\n}",
                 {"line 2:3", "%0 is already defined at line 1:13"}));
  EXPECT_TRUE(ParseFails("program @m (%0: f32[2], %0: f32[2]) -> () {\n  return\n}",
                         {"line 1:25", "already defined"}));
  EXPECT_TRUE(ParseFails("program @m (%0: f32[2]) -> (f32[2]) {\n  return %3\n}",
                         {"line 2:10", "%3 is not defined"}));
}

TEST(IrText, WrongArityNamesTheLineAndEquation) {
  EXPECT_TRUE(
      ParseFails("program @m (%0: f32[2]) -> (f32[2]) {\n  %1 = add %0 : f32[2]\n"
                 "  return %1\n}",
                 {"line 2:3", "`%1 = add %0 : f32[2]`", "add"}));
  EXPECT_TRUE(
      ParseFails("program @m (%0: f32[2]) -> (f32[2]) {\n  %1 = neg %0, %0 : f32[2]\n"
                 "  return %1\n}",
                 {"line 2:3", "`%1 = neg %0, %0 : f32[2]`"}));
  // Missing parameter: the primitive's own TypeError is wrapped.
  EXPECT_TRUE(
      ParseFails("program @m () -> (i32[2]) {\n  %0 = iota[dtype=i32] : i32[2]\n"
                 "  return %0\n}",
                 {"line 2:3", "iota", "shape"}));
}

TEST(IrText, WrongAnnotatedTypeIsAParseError) {
  EXPECT_TRUE(
      ParseFails("program @m (%0: f32[2]) -> (f32[2]) {\n  %1 = neg %0 : f32[3]\n"
                 "  return %1\n}",
                 {"line 2:17", "annotated f32[3]", "gives f32[2]", "neg"}));
  EXPECT_TRUE(
      ParseFails("program @m (%0: f32[2]) -> (f32[2]) {\n  %1, %2 = neg %0 : f32[2], "
                 "f32[2]\n  return %1\n}",
                 {"line 2:3", "neg produces 1 output"}));
  EXPECT_TRUE(
      ParseFails("program @m (%0: f32[2]) -> (f32[2]) {\n  %1, %2 = neg %0 : f32[2]\n"
                 "  return %1\n}",
                 {"names 2 output(s) but annotates 1"}));
  EXPECT_TRUE(ParseFails("program @m (%0: f32[2]) -> (f32[3]) {\n  return %0\n}",
                         {"line 2:10", "f32[2]", "declares output 0 as f32[3]"}));
  EXPECT_TRUE(ParseFails("program @m (%0: f32[2]) -> (f32[2], f32[2]) {\n  return %0\n}",
                         {"line 2:3", "return gives 1", "2 output"}));
}

TEST(IrText, MissingReturnAndTrailingGarbageAreParseErrors) {
  EXPECT_TRUE(ParseFails("program @m (%0: f32[2]) -> (f32[2]) {\n  %1 = neg %0 : f32[2]\n}",
                         {"line 3:1", "expected an equation or 'return'", "found '}'"}));
  EXPECT_TRUE(ParseFails(std::string(kGood) + "garbage",
                         {"line 5:1", "'program' or the end", "found 'garbage'"}));
  EXPECT_TRUE(ParseFails(std::string(kGood) + "}", {"line 5:1"}));
  EXPECT_TRUE(ParseFails(std::string(kGood) + "program @main () -> () {\n  return\n}",
                         {"line 5:9", "@main is defined twice"}));
  EXPECT_TRUE(
      ParseFails("program @m () -> () {\n  return\n} $", {"line 3:3", "unexpected character"}));
}

TEST(IrText, HugeNumbersAreParseErrors) {
  EXPECT_TRUE(ParseFails("program @m (%0: f32[99999999999999999999]) -> () {\n  return\n}",
                         {"line 1:21", "out of range"}));
  EXPECT_TRUE(ParseFails("program @m (%0: f32[4294967296,4294967296]) -> () {\n  return\n}",
                         {"too many elements"}));
  EXPECT_TRUE(ParseFails("program @m (%99999999999: f32[2]) -> () {\n  return\n}",
                         {"line 1:13", "too large"}));
  EXPECT_TRUE(ParseFails("program @m (%100000: f32[2]) -> () {\n  return\n}", {"too large"}));
  EXPECT_TRUE(
      ParseFails("program @m () -> (f32[]) {\n  %0 = constant[value=f32[]{1e39}] : f32[]\n"
                 "  return %0\n}",
                 {"line 2:29", "out of range for f32"}));
  EXPECT_TRUE(
      ParseFails("program @m () -> (f32[]) {\n  %0 = constant[value=f32[]{1}, x=1e999] : "
                 "f32[]\n  return %0\n}",
                 {"out of range for f64"}));
  EXPECT_TRUE(
      ParseFails("program @m () -> (i32[]) {\n  %0 = constant[value=i32[]{2147483648}] : "
                 "i32[]\n  return %0\n}",
                 {"out of range for i32"}));
  EXPECT_TRUE(ParseFails("program @m [c=-1] () -> () {\n  return\n}", {"negative size"}));
}

TEST(IrText, BadLiteralsAndReferencesAreParseErrors) {
  auto with_attr = [](const std::string& attr) {
    return "program @m () -> (f32[]) {\n  %0 = constant[value=f32[]{1}, " + attr +
           "] : f32[]\n  return %0\n}";
  };
  EXPECT_TRUE(ParseFails(with_attr("x=\"open"), {"line 2:35", "unterminated string"}));
  EXPECT_TRUE(ParseFails(with_attr("x=\"\\q\""), {"unknown escape"}));
  EXPECT_TRUE(ParseFails(with_attr("x=f32[2]{1}"), {"needs 2 elements, 1 given"}));
  EXPECT_TRUE(ParseFails(with_attr("x=i32[1]{1.5}"), {"an integer in the i32 array"}));
  EXPECT_TRUE(ParseFails(with_attr("x=bool[1]{2}"), {"true or false"}));
  EXPECT_TRUE(ParseFails(with_attr("x=oops"), {"unknown dtype 'oops'"}));
  EXPECT_TRUE(ParseFails(with_attr("x=1, x=2"), {"parameter x is given twice"}));
  EXPECT_TRUE(ParseFails(with_attr("x=[1,"), {"an integer in the list x"}));
  EXPECT_TRUE(ParseFails(with_attr("x=@nowhere"), {"line 2:35", "unknown program @nowhere"}));
  EXPECT_TRUE(ParseFails(with_attr("x=-foo"), {"nan or inf after '-'"}));
  EXPECT_TRUE(ParseFails(with_attr("x=1."), {"digits after the decimal point"}));
  EXPECT_TRUE(ParseFails(with_attr("x=%"), {"variable number after '%'"}));
  EXPECT_TRUE(ParseFails(with_attr("x=:"), {"a value for parameter x"}));
}

TEST(IrText, SubProgramCyclesAreParseErrors) {
  EXPECT_TRUE(
      ParseFails("program @a () -> (f32[]) {\n  %0 = constant[body=@b, value=f32[]{1}] : "
                 "f32[]\n  return %0\n}\n"
                 "program @b () -> (f32[]) {\n  %0 = constant[body=@a, value=f32[]{1}] : "
                 "f32[]\n  return %0\n}\n",
                 {"line 6:", "cycle", "@a -> @b -> @a"}));
  EXPECT_TRUE(
      ParseFails("program @a () -> (f32[]) {\n  %0 = constant[body=@a, value=f32[]{1}] : "
                 "f32[]\n  return %0\n}\n",
                 {"line 2:22", "cycle: @a -> @a"}));
}

// ---- verify -------------------------------------------------------------------

namespace {
Program neg_add_program() {
  return trace([](Value x) { return neg(x) + x; }, {f32t({2})}, "f");
}
}  // namespace

TEST(Verify, AcceptsTracedPrograms) {
  for (const Program& p : ir_text_coverage_programs()) EXPECT_NO_THROW(verify(p)) << p.name;
}

TEST(Verify, RejectsAWrongRecordedType) {
  Program p = neg_add_program();
  ASSERT_NO_THROW(verify(p));
  int v = p.eqns.at(0).outs.at(0);
  p.var_types[static_cast<size_t>(v)] = f32t({3});
  EXPECT_TRUE(
      VerifyFails(p, {"verify @f", "equation 0", "neg", "recorded as f32[3]", "infers f32[2]"}));
}

TEST(Verify, RejectsUseBeforeDefinition) {
  Program p = neg_add_program();
  std::swap(p.eqns[0], p.eqns[1]);
  EXPECT_TRUE(VerifyFails(
      p, {"equation 0", "`%2 = add %1, %0 : f32[2]`", "%1 is used before it is defined"}));
}

TEST(Verify, RejectsRedefinitionAndOutOfRangeVariables) {
  Program p = neg_add_program();
  p.eqns[1].outs[0] = p.eqns[0].outs[0];
  EXPECT_TRUE(VerifyFails(p, {"equation 1", "already defined"}));

  Program q = neg_add_program();
  q.eqns[1].ins[0] = 99;
  EXPECT_TRUE(VerifyFails(q, {"equation 1", "%99 is not a variable"}));

  Program r = neg_add_program();
  r.outputs = {-1};
  EXPECT_TRUE(VerifyFails(r, {"output 0 %-1 is not defined"}));

  Program s = neg_add_program();
  s.inputs.push_back(s.inputs[0]);
  EXPECT_TRUE(VerifyFails(s, {"input 1", "already an earlier input"}));

  Program t = neg_add_program();
  t.var_types[static_cast<size_t>(t.inputs[0])] = Type(DType::f32, {}, "clients");
  EXPECT_TRUE(VerifyFails(t, {"input 0", "f32[]@clients is placed but has no leading"}));
}

TEST(Verify, RejectsWrongArityNamingTheEquation) {
  Program p = neg_add_program();
  p.eqns[1].ins.pop_back();
  EXPECT_TRUE(VerifyFails(p, {"equation 1", "`%2 = add %1 : f32[2]`", "add"}));
}

TEST(Verify, ChecksSubProgramsRecursively) {
  auto body = std::make_shared<Program>(neg_add_program());
  body->var_types[static_cast<size_t>(body->eqns[0].outs[0])] = Type(DType::i32, {2});
  Program p = trace([](Value x) { return x; }, {f32t({2})}, "outer");
  p.eqns.push_back(Eqn{
      &primitive("constant"),
      Params{{"value", Array::scalar<float>(1)}, {"body", std::shared_ptr<const Program>(body)}},
      {},
      {p.add_var(f32t({}))}});
  EXPECT_TRUE(VerifyFails(p, {"verify @outer", "equation 0", "in sub-program body", "verify @f",
                              "recorded as i32[2]"}));
  p.eqns[0].params.set("body", std::shared_ptr<const Program>());
  EXPECT_TRUE(VerifyFails(p, {"parameter body holds no sub-program"}));
}

}  // namespace drx::testing
