#include "bench/plots.h"

#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "bench/report.h"

extern char** environ;

namespace pagoda::bench {

namespace {

namespace fs = std::filesystem;

// A gnuplot single-quoted string literal ('' escapes a quote).
std::string gp_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += '\'';
    out += c;
  }
  return out + "'";
}

Status write_file(const fs::path& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  f.close();
  if (!f) return make_error(ErrorCode::kIo, "cannot write '" + path.string() + "'");
  return Status::Ok();
}

Status make_dir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    return make_error(ErrorCode::kIo, "cannot create plot folder '" + dir + "': " + ec.message());
  return Status::Ok();
}

// Terminal choice and output file, then the caller's commands.
std::string script_header(const std::string& dir, const std::string& png, int width, int height) {
  return fmt::format(
      "cd {}\n"
      "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {{\n"
      "  set terminal pngcairo size {},{} noenhanced font ',10'\n"
      "}} else {{\n"
      "  set terminal png size {},{} noenhanced\n"
      "}}\n"
      "set output {}\n"
      "set grid\n",
      gp_quote(fs::absolute(dir).string()), width, height, width, height, gp_quote(png));
}

Status run_gnuplot(const fs::path& script) {
  std::string prog = "gnuplot", arg = script.string();
  char* argv[] = {prog.data(), arg.data(), nullptr};
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, "gnuplot", nullptr, nullptr, argv, environ);
  if (rc != 0)
    return make_error(
        ErrorCode::kNotFound,
        std::string("cannot run gnuplot (install gnuplot-nox): ") + std::strerror(rc));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return make_error(ErrorCode::kInternal, "gnuplot failed on '" + script.string() + "'");
  return Status::Ok();
}

// "value fraction" rows of the empirical CDF of `values_s`, in ms.
std::string cdf_rows(std::vector<double> values_s) {
  std::sort(values_s.begin(), values_s.end());
  std::string out;
  for (size_t k = 0; k < values_s.size(); ++k)
    out += fmt::format("{:.6f} {:.6f}\n", values_s[k] * 1000.0,
                       static_cast<double>(k + 1) / static_cast<double>(values_s.size()));
  return out;
}

std::vector<double> metric_values(const std::vector<RequestRecord>& records,
                                  const std::string& metric) {
  if (metric == "tpot") return tpot_values(records);
  std::vector<double> v;
  for (const auto& r : records) {
    if (!r.success) continue;
    if (metric == "ttft") v.push_back(r.ttft);
    if (metric == "e2el") v.push_back(r.latency);
    if (metric == "itl") v.insert(v.end(), r.itl.begin(), r.itl.end());
  }
  return v;
}

// One panel: a plot command over the non-empty data files, or empty axes.
std::string panel(const std::string& title, const std::string& xlabel,
                  const std::vector<std::string>& series) {
  std::string out = fmt::format("set title {}\nset xlabel {}\n", gp_quote(title), gp_quote(xlabel));
  if (series.empty())
    return out +
           "set label 1 'no samples' at graph 0.5,0.5 center\nplot [0:1][0:1] 2 notitle\nunset "
           "label 1\n";
  out += "plot ";
  for (size_t i = 0; i < series.size(); ++i) out += (i ? ", \\\n     " : "") + series[i];
  return out + "\n";
}

}  // namespace

Status plot_latency_cdfs(const std::string& dir, const std::vector<PlotRun>& runs) {
  PAGODA_RETURN_IF_ERROR(make_dir(dir));
  const std::pair<const char*, const char*> metrics[] = {{"ttft", "Time to first token"},
                                                         {"tpot", "Time per output token"},
                                                         {"itl", "Inter-token latency"},
                                                         {"e2el", "End-to-end latency"}};
  std::string gp = script_header(dir, "latency_cdf.png", 1400, 1000);
  gp +=
      "set multiplot layout 2,2 title 'Latency CDFs'\nset key bottom right opaque title "
      "'req/s'\nset yrange [0:1]\n"
      "set ylabel 'fraction'\n";
  for (const auto& [key, title] : metrics) {
    std::vector<std::string> series;
    for (size_t i = 0; i < runs.size(); ++i) {
      auto values = metric_values(*runs[i].records, key);
      if (values.empty()) continue;
      std::string file = fmt::format("cdf_{}_{}.dat", key, i);
      PAGODA_RETURN_IF_ERROR(write_file(fs::path(dir) / file, cdf_rows(std::move(values))));
      series.push_back(fmt::format("{} using 1:2 with steps lw 2 title {}", gp_quote(file),
                                   gp_quote(runs[i].label)));
    }
    gp += panel(title, "ms", series);
  }
  gp += "unset multiplot\n";
  fs::path script = fs::path(dir) / "latency_cdf.gp";
  PAGODA_RETURN_IF_ERROR(write_file(script, gp));
  return run_gnuplot(script);
}

Status plot_sweep(const std::string& dir, const std::vector<PlotRun>& runs) {
  PAGODA_RETURN_IF_ERROR(make_dir(dir));
  // Columns: 1 label, 2 req/s, 3 output tok/s, 4 total tok/s, 5 goodput, then
  // for ttft, tpot, itl, e2el: mean, median, top percentile (6..17).
  std::string rows =
      "# label req_s out_tok_s total_tok_s goodput {ttft,tpot,itl,e2el}x{mean,median,p_top}\n";
  std::string top = "max";
  for (const auto& run : runs) {
    const ServeMetrics& m = *run.metrics;
    rows += fmt::format("\"{}\" {} {} {} {}", run.label, m.request_throughput, m.output_throughput,
                        m.total_token_throughput, m.request_goodput.value_or(0.0));
    for (const LatencyStats* s : {&m.ttft, &m.tpot, &m.itl, &m.e2el}) {
      double p_top = s->percentiles_ms.empty() ? s->median_ms : s->percentiles_ms.back().second;
      if (!s->percentiles_ms.empty())
        top = fmt::format("P{}", percentile_word(s->percentiles_ms.back().first));
      rows += fmt::format(" {} {} {}", s->mean_ms, s->median_ms, p_top);
    }
    rows += "\n";
  }
  PAGODA_RETURN_IF_ERROR(write_file(fs::path(dir) / "sweep.dat", rows));
  std::string tp = script_header(dir, "sweep_throughput.png", 1400, 600);
  tp +=
      "set multiplot layout 1,2 title 'Throughput against request rate'\nset xlabel 'request rate "
      "(req/s)'\n"
      "set key top left opaque\nset yrange [0:*]\n"
      "set title 'tokens'\nset ylabel 'tok/s'\n"
      "plot 'sweep.dat' using 0:3:xtic(1) with linespoints lw 2 title 'output tok/s', \\\n"
      "     'sweep.dat' using 0:4:xtic(1) with linespoints lw 2 title 'total tok/s'\n"
      "set title 'requests'\nset ylabel 'req/s'\n"
      "plot 'sweep.dat' using 0:2:xtic(1) with linespoints lw 2 title 'completed req/s', \\\n"
      "     'sweep.dat' using 0:5:xtic(1) with linespoints lw 2 title 'goodput req/s'\n"
      "unset multiplot\n";
  fs::path tp_script = fs::path(dir) / "sweep_throughput.gp";
  PAGODA_RETURN_IF_ERROR(write_file(tp_script, tp));
  PAGODA_RETURN_IF_ERROR(run_gnuplot(tp_script));
  std::string lp = script_header(dir, "sweep_latency.png", 1400, 1000);
  lp +=
      "set multiplot layout 2,2 title 'Latency against request rate'\nset xlabel 'request rate "
      "(req/s)'\n"
      "set ylabel 'ms'\nset key top left opaque\nset yrange [0:*]\n";
  const char* names[] = {"TTFT", "TPOT", "ITL", "E2EL"};
  for (int k = 0; k < 4; ++k) {
    int c = 6 + 3 * k;
    lp += fmt::format(
        "set title '{0}'\n"
        "plot 'sweep.dat' using 0:{1}:xtic(1) with linespoints lw 2 title 'mean', \\\n"
        "     'sweep.dat' using 0:{2}:xtic(1) with linespoints lw 2 title 'median', \\\n"
        "     'sweep.dat' using 0:{3}:xtic(1) with linespoints lw 2 title {4}\n",
        names[k], c, c + 1, c + 2, gp_quote(top));
  }
  lp += "unset multiplot\n";
  fs::path lp_script = fs::path(dir) / "sweep_latency.gp";
  PAGODA_RETURN_IF_ERROR(write_file(lp_script, lp));
  return run_gnuplot(lp_script);
}

}  // namespace pagoda::bench
