/* fuzz_requests.c: libFuzzer target for the daemon's request reader
 * (src/proto/requests.c over base/json_scan.c's scanner): any local user can
 * send tesserad any line. Each input is scanned as a request object; the
 * envelope check and then the op's reader must answer, never crash (ASan,
 * UBSan). Beyond the sanitizers:
 *  - a refusal says why (a message, and for the envelope a protocol code);
 *  - what a reader accepts, written back by the op's writer, is one JSON
 *    object that passes the envelope as the same op and reads back to the
 *    same request (the writer and the reader agree on every field).
 * Built and run by run.sh (registered with ctest as fuzz.requests). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/proto.h"
#include "proto/requests.h"

#include "../check.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

static void rescan(tsr_json_writer_t *w, tsr_json_member_t *m, size_t *n, tsr_proto_op_t want) {
  FUZZ_CHECK(!w->failed);
  tsr_json_error_t err;
  FUZZ_CHECK(tsr_json_scan_object(w->buf, w->len, m, 16, n, &err));
  tsr_proto_op_t op;
  const char *code;
  char why[160];
  FUZZ_CHECK(tsr_proto_request_check(m, *n, &op, &code, why, sizeof(why)));
  FUZZ_CHECK(op == want);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  tsr_json_member_t m[16], m2[16];
  size_t n = 0, n2 = 0;
  tsr_json_error_t err;
  if (!tsr_json_scan_object((const char *)data, size, m, 16, &n, &err)) return 0;
  tsr_proto_op_t op;
  const char *code = NULL;
  char why[160] = "";
  if (!tsr_proto_request_check(m, n, &op, &code, why, sizeof(why))) {
    FUZZ_CHECK(code && code[0] && why[0]);
    return 0;
  }
  FUZZ_CHECK((unsigned)op < TSR_PROTO_OP_COUNT);
  tsr_json_writer_t w = {0};
  why[0] = '\0';
  switch (op) {
    case TSR_PROTO_LEASE_CREATE: {
      tsr_proto_create_t r, back;
      if (!tsr_proto_create_read(m, n, &r, why, sizeof(why))) break;
      tsr_proto_create_write(&w, &r);
      rescan(&w, m2, &n2, op);
      FUZZ_CHECK(tsr_proto_create_read(m2, n2, &back, why, sizeof(why)));
      FUZZ_CHECK(r.device == back.device && r.fraction_ppm == back.fraction_ppm && r.duration_ns == back.duration_ns &&
                 r.sm_ppm == back.sm_ppm && r.on_expiry == back.on_expiry && r.over_limit == back.over_limit &&
                 r.has_user == back.has_user && strcmp(r.user, back.user) == 0 && strcmp(r.job, back.job) == 0);
      break;
    }
    case TSR_PROTO_LEASE_LIST: {
      tsr_proto_list_t r, back;
      if (!tsr_proto_list_read(m, n, &r, why, sizeof(why))) break;
      tsr_proto_list_write(&w, &r);
      rescan(&w, m2, &n2, op);
      FUZZ_CHECK(tsr_proto_list_read(m2, n2, &back, why, sizeof(why)));
      FUZZ_CHECK(r.all == back.all && r.after == back.after && r.limit == back.limit && strcmp(r.job, back.job) == 0);
      break;
    }
    case TSR_PROTO_LEASE_RENEW: {
      tsr_proto_renew_t r, back;
      if (!tsr_proto_renew_read(m, n, &r, why, sizeof(why))) break;
      FUZZ_CHECK((r.duration_ns != 0) != (r.until_ns != 0));
      tsr_proto_renew_write(&w, &r);
      rescan(&w, m2, &n2, op);
      FUZZ_CHECK(tsr_proto_renew_read(m2, n2, &back, why, sizeof(why)));
      FUZZ_CHECK(r.id == back.id && r.duration_ns == back.duration_ns && r.until_ns == back.until_ns);
      break;
    }
    case TSR_PROTO_LEASE_RELEASE:
    case TSR_PROTO_LEASE_SHOW:
    case TSR_PROTO_LEASE_ATTACH: {
      uint64_t id, back;
      if (!tsr_proto_id_read(m, n, &id, why, sizeof(why))) break;
      tsr_proto_id_write(&w, op, id);
      rescan(&w, m2, &n2, op);
      FUZZ_CHECK(tsr_proto_id_read(m2, n2, &back, why, sizeof(why)) && back == id);
      break;
    }
    default:
      tsr_proto_plain_write(&w, op);
      rescan(&w, m2, &n2, op);
      break;
  }
  if (!w.buf) FUZZ_CHECK(why[0]); /* nothing written: refused, with a reason */
  tsr_json_writer_free(&w);
  return 0;
}
