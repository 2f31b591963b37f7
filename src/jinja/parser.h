// Parses a template into a Program (ast.h) with jinja2's grammar, the
// loopcontrols extension (break / continue) and transformers' {% generation
// %} tag, then runs the scope analysis. Throws JinjaError(kSyntax).
#pragma once

#include <string_view>

#include "jinja/ast.h"

namespace pagoda::jinja {

Program parse_template(std::string_view source);

}  // namespace pagoda::jinja
