#include "tools/fedavg/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "drx/array/error.h"

namespace drx::tool::fedavg {
namespace {

std::string dir_of(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

[[noreturn]] void fail(const std::string& path, const std::string& what, int err) {
  throw Error("cannot write '" + path + "': " + what + ": " + std::strerror(err));
}

// mkstemp replaces the six Xs with letters and digits.
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
  std::string tmpl = path + std::string(kTempInfix) + std::string(kTempSuffix);
  std::vector<char> name(tmpl.begin(), tmpl.end());
  name.push_back('\0');
  int fd = ::mkstemp(name.data());
  if (fd < 0) fail(path, "creating a temporary file", errno);
  const std::string tmp(name.data());
  auto abandon = [&](const char* what) {
    int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    fail(path, what, err);
  };
  // mkstemp creates the file 0600; results are ordinary files.
  if (::fchmod(fd, 0644) != 0) abandon("chmod");
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      abandon("write");
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) abandon("fsync");
  if (::close(fd) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    fail(path, "close", err);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    fail(path, "rename", err);
  }
  // The rename itself is durable only once the directory entry is on disk.
  int dfd = ::open(dir_of(path).c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
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
