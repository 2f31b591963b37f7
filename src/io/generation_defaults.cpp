#include "io/generation_defaults.h"

#include <filesystem>

#include "io/hf_config.h"

namespace pagoda {

namespace {

// The sampling fields of GenerationDefaults, each with its GGUF key.
template <typename Fn>
void for_each_sampling_field(Fn&& fn) {
  fn("general.sampling.temp", &GenerationDefaults::temperature);
  fn("general.sampling.top_p", &GenerationDefaults::top_p);
  fn("general.sampling.top_k", &GenerationDefaults::top_k);
  fn("general.sampling.min_p", &GenerationDefaults::min_p);
  fn("general.sampling.penalty_repeat", &GenerationDefaults::repetition_penalty);
  fn(nullptr, &GenerationDefaults::max_new_tokens);
}

}  // namespace

Result<GenerationDefaults> gguf_sampling_defaults(const GgufFile& file) {
  GenerationDefaults g;
  Status status = Status::Ok();
  for_each_sampling_field([&](const char* key, auto member) {
    if (key == nullptr || !status.ok() || !file.has(key)) return;
    using Value = typename std::remove_reference_t<decltype(g.*member)>::value_type;
    if constexpr (std::is_same_v<Value, double>) {
      if (auto v = file.get_float(key)) g.*member = *v;
    } else {
      if (auto v = file.get_int(key)) g.*member = *v;
    }
    if (!(g.*member)) {
      status = make_error(ErrorCode::kInvalidArgument,
                          std::string(key) + " has the wrong type (" + file.path() + ")");
    }
  });
  if (!status.ok()) return status.error();
  return g;
}

GenerationDefaults override_sampling(GenerationDefaults base, const GenerationDefaults& over) {
  for_each_sampling_field([&](const char*, auto member) {
    if (over.*member) base.*member = over.*member;
  });
  return base;
}

bool has_sampling(const GenerationDefaults& g) {
  bool any = false;
  for_each_sampling_field([&](const char*, auto member) { any = any || (g.*member).has_value(); });
  return any;
}

Result<SamplingDefaults> select_sampling_defaults(const std::string& choice,
                                                  const GenerationDefaults& model,
                                                  const std::string& model_source) {
  SamplingDefaults out;
  if (choice == "vllm") return out;
  if (choice == "auto") {
    out.values = override_sampling({}, model);
    if (has_sampling(out.values)) out.source = model_source;
    return out;
  }
  const std::filesystem::path path = std::filesystem::path(choice) / "generation_config.json";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return make_error(ErrorCode::kNotFound, "--generation-config " + choice +
                                                ": no generation_config.json in that folder "
                                                "(give auto, vllm, or a folder that has one)");
  }
  PAGODA_ASSIGN_OR_RETURN(GenerationDefaults file, load_generation_config(path.string()));
  out.values = override_sampling({}, file);
  if (has_sampling(out.values)) out.source = path.string();
  return out;
}

}  // namespace pagoda
