#include "drx/data/atomic_write.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "drx/array/error.h"

namespace drx::data {
namespace {

// A temporary file is named target + kTempInfix + kTempRandom letters and digits
// (mkstemp's); is_atomic_temp_of recognises exactly these names.
constexpr std::string_view kTempInfix = ".tmp.";
constexpr size_t kTempRandom = 6;  // mkstemp takes exactly six Xs

std::string directory_of(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// Owns the temporary file until it has been renamed into place.
class TempFile {
 public:
  TempFile(const std::string& target, std::string_view op) : target_(target), op_(op) {
    std::string name = target + std::string(kTempInfix) + std::string(kTempRandom, 'X');
    fd_ = ::mkstemp(name.data());
    if (fd_ < 0) fail("creating a temporary file next to it", errno);
    path_ = name;
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!path_.empty()) ::unlink(path_.c_str());
  }

  void write_all(std::string_view bytes) {
    while (!bytes.empty()) {
      ssize_t n = ::write(fd_, bytes.data(), bytes.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        fail("writing the temporary file", errno);
      }
      bytes.remove_prefix(static_cast<size_t>(n));
    }
  }

  // Makes the contents durable and moves them to the target's name.
  void commit() {
    // mkstemp creates the file with mode 0600; the result is an ordinary data file.
    if (::fchmod(fd_, 0644) != 0) fail("setting the temporary file's mode", errno);
    if (::fsync(fd_) != 0) fail("fsync of the temporary file", errno);
    int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) fail("closing the temporary file", errno);
    if (::rename(path_.c_str(), target_.c_str()) != 0)
      fail("renaming the temporary file over it", errno);
    path_.clear();
    // The rename is durable only once the directory entry is on disk; a
    // directory that cannot be opened (unusual permissions) still has the file.
    int dir = ::open(directory_of(target_).c_str(), O_RDONLY | O_DIRECTORY);
    if (dir >= 0) {
      ::fsync(dir);
      ::close(dir);
    }
  }

 private:
  [[noreturn]] void fail(const std::string& step, int err) const {
    throw Error(std::string(op_) + ": cannot write '" + target_ + "': " + step + ": " +
                std::strerror(err));
  }

  std::string target_;
  std::string_view op_;
  std::string path_;  // empty once renamed (or if never created)
  int fd_ = -1;
};

}  // namespace

void write_file_atomically(const std::string& path, const std::vector<std::string_view>& parts,
                           std::string_view op) {
  TempFile tmp(path, op);
  for (std::string_view part : parts) tmp.write_all(part);
  tmp.commit();
}

bool is_atomic_temp_of(std::string_view name, std::string_view target) {
  if (name.size() != target.size() + kTempInfix.size() + kTempRandom || !name.starts_with(target) ||
      name.substr(target.size(), kTempInfix.size()) != kTempInfix)
    return false;
  const std::string_view random = name.substr(target.size() + kTempInfix.size());
  return std::all_of(random.begin(), random.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  });
}

std::string read_file(const std::string& path, std::string_view op) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(std::string(op) + ": cannot open '" + path + "': " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw Error(std::string(op) + ": cannot read '" + path + "'");
  return ss.str();
}

}  // namespace drx::data
