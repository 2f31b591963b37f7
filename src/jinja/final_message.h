// continue_final_message: the rendered chat cut right after the final
// message's text, so the model continues that message instead of starting a
// new turn -- what transformers' apply_chat_template(...,
// continue_final_message=True) does after rendering.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/result.h"

namespace pagoda {

// `final_message`: the conversation's last message (its "content": a string,
// or a list of parts whose last part with a "text" key is used). Finds the
// last occurrence of that text, stripped of Python whitespace, in
// `rendered` and drops what follows it (the end-of-turn marker the template
// added); trailing whitespace of the text is kept only when the template
// kept it. kInvalidArgument when there is no text or the template did not
// render it (transformers' two errors).
Result<std::string> open_final_message(std::string rendered,
                                       const nlohmann::ordered_json& final_message);

}  // namespace pagoda
