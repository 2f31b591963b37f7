// Test EAGLE heads of stories260K's shape written as safetensors (eagle_test_heads.h).
#include "eagle_test_heads.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "engine_harness.h"
#include "io/model_files.h"
#include "io/model_location.h"

namespace pagoda::test {

namespace fs = std::filesystem;

namespace {
struct F32Tensor {
  std::vector<int64_t> shape;
  std::vector<float> data;
  bool i64 = false;  // written as I64 (integral values), else F32
};

// A safetensors file of f32 (and I64) tensors.
void write_safetensors(const fs::path& path, const std::map<std::string, F32Tensor>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  size_t offset = 0;
  for (const auto& [name, t] : tensors) {
    const size_t bytes = t.data.size() * (t.i64 ? sizeof(int64_t) : sizeof(float));
    header[name] = {{"dtype", t.i64 ? "I64" : "F32"},
                    {"shape", t.shape},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  const std::string h = header.dump();
  const uint64_t n = h.size();
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(&n), sizeof(n));
  out.write(h.data(), static_cast<std::streamsize>(h.size()));
  for (const auto& [name, t] : tensors) {
    if (t.i64) {
      std::vector<int64_t> v(t.data.begin(), t.data.end());
      out.write(reinterpret_cast<const char*>(v.data()),
                static_cast<std::streamsize>(v.size() * sizeof(int64_t)));
    } else {
      out.write(reinterpret_cast<const char*>(t.data.data()),
                static_cast<std::streamsize>(t.data.size() * sizeof(float)));
    }
  }
}

}  // namespace

// Writes an EAGLE-1 head of stories260K's shape into dir.
void make_head(const fs::path& dir, const HeadSpec& spec) {
  std::ifstream in(fs::path(stories_dir()) / "config.json");
  nlohmann::json config = nlohmann::json::parse(in);
  config["num_hidden_layers"] = 1;
  std::ofstream(dir / "config.json") << config.dump();
  const int64_t h = config["hidden_size"], inter = config["intermediate_size"];
  const int64_t d = config["head_dim"];
  const int64_t q = int64_t{config["num_attention_heads"]} * d;
  const int64_t kv = int64_t{config["num_key_value_heads"]} * d;
  std::mt19937 rng(spec.seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto random = [&](std::vector<int64_t> shape, float scale) {
    F32Tensor t{shape, {}};
    int64_t n = 1;
    for (int64_t x : shape) n *= x;
    for (int64_t i = 0; i < n; ++i) t.data.push_back(scale * normal(rng));
    return t;
  };
  auto zeros = [](std::vector<int64_t> shape) {
    F32Tensor t{shape, {}};
    t.data.assign(static_cast<size_t>(shape[0] * shape[1]), 0.0f);
    return t;
  };
  std::map<std::string, F32Tensor> w;
  F32Tensor fc = spec.copy ? zeros({h, 2 * h}) : random({h, 2 * h}, 0.1f);
  if (spec.copy)
    for (int64_t i = 0; i < h; ++i) fc.data[static_cast<size_t>(i * 2 * h + h + i)] = 1.0f;
  for (float& x : fc.data) x += spec.noise * normal(rng);
  w["fc.weight"] = fc;
  const std::string l = "layers.0.";
  w[l + "self_attn.q_proj.weight"] = random({q, h}, 0.1f);
  w[l + "self_attn.k_proj.weight"] = random({kv, h}, 0.1f);
  w[l + "self_attn.v_proj.weight"] = random({kv, h}, 0.1f);
  w[l + "self_attn.o_proj.weight"] = spec.copy ? zeros({h, q}) : random({h, q}, 0.1f);
  w[l + "post_attention_layernorm.weight"] = F32Tensor{{h}, std::vector<float>(h, 1.0f)};
  w[l + "mlp.gate_proj.weight"] = random({inter, h}, 0.1f);
  w[l + "mlp.up_proj.weight"] = random({inter, h}, 0.1f);
  w[l + "mlp.down_proj.weight"] = spec.copy ? zeros({h, inter}) : random({h, inter}, 0.1f);
  write_safetensors(dir / "model.safetensors", w);
}

// stories260K's tensor `name` as f32 on the host.
std::vector<float> target_tensor(const std::string& name) {
  Result<OpenedModel> opened = open_model(resolve_model(stories_dir()).value());
  EXPECT_TRUE(opened.ok());
  Result<HostTensor> t = opened->weights->read(name);
  EXPECT_TRUE(t.ok() && t->dtype == DType::kF32) << name;
  const float* p = static_cast<const float*>(t->data);
  return std::vector<float>(p, p + t->numel());
}

void make_eagle3_head(const fs::path& dir, const Eagle3Spec& spec) {
  std::ifstream in(fs::path(stories_dir()) / "config.json");
  nlohmann::json config = nlohmann::json::parse(in);
  const int64_t h = config["hidden_size"], inter = config["intermediate_size"];
  const int64_t d = config["head_dim"], v = config["vocab_size"];
  const int64_t q = int64_t{config["num_attention_heads"]} * d;
  const int64_t kv = int64_t{config["num_key_value_heads"]} * d;
  const int64_t vd = spec.copy ? v : v / 2;
  config["architectures"] = {"LlamaForCausalLMEagle3"};
  config["num_hidden_layers"] = 1;
  config["tie_word_embeddings"] = false;
  config["draft_vocab_size"] = vd;
  config["eagle_config"] = {
      {"eagle_aux_hidden_state_layer_ids",
       spec.copy ? std::vector<int64_t>{5, 1, 3} : std::vector<int64_t>{1, 2, 4}}};
  std::ofstream(dir / "config.json") << config.dump();
  std::mt19937 rng(spec.seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto random = [&](std::vector<int64_t> shape, float scale) {
    F32Tensor t{shape, {}};
    for (int64_t i = 0; i < shape[0] * shape[1]; ++i) t.data.push_back(scale * normal(rng));
    return t;
  };
  auto zeros = [](std::vector<int64_t> shape) {
    return F32Tensor{shape, std::vector<float>(static_cast<size_t>(shape[0] * shape[1]), 0.0f)};
  };
  auto ones = [h] { return F32Tensor{{h}, std::vector<float>(static_cast<size_t>(h), 1.0f)}; };
  std::map<std::string, F32Tensor> w;
  F32Tensor fc = spec.copy ? zeros({h, 3 * h}) : random({h, 3 * h}, 0.1f);
  if (spec.copy)
    for (int64_t i = 0; i < h; ++i) fc.data[static_cast<size_t>(i * 3 * h + i)] = 1.0f;
  for (float& x : fc.data) x += spec.noise * normal(rng);
  w["fc.weight"] = fc;
  const std::string m = "midlayer.";
  w[m + "input_layernorm.weight"] = ones();
  w[m + "hidden_norm.weight"] = ones();
  w[m + "self_attn.q_proj.weight"] = random({q, 2 * h}, 0.1f);
  w[m + "self_attn.k_proj.weight"] = random({kv, 2 * h}, 0.1f);
  w[m + "self_attn.v_proj.weight"] = random({kv, 2 * h}, 0.1f);
  w[m + "self_attn.o_proj.weight"] = spec.copy ? zeros({h, q}) : random({h, q}, 0.1f);
  w[m + "post_attention_layernorm.weight"] = ones();
  w[m + "mlp.gate_proj.weight"] = random({inter, h}, 0.1f);
  w[m + "mlp.up_proj.weight"] = random({inter, h}, 0.1f);
  w[m + "mlp.down_proj.weight"] = spec.copy ? zeros({h, inter}) : random({h, inter}, 0.1f);
  F32Tensor d2t{{vd}, {}, /*i64=*/true};
  if (spec.copy) {
    w["norm.weight"] = F32Tensor{{h}, target_tensor("model.norm.weight")};
    const std::vector<float> embed = target_tensor("model.embed_tokens.weight");
    F32Tensor lm_head{{vd, h}, {}};
    for (int64_t id = 0; id < vd; ++id) {
      const int64_t target_id = (id + 7) % v;
      lm_head.data.insert(lm_head.data.end(), embed.begin() + target_id * h,
                          embed.begin() + (target_id + 1) * h);
      d2t.data.push_back(static_cast<float>(target_id - id));
    }
    w["lm_head.weight"] = lm_head;
  } else {
    w["norm.weight"] = ones();
    w["lm_head.weight"] = random({vd, h}, 0.1f);
    for (int64_t id = 0; id < vd; ++id) d2t.data.push_back(static_cast<float>(id));
  }
  w["d2t"] = d2t;
  write_safetensors(dir / "model.safetensors", w);
}

SpeculativeConfig eagle_config(const fs::path& head, int k, const char* method) {
  Result<SpeculativeConfig> c = parse_speculative_config(
      R"({"method": ")" + std::string(method) + R"(", "num_speculative_tokens": )" +
      std::to_string(k) + R"(, "model": ")" + head.string() + "\"}");
  EXPECT_TRUE(c.ok()) << (c.ok() ? "" : c.error().message);
  return c.ok() ? *c : SpeculativeConfig{};
}

StepBatch greedy_step(const std::vector<std::vector<int32_t>>& prompts,
                      std::optional<int32_t> next) {
  StepBatch step;
  step.query_start_loc.push_back(0);
  for (size_t s = 0; s < prompts.size(); ++s) {
    const size_t n = prompts[s].size();
    for (size_t p = next ? n : 0; p < n + (next ? 1 : 0); ++p) {
      step.token_ids.push_back(p < n ? prompts[s][p] : *next);
      step.positions.push_back(static_cast<int32_t>(p));
      step.slot_mapping.push_back(static_cast<int32_t>(4 * s * 16 + p));
    }
    step.query_start_loc.push_back(step.num_tokens());
    step.seq_lens.push_back(static_cast<int32_t>(next ? n + 1 : n));
    for (int32_t b = 0; b < 4; ++b) step.block_tables.push_back(static_cast<int32_t>(4 * s) + b);
    step.logits_rows.push_back(step.num_tokens() - 1);
    SamplingRow row;
    row.temperature = 0.0f;
    step.sampling.rows.push_back(row);
  }
  step.max_blocks_per_seq = 4;
  return step;
}

}  // namespace pagoda::test
