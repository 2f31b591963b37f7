#include "model/dummy_weights.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/half.h"
#include "model/architecture.h"
#include "model/llama_decoder.h"
#include "model/moe_decoder.h"

namespace pagoda {
namespace {

constexpr int64_t kTableSize = kDummyTableElements;
constexpr uint64_t kTableSeed = 0x9e3779b97f4a7c15ull;
constexpr double kStd = 0.02;  // Hugging Face's initializer_range

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Uniform in (0, 1]: 53 random bits.
double unit_uniform(uint64_t& state) {
  return (static_cast<double>(splitmix64(state) >> 11) + 1.0) * 0x1.0p-53;
}

// kTableSize normal(0, kStd) values in `dtype` (bf16 or f16), Box-Muller over
// splitmix64 from kTableSeed: the same bits on every platform.
std::vector<uint16_t> make_table(DType dtype) {
  std::vector<uint16_t> t(static_cast<size_t>(kTableSize));
  uint64_t state = kTableSeed;
  constexpr double kTwoPi = 6.283185307179586;
  for (size_t i = 0; i < t.size(); i += 2) {
    const double r = std::sqrt(-2.0 * std::log(unit_uniform(state))) * kStd;
    const double a = kTwoPi * unit_uniform(state);
    const float v[2] = {static_cast<float>(r * std::cos(a)), static_cast<float>(r * std::sin(a))};
    for (size_t k = 0; k < 2 && i + k < t.size(); ++k)
      t[i + k] = dtype == DType::kF16 ? float_to_fp16(v[k]) : float_to_bf16(v[k]);
  }
  return t;
}

// The process's table for `dtype`, built on first use (a function-local
// static: thread-safe initialisation, read-only afterwards).
const std::vector<uint16_t>& value_table(DType dtype) {
  if (dtype == DType::kF16) {
    static const std::vector<uint16_t> f16 = make_table(DType::kF16);
    return f16;
  }
  static const std::vector<uint16_t> bf16 = make_table(DType::kBF16);
  return bf16;
}

// Element j of the result is table[j mod N], for j < length: one buffer per
// dtype and length while a source holds it, shared by every source of the
// process that asks for the same (tensor-parallel ranks of one model).
std::shared_ptr<const std::vector<uint16_t>> tiled_values(DType dtype, int64_t length) {
  static std::mutex mu;
  static std::map<std::pair<DType, int64_t>, std::weak_ptr<const std::vector<uint16_t>>> cache;
  const std::lock_guard<std::mutex> lock(mu);
  std::erase_if(cache, [](const auto& entry) { return entry.second.expired(); });
  std::weak_ptr<const std::vector<uint16_t>>& slot = cache[{dtype, length}];
  if (auto held = slot.lock()) return held;
  const std::vector<uint16_t>& table = value_table(dtype);
  auto tiled = std::make_shared<std::vector<uint16_t>>(static_cast<size_t>(length));
  for (int64_t done = 0; done < length;) {
    const int64_t len = std::min(length - done, kTableSize);
    std::memcpy(tiled->data() + done, table.data(), static_cast<size_t>(len) * 2);
    done += len;
  }
  slot = tiled;
  return tiled;
}

// FNV-1a: a name's offset into the table, the same in every build.
uint64_t name_hash(std::string_view name) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : name) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

enum class Fill { kRandom, kOnes, kZeros };

class DummyWeightSource final : public IndexedWeightSource {
 public:
  DummyWeightSource(const ModelConfig& c, const Architecture& arch)
      : dtype_(c.dtype == DType::kF16 ? DType::kF16 : DType::kBF16) {
    const int64_t h = c.hidden_size, d = c.head_dim, inter = c.intermediate_size;
    const int64_t q = c.num_heads * d, kv = c.num_kv_heads * d;
    const GlobalTensorNames g = llama_global_names();
    add(g.embed, {c.vocab_size, h}, Fill::kRandom);
    for (int64_t layer = 0; layer < c.num_layers; ++layer) {
      const LayerTensorNames n = arch.layer_names(c, layer);
      add(n.input_norm, {h}, Fill::kOnes);
      add(n.q_proj, {q, h}, Fill::kRandom);
      add(n.k_proj, {kv, h}, Fill::kRandom);
      add(n.v_proj, {kv, h}, Fill::kRandom);
      add(n.qkv_proj, {q + 2 * kv, h}, Fill::kRandom);
      add(n.q_bias, {q}, Fill::kZeros);
      add(n.k_bias, {kv}, Fill::kZeros);
      add(n.v_bias, {kv}, Fill::kZeros);
      add(n.q_norm, {d}, Fill::kOnes);
      add(n.k_norm, {d}, Fill::kOnes);
      add(n.o_proj, {h, q}, Fill::kRandom);
      add(n.post_attn_norm, {h}, Fill::kOnes);
      add(n.pre_ff_norm, {h}, Fill::kOnes);
      add(n.post_ff_norm, {h}, Fill::kOnes);
      if (arch.moe_names != nullptr && c.is_moe_layer(layer)) {
        add_moe(c, arch.moe_names(c, layer));
        continue;
      }
      add(n.gate_proj, {inter, h}, Fill::kRandom);
      add(n.up_proj, {inter, h}, Fill::kRandom);
      add(n.gate_up_proj, {2 * inter, h}, Fill::kRandom);
      add(n.down_proj, {h, inter}, Fill::kRandom);
    }
    add(g.final_norm, {h}, Fill::kOnes);
    if (!c.tie_word_embeddings) add(g.lm_head, {c.vocab_size, h}, Fill::kRandom);
    int64_t longest = 1;
    for (size_t i = 0; i < tensors().size(); ++i) {
      total_bytes_ += tensors()[i].file_bytes;
      if (fills_[i] == Fill::kRandom)
        longest = std::max(longest, static_cast<int64_t>(tensors()[i].file_bytes / 2));
    }
    values_ = tiled_values(dtype_, kTableSize - 1 + longest);
  }

  Result<HostTensor> read(std::string_view name) override {
    const std::optional<size_t> at = position(name);
    if (!at)
      return make_error(ErrorCode::kNotFound,
                        "tensor " + std::string(name) + " not found in " + describe());
    const TensorInfo& info = tensors()[*at];
    HostTensor out;
    out.dtype = info.dtype;
    out.shape = info.shape;
    const int64_t n = out.numel();
    const Fill fill = fills_[*at];
    if (fill != Fill::kRandom) {
      const float v = fill == Fill::kOnes ? 1.0f : 0.0f;
      const uint16_t bits = dtype_ == DType::kF16 ? float_to_fp16(v) : float_to_bf16(v);
      out.owned.resize(static_cast<size_t>(n) * 2);
      std::fill_n(reinterpret_cast<uint16_t*>(out.owned.data()), n, bits);
      out.data = out.owned.data();
      return out;
    }
    const int64_t offset = static_cast<int64_t>(name_hash(name) % kTableSize);
    out.data = values_->data() + offset;
    return out;
  }

  std::string describe() const override {
    return fmt::format("dummy weights (random {}, {:.2f} GB)", dtype_name(dtype_),
                       static_cast<double>(total_bytes_) / 1e9);
  }

 private:
  // The sparse MLP of one MoE layer: router, per-expert projections and the
  // shared expert with its gate when the config has one.
  void add_moe(const ModelConfig& c, const MoeTensorNames& n) {
    const int64_t h = c.hidden_size, im = c.moe_intermediate_size;
    const int64_t is = c.shared_expert_intermediate_size;
    add(n.router, {c.num_experts, h}, Fill::kRandom);
    for (size_t e = 0; e < n.expert_gate.size(); ++e) {
      add(n.expert_gate[e], {im, h}, Fill::kRandom);
      add(n.expert_up[e], {im, h}, Fill::kRandom);
      add(n.expert_down[e], {h, im}, Fill::kRandom);
    }
    add(n.shared_gate_proj, {is, h}, Fill::kRandom);
    add(n.shared_up_proj, {is, h}, Fill::kRandom);
    add(n.shared_down_proj, {h, is}, Fill::kRandom);
    add(n.shared_gate, {1, h}, Fill::kRandom);
  }

  // Adds `name` (nothing when empty: the layer has no such tensor).
  void add(const std::string& name, std::vector<int64_t> shape, Fill fill) {
    if (name.empty()) return;
    int64_t n = 1;
    for (int64_t x : shape) n *= x;
    if (add_tensor({name, dtype_, std::move(shape), static_cast<uint64_t>(n) * 2, std::nullopt}))
      fills_.push_back(fill);
  }

  DType dtype_;
  std::vector<Fill> fills_;  // per tensor, in tensors() order
  // Random tensor element i: (*values_)[o + i], o = the name's hash mod N.
  std::shared_ptr<const std::vector<uint16_t>> values_;
  uint64_t total_bytes_ = 0;
};

}  // namespace

Result<std::unique_ptr<WeightSource>> make_dummy_weights(const ModelConfig& config) {
  PAGODA_ASSIGN_OR_RETURN(const Architecture* arch, find_architecture(config));
  if (arch->layer_names == nullptr)
    return make_error(ErrorCode::kUnsupported,
                      fmt::format("--load-format dummy: model family \"{}\" is not built on the "
                                  "llama, Gemma or MoE decoder, whose tensors dummy weights know; load its "
                                  "files (--load-format auto)",
                                  arch->name));
  return std::unique_ptr<WeightSource>(new DummyWeightSource(config, *arch));
}

}  // namespace pagoda
