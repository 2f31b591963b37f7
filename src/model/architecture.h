// A model family: which configs it accepts, which tensors it loads (and how
// it fuses them into the layouts the kernels want), and its forward. Each
// family is one file, <name>.cpp, defining <name>_architecture(), and one
// line in registry.cpp; docs/adding-a-model.md walks through adding one.
// Families are built from the shared blocks of blocks.h; llama_decoder.h is the
// llama decoder that llama, mistral, qwen2 and qwen3 share.
#pragma once

#include "core/result.h"
#include "io/model_config.h"
#include "model/blocks.h"
#include "model/forward_context.h"
#include "model/weight_loader.h"
#include "model/weights.h"

namespace pagoda {

struct MoeTensorNames;  // moe_decoder.h

struct Architecture {
  const char* name;  // ModelConfig::architecture, e.g. "llama"
  // Checks what this family needs beyond validate_decoder_config; errors name
  // the field.
  Status (*validate)(const ModelConfig& config);
  // Loads every tensor of the family into `weights` through `loader` (which
  // checks shapes, converts to the compute dtype and owns the memory). Errors
  // name the tensor.
  Status (*load)(const ModelConfig& config, WeightLoader& loader, ModelWeights* weights);
  // Every layer over ctx's T rows: reads ctx.ids, writes the KV caches and
  // leaves the final normed hidden states [T, H] in ctx.normed. A fixed
  // sequence of backend ops (graph-capturable); called once per step.
  void (*forward)(const ModelWeights& weights, ForwardContext& ctx);
  // A family built on the llama decoder (llama_decoder.h), the Gemma decoder
  // (gemma_decoder.h) or the MoE decoder (moe_decoder.h): the names its load
  // reads for one layer (the globals are llama_global_names()), which
  // --load-format dummy (dummy_weights.h) lists. Null for other families.
  LayerTensorNames (*layer_names)(const ModelConfig& config, int64_t layer);
  // A mixture-of-experts family (moe_decoder.h): the sparse-MLP names of a
  // layer with config.is_moe_layer(layer), which dummy weights list in place
  // of layer_names' dense MLP. Null for dense families.
  MoeTensorNames (*moe_names)(const ModelConfig& config, int64_t layer) = nullptr;
};

// The registered family for config.architecture (registry.cpp), after
// validate_decoder_config and the family's validate. Unsupported family:
// error listing the supported ones.
Result<const Architecture*> find_architecture(const ModelConfig& config);

// Checks shared by every family: positive sizes, heads divisible by kv heads,
// even head_dim, positive eps / theta / max positions. Errors name the field.
Status validate_decoder_config(const ModelConfig& config);

}  // namespace pagoda
