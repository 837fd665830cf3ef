// What tests/dist/cluster_test.sh asks of ranks on the emulated hosts (tools/cluster/cluster.sh):
// each rank prints the IPv4 addresses it sees (its namespace's), then rank 0 sends BYTES (argv[1],
// default 16 MiB) to rank 1 with MPI_Send, three times, and prints the fastest transfer's time;
// rank 1 acknowledges each with a byte, so the time is that of the bytes arriving.
//   rank R of N: 10.x.y.z
//   transfer B bytes rank 0 -> 1: S s
// Bare MPI only (no Kiln): the test is of the links and the launcher, not of the library.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <mpi.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  long bytes = argc > 1 ? std::atol(argv[1]) : 16L << 20;

  std::string addrs;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) == 0) {
    for (ifaddrs* a = list; a; a = a->ifa_next) {
      if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET) continue;
      char text[INET_ADDRSTRLEN];
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, text, sizeof text);
      if (std::string(text).rfind("127.", 0) == 0) continue;
      if (!addrs.empty()) addrs += ' ';
      addrs += text;
    }
    freeifaddrs(list);
  }
  // One rank at a time, so the lines do not interleave.
  for (int r = 0; r < size; ++r) {
    if (r == rank)
      std::printf("rank %d of %d: %s\n", rank, size, addrs.c_str()), std::fflush(stdout);
    MPI_Barrier(MPI_COMM_WORLD);
  }

  if (size >= 2 && rank < 2) {
    std::vector<char> buf(static_cast<size_t>(bytes), 1);
    char ack = 0;
    double best = 1e30;
    for (int rep = 0; rep < 3; ++rep) {
      MPI_Barrier(MPI_COMM_WORLD);  // the other ranks take part below
      double t0 = MPI_Wtime();
      if (rank == 0) {
        MPI_Send(buf.data(), static_cast<int>(bytes), MPI_CHAR, 1, 1, MPI_COMM_WORLD);
        MPI_Recv(&ack, 1, MPI_CHAR, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      } else {
        MPI_Recv(buf.data(), static_cast<int>(bytes), MPI_CHAR, 0, 1, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
        MPI_Send(&ack, 1, MPI_CHAR, 0, 2, MPI_COMM_WORLD);
      }
      best = std::min(best, MPI_Wtime() - t0);
    }
    if (rank == 0) std::printf("transfer %ld bytes rank 0 -> 1: %.4f s\n", bytes, best);
  } else {
    for (int rep = 0; rep < 3; ++rep) MPI_Barrier(MPI_COMM_WORLD);
  }
  MPI_Finalize();
  return 0;
}
