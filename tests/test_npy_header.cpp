// Hostile and unusual .npy headers: the parser must answer every one with a kiln::Error (or the
// right array) in bounded time and stack, never a crash. Regressions for issue 7 item 3.
#include <fstream>

#include "graph/npy_header.h"
#include "test_util.h"

using namespace kiln;
using kiln::test::expect_error;

namespace {
std::string tmp(const std::string& name) { return std::string(KILN_TEST_DATA_DIR) + "/" + name; }

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Magic, version, little-endian length (2 bytes in 1.0, 4 in 2.0/3.0) and the dict, padded
// with spaces and a newline to a multiple of 64 as NumPy writes it.
std::string npy_file(const std::string& dict, int version = 1) {
  size_t prefix = version == 1 ? 10 : 12;
  std::string h = dict;
  h.append((64 - (prefix + h.size() + 1) % 64) % 64, ' ');
  h.push_back('\n');
  std::string out = "\x93NUMPY";
  out.push_back(static_cast<char>(version));
  out.push_back(0);
  for (size_t i = 0; i < prefix - 8; ++i) out.push_back(static_cast<char>(h.size() >> (8 * i)));
  return out + h;
}

NpyHeader parse(const std::string& text) { return parse_npy_header(text, "t.npy"); }

void expect_header_error(const std::string& text, const std::vector<std::string>& parts) {
  SCOPED_TRACE(text.substr(0, 80));
  std::vector<std::string> all = {"load_npy", "t.npy", "bad header", "a .npy header is a dict"};
  all.insert(all.end(), parts.begin(), parts.end());
  expect_error([&] { parse(text); }, all);
}
}  // namespace

TEST(NpyHeader, ReadsWhatNumpyWrites) {
  NpyHeader h = parse("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }       \n");
  EXPECT_EQ(h.descr, "<f4");
  EXPECT_FALSE(h.fortran_order);
  EXPECT_EQ(h.shape, (Shape{2, 3}));
  // Any key order, double quotes, no trailing comma, Python 2 longs, 0-d and 1-d shapes.
  h = parse("{\"shape\": (7L,), \"fortran_order\": True, \"descr\": \"|b1\"}");
  EXPECT_EQ(h.descr, "|b1");
  EXPECT_TRUE(h.fortran_order);
  EXPECT_EQ(h.shape, Shape{7});
  EXPECT_EQ(parse("{'descr':'<i8','fortran_order':False,'shape':()}").shape, Shape{});
  EXPECT_EQ(parse("{'descr': '<i8', 'fortran_order': False, 'shape': (0, 4,), }").shape,
            (Shape{0, 4}));
}

TEST(NpyHeader, RejectsWhatIsNotTheThreeKeyDict) {
  expect_header_error("", {"must be a dict starting with '{'"});
  expect_header_error("['descr']", {"must be a dict"});
  expect_header_error("{'descr': '<f4', 'fortran_order': False}", {"no 'shape' entry"});
  expect_header_error("{'descr': '<f4', 'shape': (1,)}", {"no 'fortran_order' entry"});
  expect_header_error("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}",
                      {"unknown key 'x'", "'descr', 'fortran_order', 'shape'"});
  expect_header_error("{'descr': '<f4', 'descr': '<f8'}", {"'descr' appears twice"});
  expect_header_error("{'descr': <f4}", {"quoted string", "'descr' value"});
  expect_header_error("{'descr': '<f4\\n'}", {"escape sequences"});
  expect_header_error("{'descr': '<f4', 'fortran_order': false}", {"True or False"});
  expect_header_error("{'descr': '<f4', 'fortran_order': False, 'shape': [2, 3]}",
                      {"must be a tuple"});
  expect_header_error("{'descr': '<f4', 'fortran_order': False, 'shape': (4)}",
                      {"a 1-d shape is written (n,)"});
  expect_header_error("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3)}", {">= 0"});
  expect_header_error("{'descr': '<f4', 'fortran_order': False, 'shape': (2 3)}", {"',' or ')'"});
  expect_header_error("{'descr': '<f4' 'fortran_order': False}", {"',' or '}'"});
  expect_header_error("{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} junk",
                      {"after the closing '}'", "\"junk\""});
  expect_header_error("{'descr': '<f\x01'}", {"printable ASCII", "\\x01"});
}

TEST(NpyHeader, HostileHeadersFailFastWithoutRecursion) {
  // A 30 kB descr overflowed the stack of the old std::regex parser (131k frames).
  std::string huge = "{'descr': '" + std::string(30000, 'f') + "', 'fortran_order': False}";
  expect_header_error(huge, {"longer than 32 characters"});
  // A megabyte of nesting or of an unterminated string: linear, one error.
  expect_header_error("{'descr': " + std::string(1 << 20, '{'), {"quoted string"});
  expect_header_error(std::string(1 << 20, '{'), {"quoted string for a key"});
  expect_header_error("{'descr': '" + std::string(1 << 20, ' '), {"longer than 32"});
  expect_header_error(
      "{'descr': '<f4', 'fortran_order': False, 'shape': " + std::string(1 << 20, '('),
      {"integer extent"});
  // Numbers: 10^30 stops at 2^62 without overflowing; more dimensions than NumPy allows.
  expect_header_error(
      "{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000000000000000000000000,)}",
      {"larger than 2^62"});
  std::string many = "{'descr': '<f4', 'fortran_order': False, 'shape': (";
  for (int i = 0; i < 65; ++i) many += "1, ";
  expect_header_error(many + ")}", {"more than 64 dimensions"});
}

TEST(NpyHeader, TruncatedHeadersAreReported) {
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  for (size_t cut : {size_t{0}, size_t{1}, size_t{5}, size_t{12}, size_t{30}, dict.size() - 1}) {
    SCOPED_TRACE(cut);
    EXPECT_THROW(parse(dict.substr(0, cut)), Error);
  }
  expect_header_error("{'descr': '<f4", {"the string never ends"});
  expect_header_error("{'descr': '<f4', 'fortran_order': Fal", {"True or False"});
  expect_header_error("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3",
                      {"',' or ')'", "end of header"});
}

TEST(NpyHeader, FilesOfEveryVersion) {
  std::string dict = "{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }";
  int32_t data[3] = {7, -8, 9};
  std::string payload(reinterpret_cast<const char*>(data), sizeof data);
  for (int version : {1, 2, 3}) {
    std::string path = tmp("v" + std::to_string(version) + ".npy");
    write_bytes(path, npy_file(dict, version) + payload);
    EXPECT_EQ(load_npy(path).to_vector<int32_t>(), (std::vector<int32_t>{7, -8, 9})) << version;
  }
}

TEST(NpyHeader, HostileFilesAreRejected) {
  // A 30 kB descr in a version 2 file: over NumPy's header bound, refused before parsing.
  std::string big =
      npy_file("{'descr': '" + std::string(30000, 'f') + "', 'fortran_order': False}", 2);
  write_bytes(tmp("big_header.npy"), big);
  expect_error([] { load_npy(tmp("big_header.npy")); }, {"load_npy", "-byte header", "10000"});
  // Just under the bound, the parser itself answers.
  write_bytes(tmp("long_descr.npy"),
              npy_file("{'descr': '" + std::string(9000, 'f') + "', 'fortran_order': False}", 2));
  expect_error([] { load_npy(tmp("long_descr.npy")); }, {"load_npy", "longer than 32"});
  // Deep nesting inside the bound.
  write_bytes(tmp("nested.npy"), npy_file("{'descr': " + std::string(9000, '[') + "}", 2));
  expect_error([] { load_npy(tmp("nested.npy")); }, {"load_npy", "quoted string"});
  // Garbage bytes where the dict should be.
  std::string garbage;
  for (int i = 0; i < 600; ++i) garbage.push_back(static_cast<char>((i * 131 + 7) & 0xff));
  write_bytes(tmp("garbage.npy"), npy_file(garbage, 1));
  expect_error([] { load_npy(tmp("garbage.npy")); }, {"load_npy", "bad header"});
}

TEST(NpyHeader, TruncatedFilesAreRejected) {
  std::string file = npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", 2);
  write_bytes(tmp("cut_in_length.npy"), file.substr(0, 10));
  expect_error([] { load_npy(tmp("cut_in_length.npy")); }, {"load_npy", "header length"});
  write_bytes(tmp("cut_in_header.npy"), file.substr(0, 40));
  expect_error([] { load_npy(tmp("cut_in_header.npy")); },
               {"load_npy", "ends inside its header", "28 of"});
}

// A shape of 2^61 float64 passed the 2^62-element check, but its byte count wrapped to 0: the
// old loader then accepted a file with no data and returned an array with no buffer behind it.
TEST(NpyHeader, HugeShapesAreRefusedBeforeReadingData) {
  for (const char* shape :
       {"(2305843009213693952,)", "(4611686018427387904,)", "(1073741824, 1073741824, 4)"}) {
    SCOPED_TRACE(shape);
    write_bytes(tmp("huge.npy"), npy_file(std::string("{'descr': '<f8', 'fortran_order': False, "
                                                      "'shape': ") +
                                          shape + ", }"));
    expect_error([] { load_npy(tmp("huge.npy")); }, {"load_npy", "huge.npy", "2^62 bytes"});
  }
}
