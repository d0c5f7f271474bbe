#include "drx/export/sharding.h"

#include <algorithm>

#include "drx/array/error.h"

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

ShardingWriter::DimAxes ShardingWriter::placement_axes(const Type& t) const {
  DimAxes axes(t.shape.size());
  std::string rest = t.placement;
  for (size_t d = 0; !rest.empty() && d < axes.size(); ++d) {
    const std::string level = outer_placement(rest);
    if (mesh_.has_axis(level)) axes[d] = level;
    rest = inner_placement(rest);
  }
  return axes;
}

std::string ShardingWriter::sdy(const DimAxes& axes, bool open) const {
  std::string s = "#sdy.sharding<@mesh, [";
  for (size_t d = 0; d < axes.size(); ++d) {
    s += d ? ", " : "";
    s += !axes[d].empty() ? "{\"" + axes[d] + "\"}" : open ? "{?}" : "{}";
  }
  return s + "]>";
}

std::string ShardingWriter::gspmd(const DimAxes& axes) const {
  auto index_of = [&](const std::string& name) {
    for (size_t i = 0; i < mesh_.axes().size(); ++i)
      if (mesh_.axes()[i].first == name) return i;
    throw Error("internal: to_stablehlo: no mesh axis '" + name + "' in " + mesh_.str());
  };
  // The tile of each dimension; the split axes, in the order of the
  // dimensions they split, lead the device order, the others (replicas) follow.
  std::string tiles;
  std::vector<size_t> perm;
  int split = 1;
  for (size_t d = 0; d < axes.size(); ++d) {
    int tile = 1;
    if (!axes[d].empty()) {
      perm.push_back(index_of(axes[d]));
      tile = mesh_.axes()[perm.back()].second;
    }
    split *= tile;
    tiles += (d ? "," : "") + std::to_string(tile);
  }
  if (perm.empty()) return "{replicated}";
  for (size_t i = 0; i < mesh_.axes().size(); ++i)
    if (std::find(perm.begin(), perm.end(), i) == perm.end()) perm.push_back(i);
  const int devices = mesh_.devices();
  const bool replicated_rest = devices / split > 1;
  if (replicated_rest) tiles += "," + std::to_string(devices / split);
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) identity = identity && perm[i] == i;
  std::string order = "<=[" + std::to_string(devices) + "]";
  if (!identity) {
    std::string dims, p;
    for (size_t i = 0; i < mesh_.axes().size(); ++i) {
      dims += (i ? "," : "") + std::to_string(mesh_.axes()[i].second);
      p += (i ? "," : "") + std::to_string(perm[i]);
    }
    order = "<=[" + dims + "]T(" + p + ")";
  }
  return "{devices=[" + tiles + "]" + order + (replicated_rest ? " last_tile_dim_replicate}" : "}");
}

std::string ShardingWriter::argument_attributes(const Type& t) const {
  if (!active()) return "";
  const DimAxes axes = placement_axes(t);
  if (gspmd_) return "{mhlo.sharding = \"" + gspmd(axes) + "\"}";
  return "{sdy.sharding = " + sdy(axes, false) + "}";
}

std::string ShardingWriter::constrain(StableHloEmitter& em, const std::string& value, const Type& t,
                                      const DimAxes& axes) const {
  if (!gspmd_)
    return em.emit1("sdy.sharding_constraint", {value}, {{"sharding", sdy(axes, true)}}, t);
  std::string open;
  for (size_t d = 0; d < axes.size(); ++d)
    if (axes[d].empty()) open += (open.empty() ? "" : ",") + std::to_string(d);
  MlirAttributes attrs = {{"call_target_name", "\"Sharding\""}};
  if (!open.empty()) attrs.push_back({"backend_config", "\"unspecified_dims=[" + open + "]\""});
  attrs.push_back({"mhlo.sharding", "\"" + gspmd(axes) + "\""});
  return em.emit1("stablehlo.custom_call", {value}, attrs, t);
}

}  // namespace drx
