// The SVG charts of `sweep` and `compare-schedules`: they parse as XML
// (checked by a minimal parser below), have a white background, labelled
// axes, readable ticks, the ideal-scaling line and efficiency panel only when
// the GPU count changes, one line per value of a second swept key, and the
// memory panel of compare-schedules. Rendering is checked by chart_render.cmake.
#include "tessera/cli/chart.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "tessera/cli/args.hpp"
#include "tessera/cli/commands.hpp"
#include "tessera/error.hpp"

namespace tessera::cli {
namespace {

namespace fs = std::filesystem;

// --- a minimal XML parser: elements, attributes, text; throws on any
// malformed input (unbalanced tags, unquoted or repeated attributes, bad
// entities, text outside the root, a second root).
struct Element {
  std::string name;
  std::map<std::string, std::string> attrs;
  std::string text;  ///< the character data directly inside, entities decoded
  std::vector<std::unique_ptr<Element>> children;
};

class XmlParser {
 public:
  explicit XmlParser(std::string s) : s_(std::move(s)) {}

  std::unique_ptr<Element> parse() {
    skip_space();
    if (s_.compare(pos_, 5, "<?xml") == 0) {
      pos_ = s_.find("?>", pos_);
      if (pos_ == std::string::npos) fail("unterminated XML declaration");
      pos_ += 2;
      skip_space();
    }
    auto root = element();
    skip_space();
    if (pos_ != s_.size()) fail("content after the root element");
    return root;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw std::runtime_error("XML: " + why + " at offset " + std::to_string(pos_));
  }
  void skip_space() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_])) != 0) ++pos_;
  }
  static bool name_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_' || c == ':' || c == '.';
  }
  std::string name() {
    const std::size_t start = pos_;
    while (pos_ < s_.size() && name_char(s_[pos_])) ++pos_;
    if (pos_ == start) fail("expected a name");
    return s_.substr(start, pos_ - start);
  }
  std::string decode(const std::string& raw) {
    std::string out;
    for (std::size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] == '<') fail("'<' in text or attribute");
      if (raw[i] != '&') {
        out += raw[i];
        continue;
      }
      const auto semi = raw.find(';', i);
      if (semi == std::string::npos) fail("unterminated entity");
      const std::string ent = raw.substr(i + 1, semi - i - 1);
      static const std::map<std::string, char> kEntities{
          {"amp", '&'}, {"lt", '<'}, {"gt", '>'}, {"quot", '"'}, {"apos", '\''}};
      const auto it = kEntities.find(ent);
      if (it == kEntities.end()) fail("unknown entity &" + ent + ";");
      out += it->second;
      i = semi;
    }
    return out;
  }
  std::unique_ptr<Element> element() {
    if (pos_ >= s_.size() || s_[pos_] != '<') fail("expected '<'");
    ++pos_;
    auto e = std::make_unique<Element>();
    e->name = name();
    for (;;) {
      skip_space();
      if (pos_ >= s_.size()) fail("unterminated start tag");
      if (s_.compare(pos_, 2, "/>") == 0) {
        pos_ += 2;
        return e;
      }
      if (s_[pos_] == '>') {
        ++pos_;
        break;
      }
      const std::string key = name();
      skip_space();
      if (pos_ >= s_.size() || s_[pos_] != '=') fail("expected '=' after attribute " + key);
      ++pos_;
      skip_space();
      if (pos_ >= s_.size() || (s_[pos_] != '"' && s_[pos_] != '\'')) fail("unquoted attribute " + key);
      const char q = s_[pos_++];
      const auto end = s_.find(q, pos_);
      if (end == std::string::npos) fail("unterminated attribute " + key);
      if (!e->attrs.emplace(key, decode(s_.substr(pos_, end - pos_))).second) fail("repeated attribute " + key);
      pos_ = end + 1;
    }
    for (;;) {
      const auto lt = s_.find('<', pos_);
      if (lt == std::string::npos) fail("unterminated element " + e->name);
      e->text += decode(s_.substr(pos_, lt - pos_));
      pos_ = lt;
      if (s_.compare(pos_, 2, "</") == 0) {
        pos_ += 2;
        if (name() != e->name) fail("mismatched end tag of " + e->name);
        skip_space();
        if (pos_ >= s_.size() || s_[pos_] != '>') fail("expected '>'");
        ++pos_;
        return e;
      }
      e->children.push_back(element());
    }
  }

  std::string s_;
  std::size_t pos_ = 0;
};

void collect(const Element& e, const std::string& name, std::vector<const Element*>& out) {
  if (e.name == name) out.push_back(&e);
  for (const auto& c : e.children) collect(*c, name, out);
}

std::vector<const Element*> all(const Element& root, const std::string& name) {
  std::vector<const Element*> out;
  collect(root, name, out);
  return out;
}

std::string attr(const Element* e, const std::string& key) {
  const auto it = e->attrs.find(key);
  return it == e->attrs.end() ? "" : it->second;
}

/// The series groups (<g class="series">) of a chart, in document order.
std::vector<const Element*> series(const Element& root) {
  std::vector<const Element*> out;
  for (const Element* g : all(root, "g")) {
    if (attr(g, "class") == "series") out.push_back(g);
  }
  return out;
}

/// "x,y x,y ..." as pairs.
std::vector<std::pair<double, double>> parse_points(const std::string& text) {
  std::vector<std::pair<double, double>> pts;
  std::istringstream in(text);
  for (std::string xy; in >> xy;) {
    const auto comma = xy.find(',');
    pts.emplace_back(std::stod(xy.substr(0, comma)), std::stod(xy.substr(comma + 1)));
  }
  return pts;
}

/// A series' points (data-points), in SVG units.
std::vector<std::pair<double, double>> points_of(const Element* g) {
  return parse_points(attr(g, "data-points"));
}

/// The lines a series draws: the points of each of its polylines.
std::vector<std::vector<std::pair<double, double>>> drawn_lines(const Element* g) {
  std::vector<std::vector<std::pair<double, double>>> out;
  for (const Element* l : all(*g, "polyline")) out.push_back(parse_points(attr(l, "points")));
  return out;
}

std::set<std::string> texts(const Element& root) {
  std::set<std::string> out;
  for (const Element* t : all(root, "text")) out.insert(t->text);
  return out;
}

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

class ChartTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tessera_chart_test_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  /// Runs `tessera sweep` on a shipped scenario and returns the SVG text.
  std::string sweep(const std::string& scenario, const std::vector<std::string>& sets, bool zip = false) {
    Args args{std::string(TESSERA_SCENARIO_DIR) + "/" + scenario};
    for (const auto& s : sets) args.insert(args.end(), {"--set", s});
    if (zip) args.emplace_back("--zip");
    args.insert(args.end(), {"--out", (dir_ / "s.csv").string(), "--svg", (dir_ / "s.svg").string(), "--jobs", "2"});
    std::ostringstream out;
    EXPECT_EQ(cmd_sweep(args, out), 0);
    printed_ = out.str();
    return read(dir_ / "s.svg");
  }
  std::string printed_;  ///< what the last sweep() printed

  /// The root, checked for what every chart has: an <svg> root whose first
  /// element is a white rectangle covering it, and no tick label in
  /// exponent notation.
  static std::unique_ptr<Element> parse_chart(const std::string& svg) {
    std::unique_ptr<Element> root;
    try {
      root = XmlParser(svg).parse();
    } catch (const std::exception& e) {
      ADD_FAILURE() << e.what();
      return std::make_unique<Element>();
    }
    EXPECT_EQ(root->name, "svg");
    EXPECT_EQ(attr(root.get(), "xmlns"), "http://www.w3.org/2000/svg");
    EXPECT_FALSE(root->children.empty());
    if (!root->children.empty()) {
      const Element* bg = root->children.front().get();
      EXPECT_EQ(bg->name, "rect");
      EXPECT_EQ(attr(bg, "fill"), "white");
      EXPECT_EQ(attr(bg, "width"), attr(root.get(), "width"));
      EXPECT_EQ(attr(bg, "height"), attr(root.get(), "height"));
    }
    for (const Element* t : all(*root, "text")) EXPECT_EQ(t->text.find("e+"), std::string::npos) << t->text;
    return root;
  }

  /// The names of the solid (data) and dashed (reference) series.
  static std::vector<std::string> lines(const Element& root, bool dashed) {
    std::vector<std::string> out;
    for (const Element* p : series(root)) {
      if (attr(p, "stroke-dasharray").empty() != dashed) out.push_back(attr(p, "data-name"));
    }
    return out;
  }

  fs::path dir_;
};

TEST(ChartXml, TheParserRejectsMalformedXml) {
  EXPECT_NO_THROW(XmlParser(R"(<svg a="1"><t b='x'>a &amp; b</t><r/></svg>)").parse());
  for (const char* bad : {"<svg><a></svg>", "<svg>a & b</svg>", "<svg a=1/>", R"(<svg a="1" a="2"/>)",
                          "<svg/><svg/>", "<svg>", "text<svg/>"}) {
    EXPECT_THROW(XmlParser(bad).parse(), std::runtime_error) << bad;
  }
}

TEST(ChartNumbers, ShortTickLabels) {
  EXPECT_EQ(chart::short_number(1.48e6), "1.48M");
  EXPECT_EQ(chart::short_number(1.5e6), "1.5M");
  EXPECT_EQ(chart::short_number(740000), "740k");
  EXPECT_EQ(chart::short_number(999999), "1M");
  EXPECT_EQ(chart::short_number(2.5e9), "2.5G");
  EXPECT_EQ(chart::short_number(12), "12");
  EXPECT_EQ(chart::short_number(0), "0");
  EXPECT_EQ(chart::short_number(0.25), "0.25");
  EXPECT_EQ(chart::short_number(128), "128");
}

// A title wider than the chart keeps its start and its end: `tessera sweep`
// of a scenario under a long path was cut to the path's first directories,
// the file name lost.
TEST(ChartTitle, LongTitleKeepsTheFileName) {
  const std::string dir(200, 'd');
  const std::string svg = chart::open_document(
      600, 400, fmt::format("tessera sweep /home/{}/scenarios/gpt3-175b.yaml", dir), "swept: cluster.nodes");
  const auto title_at = svg.find("font-weight=\"bold\">");
  ASSERT_NE(title_at, std::string::npos);
  const auto start = svg.find('>', title_at) + 1;
  const std::string title = svg.substr(start, svg.find("</text>", start) - start);
  EXPECT_EQ(title.rfind("tessera sweep /home...d", 0), 0U) << title;
  EXPECT_EQ(title.substr(title.size() - 25), "/scenarios/gpt3-175b.yaml") << title;
  // 576 px (600 less the margins) at 16 px in bold, 0.68 em a character
  // (helper 136: at 0.58, the regular glyphs' advance, it ran past the
  // edge as librsvg draws it): 52.
  EXPECT_EQ(title.size(), 52U) << title;
  // A title that fits is left as written.
  const std::string short_svg = chart::open_document(600, 400, "tessera sweep s.yaml", "");
  EXPECT_NE(short_svg.find(">tessera sweep s.yaml</text>"), std::string::npos);
}

// A node sweep over scaling.yaml's `tiers: auto` fat-tree (16-port
// switches: 2 tiers hold 16 nodes of 8) says under the chart and the table
// where the tree gained a tier; a sweep within one tier count says nothing.
// Two sweeps on one --out: the second is refused while the first holds the
// file's lock, rather than interleave rows or rewrite the file under it
// (helper 94); the lock file goes when the sweep ends.
TEST_F(ChartTest, SweepRefusesAnOutAnotherSweepIsWriting) {
  const fs::path lock = dir_ / ".s.csv.lock";
  const int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  const Args args{std::string(TESSERA_SCENARIO_DIR) + "/default.yaml", "--set", "training.micro_batch=4,8",
                  "--out", (dir_ / "s.csv").string()};
  std::ostringstream out;
  try {
    (void)cmd_sweep(args, out);
    ADD_FAILURE() << "no InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              fmt::format("--out {}: another tessera sweep is writing it now (it holds {}); wait for it to "
                          "finish, or choose another --out",
                          (dir_ / "s.csv").string(), lock.string()));
  }
  EXPECT_FALSE(fs::exists(dir_ / "s.csv"));  // nothing written
  ::close(fd);                               // the first sweep ends (a stale lock file holds no lock)
  EXPECT_EQ(cmd_sweep(args, out), 0);
  EXPECT_TRUE(fs::exists(dir_ / "s.csv"));
  EXPECT_FALSE(fs::exists(lock));
}

TEST_F(ChartTest, NodeSweepSaysWhereTiersAutoAddedATier) {
  const auto t = texts(*parse_chart(sweep("scaling.yaml", {"cluster.nodes=8,16,32"})));
  EXPECT_TRUE(t.count("Fat-tree (tiers: auto): 2 tiers at 64 to 128 GPUs, 3 tiers at 256 GPUs")) << printed_;
  EXPECT_NE(printed_.find(
                "note: cluster.fabric.tiers: auto built 2 tiers at 64 to 128 GPUs, 3 tiers at 256 GPUs\n"),
            std::string::npos)
      << printed_;
  // The CSV carries each point's tiers (fabric_tiers after gpus).
  EXPECT_EQ(read(dir_ / "s.csv").substr(0, 40), "point,cluster.nodes,gpus,fabric_tiers,it");
  std::istringstream csv(read(dir_ / "s.csv"));
  std::string line;
  std::vector<std::string> gpus_and_tiers;
  std::getline(csv, line);
  while (std::getline(csv, line)) {
    const std::vector<std::string> cells = split(line, ',');
    ASSERT_GT(cells.size(), 3U) << line;
    gpus_and_tiers.push_back(cells[2] + ":" + cells[3]);
  }
  EXPECT_EQ(gpus_and_tiers, (std::vector<std::string>{"64:2", "128:2", "256:3"}));
  (void)sweep("scaling.yaml", {"cluster.nodes=1,2"});
  EXPECT_EQ(printed_.find("tiers"), std::string::npos) << printed_;
}

TEST_F(ChartTest, NodeSweepAtOneGlobalBatchSaysSo) {
  // schedules.yaml keeps 64 sequences per iteration: at 32 and 64 GPUs the
  // chart says the batch is fixed (fewer micro-batches per GPU as the GPUs
  // grow), which a reader of the efficiency panel needs; scaling.yaml,
  // whose batch grows with dp, does not.
  const auto t = texts(*parse_chart(sweep("schedules.yaml", {"cluster.nodes=4,8", "parallelism.dp=auto"})));
  EXPECT_TRUE(t.count("Global batch 64 sequences at every point: more GPUs, fewer micro-batches each"))
      << printed_;
  fs::remove(dir_ / "s.csv");  // (another sweep's columns)
  for (const std::string& line : texts(*parse_chart(sweep("scaling.yaml", {"cluster.nodes=1,2"}))))
    EXPECT_EQ(line.find("Global batch"), std::string::npos) << line;
}

// A point's warnings are named under the chart in their opening words
// (helper 176: a dip the table's warning explained was unexplained on the
// chart); a long one is cut at the end of its first clause.
TEST_F(ChartTest, SweepChartNamesThePointsWarnings) {
  const auto t =
      texts(*parse_chart(sweep("scaling.yaml", {"cluster.nodes=1", "cluster.nic_latency=1us,5ms"})));
  std::string all;
  for (const std::string& line : t) all += line + "\n";
  EXPECT_NE(
      all.find("Warning (points with cluster.nic_latency=5ms): cluster.nic_latency = 5000 us: a link's"),
      std::string::npos)
      << all;
  EXPECT_NE(all.find("(the table's notes and --json say it all)"), std::string::npos) << all;
  EXPECT_EQ(all.find("Warning (points with cluster.nic_latency=1us)"), std::string::npos) << all;
}

TEST(ChartNumbers, LogTicksAndWholeNumberLabels) {
  EXPECT_EQ(chart::log_ticks(94858, 7.9e6), (std::vector<double>{5e4, 1e5, 2e5, 5e5, 1e6, 2e6, 5e6, 1e7}));
  EXPECT_EQ(chart::log_ticks(200, 200), (std::vector<double>{200}));
  EXPECT_EQ(chart::log_ticks(3, 45000), (std::vector<double>{1, 10, 100, 1000, 1e4, 1e5}));  // past 3 decades
  EXPECT_EQ(chart::log_ticks(0, 5), (std::vector<double>{1, 10}));  // no log axis for 0
  // GPU counts keep every digit; large or fractional values stay short.
  EXPECT_EQ(chart::tick_number(1024), "1024");
  EXPECT_EQ(chart::tick_number(16384), "16384");
  EXPECT_EQ(chart::tick_number(131072), "131k");
  EXPECT_EQ(chart::tick_number(0.5), "0.5");
}

TEST(ChartNumbers, RoundTicksCoverTheData) {
  const auto t = chart::ticks_from_zero(1.48e6);
  ASSERT_GE(t.size(), 3U);
  EXPECT_EQ(t.front(), 0);
  EXPECT_GE(t.back(), 1.48e6);
  EXPECT_LT(t.back(), 1.48e6 * 1.5);
  for (std::size_t i = 1; i < t.size(); ++i) {
    EXPECT_NEAR(t[i] - t[i - 1], t[1], 1e-6);
    EXPECT_EQ(chart::short_number(t[i]).find('e'), std::string::npos);
  }
  EXPECT_EQ(chart::escape("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
}

TEST(ChartNumbers, TicksBetweenStartAtARoundStepBelow) {
  // 0.9 to 1.0044: a span of 0.1044 in steps of 0.025, from 0.9.
  const auto t = chart::ticks_between(0.9, 1.0044);
  ASSERT_EQ(t.size(), 6U);
  EXPECT_NEAR(t.front(), 0.9, 1e-12);
  EXPECT_NEAR(t[1], 0.925, 1e-12);
  EXPECT_NEAR(t.back(), 1.025, 1e-12);
  // From a value between steps: the step at or below it.
  EXPECT_NEAR(chart::ticks_between(83, 131).front(), 80, 1e-9);
  EXPECT_EQ(chart::ticks_between(1, 1), chart::ticks_from_zero(1));  // no span: from 0
}

namespace {

/// The points of the first series named `name` (data-name), in SVG units.
std::vector<std::pair<double, double>> series_points(const Element& root, const std::string& name) {
  for (const Element* p : series(root)) {
    if (attr(p, "data-name") == name) return points_of(p);
  }
  return {};
}

}  // namespace

TEST_F(ChartTest, NodeSweepHasLogGpuAxisIdealScalingAndEfficiency) {
  const std::string svg = sweep("scaling.yaml", {"cluster.nodes=1,2,4"});
  const auto root = parse_chart(svg);
  const auto t = texts(*root);
  EXPECT_TRUE(t.count("GPUs (log scale)")) << svg;
  EXPECT_TRUE(t.count("throughput (tokens/s, log scale)"));
  EXPECT_TRUE(t.count("Scaling efficiency per GPU"));
  for (const char* gpus : {"8", "16", "32"}) EXPECT_TRUE(t.count(gpus)) << gpus;  // x ticks: the GPU counts
  for (const char* tput : {"100k", "200k", "500k"}) EXPECT_TRUE(t.count(tput)) << tput;  // log y ticks
  EXPECT_EQ(lines(*root, true), std::vector<std::string>{"ideal scaling"});
  // throughput and per-GPU efficiency, one line each
  EXPECT_EQ(lines(*root, false).size(), 2U);
  // The ideal line starts at the first point and is linear in GPUs: on the
  // log-log throughput panel a straight line, each doubling of the GPUs
  // (nodes 1 -> 2 -> 4) the same step up, log10(2) of a decade. The log
  // ticks put the frame (the first frame drawn) from 50k to 500k: one
  // decade, the frame's height.
  const auto ideal = series_points(*root, "ideal scaling");
  const auto data = series_points(*root, "throughput");
  ASSERT_EQ(ideal.size(), 3U);
  ASSERT_EQ(data.size(), 3U);
  EXPECT_EQ(ideal.front(), data.front());
  double decade = 0;
  for (const Element* r : all(*root, "rect")) {
    if (attr(r, "fill") == "none" && decade == 0) decade = std::stod(attr(r, "height"));
  }
  ASSERT_GT(decade, 0);
  const double rise1 = ideal[0].second - ideal[1].second, rise2 = ideal[1].second - ideal[2].second;
  EXPECT_NEAR(rise1, std::log10(2.0) * decade, 0.2);
  EXPECT_NEAR(rise2, rise1, 0.2);
  EXPECT_LT(ideal.front().first, ideal[1].first);  // x grows with the GPUs
  // On a log axis, 8 -> 16 and 16 -> 32 GPUs are the same distance apart.
  EXPECT_NEAR(ideal[1].first - ideal[0].first, ideal[2].first - ideal[1].first, 0.2);
  // Titles do not overlap: the document title's baseline is above every
  // panel title's top (font-size 13).
  double title_y = 0;
  for (const Element* e : all(*root, "text")) {
    if (e->text.rfind("tessera sweep ", 0) == 0) title_y = std::stod(attr(e, "y"));
  }
  ASSERT_GT(title_y, 0);
  for (const Element* e : all(*root, "text")) {
    if (attr(e, "font-weight") == "bold" && e->text.rfind("tessera sweep ", 0) != 0) {
      EXPECT_GT(std::stod(attr(e, "y")) - 13, title_y + 4) << e->text;
    }
  }
  // The efficiency axis (99.5-100% here) from 90%, a round 10% at least 5
  // points below the lowest, in steps labelled to their decimal (helper 81:
  // from 0 the lines lay on the 100% line).
  std::vector<std::string> percent_ticks;
  for (const Element* e : all(*root, "text")) {
    if (!e->text.empty() && e->text.back() == '%') percent_ticks.push_back(e->text);
  }
  EXPECT_EQ(percent_ticks,
            (std::vector<std::string>{"90.0%", "92.5%", "95.0%", "97.5%", "100.0%", "102.5%"}));
  // Same input, same bytes: rerunning resumes every point and redraws.
  EXPECT_EQ(sweep("scaling.yaml", {"cluster.nodes=1,2,4"}), svg);
}

// Points are joined in order of their GPUs whatever order the sweep listed
// them in, and the ideal line and the efficiency start from the fewest GPUs
// that fit: Llama 3 8B under ZeRO-2 at micro-batch 8 needs 85.0 GiB on one
// node (out of memory), 77.5 on two, 73.7 on four (micro-batch 7 until its
// fused SwiGLU stopped counting a SiLU output, 2026-12-06: 78.2 on one).
TEST_F(ChartTest, NodeSweepJoinsByGpusAndScalesFromTheFewestThatFit) {
  const std::string svg =
      sweep("scaling.yaml", {"cluster.nodes=4,1,2", "model.preset=llama3-8b", "parallelism.zero_stage=2",
                             "parallelism.grad_sync=auto", "training.micro_batch=8"});
  const auto root = parse_chart(svg);
  const auto data = series_points(*root, "throughput");
  const auto ideal = series_points(*root, "ideal scaling");
  ASSERT_EQ(data.size(), 3U);
  ASSERT_EQ(ideal.size(), 2U);  // none at 8 GPUs, below the baseline (helper 139: it ran into the cross)
  EXPECT_LT(data[0].first, data[1].first);  // 8, 16, 32 GPUs left to right
  EXPECT_LT(data[1].first, data[2].first);
  EXPECT_EQ(ideal[0], data[1]);  // from 16 GPUs: the 8-GPU point does not fit
  EXPECT_EQ(ideal[1].first, data[2].first);
  EXPECT_TRUE(texts(*root).count("tokens/s per GPU vs the baseline"));
}

TEST_F(ChartTest, TwoKeysGiveOneLinePerValueOfTheSecond) {
  const auto root = parse_chart(sweep("scaling.yaml", {"cluster.nodes=1,2", "parallelism.pp=1,2"}));
  const auto solid = lines(*root, false);
  EXPECT_EQ(std::set<std::string>(solid.begin(), solid.end()),
            (std::set<std::string>{"parallelism.pp=1", "parallelism.pp=2"}));
  EXPECT_EQ(solid.size(), 4U);  // in the throughput and the efficiency panel
  EXPECT_EQ(lines(*root, true).size(), 2U);  // an ideal line per series
  const auto t = texts(*root);
  EXPECT_TRUE(t.count("parallelism.pp=1"));  // the legend
  EXPECT_TRUE(t.count("parallelism.pp=2"));
  for (const Element* p : series(*root)) {
    EXPECT_EQ(points_of(p).size(), 2U) << attr(p, "data-name");  // nodes=1,2
    // both fit: one line through them
    ASSERT_EQ(drawn_lines(p).size(), 1U) << attr(p, "data-name");
    EXPECT_EQ(drawn_lines(p)[0], points_of(p));
  }
}

// A series out of memory at every point is drawn faded (no line, the
// outlines of its crosses at a third of their opacity) and named so in the
// legend, with no ideal line and no efficiency (no baseline fits: the table
// says `-`; helper 81: both were drawn, the efficiency at 100%); its
// crosses are drawn before every marker, so none hides a point that fits.
TEST_F(ChartTest, SeriesOutOfMemoryEverywhereIsFaded) {
  const std::string svg = sweep("scaling.yaml", {"cluster.nodes=1,2", "training.micro_batch=4,64"});
  const auto root = parse_chart(svg);
  int faded = 0, clear = 0;
  for (const Element* p : series(*root)) {
    const bool oom = attr(p, "data-name").find("training.micro_batch=64") != std::string::npos;
    EXPECT_EQ(attr(p, "stroke-opacity"), oom ? "0.3" : (attr(p, "stroke-dasharray").empty() ? "" : "0.8"))
        << attr(p, "data-name");
    EXPECT_EQ(drawn_lines(p).size(), oom ? 0U : 1U) << attr(p, "data-name");  // no line through crosses
    (oom ? faded : clear) += 1;
  }
  EXPECT_EQ(faded, 1);  // throughput only
  EXPECT_EQ(clear, 3);
  // Its two crosses, each in a faded outline of its series' marker, and
  // the legend's sample drawn so too (helper 139: a line and a marker, as
  // a series that fits).
  int outlines = 0;
  for (const Element* c : all(*root, "circle")) {
    if (attr(c, "fill") == "none" && attr(c, "stroke-opacity") == "0.3") ++outlines;
  }
  EXPECT_EQ(outlines, 3) << svg;
  const auto t = texts(*root);
  EXPECT_TRUE(t.count("training.micro_batch=64 (OOM at every point)")) << svg;
  EXPECT_TRUE(t.count("training.micro_batch=4")) << svg;
  // In the first panel the crosses come before the markers.
  const std::size_t first_marker = svg.find(R"(r="3.5")");
  ASSERT_NE(first_marker, std::string::npos);
  const std::size_t first_cross = svg.find(R"(stroke="#d62728" stroke-width="2.5")");
  ASSERT_NE(first_cross, std::string::npos);
  EXPECT_LT(first_cross, first_marker) << svg;
}

// Where nothing fits there is no baseline: no ideal line, no efficiency,
// and the legend does not promise one.
TEST_F(ChartTest, NoIdealLineWhereNothingFits) {
  const std::string svg = sweep("scaling.yaml", {"cluster.nodes=1,2,4", "training.micro_batch=64"});
  const auto root = parse_chart(svg);
  std::vector<std::string> lines;
  for (const Element* p : series(*root)) lines.push_back(attr(p, "data-name"));
  EXPECT_EQ(lines, std::vector<std::string>{"throughput"}) << svg;
  for (const std::string& t : texts(*root)) EXPECT_EQ(t.find("ideal scaling"), std::string::npos) << t;
  // The empty efficiency panel says why, on an axis from 0, not from a 90%
  // no point gave (helpers 82, 84).
  EXPECT_TRUE(texts(*root).count("Scaling efficiency per GPU: no point fits")) << svg;
  std::vector<std::string> percent_ticks;
  for (const Element* e : all(*root, "text")) {
    if (!e->text.empty() && e->text.back() == '%') percent_ticks.push_back(e->text);
  }
  ASSERT_FALSE(percent_ticks.empty()) << svg;
  EXPECT_EQ(percent_ticks.front(), "0%") << svg;
}

// Points out of memory have no efficiency (`-` in the table), where their
// series has a baseline that fits; no line runs to a point out of memory.
TEST_F(ChartTest, EfficiencyOnlyOfPointsThatFit) {
  // Llama 3 8B under ZeRO-2 at micro-batch 8: out of memory on one node,
  // fits on two and four.
  const auto root = parse_chart(
      sweep("scaling.yaml", {"cluster.nodes=1,2,4", "model.preset=llama3-8b", "parallelism.zero_stage=2",
                             "parallelism.grad_sync=auto", "training.micro_batch=8"}));
  std::vector<std::size_t> points;  // of each "throughput" series: the throughput panel's, the efficiency's
  for (const Element* p : series(*root)) {
    if (attr(p, "data-name") != "throughput") continue;
    points.push_back(points_of(p).size());
    // In both panels one line, through the two points that fit (16, 32 GPUs).
    const auto pts = points_of(p);
    ASSERT_EQ(drawn_lines(p).size(), 1U);
    EXPECT_EQ(drawn_lines(p)[0], (std::vector<std::pair<double, double>>(pts.end() - 2, pts.end())));
  }
  EXPECT_EQ(points, (std::vector<std::size_t>{3, 2}));
  EXPECT_NE(printed_.find(" -  OOM"), std::string::npos) << printed_;
}

TEST_F(ChartTest, ZippedKeysAreOneLineThroughTheirPoints) {
  // sweep --zip: point i takes every list's i-th value, so the other keys
  // change with the first, one combination each: one line through the
  // points (not one series per point), the keys named as set with it.
  const std::string svg =
      sweep("default.yaml",
            {"cluster.nodes=1,2,4", "parallelism.dp=8,16,32", "training.global_batch=64,128,256"}, true);
  const auto root = parse_chart(svg);
  const auto t = texts(*root);
  EXPECT_TRUE(
      t.count("swept: cluster.nodes (x axis: the points' GPU counts); parallelism.dp, "
              "training.global_batch (set with it, point by point)"))
      << fmt::format("{}", fmt::join(t, " | "));
  const auto solid = lines(*root, false);
  EXPECT_EQ(solid.size(), 2U);  // throughput and efficiency, one series
  for (const Element* p : series(*root)) {
    if (!attr(p, "stroke-dasharray").empty()) continue;
    ASSERT_EQ(drawn_lines(p).size(), 1U);
    EXPECT_EQ(drawn_lines(p)[0].size(), 3U);  // through all three points
  }
  // Three points, each its own pair of values, and the table's scaling
  // column: per-GPU throughput over the 8-GPU baseline's (the chart's second
  // panel), 100% at the baseline.
  EXPECT_NE(printed_.find("    2  cluster.nodes=4 parallelism.dp=32 training.global_batch=256"),
            std::string::npos)
      << printed_;
  EXPECT_NE(printed_.find("tokens/s  scaling\n"), std::string::npos) << printed_;
  EXPECT_NE(printed_.find("   100.0%\n    1  "), std::string::npos) << printed_;
  // Without GPUs on x there is no such column.
  fs::remove(dir_ / "s.csv");
  (void)sweep("default.yaml", {"training.micro_batch=1,2"});
  EXPECT_EQ(printed_.find("scaling"), std::string::npos) << printed_;
  // Two plans on one node count, then a larger one (the first key repeats
  // a value), and a list of one value holding for every point: still one
  // line, the one-value key said once.
  fs::remove(dir_ / "s.csv");
  const auto root2 = parse_chart(sweep(
      "default.yaml",
      {"cluster.nodes=2,2,4", "parallelism.dp=16,8,32", "parallelism.tp=1,2,1", "training.global_batch=256"},
      true));
  EXPECT_EQ(lines(*root2, false).size(), 2U) << fmt::format("{}", fmt::join(texts(*root2), " | "));
  EXPECT_NE(printed_.find("every point: training.global_batch=256\n"), std::string::npos) << printed_;
}

TEST_F(ChartTest, ZippedGpuModelsScaleFromBaselinesOfTheirOwn) {
  // --zip over whole configurations, two H100 sizes and an A100 one: each
  // GPU model is a line with its own baseline (helper 56: the A100 point's
  // scaling was its throughput per GPU over the 8-H100 baseline's, 51%).
  const auto root = parse_chart(sweep("scaling.yaml",
                                      {"cluster.gpu=H100-SXM,H100-SXM,A100-80GB", "cluster.nodes=1,2,2",
                                       "cluster.nic_bandwidth=400Gbps,400Gbps,200Gbps"},
                                      true));
  const auto t = texts(*root);
  EXPECT_TRUE(
      t.count("swept: cluster.gpu (x axis: the points' GPU counts); cluster.nodes, "
              "cluster.nic_bandwidth (set with it, point by point)"))
      << fmt::format("{}", fmt::join(t, " | "));
  const auto solid = lines(*root, false);
  EXPECT_EQ(std::set<std::string>(solid.begin(), solid.end()),
            (std::set<std::string>{"cluster.gpu=H100-SXM", "cluster.gpu=A100-80GB"}));
  const std::size_t a100 = printed_.find("    2  cluster.gpu=A100-80GB");
  ASSERT_NE(a100, std::string::npos) << printed_;
  const std::size_t eol = printed_.find('\n', a100);
  EXPECT_EQ(printed_.substr(eol - 6, 6), "100.0%") << printed_;
}

TEST_F(ChartTest, OneValueKeysAreSettingsNotSeries) {
  // A --set of one value after the first key is a fixed setting: a line
  // under the chart says it, and it neither makes nor names a series.
  const auto root = parse_chart(sweep("scaling.yaml", {"cluster.nodes=1,2", "training.micro_batch=2",
                                                       "parallelism.pp=1,2", "cluster.gpu=H100-SXM"}));
  const auto t = texts(*root);
  EXPECT_TRUE(
      t.count("swept: cluster.nodes (x axis: the GPU count it gives); parallelism.pp (one line per value)"))
      << fmt::format("{}", fmt::join(t, " | "));
  EXPECT_TRUE(t.count("Every point: training.micro_batch=2, cluster.gpu=H100-SXM"))
      << fmt::format("{}", fmt::join(t, " | "));
  const auto solid = lines(*root, false);
  EXPECT_EQ(std::set<std::string>(solid.begin(), solid.end()),
            (std::set<std::string>{"parallelism.pp=1", "parallelism.pp=2"}));
  // Only one-value keys besides the first: one series, no legend line for it.
  fs::remove(dir_ / "s.csv");
  const auto single =
      parse_chart(sweep("default.yaml", {"training.micro_batch=1,2", "cluster.gpu=A100-80GB"}));
  EXPECT_TRUE(texts(*single).count("swept: training.micro_batch (x axis)"));
  EXPECT_TRUE(texts(*single).count("Every point: cluster.gpu=A100-80GB"));
  EXPECT_EQ(lines(*single, false), std::vector<std::string>{"throughput"});
}

TEST_F(ChartTest, SweepThatKeepsTheGpusHasNoEfficiencyPanel) {
  const std::string svg = sweep("default.yaml", {"training.micro_batch=1,2,4,8"});
  const auto root = parse_chart(svg);
  const auto t = texts(*root);
  EXPECT_TRUE(t.count("training.micro_batch (log scale)")) << svg;
  EXPECT_TRUE(t.count("throughput (tokens/s)"));
  EXPECT_FALSE(t.count("Scaling efficiency per GPU"));
  EXPECT_TRUE(lines(*root, true).empty());
  EXPECT_EQ(lines(*root, false).size(), 1U);
}

TEST_F(ChartTest, SweepChartCarriesTheForecastsCaveats) {
  // Points on an untested GPU, points on a GPU with a known bias and points
  // with 4-way or wider tensor parallelism are named under the chart (the
  // sweep's notes, short), each note a line of text of its own, wrapped
  // within the chart's width.
  const std::string svg =
      sweep("default.yaml", {"cluster.gpu=H100-SXM,B200", "parallelism.tp=1,4", "parallelism.dp=auto"});
  const auto root = parse_chart(svg);
  const auto t = texts(*root);
  // The chart shows no point numbers: points are named by the swept value
  // they share.
  EXPECT_TRUE(t.count("Untested GPU, points with cluster.gpu=B200: B200 (Blackwell): its kernel times are"))
      << svg;
  EXPECT_TRUE(t.count("extrapolated")) << svg;  // wrapped
  std::string bias;  // the Known bias note, its wrapped lines joined
  const double width = std::stod(attr(root.get(), "width"));
  for (const Element* e : all(*root, "text")) {
    if (e->text.rfind("Known bias", 0) == 0 || !bias.empty()) {
      if (!bias.empty() && e->text.rfind("Untested", 0) == 0) break;
      bias += (bias.empty() ? "" : " ") + e->text;
      EXPECT_LE(std::stod(attr(e, "x")) + chart::text_width(e->text, 12), width) << e->text;
    }
  }
  // The H100's own bias (16-bit on Hopper) for its points, then the plan's.
  EXPECT_EQ(
      bias,
      "Known bias, points with cluster.gpu=H100-SXM: H100-SXM at bf16, whose forecasts validate optimistic "
      "(docs/node_model.md) Known bias, points with parallelism.tp=4: 4-way tensor parallelism, whose "
      "forecasts "
      "validate optimistic (docs/calibration.md)")
      << svg;
  // Every point is on two nodes: tessera run's Untested scale, last.
  std::string scale;
  for (const Element* e : all(*root, "text")) {
    if (e->text.rfind("Untested scale", 0) == 0 || !scale.empty())
      scale += (scale.empty() ? "" : " ") + e->text;
  }
  EXPECT_EQ(scale,
            "Untested scale, every point: no multi-node run measured; network constants assumed "
            "(docs/calibration.md)")
      << svg;
  // A sweep without either (A100s, tp 1): no note.
  fs::remove(dir_ / "s.csv");
  const auto plain =
      texts(*parse_chart(sweep("default.yaml", {"training.micro_batch=1,2", "cluster.gpu=A100-80GB"})));
  for (const std::string& s : plain) {
    EXPECT_EQ(s.find("Known bias"), std::string::npos);
    EXPECT_EQ(s.find("Untested GPU"), std::string::npos);
  }
}

TEST_F(ChartTest, CompareSchedulesHasTimeAndMemoryPanels) {
  const fs::path svg_path = dir_ / "c.svg";
  std::ostringstream out;
  ASSERT_EQ(cmd_compare_schedules({std::string(TESSERA_SCENARIO_DIR) + "/schedules.yaml", "--schedules",
                                   "gpipe,1f1b", "--svg", svg_path.string()},
                                  out),
            0);
  const std::string svg = read(svg_path);
  const auto root = parse_chart(svg);
  // Same input, same bytes.
  std::ostringstream again;
  ASSERT_EQ(cmd_compare_schedules({std::string(TESSERA_SCENARIO_DIR) + "/schedules.yaml", "--schedules",
                                   "gpipe,1f1b", "--svg", (dir_ / "again.svg").string()},
                                  again),
            0);
  EXPECT_EQ(read(dir_ / "again.svg"), svg);
  const auto t = texts(*root);
  EXPECT_TRUE(t.count("Iteration time"));
  EXPECT_TRUE(t.count("time per iteration (ms)"));
  EXPECT_TRUE(t.count("Peak memory per GPU"));
  EXPECT_TRUE(t.count("A100-80GB memory: 80 GiB")) << svg;
  std::size_t capacity = 0, memory_bars = 0;
  for (const Element* l : all(*root, "line")) capacity += attr(l, "class") == "capacity" ? 1 : 0;
  EXPECT_EQ(capacity, 1U);
  // 4 stacked parts per schedule, then one memory bar per schedule.
  const auto bars = all(*root, "rect");
  for (const Element* r : bars) memory_bars += attr(r, "class") == "bar" ? 1 : 0;
  EXPECT_EQ(memory_bars, 2U * 4 + 2);
  // The memory labels are the numbers the table prints (GiB, one decimal).
  std::vector<std::string> gib_labels;
  for (const Element* e : all(*root, "text")) {
    if (e->text.find(" GiB (stage ") != std::string::npos) gib_labels.push_back(e->text);
  }
  ASSERT_EQ(gib_labels.size(), 2U);
  // gpipe's bar is the largest per-stage number of its table row.
  std::istringstream table(out.str());
  bool found = false;
  for (std::string line; std::getline(table, line);) {
    if (line.rfind("gpipe ", 0) != 0) continue;
    found = true;
    std::istringstream words(line);
    std::vector<std::string> w;
    for (std::string x; words >> x;) w.push_back(x);
    const auto last_ms = std::find(w.rbegin(), w.rend(), "ms").base() + 1;  // past the MFU column
    double fullest = 0;
    std::size_t stage = 0;
    for (auto it = last_ms; it != w.end() && *it != "OOM"; ++it) {
      const double gib = std::stod(*it);
      if (gib > fullest) fullest = gib, stage = static_cast<std::size_t>(it - last_ms);
    }
    EXPECT_EQ(gib_labels.front().rfind(fmt::format("{:.1f} GiB (stage {})", fullest, stage), 0), 0U)
        << gib_labels.front() << " vs " << line;
  }
  EXPECT_TRUE(found) << out.str();
}

// A schedule out of memory says so on its time bar too, and the chart
// carries the text's Known bias lines (helper 60: zb-h2 at 86 of 80 GiB
// looked like a choice, and the caveats were only in the text).
TEST_F(ChartTest, CompareSchedulesMarksOutOfMemoryTimesAndCarriesTheCaveats) {
  const fs::path svg_path = dir_ / "oom.svg";
  std::ostringstream out;
  ASSERT_EQ(cmd_compare_schedules({std::string(TESSERA_SCENARIO_DIR) + "/llama3-70b.yaml", "--schedules",
                                   "1f1b,zb-h2", "--svg", svg_path.string()},
                                  out),
            0);
  std::vector<std::string> ms_labels;
  std::set<std::string> notes;
  for (const std::string& s : texts(*parse_chart(read(svg_path)))) {
    if (s.find(" ms") != std::string::npos && std::isdigit(static_cast<unsigned char>(s.front())))
      ms_labels.push_back(s);
    if (s.rfind("Known bias: ", 0) == 0) notes.insert(s);
  }
  // zb-h2 (86.0 GiB) out of memory, 1f1b (40.6 GiB) not: the label with
  // zb-h2's iteration time from the table says so, the other does not.
  std::istringstream table(out.str());
  std::string zb_ms;
  for (std::string line; std::getline(table, line);) {
    if (line.rfind("zb-h2 ", 0) == 0) std::istringstream(line.substr(6)) >> zb_ms;
  }
  ASSERT_FALSE(zb_ms.empty()) << out.str();
  ASSERT_EQ(ms_labels.size(), 2U);
  for (const std::string& l : ms_labels) {
    const bool zb = l.rfind(fmt::format("{:.1f} ms", std::stod(zb_ms)), 0) == 0;
    EXPECT_EQ(l.find(", out of memory") != std::string::npos, zb) << l;
  }
  EXPECT_EQ(notes,
            (std::set<std::string>{
                "Known bias: H100-SXM at bf16, whose forecasts validate optimistic (docs/node_model.md)",
                "Known bias: FlashAttention timed as the full s x s square, so attention is pessimistic "
                "(docs/parallelism.md)",
                "Known bias: 8-way tensor parallelism, whose forecasts validate optimistic "
                "(docs/calibration.md)"}));
  // A100s at tp 2 on schedules.yaml: none.
  ASSERT_EQ(cmd_compare_schedules({std::string(TESSERA_SCENARIO_DIR) + "/schedules.yaml", "--schedules",
                                   "1f1b", "--svg", (dir_ / "plain.svg").string()},
                                  out),
            0);
  for (const std::string& s : texts(*parse_chart(read(dir_ / "plain.svg"))))
    EXPECT_EQ(s.find("Known bias"), std::string::npos);
}

TEST_F(ChartTest, LongCategoriesSlantManySeriesKeepTheirColours) {
  // Model presets as categories do not fit their slots: written whole,
  // slanted, not cut to "llama..." (llama2-70b and llama3-70b would read
  // the same). Nine series (3 x 3) take nine colours. Two keys of lines
  // do not fit on the subtitle: they go to a line under the legend.
  const std::string svg = sweep(
      "default.yaml", {"model.preset=gpt3-xl,llama3-8b,deepseek-moe-16b,llama2-70b,llama3-70b,llama3-405b",
                       "parallelism.zero_stage=0,1,3", "training.micro_batch=1,2,4"});
  const auto root = parse_chart(svg);
  const auto t = texts(*root);
  int slanted = 0;
  for (const Element* e : all(*root, "text")) {
    if (attr(e, "transform").rfind("rotate(-35 ", 0) == 0) ++slanted;
  }
  EXPECT_EQ(slanted, 6) << svg;
  for (const char* name : {"deepseek-moe-16b", "llama2-70b", "llama3-70b", "llama3-405b"}) {
    EXPECT_TRUE(t.count(name)) << name << "\n" << svg;
  }
  std::set<std::string> colours;
  for (const Element* p : series(*root)) {
    if (attr(p, "stroke-dasharray").empty()) colours.insert(attr(p, "stroke"));
    // Presets are categories: their points are not joined by a line.
    EXPECT_TRUE(drawn_lines(p).empty()) << attr(p, "data-name");
    EXPECT_EQ(points_of(p).size(), 6U) << attr(p, "data-name");
  }
  // nor in the legend: its samples are markers alone
  for (const Element* l : all(*root, "line")) EXPECT_NE(attr(l, "stroke-width"), "2") << svg;
  EXPECT_EQ(colours.size(), 9U) << svg;
  EXPECT_TRUE(t.count("swept: model.preset (x axis)")) << svg;
  EXPECT_TRUE(t.count("One series per value of parallelism.zero_stage, training.micro_batch")) << svg;
}

// A line joins only neighbours that both fit: it stops at a flagged (out
// of memory) point and at a gap (NaN), and on a category axis there is none
// (a line between two model presets or schedules is no trend). The flagged
// point's cross sits in an outline of its series' marker, so it is still
// told apart from another series' without a line leading to it.
TEST(ChartLines, StopAtFlaggedPointsAndGapsAndDoNotJoinCategories) {
  chart::LinePanel p;
  p.x_scale = chart::XScale::Linear;
  p.x_ticks = {1, 2, 3, 4, 5, 6};
  chart::Series a{"a",
                  {1, 2, 3, 4, 5, 6},
                  {10, 20, 30, 40, 50, 60},
                  "#1f77b4",
                  false,
                  {false, false, true, false, false, false},
                  chart::Marker::Square};
  chart::Series b{"b", {1, 2, 3, 4, 5, 6}, {5, 6, std::nan(""), 8, 9, 10}, "#ff7f0e", false, {}};
  p.series = {a, b};
  const auto panel = [](const chart::LinePanel& lp) {
    return XmlParser("<svg>" + chart::line_panel(lp, 0, 0, 600, 300) + "</svg>").parse();
  };
  auto root = panel(p);
  const auto groups = series(*root);
  ASSERT_EQ(groups.size(), 2U);
  // a: 1-2, then 4-5-6 (3 is out of memory)
  EXPECT_EQ(points_of(groups[0]).size(), 6U);
  const auto la = drawn_lines(groups[0]);
  ASSERT_EQ(la.size(), 2U);
  EXPECT_EQ(la[0].size(), 2U);
  EXPECT_EQ(la[1].size(), 3U);
  EXPECT_EQ(la[0].back(), points_of(groups[0])[1]);
  EXPECT_EQ(la[1].front(), points_of(groups[0])[3]);
  // b: the gap at 3 is no point at all
  EXPECT_EQ(points_of(groups[1]).size(), 5U);
  const auto lb = drawn_lines(groups[1]);
  ASSERT_EQ(lb.size(), 2U);
  EXPECT_EQ(lb[0].size(), 2U);
  EXPECT_EQ(lb[1].size(), 3U);
  // One cross, in a square outline of a's colour; 5 + 5 markers.
  std::size_t crosses = 0, outlines = 0, markers = 0;
  for (const Element* e : all(*root, "path")) crosses += attr(e, "class") == "flagged" ? 1 : 0;
  for (const Element* e : all(*root, "rect")) {
    if (attr(e, "fill") == "none" && attr(e, "stroke") == "#1f77b4") ++outlines;
    if (attr(e, "fill") == "#1f77b4") ++markers;
  }
  for (const Element* e : all(*root, "circle")) markers += attr(e, "fill") == "#ff7f0e" ? 1 : 0;
  EXPECT_EQ(crosses, 1U);
  EXPECT_EQ(outlines, 1U);
  EXPECT_EQ(markers, 10U);
  // Categories: the same points, no lines.
  p.x_scale = chart::XScale::Category;
  p.categories = {"u", "v", "w", "x", "y", "z"};
  for (chart::Series& ser : p.series) ser.x = {0, 1, 2, 3, 4, 5};
  root = panel(p);
  for (const Element* g : series(*root)) EXPECT_TRUE(drawn_lines(g).empty()) << attr(g, "data-name");
  EXPECT_EQ(points_of(series(*root)[0]).size(), 6U);
  // A reference (dashed) series is a line on any axis.
  p.series.push_back({"ref", {0, 1, 2, 3, 4, 5}, {1, 1, 1, 1, 1, 1}, "#777", true, {}});
  root = panel(p);
  ASSERT_EQ(series(*root).size(), 3U);
  EXPECT_EQ(attr(series(*root)[0], "data-name"), "ref");  // drawn first, under the data
  EXPECT_EQ(drawn_lines(series(*root)[0]).size(), 1U);
}

// A point that fits, drawn on another series' out-of-memory cross at the
// same x, is drawn after the cross and ringed in white, so it stays visible
// (helper 157: an orange dot at the middle of a red cross read as part of
// it); a point away from every cross is drawn plain.
TEST(ChartLines, PointOnAnotherSeriesCrossIsHaloed) {
  chart::LinePanel p;
  p.x_scale = chart::XScale::Log;
  p.y_log = true;
  p.x_ticks = {128, 256, 512};
  chart::Series a{"a", {128, 256, 512}, {4400, 8700, 17000}, "#1f77b4", false, {true, true, false}};
  chart::Series b{"b", {128, 256, 512}, {2000, 8400, 16500}, "#ff7f0e", false, {false, true, false}};
  p.series = {a, b};
  const std::string svg = "<svg>" + chart::line_panel(p, 0, 0, 600, 300) + "</svg>";
  const auto root = XmlParser(svg).parse();
  std::map<std::string, std::vector<const Element*>> markers;  // colour -> its filled markers
  for (const Element* c : all(*root, "circle")) {
    if (attr(c, "fill") != "none") markers[attr(c, "fill")].push_back(c);
  }
  ASSERT_EQ(markers["#1f77b4"].size(), 1U) << svg;  // a at 512
  ASSERT_EQ(markers["#ff7f0e"].size(), 2U) << svg;  // b at 128 and 512
  // a's point at 512 lies on no cross; b's at 128 neither (a's cross there
  // is far above it); b's at 512 is near a's point, which fits: no halo.
  for (const auto& [colour, ms] : markers) {
    for (const Element* m : ms) EXPECT_EQ(attr(m, "class"), "") << svg;
  }
  // b fits at 256, on a's cross there: haloed, and drawn after every cross.
  p.series[1].flagged = {false, false, false};
  const std::string svg2 = "<svg>" + chart::line_panel(p, 0, 0, 600, 300) + "</svg>";
  const auto root2 = XmlParser(svg2).parse();
  std::size_t haloed = 0;
  for (const Element* c : all(*root2, "circle")) {
    if (attr(c, "class") != "over-flagged") continue;
    ++haloed;
    EXPECT_EQ(attr(c, "fill"), "#ff7f0e") << svg2;
    EXPECT_EQ(attr(c, "stroke"), "white") << svg2;
    EXPECT_EQ(attr(c, "paint-order"), "stroke") << svg2;
  }
  EXPECT_EQ(haloed, 1U) << svg2;
  EXPECT_LT(svg2.rfind(R"(class="flagged")"), svg2.find(R"(class="over-flagged")")) << svg2;
}

TEST(ChartMarkers, SeriesPastThePaletteChangeTheirMarker) {
  // 16 series: the 15th and 16th repeat the first two colours, so they are
  // drawn (and shown in the legend) with squares, not circles; no two of
  // the 56 (colour, marker) pairs are the same.
  std::set<std::pair<std::string, chart::Marker>> looks;
  for (std::size_t i = 0; i < 56; ++i) looks.insert({chart::color(i), chart::marker(i)});
  EXPECT_EQ(looks.size(), 56U);
  EXPECT_EQ(chart::color(14), chart::color(0));
  EXPECT_EQ(chart::marker(0), chart::Marker::Circle);
  EXPECT_EQ(chart::marker(14), chart::Marker::Square);
  EXPECT_EQ(chart::marker(28), chart::Marker::Triangle);
  EXPECT_EQ(chart::marker(42), chart::Marker::Diamond);

  chart::LinePanel panel;
  panel.x_ticks = {1, 2};
  std::vector<chart::LegendEntry> entries;
  for (std::size_t i = 0; i < 16; ++i) {
    panel.series.push_back(
        {fmt::format("s{}", i), {1, 2}, {1.0 + i, 2.0 + i}, chart::color(i), false, {}, chart::marker(i)});
    entries.push_back({fmt::format("s{}", i), chart::color(i), false, false, false, false, chart::marker(i)});
  }
  double h = 0;
  const std::string svg =
      fmt::format(R"(<svg xmlns="http://www.w3.org/2000/svg">{}{}</svg>)",
                  chart::line_panel(panel, 0, 0, 600, 300), chart::legend(entries, 0, 300, 600, h));
  const auto root = XmlParser(svg).parse();
  std::map<std::string, int> circles, squares;
  for (const Element* e : all(*root, "circle")) ++circles[attr(e, "fill")];
  for (const Element* e : all(*root, "rect")) {
    if (attr(e, "width") == "7") ++squares[attr(e, "fill")];
  }
  // Two points and one legend sample each.
  EXPECT_EQ(circles[chart::color(0)], 3) << svg;
  EXPECT_EQ(squares[chart::color(0)], 3) << svg;
  EXPECT_EQ(squares[chart::color(1)], 3) << svg;
  EXPECT_EQ(squares[chart::color(2)], 0) << svg;
}

}  // namespace
}  // namespace tessera::cli
