// The MLIR text parser (drx/stablehlo/mlir_ast.h): every StableHLO module of
// the conformance corpus parses, to the structure its text describes; pretty
// and generic forms of an op give the same Operation; malformed text is a
// drx::Error naming the line; mutated text never crashes the parser.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>

#include "drx/stablehlo/mlir_ast.h"
#include "tests/test_util.h"

namespace drx::testing {
namespace {

using stablehlo::Attribute;
using stablehlo::Function;
using stablehlo::Module;
using stablehlo::Operation;
using stablehlo::parse_mlir;
using stablehlo::TensorType;
using Kind = Attribute::Kind;

const std::string kCorpus = std::string(DRX_SOURCE_DIR) + "/../shared/stablehlo-testdata/modules";

#define REQUIRE_CORPUS()                                         \
  if (!std::filesystem::is_directory(kCorpus))                   \
  GTEST_SKIP() << "StableHLO test data not found at " << kCorpus \
               << " (../shared/stablehlo-testdata); skipping"

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> corpus_files() {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(kCorpus))
    if (e.path().extension() == ".mlir") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

Module parse_corpus(const std::string& name) { return parse_mlir(read_file(kCorpus + "/" + name)); }

const Function& function(const Module& m, const std::string& name) {
  for (const Function& f : m.functions)
    if (f.name == name) return f;
  throw std::runtime_error("no function @" + name);
}

const Operation& first_op(const Function& f, const std::string& name) {
  for (const Operation& op : f.body.blocks.at(0).ops)
    if (op.name == name) return op;
  throw std::runtime_error("no " + name + " in @" + f.name);
}

const Attribute& attr(const Operation& op, const std::string& name) {
  const Attribute* a = stablehlo::find_attribute(op.attributes, name);
  if (a == nullptr) throw std::runtime_error(op.name + " has no attribute " + name);
  return *a;
}

const Attribute& field(const Attribute& a, const std::string& name) {
  const Attribute* f = stablehlo::find_attribute(a.dict, name);
  if (f == nullptr) throw std::runtime_error(a.text + " has no field " + name);
  return *f;
}

std::vector<int64_t> ints(const Attribute& a) {
  std::vector<int64_t> v;
  for (const Attribute& e : a.list) v.push_back(e.i);
  return v;
}

std::vector<std::string> names(const Function& f) {
  std::vector<std::string> v;
  for (const Operation& op : f.body.blocks.at(0).ops) v.push_back(op.name);
  return v;
}

TensorType tt(std::vector<int64_t> shape, std::string e) {
  return {std::move(shape), std::move(e)};
}

// ---- the corpus -------------------------------------------------------------

TEST(MlirParse, EveryCorpusModuleParses) {
  REQUIRE_CORPUS();
  int parsed = 0, ops = 0;
  std::vector<std::string> failures;
  const std::vector<std::string> files = corpus_files();
  for (const std::string& path : files) {
    try {
      Module m = parse_mlir(read_file(path));
      ++parsed;
      EXPECT_EQ(m.name, "jit_main") << path;
      const Function& main = function(m, "main");
      EXPECT_TRUE(main.is_public) << path;
      for (const Function& f : m.functions) {
        ASSERT_EQ(f.body.blocks.size(), 1u) << path;
        EXPECT_EQ(f.body.blocks[0].arguments, f.arguments) << path;
        ops += static_cast<int>(f.body.blocks[0].ops.size());
        EXPECT_EQ(f.body.blocks[0].ops.back().name, "func.return") << path << " @" << f.name;
      }
    } catch (const std::exception& e) {
      failures.push_back(path + ": " + e.what());
    }
  }
  std::cout << "[ MlirParse ] parsed " << parsed << " of " << files.size() << " corpus modules ("
            << ops << " top-level ops)\n";
  for (size_t k = 0; k < failures.size() && k < 10; ++k) ADD_FAILURE() << failures[k];
  EXPECT_EQ(parsed, 788);
  EXPECT_EQ(files.size(), 788u);
}

TEST(MlirParse, AddModuleHasItsFunctionsOpsAndTypes) {
  REQUIRE_CORPUS();
  Module m = parse_corpus("add_any_float32_2_float32_2.mlir");
  EXPECT_EQ(m.name, "jit_main");
  ASSERT_EQ(m.attributes.size(), 2u);
  EXPECT_EQ(m.attributes[0].first, "mhlo.num_partitions");
  EXPECT_EQ(m.attributes[0].second.kind, Kind::integer);
  EXPECT_EQ(m.attributes[0].second.i, 1);
  EXPECT_EQ(m.attributes[0].second.type.element, "i32");
  ASSERT_EQ(m.functions.size(), 3u);
  const TensorType t2 = tt({2}, "f32");

  const Function& main = m.functions[0];
  EXPECT_EQ(main.name, "main");
  EXPECT_TRUE(main.is_public);
  EXPECT_FALSE(m.functions[1].is_public);
  EXPECT_EQ(main.line, 7);
  EXPECT_TRUE(main.arguments.empty());
  ASSERT_EQ(main.results, std::vector<TensorType>{t2});
  EXPECT_EQ(stablehlo::find_attribute(main.result_attributes.at(0), "jax.result_info")->text, "");
  EXPECT_EQ(names(main), (std::vector<std::string>{"func.call", "func.call", "stablehlo.add",
                                                   "stablehlo.custom_call", "func.return"}));
  const std::vector<Operation>& ops = main.body.blocks[0].ops;
  EXPECT_EQ(ops[0].results, (std::vector<std::string>{"%0#0", "%0#1"}));
  EXPECT_EQ(attr(ops[0], "callee").kind, Kind::symbol);
  EXPECT_EQ(attr(ops[0], "callee").text, "inputs");
  EXPECT_TRUE(ops[0].operands.empty());
  EXPECT_EQ(ops[0].result_types, (std::vector<TensorType>{t2, t2}));
  EXPECT_EQ(ops[1].results, std::vector<std::string>{"%1"});
  EXPECT_EQ(ops[2].operands, (std::vector<std::string>{"%0#0", "%0#1"}));
  EXPECT_EQ(ops[2].results, std::vector<std::string>{"%2"});
  EXPECT_EQ(ops[2].operand_types, (std::vector<TensorType>{t2, t2}));
  EXPECT_EQ(ops[2].result_types, std::vector<TensorType>{t2});
  EXPECT_EQ(ops[2].line, 10);
  EXPECT_EQ(attr(ops[3], "call_target_name").text, "check.expect_close");
  EXPECT_TRUE(attr(ops[3], "has_side_effect").b);
  EXPECT_EQ(ops[3].operands, (std::vector<std::string>{"%2", "%1"}));
  EXPECT_TRUE(ops[3].results.empty() && ops[3].result_types.empty());
  EXPECT_EQ(ops[4].operands, std::vector<std::string>{"%2"});
  EXPECT_EQ(ops[4].operand_types, std::vector<TensorType>{t2});

  const Operation& cst = m.functions[1].body.blocks[0].ops[0];
  EXPECT_EQ(cst.name, "stablehlo.constant");
  EXPECT_EQ(cst.results, std::vector<std::string>{"%cst"});
  const Attribute& value = attr(cst, "value");
  EXPECT_EQ(value.kind, Kind::dense);
  EXPECT_EQ(value.type, t2);
  EXPECT_FALSE(value.splat);
  EXPECT_EQ(value.elements, (std::vector<std::string>{"-1.14770842", "-0.810447216"}));
  EXPECT_EQ(cst.result_types, std::vector<TensorType>{t2});
}

TEST(MlirParse, ArgmaxReduceHasTwoInputsTwoInitsAndAFourArgumentBody) {
  REQUIRE_CORPUS();
  Module m = parse_corpus("argmax_float32_15.mlir");
  const Function& f = function(m, "argmax");
  EXPECT_EQ(f.arguments.at(0).first, "%arg0");
  EXPECT_EQ(f.arguments.at(0).second, tt({15}, "f32"));
  const Attribute& ninf = attr(f.body.blocks[0].ops[1], "value");
  EXPECT_EQ(ninf.elements, std::vector<std::string>{"0xFF800000"});
  EXPECT_TRUE(ninf.splat);
  EXPECT_EQ(ninf.type, tt({}, "f32"));
  EXPECT_EQ(attr(f.body.blocks[0].ops[0], "iota_dimension").i, 0);

  const Operation& r = first_op(f, "stablehlo.reduce");
  EXPECT_EQ(r.operands, (std::vector<std::string>{"%arg0", "%0", "%cst", "%c"}));
  EXPECT_EQ(r.results, (std::vector<std::string>{"%1#0", "%1#1"}));
  EXPECT_EQ(r.operand_types, (std::vector<TensorType>{tt({15}, "f32"), tt({15}, "ui64"),
                                                      tt({}, "f32"), tt({}, "ui64")}));
  EXPECT_EQ(r.result_types, (std::vector<TensorType>{tt({}, "f32"), tt({}, "ui64")}));
  EXPECT_EQ(ints(attr(r, "dimensions")), std::vector<int64_t>{0});
  EXPECT_EQ(attr(r, "dimensions").type.element, "i64");
  ASSERT_EQ(r.regions.size(), 1u);
  ASSERT_EQ(r.regions[0].blocks.size(), 1u);
  const auto& block = r.regions[0].blocks[0];
  ASSERT_EQ(block.arguments.size(), 4u);
  // reducer(%arg1, %arg3) (%arg2, %arg4): the accumulators first, then the inputs.
  EXPECT_EQ(block.arguments[0].first, "%arg1");
  EXPECT_EQ(block.arguments[1].first, "%arg2");
  EXPECT_EQ(block.arguments[2].first, "%arg3");
  EXPECT_EQ(block.arguments[3].first, "%arg4");
  EXPECT_EQ(block.arguments[1].second, tt({}, "ui64"));
  ASSERT_EQ(block.ops.size(), 10u);
  EXPECT_EQ(attr(block.ops[0], "comparison_direction").text, "GT");
  EXPECT_EQ(attr(block.ops[0], "compare_type").text, "FLOAT");
  EXPECT_EQ(attr(block.ops[4], "compare_type").text, "UNSIGNED");
  EXPECT_EQ(block.ops[7].operand_types,
            (std::vector<TensorType>{tt({}, "i1"), tt({}, "f32"), tt({}, "f32")}));
  EXPECT_EQ(block.ops.back().name, "stablehlo.return");
  EXPECT_EQ(block.ops.back().operands, (std::vector<std::string>{"%9", "%10"}));
  EXPECT_EQ(first_op(f, "func.return").operands, std::vector<std::string>{"%1#1"});
}

TEST(MlirParse, ReduceAppliesFormBecomesARegionWithOneOp) {
  REQUIRE_CORPUS();
  const Module m = parse_corpus("reduce_int32_4_6_int32_4_6.mlir");
  const Operation& r = first_op(m.functions[0], "stablehlo.reduce");
  EXPECT_EQ(r.operands.size(), 2u);
  EXPECT_EQ(ints(attr(r, "dimensions")), std::vector<int64_t>{1});
  ASSERT_EQ(r.regions.size(), 1u);
  const auto& block = r.regions[0].blocks.at(0);
  ASSERT_EQ(block.arguments.size(), 2u);
  EXPECT_EQ(block.arguments[0], (std::pair<std::string, TensorType>{"%lhs0", tt({}, "i32")}));
  EXPECT_EQ(block.arguments[1], (std::pair<std::string, TensorType>{"%rhs0", tt({}, "i32")}));
  ASSERT_EQ(block.ops.size(), 2u);
  EXPECT_EQ(block.ops[0].name, "stablehlo.add");
  EXPECT_EQ(block.ops[0].operands, (std::vector<std::string>{"%lhs0", "%rhs0"}));
  EXPECT_EQ(block.ops[1].name, "stablehlo.return");
  EXPECT_EQ(block.ops[1].operands, block.ops[0].results);
}

TEST(MlirParse, DotGeneralGatherSliceAndHexConstants) {
  REQUIRE_CORPUS();
  const Module dm = parse_corpus("dot_general_float16_4_3_float32_3_6.mlir");
  const Operation& dot = first_op(dm.functions[0], "stablehlo.dot_general");
  const Attribute& dn = attr(dot, "dot_dimension_numbers");
  EXPECT_EQ(dn.kind, Kind::structured);
  EXPECT_EQ(dn.text, "stablehlo.dot");
  ASSERT_EQ(dn.dict.size(), 4u);
  EXPECT_EQ(dn.dict[0].first, "lhs_batching_dimensions");
  EXPECT_TRUE(field(dn, "lhs_batching_dimensions").list.empty());
  EXPECT_EQ(ints(field(dn, "lhs_contracting_dimensions")), std::vector<int64_t>{1});
  EXPECT_EQ(ints(field(dn, "rhs_contracting_dimensions")), std::vector<int64_t>{0});
  EXPECT_EQ(dot.result_types, std::vector<TensorType>{tt({4, 6}, "f32")});

  const Module gm = parse_corpus("gather_float32_10_10_10_10_int64_1_1_4_3.mlir");
  const Operation& g = first_op(gm.functions[0], "stablehlo.gather");
  EXPECT_EQ(g.operands, (std::vector<std::string>{"%0#0", "%0#1"}));
  const Attribute& gd = attr(g, "dimension_numbers");
  EXPECT_EQ(gd.kind, Kind::structured);
  EXPECT_EQ(gd.text, "stablehlo.gather");
  EXPECT_EQ(ints(field(gd, "offset_dims")), (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_TRUE(field(gd, "collapsed_slice_dims").list.empty());  // not written: filled in
  EXPECT_EQ(ints(field(gd, "start_index_map")), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(field(gd, "index_vector_dim").i, 3);
  EXPECT_EQ(ints(attr(g, "slice_sizes")), (std::vector<int64_t>{10, 2, 2, 2}));
  EXPECT_EQ(g.result_types, std::vector<TensorType>{tt({1, 10, 2, 2, 2, 1, 4}, "f32")});

  const Module sm = parse_corpus("slice_float32_5_3.mlir");
  const Operation& s = first_op(sm.functions[0], "stablehlo.slice");
  EXPECT_EQ(ints(attr(s, "start_indices")), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(ints(attr(s, "limit_indices")), (std::vector<int64_t>{5, 3}));
  EXPECT_EQ(ints(attr(s, "strides")), (std::vector<int64_t>{2, 1}));

  const Module hm = parse_corpus("abs_float32_20_20.mlir");
  const Operation& hex = function(hm, "inputs").body.blocks[0].ops[0];
  const Attribute& blob = attr(hex, "value");
  EXPECT_TRUE(blob.elements.empty());
  EXPECT_EQ(blob.hex.size(), 20u * 20u * 4u * 2u);
  EXPECT_EQ(blob.hex.substr(0, 8), "BE807B3E");
  EXPECT_EQ(blob.type, tt({20, 20}, "f32"));
}

// ---- pretty and generic forms ----------------------------------------------

void clear_lines(Operation& op) {
  op.line = 0;
  for (auto& r : op.regions)
    for (auto& b : r.blocks)
      for (auto& o : b.ops) clear_lines(o);
}

Operation only_op(const std::string& op_text) {
  Module m = parse_mlir("func.func @f() {\n" + op_text + "\n}\n");
  Operation op = m.functions.at(0).body.blocks.at(0).ops.at(0);
  clear_lines(op);
  return op;
}

std::string describe(const Attribute& a);
std::string describe(const stablehlo::AttributeList& list) {
  std::string s = "{";
  for (const auto& [k, v] : list) s += k + "=" + describe(v) + " ";
  return s + "}";
}
std::string describe(const Attribute& a) {
  std::string s = std::to_string(static_cast<int>(a.kind)) + ":" + a.text + ":" +
                  std::to_string(a.i) + ":" + a.type.element;
  if (!a.list.empty()) {
    s += "[";
    for (const Attribute& e : a.list) s += describe(e) + ",";
    s += "]";
  }
  if (!a.dict.empty()) s += describe(a.dict);
  return s;
}

void expect_same(const std::string& pretty, const std::string& generic) {
  Operation p = only_op(pretty), g = only_op(generic);
  EXPECT_EQ(p.name, g.name);
  EXPECT_EQ(describe(p.attributes), describe(g.attributes)) << pretty;
  EXPECT_TRUE(p == g) << "pretty and generic differ:\n" << pretty << "\n" << generic;
}

TEST(MlirParse, PrettyAndGenericFormsGiveTheSameOperation) {
  expect_same("%0 = stablehlo.add %a, %b : tensor<2xf32>",
              "%0 = \"stablehlo.add\"(%a, %b) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>");
  expect_same(
      "%0 = stablehlo.compare  GT, %a, %b,  FLOAT : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xi1>",
      "%0 = \"stablehlo.compare\"(%a, %b) <{compare_type = #stablehlo<comparison_type FLOAT>, "
      "comparison_direction = #stablehlo<comparison_direction GT>}> : (tensor<2xf32>, "
      "tensor<2xf32>) -> tensor<2xi1>");
  expect_same("%0 = stablehlo.iota dim = 1 : tensor<2x3xi32>",
              "%0 = \"stablehlo.iota\"() <{iota_dimension = 1 : i64}> : () -> tensor<2x3xi32>");
  expect_same("%0 = stablehlo.broadcast_in_dim %a, dims = [1] : (tensor<3xf32>) -> tensor<2x3xf32>",
              "%0 = \"stablehlo.broadcast_in_dim\"(%a) <{broadcast_dimensions = array<i64: 1>}> : "
              "(tensor<3xf32>) -> tensor<2x3xf32>");
  expect_same("%0 = stablehlo.transpose %a, dims = [1, 0] : (tensor<2x3xf32>) -> tensor<3x2xf32>",
              "%0 = \"stablehlo.transpose\"(%a) <{permutation = array<i64: 1, 0>}> : "
              "(tensor<2x3xf32>) -> tensor<3x2xf32>");
  expect_same("%0 = stablehlo.slice %a [0:2, 1:3:2] : (tensor<4x4xf32>) -> tensor<2x1xf32>",
              "%0 = \"stablehlo.slice\"(%a) <{limit_indices = array<i64: 2, 3>, start_indices = "
              "array<i64: 0, 1>, strides = array<i64: 1, 2>}> : (tensor<4x4xf32>) -> "
              "tensor<2x1xf32>");
  expect_same(
      "%0 = stablehlo.dot_general %a, %b, batching_dims = [0] x [0], contracting_dims = [2] x "
      "[1], precision = [DEFAULT, HIGHEST] : (tensor<2x3x4xf32>, tensor<2x4x5xf32>) -> "
      "tensor<2x3x5xf32>",
      "%0 = \"stablehlo.dot_general\"(%a, %b) <{dot_dimension_numbers = "
      "#stablehlo.dot<lhs_batching_dimensions = [0], rhs_batching_dimensions = [0], "
      "lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [1]>, precision_config = "
      "[#stablehlo<precision DEFAULT>, #stablehlo<precision HIGHEST>]}> : (tensor<2x3x4xf32>, "
      "tensor<2x4x5xf32>) -> tensor<2x3x5xf32>");
  expect_same(
      "%0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : "
      "(tensor<4x3xf32>, tensor<3x6xf32>) -> tensor<4x6xf32>",
      "%0 = \"stablehlo.dot_general\"(%a, %b) <{dot_dimension_numbers = "
      "#stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = "
      "[0]>}> : (tensor<4x3xf32>, tensor<3x6xf32>) -> tensor<4x6xf32>");
  expect_same(
      "%0 = stablehlo.concatenate %a, %b, dim = 0 : (tensor<1xf32>, tensor<2xf32>) -> "
      "tensor<3xf32>",
      "%0 = \"stablehlo.concatenate\"(%a, %b) <{dimension = 0 : i64}> : (tensor<1xf32>, "
      "tensor<2xf32>) -> tensor<3xf32>");
  expect_same(
      "%0 = stablehlo.pad %a, %b, low = [1, 0], high = [2, -1], interior = [1, 0] : "
      "(tensor<2x3xf32>, tensor<f32>) -> tensor<6x2xf32>",
      "%0 = \"stablehlo.pad\"(%a, %b) <{edge_padding_high = array<i64: 2, -1>, "
      "edge_padding_low = array<i64: 1, 0>, interior_padding = array<i64: 1, 0>}> : "
      "(tensor<2x3xf32>, tensor<f32>) -> tensor<6x2xf32>");
  expect_same(
      "%0 = stablehlo.dynamic_slice %a, %i, sizes = [2] : (tensor<5xf32>, tensor<i64>) "
      "-> tensor<2xf32>",
      "%0 = \"stablehlo.dynamic_slice\"(%a, %i) <{slice_sizes = array<i64: 2>}> : "
      "(tensor<5xf32>, tensor<i64>) -> tensor<2xf32>");
  expect_same("%0 = stablehlo.reverse %a, dims = [0] : tensor<3xf32>",
              "%0 = \"stablehlo.reverse\"(%a) <{dimensions = array<i64: 0>}> : (tensor<3xf32>) -> "
              "tensor<3xf32>");
  expect_same("%0 = stablehlo.select %p, %a, %b : tensor<2xi1>, tensor<2xf32>",
              "%0 = \"stablehlo.select\"(%p, %a, %b) : (tensor<2xi1>, tensor<2xf32>, "
              "tensor<2xf32>) -> tensor<2xf32>");
  expect_same("%0 = stablehlo.convert %a : (tensor<2xf32>) -> tensor<2xi32>",
              "%0 = \"stablehlo.convert\"(%a) : (tensor<2xf32>) -> tensor<2xi32>");
  expect_same("%cst = stablehlo.constant dense<[[1.5, -2.0]]> : tensor<1x2xf32>",
              "%cst = \"stablehlo.constant\"() <{value = dense<[[1.5, -2.0]]> : tensor<1x2xf32>}> "
              ": () -> tensor<1x2xf32>");
  expect_same(
      "stablehlo.custom_call @check.expect_close(%2, %1) {has_side_effect = true} : "
      "(tensor<2xf32>, tensor<2xf32>) -> ()",
      "\"stablehlo.custom_call\"(%2, %1) {call_target_name = \"check.expect_close\", "
      "has_side_effect = true} : (tensor<2xf32>, tensor<2xf32>) -> ()");
  expect_same("%0:2 = call @inputs() : () -> (tensor<2xf32>, tensor<i32>)",
              "%0:2 = \"func.call\"() <{callee = @inputs}> : () -> (tensor<2xf32>, tensor<i32>)");
  expect_same("return %a, %b : tensor<2xf32>, tensor<i32>",
              "\"func.return\"(%a, %b) : (tensor<2xf32>, tensor<i32>) -> ()");
  expect_same(
      "%0 = stablehlo.reduce(%x init: %c) applies stablehlo.add across dimensions = [1] : "
      "(tensor<2x3xf32>, tensor<f32>) -> tensor<2xf32>",
      "%0 = \"stablehlo.reduce\"(%x, %c) <{dimensions = array<i64: 1>}> ({\n"
      "^bb0(%lhs0: tensor<f32>, %rhs0: tensor<f32>):\n"
      "  %result = \"stablehlo.add\"(%lhs0, %rhs0) : (tensor<f32>, tensor<f32>) -> tensor<f32>\n"
      "  \"stablehlo.return\"(%result) : (tensor<f32>) -> ()\n"
      "}) : (tensor<2x3xf32>, tensor<f32>) -> tensor<2xf32>");
  expect_same(
      "%1:2 = stablehlo.reduce(%x init: %c), (%y init: %d) across dimensions = [0] : "
      "(tensor<3xf32>, tensor<3xi32>, tensor<f32>, tensor<i32>) -> (tensor<f32>, tensor<i32>)\n"
      " reducer(%a1: tensor<f32>, %a3: tensor<f32>) (%a2: tensor<i32>, %a4: tensor<i32>)  {\n"
      "  %5 = stablehlo.maximum %a1, %a3 : tensor<f32>\n"
      "  stablehlo.return %5, %a2 : tensor<f32>, tensor<i32>\n"
      "}",
      "%1:2 = \"stablehlo.reduce\"(%x, %y, %c, %d) <{dimensions = array<i64: 0>}> ({\n"
      "^bb0(%a1: tensor<f32>, %a2: tensor<i32>, %a3: tensor<f32>, %a4: tensor<i32>):\n"
      "  %5 = \"stablehlo.maximum\"(%a1, %a3) : (tensor<f32>, tensor<f32>) -> tensor<f32>\n"
      "  \"stablehlo.return\"(%5, %a2) : (tensor<f32>, tensor<i32>) -> ()\n"
      "}) : (tensor<3xf32>, tensor<3xi32>, tensor<f32>, tensor<i32>) -> (tensor<f32>, "
      "tensor<i32>)");
  expect_same(
      "%0:2 = stablehlo.while(%iterArg = %a, %iterArg_0 = %b) : tensor<i32>, tensor<f32>\n"
      " cond {\n"
      "  %1 = stablehlo.compare  LT, %iterArg, %n,  SIGNED : (tensor<i32>, tensor<i32>) -> "
      "tensor<i1>\n"
      "  stablehlo.return %1 : tensor<i1>\n"
      "} do {\n"
      "  %1 = stablehlo.add %iterArg_0, %iterArg_0 : tensor<f32>\n"
      "  stablehlo.return %iterArg, %1 : tensor<i32>, tensor<f32>\n"
      "}",
      "%0:2 = \"stablehlo.while\"(%a, %b) ({\n"
      "^bb0(%iterArg: tensor<i32>, %iterArg_0: tensor<f32>):\n"
      "  %1 = \"stablehlo.compare\"(%iterArg, %n) <{comparison_direction = "
      "#stablehlo<comparison_direction LT>, compare_type = #stablehlo<comparison_type SIGNED>}> "
      ": (tensor<i32>, tensor<i32>) -> tensor<i1>\n"
      "  \"stablehlo.return\"(%1) : (tensor<i1>) -> ()\n"
      "}, {\n"
      "^bb0(%iterArg: tensor<i32>, %iterArg_0: tensor<f32>):\n"
      "  %1 = \"stablehlo.add\"(%iterArg_0, %iterArg_0) : (tensor<f32>, tensor<f32>) -> "
      "tensor<f32>\n"
      "  \"stablehlo.return\"(%iterArg, %1) : (tensor<i32>, tensor<f32>) -> ()\n"
      "}) : (tensor<i32>, tensor<f32>) -> (tensor<i32>, tensor<f32>)");
  expect_same(
      "%0 = stablehlo.case(%i) ({\n  stablehlo.return %a : tensor<f32>\n}, {\n"
      "  stablehlo.return %b : tensor<f32>\n}) : (tensor<i32>) -> tensor<f32>",
      "%0 = \"stablehlo.case\"(%i) ({\n  \"stablehlo.return\"(%a) : (tensor<f32>) -> ()\n}, {\n"
      "  \"stablehlo.return\"(%b) : (tensor<f32>) -> ()\n}) : (tensor<i32>) -> tensor<f32>");
  // A structured attribute reads the same with or without its empty fields.
  expect_same(
      "%2 = \"stablehlo.gather\"(%a, %i) <{dimension_numbers = #stablehlo.gather<offset_dims = "
      "[1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, "
      "slice_sizes = array<i64: 1, 3>}> : (tensor<5x3xf32>, tensor<2x1xi64>) -> tensor<2x3xf32>",
      "%2 = \"stablehlo.gather\"(%a, %i) <{slice_sizes = array<i64: 1, 3>, dimension_numbers = "
      "#stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], operand_batching_dims = "
      "[], start_indices_batching_dims = [], start_index_map = [0], index_vector_dim = 1>}> : "
      "(tensor<5x3xf32>, tensor<2x1xi64>) -> tensor<2x3xf32>");
}

TEST(MlirParse, GenericFuncFuncMatchesThePrettyOne) {
  Module pretty = parse_mlir(
      "module @m {\n"
      "  func.func private @f(%arg0: tensor<2xf32> {mhlo.layout_mode = \"default\"}) -> "
      "(tensor<2xf32> {jax.result_info = \"\"}) {\n"
      "    return %arg0 : tensor<2xf32>\n"
      "  }\n"
      "}\n");
  Module generic = parse_mlir(
      "module @m {\n"
      "  \"func.func\"() <{arg_attrs = [{mhlo.layout_mode = \"default\"}], function_type = "
      "(tensor<2xf32>) -> tensor<2xf32>, res_attrs = [{jax.result_info = \"\"}], sym_name = "
      "\"f\", sym_visibility = \"private\"}> ({\n"
      "  ^bb0(%arg0: tensor<2xf32>):\n"
      "    \"func.return\"(%arg0) : (tensor<2xf32>) -> ()\n"
      "  }) : () -> ()\n"
      "}\n");
  ASSERT_EQ(generic.functions.size(), 1u);
  Function a = pretty.functions[0], b = generic.functions[0];
  a.line = b.line = 0;
  for (Function* f : {&a, &b})
    for (Operation& op : f->body.blocks.at(0).ops) clear_lines(op);
  EXPECT_EQ(b.name, "f");
  EXPECT_FALSE(b.is_public);
  EXPECT_TRUE(a == b);
}

TEST(MlirParse, CommentsLocationsAliasesAndShardingAttributes) {
  Module m = parse_mlir(
      "// a comment\n"
      "#loc1 = loc(\"x.py\":1:2)\n"
      "module @jit_f attributes {mhlo.num_partitions = 2 : i32} {\n"
      "  sdy.mesh @mesh = <[\"x\"=2]>\n"
      "  func.func public @main(%arg0: tensor<4xf32> {mhlo.sharding = \"{devices=[2]<=[2]}\", "
      "sdy.sharding = #sdy.sharding<@mesh, [{\"x\"}]>} loc(#loc1)) -> tensor<4xf32> {\n"
      "    %0 = stablehlo.negate %arg0 : tensor<4xf32> loc(#loc1)  // trailing\n"
      "    %1 = sdy.sharding_constraint %0 <@mesh, [{\"x\"}]> : tensor<4xf32>\n"
      "    return %1 : tensor<4xf32> loc(callsite(\"f\"(\"a.py\":3:4) at #loc1))\n"
      "  }\n"
      "}\n");
  ASSERT_EQ(m.operations.size(), 1u);
  EXPECT_EQ(m.operations[0].name, "sdy.mesh");
  EXPECT_EQ(attr(m.operations[0], "sym_name").text, "mesh");
  EXPECT_EQ(attr(m.operations[0], "mesh").text, "<[\"x\"=2]>");
  const Function& f = m.functions.at(0);
  const auto& arg_attrs = f.argument_attributes.at(0);
  EXPECT_EQ(stablehlo::find_attribute(arg_attrs, "mhlo.sharding")->text, "{devices=[2]<=[2]}");
  const Attribute* sdy = stablehlo::find_attribute(arg_attrs, "sdy.sharding");
  ASSERT_NE(sdy, nullptr);
  EXPECT_EQ(sdy->kind, Kind::other);
  EXPECT_EQ(sdy->text, "#sdy.sharding<@mesh, [{\"x\"}]>");
  EXPECT_EQ(names(f), (std::vector<std::string>{"stablehlo.negate", "sdy.sharding_constraint",
                                                "func.return"}));
  EXPECT_EQ(f.body.blocks[0].ops[1].operands, std::vector<std::string>{"%0"});
  EXPECT_EQ(attr(f.body.blocks[0].ops[1], "sharding").text, "<@mesh, [{\"x\"}]>");
}

TEST(MlirParse, DenseForms) {
  auto value = [](const std::string& dense) {
    return attr(only_op("%c = stablehlo.constant " + dense), "value");
  };
  Attribute a = value("dense<[[1, -2, 3], [4, 5, 6]]> : tensor<2x3xi32>");
  EXPECT_EQ(a.elements, (std::vector<std::string>{"1", "-2", "3", "4", "5", "6"}));
  EXPECT_FALSE(a.splat);
  a = value("dense<true> : tensor<2x2xi1>");
  EXPECT_TRUE(a.splat);
  EXPECT_EQ(a.elements, std::vector<std::string>{"true"});
  a = value("dense<0xFF80> : tensor<3xbf16>");
  EXPECT_TRUE(a.splat);
  EXPECT_EQ(a.elements, std::vector<std::string>{"0xFF80"});
  a = value("dense<\"0x0000803F00000040\"> : tensor<2xf32>");
  EXPECT_EQ(a.hex, "0000803F00000040");
  EXPECT_FALSE(a.splat);
  a = value("dense<\"0x0000803F\"> : tensor<4xf32>");  // one element's bytes: a splat
  EXPECT_TRUE(a.splat);
  a = value("dense<> : tensor<0x3xf32>");
  EXPECT_TRUE(a.elements.empty());
  EXPECT_EQ(a.type, tt({0, 3}, "f32"));
  a = value("dense<1.000000e+00> : tensor<f64>");
  EXPECT_EQ(a.elements, std::vector<std::string>{"1.000000e+00"});
  EXPECT_EQ(a.type, tt({}, "f64"));
}

// ---- errors -----------------------------------------------------------------

TEST(MlirParse, MalformedTextIsAnErrorNamingTheLine) {
  auto parse = [](const std::string& text) { return [text] { parse_mlir(text); }; };
  const std::string head = "module {\n  func.func @f(%a: tensor<2xf32>) -> tensor<2xf32> {\n";
  expect_error(parse(head + "    %0 = stablehlo.add %a, %a : tensor<2xf32>\n    return %0 : "
                            "tensor<2xf32>\n"),
               {"line 2", "unbalanced '{'", "not closed"});
  expect_error(parse(head + "    %0 = stablehlo.add %a, %a : tensor<2xq9>\n"),
               {"line 3", "unknown element type 'q9'"});
  expect_error(
      parse(head + "    %0 = stablehlo.add %a, %a\n    return %0 : tensor<2xf32>\n  }\n}\n"),
      {"line 3", "expected ':'", "stablehlo.add"});
  expect_error(parse(head + "    %0 = stablehlo.iota dimension = 0 : tensor<2xi32>\n"),
               {"line 3", "unsupported pretty syntax for stablehlo.iota: 'dimension'"});
  expect_error(parse(head + "    %0 = stablehlo.compare  GTE, %a, %a : (tensor<2xf32>, "
                            "tensor<2xf32>) -> tensor<2xi1>\n"),
               {"line 3", "unknown comparison direction 'GTE'"});
  expect_error(parse(head + "    %0 = frobnicate %a : tensor<2xf32>\n"),
               {"line 3", "unknown op 'frobnicate'"});
  expect_error(parse(head + "    %0 = \"stablehlo.add\"(%a, %a) : (tensor<2xf32>) -> "
                            "tensor<2xf32>\n  }\n}\n"),
               {"line 3", "2 operands but 1 operand types"});
  expect_error(parse(head + "    %c = stablehlo.constant dense<[1.0, 2.0, 3.0]> : tensor<2xf32>\n"),
               {"line 3", "dense list of 3 elements does not match tensor<2xf32>"});
  expect_error(parse(head + "    %c = stablehlo.constant dense<1.5> : tensor<2xi32>\n"),
               {"line 3", "floating-point dense element '1.5'"});
  expect_error(parse(head + "    %0 = stablehlo.add %a, %a : tensor<?xf32>\n"),
               {"line 3", "dynamic shapes are not supported"});
  expect_error(parse(head + "    %0 = stablehlo.abs %a : !stablehlo.token\n"),
               {"line 3", "unsupported type '!'"});
  expect_error(parse("module {\n}\n}\n"), {"line 3", "unexpected '}'"});
  expect_error(parse("module {\n  func.func @f() {\n    %0 = \"stablehlo.add\"(%a,"),
               {"line 3", "the end of the input"});
  expect_error(parse("\n\n" + std::string(5000, '[')), {"line 3"});
  expect_error(parse(head + "    %c = stablehlo.constant dense<" + std::string(5000, '[') + "1" +
                     std::string(5000, ']') + "> : tensor<1xf32>\n"),
               {"line 3", "nesting deeper than 200 levels"});
}

TEST(MlirParse, TruncatedCorpusModulesAreErrorsNamingALine) {
  REQUIRE_CORPUS();
  const std::string text = read_file(kCorpus + "/argmax_float32_15.mlir");
  for (size_t cut : {text.size() / 4, text.size() / 2, text.size() - 3}) {
    const std::string part = text.substr(0, cut);
    expect_error([&] { parse_mlir(part); }, {"stablehlo: line "});
  }
}

// ---- robustness ---------------------------------------------------------------

TEST(MlirParse, MutatedModulesParseOrThrowDrxErrorNeverCrash) {
  REQUIRE_CORPUS();
  const std::vector<std::string> files = corpus_files();
  std::mt19937 rng(20240615);
  const std::string alphabet = "%#@^:,=()[]{}<>\"x0123456789-.abcdefgtnsorl \n";
  int ok = 0, errors = 0;
  for (size_t k = 0; k < 20; ++k) {
    const std::string original = read_file(files[(k * 39) % files.size()]);
    for (int round = 0; round < 200; ++round) {
      std::string text = original;
      const int edits = 1 + static_cast<int>(rng() % 3);
      for (int e = 0; e < edits && !text.empty(); ++e) {
        const size_t at = rng() % text.size();
        const size_t len = std::min<size_t>(1 + rng() % 8, text.size() - at);
        switch (rng() % 3) {
          case 0:
            text.erase(at, len);
            break;
          case 1:
            text.insert(at, 1, alphabet[rng() % alphabet.size()]);
            break;
          default:
            text.insert(at, text.substr(at, len));
            break;
        }
      }
      try {
        parse_mlir(text);
        ++ok;
      } catch (const Error& e) {
        ++errors;
        ASSERT_EQ(std::string(e.what()).rfind("stablehlo: line ", 0), 0u) << e.what();
      }
    }
  }
  std::cout << "[ MlirParse ] 4000 mutants: " << ok << " parsed, " << errors
            << " rejected with drx::Error\n";
  EXPECT_EQ(ok + errors, 4000);
  EXPECT_GT(errors, 1000);
}

}  // namespace
}  // namespace drx::testing
