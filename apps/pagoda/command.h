// Subcommand registry of the pagoda executable. A subcommand file defines
//   static int run_foo(int argc, char** argv);
//   PAGODA_COMMAND(foo, "one-line summary", run_foo);
// where argv[0] is "pagoda foo". Returns the process exit code.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace pagoda::app {

struct Command {
  std::string name;
  std::string summary;
  std::function<int(int, char**)> run;
};

std::vector<Command>& commands();

struct CommandRegistrar {
  CommandRegistrar(std::string name, std::string summary, std::function<int(int, char**)> run) {
    commands().push_back({std::move(name), std::move(summary), std::move(run)});
  }
};

}  // namespace pagoda::app

#define PAGODA_COMMAND(name, summary, fn) \
  static ::pagoda::app::CommandRegistrar pagoda_command_##name(#name, summary, fn)
