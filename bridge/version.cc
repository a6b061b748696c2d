#include "tictac/version.h"

namespace tictac {

const char* versionString() {
  return TICTAC_VERSION;
}

const char* buildFeatures() {
  return TICTAC_FEATURES;
}

}  // namespace tictac
