// AWQ / GPTQ modules as block-format weights (int_quant_source.h).
#include "io/int_quant_source.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <numeric>

#include "core/half.h"
#include "core/log.h"
#include "core/thread_pool.h"
#include "io/mapped_file.h"

namespace pagoda {
namespace {

// Nibble of an AWQ word holding column c % 8 (the inverse of AutoAWQ's
// packing order 0, 2, 4, 6, 1, 3, 5, 7).
constexpr int kAwqNibble[8] = {0, 4, 1, 5, 2, 6, 3, 7};

constexpr const char* kParts[] = {".qweight", ".qzeros", ".scales", ".g_idx"};

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// One quantized linear module: its geometry and, with act order, the
// permutation of K.
struct Module {
  std::string prefix;  // "model.layers.0.self_attn.q_proj"
  int64_t n = 0, k = 0;
  int64_t group = 0;              // G: rows of K per scale row (K per channel)
  DType blocks = DType::kF32;     // the group format it is stored in
  std::vector<int32_t> group_of;  // [K] g_idx when it is not k / G; else empty
  std::vector<int32_t> perm;      // [K] stored column i = logical perm[i]; empty: identity
  uint64_t file_bytes = 0;
};

// Views of a module's tensors; the quant, zero and scale of (k, n) / (g, n).
struct Packed {
  const uint32_t* qweight = nullptr;
  const uint32_t* qzeros = nullptr;
  const uint16_t* scales = nullptr;  // f16 bits
  int64_t n = 0;
  int bits = 4;
  bool awq = false;
  int zero_add = 0;

  int q(int64_t k, int64_t col) const {
    if (awq) return (qweight[k * (n / 8) + col / 8] >> (4 * kAwqNibble[col % 8])) & 0x0F;
    const int per = 32 / bits;
    return (qweight[(k / per) * n + col] >> ((k % per) * bits)) & ((1 << bits) - 1);
  }
  int z(int64_t g, int64_t col) const {
    if (awq) return (qzeros[g * (n / 8) + col / 8] >> (4 * kAwqNibble[col % 8])) & 0x0F;
    const int per = 32 / bits;
    return ((qzeros[g * (n / per) + col / per] >> ((col % per) * bits)) & ((1 << bits) - 1)) +
           zero_add;
  }
  uint16_t s(int64_t g, int64_t col) const { return scales[g * n + col]; }
};

class IntQuantSource final : public IndexedWeightSource {
 public:
  IntQuantSource(std::unique_ptr<WeightSource> inner, IntQuantConfig config)
      : inner_(std::move(inner)), config_(std::move(config)) {}

  Status build() {
    for (const TensorInfo& t : inner_->tensors()) {
      if (ends_with(t.name, ".qweight")) {
        PAGODA_ASSIGN_OR_RETURN(Module m, check_module(t.name.substr(0, t.name.size() - 8)));
        TensorInfo info{m.prefix + ".weight", DType::kF32, {m.n, m.k}, m.file_bytes, m.blocks};
        if (inner_->find(info.name) != nullptr)
          return make_error(ErrorCode::kInvalidArgument,
                            fmt::format("{}: both {} and {}.qweight in {}", m.prefix, info.name,
                                        m.prefix, inner_->describe()));
        modules_.emplace(info.name, std::move(m));
        add_tensor(std::move(info));
      } else if (!is_module_part(t.name)) {
        add_tensor(t);
      }
    }
    return Status::Ok();
  }

  Result<HostTensor> read(std::string_view name) override {
    auto it = modules_.find(name);
    if (it == modules_.end()) return inner_->read(name);
    const Module& m = it->second;
    PAGODA_ASSIGN_OR_RETURN(Parts p, read_parts(m));
    HostTensor out;
    out.dtype = DType::kF32;
    out.shape = {m.n, m.k};
    out.owned.resize(static_cast<size_t>(m.n * m.k) * sizeof(float));
    auto* y = reinterpret_cast<float*>(out.owned.data());
    parallel_for(m.n, 16, [&](int64_t lo, int64_t hi) {
      for (int64_t col = lo; col < hi; ++col) {
        for (int64_t k = 0; k < m.k; ++k) {
          const int64_t g = m.group_of.empty() ? k / m.group : m.group_of[k];
          const float s = fp16_to_float(p.view.s(g, col));
          y[col * m.k + k] = static_cast<float>(p.view.q(k, col) - p.view.z(g, col)) * s;
        }
      }
    });
    out.data = out.owned.data();
    return out;
  }

  Result<HostTensor> read_blocks(std::string_view name) override {
    auto it = modules_.find(name);
    if (it == modules_.end()) return inner_->read_blocks(name);
    const Module& m = it->second;
    PAGODA_ASSIGN_OR_RETURN(Parts p, read_parts(m));
    HostTensor out;
    out.dtype = m.blocks;
    out.shape = {m.n, m.k};
    const size_t rows_bytes = dtype_nbytes(m.blocks, m.n * m.k);
    out.owned.assign(rows_bytes + dtype_k_perm_bytes(m.blocks, m.k), 0);
    const int64_t block = dtype_block_elems(m.blocks);
    const size_t block_bytes = dtype_block_bytes(m.blocks);
    const int bits = group_dtype_bits(m.blocks);
    uint8_t* base = out.owned.data();
    parallel_for(m.n, 16, [&](int64_t lo, int64_t hi) {
      for (int64_t col = lo; col < hi; ++col) {
        uint8_t* b = base + static_cast<size_t>(col) * dtype_nbytes(m.blocks, m.k);
        for (int64_t i0 = 0; i0 < m.k; i0 += block, b += block_bytes) {
          const int64_t g = i0 / m.group;  // stored columns: groups are contiguous
          const uint16_t s = p.view.s(g, col);
          const auto z = static_cast<uint16_t>(p.view.z(g, col));
          std::memcpy(b, &s, 2);
          std::memcpy(b + 2, &z, 2);
          for (int64_t j = 0; j < block; ++j) {
            const int64_t k = m.perm.empty() ? i0 + j : m.perm[i0 + j];
            const int q = p.view.q(k, col);
            if (bits == 8) {
              b[4 + j] = static_cast<uint8_t>(q);
            } else {
              b[4 + j / 2] |= static_cast<uint8_t>(q << (4 * (j % 2)));
            }
          }
        }
      }
    });
    if (!m.perm.empty()) std::memcpy(base + rows_bytes, m.perm.data(), m.perm.size() * 4);
    out.data = out.owned.data();
    return out;
  }

  std::string describe() const override {
    return fmt::format("{}, {}: {} quantized modules", inner_->describe(),
                       pagoda::describe(config_), modules_.size());
  }

 private:
  struct Parts {
    HostTensor qweight, qzeros, scales;
    Packed view;
  };

  bool is_module_part(std::string_view name) const {
    for (const char* part : kParts) {
      if (!ends_with(name, part)) continue;
      const std::string prefix(name.substr(0, name.size() - std::strlen(part)));
      if (inner_->find(prefix + ".qweight") != nullptr) return true;
    }
    return false;
  }

  Error bad(const std::string& name, const std::string& what) const {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("tensor {} in {}: {}", name, inner_->describe(), what));
  }

  const TensorInfo* part(const std::string& name) const { return inner_->find(name); }

  // Checks the module's tensors against each other and the config; reads
  // g_idx (act order).
  Result<Module> check_module(const std::string& prefix) {
    Module m;
    m.prefix = prefix;
    const bool awq = config_.method == IntQuantMethod::kAwq;
    const int bits = config_.bits, per = 32 / bits;
    for (const std::string& skip : config_.modules_to_not_convert) {
      if (prefix.find(skip) != std::string::npos)
        return bad(prefix + ".qweight",
                   fmt::format("quantized, but quantization_config.modules_to_not_convert "
                               "names {} (an unquantized .weight is expected)",
                               skip));
    }
    const std::string qw = prefix + ".qweight", qz = prefix + ".qzeros", sc = prefix + ".scales",
                      gi = prefix + ".g_idx";
    for (const std::string& name : {qz, sc})
      if (part(name) == nullptr) return bad(qw, "has no " + name);
    const TensorInfo& w = *part(qw);
    const TensorInfo& z = *part(qz);
    const TensorInfo& s = *part(sc);
    if (w.dtype != DType::kI32 || w.shape.size() != 2) return bad(qw, "expected 2-D I32");
    if (z.dtype != DType::kI32 || z.shape.size() != 2) return bad(qz, "expected 2-D I32");
    if (s.dtype != DType::kF16 || s.shape.size() != 2) return bad(sc, "expected 2-D F16 scales");
    m.k = awq ? w.shape[0] : w.shape[0] * per;
    m.n = awq ? w.shape[1] * 8 : w.shape[1];
    m.group = config_.group_size < 0 ? m.k : config_.group_size;
    if (m.k == 0 || m.n == 0 || m.k % m.group != 0)
      return bad(qw, fmt::format("{} holds K = {} input features, not a multiple of the group "
                                 "size {}",
                                 shape_string(w.shape), m.k, m.group));
    const int64_t num_groups = m.k / m.group;
    const std::vector<int64_t> want_s = {num_groups, m.n};
    const std::vector<int64_t> want_z = {num_groups, awq ? m.n / 8 : m.n / per};
    if (s.shape != want_s)
      return bad(sc, fmt::format("expected {} for {} {}, found {}", shape_string(want_s), qw,
                                 shape_string(w.shape), shape_string(s.shape)));
    if (z.shape != want_z || (!awq && m.n % per != 0))
      return bad(qz, fmt::format("expected {} for {} {}, found {}", shape_string(want_z), qw,
                                 shape_string(w.shape), shape_string(z.shape)));
    m.file_bytes = w.file_bytes + z.file_bytes + s.file_bytes;
    if (const TensorInfo* g = part(gi)) {
      if (awq) return bad(gi, "AWQ modules have no g_idx");
      PAGODA_RETURN_IF_ERROR(read_groups(gi, *g, &m));
    } else if (!awq && config_.desc_act) {
      return bad(qw, "quantization_config.desc_act is true but " + gi + " is missing");
    }
    const int64_t block = m.group % 128 == 0 ? 128 : m.group % 64 == 0 ? 64 : 32;
    if (m.group % block != 0)
      return bad(qw, fmt::format("per-channel K = {} is not a multiple of 32", m.k));
    m.blocks = group_dtype(bits, block, !m.perm.empty());
    return m;
  }

  // g_idx: each group must hold exactly G rows; when it is not k / G, the
  // stable sort of K by group becomes the module's permutation.
  Status read_groups(const std::string& name, const TensorInfo& info, Module* m) {
    if (info.dtype != DType::kI32 || info.shape != std::vector<int64_t>{m->k})
      return bad(name, fmt::format("expected I32 [{}], found {} {}", m->k, dtype_name(info.dtype),
                                   shape_string(info.shape)));
    PAGODA_ASSIGN_OR_RETURN(HostTensor host, inner_->read(name));
    const auto* g = static_cast<const int32_t*>(host.data);
    const int64_t num_groups = m->k / m->group;
    std::vector<int64_t> count(static_cast<size_t>(num_groups), 0);
    bool natural = true;
    for (int64_t k = 0; k < m->k; ++k) {
      if (g[k] < 0 || g[k] >= num_groups)
        return bad(name, fmt::format("g_idx[{}] = {} is outside [0, {})", k, g[k], num_groups));
      ++count[static_cast<size_t>(g[k])];
      natural = natural && g[k] == k / m->group;
    }
    for (int64_t i = 0; i < num_groups; ++i) {
      if (count[static_cast<size_t>(i)] != m->group)
        return bad(name, fmt::format("group {} has {} rows of K, expected the group size {}", i,
                                     count[static_cast<size_t>(i)], m->group));
    }
    if (natural) return Status::Ok();
    m->group_of.assign(g, g + m->k);
    m->perm.resize(static_cast<size_t>(m->k));
    std::iota(m->perm.begin(), m->perm.end(), 0);
    std::stable_sort(m->perm.begin(), m->perm.end(),
                     [&](int32_t a, int32_t b) { return g[a] < g[b]; });
    return Status::Ok();
  }

  Result<Parts> read_parts(const Module& m) {
    Parts p;
    PAGODA_ASSIGN_OR_RETURN(p.qweight, inner_->read(m.prefix + ".qweight"));
    PAGODA_ASSIGN_OR_RETURN(p.qzeros, inner_->read(m.prefix + ".qzeros"));
    PAGODA_ASSIGN_OR_RETURN(p.scales, inner_->read(m.prefix + ".scales"));
    p.view.qweight = static_cast<const uint32_t*>(p.qweight.data);
    p.view.qzeros = static_cast<const uint32_t*>(p.qzeros.data);
    p.view.scales = static_cast<const uint16_t*>(p.scales.data);
    p.view.n = m.n;
    p.view.bits = config_.bits;
    p.view.awq = config_.method == IntQuantMethod::kAwq;
    p.view.zero_add = config_.zero_plus_one ? 1 : 0;
    return p;
  }

  std::unique_ptr<WeightSource> inner_;
  IntQuantConfig config_;
  std::map<std::string, Module, std::less<>> modules_;  // by synthesized .weight name
};

}  // namespace

Result<std::unique_ptr<WeightSource>> wrap_int_quantized(std::unique_ptr<WeightSource> inner,
                                                         const IntQuantConfig& config) {
  auto source = std::make_unique<IntQuantSource>(std::move(inner), config);
  PAGODA_RETURN_IF_ERROR(source->build());
  return std::unique_ptr<WeightSource>(std::move(source));
}

Result<std::unique_ptr<WeightSource>> open_int_quantized(const std::string& folder,
                                                         std::unique_ptr<WeightSource> inner) {
  const std::string path = (std::filesystem::path(folder) / "config.json").string();
  PAGODA_ASSIGN_OR_RETURN(std::string text, read_file_text(path));
  PAGODA_ASSIGN_OR_RETURN(std::optional<IntQuantConfig> config, parse_int_quant_config(text, path));
  if (!config) return inner;
  PAGODA_ASSIGN_OR_RETURN(std::unique_ptr<WeightSource> source,
                          wrap_int_quantized(std::move(inner), *config));
  log_info("quantization_config: {}; its quantized modules load as w{}g* group-format blocks",
           describe(*config), config->bits);
  return source;
}

}  // namespace pagoda
