/* tenant.c: a governed process meets its leases (tenant/tenant.h says how).
 * The shims call tsr_tenant_attach once per process image (again in a
 * forked child), before their first charge. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fs.h"
#include "tenant/dlsym.h"
#include "tenant/tenant.h"

static _Atomic uint64_t tsr__warned; /* bit per warn_once key */

void tsr_tenant_warn_once(tsr_tenant_warning_t key, const char *fmt, ...) {
  uint64_t bit = UINT64_C(1) << ((unsigned)key & 63);
  if (atomic_fetch_or(&tsr__warned, bit) & bit) return;
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  fprintf(stderr, "tessera: %s\n", msg);
}

/* Parses TESSERA_LEASE strictly; false (with a warning) if unusable. */
static bool tsr__parse_ids(const char *text, uint64_t *ids, size_t *n) {
  *n = 0;
  const char *p = text;
  while (*p) {
    char *end = NULL;
    errno = 0;
    if (*p < '0' || *p > '9') break;
    unsigned long long v = strtoull(p, &end, 10);
    if (errno || v == 0 || (*end && *end != ',') || *n == TSR_TENANT_LEASES_MAX) break;
    ids[(*n)++] = v;
    p = *end ? end + 1 : end;
    if (!*p && *end == ',') break; /* a trailing comma */
  }
  if (*p || *n == 0) {
    tsr_tenant_warn_once(TSR_WARN_LEASE_ENV, "TESSERA_LEASE='%.64s' is not a list of lease ids (e.g. 12 or 12,13)",
                         text);
    return false;
  }
  return true;
}

/* Reads a small file of the region directory into buf (NUL-terminated), not
 * through a link (tsr_fs_open_regular), only if it belongs to the
 * directory's owner (the daemon's user), nobody else may write it, and it
 * is shorter than cap. A file the caller owns is never believed (unless the
 * caller runs the daemon): she could have written anything there. False if
 * it is absent or unusable. */
static bool tsr__read_small(const char *dir, const char *name, char *buf, size_t cap) {
  char path[4200];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  struct stat ds;
  if (stat(dir, &ds) != 0) return false;
  int fd;
  struct stat st;
  tsr_status_t err = tsr_fs_open_regular_stat(AT_FDCWD, path, O_RDONLY, 0, &fd, &st);
  if (err) {
    tsr_status_free(err);
    return false;
  }
  size_t got = 0;
  bool ok = (size_t)st.st_size < cap && st.st_uid == ds.st_uid && !(st.st_mode & 022);
  while (ok && got < (size_t)st.st_size) {
    ssize_t r = read(fd, buf + got, cap - 1 - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += (size_t)r;
  }
  close(fd);
  buf[got] = '\0';
  return ok;
}

/* The user's active leases from the daemon's index ("tessera-leases 1",
 * then "<id> <device> <uuid or ->" per line, oldest first), one per device:
 * the newest, the one the daemon's backstop attributes the user's
 * processes to. False when there is no index (no lease); a damaged one is
 * said once and taken as none. */
static bool tsr__user_leases(const char *dir, uint64_t *ids, size_t *n) {
  char name[64], text[16384]; /* the daemon writes at most 64 lines of ~110 bytes */
  snprintf(name, sizeof(name), "user-%u.leases", (unsigned)getuid());
  *n = 0;
  if (!tsr__read_small(dir, name, text, sizeof(text))) return false;
  char *save = NULL, *line = strtok_r(text, "\n", &save);
  if (!line || strcmp(line, "tessera-leases 1") != 0) {
    tsr_tenant_warn_once(TSR_WARN_LEASE_INDEX, "%s/%s is not a lease index of this version; no lease taken", dir, name);
    return false;
  }
  unsigned long devices[TSR_TENANT_LEASES_MAX];
  while ((line = strtok_r(NULL, "\n", &save))) {
    char *end = NULL, *end2 = NULL;
    errno = 0;
    unsigned long long id = strtoull(line, &end, 10);
    unsigned long dev = end && *end == ' ' ? strtoul(end + 1, &end2, 10) : 0;
    if (errno || id == 0 || !end || end == line || *end != ' ' || !end2 || end2 == end + 1 || *end2 != ' ') {
      tsr_tenant_warn_once(TSR_WARN_LEASE_INDEX, "%s/%s has a bad line; no lease taken", dir, name);
      *n = 0;
      return false;
    }
    size_t k = 0;
    while (k < *n && devices[k] != dev) k++;
    if (k == TSR_TENANT_LEASES_MAX) continue; /* more devices than a process can name */
    ids[k] = id;                              /* a later (newer) lease of the same device replaces the older */
    devices[k] = dev;
    if (k == *n) (*n)++;
  }
  return *n > 0;
}

const char *tsr_tenant_getenv(const char *name) {
  /* in a set-user-ID (or otherwise secure) program the environment is the
   * caller's, a user who may not choose a lease, a region directory or a
   * library for it: secure_getenv answers nothing there (AT_SECURE) */
  return secure_getenv(name);
}

void tsr_tenant_attach(tsr_tenant_t *t) {
  memset(t, 0, sizeof(*t));
  const char *policy = tsr_tenant_getenv("TESSERA_POLICY");
  t->deny = policy && strcmp(policy, "deny") == 0;
  if (policy && *policy && strcmp(policy, "deny") != 0 && strcmp(policy, "pass") != 0)
    tsr_tenant_warn_once(TSR_WARN_POLICY_ENV, "TESSERA_POLICY='%.32s' is neither pass nor deny; using pass", policy);
  const char *leases = tsr_tenant_getenv("TESSERA_LEASE");
  const char *dir = tsr_tenant_getenv("TESSERA_REGION_DIR");
  if (!dir || !*dir) dir = "/run/tessera/regions";
  uint64_t ids[TSR_TENANT_LEASES_MAX];
  size_t n = 0;
  bool named = leases && *leases;
  if (!named) { /* the node-wide mode */
    if (getuid() == 0) return;
    char node[32];
    /* the node's policy wins over the environment's here */
    bool node_deny = tsr__read_small(dir, "node.policy", node, sizeof(node)) && strncmp(node, "deny", 4) == 0;
    if (node_deny) t->deny = true;
    if (!tsr__user_leases(dir, ids, &n)) {
      if (!node_deny) return; /* no lease, policy pass: not governed */
      tsr_tenant_warn_once(TSR_WARN_DENY_WITHOUT_LEASE,
                           "no active lease of this user and the node's policy is deny: "
                           "GPU memory is refused (take one with 'tessera run')");
    }
  }
  t->governed = true;
  if (named && !tsr__parse_ids(leases, ids, &n)) return; /* governed, no lease: policy */
  tsr_region_proc_t self;
  tsr_region_proc_self(&self);
  for (size_t i = 0; i < n; i++) {
    char name[64], path[4200];
    tsr_region_file_name(ids[i], name, sizeof(name));
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    tsr_region_t *r = NULL;
    tsr_status_t st = tsr_region_open(AT_FDCWD, path, ids[i], &r);
    uint32_t slot = 0;
    if (!st) {
      tsr_region_stats_t s;
      tsr_region_stats(r, &s);
      if (s.state != TSR_REGION_ACTIVE)
        st = tsr_status_make(TSR_FAILED_PRECONDITION, "lease %" PRIu64 " has ended", ids[i]);
    }
    if (!st) {
      /* a slot under our own pid and start time is this process before an
       * exec: the driver freed that image's memory with it */
      tsr_region_slot_info_t held[TSR_REGION_SLOTS];
      uint32_t nheld = tsr_region_slots(r, held, TSR_REGION_SLOTS);
      for (uint32_t k = 0; k < nheld; k++)
        if (held[k].proc.pid == self.pid && held[k].proc.start_ticks == self.start_ticks &&
            held[k].proc.pidns == self.pidns)
          tsr_region_detach(r, held[k].slot);
      st = tsr_region_attach(r, &self, &slot);
      if (st && tsr_status_code(st) == TSR_RESOURCE_EXHAUSTED) {
        /* every slot held: the daemon's reaper may not have run since
         * their holders died; free those of dead processes and try again */
        tsr_status_free(st);
        tsr_region_reap(r, NULL, NULL, NULL);
        st = tsr_region_attach(r, &self, &slot);
      }
    }
    if (st) {
      tsr_tenant_warn_once((tsr_tenant_warning_t)(TSR_WARN_LEASE_NOT_ENFORCED + i),
                           "lease %" PRIu64 " is not enforced here (%s); policy %s", ids[i], tsr_status_message(st),
                           t->deny ? "deny" : "pass");
      tsr_status_free(st);
      tsr_region_close(r);
      continue;
    }
    tsr_tenant_lease_t *l = &t->leases[t->nleases++];
    l->id = ids[i];
    l->region = r;
    l->slot = slot;
    tsr_region_device_uuid(r, l->uuid, sizeof(l->uuid));
    tsr_region_device_pci(r, l->pci, sizeof(l->pci));
    tsr_region_device_opencl(r, l->opencl, sizeof(l->opencl));
    tsr_region_stats_t s;
    tsr_region_stats(r, &s);
    l->device = s.device;
    tsr_region_compute(r, &l->compute);
  }
}

void tsr_tenant_detach(tsr_tenant_t *t) {
  size_t n = t->nleases;
  t->nleases = 0; /* charges and credits find no lease from here on */
  for (size_t i = 0; i < n; i++) tsr_region_detach(t->leases[i].region, t->leases[i].slot);
}

void tsr_tenant_forget(tsr_tenant_t *t) {
  size_t n = t->nleases;
  t->nleases = 0;
  for (size_t i = 0; i < n; i++) tsr_region_close(t->leases[i].region);
}

void tsr_tenant_view(const tsr_tenant_lease_t *l, uint64_t *total, uint64_t *free_b) {
  tsr_region_reclaim(l->region, NULL); /* what dead processes held is free */
  tsr_region_stats_t s;
  tsr_region_stats(l->region, &s);
  uint64_t left = s.state == TSR_REGION_ACTIVE && s.used_bytes < s.limit_bytes ? s.limit_bytes - s.used_bytes : 0;
  if (s.limit_bytes < *total) *total = s.limit_bytes;
  if (left < *free_b) *free_b = left;
  if (*free_b > *total) *free_b = *total;
}

bool tsr_tenant_opencl_name_matches(const char *pattern, const char *name) {
  size_t n = strlen(pattern);
  if (n == 0) return false;
  if (pattern[n - 1] == '*') return strncmp(pattern, name, n - 1) == 0;
  return strcmp(pattern, name) == 0;
}

void tsr_tenant_once_slow(tsr_tenant_once_t *o, void (*start)(void), void (*child)(void), void (*at_exit)(void)) {
  pthread_mutex_lock(&o->lock);
  if (!atomic_load_explicit(&o->done, memory_order_relaxed)) {
    start();
    if (!o->registered) { /* inherited by children: register once */
      o->registered = true;
      pthread_atfork(NULL, NULL, child);
      atexit(at_exit);
    }
    atomic_store_explicit(&o->done, true, memory_order_release);
  }
  pthread_mutex_unlock(&o->lock);
}

void tsr_tenant_once_again(tsr_tenant_once_t *o) {
  pthread_mutex_init(&o->lock, NULL); /* another thread may have held it at the fork */
  atomic_store(&o->done, false);
}

/* libc's dlvsym: GLIBC_2.34's, else the architecture's first (a glibc
 * before 2.34 has it in libdl; not found there: the shims then find no
 * next dlsym and hook nothing) */
static void *tsr__libc_dlvsym(void) {
  void *p = tsr_tenant_object_symbol("libc.so.6", "dlvsym", "GLIBC_2.34");
#ifdef TSR_TENANT_GLIBC_BASE
  if (!p) p = tsr_tenant_object_symbol("libc.so.6", "dlvsym", TSR_TENANT_GLIBC_BASE);
#endif
  return p;
}

/* The definition of `name` (dlsym or dlvsym) after this object: libc's
 * dlvsym(RTLD_NEXT, ...) called from here, so that "next" is counted from
 * the shim. Not a tail call: the return address must be this object's.
 * Runs once per name (tsr__next_cached), so libc's table is read twice. */
static void *tsr__next_after_shim(const char *name) {
  void *libc = tsr__libc_dlvsym();
  tsr_tenant_dlvsym_fn v;
  memcpy(&v, &libc, sizeof(v));
  if (!v) return NULL;
  void *p = v(RTLD_NEXT, name, "GLIBC_2.34");
#ifdef TSR_TENANT_GLIBC_BASE
  if (!p) p = v(RTLD_NEXT, name, TSR_TENANT_GLIBC_BASE);
#endif
  __asm__ volatile("" ::: "memory");
  return p;
}

/* tsr__next_after_shim(name), looked up once into *slot */
static void *tsr__next_cached(_Atomic(void *) *slot, const char *name) {
  void *p = atomic_load_explicit(slot, memory_order_acquire);
  if (p) return p;
  p = tsr__next_after_shim(name);
  atomic_store_explicit(slot, p, memory_order_release);
  return p;
}

static _Atomic(void *) tsr__next_dlsym, tsr__next_dlvsym;

tsr_tenant_dlsym_fn tsr_tenant_next_dlsym(void) {
  void *p = tsr__next_cached(&tsr__next_dlsym, "dlsym");
  tsr_tenant_dlsym_fn f;
  memcpy(&f, &p, sizeof(f));
  return f;
}

tsr_tenant_dlvsym_fn tsr_tenant_next_dlvsym(void) {
  void *p = tsr__next_cached(&tsr__next_dlvsym, "dlvsym");
  tsr_tenant_dlvsym_fn f;
  memcpy(&f, &p, sizeof(f));
  return f;
}

static void *tsr__dlsym_none(void *handle, const char *symbol) {
  (void)handle, (void)symbol;
  return NULL;
}

static void *tsr__dlvsym_none(void *handle, const char *symbol, const char *version) {
  (void)handle, (void)symbol, (void)version;
  return NULL;
}

tsr_tenant_dlsym_fn tsr_tenant_dlsym_route(tsr_tenant_dlsym_fn hook) {
  if (hook) return hook;
  tsr_tenant_dlsym_fn next = tsr_tenant_next_dlsym();
  return next ? next : tsr__dlsym_none;
}

tsr_tenant_dlvsym_fn tsr_tenant_dlvsym_next_route(void) {
  tsr_tenant_dlvsym_fn next = tsr_tenant_next_dlvsym();
  return next ? next : tsr__dlvsym_none;
}

void *tsr_tenant_dlvsym_hooked(tsr_tenant_dlsym_fn hook, void *handle, const char *symbol, const char *version) {
  void *p = tsr_tenant_dlvsym_next_route()(handle, symbol, version);
  tsr_tenant_dlsym_fn next = tsr_tenant_next_dlsym();
  if (!p || !hook || !next || next(handle, symbol) != p) return p;
  return hook(handle, symbol);
}

bool tsr_tenant_is_dl_lookup(const char *symbol) {
  return symbol && (strcmp(symbol, "dlsym") == 0 || strcmp(symbol, "dlvsym") == 0);
}
