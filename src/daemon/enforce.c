/* enforce.c: the enforcement tick, and what ends a lease's processes.
 *
 * Every tick (the backstop period, at most 500 ms) the daemon takes one /proc
 * snapshot and uses it for everything that needs to know processes: the
 * reaper (slots of tenants in other PID namespaces resolve through NSpid,
 * so a container's tenant is reaped when it dies and never while it lives),
 * forgetting roots whose process is gone, and the backstop (which acts on a
 * lease over its limit in the round that finds it: backstop.c). SIGKILLs
 * whose grace is over go out on the same tick.
 *
 * When a lease ends (release, expiry) its region is ended at once, so every
 * further allocation through the shim fails, and then its action runs:
 * `revoke` does nothing more; `signal` sends SIGTERM to the lease's
 * processes (the holders of its region's slots and the descendants of its
 * roots) and SIGKILL to those alive after the grace. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/time.h"
#include "daemon/actions.h"
#include "daemon/audit.h"
#include "daemon/backstop.h"
#include "daemon/daemon.h"
#include "daemon/enforce.h"
#include "daemon/procs.h"
#include "daemon/regions.h"
#include "daemon/roots.h"
#include "daemon/userindex.h"

#define TSR__END_TARGETS 1024 /* processes one lease's end signals */

tsr_lease_action_t tsr_daemon_action_of(const tsr_daemon_t *d, const tsr_lease_t *l) {
  return l->on_expiry != TSR_LEASE_ACTION_DEFAULT ? l->on_expiry : d->config.on_expiry;
}

tsr_lease_over_limit_t tsr_daemon_over_limit_of(const tsr_daemon_t *d, const tsr_lease_t *l) {
  return tsr_backstop_over_limit_of(l, d->config.over_limit);
}

uint64_t tsr_daemon_enforce_period_ns(const tsr_daemon_t *d) {
  /* at most 500 ms: the reaper runs on this tick, and a dead tenant's
   * memory is promised back within 2 s even on a loaded machine */
  uint64_t p = d->backstop ? d->config.backstop_period_ns : 0;
  return p && p < TSR_NS_PER_S / 2 ? p : TSR_NS_PER_S / 2;
}

typedef struct {
  tsr_target_t *out;
  size_t n, cap;
  uint32_t owner_uid;
  size_t foreign; /* processes named for the lease that are not its owner's */
  int32_t foreign_pid;
} tsr__collect_t;

/* A process is a lease's only if its real uid is the lease's owner: a slot
 * names whatever pid its tenant wrote there, and a tree can hold a
 * set-user-ID program. */
static void tsr__collect(void *ctx, const tsr_proc_t *p) {
  tsr__collect_t *c = ctx;
  if (p->uid != c->owner_uid) {
    c->foreign++;
    c->foreign_pid = p->pid;
  } else if (c->n < c->cap) {
    c->out[c->n++] = (tsr_target_t){p->pid, p->start_ticks};
  }
}

size_t tsr_daemon_lease_procs(const tsr_daemon_t *d, const tsr_lease_t *lease, const tsr_procs_t *procs,
                              tsr_target_t *out, size_t cap) {
  tsr__collect_t c = {out, 0, cap, lease->owner_uid, 0, 0};
  tsr_region_copy_t *copy = malloc(sizeof(*copy));
  if (copy && tsr_regions_read(d->regions, lease->id, copy)) {
    for (uint32_t i = 0; i < copy->nslots && c.n < cap; i++) {
      const tsr_proc_t *p = copy->slots[i].dead ? NULL : tsr_procs_resolve(procs, &copy->slots[i].proc);
      if (p) tsr__collect(&c, p);
    }
  }
  free(copy);
  for (size_t i = 0; i < d->roots.count && c.n < cap; i++) {
    const tsr_root_t *root = &d->roots.v[i];
    if (root->lease == lease->id)
      tsr_procs_descendants(procs, root->pid, root->start_ticks, cap - c.n, tsr__collect, &c);
  }
  if (c.foreign)
    tsr_log_warn("lease %" PRIu64
                 " of %s: %zu process(es) (pid %d%s) named for it are not its "
                 "owner's: not its processes, never signalled",
                 lease->id, lease->owner, c.foreign, c.foreign_pid, c.foreign > 1 ? ", ..." : "");
  return c.n;
}

static void tsr__index_update(tsr_daemon_t *d, uint32_t uid) {
  tsr_status_t st = tsr_user_index_update(tsr_regions_dir_fd(d->regions), tsr_lease_service_table(d->leases), uid);
  if (st) {
    tsr_log_error("lease index of uid %" PRIu32 ": %s", uid, tsr_status_message(st));
    tsr_status_free(st);
  }
}

void tsr_daemon_region_damaged(void *ctx, uint64_t id, uint32_t damage, bool repaired) {
  tsr_daemon_t *d = ctx;
  const tsr_lease_t *l = tsr_lease_table_find(tsr_lease_service_table(d->leases), id);
  if (!l) return;
  tsr_log_warn("lease %" PRIu64 " of %s: its region says what the lease does not (%s%s%s%s%s); %s", id, l->owner,
               damage & TSR_REGION_DAMAGE_SIZE ? "size " : "", damage & TSR_REGION_DAMAGE_HEADER ? "header " : "",
               damage & TSR_REGION_DAMAGE_STATE ? "state " : "", damage & TSR_REGION_DAMAGE_COMPUTE ? "compute " : "",
               damage & TSR_REGION_DAMAGE_COUNTERS ? "counters" : "",
               repaired ? "the daemon's words are put back, and its processes are no longer taken "
                          "on the region's word"
                        : "not repaired");
  tsr_status_t st = tsr_audit_region(d->audit, l, damage, repaired);
  if (st) {
    tsr_log_error("lease %" PRIu64 ": no audit line for its damaged region: %s", id, tsr_status_message(st));
    tsr_status_free(st);
  }
}

void tsr_daemon_lease_created(tsr_daemon_t *d, const tsr_lease_t *lease) {
  d->counters.created++;
  tsr__index_update(d, lease->owner_uid);
}

void tsr_daemon_lease_ended(tsr_daemon_t *d, const tsr_lease_t *lease, tsr_region_state_t state) {
  if (state == TSR_REGION_RELEASED) d->counters.released++;
  tsr_regions_set_state(d->regions, lease->id, state); /* allocations fail from now on */
  tsr_target_t targets[TSR__END_TARGETS];
  size_t n = 0;
  bool signal = tsr_daemon_action_of(d, lease) == TSR_LEASE_ACTION_SIGNAL;
  if (signal) {
    tsr_procs_scan(&d->procs); /* afresh: who holds the lease now */
    n = tsr_daemon_lease_procs(d, lease, &d->procs, targets, TSR__END_TARGETS);
  }
  tsr_regions_end(d->regions, lease->id, state);
  tsr_roots_forget_lease(&d->roots, lease->id);
  tsr__index_update(d, lease->owner_uid);
  if (n) {
    size_t sent = tsr_actions_signal(d->actions, lease->id, lease->owner_uid, targets, n, tsr_time_mono_ns());
    tsr_log_info("lease %" PRIu64
                 " %s: SIGTERM to %zu process(es), SIGKILL after %.1f s to those "
                 "still alive",
                 lease->id, state == TSR_REGION_EXPIRED ? "expired" : "released", sent,
                 (double)d->config.expiry_grace_ns / 1e9);
  }
}

void tsr_daemon_enforce(tsr_daemon_t *d) {
  uint64_t now = tsr_time_mono_ns();
  const tsr_lease_table_t *t = tsr_lease_service_table(d->leases);
  bool leases = tsr_lease_table_count(t) > 0;
  bool deny = d->backstop && d->config.policy_deny;
  if (!leases && !deny && d->roots.count == 0) {
    tsr_actions_tick(d->actions, now);
    return; /* nothing needs to know the processes */
  }
  /* the tick may be shorter than the backstop period (the reaper's 500 ms) */
  bool backstop_due = d->backstop && now >= d->backstop_next_ns;
  /* /proc is read only when something needs the whole picture: the
   * backstop, `tessera run`'s trees, or (lazily, in tsr_procs_alive) a
   * tenant in a container; the reaper looks its own namespace's pids up
   * one by one */
  d->procs.fresh = false;
  if (backstop_due || d->roots.count) tsr_procs_scan(&d->procs);
  if (leases) d->counters.reaped += tsr_regions_reap_with(d->regions, tsr_procs_alive, &d->procs, NULL);
  if (d->procs.fresh) tsr_roots_prune(&d->roots, &d->procs);
  tsr_actions_tick(d->actions, now);
  if (backstop_due) {
    d->backstop_next_ns = now + d->config.backstop_period_ns - d->config.backstop_period_ns / 10;
    tsr_backstop_run(d->backstop, &d->procs, now);
  }
  /* after the backstop's round: which leases ran, NVML says where it can */
  if (leases) tsr_regions_share_tick(d->regions, d->config.share_switch_cost_ppm, tsr_backstop_running, d->backstop);
}
