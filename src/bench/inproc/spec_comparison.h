// `bench latency --speculative-replay K / --speculative-random K`: the same
// workload run without speculation and then with a benchmark proposer
// (spec/replay_proposer.h: the first run's own greedy outputs, every draft
// accepted; spec/random_proposer.h: random ids, none accepted), reported
// side by side.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace pagoda::bench {

// Fields: proposer ("replay" | "replay-forced" | "random"), num_speculative_tokens, baseline
// and speculative (two latency_report()s, the second with the spec_*
// fields), tpot_speedup (baseline TPOT / speculative TPOT, i.e. the ratio of
// decode tok/s), output_tok_s_speedup (end-to-end, prefill included),
// step_ratio (speculative steps / baseline steps) and same_outputs (every
// request generated the same tokens in both runs: speculation must not
// change greedy outputs).
nlohmann::json spec_comparison(const std::string& proposer, int k, nlohmann::json baseline,
                               nlohmann::json speculative, bool same_outputs);
std::string format_spec_comparison(const nlohmann::json& report);

}  // namespace pagoda::bench
