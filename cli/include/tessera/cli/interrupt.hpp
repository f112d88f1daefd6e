#pragma once
// Ctrl-C (SIGINT) and SIGTERM during a long command: one line saying what
// was saved, then exit code 130. The message is copied into a fixed buffer
// so that the signal handler only calls write(2) and _exit(2).
#include <string>

namespace tessera::cli {

/// Installs the handler with `message` (e.g. "nothing was written: outputs
/// are written when the run finishes"), printed as "tessera: interrupted; MESSAGE".
void say_on_interrupt(const std::string& message);

}  // namespace tessera::cli
