// The typed parameter views of the structured primitives (scan, while_loop,
// cond, map_fn, dot_general): each round-trips through Params, reading one
// rejects every missing, mistyped or unknown key with a drx::Error naming the
// primitive and the key, and the executor reads them when it compiles, so a
// malformed equation is an error at compile instead of a silent fallback to
// the interpreter. Program text with such an equation does not parse.
#include <functional>
#include <string>
#include <vector>

#include "drx/core/program_text.h"
#include "drx/exec/executable.h"
#include "drx/mapreduce/map_fn_params.h"
#include "drx/mapreduce/mapreduce.h"
#include "drx/mapreduce/primitives.h"
#include "drx/ops/dot_general_params.h"
#include "drx/ops/primitives.h"
#include "drx/transforms/cond.h"
#include "drx/transforms/cond_params.h"
#include "drx/transforms/loops.h"
#include "drx/transforms/scan_params.h"
#include "drx/transforms/while_params.h"
#include "tests/test_util.h"

namespace drx::testing {
namespace {

Type f32t(Shape s) { return Type(DType::f32, std::move(s)); }

// carry + x, ys carry * x, over 4 rows; reversed, remat.
Program scan_program() {
  auto f = [](Value c, Value xs) {
    ScanOptions o;
    o.reverse = true;
    o.remat = true;
    auto [carry, ys] = scan(
        [](const Tree& k, const Tree& x) {
          Value k2 = k.value() + x.value();
          return std::pair<Tree, Tree>(Tree(k2), Tree(k2 * x.value()));
        },
        Tree(c), Tree(xs), o);
    return std::vector<Value>{carry.value(), ys.value()};
  };
  return trace(f, {f32t({}), f32t({4})});
}

// Doubles x while it is below the bound b (a cond const).
Program while_program() {
  auto f = [](Value x, Value b) {
    Tree r = while_loop([&](const Tree& c) { return less(sum(c.value()), b); },
                        [](const Tree& c) { return Tree(c.value() * 2.0); }, Tree(x));
    return r.value();
  };
  return trace(f, {f32t({2}), f32t({})});
}

Program cond_program() {
  auto f = [](Value p, Value x) {
    return cond(
               p, [](const Tree& t) { return Tree(t.value() + 1.0); },
               [](const Tree& t) { return Tree(t.value() * 3.0); }, Tree(x))
        .value();
  };
  return trace(f, {Type(DType::bool_, {}), f32t({3})});
}

Program map_program() {
  auto f = program({{"clients", 3}},
                   [](Value xs) { return map_fn([](Value x) { return x * x + 1.0; }, xs); },
                   {"clients"});
  return trace(f, {f32t({3, 2})});
}

Program dot_program() {
  return trace([](Value a, Value b) { return matmul(a, b); }, {f32t({2, 3}), f32t({3, 4})});
}

struct Case {
  const char* op;
  std::function<Program()> make;
  const Primitive& (*prim)();
  std::vector<std::string> keys;
};

std::vector<Case> cases() {
  return {
      {"scan",
       scan_program,
       prims::scan,
       {"body", "checkpoint_every", "length", "num_carry", "num_consts", "remat", "reverse"}},
      {"while_loop",
       while_program,
       prims::while_loop,
       {"body", "cond", "num_body_consts", "num_cond_consts"}},
      {"cond", cond_program, prims::cond, {"false_branch", "true_branch"}},
      {"map_fn", map_program, prims::map_fn, {"body", "placement"}},
      {"dot_general",
       dot_program,
       prims::dot_general,
       {"lhs_batch", "lhs_contracting", "rhs_batch", "rhs_contracting"}},
  };
}

// The first top-level equation of `prim` in p.
Eqn& eqn_of(Program& p, const Primitive& prim) {
  for (Eqn& e : p.eqns)
    if (e.prim == &prim) return e;
  throw std::runtime_error("no " + prim.name() + " equation");
}

Params without(const Params& p, const std::string& key) {
  Params q;
  for (const auto& [k, v] : p.items())
    if (k != key) q.set(k, v);
  return q;
}

// Reads e's params through the view of its primitive.
void read_view(const Eqn& e) {
  if (e.prim == &prims::scan())
    ScanParams::of(e);
  else if (e.prim == &prims::while_loop())
    WhileParams::of(e);
  else if (e.prim == &prims::cond())
    CondParams::of(e);
  else if (e.prim == &prims::map_fn())
    MapFnParams::of(e);
  else
    DotGeneralParams::of(e);
}

// The message of the drx::Error fn throws, or "" if it throws none.
std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_MENTIONS(msg, ...)                                       \
  for (const std::string& part : std::vector<std::string>{__VA_ARGS__}) \
    EXPECT_NE((msg).find(part), std::string::npos) << "'" << part << "' not in: " << (msg);

TEST(TypedParams, ScanRoundTrip) {
  Program p = scan_program();
  const Eqn& e = eqn_of(p, prims::scan());
  const ScanParams s = ScanParams::of(e);
  EXPECT_EQ(s.length, 4);
  EXPECT_EQ(s.num_consts, 0);
  EXPECT_EQ(s.num_carry, 1);
  EXPECT_TRUE(s.reverse);
  EXPECT_TRUE(s.remat);
  EXPECT_EQ(s.checkpoint_every, 0);
  EXPECT_EQ(s.to_params(), e.params);
  ScanParams t = s;
  t.length = 9;
  t.reverse = false;
  t.remat = false;
  t.checkpoint_every = 3;
  const ScanParams u = ScanParams::of(t.to_params());
  EXPECT_EQ(u.body, s.body);
  EXPECT_EQ(u.length, 9);
  EXPECT_EQ(u.num_carry, 1);
  EXPECT_FALSE(u.reverse);
  EXPECT_FALSE(u.remat);
  EXPECT_EQ(u.checkpoint_every, 3);
}

TEST(TypedParams, WhileRoundTrip) {
  Program p = while_program();
  const Eqn& e = eqn_of(p, prims::while_loop());
  const WhileParams w = WhileParams::of(e);
  EXPECT_EQ(w.num_cond_consts, 1);  // the bound
  EXPECT_EQ(w.num_body_consts, 0);
  EXPECT_EQ(w.cond->inputs.size(), 2u);
  EXPECT_EQ(w.to_params(), e.params);
  WhileParams v = w;
  std::swap(v.num_cond_consts, v.num_body_consts);
  v.body = w.cond;  // any programs with enough inputs read back
  const WhileParams r = WhileParams::of(v.to_params());
  EXPECT_EQ(r.cond, w.cond);
  EXPECT_EQ(r.body, w.cond);
  EXPECT_EQ(r.num_cond_consts, 0);
  EXPECT_EQ(r.num_body_consts, 1);
}

TEST(TypedParams, CondRoundTrip) {
  Program p = cond_program();
  const Eqn& e = eqn_of(p, prims::cond());
  const CondParams c = CondParams::of(e);
  EXPECT_EQ(c.to_params(), e.params);
  // The true branch adds 1, the false branch multiplies by 3.
  const Array x = Array::from_vector<float>({1, 2, 3}, {3});
  EXPECT_EQ(interpret(c.branch(true), {x})[0].to_vector<float>(), (std::vector<float>{2, 3, 4}));
  EXPECT_EQ(interpret(c.branch(false), {x})[0].to_vector<float>(), (std::vector<float>{3, 6, 9}));
  const CondParams swapped = CondParams::of(CondParams{{c.branches[1], c.branches[0]}}.to_params());
  EXPECT_EQ(swapped.branches[0], c.branches[1]);
  EXPECT_EQ(swapped.branches[1], c.branches[0]);
}

TEST(TypedParams, MapFnRoundTrip) {
  Program p = map_program();
  const Eqn& e = eqn_of(p, prims::map_fn());
  const MapFnParams m = MapFnParams::of(e);
  EXPECT_EQ(m.placement, "clients");
  EXPECT_EQ(m.body->inputs.size(), 1u);
  EXPECT_EQ(m.to_params(), e.params);
  const MapFnParams r = MapFnParams::of(MapFnParams{m.body, "devices"}.to_params());
  EXPECT_EQ(r.body, m.body);
  EXPECT_EQ(r.placement, "devices");
}

TEST(TypedParams, DotGeneralRoundTrip) {
  Program p = dot_program();
  const Eqn& e = eqn_of(p, prims::dot_general());
  const DotGeneralParams d = DotGeneralParams::of(e);
  EXPECT_EQ(d.lhs_contracting, (std::vector<int64_t>{1}));
  EXPECT_EQ(d.rhs_contracting, (std::vector<int64_t>{0}));
  EXPECT_TRUE(d.lhs_batch.empty());
  EXPECT_TRUE(d.rhs_batch.empty());
  EXPECT_EQ(d.to_params(), e.params);
  const DotGeneralParams b{{2}, {1}, {0}, {0}};
  const DotGeneralParams r = DotGeneralParams::of(b.to_params());
  EXPECT_EQ(r.lhs_contracting, (std::vector<int64_t>{2}));
  EXPECT_EQ(r.rhs_contracting, (std::vector<int64_t>{1}));
  EXPECT_EQ(r.lhs_batch, (std::vector<int64_t>{0}));
  EXPECT_EQ(r.rhs_batch, (std::vector<int64_t>{0}));
}

// The views list exactly the keys the primitives' equations carry.
TEST(TypedParams, ViewsCoverEveryKeyOfATracedEquation) {
  for (const Case& c : cases()) {
    Program p = c.make();
    std::vector<std::string> keys;
    for (const auto& [k, v] : eqn_of(p, c.prim()).params.items()) keys.push_back(k);
    EXPECT_EQ(keys, c.keys) << c.op;
  }
}

TEST(TypedParams, MissingKeyNamesPrimitiveAndKey) {
  for (const Case& c : cases()) {
    for (const std::string& key : c.keys) {
      Program p = c.make();
      Eqn& e = eqn_of(p, c.prim());
      e.params = without(e.params, key);
      const std::string msg = error_of([&] { read_view(e); });
      EXPECT_MENTIONS(msg, std::string(c.op) + ":", "missing parameter '" + key + "'");
    }
  }
}

TEST(TypedParams, MistypedKeyNamesPrimitiveKeyAndExpectedKind) {
  for (const Case& c : cases()) {
    for (const std::string& key : c.keys) {
      Program p = c.make();
      Eqn& e = eqn_of(p, c.prim());
      // A number where a program, list or name is expected, a list where a
      // number is.
      const Attr& old = e.params.at(key, c.op);
      const bool is_int = std::holds_alternative<int64_t>(old);
      e.params.set(key, is_int ? Attr(std::vector<int64_t>{1}) : Attr(int64_t{1}));
      const std::string msg = error_of([&] { read_view(e); });
      EXPECT_MENTIONS(msg, std::string(c.op) + ":", "parameter '" + key + "' must be");
    }
  }
}

TEST(TypedParams, UnknownKeyIsAnError) {
  for (const Case& c : cases()) {
    Program p = c.make();
    Eqn& e = eqn_of(p, c.prim());
    e.params.set("colour", int64_t{1});
    const std::string msg = error_of([&] { read_view(e); });
    EXPECT_MENTIONS(msg, std::string(c.op) + ":", "unknown parameter 'colour'", c.keys[0]);
  }
}

TEST(TypedParams, CountsAndFlagsAreChecked) {
  Program p = scan_program();
  Eqn& e = eqn_of(p, prims::scan());
  const Params good = e.params;
  e.params.set("reverse", int64_t{2});
  EXPECT_MENTIONS(error_of([&] { ScanParams::of(e); }), "scan:", "'reverse' is 2",
                  "expected 0 or 1");
  e.params = good;
  e.params.set("length", int64_t{-1});
  EXPECT_MENTIONS(error_of([&] { ScanParams::of(e); }), "scan:", "'length' is -1", "non-negative");
  e.params = good;
  e.params.set("num_carry", int64_t{5});
  EXPECT_MENTIONS(error_of([&] { ScanParams::of(e); }), "scan:", "num_carry 5", "do not fit");
  Program w = while_program();
  Eqn& we = eqn_of(w, prims::while_loop());
  we.params.set("num_body_consts", int64_t{-2});
  EXPECT_MENTIONS(error_of([&] { WhileParams::of(we); }), "while_loop:", "'num_body_consts' is -2");
}

TEST(TypedParams, ReadingAnotherPrimitivesEquationIsAnError) {
  Program p = dot_program();
  const Eqn& e = eqn_of(p, prims::dot_general());
  EXPECT_MENTIONS(error_of([&] { ScanParams::of(e); }), "scan:", "dot_general equation");
  EXPECT_MENTIONS(error_of([&] { MapFnParams::of(e); }), "map_fn:", "dot_general equation");
}

// Before the views, the executor's kernel factories gave up on a missing key
// and left the equation to Primitive::eval, so a renamed key only showed as a
// slow program (or an error at run time).
TEST(TypedParams, CompileRejectsAMissingKey) {
  for (const Case& c : cases()) {
    for (const std::string& key : c.keys) {
      Program p = c.make();
      Eqn& e = eqn_of(p, c.prim());
      e.params = without(e.params, key);
      const std::string msg = error_of([&] { compile(p); });
      EXPECT_MENTIONS(msg, std::string(c.op) + ":", "missing parameter '" + key + "'");
    }
  }
}

TEST(TypedParams, CompileRejectsAMistypedKey) {
  for (const Case& c : cases()) {
    Program p = c.make();
    Eqn& e = eqn_of(p, c.prim());
    e.params.set(c.keys[0], std::string("oops"));
    const std::string msg = error_of([&] { compile(p); });
    EXPECT_MENTIONS(msg, std::string(c.op) + ":", "parameter '" + c.keys[0] + "' must be");
  }
}

// Equations over bf16 (and f16, and the narrow integers) run on Primitive::eval, widened: their
// parameters are still checked when the program is compiled, not when it first runs.
TEST(TypedParams, CompileRejectsAMissingKeyOnTheHalfPrecisionPath) {
  const Type b(DType::bf16, {2, 2});
  Program dot = trace([](Value a, Value c) { return matmul(a, c); }, {b, b});
  Program scanned = trace(
      [](Value c, Value xs) {
        return scan(
                   [](const Tree& k, const Tree& x) {
                     return std::pair<Tree, Tree>(Tree(k.value() + x.value()), Tree(k.value()));
                   },
                   Tree(c), Tree(xs))
            .first.value();
      },
      {Type(DType::bf16, {}), Type(DType::bf16, {3})});
  ASSERT_NO_THROW(compile(dot));
  ASSERT_NO_THROW(compile(scanned));
  Eqn& d = eqn_of(dot, prims::dot_general());
  d.params = without(d.params, "rhs_contracting");
  EXPECT_MENTIONS(error_of([&] { compile(dot); }),
                  "dot_general:", "missing parameter 'rhs_contracting'");
  Eqn& s = eqn_of(scanned, prims::scan());
  s.params = without(s.params, "length");
  EXPECT_MENTIONS(error_of([&] { compile(scanned); }), "scan:", "missing parameter 'length'");
}

// Program text: an equation without one of its keys, or with a key its
// primitive does not know, does not parse.
TEST(TypedParams, ProgramTextWithABadKeyDoesNotParse) {
  for (const Case& c : cases()) {
    const std::string text = to_string(c.make());
    ASSERT_NO_THROW(parse_program(text)) << text;
    // The last key in the equation's parameter list, printed as "op[...key=value...]".
    const std::string& key = c.keys.back();
    const size_t line = text.find(std::string(c.op) + "[");
    ASSERT_NE(line, std::string::npos) << c.op << " in " << text;
    const size_t at = text.find(key + "=", line);
    ASSERT_NE(at, std::string::npos) << key << " in " << text;
    const std::string renamed = text.substr(0, at) + "x" + text.substr(at);
    const std::string msg = error_of([&] { parse_program(renamed); });
    EXPECT_MENTIONS(msg, c.op, "'x" + key + "'");
  }
}

// Behaviour is unchanged: each program compiles to kernels (no interpreter
// fallback) and gives the interpreter's results.
TEST(TypedParams, CompiledProgramsStillMatchTheInterpreter) {
  for (const Case& c : cases()) {
    const Program p = c.make();
    std::vector<Array> args;
    uint64_t seed = 7;
    for (const Type& t : p.input_types())
      args.push_back(t.dtype == DType::bool_ ? Array::scalar<bool>(true)
                                             : random_array(t.shape, t.dtype, seed++, -1.0, 1.0));
    Executable exe = compile(p);
    EXPECT_EQ(exe.stats().fallbacks, 0u) << c.op;
    // The gemm kernel rounds in f32, the reference accumulates in f64.
    if (c.prim == prims::dot_general)
      EXPECT_LT(max_abs_diff(exe.run(args), interpret(p, args)), 1e-6);
    else
      EXPECT_TRUE(BitwiseEqual(exe.run(args), interpret(p, args))) << c.op;
  }
}

}  // namespace
}  // namespace drx::testing
