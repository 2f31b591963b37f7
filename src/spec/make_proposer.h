// make_spec_proposer: the Proposer of a --speculative-config method that
// needs no model (ngram, suffix). Draft models are built by the engine,
// which owns model loading: for draft_model, eagle (and kNone) this returns
// kInvalidArgument.
#pragma once

#include <memory>

#include "core/result.h"
#include "spec/proposer.h"
#include "spec/spec_config.h"

namespace pagoda {

Result<std::unique_ptr<Proposer>> make_spec_proposer(const SpeculativeConfig& config);

}  // namespace pagoda
