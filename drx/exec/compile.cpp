// compile(): the one seam from a Program to something that runs it. The
// backends are kept by name; "cpu" and "interpreter" are built in (registered
// here, not by static initialisers a static library could drop).
#include <map>
#include <mutex>

#include "drx/array/error.h"
#include "drx/core/interpret.h"
#include "drx/core/process_group.h"
#include "drx/exec/executable.h"
#include "drx/transforms/simplify.h"

namespace drx {
namespace {

// The reference semantics behind the seam: what every backend is checked against, and a
// way to run a program whose compiled form is in doubt.
class InterpretedProgram final : public CompiledProgram {
 public:
  explicit InterpretedProgram(Program program) : program_(std::move(program)) {}
  std::vector<Array> run(const std::vector<Array>& args) const override {
    return drx::run(program_, args);
  }
  const Program& program() const override { return program_; }

 private:
  Program program_;
};

std::shared_ptr<const CompiledProgram> compile_interpreted(const Program& program,
                                                           const CompileOptions& options) {
  // The interpreter reads every client's rows of a reduction; a process of a mesh spanning
  // processes holds only its own.
  if (options.mesh.process_group())
    throw Error("compile: backend 'interpreter' runs in one process, but mesh " +
                options.mesh.str() + " spans processes; use backend 'cpu'");
  return std::make_shared<const InterpretedProgram>(program);
}

struct Registry {
  std::mutex mu;
  std::map<std::string, Backend> backends{{"cpu", exec::compile_cpu},
                                          {"interpreter", compile_interpreted}};
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::highest:
      return "highest";
  }
  return "?";
}

void register_backend(const std::string& name, Backend backend) {
  if (name.empty() || !backend)
    throw Error("register_backend: expected a name and a backend, got " +
                (name.empty() ? std::string("an empty name") : "no backend for '" + name + "'"));
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (!r.backends.emplace(name, std::move(backend)).second)
    throw Error("register_backend: a backend named '" + name + "' is registered already");
}

std::vector<std::string> backend_names() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<std::string> names;
  for (const auto& [name, backend] : r.backends) names.push_back(name);
  return names;
}

Executable compile(const Program& program, const CompileOptions& options) {
  Backend backend;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    if (auto it = r.backends.find(options.backend); it != r.backends.end()) backend = it->second;
  }
  if (!backend) {
    std::string names;
    for (const std::string& n : backend_names()) names += (names.empty() ? "" : ", ") + n;
    throw Error("compile: no backend named '" + options.backend + "' (backends: " + names + ")");
  }
  std::shared_ptr<const CompiledProgram> compiled =
      options.simplify ? backend(simplify(program), options) : backend(program, options);
  if (!compiled)
    throw Error("compile: backend '" + options.backend + "' returned no program for @" +
                program.name);
  return Executable(std::move(compiled));
}

Executable compile(const Program& program, const Mesh& mesh, const CompileOptions& options) {
  CompileOptions on_mesh = options;
  on_mesh.mesh = mesh;
  return compile(program, on_mesh);
}

}  // namespace drx
