#include "engine/eagle_proposer.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/log.h"
#include "engine/eagle_head.h"
#include "engine/load_format.h"
#include "io/hub/hub_options.h"
#include "io/mapped_file.h"
#include "io/model_files.h"
#include "io/model_location.h"
#include "model/eagle.h"
#include "model/eagle3.h"

namespace pagoda {

namespace {

// The head's location (options.speculative.model), errors naming it and the target.
Result<ModelLocation> resolve_head(const EngineOptions& options, const std::string& target_name) {
  const SpeculativeConfig& spec = options.speculative;
  auto fail = [&](const std::string& what) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("--speculative-config: EAGLE head '{}' for target '{}': {}",
                                  spec.model, target_name, what));
  };
  if (spec.model.empty()) return fail("no \"model\" given");
  Result<ModelLocation> location =
      resolve_model(spec.model, HubOptions::from_env(spec.revision, options.download_dir));
  if (!location.ok()) return fail(location.error().message);
  return location;
}

Result<Eagle3Fields> read_eagle3_fields(const ModelLocation& location,
                                        const EagleHeadTarget& target) {
  PAGODA_ASSIGN_OR_RETURN(std::string config_json,
                          read_file_text(location.path + "/config.json"));
  return parse_eagle3_fields(config_json, target);
}

// The head runner's options beyond its architecture: the target's weights
// shared, its pool sized to the target's capacity plus k + 1 tokens per
// --max-num-seqs, the engine's step limits.
void set_head_runner_options(const EngineOptions& options, const DraftModelTarget& target,
                             const ModelConfig& head, RunnerOptions* ro) {
  ro->shared_globals = &target.runner->weights();
  ro->block_size = options.block_size;
  const int64_t tokens = target.kv_tokens + options.max_num_seqs *
                                                (options.speculative.num_speculative_tokens + 1);
  ro->num_kv_blocks = (tokens + options.block_size - 1) / options.block_size;
  ro->max_num_batched_tokens = options.max_num_batched_tokens;
  ro->max_num_seqs = options.max_num_seqs;
  ro->enforce_eager = options.enforce_eager;
  ro->max_model_len = std::min(head.max_position_embeddings, ro->num_kv_blocks * ro->block_size);
  if (target.max_model_len > 0)
    ro->max_model_len = std::min(ro->max_model_len, target.max_model_len);
}

}  // namespace

Result<std::vector<int64_t>> eagle3_aux_layers(const EngineOptions& options,
                                               const EagleHeadTarget& target) {
  PAGODA_ASSIGN_OR_RETURN(ModelLocation location, resolve_head(options, target.name));
  PAGODA_ASSIGN_OR_RETURN(Eagle3Fields fields, read_eagle3_fields(location, target));
  return fields.aux_layer_ids;
}

Result<std::unique_ptr<EagleProposer>> EagleProposer::create(const EngineOptions& options,
                                                             const DraftModelTarget& target) {
  const SpeculativeConfig& spec = options.speculative;
  auto fail = [&](const std::string& what) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("--speculative-config: EAGLE head '{}' for target '{}': {}",
                                  spec.model, target.name, what));
  };
  PAGODA_ASSIGN_OR_RETURN(ModelLocation location, resolve_head(options, target.name));
  Result<OpenedModel> opened = open_model_as(location, "auto");
  if (!opened.ok()) return fail(opened.error().message);
  const bool eagle3 = spec.method == SpecMethod::kEagle3;
  if (!eagle3) {
    Result<EagleHead> head = load_eagle_head(opened->config, *opened->weights,
                                             {target.name, target.hidden_size, target.vocab_size});
    if (!head.ok()) return head.error();
  }
  if (target.runner == nullptr || !target.runner->is_last_stage() ||
      target.runner->layers().size() != target.runner->config().num_layers)
    return fail("the target runs on more than one GPU (tensor or pipeline parallelism); EAGLE "
                "needs it on one");
  const ModelRunner& t = *target.runner;
  ModelConfig config = opened->config;
  config.vocab_size = target.vocab_size;
  RunnerOptions ro;
  ro.architecture = &eagle_architecture();
  std::vector<int32_t> draft_to_target;  // EAGLE-3: draft id -> target id
  if (eagle3) {
    // Checked in full on the host (a wrong head fails naming what differs);
    // the runner then loads it in the compute dtype.
    const EagleHeadTarget head_target{target.name, target.hidden_size, target.vocab_size,
                                      t.config().num_layers};
    PAGODA_ASSIGN_OR_RETURN(Eagle3Fields fields, read_eagle3_fields(location, head_target));
    PAGODA_ASSIGN_OR_RETURN(Eagle3Head head, load_eagle3_head(opened->config, fields,
                                                              *opened->weights, head_target));
    const Tensor aux = t.aux_hidden_states();
    if (aux.empty() || aux.dim(0) != 3)
      return fail(fmt::format("the target keeps no aux hidden states of layers {}, {}, {} (the "
                              "engine sets them for \"method\": \"eagle3\")",
                              fields.aux_layer_ids[0], fields.aux_layer_ids[1],
                              fields.aux_layer_ids[2]));
    draft_to_target = std::move(head.draft_to_target);
    config.vocab_size = fields.draft_vocab_size;
    ro.architecture = &eagle3_architecture();
    ro.input_vocab_size = target.vocab_size;
  }
  set_head_runner_options(options, target, config, &ro);
  Result<std::unique_ptr<ModelRunner>> runner =
      ModelRunner::create(t.backend(), config, *opened->weights, ro);
  if (!runner.ok()) return fail(runner.error().message);
  const ModelRunner& r = **runner;
  log_info("EAGLE{} head: {} (hidden {}, {} heads{}{}) on {}; its KV cache and hidden-state pool: "
           "{} blocks x {} tokens; max model len {}",
           eagle3 ? "-3" : "", location.display_name, config.hidden_size, config.num_heads,
           r.weights().embed.data == t.weights().embed.data ? ", the target's embedding" : "",
           eagle3 ? fmt::format(", draft vocabulary {}", config.vocab_size) : std::string(),
           t.backend().name(), r.num_kv_blocks(), r.block_size(), r.max_model_len());
  return std::unique_ptr<EagleProposer>(new EagleProposer(
      std::move(runner).value(), std::move(draft_to_target), t.max_num_batched_tokens()));
}

EagleProposer::EagleProposer(std::unique_ptr<ModelRunner> runner,
                             std::vector<int32_t> draft_to_target, int64_t max_target_rows)
    : runner_(std::move(runner)),
      kv_(static_cast<int32_t>(runner_->num_kv_blocks()), runner_->block_size(),
          static_cast<int32_t>(runner_->max_blocks_per_seq()),
          [this](int64_t seq_id) { seqs_.erase(seq_id); }),
      batcher_(*runner_),
      draft_to_target_(std::move(draft_to_target)),
      // Row i reads token i + 1; its output hidden state (EAGLE-3: the
      // pre-norm one) goes to the pool row of the next position, which the
      // next chained row reads.
      callbacks_{[this](int64_t seq_id, int32_t pos) {
                   return seqs_.at(seq_id).tokens[static_cast<size_t>(pos) + 1];
                 },
                 [this](int64_t seq_id, int32_t token) { seqs_.at(seq_id).tokens.push_back(token); },
                 [this](const DraftPiece& piece, int32_t row, int32_t /*token*/) {
                   copy_to_pool(eagle3() ? runner_->residual_states() : runner_->hidden_states(),
                                row, piece.seq_id, piece.end, 1);
                 },
                 nullptr} {
  if (eagle3()) {
    callbacks_.to_target = [this](int32_t id) {
      return draft_to_target_[static_cast<size_t>(id)];
    };
    const size_t bytes = static_cast<size_t>(max_target_rows * runner_->config().hidden_size) *
                         dtype_size(runner_->backend().compute_dtype());
    for (DeviceBuffer& b : fc_scratch_) b = DeviceBuffer(&runner_->backend(), bytes);
  }
}

EagleProposer::~EagleProposer() = default;

void EagleProposer::drop(int64_t seq_id) {
  kv_.drop(seq_id);
  seqs_.erase(seq_id);
}

void EagleProposer::on_sequence_end(int64_t seq_id, std::span<const int32_t> tokens,
                                    int32_t num_prompt_tokens) {
  (void)num_prompt_tokens;
  const auto it = seqs_.find(seq_id);
  if (it == seqs_.end() || it->second.keys.empty() || tokens.empty()) {
    drop(seq_id);
    return;
  }
  const SeqState& s = it->second;
  // Row i is valid when it read the final tokens[0, i + 1] (computed: i + 1
  // < s.tokens.size()) and the target's hidden row i (i < hidden_end; the
  // pool rows from there may hold the head's own outputs).
  const auto same = static_cast<int32_t>(
      std::mismatch(s.tokens.begin(), s.tokens.end(), tokens.begin(), tokens.end()).first -
      s.tokens.begin());
  const int32_t num_rows = std::min(s.hidden_end, same - 1);
  kv_.cache_and_drop(seq_id, tokens.subspan(1), std::max(num_rows, 0));
  seqs_.erase(it);
}

EagleProposer::SeqState EagleProposer::start_state(int32_t first_pos,
                                                   const HiddenRowsPrefix& prefix,
                                                   PrefixHit* hit) const {
  *hit = PrefixHit{};
  SeqState s{
      .kv_start = first_pos, .tokens = {}, .hidden_end = first_pos, .reused_end = 0, .keys = {}};
  if (prefix.tokens.empty()) return s;
  std::vector<uint64_t> keys(prefix.cache_keys.begin(), prefix.cache_keys.end());
  keys.push_back(static_cast<uint64_t>(static_cast<uint32_t>(prefix.tokens[0])));
  PrefixHit found = kv_.find_cached(prefix.tokens.subspan(1), keys);
  if (found.num_tokens < first_pos) return s;  // a gap before first_pos: today's start
  s.kv_start = 0;
  s.reused_end = s.hidden_end = found.num_tokens;
  // Row i read token i + 1: rows [0, reused_end) read tokens up to reused_end.
  if (s.reused_end > 0)
    s.tokens.assign(prefix.tokens.begin(), prefix.tokens.begin() + s.reused_end + 1);
  s.keys = std::move(keys);
  *hit = std::move(found);
  return s;
}

void EagleProposer::copy_to_pool(const Tensor& src, int64_t src_row, int64_t seq_id, int32_t pos,
                                 int32_t n) {
  const Tensor pool = runner_->hidden_pool();
  const size_t row_bytes = static_cast<size_t>(pool.dim(1)) * dtype_size(pool.dtype);
  const int32_t bs = kv_.block_size();
  const std::span<const int32_t> table = kv_.manager().block_table(seq_id);
  pos -= seqs_.at(seq_id).kv_start;  // the table's row
  while (n > 0) {
    const int32_t run = std::min(n, bs - pos % bs);
    const int64_t slot = static_cast<int64_t>(table[static_cast<size_t>(pos / bs)]) * bs + pos % bs;
    runner_->backend().copy_device(static_cast<char*>(pool.data) + slot * row_bytes,
                                   static_cast<const char*>(src.data) + src_row * row_bytes,
                                   run * row_bytes);
    pos += run;
    src_row += run;
    n -= run;
  }
}

void EagleProposer::copy_pool_rows(int64_t from_seq, int64_t to_seq, int32_t n) {
  const Tensor pool = runner_->hidden_pool();
  const size_t row_bytes = static_cast<size_t>(pool.dim(1)) * dtype_size(pool.dtype);
  const int32_t bs = kv_.block_size();
  const std::span<const int32_t> src = kv_.manager().block_table(from_seq);
  const std::span<const int32_t> dst = kv_.manager().block_table(to_seq);
  for (size_t b = 0; static_cast<int32_t>(b) * bs < n; ++b) {
    const int32_t rows = std::min(bs, n - static_cast<int32_t>(b) * bs);
    runner_->backend().copy_device(static_cast<char*>(pool.data) + dst[b] * bs * row_bytes,
                                   static_cast<const char*>(pool.data) + src[b] * bs * row_bytes,
                                   rows * row_bytes);
  }
}

void EagleProposer::on_fork(int64_t parent, int64_t child) {
  const auto it = seqs_.find(parent);
  if (it == seqs_.end() || seqs_.contains(child)) return;
  const SeqState from{.kv_start = it->second.kv_start,
                      .tokens = {},  // no head row computed
                      .hidden_end = it->second.hidden_end,
                      .reused_end = 0,  // its own blocks, cached at its end as the parent's
                      .keys = it->second.keys};
  const int32_t n = from.hidden_end - from.kv_start;
  kv_.mark_drafted(parent);  // not evicted by the child's reserve
  if (n < 1 || !kv_.reserve(child, n, {}, from.keys)) return;
  seqs_.emplace(child, from);
  copy_pool_rows(parent, child, n);
}

void EagleProposer::apply_fc(std::span<const Tensor> aux) {
  Backend& be = runner_->backend();
  const ModelWeights& w = runner_->weights();
  const int64_t n = aux[0].dim(0), h = aux[0].dim(1);
  const DType cd = aux[0].dtype;
  Tensor out = fc_scratch_[0].tensor(cd, {n, h});
  Tensor part = fc_scratch_[1].tensor(cd, {n, h});
  Tensor discarded = fc_scratch_[2].tensor(cd, {n, h});
  be.linear(aux[0], w.eagle3_fc[0], Tensor(), out);
  for (size_t j = 1; j < 3; ++j) {
    be.linear(aux[j], w.eagle3_fc[j], Tensor(), part);
    // out += part; the norm (any [H] weight) goes to a buffer nothing reads.
    be.add_rms_norm(out, part, w.eagle3_hidden_norm, 1e-6f, discarded);
  }
  fc_rows_ = n;
}

void EagleProposer::on_aux_hidden_states(std::span<const Tensor> aux) {
  fc_rows_ = 0;
  if (eagle3() && aux.size() == 3 && aux[0].dim(0) > 0) apply_fc(aux);
}

void EagleProposer::on_hidden_states(int64_t seq_id, int32_t first_pos, const Tensor& rows,
                                     int32_t aux_row, const HiddenRowsPrefix& prefix) {
  const int32_t n = static_cast<int32_t>(rows.dim(0));
  if (eagle3() && (aux_row < 0 || aux_row + n > fc_rows_)) {
    drop(seq_id);  // EAGLE-3 without this forward's fc rows: a gap, no drafts
    return;
  }
  auto it = seqs_.find(seq_id);
  if (it != seqs_.end() &&
      (first_pos > it->second.hidden_end || first_pos < it->second.kv_start)) {
    drop(seq_id);  // a gap after the rows it has, or rows before them: start again here
    it = seqs_.end();
  }
  PrefixHit hit;
  if (it == seqs_.end()) {
    // The first rows seen (a prefix-cache hit, a state evicted before, a
    // fork without its parent's): the head's state starts with its cached
    // blocks that reach them, else at them.
    it = seqs_.emplace(seq_id, start_state(first_pos, prefix, &hit)).first;
    if (!hit.blocks.empty())
      log_debug("EAGLE head: sequence {} starts with {} cached blocks (rows 0..{})", seq_id,
                hit.blocks.size(), hit.num_tokens - 1);
  }
  SeqState& s = it->second;
  if (first_pos + n > runner_->max_model_len() ||
      !kv_.reserve(seq_id, std::max(first_pos + n, s.reused_end) - s.kv_start, hit, s.keys)) {
    drop(seq_id);
    return;
  }
  // Rows in reused blocks already hold the target's rows of these tokens.
  const int32_t from = std::min(std::max(first_pos, s.reused_end), first_pos + n);
  if (from < first_pos + n) {
    if (eagle3()) {
      copy_to_pool(fc_scratch_[0].tensor(rows.dtype, {fc_rows_, rows.dim(1)}),
                   aux_row + (from - first_pos), seq_id, from, first_pos + n - from);
    } else {
      copy_to_pool(rows, from - first_pos, seq_id, from, first_pos + n - from);
    }
  }
  s.hidden_end = std::max(first_pos + n, s.reused_end);
  // Rows from first_pos on read hidden states that just changed, but for
  // reused ones (the same tokens' rows).
  const int32_t keep = std::max(first_pos, s.reused_end);
  if (s.tokens.size() > static_cast<size_t>(keep) + 1) s.tokens.resize(keep + 1);
}

Status EagleProposer::propose(std::span<const DraftInput> inputs,
                              std::vector<std::vector<int32_t>>& drafts) {
  drafts.resize(inputs.size());
  for (auto& d : drafts) d.clear();
  kv_.begin_call();
  const int64_t max_len = runner_->max_model_len();
  std::vector<int32_t> num_drafts(inputs.size(), 0);
  std::vector<DraftPiece> pieces;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const DraftInput& in = inputs[i];
    const int32_t len = static_cast<int32_t>(in.tokens.size());
    auto it = seqs_.find(in.seq_id);
    if (it == seqs_.end() || len < 2) continue;
    SeqState& s = it->second;
    // Rows len - 2 + j for drafts j + 1 (j < k) and the pool row after the
    // last: positions up to len - 1 + k - 1.
    const int32_t k = static_cast<int32_t>(std::min<int64_t>(in.max_draft, max_len - len + 1));
    // Row len - 2 needs the target's hidden rows up to it and is one of the head's.
    // Row len - 2 is run again, so it must not be a reused (shared) row.
    if (k < 1 || s.hidden_end < len - 1 || len - 2 < s.kv_start || len - 2 < s.reused_end) continue;
    const size_t same = static_cast<size_t>(
        std::mismatch(s.tokens.begin(), s.tokens.end(), in.tokens.begin(), in.tokens.end()).first -
        s.tokens.begin());
    if (static_cast<int32_t>(same) < s.reused_end + 1 && s.reused_end > 0) {
      drop(in.seq_id);  // tokens that its reused rows did not read (not expected)
      continue;
    }
    kv_.mark_drafted(in.seq_id);
    if (!kv_.reserve(in.seq_id, std::max(len + k - 1, s.hidden_end) - s.kv_start)) {
      drop(in.seq_id);
      continue;
    }
    // Row len - 2 gives draft 1: recomputed when already there. The rows
    // before kv_start are not the head's.
    const int32_t begin = std::max(
        s.kv_start, std::min(same == 0 ? 0 : static_cast<int32_t>(same) - 1, len - 2));
    s.tokens.assign(in.tokens.begin(), in.tokens.end());
    pieces.push_back({in.seq_id, begin, len - 1, i, s.kv_start});
    num_drafts[i] = k;
  }
  // Draft 1 from row len - 2, then draft j + 1 from row len - 2 + j.
  const Status status = batcher_.draft(pieces, num_drafts, kv_.manager(), callbacks_, drafts);
  if (!status.ok()) {
    for (const DraftPiece& piece : pieces) drop(piece.seq_id);
  }
  return status;
}

}  // namespace pagoda
