/* audit.c: the audit log, one JSON object per line, appended with a single
 * write(2) per event so that lines never interleave or tear. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "base/time.h"
#include "daemon/daemon.h"

/* Lines are gathered in `buf` and written with one write(2) per event-loop
 * batch (tsr_audit_flush), before any reply of that batch is sent: a client
 * never sees an answer whose audit line is not in the file. */
struct tsr_audit_s {
  int fd;
  bool warned;
  char *buf;
  size_t len, cap;
};

tsr_status_t tsr_audit_open(const char *path, tsr_audit_t **out) {
  *out = NULL;
  int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
  if (fd < 0) return tsr_status_from_errno(errno, "open audit log %s", path);
  tsr_audit_t *a = calloc(1, sizeof(*a));
  if (!a) {
    close(fd);
    return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  }
  a->fd = fd;
  *out = a;
  return NULL;
}

void tsr_audit_flush(tsr_audit_t *a) {
  if (!a || a->len == 0) return;
  size_t off = 0;
  while (off < a->len) {
    ssize_t w = write(a->fd, a->buf + off, a->len - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      if (!a->warned) tsr_log_error("audit log write failed: %s", w < 0 ? strerror(errno) : "no progress");
      a->warned = true;
      break;
    }
    off += (size_t)w;
  }
  a->len = 0;
}

void tsr_audit_close(tsr_audit_t *a) {
  if (!a) return;
  tsr_audit_flush(a);
  close(a->fd);
  free(a->buf);
  free(a);
}

/* Appends `len` bytes to the batch buffer. */
static void tsr__append(tsr_audit_t *a, const char *line, size_t len) {
  if (a->len + len > a->cap) {
    size_t cap = a->cap ? a->cap : 16384;
    while (cap < a->len + len) cap *= 2;
    char *b = realloc(a->buf, cap);
    if (!b) {
      tsr_audit_flush(a);
      ssize_t w = write(a->fd, line, len); /* unbuffered, as a last resort */
      (void)w;
      return;
    }
    a->buf = b;
    a->cap = cap;
  }
  memcpy(a->buf + a->len, line, len);
  a->len += len;
}

/* Writes `src` as the inside of a JSON string (quotes, backslashes and
 * control characters escaped), truncated to fit. */
static void tsr__escape(char *dst, size_t cap, const char *src) {
  size_t n = 0;
  for (const unsigned char *p = (const unsigned char *)src; *p && n + 7 < cap; p++) {
    if (*p == '"' || *p == '\\') {
      dst[n++] = '\\';
      dst[n++] = (char)*p;
    } else if (*p < 0x20) {
      n += (size_t)snprintf(dst + n, cap - n, "\\u%04x", *p);
    } else {
      dst[n++] = (char)*p;
    }
  }
  dst[n] = '\0';
}

/* Starts a line: {"event":"...","time":"...","time_ns":N[,"actor":...] */
static int tsr__head(char *buf, size_t cap, const char *event, const tsr_identity_t *who) {
  char stamp[48], actor[2 * TSR_LEASE_NAME_MAX + 8];
  uint64_t now = tsr_time_wall_ns();
  tsr_time_format_rfc3339(now, 6, stamp, sizeof(stamp));
  int n = snprintf(buf, cap, "{\"event\":\"%s\",\"time\":\"%s\",\"time_ns\":%llu", event, stamp,
                   (unsigned long long)now);
  if (who) {
    tsr__escape(actor, sizeof(actor), who->user);
    n += snprintf(buf + n, cap - (size_t)n, ",\"actor\":\"%s\",\"actor_uid\":%u,\"actor_pid\":%d",
                  actor, who->uid, who->pid);
  }
  return n;
}

void tsr_audit_lease(tsr_audit_t *a, const char *event, const tsr_identity_t *who,
                     const tsr_lease_t *l, int64_t late_ns) {
  if (!a) return;
  char line[1024], owner[2 * TSR_LEASE_NAME_MAX + 8];
  int n = tsr__head(line, sizeof(line), event, who);
  tsr__escape(owner, sizeof(owner), l->owner);
  n += snprintf(line + n, sizeof(line) - (size_t)n,
                ",\"lease\":%llu,\"owner\":\"%s\",\"owner_uid\":%u,\"device\":%u,"
                "\"fraction_ppm\":%u,\"bytes\":%llu,\"deadline_ns\":%llu",
                (unsigned long long)l->id, owner, l->owner_uid, l->device, l->fraction_ppm,
                (unsigned long long)l->bytes, (unsigned long long)l->deadline_wall_ns);
  if (strcmp(event, "expire") == 0)
    n += snprintf(line + n, sizeof(line) - (size_t)n, ",\"late_ns\":%lld", (long long)late_ns);
  n += snprintf(line + n, sizeof(line) - (size_t)n, "}\n");
  tsr__append(a, line, (size_t)n);
}

void tsr_audit_deny(tsr_audit_t *a, const tsr_identity_t *who, const char *op, const char *code,
                    const char *message) {
  if (!a) return;
  char line[2048], msg[1024], opx[96];
  int n = tsr__head(line, sizeof(line), "deny", who);
  tsr__escape(msg, sizeof(msg), message ? message : "");
  tsr__escape(opx, sizeof(opx), op);
  n += snprintf(line + n, sizeof(line) - (size_t)n, ",\"op\":\"%s\",\"code\":\"%s\",\"message\":\"%s\"}\n",
                opx, code, msg);
  if (n >= (int)sizeof(line)) n = (int)sizeof(line) - 1, line[n - 1] = '\n';
  tsr__append(a, line, (size_t)n);
}
