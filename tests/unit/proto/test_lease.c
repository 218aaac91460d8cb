/* A lease's JSON object (proto/json.c): what the daemon writes, the CLI and
 * the Slurm plugin read back; the optional members ("on_expiry",
 * "over_limit", "job") absent from older daemons' replies. */
#include <criterion/criterion.h>
#include <string.h>

#include "proto/proto.h"

static tsr_lease_t sample(void) {
  tsr_lease_t l;
  memset(&l, 0, sizeof(l));
  l.id = 17;
  l.fraction_ppm = 100000;
  l.bytes = UINT64_C(858993459);
  l.owner_uid = 1000;
  l.creator_uid = 1000;
  l.pid = 4711;
  strcpy(l.owner, "alice");
  strcpy(l.creator, "alice");
  strcpy(l.host, "node-01");
  l.start_wall_ns = UINT64_C(1763805600000000000);
  l.deadline_wall_ns = UINT64_C(1763812800000000000);
  return l;
}

/* Writes `l` into `w` (freed by the caller) and reads it back. */
TSR_MUST_USE static tsr_status_t round_trip(const tsr_lease_t *l, tsr_json_writer_t *w, tsr_lease_t *back) {
  tsr_proto_lease_write(w, l, l->start_wall_ns);
  cr_assert_not(w->failed);
  return tsr_proto_lease_parse(w->buf, w->len, back);
}

Test(proto_lease, over_limit_is_written_and_read_back) {
  tsr_lease_t l = sample(), back;
  l.over_limit = TSR_LEASE_OVER_LIMIT_LOG;
  l.on_expiry = TSR_LEASE_ACTION_SIGNAL;
  tsr_json_writer_t w = {0};
  cr_assert_null(round_trip(&l, &w, &back));
  cr_assert(strstr(w.buf, "\"on_expiry\":\"signal\",\"over_limit\":\"log\""), "%s", w.buf);
  cr_assert_eq(back.over_limit, TSR_LEASE_OVER_LIMIT_LOG);
  cr_assert_eq(back.on_expiry, TSR_LEASE_ACTION_SIGNAL);
  tsr_json_writer_free(&w);
  l.over_limit = TSR_LEASE_OVER_LIMIT_SIGNAL;
  tsr_json_writer_t w2 = {0};
  cr_assert_null(round_trip(&l, &w2, &back));
  cr_assert_eq(back.over_limit, TSR_LEASE_OVER_LIMIT_SIGNAL);
  tsr_json_writer_free(&w2);
}

/* DEFAULT is not written (the daemon writes the value in effect), and a
 * lease from a daemon before over_limit reads as DEFAULT. */
Test(proto_lease, over_limit_absent_is_default) {
  tsr_lease_t l = sample(), back;
  tsr_json_writer_t w = {0};
  cr_assert_null(round_trip(&l, &w, &back));
  cr_assert_null(strstr(w.buf, "over_limit"), "%s", w.buf);
  cr_assert_eq(back.over_limit, TSR_LEASE_OVER_LIMIT_DEFAULT);
  tsr_json_writer_free(&w);
}

Test(proto_lease, an_unknown_over_limit_is_refused) {
  tsr_lease_t l = sample(), back;
  tsr_json_writer_t w = {0};
  l.over_limit = TSR_LEASE_OVER_LIMIT_LOG;
  tsr_proto_lease_write(&w, &l, l.start_wall_ns);
  static const char *const bad[] = {"\"kill\"", "\"default\"", "\"revoke\"", "1", "null", "\"\""};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    char text[2048];
    char *at = strstr(w.buf, "\"over_limit\":\"log\"");
    cr_assert_not_null(at);
    int head = (int)(at - w.buf);
    snprintf(text, sizeof text, "%.*s\"over_limit\":%s%s", head, w.buf, bad[i], at + 18);
    tsr_status_t st = tsr_proto_lease_parse(text, strlen(text), &back);
    cr_assert_not_null(st, "accepted over_limit %s", bad[i]);
    cr_assert_eq(tsr_status_code(st), TSR_DATA_LOSS);
    tsr_status_free(st);
  }
  tsr_json_writer_free(&w);
}

static tsr_proto_lease_usage_t sample_usage(void) {
  tsr_proto_lease_usage_t u;
  memset(&u, 0, sizeof(u));
  strcpy(u.region, "/run/tessera/regions/17");
  u.used_bytes = UINT64_C(1) << 33;
  u.peak_bytes = UINT64_MAX;
  u.denied = 3;
  u.processes = UINT32_MAX;
  u.revoked = true;
  u.gpu_known = true;
  u.gpu_bytes = 12345;
  u.gpu_ns = 99;
  u.throttled_ns = 7;
  u.launches = 1000;
  u.bypassed = 2;
  u.sm_now_ppm = 300000;
  return u;
}

Test(proto_lease, usage_is_written_and_read_back) {
  tsr_lease_t l = sample();
  tsr_proto_lease_usage_t u = sample_usage(), back;
  tsr_json_writer_t w = {0};
  tsr_proto_lease_write_usage(&w, &l, l.start_wall_ns, &u);
  cr_assert(tsr_proto_lease_usage_parse(w.buf, w.len, &back), "%s", w.buf);
  cr_assert_eq(memcmp(&u, &back, sizeof(u)), 0, "%s", w.buf);
  cr_assert(strstr(w.buf, "\"processes\":4294967295"), "%s", w.buf);
  cr_assert(strstr(w.buf, "\"sm_now_ppm\":300000"), "%s", w.buf);
  tsr_json_writer_free(&w);
}

/* Written by hand: a daemon before compute shares wrote only the memory
 * counters; those are required, the rest read as 0; each is bounded. */
Test(proto_lease, usage_optional_required_and_bounded) {
  tsr_proto_lease_usage_t back;
  const char *old = "{\"region\":\"r\",\"used_bytes\":5,\"peak_bytes\":6,\"processes\":1,\"denied\":0}";
  cr_assert(tsr_proto_lease_usage_parse(old, strlen(old), &back));
  cr_assert_eq(back.used_bytes, 5);
  cr_assert_eq(back.processes, 1);
  cr_assert_eq(back.gpu_ns + back.launches + back.sm_now_ppm, 0);
  cr_assert_not(back.gpu_known);
  static const char *bad[] = {
      "{\"region\":\"r\",\"peak_bytes\":6,\"processes\":1,\"denied\":0}",                           /* no used_bytes */
      "{\"region\":\"r\",\"used_bytes\":5,\"peak_bytes\":6,\"processes\":4294967296,\"denied\":0}", /* > u32 */
      "{\"region\":\"r\",\"used_bytes\":5,\"peak_bytes\":6,\"processes\":1,\"denied\":0,\"sm_now_ppm\":1000001}",
      "{\"region\":\"r\",\"used_bytes\":5,\"peak_bytes\":6,\"processes\":1,\"denied\":0,\"launches\":-1}",
      "{\"used_bytes\":5,\"peak_bytes\":6,\"processes\":1,\"denied\":0}", /* no region */
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    cr_assert_not(tsr_proto_lease_usage_parse(bad[i], strlen(bad[i]), &back), "%s", bad[i]);
}

Test(proto_lease, a_queued_request_is_written_and_read_back) {
  tsr_proto_queued_t q = {.id = 12,
                          .device = 1,
                          .fraction_ppm = 500000,
                          .bytes = UINT64_C(42949672960),
                          .sm_ppm = 300000,
                          .duration_ns = UINT64_C(600000000000),
                          .position = 2,
                          .queued_ns = UINT64_C(1763805600000000000),
                          .until_ns = UINT64_C(1763805630000000000)};
  strcpy(q.owner, "bob");
  strcpy(q.job, "slurm-77");
  tsr_json_writer_t w = {0};
  tsr_proto_queued_write(&w, &q);
  cr_assert(strstr(w.buf, "\"state\":\"queued\""), "%s", w.buf);
  tsr_proto_queued_t back;
  cr_assert_null(tsr_proto_queued_parse(w.buf, w.len, &back));
  cr_assert_eq(memcmp(&back, &q, sizeof(q)), 0, "the same request: %s", w.buf);
  tsr_json_writer_free(&w);
  /* a member missing, out of range, or a bad job: data loss, nothing read */
  static const char *bad[] = {
      "{\"id\":1}",
      "{\"id\":1,\"device\":0,\"fraction_ppm\":2000000,\"bytes\":1,\"sm_ppm\":0,\"duration_ns\":1,\"owner\":\"a\","
      "\"position\":1,\"queued_ns\":1,\"until_ns\":2}",
      "{\"id\":1,\"device\":0,\"fraction_ppm\":1,\"bytes\":1,\"sm_ppm\":0,\"duration_ns\":1,\"owner\":\"a\","
      "\"position\":1,\"queued_ns\":1,\"until_ns\":2,\"job\":\"no spaces\"}",
      "[]",
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    tsr_proto_queued_t untouched = {.id = 99};
    tsr_status_t st = tsr_proto_queued_parse(bad[i], strlen(bad[i]), &untouched);
    cr_assert_eq(tsr_status_code(st), TSR_DATA_LOSS, "%s", bad[i]);
    tsr_status_free(st);
    cr_assert_eq(untouched.id, 99);
  }
}
