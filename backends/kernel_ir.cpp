#include "backends/kernel_ir.h"

#include <cstring>
#include <sstream>

#include "graph/error.h"

namespace kiln {

namespace {

// FNV-1a over the fields, 64-bit: stable across runs and processes (the disk cache relies on it).
struct Hasher {
  uint64_t h = 0xcbf29ce484222325ULL;
  void bytes(const void* p, size_t n) {
    auto* c = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ c[i]) * 0x100000001b3ULL;
  }
  template <typename T>
  void pod(const T& v) {
    bytes(&v, sizeof v);
  }
  void dim(const Dim& d) {
    pod(d.value);
    pod(d.param);
  }
  void map(const IndexMap& m) {
    pod(m.strides.size());
    for (const Dim& d : m.strides) dim(d);
    dim(m.offset);
  }
};

std::string dim_str(const Dim& d) {
  return d.is_runtime() ? "p" + std::to_string(d.param) : std::to_string(d.value);
}

std::string map_str(const IndexMap& m) {
  std::string s = "[";
  for (size_t i = 0; i < m.strides.size(); ++i) s += (i ? "," : "") + dim_str(m.strides[i]);
  return s + "]+" + dim_str(m.offset);
}

}  // namespace

bool Value::operator==(const Value& o) const {
  return kind == o.kind && dtype == o.dtype && a == o.a && b == o.b && c == o.c &&
         buffer == o.buffer && map == o.map && constant == o.constant && unary == o.unary &&
         binary == o.binary && dist == o.dist && key == o.key;
}

uint64_t Kernel::hash() const {
  Hasher h;
  h.pod(domain.size());
  for (const Dim& d : domain) h.dim(d);
  h.pod(buffers.size());
  for (const KernelBuffer& b : buffers) {
    h.pod(b.dtype.kind);
    h.pod(b.output);
    h.map(b.map);
  }
  h.pod(body.size());
  for (const Value& v : body) {
    h.pod(v.kind);
    h.pod(v.dtype.kind);
    h.pod(v.a);
    h.pod(v.b);
    h.pod(v.c);
    h.pod(v.buffer);
    if (v.kind == ValueKind::Index) h.map(v.map);
    if (v.kind == ValueKind::Constant) {
      h.pod(v.constant.dtype.kind);
      h.pod(v.constant.f);
      h.pod(v.constant.i);
    }
    h.pod(v.unary);
    h.pod(v.binary);
    h.pod(v.dist);
    h.pod(v.key);
  }
  h.pod(reduce.has_value());
  if (reduce) {
    h.pod(reduce->op);
    h.pod(reduce->naxes);
    h.pod(reduce->value);
  }
  h.pod(stores.size());
  for (const Store& s : stores) {
    h.pod(s.buffer);
    h.pod(s.value);
  }
  return h.h;
}

void Kernel::validate() const {
  auto fail = [&](const std::string& why) {
    throw_error("invalid kernel ", name, ": ", why, "\n", str());
  };
  int n = ndim();
  for (const KernelBuffer& b : buffers)
    if (static_cast<int>(b.map.strides.size()) != n)
      fail("a buffer map's rank is not the domain's");
  int reduce_at = -1;
  for (int i = 0; i < static_cast<int>(body.size()); ++i) {
    const Value& v = body[i];
    for (int op : {v.a, v.b, v.c})
      if (op >= i) fail("value " + std::to_string(i) + " uses a later value");
    auto need = [&](int op) {
      if (op < 0) fail("value " + std::to_string(i) + " misses an operand");
    };
    switch (v.kind) {
      case ValueKind::Load:
        if (v.buffer < 0 || v.buffer >= static_cast<int>(buffers.size()))
          fail("load of a missing buffer");
        if (buffers[v.buffer].dtype != v.dtype) fail("load dtype differs from its buffer's");
        break;
      case ValueKind::Index:
        if (static_cast<int>(v.map.strides.size()) != n) fail("index map rank is not the domain's");
        break;
      case ValueKind::Unary:
      case ValueKind::Cast:
      case ValueKind::Random:
        need(v.a);
        break;
      case ValueKind::Binary:
        need(v.a), need(v.b);
        break;
      case ValueKind::Select:
        need(v.a), need(v.b), need(v.c);
        break;
      case ValueKind::Reduce:
        need(v.a);
        if (reduce_at >= 0) fail("more than one Reduce value");
        reduce_at = i;
        break;
      case ValueKind::Constant:
        break;
    }
    if (reduce_at >= 0 && i > reduce_at) {
      for (int op : {v.a, v.b, v.c})
        if (op >= 0 && op < reduce_at && body[op].kind != ValueKind::Constant)
          fail("epilogue value " + std::to_string(i) + " uses a prologue value");
    }
  }
  if (reduce.has_value() != (reduce_at >= 0)) fail("reduce and the Reduce value disagree");
  if (reduce && (reduce->value != reduce_at || reduce->naxes < 1 || reduce->naxes > n))
    fail("reduction axes or value index are wrong");
  for (const Store& s : stores) {
    if (s.buffer < 0 || s.buffer >= static_cast<int>(buffers.size()) || !buffers[s.buffer].output)
      fail("store to a buffer that is not an output");
    if (s.value < 0 || s.value >= static_cast<int>(body.size())) fail("store of a missing value");
    if (body[s.value].dtype != buffers[s.buffer].dtype) fail("store dtype differs from buffer's");
    if (reduce) {
      for (int k = kept_axes(); k < n; ++k)
        if (!(buffers[s.buffer].map.strides[k] == Dim::constant(0)))
          fail("an output of a reduction has a non-zero stride on a reduced axis");
      if (s.value < reduce_at) fail("a reduction kernel stores a prologue value");
    }
  }
}

std::string Kernel::str() const {
  std::ostringstream os;
  os << "kernel " << name << " domain(";
  for (size_t i = 0; i < domain.size(); ++i) os << (i ? "," : "") << dim_str(domain[i]);
  os << ")";
  if (reduce) os << " reduce " << op_name(reduce->op) << " over last " << reduce->naxes;
  os << "\n";
  for (size_t i = 0; i < buffers.size(); ++i)
    os << "  b" << i << ": " << (buffers[i].output ? "out " : "in ") << buffers[i].dtype << " "
       << map_str(buffers[i].map) << "\n";
  for (size_t i = 0; i < body.size(); ++i) {
    const Value& v = body[i];
    os << "  v" << i << ": " << v.dtype << " = ";
    switch (v.kind) {
      case ValueKind::Load:
        os << "load b" << v.buffer;
        break;
      case ValueKind::Constant:
        os << "const " << v.constant.str();
        break;
      case ValueKind::Index:
        os << "index " << map_str(v.map);
        break;
      case ValueKind::Unary:
        os << op_name(v.unary) << " v" << v.a;
        break;
      case ValueKind::Binary:
        os << op_name(v.binary) << " v" << v.a << " v" << v.b;
        break;
      case ValueKind::Select:
        os << "select v" << v.a << " v" << v.b << " v" << v.c;
        break;
      case ValueKind::Cast:
        os << "cast v" << v.a;
        break;
      case ValueKind::Random:
        os << (v.dist == RandomDist::Uniform ? "uniform" : "normal") << " key " << v.key << " v"
           << v.a;
        break;
      case ValueKind::Reduce:
        os << "reduce v" << v.a;
        break;
    }
    os << "\n";
  }
  for (const Store& s : stores) os << "  store b" << s.buffer << " <- v" << s.value << "\n";
  return os.str();
}

}  // namespace kiln
