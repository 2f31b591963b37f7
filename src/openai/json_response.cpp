#include "openai/json_response.h"

#include "openai/sse.h"

namespace pagoda::openai {

http::HttpResponse json_response(int status, const Json& body) {
  http::HttpResponse r;
  r.status = status;
  r.body = dump_json(body);
  return r;
}

http::HttpResponse error_response(const ApiError& error) {
  return json_response(error.status, api_error_json(error));
}

http::FailedAnswer failed_answer(const ApiError& error) {
  return {error_response(error), sse_event(api_error_json(error))};
}

}  // namespace pagoda::openai
