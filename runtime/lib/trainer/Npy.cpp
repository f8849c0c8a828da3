//===- Npy.cpp - NumPy .npy files of runtime tensors ----------------------===//
//
// The .npy header is a Python dict literal, e.g.
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// after a 6-byte magic, a 2-byte version and a 2-byte (v1) or 4-byte (v2,
// v3) little-endian header length. The parser accepts exactly that grammar:
// string keys, and string, boolean or integer-tuple values.
//
//===----------------------------------------------------------------------===//

#include "cleave/Runtime/Npy.h"

#include "cleave/Runtime/Float16.h"

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include <sys/stat.h>

using namespace cleave::rt;

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;

struct FileCloser {
  void operator()(FILE *f) const { std::fclose(f); }
};
using File = std::unique_ptr<FILE, FileCloser>;

bool fail(std::string &error, const std::string &path,
          const std::string &reason) {
  error = path + ": " + reason;
  return false;
}

std::string shapeToString(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

/// A cursor over the header dict.
class HeaderParser {
public:
  explicit HeaderParser(const std::string &text) : text(text) {}

  bool parse(std::string &descr, bool &fortran, std::vector<int64_t> &shape,
             std::string &why) {
    bool haveDescr = false, haveFortran = false, haveShape = false;
    if (!consume('{'))
      return bad(why, "expected '{'");
    while (!consume('}')) {
      std::string key;
      if (!parseString(key) || !consume(':'))
        return bad(why, "expected a quoted key and ':'");
      if (key == "descr") {
        if (!parseString(descr))
          return bad(why, "'descr' is not a simple type string (structured "
                          "arrays are not supported)");
        haveDescr = true;
      } else if (key == "fortran_order") {
        if (!parseBool(fortran))
          return bad(why, "'fortran_order' is not True or False");
        haveFortran = true;
      } else if (key == "shape") {
        if (!parseShape(shape))
          return bad(why, "'shape' is not a tuple of non-negative integers");
        haveShape = true;
      } else {
        return bad(why, "unexpected key '" + key + "'");
      }
      if (!consume(',') && !peek('}'))
        return bad(why, "expected ',' or '}'");
    }
    if (!haveDescr || !haveFortran || !haveShape)
      return bad(why, "missing 'descr', 'fortran_order' or 'shape'");
    return true;
  }

private:
  const std::string &text;
  size_t pos = 0;

  static bool bad(std::string &why, const std::string &reason) {
    why = "malformed header: " + reason;
    return false;
  }
  void skipSpace() {
    while (pos < text.size() && std::isspace((unsigned char)text[pos]))
      ++pos;
  }
  bool peek(char c) {
    skipSpace();
    return pos < text.size() && text[pos] == c;
  }
  bool consume(char c) {
    if (!peek(c))
      return false;
    ++pos;
    return true;
  }
  bool parseString(std::string &out) {
    skipSpace();
    if (pos >= text.size() || (text[pos] != '\'' && text[pos] != '"'))
      return false;
    char quote = text[pos++];
    size_t end = text.find(quote, pos);
    if (end == std::string::npos)
      return false;
    out = text.substr(pos, end - pos);
    pos = end + 1;
    return true;
  }
  bool parseBool(bool &out) {
    skipSpace();
    for (const char *word : {"True", "False"}) {
      size_t n = std::strlen(word);
      if (text.compare(pos, n, word) == 0) {
        out = word[0] == 'T';
        pos += n;
        return true;
      }
    }
    return false;
  }
  bool parseShape(std::vector<int64_t> &shape) {
    shape.clear();
    if (!consume('('))
      return false;
    while (!consume(')')) {
      skipSpace();
      size_t start = pos;
      int64_t v = 0;
      while (pos < text.size() && std::isdigit((unsigned char)text[pos])) {
        if (v > (INT64_MAX - 9) / 10)
          return false;
        v = v * 10 + (text[pos++] - '0');
      }
      // Python 2 era files may write long integers as "3L".
      if (pos < text.size() && text[pos] == 'L')
        ++pos;
      if (pos == start)
        return false;
      shape.push_back(v);
      if (!consume(',') && !peek(')'))
        return false;
    }
    return true;
  }
};

/// Bytes per element of a simple type string such as "<f4" or "|b1".
size_t itemSize(const std::string &descr) {
  if (descr.size() < 3)
    return 0;
  size_t n = 0;
  for (size_t i = 2; i < descr.size(); ++i) {
    if (!std::isdigit((unsigned char)descr[i]))
      return 0;
    n = n * 10 + size_t(descr[i] - '0');
  }
  return n;
}

} // namespace

bool cleave::rt::readNpy(const std::string &path, NpyArray &array,
                         std::string &error) {
  // A FIFO or a device would block the open or the read: only files.
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    return fail(error, path, "not a regular file");
  File f(std::fopen(path.c_str(), "rb"));
  if (!f)
    return fail(error, path,
                std::string("cannot open: ") + std::strerror(errno));
  unsigned char pre[kMagicSize + 2];
  if (std::fread(pre, 1, sizeof(pre), f.get()) != sizeof(pre) ||
      std::memcmp(pre, kMagic, kMagicSize) != 0)
    return fail(error, path, "not a .npy file (bad magic)");
  int major = pre[kMagicSize];
  if (major < 1 || major > 3)
    return fail(error, path,
                "unsupported .npy version " + std::to_string(major) + "." +
                    std::to_string(pre[kMagicSize + 1]));
  unsigned char len[4] = {0, 0, 0, 0};
  size_t lenBytes = major == 1 ? 2 : 4;
  if (std::fread(len, 1, lenBytes, f.get()) != lenBytes)
    return fail(error, path, "truncated header");
  size_t headerLen = size_t(len[0]) | size_t(len[1]) << 8 |
                     size_t(len[2]) << 16 | size_t(len[3]) << 24;
  // Sizes come from the file: check them against its length before
  // allocating, so that a corrupt header is an error and not a huge
  // allocation.
  long start = std::ftell(f.get());
  if (start < 0 || std::fseek(f.get(), 0, SEEK_END) != 0)
    return fail(error, path, "cannot determine the file size");
  size_t remaining = size_t(std::ftell(f.get()) - start);
  std::fseek(f.get(), start, SEEK_SET);
  if (headerLen > remaining)
    return fail(error, path, "truncated header");
  std::string header(headerLen, '\0');
  if (std::fread(&header[0], 1, headerLen, f.get()) != headerLen)
    return fail(error, path, "truncated header");
  bool fortran = false;
  std::string why;
  if (!HeaderParser(header).parse(array.descr, fortran, array.shape, why))
    return fail(error, path, why);
  if (fortran)
    return fail(error, path,
                "fortran_order arrays are not supported; save "
                "a C-order array (numpy.ascontiguousarray)");
  size_t item = itemSize(array.descr);
  if (item == 0)
    return fail(error, path, "unsupported dtype '" + array.descr + "'");
  if (array.descr[0] == '>' && item > 1)
    return fail(error, path,
                "big-endian dtype '" + array.descr + "' is not supported");
  size_t count = 1;
  for (int64_t d : array.shape) {
    if (d != 0 && count > SIZE_MAX / 16 / size_t(d))
      return fail(error, path,
                  "shape " + shapeToString(array.shape) + " is too large");
    count *= size_t(d);
  }
  size_t bytes = count * item;
  size_t got = remaining - headerLen;
  if (got >= bytes) {
    array.data.resize(bytes);
    got = bytes ? std::fread(array.data.data(), 1, bytes, f.get()) : 0;
  }
  if (got != bytes)
    return fail(error, path,
                "truncated data: expected " + std::to_string(bytes) +
                    " bytes for shape " + shapeToString(array.shape) + " of '" +
                    array.descr + "', got " + std::to_string(got));
  return true;
}

bool cleave::rt::writeNpy(const std::string &path, const std::string &descr,
                          const std::vector<int64_t> &shape, const void *data,
                          size_t bytes, std::string &error) {
  std::string dict = "{'descr': '" + descr +
                     "', 'fortran_order': False, "
                     "'shape': (";
  for (size_t i = 0; i < shape.size(); ++i)
    dict += (i ? ", " : "") + std::to_string(shape[i]);
  dict += shape.size() == 1 ? ",), }" : "), }";
  // Pad with spaces and a newline so that the data starts 64-byte aligned;
  // version 2.0 only when the padded header overflows v1's 16-bit length.
  auto padded = [&](size_t prefix) {
    return (prefix + dict.size() + 1 + 63) / 64 * 64 - prefix;
  };
  bool v2 = padded(kMagicSize + 4) > 65535;
  size_t headerLen = padded(kMagicSize + (v2 ? 6 : 4));
  dict.append(headerLen - dict.size() - 1, ' ');
  dict += '\n';
  std::string head(kMagic, kMagicSize);
  head += char(v2 ? 2 : 1);
  head += char(0);
  size_t n = dict.size();
  head += char(n & 0xff);
  head += char((n >> 8) & 0xff);
  if (v2) {
    head += char((n >> 16) & 0xff);
    head += char((n >> 24) & 0xff);
  }
  head += dict;
  File f(std::fopen(path.c_str(), "wb"));
  if (!f)
    return fail(error, path,
                std::string("cannot create: ") + std::strerror(errno));
  if (std::fwrite(head.data(), 1, head.size(), f.get()) != head.size() ||
      (bytes && std::fwrite(data, 1, bytes, f.get()) != bytes) ||
      std::fflush(f.get()) != 0)
    return fail(error, path,
                std::string("write failed: ") + std::strerror(errno));
  return true;
}

const char *cleave::rt::npyDescr(int32_t dtype) {
  switch (dtype) {
  case CLEAVE_F32:
  case CLEAVE_BF16:
    return "<f4";
  case CLEAVE_F16:
    return "<f2";
  case CLEAVE_I64:
    return "<i8";
  case CLEAVE_I32:
    return "<i4";
  case CLEAVE_I1:
    return "|b1";
  default:
    return nullptr;
  }
}

namespace {
const char *dtypeLabel(int32_t dtype) {
  const char *name = cleave_dtype_name(dtype);
  return name ? name : "unknown";
}
} // namespace

bool cleave::rt::loadTensorNpy(const std::string &path, const cleave_tensor &t,
                               void *dst, std::string &error) {
  const char *want = npyDescr(t.dtype);
  if (!want)
    return fail(error, path,
                "tensor has unknown dtype " + std::to_string(t.dtype));
  NpyArray array;
  if (!readNpy(path, array, error))
    return false;
  if (array.descr != want)
    return fail(error, path,
                std::string("expected dtype ") + dtypeLabel(t.dtype) + " ('" +
                    want + "'), got '" + array.descr + "'");
  std::vector<int64_t> shape(t.shape, t.shape + t.rank);
  if (array.shape != shape)
    return fail(error, path,
                "expected shape " + shapeToString(shape) + ", got " +
                    shapeToString(array.shape));
  if (t.dtype == CLEAVE_BF16) {
    size_t n = array.data.size() / 4;
    auto *out = static_cast<uint16_t *>(dst);
    for (size_t i = 0; i < n; ++i) {
      float v;
      std::memcpy(&v, array.data.data() + 4 * i, 4);
      out[i] = floatToBf16(v);
    }
    return true;
  }
  std::memcpy(dst, array.data.data(), array.data.size());
  return true;
}

bool cleave::rt::saveTensorNpy(const std::string &path, const cleave_tensor &t,
                               const void *src, std::string &error) {
  const char *descr = npyDescr(t.dtype);
  if (!descr)
    return fail(error, path,
                "tensor has unknown dtype " + std::to_string(t.dtype));
  std::vector<int64_t> shape(t.shape, t.shape + t.rank);
  size_t count = 1;
  for (int64_t d : shape)
    count *= size_t(d);
  if (t.dtype == CLEAVE_BF16) {
    std::vector<float> wide(count);
    const auto *in = static_cast<const uint16_t *>(src);
    for (size_t i = 0; i < count; ++i)
      wide[i] = bf16ToFloat(in[i]);
    return writeNpy(path, descr, shape, wide.data(), count * 4, error);
  }
  size_t item = t.dtype == CLEAVE_I64   ? 8
                : t.dtype == CLEAVE_F16 ? 2
                : t.dtype == CLEAVE_I1  ? 1
                                        : 4;
  return writeNpy(path, descr, shape, src, count * item, error);
}
