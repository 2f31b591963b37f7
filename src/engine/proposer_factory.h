// The speculative-decoding proposer of --speculative-config
// (docs/speculative-decoding.md): ngram and suffix from spec/
// (make_spec_proposer), draft_model and eagle loaded here (DraftModelProposer,
// EagleProposer).
#pragma once

#include <memory>

#include "core/result.h"
#include "engine/draft_model_proposer.h"
#include "engine/engine_api.h"
#include "spec/proposer.h"

namespace pagoda {

// options.speculative's proposer; null when speculation is off. `target`
// describes the loaded target (draft_model reads its tokenizer, vocabulary,
// context and pool size; eagle its runner). Logs the method and k.
Result<std::unique_ptr<Proposer>> make_proposer(const EngineOptions& options,
                                                const DraftModelTarget& target);

}  // namespace pagoda
