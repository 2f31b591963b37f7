#include "openai/wire/json_util.h"

#include <fmt/format.h>


#include "openai/wire/bounded_json.h"

namespace pagoda::openai {

std::string dump_json(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

Result<Json> parse_json_object(std::string_view body) {
  PAGODA_ASSIGN_OR_RETURN(Json value, parse_bounded_json(body, "request body"));
  if (!value.is_object()) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("request body must be a JSON object, got {}", value.type_name()));
  }
  return value;
}

}  // namespace pagoda::openai
