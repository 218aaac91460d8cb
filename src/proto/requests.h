/* proto/requests.h: every operation's request, as one struct with its
 * writer and its reader. The names of the ops and of their fields are
 * spelled here alone: the CLI, the Slurm plugin and the tests write
 * requests with tsr_proto_*_write, and the daemon reads them with
 * tsr_proto_*_read (docs/protocol.md lists them).
 *
 * A request is one JSON object: "op", the op's fields, and an optional
 * "req" the daemon echoes. A reader takes the members of the scanned
 * request (base/json.h) and checks each field it knows, in a fixed order,
 * for type and range; tsr_proto_request_check first checks the envelope
 * (a known op, no field it does not take). A refusal is INVALID_ARGUMENT
 * (or the protocol's own code, for the envelope) with a message that
 * names the field, and leaves the output as it was. Nothing allocates. */
#ifndef TESSERA_PROTO_REQUESTS_H
#define TESSERA_PROTO_REQUESTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/json.h"
#include "lease/lease.h"

typedef enum tsr_proto_op_e {
  TSR_PROTO_HELLO,
  TSR_PROTO_DEVICES,
  TSR_PROTO_LEASE_CREATE,
  TSR_PROTO_LEASE_RELEASE,
  TSR_PROTO_LEASE_LIST,
  TSR_PROTO_LEASE_SHOW,
  TSR_PROTO_LEASE_ATTACH,
  TSR_PROTO_TOP,
  TSR_PROTO_LEASE_RENEW,
  TSR_PROTO_LEASE_RESIZE,
  TSR_PROTO_OP_COUNT
} tsr_proto_op_t;

/* "hello", "devices", "lease.create", ... */
const char *tsr_proto_op_name(tsr_proto_op_t op);

#define TSR_PROTO_USER_MAX 256 /* a user name or uid, with the NUL */

/* lease.create: a lease of `fraction_ppm` of device `device`'s memory for
 * `duration_ns`, with an SM share (0: none), actions (DEFAULT: the node's,
 * not sent), for another user (admins; with has_user: a name or a uid) and
 * a job id ("": none). */
typedef struct tsr_proto_create_s {
  uint32_t device;
  uint32_t fraction_ppm;
  uint64_t duration_ns;
  uint32_t sm_ppm;
  tsr_lease_action_t on_expiry;
  tsr_lease_over_limit_t over_limit;
  bool has_user;
  char user[TSR_PROTO_USER_MAX];
  char job[TSR_LEASE_JOB_MAX + 1];
  uint64_t wait_ns; /* > 0: if it does not fit, wait up to this long for the room (queued) */
} tsr_proto_create_t;

/* lease.list: the caller's leases (with `queued`: her creates waiting for
 * capacity), or with `all` everyone's she may see,
 * from the id after `after`, at most `limit` (1..TSR_PROTO_LIST_PAGE_MAX;
 * 0 when writing: the daemon's default), of job `job` ("": any). */
typedef struct tsr_proto_list_s {
  bool all;
  bool queued; /* the creates waiting for capacity, not the active leases */
  uint64_t after;
  uint64_t limit;
  char job[TSR_LEASE_JOB_MAX + 1];
} tsr_proto_list_t;

/* lease.renew: lease `id`'s deadline moved to `duration_ns` from the
 * daemon's now, or to `until_ns` (wall clock, ns since the epoch): exactly
 * one of the two is non-zero. */
typedef struct tsr_proto_renew_s {
  uint64_t id;
  uint64_t duration_ns;
  uint64_t until_ns;
} tsr_proto_renew_t;

/* lease.resize: lease `id`'s memory to `fraction_ppm` of its device (0:
 * unchanged) and, with has_sm, its SM share to `sm_ppm`; `force` applies a
 * shrink below what the lease's processes hold. */
typedef struct tsr_proto_resize_s {
  uint64_t id;
  uint32_t fraction_ppm;
  bool has_sm;
  uint32_t sm_ppm;
  bool force;
} tsr_proto_resize_t;

/* ---- writers: the whole request object, without "req" ---------------------- */

/* hello, devices, top: the op alone */
void tsr_proto_plain_write(tsr_json_writer_t *w, tsr_proto_op_t op);
void tsr_proto_create_write(tsr_json_writer_t *w, const tsr_proto_create_t *r);
/* lease.release, lease.show, lease.attach: the op and the lease's id */
void tsr_proto_id_write(tsr_json_writer_t *w, tsr_proto_op_t op, uint64_t id);
void tsr_proto_list_write(tsr_json_writer_t *w, const tsr_proto_list_t *r);
void tsr_proto_renew_write(tsr_json_writer_t *w, const tsr_proto_renew_t *r);
void tsr_proto_resize_write(tsr_json_writer_t *w, const tsr_proto_resize_t *r);

/* ---- readers ------------------------------------------------------------------ */

/* The envelope of a scanned request: a string "op" naming a known op
 * (TSR_PROTO_ERR_BAD_REQUEST without one, TSR_PROTO_ERR_UNKNOWN_OP for
 * another), and no member but "op", "req" and the op's fields
 * (TSR_PROTO_ERR_UNKNOWN_FIELD). On a refusal *out_code is the protocol's
 * error code and `why` the message; true and *out_op otherwise. */
bool tsr_proto_request_check(const tsr_json_member_t *m, size_t n, tsr_proto_op_t *out_op, const char **out_code,
                             char *why, size_t why_cap);

/* The fields of each op, from a request tsr_proto_request_check passed.
 * False, with the message in `why` (the code is always invalid_argument)
 * and *out untouched, for a field missing, of the wrong type or out of
 * range. */
bool tsr_proto_create_read(const tsr_json_member_t *m, size_t n, tsr_proto_create_t *out, char *why, size_t why_cap);
bool tsr_proto_id_read(const tsr_json_member_t *m, size_t n, uint64_t *out_id, char *why, size_t why_cap);
bool tsr_proto_list_read(const tsr_json_member_t *m, size_t n, tsr_proto_list_t *out, char *why, size_t why_cap);
bool tsr_proto_renew_read(const tsr_json_member_t *m, size_t n, tsr_proto_renew_t *out, char *why, size_t why_cap);
bool tsr_proto_resize_read(const tsr_json_member_t *m, size_t n, tsr_proto_resize_t *out, char *why, size_t why_cap);

#endif
