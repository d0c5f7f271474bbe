#include "tools/cli.h"

#include <exception>
#include <filesystem>
#include <ostream>

#include "tools/commands/commands.h"
#include "tools/fedavg/options.h"
#include "tools/lm/options.h"

#ifndef DRX_VERSION
#define DRX_VERSION "unknown"
#endif

namespace drx::tool {

const std::vector<Command>& commands() {
  static const std::vector<Command> all = {
      {"demo", "", "trace a small function, print its IR, run it with jit",
       "Traces f(x, w) = sum(tanh(matmul(x, w))) on f32[2,3] and f32[3,2], "
       "prints the\n"
       "program, then runs it compiled on built-in arrays and prints the "
       "result.\n",
       demo_command},
      {"run", "FILE [--arg VALUES|X.npy]... [--out Y.npy]... [--client] [--interpret] [--print]",
       "run a program saved as text, or a StableHLO module",
       "Parses and verifies the program in FILE ('-' reads standard input), runs it on\n"
       "one --arg per input and prints each output. A FILE ending in .mlir is a\n"
       "StableHLO module (as `drx import` reads it) and @main runs; the check.expect_*\n"
       "calls of a self-checking module are applied after it ran: \"checks: N passed\",\n"
       "or exit code 1 naming the first that failed and its line. A .mlir FILE of\n"
       "StableHLO's interpreter tests (modules separated by `// -----`, test functions\n"
       "without arguments, check.expect_eq_const and the other check ops) runs every\n"
       "test function and prints each one's checks passed or failed, or why drx\n"
       "cannot run it (unsupported); exit code 1 when a check failed.\n"
       "\n"
       "  --arg VALUES  a comma-separated list filling the input's shape in row-major\n"
       "                order, or one number for every element\n"
       "  --arg X.npy   a value ending in .npy is a NumPy file; it must hold exactly\n"
       "                the input's dtype and shape\n"
       "  --out Y.npy   write the outputs to NumPy files instead of printing them:\n"
       "                one --out per output, in order\n"
       "  --interpret   run on the reference interpreter; by default the program runs\n"
       "                compiled, bitwise as drx::jit runs it (the two can differ in\n"
       "                the last bits of dot_general, whose BLAS sums reassociate)\n"
       "  --print       print the program first\n"
       "  --client      deprecated, does nothing: a client's work of drx split (a program\n"
       "                named stageN_client_work) always runs as map_fn bodies run inside\n"
       "                its program, so it gives bitwise what the whole program gives that client\n"
       "\n"
       "  drx run prog.drx --arg 1,2,3,4 --arg 0.5\n"
       "  drx run prog.drx --arg x.npy --arg w.npy --out y.npy\n"
       "  drx run add_f32.mlir\n",
       run_command},
      {"check", "FILE", "parse and verify a program, print it in canonical form",
       "Parses the program in FILE ('-' reads standard input), checks its types and\n"
       "SSA form, and prints it back; exit code 1 with the reason if it is invalid.\n"
       "A FILE ending in .mlir is a StableHLO module: it is imported and the drx\n"
       "program printed, as `drx import` prints it.\n",
       check_command},
      {"import", "FILE.mlir [-o PROG.drx]", "import a StableHLO module as a drx program",
       "Parses the StableHLO module in FILE ('-' reads standard input), as JAX exports\n"
       "it (jax.jit(f).lower(...).as_text(), pretty or generic form), imports its\n"
       "@main and prints the drx program, which `drx run` and drx::parse_program read.\n"
       "The check.expect_* calls of a self-checking module are dropped, and said so on\n"
       "standard error (`drx run FILE.mlir` applies them); sharding annotations change\n"
       "no value and are ignored. An op drx cannot express is exit code 1 naming the\n"
       "op and its line.\n"
       "\n"
       "  -o PROG.drx   write the program to PROG.drx (replaced atomically) instead of\n"
       "                printing it\n"
       "\n"
       "  drx import f.mlir -o f.drx && drx run f.drx --arg 1,2\n",
       import_command},
      {"export", "FILE [--mesh NAME=N,...] [--generic] [--gspmd] [-o OUT.mlir]",
       "export a drx program as a StableHLO module",
       "Writes the program in FILE (drx program text, or a .mlir module) as a StableHLO\n"
       "module: func.func public @main in the pretty form JAX prints (the generic form\n"
       "for ops drx has no pretty form for). XLA compiles it (e.g. with\n"
       "jax.extend / xla_client, or iree-compile); `drx import` reads it back.\n"
       "Reductions over a placement follow drx's canonical tree over client indices,\n"
       "so results match drx bitwise where every op is exactly rounded.\n"
       "\n"
       "  --mesh NAME=N,...  shard placement axes over a device mesh: arguments and\n"
       "                     results placed at NAME are split over N devices, others\n"
       "                     replicated (Shardy sdy.mesh / sdy.sharding); an axis must\n"
       "                     name a placement of the program\n"
       "  --allow-idle-devices  allow a mesh axis larger than its placement (the\n"
       "                     extra devices would hold only padding)\n"
       "  --gspmd            write GSPMD mhlo.sharding strings instead of Shardy\n"
       "  --generic          MLIR's generic op form throughout (mlir-opt reads it)\n"
       "  --single-reduce    reduce over a placement with one stablehlo.reduce\n"
       "  -o OUT.mlir        write the module to OUT.mlir (replaced atomically)\n"
       "\n"
       "  drx export round.drx --mesh clients=4 -o round.mlir\n",
       export_command},
      {"split",
       "FILE --out DIR [--format drx|stablehlo] [--input-names A,...] [--output-names X,...]",
       "split a program over a placement into its MapReduce parts",
       "Splits the program in FILE (drx program text, or a .mlir module) into its\n"
       "MapReduce form (drx::mapreduce_form): for each round of communication with\n"
       "the clients a stage of server_prepare, broadcast, client_work (one client's\n"
       "work: its inputs are client_index, its rows of the placed inputs, the\n"
       "broadcast values and its state from earlier stages), aggregation in drx's\n"
       "canonical order and server_update. Writes into DIR:\n"
       "\n"
       "  stageN.PART.drx      each part, a standalone program `drx run` runs\n"
       "  stageN.PART.inputs   the names of its inputs, one per line, in order\n"
       "  stageN.PART.outputs  the names of its outputs\n"
       "  plan.json            the stages, names, aggregations and types\n"
       "\n"
       "Values are named after the program's variables (v12 a server value, c12 one\n"
       "client's row of a placed value), or by --input-names and --output-names; a\n"
       "client's data are its rows of the placed inputs (plan.json's\n"
       "client_data_inputs says which input). A '/' in a name is a subfolder of\n"
       "NAME.npy. `drx mapreduce run` runs the whole plan over files.\n"
       "\n"
       "  --format stablehlo      also write each client work as stageN.client_work.mlir\n"
       "  --input-names A,B,...   the program inputs' names (default arg0, arg1, ...)\n"
       "  --output-names X,Y,...  the outputs' names (default out, or out/0, out/1, ...)\n"
       "                          (without either flag: the variables' names)\n"
       "\n"
       "  drx split round.drx --out parts/\n"
       "  drx split round.drx --out parts/ --input-names w,x,y --output-names w,loss\n",
       split_command},
      {"aggregate", "PLAN.json --stage S --clients DIR --out DIR",
       "fold the clients' outputs of one stage in drx's canonical order",
       "Reads stage S's aggregations from PLAN.json and, for each client i in order,\n"
       "its outputs DIR/i/NAME.npy (the outputs `drx run` wrote for the stage's\n"
       "client_work), folding them in drx's canonical tree over client indices while\n"
       "holding one client's outputs and O(log clients) partial results, so the\n"
       "result is bitwise what the whole program computes. Writes OUT/NAME.npy for\n"
       "each aggregated server value, atomically, once every client has been read: a\n"
       "missing, truncated, wrong-dtype or wrong-shape client output is an error\n"
       "naming the client, and nothing is written. A client given twice (0 and 00)\n"
       "is refused.\n"
       "\n"
       "  drx aggregate parts/plan.json --stage 0 --clients out/ --out server/\n",
       aggregate_command},
      {"mapreduce", "run PLAN.json --clients DIR --server DIR --out DIR [--client-outputs DIR]",
       "run a whole MapReduce plan over the server's and the clients' files",
       "Runs every stage of the plan `drx split` (or `drx fedavg --export-rounds`) wrote,\n"
       "in this process, as one driver: server_prepare, each client's work on its own\n"
       "files, aggregation in drx's canonical order (streaming, in client order) and\n"
       "server_update, so a batch job needs no hand-written driver. The results are\n"
       "bitwise what the whole program computes (drx::jit).\n"
       "\n"
       "  --server DIR          the server's inputs, DIR/NAME.npy for each plan input\n"
       "                        that is not client data\n"
       "  --clients DIR         client I's data in DIR/I/NAME.npy; the folders are named\n"
       "                        by client index, 0..clients-1, each once (anything else\n"
       "                        is named on stderr and skipped)\n"
       "  --out DIR             the plan's outputs, written as DIR/NAME.npy (each\n"
       "                        atomically) once every stage has run\n"
       "  --client-outputs DIR  also write client I's outputs of stage S to\n"
       "                        DIR/stageS/I/NAME.npy\n"
       "\n"
       "A value named with '/' (params/dense0/w) is a file in a subfolder. A missing\n"
       "file, or one of another dtype or shape than the plan's, is an error naming the\n"
       "file and the type expected, before anything is written.\n"
       "\n"
       "  drx mapreduce run round-1/parts/plan.json --server round-1/server \\\n"
       "      --clients round-1/clients --out results/\n",
       mapreduce_command},
      {"fedavg", fedavg::usage_text(), fedavg::summary_text(), fedavg::details_text(),
       fedavg_command},
      {"lm", lm::usage_text(), lm::summary_text(), lm::details_text(), lm_command},
  };
  return all;
}

namespace {

const Command* find_command(const std::string& name) {
  for (const Command& c : commands())
    if (name == c.name) return &c;
  return nullptr;
}

void print_overview(std::ostream& os) {
  os << "usage: drx COMMAND [ARGS...]\n\n"
        "drx: differentiable MapReduce programs in C++ (version " DRX_VERSION
        ").\n\n"
        "commands:\n";
  for (const Command& c : commands()) {
    std::string name = c.name;
    os << "  " << name << std::string(name.size() < 8 ? 8 - name.size() : 1, ' ') << c.summary
       << "\n";
  }
  os << "  help    show this help, or `drx help COMMAND` for one command\n"
        "\nexit codes: 0 done, 1 error while running, 2 bad command line, 3 training diverged\n";
}

void print_command_help(const Command& c, std::ostream& os) {
  os << "usage: drx " << c.name << (*c.usage ? " " : "") << c.usage << "\n\n"
     << c.summary << ".\n\n"
     << c.details;
}

int help(const std::vector<std::string>& args, std::ostream& out) {
  if (args.empty()) {
    print_overview(out);
    return kExitOk;
  }
  if (args.size() > 1) throw UsageError("help: expects at most one COMMAND");
  const Command* c = find_command(args[0]);
  if (!c) throw UsageError("help: unknown command '" + args[0] + "'");
  print_command_help(*c, out);
  return kExitOk;
}

bool is_help_flag(const std::string& a) { return a == "--help" || a == "-h"; }

int dispatch(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (args.empty()) {
    print_overview(err);
    return kExitUsage;
  }
  const std::string& name = args[0];
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (name == "help" || is_help_flag(name)) return help(rest, out);
  if (name == "--version") {
    out << "drx " DRX_VERSION "\n";
    return kExitOk;
  }
  const Command* c = find_command(name);
  if (!c) {
    err << "drx: unknown command '" << name << "'\n"
        << "Run 'drx help' for the list of commands.\n";
    return kExitUsage;
  }
  if (rest.size() == 1 && is_help_flag(rest[0])) {
    print_command_help(*c, out);
    return kExitOk;
  }
  try {
    return c->run(rest, out, err);
  } catch (const std::filesystem::filesystem_error& e) {
    // A path the user gave that the system refused (too long, not a folder, no permission):
    // their input, not a bug; say which path and why.
    std::string path = e.path1().string();
    if (path.size() > 120)
      path = path.substr(0, 100) + "... (" + std::to_string(path.size()) + " characters)";
    throw Error(name + ": cannot use '" + path + "': " + e.code().message());
  }
}

}  // namespace

int main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  try {
    return dispatch(args, out, err);
  } catch (const UsageError& e) {
    err << "drx: " << e.what() << "\nRun 'drx help' for usage.\n";
    return kExitUsage;
  } catch (const Error& e) {
    err << "drx: error: " << e.what() << "\n";
    return kExitError;
  } catch (const std::exception& e) {
    // Not a drx::Error: a bug in drx rather than in the input; still never
    // crash.
    err << "drx: internal error: " << e.what() << "\n";
    return kExitError;
  }
}

}  // namespace drx::tool
