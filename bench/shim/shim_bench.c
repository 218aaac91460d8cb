/* shim_bench.c: what a CUDA process pays for running under libtessera-cuda.so.
 *
 * One driver-API program, run by bench/shim/run.sh once natively and once
 * with the shim preloaded, in turns. It is linked against libcuda.so.1 (the
 * toolkit's stub at build time) and takes whichever libcuda.so.1 the loader
 * finds at run time: the real driver on a GPU, the CI's double under
 * LD_LIBRARY_PATH.
 *
 *   shim_bench alloc  [--procs P] [--rounds N] [--warmup W]
 *       P processes, each: a context, W warm-up rounds, then a barrier (all
 *       start at one instant), then N rounds of cuMemAlloc 1 MiB and
 *       cuMemFree, each call timed alone. Prints p50/p99/mean of each call
 *       over all processes' calls.
 *   shim_bench start  [--procs P]
 *       P processes forked at one instant; each starts as the CUDA
 *       runtime does (cuGetProcAddress of cuInit, the first call the shim
 *       hooks and where it attaches to its leases; cuInit through the entry
 *       found; the primary context; a first 1 MiB cuMemAlloc) and reports
 *       the time from that instant (taken before the first fork) to the
 *       lookup returned (ready), to its first context (retain + set current
 *       returned) and to its first allocation returned, and from its own
 *       fork to the lookup returned (own: its start without the forks of
 *       the children before it). Prints the slowest and the median process
 *       of each, and the median of each step timed alone (main: the start
 *       instant -> the child's main; exec: its own fork -> its main, the
 *       loader and any preloaded library; lookup: the first
 *       cuGetProcAddress; init: cuInit; devget:
 *       cuDeviceGet; retain: the primary context's retain and set current;
 *       first_call: the first cuMemAlloc), where queueing for the driver
 *       shows apart from the calls around it.
 *   shim_bench launch [--iters N] [--warmup W] [--block T] [--stream null|own]
 *                     [--sync-every S] [--gap-us G] [--slow-us U]
 *       cuLaunchKernel of an empty kernel (PTX embedded below, loaded with
 *       cuModuleLoadData), the host call only, N times: one block of T
 *       threads (1), on the NULL stream or a stream of its own (null), the
 *       stream synchronized every S launches (256; untimed), G us apart (0:
 *       back to back; a busy wait between calls, untimed, that keeps the
 *       CPU as hot as calls back to back do). Prints p50/p99/mean, and how
 *       many calls took longer than U us (50). G leaves a compute share's
 *       bucket time to refill: at share P a launch costing c is admitted
 *       again after c / P, so launches G apart never wait while c / P < G.
 *       When TESSERA_LEASE and TESSERA_REGION_DIR name one lease (as under
 *       the shim), the lease's counters are read from its region before the
 *       first measured process and after the last, and their growth printed
 *       (lease_launches_n, lease_throttled_ns, lease_gpu_ns): the time any
 *       launch call waited for the share's bucket.
 *       --paired: each round also launches the same kernel through the
 *       driver's own cuLaunchKernel (found on libcuda's handle), timed
 *       alone; launch_added_p50_ns/p99 are the differences of the two
 *       series' percentiles, the shim's own cost inside one process.
 *   shim_bench paired [--rounds N] [--warmup W]
 *       The added time of cuMemAlloc/cuMemFree inside one process: each
 *       round allocates and frees 1 MiB once through the symbols the program
 *       links (the shim's hooks when it is preloaded) and once through the
 *       driver's own entries (found on the driver's handle, past any
 *       interposer), in alternating order. Prints hook minus driver for p50
 *       and p99 of each call. Between processes the driver's own times move
 *       by more than the shim adds; within one process, call by call, they
 *       do not. Without the shim both are the same entry: the floor (~0).
 *
 * Every measurement runs in children of this process (fork, then exec of
 * this same program), so that process start is measured from outside and
 * every mode pays the same start-up. The children share one memfd with the
 * parent: the barrier, their results and their raw samples. Times are
 * CLOCK_MONOTONIC, in nanoseconds. Output: one line of key=value pairs on
 * stdout; errors: one line on stderr and exit status 1 (2: usage). */
#include <cuda.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tenant/tenant.h"
#include "region/region.h"

#define SB_PROCS_MAX 64
#define SB_SAMPLES_MAX 1000000 /* per process and series */
#define SB_ALLOC_BYTES ((size_t)1 << 20)
#define SB_BARRIER_LEAD_NS 20000000u   /* the start instant: 20 ms after the last is ready */
#define SB_WAIT_LIMIT_NS 300000000000u /* nobody waits longer than 5 minutes on another */
#define SB_LAUNCH_SYNC_EVERY 256       /* bounds the launch queue (untimed), by default */
#define SB_LAUNCH_SLOW_NS 50000u       /* a launch call slower than this is counted, by default */

/* An empty kernel. PTX ISA 8.0 (CUDA 12.0 and later drivers); the driver
 * compiles it for the device it runs on at cuModuleLoadData. */
static const char sb_empty_ptx[] =
    ".version 8.0\n"
    ".target sm_75\n"
    ".address_size 64\n"
    "\n"
    ".visible .entry tsr_bench_empty()\n"
    "{\n"
    "\tret;\n"
    "}\n";

typedef enum { SB_ALLOC = 1, SB_START = 2, SB_LAUNCH = 3, SB_PAIRED = 4 } sb_mode_t;

#define SB_SERIES 4 /* sample series per process: alloc, free (paired: +driver's alloc, free) */

/* One child's results; written by that child only, read by the parent
 * after waitpid. */
typedef struct {
  uint64_t ctx_ns;   /* start instant -> first context */
  uint64_t alloc_ns; /* start instant -> first cuMemAlloc returned */
  uint64_t fork_at;  /* CLOCK_MONOTONIC just before the parent forked this child (set by the parent) */
  uint64_t ready_ns; /* start instant -> the first lookup returned (the shim attached) */
  uint64_t own_ns;   /* this child's fork -> the first lookup returned: its own start, without the
                      * forks of the children before it */
  /* start: each step on its own (the time of the calls alone, no queueing
   * for the start instant): exec'd -> main, the first cuGetProcAddress,
   * cuInit, cuDeviceGet, the primary context's retain + set current, the
   * first cuMemAlloc */
  uint64_t main_ns, exec_ns, lookup_ns, init_ns, devget_ns, retain_ns, first_call_ns;
  uint64_t count;     /* samples in each series */
  int32_t done;       /* 1: the child finished without error */
  int32_t interposed; /* paired: 1 if the linked entries are not the driver's */
} sb_slot_t;

/* The shared memfd: this header, then procs slots, then for each process
 * SB_SERIES series of `cap` samples (launch uses the first). */
typedef struct {
  uint32_t mode;
  uint32_t procs;
  uint64_t rounds, warmup, cap;
  uint64_t t0_ns; /* the start instant of `start` (parent, before the first fork) */
  /* launch: the kernel's block, the stream, the pace */
  uint32_t block;         /* threads in the one block */
  uint32_t own_stream;    /* 1: a stream of its own; 0: the NULL stream */
  uint64_t sync_every;    /* launches between synchronizations */
  uint64_t gap_ns;        /* from the end of one call to the start of the next */
  uint32_t paired;        /* 1: every round launches through the hook and the driver */
  _Atomic uint32_t ready; /* children at the barrier */
  _Atomic uint64_t go_ns; /* 0 until all are ready; then the instant to start at */
} sb_shared_t;

static uint64_t sb_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sb_sleep_ns(uint64_t ns) {
  struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000u), .tv_nsec = (long)(ns % 1000000000u)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static size_t sb_shared_size(uint32_t procs, uint64_t cap) {
  return sizeof(sb_shared_t) + procs * sizeof(sb_slot_t) + (size_t)procs * SB_SERIES * cap * sizeof(uint64_t);
}

static sb_slot_t *sb_slot(sb_shared_t *sh, uint32_t i) { return (sb_slot_t *)(sh + 1) + i; }

static uint64_t *sb_series(sb_shared_t *sh, uint32_t i, int which) {
  uint64_t *base = (uint64_t *)((sb_slot_t *)(sh + 1) + sh->procs);
  return base + ((size_t)i * SB_SERIES + (size_t)which) * sh->cap;
}

/* ---- the child: one measured process ----------------------------------------- */

static int sb_cuda_fail(CUresult rc, const char *what) {
  const char *name = NULL;
  if (cuGetErrorName(rc, &name) != CUDA_SUCCESS || !name) name = "unknown error";
  fprintf(stderr, "shim_bench: %s: %s\n", what, name);
  return 1;
}

#define SB_CHECK(call)                                        \
  do {                                                        \
    CUresult rc_ = (call);                                    \
    if (rc_ != CUDA_SUCCESS) return sb_cuda_fail(rc_, #call); \
  } while (0)

/* Waits until every child is ready and the parent names the start instant,
 * then sleeps until it. False if the parent never does. */
static bool sb_barrier(sb_shared_t *sh) {
  atomic_fetch_add_explicit(&sh->ready, 1, memory_order_acq_rel);
  uint64_t give_up = sb_now() + SB_WAIT_LIMIT_NS, go;
  while ((go = atomic_load_explicit(&sh->go_ns, memory_order_acquire)) == 0) {
    if (sb_now() > give_up) return false;
    sb_sleep_ns(100000); /* 100 us: well inside the 20 ms lead */
  }
  struct timespec ts = {.tv_sec = (time_t)(go / 1000000000u), .tv_nsec = (long)(go % 1000000000u)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
  }
  return true;
}

static int sb_child_alloc(sb_shared_t *sh, uint32_t me) {
  sb_slot_t *slot = sb_slot(sh, me);
  uint64_t *a = sb_series(sh, me, 0), *f = sb_series(sh, me, 1);
  CUdeviceptr p;
  for (uint64_t i = 0; i < sh->warmup; i++) {
    SB_CHECK(cuMemAlloc(&p, SB_ALLOC_BYTES));
    SB_CHECK(cuMemFree(p));
  }
  if (!sb_barrier(sh)) {
    fprintf(stderr, "shim_bench: child %u: no start instant after 5 minutes\n", me);
    return 1;
  }
  for (uint64_t i = 0; i < sh->rounds; i++) {
    uint64_t t0 = sb_now();
    CUresult rc = cuMemAlloc(&p, SB_ALLOC_BYTES);
    uint64_t t1 = sb_now();
    if (rc != CUDA_SUCCESS) return sb_cuda_fail(rc, "cuMemAlloc (timed)");
    rc = cuMemFree(p);
    uint64_t t2 = sb_now();
    if (rc != CUDA_SUCCESS) return sb_cuda_fail(rc, "cuMemFree (timed)");
    a[i] = t1 - t0;
    f[i] = t2 - t1;
  }
  slot->count = sh->rounds;
  return 0;
}

/* Spins until `until` (CLOCK_MONOTONIC ns): a sleep would let the CPU
 * cool down and the next call pay for it. */
static void sb_spin_until(uint64_t until) {
  while (sb_now() < until) {
  }
}

/* The NULL stream as the first version of this bench did (the whole
 * context), a stream of its own by itself. */
static CUresult sb_sync(CUstream s) { return s ? cuStreamSynchronize(s) : cuCtxSynchronize(); }

typedef CUresult (*sb_launch_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                 CUstream, void **, void **);
static void *sb_driver_entry(const char *name);

static int sb_child_launch(sb_shared_t *sh, uint32_t me) {
  sb_slot_t *slot = sb_slot(sh, me);
  uint64_t *l = sb_series(sh, me, 0), *ld = sb_series(sh, me, 1);
  /* --paired: the driver's own entry beside the linked one (the hook) */
  sb_launch_fn drv = NULL;
  if (sh->paired) {
    drv = (sb_launch_fn)sb_driver_entry("cuLaunchKernel");
    if (!drv) {
      fprintf(stderr, "shim_bench: cannot find the driver's own cuLaunchKernel\n");
      return 1;
    }
    slot->interposed = (void *)drv != (void *)cuLaunchKernel;
  }
  CUmodule mod;
  CUfunction fn;
  CUstream s = NULL;
  unsigned bx = sh->block;
  SB_CHECK(cuModuleLoadData(&mod, sb_empty_ptx));
  SB_CHECK(cuModuleGetFunction(&fn, mod, "tsr_bench_empty"));
  if (sh->own_stream) SB_CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  uint64_t next = 0;
  for (uint64_t i = 0; i < sh->warmup; i++) {
    sb_spin_until(next);
    SB_CHECK(cuLaunchKernel(fn, 1, 1, 1, bx, 1, 1, 0, s, NULL, NULL));
    next = sb_now() + sh->gap_ns;
    if ((i + 1) % sh->sync_every == 0) SB_CHECK(sb_sync(s));
  }
  SB_CHECK(sb_sync(s));
  for (uint64_t i = 0; i < sh->rounds; i++) {
    sb_spin_until(next);
    uint64_t t0 = sb_now();
    CUresult rc = cuLaunchKernel(fn, 1, 1, 1, bx, 1, 1, 0, s, NULL, NULL);
    uint64_t t1 = sb_now();
    if (rc != CUDA_SUCCESS) return sb_cuda_fail(rc, "cuLaunchKernel (timed)");
    l[i] = t1 - t0;
    if (drv) { /* the same launch through the driver's own entry */
      t0 = sb_now();
      rc = drv(fn, 1, 1, 1, bx, 1, 1, 0, s, NULL, NULL);
      t1 = sb_now();
      if (rc != CUDA_SUCCESS) return sb_cuda_fail(rc, "the driver's cuLaunchKernel (timed)");
      ld[i] = t1 - t0;
    }
    next = t1 + sh->gap_ns;
    if ((i + 1) % sh->sync_every == 0) SB_CHECK(sb_sync(s));
  }
  SB_CHECK(sb_sync(s));
  if (s) SB_CHECK(cuStreamDestroy(s));
  SB_CHECK(cuModuleUnload(mod));
  slot->count = sh->rounds;
  return 0;
}

typedef CUresult (*sb_alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*sb_free_fn)(CUdeviceptr);

/* The driver's own entry `name`, read from its symbol table: the shim
 * answers every dlsym and dlvsym of it, and of dlsym itself, with hooks
 * (tenant/dlsym.h). */
static void *sb_driver_entry(const char *name) { return tsr_tenant_object_symbol("libcuda.so.1", name, NULL); }

/* The driver's own cuMemAlloc_v2 and cuMemFree_v2. */
static bool sb_driver_entries(sb_alloc_fn *out_alloc, sb_free_fn *out_free) {
  *out_alloc = (sb_alloc_fn)sb_driver_entry("cuMemAlloc_v2");
  *out_free = (sb_free_fn)sb_driver_entry("cuMemFree_v2");
  return *out_alloc && *out_free;
}

/* One timed cuMemAlloc + cuMemFree of 1 MiB through `al` and `fr`. */
static CUresult sb_pair(sb_alloc_fn al, sb_free_fn fr, uint64_t *out_alloc_ns, uint64_t *out_free_ns) {
  CUdeviceptr p;
  uint64_t t0 = sb_now();
  CUresult rc = al(&p, SB_ALLOC_BYTES);
  uint64_t t1 = sb_now();
  if (rc != CUDA_SUCCESS) return rc;
  rc = fr(p);
  *out_free_ns = sb_now() - t1;
  *out_alloc_ns = t1 - t0;
  return rc;
}

static int sb_child_paired(sb_shared_t *sh, uint32_t me) {
  sb_slot_t *slot = sb_slot(sh, me);
  sb_alloc_fn dal;
  sb_free_fn dfr;
  if (!sb_driver_entries(&dal, &dfr)) {
    fprintf(stderr, "shim_bench: cannot find the driver's own cuMemAlloc_v2/cuMemFree_v2\n");
    return 1;
  }
  /* the hooks are what the program's own references resolve to */
  slot->interposed = (void *)dal != (void *)cuMemAlloc || (void *)dfr != (void *)cuMemFree;
  uint64_t *ha = sb_series(sh, me, 0), *hf = sb_series(sh, me, 1);
  uint64_t *da = sb_series(sh, me, 2), *df = sb_series(sh, me, 3);
  uint64_t skip;
  for (uint64_t i = 0; i < sh->warmup; i++) {
    SB_CHECK(sb_pair(cuMemAlloc, cuMemFree, &skip, &skip));
    SB_CHECK(sb_pair(dal, dfr, &skip, &skip));
  }
  for (uint64_t i = 0; i < sh->rounds; i++) {
    /* alternate which goes first: neither always follows the other */
    if (i % 2 == 0) SB_CHECK(sb_pair(cuMemAlloc, cuMemFree, &ha[i], &hf[i]));
    SB_CHECK(sb_pair(dal, dfr, &da[i], &df[i]));
    if (i % 2 == 1) SB_CHECK(sb_pair(cuMemAlloc, cuMemFree, &ha[i], &hf[i]));
  }
  slot->count = sh->rounds;
  return 0;
}

static int sb_child(sb_shared_t *sh, uint32_t me, uint64_t main_at) {
  sb_slot_t *slot = sb_slot(sh, me);
  CUdevice dev;
  CUcontext ctx;
  /* the runtime's way in (cudart, PyTorch): the driver's entries looked
   * up first (the first call the shim hooks, where it attaches to its
   * leases), then cuInit through the entry found, then the primary context */
  uint64_t tl = sb_now();
  void *init_entry = NULL;
  CUdriverProcAddressQueryResult found;
  SB_CHECK(cuGetProcAddress("cuInit", &init_entry, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &found));
  uint64_t t0 = sb_now();
  if (!init_entry || found != CU_GET_PROC_ADDRESS_SUCCESS) {
    fprintf(stderr, "shim_bench: cuGetProcAddress found no cuInit (%d)\n", (int)found);
    return 1;
  }
  SB_CHECK(((CUresult(*)(unsigned int))init_entry)(0));
  uint64_t t1 = sb_now();
  SB_CHECK(cuDeviceGet(&dev, 0));
  uint64_t t2 = sb_now();
  SB_CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
  SB_CHECK(cuCtxSetCurrent(ctx));
  uint64_t t3 = sb_now();
  slot->ctx_ns = t3 - sh->t0_ns;
  CUdeviceptr p;
  SB_CHECK(cuMemAlloc(&p, SB_ALLOC_BYTES));
  uint64_t t4 = sb_now();
  slot->alloc_ns = t4 - sh->t0_ns;
  slot->main_ns = main_at - sh->t0_ns;
  slot->lookup_ns = t0 - tl;
  slot->ready_ns = t0 - sh->t0_ns;
  slot->own_ns = t0 - slot->fork_at;
  slot->exec_ns = main_at - slot->fork_at;
  slot->init_ns = t1 - t0;
  slot->devget_ns = t2 - t1;
  slot->retain_ns = t3 - t2;
  slot->first_call_ns = t4 - t3;
  SB_CHECK(cuMemFree(p));
  int rc = 0;
  if (sh->mode == SB_ALLOC)
    rc = sb_child_alloc(sh, me);
  else if (sh->mode == SB_LAUNCH)
    rc = sb_child_launch(sh, me);
  else if (sh->mode == SB_PAIRED)
    rc = sb_child_paired(sh, me);
  if (rc) return rc;
  SB_CHECK(cuDevicePrimaryCtxRelease(dev));
  slot->done = 1;
  return 0;
}

/* ---- the parent: spawn, barrier, statistics ------------------------------------ */

static int sb_cmp_u64(const void *x, const void *y) {
  uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
  return (a > b) - (a < b);
}

/* Nearest-rank percentile of sorted v[0..n). */
static uint64_t sb_pct(const uint64_t *v, size_t n, unsigned pct) {
  size_t rank = (n * pct + 99) / 100;
  return v[rank ? rank - 1 : 0];
}

/* Sorts v and prints its statistics as NAME_p50_ns=... */
static void sb_print_series(const char *name, uint64_t *v, size_t n) {
  qsort(v, n, sizeof(*v), sb_cmp_u64);
  long double sum = 0;
  for (size_t i = 0; i < n; i++) sum += v[i];
  printf(" %s_p50_ns=%" PRIu64 " %s_p99_ns=%" PRIu64 " %s_mean_ns=%.0Lf %s_max_ns=%" PRIu64, name, sb_pct(v, n, 50),
         name, sb_pct(v, n, 99), name, sum / n, name, v[n - 1]);
}

/* Hook minus driver at p50 and p99, both series sorted (signed: the floor
 * is around zero). */
static void sb_print_added(const char *name, const uint64_t *hook, const uint64_t *drv, size_t n) {
  printf(" %s_added_p50_ns=%" PRId64 " %s_added_p99_ns=%" PRId64, name,
         (int64_t)(sb_pct(hook, n, 50) - sb_pct(drv, n, 50)), name,
         (int64_t)(sb_pct(hook, n, 99) - sb_pct(drv, n, 99)));
}

/* Series `which` of every child, in one array (the caller frees it). */
static uint64_t *sb_gather(sb_shared_t *sh, int which, size_t *out_n) {
  *out_n = 0;
  uint64_t *all = malloc((size_t)sh->procs * sh->rounds * sizeof(uint64_t));
  if (!all) return NULL;
  for (uint32_t i = 0; i < sh->procs; i++) {
    memcpy(all + *out_n, sb_series(sh, i, which), sh->rounds * sizeof(uint64_t));
    *out_n += sh->rounds;
  }
  return all;
}

static bool sb_parse_u64(const char *opt, const char *text, uint64_t lo, uint64_t hi, uint64_t *out) {
  char *end = NULL;
  errno = 0;
  unsigned long long v = text && *text >= '0' && *text <= '9' ? strtoull(text, &end, 10) : 0;
  if (!text || !end || *end || errno || v < lo || v > hi) {
    fprintf(stderr, "shim_bench: %s wants a whole number from %" PRIu64 " to %" PRIu64 ", not '%s'\n", opt, lo, hi,
            text ? text : "");
    return false;
  }
  *out = v;
  return true;
}

static int sb_usage(void) {
  fprintf(stderr,
          "usage: shim_bench alloc [--procs P] [--rounds N] [--warmup W]\n"
          "       shim_bench start [--procs P]\n"
          "       shim_bench launch [--iters N] [--warmup W] [--block T] [--stream null|own]\n"
          "                         [--sync-every S] [--gap-us G] [--slow-us U] [--paired]\n"
          "       shim_bench paired [--rounds N] [--warmup W]\n");
  return 2;
}

/* launch's settings (see the top of this file) */
typedef struct {
  uint64_t block, own_stream, sync_every, gap_us, slow_us, paired;
} sb_launch_opts_t;

/* A lease's counters, read from its region: the one lease that
 * TESSERA_LEASE names in TESSERA_REGION_DIR. False if there is none to
 * read (no such variables); exits the bench if they name one that cannot
 * be read, since then the measurement cannot say what it claims. */
static bool sb_lease_stats(tsr_region_stats_t *out_stats) {
  const char *lease = getenv("TESSERA_LEASE"), *dir = getenv("TESSERA_REGION_DIR");
  if (!lease || !*lease || !dir || !*dir) return false;
  char *end = NULL;
  errno = 0;
  unsigned long long id = strtoull(lease, &end, 10);
  if (errno || !end || *end || id == 0) {
    fprintf(stderr, "shim_bench: TESSERA_LEASE='%s' is not one lease id\n", lease);
    exit(1);
  }
  char name[64], path[PATH_MAX];
  tsr_region_file_name(id, name, sizeof(name));
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  tsr_region_t *r = NULL;
  tsr_status_t st = tsr_region_open(AT_FDCWD, path, id, &r);
  if (st) {
    fprintf(stderr, "shim_bench: cannot read lease %llu's region %s: %s\n", id, path, tsr_status_message(st));
    tsr_status_free(st);
    exit(1);
  }
  tsr_region_stats(r, out_stats);
  tsr_region_close(r);
  return true;
}

/* Reaps every child; false if one failed. */
static bool sb_reap(const pid_t *pids, uint32_t n) {
  bool ok = true;
  for (uint32_t i = 0; i < n; i++) {
    int st = 0;
    while (waitpid(pids[i], &st, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      if (ok) fprintf(stderr, "shim_bench: measured process %u failed (status %d)\n", i, st);
      ok = false;
    }
  }
  return ok;
}

/* Waits for every child at the barrier, then names the start instant.
 * False if a child ended first or the wait passed its limit. */
static bool sb_release(sb_shared_t *sh, const pid_t *pids) {
  uint64_t give_up = sb_now() + SB_WAIT_LIMIT_NS;
  while (atomic_load_explicit(&sh->ready, memory_order_acquire) < sh->procs) {
    for (uint32_t i = 0; i < sh->procs; i++) {
      int st;
      if (waitpid(pids[i], &st, WNOHANG) == pids[i]) {
        fprintf(stderr, "shim_bench: measured process %u ended before the start (status %d)\n", i, st);
        return false;
      }
    }
    if (sb_now() > give_up) {
      fprintf(stderr, "shim_bench: the measured processes were not ready after 5 minutes\n");
      return false;
    }
    sb_sleep_ns(200000);
  }
  atomic_store_explicit(&sh->go_ns, sb_now() + SB_BARRIER_LEAD_NS, memory_order_release);
  return true;
}

static int sb_parent(const char *self, sb_mode_t mode, uint32_t procs, uint64_t rounds, uint64_t warmup,
                     const sb_launch_opts_t *lo) {
  uint64_t cap = mode == SB_START ? 0 : rounds;
  size_t size = sb_shared_size(procs, cap);
  int fd = memfd_create("shim_bench", 0); /* inherited across exec: the children map it */
  if (fd < 0 || ftruncate(fd, (off_t)size) != 0) {
    fprintf(stderr, "shim_bench: memfd of %zu bytes: %s\n", size, strerror(errno));
    return 1;
  }
  sb_shared_t *sh = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (sh == MAP_FAILED) {
    fprintf(stderr, "shim_bench: mmap: %s\n", strerror(errno));
    return 1;
  }
  sh->mode = (uint32_t)mode;
  sh->procs = procs;
  sh->rounds = rounds;
  sh->warmup = warmup;
  sh->cap = cap;
  sh->block = (uint32_t)lo->block;
  sh->own_stream = (uint32_t)lo->own_stream;
  sh->sync_every = lo->sync_every;
  sh->gap_ns = lo->gap_us * 1000u;
  sh->paired = (uint32_t)lo->paired;
  tsr_region_stats_t lease0 = {0}, lease1 = {0};
  bool lease = mode == SB_LAUNCH && sb_lease_stats(&lease0);
  char fdtext[16], idx[16];
  snprintf(fdtext, sizeof(fdtext), "%d", fd);
  pid_t pids[SB_PROCS_MAX];
  fflush(NULL);
  sh->t0_ns = sb_now();
  for (uint32_t i = 0; i < procs; i++) {
    snprintf(idx, sizeof(idx), "%u", i);
    sb_slot(sh, i)->fork_at = sb_now();
    pids[i] = fork();
    if (pids[i] == 0) {
      execl(self, self, "--child", fdtext, idx, (char *)NULL);
      fprintf(stderr, "shim_bench: exec %s: %s\n", self, strerror(errno));
      _exit(127);
    }
    if (pids[i] < 0) {
      fprintf(stderr, "shim_bench: fork: %s\n", strerror(errno));
      for (uint32_t j = 0; j < i; j++) kill(pids[j], SIGKILL);
      sb_reap(pids, i);
      return 1;
    }
  }
  bool ok = mode != SB_ALLOC || sb_release(sh, pids); /* only alloc waits at a barrier */
  if (!ok)
    for (uint32_t i = 0; i < procs; i++) kill(pids[i], SIGKILL);
  ok = sb_reap(pids, procs) && ok;
  for (uint32_t i = 0; ok && i < procs; i++) ok = sb_slot(sh, i)->done == 1 && sb_slot(sh, i)->count == cap;
  if (!ok) return 1;

  static const char *const modes[] = {"", "alloc", "start", "launch", "paired"};
  printf("mode=%s procs=%u", modes[mode], procs);
  if (mode == SB_START) {
    /* from the start instant: the slowest and the median process */
    static const char *const spans[] = {"own", "ready", "ctx", "first_alloc"};
    for (size_t k = 0; k < sizeof(spans) / sizeof(spans[0]); k++) {
      uint64_t v[SB_PROCS_MAX];
      for (uint32_t i = 0; i < procs; i++) {
        const sb_slot_t *sl = sb_slot(sh, i);
        const uint64_t by[] = {sl->own_ns, sl->ready_ns, sl->ctx_ns, sl->alloc_ns};
        v[i] = by[k];
      }
      qsort(v, procs, sizeof(v[0]), sb_cmp_u64);
      printf(" %s_max_ns=%" PRIu64 " %s_median_ns=%" PRIu64, spans[k], v[procs - 1], spans[k], sb_pct(v, procs, 50));
    }
    /* each step's median over the processes */
    static const char *const steps[] = {"main", "exec", "lookup", "init", "devget", "retain", "first_call"};
    for (size_t k = 0; k < sizeof(steps) / sizeof(steps[0]); k++) {
      uint64_t v[SB_PROCS_MAX];
      for (uint32_t i = 0; i < procs; i++) {
        const sb_slot_t *sl = sb_slot(sh, i);
        const uint64_t by[] = {sl->main_ns,   sl->exec_ns,   sl->lookup_ns,    sl->init_ns,
                               sl->devget_ns, sl->retain_ns, sl->first_call_ns};
        v[i] = by[k];
      }
      qsort(v, procs, sizeof(v[0]), sb_cmp_u64);
      printf(" %s_median_ns=%" PRIu64, steps[k], sb_pct(v, procs, 50));
    }
  } else {
    printf(" rounds=%" PRIu64 " warmup=%" PRIu64, rounds, warmup);
    static const char *const names[SB_SERIES] = {"alloc", "free", "driver_alloc", "driver_free"};
    int nseries = mode == SB_PAIRED ? 4 : mode == SB_ALLOC ? 2 : 1;
    if (mode == SB_LAUNCH && lo->paired) nseries = 2;
    uint64_t *all[SB_SERIES] = {NULL};
    size_t n = 0;
    bool ok_mem = true;
    for (int which = 0; which < nseries; which++) {
      all[which] = sb_gather(sh, which, &n);
      if (!all[which])
        ok_mem = false;
      else
        sb_print_series(mode == SB_LAUNCH ? (which ? "driver_launch" : "launch") : names[which], all[which], n);
    }
    if (ok_mem && mode == SB_LAUNCH) {
      /* all[0] is sorted: the calls past the threshold are its tail */
      size_t slow = 0;
      while (slow < n && all[0][n - 1 - slow] > lo->slow_us * 1000u) slow++;
      printf(" block=%" PRIu64 " stream=%s sync_every=%" PRIu64 " gap_us=%" PRIu64 " launch_slow_n=%zu", lo->block,
             lo->own_stream ? "own" : "null", lo->sync_every, lo->gap_us, slow);
      if (lease && sb_lease_stats(&lease1))
        printf(" lease_launches_n=%" PRIu64 " lease_throttled_ns=%" PRIu64 " lease_gpu_ns=%" PRIu64,
               lease1.launches - lease0.launches, lease1.throttled_ns - lease0.throttled_ns,
               lease1.gpu_ns - lease0.gpu_ns);
    }
    if (ok_mem && mode == SB_LAUNCH && lo->paired) {
      printf(" interposed=%d", sb_slot(sh, 0)->interposed);
      sb_print_added("launch", all[0], all[1], n);
    }
    if (ok_mem && mode == SB_PAIRED) {
      printf(" interposed=%d", sb_slot(sh, 0)->interposed);
      sb_print_added("alloc", all[0], all[2], n);
      sb_print_added("free", all[1], all[3], n);
    }
    for (int which = 0; which < nseries; which++) free(all[which]);
    if (!ok_mem) {
      fprintf(stderr, "shim_bench: out of memory gathering samples\n");
      return 1;
    }
  }
  printf("\n");
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 4 && strcmp(argv[1], "--child") == 0) {
    /* a measured process: argv is ours, written by sb_parent */
    uint64_t main_at = sb_now();
    int fd = atoi(argv[2]);
    uint32_t me = (uint32_t)atoi(argv[3]);
    sb_shared_t head;
    if (pread(fd, &head, sizeof(head), 0) != (ssize_t)sizeof(head) || me >= head.procs || head.procs > SB_PROCS_MAX ||
        head.cap > SB_SAMPLES_MAX) {
      fprintf(stderr, "shim_bench: --child is for shim_bench itself\n");
      return 2;
    }
    sb_shared_t *sh = mmap(NULL, sb_shared_size(head.procs, head.cap), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (sh == MAP_FAILED) {
      fprintf(stderr, "shim_bench: child mmap: %s\n", strerror(errno));
      return 1;
    }
    close(fd);
    return sb_child(sh, me, main_at);
  }
  if (argc < 2) return sb_usage();
  sb_mode_t mode;
  if (strcmp(argv[1], "alloc") == 0)
    mode = SB_ALLOC;
  else if (strcmp(argv[1], "start") == 0)
    mode = SB_START;
  else if (strcmp(argv[1], "launch") == 0)
    mode = SB_LAUNCH;
  else if (strcmp(argv[1], "paired") == 0)
    mode = SB_PAIRED;
  else
    return sb_usage();
  uint64_t procs = 1, rounds = mode == SB_LAUNCH ? 20000 : 5000, warmup = mode == SB_LAUNCH ? 1000 : 200;
  sb_launch_opts_t lo = {.block = 1,
                         .own_stream = 0,
                         .sync_every = SB_LAUNCH_SYNC_EVERY,
                         .gap_us = 0,
                         .slow_us = SB_LAUNCH_SLOW_NS / 1000u};
  for (int i = 2; i < argc; i += 2) {
    const char *opt = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
    bool ok;
    bool launch = mode == SB_LAUNCH;
    if (strcmp(opt, "--procs") == 0 && (mode == SB_ALLOC || mode == SB_START))
      ok = sb_parse_u64(opt, val, 1, SB_PROCS_MAX, &procs);
    else if (strcmp(opt, "--rounds") == 0 && (mode == SB_ALLOC || mode == SB_PAIRED))
      ok = sb_parse_u64(opt, val, 1, SB_SAMPLES_MAX, &rounds);
    else if (strcmp(opt, "--iters") == 0 && mode == SB_LAUNCH)
      ok = sb_parse_u64(opt, val, 1, SB_SAMPLES_MAX, &rounds);
    else if (strcmp(opt, "--warmup") == 0 && mode != SB_START)
      ok = sb_parse_u64(opt, val, 0, SB_SAMPLES_MAX, &warmup);
    else if (strcmp(opt, "--block") == 0 && launch)
      ok = sb_parse_u64(opt, val, 1, 1024, &lo.block);
    else if (strcmp(opt, "--sync-every") == 0 && launch)
      ok = sb_parse_u64(opt, val, 1, SB_SAMPLES_MAX, &lo.sync_every);
    else if (strcmp(opt, "--gap-us") == 0 && launch)
      ok = sb_parse_u64(opt, val, 0, 1000000, &lo.gap_us);
    else if (strcmp(opt, "--slow-us") == 0 && launch)
      ok = sb_parse_u64(opt, val, 1, 1000000000, &lo.slow_us);
    else if (strcmp(opt, "--paired") == 0 && launch) {
      lo.paired = 1;
      i--; /* takes no value */
      ok = true;
    } else if (strcmp(opt, "--stream") == 0 && launch) {
      ok = val && (strcmp(val, "own") == 0 || strcmp(val, "null") == 0);
      if (ok)
        lo.own_stream = strcmp(val, "own") == 0;
      else
        fprintf(stderr, "shim_bench: --stream is null or own, not '%s'\n", val ? val : "");
    } else {
      fprintf(stderr, "shim_bench: unknown option '%s' for %s\n", opt, argv[1]);
      return sb_usage();
    }
    if (!ok) return 2;
  }
  if (mode == SB_START) rounds = warmup = 0;
  char self[PATH_MAX];
  ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (len <= 0) {
    fprintf(stderr, "shim_bench: cannot read /proc/self/exe: %s\n", strerror(errno));
    return 1;
  }
  self[len] = '\0';
  return sb_parent(self, mode, (uint32_t)procs, rounds, warmup, &lo);
}
