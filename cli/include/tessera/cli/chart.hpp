// SVG chart pieces shared by `tessera sweep` and `tessera compare-schedules`:
// a document with a white background and a title, line panels (linear, log
// or category x axis, labelled axes, readable ticks), legends. Output is a
// pure function of the input (byte-identical for the same data).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::cli::chart {

/// A tick label of at most 3 significant digits with a k/M/G/T suffix:
/// 1480000 -> "1.48M", 740000 -> "740k", 12 -> "12", 0.25 -> "0.25".
std::string short_number(double v);

/// `text` with &, <, > and " escaped for XML text and attribute values.
std::string escape(std::string_view text);

/// Evenly spaced round ticks (steps of 1, 2, 2.5 or 5 x 10^k) from 0 to at
/// least `max`, about `count` intervals; {0, 1} when max <= 0.
std::vector<double> ticks_from_zero(double max, int count = 5);

/// The same from `min` (a multiple of the step it picks, at or below `min`)
/// to at least `max`: ticks_from_zero of the span, shifted.
std::vector<double> ticks_between(double min, double max, int count = 5);
/// Ticks of a log axis covering [lo, hi] (0 < lo <= hi): 1, 2 and 5 x 10^k
/// from the largest at or below lo to the smallest at or above hi (powers of
/// ten alone past three decades).
std::vector<double> log_ticks(double lo, double hi);
/// An x tick label: a whole number below 100,000 as it is ("1024"), else
/// short_number ("1.5M").
std::string tick_number(double v);

/// The colour of series `i` (a fixed palette of 14, repeating).
std::string color(std::size_t i);
/// The point marker of series `i`: circles for the first 14 series (one
/// palette), then squares, triangles and diamonds, so no two of 56 series
/// look alike.
enum class Marker { Circle, Square, Triangle, Diamond };
Marker marker(std::size_t i);
/// One marker of `shape` centred on (cx, cy), filled with `fill`; with
/// `halo`, ringed in white (class "over-flagged": a point that fits drawn
/// on another series' flagged cross, which would otherwise hide it).
std::string marker_svg(Marker shape, double cx, double cy, std::string_view fill, bool halo = false);

/// The outline of a `shape` marker about twice a marker's size centred on
/// (cx, cy), stroked in `stroke` (at `opacity`), unfilled: what marks a
/// flagged point's series around its cross.
std::string marker_outline_svg(Marker shape, double cx, double cy, std::string_view stroke,
                               double opacity = 1.0);
/// A red cross of 9 x 9 pixels centred on (cx, cy): a flagged point (out of
/// memory).
std::string cross_svg(double cx, double cy);

/// Approximate width in pixels of `text` at `font_size` (sans-serif).
double text_width(std::string_view text, double font_size);

struct Series {
  std::string name;
  std::vector<double> x;  ///< data values; category index for a category axis
  std::vector<double> y;  ///< a value that is not finite (NaN) is a gap: nothing drawn, the line stops
  std::string color;
  bool dashed = false;        ///< a reference line: dashed, no markers
  /// Per point: drawn as a red cross in an outline of the series' marker,
  /// not joined to its neighbours (e.g. out of memory); may be empty.
  std::vector<bool> flagged;
  Marker marker = Marker::Circle;
  /// Drawn at a third of its opacity (a series none of whose points count,
  /// as one out of memory everywhere, must not read as the best): its
  /// outlines around the crosses.
  bool faded = false;
};

enum class XScale { Linear, Log, Category };

struct LinePanel {
  std::string title;
  std::string x_label;
  std::string y_label;
  XScale x_scale = XScale::Linear;
  std::vector<std::string> categories;  ///< labels of a category axis (x = index)
  std::vector<double> x_ticks;          ///< tick positions of a linear or log axis
  std::vector<Series> series;
  bool y_percent = false;                ///< y values are fractions, labelled as percentages
  bool y_log = false;                    ///< y on a log scale (log_ticks; positive values only)
  std::optional<double> reference_y;     ///< a dashed horizontal line (e.g. 100% efficiency)
  /// A linear y axis from this value (ticks_between) instead of from 0,
  /// for data far from 0 whose differences matter (scaling efficiency).
  std::optional<double> y_from;
};

/// A panel drawn in the box (x, y, w, h): title, plot frame, grid, ticks,
/// axis labels and the series: each a group (class "series", data-name,
/// data-points: its points in SVG units) of lines joining the points that
/// fit, stopping at flagged points and gaps; on a category axis only the
/// reference series are lines, the data points are not joined. Flagged
/// crosses are drawn under every marker, and a marker on a cross is haloed
/// (marker_svg), so that every point that fits stays visible.
std::string line_panel(const LinePanel& p, double x, double y, double w, double h);

struct LegendEntry {
  std::string name;
  std::string color;
  bool dashed = false;  ///< a dashed line sample
  bool cross = false;   ///< a red cross sample (flagged points)
  bool box = false;     ///< a filled box sample (bars)
  bool note = false;    ///< no sample: a line of text of its own, in `color`
  Marker marker = Marker::Circle;  ///< the point marker on a solid line sample
  bool marker_only = false;        ///< the marker without its line (points not joined: a category axis)
  /// A series flagged at every point (out of memory everywhere): drawn as
  /// the chart draws it, a cross in a faded outline of its marker.
  bool flagged_everywhere = false;
};

/// Legend entries in rows from (x, y) wrapping at `width`; `height` gets the
/// height used.
std::string legend(const std::vector<LegendEntry>& entries, double x, double y, double width, double& height);

/// The opening of an SVG document of w x h pixels: white background, the
/// title (bold; cut in the middle where too wide, so that a long scenario
/// path keeps its file name) and an optional subtitle line below it (cut at
/// its end). Close with "</svg>\n".
std::string open_document(double w, double h, std::string_view title, std::string_view subtitle);

/// The height taken by open_document's title and subtitle.
constexpr double kHeaderHeight = 52;

}  // namespace tessera::cli::chart
