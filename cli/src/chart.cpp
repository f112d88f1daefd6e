#include "tessera/cli/chart.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

namespace tessera::cli::chart {

std::string short_number(double v) {
  if (v == 0) return "0";
  if (!std::isfinite(v)) return fmt::format("{}", v);
  constexpr std::array<std::pair<double, const char*>, 5> kScales{
      {{1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}, {1, ""}}};
  const double a = std::abs(v);
  if (a < 1) return fmt::format("{:.3g}", v);
  // The largest scale at or below |v|; one up when the mantissa rounds to
  // 1000 (999.9k is "1M").
  std::size_t i = 0;
  while (i + 1 < kScales.size() && a < kScales[i].first) ++i;
  if (i > 0 && std::round(a / kScales[i].first * 100) / 100 >= 999.5) --i;
  return fmt::format("{:.3g}{}", v / kScales[i].first, kScales[i].second);
}

std::string escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::vector<double> ticks_from_zero(double max, int count) {
  if (!(max > 0) || !std::isfinite(max)) return {0, 1};
  const double raw = max / std::max(1, count);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = 10 * mag;
  for (const double f : {1.0, 2.0, 2.5, 5.0}) {
    if (f * mag >= raw * (1 - 1e-9)) {
      step = f * mag;
      break;
    }
  }
  std::vector<double> ticks;
  for (int k = 0;; ++k) {
    const double t = step * k;
    ticks.push_back(t);
    if (t >= max * (1 - 1e-9)) break;
  }
  return ticks;
}

std::vector<double> ticks_between(double min, double max, int count) {
  if (!std::isfinite(min) || !std::isfinite(max) || !(max > min)) return ticks_from_zero(max, count);
  const std::vector<double> span = ticks_from_zero(max - min, count);
  const double step = span.size() > 1 ? span[1] : 1.0;
  const double first = std::floor(min / step + 1e-9) * step;
  std::vector<double> ticks;
  for (int k = 0;; ++k) {
    const double t = first + step * k;
    ticks.push_back(t);
    if (t >= max * (1 - 1e-9) || k > 4 * count) break;
  }
  return ticks;
}

std::vector<double> log_ticks(double lo, double hi) {
  if (!(lo > 0) || !std::isfinite(lo) || !std::isfinite(hi) || hi < lo) return {1, 10};
  const bool decades = hi / lo > 1000;
  auto tick = [](int k, int m) { return std::pow(10.0, k) * (m == 0 ? 1 : (m == 1 ? 2 : 5)); };
  int k = static_cast<int>(std::floor(std::log10(lo)));
  int m = 0;
  if (!decades) {  // the largest of 1, 2, 5 x 10^k at or below lo
    while (m < 2 && tick(k, m + 1) <= lo * (1 + 1e-9)) ++m;
  }
  std::vector<double> ticks;
  for (;;) {
    const double t = tick(k, m);
    ticks.push_back(t);
    if (t >= hi * (1 - 1e-9)) break;
    if (decades || m == 2) {
      ++k;
      m = 0;
    } else {
      ++m;
    }
  }
  return ticks;
}

std::string tick_number(double v) {
  if (std::isfinite(v) && v == std::round(v) && std::abs(v) < 1e5) {
    return fmt::format("{}", static_cast<long long>(v));
  }
  return short_number(v);
}

std::string color(std::size_t i) {
  // Tableau's ten less its red (the OOM mark), then darker hues: 14 series
  // before a colour repeats.
  constexpr std::array<const char*, 14> kPalette{"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b",
                                                 "#e377c2", "#17becf", "#7f7f7f", "#bcbd22", "#393b79",
                                                 "#637939", "#8c6d31", "#843c39", "#7b4173"};
  return kPalette[i % kPalette.size()];
}

Marker marker(std::size_t i) {
  constexpr std::array<Marker, 4> kShapes{Marker::Circle, Marker::Square, Marker::Triangle, Marker::Diamond};
  return kShapes[(i / 14) % kShapes.size()];
}

std::string marker_svg(Marker shape, double cx, double cy, std::string_view fill, bool halo) {
  // The halo: a white stroke painted under the fill, so 1 px of white
  // ring the marker.
  const std::string tail =
      fmt::format(R"( fill="{}"{}/>)", fill,
                  halo ? R"( class="over-flagged" stroke="white" stroke-width="2" paint-order="stroke")" : "");
  switch (shape) {
    case Marker::Square:
      return fmt::format(R"(<rect x="{:.1f}" y="{:.1f}" width="7" height="7"{})"
                         "\n",
                         cx - 3.5, cy - 3.5, tail);
    case Marker::Triangle:
      return fmt::format(R"(<path d="M{:.1f},{:.1f} l4.5,8 h-9 z"{})"
                         "\n",
                         cx, cy - 4.5, tail);
    case Marker::Diamond:
      return fmt::format(R"(<path d="M{:.1f},{:.1f} l4.5,4.5 l-4.5,4.5 l-4.5,-4.5 z"{})"
                         "\n",
                         cx, cy - 4.5, tail);
    case Marker::Circle:
      break;
  }
  return fmt::format(R"(<circle cx="{:.1f}" cy="{:.1f}" r="3.5"{})"
                     "\n",
                     cx, cy, tail);
}

std::string marker_outline_svg(Marker shape, double cx, double cy, std::string_view stroke, double opacity) {
  const std::string tail = fmt::format(R"( fill="none" stroke="{}" stroke-width="1.5"{}/>)", stroke,
                                       opacity < 1 ? fmt::format(R"( stroke-opacity="{}")", opacity) : "");
  switch (shape) {
    case Marker::Square:
      return fmt::format(R"(<rect x="{:.1f}" y="{:.1f}" width="14" height="14"{})"
                         "\n",
                         cx - 7, cy - 7, tail);
    case Marker::Triangle:
      // (centred: the 9 x 9 cross inside, its upper arms too; helper 139)
      return fmt::format(R"(<path d="M{:.1f},{:.1f} l14,24 h-28 z"{})"
                         "\n",
                         cx, cy - 15, tail);
    case Marker::Diamond:
      return fmt::format(R"(<path d="M{:.1f},{:.1f} l11,11 l-11,11 l-11,-11 z"{})"
                         "\n",
                         cx, cy - 11, tail);
    case Marker::Circle:
      break;
  }
  return fmt::format(R"(<circle cx="{:.1f}" cy="{:.1f}" r="7.5"{})"
                     "\n",
                     cx, cy, tail);
}

std::string cross_svg(double cx, double cy) {
  return fmt::format(
      R"(<path class="flagged" d="M{:.1f},{:.1f} l9,9 m0,-9 l-9,9" stroke="#d62728" stroke-width="2.5"/>)"
      "\n",
      cx - 4.5, cy - 4.5);
}

double text_width(std::string_view text, double font_size) {
  // Average advance of a sans-serif glyph: about 0.58 em (digits 0.56).
  return static_cast<double>(text.size()) * font_size * 0.58;
}

namespace {

/// The average advance of a bold sans-serif glyph, in em: DejaVu Sans Bold
/// (librsvg's sans-serif on Debian) runs about 0.68 over paths and names
/// (helper 136: a title cut at the regular 0.58 still ran past the edge).
constexpr double kBoldAdvance = 0.68;

/// `text` shortened with "..." to fit `width` pixels at `font_size`
/// (`advance`: a glyph's average width in em).
std::string fit(const std::string& text, double width, double font_size, double advance = 0.58) {
  if (static_cast<double>(text.size()) * font_size * advance <= width) return text;
  const auto chars = static_cast<std::size_t>(std::max(1.0, width / (font_size * advance)));
  if (chars <= 3) return text.substr(0, chars);
  return text.substr(0, chars - 3) + "...";
}

// A title too wide for `width`, cut in the middle: its start (the command)
// and its end (a scenario's file name, where a long path comes first) stay.
// In bold.
std::string fit_title(const std::string& text, double width, double font_size) {
  if (static_cast<double>(text.size()) * font_size * kBoldAdvance <= width) return text;
  const auto chars = static_cast<std::size_t>(std::max(1.0, width / (font_size * kBoldAdvance)));
  if (chars <= 8) return fit(text, width, font_size, kBoldAdvance);
  const std::size_t keep = chars - 3, head = keep * 2 / 5, tail = keep - head;
  return text.substr(0, head) + "..." + text.substr(text.size() - tail);
}

}  // namespace

std::string line_panel(const LinePanel& p, double x, double y, double w, double h) {
  constexpr double kLeft = 74, kRight = 16, kTop = 28, kTick = 11;
  // Category labels wider than their slot are written slanted (35 degrees),
  // with the room below the plot they need (at most 120 px: longer ones are
  // cut), instead of cut to a few letters that may not tell them apart
  // (llama2-70b, llama3-70b).
  constexpr double kSlant = 35, kMaxSlantDrop = 120;
  const double sin_slant = std::sin(kSlant * 3.14159265358979 / 180),
               cos_slant = std::cos(kSlant * 3.14159265358979 / 180);
  double slant_drop = 0;
  if (p.x_scale == XScale::Category && !p.categories.empty()) {
    const double slot = (w - kLeft - kRight) / static_cast<double>(p.categories.size());
    double widest = 0;
    for (const std::string& c : p.categories) widest = std::max(widest, text_width(c, kTick));
    if (widest > slot - 4) slant_drop = std::min(kMaxSlantDrop, widest * sin_slant);
  }
  const double bottom = 50 + (slant_drop > 0 ? slant_drop - 6 : 0);
  const double px = x + kLeft, py = y + kTop, pw = w - kLeft - kRight, ph = h - kTop - bottom;
  std::string s;
  s += fmt::format(
      R"(<text x="{:.1f}" y="{:.1f}" font-size="13" font-weight="bold" text-anchor="middle">{}</text>)"
      "\n",
      px + pw / 2, y + 16, escape(fit(p.title, w - 10, 13, kBoldAdvance)));

  // The x mapping.
  double x_lo = 0, x_hi = 1;
  bool have_x = false;
  for (const Series& ser : p.series) {
    for (const double v : ser.x) {
      x_lo = have_x ? std::min(x_lo, v) : v;
      x_hi = have_x ? std::max(x_hi, v) : v;
      have_x = true;
    }
  }
  for (const double v : p.x_ticks) {
    x_lo = have_x ? std::min(x_lo, v) : v;
    x_hi = have_x ? std::max(x_hi, v) : v;
    have_x = true;
  }
  const bool log_x = p.x_scale == XScale::Log && x_lo > 0;
  double a = log_x ? std::log2(x_lo) : x_lo, b = log_x ? std::log2(x_hi) : x_hi;
  if (p.x_scale == XScale::Category) {
    a = -0.5;
    b = static_cast<double>(std::max<std::size_t>(1, p.categories.size())) - 0.5;
  } else if (b - a <= 0) {
    a -= 1;
    b += 1;
  } else {
    const double pad = (b - a) * 0.06;
    a -= pad;
    b += pad;
  }
  auto map_x = [&](double v) { return px + ((log_x ? std::log2(v) : v) - a) / (b - a) * pw; };

  // The y mapping: from 0 to a round number above the data, or on a log
  // axis between the log ticks around it.
  double y_max = p.reference_y.value_or(0);
  double y_min = p.reference_y.value_or(std::numeric_limits<double>::infinity());
  for (const Series& ser : p.series) {
    for (const double v : ser.y) {
      if (!std::isfinite(v)) continue;  // a gap
      y_max = std::max(y_max, v);
      y_min = std::min(y_min, v);
    }
  }
  const bool log_y = p.y_log && y_min > 0 && std::isfinite(y_min);
  const bool from = !log_y && p.y_from && *p.y_from < y_min;
  const std::vector<double> y_ticks = log_y ? log_ticks(y_min, y_max)
                                      : from
                                          ? ticks_between(*p.y_from, *p.y_from + (y_max - *p.y_from) * 1.04)
                                          : ticks_from_zero(y_max * 1.04);
  const double y_top = y_ticks.back();
  const double y_lo = log_y ? std::log10(y_ticks.front()) : from ? y_ticks.front() : 0.0;
  const double y_hi = log_y ? std::log10(y_top) : y_top;
  auto map_y = [&](double v) {
    const double u = log_y ? std::log10(v) : v;
    return py + ph * (1 - (u - y_lo) / (y_hi > y_lo ? y_hi - y_lo : 1.0));
  };

  // Grid and y ticks; percentages with a decimal on an axis of 2.5% steps
  // (97.5% is not "98%").
  int percent_decimals = 0;
  for (const double t : y_ticks) {
    if (std::abs(100 * t - std::round(100 * t)) > 1e-6) percent_decimals = 1;
  }
  for (const double t : y_ticks) {
    const double ty = map_y(t);
    s += fmt::format(R"(<line x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}" stroke="#e5e5e5"/>)"
                     "\n",
                     px, ty, px + pw, ty);
    const std::string label =
        p.y_percent ? fmt::format("{:.{}f}%", 100 * t, percent_decimals) : short_number(t);
    s += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" font-size="{}" text-anchor="end">{}</text>)"
                     "\n",
                     px - 6, ty + 4, kTick, escape(label));
  }
  // x ticks: category labels, or the given positions (those that would
  // overlap the previous label are left out).
  std::vector<std::pair<double, std::string>> x_labels;
  if (p.x_scale == XScale::Category) {
    const double slot = pw / static_cast<double>(std::max<std::size_t>(1, p.categories.size()));
    for (std::size_t i = 0; i < p.categories.size(); ++i) {
      const double tx = map_x(static_cast<double>(i));
      // Slanted: no lower than the room below the plot, nor left of the panel.
      x_labels.emplace_back(
          tx, slant_drop > 0
                  ? fit(p.categories[i], std::min(kMaxSlantDrop / sin_slant, (tx - x) / cos_slant), kTick)
                  : fit(p.categories[i], slot - 4, kTick));
    }
  } else {
    for (const double t : p.x_ticks) x_labels.emplace_back(map_x(t), tick_number(t));
  }
  double last_right = -1e9;
  for (const auto& [tx, label] : x_labels) {
    if (slant_drop > 0) {
      // Anchored at its end under the tick, rising to the left; the glyphs'
      // height across the slant keeps neighbours apart.
      if (tx < last_right + kTick / sin_slant * 0.9) continue;
      last_right = tx;
      s += fmt::format(R"(<line x1="{0:.1f}" y1="{1:.1f}" x2="{0:.1f}" y2="{2:.1f}" stroke="#e5e5e5"/>)"
                       "\n",
                       tx, py, py + ph);
      const double ax = tx + 3, ay = py + ph + 12;
      s += fmt::format(
          R"svg(<text x="{0:.1f}" y="{1:.1f}" font-size="{2}" text-anchor="end" transform="rotate(-{3:.0f} {0:.1f} {1:.1f})">{4}</text>)svg"
          "\n",
          ax, ay, kTick, kSlant, escape(label));
      continue;
    }
    const double half = text_width(label, kTick) / 2;
    if (tx - half < last_right + 6) continue;
    last_right = tx + half;
    s += fmt::format(R"(<line x1="{0:.1f}" y1="{1:.1f}" x2="{0:.1f}" y2="{2:.1f}" stroke="#e5e5e5"/>)"
                     "\n",
                     tx, py, py + ph);
    s += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" font-size="{}" text-anchor="middle">{}</text>)"
                     "\n",
                     tx, py + ph + 16, kTick, escape(label));
  }
  s += fmt::format(R"(<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" fill="none" stroke="#888"/>)"
                   "\n",
                   px, py, pw, ph);
  // Axis labels.
  s += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" font-size="12" text-anchor="middle">{}</text>)"
                   "\n",
                   px + pw / 2, py + ph + 38 + (slant_drop > 0 ? slant_drop - 6 : 0),
                   escape(fit(p.x_label, pw, 12)));
  const double ly = py + ph / 2, lx = x + 16;
  s += fmt::format(R"svg(<text x="{0:.1f}" y="{1:.1f}" font-size="12" text-anchor="middle" transform="rotate(-90 {0:.1f} {1:.1f})">{2}</text>)svg"
                   "\n",
                   lx, ly, escape(fit(p.y_label, ph, 12)));
  if (p.reference_y) {
    const double ry = map_y(*p.reference_y);
    s += fmt::format(R"(<line x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}" stroke="#555" stroke-dasharray="6 4"/>)"
                     "\n",
                     px, ry, px + pw, ry);
  }

  // Series: reference lines first, so that the data lies on top. Each
  // series is a group (its name and every point drawn, in SVG units, in
  // data-name and data-points) of lines joining the points that fit: a line
  // stops at a flagged point (out of memory) and at a gap (a y that is not
  // finite: no value there), so it never reads as a run of settings that all
  // fit; on a category axis the points are not joined (a line between two
  // model presets is no trend).
  for (const bool dashed : {true, false}) {
    for (const Series& ser : p.series) {
      if (ser.dashed != dashed || ser.x.empty()) continue;
      const bool join = dashed || p.x_scale != XScale::Category;
      std::string all;
      std::vector<std::string> lines;
      std::string run;
      std::size_t run_points = 0;
      auto end_run = [&] {
        if (run_points >= 2) lines.push_back(run);
        run.clear();
        run_points = 0;
      };
      for (std::size_t i = 0; i < ser.x.size() && i < ser.y.size(); ++i) {
        if (!std::isfinite(ser.y[i])) {
          end_run();
          continue;
        }
        const std::string xy = fmt::format("{:.1f},{:.1f}", map_x(ser.x[i]), map_y(ser.y[i]));
        all += (all.empty() ? "" : " ") + xy;
        const bool flagged = i < ser.flagged.size() && ser.flagged[i];
        if (flagged || !join) {
          end_run();
          continue;
        }
        run += (run.empty() ? "" : " ") + xy;
        ++run_points;
      }
      end_run();
      const char* opacity = ser.faded ? "0.3" : (dashed ? "0.8" : "");
      s += fmt::format(
          R"(<g class="series" data-name="{}" data-points="{}" fill="none" stroke="{}" stroke-width="{}"{}{}>)"
          "\n",
          escape(ser.name), all, ser.color, dashed ? "1.5" : "2", dashed ? R"( stroke-dasharray="6 4")" : "",
          *opacity != 0 ? fmt::format(R"( stroke-opacity="{}")", opacity) : std::string());
      for (const std::string& l : lines)
        s += fmt::format(R"(<polyline points="{}"/>)"
                         "\n",
                         l);
      s += "</g>\n";
    }
  }
  // Points: the flagged crosses of every series first, then the markers, so
  // that a cross never hides another series' point that fits. A cross sits
  // in an outline of its series' marker (no line leads to it). A point that
  // fits drawn on another series' cross gets a white halo (helper 157: a
  // small dot at the middle of a red cross read as part of it, the point
  // lost).
  std::vector<std::pair<double, double>> cross_at;
  for (const Series& ser : p.series) {
    if (ser.dashed) continue;
    for (std::size_t i = 0; i < ser.x.size() && i < ser.y.size() && i < ser.flagged.size(); ++i) {
      if (ser.flagged[i] && std::isfinite(ser.y[i])) cross_at.emplace_back(map_x(ser.x[i]), map_y(ser.y[i]));
    }
  }
  // Within a cross's outline (at most 11 px from its centre) plus a marker.
  constexpr double kOnCross = 11 + 4.5;
  const auto on_cross = [&](double cx, double cy) {
    return std::any_of(cross_at.begin(), cross_at.end(), [&](const auto& c) {
      return std::hypot(c.first - cx, c.second - cy) <= kOnCross;
    });
  };
  for (const bool crosses : {true, false}) {
    for (const Series& ser : p.series) {
      if (ser.dashed) continue;
      for (std::size_t i = 0; i < ser.x.size() && i < ser.y.size(); ++i) {
        if (!std::isfinite(ser.y[i])) continue;
        const bool flagged = i < ser.flagged.size() && ser.flagged[i];
        if (flagged != crosses) continue;
        const double cx = map_x(ser.x[i]), cy = map_y(ser.y[i]);
        if (flagged) {
          s += marker_outline_svg(ser.marker, cx, cy, ser.color, ser.faded ? 0.3 : 1.0);
          s += cross_svg(cx, cy);
        } else {
          s += marker_svg(ser.marker, cx, cy, ser.color, on_cross(cx, cy));
        }
      }
    }
  }
  return s;
}

std::string legend(const std::vector<LegendEntry>& entries, double x, double y, double width, double& height) {
  constexpr double kRow = 20, kSample = 24, kGap = 22;
  std::string s;
  double cx = x, cy = y + 12;
  for (const LegendEntry& e : entries) {
    if (e.note) {
      // Rows of its own, text only, wrapped at word boundaries to `width`.
      if (cx > x) cy += kRow;
      auto emit = [&](const std::string& text) {
        s += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" fill="{}">{}</text>)"
                         "\n",
                         x, cy, e.color, escape(text));
      };
      std::string line;
      std::size_t pos = 0;
      while (pos < e.name.size()) {
        std::size_t end = e.name.find(' ', pos);
        if (end == std::string::npos) end = e.name.size();
        const std::string word = e.name.substr(pos, end - pos);
        const std::string longer = line.empty() ? word : fmt::format("{} {}", line, word);
        if (!line.empty() && text_width(longer, 12) > width) {
          emit(line);
          cy += kRow;
          line = word;
        } else {
          line = longer;
        }
        pos = end + 1;
      }
      emit(line);
      cx = x + width;  // the next entry starts a new row
      continue;
    }
    const double w = kSample + 6 + text_width(e.name, 12);
    if (cx > x && cx + w > x + width) {
      cx = x;
      cy += kRow;
    }
    if (e.box) {
      s += fmt::format(R"(<rect x="{:.1f}" y="{:.1f}" width="14" height="12" fill="{}"/>)"
                       "\n",
                       cx + 5, cy - 10, e.color);
    } else if (e.cross) {
      s += marker_outline_svg(Marker::Circle, cx + 12, cy - 4, "#555");
      s += cross_svg(cx + 12, cy - 4);
    } else if (e.flagged_everywhere) {
      s += marker_outline_svg(e.marker, cx + 12, cy - 4, e.color, 0.3);
      s += cross_svg(cx + 12, cy - 4);
    } else if (e.marker_only) {
      s += marker_svg(e.marker, cx + kSample / 2, cy - 4, e.color);
    } else {
      s += fmt::format(R"(<line x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}" stroke="{}" stroke-width="2"{}/>)"
                       "\n",
                       cx, cy - 4, cx + kSample, cy - 4, e.color, e.dashed ? R"( stroke-dasharray="6 4")" : "");
      if (!e.dashed) s += marker_svg(e.marker, cx + kSample / 2, cy - 4, e.color);
    }
    s += fmt::format(R"(<text x="{:.1f}" y="{:.1f}">{}</text>)"
                     "\n",
                     cx + kSample + 6, cy, escape(e.name));
    cx += w + kGap;
  }
  height = entries.empty() ? 0 : cy - y + 8;
  return s;
}

std::string open_document(double w, double h, std::string_view title, std::string_view subtitle) {
  std::string s = fmt::format(
      R"(<svg xmlns="http://www.w3.org/2000/svg" width="{0:.0f}" height="{1:.0f}" viewBox="0 0 {0:.0f} {1:.0f}" )"
      R"(font-family="sans-serif" font-size="12">)"
      "\n"
      R"(<rect class="background" x="0" y="0" width="{0:.0f}" height="{1:.0f}" fill="white"/>)"
      "\n"
      R"(<text x="12" y="24" font-size="16" font-weight="bold">{2}</text>)"
      "\n",
      w, h, escape(fit_title(std::string(title), w - 24, 16)));
  if (!subtitle.empty()) {
    s += fmt::format(R"(<text x="12" y="42" font-size="12" fill="#555">{}</text>)"
                     "\n",
                     escape(fit(std::string(subtitle), w - 24, 12)));
  }
  return s;
}

}  // namespace tessera::cli::chart
