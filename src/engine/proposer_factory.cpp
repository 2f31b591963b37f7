#include "engine/proposer_factory.h"

#include <fmt/format.h>

#include "core/log.h"
#include "engine/eagle_proposer.h"
#include "spec/make_proposer.h"

namespace pagoda {

Result<std::unique_ptr<Proposer>> make_proposer(const EngineOptions& options,
                                                const DraftModelTarget& target) {
  const SpeculativeConfig& config = options.speculative;
  if (!config.enabled()) return std::unique_ptr<Proposer>();
  std::unique_ptr<Proposer> proposer;
  if (config.method == SpecMethod::kDraftModel) {
    PAGODA_ASSIGN_OR_RETURN(std::unique_ptr<DraftModelProposer> draft,
                            DraftModelProposer::create(options, target));
    proposer = std::move(draft);
  } else if (config.method == SpecMethod::kEagle || config.method == SpecMethod::kEagle3) {
    PAGODA_ASSIGN_OR_RETURN(std::unique_ptr<EagleProposer> eagle,
                            EagleProposer::create(options, target));
    proposer = std::move(eagle);
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
