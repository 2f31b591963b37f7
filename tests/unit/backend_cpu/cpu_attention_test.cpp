// kv_write + paged_attention on ragged batches (prefill chunks with cached
// prefixes mixed with decode tokens) over shuffled, non-contiguous block
// tables, against a double-precision attention over each sequence's logical
// k/v. Unused cache slots and table entries point at NaN so stray reads show.
// Also with Gemma's scoring: attention-logit soft-capping and sliding windows,
// and with an FP8 cache: the reference then attends over core/fp8.h's
// e4m3_to_float(float_to_e4m3(x / scale)) * scale of the logical k/v.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "backend/cpu/cpu_backend.h"
#include "core/fp8.h"
#include "test_util.h"

namespace pagoda {
namespace {

using test::f32;
using test::i32;
using test::Rng;

struct SeqCase {
  int cached = 0;  // tokens already in the cache
  int q_len = 0;   // new tokens this step
  int seq_len() const { return cached + q_len; }
};

struct AttentionCase {
  QkvLayout layout;
  int block_size = 16;
  float scale = 1.0f;
  float softcap = 0.0f;  // > 0: scores capped (Gemma 2)
  int window = 0;        // > 0: sliding window
  bool fp8 = false;      // an FP8 e4m3 cache with these scales
  float k_scale = 1.0f;
  float v_scale = 1.0f;
  std::vector<SeqCase> seqs;
};

// What an FP8 cache gives back for x stored with `scale` (the specification).
float fp8_round_trip(float x, float scale) {
  return e4m3_to_float(float_to_e4m3(x / scale)) * scale;
}

// The k and v buffers of a test cache: f32, or FP8 bytes (NaN = 0x7f).
struct TestCache {
  std::vector<float> k32, v32;
  std::vector<uint8_t> k8, v8;
  std::vector<float> scales;

  TestCache(const AttentionCase& c, size_t n) {
    if (c.fp8) {
      k8.assign(n, 0x7f);
      v8.assign(n, 0x7f);
    } else {
      k32 = test::nan_filled(n);
      v32 = k32;
    }
    scales = {c.k_scale, c.v_scale};
  }
  // Writes x to element i of k or v as kv_write would (the specification).
  void put(bool is_v, size_t i, float x) {
    if (!k8.empty()) {
      (is_v ? v8 : k8)[i] = float_to_e4m3(x / scales[is_v ? 1 : 0]);
    } else {
      (is_v ? v32 : k32)[i] = x;
    }
  }
  KvCacheView view(int num_blocks, int bs, const QkvLayout& l) {
    const std::initializer_list<int64_t> dims = {num_blocks, bs, l.num_kv_heads, l.head_dim};
    if (k8.empty()) return {f32(k32, dims), f32(v32, dims), bs, f32(scales, {2})};
    return {Tensor(k8.data(), DType::kF8E4M3, dims), Tensor(v8.data(), DType::kF8E4M3, dims), bs,
            f32(scales, {2})};
  }
};

AttentionCase random_case(Rng& rng) {
  AttentionCase c;
  c.layout.num_kv_heads = rng.pick(std::vector<int>{1, 2, 4});
  c.layout.num_q_heads = c.layout.num_kv_heads * rng.pick(std::vector<int>{1, 2, 3, 4, 8});
  c.layout.head_dim = rng.pick(std::vector<int>{8, 16, 24, 40, 64, 80, 96, 128, 256});
  c.block_size = rng.pick(std::vector<int>{1, 7, 16});
  c.scale = 1.0f / std::sqrt(static_cast<float>(c.layout.head_dim)) * rng.uniform(0.5f, 2.0f);
  const int num_seqs = rng.randint(1, 5);
  for (int s = 0; s < num_seqs; ++s) {
    switch (rng.randint(0, 2)) {
      case 0:
        c.seqs.push_back({rng.randint(0, 60), 1});
        break;  // decode
      case 1:
        c.seqs.push_back({0, rng.randint(1, 24)});
        break;  // fresh prefill
      default:
        c.seqs.push_back({rng.randint(1, 40), rng.randint(1, 20)});
        break;  // later chunk
    }
  }
  return c;
}

// Runs kv_write + paged_attention for one case and compares with the
// double-precision reference.
void run_case(const AttentionCase& c, Rng& rng) {
  CpuBackend be;
  const QkvLayout& l = c.layout;
  const int64_t d = l.head_dim, kvw = l.num_kv_heads * d, width = l.row_width();
  const int bs = c.block_size, num_seqs = static_cast<int>(c.seqs.size());

  // Shuffled physical blocks; the last one is a NaN "poison" block that
  // fills unused table entries.
  std::vector<int> need(num_seqs);
  int total = 0, max_need = 0;
  for (int s = 0; s < num_seqs; ++s) {
    need[s] = (c.seqs[s].seq_len() + bs - 1) / bs;
    total += need[s];
    max_need = std::max(max_need, need[s]);
  }
  const int num_blocks = total + 1 + rng.randint(0, 3);
  std::vector<int32_t> ids(num_blocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng.engine());
  const int poison = ids.back();
  const int mbps = max_need + rng.randint(0, 2);
  std::vector<int32_t> tables(static_cast<size_t>(num_seqs * mbps), poison);
  for (int s = 0, next = 0; s < num_seqs; ++s)
    for (int b = 0; b < need[s]; ++b) tables[s * mbps + b] = ids[next++];
  auto slot = [&](int s, int p) { return tables[s * mbps + p / bs] * bs + p % bs; };

  // Logical k/v per sequence [seq_len, Hkv, D]; cached ones go straight into
  // the cache, new ones through qkv rows and kv_write.
  TestCache cache_data(c, static_cast<size_t>(num_blocks * bs * kvw));
  std::vector<std::vector<float>> kref(num_seqs), vref(num_seqs);
  std::vector<int32_t> qsl = {0}, seq_lens, slots, positions;
  for (int s = 0; s < num_seqs; ++s) {
    kref[s] = rng.floats(static_cast<size_t>(c.seqs[s].seq_len() * kvw));
    vref[s] = rng.floats(kref[s].size());
    for (int p = 0; p < c.seqs[s].cached; ++p)
      for (int64_t i = 0; i < kvw; ++i) {
        cache_data.put(false, slot(s, p) * kvw + i, kref[s][p * kvw + i]);
        cache_data.put(true, slot(s, p) * kvw + i, vref[s][p * kvw + i]);
      }
    qsl.push_back(qsl.back() + c.seqs[s].q_len);
    seq_lens.push_back(c.seqs[s].seq_len());
  }
  const int t = qsl.back();
  std::vector<float> qkv = rng.floats(static_cast<size_t>(t * width));
  for (int s = 0; s < num_seqs; ++s)
    for (int j = 0; j < c.seqs[s].q_len; ++j) {
      const int p = c.seqs[s].cached + j, row = qsl[s] + j;
      std::copy_n(kref[s].begin() + p * kvw, kvw, qkv.begin() + row * width + l.num_q_heads * d);
      std::copy_n(vref[s].begin() + p * kvw, kvw,
                  qkv.begin() + row * width + l.num_q_heads * d + kvw);
      slots.push_back(slot(s, p));
    }

  KvCacheView cache = cache_data.view(num_blocks, bs, l);
  be.kv_write(f32(qkv, {t, width}), l, i32(slots, {t}), cache);
  if (c.fp8) {  // the reference attends over what the cache holds
    for (int s = 0; s < num_seqs; ++s)
      for (size_t i = 0; i < kref[s].size(); ++i) {
        kref[s][i] = fp8_round_trip(kref[s][i], c.k_scale);
        vref[s][i] = fp8_round_trip(vref[s][i], c.v_scale);
      }
  }
  AttentionMetadata meta;
  meta.query_start_loc = i32(qsl, {num_seqs + 1});
  meta.seq_lens = i32(seq_lens, {num_seqs});
  meta.block_tables = i32(tables, {num_seqs, mbps});
  meta.num_seqs = num_seqs;
  meta.max_blocks_per_seq = mbps;
  bool leading = true;  // num_decode_seqs: the leading run of one-token sequences
  for (const SeqCase& sc : c.seqs) {
    meta.max_query_len = std::max(meta.max_query_len, sc.q_len);
    meta.max_seq_len = std::max(meta.max_seq_len, sc.seq_len());
    leading = leading && sc.q_len == 1;
    meta.num_decode_seqs += leading ? 1 : 0;
  }
  std::vector<float> out = test::nan_filled(static_cast<size_t>(t * l.num_q_heads * d));
  Tensor o = f32(out, {t, l.num_q_heads * d});
  be.paged_attention(f32(qkv, {t, width}), l, cache, meta,
                     AttentionScoring(c.scale, c.softcap, c.window), o);

  const int group = l.num_q_heads / l.num_kv_heads;
  for (int s = 0; s < num_seqs; ++s)
    for (int j = 0; j < c.seqs[s].q_len; ++j) {
      const int pos = c.seqs[s].cached + j, row = qsl[s] + j;
      for (int h = 0; h < l.num_q_heads; ++h) {
        const float* q = qkv.data() + row * width + h * d;
        const int kh = h / group;
        // Keys [first, pos]: a key window or more positions behind is masked.
        const int first = c.window > 0 ? std::max(0, pos - c.window + 1) : 0;
        std::vector<double> w(static_cast<size_t>(pos + 1), 0.0);
        double m = -1e300, sum = 0;
        for (int p = first; p <= pos; ++p) {
          double dot = 0;
          for (int64_t i = 0; i < d; ++i)
            dot += static_cast<double>(q[i]) * kref[s][p * kvw + kh * d + i];
          w[p] = dot * c.scale;
          if (c.softcap > 0) w[p] = std::tanh(w[p] / c.softcap) * c.softcap;
          m = std::max(m, w[p]);
        }
        for (int p = first; p <= pos; ++p) sum += (w[p] = std::exp(w[p] - m));
        for (int64_t i = 0; i < d; ++i) {
          double want = 0;
          for (int p = first; p <= pos; ++p) want += w[p] / sum * vref[s][p * kvw + kh * d + i];
          const float got = out[row * l.num_q_heads * d + h * d + i];
          ASSERT_NEAR(got, want, 2e-5)
              << "seq " << s << " row " << j << " head " << h << " dim " << i << " (D=" << d
              << ", Hq=" << l.num_q_heads << ", Hkv=" << l.num_kv_heads << ", block_size=" << bs
              << ")";
        }
      }
    }
}

TEST(CpuAttention, RaggedBatchesOverShuffledBlockTables) {
  Rng rng(100);
  for (int iter = 0; iter < 150; ++iter) {
    SCOPED_TRACE(iter);
    run_case(random_case(rng), rng);
    if (HasFatalFailure()) return;
  }
}

TEST(CpuAttention, SoftcapAndSlidingWindow) {
  Rng rng(103);
  for (int iter = 0; iter < 60; ++iter) {
    SCOPED_TRACE(iter);
    AttentionCase c = random_case(rng);
    c.scale *= 4.0f;  // scores large enough for the cap to bend them
    c.softcap = rng.pick(std::vector<float>{0.0f, 1.0f, 3.0f});
    c.window = rng.pick(std::vector<int>{1, 2, 5, 13});
    run_case(c, rng);
    if (HasFatalFailure()) return;
  }
}

// FP8 cache: kv_write stores float_to_e4m3(x / scale) and attention reads
// e4m3 * scale, for scales that leave the values small, large, saturated
// (|x / scale| > 448) and subnormal.
TEST(CpuAttention, Fp8CacheMatchesTheRoundTripReference) {
  Rng rng(104);
  for (int iter = 0; iter < 80; ++iter) {
    SCOPED_TRACE(iter);
    AttentionCase c = random_case(rng);
    c.fp8 = true;
    c.k_scale = rng.pick(std::vector<float>{1.0f, 0.01f, 0.0017f, 3.0f, 200.0f});
    c.v_scale = rng.pick(std::vector<float>{1.0f, 0.02f, 0.0013f, 0.5f, 150.0f});
    if (iter % 3 == 0) {
      c.softcap = rng.pick(std::vector<float>{0.0f, 2.0f});
      c.window = rng.pick(std::vector<int>{0, 3, 11});
    }
    run_case(c, rng);
    if (HasFatalFailure()) return;
  }
}

// kv_write's bytes are exactly float_to_e4m3(x / scale) for k and v, with
// each its own scale; padding slots (< 0) write nothing.
TEST(CpuAttention, Fp8KvWriteQuantisesWithEachScale) {
  Rng rng(105);
  CpuBackend be;
  const QkvLayout l{4, 2, 8};
  const int bs = 4, num_blocks = 3, t = 5;
  const int64_t kvw = l.num_kv_heads * l.head_dim, width = l.row_width();
  AttentionCase c;
  c.fp8 = true;
  c.k_scale = 0.004f;  // |k| / 0.004 up to 750: some saturate at 448
  c.v_scale = 0.25f;
  TestCache cache_data(c, static_cast<size_t>(num_blocks * bs * kvw));
  KvCacheView cache = cache_data.view(num_blocks, bs, l);
  std::vector<float> qkv = rng.floats(static_cast<size_t>(t * width), -3.0f, 3.0f);
  std::vector<int32_t> slots = {7, -1, 0, 11, 3};
  be.kv_write(f32(qkv, {t, width}), l, i32(slots, {t}), cache);
  std::vector<bool> written(static_cast<size_t>(num_blocks * bs), false);
  int saturated = 0;
  for (int r = 0; r < t; ++r) {
    if (slots[r] < 0) continue;
    written[static_cast<size_t>(slots[r])] = true;
    for (int64_t i = 0; i < kvw; ++i) {
      const float k = qkv[r * width + l.num_q_heads * l.head_dim + i];
      const float v = qkv[r * width + l.num_q_heads * l.head_dim + kvw + i];
      ASSERT_EQ(cache_data.k8[slots[r] * kvw + i], float_to_e4m3(k / c.k_scale)) << r << " " << i;
      ASSERT_EQ(cache_data.v8[slots[r] * kvw + i], float_to_e4m3(v / c.v_scale)) << r << " " << i;
      saturated += std::fabs(k / c.k_scale) > kE4M3Max ? 1 : 0;
    }
  }
  EXPECT_GT(saturated, 0);
  for (size_t s = 0; s < written.size(); ++s)
    if (!written[s])
      for (int64_t i = 0; i < kvw; ++i) ASSERT_EQ(cache_data.k8[s * kvw + i], 0x7f) << s;
}

TEST(CpuAttention, DecodeOnlyAndSingleTokenContext) {
  Rng rng(101);
  for (int bs : {1, 7, 16}) {
    AttentionCase c;
    c.layout = {4, 1, 32};  // MQA
    c.block_size = bs;
    c.scale = 0.2f;
    c.seqs = {{0, 1}, {1, 1}, {bs, 1}, {3 * bs - 1, 1}};
    run_case(c, rng);
  }
}

// A sequence's output rows do not depend on the other sequences in the batch.
TEST(CpuAttention, RowsIndependentOfBatchComposition) {
  Rng rng(102);
  CpuBackend be;
  const QkvLayout l{4, 2, 16};
  const int bs = 4, ctx = 9;
  const int64_t kvw = l.num_kv_heads * l.head_dim, width = l.row_width();
  std::vector<float> k = rng.floats(static_cast<size_t>(8 * bs * kvw)), v = rng.floats(k.size());
  KvCacheView cache{f32(k, {8, bs, 2, 16}), f32(v, {8, bs, 2, 16}), bs, Tensor()};
  std::vector<float> qkv = rng.floats(static_cast<size_t>(3 * width));
  auto run = [&](std::vector<int32_t> qsl, std::vector<int32_t> lens, std::vector<int32_t> tables,
                 int rows) {
    AttentionMetadata meta;
    meta.query_start_loc = i32(qsl, {static_cast<int64_t>(qsl.size())});
    meta.seq_lens = i32(lens, {static_cast<int64_t>(lens.size())});
    meta.block_tables = i32(tables, {static_cast<int64_t>(lens.size()), 3});
    meta.num_seqs = static_cast<int>(lens.size());
    meta.max_blocks_per_seq = 3;
    std::vector<float> out(static_cast<size_t>(rows * l.num_q_heads * l.head_dim));
    Tensor o = f32(out, {rows, l.num_q_heads * l.head_dim});
    std::vector<float> q(qkv.begin(), qkv.begin() + rows * width);
    be.paged_attention(f32(q, {rows, width}), l, cache, meta, 0.25f, o);
    return out;
  };
  const auto alone = run({0, 1}, {ctx}, {5, 2, 7}, 1);
  const auto batched = run({0, 1, 3}, {ctx, 6}, {5, 2, 7, 1, 0, 3}, 3);
  for (size_t i = 0; i < alone.size(); ++i) ASSERT_EQ(alone[i], batched[i]);
}

}  // namespace
}  // namespace pagoda
