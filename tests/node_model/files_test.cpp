// Input and output files (tessera/files.hpp) and the JSON reader's strictness:
// an output never replaces an input, another output or a read-only file; a
// temporary never outlives its run; /dev/zero is not read forever.
#include "tessera/files.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>

#include "tessera/error.hpp"
#include "tessera/node_model/json.hpp"

using namespace tessera;
namespace fs = std::filesystem;

namespace {

class FilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tessera_files_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    write("scenario.yaml", "name: x\n");
  }
  void TearDown() override {
    std::error_code ec;
    fs::permissions(dir_, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(dir_, ec);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  void write(const std::string& name, const std::string& text) const { std::ofstream(path(name)) << text; }
  static std::string error_of(const std::function<void()>& f) {
    try {
      f();
    } catch (const InputError& e) {
      return e.what();
    }
    return "no error";
  }
  fs::path dir_;
};

}  // namespace

TEST_F(FilesTest, OutputMustNotBeAnInput) {
  FileSet files;
  files.input(path("scenario.yaml"), "the scenario");
  EXPECT_EQ(error_of([&] { files.output(path("scenario.yaml"), "--json-out"); }),
            "--json-out " + path("scenario.yaml") + ": refusing to overwrite the scenario (" + path("scenario.yaml") +
                ") with an output");
  // Another spelling of the same path, and a symbolic link to it.
  EXPECT_NE(error_of([&] { files.output((dir_ / "." / "scenario.yaml").string(), "--trace"); }), "no error");
  fs::create_symlink(path("scenario.yaml"), path("link.json"));
  EXPECT_NE(error_of([&] { files.output(path("link.json"), "--links"); }).find("refusing to overwrite the scenario"),
            std::string::npos);
  // The file itself is untouched.
  std::ifstream in(path("scenario.yaml"));
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "name: x");
}

TEST_F(FilesTest, TwoOutputsMustNotShareAPath) {
  FileSet files;
  files.output(path("a.json"), "--json-out");
  EXPECT_EQ(error_of([&] { files.output(path("a.json"), "--links"); }),
            "--links " + path("a.json") + ": the same file as --json-out " + path("a.json") +
                ": one output would be lost");
  files.output(path("b.csv"), "--links");  // a different one is fine
}

TEST_F(FilesTest, ReadOnlyOrSpecialOutputsAreRefused) {
  write("ro.json", "keep me");
  fs::permissions(path("ro.json"), fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
  FileSet files;
  // (refused by its mode bits, also when running as root)
  EXPECT_EQ(error_of([&] { files.output(path("ro.json"), "--json-out"); }),
            "--json-out " + path("ro.json") + ": refusing to replace a read-only file");
  EXPECT_EQ(error_of([&] { files.output("/dev/null", "--trace"); }), "--trace /dev/null: cannot write: not a regular file");
  EXPECT_EQ(error_of([&] { files.output(dir_.string(), "--out"); }), "--out " + dir_.string() + ": cannot write: is a directory");
  EXPECT_NE(error_of([&] { files.output(path("missing/x.csv"), "--out"); }).find("does not exist"), std::string::npos);
  EXPECT_EQ(error_of([&] { files.output("", "--out"); }), "--out: empty output path");
}

TEST_F(FilesTest, AnOutputWhereNoFileCanBeMadeIsRefusedBeforeAnyWork) {
  // access() lets root write to /proc, where no file can be made: the check
  // makes the output's temporary and removes it (helper 151: the write failed
  // only after compare-schedules had printed its table).
  if (!fs::is_directory("/proc/self")) GTEST_SKIP() << "no /proc";
  FileSet files;
  const std::string err = error_of([&] { files.output("/proc/tessera_files_test.svg", "--svg"); });
  EXPECT_EQ(err.rfind("--svg /proc/tessera_files_test.svg: cannot write: ", 0), 0U) << err;
  // Where a file can be made, the check leaves nothing behind.
  files.output(path("chart.svg"), "--svg");
  int count = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir_)) ++count;
  EXPECT_EQ(count, 1);  // scenario.yaml
}

TEST_F(FilesTest, AnOutputThroughALinkReplacesItsTargetAndKeepsTheLink) {
  // A link to an existing file, and a link (relative) to one not written
  // yet: the link stays a link, its target gets the content. Before, the
  // rename replaced the link itself (as root, even /dev/stdout).
  write("t.csv", "orig");
  fs::create_symlink(path("t.csv"), path("l.csv"));
  write_file_atomic(path("l.csv"), "new");
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(path("l.csv"))));
  std::ifstream t(path("t.csv"));
  std::string text((std::istreambuf_iterator<char>(t)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "new");
  fs::create_symlink("later.csv", path("dangling.csv"));
  write_file_atomic(path("dangling.csv"), "made");
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(path("dangling.csv"))));
  EXPECT_TRUE(fs::is_regular_file(path("later.csv")));
  EXPECT_EQ(fs::file_size(path("later.csv")), 4U);
  // A device is written in place, never renamed over.
  EXPECT_TRUE(output_target("/dev/null").direct);
  EXPECT_FALSE(output_target(path("t.csv")).direct);
  EXPECT_EQ(output_target(path("l.csv")).path, fs::canonical(path("t.csv")).string());
}

TEST_F(FilesTest, TemporariesAreShortAndStaleOnesAreRemoved) {
  // A 250-byte name (NAME_MAX is 255): the temporary must still fit.
  const std::string long_name(250, 'x');
  const std::string tmp = temporary_path(path(long_name), 4194304);
  EXPECT_LE(fs::path(tmp).filename().string().size(), 255U);
  EXPECT_EQ(fs::path(tmp).parent_path(), dir_);
  write_file_atomic(path(long_name), "ok\n");
  EXPECT_TRUE(fs::exists(path(long_name)));
  // A temporary left by a killed run (no such process) beside an output is
  // removed when that output is checked; one of a live process is kept.
  const std::string stale = temporary_path(path("r.json"), 999999999);
  const std::string live = temporary_path(path("r.json"), 1);  // init is alive
  write(fs::path(stale).filename().string(), "partial");
  write(fs::path(live).filename().string(), "partial");
  FileSet files;
  files.output(path("r.json"), "--json-out");
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(live));
  // Only the output and the two files made above remain (no temporary of
  // the atomic write).
  int count = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir_)) ++count;
  EXPECT_EQ(count, 3);  // scenario.yaml, the long-named output, the live temporary
}

TEST_F(FilesTest, InputsAreCapped) {
  EXPECT_EQ(read_input_file(path("scenario.yaml"), "scenario file"), "name: x\n");
  EXPECT_EQ(error_of([] { (void)read_input_file("/dev/zero", "device file", 1 << 20); }),
            "/dev/zero: device file is larger than 1 MiB, the limit for input files");
  EXPECT_EQ(error_of([&] { (void)read_input_file(dir_.string(), "scenario file"); }),
            dir_.string() + ": cannot open scenario file: is a directory");
  EXPECT_EQ(error_of([&] { (void)read_input_file(path("nope.yaml"), "scenario file"); }),
            path("nope.yaml") + ": cannot open scenario file: no such file");
}

TEST(JsonStrictness, DuplicateKeysAndBadEscapesAreErrors) {
  namespace nm = tessera::node_model;
  auto error_of = [](const std::string& text) -> std::string {
    try {
      (void)nm::parse_json(text, "d.json");
    } catch (const InputError& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_NE(error_of(R"({"SMs": 108, "SMs": 132})").find("duplicate key \"SMs\""), std::string::npos);
  EXPECT_NE(error_of(R"({"a": {"b": 1, "b": 1}})").find("duplicate key \"b\""), std::string::npos);
  for (const char* bad : {R"(["\uZZZZ"])", R"(["\u12"])", R"(["\uD800"])", R"(["\uDC00x"])", R"(["\uD800\u0041"])"}) {
    EXPECT_NE(error_of(bad).find("bad \\u escape"), std::string::npos) << bad;
  }
  // Valid escapes decode to UTF-8, a surrogate pair to one 4-byte character.
  EXPECT_EQ(nm::parse_json(R"(["\u00e9\u20ac\ud83d\ude00"])", "d.json").array().at(0).string(),
            "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80");
  // A UTF-8 byte-order mark is read past; a byte that prints as nothing is
  // named by its value (helper 116: raw bytes in the one-line error).
  EXPECT_EQ(nm::parse_json("\xEF\xBB\xBF{\"SMs\": 108}", "d.json").find("SMs")->number(), 108.0);
  EXPECT_EQ(error_of(std::string("\x01{}")),
            "d.json: line 1, column 1: malformed JSON: unexpected byte 0x01 (not JSON text)");
  EXPECT_EQ(error_of("{\"a\": \xFF}"),
            "d.json: line 1, column 7: malformed JSON: unexpected byte 0xFF (not JSON text)");
}
