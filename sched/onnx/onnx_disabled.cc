// loadOnnxGraph() of a build without ONNX support (-Donnx=disabled, or
// libonnx-dev / protobuf missing at configure time).
#include "sched/onnx/onnx_loader.h"

namespace tictac::sched {

Graph loadOnnxGraph(const std::string& path, std::vector<std::string>* /*warnings*/) {
  throw InputError(path +
                   ": this build has no ONNX support (install libonnx-dev and reconfigure "
                   "with -Donnx=enabled)");
}

}  // namespace tictac::sched
