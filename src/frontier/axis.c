/* axis.c: axis layout, the durable session counter and the axis allocator
 * (see include/tessera/frontier.h for the bit layout).
 *
 * "Never reused" rests on two counters: the per-domain ordinal, which never
 * wraps within a session, and the session number, which comes from a file
 * that survives restarts and only ever grows. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "frontier/internal.h"

tsr_axis_t tsr_axis_make(uint32_t machine, tsr_axis_domain_t domain, uint32_t session, uint64_t ordinal) {
  if (machine > TSR_AXIS_MACHINE_MAX || session > TSR_AXIS_SESSION_MAX || ordinal > TSR_AXIS_ORDINAL_MAX) return 0;
  if (domain < TSR_AXIS_DOMAIN_QUEUE || domain > TSR_AXIS_DOMAIN_EXTERNAL) return 0;
  return ((uint64_t)machine << 56) | ((uint64_t)domain << 52) | ((uint64_t)session << 32) | ordinal;
}

const char *tsr_axis_domain_name(tsr_axis_domain_t domain) {
  switch (domain) {
    case TSR_AXIS_DOMAIN_QUEUE: return "queue";
    case TSR_AXIS_DOMAIN_COLLECTIVE: return "collective";
    case TSR_AXIS_DOMAIN_HOST_THREAD: return "host_thread";
    case TSR_AXIS_DOMAIN_EXTERNAL: return "external";
  }
  return "invalid";
}

/* ---- durable session counter -------------------------------------------- */

/* The file holds the last session handed out as 10 decimal digits and a
 * newline, rewritten in place with one pwrite (11 bytes never straddle a
 * sector in practice) and fsync'd before the number is returned. */
#define TSR__SESSION_RECORD_LEN 11

TSR_MUST_USE static tsr_status_t tsr__session_locked(int fd, const char *path, uint32_t *out_session) {
  char buf[32];
  ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
  if (n < 0) return tsr_status_from_errno(errno, "axis session: read %s", path);
  uint64_t last = 0;
  if (n > 0) {
    if (n != TSR__SESSION_RECORD_LEN || buf[10] != '\n')
      return tsr_status_make(TSR_DATA_LOSS, "axis session: %s is not a session counter", path);
    for (int i = 0; i < 10; i++) {
      if (buf[i] < '0' || buf[i] > '9')
        return tsr_status_make(TSR_DATA_LOSS, "axis session: %s is not a session counter", path);
      last = last * 10 + (uint64_t)(buf[i] - '0');
    }
    if (last > TSR_AXIS_SESSION_MAX)
      return tsr_status_make(TSR_DATA_LOSS, "axis session: %s holds %llu, above %u", path, (unsigned long long)last,
                             TSR_AXIS_SESSION_MAX);
  }
  if (last == TSR_AXIS_SESSION_MAX)
    return tsr_status_make(TSR_RESOURCE_EXHAUSTED, "axis session: all %u sessions of %s used", TSR_AXIS_SESSION_MAX,
                           path);
  uint32_t next = (uint32_t)last + 1;
  snprintf(buf, sizeof(buf), "%010u\n", next);
  if (pwrite(fd, buf, TSR__SESSION_RECORD_LEN, 0) != TSR__SESSION_RECORD_LEN)
    return tsr_status_from_errno(errno ? errno : EIO, "axis session: write %s", path);
  if (fsync(fd) != 0) return tsr_status_from_errno(errno, "axis session: fsync %s", path);
  *out_session = next;
  return NULL;
}

tsr_status_t tsr_axis_session_next(const char *path, uint32_t *out_session) {
  if (!path || !out_session) return tsr_status_make(TSR_INVALID_ARGUMENT, "axis session: NULL argument");
  *out_session = 0;
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return tsr_status_from_errno(errno, "axis session: open %s", path);
  tsr_status_t st = NULL;
  if (flock(fd, LOCK_EX) != 0) {
    st = tsr_status_from_errno(errno, "axis session: lock %s", path);
  } else {
    st = tsr__session_locked(fd, path, out_session);
    flock(fd, LOCK_UN);
  }
  close(fd);
  return st;
}

/* ---- allocator ---------------------------------------------------------- */

tsr_status_t tsr_axis_allocator_init(tsr_axis_allocator_t *a, uint32_t machine, uint32_t session) {
  if (!a) return tsr_status_make(TSR_INVALID_ARGUMENT, "axis allocator: NULL");
  if (machine > TSR_AXIS_MACHINE_MAX)
    return tsr_status_make(TSR_INVALID_ARGUMENT, "axis allocator: machine %u above %u", machine, TSR_AXIS_MACHINE_MAX);
  if (session == 0 || session > TSR_AXIS_SESSION_MAX)
    return tsr_status_make(TSR_INVALID_ARGUMENT, "axis allocator: session %u not in 1..%u", session,
                           TSR_AXIS_SESSION_MAX);
  a->machine = machine;
  a->session = session;
  for (size_t i = 0; i < sizeof(a->next_ordinal) / sizeof(a->next_ordinal[0]); i++) atomic_init(&a->next_ordinal[i], 0);
  return NULL;
}

tsr_status_t tsr_axis_allocator_next(tsr_axis_allocator_t *a, tsr_axis_domain_t domain, tsr_axis_t *out_axis) {
  if (!a || !out_axis) return tsr_status_make(TSR_INVALID_ARGUMENT, "axis allocator: NULL");
  *out_axis = 0;
  if (domain < TSR_AXIS_DOMAIN_QUEUE || domain > TSR_AXIS_DOMAIN_EXTERNAL)
    return tsr_status_make(TSR_INVALID_ARGUMENT, "axis allocator: unknown domain %d", (int)domain);
  /* A 64-bit counter incremented once per call cannot wrap; values past the
   * 32-bit ordinal space are refused, so no ordinal is handed out twice. */
  uint64_t ordinal = atomic_fetch_add_explicit(&a->next_ordinal[domain], 1, memory_order_relaxed);
  if (ordinal > TSR_AXIS_ORDINAL_MAX)
    return tsr_status_make(TSR_RESOURCE_EXHAUSTED, "axis allocator: %s ordinals exhausted",
                           tsr_axis_domain_name(domain));
  *out_axis = tsr_axis_make(a->machine, domain, a->session, ordinal);
  return NULL;
}
