#include "backends/kernel_ir.h"

#include <algorithm>
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

void hash_pass(Hasher& h, const std::vector<Value>& body, const std::optional<Reduction>& reduce,
               const std::vector<Store>& stores) {
  h.pod(body.size());
  for (const Value& v : body) {
    h.pod(v.kind);
    h.pod(v.dtype.kind);
    h.pod(v.a);
    h.pod(v.b);
    h.pod(v.c);
    h.pod(v.buffer);
    if (v.kind == ValueKind::Index) h.map(v.map);
    h.pod(v.param);
    if (v.kind == ValueKind::Constant && v.param < 0) {
      h.pod(v.constant.dtype.kind);
      h.pod(v.constant.f);
      h.pod(v.constant.i);
    }
    h.pod(v.unary);
    h.pod(v.binary);
    h.pod(v.dist);
    if (v.param < 0) h.pod(v.key);
    if (v.kind == ValueKind::Gather) {  // only here, so other kernels keep their hash
      h.dim(v.step);
      h.dim(v.extent);
    }
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
}

std::string dim_str(const Dim& d) {
  // append(), not "p" + std::to_string(): GCC 12 gives a false -Wrestrict there (GCC bug 105329)
  return d.is_runtime() ? std::string("p").append(std::to_string(d.param))
                        : std::to_string(d.value);
}

std::string map_str(const IndexMap& m) {
  std::string s = "[";
  for (size_t i = 0; i < m.strides.size(); ++i) {
    if (i) s += ',';
    s += dim_str(m.strides[i]);
  }
  return s + "]+" + dim_str(m.offset);
}

}  // namespace

bool Value::operator==(const Value& o) const {
  return kind == o.kind && dtype == o.dtype && a == o.a && b == o.b && c == o.c &&
         buffer == o.buffer && map == o.map && constant == o.constant && unary == o.unary &&
         binary == o.binary && dist == o.dist && key == o.key && param == o.param &&
         step == o.step && extent == o.extent;
}

int64_t launch_word(const Scalar& s) {
  if (!s.dtype.is_float()) return s.i;
  int64_t w;
  std::memcpy(&w, &s.f, sizeof w);
  return w;
}

Scalar scalar_from_word(int64_t word, Dtype d) {
  Scalar s;
  s.dtype = d;
  if (d.is_float())
    std::memcpy(&s.f, &word, sizeof word);
  else
    s.i = word;
  return s;
}

int Kernel::num_params() const {
  int n = 0;
  auto see = [&](int32_t p) { n = std::max(n, p + 1); };
  auto see_map = [&](const IndexMap& m) {
    for (const Dim& d : m.strides) see(d.param);
    see(m.offset.param);
  };
  for (const Dim& d : domain) see(d.param);
  for (const KernelBuffer& b : buffers) see_map(b.map);
  auto see_body = [&](const std::vector<Value>& values) {
    for (const Value& v : values) {
      if (v.kind == ValueKind::Index) see_map(v.map);
      if (v.kind == ValueKind::Gather) see(v.step.param), see(v.extent.param);
      see(v.param);
    }
  };
  see_body(body);
  for (const Pass& p : passes) see_body(p.body);
  return n;
}

int Kernel::row_axes() const {
  for (const Pass& p : passes)
    if (p.reduce) return p.reduce->naxes;
  return 0;
}

Kernel Kernel::pass_kernel(size_t i) const {
  const Pass& p = passes.at(i);
  Kernel k;
  k.name = name;
  k.domain = domain;
  k.buffers = buffers;
  for (KernelBuffer& b : k.buffers) b.output = false;
  for (const Store& s : p.stores)
    if (s.buffer >= 0 && s.buffer < static_cast<int>(k.buffers.size()))
      k.buffers[s.buffer].output = true;
  k.body = p.body;
  k.reduce = p.reduce;
  k.stores = p.stores;
  return k;
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
  hash_pass(h, body, reduce, stores);
  h.pod(in_place.size());
  for (const auto& [in, out] : in_place) {
    h.pod(in);
    h.pod(out);
  }
  if (!passes.empty()) {  // so every other kernel keeps the hash (and disk-cache key) it had
    h.pod(passes.size());
    for (const Pass& p : passes) hash_pass(h, p.body, p.reduce, p.stores);
  }
  return h.h;
}

void Kernel::validate() const {
  auto fail = [&](const std::string& why) {
    throw_error("invalid kernel ", name, ": ", why, "\n", str());
  };
  if (is_rows()) return validate_rows();
  for (const auto& [in, out] : in_place) {
    int nb = static_cast<int>(buffers.size());
    if (reduce || in < 0 || out < 0 || in >= nb || out >= nb || buffers[in].output ||
        !buffers[out].output || !(buffers[in].map == buffers[out].map) ||
        !(buffers[in].dtype == buffers[out].dtype))
      fail("an in-place pair is not an element-wise (input, output) of one map and dtype");
    for (const Value& v : body)
      if (v.kind == ValueKind::Gather && v.buffer == in)
        fail("an in-place input is gathered (read at other elements than the one written)");
  }
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
      case ValueKind::Gather:
        need(v.a);
        if (v.buffer < 0 || v.buffer >= static_cast<int>(buffers.size()))
          fail("gather from a missing buffer");
        if (buffers[v.buffer].output) fail("gather from an output buffer");
        if (buffers[v.buffer].dtype != v.dtype) fail("gather dtype differs from its buffer's");
        if (body[v.a].dtype != int64) fail("a gather index is not int64");
        if ((!v.step.is_runtime() && v.step.value < 0) ||
            (!v.extent.is_runtime() && v.extent.value < 0))
          fail("a gather's step or extent is negative");
        break;
      case ValueKind::Unary:
      case ValueKind::Cast: need(v.a); break;
      case ValueKind::Random:
        need(v.a);
        if (v.b >= 0 && body[v.b].dtype != uint64) fail("a random key value is not uint64");
        if (v.dist == RandomDist::Bits && v.dtype != uint64) fail("random bits are not uint64");
        if (v.dist != RandomDist::Bits && !v.dtype.is_float()) fail("a random draw is not float");
        break;
      case ValueKind::Binary: need(v.a), need(v.b); break;
      case ValueKind::Select: need(v.a), need(v.b), need(v.c); break;
      case ValueKind::Reduce:
        need(v.a);
        if (reduce_at >= 0) fail("more than one Reduce value");
        reduce_at = i;
        break;
      case ValueKind::Constant: break;
    }
    if (reduce_at >= 0 && i > reduce_at) {
      for (int op : {v.a, v.b, v.c})
        if (op >= 0 && op < reduce_at && body[op].kind != ValueKind::Constant)
          fail("epilogue value " + std::to_string(i) + " uses a prologue value");
      const IndexMap* m = v.kind == ValueKind::Load || v.kind == ValueKind::Gather
                              ? &buffers[v.buffer].map
                          : v.kind == ValueKind::Index ? &v.map
                                                       : nullptr;
      for (int k = n - (reduce ? reduce->naxes : 0); m && k < n; ++k)
        if (!(m->strides[k] == Dim::constant(0)))
          fail("epilogue value " + std::to_string(i) + " moves along a reduced axis");
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
  for (int b = 0; b < static_cast<int>(buffers.size()); ++b) {
    int writes = 0;
    for (const Store& s : stores) writes += s.buffer == b;
    if (buffers[b].output && writes != 1)
      fail("output b" + std::to_string(b) + " is stored " + std::to_string(writes) +
           " times (exactly once per element)");
  }
  // With constant dims the rest can be checked now; runtime dims wait for validate_launch.
  if (num_params() == 0) check_outputs_written_once({});
}

void Kernel::validate_rows() const {
  auto fail = [&](const std::string& why) {
    throw_error("invalid row kernel ", name, ": ", why, "\n", str());
  };
  if (!body.empty() || reduce || !stores.empty() || !in_place.empty())
    fail("a row kernel has a body, reduction or stores outside its passes");
  int naxes = row_axes();
  std::vector<int> stored_by(buffers.size(), -1);
  for (size_t i = 0; i < passes.size(); ++i) {
    const Pass& p = passes[i];
    if (p.reduce && p.reduce->naxes != naxes) fail("passes reduce different axes");
    for (const Store& s : p.stores)
      if (s.buffer >= 0 && s.buffer < static_cast<int>(buffers.size())) {
        if (stored_by[s.buffer] >= 0)
          fail(std::string("b").append(std::to_string(s.buffer)).append(" is stored twice"));
        stored_by[s.buffer] = static_cast<int>(i);
      }
  }
  for (size_t b = 0; b < buffers.size(); ++b)
    if (buffers[b].output != (stored_by[b] >= 0))
      fail(std::string("b")
               .append(std::to_string(b))
               .append(" is not an output exactly when a pass stores it"));
  for (size_t i = 0; i < passes.size(); ++i) {
    for (const Value& v : passes[i].body)
      if ((v.kind == ValueKind::Load || v.kind == ValueKind::Gather) && v.buffer >= 0 &&
          v.buffer < static_cast<int>(buffers.size()) && stored_by[v.buffer] >= static_cast<int>(i))
        fail(std::string("pass ")
                 .append(std::to_string(i))
                 .append(" loads b")
                 .append(std::to_string(v.buffer))
                 .append(" before a pass stores it"));
    pass_kernel(i).validate();
  }
}

namespace {

// The smallest and largest element an affine map reaches over the domain (extents > 0).
// The lowest and highest element a map reaches over the extents; nullopt when either does not
// fit int64 (launch parameters of a loaded artifact are not trusted to be sane).
std::optional<std::pair<int64_t, int64_t>> map_range(const IndexMap& m,
                                                     const std::vector<int64_t>& extents,
                                                     const int64_t* params) {
  int64_t lo = m.offset.eval(params), hi = lo;
  for (size_t k = 0; k < extents.size(); ++k) {
    int64_t step;
    if (__builtin_mul_overflow(m.strides[k].eval(params), extents[k] - 1, &step)) return {};
    int64_t& end = step < 0 ? lo : hi;
    if (__builtin_add_overflow(end, step, &end)) return {};
  }
  return std::make_pair(lo, hi);
}

}  // namespace

std::vector<int64_t> Kernel::extents(const std::vector<int64_t>& params) const {
  std::vector<int64_t> e;
  for (const Dim& d : domain) e.push_back(d.eval(params.data()));
  return e;
}

void Kernel::check_outputs_written_once(const std::vector<int64_t>& params) const {
  // Sufficient condition for an affine map to be one-to-one over the kept axes: sorted by
  // |stride|, each axis steps past everything the smaller ones span.
  std::vector<int64_t> e = extents(params);
  for (int64_t x : e)
    if (x == 0) return;  // an empty domain writes nothing
  for (size_t b = 0; b < buffers.size(); ++b) {
    if (!buffers[b].output) continue;
    std::vector<std::pair<int64_t, int64_t>> axes;  // (|stride|, extent)
    for (int k = 0; k < kept_axes(); ++k) {
      if (e[k] <= 1) continue;
      int64_t s = buffers[b].map.strides[k].eval(params.data());
      axes.push_back({s < 0 ? -s : s, e[k]});
    }
    std::sort(axes.begin(), axes.end());
    int64_t span = 0;
    for (const auto& [stride, extent] : axes) {
      if (stride <= span)
        throw_error("invalid kernel ", name, ": output b", b,
                    " writes some element more than once (strides overlap)\n", str());
      span += stride * (extent - 1);
    }
  }
}

void Kernel::validate_launch(const std::vector<int64_t>& params,
                             const std::vector<int64_t>& elements,
                             const std::vector<std::pair<int, int>>& donated) const {
  auto fail = [&](const std::string& why) {
    throw_error("invalid launch of kernel ", name, ": ", why, "\n", str());
  };
  if (is_rows()) {  // each pass as its own kernel; nothing is donated to a row kernel
    if (!donated.empty()) fail("an input shares memory with an output of a row kernel");
    for (size_t i = 0; i < passes.size(); ++i) pass_kernel(i).validate_launch(params, elements);
    return;
  }
  if (static_cast<int>(params.size()) < num_params())
    fail("needs " + std::to_string(num_params()) + " params, got " + std::to_string(params.size()));
  if (elements.size() != buffers.size())
    fail("has " + std::to_string(buffers.size()) + " buffers, got sizes for " +
         std::to_string(elements.size()));
  std::vector<int64_t> e = extents(params);
  for (int64_t x : e)
    if (x < 0) fail("a negative extent");
  for (int64_t x : e)
    if (x == 0) return;  // an empty domain touches nothing
  // A gathered buffer reaches its map's elements plus any of the extent rows a Gather picks.
  std::vector<int64_t> rows_span(buffers.size(), 0);
  for (const Value& v : body)
    if (v.kind == ValueKind::Gather) {
      int64_t step = v.step.eval(params.data()), extent = v.extent.eval(params.data());
      if (step < 0 || extent < 1)
        fail("a gather of " + std::to_string(extent) + " rows " + std::to_string(step) +
             " apart (needs a step >= 0 and at least one row)");
      int64_t span;
      if (__builtin_mul_overflow(step, extent - 1, &span))
        fail("a gather of " + std::to_string(extent) + " rows " + std::to_string(step) +
             " apart spans more than int64 elements");
      rows_span[v.buffer] = std::max(rows_span[v.buffer], span);
    }
  auto in_bounds = [&](const IndexMap& m, int64_t size, int64_t rows, const std::string& what) {
    auto range = map_range(m, e, params.data());
    if (!range || __builtin_add_overflow(range->second, rows, &range->second))
      fail(what + " reaches elements past the int64 range");
    auto [lo, hi] = *range;
    if (lo < 0 || hi >= size)
      fail(what + " reaches elements " + std::to_string(lo) + ".." + std::to_string(hi) + " of " +
           std::to_string(size));
  };
  for (size_t b = 0; b < buffers.size(); ++b)
    in_bounds(buffers[b].map, elements[b], rows_span[b], "buffer b" + std::to_string(b));
  check_outputs_written_once(params);
  // A donated input shares the output's memory: it may be read only where that output is
  // written (every load precedes the point's stores), never at another element.
  for (const auto& [in, out] : donated) {
    if (in < 0 || out < 0 || in >= static_cast<int>(buffers.size()) ||
        out >= static_cast<int>(buffers.size()) || buffers[in].output || !buffers[out].output)
      fail("a donation pair is not (input, output)");
    const IndexMap &a = buffers[in].map, &b = buffers[out].map;
    bool same = a.offset.eval(params.data()) == b.offset.eval(params.data());
    for (int k = 0; k < ndim() && same; ++k)
      same = a.strides[k].eval(params.data()) == b.strides[k].eval(params.data());
    if (!same)
      fail("donated input b" + std::to_string(in) + " is read at other elements than b" +
           std::to_string(out) + " writes");
  }
}

std::string Kernel::canonical() const {
  std::string s = str();
  return s.substr(s.find(" domain("));  // "kernel <name>" is the only part that is not structure
}

namespace {

void write_pass(std::ostringstream& os, const std::vector<Value>& body,
                const std::vector<Store>& stores) {
  for (size_t i = 0; i < body.size(); ++i) {
    const Value& v = body[i];
    os << "  v" << i << ": " << v.dtype << " = ";
    switch (v.kind) {
      case ValueKind::Load: os << "load b" << v.buffer; break;
      case ValueKind::Constant:
        if (v.param >= 0)
          os << "const p" << v.param;
        else
          os << "const " << v.constant.str();
        break;
      case ValueKind::Index: os << "index " << map_str(v.map); break;
      case ValueKind::Unary: os << op_name(v.unary) << " v" << v.a; break;
      case ValueKind::Binary: os << op_name(v.binary) << " v" << v.a << " v" << v.b; break;
      case ValueKind::Select: os << "select v" << v.a << " v" << v.b << " v" << v.c; break;
      case ValueKind::Cast: os << "cast v" << v.a; break;
      case ValueKind::Random:
        os << op_name(v.dist) << " key ";
        if (v.b >= 0)
          os << "v" << v.b;
        else if (v.param >= 0)
          os << "p" << v.param;
        else
          os << v.key;
        os << " v" << v.a;
        break;
      case ValueKind::Reduce: os << "reduce v" << v.a; break;
      case ValueKind::Gather:
        os << "gather b" << v.buffer << " v" << v.a << " step " << dim_str(v.step) << " extent "
           << dim_str(v.extent);
        break;
    }
    os << "\n";
  }
  for (const Store& s : stores) os << "  store b" << s.buffer << " <- v" << s.value << "\n";
}

}  // namespace

std::string Kernel::str() const {
  std::ostringstream os;
  os << "kernel " << name << " domain(";
  for (size_t i = 0; i < domain.size(); ++i) os << (i ? "," : "") << dim_str(domain[i]);
  os << ")";
  if (reduce) os << " reduce " << op_name(reduce->op) << " over last " << reduce->naxes;
  if (is_rows()) os << " rows " << passes.size();
  os << "\n";
  for (size_t i = 0; i < buffers.size(); ++i)
    os << "  b" << i << ": " << (buffers[i].output ? "out " : "in ") << buffers[i].dtype << " "
       << map_str(buffers[i].map) << "\n";
  write_pass(os, body, stores);
  for (const auto& [in, out] : in_place) os << "  in place b" << out << " = b" << in << "\n";
  for (const Pass& p : passes) {
    os << "  pass";
    if (p.reduce) os << " reduce " << op_name(p.reduce->op) << " over last " << p.reduce->naxes;
    os << "\n";
    write_pass(os, p.body, p.stores);
  }
  return os.str();
}

}  // namespace kiln
