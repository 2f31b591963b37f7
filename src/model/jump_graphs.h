// Host-side logic of the jump graphs: CUDA graphs of the decoder forward for
// steps of decode rows plus a few sequences of several new tokens -- the
// steps that structured output's jump-forward makes, where a jump's tokens
// enter as one chunk (engine/jump_forward.h) -- so that they replay like
// decode steps (decode_graphs.h) instead of running eagerly. Unlike a
// verification graph (verify_graphs.h: every sequence padded to Q rows),
// only the multi-token sequences take extra rows, so a batch of 256 decode
// rows with a few jumps stays about 256 rows.
//
// A graph of shape (D, R) is the forward over D + R rows: D decode slots of
// one row each (sequences [0, D), rows [0, D)), then a tail of R rows shared
// by J = R / 2 sequence slots (sequences D .. D + J - 1), frozen with the
// hints num_decode_seqs D, max_query_len R, max_seq_len = max_model_len and
// block tables `table_width` columns wide. A step with S_d decode sequences
// (leading, as the scheduler orders them) and S_j sequences of >= 2 new
// tokens (T_j rows in all) is padded to it:
//  - decode slots [S_d, D): as a decode graph pads them (token 0, position
//    0, slot -1, seq_len 1, the scratch block);
//  - tail sequence j < S_j: its rows packed in order from row D, its own
//    positions, slots, seq_len and block table (no left padding, so a
//    sliding-window KV group is no obstacle);
//  - padding tail slots [S_j, J): one row each, the last taking every row
//    left over; row i of a slot has token 0, position i, slot -1, and the
//    slot seq_len = its rows and a block table on the scratch block(s): they
//    attend to finite keys and write nothing.
// The real rows compute exactly what the eager step computes (each row's
// work depends on its own sequence only); logits rows and pending rows are
// renumbered through jump_row_map. Padding rows' outputs are never read.
#pragma once

#include <cstdint>
#include <vector>

#include "batch/step_batch.h"
#include "model/decode_graphs.h"

namespace pagoda {

// Tail sizes captured (rows for the multi-token sequences): jumps are at
// most kJumpForwardMaxBytes (64) bytes, a few tokens each, and a step
// carries a few of them; larger tails run eagerly.
inline constexpr int64_t kJumpGraphTails[] = {16, 32, 64, 128, 256};
// Most tail sequence slots of any graph (the largest tail / 2): the
// runner's index arrays hold max_num_seqs + this many sequences.
inline constexpr int64_t kMaxJumpGraphSeqs = 128;

struct JumpGraphShape {
  int64_t decode = 0;  // D: decode slots
  int64_t tail = 0;    // R: tail rows, in R / 2 sequence slots
  int64_t num_tail_seqs() const { return tail / 2; }
  int64_t num_rows() const { return decode + tail; }
  int64_t num_seqs() const { return decode + num_tail_seqs(); }
};

// Captured shapes: each decode size of decode_graph_batch_sizes(max_seqs)
// with each tail of kJumpGraphTails, D + R <= max_tokens, decode-major and
// ascending. Empty when max_seqs or max_tokens is < 1.
std::vector<JumpGraphShape> jump_graph_shapes(int64_t max_seqs, int64_t max_tokens);

// Index into `shapes` (jump_graph_shapes' order) of the smallest shape that
// `step` (validated) fits: it has at least one sequence of >= 2 new tokens
// and every such sequence comes after the decode ones, S_d <= D, S_j < J
// (at least one padding slot takes the tail's rows left over) and
// T_j + (J - S_j) <= R. -1 when none fits.
int pick_jump_graph(const std::vector<JumpGraphShape>& shapes, const StepBatch& step);

// Row of the padded batch that row t of `step` becomes: [T] entries (decode
// rows keep their numbers, tail rows move to start at D).
std::vector<int32_t> jump_row_map(const StepBatch& step, const JumpGraphShape& shape);

// Writes `step` (fitting `shape`; an empty step gives an all-padding batch,
// used at capture) padded as described above. dst's token arrays take
// shape.num_rows() entries, qsl shape.num_seqs() + 1, seq_lens
// shape.num_seqs(), the tables shape.num_seqs() rows of `table_width`
// columns (columns a sequence does not reach are left as they were). Requires
// step.max_blocks_per_seq <= table_width and ceil(R / block_size) <=
// table_width.
void write_padded_jump_index(const StepBatch& step, const JumpGraphShape& shape,
                             int64_t table_width, int32_t block_size, int32_t scratch_block,
                             int32_t sliding_scratch_block, const DecodeIndexViews& dst);

}  // namespace pagoda
