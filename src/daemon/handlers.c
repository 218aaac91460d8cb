/* handlers.c: one function per protocol op (see docs/protocol.md).
 *
 * A request line is scanned once (base/json.h); each op reads its members
 * and writes its reply's members into the open reply object. Each request is
 * checked before anything changes: the op must be known, every field must be
 * one the op takes, with the right type and range. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/json.h"
#include "base/log.h"
#include "base/time.h"
#include "base/units.h"
#include "daemon/daemon.h"
#include "proto/proto.h"

#define TSR__MEMBERS_MAX 16 /* more than any op takes with "op" and "req" */

/* One scanned request. */
typedef struct {
  const tsr_json_member_t *m;
  size_t n;
} tsr__req_t;

typedef void (*tsr__op_fn)(tsr_daemon_t *d, const tsr_identity_t *who, tsr__req_t req,
                           tsr_json_writer_t *w);

typedef struct {
  const char *name;
  tsr__op_fn fn;
  const char *fields[10]; /* besides "op" and "req" */
} tsr__op_t;

static void tsr__ok(tsr_json_writer_t *w) {
  tsr_json_key_bool(w, "ok", true);
}

/* A refusal from the lease rules: audited, then written. Frees `st`. */
static void tsr__status_reply(tsr_daemon_t *d, const tsr_identity_t *who, const char *op,
                              tsr_status_t st, tsr_json_writer_t *w) {
  const char *code = tsr_status_code_name(tsr_status_code(st));
  tsr_audit_deny(d->audit, who, op, code, tsr_status_message(st), tsr_time_mono_ns());
  tsr_proto_error_write(w, code, "%s", tsr_status_message(st));
  tsr_status_free(st);
}

/* A failure that is not a refusal (the disk, memory): written with the
 * status's own code after `what` ("lease 3 not released"), not audited as a
 * deny. Frees `st`. */
static void tsr__failure_reply(tsr_json_writer_t *w, const char *what, tsr_status_t st) {
  tsr_proto_error_write(w, tsr_status_code_name(tsr_status_code(st)), "%s: %s", what,
                        tsr_status_message(st));
  tsr_status_free(st);
}

/* Reads a non-negative integer field no larger than max. False, with the
 * error written into `why`, if it is missing (and required) or wrong. */
static bool tsr__field_u64(tsr__req_t req, const char *key, uint64_t max, bool required,
                           uint64_t *out, char *why, size_t why_cap) {
  const tsr_json_member_t *v = tsr_json_find(req.m, req.n, key);
  if (!v) {
    if (required) snprintf(why, why_cap, "missing field '%s'", key);
    return !required;
  }
  uint64_t x;
  if (!tsr_json_get_u64(v, &x) || x > max) {
    snprintf(why, why_cap, "field '%s' must be an integer in [0, %llu]", key, (unsigned long long)max);
    return false;
  }
  *out = x;
  return true;
}

/* Reads the optional job id field into `job` ("" when absent). False, with
 * the error in `why`, if it is not one (tsr_lease_job_ok). */
static bool tsr__field_job(tsr__req_t req, char job[TSR_LEASE_JOB_MAX + 1], char *why, size_t why_cap) {
  job[0] = '\0';
  const tsr_json_member_t *v = tsr_json_find(req.m, req.n, "job");
  if (v && (!tsr_json_get_string(v, job, TSR_LEASE_JOB_MAX + 1) || !tsr_lease_job_ok(job))) {
    snprintf(why, why_cap, "field 'job' must be 1 to %d letters, digits and . _ : @ + -", TSR_LEASE_JOB_MAX - 1);
    return false;
  }
  return true;
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
static void tsr__lease_write(tsr_daemon_t *d, tsr_json_writer_t *w, const tsr_lease_t *lease,
                             uint64_t now_wall_ns) {
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
  tsr_proto_lease_usage_t u = {.used_bytes = s.used_bytes, .peak_bytes = s.peak_bytes,
                               .denied = s.denied, .processes = s.processes,
                               .revoked = tsr_regions_revoked(d->regions, l->id),
                               .tampered = tsr_regions_tampered(d->regions, l->id),
                               .gpu_ns = s.gpu_ns, .throttled_ns = s.throttled_ns,
                               .launches = s.launches, .bypassed = s.bypassed,
                               .sm_now_ppm = s.sm_now_ppm};
  u.gpu_known = tsr_backstop_lease_used(d->backstop, l->id, &u.gpu_bytes);
  char name[64];
  tsr_region_file_name(l->id, name, sizeof(name));
  snprintf(u.region, sizeof(u.region), "%s/%s", tsr_regions_dir(d->regions), name);
  tsr_proto_lease_write_usage(w, l, now_wall_ns, &u);
}

/* ---- ops ---------------------------------------------------------------- */

static void tsr__hello(tsr_daemon_t *d, const tsr_identity_t *who, tsr__req_t req,
                       tsr_json_writer_t *w) {
  (void)d;
  (void)req;
  tsr__ok(w);
  tsr_json_key_string(w, "version", TESSERA_VERSION);
  tsr_json_key_u64(w, "protocol", TSR_PROTO_VERSION);
  tsr_json_key_u64(w, "uid", who->uid);
  tsr_json_key_string(w, "user", who->user);
  tsr_json_key_bool(w, "admin", who->admin);
}

static void tsr__devices(tsr_daemon_t *d, const tsr_identity_t *who, tsr__req_t req,
                         tsr_json_writer_t *w) {
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

static void tsr__create(tsr_daemon_t *d, const tsr_identity_t *who, tsr__req_t req,
                        tsr_json_writer_t *w) {
  char why[160];
  uint64_t device = 0, fraction = 0, duration = 0, sm = 0;
  if (!tsr__field_u64(req, "device", UINT32_MAX, true, &device, why, sizeof(why)) ||
      !tsr__field_u64(req, "fraction_ppm", TSR_PPM_ONE, true, &fraction, why, sizeof(why)) ||
      !tsr__field_u64(req, "duration_ns", INT64_MAX, true, &duration, why, sizeof(why)) ||
      !tsr__field_u64(req, "sm_ppm", TSR_PPM_ONE, false, &sm, why, sizeof(why))) {
    tsr_audit_deny(d->audit, who, "lease.create", "invalid_argument", why, tsr_time_mono_ns());
    tsr_proto_error_write(w, "invalid_argument", "%s", why);
    return;
  }
  tsr_lease_request_t r = {.device = (uint32_t)device, .fraction_ppm = (uint32_t)fraction,
                           .sm_ppm = (uint32_t)sm, .duration_ns = duration,
                           .on_expiry = d->config.on_expiry};
  const tsr_json_member_t *action = tsr_json_find(req.m, req.n, "on_expiry");
  if (action) {
    char name[16];
    if (!tsr_json_get_string(action, name, sizeof(name)) ||
        !tsr_lease_action_parse(name, &r.on_expiry)) {
      snprintf(why, sizeof(why), "field 'on_expiry' must be \"revoke\" or \"signal\"");
      tsr_audit_deny(d->audit, who, "lease.create", "invalid_argument", why, tsr_time_mono_ns());
      tsr_proto_error_write(w, "invalid_argument", "%s", why);
      return;
    }
  }
  /* absent: DEFAULT, the node's over_limit whenever the backstop acts */
  const tsr_json_member_t *over = tsr_json_find(req.m, req.n, "over_limit");
  if (over) {
    char name[16];
    if (!tsr_json_get_string(over, name, sizeof(name)) ||
        !tsr_lease_over_limit_parse(name, &r.over_limit)) {
      snprintf(why, sizeof(why), "field 'over_limit' must be \"signal\" or \"log\"");
      tsr_audit_deny(d->audit, who, "lease.create", "invalid_argument", why, tsr_time_mono_ns());
      tsr_proto_error_write(w, "invalid_argument", "%s", why);
      return;
    }
  }
  char job[TSR_LEASE_JOB_MAX + 1];
  if (!tsr__field_job(req, job, why, sizeof(why))) {
    tsr_audit_deny(d->audit, who, "lease.create", "invalid_argument", why, tsr_time_mono_ns());
    tsr_proto_error_write(w, "invalid_argument", "%s", why);
    return;
  }
  r.job = job;
  char target[TSR_LEASE_NAME_MAX];
  const tsr_json_member_t *user = tsr_json_find(req.m, req.n, "user");
  if (user) {
    char name[256];
    if (!tsr_json_get_string(user, name, sizeof(name))) {
      tsr_proto_error_write(w, "invalid_argument", "field 'user' must be a user name");
      return;
    }
    tsr_status_t st = tsr_identity_lookup_user(name, &r.target_uid, target, sizeof(target));
    if (st) {
      const char *code = tsr_status_code(st) == TSR_NOT_FOUND ? TSR_PROTO_ERR_UNKNOWN_USER
                                                              : "invalid_argument";
      tsr_audit_deny(d->audit, who, "lease.create", code, tsr_status_message(st),
                     tsr_time_mono_ns());
      tsr_proto_error_write(w, code, "%s", tsr_status_message(st));
      tsr_status_free(st);
      return;
    }
    r.has_target = true;
    r.target_name = target;
  }
  tsr_lease_actor_t actor = tsr__actor(who);
  tsr_lease_t lease;
  tsr_status_t st = tsr_lease_service_create(d->leases, &r, &actor, tsr__now(), &lease);
  if (st) {
    tsr__status_reply(d, who, "lease.create", st, w);
    return;
  }
  const tsr_lease_table_t *t = tsr_lease_service_table(d->leases);
  st = tsr_regions_add(d->regions, &lease, tsr_lease_table_device(t, lease.device));
  if (!st) {
    st = tsr_audit_lease(d->audit, "create", who, &lease, NULL);
    if (st) tsr_regions_end(d->regions, lease.id, TSR_REGION_RELEASED);
  }
  if (st) {
    /* no region or no audit line, no lease: take it back before anyone hears of it */
    tsr_lease_actor_t undo = {who->uid, who->user, true, who->pid};
    tsr_status_t ust = tsr_lease_service_release(d->leases, lease.id, &undo, tsr__now(), NULL);
    if (ust) {
      tsr_log_error("lease %llu stays (its audit line failed, and undoing it failed too: %s)",
                    (unsigned long long)lease.id, tsr_status_message(ust));
      tsr_status_free(ust);
    }
    tsr__failure_reply(w, "lease not created", st);
    return;
  }
  tsr_daemon_lease_created(d, &lease);
  tsr__ok(w);
  tsr_json_key(w, "lease");
  tsr__lease_write(d, w, &lease, lease.start_wall_ns);
}

/* The request's lease "id"; false (with the error written) if it has none
 * or a bad one. */
static bool tsr__lease_id(tsr__req_t req, tsr_json_writer_t *w, uint64_t *out_id) {
  char why[160];
  if (tsr__field_u64(req, "id", UINT64_MAX, true, out_id, why, sizeof(why))) return true;
  tsr_proto_error_write(w, "invalid_argument", "%s", why);
  return false;
}

static void tsr__release(tsr_daemon_t *d, const tsr_identity_t *who, tsr__req_t req,
                         tsr_json_writer_t *w) {
  uint64_t id = 0;
  if (!tsr__lease_id(req, w, &id)) return;
  tsr_lease_actor_t actor = tsr__actor(who);
  tsr_lease_t lease;
  tsr_status_t st =
      tsr_lease_table_authorize_release(tsr_lease_service_table(d->leases), id, &actor, &lease);
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
    tsr__status_reply(d, who, "lease.release", st, w);
    return;
  }
  /* the audit line first: if it cannot be written, nothing changes */
  char what[64];
  snprintf(what, sizeof(what), "lease %llu not released", (unsigned long long)id);
  st = tsr_audit_lease(d->audit, "release", who, &lease, NULL);
  if (st) {
    tsr__failure_reply(w, what, st);
    return;
  }
  st = tsr_lease_service_release(d->leases, id, &actor, tsr__now(), &lease);
  if (st) {
    tsr_log_error("lease %llu: audited as released, but its lock file stays: %s",
                  (unsigned long long)id, tsr_status_message(st));
    tsr__failure_reply(w, what, st);
    return;
  }
  tsr_daemon_lease_ended(d, &lease, TSR_REGION_RELEASED);
  tsr_daemon_remember(d, &lease);
  tsr__ok(w);
  tsr_json_key(w, "lease");
  tsr__lease_write(d, w, &lease, lease.ended_wall_ns);
}

static void tsr__list(tsr_daemon_t *d, const tsr_identity_t *who, tsr__req_t req,
                      tsr_json_writer_t *w) {
  char why[160];
  bool everyone = false;
  uint64_t after = 0, limit = TSR_PROTO_LIST_PAGE_MAX;
  const tsr_json_member_t *all = tsr_json_find(req.m, req.n, "all");
  if (all && !tsr_json_get_bool(all, &everyone)) {
    tsr_proto_error_write(w, "invalid_argument", "field 'all' must be true or false");
    return;
  }
  if (!tsr__field_u64(req, "after", UINT64_MAX, false, &after, why, sizeof(why)) ||
      !tsr__field_u64(req, "limit", TSR_PROTO_LIST_PAGE_MAX, false, &limit, why, sizeof(why))) {
    tsr_proto_error_write(w, "invalid_argument", "%s", why);
    return;
  }
  if (limit == 0) {
    tsr_proto_error_write(w, "invalid_argument", "field 'limit' must be in [1, %d]",
                          TSR_PROTO_LIST_PAGE_MAX);
    return;
  }
  char job[TSR_LEASE_JOB_MAX + 1];
  if (!tsr__field_job(req, job, why, sizeof(why))) {
    tsr_proto_error_write(w, "invalid_argument", "%s", why);
    return;
  }
  const tsr_lease_table_t *t = tsr_lease_service_table(d->leases);
  uint64_t now = tsr__now_wall();
  tsr__ok(w);
  tsr_json_key(w, "leases");
  tsr_json_array_begin(w);
  /* leases are in id order: find the first after `after`, then one page */
  size_t lo = 0, hi = tsr_lease_table_count(t);
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (tsr_lease_table_at(t, mid)->id <= after) lo = mid + 1;
    else hi = mid;
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

static void tsr__show(tsr_daemon_t *d, const tsr_identity_t *who, tsr__req_t req,
                      tsr_json_writer_t *w) {
  uint64_t id = 0;
  if (!tsr__lease_id(req, w, &id)) return;
  const tsr_lease_t *l = tsr_lease_table_find(tsr_lease_service_table(d->leases), id);
  for (size_t i = 0; !l && i < d->history_count; i++)
    if (d->history[i].id == id) l = &d->history[i];
  if (!l) {
    tsr_proto_error_write(w, "not_found", "no lease %llu", (unsigned long long)id);
    return;
  }
  if (l->owner_uid != who->uid && !who->admin) { /* not her lease: no details */
    tsr__status_reply(d, who, "lease.show",
                      tsr_status_make(TSR_PERMISSION_DENIED,
                                      "lease %llu is another user's: only its owner and admins see it",
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
static void tsr__attach(tsr_daemon_t *d, const tsr_identity_t *who, tsr__req_t req,
                        tsr_json_writer_t *w) {
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
    st = tsr_status_make(TSR_FAILED_PRECONDITION,
                         "the calling process cannot be seen from the daemon (pid %d)", who->pid);
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

/* The node at a glance (`tessera top`): any local user may ask; she sees
 * her own leases and processes, and of others' only counts (admins see
 * all). */
static void tsr__top(tsr_daemon_t *d, const tsr_identity_t *who, tsr__req_t req,
                     tsr_json_writer_t *w) {
  (void)req;
  tsr_daemon_top(d, who, w);
}

static const tsr__op_t tsr__ops[] = {
    {"hello", tsr__hello, {NULL}},
    {"devices", tsr__devices, {NULL}},
    {"lease.create", tsr__create,
     {"device", "fraction_ppm", "duration_ns", "sm_ppm", "user", "on_expiry", "over_limit", "job",
      NULL}},
    {"lease.release", tsr__release, {"id", NULL}},
    {"lease.list", tsr__list, {"all", "after", "limit", "job", NULL}},
    {"lease.show", tsr__show, {"id", NULL}},
    {"lease.attach", tsr__attach, {"id", NULL}},
    {"top", tsr__top, {NULL}},
};

/* Checks the request's envelope and picks its op; NULL with the error
 * written if there is none to run. */
static const tsr__op_t *tsr__dispatch(tsr__req_t req, tsr_json_writer_t *w) {
  char op[64];
  const tsr_json_member_t *opm = tsr_json_find(req.m, req.n, "op");
  if (!opm || opm->type != TSR_JSON_STRING) {
    tsr_proto_error_write(w, TSR_PROTO_ERR_BAD_REQUEST, "a request needs a string field 'op'");
    return NULL;
  }
  const tsr__op_t *o = NULL;
  bool named = tsr_json_get_string(opm, op, sizeof(op));
  for (size_t i = 0; named && i < sizeof(tsr__ops) / sizeof(tsr__ops[0]); i++)
    if (strcmp(tsr__ops[i].name, op) == 0) o = &tsr__ops[i];
  if (!o) {
    if (named) tsr_proto_error_write(w, TSR_PROTO_ERR_UNKNOWN_OP, "unknown op '%s'", op);
    else tsr_proto_error_write(w, TSR_PROTO_ERR_UNKNOWN_OP, "unknown op (not a name of up to 63 bytes)");
    return NULL;
  }
  for (size_t k = 0; k < req.n; k++) {
    const char *key = req.m[k].key;
    bool known = !req.m[k].key_cut && (strcmp(key, "op") == 0 || strcmp(key, "req") == 0);
    for (int i = 0; !known && !req.m[k].key_cut && o->fields[i]; i++) known = strcmp(o->fields[i], key) == 0;
    if (!known) {
      tsr_proto_error_write(w, TSR_PROTO_ERR_UNKNOWN_FIELD, "op '%s' takes no field '%.64s'", o->name, key);
      return NULL;
    }
  }
  return o;
}

void tsr_daemon_handle(tsr_daemon_t *d, const tsr_identity_t *who, const char *line, size_t len,
                       tsr_json_writer_t *w) {
  d->requests++;
  tsr_json_member_t m[TSR__MEMBERS_MAX];
  size_t n = 0;
  tsr_json_error_t err;
  tsr_json_object_begin(w);
  if (!tsr_json_scan_object(line, len, m, TSR__MEMBERS_MAX, &n, &err)) {
    if (strcmp(err.message, "expected a JSON object") == 0)
      tsr_proto_error_write(w, TSR_PROTO_ERR_BAD_REQUEST, "a request must be a JSON object");
    else
      tsr_proto_error_write(w, TSR_PROTO_ERR_BAD_REQUEST, "malformed JSON at byte %zu: %s",
                            err.offset + 1, err.message);
    tsr_json_object_end(w);
    return;
  }
  tsr__req_t req = {m, n};
  const tsr__op_t *o = tsr__dispatch(req, w);
  if (o) o->fn(d, who, req, w);
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
    tsr_log_info("lease %llu of %s expired during downtime (%.3f s after its deadline)",
                 (unsigned long long)lease->id, lease->owner, (double)e.late_ns / 1e9);
  else
    tsr_log_info("lease %llu of %s expired (%.3f ms after its deadline)",
                 (unsigned long long)lease->id, lease->owner, (double)e.late_ns / 1e6);
}

bool tsr_daemon_expire(tsr_daemon_t *d) {
  bool stuck = false;
  tsr_lease_service_expire(d->leases, tsr__now(), tsr__on_expired, d, &stuck);
  return stuck;
}
