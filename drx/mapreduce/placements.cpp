#include "drx/mapreduce/placements.h"

#include <algorithm>

#include "drx/array/error.h"

namespace drx {

namespace {
thread_local Placements active;
thread_local std::vector<size_t> scope_starts;
thread_local std::vector<std::string> mapped;

bool is_mapped(const std::string& name) {
  return std::find(mapped.begin(), mapped.end(), name) != mapped.end();
}

// The declared placements an operation may use here: all but the mapped ones.
std::vector<std::string> usable() {
  std::vector<std::string> names;
  for (const auto& entry : active)
    if (!is_mapped(entry.first) &&
        std::find(names.begin(), names.end(), entry.first) == names.end())
      names.push_back(entry.first);
  return names;
}

std::string joined(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "'" : ", '") + n + "'";
  return s;
}

// "inside the body of a map_fn over 'clients' (in one over 'groups')".
std::string where_mapped() {
  std::string s = "inside the body of a map_fn over '" + mapped.back() + "'";
  for (size_t i = mapped.size() - 1; i-- > 0;) s += " (within one over '" + mapped[i] + "')";
  return s;
}
}  // namespace

PlacementScope::PlacementScope(const Placements& placements) {
  if (placements.empty())
    throw Error("program: declare at least one placement, e.g. {{\"clients\", 8}}");
  for (size_t i = 0; i < placements.size(); ++i) {
    const auto& [name, size] = placements[i];
    if (name.empty()) throw Error("program: a placement needs a name");
    if (name.find('.') != std::string::npos)
      throw Error("program: placement name '" + name +
                  "' contains '.', which separates nested placements in types "
                  "(f32[4,8]@groups.clients); choose a name without '.'");
    // Size 0 is a cohort in which nobody takes part (every client dropped out): its
    // reductions give their empty results (reduce_sum and the means 0).
    if (size < 0)
      throw Error("program: placement '" + name + "' has size " + std::to_string(size) +
                  " (expected a size >= 0)");
    for (size_t j = 0; j < i; ++j)
      if (placements[j].first == name)
        throw Error("program: placement '" + name + "' declared twice");
    for (const auto& [n2, s2] : active)
      if (n2 == name && s2 != size)
        throw Error("program: placement '" + name + "' declared with size " + std::to_string(size) +
                    " inside a program where it has size " + std::to_string(s2));
    if (is_mapped(name))
      throw Error("program: placement '" + name + "' is declared " + where_mapped() + ", where '" +
                  name + "' is being mapped; a placement cannot nest in itself");
  }
  scope_starts.push_back(active.size());
  active.insert(active.end(), placements.begin(), placements.end());
}

PlacementScope::~PlacementScope() {
  active.resize(scope_starts.back());
  scope_starts.pop_back();
}

MapBodyScope::MapBodyScope(const std::string& placement) { mapped.push_back(placement); }
MapBodyScope::~MapBodyScope() { mapped.pop_back(); }

const Placements& declared_placements() { return active; }
const std::vector<std::string>& mapped_placements() { return mapped; }

std::string declared_text() {
  std::string s;
  for (const auto& [n, size] : active)
    s += (s.empty() ? "" : ", ") + n + "=" + std::to_string(size);
  return s;
}

void require_program_scope(const std::string& op) {
  if (active.empty())
    throw Error(op +
                ": called outside a drx::program; declare placements with "
                "drx::program({{\"clients\", n}}, f)");
}

int64_t placement_size(const std::string& name, const std::string& op) {
  for (const auto& [n, size] : active) {
    if (n != name) continue;
    if (is_mapped(name)) {
      std::vector<std::string> others = usable();
      throw Error(op + ": placement '" + name + "' is used " + where_mapped() + ", where each " +
                  "of its slices is unplaced; use '" + name + "' outside that map_fn" +
                  (others.empty() ? std::string(" (no other declared placement can nest here)")
                                  : ", or nest " + joined(others) + " here"));
    }
    return size;
  }
  throw Error(op + ": placement '" + name + "' is not declared (declared: " + declared_text() +
              ")");
}

std::string default_placement(const std::string& op) {
  require_program_scope(op);
  std::vector<std::string> names = usable();
  if (names.empty())
    throw Error(op + ": no placement can be used " + where_mapped() + ": the only declared ones (" +
                declared_text() +
                ") are being mapped; to nest one placement in another, declare both: with "
                "drx::program({{\"groups\", 4}, {\"clients\", 8}}, f) the body of a map_fn "
                "over groups may broadcast to, map over and reduce from clients");
  if (names.size() > 1)
    throw Error(op + ": several placements can be used here (" + joined(names) +
                "); name one, e.g. " + op + "(x, \"" + names.front() + "\")");
  return names.front();
}

}  // namespace drx
