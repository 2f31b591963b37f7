// Paged KV cache ops: kv_write, paged_attention, copy_blocks. The cache is
// f32, or FP8 e4m3 (KvCacheView): written as float_to_e4m3(x / scale) and
// read as e4m3_to_float(q) * scale in f32 -- the specification of the CUDA
// FP8 cache.
#include <algorithm>
#include <array>
#include <cassert>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/cpu_ops.h"
#include "core/fp8.h"
#include "core/thread_pool.h"

namespace pagoda::cpu {
namespace {

// Calls fn(i) for i in [0, n), item i on worker i % num_workers: items of
// growing cost (causal prefill rows) spread evenly over the threads.
template <typename Fn>
void parallel_strided(int64_t n, const Fn& fn) {
  const int64_t num_workers = std::min<int64_t>(num_cpu_threads(), n);
  parallel_for(num_workers, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t w = lo; w < hi; ++w)
      for (int64_t i = w; i < n; i += num_workers) fn(i);
  });
}

// Where one query row sits: its sequence and position.
struct QueryRow {
  int32_t seq = 0;
  int32_t pos = 0;  // attends to positions [0, pos]
};

std::vector<QueryRow> query_rows(const AttentionMetadata& meta, int64_t num_tokens) {
  const int32_t* qsl = meta.query_start_loc.ptr<int32_t>();
  const int32_t* seq_lens = meta.seq_lens.ptr<int32_t>();
  std::vector<QueryRow> rows(static_cast<size_t>(num_tokens));
  assert(qsl[0] == 0 && qsl[meta.num_seqs] == num_tokens);
  for (int32_t s = 0; s < meta.num_seqs; ++s) {
    const int32_t q_len = qsl[s + 1] - qsl[s];
    assert(q_len >= 0 && q_len <= seq_lens[s]);
    for (int32_t j = 0; j < q_len; ++j) rows[qsl[s] + j] = {s, seq_lens[s] - q_len + j};
  }
  return rows;
}

// e4m3_to_float of every byte.
const std::array<float, 256>& e4m3_table() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int b = 0; b < 256; ++b)
      t[static_cast<size_t>(b)] = e4m3_to_float(static_cast<uint8_t>(b));
    return t;
  }();
  return table;
}

// One layer's cache rows as f32: an f32 cache's rows in place, an FP8
// cache's dequantised into a per-thread buffer.
class CacheRows {
 public:
  // `scale`: the k or v scale of an FP8 cache (ignored for f32).
  CacheRows(const Tensor& cache, float scale) : cache_(cache), scale_(scale) {
    assert(cache.dtype == DType::kF32 || cache.dtype == DType::kF8E4M3);
  }
  // The n elements at element offset `at`; valid until the next call on
  // this thread.
  const float* get(int64_t at, int64_t n) const {
    if (cache_.dtype == DType::kF32) return cache_.ptr<float>() + at;
    thread_local std::vector<float> row;
    row.resize(static_cast<size_t>(n));
    const uint8_t* q = static_cast<const uint8_t*>(cache_.data) + at;
    const std::array<float, 256>& table = e4m3_table();
    for (int64_t i = 0; i < n; ++i) row[static_cast<size_t>(i)] = table[q[i]] * scale_;
    return row.data();
  }

 private:
  const Tensor& cache_;
  float scale_;
};

// Writes n values to element offset `at` of an f32 or FP8 cache (FP8:
// float_to_e4m3(x / scale)).
void store_row(Tensor& cache, int64_t at, const float* x, int64_t n, float scale) {
  if (cache.dtype == DType::kF32) {
    std::memcpy(cache.ptr<float>() + at, x, static_cast<size_t>(n) * sizeof(float));
    return;
  }
  uint8_t* q = static_cast<uint8_t*>(cache.data) + at;
  for (int64_t i = 0; i < n; ++i) q[i] = float_to_e4m3(x[i] / scale);
}

// (k_scale, v_scale) of an FP8 cache; (1, 1) for f32.
std::array<float, 2> cache_scales(const KvCacheView& cache) {
  if (cache.k.dtype != DType::kF8E4M3) return {1.0f, 1.0f};
  assert(cache.scales.dtype == DType::kF32 && cache.scales.numel() == 2);
  return {cache.scales.ptr<float>()[0], cache.scales.ptr<float>()[1]};
}

}  // namespace

void kv_write(const Tensor& qkv, const QkvLayout& layout, const Tensor& slots, KvCacheView& cache) {
  assert(qkv.dtype == DType::kF32 && slots.dtype == DType::kI32);
  assert(cache.k.dtype == DType::kF32 || cache.k.dtype == DType::kF8E4M3);
  assert(cache.v.dtype == cache.k.dtype);
  assert(qkv.dim(1) == layout.row_width() && slots.numel() == qkv.dim(0));
  const int64_t kv_width = static_cast<int64_t>(layout.num_kv_heads) * layout.head_dim;
  const int64_t k_offset = static_cast<int64_t>(layout.num_q_heads) * layout.head_dim;
  const int64_t num_slots = cache.k.dim(0) * cache.block_size;
  const std::array<float, 2> scales = cache_scales(cache);
  const int32_t* slot = slots.ptr<int32_t>();
  for (int64_t t = 0; t < qkv.dim(0); ++t) {
    if (slot[t] < 0) continue;
    assert(slot[t] < num_slots);
    (void)num_slots;
    const float* row = qkv.ptr<float>() + t * layout.row_width();
    store_row(cache.k, slot[t] * kv_width, row + k_offset, kv_width, scales[0]);
    store_row(cache.v, slot[t] * kv_width, row + k_offset + kv_width, kv_width, scales[1]);
  }
}

void paged_attention(const Tensor& qkv, const QkvLayout& layout, const KvCacheView& cache,
                     const AttentionMetadata& meta, const AttentionScoring& scoring, Tensor& out) {
  assert(qkv.dtype == DType::kF32 && out.dtype == DType::kF32);
  assert(qkv.dim(1) == layout.row_width());
  const int64_t num_tokens = qkv.dim(0);
  const int64_t d = layout.head_dim;
  const int64_t num_kv = layout.num_kv_heads;
  const int64_t group = layout.num_q_heads / layout.num_kv_heads;  // q heads per kv head
  const int64_t width = layout.row_width();
  const int64_t kv_width = num_kv * d;
  const int bs = cache.block_size;
  const float scale = scoring.scale, cap = scoring.softcap;
  const int64_t window = scoring.sliding_window;
  assert(out.dim(0) == num_tokens && out.dim(1) == layout.num_q_heads * d);
  const std::vector<QueryRow> rows = query_rows(meta, num_tokens);
  const int32_t* tables = meta.block_tables.ptr<int32_t>();
  const CpuKernels& kern = kernels();
  const std::array<float, 2> scales = cache_scales(cache);
  const CacheRows keys(cache.k, scales[0]);
  const CacheRows values(cache.v, scales[1]);

  // One item = one query row and one kv head, with the `group` q heads that
  // read it, so each k/v row is loaded once per group. The row attends to
  // positions [first, first + ctx).
  parallel_strided(num_tokens * num_kv, [&](int64_t item) {
    const int64_t t = item / num_kv;
    const int64_t h = item % num_kv;
    const QueryRow row = rows[static_cast<size_t>(t)];
    const int64_t first = window > 0 ? std::max<int64_t>(0, row.pos - window + 1) : 0;
    const int64_t ctx = static_cast<int64_t>(row.pos) + 1 - first;
    const int32_t* table = tables + static_cast<int64_t>(row.seq) * meta.max_blocks_per_seq;
    thread_local std::vector<float> scores;  // [group, ctx]
    scores.resize(static_cast<size_t>(group * ctx));
    const float* q = qkv.ptr<float>() + t * width + h * group * d;
    auto slot_of = [&](int64_t p) {
      p += first;
      return static_cast<int64_t>(table[p / bs]) * bs + p % bs;
    };

    for (int64_t p = 0; p < ctx; ++p) {
      const float* key = keys.get(slot_of(p) * kv_width + h * d, d);
      for (int64_t g = 0; g < group; ++g) scores[g * ctx + p] = kern.dot(q + g * d, key, d) * scale;
    }
    if (cap > 0.0f)
      for (float& s : scores) s = std::tanh(s / cap) * cap;
    thread_local std::vector<float> inv_sums;  // [group]
    inv_sums.resize(static_cast<size_t>(group));
    for (int64_t g = 0; g < group; ++g) {
      float* s = scores.data() + g * ctx;
      const float m = *std::max_element(s, s + ctx);
      float sum = 0.0f;
      for (int64_t p = 0; p < ctx; ++p) {
        s[p] = std::exp(s[p] - m);
        sum += s[p];
      }
      inv_sums[static_cast<size_t>(g)] = 1.0f / sum;
    }
    float* o = out.ptr<float>() + t * layout.num_q_heads * d + h * group * d;
    std::fill(o, o + group * d, 0.0f);
    for (int64_t p = 0; p < ctx; ++p) {
      const float* value = values.get(slot_of(p) * kv_width + h * d, d);
      for (int64_t g = 0; g < group; ++g) kern.axpy(scores[g * ctx + p], value, o + g * d, d);
    }
    for (int64_t g = 0; g < group; ++g)
      for (int64_t i = 0; i < d; ++i) o[g * d + i] *= inv_sums[static_cast<size_t>(g)];
  });
}

void copy_blocks(std::vector<KvCacheView>& caches, const std::vector<int32_t>& src,
                 const std::vector<int32_t>& dst) {
  assert(src.size() == dst.size());
  for (KvCacheView& cache : caches) {
    const int64_t block_elems = cache.k.numel() / cache.k.dim(0);
    const size_t bytes = static_cast<size_t>(block_elems) * dtype_size(cache.k.dtype);
    for (size_t i = 0; i < src.size(); ++i) {
      assert(src[i] >= 0 && src[i] < cache.k.dim(0) && dst[i] >= 0 && dst[i] < cache.k.dim(0));
      char* k = static_cast<char*>(cache.k.data);
      char* v = static_cast<char*>(cache.v.data);
      std::memmove(k + dst[i] * bytes, k + src[i] * bytes, bytes);
      std::memmove(v + dst[i] * bytes, v + src[i] * bytes, bytes);
    }
  }
}

}  // namespace pagoda::cpu
