// Host-side logic of the verification graphs: CUDA graphs of the decoder
// forward for steps in which every sequence has at most Q new tokens --
// speculative decoding's verification steps (k drafts + the last sampled
// token: Q = k + 1), with decode rows and shorter drafts mixed in -- so that
// they replay like decode steps (decode_graphs.h) instead of running eagerly.
//
// Every sequence takes Q rows (one query length for the whole graph, rather
// than a graph per mix of lengths): a graph of batch size B is the forward
// over B * Q rows, sequence slot s owning rows [s Q, (s + 1) Q), frozen with
// the hints max_query_len Q, max_seq_len = max_model_len and block tables
// `table_width` columns wide. A step with S <= B sequences is padded to it:
//  - sequence s's q_s <= Q rows are the last ones of its slot, s Q + Q - q_s
//    + j. The Q - q_s rows before them (left padding) have token 0, slot -1
//    (kv_write skips them) and the positions seq_lens[s] - Q + i the
//    attention gives them: they sit before the sequence's new tokens, so the
//    causal mask hides them from every real row, and they attend to the
//    sequence's own cached keys only. That needs seq_lens[s] >= Q (no
//    negative position), and keys up to Q - q_s positions before the window
//    of the sequence's first new token, which a sliding-window KV group may
//    have released: with that group left padding is not used (such steps
//    run eagerly).
//  - padding slots s in [S, B): Q rows of token 0, positions 0 .. Q - 1,
//    slot -1, seq_len Q and block-table entries [0, ceil(Q / block_size))
//    on the runner's zeroed scratch block (with a sliding-window group the
//    same on that group's scratch block): they attend to finite keys and
//    write nothing.
// The real rows compute exactly what the eager step computes; logits rows
// and pending rows are renumbered through verify_row_map. Padding rows'
// outputs are never read.
#pragma once

#include <cstdint>
#include <vector>

#include "batch/step_batch.h"
#include "model/decode_graphs.h"

namespace pagoda {

// Largest batch captured: at 128 x (k + 1) rows a step's GEMMs are past the
// launch-bound regime, so larger verification steps run eagerly.
constexpr int64_t kMaxVerifyGraphBatch = 128;

// Captured sizes, ascending: decode_graph_batch_sizes' ladder (1, 2, 4, then
// multiples of 8) up to min(max_seqs, max_tokens / query_len,
// kMaxVerifyGraphBatch). Empty when query_len < 2 (nothing to verify) or
// query_len > max_model_len (no sequence reaches it).
std::vector<int64_t> verify_graph_batch_sizes(int64_t max_seqs, int64_t max_tokens,
                                              int32_t query_len, int64_t max_model_len);

// Whether `step` (validated) fits a verification graph of query length
// `query_len`, sizes aside: every sequence has at most query_len new tokens,
// and a sequence with fewer has seq_lens[s] >= query_len and
// `left_padding` is allowed (false with a sliding-window KV group).
bool fits_verify_graph(const StepBatch& step, int32_t query_len, bool left_padding);

// Row of the padded batch that row t of `step` becomes: [T] entries.
std::vector<int32_t> verify_row_map(const StepBatch& step, int32_t query_len);

// Writes `step` (fits_verify_graph; S <= batch sequences; S = 0 gives an
// all-padding batch, used at capture) padded to `batch` slots of
// `query_len` rows as described above. dst's token arrays (ids, positions,
// slots, sliding_slots) take batch * query_len entries, qsl batch + 1,
// seq_lens batch, the tables batch rows of `table_width` columns (columns a
// sequence does not reach are left as they were: never read). Requires
// step.max_blocks_per_seq <= table_width and ceil(query_len / block_size)
// <= table_width.
void write_padded_verify_index(const StepBatch& step, int64_t batch, int32_t query_len,
                               int64_t table_width, int32_t block_size, int32_t scratch_block,
                               int32_t sliding_scratch_block, const DecodeIndexViews& dst);

}  // namespace pagoda
