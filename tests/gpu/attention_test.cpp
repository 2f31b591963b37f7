// paged_attention on the CUDA backend against the CPU reference: head dims
// 8..256, GQA/MQA/MHA, block sizes 1..256, decode-only, prefill-only (with
// and without a cached prefix) and mixed ragged batches, contexts up to 32k,
// and a graph captured with maximal hints replayed on a smaller batch.
// Pure-decode batches with Hq / Hkv <= 16 run the decode kernel, batches
// with a query longer than 1 and head dims <= 128 the prefill kernel, the
// others the tile kernel; the DecodeKernel* and PrefillKernel* tests aim at
// those kernels' edges.
// Cache slots no sequence owns hold NaN, so any read outside a sequence's
// context shows up in the output.
#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <numeric>

#include "test_util.h"

namespace pagoda::gpu_test {
namespace {

// A released sliding-window block's table entry (kv/kv_manager.h's kNullBlock).
constexpr int32_t kNullBlock = -1;

struct SeqShape {
  int q_len;
  int seq_len;
};

struct AttnCase {
  int hq, hkv, d, block_size;
  std::vector<SeqShape> seqs;
  float q_scale = 1.0f;  // larger: peakier softmax
  float softcap = 0.0f;  // Gemma: attention-logit soft-capping
  int window = 0;        // Gemma: sliding window
  // With a window: table entries of blocks wholly before each sequence's
  // first query's window are kNullBlock (-1), as a sliding-window KV group
  // leaves them (kv/kv_manager.h).
  bool release_before_window = false;
};

// Host data of one ragged batch.
struct AttnBatch {
  QkvLayout layout;
  int block_size = 0;
  int64_t num_tokens = 0, num_blocks = 0;
  int max_blocks_per_seq = 0, max_query_len = 0, max_seq_len = 0, num_decode = 0;
  std::vector<float> qkv, k, v;
  std::vector<int32_t> qsl, seq_lens, tables;
};

AttnBatch make_batch(DType dt, const AttnCase& c) {
  AttnBatch b;
  b.layout = QkvLayout{c.hq, c.hkv, c.d};
  b.block_size = c.block_size;
  const int num_seqs = static_cast<int>(c.seqs.size());
  b.qsl.push_back(0);
  int64_t total_blocks = 0;
  for (const SeqShape& s : c.seqs) {
    b.qsl.push_back(b.qsl.back() + s.q_len);
    b.seq_lens.push_back(s.seq_len);
    const int blocks = (s.seq_len + c.block_size - 1) / c.block_size;
    b.max_blocks_per_seq = std::max(b.max_blocks_per_seq, blocks + 1);  // +1: a spare column
    b.max_query_len = std::max(b.max_query_len, s.q_len);
    b.max_seq_len = std::max(b.max_seq_len, s.seq_len);
    if (s.q_len == 1 && b.num_decode == static_cast<int>(b.seq_lens.size()) - 1) ++b.num_decode;  // leading run
    total_blocks += blocks;
  }
  b.num_tokens = b.qsl.back();
  b.num_blocks = total_blocks + 4;  // spare blocks stay NaN
  // Shuffled physical blocks; unused table entries point at NaN spare blocks.
  std::vector<int32_t> pool(static_cast<size_t>(b.num_blocks));
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), rng());
  const int32_t spare = pool.back();
  b.tables.assign(static_cast<size_t>(num_seqs * b.max_blocks_per_seq), spare);
  size_t next = 0;
  const int64_t kv_width = static_cast<int64_t>(c.hkv) * c.d;
  const size_t cache_elems = static_cast<size_t>(b.num_blocks * c.block_size * kv_width);
  b.k.assign(cache_elems, std::numeric_limits<float>::quiet_NaN());
  b.v.assign(cache_elems, std::numeric_limits<float>::quiet_NaN());
  for (int s = 0; s < num_seqs; ++s) {
    const int seq_len = c.seqs[static_cast<size_t>(s)].seq_len;
    const int blocks = (seq_len + c.block_size - 1) / c.block_size;
    for (int i = 0; i < blocks; ++i) b.tables[static_cast<size_t>(s * b.max_blocks_per_seq + i)] = pool[next++];
    const int first_query = seq_len - c.seqs[static_cast<size_t>(s)].q_len;
    const int lowest = std::max(0, first_query - c.window + 1);
    const int num_released = c.release_before_window && c.window > 0 ? lowest / c.block_size : 0;
    for (int p = 0; p < seq_len; ++p) {
      const int64_t slot = static_cast<int64_t>(b.tables[static_cast<size_t>(s * b.max_blocks_per_seq + p / c.block_size)]) *
                               c.block_size + p % c.block_size;
      const std::vector<float> kr = uniform(static_cast<size_t>(kv_width), -1, 1);
      const std::vector<float> vr = uniform(static_cast<size_t>(kv_width), -1, 1);
      std::copy(kr.begin(), kr.end(), b.k.begin() + slot * kv_width);
      std::copy(vr.begin(), vr.end(), b.v.begin() + slot * kv_width);
    }
    for (int i = 0; i < num_released; ++i)
      b.tables[static_cast<size_t>(s * b.max_blocks_per_seq + i)] = kNullBlock;
  }
  b.qkv = uniform(static_cast<size_t>(b.num_tokens * b.layout.row_width()), -1, 1);
  for (int64_t t = 0; t < b.num_tokens; ++t) {
    for (int64_t i = 0; i < static_cast<int64_t>(c.hq) * c.d; ++i) b.qkv[static_cast<size_t>(t * b.layout.row_width() + i)] *= c.q_scale;
  }
  round_all(dt, b.qkv);
  round_all(dt, b.k);
  round_all(dt, b.v);
  return b;
}

// Runs the batch on `backend` in `dtype`; returns out [T, Hq * D] as f32.
// Leaves the device tensors alive in `keep` when asked (graph test).
struct AttnTensors {
  DevTensor qkv, k, v, qsl, seq_lens, tables, out;
  AttentionMetadata meta;
  KvCacheView cache;
  AttnTensors(Backend& be, DType dt, const AttnBatch& b)
      : qkv(be, dt, {b.num_tokens, b.layout.row_width()}, b.qkv),
        k(be, dt, {b.num_blocks, b.block_size, b.layout.num_kv_heads, b.layout.head_dim}, b.k),
        v(be, dt, {b.num_blocks, b.block_size, b.layout.num_kv_heads, b.layout.head_dim}, b.v),
        qsl(be, {static_cast<int64_t>(b.qsl.size())}, b.qsl),
        seq_lens(be, {static_cast<int64_t>(b.seq_lens.size())}, b.seq_lens),
        tables(be, {static_cast<int64_t>(b.seq_lens.size()), b.max_blocks_per_seq}, b.tables),
        out(be, dt, {b.num_tokens, static_cast<int64_t>(b.layout.num_q_heads) * b.layout.head_dim}) {
    meta.query_start_loc = qsl.t();
    meta.seq_lens = seq_lens.t();
    meta.block_tables = tables.t();
    meta.num_seqs = static_cast<int>(b.seq_lens.size());
    meta.max_query_len = b.max_query_len;
    meta.max_seq_len = b.max_seq_len;
    meta.max_blocks_per_seq = b.max_blocks_per_seq;
    meta.num_decode_seqs = b.num_decode;
    cache = KvCacheView{k.t(), v.t(), b.block_size, Tensor()};
  }
};

AttentionScoring default_scoring(const AttnBatch& b) {
  return AttentionScoring(1.0f / std::sqrt(static_cast<float>(b.layout.head_dim)));
}

std::vector<float> cpu_attention(const AttnBatch& b, const AttentionScoring& scoring) {
  AttnTensors t(cpu_backend(), DType::kF32, b);
  cpu_backend().paged_attention(t.qkv.t(), b.layout, t.cache, t.meta, scoring, t.out.t());
  return t.out.download();
}

std::vector<float> cpu_attention(const AttnBatch& b) {
  return cpu_attention(b, default_scoring(b));
}

// `got`, the output of a graph replayed on r's tokens (rows [0,
// r.num_tokens)) after the output was poisoned: the rows past them belong to
// no sequence and must still be NaN; the live rows must match the CPU on r.
void expect_live_rows(std::vector<float> got, const AttnBatch& r, DType dt, const std::string& what) {
  const size_t row = static_cast<size_t>(r.layout.num_q_heads) * r.layout.head_dim;
  size_t touched = 0;
  for (size_t i = static_cast<size_t>(r.num_tokens) * row; i < got.size(); ++i) {
    touched += std::isnan(got[i]) ? 0 : 1;
  }
  EXPECT_EQ(touched, 0u) << what << ": rows of tokens outside [qsl[0], qsl[num_seqs]) were written";
  got.resize(static_cast<size_t>(r.num_tokens) * row);
  expect_close(got, cpu_attention(r), dt, what);
}

std::string describe(const AttnCase& c) {
  std::string s = "hq=" + std::to_string(c.hq) + " hkv=" + std::to_string(c.hkv) +
                  " d=" + std::to_string(c.d) + " bs=" + std::to_string(c.block_size) + " seqs=";
  for (size_t i = 0; i < c.seqs.size() && i < 6; ++i) {
    s += '(';
    s += std::to_string(c.seqs[i].q_len);
    s += '/';
    s += std::to_string(c.seqs[i].seq_len);
    s += ')';
  }
  if (c.seqs.size() > 6) s += "... (" + std::to_string(c.seqs.size()) + " seqs)";
  return s;
}

void run_case(const AttnCase& c) {
  for (DType dt : kHalfTypes) {
    SCOPED_TRACE(std::string(dtype_name(dt)) + " " + describe(c));
    CudaBackend& gpu = *cuda_backend(dt);
    const AttnBatch b = make_batch(dt, c);
    AttnTensors g(gpu, dt, b);
    g.out.poison();
    const AttentionScoring scoring(default_scoring(b).scale, c.softcap, c.window);
    gpu.paged_attention(g.qkv.t(), b.layout, g.cache, g.meta, scoring, g.out.t());
    expect_close(g.out.download(), cpu_attention(b, scoring), dt, "paged_attention");
    expect_status_ok(gpu);
  }
}

// `n` decode sequences with contexts in [lo, hi].
std::vector<SeqShape> decodes(int n, int lo, int hi) {
  std::vector<SeqShape> s;
  for (int32_t len : uniform_ints(static_cast<size_t>(n), lo, hi)) s.push_back({1, len});
  return s;
}

// `n` decode sequences: the first contexts sit on the edges of the decode
// kernel's 16-key warp tiles and 64-key rounds of its four warps, the rest
// are drawn from [1, hi].
std::vector<SeqShape> edge_decodes(int n, int hi) {
  static const int kEdges[] = {1, 2, 15, 16, 17, 63, 64, 65};
  const std::vector<int32_t> drawn = uniform_ints(static_cast<size_t>(n), 1, hi);
  std::vector<SeqShape> s;
  for (int i = 0; i < n; ++i) {
    s.push_back({1, i < 8 ? kEdges[i] : drawn[static_cast<size_t>(i)]});
  }
  return s;
}

std::vector<SeqShape> concat(std::vector<SeqShape> a, const std::vector<SeqShape>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(CudaAttentionTest, DecodeOnly) {
  PAGODA_REQUIRE_GPU();
  const AttnCase cases[] = {
      {32, 8, 128, 16, decodes(8, 1, 3000)},  {8, 8, 64, 1, decodes(5, 1, 300)},
      {4, 1, 256, 32, decodes(3, 1, 2000)},   {14, 2, 64, 16, decodes(64, 1, 600)},
      {2, 1, 8, 7, decodes(9, 1, 100)},       {6, 2, 96, 16, decodes(4, 100, 900)},
      {4, 4, 80, 16, decodes(6, 1, 500)},     {8, 2, 32, 256, decodes(3, 200, 1500)},
      {2, 2, 192, 16, decodes(4, 1, 700)},    {4, 2, 16, 5, decodes(7, 1, 400)},
      {3, 1, 40, 16, decodes(5, 1, 300)},     {1, 1, 128, 16, decodes(2, 1, 1000)},
      {32, 1, 64, 16, decodes(3, 1, 2000)},   {32, 8, 128, 16, decodes(40, 1, 2000)},
      {16, 4, 128, 16, decodes(1, 1, 1), 4.0f}};
  for (const AttnCase& c : cases) run_case(c);
}

TEST(CudaAttentionTest, PrefillOnly) {
  PAGODA_REQUIRE_GPU();
  const AttnCase cases[] = {
      {8, 2, 128, 16, {{37, 37}, {128, 128}, {1, 1}}},
      {4, 4, 64, 1, {{50, 300}, {64, 64}}},
      {32, 8, 128, 16, {{200, 1000}}, 3.0f},
      {4, 1, 256, 32, {{65, 65}, {17, 100}}},
      {2, 1, 8, 16, {{100, 100}, {3, 10}}},
      {6, 2, 96, 7, {{33, 80}}},
      {14, 2, 64, 16, {{129, 129}}},
      {2, 2, 192, 256, {{70, 600}}},
      {3, 1, 40, 16, {{45, 45}}}};
  for (const AttnCase& c : cases) run_case(c);
}

TEST(CudaAttentionTest, MixedPrefillAndDecode) {
  PAGODA_REQUIRE_GPU();
  const AttnCase cases[] = {
      {32, 8, 128, 16, concat({{100, 100}, {30, 530}}, decodes(20, 1, 1500))},
      {8, 2, 64, 1, concat(decodes(3, 1, 50), {{16, 16}, {2, 40}})},
      {4, 1, 256, 16, concat({{7, 7}}, decodes(5, 100, 800))},
      {16, 16, 80, 32, concat(decodes(2, 1, 64), {{64, 200}, {1, 1}, {5, 5}})},
      {2, 1, 8, 16, concat({{300, 300}}, decodes(30, 1, 300))}};
  for (const AttnCase& c : cases) run_case(c);
}

// Gemma's scoring through all three kernels (decode, prefill for D <= 128,
// tile for D = 256) and split-KV: attention-logit soft-capping and sliding
// windows shorter and longer than a key tile, so that whole tiles and splits
// fall outside some rows' windows.
TEST(CudaAttentionTest, SoftcapAndSlidingWindow) {
  PAGODA_REQUIRE_GPU();
  for (int window : {1, 5, 64, 100, 512}) {
    for (float cap : {0.0f, 50.0f, 2.0f}) {
      SCOPED_TRACE("window " + std::to_string(window) + " softcap " + std::to_string(cap));
      const AttnCase cases[] = {
          {8, 4, 256, 16, decodes(6, 1, 3000), 3.0f, cap, window},
          {4, 1, 256, 16, concat(decodes(3, 1, 900), {{37, 700}, {130, 130}}), 3.0f, cap, window},
          {8, 2, 128, 16, {{200, 200}, {64, 1000}, {1, 1}}, 3.0f, cap, window},
          {8, 8, 64, 7, concat(decodes(2, 1, 200), {{90, 333}}), 3.0f, cap, window},
      };
      for (const AttnCase& c : cases) run_case(c);
    }
  }
}

// A sliding-window KV group's tables: entries before each sequence's window
// are kNullBlock. Every kernel (decode, prefill for D <= 128, tile for D =
// 256), split and unsplit, chunked prefills whose first query's window
// reaches back into an earlier chunk, windows inside one block and over
// many, block sizes that do and do not divide the key tiles.
TEST(CudaAttentionTest, SlidingWindowSkipsReleasedBlocks) {
  PAGODA_REQUIRE_GPU();
  for (int window : {5, 64, 100, 512, 1024}) {
    for (int bs : {16, 7}) {
      SCOPED_TRACE("window " + std::to_string(window) + " block_size " + std::to_string(bs));
      const float cap = window == 100 ? 50.0f : 0.0f;
      const AttnCase cases[] = {
          {8, 4, 256, bs, decodes(6, 1, 3000), 3.0f, cap, window, true},
          {8, 1, 128, bs, decodes(40, 1, 4000), 3.0f, cap, window, true},
          {4, 1, 256, bs, concat(decodes(3, 1, 900), {{37, 700}, {130, 1130}}), 3.0f, cap, window,
           true},
          {8, 2, 128, bs, {{200, 2200}, {64, 1000}, {1, 1}, {300, 300}}, 3.0f, cap, window, true},
          {8, 8, 64, bs, concat(decodes(2, 1, 200), {{90, 333}, {513, 2049}}), 3.0f, cap, window,
           true},
      };
      for (const AttnCase& c : cases) run_case(c);
    }
  }
}

TEST(CudaAttentionTest, LongContexts) {
  PAGODA_REQUIRE_GPU();
  const AttnCase cases[] = {
      {32, 8, 128, 16, {{1, 4096}, {1, 16384}, {1, 32768}}},
      {8, 1, 128, 16, {{1, 32000}}, 2.0f},
      {8, 2, 128, 16, {{256, 8192}}},
      {4, 1, 64, 32, {{2048, 2048}}},
      {4, 2, 256, 16, concat({{64, 4096}}, decodes(4, 3000, 12000))}};
  for (const AttnCase& c : cases) run_case(c);
}

// Every group size the decode kernel takes (1..16) with head dims 64, 128,
// 256 and 80 (zero-padded to 96), block sizes 1..128, and contexts on the
// tile edges in one batch. Nine sequences of two kv heads are 18 CTAs, so
// the plan splits the keys (15 splits on 132 SMs): most splits of the short
// sequences are empty and their partials must still combine to the output.
TEST(CudaAttentionTest, DecodeKernelGroupsAndHeadDims) {
  PAGODA_REQUIRE_GPU();
  const int groups[] = {1, 2, 4, 8, 16};
  const int dims[] = {64, 128, 256, 80};
  const int block_sizes[] = {1, 16, 32, 128};
  const std::vector<SeqShape> seqs = {{1, 1000}, {1, 1},  {1, 2},  {1, 15}, {1, 16},
                                      {1, 17},   {1, 63}, {1, 64}, {1, 65}};
  for (size_t gi = 0; gi < std::size(groups); ++gi) {
    for (size_t di = 0; di < std::size(dims); ++di) {
      const int hkv = 2;
      run_case({groups[gi] * hkv, hkv, dims[di], block_sizes[(gi + di) % std::size(block_sizes)], seqs});
    }
  }
  // The other padded head dims (32, 192) once each.
  run_case({4, 1, 32, 16, seqs});
  run_case({16, 2, 192, 32, seqs});
}

// Split and unsplit plans. Batch 1..3 with long contexts: up to 32 splits of
// several 16-key tiles per warp, so each warp's two-stage pipeline refills.
// Batch 256 with two or more kv heads is >= 2 CTAs per SM on any GPU up to
// 256 SMs, so no split: one CTA per (sequence, kv head) walks the whole
// context (up to 4097 keys: 65 tiles per warp) and writes the output itself.
TEST(CudaAttentionTest, DecodeKernelSplitAndUnsplit) {
  PAGODA_REQUIRE_GPU();
  const AttnCase split_cases[] = {
      {32, 8, 128, 16, {{1, 4097}}},
      {16, 1, 128, 32, {{1, 32768}}, 2.0f},
      {8, 8, 64, 128, {{1, 4097}, {1, 17}}},
      {8, 2, 256, 16, {{1, 32768}}},
      {4, 1, 80, 1, {{1, 4097}, {1, 65}, {1, 1000}}},
      {32, 2, 128, 16, {{1, 4097}, {1, 1}}, 3.0f}};
  for (const AttnCase& c : split_cases) run_case(c);
  const AttnCase unsplit_cases[] = {
      {32, 8, 128, 16, concat(edge_decodes(254, 300), {{1, 4097}, {1, 1000}})},
      {16, 2, 64, 1, edge_decodes(256, 200)},
      {32, 2, 256, 32, edge_decodes(256, 100)},
      {4, 4, 80, 128, edge_decodes(256, 300)}};
  for (const AttnCase& c : unsplit_cases) run_case(c);
}

// The decode kernel in a graph captured with hints of a larger batch (9
// splits for 32 CTAs on 132 SMs), replayed (1) with shorter contexts, so
// most splits are empty, and (2) with only the first two sequences holding a
// token (qsl = 0 1 2 2 2): those two rows must match, the other two rows
// belong to no sequence and must stay untouched (poisoned).
TEST(CudaAttentionTest, DecodeKernelGraphReplay) {
  PAGODA_REQUIRE_GPU();
  for (DType dt : kHalfTypes) {
    SCOPED_TRACE(dtype_name(dt));
    CudaBackend& gpu = *cuda_backend(dt);
    const AttnCase big{32, 8, 128, 16, {{1, 5000}, {1, 3000}, {1, 64}, {1, 17}}};
    AttnBatch b = make_batch(dt, big);
    AttnTensors g(gpu, dt, b);
    const float scale = 1.0f / std::sqrt(128.0f);
    const int id = gpu.capture_graph([&] {
      gpu.paged_attention(g.qkv.t(), b.layout, g.cache, g.meta, scale, g.out.t());
    });
    ASSERT_GE(id, 0);

    // (1) Shorter contexts within the captured maxima.
    for (size_t s = 0; s < b.seq_lens.size(); ++s) {
      b.seq_lens[s] = uniform_ints(1, 1, b.seq_lens[s] > 200 ? 200 : b.seq_lens[s])[0];
    }
    g.seq_lens.upload_i32(b.seq_lens);
    g.out.poison();
    gpu.replay_graph(id);
    expect_close(g.out.download(), cpu_attention(b), dt, "decode graph replay, shorter contexts");

    // (2) Two of the four sequences hold a token.
    const int live = 2;
    AttnBatch r = b;
    r.qsl = {0, 1, 2};
    r.seq_lens.resize(live);
    r.seq_lens[0] = 4000;
    r.seq_lens[1] = 33;
    r.tables.resize(static_cast<size_t>(live * b.max_blocks_per_seq));
    r.num_tokens = live;
    r.qkv.resize(static_cast<size_t>(live * b.layout.row_width()));
    std::vector<int32_t> lens = b.seq_lens;
    lens[0] = r.seq_lens[0];
    lens[1] = r.seq_lens[1];
    g.qsl.upload_i32({0, 1, 2, 2, 2});
    g.seq_lens.upload_i32(lens);
    g.out.poison();
    gpu.replay_graph(id);
    expect_live_rows(g.out.download(), r, dt, "decode graph replay, two live sequences");
    expect_status_ok(gpu);
  }
}

// The prefill kernel's edges: 128-row tiles (two m16 tiles per warp, 32
// rows per warp) and 64-key double-buffered K/V tiles. Group sizes 1, 4, 8
// (so a tile holds 128, 32 or 16 tokens), query lengths on and off the tile
// boundaries (rows 127/128/129 for G = 1; 31/32/33 tokens for G = 4), cached
// prefixes so the diagonal falls inside a key tile at any offset, contexts
// 1 / 2 / 3 key tiles and one off, block sizes 1..64 (tiles across blocks).
TEST(CudaAttentionTest, PrefillKernelTileEdges) {
  PAGODA_REQUIRE_GPU();
  const int groups[] = {1, 4, 8};
  const int dims[] = {128, 64, 80, 32};
  const int block_sizes[] = {16, 1, 64, 7};
  for (size_t gi = 0; gi < std::size(groups); ++gi) {
    const int g = groups[gi];
    const int t = 128 / g;  // tokens per 128-row tile
    for (size_t di = 0; di < std::size(dims); ++di) {
      const int hkv = 2;
      const std::vector<SeqShape> seqs = {
          {t - 1, t - 1},       {t, t},           {t + 1, t + 1},    {2 * t + 3, 2 * t + 3},
          {t, t + 64},          {t + 1, t + 63},  {2, 65},           {3 * t - 1, 3 * t + 127},
          {17, 129},            {t + 5, 4 * t + 200}};
      run_case({g * hkv, hkv, dims[di], block_sizes[(gi + di) % std::size(block_sizes)], seqs});
    }
  }
}

// Chunked prefill shapes: a 2048-token chunk from scratch and a chunk over
// a 6144-token cached prefix (up to 104 key tiles per CTA through the double
// buffer), G = 4 as Llama-3.1-8B (fewer heads: the CPU reference is slow),
// and few CTAs per split so the plan splits the keys (split partials and
// the combine kernel with the 128-row tiles).
TEST(CudaAttentionTest, PrefillKernelChunks) {
  PAGODA_REQUIRE_GPU();
  const AttnCase cases[] = {
      {8, 2, 128, 16, {{2048, 2048}}},
      {8, 2, 128, 16, {{512, 6656}}},
      {8, 1, 128, 16, {{200, 4200}}, 2.0f},
      {4, 4, 128, 32, {{100, 5000}, {2, 3000}}},     // few CTAs: split keys
      {8, 8, 64, 16, {{129, 129}, {65, 4000}}},      // G = 1 MHA
      {16, 2, 96, 16, {{16, 16}, {17, 1000}}}};      // G = 8, one tile per seq
  for (const AttnCase& c : cases) run_case(c);
}

// Ragged mixed batches through the prefill kernel: decode rows (q_len 1)
// next to prefill chunks with and without prefix, empty-prefix chunks of 2
// tokens, and G = 1 / 4 / 8.
TEST(CudaAttentionTest, PrefillKernelMixedRagged) {
  PAGODA_REQUIRE_GPU();
  const AttnCase cases[] = {
      {32, 8, 128, 16, concat({{513, 513}, {2, 2}, {130, 1130}}, decodes(12, 1, 2000))},
      {8, 8, 128, 1, concat(decodes(5, 1, 300), {{128, 128}, {129, 700}, {2, 64}})},
      {16, 2, 64, 16, concat({{33, 33}}, edge_decodes(10, 500))},
      {8, 1, 32, 64, concat({{300, 300}, {1, 1}}, decodes(7, 60, 130))}};
  for (const AttnCase& c : cases) run_case(c);
}

// The prefill kernel in a graph captured with maximal hints (q_len 300 over
// 2000 keys), replayed with shorter chunks and contexts: grid from the
// hints, each CTA reads the real lengths, and rows of tokens past qsl[S]
// stay untouched.
TEST(CudaAttentionTest, PrefillKernelGraphReplay) {
  PAGODA_REQUIRE_GPU();
  for (DType dt : kHalfTypes) {
    SCOPED_TRACE(dtype_name(dt));
    CudaBackend& gpu = *cuda_backend(dt);
    const AttnCase big{32, 8, 128, 16, {{300, 2000}, {200, 1500}}};
    AttnBatch b = make_batch(dt, big);
    AttnTensors g(gpu, dt, b);
    const float scale = 1.0f / std::sqrt(128.0f);
    const int id = gpu.capture_graph([&] {
      gpu.paged_attention(g.qkv.t(), b.layout, g.cache, g.meta, scale, g.out.t());
    });
    ASSERT_GE(id, 0);
    // Sequence 0 keeps 150 tokens over 1000 keys, sequence 1 gets 70 tokens
    // over 70 keys; the other 280 token rows belong to no sequence.
    AttnBatch r = b;
    r.qsl = {0, 150, 220};
    r.seq_lens = {1000, 70};
    r.num_tokens = 220;
    r.qkv.resize(static_cast<size_t>(r.num_tokens * b.layout.row_width()));
    g.qsl.upload_i32(r.qsl);
    g.seq_lens.upload_i32(r.seq_lens);
    g.out.poison();
    gpu.replay_graph(id);
    expect_live_rows(g.out.download(), r, dt, "prefill graph replay, shorter chunks");
    expect_status_ok(gpu);
  }
}

// Speculative decoding's verification graphs (model/verify_graphs.h): every
// sequence slot holds Q = k + 1 query rows (a shorter draft left-padded in
// front of its rows), captured with the hints Q, B slots and a long context
// and replayed with other contexts per slot (down to Q): the prefill kernel
// at the 8B shape's heads (G = 4) for k = 1..4 and B = 1, 8, 64, every row
// against the CPU on the replayed batch.
TEST(CudaAttentionTest, VerificationGraphReplay) {
  PAGODA_REQUIRE_GPU();
  for (DType dt : kHalfTypes) {
    CudaBackend& gpu = *cuda_backend(dt);
    for (int q = 2; q <= 5; ++q) {
      for (int batch : {1, 8, 64}) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " Q=" + std::to_string(q) +
                     " B=" + std::to_string(batch));
        const int max_len = batch > 8 ? 1200 : 3000;
        AttnBatch b = make_batch(
            dt, {32, 8, 128, 16,
                 std::vector<SeqShape>(static_cast<size_t>(batch), SeqShape{q, max_len})});
        AttnTensors g(gpu, dt, b);
        const float scale = 1.0f / std::sqrt(128.0f);
        const int id = gpu.capture_graph(
            [&] { gpu.paged_attention(g.qkv.t(), b.layout, g.cache, g.meta, scale, g.out.t()); });
        ASSERT_GE(id, 0);
        b.seq_lens = uniform_ints(static_cast<size_t>(batch), q, max_len);
        b.seq_lens[0] = q;  // a padding slot's length
        g.seq_lens.upload_i32(b.seq_lens);
        g.out.poison();
        gpu.replay_graph(id);
        expect_close(g.out.download(), cpu_attention(b), dt, "verification graph replay");
        expect_status_ok(gpu);
      }
    }
  }
}

// Captured once with hints covering the largest batch, replayed after the
// device metadata changed to a smaller one (shorter contexts, fewer tokens
// per sequence): the kernel must read the real lengths on the device.
TEST(CudaAttentionTest, GraphReplayWithinCapturedHints) {
  PAGODA_REQUIRE_GPU();
  for (DType dt : kHalfTypes) {
    SCOPED_TRACE(dtype_name(dt));
    CudaBackend& gpu = *cuda_backend(dt);
    const AttnCase big{8, 2, 64, 16, {{1, 3000}, {1, 2000}, {1, 1000}}};
    AttnBatch b = make_batch(dt, big);
    AttnTensors g(gpu, dt, b);
    const float scale = 0.125f;
    const int id = gpu.capture_graph([&] {
      gpu.paged_attention(g.qkv.t(), b.layout, g.cache, g.meta, scale, g.out.t());
    });
    ASSERT_GE(id, 0);
    for (int round = 0; round < 2; ++round) {
      // Shorter contexts within the captured maxima.
      for (size_t s = 0; s < b.seq_lens.size(); ++s) {
        b.seq_lens[s] = std::max(1, b.seq_lens[s] - uniform_ints(1, 1, 900)[0]);
      }
      g.seq_lens.upload_i32(b.seq_lens);
      g.out.poison();
      gpu.replay_graph(id);
      expect_close(g.out.download(), cpu_attention(b), dt, "paged_attention graph replay");
    }
    expect_status_ok(gpu);
  }
}

}  // namespace
}  // namespace pagoda::gpu_test
