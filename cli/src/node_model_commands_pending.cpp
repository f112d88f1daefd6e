// Temporary: the node-model commands are being implemented (issue 3).
#include "tessera/cli/commands.hpp"
#include "tessera/error.hpp"

namespace tessera::cli {
namespace {
[[noreturn]] void pending(const char* name) {
  throw InputError(std::string("'") + name + "' is not available in this build yet");
}
}  // namespace
int cmd_predict_kernels(const Args&, std::ostream&) { pending("predict-kernels"); }
int cmd_predict_model(const Args&, std::ostream&) { pending("predict-model"); }
int cmd_predict_graph(const Args&, std::ostream&) { pending("predict-graph"); }
int cmd_validate(const Args&, std::ostream&) { pending("validate"); }
int cmd_train_predictor(const Args&, std::ostream&) { pending("train-predictor"); }
}  // namespace tessera::cli
