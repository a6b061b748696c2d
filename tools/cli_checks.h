// tools/cli_checks.h: CLI11 checks for the tools' numeric flags, with a short
// message naming the flag's rule (CLI11 2.1's own PositiveNumber and
// NonNegativeNumber print the range up to DBL_MAX, 300 digits, and let nan
// through; its unsigned conversion takes "-1" as 2^64-1 and saturates values
// past 2^64 instead of refusing them).
//
// Each check runs on the flag's text before CLI11 converts it; a failure is a
// CLI::ValidationError, which the tools turn into exit status 2.
#pragma once

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace tictac::tools {

// A finite number > 0 (positive) or >= 0 (!positive), and at most `max`
// (say, where the value becomes a time_t or a clock duration). Help shows
// POSITIVE or NONNEGATIVE, as CLI11's checks did.
inline CLI::Validator finiteNumber(bool positive, double max = HUGE_VAL) {
  return CLI::Validator(
      [positive, max](std::string& text) -> std::string {
        const char* s = text.c_str();
        char* end = nullptr;
        errno = 0;
        double v = std::strtod(s, &end);
        if (end == s || *end != '\0') return "'" + text + "' is not a number";
        const char* rule = positive ? "> 0" : ">= 0";
        if (errno == ERANGE && std::isfinite(v)) {
          return "'" + text + "' " +
                 (std::signbit(v) ? std::string("must be ") + rule
                                  : std::string("is too small to use"));
        }
        if (errno == ERANGE || !std::isfinite(v)) return "'" + text + "' is not a finite number";
        if (positive ? !(v > 0) : !(v >= 0)) return "'" + text + "' must be " + rule;
        if (v > max) {
          char limit[32];
          std::snprintf(limit, sizeof limit, "%g", max);
          return "'" + text + "' is above " + limit;
        }
        return {};
      },
      positive ? "POSITIVE" : "NONNEGATIVE");
}

// Decimal digits only, at most UINT64_MAX (the flag's own type may be
// narrower: CLI11 still refuses what does not fit it).
inline CLI::Validator unsignedInteger() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) {
          return "'" + text + "' is not a non-negative integer";
        }
        errno = 0;
        (void)std::strtoull(text.c_str(), nullptr, 10);
        if (errno == ERANGE) return "'" + text + "' is too large";
        return {};
      },
      "");
}

// A file name that is not empty ("--trace ''" was silently no trace).
inline CLI::Validator nonEmptyPath() {
  return CLI::Validator(
      [](std::string& text) -> std::string { return text.empty() ? "needs a file name" : ""; }, "");
}

}  // namespace tictac::tools
