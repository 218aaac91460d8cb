/* proto/proto.h: the tesserad socket protocol, shared by daemon and clients.
 *
 * One JSON object per line each way over a Unix stream socket; see
 * docs/protocol.md for every request, reply and error code. This module holds
 * the JSON forms of leases and devices, the error codes, and a small blocking
 * client used by the CLI, the tests and the benchmark. */
#ifndef TESSERA_PROTO_PROTO_H
#define TESSERA_PROTO_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/json.h"
#include "device/device.h"
#include "lease/lease.h"
#include "tessera/status.h"

#define TSR_PROTO_VERSION 1
#define TSR_PROTO_LINE_MAX 65536 /* longest request line, newline excluded */
/* Where the daemon listens and clients connect unless told otherwise. */
#define TSR_PROTO_DEFAULT_SOCKET "/run/tessera/tessera.sock"
/* lease.list answers in pages of at most this many leases ("limit", default
 * the same); a reply that has more to give carries "next": the id to pass as
 * "after" for the following page. No reply can outgrow a page, however many
 * leases the table holds. */
#define TSR_PROTO_LIST_PAGE_MAX 500

/* Protocol-level error codes (besides tsr_status_code_name's names). */
#define TSR_PROTO_ERR_BAD_REQUEST "bad_request" /* not a JSON object */
#define TSR_PROTO_ERR_UNKNOWN_OP "unknown_op"
#define TSR_PROTO_ERR_UNKNOWN_FIELD "unknown_field"
#define TSR_PROTO_ERR_LINE_TOO_LONG "line_too_long"
#define TSR_PROTO_ERR_BUSY "busy" /* too many clients */
#define TSR_PROTO_ERR_UNKNOWN_USER "unknown_user"

/* "active", "released", "expired". */
const char *tsr_proto_lease_state_name(tsr_lease_state_t state);

/* What the processes of an active lease use. The counters are what the
 * lease's processes report through its shared region ("usage": "reported"
 * in the JSON): a hostile tenant can write anything there, so the daemon
 * clamps used and peak to the lease's limit, and says what NVML measured
 * beside them where it can. */
typedef struct tsr_proto_lease_usage_s {
  char region[256];    /* the region file's path */
  uint64_t used_bytes; /* admitted and not freed (reported, at most the limit) */
  uint64_t peak_bytes; /* reported, at most the limit */
  uint64_t denied;     /* allocations refused (reported) */
  uint32_t processes;  /* processes attached (reported) */
  bool revoked;        /* the region was ended while the lease is active (the backstop) */
  bool tampered;       /* its region was found saying what the lease does not */
  bool gpu_known;      /* gpu_bytes is NVML's (the backstop watches the device) */
  uint64_t gpu_bytes;  /* what NVML says the lease's processes use */
  /* the compute share's counters (0 from daemons before it) */
  uint64_t gpu_ns;       /* GPU time charged to the lease's launches */
  uint64_t throttled_ns; /* time its launch calls waited */
  uint64_t launches;     /* launches charged */
  uint64_t bypassed;     /* launches let through uncharged (NCCL) */
  uint32_t sm_now_ppm;   /* the SM share in force now (the lease's, or less
                          * while the switching reserve holds; 0: no share) */
} tsr_proto_lease_usage_t;

/* Writes the JSON object of a lease. `now_wall_ns` gives remaining_ns for
 * active leases; "on_expiry" and "over_limit" are written unless they are
 * DEFAULT (the daemon writes the actions in effect). With `usage` (may be NULL) the object also has "region",
 * "usage" ("reported"), "used_bytes", "peak_bytes", "processes", "denied", "revoked",
 * "tampered", "gpu_bytes" (NVML's, or null), "gpu_ns", "throttled_ns", "launches",
 * "bypassed" and "sm_now_ppm". */
void tsr_proto_lease_write(tsr_json_writer_t *w, const tsr_lease_t *lease, uint64_t now_wall_ns);
void tsr_proto_lease_write_usage(tsr_json_writer_t *w, const tsr_lease_t *lease, uint64_t now_wall_ns,
                                 const tsr_proto_lease_usage_t *usage);

/* Reads the usage members of a lease object; false if it has none (an
 * ended lease, or a daemon without regions). */
bool tsr_proto_lease_usage_parse(const char *text, size_t len, tsr_proto_lease_usage_t *out_usage);

/* Reads a lease object as tsr_proto_lease_write writes it ("on_expiry",
 * "over_limit" and "job" optional: daemons before them do not write them;
 * a value it does not know is TSR_DATA_LOSS). */
TSR_MUST_USE tsr_status_t tsr_proto_lease_parse(const char *text, size_t len, tsr_lease_t *out_lease);

/* A create that waits for capacity (lease.create with wait_ns; lease.list
 * with queued): what it asks for, whose it is, its place in its device's
 * queue and its times. */
typedef struct tsr_proto_queued_s {
  uint64_t id; /* the id its lease will have */
  uint32_t device;
  uint32_t fraction_ppm;
  uint64_t bytes;
  uint32_t sm_ppm;
  uint64_t duration_ns; /* the lease's, from its grant */
  char owner[TSR_LEASE_NAME_MAX];
  char job[TSR_LEASE_JOB_MAX]; /* "" none */
  uint64_t position;           /* in its device's queue: 1 is the head */
  uint64_t queued_ns;          /* wall clock, ns since the epoch */
  uint64_t until_ns;           /* it gives up then (wall clock) */
} tsr_proto_queued_t;

void tsr_proto_queued_write(tsr_json_writer_t *w, const tsr_proto_queued_t *queued);
TSR_MUST_USE tsr_status_t tsr_proto_queued_parse(const char *text, size_t len, tsr_proto_queued_t *out_queued);

/* Writes the JSON object of a device with its current commitments
 * ("minor": the N of its /dev/nvidiaN, or null when unknown). */
void tsr_proto_device_write(tsr_json_writer_t *w, const tsr_device_t *device, uint64_t available_bytes,
                            uint32_t sm_committed_ppm, uint32_t active_leases);

/* One device object of a "devices" reply, read back (docs/protocol.md).
 * The names are kept as the daemon wrote them, so that a client shows a
 * value it does not know yet rather than refusing the whole list. */
typedef struct tsr_proto_device_s {
  uint32_t index; /* what leases name */
  char name[TSR_DEVICE_NAME_MAX];
  uint64_t memory_bytes;    /* the device's total */
  uint64_t available_bytes; /* not held by an active lease */
  uint32_t sm_count;        /* 0 when the daemon does not know it (null) */
  uint32_t sm_committed_ppm;
  uint32_t leases; /* active leases on it */
  char mig[16];    /* "enabled", "disabled", "unsupported", "unknown" */
  char source[16]; /* "nvml" or "config" */
  char kind[16];   /* "cuda" or "opencl" ("cuda" from a daemon that does not say) */
  bool has_minor;  /* false for null, or from a daemon that does not say */
  uint32_t minor;  /* the N of its /dev/nvidiaN, with has_minor */
} tsr_proto_device_t;

/* Reads one device object (`len` bytes of an element of "devices") as
 * tsr_proto_device_write writes it. TSR_DATA_LOSS when it is not an
 * object, lacks a member (all but "kind" and "minor", which daemons before
 * them do not write) or has one of the wrong type or out of range;
 * *out_device is untouched then. No allocation. */
TSR_MUST_USE tsr_status_t tsr_proto_device_parse(const char *text, size_t len, tsr_proto_device_t *out_device);

/* Writes the members "ok":false,"error":{"code":code,"message":...} into the
 * open reply object. */
void tsr_proto_error_write(tsr_json_writer_t *w, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The status a refusal stands for: its code follows the error code (see
 * docs/protocol.md) and its message is the daemon's. */
TSR_MUST_USE tsr_status_t tsr_proto_error_status(const char *code, const char *message);

/* ---- a blocking client --------------------------------------------------- */

typedef struct tsr_proto_client_s tsr_proto_client_t;

/* Connects to the daemon at `socket_path`. TSR_UNAVAILABLE when nobody
 * listens there, with a message saying how to start one. */
TSR_MUST_USE tsr_status_t tsr_proto_client_connect(const char *socket_path, tsr_proto_client_t **out_client);
void tsr_proto_client_close(tsr_proto_client_t *client);

/* Sends one request line (`len` bytes, without the newline) and waits for
 * the reply line: *out_reply points into the client's buffer, `*out_len`
 * bytes without the newline, valid until the next call. */
TSR_MUST_USE tsr_status_t tsr_proto_client_call_line(tsr_proto_client_t *client, const char *line, size_t len,
                                                     const char **out_reply, size_t *out_len);

/* Reads the next reply line without sending anything: the second reply of
 * a create that waited for capacity (lease.create with wait_ns). Blocks
 * until it comes or the daemon closes the connection (TSR_UNAVAILABLE).
 * The same rules for *out_reply as tsr_proto_client_call_line. */
TSR_MUST_USE tsr_status_t tsr_proto_client_read_line(tsr_proto_client_t *client, const char **out_reply,
                                                     size_t *out_len);

/* For the ops whose reply carries a lease (lease.create, lease.release,
 * lease.show): sends `line` and reads the lease without a JSON tree. A
 * refusal is returned as tsr_proto_error_status gives it. */
TSR_MUST_USE tsr_status_t tsr_proto_client_call_lease(tsr_proto_client_t *client, const char *line, size_t len,
                                                      tsr_lease_t *out_lease);

/* NULL if the reply line's "ok" is true. Else the refusal, as
 * tsr_proto_error_status gives it, with its error code copied into `code`
 * (may be NULL; "" if the reply named none); a line that is not a reply
 * object is TSR_DATA_LOSS. */
TSR_MUST_USE tsr_status_t tsr_proto_reply_status(const char *line, size_t len, char *code, size_t code_cap);

#endif
