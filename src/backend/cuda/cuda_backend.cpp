// CudaBackend: creation, memory, copies, errors and CUDA graphs. The ops are
// in cuda_ops.cpp and sampling in cuda_sample.cpp.
#include "backend/cuda/cuda_backend.h"

#include <cuda_runtime.h>
#include <fmt/format.h>

#include <cstdlib>
#include <cstring>

#include "backend/cuda/attention.h"
#include "backend/cuda/cublaslt_linear.h"
#include "backend/cuda/quant_linear_kernels.h"
#include "core/log.h"
#include "core/units.h"

namespace pagoda {
namespace {

// cuBLASLt workspace: NVIDIA recommends 32 MiB on Hopper.
constexpr size_t kLinearWorkspaceBytes = size_t{32} << 20;
// Split-KV partials of paged attention (attention.h); the planner never
// uses more.
constexpr size_t kAttentionWorkspaceBytes = size_t{64} << 20;
// Errors logged in full before further ones are only counted.
constexpr int kMaxLoggedErrors = 32;

cudaStream_t as_stream(CUstream_st* s) { return s; }

}  // namespace

std::unique_ptr<Backend> create_cuda_backend(int device, DType compute_dtype, std::string* why) {
  std::unique_ptr<CudaBackend> backend(new CudaBackend());
  const Status st = backend->init(device, compute_dtype);
  if (!st.ok()) {
    if (why != nullptr) {
      *why = st.error().message;
    } else {
      log_error("cuda backend: {}", st.error().message);
    }
    return nullptr;
  }
  return backend;
}

int cuda_device_count(std::string* why) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();
    if (why != nullptr) *why = cudaGetErrorString(e);
    return 0;
  }
  return count;
}

Status CudaBackend::init(int device, DType compute_dtype) {
  if (compute_dtype != DType::kBF16 && compute_dtype != DType::kF16) {
    return make_error(ErrorCode::kUnsupported,
                      fmt::format("compute dtype {} (expected bf16 or f16)", dtype_name(compute_dtype)));
  }
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    cudaGetLastError();
    return make_error(ErrorCode::kNotFound, fmt::format("no CUDA device ({})",
                                                        e != cudaSuccess ? cudaGetErrorString(e) : "0 devices"));
  }
  if (device < 0 || device >= count) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("device {} out of range (found {} devices)", device, count));
  }
  device_ = device;
  compute_dtype_ = compute_dtype;
  cudaDeviceProp prop{};
  e = cudaSetDevice(device);
  if (e == cudaSuccess) e = cudaGetDeviceProperties(&prop, device);
  if (e != cudaSuccess) {
    return make_error(ErrorCode::kInternal, fmt::format("device {}: {}", device, cudaGetErrorString(e)));
  }
  if (prop.major < 9) {
    return make_error(ErrorCode::kUnsupported,
                      fmt::format("device {} ({}) has compute capability {}.{}; this build targets sm_90a",
                                  device, prop.name, prop.major, prop.minor));
  }
  name_ = prop.name;
  num_sms_ = prop.multiProcessorCount;
  const char* fused = std::getenv("PAGODA_FUSED_DECODE");
  fused_decode_ = fused == nullptr || std::strcmp(fused, "0") != 0;
  const char* quant = std::getenv("PAGODA_QUANT_GEMV");
  if (quant != nullptr && std::strcmp(quant, "unstaged") == 0)
    quant_decode_ = QuantDecode::kUnstaged;
  if (quant != nullptr && std::strcmp(quant, "legacy") == 0) quant_decode_ = QuantDecode::kLegacy;
  if (quant != nullptr && std::strcmp(quant, "staged-v1") == 0)
    quant_decode_ = QuantDecode::kStagedV1;
  const char* wide = std::getenv("PAGODA_QUANT_WIDE");
  if (wide != nullptr && std::strcmp(wide, "dequant") == 0) quant_wide_ = false;
  const char* tiled = std::getenv("PAGODA_QUANT_TILED");
  if (tiled != nullptr && std::strcmp(tiled, "0") == 0) quant_tiled_ = false;
  const char* w4_tiles = std::getenv("PAGODA_W4_TILES");
  if (w4_tiles != nullptr && std::strcmp(w4_tiles, "0") == 0) w4_tiles_ = false;
  const char* own_row = std::getenv("PAGODA_FP8_OWN_ROW");
  fp8_own_row_ = own_row != nullptr && std::strcmp(own_row, "1") == 0;
  const char* lt_scales = std::getenv("PAGODA_FP8_LT_SCALES");
  fp8_lt_scales_ = lt_scales == nullptr || std::strcmp(lt_scales, "0") != 0;
  const char* fp8_decode = std::getenv("PAGODA_FP8_KV_DECODE");
  fp8_kv_decode_staged_ = fp8_decode != nullptr && std::strcmp(fp8_decode, "old") == 0;
  const char* moe_decode = std::getenv("PAGODA_MOE_DECODE");
  moe_decode_v1_ = moe_decode != nullptr && std::strcmp(moe_decode, "v1") == 0;
  cudaStream_t stream = nullptr;
  e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  if (e != cudaSuccess) return make_error(ErrorCode::kInternal, fmt::format("cudaStreamCreate: {}", cudaGetErrorString(e)));
  stream_ = stream;
  for (CUevent_st*& fence : fences_) {
    cudaEvent_t ev = nullptr;
    e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    if (e != cudaSuccess) return make_error(ErrorCode::kInternal, fmt::format("cudaEventCreate: {}", cudaGetErrorString(e)));
    fence = ev;
  }
  e = cuda::init_attention_kernels();
  if (e != cudaSuccess) return make_error(ErrorCode::kInternal, fmt::format("attention kernel setup: {}", cudaGetErrorString(e)));
  e = cuda::init_quant_staged_gemv();
  if (e != cudaSuccess)
    return make_error(ErrorCode::kInternal,
                      fmt::format("staged quant gemv setup: {}", cudaGetErrorString(e)));
  e = cuda::init_quant_tiled_gemm();
  if (e != cudaSuccess)
    return make_error(ErrorCode::kInternal,
                      fmt::format("tiled quant gemm setup: {}", cudaGetErrorString(e)));
  e = cudaMalloc(&attention_workspace_, kAttentionWorkspaceBytes);
  if (e != cudaSuccess) {
    attention_workspace_ = nullptr;
    return make_error(ErrorCode::kResourceExhausted, fmt::format("attention workspace: {}", cudaGetErrorString(e)));
  }
  attention_workspace_bytes_ = kAttentionWorkspaceBytes;
  auto lt = cuda::CublasLtLinear::create(kLinearWorkspaceBytes);
  if (!lt.ok()) return lt.error();
  linear_ = std::move(lt).value();
  log_info("cuda backend: {} (device {}, {} SMs, {:.1f} GiB), compute {}", name_, device_, num_sms_,
           to_gib(static_cast<double>(prop.totalGlobalMem)), dtype_name(compute_dtype_));
  return Status::Ok();
}

CudaBackend::~CudaBackend() {
  if (stream_ != nullptr) cudaStreamSynchronize(as_stream(stream_));
  for (CUgraphExec_st* g : graphs_) {
    if (g != nullptr) cudaGraphExecDestroy(g);
  }
  linear_.reset();
  free_sample_buffers();
  for (CUevent_st* fence : fences_) {
    if (fence != nullptr) cudaEventDestroy(fence);
  }
  if (attention_workspace_ != nullptr) cudaFree(attention_workspace_);
  if (dequant_scratch_.ptr != nullptr) cudaFree(dequant_scratch_.ptr);
  if (gather_scratch_.ptr != nullptr) cudaFree(gather_scratch_.ptr);
  for (Buffer* b : {&fp8_codes_, &fp8_scales_, &fp8_acc_})
    if (b->ptr != nullptr) cudaFree(b->ptr);
  if (stream_ != nullptr) cudaStreamDestroy(as_stream(stream_));
}

void CudaBackend::record_fence(int slot) {
  if (slot < 0 || slot >= kNumStepSlots) return fail(fmt::format("record_fence: slot {}", slot));
  if (capturing_) return fail("record_fence inside capture_graph");
  check(cudaEventRecord(fences_[static_cast<size_t>(slot)], as_stream(stream_)), "record_fence");
}

void CudaBackend::wait_fence(int slot) {
  if (slot < 0 || slot >= kNumStepSlots) return fail(fmt::format("wait_fence: slot {}", slot));
  if (capturing_) return fail("wait_fence inside capture_graph");
  check(cudaEventSynchronize(fences_[static_cast<size_t>(slot)]), "wait_fence");
}

void CudaBackend::make_current() { check(cudaSetDevice(device_), "cudaSetDevice"); }

void CudaBackend::fail(const std::string& message) {
  cudaGetLastError();  // clear a non-sticky error so later launches report their own
  if (num_errors_logged_ < kMaxLoggedErrors) {
    log_error("cuda backend: {}", message);
  } else if (num_errors_logged_ == kMaxLoggedErrors) {
    log_error("cuda backend: further errors are not logged");
  }
  ++num_errors_logged_;
  if (status_.ok()) status_ = make_error(ErrorCode::kInternal, message);
}

bool CudaBackend::check(int cuda_error, const char* what) {
  const auto e = static_cast<cudaError_t>(cuda_error);
  if (e == cudaSuccess) return true;
  fail(fmt::format("{}: {} ({})", what, cudaGetErrorString(e), cudaGetErrorName(e)));
  return false;
}

void* CudaBackend::allocate(size_t bytes) {
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, bytes);
  if (e != cudaSuccess) {
    cudaGetLastError();
    log_warn("cuda backend: cudaMalloc({} bytes) failed: {}", bytes, cudaGetErrorString(e));
    return nullptr;
  }
  allocation_bytes_[p] = bytes;
  return p;
}

void CudaBackend::deallocate(void* ptr) {
  const auto a = allocation_bytes_.find(ptr);
  if (a != allocation_bytes_.end()) {  // its bytes may come back as anything
    const char* end = static_cast<const char*>(ptr) + a->second;
    auto it = w4_tile_weights_.lower_bound(ptr);
    while (it != w4_tile_weights_.end() && static_cast<const char*>(it->first) < end)
      it = w4_tile_weights_.erase(it);
    allocation_bytes_.erase(a);
  }
  if (ptr != nullptr) check(cudaFree(ptr), "cudaFree");
}

void* CudaBackend::allocate_host(size_t bytes) {
  void* p = nullptr;
  const cudaError_t e = cudaMallocHost(&p, bytes);
  if (e != cudaSuccess) {
    cudaGetLastError();
    log_warn("cuda backend: cudaMallocHost({} bytes) failed: {}", bytes, cudaGetErrorString(e));
    return nullptr;
  }
  return p;
}

void CudaBackend::deallocate_host(void* ptr) {
  if (ptr != nullptr) check(cudaFreeHost(ptr), "cudaFreeHost");
}

void CudaBackend::copy_to_device(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, as_stream(stream_)),
        "copy_to_device");
}

void CudaBackend::copy_to_device_2d(void* dst, size_t dst_pitch, const void* src,
                                    size_t src_pitch, size_t row_bytes, size_t rows) {
  if (row_bytes == 0 || rows == 0) return;
  check(cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, row_bytes, rows, cudaMemcpyHostToDevice,
                          as_stream(stream_)),
        "copy_to_device_2d");
}

void CudaBackend::copy_to_host(void* dst, const void* src, size_t bytes) {
  if (capturing_) return fail("copy_to_host inside capture_graph");
  if (bytes == 0) return synchronize();
  if (check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, as_stream(stream_)),
            "copy_to_host")) {
    check(cudaStreamSynchronize(as_stream(stream_)), "copy_to_host (synchronize)");
  }
}

void CudaBackend::copy_device(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, as_stream(stream_)),
        "copy_device");
}

void CudaBackend::synchronize() {
  if (capturing_) return fail("synchronize inside capture_graph");
  check(cudaStreamSynchronize(as_stream(stream_)), "synchronize");
}

void CudaBackend::memory_info(size_t* free_bytes, size_t* total_bytes) {
  size_t f = 0, t = 0;
  check(cudaMemGetInfo(&f, &t), "cudaMemGetInfo");
  if (free_bytes != nullptr) *free_bytes = f;
  if (total_bytes != nullptr) *total_bytes = t;
}

int CudaBackend::capture_graph(const std::function<void()>& record) {
  if (capturing_) {
    fail("capture_graph called inside capture_graph");
    return -1;
  }
  if (!check(cudaStreamBeginCapture(as_stream(stream_), cudaStreamCaptureModeThreadLocal),
             "cudaStreamBeginCapture")) {
    return -1;
  }
  const int errors_before = num_errors_logged_;
  capturing_ = true;
  record();
  capturing_ = false;
  cudaGraph_t graph = nullptr;
  const bool ended = check(cudaStreamEndCapture(as_stream(stream_), &graph), "cudaStreamEndCapture");
  if (!ended || num_errors_logged_ != errors_before) {
    if (graph != nullptr) cudaGraphDestroy(graph);
    if (ended) fail("capture_graph: an op failed during capture; graph discarded");
    return -1;
  }
  cudaGraphExec_t exec = nullptr;
  const bool ok = check(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  cudaGraphDestroy(graph);
  if (!ok) return -1;
  graphs_.push_back(exec);
  return static_cast<int>(graphs_.size()) - 1;
}

void CudaBackend::replay_graph(int graph_id) {
  if (graph_id < 0 || graph_id >= static_cast<int>(graphs_.size())) {
    return fail(fmt::format("replay_graph: unknown graph id {}", graph_id));
  }
  check(cudaGraphLaunch(graphs_[static_cast<size_t>(graph_id)], as_stream(stream_)),
        "cudaGraphLaunch");
}

}  // namespace pagoda
