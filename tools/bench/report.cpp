#include "tools/bench/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

namespace kiln::bench {

namespace {

using json = nlohmann::json;

std::ofstream open_out(const std::string& path) {
  std::ofstream out(path);
  if (!out) throw Error("kiln bench: cannot write " + path + "; give a path in a writable folder");
  return out;
}

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) switch (c) {
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '&': o += "&amp;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  return o;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// Milliseconds as people read them: 0.0123 ms -> "12.3 µs".
std::string time_str(double ms) {
  if (ms < 1) return fmt("%.3g µs", ms * 1e3);
  if (ms < 1000) return fmt("%.3g ms", ms);
  return fmt("%.3g s", ms / 1e3);
}

const char* kPalette[] = {"#2f6db5", "#9ec2ea", "#d9772b", "#f3c190",
                          "#3c9a5a", "#a4d8b1", "#8a5cb8", "#cdb4e6"};

// One horizontal grouped bar chart: a group per row, a bar per series. Values <= 0 or NaN draw
// no bar. On a log axis the ticks are powers of ten; `reference` draws a dashed line (1x, 100%).
struct Bars {
  std::string title = {}, unit = {};
  std::vector<std::string> rows = {}, series = {};
  std::vector<std::vector<double>> values = {};  // [row][series]
  std::vector<std::vector<std::string>> labels = {};
  bool log = false;
  double reference = 0;
};

std::string svg(const Bars& b) {
  const double left = 190, right = 90, bar = 11, gap = 10, width = 900;
  const double plot = width - left - right;
  double lo = 1e300, hi = 0;
  for (const auto& row : b.values)
    for (double v : row)
      if (v > 0 && std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
  if (b.reference > 0) lo = std::min(lo, b.reference), hi = std::max(hi, b.reference);
  if (hi <= 0) return "<p>(no data)</p>";
  double a = 0, z = hi * 1.05;
  if (b.log) a = std::floor(std::log10(lo)), z = std::ceil(std::log10(hi));
  if (b.log && z <= a) z = a + 1;
  auto x = [&](double v) {
    double t = b.log ? (std::log10(v) - a) / (z - a) : v / z;
    return left + plot * std::clamp(t, 0.0, 1.0);
  };
  double group = b.series.size() * bar + gap;
  double height = 40 + b.rows.size() * group + 40 + 18 * ((b.series.size() + 3) / 4);
  std::ostringstream o;
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << width << "' height='" << height
    << "' font-family='sans-serif' font-size='11'>";
  o << "<text x='0' y='16' font-size='14' font-weight='bold'>" << esc(b.title) << "</text>";
  double top = 30, bottom = top + b.rows.size() * group;
  // Axis ticks.
  std::vector<double> ticks;
  if (b.log)
    for (double e = a; e <= z; ++e) ticks.push_back(std::pow(10, e));
  else {
    // A round step (1, 2 or 5 times a power of ten) giving at most six ticks.
    double step = std::pow(10, std::floor(std::log10(z / 5)));
    for (double m : {1.0, 2.0, 5.0, 10.0})
      if (z / (step * m) <= 6) {
        step *= m;
        break;
      }
    z = std::ceil(z / step) * step;
    for (double t = 0; t <= z * 1.0001; t += step) ticks.push_back(t);
  }
  for (double t : ticks) {
    double tx = b.log ? x(t) : left + plot * (t / z);
    o << "<line x1='" << tx << "' y1='" << top << "' x2='" << tx << "' y2='" << bottom
      << "' stroke='#ddd'/>";
    std::string lab = b.unit == "ms"  ? time_str(t)
                      : b.unit == "%" ? fmt("%.0f%%", t * 100)
                                      : fmt("%.3g", t) + b.unit;
    o << "<text x='" << tx << "' y='" << bottom + 14 << "' text-anchor='middle' fill='#555'>"
      << esc(lab) << "</text>";
  }
  if (b.reference > 0)
    o << "<line x1='" << x(b.reference) << "' y1='" << top - 4 << "' x2='" << x(b.reference)
      << "' y2='" << bottom << "' stroke='#c00' stroke-dasharray='4 3'/>";
  for (size_t r = 0; r < b.rows.size(); ++r) {
    double y0 = top + r * group;
    o << "<text x='" << left - 8 << "' y='" << y0 + group / 2 << "' text-anchor='end'>"
      << esc(b.rows[r]) << "</text>";
    for (size_t s = 0; s < b.series.size(); ++s) {
      double v = b.values[r][s];
      if (!(v > 0) || !std::isfinite(v)) continue;
      double y = y0 + s * bar, x0 = b.log ? left : left, x1 = x(v);
      o << "<rect x='" << x0 << "' y='" << y << "' width='" << std::max(1.0, x1 - x0)
        << "' height='" << bar - 2 << "' fill='" << kPalette[s % 8] << "'><title>"
        << esc(b.series[s] + ": " + b.labels[r][s]) << "</title></rect>";
      o << "<text x='" << x1 + 4 << "' y='" << y + bar - 3 << "' fill='#333' font-size='9'>"
        << esc(b.labels[r][s]) << "</text>";
    }
  }
  double ly = bottom + 30;
  for (size_t s = 0; s < b.series.size(); ++s) {
    double lx = left + (s % 4) * 170, yy = ly + (s / 4) * 18;
    o << "<rect x='" << lx << "' y='" << yy - 9 << "' width='12' height='10' fill='"
      << kPalette[s % 8] << "'/><text x='" << lx + 16 << "' y='" << yy << "'>" << esc(b.series[s])
      << "</text>";
  }
  o << "</svg>";
  return o.str();
}

// Rows (case + shape) and series (device, mode) in the order the results came.
struct Grid {
  std::vector<std::string> rows, series;
  std::map<std::pair<std::string, std::string>, const Result*> at;
};

std::string row_of(const Result& r) { return r.name + " " + r.shape; }
std::string series_of(const Result& r) { return r.device + " " + r.mode; }

Grid grid(const std::vector<Result>& results) {
  Grid g;
  for (const Result& r : results) {
    if (std::find(g.rows.begin(), g.rows.end(), row_of(r)) == g.rows.end())
      g.rows.push_back(row_of(r));
    if (std::find(g.series.begin(), g.series.end(), series_of(r)) == g.series.end())
      g.series.push_back(series_of(r));
    g.at[{row_of(r), series_of(r)}] = &r;
  }
  return g;
}

double per_task(const Result& r) { return r.tasks > 0 ? r.median_ms / r.tasks : r.median_ms; }

Bars time_chart(const Grid& g) {
  Bars b{"Median time per call (log scale; DAG cases: per kernel)", "ms", g.rows, g.series};
  for (const auto& row : g.rows) {
    std::vector<double> v;
    std::vector<std::string> l;
    for (const auto& s : g.series) {
      auto it = g.at.find({row, s});
      bool ok = it != g.at.end() && it->second->error.empty();
      v.push_back(ok ? per_task(*it->second) : 0);
      l.push_back(!ok ? (it == g.at.end() ? "" : "error") : time_str(per_task(*it->second)));
    }
    b.values.push_back(v);
    b.labels.push_back(l);
  }
  b.log = true;
  return b;
}

Bars bound_chart(const Grid& g) {
  Bars b{"Fraction of the bound (a copy of the same bytes, or the FMA peak; measured in this run)",
         "%"};
  b.series = g.series;
  for (const auto& row : g.rows) {
    std::vector<double> v;
    std::vector<std::string> l;
    bool any = false;
    for (const auto& s : g.series) {
      auto it = g.at.find({row, s});
      double f = it != g.at.end() && it->second->error.empty() ? it->second->fraction : 0;
      any = any || f > 0;
      v.push_back(f);
      l.push_back(f > 0 ? fmt("%.0f%%", f * 100) : "");
    }
    if (!any) continue;
    b.rows.push_back(row);
    b.values.push_back(v);
    b.labels.push_back(l);
  }
  b.reference = 1;
  return b;
}

Bars speedup_chart(const Grid& g, const std::vector<std::string>& devices) {
  Bars b{"Compiled over eager: speedup (log scale; right of the red line is faster)", "x"};
  b.series = devices;
  for (const auto& row : g.rows) {
    std::vector<double> v;
    std::vector<std::string> l;
    bool any = false;
    for (const auto& d : devices) {
      auto e = g.at.find({row, d + " eager"}), c = g.at.find({row, d + " compiled"});
      double s = 0;
      if (e != g.at.end() && c != g.at.end() && e->second->error.empty() &&
          c->second->error.empty() && c->second->median_ms > 0)
        s = e->second->median_ms / c->second->median_ms;
      any = any || s > 0;
      v.push_back(s);
      l.push_back(s > 0 ? fmt("%.2fx", s) : "");
    }
    if (!any) continue;
    b.rows.push_back(row);
    b.values.push_back(v);
    b.labels.push_back(l);
  }
  b.log = true;
  b.reference = 1;
  return b;
}

std::string table(const Grid& g) {
  std::ostringstream o;
  o << "<table><tr><th>case</th><th>bound used</th>";
  for (const auto& s : g.series) o << "<th>" << esc(s) << "</th>";
  o << "</tr>";
  for (const auto& row : g.rows) {
    // Every record of a case carries the same note; the row shows the first one's.
    std::string note;
    for (const auto& s : g.series)
      if (auto it = g.at.find({row, s}); it != g.at.end() && note.empty())
        note = it->second->bound_note;
    o << "<tr><td>" << esc(row) << "</td><td class='note'>" << esc(note) << "</td>";
    for (const auto& s : g.series) {
      auto it = g.at.find({row, s});
      if (it == g.at.end()) {
        o << "<td class='na'>-</td>";
        continue;
      }
      const Result& r = *it->second;
      if (!r.error.empty()) {
        o << "<td class='err' title='" << esc(r.error) << "'>error</td>";
        continue;
      }
      o << "<td>" << time_str(r.median_ms);
      if (r.fraction > 0)
        o << "<br><small>" << fmt("%.0f%%", r.fraction * 100) << " of bound</small>";
      if (r.gflops > 0)
        o << "<br><small>" << fmt("%.0f GFLOP/s", r.gflops) << "</small>";
      else if (r.gbps > 0)
        o << "<br><small>" << fmt("%.1f GB/s", r.gbps) << "</small>";
      o << "</td>";
    }
    o << "</tr>";
  }
  o << "</table>";
  return o.str();
}

std::string peers_section(const Report& rep) {
  std::ostringstream o;
  o << "<h2>Peers, same run</h2>";
  if (!rep.peers_asked) {
    o << "<p>Not measured (run <code>kiln bench --peers</code> with NumPy, JAX or MLX importable "
         "by the Python it names).</p>";
    return o.str();
  }
  for (const auto& m : rep.peers_missing) o << "<p>Not found: " << esc(m) << "</p>";
  if (rep.peers.empty()) return o.str();
  o << "<table><tr><th>case</th><th>peer</th><th>median</th><th>Kiln compiled on cpu:0</th>"
       "<th>Kiln / peer</th></tr>";
  for (const PeerResult& p : rep.peers) {
    const Result* k = nullptr;
    for (const Result& r : rep.results)
      if (r.name == p.name && r.shape == p.shape && r.device == "cpu:0" &&
          r.mode == (p.mode == "eager" ? "eager" : "compiled") && r.error.empty())
        k = &r;
    o << "<tr><td>" << esc(p.name + " " + p.shape) << "</td><td>" << esc(p.peer + " " + p.mode)
      << "</td>";
    if (!p.error.empty()) {
      o << "<td class='err' colspan='3'>" << esc(p.error) << "</td></tr>";
      continue;
    }
    o << "<td>" << time_str(p.median_ms) << "</td><td>" << (k ? time_str(k->median_ms) : "-")
      << "</td><td>" << (k && p.median_ms > 0 ? fmt("%.2fx", k->median_ms / p.median_ms) : "-")
      << "</td></tr>";
  }
  o << "</table><p>Kiln / peer below 1 means Kiln is faster.</p>";
  return o.str();
}

}  // namespace

void write_json(const Report& rep, const std::string& path) {
  json j;
  j["schema"] = "kiln-bench/1";
  j["suite"] = rep.suite;
  j["date"] = rep.date;
  j["machine"] = {{"cpu", rep.machine.cpu},
                  {"threads", rep.machine.threads},
                  {"copy_gbps", rep.machine.copy_gbps},
                  {"peak_gflops_f32", rep.machine.peak_gflops_f32},
                  {"peak_isa", rep.machine.peak_isa}};
  j["devices"] = rep.devices;
  j["results"] = json::array();
  for (const Result& r : rep.results) {
    json x = {{"case", r.name},
              {"shape", r.shape},
              {"device", r.device},
              {"mode", r.mode},
              {"reps", r.reps},
              {"median_ms", r.median_ms},
              {"min_ms", r.min_ms},
              {"max_ms", r.max_ms},
              {"gbps", r.gbps},
              {"gflops", r.gflops},
              {"bound", bound_name(r.bound)},
              {"bound_value", r.bound_value},
              {"fraction_of_bound", r.fraction},
              {"bound_note", r.bound_note}};
    if (r.tasks) x["tasks"] = r.tasks;
    if (!r.error.empty()) x["error"] = r.error;
    j["results"].push_back(x);
  }
  j["peers"] = json::array();
  for (const PeerResult& p : rep.peers) {
    json x = {{"case", p.name},    {"shape", p.shape},         {"peer", p.peer},
              {"mode", p.mode},    {"median_ms", p.median_ms}, {"min_ms", p.min_ms},
              {"max_ms", p.max_ms}};
    if (!p.error.empty()) x["error"] = p.error;
    j["peers"].push_back(x);
  }
  j["peers_missing"] = rep.peers_missing;
  open_out(path) << j.dump(2) << "\n";
}

void write_html(const Report& rep, const std::string& path) {
  Grid g = grid(rep.results);
  std::ostringstream o;
  o << "<!doctype html><html><head><meta charset='utf-8'><title>kiln bench: " << esc(rep.suite)
    << "</title><style>"
       "body{font-family:sans-serif;margin:24px;max-width:1000px;color:#222}"
       "h1{font-size:22px;margin-bottom:4px}h2{font-size:17px;margin-top:28px}"
       ".meta{color:#555}table{border-collapse:collapse;font-size:12px;margin-top:8px}"
       "td,th{border:1px solid #ccc;padding:4px 8px;text-align:right;vertical-align:top}"
       "td:first-child,th:first-child,td.note{text-align:left}td.note{max-width:220px}"
       "th{background:#f3f3f3}"
       "small{color:#666}.err{color:#b00}.na{color:#aaa}svg{display:block;margin:12px 0}"
       "</style></head><body>";
  o << "<h1>kiln bench — " << esc(rep.suite) << " suite</h1><div class='meta'>" << esc(rep.date)
    << " · " << esc(rep.machine.cpu) << ", " << rep.machine.threads << " threads · copy bandwidth "
    << fmt("%.1f GB/s", rep.machine.copy_gbps) << " · float32 FMA peak "
    << fmt("%.0f GFLOP/s", rep.machine.peak_gflops_f32) << " (" << esc(rep.machine.peak_isa)
    << " FMA loop on every thread; both measured in this run) · devices: ";
  for (size_t i = 0; i < rep.devices.size(); ++i) o << (i ? ", " : "") << esc(rep.devices[i]);
  o << "</div>";
  o << "<p>Each case ran eager (one kernel per primitive) and compiled "
       "(<code>kiln::compile</code>, "
       "fused) on every device; times are medians of repeated calls including evaluation. The "
       "bound of a memory-bound case is a parallel copy moving the same number of bytes (so data "
       "that fits in the caches is held to the caches' speed); of a matmul case, its matmul flops "
       "at the FMA peak (twelve independent vector multiply-add chains on every thread, the "
       "widest vectors the CPU has; the fastest of 40 trials), which no case can pass; latency "
       "cases (dispatch, first call, DAG shapes) and random draws (their arithmetic is the limit, "
       "and it is not measured) have none. The table's second column states each case's bound. "
       "Above 100% of a copy means faster than that copy (a reduction reads its bytes and writes "
       "almost nothing, and reads are cheaper than writes). Hover a bar for its series.</p>";
  o << svg(time_chart(g)) << svg(bound_chart(g)) << svg(speedup_chart(g, rep.devices));
  o << "<h2>Device comparison</h2>" << table(g) << peers_section(rep);
  o << "</body></html>\n";
  open_out(path) << o.str();
}

}  // namespace kiln::bench
