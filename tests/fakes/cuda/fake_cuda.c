/* fake_cuda.c: a stand-in for the CUDA driver, libcuda.so.1, for tests on
 * machines without a GPU.
 *
 * libtessera-cuda.so (the shim) and its tests load this in place of the real
 * driver (LD_LIBRARY_PATH=<build>/tests/fakes, dlopen("libcuda.so.1")). It
 * exports the entries the shim hooks and a program needs around them, under
 * their real ABI names and with the real driver's error codes. Device memory
 * is host address space (mmap MAP_NORESERVE: a test can "allocate" many GiB
 * without using RAM, and what it writes there reads back), and every byte the
 * driver would take on the device is counted against the device's total:
 * allocations by every path, the ~0.5 GiB of each context, modules' static
 * data, and context limits.
 *
 * Where it answers as the real driver: every return code that the probe
 * (probe_driver.c) asked the real one about, on an H100 with driver
 * 580.159.04 (CUDA 13.0) on 2026-11-23, is the fake's answer too
 * (real_h100.txt; unit.fakecuda_conformance checks it on every build, and
 * names the few answers where the fake differs on purpose). Where the probe
 * did not ask, the choice follows the CUDA 13.0 Driver API reference (the
 * comments of /usr/local/cuda/include/cuda.h) and is marked "unconfirmed".
 *
 * Environment (read once, at cuInit; a bad value is one line on stderr and
 * cuInit fails with CUDA_ERROR_NOT_INITIALIZED, changing nothing):
 *   FAKE_CUDA_DEVICES       devices, 0 to 16 (default 1; 0: cuInit answers
 *                           CUDA_ERROR_NO_DEVICE, as on a machine without one)
 *   FAKE_CUDA_TOTAL_MEM     memory of each device (default 80GiB; any size
 *                           tsr_parse_size reads: 4GiB, 1073741824, ...)
 *   FAKE_CUDA_CTX_BYTES     what each context takes while it lives (512MiB)
 *   FAKE_CUDA_MODULE_BYTES  static data charged per loaded module, on top of
 *                           the .global arrays a PTX image declares (0)
 *   FAKE_CUDA_ALLOC_GRANULE allocations are charged rounded up to this (1:
 *                           exact bytes; the H100 takes 2 MiB for a 1 MiB one)
 *   FAKE_CUDA_KERNEL_US     microseconds each wave of a kernel takes when its
 *                           name does not say (0); a function named
 *                           ..._<N>us takes N per wave (timeline.c)
 *   FAKE_CUDA_STATE         a file that holds the device counters and the
 *                           per-process table for every process that names it
 *                           (fake_cuda_state.h); without it they are private
 *   CUDA_VISIBLE_DEVICES    which devices the process sees, in which order,
 *                           as the real driver reads it (visible.c): the list
 *                           stops at a bad entry; none visible is
 *                           CUDA_ERROR_NO_DEVICE, a device named twice
 *                           CUDA_ERROR_INVALID_DEVICE (both silent)
 *
 * Threads: every entry runs under one process-wide mutex (this is a test
 * double: correctness over speed), released only while a synchronize
 * sleeps; the device counters are C11 atomics in the state table, so
 * processes never wait on each other. See internal.h
 * for the parts and docs/testing-fakes.md for the models (pools, graphs,
 * limits, time) and what is not emulated. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/array.h"
#include "base/units.h"
#include "internal.h"

fc_global_t g_fc = {.mu = PTHREAD_MUTEX_INITIALIZER, .slot = -1};

/* The calling thread's context stack (cuCtxPushCurrent / cuCtxPopCurrent);
 * the top is the current context. */
static _Thread_local fc_ctx_t *tls_ctx[FC_CTX_STACK_MAX];
static _Thread_local int tls_depth;

static _Thread_local uint64_t tls_thread_id;
static _Atomic uint64_t fc_threads_seen;

uint64_t fc_thread_id(void) {
  if (tls_thread_id == 0) tls_thread_id = atomic_fetch_add_explicit(&fc_threads_seen, 1, memory_order_relaxed) + 1;
  return tls_thread_id;
}

void fc_lock(void) { pthread_mutex_lock(&g_fc.mu); }
void fc_unlock(void) { pthread_mutex_unlock(&g_fc.mu); }

CUresult fc_ready(void) {
  if (!atomic_load_explicit(&g_fc.inited, memory_order_acquire)) return CUDA_ERROR_NOT_INITIALIZED;
  /* A child forked after cuInit cannot use the parent's driver state
   * (unconfirmed which code the real driver gives; it is this one). */
  if (getpid() != g_fc.pid) return CUDA_ERROR_NOT_INITIALIZED;
  return CUDA_SUCCESS;
}

/* ---- configuration and cuInit --------------------------------------------- */

/* Reads size variable `name` into *out (default kept when unset). */
static bool fc_env_size(const char *name, uint64_t *out) {
  const char *v = getenv(name);
  if (!v) return true;
  tsr_status_t st = tsr_parse_size(v, out);
  if (st) {
    fprintf(stderr, "fake_cuda: %s=%s: %s\n", name, v, tsr_status_message(st));
    tsr_status_free(st);
    return false;
  }
  return true;
}

static bool fc_config_read(fc_config_t *cfg) {
  *cfg = (fc_config_t){.ndevices = 1,
                       .total = (uint64_t)80 << 30,
                       .ctx_bytes = (uint64_t)512 << 20,
                       .module_bytes = 0,
                       .granule = 1,
                       .kernel_us = 0};
  const char *v = getenv("FAKE_CUDA_DEVICES");
  if (v) {
    uint64_t n;
    tsr_status_t st = tsr_parse_u64(v, &n);
    if (st || n > FAKE_CUDA_MAX_DEVICES) {
      fprintf(stderr, "fake_cuda: FAKE_CUDA_DEVICES=%s: must be a count from 0 to %d\n", v, FAKE_CUDA_MAX_DEVICES);
      tsr_status_free(st);
      return false;
    }
    cfg->ndevices = (int)n;
  }
  if (!fc_env_size("FAKE_CUDA_TOTAL_MEM", &cfg->total) || !fc_env_size("FAKE_CUDA_CTX_BYTES", &cfg->ctx_bytes) ||
      !fc_env_size("FAKE_CUDA_MODULE_BYTES", &cfg->module_bytes) ||
      !fc_env_size("FAKE_CUDA_ALLOC_GRANULE", &cfg->granule))
    return false;
  v = getenv("FAKE_CUDA_KERNEL_US");
  if (v) {
    tsr_status_t st = tsr_parse_u64(v, &cfg->kernel_us);
    if (st || cfg->kernel_us > FC_WORK_NS_MAX / 1000) {
      fprintf(stderr, "fake_cuda: FAKE_CUDA_KERNEL_US=%s: must be microseconds from 0 to %llu\n", v,
              (unsigned long long)(FC_WORK_NS_MAX / 1000));
      tsr_status_free(st);
      return false;
    }
  }
  if (cfg->total == 0) {
    fprintf(stderr, "fake_cuda: FAKE_CUDA_TOTAL_MEM=%s: must be more than 0 bytes\n", getenv("FAKE_CUDA_TOTAL_MEM"));
    return false;
  }
  if (cfg->granule == 0 || cfg->granule > cfg->total) {
    fprintf(stderr, "fake_cuda: FAKE_CUDA_ALLOC_GRANULE=%s: must be from 1 byte to the total\n",
            getenv("FAKE_CUDA_ALLOC_GRANULE"));
    return false;
  }
  return true;
}

/* A process that ends normally gives its slot back; one that is killed is
 * reaped by the next (see fake_cuda_state.h). */
__attribute__((destructor)) static void fc_fini(void) {
  if (atomic_load_explicit(&g_fc.inited, memory_order_acquire) && g_fc.pid == getpid() && g_fc.state && g_fc.slot >= 0)
    fake_cuda_state_detach(g_fc.state, g_fc.slot);
}

static void fc_ctx_init(fc_ctx_t *c, int dev, bool primary) {
  memset(c, 0, sizeof *c);
  c->hdr.kind = FC_K_CTX;
  c->dev = dev;
  c->primary = primary;
  c->limits[CU_LIMIT_STACK_SIZE] = FC_STACK_DEFAULT;
  c->limits[CU_LIMIT_PRINTF_FIFO_SIZE] = FC_FIFO_DEFAULT;
  c->limits[CU_LIMIT_MALLOC_HEAP_SIZE] = FC_HEAP_DEFAULT;
  c->limits[CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT] = 2048;
  c->limits[CU_LIMIT_MAX_L2_FETCH_GRANULARITY] = 32; /* unconfirmed default */
  c->legacy.hdr.kind = FC_K_STREAM;
  c->legacy.ctx = c;
  c->legacy.skind = FC_S_LEGACY;
}

FC_EXPORT CUresult cuInit(unsigned int Flags) {
  /* "Flags: Initialization flag for CUDA; must be 0" (the H100: 1 -> INVALID_VALUE) */
  if (Flags != 0) return CUDA_ERROR_INVALID_VALUE;
  fc_lock();
  CUresult rc = CUDA_SUCCESS;
  if (atomic_load_explicit(&g_fc.inited, memory_order_acquire)) {
    rc = g_fc.pid == getpid() ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
    fc_unlock();
    return rc;
  }
  fc_config_t cfg;
  if (!fc_config_read(&cfg)) {
    fc_unlock();
    return CUDA_ERROR_NOT_INITIALIZED;
  }
  int phys[FAKE_CUDA_MAX_DEVICES];
  int nvisible = fc_visible_read(cfg.ndevices, phys);
  /* the H100's answers: a device named twice, or none visible ("", "-1") */
  if (nvisible <= 0) {
    fc_unlock();
    return nvisible < 0 ? CUDA_ERROR_INVALID_DEVICE : CUDA_ERROR_NO_DEVICE;
  }
  uint64_t totals[FAKE_CUDA_MAX_DEVICES];
  for (int i = 0; i < cfg.ndevices; i++) totals[i] = cfg.total;
  fake_cuda_state_t *state = NULL;
  const char *path = getenv("FAKE_CUDA_STATE");
  if (path && *path) {
    char err[512];
    if (fake_cuda_state_open(path, cfg.ndevices, totals, &state, err, sizeof err) != 0) {
      fprintf(stderr, "fake_cuda: FAKE_CUDA_STATE=%s\n", err);
      fc_unlock();
      return CUDA_ERROR_NOT_INITIALIZED;
    }
  } else {
    state = fake_cuda_state_private(cfg.ndevices, totals);
    if (!state) {
      fc_unlock();
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
  }
  int slot = fake_cuda_state_attach(state);
  if (slot < 0) {
    fprintf(stderr, "fake_cuda: FAKE_CUDA_STATE=%s: all %d process slots are held by live processes\n", path,
            FAKE_CUDA_SLOTS);
    fake_cuda_state_close(state);
    fc_unlock();
    return CUDA_ERROR_NOT_INITIALIZED;
  }
  g_fc.cfg = cfg;
  g_fc.nvisible = nvisible;
  memcpy(g_fc.phys, phys, sizeof phys);
  g_fc.state = state;
  g_fc.slot = slot;
  for (int i = 0; i < cfg.ndevices; i++) fc_ctx_init(&g_fc.primary[i], i, true);
  g_fc.pid = getpid();
  atomic_store_explicit(&g_fc.inited, 1, memory_order_release);
  fc_unlock();
  return CUDA_SUCCESS;
}

FC_EXPORT CUresult cuDriverGetVersion(int *driverVersion) {
  /* works before cuInit, as on the H100 */
  if (!driverVersion) return CUDA_ERROR_INVALID_VALUE;
  *driverVersion = FC_DRIVER_VERSION;
  return CUDA_SUCCESS;
}

/* ---- accounting ----------------------------------------------------------- */

CUresult fc_charge(int dev, uint64_t bytes) {
  if (bytes == 0) return CUDA_SUCCESS;
  if (fake_cuda_state_charge(g_fc.state, g_fc.slot, dev, bytes)) return CUDA_SUCCESS;
  /* memory held by killed processes comes back before an out-of-memory */
  if (fake_cuda_state_reap(g_fc.state) > 0 && fake_cuda_state_charge(g_fc.state, g_fc.slot, dev, bytes))
    return CUDA_SUCCESS;
  return CUDA_ERROR_OUT_OF_MEMORY;
}

void fc_uncharge(int dev, uint64_t bytes) { fake_cuda_state_uncharge(g_fc.state, g_fc.slot, dev, bytes); }

uint64_t fc_granule(uint64_t bytes) {
  uint64_t g = g_fc.cfg.granule;
  if (g <= 1) return bytes;
  if (bytes > UINT64_MAX - (g - 1)) return UINT64_MAX;
  return (bytes + g - 1) / g * g;
}

/* ---- the table of live handles -------------------------------------------- */

bool fc_obj_add(fc_kind_t kind, void *obj) {
  void **grown = tsr_array_grow(g_fc.objs[kind], &g_fc.capobjs[kind], g_fc.nobjs[kind] + 1, sizeof(void *), 16);
  if (!grown) return false;
  g_fc.objs[kind] = grown;
  g_fc.objs[kind][g_fc.nobjs[kind]++] = obj;
  return true;
}

void *fc_obj_new(fc_kind_t kind, size_t size) {
  fc_obj_t *o = calloc(1, size);
  if (!o) return NULL;
  o->kind = kind;
  if (!fc_obj_add(kind, o)) {
    free(o);
    return NULL;
  }
  return o;
}

void fc_obj_remove(fc_kind_t kind, void *obj) {
  for (size_t i = 0; i < g_fc.nobjs[kind]; i++)
    if (g_fc.objs[kind][i] == obj) {
      g_fc.objs[kind][i] = g_fc.objs[kind][--g_fc.nobjs[kind]];
      return;
    }
}

void *fc_obj_find(fc_kind_t kind, const void *handle) {
  if (!handle) return NULL;
  for (size_t i = 0; i < g_fc.nobjs[kind]; i++)
    if (g_fc.objs[kind][i] == handle) return g_fc.objs[kind][i];
  return NULL;
}

/* ---- devices --------------------------------------------------------------- */

/* cuDeviceGetAttribute's answers for attributes 1 to 147, as the H100 gave
 * them (driver 580.159.04; real_h100.txt, "device.info.attr"); the PCI
 * location (33, 34, 50) is made per device below. */
static const int fc_attrs[CU_DEVICE_ATTRIBUTE_MAX] = {
    0,        1024,      1024,     1024,  64,    2147483647, 65535, 65535,     49152,     65536,     32,     2147483647,
    65536,    1980000,   512,      1,     132,   0,          0,     1,         0,         131072,    131072, 65536,
    16384,    16384,     16384,    32768, 32768, 2048,       512,   1,         1,         0,         6,      0,
    2619000,  5120,      52428800, 2048,  3,     1,          32768, 2048,      1,         32768,     32768,  8192,
    8192,     32768,     0,        32,    32768, 32768,      2046,  32768,     131072,    65536,     16384,  16384,
    16384,    32768,     2048,     32768, 32768, 2048,       32768, 32768,     2046,      268435456, 131072, 65000,
    2097120,  32768,     32768,    9,     0,     32768,      1,     1,         1,         233472,    65536,  1,
    0,        0,         0,        2,     0,     1,          1,     1,         0,         0,         0,      1,
    1,        232448,    0,        1,     0,     0,          1,     1,         0,         0,         32,     1,
    32768000, 134217728, 1,        1024,  1,     1,          1,     1,         1,         1,         100,    9,
    1,        1,         1,        1,     1,     1,          4,     1,         1,         1,         0,      -1,
    0,        0,         0,        0,     0,     0,          0,     590352606, 381751518, 1,         1,      0,
    1,        1,         0,        0,
};

FC_EXPORT CUresult cuDeviceGetCount(int *count) {
  CUresult rc = fc_ready();
  if (rc != CUDA_SUCCESS) return rc;
  if (!count) return CUDA_ERROR_INVALID_VALUE;
  *count = g_fc.nvisible;
  return CUDA_SUCCESS;
}

FC_EXPORT CUresult cuDeviceGet(CUdevice *device, int ordinal) {
  CUresult rc = fc_ready();
  if (rc != CUDA_SUCCESS) return rc;
  if (!device) return CUDA_ERROR_INVALID_VALUE;
  if (fc_dev_phys(ordinal) < 0) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal; /* a CUdevice is the CUDA ordinal, as in the real driver */
  return CUDA_SUCCESS;
}

FC_EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice dev) {
  CUresult rc = fc_ready();
  if (rc != CUDA_SUCCESS) return rc;
  /* len 0 crashes the real driver; the fake refuses it */
  if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (fc_dev_phys(dev) < 0) return CUDA_ERROR_INVALID_DEVICE;
  snprintf(name, (size_t)len, "%s", FAKE_CUDA_DEVICE_NAME); /* truncated, as the H100 does */
  return CUDA_SUCCESS;
}

static CUresult fc_uuid(CUuuid *uuid, CUdevice dev) {
  CUresult rc = fc_ready();
  if (rc != CUDA_SUCCESS) return rc;
  if (!uuid) return CUDA_ERROR_INVALID_VALUE;
  int phys = fc_dev_phys(dev);
  if (phys < 0) return CUDA_ERROR_INVALID_DEVICE;
  fake_cuda_uuid(phys, (unsigned char *)uuid->bytes);
  return CUDA_SUCCESS;
}
/* The two differ only for MIG instances, which the fake has none of. */
FC_EXPORT CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev) { return fc_uuid(uuid, dev); }
FC_EXPORT CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev) { return fc_uuid(uuid, dev); }

static CUresult fc_total_mem(size_t *bytes, CUdevice dev) {
  CUresult rc = fc_ready();
  if (rc != CUDA_SUCCESS) return rc;
  if (!bytes) return CUDA_ERROR_INVALID_VALUE;
  if (fc_dev_phys(dev) < 0) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = g_fc.cfg.total;
  return CUDA_SUCCESS;
}

FC_EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) { return fc_total_mem(bytes, dev); }

/* The 32-bit entry: the H100 answers 4294967295 for its 79 GiB. (Not
 * through the exported _v2: a preloaded shim would answer that call.) */
FC_EXPORT CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev) {
  size_t b;
  CUresult rc = fc_total_mem(bytes ? &b : NULL, dev);
  if (rc == CUDA_SUCCESS) *bytes = b > UINT_MAX ? UINT_MAX : (unsigned int)b;
  return rc;
}

FC_EXPORT CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev) {
  CUresult rc = fc_ready();
  if (rc != CUDA_SUCCESS) return rc;
  if (!pi) return CUDA_ERROR_INVALID_VALUE;
  int phys = fc_dev_phys(dev);
  if (phys < 0) return CUDA_ERROR_INVALID_DEVICE;
  if ((int)attrib <= 0 || (int)attrib >= CU_DEVICE_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
  switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: *pi = 0x10 + phys; break;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: *pi = 0; break;
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID: *pi = 0; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *pi = FC_SM_COUNT; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *pi = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *pi = 0; break;
    default: *pi = fc_attrs[attrib]; break;
  }
  return CUDA_SUCCESS;
}

FC_EXPORT CUresult cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev) {
  CUresult rc = fc_ready();
  if (rc != CUDA_SUCCESS) return rc;
  if (!pciBusId || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  int phys = fc_dev_phys(dev);
  if (phys < 0) return CUDA_ERROR_INVALID_DEVICE;
  /* "domain:bus:device.function", 12 characters; a short buffer gets what
   * fits and CUDA_ERROR_INVALID_VALUE, as on the H100 */
  int n = snprintf(pciBusId, (size_t)len, "%04X:%02X:%02X.0", 0, 0x10 + phys, 0);
  return n >= len ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

/* ---- contexts ------------------------------------------------------------- */

CUresult fc_current(fc_ctx_t **out_ctx) {
  *out_ctx = NULL;
  if (tls_depth == 0 || !tls_ctx[tls_depth - 1]) return CUDA_ERROR_INVALID_CONTEXT;
  fc_ctx_t *c = tls_ctx[tls_depth - 1];
  if (!c->alive) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  *out_ctx = c;
  return CUDA_SUCCESS;
}

CUresult fc_ctx_lookup(CUcontext h, fc_ctx_t **out_ctx) {
  *out_ctx = NULL;
  fc_ctx_t *c = NULL;
  for (int i = 0; i < g_fc.nvisible && !c; i++)
    if ((void *)h == (void *)&g_fc.primary[g_fc.phys[i]]) c = &g_fc.primary[g_fc.phys[i]];
  if (!c) c = fc_obj_find(FC_K_CTX, h);
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  *out_ctx = c;
  return c->alive ? CUDA_SUCCESS : CUDA_ERROR_CONTEXT_IS_DESTROYED;
}

/* Charges a new context's footprint and makes it alive. */
static CUresult fc_ctx_start(fc_ctx_t *c) {
  CUresult rc = fc_charge(c->dev, g_fc.cfg.ctx_bytes);
  if (rc != CUDA_SUCCESS) return rc;
  c->charged = g_fc.cfg.ctx_bytes;
  c->alive = true;
  return CUDA_SUCCESS;
}

/* Destroys what a context holds: its allocations, streams, modules, arrays,
 * the memory its limits took and its footprint. */
static void fc_ctx_stop(fc_ctx_t *c) {
  fc_ctx_release_all(c);
  fc_pools_sync(c->dev); /* what its pool allocations held goes back, as at a synchronize */
  for (int i = 0; i < 3; i++) {
    fc_uncharge(c->dev, c->limit_charge[i]);
    c->limit_charge[i] = 0;
  }
  fc_uncharge(c->dev, c->charged);
  c->charged = 0;
  c->alive = false;
  int dev = c->dev;
  bool primary = c->primary;
  fc_ctx_init(c, dev, primary); /* limits back to their defaults */
}

/* The primary context of CUDA device `dev`, or NULL for a bad ordinal. */
static fc_ctx_t *fc_primary(CUdevice dev) {
  int phys = fc_dev_phys(dev);
  return phys < 0 ? NULL : &g_fc.primary[phys];
}

CUresult fc_primary_retain(CUcontext *pctx, CUdevice dev) {
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  fc_ctx_t *c = fc_primary(dev);
  if (!c) return CUDA_ERROR_INVALID_DEVICE;
  if (!c->alive) {
    unsigned flags = c->flags;
    CUresult rc = fc_ctx_start(c);
    if (rc != CUDA_SUCCESS) return rc;
    c->flags = flags;
  }
  c->retain++;
  *pctx = (CUcontext)c;
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) { FC_LOCKED(fc_primary_retain(pctx, dev)); }

CUresult fc_primary_release(CUdevice dev) {
  fc_ctx_t *c = fc_primary(dev);
  if (!c) return CUDA_ERROR_INVALID_DEVICE;
  /* one release more than retains: CUDA_ERROR_INVALID_CONTEXT on the H100 */
  if (c->retain == 0) return CUDA_ERROR_INVALID_CONTEXT;
  if (--c->retain == 0 && c->alive) {
    unsigned flags = c->flags;
    fc_ctx_stop(c);
    c->flags = flags;
  }
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev) { FC_LOCKED(fc_primary_release(dev)); }
FC_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) { FC_LOCKED(fc_primary_release(dev)); }

/* Destroys the primary context at once, whatever its retain count. A thread
 * that still has it current keeps the handle, and calls through it answer
 * CUDA_ERROR_CONTEXT_IS_DESTROYED until it is retained again (the H100). */
static CUresult fc_primary_reset(CUdevice dev) {
  fc_ctx_t *c = fc_primary(dev);
  if (!c) return CUDA_ERROR_INVALID_DEVICE;
  unsigned flags = c->flags;
  if (c->alive) fc_ctx_stop(c);
  c->retain = 0;
  c->flags = flags;
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuDevicePrimaryCtxReset(CUdevice dev) { FC_LOCKED(fc_primary_reset(dev)); }
FC_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) { FC_LOCKED(fc_primary_reset(dev)); }

static CUresult fc_primary_state(CUdevice dev, unsigned int *flags, int *active) {
  fc_ctx_t *c = fc_primary(dev);
  if (!c) return CUDA_ERROR_INVALID_DEVICE;
  if (!flags || !active) return CUDA_ERROR_INVALID_VALUE;
  *flags = c->flags;
  *active = c->alive;
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active) {
  FC_LOCKED(fc_primary_state(dev, flags, active));
}

/* The flags the primary context has from its next start on (unconfirmed:
 * the probe did not ask). The CUDA 7 entry refuses them while the context
 * is active, CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE ("cannot set while device is
 * active in this process"); the _v2 of CUDA 11 takes them at any time. */
static CUresult fc_primary_set_flags(CUdevice dev, unsigned int flags, bool while_active) {
  fc_ctx_t *c = fc_primary(dev);
  if (!c) return CUDA_ERROR_INVALID_DEVICE;
  if (flags & ~(unsigned)CU_CTX_FLAGS_MASK) return CUDA_ERROR_INVALID_VALUE;
  if (c->alive && !while_active) return CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE;
  c->flags = flags;
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags) {
  FC_LOCKED(fc_primary_set_flags(dev, flags, false));
}
FC_EXPORT CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags) {
  FC_LOCKED(fc_primary_set_flags(dev, flags, true));
}

static CUresult fc_ctx_create(CUcontext *pctx, unsigned int flags, CUdevice dev) {
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  if (flags & ~(unsigned)CU_CTX_FLAGS_MASK) return CUDA_ERROR_INVALID_VALUE;
  int phys = fc_dev_phys(dev);
  if (phys < 0) return CUDA_ERROR_INVALID_DEVICE;
  if (tls_depth == FC_CTX_STACK_MAX) return CUDA_ERROR_OUT_OF_MEMORY;
  fc_ctx_t *c = malloc(sizeof *c);
  if (!c) return CUDA_ERROR_OUT_OF_MEMORY;
  fc_ctx_init(c, phys, false);
  c->flags = flags;
  if (!fc_obj_add(FC_K_CTX, c)) {
    free(c);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  CUresult rc = fc_ctx_start(c);
  if (rc != CUDA_SUCCESS) {
    fc_obj_remove(FC_K_CTX, c);
    free(c);
    return rc;
  }
  /* "The context is created with a usage count of 1 ... and is made
   * current to the calling CPU thread" (pushed on its stack) */
  tls_ctx[tls_depth++] = c;
  *pctx = (CUcontext)c;
  return CUDA_SUCCESS;
}

FC_EXPORT CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams, unsigned int flags,
                                  CUdevice dev) {
  /* execution affinity and CIG parameters are accepted and ignored */
  (void)ctxCreateParams;
  FC_LOCKED(fc_ctx_create(pctx, flags, dev));
}
FC_EXPORT CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams, unsigned int flags,
                                  CUdevice dev) {
  if (numParams < 0 || (numParams > 0 && !paramsArray)) return CUDA_ERROR_INVALID_VALUE;
  FC_LOCKED(fc_ctx_create(pctx, flags, dev));
}
FC_EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev) {
  FC_LOCKED(fc_ctx_create(pctx, flags, dev));
}
/* The CUDA 2.0 entry answered CUDA_ERROR_OUT_OF_MEMORY on the H100 to a
 * plain request (flags 0, device 0) and made no context; the fake does the
 * same. */
FC_EXPORT CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev) {
  (void)pctx, (void)flags, (void)dev;
  CUresult rc = fc_ready();
  return rc != CUDA_SUCCESS ? rc : CUDA_ERROR_OUT_OF_MEMORY;
}

static CUresult fc_ctx_destroy(CUcontext ctx) {
  if (!ctx) return CUDA_ERROR_INVALID_VALUE;
  fc_ctx_t *c;
  CUresult rc = fc_ctx_lookup(ctx, &c);
  if (rc != CUDA_SUCCESS) return rc;                 /* twice: CONTEXT_IS_DESTROYED, as on the H100 */
  if (c->primary) return CUDA_ERROR_INVALID_CONTEXT; /* unconfirmed */
  fc_ctx_stop(c);
  /* The handle stays known (destroyed): later calls through it answer
   * CUDA_ERROR_CONTEXT_IS_DESTROYED instead of reading freed memory. */
  if (tls_depth > 0 && tls_ctx[tls_depth - 1] == c) tls_depth--;
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx) { FC_LOCKED(fc_ctx_destroy(ctx)); }
FC_EXPORT CUresult cuCtxDestroy(CUcontext ctx) { FC_LOCKED(fc_ctx_destroy(ctx)); }

static CUresult fc_ctx_set_current(CUcontext ctx) {
  if (!ctx) {
    /* "equivalent to popping the top of the calling CPU thread's stack" */
    if (tls_depth > 0) tls_depth--;
    return CUDA_SUCCESS;
  }
  fc_ctx_t *c;
  CUresult rc = fc_ctx_lookup(ctx, &c);
  if (rc == CUDA_ERROR_INVALID_CONTEXT) return rc;
  if (tls_depth == 0) tls_depth = 1;
  tls_ctx[tls_depth - 1] = c;
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuCtxSetCurrent(CUcontext ctx) { FC_LOCKED(fc_ctx_set_current(ctx)); }

FC_EXPORT CUresult cuCtxGetCurrent(CUcontext *pctx) {
  CUresult rc = fc_ready();
  if (rc != CUDA_SUCCESS) return rc;
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  *pctx = tls_depth > 0 ? (CUcontext)tls_ctx[tls_depth - 1] : NULL;
  return CUDA_SUCCESS;
}

static CUresult fc_ctx_push(CUcontext ctx) {
  if (!ctx) return CUDA_ERROR_INVALID_VALUE;
  fc_ctx_t *c;
  CUresult rc = fc_ctx_lookup(ctx, &c);
  if (rc != CUDA_SUCCESS) return rc;
  if (tls_depth == FC_CTX_STACK_MAX) return CUDA_ERROR_OUT_OF_MEMORY; /* unconfirmed */
  tls_ctx[tls_depth++] = c;
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx) { FC_LOCKED(fc_ctx_push(ctx)); }
FC_EXPORT CUresult cuCtxPushCurrent(CUcontext ctx) { FC_LOCKED(fc_ctx_push(ctx)); }

static CUresult fc_ctx_pop(CUcontext *pctx) {
  if (tls_depth == 0) return CUDA_ERROR_INVALID_CONTEXT;
  fc_ctx_t *c = tls_ctx[--tls_depth];
  if (pctx) *pctx = (CUcontext)c; /* pctx may be NULL (the H100) */
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuCtxPopCurrent_v2(CUcontext *pctx) { FC_LOCKED(fc_ctx_pop(pctx)); }
FC_EXPORT CUresult cuCtxPopCurrent(CUcontext *pctx) { FC_LOCKED(fc_ctx_pop(pctx)); }

/* The context `ctx` names, or the current one for NULL (the CUDA 13
 * entries that take a context). */
static CUresult fc_ctx_or_current(CUcontext ctx, fc_ctx_t **out_ctx) {
  return ctx ? fc_ctx_lookup(ctx, out_ctx) : fc_current(out_ctx);
}

static CUresult fc_ctx_get_device(CUdevice *device, CUcontext ctx) {
  fc_ctx_t *c;
  CUresult rc = fc_ctx_or_current(ctx, &c);
  if (rc != CUDA_SUCCESS) return rc;
  if (!device) return CUDA_ERROR_INVALID_VALUE;
  *device = fc_dev_ordinal(c->dev); /* visible: contexts are made from ordinals */
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuCtxGetDevice(CUdevice *device) { FC_LOCKED(fc_ctx_get_device(device, NULL)); }
FC_EXPORT CUresult cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx) { FC_LOCKED(fc_ctx_get_device(device, ctx)); }

/* Sleeps (the lock released) until the context's work ends, then does what
 * the driver does at a synchronize: pools give back memory above their
 * release threshold. */
static CUresult fc_ctx_sync(CUcontext ctx) {
  fc_ctx_t *c;
  CUresult rc = fc_ctx_or_current(ctx, &c);
  if (rc != CUDA_SUCCESS) return rc;
  int dev = c->dev;
  fc_sleep_until(c->end_ns);
  fc_pools_sync(dev);
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuCtxSynchronize(void) { FC_LOCKED(fc_ctx_sync(NULL)); }
FC_EXPORT CUresult cuCtxSynchronize_v2(CUcontext ctx) { FC_LOCKED(fc_ctx_sync(ctx)); }

/* ---- limits ----------------------------------------------------------------- */

/* What a limit takes beyond the context's footprint (which includes the
 * defaults): the per-thread stack is reserved for every thread the device
 * can hold (2048 per SM x 132 SMs: 64 KiB takes 16.5 GiB, as measured on the
 * H100); the malloc heap and the printf FIFO take their size. The real
 * driver takes the heap and the FIFO when it loads a kernel that uses them;
 * the fake takes them when they are set, so a test sees them at once. */
static uint64_t fc_limit_bytes(CUlimit limit, size_t value) {
  switch (limit) {
    case CU_LIMIT_STACK_SIZE:
      return value > FC_STACK_DEFAULT ? (uint64_t)(value - FC_STACK_DEFAULT) * FC_THREADS_PER_SM * FC_SM_COUNT : 0;
    case CU_LIMIT_PRINTF_FIFO_SIZE: return value > FC_FIFO_DEFAULT ? value - FC_FIFO_DEFAULT : 0;
    case CU_LIMIT_MALLOC_HEAP_SIZE: return value > FC_HEAP_DEFAULT ? value - FC_HEAP_DEFAULT : 0;
    default: return 0;
  }
}

static CUresult fc_ctx_set_limit(CUlimit limit, size_t value) {
  fc_ctx_t *c;
  CUresult rc = fc_current(&c);
  if (rc != CUDA_SUCCESS) return rc;
  switch (limit) {
    case CU_LIMIT_STACK_SIZE:
      /* rounded up to 16 bytes (1000 -> 1008); 256 KiB was the largest the
       * H100 took, 512 KiB and up got CUDA_ERROR_INVALID_VALUE */
      if (value > FC_STACK_MAX) return CUDA_ERROR_INVALID_VALUE;
      value = (value + 15) / 16 * 16;
      break;
    case CU_LIMIT_PRINTF_FIFO_SIZE:
    case CU_LIMIT_MALLOC_HEAP_SIZE: break;
    /* "only applicable to devices of compute capability < 9.0" */
    case CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH: return CUDA_ERROR_UNSUPPORTED_LIMIT;
    case CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT:
    case CU_LIMIT_PERSISTING_L2_CACHE_SIZE:
    case CU_LIMIT_CIG_SHMEM_FALLBACK_ENABLED: break;
    case CU_LIMIT_MAX_L2_FETCH_GRANULARITY:
      if (value > 128) return CUDA_ERROR_INVALID_VALUE; /* "between 0 and 128" */
      break;
    /* "Can only be queried, cannot be set" (the code is unconfirmed) */
    case CU_LIMIT_SHMEM_SIZE:
    case CU_LIMIT_CIG_ENABLED: return CUDA_ERROR_INVALID_VALUE;
    default: return CUDA_ERROR_INVALID_VALUE; /* the H100: 99 -> INVALID_VALUE */
  }
  if (limit <= CU_LIMIT_MALLOC_HEAP_SIZE) {
    uint64_t want = fc_limit_bytes(limit, value), have = c->limit_charge[limit];
    /* a reservation that does not fit: "cuCtxSetLimit() will return
     * CUDA_ERROR_OUT_OF_MEMORY, and the limit can be reset to a lower value" */
    if (want > have && (rc = fc_charge(c->dev, want - have)) != CUDA_SUCCESS) return rc;
    if (want < have) fc_uncharge(c->dev, have - want);
    c->limit_charge[limit] = want;
  }
  c->limits[limit] = value;
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuCtxSetLimit(CUlimit limit, size_t value) { FC_LOCKED(fc_ctx_set_limit(limit, value)); }

static CUresult fc_ctx_get_limit(size_t *pvalue, CUlimit limit) {
  fc_ctx_t *c;
  CUresult rc = fc_current(&c);
  if (rc != CUDA_SUCCESS) return rc;
  if (!pvalue || (unsigned)limit > CU_LIMIT_CIG_SHMEM_FALLBACK_ENABLED) return CUDA_ERROR_INVALID_VALUE;
  if (limit == CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH) return CUDA_ERROR_UNSUPPORTED_LIMIT;
  *pvalue = c->limits[limit];
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuCtxGetLimit(size_t *pvalue, CUlimit limit) { FC_LOCKED(fc_ctx_get_limit(pvalue, limit)); }

void fc_ctx_release_all(fc_ctx_t *ctx) {
  fc_allocs_release(ctx);
  fc_events_release(ctx);
  fc_streams_release(ctx);
  fc_modules_release(ctx);
  fc_arrays_release(ctx);
}

/* ---- errors ----------------------------------------------------------------- */

/* Every code the H100's driver names, with its name and text
 * (real_h100.txt, "errors.table"). */
static const struct {
  int code;
  const char *name, *text;
} fc_errors[] = {
    {0, "CUDA_SUCCESS", "no error"},
    {1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {4, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {5, "CUDA_ERROR_PROFILER_DISABLED", "profiler disabled while using external profiling tool"},
    {6, "CUDA_ERROR_PROFILER_NOT_INITIALIZED", "profiler not initialized: call cudaProfilerInitialize()"},
    {7, "CUDA_ERROR_PROFILER_ALREADY_STARTED", "profiler already started"},
    {8, "CUDA_ERROR_PROFILER_ALREADY_STOPPED", "profiler already stopped"},
    {34, "CUDA_ERROR_STUB_LIBRARY", "CUDA driver is a stub library"},
    {36, "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER", "API call is not supported in the installed CUDA driver"},
    {46, "CUDA_ERROR_DEVICE_UNAVAILABLE", "CUDA-capable device(s) is/are busy or unavailable"},
    {100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {102, "CUDA_ERROR_DEVICE_NOT_LICENSED", "device doesn't have valid Grid license"},
    {200, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {201, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {202, "CUDA_ERROR_CONTEXT_ALREADY_CURRENT", "context already current"},
    {205, "CUDA_ERROR_MAP_FAILED", "mapping of buffer object failed"},
    {206, "CUDA_ERROR_UNMAP_FAILED", "unmapping of buffer object failed"},
    {207, "CUDA_ERROR_ARRAY_IS_MAPPED", "array is mapped"},
    {208, "CUDA_ERROR_ALREADY_MAPPED", "resource already mapped"},
    {209, "CUDA_ERROR_NO_BINARY_FOR_GPU", "no kernel image is available for execution on the device"},
    {210, "CUDA_ERROR_ALREADY_ACQUIRED", "resource already acquired"},
    {211, "CUDA_ERROR_NOT_MAPPED", "resource not mapped"},
    {212, "CUDA_ERROR_NOT_MAPPED_AS_ARRAY", "resource not mapped as array"},
    {213, "CUDA_ERROR_NOT_MAPPED_AS_POINTER", "resource not mapped as pointer"},
    {214, "CUDA_ERROR_ECC_UNCORRECTABLE", "uncorrectable ECC error encountered"},
    {215, "CUDA_ERROR_UNSUPPORTED_LIMIT", "limit is not supported on this architecture"},
    {216, "CUDA_ERROR_CONTEXT_ALREADY_IN_USE", "exclusive-thread device already in use by a different thread"},
    {217, "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED", "peer access is not supported between these two devices"},
    {218, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
    {219, "CUDA_ERROR_INVALID_GRAPHICS_CONTEXT", "invalid OpenGL or DirectX context"},
    {220, "CUDA_ERROR_NVLINK_UNCORRECTABLE", "uncorrectable NVLink error detected during the execution"},
    {221, "CUDA_ERROR_JIT_COMPILER_NOT_FOUND", "PTX JIT compiler library not found"},
    {222, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION", "the provided PTX was compiled with an unsupported toolchain."},
    {223, "CUDA_ERROR_JIT_COMPILATION_DISABLED", "PTX JIT compilation was disabled"},
    {224, "CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY", "the provided execution affinity is not supported"},
    {225, "CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC", "the provided PTX contains unsupported call to cudaDeviceSynchronize"},
    {226, "CUDA_ERROR_CONTAINED", "Invalid access of peer GPU memory over nvlink or a hardware error"},
    {300, "CUDA_ERROR_INVALID_SOURCE", "device kernel image is invalid"},
    {301, "CUDA_ERROR_FILE_NOT_FOUND", "file not found"},
    {302, "CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND", "shared object symbol not found"},
    {303, "CUDA_ERROR_SHARED_OBJECT_INIT_FAILED", "shared object initialization failed"},
    {304, "CUDA_ERROR_OPERATING_SYSTEM", "OS call failed or operation not supported on this OS"},
    {400, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {401, "CUDA_ERROR_ILLEGAL_STATE", "the operation cannot be performed in the present state"},
    {402, "CUDA_ERROR_LOSSY_QUERY", "attempted introspection would be semantically lossy"},
    {500, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {600, "CUDA_ERROR_NOT_READY", "device not ready"},
    {700, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {701, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "too many resources requested for launch"},
    {702, "CUDA_ERROR_LAUNCH_TIMEOUT", "the launch timed out and was terminated"},
    {703, "CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING", "launch uses incompatible texturing mode"},
    {704, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED", "peer access is already enabled"},
    {705, "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED", "peer access has not been enabled"},
    {708, "CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE", "cannot set while device is active in this process"},
    {709, "CUDA_ERROR_CONTEXT_IS_DESTROYED", "context is destroyed"},
    {710, "CUDA_ERROR_ASSERT", "device-side assert triggered"},
    {711, "CUDA_ERROR_TOO_MANY_PEERS", "peer mapping resources exhausted"},
    {712, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED", "part or all of the requested memory range is already mapped"},
    {713, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED", "pointer does not correspond to a registered memory region"},
    {714, "CUDA_ERROR_HARDWARE_STACK_ERROR", "hardware stack error"},
    {715, "CUDA_ERROR_ILLEGAL_INSTRUCTION", "an illegal instruction was encountered"},
    {716, "CUDA_ERROR_MISALIGNED_ADDRESS", "misaligned address"},
    {717, "CUDA_ERROR_INVALID_ADDRESS_SPACE", "operation not supported on global/shared address space"},
    {718, "CUDA_ERROR_INVALID_PC", "invalid program counter"},
    {719, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {720, "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE", "too many blocks in cooperative launch"},
    {721, "CUDA_ERROR_TENSOR_MEMORY_LEAK", "tensor memory not completely freed"},
    {800, "CUDA_ERROR_NOT_PERMITTED", "operation not permitted"},
    {801, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {802, "CUDA_ERROR_SYSTEM_NOT_READY", "system not yet initialized"},
    {803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", "system has unsupported display driver / cuda driver combination"},
    {804, "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE", "forward compatibility was attempted on non supported HW"},
    {805, "CUDA_ERROR_MPS_CONNECTION_FAILED",
     "MPS client failed to connect to the MPS control daemon or the MPS server"},
    {806, "CUDA_ERROR_MPS_RPC_FAILURE", "the remote procedural call between the MPS server and the MPS client failed"},
    {807, "CUDA_ERROR_MPS_SERVER_NOT_READY", "MPS server is not ready to accept new MPS client requests"},
    {808, "CUDA_ERROR_MPS_MAX_CLIENTS_REACHED",
     "the hardware resources required to create MPS client have been exhausted"},
    {809, "CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED",
     "the hardware resources required to support device connections have been exhausted"},
    {810, "CUDA_ERROR_MPS_CLIENT_TERMINATED", "the MPS client has been terminated by the server"},
    {811, "CUDA_ERROR_CDP_NOT_SUPPORTED",
     "is using CUDA Dynamic Parallelism, but the current configuration, like MPS, does not support it"},
    {812, "CUDA_ERROR_CDP_VERSION_MISMATCH",
     "unsupported interaction between different versions of CUDA Dynamic Parallelism"},
    {900, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "operation not permitted when stream is capturing"},
    {901, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", "operation failed due to a previous error during capture"},
    {902, "CUDA_ERROR_STREAM_CAPTURE_MERGE", "operation would result in a merge of separate capture sequences"},
    {903, "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED", "capture was not ended in the same stream as it began"},
    {904, "CUDA_ERROR_STREAM_CAPTURE_UNJOINED", "capturing stream has unjoined work"},
    {905, "CUDA_ERROR_STREAM_CAPTURE_ISOLATION", "dependency created on uncaptured work in another stream"},
    {906, "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT",
     "operation would make the legacy stream depend on a capturing blocking stream"},
    {907, "CUDA_ERROR_CAPTURED_EVENT", "operation not permitted on an event last recorded in a capturing stream"},
    {908, "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD",
     "attempt to terminate a thread-local capture sequence from another thread"},
    {909, "CUDA_ERROR_TIMEOUT", "wait operation timed out"},
    {910, "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE",
     "the graph update was not performed because it included changes which violated constraints specific to "
     "instantiated graph update"},
    {911, "CUDA_ERROR_EXTERNAL_DEVICE", "an async error has occured in external entity outside of CUDA"},
    {912, "CUDA_ERROR_INVALID_CLUSTER_SIZE", "a kernel launch error has occurred due to cluster misconfiguration"},
    {913, "CUDA_ERROR_FUNCTION_NOT_LOADED",
     "the function handle is not loaded when calling an API that requires a loaded function"},
    {914, "CUDA_ERROR_INVALID_RESOURCE_TYPE",
     "one or more resources passed in are not valid resource types for the operation"},
    {915, "CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION",
     "one or more resources are insufficient or non-applicable for the operation"},
    {916, "CUDA_ERROR_KEY_ROTATION", "an error happened during the key rotation sequence"},
    {999, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

static int fc_error_index(CUresult error) {
  for (size_t i = 0; i < sizeof fc_errors / sizeof fc_errors[0]; i++)
    if (fc_errors[i].code == (int)error) return (int)i;
  return -1;
}

/* Both work before cuInit. An unknown code: *pStr = NULL and
 * CUDA_ERROR_INVALID_VALUE (the H100); pStr NULL crashes the real driver,
 * the fake answers CUDA_ERROR_INVALID_VALUE. */
FC_EXPORT CUresult cuGetErrorString(CUresult error, const char **pStr) {
  if (!pStr) return CUDA_ERROR_INVALID_VALUE;
  int i = fc_error_index(error);
  *pStr = i < 0 ? NULL : fc_errors[i].text;
  return i < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

FC_EXPORT CUresult cuGetErrorName(CUresult error, const char **pStr) {
  if (!pStr) return CUDA_ERROR_INVALID_VALUE;
  int i = fc_error_index(error);
  *pStr = i < 0 ? NULL : fc_errors[i].name;
  return i < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

/* cuGetExportTable: the driver's private interface tables, which NVIDIA's
 * own libraries (NVRTC, the runtime) look up by UUID. The fake has none:
 * every table is CUDA_ERROR_NOT_SUPPORTED, and a NULL argument
 * CUDA_ERROR_INVALID_VALUE; a library that needs one then stops with an
 * error instead of calling through a missing symbol (NVRTC resolves this
 * name and crashed on its absence). */
FC_EXPORT CUresult cuGetExportTable(const void **ppExportTable, const CUuuid *pExportTableId) {
  if (!ppExportTable || !pExportTableId) return CUDA_ERROR_INVALID_VALUE;
  *ppExportTable = NULL;
  return CUDA_ERROR_NOT_SUPPORTED;
}
