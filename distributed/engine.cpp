// The groups and their communication lanes (distributed/engine.h): a table of groups, and one
// progress thread that issues each sequence's posted work (a group's collectives, a cut edge's
// messages) in position order and completes it.
#include "distributed/engine.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>
#include <vector>

#include "backends/host_event.h"
#include "distributed/group.h"
#include "distributed/internal.h"
#include "distributed/transport.h"
#include "graph/error.h"
#include "graph/immortal.h"

namespace kiln::distributed {

namespace {

// One posted item of a lane: a message or collective, a split, or a skipped position.
struct Item {
  Work work;
  bool skip = false;
  std::string why;                    // skip: the reason
  std::function<void()> control;      // a split: runs on the progress thread at its position
  std::vector<unsigned char> staged;  // host copy of a device input
  std::vector<unsigned char> result;  // host memory for a device output
  Buffer* device_out = nullptr;       // written from `result` when the work completes
  size_t out_bytes = 0;
  int64_t expect = -1;  // a cut edge's Recv: the bytes a message of a computed value has
  int from = -1;        // ... and the rank it comes from
  std::shared_ptr<HostEvent> event;
  std::unique_ptr<Request> request;
  Channel channel;     // where it was posted
  uint64_t index = 0;  // issued: its place among its kind (exit notices compare it)
};

class Engine;
Engine& engine();

// Work issued in position order: positions are reserved at each call's start, and position k
// is issued once k - 1 was, whenever their tasks become ready.
struct Sequence {
  uint64_t reserved = 0, issued = 0;
  std::map<uint64_t, std::unique_ptr<Item>> posted;
};

struct GroupState {
  int comm = 0;
  int rank = 0, size = 1;
  Sequence order;  // the group's collectives, splits and the user's send and recv
  std::map<std::tuple<int, int, bool>, Sequence> edges;  // (peer, tag, send): a cut edge's
  std::string broken;  // why the group can no longer run collectives
  // Issued so far (the progress thread's): collectives and splits, the user's sends and recvs
  // per peer. Exit notices carry them.
  uint64_t collectives = 0;
  std::map<int, uint64_t> sends, recvs;
  Sequence& sequence(const Channel& c) {
    return c.tag == 0 ? order : edges[std::make_tuple(c.peer, c.tag, c.send)];
  }
};

std::atomic<uint64_t> g_edge_sends{0}, g_edge_recvs{0};

// What a rank that ended cleanly had issued with this one, from its exit notice: world
// collectives, its sends to and recvs from this rank, and per cut edge (tag, it sent) its count.
struct Exited {
  uint64_t collectives = 0, sends = 0, recvs = 0;
  std::map<std::pair<int64_t, bool>, uint64_t> edges;
};

class Engine {
 public:
  ~Engine() { shutdown(); }

  // The world group, made on first use.
  int world(bool strict, const std::string& backend) {
    std::lock_guard<std::mutex> lock(init_mu_);
    if (backend != "mpi" && backend != "any")
      throw_error("distributed::init: unknown backend '", backend, "' (valid: \"mpi\", \"any\")");
    if (!groups_.empty()) return 0;
    bool want_mpi = (strict && backend == "mpi") || launched_as_rank();
    if (want_mpi && !is_available() && strict)
      throw_error("distributed::init(strict=true, \"", backend,
                  "\"): this Kiln was built without MPI; install Open MPI (apt-get install "
                  "openmpi-bin libopenmpi-dev, or tools/install-deps.sh --test) and configure "
                  "again with -DKILN_WITH_MPI=ON");
    auto g = std::make_unique<GroupState>();
    if (want_mpi && is_available()) {
      transport_ = start_mpi();
      g->comm = transport_->world();
      g->rank = transport_->rank(g->comm);
      g->size = transport_->size(g->comm);
      world_rank_ = g->rank, world_size_ = g->size;
      if (const char* t = std::getenv("KILN_DIST_PEER_TIMEOUT")) peer_timeout_ = std::atof(t);
      thread_ = std::thread([this] { progress(); });
      std::atexit([] { engine().shutdown(); });
    }
    std::lock_guard<std::mutex> glock(mu_);
    groups_.push_back(std::move(g));
    return 0;
  }

  // The group `id`; the world is made on first use (a loaded artifact's collectives name it).
  GroupState& group(int id) {
    if (id == 0) world(false, "any");
    std::lock_guard<std::mutex> lock(mu_);
    return state(id);
  }

  int split(int parent, int color, int key) {
    GroupState& p = group(parent);
    if (!transport_ || p.size == 1) {  // one rank: the group itself, as a new id
      std::lock_guard<std::mutex> lock(mu_);
      auto g = std::make_unique<GroupState>();
      g->comm = p.comm, g->rank = p.rank, g->size = p.size;
      groups_.push_back(std::move(g));
      return static_cast<int>(groups_.size()) - 1;
    }
    auto item = std::make_unique<Item>();
    auto made = std::make_shared<std::unique_ptr<GroupState>>();
    item->control = [this, &p, color, key, made] {
      auto g = std::make_unique<GroupState>();
      g->comm = transport_->split(p.comm, color, key < 0 ? p.rank : key);
      g->rank = transport_->rank(g->comm);
      g->size = transport_->size(g->comm);
      *made = std::move(g);
    };
    item->event = std::make_shared<HostEvent>();
    auto ev = item->event;
    Channel c{parent};
    post(c, reserve(c, 1), std::move(item));
    ev->wait();
    std::lock_guard<std::mutex> lock(mu_);
    groups_.push_back(std::move(*made));
    return static_cast<int>(groups_.size()) - 1;
  }

  uint64_t reserve(const Channel& c, int n) {
    std::lock_guard<std::mutex> lock(mu_);
    Sequence& s = state(c.group).sequence(c);
    uint64_t base = s.reserved;
    s.reserved += static_cast<uint64_t>(n);
    return base;
  }

  void post(const Channel& c, uint64_t position, std::unique_ptr<Item> item) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      item->channel = c;
      item->index = position;
      state(c.group).sequence(c).posted[position] = std::move(item);
    }
    cv_.notify_one();
  }

  bool has_transport() const { return transport_ != nullptr; }

  // At exit: stops the progress thread and ends MPI once every rank has arrived here. A rank
  // must not call MPI_Finalize while another waits for it in a collective (Open MPI's finalize
  // would wait for that rank forever). A clean rank (nothing left to issue) first tells every
  // other rank how far it got (an exit notice): a rank waiting for it in the world group, a
  // message or a cut edge it will never issue learns so and leaves (doomed()), and the launcher
  // ends the job; a rank that merely finished first waits for the others as long as they take.
  // Sub-groups are not covered by the notices, so a rank that made some waits at most
  // KILN_DIST_EXIT_TIMEOUT seconds (default 60). A rank whose groups are broken, or that the
  // others did not join in time, leaves with status 1 without MPI_Finalize, and the launcher
  // ends the job naming it.
  void shutdown() {
    if (!thread_.joinable()) return;
    bool clean = true;
    {
      std::unique_lock<std::mutex> lock(mu_);
      for (auto& g : groups_) {
        clean = clean && g->broken.empty() && g->order.posted.empty();
        for (auto& [key, seq] : g->edges) clean = clean && seq.posted.empty();
      }
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
    double timeout = -1;
    if (groups_.size() > 1) {
      timeout = 60;
      if (const char* t = std::getenv("KILN_DIST_EXIT_TIMEOUT")) timeout = std::atof(t);
    }
    int rank = groups_.empty() ? -1 : groups_[0]->rank;
    clean = clean && active_.empty();
    if (clean) notify_exit();
    if (clean && transport_->barrier(timeout)) {
      transport_->finalize();
      return;
    }
    std::fprintf(stderr,
                 "kiln: rank %d: %s; leaving without MPI_Finalize so that the launcher ends "
                 "the job\n",
                 rank,
                 clean ? "the other ranks did not reach the end within KILN_DIST_EXIT_TIMEOUT "
                         "(this rank made sub-groups, which exit notices do not cover)"
                       : "a collective of this rank could not run");
    std::fflush(stderr);
    std::_Exit(1);
  }

 private:
  // This rank's exit notice to each other rank (Exited's fields, then tag, sent, count triples).
  void notify_exit() {
    GroupState& w = *groups_[0];
    for (int q = 0; q < w.size; ++q) {
      if (q == w.rank) continue;
      std::vector<int64_t> c{static_cast<int64_t>(w.collectives), static_cast<int64_t>(w.sends[q]),
                             static_cast<int64_t>(w.recvs[q])};
      for (auto& [key, seq] : w.edges)
        if (std::get<0>(key) == q)
          c.insert(c.end(),
                   {std::get<1>(key), std::get<2>(key) ? 1 : 0, static_cast<int64_t>(seq.issued)});
      transport_->notify_exit(q, c);
    }
  }

  // Takes the exit notices that arrived; a rank that ended cleanly will never take part in what
  // it had not issued, so work here that waits for it is doomed.
  void read_exit_notices() {
    int from = -1;
    std::vector<int64_t> c;
    while (transport_->exit_notice(from, c)) {
      Exited e;
      if (c.size() >= 3) e.collectives = c[0], e.sends = c[1], e.recvs = c[2];
      for (size_t i = 3; i + 2 < c.size(); i += 3) e.edges[{c[i], c[i + 1] != 0}] = c[i + 2];
      exited_[from] = e;
    }
  }

  // Work of the world group that a rank which ended cleanly will never complete: a collective
  // past its count, a message to or from it past its count of the matching kind.
  std::string doomed(const Item& item) const {
    if (item.channel.group != 0 || item.skip || exited_.empty()) return "";
    const Work& w = item.work;
    bool p2p = w.op == Op::Send || w.op == Op::Recv;
    for (auto& [rank, e] : exited_) {
      if (p2p && w.peer != rank) continue;
      uint64_t limit = e.collectives;
      std::string what = "collectives of the world group";
      if (item.channel.tag > 0) {
        auto it = e.edges.find({item.channel.tag, w.op == Op::Recv});
        limit = it == e.edges.end() ? 0 : it->second;
        what = "messages of this cut edge (tag " + std::to_string(item.channel.tag) + ")";
      } else if (p2p) {
        limit = w.op == Op::Recv ? e.sends : e.recvs;
        what = w.op == Op::Recv ? "sends to this rank" : "recvs from this rank";
      }
      if (item.index >= limit)
        return "rank " + std::to_string(rank) + " ended its program after " +
               std::to_string(limit) + " " + what + ", and this rank waits for number " +
               std::to_string(item.index + 1);
    }
    return "";
  }

  // Numbers a started item among its kind (Item::index); the positions of a cut edge's order
  // are already that.
  static void count(GroupState& g, Item& item) {
    if (item.channel.tag > 0) return;
    if (item.work.op == Op::Send && !item.control)
      item.index = g.sends[item.work.peer]++;
    else if (item.work.op == Op::Recv && !item.control)
      item.index = g.recvs[item.work.peer]++;
    else
      item.index = g.collectives++;
  }

  // Leaves without MPI_Finalize: the job cannot finish (see shutdown).
  [[noreturn]] void abandon(const std::string& why) {
    std::fprintf(stderr,
                 "kiln: rank %d: %s, which can never come; leaving without MPI_Finalize so "
                 "that the launcher ends the job\n",
                 groups_[0]->rank, why.c_str());
    std::fflush(stderr);
    std::_Exit(1);
  }

  void check_doomed() {
    read_exit_notices();
    for (auto& item : active_)
      if (std::string why = doomed(*item); !why.empty()) abandon(why);
  }

  // Heartbeats to and from every rank, every kBeat, whether work is in flight or not: a rank
  // busy computing still beats (this thread is its own), so only a rank that is gone, stopped
  // or cut off falls silent.
  void beat() {
    if (world_size_ < 2) return;
    auto now = std::chrono::steady_clock::now();
    if (now - last_beat_ < kBeat) return;
    last_beat_ = now;
    transport_->heartbeat();
  }

  // The ranks not heard from for KILN_DIST_PEER_TIMEOUT seconds (and not ended cleanly, which
  // their exit notice says), in words; "" if none or the timeout is off (0). A rank never
  // heard from yet is not judged: it may not have started Kiln's distributed part.
  std::string unreachable() const {
    if (peer_timeout_ <= 0) return "";
    std::string names;
    double worst = 0;
    int count = 0;
    for (int q = 0; q < world_size_; ++q) {
      if (q == world_rank_ || exited_.count(q)) continue;
      double s = transport_->silent_for(q);
      if (s <= peer_timeout_) continue;
      names += (count++ ? ", " : "") + std::to_string(q);
      worst = std::max(worst, s);
    }
    if (!count) return "";
    char secs[32];
    std::snprintf(secs, sizeof secs, "%.1f", worst);
    return std::string(count > 1 ? "ranks " : "rank ") + names + (count > 1 ? " are" : " is") +
           " unreachable from rank " + std::to_string(world_rank_) + ": nothing heard from " +
           (count > 1 ? "them" : "it") + " for " + secs +
           " s (KILN_DIST_PEER_TIMEOUT, seconds; 0 turns this off)";
  }

  // A rank is gone: everything in flight fails with why, and every group is broken (its later
  // collectives raise too; at exit this rank leaves with status 1 without MPI_Finalize). The
  // requests are never completed; their items are kept, so that the host memory they name
  // stays valid should the transport still write to it.
  void fail_in_flight(const std::string& why) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& g : groups_)
        if (g->broken.empty()) g->broken = why;
    }
    for (auto& item : active_) {
      finish(*item,
             std::make_exception_ptr(Error(std::string("distributed: ") + op_name(item->work.op) +
                                           " cannot complete: " + why)));
      abandoned_.push_back(std::move(item));
    }
    active_.clear();
  }

  GroupState& state(int id) {
    if (id < 0 || id >= static_cast<int>(groups_.size()))
      throw_error("distributed: no group ", id, " in this process (", groups_.size(),
                  " made; call distributed::init() first, and make sub-groups with split)");
    return *groups_[id];
  }

  static bool has_next(const Sequence& s) {
    return !s.posted.empty() && s.posted.begin()->first == s.issued;
  }

  // Moves every sequence's next positions, in order, out of `posted`. A skipped collective
  // breaks its group; a cut edge's messages never skip (a failed value is sent as a failure).
  std::vector<std::unique_ptr<Item>> issuable() {
    std::vector<std::unique_ptr<Item>> out;
    for (auto& g : groups_) {
      Sequence& s = g->order;
      for (auto it = s.posted.begin(); it != s.posted.end() && it->first == s.issued;
           it = s.posted.erase(it), ++s.issued) {
        Item& item = *it->second;
        if (item.skip && g->broken.empty())
          g->broken =
              "rank " + std::to_string(g->rank) + " skipped a collective (" + item.why + ")";
        else if (!item.skip && !item.control && !g->broken.empty())
          item.skip = true, item.why = g->broken;
        out.push_back(std::move(it->second));
      }
      for (auto& [key, e] : g->edges)
        for (auto it = e.posted.begin(); it != e.posted.end() && it->first == e.issued;
             it = e.posted.erase(it), ++e.issued)
          out.push_back(std::move(it->second));
    }
    return out;
  }

  bool anything_issuable() const {
    for (auto& g : groups_) {
      if (has_next(g->order)) return true;
      for (auto& [key, e] : g->edges)
        if (has_next(e)) return true;
    }
    return false;
  }

  // A cut edge's message shorter or longer than its value: the sender's value failed, and the
  // message holds why (distributed/engine.h).
  static void check_edge_message(Item& item) {
    int64_t got = item.request->received();
    if (item.expect < 0 || got == item.expect) return;
    const char* text = static_cast<const char*>(item.work.out);
    std::string why(text, text + std::min<int64_t>(got, item.expect));
    if (item.expect == 0) why = "(no room for the reason in an empty value)";
    throw_error("placement on ranks: rank ", item.from, " could not compute the value it sends ",
                "here: ", why);
  }

  static void finish(Item& item, std::exception_ptr e) {
    if (!e && item.request && item.work.op == Op::Recv) {
      try {
        check_edge_message(item);
      } catch (...) {
        e = std::current_exception();
      }
    }
    if (!e && item.device_out) {
      try {
        item.device_out->write(item.result.data(), 0, item.out_bytes);
      } catch (...) {
        e = std::current_exception();
      }
    }
    if (item.event) item.event->complete(e);
  }

  void progress() {
    int idle_polls = 0;
    for (;;) {
      bool finished = false;
      std::vector<std::unique_ptr<Item>> now;
      {
        std::unique_lock<std::mutex> lock(mu_);
        // Idle, it still wakes every kBeat to send and take heartbeats.
        if (active_.empty())
          cv_.wait_for(lock, kBeat, [&] { return stop_ || anything_issuable(); });
        now = issuable();
        if (stop_ && now.empty() && active_.empty()) return;
        // At shutdown, only work already issued is finished: a broken group's posted work
        // would wait forever.
        if (stop_ && now.empty()) {
          bool broken = false;
          for (auto& g : groups_) broken = broken || !g->broken.empty();
          if (broken) return;
        }
      }
      beat();
      for (auto& item : now) {
        if (item->skip) {
          if (item->event)
            item->event->complete(std::make_exception_ptr(
                Error("distributed: the group can no longer run collectives: " + item->why)));
          continue;
        }
        try {
          if (item->control) {
            count(*groups_[item->channel.group], *item);
            item->control();
            item->event->complete(nullptr);
            continue;
          }
          item->request = transport_->start(item->work);
          if (item->work.tag > 0) (item->work.op == Op::Send ? g_edge_sends : g_edge_recvs)++;
          count(*groups_[item->channel.group], *item);
          active_.push_back(std::move(item));
        } catch (...) {
          finish(*item, std::current_exception());
        }
      }
      for (size_t i = 0; i < active_.size();) {
        std::exception_ptr e;
        bool done = false;
        try {
          done = active_[i]->request->test();
        } catch (...) {
          e = std::current_exception(), done = true;
        }
        if (!done) {
          ++i;
          continue;
        }
        finish(*active_[i], e);
        finished = true;
        active_.erase(active_.begin() + static_cast<std::ptrdiff_t>(i));
      }
      // MPI progresses only inside its calls: poll while work is in flight. Right after work
      // was issued or finished, yield between polls (latency); after that, sleep a little, so
      // that a long transfer leaves the cores to compute on other lanes.
      if (active_.empty()) continue;
      check_doomed();
      if (std::string why = unreachable(); !why.empty()) {
        fail_in_flight(why);
        continue;
      }
      if (!now.empty() || finished) idle_polls = 0;
      if (++idle_polls < 64)
        std::this_thread::yield();
      else
        std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  std::mutex init_mu_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<GroupState>> groups_;
  std::unique_ptr<Transport> transport_;
  std::thread thread_;
  std::vector<std::unique_ptr<Item>> active_;     // the progress thread's own
  std::map<int, Exited> exited_;                  // ranks that ended cleanly (exit notices)
  std::vector<std::unique_ptr<Item>> abandoned_;  // in flight when a rank was found gone
  bool stop_ = false;
  // Liveness (beat, unreachable): the world's rank and size, set before the thread starts.
  static constexpr std::chrono::milliseconds kBeat{250};
  int world_rank_ = 0, world_size_ = 1;
  double peer_timeout_ = 30;
  std::chrono::steady_clock::time_point last_beat_{};
};

Engine& engine() {
  static Immortal<Engine> e;
  return e.get();
}

}  // namespace

namespace detail {
int world_group(bool strict, const std::string& backend) { return engine().world(strict, backend); }
int split_group(int parent, int color, int key) { return engine().split(parent, color, key); }
int group_rank(int id) { return engine().group(id).rank; }
int group_size(int id) { return engine().group(id).size; }
}  // namespace detail

bool Channel::operator<(const Channel& o) const {
  return std::tie(group, peer, tag, send) < std::tie(o.group, o.peer, o.tag, o.send);
}

Channel channel_of(const NativeArgs& a) {
  if (a.tag == 0) return Channel{a.group};
  return Channel{a.group, a.peer, a.tag, a.op == Op::Send};
}

uint64_t reserve_positions(const Channel& c, int n) { return engine().reserve(c, n); }

MessageCounts message_counts() { return {g_edge_sends.load(), g_edge_recvs.load()}; }

namespace {

// A cut edge's message for a value that failed (its input failed, the call was cancelled):
// the receiver is waiting, so it gets a message of another length than the value's, holding
// the reason. A Recv that will not run still takes its message, so the sender completes.
std::unique_ptr<Item> failed_edge_message(const NativeArgs& a, const GroupState& g,
                                          const std::string& why) {
  auto item = std::make_unique<Item>();
  Work& w = item->work;
  w.op = a.op, w.dtype = uint8, w.comm = g.comm, w.peer = a.peer, w.tag = a.tag;
  int64_t bytes = (a.op == Op::Send ? a.n : a.m) * static_cast<int64_t>(a.dtype.size());
  if (a.op == Op::Send) {
    std::string text = "rank " + std::to_string(g.rank) + ": " + why;
    size_t len = bytes == 0 ? 1 : std::min(text.size(), static_cast<size_t>(bytes - 1));
    item->staged.assign(text.begin(), text.begin() + static_cast<long>(std::min(len, text.size())));
    item->staged.resize(len);
    w.in = item->staged.data();
    w.count = static_cast<int64_t>(len);
  } else {
    item->result.resize(static_cast<size_t>(std::max<int64_t>(bytes, 1)));
    w.out = item->result.data();
    w.count = static_cast<int64_t>(item->result.size());
  }
  return item;
}

}  // namespace

void skip_position(const NativeArgs& a, uint64_t position, const std::string& why) {
  if (detail::group_size(a.group) == 1) return;
  Channel c = channel_of(a);
  if (a.tag > 0)
    return engine().post(c, position, failed_edge_message(a, engine().group(a.group), why));
  auto item = std::make_unique<Item>();
  item->skip = true;
  item->why = why;
  engine().post(c, position, std::move(item));
}

EventPtr start_collective(const NativeArgs& a, uint64_t position) {
  GroupState& g = engine().group(a.group);
  bool edge = a.tag > 0;
  Buffer* in = a.op == Op::Recv ? nullptr : a.buffers.at(0);
  Buffer* out = edge && a.op == Op::Send ? nullptr : a.buffers.back();
  size_t in_bytes = static_cast<size_t>(a.n) * a.dtype.size();
  size_t out_bytes = static_cast<size_t>(a.m) * a.dtype.size();
  detail::check_extents(a, g.size);
  if (g.size == 1 || !engine().has_transport()) {
    if (a.op == Op::Send || a.op == Op::Recv)
      throw_error("distributed: ", op_name(a.op), " in a group of one rank has no peer");
    std::vector<unsigned char> tmp(in_bytes);
    in->read(tmp.data(), 0, in_bytes);
    out->write(tmp.data(), 0, out_bytes);
    return nullptr;
  }
  auto item = std::make_unique<Item>();
  Work& w = item->work;
  w.op = a.op, w.reduce = a.reduce, w.dtype = a.dtype, w.comm = g.comm, w.peer = a.peer;
  w.tag = a.tag;
  w.count = a.op == Op::Recv ? a.m : a.n;
  if (edge) {  // bytes: a message of another length says the value failed (failed_edge_message)
    w.dtype = uint8;
    w.count = static_cast<int64_t>(a.op == Op::Recv ? out_bytes : in_bytes);
    item->expect = a.op == Op::Recv ? static_cast<int64_t>(out_bytes) : -1;
    item->from = a.peer;
  }
  if (in) {
    if (void* p = in->host_ptr()) {
      w.in = p;
    } else {
      item->staged.resize(in_bytes);
      in->read(item->staged.data(), 0, in_bytes);
      w.in = item->staged.data();
    }
  }
  if (edge && a.op == Op::Recv && out_bytes == 0) {  // room for a failure message
    item->result.resize(1);
    w.out = item->result.data();
    w.count = 1;
  } else if (!out) {
  } else if (a.op == Op::Send) {  // send's value is its input: copied now, before the message goes
    if (out->host_ptr())
      std::memcpy(out->host_ptr(), w.in, in_bytes);
    else
      out->write(w.in, 0, in_bytes);
  } else if (void* p = out->host_ptr()) {
    w.out = p;
  } else {
    item->result.resize(out_bytes);
    item->device_out = out;
    item->out_bytes = out_bytes;
    w.out = item->result.data();
  }
  item->event = std::make_shared<HostEvent>();
  EventPtr ev = item->event;
  engine().post(channel_of(a), position, std::move(item));
  return ev;
}

}  // namespace kiln::distributed
