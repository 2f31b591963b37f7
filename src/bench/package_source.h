// A source file of an installed Python package, found by package name,
// version and path (benchmark texts that must not live in this repository:
// bench W7 reads jinja2's lexer.py at run time). The version is checked
// against the package's *.dist-info/METADATA so that a benchmark always
// reads the same text.
#pragma once

#include <string>
#include <vector>

#include "core/result.h"

namespace pagoda::bench {

struct PackageFile {
  std::string
      package;  // distribution name as pip spells it, e.g. "jinja2" (case, '-', '_', '.' ignored)
  std::string version;  // exact "Version:" of its METADATA, e.g. "3.1.6"
  std::string path;     // relative to the site-packages folder, e.g. "jinja2/lexer.py"
};

// The folders of `python`'s sys.path (site-packages among them), by running
// `python -c ...`. Errors: kNotFound when the interpreter cannot be run or
// prints nothing.
Result<std::vector<std::string>> python_path_dirs(const std::string& python = "python3");

// The text of file.path from the first of `dirs` that holds a *.dist-info of
// file.package. Errors, all kNotFound and each naming the package, version
// and path and how to install them: no folder holds the package, the
// installed version differs from file.version, or the file is missing
// beside its dist-info.
Result<std::string> read_package_file(const PackageFile& file,
                                      const std::vector<std::string>& dirs);

}  // namespace pagoda::bench
