#include "engine/draft_model_proposer.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/kv_cache_dtype.h"
#include "core/log.h"
#include "core/units.h"
#include "engine/backend_factory.h"
#include "engine/load_format.h"
#include "io/hub/hub_options.h"
#include "io/model_files.h"
#include "io/model_location.h"
#include "tokenizer/tokenizer.h"

namespace pagoda {
namespace {

std::string id_or_none(std::optional<int32_t> id) {
  return id ? std::to_string(*id) : std::string("none");
}

// Why the draft's vocabulary is not the target's ("" when it is): its logits
// width above the target's, or its tokenizer unlike the target's. Every
// piece is compared: id_to_token over the vocabulary costs milliseconds even
// for 150k ids.
std::string vocabulary_mismatch(const ModelConfig& draft_config, const Tokenizer& draft,
                                const DraftModelTarget& target) {
  if (draft_config.vocab_size > target.vocab_size) {
    return fmt::format("its vocabulary ({} logits) is larger than the target's ({})",
                       draft_config.vocab_size, target.vocab_size);
  }
  const Tokenizer& want = *target.tokenizer;
  if (draft.vocab_size() != want.vocab_size()) {
    return fmt::format("its tokenizer has {} tokens, the target's {}", draft.vocab_size(),
                       want.vocab_size());
  }
  if (draft.bos_id() != want.bos_id() || draft.eos_id() != want.eos_id()) {
    return fmt::format("its bos / eos ids are {} / {}, the target's {} / {}",
                       id_or_none(draft.bos_id()), id_or_none(draft.eos_id()),
                       id_or_none(want.bos_id()), id_or_none(want.eos_id()));
  }
  for (int32_t id = 0; id < want.vocab_size(); ++id) {
    if (draft.id_to_token(id) != want.id_to_token(id)) {
      return fmt::format("token {} is '{}' in its tokenizer, '{}' in the target's", id,
                         draft.id_to_token(id), want.id_to_token(id));
    }
  }
  return {};
}

}  // namespace

Result<std::unique_ptr<DraftModelProposer>> DraftModelProposer::create(
    const EngineOptions& options, const DraftModelTarget& target) {
  const SpeculativeConfig& spec = options.speculative;
  auto fail = [&](const std::string& what) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("--speculative-config: draft model '{}' for target '{}': {}",
                                  spec.model, target.name, what));
  };
  if (spec.model.empty()) return fail("no \"model\" given");
  if (target.tokenizer == nullptr || target.vocab_size < 1 || target.kv_tokens < 1) {
    return make_error(ErrorCode::kInternal, "DraftModelProposer::create: incomplete target info");
  }
  Result<ModelLocation> location =
      resolve_model(spec.model, HubOptions::from_env(spec.revision, options.download_dir));
  if (!location.ok()) return fail(location.error().message);
  Result<OpenedModel> opened = open_model_as(*location, options.load_format);
  if (!opened.ok()) return fail(opened.error().message);
  Result<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::load(*opened);
  if (!tokenizer.ok()) {
    return fail("its tokenizer (needed to check that it is the target's) did not load: " +
                tokenizer.error().message);
  }
  const std::string mismatch = vocabulary_mismatch(opened->config, **tokenizer, target);
  if (!mismatch.empty()) return fail("not the target's vocabulary: " + mismatch);

  Result<std::unique_ptr<Backend>> backend = create_backend(options.device, opened->config);
  if (!backend.ok()) return fail(backend.error().message);
  RunnerOptions ro;
  ro.block_size = options.block_size;
  ro.num_kv_blocks = (target.kv_tokens + options.block_size - 1) / options.block_size;
  ro.max_num_batched_tokens = options.max_num_batched_tokens;
  ro.max_num_seqs = options.max_num_seqs;
  ro.enforce_eager = options.enforce_eager;
  ro.keep_weight_blocks = !options.gguf_dequantize;
  // The target's --kv-cache-dtype (vLLM's draft shares the cache config).
  const Result<KvCacheDtype> kv_dtype = parse_kv_cache_dtype(options.kv_cache_dtype);
  if (!kv_dtype.ok()) return fail(kv_dtype.error().message);
  ro.kv_cache_dtype = *kv_dtype;
  int64_t max_len =
      std::min(opened->config.max_position_embeddings, ro.num_kv_blocks * ro.block_size);
  if (target.max_model_len > 0) max_len = std::min(max_len, target.max_model_len);
  ro.max_model_len = max_len;
  Result<std::unique_ptr<ModelRunner>> runner =
      ModelRunner::create(**backend, opened->config, *opened->weights, ro);
  if (!runner.ok() && runner.error().code == ErrorCode::kResourceExhausted &&
      (*backend)->kind() == DeviceKind::kCuda) {
    // The GPU has less room than the target's capacity needs: the pool takes
    // what is left after the draft's weights and scratch (less the device's
    // free reserve), sized by the runner's fraction rule at fraction 1.
    log_warn("draft model: {}; its KV cache takes the GPU memory left instead",
             runner.error().message);
    ro.num_kv_blocks = 0;
    ro.kv_cache_memory_fraction = 1.0;
    ro.max_model_len = 0;
    runner = ModelRunner::create(**backend, opened->config, *opened->weights, ro);
  }
  if (!runner.ok()) {
    return fail(runner.error().message +
                ((*backend)->kind() == DeviceKind::kCuda
                     ? " (the draft takes GPU memory beyond --gpu-memory-utilization: lower it)"
                     : ""));
  }
  const ModelRunner& r = **runner;
  log_info(
      "draft model: {} ({}, {} layers, vocab {}) on {}; its KV cache: {} blocks x {} tokens = "
      "{} tokens ({:.2f} GiB {}{}); max model len {}",
      location->display_name, opened->config.architecture, opened->config.num_layers,
      opened->config.vocab_size, (*backend)->name(), r.num_kv_blocks(), r.block_size(),
      r.num_kv_blocks() * r.block_size(),
      to_gib(static_cast<double>(r.num_kv_blocks() * r.kv_block_bytes())),
      kv_cache_dtype_name(r.kv_cache_dtype()),
      r.kv_scales_source().empty() ? "" : "; k/v scales " + r.kv_scales_source(),
      r.max_model_len());
  return std::unique_ptr<DraftModelProposer>(
      new DraftModelProposer(std::move(backend).value(), std::move(runner).value()));
}

DraftModelProposer::DraftModelProposer(std::unique_ptr<Backend> backend,
                                       std::unique_ptr<ModelRunner> runner)
    : backend_(std::move(backend)),
      runner_(std::move(runner)),
      kv_(static_cast<int32_t>(runner_->num_kv_blocks()), runner_->block_size(),
          static_cast<int32_t>(runner_->max_blocks_per_seq()),
          [this](int64_t seq_id) { seqs_.erase(seq_id); }),
      batcher_(*runner_),
      // Row pos reads the token at pos; a draft is the next position's token.
      callbacks_{[this](int64_t seq_id, int32_t pos) {
                   return seqs_.at(seq_id).tokens[static_cast<size_t>(pos)];
                 },
                 [this](int64_t seq_id, int32_t token) { seqs_.at(seq_id).tokens.push_back(token); },
                 {},
                 {}} {}

DraftModelProposer::~DraftModelProposer() = default;

int32_t DraftModelProposer::num_computed(int64_t seq_id) const {
  auto it = seqs_.find(seq_id);
  return it == seqs_.end() ? 0 : static_cast<int32_t>(it->second.tokens.size());
}

void DraftModelProposer::drop(int64_t seq_id) {
  kv_.drop(seq_id);
  seqs_.erase(seq_id);
}

void DraftModelProposer::on_sequence_end(int64_t seq_id, std::span<const int32_t> tokens,
                                         int32_t num_prompt_tokens) {
  (void)tokens, (void)num_prompt_tokens;
  drop(seq_id);
}

Status DraftModelProposer::propose(std::span<const DraftInput> inputs,
                                   std::vector<std::vector<int32_t>>& drafts) {
  drafts.resize(inputs.size());
  for (auto& d : drafts) d.clear();
  kv_.begin_call();
  const int64_t max_len = runner_->max_model_len();
  const int64_t vocab = runner_->config().vocab_size;
  // Draft lengths of the sequences that are drafted, by input index.
  std::vector<int32_t> num_drafts(inputs.size(), 0);
  std::vector<DraftPiece> pieces;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const DraftInput& in = inputs[i];
    const int64_t len = static_cast<int64_t>(in.tokens.size());
    // Drafts 1..k sit at positions len .. len + k - 1; the last one is never computed.
    const int64_t k = std::min<int64_t>(in.max_draft, max_len - len + 1);
    if (len == 0 || k < 1) {
      drop(in.seq_id);
      continue;
    }
    SeqState& s = seqs_[in.seq_id];
    kv_.mark_drafted(in.seq_id);
    // The last token is always recomputed: its logits give draft 1.
    const auto kept =
        std::mismatch(s.tokens.begin(), s.tokens.end(), in.tokens.begin(), in.tokens.end() - 1)
            .first;
    s.tokens.erase(kept, s.tokens.end());
    // A target token past the draft's vocabulary (a wider target vocabulary)
    // cannot be computed: this sequence gets no draft while it is uncomputed.
    const bool in_vocab = std::all_of(in.tokens.begin() + std::ssize(s.tokens), in.tokens.end(),
                                      [&](int32_t t) { return t >= 0 && t < vocab; });
    if (!in_vocab || !kv_.reserve(in.seq_id, static_cast<int32_t>(len + k - 1))) {
      // Its computed tokens stay while it holds blocks (a state with none is dropped).
      if (!kv_.manager().contains(in.seq_id)) drop(in.seq_id);
      continue;
    }
    // Blocks past this call's slots (a longer earlier extent) go back.
    kv_.shrink(in.seq_id, static_cast<int32_t>(len + k - 1));
    const int32_t begin = static_cast<int32_t>(s.tokens.size());
    s.tokens.assign(in.tokens.begin(), in.tokens.end());
    pieces.push_back({in.seq_id, begin, static_cast<int32_t>(len), i});
    num_drafts[i] = static_cast<int32_t>(k);
  }
  // Draft 1 from each sequence's last position, then drafts 2..k: one
  // greedy decode step each, over the sequences that want more.
  const Status status = batcher_.draft(pieces, num_drafts, kv_.manager(), callbacks_, drafts);
  if (!status.ok()) {
    for (const DraftPiece& piece : pieces) drop(piece.seq_id);
  }
  return status;
}

}  // namespace pagoda
