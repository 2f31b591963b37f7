// Static checks and scope facts jinja2 derives when it compiles a template:
//  - which names each new frame starts with as undefined (jinja2's
//    idtracking: a name assigned in a frame before any read shadows outer
//    and context values from the frame's start, e.g. a for loop reading `x`
//    before a later top-level {% set x %} sees it undefined);
//  - which macros read `caller`, `varargs`, `kwargs`;
//  - unknown filter/test names (an error unless inside an if / inline if,
//    where jinja2 defers it to run time);
//  - break / continue outside a loop (an error).
#pragma once

#include "jinja/ast.h"

namespace pagoda::jinja {

// Annotates `program` in place; throws JinjaError(kSyntax).
void analyze_scopes(Program& program);

}  // namespace pagoda::jinja
