/* cuda.c: the CUDA backend: the persistent kernel (kernel.cu, embedded as a
 * fatbinary) on the device's primary context, through the driver API
 * reached with dlopen (a machine without a driver still loads the library
 * and can use the CPU backend).
 *
 * The rings (descriptors and layouts) and the host's copy of the lanes'
 * done counters are pinned host memory mapped into the device; the blocks
 * also keep their done counters in device memory, where other blocks wait
 * on them without crossing PCIe. One block per lane, all resident at once
 * (lanes <= SMs x the blocks an SM holds): a block that waits for another
 * lane never waits for a block that cannot run.
 *
 * The kernel ends by itself once every block has been idle for its idle
 * time (tsr_rt_options_t.idle_us, default 200 us; kernel.cu says why: a
 * kernel that never ends would hang any cuMemFree of the context), or at
 * once when idle after tsr_rt_park. The host relaunches it when it finds it
 * ended with work pending: after a submit (the doorbell) and while
 * waiting. */
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "rt/internal.h"
#include "rt/jit.h"
#include "rt/prog.h"

extern const unsigned char tsr_rt_kernel_image[];
extern const size_t tsr_rt_kernel_image_bytes;
extern const unsigned char tsr_rt_kernel_rdc_image[];
extern const size_t tsr_rt_kernel_rdc_image_bytes;

typedef struct {
  void *lib;
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDeviceGet)(CUdevice *, int);
  CUresult (*cuDeviceGetAttribute)(int *, CUdevice_attribute, CUdevice);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice);
  CUresult (*cuCtxPushCurrent)(CUcontext);
  CUresult (*cuCtxPopCurrent)(CUcontext *);
  CUresult (*cuModuleLoadData)(CUmodule *, const void *);
  CUresult (*cuModuleUnload)(CUmodule);
  CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
  CUresult (*cuMemHostAlloc)(void **, size_t, unsigned);
  CUresult (*cuMemHostGetDevicePointer)(CUdeviceptr *, void *, unsigned);
  CUresult (*cuMemFreeHost)(void *);
  CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
  CUresult (*cuMemFree)(CUdeviceptr);
  CUresult (*cuMemsetD8)(CUdeviceptr, unsigned char, size_t);
  CUresult (*cuMemsetD32Async)(CUdeviceptr, unsigned, size_t, CUstream);
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void *, size_t);
  CUresult (*cuMemcpyDtoH)(void *, CUdeviceptr, size_t);
  CUresult (*cuStreamCreate)(CUstream *, unsigned);
  CUresult (*cuStreamQuery)(CUstream);
  CUresult (*cuStreamSynchronize)(CUstream);
  CUresult (*cuStreamDestroy)(CUstream);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                             void **, void **);
  CUresult (*cuOccupancyMaxActiveBlocksPerMultiprocessor)(int *, CUfunction, int, size_t);
  CUresult (*cuGetErrorString)(CUresult, const char **);
  CUresult (*cuDriverGetVersion)(int *);
} tsr__cu_t;

/* The kernel's parameters: kernel.cu declares the same struct. */
typedef struct {
  CUdeviceptr desc, layout, done_host, posted, done_dev, idle, ended, prof, progs;
  unsigned slots, lanes;
  unsigned long long idle_ns, launch;
} tsr__params_t;

typedef struct {
  tsr__cu_t cu;
  CUdevice dev;
  CUcontext ctx;
  bool ctx_held;
  bool compile_jit; /* TESSERA_RT_JIT=compile */
  CUmodule mod;
  CUfunction fn;
  CUstream stream;
  bool launched;
  uint64_t launches; /* kernels started: the first and every relaunch */
  tsr__params_t params;
  pthread_mutex_t mu; /* relaunches */
  /* JIT operators: interpreted (their programs in params.progs), or, with
   * TESSERA_RT_JIT=compile (compile_jit), generations of the kernel (jit_add) */
  tsr_rt_jit_t *jit;
  tsr_rt_cache_t *cache;
  char arch[16];
  int driver;
  int sms;
  int clock_khz;
  CUmodule *old; /* modules of earlier generations: unloaded once the stream
                        * is idle (tsr__check), or at stop */
  size_t nold, capold;
  uint32_t generation;
  void *host;              /* rings and host done counters, pinned and mapped */
  _Atomic uint64_t *ended; /* in host: the launch that last ended idle (kernel.cu) */
  CUdeviceptr done_dev;    /* the lanes' done counters for other blocks */
  char fault[200];
} tsr__cuda_t;

static const char *tsr__err(const tsr__cu_t *cu, CUresult r) {
  const char *s = NULL;
  if (cu->cuGetErrorString) cu->cuGetErrorString(r, &s);
  return s ? s : "unknown CUDA error";
}

#define TSR__CU(c, call, what)                                                                                  \
  do {                                                                                                          \
    CUresult r_ = (call);                                                                                       \
    if (r_ != CUDA_SUCCESS)                                                                                     \
      return tsr_status_make(TSR_UNAVAILABLE, "%s: %s (CUDA error %d)", what, tsr__err(&(c)->cu, r_), (int)r_); \
  } while (0)

TSR_MUST_USE static tsr_status_t tsr__load(tsr__cu_t *cu) {
  cu->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!cu->lib) return tsr_status_make(TSR_UNAVAILABLE, "no CUDA driver: %s", dlerror());
#define TSR__SYM(field, name)                                                                  \
  do {                                                                                         \
    *(void **)&cu->field = dlsym(cu->lib, name);                                               \
    if (!cu->field) return tsr_status_make(TSR_UNAVAILABLE, "the CUDA driver lacks %s", name); \
  } while (0)
  TSR__SYM(cuInit, "cuInit");
  TSR__SYM(cuDeviceGet, "cuDeviceGet");
  TSR__SYM(cuDeviceGetAttribute, "cuDeviceGetAttribute");
  TSR__SYM(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
  TSR__SYM(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
  TSR__SYM(cuCtxPushCurrent, "cuCtxPushCurrent_v2");
  TSR__SYM(cuCtxPopCurrent, "cuCtxPopCurrent_v2");
  TSR__SYM(cuModuleLoadData, "cuModuleLoadData");
  TSR__SYM(cuModuleUnload, "cuModuleUnload");
  TSR__SYM(cuModuleGetFunction, "cuModuleGetFunction");
  TSR__SYM(cuMemHostAlloc, "cuMemHostAlloc");
  TSR__SYM(cuMemHostGetDevicePointer, "cuMemHostGetDevicePointer_v2");
  TSR__SYM(cuMemFreeHost, "cuMemFreeHost");
  TSR__SYM(cuMemAlloc, "cuMemAlloc_v2");
  TSR__SYM(cuMemFree, "cuMemFree_v2");
  TSR__SYM(cuMemsetD8, "cuMemsetD8_v2");
  TSR__SYM(cuMemsetD32Async, "cuMemsetD32Async");
  TSR__SYM(cuMemcpyHtoD, "cuMemcpyHtoD_v2");
  TSR__SYM(cuMemcpyDtoH, "cuMemcpyDtoH_v2");
  TSR__SYM(cuStreamCreate, "cuStreamCreate");
  TSR__SYM(cuStreamQuery, "cuStreamQuery");
  TSR__SYM(cuStreamSynchronize, "cuStreamSynchronize");
  TSR__SYM(cuStreamDestroy, "cuStreamDestroy_v2");
  TSR__SYM(cuLaunchKernel, "cuLaunchKernel");
  TSR__SYM(cuOccupancyMaxActiveBlocksPerMultiprocessor, "cuOccupancyMaxActiveBlocksPerMultiprocessor");
  TSR__SYM(cuGetErrorString, "cuGetErrorString");
  TSR__SYM(cuDriverGetVersion, "cuDriverGetVersion");
#undef TSR__SYM
  return NULL;
}

TSR_MUST_USE static tsr_status_t tsr__cuda_stop(tsr_rt_t *rt);

TSR_MUST_USE static tsr_status_t tsr__cuda_start_in(tsr_rt_t *rt, tsr__cuda_t *c) {
  const char *how = getenv("TESSERA_RT_JIT");
  if (how && *how && strcmp(how, "interpret") != 0 && strcmp(how, "compile") != 0)
    return tsr_status_make(TSR_INVALID_ARGUMENT, "TESSERA_RT_JIT='%.40s': 'interpret' (the default) or 'compile'", how);
  c->compile_jit = how && strcmp(how, "compile") == 0;
  TSR_RETURN_IF_ERROR(tsr__load(&c->cu));
  TSR__CU(c, c->cu.cuInit(0), "cuInit");
  TSR__CU(c, c->cu.cuDeviceGet(&c->dev, (int)rt->opt.device), "the device");
  TSR__CU(c, c->cu.cuDevicePrimaryCtxRetain(&c->ctx, c->dev), "the device's primary context");
  c->ctx_held = true;
  TSR__CU(c, c->cu.cuCtxPushCurrent(c->ctx), "make the context current");
  tsr_status_t st = NULL;
  CUcontext popped;
  int sms = 0, per_sm = 0;
  CUfunction fn = NULL;
  do {
    CUresult r = c->cu.cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, c->dev);
    if (r == CUDA_SUCCESS) r = c->cu.cuModuleLoadData(&c->mod, tsr_rt_kernel_image);
    if (r == CUDA_SUCCESS) r = c->cu.cuModuleGetFunction(&fn, c->mod, "tsr_rt_persistent");
    if (r == CUDA_SUCCESS) r = c->cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, (int)rt->opt.threads, 0);
    if (r != CUDA_SUCCESS) {
      st = tsr_status_make(TSR_UNAVAILABLE, "load the persistent kernel: %s", tsr__err(&c->cu, r));
      break;
    }
    c->sms = sms;
    int major = 0, minor = 0;
    c->cu.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, c->dev);
    c->cu.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, c->dev);
    snprintf(c->arch, sizeof(c->arch), "sm_%d%d", major, minor);
    c->cu.cuDriverGetVersion(&c->driver);
    uint32_t most = (uint32_t)(sms * per_sm);
    if (!rt->opt.lanes) rt->opt.lanes = (uint32_t)sms;
    if (rt->opt.lanes > most) {
      st = tsr_status_make(TSR_INVALID_ARGUMENT,
                           "%u lanes: the device holds at most %u resident blocks of %u threads (%d SMs x %d)",
                           rt->opt.lanes, most, rt->opt.threads, sms, per_sm);
      break;
    }
    uint32_t lanes = rt->opt.lanes;
    size_t nd = (size_t)lanes * rt->opt.lane_slots;
    size_t done_bytes = (size_t)lanes * TSR_RT_DONE_STRIDE * sizeof(uint64_t);
    size_t bytes = nd * sizeof(tsr_rt_desc_t) + nd * sizeof(tsr_rt_layout_t) + 2 * done_bytes + 64;
    r = c->cu.cuMemHostAlloc(&c->host, bytes, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE);
    if (r != CUDA_SUCCESS) {
      c->host = NULL;
      st = tsr_status_make(TSR_RESOURCE_EXHAUSTED, "pinned memory for the rings (%zu bytes): %s", bytes,
                           tsr__err(&c->cu, r));
      break;
    }
    memset(c->host, 0, bytes);
    rt->desc = c->host;
    rt->layout = (tsr_rt_layout_t *)(rt->desc + nd);
    rt->done = (_Atomic uint64_t *)(rt->layout + nd);
    rt->posted = (_Atomic uint64_t *)((char *)rt->done + done_bytes);
    c->ended = (_Atomic uint64_t *)((char *)rt->posted + done_bytes);
    tsr__params_t p = {.slots = rt->opt.lane_slots, .lanes = lanes};
    const char *what = "cuMemHostGetDevicePointer";
    r = c->cu.cuMemHostGetDevicePointer(&p.desc, rt->desc, 0);
    if (r == CUDA_SUCCESS) r = c->cu.cuMemHostGetDevicePointer(&p.layout, rt->layout, 0);
    if (r == CUDA_SUCCESS) r = c->cu.cuMemHostGetDevicePointer(&p.done_host, (void *)rt->done, 0);
    if (r == CUDA_SUCCESS) r = c->cu.cuMemHostGetDevicePointer(&p.posted, (void *)rt->posted, 0);
    if (r == CUDA_SUCCESS) r = c->cu.cuMemHostGetDevicePointer(&p.ended, (void *)c->ended, 0);
    /* the lanes' done counters, then the idle count, in one allocation */
    /* the lanes' done counters, the idle count, the lanes' counters for
     * tsr_rt_stats, in one allocation */
    size_t progs_at = done_bytes + 64 + (size_t)lanes * 64; /* a multiple of 64 */
    size_t dev_bytes = progs_at + (size_t)TSR_RT_JIT_OPS * TSR_RT_PROG_MAX * sizeof(tsr_rt_insn_t);
    if (r == CUDA_SUCCESS) what = "cuMemAlloc", r = c->cu.cuMemAlloc(&c->done_dev, dev_bytes);
    if (r == CUDA_SUCCESS) what = "cuMemsetD8", r = c->cu.cuMemsetD8(c->done_dev, 0, dev_bytes);
    if (r == CUDA_SUCCESS) what = "cuStreamCreate", r = c->cu.cuStreamCreate(&c->stream, CU_STREAM_NON_BLOCKING);
    p.done_dev = c->done_dev;
    p.idle = c->done_dev + done_bytes;
    p.prof = c->done_dev + done_bytes + 64;
    p.progs = c->done_dev + progs_at;
    c->cu.cuDeviceGetAttribute(&c->clock_khz, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, c->dev);
    p.idle_ns = (unsigned long long)rt->opt.idle_us * 1000u;
    c->params = p;
    c->fn = fn;
    if (r != CUDA_SUCCESS) {
      st = tsr_status_make(TSR_UNAVAILABLE, "start the persistent kernel: %s: %s", what, tsr__err(&c->cu, r));
      break;
    }
  } while (0);
  c->cu.cuCtxPopCurrent(&popped);
  return st;
}

/* Sets or clears the park bit in every lane's posted word (rt/desc.h). */
static void tsr__park_bits(tsr_rt_t *rt, bool on) {
  for (uint32_t lane = 0; lane < rt->opt.lanes; lane++) {
    _Atomic uint64_t *w = &rt->posted[(size_t)lane * TSR_RT_DONE_STRIDE];
    uint64_t v = atomic_load_explicit(w, memory_order_relaxed);
    if (((v & TSR_RT_POSTED_PARK) != 0) != on)
      atomic_store_explicit(w, on ? v | TSR_RT_POSTED_PARK : v & ~TSR_RT_POSTED_PARK, memory_order_release);
  }
}

/* Starts the kernel (the caller holds mu and has the context current).
 * A park was for the launch before: its bits go. */
static CUresult tsr__launch(tsr_rt_t *rt, tsr__cuda_t *c) {
  tsr__park_bits(rt, false);
  CUresult r = c->cu.cuMemsetD32Async(c->params.idle, 0, 1, c->stream);
  c->params.launch = c->launches + 1;
  void *args[] = {&c->params};
  if (r == CUDA_SUCCESS)
    r = c->cu.cuLaunchKernel(c->fn, rt->opt.lanes, 1, 1, rt->opt.threads, 1, 1, 0, c->stream, args, NULL);
  if (r == CUDA_SUCCESS) {
    c->launched = true;
    c->launches++;
  }
  return r;
}

/* Whether a lane has tasks its consumer has not done. */
static bool tsr__pending(const tsr_rt_t *rt) {
  for (uint32_t lane = 0; lane < rt->opt.lanes; lane++)
    if (rt->tail && tsr__rt_done(rt, lane) < rt->tail[lane]) return true;
  return false;
}

/* The kernel's state: NULL while it runs or rests with nothing pending
 * (relaunched when it ended with work pending); else why it failed.
 * `committed`: the caller saw the kernel say it ended (kernel.cu writes
 * `ended` only once the whole grid is committed to end); then, with no
 * earlier generation's modules to unload, the driver is not asked whether
 * it has finished: the next launch goes on the stream behind it. */
static const char *tsr__check(tsr_rt_t *rt, bool committed) {
  tsr__cuda_t *c = rt->be_state;
  if (!c || !c->fn) return NULL;
  const char *why = NULL;
  pthread_mutex_lock(&c->mu);
  committed = committed && !c->nold && atomic_load_explicit(c->ended, memory_order_acquire) == c->launches;
  CUresult r = c->launched && !committed ? c->cu.cuStreamQuery(c->stream) : CUDA_SUCCESS;
  bool pending = r == CUDA_SUCCESS && tsr__pending(rt);
  if (r == CUDA_SUCCESS && (pending || c->nold) && c->cu.cuCtxPushCurrent(c->ctx) == CUDA_SUCCESS) {
    /* every kernel launched so far has ended: earlier generations' modules
     * run nowhere any more, and only the current one is launched again */
    for (size_t i = 0; i < c->nold; i++) c->cu.cuModuleUnload(c->old[i]);
    c->nold = 0;
    if (pending) r = tsr__launch(rt, c);
    CUcontext popped;
    c->cu.cuCtxPopCurrent(&popped);
  }
  if (r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_READY) {
    snprintf(c->fault, sizeof(c->fault), "the persistent kernel failed: %s (CUDA error %d)", tsr__err(&c->cu, r),
             (int)r);
    why = c->fault;
    if (!atomic_load(&rt->failed)) { /* sticky for the runtime, as tsr__fault makes it */
      snprintf(rt->fault, sizeof(rt->fault), "%s", why);
      atomic_store(&rt->failed, 1);
    }
  }
  pthread_mutex_unlock(&c->mu);
  return why;
}

TSR_MUST_USE static tsr_status_t tsr__cuda_start(tsr_rt_t *rt) {
  tsr__cuda_t *c = calloc(1, sizeof(*c));
  if (!c) return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  pthread_mutex_init(&c->mu, NULL);
  rt->be_state = c;
  tsr_status_t st = tsr__cuda_start_in(rt, c);
  if (st) {
    rt->desc = NULL; /* nothing to stop: no STOP descriptors */
    tsr_status_free(tsr__cuda_stop(rt));
  }
  return st;
}

/* The blocks poll their rings; the doorbell only restarts a kernel that
 * ended idle or parked. While the kernel runs it costs one load; once the
 * kernel has said it ended, the relaunch goes behind it on the stream
 * (tsr__check, committed). A fault is found by the waits. */
static void tsr__cuda_doorbell(tsr_rt_t *rt) {
  tsr__cuda_t *c = rt->be_state;
  if (c && c->launched && !c->nold && atomic_load_explicit(c->ended, memory_order_acquire) != c->launches) return;
  (void)tsr__check(rt, true);
}

/* tsr_rt_park: the park bit in every lane's posted word (rt/desc.h), which
 * the running launch's idle blocks read; nothing when it has ended
 * already, or was parked. */
static void tsr__cuda_park(tsr_rt_t *rt) {
  tsr__cuda_t *c = rt->be_state;
  if (!c || !c->launched) return;
  pthread_mutex_lock(&c->mu);
  if (atomic_load_explicit(c->ended, memory_order_acquire) != c->launches) tsr__park_bits(rt, true);
  pthread_mutex_unlock(&c->mu);
}

TSR_MUST_USE static tsr_status_t tsr__cuda_stop(tsr_rt_t *rt) {
  tsr__cuda_t *c = rt->be_state;
  if (!c) return NULL;
  tsr_status_t st = NULL;
  if (c->ctx_held && c->cu.cuCtxPushCurrent(c->ctx) == CUDA_SUCCESS) {
    if (c->launched) {
      CUresult r = c->cu.cuStreamSynchronize(c->stream);
      if (r != CUDA_SUCCESS)
        st = tsr_status_make(TSR_UNAVAILABLE, "the persistent kernel failed: %s", tsr__err(&c->cu, r));
    }
    if (c->stream) c->cu.cuStreamDestroy(c->stream);
    if (c->done_dev) c->cu.cuMemFree(c->done_dev);
    if (c->host) c->cu.cuMemFreeHost(c->host);
    if (c->mod) c->cu.cuModuleUnload(c->mod);
    for (size_t i = 0; i < c->nold; i++)
      if (c->old[i]) c->cu.cuModuleUnload(c->old[i]);
    CUcontext popped;
    c->cu.cuCtxPopCurrent(&popped);
  }
  if (c->ctx_held) c->cu.cuDevicePrimaryCtxRelease(c->dev);
  if (c->cu.lib) dlclose(c->cu.lib);
  free(c->old);
  tsr_rt_jit_close(c->jit);
  tsr_rt_cache_close(c->cache);
  pthread_mutex_destroy(&c->mu);
  free(c);
  rt->be_state = NULL;
  return st;
}

static const char *tsr__cuda_fault(tsr_rt_t *rt) { return tsr__check(rt, false); }

TSR_MUST_USE static tsr_status_t tsr__cuda_alloc(tsr_rt_t *rt, size_t bytes, void **out) {
  tsr__cuda_t *c = rt->be_state;
  TSR__CU(c, c->cu.cuCtxPushCurrent(c->ctx), "make the context current");
  CUdeviceptr p = 0;
  CUresult r = c->cu.cuMemAlloc(&p, bytes);
  CUcontext popped;
  c->cu.cuCtxPopCurrent(&popped);
  if (r != CUDA_SUCCESS)
    return tsr_status_make(TSR_RESOURCE_EXHAUSTED, "cuMemAlloc of %zu bytes: %s", bytes, tsr__err(&c->cu, r));
  *out = (void *)(uintptr_t)p;
  return NULL;
}

static void tsr__cuda_free(tsr_rt_t *rt, void *p) {
  tsr__cuda_t *c = rt->be_state;
  if (c->cu.cuCtxPushCurrent(c->ctx) != CUDA_SUCCESS) return;
  c->cu.cuMemFree((CUdeviceptr)(uintptr_t)p);
  CUcontext popped;
  c->cu.cuCtxPopCurrent(&popped);
}

/* A new generation of the kernel with every live JIT operator: compiled by
 * NVRTC (or found in the compiled-operator cache), loaded, then switched to
 * at a marker in every lane: the tasks before it run on the old
 * generation, the ones after on the new, which the stream starts only when
 * the old has ended (docs/runtime.md). */
TSR_MUST_USE static tsr_status_t tsr__cuda_jit_add(tsr_rt_t *rt, uint32_t slot) {
  tsr__cuda_t *c = rt->be_state;
  if (!c->compile_jit) {
    /* interpreted: the program into the slot's place in device memory,
     * before any task names the slot (a copy that completes before it
     * returns, on the legacy stream: the kernel runs on a non-blocking one) */
    tsr_rt_insn_t prog[TSR_RT_PROG_MAX];
    size_t n = 0;
    TSR_RETURN_IF_ERROR(tsr_rt_prog_build(rt->slots[slot].expr, prog, TSR_RT_PROG_MAX, &n));
    TSR__CU(c, c->cu.cuCtxPushCurrent(c->ctx), "make the context current");
    CUresult r = c->cu.cuMemcpyHtoD(c->params.progs + (CUdeviceptr)slot * TSR_RT_PROG_MAX * sizeof(tsr_rt_insn_t), prog,
                                    n * sizeof(tsr_rt_insn_t));
    CUcontext popped;
    c->cu.cuCtxPopCurrent(&popped);
    if (r != CUDA_SUCCESS)
      return tsr_status_make(TSR_UNAVAILABLE, "copy a JIT operator's program: %s", tsr__err(&c->cu, r));
    return NULL;
  }
  if (!c->jit) {
    tsr_status_t cs = tsr_rt_cache_open(NULL, &c->cache);
    if (cs) {
      tsr_log_warn("compiled-operator cache off: %s", tsr_status_message(cs));
      tsr_status_free(cs);
      c->cache = NULL;
    }
    TSR_RETURN_IF_ERROR(tsr_rt_jit_open(c->cache, &c->jit));
    tsr_rt_jit_set_prebuilt(c->jit, tsr_rt_kernel_rdc_image, tsr_rt_kernel_rdc_image_bytes);
  }
  const tsr_rt_expr_t *exprs[TSR_RT_JIT_OPS];
  uint32_t slots[TSR_RT_JIT_OPS];
  size_t n = 0;
  for (uint32_t s = 0; s < TSR_RT_JIT_OPS; s++)
    if (rt->slots[s].expr) exprs[n] = rt->slots[s].expr, slots[n++] = s;
  char *ops = NULL;
  TSR_RETURN_IF_ERROR(tsr_rt_jit_ops_header(exprs, slots, n, &ops));
  tsr_rt_jit_image_t img;
  tsr_status_t st = tsr_rt_jit_compile_kernel(c->jit, ops, c->arch, c->driver, &img);
  if (st) {
    free(ops);
    return st;
  }
  CUmodule mod = NULL;
  CUfunction fn = NULL;
  int per_sm = 0;
  if (c->cu.cuCtxPushCurrent(c->ctx) != CUDA_SUCCESS) {
    free(ops);
    tsr_rt_jit_image_free(&img);
    return tsr_status_make(TSR_UNAVAILABLE, "make the context current");
  }
  CUresult r = c->cu.cuModuleLoadData(&mod, img.image);
  if (r != CUDA_SUCCESS && img.prebuilt) {
    /* the library's own kernel did not load here: the kernel compiled for
     * this device instead, from now on */
    tsr_log_warn("a generation linked from the library's kernel did not load (%s): compiling the kernel for %s",
                 tsr__err(&c->cu, r), c->arch);
    tsr_rt_jit_image_free(&img);
    tsr_rt_jit_set_prebuilt(c->jit, NULL, 0);
    st = tsr_rt_jit_compile_kernel(c->jit, ops, c->arch, c->driver, &img);
    r = st ? CUDA_ERROR_INVALID_IMAGE : c->cu.cuModuleLoadData(&mod, img.image);
  }
  free(ops);
  tsr_rt_jit_image_free(&img);
  if (st) {
    CUcontext popped;
    c->cu.cuCtxPopCurrent(&popped);
    return st;
  }
  if (r == CUDA_SUCCESS) r = c->cu.cuModuleGetFunction(&fn, mod, "tsr_rt_persistent");
  if (r == CUDA_SUCCESS) r = c->cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, (int)rt->opt.threads, 0);
  if (r == CUDA_SUCCESS && (uint32_t)(per_sm * c->sms) < rt->opt.lanes)
    st = tsr_status_make(TSR_RESOURCE_EXHAUSTED, "the new generation holds %d blocks an SM, %u lanes need %u", per_sm,
                         rt->opt.lanes, (rt->opt.lanes + (uint32_t)c->sms - 1) / (uint32_t)c->sms);
  else if (r != CUDA_SUCCESS)
    st = tsr_status_make(TSR_UNAVAILABLE, "load the new generation: %s", tsr__err(&c->cu, r));
  CUmodule *grown = st ? NULL : realloc(c->old, (c->nold + 1) * sizeof(*c->old));
  if (!st && !grown) st = tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  if (st) {
    if (mod) c->cu.cuModuleUnload(mod);
    CUcontext popped;
    c->cu.cuCtxPopCurrent(&popped);
    return st;
  }
  c->old = grown;
  /* the switch: a marker in every lane (outside mu: waiting for room may
   * relaunch the old generation, which then ends at the markers), then the
   * new kernel on the stream, which starts when the old one has ended */
  st = tsr_rt_publish_marker(rt, TSR_RT_DESC_SWITCH);
  pthread_mutex_lock(&c->mu);
  if (!st) {
    c->old[c->nold++] = c->mod;
    c->mod = mod;
    c->fn = fn;
    c->generation++;
    if (c->launched) {
      r = tsr__launch(rt, c);
      if (r != CUDA_SUCCESS) st = tsr_status_make(TSR_UNAVAILABLE, "start the new generation: %s", tsr__err(&c->cu, r));
    }
  } else {
    c->cu.cuModuleUnload(mod);
  }
  pthread_mutex_unlock(&c->mu);
  CUcontext popped;
  c->cu.cuCtxPopCurrent(&popped);
  return st;
}

TSR_MUST_USE static tsr_status_t tsr__cuda_copy(tsr_rt_t *rt, void *dst, const void *src, size_t bytes,
                                                bool to_device) {
  tsr__cuda_t *c = rt->be_state;
  TSR__CU(c, c->cu.cuCtxPushCurrent(c->ctx), "make the context current");
  CUresult r = to_device ? c->cu.cuMemcpyHtoD((CUdeviceptr)(uintptr_t)dst, src, bytes)
                         : c->cu.cuMemcpyDtoH(dst, (CUdeviceptr)(uintptr_t)src, bytes);
  CUcontext popped;
  c->cu.cuCtxPopCurrent(&popped);
  if (r != CUDA_SUCCESS) return tsr_status_make(TSR_UNAVAILABLE, "copy of %zu bytes: %s", bytes, tsr__err(&c->cu, r));
  return NULL;
}

static void tsr__cuda_device_stats(tsr_rt_t *rt, tsr_rt_stats_t *out) {
  tsr__cuda_t *c = rt->be_state;
  size_t bytes = (size_t)rt->opt.lanes * 64;
  uint64_t *pr = malloc(bytes);
  if (!pr || c->cu.cuCtxPushCurrent(c->ctx) != CUDA_SUCCESS) {
    free(pr);
    return;
  }
  /* a copy on the legacy stream: the kernel runs on a non-blocking one */
  CUresult r = c->cu.cuMemcpyDtoH(pr, c->params.prof, bytes);
  CUcontext popped;
  c->cu.cuCtxPopCurrent(&popped);
  if (r == CUDA_SUCCESS)
    for (uint32_t lane = 0; lane < rt->opt.lanes; lane++) {
      const uint64_t *l = pr + (size_t)lane * 8;
      out->device_batches += l[0];
      out->device_tasks += l[1];
      out->device_fetch_cycles += l[2];
      out->device_run_cycles += l[3];
      out->device_wait_cycles += l[4];
      out->device_publish_cycles += l[5];
    }
  out->device_clock_khz = (uint32_t)c->clock_khz;
  out->device_launches = c->launches;
  free(pr);
}

const tsr__rt_backend_ops_t tsr_rt_cuda = {
    .name = "cuda",
    .start = tsr__cuda_start,
    .doorbell = tsr__cuda_doorbell,
    .park = tsr__cuda_park,
    .stop = tsr__cuda_stop,
    .fault = tsr__cuda_fault,
    .alloc = tsr__cuda_alloc,
    .free = tsr__cuda_free,
    .copy = tsr__cuda_copy,
    .jit_add = tsr__cuda_jit_add,
    .device_stats = tsr__cuda_device_stats,
};
