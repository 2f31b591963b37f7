#include "model/dummy_int_quant.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <optional>

#include "core/block_dequant.h"
#include "core/half.h"
#include "core/log.h"
#include "core/thread_pool.h"
#include "io/int_quant_config.h"
#include "io/mapped_file.h"

namespace pagoda {
namespace {

uint64_t splitmix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t name_hash(std::string_view s) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (char c : s) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
  return h;
}

class DummyIntQuantSource final : public IndexedWeightSource {
 public:
  DummyIntQuantSource(std::unique_ptr<WeightSource> dense, IntQuantConfig config)
      : dense_(std::move(dense)), config_(std::move(config)) {
    for (TensorInfo t : dense_->tensors()) {
      if (const std::optional<DType> dt = format_of(t)) {
        t.blocks = dt;
        t.dtype = DType::kF32;  // read() dequantizes
        t.file_bytes = dtype_nbytes(*dt, t.shape[0] * t.shape[1]);
      }
      add_tensor(std::move(t));
    }
  }

  Result<HostTensor> read(std::string_view name) override {
    const TensorInfo* t = find(name);
    if (t == nullptr || !t->blocks) return dense_->read(name);
    PAGODA_ASSIGN_OR_RETURN(HostTensor blocks, read_blocks(name));
    const int64_t n = t->shape[0], k = t->shape[1];
    HostTensor out;
    out.dtype = DType::kF32;
    out.shape = t->shape;
    out.owned.resize(static_cast<size_t>(n * k) * sizeof(float));
    auto* y = reinterpret_cast<float*>(out.owned.data());
    parallel_for(n, 64, [&](int64_t lo, int64_t hi) {
      dequantize_weight_rows(*t->blocks, blocks.data, n, k, lo, hi - lo, y + lo * k);
    });
    out.data = out.owned.data();
    return out;
  }

  Result<HostTensor> read_blocks(std::string_view name) override {
    const TensorInfo* t = find(name);
    if (t == nullptr || !t->blocks) return dense_->read_blocks(name);
    const DType dt = *t->blocks;
    const int64_t n = t->shape[0], k = t->shape[1];
    const size_t rows_bytes = dtype_nbytes(dt, n * k), block_bytes = dtype_block_bytes(dt);
    HostTensor out;
    out.dtype = dt;
    out.shape = t->shape;
    out.owned.resize(rows_bytes + dtype_k_perm_bytes(dt, k));
    const uint64_t seed = name_hash(name);
    const uint16_t s = float_to_fp16(1.0f / 512), z = 1 << (group_dtype_bits(dt) - 1);
    const int64_t num_blocks = n * k / dtype_block_elems(dt);
    uint8_t* base = out.owned.data();
    parallel_for(num_blocks, 4096, [&](int64_t lo, int64_t hi) {
      for (int64_t b = lo; b < hi; ++b) {
        uint8_t* p = base + static_cast<size_t>(b) * block_bytes;
        std::memcpy(p, &s, 2);
        std::memcpy(p + 2, &z, 2);
        for (size_t i = 4; i < block_bytes; i += 8) {
          const uint64_t r = splitmix(seed ^ (static_cast<uint64_t>(b) << 20 | i));
          std::memcpy(p + i, &r, std::min<size_t>(8, block_bytes - i));
        }
      }
    });
    if (has_k_perm(dt)) {
      std::vector<int32_t> perm(static_cast<size_t>(k));
      std::iota(perm.begin(), perm.end(), 0);
      // Fisher-Yates from K alone: modules fused into one product share it.
      for (int64_t i = k - 1; i > 0; --i)
        std::swap(perm[static_cast<size_t>(i)],
                  perm[splitmix(static_cast<uint64_t>(k) << 32 | static_cast<uint64_t>(i)) %
                       static_cast<uint64_t>(i + 1)]);
      std::memcpy(base + rows_bytes, perm.data(), perm.size() * 4);
    }
    out.data = out.owned.data();
    return out;
  }

  std::string describe() const override {
    return fmt::format("{}, linear weights as random {} blocks", dense_->describe(),
                       pagoda::describe(config_));
  }

 private:
  std::optional<DType> format_of(const TensorInfo& t) const {
    const std::string_view suffix = "_proj.weight";
    if (t.shape.size() != 2 || t.name.size() < suffix.size() ||
        t.name.compare(t.name.size() - suffix.size(), suffix.size(), suffix) != 0)
      return std::nullopt;
    for (const std::string& skip : config_.modules_to_not_convert)
      if (t.name.find(skip) != std::string::npos) return std::nullopt;
    const int64_t k = t.shape[1];
    const int64_t group = config_.group_size < 0 ? k : config_.group_size;
    if (k % group != 0 || group % 32 != 0) return std::nullopt;
    const int64_t block = group % 128 == 0 ? 128 : group % 64 == 0 ? 64 : 32;
    return group_dtype(config_.bits, block, config_.desc_act && group < k);
  }

  std::unique_ptr<WeightSource> dense_;
  IntQuantConfig config_;
};

}  // namespace

Result<std::unique_ptr<WeightSource>> make_dummy_int_quantized(std::unique_ptr<WeightSource> dense,
                                                               const std::string& folder) {
  const std::string path = (std::filesystem::path(folder) / "config.json").string();
  PAGODA_ASSIGN_OR_RETURN(std::string text, read_file_text(path));
  PAGODA_ASSIGN_OR_RETURN(std::optional<IntQuantConfig> config, parse_int_quant_config(text, path));
  if (!config) return dense;
  return std::unique_ptr<WeightSource>(
      std::make_unique<DummyIntQuantSource>(std::move(dense), *config));
}

}  // namespace pagoda
