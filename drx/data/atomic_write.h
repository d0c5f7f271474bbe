#pragma once
// Replacing a file so that a reader, or a crash part-way, sees either the old
// contents or the new ones, never a mixture.
#include <string>
#include <string_view>
#include <vector>

namespace drx::data {

// Writes the concatenation of `parts` to a temporary file in path's directory
// (path + ".tmp." + six random characters), fsyncs it, renames it over `path`
// and fsyncs the directory. The new file has mode 0644. On failure the
// temporary file is removed, `path` is left as it was, and drx::Error says
// "<op>: cannot write '<path>': <step>: <reason>". Parts let a caller write a
// header and a large buffer without first joining them.
void write_file_atomically(const std::string& path, const std::vector<std::string_view>& parts,
                           std::string_view op);

}  // namespace drx::data
