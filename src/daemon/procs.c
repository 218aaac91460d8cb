/* procs.c: one snapshot of /proc per enforcement tick.
 *
 * NVML names processes by host pid; a tenant in a PID namespace (a
 * container) knows only its own pid, and writes that into its region slot
 * with the inode of its namespace. The snapshot holds, for every process,
 * both (the host pid, the innermost NSpid of /proc/PID/status, and the
 * namespace), so a slot resolves to the host process by (pidns, nspid,
 * start time), and the ppid for walking a lease's process tree. Start
 * times are the same seen from every namespace (clock ticks since boot),
 * which is what makes a reused pid tell itself apart.
 *
 * Cost: three small reads per process (stat, status, and a stat(2) of
 * ns/pid), bounded by TSR_PROCS_MAX; the daemon takes a snapshot only when
 * some lease is active or the deny policy needs one. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/array.h"
#include "base/log.h"
#include "daemon/procs.h"

/* Reads `name` of /proc/<pid> into buf (NUL-terminated); the length, or -1. */
static ssize_t tsr__read_at(int proc_fd, const char *pid, const char *name, char *buf, size_t cap) {
  char path[64];
  snprintf(path, sizeof(path), "%s/%s", pid, name);
  int fd = openat(proc_fd, path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = read(fd, buf, cap - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = '\0';
  return n;
}

/* The real, effective and saved uids ("Uid:") from a status file. */
static bool tsr__parse_uids(const char *buf, uint32_t out[3]) {
  const char *u = strstr(buf, "\nUid:");
  if (!u) return false;
  char *p = (char *)u + 5;
  for (int i = 0; i < 3; i++) {
    char *end = NULL;
    errno = 0;
    unsigned long v = strtoul(p, &end, 10);
    if (end == p || errno || v > UINT32_MAX) return false;
    out[i] = (uint32_t)v;
    p = end;
  }
  return true;
}

/* The real uid and the innermost NSpid from a status file. */
static bool tsr__parse_status(const char *buf, uint32_t *out_uid, int32_t *out_nspid) {
  uint32_t ids[3];
  bool uid = tsr__parse_uids(buf, ids);
  if (uid) *out_uid = ids[0];
  const char *ns = strstr(buf, "\nNSpid:");
  if (ns) { /* "NSpid:\t4711\t2": the last number is the innermost */
    const char *p = ns + 7, *end = strchr(p, '\n');
    if (!end) end = p + strlen(p);
    long last = -1;
    while (p < end) {
      char *next = NULL;
      long v = strtol(p, &next, 10);
      if (next == p) break;
      last = v;
      p = next;
    }
    if (last > 0 && last <= INT32_MAX) *out_nspid = (int32_t)last;
  }
  return uid;
}

static uint64_t tsr__now_ticks(uint64_t hz) {
  struct timespec ts;
  clock_gettime(CLOCK_BOOTTIME, &ts);
  return (uint64_t)ts.tv_sec * hz + (uint64_t)ts.tv_nsec * hz / 1000000000u;
}

static const tsr_procs_t *tsr__sort_ctx; /* qsort has no context; one thread only */

static int tsr__cmp_pid(const void *a, const void *b) {
  int32_t x = ((const tsr_proc_t *)a)->pid, y = ((const tsr_proc_t *)b)->pid;
  return x < y ? -1 : x > y;
}

static int tsr__cmp_ns(const void *a, const void *b) {
  const tsr_proc_t *x = &tsr__sort_ctx->v[*(const uint32_t *)a];
  const tsr_proc_t *y = &tsr__sort_ctx->v[*(const uint32_t *)b];
  if (x->pidns != y->pidns) return x->pidns < y->pidns ? -1 : 1;
  return x->nspid < y->nspid ? -1 : x->nspid > y->nspid;
}

static int tsr__cmp_ppid(const void *a, const void *b) {
  int32_t x = tsr__sort_ctx->v[*(const uint32_t *)a].ppid;
  int32_t y = tsr__sort_ctx->v[*(const uint32_t *)b].ppid;
  return x < y ? -1 : x > y;
}

void tsr_procs_scan(tsr_procs_t *ps) {
  ps->fresh = true;
  ps->count = 0;
  ps->ns_unknown = false;
  ps->truncated = false;
  if (!ps->hz) {
    long hz = sysconf(_SC_CLK_TCK);
    ps->hz = hz > 0 ? (uint64_t)hz : 100;
  }
  if (!tsr_region_proc_pidns(0, &ps->own_pidns)) ps->own_pidns = 0;
  ps->taken_ticks = tsr__now_ticks(ps->hz);
  int proc_fd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int list_fd = proc_fd >= 0 ? dup(proc_fd) : -1;
  DIR *dir = list_fd >= 0 ? fdopendir(list_fd) : NULL;
  if (!dir) {
    tsr_log_warn("cannot read /proc: %s", strerror(errno));
    if (list_fd >= 0) close(list_fd);
    if (proc_fd >= 0) close(proc_fd);
    return;
  }
  struct dirent *e;
  char buf[4096];
  while ((e = readdir(dir)) != NULL) {
    const char *name = e->d_name;
    if (name[0] < '1' || name[0] > '9' || strspn(name, "0123456789") != strlen(name)) continue;
    long pid = strtol(name, NULL, 10);
    if (pid <= 0 || pid > INT32_MAX) continue;
    if (ps->count >= TSR_PROCS_MAX) {
      ps->truncated = true;
      break;
    }
    tsr_proc_t p = {.pid = (int32_t)pid, .nspid = (int32_t)pid};
    if (tsr__read_at(proc_fd, name, "stat", buf, sizeof(buf)) < 0 ||
        !tsr_region_proc_stat_parse(buf, &p.ppid, &p.start_ticks))
      continue; /* gone meanwhile */
    if (tsr__read_at(proc_fd, name, "status", buf, sizeof(buf)) < 0 || !tsr__parse_status(buf, &p.uid, &p.nspid))
      continue;
    char ns[64];
    struct stat sb;
    snprintf(ns, sizeof(ns), "%d/ns/pid", (int)pid);
    if (fstatat(proc_fd, ns, &sb, 0) == 0)
      p.pidns = (uint64_t)sb.st_ino;
    else if (errno == EACCES || errno == EPERM)
      ps->ns_unknown = true; /* another user's process, for a daemon that is not root */
    /* (a zombie has no namespace left: it is no tenant's live process) */
    tsr_proc_t *v = tsr_array_grow(ps->v, &ps->cap, ps->count + 1, sizeof(*v), 256);
    if (!v) {
      ps->truncated = true;
      break;
    }
    ps->v = v;
    ps->v[ps->count++] = p;
  }
  closedir(dir);
  close(proc_fd);
  if (ps->truncated) tsr_log_debug("/proc snapshot cut at %zu processes", ps->count);
  if (ps->count == 0) return;
  qsort(ps->v, ps->count, sizeof(*ps->v), tsr__cmp_pid);
  uint32_t *by_ns = tsr_array_grow(ps->by_ns, &ps->ns_cap, ps->count, sizeof(uint32_t), 256);
  if (by_ns) ps->by_ns = by_ns;
  uint32_t *by_ppid = tsr_array_grow(ps->by_ppid, &ps->ppid_cap, ps->count, sizeof(uint32_t), 256);
  if (by_ppid) ps->by_ppid = by_ppid;
  if (!by_ns || !by_ppid) { /* without its indexes the snapshot is useless: empty, cannot tell */
    ps->count = 0;
    ps->truncated = true;
    return;
  }
  for (size_t i = 0; i < ps->count; i++) ps->by_ns[i] = ps->by_ppid[i] = (uint32_t)i;
  tsr__sort_ctx = ps;
  qsort(ps->by_ns, ps->count, sizeof(uint32_t), tsr__cmp_ns);
  qsort(ps->by_ppid, ps->count, sizeof(uint32_t), tsr__cmp_ppid);
  tsr__sort_ctx = NULL;
}

void tsr_procs_free(tsr_procs_t *ps) {
  free(ps->v);
  free(ps->by_ns);
  free(ps->by_ppid);
  memset(ps, 0, sizeof(*ps));
}

static bool tsr__pid_before(const void *proc, const void *pid) {
  return ((const tsr_proc_t *)proc)->pid < *(const int32_t *)pid;
}

const tsr_proc_t *tsr_procs_find(const tsr_procs_t *ps, int32_t pid) {
  size_t lo = tsr_array_lower_bound(ps->v, ps->count, sizeof(*ps->v), &pid, tsr__pid_before);
  return lo < ps->count && ps->v[lo].pid == pid ? &ps->v[lo] : NULL;
}

bool tsr_procs_uid(const tsr_procs_t *ps, int32_t pid, uint32_t *out_uid) {
  const tsr_proc_t *p = tsr_procs_find(ps, pid);
  if (p) {
    *out_uid = p->uid;
    return true;
  }
  uint32_t ids[3];
  if (!tsr_procs_uids_of(pid, ids)) return false;
  *out_uid = ids[0];
  return true;
}

bool tsr_procs_uids_of(int32_t pid, uint32_t out_uids[3]) {
  if (pid <= 0) return false;
  char dir[32], buf[4096];
  snprintf(dir, sizeof(dir), "/proc/%d", (int)pid); /* absolute: the fd is ignored */
  return tsr__read_at(AT_FDCWD, dir, "status", buf, sizeof(buf)) >= 0 && tsr__parse_uids(buf, out_uids);
}

static bool tsr__own_ns(const tsr_procs_t *ps, uint64_t pidns) { return pidns == 0 || pidns == ps->own_pidns; }

/* The process with namespace `pidns`, innermost pid `nspid` and start time
 * `start`, through the (pidns, nspid) index; NULL if none. */
static const tsr_proc_t *tsr__find_ns(const tsr_procs_t *ps, uint64_t pidns, int32_t nspid, uint64_t start) {
  size_t lo = 0, hi = ps->count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    const tsr_proc_t *p = &ps->v[ps->by_ns[mid]];
    if (p->pidns < pidns || (p->pidns == pidns && p->nspid < nspid))
      lo = mid + 1;
    else
      hi = mid;
  }
  for (size_t i = lo; i < ps->count; i++) {
    const tsr_proc_t *p = &ps->v[ps->by_ns[i]];
    if (p->pidns != pidns || p->nspid != nspid) break;
    if (p->start_ticks == start) return p;
  }
  return NULL;
}

const tsr_proc_t *tsr_procs_resolve(const tsr_procs_t *ps, const tsr_region_proc_t *proc) {
  if (proc->pid <= 0) return NULL;
  if (tsr__own_ns(ps, proc->pidns)) {
    const tsr_proc_t *p = tsr_procs_find(ps, proc->pid);
    return p && p->start_ticks == proc->start_ticks ? p : NULL;
  }
  return tsr__find_ns(ps, proc->pidns, proc->pid, proc->start_ticks);
}

bool tsr_procs_start_of(int32_t pid, uint64_t *out_ticks) { return tsr_region_proc_start(pid, out_ticks); }

bool tsr_procs_alive(void *ctx, const tsr_region_proc_t *proc) {
  tsr_procs_t *ps = ctx;
  if (!ps->own_pidns && !tsr_region_proc_pidns(0, &ps->own_pidns)) ps->own_pidns = 0;
  if (tsr__own_ns(ps, proc->pidns)) { /* afresh: the pid is ours to look up */
    uint64_t ticks = 0;
    return tsr_procs_start_of(proc->pid, &ticks) && ticks == proc->start_ticks;
  }
  if (!ps->fresh) tsr_procs_scan(ps);
  if (tsr_procs_resolve(ps, proc)) return true;
  /* Not in the snapshot. Gone, unless the snapshot cannot tell: a process
   * whose namespace could not be read (pidns 0 in the snapshot) with the
   * same innermost pid and start time may be it; the snapshot missed
   * processes; or the process started about when it was taken (a second's
   * margin: start times count in ticks, the snapshot is not instant). */
  if (ps->truncated || ps->count == 0) return true;
  if (ps->ns_unknown && tsr__find_ns(ps, 0, proc->pid, proc->start_ticks)) return true;
  return proc->start_ticks + ps->hz >= ps->taken_ticks;
}

size_t tsr_procs_descendants(const tsr_procs_t *ps, int32_t pid, uint64_t start_ticks, size_t max,
                             void (*fn)(void *ctx, const tsr_proc_t *proc), void *ctx) {
  const tsr_proc_t *root = tsr_procs_find(ps, pid);
  if (!root || root->start_ticks != start_ticks || max == 0) return 0;
  /* breadth first over the by-ppid index; the queue holds pids whose
   * children are still to visit (a pid is visited once: its parent is one) */
  int32_t *queue = malloc((max + 1) * sizeof(*queue));
  if (!queue) return 0;
  size_t head = 0, tail = 0, visited = 0;
  queue[tail++] = pid;
  while (head < tail && visited < max) {
    const tsr_proc_t *parent = tsr_procs_find(ps, queue[head++]);
    if (!parent) continue;
    size_t lo = 0, hi = ps->count;
    while (lo < hi) {
      size_t mid = lo + (hi - lo) / 2;
      if (ps->v[ps->by_ppid[mid]].ppid < parent->pid)
        lo = mid + 1;
      else
        hi = mid;
    }
    for (size_t i = lo; i < ps->count && visited < max; i++) {
      const tsr_proc_t *c = &ps->v[ps->by_ppid[i]];
      if (c->ppid != parent->pid) break;
      /* a child started before its parent is a reused ppid, not a child */
      if (c->pid == parent->pid || c->start_ticks < parent->start_ticks) continue;
      fn(ctx, c);
      visited++;
      if (tail <= max) queue[tail++] = c->pid;
    }
  }
  free(queue);
  return visited;
}
