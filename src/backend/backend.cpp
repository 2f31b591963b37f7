#include "backend/backend.h"

#include <new>

namespace pagoda {

DeviceBuffer::DeviceBuffer(Backend* backend, size_t bytes) : backend_(backend), bytes_(bytes) {
  ptr_ = bytes ? backend->allocate(bytes) : nullptr;
  if (bytes && ptr_ == nullptr) throw std::bad_alloc();
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    reset();
    backend_ = o.backend_;
    ptr_ = o.ptr_;
    bytes_ = o.bytes_;
    o.ptr_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

void DeviceBuffer::reset() {
  if (ptr_ != nullptr && backend_ != nullptr) backend_->deallocate(ptr_);
  ptr_ = nullptr;
  bytes_ = 0;
}

void Backend::qk_norm_rope_kv_write(Tensor& qkv, const QkvLayout& layout, const Tensor& q_w,
                                    const Tensor& k_w, float eps, const Tensor& positions,
                                    const Tensor& cos_sin, const Tensor& slots,
                                    KvCacheView& cache) {
  if (!q_w.empty()) qk_norm(qkv, layout, q_w, k_w, eps);
  rope(qkv, layout, positions, cos_sin);
  kv_write(qkv, layout, slots, cache);
}

int64_t moe_experts_scratch_bytes(int64_t tokens, int64_t top_k, int64_t hidden) {
  // Per slot: the f32 row, its place in the order and at most two 16-byte
  // tiles (one per 64 slots plus one per distinct expert); 64 bytes of
  // alignment and counters.
  const int64_t slots = tokens * top_k;
  return slots * (hidden * 4 + 4 + 32) + 64;
}

}  // namespace pagoda
