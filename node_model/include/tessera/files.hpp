#pragma once
// Files in and out, the one place that reads an input file or replaces an
// output file. Inputs are read whole with a size cap (a scenario naming
// /dev/zero is an error, not an endless read); outputs are checked before any
// work is done and then written whole or not at all, through a short
// temporary name beside the target.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tessera {

/// Largest input file read (scenario, device JSON, kernel CSV, HF config,
/// fx graph, sweep CSV): 256 MiB. The largest shipped data file is 4 MiB.
inline constexpr std::int64_t kMaxInputFileBytes = std::int64_t{256} << 20;

/// Reads `path` whole. Throws InputError "PATH: cannot open WHAT" when it
/// cannot be opened, and one naming the cap when it holds more than
/// `max_bytes` (read no further than that: a device file never ends).
std::string read_input_file(const std::string& path, std::string_view what = "file",
                            std::int64_t max_bytes = kMaxInputFileBytes);

/// The temporary an output is written to before the rename: a hidden name in
/// the same directory, short enough for any file-name limit whatever the
/// output's name (`.NAME.tmp.PID`, NAME cut to 128 bytes).
std::string temporary_path(const std::string& path, long pid);

/// Where an output named `path` is written. A symbolic link is followed
/// (its target is replaced, the link kept); a path that exists and is not a
/// regular file (a device or pipe: /dev/stdout, /dev/null) is `direct`:
/// written in place, since a temporary renamed over it would replace it.
struct OutputTarget {
  std::string path;
  bool direct = false;
};
OutputTarget output_target(const std::string& path);

/// Writes `content` to `path` through temporary_path() and a rename, so
/// readers never see a partial file (beside a link's target, through the
/// link; a device or pipe in place: output_target). Throws InputError
/// naming the path and the system's reason; the temporary is removed on
/// failure.
void write_file_atomic(const std::string& path, std::string_view content);

/// The files one command reads and writes, checked before it does any work:
/// an output must not be one of the inputs (also through a link or another
/// spelling of the path), two outputs must not share a path, the directory
/// must exist and be writable (the output's temporary is made there and
/// removed: root passes access() even where no file can be made, /proc),
/// and an existing output must not be read-only or a directory. Temporaries left beside an output by a killed earlier run
/// (their process is gone) are removed. Every failure is an InputError naming
/// the flag or key and the path.
class FileSet {
 public:
  /// `what` names the input in messages ("the scenario", "--input").
  void input(const std::string& path, const std::string& what);
  /// Checks `path` against everything registered so far and the file system.
  void output(const std::string& path, const std::string& flag);

 private:
  struct Entry {
    std::string path;
    std::string name;
  };
  std::vector<Entry> inputs_;
  std::vector<Entry> outputs_;
};

}  // namespace tessera
