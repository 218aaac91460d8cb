/* proto/proto.h: the tesserad socket protocol, shared by daemon and clients.
 *
 * One JSON object per line each way over a Unix stream socket; see
 * docs/protocol.md for every request, reply and error code. This module holds
 * the JSON forms of leases and devices, the error codes, and a small blocking
 * client used by the CLI, the tests and the benchmark. */
#ifndef TESSERA_PROTO_PROTO_H
#define TESSERA_PROTO_PROTO_H

#include <jansson.h>
#include <stdint.h>

#include "tessera/device.h"
#include "tessera/lease.h"
#include "tessera/status.h"

#define TSR_PROTO_VERSION 1
#define TSR_PROTO_LINE_MAX 65536 /* longest request line, newline excluded */

/* Protocol-level error codes (besides tsr_status_code_name's names). */
#define TSR_PROTO_ERR_BAD_REQUEST "bad_request"     /* not a JSON object */
#define TSR_PROTO_ERR_UNKNOWN_OP "unknown_op"
#define TSR_PROTO_ERR_UNKNOWN_FIELD "unknown_field"
#define TSR_PROTO_ERR_LINE_TOO_LONG "line_too_long"
#define TSR_PROTO_ERR_BUSY "busy"                   /* too many clients */
#define TSR_PROTO_ERR_UNKNOWN_USER "unknown_user"

/* "active", "released", "expired". */
const char *tsr_proto_lease_state_name(tsr_lease_state_t state);

/* The JSON object of a lease (new reference). `now_wall_ns` gives
 * remaining_ns for active leases. */
json_t *tsr_proto_lease_json(const tsr_lease_t *lease, uint64_t now_wall_ns);

/* Reads a lease object made by tsr_proto_lease_json. */
tsr_status_t tsr_proto_lease_parse(const json_t *object, tsr_lease_t *out_lease);

/* The JSON object of a device with its current commitments (new reference). */
json_t *tsr_proto_device_json(const tsr_device_t *device, uint64_t available_bytes,
                              uint32_t sm_committed_ppm, uint32_t active_leases);

/* {"ok":false,"error":{"code":code,"message":...}} (new reference). */
json_t *tsr_proto_error(const char *code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- a blocking client --------------------------------------------------- */

typedef struct tsr_proto_client_s tsr_proto_client_t;

/* Connects to the daemon at `socket_path`. TSR_UNAVAILABLE when nobody
 * listens there, with a message saying how to start one. */
tsr_status_t tsr_proto_client_connect(const char *socket_path, tsr_proto_client_t **out_client);
void tsr_proto_client_close(tsr_proto_client_t *client);

/* Sends `request` (borrowed) and waits for one reply line: *out_reply is a new
 * reference. A reply with "ok": false is still a success of the call; use
 * tsr_proto_reply_status to turn it into a status. */
tsr_status_t tsr_proto_client_call(tsr_proto_client_t *client, json_t *request,
                                   json_t **out_reply);

/* NULL if reply["ok"] is true; else a status whose code follows the error
 * code and whose message is the daemon's, and *out_code (may be NULL) points
 * at the code string inside `reply`. */
tsr_status_t tsr_proto_reply_status(const json_t *reply, const char **out_code);

#endif
