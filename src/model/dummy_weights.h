// Random weights in place of a model's files (--load-format dummy, vLLM's
// name): for benchmarks and tests of a model's shapes when its weights are
// not on disk. Outputs are meaningless.
#pragma once

#include <cstdint>
#include <memory>

#include "core/result.h"
#include "io/model_config.h"
#include "io/weight_source.h"

namespace pagoda {

// Elements of the value table (2^24 - 3: odd; 32 MiB in 16 bits).
inline constexpr int64_t kDummyTableElements = (int64_t{1} << 24) - 3;

// A WeightSource holding exactly the tensors the family of `config` loads
// (Architecture::layer_names and llama_global_names(): q/k/v/o, gate/up/down,
// the norms (with Gemma's sandwich norms), q/k/v biases when the family has
// them, q/k norms for qwen3 and gemma3,
// lm_head unless config.tie_word_embeddings; in the MoE layers of a
// mixture-of-experts family, Architecture::moe_names' router, per-expert
// projections and shared expert instead of gate/up/down), with the shapes a Hugging Face
// file of `config` has. dtype: f16 when config.dtype is f16, else bf16 (the
// CUDA backend's compute dtype for the config, so the loader copies without
// converting).
// Values: norm weights 1, biases 0; every other tensor element i is
// table[(o + i) mod N] of one fixed-seed table of N = kDummyTableElements
// normal(0, 0.02) values (N odd, so rows of a power-of-two width never repeat
// within a table's length), with the offset o a hash of the tensor's name:
// the same tensors in every run and process.
// Cost: read() copies nothing but norms and biases: the other tensors are
// views of one buffer holding the table tiled to N + the longest tensor's
// elements, filled (memcpy) when the source is made and shared by the
// sources of the process with the same dtype and longest tensor; host memory
// 2 bytes per element (2.1 GB for Llama-3.1-70B, whose longest tensor is the
// 128256 x 8192 embedding). Views stay valid while the source lives.
// Thread-safe: read(), find() and tensors() may run from several threads at
// once (tensor-parallel ranks loading concurrently), and sources may be made
// concurrently; the table is built once per process and dtype, on first use,
// and nothing is changed after it is made.
// Errors: config.architecture unsupported (find_architecture's message), or a
// family not built on the llama or MoE decoder (names the family).
Result<std::unique_ptr<WeightSource>> make_dummy_weights(const ModelConfig& config);

}  // namespace pagoda
