// The fused op's specification (Backend's default, which the CPU backend
// runs): qk_norm_rope_kv_write leaves qkv and the cache exactly as qk_norm
// (when q_w is set), rope and kv_write in turn.
#include <gtest/gtest.h>

#include "backend/cpu/cpu_backend.h"
#include "test_util.h"

namespace pagoda {
namespace {

using test::f32;
using test::i32;
using test::Rng;

TEST(CpuFusedOps, QkNormRopeKvWriteEqualsItsThreeCalls) {
  CpuBackend be;
  Rng rng(23);
  for (int iter = 0; iter < 20; ++iter) {
    QkvLayout l{0, rng.pick(std::vector<int>{1, 2, 4}), rng.pick(std::vector<int>{8, 64, 128})};
    l.num_q_heads = l.num_kv_heads * rng.randint(1, 4);
    const bool norm = iter % 2 == 0;
    const int t = rng.randint(1, 9), block_size = 4, num_blocks = 8, num_positions = 64;
    const int64_t width = l.row_width(), d = l.head_dim;
    const int64_t cache_elems = int64_t{num_blocks} * block_size * l.num_kv_heads * d;
    std::vector<float> qkv = rng.floats(static_cast<size_t>(t * width), -2, 2);
    std::vector<float> qw = rng.floats(static_cast<size_t>(d), 0.5, 1.5);
    std::vector<float> kw = rng.floats(static_cast<size_t>(d), 0.5, 1.5);
    std::vector<float> table = rng.floats(static_cast<size_t>(num_positions * d), -1, 1);
    std::vector<float> k = rng.floats(static_cast<size_t>(cache_elems));
    std::vector<float> v = rng.floats(static_cast<size_t>(cache_elems));
    std::vector<int32_t> pos(static_cast<size_t>(t)), slots(static_cast<size_t>(t));
    for (int r = 0; r < t; ++r) {
      pos[static_cast<size_t>(r)] = rng.randint(0, num_positions - 1);
      slots[static_cast<size_t>(r)] = r % 3 == 1 ? -1 : r * 3;  // -1: a padding row
    }
    std::vector<float> qkv2 = qkv, k2 = k, v2 = v;

    Tensor q = f32(qkv, {t, width});
    KvCacheView cache{f32(k, {num_blocks, block_size, l.num_kv_heads, d}),
                      f32(v, {num_blocks, block_size, l.num_kv_heads, d}), block_size, Tensor()};
    const Tensor qw_t = norm ? f32(qw, {d}) : Tensor(), kw_t = norm ? f32(kw, {d}) : Tensor();
    be.qk_norm_rope_kv_write(q, l, qw_t, kw_t, 1e-6f, i32(pos, {t}), f32(table, {num_positions, d}),
                             i32(slots, {t}), cache);

    Tensor q2 = f32(qkv2, {t, width});
    KvCacheView cache2{f32(k2, {num_blocks, block_size, l.num_kv_heads, d}),
                       f32(v2, {num_blocks, block_size, l.num_kv_heads, d}), block_size, Tensor()};
    if (norm) be.qk_norm(q2, l, f32(qw, {d}), f32(kw, {d}), 1e-6f);
    be.rope(q2, l, i32(pos, {t}), f32(table, {num_positions, d}));
    be.kv_write(q2, l, i32(slots, {t}), cache2);

    ASSERT_EQ(qkv, qkv2) << "iter " << iter;
    ASSERT_EQ(k, k2) << "iter " << iter;
    ASSERT_EQ(v, v2) << "iter " << iter;
  }
}

}  // namespace
}  // namespace pagoda
