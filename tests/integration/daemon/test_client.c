/* The C client library (proto/proto.h) against the real tesserad: the
 * tree-free lease calls, refusals turned into statuses, a table larger than
 * any reply listed page by page, several calls on one connection, and the
 * request tag echoed byte for byte. */
#include <criterion/criterion.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/json.h"
#include "proto/proto.h"

static char dir[64], sock_path[100];
static pid_t daemon_pid;

static void setup(void) {
  snprintf(dir, sizeof dir, "/tmp/tsr-client-XXXXXX");
  cr_assert_not_null(mkdtemp(dir));
  char conf[200], state[200], exe[512];
  snprintf(sock_path, sizeof sock_path, "%s/s.sock", dir);
  snprintf(conf, sizeof conf, "%s/t.conf", dir);
  snprintf(state, sizeof state, "%s/state", dir);
  snprintf(exe, sizeof exe, "%s/tesserad", getenv("TESSERA_BIN_DIR"));
  FILE *f = fopen(conf, "w");
  fprintf(f,
          "[daemon]\ndevices = config\nsync = none\nlog_level = warn\n"
          "min_lease = 0\nmax_leases_per_user = 0\n[device.0]\nmemory = 80GiB\n");
  fclose(f);
  daemon_pid = fork();
  if (daemon_pid == 0) {
    execl(exe, "tesserad", "--config", conf, "--state-dir", state, "--socket", sock_path, (char *)NULL);
    _exit(127);
  }
  for (int i = 0; i < 500; i++) {
    tsr_proto_client_t *c;
    tsr_status_t st = tsr_proto_client_connect(sock_path, &c);
    if (!st) {
      tsr_proto_client_close(c);
      return;
    }
    tsr_status_free(st);
    struct timespec ts = {0, 10000000};
    nanosleep(&ts, NULL);
  }
  cr_assert_fail("daemon did not start");
}

static void teardown(void) {
  kill(daemon_pid, SIGTERM);
  int st;
  waitpid(daemon_pid, &st, 0);
  char cmd[100];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  cr_assert_eq(system(cmd), 0);
  cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "daemon did not stop cleanly");
}

TestSuite(client, .init = setup, .fini = teardown, .timeout = 60);

static tsr_proto_client_t *dial(void) {
  tsr_proto_client_t *c = NULL;
  tsr_status_t st = tsr_proto_client_connect(sock_path, &c);
  cr_assert_null(st, "%s", tsr_status_message(st));
  return c;
}

static tsr_lease_t call_lease(tsr_proto_client_t *c, const char *line) {
  tsr_lease_t l;
  tsr_status_t st = tsr_proto_client_call_lease(c, line, strlen(line), &l);
  cr_assert_null(st, "%s: %s", line, tsr_status_message(st));
  return l;
}

Test(client, lease_calls_without_a_tree) {
  tsr_proto_client_t *c = dial();
  tsr_lease_t l = call_lease(c,
                             "{\"op\":\"lease.create\",\"device\":0,\"fraction_ppm\":250000,"
                             "\"duration_ns\":3600000000000,\"sm_ppm\":100000}");
  cr_assert_gt(l.id, 0);
  cr_assert_eq(l.fraction_ppm, 250000);
  cr_assert_eq(l.sm_ppm, 100000);
  cr_assert_eq(l.bytes, (uint64_t)80 << 30 >> 2);
  cr_assert_eq(l.state, TSR_LEASE_ACTIVE);
  cr_assert_eq(l.owner_uid, getuid());
  cr_assert_eq(l.pid, getpid());
  cr_assert_eq(l.deadline_wall_ns - l.start_wall_ns, UINT64_C(3600000000000));
  char line[96];
  snprintf(line, sizeof line, "{\"op\":\"lease.show\",\"id\":%llu}", (unsigned long long)l.id);
  tsr_lease_t s = call_lease(c, line);
  cr_assert_eq(s.id, l.id);
  cr_assert_eq(s.deadline_wall_ns, l.deadline_wall_ns);
  snprintf(line, sizeof line, "{\"op\":\"lease.release\",\"id\":%llu}", (unsigned long long)l.id);
  tsr_lease_t r = call_lease(c, line);
  cr_assert_eq(r.id, l.id);
  cr_assert_eq(r.state, TSR_LEASE_RELEASED);
  cr_assert_geq(r.ended_wall_ns, l.start_wall_ns);
  tsr_proto_client_close(c);
}

Test(client, refusals_become_statuses_with_the_daemons_words) {
  tsr_proto_client_t *c = dial();
  struct {
    const char *line;
    tsr_status_code_t code;
    const char *words;
  } cases[] = {
      {"{\"op\":\"lease.release\",\"id\":999999}", TSR_NOT_FOUND, "999999"},
      {"{\"op\":\"lease.create\",\"device\":0,\"fraction_ppm\":2000000,\"duration_ns\":1}", TSR_INVALID_ARGUMENT,
       "fraction_ppm"},
      {"{\"op\":\"lease.create\",\"device\":9,\"fraction_ppm\":1,\"duration_ns\":1000000000}", TSR_NOT_FOUND, "device"},
      {"{\"op\":\"lease.show\",\"id\":1,\"x\":1}", TSR_INVALID_ARGUMENT, "takes no field 'x'"},
      {"{\"op\":\"lease.show\",\"id\":1", TSR_INVALID_ARGUMENT, "malformed JSON"},
      {"{\"op\":\"hello\"}", TSR_DATA_LOSS, "no lease"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    tsr_lease_t l;
    tsr_status_t st = tsr_proto_client_call_lease(c, cases[i].line, strlen(cases[i].line), &l);
    cr_assert_not_null(st, "%s was accepted", cases[i].line);
    cr_assert_eq(tsr_status_code(st), cases[i].code, "%s: %s", cases[i].line, tsr_status_message(st));
    cr_assert(strstr(tsr_status_message(st), cases[i].words), "%s: '%s' lacks '%s'", cases[i].line,
              tsr_status_message(st), cases[i].words);
    tsr_status_free(st);
  }
  tsr_proto_client_close(c);
}

/* Lists one page: {"op":"lease.list","all":true[,"after":A]}; returns the
 * ids in *ids (appended at *k) and the "next" cursor (0: none). */
static uint64_t list_page(tsr_proto_client_t *c, uint64_t after, uint64_t *ids, size_t *k, size_t *out_bytes) {
  char line[128];
  if (after)
    snprintf(line, sizeof line, "{\"op\":\"lease.list\",\"all\":true,\"after\":%llu}", (unsigned long long)after);
  else
    snprintf(line, sizeof line, "{\"op\":\"lease.list\",\"all\":true}");
  const char *reply;
  size_t n;
  tsr_status_t st = tsr_proto_client_call_line(c, line, strlen(line), &reply, &n);
  cr_assert_null(st, "%s", tsr_status_message(st));
  *out_bytes = n;
  tsr_json_member_t m[4];
  size_t count;
  tsr_json_error_t err;
  cr_assert(tsr_json_scan_object(reply, n, m, 4, &count, &err), "%s", err.message);
  const tsr_json_member_t *leases = tsr_json_find(m, count, "leases");
  cr_assert_not_null(leases, "%.*s", (int)(n > 300 ? 300 : n), reply);
  size_t cur = 0;
  tsr_json_member_t el;
  while (tsr_json_array_next(leases->value, leases->value_len, &cur, &el)) {
    tsr_lease_t l;
    st = tsr_proto_lease_parse(el.value, el.value_len, &l);
    cr_assert_null(st, "%s", tsr_status_message(st));
    ids[(*k)++] = l.id;
  }
  uint64_t next = 0;
  const tsr_json_member_t *nm = tsr_json_find(m, count, "next");
  if (nm) cr_assert(tsr_json_get_u64(nm, &next) && next > 0, "bad next");
  return next;
}

Test(client, a_table_larger_than_a_reply_is_listed_page_by_page) {
  tsr_proto_client_t *c = dial();
  enum { N = 4000 }; /* ~400 bytes each: ~1.6 MB in all, far over one page */
  static uint64_t made[N], seen[N + 1];
  for (int i = 0; i < N; i++)
    made[i] = call_lease(c,
                         "{\"op\":\"lease.create\",\"device\":0,\"fraction_ppm\":1,"
                         "\"duration_ns\":3600000000000}")
                  .id;
  size_t k = 0, pages = 0, bytes = 0, biggest = 0;
  uint64_t after = 0;
  do {
    cr_assert_lt(pages, (size_t)N, "paging does not end");
    after = list_page(c, after, seen, &k, &bytes);
    if (bytes > biggest) biggest = bytes;
    pages++;
    cr_assert_leq(k, (size_t)N, "a lease was listed twice");
  } while (after);
  cr_assert_eq(k, (size_t)N, "listed %zu of %d leases", k, N);
  for (size_t i = 0; i < k; i++) cr_assert_eq(seen[i], made[i], "lease %zu out of order", i);
  cr_assert_geq(pages, (size_t)(N / TSR_PROTO_LIST_PAGE_MAX), "%zu pages", pages);
  cr_assert_lt(biggest, (size_t)1 << 20, "a page of %zu bytes", biggest);
  /* a bad cursor or limit is refused, not guessed */
  static const char bad[] = "{\"op\":\"lease.list\",\"limit\":0}";
  const char *reply;
  size_t n;
  cr_assert_null(tsr_proto_client_call_line(c, bad, sizeof bad - 1, &reply, &n));
  cr_assert(strstr(reply, "invalid_argument"), "%.*s", (int)n, reply);
  /* and small calls still work on the same connection and on a new one */
  tsr_lease_t l = call_lease(c, "{\"op\":\"lease.show\",\"id\":1}");
  cr_assert_eq(l.id, 1);
  tsr_proto_client_close(c);
  c = dial();
  static const char hello[] = "{\"op\":\"hello\"}";
  tsr_status_t st = tsr_proto_client_call_line(c, hello, sizeof hello - 1, &reply, &n);
  cr_assert_null(st);
  cr_assert(strstr(reply, "\"ok\":true"));
  tsr_proto_client_close(c);
}

Test(client, request_tag_is_echoed_byte_for_byte) {
  tsr_proto_client_t *c = dial();
  static const char req[] = "{\"op\":\"hello\",\"req\":{\"k\":[1,2.50e+3,\"\\u00e9\\n\",null,{\"a\":{}}],\"t\":true}}";
  static const char tag[] = "\"req\":{\"k\":[1,2.50e+3,\"\\u00e9\\n\",null,{\"a\":{}}],\"t\":true}";
  const char *reply;
  size_t n;
  tsr_status_t st = tsr_proto_client_call_line(c, req, sizeof req - 1, &reply, &n);
  cr_assert_null(st);
  char copy[512];
  snprintf(copy, sizeof copy, "%.*s", (int)n, reply);
  cr_assert(strstr(copy, tag), "tag changed: %s", copy);
  /* an error reply carries it too */
  static const char bad[] = "{\"op\":\"nope\",\"req\":7}";
  st = tsr_proto_client_call_line(c, bad, sizeof bad - 1, &reply, &n);
  cr_assert_null(st);
  snprintf(copy, sizeof copy, "%.*s", (int)n, reply);
  cr_assert(strstr(copy, "\"code\":\"unknown_op\"") && strstr(copy, "\"req\":7}"), "%s", copy);
  tsr_proto_client_close(c);
}

/* A client that sends many requests whose replies are big and reads them
 * only later: the daemon stops reading it past 256 KiB of unsent replies,
 * then goes on where it stopped once the client reads. Every request gets
 * its reply, in order, none lost or doubled across the pause. */
Test(client, pipelined_requests_paused_for_their_replies_are_all_answered_in_order) {
  tsr_proto_client_t *c = dial();
  for (int i = 0; i < 300; i++) /* ~130 KB per full page of lease.list */
    call_lease(c,
               "{\"op\":\"lease.create\",\"device\":0,\"fraction_ppm\":1,"
               "\"duration_ns\":3600000000000}");
  tsr_proto_client_close(c);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  snprintf(a.sun_path, sizeof a.sun_path, "%s", sock_path);
  cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
  enum { N = 60 }; /* ~8 MB of replies: far past the pause */
  static char req[N * 64];
  size_t len = 0;
  for (int i = 0; i < N; i++)
    len += (size_t)snprintf(req + len, sizeof req - len, "{\"op\":\"lease.list\",\"all\":true,\"req\":%d}\n", i);
  cr_assert_eq(send(fd, req, len, MSG_NOSIGNAL), (ssize_t)len);
  struct timespec pause = {0, 300000000};
  nanosleep(&pause, NULL); /* let the daemon fill up and stop reading us */
  static char buf[1 << 16];
  static char line[1 << 20];
  size_t ln = 0;
  int next = 0;
  while (next < N) {
    struct pollfd p = {fd, POLLIN, 0};
    cr_assert_gt(poll(&p, 1, 10000), 0, "no reply %d within 10 s", next);
    ssize_t r = recv(fd, buf, sizeof buf, 0);
    cr_assert_gt(r, 0, "connection closed before reply %d", next);
    for (ssize_t i = 0; i < r; i++) {
      if (buf[i] != '\n') {
        cr_assert_lt(ln, sizeof line - 1);
        line[ln++] = buf[i];
        continue;
      }
      line[ln] = '\0';
      char tag[32];
      snprintf(tag, sizeof tag, "\"req\":%d}", next);
      cr_assert(strstr(line, "\"ok\":true"), "reply %d failed: %.200s", next, line);
      cr_assert(ln > strlen(tag) && strcmp(line + ln - strlen(tag), tag) == 0, "reply %d out of order: ...%s", next,
                line + (ln > 40 ? ln - 40 : 0));
      next++;
      ln = 0;
    }
  }
  close(fd);
}
