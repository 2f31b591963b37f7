// The sampling kernel: a group of G CTAs of sampling::kThreads per logits
// row (sampling_group.cuh), each CTA over its chunk of the vocabulary. Every
// step mirrors the CPU reference (cpu_sampling.cpp) operation by operation,
// including its f64 sums and its rounding points (no FMA contraction in the
// penalty arithmetic), so that unambiguous draws agree exactly.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/kernel_launch.cuh"
#include "backend/cuda/sampling_block.cuh"
#include "backend/cuda/sampling_candidates.cuh"
#include "backend/cuda/sampling_group.cuh"
#include "backend/cuda/sampling_kernels.h"
#include "core/philox.h"

namespace pagoda::cuda {
namespace {

using sampling::Candidate;
using sampling::kThreads;
using sampling::MaxOp;
using sampling::order_key;
using sampling::row_reduce;
using sampling::RowGroup;
using sampling::RowRef;
using sampling::SumOp;
using sampling::Threshold;

constexpr int kNoCrossing = 0x7fffffff;
// Smallest chunk of the automatic split (tokens per CTA).
constexpr int64_t kMinChunk = 4096;
static_assert(kMaxSampleGroups <= sampling::kMaxGroupSize);

// How a launch splits rows: `groups` CTAs per row over chunks of `chunk`
// tokens (the last chunk shorter), and the group scratch (null when
// groups == 1).
struct GroupLaunch {
  int groups = 1;
  int64_t chunk = 0;
  bool fewer_passes = true;      // sample_fewer_passes(); false: the old passes
  unsigned* counters = nullptr;  // [rows][2]
  uint4* values = nullptr;       // [rows * groups][2]
  double* hist = nullptr;        // [rows * groups][2][256]
  uint2* top = nullptr;          // [rows][kMaxTopLogprobs]
};

__device__ RowGroup make_group(const GroupLaunch& gl, int r, int g, int64_t vocab) {
  RowGroup rg;
  rg.g = g;
  rg.size = gl.groups;
  rg.lo = static_cast<int64_t>(g) * gl.chunk;
  rg.hi = min(vocab, rg.lo + gl.chunk);
  if (gl.groups > 1) {
    rg.counters = gl.counters + 2 * static_cast<int64_t>(r);
    rg.values = gl.values + 2 * static_cast<int64_t>(r) * gl.groups;
    rg.hist = gl.hist + 512 * static_cast<int64_t>(r) * gl.groups;
    rg.top = gl.top + static_cast<int64_t>(r) * kMaxTopLogprobs;
  }
  return rg;
}

// The row's statistics: the raw log-sum-exp (max in f32, sum of exp in f64,
// like the CPU); for a greedy row the first index of the maximum of proc
// (lowest id on ties); for a sampled row the max of y = proc / T and the f64
// sum of f32 exp(y - y_max). The maxima (and the greedy pick) share one
// exchange between the row's CTAs, and so do the two sums.
struct RowStats {
  double lse = 0.0;
  float raw_max = -INFINITY;
  int32_t greedy_token = -1;
  float y_max = -INFINITY;
  double y_sum = 0.0;
  int32_t race_token = -1;  // the fused race's winner; -1: none (draw_token() decides)
};

// The fused race of a plain sampled row (no top_k / top_p): the exponential
// race of draw_token(), argmax over min_p-kept tokens of the score
// p / e (p = f32(f64(q) / y_sum), q = expf(y - y_max), e = -logf(u_t)),
// decided in row_stats()' pass of the sums, before y_sum is known, from
// a = f32(q / e). Both are within a few f32 roundings of (q / e) / y_sum
// and (q / e), so score_t / score_m lies within (1 +- 4 * 2^-24) of
// a_t / a_m: a token whose a is below A * kRaceWindow, A the largest a of a
// surely kept token, scores strictly less than that token. Each thread keeps
// its two largest a; the race is decided exactly (draw_token()'s formulas
// and tie rule over the threads' best tokens within the window) unless a
// thread's second, or a token at min_p's edge (q within 2^-20 of min_p,
// kept or not by rounding), reaches the window: then draw_token() runs its
// pass. Rows whose min_p is in (0, 1e-20) (p at min_p's cut could be
// subnormal, the bounds lost) or above 1 keep draw_token().
constexpr float kRaceWindow = 1.0f - 0x1p-20f;
constexpr float kRaceEdge = 0x1p-20f;

struct RaceOutcome {
  Candidate best;
  int ambiguous;
};
struct RaceOp {
  __device__ __forceinline__ RaceOutcome operator()(RaceOutcome a, RaceOutcome b) const {
    return RaceOutcome{sampling::better(a.best, b.best), max(a.ambiguous, b.ambiguous)};
  }
};

// What the fused race needs of the row (by value: a pointer to the row's
// settings would put them in local memory).
struct RaceParams {
  bool on = false;  // a plain row, fused_race_applies()
  float min_p = 0.0f;
  uint64_t seed = 0, step = 0;
};

__device__ __forceinline__ bool fused_race_applies(const SampleRowParams& rp, int64_t vocab) {
  return !(rp.temperature < kGreedyTemperature) && !sample_row_narrows(rp, vocab) &&
         (rp.min_p == 0.0f || (rp.min_p >= 1e-20f && rp.min_p <= 1.0f));
}

struct Maxima {
  float raw, y;
  Candidate best;
};
struct MaximaOp {
  __device__ __forceinline__ Maxima operator()(Maxima a, Maxima b) const {
    return Maxima{MaxOp{}(a.raw, b.raw), MaxOp{}(a.y, b.y), sampling::better(a.best, b.best)};
  }
};
struct Sum2Op {
  __device__ __forceinline__ double2 operator()(double2 a, double2 b) const {
    return make_double2(a.x + b.x, a.y + b.y);
  }
};

// race.on: the fused race decides the row (a plain row, fused_race_applies()).
__device__ RowStats row_stats(const float* x, RowRef proc, float temperature, bool greedy,
                              RaceParams race, RowGroup& rg) {
  Maxima mx{-INFINITY, -INFINITY, Candidate{-INFINITY, -1}};
  sampling::sweep2(rg, x, proc, [&](int64_t t, float xt, float v) {
    mx.raw = fmaxf(mx.raw, xt);
    if (greedy) {
      if (mx.best.id < 0 || v > mx.best.score) mx.best = Candidate{v, static_cast<int32_t>(t)};
    } else {
      mx.y = fmaxf(mx.y, __fdiv_rn(v, temperature));
    }
  });
  mx.raw = sampling::block_reduce(mx.raw, MaxOp{});
  if (greedy) {
    mx.best = sampling::block_best(mx.best);
  } else {
    mx.y = sampling::block_reduce(mx.y, MaxOp{});
  }
  mx = sampling::group_reduce(rg, mx, MaximaOp{});
  double s = 0.0, y_sum = 0.0;
  // The fused race: this thread's two largest a over surely kept tokens
  // (a1 of token id1), and its largest at min_p's edge.
  float a1 = -1.0f, a2 = -1.0f, edge = -1.0f;
  int32_t id1 = -1;
  const float min_p = race.min_p;
  const float keep_hi = __fmul_rn(min_p, 1.0f + kRaceEdge);
  const float keep_lo = __fmul_rn(min_p, 1.0f - kRaceEdge);
  sampling::sweep2(rg, x, proc, [&](int64_t t, float xt, float v) {
    s += exp(static_cast<double>(xt) - mx.raw);
    if (greedy) return;
    const float q = expf(__fsub_rn(__fdiv_rn(v, temperature), mx.y));
    y_sum += static_cast<double>(q);
    if (!race.on) return;
    const float a =
        __fdiv_rn(q, -logf(philox_uniform(race.seed, race.step, static_cast<uint64_t>(t))));
    if (q >= keep_hi) {
      if (a > a1) {
        a2 = a1;
        a1 = a;
        id1 = static_cast<int32_t>(t);
      } else {
        a2 = fmaxf(a2, a);
      }
    } else if (q >= keep_lo) {
      edge = fmaxf(edge, a);
    }
  });
  const double2 sums = sampling::group_reduce(
      rg, make_double2(sampling::block_reduce(s, SumOp{}), sampling::block_reduce(y_sum, SumOp{})),
      Sum2Op{});
  RowStats st;
  if (race.on && isfinite(mx.y) && isfinite(sums.y) && sums.y > 0.0) {
    const float a_max = row_reduce(rg, a1, MaxOp{});
    const float window = __fmul_rn(a_max, kRaceWindow);
    RaceOutcome mine{Candidate{-1.0f, -1}, a2 >= window || edge >= window ? 1 : 0};
    if (id1 >= 0 && a1 >= window) {  // draw_token()'s score, exactly
      const float y = __fdiv_rn(proc[id1], temperature);
      const float pr =
          static_cast<float>(static_cast<double>(expf(__fsub_rn(y, mx.y))) / sums.y);
      const float min_p_cut = __fmul_rn(min_p, static_cast<float>(1.0 / sums.y));
      if (min_p > 0.0f && pr < min_p_cut) mine.ambiguous = 1;  // not kept after all
      const float e = -logf(philox_uniform(race.seed, race.step, static_cast<uint64_t>(id1)));
      mine.best = Candidate{pr / e, id1};
    }
    const RaceOutcome block{sampling::block_best(mine.best),
                            sampling::block_reduce(mine.ambiguous, MaxOp{})};
    const RaceOutcome row = sampling::group_reduce(rg, block, RaceOp{});
    if (a_max > 0.0f && row.ambiguous == 0) st.race_token = row.best.id;
  }
  st.lse = static_cast<double>(mx.raw) + log(sums.x);
  st.raw_max = mx.raw;
  st.greedy_token = mx.best.id;
  st.y_max = mx.y;
  st.y_sum = sums.y;
  return st;
}

// A greedy row's statistics in one pass (fewer_passes): the first index of
// the maximum of proc, and the raw log-sum-exp as an online f64 sum (each
// thread keeps sum exp(x - m) for its own running max m, rescaled by
// exp(m_old - m_new) when m grows, and by exp(m - max) at the end). It
// differs from row_stats' two-pass sum only by f64 rounding (~1e-16
// relative), the same class of difference as row_stats' summation order
// against the CPU's; a row whose max is -inf gets lse NaN as there.
__device__ RowStats greedy_stats(const float* x, RowRef proc, RowGroup& rg) {
  float m = -INFINITY;
  double s = 0.0;
  Candidate best{-INFINITY, -1};
  auto visit = [&](int64_t t, float xt, float v) {
    if (xt > m) {
      s = m == -INFINITY ? 0.0 : s * exp(static_cast<double>(m) - static_cast<double>(xt));
      m = xt;
    }
    if (xt != -INFINITY) s += exp(static_cast<double>(xt) - static_cast<double>(m));
    if (best.id < 0 || v > best.score) best = Candidate{v, static_cast<int32_t>(t)};
  };
  if (proc.is(x)) {
    sampling::sweep_vec4(rg, x, [&](int64_t t, float xt) { visit(t, xt, xt); });
  } else {
    sampling::sweep2(rg, x, proc, visit);
  }
  Maxima mx{sampling::block_reduce(m, MaxOp{}), -INFINITY, sampling::block_best(best)};
  mx = sampling::group_reduce(rg, mx, MaximaOp{});
  const double scaled =
      m == -INFINITY ? 0.0 : s * exp(static_cast<double>(m) - static_cast<double>(mx.raw));
  const double sum = row_reduce(rg, scaled, SumOp{});
  RowStats st;
  st.lse = mx.raw == -INFINITY ? NAN : static_cast<double>(mx.raw) + log(sum);
  st.raw_max = mx.raw;
  st.greedy_token = mx.best.id;
  return st;
}

__device__ __forceinline__ float raw_logprob(float xt, double lse) {
  return static_cast<float>(static_cast<double>(xt) - lse);
}

// Whether the row has bias or penalty lists (a processed row in scratch).
__device__ __forceinline__ bool has_lists(const SampleRowParams& rp) {
  return rp.bias_end > rp.bias_begin || rp.penalty_end > rp.penalty_begin;
}

// Steps 0-2 (mask, bias, then penalties): the row to sample from (valid
// over the CTA's chunk). A row with bias or penalties (or, with
// !mask_on_the_fly, a mask) is processed into `scratch` (the row's); a
// mask-only row is x read through its mask (RowRef), the same values
// without the copy; a row with neither is x. Tokens must be unique within
// each list.
__device__ RowRef processed_row(const SampleParams& p, const SampleRowParams& rp, const float* x,
                                float* scratch, const RowGroup& rg, bool mask_on_the_fly) {
  const bool masked = rp.mask_begin >= 0;
  if (!has_lists(rp) && (!masked || mask_on_the_fly))
    return RowRef(x, masked ? p.allowed_words + rp.mask_begin : nullptr);
  if (masked) {
    const uint32_t* words = p.allowed_words + rp.mask_begin;
    for (int64_t t = rg.lo + threadIdx.x; t < rg.hi; t += kThreads)
      scratch[t] = ((words[t >> 5] >> (t & 31)) & 1u) != 0 ? x[t] : -INFINITY;
  } else {
    for (int64_t t = rg.lo + threadIdx.x; t < rg.hi; t += kThreads) scratch[t] = x[t];
  }
  __syncthreads();
  for (int i = rp.bias_begin + threadIdx.x; i < rp.bias_end; i += kThreads) {
    const int32_t tok = p.bias_tokens[i];
    if (tok >= rg.lo && tok < rg.hi) scratch[tok] = __fadd_rn(scratch[tok], p.bias_values[i]);
  }
  __syncthreads();
  for (int i = rp.penalty_begin + threadIdx.x; i < rp.penalty_end; i += kThreads) {
    const int32_t tok = p.penalty_tokens[i];
    if (tok < rg.lo || tok >= rg.hi) continue;
    const int32_t c = p.penalty_counts[i];
    float v = scratch[tok];
    if (rp.repetition_penalty != 1.0f && (c > 0 || p.penalty_in_prompt[i] != 0)) {
      v = v > 0.0f ? __fdiv_rn(v, rp.repetition_penalty) : __fmul_rn(v, rp.repetition_penalty);
    }
    const float sub = __fadd_rn(__fmul_rn(rp.frequency_penalty, static_cast<float>(c)),
                                __fmul_rn(rp.presence_penalty, c > 0 ? 1.0f : 0.0f));
    scratch[tok] = __fsub_rn(v, sub);
  }
  __syncthreads();
  return scratch;
}

// First index of the maximum of f(t) over the row (lowest id on ties).
template <typename F>
__device__ int32_t row_argmax(F f, RowGroup& rg) {
  Candidate best{-INFINITY, -1};
  for (int64_t t = rg.lo + threadIdx.x; t < rg.hi; t += kThreads) {
    const float v = f(t);
    if (best.id < 0 || v > best.score) best = Candidate{v, static_cast<int32_t>(t)};
  }
  return sampling::group_best(rg, best).id;
}

// Step 4: temperature, min_p, top_k, top_p and the exponential race.
// fewer_passes: the top_k select skips min_p's probability (an expf and an
// f64 division per token per pass) when min_p is off; the same set.
__device__ int32_t draw_token(const SampleRowParams& rp, RowRef proc, int64_t vocab,
                              const RowStats& st, RowGroup& rg, sampling::SelectShared& sh,
                              bool fewer_passes) {
  const float temperature = rp.temperature;
  auto scaled = [&](float v) { return __fdiv_rn(v, temperature); };
  const float y_max = st.y_max;
  const double y_sum = st.y_sum;
  auto prob = [&](float y) {
    return static_cast<float>(static_cast<double>(expf(__fsub_rn(y, y_max))) / y_sum);
  };
  const float min_p_cut = __fmul_rn(rp.min_p, static_cast<float>(1.0 / y_sum));
  auto keep_min_p = [&](float pr) { return !(rp.min_p > 0.0f && pr < min_p_cut); };

  Threshold top_k;  // selects everything unless top_k is active
  if (rp.top_k > 0 && rp.top_k < vocab) {
    top_k = sampling::group_select(
        [&](int64_t, float v, uint32_t& key, double& w) {
          const float y = scaled(v);
          key = order_key(y);
          w = 1.0;
          if (fewer_passes && !(rp.min_p > 0.0f)) return true;
          return keep_min_p(prob(y));
        },
        proc, rg, static_cast<double>(rp.top_k), sh);
  }
  // kept(t) after min_p and top_k, given v = proc[t]; sets p of the token.
  auto kept_k = [&](int64_t t, float v, float& pr) {
    const float y = scaled(v);
    pr = prob(y);
    return keep_min_p(pr) && top_k.selects(order_key(y), static_cast<int32_t>(t));
  };
  Threshold top_p;
  if (rp.top_p < 1.0f) {
    double total = 0.0;
    sampling::sweep(rg, proc, [&](int64_t t, float v) {
      float pr;
      if (kept_k(t, v, pr)) total += pr;
    });
    total = row_reduce(rg, total, SumOp{});
    const double target = fmax(static_cast<double>(rp.top_p) * total, 1e-300);
    top_p = sampling::group_select(
        [&](int64_t t, float v, uint32_t& key, double& w) {
          float pr;
          const bool keep = kept_k(t, v, pr);
          key = order_key(pr);
          w = pr;
          return keep;
        },
        proc, rg, target, sh);
  }
  Candidate best{-1.0f, -1};
  sampling::sweep(rg, proc, [&](int64_t t, float v) {
    float pr;
    if (!kept_k(t, v, pr) || !top_p.selects(order_key(pr), static_cast<int32_t>(t))) return;
    const float e = -logf(philox_uniform(rp.seed, rp.step, static_cast<uint64_t>(t)));
    const float score = pr / e;
    if (score > best.score) best = Candidate{score, static_cast<int32_t>(t)};
  });
  const int32_t token = sampling::group_best(rg, best).id;
  return token >= 0 ? token : row_argmax([&](int64_t t) { return scaled(proc[t]); }, rg);
}

// 1 + number of tokens whose raw logprob is strictly larger than token's.
__device__ int32_t raw_rank(const float* x, double lse, RowGroup& rg, int32_t token) {
  const float lp = raw_logprob(x[token], lse);
  int count = 0;
  sampling::sweep(rg, x, [&](int64_t, float xt) { count += raw_logprob(xt, lse) > lp ? 1 : 0; });
  return 1 + row_reduce(rg, count, SumOp{});
}

// row_stats() of a sampled row in the candidate path (one CTA per row):
// the same values (y_max = proc_max / T, as division by T > 0 is monotone),
// and, in the pass of the sums, hist[b] = the tokens of distance bin b
// (sampling_candidates.cuh) below y_max (shared atomics; the last bin, where
// most tokens of a peaked row fall, is the row's rest, not counted, less
// its tokens at y = -inf: masked or impossible tokens, never candidates).
// hist: kDistanceBins ints of shared memory.
__device__ RowStats candidate_stats(const float* x, RowRef proc, float temperature,
                                    RowGroup& rg, int* hist) {
  for (int i = threadIdx.x; i < sampling::kDistanceBins; i += kThreads) hist[i] = 0;
  float m = -INFINITY, v_max = -INFINITY;
  if (proc.is(x)) {
    sampling::sweep_vec4(rg, x, [&](int64_t, float xt) { m = fmaxf(m, xt); });
    v_max = m;
  } else {
    sampling::sweep2(rg, x, proc, [&](int64_t, float xt, float v) {
      m = fmaxf(m, xt);
      v_max = fmaxf(v_max, v);
    });
  }
  const float raw_max = row_reduce(rg, m, MaxOp{});  // barriers: hist is cleared
  const float y_max = __fdiv_rn(row_reduce(rg, v_max, MaxOp{}), temperature);
  double s = 0.0, y_sum = 0.0;
  int impossible = 0;
  auto visit = [&](float xt, float v) {
    s += exp(static_cast<double>(xt) - raw_max);
    const float y = __fdiv_rn(v, temperature);
    impossible += y == -INFINITY ? 1 : 0;
    y_sum += static_cast<double>(expf(__fsub_rn(y, y_max)));
    // The last bin (often most of a peaked row) is counted as the rest below.
    const int b = sampling::distance_bin(__fsub_rn(y_max, y));
    if (b < sampling::kDistanceBins - 1) atomicAdd(&hist[b], 1);
  };
  if (proc.is(x)) {
    sampling::sweep_vec4(rg, x, [&](int64_t, float xt) { visit(xt, xt); });
  } else {
    sampling::sweep2(rg, x, proc, [&](int64_t, float xt, float v) { visit(xt, v); });
  }
  RowStats st;
  st.lse = static_cast<double>(raw_max) + log(row_reduce(rg, s, SumOp{}));
  st.raw_max = raw_max;
  st.y_max = y_max;
  st.y_sum = row_reduce(rg, y_sum, SumOp{});  // barriers: the atomics are done
  impossible = row_reduce(rg, impossible, SumOp{});
  if (threadIdx.x < 32) {
    int counted = 0;
    for (int i = threadIdx.x; i < sampling::kDistanceBins - 1; i += 32) counted += hist[i];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) counted += __shfl_xor_sync(0xffffffffu, counted, o);
    if (threadIdx.x == 0)
      hist[sampling::kDistanceBins - 1] = static_cast<int>(rg.hi - rg.lo) - counted - impossible;
  }
  __syncthreads();
  return st;
}

// A token drawn by the candidate path and its rank (0: not known here).
struct CandidateDraw {
  int32_t token = -1;  // -1: the path could not decide; draw_token() does
  int32_t rank = 0;
};

// draw_token() for a narrowing row with one CTA, over the row's candidates
// only: from the distance histogram of candidate_stats() a cut that should
// keep every token top_k / top_p can select (top_k: the first bins holding
// top_k tokens; top_p: the first bins whose estimated mass reaches top_p of
// the row's), then one pass copies the candidates into shared memory (top_k:
// every token with y >= y_cut, an upper set in (y desc, id asc) order; top_p
// alone: every min_p-kept token with p >= p_cut, an upper set in (p desc, id
// asc) order, while summing p over all kept tokens) and sorts them. top_k,
// top_p and the race then run over the sorted candidates exactly as
// draw_token() over the row. The cut is only a guess: the result is
// returned only when the candidates provably hold the selection (top_k: at
// least top_k of them, or every token with y > -inf; top_p alone: the scan
// reaches its target inside them, or they are every kept token with p > 0),
// else token -1 (and on overflow of
// kMaxCandidates or a row whose y_max / y_sum is not finite). Tokens at
// y = -inf (p = 0: masked or impossible) are never candidates: what the row
// would select beyond the candidates then has p = 0, adds 0 to the top_p
// sums and never crosses, and scores 0 in the race, which the row's max
// (p > 0, always selected) beats - so a row that allows a few tokens (a
// grammar's mask) is decided here instead of by the radix passes. The token's
// rank comes from the candidates when proc == x (every token with a larger
// logprob has a larger logit, so a larger y, so it is a candidate).
__device__ CandidateDraw draw_from_candidates(const SampleRowParams& rp, const float* x,
                                              RowRef proc, int64_t vocab, const RowStats& st,
                                              RowGroup& rg, sampling::SelectShared& sh,
                                              const int* hist) {
  using sampling::candidate_id;
  using sampling::kDistanceBins;
  using sampling::kMaxCandidates;
  using sampling::pack_candidate;
  __shared__ int count_s, bin_s, cross_s;
  CandidateDraw out;
  if (!(isfinite(st.y_max) && isfinite(st.y_sum) && st.y_sum > 0.0)) return out;
  const float temperature = rp.temperature;
  auto scaled = [&](float v) { return __fdiv_rn(v, temperature); };
  auto prob = [&](float y) {
    return static_cast<float>(static_cast<double>(expf(__fsub_rn(y, st.y_max))) / st.y_sum);
  };
  const float min_p_cut = __fmul_rn(rp.min_p, static_cast<float>(1.0 / st.y_sum));
  auto keep_min_p = [&](float pr) { return !(rp.min_p > 0.0f && pr < min_p_cut); };
  auto prob_of = [&](uint64_t c) { return prob(scaled(proc[candidate_id(c)])); };
  const bool use_k = rp.top_k > 0 && rp.top_k < vocab;
  const bool use_p = rp.top_p < 1.0f;

  uint64_t* const buf = reinterpret_cast<uint64_t*>(&sh.warp_hist[0][0]);
  // After the loop: buf[0, n) the candidates; list[0, len) the tokens left
  // for top_p and the race in its order, the first `selected` of them drawn
  // from. Attempt 1 (top_p alone, when attempt 0's candidates missed the
  // target) cuts where the least mass of the bins reaches it.
  int n = 0, len = 0, selected = 0, last_bin = -1;
  const uint64_t* list = buf;
  for (int attempt = 0;; ++attempt) {
    if (attempt == 2) return out;
    if (threadIdx.x < 32) {
      int count;
      const double target =
          use_k ? static_cast<double>(rp.top_k) : static_cast<double>(rp.top_p) * st.y_sum;
      const int bin =
          sampling::pick_distance_bin(hist, target, !use_k, attempt == 0 ? 0.6 : 1.0, count);
      if (threadIdx.x == 0) {
        bin_s = bin;
        count_s = count;
      }
    }
    __syncthreads();
    const int bin = bin_s;
    const bool expect_overflow = count_s > kMaxCandidates;
    __syncthreads();
    if (expect_overflow || bin <= last_bin) return out;
    last_bin = bin;
    if (threadIdx.x == 0) count_s = 0;
    __syncthreads();

    // The cut a quarter bin past the chosen bin (d rounds); the last bin: all.
    const bool all = bin == kDistanceBins - 1;
    const float y_cut =
        all ? -INFINITY
            : __fsub_rn(st.y_max, (static_cast<float>(bin) + 1.25f) / sampling::kBinsPerUnit);
    const float p_cut = all ? 0.0f : prob(y_cut);
    auto push = [&](uint32_t key, int64_t t) {
      const int i = atomicAdd(&count_s, 1);
      if (i < kMaxCandidates) buf[i] = pack_candidate(key, static_cast<int32_t>(t));
    };
    double total = 0.0;
    int kept = 0;
    if (use_k) {
      sampling::sweep_vec4(rg, proc, [&](int64_t t, float v) {
        const float y = scaled(v);
        if (y >= y_cut && y != -INFINITY) push(order_key(y), t);
      });
    } else {
      sampling::sweep_vec4(rg, proc, [&](int64_t t, float v) {
        const float pr = prob(scaled(v));
        if (!keep_min_p(pr)) return;
        total += pr;
        if (pr > 0.0f) {
          ++kept;
          if (pr >= p_cut) push(order_key(pr), t);
        }
      });
    }
    total = sampling::block_reduce(total, SumOp{});
    kept = sampling::block_reduce(kept, SumOp{});
    n = count_s;  // final: block_reduce passed barriers
    if (n > kMaxCandidates || (use_k && n < rp.top_k && !all)) return out;
    const int n_pow2 = sampling::pow2_at_least(n);
    for (int i = n + static_cast<int>(threadIdx.x); i < n_pow2; i += kThreads) buf[i] = 0;
    sampling::bitonic_sort_desc(buf, n_pow2);

    list = buf;
    len = n;
    if (use_k) {
      // min_p keeps an upper set of y: a prefix of the candidates.
      int min_p_kept = 0;
      for (int i = threadIdx.x; i < n; i += kThreads)
        min_p_kept += keep_min_p(prob_of(buf[i])) ? 1 : 0;
      len = min(rp.top_k, sampling::block_reduce(min_p_kept, SumOp{}));
      if (use_p) {  // re-keyed by p (ties in p may reorder ids) after the candidates
        const int len_pow2 = sampling::pow2_at_least(len);
        if (n_pow2 + len_pow2 > kMaxCandidates) return out;
        uint64_t* const by_p = buf + n_pow2;
        double sum = 0.0;
        for (int i = threadIdx.x; i < len_pow2; i += kThreads) {
          uint64_t c = 0;
          if (i < len) {
            const float pr = prob_of(buf[i]);
            sum += pr;
            c = pack_candidate(order_key(pr), candidate_id(buf[i]));
          }
          by_p[i] = c;
        }
        total = sampling::block_reduce(sum, SumOp{});
        sampling::bitonic_sort_desc(by_p, len_pow2);
        list = by_p;
      }
    }

    // top_p: the first tokens whose p reaches top_p of the kept total.
    selected = len;
    if (use_p) {
      const double target = fmax(static_cast<double>(rp.top_p) * total, 1e-300);
      if (threadIdx.x == 0) cross_s = kNoCrossing;
      __syncthreads();
      double run = 0.0;
      for (int base = 0; base < len; base += kThreads) {
        const int i = base + static_cast<int>(threadIdx.x);
        const double w = i < len ? static_cast<double>(prob_of(list[i])) : 0.0;
        double chunk;
        const double incl = sampling::block_inclusive_scan(w, chunk);
        if (w > 0.0 && run + incl >= target) atomicMin(&cross_s, i);
        __syncthreads();
        if (cross_s != kNoCrossing) break;
        run += chunk;
      }
      const int cross = cross_s;
      __syncthreads();
      if (cross != kNoCrossing) {
        selected = cross + 1;
      } else if (!use_k && n < kept) {
        continue;  // the target lies past the candidates: once more, cut lower
      }
    }
    break;
  }

  Candidate best{-1.0f, -1};
  for (int i = threadIdx.x; i < selected; i += kThreads) {
    const int32_t id = candidate_id(list[i]);
    const float pr = prob(scaled(proc[id]));
    const float e = -logf(philox_uniform(rp.seed, rp.step, static_cast<uint64_t>(id)));
    const float score = pr / e;
    if (score > best.score || (score == best.score && id < best.id)) best = Candidate{score, id};
  }
  out.token = sampling::block_best(best).id;
  if (out.token >= 0 && proc.is(x)) {
    const float lp = raw_logprob(x[out.token], st.lse);
    int larger = 0;
    for (int i = threadIdx.x; i < n; i += kThreads)
      larger += raw_logprob(x[candidate_id(buf[i])], st.lse) > lp ? 1 : 0;
    out.rank = 1 + sampling::block_reduce(larger, SumOp{});
  }
  return out;
}

// The row's top-n tokens by raw logprob (lower id first on ties) into
// ids/lps [width]; entries past n hold -1 / NaN. The first CTA of the row
// writes them.
__device__ void write_top_logprobs(const float* x, double lse, int64_t vocab, int n, int width,
                                   int32_t* ids, float* lps, RowGroup& rg,
                                   sampling::SelectShared& sh) {
  __shared__ uint32_t keys_s[kMaxTopLogprobs];
  __shared__ int32_t ids_s[kMaxTopLogprobs];
  __shared__ int count_s;
  n = static_cast<int>(min(static_cast<int64_t>(min(n, width)), vocab));
  if (rg.g == 0) {
    for (int i = threadIdx.x; i < width; i += kThreads) {
      if (i >= n) {
        ids[i] = -1;
        lps[i] = NAN;
      }
    }
  }
  if (n <= 0) return;
  const Threshold th = sampling::group_select(
      [&](int64_t, float xt, uint32_t& key, double& w) {
        key = order_key(raw_logprob(xt, lse));
        w = 1.0;
        return true;
      },
      x, rg, static_cast<double>(n), sh);
  if (threadIdx.x == 0) count_s = 0;
  __syncthreads();
  sampling::sweep(rg, x, [&](int64_t t, float xt) {
    const uint32_t key = order_key(raw_logprob(xt, lse));
    if (!th.selects(key, static_cast<int32_t>(t))) return;
    const int i = atomicAdd(&count_s, 1);
    if (i < n) {
      keys_s[i] = key;
      ids_s[i] = static_cast<int32_t>(t);
    }
  });
  __syncthreads();
  int found = min(count_s, n);
  if (rg.size > 1) {  // gather the chunks' selections into the first CTA
    const int before =
        static_cast<int>(sampling::group_exclusive_sum(rg, static_cast<double>(found)));
    for (int i = threadIdx.x; i < found && before + i < n; i += kThreads) {
      rg.top[before + i] = make_uint2(keys_s[i], static_cast<uint32_t>(ids_s[i]));
    }
    const int total = sampling::group_reduce(rg, found, SumOp{});
    if (rg.g != 0) return;
    found = min(total, n);
    for (int i = threadIdx.x; i < found; i += kThreads) {
      const uint2 e = __ldcg(&rg.top[i]);
      keys_s[i] = e.x;
      ids_s[i] = static_cast<int32_t>(e.y);
    }
    __syncthreads();
  }
  for (int i = threadIdx.x; i < found; i += kThreads) {
    int rank = 0;
    for (int j = 0; j < found; ++j) {
      rank += (keys_s[j] > keys_s[i] || (keys_s[j] == keys_s[i] && ids_s[j] < ids_s[i])) ? 1 : 0;
    }
    ids[rank] = ids_s[i];
    lps[rank] = raw_logprob(x[ids_s[i]], lse);
  }
  __syncthreads();
}

// take_sample_path_counts()'s counts on this device.
__device__ SamplePathCounts g_path_counts;

// Grid: num_rows * gl.groups CTAs; CTA b serves row b / groups, chunk b % groups.
__global__ void __launch_bounds__(kThreads, 1) sample_kernel(SampleParams p, GroupLaunch gl) {
  pdl_enter();
  __shared__ sampling::SelectShared sh;
  const int r = static_cast<int>(blockIdx.x) / gl.groups;
  RowGroup rg = make_group(gl, r, static_cast<int>(blockIdx.x) % gl.groups, p.vocab);
  const SampleRowParams rp = p.rows[r];
  const float* x = p.logits + static_cast<int64_t>(r) * p.vocab;
  const RowRef proc = processed_row(p, rp, x, p.scratch + static_cast<int64_t>(r) * p.vocab, rg,
                                    gl.fewer_passes);
  const bool greedy = rp.temperature < kGreedyTemperature;
  // The candidate path's histogram lives in sh.hist (free until a select).
  int* const dist_hist = reinterpret_cast<int*>(sh.hist);
  static_assert(sizeof(sh.hist) >= sampling::kDistanceBins * sizeof(int));
  const bool candidates = gl.fewer_passes && rg.size == 1 && sample_row_narrows(rp, p.vocab);
  RaceParams race;
  race.on = gl.fewer_passes && fused_race_applies(rp, p.vocab);
  race.min_p = rp.min_p;
  race.seed = rp.seed;
  race.step = rp.step;
  const RowStats st = greedy && gl.fewer_passes ? greedy_stats(x, proc, rg)
                      : candidates ? candidate_stats(x, proc, rp.temperature, rg, dist_hist)
                                   : row_stats(x, proc, rp.temperature, greedy, race, rg);
  const double lse = st.lse;

  CandidateDraw drawn;
  if (candidates) drawn = draw_from_candidates(rp, x, proc, p.vocab, st, rg, sh, dist_hist);
  const int32_t token = greedy              ? st.greedy_token
                        : drawn.token >= 0    ? drawn.token
                        : st.race_token >= 0  ? st.race_token
                                              : draw_token(rp, proc, p.vocab, st, rg, sh,
                                                           gl.fewer_passes);
  // fewer_passes: a token whose logit is the row's raw max has rank 1
  // without a pass (lp is monotone in x, so no lp is strictly larger).
  auto rank_of = [&](int32_t t) {
    return gl.fewer_passes && x[t] == st.raw_max ? 1 : raw_rank(x, lse, rg, t);
  };
  const int32_t rank = drawn.rank > 0 ? drawn.rank : rank_of(token);
  const bool has_target = rp.target_token >= 0 && rp.target_token < p.vocab;
  const int32_t target_rank = has_target ? rank_of(rp.target_token) : 0;
  if (rg.g == 0 && threadIdx.x == 0) {
    SampleRowResult res;
    res.token = token;
    res.rank = rank;
    res.logprob = raw_logprob(x[token], lse);
    res.target_rank = target_rank;
    res.target_logprob = has_target ? raw_logprob(x[rp.target_token], lse) : NAN;
    p.results[r] = res;
    if (proc.allowed != nullptr) atomicAdd(&g_path_counts.mask_on_the_fly, 1ull);
    if (!proc.is(x) && proc.allowed == nullptr) atomicAdd(&g_path_counts.scratch, 1ull);
    if (candidates) {
      atomicAdd(drawn.token >= 0 ? &g_path_counts.candidates : &g_path_counts.candidate_misses,
                1ull);
    }
    if (race.on) {
      atomicAdd(st.race_token >= 0 ? &g_path_counts.fused_races : &g_path_counts.race_passes,
                1ull);
    }
  }
  if (p.top_width > 0) {
    const int64_t off = static_cast<int64_t>(r) * p.top_width;
    write_top_logprobs(x, lse, p.vocab, rp.num_top_logprobs, p.top_width, p.top_ids + off,
                       p.top_logprobs + off, rg, sh);
  }
  sampling::group_finish(rg);
}

// CTAs of sample_kernel the current device holds at once (cached per thread
// and device).
int device_capacity() {
  thread_local int cached_device = -1, cached_capacity = 0;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return 0;
  if (device != cached_device) {
    int sms = 0, per_sm = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, sample_kernel, kThreads, 0) !=
            cudaSuccess) {
      return 0;
    }
    cached_device = device;
    cached_capacity = sms * per_sm;
  }
  return cached_capacity;
}

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// Largest automatic G at which a launch with narrowing rows still takes one
// CTA per row (the candidate path) instead. Cost model, per row, in units of
// P = one compute-bound pass of one CTA over the row with the f64 exp / f64
// division per token (H100, 152k tokens: P ~ 130 us, from session 24's
// 256-row top_k 2,395 us = 2 waves x 9 passes; B ~ 3 us a cross-CTA step):
//   split over G CTAs, the radix path: 9 P / G + 11 B (G = 2 at 64 rows:
//     618 us, measured 632; G = 38 at 1 row: 64 us, measured 74);
//   one CTA, candidates: ~1.5 P (max pass at memory speed, the sums +
//     histogram pass, the copy pass, a sort of <= 4096 in shared memory);
//   one CTA, rows of the same launch that do not narrow: <= 2.3 P
//     (temperature / min_p: 2 stats passes and the race; greedy ~0.8 P).
// The launch lasts as long as its slowest row, so one CTA per row wins
// whenever 9 P / G + 11 B > 2.3 P, i.e. G <= 4 (and G <= 6 when every row
// narrows); at 132 SMs that is from 27 rows (G = floor(132 / rows)).
constexpr int64_t kMaxGroupsBeforeCandidates = 4;

// The split of sample_groups() (groups and chunk).
GroupLaunch split_for(int num_rows, int64_t vocab, bool narrowing) {
  GroupLaunch gl;
  gl.chunk = vocab;
  if (num_rows <= 0 || vocab <= 0) return gl;
  int64_t want = kMaxSampleGroups, min_chunk = kMinChunk;
  bool forced = false;
  if (const char* env = std::getenv("PAGODA_SAMPLE_GROUPS"); env != nullptr && *env != '\0') {
    want = std::atoi(env);
    min_chunk = 32;
    forced = true;
  }
  const int64_t groups =
      std::min({want, static_cast<int64_t>(kMaxSampleGroups),
                static_cast<int64_t>(device_capacity() / num_rows), ceil_div(vocab, min_chunk)});
  if (groups <= 1) return gl;
  if (!forced && narrowing && sample_fewer_passes() && groups <= kMaxGroupsBeforeCandidates)
    return gl;
  gl.chunk = ceil_div(ceil_div(vocab, groups), 32) * 32;
  gl.groups = static_cast<int>(ceil_div(vocab, gl.chunk));
  return gl;
}

// Byte offsets of the group scratch sections for `capacity` CTAs.
struct GroupLayout {
  size_t values = 0, hist = 0, top = 0, total = 0;
  explicit GroupLayout(size_t capacity) {
    values = (capacity * 2 * sizeof(unsigned) + 255) & ~size_t{255};
    hist = values + capacity * 2 * sizeof(uint4);
    top = hist + capacity * 2 * 256 * sizeof(double);
    total = top + capacity * kMaxTopLogprobs * sizeof(uint2);
  }
};

}  // namespace

__global__ void copy_sampled_tokens_kernel(const SampleRowResult* results, int num_results,
                                           const int32_t* rows, const int32_t* src_rows, int n,
                                           int32_t* ids, int64_t num_ids) {
  pdl_enter();
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int32_t dst = rows[i];
  const int32_t src = src_rows[i];
  if (dst < 0 || dst >= num_ids || src < 0 || src >= num_results) return;
  ids[dst] = results[src].token;
}

size_t sample_group_scratch_bytes() {
  return GroupLayout(static_cast<size_t>(std::max(device_capacity(), 0))).total;
}

bool sample_fewer_passes() {
  const char* env = std::getenv("PAGODA_SAMPLE_KERNEL");
  return env == nullptr || std::strcmp(env, "old") != 0;
}

cudaError_t take_sample_path_counts(SamplePathCounts& out) {
  const SamplePathCounts zero;
  cudaError_t err = cudaMemcpyFromSymbol(&out, g_path_counts, sizeof(out));
  if (err == cudaSuccess) err = cudaMemcpyToSymbol(g_path_counts, &zero, sizeof(zero));
  return err;
}

int sample_groups(int num_rows, int64_t vocab, bool narrowing) {
  return split_for(num_rows, vocab, narrowing).groups;
}

cudaError_t launch_sample(const SampleParams& p, cudaStream_t stream) {
  if (p.num_rows == 0) return cudaSuccess;
  if (p.vocab <= 0 || p.top_width > kMaxTopLogprobs || p.top_width < 0) {
    return cudaErrorInvalidValue;
  }
  GroupLaunch gl =
      p.group_scratch != nullptr ? split_for(p.num_rows, p.vocab, p.narrowing_rows > 0)
                                 : GroupLaunch{1, p.vocab};
  gl.fewer_passes = sample_fewer_passes();
  if (gl.groups > 1) {
    const GroupLayout layout(static_cast<size_t>(device_capacity()));
    if (p.group_scratch == nullptr || p.group_scratch_bytes < layout.total)
      return cudaErrorInvalidValue;
    char* base = static_cast<char*>(p.group_scratch);
    gl.counters = reinterpret_cast<unsigned*>(base);
    gl.values = reinterpret_cast<uint4*>(base + layout.values);
    gl.hist = reinterpret_cast<double*>(base + layout.hist);
    gl.top = reinterpret_cast<uint2*>(base + layout.top);
  }
  const unsigned grid = static_cast<unsigned>(p.num_rows) * static_cast<unsigned>(gl.groups);
  return launch_kernel(sample_kernel, grid, kThreads, 0, stream, p, gl);
}

cudaError_t launch_copy_sampled_tokens(const SampleRowResult* results, int num_results,
                                       const int32_t* rows, const int32_t* src_rows, int n,
                                       int32_t* ids, int64_t num_ids, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  constexpr int kCopyThreads = 256;
  return launch_kernel(copy_sampled_tokens_kernel, static_cast<unsigned>((n + kCopyThreads - 1) / kCopyThreads),
                       kCopyThreads, 0, stream, results, num_results, rows, src_rows, n, ids, num_ids);
}

}  // namespace pagoda::cuda
