// Built against an installed drx only (tests/install/run.sh): traces and jits
// a function, prints the program and the result, and checks the result
// against a value computed here by hand.
#include <drx/drx.h>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <string>

int main() {
  try {
    auto f = [](drx::Value x, drx::Value w) { return drx::sum(drx::tanh(drx::matmul(x, w))); };

    drx::Program p = drx::trace(f, {drx::Type(drx::f32, {2, 2}), drx::Type(drx::f32, {2, 1})});
    std::string text = drx::to_string(p);
    std::cout << text;
    if (text.find("tanh") == std::string::npos) {
      std::cerr << "install app: the printed program does not mention tanh\n";
      return 1;
    }

    drx::Array x = drx::Array::from_vector<float>({1, 2, 3, 4}, {2, 2});
    drx::Array w = drx::Array::from_vector<float>({0.5f, -0.25f}, {2, 1});
    drx::Array y = drx::jit(f)(x, w);
    std::cout << "result: " << y.str() << "\n";

    // x @ w = [1*0.5 - 2*0.25, 3*0.5 - 4*0.25] = [0, 0.5]; sum(tanh(.)) = tanh(0.5).
    const double want = std::tanh(0.5);
    const double got = y.item<float>();
    if (y.dtype() != drx::f32 || !y.shape().empty() || std::abs(got - want) > 1e-6) {
      std::fprintf(stderr, "install app: got %.9g (%s), want %.9g as f32[]\n", got, y.str().c_str(),
                   want);
      return 1;
    }
    // Newer parts of the API through the installed headers: trace by example, .npy bytes.
    if (drx::to_string(drx::trace(f, x, w)) != text) {
      std::cerr << "install app: trace by example differs from trace by types\n";
      return 1;
    }
    if (!drx::decode_npy(drx::encode_npy(y)).bitwise_equal(y)) {
      std::cerr << "install app: a .npy round trip changed the result\n";
      return 1;
    }
    std::cout << "install app: OK\n";
    return 0;
  } catch (const drx::Error& e) {
    std::cerr << "install app: drx error: " << e.what() << "\n";
    return 1;
  }
}
