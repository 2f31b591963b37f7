// Paged causal attention over a ragged batch (prefill chunks and decode
// tokens mixed), GQA/MQA, head dims that are multiples of 8 up to 256.
//
// Three kernels; the launcher picks one per call from the host hints:
//
// Prefill kernel (attention_prefill.cuh), batches with max_query_len > 1
// and head_dim <= 128 (prefill chunks, mixed with any decode rows): the tile
// kernel's rows and math with 128-row CTA tiles (two m16 tiles per warp, so
// each K/V fragment feeds twice the mma), double-buffered 64-key K/V tiles
// (tile t + 1 loads while tile t computes, one barrier per tile), the causal
// mask only on tiles crossing the diagonal, heaviest m tiles first.
//
// Tile kernel (attention_kernel.cuh), every batch the other two do not
// take (head_dim > 128 prefill, decode batches with G > 16). A CTA owns
// one sequence s, one kv head and a tile of 64 "rows", where
// row r of sequence s is (query j = r / G, q head kv_head * G + r % G),
// G = Hq / Hkv; so every row of a CTA reads the same K/V and a decode step
// packs the G heads of a group into one tile. Four warps each own 16 rows;
// S = Q K^T and O += P V run on tensor cores (mma.sync m16n8k16, 16-bit
// inputs, f32 accumulation) with an online softmax (exp2, scores scaled by
// scale * log2 e). K/V tiles are gathered from the paged cache through the
// block table with cp.async, one tile in flight per CTA.
//
// Decode kernel (attention_decode.cuh; over an FP8 cache
// attention_decode_fp8.cuh, which converts K/V in registers), pure-decode
// batches (max_query_len == 1) with G <= kAttentionDecodeMaxGroup. A decode CTA of the tile kernel
// has only G real rows, so one warp of four works and one tile is in flight.
// Here a CTA = (sequence, kv head, split) has the G rows in one m16 tile that
// every warp shares, and its four warps split the keys instead (16-key tiles
// w, w + 4, ...), each with its own two-stage cp.async pipeline and online
// softmax; the four states are merged in shared memory at the end. Same math
// (tensor cores, exp2 online softmax, P rounded to the 16-bit type).
//
// Split-KV: when the grid would leave the GPU idle (decode, short batches,
// long contexts) the key range is split over several CTAs (flash-decoding)
// that write f32 partials (O, max, sum) to a workspace, and a combine kernel
// merges them (both kernels write the same partial layout).
//
// Scoring (all three kernels, in the shared online softmax): scale, or
// Gemma's soft-capping cap * tanh(scale * s / cap); a sliding window masks
// keys more than window - 1 positions behind the row's query; key tiles
// wholly before the window of a CTA's first row are skipped, so block-table
// entries before every row's window are never read (a sliding-window KV
// group releases those blocks: kNullBlock); a tile or split with no visible
// key adds nothing.
//
// Graph capture: grid sizes come from the host hints (num_seqs,
// max_query_len, max_seq_len); each CTA reads the real lengths on the device
// and covers any batch within those hints.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace pagoda::cuda {

struct AttentionParams {
  DType dtype = DType::kBF16;
  const void* qkv = nullptr;     // [num_tokens, row_width] = [q | k | v] heads
  int64_t num_tokens = 0;
  int64_t row_width = 0;
  int num_q_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;              // multiple of 8, <= 256
  const void* k_cache = nullptr; // [num_blocks, block_size, Hkv, D]
  const void* v_cache = nullptr;
  // The cache's element type: `dtype`, or kF8E4M3 (the FP8 cache, core/fp8.h):
  // the kernels then copy 8-bit K/V tiles to shared memory (half the bytes),
  // convert them exactly to `dtype` there, and apply the scales in f32:
  // k_scale folded into the score scale, v_scale into the output.
  DType kv_dtype = DType::kBF16;
  const float* kv_scales = nullptr;  // [2] f32 on the device (k_scale, v_scale); FP8 only
  // FP8 decode (the decode kernel over an FP8 cache): false (default) takes
  // the register-converting kernel (attention_decode_fp8.cuh) where
  // head_dim % 16 == 0 and the caches are 16-byte aligned; true, and every
  // other shape, the staged one (attention_decode.cuh). CudaBackend sets it
  // from PAGODA_FP8_KV_DECODE=old (A/B runs).
  bool fp8_decode_staged = false;
  int block_size = 0;
  int64_t num_blocks = 0;
  const int32_t* query_start_loc = nullptr;  // [num_seqs + 1]
  const int32_t* seq_lens = nullptr;         // [num_seqs]
  const int32_t* block_tables = nullptr;     // [num_seqs, max_blocks_per_seq]
  int max_blocks_per_seq = 0;
  int num_seqs = 0;
  int max_query_len = 0;
  int max_seq_len = 0;
  // Hint: the first num_decode_seqs sequences each have exactly one new
  // token (0 is always valid; nonzero must be exact). A mixed batch with
  // such a prefix runs it through the decode kernel and the rest through
  // the prefill (or tile) kernel: two launches over disjoint rows.
  int num_decode_seqs = 0;
  float scale = 1.0f;
  // Gemma: > 0: scores = softcap * tanh(scale q.k / softcap) before the
  // softmax; window > 0: a key more than window - 1 positions behind the
  // query is masked, and key tiles before the window are skipped (fully
  // masked tiles and splits contribute nothing).
  float softcap = 0.0f;
  int window = 0;
  void* out = nullptr;           // [num_tokens, Hq * D]
  // Set by the launcher (split-KV plan):
  int num_splits = 1;
  float* partial_out = nullptr;  // [num_tokens * Hq, num_splits, head_dim]
  float* partial_ml = nullptr;   // [num_tokens * Hq, num_splits, 2]: max (log2 units), sum
};

// Workspace the launcher may use for split-KV partials; sized once by the
// backend (the ops never allocate).
struct AttentionWorkspace {
  void* data = nullptr;
  size_t bytes = 0;
  int num_sms = 132;
};

// Validates p (returns cudaErrorInvalidValue for unsupported shapes),
// chooses the split count and launches the attention (and combine) kernels.
cudaError_t launch_paged_attention(const AttentionParams& p, const AttentionWorkspace& ws,
                                   cudaStream_t stream);

// Sets the dynamic shared-memory limit of every attention instantiation; call
// once before any launch (outside graph capture).
cudaError_t init_attention_kernels();

// Rows per CTA tile of the tile kernel; warps and keys per warp tile of the
// decode kernel, and the largest group (Hq / Hkv) it takes.
constexpr int kAttentionBlockM = 64;
constexpr int kAttentionDecodeWarps = 4;
constexpr int kAttentionDecodeBlockN = 16;
constexpr int kAttentionDecodeMaxGroup = 16;

// Whether launch_paged_attention runs the decode kernel for p (from the host
// hints: max_query_len == 1 and G <= kAttentionDecodeMaxGroup).
bool attention_uses_decode_kernel(const AttentionParams& p);

// Rows per CTA and keys per K/V tile of the prefill kernel.
constexpr int kAttentionPrefillBlockM = 128;
constexpr int kAttentionPrefillBlockN = 64;

// Whether launch_paged_attention runs the prefill kernel for p (from the host
// hints: max_query_len > 1, head_dim <= 128, at most 65535 row tiles of
// kAttentionPrefillBlockM, and every cache slot index below 2^31).
bool attention_uses_prefill_kernel(const AttentionParams& p);

// The split plan, exposed for tests and benchmarks.
int plan_attention_splits(const AttentionParams& p, const AttentionWorkspace& ws);

}  // namespace pagoda::cuda
