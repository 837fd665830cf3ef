// A table keyed by graph node, for the walks every evaluation makes (an eager chain of 1000 ops
// is walked per eval): open addressing over a power-of-two array, so adding a node allocates
// nothing (std::unordered_set allocated once per node, a large share of an eager op's cost).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace kiln {

struct ArrayNode;

template <typename V>
class NodeTable {
 public:
  explicit NodeTable(size_t expected = 16) {
    size_t cap = 16;
    while (cap < 2 * expected) cap *= 2;
    keys_.assign(cap, nullptr);
    values_.assign(cap, V{});
  }

  // The value of `n`, default-made when it is new; `added` says whether it was.
  V& at(const ArrayNode* n, bool* added = nullptr) {
    if (2 * (size_ + 1) > keys_.size()) grow();
    size_t i = slot(n);
    bool fresh = keys_[i] == nullptr;
    if (fresh) {
      keys_[i] = n;
      ++size_;
    }
    if (added) *added = fresh;
    return values_[i];
  }
  // Adds `n`; returns whether it was new (a set's insert).
  bool insert(const ArrayNode* n) {
    bool added = false;
    at(n, &added);
    return added;
  }
  bool contains(const ArrayNode* n) const { return keys_[slot(n)] == n; }
  size_t size() const { return size_; }

 private:
  size_t slot(const ArrayNode* n) const {
    size_t mask = keys_.size() - 1;
    uint64_t h = (reinterpret_cast<uintptr_t>(n) >> 4) * 0x9E3779B97F4A7C15ULL;
    size_t i = static_cast<size_t>(h ^ (h >> 32)) & mask;
    while (keys_[i] != nullptr && keys_[i] != n) i = (i + 1) & mask;
    return i;
  }
  void grow() {
    std::vector<const ArrayNode*> keys(keys_.size() * 2, nullptr);
    std::vector<V> values(keys_.size() * 2, V{});
    std::swap(keys, keys_);
    std::swap(values, values_);
    for (size_t i = 0; i < keys.size(); ++i) {
      if (!keys[i]) continue;
      size_t j = slot(keys[i]);
      keys_[j] = keys[i];
      values_[j] = std::move(values[i]);
    }
  }

  std::vector<const ArrayNode*> keys_;
  std::vector<V> values_;
  size_t size_ = 0;
};

}  // namespace kiln
