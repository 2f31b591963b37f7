// The jump graphs' host-side helpers (model/jump_graphs.h): the captured
// shapes, which steps fit which shape, the row map and the padded index.
// Their replays against eager steps are in decode_graph_test.cpp
// (DecodeGraphJumpRunnerTest).
#include <gtest/gtest.h>

#include <vector>

#include "model/jump_graphs.h"

namespace pagoda {
namespace {

TEST(JumpGraphShapes, EveryDecodeSizeWithEveryTailThatFits) {
  const std::vector<JumpGraphShape> s = jump_graph_shapes(8, 64);
  std::vector<std::pair<int64_t, int64_t>> got;
  for (const JumpGraphShape& g : s) got.emplace_back(g.decode, g.tail);
  EXPECT_EQ(got, (std::vector<std::pair<int64_t, int64_t>>{{0, 16},
                                                            {0, 32},
                                                            {0, 64},
                                                            {1, 16},
                                                            {1, 32},
                                                            {2, 16},
                                                            {2, 32},
                                                            {4, 16},
                                                            {4, 32},
                                                            {8, 16},
                                                            {8, 32}}));
  EXPECT_EQ(s.back().num_tail_seqs(), 16);
  EXPECT_EQ(s.back().num_seqs(), 24);
  EXPECT_EQ(s.back().num_rows(), 40);
  // 256 sequences: decode sizes 0, 1, 2, 4, 8 .. 256 (36) x 5 tails.
  const std::vector<JumpGraphShape> big = jump_graph_shapes(256, 8192);
  EXPECT_EQ(big.size(), 36u * 5u);
  EXPECT_EQ(big.back().num_seqs(), 256 + kMaxJumpGraphSeqs);
  EXPECT_TRUE(jump_graph_shapes(0, 64).empty());
  EXPECT_TRUE(jump_graph_shapes(8, 15).empty());  // not the smallest tail
}

// Two decode sequences, then sequences of 3 and 2 new tokens (jumps).
StepBatch jump_step() {
  StepBatch s;
  s.token_ids = {1, 2, 3, 4, 5, 6, 7};
  s.positions = {5, 8, 3, 4, 5, 1, 2};
  s.slot_mapping = {10, 20, 30, 31, 32, 40, 41};
  s.query_start_loc = {0, 1, 2, 5, 7};
  s.seq_lens = {6, 9, 6, 3};
  s.max_blocks_per_seq = 2;
  s.block_tables = {1, 2, 3, 4, 5, 6, 7, 8};
  s.logits_rows = {0, 1, 4, 6};
  return s;
}

int64_t decode_of(const std::vector<JumpGraphShape>& shapes, int i) {
  return i < 0 ? -1 : shapes[static_cast<size_t>(i)].decode;
}
int64_t tail_of(const std::vector<JumpGraphShape>& shapes, int i) {
  return i < 0 ? -1 : shapes[static_cast<size_t>(i)].tail;
}

TEST(JumpGraphIndex, PicksTheSmallestShapeThatHoldsTheStep) {
  const std::vector<JumpGraphShape> shapes = jump_graph_shapes(8, 64);
  const StepBatch s = jump_step();
  int g = pick_jump_graph(shapes, s);
  EXPECT_EQ(decode_of(shapes, g), 2);
  EXPECT_EQ(tail_of(shapes, g), 16);
  // Three decodes: the next decode size.
  StepBatch three = s;
  three.token_ids = {1, 2, 9, 3, 4, 5, 6, 7};
  three.positions = {5, 8, 2, 3, 4, 5, 1, 2};
  three.slot_mapping = {10, 20, 50, 30, 31, 32, 40, 41};
  three.query_start_loc = {0, 1, 2, 3, 6, 8};
  three.seq_lens = {6, 9, 3, 6, 3};
  three.block_tables = {1, 2, 3, 4, 9, 9, 5, 6, 7, 8};
  g = pick_jump_graph(shapes, three);
  EXPECT_EQ(decode_of(shapes, g), 4);
  EXPECT_EQ(tail_of(shapes, g), 16);
  // A tail of 15 rows in 2 sequences needs 15 + 6 padding slots > 16: 32.
  StepBatch long_tail = s;
  long_tail.token_ids.resize(2 + 15, 1);
  long_tail.positions.resize(2 + 15, 1);
  long_tail.slot_mapping.resize(2 + 15, -1);
  long_tail.query_start_loc = {0, 1, 2, 12, 17};
  g = pick_jump_graph(shapes, long_tail);
  EXPECT_EQ(decode_of(shapes, g), 2);
  EXPECT_EQ(tail_of(shapes, g), 32);
  // Not jump-shaped: decode only, a decode after a multi-token sequence, or
  // a tail larger than any captured with these decodes.
  StepBatch decodes = s;
  decodes.token_ids = {1, 2};
  decodes.query_start_loc = {0, 1, 2};
  decodes.seq_lens = {6, 9};
  EXPECT_EQ(pick_jump_graph(shapes, decodes), -1);
  StepBatch unordered = s;
  unordered.query_start_loc = {0, 3, 4, 5, 7};
  EXPECT_EQ(pick_jump_graph(shapes, unordered), -1);
  StepBatch huge = s;
  huge.token_ids.resize(2 + 40, 1);
  huge.query_start_loc = {0, 1, 2, 22, 42};
  EXPECT_EQ(pick_jump_graph(shapes, huge), -1);
  EXPECT_EQ(pick_jump_graph(shapes, StepBatch{}), -1);
}

TEST(JumpGraphIndex, PacksTheTailAndPadsSlotsOntoTheScratchBlock) {
  const StepBatch s = jump_step();
  const JumpGraphShape shape{4, 16};  // 4 decode slots, 8 tail slots of 16 rows
  EXPECT_EQ(jump_row_map(s, shape), (std::vector<int32_t>{0, 1, 4, 5, 6, 7, 8}));
  const int64_t rows = 20, seqs = 12, width = 3;
  std::vector<int32_t> ids(rows, 99), pos(rows, 99), slots(rows, 99), qsl(seqs + 1, 99),
      lens(seqs, 99), tables(seqs * width, 99), sliding_slots(rows, 99),
      sliding_tables(seqs * width, 99);
  StepBatch w = s;  // with a sliding-window group's slots and tables
  w.sliding_slot_mapping = {110, 120, 130, 131, 132, 140, 141};
  w.sliding_block_tables = {11, 12, 13, 14, -1, 16, 17, 18};
  write_padded_jump_index(w, shape, width, /*block_size=*/4, /*scratch_block=*/77,
                          /*sliding_scratch_block=*/55,
                          {ids.data(), pos.data(), slots.data(), qsl.data(), lens.data(),
                           tables.data(), sliding_slots.data(), sliding_tables.data()});
  // Decodes, 2 decode padding rows, the tail packed, 5 padding slots of one
  // row and the last of the 6 rows left.
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 2, 0, 0, 3, 4, 5, 6, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(pos, (std::vector<int32_t>{5, 8, 0, 0, 3, 4, 5, 1, 2, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(slots, (std::vector<int32_t>{10, 20, -1, -1, 30, 31, 32, 40, 41, -1, -1, -1, -1, -1,
                                         -1, -1, -1, -1, -1, -1}));
  EXPECT_EQ(sliding_slots, (std::vector<int32_t>{110, 120, -1, -1, 130, 131, 132, 140, 141, -1, -1,
                                                 -1, -1, -1, -1, -1, -1, -1, -1, -1}));
  EXPECT_EQ(qsl, (std::vector<int32_t>{0, 1, 2, 3, 4, 7, 9, 10, 11, 12, 13, 14, 20}));
  EXPECT_EQ(lens, (std::vector<int32_t>{6, 9, 1, 1, 6, 3, 1, 1, 1, 1, 1, 6}));
  EXPECT_EQ(tables, (std::vector<int32_t>{1,  2,  99, 3,  4,  99, 77, 99, 99, 77, 99, 99,
                                          5,  6,  99, 7,  8,  99, 77, 99, 99, 77, 99, 99,
                                          77, 99, 99, 77, 99, 99, 77, 99, 99, 77, 77, 99}));
  EXPECT_EQ(sliding_tables, (std::vector<int32_t>{11, 12, 99, 13, 14, 99, 55, 99, 99, 55, 99, 99,
                                                  -1, 16, 99, 17, 18, 99, 55, 99, 99, 55, 99, 99,
                                                  55, 99, 99, 55, 99, 99, 55, 99, 99, 55, 55, 99}));

  // Capture's all-padding batch: every slot on the scratch block, the last
  // tail slot taking the tail's rows left after one each.
  write_padded_jump_index(
      StepBatch{}, JumpGraphShape{2, 16}, width, 4, 77, -1,
      {ids.data(), pos.data(), slots.data(), qsl.data(), lens.data(), tables.data()});
  EXPECT_EQ((std::vector<int32_t>(slots.begin(), slots.begin() + 18)),
            std::vector<int32_t>(18, -1));
  EXPECT_EQ((std::vector<int32_t>(qsl.begin(), qsl.begin() + 11)),
            (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 18}));
  EXPECT_EQ(lens[9], 9);
  EXPECT_EQ(tables[0], 77);
  EXPECT_EQ(tables[9 * width + 2], 77);  // 9 rows: 3 blocks of 4
}

}  // namespace
}  // namespace pagoda
