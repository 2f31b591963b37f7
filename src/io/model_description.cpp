#include "io/model_description.h"

#include <algorithm>
#include <filesystem>

#include "io/generation_defaults.h"
#include "io/gguf_model.h"
#include "io/hf_config.h"
#include "io/mapped_file.h"

namespace pagoda {

namespace {

namespace fs = std::filesystem;

Status describe_hf(const fs::path& dir, ModelDescription* d) {
  PAGODA_ASSIGN_OR_RETURN(d->config, load_hf_config((dir / "config.json").string()));
  // ModelOpt checkpoints may describe their quantisation only here.
  const fs::path modelopt = dir / "hf_quant_config.json";
  std::error_code ec;
  if (!d->config.quantization.fp8() && fs::is_regular_file(modelopt, ec)) {
    PAGODA_ASSIGN_OR_RETURN(std::string text, read_file_text(modelopt.string()));
    PAGODA_ASSIGN_OR_RETURN(d->config.quantization, parse_hf_quant_config(text, modelopt.string()));
  }
  PAGODA_ASSIGN_OR_RETURN(d->generation, load_folder_generation_config(dir.string()));
  if (has_sampling(d->generation)) d->generation_source = (dir / "generation_config.json").string();
  PAGODA_ASSIGN_OR_RETURN(d->tokenizer_files, read_hf_tokenizer_config(dir));
  return Status::Ok();
}

Status describe_gguf(const std::string& path, ModelDescription* d) {
  PAGODA_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> file, GgufFile::open(path));
  d->gguf = std::shared_ptr<const GgufFile>(std::move(file));
  PAGODA_ASSIGN_OR_RETURN(d->config, gguf_model_config(*d->gguf));
  PAGODA_ASSIGN_OR_RETURN(d->generation, gguf_sampling_defaults(*d->gguf));
  if (has_sampling(d->generation)) d->generation_source = path + " (general.sampling.*)";
  const fs::path folder = fs::path(path).parent_path();
  PAGODA_ASSIGN_OR_RETURN(GenerationDefaults beside,
                          load_folder_generation_config(folder.empty() ? "." : folder.string()));
  if (has_sampling(beside)) {
    d->generation = override_sampling(std::move(d->generation), beside);
    d->generation_source += (d->generation_source.empty() ? "" : ", overridden by ") +
                            (folder / "generation_config.json").string();
  }
  d->generation.eos_token_ids = d->config.eos_token_ids;
  d->tokenizer_files.chat_templates = gguf_chat_templates(*d->gguf);
  return Status::Ok();
}

}  // namespace

Result<ModelDescription> describe_model(const ModelLocation& location) {
  ModelDescription d;
  d.location = location;
  if (location.format == ModelFormat::kHuggingFace) {
    PAGODA_RETURN_IF_ERROR(describe_hf(fs::path(location.path), &d));
  } else {
    PAGODA_RETURN_IF_ERROR(describe_gguf(location.path, &d));
  }
  std::vector<int32_t>& eos = d.eos_token_ids;
  eos = d.config.eos_token_ids;
  eos.insert(eos.end(), d.generation.eos_token_ids.begin(), d.generation.eos_token_ids.end());
  std::sort(eos.begin(), eos.end());
  eos.erase(std::unique(eos.begin(), eos.end()), eos.end());
  return d;
}

}  // namespace pagoda
