#include "tools/fedavg/atomic_file.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "drx/array/error.h"
#include "drx/data/atomic_write.h"

namespace drx::tool::fedavg {
namespace {

// drx::data::write_file_atomically names its temporary file path + ".tmp." +
// six letters and digits (mkstemp).
constexpr std::string_view kTempInfix = ".tmp.";
constexpr std::string_view kTempSuffix = "XXXXXX";

}  // namespace

bool is_atomic_temp_of(std::string_view name, std::string_view target) {
  if (name.size() != target.size() + kTempInfix.size() + kTempSuffix.size() ||
      !name.starts_with(target) || name.substr(target.size(), kTempInfix.size()) != kTempInfix)
    return false;
  const std::string_view suffix = name.substr(target.size() + kTempInfix.size());
  return std::all_of(suffix.begin(), suffix.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  });
}

void write_file_atomic(const std::string& path, std::string_view bytes) {
  data::write_file_atomically(path, {bytes}, "fedavg");
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open '" + path + "': " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw Error("cannot read '" + path + "'");
  return ss.str();
}

}  // namespace drx::tool::fedavg
