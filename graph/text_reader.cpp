#include "graph/text_reader.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <limits>

#include "graph/error.h"

namespace kiln {

TextReader::TextReader(std::string_view text, std::string source) : source_(std::move(source)) {
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    lines_.push_back(text.substr(start, end - start));
    start = end + 1;
  }
}

std::string_view TextReader::line() const { return done() ? std::string_view() : lines_[line_]; }

void TextReader::next_line() {
  if (done()) fail("more lines");
  ++line_;
  col_ = 0;
}

bool TextReader::accept(std::string_view literal) {
  std::string_view l = line();
  if (l.substr(col_, literal.size()) != literal) return false;
  col_ += literal.size();
  return true;
}

void TextReader::expect(std::string_view literal) {
  if (!accept(literal)) fail("'" + std::string(literal) + "'");
}

uint64_t TextReader::unsigned_integer() {
  std::string_view l = line();
  size_t start = col_;
  uint64_t v = 0;
  while (col_ < l.size() && std::isdigit(static_cast<unsigned char>(l[col_]))) {
    unsigned d = static_cast<unsigned>(l[col_] - '0');
    if (v > (std::numeric_limits<uint64_t>::max() - d) / 10) {
      col_ = start;
      fail("an integer below 2^64");
    }
    v = v * 10 + d;
    ++col_;
  }
  if (col_ == start) fail("an integer");
  return v;
}

int64_t TextReader::integer() {
  bool negative = accept("-");
  uint64_t v = unsigned_integer();
  uint64_t limit = negative ? uint64_t(1) << 63 : (uint64_t(1) << 63) - 1;
  if (v > limit) fail("an integer that fits in 64 bits");
  return negative ? static_cast<int64_t>(0 - v) : static_cast<int64_t>(v);
}

double TextReader::number() {
  std::string_view l = line();
  size_t start = col_;
  while (col_ < l.size() && (std::isalnum(static_cast<unsigned char>(l[col_])) || l[col_] == '.' ||
                             l[col_] == '-' || l[col_] == '+'))
    ++col_;
  std::string token(l.substr(start, col_ - start));
  if (token.empty()) fail("a number");
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(token.c_str(), &end);
  if (end != token.c_str() + token.size()) {
    col_ = start;
    fail("a number");
  }
  return v;
}

std::string TextReader::word() {
  std::string_view l = line();
  size_t start = col_;
  while (col_ < l.size() && (std::isalnum(static_cast<unsigned char>(l[col_])) || l[col_] == '_' ||
                             l[col_] == '.' || l[col_] == ':' || l[col_] == '-'))
    ++col_;
  if (col_ == start) fail("a name");
  return std::string(l.substr(start, col_ - start));
}

std::string TextReader::rest() {
  std::string_view l = line();
  std::string r(l.substr(std::min(col_, l.size())));
  col_ = l.size();
  return r;
}

void TextReader::expect_end_of_line() {
  if (!at_end_of_line()) fail("the end of the line");
}

void TextReader::fail(const std::string& expected) const {
  std::string found;
  if (done())
    found = "the end of the text";
  else if (col_ >= line().size())
    found = "the end of the line";
  else
    found = "'" + std::string(line().substr(col_, 20)) + "'";
  throw Error(source_ + ":" + std::to_string(line_number()) + ":" + std::to_string(col_ + 1) +
              ": expected " + expected + ", found " + found);
}

}  // namespace kiln
