#include "engine/proposer_factory.h"

#include <fmt/format.h>

#include "core/log.h"
#include "engine/eagle_head.h"
#include "engine/load_format.h"
#include "io/hub/hub_options.h"
#include "io/model_files.h"
#include "io/model_location.h"
#include "spec/make_proposer.h"

namespace pagoda {
namespace {

// method eagle: loads and checks the head (engine/eagle_head.h), then
// refuses: drafting from the target's hidden states is not built yet.
Status check_eagle_head(const EngineOptions& options, const DraftModelTarget& target) {
  const SpeculativeConfig& spec = options.speculative;
  auto fail = [&](const std::string& what) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("--speculative-config: EAGLE head '{}' for target '{}': {}",
                                  spec.model, target.name, what));
  };
  Result<ModelLocation> location =
      resolve_model(spec.model, HubOptions::from_env(spec.revision, options.download_dir));
  if (!location.ok()) return fail(location.error().message);
  Result<OpenedModel> opened = open_model_as(*location, "auto");
  if (!opened.ok()) return fail(opened.error().message);
  Result<EagleHead> head = load_eagle_head(opened->config, *opened->weights,
                                           {target.name, target.hidden_size, target.vocab_size});
  if (!head.ok()) return head.error();
  return fail(
      "the head loads and matches the target, but drafting from the target's hidden states is "
      "not built yet (issue 18); use ngram, suffix or draft_model");
}

}  // namespace

Result<std::unique_ptr<Proposer>> make_proposer(const EngineOptions& options,
                                                const DraftModelTarget& target) {
  const SpeculativeConfig& config = options.speculative;
  if (!config.enabled()) return std::unique_ptr<Proposer>();
  std::unique_ptr<Proposer> proposer;
  if (config.method == SpecMethod::kDraftModel) {
    PAGODA_ASSIGN_OR_RETURN(std::unique_ptr<DraftModelProposer> draft,
                            DraftModelProposer::create(options, target));
    proposer = std::move(draft);
  } else if (config.method == SpecMethod::kEagle) {
    PAGODA_RETURN_IF_ERROR(check_eagle_head(options, target));
  } else {
    PAGODA_ASSIGN_OR_RETURN(proposer, make_spec_proposer(config));
  }
  log_info("speculative decoding: {}{}, {} tokens drafted per step{}",
           spec_method_name(config.method), config.model.empty() ? "" : " " + config.model,
           config.num_speculative_tokens,
           config.disable_by_batch_size > 0
               ? fmt::format(" while at most {} sequences run", config.disable_by_batch_size)
               : "");
  return proposer;
}

}  // namespace pagoda
