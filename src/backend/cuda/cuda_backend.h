// The CUDA backend (Hopper, sm_90a): every op of backend.h in bf16 or fp16
// with f32 accumulation, on one stream, capturable into CUDA graphs.
//
// Properties other code may rely on:
//  - Ops enqueue on the backend's stream and return at once; only
//    copy_to_host(), synchronize(), finish_sample() and wait_fence() wait.
//  - Ops never allocate device memory (workspaces are allocated at creation),
//    never synchronize, and read host-side shape hints only, so any sequence
//    of ops can be captured with capture_graph() and replayed.
//  - Tensors of an op share its dtype (bf16 or f16; the dtype is read from
//    the tensors, not from compute_dtype()), except: linear may write f32
//    (logits), rope's cos_sin and sample's logits are f32, index tensors i32,
//    embedding / gather_rows copy rows of any dtype.
//  - Ops return nothing, so a bad argument or a CUDA failure is logged and
//    kept as the backend's sticky status() (the first error); the op then
//    does nothing. Check status() after a step in tests and at startup.
//  - Calls must come from a thread on which the backend's device is current
//    (the factory makes it current on its calling thread; see make_current()).
//  - Not thread-safe: one engine thread drives it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/result.h"

struct CUstream_st;
struct CUevent_st;
struct CUgraphExec_st;

namespace pagoda {

namespace cuda {
class CublasLtLinear;
enum class Fp8Scales;  // cublaslt_linear.h
}

class CudaBackend final : public Backend {
 public:
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  DeviceKind kind() const override { return DeviceKind::kCuda; }
  std::string name() const override { return name_; }  // the GPU's name
  DType compute_dtype() const override { return compute_dtype_; }

  void* allocate(size_t bytes) override;  // cudaMalloc; nullptr on failure
  void deallocate(void* ptr) override;
  void* allocate_host(size_t bytes) override;  // pinned (cudaMallocHost)
  void deallocate_host(void* ptr) override;
  void copy_to_device(void* dst, const void* src, size_t bytes) override;
  void copy_to_device_2d(void* dst, size_t dst_pitch, const void* src, size_t src_pitch,
                         size_t row_bytes, size_t rows) override;  // one cudaMemcpy2DAsync
  void copy_to_host(void* dst, const void* src, size_t bytes) override;
  void copy_device(void* dst, const void* src, size_t bytes) override;
  void synchronize() override;
  void memory_info(size_t* free_bytes, size_t* total_bytes) override;

  void embedding(const Tensor& table, const Tensor& ids, int64_t first_row, Tensor& out) override;
  void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out) override;
  void add_rms_norm(Tensor& residual, const Tensor& x, const Tensor& w, float eps,
                    Tensor& out) override;
  void linear(const Tensor& x, const LinearWeight& w, const Tensor& bias, Tensor& out) override;
  // The _fp8 producers: the norm / silu_mul kernel quantises its own output
  // rows (norm_kernels.h, activation_kernels.h); linear_fp8_rows runs
  // linear_fp8's product from the given codes (cuda_fp8_linear.cpp).
  void rms_norm_fp8(const Tensor& x, const Tensor& w, float eps, Tensor& out, Fp8Rows& q) override;
  void add_rms_norm_fp8(Tensor& residual, const Tensor& x, const Tensor& w, float eps, Tensor& out,
                        Fp8Rows& q) override;
  void silu_mul_fp8(const Tensor& gate_up, Tensor& out, Fp8Rows& q) override;
  void linear_fp8_rows(const Fp8Rows& x, const LinearWeight& w, const Tensor& bias,
                       Tensor& out) override;
  void qk_norm(Tensor& qkv, const QkvLayout& layout, const Tensor& q_w, const Tensor& k_w,
               float eps) override;
  void rope(Tensor& qkv, const QkvLayout& layout, const Tensor& positions,
            const Tensor& cos_sin) override;
  void kv_write(const Tensor& qkv, const QkvLayout& layout, const Tensor& slots,
                KvCacheView& cache) override;
  // One kernel (rope_kv_kernels.h) with q/k norms and head_dim <= 256; the
  // calls (Backend's default) otherwise, without norms (rope + kv_write are
  // faster there) or with fused decode turned off (set_fused_decode).
  void qk_norm_rope_kv_write(Tensor& qkv, const QkvLayout& layout, const Tensor& q_w,
                             const Tensor& k_w, float eps, const Tensor& positions,
                             const Tensor& cos_sin, const Tensor& slots,
                             KvCacheView& cache) override;
  void paged_attention(const Tensor& qkv, const QkvLayout& layout, const KvCacheView& cache,
                       const AttentionMetadata& meta, const AttentionScoring& scoring,
                       Tensor& out) override;
  void silu_mul(const Tensor& gate_up, Tensor& out) override;
  void gelu_tanh_mul(const Tensor& gate_up, Tensor& out) override;
  void scale(Tensor& x, float s) override;
  void softcap(Tensor& x, float cap) override;
  void moe_route(const Tensor& logits, bool renormalize, Tensor& ids, Tensor& weights) override;
  // Fused: a decode path (<= 16 tokens) and a sorted grouped-GEMM path (moe_kernels.h).
  void moe_experts(const Tensor& x, const Tensor& gate_up, const Tensor& down, const Tensor& ids,
                   const Tensor& weights, Tensor& gate_up_scratch, Tensor& act_scratch,
                   Tensor& out) override;
  void add_sigmoid_gated(Tensor& out, const Tensor& y, const Tensor& x,
                         const Tensor& gate_w) override;
  void gather_rows(const Tensor& x, const Tensor& indices, Tensor& out) override;
  // Block ids out of range are skipped; a dst must not also be a src.
  void copy_blocks(std::vector<KvCacheView>& caches, const std::vector<int32_t>& src,
                   const std::vector<int32_t>& dst) override;
  // Tokens within one row's bias list (and within its penalty list) must be
  // unique. Top-K rows beyond a row's num_top_logprobs hold id -1 and logprob
  // NaN (like the CPU backend). max_top_logprobs <= 1024. sample_async
  // records the slot's fence after the results' download; finish_sample
  // waits for that fence only.
  void sample_async(const Tensor& logits, const SamplingBatch& batch, int slot) override;
  void finish_sample(int slot, SampleOutput& out) override;
  void copy_sampled_tokens(const Tensor& rows, const Tensor& src_rows, Tensor& ids) override;
  // cudaEventRecord / cudaEventSynchronize of the slot's event.
  void record_fence(int slot) override;
  void wait_fence(int slot) override;

  bool supports_graphs() const override { return true; }
  // Captures the ops `record` enqueues (thread-local capture mode) and
  // instantiates them; returns the graph id, or -1 (logged) on failure.
  // Inside `record`, copy_to_device must read pinned memory (allocate_host),
  // which each replay re-reads; copy_to_host, synchronize and sample fail.
  int capture_graph(const std::function<void()>& record) override;
  void replay_graph(int graph_id) override;

  // The first error since creation; ok while every call succeeded.
  Status status() const override { return status_; }
  void clear_status() { status_ = Status::Ok(); }
  int device() const { return device_; }
  // The stream every op is enqueued on (cudaStream_t), for timing and interop.
  CUstream_st* stream() const { return stream_; }
  int num_sms() const { return num_sms_; }
  // linear() with at most cuda::kGemvMaxRows rows uses the skinny-product
  // kernel (gemv_kernels.h) unless turned off here (benchmarks and tests
  // compare it with cuBLASLt). On by default.
  void set_skinny_linear(bool on) { skinny_linear_ = on; }
  // The fused op qk_norm_rope_kv_write runs its own kernel unless turned off
  // here (then it makes the unfused calls, the Backend default). On by
  // default; the environment variable PAGODA_FUSED_DECODE=0 turns it off at
  // creation (an A/B in one call).
  void set_fused_decode(bool on) { fused_decode_ = on; }
  // The decode kernels linear() with a block-dtype weight and 1..8 rows uses
  // (cuda_quant_linear.cpp): kStaged (the default) streams q8_0 / q4_0 /
  // q4_1 through shared memory (quant_staged_gemv.cu) and the rest as
  // kUnstaged; kUnstaged the tensor-core kernel reading the blocks directly
  // (quant_mma_gemv.cu; one row of q8_0 / q4_0 / q4_1 on the CUDA cores);
  // kLegacy only the CUDA-core kernels; kStagedV1 as kStaged with the
  // staged kernel's first schedule (cuda::StagedPlan::kDoubleBuffered).
  // PAGODA_QUANT_GEMV=unstaged, =legacy or =staged-v1 in the environment
  // picks one at creation (A/B timing).
  enum class QuantDecode { kStaged, kUnstaged, kLegacy, kStagedV1 };
  void set_quant_decode(QuantDecode d) { quant_decode_ = d; }
  QuantDecode quant_decode() const { return quant_decode_; }
  // Block-dtype linear with kQuantGemvMaxRows + 1 .. kQuantWideRouteMaxRows
  // rows (batch 9..32): on by default the tensor-core kernel keeping the weight
  // in blocks (launch_quant_mma_wide); off, the weight is dequantized and
  // multiplied by cuBLASLt as for more rows. PAGODA_QUANT_WIDE=dequant in
  // the environment turns it off at creation (A/B timing).
  void set_quant_wide(bool on) { quant_wide_ = on; }
  bool quant_wide() const { return quant_wide_; }
  // Block-dtype linear where cuda::quant_tiled_route says so (33..64 rows,
  // >= 16384 output features): on by default the tiled tensor-core GEMM keeping the
  // weight in blocks (launch_quant_tiled_gemm, its formats); off, the
  // weight is dequantized in chunks and multiplied by cuBLASLt.
  // PAGODA_QUANT_TILED=0 in the environment turns it off at creation (A/B).
  void set_quant_tiled(bool on) { quant_tiled_ = on; }
  bool quant_tiled() const { return quant_tiled_; }
  // Batch-1 FP8 linear: off by default the quantise kernel runs before the
  // decode kernel; on, the decode kernel quantises its own 16-bit row
  // (cuda_fp8_linear.cpp; same codes, same result). Every CTA re-quantises
  // the row, and on an H100 the 8B W1 step took 4.60 ms that way vs 4.02.
  // PAGODA_FP8_OWN_ROW=1 in the environment turns it on at creation (A/B).
  void set_fp8_own_row(bool on) { fp8_own_row_ = on; }
  bool fp8_own_row() const { return fp8_own_row_; }
  // FP8 linears of more than 8 rows: on (the default), cuBLASLt applies the
  // scales itself and writes the 16-bit output (outer-vector scales for
  // per-row weights, 128x128 block / 1x128 group scales for block-128
  // weights; cuda_fp8_linear.cpp); off, or where cuBLASLt refuses, the
  // unscaled f32 GEMM and the scaling epilogue (per-row) or pagoda's FP8 GEMM
  // (blocks). PAGODA_FP8_LT_SCALES=0 in the environment turns it off at
  // creation (A/B).
  void set_fp8_lt_scales(bool on) { fp8_lt_scales_ = on; }
  bool fp8_lt_scales() const { return fp8_lt_scales_; }
  // The cuBLASLt scale mode an FP8 linear of `rows` rows of w with this bias
  // and output dtype takes (kNone: the other paths), before cuBLASLt is
  // asked; num_fp8_lt_refusals() counts the calls it then refused (each
  // fell back; cuda_fp8_linear.cpp).
  cuda::Fp8Scales fp8_lt_mode(const LinearWeight& w, int64_t rows, const Tensor& bias,
                              DType out_dtype) const;
  int64_t num_fp8_lt_refusals() const { return num_fp8_lt_refusals_; }
  // Decode attention over an FP8 KV cache: off by default the kernel that
  // converts K/V in registers (attention_decode_fp8.cuh); on, the staged one
  // that converts each tile into 16-bit tiles in shared memory
  // (attention_decode.cuh). PAGODA_FP8_KV_DECODE=old in the environment turns
  // it on at creation (A/B timing).
  void set_fp8_kv_decode_staged(bool on) { fp8_kv_decode_staged_ = on; }
  bool fp8_kv_decode_staged() const { return fp8_kv_decode_staged_; }
  // moe_experts' decode path (<= 16 tokens): off by default the v2 kernels
  // (moe_decode_v2.cu: one wave of resident blocks); on, the v1 kernels
  // (moe_decode.cu: a block per output tile; the same bits).
  // PAGODA_MOE_DECODE=v1 in the environment turns it on at creation (A/B).
  void set_moe_decode_v1(bool on) { moe_decode_v1_ = on; }
  bool moe_decode_v1() const { return moe_decode_v1_; }
  // Grows the dequantization scratch for a block-dtype weight: the linear of
  // rows no kernel above takes (cuda_quant_linear.cpp: more than
  // 32 outside cuda::quant_tiled_route or the tiled GEMM's formats,
  // or with the wide / tiled kernels off) dequantizes w in chunks of rows
  // (a multiple of 64 rows, about 16 Mi elements) to the compute dtype and runs
  // cuBLASLt on each chunk (cuda_quant_linear.cpp); a _perm group format
  // (GPTQ act order) also grows the scratch its decode gathers x into.
  // A 4-bit group weight with N % 16 == 0 and K % 64 == 0
  // (cuda::w4_tiles_apply) is also repacked in place into the tile layout
  // (cuda/w4_tiles.h) and remembered until the allocation of allocate()
  // holding it is deallocated: linear() then reads it through the tile
  // kernels, and nothing else may read its bytes.
  Status prepare_block_weight(const Tensor& w) override;
  // prepare_block_weight repacks 4-bit group weights into the tile layout:
  // on by default; off (PAGODA_W4_TILES=0 in the environment at creation)
  // they keep the row-of-blocks layout and its kernels (A/B timing).
  void set_w4_tiles(bool on) { w4_tiles_ = on; }
  bool w4_tiles() const { return w4_tiles_; }
  // Whether w's bytes lie in a weight prepare_block_weight repacked into
  // the tile layout.
  bool in_w4_tiles(const Tensor& w) const;
  // Checks an FP8 weight (backend/linear_weight.h) and grows the FP8
  // scratch it needs: activation codes and scales for a chunk of rows, and
  // for cuBLASLt's FP8 GEMM its f32 product (cuda_fp8_linear.cpp). Errors: a
  // block that is not a multiple of 16, out of device memory.
  Status prepare_fp8_weight(const LinearWeight& w) override;
  // Makes the backend's device current on the calling thread.
  void make_current();

 private:
  struct Buffer {  // a device or pinned allocation that grows on demand
    void* ptr = nullptr;
    size_t bytes = 0;
  };
  struct W4TileWeight {  // a weight in the 4-bit tile layout (cuda/w4_tiles.h)
    size_t bytes = 0;    // its N rows' (a _perm permutation after them is not repacked)
    DType dtype = DType::kW4G128;
    int64_t k = 0;
  };

  CudaBackend() = default;
  friend std::unique_ptr<Backend> create_cuda_backend(int device, DType compute_dtype,
                                                      std::string* why);
  Status init(int device, DType compute_dtype);

  // Records (first error) and logs a failure; clears CUDA's last error.
  void fail(const std::string& message);
  // fail() unless e is cudaSuccess; returns e == cudaSuccess.
  bool check(int cuda_error, const char* what);
  // rms_norm (residual null) or add_rms_norm, with q: also out's FP8 codes.
  void norm_rows(Tensor* residual, const Tensor& x, const Tensor& w, float eps, Tensor& out,
                 Fp8Rows* q);
  // silu_mul (gelu_tanh false) or gelu_tanh_mul, with q: also out's FP8
  // codes; scale (cap 0) or softcap.
  void glu(const Tensor& gate_up, Tensor& out, bool gelu_tanh, Fp8Rows* q = nullptr);
  void scale_or_cap(Tensor& x, float s, float cap);
  // Repacks w (w4_tiles_apply) into the tile layout through the
  // dequantization scratch and remembers it (cuda_quant_linear.cpp).
  Status repack_w4_tiles(const Tensor& w);
  // The tile-layout weight p lies in; end() when none.
  std::map<const void*, W4TileWeight>::const_iterator w4_tiles_at(const void* p) const;
  // Whether w (in_w4_tiles) is whole 16-row tiles of the weight it lies in,
  // in its format and K.
  bool w4_tile_view_ok(const Tensor& w) const;
  // linear() with a block-dtype w (cuda_quant_linear.cpp).
  void linear_blocks(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& out);
  // linear() with an FP8 w (cuda_fp8_linear.cpp).
  void linear_fp8(const Tensor& x, const LinearWeight& w, const Tensor& bias, Tensor& out);
  // The FP8 product of nr quantised rows (codes [nr, K], scales [nr, groups])
  // into out_rows [nr, N] (cuda_fp8_linear.cpp); false after a failure.
  bool fp8_product(const uint8_t* codes, const float* scales, int64_t nr, const LinearWeight& w,
                   const Tensor& bias, char* out_rows, DType out_dtype);
  // The FP8 product of nr quantised rows through cuBLASLt's scale `mode`
  // (codes [nr, K]; scales [nr] for kOuterVec, [groups, nr] for kBlock128)
  // into out_rows [nr, N]; false where cuBLASLt refused (counted, logged once).
  bool fp8_lt_scaled(const uint8_t* codes, const float* scales, int64_t nr, const LinearWeight& w,
                     const Tensor& bias, char* out_rows, DType out_dtype, cuda::Fp8Scales mode);
  // Whether prepare_fp8_weight(w) sized the scratch for `rows` rows (the
  // activation codes too when `codes`).
  bool fp8_prepared(const LinearWeight& w, int64_t rows, bool codes) const;
  // Reallocates b to `bytes` when it is smaller (contents lost).
  static Status grow(Buffer& b, size_t bytes, const char* what);

  // Sampling helpers (cuda_sample.cpp).
  bool ensure_device(Buffer& b, size_t bytes);
  bool ensure_pinned(Buffer& b, size_t bytes);
  void free_sample_buffers();

  int device_ = 0;
  int num_sms_ = 0;
  DType compute_dtype_ = DType::kBF16;
  std::string name_;
  CUstream_st* stream_ = nullptr;
  std::unique_ptr<cuda::CublasLtLinear> linear_;
  Buffer dequant_scratch_;  // [chunk rows, K] compute dtype (prepare_block_weight)
  Buffer gather_scratch_;   // [kQuantGemvMaxRows, K] 16-bit: x gathered by a K permutation
  Buffer fp8_codes_;        // [chunk rows, K] e4m3 activation codes (prepare_fp8_weight)
  Buffer fp8_scales_;       // [chunk rows, groups] f32 activation scales
  Buffer fp8_acc_;          // [chunk rows, N] f32 unscaled FP8 GEMM product
  void* attention_workspace_ = nullptr;
  size_t attention_workspace_bytes_ = 0;
  std::vector<CUgraphExec_st*> graphs_;
  bool capturing_ = false;
  bool skinny_linear_ = true;
  bool fused_decode_ = true;
  QuantDecode quant_decode_ = QuantDecode::kStaged;
  bool quant_wide_ = true;
  bool quant_tiled_ = true;
  bool w4_tiles_ = true;
  // Weights in the 4-bit tile layout by allocation start (prepare_block_weight
  // adds, deallocate removes).
  std::map<const void*, W4TileWeight> w4_tile_weights_;
  // Bytes of each live allocate() allocation: deallocate forgets the tile
  // weights inside it.
  std::map<const void*, size_t> allocation_bytes_;
  bool fp8_own_row_ = false;
  bool fp8_kv_decode_staged_ = false;
  bool moe_decode_v1_ = false;
  bool fp8_gemm_refused_ = false;  // cuBLASLt refused the FP8 GEMM once (cuda_fp8_linear.cpp)
  bool fp8_lt_scales_ = true;
  int64_t num_fp8_lt_refusals_ = 0;
  Status status_;
  int num_errors_logged_ = 0;

  // Sampling: device inputs / results / scratch rows (stream-ordered, so one
  // of each serves both slots), the cross-CTA scratch of rows split over
  // several CTAs (sized for the device, zeroed once), and per slot the pinned
  // mirrors, the shape finish_sample unpacks and the fence event.
  struct SampleSlot {
    Buffer in_host, out_host;
    size_t num_rows = 0, width = 0;
    bool downloaded = false;  // the results' download was enqueued
  };
  Buffer sample_in_dev_, sample_out_dev_, sample_scratch_, sample_group_;
  std::array<SampleSlot, kNumStepSlots> sample_slots_;
  int last_sample_rows_ = 0;  // rows of the latest enqueued sampling (copy_sampled_tokens)
  std::array<CUevent_st*, kNumStepSlots> fences_{};
};

// A CUDA backend on `device` computing in `compute_dtype` (kBF16 or kF16);
// nullptr when there is no such GPU, the dtype is not supported or
// initialisation fails: the reason goes to `why` when given (the caller
// decides whether it is an error, e.g. --device auto falls back to the CPU),
// else to the log as an error.
std::unique_ptr<Backend> create_cuda_backend(int device, DType compute_dtype,
                                             std::string* why = nullptr);

// CUDA devices visible to this process; 0 when there are none or the driver
// cannot be queried (the reason goes to `why` when given).
int cuda_device_count(std::string* why = nullptr);

}  // namespace pagoda
