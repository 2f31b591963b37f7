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

}  // namespace pagoda
