/* Lock files: the seed's key-value format, read back exactly, and every kind
 * of damage rejected with the line named. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "lease/lease.h"

static tsr_lease_t sample(void) {
  tsr_lease_t l;
  memset(&l, 0, sizeof(l));
  l.id = 17;
  l.device = 0;
  l.fraction_ppm = 500000;
  l.bytes = UINT64_C(42949672960);
  l.sm_ppm = 300000;
  l.owner_uid = 1000;
  l.creator_uid = 0;
  l.pid = 12345;
  strcpy(l.owner, "alice");
  strcpy(l.creator, "root");
  strcpy(l.host, "workstation-01");
  l.start_wall_ns = UINT64_C(1763805600000000001);
  l.deadline_wall_ns = UINT64_C(1763812800000000001);
  return l;
}

Test(lockfile, name_follows_the_seed) {
  tsr_lease_t l = sample();
  char name[128];
  tsr_lease_lockfile_name(&l, name, sizeof name);
  cr_assert_str_eq(name, "gpu_0_0500_17.lock");
  l.fraction_ppm = 1000000;
  l.device = 3;
  tsr_lease_lockfile_name(&l, name, sizeof name);
  cr_assert_str_eq(name, "gpu_3_1000_17.lock");
  l.fraction_ppm = 100000;
  tsr_lease_lockfile_name(&l, name, sizeof name);
  cr_assert_str_eq(name, "gpu_3_0100_17.lock");
}

Test(lockfile, format_has_the_seed_keys) {
  tsr_lease_t l = sample();
  char buf[2048];
  size_t n = tsr_lease_lockfile_format(&l, buf, sizeof buf);
  cr_assert_gt(n, 0);
  cr_assert_str_eq(buf,
                   "pid: 12345\nuser: alice\nhost: workstation-01\n"
                   "time: 2025-11-22T10:00:00.000000001Z\ndevice: 0\nfraction: 0.5\n"
                   "partition: 17\nuid: 1000\nbytes: 42949672960\nsm: 0.3\n"
                   "deadline: 2025-11-22T12:00:00.000000001Z\ncreator: root\ncreator_uid: 0\n");
}

Test(lockfile, round_trip) {
  tsr_lease_t l = sample(), back;
  char buf[2048];
  size_t n = tsr_lease_lockfile_format(&l, buf, sizeof buf);
  cr_assert_null(tsr_lease_lockfile_parse(buf, n, &back));
  cr_assert_eq(back.id, l.id);
  cr_assert_eq(back.device, l.device);
  cr_assert_eq(back.fraction_ppm, l.fraction_ppm);
  cr_assert_eq(back.bytes, l.bytes);
  cr_assert_eq(back.sm_ppm, l.sm_ppm);
  cr_assert_eq(back.owner_uid, l.owner_uid);
  cr_assert_eq(back.creator_uid, l.creator_uid);
  cr_assert_eq(back.pid, l.pid);
  cr_assert_str_eq(back.owner, l.owner);
  cr_assert_str_eq(back.creator, l.creator);
  cr_assert_str_eq(back.host, l.host);
  cr_assert_eq(back.start_wall_ns, l.start_wall_ns);
  cr_assert_eq(back.deadline_wall_ns, l.deadline_wall_ns);
}

Test(lockfile, format_refuses_small_buffer) {
  tsr_lease_t l = sample();
  char buf[40];
  cr_assert_eq(tsr_lease_lockfile_format(&l, buf, sizeof buf), 0);
}

static void expect_bad(const char *text, const char *needle) {
  tsr_lease_t out;
  memset(&out, 0x5a, sizeof out);
  tsr_status_t st = tsr_lease_lockfile_parse(text, strlen(text), &out);
  cr_assert_not_null(st, "accepted: %s", text);
  cr_assert_eq(tsr_status_code(st), TSR_DATA_LOSS);
  cr_assert(strstr(tsr_status_message(st), needle), "message '%s' lacks '%s'", tsr_status_message(st), needle);
  cr_assert_eq(out.id, 0x5a5a5a5a5a5a5a5aULL, "output touched on error");
  tsr_status_free(st);
}

/* The sample's text with line `k` (0-based) replaced by `line` (NULL: dropped). */
static char *with_line(int k, const char *line) {
  static char out[4096];
  tsr_lease_t l = sample();
  char buf[2048];
  tsr_lease_lockfile_format(&l, buf, sizeof buf);
  out[0] = '\0';
  int i = 0;
  for (char *p = strtok(buf, "\n"); p; p = strtok(NULL, "\n"), i++) {
    const char *use = i == k ? line : p;
    if (!use) continue;
    strcat(out, use);
    strcat(out, "\n");
  }
  return out;
}

Test(lockfile, rejects_damage_naming_the_line) {
  expect_bad("", "empty");
  expect_bad("pid: 1", "newline");
  expect_bad(with_line(0, "pid 12345"), "line 1: expected 'key: value'");
  expect_bad(with_line(1, "owner: alice"), "line 2: unknown key owner");
  expect_bad(with_line(2, "pid: 1"), "line 3: duplicate key pid");
  expect_bad(with_line(4, "device: x"), "line 5: bad value for device");
  expect_bad(with_line(5, "fraction: 0"), "line 6: bad value for fraction");
  expect_bad(with_line(5, "fraction: 1.5"), "line 6: bad value for fraction");
  expect_bad(with_line(6, "partition: 0"), "line 7: bad value for partition");
  expect_bad(with_line(6, "partition: -3"), "bad value for partition");
  expect_bad(with_line(7, "uid: 99999999999"), "bad value for uid");
  expect_bad(with_line(8, "bytes: 18446744073709551616"), "bad value for bytes");
  expect_bad(with_line(3, "time: yesterday"), "bad value for time");
  expect_bad(with_line(10, "deadline: 2025-11-22T09:00:00Z"), "deadline is not after time");
  expect_bad(with_line(1, "user: "), "bad value for user");
  expect_bad(with_line(1, "user: two words"), "bad value for user");
  expect_bad(with_line(12, NULL), "missing key 'creator_uid'");
  /* a key from the file cannot put a control character in the log */
  expect_bad(with_line(1, "us\rer\x1b[2J: alice"), "line 2: unknown key us?er?[2J");
}

Test(lockfile, rejects_nul_and_oversize) {
  char buf[16] = "pid: 1\0\n";
  tsr_lease_t out;
  tsr_status_t st = tsr_lease_lockfile_parse(buf, 8, &out);
  cr_assert_not_null(st);
  tsr_status_free(st);
  static char big[5000];
  memset(big, 'a', sizeof big);
  big[sizeof big - 1] = '\n';
  st = tsr_lease_lockfile_parse(big, sizeof big, &out);
  cr_assert_not_null(st);
  tsr_status_free(st);
}

Test(lockfile, every_truncation_is_rejected) {
  /* what a crash mid-write would leave if writes were not atomic */
  tsr_lease_t l = sample(), out;
  char buf[2048];
  size_t n = tsr_lease_lockfile_format(&l, buf, sizeof buf);
  for (size_t cut = 0; cut < n; cut++) {
    tsr_status_t st = tsr_lease_lockfile_parse(buf, cut, &out);
    cr_assert_not_null(st, "a file cut at %zu of %zu bytes was accepted", cut, n);
    tsr_status_free(st);
  }
}

Test(lockfile, ids_outside_one_to_the_largest_are_refused) {
  /* 2^64-1 once wrapped the id counter to 0, and ids repeated */
  expect_bad(with_line(6, "partition: 0"), "line 7: bad value for partition");
  expect_bad(with_line(6, "partition: 9223372036854775808"), "line 7: bad value for partition");
  expect_bad(with_line(6, "partition: 18446744073709551615"), "line 7: bad value for partition");
  const char *text = with_line(6, "partition: 9223372036854775807");
  tsr_lease_t back;
  cr_assert_null(tsr_lease_lockfile_parse(text, strlen(text), &back));
  cr_assert_eq(back.id, TSR_LEASE_ID_MAX);
}

Test(lockfile, names_follow_the_one_shared_rule) {
  cr_assert(tsr_lease_name_ok("alice"));
  cr_assert(tsr_lease_name_ok("node-01.example.org"));
  cr_assert_not(tsr_lease_name_ok(NULL));
  cr_assert_not(tsr_lease_name_ok(""));
  cr_assert_not(tsr_lease_name_ok("a b"));
  cr_assert_not(tsr_lease_name_ok("a\tb"));
  cr_assert_not(tsr_lease_name_ok("a\x7f"));
  char longest[TSR_LEASE_NAME_MAX + 1];
  memset(longest, 'x', sizeof longest);
  longest[TSR_LEASE_NAME_MAX - 1] = '\0';
  cr_assert(tsr_lease_name_ok(longest));
  longest[TSR_LEASE_NAME_MAX - 1] = 'x';
  longest[TSR_LEASE_NAME_MAX] = '\0';
  cr_assert_not(tsr_lease_name_ok(longest));
  /* the parser takes exactly what the table takes */
  char line[128];
  snprintf(line, sizeof line, "host: %s", longest);
  expect_bad(with_line(2, line), "line 3: bad value for host");
  expect_bad(with_line(11, "creator: ro\x01ot"), "line 12: bad value for creator");
}

/* on_expiry: written only when the lease names an action, read back
 * exactly; a file written before it existed restores with DEFAULT. */
Test(lockfile, on_expiry_round_trip_and_old_files) {
  tsr_lease_t l = sample(), back;
  char buf[2048];
  size_t n = tsr_lease_lockfile_format(&l, buf, sizeof buf);
  cr_assert_null(strstr(buf, "on_expiry"), "DEFAULT is not written: %s", buf);
  cr_assert_null(tsr_lease_lockfile_parse(buf, n, &back));
  cr_assert_eq(back.on_expiry, TSR_LEASE_ACTION_DEFAULT);
  l.on_expiry = TSR_LEASE_ACTION_SIGNAL;
  n = tsr_lease_lockfile_format(&l, buf, sizeof buf);
  cr_assert(strstr(buf, "creator_uid: 0\non_expiry: signal\n"), "%s", buf);
  cr_assert_null(tsr_lease_lockfile_parse(buf, n, &back));
  cr_assert_eq(back.on_expiry, TSR_LEASE_ACTION_SIGNAL);
  l.on_expiry = TSR_LEASE_ACTION_REVOKE;
  n = tsr_lease_lockfile_format(&l, buf, sizeof buf);
  cr_assert_null(tsr_lease_lockfile_parse(buf, n, &back));
  cr_assert_eq(back.on_expiry, TSR_LEASE_ACTION_REVOKE);
}

Test(lockfile, on_expiry_bad_or_twice) {
  char text[4096];
  snprintf(text, sizeof text, "%son_expiry: kill\n", with_line(99, NULL));
  expect_bad(text, "bad value for on_expiry");
  snprintf(text, sizeof text, "%son_expiry: default\n", with_line(99, NULL));
  expect_bad(text, "bad value for on_expiry");
  snprintf(text, sizeof text, "%son_expiry: signal\non_expiry: revoke\n", with_line(99, NULL));
  expect_bad(text, "duplicate key on_expiry");
}

/* over_limit: written only when the lease names its own, after on_expiry,
 * read back exactly; a file without it (written before it existed, or for
 * a lease that follows the node) restores with DEFAULT, the node's. */
Test(lockfile, over_limit_round_trip_and_old_files) {
  tsr_lease_t l = sample(), back;
  char buf[2048];
  size_t n = tsr_lease_lockfile_format(&l, buf, sizeof buf);
  cr_assert_null(strstr(buf, "over_limit"), "DEFAULT is not written: %s", buf);
  cr_assert_null(tsr_lease_lockfile_parse(buf, n, &back));
  cr_assert_eq(back.over_limit, TSR_LEASE_OVER_LIMIT_DEFAULT);
  l.over_limit = TSR_LEASE_OVER_LIMIT_LOG;
  n = tsr_lease_lockfile_format(&l, buf, sizeof buf);
  cr_assert(strstr(buf, "creator_uid: 0\nover_limit: log\n"), "%s", buf);
  cr_assert_null(tsr_lease_lockfile_parse(buf, n, &back));
  cr_assert_eq(back.over_limit, TSR_LEASE_OVER_LIMIT_LOG);
  cr_assert_eq(back.on_expiry, TSR_LEASE_ACTION_DEFAULT, "the two settings are apart");
  l.over_limit = TSR_LEASE_OVER_LIMIT_SIGNAL;
  l.on_expiry = TSR_LEASE_ACTION_REVOKE;
  strcpy(l.job, "4711");
  n = tsr_lease_lockfile_format(&l, buf, sizeof buf);
  cr_assert(strstr(buf, "on_expiry: revoke\nover_limit: signal\njob: 4711\n"), "%s", buf);
  cr_assert_null(tsr_lease_lockfile_parse(buf, n, &back));
  cr_assert_eq(back.over_limit, TSR_LEASE_OVER_LIMIT_SIGNAL);
  cr_assert_eq(back.on_expiry, TSR_LEASE_ACTION_REVOKE);
  cr_assert_str_eq(back.job, "4711");
  /* a file as an older daemon wrote it: the same lease, the key gone */
  char *line = strstr(buf, "over_limit: signal\n");
  memmove(line, line + strlen("over_limit: signal\n"), strlen(line + strlen("over_limit: signal\n")) + 1);
  cr_assert_null(tsr_lease_lockfile_parse(buf, strlen(buf), &back));
  cr_assert_eq(back.over_limit, TSR_LEASE_OVER_LIMIT_DEFAULT);
  cr_assert_eq(back.on_expiry, TSR_LEASE_ACTION_REVOKE);
  /* and in any place among the keys, as for every key */
  char moved[4096];
  snprintf(moved, sizeof moved, "over_limit: log\n%s", buf);
  cr_assert_null(tsr_lease_lockfile_parse(moved, strlen(moved), &back));
  cr_assert_eq(back.over_limit, TSR_LEASE_OVER_LIMIT_LOG);
}

Test(lockfile, over_limit_bad_or_twice) {
  char text[4096];
  snprintf(text, sizeof text, "%sover_limit: kill\n", with_line(99, NULL));
  expect_bad(text, "bad value for over_limit");
  snprintf(text, sizeof text, "%sover_limit: default\n", with_line(99, NULL));
  expect_bad(text, "bad value for over_limit");
  snprintf(text, sizeof text, "%sover_limit: revoke\n", with_line(99, NULL));
  expect_bad(text, "bad value for over_limit");
  snprintf(text, sizeof text, "%sover_limit: \n", with_line(99, NULL));
  expect_bad(text, "bad value for over_limit");
  snprintf(text, sizeof text, "%sover_limit: log\nover_limit: log\n", with_line(99, NULL));
  expect_bad(text, "duplicate key over_limit");
  snprintf(text, sizeof text, "%sover_limit: signal\nover_limit: log\n", with_line(99, NULL));
  expect_bad(text, "duplicate key over_limit");
}

Test(lockfile, over_limit_names) {
  tsr_lease_over_limit_t o = TSR_LEASE_OVER_LIMIT_DEFAULT;
  cr_assert(tsr_lease_over_limit_parse("signal", &o) && o == TSR_LEASE_OVER_LIMIT_SIGNAL);
  cr_assert(tsr_lease_over_limit_parse("log", &o) && o == TSR_LEASE_OVER_LIMIT_LOG);
  cr_assert_not(tsr_lease_over_limit_parse("default", &o));
  cr_assert_not(tsr_lease_over_limit_parse("revoke", &o));
  cr_assert_not(tsr_lease_over_limit_parse("LOG", &o));
  cr_assert_not(tsr_lease_over_limit_parse("", &o));
  cr_assert_not(tsr_lease_over_limit_parse(NULL, &o));
  cr_assert_eq(o, TSR_LEASE_OVER_LIMIT_LOG, "a refused name leaves the value");
  cr_assert_str_eq(tsr_lease_over_limit_name(TSR_LEASE_OVER_LIMIT_SIGNAL), "signal");
  cr_assert_str_eq(tsr_lease_over_limit_name(TSR_LEASE_OVER_LIMIT_LOG), "log");
  cr_assert_str_eq(tsr_lease_over_limit_name(TSR_LEASE_OVER_LIMIT_DEFAULT), "default");
  cr_assert_str_eq(tsr_lease_over_limit_name((tsr_lease_over_limit_t)9), "?");
}

Test(lockfile, action_names) {
  tsr_lease_action_t a = TSR_LEASE_ACTION_DEFAULT;
  cr_assert(tsr_lease_action_parse("revoke", &a) && a == TSR_LEASE_ACTION_REVOKE);
  cr_assert(tsr_lease_action_parse("signal", &a) && a == TSR_LEASE_ACTION_SIGNAL);
  cr_assert_not(tsr_lease_action_parse("default", &a));
  cr_assert_not(tsr_lease_action_parse("", &a));
  cr_assert_not(tsr_lease_action_parse(NULL, &a));
  cr_assert_str_eq(tsr_lease_action_name(TSR_LEASE_ACTION_SIGNAL), "signal");
  cr_assert_str_eq(tsr_lease_action_name(TSR_LEASE_ACTION_REVOKE), "revoke");
  cr_assert_str_eq(tsr_lease_action_name(TSR_LEASE_ACTION_DEFAULT), "default");
}

/* job: written only for a labelled lease, read back exactly; a file
 * without it restores unlabelled; a label the rule refuses is damage. */
Test(lockfile, job_round_trip_and_refusals) {
  tsr_lease_t l = sample(), back;
  char buf[2048];
  size_t n = tsr_lease_lockfile_format(&l, buf, sizeof buf);
  cr_assert_null(strstr(buf, "job:"), "no label, no key: %s", buf);
  cr_assert_null(tsr_lease_lockfile_parse(buf, n, &back));
  cr_assert_str_eq(back.job, "");
  snprintf(l.job, sizeof l.job, "cluster:4711_2");
  n = tsr_lease_lockfile_format(&l, buf, sizeof buf);
  cr_assert(strstr(buf, "\njob: cluster:4711_2\n"), "%s", buf);
  cr_assert_null(tsr_lease_lockfile_parse(buf, n, &back));
  cr_assert_str_eq(back.job, "cluster:4711_2");
  char text[4096];
  static const char *const bad[] = {"job: \n", "job: a b\n", "job: x/y\n", "job: \xc3\xa9\n"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    snprintf(text, sizeof text, "%s%s", with_line(99, NULL), bad[i]);
    expect_bad(text, "job");
  }
  char longjob[128];
  memset(longjob, '7', 64);
  longjob[64] = '\0';
  snprintf(text, sizeof text, "%sjob: %s\n", with_line(99, NULL), longjob);
  expect_bad(text, "bad value for job");
  snprintf(text, sizeof text, "%sjob: 1\njob: 2\n", with_line(99, NULL));
  expect_bad(text, "duplicate key job");
}
