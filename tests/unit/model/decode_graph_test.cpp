// Decode and verification graphs and the memory profile without a GPU: the
// host-side helpers (ladders, padding, profile step), and a ModelRunner on a backend that
// emulates graphs over the CPU backend (capture records the closure without
// running it; replay runs it, and any wait, read-back, sampling or
// allocation inside a replay fails the test, as it would break a CUDA
// graph). Its logits must equal an all-eager runner's on the CPU backend.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <tuple>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "memory_source.h"
#include "model/decode_graphs.h"
#include "model/memory_profile.h"
#include "model/model_runner.h"
#include "model/step_validation.h"
#include "model/verify_graphs.h"

namespace pagoda {
namespace {

// The CPU backend, presented as a device with graphs.
class GraphEmulatingBackend final : public Backend {
 public:
  DeviceKind kind() const override { return DeviceKind::kCuda; }
  std::string name() const override { return "graph-emulating " + cpu_.name(); }
  DType compute_dtype() const override { return cpu_.compute_dtype(); }
  void* allocate(size_t bytes) override {
    forbid_in_replay("allocate");
    return cpu_.allocate(bytes);
  }
  void deallocate(void* ptr) override { cpu_.deallocate(ptr); }
  void* allocate_host(size_t bytes) override { return cpu_.allocate_host(bytes); }
  void deallocate_host(void* ptr) override { cpu_.deallocate_host(ptr); }
  void copy_to_device(void* dst, const void* src, size_t bytes) override {
    forbid_in_replay("copy_to_device");  // the runner uploads outside its graphs
    cpu_.copy_to_device(dst, src, bytes);
  }
  void copy_to_host(void* dst, const void* src, size_t bytes) override {
    forbid_in_replay("copy_to_host");
    cpu_.copy_to_host(dst, src, bytes);
  }
  void copy_device(void* dst, const void* src, size_t bytes) override {
    cpu_.copy_device(dst, src, bytes);
  }
  void synchronize() override { forbid_in_replay("synchronize"); }
  void memory_info(size_t* free_bytes, size_t* total_bytes) override {
    cpu_.memory_info(free_bytes, total_bytes);
  }
  void embedding(const Tensor& t, const Tensor& ids, int64_t first_row, Tensor& out) override {
    cpu_.embedding(t, ids, first_row, out);
  }
  void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out) override {
    cpu_.rms_norm(x, w, eps, out);
  }
  void add_rms_norm(Tensor& r, const Tensor& x, const Tensor& w, float eps, Tensor& out) override {
    cpu_.add_rms_norm(r, x, w, eps, out);
  }
  void linear(const Tensor& x, const LinearWeight& w, const Tensor& b, Tensor& out) override {
    cpu_.linear(x, w, b, out);
  }
  void rms_norm_fp8(const Tensor& x, const Tensor& w, float eps, Tensor& out, Fp8Rows& q) override {
    cpu_.rms_norm_fp8(x, w, eps, out, q);
  }
  void add_rms_norm_fp8(Tensor& r, const Tensor& x, const Tensor& w, float eps, Tensor& out,
                        Fp8Rows& q) override {
    cpu_.add_rms_norm_fp8(r, x, w, eps, out, q);
  }
  void silu_mul_fp8(const Tensor& gu, Tensor& out, Fp8Rows& q) override {
    cpu_.silu_mul_fp8(gu, out, q);
  }
  void linear_fp8_rows(const Fp8Rows& x, const LinearWeight& w, const Tensor& b,
                       Tensor& out) override {
    cpu_.linear_fp8_rows(x, w, b, out);
  }
  void qk_norm(Tensor& qkv, const QkvLayout& l, const Tensor& q, const Tensor& k,
               float eps) override {
    cpu_.qk_norm(qkv, l, q, k, eps);
  }
  void rope(Tensor& qkv, const QkvLayout& l, const Tensor& pos, const Tensor& cs) override {
    cpu_.rope(qkv, l, pos, cs);
  }
  void kv_write(const Tensor& qkv, const QkvLayout& l, const Tensor& slots,
                KvCacheView& c) override {
    cpu_.kv_write(qkv, l, slots, c);
  }
  void paged_attention(const Tensor& qkv, const QkvLayout& l, const KvCacheView& c,
                       const AttentionMetadata& m, const AttentionScoring& scoring,
                       Tensor& out) override {
    // A real graph freezes these hints: they must bound every replay.
    if (replaying_) check_hints(m);
    cpu_.paged_attention(qkv, l, c, m, scoring, out);
  }
  void silu_mul(const Tensor& gu, Tensor& out) override { cpu_.silu_mul(gu, out); }
  void gelu_tanh_mul(const Tensor& gu, Tensor& out) override { cpu_.gelu_tanh_mul(gu, out); }
  void scale(Tensor& x, float s) override { cpu_.scale(x, s); }
  void softcap(Tensor& x, float cap) override { cpu_.softcap(x, cap); }
  void moe_route(const Tensor& logits, bool renorm, Tensor& ids, Tensor& w) override {
    cpu_.moe_route(logits, renorm, ids, w);
  }
  void moe_experts(const Tensor& x, const Tensor& gu, const Tensor& down, const Tensor& ids,
                   const Tensor& w, Tensor& gu_scratch, Tensor& act_scratch, Tensor& out) override {
    cpu_.moe_experts(x, gu, down, ids, w, gu_scratch, act_scratch, out);
  }
  void add_sigmoid_gated(Tensor& out, const Tensor& y, const Tensor& x,
                         const Tensor& gate_w) override {
    cpu_.add_sigmoid_gated(out, y, x, gate_w);
  }
  void gather_rows(const Tensor& x, const Tensor& idx, Tensor& out) override {
    cpu_.gather_rows(x, idx, out);
  }
  void copy_blocks(std::vector<KvCacheView>& c, const std::vector<int32_t>& src,
                   const std::vector<int32_t>& dst) override {
    cpu_.copy_blocks(c, src, dst);
  }
  void sample_async(const Tensor& logits, const SamplingBatch& b, int slot) override {
    forbid_in_replay("sample_async");
    cpu_.sample_async(logits, b, slot);
  }
  void finish_sample(int slot, SampleOutput& out) override {
    forbid_in_replay("finish_sample");
    cpu_.finish_sample(slot, out);
  }
  void copy_sampled_tokens(const Tensor& rows, const Tensor& src, Tensor& ids) override {
    forbid_in_replay("copy_sampled_tokens");  // the runner fills pending ids before a replay
    cpu_.copy_sampled_tokens(rows, src, ids);
  }
  bool supports_graphs() const override { return true; }
  int capture_graph(const std::function<void()>& record) override {
    graphs_.push_back(record);
    return static_cast<int>(graphs_.size()) - 1;
  }
  void replay_graph(int id) override {
    ASSERT_GE(id, 0);
    ASSERT_LT(id, static_cast<int>(graphs_.size()));
    replaying_ = true;
    graphs_[static_cast<size_t>(id)]();
    replaying_ = false;
    ++num_replays_;
  }
  int num_graphs() const { return static_cast<int>(graphs_.size()); }
  int num_replays() const { return num_replays_; }

 private:
  // The hints a CUDA kernel sizes its grid from bound the arrays it reads:
  // every query length and context, and num_decode_seqs exact.
  static void check_hints(const AttentionMetadata& m) {
    const auto* qsl = static_cast<const int32_t*>(m.query_start_loc.data);
    const auto* lens = static_cast<const int32_t*>(m.seq_lens.data);
    for (int s = 0; s < m.num_seqs; ++s) {
      const int32_t q = qsl[s + 1] - qsl[s];
      EXPECT_GE(q, 1);
      EXPECT_LE(q, m.max_query_len);
      EXPECT_GE(lens[s], q);
      EXPECT_LE(lens[s], m.max_seq_len);
      if (s < m.num_decode_seqs) EXPECT_EQ(q, 1);
    }
  }
  void forbid_in_replay(const char* what) const {
    if (replaying_) ADD_FAILURE() << what << " inside a graph replay";
  }
  CpuBackend cpu_;
  std::vector<std::function<void()>> graphs_;
  bool replaying_ = false;
  int num_replays_ = 0;
};

// Sequences with fixed block tables that grow token by token.
struct Seq {
  std::vector<int32_t> tokens;  // all tokens so far
  int32_t num_cached = 0;       // tokens whose KV is written
  std::vector<int32_t> table;
  // The sliding-window KV group's table (empty without the group): entries
  // before the window of a step's first query are written as -1.
  std::vector<int32_t> sliding_table;
};

// One step: each listed sequence feeds tokens [num_cached, num_cached + n).
// The table width is the widest need in the step (like the scheduler).
// `window` > 0: with the sliding group's tables and slots too.
// `all_rows`: every row is a logits row (a verification step), else each
// sequence's last.
StepBatch make_step(const std::vector<Seq*>& seqs, const std::vector<int32_t>& num_new, int bs,
                    int window = 0, bool all_rows = false) {
  StepBatch in;
  in.query_start_loc = {0};
  int32_t width = 1;
  for (size_t i = 0; i < seqs.size(); ++i)
    width = std::max(width, (seqs[i]->num_cached + num_new[i] + bs - 1) / bs);
  in.max_blocks_per_seq = width;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const Seq& s = *seqs[i];
    for (int32_t j = 0; j < num_new[i]; ++j) {
      const int32_t pos = s.num_cached + j;
      in.token_ids.push_back(s.tokens[static_cast<size_t>(pos)]);
      in.positions.push_back(pos);
      in.slot_mapping.push_back(s.table[static_cast<size_t>(pos / bs)] * bs + pos % bs);
      if (window > 0)
        in.sliding_slot_mapping.push_back(s.sliding_table[static_cast<size_t>(pos / bs)] * bs +
                                          pos % bs);
    }
    in.query_start_loc.push_back(static_cast<int32_t>(in.token_ids.size()));
    in.seq_lens.push_back(s.num_cached + num_new[i]);
    for (int32_t b = 0; b < width; ++b) in.block_tables.push_back(s.table[static_cast<size_t>(b)]);
    const int32_t first_block = std::max(0, s.num_cached - window + 1) / bs;
    for (int32_t b = 0; window > 0 && b < width; ++b)
      in.sliding_block_tables.push_back(b < first_block ? -1
                                                        : s.sliding_table[static_cast<size_t>(b)]);
    for (int32_t r = all_rows ? in.query_start_loc.back() - num_new[i]
                              : in.query_start_loc.back() - 1;
         r < in.query_start_loc.back(); ++r) {
      in.logits_rows.push_back(r);
      SamplingRow row;
      row.temperature = 0.0f;
      row.num_top_logprobs = 3;
      in.sampling.rows.push_back(row);
    }
  }
  in.sampling.max_top_logprobs = 3;
  return in;
}

class DecodeGraphRunnerTest : public ::testing::Test {
 protected:
  static constexpr int kBlockSize = 4;
  // Verification graphs of 3 drafts + 1 rows per sequence.
  static constexpr int32_t kVerifyLen = 4;

  // The model both runners load.
  virtual ModelConfig model_config() const { return test::tiny_config(); }
  // RunnerOptions::sliding_kv_group of both runners.
  virtual bool sliding_group() const { return false; }
  int window() const { return sliding_group() ? static_cast<int>(config_.sliding_window) : 0; }

  void SetUp() override {
    config_ = model_config();
    test::fill_random(config_, &src_);
    RunnerOptions o;
    o.block_size = kBlockSize;
    o.num_kv_blocks = 64;
    o.max_num_seqs = 8;
    o.max_num_batched_tokens = 64;
    o.sliding_kv_group = sliding_group();
    o.verify_graph_query_len = kVerifyLen;
    auto g = ModelRunner::create(graphs_, config_, src_, o);
    ASSERT_TRUE(g.ok()) << g.error().message;
    graph_runner_ = std::move(g).value();
    auto e = ModelRunner::create(cpu_, config_, src_, o);
    ASSERT_TRUE(e.ok()) << e.error().message;
    eager_runner_ = std::move(e).value();
    const int32_t lens[] = {3, 6, 1, 9, 4};
    for (int i = 0; i < 5; ++i) {
      Seq s;
      for (int32_t t = 0; t < lens[i]; ++t) s.tokens.push_back((7 * i + 3 * t + 1) % 97);
      for (int32_t b = 0; b < 8; ++b) s.table.push_back(8 * i + (b * 5) % 8);  // scattered
      // Sliding blocks: a ring of 5 per sequence (reused once out of the window).
      if (sliding_group())
        for (int32_t b = 0; b < 8; ++b) s.sliding_table.push_back(5 * i + (4 - b % 5));
      seqs_.push_back(s);
    }
  }

  // Runs `step` on both runners; expects equal logits and returns the
  // greedy next token of each logits row.
  std::vector<int32_t> run_both(const StepBatch& step, int64_t want_graph_batch) {
    std::vector<float> a, b;
    const Status sa = graph_runner_->execute_logits(step, &a);
    EXPECT_TRUE(sa.ok()) << sa.error().message;
    EXPECT_EQ(graph_runner_->last_graph_batch_size(), want_graph_batch);
    const Status sb = eager_runner_->execute_logits(step, &b);
    EXPECT_TRUE(sb.ok()) << sb.error().message;
    EXPECT_EQ(a, b) << "graph and eager logits differ";
    std::vector<int32_t> next;
    const auto v = static_cast<size_t>(config_.vocab_size);
    for (size_t r = 0; r * v < b.size(); ++r)
      next.push_back(static_cast<int32_t>(
          std::max_element(b.begin() + r * v, b.begin() + (r + 1) * v) - (b.begin() + r * v)));
    return next;
  }

  // Feeds the listed sequences (all pending tokens, or one each when
  // decoding) and appends the greedy tokens.
  void step(const std::vector<int>& ids, bool decode, int64_t want_graph_batch) {
    std::vector<Seq*> seqs;
    std::vector<int32_t> num_new;
    for (int i : ids) {
      Seq& s = seqs_[static_cast<size_t>(i)];
      seqs.push_back(&s);
      num_new.push_back(decode ? 1 : static_cast<int32_t>(s.tokens.size()) - s.num_cached);
    }
    const std::vector<int32_t> next =
        run_both(make_step(seqs, num_new, kBlockSize, window()), want_graph_batch);
    ASSERT_EQ(next.size(), seqs.size());
    for (size_t i = 0; i < seqs.size(); ++i) {
      seqs[i]->num_cached += num_new[i];
      seqs[i]->tokens.push_back(next[i]);
    }
  }

  // A verification step: sequence ids[i] feeds its next num_new[i] tokens
  // (its pending token and num_new[i] - 1 drafts, appended when it has
  // fewer), every row's logits are compared, then it keeps accepted[i] <
  // num_new[i] drafts and the greedy token after them; the rejected
  // positions are fed again later (their KV rewritten).
  void verify(const std::vector<int>& ids, const std::vector<int32_t>& num_new,
              const std::vector<int32_t>& accepted, int64_t want_graph_batch) {
    std::vector<Seq*> seqs;
    for (size_t i = 0; i < ids.size(); ++i) {
      Seq& s = seqs_[static_cast<size_t>(ids[i])];
      while (static_cast<int32_t>(s.tokens.size()) < s.num_cached + num_new[i])
        s.tokens.push_back((s.num_cached * 31 + static_cast<int32_t>(s.tokens.size())) % 97);
      seqs.push_back(&s);
    }
    const StepBatch in = make_step(seqs, num_new, kBlockSize, window(), /*all_rows=*/true);
    const std::vector<int32_t> next = run_both(in, want_graph_batch);
    ASSERT_EQ(next.size(), in.token_ids.size());
    for (size_t i = 0; i < seqs.size(); ++i) {
      Seq& s = *seqs[i];
      ASSERT_LT(accepted[i], num_new[i]);
      s.num_cached += accepted[i] + 1;
      s.tokens.resize(static_cast<size_t>(s.num_cached));
      s.tokens.push_back(next[static_cast<size_t>(in.query_start_loc[i] + accepted[i])]);
    }
  }

  ModelConfig config_;
  test::MemorySource src_;
  GraphEmulatingBackend graphs_;
  CpuBackend cpu_;
  std::unique_ptr<ModelRunner> graph_runner_, eager_runner_;
  std::vector<Seq> seqs_;
};

TEST(DecodeGraphSizes, LadderCoversEveryBatchUpToTheLimit) {
  const std::vector<int64_t> l256 = decode_graph_batch_sizes(256);
  ASSERT_EQ(l256.size(), 35u);
  EXPECT_EQ((std::vector<int64_t>(l256.begin(), l256.begin() + 6)),
            (std::vector<int64_t>{1, 2, 4, 8, 16, 24}));
  EXPECT_EQ(l256.back(), 256);
  EXPECT_EQ(decode_graph_batch_sizes(10), (std::vector<int64_t>{1, 2, 4, 8, 10}));
  EXPECT_EQ(decode_graph_batch_sizes(3), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(decode_graph_batch_sizes(1), (std::vector<int64_t>{1}));
  EXPECT_TRUE(decode_graph_batch_sizes(0).empty());
  EXPECT_EQ(decode_graph_batch_sizes(4096).back(), kMaxDecodeGraphBatch);

  EXPECT_EQ(pick_decode_graph(l256, 1), 0);
  EXPECT_EQ(pick_decode_graph(l256, 3), 2);    // -> 4
  EXPECT_EQ(pick_decode_graph(l256, 17), 5);   // -> 24
  EXPECT_EQ(pick_decode_graph(l256, 256), 34);
  EXPECT_EQ(pick_decode_graph(l256, 257), -1);
}

TEST(DecodeGraphIndex, PadsRowsOntoTheScratchBlockAndRelaysTables) {
  StepBatch s;
  s.token_ids = {5, 6};
  s.positions = {9, 2};
  s.slot_mapping = {41, 18};
  s.query_start_loc = {0, 1, 2};
  s.seq_lens = {10, 3};
  s.max_blocks_per_seq = 3;
  s.block_tables = {3, 10, 7, 4, 0, 0};
  ASSERT_TRUE(is_decode_only(s));
  const int64_t batch = 4, width = 5;
  std::vector<int32_t> ids(batch, 99), pos(batch, 99), slots(batch, 99), qsl(batch + 1, 99),
      lens(batch, 99), tables(batch * width, 99);
  write_padded_decode_index(
      s, batch, width, /*scratch_block=*/77, /*sliding_scratch_block=*/-1,
      {ids.data(), pos.data(), slots.data(), qsl.data(), lens.data(), tables.data()});
  EXPECT_EQ(ids, (std::vector<int32_t>{5, 6, 0, 0}));
  EXPECT_EQ(pos, (std::vector<int32_t>{9, 2, 0, 0}));
  EXPECT_EQ(slots, (std::vector<int32_t>{41, 18, -1, -1}));
  EXPECT_EQ(qsl, (std::vector<int32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(lens, (std::vector<int32_t>{10, 3, 1, 1}));
  EXPECT_EQ((std::vector<int32_t>(tables.begin(), tables.begin() + 3)),
            (std::vector<int32_t>{3, 10, 7}));
  EXPECT_EQ((std::vector<int32_t>(tables.begin() + 5, tables.begin() + 8)),
            (std::vector<int32_t>{4, 0, 0}));
  EXPECT_EQ(tables[10], 77);
  EXPECT_EQ(tables[15], 77);

  s.token_ids.push_back(1);  // a sequence with two new tokens: not decode-only
  s.query_start_loc.back() = 3;
  EXPECT_FALSE(is_decode_only(s));
}

TEST(VerifyGraphSizes, LadderBoundedBySeqsTokensAndTheCap) {
  const std::vector<int64_t> l = verify_graph_batch_sizes(256, 2048, 5, 4096);
  ASSERT_EQ(l.size(), 19u);  // 1, 2, 4, 8 .. 128
  EXPECT_EQ(l.back(), kMaxVerifyGraphBatch);
  // 64 tokens hold 12 sequences of 5 rows.
  EXPECT_EQ(verify_graph_batch_sizes(256, 64, 5, 4096), (std::vector<int64_t>{1, 2, 4, 8, 12}));
  EXPECT_EQ(verify_graph_batch_sizes(3, 2048, 2, 4096), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_TRUE(verify_graph_batch_sizes(256, 2048, 1, 4096).empty());  // no drafts
  EXPECT_TRUE(verify_graph_batch_sizes(256, 2048, 0, 4096).empty());
  EXPECT_TRUE(verify_graph_batch_sizes(256, 4, 5, 4096).empty());  // not one sequence's rows
  EXPECT_TRUE(verify_graph_batch_sizes(256, 2048, 5, 4).empty());  // longer than any sequence
}

// Three sequences of 4, 1 and 2 new tokens padded to 4 slots of Q = 4 rows.
StepBatch ragged_verification_step() {
  StepBatch s;
  s.token_ids = {1, 2, 3, 4, 5, 6, 7};
  s.positions = {6, 7, 8, 9, 6, 3, 4};
  s.slot_mapping = {20, 21, 22, 23, 30, 40, 41};
  s.query_start_loc = {0, 4, 5, 7};
  s.seq_lens = {10, 7, 5};
  s.max_blocks_per_seq = 3;
  s.block_tables = {3, 10, 7, 4, 9, 0, 5, 6, 8};
  s.logits_rows = {0, 1, 2, 3, 4, 5, 6};
  return s;
}

TEST(VerifyGraphIndex, FitsWhenEveryShortSequenceCanBeLeftPadded) {
  StepBatch s = ragged_verification_step();
  EXPECT_TRUE(fits_verify_graph(s, 4, /*left_padding=*/true));
  EXPECT_FALSE(fits_verify_graph(s, 4, /*left_padding=*/false));  // a sliding-window KV group
  EXPECT_FALSE(fits_verify_graph(s, 3, true));                    // 4 new tokens > Q
  EXPECT_TRUE(fits_verify_graph(s, 5, true));
  EXPECT_FALSE(fits_verify_graph(s, 6, true));  // sequence 2's padding would reach position -1
  // Every sequence at Q rows needs no left padding.
  StepBatch full = s;
  full.token_ids = {1, 2, 3, 4, 5, 6, 7, 8};
  full.positions = {6, 7, 8, 9, 0, 1, 2, 3};
  full.slot_mapping = {20, 21, 22, 23, 30, 31, 32, 33};
  full.query_start_loc = {0, 4, 8};
  full.seq_lens = {10, 4};
  full.block_tables.resize(6);
  EXPECT_TRUE(fits_verify_graph(full, 4, /*left_padding=*/false));
  EXPECT_FALSE(fits_verify_graph(StepBatch{}, 4, true));
}

TEST(VerifyGraphIndex, LeftPadsEachSequenceAndPadsSlotsOntoTheScratchBlock) {
  const StepBatch s = ragged_verification_step();
  EXPECT_EQ(verify_row_map(s, 4), (std::vector<int32_t>{0, 1, 2, 3, 7, 10, 11}));
  const int64_t batch = 4, width = 5, rows = batch * 4;
  std::vector<int32_t> ids(rows, 99), pos(rows, 99), slots(rows, 99), qsl(batch + 1, 99),
      lens(batch, 99), tables(batch * width, 99), sliding_slots(rows, 99),
      sliding_tables(batch * width, 99);
  StepBatch w = s;  // with a sliding-window group's slots and tables
  w.sliding_slot_mapping = {120, 121, 122, 123, 130, 140, 141};
  w.sliding_block_tables = {-1, 11, 12, 13, 14, 15, 16, 17, 18};
  write_padded_verify_index(w, batch, /*query_len=*/4, width, /*block_size=*/2,
                            /*scratch_block=*/77, /*sliding_scratch_block=*/55,
                            {ids.data(), pos.data(), slots.data(), qsl.data(), lens.data(),
                             tables.data(), sliding_slots.data(), sliding_tables.data()});
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 2, 3, 4, 0, 0, 0, 5, 0, 0, 6, 7, 0, 0, 0, 0}));
  // Left padding at the positions the attention gives it (seq_len - Q + i).
  EXPECT_EQ(pos, (std::vector<int32_t>{6, 7, 8, 9, 3, 4, 5, 6, 1, 2, 3, 4, 0, 1, 2, 3}));
  EXPECT_EQ(slots,
            (std::vector<int32_t>{20, 21, 22, 23, -1, -1, -1, 30, -1, -1, 40, 41, -1, -1, -1, -1}));
  EXPECT_EQ(sliding_slots, (std::vector<int32_t>{120, 121, 122, 123, -1, -1, -1, 130, -1, -1, 140,
                                                 141, -1, -1, -1, -1}));
  EXPECT_EQ(qsl, (std::vector<int32_t>{0, 4, 8, 12, 16}));
  EXPECT_EQ(lens, (std::vector<int32_t>{10, 7, 5, 4}));
  EXPECT_EQ(tables, (std::vector<int32_t>{
                        3, 10, 7, 99, 99, 4,  9,  0,  99, 99,
                        5, 6,  8, 99, 99, 77, 77, 99, 99, 99}));  // Q = 4 tokens: 2 blocks of 2
  EXPECT_EQ(sliding_tables, (std::vector<int32_t>{-1, 11, 12, 99, 99, 13, 14, 15, 99, 99,
                                                  16, 17, 18, 99, 99, 55, 55, 99, 99, 99}));

  // Capture's all-padding batch: every slot on the scratch block.
  write_padded_verify_index(
      StepBatch{}, 2, 4, width, 4, 77, -1,
      {ids.data(), pos.data(), slots.data(), qsl.data(), lens.data(), tables.data()});
  EXPECT_EQ((std::vector<int32_t>(slots.begin(), slots.begin() + 8)), std::vector<int32_t>(8, -1));
  EXPECT_EQ((std::vector<int32_t>(qsl.begin(), qsl.begin() + 3)), (std::vector<int32_t>{0, 4, 8}));
  EXPECT_EQ(tables[0], 77);
  EXPECT_EQ(tables[width], 77);
}

// gpu_memory_utilization is per process: memory others held at start does
// not count, what this process took since does, and free memory caps it.
TEST(DeviceKvBudget, CountsOnlyThisProcessAndStaysUnderFreeMemory) {
  constexpr size_t kGiB = size_t{1} << 30;
  const double reserve = kDeviceFreeReserve;
  // Alone on a 100 GiB device: 0.9 * 100 - (16 GiB of weights and scratch).
  EXPECT_DOUBLE_EQ(device_kv_budget_bytes(0.9, 100 * kGiB, 99 * kGiB, 83 * kGiB), 74.0 * kGiB);
  // Another engine holds 90 GiB: a 0.05 share (5 GiB) minus 1 GiB of our own.
  EXPECT_DOUBLE_EQ(device_kv_budget_bytes(0.05, 100 * kGiB, 10 * kGiB, 9 * kGiB), 4.0 * kGiB);
  // The share is larger than what is free: free memory minus the reserve.
  EXPECT_DOUBLE_EQ(device_kv_budget_bytes(0.9, 100 * kGiB, 10 * kGiB, 9 * kGiB),
                   9.0 * kGiB - reserve);
  // Our own use already exceeds the share: no room.
  EXPECT_LE(device_kv_budget_bytes(0.1, 100 * kGiB, 99 * kGiB, 80 * kGiB), 0.0);
  // Free memory grew since start (another process exited): nothing counted as ours.
  EXPECT_DOUBLE_EQ(device_kv_budget_bytes(0.5, 100 * kGiB, 40 * kGiB, 60 * kGiB), 50.0 * kGiB);
}

TEST(MemoryProfileStep, IsAValidStepOfTheLargestBatch) {
  struct Case {
    int64_t max_tokens, max_seqs, max_len, block_size, rows;
  };
  for (const Case& c : {Case{2048, 256, 4096, 16, 256}, Case{100, 8, 30, 7, 8},
                        Case{64, 2, 16, 16, 2}, Case{5, 8, 128, 4, 8}}) {
    const ProfileStep p = make_profile_step(c.max_tokens, c.max_seqs, c.max_len, c.block_size,
                                            c.rows, /*vocab=*/97);
    const int64_t want_tokens = std::min(c.max_tokens, c.max_seqs * c.max_len);
    EXPECT_EQ(static_cast<int64_t>(p.step.token_ids.size()), want_tokens);
    EXPECT_EQ(static_cast<int64_t>(p.step.logits_rows.size()), c.rows);
    StepLimits l;
    l.max_tokens = c.max_tokens;
    l.max_seqs = c.max_seqs;
    l.max_blocks_per_seq = p.table_width;
    l.num_kv_blocks = p.num_blocks;
    l.block_size = c.block_size;
    l.vocab_size = 97;
    l.max_model_len = c.max_len;
    const Status st = validate_step(p.step, l, /*sampling=*/true);
    EXPECT_TRUE(st.ok()) << st.error().message;
    // Every slot is distinct: no two tokens share KV.
    std::vector<int32_t> slots = p.step.slot_mapping;
    std::sort(slots.begin(), slots.end());
    EXPECT_EQ(std::adjacent_find(slots.begin(), slots.end()), slots.end());
    // With a sliding-window KV group: that group's tables and slots too,
    // the same blocks of its own pool.
    const ProfileStep w = make_profile_step(c.max_tokens, c.max_seqs, c.max_len, c.block_size,
                                            c.rows, /*vocab=*/97, /*sliding_group=*/true);
    l.num_sliding_kv_blocks = w.num_blocks;
    l.sliding_window = 5;
    const Status sw = validate_step(w.step, l, /*sampling=*/true);
    EXPECT_TRUE(sw.ok()) << sw.error().message;
    EXPECT_EQ(w.step.sliding_block_tables, w.step.block_tables);
    l.num_sliding_kv_blocks = 0;
  }
}

TEST_F(DecodeGraphRunnerTest, CapturesTheLadderAndKeepsTheRequestedPool) {
  EXPECT_EQ(graph_runner_->decode_graph_sizes(), (std::vector<int64_t>{1, 2, 4, 8}));
  EXPECT_EQ(graph_runner_->verify_graph_sizes(), (std::vector<int64_t>{1, 2, 4, 8}));
  EXPECT_EQ(graphs_.num_graphs(), 8);
  EXPECT_EQ(graph_runner_->num_kv_blocks(), 64);  // the scratch block is extra
  EXPECT_TRUE(eager_runner_->decode_graph_sizes().empty());
  EXPECT_TRUE(eager_runner_->verify_graph_sizes().empty());

  RunnerOptions o;
  o.block_size = kBlockSize;
  o.num_kv_blocks = 64;
  o.max_num_seqs = 8;
  o.max_num_batched_tokens = 64;
  o.enforce_eager = true;
  o.verify_graph_query_len = kVerifyLen;
  GraphEmulatingBackend other;
  auto r = ModelRunner::create(other, config_, src_, o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE((*r)->decode_graph_sizes().empty());
  EXPECT_TRUE((*r)->verify_graph_sizes().empty());
  EXPECT_EQ(other.num_graphs(), 0);

  // Without speculation: decode graphs only. 16 tokens hold 4 verification slots of 4.
  o.enforce_eager = false;
  o.verify_graph_query_len = 0;
  GraphEmulatingBackend plain;
  auto p = ModelRunner::create(plain, config_, src_, o);
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_TRUE((*p)->verify_graph_sizes().empty());
  EXPECT_EQ(plain.num_graphs(), 4);
  o.verify_graph_query_len = kVerifyLen;
  o.max_num_batched_tokens = 16;
  GraphEmulatingBackend small;
  auto q = ModelRunner::create(small, config_, src_, o);
  ASSERT_TRUE(q.ok()) << q.error().message;
  EXPECT_EQ((*q)->verify_graph_sizes(), (std::vector<int64_t>{1, 2, 4}));
}

TEST_F(DecodeGraphRunnerTest, ReplayedDecodeStepsMatchEagerLogits) {
  step({0, 1, 2, 3, 4}, /*decode=*/false, /*graph=*/0);  // prefill: eager
  for (int i = 0; i < 6; ++i) step({0, 1, 2, 3, 4}, true, 8);  // 5 padded to 8
  step({1, 3, 4}, true, 4);                                       // 3 padded to 4
  step({2}, true, 1);
  step({0, 2}, true, 2);
  // A prefill chunk longer than a verification slot joins: eager.
  seqs_[4].tokens.insert(seqs_[4].tokens.end(), {11, 12, 13, 14, 15});
  {
    std::vector<Seq*> seqs = {&seqs_[0], &seqs_[4]};
    const int32_t chunk = static_cast<int32_t>(seqs_[4].tokens.size()) - seqs_[4].num_cached;
    const StepBatch mixed = make_step(seqs, {1, chunk}, kBlockSize, window());
    run_both(mixed, 0);
    seqs_[0].num_cached += 1;
    seqs_[4].num_cached += chunk;
    seqs_[0].tokens.push_back(1);
    seqs_[4].tokens.push_back(2);
  }
  for (int i = 0; i < 4; ++i) step({0, 1, 2, 3, 4}, true, 8);
  EXPECT_GT(graphs_.num_replays(), 10);
}

// Verification steps (up to kVerifyLen rows per sequence, ragged) replay the
// verification graphs with left padding and padding slots, and give the
// eager logits on every row; steps that do not fit run eagerly.
TEST_F(DecodeGraphRunnerTest, ReplayedVerificationStepsMatchEagerLogits) {
  step({0, 1, 2, 3, 4}, /*decode=*/false, /*graph=*/0);
  // Sequence 2 holds 2 tokens: left padding to 4 rows would reach position
  // -2, so this step runs eagerly.
  verify({0, 1, 2, 3, 4}, {4, 1, 1, 3, 4}, {3, 0, 0, 1, 2}, 0);
  const int before = graphs_.num_replays();
  verify({0, 1, 2, 3, 4}, {4, 4, 2, 1, 4}, {3, 1, 1, 0, 0}, 8);  // 5 padded to 8
  verify({1, 3}, {4, 4}, {0, 3}, 2);
  verify({4}, {2}, {1}, 1);
  verify({0, 2, 4}, {3, 4, 4}, {2, 3, 0}, 4);  // 3 padded to 4
  EXPECT_EQ(graphs_.num_replays(), before + 4);
  step({0, 1, 2, 3, 4}, /*decode=*/true, 8);  // decode steps keep their graphs
  verify({0, 1}, {5, 2}, {4, 1}, 0);          // 5 rows > kVerifyLen: eager
  verify({0, 1, 2, 3, 4}, {2, 3, 4, 1, 1}, {1, 2, 0, 0, 0}, 8);
}

// Async scheduling: a verification step's first token is the step before's
// sample (pending on the device); the replay fills it into its padded row.
TEST_F(DecodeGraphRunnerTest, PendingTokensReachAVerificationReplay) {
  step({0, 1, 2}, false, 0);
  for (int i = 0; i < 3; ++i) step({0, 1, 2}, true, 4);
  std::vector<Seq*> seqs = {&seqs_[0], &seqs_[1], &seqs_[2]};
  const StepBatch a = make_step(seqs, {1, 1, 1}, kBlockSize);
  // The next step feeds each sequence's sample from `a` (unknown: 0 here)
  // and then 1, 3 and 0 drafts.
  for (Seq* s : seqs) {
    s->num_cached += 1;
    s->tokens.resize(static_cast<size_t>(s->num_cached));
    s->tokens.insert(s->tokens.end(), {0, 17, 18, 19});
  }
  StepBatch b = make_step(seqs, {2, 4, 1}, kBlockSize, 0, /*all_rows=*/true);
  b.pending_rows = {0, 2, 6};
  b.pending_sources = {0, 1, 2};
  SampleOutput ga, gb, ea, eb;
  for (auto [runner, out_a, out_b] :
       {std::tuple{graph_runner_.get(), &ga, &gb}, std::tuple{eager_runner_.get(), &ea, &eb}}) {
    ASSERT_TRUE(runner->launch(a, 0).ok());
    ASSERT_TRUE(runner->launch(b, 1).ok());
    ASSERT_TRUE(runner->collect(0, out_a).ok());
    ASSERT_TRUE(runner->collect(1, out_b).ok());
  }
  EXPECT_EQ(graph_runner_->last_graph_batch_size(), 4);  // 3 sequences padded to 4
  EXPECT_EQ(ga.token_ids, ea.token_ids);
  ASSERT_EQ(gb.token_ids.size(), 7u);
  EXPECT_EQ(gb.token_ids, eb.token_ids);
  EXPECT_EQ(gb.logprobs, eb.logprobs);
  EXPECT_EQ(gb.top_logprobs, eb.top_logprobs);
}

// A mixture of experts (the gated shared expert included): routing stays on
// the device, so replayed decode steps give the eager logits too.
class DecodeGraphMoeRunnerTest : public DecodeGraphRunnerTest {
 protected:
  ModelConfig model_config() const override { return test::tiny_moe_config("qwen2_moe"); }
};

TEST_F(DecodeGraphMoeRunnerTest, ReplayedDecodeStepsMatchEagerLogits) {
  step({0, 1, 2, 3, 4}, /*decode=*/false, /*graph=*/0);
  for (int i = 0; i < 4; ++i) step({0, 1, 2, 3, 4}, true, 8);
  step({1, 3, 4}, true, 4);
  step({2}, true, 1);
  verify({0, 1, 2, 3, 4}, {4, 4, 2, 1, 4}, {3, 1, 1, 0, 0}, 8);
  verify({1, 3}, {3, 4}, {0, 3}, 2);
  EXPECT_GT(graphs_.num_replays(), 7);
}

// Gemma 3 with the sliding-window KV group: replays read the group's slots
// and tables (released entries before each window, padding rows on the
// group's own scratch block) and give the eager logits.
class DecodeGraphSlidingRunnerTest : public DecodeGraphRunnerTest {
 protected:
  ModelConfig model_config() const override { return test::tiny_config("gemma3"); }
  bool sliding_group() const override { return true; }
};

TEST_F(DecodeGraphSlidingRunnerTest, ReplayedDecodeStepsMatchEagerLogits) {
  // 64 full blocks hold two sequences of 128 tokens; so do 4 sliding ones,
  // plus a step of up to 64 tokens over 8 sequences: 64 / 4 + 8.
  EXPECT_EQ(graph_runner_->num_sliding_kv_blocks(), 28);
  step({0, 1, 2, 3, 4}, /*decode=*/false, /*graph=*/0);
  for (int i = 0; i < 6; ++i) step({0, 1, 2, 3, 4}, true, 8);
  step({1, 3, 4}, true, 4);
  step({2}, true, 1);
  EXPECT_GT(graphs_.num_replays(), 7);
}

// With the sliding-window group left padding could read keys released
// before a window: only steps whose every sequence has kVerifyLen rows
// replay a verification graph (padding slots on the group's scratch block).
TEST_F(DecodeGraphSlidingRunnerTest, VerificationStepsReplayOnlyWithoutLeftPadding) {
  step({0, 1, 2, 3, 4}, /*decode=*/false, /*graph=*/0);
  for (int i = 0; i < 3; ++i) step({0, 1, 2, 3, 4}, true, 8);
  verify({0, 1, 2, 3, 4}, {4, 4, 4, 4, 4}, {3, 0, 1, 2, 3}, 8);
  verify({0, 1, 2, 3, 4}, {4, 1, 4, 2, 4}, {1, 0, 3, 1, 0}, 0);
  verify({1, 3}, {4, 4}, {1, 2}, 2);
  verify({0, 2, 4}, {4, 4, 4}, {0, 3, 2}, 4);
}

TEST_F(DecodeGraphRunnerTest, SamplingAndBlockCopiesWorkAroundAReplay) {
  step({0, 1, 2}, false, 0);
  // Copy-on-write of sequence 1's first block into a free block, applied
  // before the replayed forward; the sequence then reads the copy.
  std::vector<Seq*> seqs = {&seqs_[0], &seqs_[1], &seqs_[2]};
  StepBatch in = make_step(seqs, {1, 1, 1}, kBlockSize);
  in.copy_src = {seqs_[1].table[0]};
  in.copy_dst = {60};
  const int32_t width = in.max_blocks_per_seq;
  in.block_tables[static_cast<size_t>(width)] = 60;
  SampleOutput a, b;
  ASSERT_TRUE(graph_runner_->execute(in, &a).ok());
  EXPECT_EQ(graph_runner_->last_graph_batch_size(), 4);
  ASSERT_TRUE(eager_runner_->execute(in, &b).ok());
  EXPECT_EQ(a.token_ids, b.token_ids);
  EXPECT_EQ(a.logprobs, b.logprobs);
  EXPECT_EQ(a.top_ids, b.top_ids);
  EXPECT_EQ(a.top_logprobs, b.top_logprobs);
}

}  // namespace
}  // namespace pagoda
