// loom::sdk::Options: key/value options (plugin options, compile specs,
// compile options) as the ABI hands them over, already checked.
//
// Part of the header-only C++17 plugin SDK (include loom/plugin.hpp).
// An Options borrows the host's array: it is valid for the call it was
// handed to (plugin options: plugin_create; compile specs: executable_load;
// compile options: compile). Copy what you keep. Reading is thread-safe.
#ifndef LOOM_SDK_OPTIONS_HPP_
#define LOOM_SDK_OPTIONS_HPP_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "loom/plugin.h"
#include "loom/sdk/status.hpp"

namespace loom::sdk {

// Key/value options (plugin options or compile specs), checked on entry by
// the thunks (validate below): every entry is non-NULL, at least the 1.0
// size, with key and value set.
class Options {
 public:
  Options() = default;
  Options(const loom_option_t* const* items, size_t count) : items_(items), count_(count) {}

  size_t size() const { return count_; }
  const loom_option_t& operator[](size_t i) const { return *items_[i]; }
  // The value of `key`, or nullptr when absent (the last entry wins).
  const char* find(const char* key) const {
    const char* value = nullptr;
    for (size_t i = 0; i < count_; ++i) {
      if (std::strcmp(items_[i]->key, key) == 0) value = items_[i]->value;
    }
    return value;
  }
  // Parses an unsigned decimal option; `fallback` when absent, an error when
  // the value is not a number in [0, max].
  Status get_uint(const char* key, uint64_t fallback, uint64_t max, uint64_t* out) const {
    const char* v = find(key);
    if (v == nullptr) {
      *out = fallback;
      return Status();
    }
    uint64_t r = 0;
    const char* p = v;
    if (*p == '\0') return invalid_argument(std::string("option ") + key + " is empty");
    for (; *p != '\0'; ++p) {
      const uint64_t digit = static_cast<uint64_t>(*p - '0');
      if (*p < '0' || *p > '9' || digit > max || r > (max - digit) / 10) {
        return invalid_argument(std::string("option ") + key + "=\"" + v +
                                "\" is not a whole number from 0 to " + std::to_string(max));
      }
      r = r * 10 + static_cast<uint64_t>(*p - '0');
    }
    *out = r;
    return Status();
  }

  // Every entry non-NULL, of at least the 1.0 size, with key and value set.
  // `what` names the entries in messages ("option", "compile spec").
  static Status validate(const loom_option_t* const* items, size_t count, const char* what) {
    if (count != 0 && items == nullptr) {
      return invalid_argument(std::string(what) + ": " + std::to_string(count) +
                              " options but no array");
    }
    for (size_t i = 0; i < count; ++i) {
      const std::string where = std::string(what) + " " + std::to_string(i);
      if (items[i] == nullptr) return invalid_argument(where + " is NULL");
      LOOM_SDK_RETURN_IF_ERROR(check_struct_size(where.c_str(), "loom_option_t",
                                                  items[i]->struct_size, LOOM_OPTION_V1_0_SIZE));
      if (items[i]->key == nullptr || items[i]->value == nullptr) {
        return invalid_argument(where + " has a NULL key or value");
      }
    }
    return Status();
  }

 private:
  const loom_option_t* const* items_ = nullptr;
  size_t count_ = 0;
};

}  // namespace loom::sdk

#endif  // LOOM_SDK_OPTIONS_HPP_
