/* lifecycle.c: what the daemon does inside a lease's create and release,
 * given to the lease service as its hooks (lease/lease.h), which call them
 * in the order that keeps a crash harmless: a new lease gets its region and
 * its audit line after its lock file is written and before anyone hears of
 * it; a release is audited before anything changes, and the lease's region
 * ends, its processes are signalled (with `signal`) and it is remembered
 * after it has left the file and the table. The handlers make one call. */
#include <stdio.h>

#include "base/log.h"
#include "daemon/audit.h"
#include "daemon/daemon.h"
#include "daemon/enforce.h"
#include "daemon/handlers.h"
#include "daemon/identity.h"
#include "daemon/lifecycle.h"
#include "daemon/regions.h"

/* The audit's view of an actor: the identity the handler had. */
static tsr_identity_t tsr__who(const tsr_lease_actor_t *a) {
  tsr_identity_t who = {.uid = a->uid, .pid = a->pid, .admin = a->admin};
  snprintf(who.user, sizeof(who.user), "%s", a->name ? a->name : "");
  return who;
}

TSR_MUST_USE static tsr_status_t tsr__created(void *ctx, const tsr_lease_t *lease, const tsr_lease_actor_t *actor) {
  tsr_daemon_t *d = ctx;
  const tsr_lease_table_t *t = tsr_lease_service_table(d->leases);
  tsr_status_t st = tsr_regions_add(d->regions, lease, tsr_lease_table_device(t, lease->device));
  if (st) return st;
  tsr_identity_t who = tsr__who(actor);
  st = tsr_audit_lease(d->audit, "create", &who, lease, NULL);
  if (st) {
    tsr_regions_end(d->regions, lease->id, TSR_REGION_RELEASED);
    return st;
  }
  tsr_daemon_lease_created(d, lease);
  return NULL;
}

TSR_MUST_USE static tsr_status_t tsr__releasing(void *ctx, const tsr_lease_t *lease, const tsr_lease_actor_t *actor) {
  tsr_daemon_t *d = ctx;
  tsr_identity_t who = tsr__who(actor);
  return tsr_audit_lease(d->audit, "release", &who, lease, NULL);
}

static void tsr__released(void *ctx, const tsr_lease_t *lease, const tsr_lease_actor_t *actor) {
  (void)actor;
  tsr_daemon_t *d = ctx;
  tsr_daemon_lease_ended(d, lease, TSR_REGION_RELEASED);
  tsr_daemon_remember(d, lease);
}

/* The new deadline is durable and in the table: the region says it, and
 * the audit log has the renew (its line carries the new deadline). */
static void tsr__renewed(void *ctx, const tsr_lease_t *lease, const tsr_lease_t *before,
                         const tsr_lease_actor_t *actor) {
  (void)before;
  tsr_daemon_t *d = ctx;
  tsr_status_t st = tsr_regions_update(d->regions, lease);
  if (st) { /* the daemon ends the lease at its deadline whatever the region says */
    tsr_log_warn("lease %llu: its region does not say the renewed deadline: %s", (unsigned long long)lease->id,
                 tsr_status_message(st));
    tsr_status_free(st);
  }
  tsr_identity_t who = tsr__who(actor);
  st = tsr_audit_lease(d->audit, "renew", &who, lease, NULL);
  if (st) {
    tsr_log_error("lease %llu renewed, but not audited: %s", (unsigned long long)lease->id, tsr_status_message(st));
    tsr_status_free(st);
  }
}

/* The new size is durable and in the table: the region says it (the
 * tenants' next charge, view and launch see it), and the audit log has the
 * resize. */
static void tsr__resized(void *ctx, const tsr_lease_t *lease, const tsr_lease_t *before,
                         const tsr_lease_actor_t *actor) {
  tsr_daemon_t *d = ctx;
  tsr_status_t st = tsr_regions_update(d->regions, lease);
  if (st) {
    tsr_log_error("lease %llu: its region does not say the new size: %s", (unsigned long long)lease->id,
                  tsr_status_message(st));
    tsr_status_free(st);
  }
  tsr_log_info("lease %llu of %s resized: memory %llu -> %llu bytes, SM share %u -> %u ppm",
               (unsigned long long)lease->id, lease->owner, (unsigned long long)before->bytes,
               (unsigned long long)lease->bytes, before->sm_ppm, lease->sm_ppm);
  tsr_identity_t who = tsr__who(actor);
  st = tsr_audit_lease(d->audit, "resize", &who, lease, NULL);
  if (st) {
    tsr_log_error("lease %llu resized, but not audited: %s", (unsigned long long)lease->id, tsr_status_message(st));
    tsr_status_free(st);
  }
}

void tsr_daemon_lease_hooks(tsr_daemon_t *d) {
  tsr_lease_hooks_t hooks = {d, tsr__created, tsr__releasing, tsr__released, tsr__renewed, tsr__resized};
  tsr_lease_service_set_hooks(d->leases, &hooks);
}
