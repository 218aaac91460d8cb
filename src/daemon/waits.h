/* daemon/waits.h: tesserad's side of waiting for capacity (waits.c).
 *
 * A lease.create with wait_ns that does not fit (or that would go ahead of
 * requests already waiting for its device) is queued (lease/queue.h): its
 * client gets a first reply at once, {"ok":true,"queued":{...}}, and its
 * connection then waits; the second reply is the outcome, written here into
 * `answers` and given to the connection by clients.c after the lock files
 * and audit lines it accounts for are durable:
 *   granted    {"ok":true,"lease":{...}}, as a create's;
 *   timed out  resource_exhausted, after wait_ns;
 *   withdrawn  cancelled: `lease release` of its id by its owner or an admin;
 *   stopping   unavailable: the daemon stops (the queue is not kept across
 *              a restart; every waiter is told, none is left hanging).
 * Closing the connection withdraws the request without an answer.
 *
 * The queue runs (tsr_daemon_waits_run) at the end of each round of the
 * event loop and before each create: whatever freed room (a release, an
 * expiry, a shrink) is granted in the same round. */
#ifndef TESSERA_DAEMON_WAITS_H
#define TESSERA_DAEMON_WAITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/json.h"
#include "daemon/identity.h"
#include "lease/lease.h"
#include "lease/queue.h"
#include "tessera/status.h"

#define TSR_PROTO_ERR_CANCELLED "cancelled" /* a waiting create was withdrawn */

/* The wait histogram's upper bounds, seconds (and +Inf). */
#define TSR_WAIT_BUCKETS 9
extern const double tsr_wait_buckets[TSR_WAIT_BUCKETS];

/* A second reply, for the connection that waits on request `id`. */
typedef struct tsr_wait_answer_s {
  uint64_t id;
  char *line; /* the reply object, without its newline */
  size_t len;
  uint64_t granted; /* the lease it granted (0: none): released if no one takes the answer */
} tsr_wait_answer_t;

typedef struct tsr_waits_s {
  tsr_lease_queue_t *queue;
  struct tsr__wait_tag_s *tags; /* each waiting request's "req", to echo */
  size_t ntags, tags_cap;
  tsr_wait_answer_t *answers; /* to deliver */
  size_t nanswers, answers_cap;
  uint64_t deferred; /* set by a create just queued: its connection waits on this id */
  bool stale;        /* the queue changed since the rule last ran */
  uint64_t seen;     /* the lease table's changes when the rule last ran */
  /* for /metrics */
  uint64_t granted, timed_out, withdrawn, refused;
  uint64_t wait_bucket[TSR_WAIT_BUCKETS], wait_sum_ns; /* granted requests' waits; count: granted */
} tsr_waits_t;

typedef struct tsr_daemon_s tsr_daemon_t;

/* per_user_max: max_queued_per_user (0: none). False when out of memory. */
bool tsr_waits_init(tsr_waits_t *waits, uint32_t per_user_max);
void tsr_waits_free(tsr_waits_t *waits);

/* Queues `wait` (its id reserved by the caller), whose request's "req" is
 * `tag` (raw JSON, may be NULL), and writes the first reply's members into
 * the open reply `w`. An error (the per-user bound) is returned, nothing
 * queued or written. */
TSR_MUST_USE tsr_status_t tsr_daemon_waits_add(tsr_daemon_t *d, const tsr_lease_wait_t *wait, const char *tag,
                                               size_t tag_len, tsr_json_writer_t *w);

/* A create (the "req" of its request is `tag`): granted at once into
 * *out_lease when it may go first (nothing waits for its device, or it may
 * be backfilled, or it is an admin's that does not wait), else queued when
 * wait_ns > 0 (*out_queued; the first reply is written into `w`), else
 * refused: resource_exhausted, saying how many wait ahead. What waits is granted first. A request that could never
 * be granted (invalid, more than the device) is refused, never queued. */
TSR_MUST_USE tsr_status_t tsr_daemon_waits_create(tsr_daemon_t *d, const tsr_lease_request_t *request,
                                                  const tsr_lease_actor_t *actor, uint64_t wait_ns, const char *tag,
                                                  size_t tag_len, tsr_json_writer_t *w, bool *out_queued,
                                                  tsr_lease_t *out_lease);

/* lease.list with queued: the caller's waiting requests (`everyone`: an
 * admin sees all; anyone else her own and "others", how many more wait),
 * of job `job` ("": any), in arrival order. */
void tsr_daemon_waits_list(const tsr_daemon_t *d, const tsr_identity_t *who, bool everyone, const char *job,
                           tsr_json_writer_t *w);

/* Answers the requests whose time is up, then grants what the rule picks
 * (lease/queue.h), until nothing more can go. */
void tsr_daemon_waits_run(tsr_daemon_t *d);

/* Withdraws request `id`: false if it is not queued. With `by` (the one who
 * withdrew it), its connection is answered `cancelled`; without, nobody is
 * (its connection closed). */
bool tsr_daemon_waits_withdraw(tsr_daemon_t *d, uint64_t id, const tsr_identity_t *by);

/* Answers every waiting request `unavailable` (the daemon stops). */
void tsr_daemon_waits_stop(tsr_daemon_t *d);

/* When the earliest waiting request gives up (monotonic); false: none. */
bool tsr_daemon_waits_next_due(const tsr_daemon_t *d, uint64_t *out_mono_ns);

/* Writes `wait` as a queued object (its position now). */
void tsr_daemon_waits_write(const tsr_daemon_t *d, tsr_json_writer_t *w, const tsr_lease_wait_t *wait);

#endif
