/* attach.c: a tenant process meets its leases.
 *
 * TESSERA_LEASE=ID[,ID...] names the leases (one per device); their regions
 * are found in TESSERA_REGION_DIR (default /run/tessera/regions), opened
 * read-write without following links, and a slot is claimed in each under
 * (pid, start time). No daemon round trip and no node-wide lock: attaching
 * is a few opens and one CAS per region. Without TESSERA_LEASE nothing is
 * governed and every call passes through (but see the node-wide mode).
 *
 * Without TESSERA_LEASE (the node-wide mode: the shim listed in
 * /etc/ld.so.preload, a process started by ssh, cron or a new shell) the
 * process takes its own user's active leases from the index the daemon
 * keeps, <region dir>/user-<uid>.leases; a user with no lease is not
 * governed, unless the node's policy (<region dir>/node.policy, written by
 * the daemon) is `deny`: then every allocation is refused. Root is never
 * governed this way.
 *
 * A lease that cannot be attached (missing, another user's, another region
 * version, ended) is one line on stderr and the policy (TESSERA_POLICY:
 * `pass`, the default, lets the process allocate ungoverned on that device;
 * `deny` refuses its allocations with out-of-memory). Never a crash.
 *
 * A CUDA device is charged to the lease whose region names its UUID, or,
 * for a region without a UUID (a declared device), to the lease whose
 * device index is the CUDA ordinal. A forked child attaches anew under its
 * own pid on its first hooked call; a process that exits gives its slots
 * back (and the daemon's reaper does, for one that is killed); one that
 * execs finds its old slots (same pid and start time) when the new image
 * attaches, and gives them back then. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fs.h"
#include "shim/shim.h"

tsr_shim_state_t tsr__shim;

static pthread_mutex_t tsr__init_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic bool tsr__inited;
static _Atomic uint64_t tsr__warned; /* bit per warn_once key */

void tsr_shim_warn_once(int key, const char *fmt, ...) {
  uint64_t bit = UINT64_C(1) << (key & 63);
  if (atomic_fetch_or(&tsr__warned, bit) & bit) return;
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  fprintf(stderr, "tessera: %s\n", msg);
}

/* At exit: the slots are given back. The mappings stay: other threads, and
 * destructors that run after this one (a framework's allocator freeing its
 * cache), may still be inside a hook, and the process's end unmaps them. */
static void tsr__detach_all(void) {
  tsr__shim.any_share = false; /* launches go straight to the driver from now */
  size_t n = tsr__shim.nleases;
  tsr__shim.nleases = 0; /* and charges and credits find no lease */
  for (size_t i = 0; i < n; i++) tsr_region_detach(tsr__shim.leases[i].region, tsr__shim.leases[i].slot);
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
    if (errno || v == 0 || (*end && *end != ',') || *n == TSR_SHIM_LEASES_MAX) break;
    ids[(*n)++] = v;
    p = *end ? end + 1 : end;
    if (!*p && *end == ',') break; /* a trailing comma */
  }
  if (*p || *n == 0) {
    tsr_shim_warn_once(1, "TESSERA_LEASE='%.64s' is not a list of lease ids (e.g. 12 or 12,13)", text);
    return false;
  }
  return true;
}

/* Reads a small file of the region directory into buf (NUL-terminated), not
 * through a link (tsr_fs_open_regular), only if it is owned by root or by
 * the caller and shorter than cap. False if it is absent or unusable. */
static bool tsr__read_small(const char *dir, const char *name, char *buf, size_t cap) {
  char path[4200];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  int fd;
  struct stat st;
  tsr_status_t err = tsr_fs_open_regular_stat(AT_FDCWD, path, O_RDONLY, 0, &fd, &st);
  if (err) {
    tsr_status_free(err);
    return false;
  }
  size_t got = 0;
  bool ok = (size_t)st.st_size < cap && (st.st_uid == 0 || st.st_uid == getuid());
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
    tsr_shim_warn_once(4, "%s/%s is not a lease index of this version; no lease taken", dir, name);
    return false;
  }
  unsigned long devices[TSR_SHIM_LEASES_MAX];
  while ((line = strtok_r(NULL, "\n", &save))) {
    char *end = NULL, *end2 = NULL;
    errno = 0;
    unsigned long long id = strtoull(line, &end, 10);
    unsigned long dev = end && *end == ' ' ? strtoul(end + 1, &end2, 10) : 0;
    if (errno || id == 0 || end == line || *end != ' ' || !end2 || end2 == end + 1 || *end2 != ' ') {
      tsr_shim_warn_once(4, "%s/%s has a bad line; no lease taken", dir, name);
      *n = 0;
      return false;
    }
    size_t k = 0;
    while (k < *n && devices[k] != dev) k++;
    if (k == TSR_SHIM_LEASES_MAX) continue; /* more devices than a process can name */
    ids[k] = id; /* a later (newer) lease of the same device replaces the older */
    devices[k] = dev;
    if (k == *n) (*n)++;
  }
  return *n > 0;
}

static void tsr__attach(void) {
  memset(&tsr__shim, 0, sizeof(tsr__shim));
  for (size_t i = 0; i < sizeof(tsr__shim.lease_of_device) / sizeof(int); i++)
    tsr__shim.lease_of_device[i] = -2;
  const char *policy = getenv("TESSERA_POLICY");
  tsr__shim.deny = policy && strcmp(policy, "deny") == 0;
  if (policy && *policy && strcmp(policy, "deny") != 0 && strcmp(policy, "pass") != 0)
    tsr_shim_warn_once(2, "TESSERA_POLICY='%.32s' is neither pass nor deny; using pass", policy);
  const char *leases = getenv("TESSERA_LEASE");
  const char *dir = getenv("TESSERA_REGION_DIR");
  if (!dir || !*dir) dir = "/run/tessera/regions";
  uint64_t ids[TSR_SHIM_LEASES_MAX];
  size_t n = 0;
  bool named = leases && *leases;
  if (!named) { /* the node-wide mode */
    if (getuid() == 0) return;
    char node[32];
    /* the node's policy wins over the environment's here */
    bool node_deny = tsr__read_small(dir, "node.policy", node, sizeof(node)) && strncmp(node, "deny", 4) == 0;
    if (node_deny) tsr__shim.deny = true;
    if (!tsr__user_leases(dir, ids, &n)) {
      if (!node_deny) return; /* no lease, policy pass: not governed */
      tsr_shim_warn_once(5, "no active lease of this user and the node's policy is deny: "
                            "GPU memory is refused (take one with 'tessera run')");
    }
  }
  tsr__shim.governed = true;
  if (!tsr_shim_ptrmap_init(&tsr__shim.map, (size_t)1 << 20)) {
    tsr_shim_warn_once(3, "cannot reserve the allocation map; the lease is not enforced");
    tsr__shim.governed = false;
    return;
  }
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
      tsr_shim_warn_once(8 + (int)i, "lease %" PRIu64 " is not enforced here (%s); policy %s",
                         ids[i], tsr_status_message(st), tsr__shim.deny ? "deny" : "pass");
      tsr_status_free(st);
      tsr_region_close(r);
      continue;
    }
    tsr_shim_lease_t *l = &tsr__shim.leases[tsr__shim.nleases++];
    l->id = ids[i];
    l->region = r;
    l->slot = slot;
    tsr_region_device_uuid(r, l->uuid, sizeof(l->uuid));
    tsr_region_stats_t s;
    tsr_region_stats(r, &s);
    l->device = s.device;
    tsr_region_compute(r, &l->compute);
    if (l->compute.sm_ppm) tsr__shim.any_share = true;
  }
}

static void tsr__child_after_fork(void) {
  /* the parent's slots and pointers are the parent's: the child attaches
   * under its own pid on its first hooked call */
  for (size_t i = 0; i < tsr__shim.nleases; i++) tsr_region_close(tsr__shim.leases[i].region);
  tsr__shim.nleases = 0;
  tsr_shim_ptrmap_free(&tsr__shim.map);
  tsr_shim_contexts_reset();
  tsr_shim_pools_reset();
  tsr_shim_graphs_reset();
  tsr_shim_launch_reset();
  tsr__shim.any_share = false;
  pthread_mutex_init(&tsr__init_lock, NULL);
  atomic_store(&tsr__inited, false);
}

void tsr_shim_ready(void) {
  if (atomic_load_explicit(&tsr__inited, memory_order_acquire)) return;
  pthread_mutex_lock(&tsr__init_lock);
  if (!atomic_load_explicit(&tsr__inited, memory_order_relaxed)) {
    static bool once_per_image;
    if (!tsr_shim_real_load()) {
      const char *name = getenv("TESSERA_REAL_LIBCUDA"), *why = dlerror();
      tsr_shim_warn_once(6, "cannot load the CUDA driver (%.200s): %.200s; every CUDA call fails",
                         name && *name ? name : "libcuda.so.1", why ? why : "not found");
    }
    tsr__attach();
    if (!once_per_image) { /* inherited by children: register once */
      once_per_image = true;
      pthread_atfork(NULL, NULL, tsr__child_after_fork);
      atexit(tsr__detach_all);
    }
    atomic_store_explicit(&tsr__inited, true, memory_order_release);
  }
  pthread_mutex_unlock(&tsr__init_lock);
}

/* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as nvidia-smi writes it. */
static void tsr__format_uuid(const CUuuid *u, char *buf, size_t cap) {
  const unsigned char *b = (const unsigned char *)u->bytes;
  snprintf(buf, cap,
           "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
           b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

int tsr_shim_lease_of_device(CUdevice dev) {
  if (!tsr__shim.governed) return -2;
  if (dev < 0 || dev >= (int)(sizeof(tsr__shim.lease_of_device) / sizeof(int))) return -1;
  int known = __atomic_load_n(&tsr__shim.lease_of_device[dev], __ATOMIC_ACQUIRE);
  if (known != -2) return known;
  char uuid[64] = "";
  CUuuid u;
  CUresult (*get)(CUuuid *, CUdevice) =
      tsr__real.cuDeviceGetUuid_v2 ? tsr__real.cuDeviceGetUuid_v2 : tsr__real.cuDeviceGetUuid;
  if (get && get(&u, dev) == CUDA_SUCCESS) tsr__format_uuid(&u, uuid, sizeof(uuid));
  int found = -1;
  for (size_t i = 0; i < tsr__shim.nleases && found < 0; i++) {
    const tsr_shim_lease_t *l = &tsr__shim.leases[i];
    if (l->uuid[0] ? strcmp(l->uuid, uuid) == 0 : l->device == (uint32_t)dev) found = (int)i;
  }
  __atomic_store_n(&tsr__shim.lease_of_device[dev], found, __ATOMIC_RELEASE);
  return found;
}

int tsr_shim_current_lease(void) {
  if (!tsr__shim.governed) return -2;
  CUdevice dev = -1;
  if (!tsr__real.cuCtxGetDevice || tsr__real.cuCtxGetDevice(&dev) != CUDA_SUCCESS) return -1;
  return tsr_shim_lease_of_device(dev);
}
