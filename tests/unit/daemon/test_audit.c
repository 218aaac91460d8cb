/* The audit log (src/daemon/audit.c): lines written whole or not at all,
 * refusals rate-limited per user and summed up, rotation by size, and files
 * that are not the daemon's own refused. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/time.h"
#include "daemon/audit.h"
#include "daemon/identity.h"

static char dir[64], path[128];

static void setup(void) {
  snprintf(dir, sizeof dir, "/tmp/tsr-audit-XXXXXX");
  cr_assert_not_null(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/audit.log", dir);
}

static void teardown(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  cr_assert_eq(system(cmd), 0);
}

TestSuite(audit, .init = setup, .fini = teardown, .timeout = 30);

static tsr_audit_t *open_log(uint64_t max_bytes, uint32_t keep, uint32_t rate) {
  tsr_audit_config_t c = {.path = path, .max_bytes = max_bytes, .keep = keep, .deny_rate = rate};
  tsr_audit_t *a = NULL;
  tsr_status_t st = tsr_audit_open(&c, &a);
  cr_assert_null(st, "%s", tsr_status_message(st));
  return a;
}

static const tsr_identity_t bob = {.uid = 1001, .gid = 1001, .pid = 7, .user = "bob"};

static tsr_lease_t lease(uint64_t id) {
  tsr_lease_t l = {
      .id = id, .device = 0, .fraction_ppm = 250000, .bytes = 1 << 30, .owner_uid = 1001, .deadline_wall_ns = 1};
  snprintf(l.owner, sizeof l.owner, "bob");
  return l;
}

/* Counts the lines of `file` that contain `needle`. */
static int count(const char *file, const char *needle) {
  FILE *f = fopen(file, "r");
  if (!f) return -1;
  char line[4096];
  int n = 0;
  while (fgets(line, sizeof line, f)) n += strstr(line, needle) != NULL;
  fclose(f);
  return n;
}

static off_t size_of(const char *file) {
  struct stat st;
  return stat(file, &st) == 0 ? st.st_size : -1;
}

Test(audit, an_event_line_is_in_the_file_when_the_call_returns) {
  tsr_audit_t *a = open_log(0, 4, 5);
  tsr_lease_t l = lease(3);
  cr_assert_null(tsr_audit_lease(a, "create", &bob, &l, NULL));
  cr_assert_eq(count(path, "\"event\":\"create\""), 1);
  cr_assert_eq(count(path, "\"lease\":3,"), 1);
  tsr_audit_expiry_t e = {.late_ns = 5000000000ull, .during_downtime = true};
  cr_assert_null(tsr_audit_lease(a, "expire", NULL, &l, &e));
  cr_assert_eq(count(path, "\"late_ns\":5000000000,\"during_downtime\":true"), 1);
  tsr_audit_close(a);
}

Test(audit, names_are_escaped_by_the_json_writer) {
  tsr_audit_t *a = open_log(0, 4, 5);
  tsr_identity_t odd = bob;
  snprintf(odd.user, sizeof odd.user, "a\"b\\c\xff");
  tsr_audit_deny(a, &odd, "lease.release", "not_found", "line\nbreak", 0);
  tsr_audit_flush(a, 0);
  cr_assert_eq(count(path, "\"actor\":\"a\\\"b\\\\c\\ufffd\""), 1, "escaped actor");
  cr_assert_eq(count(path, "\"message\":\"line\\nbreak\""), 1);
  tsr_audit_close(a);
}

Test(audit, refusals_past_the_rate_are_counted_in_one_summary_per_second) {
  tsr_audit_t *a = open_log(0, 4, 2);
  uint64_t t0 = 100 * TSR_NS_PER_S;
  for (int i = 0; i < 10; i++) tsr_audit_deny(a, &bob, "lease.release", "not_found", "no", t0 + (uint64_t)i);
  tsr_identity_t carol = bob;
  carol.uid = 1002;
  snprintf(carol.user, sizeof carol.user, "carol");
  tsr_audit_deny(a, &carol, "lease.release", "not_found", "no", t0);
  tsr_audit_flush(a, t0 + 10);
  cr_assert_eq(count(path, "\"event\":\"deny\","), 3, "two of bob's, one of carol's");
  cr_assert_eq(count(path, "deny_summary"), 0, "the second is not over yet");
  tsr_audit_flush(a, t0 + TSR_NS_PER_S);
  cr_assert_eq(count(path, "\"event\":\"deny_summary\""), 1);
  cr_assert_eq(count(path, "\"actor\":\"bob\",\"actor_uid\":1001,\"suppressed\":8,"), 1);
  cr_assert_eq(tsr_audit_summaries(a), 1);
  /* a new second: the rate starts again */
  tsr_audit_deny(a, &bob, "lease.create", "conflict", "no", t0 + 2 * TSR_NS_PER_S);
  tsr_audit_flush(a, t0 + 2 * TSR_NS_PER_S);
  cr_assert_eq(count(path, "\"code\":\"conflict\""), 1);
  tsr_audit_close(a);
}

Test(audit, refusal_lines_keep_their_order_before_the_next_event) {
  tsr_audit_t *a = open_log(0, 4, 5);
  tsr_audit_deny(a, &bob, "lease.release", "not_found", "first", 0);
  tsr_lease_t l = lease(9);
  cr_assert_null(tsr_audit_lease(a, "create", &bob, &l, NULL));
  FILE *f = fopen(path, "r");
  char line[4096];
  cr_assert_not_null(fgets(line, sizeof line, f));
  cr_assert(strstr(line, "\"message\":\"first\""), "%s", line);
  cr_assert_not_null(fgets(line, sizeof line, f));
  cr_assert(strstr(line, "\"event\":\"create\""), "%s", line);
  fclose(f);
  tsr_audit_close(a);
}

Test(audit, rotates_by_size_and_keeps_n_files) {
  tsr_audit_t *a = open_log(1024, 2, 5);
  for (uint64_t i = 1; i <= 40; i++) {
    tsr_lease_t l = lease(i);
    cr_assert_null(tsr_audit_lease(a, "create", &bob, &l, NULL));
  }
  tsr_audit_close(a);
  char p1[160], p2[160], p3[160];
  snprintf(p1, sizeof p1, "%s.1", path);
  snprintf(p2, sizeof p2, "%s.2", path);
  snprintf(p3, sizeof p3, "%s.3", path);
  cr_assert_leq(size_of(path), 1024);
  cr_assert_gt(size_of(p1), 0);
  cr_assert_leq(size_of(p1), 1024);
  cr_assert_gt(size_of(p2), 0);
  cr_assert_eq(size_of(p3), -1, "only two rotated files are kept");
  cr_assert_eq(count(path, "\"lease\":40,"), 1, "the newest line is in the current file");
}

Test(audit, keep_zero_keeps_every_rotated_file) {
  tsr_audit_t *a = open_log(1024, 0, 5);
  for (uint64_t i = 1; i <= 30; i++) {
    tsr_lease_t l = lease(i);
    cr_assert_null(tsr_audit_lease(a, "create", &bob, &l, NULL));
  }
  tsr_audit_close(a);
  char cmd[256];
  snprintf(cmd, sizeof cmd, "cat %s/audit.log* | grep -c '\"event\":\"create\"' | grep -qx 30", dir);
  cr_assert_eq(system(cmd), 0, "all 30 grants are kept across the rotated files");
  snprintf(cmd, sizeof cmd, "ls %s | grep -Eq '^audit\\.log\\.[0-9]{10,}$'", dir);
  cr_assert_eq(system(cmd), 0, "rotated files are named by time");
}

Test(audit, a_line_that_does_not_fit_fails_and_leaves_no_half_line) {
  tsr_audit_t *a = open_log(0, 4, 5);
  tsr_lease_t l = lease(1);
  cr_assert_null(tsr_audit_lease(a, "create", &bob, &l, NULL));
  off_t before = size_of(path);
  /* the file may grow by 10 more bytes: the next line is cut short */
  signal(SIGXFSZ, SIG_IGN);
  struct rlimit rl = {(rlim_t)before + 10, (rlim_t)before + 10};
  cr_assert_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
  tsr_lease_t m = lease(2);
  tsr_status_t st = tsr_audit_lease(a, "release", &bob, &m, NULL);
  cr_assert_not_null(st, "a line that did not fit was reported written");
  cr_assert_eq(tsr_status_code(st), TSR_IO_ERROR, "%s", tsr_status_message(st));
  tsr_status_free(st);
  cr_assert_eq(size_of(path), before, "a partial line stayed in the log");
  tsr_audit_close(a);
}

Test(audit, refuses_links_fifos_and_open_directories) {
  tsr_audit_config_t c = {.path = path, .keep = 4, .deny_rate = 5};
  tsr_audit_t *a = NULL;
  char victim[128];
  snprintf(victim, sizeof victim, "%s/victim", dir);
  FILE *f = fopen(victim, "w");
  fputs("precious\n", f);
  fclose(f);
  cr_assert_eq(symlink(victim, path), 0);
  tsr_status_t st = tsr_audit_open(&c, &a);
  cr_assert_not_null(st, "a symlinked audit log was opened");
  cr_assert(strstr(tsr_status_message(st), "symbolic link"), "%s", tsr_status_message(st));
  tsr_status_free(st);
  cr_assert_eq(size_of(victim), 9);
  unlink(path);
  cr_assert_eq(mkfifo(path, 0600), 0);
  st = tsr_audit_open(&c, &a); /* must not hang waiting for a reader */
  cr_assert_not_null(st);
  cr_assert(strstr(tsr_status_message(st), "not a regular file"), "%s", tsr_status_message(st));
  tsr_status_free(st);
  unlink(path);
  cr_assert_eq(chmod(dir, 0777), 0);
  st = tsr_audit_open(&c, &a);
  cr_assert_not_null(st, "a directory anyone can write was accepted");
  cr_assert(strstr(tsr_status_message(st), "writable by group or others"), "%s", tsr_status_message(st));
  tsr_status_free(st);
  cr_assert_eq(size_of(path), -1, "nothing was created there");
}
