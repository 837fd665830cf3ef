#include "backends/source/emitter.h"

#include <cstdlib>
#include <fstream>
#include <mutex>

namespace kiln::source {

Emitter::Emitter(const Kernel& k, Dialect& d) : k_(k), d_(d) { d_.attach(*this); }

std::string Emitter::expr(int i) {
  const Value& val = k_.body[i];
  switch (val.kind) {
    case ValueKind::Load: return d_.load(val.buffer);
    case ValueKind::Gather: return d_.gather(val);
    case ValueKind::Constant: return d_.constant(i);
    case ValueKind::Index: return d_.index(val);
    case ValueKind::Unary: return d_.unary(val);
    case ValueKind::Binary: return d_.binary(val);
    case ValueKind::Select: return d_.select(val);
    case ValueKind::Cast: return d_.cast(val);
    case ValueKind::Random: return d_.random(val);
    case ValueKind::Reduce: break;
  }
  return "";
}

void Emitter::values(int from, int to, const std::string& ind) {
  for (int i = from; i < to; ++i) {
    ValueKind kind = k_.body[i].kind;
    if (kind == ValueKind::Constant || kind == ValueKind::Reduce) continue;
    os_ << ind << d_.define(k_.body[i].dtype, v(i), expr(i)) << "\n";
  }
}

void Emitter::constants(const std::string& ind) {
  for (int i = 0; i < static_cast<int>(k_.body.size()); ++i)
    if (k_.body[i].kind == ValueKind::Constant)
      os_ << ind << d_.define_constant(k_.body[i].dtype, v(i), d_.constant(i)) << "\n";
}

void Emitter::stores(const std::string& ind) {
  for (const Store& s : k_.stores) os_ << d_.store(s, ind);
}

void record_for_corpus(const Kernel& k) {
  static const char* path = std::getenv("KILN_CODEGEN_CORPUS");
  if (!path || !*path) return;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  std::ofstream(path, std::ios::app) << k.str();
}

}  // namespace kiln::source
