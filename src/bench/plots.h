// PNG plots of serving runs, drawn by gnuplot (Debian gnuplot-nox; the
// pngcairo terminal when present, else png). Each function writes its data
// files (.dat), a gnuplot script (.gp) and the PNG into `dir` (created if
// missing), so a plot can be re-drawn or restyled by hand.
#pragma once

#include <string>
#include <vector>

#include "bench/metrics.h"
#include "core/result.h"

namespace pagoda::bench {

struct PlotRun {
  std::string label;  // legend entry / x tick, e.g. "4 req/s"
  const std::vector<RequestRecord>* records = nullptr;
  const ServeMetrics* metrics = nullptr;
};

// latency_cdf.png: empirical CDFs of TTFT, TPOT, ITL and E2EL (ms), one line
// per run, in a 2x2 layout.
Status plot_latency_cdfs(const std::string& dir, const std::vector<PlotRun>& runs);

// sweep_throughput.png (request, output and total token throughput and
// goodput) and sweep_latency.png (mean, median and the highest requested
// percentile of TTFT, TPOT, ITL, E2EL) against the runs' labels in order.
Status plot_sweep(const std::string& dir, const std::vector<PlotRun>& runs);

}  // namespace pagoda::bench
