// A JAX peer in a child process: a script under benchmarks/peers/ that prints `ready jax
// <version>` once compiled and then, for each line `N` on stdin, runs N calls and prints
// `best_ms <fastest call> cpu_ms <CPU time per call>`. Kiln's and JAX's timings alternate round
// by round within one run, so both see the same load. JAX is never a build or test dependency.
#pragma once

#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <string>

struct Timing {
  double wall = 1e30, cpu = 1e30;
};

// CPU time of the whole process (all threads), for the per-call CPU figure Kiln reports too.
inline double process_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

class JaxPeer {
 public:
  JaxPeer(const std::string& python, const std::string& script) {
    int to_child[2], from_child[2];
    if (pipe(to_child) != 0 || pipe(from_child) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(to_child[0], 0);
      dup2(from_child[1], 1);
      dup2(from_child[1], 2);  // a Python error arrives as the last line before EOF
      close(to_child[1]);
      close(from_child[0]);
      execl(python.c_str(), python.c_str(), script.c_str(), static_cast<char*>(nullptr));
      std::printf("could not run %s\n", python.c_str());
      _exit(127);
    }
    close(to_child[0]);
    close(from_child[1]);
    in_ = fdopen(to_child[1], "w");
    out_ = fdopen(from_child[0], "r");
    std::string line = read_line("ready jax ");
    if (!line.empty()) version_ = line.substr(10);
  }
  ~JaxPeer() {
    if (in_) std::fclose(in_);
    if (out_) std::fclose(out_);
    if (pid_ > 0) waitpid(pid_, nullptr, 0);
  }
  bool ok() const { return !version_.empty(); }
  const std::string& version() const { return version_; }
  const std::string& last_line() const { return last_; }

  // Fastest of `reps` calls and CPU time per call, in seconds; wall < 0 when the peer failed.
  Timing best_of(int reps) {
    Timing t;
    t.wall = -1;
    if (!ok()) return t;
    std::fprintf(in_, "%d\n", reps);
    std::fflush(in_);
    std::string line = read_line("best_ms ");
    double wall_ms = 0, cpu_ms = 0;
    if (std::sscanf(line.c_str(), "best_ms %lf cpu_ms %lf", &wall_ms, &cpu_ms) == 2) {
      t.wall = wall_ms / 1e3;
      t.cpu = cpu_ms / 1e3;
    }
    return t;
  }

 private:
  // The next line starting with `prefix` (other output, e.g. warnings, is skipped); "" at EOF.
  std::string read_line(const char* prefix) {
    char buf[1024];
    while (out_ && std::fgets(buf, sizeof buf, out_)) {
      last_ = buf;
      if (last_.rfind(prefix, 0) == 0) {
        last_.erase(last_.find_last_not_of("\r\n") + 1);
        return last_;
      }
    }
    version_.clear();
    return "";
  }

  pid_t pid_ = -1;
  FILE* in_ = nullptr;
  FILE* out_ = nullptr;
  std::string version_, last_;
};
