/* json.c: JSON forms of leases, devices and errors. */
#include <stdarg.h>
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

static json_t *tsr__time(uint64_t wall_ns) {
  char b[48];
  tsr_time_format_rfc3339(wall_ns, 3, b, sizeof(b));
  return json_string(b);
}

json_t *tsr_proto_lease_json(const tsr_lease_t *l, uint64_t now_wall_ns) {
  json_t *o = json_object();
  json_object_set_new(o, "id", json_integer((json_int_t)l->id));
  json_object_set_new(o, "device", json_integer(l->device));
  json_object_set_new(o, "fraction", json_real(l->fraction_ppm / 1e6));
  json_object_set_new(o, "fraction_ppm", json_integer(l->fraction_ppm));
  json_object_set_new(o, "bytes", json_integer((json_int_t)l->bytes));
  json_object_set_new(o, "sm_share", l->sm_ppm ? json_real(l->sm_ppm / 1e6) : json_null());
  json_object_set_new(o, "sm_ppm", json_integer(l->sm_ppm));
  json_object_set_new(o, "owner", json_string(l->owner));
  json_object_set_new(o, "owner_uid", json_integer(l->owner_uid));
  json_object_set_new(o, "creator", json_string(l->creator));
  json_object_set_new(o, "creator_uid", json_integer(l->creator_uid));
  json_object_set_new(o, "host", json_string(l->host));
  json_object_set_new(o, "pid", json_integer(l->pid));
  json_object_set_new(o, "state", json_string(tsr_proto_lease_state_name(l->state)));
  json_object_set_new(o, "start", tsr__time(l->start_wall_ns));
  json_object_set_new(o, "start_ns", json_integer((json_int_t)l->start_wall_ns));
  json_object_set_new(o, "deadline", tsr__time(l->deadline_wall_ns));
  json_object_set_new(o, "deadline_ns", json_integer((json_int_t)(l->deadline_wall_ns > INT64_MAX ? INT64_MAX : l->deadline_wall_ns)));
  uint64_t remaining = l->state == TSR_LEASE_ACTIVE ? tsr_time_sub_sat(l->deadline_wall_ns, now_wall_ns) : 0;
  json_object_set_new(o, "remaining_ns", json_integer((json_int_t)(remaining > INT64_MAX ? INT64_MAX : remaining)));
  if (l->state != TSR_LEASE_ACTIVE) {
    json_object_set_new(o, "ended", tsr__time(l->ended_wall_ns));
    json_object_set_new(o, "ended_ns", json_integer((json_int_t)l->ended_wall_ns));
  }
  return o;
}

static bool tsr__get_u64(const json_t *o, const char *key, uint64_t max, uint64_t *out) {
  json_t *v = json_object_get(o, key);
  if (!json_is_integer(v) || json_integer_value(v) < 0 || (uint64_t)json_integer_value(v) > max)
    return false;
  *out = (uint64_t)json_integer_value(v);
  return true;
}

static bool tsr__get_str(const json_t *o, const char *key, char *dst, size_t cap) {
  json_t *v = json_object_get(o, key);
  if (!json_is_string(v) || strlen(json_string_value(v)) >= cap) return false;
  snprintf(dst, cap, "%s", json_string_value(v));
  return true;
}

tsr_status_t tsr_proto_lease_parse(const json_t *o, tsr_lease_t *out) {
  tsr_lease_t l;
  memset(&l, 0, sizeof(l));
  uint64_t u, dev, frac, sm, ouid, cuid, pid = 0;
  char state[16];
  if (!json_is_object(o) || !tsr__get_u64(o, "id", UINT64_MAX, &l.id) ||
      !tsr__get_u64(o, "device", UINT32_MAX, &dev) ||
      !tsr__get_u64(o, "fraction_ppm", TSR_PPM_ONE, &frac) ||
      !tsr__get_u64(o, "bytes", UINT64_MAX, &l.bytes) ||
      !tsr__get_u64(o, "sm_ppm", TSR_PPM_ONE, &sm) ||
      !tsr__get_u64(o, "owner_uid", UINT32_MAX, &ouid) ||
      !tsr__get_u64(o, "creator_uid", UINT32_MAX, &cuid) ||
      !tsr__get_u64(o, "pid", INT32_MAX, &pid) ||
      !tsr__get_str(o, "owner", l.owner, sizeof(l.owner)) ||
      !tsr__get_str(o, "creator", l.creator, sizeof(l.creator)) ||
      !tsr__get_str(o, "host", l.host, sizeof(l.host)) ||
      !tsr__get_str(o, "state", state, sizeof(state)) ||
      !tsr__get_u64(o, "start_ns", UINT64_MAX, &l.start_wall_ns) ||
      !tsr__get_u64(o, "deadline_ns", UINT64_MAX, &l.deadline_wall_ns))
    return tsr_status_make(TSR_DATA_LOSS, "malformed lease object from the daemon");
  l.device = (uint32_t)dev;
  l.fraction_ppm = (uint32_t)frac;
  l.sm_ppm = (uint32_t)sm;
  l.owner_uid = (uint32_t)ouid;
  l.creator_uid = (uint32_t)cuid;
  l.pid = (int32_t)pid;
  if (strcmp(state, "active") == 0) l.state = TSR_LEASE_ACTIVE;
  else if (strcmp(state, "released") == 0) l.state = TSR_LEASE_RELEASED;
  else if (strcmp(state, "expired") == 0) l.state = TSR_LEASE_EXPIRED;
  else return tsr_status_make(TSR_DATA_LOSS, "unknown lease state '%s'", state);
  if (tsr__get_u64(o, "ended_ns", UINT64_MAX, &u)) l.ended_wall_ns = u;
  *out = l;
  return NULL;
}

json_t *tsr_proto_device_json(const tsr_device_t *d, uint64_t available, uint32_t sm_committed,
                              uint32_t active_leases) {
  json_t *o = json_object();
  json_object_set_new(o, "index", json_integer(d->index));
  json_object_set_new(o, "name", json_string(d->name));
  json_object_set_new(o, "uuid", d->uuid[0] ? json_string(d->uuid) : json_null());
  json_object_set_new(o, "memory_bytes", json_integer((json_int_t)d->total_bytes));
  json_object_set_new(o, "available_bytes", json_integer((json_int_t)available));
  json_object_set_new(o, "sm_count", d->sm_count ? json_integer(d->sm_count) : json_null());
  json_object_set_new(o, "sm_committed_ppm", json_integer(sm_committed));
  json_object_set_new(o, "leases", json_integer(active_leases));
  json_object_set_new(o, "mig", json_string(tsr_device_mig_name(d->mig)));
  json_object_set_new(o, "source", json_string(d->source == TSR_DEVICE_FROM_NVML ? "nvml" : "config"));
  return o;
}

json_t *tsr_proto_error(const char *code, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  return json_pack("{s:b, s:{s:s, s:s}}", "ok", 0, "error", "code", code, "message", msg);
}
