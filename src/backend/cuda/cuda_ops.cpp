// CudaBackend ops: check the tensors against backend.h's contracts, then
// hand plain parameters to the kernel launchers (one family per .cu).
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>

#include "backend/cuda/activation_kernels.h"
#include "backend/cuda/attention.h"
#include "backend/cuda/cublaslt_linear.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/gather_kernels.h"
#include "backend/cuda/gemv_kernels.h"
#include "backend/cuda/kv_cache_kernels.h"
#include "backend/cuda/moe_kernels.h"
#include "backend/cuda/norm_kernels.h"
#include "backend/cuda/rope_kernels.h"
#include "backend/cuda/rope_kv_kernels.h"

namespace pagoda {
namespace {

bool is_half(DType t) { return t == DType::kBF16 || t == DType::kF16; }

bool is_aligned_16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

std::string describe(const Tensor& t) {
  std::string s = "[";
  for (int i = 0; i < t.ndim; ++i) s += fmt::format("{}{}", i ? ", " : "", t.shape[i]);
  return fmt::format("{}] {}", s, dtype_name(t.dtype));
}

// Elements per row when t is read as rows of its last dimension.
int64_t last_dim(const Tensor& t) { return t.ndim > 0 ? t.dim(-1) : 0; }
int64_t num_rows(const Tensor& t) { return t.ndim > 0 && last_dim(t) > 0 ? t.numel() / last_dim(t) : 0; }

// Whether q holds codes [rows, k] e4m3 and scales [rows] f32.
bool fp8_rows_ok(const Fp8Rows& q, int64_t rows, int64_t k) {
  return q.codes.dtype == DType::kF8E4M3 && q.codes.numel() == rows * k &&
         q.scales.dtype == DType::kF32 && q.scales.numel() == rows;
}

// Sets the KV write's destination in launch_kv_write's or
// launch_qk_norm_rope_kv_write's params: `slots` and the layer's caches of
// `width` (kv heads x head_dim) elements per slot.
template <typename Params>
void set_kv_destination(Params& p, const Tensor& slots, const KvCacheView& cache, int64_t width) {
  p.slots = slots.ptr<int32_t>();
  p.k_cache = cache.k.data;
  p.v_cache = cache.v.data;
  p.num_slots = cache.k.numel() / width;
  p.cache_dtype = cache.k.dtype;
  p.scales = cache.k.dtype == DType::kF8E4M3 ? cache.scales.ptr<float>() : nullptr;
}

// Whether a cache of qkv's dtype or an FP8 one (with its [2] f32 scales)
// holds k and v.
bool cache_dtype_ok(const KvCacheView& cache, DType compute) {
  if (cache.k.dtype != cache.v.dtype) return false;
  if (cache.k.dtype == compute) return true;
  return cache.k.dtype == DType::kF8E4M3 && cache.scales.dtype == DType::kF32 &&
         cache.scales.numel() == 2;
}

// Whether cos_sin [P, R] has a rotary width R the rope kernels take: even,
// in (0, head_dim] (R < head_dim: a partial rotary embedding).
bool rotary_width_ok(const Tensor& cos_sin, int64_t head_dim) {
  const int64_t r = cos_sin.dim(1);
  return r > 0 && r % 2 == 0 && r <= head_dim;
}

// Dtypes and sizes of paged_attention's arguments (shapes the kernel cannot
// handle are reported by the launcher).
bool attention_args_ok(const Tensor& qkv, const QkvLayout& layout, const KvCacheView& cache,
                       const AttentionMetadata& meta, const Tensor& out) {
  const int64_t width = static_cast<int64_t>(layout.num_kv_heads) * layout.head_dim;
  const bool meta_ok = meta.query_start_loc.dtype == DType::kI32 &&
                       meta.seq_lens.dtype == DType::kI32 && meta.block_tables.dtype == DType::kI32 &&
                       meta.num_seqs >= 0 && meta.max_blocks_per_seq >= 0 &&
                       meta.query_start_loc.numel() >= meta.num_seqs + 1 &&
                       meta.seq_lens.numel() >= meta.num_seqs &&
                       meta.block_tables.numel() >=
                           static_cast<int64_t>(meta.num_seqs) * meta.max_blocks_per_seq;
  const bool cache_ok = cache_dtype_ok(cache, qkv.dtype) && width > 0 && cache.block_size > 0 &&
                        cache.k.numel() == cache.v.numel() &&
                        cache.k.numel() % (width * cache.block_size) == 0;
  return is_half(qkv.dtype) && last_dim(qkv) == layout.row_width() && out.dtype == qkv.dtype &&
         out.numel() == num_rows(qkv) * layout.num_q_heads * layout.head_dim && meta_ok && cache_ok;
}

}  // namespace

void CudaBackend::embedding(const Tensor& table, const Tensor& ids, int64_t first_row,
                            Tensor& out) {
  if (table.ndim != 2 || ids.dtype != DType::kI32 || out.dtype != table.dtype ||
      out.numel() != ids.numel() * table.dim(1)) {
    return fail(fmt::format("embedding: table {} ids {} out {}", describe(table), describe(ids),
                            describe(out)));
  }
  cuda::GatherRowsParams p;
  p.src = table.data;
  p.num_src_rows = table.dim(0);
  p.first_index = first_row;
  p.row_bytes = static_cast<int64_t>(table.nbytes()) / std::max<int64_t>(table.dim(0), 1);
  p.indices = ids.ptr<int32_t>();
  p.num_rows = ids.numel();
  p.out = out.data;
  check(cuda::launch_gather_rows(p, stream_), "embedding");
}

void CudaBackend::gather_rows(const Tensor& x, const Tensor& indices, Tensor& out) {
  const int64_t rows = x.ndim > 0 ? x.dim(0) : 0;
  const int64_t row_bytes = rows > 0 ? static_cast<int64_t>(x.nbytes()) / rows : 0;
  if (indices.dtype != DType::kI32 || out.dtype != x.dtype ||
      static_cast<int64_t>(out.nbytes()) != indices.numel() * row_bytes) {
    return fail(fmt::format("gather_rows: x {} indices {} out {}", describe(x), describe(indices),
                            describe(out)));
  }
  cuda::GatherRowsParams p;
  p.src = x.data;
  p.num_src_rows = rows;
  p.row_bytes = row_bytes;
  p.indices = indices.ptr<int32_t>();
  p.num_rows = indices.numel();
  p.out = out.data;
  check(cuda::launch_gather_rows(p, stream_), "gather_rows");
}

void CudaBackend::rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out) {
  norm_rows(nullptr, x, w, eps, out, nullptr);
}

void CudaBackend::add_rms_norm(Tensor& residual, const Tensor& x, const Tensor& w, float eps,
                               Tensor& out) {
  norm_rows(&residual, x, w, eps, out, nullptr);
}

void CudaBackend::rms_norm_fp8(const Tensor& x, const Tensor& w, float eps, Tensor& out,
                               Fp8Rows& q) {
  norm_rows(nullptr, x, w, eps, out, &q);
}

void CudaBackend::add_rms_norm_fp8(Tensor& residual, const Tensor& x, const Tensor& w, float eps,
                                   Tensor& out, Fp8Rows& q) {
  norm_rows(&residual, x, w, eps, out, &q);
}

void CudaBackend::norm_rows(Tensor* residual, const Tensor& x, const Tensor& w, float eps,
                            Tensor& out, Fp8Rows* q) {
  const char* name = residual != nullptr ? (q ? "add_rms_norm_fp8" : "add_rms_norm")
                                         : (q ? "rms_norm_fp8" : "rms_norm");
  const Tensor& in = residual != nullptr ? *residual : x;
  const int64_t hidden = last_dim(in), rows = num_rows(in);
  if (!is_half(in.dtype) || x.dtype != in.dtype || w.dtype != in.dtype || out.dtype != in.dtype ||
      w.numel() != hidden || x.numel() != in.numel() || out.numel() != in.numel() ||
      (residual != nullptr && out.data == residual->data) || (q != nullptr && !fp8_rows_ok(*q, rows, hidden))) {
    return fail(fmt::format("{}: {} {} w {} out {}{}", name, residual ? "residual" : "x",
                            describe(in), describe(w), describe(out),
                            q ? fmt::format(" codes {} scales {}", describe(q->codes),
                                            describe(q->scales))
                              : std::string()));
  }
  cuda::RmsNormParams p;
  p.dtype = in.dtype;
  p.x = x.data;
  p.residual = residual != nullptr ? residual->data : nullptr;
  p.weight = w.data;
  p.out = out.data;
  p.num_rows = rows;
  p.hidden = hidden;
  p.eps = eps;
  if (q != nullptr) {
    p.codes = static_cast<uint8_t*>(q->codes.data);
    p.scales = q->scales.ptr<float>();
  }
  check(cuda::launch_rms_norm(p, stream_), name);
}

void CudaBackend::linear(const Tensor& x, const LinearWeight& w, const Tensor& bias, Tensor& out) {
  if (is_block_dtype(w.dtype)) return linear_blocks(x, w, bias, out);
  if (w.is_fp8()) return linear_fp8(x, w, bias, out);
  const int64_t k = last_dim(x);
  const int64_t rows = num_rows(x);
  const int64_t n = w.ndim == 2 ? w.dim(0) : 0;
  const bool out_ok = out.dtype == x.dtype || out.dtype == DType::kF32;
  const bool bias_ok = bias.empty() || (bias.numel() == n && (is_half(bias.dtype) || bias.dtype == DType::kF32));
  if (!is_half(x.dtype) || w.dtype != x.dtype || !out_ok || !bias_ok || k == 0 || w.ndim != 2 ||
      w.dim(1) != k || out.numel() != rows * n) {
    return fail(fmt::format("linear: x {} w {} bias {} out {}", describe(x), describe(w),
                            bias.empty() ? std::string("none") : describe(bias), describe(out)));
  }
  if (skinny_linear_ && rows <= cuda::kGemvMaxRows) {
    cuda::GemvParams g;
    g.dtype = x.dtype;
    g.x = x.data;
    g.w = w.data;
    g.bias = bias.empty() ? nullptr : bias.data;
    g.bias_dtype = bias.dtype;
    g.out = out.data;
    g.out_dtype = out.dtype;
    g.rows = static_cast<int>(rows);
    g.n = n;
    g.k = k;
    if (cuda::gemv_supports(g)) {
      check(cuda::launch_gemv(g, stream_), "linear (gemv)");
      return;
    }
  }
  // The cuBLASLt bias epilogue reads the bias in the output dtype; other
  // biases are added by a separate kernel.
  const bool fused_bias = !bias.empty() && bias.dtype == out.dtype && is_aligned_16(bias.data);
  cuda::LinearArgs a;
  a.x = x.data;
  a.w = w.data;
  a.bias = fused_bias ? bias.data : nullptr;
  a.out = out.data;
  a.rows = rows;
  a.n = n;
  a.k = k;
  a.in_dtype = x.dtype;
  a.bias_dtype = out.dtype;
  a.out_dtype = out.dtype;
  const Status st = linear_->run(a, stream_);
  if (!st.ok()) return fail(st.error().message);
  if (!bias.empty() && !fused_bias) {
    cuda::BiasAddParams b;
    b.out_dtype = out.dtype;
    b.out = out.data;
    b.bias_dtype = bias.dtype;
    b.bias = bias.data;
    b.num_rows = rows;
    b.num_cols = n;
    check(cuda::launch_bias_add(b, stream_), "linear (bias)");
  }
}

void CudaBackend::qk_norm(Tensor& qkv, const QkvLayout& layout, const Tensor& q_w,
                          const Tensor& k_w, float eps) {
  const int64_t d = layout.head_dim;
  if (!is_half(qkv.dtype) || last_dim(qkv) != layout.row_width() || q_w.dtype != qkv.dtype ||
      k_w.dtype != qkv.dtype || q_w.numel() != d || k_w.numel() != d || d <= 0 || d > 256) {
    return fail(fmt::format("qk_norm: qkv {} q_w {} k_w {} head_dim {}", describe(qkv),
                            describe(q_w), describe(k_w), d));
  }
  cuda::QkNormParams p;
  p.dtype = qkv.dtype;
  p.qkv = qkv.data;
  p.num_tokens = num_rows(qkv);
  p.row_width = layout.row_width();
  p.num_q_heads = layout.num_q_heads;
  p.num_kv_heads = layout.num_kv_heads;
  p.head_dim = layout.head_dim;
  p.q_weight = q_w.data;
  p.k_weight = k_w.data;
  p.eps = eps;
  check(cuda::launch_qk_norm(p, stream_), "qk_norm");
}

void CudaBackend::rope(Tensor& qkv, const QkvLayout& layout, const Tensor& positions,
                       const Tensor& cos_sin) {
  const int64_t tokens = num_rows(qkv);
  if (!is_half(qkv.dtype) || last_dim(qkv) != layout.row_width() || positions.dtype != DType::kI32 ||
      positions.numel() != tokens || cos_sin.dtype != DType::kF32 || cos_sin.ndim != 2 ||
      !rotary_width_ok(cos_sin, layout.head_dim)) {
    return fail(fmt::format("rope: qkv {} positions {} cos_sin {} head_dim {}", describe(qkv),
                            describe(positions), describe(cos_sin), layout.head_dim));
  }
  cuda::RopeParams p;
  p.dtype = qkv.dtype;
  p.qkv = qkv.data;
  p.num_tokens = tokens;
  p.row_width = layout.row_width();
  p.num_heads = layout.num_q_heads + layout.num_kv_heads;
  p.head_dim = layout.head_dim;
  p.rotary_dim = static_cast<int>(cos_sin.dim(1));
  p.positions = positions.ptr<int32_t>();
  p.cos_sin = cos_sin.ptr<float>();
  p.num_positions = cos_sin.dim(0);
  check(cuda::launch_rope(p, stream_), "rope");
}

void CudaBackend::kv_write(const Tensor& qkv, const QkvLayout& layout, const Tensor& slots,
                           KvCacheView& cache) {
  const int64_t tokens = num_rows(qkv);
  const int64_t width = static_cast<int64_t>(layout.num_kv_heads) * layout.head_dim;
  if (!is_half(qkv.dtype) || last_dim(qkv) != layout.row_width() || slots.dtype != DType::kI32 ||
      slots.numel() != tokens || !cache_dtype_ok(cache, qkv.dtype) || width <= 0 ||
      cache.k.numel() != cache.v.numel() || cache.k.numel() % width != 0) {
    return fail(fmt::format("kv_write: qkv {} slots {} k {} v {}", describe(qkv), describe(slots),
                            describe(cache.k), describe(cache.v)));
  }
  cuda::KvWriteParams p;
  p.dtype = qkv.dtype;
  p.qkv = qkv.data;
  p.num_tokens = tokens;
  p.row_width = layout.row_width();
  p.num_q_heads = layout.num_q_heads;
  p.num_kv_heads = layout.num_kv_heads;
  p.head_dim = layout.head_dim;
  set_kv_destination(p, slots, cache, width);
  check(cuda::launch_kv_write(p, stream_), "kv_write");
}

void CudaBackend::qk_norm_rope_kv_write(Tensor& qkv, const QkvLayout& layout, const Tensor& q_w,
                                        const Tensor& k_w, float eps, const Tensor& positions,
                                        const Tensor& cos_sin, const Tensor& slots,
                                        KvCacheView& cache) {
  const int64_t tokens = num_rows(qkv), d = layout.head_dim;
  const int64_t width = static_cast<int64_t>(layout.num_kv_heads) * d;
  // The kernel only with q/k norms: measured on an H200 it wins there
  // (Qwen3-30B-A3B shape: 4.39 vs 5.42 us per call, W1 3.67 vs 3.72 ms) and
  // loses without them (Llama-3.1-8B: 3.60 vs 3.27 us for rope + kv_write).
  const bool norm_ok = !q_w.empty() && q_w.dtype == qkv.dtype && k_w.dtype == qkv.dtype &&
                       q_w.numel() == d && k_w.numel() == d;
  // Arguments the three ops would accept; anything else (or no norms) takes
  // the calls, which report it.
  const bool args_ok = fused_decode_ && is_half(qkv.dtype) && last_dim(qkv) == layout.row_width() &&
                       norm_ok && positions.dtype == DType::kI32 && positions.numel() == tokens &&
                       cos_sin.dtype == DType::kF32 && cos_sin.ndim == 2 &&
                       rotary_width_ok(cos_sin, d) &&
                       slots.dtype == DType::kI32 && slots.numel() == tokens &&
                       cache_dtype_ok(cache, qkv.dtype) && width > 0 &&
                       cache.k.numel() == cache.v.numel() && cache.k.numel() % width == 0;
  cuda::QkNormRopeKvWriteParams p;
  if (args_ok) {
    p.dtype = qkv.dtype;
    p.qkv = qkv.data;
    p.num_tokens = tokens;
    p.row_width = layout.row_width();
    p.num_q_heads = layout.num_q_heads;
    p.num_kv_heads = layout.num_kv_heads;
    p.head_dim = layout.head_dim;
    p.rotary_dim = static_cast<int>(cos_sin.dim(1));
    p.q_weight = q_w.data;
    p.k_weight = k_w.data;
    p.eps = eps;
    p.positions = positions.ptr<int32_t>();
    p.cos_sin = cos_sin.ptr<float>();
    p.num_positions = cos_sin.dim(0);
    set_kv_destination(p, slots, cache, width);
  }
  if (!args_ok || !cuda::qk_norm_rope_kv_write_supports(p)) {
    return Backend::qk_norm_rope_kv_write(qkv, layout, q_w, k_w, eps, positions, cos_sin, slots,
                                          cache);
  }
  check(cuda::launch_qk_norm_rope_kv_write(p, stream_), "qk_norm_rope_kv_write");
}

void CudaBackend::paged_attention(const Tensor& qkv, const QkvLayout& layout,
                                  const KvCacheView& cache, const AttentionMetadata& meta,
                                  const AttentionScoring& scoring, Tensor& out) {
  if (!attention_args_ok(qkv, layout, cache, meta, out)) {
    return fail(fmt::format(
        "paged_attention: qkv {} out {} k {} block_size {} qsl {} seq_lens {} block_tables {} "
        "num_seqs {} max_blocks_per_seq {}",
        describe(qkv), describe(out), describe(cache.k), cache.block_size,
        describe(meta.query_start_loc), describe(meta.seq_lens), describe(meta.block_tables),
        meta.num_seqs, meta.max_blocks_per_seq));
  }
  const int64_t width = static_cast<int64_t>(layout.num_kv_heads) * layout.head_dim;
  cuda::AttentionParams p;
  p.dtype = qkv.dtype;
  p.qkv = qkv.data;
  p.num_tokens = num_rows(qkv);
  p.row_width = layout.row_width();
  p.num_q_heads = layout.num_q_heads;
  p.num_kv_heads = layout.num_kv_heads;
  p.head_dim = layout.head_dim;
  p.k_cache = cache.k.data;
  p.v_cache = cache.v.data;
  p.kv_dtype = cache.k.dtype;
  p.kv_scales = cache.k.dtype == DType::kF8E4M3 ? cache.scales.ptr<float>() : nullptr;
  p.fp8_decode_staged = fp8_kv_decode_staged_;
  p.block_size = cache.block_size;
  p.num_blocks = cache.k.numel() / (width * cache.block_size);
  p.query_start_loc = meta.query_start_loc.ptr<int32_t>();
  p.seq_lens = meta.seq_lens.ptr<int32_t>();
  p.block_tables = meta.block_tables.ptr<int32_t>();
  p.max_blocks_per_seq = meta.max_blocks_per_seq;
  p.num_seqs = meta.num_seqs;
  p.max_query_len = meta.max_query_len;
  p.max_seq_len = meta.max_seq_len;
  p.num_decode_seqs = meta.num_decode_seqs;
  p.scale = scoring.scale;
  p.softcap = scoring.softcap;
  p.window = scoring.sliding_window;
  p.out = out.data;
  const cuda::AttentionWorkspace ws{attention_workspace_, attention_workspace_bytes_, num_sms_};
  const cudaError_t e = cuda::launch_paged_attention(p, ws, stream_);
  if (e == cudaErrorInvalidValue) {
    return fail(
        fmt::format("paged_attention: unsupported shape (head_dim {} must be a multiple of "
                    "8 in [8, 256], Hq {} a multiple of Hkv {}, 16-byte aligned qkv/cache, "
                    "8-byte aligned for fp8)",
                    layout.head_dim, layout.num_q_heads, layout.num_kv_heads));
  }
  check(e, "paged_attention");
}

void CudaBackend::glu(const Tensor& gate_up, Tensor& out, bool gelu_tanh, Fp8Rows* q) {
  const char* name = gelu_tanh ? "gelu_tanh_mul" : (q ? "silu_mul_fp8" : "silu_mul");
  const int64_t inter = last_dim(gate_up) / 2;
  if (!is_half(gate_up.dtype) || out.dtype != gate_up.dtype || last_dim(gate_up) % 2 != 0 ||
      out.numel() != num_rows(gate_up) * inter ||
      (q != nullptr && !fp8_rows_ok(*q, num_rows(gate_up), inter))) {
    return fail(fmt::format("{}: gate_up {} out {}", name, describe(gate_up), describe(out)));
  }
  cuda::SiluMulParams p;
  p.act = gelu_tanh ? cuda::GluActivation::kGeluTanh : cuda::GluActivation::kSilu;
  p.dtype = gate_up.dtype;
  p.gate_up = gate_up.data;
  p.out = out.data;
  p.num_rows = num_rows(gate_up);
  p.inter = inter;
  if (q != nullptr) {
    p.codes = static_cast<uint8_t*>(q->codes.data);
    p.scales = q->scales.ptr<float>();
  }
  check(cuda::launch_silu_mul(p, stream_), name);
}

void CudaBackend::silu_mul(const Tensor& gate_up, Tensor& out) {
  glu(gate_up, out, false);
}

void CudaBackend::silu_mul_fp8(const Tensor& gate_up, Tensor& out, Fp8Rows& q) {
  glu(gate_up, out, false, &q);
}

void CudaBackend::gelu_tanh_mul(const Tensor& gate_up, Tensor& out) {
  glu(gate_up, out, true);
}

void CudaBackend::scale_or_cap(Tensor& x, float s, float cap) {
  const char* name = cap > 0.0f ? "softcap" : "scale";
  if (!is_half(x.dtype) && x.dtype != DType::kF32)
    return fail(fmt::format("{}: x {}", name, describe(x)));
  cuda::ScaleParams p;
  p.dtype = x.dtype;
  p.x = x.data;
  p.n = x.numel();
  p.scale = s;
  p.softcap = cap;
  check(cuda::launch_scale(p, stream_), name);
}

void CudaBackend::scale(Tensor& x, float s) {
  scale_or_cap(x, s, 0.0f);
}

void CudaBackend::softcap(Tensor& x, float cap) {
  if (!(cap > 0.0f)) return fail(fmt::format("softcap: cap {} must be positive", cap));
  scale_or_cap(x, 1.0f, cap);
}

void CudaBackend::moe_route(const Tensor& logits, bool renormalize, Tensor& ids, Tensor& weights) {
  const int64_t t = num_rows(logits), e = last_dim(logits), k = last_dim(ids);
  if (logits.dtype != DType::kF32 || ids.dtype != DType::kI32 || weights.dtype != DType::kF32 ||
      k < 1 || k > e || ids.numel() != t * k || weights.numel() != t * k) {
    return fail(fmt::format("moe_route: logits {} ids {} weights {}", describe(logits),
                            describe(ids), describe(weights)));
  }
  cuda::MoeRouteParams p;
  p.logits = logits.ptr<float>();
  p.ids = ids.ptr<int32_t>();
  p.weights = weights.ptr<float>();
  p.num_tokens = t;
  p.num_experts = static_cast<int>(e);
  p.top_k = static_cast<int>(k);
  p.renormalize = renormalize;
  check(cuda::launch_moe_route(p, stream_), "moe_route");
}

void CudaBackend::moe_experts(const Tensor& x, const Tensor& gate_up, const Tensor& down,
                              const Tensor& ids, const Tensor& weights, Tensor& gate_up_scratch,
                              Tensor& act_scratch, Tensor& out) {
  const int64_t t = num_rows(x), h = last_dim(x), k = last_dim(ids);
  const int64_t e = gate_up.ndim == 3 ? gate_up.dim(0) : 0, inter = last_dim(down);
  const bool ok =
      is_half(x.dtype) && gate_up.dtype == x.dtype && down.dtype == x.dtype &&
      out.dtype == x.dtype && act_scratch.dtype == x.dtype && ids.dtype == DType::kI32 &&
      weights.dtype == DType::kF32 && e > 0 && gate_up.dim(1) == 2 * inter && gate_up.dim(2) == h &&
      down.ndim == 3 && down.dim(0) == e && down.dim(1) == h && k > 0 && ids.numel() == t * k &&
      weights.numel() == t * k && out.numel() == t * h && act_scratch.numel() >= t * k * inter;
  if (!ok) {
    return fail(fmt::format("moe_experts: x {} gate_up {} down {} ids {} weights {} out {}",
                            describe(x), describe(gate_up), describe(down), describe(ids),
                            describe(weights), describe(out)));
  }
  if (e > cuda::kMoeMaxExperts) {
    return fail(fmt::format("moe_experts: {} experts; the CUDA backend takes at most {}", e,
                            cuda::kMoeMaxExperts));
  }
  const int64_t need = cuda::moe_experts_scratch_bytes(t * k, h, static_cast<int>(e));
  if (static_cast<int64_t>(gate_up_scratch.nbytes()) < need) {
    return fail(fmt::format("moe_experts: gate_up_scratch {} holds {} bytes, needs {}",
                            describe(gate_up_scratch), gate_up_scratch.nbytes(), need));
  }
  cuda::MoeExpertsParams p;
  p.dtype = x.dtype;
  p.x = x.data;
  p.gate_up = gate_up.data;
  p.down = down.data;
  p.ids = ids.ptr<int32_t>();
  p.weights = weights.ptr<float>();
  p.scratch = gate_up_scratch.data;
  p.scratch_bytes = static_cast<int64_t>(gate_up_scratch.nbytes());
  p.act_scratch = act_scratch.data;
  p.out = out.data;
  p.num_tokens = t;
  p.hidden = h;
  p.inter = inter;
  p.num_experts = static_cast<int>(e);
  p.top_k = static_cast<int>(k);
  p.decode_v1 = moe_decode_v1_;
  check(cuda::launch_moe_experts(p, stream_), "moe_experts");
}

void CudaBackend::add_sigmoid_gated(Tensor& out, const Tensor& y, const Tensor& x,
                                    const Tensor& gate_w) {
  if (!is_half(out.dtype) || y.dtype != out.dtype || x.dtype != out.dtype ||
      gate_w.dtype != out.dtype || y.numel() != out.numel() || x.numel() != out.numel() ||
      gate_w.numel() != last_dim(out)) {
    return fail(fmt::format("add_sigmoid_gated: out {} y {} x {} gate_w {}", describe(out),
                            describe(y), describe(x), describe(gate_w)));
  }
  cuda::SigmoidGatedAddParams p;
  p.dtype = out.dtype;
  p.out = out.data;
  p.y = y.data;
  p.x = x.data;
  p.gate_w = gate_w.data;
  p.num_rows = num_rows(out);
  p.hidden = last_dim(out);
  check(cuda::launch_add_sigmoid_gated(p, stream_), "add_sigmoid_gated");
}

void CudaBackend::copy_blocks(std::vector<KvCacheView>& caches, const std::vector<int32_t>& src,
                              const std::vector<int32_t>& dst) {
  if (src.size() != dst.size()) {
    return fail(fmt::format("copy_blocks: {} sources but {} destinations", src.size(), dst.size()));
  }
  for (KvCacheView& c : caches) {
    if (c.k.ndim < 1 || c.k.dim(0) <= 0 || c.k.nbytes() != c.v.nbytes() || c.k.dtype != c.v.dtype) {
      return fail(fmt::format("copy_blocks: cache k {} v {}", describe(c.k), describe(c.v)));
    }
    for (size_t begin = 0; begin < src.size(); begin += cuda::kMaxCopyPairs) {
      cuda::CopyBlocksParams p;
      p.k_cache = c.k.data;
      p.v_cache = c.v.data;
      p.num_blocks = c.k.dim(0);
      p.block_bytes = static_cast<int64_t>(c.k.nbytes()) / p.num_blocks;
      p.num_pairs = static_cast<int>(std::min<size_t>(cuda::kMaxCopyPairs, src.size() - begin));
      for (int i = 0; i < p.num_pairs; ++i) {
        p.src[i] = src[begin + static_cast<size_t>(i)];
        p.dst[i] = dst[begin + static_cast<size_t>(i)];
      }
      if (!check(cuda::launch_copy_blocks(p, stream_), "copy_blocks")) return;
    }
  }
}

}  // namespace pagoda
