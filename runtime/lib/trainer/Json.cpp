//===- Json.cpp - the little JSON the trainer reads and writes ------------===//
//
// A recursive-descent parser with a depth limit (the input may be a
// corrupt or hostile checkpoint header) and the quoting of strings.
//
//===----------------------------------------------------------------------===//

#include "Json.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

using namespace cleave::rt::trainer;

const JsonValue *JsonValue::find(const std::string &key) const {
  for (const auto &[name, value] : members)
    if (name == key)
      return &value;
  return nullptr;
}

bool JsonValue::asInt64(int64_t &out) const {
  if (kind != Number || text.empty() ||
      text.find_first_of(".eE") != std::string::npos)
    return false;
  errno = 0;
  char *end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0')
    return false;
  out = v;
  return true;
}

namespace {

class Parser {
public:
  explicit Parser(const std::string &text) : text(text) {}

  bool parse(JsonValue &value, std::string &error) {
    if (!parseValue(value, 0) || (skipSpace(), pos != text.size())) {
      if (why.empty())
        why = "unexpected text";
      error = why + " at byte " + std::to_string(pos);
      return false;
    }
    return true;
  }

private:
  static constexpr int kMaxDepth = 64;
  const std::string &text;
  size_t pos = 0;
  std::string why;

  bool bad(const char *reason) {
    why = reason;
    return false;
  }
  void skipSpace() {
    while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\t' ||
                                 text[pos] == '\n' || text[pos] == '\r'))
      ++pos;
  }
  bool literal(const char *word) {
    size_t n = std::strlen(word);
    if (text.compare(pos, n, word) != 0)
      return false;
    pos += n;
    return true;
  }

  bool parseValue(JsonValue &v, int depth) {
    if (depth > kMaxDepth)
      return bad("nesting too deep");
    skipSpace();
    if (pos >= text.size())
      return bad("unexpected end");
    char c = text[pos];
    if (c == '{')
      return parseObject(v, depth);
    if (c == '[')
      return parseArray(v, depth);
    if (c == '"') {
      v.kind = JsonValue::String;
      return parseString(v.text);
    }
    for (bool b : {true, false})
      if (literal(b ? "true" : "false")) {
        v.kind = JsonValue::Bool;
        v.boolean = b;
        return true;
      }
    if (literal("null")) {
      v.kind = JsonValue::Null;
      return true;
    }
    for (const char *word : {"NaN", "Infinity", "-Infinity"})
      if (literal(word)) {
        v.kind = JsonValue::Number;
        v.text = word;
        return true;
      }
    return parseNumber(v);
  }

  bool parseObject(JsonValue &v, int depth) {
    v.kind = JsonValue::Object;
    ++pos;
    skipSpace();
    if (pos < text.size() && text[pos] == '}') {
      ++pos;
      return true;
    }
    while (true) {
      skipSpace();
      std::string key;
      if (pos >= text.size() || text[pos] != '"' || !parseString(key))
        return why.empty() ? bad("expected a string key") : false;
      skipSpace();
      if (pos >= text.size() || text[pos++] != ':')
        return bad("expected ':'");
      JsonValue member;
      if (!parseValue(member, depth + 1))
        return false;
      v.members.emplace_back(std::move(key), std::move(member));
      skipSpace();
      if (pos < text.size() && text[pos] == ',') {
        ++pos;
        continue;
      }
      if (pos < text.size() && text[pos] == '}') {
        ++pos;
        return true;
      }
      return bad("expected ',' or '}'");
    }
  }

  bool parseArray(JsonValue &v, int depth) {
    v.kind = JsonValue::Array;
    ++pos;
    skipSpace();
    if (pos < text.size() && text[pos] == ']') {
      ++pos;
      return true;
    }
    while (true) {
      JsonValue item;
      if (!parseValue(item, depth + 1))
        return false;
      v.items.push_back(std::move(item));
      skipSpace();
      if (pos < text.size() && text[pos] == ',') {
        ++pos;
        continue;
      }
      if (pos < text.size() && text[pos] == ']') {
        ++pos;
        return true;
      }
      return bad("expected ',' or ']'");
    }
  }

  static void appendUtf8(std::string &out, uint32_t cp) {
    if (cp < 0x80) {
      out += char(cp);
    } else if (cp < 0x800) {
      out += char(0xC0 | (cp >> 6));
      out += char(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += char(0xE0 | (cp >> 12));
      out += char(0x80 | ((cp >> 6) & 0x3F));
      out += char(0x80 | (cp & 0x3F));
    } else {
      out += char(0xF0 | (cp >> 18));
      out += char(0x80 | ((cp >> 12) & 0x3F));
      out += char(0x80 | ((cp >> 6) & 0x3F));
      out += char(0x80 | (cp & 0x3F));
    }
  }

  bool hex4(uint32_t &cp) {
    if (pos + 4 > text.size())
      return false;
    cp = 0;
    for (int i = 0; i < 4; ++i) {
      char c = text[pos++];
      cp <<= 4;
      if (c >= '0' && c <= '9')
        cp |= uint32_t(c - '0');
      else if (c >= 'a' && c <= 'f')
        cp |= uint32_t(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        cp |= uint32_t(c - 'A' + 10);
      else
        return false;
    }
    return true;
  }

  bool parseString(std::string &out) {
    ++pos; // the opening quote
    out.clear();
    while (pos < text.size()) {
      unsigned char c = (unsigned char)text[pos++];
      if (c == '"')
        return true;
      if (c < 0x20)
        return bad("control character in a string");
      if (c != '\\') {
        out += char(c);
        continue;
      }
      if (pos >= text.size())
        break;
      char e = text[pos++];
      switch (e) {
      case '"':
      case '\\':
      case '/':
        out += e;
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'u': {
        uint32_t cp;
        if (!hex4(cp))
          return bad("bad \\u escape");
        if (cp >= 0xD800 && cp < 0xDC00 && text.compare(pos, 2, "\\u") == 0) {
          size_t save = pos;
          pos += 2;
          uint32_t low;
          if (hex4(low) && low >= 0xDC00 && low < 0xE000)
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          else
            pos = save;
        }
        appendUtf8(out, cp);
        break;
      }
      default:
        return bad("bad escape in a string");
      }
    }
    return bad("unterminated string");
  }

  bool parseNumber(JsonValue &v) {
    size_t start = pos;
    if (pos < text.size() && text[pos] == '-')
      ++pos;
    auto digits = [&] {
      size_t s = pos;
      while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9')
        ++pos;
      return pos > s;
    };
    if (!digits())
      return bad("expected a value");
    if (pos < text.size() && text[pos] == '.') {
      ++pos;
      if (!digits())
        return bad("bad number");
    }
    if (pos < text.size() && (text[pos] == 'e' || text[pos] == 'E')) {
      ++pos;
      if (pos < text.size() && (text[pos] == '+' || text[pos] == '-'))
        ++pos;
      if (!digits())
        return bad("bad number");
    }
    v.kind = JsonValue::Number;
    v.text = text.substr(start, pos - start);
    return true;
  }
};

} // namespace

bool cleave::rt::trainer::parseJson(const std::string &text, JsonValue &value,
                                    std::string &error) {
  value = JsonValue();
  return Parser(text).parse(value, error);
}

std::string cleave::rt::trainer::jsonQuote(const std::string &s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\r':
      out += "\\r";
      break;
    case '\t':
      out += "\\t";
      break;
    default:
      if (c < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof(buf), "\\u%04x", c);
        out += buf;
      } else {
        out += char(c);
      }
    }
  }
  return out + "\"";
}

std::string cleave::rt::trainer::jsonFloat(float v) {
  if (!std::isfinite(v))
    return "null";
  return floatText(v);
}

std::string cleave::rt::trainer::floatText(float v) {
  if (std::isnan(v))
    return "nan";
  if (std::isinf(v))
    return v > 0 ? "inf" : "-inf";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.9g", double(v));
  return buf;
}
