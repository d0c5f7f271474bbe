#include "drx/export/sharding.h"

namespace drx {

std::string ShardingWriter::mesh_declaration(bool generic) const {
  if (mesh_.axes().empty() || gspmd_) return "";
  std::string axes = "[";
  for (size_t i = 0; i < mesh_.axes().size(); ++i)
    axes += (i ? ", \"" : "\"") + mesh_.axes()[i].first +
            "\"=" + std::to_string(mesh_.axes()[i].second);
  axes += "]";
  if (generic)
    return "  \"sdy.mesh\"() <{mesh = #sdy.mesh<" + axes + ">, sym_name = \"mesh\"}> : () -> ()\n";
  return "  sdy.mesh @mesh = <" + axes + ">\n";
}

std::optional<size_t> ShardingWriter::split_axis(const Type& t) const {
  if (t.placement.empty() || t.shape.empty()) return std::nullopt;
  const std::string outer = outer_placement(t.placement);
  for (size_t i = 0; i < mesh_.axes().size(); ++i)
    if (mesh_.axes()[i].first == outer) return i;
  return std::nullopt;
}

std::string ShardingWriter::sdy_dims(const Type& t) const {
  const std::optional<size_t> axis = split_axis(t);
  std::string s = "[";
  for (size_t d = 0; d < t.shape.size(); ++d) {
    s += d ? ", " : "";
    s += d == 0 && axis ? "{\"" + mesh_.axes()[*axis].first + "\"}" : "{}";
  }
  return s + "]";
}

std::string ShardingWriter::gspmd(const Type& t) const {
  const std::optional<size_t> axis = split_axis(t);
  if (!axis) return "{replicated}";
  const int devices = mesh_.devices();
  const int split = mesh_.axes()[*axis].second;
  std::string tiles = "[" + std::to_string(split);
  for (size_t d = 1; d < t.shape.size(); ++d) tiles += ",1";
  const bool replicated_rest = devices / split > 1;
  if (replicated_rest) tiles += "," + std::to_string(devices / split);
  tiles += "]";
  // Devices are numbered row-major over the mesh axes; the split axis goes
  // first in the tile assignment, the others (replicas) after it.
  std::string order = "<=[" + std::to_string(devices) + "]";
  if (*axis != 0 && mesh_.axes().size() > 1) {
    std::string dims, perm = std::to_string(*axis);
    for (size_t i = 0; i < mesh_.axes().size(); ++i) {
      dims += (i ? "," : "") + std::to_string(mesh_.axes()[i].second);
      if (i != *axis) perm += "," + std::to_string(i);
    }
    order = "<=[" + dims + "]T(" + perm + ")";
  }
  return "{devices=" + tiles + order + (replicated_rest ? " last_tile_dim_replicate}" : "}");
}

std::optional<std::string> ShardingWriter::value_sharding(const Type& t) const {
  if (mesh_.axes().empty()) return std::nullopt;
  if (gspmd_) return "\"" + gspmd(t) + "\"";
  return "#sdy.sharding<@mesh, " + sdy_dims(t) + ">";
}

std::string ShardingWriter::argument_attributes(const Type& t) const {
  std::optional<std::string> s = value_sharding(t);
  if (!s) return "";
  return std::string(gspmd_ ? "{mhlo.sharding = " : "{sdy.sharding = ") + *s + "}";
}

std::string ShardingWriter::constrain(StableHloEmitter& em, const std::string& value,
                                      const Type& t) const {
  std::optional<std::string> s = value_sharding(t);
  if (!s) return value;
  if (gspmd_)
    return em.emit1("stablehlo.custom_call", {value},
                    {{"call_target_name", "\"Sharding\""}, {"mhlo.sharding", *s}}, t);
  return em.emit1("sdy.sharding_constraint", {value}, {{"sharding", *s}}, t);
}

}  // namespace drx
