// The CUDA backend's fused decode op qk_norm_rope_kv_write (one kernel for
// qk_norm + rope + kv_write when the model has q/k norms; the calls without)
// against its unfused CUDA calls (bit-exact: the Backend default, called
// with the fusion on) and against the CPU reference (dtype-scaled
// tolerances, test_util.h), and captured in a CUDA graph.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "test_util.h"

namespace pagoda::gpu_test {
namespace {

std::string name_of(DType t) {
  return std::string(dtype_name(t));
}

// cos_sin [P, R]: cos(p f_i) for i < R/2, then sin(p f_i), f_i = base^(-2i/R);
// R is the rotary width (head_dim, or less for a partial rotary embedding).
std::vector<float> rope_table(int64_t positions, int d, double base) {
  std::vector<float> t(static_cast<size_t>(positions * d));
  for (int64_t p = 0; p < positions; ++p) {
    for (int i = 0; i < d / 2; ++i) {
      const double a = static_cast<double>(p) * std::pow(base, -2.0 * i / d);
      t[static_cast<size_t>(p * d + i)] = static_cast<float>(std::cos(a));
      t[static_cast<size_t>(p * d + d / 2 + i)] = static_cast<float>(std::sin(a));
    }
  }
  return t;
}

struct RopeCase {
  int hq, hkv, d;
  int64_t tokens;
  bool norm;
  double base;  // the table's rope base (global and local layers differ, Gemma 3)
  int rotary = 0;  // rotary width R < d: a partial rotary embedding (Phi-4-mini); 0: d
  int r() const { return rotary > 0 ? rotary : d; }
};

// The inputs of one qk_norm_rope_kv_write call on one backend.
struct RopeKvInputs {
  DevTensor qkv, qw, kw, pos, table, slots, k, v, scales;
  KvCacheView cache() { return KvCacheView{k.t(), v.t(), kBlockSize, scales.t()}; }
  static constexpr int kBlockSize = 16;
};

struct RopeKvData {
  std::vector<float> qkv, qw, kw, table, k0, v0;
  std::vector<int32_t> pos, slots;
  std::vector<int64_t> cache_shape;
};

RopeKvData make_data(DType dt, const RopeCase& c, int64_t num_positions, bool pad_positions) {
  const QkvLayout layout{c.hq, c.hkv, c.d};
  RopeKvData r;
  const int64_t num_blocks =
      (c.tokens + RopeKvInputs::kBlockSize - 1) / RopeKvInputs::kBlockSize + 3;
  r.cache_shape = {num_blocks, RopeKvInputs::kBlockSize, c.hkv, c.d};
  const size_t cache_elems =
      static_cast<size_t>(num_blocks * RopeKvInputs::kBlockSize * c.hkv * c.d);
  r.qkv = normal(static_cast<size_t>(c.tokens * layout.row_width()), 0.0f, 2.0f);
  r.qw = uniform(static_cast<size_t>(c.d), 0.5f, 1.5f);
  r.kw = uniform(static_cast<size_t>(c.d), 0.5f, 1.5f);
  r.k0 = uniform(cache_elems, -1, 1);
  r.v0 = uniform(cache_elems, -1, 1);
  for (auto* v : {&r.qkv, &r.qw, &r.kw, &r.k0, &r.v0}) round_all(dt, *v);
  r.table = rope_table(num_positions, c.r(), c.base);
  r.pos = uniform_ints(static_cast<size_t>(c.tokens), 0, static_cast<int32_t>(num_positions - 1));
  // Distinct slots, every 5th token padding (-1) as a decode graph's rows.
  r.slots.resize(static_cast<size_t>(num_blocks * RopeKvInputs::kBlockSize));
  std::iota(r.slots.begin(), r.slots.end(), 0);
  std::shuffle(r.slots.begin(), r.slots.end(), rng());
  r.slots.resize(static_cast<size_t>(c.tokens));
  for (size_t i = 0; i < r.slots.size(); i += 5) r.slots[i] = -1;
  if (pad_positions) {  // positions past the table: rope leaves the token (CUDA only)
    for (size_t i = 2; i < r.pos.size(); i += 7) r.pos[i] = static_cast<int32_t>(num_positions + i);
  }
  return r;
}

RopeKvInputs upload(Backend& be, DType dt, DType cache_dt, const RopeCase& c, const RopeKvData& r,
                    int64_t num_positions) {
  const QkvLayout layout{c.hq, c.hkv, c.d};
  const std::vector<float> scales = {0.02f, 0.015f};  // some |x / scale| > 448 saturate
  RopeKvInputs in{DevTensor(be, dt, {c.tokens, layout.row_width()}, r.qkv),
                  DevTensor(be, dt, {c.d}, r.qw),
                  DevTensor(be, dt, {c.d}, r.kw),
                  DevTensor(be, {c.tokens}, r.pos),
                  DevTensor(be, DType::kF32, {num_positions, c.r()}, r.table),
                  DevTensor(be, {c.tokens}, r.slots),
                  DevTensor(be, cache_dt, r.cache_shape),
                  DevTensor(be, cache_dt, r.cache_shape),
                  DevTensor(be, DType::kF32, {2}, scales)};
  if (cache_dt == DType::kF8E4M3) {
    std::vector<uint8_t> bytes(static_cast<size_t>(in.k.t().numel()));
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 37 % 126);
    in.k.upload_bytes(bytes);
    in.v.upload_bytes(bytes);
  } else {
    in.k.upload(r.k0);
    in.v.upload(r.v0);
  }
  return in;
}

void call(Backend& be, RopeKvInputs& in, const RopeCase& c, bool fused) {
  const QkvLayout layout{c.hq, c.hkv, c.d};
  const Tensor none;
  KvCacheView cache = in.cache();
  const Tensor& qw = c.norm ? in.qw.t() : none;
  const Tensor& kw = c.norm ? in.kw.t() : none;
  if (fused) {
    be.qk_norm_rope_kv_write(in.qkv.t(), layout, qw, kw, 1e-6f, in.pos.t(), in.table.t(),
                             in.slots.t(), cache);
  } else {
    be.Backend::qk_norm_rope_kv_write(in.qkv.t(), layout, qw, kw, 1e-6f, in.pos.t(), in.table.t(),
                                      in.slots.t(), cache);
  }
}

const RopeCase kRopeCases[] = {
    {1, 1, 64, 1, true, 1e4},    {32, 8, 128, 1, true, 1e6},    {32, 8, 128, 8, false, 5e5},
    {64, 4, 128, 3, true, 1e6},  {16, 8, 256, 8, true, 1e6},    {8, 4, 256, 37, false, 1e4},
    {14, 2, 64, 300, true, 1e6}, {6, 2, 96, 29, true, 1e4},     {4, 4, 80, 17, false, 1e4},
    {2, 1, 8, 40, true, 1e4},    {40, 8, 128, 300, false, 1e6}, {3, 1, 12, 9, true, 1e4},
    {32, 4, 128, 1, true, 1e6},  // Qwen3-30B-A3B
    // Partial rotary embeddings: Phi-4-mini's 96 of 128 (with and without
    // norms: the fused kernel must honor R whatever the family), and others.
    {24, 8, 128, 1, false, 1e4, 96}, {24, 8, 128, 37, true, 1e4, 96},
    {4, 2, 64, 17, true, 1e4, 32},   {2, 1, 256, 9, true, 1e6, 64},
    {6, 2, 96, 29, true, 1e4, 2},    {8, 4, 80, 300, true, 1e4, 78},
};

std::string trace(DType dt, DType cache_dt, const RopeCase& c) {
  return name_of(dt) + " cache " + name_of(cache_dt) + " hq=" + std::to_string(c.hq) +
         " hkv=" + std::to_string(c.hkv) + " d=" + std::to_string(c.d) +
         " T=" + std::to_string(c.tokens) + (c.norm ? " qk_norm" : "") +
         (c.rotary > 0 ? " rotary=" + std::to_string(c.rotary) : "");
}

TEST(CudaFusedDecodeTest, QkNormRopeKvWriteEqualsUnfusedCalls) {
  PAGODA_REQUIRE_GPU();
  const int64_t num_positions = 2048;
  for (DType dt : kHalfTypes) {
    CudaBackend& gpu = *cuda_backend(dt);
    for (DType cache_dt : {dt, DType::kF8E4M3}) {
      for (const RopeCase& c : kRopeCases) {
        for (bool pad_positions : {false, true}) {
          SCOPED_TRACE(trace(dt, cache_dt, c) + (pad_positions ? " padded positions" : ""));
          const RopeKvData r = make_data(dt, c, num_positions, pad_positions);
          RopeKvInputs fused = upload(gpu, dt, cache_dt, c, r, num_positions);
          RopeKvInputs plain = upload(gpu, dt, cache_dt, c, r, num_positions);
          call(gpu, fused, c, true);
          call(gpu, plain, c, false);
          ASSERT_EQ(fused.qkv.download_bytes(), plain.qkv.download_bytes()) << "qkv";
          ASSERT_EQ(fused.k.download_bytes(), plain.k.download_bytes()) << "k cache";
          ASSERT_EQ(fused.v.download_bytes(), plain.v.download_bytes()) << "v cache";
        }
      }
    }
    expect_status_ok(gpu);
  }
}

TEST(CudaFusedDecodeTest, QkNormRopeKvWriteMatchesCpu) {
  PAGODA_REQUIRE_GPU();
  const int64_t num_positions = 2048;
  for (DType dt : kHalfTypes) {
    CudaBackend& gpu = *cuda_backend(dt);
    for (const RopeCase& c : kRopeCases) {
      SCOPED_TRACE(trace(dt, dt, c));
      const RopeKvData r = make_data(dt, c, num_positions, false);
      RopeKvInputs g = upload(gpu, dt, dt, c, r, num_positions);
      RopeKvInputs ref = upload(cpu_backend(), DType::kF32, DType::kF32, c, r, num_positions);
      call(gpu, g, c, true);
      call(cpu_backend(), ref, c, true);
      expect_close(g.qkv.download(), ref.qkv.download(), dt, "qkv");
      expect_close(g.k.download(), ref.k.download(), dt, "k cache");
      expect_close(g.v.download(), ref.v.download(), dt, "v cache");
    }
    expect_status_ok(gpu);
  }
}

// The fused kernel captured in a graph replays bit-exactly against eager
// execution, on new inputs written before the replay.
TEST(CudaFusedDecodeTest, GraphReplayMatchesEager) {
  PAGODA_REQUIRE_GPU();
  const RopeCase c{32, 8, 128, 1, true, 1e6};
  const int64_t num_positions = 512;
  for (DType dt : kHalfTypes) {
    SCOPED_TRACE(name_of(dt));
    CudaBackend& gpu = *cuda_backend(dt);
    const RopeKvData r = make_data(dt, c, num_positions, false);
    RopeKvInputs in = upload(gpu, dt, dt, c, r, num_positions);
    auto record = [&] { call(gpu, in, c, true); };
    int id = -1;
    for (int round = 0; round < 2; ++round) {
      const RopeKvData fresh = make_data(dt, c, num_positions, false);
      auto reset = [&] {
        in.qkv.upload(fresh.qkv);
        in.pos.upload_i32(fresh.pos);
        in.k.upload(fresh.k0);
        in.v.upload(fresh.v0);
      };
      reset();
      record();
      const auto qkv = in.qkv.download_bytes(), k = in.k.download_bytes(),
                 v = in.v.download_bytes();
      if (id < 0) id = gpu.capture_graph(record);
      ASSERT_GE(id, 0);
      reset();
      gpu.replay_graph(id);
      EXPECT_EQ(in.qkv.download_bytes(), qkv);
      EXPECT_EQ(in.k.download_bytes(), k);
      EXPECT_EQ(in.v.download_bytes(), v);
    }
    expect_status_ok(gpu);
  }
}

}  // namespace
}  // namespace pagoda::gpu_test
