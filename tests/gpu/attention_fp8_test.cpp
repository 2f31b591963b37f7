// The FP8 KV cache (--kv-cache-dtype fp8) on the CUDA backend against the
// CPU reference, the specification (core/fp8.h, cpu_attention.cpp): each
// batch's cached context is stored as e4m3(x / scale) bytes, the new tokens
// go through kv_write on both backends (the caches must then be identical
// byte for byte: the device conversion is bit-exact), and paged_attention
// reads FP8 K/V through the decode kernel (G <= 16), the prefill kernel
// (q_len > 1, D <= 128) and the tile kernel (D > 128 prefill, G > 16
// decode), split and unsplit, with soft-capping and sliding windows, over
// scales that keep values in range and that saturate some (|x / scale| >
// 448). A graph captured on an FP8 cache replays after the scales change on
// the device: the kernels read them there, so the output follows.
// Decode runs through the register-converting FP8 decode kernel (head_dim %
// 16 == 0) and, in the same tests, through the staged one
// (CudaBackend::set_fp8_kv_decode_staged, PAGODA_FP8_KV_DECODE=old).
// Unused cache slots hold 0x7f (an e4m3 NaN), so stray reads show.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

#include "core/fp8.h"
#include "test_util.h"

namespace pagoda::gpu_test {
namespace {

constexpr uint8_t kE4M3Nan = 0x7f;

struct Seq {
  int q_len;
  int seq_len;
};

struct Fp8Case {
  int hq, hkv, d, block_size;
  std::vector<Seq> seqs;
  float k_scale = 1.0f, v_scale = 1.0f;
  float softcap = 0.0f;
  int window = 0;
  // Cached codes lie in +-range * 448 (one key in eight 8x that):
  // kSubnormalRange makes most of them e4m3 subnormals (< 2^-6).
  float range = 0.5f;
};

constexpr float kSubnormalRange = 1.0f / (64.0f * kE4M3Max);

// Host data of one batch: the cache holds every context token but the new
// ones, which kv_write adds from qkv (rows in `slots`).
struct Fp8Batch {
  QkvLayout layout;
  int block_size = 0;
  int64_t num_tokens = 0, num_blocks = 0;
  int max_blocks_per_seq = 0, max_query_len = 0, max_seq_len = 0, num_decode = 0;
  std::vector<float> qkv;     // [T, row_width], rounded to the compute dtype
  std::vector<uint8_t> k, v;  // [num_blocks, block_size, Hkv, D] e4m3
  std::vector<float> scales;  // k_scale, v_scale
  std::vector<int32_t> qsl, seq_lens, tables, slots;
};

Fp8Batch make_batch(DType dt, const Fp8Case& c) {
  Fp8Batch b;
  b.layout = QkvLayout{c.hq, c.hkv, c.d};
  b.block_size = c.block_size;
  b.scales = {c.k_scale, c.v_scale};
  b.qsl.push_back(0);
  int64_t total_blocks = 0;
  for (const Seq& s : c.seqs) {
    b.qsl.push_back(b.qsl.back() + s.q_len);
    b.seq_lens.push_back(s.seq_len);
    const int blocks = (s.seq_len + c.block_size - 1) / c.block_size;
    b.max_blocks_per_seq = std::max(b.max_blocks_per_seq, blocks + 1);
    b.max_query_len = std::max(b.max_query_len, s.q_len);
    b.max_seq_len = std::max(b.max_seq_len, s.seq_len);
    if (s.q_len == 1 && b.num_decode == static_cast<int>(b.seq_lens.size()) - 1) ++b.num_decode;
    total_blocks += blocks;
  }
  b.num_tokens = b.qsl.back();
  b.num_blocks = total_blocks + 3;
  std::vector<int32_t> pool(static_cast<size_t>(b.num_blocks));
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), rng());
  b.tables.assign(c.seqs.size() * static_cast<size_t>(b.max_blocks_per_seq), pool.back());
  const int64_t kvw = static_cast<int64_t>(c.hkv) * c.d;
  b.k.assign(static_cast<size_t>(b.num_blocks * c.block_size * kvw), kE4M3Nan);
  b.v = b.k;
  b.qkv = uniform(static_cast<size_t>(b.num_tokens * b.layout.row_width()), -1, 1);
  round_all(dt, b.qkv);
  size_t next = 0;
  for (size_t s = 0; s < c.seqs.size(); ++s) {
    const int32_t* table = b.tables.data() + s * static_cast<size_t>(b.max_blocks_per_seq);
    for (int i = 0; i < (c.seqs[s].seq_len + c.block_size - 1) / c.block_size; ++i)
      b.tables[s * static_cast<size_t>(b.max_blocks_per_seq) + static_cast<size_t>(i)] =
          pool[next++];
    const int cached = c.seqs[s].seq_len - c.seqs[s].q_len;
    for (int p = 0; p < c.seqs[s].seq_len; ++p) {
      const int64_t slot =
          static_cast<int64_t>(table[p / c.block_size]) * c.block_size + p % c.block_size;
      if (p >= cached) {  // a new token: kv_write stores its k/v from qkv
        b.slots.push_back(static_cast<int32_t>(slot));
        continue;
      }
      // Values up to 4x the scale's 448 range in one of eight keys (saturated).
      const float range = (p % 8 == 3 ? 8.0f : 1.0f) * c.range * kE4M3Max;
      const std::vector<float> kr = uniform(static_cast<size_t>(kvw), -range, range);
      const std::vector<float> vr = uniform(static_cast<size_t>(kvw), -range, range);
      for (int64_t i = 0; i < kvw; ++i) {
        b.k[static_cast<size_t>(slot * kvw + i)] = float_to_e4m3(kr[static_cast<size_t>(i)]);
        b.v[static_cast<size_t>(slot * kvw + i)] = float_to_e4m3(vr[static_cast<size_t>(i)]);
      }
    }
  }
  // New tokens' k/v in the scales' range, some saturating.
  const int64_t width = b.layout.row_width(), k_off = static_cast<int64_t>(c.hq) * c.d;
  for (int64_t t = 0; t < b.num_tokens; ++t)
    for (int64_t i = 0; i < kvw; ++i) {
      const float f = t % 5 == 2 ? 4.0f * kE4M3Max : kE4M3Max;
      float& k = b.qkv[static_cast<size_t>(t * width + k_off + i)];
      float& v = b.qkv[static_cast<size_t>(t * width + k_off + kvw + i)];
      k = round_to(dt, k * f * c.k_scale);
      v = round_to(dt, v * f * c.v_scale);
    }
  return b;
}

// The batch's tensors on one backend: compute dtype `dt` (f32 on the CPU),
// the cache in FP8.
struct Fp8Tensors {
  DevTensor qkv, k, v, scales, qsl, seq_lens, tables, slots, out;
  AttentionMetadata meta;
  KvCacheView cache;
  Fp8Tensors(Backend& be, DType dt, const Fp8Batch& b)
      : qkv(be, dt, {b.num_tokens, b.layout.row_width()}, b.qkv),
        k(be, DType::kF8E4M3,
          {b.num_blocks, b.block_size, b.layout.num_kv_heads, b.layout.head_dim}),
        v(be, DType::kF8E4M3,
          {b.num_blocks, b.block_size, b.layout.num_kv_heads, b.layout.head_dim}),
        scales(be, DType::kF32, {2}, b.scales),
        qsl(be, {static_cast<int64_t>(b.qsl.size())}, b.qsl),
        seq_lens(be, {static_cast<int64_t>(b.seq_lens.size())}, b.seq_lens),
        tables(be, {static_cast<int64_t>(b.seq_lens.size()), b.max_blocks_per_seq}, b.tables),
        slots(be, {static_cast<int64_t>(b.slots.size())}, b.slots),
        out(be, dt,
            {b.num_tokens, static_cast<int64_t>(b.layout.num_q_heads) * b.layout.head_dim}) {
    k.upload_bytes(b.k);
    v.upload_bytes(b.v);
    meta.query_start_loc = qsl.t();
    meta.seq_lens = seq_lens.t();
    meta.block_tables = tables.t();
    meta.num_seqs = static_cast<int>(b.seq_lens.size());
    meta.max_query_len = b.max_query_len;
    meta.max_seq_len = b.max_seq_len;
    meta.max_blocks_per_seq = b.max_blocks_per_seq;
    meta.num_decode_seqs = b.num_decode;
    cache = KvCacheView{k.t(), v.t(), b.block_size, scales.t()};
  }
  // kv_write of the new tokens, then attention.
  void run(Backend& be, const Fp8Batch& b, const AttentionScoring& scoring) {
    out.poison();
    be.kv_write(qkv.t(), b.layout, slots.t(), cache);
    be.paged_attention(qkv.t(), b.layout, cache, meta, scoring, out.t());
  }
};

std::string describe(const Fp8Case& c) {
  std::string s =
      "hq=" + std::to_string(c.hq) + " hkv=" + std::to_string(c.hkv) + " d=" + std::to_string(c.d) +
      " bs=" + std::to_string(c.block_size) + " k_scale=" + std::to_string(c.k_scale) +
      " v_scale=" + std::to_string(c.v_scale) + " softcap=" + std::to_string(c.softcap) +
      " window=" + std::to_string(c.window) + " seqs=";
  for (size_t i = 0; i < c.seqs.size() && i < 6; ++i)
    s += "(" + std::to_string(c.seqs[i].q_len) + "/" + std::to_string(c.seqs[i].seq_len) + ")";
  if (c.seqs.size() > 6) s += "... (" + std::to_string(c.seqs.size()) + " seqs)";
  return s;
}

AttentionScoring scoring_of(const Fp8Case& c) {
  return AttentionScoring(
      1.0f / std::sqrt(static_cast<float>(c.d)) / (c.k_scale * kE4M3Max) * 2.0f / c.range,
      c.softcap, c.window);
}

// Sets the backend's FP8 decode path for a scope (the staged kernel when
// `staged`), restoring the default after.
class Fp8DecodePath {
 public:
  Fp8DecodePath(CudaBackend& gpu, bool staged) : gpu_(gpu) { gpu_.set_fp8_kv_decode_staged(staged); }
  ~Fp8DecodePath() { gpu_.set_fp8_kv_decode_staged(false); }
  Fp8DecodePath(const Fp8DecodePath&) = delete;
  Fp8DecodePath& operator=(const Fp8DecodePath&) = delete;

 private:
  CudaBackend& gpu_;
};

// The case on both compute dtypes, through both FP8 decode paths (the
// staged one only where `both_paths`: it is the default for every batch that
// is not pure decode, and for head dims not a multiple of 16).
void run_case(const Fp8Case& c, bool both_paths = false) {
  for (DType dt : kHalfTypes) {
    for (bool staged : {false, true}) {
      if (staged && !both_paths) continue;
      SCOPED_TRACE(std::string(dtype_name(dt)) + (staged ? " staged " : " ") + describe(c));
      CudaBackend& gpu = *cuda_backend(dt);
      const Fp8DecodePath path(gpu, staged);
      const Fp8Batch b = make_batch(dt, c);
      Fp8Tensors g(gpu, dt, b), r(cpu_backend(), DType::kF32, b);
      const AttentionScoring scoring = scoring_of(c);
      g.run(gpu, b, scoring);
      r.run(cpu_backend(), b, scoring);
      expect_status_ok(gpu);
      EXPECT_EQ(g.k.download_bytes(), r.k.download_bytes()) << "kv_write: k cache bytes";
      EXPECT_EQ(g.v.download_bytes(), r.v.download_bytes()) << "kv_write: v cache bytes";
      expect_close(g.out.download(), r.out.download(), dt, "paged_attention over FP8 K/V");
    }
  }
}

std::vector<Seq> decodes(int n, int lo, int hi) {
  std::vector<Seq> s;
  for (int32_t len : uniform_ints(static_cast<size_t>(n), lo, hi)) s.push_back({1, len});
  return s;
}

std::vector<Seq> concat(std::vector<Seq> a, const std::vector<Seq>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// The decode kernel: group sizes 1..16, every padded head dim, block sizes
// 1..256, split (few sequences, long contexts) and unsplit (batch 256),
// contexts on the 16-key tile edges.
TEST(CudaAttentionFp8Test, DecodeKernel) {
  PAGODA_REQUIRE_GPU();
  const std::vector<Seq> edges = {{1, 1},  {1, 2},  {1, 15}, {1, 16},  {1, 17},
                                  {1, 63}, {1, 64}, {1, 65}, {1, 1000}};
  const Fp8Case cases[] = {{32, 8, 128, 16, decodes(8, 1, 3000), 0.01f, 0.02f},
                           {8, 8, 64, 1, edges, 1.0f, 1.0f},
                           {4, 1, 256, 32, decodes(3, 1, 2000), 0.003f, 0.5f},
                           {16, 1, 128, 16, edges, 0.05f, 0.004f},
                           {4, 2, 80, 7, edges, 2.0f, 0.1f},
                           {8, 4, 32, 256, decodes(4, 100, 1500), 0.02f, 0.02f},
                           {6, 2, 96, 16, decodes(5, 1, 900), 0.01f, 0.03f},
                           {4, 1, 192, 16, decodes(4, 1, 700), 0.01f, 0.01f},
                           {16, 2, 64, 16, {{1, 32768}}, 0.01f, 0.01f},
                           {32, 8, 128, 16, decodes(256, 1, 300), 0.01f, 0.02f}};
  for (const Fp8Case& c : cases) run_case(c, true);
}

// The register-converting decode kernel over many shapes: every padded head
// dim (and 80 / 112 / 160 inside one), groups 1..16, contexts off the 16-key
// tile and the 48- / 64-key stage rounds, block sizes 1..64, split (short
// batches) and unsplit, scales far from 1, and caches of mostly subnormal
// codes (kSubnormalRange) and saturated ones; head dims 40 and 72 (not multiples
// of 16) take the staged kernel.
TEST(CudaAttentionFp8Test, RegisterDecodeKernelShapes) {
  PAGODA_REQUIRE_GPU();
  const std::vector<Seq> odd = {{1, 1},  {1, 3},  {1, 31}, {1, 47}, {1, 49},
                                {1, 95}, {1, 97}, {1, 193}, {1, 257}, {1, 4099}};
  std::vector<Fp8Case> cases;
  for (int d : {32, 64, 80, 96, 112, 128, 160, 192, 256, 40, 72}) {
    for (int g : {1, 3, 8, 16}) {
      const int hkv = g == 16 ? 1 : 2;
      const int bs = d % 3 == 0 ? 7 : (d % 64 == 0 ? 16 : 64);
      cases.push_back({g * hkv, hkv, d, bs, odd, 0.02f, 3.0f});
    }
    cases.push_back({4, 4, d, 16, decodes(40, 1, 700), 5.0f, 0.004f});
    cases.push_back({8, 2, d, 1, decodes(3, 1, 300), 64.0f, 64.0f, 0.0f, 0, kSubnormalRange});
  }
  cases.push_back({32, 8, 128, 16, decodes(6, 1, 20000), 0.01f, 0.02f, 0.0f, 0, kSubnormalRange});
  cases.push_back({16, 2, 128, 32, decodes(200, 1, 2500), 0.3f, 0.07f, 0.0f, 0, 4.0f});
  for (const Fp8Case& c : cases) run_case(c, true);
}

// The prefill kernel (q_len > 1, D <= 128): from scratch, over cached
// prefixes, mixed with decode rows, tile edges of 128 rows and 64 keys.
TEST(CudaAttentionFp8Test, PrefillKernel) {
  PAGODA_REQUIRE_GPU();
  const Fp8Case cases[] = {
      {8, 2, 128, 16, {{37, 37}, {128, 128}, {1, 1}}, 0.01f, 0.02f},
      {4, 4, 64, 1, {{50, 300}, {64, 64}}, 1.0f, 1.0f},
      {32, 8, 128, 16, {{200, 1000}}, 0.004f, 0.05f},
      {2, 1, 32, 16, {{129, 129}, {3, 10}}, 0.02f, 0.02f},
      {6, 2, 96, 7, {{33, 80}, {65, 65}}, 0.01f, 0.3f},
      {8, 2, 80, 64, {{127, 191}, {2, 65}}, 0.5f, 0.01f},
      {32, 8, 128, 16, concat({{100, 100}, {30, 530}}, decodes(20, 1, 1500)), 0.01f, 0.01f},
      {8, 2, 128, 16, {{512, 4608}}, 0.01f, 0.02f}};
  for (const Fp8Case& c : cases) run_case(c);
}

// The tile kernel: head dims above 128 with q_len > 1, decode groups above 16.
TEST(CudaAttentionFp8Test, TileKernel) {
  PAGODA_REQUIRE_GPU();
  const Fp8Case cases[] = {{4, 1, 256, 32, {{65, 65}, {17, 100}}, 0.01f, 0.02f},
                           {2, 2, 192, 16, {{70, 600}, {1, 5}}, 0.003f, 0.4f},
                           {32, 1, 64, 16, decodes(3, 1, 2000), 0.01f, 0.01f},
                           {64, 2, 128, 7, decodes(4, 1, 500), 1.0f, 0.02f},
                           {8, 2, 256, 16, concat(decodes(3, 1, 900), {{37, 700}}), 0.01f, 0.05f}};
  for (const Fp8Case& c : cases) run_case(c);
}

// Gemma's scoring over an FP8 cache in all three kernels (k_scale folded
// into the scale before the cap), windows shorter and longer than a tile.
TEST(CudaAttentionFp8Test, SoftcapAndSlidingWindow) {
  PAGODA_REQUIRE_GPU();
  for (int window : {5, 64, 300}) {
    for (float cap : {0.0f, 2.0f, 50.0f}) {
      const Fp8Case cases[] = {
          {8, 4, 256, 16, decodes(6, 1, 3000), 0.01f, 0.02f, cap, window},
          {8, 2, 128, 16, {{200, 200}, {64, 1000}, {1, 1}}, 0.02f, 0.01f, cap, window},
          {4, 1, 256, 16, concat(decodes(3, 1, 900), {{37, 700}}), 0.005f, 0.3f, cap, window},
          {8, 8, 64, 7, concat(decodes(2, 1, 200), {{90, 333}}), 1.0f, 1.0f, cap, window}};
      for (const Fp8Case& c : cases) run_case(c, true);
    }
  }
}

TEST(CudaAttentionFp8Test, LongContexts) {
  PAGODA_REQUIRE_GPU();
  const Fp8Case cases[] = {{32, 8, 128, 16, {{1, 8192}, {1, 32768}}, 0.01f, 0.02f},
                           {8, 1, 128, 16, {{1, 32000}}, 0.004f, 0.01f},
                           {8, 2, 128, 16, {{64, 8192}}, 0.01f, 0.01f}};
  for (const Fp8Case& c : cases) run_case(c, true);
}

// One small batch per kernel (decode split and unsplit, prefill, tile), for
// compute-sanitizer's memcheck and racecheck (run.sh).
TEST(CudaAttentionFp8Test, SmallBatchesOfEveryKernel) {
  PAGODA_REQUIRE_GPU();
  const Fp8Case cases[] = {{8, 2, 128, 16, {{1, 300}, {1, 17}}, 0.01f, 0.02f},
                           {8, 2, 64, 16, decodes(64, 1, 100), 0.01f, 0.02f},
                           {8, 2, 128, 16, {{70, 200}, {1, 5}}, 0.01f, 0.02f},
                           {4, 1, 256, 16, {{20, 90}}, 0.01f, 0.02f}};
  for (const Fp8Case& c : cases) run_case(c, true);
}

// kv_write alone over head dims that do not take the 8-wide path (12, 20)
// and that do, and padding slots (-1): the cache bytes equal the CPU's.
TEST(CudaAttentionFp8Test, KvWriteBytes) {
  PAGODA_REQUIRE_GPU();
  for (DType dt : kHalfTypes) {
    for (const int d : {12, 20, 64, 128}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " d=" + std::to_string(d));
      CudaBackend& gpu = *cuda_backend(dt);
      Fp8Case c{8, 2, d, 16, {{40, 40}, {3, 20}}, 0.003f, 0.7f};
      Fp8Batch b = make_batch(dt, c);
      b.slots[5] = -1;
      b.slots[17] = -1;
      Fp8Tensors g(gpu, dt, b), r(cpu_backend(), DType::kF32, b);
      gpu.kv_write(g.qkv.t(), b.layout, g.slots.t(), g.cache);
      cpu_backend().kv_write(r.qkv.t(), b.layout, r.slots.t(), r.cache);
      expect_status_ok(gpu);
      EXPECT_EQ(g.k.download_bytes(), r.k.download_bytes());
      EXPECT_EQ(g.v.download_bytes(), r.v.download_bytes());
    }
  }
}

// A graph of kv_write + attention captured on an FP8 cache (decode batch,
// then a prefill batch), replayed after new scales and shorter contexts are
// written on the device: the output follows the new scales.
TEST(CudaAttentionFp8Test, GraphReplayReadsScalesOnTheDevice) {
  PAGODA_REQUIRE_GPU();
  const Fp8Case cases[] = {{32, 8, 128, 16, {{1, 5000}, {1, 3000}, {1, 64}, {1, 17}}, 0.01f, 0.02f},
                           {8, 2, 128, 16, {{300, 2000}, {200, 1500}}, 0.01f, 0.02f}};
  for (const Fp8Case& c : cases) {
    for (const auto& [dt, staged] : {std::pair{DType::kBF16, false}, std::pair{DType::kF16, false},
                                     std::pair{DType::kBF16, true}}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + (staged ? " staged " : " ") + describe(c));
      CudaBackend& gpu = *cuda_backend(dt);
      const Fp8DecodePath path(gpu, staged);
      Fp8Batch b = make_batch(dt, c);
      Fp8Tensors g(gpu, dt, b);
      const AttentionScoring scoring = scoring_of(c);
      const int id = gpu.capture_graph([&] {
        gpu.kv_write(g.qkv.t(), b.layout, g.slots.t(), g.cache);
        gpu.paged_attention(g.qkv.t(), b.layout, g.cache, g.meta, scoring, g.out.t());
      });
      ASSERT_GE(id, 0);
      b.scales = {c.k_scale * 2.0f, c.v_scale * 0.5f};
      for (int32_t& len : b.seq_lens) len = std::max(len - 10, b.max_query_len);
      g.scales.upload(b.scales);
      g.seq_lens.upload_i32(b.seq_lens);
      g.k.upload_bytes(b.k);
      g.v.upload_bytes(b.v);
      g.out.poison();
      gpu.replay_graph(id);
      Fp8Tensors r(cpu_backend(), DType::kF32, b);
      r.run(cpu_backend(), b, scoring);
      expect_status_ok(gpu);
      EXPECT_EQ(g.k.download_bytes(), r.k.download_bytes()) << "kv_write in the graph";
      expect_close(g.out.download(), r.out.download(), dt, "graph replay with new scales");
    }
  }
}

}  // namespace
}  // namespace pagoda::gpu_test
