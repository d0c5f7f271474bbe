#pragma once
// Programs as text, and their checking: both need the primitive registry
// (names, type rules), which is why they live in drx/core and not drx/ir.
#include <iosfwd>
#include <string>

#include "drx/ir/program.h"

namespace drx {

// Readable text; parse_program(print(p)) prints identically.
std::string to_string(const Program& p);
std::ostream& operator<<(std::ostream& os, const Program& p);
// Parses the text of one program (with the sub-programs it references).
// Throws drx::ParseError naming the line and what was expected.
Program parse_program(const std::string& text);
// Checks SSA form and re-infers every equation's types; throws drx::TypeError
// naming the offending equation.
void verify(const Program& p);

}  // namespace drx
