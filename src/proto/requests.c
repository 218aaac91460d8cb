/* requests.c: each op's request written and read (proto/requests.h). */
#include "proto/requests.h"

#include <stdio.h>
#include <string.h>

#include "base/units.h"
#include "proto/proto.h"

/* Each op's name and the fields it takes besides "op" and "req". */
static const struct {
  const char *name;
  const char *fields[10];
} tsr__ops[TSR_PROTO_OP_COUNT] = {
    [TSR_PROTO_HELLO] = {"hello", {NULL}},
    [TSR_PROTO_DEVICES] = {"devices", {NULL}},
    [TSR_PROTO_LEASE_CREATE] = {"lease.create",
                                {"device", "fraction_ppm", "duration_ns", "sm_ppm", "user", "on_expiry", "over_limit",
                                 "job", "wait_ns", NULL}},
    [TSR_PROTO_LEASE_RELEASE] = {"lease.release", {"id", NULL}},
    [TSR_PROTO_LEASE_LIST] = {"lease.list", {"all", "after", "limit", "job", "queued", NULL}},
    [TSR_PROTO_LEASE_SHOW] = {"lease.show", {"id", NULL}},
    [TSR_PROTO_LEASE_ATTACH] = {"lease.attach", {"id", NULL}},
    [TSR_PROTO_TOP] = {"top", {NULL}},
    [TSR_PROTO_LEASE_RENEW] = {"lease.renew", {"id", "duration_ns", "until_ns", NULL}},
    [TSR_PROTO_LEASE_RESIZE] = {"lease.resize", {"id", "fraction_ppm", "sm_ppm", "force", NULL}},
};

const char *tsr_proto_op_name(tsr_proto_op_t op) {
  return (unsigned)op < TSR_PROTO_OP_COUNT ? tsr__ops[op].name : "unknown";
}

/* ---- writers ------------------------------------------------------------------ */

void tsr_proto_plain_write(tsr_json_writer_t *w, tsr_proto_op_t op) {
  tsr_json_object_begin(w);
  tsr_json_key_string(w, "op", tsr_proto_op_name(op));
  tsr_json_object_end(w);
}

void tsr_proto_create_write(tsr_json_writer_t *w, const tsr_proto_create_t *r) {
  tsr_json_object_begin(w);
  tsr_json_key_string(w, "op", tsr_proto_op_name(TSR_PROTO_LEASE_CREATE));
  tsr_json_key_u64(w, "device", r->device);
  tsr_json_key_u64(w, "fraction_ppm", r->fraction_ppm);
  tsr_json_key_u64(w, "duration_ns", r->duration_ns);
  if (r->sm_ppm) tsr_json_key_u64(w, "sm_ppm", r->sm_ppm);
  if (r->has_user) tsr_json_key_string(w, "user", r->user);
  if (r->on_expiry != TSR_LEASE_ACTION_DEFAULT)
    tsr_json_key_string(w, "on_expiry", tsr_lease_action_name(r->on_expiry));
  if (r->over_limit != TSR_LEASE_OVER_LIMIT_DEFAULT)
    tsr_json_key_string(w, "over_limit", tsr_lease_over_limit_name(r->over_limit));
  if (r->job[0]) tsr_json_key_string(w, "job", r->job);
  if (r->wait_ns) tsr_json_key_u64(w, "wait_ns", r->wait_ns);
  tsr_json_object_end(w);
}

void tsr_proto_id_write(tsr_json_writer_t *w, tsr_proto_op_t op, uint64_t id) {
  tsr_json_object_begin(w);
  tsr_json_key_string(w, "op", tsr_proto_op_name(op));
  tsr_json_key_u64(w, "id", id);
  tsr_json_object_end(w);
}

void tsr_proto_list_write(tsr_json_writer_t *w, const tsr_proto_list_t *r) {
  tsr_json_object_begin(w);
  tsr_json_key_string(w, "op", tsr_proto_op_name(TSR_PROTO_LEASE_LIST));
  tsr_json_key_bool(w, "all", r->all);
  if (r->job[0]) tsr_json_key_string(w, "job", r->job);
  if (r->after) tsr_json_key_u64(w, "after", r->after);
  if (r->limit) tsr_json_key_u64(w, "limit", r->limit);
  if (r->queued) tsr_json_key_bool(w, "queued", true);
  tsr_json_object_end(w);
}

void tsr_proto_renew_write(tsr_json_writer_t *w, const tsr_proto_renew_t *r) {
  tsr_json_object_begin(w);
  tsr_json_key_string(w, "op", tsr_proto_op_name(TSR_PROTO_LEASE_RENEW));
  tsr_json_key_u64(w, "id", r->id);
  if (r->duration_ns) tsr_json_key_u64(w, "duration_ns", r->duration_ns);
  if (r->until_ns) tsr_json_key_u64(w, "until_ns", r->until_ns);
  tsr_json_object_end(w);
}

void tsr_proto_resize_write(tsr_json_writer_t *w, const tsr_proto_resize_t *r) {
  tsr_json_object_begin(w);
  tsr_json_key_string(w, "op", tsr_proto_op_name(TSR_PROTO_LEASE_RESIZE));
  tsr_json_key_u64(w, "id", r->id);
  if (r->fraction_ppm) tsr_json_key_u64(w, "fraction_ppm", r->fraction_ppm);
  if (r->has_sm) tsr_json_key_u64(w, "sm_ppm", r->sm_ppm);
  if (r->force) tsr_json_key_bool(w, "force", true);
  tsr_json_object_end(w);
}

/* ---- readers ------------------------------------------------------------------ */

bool tsr_proto_request_check(const tsr_json_member_t *m, size_t n, tsr_proto_op_t *out_op, const char **out_code,
                             char *why, size_t why_cap) {
  char name[64];
  const tsr_json_member_t *opm = tsr_json_find(m, n, "op");
  if (!opm || opm->type != TSR_JSON_STRING) {
    *out_code = TSR_PROTO_ERR_BAD_REQUEST;
    snprintf(why, why_cap, "a request needs a string field 'op'");
    return false;
  }
  bool named = tsr_json_get_string(opm, name, sizeof(name));
  int op = -1;
  for (int i = 0; named && i < TSR_PROTO_OP_COUNT; i++)
    if (strcmp(tsr__ops[i].name, name) == 0) op = i;
  if (op < 0) {
    *out_code = TSR_PROTO_ERR_UNKNOWN_OP;
    if (named)
      snprintf(why, why_cap, "unknown op '%s'", name);
    else
      snprintf(why, why_cap, "unknown op (not a name of up to 63 bytes)");
    return false;
  }
  for (size_t k = 0; k < n; k++) {
    const char *key = m[k].key;
    bool known = !m[k].key_cut && (strcmp(key, "op") == 0 || strcmp(key, "req") == 0);
    for (int i = 0; !known && !m[k].key_cut && tsr__ops[op].fields[i]; i++)
      known = strcmp(tsr__ops[op].fields[i], key) == 0;
    if (!known) {
      *out_code = TSR_PROTO_ERR_UNKNOWN_FIELD;
      snprintf(why, why_cap, "op '%s' takes no field '%.64s'", tsr__ops[op].name, key);
      return false;
    }
  }
  *out_op = (tsr_proto_op_t)op;
  return true;
}

/* A non-negative integer field no larger than max: false, with the message
 * in `why`, if it is missing (and required) or wrong; *out untouched when
 * it is absent. */
static bool tsr__u64(const tsr_json_member_t *m, size_t n, const char *key, uint64_t max, bool required, uint64_t *out,
                     char *why, size_t why_cap) {
  const tsr_json_member_t *v = tsr_json_find(m, n, key);
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

/* The optional job field into job ("" when absent; tsr_lease_job_ok). */
static bool tsr__job(const tsr_json_member_t *m, size_t n, char job[TSR_LEASE_JOB_MAX + 1], char *why, size_t why_cap) {
  job[0] = '\0';
  const tsr_json_member_t *v = tsr_json_find(m, n, "job");
  if (v && (!tsr_json_get_string(v, job, TSR_LEASE_JOB_MAX + 1) || !tsr_lease_job_ok(job))) {
    job[0] = '\0';
    snprintf(why, why_cap, "field 'job' must be 1 to %d letters, digits and . _ : @ + -", TSR_LEASE_JOB_MAX - 1);
    return false;
  }
  return true;
}

/* An optional string field naming one of a small set, parsed by `parse`. */
static bool tsr__named(const tsr_json_member_t *m, size_t n, const char *key, bool (*parse)(const char *, void *),
                       void *out, const char *choices, char *why, size_t why_cap) {
  const tsr_json_member_t *v = tsr_json_find(m, n, key);
  char name[16];
  if (!v || (tsr_json_get_string(v, name, sizeof(name)) && parse(name, out))) return true;
  snprintf(why, why_cap, "field '%s' must be %s", key, choices);
  return false;
}

static bool tsr__action(const char *text, void *out) { return tsr_lease_action_parse(text, out); }
static bool tsr__over_limit(const char *text, void *out) { return tsr_lease_over_limit_parse(text, out); }

bool tsr_proto_create_read(const tsr_json_member_t *m, size_t n, tsr_proto_create_t *out, char *why, size_t why_cap) {
  tsr_proto_create_t r = {0};
  uint64_t device = 0, fraction = 0, sm = 0;
  if (!tsr__u64(m, n, "device", UINT32_MAX, true, &device, why, why_cap) ||
      !tsr__u64(m, n, "fraction_ppm", TSR_PPM_ONE, true, &fraction, why, why_cap) ||
      !tsr__u64(m, n, "duration_ns", INT64_MAX, true, &r.duration_ns, why, why_cap) ||
      !tsr__u64(m, n, "sm_ppm", TSR_PPM_ONE, false, &sm, why, why_cap) ||
      !tsr__named(m, n, "on_expiry", tsr__action, &r.on_expiry, "\"revoke\" or \"signal\"", why, why_cap) ||
      !tsr__named(m, n, "over_limit", tsr__over_limit, &r.over_limit, "\"signal\" or \"log\"", why, why_cap) ||
      !tsr__job(m, n, r.job, why, why_cap) || !tsr__u64(m, n, "wait_ns", INT64_MAX, false, &r.wait_ns, why, why_cap))
    return false;
  const tsr_json_member_t *user = tsr_json_find(m, n, "user");
  if (user && !tsr_json_get_string(user, r.user, sizeof(r.user))) {
    snprintf(why, why_cap, "field 'user' must be a user name");
    return false;
  }
  r.has_user = user != NULL;
  r.device = (uint32_t)device;
  r.fraction_ppm = (uint32_t)fraction;
  r.sm_ppm = (uint32_t)sm;
  *out = r;
  return true;
}

bool tsr_proto_id_read(const tsr_json_member_t *m, size_t n, uint64_t *out_id, char *why, size_t why_cap) {
  return tsr__u64(m, n, "id", UINT64_MAX, true, out_id, why, why_cap);
}

bool tsr_proto_list_read(const tsr_json_member_t *m, size_t n, tsr_proto_list_t *out, char *why, size_t why_cap) {
  tsr_proto_list_t r = {.limit = TSR_PROTO_LIST_PAGE_MAX};
  const tsr_json_member_t *all = tsr_json_find(m, n, "all");
  if (all && !tsr_json_get_bool(all, &r.all)) {
    snprintf(why, why_cap, "field 'all' must be true or false");
    return false;
  }
  const tsr_json_member_t *queued = tsr_json_find(m, n, "queued");
  if (queued && !tsr_json_get_bool(queued, &r.queued)) {
    snprintf(why, why_cap, "field 'queued' must be true or false");
    return false;
  }
  if (!tsr__u64(m, n, "after", UINT64_MAX, false, &r.after, why, why_cap) ||
      !tsr__u64(m, n, "limit", TSR_PROTO_LIST_PAGE_MAX, false, &r.limit, why, why_cap))
    return false;
  if (r.limit == 0) {
    snprintf(why, why_cap, "field 'limit' must be in [1, %d]", TSR_PROTO_LIST_PAGE_MAX);
    return false;
  }
  if (!tsr__job(m, n, r.job, why, why_cap)) return false;
  *out = r;
  return true;
}

bool tsr_proto_renew_read(const tsr_json_member_t *m, size_t n, tsr_proto_renew_t *out, char *why, size_t why_cap) {
  tsr_proto_renew_t r = {0};
  if (!tsr__u64(m, n, "id", UINT64_MAX, true, &r.id, why, why_cap) ||
      !tsr__u64(m, n, "duration_ns", INT64_MAX, false, &r.duration_ns, why, why_cap) ||
      !tsr__u64(m, n, "until_ns", INT64_MAX, false, &r.until_ns, why, why_cap))
    return false;
  if ((r.duration_ns != 0) == (r.until_ns != 0)) {
    snprintf(why, why_cap, "lease.renew takes one of 'duration_ns' and 'until_ns', more than 0");
    return false;
  }
  *out = r;
  return true;
}

bool tsr_proto_resize_read(const tsr_json_member_t *m, size_t n, tsr_proto_resize_t *out, char *why, size_t why_cap) {
  tsr_proto_resize_t r = {0};
  uint64_t fraction = 0, sm = 0;
  if (!tsr__u64(m, n, "id", UINT64_MAX, true, &r.id, why, why_cap) ||
      !tsr__u64(m, n, "fraction_ppm", TSR_PPM_ONE, false, &fraction, why, why_cap) ||
      !tsr__u64(m, n, "sm_ppm", TSR_PPM_ONE, false, &sm, why, why_cap))
    return false;
  const tsr_json_member_t *force = tsr_json_find(m, n, "force");
  if (force && !tsr_json_get_bool(force, &r.force)) {
    snprintf(why, why_cap, "field 'force' must be true or false");
    return false;
  }
  r.has_sm = tsr_json_find(m, n, "sm_ppm") != NULL;
  if (!fraction && !r.has_sm) {
    snprintf(why, why_cap, "lease.resize takes 'fraction_ppm' (more than 0), 'sm_ppm' or both");
    return false;
  }
  r.fraction_ppm = (uint32_t)fraction;
  r.sm_ppm = (uint32_t)sm;
  *out = r;
  return true;
}
