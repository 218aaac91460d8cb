/* json.c: JSON forms of leases, devices and errors. */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "base/time.h"
#include "base/units.h"
#include "proto/proto.h"

const char *tsr_proto_lease_state_name(tsr_lease_state_t state) {
  switch (state) {
    case TSR_LEASE_ACTIVE: return "active";
    case TSR_LEASE_RELEASED: return "released";
    case TSR_LEASE_EXPIRED: return "expired";
  }
  return "unknown";
}

static void tsr__time(tsr_json_writer_t *w, const char *key, const char *key_ns, uint64_t wall_ns) {
  char b[48];
  tsr_time_format_rfc3339(wall_ns, 3, b, sizeof(b));
  tsr_json_key_string(w, key, b);
  tsr_json_key_u64(w, key_ns, wall_ns > INT64_MAX ? INT64_MAX : wall_ns);
}

static bool tsr__get_u64(const tsr_json_member_t *m, size_t n, const char *key, uint64_t max, uint64_t *out);
static bool tsr__get_str(const tsr_json_member_t *m, size_t n, const char *key, char *dst, size_t cap);

void tsr_proto_lease_write(tsr_json_writer_t *w, const tsr_lease_t *l, uint64_t now_wall_ns) {
  tsr_proto_lease_write_usage(w, l, now_wall_ns, NULL);
}

/* The usage counters of a lease object: each key spelled once, for the
 * writer and the parser. `optional`: daemons before compute shares (and the
 * switching reserve) did not write it, and it reads as 0. */
typedef struct {
  const char *key;
  size_t offset;
  bool wide; /* uint64_t; else uint32_t */
  bool optional;
  uint64_t max;
} tsr__counter_t;

#define TSR__COUNTER(field, wide, optional, max) \
  { #field, offsetof(tsr_proto_lease_usage_t, field), wide, optional, max }

static const tsr__counter_t tsr__usage_counters[] = {
    TSR__COUNTER(used_bytes, true, false, UINT64_MAX),  TSR__COUNTER(peak_bytes, true, false, UINT64_MAX),
    TSR__COUNTER(processes, false, false, UINT32_MAX),  TSR__COUNTER(denied, true, false, UINT64_MAX),
    TSR__COUNTER(gpu_ns, true, true, UINT64_MAX),       TSR__COUNTER(throttled_ns, true, true, UINT64_MAX),
    TSR__COUNTER(launches, true, true, UINT64_MAX),     TSR__COUNTER(bypassed, true, true, UINT64_MAX),
    TSR__COUNTER(sm_now_ppm, false, true, TSR_PPM_ONE),
};
#define TSR__N_COUNTERS (sizeof(tsr__usage_counters) / sizeof(tsr__usage_counters[0]))

void tsr_proto_lease_write_usage(tsr_json_writer_t *w, const tsr_lease_t *l, uint64_t now_wall_ns,
                                 const tsr_proto_lease_usage_t *u) {
  tsr_json_object_begin(w);
  tsr_json_key_u64(w, "id", l->id);
  tsr_json_key_u64(w, "device", l->device);
  tsr_json_key(w, "fraction");
  tsr_json_ppm(w, l->fraction_ppm);
  tsr_json_key_u64(w, "fraction_ppm", l->fraction_ppm);
  tsr_json_key_u64(w, "bytes", l->bytes);
  tsr_json_key_ppm_or_null(w, "sm_share", l->sm_ppm);
  tsr_json_key_u64(w, "sm_ppm", l->sm_ppm);
  tsr_json_key_string(w, "owner", l->owner);
  tsr_json_key_u64(w, "owner_uid", l->owner_uid);
  tsr_json_key_string(w, "creator", l->creator);
  tsr_json_key_u64(w, "creator_uid", l->creator_uid);
  tsr_json_key_string(w, "host", l->host);
  tsr_json_key(w, "pid");
  tsr_json_i64(w, l->pid);
  tsr_json_key_string(w, "state", tsr_proto_lease_state_name(l->state));
  tsr__time(w, "start", "start_ns", l->start_wall_ns);
  tsr__time(w, "deadline", "deadline_ns", l->deadline_wall_ns);
  uint64_t remaining = l->state == TSR_LEASE_ACTIVE ? tsr_time_sub_sat(l->deadline_wall_ns, now_wall_ns) : 0;
  tsr_json_key_u64(w, "remaining_ns", remaining > INT64_MAX ? INT64_MAX : remaining);
  if (l->state != TSR_LEASE_ACTIVE) tsr__time(w, "ended", "ended_ns", l->ended_wall_ns);
  if (l->on_expiry != TSR_LEASE_ACTION_DEFAULT)
    tsr_json_key_string(w, "on_expiry", tsr_lease_action_name(l->on_expiry));
  if (l->over_limit != TSR_LEASE_OVER_LIMIT_DEFAULT)
    tsr_json_key_string(w, "over_limit", tsr_lease_over_limit_name(l->over_limit));
  if (l->job[0]) tsr_json_key_string(w, "job", l->job);
  if (u) {
    tsr_json_key_string(w, "region", u->region);
    tsr_json_key_string(w, "usage", "reported"); /* the tenants' word, clamped */
    for (size_t k = 0; k < TSR__N_COUNTERS; k++) {
      const tsr__counter_t *c = &tsr__usage_counters[k];
      const char *field = (const char *)u + c->offset;
      uint64_t v = 0;
      if (c->wide)
        memcpy(&v, field, sizeof(uint64_t));
      else
        v = *(const uint32_t *)(const void *)field;
      tsr_json_key_u64(w, c->key, v);
    }
    tsr_json_key_bool(w, "revoked", u->revoked);
    tsr_json_key_bool(w, "tampered", u->tampered);
    tsr_json_key_u64_or_null(w, "gpu_bytes", u->gpu_known, u->gpu_bytes);
  }
  tsr_json_object_end(w);
}

bool tsr_proto_lease_usage_parse(const char *text, size_t len, tsr_proto_lease_usage_t *out) {
  tsr_json_member_t m[48];
  size_t n;
  tsr_json_error_t err;
  if (!text || !tsr_json_scan_object(text, len, m, 48, &n, &err)) return false;
  memset(out, 0, sizeof(*out));
  if (!tsr__get_str(m, n, "region", out->region, sizeof(out->region))) return false;
  for (size_t k = 0; k < TSR__N_COUNTERS; k++) {
    const tsr__counter_t *c = &tsr__usage_counters[k];
    const tsr_json_member_t *f = tsr_json_find(m, n, c->key);
    uint64_t v = 0;
    if (!f && c->optional) continue; /* written only by later daemons */
    if (!f || !tsr_json_get_u64(f, &v) || v > c->max) return false;
    char *field = (char *)out + c->offset;
    if (c->wide) {
      memcpy(field, &v, sizeof(uint64_t));
    } else {
      uint32_t v32 = (uint32_t)v;
      memcpy(field, &v32, sizeof(v32));
    }
  }
  for (size_t i = 0; i < n; i++) { /* optional: daemons before the backstop do not write them */
    if (strcmp(m[i].key, "revoked") == 0) out->revoked = m[i].type == TSR_JSON_TRUE;
    if (strcmp(m[i].key, "tampered") == 0) out->tampered = m[i].type == TSR_JSON_TRUE;
  }
  const tsr_json_member_t *gpu = tsr_json_find(m, n, "gpu_bytes");
  if (gpu && gpu->type != TSR_JSON_NULL) {
    if (!tsr_json_get_u64(gpu, &out->gpu_bytes)) return false;
    out->gpu_known = true;
  }
  return true;
}

static bool tsr__get_u64(const tsr_json_member_t *m, size_t n, const char *key, uint64_t max, uint64_t *out) {
  uint64_t v;
  if (!tsr_json_get_u64(tsr_json_find(m, n, key), &v) || v > max) return false;
  *out = v;
  return true;
}

static bool tsr__get_str(const tsr_json_member_t *m, size_t n, const char *key, char *dst, size_t cap) {
  return tsr_json_get_string(tsr_json_find(m, n, key), dst, cap);
}

tsr_status_t tsr_proto_lease_parse(const char *text, size_t len, tsr_lease_t *out) {
  tsr_json_member_t m[48];
  size_t n;
  tsr_json_error_t err;
  if (!text || !tsr_json_scan_object(text, len, m, 48, &n, &err))
    return tsr_status_make(TSR_DATA_LOSS, "malformed lease object from the daemon");
  tsr_lease_t l;
  memset(&l, 0, sizeof(l));
  uint64_t u, dev, frac, sm, ouid, cuid, pid = 0;
  char state[16];
  if (!tsr__get_u64(m, n, "id", UINT64_MAX, &l.id) || !tsr__get_u64(m, n, "device", UINT32_MAX, &dev) ||
      !tsr__get_u64(m, n, "fraction_ppm", TSR_PPM_ONE, &frac) || !tsr__get_u64(m, n, "bytes", UINT64_MAX, &l.bytes) ||
      !tsr__get_u64(m, n, "sm_ppm", TSR_PPM_ONE, &sm) || !tsr__get_u64(m, n, "owner_uid", UINT32_MAX, &ouid) ||
      !tsr__get_u64(m, n, "creator_uid", UINT32_MAX, &cuid) || !tsr__get_u64(m, n, "pid", INT32_MAX, &pid) ||
      !tsr__get_str(m, n, "owner", l.owner, sizeof(l.owner)) ||
      !tsr__get_str(m, n, "creator", l.creator, sizeof(l.creator)) ||
      !tsr__get_str(m, n, "host", l.host, sizeof(l.host)) || !tsr__get_str(m, n, "state", state, sizeof(state)) ||
      !tsr__get_u64(m, n, "start_ns", UINT64_MAX, &l.start_wall_ns) ||
      !tsr__get_u64(m, n, "deadline_ns", UINT64_MAX, &l.deadline_wall_ns))
    return tsr_status_make(TSR_DATA_LOSS, "malformed lease object from the daemon");
  l.device = (uint32_t)dev;
  l.fraction_ppm = (uint32_t)frac;
  l.sm_ppm = (uint32_t)sm;
  l.owner_uid = (uint32_t)ouid;
  l.creator_uid = (uint32_t)cuid;
  l.pid = (int32_t)pid;
  if (strcmp(state, "active") == 0)
    l.state = TSR_LEASE_ACTIVE;
  else if (strcmp(state, "released") == 0)
    l.state = TSR_LEASE_RELEASED;
  else if (strcmp(state, "expired") == 0)
    l.state = TSR_LEASE_EXPIRED;
  else
    return tsr_status_make(TSR_DATA_LOSS, "unknown lease state '%s'", state);
  if (tsr__get_u64(m, n, "ended_ns", UINT64_MAX, &u)) l.ended_wall_ns = u;
  char action[16];
  if (tsr__get_str(m, n, "on_expiry", action, sizeof(action)) && !tsr_lease_action_parse(action, &l.on_expiry))
    return tsr_status_make(TSR_DATA_LOSS, "unknown expiry action '%s'", action);
  if (tsr_json_find(m, n, "over_limit") &&
      (!tsr__get_str(m, n, "over_limit", action, sizeof(action)) || !tsr_lease_over_limit_parse(action, &l.over_limit)))
    return tsr_status_make(TSR_DATA_LOSS, "unknown over-limit action from the daemon");
  if (tsr_json_find(m, n, "job") && (!tsr__get_str(m, n, "job", l.job, sizeof(l.job)) || !tsr_lease_job_ok(l.job)))
    return tsr_status_make(TSR_DATA_LOSS, "malformed job id from the daemon");
  *out = l;
  return NULL;
}

void tsr_proto_device_write(tsr_json_writer_t *w, const tsr_device_t *d, uint64_t available, uint32_t sm_committed,
                            uint32_t active_leases) {
  tsr_json_object_begin(w);
  tsr_json_key_u64(w, "index", d->index);
  tsr_json_key_string(w, "name", d->name);
  tsr_json_key_string_or_null(w, "uuid", d->uuid);
  tsr_json_key_u64(w, "memory_bytes", d->total_bytes);
  tsr_json_key_u64(w, "available_bytes", available);
  tsr_json_key_u64_or_null(w, "sm_count", d->sm_count != 0, d->sm_count);
  tsr_json_key_u64(w, "sm_committed_ppm", sm_committed);
  tsr_json_key_u64(w, "leases", active_leases);
  tsr_json_key_string(w, "mig", tsr_device_mig_name(d->mig));
  tsr_json_key_string(w, "source", d->source == TSR_DEVICE_FROM_NVML ? "nvml" : "config");
  tsr_json_key_string(w, "kind", tsr_device_kind_name(d->kind));
  tsr_json_key_string_or_null(w, "pci", d->pci);
  tsr_json_key_string_or_null(w, "opencl", d->opencl);
  tsr_json_key_u64_or_null(w, "minor", d->has_minor, d->minor);
  tsr_json_object_end(w);
}

tsr_status_t tsr_proto_device_parse(const char *text, size_t len, tsr_proto_device_t *out) {
  tsr_json_member_t m[24];
  size_t n;
  tsr_json_error_t err;
  tsr_proto_device_t d;
  memset(&d, 0, sizeof(d));
  uint64_t index = 0, sm_committed = 0, leases = 0, sm_count = 0, minor = 0;
  const tsr_json_member_t *sms = NULL;
  bool ok = text && tsr_json_scan_object(text, len, m, 24, &n, &err) &&
            tsr__get_u64(m, n, "index", UINT32_MAX, &index) && tsr__get_str(m, n, "name", d.name, sizeof(d.name)) &&
            tsr__get_u64(m, n, "memory_bytes", UINT64_MAX, &d.memory_bytes) &&
            tsr__get_u64(m, n, "available_bytes", UINT64_MAX, &d.available_bytes) &&
            tsr__get_u64(m, n, "sm_committed_ppm", UINT32_MAX, &sm_committed) &&
            tsr__get_u64(m, n, "leases", UINT32_MAX, &leases) && tsr__get_str(m, n, "mig", d.mig, sizeof(d.mig)) &&
            tsr__get_str(m, n, "source", d.source, sizeof(d.source)) &&
            (sms = tsr_json_find(m, n, "sm_count")) != NULL &&
            (sms->type == TSR_JSON_NULL || tsr__get_u64(m, n, "sm_count", UINT32_MAX, &sm_count));
  /* optional: daemons before OpenCL devices ("cuda"), before minors (unknown) */
  const tsr_json_member_t *kind = ok ? tsr_json_find(m, n, "kind") : NULL;
  if (!kind)
    snprintf(d.kind, sizeof(d.kind), "cuda");
  else
    ok = tsr_json_get_string(kind, d.kind, sizeof(d.kind));
  const tsr_json_member_t *mi = ok ? tsr_json_find(m, n, "minor") : NULL;
  if (mi && mi->type != TSR_JSON_NULL) {
    ok = tsr__get_u64(m, n, "minor", UINT32_MAX, &minor);
    d.has_minor = ok;
  }
  if (!ok) return tsr_status_make(TSR_DATA_LOSS, "malformed device object from the daemon");
  d.index = (uint32_t)index;
  d.sm_committed_ppm = (uint32_t)sm_committed;
  d.leases = (uint32_t)leases;
  d.sm_count = (uint32_t)sm_count;
  d.minor = (uint32_t)minor;
  *out = d;
  return NULL;
}

void tsr_proto_error_write(tsr_json_writer_t *w, const char *code, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  tsr_json_key_bool(w, "ok", false);
  tsr_json_key(w, "error");
  tsr_json_object_begin(w);
  tsr_json_key_string(w, "code", code);
  tsr_json_key_string(w, "message", msg);
  tsr_json_object_end(w);
}

tsr_status_t tsr_proto_error_status(const char *code, const char *message) {
  if (!code) code = "internal";
  tsr_status_code_t sc;
  if (!tsr_status_code_from_name(code, &sc)) sc = TSR_INVALID_ARGUMENT;
  if (strcmp(code, TSR_PROTO_ERR_UNKNOWN_USER) == 0) sc = TSR_NOT_FOUND;
  if (strcmp(code, TSR_PROTO_ERR_BUSY) == 0) sc = TSR_UNAVAILABLE;
  return tsr_status_make(sc, "%s", message ? message : code);
}

void tsr_proto_queued_write(tsr_json_writer_t *w, const tsr_proto_queued_t *q) {
  tsr_json_object_begin(w);
  tsr_json_key_u64(w, "id", q->id);
  tsr_json_key_u64(w, "device", q->device);
  tsr_json_key_u64(w, "fraction_ppm", q->fraction_ppm);
  tsr_json_key_u64(w, "bytes", q->bytes);
  tsr_json_key_u64(w, "sm_ppm", q->sm_ppm);
  tsr_json_key_u64(w, "duration_ns", q->duration_ns);
  tsr_json_key_string(w, "owner", q->owner);
  if (q->job[0]) tsr_json_key_string(w, "job", q->job);
  tsr_json_key_string(w, "state", "queued");
  tsr_json_key_u64(w, "position", q->position);
  tsr_json_key_u64(w, "queued_ns", q->queued_ns);
  tsr_json_key_u64(w, "until_ns", q->until_ns);
  tsr_json_object_end(w);
}

tsr_status_t tsr_proto_queued_parse(const char *text, size_t len, tsr_proto_queued_t *out) {
  tsr_json_member_t m[24];
  size_t n;
  tsr_json_error_t err;
  if (!text || !tsr_json_scan_object(text, len, m, 24, &n, &err))
    return tsr_status_make(TSR_DATA_LOSS, "malformed queued request from the daemon");
  tsr_proto_queued_t q;
  memset(&q, 0, sizeof(q));
  uint64_t dev, frac, sm;
  if (!tsr__get_u64(m, n, "id", UINT64_MAX, &q.id) || !tsr__get_u64(m, n, "device", UINT32_MAX, &dev) ||
      !tsr__get_u64(m, n, "fraction_ppm", TSR_PPM_ONE, &frac) || !tsr__get_u64(m, n, "bytes", UINT64_MAX, &q.bytes) ||
      !tsr__get_u64(m, n, "sm_ppm", TSR_PPM_ONE, &sm) ||
      !tsr__get_u64(m, n, "duration_ns", UINT64_MAX, &q.duration_ns) ||
      !tsr__get_str(m, n, "owner", q.owner, sizeof(q.owner)) ||
      !tsr__get_u64(m, n, "position", UINT64_MAX, &q.position) ||
      !tsr__get_u64(m, n, "queued_ns", UINT64_MAX, &q.queued_ns) ||
      !tsr__get_u64(m, n, "until_ns", UINT64_MAX, &q.until_ns))
    return tsr_status_make(TSR_DATA_LOSS, "malformed queued request from the daemon");
  if (tsr_json_find(m, n, "job") && (!tsr__get_str(m, n, "job", q.job, sizeof(q.job)) || !tsr_lease_job_ok(q.job)))
    return tsr_status_make(TSR_DATA_LOSS, "malformed job id from the daemon");
  q.device = (uint32_t)dev;
  q.fraction_ppm = (uint32_t)frac;
  q.sm_ppm = (uint32_t)sm;
  *out = q;
  return NULL;
}
