#include "tessera/cli/interrupt.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <csignal>
#include <cstring>

namespace tessera::cli {

namespace {

// The process's one interrupt message (signal handlers can reach nothing else).
std::array<char, 1024> g_message{};
std::size_t g_length = 0;

extern "C" void on_signal(int /*sig*/) {
  // Clear a progress bar on a terminal, then the message.
  if (::isatty(STDERR_FILENO) != 0) (void)!::write(STDERR_FILENO, "\r\033[K", 4);
  (void)!::write(STDERR_FILENO, g_message.data(), g_length);
  ::_exit(130);
}

}  // namespace

void say_on_interrupt(const std::string& message) {
  const std::string line = "tessera: interrupted; " + message + "\n";
  g_length = std::min(line.size(), g_message.size());
  std::memcpy(g_message.data(), line.data(), g_length);
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
}

}  // namespace tessera::cli
