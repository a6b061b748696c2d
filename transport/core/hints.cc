#include "tictac/transport/hints.h"

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>

namespace tictac::transport {

std::optional<Priority> NameHintProvider::priorityOf(const TensorKey& tensor) const {
  if (tensor.name.empty()) return std::nullopt;
  auto it = table_.find(tensor.name);
  if (it == table_.end()) return std::nullopt;
  return it->second;
}

Result<std::shared_ptr<NameHintProvider>> parseTsvHints(const std::string& text,
                                                        const std::string& origin) {
  std::unordered_map<std::string, Priority> table;
  std::istringstream in(text);
  std::string line;
  size_t lineno = 0;
  auto bad = [&](const std::string& why) {
    return Status(StatusCode::kInvalidArgument, origin + ":" + std::to_string(lineno) + ": " + why);
  };
  while (std::getline(in, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    auto tab = line.find('\t');
    if (tab == std::string::npos || tab == 0) {
      return bad("expected 'name<TAB>priority', got '" + line + "'");
    }
    std::string name = line.substr(0, tab);
    std::string num = line.substr(tab + 1);
    if (auto extra = num.find('\t'); extra != std::string::npos) num = num.substr(0, extra);
    uint64_t value = 0;
    auto [ptr, ec] = std::from_chars(num.data(), num.data() + num.size(), value);
    if (ec != std::errc() || ptr != num.data() + num.size() || num.empty()) {
      return bad("priority '" + num + "' of '" + name + "' is not a non-negative integer");
    }
    if (value > UINT32_MAX) return bad("priority " + num + " of '" + name + "' exceeds 32 bits");
    if (!table.emplace(name, static_cast<Priority>(value)).second) {
      return bad("tensor '" + name + "' listed twice");
    }
  }
  return std::make_shared<NameHintProvider>(std::move(table));
}

Result<std::shared_ptr<NameHintProvider>> loadTsvHints(const std::string& path) {
  std::ifstream f(path);
  if (!f) {
    return Status(StatusCode::kIoError,
                  "cannot read hint file '" + path + "': " + std::strerror(errno));
  }
  std::stringstream ss;
  ss << f.rdbuf();
  return parseTsvHints(ss.str(), path);
}

}  // namespace tictac::transport
