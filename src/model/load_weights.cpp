#include "model/load_weights.h"

#include <fmt/format.h>

#include <chrono>
#include <string>

#include "core/log.h"
#include "core/units.h"
#include "model/weight_loader.h"

namespace pagoda {

Result<ModelWeights> load_model_weights(const Architecture& arch, const ModelConfig& config,
                                        Backend& backend, WeightSource& source, TpShard shard,
                                        PpStage stage, bool keep_blocks) {
  const auto start = std::chrono::steady_clock::now();
  ModelWeights w;
  WeightLoader loader(backend, source, &w, shard, stage, keep_blocks, config.quantization);
  PAGODA_RETURN_IF_ERROR(arch.load(config, loader, &w));
  loader.finish();
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (shard.rank != 0) return w;
  std::string parallel;
  if (shard.size > 1)
    parallel = fmt::format("tensor-parallel rank 0 of {}; each rank its shard", shard.size);
  if (stage.size > 1) {
    const IndexRange layers = pp_layers(config, stage);
    parallel += fmt::format("{}pipeline stage {} of {}: layers {}-{}", parallel.empty() ? "" : "; ",
                            stage.rank, stage.size, layers.begin, layers.end - 1);
  }
  std::string formats;
  for (const auto& [dtype, f] : w.bytes_by_dtype)
    formats +=
        fmt::format("{}{} {} tensors {:.2f} GiB", formats.empty() ? "" : ", ", dtype_name(dtype),
                    f.num_tensors, to_gib(static_cast<double>(f.num_bytes)));
  log_info("uploaded {} tensors of {} ({}): {:.2f} GiB read, {:.2f} GiB on {} in {:.1f} s{}",
           loader.num_tensors_read(), source.describe(), config.architecture,
           to_gib(static_cast<double>(loader.num_bytes_read())),
           to_gib(static_cast<double>(w.num_bytes)), backend.name(), secs,
           parallel.empty() ? "" : " (" + parallel + ")");
  log_info("weights on {} by format: {}; linear layers: {}", backend.name(), formats,
           describe_quantization(config.quantization, dtype_name(backend.compute_dtype())));
  return w;
}

}  // namespace pagoda
