// Writes the seed corpora under fuzz/corpus/ (run: build-fuzz/make_seeds fuzz/corpus).
// Seeds are generated rather than hand-written so that they stay valid as the printed syntax
// and the checkpoint layout evolve: re-run this after such a change and commit the result.
// The StableHLO seeds are not committed: scripts/fuzz.sh writes them to a scratch directory
// at run time (make_seeds DIR stablehlo), after checking that each still imports and passes
// its checks.
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include "drx/data/checkpoint.h"
#include "drx/drx.h"
#include "drx/exec/executable.h"
#include "drx/stablehlo/import.h"
#include "drx/stablehlo/mlir_ast.h"

namespace {

using drx::Array;
using drx::Type;
using drx::Value;
using Values = std::vector<Value>;

Type f32t(drx::Shape s) { return Type(drx::f32, std::move(s)); }

void write(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
  if (!out) throw drx::Error("make_seeds: cannot write " + path);
  std::cout << path << " (" << bytes.size() << " bytes)\n";
}

void write_gz(const std::string& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb9");
  if (!f ||
      gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())) !=
          static_cast<int>(bytes.size()) ||
      gzclose(f) != Z_OK)
    throw drx::Error("make_seeds: cannot write " + path);
  std::cout << path << " (gzip)\n";
}

// Small programs that together use every family of primitives, so the fuzzer starts from
// text that reaches the type rules and kernels, not just the tokenizer.
void program_seeds(const std::string& dir) {
  struct Seed {
    std::string name;
    std::function<Values(const Values&)> fn;
    std::vector<Type> types;
  };
  std::vector<Seed> seeds;
  seeds.push_back(
      {"constants",
       [](const Values& a) -> Values {
         Value c = drx::constant(Array::from_vector<float>({1.5f, -0.0f, 1e-45f, 3.4e38f}, {2, 2}));
         Value ci = drx::constant(Array::from_vector<int32_t>({-7, 7}, {2}));
         Value cb = drx::constant(Array::from_vector<bool>({true, false}, {2}));
         return {a[0] + c,
                 ci,
                 cb,
                 drx::iota({2, 3}, 1, drx::i64),
                 drx::arange(4, drx::f32),
                 drx::fill({2}, 0.25, drx::f64),
                 drx::zeros_like(a[0]),
                 drx::ones_like(a[0])};
       },
       {f32t({2, 2})}});
  seeds.push_back({"unary",
                   [](const Values& a) -> Values {
                     Value x = a[0], p = drx::abs(x) + 1.0;
                     return {drx::neg(x),   drx::exp(x),           drx::log(p),
                             drx::log1p(p), drx::tanh(x),          drx::logistic(x),
                             drx::sqrt(p),  drx::rsqrt(p),         drx::sign(x),
                             drx::sin(x),   drx::cos(x),           drx::square(x),
                             drx::relu(x),  drx::stop_gradient(x), drx::astype(x, drx::i32)};
                   },
                   {f32t({2, 3})}});
  seeds.push_back({"binary",
                   [](const Values& a) -> Values {
                     Value x = a[0], y = a[1];
                     Value c = drx::less(x, y);
                     return {x + y,
                             x - y,
                             x * y,
                             x / y,
                             drx::pow(drx::abs(x), y),
                             drx::maximum(x, y),
                             drx::minimum(x, 0.5),
                             drx::where(c, x, y),
                             drx::astype(drx::less_equal(x, y), drx::f32),
                             drx::astype(drx::greater(x, y), drx::f32),
                             drx::astype(drx::greater_equal(x, y), drx::f32),
                             drx::astype(drx::equal(x, y), drx::i32),
                             drx::astype(drx::not_equal(x, y), drx::f64)};
                   },
                   {f32t({3}), f32t({3})}});
  seeds.push_back(
      {"integers",
       [](const Values& a) -> Values {
         Value i = a[0], j = a[1];
         return {i + j, i * j, i - j, drx::maximum(i, j), drx::sum(i), drx::astype(i, drx::f64)};
       },
       {Type(drx::i32, {4}), Type(drx::i32, {4})}});
  seeds.push_back({"reductions",
                   [](const Values& a) -> Values {
                     Value x = a[0];
                     return {drx::sum(x, {1}),       drx::mean(x, {-1}),     drx::max(x, {0}),
                             drx::min(x, {1}, true), drx::logsumexp(x, {1}), drx::softmax(x, 1),
                             drx::log_softmax(x, 0), drx::sum(x, {0}, true)};
                   },
                   {f32t({3, 4})}});
  seeds.push_back({"linalg",
                   [](const Values& a) -> Values {
                     drx::DotDims d{{1}, {1}, {0}, {0}};
                     return {drx::matmul(a[0], a[1]), drx::dot_general(a[2], a[2], d)};
                   },
                   {f32t({2, 3}), f32t({3, 4}), f32t({2, 3, 2})}});
  seeds.push_back({"shape",
                   [](const Values& a) -> Values {
                     Value x = a[0];
                     return {drx::reshape(x, {3, 2}),
                             drx::transpose(x, {1, 0}),
                             drx::broadcast_to(a[1], {2, 3}),
                             drx::broadcast_in_dim(a[1], {3, 2}, {0}),
                             drx::squeeze(drx::expand_dims(x, 0), 0),
                             drx::concatenate({x, x}, 1),
                             drx::slice(x, {0, 1}, {2, 3})};
                   },
                   {f32t({2, 3}), f32t({3})}});
  seeds.push_back({"indexing",
                   [](const Values& a) -> Values {
                     Value idx = a[1];
                     return {drx::take(a[0], idx, 1), drx::scatter_add(a[0], idx, a[2], 1),
                             drx::one_hot(idx, 4, drx::f64)};
                   },
                   {f32t({2, 3}), Type(drx::i32, {3}), f32t({2, 3})}});
  seeds.push_back({"grad",
                   [](const Values& a) -> Values {
                     auto loss = [](Value w, Value x) -> Value {
                       return drx::sum(drx::log_softmax(drx::matmul(x, w), -1));
                     };
                     return {drx::grad(loss)(a[0], a[1])};
                   },
                   {f32t({3, 2}), f32t({2, 3})}});
  seeds.push_back(
      {"mapreduce",
       [](const Values& a) -> Values {
         auto round = drx::program(
             {{"clients", 3}},
             [](Value w, Value xs) -> Values {
               Value local = drx::map_fn([](Value wi, Value xi) { return drx::tanh(wi * xi); },
                                         drx::broadcast(w), xs);
               return {drx::reduce_sum(local), drx::reduce_mean(local), drx::reduce_max(local),
                       drx::reduce_min(local), drx::place(local, "")};
             },
             {"", "clients"});
         return round(a[0], a[1]);
       },
       {f32t({2}), f32t({3, 2})}});
  seeds.push_back({"nested_placements",
                   [](const Values& a) -> Values {
                     auto round = drx::program(
                         {{"groups", 2}, {"clients", 3}},
                         [](Value w, Value xs) -> Values {
                           auto loss = [&](Value v) {
                             Value per_group = drx::map_fn(
                                 [](Value wg, Value xg) {
                                   Value local = drx::map_fn(
                                       [](Value wi, Value xi) { return drx::tanh(wi * xi); },
                                       drx::broadcast(wg, "clients"), xg);
                                   return drx::reduce_mean(local);
                                 },
                                 drx::broadcast(v, "groups"), xs);
                             return drx::sum(drx::reduce_sum(per_group));
                           };
                           return {loss(w), drx::grad(loss)(w)};
                         },
                         {"", "groups.clients"});
                     return round(a[0], a[1]);
                   },
                   {f32t({2}), f32t({2, 3, 2})}});
  seeds.push_back({"cond",
                   [](const Values& a) -> Values {
                     Value y = a[1] * 2.0;
                     drx::Tree r = drx::cond(
                         drx::greater(drx::sum(a[0]), drx::scalar_like(a[0], 0.0)),
                         [&](const drx::Tree& t) { return drx::Tree(drx::exp(t.value()) + y); },
                         [](const drx::Tree& t) { return drx::Tree(-t.value()); }, drx::Tree(a[0]));
                     return {r.value()};
                   },
                   {f32t({3}), f32t({3})}});
  seeds.push_back(
      {"loops",
       [](const Values& a) -> Values {
         Value w = a[1];
         auto [c, ys] = drx::scan(
             [&](const drx::Tree& h, const drx::Tree& x) -> std::pair<drx::Tree, drx::Tree> {
               Value n = drx::tanh(h.value() * w + x.value());
               return {drx::Tree(n), drx::Tree(n * 2.0)};
             },
             drx::Tree(a[1]), drx::Tree(a[0]), drx::ScanOptions{.reverse = true});
         drx::Tree l = drx::while_loop(
             [](const drx::Tree& h) {
               return drx::less(drx::sum(h.value()), drx::scalar_like(drx::sum(h.value()), 50.0));
             },
             [](const drx::Tree& h) { return drx::Tree(h.value() * 2.0 + 1.0); }, c);
         return {ys.value(), l.value()};
       },
       {f32t({4, 3}), f32t({3})}});
  for (const Seed& s : seeds)
    write(dir + "/" + s.name + ".drx", drx::to_string(drx::trace(s.fn, s.types, s.name)));

  // What the printer never emits but the parser accepts: comments, free layout, sparse ids,
  // quoted names and placements.
  write(dir + "/handwritten.drx",
        "// comments and free layout\n"
        "program @main (%7: f32[2,3]) -> (f32[2]) {\n"
        "  %1 = iota[dimension=1, dtype=f32, shape=[2,3]] : f32[2,3]\n"
        "  %20 = mul %7, %1 : f32[2,3]\n"
        "  %3 = sum[axes=[1]] %20 : f32[2]\n"
        "  %4 = constant[value=f32[]{0.5}] : f32[]\n"
        "  %5 = broadcast_in_dim[dims=[], shape=[2]] %4 : f32[2]\n"
        "  %6 = add %3, %5 : f32[2]\n"
        "  return %6\n"
        "}\n");
  // Edges where sizes are computed: empty types, and dims at the parser's 2^53 bound (these
  // parse and verify, but are too large for the harness to run).
  write(dir + "/zero_size.drx",
        "program @zero (%0: f32[0,3], %1: i32[0]) -> (f32[3], f32[3,0], f32[0,0], f32[3,0,1], "
        "f32[0,6]) {\n"
        "  %2 = sum[axes=[0]] %0 : f32[3]\n"
        "  %3 = transpose[perm=[1,0]] %0 : f32[3,0]\n"
        "  %4 = take[axis=1] %0, %1 : f32[0,0]\n"
        "  %5 = reshape[shape=[3,0,1]] %0 : f32[3,0,1]\n"
        "  %6 = concatenate[axis=1] %0, %0 : f32[0,6]\n"
        "  return %2, %3, %4, %5, %6\n"
        "}\n");
  write(dir + "/large_dims.drx",
        "program @large (%0: f32[0,9007199254740992], %1: f32[9007199254740992]) -> "
        "(f32[9007199254740992,0], f32[1,9007199254740992]) {\n"
        "  %2 = transpose[perm=[1,0]] %0 : f32[9007199254740992,0]\n"
        "  %3 = reshape[shape=[1,9007199254740992]] %1 : f32[1,9007199254740992]\n"
        "  return %2, %3\n"
        "}\n");
  write(dir + "/placements.drx",
        "program @\"weird name\" [clients=8, groups=2] (%0: f32[8,3]@clients) -> "
        "(f32[8,3]@clients) {\n  return %0\n}\n");
}

// Checkpoints with every tree kind and dtype, plus one cut short so the fuzzer also starts
// inside the error paths.
void checkpoint_seeds(const std::string& dir) {
  namespace dd = drx::data;
  dd::Checkpoint empty;
  empty.params = drx::Tree::list({});
  empty.state = drx::Tree::list({});
  write(dir + "/empty.ckpt", dd::encode_checkpoint(empty));

  dd::Checkpoint c;
  c.config = {{"clients", "100"}, {"lr", "0.1"}, {"server-opt", "fedadam"}};
  c.round = 3;
  c.params =
      drx::Tree::dict({{"b", drx::Tree(Array::from_vector<float>({0.5f, -1.0f, 2.0f}, {3}))},
                       {"w", drx::Tree(Array::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}))}});
  c.state = drx::Tree::list(
      {drx::Tree::dict({{"m", drx::Tree(Array::from_vector<double>({0.1, 0.2, 0.3}, {3}))}}),
       drx::Tree(Array::scalar<int64_t>(7))});
  const double nan = std::numeric_limits<double>::quiet_NaN();
  c.history = {{1, 2.3, nan, nan, 0.5}, {2, 1.9, 1.7, 0.41, 1.1}, {3, 1.5, nan, nan, 1.6}};
  const std::string typical = dd::encode_checkpoint(c);
  write(dir + "/typical.ckpt", typical);
  write(dir + "/truncated.ckpt", typical.substr(0, typical.size() / 2));

  dd::Checkpoint dtypes;
  dtypes.config = {{"partition", "dirichlet"}};
  dtypes.round = 650;
  dtypes.params = drx::Tree::list(
      {drx::Tree(Array::from_vector<int32_t>({-1, 0, 1}, {3, 1})),
       drx::Tree(Array::from_vector<bool>({true, false}, {2})), drx::Tree(Array(drx::f32, {0, 3})),
       drx::Tree::list({drx::Tree::list({drx::Tree(Array::scalar<double>(1e300))})})});
  dtypes.state = drx::Tree::dict({});
  write(dir + "/dtypes.ckpt", dd::encode_checkpoint(dtypes));
}

std::string be32(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
          static_cast<char>(v)};
}

void idx_seeds(const std::string& dir) {
  std::string images = be32(0x00000803) + be32(2) + be32(3) + be32(3);
  for (int i = 0; i < 18; ++i) images += static_cast<char>(i * 15);
  std::string labels = be32(0x00000801) + be32(4) + std::string("\x00\x09\x03\x05", 4);
  write(dir + "/images.idx", images);
  write(dir + "/labels.idx", labels);
  write_gz(dir + "/images.idx.gz", images);
  write_gz(dir + "/labels.idx.gz", labels);
}

// Small self-checking StableHLO modules in the forms JAX prints (module, @main calling
// @inputs and @expected, check.expect_* custom calls), some ops in the pretty form and some in
// the generic one, so the fuzzer starts from text that gets through the parser to the
// importer's op rules, the executor and apply_check. Each must import, run and pass.
void stablehlo_seeds(const std::string& dir) {
  const std::vector<std::pair<std::string, std::string>> modules = {
      {"add_compare_select",
       "module @jit_main attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} "
       "{\n"
       "  func.func public @main() -> (tensor<2x2xf32> {jax.result_info = \"\", "
       "mhlo.layout_mode = \"default\"}) {\n"
       "    %0:2 = call @inputs() : () -> (tensor<2x2xf32>, tensor<2x2xf32>)\n"
       "    %1 = call @expected() : () -> tensor<2x2xf32>\n"
       "    %2 = stablehlo.add %0#0, %0#1 : tensor<2x2xf32>\n"
       "    %3 = stablehlo.compare  GT, %0#0, %0#1,  FLOAT : (tensor<2x2xf32>, tensor<2x2xf32>) "
       "-> tensor<2x2xi1>\n"
       "    %4 = stablehlo.select %3, %2, %0#1 : tensor<2x2xi1>, tensor<2x2xf32>\n"
       "    stablehlo.custom_call @check.expect_close(%4, %1) {has_side_effect = true} : "
       "(tensor<2x2xf32>, tensor<2x2xf32>) -> ()\n"
       "    return %4 : tensor<2x2xf32>\n"
       "  }\n"
       "  func.func private @inputs() -> (tensor<2x2xf32> {mhlo.layout_mode = \"default\"}, "
       "tensor<2x2xf32> {mhlo.layout_mode = \"default\"}) {\n"
       "    %cst = stablehlo.constant dense<[[1.5, -2.0], [0.0, 3.25]]> : tensor<2x2xf32>\n"
       "    %cst_0 = stablehlo.constant dense<[[0.5, 1.0], [0.0, -1.0]]> : tensor<2x2xf32>\n"
       "    return %cst, %cst_0 : tensor<2x2xf32>, tensor<2x2xf32>\n"
       "  }\n"
       "  func.func private @expected() -> (tensor<2x2xf32> {mhlo.layout_mode = \"default\"}) {\n"
       "    %cst = stablehlo.constant dense<[[2.0, 1.0], [0.0, 2.25]]> : tensor<2x2xf32>\n"
       "    return %cst : tensor<2x2xf32>\n"
       "  }\n"
       "}\n"},
      // The generic form throughout, with a splat and a hex constant.
      {"generic_multiply_convert",
       "module @jit_main {\n"
       "  \"func.func\"() <{function_type = () -> tensor<3xf32>, res_attrs = [{jax.result_info = "
       "\"\"}], sym_name = \"main\", sym_visibility = \"public\"}> ({\n"
       "    %c = \"stablehlo.constant\"() <{value = dense<[1, -2, 3]> : tensor<3xi32>}> : () -> "
       "tensor<3xi32>\n"
       "    %c_0 = \"stablehlo.constant\"() <{value = dense<2> : tensor<3xi32>}> : () -> "
       "tensor<3xi32>\n"
       "    %0 = \"stablehlo.multiply\"(%c, %c_0) : (tensor<3xi32>, tensor<3xi32>) -> "
       "tensor<3xi32>\n"
       "    %1 = \"stablehlo.compare\"(%0, %c_0) <{comparison_direction = "
       "#stablehlo<comparison_direction LT>, compare_type = #stablehlo<comparison_type SIGNED>}> "
       ": (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi1>\n"
       "    %2 = \"stablehlo.select\"(%1, %c_0, %0) : (tensor<3xi1>, tensor<3xi32>, "
       "tensor<3xi32>) -> tensor<3xi32>\n"
       "    %3 = \"stablehlo.convert\"(%2) : (tensor<3xi32>) -> tensor<3xf32>\n"
       "    %cst = \"stablehlo.constant\"() <{value = dense<\"0x00000040000000400000C040\"> : "
       "tensor<3xf32>}> : () -> tensor<3xf32>\n"
       "    \"stablehlo.custom_call\"(%3, %cst) {call_target_name = \"check.expect_eq\", "
       "has_side_effect = true} : (tensor<3xf32>, tensor<3xf32>) -> ()\n"
       "    \"func.return\"(%3) : (tensor<3xf32>) -> ()\n"
       "  }) : () -> ()\n"
       "}\n"},
      // reduce with a variadic compare-and-select body, as jnp.argmax lowers (with i32 indices:
      // drx has no ui64).
      {"argmax_reduce",
       "module @jit_main attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} "
       "{\n"
       "  func.func public @main() -> (tensor<i32> {jax.result_info = \"\"}) {\n"
       "    %cst = stablehlo.constant dense<[-3.5, 7.25, 2.0, 7.25, 0xFF800000]> : "
       "tensor<5xf32>\n"
       "    %c = stablehlo.constant dense<1> : tensor<i32>\n"
       "    %0 = call @argmax(%cst) : (tensor<5xf32>) -> tensor<i32>\n"
       "    stablehlo.custom_call @check.expect_eq(%0, %c) {has_side_effect = true} : "
       "(tensor<i32>, tensor<i32>) -> ()\n"
       "    return %0 : tensor<i32>\n"
       "  }\n"
       "  func.func private @argmax(%arg0: tensor<5xf32>) -> tensor<i32> {\n"
       "    %0 = stablehlo.iota dim = 0 : tensor<5xi32>\n"
       "    %cst = stablehlo.constant dense<0xFF800000> : tensor<f32>\n"
       "    %c = stablehlo.constant dense<0> : tensor<i32>\n"
       "    %1:2 = stablehlo.reduce(%arg0 init: %cst), (%0 init: %c) across dimensions = [0] : "
       "(tensor<5xf32>, tensor<5xi32>, tensor<f32>, tensor<i32>) -> (tensor<f32>, "
       "tensor<i32>)\n"
       "     reducer(%arg1: tensor<f32>, %arg3: tensor<f32>) (%arg2: tensor<i32>, %arg4: "
       "tensor<i32>)  {\n"
       "      %2 = stablehlo.compare  GT, %arg1, %arg3,  FLOAT : (tensor<f32>, tensor<f32>) -> "
       "tensor<i1>\n"
       "      %3 = stablehlo.compare  NE, %arg1, %arg1,  FLOAT : (tensor<f32>, tensor<f32>) -> "
       "tensor<i1>\n"
       "      %4 = stablehlo.or %2, %3 : tensor<i1>\n"
       "      %5 = stablehlo.compare  EQ, %arg1, %arg3,  FLOAT : (tensor<f32>, tensor<f32>) -> "
       "tensor<i1>\n"
       "      %6 = stablehlo.compare  LT, %arg2, %arg4,  SIGNED : (tensor<i32>, tensor<i32>) "
       "-> tensor<i1>\n"
       "      %7 = stablehlo.and %5, %6 : tensor<i1>\n"
       "      %8 = stablehlo.or %4, %7 : tensor<i1>\n"
       "      %9 = stablehlo.select %4, %arg1, %arg3 : tensor<i1>, tensor<f32>\n"
       "      %10 = stablehlo.select %8, %arg2, %arg4 : tensor<i1>, tensor<i32>\n"
       "      stablehlo.return %9, %10 : tensor<f32>, tensor<i32>\n"
       "    }\n"
       "    return %1#1 : tensor<i32>\n"
       "  }\n"
       "}\n"},
      // A sum in the generic form and a max in the `applies` form.
      {"reduce_sum_max",
       "module @jit_main {\n"
       "  func.func public @main() -> (tensor<2xi32>, tensor<3xi32>) {\n"
       "    %c = stablehlo.constant dense<[[1, 2, 3], [-4, 5, -6]]> : tensor<2x3xi32>\n"
       "    %c_0 = stablehlo.constant dense<0> : tensor<i32>\n"
       "    %c_1 = stablehlo.constant dense<-2147483648> : tensor<i32>\n"
       "    %0 = \"stablehlo.reduce\"(%c, %c_0) <{dimensions = array<i64: 1>}> ({\n"
       "    ^bb0(%lhs0: tensor<i32>, %rhs0: tensor<i32>):\n"
       "      %r = \"stablehlo.add\"(%lhs0, %rhs0) : (tensor<i32>, tensor<i32>) -> tensor<i32>\n"
       "      \"stablehlo.return\"(%r) : (tensor<i32>) -> ()\n"
       "    }) : (tensor<2x3xi32>, tensor<i32>) -> tensor<2xi32>\n"
       "    %1 = stablehlo.reduce(%c init: %c_1) applies stablehlo.maximum across dimensions = "
       "[0] : (tensor<2x3xi32>, tensor<i32>) -> tensor<3xi32>\n"
       "    %c_2 = stablehlo.constant dense<[6, -5]> : tensor<2xi32>\n"
       "    %c_3 = stablehlo.constant dense<[1, 5, 3]> : tensor<3xi32>\n"
       "    stablehlo.custom_call @check.expect_eq(%0, %c_2) {has_side_effect = true} : "
       "(tensor<2xi32>, tensor<2xi32>) -> ()\n"
       "    stablehlo.custom_call @check.expect_eq(%1, %c_3) {has_side_effect = true} : "
       "(tensor<3xi32>, tensor<3xi32>) -> ()\n"
       "    return %0, %1 : tensor<2xi32>, tensor<3xi32>\n"
       "  }\n"
       "}\n"},
      // Batched in the pretty form, plain in the generic one.
      {"dot_general",
       "module @jit_main {\n"
       "  func.func public @main() -> tensor<2x2x1xf32> {\n"
       "    %a = stablehlo.constant dense<[[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], [[1.0, 0.0, "
       "0.0], [0.0, 1.0, 0.0]]]> : tensor<2x2x3xf32>\n"
       "    %b = stablehlo.constant dense<[[[1.0], [1.0], [1.0]], [[2.0], [3.0], [4.0]]]> : "
       "tensor<2x3x1xf32>\n"
       "    %0 = stablehlo.dot_general %a, %b, batching_dims = [0] x [0], contracting_dims = [2] "
       "x [1], precision = [DEFAULT, DEFAULT] : (tensor<2x2x3xf32>, tensor<2x3x1xf32>) -> "
       "tensor<2x2x1xf32>\n"
       "    %cst = stablehlo.constant dense<[[[6.0], [15.0]], [[2.0], [3.0]]]> : "
       "tensor<2x2x1xf32>\n"
       "    stablehlo.custom_call @check.expect_close(%0, %cst) {has_side_effect = true} : "
       "(tensor<2x2x1xf32>, tensor<2x2x1xf32>) -> ()\n"
       "    %c = stablehlo.constant dense<[[1, 2], [3, 4]]> : tensor<2x2xi32>\n"
       "    %1 = \"stablehlo.dot_general\"(%c, %c) <{dot_dimension_numbers = "
       "#stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>}> : "
       "(tensor<2x2xi32>, tensor<2x2xi32>) -> tensor<2x2xi32>\n"
       "    %c_0 = stablehlo.constant dense<[[7, 10], [15, 22]]> : tensor<2x2xi32>\n"
       "    stablehlo.custom_call @check.expect_eq(%1, %c_0) {has_side_effect = true} : "
       "(tensor<2x2xi32>, tensor<2x2xi32>) -> ()\n"
       "    return %0 : tensor<2x2x1xf32>\n"
       "  }\n"
       "}\n"},
      // gather as JAX prints it (generic), and dynamic_slice with an index it must clamp.
      {"gather_dynamic_slice",
       "module @jit_main {\n"
       "  func.func public @main() -> (tensor<2x3xf32>, tensor<2xf32>) {\n"
       "    %a = stablehlo.constant dense<[[0.0, 1.0, 2.0], [3.0, 4.0, 5.0], [6.0, 7.0, 8.0], "
       "[9.0, 10.0, 11.0], [12.0, 13.0, 14.0]]> : tensor<5x3xf32>\n"
       "    %i = stablehlo.constant dense<[[4], [1]]> : tensor<2x1xi64>\n"
       "    %0 = \"stablehlo.gather\"(%a, %i) <{dimension_numbers = #stablehlo.gather<offset_dims "
       "= [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, "
       "slice_sizes = array<i64: 1, 3>}> : (tensor<5x3xf32>, tensor<2x1xi64>) -> "
       "tensor<2x3xf32>\n"
       "    %cst = stablehlo.constant dense<[[12.0, 13.0, 14.0], [3.0, 4.0, 5.0]]> : "
       "tensor<2x3xf32>\n"
       "    stablehlo.custom_call @check.expect_eq(%0, %cst) {has_side_effect = true} : "
       "(tensor<2x3xf32>, tensor<2x3xf32>) -> ()\n"
       "    %r = stablehlo.constant dense<7> : tensor<i64>\n"
       "    %c = stablehlo.constant dense<-1> : tensor<i64>\n"
       "    %1 = stablehlo.dynamic_slice %a, %r, %c, sizes = [1, 2] : (tensor<5x3xf32>, "
       "tensor<i64>, tensor<i64>) -> tensor<1x2xf32>\n"
       "    %2 = stablehlo.reshape %1 : (tensor<1x2xf32>) -> tensor<2xf32>\n"
       "    %cst_0 = stablehlo.constant dense<[12.0, 13.0]> : tensor<2xf32>\n"
       "    stablehlo.custom_call @check.expect_eq(%2, %cst_0) {has_side_effect = true} : "
       "(tensor<2xf32>, tensor<2xf32>) -> ()\n"
       "    return %0, %2 : tensor<2x3xf32>, tensor<2xf32>\n"
       "  }\n"
       "}\n"},
      {"iota_slice_pad",
       "module @jit_main {\n"
       "  func.func public @main() -> tensor<3x4xf32> {\n"
       "    %0 = stablehlo.iota dim = 1 : tensor<2x4xf32>\n"
       "    %1 = stablehlo.slice %0 [0:2, 1:4:2] : (tensor<2x4xf32>) -> tensor<2x2xf32>\n"
       "    %cst = stablehlo.constant dense<9.000000e+00> : tensor<f32>\n"
       "    %2 = stablehlo.pad %1, %cst, low = [1, 0], high = [0, 1], interior = [0, 1] : "
       "(tensor<2x2xf32>, tensor<f32>) -> tensor<3x4xf32>\n"
       "    %cst_0 = stablehlo.constant dense<[[9.0, 9.0, 9.0, 9.0], [1.0, 9.0, 3.0, 9.0], [1.0, "
       "9.0, 3.0, 9.0]]> : tensor<3x4xf32>\n"
       "    stablehlo.custom_call @check.expect_eq(%2, %cst_0) {has_side_effect = true} : "
       "(tensor<3x4xf32>, tensor<3x4xf32>) -> ()\n"
       "    %3 = \"stablehlo.pad\"(%1, %cst) <{edge_padding_high = array<i64: 0, -1>, "
       "edge_padding_low = array<i64: -1, 0>, interior_padding = array<i64: 0, 0>}> : "
       "(tensor<2x2xf32>, tensor<f32>) -> tensor<1x1xf32>\n"
       "    %cst_1 = stablehlo.constant dense<1.0> : tensor<1x1xf32>\n"
       "    stablehlo.custom_call @check.expect_eq(%3, %cst_1) {has_side_effect = true} : "
       "(tensor<1x1xf32>, tensor<1x1xf32>) -> ()\n"
       "    return %2 : tensor<3x4xf32>\n"
       "  }\n"
       "}\n"},
      {"convert_broadcast_transpose",
       "module @jit_main {\n"
       "  func.func public @main() -> tensor<6x2xf64> {\n"
       "    %0 = stablehlo.iota dim = 0 : tensor<3xi32>\n"
       "    %1 = stablehlo.convert %0 : (tensor<3xi32>) -> tensor<3xf64>\n"
       "    %2 = stablehlo.broadcast_in_dim %1, dims = [1] : (tensor<3xf64>) -> tensor<2x3xf64>\n"
       "    %3 = stablehlo.transpose %2, dims = [1, 0] : (tensor<2x3xf64>) -> tensor<3x2xf64>\n"
       "    %4 = stablehlo.concatenate %3, %3, dim = 0 : (tensor<3x2xf64>, tensor<3x2xf64>) -> "
       "tensor<6x2xf64>\n"
       "    %cst = stablehlo.constant dense<[[0.0, 0.0], [1.0, 1.0], [2.0, 2.0], [0.0, 0.0], "
       "[1.0, 1.0], [2.0, 2.0]]> : tensor<6x2xf64>\n"
       "    stablehlo.custom_call @check.expect_almost_eq(%4, %cst) {has_side_effect = true} : "
       "(tensor<6x2xf64>, tensor<6x2xf64>) -> ()\n"
       "    %5 = stablehlo.convert %4 : (tensor<6x2xf64>) -> tensor<6x2xui8>\n"
       "    %6 = stablehlo.convert %5 : (tensor<6x2xui8>) -> tensor<6x2xi1>\n"
       "    %c = stablehlo.constant dense<[[false, false], [true, true], [true, true], [false, "
       "false], [true, true], [true, true]]> : tensor<6x2xi1>\n"
       "    stablehlo.custom_call @check.expect_eq(%6, %c) {has_side_effect = true} : "
       "(tensor<6x2xi1>, tensor<6x2xi1>) -> ()\n"
       "    return %4 : tensor<6x2xf64>\n"
       "  }\n"
       "}\n"},
      // A while loop: imported, and run here, but never run by the fuzz target (its trip
      // count is unknown until it runs).
      {"while_loop",
       "module @jit_main {\n"
       "  func.func public @main() -> tensor<f32> {\n"
       "    %c = stablehlo.constant dense<0> : tensor<i32>\n"
       "    %c_0 = stablehlo.constant dense<1> : tensor<i32>\n"
       "    %c_1 = stablehlo.constant dense<3> : tensor<i32>\n"
       "    %cst = stablehlo.constant dense<1.5> : tensor<f32>\n"
       "    %0:2 = stablehlo.while(%iterArg = %c, %iterArg_0 = %cst) : tensor<i32>, tensor<f32>\n"
       "     cond {\n"
       "      %1 = stablehlo.compare  LT, %iterArg, %c_1,  SIGNED : (tensor<i32>, tensor<i32>) "
       "-> tensor<i1>\n"
       "      stablehlo.return %1 : tensor<i1>\n"
       "    } do {\n"
       "      %1 = stablehlo.add %iterArg, %c_0 : tensor<i32>\n"
       "      %2 = stablehlo.add %iterArg_0, %iterArg_0 : tensor<f32>\n"
       "      stablehlo.return %1, %2 : tensor<i32>, tensor<f32>\n"
       "    }\n"
       "    %cst_2 = stablehlo.constant dense<1.200000e+01> : tensor<f32>\n"
       "    stablehlo.custom_call @check.expect_close(%0#1, %cst_2) {has_side_effect = true} : "
       "(tensor<f32>, tensor<f32>) -> ()\n"
       "    return %0#1 : tensor<f32>\n"
       "  }\n"
       "}\n"},
  };
  namespace sh = drx::stablehlo;
  for (const auto& [name, text] : modules) {
    const sh::ImportedModule m = sh::import_module(sh::parse_mlir(text));
    if (m.checks.empty()) throw drx::Error("make_seeds: " + name + " has no check");
    const std::vector<Array> out = drx::compile(m.program).run({});
    for (const sh::Check& c : m.checks) {
      const std::string why =
          sh::apply_check(c, out.at(m.num_results + c.actual), out.at(m.num_results + c.expected));
      if (!why.empty()) throw drx::Error("make_seeds: " + name + ": " + why);
    }
    write(dir + "/" + name + ".mlir", text);
  }
}

}  // namespace

int main(int argc, char** argv) {
  // The committed corpora by default; stablehlo only when named (scripts/fuzz.sh).
  const std::vector<std::string> all = {"program_text", "checkpoint", "idx", "stablehlo"};
  std::vector<std::string> targets(argv + std::min(argc, 2), argv + argc);
  if (argc < 2 || std::any_of(targets.begin(), targets.end(), [&](const std::string& t) {
        return std::find(all.begin(), all.end(), t) == all.end();
      })) {
    std::cerr << "usage: make_seeds CORPUS_DIR [TARGET...]   (writes CORPUS_DIR/TARGET for each of "
                 "program_text, checkpoint, idx, stablehlo; default: the first three)\n";
    return 2;
  }
  if (targets.empty()) targets.assign(all.begin(), all.end() - 1);
  const std::string root = argv[1];
  try {
    for (const std::string& t : targets) {
      const std::string dir = root + "/" + t;
      std::filesystem::create_directories(dir);
      if (t == "program_text") program_seeds(dir);
      if (t == "checkpoint") checkpoint_seeds(dir);
      if (t == "idx") idx_seeds(dir);
      if (t == "stablehlo") stablehlo_seeds(dir);
    }
  } catch (const drx::Error& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  return 0;
}
