/* daemon/audit.h: the audit log (audit.c), one JSON line per event: a
 * lease's create, release and expiry, the backstop's acts, a damaged
 * region, and refusals (rate-limited per user, the rest summed up). */
#ifndef TESSERA_DAEMON_AUDIT_H
#define TESSERA_DAEMON_AUDIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/identity.h"
#include "lease/lease.h"
#include "tessera/status.h"

typedef struct tsr_audit_s tsr_audit_t;

typedef struct tsr_audit_config_s {
  const char *path;   /* absolute; its directory must pass tsr_fs_check_private_dir */
  uint64_t max_bytes; /* rotate past this size; 0 = never */
  uint32_t keep;      /* rotated files kept (audit.log.1 ...); 0 = keep all */
  uint32_t deny_rate; /* refusals per user per second written in full */
} tsr_audit_config_t;

/* What an expiry line adds. */
typedef struct tsr_audit_expiry_s {
  uint64_t late_ns;     /* how long after its deadline the lease ended */
  bool during_downtime; /* the deadline passed while no daemon ran */
} tsr_audit_expiry_t;

/* Opens (creating, mode 0640) the log; refuses a directory others can write,
 * a link, or a file that is not the daemon's own. */
TSR_MUST_USE tsr_status_t tsr_audit_open(const tsr_audit_config_t *config, tsr_audit_t **out_audit);
/* Writes what is pending and closes. */
void tsr_audit_close(tsr_audit_t *audit);
/* Writes one "create", "release" or "expire" line now (with the refusal
 * lines gathered before it). `actor` is NULL and `expiry` set for expiry.
 * Fails (TSR_IO_ERROR, or out of memory) when the line is not in the file:
 * the caller must then fail the request and undo it. */
TSR_MUST_USE tsr_status_t tsr_audit_lease(tsr_audit_t *audit, const char *event, const tsr_identity_t *actor,
                                          const tsr_lease_t *lease, const tsr_audit_expiry_t *expiry);
/* What a "backstop" line says: the backstop acted on processes. */
typedef struct tsr_audit_backstop_s {
  uint64_t lease;    /* 0: no lease (the deny rule) */
  const char *owner; /* the lease's owner, or the process's user */
  uint32_t uid;
  uint32_t device;
  const int32_t *pids; /* host pids acted on */
  size_t npids;
  uint64_t used_bytes;  /* what NVML says they use */
  uint64_t limit_bytes; /* the lease's limit; 0 without a lease */
  const char *action;   /* what was done: "signal" or "log" */
  const char *reason;
} tsr_audit_backstop_t;

/* Writes one "backstop" line now (with the refusals gathered before it). */
TSR_MUST_USE tsr_status_t tsr_audit_backstop(tsr_audit_t *audit, const tsr_audit_backstop_t *b);
/* Writes one "region" line: lease `lease`'s region was found saying what
 * the lease does not (`damage`: TSR_REGION_DAMAGE_* bits, "found"), and
 * whether the daemon's words were put back ("action"). */
TSR_MUST_USE tsr_status_t tsr_audit_region(tsr_audit_t *audit, const tsr_lease_t *lease, uint32_t damage,
                                           bool repaired);
/* Records a refusal: the first `deny_rate` of a user per second as "deny"
 * lines, the rest counted into one "deny_summary" line per user and second.
 * Gathered, not written: see tsr_audit_flush. Never fails the caller. */
void tsr_audit_deny(tsr_audit_t *audit, const tsr_identity_t *actor, const char *op, const char *code,
                    const char *message, uint64_t now_mono_ns);
/* Writes the gathered refusal lines (one write), after summing up the
 * seconds that are over. The event loop calls it after each batch, before
 * that batch's replies, and once a second. */
void tsr_audit_flush(tsr_audit_t *audit, uint64_t now_mono_ns);
/* deny_summary lines written so far. */
uint64_t tsr_audit_summaries(const tsr_audit_t *audit);
/* Refusals recorded (tsr_audit_deny calls) since the log was opened. */
uint64_t tsr_audit_denies(const tsr_audit_t *audit);

#endif
