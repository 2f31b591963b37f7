// pagoda: serve, generate, tokenize, ... — dispatches to a subcommand.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include "pagoda/command.h"

namespace {

void print_usage() {
  auto cmds = pagoda::app::commands();
  std::sort(cmds.begin(), cmds.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  std::printf("pagoda %s — a fast LLM serving engine\n\nUsage: pagoda <command> [options]\n\nCommands:\n",
              PAGODA_VERSION);
  for (const auto& c : cmds) std::printf("  %-14s %s\n", c.name.c_str(), c.summary.c_str());
  std::printf("\nRun 'pagoda <command> --help' for the options of a command.\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0 ||
      std::strcmp(argv[1], "help") == 0) {
    print_usage();
    return argc < 2 ? 2 : 0;
  }
  if (std::strcmp(argv[1], "--version") == 0) {
    std::printf("pagoda %s\n", PAGODA_VERSION);
    return 0;
  }
  std::string name = argv[1];
  for (const auto& c : pagoda::app::commands()) {
    if (c.name == name) {
      std::string prog = std::string("pagoda ") + name;
      argv[1] = prog.data();
      return c.run(argc - 1, argv + 1);
    }
  }
  std::fprintf(stderr, "pagoda: unknown command '%s'\n\n", name.c_str());
  print_usage();
  return 2;
}
