#pragma once
// Running Python code under /usr/bin/python3 with NumPy, for the tests that
// check drx's .npy files against NumPy itself. Machines without it (no
// python3-numpy, see scripts/setup.sh) skip those tests with a notice.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>

namespace drx::testing {

inline constexpr const char* kPython = "/usr/bin/python3";

struct PythonResult {
  int status;          // the exit status, -1 if it did not run
  std::string output;  // stdout and stderr together
};

// Runs `code` as a script with `args` (passed unquoted: keep them free of
// spaces and shell characters, as ::testing::TempDir() paths are).
inline PythonResult run_python(const std::string& code, const std::string& args = "") {
  const std::string script = ::testing::TempDir() + "drx_numpy_" + std::to_string(::getpid()) +
                             "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name() +
                             ".py";
  std::ofstream(script) << code;
  const std::string command = std::string(kPython) + " " + script + " " + args + " 2>&1";
  PythonResult r{-1, ""};
  if (FILE* pipe = ::popen(command.c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) r.output.append(buf, n);
    int raw = ::pclose(pipe);
    r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  }
  std::remove(script.c_str());
  return r;
}

// Empty when /usr/bin/python3 can import numpy; else why not (checked once).
inline const std::string& numpy_unavailable() {
  static const std::string why = [] {
    if (::access(kPython, X_OK) != 0)
      return std::string(kPython) + " is not installed (Debian: python3-numpy)";
    PythonResult r = run_python("import numpy\n");
    if (r.status != 0)
      return std::string(kPython) + " cannot import numpy (Debian: python3-numpy): " + r.output;
    return std::string();
  }();
  return why;
}

}  // namespace drx::testing

// Skips the current test, with a notice on stderr, when NumPy is unavailable.
#define DRX_SKIP_WITHOUT_NUMPY()                                                      \
  do {                                                                                \
    if (const std::string& why = ::drx::testing::numpy_unavailable(); !why.empty()) { \
      std::cerr << "notice: skipping a NumPy check: " << why << "\n";                 \
      GTEST_SKIP() << why;                                                            \
    }                                                                                 \
  } while (0)
