#include "backend/profiling_backend.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

namespace pagoda {

namespace {

int64_t bytes_of(const Tensor& t) { return t.empty() ? 0 : static_cast<int64_t>(t.nbytes()); }

int64_t linear_bytes(const Tensor& x, const LinearWeight& w, const Tensor& bias,
                     const Tensor& out) {
  return bytes_of(x) + bytes_of(w) + bytes_of(w.weight_scale) + bytes_of(bias) + bytes_of(out);
}

}  // namespace

ProfilingBackend::ProfilingBackend(std::unique_ptr<Backend> inner, std::unique_ptr<OpTimer> timer)
    : inner_(std::move(inner)), timer_(std::move(timer)) {}

void ProfilingBackend::set_weight_names(std::unordered_map<const void*, std::string> names) {
  weight_names_ = std::move(names);
}

void ProfilingBackend::start() {
  timer_->take();
  trace_ = ProfileTrace{};
  trace_.method = timer_->method();
  recording_ = true;
}

ProfileTrace ProfilingBackend::stop() {
  recording_ = false;
  const std::vector<double> us = timer_->take();
  for (size_t i = 0; i < trace_.ops.size() && i < us.size(); ++i) trace_.ops[i].us = us[i];
  if (!trace_.ops.empty() && trace_.steps.size() > static_cast<size_t>(trace_.ops.back().step + 1))
    trace_.steps.pop_back();  // the empty step opened by the last sampling
  return std::exchange(trace_, ProfileTrace{});
}

ProfiledStep& ProfilingBackend::current_step() {
  if (trace_.steps.empty()) trace_.steps.emplace_back();
  return trace_.steps.back();
}

template <typename Label, typename Op>
void ProfilingBackend::timed(Label&& label, int64_t bytes, Op&& op) {
  if (!recording_) {
    op(*inner_);
    return;
  }
  current_step();
  const size_t i = trace_.ops.size();
  trace_.ops.push_back({label(), static_cast<int64_t>(trace_.steps.size()) - 1, bytes, 0.0});
  timer_->begin(i);
  op(*inner_);
  timer_->end(i);
}

std::string ProfilingBackend::linear_label(const char* op, const LinearWeight& w) const {
  const auto it = weight_names_.find(w.data);
  const std::string name = it != weight_names_.end() ? it->second + " " : std::string();
  return fmt::format("{} {}{}x{} {}", op, name, w.dim(0), w.dim(1), dtype_name(w.dtype));
}

// An op with a fixed name and no byte estimate.
#define PAGODA_PROFILED(NAME, CALL) timed([] { return std::string(NAME); }, 0, [&](Backend& b) { b.CALL; })

void ProfilingBackend::copy_to_device(void* dst, const void* src, size_t bytes) {
  PAGODA_PROFILED("copy_to_device", copy_to_device(dst, src, bytes));
}
void ProfilingBackend::copy_to_device_2d(void* dst, size_t dst_pitch, const void* src,
                                         size_t src_pitch, size_t row_bytes, size_t rows) {
  PAGODA_PROFILED("copy_to_device",
                  copy_to_device_2d(dst, dst_pitch, src, src_pitch, row_bytes, rows));
}
void ProfilingBackend::copy_device(void* dst, const void* src, size_t bytes) {
  PAGODA_PROFILED("copy_device", copy_device(dst, src, bytes));
}
void ProfilingBackend::embedding(const Tensor& table, const Tensor& ids, int64_t first_row,
                                 Tensor& out) {
  if (recording_) current_step().num_tokens = ids.dim(0);
  PAGODA_PROFILED("embedding", embedding(table, ids, first_row, out));
}
void ProfilingBackend::rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out) {
  PAGODA_PROFILED("rms_norm", rms_norm(x, w, eps, out));
}
void ProfilingBackend::add_rms_norm(Tensor& residual, const Tensor& x, const Tensor& w, float eps,
                                    Tensor& out) {
  PAGODA_PROFILED("add_rms_norm", add_rms_norm(residual, x, w, eps, out));
}
void ProfilingBackend::rms_norm_fp8(const Tensor& x, const Tensor& w, float eps, Tensor& out,
                                    Fp8Rows& q) {
  PAGODA_PROFILED("rms_norm_fp8", rms_norm_fp8(x, w, eps, out, q));
}
void ProfilingBackend::add_rms_norm_fp8(Tensor& residual, const Tensor& x, const Tensor& w,
                                        float eps, Tensor& out, Fp8Rows& q) {
  PAGODA_PROFILED("add_rms_norm_fp8", add_rms_norm_fp8(residual, x, w, eps, out, q));
}
void ProfilingBackend::silu_mul_fp8(const Tensor& gate_up, Tensor& out, Fp8Rows& q) {
  PAGODA_PROFILED("silu_mul_fp8", silu_mul_fp8(gate_up, out, q));
}
void ProfilingBackend::linear(const Tensor& x, const LinearWeight& w, const Tensor& bias,
                              Tensor& out) {
  timed([&] { return linear_label("linear", w); }, linear_bytes(x, w, bias, out),
        [&](Backend& b) { b.linear(x, w, bias, out); });
}
void ProfilingBackend::linear_fp8_rows(const Fp8Rows& x, const LinearWeight& w, const Tensor& bias,
                                       Tensor& out) {
  const int64_t bytes = linear_bytes(x.codes, w, bias, out) + bytes_of(x.scales);
  timed([&] { return linear_label("linear_fp8_rows", w); }, bytes,
        [&](Backend& b) { b.linear_fp8_rows(x, w, bias, out); });
}
void ProfilingBackend::qk_norm(Tensor& qkv, const QkvLayout& layout, const Tensor& q_w,
                               const Tensor& k_w, float eps) {
  PAGODA_PROFILED("qk_norm", qk_norm(qkv, layout, q_w, k_w, eps));
}
void ProfilingBackend::rope(Tensor& qkv, const QkvLayout& layout, const Tensor& positions,
                            const Tensor& cos_sin) {
  PAGODA_PROFILED("rope", rope(qkv, layout, positions, cos_sin));
}
void ProfilingBackend::kv_write(const Tensor& qkv, const QkvLayout& layout, const Tensor& slots,
                                KvCacheView& cache) {
  PAGODA_PROFILED("kv_write", kv_write(qkv, layout, slots, cache));
}
void ProfilingBackend::qk_norm_rope_kv_write(Tensor& qkv, const QkvLayout& layout,
                                             const Tensor& q_w, const Tensor& k_w, float eps,
                                             const Tensor& positions, const Tensor& cos_sin,
                                             const Tensor& slots, KvCacheView& cache) {
  PAGODA_PROFILED("qk_norm_rope_kv_write",
                  qk_norm_rope_kv_write(qkv, layout, q_w, k_w, eps, positions, cos_sin, slots, cache));
}
void ProfilingBackend::paged_attention(const Tensor& qkv, const QkvLayout& layout,
                                       const KvCacheView& cache, const AttentionMetadata& meta,
                                       const AttentionScoring& scoring, Tensor& out) {
  if (recording_) {
    ProfiledStep& s = current_step();
    s.max_query_len = std::max(s.max_query_len, meta.max_query_len);
  }
  // Every sequence's k and v rows up to max_seq_len (or the window), plus q and out.
  const int64_t context = scoring.sliding_window > 0
                              ? std::min<int64_t>(meta.max_seq_len, scoring.sliding_window)
                              : meta.max_seq_len;
  const int64_t kv_row = static_cast<int64_t>(
      dtype_nbytes(cache.k.dtype, static_cast<int64_t>(layout.num_kv_heads) * layout.head_dim));
  const int64_t bytes =
      int64_t{2} * meta.num_seqs * context * kv_row + bytes_of(qkv) + bytes_of(out);
  timed([&] { return fmt::format("paged_attention {}", dtype_name(cache.k.dtype)); }, bytes,
        [&](Backend& b) { b.paged_attention(qkv, layout, cache, meta, scoring, out); });
}
void ProfilingBackend::silu_mul(const Tensor& gate_up, Tensor& out) {
  PAGODA_PROFILED("silu_mul", silu_mul(gate_up, out));
}
void ProfilingBackend::gelu_tanh_mul(const Tensor& gate_up, Tensor& out) {
  PAGODA_PROFILED("gelu_tanh_mul", gelu_tanh_mul(gate_up, out));
}
void ProfilingBackend::scale(Tensor& x, float s) { PAGODA_PROFILED("scale", scale(x, s)); }
void ProfilingBackend::softcap(Tensor& x, float cap) {
  PAGODA_PROFILED("softcap", softcap(x, cap));
}
void ProfilingBackend::moe_route(const Tensor& logits, bool renormalize, Tensor& ids,
                                 Tensor& weights) {
  PAGODA_PROFILED("moe_route", moe_route(logits, renormalize, ids, weights));
}
void ProfilingBackend::moe_experts(const Tensor& x, const Tensor& gate_up, const Tensor& down,
                                   const Tensor& ids, const Tensor& weights,
                                   Tensor& gate_up_scratch, Tensor& act_scratch, Tensor& out) {
  const int64_t num_experts = gate_up.dim(0);
  const int64_t used = std::min(num_experts, ids.numel());  // T * k routed slots
  const int64_t expert_bytes = (bytes_of(gate_up) + bytes_of(down)) / std::max<int64_t>(num_experts, 1);
  const int64_t bytes = used * expert_bytes + bytes_of(x) + bytes_of(out);
  timed(
      [&] {
        return fmt::format("moe_experts {}x{}x{} {}", num_experts, gate_up.dim(1), gate_up.dim(2),
                           dtype_name(gate_up.dtype));
      },
      bytes,
      [&](Backend& b) {
        b.moe_experts(x, gate_up, down, ids, weights, gate_up_scratch, act_scratch, out);
      });
}
void ProfilingBackend::add_sigmoid_gated(Tensor& out, const Tensor& y, const Tensor& x,
                                         const Tensor& gate_w) {
  PAGODA_PROFILED("add_sigmoid_gated", add_sigmoid_gated(out, y, x, gate_w));
}
void ProfilingBackend::gather_rows(const Tensor& x, const Tensor& indices, Tensor& out) {
  PAGODA_PROFILED("gather_rows", gather_rows(x, indices, out));
}
void ProfilingBackend::copy_blocks(std::vector<KvCacheView>& caches,
                                   const std::vector<int32_t>& src,
                                   const std::vector<int32_t>& dst) {
  PAGODA_PROFILED("copy_blocks", copy_blocks(caches, src, dst));
}
void ProfilingBackend::sample_async(const Tensor& logits, const SamplingBatch& batch, int slot) {
  PAGODA_PROFILED("sample", sample_async(logits, batch, slot));
  if (recording_) trace_.steps.emplace_back();  // the next op starts the next step
}
void ProfilingBackend::copy_sampled_tokens(const Tensor& rows, const Tensor& src_rows,
                                           Tensor& ids) {
  PAGODA_PROFILED("copy_sampled_tokens", copy_sampled_tokens(rows, src_rows, ids));
}
void ProfilingBackend::replay_graph(int graph_id) {
  PAGODA_PROFILED("replay_graph", replay_graph(graph_id));
}

#undef PAGODA_PROFILED

}  // namespace pagoda
