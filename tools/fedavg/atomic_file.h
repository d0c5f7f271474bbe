#pragma once
// Replacing a file so that readers (and a crash) see either the old or the new contents.
#include <string>
#include <string_view>

namespace drx::tool::fedavg {

// Writes `bytes` to a temporary file in path's directory, fsyncs it, renames it over `path`
// and fsyncs the directory. On failure the temporary file is removed and drx::Error names
// the path and the reason; `path` is then untouched.
void write_file_atomic(const std::string& path, std::string_view bytes);

// Whether `name` (a file name, no directory) is a temporary file that
// write_file_atomic makes while replacing the file named `target`: what a
// killed writer can leave behind.
bool is_atomic_temp_of(std::string_view name, std::string_view target);

// The whole file; drx::Error naming the path if it cannot be read.
std::string read_file(const std::string& path);

}  // namespace drx::tool::fedavg
