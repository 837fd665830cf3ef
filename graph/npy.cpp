#include "graph/npy.h"

#include <cstring>
#include <fstream>
#include <sstream>

#include "graph/array_node.h"
#include "graph/npy_header.h"
#include "graph/ops.h"

namespace kiln {

namespace {

const char kMagic[] = "\x93NUMPY";

// NumPy's type strings, little-endian. NumPy has no bfloat16: MLX and NumPy with ml_dtypes
// write it as the 2-byte void type '<V2', and MLX reads '<V2' back as bfloat16; Kiln does both.
std::string descr_of(Dtype d) {
  switch (d.kind) {
    case Dtype::Kind::Bool: return "|b1";
    case Dtype::Kind::Int8: return "|i1";
    case Dtype::Kind::Int32: return "<i4";
    case Dtype::Kind::Int64: return "<i8";
    case Dtype::Kind::UInt8: return "|u1";
    case Dtype::Kind::UInt32: return "<u4";
    case Dtype::Kind::UInt64: return "<u8";
    case Dtype::Kind::Float16: return "<f2";
    case Dtype::Kind::BFloat16: return "<V2";
    case Dtype::Kind::Float32: return "<f4";
    case Dtype::Kind::Float64: return "<f8";
  }
  return "";
}

Dtype dtype_of_descr(const std::string& descr, const std::string& path) {
  std::string valid;
  for (Dtype d : kAllDtypes) {
    std::string want = descr_of(d);
    // '=' (native order) and '|' (order not applicable) read as little-endian, the order of
    // every host Kiln runs on.
    bool order = descr.size() == 3 && (descr[0] == '<' || descr[0] == '=' || descr[0] == '|');
    if (order && descr.substr(1) == want.substr(1)) return d;
    valid += valid.empty() ? want : ", " + want;
  }
  throw_error("load_npy: ", path, ": dtype '", descr, "' is not supported (valid: ", valid,
              "; little-endian; '<V2' is read as bfloat16, as MLX writes it)");
}

// Row-major copy of a Fortran-ordered payload.
std::vector<char> from_fortran(const std::vector<char>& src, const Shape& shape, size_t elem) {
  int n = static_cast<int>(shape.size());
  std::vector<char> dst(src.size());
  std::vector<int64_t> f_strides(n, 1);
  for (int i = 1; i < n; ++i) f_strides[i] = f_strides[i - 1] * shape[i - 1];
  std::vector<int64_t> idx(n, 0);
  int64_t total = shape_size(shape);
  for (int64_t lin = 0; lin < total; ++lin) {
    int64_t off = 0;
    for (int i = 0; i < n; ++i) off += idx[i] * f_strides[i];
    std::memcpy(dst.data() + lin * elem, src.data() + off * elem, elem);
    for (int i = n - 1; i >= 0; --i) {
      if (++idx[i] < shape[i]) break;
      idx[i] = 0;
    }
  }
  return dst;
}

}  // namespace

Array load_npy(const std::string& path, StreamOrDevice s) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_error("load_npy: cannot open '", path, "'");
  char magic[6] = {};
  unsigned char ver[2] = {};
  in.read(magic, 6);
  in.read(reinterpret_cast<char*>(ver), 2);
  if (!in || std::memcmp(magic, kMagic, 6) != 0)
    throw_error("load_npy: '", path, "' is not a .npy file (missing the \\x93NUMPY magic)");
  if (ver[0] < 1 || ver[0] > 3)
    throw_error("load_npy: '", path, "' has format version ", int(ver[0]), ".", int(ver[1]),
                " (supported: 1.0 to 3.0)");
  uint32_t hlen = 0;
  unsigned char lb[4] = {};
  in.read(reinterpret_cast<char*>(lb), ver[0] == 1 ? 2 : 4);
  hlen = lb[0] | (lb[1] << 8) | (ver[0] == 1 ? 0u : (lb[2] << 16) | (uint32_t(lb[3]) << 24));
  if (!in) throw_error("load_npy: '", path, "' ends inside its header length field");
  if (hlen > kNpyMaxHeaderBytes)
    throw_error("load_npy: '", path, "' has a ", hlen, "-byte header (at most ", kNpyMaxHeaderBytes,
                " bytes are read, as NumPy does)");
  std::string header(hlen, '\0');
  in.read(header.data(), hlen);
  if (!in)
    throw_error("load_npy: '", path, "' ends inside its header (", in.gcount(), " of ", hlen,
                " bytes present)");

  NpyHeader h = parse_npy_header(header, path);
  Dtype dtype = dtype_of_descr(h.descr, path);
  bool fortran = h.fortran_order;
  Shape shape = std::move(h.shape);
  size_t nbytes = 0;
  try {
    nbytes = checked_nbytes(shape, dtype, "load_npy");  // also checks the shape
  } catch (const Error& e) {
    throw_error("load_npy: '", path, "': ", e.what());
  }
  // Compare with what the file holds before allocating: a lying header must not exhaust memory.
  std::streampos here = in.tellg();
  in.seekg(0, std::ios::end);
  std::streamoff available = in.tellg() - here;
  in.seekg(here);
  if (available < 0 || static_cast<size_t>(available) < nbytes)
    throw_error("load_npy: '", path, "' is truncated: shape ", shape, " of ", dtype, " needs ",
                nbytes, " bytes of data, found ", available < 0 ? 0 : available);
  std::vector<char> data(nbytes);
  in.read(data.data(), static_cast<std::streamsize>(nbytes));
  if (static_cast<size_t>(in.gcount()) != nbytes)
    throw_error("load_npy: '", path, "' is truncated: shape ", shape, " of ", dtype, " needs ",
                nbytes, " bytes of data, found ", in.gcount());
  if (dtype.is_bool())
    for (char& c : data)
      if (c != 0 && c != 1) throw_error("load_npy: '", path, "': bool data holds a byte not 0/1");
  if (fortran && shape.size() > 1) data = from_fortran(data, shape, dtype.size());
  return array_from_bytes(data.data(), nbytes, shape, dtype, std::move(s));
}

void save_npy(const std::string& path, const Array& a) {
  std::vector<char> data(a.nbytes());
  read_data(a, data.data());
  std::ostringstream h;
  h << "{'descr': '" << descr_of(a.dtype()) << "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < a.shape().size(); ++i)
    h << a.shape()[i] << (a.ndim() == 1 ? "," : "") << (i + 1 < a.shape().size() ? ", " : "");
  h << "), }";
  std::string header = h.str();
  // Pad with spaces so that magic + version + length + header + '\n' is a multiple of 64.
  size_t total = 6 + 2 + 2 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  std::ofstream out(path, std::ios::binary);
  if (!out) throw_error("save_npy: cannot open '", path, "' for writing");
  out.write(kMagic, 6);
  const char ver[2] = {1, 0};
  out.write(ver, 2);
  uint16_t len = static_cast<uint16_t>(header.size());
  const char lb[2] = {static_cast<char>(len & 0xff), static_cast<char>(len >> 8)};
  out.write(lb, 2);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  if (!out) throw_error("save_npy: writing '", path, "' failed");
}

}  // namespace kiln
