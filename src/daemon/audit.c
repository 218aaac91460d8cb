/* audit.c: the audit log, one JSON object per line, appended with a single
 * write(2) per event so that lines never interleave or tear. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "base/time.h"
#include "daemon/daemon.h"
#include "proto/proto.h"

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

static void tsr__emit(tsr_audit_t *a, json_t *o) {
  char stamp[48];
  uint64_t now = tsr_time_wall_ns();
  tsr_time_format_rfc3339(now, 6, stamp, sizeof(stamp));
  json_object_set_new(o, "time", json_string(stamp));
  json_object_set_new(o, "time_ns", json_integer((json_int_t)now));
  char *line = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
  json_decref(o);
  if (!line) return;
  size_t n = strlen(line);
  line[n] = '\n';
  if (a->len + n + 1 > a->cap) {
    size_t cap = a->cap ? a->cap : 16384;
    while (cap < a->len + n + 1) cap *= 2;
    char *b = realloc(a->buf, cap);
    if (!b) {
      tsr_audit_flush(a);
      ssize_t w = write(a->fd, line, n + 1); /* unbuffered, as a last resort */
      (void)w;
      free(line);
      return;
    }
    a->buf = b;
    a->cap = cap;
  }
  memcpy(a->buf + a->len, line, n + 1);
  a->len += n + 1;
  free(line);
}

static void tsr__actor(json_t *o, const tsr_identity_t *who) {
  if (!who) return;
  json_object_set_new(o, "actor", json_string(who->user));
  json_object_set_new(o, "actor_uid", json_integer(who->uid));
  json_object_set_new(o, "actor_pid", json_integer(who->pid));
}

void tsr_audit_lease(tsr_audit_t *a, const char *event, const tsr_identity_t *who,
                     const tsr_lease_t *l, int64_t late_ns) {
  if (!a) return;
  json_t *o = json_object();
  json_object_set_new(o, "event", json_string(event));
  tsr__actor(o, who);
  json_object_set_new(o, "lease", json_integer((json_int_t)l->id));
  json_object_set_new(o, "owner", json_string(l->owner));
  json_object_set_new(o, "owner_uid", json_integer(l->owner_uid));
  json_object_set_new(o, "device", json_integer(l->device));
  json_object_set_new(o, "fraction_ppm", json_integer(l->fraction_ppm));
  json_object_set_new(o, "bytes", json_integer((json_int_t)l->bytes));
  json_object_set_new(o, "deadline_ns", json_integer((json_int_t)(l->deadline_wall_ns > INT64_MAX ? INT64_MAX : l->deadline_wall_ns)));
  if (strcmp(event, "expire") == 0) json_object_set_new(o, "late_ns", json_integer(late_ns));
  tsr__emit(a, o);
}

void tsr_audit_deny(tsr_audit_t *a, const tsr_identity_t *who, const char *op, const char *code,
                    const char *message) {
  if (!a) return;
  json_t *o = json_object();
  json_object_set_new(o, "event", json_string("deny"));
  tsr__actor(o, who);
  json_object_set_new(o, "op", json_string(op));
  json_object_set_new(o, "code", json_string(code));
  json_object_set_new(o, "message", json_string(message));
  tsr__emit(a, o);
}
