/* unit.fakecuda_threads: the fake driver under threads and processes.
 *
 * Phase 1: 4 processes share a FAKE_CUDA_STATE file and each runs 4 threads
 * that allocate and free at random through every path (device, managed,
 * async, pool, VMM, arrays) on a 2 GiB device; the parent samples the
 * table meanwhile. Phase 2: 16 threads of one process do the same on a
 * 768 MiB device, where out-of-memory answers are common. Checked: "used" never passes the
 * total, out-of-memory answers happen and leave nothing behind, and
 * everything comes back to exactly zero. A plain program (not Criterion), so it also runs
 * under ThreadSanitizer; exit 0 = pass. */
#include <cuda.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fake_cuda_state.h"

#define MiB ((size_t)1 << 20)
#define ITERS 1500
#define HELD 6

static CUcontext g_ctx;
static atomic_int g_failed;
static atomic_long g_oom;

#define CHECK(cond, ...)                             \
  do {                                               \
    if (!(cond)) {                                   \
      fprintf(stderr, "test_threads: " __VA_ARGS__); \
      fprintf(stderr, "\n");                         \
      atomic_store(&g_failed, 1);                    \
    }                                                \
  } while (0)

typedef enum { K_DEVICE, K_MANAGED, K_ASYNC, K_POOL, K_VMM, K_ARRAY, K_KINDS } kind_t;

typedef struct {
  kind_t kind;
  CUdeviceptr p;
  CUmemGenericAllocationHandle h;
  CUarray a;
} held_t;

static CUmemoryPool g_pool;

/* What this process holds: its row of the shared table, or the whole
 * device when the table is private. */
static size_t used_now(void) {
  const char *path = getenv("FAKE_CUDA_STATE");
  if (path) {
    fake_cuda_state_t *st = NULL;
    if (fake_cuda_state_open(path, 0, NULL, &st, NULL, 0) != 0) return SIZE_MAX;
    size_t b = fake_cuda_state_pid_bytes(st, getpid(), 0);
    fake_cuda_state_close(st);
    return b;
  }
  size_t f, t;
  if (cuMemGetInfo(&f, &t) != CUDA_SUCCESS) return SIZE_MAX;
  return t - f;
}

static void release(held_t *x, CUstream s) {
  CUresult rc = CUDA_SUCCESS;
  switch (x->kind) {
    case K_DEVICE:
    case K_MANAGED: rc = cuMemFree(x->p); break;
    case K_ASYNC:
    case K_POOL: rc = cuMemFreeAsync(x->p, s); break; /* a cuMemAlloc pointer too, below */
    case K_VMM: rc = cuMemRelease(x->h); break;
    case K_ARRAY: rc = cuArrayDestroy(x->a); break;
    default: break;
  }
  CHECK(rc == CUDA_SUCCESS, "free of kind %d: %d", (int)x->kind, (int)rc);
}

/* One allocation of a random kind and size; false if out of memory. */
static bool take(held_t *x, unsigned *seed, CUstream s) {
  size_t mib = 1 + rand_r(seed) % 64;
  x->kind = (kind_t)(rand_r(seed) % K_KINDS);
  CUresult rc = CUDA_ERROR_UNKNOWN;
  switch (x->kind) {
    case K_DEVICE: rc = cuMemAlloc(&x->p, mib * MiB + rand_r(seed) % 4096); break;
    case K_MANAGED: rc = cuMemAllocManaged(&x->p, mib * MiB, CU_MEM_ATTACH_GLOBAL); break;
    case K_ASYNC: rc = cuMemAllocAsync(&x->p, mib * MiB, s); break;
    case K_POOL: rc = cuMemAllocFromPoolAsync(&x->p, mib * MiB, g_pool, s); break;
    case K_VMM: {
      CUmemAllocationProp ap;
      memset(&ap, 0, sizeof ap);
      ap.type = CU_MEM_ALLOCATION_TYPE_PINNED;
      ap.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      rc = cuMemCreate(&x->h, ((mib + 1) / 2) * 2 * MiB, &ap, 0);
      break;
    }
    case K_ARRAY: {
      CUDA_ARRAY_DESCRIPTOR d = {1024, mib * 256, CU_AD_FORMAT_FLOAT, 1};
      rc = cuArrayCreate(&x->a, &d);
      break;
    }
    default: break;
  }
  if (rc == CUDA_ERROR_OUT_OF_MEMORY) return false;
  CHECK(rc == CUDA_SUCCESS, "alloc of kind %d: %d", (int)x->kind, (int)rc);
  if (rc == CUDA_SUCCESS && (x->kind == K_DEVICE || x->kind == K_MANAGED || x->kind == K_ASYNC || x->kind == K_POOL)) {
    ((volatile unsigned char *)(uintptr_t)x->p)[0] = 1;             /* it is memory */
    if (x->kind == K_DEVICE && rand_r(seed) % 2) x->kind = K_ASYNC; /* freed stream-ordered */
  }
  return rc == CUDA_SUCCESS;
}

static void *worker(void *arg) {
  unsigned seed = (unsigned)(uintptr_t)arg * 7919u + (unsigned)getpid();
  if (cuCtxSetCurrent(g_ctx) != CUDA_SUCCESS) {
    CHECK(0, "set current");
    return NULL;
  }
  CUstream s;
  CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS, "stream");
  held_t held[HELD];
  int n = 0;
  for (int i = 0; i < ITERS; i++) {
    if (n == HELD || (n > 0 && rand_r(&seed) % 2)) {
      int k = rand_r(&seed) % n;
      release(&held[k], s);
      held[k] = held[--n];
    } else if (take(&held[n], &seed, s)) {
      n++;
    } else {
      atomic_fetch_add(&g_oom, 1);
    }
    if (i % 64 == 0) cuStreamSynchronize(s);
  }
  while (n > 0) release(&held[--n], s);
  CHECK(cuStreamSynchronize(s) == CUDA_SUCCESS, "sync");
  CHECK(cuStreamDestroy(s) == CUDA_SUCCESS, "stream destroy");
  return NULL;
}

/* Runs `nthreads` workers in this process; returns 0 if all went well. */
static int run_workers(int nthreads) {
  CUresult rc = cuInit(0);
  if (rc != CUDA_SUCCESS) return fprintf(stderr, "test_threads: cuInit %d\n", (int)rc), 1;
  cuDevicePrimaryCtxRetain(&g_ctx, 0);
  cuCtxSetCurrent(g_ctx);
  CUmemPoolProps pp;
  memset(&pp, 0, sizeof pp);
  pp.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  pp.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  CHECK(cuMemPoolCreate(&g_pool, &pp) == CUDA_SUCCESS, "pool");
  size_t base = used_now();
  pthread_t t[16];
  for (int i = 0; i < nthreads; i++) pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(i + 1));
  for (int i = 0; i < nthreads; i++) pthread_join(t[i], NULL);
  CUmemoryPool dp;
  cuDeviceGetDefaultMemPool(&dp, 0);
  cuMemPoolTrimTo(dp, 0);
  cuMemPoolTrimTo(g_pool, 0);
  CHECK(used_now() == base, "after the threads %zu bytes are used, %zu before", used_now(), base);
  return atomic_load(&g_failed);
}

int main(void) {
  char path[64];
  snprintf(path, sizeof path, "/tmp/fakecuda_threads_%d", (int)getpid());
  unlink(path);
  setenv("FAKE_CUDA_STATE", path, 1);
  setenv("FAKE_CUDA_TOTAL_MEM", "2GiB", 1);
  setenv("FAKE_CUDA_CTX_BYTES", "64MiB", 1);

  /* phase 1: 4 processes x 4 threads on one device, sampled from outside */
  uint64_t total = (uint64_t)2 << 30;
  fake_cuda_state_t *st = NULL;
  char err[256];
  if (fake_cuda_state_open(path, 1, &total, &st, err, sizeof err) != 0) {
    fprintf(stderr, "test_threads: %s\n", err);
    return 1;
  }
  pid_t kids[4];
  for (int i = 0; i < 4; i++) {
    kids[i] = fork();
    if (kids[i] == 0) _exit(run_workers(4));
  }
  int done = 0, failed = 0;
  uint64_t peak = 0;
  while (done < 4) {
    uint64_t u = fake_cuda_state_used(st, 0);
    if (u > peak) peak = u;
    if (u > total) {
      fprintf(stderr, "test_threads: %llu bytes used on a %llu-byte device\n", (unsigned long long)u,
              (unsigned long long)total);
      failed = 1;
    }
    int status;
    pid_t w = waitpid(-1, &status, WNOHANG);
    if (w > 0) {
      done++;
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) failed = 1;
    } else {
      nanosleep(&(struct timespec){0, 200000}, NULL);
    }
  }
  fake_cuda_state_reap(st);
  if (fake_cuda_state_used(st, 0) != 0) {
    fprintf(stderr, "test_threads: %llu bytes still used after the processes ended\n",
            (unsigned long long)fake_cuda_state_used(st, 0));
    failed = 1;
  }
  fake_cuda_state_close(st);
  unlink(path);
  if (failed) return 1;

  /* phase 2: 16 threads in this process, private state, a smaller device */
  unsetenv("FAKE_CUDA_STATE");
  setenv("FAKE_CUDA_TOTAL_MEM", "768MiB", 1);
  int rc = run_workers(16);
  if (atomic_load(&g_oom) == 0) {
    fprintf(stderr, "test_threads: no allocation ever ran out of memory: the test proves less than it says\n");
    rc = 1;
  }
  printf("test_threads: %s (peak %llu MiB of 2048 across processes; %ld out-of-memory answers on 768 MiB)\n",
         rc ? "FAILED" : "ok", (unsigned long long)(peak >> 20), atomic_load(&g_oom));
  return rc;
}
