/* handlers.c: one function per protocol op (see docs/protocol.md).
 *
 * A request line is scanned once (base/json.h) and read with the op's reader
 * (proto/requests.h, where every op's fields are spelled, beside the
 * writers the clients use); each op then writes its reply's members into
 * the open reply object. Each request is checked before anything changes:
 * the op must be known, every field must be one the op takes, with the
 * right type and range. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/json.h"
#include "base/log.h"
#include "base/time.h"
#include "base/units.h"
#include "daemon/audit.h"
#include "daemon/backstop.h"
#include "daemon/daemon.h"
#include "daemon/enforce.h"
#include "daemon/handlers.h"
#include "daemon/identity.h"
#include "daemon/procs.h"
#include "daemon/regions.h"
#include "daemon/roots.h"
#include "daemon/top.h"
#include "daemon/waits.h"
#include "proto/proto.h"
#include "proto/requests.h"

#define TSR__MEMBERS_MAX 16 /* more than any op takes with "op" and "req" */

/* One scanned request. */
typedef struct {
  const tsr_json_member_t *m;
  size_t n;
} tsr__req_t;

typedef void (*tsr__op_fn)(tsr_daemon_t *d, const tsr_identity_t *who, tsr__req_t req, tsr_json_writer_t *w);

static void tsr__ok(tsr_json_writer_t *w) { tsr_json_key_bool(w, "ok", true); }

/* A refused or failed request (the lease rules, or a lock file, region or
 * audit line the lease service could not make): audited as a deny, then
 * written with the status's code. Frees `st`. */
static void tsr__status_reply(tsr_daemon_t *d, const tsr_identity_t *who, const char *op, tsr_status_t st,
                              tsr_json_writer_t *w) {
  const char *code = tsr_status_code_name(tsr_status_code(st));
  tsr_audit_deny(d->audit, who, op, code, tsr_status_message(st), tsr_time_mono_ns());
  tsr_proto_error_write(w, code, "%s", tsr_status_message(st));
  tsr_status_free(st);
}

static uint64_t tsr__now_wall(void) { return tsr_time_wall_ns(); }

static tsr_lease_now_t tsr__now(void) {
  tsr_lease_now_t n = {tsr_time_mono_ns(), tsr_time_wall_ns()};
  return n;
}

static tsr_lease_actor_t tsr__actor(const tsr_identity_t *who) {
  tsr_lease_actor_t a = {who->uid, who->user, who->admin, who->pid};
  return a;
}

/* Writes lease `l`, with what its processes use when it has a region. */
static void tsr__lease_write(tsr_daemon_t *d, tsr_json_writer_t *w, const tsr_lease_t *lease, uint64_t now_wall_ns) {
  tsr_lease_t shown = *lease; /* with the actions in effect: the lease's, or the node's */
  shown.on_expiry = tsr_daemon_action_of(d, lease);
  shown.over_limit = tsr_daemon_over_limit_of(d, lease);
  const tsr_lease_t *l = &shown;
  tsr_region_stats_t s;
  if (l->state != TSR_LEASE_ACTIVE || !tsr_regions_stats(d->regions, l->id, &s)) {
    tsr_proto_lease_write(w, l, now_wall_ns);
    return;
  }
  /* the counters are the tenants' report, clamped (tsr_regions_stats); the
   * state, the share in force and what NVML measured are the daemon's */
  tsr_proto_lease_usage_t u = {.used_bytes = s.used_bytes,
                               .peak_bytes = s.peak_bytes,
                               .denied = s.denied,
                               .processes = s.processes,
                               .revoked = tsr_regions_revoked(d->regions, l->id),
                               .tampered = tsr_regions_tampered(d->regions, l->id),
                               .gpu_ns = s.gpu_ns,
                               .throttled_ns = s.throttled_ns,
                               .launches = s.launches,
                               .bypassed = s.bypassed,
                               .sm_now_ppm = s.sm_now_ppm};
  u.gpu_known = tsr_backstop_lease_used(d->backstop, l->id, &u.gpu_bytes);
  char name[64];
  tsr_region_file_name(l->id, name, sizeof(name));
  snprintf(u.region, sizeof(u.region), "%s/%s", tsr_regions_dir(d->regions), name);
  tsr_proto_lease_write_usage(w, l, now_wall_ns, &u);
}

void tsr_daemon_lease_write(tsr_daemon_t *d, tsr_json_writer_t *w, const tsr_lease_t *lease, uint64_t now_wall_ns) {
  tsr__lease_write(d, w, lease, now_wall_ns);
}

/* ---- ops ---------------------------------------------------------------- */

static void tsr__hello(tsr_daemon_t *d, const tsr_identity_t *who, tsr__req_t req, tsr_json_writer_t *w) {
  (void)d;
  (void)req;
  tsr__ok(w);
  tsr_json_key_string(w, "version", TESSERA_VERSION);
  tsr_json_key_u64(w, "protocol", TSR_PROTO_VERSION);
  tsr_json_key_u64(w, "uid", who->uid);
  tsr_json_key_string(w, "user", who->user);
  tsr_json_key_bool(w, "admin", who->admin);
}

static void tsr__devices(tsr_daemon_t *d, const tsr_identity_t *who, tsr__req_t req, tsr_json_writer_t *w) {
  (void)who;
  (void)req;
  const tsr_lease_table_t *t = tsr_lease_service_table(d->leases);
  tsr__ok(w);
  tsr_json_key(w, "devices");
  tsr_json_array_begin(w);
  for (uint32_t i = 0; i < tsr_lease_table_device_count(t); i++) {
    uint32_t n = 0;
    for (size_t j = 0; j < tsr_lease_table_count(t); j++)
      if (tsr_lease_table_at(t, j)->device == i) n++;
    tsr_proto_device_write(w, tsr_lease_table_device(t, i), tsr_lease_table_available_bytes(t, i),
                           tsr_lease_table_sm_committed(t, i), n);
  }
  tsr_json_array_end(w);
}

/* The reply to a call that changes a lease: the refusal (audited), or the
 * lease as it now is. */
static void tsr__lease_reply(tsr_daemon_t *d, const tsr_identity_t *who, const char *op, tsr_status_t st,
                             const tsr_lease_t *lease, uint64_t now_wall_ns, tsr_json_writer_t *w) {
  if (st) {
    tsr__status_reply(d, who, op, st, w);
    return;
  }
  tsr__ok(w);
  tsr_json_key(w, "lease");
  tsr__lease_write(d, w, lease, now_wall_ns);
}

/* A request whose fields do not read: refused and audited. */
static void tsr__invalid(tsr_daemon_t *d, const tsr_identity_t *who, const char *op, const char *why,
                         tsr_json_writer_t *w) {
  tsr_audit_deny(d->audit, who, op, "invalid_argument", why, tsr_time_mono_ns());
  tsr_proto_error_write(w, "invalid_argument", "%s", why);
}

static void tsr__create(tsr_daemon_t *d, const tsr_identity_t *who, tsr__req_t req, tsr_json_writer_t *w) {
  char why[160];
  tsr_proto_create_t c;
  if (!tsr_proto_create_read(req.m, req.n, &c, why, sizeof(why))) {
    tsr__invalid(d, who, "lease.create", why, w);
    return;
  }
  tsr_lease_request_t r = {.device = c.device,
                           .fraction_ppm = c.fraction_ppm,
                           .sm_ppm = c.sm_ppm,
                           .duration_ns = c.duration_ns,
                           .job = c.job,
                           .over_limit = c.over_limit,
                           /* absent: the node's on_expiry; over_limit DEFAULT: the node's whenever
                            * the backstop acts */
                           .on_expiry = c.on_expiry != TSR_LEASE_ACTION_DEFAULT ? c.on_expiry : d->config.on_expiry};
  char target[TSR_LEASE_NAME_MAX];
  if (c.has_user) {
    tsr_status_t st = tsr_identity_lookup_user(c.user, &r.target_uid, target, sizeof(target));
    if (st) {
      const char *code = tsr_status_code(st) == TSR_NOT_FOUND ? TSR_PROTO_ERR_UNKNOWN_USER : "invalid_argument";
      tsr_audit_deny(d->audit, who, "lease.create", code, tsr_status_message(st), tsr_time_mono_ns());
      tsr_proto_error_write(w, code, "%s", tsr_status_message(st));
      tsr_status_free(st);
      return;
    }
    r.has_target = true;
    r.target_name = target;
  }
  tsr_lease_actor_t actor = tsr__actor(who);
  tsr_lease_t lease = {0}; /* filled by a call that succeeds; the reply uses it only then */
  const tsr_json_member_t *tag = tsr_json_find(req.m, req.n, "req");
  bool queued = false;
  tsr_status_t st = tsr_daemon_waits_create(d, &r, &actor, c.wait_ns, tag ? tag->value : NULL, tag ? tag->value_len : 0,
                                            w, &queued, &lease);
  if (!queued) tsr__lease_reply(d, who, "lease.create", st, &lease, lease.start_wall_ns, w);
}

/* The request's lease "id"; false (with the error written) if it has none
 * or a bad one. */
static bool tsr__lease_id(tsr__req_t req, tsr_json_writer_t *w, uint64_t *out_id) {
  char why[160];
  if (tsr_proto_id_read(req.m, req.n, out_id, why, sizeof(why))) return true;
  tsr_proto_error_write(w, "invalid_argument", "%s", why);
  return false;
}

/* lease.release of a create that waits: withdrawn (its owner, its asker or
 * an admin); its waiting client is answered `cancelled`. */
static void tsr__withdraw(tsr_daemon_t *d, const tsr_identity_t *who, const tsr_lease_wait_t *wait,
                          tsr_json_writer_t *w) {
  if (wait->owner_uid != who->uid && wait->actor.uid != who->uid && !who->admin) {
    tsr__status_reply(d, who, "lease.release",
                      tsr_status_make(TSR_PERMISSION_DENIED, "request %llu belongs to %s", (unsigned long long)wait->id,
                                      wait->actor_name),
                      w);
    return;
  }
  tsr__ok(w);
  tsr_json_key(w, "withdrawn");
  tsr_daemon_waits_write(d, w, wait); /* before it goes: its place as it was */
  tsr_daemon_waits_withdraw(d, wait->id, who);
}

static void tsr__release(tsr_daemon_t *d, const tsr_identity_t *who, tsr__req_t req, tsr_json_writer_t *w) {
  uint64_t id = 0;
  if (!tsr__lease_id(req, w, &id)) return;
  const tsr_lease_wait_t *wait = tsr_lease_queue_find(d->waits.queue, id);
  if (wait) {
    tsr__withdraw(d, who, wait, w);
    return;
  }
  tsr_lease_actor_t actor = tsr__actor(who);
  tsr_lease_t lease = {0}; /* filled by a call that succeeds; the reply uses it only then */
  tsr_status_t st = tsr_lease_service_release(d->leases, id, &actor, tsr__now(), &lease);
  if (st) {
    if (tsr_status_code(st) == TSR_NOT_FOUND) {
      /* say what happened to it, if we still know */
      for (size_t i = 0; i < d->history_count; i++)
        if (d->history[i].id == id) {
          tsr_status_free(st);
          st = tsr_status_make(TSR_NOT_FOUND, "lease %llu already %s", (unsigned long long)id,
                               tsr_proto_lease_state_name(d->history[i].state));
          break;
        }
    }
  }
  tsr__lease_reply(d, who, "lease.release", st, &lease, lease.ended_wall_ns, w);
}

static void tsr__list(tsr_daemon_t *d, const tsr_identity_t *who, tsr__req_t req, tsr_json_writer_t *w) {
  char why[160];
  tsr_proto_list_t q;
  if (!tsr_proto_list_read(req.m, req.n, &q, why, sizeof(why))) {
    tsr_proto_error_write(w, "invalid_argument", "%s", why);
    return;
  }
  if (q.queued) {
    tsr_daemon_waits_list(d, who, q.all, q.job, w);
    return;
  }
  bool everyone = q.all;
  uint64_t after = q.after, limit = q.limit;
  const char *job = q.job;
  const tsr_lease_table_t *t = tsr_lease_service_table(d->leases);
  uint64_t now = tsr__now_wall();
  tsr__ok(w);
  tsr_json_key(w, "leases");
  tsr_json_array_begin(w);
  /* leases are in id order: find the first after `after`, then one page */
  size_t lo = 0, hi = tsr_lease_table_count(t);
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (tsr_lease_table_at(t, mid)->id <= after)
      lo = mid + 1;
    else
      hi = mid;
  }
  /* an ordinary user sees her own leases; of others', only how many there
   * are and what they hold (admins see every lease) */
  bool details = who->admin;
  uint64_t written = 0, last = 0;
  size_t i = lo;
  for (; i < tsr_lease_table_count(t) && written < limit; i++) {
    const tsr_lease_t *l = tsr_lease_table_at(t, i);
    if ((!everyone || !details) && l->owner_uid != who->uid) continue;
    if (job[0] && strcmp(l->job, job) != 0) continue;
    tsr__lease_write(d, w, l, now);
    written++;
    last = l->id;
  }
  tsr_json_array_end(w);
  if (written == limit && i < tsr_lease_table_count(t)) tsr_json_key_u64(w, "next", last);
  if (everyone && !details) {
    uint64_t n = 0, bytes = 0;
    for (size_t k = 0; k < tsr_lease_table_count(t); k++) {
      const tsr_lease_t *l = tsr_lease_table_at(t, k);
      if (l->owner_uid == who->uid || (job[0] && strcmp(l->job, job) != 0)) continue;
      n++;
      bytes += l->bytes;
    }
    tsr_json_key(w, "others");
    tsr_json_object_begin(w);
    tsr_json_key_u64(w, "leases", n);
    tsr_json_key_u64(w, "bytes", bytes);
    tsr_json_object_end(w);
  }
}

static void tsr__show(tsr_daemon_t *d, const tsr_identity_t *who, tsr__req_t req, tsr_json_writer_t *w) {
  uint64_t id = 0;
  if (!tsr__lease_id(req, w, &id)) return;
  const tsr_lease_t *l = tsr_lease_table_find(tsr_lease_service_table(d->leases), id);
  for (size_t i = 0; !l && i < d->history_count; i++)
    if (d->history[i].id == id) l = &d->history[i];
  if (!l && tsr_lease_queue_find(d->waits.queue, id)) {
    tsr_proto_error_write(w, "not_found",
                          "no lease %llu yet: it is a request waiting for capacity (lease list --queued)",
                          (unsigned long long)id);
    return;
  }
  if (!l) {
    tsr_proto_error_write(w, "not_found", "no lease %llu", (unsigned long long)id);
    return;
  }
  if (l->owner_uid != who->uid && !who->admin) { /* not her lease: no details */
    tsr__status_reply(
        d, who, "lease.show",
        tsr_status_make(TSR_PERMISSION_DENIED, "lease %llu is another user's: only its owner and admins see it",
                        (unsigned long long)id),
        w);
    return;
  }
  tsr__ok(w);
  tsr_json_key(w, "lease");
  tsr__lease_write(d, w, l, tsr__now_wall());
}

/* Registers the caller's process as a root of the lease: every process it
 * starts from now on belongs to the lease (the backstop's attribution, a
 * `signal` action). The pid is the kernel's (SO_PEERCRED), never the
 * client's word. */
static void tsr__attach(tsr_daemon_t *d, const tsr_identity_t *who, tsr__req_t req, tsr_json_writer_t *w) {
  uint64_t id = 0;
  if (!tsr__lease_id(req, w, &id)) return;
  const tsr_lease_t *l = tsr_lease_table_find(tsr_lease_service_table(d->leases), id);
  tsr_status_t st = NULL;
  uint64_t start = 0;
  if (!l)
    st = tsr_status_make(TSR_NOT_FOUND, "no active lease %llu", (unsigned long long)id);
  else if (l->owner_uid != who->uid && !who->admin)
    st = tsr_status_make(TSR_PERMISSION_DENIED, "lease %llu is not yours", (unsigned long long)id);
  else if (who->pid <= 0 || !tsr_procs_start_of(who->pid, &start))
    st = tsr_status_make(TSR_FAILED_PRECONDITION, "the calling process cannot be seen from the daemon (pid %d)",
                         who->pid);
  else
    st = tsr_roots_add(&d->roots, id, who->pid, start);
  if (st) {
    tsr__status_reply(d, who, "lease.attach", st, w);
    return;
  }
  tsr_log_debug("lease %llu: pid %d (uid %u) attached", (unsigned long long)id, who->pid, who->uid);
  tsr__ok(w);
  tsr_json_key(w, "lease");
  tsr__lease_write(d, w, l, tsr__now_wall());
  tsr_json_key(w, "pid");
  tsr_json_i64(w, who->pid);
}

/* A new deadline for a lease: `duration_ns` from now, or `until_ns`. */
static void tsr__renew(tsr_daemon_t *d, const tsr_identity_t *who, tsr__req_t req, tsr_json_writer_t *w) {
  char why[160];
  tsr_proto_renew_t r;
  if (!tsr_proto_renew_read(req.m, req.n, &r, why, sizeof(why))) {
    tsr__invalid(d, who, "lease.renew", why, w);
    return;
  }
  tsr_lease_now_t now = tsr__now();
  uint64_t deadline = r.until_ns ? r.until_ns : tsr_time_add_sat(now.wall_ns, r.duration_ns);
  tsr_lease_actor_t actor = tsr__actor(who);
  tsr_lease_t lease = {0}; /* filled by a call that succeeds; the reply uses it only then */
  tsr_status_t st = tsr_lease_service_renew(d->leases, r.id, &actor, deadline, now, &lease);
  tsr__lease_reply(d, who, "lease.renew", st, &lease, now.wall_ns, w);
}

/* What lease `l`'s processes hold now: the most of what they report in its
 * region (clamped, tsr_regions_stats) and what NVML measured of them. */
static uint64_t tsr__held_bytes(tsr_daemon_t *d, const tsr_lease_t *l) {
  uint64_t held = 0, gpu = 0;
  tsr_region_stats_t s;
  if (tsr_regions_stats(d->regions, l->id, &s)) held = s.used_bytes;
  if (tsr_backstop_lease_used(d->backstop, l->id, &gpu) && gpu > held) held = gpu;
  return held;
}

/* New memory and/or SM share for a lease. A grow needs the room, checked
 * and taken in one step (the lease service); a shrink below what the
 * lease's processes hold is refused unless forced, which applies the new
 * limit and leaves the rest to the over-limit action. */
static void tsr__resize(tsr_daemon_t *d, const tsr_identity_t *who, tsr__req_t req, tsr_json_writer_t *w) {
  char why[160];
  tsr_proto_resize_t r;
  if (!tsr_proto_resize_read(req.m, req.n, &r, why, sizeof(why))) {
    tsr__invalid(d, who, "lease.resize", why, w);
    return;
  }
  tsr_lease_actor_t actor = tsr__actor(who);
  uint32_t sm = r.has_sm ? r.sm_ppm : TSR_LEASE_SM_UNCHANGED;
  tsr_lease_t before = {0}, after = {0};
  tsr_status_t st = tsr_lease_table_authorize_release(tsr_lease_service_table(d->leases), r.id, &actor, &before);
  if (!st && r.has_sm && (before.sm_ppm == 0) != (r.sm_ppm == 0))
    /* a process that started without a share never waits for one, and one
     * with a share keeps its stream buckets: a share changes, it does not
     * come or go */
    st = tsr_status_make(TSR_FAILED_PRECONDITION,
                         before.sm_ppm ? "lease %llu has an SM share: it can change (more than 0), not be removed"
                                       : "lease %llu has no SM share: one cannot be added to it (create a lease "
                                         "with --sm)",
                         (unsigned long long)r.id);
  if (!st)
    st = tsr_lease_table_check_resize(tsr_lease_service_table(d->leases), r.id, &actor, r.fraction_ppm, sm, &after);
  bool grows = after.bytes > before.bytes || after.sm_ppm > before.sm_ppm;
  size_t waiting = 0;
  tsr_daemon_waits_run(d); /* what waits goes first */
  if (!st && grows && !who->admin &&
      tsr_lease_queue_holds_back(d->waits.queue, tsr_lease_service_table(d->leases), tsr__now(), before.device,
                                 before.deadline_mono_ns, &waiting))
    /* a grow is a request for more of the device: it may not go ahead of
     * the creates that wait for it, as a new create may not */
    st = tsr_status_make(TSR_RESOURCE_EXHAUSTED,
                         "device %u has %zu request%s waiting for its room; growing lease %llu until its deadline "
                         "would go ahead of them (shrink it, or grow it when they are granted)",
                         before.device, waiting, waiting == 1 ? "" : "s", (unsigned long long)r.id);
  if (!st && after.bytes < before.bytes && !r.force) {
    uint64_t held = tsr__held_bytes(d, &before);
    if (held > after.bytes) {
      char h[32], lim[32];
      tsr_format_size(held, h, sizeof(h));
      tsr_format_size(after.bytes, lim, sizeof(lim));
      st = tsr_status_make(TSR_FAILED_PRECONDITION,
                           "lease %llu's processes hold %s (%llu bytes), more than the new limit %s (%llu bytes): "
                           "free some first, or resize with --force (the lease's over-limit action then applies)",
                           (unsigned long long)r.id, h, (unsigned long long)held, lim, (unsigned long long)after.bytes);
    }
  }
  if (!st) st = tsr_lease_service_resize(d->leases, r.id, &actor, r.fraction_ppm, sm, &after);
  tsr__lease_reply(d, who, "lease.resize", st, &after, tsr__now_wall(), w);
}

/* The node at a glance (`tessera top`): any local user may ask; she sees
 * her own leases and processes, and of others' only counts (admins see
 * all). */
static void tsr__top(tsr_daemon_t *d, const tsr_identity_t *who, tsr__req_t req, tsr_json_writer_t *w) {
  (void)req;
  tsr_daemon_top(d, who, w);
}

/* Each op's handler, by its number (proto/requests.h). */
static const tsr__op_fn tsr__ops[TSR_PROTO_OP_COUNT] = {
    [TSR_PROTO_HELLO] = tsr__hello,         [TSR_PROTO_DEVICES] = tsr__devices,
    [TSR_PROTO_LEASE_CREATE] = tsr__create, [TSR_PROTO_LEASE_RELEASE] = tsr__release,
    [TSR_PROTO_LEASE_LIST] = tsr__list,     [TSR_PROTO_LEASE_SHOW] = tsr__show,
    [TSR_PROTO_LEASE_ATTACH] = tsr__attach, [TSR_PROTO_TOP] = tsr__top,
    [TSR_PROTO_LEASE_RENEW] = tsr__renew,   [TSR_PROTO_LEASE_RESIZE] = tsr__resize,
};

void tsr_daemon_handle(tsr_daemon_t *d, const tsr_identity_t *who, const char *line, size_t len, tsr_json_writer_t *w) {
  d->requests++;
  tsr_json_member_t m[TSR__MEMBERS_MAX];
  size_t n = 0;
  tsr_json_error_t err;
  tsr_json_object_begin(w);
  if (!tsr_json_scan_object(line, len, m, TSR__MEMBERS_MAX, &n, &err)) {
    if (strcmp(err.message, "expected a JSON object") == 0)
      tsr_proto_error_write(w, TSR_PROTO_ERR_BAD_REQUEST, "a request must be a JSON object");
    else
      tsr_proto_error_write(w, TSR_PROTO_ERR_BAD_REQUEST, "malformed JSON at byte %zu: %s", err.offset + 1,
                            err.message);
    tsr_json_object_end(w);
    return;
  }
  tsr__req_t req = {m, n};
  tsr_proto_op_t op;
  const char *code;
  char why[160];
  if (tsr_proto_request_check(m, n, &op, &code, why, sizeof(why)))
    tsr__ops[op](d, who, req, w);
  else
    tsr_proto_error_write(w, code, "%s", why);
  const tsr_json_member_t *tag = tsr_json_find(m, n, "req");
  if (tag) {
    tsr_json_key(w, "req");
    tsr_json_raw(w, tag->value, tag->value_len);
  }
  tsr_json_object_end(w);
}

void tsr_daemon_remember(tsr_daemon_t *d, const tsr_lease_t *lease) {
  d->history[d->history_next] = *lease;
  d->history_next = (d->history_next + 1) % TSR_HISTORY_MAX;
  if (d->history_count < TSR_HISTORY_MAX) d->history_count++;
}

static void tsr__on_expired(void *ctx, const tsr_lease_t *lease) {
  tsr_daemon_t *d = ctx;
  tsr_daemon_lease_ended(d, lease, TSR_REGION_EXPIRED); /* allocations fail from now on */
  tsr_audit_expiry_t e = {0};
  if (lease->deadline_wall_ns < d->started_wall_ns) {
    /* it fell due while no daemon ran: the monotonic deadline was rebuilt as
     * "now", so only the wall clock knows how late this is */
    e.during_downtime = true;
    e.late_ns = tsr_time_sub_sat(tsr_time_wall_ns(), lease->deadline_wall_ns);
  } else {
    e.late_ns = tsr_time_sub_sat(tsr_time_mono_ns(), lease->deadline_mono_ns);
  }
  tsr_status_t st = tsr_audit_lease(d->audit, "expire", NULL, lease, &e);
  if (st) { /* a deadline is kept whatever the disk says; the log says so */
    tsr_log_error("lease %llu expired without an audit line: %s", (unsigned long long)lease->id,
                  tsr_status_message(st));
    tsr_status_free(st);
  }
  tsr_daemon_remember(d, lease);
  d->expired++;
  if (e.during_downtime)
    tsr_log_info("lease %llu of %s expired during downtime (%.3f s after its deadline)", (unsigned long long)lease->id,
                 lease->owner, (double)e.late_ns / 1e9);
  else
    tsr_log_info("lease %llu of %s expired (%.3f ms after its deadline)", (unsigned long long)lease->id, lease->owner,
                 (double)e.late_ns / 1e6);
}

bool tsr_daemon_expire(tsr_daemon_t *d) {
  bool stuck = false;
  tsr_lease_service_expire(d->leases, tsr__now(), tsr__on_expired, d, &stuck);
  return stuck;
}
