// --load-format dummy for an AWQ / GPTQ model: the dummy source's linear
// weights as random group-format blocks (core/dtype.h), so benchmarks of a
// quantized checkpoint's shapes run the quantized kernels without its files.
// Outputs are meaningless.
#pragma once

#include <memory>
#include <string>

#include "core/result.h"
#include "io/weight_source.h"

namespace pagoda {

// `dense` (make_dummy_weights) unchanged unless `folder`/config.json has an
// AWQ / GPTQ quantization_config (io/int_quant_config.h; its errors pass
// through). Then each 2-D "*_proj.weight" [N, K] whose K is a multiple of the
// group, not named by modules_to_not_convert, is a block tensor of the
// format the checkpoint would load as (group_dtype(bits, block, desc_act);
// per channel: one group of K): read_blocks() gives blocks of scale 2^-9,
// zero 2^(bits-1) and quants from a fixed hash of the name (with desc_act a
// permutation fixed by K after them, so fused parts share it), read() their
// dequantization in f32.
// Same thread safety as the dense source.
Result<std::unique_ptr<WeightSource>> make_dummy_int_quantized(std::unique_ptr<WeightSource> dense,
                                                               const std::string& folder);

}  // namespace pagoda
