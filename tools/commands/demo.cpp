#include <ostream>
#include <string>

#include "drx/drx.h"
#include "tools/cli.h"
#include "tools/commands/commands.h"

namespace drx::tool {

// A tour in one screen: trace a small function, show its IR, run it compiled.
int demo_command(const Args& args, std::ostream& out, std::ostream&) {
  if (!args.empty()) throw UsageError("demo: takes no arguments, got '" + args[0] + "'");

  auto f = [](Value x, Value w) { return sum(tanh(matmul(x, w))); };
  Array x = Array::from_vector<float>({0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f}, {2, 3});
  Array w = Array::from_vector<float>({1.0f, -1.0f, 0.5f, -0.5f, 0.25f, 2.0f}, {3, 2});

  out << "# f(x, w) = sum(tanh(matmul(x, w))), traced on f32[2,3] and "
         "f32[3,2]:\n";
  Program p = trace(f, {Type(f32, {2, 3}), Type(f32, {3, 2})}, "demo");
  std::string text = to_string(p);
  out << text << (text.ends_with('\n') ? "" : "\n");

  out << "\n# run with jit on\n";
  out << "x = " << x.str() << "\n";
  out << "w = " << w.str() << "\n";
  Array y = jit(f)(x, w);
  out << "f(x, w) = " << y.str() << "\n";
  return 0;
}

}  // namespace drx::tool
