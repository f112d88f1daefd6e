#include "tessera/cli/output.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "tessera/error.hpp"

namespace tessera::cli {

namespace fs = std::filesystem;

void check_writable(const std::string& path, const std::string& flag) {
  if (path.empty()) throw InputError(fmt::format("{}: empty output path", flag));
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
}

void write_file_atomically(const std::string& path, const std::string& content) {
  const std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw InputError(fmt::format("{}: cannot write: {}", path, std::strerror(errno)));
    out << content;
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      throw InputError(fmt::format("{}: write failed", path));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    throw InputError(fmt::format("{}: cannot write: {}", path, why));
  }
}

}  // namespace tessera::cli
