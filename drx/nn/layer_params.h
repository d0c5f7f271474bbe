#pragma once
// Private to drx/nn: reading one layer's parameters, a dict {b, w} of leaves, out of a model's
// params tree (mlp_apply's and cnn_apply's layers).
#include <string>

#include "drx/trace/tree.h"

namespace drx::nn {

struct LayerParams {
  Value w, b;
};

// layer as {b, w}: arrays (as constants) or traced values. Errors name `op` and the layer `key`
// ("mlp_apply: layer 'dense0' must be a dict {b, w}, got {w:*}").
LayerParams layer_params(const std::string& op, const std::string& key, const Tree& layer);

}  // namespace drx::nn
