#include "graph/npy_header.h"

#include <cstdint>

#include "graph/error.h"

namespace kiln {

namespace {

// Dtype strings Kiln reads are a few characters ('<f4'); a longer string is never valid, and
// bounding it keeps error messages short.
constexpr size_t kMaxString = 32;
// NumPy 2's NPY_MAXDIMS.
constexpr size_t kMaxRank = 64;
// Extents beyond this cannot pass check_shape; stopping here keeps the arithmetic in int64.
constexpr int64_t kMaxExtent = int64_t{1} << 62;

const char kExample[] = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";

// Up to 24 characters of `text` from `pos`, non-printable bytes as \xNN.
std::string excerpt(std::string_view text, size_t pos) {
  if (pos >= text.size()) return "end of header";
  std::string out = "\"";
  for (size_t i = pos; i < text.size() && i < pos + 24; ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f) {
      out.push_back(static_cast<char>(c));
    } else {
      const char hex[] = "0123456789abcdef";
      out.append("\\x").push_back(hex[c >> 4]);
      out.push_back(hex[c & 15]);
    }
  }
  return out + "\"";
}

// One forward pass over the header; every loop advances `pos`, nothing recurses.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& file) : text_(text), file_(file) {}

  NpyHeader parse() {
    skip_space();
    expect('{', "the header must be a dict starting with '{'");
    bool seen[3] = {false, false, false};
    NpyHeader h;
    skip_space();
    while (peek() != '}') {
      size_t key_pos = pos_;
      std::string key = read_string("a key");
      int k = key == "descr" ? 0 : key == "fortran_order" ? 1 : key == "shape" ? 2 : -1;
      if (k < 0)
        fail(key_pos, "unknown key '" + key + "' (valid keys: 'descr', 'fortran_order', 'shape')");
      if (seen[k]) fail(key_pos, "key '" + key + "' appears twice");
      seen[k] = true;
      skip_space();
      expect(':', "expected ':' after key '" + key + "'");
      skip_space();
      if (k == 0) h.descr = read_string("the 'descr' value (a dtype string such as '<f4')");
      if (k == 1) h.fortran_order = read_bool();
      if (k == 2) h.shape = read_shape();
      skip_space();
      if (peek() == ',') {
        ++pos_;
        skip_space();
      } else if (peek() != '}') {
        fail(pos_, "expected ',' or '}' after the value of '" + key + "'");
      }
    }
    ++pos_;
    skip_space();
    if (pos_ != text_.size()) fail(pos_, "unexpected characters after the closing '}'");
    const char* names[3] = {"descr", "fortran_order", "shape"};
    for (int k = 0; k < 3; ++k)
      if (!seen[k]) fail(pos_, std::string("the header has no '") + names[k] + "' entry");
    return h;
  }

 private:
  [[noreturn]] void fail(size_t at, const std::string& what) const {
    throw_error("load_npy: '", file_, "': bad header at byte ", at, " (", excerpt(text_, at),
                "): ", what, "; a .npy header is a dict like ", kExample);
  }

  int peek() const { return pos_ < text_.size() ? static_cast<unsigned char>(text_[pos_]) : -1; }

  void skip_space() {
    while (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r') ++pos_;
  }

  void expect(char c, const std::string& what) {
    if (peek() != c) fail(pos_, what);
    ++pos_;
  }

  // A Python string literal in single or double quotes, printable ASCII, no escapes.
  std::string read_string(const std::string& what) {
    int quote = peek();
    if (quote != '\'' && quote != '"') fail(pos_, "expected a quoted string for " + what);
    size_t start = ++pos_;
    while (peek() != quote) {
      int c = peek();
      if (c < 0) fail(start - 1, "the string never ends");
      if (c == '\\') fail(pos_, "escape sequences are not valid in " + what);
      if (c < 0x20 || c >= 0x7f) fail(pos_, "only printable ASCII is valid in " + what);
      if (pos_ - start >= kMaxString)
        fail(start - 1, what + " is longer than " + std::to_string(kMaxString) + " characters");
      ++pos_;
    }
    return std::string(text_.substr(start, pos_++ - start));
  }

  bool read_bool() {
    for (bool value : {true, false}) {
      std::string_view word = value ? "True" : "False";
      if (text_.substr(pos_, word.size()) == word) {
        pos_ += word.size();
        return value;
      }
    }
    fail(pos_, "'fortran_order' must be True or False");
  }

  // A tuple of non-negative integers: (), (4,), (2, 3) or (2, 3,); Python 2's 3L is accepted.
  Shape read_shape() {
    expect('(', "'shape' must be a tuple such as (2, 3) or (4,)");
    Shape shape;
    bool trailing_comma = false;
    skip_space();
    while (peek() != ')') {
      if (shape.size() == kMaxRank)
        fail(pos_, "'shape' has more than " + std::to_string(kMaxRank) + " dimensions");
      shape.push_back(read_extent());
      skip_space();
      trailing_comma = peek() == ',';
      if (trailing_comma) {
        ++pos_;
        skip_space();
      } else if (peek() != ')') {
        fail(pos_, "expected ',' or ')' in 'shape'");
      }
    }
    if (shape.size() == 1 && !trailing_comma)
      fail(pos_, "'shape' (n) is a number, not a tuple; a 1-d shape is written (n,)");
    ++pos_;
    return shape;
  }

  int64_t read_extent() {
    if (peek() == '-') fail(pos_, "extents in 'shape' must be >= 0");
    if (peek() < '0' || peek() > '9') fail(pos_, "expected an integer extent in 'shape'");
    size_t start = pos_;
    int64_t v = 0;
    while (peek() >= '0' && peek() <= '9') {
      int digit = peek() - '0';
      // Checked before multiplying: v * 10 itself must not overflow.
      if (v > (kMaxExtent - digit) / 10) fail(start, "an extent in 'shape' is larger than 2^62");
      v = v * 10 + digit;
      ++pos_;
    }
    if (peek() == 'L') ++pos_;
    return v;
  }

  std::string_view text_;
  const std::string& file_;
  size_t pos_ = 0;
};

}  // namespace

NpyHeader parse_npy_header(std::string_view text, const std::string& file) {
  return HeaderParser(text, file).parse();
}

}  // namespace kiln
