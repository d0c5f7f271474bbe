// The table of public ops (drx/ops/op_table.h) against the API headers themselves: the test
// reads each header's namespace-scope function declarations from the source tree and requires
// every one to be registered, so an op added to a header without its DRX_PUBLIC_OP fails here.
#include "drx/ops/op_table.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "drx/array/error.h"

namespace drx {
namespace {

const std::string kRoot = std::string(DRX_SOURCE_DIR) + "/";

// The API headers whose functions are public ops.
const std::vector<std::string> kHeaders = {"drx/ops/ops.h",
                                           "drx/ops/convolution.h",
                                           "drx/ops/windows.h",
                                           "drx/nn/nn.h",
                                           "drx/nn/transformer.h",
                                           "drx/nn/precision.h",
                                           "drx/random/random.h",
                                           "drx/mapreduce/mapreduce.h",
                                           "drx/transforms/api.h",
                                           "drx/transforms/loops.h",
                                           "drx/transforms/cond.h",
                                           "drx/optim/transform.h",
                                           "drx/optim/optimizers.h",
                                           "drx/optim/schedules.h",
                                           "drx/optim/optim.h",
                                           "drx/optim/lm.h",
                                           "drx/optim/federated_round.h",
                                           "drx/privacy/dp_fedavg.h"};
// The namespaces of those headers whose functions are ops (not detail, prims, ...).
bool api_namespace(const std::string& ns) {
  return ns == "drx" || ns == "drx::nn" || ns == "drx::random" || ns == "drx::optim" ||
         ns == "drx::privacy";
}

// Declared in those headers but not ops of their own, with the reason.
const std::map<std::string, std::string> kNotOps = {
    {"drx::program_fn", "the type-erased form of drx::program"},
    {"drx::map_fn_trees", "the type-erased form of drx::map_fn"},
    {"drx::grad_fn", "the type-erased form of drx::grad and drx::value_and_grad"},
    {"drx::jvp_call", "the type-erased form of drx::jvp"},
    {"drx::vjp_call", "the type-erased form of drx::vjp"},
    {"drx::vmap_fn", "the type-erased form of drx::vmap"},
    {"drx::emit_broadcast", "for primitive rules: broadcast without the program-scope checks"},
    {"drx::emit_reduce_sum", "for primitive rules: reduce_sum without the program-scope checks"},
};

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The text without comments, string literals' contents or preprocessor lines.
std::string strip(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s.compare(i, 2, "//") == 0 || (s[i] == '#' && (i == 0 || s[i - 1] == '\n'))) {
      while (i < s.size() && s[i] != '\n') ++i;
      out += '\n';
    } else if (s.compare(i, 2, "/*") == 0) {
      i = s.find("*/", i + 2);
      if (i == std::string::npos) break;
      ++i;
    } else if (s[i] == '"') {
      out += '"';
      for (++i; i < s.size() && s[i] != '"'; ++i)
        if (s[i] == '\\') ++i;
      out += '"';
    } else {
      out += s[i];
    }
  }
  return out;
}

// The qualified names of the functions declared or defined at namespace scope (not in detail,
// prims or class bodies).
std::set<std::string> declared_functions(const std::string& header) {
  const std::string text = strip(read(kRoot + header));
  std::vector<std::string> scopes;  // a namespace's name, or "" for any other brace
  std::set<std::string> names;
  std::string statement;
  static const std::regex ns_re(R"(^\s*namespace\s+([\w:]+)\s*$)");
  static const std::regex fn_re(R"(((?:operator\s*[-+*/])|[A-Za-z_]\w*)\s*\($)");
  auto at_namespace_scope = [&] {
    for (const std::string& s : scopes)
      if (s.empty()) return false;
    return true;
  };
  auto qualified_namespace = [&] {
    std::string q;
    for (const std::string& s : scopes) q += (q.empty() ? "" : "::") + s;
    return q;
  };
  auto consider = [&] {
    const std::string ns = qualified_namespace();
    const bool api = api_namespace(ns);
    const size_t paren = statement.find('(');
    std::smatch m;
    if (api && paren != std::string::npos &&
        !std::regex_search(statement,
                           std::regex(R"(^\s*(using|typedef|struct|class|enum|friend)\b)"))) {
      const std::string head = statement.substr(0, paren + 1);
      if (std::regex_search(head, m, fn_re)) {
        std::string name = m[1];
        name.erase(std::remove_if(name.begin(), name.end(), ::isspace), name.end());
        names.insert(ns + "::" + name);
      }
    }
    statement.clear();
  };
  for (char c : text) {
    if (c == '{') {
      std::smatch m;
      if (at_namespace_scope() && std::regex_match(statement, m, ns_re)) {
        std::string ns = m[1];
        scopes.push_back(ns);
        statement.clear();
      } else {
        if (at_namespace_scope()) consider();
        scopes.push_back("");
      }
    } else if (c == '}') {
      if (!scopes.empty()) scopes.pop_back();
      statement.clear();
    } else if (c == ';') {
      if (at_namespace_scope()) consider();
      statement.clear();
    } else if (at_namespace_scope()) {
      statement += c;
    }
  }
  return names;
}

TEST(OpTable, EveryFunctionOfTheApiHeadersIsRegistered) {
  if (!std::filesystem::exists(kRoot + "drx/ops/ops.h"))
    GTEST_SKIP() << "the sources are not at " << kRoot;
  std::set<std::string> declared;
  for (const std::string& h : kHeaders) {
    const std::set<std::string> in_header = declared_functions(h);
    EXPECT_FALSE(in_header.empty()) << h << ": the declaration reader found nothing";
    declared.insert(in_header.begin(), in_header.end());
  }
  // The reader finds what it should: a sample written out by hand.
  for (const char* name :
       {"drx::tanh", "drx::operator+", "drx::sum", "drx::threefry2x32", "drx::nn::dense",
        "drx::random::uniform", "drx::map_fn", "drx::reduce_weighted_mean", "drx::grad",
        "drx::vmap", "drx::scan", "drx::while_loop", "drx::cond", "drx::clip", "drx::softmax",
        "drx::optim::adam", "drx::optim::chain"})
    EXPECT_TRUE(declared.count(name)) << name << " was not read from the headers";
  EXPECT_FALSE(declared.count("drx::prims::scan"));
  EXPECT_FALSE(declared.count("drx::detail::with_trace_context"));

  std::string missing;
  for (const std::string& name : declared)
    if (!kNotOps.count(name) && !find_public_op(name)) missing += " " + name;
  EXPECT_EQ(missing, "") << "declared in the API headers but not registered with DRX_PUBLIC_OP "
                            "where they are defined:"
                         << missing;
  for (const auto& [name, why] : kNotOps) {
    EXPECT_TRUE(declared.count(name)) << name << " is listed as not an op but no longer declared";
    EXPECT_EQ(find_public_op(name), nullptr) << name << " is registered, but " << why;
  }
  // Everything registered from these modules is declared (no stale or misspelt entries).
  for (const OpInfo& op : public_ops()) {
    if (api_namespace(op.module) &&
        op.name != "jit") {  // jit lives in drx/jit/jit.h, not read here
      EXPECT_TRUE(declared.count(op.qualified_name()))
          << op.qualified_name() << " is registered but declared in none of the API headers";
    }
  }
}

TEST(OpTable, TheTransformationsAreRegistered) {
  for (const char* name : {"grad", "value_and_grad", "vmap", "jvp", "vjp", "jit", "scan",
                           "fori_loop", "while_loop", "cond", "broadcast", "map_fn", "reduce_sum",
                           "reduce_mean", "reduce_weighted_mean", "program"})
    EXPECT_NE(find_public_op(name), nullptr)
        << "drx::" << name << " is not registered (DRX_PUBLIC_OP next to its definition, and "
        << "DRX_PUBLIC_OPS_FILE(tag); once in that file)";
}

TEST(OpTable, EntriesAreCompleteSortedAndUnique) {
  const std::vector<OpInfo>& ops = public_ops();
  EXPECT_GE(ops.size(), 180u);
  std::set<std::string> seen;
  for (size_t i = 0; i < ops.size(); ++i) {
    const OpInfo& op = ops[i];
    SCOPED_TRACE(op.qualified_name());
    EXPECT_FALSE(op.name.empty());
    EXPECT_TRUE(op.module == "drx" || op.module.starts_with("drx::")) << op.module;
    EXPECT_FALSE(op.signature.empty());
    EXPECT_EQ(op.signature.front(), '(') << op.signature;
    EXPECT_NE(op.signature.find("->"), std::string::npos) << op.signature;
    EXPECT_FALSE(op.doc.empty());
    EXPECT_EQ(op.doc.find('\n'), std::string::npos) << "the doc is one line";
    EXPECT_TRUE(seen.insert(op.qualified_name()).second) << "listed twice";
    if (i > 0) {
      EXPECT_LT(ops[i - 1].qualified_name(), op.qualified_name());
    }
    EXPECT_EQ(find_public_op(op.qualified_name()), &op);
  }
}

TEST(OpTable, FindAcceptsNamesWithOrWithoutDrx) {
  const OpInfo* tanh = find_public_op("tanh");
  ASSERT_NE(tanh, nullptr);
  EXPECT_EQ(tanh, find_public_op("drx::tanh"));
  EXPECT_EQ(tanh->module, "drx");
  EXPECT_EQ(tanh->signature, "(x: Value) -> Value");
  const OpInfo* dense = find_public_op("nn::dense");
  ASSERT_NE(dense, nullptr);
  EXPECT_EQ(dense->name, "dense");
  EXPECT_EQ(dense->module, "drx::nn");
  EXPECT_EQ(dense->qualified_name(), "drx::nn::dense");
  EXPECT_EQ(find_public_op("random::normal")->module, "drx::random");
  EXPECT_EQ(find_public_op("no_such_op"), nullptr);
  EXPECT_EQ(find_public_op("nn::tanh"), nullptr);
}

TEST(OpTable, DuplicateOrIncompleteRegistrationThrows) {
  const size_t before = public_ops().size();
  try {
    register_public_op("tanh", "(x: Value) -> Value", "again");
    ADD_FAILURE() << "a second tanh was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("drx::tanh is registered twice"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(register_public_op("op_table_test_new", "(x: Value) -> Value", ""), Error);
  EXPECT_THROW(register_public_op("op_table_test_new", "", "A doc."), Error);
  EXPECT_THROW(register_public_op("drx::op_table_test_new", "(x) -> Value", "A doc."), Error);
  EXPECT_EQ(public_ops().size(), before);
}

// Each file that registers ops anchors itself (DRX_PUBLIC_OPS_FILE at the start of a line, which
// CMake turns into a -u link option), so a program that links the static library and refers to
// none of the file's functions still gets its ops.
TEST(OpTable, EveryRegisteringFileIsAnchoredAndLinked) {
  if (!std::filesystem::exists(kRoot + "drx/ops/ops.h"))
    GTEST_SKIP() << "the sources are not at " << kRoot;
  const std::vector<std::string> linked = public_op_files();
  const std::set<std::string> linked_set(linked.begin(), linked.end());
  EXPECT_EQ(linked_set.size(), linked.size()) << "two files share an anchor tag";
  static const std::regex anchor_re(R"((?:^|\n)DRX_PUBLIC_OPS_FILE\(([a-z0-9_]+)\);)");
  int files = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(kRoot + "drx")) {
    const std::string path = entry.path().string();
    if (entry.path().extension() != ".cpp" || path.find("/op_table.cpp") != std::string::npos)
      continue;
    const std::string text = read(path);
    const bool registers = text.find("\nDRX_PUBLIC_OP(") != std::string::npos;
    std::smatch m;
    const bool anchored = std::regex_search(text, m, anchor_re);
    if (!registers) {
      EXPECT_FALSE(anchored) << path << " anchors itself but registers no op";
      continue;
    }
    ++files;
    ASSERT_TRUE(anchored) << path
                          << " registers ops without DRX_PUBLIC_OPS_FILE(tag); at the "
                             "start of a line, so a static link may drop them";
    EXPECT_TRUE(linked_set.count(m[1])) << path << ": anchor " << m[1] << " was not linked in";
  }
  EXPECT_EQ(static_cast<size_t>(files), linked.size());
}

}  // namespace
}  // namespace drx
