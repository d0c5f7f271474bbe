#include <cerrno>
#include <cstdlib>
#include <optional>
#include <ostream>
#include <regex>
#include <set>
#include <string>
#include <utility>

#include "drx/drx.h"
#include "drx/export/mapreduce_form.h"
#include "drx/stablehlo/test_suite.h"
#include "tools/cli.h"
#include "tools/commands/commands.h"
#include "tools/commands/program_files.h"

namespace drx::tool {
namespace {

// The rule for --arg and --out: a value ending in ".npy" names a NumPy file.
bool names_npy_file(const std::string& value) { return value.ends_with(".npy"); }

double parse_number(const std::string& s, const std::string& what) {
  const char* begin = s.c_str();
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(begin, &end);
  if (s.empty() || end != begin + s.size() || errno == ERANGE)
    throw UsageError(what + ": '" + s + "' is not a number");
  return v;
}

// "1,2,3" fills the input's shape in row-major order; a single number fills all
// of it.
Array parse_values(const std::string& text, const Type& type, const std::string& what) {
  std::vector<double> values;
  size_t start = 0;
  while (true) {
    size_t comma = text.find(',', start);
    values.push_back(parse_number(text.substr(start, comma - start), what));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (values.size() == 1) return full(type.shape, values[0], type.dtype);
  if (static_cast<int64_t>(values.size()) != type.size())
    throw UsageError(what + ": " + std::to_string(values.size()) + " values given, expected " +
                     (type.size() == 1
                          ? "1 (" + type.str() + " holds one value)"
                          : "1 (every element) or " + std::to_string(type.size()) + " (" +
                                type.str() + "'s elements in row-major order)"));
  return convert_array(Array::from_vector<double>(values, type.shape), type.dtype);
}

// A .npy file must hold exactly the input's dtype and shape: converting
// silently could hide a file meant for another input.
Array load_input(const std::string& path, const Type& type, const std::string& what) {
  Array a = load_npy(path);
  if (a.dtype() != type.dtype || a.shape() != type.shape)
    throw Error(what + ": '" + path + "' holds " + std::string(dtype_name(a.dtype())) +
                shape_str(a.shape()) + ", expected " + std::string(dtype_name(type.dtype)) +
                shape_str(type.shape));
  return a;
}

Array parse_input(const std::string& text, const Type& type, size_t index) {
  const std::string what = "run: --arg " + std::to_string(index + 1) + " (" + type.str() + ")";
  return names_npy_file(text) ? load_input(text, type, what) : parse_values(text, type, what);
}

// What jit does with a traced program, so the results are bitwise those of
// drx::jit on the function the program was traced from. A client's work (a part of drx split)
// is compiled as map_fn bodies are, so its results are bitwise those the client computes inside
// the whole program.
std::vector<Array> run_compiled(const Program& p, const std::vector<Array>& inputs) {
  CompileOptions options;
  options.mesh = current_mesh();
  options.simplify = true;
  options.map_body = is_client_work(p);
  return compile(p, options).run(inputs);
}

std::string types_list(const std::vector<Type>& types) {
  std::string out;
  for (const Type& t : types) out += (out.empty() ? "" : ", ") + t.str();
  return out;
}

struct RunFlags {
  std::optional<std::string> file;
  std::vector<std::string> args;  // one per program input
  std::vector<std::string> outs;  // none, or one .npy path per program output
  bool print = false;
  bool interpret = false;
  bool client = false;  // deprecated: a client's work is recognised by its name
};

RunFlags parse_run_flags(const Args& args) {
  RunFlags flags;
  // "--name VALUE" or "--name=VALUE"; returns whether args[i] was that flag.
  auto value_flag = [&](size_t& i, const std::string& name, const char* example,
                        std::vector<std::string>& into) {
    const std::string& a = args[i];
    if (a == name) {
      if (i + 1 == args.size())
        throw UsageError("run: " + name + " needs a value, e.g. " + example);
      into.push_back(args[++i]);
      return true;
    }
    if (a.starts_with(name + "=")) {
      into.push_back(a.substr(name.size() + 1));
      return true;
    }
    return false;
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (value_flag(i, "--arg", "--arg 1,2,3 or --arg x.npy", flags.args) ||
        value_flag(i, "--out", "--out result.npy", flags.outs))
      continue;
    if (a == "--print") {
      flags.print = true;
    } else if (a == "--interpret") {
      flags.interpret = true;
    } else if (a == "--client") {
      flags.client = true;
    } else if (a.starts_with("-") && a != "-") {
      throw UsageError("run: unknown flag '" + a + "'");
    } else if (flags.file) {
      throw UsageError("run: one program file expected, got '" + *flags.file + "' and '" + a + "'");
    } else {
      flags.file = a;
    }
  }
  if (!flags.file) throw UsageError("run: missing the program FILE");
  std::set<std::string> seen;
  for (const std::string& out : flags.outs) {
    if (!names_npy_file(out))
      throw UsageError("run: --out '" + out + "' must name a .npy file (ending in .npy)");
    if (!seen.insert(out).second)
      throw UsageError("run: --out '" + out + "' is given twice; each output needs its own file");
  }
  return flags;
}

// What `drx run` runs: a drx program file as it is, or a StableHLO module's
// program, whose outputs after @main's results are its checks' values.
struct Runnable {
  stablehlo::ImportedModule module;  // no checks for a drx program file
  Program shown;                     // what --print prints
};

Runnable load_runnable(const std::string& path) {
  if (!names_mlir_file(path)) {
    Program p = load_program(path, "run");
    const size_t n = p.outputs.size();
    return {stablehlo::ImportedModule{p, n, {}, {}}, p};
  }
  stablehlo::ImportedModule m = load_mlir(path, "run");
  Program shown = results_only(m);
  return {std::move(m), std::move(shown)};
}

std::vector<Array> parse_inputs(const RunFlags& flags, const Program& p) {
  const std::vector<Type> in_types = p.input_types();
  if (flags.args.size() != in_types.size())
    throw UsageError("run: program @" + p.name + " takes " + std::to_string(in_types.size()) +
                     " inputs (" + types_list(in_types) + "), got " +
                     std::to_string(flags.args.size()) + " --arg");
  std::vector<Array> inputs;
  for (size_t i = 0; i < in_types.size(); ++i)
    inputs.push_back(parse_input(flags.args[i], in_types[i], i));
  return inputs;
}

void check_out_count(const RunFlags& flags, const Program& shown) {
  const size_t n_outputs = shown.outputs.size();
  if (!flags.outs.empty() && flags.outs.size() != n_outputs)
    throw UsageError("run: program @" + shown.name + " has " + std::to_string(n_outputs) +
                     " outputs (" + types_list(shown.output_types()) + "), got " +
                     std::to_string(flags.outs.size()) + " --out (give none, or one per output)");
}

// Prints @main's results, or writes them to the --out files.
void emit_results(const RunFlags& flags, const std::vector<Array>& outputs, size_t n,
                  std::ostream& out) {
  if (flags.outs.empty()) {
    for (size_t k = 0; k < n; ++k) out << outputs[k].str() << "\n";
  } else {
    for (size_t k = 0; k < n; ++k) save_npy(flags.outs[k], outputs[k]);
  }
}

// A self-checking module's checks, applied to what it computed.
void apply_checks(const RunFlags& flags, const stablehlo::ImportedModule& m,
                  const std::vector<Array>& outputs, std::ostream& out) {
  if (m.checks.empty()) return;
  const std::string failure = first_failed_check(m, outputs);
  if (!failure.empty()) throw Error("run: '" + *flags.file + "': " + failure);
  out << "checks: " << m.checks.size() << " passed\n";
}

// StableHLO's interpreter test files hold several modules (`// -----`) of
// test functions without arguments checked with the check dialect's ops, and
// mostly no @main.
bool is_test_suite_file(const std::string& text) {
  static const std::regex check_op(R"((^|\n)\s*check\.expect_)");
  if (stablehlo::split_modules(text).size() > 1 || std::regex_search(text, check_op)) return true;
  try {
    for (const stablehlo::Function& f : stablehlo::parse_mlir(text).functions)
      if (f.name == "main") return false;
    return true;
  } catch (const Error&) {
    return false;  // load_mlir says what is wrong with it, naming the file
  }
}

std::string plural(int n, const char* word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

// Runs every test function of the file and reports each one's checks; exit
// code 1 when a check failed. Unsupported cases (an op or element type drx does
// not hold) are reported with the reason, and do not fail the run.
int run_test_suite(const RunFlags& flags, const std::string& text, std::ostream& out) {
  if (!flags.args.empty() || !flags.outs.empty() || flags.print)
    throw UsageError("run: '" + *flags.file +
                     "' holds test functions without arguments (several modules or no @main): "
                     "--arg, --out and --print do not apply");
  stablehlo::ProgramRunner runner;
  if (!flags.interpret) runner = [](const Program& p) { return run_compiled(p, {}); };
  int passed = 0, failed = 0, unsupported = 0;
  for (const stablehlo::TestCase& c : stablehlo::run_test_file(text, runner)) {
    out << "@" << c.name << " (line " << c.line << "): ";
    switch (c.outcome) {
      case stablehlo::TestCase::Outcome::passed:
        ++passed;
        out << plural(c.checks, "check") << " passed\n";
        break;
      case stablehlo::TestCase::Outcome::failed:
        ++failed;
        out << "FAILED " << c.checks_failed << " of " << plural(c.checks, "check") << ": "
            << c.message << "\n";
        break;
      case stablehlo::TestCase::Outcome::unsupported:
        ++unsupported;
        out << "unsupported: " << c.message << "\n";
        break;
    }
  }
  out << plural(passed + failed + unsupported, "test function") << ": " << passed << " passed, "
      << failed << " failed, " << unsupported << " unsupported\n";
  return failed ? 1 : 0;
}

}  // namespace

int run_command(const Args& args, std::ostream& out, std::ostream& err) {
  const RunFlags flags = parse_run_flags(args);
  if (flags.client)
    err << "drx run: --client is deprecated and does nothing: a client's work "
           "(stageN_client_work) always runs as it runs inside its program\n";
  if (names_mlir_file(*flags.file)) {
    const std::string text = read_text(*flags.file, "run");
    if (is_test_suite_file(text)) return run_test_suite(flags, text, out);
  }
  const Runnable r = load_runnable(*flags.file);
  const Program& p = r.module.program;
  check_out_count(flags, r.shown);
  const std::vector<Array> inputs = parse_inputs(flags, p);

  if (flags.print) out << to_string(r.shown);
  std::vector<Array> outputs = flags.interpret ? drx::run(p, inputs) : run_compiled(p, inputs);
  emit_results(flags, outputs, r.module.num_results, out);
  apply_checks(flags, r.module, outputs, out);
  return 0;
}

int check_command(const Args& args, std::ostream& out, std::ostream& err) {
  if (args.size() != 1 || (args[0].starts_with("-") && args[0] != "-"))
    throw UsageError("check: expects exactly one program FILE");
  const std::string& path = args[0];
  if (names_mlir_file(path))
    out << import_text(load_mlir(path, "check"), path, "check", err);
  else
    out << to_string(load_program(path, "check"));
  return 0;
}

}  // namespace drx::tool
