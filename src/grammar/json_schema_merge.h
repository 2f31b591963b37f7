// allOf for the JSON Schema converter: several schemas merged into one that
// accepts exactly the values all of them accept, where that is decidable
// keyword by keyword; otherwise an error naming the keyword.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/result.h"
#include "grammar/json_schema_keywords.h"

namespace pagoda::grammar {

// The schema a local "$ref" points to (the converter's resolver); `at` is the
// pointer of the schema holding the reference, for errors.
using SchemaRefResolver =
    std::function<Result<const SchemaJson*>(const std::string& ref, const std::string& at)>;

// One schema equivalent to allOf `parts`. Parts' $ref and nested allOf are
// inlined; anyOf/oneOf are distributed ({"anyOf": [merge(rest + alt) ...]},
// oneOf read as anyOf). Per keyword: type sets intersect (integer within
// number); properties union, a property's schemas (or another part's
// additionalProperties) combined as {"allOf": [...]} for the converter to
// merge lazily; required union; additionalProperties/items combined likewise
// (false wins); minima take the largest, maxima the smallest; enum/const
// intersect; any other keyword must be equal wherever it appears.
// Errors: schema_error(at, "allOf", ...).
Result<SchemaJson> merge_schemas(const std::vector<SchemaJson>& parts,
                                 const SchemaRefResolver& resolve, const std::string& at,
                                 int depth);

}  // namespace pagoda::grammar
