#pragma once
// "Did you mean": the known names nearest a mistyped one, for the hint an
// error about an unknown name gives (a command, option, scenario key, GPU
// preset, unit).
#include <string>
#include <string_view>
#include <vector>

namespace tessera {

/// `text` in ASCII lower case, for names a user may write in any case
/// (dtypes, frameworks, schedules, file extensions).
std::string ascii_lower(std::string_view text);
/// `text` without the spaces and tabs at either end (a CSV cell, a listed
/// value); empty when it holds nothing else.
std::string_view trim_blanks(std::string_view text);

/// The candidates a mistyped `name` most likely meant: those at the
/// smallest edit distance (insertions, deletions, substitutions, and swaps
/// of two neighbouring characters, each counting one; case ignored), if
/// that distance is at most a third of `name`'s length (at least 1), in
/// `candidates`' order. Never one whose digits differ from `name`'s (a
/// number is a size or a generation, not a typo: llama2-7b is not
/// llama2-70b). Empty when none is that close or `name` is a candidate.
std::vector<std::string> closest_names(const std::string& name, const std::vector<std::string>& candidates);
/// ", did you mean 'X'?" (", did you mean 'X' or 'Y'?" on a tie) for
/// closest_names (`prefix` and `suffix` around each instead of quotes), or
/// empty.
std::string did_you_mean(const std::string& name, const std::vector<std::string>& candidates,
                         const std::string& prefix = "'", const std::string& suffix = "'");

}  // namespace tessera
