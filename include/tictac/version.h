// tictac/version.h: library version and the optional parts compiled in.
#pragma once

namespace tictac {

// "MAJOR.MINOR.PATCH" of the library linked at run time.
const char* versionString();
// Comma-separated optional parts present in this build, e.g. "ucx,verbs,onnx".
const char* buildFeatures();

}  // namespace tictac
