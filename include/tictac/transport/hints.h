// tictac/transport/hints.h: ordering hints (tensor -> priority).
//
// When Channel::send() gets no explicit priority it asks the context's hint
// provider. A provider is called from the thread that calls send(), possibly
// several at once, so priorityOf() must be thread safe (the providers here are
// immutable after construction).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "tictac/transport/status.h"
#include "tictac/transport/types.h"

namespace tictac::transport {

class HintProvider {
 public:
  virtual ~HintProvider() = default;
  // The priority for this tensor, or nullopt to use the context's default.
  virtual std::optional<Priority> priorityOf(const TensorKey& tensor) const = 0;
};

// Matches tensors by name against a fixed table.
class NameHintProvider : public HintProvider {
 public:
  explicit NameHintProvider(std::unordered_map<std::string, Priority> table)
      : table_(std::move(table)) {}
  std::optional<Priority> priorityOf(const TensorKey& tensor) const override;
  size_t size() const { return table_.size(); }

 private:
  std::unordered_map<std::string, Priority> table_;
};

// Reads tictac-analyze output: one `name<TAB>priority` line per tensor (no
// header; blank lines and lines starting with '#' are skipped). Errors name the
// file and the line (kInvalidArgument for malformed input, kIoError when the
// file cannot be read). Priorities must fit in 32 bits.
Result<std::shared_ptr<NameHintProvider>> loadTsvHints(const std::string& path);
// Same, from text already in memory (`origin` names it in error messages).
Result<std::shared_ptr<NameHintProvider>> parseTsvHints(const std::string& text,
                                                        const std::string& origin);

}  // namespace tictac::transport
