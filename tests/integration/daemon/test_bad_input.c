/* Bad input against the real tesserad: malformed JSON, unknown ops and
 * fields, wrong types, over-long lines, silent and half-speaking clients,
 * hundreds of clients at once, clients that never read, a second daemon.
 * Each gets an error reply or is dropped, and the daemon keeps serving. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char dir[64], sock_path[100], conf[300], state[300];
static pid_t daemon_pid;

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static int dial(void) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  snprintf(a.sun_path, sizeof a.sun_path, "%s", sock_path);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

static void send_all(int fd, const char *buf, size_t len) {
  size_t off = 0;
  while (off < len) {
    ssize_t w = send(fd, buf + off, len - off, MSG_NOSIGNAL);
    if (w <= 0) return; /* the daemon may close on us: that is allowed */
    off += (size_t)w;
  }
}

/* Reads one line (without '\n') within timeout_ms; "" on EOF, "<timeout>" on timeout. */
static char *read_line(int fd, int timeout_ms) {
  static char line[70000];
  size_t n = 0;
  while (n < sizeof line - 1) {
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) <= 0) {
      strcpy(line, "<timeout>");
      return line;
    }
    ssize_t r = recv(fd, line + n, 1, 0);
    if (r <= 0) break;
    if (line[n] == '\n') break;
    n++;
  }
  line[n] = '\0';
  return line;
}

static char *ask(int fd, const char *req) {
  send_all(fd, req, strlen(req));
  return read_line(fd, 5000);
}

static void write_config(const char *extra) {
  FILE *f = fopen(conf, "w");
  fprintf(f,
          "[daemon]\ndevices = config\nsync = none\nclient_timeout = 1s\n%s\n"
          "[device.0]\nmemory = 80GiB\n",
          extra);
  fclose(f);
}

static long g_nofile = 0; /* RLIMIT_NOFILE for the next spawned daemon (0: inherit) */

static pid_t spawn_daemon(const char *state_dir, const char *sock, const char *errfile) {
  char exe[512];
  snprintf(exe, sizeof exe, "%s/tesserad", getenv("TESSERA_BIN_DIR"));
  pid_t pid = fork();
  if (pid == 0) {
    int fd = open(errfile, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 2);
    int null = open("/dev/null", O_WRONLY);
    dup2(null, 1); /* never hold the test runner's stdout open */
    close(null);
    if (g_nofile) {
      struct rlimit rl = {(rlim_t)g_nofile, (rlim_t)g_nofile};
      setrlimit(RLIMIT_NOFILE, &rl);
    }
    execl(exe, "tesserad", "--config", conf, "--state-dir", state_dir, "--socket", sock, (char *)NULL);
    _exit(127);
  }
  return pid;
}

static void start(const char *extra) {
  snprintf(dir, sizeof dir, "/tmp/tsr-bad-XXXXXX");
  cr_assert_not_null(mkdtemp(dir));
  snprintf(sock_path, sizeof sock_path, "%s/s.sock", dir);
  snprintf(conf, sizeof conf, "%s/t.conf", dir);
  snprintf(state, sizeof state, "%s/state", dir);
  write_config(extra);
  char err[320];
  snprintf(err, sizeof err, "%s/daemon.err", dir);
  daemon_pid = spawn_daemon(state, sock_path, err);
  for (int i = 0; i < 500; i++) {
    int fd = dial();
    if (fd >= 0) {
      close(fd);
      return;
    }
    sleep_ms(10);
  }
  cr_assert_fail("daemon did not start");
}

static void setup(void) { start(""); }

static void teardown(void) {
  kill(daemon_pid, SIGTERM);
  int st;
  waitpid(daemon_pid, &st, 0);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  cr_assert_eq(system(cmd), 0);
  cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "daemon did not stop cleanly");
}

/* The daemon still serves a fresh client. */
static void assert_alive(void) {
  int fd = dial();
  cr_assert_geq(fd, 0, "daemon stopped accepting");
  char *r = ask(fd, "{\"op\":\"hello\"}\n");
  cr_assert(strstr(r, "\"ok\": true") || strstr(r, "\"ok\":true"), "hello failed: %s", r);
  close(fd);
}

TestSuite(bad_input, .init = setup, .fini = teardown, .timeout = 60);

Test(bad_input, malformed_json_gets_an_error_and_the_connection_lives) {
  int fd = dial();
  const char *bad[] = {"{\"op\":\n",
                       "not json\n",
                       "{\"op\":\"hello\"\n",
                       "[1,2,3]\n",
                       "42\n",
                       "\"op\"\n",
                       "{\"op\":5}\n",
                       "{}\n",
                       "{\"op\":\"hello\",\"op\":\"hello\"}\n", /* duplicate key */
                       NULL};
  for (int i = 0; bad[i]; i++) {
    char *r = ask(fd, bad[i]);
    cr_assert(strstr(r, "\"code\":\"bad_request\""), "%s -> %s", bad[i], r);
  }
  char *r = ask(fd, "{\"op\":\"hello\"}\n");
  cr_assert(strstr(r, "\"ok\":true"), "connection unusable after errors: %s", r);
  close(fd);
}

Test(bad_input, binary_garbage_with_nul_bytes) {
  int fd = dial();
  char junk[512];
  for (size_t i = 0; i < sizeof junk; i++) junk[i] = (char)(i * 7 + 3);
  junk[sizeof junk - 1] = '\n';
  send_all(fd, junk, sizeof junk);
  char *r = read_line(fd, 5000);
  cr_assert(strstr(r, "bad_request"), "%s", r);
  close(fd);
  assert_alive();
}

Test(bad_input, unknown_ops_and_fields) {
  int fd = dial();
  char *r = ask(fd, "{\"op\":\"lease.destroy_everything\"}\n");
  cr_assert(strstr(r, "\"code\":\"unknown_op\""), "%s", r);
  r = ask(fd, "{\"op\":\"lease.list\",\"evil\":1}\n");
  cr_assert(strstr(r, "\"code\":\"unknown_field\""), "%s", r);
  r = ask(fd, "{\"op\":\"lease.create\",\"device\":0,\"fraction_ppm\":1,\"duration_ns\":1,\"uid\":0}\n");
  cr_assert(strstr(r, "\"code\":\"unknown_field\""), "claiming a uid must fail: %s", r);
  close(fd);
}

Test(bad_input, wrong_types_and_ranges) {
  int fd = dial();
  const char *bad[] = {
      "{\"op\":\"lease.create\",\"device\":\"0\",\"fraction_ppm\":500000,\"duration_ns\":1000}\n",
      "{\"op\":\"lease.create\",\"device\":-1,\"fraction_ppm\":500000,\"duration_ns\":1000}\n",
      "{\"op\":\"lease.create\",\"device\":0,\"fraction_ppm\":1000001,\"duration_ns\":1000}\n",
      "{\"op\":\"lease.create\",\"device\":0,\"fraction_ppm\":0,\"duration_ns\":1000}\n",
      "{\"op\":\"lease.create\",\"device\":0,\"fraction_ppm\":0.5,\"duration_ns\":1000}\n",
      "{\"op\":\"lease.create\",\"device\":0,\"fraction_ppm\":500000,\"duration_ns\":0}\n",
      "{\"op\":\"lease.create\",\"device\":0,\"fraction_ppm\":500000}\n",
      "{\"op\":\"lease.create\",\"device\":0,\"fraction_ppm\":500000,\"duration_ns\":99999999999999999999}\n",
      "{\"op\":\"lease.create\",\"device\":0,\"fraction_ppm\":500000,\"duration_ns\":1000,\"user\":7}\n",
      "{\"op\":\"lease.release\",\"id\":\"1\"}\n",
      "{\"op\":\"lease.release\"}\n",
      "{\"op\":\"lease.list\",\"all\":\"yes\"}\n",
      NULL};
  for (int i = 0; bad[i]; i++) {
    char *r = ask(fd, bad[i]);
    cr_assert(strstr(r, "\"ok\":false"), "%s -> %s", bad[i], r);
    cr_assert(strstr(r, "invalid_argument") || strstr(r, "bad_request"), "%s -> %s", bad[i], r);
  }
  /* nothing was created by any of them */
  char *r = ask(fd, "{\"op\":\"lease.list\",\"all\":true}\n");
  cr_assert(strstr(r, "\"leases\":[]"), "%s", r);
  close(fd);
}

Test(bad_input, request_tag_is_echoed) {
  int fd = dial();
  char *r = ask(fd, "{\"op\":\"hello\",\"req\":\"abc-1\"}\n");
  cr_assert(strstr(r, "\"req\":\"abc-1\""), "%s", r);
  close(fd);
}

Test(bad_input, line_over_64KiB_is_refused_and_dropped) {
  int fd = dial();
  size_t n = 70000;
  char *big = malloc(n + 2);
  big[0] = '{';
  memset(big + 1, 'x', n);
  big[n + 1] = '\n';
  send_all(fd, big, n + 2);
  free(big);
  char *r = read_line(fd, 5000);
  cr_assert(strstr(r, "\"code\":\"line_too_long\""), "%s", r);
  r = read_line(fd, 3000);
  cr_assert_str_eq(r, "", "connection should be closed after an over-long line");
  close(fd);
  assert_alive();
}

Test(bad_input, a_line_of_exactly_the_limit_is_read) {
  int fd = dial();
  /* 65536 bytes: {"op":"hello","req":"xxxx...x"} padded to the limit */
  size_t limit = 65536;
  char *line = malloc(limit + 1);
  const char *head = "{\"op\":\"hello\",\"req\":\"";
  size_t h = strlen(head);
  memcpy(line, head, h);
  memset(line + h, 'x', limit - h - 2);
  memcpy(line + limit - 2, "\"}", 2);
  line[limit] = '\n';
  send_all(fd, line, limit + 1);
  free(line);
  char *r = read_line(fd, 5000);
  cr_assert(strstr(r, "\"ok\":true"), "a %zu-byte line was refused: %.100s", limit, r);
  close(fd);
}

Test(bad_input, silent_and_half_speaking_clients_time_out) {
  int silent = dial();
  int half = dial();
  send_all(half, "{\"op\":\"hel", 10);
  /* meanwhile others are served at once */
  assert_alive();
  char *r = read_line(silent, 4000);
  cr_assert_str_eq(r, "", "a silent client should be closed after client_timeout: %s", r);
  r = read_line(half, 4000);
  cr_assert_str_eq(r, "", "a half-written line should time out: %s", r);
  close(silent);
  close(half);
  assert_alive();
}

Test(bad_input, hundreds_of_clients_at_once) {
  enum { N = 300 };
  int fds[N];
  for (int i = 0; i < N; i++) {
    fds[i] = dial();
    cr_assert_geq(fds[i], 0, "client %d could not connect", i);
  }
  for (int i = 0; i < N; i++) send_all(fds[i], "{\"op\":\"lease.list\"}\n", 20);
  for (int i = 0; i < N; i++) {
    char *r = read_line(fds[i], 5000);
    cr_assert(strstr(r, "\"ok\":true"), "client %d: %s", i, r);
    close(fds[i]);
  }
}

Test(bad_input, a_client_that_never_reads_does_not_block_others) {
  int hog = dial();
  /* pipeline thousands of requests and never read the replies */
  char batch[4096];
  size_t n = 0;
  while (n + 40 < sizeof batch) n += (size_t)sprintf(batch + n, "{\"op\":\"devices\"}\n");
  for (int i = 0; i < 200; i++) {
    struct pollfd p = {hog, POLLOUT, 0};
    if (poll(&p, 1, 0) <= 0) break; /* our send buffer is full: the daemon stopped reading us */
    send_all(hog, batch, n);
  }
  assert_alive();
  close(hog);
  assert_alive();
}

Test(bad_input, second_daemon_on_the_same_state_dir_is_refused) {
  char err[320], other_sock[100];
  snprintf(err, sizeof err, "%s/second.err", dir);
  snprintf(other_sock, sizeof other_sock, "%s/other.sock", dir);
  pid_t p = spawn_daemon(state, other_sock, err);
  int st;
  waitpid(p, &st, 0);
  cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1, "second daemon was not refused");
  char msg[2048] = "";
  FILE *f = fopen(err, "r");
  msg[fread(msg, 1, sizeof msg - 1, f)] = '\0';
  fclose(f);
  cr_assert(strstr(msg, "another tesserad (pid"), "unclear refusal: %s", msg);
  cr_assert(strstr(msg, "already serves state directory"), "%s", msg);
  /* another state dir but the same socket: refused too */
  char state2[320];
  snprintf(state2, sizeof state2, "%s/state2", dir);
  p = spawn_daemon(state2, sock_path, err);
  waitpid(p, &st, 0);
  cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1, "daemon on a live socket was not refused");
  f = fopen(err, "r");
  msg[fread(msg, 1, sizeof msg - 1, f)] = '\0';
  fclose(f);
  cr_assert(strstr(msg, "already listens on"), "%s", msg);
  assert_alive();
}

/* Tests that start their own daemon (or none). */
TestSuite(bad_start, .timeout = 60);

Test(bad_start, too_many_clients_get_busy, .fini = teardown) {
  start("max_clients = 20");
  sleep_ms(200); /* let the daemon see start()'s probe connection close */
  int fds[30], busy = 0, served = 0;
  for (int i = 0; i < 30; i++) fds[i] = dial();
  sleep_ms(200);
  for (int i = 0; i < 30; i++) {
    send_all(fds[i], "{\"op\":\"hello\"}\n", 15);
    char *r = read_line(fds[i], 3000);
    if (strstr(r, "\"code\":\"busy\""))
      busy++;
    else if (strstr(r, "\"ok\":true"))
      served++;
  }
  for (int i = 0; i < 30; i++) close(fds[i]);
  cr_assert_eq(served, 20, "served %d", served);
  cr_assert_eq(busy, 10, "busy %d", busy);
  sleep_ms(100);
  assert_alive();
}

Test(bad_start, bad_config_refuses_to_start_with_the_line) {
  snprintf(dir, sizeof dir, "/tmp/tsr-bad-XXXXXX");
  cr_assert_not_null(mkdtemp(dir));
  snprintf(conf, sizeof conf, "%s/t.conf", dir);
  snprintf(state, sizeof state, "%s/state", dir);
  snprintf(sock_path, sizeof sock_path, "%s/s.sock", dir);
  FILE *f = fopen(conf, "w");
  fprintf(f, "[daemon]\nsync = full\nsnyc = none\n");
  fclose(f);
  char err[320];
  snprintf(err, sizeof err, "%s/e", dir);
  pid_t p = spawn_daemon(state, sock_path, err);
  int st;
  waitpid(p, &st, 0);
  cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1);
  f = fopen(err, "r");
  char msg[2048] = "";
  msg[fread(msg, 1, sizeof msg - 1, f)] = '\0';
  fclose(f);
  cr_assert(strstr(msg, "t.conf:3: unknown key 'snyc'"), "%s", msg);
  cr_assert_neq(access(state, F_OK), 0, "a refused start created the state directory");
  /* no devices at all: the message says how to declare one */
  f = fopen(conf, "w");
  fprintf(f, "[daemon]\ndevices = config\n");
  fclose(f);
  p = spawn_daemon(state, sock_path, err);
  waitpid(p, &st, 0);
  cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1);
  f = fopen(err, "r");
  char all[2048] = "";
  size_t n = fread(all, 1, sizeof all - 1, f);
  all[n] = '\0';
  fclose(f);
  cr_assert(strstr(all, "[device.0]") && strstr(all, "memory = 80GiB"), "%s", all);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  cr_assert_eq(system(cmd), 0);
}

static long cpu_ticks(pid_t pid) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  char *p = strrchr(buf, ')');
  long utime = 0, stime = 0;
  /* fields after the command: state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime */
  sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %ld %ld", &utime, &stime);
  return utime + stime;
}

Test(bad_start, out_of_descriptors_neither_spins_nor_stops_serving, .fini = teardown) {
  g_nofile = 70; /* max_clients is cut to 64, and the daemon needs ~12 more */
  start("");
  g_nofile = 0;
  sleep_ms(200);
  enum { N = 70 };
  int fds[N];
  for (int i = 0; i < N; i++) fds[i] = dial();
  sleep_ms(500);
  long before = cpu_ticks(daemon_pid);
  sleep_ms(1000);
  long used = cpu_ticks(daemon_pid) - before;
  cr_assert_lt(used, 20, "the daemon spun at %ld ticks/s while out of descriptors", used);
  for (int i = 0; i < 20; i++) close(fds[i]);
  sleep_ms(300);
  assert_alive();
  for (int i = 20; i < N; i++) close(fds[i]);
}
