// Line-oriented reading of Kiln's text forms (Kernel IR listings, AOT artifacts): a cursor over
// lines and columns whose every failure is a kiln::Error saying where (line:column) and what was
// expected. Linear and non-recursive, so hostile input cannot make it slow or deep.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

class TextReader {
 public:
  // `source` names the text in errors ("artifact model.kiln").
  TextReader(std::string_view text, std::string source);

  bool done() const { return line_ >= lines_.size(); }
  size_t line_number() const { return line_ + 1; }  // 1-based, for messages
  std::string_view line() const;                    // the current line, whole
  void next_line();                                 // the current line must be consumed
  bool at_end_of_line() const { return col_ >= line().size(); }

  bool accept(std::string_view literal);  // consumes it when it comes next
  void expect(std::string_view literal);
  int64_t integer();
  uint64_t unsigned_integer();
  double number();     // as printed with precision 17 (inf, nan accepted)
  std::string word();  // letters, digits and _ . : - (a name, a dtype, a device)
  std::string rest();  // the rest of the line
  void expect_end_of_line();

  [[noreturn]] void fail(const std::string& expected) const;

 private:
  std::vector<std::string_view> lines_;
  std::string source_;
  size_t line_ = 0, col_ = 0;
};

}  // namespace kiln
