/* service.c: the lease table and its store, changed in an order that keeps
 * every lock file and table entry in step (see lease.h). */
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "lease/lease.h"

struct tsr_lease_service_s {
  tsr_lease_table_t *table;
  tsr_lease_store_t *store;
  tsr_lease_now_t now; /* the clock of the restore in progress */
  tsr_lease_hooks_t hooks;
};

void tsr_lease_service_set_hooks(tsr_lease_service_t *s, const tsr_lease_hooks_t *hooks) {
  s->hooks = hooks ? *hooks : (tsr_lease_hooks_t){0};
}

/* Takes a lease that no one has heard of back out of the file and the table.
 * If its file cannot be removed it stays, whole (file and table agree), and
 * ends at its deadline. */
static void tsr__undo_create(tsr_lease_service_t *s, const tsr_lease_t *lease, tsr_lease_now_t now) {
  tsr_status_t st = tsr_lease_store_remove(s->store, lease);
  if (st) {
    tsr_log_error(
        "lease %llu stays until its deadline (it could not be created whole, and its lock file "
        "could not be removed: %s)",
        (unsigned long long)lease->id, tsr_status_message(st));
    tsr_status_free(st);
    return;
  }
  tsr_status_free(tsr_lease_table_remove(s->table, lease->id, TSR_LEASE_RELEASED, now, NULL));
}

TSR_MUST_USE static tsr_status_t tsr__restore_one(void *ctx, const tsr_lease_t *lease) {
  tsr_lease_service_t *s = ctx;
  return tsr_lease_table_restore(s->table, lease, s->now);
}

tsr_status_t tsr_lease_service_open(const tsr_lease_service_config_t *cfg, const tsr_device_t *devices, size_t count,
                                    tsr_lease_now_t now, tsr_lease_service_t **out_service, size_t *out_quarantined) {
  *out_service = NULL;
  tsr_lease_service_t *s = calloc(1, sizeof(*s));
  if (!s) return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  tsr_status_t st = tsr_lease_table_create(devices, count, cfg->host, &cfg->limits, &s->table);
  if (!st) st = tsr_lease_store_open(cfg->state_dir, cfg->sync, &s->store);
  if (!st) {
    s->now = now;
    st = tsr_lease_store_load(s->store, tsr__restore_one, s, out_quarantined);
  }
  if (!st) tsr_lease_store_defer_sync(s->store, cfg->group_commit);
  if (st) {
    tsr_lease_service_close(s);
    return st;
  }
  *out_service = s;
  return NULL;
}

void tsr_lease_service_close(tsr_lease_service_t *s) {
  if (!s) return;
  tsr_lease_table_free(s->table);
  tsr_lease_store_close(s->store);
  free(s);
}

tsr_status_t tsr_lease_service_create(tsr_lease_service_t *s, const tsr_lease_request_t *req,
                                      const tsr_lease_actor_t *actor, tsr_lease_now_t now, tsr_lease_t *out_lease) {
  uint64_t id;
  TSR_RETURN_IF_ERROR(tsr_lease_store_next_id(s->store, &id));
  return tsr_lease_service_create_as(s, id, req, actor, now, out_lease);
}

tsr_status_t tsr_lease_service_reserve_id(tsr_lease_service_t *s, uint64_t *out_id) {
  return tsr_lease_store_next_id(s->store, out_id);
}

tsr_status_t tsr_lease_service_create_as(tsr_lease_service_t *s, uint64_t id, const tsr_lease_request_t *req,
                                         const tsr_lease_actor_t *actor, tsr_lease_now_t now, tsr_lease_t *out_lease) {
  tsr_lease_t lease;
  TSR_RETURN_IF_ERROR(tsr_lease_table_create_lease(s->table, req, actor, now, id, &lease));
  tsr_status_t st = tsr_lease_store_put(s->store, &lease);
  if (st) {
    tsr_status_t undo = tsr_lease_table_remove(s->table, id, TSR_LEASE_RELEASED, now, NULL);
    tsr_status_free(undo);
    return tsr_status_annotate(st, "lease not created");
  }
  if (s->hooks.created && (st = s->hooks.created(s->hooks.ctx, &lease, actor))) {
    tsr__undo_create(s, &lease, now);
    return tsr_status_annotate(st, "lease not created");
  }
  if (out_lease) *out_lease = lease;
  return NULL;
}

tsr_status_t tsr_lease_service_release(tsr_lease_service_t *s, uint64_t id, const tsr_lease_actor_t *actor,
                                       tsr_lease_now_t now, tsr_lease_t *out_lease) {
  tsr_lease_t lease;
  TSR_RETURN_IF_ERROR(tsr_lease_table_authorize_release(s->table, id, actor, &lease));
  tsr_status_t st = s->hooks.releasing ? s->hooks.releasing(s->hooks.ctx, &lease, actor) : NULL;
  if (!st && (st = tsr_lease_store_remove(s->store, &lease)) && s->hooks.releasing)
    tsr_log_error("lease %llu: audited as released, but its lock file stays: %s", (unsigned long long)id,
                  tsr_status_message(st));
  if (st) return tsr_status_annotate(st, "lease %llu not released", (unsigned long long)id);
  TSR_RETURN_IF_ERROR(tsr_lease_table_remove(s->table, id, TSR_LEASE_RELEASED, now, &lease));
  if (s->hooks.released) s->hooks.released(s->hooks.ctx, &lease, actor);
  if (out_lease) *out_lease = lease;
  return NULL;
}

tsr_status_t tsr_lease_service_renew(tsr_lease_service_t *s, uint64_t id, const tsr_lease_actor_t *actor,
                                     uint64_t deadline_wall_ns, tsr_lease_now_t now, tsr_lease_t *out_lease) {
  const tsr_lease_t *live = tsr_lease_table_find(s->table, id);
  tsr_lease_t before = live ? *live : (tsr_lease_t){0}, after;
  TSR_RETURN_IF_ERROR(tsr_lease_table_check_renew(s->table, id, actor, deadline_wall_ns, now, &after));
  tsr_status_t st = tsr_lease_store_put(s->store, &after);
  if (st) return tsr_status_annotate(st, "lease %llu not renewed", (unsigned long long)id);
  st = tsr_lease_table_renew(s->table, id, actor, deadline_wall_ns, now, &after);
  if (st) { /* out of memory: the file goes back to the old deadline */
    tsr_status_t undo = tsr_lease_store_put(s->store, &before);
    if (undo)
      tsr_log_error("lease %llu: its lock file says the renewed deadline, the table the old one: %s",
                    (unsigned long long)id, tsr_status_message(undo));
    tsr_status_free(undo);
    return tsr_status_annotate(st, "lease %llu not renewed", (unsigned long long)id);
  }
  if (s->hooks.renewed) s->hooks.renewed(s->hooks.ctx, &after, &before, actor);
  if (out_lease) *out_lease = after;
  return NULL;
}

tsr_status_t tsr_lease_service_resize(tsr_lease_service_t *s, uint64_t id, const tsr_lease_actor_t *actor,
                                      uint32_t fraction_ppm, uint32_t sm_ppm, tsr_lease_t *out_lease) {
  const tsr_lease_t *live = tsr_lease_table_find(s->table, id);
  tsr_lease_t before = live ? *live : (tsr_lease_t){0}, after;
  TSR_RETURN_IF_ERROR(tsr_lease_table_check_resize(s->table, id, actor, fraction_ppm, sm_ppm, &after));
  char old_name[128], new_name[128];
  tsr_lease_lockfile_name(&before, old_name, sizeof(old_name));
  tsr_lease_lockfile_name(&after, new_name, sizeof(new_name));
  bool renamed = strcmp(old_name, new_name) != 0;
  tsr_status_t st = tsr_lease_store_put(s->store, &after);
  if (!st && renamed && (st = tsr_lease_store_remove(s->store, &before))) {
    tsr_status_t undo = tsr_lease_store_remove(s->store, &after);
    if (undo)
      tsr_log_error("lease %llu: two lock files (%s, %s); a restart keeps one: %s", (unsigned long long)id, old_name,
                    new_name, tsr_status_message(undo));
    tsr_status_free(undo);
  }
  if (st) return tsr_status_annotate(st, "lease %llu not resized", (unsigned long long)id);
  /* cannot fail: the check above ran on this very table, and nothing ran since */
  st = tsr_lease_table_resize(s->table, id, actor, fraction_ppm, sm_ppm, &after);
  if (st) {
    tsr_log_error("lease %llu: its lock file says the new size, the table the old one: %s", (unsigned long long)id,
                  tsr_status_message(st));
    return st;
  }
  if (s->hooks.resized) s->hooks.resized(s->hooks.ctx, &after, &before, actor);
  if (out_lease) *out_lease = after;
  return NULL;
}

size_t tsr_lease_service_expire(tsr_lease_service_t *s, tsr_lease_now_t now, tsr_lease_ended_fn ended, void *ctx,
                                bool *out_stuck) {
  size_t n = 0;
  if (out_stuck) *out_stuck = false;
  tsr_lease_t due;
  while (tsr_lease_table_peek_expired(s->table, now.mono_ns, &due)) {
    tsr_status_t st = tsr_lease_store_remove(s->store, &due);
    if (st) {
      /* keep it active (its file is still there) and retry at the next call */
      tsr_log_error("lease %llu expired but its lock file stays: %s", (unsigned long long)due.id,
                    tsr_status_message(st));
      tsr_status_free(st);
      if (out_stuck) *out_stuck = true;
      break;
    }
    tsr_lease_t done;
    st = tsr_lease_table_remove(s->table, due.id, TSR_LEASE_EXPIRED, now, &done);
    if (st) { /* cannot happen: peek just found it */
      tsr_status_free(st);
      break;
    }
    n++;
    if (ended) ended(ctx, &done);
  }
  return n;
}

tsr_status_t tsr_lease_service_sync(tsr_lease_service_t *s) { return tsr_lease_store_sync(s->store); }

const tsr_lease_table_t *tsr_lease_service_table(const tsr_lease_service_t *s) { return s->table; }
