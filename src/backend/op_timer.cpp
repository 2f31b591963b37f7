#include "backend/op_timer.h"

namespace pagoda {

void HostOpTimer::begin(size_t) { started_ = Clock::now(); }

void HostOpTimer::end(size_t i) {
  const double us = std::chrono::duration<double, std::micro>(Clock::now() - started_).count();
  if (us_.size() <= i) us_.resize(i + 1, 0.0);
  us_[i] = us;
}

std::vector<double> HostOpTimer::take() {
  std::vector<double> out;
  out.swap(us_);
  return out;
}

std::string HostOpTimer::method() const {
  return "host steady clock around each op (synchronous backend)";
}

}  // namespace pagoda
