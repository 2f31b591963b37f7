#include "bench/inproc/stored_weight_bytes.h"

#include <string>

#include "core/dtype.h"
#include "engine/load_format.h"

namespace pagoda::bench {
namespace {

struct Sum {
  double bytes = 0.0, params = 0.0;
  bool blocks = false;
  void add(const TensorInfo& t, double elem) {
    int64_t n = 1;
    for (const int64_t d : t.shape) n *= d;
    params += static_cast<double>(n);
    blocks = blocks || t.blocks.has_value();
    bytes += t.blocks ? static_cast<double>(dtype_nbytes(*t.blocks, n))
                      : static_cast<double>(n) * elem;
  }
  double per_param(double elem) const { return params > 0 ? bytes / params : elem; }
};

}  // namespace

std::optional<StoredWeightBytes> stored_weight_bytes(const std::vector<TensorInfo>& tensors,
                                                     double elem) {
  Sum matmul, head, embed;
  bool has_head = false;
  for (const TensorInfo& t : tensors) {
    if (t.name == "lm_head.weight") {
      head.add(t, elem);
      has_head = true;
    } else if (t.name == "model.embed_tokens.weight") {
      embed.add(t, elem);
    } else if (t.shape.size() == 2 && t.name.rfind("model.layers.", 0) == 0) {
      matmul.add(t, elem);
    }
  }
  const Sum& lm_head = has_head ? head : embed;
  if (!matmul.blocks && !lm_head.blocks) return std::nullopt;
  return StoredWeightBytes{matmul.per_param(elem), lm_head.per_param(elem)};
}

Result<std::optional<StoredWeightBytes>> stored_weight_bytes_of(const ModelLocation& location,
                                                                const std::string& load_format,
                                                                double elem) {
  PAGODA_ASSIGN_OR_RETURN(OpenedModel opened, open_model_as(location, load_format));
  return stored_weight_bytes(opened.weights->tensors(), elem);
}

}  // namespace pagoda::bench
