#pragma once
// Replacing a file so that a reader, or a crash part-way, sees either the old
// contents or the new ones, never a mixture; and reading a file back whole.
#include <string>
#include <string_view>
#include <vector>

namespace drx::data {

// Writes the concatenation of `parts` to a temporary file in path's directory
// (path + ".tmp." + six random letters and digits), fsyncs it, renames it over
// `path` and fsyncs the directory. The new file has mode 0644. On failure the
// temporary file is removed, `path` is left as it was, and drx::Error says
// "<op>: cannot write '<path>': <step>: <reason>". Parts let a caller write a
// header and a large buffer without first joining them.
void write_file_atomically(const std::string& path, const std::vector<std::string_view>& parts,
                           std::string_view op);

// Whether `name` (a file name, no directory) is a temporary file that
// write_file_atomically makes while replacing the file named `target`: what a
// killed writer leaves behind, and what a program restarting in the same
// directory may remove.
bool is_atomic_temp_of(std::string_view name, std::string_view target);

// The whole file; drx::Error "<op>: cannot open '<path>': <reason>" (or read) if it
// cannot be read.
std::string read_file(const std::string& path, std::string_view op);

}  // namespace drx::data
