// The op interface every backend (cpu, cuda) implements, and the plain-data
// batch descriptions the model runner hands it. Model code composes these
// ops; it never sees a concrete backend.
//
// Conventions for every op:
//  - Tensors are row-major and contiguous. T = tokens in the batch (rows),
//    H = hidden size, D = head dim, Hq / Hkv = query / key-value heads.
//  - Activations and weights use the backend's compute_dtype() (f32 on cpu,
//    bf16 or f16 on cuda) unless an op says otherwise; accumulation is f32.
//  - Ops are enqueued in order on the backend's stream; on the CPU they run
//    synchronously. Only copy_to_host(), synchronize(), finish_sample() and
//    wait_fence() wait.
//  - Index tensors (ids, positions, slots, block tables) are i32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "backend/linear_weight.h"
#include "batch/sampling_batch.h"
#include "core/result.h"
#include "core/tensor.h"

namespace pagoda {

enum class DeviceKind { kCpu, kCuda };

// Pipelined steps in flight at once: sample_async / finish_sample and the
// fences take a slot in [0, kNumStepSlots).
constexpr int kNumStepSlots = 2;

// Layout of the fused QKV projection output: one row per token,
// [q heads (Hq*D) | k heads (Hkv*D) | v heads (Hkv*D)].
struct QkvLayout {
  int num_q_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int64_t row_width() const { return static_cast<int64_t>(num_q_heads + 2 * num_kv_heads) * head_dim; }
};

// Paged KV cache of one layer: k and v each [num_blocks, block_size, Hkv, D].
// Token position t of a sequence lives in slot
//   block_table[t / block_size] * block_size + t % block_size.
// k and v hold the compute dtype, or kF8E4M3 (the FP8 KV cache,
// core/kv_cache_dtype.h): then kv_write stores e4m3(x / scale) (core/fp8.h
// rounding) and attention reads e4m3_to_float(q) * scale, with scales[0] the
// layer's k_scale and scales[1] its v_scale.
struct KvCacheView {
  Tensor k;
  Tensor v;
  int block_size = 0;
  Tensor scales;  // [2] f32 on the device (k_scale, v_scale); used only by an FP8 cache
};

// Describes the sequences of a ragged batch for attention. Device tensors are
// i32; the host fields mirror them for launch decisions.
struct AttentionMetadata {
  Tensor query_start_loc;  // [S+1]: the new tokens of sequence s are batch rows [qsl[s], qsl[s+1])
  Tensor seq_lens;         // [S]: tokens in sequence s's context after this step (cached + new)
  Tensor block_tables;     // [S, max_blocks_per_seq]: physical block ids, row s for sequence s
  int num_seqs = 0;
  int max_query_len = 0;   // max over s of qsl[s+1] - qsl[s]
  int max_seq_len = 0;     // max over s of seq_lens[s]
  int max_blocks_per_seq = 0;
  // The first num_decode_seqs sequences each have exactly one new token (a
  // hint: 0 is always valid; nonzero must be exact). The engine orders
  // decodes first (ScheduleOutput).
  int num_decode_seqs = 0;
};

// How paged_attention turns q.k into weights, for one layer. A plain scale
// converts to it (no capping, no window): the llama path.
struct AttentionScoring {
  AttentionScoring(float s = 1.0f, float cap = 0.0f, int32_t window = 0)
      : scale(s), softcap(cap), sliding_window(window) {}
  float scale;             // score = q.k * scale
  float softcap;           // > 0: score = softcap * tanh(score / softcap) (Gemma 2)
  int32_t sliding_window;  // > 0: the query at position p attends to (p - window, p] only
};

// A [T, K] activation quantised per token for an FP8 linear whose weight
// takes dynamic per-token activation scales (linear_weight.h: block 0, no
// input_scale): codes [T, K] kF8E4M3 with codes[t, k] = e4m3(a[t, k] /
// scales[t]) and scales [T] f32 with scales[t] = fp8_token_scale(max_k
// |a[t, k]|) (core/fp8_quant.h), a as stored in its dtype. The codes'
// memory must extend to ceil(T / 16) * 16 rows: a device GEMM may read (never
// use) the padding rows (cuBLASLt's FP8 row rule).
struct Fp8Rows {
  Tensor codes;
  Tensor scales;
};

// Bytes of moe_experts' gate_up_scratch for T tokens routed to k experts
// each, hidden size H: every backend fits (the CUDA grouped path keeps an
// f32 row [H] per routed slot, the expert-sorted slot order and its tile list).
int64_t moe_experts_scratch_bytes(int64_t tokens, int64_t top_k, int64_t hidden);

class Backend {
 public:
  virtual ~Backend() = default;

  virtual DeviceKind kind() const = 0;
  virtual std::string name() const = 0;      // e.g. "cpu (2 threads)", "NVIDIA H100 80GB HBM3"
  virtual DType compute_dtype() const = 0;

  // ---- memory ---------------------------------------------------------------
  virtual void* allocate(size_t bytes) = 0;        // device memory; nullptr on failure
  virtual void deallocate(void* ptr) = 0;
  virtual void* allocate_host(size_t bytes) = 0;   // host staging (pinned on cuda)
  virtual void deallocate_host(void* ptr) = 0;
  // Host -> device; `src` must stay valid and unchanged until synchronize().
  virtual void copy_to_device(void* dst, const void* src, size_t bytes) = 0;
  // `rows` rows of `row_bytes` each, host rows `src_pitch` bytes apart to
  // device rows `dst_pitch` bytes apart; same lifetime rule as copy_to_device.
  // Default: one copy_to_device per row.
  virtual void copy_to_device_2d(void* dst, size_t dst_pitch, const void* src, size_t src_pitch,
                                 size_t row_bytes, size_t rows) {
    for (size_t r = 0; r < rows; ++r) {
      copy_to_device(static_cast<char*>(dst) + r * dst_pitch,
                     static_cast<const char*>(src) + r * src_pitch, row_bytes);
    }
  }
  // Device -> host; waits for all enqueued work, then copies.
  virtual void copy_to_host(void* dst, const void* src, size_t bytes) = 0;
  virtual void copy_device(void* dst, const void* src, size_t bytes) = 0;
  virtual void synchronize() = 0;
  // Free and total device memory in bytes (cpu: available and total RAM).
  virtual void memory_info(size_t* free_bytes, size_t* total_bytes) = 0;

  // ---- ops ------------------------------------------------------------------
  // out[t,:] = table[ids[t] - first_row,:], or zeros where ids[t] - first_row
  // falls outside [0, R): table [R,H] holds the vocab rows [first_row,
  // first_row + R) (all of them with first_row 0; a vocab-parallel shard
  // under tensor parallelism, whose zero rows the ranks' sum leaves exact).
  // ids [T], out [T,H].
  virtual void embedding(const Tensor& table, const Tensor& ids, int64_t first_row,
                         Tensor& out) = 0;

  // out = x / sqrt(mean(x^2) + eps) * w, per row. x, out [T,H]; w [H].
  // out may be x (in place).
  virtual void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out) = 0;

  // residual += x (in place, rounded to compute dtype); then out = rms_norm(residual).
  virtual void add_rms_norm(Tensor& residual, const Tensor& x, const Tensor& w, float eps,
                            Tensor& out) = 0;

  // The same three ops that also quantise their output `out` [T, K] per
  // token into q (Fp8Rows, q.codes [T, K], q.scales [T]) for the FP8 linear
  // that consumes it (linear_fp8_rows): codes and scales are exactly those
  // that linear() would compute from `out` as stored.
  virtual void rms_norm_fp8(const Tensor& x, const Tensor& w, float eps, Tensor& out,
                            Fp8Rows& q) = 0;
  virtual void add_rms_norm_fp8(Tensor& residual, const Tensor& x, const Tensor& w, float eps,
                                Tensor& out, Fp8Rows& q) = 0;
  virtual void silu_mul_fp8(const Tensor& gate_up, Tensor& out, Fp8Rows& q) = 0;

  // out = x @ w^T (+ bias). x [T,K], w [N,K], bias [N] or empty, out [T,N].
  // out may be f32 while x and w are in the compute dtype (logits). w may
  // instead be in a block dtype (core/dtype.h: GGUF quantization blocks, K a
  // multiple of the block), after prepare_block_weight(w); the result is then
  // x @ dequantize(w)^T, dequantize as core/block_dequant.h. Or w is an FP8
  // weight with its scales, after prepare_fp8_weight(w): the W8A8 product of
  // linear_weight.h.
  virtual void linear(const Tensor& x, const LinearWeight& w, const Tensor& bias, Tensor& out) = 0;

  // linear() from pre-quantised activations: x holds the codes and per-token
  // scales of a [T, K] activation (Fp8Rows); w is an FP8 weight with
  // dynamic per-token activations (block 0, no input_scale). out [T, N] is
  // bit-equal to linear(a, w, bias, out) on the activation a that x was
  // quantised from.
  virtual void linear_fp8_rows(const Fp8Rows& x, const LinearWeight& w, const Tensor& bias,
                               Tensor& out) = 0;

  // Called by the weight loader once for each block-dtype weight [N, K] it
  // uploads, before any op reads it and before graphs are captured: the
  // backend sizes what linear() needs for it (cuda: the dequantization
  // scratch of the larger-batch path). Errors: out of device memory.
  virtual Status prepare_block_weight(const Tensor& w) { return Status::Ok(); }

  // Called by the weight loader once for each FP8 weight (linear_weight.h)
  // it uploads, before any op reads it and before graphs are captured.
  // Errors: the backend cannot run this FP8 weight (naming why).
  virtual Status prepare_fp8_weight(const LinearWeight& w) { return Status::Ok(); }

  // Per-head RMSNorm (Qwen3) in place on the q heads with q_w [D] and the k
  // heads with k_w [D] of qkv [T, row_width].
  virtual void qk_norm(Tensor& qkv, const QkvLayout& layout, const Tensor& q_w, const Tensor& k_w,
                       float eps) = 0;

  // Rotary embedding, rotate-half (GPT-NeoX) pairing (i, i + R/2), in place on
  // the q and k heads of qkv [T, row_width]. positions [T]; cos_sin [P, R] f32
  // where row p holds cos(p * f_i) for i < R/2, then sin(p * f_i). R (even,
  // <= D) is the rotary width: each head's dims [R, D) are left unchanged
  // (a partial rotary embedding, Phi-4-mini's 96 of 128).
  virtual void rope(Tensor& qkv, const QkvLayout& layout, const Tensor& positions,
                    const Tensor& cos_sin) = 0;

  // Writes the k and v heads of each token t to slot slots[t] of the cache
  // (an FP8 cache: quantised with the cache's scales, see KvCacheView); a
  // negative slot skips the token (padding).
  virtual void kv_write(const Tensor& qkv, const QkvLayout& layout, const Tensor& slots,
                        KvCacheView& cache) = 0;

  // The attention block's steps between the qkv projection and attention,
  // as one op: qk_norm(qkv, layout, q_w, k_w, eps) when q_w is not empty
  // (q_w and k_w both empty or both [D]), then rope(qkv, layout, positions,
  // cos_sin), then kv_write(qkv, layout, slots, cache). qkv and the cache
  // end exactly as after those three calls, which the default makes; a
  // backend may fuse them (cuda: one kernel).
  virtual void qk_norm_rope_kv_write(Tensor& qkv, const QkvLayout& layout, const Tensor& q_w,
                                     const Tensor& k_w, float eps, const Tensor& positions,
                                     const Tensor& cos_sin, const Tensor& slots,
                                     KvCacheView& cache);

  // Causal attention over the paged cache for a ragged batch (prefill chunks
  // and decode tokens mixed). Query row j of sequence s (j counted from
  // qsl[s]) sits at position p = seq_lens[s] - q_len_s + j and attends to
  // positions [0, p] of its sequence, or [max(0, p - W + 1), p] with a
  // sliding window W; weights = softmax(scoring(q.k)) (AttentionScoring).
  // q head h reads kv head h / (Hq / Hkv); an FP8 cache's k/v are read
  // dequantised (KvCacheView). The new tokens' k/v must already be written
  // (kv_write). out [T, Hq*D].
  virtual void paged_attention(const Tensor& qkv, const QkvLayout& layout, const KvCacheView& cache,
                               const AttentionMetadata& meta, const AttentionScoring& scoring,
                               Tensor& out) = 0;

  // out = silu(gate) * up where gate_up [T, 2I] holds gate in columns [0, I)
  // and up in [I, 2I); out [T, I].
  virtual void silu_mul(const Tensor& gate_up, Tensor& out) = 0;

  // GeGLU: out = gelu_tanh(gate) * up, gate_up and out as in silu_mul, with
  // gelu_tanh(x) = 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))) in f32
  // (PyTorch's gelu(approximate="tanh")).
  virtual void gelu_tanh_mul(const Tensor& gate_up, Tensor& out) = 0;

  // x *= s in place, each element in f32 then rounded to x's dtype. x is in
  // the compute dtype or f32.
  virtual void scale(Tensor& x, float s) = 0;

  // x = cap * tanh(x / cap) in place, in f32 then rounded to x's dtype
  // (Gemma's final-logit soft-capping). x is in the compute dtype or f32.
  virtual void softcap(Tensor& x, float cap) = 0;
  // Mixture-of-experts routing of T tokens over E experts: p = softmax(logits[t,:]),
  // then the k largest entries of p, in decreasing order (ties: the lower
  // expert id first), their ids to ids[t,:] and probabilities to weights[t,:];
  // with `renormalize`, weights[t,:] are divided by their sum. logits [T,E]
  // f32, ids [T,k] i32, weights [T,k] f32, 1 <= k <= E.
  virtual void moe_route(const Tensor& logits, bool renormalize, Tensor& ids, Tensor& weights) = 0;

  // Mixture-of-experts SwiGLU MLP over the routed experts of each token:
  // out[t,:] = sum_j weights[t,j] * down[e] @ (silu(g) * u), where e = ids[t,j]
  // and [g | u] = gate_up[e] @ x[t,:]. x [T,H]; gate_up [E, 2I, H] (each
  // expert's gate rows, then its up rows); down [E, H, I]; ids [T,k] i32 in
  // [0, E); weights [T,k] f32; out [T,H]. gate_up_scratch (cd, any shape)
  // holds at least moe_experts_scratch_bytes(T, k, H) bytes and act_scratch
  // [T*k, I] (cd); both are the backend's to overwrite.
  virtual void moe_experts(const Tensor& x, const Tensor& gate_up, const Tensor& down,
                           const Tensor& ids, const Tensor& weights, Tensor& gate_up_scratch,
                           Tensor& act_scratch, Tensor& out) = 0;

  // out[t,:] += sigmoid(dot(x[t,:], gate_w)) * y[t,:], the dot in f32
  // (Qwen2-MoE's gated shared expert). out, x, y [T,H]; gate_w [1,H].
  virtual void add_sigmoid_gated(Tensor& out, const Tensor& y, const Tensor& x,
                                 const Tensor& gate_w) = 0;

  // out[r,:] = x[indices[r],:]. x [T,H], indices [R], out [R,H].
  virtual void gather_rows(const Tensor& x, const Tensor& indices, Tensor& out) = 0;

  // Copies whole blocks within every layer's cache (copy-on-write):
  // block src[i] -> dst[i] in both k and v.
  virtual void copy_blocks(std::vector<KvCacheView>& caches, const std::vector<int32_t>& src,
                           const std::vector<int32_t>& dst) = 0;

  // Logits processing and sampling; see sampling_batch.h for the exact
  // semantics. logits [R, V] f32. sample_async() enqueues it and returns;
  // finish_sample(slot) waits for that sampling and fills `out` on the host.
  // Slots 0 and 1 have their own host buffers, so two pipelined steps may
  // each have a sampling outstanding; a slot's sampling must be finished
  // before the slot is used again. The device keeps the ids drawn by the
  // most recently enqueued sampling (any slot) for copy_sampled_tokens().
  virtual void sample_async(const Tensor& logits, const SamplingBatch& batch, int slot) = 0;
  virtual void finish_sample(int slot, SampleOutput& out) = 0;
  // sample_async + finish_sample on slot 0 (waits).
  void sample(const Tensor& logits, const SamplingBatch& batch, SampleOutput& out) {
    sample_async(logits, batch, 0);
    finish_sample(0, out);
  }

  // ids[rows[i]] = the token that the most recently enqueued sampling drew
  // for its row src_rows[i], for i < N: a pipelined step's inputs taken from
  // the previous step's samples without a trip through the host. rows and
  // src_rows [N] i32, ids [T] i32; rows must be < T and src_rows < that
  // sampling's R (out-of-range entries are skipped, a device backend fails).
  virtual void copy_sampled_tokens(const Tensor& rows, const Tensor& src_rows, Tensor& ids) = 0;

  // record_fence(slot) marks the work enqueued so far; wait_fence(slot)
  // returns once that work has run (a step without sampling waits on this).
  // Backends that run ops synchronously need neither.
  virtual void record_fence(int slot) {}
  virtual void wait_fence(int slot) {}

  // ---- graphs (optional) ----------------------------------------------------
  // Backends that can record a sequence of ops and replay it cheaply (CUDA
  // graphs) return true; `record` enqueues the ops to capture.
  // The first failure of an op since creation (ops return nothing; a device
  // backend keeps its first error here and does nothing on later calls). The
  // model runner checks it after every step.
  virtual Status status() const { return {}; }

  virtual bool supports_graphs() const { return false; }
  virtual int capture_graph(const std::function<void()>& record) { return -1; }
  virtual void replay_graph(int graph_id) {}
};

// Owns `bytes` of device memory from a backend; moves, never copies.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(Backend* backend, size_t bytes);
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(DeviceBuffer&& o) noexcept : backend_(o.backend_), ptr_(o.ptr_), bytes_(o.bytes_) {
    o.ptr_ = nullptr;
    o.bytes_ = 0;
  }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return ptr_; }
  size_t size() const { return bytes_; }
  void reset();
  Tensor tensor(DType dtype, std::initializer_list<int64_t> dims) const { return Tensor(ptr_, dtype, dims); }

 private:
  Backend* backend_ = nullptr;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace pagoda
