// The drx command-line program, driven through drx::tool::main with string
// streams: exit codes, messages, and results checked against hand-computed values.
#include "tools/cli.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "drx/drx.h"
#include "drx/stablehlo/import.h"
#include "tests/cli_util.h"
#include "tests/test_util.h"

namespace {

using drx::testing::cli;
using drx::testing::CliResult;

// A program file written by the printer, removed when the test ends.
class ProgramFile {
 public:
  explicit ProgramFile(const std::string& text) {
    path_ = ::testing::TempDir() + "drx_cli_test_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".drx";
    std::ofstream(path_) << text;
  }
  ~ProgramFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// f(x, y) = x * y + 1 on f32[3] and f32[3].
std::string affine_program_text() {
  auto f = [](drx::Value x, drx::Value y) { return x * y + 1.0; };
  return drx::to_string(drx::trace(f, {drx::Type(drx::f32, {3}), drx::Type(drx::f32, {3})}));
}

TEST(Cli, HelpListsEveryCommand) {
  for (const char* flag : {"help", "--help", "-h"}) {
    CliResult r = cli({flag});
    EXPECT_EQ(r.code, 0) << flag;
    for (const char* name : {"demo", "run", "check", "import", "help"})
      EXPECT_NE(r.out.find(std::string("  ") + name), std::string::npos) << flag << ": " << name;
  }
}

TEST(Cli, HelpForOneCommand) {
  CliResult r = cli({"help", "run"});
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("usage: drx run FILE"), std::string::npos) << r.out;
  EXPECT_EQ(cli({"run", "--help"}).out, r.out);
  EXPECT_EQ(cli({"help", "nope"}).code, 2);
}

TEST(Cli, NoArgumentsIsAUsageError) {
  CliResult r = cli({});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("usage: drx COMMAND"), std::string::npos);
}

TEST(Cli, UnknownCommandExitsTwo) {
  CliResult r = cli({"frobnicate"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("unknown command 'frobnicate'"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty());
}

TEST(Cli, Version) {
  CliResult r = cli({"--version"});
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out.rfind("drx ", 0), 0u) << r.out;
}

TEST(Cli, DemoPrintsProgramAndResult) {
  CliResult r = cli({"demo"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("tanh"), std::string::npos) << r.out;
  // x = [[.1,.2,.3],[.4,.5,.6]], w = [[1,-1],[.5,-.5],[.25,2]]:
  // x @ w = [[.275, .4], [.8, .55]] by hand.
  double want = std::tanh(0.275) + std::tanh(0.4) + std::tanh(0.8) + std::tanh(0.55);
  const std::string tag = "f(x, w) = f32[]{";
  size_t at = r.out.find(tag);
  ASSERT_NE(at, std::string::npos) << r.out;
  EXPECT_NEAR(std::stod(r.out.substr(at + tag.size())), want, 1e-5);
  EXPECT_EQ(cli({"demo", "extra"}).code, 2);
}

TEST(Cli, RunComputesOutputs) {
  ProgramFile file(affine_program_text());
  // y given as one number fills every element: [1,2,3] * 2 + 1.
  CliResult r = cli({"run", file.path(), "--arg", "1,2,3", "--arg=2"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "f32[3]{3, 5, 7}\n");
  r = cli({"run", file.path(), "--arg", "1,2,3", "--arg", "-1,0,0.5", "--print"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("f32[3]{0, 1, 2.5}\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("@main"), std::string::npos) << r.out;
}

TEST(Cli, RunRejectsBadArguments) {
  ProgramFile file(affine_program_text());
  struct Case {
    std::vector<std::string> args;
    const char* message;
  };
  const std::vector<Case> cases = {
      {{"run"}, "missing the program FILE"},
      {{"run", file.path(), "--arg", "1,2,3"}, "takes 2 inputs (f32[3], f32[3]), got 1"},
      {{"run", file.path(), "--arg", "1,2", "--arg", "1"},
       "2 values given, expected 1 (every element) or 3 (f32[3]'s elements"},
      {{"run", file.path(), "--arg", "1,x,3", "--arg", "1"}, "'x' is not a number"},
      {{"run", file.path(), "--arg", "1,,3", "--arg", "1"}, "'' is not a number"},
      {{"run", file.path(), "--arg"}, "--arg needs a value"},
      {{"run", file.path(), "--bogus"}, "unknown flag '--bogus'"},
      {{"run", file.path(), file.path()}, "one program file expected"},
  };
  for (const Case& c : cases) {
    CliResult r = cli(c.args);
    EXPECT_EQ(r.code, 2) << c.message;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
  }
}

// A scratch file path for this test, removed when the test ends.
class ScratchPath {
 public:
  explicit ScratchPath(const std::string& suffix) {
    path_ = ::testing::TempDir() + "drx_cli_test_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name() + "_" + suffix;
    std::remove(path_.c_str());
  }
  ~ScratchPath() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(Cli, RunReadsAndWritesNpyFiles) {
  ProgramFile file(affine_program_text());
  ScratchPath x("x.npy"), y("y.npy"), r("r.npy");
  drx::save_npy(x.path(), drx::Array::from_vector<float>({1, 2, 3}, {3}));
  drx::save_npy(y.path(), drx::Array::from_vector<float>({-1, 0, 0.5f}, {3}));
  CliResult res =
      cli({"run", file.path(), "--arg", x.path(), "--arg=" + y.path(), "--out", r.path()});
  ASSERT_EQ(res.code, 0) << res.err;
  EXPECT_EQ(res.out, "") << "outputs written to files are not printed";
  drx::Array got = drx::load_npy(r.path());
  EXPECT_EQ(got.dtype(), drx::f32);
  EXPECT_EQ(got.to_vector<float>(), (std::vector<float>{0, 1, 2.5f}));
  // Files and value lists mix; --out= also works; --interpret gives the same here.
  res = cli(
      {"run", file.path(), "--arg", x.path(), "--arg", "2", "--out=" + r.path(), "--interpret"});
  ASSERT_EQ(res.code, 0) << res.err;
  EXPECT_EQ(drx::load_npy(r.path()).to_vector<float>(), (std::vector<float>{3, 5, 7}));
}

// sum(tanh(x @ w)) and x @ w + 1, two outputs, over dot_general, a fused
// elementwise chain and a reduction: the tool runs it as jit does, bit for bit.
TEST(Cli, RunIsCompiledByDefaultAndBitwiseEqualToJit) {
  auto f = [](drx::Value x, drx::Value w) {
    drx::Value h = drx::matmul(x, w);
    return std::vector<drx::Value>{drx::sum(drx::tanh(h) * 0.7), h + 1.0};
  };
  drx::Array x = drx::testing::random_array({16, 33}, drx::f32, 1);
  drx::Array w = drx::testing::random_array({33, 24}, drx::f32, 2);
  ProgramFile file(drx::to_string(drx::trace(f, x, w)));
  ScratchPath xf("x.npy"), wf("w.npy"), o1("o1.npy"), o2("o2.npy");
  drx::save_npy(xf.path(), x);
  drx::save_npy(wf.path(), w);
  CliResult res = cli({"run", file.path(), "--arg", xf.path(), "--arg", wf.path(), "--out",
                       o1.path(), "--out", o2.path()});
  ASSERT_EQ(res.code, 0) << res.err;
  std::vector<drx::Array> want = drx::jit(f)(x, w);
  ASSERT_EQ(want.size(), 2u);
  EXPECT_EQ(file_bytes(o1.path()), drx::encode_npy(want[0]));
  EXPECT_EQ(file_bytes(o2.path()), drx::encode_npy(want[1]));

  // The reference interpreter agrees up to dot_general's rounding.
  res = cli({"run", file.path(), "--arg", xf.path(), "--arg", wf.path(), "--out", o1.path(),
             "--out", o2.path(), "--interpret"});
  ASSERT_EQ(res.code, 0) << res.err;
  EXPECT_LE(drx::testing::max_abs_diff({drx::load_npy(o1.path()), drx::load_npy(o2.path())}, want),
            1e-4);
}

// The training commands take each flag once: which of two values was meant is a guess.
TEST(Cli, TrainingFlagsGivenTwiceAreUsageErrors) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"fedavg", "--rounds", "1", "--rounds=2"},
        std::vector<std::string>{"lm", "--rounds", "1", "--rounds", "2"},
        std::vector<std::string>{"fedavg", "--quiet", "--quiet"}}) {
    CliResult r = cli(args);
    EXPECT_EQ(r.code, 2) << args[0] << ": " << r.err;
    EXPECT_NE(r.err.find(args[0] + ": " + (args[1] == "--quiet" ? "--quiet" : "--rounds") +
                         " is given twice"),
              std::string::npos)
        << r.err;
  }
}

TEST(Cli, RunNpyErrors) {
  ProgramFile file(affine_program_text());
  ScratchPath x("x.npy"), wrong("wrong.npy"), r("r.npy");
  drx::save_npy(x.path(), drx::Array::from_vector<float>({1, 2, 3}, {3}));
  drx::save_npy(wrong.path(), drx::Array::from_vector<double>({1, 2, 3, 4}, {2, 2}));
  struct Case {
    std::vector<std::string> args;
    int code;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"run", file.path(), "--arg", x.path(), "--arg", "1", "--out", "r.txt"},
       2,
       "--out 'r.txt' must name a .npy file"},
      {{"run", file.path(), "--arg", x.path(), "--arg", "1", "--out", r.path(), "--out", r.path()},
       2,
       "is given twice"},
      {{"run", file.path(), "--arg", x.path(), "--arg", "1", "--out", r.path(), "--out",
        r.path() + ".2.npy"},
       2,
       "has 1 outputs (f32[3]), got 2 --out (give none, or one per output)"},
      {{"run", file.path(), "--out"}, 2, "--out needs a value"},
      {{"run", file.path(), "--arg", "/nonexistent/x.npy", "--arg", "1"},
       1,
       "load_npy: '/nonexistent/x.npy': cannot open"},
      {{"run", file.path(), "--arg", x.path(), "--arg", wrong.path()},
       1,
       "run: --arg 2 (f32[3]): '" + wrong.path() + "' holds f64[2,2], expected f32[3]"},
      {{"run", file.path(), "--arg", x.path(), "--arg", "1", "--out", "/nonexistent/r.npy"},
       1,
       "save_npy: cannot write '/nonexistent/r.npy'"},
      // An array where the program goes: say what the file is.
      {{"run", x.path()}, 1, "'" + x.path() + "' is a NumPy array (.npy), not a program"},
      {{"run", file.path(), "--arg", x.path(), "--arg", "1,2"},
       2,
       "2 values given, expected 1 (every element) or 3 (f32[3]'s elements in row-major order)"},
  };
  for (const Case& c : cases) {
    CliResult res = cli(c.args);
    EXPECT_EQ(res.code, c.code) << c.message << "\n" << res.err;
    EXPECT_NE(res.err.find(c.message), std::string::npos) << res.err;
  }
}

TEST(Cli, RunHelpDescribesNpyAndTheExecutor) {
  CliResult r = cli({"help", "run"});
  ASSERT_EQ(r.code, 0);
  for (const char* part : {"--arg X.npy", "--out Y.npy", "--interpret", "bitwise as drx::jit"})
    EXPECT_NE(r.out.find(part), std::string::npos) << part << "\n" << r.out;
}

TEST(Cli, MissingFileIsAnError) {
  CliResult r = cli({"run", "/nonexistent/prog.drx"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err.rfind("drx: error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("/nonexistent/prog.drx"), std::string::npos) << r.err;
}

TEST(Cli, CheckPrintsCanonicalText) {
  std::string text = affine_program_text();
  ProgramFile file(text);
  CliResult r = cli({"check", file.path()});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, text);
}

TEST(Cli, MalformedProgramIsAnErrorNotACrash) {
  for (const std::string text : {"", "program", "program @main (%0: f32[3]) -> (f32[3]) {\n",
                                 "this is not a program\n", "program @main (%0: q9[3]) {}"}) {
    ProgramFile file(text);
    CliResult r = cli({"check", file.path()});
    EXPECT_EQ(r.code, 1) << "text: " << text;
    EXPECT_EQ(r.err.rfind("drx: error: ", 0), 0u) << r.err;
  }
}

// ---- StableHLO modules (.mlir) ------------------------------------------------

// JAX's self-checking modules, read in place (never copied into the repository).
const std::string kCorpus = std::string(DRX_SOURCE_DIR) + "/../shared/stablehlo-testdata/modules";

#define REQUIRE_CORPUS()                                         \
  if (!std::filesystem::is_directory(kCorpus))                   \
  GTEST_SKIP() << "StableHLO test data not found at " << kCorpus \
               << " (../shared/stablehlo-testdata); skipping"

// f(x) = x * x + x on f32[3], as JAX prints it.
const char* const kSquareModule = R"(module @jit_f attributes {mhlo.num_partitions = 1 : i32} {
  func.func public @main(%arg0: tensor<3xf32>) -> (tensor<3xf32> {jax.result_info = ""}) {
    %0 = stablehlo.multiply %arg0, %arg0 : tensor<3xf32>
    %1 = stablehlo.add %0, %arg0 : tensor<3xf32>
    return %1 : tensor<3xf32>
  }
}
)";

// A self-checking module: [1, 2] + [1, 2] checked against [2, 4] (line 6).
const char* const kCheckedModule = R"(module @jit_main {
  func.func public @main() -> (tensor<2xf32>) {
    %cst = stablehlo.constant dense<[1.0, 2.0]> : tensor<2xf32>
    %cst_0 = stablehlo.constant dense<[2.0, 4.0]> : tensor<2xf32>
    %0 = stablehlo.add %cst, %cst : tensor<2xf32>
    stablehlo.custom_call @check.expect_close(%0, %cst_0) {has_side_effect = true} : (tensor<2xf32>, tensor<2xf32>) -> ()
    return %0 : tensor<2xf32>
  }
}
)";

// `text` with its one occurrence of `from` replaced by `to`.
std::string replaced(std::string text, const std::string& from, const std::string& to) {
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  EXPECT_EQ(text.find(from, at + 1), std::string::npos) << from << " occurs more than once";
  return at == std::string::npos ? text : text.replace(at, from.size(), to);
}

// The 1-based line of the first occurrence of `part` in `text`.
int line_of(const std::string& text, const std::string& part) {
  size_t at = text.find(part);
  EXPECT_NE(at, std::string::npos) << part;
  return 1 + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<long>(at), '\n'));
}

class MlirFile : public ScratchPath {
 public:
  MlirFile(const std::string& name, const std::string& text) : ScratchPath(name + ".mlir") {
    std::ofstream(path()) << text;
  }
};

TEST(CliStablehlo, ImportPrintsAProgramThatRunsAsTheModule) {
  MlirFile module("square", kSquareModule);
  CliResult r = cli({"import", module.path()});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "") << "no checks, nothing dropped";
  drx::Program p = drx::parse_program(r.out);
  drx::verify(p);
  EXPECT_EQ(drx::to_string(p), r.out);
  EXPECT_EQ(p.input_types(), (std::vector<drx::Type>{drx::Type(drx::f32, {3})}));
  ProgramFile prog(r.out);
  EXPECT_EQ(cli({"run", prog.path(), "--arg", "1,2,-3"}).out, "f32[3]{2, 6, 6}\n");
  // The module runs as it is too, and `check` prints what `import` does.
  CliResult run = cli({"run", module.path(), "--arg", "1,2,-3"});
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_EQ(run.out, "f32[3]{2, 6, 6}\n");
  CliResult check = cli({"check", module.path()});
  ASSERT_EQ(check.code, 0) << check.err;
  EXPECT_EQ(check.out, r.out);
}

TEST(CliStablehlo, ImportWritesTheFileAtomically) {
  MlirFile module("square", kSquareModule);
  ScratchPath written("square.drx");
  CliResult r = cli({"import", module.path(), "-o", written.path()});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(file_bytes(written.path()), cli({"import", module.path()}).out);
  EXPECT_EQ(cli({"run", written.path(), "--arg", "0.5"}).out, "f32[3]{0.75, 0.75, 0.75}\n");

  r = cli({"import", module.path(), "-o", "/nonexistent/dir/p.drx"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("import: cannot write '/nonexistent/dir/p.drx'"), std::string::npos)
      << r.err;
}

TEST(CliStablehlo, RunAppliesTheChecksOfASelfCheckingModule) {
  MlirFile module("checked", kCheckedModule);
  for (const char* executor : {"--print", "--interpret"}) {
    CliResult r = cli({"run", module.path(), executor});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("f32[2]{2, 4}\n"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("checks: 1 passed\n"), std::string::npos) << r.out;
  }
  // --print shows @main's results only, as `drx import` prints them.
  EXPECT_EQ(cli({"run", module.path(), "--print"}).out.find(cli({"import", module.path()}).out),
            0u);

  MlirFile wrong("wrong", replaced(kCheckedModule, "[2.0, 4.0]", "[2.0, 4.5]"));
  CliResult r = cli({"run", wrong.path()});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("run: '" + wrong.path() + "': check.expect_close at line 6: element 1 is 4"),
            std::string::npos)
      << r.err;
}

TEST(CliStablehlo, ImportSaysWhatItDropped) {
  MlirFile module("checked", kCheckedModule);
  CliResult r = cli({"import", module.path()});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("import: '" + module.path() + "': 1 check dropped"), std::string::npos)
      << r.err;
  drx::Program p = drx::parse_program(r.out);
  ASSERT_EQ(p.outputs.size(), 1u);
  EXPECT_EQ(drx::run(p, {})[0].to_vector<float>(), (std::vector<float>{2, 4}));
  // Only what computes the result is left: the expected constant is gone.
  EXPECT_EQ(r.out.find("4.5"), std::string::npos);
  EXPECT_EQ(cli({"check", module.path()}).out, r.out);
}

TEST(CliStablehlo, ErrorsNameTheCommandFileAndLine) {
  const std::string head = "module {\n  func.func public @main() -> tensor<2xf32> {\n";
  MlirFile malformed("malformed", head + "    %0 = frobnicate %a : tensor<2xf32>\n  }\n}\n");
  MlirFile unsupported("unsupported",
                       head +
                           "    %0 = stablehlo.custom_call @frob() : () -> tensor<2xf32>\n"
                           "    return %0 : tensor<2xf32>\n  }\n}\n");
  for (const char* cmd : {"import", "run", "check"}) {
    CliResult r = cli({cmd, malformed.path()});
    EXPECT_EQ(r.code, 1) << cmd;
    EXPECT_EQ(r.err.rfind(std::string("drx: error: ") + cmd + ": '" + malformed.path() + "': ", 0),
              0u)
        << r.err;
    EXPECT_NE(r.err.find("line 3: unknown op 'frobnicate'"), std::string::npos) << r.err;
    r = cli({cmd, unsupported.path()});
    EXPECT_EQ(r.code, 1) << cmd;
    EXPECT_NE(r.err.find("line 3: stablehlo.custom_call: custom_call @frob is not supported"),
              std::string::npos)
        << r.err;
    r = cli({cmd, "/nonexistent/m.mlir"});
    EXPECT_EQ(r.code, 1) << cmd;
    EXPECT_NE(r.err.find(std::string(cmd) + ": cannot open program file '/nonexistent/m.mlir'"),
              std::string::npos)
        << r.err;
  }
}

TEST(CliStablehlo, ImportUsage) {
  MlirFile module("square", kSquareModule);
  struct Case {
    std::vector<std::string> args;
    const char* message;
  };
  const std::vector<Case> cases = {
      {{"import"}, "import: missing the StableHLO module FILE"},
      {{"import", module.path(), "-o"}, "import: -o needs a file"},
      {{"import", module.path(), "--bogus"}, "import: unknown flag '--bogus'"},
      {{"import", module.path(), module.path()}, "import: one module file expected"},
      {{"import", module.path(), "-o", "a.drx", "-o", "b.drx"}, "import: -o is given twice"},
      {{"run", module.path()}, "takes 1 inputs (f32[3]), got 0 --arg"},
  };
  for (const Case& c : cases) {
    CliResult r = cli(c.args);
    EXPECT_EQ(r.code, 2) << c.message;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
  }
  CliResult help = cli({"help", "import"});
  ASSERT_EQ(help.code, 0);
  EXPECT_NE(help.out.find("usage: drx import FILE.mlir [-o PROG.drx]"), std::string::npos)
      << help.out;
  EXPECT_NE(cli({"help", "run"}).out.find(".mlir"), std::string::npos);
  EXPECT_NE(cli({"help", "check"}).out.find(".mlir"), std::string::npos);
}

// The corpus: JAX's add on f32[2] with its check.expect_close.
TEST(CliStablehlo, CorpusModuleImportsRunsAndChecks) {
  REQUIRE_CORPUS();
  const std::string path = kCorpus + "/add_any_float32_2_float32_2.mlir";
  CliResult r = cli({"import", path});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("1 check dropped"), std::string::npos) << r.err;

  ScratchPath written("add.drx");
  ASSERT_EQ(cli({"import", path, "-o", written.path()}).code, 0);
  drx::Program p = drx::parse_program(file_bytes(written.path()));
  drx::verify(p);
  EXPECT_EQ(drx::to_string(p), r.out);
  // The same results as the imported module's program, on the same (no) inputs.
  drx::stablehlo::ImportedModule m =
      drx::stablehlo::import_module(drx::stablehlo::parse_mlir(file_bytes(path)));
  std::vector<drx::Array> want = drx::run(m.program, {});
  std::vector<drx::Array> got = drx::run(p, {});
  ASSERT_EQ(got.size(), m.num_results);
  for (size_t k = 0; k < got.size(); ++k) EXPECT_EQ(got[k].str(), want[k].str());

  r = cli({"run", path});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("checks: 1 passed\n"), std::string::npos) << r.out;
  EXPECT_EQ(cli({"check", path}).out, file_bytes(written.path()));
}

TEST(CliStablehlo, CorpusModuleWithAnAlteredExpectationFails) {
  REQUIRE_CORPUS();
  const std::string text = file_bytes(kCorpus + "/add_any_float32_2_float32_2.mlir");
  // The expected sum's second element, 2.94368386, changed in its second digit.
  MlirFile altered("altered_add", replaced(text, "2.94368386", "2.84368386"));
  CliResult r = cli({"run", altered.path()});
  EXPECT_EQ(r.code, 1);
  const int line = line_of(text, "@check.expect_close");
  EXPECT_NE(r.err.find("check.expect_close at line " + std::to_string(line) + ": element 1 is "),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.out.find("checks:"), std::string::npos) << r.out;
}

}  // namespace

namespace {

TEST(CliStablehlo, ExportWritesAModuleThatImportsToTheSameValues) {
  // A placed program: the mean over 4 clients of x * 2.
  auto f =
      drx::program({{"clients", 4}},
                   [](drx::Value x) {
                     return drx::reduce_mean(drx::map_fn([](drx::Value v) { return v * 2.0; }, x));
                   },
                   {"clients"});
  ProgramFile prog(drx::to_string(drx::trace(f, {drx::Type(drx::f32, {4, 2})})));
  CliResult r = cli({"export", prog.path(), "--mesh", "clients=2"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("sdy.mesh @mesh = <[\"clients\"=2]>"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("func.func public @main("), std::string::npos);
  MlirFile module("exported", r.out);
  CliResult run = cli({"run", module.path(), "--arg", "1,2,3,4,5,6,7,8"});
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_EQ(run.out, "f32[2]{8, 10}\n");  // mean of (1,3,5,7)*2 and (2,4,6,8)*2
  CliResult gspmd = cli({"export", prog.path(), "--mesh", "clients=2", "--gspmd", "--generic"});
  ASSERT_EQ(gspmd.code, 0) << gspmd.err;
  EXPECT_NE(gspmd.out.find("\"builtin.module\"()"), std::string::npos);
  EXPECT_NE(gspmd.out.find("mhlo.sharding = \"{devices=[2,1]<=[2]}\""), std::string::npos);

  ScratchPath written("exported_out.mlir");
  r = cli({"export", prog.path(), "-o", written.path()});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(file_bytes(written.path()), cli({"export", prog.path()}).out);
}

TEST(CliStablehlo, ExportFlagErrors) {
  ProgramFile prog("program @main(%0: f32[2]) {\n  return %0\n}\n");
  EXPECT_EQ(cli({"export"}).code, 2);
  CliResult r = cli({"export", prog.path(), "--mesh", "clients"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--mesh expects NAME=DEVICES"), std::string::npos) << r.err;
  r = cli({"export", prog.path(), "--mesh", "clients=0"});
  EXPECT_EQ(r.code, 1) << r.err;  // the mesh itself refuses the size
  EXPECT_EQ(cli({"export", prog.path(), "--bogus"}).code, 2);
}

}  // namespace
