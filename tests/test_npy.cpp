#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "test_util.h"

using namespace kiln;
using kiln::test::expect_error;

namespace {
std::string tmp(const std::string& name) { return std::string(KILN_TEST_DATA_DIR) + "/" + name; }

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string npy_header(const std::string& dict) {
  std::string h = dict;
  size_t total = 10 + h.size() + 1;
  h.append((64 - total % 64) % 64, ' ');
  h.push_back('\n');
  std::string out = "\x93NUMPY";
  out.push_back(1);
  out.push_back(0);
  out.push_back(static_cast<char>(h.size() & 0xff));
  out.push_back(static_cast<char>(h.size() >> 8));
  return out + h;
}
}  // namespace

TEST(Npy, RoundTripEveryDtype) {
  Array f = reshape(arange(0.0, 6.0, 1.0, float32), {2, 3});
  save_npy(tmp("f.npy"), f);
  Array g = load_npy(tmp("f.npy"));
  EXPECT_EQ(g.shape(), (Shape{2, 3}));
  EXPECT_EQ(g.dtype(), float32);
  EXPECT_EQ(g.to_vector<float>(), f.to_vector<float>());
  for (Dtype d : {bool_, int32, int64, float64}) {
    Array a = astype(array<double>({0, 1, -3, 2.5}, {4}), d);
    save_npy(tmp("d.npy"), a);
    Array b = load_npy(tmp("d.npy"));
    EXPECT_EQ(b.dtype(), d);
    EXPECT_EQ(b.to_vector<double>(), a.to_vector<double>()) << d;
  }
  save_npy(tmp("s.npy"), array(4.5));
  EXPECT_EQ(load_npy(tmp("s.npy")).shape(), Shape{});
  EXPECT_EQ(load_npy(tmp("s.npy")).item<double>(), 4.5);
  save_npy(tmp("e.npy"), zeros({0, 3}));
  EXPECT_EQ(load_npy(tmp("e.npy")).shape(), (Shape{0, 3}));
}

TEST(Npy, FortranOrder) {
  std::string bytes = npy_header("{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3), }");
  int32_t col_major[6] = {1, 4, 2, 5, 3, 6};  // the 2x3 matrix [[1,2,3],[4,5,6]]
  bytes.append(reinterpret_cast<const char*>(col_major), sizeof col_major);
  write_bytes(tmp("fortran.npy"), bytes);
  EXPECT_EQ(load_npy(tmp("fortran.npy")).to_vector<int32_t>(),
            (std::vector<int32_t>{1, 2, 3, 4, 5, 6}));
}

TEST(Npy, WrittenByNumpy) {
  std::string path = tmp("numpy.npy"), back = tmp("kiln_for_numpy.npy");
  std::string cmd = "/usr/bin/python3 -c \"import numpy as np; np.save('" + path +
                    "', np.arange(12, dtype=np.float64).reshape(3, 4) / 4)\" 2>/dev/null";
  if (std::system(cmd.c_str()) != 0)
    GTEST_SKIP() << "/usr/bin/python3 with numpy (python3-numpy) is not available";
  Array a = load_npy(path);
  EXPECT_EQ(a.shape(), (Shape{3, 4}));
  EXPECT_EQ(a.dtype(), float64);
  EXPECT_DOUBLE_EQ(a.to_vector<double>()[11], 2.75);
  // And NumPy reads what Kiln writes.
  save_npy(back, transpose(a));
  std::string check = "/usr/bin/python3 -c \"import numpy as np; a = np.load('" + back +
                      "'); assert a.shape == (4, 3) and a[3, 2] == 2.75 and a[1, 0] == 0.25\"";
  EXPECT_EQ(std::system(check.c_str()), 0);
}

TEST(Npy, MalformedFilesAreRejected) {
  expect_error([] { load_npy(tmp("does-not-exist.npy")); }, {"load_npy", "cannot open"});
  write_bytes(tmp("bad_magic.npy"), "hello world, not numpy");
  expect_error([] { load_npy(tmp("bad_magic.npy")); }, {"load_npy", "not a .npy"});
  std::string h = npy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }");
  write_bytes(tmp("truncated.npy"), h + std::string(8, '\0'));
  expect_error([] { load_npy(tmp("truncated.npy")); }, {"load_npy", "truncated", "16 bytes"});
  write_bytes(tmp("complex.npy"),
              npy_header("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }") +
                  std::string(8, '\0'));
  expect_error([] { load_npy(tmp("complex.npy")); }, {"load_npy", "<c8", "<f4"});
  write_bytes(tmp("bigendian.npy"),
              npy_header("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }") +
                  std::string(4, '\0'));
  expect_error([] { load_npy(tmp("bigendian.npy")); }, {"load_npy", ">f4"});
  write_bytes(tmp("noshape.npy"), npy_header("{'descr': '<f4', 'fortran_order': False, }"));
  expect_error([] { load_npy(tmp("noshape.npy")); }, {"load_npy", "shape"});
  write_bytes(tmp("header_cut.npy"), std::string("\x93NUMPY\x01\x00\xff\x00{'descr'", 17));
  expect_error([] { load_npy(tmp("header_cut.npy")); }, {"load_npy", "header"});
  expect_error([] { save_npy("/nonexistent-dir/a.npy", zeros({1})); }, {"save_npy", "cannot open"});
  // A header claiming far more data than the file holds is rejected before allocating.
  write_bytes(
      tmp("liar.npy"),
      npy_header("{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000, 1000), }") +
          std::string(64, '\0'));
  expect_error([] { load_npy(tmp("liar.npy")); }, {"load_npy", "truncated"});
  write_bytes(
      tmp("overflow.npy"),
      npy_header("{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296), }"));
  expect_error([] { load_npy(tmp("overflow.npy")); }, {"load_npy", "2^62"});
}
