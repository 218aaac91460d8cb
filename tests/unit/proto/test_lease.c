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
