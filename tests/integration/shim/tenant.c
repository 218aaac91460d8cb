/* tenant.c: a CUDA driver-API program run under libtessera-cuda.so against
 * the fake driver (tests/fakes/cuda), for the shim's integration tests.
 * Linked with the fake libcuda.so.1; the shim is preloaded by whoever runs
 * it. Every loop is bounded in time or count.
 *
 *   tsr_shim_tenant stress CTL IDX SEED DURATION_MS EXTRA GO_FD
 *       random allocations and frees through every path (EXTRA=1 adds
 *       arrays, mipmapped arrays and graph memory) until CTL's stop or
 *       DURATION_MS; checks that every refusal is out-of-memory, that every
 *       success is memory the fake driver really holds for this process,
 *       and that every free succeeds; then frees everything (its context
 *       too) and waits for CTL's release. Exit 1 if a check failed.
 *   tsr_shim_tenant start CTL IDX GO_FD EXIT_FD REGION|-
 *       waits on GO_FD, then cuInit, a context and one allocation; writes
 *       its times and its slot in REGION into CTL; waits on EXIT_FD.
 *   tsr_shim_tenant alloc BYTES
 *       a context and one cuMemAlloc: prints "context=CUDA_..." and
 *       "alloc=CUDA_..." (the policy cases)
 *   tsr_shim_tenant absurd [REGION]
 *       absurd sizes, NULL out-pointers, bad and double frees on every
 *       hooked path; one line per call: "CASE rc=NAME delta=BYTES", delta
 *       being what REGION's used changed by once the call (and the free of
 *       what it allocated) returned
 *   tsr_shim_tenant devices REGION_A REGION_B
 *       64 MiB on CUDA device 0 and 128 MiB on CUDA device 1; prints each
 *       device's UUID, the bytes the fake holds on each physical device and
 *       each region's used, then frees
 *   tsr_shim_tenant hold GO_FILE DONE_FILE BYTES REGION
 *       waits for GO_FILE, allocates BYTES, prints "alloc=... slot=K",
 *       waits for DONE_FILE, frees
 *   tsr_shim_tenant lifetimes reset|destroy|pool|release REGION
 *       what a context's end and a pool's end give back, one case a
 *       process: memory held through every context-bound
 *       path when the primary context is reset, or a created context is
 *       destroyed; a pool destroyed with live blocks; the primary's last
 *       reference released with memory held; stale frees after each. One
 *       "key=value" line per step, REGION's used bytes and 256 MiB chunk
 *       counts, for lifetimes.sh
 *   tsr_shim_tenant steps REGION
 *       one process that lives while a lease changes under it (resize.sh):
 *       reads commands from stdin, one a line, and answers each with one
 *       line on stdout: "alloc BYTES" -> "alloc=CUDA_..." (kept), "free" ->
 *       "free=CUDA_..." (the last one kept), "info" -> "total=N free=N"
 *       (cuMemGetInfo), "share" -> "share=PPM" (REGION's share in force,
 *       through a mapping made at the start), "quit"; at most 64 held */
#include <cuda.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "ctl.h"
#include "fake_cuda_state.h"
#include "region/region.h"

#define MIB ((size_t)1 << 20)

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void nap_us(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  nanosleep(&ts, NULL);
}

static const char *rc_name(CUresult rc) {
  const char *s = NULL;
  if (cuGetErrorName(rc, &s) != CUDA_SUCCESS || !s) return "CUDA_ERROR_UNKNOWN_CODE";
  return s;
}

static int fails;
#define FAIL(...)                                  \
  do {                                             \
    fprintf(stderr, "tenant %d: ", (int)getpid()); \
    fprintf(stderr, __VA_ARGS__);                  \
    fputc('\n', stderr);                           \
    fails++;                                       \
  } while (0)

static tsr_ctl_t *ctl_map(const char *path) {
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return NULL;
  void *p = mmap(NULL, sizeof(tsr_ctl_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  return p == MAP_FAILED ? NULL : p;
}

/* Blocks until the orchestrator closes the pipe's write end. */
static void wait_pipe(int fd) {
  char c;
  while (read(fd, &c, 1) > 0) {
  }
  close(fd);
}

/* Makes `dev`'s primary context current (retained: the shim charges it). */
static CUresult ctx_on(CUdevice dev) {
  CUcontext ctx;
  CUresult rc = cuDevicePrimaryCtxRetain(&ctx, dev);
  return rc != CUDA_SUCCESS ? rc : cuCtxSetCurrent(ctx);
}

static tsr_region_t *region_at(const char *path) {
  if (!path || !*path || strcmp(path, "-") == 0) return NULL;
  tsr_region_t *r = NULL;
  tsr_status_t st = tsr_region_open(AT_FDCWD, path, 0, &r);
  if (st) {
    fprintf(stderr, "tenant: %s\n", tsr_status_message(st));
    tsr_status_free(st);
    return NULL;
  }
  return r;
}

static uint64_t region_used(tsr_region_t *r) {
  if (!r) return 0;
  tsr_region_stats_t s;
  tsr_region_stats(r, &s);
  return s.used_bytes;
}

/* The slot of the calling process: its pid AND its start time (a stale slot
 * may name the same pid). */
static int region_slot_self(tsr_region_t *r) {
  tsr_region_proc_t self;
  tsr_region_proc_self(&self);
  tsr_region_slot_info_t info[TSR_REGION_SLOTS];
  uint32_t n = r ? tsr_region_slots(r, info, TSR_REGION_SLOTS) : 0;
  for (uint32_t i = 0; i < n; i++)
    if (info[i].proc.pid == self.pid && info[i].proc.start_ticks == self.start_ticks) return (int)info[i].slot;
  return -1;
}

/* ---- stress --------------------------------------------------------------- */

typedef struct {
  int path;
  uint64_t bytes; /* a lower bound of what the driver holds for it */
  CUdeviceptr dptr;
  CUmemGenericAllocationHandle vmm;
  CUarray array;
  CUmipmappedArray mip;
  CUgraph graph;
  CUgraphExec exec;
} item_t;

#define ITEMS_MAX 24

typedef struct {
  tsr_ctl_t *ctl;
  fake_cuda_state_t *fake;
  CUstream stream;
  CUmemoryPool pool_default, pool_created;
  bool extra;
  item_t items[ITEMS_MAX];
  int n;
  uint64_t live; /* sum of the live items' lower bounds */
  unsigned seed;
} stress_t;

static unsigned rnd(stress_t *s) { return (unsigned)rand_r(&s->seed); }

/* 1 to 64 MiB, mostly not a multiple of the 2 MiB granule */
static size_t rnd_size(stress_t *s) { return (1 + rnd(s) % 64) * MIB - (rnd(s) % 4) * 4096; }

/* One allocation through `path`; fills *it on success. */
static CUresult stress_alloc(stress_t *s, int path, item_t *it) {
  memset(it, 0, sizeof(*it));
  it->path = path;
  size_t n = rnd_size(s);
  switch (path) {
    case TSR_P_PLAIN: it->bytes = n; return cuMemAlloc(&it->dptr, n);
    case TSR_P_PITCH: {
      size_t pitch = 0, width = 4096 + rnd(s) % 4096, height = n / width + 1;
      it->bytes = width * height;
      return cuMemAllocPitch(&it->dptr, &pitch, width, height, 4);
    }
    case TSR_P_MANAGED: it->bytes = n; return cuMemAllocManaged(&it->dptr, n, CU_MEM_ATTACH_GLOBAL);
    case TSR_P_ASYNC: it->bytes = n; return cuMemAllocAsync(&it->dptr, n, s->stream);
    case TSR_P_POOL_DEFAULT: it->bytes = n; return cuMemAllocFromPoolAsync(&it->dptr, n, s->pool_default, s->stream);
    case TSR_P_POOL_CREATED: it->bytes = n; return cuMemAllocFromPoolAsync(&it->dptr, n, s->pool_created, s->stream);
    case TSR_P_VMM: {
      CUmemAllocationProp prop;
      memset(&prop, 0, sizeof prop);
      prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
      prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      prop.location.id = 0;
      it->bytes = (1 + rnd(s) % 24) * 2 * MIB; /* a multiple of the granularity */
      return cuMemCreate(&it->vmm, it->bytes, &prop, 0);
    }
    case TSR_P_ARRAY: {
      CUDA_ARRAY_DESCRIPTOR d = {
          .Width = 1024, .Height = 64 + rnd(s) % 3008, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 4};
      it->bytes = (uint64_t)d.Width * d.Height * 16;
      return cuArrayCreate(&it->array, &d);
    }
    case TSR_P_ARRAY3D: {
      CUDA_ARRAY3D_DESCRIPTOR d = {
          .Width = 256, .Height = 256, .Depth = 1 + rnd(s) % 48, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 4};
      it->bytes = (uint64_t)d.Width * d.Height * d.Depth * 16;
      return cuArray3DCreate(&it->array, &d);
    }
    case TSR_P_MIPMAP: {
      CUDA_ARRAY3D_DESCRIPTOR d = {
          .Width = 1024, .Height = 256 + rnd(s) % 768, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 4};
      it->bytes = (uint64_t)d.Width * d.Height * 16; /* level 0 alone */
      return cuMipmappedArrayCreate(&it->mip, &d, 1 + rnd(s) % 6);
    }
    case TSR_P_GRAPH: {
      CUresult rc = cuGraphCreate(&it->graph, 0);
      if (rc != CUDA_SUCCESS) return rc;
      CUDA_MEM_ALLOC_NODE_PARAMS p;
      memset(&p, 0, sizeof p);
      p.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
      p.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      p.poolProps.location.id = 0;
      p.bytesize = n;
      it->bytes = n;
      CUgraphNode node;
      if ((rc = cuGraphAddMemAllocNode(&node, it->graph, NULL, 0, &p)) == CUDA_SUCCESS &&
          (rc = cuGraphInstantiateWithFlags(&it->exec, it->graph, 0)) == CUDA_SUCCESS &&
          (rc = cuGraphLaunch(it->exec, s->stream)) == CUDA_SUCCESS) {
        it->dptr = p.dptr;
        return CUDA_SUCCESS;
      }
      if (it->exec) cuGraphExecDestroy(it->exec);
      cuGraphDestroy(it->graph);
      return rc;
    }
  }
  return CUDA_ERROR_INVALID_VALUE;
}

static bool is_sync_ptr(int path) { return path == TSR_P_PLAIN || path == TSR_P_PITCH || path == TSR_P_MANAGED; }

/* Frees `it` through a path picked at random among those the API allows. */
static CUresult stress_free(stress_t *s, item_t *it) {
  bool other = rnd(s) % 2;
  switch (it->path) {
    case TSR_P_VMM: return cuMemRelease(it->vmm);
    case TSR_P_ARRAY:
    case TSR_P_ARRAY3D: return cuArrayDestroy(it->array);
    case TSR_P_MIPMAP: return cuMipmappedArrayDestroy(it->mip);
    case TSR_P_GRAPH: {
      CUresult rc = other ? cuMemFreeAsync(it->dptr, s->stream) : cuMemFree(it->dptr);
      CUresult rc2 = cuGraphExecDestroy(it->exec);
      CUresult rc3 = cuGraphDestroy(it->graph);
      return rc != CUDA_SUCCESS ? rc : rc2 != CUDA_SUCCESS ? rc2 : rc3;
    }
    default: break;
  }
  bool sync = is_sync_ptr(it->path);
  /* the free path opposite to the allocation's when `other` */
  bool use_async = sync ? other : !other;
  if (other) atomic_fetch_add(&s->ctl->cross[sync ? TSR_X_ASYNC_OF_SYNC : TSR_X_SYNC_OF_ASYNC], 1);
  return use_async ? cuMemFreeAsync(it->dptr, s->stream) : cuMemFree(it->dptr);
}

static void stress_housekeeping(stress_t *s) {
  size_t f, t;
  switch (rnd(s) % 4) {
    case 0: cuStreamSynchronize(s->stream); break;
    case 1: cuMemPoolTrimTo(s->pool_created, 0); break;
    case 2:
      if (s->extra) cuDeviceGraphMemTrim(0);
      break;
    case 3: cuMemGetInfo(&f, &t); break;
  }
}

static void stress_check_held(stress_t *s, int path) {
  uint64_t held = fake_cuda_state_pid_bytes(s->fake, (int32_t)getpid(), 0);
  if (held < s->live)
    FAIL("after a %s success the driver holds %" PRIu64
         " bytes for this process, "
         "less than the %" PRIu64 " it was given",
         tsr_ctl_path_name(path), held, s->live);
}

static int run_stress(int argc, char **argv) {
  if (argc != 8) return 2;
  stress_t s;
  memset(&s, 0, sizeof s);
  s.ctl = ctl_map(argv[2]);
  int idx = atoi(argv[3]);
  s.seed = (unsigned)strtoul(argv[4], NULL, 10);
  uint64_t duration_ns = strtoull(argv[5], NULL, 10) * 1000000u;
  s.extra = atoi(argv[6]) != 0;
  int go_fd = atoi(argv[7]);
  if (!s.ctl || idx < 0 || idx >= TSR_CTL_TENANTS) return 2;
  atomic_store(&s.ctl->pid[idx], (int32_t)getpid());
  CUresult rc;
  CUdevice dev;
  if ((rc = cuInit(0)) != CUDA_SUCCESS || (rc = cuDeviceGet(&dev, 0)) != CUDA_SUCCESS ||
      (rc = ctx_on(dev)) != CUDA_SUCCESS || (rc = cuStreamCreate(&s.stream, 0)) != CUDA_SUCCESS ||
      (rc = cuDeviceGetDefaultMemPool(&s.pool_default, dev)) != CUDA_SUCCESS) {
    FAIL("set-up: %s", rc_name(rc));
    atomic_fetch_add(&s.ctl->failed, 1);
    return 1;
  }
  CUmemPoolProps pp;
  memset(&pp, 0, sizeof pp);
  pp.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  pp.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  pp.location.id = 0;
  if ((rc = cuMemPoolCreate(&s.pool_created, &pp)) != CUDA_SUCCESS) {
    FAIL("cuMemPoolCreate: %s", rc_name(rc));
    atomic_fetch_add(&s.ctl->failed, 1);
    return 1;
  }
  char err[256];
  const char *fpath = getenv("FAKE_CUDA_STATE");
  if (!fpath || fake_cuda_state_open(fpath, 0, NULL, &s.fake, err, sizeof err) != 0) {
    FAIL("FAKE_CUDA_STATE: %s", fpath ? err : "unset");
    atomic_fetch_add(&s.ctl->failed, 1);
    return 1;
  }
  int npaths = s.extra ? TSR_P_COUNT : TSR_P_ARRAY;
  atomic_fetch_add(&s.ctl->ready, 1);
  wait_pipe(go_fd);
  uint64_t end = now_ns() + duration_ns;
  uint64_t ops = 0;
  while (!atomic_load(&s.ctl->stop) && now_ns() < end && ops < 1000000) {
    ops++;
    if (ops % 16 == 0) stress_housekeeping(&s);
    if (s.n < ITEMS_MAX && (s.n == 0 || rnd(&s) % 100 < 55)) {
      int path = (int)(rnd(&s) % (unsigned)npaths);
      item_t *it = &s.items[s.n];
      rc = stress_alloc(&s, path, it);
      if (rc == CUDA_SUCCESS) {
        s.n++;
        s.live += it->bytes;
        atomic_fetch_add(&s.ctl->ok[path], 1);
        stress_check_held(&s, path);
      } else if (rc == CUDA_ERROR_OUT_OF_MEMORY) {
        atomic_fetch_add(&s.ctl->oom[path], 1);
      } else {
        FAIL("%s refused with %s, not CUDA_ERROR_OUT_OF_MEMORY", tsr_ctl_path_name(path), rc_name(rc));
      }
    } else {
      int k = (int)(rnd(&s) % (unsigned)s.n);
      item_t it = s.items[k];
      s.items[k] = s.items[--s.n];
      s.live -= it.bytes;
      if ((rc = stress_free(&s, &it)) != CUDA_SUCCESS)
        FAIL("freeing a %s allocation: %s", tsr_ctl_path_name(it.path), rc_name(rc));
    }
  }
  atomic_fetch_add(&s.ctl->ops, ops);
  /* free everything, and let the pools and the graph cache give it back */
  while (s.n > 0) {
    item_t it = s.items[--s.n];
    if ((rc = stress_free(&s, &it)) != CUDA_SUCCESS)
      FAIL("freeing a %s allocation: %s", tsr_ctl_path_name(it.path), rc_name(rc));
  }
  s.live = 0;
  cuStreamSynchronize(s.stream);
  cuMemPoolTrimTo(s.pool_default, 0);
  cuMemPoolTrimTo(s.pool_created, 0);
  if ((rc = cuMemPoolDestroy(s.pool_created)) != CUDA_SUCCESS) FAIL("cuMemPoolDestroy: %s", rc_name(rc));
  if (s.extra) cuDeviceGraphMemTrim(0);
  size_t f, t;
  cuMemGetInfo(&f, &t);
  /* and the context: the lease must then hold nothing of this process */
  if ((rc = cuStreamDestroy(s.stream)) != CUDA_SUCCESS) FAIL("cuStreamDestroy: %s", rc_name(rc));
  if ((rc = cuDevicePrimaryCtxRelease(dev)) != CUDA_SUCCESS) FAIL("cuDevicePrimaryCtxRelease: %s", rc_name(rc));
  if (fails) atomic_fetch_add(&s.ctl->failed, 1);
  atomic_fetch_add(&s.ctl->freed, 1);
  for (int i = 0; i < 60000 && !atomic_load(&s.ctl->release); i++) nap_us(1000);
  fake_cuda_state_close(s.fake);
  return fails ? 1 : 0;
}

/* ---- start-up ------------------------------------------------------------- */

static int run_start(int argc, char **argv) {
  if (argc != 7) return 2;
  tsr_ctl_t *ctl = ctl_map(argv[2]);
  int idx = atoi(argv[3]);
  int go_fd = atoi(argv[4]), exit_fd = atoi(argv[5]);
  if (!ctl || idx < 0 || idx >= TSR_CTL_TENANTS) return 2;
  tsr_region_t *r = region_at(argv[6]);
  atomic_store(&ctl->pid[idx], (int32_t)getpid());
  atomic_store(&ctl->slot[idx], -1);
  atomic_fetch_add(&ctl->ready, 1);
  wait_pipe(go_fd);
  uint64_t t0 = now_ns();
  CUdevice dev;
  CUdeviceptr p = 0;
  CUresult rc;
  if ((rc = cuInit(0)) != CUDA_SUCCESS || (rc = cuDeviceGet(&dev, 0)) != CUDA_SUCCESS ||
      (rc = ctx_on(dev)) != CUDA_SUCCESS || (rc = cuMemAlloc(&p, 2 * MIB)) != CUDA_SUCCESS) {
    FAIL("start-up: %s", rc_name(rc));
    atomic_fetch_add(&ctl->failed, 1);
  }
  uint64_t t1 = now_ns();
  atomic_store(&ctl->woke_ns[idx], t0);
  atomic_store(&ctl->done_ns[idx], t1);
  if (r) atomic_store(&ctl->slot[idx], region_slot_self(r));
  atomic_fetch_add(&ctl->done, 1);
  wait_pipe(exit_fd);
  if (p && (rc = cuMemFree(p)) != CUDA_SUCCESS) FAIL("cuMemFree: %s", rc_name(rc));
  tsr_region_close(r);
  return fails ? 1 : 0;
}

/* ---- one allocation (the policy cases) ------------------------------------- */

static int run_alloc(int argc, char **argv) {
  if (argc != 3) return 2;
  size_t bytes = strtoull(argv[2], NULL, 0);
  CUdevice dev;
  CUresult rc;
  if ((rc = cuInit(0)) != CUDA_SUCCESS || (rc = cuDeviceGet(&dev, 0)) != CUDA_SUCCESS) {
    printf("setup=%s\n", rc_name(rc));
    return 1;
  }
  /* under `deny` without a lease the context itself is refused */
  rc = ctx_on(dev);
  printf("context=%s\n", rc_name(rc));
  CUdeviceptr p = 0;
  if (rc == CUDA_SUCCESS) {
    rc = cuMemAlloc(&p, bytes);
    printf("alloc=%s\n", rc_name(rc));
    if (rc == CUDA_SUCCESS && (rc = cuMemFree(p)) != CUDA_SUCCESS) printf("free=%s\n", rc_name(rc));
  }
  fflush(stdout);
  return 0;
}

/* ---- absurd sizes, NULL out-pointers, bad and double frees ----------------- */

typedef struct {
  tsr_region_t *r;
  CUstream stream;
  CUmemoryPool pool_default, pool_created;
} absurd_t;

static void say(absurd_t *a, const char *what, unsigned long long size, CUresult rc, uint64_t before) {
  uint64_t after = region_used(a->r);
  printf("%s size=%llu rc=%s delta=%" PRId64 "\n", what, size, rc_name(rc), (int64_t)(after - before));
}

/* Allocates `size` through `path` (dptr etc. NULL when `null_out`); frees
 * what it got through the usual path. The result of the allocation. */
static CUresult absurd_one(absurd_t *a, int path, size_t size, bool null_out) {
  CUdeviceptr p = 0;
  CUresult rc = CUDA_ERROR_INVALID_VALUE;
  CUdeviceptr *pp = null_out ? NULL : &p;
  switch (path) {
    case TSR_P_PLAIN: rc = cuMemAlloc(pp, size); break;
    case TSR_P_PITCH: {
      size_t pitch = 0;
      rc = cuMemAllocPitch(pp, null_out ? NULL : &pitch, size, 1, 4);
      break;
    }
    case TSR_P_MANAGED: rc = cuMemAllocManaged(pp, size, CU_MEM_ATTACH_GLOBAL); break;
    case TSR_P_ASYNC: rc = cuMemAllocAsync(pp, size, a->stream); break;
    case TSR_P_POOL_DEFAULT: rc = cuMemAllocFromPoolAsync(pp, size, a->pool_default, a->stream); break;
    case TSR_P_POOL_CREATED: rc = cuMemAllocFromPoolAsync(pp, size, a->pool_created, a->stream); break;
    case TSR_P_VMM: {
      CUmemAllocationProp prop;
      memset(&prop, 0, sizeof prop);
      prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
      prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      CUmemGenericAllocationHandle h = 0;
      rc = cuMemCreate(null_out ? NULL : &h, size, &prop, 0);
      if (rc == CUDA_SUCCESS) cuMemRelease(h);
      return rc;
    }
    case TSR_P_ARRAY: {
      CUDA_ARRAY_DESCRIPTOR d = {.Width = size, .Height = 1, .Format = CU_AD_FORMAT_UNSIGNED_INT8, .NumChannels = 1};
      CUarray arr = NULL;
      rc = cuArrayCreate(null_out ? NULL : &arr, &d);
      if (rc == CUDA_SUCCESS) cuArrayDestroy(arr);
      return rc;
    }
    case TSR_P_ARRAY3D: {
      CUDA_ARRAY3D_DESCRIPTOR d = {
          .Width = size, .Height = 1, .Depth = 1, .Format = CU_AD_FORMAT_UNSIGNED_INT8, .NumChannels = 1};
      CUarray arr = NULL;
      rc = cuArray3DCreate(null_out ? NULL : &arr, &d);
      if (rc == CUDA_SUCCESS) cuArrayDestroy(arr);
      return rc;
    }
    case TSR_P_MIPMAP: {
      CUDA_ARRAY3D_DESCRIPTOR d = {
          .Width = size, .Height = 1, .Depth = 0, .Format = CU_AD_FORMAT_UNSIGNED_INT8, .NumChannels = 1};
      CUmipmappedArray m = NULL;
      rc = cuMipmappedArrayCreate(null_out ? NULL : &m, &d, 1);
      if (rc == CUDA_SUCCESS) cuMipmappedArrayDestroy(m);
      return rc;
    }
    case TSR_P_GRAPH: {
      CUgraph g;
      if ((rc = cuGraphCreate(&g, 0)) != CUDA_SUCCESS) return rc;
      CUDA_MEM_ALLOC_NODE_PARAMS np;
      memset(&np, 0, sizeof np);
      np.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
      np.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      np.bytesize = size;
      CUgraphNode node;
      CUgraphExec e = NULL;
      rc = cuGraphAddMemAllocNode(null_out ? NULL : &node, g, NULL, 0, &np);
      if (rc == CUDA_SUCCESS && (rc = cuGraphInstantiateWithFlags(&e, g, 0)) == CUDA_SUCCESS &&
          (rc = cuGraphLaunch(e, a->stream)) == CUDA_SUCCESS) {
        cuMemFree(np.dptr);
        cuDeviceGraphMemTrim(0);
      }
      if (e) cuGraphExecDestroy(e);
      cuGraphDestroy(g);
      return rc;
    }
  }
  if (rc == CUDA_SUCCESS) cuMemFree(p);
  cuStreamSynchronize(a->stream);
  return rc;
}

/* Allocates 4 MiB through `path`, frees it twice through `free_async`
 * (or cuMemFree) and prints both answers. */
static void absurd_double(absurd_t *a, int path, bool free_async) {
  char what[128];
  uint64_t before = region_used(a->r);
  CUresult rc1 = CUDA_ERROR_INVALID_VALUE, rc2 = CUDA_ERROR_INVALID_VALUE;
  if (path == TSR_P_VMM) {
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    CUmemGenericAllocationHandle h = 0;
    CUresult rc = cuMemCreate(&h, 4 * MIB, &prop, 0);
    if (rc == CUDA_SUCCESS) {
      rc1 = cuMemRelease(h);
      uint64_t mid = region_used(a->r);
      rc2 = cuMemRelease(h);
      snprintf(what, sizeof what, "double-release %s", tsr_ctl_path_name(path));
      say(a, what, 4 * MIB, rc2, mid);
    }
    snprintf(what, sizeof what, "first-release %s", tsr_ctl_path_name(path));
    say(a, what, 4 * MIB, rc == CUDA_SUCCESS ? rc1 : rc, before);
    return;
  }
  if (path == TSR_P_ARRAY) {
    CUDA_ARRAY_DESCRIPTOR d = {.Width = 1024, .Height = 1024, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1};
    CUarray arr = NULL;
    CUresult rc = cuArrayCreate(&arr, &d);
    if (rc == CUDA_SUCCESS) {
      rc1 = cuArrayDestroy(arr);
      uint64_t mid = region_used(a->r);
      rc2 = cuArrayDestroy(arr);
      snprintf(what, sizeof what, "double-destroy %s", tsr_ctl_path_name(path));
      say(a, what, 4 * MIB, rc2, mid);
    }
    snprintf(what, sizeof what, "first-destroy %s", tsr_ctl_path_name(path));
    say(a, what, 4 * MIB, rc == CUDA_SUCCESS ? rc1 : rc, before);
    return;
  }
  CUdeviceptr p = 0;
  CUresult rc;
  switch (path) {
    case TSR_P_PLAIN: rc = cuMemAlloc(&p, 4 * MIB); break;
    case TSR_P_MANAGED: rc = cuMemAllocManaged(&p, 4 * MIB, CU_MEM_ATTACH_GLOBAL); break;
    case TSR_P_ASYNC: rc = cuMemAllocAsync(&p, 4 * MIB, a->stream); break;
    default: rc = cuMemAllocFromPoolAsync(&p, 4 * MIB, a->pool_created, a->stream); break;
  }
  if (rc == CUDA_SUCCESS) {
    rc1 = free_async ? cuMemFreeAsync(p, a->stream) : cuMemFree(p);
    cuStreamSynchronize(a->stream);
    uint64_t mid = region_used(a->r);
    rc2 = free_async ? cuMemFreeAsync(p, a->stream) : cuMemFree(p);
    cuStreamSynchronize(a->stream);
    snprintf(what, sizeof what, "double-free%s %s", free_async ? "-async" : "", tsr_ctl_path_name(path));
    say(a, what, 4 * MIB, rc2, mid);
  }
  snprintf(what, sizeof what, "first-free%s %s", free_async ? "-async" : "", tsr_ctl_path_name(path));
  /* a stream-ordered allocation's pool keeps what it reserved: trim it */
  cuMemPoolTrimTo(a->pool_default, 0);
  cuMemPoolTrimTo(a->pool_created, 0);
  say(a, what, 4 * MIB, rc == CUDA_SUCCESS ? rc1 : rc, before);
}

static int run_absurd(int argc, char **argv) {
  absurd_t a;
  memset(&a, 0, sizeof a);
  a.r = region_at(argc > 2 ? argv[2] : NULL);
  CUdevice dev;
  CUresult rc;
  CUmemPoolProps pp;
  memset(&pp, 0, sizeof pp);
  pp.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  pp.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  if ((rc = cuInit(0)) != CUDA_SUCCESS || (rc = cuDeviceGet(&dev, 0)) != CUDA_SUCCESS ||
      (rc = ctx_on(dev)) != CUDA_SUCCESS || (rc = cuStreamCreate(&a.stream, 0)) != CUDA_SUCCESS ||
      (rc = cuDeviceGetDefaultMemPool(&a.pool_default, dev)) != CUDA_SUCCESS ||
      (rc = cuMemPoolCreate(&a.pool_created, &pp)) != CUDA_SUCCESS) {
    printf("setup=%s\n", rc_name(rc));
    return 1;
  }
  const unsigned long long sizes[] = {0, 1, UINT64_C(1) << 63, UINT64_MAX, SIZE_MAX / 2};
  char what[128];
  for (int path = 0; path < TSR_P_COUNT; path++) {
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
      uint64_t before = region_used(a.r);
      rc = absurd_one(&a, path, (size_t)sizes[i], false);
      cuMemPoolTrimTo(a.pool_default, 0);
      cuMemPoolTrimTo(a.pool_created, 0);
      snprintf(what, sizeof what, "absurd %s", tsr_ctl_path_name(path));
      say(&a, what, sizes[i], rc, before);
    }
    uint64_t before = region_used(a.r);
    rc = absurd_one(&a, path, 2 * MIB, true);
    snprintf(what, sizeof what, "null-out %s", tsr_ctl_path_name(path));
    say(&a, what, 2 * MIB, rc, before);
  }
  /* bad pointers and handles, with a live charged allocation beside them */
  CUdeviceptr live = 0;
  rc = cuMemAlloc(&live, 8 * MIB);
  printf("live-alloc rc=%s\n", rc_name(rc));
  const CUdeviceptr ptrs[] = {0, 1, (CUdeviceptr)0xdead0000, live + 4096, ~(CUdeviceptr)0};
  for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++) {
    uint64_t before = region_used(a.r);
    /* "bad-free" names the pointer by its index: live+4096 differs per run */
    snprintf(what, sizeof what, "bad-free#%zu cuMemFree_v2", i);
    say(&a, what, 0, cuMemFree(ptrs[i]), before);
    before = region_used(a.r);
    snprintf(what, sizeof what, "bad-free#%zu cuMemFreeAsync", i);
    rc = cuMemFreeAsync(ptrs[i], a.stream);
    cuStreamSynchronize(a.stream);
    say(&a, what, 0, rc, before);
  }
  const CUmemGenericAllocationHandle handles[] = {0, 12345, ~(CUmemGenericAllocationHandle)0};
  for (size_t i = 0; i < sizeof handles / sizeof handles[0]; i++) {
    uint64_t before = region_used(a.r);
    snprintf(what, sizeof what, "bad-release#%zu cuMemRelease", i);
    say(&a, what, 0, cuMemRelease(handles[i]), before);
    before = region_used(a.r);
    snprintf(what, sizeof what, "bad-destroy#%zu cuArrayDestroy", i);
    say(&a, what, 0, cuArrayDestroy((CUarray)(uintptr_t)handles[i]), before);
    before = region_used(a.r);
    snprintf(what, sizeof what, "bad-destroy#%zu cuMipmappedArrayDestroy", i);
    say(&a, what, 0, cuMipmappedArrayDestroy((CUmipmappedArray)(uintptr_t)handles[i]), before);
  }
  if (live) {
    uint64_t before = region_used(a.r);
    rc = cuMemFree(live);
    uint64_t after = region_used(a.r);
    /* the live allocation is still charged in full, and credited once */
    printf("live-free rc=%s credited=%" PRIu64 "\n", rc_name(rc), before - after);
  }
  /* double frees: credited once */
  absurd_double(&a, TSR_P_PLAIN, false);
  absurd_double(&a, TSR_P_PLAIN, true);
  absurd_double(&a, TSR_P_MANAGED, false);
  absurd_double(&a, TSR_P_ASYNC, true);
  absurd_double(&a, TSR_P_ASYNC, false);
  absurd_double(&a, TSR_P_POOL_CREATED, true);
  absurd_double(&a, TSR_P_VMM, false);
  absurd_double(&a, TSR_P_ARRAY, false);
  cuMemPoolDestroy(a.pool_created);
  printf("done=1\n");
  fflush(stdout);
  tsr_region_close(a.r);
  return 0;
}

/* ---- CUDA devices and leases --------------------------------------------- */

static int run_devices(int argc, char **argv) {
  if (argc != 4) return 2;
  tsr_region_t *ra = region_at(argv[2]), *rb = region_at(argv[3]);
  fake_cuda_state_t *fake = NULL;
  char err[256];
  CUresult rc;
  int count = 0;
  if ((rc = cuInit(0)) != CUDA_SUCCESS || (rc = cuDeviceGetCount(&count)) != CUDA_SUCCESS) {
    printf("setup=%s\n", rc_name(rc));
    return 1;
  }
  printf("count=%d\n", count);
  const char *fpath = getenv("FAKE_CUDA_STATE");
  if (!ra || !rb || !fpath || fake_cuda_state_open(fpath, 0, NULL, &fake, err, sizeof err) != 0) {
    printf("setup=regions-or-fake-state\n");
    return 1;
  }
  CUdeviceptr p[2] = {0, 0};
  for (int i = 0; i < 2 && i < count; i++) {
    CUdevice dev;
    CUuuid u;
    if ((rc = cuDeviceGet(&dev, i)) != CUDA_SUCCESS || (rc = cuDeviceGetUuid(&u, dev)) != CUDA_SUCCESS ||
        (rc = ctx_on(dev)) != CUDA_SUCCESS) {
      printf("cuda%d=%s\n", i, rc_name(rc));
      return 1;
    }
    const unsigned char *b = (const unsigned char *)u.bytes;
    printf("cuda%d_uuid=GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x\n", i, b[0], b[1],
           b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
    rc = cuMemAlloc(&p[i], (size_t)(i + 1) * 64 * MIB);
    printf("cuda%d_alloc=%s\n", i, rc_name(rc));
  }
  for (int d = 0; d < fake_cuda_state_ndevices(fake); d++)
    printf("phys%d_bytes=%" PRIu64 "\n", d, fake_cuda_state_pid_bytes(fake, (int32_t)getpid(), d));
  printf("a_used=%" PRIu64 " b_used=%" PRIu64 "\n", region_used(ra), region_used(rb));
  for (int i = 0; i < 2; i++)
    if (p[i] && (rc = cuMemFree(p[i])) != CUDA_SUCCESS) printf("cuda%d_free=%s\n", i, rc_name(rc));
  printf("after_a_used=%" PRIu64 " after_b_used=%" PRIu64 "\n", region_used(ra), region_used(rb));
  fflush(stdout);
  fake_cuda_state_close(fake);
  tsr_region_close(ra);
  tsr_region_close(rb);
  return 0;
}

/* ---- hold: an allocation held while the script looks ------------------------- */

static bool wait_file(const char *path) {
  for (int i = 0; i < 2000; i++) {
    if (access(path, F_OK) == 0) return true;
    nap_us(5000);
  }
  return false;
}

static int run_hold(int argc, char **argv) {
  if (argc != 6) return 2;
  if (!wait_file(argv[2])) return 1;
  size_t bytes = strtoull(argv[4], NULL, 0);
  tsr_region_t *r = region_at(argv[5]);
  CUdevice dev;
  CUdeviceptr p = 0;
  CUresult rc;
  if ((rc = cuInit(0)) == CUDA_SUCCESS && (rc = cuDeviceGet(&dev, 0)) == CUDA_SUCCESS &&
      (rc = ctx_on(dev)) == CUDA_SUCCESS)
    rc = cuMemAlloc(&p, bytes);
  printf("alloc=%s slot=%d\n", rc_name(rc), region_slot_self(r));
  fflush(stdout);
  bool done = wait_file(argv[3]);
  if (p) cuMemFree(p);
  tsr_region_close(r);
  return done ? 0 : 1;
}

/* ---- lifetimes: what ends with a context or a pool ---------------------------- */

#define CHUNK (256 * MIB)
#define LT_MAX 64

/* 256 MiB cuMemAlloc chunks in the current context until refused: how many
 * (kept in p). */
static int lt_fill(CUdeviceptr *p) {
  int n = 0;
  while (n < LT_MAX && cuMemAlloc(&p[n], CHUNK) == CUDA_SUCCESS) n++;
  return n;
}

/* The same, all freed again. */
static int lt_count(void) {
  CUdeviceptr p[LT_MAX];
  int n = lt_fill(p);
  for (int i = 0; i < n; i++) cuMemFree(p[i]);
  return n;
}

/* 64 MiB of static data: the shim charges a module for it. */
static const char lt_ptx[] =
    ".version 8.0\n.target sm_90\n.address_size 64\n"
    ".visible .global .align 8 .b8 big[67108864];\n"
    ".visible .entry touch() { ret; }\n";

/* What one context holds through every path that ends with it: 64 MiB each
 * of pitch, managed, stream-ordered (the current pool), a 16 MiB array, a
 * module with 64 MiB of statics, then plain chunks until refused. */
typedef struct {
  CUdeviceptr pitch, managed, async, chunks[LT_MAX];
  CUarray array;
  CUmodule module;
  int nchunks;
} lt_held_t;

static void lt_hold(const char *what, lt_held_t *h, CUstream s) {
  memset(h, 0, sizeof *h);
  size_t pitch = 0;
  CUDA_ARRAY_DESCRIPTOR ad = {1024, 1024, CU_AD_FORMAT_FLOAT, 4};
  printf("%s_pitch=%s\n", what, rc_name(cuMemAllocPitch(&h->pitch, &pitch, MIB, 64, 4)));
  printf("%s_managed=%s\n", what, rc_name(cuMemAllocManaged(&h->managed, 64 * MIB, CU_MEM_ATTACH_GLOBAL)));
  printf("%s_async=%s\n", what, rc_name(cuMemAllocAsync(&h->async, 64 * MIB, s)));
  cuStreamSynchronize(s);
  printf("%s_array=%s\n", what, rc_name(cuArrayCreate(&h->array, &ad)));
  printf("%s_module=%s\n", what, rc_name(cuModuleLoadData(&h->module, lt_ptx)));
  h->nchunks = lt_fill(h->chunks);
  printf("%s_chunks=%d\n", what, h->nchunks);
}

/* Frees what lt_hold took after its context ended: the driver refuses each
 * (or, for a pointer, may accept a freed one), and the lease must not be
 * credited again. Prints the change of REGION's used. */
static void lt_stale(const char *what, const lt_held_t *h, tsr_region_t *r, CUstream s) {
  uint64_t before = region_used(r);
  cuMemFree(h->pitch);
  cuMemFree(h->managed);
  cuMemFreeAsync(h->async, s);
  cuStreamSynchronize(s);
  cuArrayDestroy(h->array);
  cuModuleUnload(h->module);
  for (int i = 0; i < h->nchunks; i++) cuMemFree(h->chunks[i]);
  printf("%s_stale_free_delta=%lld\n", what, (long long)(region_used(r) - before));
}

/* 1. The primary context reset with everything held. */
static void lt_reset(tsr_region_t *r, CUdevice dev, CUstream s) {
  lt_held_t h;
  lt_hold("reset", &h, s);
  printf("reset_full_used=%" PRIu64 "\n", region_used(r));
  printf("reset=%s\n", rc_name(cuDevicePrimaryCtxReset(dev)));
  printf("reset_used=%" PRIu64 "\n", region_used(r));
  CUresult rc;
  if ((rc = ctx_on(dev)) != CUDA_SUCCESS || (rc = cuStreamCreate(&s, 0)) != CUDA_SUCCESS) {
    printf("reset_retain=%s\n", rc_name(rc));
    return;
  }
  lt_stale("reset", &h, r, s);
  printf("reset_after_chunks=%d\n", lt_count());
}

/* 2. A created context destroyed with everything held. */
static void lt_destroy(tsr_region_t *r, CUdevice dev, CUstream s) {
  CUcontext primary, created;
  CUstream s2;
  CUresult rc;
  cuCtxGetCurrent(&primary);
  if ((rc = cuCtxCreate(&created, NULL, 0, dev)) != CUDA_SUCCESS || (rc = cuStreamCreate(&s2, 0)) != CUDA_SUCCESS) {
    printf("destroy_create=%s\n", rc_name(rc));
    return;
  }
  lt_held_t h;
  lt_hold("destroy", &h, s2);
  printf("destroy_full_used=%" PRIu64 "\n", region_used(r));
  printf("destroy=%s\n", rc_name(cuCtxDestroy(created)));
  cuCtxSetCurrent(primary);
  printf("destroy_used=%" PRIu64 "\n", region_used(r));
  lt_stale("destroy", &h, r, s);
  printf("destroy_after_chunks=%d\n", lt_count());
}

/* 3. A pool destroyed while its blocks are alive. */
static void lt_pool(tsr_region_t *r, CUstream s) {
  CUmemPoolProps pp;
  memset(&pp, 0, sizeof pp);
  pp.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  pp.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  CUmemoryPool pool;
  CUresult rc;
  if ((rc = cuMemPoolCreate(&pool, &pp)) != CUDA_SUCCESS) {
    printf("pool_create=%s\n", rc_name(rc));
    return;
  }
  CUdeviceptr b[LT_MAX];
  int nb = 0;
  while (nb < LT_MAX && cuMemAllocFromPoolAsync(&b[nb], CHUNK, pool, s) == CUDA_SUCCESS) nb++;
  cuStreamSynchronize(s);
  printf("pool_blocks=%d\n", nb);
  uint64_t before = region_used(r);
  printf("pool_destroy=%s\n", rc_name(cuMemPoolDestroy(pool)));
  printf("pool_destroy_delta=%lld\n", (long long)(region_used(r) - before));
  printf("pool_plain_while_blocks=%d\n", lt_count());
  for (int i = 0; i < nb; i++) {
    if (i % 2)
      cuMemFreeAsync(b[i], s);
    else
      cuMemFree(b[i]);
  }
  cuStreamSynchronize(s);
  printf("pool_freed_used=%" PRIu64 "\n", region_used(r));
  before = region_used(r);
  for (int i = 0; i < nb; i++) cuMemFree(b[i]);
  printf("pool_stale_free_delta=%lld\n", (long long)(region_used(r) - before));
  printf("pool_after_chunks=%d\n", lt_count());
}

/* 4. The primary's last reference released with memory held. */
static void lt_release(tsr_region_t *r, CUdevice dev, CUstream s) {
  CUdeviceptr last = 0;
  printf("release_alloc=%s\n", rc_name(cuMemAlloc(&last, CHUNK)));
  cuStreamDestroy(s);
  printf("release=%s\n", rc_name(cuDevicePrimaryCtxRelease(dev)));
  printf("release_used=%" PRIu64 "\n", region_used(r));
}

static int run_lifetimes(int argc, char **argv) {
  if (argc != 4) return 2;
  const char *which = argv[2];
  tsr_region_t *r = region_at(argv[3]);
  CUdevice dev;
  CUstream s;
  CUresult rc;
  if (!r || (rc = cuInit(0)) != CUDA_SUCCESS || (rc = cuDeviceGet(&dev, 0)) != CUDA_SUCCESS ||
      (rc = ctx_on(dev)) != CUDA_SUCCESS || (rc = cuStreamCreate(&s, 0)) != CUDA_SUCCESS) {
    printf("setup=%s\n", r ? rc_name(rc) : "region");
    return 1;
  }
  printf("context_used=%" PRIu64 "\n", region_used(r));
  printf("full_chunks=%d\n", lt_count());
  if (strcmp(which, "reset") == 0)
    lt_reset(r, dev, s);
  else if (strcmp(which, "destroy") == 0)
    lt_destroy(r, dev, s);
  else if (strcmp(which, "pool") == 0)
    lt_pool(r, s);
  else if (strcmp(which, "release") == 0)
    lt_release(r, dev, s);
  else
    return 2;
  printf("done=1\n");
  fflush(stdout);
  tsr_region_close(r);
  return 0;
}

static int run_steps(int argc, char **argv) {
  if (argc != 3) return 2;
  tsr_region_t *r = region_at(argv[2]);
  CUdevice dev;
  CUresult rc;
  if (!r || (rc = cuInit(0)) != CUDA_SUCCESS || (rc = cuDeviceGet(&dev, 0)) != CUDA_SUCCESS ||
      (rc = ctx_on(dev)) != CUDA_SUCCESS) {
    printf("setup=%s\n", r ? rc_name(rc) : "region");
    return 1;
  }
  printf("ready=1\n");
  fflush(stdout);
  CUdeviceptr held[64];
  int n = 0;
  char line[128];
  while (fgets(line, sizeof line, stdin)) {
    unsigned long long bytes = 0;
    if (sscanf(line, "alloc %llu", &bytes) == 1) {
      CUdeviceptr p = 0;
      rc = cuMemAlloc(&p, (size_t)bytes);
      if (rc == CUDA_SUCCESS && n < 64) held[n++] = p;
      printf("alloc=%s\n", rc_name(rc));
    } else if (strncmp(line, "free", 4) == 0) {
      printf("free=%s\n", n ? rc_name(cuMemFree(held[--n])) : "none");
    } else if (strncmp(line, "info", 4) == 0) {
      size_t free_b = 0, total = 0;
      rc = cuMemGetInfo(&free_b, &total);
      if (rc == CUDA_SUCCESS)
        printf("total=%zu free=%zu\n", total, free_b);
      else
        printf("info=%s\n", rc_name(rc));
    } else if (strncmp(line, "share", 5) == 0) {
      printf("share=%u\n", tsr_region_share_now(r));
    } else if (strncmp(line, "quit", 4) == 0) {
      break;
    } else {
      printf("unknown=%s", line);
    }
    fflush(stdout);
  }
  while (n) cuMemFree(held[--n]);
  tsr_region_close(r);
  return 0;
}

int main(int argc, char **argv) {
  int rc = 2;
  if (argc >= 2 && strcmp(argv[1], "steps") == 0)
    return run_steps(argc, argv) == 2 ? (fprintf(stderr, "usage: tsr_shim_tenant steps REGION\n"), 2) : 0;
  if (argc >= 2 && strcmp(argv[1], "stress") == 0)
    rc = run_stress(argc, argv);
  else if (argc >= 2 && strcmp(argv[1], "start") == 0)
    rc = run_start(argc, argv);
  else if (argc >= 2 && strcmp(argv[1], "alloc") == 0)
    rc = run_alloc(argc, argv);
  else if (argc >= 2 && strcmp(argv[1], "absurd") == 0)
    rc = run_absurd(argc, argv);
  else if (argc >= 2 && strcmp(argv[1], "devices") == 0)
    rc = run_devices(argc, argv);
  else if (argc >= 2 && strcmp(argv[1], "hold") == 0)
    rc = run_hold(argc, argv);
  else if (argc >= 2 && strcmp(argv[1], "lifetimes") == 0)
    rc = run_lifetimes(argc, argv);
  if (rc == 2)
    fprintf(stderr, "usage: tsr_shim_tenant stress|start|alloc|absurd|devices|hold|lifetimes ... (see tenant.c)\n");
  return rc;
}
