/* A stand-in for libnvidia-ml.so.1 with the entry points tessera uses, so the
 * dlopen path is tested on machines without a GPU. FAKE_NVML_MODE picks the
 * behaviour: "two" (default: an H100 with MIG off and an A100 with MIG on),
 * "init_fail", "none" (no GPU), "no_attr" (attributes unsupported: the SM
 * count comes from cores and compute capability), "memory_fail",
 * "ci_fail" (MIG: creating a compute instance fails), "minor_unsupported"
 * (nvmlDeviceGetMinorNumber answers NOT_SUPPORTED), "minor_mixed" (it
 * answers for GPU 0 and NOT_SUPPORTED for GPU 1).
 *
 * MIG (GPU 1): GPU instances are placed as on an A100 (profiles 0-4 are 1,
 * 2, 3, 4 and 7 slices) and refused where they would overlap a live one;
 * each gets one compute instance whose device has the UUID
 * "MIG-fake-<start>-<slices>". fake_nvml_live() tells the tests how many GPU
 * and compute instances are alive. There is no nvmlDeviceSetMigMode: the
 * fake's MIG mode cannot be changed, as tessera must never try.
 *
 * The fake driver's devices (the backstop's tests): with
 * FAKE_NVML_CUDA_STATE=PATH, the state file of the fake libcuda
 * (FAKE_CUDA_STATE, tests/fakes/cuda/fake_cuda_state.h) decides the
 * devices: as many as it has, each an H100 with its total memory and the
 * UUID the fake driver's cuDeviceGetUuid gives, so the daemon's devices and
 * the tenants' line up. nvmlDeviceGetComputeRunningProcesses_v3 then lists
 * the processes holding memory on the device and their bytes, by host pid
 * as the real NVML does: the fake driver records the pid a tenant sees
 * (inside a PID namespace, its own), so a pid that is not a host process
 * mapping the state file is looked up by the innermost NSpid of the
 * processes that do; a row of no live process is left out. FAKE_NVML_MODE=procs_unsupported makes the call answer
 * NOT_SUPPORTED. Without FAKE_NVML_CUDA_STATE the call lists no process.
 *
 * Per-process utilisation (`tessera top`): nvmlDeviceGetProcessUtilization
 * reads the file FAKE_NVML_UTIL names at each call, lines "PID SMUTIL" or
 * "PID SMUTIL DEVICE" (then for that device index only; without, for
 * every device), one sample per line, stamped with the time of the call;
 * a line that is not that is skipped. No file, or no line for the device:
 * NOT_FOUND (no sample), as the real one says when nothing ran.
 * FAKE_NVML_MODE=util_unsupported makes it answer NOT_SUPPORTED. */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef FAKE_NVML_WITH_CUDA_STATE
#include "fake_cuda_state.h"

/* Every function below is NVML's ABI (or the fake's own control, read with
 * dlsym), declared by nvml.h, which the build machines lack: there is no
 * header of ours to declare them in. */
#pragma GCC diagnostic ignored "-Wmissing-prototypes"
#endif

typedef struct dev {
  int i;
  char uuid[64];
} * dev_t_;
static struct dev devs[2] = {{0, ""}, {1, ""}};
static const char *mode(void) {
  const char *m = getenv("FAKE_NVML_MODE");
  return m ? m : "two";
}

/* ---- the fake driver's devices --------------------------------------------- */

#ifdef FAKE_NVML_WITH_CUDA_STATE
static fake_cuda_state_t *cuda_state;
static char cuda_state_path[PATH_MAX];
static struct dev cuda_devs[FAKE_CUDA_MAX_DEVICES];

/* The fake driver's state, when FAKE_NVML_CUDA_STATE names it. */
static fake_cuda_state_t *cuda(void) {
  const char *path = getenv("FAKE_NVML_CUDA_STATE");
  if (!path || !*path) return NULL;
  if (!cuda_state) {
    char err[256];
    if (fake_cuda_state_open(path, 0, NULL, &cuda_state, err, sizeof err) != 0) {
      fprintf(stderr, "fake_nvml: %s\n", err);
      return NULL;
    }
    if (!realpath(path, cuda_state_path)) snprintf(cuda_state_path, sizeof cuda_state_path, "%s", path);
    for (int i = 0; i < FAKE_CUDA_MAX_DEVICES; i++) {
      cuda_devs[i].i = 1000 + i;
      fake_cuda_uuid_string(i, cuda_devs[i].uuid, sizeof cuda_devs[i].uuid);
    }
  }
  return cuda_state;
}
static int cuda_index(dev_t_ h) { return h->i >= 1000 ? h->i - 1000 : -1; }

/* Does process `pid` (of this /proc) map the state file? */
static int maps_state(long pid) {
  char path[64], line[PATH_MAX + 256];
  snprintf(path, sizeof path, "/proc/%ld/maps", pid);
  FILE *f = fopen(path, "re");
  if (!f) return 0;
  size_t n = strlen(cuda_state_path);
  int found = 0;
  while (!found && fgets(line, sizeof line, f)) {
    size_t len = strlen(line);
    if (len > n && line[len - 1] == '\n' && strncmp(line + len - 1 - n, cuda_state_path, n) == 0) found = 1;
  }
  fclose(f);
  return found;
}

/* The innermost NSpid of host process `pid`, or -1. */
static long inner_pid(long pid) {
  char path[64], buf[4096];
  snprintf(path, sizeof path, "/proc/%ld/status", pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = '\0';
  const char *p = strstr(buf, "\nNSpid:");
  if (!p) return -1;
  p += 7;
  long last = -1;
  for (;;) {
    char *end;
    long v = strtol(p, &end, 10);
    if (end == p) break;
    last = v;
    p = end;
    if (*p == '\n') break;
  }
  return last;
}

/* The host pid of a live process the fake driver knows as `pid`, or 0 when
 * no process mapping the state file answers to it (it is gone: the real
 * driver forgets a process when it dies). */
static unsigned int host_pid(int pid) {
  if (maps_state(pid) && inner_pid(pid) == pid) return (unsigned int)pid;
  DIR *d = opendir("/proc");
  long found = -1;
  struct dirent *e;
  while (d && found < 0 && (e = readdir(d)) != NULL) {
    char *end;
    long x = strtol(e->d_name, &end, 10);
    if (*end || x <= 0 || x == pid) continue;
    if (inner_pid(x) == pid && maps_state(x)) found = x;
  }
  if (d) closedir(d);
  return found > 0 ? (unsigned int)found : 0;
}
#else
static __attribute__((unused)) void *cuda(void) { return NULL; }
static int cuda_index(dev_t_ h) {
  (void)h;
  return -1;
}
#endif

/* As NVML counts its initialisations, the last shutdown lets the driver
 * double's state go (the library may be unloaded next). */
static int inits;
int nvmlInit_v2(void) {
  if (strcmp(mode(), "init_fail") == 0) return 9; /* DRIVER_NOT_LOADED */
  inits++;
  return 0;
}
int nvmlShutdown(void) {
  if (inits > 0 && --inits == 0) {
#ifdef FAKE_NVML_WITH_CUDA_STATE
    if (cuda_state) fake_cuda_state_close(cuda_state);
    cuda_state = NULL;
#endif
  }
  return 0;
}
const char *nvmlErrorString(int r) {
  switch (r) {
    case 9: return "Driver Not Loaded";
    case 23: return "Insufficient Resources";
    default: return "Unknown Error";
  }
}
int nvmlDeviceGetCount_v2(unsigned int *n) {
#ifdef FAKE_NVML_WITH_CUDA_STATE
  if (cuda()) {
    *n = (unsigned int)fake_cuda_state_ndevices(cuda());
    return 0;
  }
#endif
  *n = strcmp(mode(), "none") == 0 ? 0 : 2;
  return 0;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned int i, dev_t_ *h) {
#ifdef FAKE_NVML_WITH_CUDA_STATE
  if (cuda()) {
    if (i >= (unsigned int)fake_cuda_state_ndevices(cuda())) return 2;
    *h = &cuda_devs[i];
    return 0;
  }
#endif
  if (i > 1) return 2;
  *h = &devs[i];
  return 0;
}
int nvmlDeviceGetName(dev_t_ h, char *buf, unsigned int len) {
  strncpy(buf, h->i != 1 ? "NVIDIA H100 80GB HBM3" : "NVIDIA A100-SXM4-40GB", len);
  return 0;
}
int nvmlDeviceGetUUID(dev_t_ h, char *buf, unsigned int len) {
  const char *u = h->uuid[0] ? h->uuid : h->i == 0 ? "GPU-00000000-1111-2222-3333-444444444444" : "GPU-aaaa";
  if (strlen(u) >= len) return 7; /* INSUFFICIENT_SIZE */
  strcpy(buf, u);
  return 0;
}
typedef struct {
  char busIdLegacy[16];
  unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
} pci_t;
/* GPU i sits at PCI 00000000:0(i+1):00.0, as nvidia-smi would write it. */
int nvmlDeviceGetPciInfo_v3(dev_t_ h, pci_t *p) {
  memset(p, 0, sizeof(*p));
  p->bus = (unsigned)h->i + 1;
  snprintf(p->busId, sizeof(p->busId), "00000000:%02X:00.0", p->bus);
  snprintf(p->busIdLegacy, sizeof(p->busIdLegacy), "0000:%02X:00.0", p->bus);
  return 0;
}
typedef struct {
  unsigned long long total, free, used;
} mem_t;
/* The body of nvmlDeviceGetMemoryInfo, called directly by _v2 (not through
 * the exported name, which a preloaded library may interpose). */
static int memory_info(dev_t_ h, mem_t *m) {
  if (strcmp(mode(), "memory_fail") == 0) return 999;
#ifdef FAKE_NVML_WITH_CUDA_STATE
  if (cuda_index(h) >= 0 && cuda()) {
    m->total = fake_cuda_state_total(cuda(), cuda_index(h));
    m->used = fake_cuda_state_used(cuda(), cuda_index(h));
    m->free = m->total - m->used;
    return 0;
  }
#endif
  m->total = h->i == 0 ? 85520809984ULL : 42949672960ULL;
  m->free = m->total;
  m->used = 0;
  return 0;
}
/* nvmlMemory_v2_t: version, total, reserved, free, used */
typedef struct {
  unsigned int version;
  unsigned long long total, reserved, free, used;
} mem2_t;
int nvmlDeviceGetMemoryInfo(dev_t_ h, mem_t *m) { return memory_info(h, m); }
int nvmlDeviceGetMemoryInfo_v2(dev_t_ h, mem2_t *m) {
  mem_t v1;
  int rc = memory_info(h, &v1);
  if (rc) return rc;
  m->total = v1.total;
  m->reserved = 512ULL << 20; /* as a real driver reserves some */
  m->used = v1.used;
  m->free = v1.free > m->reserved ? v1.free - m->reserved : 0;
  return 0;
}
/* As NVML documents it: UNINITIALIZED before nvmlInit, INVALID_ARGUMENT
 * for a NULL pointer or a handle it never gave, NOT_SUPPORTED where the
 * device cannot tell: under FAKE_NVML_MODE=minor_unsupported, for GPU 1
 * under FAKE_NVML_MODE=minor_mixed, and for a MIG device's handle (the fake's choice: NVML does not say what it
 * answers there, and tessera never asks). The two fake GPUs' minors are the
 * other way round from their indices (the H100, index 0, is /dev/nvidia1),
 * as a driver's probe order may differ from NVML's PCI order; the driver
 * double's devices are /dev/nvidia<k>. */
int nvmlDeviceGetMinorNumber(dev_t_ h, unsigned int *minor) {
  if (inits == 0) return 1;   /* UNINITIALIZED */
  if (!h || !minor) return 2; /* INVALID_ARGUMENT */
  if (strcmp(mode(), "minor_unsupported") == 0) return 3;
  if (cuda_index(h) >= 0) {
    *minor = (unsigned int)cuda_index(h);
    return 0;
  }
  if (h == &devs[0] || h == &devs[1]) {
    if (h->i == 1 && strcmp(mode(), "minor_mixed") == 0) return 3;
    *minor = h->i == 0 ? 1 : 0;
    return 0;
  }
  if (h->i >= 100) return 3; /* a MIG device (see below) */
  return 2;
}
int nvmlDeviceGetIndex(dev_t_ h, unsigned int *index) {
  *index = (unsigned int)h->i;
  return 0;
}
int nvmlDeviceGetMigMode(dev_t_ h, unsigned int *cur, unsigned int *pend) {
  if (cuda_index(h) >= 0) return 3; /* NOT_SUPPORTED: the driver double knows no MIG */
  *cur = *pend = h->i == 1;
  return 0;
}
typedef struct {
  unsigned int sm, a, b, c, d, e, f, g;
  unsigned long long mb;
} attr_t;
int nvmlDeviceGetAttributes_v2(dev_t_ h, attr_t *a) {
  if (strcmp(mode(), "no_attr") == 0) return 3; /* NOT_SUPPORTED */
  memset(a, 0, sizeof(*a));
  a->sm = h->i != 1 ? 132 : 108;
  return 0;
}
int nvmlDeviceGetNumGpuCores(dev_t_ h, unsigned int *n) {
  *n = h->i == 0 ? 16896 : 6912;
  return 0;
}
int nvmlDeviceGetCudaComputeCapability(dev_t_ h, int *major, int *minor) {
  *major = h->i == 0 ? 9 : 8;
  *minor = 0;
  return 0;
}

/* ---- processes -------------------------------------------------------------- */

typedef struct {
  unsigned int pid;
  unsigned long long used;
  unsigned int gi, ci;
} proc_info_t;

int nvmlDeviceGetComputeRunningProcesses_v3(dev_t_ h, unsigned int *count, proc_info_t *out) {
  if (!count) return 2; /* INVALID_ARGUMENT */
  if (strcmp(mode(), "procs_unsupported") == 0) return 3;
  unsigned int n = 0;
#ifdef FAKE_NVML_WITH_CUDA_STATE
  enum { ROWS = 1024 };
  static fake_cuda_proc_t rows[ROWS];
  static proc_info_t found[ROWS];
  int idx = cuda_index(h);
  if (idx >= 0 && cuda()) {
    /* (no fake_cuda_state_reap here: the fake's reaper judges pids in the
     * caller's namespace, and would take a namespaced tenant's slot) */
    size_t total = fake_cuda_state_procs(cuda(), rows, ROWS);
    if (total > ROWS) total = ROWS;
    for (size_t r = 0; r < total; r++) {
      if (rows[r].device != idx) continue;
      unsigned int pid = host_pid(rows[r].pid);
      if (pid == 0) continue;
      unsigned int k = 0;
      while (k < n && found[k].pid != pid) k++;
      if (k == n) found[n++] = (proc_info_t){pid, 0, 0xffffffffu, 0xffffffffu};
      found[k].used += rows[r].bytes;
    }
  }
  if (n > *count || (n > 0 && !out)) {
    *count = n;
    return 7; /* INSUFFICIENT_SIZE */
  }
  if (n > 0) memcpy(out, found, n * sizeof(*out));
#else
  (void)h;
  (void)out;
#endif
  *count = n;
  return 0;
}

/* ---- per-process utilisation ---------------------------------------------------- */

typedef struct {
  unsigned int pid;
  unsigned long long ts;
  unsigned int sm, mem, enc, dec;
} util_sample_t;

int nvmlDeviceGetProcessUtilization(dev_t_ h, util_sample_t *out, unsigned int *count,
                                    unsigned long long last_seen_us) {
  if (!count) return 2; /* INVALID_ARGUMENT */
  if (strcmp(mode(), "util_unsupported") == 0) return 3;
  enum { ROWS = 1024 };
  static util_sample_t rows[ROWS];
  unsigned int n = 0;
  int index = cuda_index(h) >= 0 ? cuda_index(h) : h->i;
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  unsigned long long ts = (unsigned long long)now.tv_sec * 1000000ull + (unsigned long long)now.tv_nsec / 1000;
  const char *path = getenv("FAKE_NVML_UTIL");
  FILE *f = path && *path ? fopen(path, "re") : NULL;
  char line[256];
  while (f && n < ROWS && fgets(line, sizeof line, f)) {
    char *p = line, *end;
    long v[3] = {-1, -1, -1};
    int fields = 0;
    while (fields < 3) {
      while (*p == ' ' || *p == '\t') p++;
      if (*p < '0' || *p > '9') break;
      v[fields] = strtol(p, &end, 10);
      fields++;
      p = end;
    }
    while (*p == ' ' || *p == '\t') p++;
    if (fields < 2 || (*p && *p != '\n') || v[0] <= 0 || v[0] > INT_MAX || v[1] > 1000) continue;
    if (fields == 3 && v[2] != index) continue;
    if (ts <= last_seen_us) continue;
    rows[n++] = (util_sample_t){(unsigned int)v[0], ts, (unsigned int)v[1], 0, 0, 0};
  }
  if (f) fclose(f);
  if (n == 0) {
    *count = 0;
    return 6; /* NOT_FOUND */
  }
  if (!out || *count < n) {
    *count = n;
    return 7; /* INSUFFICIENT_SIZE */
  }
  memcpy(out, rows, n * sizeof(*out));
  *count = n;
  return 0;
}

/* ---- MIG ------------------------------------------------------------------ */

enum { NOT_SUPPORTED = 3, INVALID_ARGUMENT = 2, INSUFFICIENT_RESOURCES = 23 };

typedef struct {
  unsigned int start, size;
} placement_t;
typedef struct {
  unsigned int id, p2p, slices, instances, sms, ce, dec, enc, jpeg, ofa;
  unsigned long long mb;
} gi_profile_t;
typedef struct {
  unsigned int id, slices, instances, sms, ce, dec, enc, jpeg, ofa;
} ci_profile_t;
typedef struct gi {
  unsigned int profile_id;
  placement_t at;
  struct dev mig_dev; /* the device its compute instance shows */
  int cis;
} * gi_t;
typedef struct ci {
  gi_t gi;
} * ci_t;
typedef struct {
  dev_t_ device;
  gi_t gi;
  unsigned int id, profile_id, start, size;
} ci_info_t;

static const unsigned int slices_of[] = {1, 2, 3, 4, 7};
static int live_gis, live_cis;
static unsigned int used_mask; /* memory slices of live GPU instances */

/* GPU instance profile ids are not the profile numbers (as on real GPUs). */
static int profile_of_id(unsigned int id) { return id >= 19 && id < 24 ? (int)id - 19 : -1; }

void fake_nvml_live(int *gpu_instances, int *compute_instances) {
  *gpu_instances = live_gis;
  *compute_instances = live_cis;
}

int nvmlDeviceGetGpuInstanceProfileInfo(dev_t_ h, unsigned int profile, gi_profile_t *info) {
  if (h->i != 1) return NOT_SUPPORTED;
  if (profile > 4) return INVALID_ARGUMENT;
  memset(info, 0, sizeof(*info));
  info->id = 19 + profile;
  info->slices = slices_of[profile];
  return 0;
}
int nvmlDeviceGetGpuInstancePossiblePlacements_v2(dev_t_ h, unsigned int id, placement_t *out, unsigned int *count) {
  /* the A100's: 1 slice anywhere, 2 at 0/2/4, 3 at 0 and 4 (4 memory
   * slices), 4 at 0, 7 at 0 (all 8 memory slices) */
  static const placement_t p1[] = {{0, 1}, {1, 1}, {2, 1}, {3, 1}, {4, 1}, {5, 1}, {6, 1}};
  static const placement_t p2[] = {{0, 2}, {2, 2}, {4, 2}};
  static const placement_t p3[] = {{0, 4}, {4, 4}};
  static const placement_t p4[] = {{0, 4}};
  static const placement_t p7[] = {{0, 8}};
  static const placement_t *all[] = {p1, p2, p3, p4, p7};
  static const unsigned int n[] = {7, 3, 2, 1, 1};
  int prof = profile_of_id(id);
  if (h->i != 1) return NOT_SUPPORTED;
  if (prof < 0) return INVALID_ARGUMENT;
  if (*count < n[prof]) return 7; /* INSUFFICIENT_SIZE */
  memcpy(out, all[prof], n[prof] * sizeof(placement_t));
  *count = n[prof];
  return 0;
}
int nvmlDeviceCreateGpuInstanceWithPlacement(dev_t_ h, unsigned int id, const placement_t *at, gi_t *out) {
  int prof = profile_of_id(id);
  if (h->i != 1) return NOT_SUPPORTED;
  if (prof < 0) return INVALID_ARGUMENT;
  unsigned int mask = ((1u << at->size) - 1) << at->start;
  if (used_mask & mask) return INSUFFICIENT_RESOURCES;
  gi_t g = calloc(1, sizeof(*g));
  if (!g) return 20; /* MEMORY */
  g->profile_id = id;
  g->at = *at;
  g->mig_dev.i = 100 + (int)at->start;
  snprintf(g->mig_dev.uuid, sizeof(g->mig_dev.uuid), "MIG-fake-%u-%u", at->start, slices_of[prof]);
  used_mask |= mask;
  live_gis++;
  *out = g;
  return 0;
}
int nvmlGpuInstanceDestroy(gi_t g) {
  if (g->cis) return 19; /* IN_USE */
  used_mask &= ~(((1u << g->at.size) - 1) << g->at.start);
  live_gis--;
  free(g);
  return 0;
}
int nvmlGpuInstanceGetComputeInstanceProfileInfo(gi_t g, unsigned int profile, unsigned int engine,
                                                 ci_profile_t *info) {
  if (engine != 0 || profile > 4 || slices_of[profile] != slices_of[profile_of_id(g->profile_id)]) return NOT_SUPPORTED;
  memset(info, 0, sizeof(*info));
  info->id = 40 + profile;
  info->slices = slices_of[profile];
  return 0;
}
int nvmlGpuInstanceCreateComputeInstance(gi_t g, unsigned int id, ci_t *out) {
  if (strcmp(mode(), "ci_fail") == 0) return INSUFFICIENT_RESOURCES;
  if (id != 40 + (unsigned)profile_of_id(g->profile_id)) return INVALID_ARGUMENT;
  ci_t c = calloc(1, sizeof(*c));
  if (!c) return 20;
  c->gi = g;
  g->cis++;
  live_cis++;
  *out = c;
  return 0;
}
int nvmlComputeInstanceDestroy(ci_t c) {
  c->gi->cis--;
  live_cis--;
  free(c);
  return 0;
}
int nvmlComputeInstanceGetInfo_v2(ci_t c, ci_info_t *info) {
  memset(info, 0, sizeof(*info));
  info->device = &c->gi->mig_dev;
  info->gi = c->gi;
  info->profile_id = 40;
  return 0;
}
