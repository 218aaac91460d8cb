/* handlers.c: one function per protocol op (see docs/protocol.md).
 *
 * Each request is checked before anything changes: the op must be known,
 * every field must be one the op takes, with the right type and range. */
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "base/time.h"
#include "base/units.h"
#include "daemon/daemon.h"
#include "proto/proto.h"

typedef json_t *(*tsr__op_fn)(tsr_daemon_t *d, const tsr_identity_t *who, json_t *req);

typedef struct {
  const char *name;
  tsr__op_fn fn;
  const char *fields[8]; /* besides "op" and "req" */
} tsr__op_t;

static json_t *tsr__ok(void) { return json_pack("{s:b}", "ok", 1); }

static json_t *tsr__status_reply(tsr_daemon_t *d, const tsr_identity_t *who, const char *op,
                                 tsr_status_t st) {
  const char *code = tsr_status_code_name(tsr_status_code(st));
  tsr_audit_deny(d->audit, who, op, code, tsr_status_message(st));
  json_t *r = tsr_proto_error(code, "%s", tsr_status_message(st));
  tsr_status_free(st);
  return r;
}

/* Reads an optional non-negative integer field no larger than max. */
static bool tsr__field_u64(json_t *req, const char *key, uint64_t max, bool required,
                           uint64_t *out, json_t **out_error) {
  json_t *v = json_object_get(req, key);
  if (!v) {
    if (required) *out_error = tsr_proto_error("invalid_argument", "missing field '%s'", key);
    return !required;
  }
  if (!json_is_integer(v) || json_integer_value(v) < 0 || (uint64_t)json_integer_value(v) > max) {
    *out_error = tsr_proto_error("invalid_argument",
                                 "field '%s' must be an integer in [0, %llu]", key,
                                 (unsigned long long)max);
    return false;
  }
  *out = (uint64_t)json_integer_value(v);
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

/* ---- ops ---------------------------------------------------------------- */

static json_t *tsr__hello(tsr_daemon_t *d, const tsr_identity_t *who, json_t *req) {
  (void)d;
  (void)req;
  return json_pack("{s:b, s:s, s:i, s:i, s:s, s:b}", "ok", 1, "version", TESSERA_VERSION,
                   "protocol", TSR_PROTO_VERSION, "uid", (json_int_t)who->uid, "user", who->user,
                   "admin", who->admin);
}

static json_t *tsr__devices(tsr_daemon_t *d, const tsr_identity_t *who, json_t *req) {
  (void)who;
  (void)req;
  const tsr_lease_table_t *t = tsr_lease_service_table(d->leases);
  json_t *list = json_array();
  for (uint32_t i = 0; i < tsr_lease_table_device_count(t); i++) {
    uint32_t n = 0;
    for (size_t j = 0; j < tsr_lease_table_count(t); j++)
      if (tsr_lease_table_at(t, j)->device == i) n++;
    json_array_append_new(list, tsr_proto_device_json(tsr_lease_table_device(t, i),
                                                      tsr_lease_table_available_bytes(t, i),
                                                      tsr_lease_table_sm_committed(t, i), n));
  }
  json_t *r = tsr__ok();
  json_object_set_new(r, "devices", list);
  return r;
}

static json_t *tsr__create(tsr_daemon_t *d, const tsr_identity_t *who, json_t *req) {
  json_t *err = NULL;
  uint64_t device = 0, fraction = 0, duration = 0, sm = 0;
  if (!tsr__field_u64(req, "device", UINT32_MAX, true, &device, &err) ||
      !tsr__field_u64(req, "fraction_ppm", TSR_PPM_ONE, true, &fraction, &err) ||
      !tsr__field_u64(req, "duration_ns", INT64_MAX, true, &duration, &err) ||
      !tsr__field_u64(req, "sm_ppm", TSR_PPM_ONE, false, &sm, &err)) {
    tsr_audit_deny(d->audit, who, "lease.create", "invalid_argument",
                   json_string_value(json_object_get(json_object_get(err, "error"), "message")));
    return err;
  }
  tsr_lease_request_t r = {.device = (uint32_t)device, .fraction_ppm = (uint32_t)fraction,
                           .sm_ppm = (uint32_t)sm, .duration_ns = duration};
  char target[TSR_LEASE_NAME_MAX];
  json_t *user = json_object_get(req, "user");
  if (user) {
    if (!json_is_string(user))
      return tsr_proto_error("invalid_argument", "field 'user' must be a string");
    tsr_status_t st = tsr_identity_lookup_user(json_string_value(user), &r.target_uid, target,
                                               sizeof(target));
    if (st) {
      const char *code = tsr_status_code(st) == TSR_NOT_FOUND ? TSR_PROTO_ERR_UNKNOWN_USER
                                                              : "invalid_argument";
      tsr_audit_deny(d->audit, who, "lease.create", code, tsr_status_message(st));
      json_t *e = tsr_proto_error(code, "%s", tsr_status_message(st));
      tsr_status_free(st);
      return e;
    }
    r.has_target = true;
    r.target_name = target;
  }
  tsr_lease_actor_t actor = tsr__actor(who);
  tsr_lease_t lease;
  tsr_status_t st = tsr_lease_service_create(d->leases, &r, &actor, tsr__now(), &lease);
  if (st) return tsr__status_reply(d, who, "lease.create", st);
  tsr_audit_lease(d->audit, "create", who, &lease, 0);
  json_t *reply = tsr__ok();
  json_object_set_new(reply, "lease", tsr_proto_lease_json(&lease, lease.start_wall_ns));
  return reply;
}

static json_t *tsr__release(tsr_daemon_t *d, const tsr_identity_t *who, json_t *req) {
  json_t *err = NULL;
  uint64_t id = 0;
  if (!tsr__field_u64(req, "id", UINT64_MAX, true, &id, &err)) return err;
  tsr_lease_actor_t actor = tsr__actor(who);
  tsr_lease_t lease;
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
    return tsr__status_reply(d, who, "lease.release", st);
  }
  tsr_audit_lease(d->audit, "release", who, &lease, 0);
  tsr_daemon_remember(d, &lease);
  json_t *reply = tsr__ok();
  json_object_set_new(reply, "lease", tsr_proto_lease_json(&lease, lease.ended_wall_ns));
  return reply;
}

static json_t *tsr__list(tsr_daemon_t *d, const tsr_identity_t *who, json_t *req) {
  json_t *all = json_object_get(req, "all");
  if (all && !json_is_boolean(all))
    return tsr_proto_error("invalid_argument", "field 'all' must be true or false");
  bool everyone = json_is_true(all);
  const tsr_lease_table_t *t = tsr_lease_service_table(d->leases);
  uint64_t now = tsr__now_wall();
  json_t *list = json_array();
  for (size_t i = 0; i < tsr_lease_table_count(t); i++) {
    const tsr_lease_t *l = tsr_lease_table_at(t, i);
    if (everyone || l->owner_uid == who->uid) json_array_append_new(list, tsr_proto_lease_json(l, now));
  }
  json_t *reply = tsr__ok();
  json_object_set_new(reply, "leases", list);
  return reply;
}

static json_t *tsr__show(tsr_daemon_t *d, const tsr_identity_t *who, json_t *req) {
  (void)who;
  json_t *err = NULL;
  uint64_t id = 0;
  if (!tsr__field_u64(req, "id", UINT64_MAX, true, &id, &err)) return err;
  const tsr_lease_t *l = tsr_lease_table_find(tsr_lease_service_table(d->leases), id);
  for (size_t i = 0; !l && i < d->history_count; i++)
    if (d->history[i].id == id) l = &d->history[i];
  if (!l) return tsr_proto_error("not_found", "no lease %llu", (unsigned long long)id);
  json_t *reply = tsr__ok();
  json_object_set_new(reply, "lease", tsr_proto_lease_json(l, tsr__now_wall()));
  return reply;
}

static const tsr__op_t tsr__ops[] = {
    {"hello", tsr__hello, {NULL}},
    {"devices", tsr__devices, {NULL}},
    {"lease.create", tsr__create, {"device", "fraction_ppm", "duration_ns", "sm_ppm", "user", NULL}},
    {"lease.release", tsr__release, {"id", NULL}},
    {"lease.list", tsr__list, {"all", NULL}},
    {"lease.show", tsr__show, {"id", NULL}},
};

json_t *tsr_daemon_handle(tsr_daemon_t *d, const tsr_identity_t *who, json_t *req) {
  d->requests++;
  if (!json_is_object(req)) return tsr_proto_error(TSR_PROTO_ERR_BAD_REQUEST, "a request must be a JSON object");
  json_t *op = json_object_get(req, "op");
  if (!json_is_string(op))
    return tsr_proto_error(TSR_PROTO_ERR_BAD_REQUEST, "a request needs a string field 'op'");
  const tsr__op_t *o = NULL;
  for (size_t i = 0; i < sizeof(tsr__ops) / sizeof(tsr__ops[0]); i++)
    if (strcmp(tsr__ops[i].name, json_string_value(op)) == 0) o = &tsr__ops[i];
  if (!o) return tsr_proto_error(TSR_PROTO_ERR_UNKNOWN_OP, "unknown op '%.64s'", json_string_value(op));
  const char *key;
  json_t *value;
  json_object_foreach(req, key, value) {
    (void)value;
    if (strcmp(key, "op") == 0 || strcmp(key, "req") == 0) continue;
    bool known = false;
    for (int i = 0; o->fields[i]; i++) known |= strcmp(o->fields[i], key) == 0;
    if (!known)
      return tsr_proto_error(TSR_PROTO_ERR_UNKNOWN_FIELD, "op '%s' takes no field '%.64s'", o->name, key);
  }
  json_t *reply = o->fn(d, who, req);
  json_t *tag = json_object_get(req, "req");
  if (tag) json_object_set(reply, "req", tag);
  return reply;
}

void tsr_daemon_remember(tsr_daemon_t *d, const tsr_lease_t *lease) {
  d->history[d->history_next] = *lease;
  d->history_next = (d->history_next + 1) % TSR_HISTORY_MAX;
  if (d->history_count < TSR_HISTORY_MAX) d->history_count++;
}

static void tsr__on_expired(void *ctx, const tsr_lease_t *lease) {
  tsr_daemon_t *d = ctx;
  uint64_t now = tsr_time_mono_ns();
  int64_t late = (int64_t)(now - lease->deadline_mono_ns);
  tsr_audit_lease(d->audit, "expire", NULL, lease, late);
  tsr_daemon_remember(d, lease);
  d->expired++;
  tsr_log_info("lease %llu of %s expired (%.3f ms after its deadline)",
               (unsigned long long)lease->id, lease->owner, late / 1e6);
}

bool tsr_daemon_expire(tsr_daemon_t *d) {
  bool stuck = false;
  tsr_lease_service_expire(d->leases, tsr__now(), tsr__on_expired, d, &stuck);
  return stuck;
}
