/* Each op's request (src/proto/requests.c): what a writer writes, the
 * envelope check and the reader take back whole; what they refuse, they
 * refuse with the daemon's words, leaving the output alone. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "proto/proto.h"
#include "proto/requests.h"

typedef struct {
  tsr_json_member_t m[16];
  size_t n;
  char text[1024];
} scanned_t;

static void scan(const char *text, scanned_t *s) {
  snprintf(s->text, sizeof(s->text), "%s", text);
  tsr_json_error_t err;
  cr_assert(tsr_json_scan_object(s->text, strlen(s->text), s->m, 16, &s->n, &err), "%s: %s", text, err.message);
}

static void scan_writer(tsr_json_writer_t *w, scanned_t *s) {
  cr_assert(!w->failed);
  scan(w->buf, s);
  tsr_json_writer_free(w);
}

/* Field by field: a struct's padding is not the writer's to keep. */
static bool same_create(const tsr_proto_create_t *a, const tsr_proto_create_t *b) {
  return a->device == b->device && a->fraction_ppm == b->fraction_ppm && a->duration_ns == b->duration_ns &&
         a->sm_ppm == b->sm_ppm && a->on_expiry == b->on_expiry && a->over_limit == b->over_limit &&
         a->has_user == b->has_user && strcmp(a->user, b->user) == 0 && strcmp(a->job, b->job) == 0;
}

static bool same_list(const tsr_proto_list_t *a, const tsr_proto_list_t *b) {
  return a->all == b->all && a->after == b->after && a->limit == b->limit && strcmp(a->job, b->job) == 0;
}

/* The envelope passes, naming op. */
static void check_op(scanned_t *s, tsr_proto_op_t want) {
  tsr_proto_op_t op;
  const char *code = NULL;
  char why[160];
  cr_assert(tsr_proto_request_check(s->m, s->n, &op, &code, why, sizeof(why)), "%s: %s", s->text, why);
  cr_assert_eq(op, want, "%s", s->text);
}

Test(proto_requests, a_create_written_reads_back_whole) {
  tsr_proto_create_t r = {.device = 3,
                          .fraction_ppm = 250000,
                          .duration_ns = 600000000000ull,
                          .sm_ppm = 300000,
                          .on_expiry = TSR_LEASE_ACTION_SIGNAL,
                          .over_limit = TSR_LEASE_OVER_LIMIT_LOG,
                          .has_user = true};
  strcpy(r.user, "alice");
  strcpy(r.job, "4242_7");
  tsr_json_writer_t w = {0};
  tsr_proto_create_write(&w, &r);
  scanned_t s;
  scan_writer(&w, &s);
  check_op(&s, TSR_PROTO_LEASE_CREATE);
  tsr_proto_create_t back;
  char why[160];
  cr_assert(tsr_proto_create_read(s.m, s.n, &back, why, sizeof(why)), "%s", why);
  cr_assert(same_create(&r, &back), "%s", s.text);
  /* the defaults are left out and come back as defaults */
  tsr_proto_create_t plain = {.device = 0, .fraction_ppm = 1000000, .duration_ns = 1};
  w = (tsr_json_writer_t){0};
  tsr_proto_create_write(&w, &plain);
  scan_writer(&w, &s);
  cr_assert_str_eq(s.text, "{\"op\":\"lease.create\",\"device\":0,\"fraction_ppm\":1000000,\"duration_ns\":1}");
  cr_assert(tsr_proto_create_read(s.m, s.n, &back, why, sizeof(why)), "%s", why);
  cr_assert(same_create(&plain, &back));
}

Test(proto_requests, ids_lists_and_plain_ops_read_back) {
  scanned_t s;
  char why[160];
  tsr_proto_op_t id_ops[] = {TSR_PROTO_LEASE_RELEASE, TSR_PROTO_LEASE_SHOW, TSR_PROTO_LEASE_ATTACH};
  for (int i = 0; i < 3; i++) {
    tsr_json_writer_t w = {0};
    tsr_proto_id_write(&w, id_ops[i], UINT64_MAX);
    scan_writer(&w, &s);
    check_op(&s, id_ops[i]);
    uint64_t id = 0;
    cr_assert(tsr_proto_id_read(s.m, s.n, &id, why, sizeof(why)), "%s", why);
    cr_assert_eq(id, UINT64_MAX);
  }
  tsr_proto_list_t q = {.all = true, .after = 17, .limit = 3};
  strcpy(q.job, "j1");
  tsr_json_writer_t w = {0};
  tsr_proto_list_write(&w, &q);
  scan_writer(&w, &s);
  check_op(&s, TSR_PROTO_LEASE_LIST);
  tsr_proto_list_t back;
  cr_assert(tsr_proto_list_read(s.m, s.n, &back, why, sizeof(why)), "%s", why);
  cr_assert(same_list(&q, &back));
  /* limit 0 when writing: the daemon's page */
  q = (tsr_proto_list_t){0};
  w = (tsr_json_writer_t){0};
  tsr_proto_list_write(&w, &q);
  scan_writer(&w, &s);
  cr_assert_str_eq(s.text, "{\"op\":\"lease.list\",\"all\":false}");
  cr_assert(tsr_proto_list_read(s.m, s.n, &back, why, sizeof(why)));
  cr_assert_eq(back.limit, TSR_PROTO_LIST_PAGE_MAX);
  tsr_proto_op_t plain[] = {TSR_PROTO_HELLO, TSR_PROTO_DEVICES, TSR_PROTO_TOP};
  for (int i = 0; i < 3; i++) {
    w = (tsr_json_writer_t){0};
    tsr_proto_plain_write(&w, plain[i]);
    scan_writer(&w, &s);
    check_op(&s, plain[i]);
  }
}

Test(proto_requests, the_envelope) {
  struct {
    const char *text, *code, *why;
  } bad[] = {
      {"{}", TSR_PROTO_ERR_BAD_REQUEST, "a request needs a string field 'op'"},
      {"{\"op\":7}", TSR_PROTO_ERR_BAD_REQUEST, "a request needs a string field 'op'"},
      {"{\"op\":\"lease.grab\"}", TSR_PROTO_ERR_UNKNOWN_OP, "unknown op 'lease.grab'"},
      {"{\"op\":\"hello\",\"id\":1}", TSR_PROTO_ERR_UNKNOWN_FIELD, "op 'hello' takes no field 'id'"},
      {"{\"op\":\"lease.show\",\"device\":1}", TSR_PROTO_ERR_UNKNOWN_FIELD, "op 'lease.show' takes no field 'device'"},
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    scanned_t s;
    scan(bad[i].text, &s);
    tsr_proto_op_t op = TSR_PROTO_OP_COUNT;
    const char *code = NULL;
    char why[160];
    cr_assert_not(tsr_proto_request_check(s.m, s.n, &op, &code, why, sizeof(why)), "%s", bad[i].text);
    cr_assert_str_eq(code, bad[i].code, "%s", bad[i].text);
    cr_assert_str_eq(why, bad[i].why);
    cr_assert_eq(op, TSR_PROTO_OP_COUNT, "untouched");
  }
  scanned_t s;
  scan("{\"op\":\"hello\",\"req\":[1,{\"x\":2}]}", &s);
  check_op(&s, TSR_PROTO_HELLO);
}

Test(proto_requests, bad_fields_are_refused_in_the_daemons_words) {
  struct {
    const char *text, *why;
  } bad[] = {
      {"{\"op\":\"lease.create\",\"fraction_ppm\":1,\"duration_ns\":1}", "missing field 'device'"},
      {"{\"op\":\"lease.create\",\"device\":-1,\"fraction_ppm\":1,\"duration_ns\":1}",
       "field 'device' must be an integer in [0, 4294967295]"},
      {"{\"op\":\"lease.create\",\"device\":0,\"fraction_ppm\":1000001,\"duration_ns\":1}",
       "field 'fraction_ppm' must be an integer in [0, 1000000]"},
      {"{\"op\":\"lease.create\",\"device\":0,\"fraction_ppm\":1,\"duration_ns\":1,\"on_expiry\":\"kill\"}",
       "field 'on_expiry' must be \"revoke\" or \"signal\""},
      {"{\"op\":\"lease.create\",\"device\":0,\"fraction_ppm\":1,\"duration_ns\":1,\"over_limit\":1}",
       "field 'over_limit' must be \"signal\" or \"log\""},
      {"{\"op\":\"lease.create\",\"device\":0,\"fraction_ppm\":1,\"duration_ns\":1,\"job\":\"a b\"}",
       "field 'job' must be 1 to 63 letters, digits and . _ : @ + -"},
      {"{\"op\":\"lease.create\",\"device\":0,\"fraction_ppm\":1,\"duration_ns\":1,\"user\":5}",
       "field 'user' must be a user name"},
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    scanned_t s;
    scan(bad[i].text, &s);
    tsr_proto_create_t out = {.device = 99};
    char why[160];
    cr_assert_not(tsr_proto_create_read(s.m, s.n, &out, why, sizeof(why)), "%s", bad[i].text);
    cr_assert_str_eq(why, bad[i].why, "%s", bad[i].text);
    cr_assert_eq(out.device, 99, "untouched");
  }
  const char *lists[][2] = {
      {"{\"op\":\"lease.list\",\"all\":1}", "field 'all' must be true or false"},
      {"{\"op\":\"lease.list\",\"limit\":0}", "field 'limit' must be in [1, 500]"},
      {"{\"op\":\"lease.list\",\"limit\":501}", "field 'limit' must be an integer in [0, 500]"},
      {"{\"op\":\"lease.list\",\"after\":\"1\"}", "field 'after' must be an integer in [0, 18446744073709551615]"},
  };
  for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
    scanned_t s;
    scan(lists[i][0], &s);
    tsr_proto_list_t out;
    char why[160];
    cr_assert_not(tsr_proto_list_read(s.m, s.n, &out, why, sizeof(why)), "%s", lists[i][0]);
    cr_assert_str_eq(why, lists[i][1]);
  }
  scanned_t s;
  scan("{\"op\":\"lease.show\"}", &s);
  uint64_t id = 5;
  char why[160];
  cr_assert_not(tsr_proto_id_read(s.m, s.n, &id, why, sizeof(why)));
  cr_assert_str_eq(why, "missing field 'id'");
  cr_assert_eq(id, 5);
}

Test(proto_requests, lease_renew_round_trip_and_refusals) {
  scanned_t s;
  char why[160];
  tsr_proto_renew_t back = {0};
  tsr_json_writer_t w = {0};
  tsr_proto_renew_write(&w, &(tsr_proto_renew_t){.id = 17, .duration_ns = 3600000000000});
  scan_writer(&w, &s);
  cr_assert_str_eq(s.text, "{\"op\":\"lease.renew\",\"id\":17,\"duration_ns\":3600000000000}");
  check_op(&s, TSR_PROTO_LEASE_RENEW);
  cr_assert(tsr_proto_renew_read(s.m, s.n, &back, why, sizeof(why)), "%s", why);
  cr_assert_eq(back.id, 17);
  cr_assert_eq(back.duration_ns, 3600000000000);
  cr_assert_eq(back.until_ns, 0);
  w = (tsr_json_writer_t){0};
  tsr_proto_renew_write(&w, &(tsr_proto_renew_t){.id = 3, .until_ns = 1795448401123000000});
  scan_writer(&w, &s);
  cr_assert(tsr_proto_renew_read(s.m, s.n, &back, why, sizeof(why)), "%s", why);
  cr_assert_eq(back.until_ns, 1795448401123000000);
  static const char *bad[][2] = {
      {"{\"op\":\"lease.renew\",\"duration_ns\":5}", "missing field 'id'"},
      {"{\"op\":\"lease.renew\",\"id\":1}", "one of 'duration_ns' and 'until_ns'"},
      {"{\"op\":\"lease.renew\",\"id\":1,\"duration_ns\":5,\"until_ns\":6}", "one of 'duration_ns' and 'until_ns'"},
      {"{\"op\":\"lease.renew\",\"id\":1,\"duration_ns\":0}", "one of 'duration_ns' and 'until_ns'"},
      {"{\"op\":\"lease.renew\",\"id\":1,\"duration_ns\":9223372036854775808}", "field 'duration_ns' must be"},
      {"{\"op\":\"lease.renew\",\"id\":1,\"until_ns\":-1}", "field 'until_ns' must be"},
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    scan(bad[i][0], &s);
    tsr_proto_renew_t untouched = {.id = 99};
    why[0] = '\0';
    cr_assert_not(tsr_proto_renew_read(s.m, s.n, &untouched, why, sizeof(why)), "%s", bad[i][0]);
    cr_assert(strstr(why, bad[i][1]), "%s: '%s' lacks '%s'", bad[i][0], why, bad[i][1]);
    cr_assert_eq(untouched.id, 99, "a refusal leaves the output");
  }
}

Test(proto_requests, lease_resize_round_trip_and_refusals) {
  scanned_t s;
  char why[160];
  tsr_proto_resize_t back = {0};
  tsr_json_writer_t w = {0};
  tsr_proto_resize_write(
      &w, &(tsr_proto_resize_t){.id = 9, .fraction_ppm = 250000, .has_sm = true, .sm_ppm = 400000, .force = true});
  scan_writer(&w, &s);
  cr_assert_str_eq(s.text,
                   "{\"op\":\"lease.resize\",\"id\":9,\"fraction_ppm\":250000,\"sm_ppm\":400000,\"force\":true}");
  check_op(&s, TSR_PROTO_LEASE_RESIZE);
  cr_assert(tsr_proto_resize_read(s.m, s.n, &back, why, sizeof(why)), "%s", why);
  cr_assert(back.id == 9 && back.fraction_ppm == 250000 && back.has_sm && back.sm_ppm == 400000 && back.force);
  /* memory alone: no share sent, none read */
  w = (tsr_json_writer_t){0};
  tsr_proto_resize_write(&w, &(tsr_proto_resize_t){.id = 3, .fraction_ppm = 1000000});
  scan_writer(&w, &s);
  cr_assert_str_eq(s.text, "{\"op\":\"lease.resize\",\"id\":3,\"fraction_ppm\":1000000}");
  cr_assert(tsr_proto_resize_read(s.m, s.n, &back, why, sizeof(why)), "%s", why);
  cr_assert(back.id == 3 && back.fraction_ppm == 1000000 && !back.has_sm && !back.force);
  static const char *bad[][2] = {
      {"{\"op\":\"lease.resize\",\"fraction_ppm\":5}", "missing field 'id'"},
      {"{\"op\":\"lease.resize\",\"id\":1}", "takes 'fraction_ppm' (more than 0), 'sm_ppm' or both"},
      {"{\"op\":\"lease.resize\",\"id\":1,\"fraction_ppm\":0}", "takes 'fraction_ppm'"},
      {"{\"op\":\"lease.resize\",\"id\":1,\"fraction_ppm\":1000001}", "field 'fraction_ppm' must be"},
      {"{\"op\":\"lease.resize\",\"id\":1,\"sm_ppm\":-3}", "field 'sm_ppm' must be"},
      {"{\"op\":\"lease.resize\",\"id\":1,\"sm_ppm\":5,\"force\":1}", "field 'force' must be true or false"},
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    scan(bad[i][0], &s);
    tsr_proto_resize_t untouched = {.id = 99};
    why[0] = '\0';
    cr_assert_not(tsr_proto_resize_read(s.m, s.n, &untouched, why, sizeof(why)), "%s", bad[i][0]);
    cr_assert(strstr(why, bad[i][1]), "%s: '%s' lacks '%s'", bad[i][0], why, bad[i][1]);
    cr_assert_eq(untouched.id, 99, "a refusal leaves the output");
  }
}

Test(proto_requests, a_create_that_waits_and_a_list_of_the_queue) {
  scanned_t s;
  char why[160];
  tsr_json_writer_t w = {0};
  tsr_proto_create_t c = {.device = 0, .fraction_ppm = 500000, .duration_ns = 60000000000, .wait_ns = 30000000000};
  tsr_proto_create_write(&w, &c);
  scan_writer(&w, &s);
  cr_assert(strstr(s.text, "\"wait_ns\":30000000000"), "%s", s.text);
  tsr_proto_create_t back;
  cr_assert(tsr_proto_create_read(s.m, s.n, &back, why, sizeof(why)), "%s", why);
  cr_assert_eq(back.wait_ns, 30000000000);
  scan("{\"op\":\"lease.create\",\"device\":0,\"fraction_ppm\":1,\"duration_ns\":1,\"wait_ns\":-1}", &s);
  cr_assert_not(tsr_proto_create_read(s.m, s.n, &back, why, sizeof(why)));
  cr_assert(strstr(why, "field 'wait_ns' must be"), "%s", why);
  w = (tsr_json_writer_t){0};
  tsr_proto_list_write(&w, &(tsr_proto_list_t){.all = true, .queued = true});
  scan_writer(&w, &s);
  cr_assert_str_eq(s.text, "{\"op\":\"lease.list\",\"all\":true,\"queued\":true}");
  tsr_proto_list_t l;
  cr_assert(tsr_proto_list_read(s.m, s.n, &l, why, sizeof(why)), "%s", why);
  cr_assert(l.all && l.queued);
  scan("{\"op\":\"lease.list\",\"queued\":\"yes\"}", &s);
  cr_assert_not(tsr_proto_list_read(s.m, s.n, &l, why, sizeof(why)));
  cr_assert_str_eq(why, "field 'queued' must be true or false");
}
