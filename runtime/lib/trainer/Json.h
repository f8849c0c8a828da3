//===- Json.h - the little JSON the trainer reads and writes ----*- C++ -*-===//
//
// A strict RFC 8259 parser (plus Python's NaN/Infinity spellings) for the
// safetensors header and the training config, and the writing helpers of
// the checkpoint, meta.json and the per-step log. Numbers keep their text so
// that 64-bit integers (shapes, offsets) read back exactly.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_TRAINER_JSON_H
#define CLEAVE_RUNTIME_TRAINER_JSON_H

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace cleave::rt::trainer {

struct JsonValue {
  enum Kind { Null, Bool, Number, String, Array, Object };
  Kind kind = Null;
  bool boolean = false;
  std::string text; ///< a String's value, or a Number's literal text
  std::vector<JsonValue> items;
  std::vector<std::pair<std::string, JsonValue>> members; ///< file order

  /// The member named `key`, or nullptr.
  const JsonValue *find(const std::string &key) const;
  /// A Number that is an integer in int64 range, else false.
  bool asInt64(int64_t &out) const;
};

/// Parses `text` (one value, surrounded only by whitespace). On failure
/// returns false and sets `error` to the reason and byte position.
bool parseJson(const std::string &text, JsonValue &value, std::string &error);

/// `s` as a JSON string literal, quotes included.
std::string jsonQuote(const std::string &s);

/// `v` with 9 significant digits (enough to round-trip an f32); `null` for
/// NaN and the infinities, which JSON does not have.
std::string jsonFloat(float v);
/// The same for people: "nan", "inf" and "-inf" where jsonFloat has null.
std::string floatText(float v);

} // namespace cleave::rt::trainer

#endif // CLEAVE_RUNTIME_TRAINER_JSON_H
