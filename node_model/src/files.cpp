#include "tessera/files.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "tessera/error.hpp"

namespace tessera {

namespace fs = std::filesystem;

namespace {

std::string mib_text(std::int64_t bytes) {
  return bytes % (1 << 20) == 0 ? fmt::format("{} MiB", bytes >> 20) : fmt::format("{} bytes", bytes);
}

/// The hidden prefix of an output's temporaries (".NAME.tmp.").
std::string temporary_prefix(const fs::path& target) {
  std::string name = target.filename().string();
  // 128 bytes of the name: with ".", ".tmp." and a pid the temporary stays
  // far below NAME_MAX (255) however long the output's name is.
  constexpr std::size_t kKept = 128;
  if (name.size() > kKept) name.resize(kKept);
  return "." + name + ".tmp.";
}

bool same_file(const std::string& a, const std::string& b) {
  std::error_code ea;
  std::error_code eb;
  if (fs::exists(a, ea) && fs::exists(b, eb)) {
    std::error_code ec;
    return fs::equivalent(a, b, ec);
  }
  std::error_code ec;
  const fs::path ca = fs::weakly_canonical(fs::absolute(a, ec), ec);
  const fs::path cb = fs::weakly_canonical(fs::absolute(b, ec), ec);
  return ca == cb;
}

/// Removes `.NAME.tmp.PID` files beside `target` whose process is gone (a
/// run killed while writing): they would otherwise never be cleaned.
void remove_stale_temporaries(const fs::path& target) {
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  const std::string prefix = temporary_prefix(target);
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) return;
  for (const auto& entry : it) {
    const std::string name = entry.path().filename().string();
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string digits = name.substr(prefix.size());
    if (digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    const long pid = std::stol(digits);
    if (pid == static_cast<long>(::getpid())) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == -1 && errno == ESRCH) {
      std::error_code rm;
      fs::remove(entry.path(), rm);
    }
  }
}

}  // namespace

std::string read_input_file(const std::string& path, std::string_view what, std::int64_t max_bytes) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw InputError(fmt::format("{}: cannot open {}: is a directory", path, what));
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    // Why: the file is not there (a relative path is the working
    // directory's), or the system's reason (permissions).
    const int why = errno;
    throw InputError(fmt::format("{}: cannot open {}: {}", path, what,
                                 !fs::exists(path, ec) ? std::string("no such file") : std::strerror(why)));
  }
  std::string text;
  constexpr std::size_t kChunk = 1 << 16;
  char buffer[kChunk];
  while (in) {
    in.read(buffer, kChunk);
    text.append(buffer, static_cast<std::size_t>(in.gcount()));
    if (static_cast<std::int64_t>(text.size()) > max_bytes) {
      throw InputError(fmt::format("{}: {} is larger than {}, the limit for input files", path, what,
                                   mib_text(max_bytes)));
    }
  }
  if (in.bad()) throw InputError(fmt::format("{}: cannot read {}: {}", path, what, std::strerror(errno)));
  return text;
}

std::string temporary_path(const std::string& path, long pid) {
  const fs::path target(path);
  return (target.parent_path() / (temporary_prefix(target) + std::to_string(pid))).string();
}

OutputTarget output_target(const std::string& path) {
  std::error_code ec;
  const fs::file_status through = fs::status(path, ec);  // through any links
  if (fs::exists(through) && !fs::is_regular_file(through)) return {path, true};
  if (!fs::is_symlink(fs::symlink_status(path, ec))) return {path, false};
  if (fs::exists(through)) {
    const fs::path real = fs::canonical(path, ec);
    return {ec ? path : real.string(), false};
  }
  // A link to a file not written yet: the end of its chain.
  fs::path p(path);
  for (int hops = 0; hops < 40 && fs::is_symlink(fs::symlink_status(p, ec)); ++hops) {
    const fs::path to = fs::read_symlink(p, ec);
    if (ec) return {path, false};
    p = to.is_absolute() ? to : p.parent_path() / to;
  }
  return {p.string(), false};
}

void write_file_atomic(const std::string& path, std::string_view content) {
  const OutputTarget target = output_target(path);
  if (target.direct) {
    std::ofstream out(target.path, std::ios::binary);
    if (!out) throw InputError(fmt::format("{}: cannot write: {}", path, std::strerror(errno)));
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.flush();
    if (!out)
      throw InputError(
          fmt::format("{}: cannot write: {}", path, errno != 0 ? std::strerror(errno) : "write failed"));
    return;
  }
  const std::string tmp = temporary_path(target.path, static_cast<long>(::getpid()));
  auto fail = [&](const std::string& why) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw InputError(fmt::format("{}: cannot write: {}", path, why));
  };
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) fail(std::strerror(errno));
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.flush();
    if (!out) fail(errno != 0 ? std::strerror(errno) : "write failed");
  }
  std::error_code ec;
  fs::rename(tmp, target.path, ec);
  if (ec) fail(ec.message());
}

void FileSet::input(const std::string& path, const std::string& what) { inputs_.push_back({path, what}); }

void FileSet::output(const std::string& path, const std::string& flag) {
  if (path.empty()) throw InputError(fmt::format("{}: empty output path", flag));
  for (const auto& in : inputs_) {
    if (same_file(path, in.path)) {
      throw InputError(fmt::format("{} {}: refusing to overwrite {} ({}) with an output", flag, path, in.name,
                                   in.path));
    }
  }
  for (const auto& out : outputs_) {
    if (same_file(path, out.path)) {
      throw InputError(fmt::format("{} {}: the same file as {} {}: one output would be lost", flag, path,
                                   out.name, out.path));
    }
  }
  const fs::path p(path);
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw InputError(fmt::format("{} {}: cannot write: directory '{}' does not exist", flag, path, dir.string()));
  }
  if (fs::is_directory(p, ec)) throw InputError(fmt::format("{} {}: cannot write: is a directory", flag, path));
  if (::access(dir.c_str(), W_OK) != 0) {
    throw InputError(fmt::format("{} {}: cannot write: {}", flag, path, std::strerror(errno)));
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    // A read-only file is one its owner meant to keep: refuse to replace it
    // (also as root, who may write anything: hence the mode bits).
    if ((st.st_mode & (S_IWUSR | S_IWGRP | S_IWOTH)) == 0 || ::access(path.c_str(), W_OK) != 0) {
      throw InputError(fmt::format("{} {}: refusing to replace a read-only file", flag, path));
    }
    if (!S_ISREG(st.st_mode)) {
      throw InputError(fmt::format("{} {}: cannot write: not a regular file", flag, path));
    }
  }
  // access() answers yes to root for any directory not on a read-only mount,
  // /proc included, where no file can be made: the write then failed only
  // after all the work (helper 151: compare-schedules --svg /proc/x.svg). So
  // the temporary the write goes through (beside a regular file, or beside
  // where a new one goes) is made and removed here.
  const std::string probe = temporary_path(output_target(path).path, static_cast<long>(::getpid()));
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0 && errno != EEXIST) {
    throw InputError(fmt::format("{} {}: cannot write: {}", flag, path, std::strerror(errno)));
  }
  if (fd >= 0) {
    ::close(fd);
    ::unlink(probe.c_str());
  }
  remove_stale_temporaries(p);
  outputs_.push_back({path, flag});
}

}  // namespace tessera
