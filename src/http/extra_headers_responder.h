// A Responder that adds headers to whatever answer another one gives: the
// response sent, the stream's head, the failure response.
#pragma once

#include <memory>

#include "http/http_types.h"

namespace pagoda::http {

// `inner` with `headers` added after each answer's own.
std::shared_ptr<Responder> with_extra_headers(std::shared_ptr<Responder> inner,
                                              HttpHeaders headers);

}  // namespace pagoda::http
