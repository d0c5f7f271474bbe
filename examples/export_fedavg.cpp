// Writes the FedAvg round of the hypergradient example, and its hypergradient
// d loss(round(w, eta)) / d eta, as StableHLO modules with the clients split
// over a 4-device mesh: the files XLA compiles for 4 devices (see the README,
// "Running drx programs under XLA"). Each module is read back with drx's
// importer and run, and must give drx's values bitwise.
//
//   export_fedavg [OUT_DIR]     (default: the current directory)
#include <cstdio>
#include <filesystem>
#include <string>

#include "drx/data/atomic_write.h"
#include "fed_hypergradient_lib.h"

namespace {

bool same_bits(const std::vector<drx::Array>& a, const std::vector<drx::Array>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!a[i].bitwise_equal(b[i])) return false;
  return true;
}

// Exports p, writes it to dir/name, and checks the module against drx::run.
bool export_one(const drx::Program& p, const std::vector<drx::Array>& args,
                const std::filesystem::path& dir, const std::string& name) {
  const std::string text = drx::to_stablehlo(p, drx::Mesh({{"clients", 4}}));
  const std::filesystem::path file = dir / name;
  drx::data::write_file_atomically(file.string(), {text}, "export_fedavg");
  const bool same = same_bits(drx::run(drx::from_stablehlo(text), args), drx::run(p, args));
  std::printf("%-28s %7zu bytes  read back: %s\n", file.string().c_str(), text.size(),
              same ? "bitwise equal to drx" : "DIFFERENT");
  return same;
}

}  // namespace

int main(int argc, char** argv) {
  // A program of its own: drx may keep OpenBLAS on one thread and split products itself.
  drx::set_blas_thread_control(true);
  try {
    const std::filesystem::path dir = argc > 1 ? argv[1] : ".";
    std::filesystem::create_directories(dir);
    fedhg::Config c;
    const fedhg::Data data = fedhg::make_data(c);
    const std::vector<drx::Type> types = {drx::Type(drx::f64, {c.dim}), drx::Type(drx::f64, {}),
                                          drx::Type(drx::f64, data.x.shape()),
                                          drx::Type(drx::f64, data.y.shape())};
    const std::vector<drx::Array> args = {drx::zeros({c.dim}, drx::f64),
                                          drx::full({}, c.eta0, drx::f64), data.x, data.y};
    const drx::Program round = drx::trace(fedhg::round_program(c), types);
    const drx::Program hyper = drx::trace(drx::value_and_grad(fedhg::hyper_objective(c), 1), types);
    const bool ok = export_one(round, args, dir, "fedavg_round.mlir") &&
                    export_one(hyper, args, dir, "fedavg_hypergradient.mlir");
    return ok ? 0 : 1;
  } catch (const drx::Error& e) {
    std::fprintf(stderr, "export_fedavg: %s\n", e.what());
    return 1;
  }
}
