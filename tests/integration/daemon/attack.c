/* attack.c: what a hostile local user does to tesserad, as a program that
 * the integration tests (hostile.sh) run as a real second user.
 *
 *   tsr_attack conns  SOCK N HOLD_S     open up to N connections, hold them
 *   tsr_attack noread SOCK N HOLD_S     N connections that send requests and
 *                                       never read a reply
 *   tsr_attack deny   SOCK SECONDS      refused requests as fast as it can
 *   tsr_attack leases SOCK PPM MAX      create leases of PPM until refused
 *                                       or MAX are made
 *
 * Each prints one line of "key=value" results on stdout for the script to
 * check, and exits 0 unless it could not run at all. Loops are bounded in
 * count and time. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static const char *sock_path;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int dial(void) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  snprintf(a.sun_path, sizeof a.sun_path, "%s", sock_path);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

/* Reads one line within timeout_ms into buf; returns its length, -1 on EOF
 * or error, -2 on timeout. */
static int read_line(int fd, char *buf, size_t cap, int timeout_ms) {
  size_t n = 0;
  while (n + 1 < cap) {
    struct pollfd p = {fd, POLLIN, 0};
    int r = poll(&p, 1, timeout_ms);
    if (r == 0) return -2;
    if (r < 0) return -1;
    ssize_t k = recv(fd, buf + n, 1, 0);
    if (k <= 0) return -1;
    if (buf[n] == '\n') break;
    n++;
  }
  buf[n] = '\0';
  return (int)n;
}

static int ask(int fd, const char *req, char *reply, size_t cap) {
  size_t len = strlen(req);
  if (send(fd, req, len, MSG_NOSIGNAL) != (ssize_t)len) return -1;
  return read_line(fd, reply, cap, 5000);
}

/* Is fd still open on the daemon's side (not closed or shut down)? */
static int alive(int fd) {
  struct pollfd p = {fd, POLLIN | POLLRDHUP, 0};
  if (poll(&p, 1, 0) <= 0) return 1; /* nothing to read, no hang-up */
  if (p.revents & (POLLHUP | POLLRDHUP | POLLERR)) return 0;
  char c;
  ssize_t r = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  return r > 0 || (r < 0 && errno == EAGAIN);
}

static int conns(int n, double hold) {
  int *fds = calloc((size_t)n, sizeof(int));
  int open_ok = 0, refused = 0, failed = 0;
  char reply[512];
  for (int i = 0; i < n; i++) {
    int fd = dial();
    if (fd < 0) {
      failed++;
      continue;
    }
    /* the daemon accepts, then either keeps the connection or writes one
     * busy line and closes it: a hello tells which */
    int r = ask(fd, "{\"op\":\"hello\"}\n", reply, sizeof reply);
    if (r > 0 && strstr(reply, "\"ok\":true")) {
      fds[open_ok++] = fd;
    } else {
      if (r > 0 && strstr(reply, "\"busy\""))
        refused++;
      else if (r == -1 || r == -2)
        refused++;
      close(fd);
    }
  }
  printf("open=%d refused=%d failed=%d\n", open_ok, refused, failed);
  fflush(stdout);
  double end = now_s() + hold;
  while (now_s() < end) usleep(50000);
  int still = 0;
  for (int i = 0; i < open_ok; i++) still += alive(fds[i]);
  fprintf(stderr, "attack conns: %d still open after %.1f s\n", still, hold);
  for (int i = 0; i < open_ok; i++) close(fds[i]);
  free(fds);
  return 0;
}

static int noread(int n, double hold) {
  int *fds = calloc((size_t)n, sizeof(int));
  int got = 0;
  for (int i = 0; i < n; i++) {
    int fd = dial();
    if (fd < 0) continue;
    fcntl(fd, F_SETFL, O_NONBLOCK);
    int sz = 4096; /* small buffers: the daemon's replies pile up on its side */
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
    fds[got++] = fd;
  }
  /* pipeline "list everything" requests (the biggest replies) without ever
   * reading; stop when the daemon stops taking them or after `hold` */
  static const char req[] = "{\"op\":\"lease.list\",\"all\":true}\n{\"op\":\"devices\"}\n";
  long long sent = 0;
  double end = now_s() + hold;
  while (now_s() < end) {
    int progress = 0;
    for (int i = 0; i < got; i++) {
      if (fds[i] < 0) continue;
      ssize_t w = send(fds[i], req, sizeof req - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (w > 0)
        sent += w, progress = 1;
      else if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
        close(fds[i]);
        fds[i] = -1;
      }
    }
    if (!progress) usleep(20000);
  }
  int still = 0;
  for (int i = 0; i < got; i++)
    if (fds[i] >= 0) still += alive(fds[i]);
  printf("connected=%d sent_bytes=%lld still_open=%d\n", got, sent, still);
  for (int i = 0; i < got; i++)
    if (fds[i] >= 0) close(fds[i]);
  free(fds);
  return 0;
}

static int deny(double seconds) {
  int fd = dial();
  if (fd < 0) {
    perror("connect");
    return 1;
  }
  /* a refused request (no such lease), pipelined; replies are read so the
   * daemon keeps taking requests */
  static const char req[] = "{\"op\":\"lease.release\",\"id\":999999999}\n";
  char buf[65536];
  long long sent = 0, replies = 0;
  double end = now_s() + seconds;
  fcntl(fd, F_SETFL, O_NONBLOCK);
  while (now_s() < end) {
    for (int k = 0; k < 64; k++) {
      ssize_t w = send(fd, req, sizeof req - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (w == (ssize_t)(sizeof req - 1))
        sent++;
      else
        break;
    }
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, 10) > 0) {
      ssize_t r = recv(fd, buf, sizeof buf, 0);
      if (r == 0) break;
      for (ssize_t i = 0; i < r; i++) replies += buf[i] == '\n';
    }
  }
  /* take the replies still on their way, so that replies == requests made */
  double give_up = now_s() + 10;
  while (replies < sent && now_s() < give_up) {
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    ssize_t r = recv(fd, buf, sizeof buf, 0);
    if (r <= 0) break;
    for (ssize_t i = 0; i < r; i++) replies += buf[i] == '\n';
  }
  close(fd);
  printf("sent=%lld replies=%lld\n", sent, replies);
  return 0;
}

static int leases(long ppm, long max) {
  int fd = dial();
  if (fd < 0) {
    perror("connect");
    return 1;
  }
  char req[256], reply[4096] = "";
  long made = 0;
  int r = 0;
  for (long i = 0; i < max; i++) {
    snprintf(req, sizeof req,
             "{\"op\":\"lease.create\",\"device\":0,\"fraction_ppm\":%ld,\"duration_ns\":3600000000000}\n", ppm);
    r = ask(fd, req, reply, sizeof reply);
    if (r <= 0 || !strstr(reply, "\"ok\":true")) break;
    made++;
  }
  char *code = strstr(reply, "\"code\":\"");
  char c[64] = "none";
  if (code && made < max) sscanf(code + 8, "%63[^\"]", c);
  printf("made=%ld code=%s\n", made, c);
  if (made < max) fprintf(stderr, "attack leases: stopped by: %s\n", reply);
  return 0;
}

int main(int argc, char **argv) {
  signal(SIGPIPE, SIG_IGN);
  if (argc < 4) {
    fprintf(stderr, "usage: tsr_attack conns|noread|deny|leases SOCK ARGS...\n");
    return 2;
  }
  sock_path = argv[2];
  if (!strcmp(argv[1], "conns") && argc == 5) return conns(atoi(argv[3]), atof(argv[4]));
  if (!strcmp(argv[1], "noread") && argc == 5) return noread(atoi(argv[3]), atof(argv[4]));
  if (!strcmp(argv[1], "deny") && argc == 4) return deny(atof(argv[3]));
  if (!strcmp(argv[1], "leases") && argc == 5) return leases(atol(argv[3]), atol(argv[4]));
  fprintf(stderr, "tsr_attack: bad arguments\n");
  return 2;
}
