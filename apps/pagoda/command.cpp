#include "pagoda/command.h"

namespace pagoda::app {

std::vector<Command>& commands() {
  static std::vector<Command> all;
  return all;
}

}  // namespace pagoda::app
