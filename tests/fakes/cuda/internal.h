/* internal.h: the fake driver's parts and how they meet.
 *
 *   fake_cuda.c  configuration, cuInit, devices, contexts, limits, errors
 *   memory.c     the allocation table, cuMemAlloc and friends, copies, host
 *   pools.c      streams, memory pools, stream-ordered allocation
 *   vmm.c        cuMemCreate / cuMemMap and the address reservations
 *   arrays.c     CUDA arrays and mipmapped arrays
 *   graphs.c     graphs: memory, kernel, empty and child graph nodes; executable
 *                graphs, their launch and update
 *   capture.c    stream capture (work on a capturing stream becomes graph nodes)
 *   modules.c    modules, functions, kernel launches
 *   timeline.c   kernel durations and the device timeline (when work ends)
 *   events.c     events: record, query, synchronize, elapsed time
 *   procaddr.c   cuGetProcAddress and its table
 *   green.c      green contexts and the device resources they are made of
 *   visible.c    CUDA_VISIBLE_DEVICES: the CUDA ordinal -> physical device table
 *   state.c      device totals and the per-process table (fake_cuda_state.h)
 *
 * Devices: a CUdevice (and a CUmemLocation's id) is a CUDA ordinal, what the
 * program sees after CUDA_VISIBLE_DEVICES; every entry that takes one turns
 * it into the physical device at once (fc_dev_phys), and everything inside
 * (contexts, pools, allocations, the per-device arrays below, the state
 * table a fake NVML reads) is indexed by physical device, as NVML is.
 *
 * Locking: every exported entry takes the one process-wide mutex (g_fc.mu)
 * for its whole body (FC_LOCKED), so the object tables below are plain C,
 * except while an entry waits for the timeline (a synchronize): it lets the
 * mutex go for the sleep (fc_sleep_until) and, after it, trusts no pointer
 * it had read before.
 * The device counters live in the state table, updated with C11 atomics and
 * never under a lock that outlives a call. The current-context stack is
 * per thread.
 *
 * Time (timeline.c): kernels take simulated time. A function whose name ends
 * in _<N>us (PTX ".entry spin_1500us") runs N microseconds per wave, any
 * other FAKE_CUDA_KERNEL_US (default 0) per wave; a wave is what the device
 * holds at once, 132 SMs x min(32, 2048 / threads per block) blocks, so a
 * launch of B blocks takes ceil(B / that) waves. Each physical device has one
 * serial engine per process: work queued on any stream starts when the
 * engine is free (or now, if it is idle) and ends its duration later, on
 * CLOCK_MONOTONIC. A stream remembers when its last work ends; synchronizes
 * sleep until then and queries answer CUDA_ERROR_NOT_READY before it; an
 * event completes where its stream's work ends (or when it is recorded, if
 * the stream is idle). Copies and memsets are instantaneous and do not wait
 * for queued kernels. */
#ifndef FAKE_CUDA_INTERNAL_H
#define FAKE_CUDA_INTERNAL_H

/* cuda.h then declares every ABI version of each entry (cuMemAlloc with
 * 32-bit arguments beside cuMemAlloc_v2, the _ptds/_ptsz per-thread-stream
 * variants) under its exported name, as when the driver itself is built, so
 * each definition below is checked against its real prototype. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "fake_cuda_state.h"

#define FC_EXPORT __attribute__((visibility("default")))

#define FC_DRIVER_VERSION 13000
#define FC_SM_COUNT 132
#define FC_THREADS_PER_SM 2048
#define FC_GRANULARITY ((size_t)2 << 20) /* VMM granularity, minimum and recommended */
#define FC_PITCH_ALIGN 512               /* cuMemAllocPitch rounds rows to this */
#define FC_STACK_DEFAULT 1024            /* per-thread stack, bytes */
#define FC_STACK_MAX ((size_t)256 << 10) /* largest the H100 accepted */
#define FC_HEAP_DEFAULT ((size_t)8 << 20)
#define FC_FIFO_DEFAULT ((size_t)8650752) /* 8.25 MiB, what the H100 reports */
#define FC_CTX_STACK_MAX 64               /* contexts pushed on one thread */

typedef struct {
  int ndevices;          /* FAKE_CUDA_DEVICES, default 1: physical devices */
  uint64_t total;        /* FAKE_CUDA_TOTAL_MEM, default 80 GiB */
  uint64_t ctx_bytes;    /* FAKE_CUDA_CTX_BYTES, default 512 MiB */
  uint64_t module_bytes; /* FAKE_CUDA_MODULE_BYTES, default 0 */
  uint64_t granule;      /* FAKE_CUDA_ALLOC_GRANULE, default 1 (exact bytes) */
  uint64_t kernel_us;    /* FAKE_CUDA_KERNEL_US, default 0: microseconds per wave of a
                            function whose name does not say (_<N>us) */
} fc_config_t;

/* Largest simulated time one piece of work may take (about 11.6 days): the
 * timeline's sums of nanoseconds then never wrap. */
#define FC_WORK_NS_MAX ((uint64_t)1000000000000000)

/* ---- objects -------------------------------------------------------------- */

/* Every handle the fake gives out points at a struct that starts with its
 * kind, and is checked against a table of live handles before it is read,
 * so a stale or made-up handle gets the driver's error, never a crash. */
typedef enum {
  FC_K_CTX = 1,
  FC_K_STREAM,
  FC_K_POOL,
  FC_K_MODULE,
  FC_K_FUNC,
  FC_K_ARRAY,
  FC_K_MIPMAP,
  FC_K_GRAPH,
  FC_K_NODE,
  FC_K_EXEC,
  FC_K_VMM, /* a cuMemCreate handle */
  FC_K_EVENT,
  FC_K_GREEN,   /* a green context (green.c) */
  FC_K_RESDESC, /* a resource descriptor (green.c) */
  FC_K_KINDS
} fc_kind_t;

typedef struct {
  fc_kind_t kind;
} fc_obj_t;

struct fc_ctx;
struct fc_capture;

/* A stream: one the program created, a context's legacy default stream
 * (NULL, CU_STREAM_LEGACY), or a thread's per-thread default stream
 * (CU_STREAM_PER_THREAD, and NULL through the _ptsz/_ptds entries). Only
 * created streams are handles in the table; the others are found through
 * their context (fc_stream_get). */
typedef enum { FC_S_CREATED, FC_S_LEGACY, FC_S_PER_THREAD } fc_skind_t;

typedef struct fc_stream {
  fc_obj_t hdr;
  struct fc_ctx *ctx;
  fc_skind_t skind;
  unsigned flags;             /* CU_STREAM_NON_BLOCKING or 0 */
  uint64_t thread;            /* FC_S_PER_THREAD: its thread's fc_thread_id() */
  uint64_t end_ns;            /* when the work queued on it so far ends (CLOCK_MONOTONIC) */
  struct fc_capture *capture; /* while capturing, or invalidated and not yet ended */
} fc_stream_t;

typedef struct fc_ctx {
  fc_obj_t hdr;
  int dev; /* physical device */
  bool primary;
  bool alive; /* false once destroyed (or a primary not active) */
  unsigned flags;
  unsigned retain;          /* primary: cuDevicePrimaryCtxRetain count */
  uint64_t charged;         /* footprint charged while alive */
  size_t limits[10];        /* CUlimit values */
  uint64_t limit_charge[3]; /* charged for stack, FIFO, heap above the footprint */
  fc_stream_t legacy;       /* its legacy default stream */
  uint64_t end_ns;          /* when the last work queued in it ends (cuCtxSynchronize) */
  uint64_t gone_end_ns;     /* when the work of its destroyed blocking streams ends (the
                              legacy stream still waits for it) */
} fc_ctx_t;

typedef struct fc_pool {
  fc_obj_t hdr;
  int dev; /* physical device */
  bool is_default;
  bool destroyed;     /* cuMemPoolDestroy came while allocations were live */
  uint64_t reserved;  /* charged to the device */
  uint64_t used;      /* of reserved, handed out */
  uint64_t used_attr; /* CU_MEMPOOL_ATTR_USED_MEM_CURRENT as the H100 reports it:
                              raised by every allocation, lowered only by cuMemFreeAsync
                              (a pool pointer freed by cuMemFree stays counted) */
  uint64_t reserved_high, used_high;
  uint64_t threshold; /* CU_MEMPOOL_ATTR_RELEASE_THRESHOLD */
  int reuse[3];       /* the three REUSE_* attributes */
  size_t live;        /* allocations not yet freed */
} fc_pool_t;

typedef enum {
  FC_A_DEVICE,  /* cuMemAlloc, cuMemAllocPitch */
  FC_A_MANAGED, /* cuMemAllocManaged */
  FC_A_HOST,    /* cuMemAllocHost: not charged */
  FC_A_POOL,    /* cuMemAllocAsync, cuMemAllocFromPoolAsync */
  FC_A_GRAPH,   /* a graph's allocation node */
  FC_A_VMM,     /* a cuMemMap mapping */
} fc_akind_t;

struct fc_node;
struct fc_vmm;

/* One range of addresses the fake handed out. */
typedef struct fc_alloc {
  fc_akind_t kind;
  uintptr_t base;
  size_t size; /* the range callers may touch */
  void *map;   /* host backing to munmap, or NULL */
  size_t map_len;
  uint64_t charged;     /* device bytes this range holds (0 for host, VMM, graph) */
  int dev;              /* physical device */
  fc_ctx_t *ctx;        /* owner context; NULL for graph and VMM ranges */
  fc_pool_t *pool;      /* FC_A_POOL */
  struct fc_node *node; /* FC_A_GRAPH: its allocation node (NULL once the graph is gone) */
  bool live;            /* FC_A_GRAPH: allocated by a launch, not yet freed */
  struct fc_vmm *vmm;   /* FC_A_VMM: the cuMemCreate handle mapped here */
} fc_alloc_t;

/* ---- the process-wide state ----------------------------------------------- */

typedef struct {
  pthread_mutex_t mu;
  _Atomic int inited; /* cuInit succeeded in this process */
  pid_t pid;          /* the process that ran cuInit (a forked child is not it) */
  fc_config_t cfg;
  int nvisible;                    /* CUDA devices (cuDeviceGetCount) */
  int phys[FAKE_CUDA_MAX_DEVICES]; /* CUDA ordinal -> physical device */
  fake_cuda_state_t *state;
  int slot;
  /* indexed by physical device */
  fc_ctx_t primary[FAKE_CUDA_MAX_DEVICES];
  fc_pool_t *default_pool[FAKE_CUDA_MAX_DEVICES];
  uint64_t graph_reserved[FAKE_CUDA_MAX_DEVICES]; /* the graph allocator's cache */
  uint64_t graph_used[FAKE_CUDA_MAX_DEVICES];
  uint64_t busy_until[FAKE_CUDA_MAX_DEVICES]; /* when the device's engine is free (ns) */
  /* per-thread default streams, made on first use, one per thread and context */
  fc_stream_t **ptstreams;
  size_t nptstreams, capptstreams;
  /* live handles of each kind; contexts also keep destroyed ones (a
   * destroyed handle answers CUDA_ERROR_CONTEXT_IS_DESTROYED) */
  void **objs[FC_K_KINDS];
  size_t nobjs[FC_K_KINDS], capobjs[FC_K_KINDS];
  fc_alloc_t **allocs;
  size_t nallocs, capallocs;
} fc_global_t;

extern fc_global_t g_fc;

/* CUDA_SUCCESS once cuInit has run in this process, else
 * CUDA_ERROR_NOT_INITIALIZED (also in a child forked after cuInit, as with
 * the real driver). */
CUresult fc_ready(void);
void fc_lock(void);
void fc_unlock(void);

/* Runs `expr` (a CUresult) under the lock once the driver is initialized. */
#define FC_LOCKED(expr)                      \
  do {                                       \
    CUresult fc_r_ = fc_ready();             \
    if (fc_r_ != CUDA_SUCCESS) return fc_r_; \
    fc_lock();                               \
    fc_r_ = (expr);                          \
    fc_unlock();                             \
    return fc_r_;                            \
  } while (0)

/* ---- helpers shared by the parts (all called under the lock) ------------- */

/* The physical device behind CUDA ordinal `ordinal`, or -1 when this
 * process has no such device (CUDA_ERROR_INVALID_DEVICE, mostly). */
int fc_dev_phys(CUdevice ordinal);
/* The CUDA ordinal of physical device `phys` (-1 if it is not visible). */
CUdevice fc_dev_ordinal(int phys);
/* Reads CUDA_VISIBLE_DEVICES for `nphys` physical devices into out_phys
 * (CUDA ordinal -> physical device) and returns how many are visible, or
 * -1 when the list names a device twice. */
int fc_visible_read(int nphys, int out_phys[FAKE_CUDA_MAX_DEVICES]);
/* Charges `bytes` of physical device `dev`: CUDA_SUCCESS or CUDA_ERROR_OUT_OF_MEMORY
 * (nothing changed). */
CUresult fc_charge(int dev, uint64_t bytes);
void fc_uncharge(int dev, uint64_t bytes);
/* `bytes` rounded up to FAKE_CUDA_ALLOC_GRANULE; UINT64_MAX on overflow. */
uint64_t fc_granule(uint64_t bytes);

/* The calling thread's current context: CUDA_ERROR_INVALID_CONTEXT if none,
 * CUDA_ERROR_CONTEXT_IS_DESTROYED if it was destroyed (or reset). */
CUresult fc_current(fc_ctx_t **out_ctx);
/* The context a handle names: as fc_current for destroyed ones,
 * CUDA_ERROR_INVALID_CONTEXT for handles that never were. */
CUresult fc_ctx_lookup(CUcontext h, fc_ctx_t **out_ctx);

/* The table of live handles. */
bool fc_obj_add(fc_kind_t kind, void *obj);
/* A zeroed object of `size` bytes whose header says `kind`, in the table;
 * NULL (nothing made) when memory runs out. */
void *fc_obj_new(fc_kind_t kind, size_t size);
void fc_obj_remove(fc_kind_t kind, void *obj);
void *fc_obj_find(fc_kind_t kind, const void *handle);

/* Host address space standing in for device memory: readable, writable,
 * reserved without RAM (MAP_NORESERVE). NULL if the kernel refuses. */
void *fc_map(size_t bytes, size_t *out_len);
/* The allocation table. */
fc_alloc_t *fc_alloc_new(fc_akind_t kind, size_t size, bool backed);
void fc_alloc_drop(fc_alloc_t *a); /* removes, unmaps, frees (charge is the caller's) */
fc_alloc_t *fc_alloc_at(uintptr_t base);
/* The allocation that holds [ptr, ptr + n), if any (graph ranges only while live). */
fc_alloc_t *fc_alloc_span(uintptr_t ptr, size_t n);
/* Frees allocation `a` by whatever path it came from (device, pool, graph). */
CUresult fc_alloc_free(fc_alloc_t *a);
/* Frees every allocation a context owns (device, managed, host, pool). */
void fc_allocs_release(fc_ctx_t *ctx);
/* Frees everything a context owns (its destruction or reset). */
void fc_ctx_release_all(fc_ctx_t *ctx);

/* A small number that names the calling thread for the life of the process
 * (thread ids are reused; these are not). */
uint64_t fc_thread_id(void);

/* pools.c */
fc_pool_t *fc_default_pool(int dev);
void fc_pool_give_back(fc_pool_t *pool, uint64_t bytes); /* a pool allocation was freed */
/* What a synchronize does to the pools of `dev`: each keeps at most its
 * release threshold of unused memory. */
void fc_pools_sync(int dev);
CUresult fc_stream_ctx(CUstream h, fc_ctx_t **out_ctx);
/* The stream a handle names (the legacy and per-thread default streams of
 * the current context included; a per-thread one is made on first use), with
 * fc_stream_ctx's errors, or CUDA_ERROR_OUT_OF_MEMORY. */
CUresult fc_stream_get(CUstream h, fc_stream_t **out_stream);
/* What NULL means to a _ptsz/_ptds entry: the per-thread default stream. */
static inline CUstream fc_ptsz(CUstream h) { return h ? h : CU_STREAM_PER_THREAD; }
void fc_streams_release(fc_ctx_t *ctx);

/* timeline.c */
uint64_t fc_now_ns(void); /* CLOCK_MONOTONIC */
/* Simulated nanoseconds per wave of a function named `name`. */
uint64_t fc_wave_ns(const char *name);
/* Blocks the device holds at once at `threads` threads a block (1 to 1024):
 * a wave, and the most a cooperative launch may have. */
uint64_t fc_wave_blocks(uint64_t threads);
/* Simulated nanoseconds of `blocks` blocks of `threads` threads of a
 * function taking `wave_ns` a wave (at most FC_WORK_NS_MAX). */
uint64_t fc_kernel_ns(uint64_t wave_ns, uint64_t blocks, uint64_t threads);
/* Where stream `s` stands on the timeline: when the work queued on it ends,
 * with the legacy stream's implicit synchronization (the legacy stream waits
 * for every blocking stream of its context, and they for it). */
uint64_t fc_stream_position(const fc_stream_t *s);
/* Queues `ns` of work on stream `s`: it starts when the device's engine is
 * free (now at the earliest); returns when it ends. */
uint64_t fc_timeline_run(fc_stream_t *s, uint64_t ns);
/* Sleeps until CLOCK_MONOTONIC `t_ns` with the lock released (called with
 * it held; returns with it held, everything read before possibly stale). */
void fc_sleep_until(uint64_t t_ns);

/* graphs.c */
void fc_graph_alloc_freed(fc_alloc_t *a); /* a live graph allocation was freed */

/* A kernel as a launch or a kernel node gives it. */
typedef struct {
  CUfunction func; /* as given: a CUfunction or a CUkernel handle */
  unsigned grid[3], block[3], shmem;
  bool cooperative;
  uint64_t ns; /* how long it runs (timeline.c) */
} fc_kparams_t;

struct fc_graph;
/* The graph's handle-free API for capture: nodes appended to `g` after the
 * nodes at indexes deps[0..ndeps) (each < g's node count). Each returns the
 * new node's index in *out_index. */
CUresult fc_graph_add_kernel(struct fc_graph *g, const size_t *deps, size_t ndeps, const fc_kparams_t *k,
                             size_t *out_index);
CUresult fc_graph_add_alloc(struct fc_graph *g, const size_t *deps, size_t ndeps, int dev, size_t bytes,
                            CUdeviceptr *out_dptr, size_t *out_index);
CUresult fc_graph_add_free(struct fc_graph *g, const size_t *deps, size_t ndeps, CUdeviceptr dptr, size_t *out_index);
/* A new, empty graph, a handle in the table. */
CUresult fc_graph_new(struct fc_graph **out_graph);
/* The graph a handle names, if any (embedded child graphs included). */
struct fc_graph *fc_graph_find(CUgraph h);
/* The number of nodes in `g`. */
size_t fc_graph_count(const struct fc_graph *g);
/* The index of node handle `h` in `g`, or SIZE_MAX if it is not one of its nodes. */
size_t fc_graph_node_index(const struct fc_graph *g, CUgraphNode h);
void fc_graph_ref(struct fc_graph *g);
void fc_graph_unref(struct fc_graph *g);
/* What cuGraphDestroy does: `g` and the graphs embedded in it leave the
 * handle table, and the graph's own reference goes. */
void fc_graph_discard(struct fc_graph *g);

/* capture.c */
/* Before work is queued on `s`: CUDA_SUCCESS with *out_capture the capture
 * the work joins (NULL: none, it runs), or the error: an invalidated capture
 * (CUDA_ERROR_STREAM_CAPTURE_INVALIDATED), the legacy stream while a
 * blocking stream of its context captures (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT,
 * which invalidates that capture). */
CUresult fc_capture_submit(fc_stream_t *s, struct fc_capture **out_capture);
/* A capture's id (never reused), and: if the capture of that id still
 * lasts, invalidates it and answers true. */
uint64_t fc_capture_id(const struct fc_capture *cap);
bool fc_capture_invalidate_id(uint64_t id);
/* Before a synchronize or query of `s`: CUDA_SUCCESS, or
 * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED for a capturing stream (which
 * invalidates its capture), or fc_capture_submit's errors. */
CUresult fc_capture_sync_check(fc_stream_t *s);
/* Marks what `s` captures as invalidated (an operation not allowed in it). */
void fc_capture_invalidate(fc_stream_t *s);
/* Ends and frees the capture of `s`, if any (its stream or context goes). */
void fc_capture_release(fc_stream_t *s);
/* Work joining capture `cap` (from fc_capture_submit): appended to its graph
 * as a node that depends on the node captured before it. An allocation of
 * 0 bytes gives the pointer 0 and adds nothing, as outside capture; a free
 * must name a graph allocation (CUDA_ERROR_INVALID_VALUE otherwise). */
CUresult fc_capture_kernel(struct fc_capture *cap, const fc_kparams_t *k);
CUresult fc_capture_alloc(struct fc_capture *cap, int dev, size_t bytes, CUdeviceptr *out_dptr);
CUresult fc_capture_free(struct fc_capture *cap, CUdeviceptr dptr);

/* modules.c */
void fc_modules_release(fc_ctx_t *ctx);
/* Checks a kernel's launch configuration and fills *out_k:
 * CUDA_ERROR_INVALID_HANDLE for a function the fake never gave out (NULL
 * too), CUDA_ERROR_INVALID_VALUE for a zero or too large dimension, too many
 * threads or too much shared memory (the H100's limits). */
CUresult fc_kernel_config(CUfunction f, const unsigned grid[3], const unsigned block[3], unsigned shmem,
                          fc_kparams_t *out_k);

/* events.c */
void fc_events_release(fc_ctx_t *ctx);

/* fake_cuda.c: a retain and a release of CUDA device `dev`'s primary
 * context, as cuDevicePrimaryCtxRetain and _Release do (green.c's green
 * contexts hold one). */
CUresult fc_primary_retain(CUcontext *pctx, CUdevice dev);
CUresult fc_primary_release(CUdevice dev);

/* arrays.c */
void fc_arrays_release(fc_ctx_t *ctx);

/* An entry the real libcuda exports that cuda.h does not declare (what
 * cuGetProcAddress gives for "cuGraphInstantiate" from CUDA 11.0 on). */
CUresult CUDAAPI cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                                       char *logBuffer, size_t bufferSize);

#endif
