/* lockfile.c: the lock file of one lease, in the seed's key-value format.
 *
 *   pid: 12345
 *   user: alice
 *   host: node-01
 *   time: 2026-11-22T14:30:00.000000000Z
 *   device: 0
 *   fraction: 0.5
 *   partition: 17
 *   uid: 1000
 *   bytes: 42949672960
 *   sm: 0
 *   deadline: 2026-11-22T16:30:00.000000000Z
 *   creator: root
 *   creator_uid: 0
 *   on_expiry: signal
 *   over_limit: log
 *   job: 123456
 *
 * The first seven keys are the seed's; `time` is RFC 3339 UTC with
 * nanoseconds instead of local time so that it reads back exactly.
 * on_expiry (revoke or signal), over_limit (signal or log) and job (the
 * scheduler's job id) are the optional keys, each at most once: lock files
 * written before on_expiry existed lack it, and their leases take the
 * node's default; over_limit is written only for a lease that named its
 * own (absent: the node's over_limit, as for a file from before it); job is
 * there only for a lease an admin labelled. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/time.h"
#include "base/units.h"
#include "lease/lease.h"

enum {
  K_PID,
  K_USER,
  K_HOST,
  K_TIME,
  K_DEVICE,
  K_FRACTION,
  K_PARTITION,
  K_UID,
  K_BYTES,
  K_SM,
  K_DEADLINE,
  K_CREATOR,
  K_CREATOR_UID,
  K_ON_EXPIRY,
  K_OVER_LIMIT,
  K_JOB,
  K_COUNT
};
static const char *const tsr__keys[K_COUNT] = {
    "pid",   "user", "host",     "time",    "device",      "fraction",  "partition",  "uid",
    "bytes", "sm",   "deadline", "creator", "creator_uid", "on_expiry", "over_limit", "job",
};

void tsr_lease_lockfile_name(const tsr_lease_t *lease, char *buf, size_t cap) {
  snprintf(buf, cap, "gpu_%u_%04u_%llu.lock", lease->device, tsr_lease_lock_key(lease->fraction_ppm),
           (unsigned long long)lease->id);
}

size_t tsr_lease_lockfile_format(const tsr_lease_t *l, char *buf, size_t cap) {
  char start[48], deadline[48], fraction[16], sm[16];
  if (!tsr_time_format_rfc3339(l->start_wall_ns, 9, start, sizeof(start)) ||
      !tsr_time_format_rfc3339(l->deadline_wall_ns, 9, deadline, sizeof(deadline)))
    return 0;
  tsr_format_fraction(l->fraction_ppm, fraction, sizeof(fraction));
  tsr_format_fraction(l->sm_ppm, sm, sizeof(sm));
  int n = snprintf(buf, cap,
                   "pid: %d\nuser: %s\nhost: %s\ntime: %s\ndevice: %u\nfraction: %s\n"
                   "partition: %llu\nuid: %u\nbytes: %llu\nsm: %s\ndeadline: %s\n"
                   "creator: %s\ncreator_uid: %u\n",
                   l->pid, l->owner, l->host, start, l->device, fraction, (unsigned long long)l->id, l->owner_uid,
                   (unsigned long long)l->bytes, sm, deadline, l->creator, l->creator_uid);
  if (n < 0 || (size_t)n >= cap) return 0;
  if (l->on_expiry != TSR_LEASE_ACTION_DEFAULT) {
    int m = snprintf(buf + n, cap - (size_t)n, "on_expiry: %s\n", tsr_lease_action_name(l->on_expiry));
    if (m < 0 || (size_t)m >= cap - (size_t)n) return 0;
    n += m;
  }
  if (l->over_limit != TSR_LEASE_OVER_LIMIT_DEFAULT) {
    int m = snprintf(buf + n, cap - (size_t)n, "over_limit: %s\n", tsr_lease_over_limit_name(l->over_limit));
    if (m < 0 || (size_t)m >= cap - (size_t)n) return 0;
    n += m;
  }
  if (l->job[0]) {
    int m = snprintf(buf + n, cap - (size_t)n, "job: %s\n", l->job);
    if (m < 0 || (size_t)m >= cap - (size_t)n) return 0;
    n += m;
  }
  return (size_t)n;
}

/* `what` comes from the file and goes into the quarantine log line: control
 * characters in it are shown as '?', so a file cannot forge log lines. */
TSR_MUST_USE static tsr_status_t tsr__bad(int line, const char *fmt, const char *what) {
  char shown[256];
  snprintf(shown, sizeof(shown), "%s", what ? what : "");
  for (char *c = shown; *c; c++)
    if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';
  return tsr_status_make(TSR_DATA_LOSS, "line %d: %s%s", line, fmt, shown);
}

static bool tsr__u64_in(const char *v, uint64_t max, uint64_t *out) {
  tsr_status_t st = tsr_parse_u64(v, out);
  if (st) {
    tsr_status_free(st);
    return false;
  }
  return *out <= max;
}

/* Copies a name into a TSR_LEASE_NAME_MAX field if it is usable. */
static bool tsr__name_in(const char *v, char *dst) {
  if (!tsr_lease_name_ok(v)) return false;
  memcpy(dst, v, strlen(v) + 1);
  return true;
}

tsr_status_t tsr_lease_lockfile_parse(const char *text, size_t len, tsr_lease_t *out_lease) {
  if (len > 4096) return tsr_status_make(TSR_DATA_LOSS, "lock file is too large (%zu bytes)", len);
  if (len == 0) return tsr_status_make(TSR_DATA_LOSS, "lock file is empty");
  if (memchr(text, '\0', len)) return tsr_status_make(TSR_DATA_LOSS, "lock file holds a NUL byte");
  if (text[len - 1] != '\n')
    return tsr_status_make(TSR_DATA_LOSS, "lock file does not end with a newline (cut short?)");
  tsr_lease_t l;
  memset(&l, 0, sizeof(l));
  bool seen[K_COUNT] = {false};
  int line = 0;
  const char *p = text, *end = text + len;
  while (p < end) {
    line++;
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    char buf[256];
    size_t n = (size_t)(nl - p);
    if (n >= sizeof(buf)) return tsr__bad(line, "line too long", NULL);
    memcpy(buf, p, n);
    buf[n] = '\0';
    p = nl + 1;
    char *colon = strstr(buf, ": ");
    if (!colon) return tsr__bad(line, "expected 'key: value'", NULL);
    *colon = '\0';
    const char *key = buf, *val = colon + 2;
    int k = -1;
    for (int i = 0; i < K_COUNT; i++)
      if (strcmp(key, tsr__keys[i]) == 0) k = i;
    if (k < 0) return tsr__bad(line, "unknown key ", key);
    if (seen[k]) return tsr__bad(line, "duplicate key ", key);
    seen[k] = true;
    uint64_t u = 0;
    bool ok = true;
    switch (k) {
      case K_PID:
        ok = tsr__u64_in(val, INT32_MAX, &u);
        l.pid = (int32_t)u;
        break;
      case K_USER: ok = tsr__name_in(val, l.owner); break;
      case K_HOST: ok = tsr__name_in(val, l.host); break;
      case K_CREATOR: ok = tsr__name_in(val, l.creator); break;
      case K_TIME: ok = tsr_time_parse_rfc3339(val, &l.start_wall_ns); break;
      case K_DEADLINE: ok = tsr_time_parse_rfc3339(val, &l.deadline_wall_ns); break;
      case K_DEVICE:
        ok = tsr__u64_in(val, 1023, &u);
        l.device = (uint32_t)u;
        break;
      case K_PARTITION: /* beyond the largest id, the counter would wrap and ids repeat */
        ok = tsr__u64_in(val, TSR_LEASE_ID_MAX, &l.id) && l.id > 0;
        break;
      case K_UID:
        ok = tsr__u64_in(val, UINT32_MAX - 1, &u);
        l.owner_uid = (uint32_t)u;
        break;
      case K_CREATOR_UID:
        ok = tsr__u64_in(val, UINT32_MAX - 1, &u);
        l.creator_uid = (uint32_t)u;
        break;
      case K_BYTES: ok = tsr__u64_in(val, UINT64_MAX, &l.bytes) && l.bytes > 0; break;
      case K_ON_EXPIRY: ok = tsr_lease_action_parse(val, &l.on_expiry); break;
      case K_OVER_LIMIT: ok = tsr_lease_over_limit_parse(val, &l.over_limit); break;
      case K_JOB:
        ok = tsr_lease_job_ok(val);
        if (ok) snprintf(l.job, sizeof(l.job), "%s", val);
        break;
      case K_FRACTION:
      case K_SM: {
        uint32_t ppm = 0;
        tsr_status_t st = tsr_parse_fraction(val, &ppm);
        if (st) {
          tsr_status_free(st);
          ok = false;
        }
        if (k == K_FRACTION)
          ok = ok && ppm > 0, l.fraction_ppm = ppm;
        else
          l.sm_ppm = ppm;
        break;
      }
    }
    if (!ok) return tsr__bad(line, "bad value for ", key);
  }
  for (int i = 0; i < K_COUNT; i++)
    if (!seen[i] && i != K_ON_EXPIRY && i != K_OVER_LIMIT && i != K_JOB)
      return tsr_status_make(TSR_DATA_LOSS, "missing key '%s'", tsr__keys[i]);
  if (l.deadline_wall_ns <= l.start_wall_ns) return tsr_status_make(TSR_DATA_LOSS, "deadline is not after time");
  l.state = TSR_LEASE_ACTIVE;
  *out_lease = l;
  return NULL;
}
