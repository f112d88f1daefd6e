#pragma once
// Output files: checked before any work is done, written whole or not at all.
#include <string>

namespace tessera::cli {

/// Throws InputError naming `path` (and the flag it came from) when the file
/// could not be created: its directory is missing or not writable.
void check_writable(const std::string& path, const std::string& flag);
/// Writes `content` to a temporary file beside `path`, then renames it over
/// `path`, so readers never see a partial file. Throws InputError.
void write_file_atomically(const std::string& path, const std::string& content);

}  // namespace tessera::cli
