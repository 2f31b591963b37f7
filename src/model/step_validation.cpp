#include "model/step_validation.h"

#include <algorithm>
#include <string>
#include <vector>

namespace pagoda {
namespace {

Error bad(const std::string& what) {
  return make_error(ErrorCode::kInvalidArgument, "step input: " + what);
}

std::string str(int64_t v) {
  return std::to_string(v);
}

Status check_size(const char* field, size_t got, int64_t want) {
  if (static_cast<int64_t>(got) != want)
    return bad(std::string(field) + " has " + str(static_cast<int64_t>(got)) +
               " entries, expected " + str(want));
  return {};
}

// CSR offsets of `num_rows` rows over a list of `list_size` entries; empty is
// allowed (no row has entries).
Status check_offsets(const char* field, const std::vector<int32_t>& offsets, int64_t num_rows,
                     int64_t list_size) {
  if (offsets.empty())
    return list_size == 0 ? Status{} : bad(std::string(field) + " is empty but its lists are not");
  PAGODA_RETURN_IF_ERROR(check_size(field, offsets.size(), num_rows + 1));
  if (offsets[0] != 0 || offsets.back() != list_size)
    return bad(std::string(field) + " must run from 0 to " + str(list_size));
  for (size_t i = 1; i < offsets.size(); ++i)
    if (offsets[i] < offsets[i - 1])
      return bad(std::string(field) + " decreases at " + str(static_cast<int64_t>(i)));
  return {};
}

Status check_token(const char* field, int64_t i, int32_t token, int64_t vocab) {
  if (token < 0 || token >= vocab)
    return bad(std::string(field) + "[" + str(i) + "] = " + str(token) +
               " is outside the vocabulary [0, " + str(vocab) + ")");
  return {};
}

// Sequences, positions, slots and block tables.
Status check_sequences(const StepBatch& s, const StepLimits& l) {
  const int64_t num_tokens = static_cast<int64_t>(s.token_ids.size());
  const int64_t num_seqs = static_cast<int64_t>(s.seq_lens.size());
  if (num_seqs < 1 || num_seqs > l.max_seqs)
    return bad("number of sequences " + str(num_seqs) + " not in [1, " + str(l.max_seqs) + "]");
  PAGODA_RETURN_IF_ERROR(check_size("query_start_loc", s.query_start_loc.size(), num_seqs + 1));
  const int64_t width = s.max_blocks_per_seq;
  if (width < 1 || width > l.max_blocks_per_seq)
    return bad("max_blocks_per_seq " + str(width) + " not in [1, " + str(l.max_blocks_per_seq) +
               "]");
  PAGODA_RETURN_IF_ERROR(check_size("block_tables", s.block_tables.size(), num_seqs * width));
  if (s.query_start_loc[0] != 0 || s.query_start_loc.back() != num_tokens)
    return bad("query_start_loc must run from 0 to the number of tokens " + str(num_tokens));
  if (!s.position_offsets.empty())
    PAGODA_RETURN_IF_ERROR(check_size("position_offsets", s.position_offsets.size(), num_seqs));
  for (int64_t q = 0; q < num_seqs; ++q) {
    const int64_t begin = s.query_start_loc[q], q_len = s.query_start_loc[q + 1] - begin,
                  len = s.seq_lens[q];
    const int64_t offset = s.position_offsets.empty() ? 0 : s.position_offsets[q];
    if (q_len < 1)
      return bad("sequence " + str(q) + " has " + str(q_len) + " new tokens (needs at least 1)");
    if (len < q_len || len > l.max_model_len)
      return bad("seq_lens[" + str(q) + "] = " + str(len) + " not in [" + str(q_len) +
                 ", max_model_len " + str(l.max_model_len) + "]");
    if (offset < 0 || len + offset > l.max_model_len)
      return bad("position_offsets[" + str(q) + "] = " + str(offset) +
                 " not in [0, max_model_len " + str(l.max_model_len) + " - seq_lens " + str(len) +
                 "]");
    const int64_t num_blocks = (len + l.block_size - 1) / l.block_size;
    if (num_blocks > width)
      return bad("sequence " + str(q) + " needs " + str(num_blocks) + " blocks, table width is " +
                 str(width));
    const int32_t* table = s.block_tables.data() + q * width;
    for (int64_t b = 0; b < num_blocks; ++b)
      if (table[b] < 0 || table[b] >= l.num_kv_blocks)
        return bad("block_tables[" + str(q) + "][" + str(b) + "] = " + str(table[b]) +
                   " not in [0, " + str(l.num_kv_blocks) + ")");
    for (int64_t j = 0; j < q_len; ++j) {
      const int64_t t = begin + j, pos = len - q_len + j;
      if (s.positions[t] != pos + offset)
        return bad("positions[" + str(t) + "] = " + str(s.positions[t]) + ", expected " +
                   str(pos + offset));
      const int64_t slot =
          static_cast<int64_t>(table[pos / l.block_size]) * l.block_size + pos % l.block_size;
      if (s.slot_mapping[t] != slot)
        return bad("slot_mapping[" + str(t) + "] = " + str(s.slot_mapping[t]) + ", expected " +
                   str(slot));
    }
  }
  return {};
}

// The sliding-window group's tables and slots: each sequence's entries from
// the block of its first query's window start (max(0, first - window + 1))
// to its last token's are blocks of the sliding pool; earlier entries are
// never read and may be kNullBlock (-1) or a block; slots match the table.
Status check_sliding_group(const StepBatch& s, const StepLimits& l) {
  const int64_t num_seqs = static_cast<int64_t>(s.seq_lens.size());
  const int64_t width = s.max_blocks_per_seq, n = l.num_sliding_kv_blocks;
  PAGODA_RETURN_IF_ERROR(
      check_size("sliding_block_tables", s.sliding_block_tables.size(), num_seqs * width));
  PAGODA_RETURN_IF_ERROR(
      check_size("sliding_slot_mapping", s.sliding_slot_mapping.size(), s.token_ids.size()));
  for (int64_t q = 0; q < num_seqs; ++q) {
    const int64_t begin = s.query_start_loc[q], q_len = s.query_start_loc[q + 1] - begin,
                  len = s.seq_lens[q];
    const int64_t first_read = std::max<int64_t>(0, len - q_len - l.sliding_window + 1);
    const int64_t num_blocks = (len + l.block_size - 1) / l.block_size;
    const int32_t* table = s.sliding_block_tables.data() + q * width;
    for (int64_t b = 0; b < num_blocks; ++b) {
      const bool needed = b >= first_read / l.block_size;
      if ((table[b] < 0 || table[b] >= n) && (needed || table[b] != -1))
        return bad("sliding_block_tables[" + str(q) + "][" + str(b) + "] = " + str(table[b]) +
                   " not in [0, " + str(n) + ")" +
                   (needed ? " (read by this step's window)" : " nor -1 (released)"));
    }
    for (int64_t j = 0; j < q_len; ++j) {
      const int64_t t = begin + j, pos = len - q_len + j;
      const int64_t slot =
          static_cast<int64_t>(table[pos / l.block_size]) * l.block_size + pos % l.block_size;
      if (s.sliding_slot_mapping[t] != slot)
        return bad("sliding_slot_mapping[" + str(t) + "] = " + str(s.sliding_slot_mapping[t]) +
                   ", expected " + str(slot));
    }
  }
  return {};
}

// Block copies `field`_src / `field`_dst of one pool of `num_blocks` blocks.
Status check_copies(const std::string& field, const std::vector<int32_t>& src,
                    const std::vector<int32_t>& dst, int64_t num_blocks) {
  if (src.size() != dst.size()) return bad(field + "_src and " + field + "_dst differ in length");
  for (size_t i = 0; i < src.size(); ++i)
    for (int32_t b : {src[i], dst[i]})
      if (b < 0 || b >= num_blocks)
        return bad(field + " " + str(static_cast<int64_t>(i)) + " names block " + str(b) +
                   " outside [0, " + str(num_blocks) + ")");
  return {};
}

// Allowed-token masks: W = ceil(V / 32) words each, whole masks, indices in
// [-1, num_masks), clear bits past V, and at least one token allowed.
Status check_masks(const SamplingBatch& b, int64_t num_rows, int64_t vocab) {
  if (b.mask_index.empty())
    return b.allowed_words.empty() ? Status{} : bad("sampling.mask_index is empty but allowed_words is not");
  PAGODA_RETURN_IF_ERROR(check_size("sampling.mask_index", b.mask_index.size(), num_rows));
  const int64_t w = b.mask_words;
  if (w != (vocab + 31) / 32)
    return bad("sampling.mask_words = " + str(w) + ", expected ceil(vocab / 32) = " + str((vocab + 31) / 32));
  if (static_cast<int64_t>(b.allowed_words.size()) % w != 0)
    return bad("sampling.allowed_words has " + str(static_cast<int64_t>(b.allowed_words.size())) +
               " words, not a multiple of mask_words " + str(w));
  const int64_t num_masks = static_cast<int64_t>(b.allowed_words.size()) / w;
  for (int64_t r = 0; r < num_rows; ++r)
    if (b.mask_index[r] < -1 || b.mask_index[r] >= num_masks)
      return bad("sampling.mask_index[" + str(r) + "] = " + str(b.mask_index[r]) + " not in [-1, " +
                 str(num_masks) + ")");
  const uint32_t tail = vocab % 32 == 0 ? 0u : ~0u << (vocab % 32);  // bits past V in the last word
  for (int64_t m = 0; m < num_masks; ++m) {
    const uint32_t* words = b.allowed_words.data() + m * w;
    if ((words[w - 1] & tail) != 0)
      return bad("sampling mask " + str(m) + " allows tokens outside the vocabulary");
    bool any = false;
    for (int64_t i = 0; i < w && !any; ++i) any = words[i] != 0;
    if (!any) return bad("sampling mask " + str(m) + " allows no token");
  }
  return {};
}

Status check_sampling(const SamplingBatch& b, int64_t num_rows, int64_t vocab) {
  PAGODA_RETURN_IF_ERROR(check_size("sampling.rows", b.rows.size(), num_rows));
  PAGODA_RETURN_IF_ERROR(check_offsets("sampling.penalty_offsets", b.penalty_offsets, num_rows,
                                       static_cast<int64_t>(b.penalty_tokens.size())));
  PAGODA_RETURN_IF_ERROR(check_size("sampling.penalty_output_counts",
                                    b.penalty_output_counts.size(),
                                    static_cast<int64_t>(b.penalty_tokens.size())));
  PAGODA_RETURN_IF_ERROR(check_size("sampling.penalty_in_prompt", b.penalty_in_prompt.size(),
                                    static_cast<int64_t>(b.penalty_tokens.size())));
  PAGODA_RETURN_IF_ERROR(check_offsets("sampling.bias_offsets", b.bias_offsets, num_rows,
                                       static_cast<int64_t>(b.bias_tokens.size())));
  PAGODA_RETURN_IF_ERROR(check_size("sampling.bias_values", b.bias_values.size(),
                                    static_cast<int64_t>(b.bias_tokens.size())));
  for (size_t i = 0; i < b.penalty_tokens.size(); ++i)
    PAGODA_RETURN_IF_ERROR(check_token("sampling.penalty_tokens", static_cast<int64_t>(i),
                                       b.penalty_tokens[i], vocab));
  for (size_t i = 0; i < b.bias_tokens.size(); ++i)
    PAGODA_RETURN_IF_ERROR(
        check_token("sampling.bias_tokens", static_cast<int64_t>(i), b.bias_tokens[i], vocab));
  PAGODA_RETURN_IF_ERROR(check_masks(b, num_rows, vocab));
  if (b.max_top_logprobs < 0) return bad("sampling.max_top_logprobs is negative");
  for (size_t r = 0; r < b.rows.size(); ++r) {
    const SamplingRow& row = b.rows[r];
    if (row.num_top_logprobs < 0 || row.num_top_logprobs > b.max_top_logprobs)
      return bad("sampling.rows[" + str(static_cast<int64_t>(r)) +
                 "].num_top_logprobs = " + str(row.num_top_logprobs) +
                 " not in [0, max_top_logprobs " + str(b.max_top_logprobs) + "]");
    if (row.target_token >= vocab)
      return bad("sampling.rows[" + str(static_cast<int64_t>(r)) +
                 "].target_token is outside the vocabulary");
    if (!(row.temperature >= 0.0f))
      return bad("sampling.rows[" + str(static_cast<int64_t>(r)) + "].temperature must be >= 0");
    if (!(row.top_p > 0.0f && row.top_p <= 1.0f))
      return bad("sampling.rows[" + str(static_cast<int64_t>(r)) + "].top_p must be in (0, 1]");
  }
  return {};
}

}  // namespace

Status validate_sampling(const SamplingBatch& sampling, int64_t num_rows, int64_t vocab_size) {
  return check_sampling(sampling, num_rows, vocab_size);
}

Status validate_step(const StepBatch& s, const StepLimits& l, bool sampling) {
  const int64_t num_tokens = static_cast<int64_t>(s.token_ids.size());
  if (num_tokens < 1 || num_tokens > l.max_tokens)
    return bad("number of tokens " + str(num_tokens) + " not in [1, max_num_batched_tokens " +
               str(l.max_tokens) + "]");
  PAGODA_RETURN_IF_ERROR(check_size("positions", s.positions.size(), num_tokens));
  PAGODA_RETURN_IF_ERROR(check_size("slot_mapping", s.slot_mapping.size(), num_tokens));
  if (s.pending_rows.size() != s.pending_sources.size())
    return bad("pending_rows and pending_sources differ in length");
  std::vector<bool> pending(static_cast<size_t>(num_tokens), false);
  for (size_t i = 0; i < s.pending_rows.size(); ++i) {
    const int32_t row = s.pending_rows[i], src = s.pending_sources[i];
    if (row < 0 || row >= num_tokens)
      return bad("pending_rows[" + str(static_cast<int64_t>(i)) + "] = " + str(row) + " not in [0, " +
                 str(num_tokens) + ")");
    if (src < 0 || src >= l.num_pending_sources)
      return bad("pending_sources[" + str(static_cast<int64_t>(i)) + "] = " + str(src) + " not in [0, " +
                 str(l.num_pending_sources) + "), the rows the previous step sampled");
    pending[static_cast<size_t>(row)] = true;
  }
  const int64_t input_vocab = l.input_vocab_size > 0 ? l.input_vocab_size : l.vocab_size;
  for (int64_t t = 0; t < num_tokens; ++t)
    if (!pending[static_cast<size_t>(t)])
      PAGODA_RETURN_IF_ERROR(check_token("token_ids", t, s.token_ids[t], input_vocab));
  PAGODA_RETURN_IF_ERROR(check_sequences(s, l));

  const int64_t num_rows = static_cast<int64_t>(s.logits_rows.size());
  for (int64_t r = 0; r < num_rows; ++r)
    if (s.logits_rows[r] < 0 || s.logits_rows[r] >= num_tokens)
      return bad("logits_rows[" + str(r) + "] = " + str(s.logits_rows[r]) + " not in [0, " +
                 str(num_tokens) + ")");
  if (sampling) PAGODA_RETURN_IF_ERROR(check_sampling(s.sampling, num_rows, l.vocab_size));

  if (l.num_sliding_kv_blocks > 0) {
    PAGODA_RETURN_IF_ERROR(check_sliding_group(s, l));
    PAGODA_RETURN_IF_ERROR(check_copies("sliding_copy", s.sliding_copy_src, s.sliding_copy_dst,
                                        l.num_sliding_kv_blocks));
  } else if (!s.sliding_block_tables.empty() || !s.sliding_slot_mapping.empty() ||
             !s.sliding_copy_src.empty() || !s.sliding_copy_dst.empty()) {
    return bad("a sliding-window KV group's tables: this model runner keeps no such group");
  }
  return check_copies("copy", s.copy_src, s.copy_dst, l.num_kv_blocks);
}

}  // namespace pagoda
