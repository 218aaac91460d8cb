/* bench_pingpong: the machine's floor under tesserad's round trip, with no
 * tessera code: two processes bounce 200 bytes over a Unix socketpair, the
 * server in epoll as tesserad is. Four ways:
 *
 *   sleep/recv    the server sleeps in epoll_wait, the client in recv
 *   poll/recv     the server polls for busy_poll (50 us) before sleeping
 *   sleep/poll    the client waits in poll(POLLIN) instead of recv
 *   poll/poll     both, as tesserad and proto/client.c do
 *
 * usage: bench_pingpong [--quick]   (prints a markdown table) */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/time.h"
#include "bench_record.h"

#define BUSY_POLL_NS (50 * TSR_NS_PER_US)

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static void serve(int fd, bool busy) {
  fcntl(fd, F_SETFL, O_NONBLOCK);
  int ep = epoll_create1(0);
  struct epoll_event ev = {.events = EPOLLIN};
  epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
  char b[512];
  for (;;) {
    struct epoll_event e;
    int n = 0;
    if (busy) {
      uint64_t until = tsr_time_mono_ns() + BUSY_POLL_NS;
      do n = epoll_wait(ep, &e, 1, 0);
      while (n == 0 && tsr_time_mono_ns() < until);
    }
    if (n == 0) n = epoll_wait(ep, &e, 1, -1);
    ssize_t r = recv(fd, b, sizeof b, 0);
    if (r == 0) _exit(0);
    if (r > 0 && send(fd, b, (size_t)r, 0) != r) _exit(1);
  }
}

/* Median and p99 round trip in ns. */
static void run(bool busy, bool client_poll, int n, uint64_t *p50, uint64_t *p99) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) exit(1);
  pid_t pid = fork();
  if (pid == 0) {
    close(sv[0]);
    serve(sv[1], busy);
  }
  close(sv[1]);
  uint64_t *v = malloc(sizeof(uint64_t) * (size_t)n);
  char b[512];
  memset(b, 'x', 200);
  for (int i = 0; i < n; i++) {
    uint64_t t0 = tsr_time_mono_ns();
    if (send(sv[0], b, 200, 0) != 200) exit(1);
    size_t got = 0;
    while (got < 200) {
      if (client_poll) {
        struct pollfd p = {.fd = sv[0], .events = POLLIN};
        poll(&p, 1, -1);
      }
      ssize_t r = recv(sv[0], b + got, 200 - got, client_poll ? MSG_DONTWAIT : 0);
      if (r > 0)
        got += (size_t)r;
      else if (r == 0 || (errno != EAGAIN && errno != EINTR))
        exit(1);
    }
    v[i] = tsr_time_mono_ns() - t0;
  }
  close(sv[0]);
  waitpid(pid, NULL, 0);
  qsort(v, (size_t)n, sizeof(*v), cmp_u64);
  *p50 = v[n / 2];
  *p99 = v[(size_t)n * 99 / 100];
  free(v);
}

int main(int argc, char **argv) {
  int n = argc > 1 && strcmp(argv[1], "--quick") == 0 ? 2000 : 20000;
  if (argc > 1 && n == 20000) {
    fprintf(stderr, "usage: bench_pingpong [--quick]\n");
    return 2;
  }
  printf("## bench_pingpong: a Unix-socket round trip of 200 bytes, no tessera code (%d trips)\n\n", n);
  printf("| server waits | client waits | p50 | p99 |\n|---|---|---|---|\n");
  static const struct {
    bool busy, poll;
    const char *s, *c;
  } ways[] = {{false, false, "epoll_wait (sleeps)", "recv"},
              {true, false, "polls 50 us, then sleeps", "recv"},
              {false, true, "epoll_wait (sleeps)", "poll(POLLIN)"},
              {true, true, "polls 50 us, then sleeps (tesserad)", "poll(POLLIN) (proto client)"}};
  for (size_t i = 0; i < sizeof(ways) / sizeof(ways[0]); i++) {
    uint64_t p50, p99;
    run(ways[i].busy, ways[i].poll, n, &p50, &p99);
    printf("| %s | %s | %.1f us | %.1f us |\n", ways[i].s, ways[i].c, p50 / 1e3, p99 / 1e3);
    tsr_bench_record_t *rec = tsr_bench_record_begin("pingpong", "server %s, client %s", ways[i].s, ways[i].c);
    tsr_bench_record_figure(rec, (double)p50, "p50_ns");
    tsr_bench_record_figure(rec, (double)p99, "p99_ns");
    tsr_bench_record_end(rec, NULL, NULL);
    fflush(stdout);
  }
  return 0;
}
