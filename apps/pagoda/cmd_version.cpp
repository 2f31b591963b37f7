// pagoda version: prints the version and the backends this build has.
#include <cstdio>

#include "pagoda/command.h"

namespace {

int run_version(int, char**) {
#ifdef PAGODA_HAVE_CUDA
  std::printf("pagoda %s (backends: cpu, cuda)\n", PAGODA_VERSION);
#else
  std::printf("pagoda %s (backends: cpu)\n", PAGODA_VERSION);
#endif
  return 0;
}

}  // namespace

PAGODA_COMMAND(version, "print the version and the backends built in", run_version);
