// drx::simplify: dead code, common subexpressions, constant folding and
// algebraic no-ops, each checked on the equations it leaves, and the
// simplified programs checked to compute exactly what the originals compute.
#include <string>

#include "test_util.h"

namespace drx::testing {
namespace {

Type f64t(Shape s) { return Type(f64, std::move(s)); }

int count(const Program& p, const std::string& prim) {
  int n = 0;
  for (const Eqn& e : p.eqns) n += e.prim->name() == prim;
  return n;
}

std::string names(const Program& p) {
  std::string s;
  for (const Eqn& e : p.eqns) s += e.prim->name() + " ";
  return s;
}

// Runs p and simplify(p) on the same random inputs; results must be bitwise
// equal (simplification reorders nothing and folds with the same kernels).
::testing::AssertionResult SameResults(const Program& p, uint64_t seed) {
  Program s = simplify(p);
  try {
    verify(s);
  } catch (const Error& e) {
    return ::testing::AssertionFailure()
           << "simplified program does not verify: " << e.what() << "\n"
           << s;
  }
  if (s.input_types() != p.input_types() || s.output_types() != p.output_types())
    return ::testing::AssertionFailure() << "signature changed:\n" << p << "\nvs\n" << s;
  std::vector<Array> args;
  for (const Type& t : p.input_types()) {
    // Integers stay small and non-negative so they are valid gather indices.
    bool integral = is_integer(t.dtype);
    args.push_back(random_array(t.shape, t.dtype, seed++, integral ? 0 : -2, integral ? 3 : 2));
  }
  std::vector<Array> want = run(p, args), got = run(s, args);
  for (size_t i = 0; i < want.size(); ++i)
    if (!got[i].bitwise_equal(want[i]))
      return ::testing::AssertionFailure()
             << "output " << i << ": " << got[i].str() << " vs " << want[i].str() << "\n"
             << s;
  return ::testing::AssertionSuccess();
}

// The value of the constant the output comes from, if it is one.
Array output_constant(const Program& p, size_t i = 0) {
  for (const Eqn& e : p.eqns)
    if (e.outs[0] == p.outputs.at(i) && e.prim->name() == "constant")
      return e.params.get_array("value", "test");
  throw Error("output " + std::to_string(i) + " is not a constant");
}

// ---- dead code -----------------------------------------------------------

TEST(Simplify, DeadCodeIsRemoved) {
  Program p = trace(
      [](Value x) {
        Value unused = exp(x) * sin(x);
        (void)unused;
        return x + 1.0;
      },
      {f64t({})});
  ASSERT_EQ(p.eqns.size(), 5u) << names(p);  // exp sin mul constant add
  Program d = eliminate_dead_code(p);
  EXPECT_EQ(names(d), "constant add ");
  Program s = simplify(p);
  EXPECT_EQ(names(s), "constant add ");
  EXPECT_EQ(s.inputs.size(), 1u);
  EXPECT_TRUE(SameResults(p, 1));
}

TEST(Simplify, DeadCodeKeepsEveryInputAndWhatOutputsNeed) {
  // An unused input stays an input (callers pass it); a chain feeding an
  // output stays whole, even through several outputs.
  Program p = trace(
      [](Value x, Value unused) -> std::vector<Value> {
        (void)unused;
        Value a = tanh(x);
        Value b = a * x;
        return {b, a, x};
      },
      {f64t({3}), f64t({2})});
  Program d = eliminate_dead_code(p);
  EXPECT_EQ(d.inputs.size(), 2u);
  EXPECT_EQ(names(d), "tanh mul ");
  EXPECT_TRUE(SameResults(p, 2));
}

// ---- common subexpressions ---------------------------------------------------

TEST(Simplify, CommonSubexpressionsAreMerged) {
  Program p = trace([](Value x) { return exp(x) + exp(x); }, {f64t({4})});
  ASSERT_EQ(count(p, "exp"), 2);
  Program s = simplify(p);
  EXPECT_EQ(count(s, "exp"), 1) << s;
  EXPECT_EQ(names(s), "exp add ");
  EXPECT_TRUE(SameResults(p, 3));

  // Chains merge level by level; equal constants merge too.
  Program q = trace([](Value x) { return sin(exp(x) * 3.0) - sin(exp(x) * 3.0); }, {f64t({4})});
  Program t = simplify(q);
  EXPECT_EQ(count(t, "exp"), 1) << t;
  EXPECT_EQ(count(t, "sin"), 1) << t;
  EXPECT_EQ(count(t, "mul"), 1) << t;
  EXPECT_EQ(count(t, "constant"), 1) << t;
  EXPECT_TRUE(SameResults(q, 4));
}

TEST(Simplify, DifferentInputsOrParamsAreNotMerged) {
  Program p = trace(
      [](Value x, Value y) -> std::vector<Value> {
        return {exp(x) + exp(y), sum(x, {0}), sum(x, {1}), x * 2.0, x * 3.0};
      },
      {f64t({3, 3}), f64t({3, 3})});
  Program s = simplify(p);
  EXPECT_EQ(count(s, "exp"), 2) << s;
  EXPECT_EQ(count(s, "reduce_sum") + count(s, "sum"), 2) << s;
  EXPECT_EQ(count(s, "mul"), 2) << s;
  EXPECT_TRUE(SameResults(p, 5));
}

// ---- constant folding ----------------------------------------------------

TEST(Simplify, SmallConstantExpressionsFoldToOneConstant) {
  Program p = trace(
      [](Value x) {
        Value c = constant(f64_array({1, 2, 3, 4}, {4}));
        Value k = exp(c * 2.0 - 1.0) + sum(c);
        return x + k;
      },
      {f64t({4})});
  Program s = simplify(p);
  EXPECT_EQ(names(s), "constant add ") << s;
  // The folded constant is the one input to the add that is not x.
  const Eqn& add = s.eqns.back();
  ASSERT_EQ(add.ins.size(), 2u);
  int other = add.ins[0] == s.inputs[0] ? add.ins[1] : add.ins[0];
  ASSERT_EQ(s.eqns[0].outs[0], other);
  std::vector<double> want;
  for (double c : {1.0, 2.0, 3.0, 4.0}) want.push_back(std::exp(c * 2 - 1) + 10);
  EXPECT_TRUE(ArrayNear(s.eqns[0].params.get_array("value", "test"), want, 1e-15));
  EXPECT_TRUE(SameResults(p, 6));
}

TEST(Simplify, FoldingAnOutputGivesAConstantOutput) {
  Program p = trace(
      [](Value x) -> std::vector<Value> {
        return {x, matmul(constant(f64_array({1, 2, 3, 4}, {2, 2})),
                          constant(f64_array({1, -1}, {2})))};
      },
      {f64t({1})});
  Program s = simplify(p);
  EXPECT_EQ(names(s), "constant ");
  EXPECT_TRUE(ArrayNear(output_constant(s, 1), {-1, -1}));
  EXPECT_TRUE(SameResults(p, 7));
}

TEST(Simplify, ConstantsOver64ElementsAreNotFolded) {
  auto scaled = [](int64_t n) {
    return [n](Value x) { return x + constant(full({n}, 1.5, f64)) * 3.0; };
  };
  Program small = simplify(trace(scaled(64), {f64t({64})}));
  EXPECT_EQ(names(small), "constant add ") << small;
  Program large = simplify(trace(scaled(65), {f64t({65})}));
  EXPECT_EQ(count(large, "mul"), 1) << large;
  EXPECT_EQ(count(large, "add"), 1) << large;
  // The large result is still computed correctly at run time.
  std::vector<Array> out = run(large, {zeros({65}, f64)});
  EXPECT_TRUE(ArrayNear(out[0], std::vector<double>(65, 4.5)));
  EXPECT_TRUE(SameResults(trace(scaled(65), {f64t({65})}), 8));
}

TEST(Simplify, FoldingLeavesRunTimeErrorsToRunTime) {
  // An out-of-range gather on constants is not folded away or thrown early.
  Program p = trace(
      [](Value x) {
        Value idx = constant(Array::from_vector<int32_t>({7}, {1}));
        return x + take(constant(f64_array({1, 2, 3}, {3})), idx, 0);
      },
      {f64t({1})});
  Program s;
  ASSERT_NO_THROW(s = simplify(p));
  EXPECT_EQ(count(s, "take") + count(s, "gather"), 1) << s;
  EXPECT_THROW(run(s, {zeros({1}, f64)}), Error);
}

// ---- algebraic no-ops ----------------------------------------------------

TEST(Simplify, ArithmeticIdentitiesAreRemoved) {
  using Fn = std::function<Value(Value)>;
  std::vector<std::pair<std::string, Fn>> cases = {
      {"x*1", [](Value x) { return x * 1.0; }},
      {"1*x", [](Value x) { return 1.0 * x; }},
      {"x+0", [](Value x) { return x + 0.0; }},
      {"0+x", [](Value x) { return 0.0 + x; }},
      {"x-0", [](Value x) { return x - 0.0; }},
      {"x/1", [](Value x) { return x / 1.0; }},
      {"x*ones", [](Value x) { return x * ones_like(x); }},
      {"x+zeros-zeros", [](Value x) { return (x + zeros_like(x)) - zeros_like(x); }},
      {"((x*1)/1+0)*1", [](Value x) { return ((x * 1.0) / 1.0 + 0.0) * 1.0; }},
  };
  // Small shapes (where the broadcast constant folds), large ones (where the
  // broadcast of the scalar stays) and a scalar.
  for (const Shape& shape : {Shape{}, Shape{3}, Shape{10, 20}}) {
    for (const auto& [name, fn] : cases) {
      Program p = trace(fn, {f64t(shape)});
      Program s = simplify(p);
      EXPECT_TRUE(s.eqns.empty()) << name << " on " << shape_str(shape) << ":\n" << s;
      EXPECT_EQ(s.outputs, s.inputs) << name << " on " << shape_str(shape);
      EXPECT_TRUE(SameResults(p, 9)) << name;
    }
  }
  // Integers too.
  Program pi = trace([](Value x) { return (x * 1.0 + 0.0) / 1.0; }, {Type(i32, {5})});
  EXPECT_TRUE(simplify(pi).eqns.empty()) << simplify(pi);
}

TEST(Simplify, ShapeAndDtypeNoOpsAreRemoved) {
  // The public ops already skip these, so emit the primitives directly.
  Program p = trace(
      [](Value x) {
        Value t = emit1(primitive("transpose"), {x}, Params{{"perm", std::vector<int64_t>{0, 1}}});
        Value r = emit1(primitive("reshape"), {t}, Params{{"shape", Shape{3, 3}}});
        Value c = emit1(primitive("convert"), {r}, Params{{"dtype", f64}});
        Value b = emit1(primitive("broadcast_in_dim"), {c},
                        Params{{"shape", Shape{3, 3}}, {"dims", std::vector<int64_t>{0, 1}}});
        return b;
      },
      {f64t({3, 3})});
  ASSERT_EQ(p.eqns.size(), 4u) << p;
  Program s = simplify(p);
  EXPECT_TRUE(s.eqns.empty()) << s;
  EXPECT_EQ(s.outputs, s.inputs);
  EXPECT_TRUE(SameResults(p, 10));
}

// Reverse mode through three slices of one value sums three zero-padded cotangents: one
// concatenate remains, computing the same values.
TEST(Simplify, SumsOfDisjointZeroPaddedPiecesAreOneConcatenate) {
  auto f = [](Value x) {
    Value q = slice(x, {0, 0}, {4, 3}), k = slice(x, {0, 3}, {4, 5}), v = slice(x, {0, 5}, {4, 9});
    return sum(q * q) + sum(exp(k)) + sum(v * 3.0);
  };
  Program g = simplify(vjp_program(trace(f, {f64t({4, 9})})));
  EXPECT_EQ(count(g, "concatenate"), 1) << g;
  for (const Eqn& e : g.eqns)  // no sum of whole-x cotangents is left
    EXPECT_FALSE(e.prim->name() == "add" && g.type_of(e.outs[0]).shape == (Shape{4, 9})) << g;
  Array x = random_array({4, 9}, f64, 5);
  std::vector<Array> got = run(g, {x, Array::scalar(1.0)});
  std::vector<double> want;
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 9; ++j) {
      const double v = x.data<double>()[i * 9 + j];
      want.push_back(j < 3 ? 2 * v : j < 5 ? std::exp(v) : 3.0);
    }
  EXPECT_TRUE(ArrayNear(got.at(1), want, 1e-15, 0));
  // Overlapping non-zero pieces are a real sum, and stay one.
  Program overlap = simplify(trace(
      [](Value a, Value b) {
        Value za = broadcast_in_dim(constant(Array::scalar(0.0)), {2, 2}, {});
        return concatenate({a, za}, 1) + concatenate({za, b}, 1) + concatenate({b, a}, 1);
      },
      {f64t({2, 2}), f64t({2, 2})}));
  EXPECT_EQ(count(overlap, "add"), 1) << overlap;
  EXPECT_TRUE(SameResults(overlap, 3));
}

// astype(astype(x, f32), bf16) is x for a bf16 x (f32 holds every bf16 value); a narrowing
// in the middle is kept.
TEST(Simplify, ExactRoundTripConversionsAreRemoved) {
  Program exact = simplify(trace([](Value x) { return astype(astype(x, DType::f32), DType::bf16); },
                                 {Type(DType::bf16, {5})}));
  EXPECT_TRUE(exact.eqns.empty()) << exact;
  Program narrowing = simplify(trace(
      [](Value x) { return astype(astype(x, DType::bf16), DType::f32); }, {Type(DType::f32, {5})}));
  EXPECT_EQ(count(narrowing, "convert"), 2) << narrowing;
  EXPECT_TRUE(SameResults(narrowing, 4));
}

TEST(Simplify, LookalikesAreKept) {
  // x*2 is not x.
  Program twice = simplify(trace([](Value x) { return x * 2.0; }, {f64t({3})}));
  EXPECT_EQ(count(twice, "mul"), 1) << twice;
  // A transpose that swaps the axes of a square matrix keeps its type but
  // moves elements.
  Program tp = trace(
      [](Value x) {
        return emit1(primitive("transpose"), {x}, Params{{"perm", std::vector<int64_t>{1, 0}}});
      },
      {f64t({3, 3})});
  Program ts = simplify(tp);
  EXPECT_EQ(count(ts, "transpose"), 1) << ts;
  Array m = f64_array({1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3});
  EXPECT_TRUE(ArrayNear(run(ts, {m})[0], {1, 4, 7, 2, 5, 8, 3, 6, 9}));
  // A reshape that keeps the size but changes the shape is kept.
  Program rs = simplify(trace([](Value x) { return reshape(x, {3, 2}); }, {f64t({2, 3})}));
  EXPECT_EQ(count(rs, "reshape"), 1) << rs;
  // astype to another dtype is kept.
  Program cs = simplify(trace([](Value x) { return astype(x, f32); }, {f64t({2})}));
  EXPECT_EQ(count(cs, "convert"), 1) << cs;
  // 0 - x is -x, not x; 1/x is not x.
  Program zs = simplify(trace([](Value x) { return 0.0 - x; }, {f64t({2})}));
  EXPECT_EQ(count(zs, "sub"), 1) << zs;
  Program inv = simplify(trace([](Value x) { return 1.0 / x; }, {f64t({2})}));
  EXPECT_EQ(count(inv, "div"), 1) << inv;
  // Multiplying by a constant that is not all ones.
  Program mix = simplify(trace(
      [](Value x) {
        return x * constant(f64_array({1, 1, 2}, {3}));
      },
      {f64t({3})}));
  EXPECT_EQ(count(mix, "mul"), 1) << mix;
}

TEST(Simplify, SubtractingZerosThatBroadcastKeepsTheBroadcast) {
  // x[3] - zeros[2,3] has shape [2,3]: the result is broadcast x, not x.
  Program p = trace([](Value x) { return x - constant(zeros({2, 3}, f64)); }, {f64t({3})});
  Program s = simplify(p);
  ASSERT_EQ(s.output_types().size(), 1u);
  EXPECT_EQ(s.output_types()[0], f64t({2, 3}));
  EXPECT_NE(s.outputs[0], s.inputs[0]);
  EXPECT_EQ(count(s, "broadcast_in_dim"), 1) << s;
  EXPECT_EQ(count(s, "sub"), 0) << s;
  std::vector<Array> out = run(s, {f64_array({1, 2, 3}, {3})});
  EXPECT_TRUE(ArrayNear(out[0], {1, 2, 3, 1, 2, 3}));
  EXPECT_TRUE(SameResults(p, 11));
  // Likewise a zero that is larger than x on the left: 0[2,1] + x[3] -> [2,3].
  Program q = trace([](Value x) { return constant(zeros({2, 1}, f64)) + x; }, {f64t({3})});
  Program qs = simplify(q);
  EXPECT_EQ(qs.output_types()[0], f64t({2, 3}));
  EXPECT_TRUE(SameResults(q, 12));
}

// ---- equivalence on whole programs ---------------------------------------

Value mlp(const std::vector<Value>& a) {
  // a = x[5,4], w1[4,6], b1[6], w2[6,3], b2[3], labels one-hot-ish y[5,3]
  Value h = relu(matmul(a[0], a[1]) + a[2]);
  Value logits = matmul(h, a[3]) + a[4];
  return -mean(sum(log_softmax(logits, -1) * a[5], {1})) * 1.0 + 0.0;
}

std::vector<Type> mlp_types() {
  return {f64t({5, 4}), f64t({4, 6}), f64t({6}), f64t({6, 3}), f64t({3}), f64t({5, 3})};
}

TEST(Simplify, SimplifiedProgramsComputeTheSameValues) {
  std::vector<Program> programs;
  programs.push_back(trace(
      [](Value x, Value y) -> std::vector<Value> {
        Value e = exp(x) * 1.0;
        Value k = constant(f64_array({1, 2}, {2})) * 2.0 + 0.0;
        return {e + exp(x) + k, tanh(y) * 2.0 - tanh(y), sum(e, {0}) / 1.0};
      },
      {f64t({3, 2}), f64t({3, 2})}));
  programs.push_back(
      trace([](Value x) { return softmax(x * 1.0, -1) + log_softmax(x, -1); }, {f64t({4, 7})}));
  programs.push_back(
      trace([](Value x, Value idx) { return sum(take(x, idx, 0) * 1.0 + take(x, idx, 0), {1}); },
            {f64t({5, 3}), Type(i32, {4})}));
  // Integer and bool paths.
  programs.push_back(trace(
      [](Value a, Value b) -> std::vector<Value> {
        Value s = (a + 0.0) * (b * 1.0) + a;
        return {s, greater(s, a), astype(s, f64) * 1.0};
      },
      {Type(i64, {6}), Type(i64, {6})}));
  Program forward = trace(mlp, mlp_types());
  programs.push_back(forward);
  // Reverse mode of the MLP, and forward mode of it.
  programs.push_back(vjp_program(forward));
  programs.push_back(jvp_program(forward));
  // Reverse over reverse: the gradient program differentiated again.
  programs.push_back(vjp_program(simplify(vjp_program(forward))));
  uint64_t seed = 100;
  for (size_t i = 0; i < programs.size(); ++i) {
    for (int rep = 0; rep < 3; ++rep)
      EXPECT_TRUE(SameResults(programs[i], seed += 20)) << "program " << i;
  }
}

TEST(Simplify, GradientProgramShrinksAndStaysCorrect) {
  Program forward = trace(mlp, mlp_types());
  Program g = vjp_program(forward);
  Program s = simplify(g);
  EXPECT_LT(s.eqns.size(), g.eqns.size());
  std::printf("MLP vjp program: %zu equations, %zu after simplify\n", g.eqns.size(), s.eqns.size());
  // Simplifying again changes nothing more.
  EXPECT_EQ(simplify(s).eqns.size(), s.eqns.size());
  // The gradient of b2 from the simplified program matches finite differences
  // of the forward program.
  std::vector<Array> args;
  uint64_t seed = 7;
  for (const Type& t : mlp_types()) args.push_back(random_array(t.shape, t.dtype, seed++));
  args.push_back(Array::scalar(1.0));  // cotangent of the loss
  std::vector<Array> out = run(s, args);
  ASSERT_EQ(out.size(), 1u + 6u);
  const Array& gb2 = out[1 + 4];
  const double h = 1e-6;
  for (int64_t k = 0; k < 3; ++k) {
    std::vector<Array> fp(args.begin(), args.end() - 1), fm = fp;
    Array bp = f64_array(to_doubles(fp[4]), {3}), bm = f64_array(to_doubles(fm[4]), {3});
    bp.data<double>()[k] += h;
    bm.data<double>()[k] -= h;
    fp[4] = bp;
    fm[4] = bm;
    double fd = (run(forward, fp)[0].item<double>() - run(forward, fm)[0].item<double>()) / (2 * h);
    EXPECT_NEAR(gb2.element_as_double(k), fd, 1e-7) << "d loss / d b2[" << k << "]";
  }
}

}  // namespace
}  // namespace drx::testing
