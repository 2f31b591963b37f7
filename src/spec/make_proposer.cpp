#include "spec/make_proposer.h"

#include <fmt/format.h>

#include "spec/ngram_proposer.h"
#include "spec/suffix_proposer.h"

namespace pagoda {

Result<std::unique_ptr<Proposer>> make_spec_proposer(const SpeculativeConfig& config) {
  switch (config.method) {
    case SpecMethod::kNgram:
      return std::unique_ptr<Proposer>(std::make_unique<NgramProposer>(config));
    case SpecMethod::kSuffix:
      return std::unique_ptr<Proposer>(std::make_unique<SuffixProposer>(config));
    case SpecMethod::kDraftModel:
    case SpecMethod::kEagle:
    case SpecMethod::kEagle3:
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("speculative method {}: its model is built by the engine",
                                    spec_method_name(config.method)));
    case SpecMethod::kNone:
      break;
  }
  return make_error(ErrorCode::kInvalidArgument, "speculative decoding is off: no proposer");
}

}  // namespace pagoda
