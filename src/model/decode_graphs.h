// Host-side logic of the decode graphs (CUDA graphs of the decoder forward
// for decode-only steps): which batch sizes are captured, which one a step
// uses, and the padded index arrays a replay reads.
//
// A graph of batch size B is the forward over B rows with B sequences of one
// new token each, frozen with hints that bound every replay (max_query_len 1,
// max_seq_len = max_model_len, block tables `table_width` = the runner's
// max_blocks_per_seq columns wide). A step with S <= B sequences is padded to
// B: padding row r in [S, B) has token 0, position 0, slot -1 (kv_write skips
// it), seq_len 1 and a block table row whose first entry is the runner's
// reserved scratch block (zeroed at startup, never given to a sequence), so
// it attends to one valid, finite key and writes nothing; with a
// sliding-window KV group the same in that group's slots and tables (its own
// scratch block). Padding rows' outputs are never read: logits rows index
// real rows only.
#pragma once

#include <cstdint>
#include <vector>

#include "batch/step_batch.h"

namespace pagoda {

// Largest batch captured; larger decode batches run eagerly (launch overhead
// is amortised by then).
constexpr int64_t kMaxDecodeGraphBatch = 512;

// Captured sizes, ascending: 1, 2, 4, then multiples of 8 up to
// min(limit, kMaxDecodeGraphBatch), plus that bound itself when it is not on
// the ladder. Empty when limit < 1.
std::vector<int64_t> decode_graph_batch_sizes(int64_t limit);

// True when every sequence of `step` has exactly one new token (T == S; a
// validated step gives every sequence at least one row).
bool is_decode_only(const StepBatch& step);

// Index into `sizes` (ascending) of the smallest size >= num_seqs; -1 when
// none fits.
int pick_decode_graph(const std::vector<int64_t>& sizes, int64_t num_seqs);

// Destinations of the i32 arrays a decode graph of `batch` rows reads.
struct DecodeIndexViews {
  int32_t* ids = nullptr;        // [batch]
  int32_t* positions = nullptr;  // [batch]
  int32_t* slots = nullptr;      // [batch]
  int32_t* query_start_loc = nullptr;  // [batch + 1]
  int32_t* seq_lens = nullptr;   // [batch]
  int32_t* block_tables = nullptr;     // [batch, table_width]
  // The sliding-window KV group's (nullptr without one).
  int32_t* sliding_slots = nullptr;         // [batch]
  int32_t* sliding_block_tables = nullptr;  // [batch, table_width]
};

// Copies sequence s's block table row(s) of `step` (step.max_blocks_per_seq
// columns) into row s of dst.block_tables (and of dst.sliding_block_tables
// when dst.sliding_slots is set), rows `table_width` columns apart.
void copy_block_table_row(const StepBatch& step, int64_t s, int64_t table_width,
                          const DecodeIndexViews& dst);

// Writes the decode-only `step` (S sequences; S = 0 gives an all-padding
// batch, used at capture) padded to `batch` rows: real rows copied, block
// table rows re-laid from step.max_blocks_per_seq to `table_width` columns
// (columns a sequence does not reach are left as they were: never read),
// padding rows as described above with `scratch_block`; with
// dst.sliding_slots set, step's sliding_slot_mapping and
// sliding_block_tables the same way, padding with `sliding_scratch_block`.
// Requires S <= batch and step.max_blocks_per_seq <= table_width.
void write_padded_decode_index(const StepBatch& step, int64_t batch, int64_t table_width,
                               int32_t scratch_block, int32_t sliding_scratch_block,
                               const DecodeIndexViews& dst);

}  // namespace pagoda
