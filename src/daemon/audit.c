/* audit.c: the audit log, one JSON object per line.
 *
 * Grants, releases and expiries are written at once, each with one write(2)
 * whose result is checked: the caller fails the request (and undoes it) when
 * its line cannot be written, so the log never misses a change that a client
 * was told of. A line cut short by a full disk is cut off again
 * (ftruncate to the size before it), so no torn line stays behind.
 *
 * Refusals are cheap for anyone to cause, so they are rate-limited per user:
 * the first `deny_rate` refusals of a user in each second are written in
 * full, the rest are counted and summed up in one "deny_summary" line when
 * the second is over. Refusal lines are gathered and written with the next
 * event line or at the end of the event-loop batch, before its replies.
 *
 * The log is rotated by size: past `max_bytes`, audit.log becomes
 * audit.log.1 (.1 becomes .2, ... up to `keep`; the oldest goes), or, with
 * keep = 0, audit.log.<time in ns> and nothing is ever deleted. Every file is
 * opened in its directory's descriptor without following links, created
 * with O_EXCL. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/array.h"
#include "base/fs.h"
#include "base/json.h"
#include "base/log.h"
#include "base/time.h"
#include "daemon/audit.h"
#include "daemon/identity.h"
#include "region/region.h"

#define TSR__DENY_USERS 1024 /* users tracked in one second; more share one entry */

/* One user's refusals in the current one-second window. */
typedef struct {
  bool used;
  uint32_t uid;
  char user[TSR_LEASE_NAME_MAX];
  uint64_t window;     /* mono seconds */
  uint32_t written;    /* lines written in full in this window */
  uint64_t suppressed; /* counted, not written */
  char last_op[32], last_code[32];
} tsr__deny_t;

struct tsr_audit_s {
  int dir_fd, fd;
  char dir[PATH_MAX], name[NAME_MAX + 1];
  uint64_t size;      /* bytes in the current file */
  uint64_t max_bytes; /* rotate past this; 0 = never */
  uint32_t keep;
  uint32_t deny_rate;
  char *pending; /* refusal lines not yet written */
  size_t pending_len, pending_cap;
  tsr_json_writer_t line;
  tsr__deny_t deny[TSR__DENY_USERS];
  tsr__deny_t deny_others;                   /* when every slot is taken */
  uint64_t denies;                           /* tsr_audit_deny calls (for /metrics) */
  tsr__deny_t deny_scratch[TSR__DENY_USERS]; /* for rebuilding `deny` */
  uint64_t swept;                            /* the last second whose windows were closed */
  uint64_t summaries;                        /* deny_summary lines written (for tests and logs) */
  bool warned;
};

/* ---- files ---------------------------------------------------------------- */

TSR_MUST_USE static tsr_status_t tsr__open_current(tsr_audit_t *a, bool exclusive) {
  int flags = O_WRONLY | O_APPEND | O_CREAT | (exclusive ? O_EXCL : 0);
  int fd;
  struct stat st;
  TSR_RETURN_IF_ERROR(tsr_status_annotate(tsr_fs_open_regular_stat(a->dir_fd, a->name, flags, 0640, &fd, &st),
                                          "audit log in %s", a->dir));
  if (st.st_uid != geteuid() || st.st_nlink != 1) {
    close(fd);
    return tsr_status_make(TSR_FAILED_PRECONDITION,
                           "audit log %s/%s is not this daemon's own file (owner or links differ); "
                           "move it away",
                           a->dir, a->name);
  }
  a->fd = fd;
  a->size = (uint64_t)st.st_size;
  return NULL;
}

/* Moves the current file aside and starts a new one. */
TSR_MUST_USE static tsr_status_t tsr__rotate(tsr_audit_t *a) {
  char from[NAME_MAX + 32], to[NAME_MAX + 32];
  if (a->keep == 0) {
    snprintf(to, sizeof(to), "%s.%llu", a->name, (unsigned long long)tsr_time_wall_ns());
  } else {
    snprintf(to, sizeof(to), "%s.%u", a->name, a->keep);
    if (unlinkat(a->dir_fd, to, 0) != 0 && errno != ENOENT)
      return tsr_status_from_errno(errno, "rotate audit log: remove %s/%s", a->dir, to);
    for (uint32_t k = a->keep; k > 1; k--) {
      snprintf(from, sizeof(from), "%s.%u", a->name, k - 1);
      snprintf(to, sizeof(to), "%s.%u", a->name, k);
      if (renameat(a->dir_fd, from, a->dir_fd, to) != 0 && errno != ENOENT)
        return tsr_status_from_errno(errno, "rotate audit log: rename %s/%s", a->dir, from);
    }
    snprintf(to, sizeof(to), "%s.1", a->name);
  }
  if (renameat(a->dir_fd, a->name, a->dir_fd, to) != 0)
    return tsr_status_from_errno(errno, "rotate audit log: rename %s/%s", a->dir, a->name);
  close(a->fd);
  a->fd = -1;
  tsr_status_t st = tsr__open_current(a, true);
  if (!st) tsr_log_info("audit log rotated: %s/%s -> %s", a->dir, a->name, to);
  return st;
}

/* Appends `len` bytes with one write; on a short or failed write the file is
 * cut back to where it was, so it never ends in half a line. */
TSR_MUST_USE static tsr_status_t tsr__write(tsr_audit_t *a, const char *data, size_t len) {
  if (a->fd < 0) return tsr_status_make(TSR_IO_ERROR, "the audit log is not open");
  if (a->max_bytes && a->size > 0 && a->size + len > a->max_bytes) {
    tsr_status_t st = tsr__rotate(a);
    if (st) {
      if (a->fd < 0) return st;
      /* could not rotate, but the old file is still open: keep logging */
      tsr_log_error("%s", tsr_status_message(st));
      tsr_status_free(st);
    }
  }
  ssize_t w;
  do {
    w = write(a->fd, data, len);
  } while (w < 0 && errno == EINTR);
  if (w == (ssize_t)len) {
    a->size += len;
    a->warned = false;
    return NULL;
  }
  int err = w < 0 ? errno : ENOSPC;
  if (w > 0 && ftruncate(a->fd, (off_t)a->size) != 0)
    tsr_log_error("audit log %s/%s: could not cut off a partial line: %s", a->dir, a->name, strerror(errno));
  tsr_status_t st = tsr_status_from_errno(err, "write audit log %s/%s", a->dir, a->name);
  /* whatever errno said, a write that did not go through is an I/O error */
  tsr_status_t io = tsr_status_make(TSR_IO_ERROR, "%s", tsr_status_message(st));
  tsr_status_free(st);
  return io;
}

tsr_status_t tsr_audit_open(const tsr_audit_config_t *cfg, tsr_audit_t **out) {
  *out = NULL;
  size_t n = strlen(cfg->path);
  if (cfg->path[0] != '/' || n >= PATH_MAX)
    return tsr_status_make(TSR_INVALID_ARGUMENT, "audit log path '%s' must be absolute", cfg->path);
  tsr_audit_t *a = calloc(1, sizeof(*a));
  if (!a) return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  a->fd = a->dir_fd = -1;
  a->max_bytes = cfg->max_bytes;
  a->keep = cfg->keep;
  a->deny_rate = cfg->deny_rate;
  char copy[PATH_MAX];
  memcpy(copy, cfg->path, n + 1);
  snprintf(a->name, sizeof(a->name), "%s", basename(copy));
  memcpy(copy, cfg->path, n + 1);
  snprintf(a->dir, sizeof(a->dir), "%s", dirname(copy));
  tsr_status_t st = NULL;
  if (!a->name[0] || strcmp(a->name, "/") == 0 || strcmp(a->name, ".") == 0 || strcmp(a->name, "..") == 0)
    st = tsr_status_make(TSR_INVALID_ARGUMENT, "audit log path '%s' names no file", cfg->path);
  if (!st) st = tsr_fs_check_private_dir(a->dir, "audit log directory");
  if (!st) {
    a->dir_fd = open(a->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (a->dir_fd < 0) st = tsr_status_from_errno(errno, "open audit log directory %s", a->dir);
  }
  if (!st) st = tsr__open_current(a, false);
  if (st) {
    tsr_audit_close(a);
    return st;
  }
  *out = a;
  return NULL;
}

void tsr_audit_close(tsr_audit_t *a) {
  if (!a) return;
  tsr_audit_flush(a, UINT64_MAX);
  if (a->fd >= 0) close(a->fd);
  if (a->dir_fd >= 0) close(a->dir_fd);
  free(a->pending);
  tsr_json_writer_free(&a->line);
  free(a);
}

/* ---- lines ------------------------------------------------------------------ */

/* Starts a line in a->line: {"event":..,"time":..,"time_ns":..[,"actor":..] */
static void tsr__head(tsr_audit_t *a, const char *event, const tsr_identity_t *who) {
  tsr_json_writer_t *w = &a->line;
  char stamp[48];
  uint64_t now = tsr_time_wall_ns();
  tsr_time_format_rfc3339(now, 6, stamp, sizeof(stamp));
  tsr_json_writer_reset(w);
  tsr_json_object_begin(w);
  tsr_json_key_string(w, "event", event);
  tsr_json_key_string(w, "time", stamp);
  tsr_json_key_u64(w, "time_ns", now);
  if (who) {
    tsr_json_key_string(w, "actor", who->user);
    tsr_json_key_u64(w, "actor_uid", who->uid);
    tsr_json_key(w, "actor_pid");
    tsr_json_i64(w, who->pid);
  }
}

/* Ends the line in a->line; false if it could not be built (out of memory). */
static bool tsr__end(tsr_audit_t *a) {
  tsr_json_object_end(&a->line);
  return !a->line.failed && a->line.buf;
}

/* Adds the line in a->line (plus a newline) to the pending refusal lines. */
static void tsr__pend(tsr_audit_t *a) {
  size_t n = a->line.len;
  char *p = tsr_array_grow(a->pending, &a->pending_cap, a->pending_len + n + 1, 1, 4096);
  if (!p) {
    tsr_log_warn("out of memory: an audit refusal line is lost");
    return;
  }
  a->pending = p;
  memcpy(p + a->pending_len, a->line.buf, n);
  p[a->pending_len + n] = '\n';
  a->pending_len += n + 1;
}

/* Ends the event line in a->line and writes it now, after the refusals
 * gathered so far (in the same write, to keep order). */
TSR_MUST_USE static tsr_status_t tsr__write_event(tsr_audit_t *a) {
  if (!tsr__end(a)) return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory writing the audit log");
  size_t keep = a->pending_len;
  tsr__pend(a);
  if (a->pending_len == keep) return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory writing the audit log");
  tsr_status_t st = tsr__write(a, a->pending, a->pending_len);
  if (st) {
    a->pending_len = keep; /* the event line goes; the refusals wait for the next try */
    return st;
  }
  a->pending_len = 0;
  return NULL;
}

tsr_status_t tsr_audit_lease(tsr_audit_t *a, const char *event, const tsr_identity_t *who, const tsr_lease_t *l,
                             const tsr_audit_expiry_t *expiry) {
  if (!a) return NULL;
  tsr__head(a, event, who);
  tsr_json_writer_t *w = &a->line;
  tsr_json_key_u64(w, "lease", l->id);
  tsr_json_key_string(w, "owner", l->owner);
  tsr_json_key_u64(w, "owner_uid", l->owner_uid);
  tsr_json_key_u64(w, "device", l->device);
  tsr_json_key_u64(w, "fraction_ppm", l->fraction_ppm);
  tsr_json_key_u64(w, "bytes", l->bytes);
  tsr_json_key_u64(w, "deadline_ns", l->deadline_wall_ns);
  if (expiry) {
    tsr_json_key_u64(w, "late_ns", expiry->late_ns);
    if (expiry->during_downtime) tsr_json_key_bool(w, "during_downtime", true);
  }
  return tsr__write_event(a);
}

tsr_status_t tsr_audit_backstop(tsr_audit_t *a, const tsr_audit_backstop_t *b) {
  if (!a) return NULL;
  tsr__head(a, "backstop", NULL);
  tsr_json_writer_t *w = &a->line;
  tsr_json_key_u64_or_null(w, "lease", b->lease != 0, b->lease);
  tsr_json_key_string(w, "owner", b->owner ? b->owner : "");
  tsr_json_key_u64(w, "owner_uid", b->uid);
  tsr_json_key_u64(w, "device", b->device);
  tsr_json_key(w, "pids");
  tsr_json_array_begin(w);
  for (size_t i = 0; i < b->npids; i++) tsr_json_i64(w, b->pids[i]);
  tsr_json_array_end(w);
  tsr_json_key_u64(w, "used_bytes", b->used_bytes);
  tsr_json_key_u64(w, "limit_bytes", b->limit_bytes);
  tsr_json_key_string(w, "action", b->action);
  tsr_json_key_string(w, "reason", b->reason);
  return tsr__write_event(a);
}

tsr_status_t tsr_audit_region(tsr_audit_t *a, const tsr_lease_t *l, uint32_t damage, bool repaired) {
  if (!a) return NULL;
  tsr__head(a, "region", NULL);
  tsr_json_writer_t *w = &a->line;
  tsr_json_key_u64(w, "lease", l->id);
  tsr_json_key_string(w, "owner", l->owner);
  tsr_json_key_u64(w, "owner_uid", l->owner_uid);
  tsr_json_key(w, "found");
  tsr_json_array_begin(w);
  static const struct {
    uint32_t bit;
    const char *name;
  } kinds[] = {{TSR_REGION_DAMAGE_SIZE, "size"},
               {TSR_REGION_DAMAGE_HEADER, "header"},
               {TSR_REGION_DAMAGE_STATE, "state"},
               {TSR_REGION_DAMAGE_COMPUTE, "compute"},
               {TSR_REGION_DAMAGE_COUNTERS, "counters"}};
  for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
    if (damage & kinds[i].bit) tsr_json_string(w, kinds[i].name);
  tsr_json_array_end(w);
  tsr_json_key_string(w, "action", repaired ? "repaired" : "not repaired");
  return tsr__write_event(a);
}

/* The rate-limit entry of `uid` for the window `sec`, or NULL. */
static tsr__deny_t *tsr__deny_slot(tsr_audit_t *a, const tsr_identity_t *who) {
  size_t h = (who->uid * 2654435761u) % TSR__DENY_USERS;
  for (size_t i = 0; i < TSR__DENY_USERS; i++) {
    tsr__deny_t *e = &a->deny[(h + i) % TSR__DENY_USERS];
    if (e->used && e->uid == who->uid) return e;
    if (!e->used) {
      memset(e, 0, sizeof(*e));
      e->used = true;
      e->uid = who->uid;
      snprintf(e->user, sizeof(e->user), "%s", who->user);
      return e;
    }
  }
  return NULL;
}

static void tsr__summary(tsr_audit_t *a, tsr__deny_t *e) {
  tsr__head(a, "deny_summary", NULL);
  tsr_json_writer_t *w = &a->line;
  if (e == &a->deny_others) {
    tsr_json_key_string(w, "actor", "*");
  } else {
    tsr_json_key_string(w, "actor", e->user);
    tsr_json_key_u64(w, "actor_uid", e->uid);
  }
  tsr_json_key_u64(w, "suppressed", e->suppressed);
  tsr_json_key_u64(w, "window_s", 1);
  tsr_json_key_string(w, "last_op", e->last_op);
  tsr_json_key_string(w, "last_code", e->last_code);
  if (tsr__end(a)) tsr__pend(a);
  a->summaries++;
}

static void tsr__sweep(tsr_audit_t *a, uint64_t sec);

void tsr_audit_deny(tsr_audit_t *a, const tsr_identity_t *who, const char *op, const char *code, const char *message,
                    uint64_t now_mono_ns) {
  if (!a) return;
  a->denies++;
  uint64_t sec = now_mono_ns / TSR_NS_PER_S;
  tsr__deny_t *e = tsr__deny_slot(a, who);
  if (!e) e = &a->deny_others;
  if (e->window != sec) {
    if (e->suppressed) tsr__summary(a, e);
    e->window = sec;
    e->written = 0;
    e->suppressed = 0;
  }
  snprintf(e->last_op, sizeof(e->last_op), "%s", op);
  snprintf(e->last_code, sizeof(e->last_code), "%s", code);
  if (e->written >= a->deny_rate) {
    e->suppressed++;
    return;
  }
  e->written++;
  tsr__head(a, "deny", who);
  tsr_json_key_string(&a->line, "op", op);
  tsr_json_key_string(&a->line, "code", code);
  tsr_json_key_string(&a->line, "message", message ? message : "");
  if (tsr__end(a)) tsr__pend(a);
}

void tsr_audit_flush(tsr_audit_t *a, uint64_t now_mono_ns) {
  if (!a) return;
  uint64_t sec = now_mono_ns == UINT64_MAX ? UINT64_MAX : now_mono_ns / TSR_NS_PER_S;
  if (sec != a->swept) tsr__sweep(a, sec);
  if (a->pending_len == 0) return;
  tsr_status_t st = tsr__write(a, a->pending, a->pending_len);
  if (st) {
    if (!a->warned) tsr_log_error("audit refusal lines lost: %s", tsr_status_message(st));
    a->warned = true;
    tsr_status_free(st);
  }
  a->pending_len = 0;
  if (a->pending_cap > (1u << 20)) { /* a burst: give the memory back */
    free(a->pending);
    a->pending = NULL;
    a->pending_cap = 0;
  }
}

/* Closes the windows before second `sec`: sums up what they counted and frees
 * their slots. Runs at most once a second. */
static void tsr__sweep(tsr_audit_t *a, uint64_t sec) {
  a->swept = sec;
  bool freed = false;
  for (size_t i = 0; i < TSR__DENY_USERS; i++) {
    tsr__deny_t *e = &a->deny[i];
    if (!e->used) continue;
    if (e->window >= sec) continue;
    if (e->suppressed) tsr__summary(a, e);
    e->suppressed = 0;
    e->used = false;
    freed = true;
  }
  if (a->deny_others.window < sec && a->deny_others.suppressed) {
    tsr__summary(a, &a->deny_others);
    a->deny_others.suppressed = 0;
  }
  if (freed) { /* freed slots may break probe chains: rebuild the table */
    tsr__deny_t *live = a->deny_scratch;
    size_t n = 0;
    for (size_t i = 0; i < TSR__DENY_USERS; i++)
      if (a->deny[i].used) live[n++] = a->deny[i];
    memset(a->deny, 0, sizeof(a->deny));
    for (size_t i = 0; i < n; i++) {
      size_t h = (live[i].uid * 2654435761u) % TSR__DENY_USERS;
      while (a->deny[h].used) h = (h + 1) % TSR__DENY_USERS;
      a->deny[h] = live[i];
    }
  }
}

uint64_t tsr_audit_summaries(const tsr_audit_t *a) { return a ? a->summaries : 0; }
uint64_t tsr_audit_denies(const tsr_audit_t *a) { return a ? a->denies : 0; }
