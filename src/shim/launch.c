/* launch.c: compute shares held at every launch path (seed 002).
 *
 *   cuLaunchKernel, cuLaunchKernelEx, cuLaunchCooperativeKernel (and their
 *   _ptsz forms) and cuGraphLaunch (from graphs.c) are charged what the
 *   launch costs (cost.c) from the lease's bucket (throttle.c) before the
 *   driver is asked; NCCL kernels are let through uncharged.
 *   A launch into a stream that is being captured runs nothing: it is not
 *   charged (the graph is, when launched). Captures are counted as they
 *   begin and end, so that only while one is open does a launch ask the
 *   driver whether its stream captures.
 *   Sampled launches (cost.h says which; and a launch that waited for the
 *   bucket with the TSR__DENSE_AFTER_WAIT after it) are measured: an event before and
 *   one after on the same stream; completed pairs are read at later sampled
 *   launches (at every launch while a shape is on its prior), without
 *   waiting. A graph's first cost is the sum of its
 *   kernel nodes, computed when it is instantiated or updated; then its
 *   launches are measured as a kernel's are.
 *
 * The fast path of a process without an SM share is one flag test. With a
 * share and tokens available it is a thread-local lookup of the kernel's
 * cost entry, a clock read, one CAS on the lease's bucket and thread-local
 * sums of the counters: no lock, no syscall. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "region/bucket.h"
#include "shim/cost.h"
#include "shim/shim.h"
#include "shim/throttle.h"

#define TSR_EXPORT __attribute__((visibility("default")))
#define TSR__PAIRS 32      /* measurements in flight per process */
#define TSR__STREAMS 1024  /* per-stream buckets */
#define TSR__GRAPH_DEPTH 8 /* child graphs followed this deep */
#define TSR__GRAPH_NODES 4096
#define TSR__GRAPH_TAG (UINT64_C(1) << 63)
#define TSR__STREAM_PER_THREAD ((CUstream)(uintptr_t)0x2)

static tsr_cost_table_t tsr__costs = {.mu = PTHREAD_MUTEX_INITIALIZER};
static _Atomic int tsr__captures; /* stream captures open in this process */

/* A pair is taken when its start is recorded and is read only once its
 * end is too: another thread's poll between the two would time the start
 * against an end from an earlier sample. */
typedef enum { TSR__PAIR_FREE, TSR__PAIR_RECORDING, TSR__PAIR_PENDING } tsr__pair_state_t;

typedef struct {
  CUevent start, end;
  CUcontext ctx;
  tsr_cost_entry_t *entry;
  int lease;
  tsr__pair_state_t state;
} tsr__pair_t;

static pthread_mutex_t tsr__pair_mu = PTHREAD_MUTEX_INITIALIZER;
static tsr__pair_t tsr__pairs[TSR__PAIRS];

typedef struct {
  _Atomic uint64_t stream; /* the CUstream + 1 (the NULL stream is a stream); 0 free */
  tsr_atomic_u64 tat;
} tsr__stream_bucket_t;
static tsr__stream_bucket_t tsr__streams[TSR__STREAMS];

void tsr_shim_launch_forget(void) { tsr_cost_forget_all(&tsr__costs); }

/* ---- which lease, and whether it has a share ---- */

/* The devices this process sees: 0 not asked yet. With one, every launch
 * is on it and the current context need not be asked for its device. */
static _Atomic int tsr__devices;

static inline int tsr__share_lease(void) {
  if (!tsr_shim.any_share) return -1;
  int n = atomic_load_explicit(&tsr__devices, memory_order_relaxed);
  if (!n && tsr_real.cuDeviceGetCount && tsr_real.cuDeviceGetCount(&n) == CUDA_SUCCESS && n > 0)
    atomic_store_explicit(&tsr__devices, n, memory_order_relaxed);
  int lease = n == 1 ? tsr_shim_lease_of_device(0) : tsr_shim_current_lease();
  if (lease < 0 || !tsr_shim.tenant.leases[lease].compute.sm_ppm) return -1;
  return lease;
}

/* ---- the lease's counters, added up per thread ---- */

/* A launch adds to its thread's sums; they go to the region every 64
 * launches, after 1 ms, after a wait, when the lease changes and when the
 * thread or the process ends: a launch writes no shared counter line. */
#define TSR__NOTE_BATCH 64
#define TSR__NOTE_NS UINT64_C(1000000)
typedef struct {
  tsr_region_t *region;
  uint64_t launches, gpu_ns, throttled_ns, bypassed, since_ns;
} tsr__notes_t;
static _Thread_local tsr__notes_t tsr__notes;
static pthread_key_t tsr__notes_key;
static pthread_once_t tsr__notes_once = PTHREAD_ONCE_INIT;

static void tsr__notes_flush(tsr__notes_t *n) {
  if (n->region && (n->launches || n->bypassed))
    tsr_region_note_launches(n->region, n->launches, n->gpu_ns, n->throttled_ns, n->bypassed);
  n->launches = n->gpu_ns = n->throttled_ns = n->bypassed = 0;
}
static void tsr__notes_thread_exit(void *arg) {
  (void)arg;
  tsr__notes_flush(&tsr__notes);
}
static void tsr__notes_process_exit(void) { tsr__notes_flush(&tsr__notes); }
static void tsr__notes_init(void) {
  pthread_key_create(&tsr__notes_key, tsr__notes_thread_exit);
  atexit(tsr__notes_process_exit);
}

static void tsr__note(tsr_region_t *r, uint64_t gpu_ns, uint64_t throttled_ns, bool bypassed, uint64_t now) {
  tsr__notes_t *n = &tsr__notes;
  if (n->region != r) {
    if (!n->region) { /* this thread's first: its exit flushes */
      pthread_once(&tsr__notes_once, tsr__notes_init);
      pthread_setspecific(tsr__notes_key, n);
    }
    tsr__notes_flush(n);
    n->region = r;
    n->since_ns = now;
  }
  if (bypassed)
    n->bypassed++;
  else
    n->launches++;
  n->gpu_ns = tsr_bucket_sat_add(n->gpu_ns, gpu_ns);
  n->throttled_ns = tsr_bucket_sat_add(n->throttled_ns, throttled_ns);
  if (throttled_ns || n->launches + n->bypassed >= TSR__NOTE_BATCH || now - n->since_ns >= TSR__NOTE_NS) {
    tsr__notes_flush(n);
    n->since_ns = now;
  }
}

static bool tsr__capturing(CUstream stream, bool ptsz) {
  if (!atomic_load_explicit(&tsr__captures, memory_order_relaxed)) return false;
  CUresult (*is)(CUstream, int *) = ptsz ? tsr_real.cuStreamIsCapturing_ptsz : tsr_real.cuStreamIsCapturing;
  int status = CU_STREAM_CAPTURE_STATUS_NONE;
  if (!is || is(stream, &status) != CUDA_SUCCESS) return false;
  return status != CU_STREAM_CAPTURE_STATUS_NONE;
}

static const char *tsr__namer(void *ctx, uint64_t fn) {
  (void)ctx;
  const char *name = NULL;
  if (tsr_real.cuFuncGetName && tsr_real.cuFuncGetName(&name, (CUfunction)(uintptr_t)fn) == CUDA_SUCCESS && name &&
      *name)
    return name;
  name = NULL; /* a CUkernel passed as a CUfunction, as CUDA 12+ runtimes do */
  if (tsr_real.cuKernelGetName && tsr_real.cuKernelGetName(&name, (CUkernel)(uintptr_t)fn) == CUDA_SUCCESS) return name;
  return NULL;
}

static tsr_atomic_u64 *tsr__stream_tat(CUstream stream) {
  uint64_t key = (uint64_t)(uintptr_t)stream + 1;
  uint32_t h = (uint32_t)((key * UINT64_C(0x9e3779b97f4a7c15)) >> 40) % TSR__STREAMS;
  for (uint32_t i = 0; i < 16; i++) {
    tsr__stream_bucket_t *b = &tsr__streams[(h + i) % TSR__STREAMS];
    uint64_t k = atomic_load_explicit(&b->stream, memory_order_acquire);
    if (k == key) return &b->tat;
    if (!k) {
      uint64_t zero = 0;
      if (atomic_compare_exchange_strong(&b->stream, &zero, key) || zero == key) return &b->tat;
    }
  }
  return NULL; /* full around here: the lease's bucket alone holds it */
}

static void tsr__launch_after_fork(void) {
  tsr__notes.region = NULL; /* the parent's lease mapping is gone in the child */
  tsr__notes.launches = tsr__notes.bypassed = 0;
  atomic_store(&tsr__devices, 0);
  /* a forked child: the parent's events are not its, and a lock another
   * thread held at the fork is held by nobody here */
  pthread_mutex_init(&tsr__pair_mu, NULL);
  pthread_mutex_init(&tsr__costs.mu, NULL);
  memset(tsr__pairs, 0, sizeof(tsr__pairs));
  atomic_store(&tsr__captures, 0);
}

/* ---- measuring ---- */

static void tsr__settle(int lease, int64_t gpu_ns) {
  if (!gpu_ns || lease < 0) return;
  tsr_shim_lease_t *l = &tsr_shim.tenant.leases[lease];
  tsr_shim_throttle_settle(l->region, gpu_ns);
}

/* Reads every completed pair (under tsr__pair_mu). */
static void tsr__poll(void) {
  CUresult (*elapsed)(float *, CUevent, CUevent) =
      tsr_real.cuEventElapsedTime_v2 ? tsr_real.cuEventElapsedTime_v2 : tsr_real.cuEventElapsedTime;
  for (int i = 0; i < TSR__PAIRS; i++) {
    tsr__pair_t *p = &tsr__pairs[i];
    if (p->state != TSR__PAIR_PENDING) continue;
    CUresult q = tsr_real.cuEventQuery(p->end);
    if (q == CUDA_ERROR_NOT_READY) continue;
    float ms = 0;
    if (q == CUDA_SUCCESS && elapsed && elapsed(&ms, p->start, p->end) == CUDA_SUCCESS && ms >= 0) {
      int64_t settle = tsr_cost_learn(&tsr__costs, p->entry, (uint64_t)((double)ms * 1e6));
      tsr__settle(p->lease, settle);
    } else if (q != CUDA_SUCCESS) {
      p->start = p->end = NULL; /* its context is gone, or the events are */
    }
    p->state = TSR__PAIR_FREE;
  }
}

/* Records the start of a measurement on `stream`: the pair's index, or -1. */
static int tsr__sample_begin(CUstream stream, bool ptsz, tsr_cost_entry_t *e, int lease) {
  if (!tsr_real.cuEventRecord || !tsr_real.cuEventQuery || !tsr_real.cuEventCreate) return -1;
  CUcontext ctx = NULL;
  if (tsr_real.cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || !ctx) return -1;
  if (ptsz && !stream) stream = TSR__STREAM_PER_THREAD;
  if (pthread_mutex_trylock(&tsr__pair_mu) != 0) return -1; /* another thread measures: skip */
  tsr__poll();
  int got = -1;
  for (int i = 0; i < TSR__PAIRS && got < 0; i++)
    if (tsr__pairs[i].state == TSR__PAIR_FREE && tsr__pairs[i].start && tsr__pairs[i].ctx == ctx) got = i;
  for (int i = 0; i < TSR__PAIRS && got < 0; i++) {
    tsr__pair_t *p = &tsr__pairs[i];
    if (p->state != TSR__PAIR_FREE || p->start) continue;
    if (tsr_real.cuEventCreate(&p->start, 0) != CUDA_SUCCESS) break;
    if (tsr_real.cuEventCreate(&p->end, 0) != CUDA_SUCCESS) {
      if (tsr_real.cuEventDestroy_v2) tsr_real.cuEventDestroy_v2(p->start);
      p->start = NULL;
      break;
    }
    p->ctx = ctx;
    got = i;
  }
  if (got >= 0 && tsr_real.cuEventRecord(tsr__pairs[got].start, stream) != CUDA_SUCCESS) got = -1;
  if (got >= 0) {
    tsr__pairs[got].entry = e;
    tsr__pairs[got].lease = lease;
    tsr__pairs[got].state = TSR__PAIR_RECORDING; /* nobody takes or reads it until the end is recorded */
  }
  pthread_mutex_unlock(&tsr__pair_mu);
  return got;
}

static void tsr__sample_end(int pair, CUstream stream, bool ptsz, CUresult rc) {
  if (pair < 0) return;
  if (ptsz && !stream) stream = TSR__STREAM_PER_THREAD;
  pthread_mutex_lock(&tsr__pair_mu);
  tsr__pair_t *p = &tsr__pairs[pair];
  p->state =
      rc == CUDA_SUCCESS && tsr_real.cuEventRecord(p->end, stream) == CUDA_SUCCESS ? TSR__PAIR_PENDING : TSR__PAIR_FREE;
  pthread_mutex_unlock(&tsr__pair_mu);
}

/* ---- the charge ---- */

/* Launches of this thread still measured after one that waited. */
#define TSR__DENSE_AFTER_WAIT 8
static _Thread_local unsigned tsr__dense;

typedef struct {
  int lease;
  int pair;
  uint64_t cost;
} tsr__ticket_t;

/* Charges a launch of `e` on `stream` to `lease`, waiting for the bucket.
 * Fills *tk for tsr__done. */
static void tsr__admit(int lease, tsr_cost_entry_t *e, CUstream stream, bool ptsz, tsr__ticket_t *tk) {
  tsr_shim_lease_t *l = &tsr_shim.tenant.leases[lease];
  tk->lease = lease;
  tk->pair = -1;
  bool sample = false;
  uint64_t cost = e ? tsr_cost_charge(e, &sample) : TSR_COST_PRIOR_NS;
  tk->cost = cost;
  if (!cost) {
    tsr__note(l->region, 0, 0, true, tsr_shim_clock->now(tsr_shim_clock->ctx));
    return;
  }
  /* While any stream of the process captures, nothing is measured: in the
   * default (global) capture mode a query of an event can cost the
   * capturing thread its capture (on the H100 a query of an event recorded
   * in it invalidates it), and the tenant's capture is worth more than a
   * sample. */
  bool quiet = atomic_load_explicit(&tsr__captures, memory_order_relaxed) > 0;
  if (quiet) sample = false;
  /* a shape still charged its prior: read finished measurements now, not
   * only at the next sampled launch, so that it is learned within a few
   * launches */
  if (!quiet && e && !atomic_load_explicit(&e->est_ns, memory_order_relaxed) &&
      pthread_mutex_trylock(&tsr__pair_mu) == 0) {
    tsr__poll();
    pthread_mutex_unlock(&tsr__pair_mu);
  }
  tsr_atomic_u64 *st = l->compute.stream_ppm < TSR_BUCKET_PPM
                           ? tsr__stream_tat(ptsz && !stream ? TSR__STREAM_PER_THREAD : stream)
                           : NULL;
  uint64_t now = 0;
  uint64_t waited = tsr_shim_throttle(l->region, &l->compute, st, cost, &now);
  tsr__note(l->region, cost, waited, false, now);
  /* a launch that waited is measured too: the wait dwarfs two event
   * records, and a throttled lease's kernels often find the GPU idle, which
   * is when a measurement is clean (one taken behind other streams' queued
   * kernels includes their time, and is left out once a clean one exists) */
  if (waited && !quiet) {
    sample = true;
    tsr__dense = TSR__DENSE_AFTER_WAIT;
  } else if (tsr__dense && !quiet) {
    /* and so are the launches that follow it on credit: a lease held
     * below its share runs in bursts, and beside another busy tenant only
     * a few of its kernels run with the GPU to themselves (cost.h: why);
     * the more of them are measured, the surer a clean one is in the ring */
    tsr__dense--;
    sample = true;
  }
  if (sample && e) tk->pair = tsr__sample_begin(stream, ptsz, e, lease);
}

static inline CUresult tsr__done(const tsr__ticket_t *tk, CUstream stream, bool ptsz, CUresult rc) {
  tsr__sample_end(tk->pair, stream, ptsz, rc);
  /* nothing ran: the charge is given back */
  if (rc != CUDA_SUCCESS && tk->cost) tsr__settle(tk->lease, -(int64_t)tk->cost);
  return rc;
}

/* The entry a thread launched last: a loop launching one kernel finds it
 * without hashing. */
static _Thread_local struct {
  uint64_t fn, shape;
  uint32_t epoch;
  tsr_cost_entry_t *e;
} tsr__last;

static tsr_cost_entry_t *tsr__kernel_entry(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                           unsigned by, unsigned bz, unsigned shmem) {
  uint64_t blocks = (uint64_t)gx * gy * gz;
  uint64_t threads = (uint64_t)bx * by * bz;
  uint64_t fn = (uint64_t)(uintptr_t)f;
  uint64_t shape = tsr_cost_shape(blocks, threads > UINT32_MAX ? UINT32_MAX : (uint32_t)threads, shmem);
  uint32_t epoch = atomic_load_explicit(&tsr__costs.epoch, memory_order_acquire);
  if (tsr__last.e && tsr__last.fn == fn && tsr__last.shape == shape && tsr__last.epoch == epoch) return tsr__last.e;
  tsr_cost_entry_t *e = tsr_cost_get(&tsr__costs, fn, shape, tsr__namer, NULL, 0);
  if (e) {
    tsr__last.fn = fn;
    tsr__last.shape = shape;
    tsr__last.epoch = epoch;
    tsr__last.e = e;
  }
  return e;
}

/* ---- kernel launches ---- */

typedef CUresult (*tsr__launch_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                   CUstream, void **, void **);
typedef CUresult (*tsr__coop_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                 CUstream, void **);

static CUresult tsr__kernel(tsr__launch_fn real, tsr__coop_fn coop, bool ptsz, CUfunction f, unsigned gx, unsigned gy,
                            unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shmem, CUstream stream,
                            void **params, void **extra) {
#define TSR__CALL()                                                     \
  (real ? real(f, gx, gy, gz, bx, by, bz, shmem, stream, params, extra) \
        : coop(f, gx, gy, gz, bx, by, bz, shmem, stream, params))
  if (!real && !coop) return CUDA_ERROR_NOT_INITIALIZED;
  int lease = tsr__share_lease();
  if (lease < 0 || !f || tsr__capturing(stream, ptsz)) return TSR__CALL();
  tsr__ticket_t tk;
  tsr__admit(lease, tsr__kernel_entry(f, gx, gy, gz, bx, by, bz, shmem), stream, ptsz, &tk);
  return tsr__done(&tk, stream, ptsz, TSR__CALL());
#undef TSR__CALL
}

TSR_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                   unsigned bz, unsigned shmem, CUstream stream, void **params, void **extra) {
  tsr_shim_ready();
  return tsr__kernel(tsr_real.cuLaunchKernel, NULL, false, f, gx, gy, gz, bx, by, bz, shmem, stream, params, extra);
}

TSR_EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                        unsigned bz, unsigned shmem, CUstream stream, void **params, void **extra) {
  tsr_shim_ready();
  return tsr__kernel(tsr_real.cuLaunchKernel_ptsz, NULL, true, f, gx, gy, gz, bx, by, bz, shmem, stream, params, extra);
}

TSR_EXPORT CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                              unsigned by, unsigned bz, unsigned shmem, CUstream stream,
                                              void **params) {
  tsr_shim_ready();
  return tsr__kernel(NULL, tsr_real.cuLaunchCooperativeKernel, false, f, gx, gy, gz, bx, by, bz, shmem, stream, params,
                     NULL);
}

TSR_EXPORT CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                                   unsigned by, unsigned bz, unsigned shmem, CUstream stream,
                                                   void **params) {
  tsr_shim_ready();
  return tsr__kernel(NULL, tsr_real.cuLaunchCooperativeKernel_ptsz, true, f, gx, gy, gz, bx, by, bz, shmem, stream,
                     params, NULL);
}

static CUresult tsr__kernel_ex(CUresult (*real)(const CUlaunchConfig *, CUfunction, void **, void **), bool ptsz,
                               const CUlaunchConfig *cfg, CUfunction f, void **params, void **extra) {
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  int lease = tsr__share_lease();
  if (lease < 0 || !f || !cfg || tsr__capturing(cfg->hStream, ptsz)) return real(cfg, f, params, extra);
  tsr__ticket_t tk;
  tsr__admit(lease,
             tsr__kernel_entry(f, cfg->gridDimX, cfg->gridDimY, cfg->gridDimZ, cfg->blockDimX, cfg->blockDimY,
                               cfg->blockDimZ, cfg->sharedMemBytes),
             cfg->hStream, ptsz, &tk);
  return tsr__done(&tk, cfg->hStream, ptsz, real(cfg, f, params, extra));
}

TSR_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *cfg, CUfunction f, void **params, void **extra) {
  tsr_shim_ready();
  return tsr__kernel_ex(tsr_real.cuLaunchKernelEx, false, cfg, f, params, extra);
}

TSR_EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *cfg, CUfunction f, void **params, void **extra) {
  tsr_shim_ready();
  return tsr__kernel_ex(tsr_real.cuLaunchKernelEx_ptsz, true, cfg, f, params, extra);
}

/* ---- stream capture: counted, so that launches ask only while one is open ---- */

static CUresult tsr__began(CUresult rc) {
  if (rc == CUDA_SUCCESS) atomic_fetch_add(&tsr__captures, 1);
  return rc;
}

TSR_EXPORT CUresult cuStreamBeginCapture(CUstream s) {
  tsr_shim_ready();
  if (!tsr_real.cuStreamBeginCapture) return CUDA_ERROR_NOT_INITIALIZED;
  return tsr__began(tsr_real.cuStreamBeginCapture(s));
}
TSR_EXPORT CUresult cuStreamBeginCapture_ptsz(CUstream s) {
  tsr_shim_ready();
  if (!tsr_real.cuStreamBeginCapture_ptsz) return CUDA_ERROR_NOT_INITIALIZED;
  return tsr__began(tsr_real.cuStreamBeginCapture_ptsz(s));
}
TSR_EXPORT CUresult cuStreamBeginCapture_v2(CUstream s, int mode) {
  tsr_shim_ready();
  if (!tsr_real.cuStreamBeginCapture_v2) return CUDA_ERROR_NOT_INITIALIZED;
  return tsr__began(tsr_real.cuStreamBeginCapture_v2(s, mode));
}
TSR_EXPORT CUresult cuStreamBeginCapture_v2_ptsz(CUstream s, int mode) {
  tsr_shim_ready();
  if (!tsr_real.cuStreamBeginCapture_v2_ptsz) return CUDA_ERROR_NOT_INITIALIZED;
  return tsr__began(tsr_real.cuStreamBeginCapture_v2_ptsz(s, mode));
}
TSR_EXPORT CUresult cuStreamBeginCaptureToGraph(CUstream s, CUgraph g, const CUgraphNode *deps, const void *data,
                                                size_t n, int mode) {
  tsr_shim_ready();
  if (!tsr_real.cuStreamBeginCaptureToGraph) return CUDA_ERROR_NOT_INITIALIZED;
  return tsr__began(tsr_real.cuStreamBeginCaptureToGraph(s, g, deps, data, n, mode));
}
TSR_EXPORT CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream s, CUgraph g, const CUgraphNode *deps, const void *data,
                                                     size_t n, int mode) {
  tsr_shim_ready();
  if (!tsr_real.cuStreamBeginCaptureToGraph_ptsz) return CUDA_ERROR_NOT_INITIALIZED;
  return tsr__began(tsr_real.cuStreamBeginCaptureToGraph_ptsz(s, g, deps, data, n, mode));
}

static CUresult tsr__ended(CUresult rc) {
  /* not capturing (ILLEGAL_STATE): nothing ended; otherwise (done or
   * invalidated) the capture is over */
  if (rc != CUDA_ERROR_ILLEGAL_STATE && rc != CUDA_ERROR_INVALID_VALUE) {
    int n = atomic_load(&tsr__captures);
    while (n > 0 && !atomic_compare_exchange_weak(&tsr__captures, &n, n - 1)) {
    }
  }
  return rc;
}

TSR_EXPORT CUresult cuStreamEndCapture(CUstream s, CUgraph *g) {
  tsr_shim_ready();
  if (!tsr_real.cuStreamEndCapture) return CUDA_ERROR_NOT_INITIALIZED;
  return tsr__ended(tsr_real.cuStreamEndCapture(s, g));
}
TSR_EXPORT CUresult cuStreamEndCapture_ptsz(CUstream s, CUgraph *g) {
  tsr_shim_ready();
  if (!tsr_real.cuStreamEndCapture_ptsz) return CUDA_ERROR_NOT_INITIALIZED;
  return tsr__ended(tsr_real.cuStreamEndCapture_ptsz(s, g));
}

/* ---- graphs ---- */

/* What the kernel nodes of `graph` cost, child graphs included; *out_kernels
 * counts them and *out_charged those that are charged (not NCCL). */
static uint64_t tsr__graph_cost(CUgraph graph, int depth, uint32_t *out_kernels, uint32_t *out_charged) {
  if (depth > TSR__GRAPH_DEPTH || !tsr_real.cuGraphGetNodes || !tsr_real.cuGraphNodeGetType) return 0;
  size_t n = 0;
  if (tsr_real.cuGraphGetNodes(graph, NULL, &n) != CUDA_SUCCESS || !n) return 0;
  if (n > TSR__GRAPH_NODES) n = TSR__GRAPH_NODES; /* the rest is measured at the first launches */
  CUgraphNode *nodes = malloc(n * sizeof(*nodes));
  if (!nodes) return 0;
  size_t got = n;
  if (tsr_real.cuGraphGetNodes(graph, nodes, &got) != CUDA_SUCCESS) got = 0;
  uint64_t sum = 0;
  for (size_t i = 0; i < got && i < n; i++) {
    int type = -1;
    if (tsr_real.cuGraphNodeGetType(nodes[i], &type) != CUDA_SUCCESS) continue;
    if (type == CU_GRAPH_NODE_TYPE_KERNEL && tsr_real.cuGraphKernelNodeGetParams_v2) {
      CUDA_KERNEL_NODE_PARAMS_v2 p;
      memset(&p, 0, sizeof(p));
      if (tsr_real.cuGraphKernelNodeGetParams_v2(nodes[i], &p) != CUDA_SUCCESS) continue;
      CUfunction f = p.func ? p.func : (CUfunction)p.kern;
      if (!f) continue;
      (*out_kernels)++;
      tsr_cost_entry_t *e = tsr__kernel_entry(f, p.gridDimX, p.gridDimY, p.gridDimZ, p.blockDimX, p.blockDimY,
                                              p.blockDimZ, p.sharedMemBytes);
      uint64_t c = e ? tsr_cost_peek(e) : TSR_COST_PRIOR_NS;
      if (c) (*out_charged)++;
      sum = tsr_bucket_sat_add(sum, c);
    } else if (type == CU_GRAPH_NODE_TYPE_GRAPH && tsr_real.cuGraphChildGraphNodeGetGraph) {
      CUgraph child = NULL;
      if (tsr_real.cuGraphChildGraphNodeGetGraph(nodes[i], &child) == CUDA_SUCCESS && child)
        sum = tsr_bucket_sat_add(sum, tsr__graph_cost(child, depth + 1, out_kernels, out_charged));
    }
  }
  free(nodes);
  return sum;
}

/* Sets the cost of `exec` from `graph`'s kernel nodes. */
void tsr_shim_graph_priced(CUgraphExec exec, CUgraph graph) {
  if (!tsr_shim.any_share || !exec || !graph) return;
  uint32_t kernels = 0, charged = 0;
  uint64_t sum = tsr__graph_cost(graph, 0, &kernels, &charged);
  tsr_cost_entry_t *e = tsr_cost_get(&tsr__costs, (uint64_t)(uintptr_t)exec | TSR__GRAPH_TAG, 0, NULL, NULL, sum);
  if (!e) return;
  tsr_cost_reset(&tsr__costs, e, sum ? sum : TSR_COST_MIN_NS);
  /* a graph of NCCL kernels only is let through as they are */
  atomic_store(&e->kclass, kernels && !charged ? TSR_KCLASS_NCCL : TSR_KCLASS_DEFAULT);
}

CUresult tsr_shim_graph_launch(CUresult (*real)(CUgraphExec, CUstream), CUgraphExec exec, CUstream stream, bool ptsz) {
  int lease = tsr__share_lease();
  if (lease < 0 || !exec || tsr__capturing(stream, ptsz)) return real(exec, stream);
  tsr_cost_entry_t *e = tsr_cost_get(&tsr__costs, (uint64_t)(uintptr_t)exec | TSR__GRAPH_TAG, 0, NULL, NULL, 0);
  tsr__ticket_t tk;
  tsr__admit(lease, e, stream, ptsz, &tk);
  return tsr__done(&tk, stream, ptsz, real(exec, stream));
}

TSR_EXPORT CUresult cuGraphExecKernelNodeSetParams_v2(CUgraphExec exec, CUgraphNode node,
                                                      const CUDA_KERNEL_NODE_PARAMS_v2 *params) {
  tsr_shim_ready();
  if (!tsr_real.cuGraphExecKernelNodeSetParams_v2) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = tsr_real.cuGraphExecKernelNodeSetParams_v2(exec, node, params);
  if (rc == CUDA_SUCCESS && tsr_shim.any_share) {
    /* a node changed: what the graph costs is measured again */
    tsr_cost_entry_t *e = tsr_cost_get(&tsr__costs, (uint64_t)(uintptr_t)exec | TSR__GRAPH_TAG, 0, NULL, NULL, 0);
    if (e) tsr_cost_reset(&tsr__costs, e, tsr_cost_peek(e));
  }
  return rc;
}

const tsr_shim_family_t tsr_shim_family_launch = {.after_fork = tsr__launch_after_fork, .reconcile = NULL};
