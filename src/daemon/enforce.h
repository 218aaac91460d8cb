/* daemon/enforce.h: the enforcement tick, and what ends a lease's processes
 * (enforce.c): what a lease's end and its processes over the limit do, the
 * daemon's side of a lease's creation and end, and a damaged region. */
#ifndef TESSERA_DAEMON_ENFORCE_H
#define TESSERA_DAEMON_ENFORCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/actions.h"
#include "daemon/daemon.h"
#include "daemon/procs.h"
#include "lease/lease.h"
#include "region/region.h"

/* The action lease `l` takes when it ends: its own, or the node's on_expiry. */
tsr_lease_action_t tsr_daemon_action_of(const tsr_daemon_t *d, const tsr_lease_t *l);
/* What the backstop does when lease `l`'s processes are over it: its own
 * over_limit, or the node's (tsr_backstop_over_limit_of with the
 * configuration's). Never DEFAULT. */
tsr_lease_over_limit_t tsr_daemon_over_limit_of(const tsr_daemon_t *d, const tsr_lease_t *l);
/* A lease ended (`state`: released or expired): its region is ended at once,
 * then its action runs (signal: SIGTERM to its processes, SIGKILL after the
 * grace), its roots are forgotten and its owner's lease index rewritten. */
void tsr_daemon_lease_ended(tsr_daemon_t *d, const tsr_lease_t *lease, tsr_region_state_t state);
/* A tsr_regions_damage_fn (ctx: the daemon): lease `lease`'s region says
 * what the lease does not; logged and audited ("region"). */
void tsr_daemon_region_damaged(void *d, uint64_t lease, uint32_t damage, bool repaired);
/* A lease was created: its owner's lease index is rewritten. */
void tsr_daemon_lease_created(tsr_daemon_t *d, const tsr_lease_t *lease);
/* The lease's processes as the daemon knows them: slot holders of its region
 * and descendants of its roots, from snapshot `procs`, whose real uid is the
 * lease's owner; at most `cap`. Returns how many. */
size_t tsr_daemon_lease_procs(const tsr_daemon_t *d, const tsr_lease_t *lease, const tsr_procs_t *procs,
                              tsr_target_t *out, size_t cap);
/* The enforcement tick: a /proc snapshot, the reaper, roots pruned, due
 * SIGKILLs, and a backstop round. */
void tsr_daemon_enforce(tsr_daemon_t *d);
/* How often tsr_daemon_enforce runs: the backstop period, at most 500 ms. */
uint64_t tsr_daemon_enforce_period_ns(const tsr_daemon_t *d);

#endif
