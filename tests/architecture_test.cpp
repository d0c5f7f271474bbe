// The rules that keep primitives self-contained: every registered primitive
// has a compiled kernel or is knowingly interpreter-only, every family in the
// sources is registered (the link anchors work), and a primitive's lowering
// reaches the StableHLO seam without the exporter knowing its name; nothing in
// drx/ picks a primitive by its name; one canonical tree and one client range.
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "drx/core/canonical_tree.h"
#include "drx/core/lowering.h"
#include "drx/core/primitive.h"
#include "drx/core/process_group.h"
#include "drx/exec/executable.h"
#include "tests/test_util.h"

namespace drx::testing {
namespace {

TEST(Architecture, EveryPrimitiveHasACompiledKernelOrIsListedAsInterpreterOnly) {
  const auto& only = exec::interpreter_only_primitives();
  const std::set<const Primitive*> listed(only.begin(), only.end());
  EXPECT_EQ(listed.size(), only.size()) << "a primitive is listed twice";
  for (const Primitive* p : registered_primitives()) {
    const bool compiled = exec::has_compiled_kernel(*p);
    const bool interpreted = listed.count(p) != 0;
    EXPECT_TRUE(compiled || interpreted)
        << p->name() << " has no compiled kernel and is not on exec::interpreter_only_primitives()";
    EXPECT_FALSE(compiled && interpreted)
        << p->name() << " has a compiled kernel but is listed as interpreter-only";
  }
  for (const Primitive* p : only)
    EXPECT_EQ(find_primitive(p->name()), p) << p->name() << " is listed but not registered";
}

// The families named by DRX_PRIMITIVE_FAMILY in drx/ (read from the sources,
// independently of the build's own scan).
std::set<std::string> families_in_sources() {
  std::set<std::string> found;
  const std::regex family("^DRX_PRIMITIVE_FAMILY\\(([a-z0-9_]+)\\)");
  for (const auto& entry :
       std::filesystem::recursive_directory_iterator(std::string(DRX_SOURCE_DIR) + "/drx")) {
    if (entry.path().extension() != ".cpp") continue;
    std::ifstream in(entry.path());
    std::string line;
    std::smatch m;
    while (std::getline(in, line))
      if (std::regex_search(line, m, family)) found.insert(m[1]);
  }
  return found;
}

TEST(Architecture, EveryFamilyInTheSourcesIsRegistered) {
  const std::set<std::string> in_sources = families_in_sources();
  ASSERT_GE(in_sources.size(), 10u);
  const std::vector<std::string> registered = primitive_families();
  EXPECT_EQ(std::set<std::string>(registered.begin(), registered.end()), in_sources);
}

TEST(Architecture, EveryPrimitiveStatesAtMostOneKindOfKernel) {
  for (const Primitive* p : registered_primitives())
    EXPECT_FALSE(p->scalar_kernel() && p->reduction()) << p->name();
}

// Records what a primitive's lowering emits.
class RecordingEmitter : public StableHloEmitter {
 public:
  explicit RecordingEmitter(std::vector<Type> ins, std::vector<Type> outs)
      : ins_(std::move(ins)), outs_(std::move(outs)) {}
  size_t num_operands() const override { return ins_.size(); }
  std::string operand(size_t i) const override { return "%arg" + std::to_string(i); }
  const Type& operand_type(size_t i) const override { return ins_.at(i); }
  size_t num_results() const override { return outs_.size(); }
  const Type& result_type(size_t j) const override { return outs_.at(j); }
  std::vector<std::string> emit(const std::string& op, const std::vector<std::string>& operands,
                                const MlirAttributes& attributes, const std::vector<Type>& types,
                                const std::vector<MlirRegion>&) override {
    std::ostringstream line;
    line << op;
    for (const std::string& o : operands) line << " " << o;
    for (const auto& [k, v] : attributes) line << " {" << k << " = " << v << "}";
    for (const Type& t : types) line << " : " << t.str();
    lines.push_back(line.str());
    std::vector<std::string> names;
    for (size_t j = 0; j < types.size(); ++j) names.push_back("%" + std::to_string(next_++));
    return names;
  }
  std::string constant(const Array& a) override {
    return emit("stablehlo.constant", {}, {}, {Type(a.dtype(), a.shape())}, {}).at(0);
  }
  std::vector<std::string> inline_program(const Program&,
                                          const std::vector<std::string>&) override {
    throw Error("RecordingEmitter: no programs");
  }
  void set_results(const std::vector<std::string>& names) override { results = names; }
  bool canonical_placement_reductions() const override { return true; }

  std::vector<std::string> lines, results;

 private:
  std::vector<Type> ins_, outs_;
  int next_ = 0;
};

TEST(Architecture, ALoweringRuleEmitsThroughTheStableHloSeam) {
  const Type t(f32, {2, 3});
  for (const auto& [name, op] :
       std::vector<std::pair<std::string, std::string>>{{"add", "stablehlo.add"},
                                                        {"sub", "stablehlo.subtract"},
                                                        {"mul", "stablehlo.multiply"},
                                                        {"div", "stablehlo.divide"}}) {
    RecordingEmitter em({t, t}, {t});
    primitive(name).lower(em, Params{});
    ASSERT_EQ(em.lines.size(), 1u) << name;
    EXPECT_EQ(em.lines[0], op + " %arg0 %arg1 : f32[2,3]");
    EXPECT_EQ(em.results, std::vector<std::string>{"%0"});
  }
}

// A primitive that states no lowering (registered nowhere, so the test does
// not depend on which real primitives are still to be lowered).
class UnloweredPrim : public Primitive {
 public:
  UnloweredPrim() : Primitive("unlowered_op") {}
  std::vector<Type> infer(const std::vector<Type>& ins, const Params&) const override {
    return ins;
  }
  std::vector<Array> eval(const std::vector<Array>& ins, const Params&) const override {
    return ins;
  }
};

TEST(Architecture, APrimitiveWithoutALoweringIsAClearError) {
  RecordingEmitter em({Type(f32, {2})}, {Type(f32, {2})});
  try {
    UnloweredPrim().lower(em, Params{});
    FAIL() << "expected drx::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unlowered_op: no StableHLO lowering"), std::string::npos)
        << e.what();
  }
}

// Backends and rewrites recognise a primitive by its object (drx/ops/primitives.h,
// drx/mapreduce/primitives.h) or by what it states about itself, never by its name: a renamed
// or a second primitive of one name would otherwise be silently mistaken. Only the registry and
// the program-text parser (whose input is names) look primitives up by name.
TEST(Architecture, NoPrimitiveIsChosenByName) {
  std::set<std::string> names;
  for (const Primitive* p : registered_primitives()) names.insert(p->name());
  ASSERT_TRUE(names.count("map_fn") && names.count("div") && names.count("not"));
  const std::string root = std::string(DRX_SOURCE_DIR) + "/drx/";
  const std::set<std::string> allowed = {"core/registry.h", "core/registry.cpp", "core/parse.cpp"};
  const std::regex lookup(R"(\b(find_)?primitive\()");
  // A string literal compared with == or != (either side).
  const std::regex compared(R"re((?:[!=]=\s*"([A-Za-z0-9_]+)")|(?:"([A-Za-z0-9_]+)"\s*[!=]=))re");
  std::vector<std::string> found;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(root)) {
    const std::string ext = entry.path().extension().string();
    if (ext != ".cpp" && ext != ".h") continue;
    const std::string rel = entry.path().string().substr(root.size());
    if (allowed.count(rel)) continue;
    std::ifstream in(entry.path());
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
      const std::string code = line.substr(0, line.find("//"));
      const std::string where = "drx/" + rel + ":" + std::to_string(n) + ": " + line;
      if (std::regex_search(code, lookup)) found.push_back(where);
      for (std::sregex_iterator m(code.begin(), code.end(), compared), end; m != end; ++m) {
        const std::string literal = (*m)[1].matched ? (*m)[1].str() : (*m)[2].str();
        if (names.count(literal)) found.push_back(where);
      }
    }
  }
  std::string all;
  for (const std::string& f : found) all += "\n  " + f;
  EXPECT_TRUE(found.empty()) << found.size() << " places choose a primitive by its name:" << all;
}

// The canonical tree's shape, against hand-drawn trees: every reduction over a placement derives
// from drx/core/canonical_tree.h, so this pins them all.
TEST(Architecture, TheCanonicalTreeSplitsAtTheLargestPowerOfTwoBelowTheCount) {
  const std::vector<int64_t> left_sizes = {1, 2, 2, 4, 4, 4, 4, 8, 8};  // n = 2 .. 10
  for (int64_t n = 2; n <= 10; ++n)
    EXPECT_EQ(canonical_tree::split(n), left_sizes[static_cast<size_t>(n - 2)]) << n;
  const auto drawn = [](int64_t n) {
    return canonical_tree::reduce(
        0, n, [](int64_t i) { return std::to_string(i); },
        [](const std::string& l, const std::string& r) { return "(" + l + " " + r + ")"; });
  };
  EXPECT_EQ(drawn(1), "0");
  EXPECT_EQ(drawn(5), "(((0 1) (2 3)) 4)");
  EXPECT_EQ(drawn(7), "(((0 1) (2 3)) ((4 5) 6))");
  // Blocks merge only as the two halves of one subtree; the rest folds from the right.
  EXPECT_TRUE(canonical_tree::halves({4, 2}, {6, 2}));
  EXPECT_FALSE(canonical_tree::halves({2, 2}, {4, 2}));
  EXPECT_FALSE(canonical_tree::halves({0, 4}, {4, 2}));
  const std::vector<std::string> spine = {"(((0 1) (2 3)) ((4 5) (6 7)))", "((8 9) (10 11))", "12"};
  EXPECT_EQ(canonical_tree::fold_right(
                spine.size(), [&](size_t b) { return spine[b]; },
                [](const std::string& l, const std::string& r) { return "(" + l + " " + r + ")"; }),
            drawn(13));
}

TEST(Architecture, ClientRangesAreContiguousInRankOrderAndCoverEveryClient) {
  // 10 clients on 3 processes: 10·r/3 .. 10·(r+1)/3.
  EXPECT_EQ(client_range(10, 0, 3), (std::pair<int64_t, int64_t>{0, 3}));
  EXPECT_EQ(client_range(10, 1, 3), (std::pair<int64_t, int64_t>{3, 6}));
  EXPECT_EQ(client_range(10, 2, 3), (std::pair<int64_t, int64_t>{6, 10}));
  for (int64_t ranks : {1, 2, 3, 7})
    for (int64_t clients : {0, 1, 5, 64}) {
      int64_t next = 0;
      for (int64_t r = 0; r < ranks; ++r) {
        const auto [first, end] = client_range(clients, r, ranks);
        EXPECT_EQ(first, next);
        EXPECT_LE(first, end);
        next = end;
      }
      EXPECT_EQ(next, clients);
    }
}

}  // namespace
}  // namespace drx::testing
