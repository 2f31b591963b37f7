// libFuzzer target: the GGUF parser on arbitrary bytes, then everything a
// loader does with a parsed file (metadata getters, ModelConfig, the
// WeightSource, dequantization of small tensors and their raw quantization
// blocks). Any crash, leak or
// sanitizer report is a bug; errors are expected.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/dtype.h"
#include "io/gguf.h"
#include "io/gguf_model.h"

namespace {

// Tensors larger than this are not dequantized (keeps each run fast).
constexpr int64_t kMaxElements = 1 << 16;

void exercise_metadata(const pagoda::GgufFile& f) {
  for (const std::string& key : f.keys()) {
    (void)f.get_string(key);
    (void)f.get_int(key);
    (void)f.get_float(key);
    (void)f.get_bool(key);
    (void)f.get_string_array(key);
    (void)f.get_int_array(key);
    (void)f.get_float_array(key);
  }
}

void exercise_weights(const std::shared_ptr<const pagoda::GgufFile>& f) {
  auto config = pagoda::gguf_model_config(*f);
  pagoda::ModelConfig c = config.ok() ? *config : pagoda::ModelConfig{};
  if (!config.ok()) {
    c.architecture = "llama";
    c.num_heads = 2;
    c.num_kv_heads = 1;
  }
  auto weights = pagoda::open_gguf_weights(f, c);
  if (!weights.ok()) return;
  for (const pagoda::TensorInfo& t : (*weights)->tensors()) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    if (n > kMaxElements) continue;
    auto host = (*weights)->read(t.name);
    if (host.ok() && host->numel() > 0) {
      volatile float sink = static_cast<const float*>(host->data)[host->numel() - 1];
      (void)sink;
    }
    // The raw blocks a device keeps (block weights): their last byte.
    if (!t.blocks) continue;
    auto blocks = (*weights)->read_blocks(t.name);
    const size_t bytes = blocks.ok() ? pagoda::dtype_nbytes(blocks->dtype, blocks->numel()) : 0;
    if (bytes > 0) {
      volatile uint8_t sink = static_cast<const uint8_t*>(blocks->data)[bytes - 1];
      (void)sink;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto parsed = pagoda::GgufFile::parse(data, size, "fuzz.gguf");
  if (!parsed.ok()) return 0;
  std::shared_ptr<const pagoda::GgufFile> f(std::move(parsed).value());
  exercise_metadata(*f);
  exercise_weights(f);
  return 0;
}
