/* probe_driver: asks a CUDA driver (the real libcuda.so.1 or the fake) the
 * questions the fake must answer as the real one does, and prints one
 * "section.key = value" line per answer.
 *
 *   probe_driver list        the sections, one a line
 *   probe_driver SECTION     one section (run each in its own process: some
 *                            sections end the process's CUDA state)
 *
 * Lines whose key starts with "info." are facts of one machine (names,
 * totals, measured footprints); the others are return codes and values the
 * fake reproduces exactly. tests/fakes/cuda/real_h100.txt holds the output
 * of the real driver (H100, driver 580.159.04, CUDA 13.0), and
 * unit.fakecuda_conformance checks the fake's non-info lines against it.
 * Built against cuda.h, so every call goes through the same ABI names
 * (cuMemAlloc -> cuMemAlloc_v2, ...) that a program compiled with CUDA 13
 * uses. */
#include <cuda.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *sec;

#define OUT(key, fmt, ...) printf("%s." key " = " fmt "\n", sec, __VA_ARGS__)
#define RC(key, call) OUT(key, "%d", (int)(call))

static const char ptx[] =
    ".version 7.0\n"
    ".target sm_52\n"
    ".address_size 64\n"
    ".visible .global .align 4 .b8 probe_static[67108864];\n"
    ".visible .entry probe_kernel()\n"
    "{\n"
    "  .reg .b64 %rd<2>;\n"
    "  mov.u64 %rd1, probe_static;\n"
    "  ret;\n"
    "}\n";

/* A kernel that runs 20 ms on one thread: it spins on the global timer on
 * a GPU; the fake takes its name's word for it (timeline.c). */
static const char spin_ptx[] =
    ".version 7.0\n"
    ".target sm_52\n"
    ".address_size 64\n"
    ".visible .entry probe_spin_20000us()\n"
    "{\n"
    "  .reg .u64 %rd<4>;\n"
    "  .reg .pred %p<2>;\n"
    "  mov.u64 %rd1, %globaltimer;\n"
    "spin:\n"
    "  mov.u64 %rd2, %globaltimer;\n"
    "  sub.u64 %rd3, %rd2, %rd1;\n"
    "  setp.lt.u64 %p1, %rd3, 20000000;\n"
    "  @%p1 bra spin;\n"
    "  ret;\n"
    "}\n";

static double wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* A function of `image` named `name` (NULL if the driver refused). */
static CUfunction function_of(const char *image, const char *name) {
  CUmodule m;
  CUfunction f = NULL;
  if (cuModuleLoadData(&m, image) == CUDA_SUCCESS) cuModuleGetFunction(&f, m, name);
  return f;
}

static long long free_now(void) {
  size_t f = 0, t = 0;
  if (cuMemGetInfo(&f, &t) != CUDA_SUCCESS) return -1;
  return (long long)f;
}
#define MIB(x) ((long long)(x) / (1024 * 1024))
/* free memory taken by what happened since `before`, in MiB */
#define DELTA(key, before) OUT("info." key "_mib", "%lld", MIB((before)-free_now()))

static CUcontext primary(void) {
  CUcontext c = NULL;
  cuInit(0);
  cuDevicePrimaryCtxRetain(&c, 0);
  cuCtxSetCurrent(c);
  return c;
}

/* ---- sections ------------------------------------------------------------ */

static void s_preinit(void) {
  int v = -1, n = -1;
  RC("driver_version", cuDriverGetVersion(&v));
  OUT("driver_version_value", "%d", v);
  RC("driver_version_null", cuDriverGetVersion(NULL));
  RC("device_count", cuDeviceGetCount(&n));
  CUdevice d;
  RC("device_get", cuDeviceGet(&d, 0));
  CUdeviceptr p;
  RC("mem_alloc", cuMemAlloc(&p, 1024));
  CUcontext c = (CUcontext)1;
  RC("ctx_get_current", cuCtxGetCurrent(&c));
  RC("primary_retain", cuDevicePrimaryCtxRetain(&c, 0));
  const char *s = NULL;
  RC("error_string", cuGetErrorString(CUDA_ERROR_OUT_OF_MEMORY, &s));
  RC("error_name", cuGetErrorName(CUDA_ERROR_OUT_OF_MEMORY, &s));
  void *fn = NULL;
  CUdriverProcAddressQueryResult st = 99;
  RC("procaddr", cuGetProcAddress("cuMemAlloc", &fn, 13000, 0, &st));
  OUT("procaddr_status", "%d", (int)st);
  OUT("procaddr_found", "%d", fn != NULL);
  size_t f, t;
  RC("mem_get_info", cuMemGetInfo(&f, &t));
  CUgraph g;
  RC("graph_create", cuGraphCreate(&g, 0));
}

static void s_initflags(void) {
  RC("init_1", cuInit(1));
  RC("init_0", cuInit(0));
  RC("init_again", cuInit(0));
}

static void s_device(void) {
  cuInit(0);
  int n = -1;
  RC("count", cuDeviceGetCount(&n));
  OUT("info.count_value", "%d", n);
  RC("count_null", cuDeviceGetCount(NULL));
  CUdevice d = -5;
  RC("get", cuDeviceGet(&d, 0));
  OUT("get_value", "%d", d);
  RC("get_bad", cuDeviceGet(&d, 64));
  RC("get_neg", cuDeviceGet(&d, -1));
  RC("get_null", cuDeviceGet(NULL, 0));
  char name[256];
  RC("name", cuDeviceGetName(name, sizeof name, 0));
  OUT("info.name_value", "%s", name);
  RC("name_bad", cuDeviceGetName(name, sizeof name, 64));
  RC("name_null", cuDeviceGetName(NULL, sizeof name, 0));
  memset(name, 'x', sizeof name);
  RC("name_len4", cuDeviceGetName(name, 4, 0));
  OUT("name_len4_strlen", "%d", (int)strnlen(name, 8));
  CUuuid u;
  RC("uuid", cuDeviceGetUuid(&u, 0));
  RC("uuid_bad", cuDeviceGetUuid(&u, 64));
  RC("uuid_null", cuDeviceGetUuid(NULL, 0));
  CUresult (*uuid_v1)(CUuuid *, CUdevice) = (CUresult(*)(CUuuid *, CUdevice))dlsym(RTLD_DEFAULT, "cuDeviceGetUuid");
  if (uuid_v1) {
    CUuuid u1;
    RC("uuid_v1", uuid_v1(&u1, 0));
    OUT("uuid_v1_same", "%d", memcmp(&u1, &u, sizeof u) == 0);
  }
  size_t b = 0;
  RC("total_mem", cuDeviceTotalMem(&b, 0));
  OUT("info.total_mem_value", "%zu", b);
  RC("total_mem_bad", cuDeviceTotalMem(&b, 64));
  RC("total_mem_null", cuDeviceTotalMem(NULL, 0));
  char bus[64];
  RC("pci_bus_id", cuDeviceGetPCIBusId(bus, sizeof bus, 0));
  OUT("info.pci_bus_id_value", "%s", bus);
  OUT("pci_bus_id_strlen", "%d", (int)strlen(bus));
  memset(bus, 'x', sizeof bus);
  RC("pci_bus_id_len5", cuDeviceGetPCIBusId(bus, 5, 0));
  OUT("pci_bus_id_len5_strlen", "%d", (int)strnlen(bus, 8));
  RC("pci_bus_id_null", cuDeviceGetPCIBusId(NULL, 13, 0));
  RC("pci_bus_id_bad", cuDeviceGetPCIBusId(bus, sizeof bus, 64));
  int v;
  RC("attr_null", cuDeviceGetAttribute(NULL, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 0));
  RC("attr_bad_dev", cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 64));
  RC("attr_0", cuDeviceGetAttribute(&v, (CUdevice_attribute)0, 0));
  RC("attr_max", cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX, 0));
  RC("attr_9999", cuDeviceGetAttribute(&v, (CUdevice_attribute)9999, 0));
  for (int a = 1; a < CU_DEVICE_ATTRIBUTE_MAX; a++) {
    v = -12345;
    CUresult rc = cuDeviceGetAttribute(&v, (CUdevice_attribute)a, 0);
    printf("%s.attr.%d = %d\n", sec, a, (int)rc);
    printf("%s.info.attr.%d.value = %d\n", sec, a, v);
  }
  /* the real driver crashes on a zero-length name buffer: last */
  RC("pci_bus_id_len0", cuDeviceGetPCIBusId(bus, 0, 0));
}

static int n_dummy;
static void s_ctx(void) {
  cuInit(0);
  CUcontext c = (CUcontext)1, c2 = NULL, cur = NULL;
  RC("get_current", cuCtxGetCurrent(&c));
  OUT("get_current_null", "%d", c == NULL);
  RC("get_current_nullarg", cuCtxGetCurrent(NULL));
  CUdevice d;
  RC("nocur.get_device", cuCtxGetDevice(&d));
  RC("nocur.synchronize", cuCtxSynchronize());
  size_t f, t;
  RC("nocur.mem_get_info", cuMemGetInfo(&f, &t));
  CUdeviceptr p;
  RC("nocur.mem_alloc", cuMemAlloc(&p, 1024));
  RC("nocur.mem_alloc_managed", cuMemAllocManaged(&p, 1024, CU_MEM_ATTACH_GLOBAL));
  void *h;
  RC("nocur.mem_alloc_host", cuMemAllocHost(&h, 1024));
  RC("nocur.mem_free", cuMemFree(0x1000));
  RC("nocur.pop", cuCtxPopCurrent(&c2));
  size_t lim;
  RC("nocur.get_limit", cuCtxGetLimit(&lim, CU_LIMIT_STACK_SIZE));
  RC("nocur.set_limit", cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 2048));
  CUstream s;
  RC("nocur.stream_create", cuStreamCreate(&s, 0));
  RC("nocur.stream_sync_null", cuStreamSynchronize(NULL));
  CUmodule m;
  RC("nocur.module_load", cuModuleLoadData(&m, ptx));
  RC("nocur.mem_alloc_async", cuMemAllocAsync(&p, 1024, NULL));
  CUmemoryPool pool;
  RC("nocur.default_pool", cuDeviceGetDefaultMemPool(&pool, 0));
  CUmemPoolProps pp;
  memset(&pp, 0, sizeof pp);
  pp.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  pp.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  pp.location.id = 0;
  RC("nocur.pool_create", cuMemPoolCreate(&pool, &pp));
  CUmemAllocationProp ap;
  memset(&ap, 0, sizeof ap);
  ap.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  ap.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  ap.location.id = 0;
  size_t gran = 0;
  RC("nocur.granularity", cuMemGetAllocationGranularity(&gran, &ap, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  CUmemGenericAllocationHandle mh;
  RC("nocur.mem_create", cuMemCreate(&mh, 2 << 20, &ap, 0));
  CUarray arr;
  CUDA_ARRAY_DESCRIPTOR ad = {64, 64, CU_AD_FORMAT_FLOAT, 1};
  RC("nocur.array_create", cuArrayCreate(&arr, &ad));
  CUgraph g;
  RC("nocur.graph_create", cuGraphCreate(&g, 0));
  {
    CUresult (*gd2)(CUdevice *, CUcontext) =
        (CUresult(*)(CUdevice *, CUcontext))dlsym(RTLD_DEFAULT, "cuCtxGetDevice_v2");
    CUresult (*sy2)(CUcontext) = (CUresult(*)(CUcontext))dlsym(RTLD_DEFAULT, "cuCtxSynchronize_v2");
    if (gd2) RC("nocur.get_device_v2_nullctx", gd2(&d, NULL));
    if (sy2) RC("nocur.synchronize_v2_nullctx", sy2(NULL));
  }
  RC("nocur.memcpy_htod", cuMemcpyHtoD((CUdeviceptr)0x1234000, &n_dummy, 4));
  RC("nocur.launch", cuLaunchKernel(NULL, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
  RC("nocur.mem_pool_trim", cuMemPoolTrimTo(pool, 0));

  /* the primary context */
  unsigned flags = 99;
  int active = 99;
  RC("primary_state", cuDevicePrimaryCtxGetState(0, &flags, &active));
  OUT("primary_state_active", "%d", active);
  OUT("primary_state_flags", "%u", flags);
  RC("primary_state_bad", cuDevicePrimaryCtxGetState(64, &flags, &active));
  RC("primary_state_null", cuDevicePrimaryCtxGetState(0, NULL, &active));
  RC("primary_retain_null", cuDevicePrimaryCtxRetain(NULL, 0));
  RC("primary_retain_bad", cuDevicePrimaryCtxRetain(&c, 64));
  RC("primary_retain", cuDevicePrimaryCtxRetain(&c, 0));
  cuDevicePrimaryCtxGetState(0, &flags, &active);
  OUT("primary_after_retain_active", "%d", active);
  cuCtxGetCurrent(&cur);
  OUT("primary_retain_not_current", "%d", cur == NULL);
  RC("set_current", cuCtxSetCurrent(c));
  long long before = free_now();
  RC("get_device", cuCtxGetDevice(&d));
  OUT("get_device_value", "%d", d);
  RC("get_device_null", cuCtxGetDevice(NULL));
  RC("synchronize", cuCtxSynchronize());
  {
    CUresult (*gd2)(CUdevice *, CUcontext) =
        (CUresult(*)(CUdevice *, CUcontext))dlsym(RTLD_DEFAULT, "cuCtxGetDevice_v2");
    CUresult (*sy2)(CUcontext) = (CUresult(*)(CUcontext))dlsym(RTLD_DEFAULT, "cuCtxSynchronize_v2");
    if (gd2 && sy2) {
      d = -5;
      RC("get_device_v2", gd2(&d, c));
      OUT("get_device_v2_value", "%d", d);
      RC("get_device_v2_nullctx", gd2(&d, NULL));
      RC("get_device_v2_null", gd2(NULL, c));
      RC("synchronize_v2", sy2(c));
      RC("synchronize_v2_nullctx", sy2(NULL));
    }
  }
  CUcontext c3 = NULL;
  RC("primary_retain_again", cuDevicePrimaryCtxRetain(&c3, 0));
  OUT("primary_retain_same", "%d", c3 == c);
  RC("primary_release_bad", cuDevicePrimaryCtxRelease(64));
  RC("primary_release", cuDevicePrimaryCtxRelease(0));

  /* created contexts: a second context's footprint */
  RC("create_null", cuCtxCreate(NULL, NULL, 0, 0));
  RC("create_bad", cuCtxCreate(&c2, NULL, 0, 64));
  RC("create_flags_bad", cuCtxCreate(&c2, NULL, 0x4000, 0));
  RC("create", cuCtxCreate(&c2, NULL, 0, 0));
  cuCtxGetCurrent(&cur);
  OUT("create_made_current", "%d", cur == c2);
  DELTA("ctx_footprint", before);
  OUT("create_differs_from_primary", "%d", c2 != c);
  CUcontext popped = NULL;
  RC("pop", cuCtxPopCurrent(&popped));
  OUT("pop_got_created", "%d", popped == c2);
  cuCtxGetCurrent(&cur);
  OUT("pop_restored_primary", "%d", cur == c);
  RC("push_null", cuCtxPushCurrent(NULL));
  RC("push", cuCtxPushCurrent(c2));
  cuCtxGetCurrent(&cur);
  OUT("push_current", "%d", cur == c2);
  RC("pop_nullarg", cuCtxPopCurrent(NULL));
  cuCtxGetCurrent(&cur);
  OUT("pop_nullarg_restored", "%d", cur == c);
  before = free_now();
  RC("destroy_not_current", cuCtxDestroy(c2));
  DELTA("ctx_destroy_returned", before);
  RC("destroy_null", cuCtxDestroy(NULL));
  RC("set_current_null", cuCtxSetCurrent(NULL));
  cuCtxGetCurrent(&cur);
  OUT("set_current_null_cleared", "%d", cur == NULL);
  RC("pop_empty", cuCtxPopCurrent(&popped));

  /* a created context that is current when destroyed */
  cuCtxCreate(&c2, NULL, 0, 0);
  CUdeviceptr q;
  cuMemAlloc(&q, 64 << 20);
  cuCtxSetCurrent(c);
  before = free_now();
  cuCtxSetCurrent(c2);
  RC("destroy_current", cuCtxDestroy(c2));
  cuCtxGetCurrent(&cur);
  OUT("destroy_current_cleared", "%d", cur == NULL);
  cuCtxSetCurrent(c);
  DELTA("ctx_destroy_with_64mib", before);
}

static void s_ctx_double_destroy(void) {
  cuInit(0);
  CUcontext c;
  cuCtxCreate(&c, NULL, 0, 0);
  RC("first", cuCtxDestroy(c));
  RC("second", cuCtxDestroy(c));
}

static void s_primary_over_release(void) {
  cuInit(0);
  CUcontext c;
  cuDevicePrimaryCtxRetain(&c, 0);
  RC("release", cuDevicePrimaryCtxRelease(0));
  RC("release_again", cuDevicePrimaryCtxRelease(0));
  unsigned flags;
  int active = 99;
  cuDevicePrimaryCtxGetState(0, &flags, &active);
  OUT("active", "%d", active);
}

static void s_primary_reset(void) {
  CUcontext c = primary();
  CUdeviceptr p;
  long long before = free_now();
  cuMemAlloc(&p, 256 << 20);
  cuDevicePrimaryCtxRetain(&c, 0);
  RC("reset", cuDevicePrimaryCtxReset(0));
  RC("reset_bad", cuDevicePrimaryCtxReset(64));
  unsigned flags;
  int active = 99;
  cuDevicePrimaryCtxGetState(0, &flags, &active);
  OUT("active_after_reset", "%d", active);
  CUcontext cur = (CUcontext)1;
  cuCtxGetCurrent(&cur);
  OUT("current_after_reset_null", "%d", cur == NULL);
  RC("use_after_reset", cuMemAlloc(&p, 1024));
  cuDevicePrimaryCtxRetain(&c, 0);
  cuCtxSetCurrent(c);
  RC("old_ptr_after_reset", cuMemFree(p));
  OUT("info.reset_footprint_mib", "%lld", MIB(before - free_now()));
}

static void s_limits(void) {
  primary();
  size_t v = 0;
  RC("get_stack", cuCtxGetLimit(&v, CU_LIMIT_STACK_SIZE));
  OUT("get_stack_value", "%zu", v);
  RC("get_heap", cuCtxGetLimit(&v, CU_LIMIT_MALLOC_HEAP_SIZE));
  OUT("get_heap_value", "%zu", v);
  RC("get_fifo", cuCtxGetLimit(&v, CU_LIMIT_PRINTF_FIFO_SIZE));
  OUT("get_fifo_value", "%zu", v);
  RC("get_null", cuCtxGetLimit(NULL, CU_LIMIT_STACK_SIZE));
  RC("get_bad", cuCtxGetLimit(&v, (CUlimit)99));
  RC("set_bad", cuCtxSetLimit((CUlimit)99, 1));
  long long before = free_now();
  RC("set_stack_64k", cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 64 << 10));
  cuCtxGetLimit(&v, CU_LIMIT_STACK_SIZE);
  OUT("stack_64k_value", "%zu", v);
  DELTA("stack_64k", before);
  static const size_t steps[] = {128 << 10, 256 << 10, 512 << 10, (512 << 10) + 1024};
  for (int i = 0; i < 4; i++) {
    before = free_now();
    CUresult rc = cuCtxSetLimit(CU_LIMIT_STACK_SIZE, steps[i]);
    cuCtxGetLimit(&v, CU_LIMIT_STACK_SIZE);
    printf("%s.set_stack_%zu = %d\n", sec, steps[i], (int)rc);
    printf("%s.info.set_stack_%zu_value = %zu delta_mib %lld\n", sec, steps[i], v, MIB(before - free_now()));
  }
  cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 64 << 10);
  RC("set_stack_1000", cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 1000));
  cuCtxGetLimit(&v, CU_LIMIT_STACK_SIZE);
  OUT("info.stack_1000_value", "%zu", v);
  RC("set_stack_0", cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 0));
  cuCtxGetLimit(&v, CU_LIMIT_STACK_SIZE);
  OUT("info.stack_0_value", "%zu", v);
  cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 64 << 10);
  before = free_now();
  RC("set_stack_1m", cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 1 << 20));
  cuCtxGetLimit(&v, CU_LIMIT_STACK_SIZE);
  OUT("info.stack_1m_value", "%zu", v);
  DELTA("stack_1m", before);
  before = free_now();
  RC("set_stack_1g", cuCtxSetLimit(CU_LIMIT_STACK_SIZE, (size_t)1 << 30));
  DELTA("stack_1g", before);
  cuCtxGetLimit(&v, CU_LIMIT_STACK_SIZE);
  OUT("info.stack_after_1g_value", "%zu", v);
  RC("set_stack_small", cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 1024));
  before = free_now();
  RC("set_heap_1g", cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, (size_t)1 << 30));
  DELTA("heap_1g_before_launch", before);
  cuCtxGetLimit(&v, CU_LIMIT_MALLOC_HEAP_SIZE);
  OUT("heap_1g_value", "%zu", v);
  RC("set_heap_1t", cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, (size_t)1 << 40));
  cuCtxGetLimit(&v, CU_LIMIT_MALLOC_HEAP_SIZE);
  OUT("info.heap_after_1t_value", "%zu", v);
  before = free_now();
  RC("set_fifo_256m", cuCtxSetLimit(CU_LIMIT_PRINTF_FIFO_SIZE, 256 << 20));
  DELTA("fifo_256m", before);
  RC("set_fifo_1t", cuCtxSetLimit(CU_LIMIT_PRINTF_FIFO_SIZE, (size_t)1 << 40));
  /* limits take memory at the first launch on real drivers: launch one */
  CUmodule m;
  CUfunction f;
  before = free_now();
  if (cuModuleLoadData(&m, ptx) == CUDA_SUCCESS && cuModuleGetFunction(&f, m, "probe_kernel") == CUDA_SUCCESS) {
    cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL);
    cuCtxSynchronize();
  }
  DELTA("module_and_launch_after_limits", before);
}

static void s_mem(void) {
  primary();
  CUdeviceptr p = 0, q = 0;
  size_t f = 0, t = 0;
  RC("get_info", cuMemGetInfo(&f, &t));
  OUT("info.get_info_total", "%zu", t);
  OUT("info.get_info_free", "%zu", f);
  RC("get_info_null_free", cuMemGetInfo(NULL, &t));
  RC("get_info_null_total", cuMemGetInfo(&f, NULL));
  long long before = free_now();
  RC("alloc", cuMemAlloc(&p, 1 << 20));
  OUT("alloc_aligned_256", "%d", (p & 255) == 0);
  DELTA("alloc_1m", before);
  RC("alloc_0", cuMemAlloc(&q, 0));
  RC("alloc_null", cuMemAlloc(NULL, 1024));
  RC("alloc_max", cuMemAlloc(&q, SIZE_MAX));
  before = free_now();
  RC("alloc_2x_total", cuMemAlloc(&q, t * 2));
  DELTA("alloc_oom_left", before);
  RC("free", cuMemFree(p));
  RC("free_again", cuMemFree(p));
  RC("free_0", cuMemFree(0));
  RC("free_bogus", cuMemFree((CUdeviceptr)0x1234000));
  cuMemAlloc(&p, 1 << 20);
  RC("free_interior", cuMemFree(p + 256));
  cuMemFree(p);
  /* one byte: what the allocation granularity costs */
  before = free_now();
  CUdeviceptr small[8];
  for (int i = 0; i < 8; i++) cuMemAlloc(&small[i], 1);
  DELTA("alloc_8x1b", before);
  for (int i = 0; i < 8; i++) cuMemFree(small[i]);

  /* pitch */
  size_t pitch = 0;
  RC("pitch", cuMemAllocPitch(&p, &pitch, 100, 10, 4));
  OUT("pitch_100_value", "%zu", pitch);
  cuMemFree(p);
  RC("pitch_1000", cuMemAllocPitch(&p, &pitch, 1000, 3, 16));
  OUT("pitch_1000_value", "%zu", pitch);
  cuMemFree(p);
  RC("pitch_elem3", cuMemAllocPitch(&p, &pitch, 100, 10, 3));
  RC("pitch_w0", cuMemAllocPitch(&p, &pitch, 0, 10, 4));
  RC("pitch_h0", cuMemAllocPitch(&p, &pitch, 100, 0, 4));
  RC("pitch_null_pitch", cuMemAllocPitch(&p, NULL, 100, 10, 4));
  RC("pitch_null_ptr", cuMemAllocPitch(NULL, &pitch, 100, 10, 4));

  /* managed */
  before = free_now();
  RC("managed", cuMemAllocManaged(&p, 64 << 20, CU_MEM_ATTACH_GLOBAL));
  DELTA("managed_64m_untouched", before);
  RC("managed_memset", cuMemsetD8(p, 1, 64 << 20));
  cuCtxSynchronize();
  DELTA("managed_64m_touched", before);
  RC("managed_free", cuMemFree(p));
  RC("managed_0", cuMemAllocManaged(&p, 0, CU_MEM_ATTACH_GLOBAL));
  RC("managed_flags0", cuMemAllocManaged(&p, 1024, 0));
  RC("managed_flags3", cuMemAllocManaged(&p, 1024, 3));
  RC("managed_host", cuMemAllocManaged(&p, 1024, CU_MEM_ATTACH_HOST));
  cuMemFree(p);

  /* host */
  void *h = NULL;
  before = free_now();
  RC("host", cuMemAllocHost(&h, 64 << 20));
  DELTA("host_64m", before);
  if (h) memset(h, 7, 64 << 20);
  RC("host_free", cuMemFreeHost(h));
  h = (void *)1;
  RC("host_0", cuMemAllocHost(&h, 0));
  OUT("host_0_ptr_null", "%d", h == NULL);
  RC("host_null", cuMemAllocHost(NULL, 1024));

  /* copies and memset */
  unsigned char in[4096], back[4096];
  for (int i = 0; i < 4096; i++) in[i] = (unsigned char)(i * 7);
  cuMemAlloc(&p, 4096);
  RC("htod", cuMemcpyHtoD(p, in, 4096));
  RC("dtoh", cuMemcpyDtoH(back, p, 4096));
  OUT("roundtrip_equal", "%d", memcmp(in, back, 4096) == 0);
  RC("htod_0", cuMemcpyHtoD(p, in, 0));
  RC("htod_offset", cuMemcpyHtoD(p + 100, in, 100));
  RC("memset", cuMemsetD8(p, 0xab, 4096));
  cuMemcpyDtoH(back, p, 4096);
  OUT("memset_value", "%d", back[4095]);
  RC("memset_0", cuMemsetD8(p, 0xab, 0));
  cuMemFree(p);

  /* the legacy (v1) entries, reached by name as old binaries do */
  CUresult (*alloc_v1)(unsigned int *, unsigned int) =
      (CUresult(*)(unsigned int *, unsigned int))dlsym(RTLD_DEFAULT, "cuMemAlloc");
  OUT("v1_alloc_exported", "%d", alloc_v1 != NULL);
}

/* calls with pointers the driver never gave: last, in their own process */
static void s_mem_bogus(void) {
  primary();
  unsigned char in[16] = {0}, back[16];
  CUdeviceptr p;
  cuMemAlloc(&p, 4096);
  cuMemFree(p);
  RC("htod_freed", cuMemcpyHtoD(p, in, 16));
  RC("htod_bogus", cuMemcpyHtoD((CUdeviceptr)0x1234000, in, 16));
  RC("dtoh_bogus", cuMemcpyDtoH(back, (CUdeviceptr)0x1234000, 16));
  RC("memset_bogus", cuMemsetD8((CUdeviceptr)0x1234000, 0, 16));
  cuMemAlloc(&p, 4096);
  RC("htod_past_end", cuMemcpyHtoD(p + 4096 - 8, in, 16));
  RC("memset_past_end", cuMemsetD8(p + 4096 - 8, 0, 16));
  int local;
  RC("host_free_bogus", cuMemFreeHost(&local));
}

static void s_double_free_host(void) {
  primary();
  void *h;
  cuMemAllocHost(&h, 4096);
  RC("first", cuMemFreeHost(h));
  RC("second", cuMemFreeHost(h));
}

static void s_stream(void) {
  primary();
  CUstream s = NULL;
  RC("create", cuStreamCreate(&s, 0));
  RC("create_nonblocking", cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUstream s2;
  RC("create_flags_bad", cuStreamCreate(&s2, 0x10));
  RC("create_null", cuStreamCreate(NULL, 0));
  RC("sync", cuStreamSynchronize(s));
  RC("sync_null", cuStreamSynchronize(NULL));
  RC("sync_per_thread", cuStreamSynchronize(CU_STREAM_PER_THREAD));
  CUdeviceptr p = 0, q = 0;
  long long before = free_now();
  RC("alloc_async", cuMemAllocAsync(&p, 64 << 20, s));
  cuStreamSynchronize(s);
  DELTA("alloc_async_64m", before);
  q = 77;
  RC("alloc_async_0", cuMemAllocAsync(&q, 0, s));
  OUT("alloc_async_0_ptr_zero", "%d", q == 0);
  RC("alloc_async_null", cuMemAllocAsync(NULL, 1024, s));
  RC("alloc_async_null_stream", cuMemAllocAsync(&q, 1024, NULL));
  cuMemFreeAsync(q, NULL);
  RC("free_async", cuMemFreeAsync(p, s));
  DELTA("after_free_async_nosync", before);
  cuStreamSynchronize(s);
  DELTA("after_free_async_sync", before);
  RC("free_async_again", cuMemFreeAsync(p, s));
  RC("free_async_bogus", cuMemFreeAsync((CUdeviceptr)0x1234000, s));
  RC("free_async_0", cuMemFreeAsync(0, s));
  cuStreamSynchronize(s);
  /* a pointer from cuMemAlloc freed stream-ordered */
  before = free_now();
  cuMemAlloc(&p, 64 << 20);
  RC("free_async_of_mem_alloc", cuMemFreeAsync(p, s));
  cuStreamSynchronize(s);
  DELTA("free_async_of_mem_alloc_left", before);
  /* an async pointer freed with cuMemFree */
  cuMemAllocAsync(&p, 1 << 20, s);
  RC("mem_free_of_async", cuMemFree(p));

  /* pools */
  CUmemoryPool dp = NULL, dp2 = NULL;
  RC("default_pool", cuDeviceGetDefaultMemPool(&dp, 0));
  RC("default_pool_bad", cuDeviceGetDefaultMemPool(&dp2, 64));
  RC("default_pool_null", cuDeviceGetDefaultMemPool(NULL, 0));
  cuuint64_t v = 0;
  RC("pool_get_threshold", cuMemPoolGetAttribute(dp, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &v));
  OUT("pool_threshold_default", "%llu", (unsigned long long)v);
  RC("pool_get_bad_attr", cuMemPoolGetAttribute(dp, (CUmemPool_attribute)99, &v));
  RC("pool_get_null", cuMemPoolGetAttribute(dp, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, NULL));
  RC("pool_set_reserved_current", cuMemPoolSetAttribute(dp, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &v));
  v = UINT64_MAX;
  RC("pool_set_threshold", cuMemPoolSetAttribute(dp, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &v));
  before = free_now();
  cuMemAllocAsync(&p, 64 << 20, s);
  cuMemFreeAsync(p, s);
  cuStreamSynchronize(s);
  DELTA("pool_held_after_sync", before);
  cuMemPoolGetAttribute(dp, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &v);
  OUT("info.pool_reserved_mib", "%llu", (unsigned long long)v >> 20);
  cuMemPoolGetAttribute(dp, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &v);
  OUT("info.pool_used_after_free", "%llu", (unsigned long long)v);
  RC("trim", cuMemPoolTrimTo(dp, 0));
  DELTA("pool_after_trim", before);
  cuMemPoolGetAttribute(dp, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &v);
  OUT("pool_reserved_after_trim", "%llu", (unsigned long long)v);
  /* a used allocation survives a trim */
  cuMemAllocAsync(&p, 64 << 20, s);
  cuStreamSynchronize(s);
  before = free_now();
  cuMemPoolTrimTo(dp, 0);
  DELTA("trim_keeps_used", before);
  cuMemPoolGetAttribute(dp, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &v);
  OUT("info.pool_used_64m_mib", "%llu", (unsigned long long)v >> 20);
  cuMemFreeAsync(p, s);
  cuStreamSynchronize(s);
  cuMemPoolTrimTo(dp, 0);
  v = 0;
  cuMemPoolSetAttribute(dp, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &v);

  CUmemPoolProps pp;
  memset(&pp, 0, sizeof pp);
  pp.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  pp.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  pp.location.id = 0;
  CUmemoryPool up = NULL;
  RC("pool_create", cuMemPoolCreate(&up, &pp));
  RC("pool_create_null_props", cuMemPoolCreate(&up, NULL));
  RC("pool_create_null_out", cuMemPoolCreate(NULL, &pp));
  pp.location.id = 64;
  RC("pool_create_bad_dev", cuMemPoolCreate(&dp2, &pp));
  pp.location.id = 0;
  pp.allocType = (CUmemAllocationType)0;
  RC("pool_create_bad_type", cuMemPoolCreate(&dp2, &pp));
  pp.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  before = free_now();
  RC("alloc_from_pool", cuMemAllocFromPoolAsync(&p, 64 << 20, up, s));
  cuStreamSynchronize(s);
  DELTA("alloc_from_pool_64m", before);
  RC("alloc_from_pool_0", cuMemAllocFromPoolAsync(&q, 0, up, s));
  RC("alloc_from_pool_null_pool", cuMemAllocFromPoolAsync(&q, 1024, NULL, s));
  cuMemFreeAsync(p, s);
  cuStreamSynchronize(s);
  DELTA("user_pool_after_free_sync", before);
  cuMemAllocFromPoolAsync(&p, 64 << 20, up, s);
  cuStreamSynchronize(s);
  before = free_now();
  RC("pool_destroy_with_live", cuMemPoolDestroy(up));
  DELTA("pool_destroy_with_live", before);
  RC("free_after_pool_destroy", cuMemFreeAsync(p, s));
  cuStreamSynchronize(s);
  DELTA("after_free_of_destroyed_pool", before);
  RC("pool_destroy_default", cuMemPoolDestroy(dp));

  RC("destroy", cuStreamDestroy(s));
  RC("destroy_null", cuStreamDestroy(NULL));
}

static void s_vmm(void) {
  primary();
  CUmemAllocationProp ap;
  memset(&ap, 0, sizeof ap);
  ap.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  ap.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  ap.location.id = 0;
  size_t g = 0;
  RC("gran_min", cuMemGetAllocationGranularity(&g, &ap, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  OUT("gran_min_value", "%zu", g);
  RC("gran_rec", cuMemGetAllocationGranularity(&g, &ap, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  OUT("gran_rec_value", "%zu", g);
  RC("gran_null", cuMemGetAllocationGranularity(NULL, &ap, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  RC("gran_null_prop", cuMemGetAllocationGranularity(&g, NULL, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  RC("gran_bad_flag", cuMemGetAllocationGranularity(&g, &ap, (CUmemAllocationGranularity_flags)7));
  ap.location.id = 64;
  RC("gran_bad_dev", cuMemGetAllocationGranularity(&g, &ap, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  CUmemGenericAllocationHandle h = 0, h2;
  RC("create_bad_dev", cuMemCreate(&h2, 2 << 20, &ap, 0));
  ap.location.id = 0;
  long long before = free_now();
  RC("create", cuMemCreate(&h, 64 << 20, &ap, 0));
  DELTA("create_64m", before);
  RC("create_unaligned", cuMemCreate(&h2, (2 << 20) + 4096, &ap, 0));
  RC("create_0", cuMemCreate(&h2, 0, &ap, 0));
  RC("create_null", cuMemCreate(NULL, 2 << 20, &ap, 0));
  RC("create_null_prop", cuMemCreate(&h2, 2 << 20, NULL, 0));
  RC("create_flags", cuMemCreate(&h2, 2 << 20, &ap, 1));
  CUdeviceptr va = 0, va2;
  RC("reserve", cuMemAddressReserve(&va, 128 << 20, 0, 0, 0));
  RC("reserve_0", cuMemAddressReserve(&va2, 0, 0, 0, 0));
  RC("reserve_unaligned", cuMemAddressReserve(&va2, 4096, 0, 0, 0));
  RC("reserve_null", cuMemAddressReserve(NULL, 2 << 20, 0, 0, 0));
  RC("map", cuMemMap(va, 64 << 20, 0, h, 0));
  RC("map_again", cuMemMap(va, 64 << 20, 0, h, 0));
  RC("map_too_big", cuMemMap(va + (64 << 20), 128 << 20, 0, h, 0));
  RC("map_unaligned", cuMemMap(va + (64 << 20), 4096, 0, h, 0));
  CUmemAccessDesc acc;
  memset(&acc, 0, sizeof acc);
  acc.location = ap.location;
  acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  RC("set_access", cuMemSetAccess(va, 64 << 20, &acc, 1));
  RC("set_access_null", cuMemSetAccess(va, 64 << 20, NULL, 1));
  unsigned char in[64] = {1, 2, 3}, back[64] = {0};
  RC("htod_mapped", cuMemcpyHtoD(va, in, 64));
  cuMemcpyDtoH(back, va, 64);
  OUT("mapped_roundtrip", "%d", memcmp(in, back, 64) == 0);
  RC("mem_free_of_mapped", cuMemFree(va));
  RC("release_while_mapped", cuMemRelease(h));
  DELTA("after_release_while_mapped", before);
  RC("unmap", cuMemUnmap(va, 64 << 20));
  DELTA("after_unmap", before);
  RC("unmap_again", cuMemUnmap(va, 64 << 20));
  RC("address_free", cuMemAddressFree(va, 128 << 20));
  RC("address_free_again", cuMemAddressFree(va, 128 << 20));
  cuMemCreate(&h, 2 << 20, &ap, 0);
  RC("release", cuMemRelease(h));
}

static void s_vmm_double_release(void) {
  primary();
  CUmemAllocationProp ap;
  memset(&ap, 0, sizeof ap);
  ap.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  ap.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  CUmemGenericAllocationHandle h;
  cuMemCreate(&h, 2 << 20, &ap, 0);
  RC("first", cuMemRelease(h));
  RC("second", cuMemRelease(h));
  RC("zero", cuMemRelease(0));
}

static void s_array(void) {
  primary();
  CUarray a = NULL, b;
  CUDA_ARRAY_DESCRIPTOR d = {4096, 4096, CU_AD_FORMAT_FLOAT, 4};
  long long before = free_now();
  RC("create", cuArrayCreate(&a, &d));
  DELTA("create_4096x4096xf32x4", before);
  RC("destroy", cuArrayDestroy(a));
  DELTA("after_destroy", before);
  d.Height = 0;
  RC("create_1d", cuArrayCreate(&a, &d));
  cuArrayDestroy(a);
  d.Height = 4096;
  d.Width = 0;
  RC("create_w0", cuArrayCreate(&b, &d));
  d.Width = 64;
  d.NumChannels = 3;
  RC("create_ch3", cuArrayCreate(&b, &d));
  d.NumChannels = 1;
  d.Format = (CUarray_format)0x77;
  RC("create_bad_format", cuArrayCreate(&b, &d));
  d.Format = CU_AD_FORMAT_FLOAT;
  RC("create_null", cuArrayCreate(NULL, &d));
  RC("create_null_desc", cuArrayCreate(&b, NULL));
  CUDA_ARRAY3D_DESCRIPTOR d3 = {1024, 1024, 64, CU_AD_FORMAT_UNSIGNED_INT8, 4, 0};
  before = free_now();
  RC("create3d", cuArray3DCreate(&a, &d3));
  DELTA("create3d_1024x1024x64xu8x4", before);
  RC("destroy3d", cuArrayDestroy(a));
  d3.Depth = 0;
  d3.Height = 0;
  RC("create3d_1d", cuArray3DCreate(&a, &d3));
  cuArrayDestroy(a);
  d3.Height = 0;
  d3.Depth = 4;
  RC("create3d_h0_d4", cuArray3DCreate(&b, &d3));
  d3.Width = 0;
  RC("create3d_w0", cuArray3DCreate(&b, &d3));
  CUmipmappedArray m = NULL;
  CUDA_ARRAY3D_DESCRIPTOR dm = {4096, 4096, 0, CU_AD_FORMAT_FLOAT, 4, 0};
  before = free_now();
  RC("mipmap", cuMipmappedArrayCreate(&m, &dm, 13));
  DELTA("mipmap_4096x4096xf32x4_13", before);
  RC("mipmap_destroy", cuMipmappedArrayDestroy(m));
  DELTA("after_mipmap_destroy", before);
  RC("mipmap_0_levels", cuMipmappedArrayCreate(&m, &dm, 0));
  RC("mipmap_too_many_levels", cuMipmappedArrayCreate(&m, &dm, 14));
  RC("mipmap_null", cuMipmappedArrayCreate(NULL, &dm, 1));
  RC("destroy_null", cuArrayDestroy(NULL));
  RC("mipmap_destroy_null", cuMipmappedArrayDestroy(NULL));
}

static void s_graph(void) {
  primary();
  CUstream s;
  cuStreamCreate(&s, 0);
  CUgraph g = NULL, g2;
  RC("create", cuGraphCreate(&g, 0));
  RC("create_flags", cuGraphCreate(&g2, 1));
  RC("create_null", cuGraphCreate(NULL, 0));
  CUDA_MEM_ALLOC_NODE_PARAMS ap;
  memset(&ap, 0, sizeof ap);
  ap.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  ap.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  ap.poolProps.location.id = 0;
  ap.bytesize = 64 << 20;
  CUgraphNode an = NULL, fn = NULL, xn;
  long long before = free_now();
  RC("add_alloc", cuGraphAddMemAllocNode(&an, g, NULL, 0, &ap));
  OUT("add_alloc_dptr_set", "%d", ap.dptr != 0);
  DELTA("after_add_alloc", before);
  CUDA_MEM_ALLOC_NODE_PARAMS bad = ap;
  bad.bytesize = 0;
  RC("add_alloc_0", cuGraphAddMemAllocNode(&xn, g, NULL, 0, &bad));
  bad = ap;
  bad.poolProps.location.id = 64;
  RC("add_alloc_bad_dev", cuGraphAddMemAllocNode(&xn, g, NULL, 0, &bad));
  RC("add_alloc_null_params", cuGraphAddMemAllocNode(&xn, g, NULL, 0, NULL));
  RC("add_alloc_null_graph", cuGraphAddMemAllocNode(&xn, NULL, NULL, 0, &ap));
  RC("add_free", cuGraphAddMemFreeNode(&fn, g, &an, 1, ap.dptr));
  RC("add_free_twice", cuGraphAddMemFreeNode(&xn, g, &fn, 1, ap.dptr));
  RC("add_free_bogus", cuGraphAddMemFreeNode(&xn, g, NULL, 0, (CUdeviceptr)0x1234000));
  CUgraphExec e = NULL;
  RC("instantiate", cuGraphInstantiate(&e, g, 0));
  DELTA("after_instantiate", before);
  RC("launch", cuGraphLaunch(e, s));
  cuStreamSynchronize(s);
  DELTA("after_launch_alloc_free", before);
  RC("trim", cuDeviceGraphMemTrim(0));
  RC("trim_bad", cuDeviceGraphMemTrim(64));
  DELTA("after_trim", before);
  RC("exec_destroy", cuGraphExecDestroy(e));
  RC("destroy", cuGraphDestroy(g));

  /* an allocation node without a free node: the memory outlives the launch */
  cuGraphCreate(&g, 0);
  ap.dptr = 0;
  cuGraphAddMemAllocNode(&an, g, NULL, 0, &ap);
  RC("instantiate2", cuGraphInstantiate(&e, g, 0));
  before = free_now();
  RC("launch2", cuGraphLaunch(e, s));
  cuStreamSynchronize(s);
  DELTA("launch_alloc_only", before);
  unsigned char in[16] = {9, 8, 7}, back[16] = {0};
  RC("htod_graph_ptr", cuMemcpyHtoD(ap.dptr, in, 16));
  cuMemcpyDtoH(back, ap.dptr, 16);
  OUT("graph_ptr_roundtrip", "%d", memcmp(in, back, 16) == 0);
  RC("launch2_again_unfreed", cuGraphLaunch(e, s));
  cuStreamSynchronize(s);
  RC("free_async_graph_ptr", cuMemFreeAsync(ap.dptr, s));
  cuStreamSynchronize(s);
  DELTA("after_free_async_graph_ptr", before);
  cuDeviceGraphMemTrim(0);
  DELTA("after_trim2", before);
  RC("launch2_after_free", cuGraphLaunch(e, s));
  cuStreamSynchronize(s);
  RC("mem_free_graph_ptr", cuMemFree(ap.dptr));
  cuDeviceGraphMemTrim(0);
  DELTA("after_mem_free_trim", before);
  cuGraphExecDestroy(e);
  cuGraphDestroy(g);
  RC("exec_destroy_null", cuGraphExecDestroy(NULL));
  RC("destroy_null", cuGraphDestroy(NULL));
  RC("launch_null", cuGraphLaunch(NULL, s));
}

static void s_module(void) {
  primary();
  CUmodule m = NULL, m2;
  long long before = free_now();
  RC("load", cuModuleLoadData(&m, ptx));
  DELTA("load_64m_static", before);
  RC("load_garbage", cuModuleLoadData(&m2, "this is not a module"));
  RC("load_null", cuModuleLoadData(&m2, NULL));
  RC("load_null_out", cuModuleLoadData(NULL, ptx));
  RC("load_file_missing", cuModuleLoad(&m2, "/nonexistent/probe.cubin"));
  CUfunction f = NULL, f2;
  RC("get_function", cuModuleGetFunction(&f, m, "probe_kernel"));
  RC("get_function_missing", cuModuleGetFunction(&f2, m, "nope"));
  RC("get_function_null_name", cuModuleGetFunction(&f2, m, NULL));
  RC("get_function_null_out", cuModuleGetFunction(NULL, m, "probe_kernel"));
  const char *name = NULL;
  RC("func_name", cuFuncGetName(&name, f));
  OUT("func_name_value", "%s", name ? name : "(null)");
  RC("func_name_null", cuFuncGetName(NULL, f));
  RC("func_name_null_func", cuFuncGetName(&name, NULL));
  RC("launch", cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
  RC("launch_null", cuLaunchKernel(NULL, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
  RC("launch_block_too_big", cuLaunchKernel(f, 1, 1, 1, 2048, 1, 1, 0, NULL, NULL, NULL));
  RC("launch_grid_0", cuLaunchKernel(f, 0, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
  CUlaunchConfig cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
  cfg.blockDimX = 32;
  cfg.blockDimY = cfg.blockDimZ = 1;
  RC("launch_ex", cuLaunchKernelEx(&cfg, f, NULL, NULL));
  RC("launch_ex_null_cfg", cuLaunchKernelEx(NULL, f, NULL, NULL));
  RC("sync", cuCtxSynchronize());
  before = free_now();
  RC("unload", cuModuleUnload(m));
  OUT("info.unload_returned_mib", "%lld", MIB(free_now() - before));
  RC("unload_null", cuModuleUnload(NULL));
}

/* events: flags, what an unrecorded, an untimed and a pending event answer,
 * and that synchronizes wait for a 20 ms kernel */
static void s_event(void) {
  cuInit(0);
  CUevent e0 = NULL, e1 = NULL, nt = NULL, ipc = NULL, x;
  RC("nocur.create", cuEventCreate(&x, 0));
  CUcontext c = primary();
  RC("create", cuEventCreate(&e0, CU_EVENT_DEFAULT));
  RC("create_blocking", cuEventCreate(&e1, CU_EVENT_BLOCKING_SYNC));
  RC("create_flags_bad", cuEventCreate(&x, 0x10));
  RC("create_interprocess_timed", cuEventCreate(&x, CU_EVENT_INTERPROCESS));
  RC("create_interprocess", cuEventCreate(&ipc, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING));
  RC("create_disable_timing", cuEventCreate(&nt, CU_EVENT_DISABLE_TIMING));
  float ms = -1;
  RC("query_unrecorded", cuEventQuery(e0));
  RC("sync_unrecorded", cuEventSynchronize(e0));
  RC("elapsed_unrecorded", cuEventElapsedTime(&ms, e0, e1));
  RC("record", cuEventRecord(e0, NULL));
  RC("elapsed_one_unrecorded", cuEventElapsedTime(&ms, e0, e1));
  cuEventSynchronize(e0);
  RC("elapsed_same", cuEventElapsedTime(&ms, e0, e0));
  OUT("elapsed_same_zero", "%d", ms == 0.0f);
  RC("record_disable_timing", cuEventRecord(nt, NULL));
  cuEventSynchronize(nt);
  RC("elapsed_disable_timing", cuEventElapsedTime(&ms, e0, nt));
  RC("record_bad_flags", cuEventRecordWithFlags(e0, NULL, 0x10));
  RC("record_external_outside_capture", cuEventRecordWithFlags(e0, NULL, CU_EVENT_RECORD_EXTERNAL));
  RC("record_with_flags", cuEventRecordWithFlags(e0, NULL, CU_EVENT_RECORD_DEFAULT));

  CUfunction f = function_of(spin_ptx, "probe_spin_20000us");
  OUT("spin_loaded", "%d", f != NULL);
  CUstream s = NULL;
  cuStreamCreate(&s, 0);
  cuEventRecord(e0, s);
  double t0 = wall_ms();
  RC("spin_launch", cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
  RC("record_after_spin", cuEventRecord(e1, s));
  RC("query_pending", cuEventQuery(e1));
  RC("stream_query_pending", cuStreamQuery(s));
  RC("elapsed_pending", cuEventElapsedTime(&ms, e0, e1));
  RC("sync_pending", cuEventSynchronize(e1));
  OUT("sync_waited_15ms", "%d", wall_ms() - t0 >= 15.0);
  RC("query_done", cuEventQuery(e1));
  RC("stream_query_done", cuStreamQuery(s));
  RC("elapsed", cuEventElapsedTime(&ms, e0, e1));
  OUT("elapsed_about_20ms", "%d", ms >= 19.0f && ms < 40.0f);
  OUT("info.elapsed_ms", "%.3f", ms);
  CUresult (*elapsed_v1)(float *, CUevent, CUevent) =
      (CUresult(*)(float *, CUevent, CUevent))dlsym(RTLD_DEFAULT, "cuEventElapsedTime");
  if (elapsed_v1) {
    float ms1 = -1;
    RC("elapsed_v1", elapsed_v1(&ms1, e0, e1));
    OUT("elapsed_v1_same", "%d", ms1 == ms);
  }
  cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL);
  t0 = wall_ms();
  RC("stream_sync", cuStreamSynchronize(s));
  OUT("stream_sync_waited_15ms", "%d", wall_ms() - t0 >= 15.0);
  cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL);
  t0 = wall_ms();
  RC("ctx_sync", cuCtxSynchronize());
  OUT("ctx_sync_waited_15ms", "%d", wall_ms() - t0 >= 15.0);

  /* an event and a stream of different contexts */
  CUcontext c2 = NULL;
  CUstream s2 = NULL;
  cuCtxCreate(&c2, NULL, 0, 0);
  cuStreamCreate(&s2, 0);
  RC("record_other_ctx_stream", cuEventRecord(e0, s2));
  RC("record_other_ctx_null_stream", cuEventRecord(e0, NULL));
  RC("query_other_ctx_current", cuEventQuery(e0));
  cuCtxDestroy(c2);
  cuCtxSetCurrent(c);
  RC("destroy", cuEventDestroy(e0));
  RC("destroy_v1", cuEventDestroy(e1)); /* cuda.h names cuEventDestroy_v2 so */
  /* NULL arguments, which a driver may not survive: last */
  RC("destroy_null", cuEventDestroy(NULL));
  RC("create_null", cuEventCreate(NULL, 0));
  RC("elapsed_null_ms", cuEventElapsedTime(NULL, e1, e1));
}

/* stream capture: where it may begin, what it records, and what ends it */
static void s_capture(void) {
  primary();
  CUfunction f = function_of(ptx, "probe_kernel");
  CUstream s = NULL, snb = NULL;
  cuStreamCreate(&s, 0);
  cuStreamCreate(&snb, CU_STREAM_NON_BLOCKING);
  CUgraph g = NULL;
  CUstreamCaptureStatus st = (CUstreamCaptureStatus)99;
  RC("begin_legacy_null", cuStreamBeginCapture(NULL, CU_STREAM_CAPTURE_MODE_GLOBAL));
  RC("begin_legacy", cuStreamBeginCapture(CU_STREAM_LEGACY, CU_STREAM_CAPTURE_MODE_GLOBAL));
  RC("begin_bad_mode", cuStreamBeginCapture(s, (CUstreamCaptureMode)7));
  RC("end_not_capturing", cuStreamEndCapture(s, &g));
  RC("is_capturing_idle", cuStreamIsCapturing(s, &st));
  OUT("is_capturing_idle_status", "%d", (int)st);
  RC("begin", cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  RC("begin_twice", cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  st = (CUstreamCaptureStatus)99;
  RC("is_capturing", cuStreamIsCapturing(s, &st));
  OUT("is_capturing_status", "%d", (int)st);
  RC("is_capturing_legacy", cuStreamIsCapturing(CU_STREAM_LEGACY, &st));
  RC("launch", cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL));
  RC("launch2", cuLaunchKernel(f, 2, 1, 1, 64, 1, 1, 0, s, NULL, NULL));
  CUevent ev = NULL;
  cuEventCreate(&ev, 0);
  RC("event_record", cuEventRecord(ev, s));
  RC("event_query_captured", cuEventQuery(ev));
  RC("end", cuStreamEndCapture(s, &g));
  OUT("end_graph_set", "%d", g != NULL);
  size_t n = 0;
  RC("get_nodes_count", cuGraphGetNodes(g, NULL, &n));
  OUT("get_nodes_count_value", "%zu", n);
  CUgraphNode nodes[4] = {NULL, NULL, (CUgraphNode)1, (CUgraphNode)1};
  n = 4;
  RC("get_nodes", cuGraphGetNodes(g, nodes, &n));
  OUT("get_nodes_value", "%zu", n);
  OUT("get_nodes_rest_null", "%d", nodes[2] == NULL && nodes[3] == NULL);
  CUgraphNodeType t = (CUgraphNodeType)99;
  RC("node_type", cuGraphNodeGetType(nodes[0], &t));
  OUT("node_type_value", "%d", (int)t);
  CUDA_KERNEL_NODE_PARAMS kp;
  memset(&kp, 0, sizeof kp);
  RC("kernel_params", cuGraphKernelNodeGetParams(nodes[1], &kp));
  OUT("kernel_params_func", "%d", kp.func == f);
  OUT("kernel_params_dims", "%u %u %u %u %u %u", kp.gridDimX, kp.gridDimY, kp.gridDimZ, kp.blockDimX, kp.blockDimY,
      kp.blockDimZ);
  CUgraphExec e = NULL;
  RC("instantiate", cuGraphInstantiate(&e, g, 0));
  RC("graph_launch", cuGraphLaunch(e, s));
  RC("sync", cuStreamSynchronize(s));
  RC("event_query_after_end", cuEventQuery(ev));
  cuEventRecord(ev, s);
  RC("event_query_recorded_again", cuEventQuery(ev));
  cuGraphExecDestroy(e);
  cuGraphDestroy(g);

  /* synchronizing or querying a capturing stream invalidates the capture */
  RC("sync.begin", cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL);
  RC("sync.sync", cuStreamSynchronize(s));
  st = (CUstreamCaptureStatus)99;
  cuStreamIsCapturing(s, &st);
  OUT("sync.status_after", "%d", (int)st);
  RC("sync.launch_after", cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL));
  g = (CUgraph)1;
  RC("sync.end", cuStreamEndCapture(s, &g));
  OUT("sync.end_graph_null", "%d", g == NULL);
  st = (CUstreamCaptureStatus)99;
  cuStreamIsCapturing(s, &st);
  OUT("sync.status_ended", "%d", (int)st);
  RC("sync.sync_after_end", cuStreamSynchronize(s));
  cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
  RC("query.query", cuStreamQuery(s));
  RC("query.end", cuStreamEndCapture(s, &g));

  /* the legacy stream while a blocking stream captures, and while a
   * non-blocking one does */
  cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
  RC("legacy.launch", cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
  RC("legacy.end", cuStreamEndCapture(s, &g));
  cuStreamBeginCapture(snb, CU_STREAM_CAPTURE_MODE_GLOBAL);
  RC("nonblocking.legacy_launch", cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
  RC("nonblocking.end", cuStreamEndCapture(snb, &g));
  cuGraphDestroy(g);
  cuCtxSynchronize();

  /* the per-thread default stream can capture; the CUDA 10.0 entry too */
  RC("per_thread.begin", cuStreamBeginCapture(CU_STREAM_PER_THREAD, CU_STREAM_CAPTURE_MODE_GLOBAL));
  RC("per_thread.launch", cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, CU_STREAM_PER_THREAD, NULL, NULL));
  RC("per_thread.end", cuStreamEndCapture(CU_STREAM_PER_THREAD, &g));
  cuGraphDestroy(g);
  CUresult (*begin_v1)(CUstream) = (CUresult(*)(CUstream))dlsym(RTLD_DEFAULT, "cuStreamBeginCapture");
  if (begin_v1) {
    RC("v1.begin", begin_v1(s));
    st = (CUstreamCaptureStatus)99;
    cuStreamIsCapturing(s, &st);
    OUT("v1.status", "%d", (int)st);
    RC("v1.end", cuStreamEndCapture(s, &g));
    cuGraphDestroy(g);
  }

  /* stream-ordered allocation captured: memory nodes, no memory yet */
  cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED);
  CUdeviceptr p = 0;
  long long before = free_now();
  RC("alloc.alloc_async", cuMemAllocAsync(&p, 64 << 20, s));
  OUT("alloc.ptr_set", "%d", p != 0);
  DELTA("alloc.captured", before);
  RC("alloc.free_async", cuMemFreeAsync(p, s));
  RC("alloc.end", cuStreamEndCapture(s, &g));
  n = 4;
  cuGraphGetNodes(g, nodes, &n);
  OUT("alloc.nodes", "%zu", n);
  for (size_t i = 0; i < n && i < 2; i++) {
    t = (CUgraphNodeType)99;
    cuGraphNodeGetType(nodes[i], &t);
    printf("%s.alloc.type%zu = %d\n", sec, i, (int)t);
  }
  cuGraphDestroy(g);

  /* into an existing graph, after a node of it */
  CUgraph g2 = NULL, g3 = NULL;
  CUgraphNode en = NULL;
  cuGraphCreate(&g2, 0);
  cuGraphAddEmptyNode(&en, g2, NULL, 0);
  RC("to_graph.begin", cuStreamBeginCaptureToGraph(s, g2, &en, NULL, 1, CU_STREAM_CAPTURE_MODE_GLOBAL));
  cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL);
  RC("to_graph.end", cuStreamEndCapture(s, &g3));
  OUT("to_graph.same_graph", "%d", g3 == g2);
  n = 0;
  cuGraphGetNodes(g2, NULL, &n);
  OUT("to_graph.nodes", "%zu", n);
  RC("to_graph.null_graph", cuStreamBeginCaptureToGraph(s, NULL, NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_GLOBAL));
  cuGraphDestroy(g2);
}

/* cooperative launches must fit on the device at once: 132 SMs x 32
 * blocks of 64 threads, x 2 of 1024 */
static void s_coop(void) {
  primary();
  CUfunction f = function_of(ptx, "probe_kernel");
  RC("fits_64", cuLaunchCooperativeKernel(f, 4224, 1, 1, 64, 1, 1, 0, NULL, NULL));
  RC("too_large_64", cuLaunchCooperativeKernel(f, 4225, 1, 1, 64, 1, 1, 0, NULL, NULL));
  RC("fits_1024", cuLaunchCooperativeKernel(f, 264, 1, 1, 1024, 1, 1, 0, NULL, NULL));
  RC("too_large_1024", cuLaunchCooperativeKernel(f, 265, 1, 1, 1024, 1, 1, 0, NULL, NULL));
  RC("too_large_2d", cuLaunchCooperativeKernel(f, 133, 32, 1, 64, 1, 1, 0, NULL, NULL));
  RC("grid_0", cuLaunchCooperativeKernel(f, 0, 1, 1, 64, 1, 1, 0, NULL, NULL));
  RC("null_func", cuLaunchCooperativeKernel(NULL, 1, 1, 1, 64, 1, 1, 0, NULL, NULL));
  RC("sync", cuCtxSynchronize());
}

/* Adds probe_kernel nodes shaped like `g` of s_graph_kernel: k1, k2 after
 * k1, an empty node after k2 (a kernel if `kernel_for_empty`), a child graph
 * of one kernel after that; `k2_root` drops k2's dependency. */
static CUgraph graph_like(CUfunction f, unsigned grid, int kernel_for_empty, int k2_root) {
  CUgraph g = NULL, child = NULL;
  CUgraphNode k1, k2, mid, cn, x;
  CUDA_KERNEL_NODE_PARAMS kp;
  memset(&kp, 0, sizeof kp);
  kp.func = f;
  kp.gridDimX = grid;
  kp.gridDimY = kp.gridDimZ = 1;
  kp.blockDimX = 32;
  kp.blockDimY = kp.blockDimZ = 1;
  cuGraphCreate(&g, 0);
  cuGraphCreate(&child, 0);
  cuGraphAddKernelNode(&x, child, NULL, 0, &kp);
  cuGraphAddKernelNode(&k1, g, NULL, 0, &kp);
  cuGraphAddKernelNode(&k2, g, k2_root ? NULL : &k1, k2_root ? 0 : 1, &kp);
  if (kernel_for_empty)
    cuGraphAddKernelNode(&mid, g, &k2, 1, &kp);
  else
    cuGraphAddEmptyNode(&mid, g, &k2, 1);
  cuGraphAddChildGraphNode(&cn, g, &mid, 1, child);
  cuGraphDestroy(child);
  return g;
}

/* kernel, empty and child graph nodes; executable graph updates */
static void s_graph_kernel(void) {
  primary();
  CUfunction f = function_of(ptx, "probe_kernel");
  CUgraph g = NULL;
  cuGraphCreate(&g, 0);
  CUDA_KERNEL_NODE_PARAMS kp, bad, got;
  memset(&kp, 0, sizeof kp);
  kp.func = f;
  kp.gridDimX = kp.gridDimY = kp.gridDimZ = 1;
  kp.blockDimX = 32;
  kp.blockDimY = kp.blockDimZ = 1;
  CUgraphNode k1 = NULL, k2 = NULL, en = NULL, cn = NULL, x;
  RC("add_kernel", cuGraphAddKernelNode(&k1, g, NULL, 0, &kp));
  bad = kp;
  bad.gridDimX = 0;
  RC("add_kernel_grid_0", cuGraphAddKernelNode(&x, g, NULL, 0, &bad));
  bad = kp;
  bad.blockDimX = 2048;
  RC("add_kernel_block_too_big", cuGraphAddKernelNode(&x, g, NULL, 0, &bad));
  bad = kp;
  bad.func = NULL;
  RC("add_kernel_null_func", cuGraphAddKernelNode(&x, g, NULL, 0, &bad));
  RC("add_kernel_dep", cuGraphAddKernelNode(&k2, g, &k1, 1, &kp));
  CUgraphNode dup[2] = {k1, k1};
  RC("add_kernel_dup_deps", cuGraphAddKernelNode(&x, g, dup, 2, &kp));
  memset(&got, 0, sizeof got);
  RC("get_params", cuGraphKernelNodeGetParams(k1, &got));
  OUT("get_params_func", "%d", got.func == f);
  OUT("get_params_dims", "%u %u", got.gridDimX, got.blockDimX);
  kp.gridDimX = 8;
  RC("set_params", cuGraphKernelNodeSetParams(k1, &kp));
  cuGraphKernelNodeGetParams(k1, &got);
  OUT("set_params_grid", "%u", got.gridDimX);
  bad = kp;
  bad.gridDimX = 0;
  RC("set_params_grid_0", cuGraphKernelNodeSetParams(k1, &bad));
  RC("add_empty", cuGraphAddEmptyNode(&en, g, &k2, 1));
  CUgraphNodeType t = (CUgraphNodeType)99;
  RC("node_type_empty", cuGraphNodeGetType(en, &t));
  OUT("node_type_empty_value", "%d", (int)t);
  RC("get_params_not_kernel", cuGraphKernelNodeGetParams(en, &got));
  CUgraph child = NULL, emb = NULL, emb2 = NULL;
  cuGraphCreate(&child, 0);
  cuGraphAddKernelNode(&x, child, NULL, 0, &kp);
  RC("add_child", cuGraphAddChildGraphNode(&cn, g, &en, 1, child));
  t = (CUgraphNodeType)99;
  cuGraphNodeGetType(cn, &t);
  OUT("node_type_child_value", "%d", (int)t);
  RC("child_get_graph", cuGraphChildGraphNodeGetGraph(cn, &emb));
  OUT("child_graph_is_a_copy", "%d", emb != NULL && emb != child);
  size_t n = 0;
  cuGraphGetNodes(emb, NULL, &n);
  OUT("child_graph_nodes", "%zu", n);
  RC("child_get_graph_not_child", cuGraphChildGraphNodeGetGraph(k1, &emb2));
  CUgraph mg = NULL;
  cuGraphCreate(&mg, 0);
  CUDA_MEM_ALLOC_NODE_PARAMS ap;
  memset(&ap, 0, sizeof ap);
  ap.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  ap.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  ap.bytesize = 2 << 20;
  cuGraphAddMemAllocNode(&x, mg, NULL, 0, &ap);
  RC("add_child_with_alloc", cuGraphAddChildGraphNode(&x, g, NULL, 0, mg));
  n = 0;
  cuGraphGetNodes(g, NULL, &n);
  OUT("nodes", "%zu", n);

  CUgraphExec e = NULL;
  RC("instantiate", cuGraphInstantiate(&e, g, 0));
  RC("launch", cuGraphLaunch(e, NULL));
  RC("sync", cuCtxSynchronize());
  kp.gridDimX = 16;
  RC("exec_set_params", cuGraphExecKernelNodeSetParams(e, k1, &kp));
  RC("exec_set_params_not_kernel", cuGraphExecKernelNodeSetParams(e, en, &kp));
  CUgraphExecUpdateResultInfo info;
  CUgraph same = graph_like(f, 4, 0, 0);
  memset(&info, 0, sizeof info);
  info.result = (CUgraphExecUpdateResult)99;
  RC("update_same", cuGraphExecUpdate(e, same, &info));
  OUT("update_same_result", "%d", (int)info.result);
  OUT("update_same_error_node_null", "%d", info.errorNode == NULL);
  cuGraphAddKernelNode(&x, same, NULL, 0, &kp);
  info.result = (CUgraphExecUpdateResult)99;
  RC("update_more_nodes", cuGraphExecUpdate(e, same, &info));
  OUT("update_more_nodes_result", "%d", (int)info.result);
  OUT("update_more_nodes_error_node_null", "%d", info.errorNode == NULL);
  CUgraph other = graph_like(f, 4, 1, 0);
  info.result = (CUgraphExecUpdateResult)99;
  RC("update_type_changed", cuGraphExecUpdate(e, other, &info));
  OUT("update_type_changed_result", "%d", (int)info.result);
  OUT("update_type_changed_error_node_set", "%d", info.errorNode != NULL);
  CUgraph deps = graph_like(f, 4, 0, 1);
  info.result = (CUgraphExecUpdateResult)99;
  RC("update_deps_changed", cuGraphExecUpdate(e, deps, &info));
  OUT("update_deps_changed_result", "%d", (int)info.result);
  RC("launch_after_update", cuGraphLaunch(e, NULL));
  RC("sync_after_update", cuCtxSynchronize());
  cuGraphExecDestroy(e);
  RC("destroy", cuGraphDestroy(g));
  /* NULL arguments, which a driver may not survive: last */
  cuGraphCreate(&g, 0);
  RC("add_kernel_null_params", cuGraphAddKernelNode(&x, g, NULL, 0, NULL));
}

/* library kernels: names, and launched as functions (as CUDA 12 runtimes do) */
static void s_library(void) {
  primary();
  CUlibrary lib = NULL;
  RC("load", cuLibraryLoadData(&lib, ptx, NULL, NULL, 0, NULL, NULL, 0));
  CUkernel k = NULL;
  RC("get_kernel", cuLibraryGetKernel(&k, lib, "probe_kernel"));
  const char *name = NULL;
  RC("kernel_name", cuKernelGetName(&name, k));
  OUT("kernel_name_value", "%s", name ? name : "(null)");
  CUfunction fk = NULL;
  RC("kernel_get_function", cuKernelGetFunction(&fk, k));
  name = NULL;
  RC("func_name_of_kernel_function", cuFuncGetName(&name, fk));
  OUT("func_name_of_kernel_function_value", "%s", name ? name : "(null)");
  RC("launch_kernel_as_function", cuLaunchKernel((CUfunction)k, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
  RC("sync", cuCtxSynchronize());
  /* a NULL argument, which a driver may not survive: last but the unload */
  RC("kernel_name_null", cuKernelGetName(NULL, k));
  RC("unload", cuLibraryUnload(lib));
}

static void s_errors(void) {
  /* every code the driver names: the fake's table is this list */
  for (int c = 0; c < 1100; c++) {
    const char *n = NULL, *str = NULL;
    if (cuGetErrorName((CUresult)c, &n) != CUDA_SUCCESS) continue;
    cuGetErrorString((CUresult)c, &str);
    printf("%s.table.%d = %s | %s\n", sec, c, n ? n : "(null)", str ? str : "(null)");
  }
  static const int codes[] = {0, 1, 2, 3, 4, 100, 101, 200, 201, 218, 300, 400, 500, 600, 700, 801, 999};
  for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
    const char *s = NULL, *n = NULL;
    CUresult r1 = cuGetErrorString((CUresult)codes[i], &s);
    CUresult r2 = cuGetErrorName((CUresult)codes[i], &n);
    printf("%s.code.%d = %d %d %s | %s\n", sec, codes[i], (int)r1, (int)r2, n ? n : "(null)", s ? s : "(null)");
  }
  const char *s = (const char *)1;
  RC("string_unknown", cuGetErrorString((CUresult)12345, &s));
  OUT("string_unknown_null", "%d", s == NULL);
  s = (const char *)1;
  RC("name_unknown", cuGetErrorName((CUresult)12345, &s));
  OUT("name_unknown_null", "%d", s == NULL);
  /* the real driver dereferences these: last, and the fake need not match */
  RC("name_null", cuGetErrorName(CUDA_SUCCESS, NULL));
  RC("string_null", cuGetErrorString(CUDA_SUCCESS, NULL));
}

/* The base names the fake implements; cuGetProcAddress is asked for each at
 * every version below and with each flag, and the pointer it gives is
 * named by comparing it with dlsym of every exported candidate. */
static const char *const procnames[] = {
    "cuInit",
    "cuDriverGetVersion",
    "cuDeviceGetCount",
    "cuDeviceGet",
    "cuDeviceGetName",
    "cuDeviceGetUuid",
    "cuDeviceTotalMem",
    "cuDeviceGetAttribute",
    "cuDeviceGetPCIBusId",
    "cuDevicePrimaryCtxRetain",
    "cuDevicePrimaryCtxRelease",
    "cuDevicePrimaryCtxReset",
    "cuDevicePrimaryCtxGetState",
    "cuCtxCreate",
    "cuCtxDestroy",
    "cuCtxSetCurrent",
    "cuCtxGetCurrent",
    "cuCtxPushCurrent",
    "cuCtxPopCurrent",
    "cuCtxGetDevice",
    "cuCtxSynchronize",
    "cuCtxSetLimit",
    "cuCtxGetLimit",
    "cuMemGetInfo",
    "cuMemAlloc",
    "cuMemAllocPitch",
    "cuMemAllocManaged",
    "cuMemFree",
    "cuMemAllocHost",
    "cuMemFreeHost",
    "cuMemsetD8",
    "cuMemcpyHtoD",
    "cuMemcpyDtoH",
    "cuStreamCreate",
    "cuStreamDestroy",
    "cuStreamSynchronize",
    "cuMemAllocAsync",
    "cuMemFreeAsync",
    "cuDeviceGetDefaultMemPool",
    "cuMemPoolCreate",
    "cuMemPoolDestroy",
    "cuMemAllocFromPoolAsync",
    "cuMemPoolTrimTo",
    "cuMemPoolSetAttribute",
    "cuMemPoolGetAttribute",
    "cuMemGetAllocationGranularity",
    "cuMemCreate",
    "cuMemRelease",
    "cuMemAddressReserve",
    "cuMemAddressFree",
    "cuMemMap",
    "cuMemUnmap",
    "cuMemSetAccess",
    "cuArrayCreate",
    "cuArray3DCreate",
    "cuArrayDestroy",
    "cuMipmappedArrayCreate",
    "cuMipmappedArrayDestroy",
    "cuGraphCreate",
    "cuGraphDestroy",
    "cuGraphAddMemAllocNode",
    "cuGraphAddMemFreeNode",
    "cuGraphInstantiate",
    "cuGraphInstantiateWithFlags",
    "cuGraphLaunch",
    "cuGraphExecDestroy",
    "cuDeviceGraphMemTrim",
    "cuModuleLoadData",
    "cuModuleLoad",
    "cuModuleUnload",
    "cuModuleGetFunction",
    "cuFuncGetName",
    "cuLaunchKernel",
    "cuLaunchKernelEx",
    "cuGetErrorString",
    "cuGetErrorName",
    "cuGetProcAddress",
    "cuStreamBeginCapture",
    "cuStreamEndCapture",
    /* time, events, capture, graph kernel nodes */
    "cuStreamQuery",
    "cuEventCreate",
    "cuEventDestroy",
    "cuEventRecord",
    "cuEventRecordWithFlags",
    "cuEventQuery",
    "cuEventSynchronize",
    "cuEventElapsedTime",
    "cuLaunchCooperativeKernel",
    "cuStreamBeginCaptureToGraph",
    "cuStreamIsCapturing",
    "cuGraphAddKernelNode",
    "cuGraphKernelNodeGetParams",
    "cuGraphKernelNodeSetParams",
    "cuGraphAddEmptyNode",
    "cuGraphAddChildGraphNode",
    "cuGraphChildGraphNodeGetGraph",
    "cuGraphGetNodes",
    "cuGraphNodeGetType",
    "cuGraphExecKernelNodeSetParams",
    "cuGraphExecUpdate",
    "cuLibraryGetKernel",
    "cuKernelGetName",
    "cuKernelGetFunction",
};
#define NPROC (sizeof procnames / sizeof procnames[0])
static const char *const suffixes[] = {"", "_v2", "_v3", "_v4", "_ptds", "_ptsz", "_v2_ptds", "_v2_ptsz"};
#define NSUF (sizeof suffixes / sizeof suffixes[0])

static struct {
  void *p;
  char name[80];
} known[NPROC * NSUF];
static size_t nknown;

static const char *name_of(void *p) {
  for (size_t i = 0; i < nknown; i++)
    if (known[i].p == p) return known[i].name;
  return "(unnamed)";
}

static void s_symbols(void) {
  for (size_t i = 0; i < NPROC; i++)
    for (size_t j = 0; j < NSUF; j++) {
      char n[80];
      snprintf(n, sizeof n, "%s%s", procnames[i], suffixes[j]);
      if (dlsym(RTLD_DEFAULT, n)) printf("%s.%s = 1\n", sec, n);
    }
}

static void s_procaddr(void) {
  cuInit(0);
  for (size_t i = 0; i < NPROC; i++)
    for (size_t j = 0; j < NSUF; j++) {
      char n[80];
      snprintf(n, sizeof n, "%s%s", procnames[i], suffixes[j]);
      void *p = dlsym(RTLD_DEFAULT, n);
      if (p && nknown < NPROC * NSUF) {
        known[nknown].p = p;
        snprintf(known[nknown].name, sizeof known[nknown].name, "%s", n);
        nknown++;
      }
    }
  static const int versions[] = {1000,  2000,  2020,  3000,  3010,  3020,  4000,  4010,  5000,  6000,  7000,  9020,
                                 10000, 10010, 10020, 11000, 11020, 11030, 11040, 11060, 12000, 12030, 12050, 13000};
  for (size_t i = 0; i < NPROC; i++)
    for (unsigned long long fl = 0; fl < 3; fl++) {
      printf("%s.%s.f%llu =", sec, procnames[i], fl);
      const char *last = NULL;
      for (size_t k = 0; k < sizeof versions / sizeof versions[0]; k++) {
        void *p = NULL;
        CUdriverProcAddressQueryResult st = 99;
        CUresult rc = cuGetProcAddress(procnames[i], &p, versions[k], fl, &st);
        char what[120];
        if (rc == CUDA_SUCCESS && p)
          snprintf(what, sizeof what, "%s", name_of(p));
        else
          snprintf(what, sizeof what, "rc%d/st%d/%s", (int)rc, (int)st, p ? "p" : "0");
        if (!last || strcmp(last, what) != 0) printf(" %d:%s", versions[k], what);
        static char keep[120];
        snprintf(keep, sizeof keep, "%s", what);
        last = keep;
      }
      printf("\n");
    }
  void *p = (void *)1;
  CUdriverProcAddressQueryResult st = 99;
  RC("unknown", cuGetProcAddress("cuNoSuchFunction", &p, 13000, 0, &st));
  OUT("unknown_status", "%d", (int)st);
  OUT("unknown_pfn_null", "%d", p == NULL);
  p = (void *)1;
  RC("unknown_nostatus", cuGetProcAddress("cuNoSuchFunction", &p, 13000, 0, NULL));
  p = (void *)1;
  st = 99;
  RC("too_old", cuGetProcAddress("cuMemAllocAsync", &p, 11000, 0, &st));
  OUT("too_old_status", "%d", (int)st);
  OUT("too_old_pfn_null", "%d", p == NULL);
  st = 99;
  RC("future_version", cuGetProcAddress("cuMemAlloc", &p, 99000, 0, &st));
  OUT("future_version_status", "%d", (int)st);
  RC("bad_flags", cuGetProcAddress("cuMemAlloc", &p, 13000, 8, &st));
  RC("flags_3", cuGetProcAddress("cuMemAlloc", &p, 13000, 3, &st));
  st = 99;
  RC("version_13010", cuGetProcAddress("cuMemAlloc", &p, 13010, 0, &st));
  OUT("version_13010_status", "%d", (int)st);
  st = 99;
  RC("version_0", cuGetProcAddress("cuMemAlloc", &p, 0, 0, &st));
  OUT("version_0_status", "%d", (int)st);
  st = 99;
  RC("version_neg", cuGetProcAddress("cuMemAlloc", &p, -1, 0, &st));
  OUT("version_neg_status", "%d", (int)st);
  RC("versioned_name", cuGetProcAddress("cuMemAlloc_v2", &p, 13000, 0, &st));
  OUT("versioned_name_status", "%d", (int)st);
  /* the CUDA 11.3 entry (four arguments), still exported */
  CUresult (*v1)(const char *, void **, int, cuuint64_t) =
      (CUresult(*)(const char *, void **, int, cuuint64_t))dlsym(RTLD_DEFAULT, "cuGetProcAddress");
  if (v1) {
    p = NULL;
    RC("v1_known", v1("cuMemAlloc", &p, 13000, 0));
    OUT("v1_known_name", "%s", p ? name_of(p) : "(null)");
    p = (void *)1;
    RC("v1_unknown", v1("cuNoSuchFunction", &p, 13000, 0));
    OUT("v1_unknown_pfn_null", "%d", p == NULL);
    p = (void *)1;
    RC("v1_too_old", v1("cuMemAllocAsync", &p, 11000, 0));
    OUT("v1_too_old_pfn_null", "%d", p == NULL);
    RC("v1_future", v1("cuMemAlloc", &p, 99000, 0));
  }
  /* the real driver crashes on a NULL symbol: last */
  RC("null_pfn", cuGetProcAddress("cuMemAlloc", NULL, 13000, 0, &st));
  RC("null_symbol", cuGetProcAddress(NULL, &p, 13000, 0, &st));
}

/* the legacy entries (32-bit sizes and pointers), reached by name */
static void s_v1(void) {
  primary();
  CUresult (*info)(unsigned *, unsigned *) = (CUresult(*)(unsigned *, unsigned *))dlsym(RTLD_DEFAULT, "cuMemGetInfo");
  CUresult (*total)(unsigned *, CUdevice) = (CUresult(*)(unsigned *, CUdevice))dlsym(RTLD_DEFAULT, "cuDeviceTotalMem");
  CUresult (*alloc)(unsigned *, unsigned) = (CUresult(*)(unsigned *, unsigned))dlsym(RTLD_DEFAULT, "cuMemAlloc");
  CUresult (*mfree)(unsigned) = (CUresult(*)(unsigned))dlsym(RTLD_DEFAULT, "cuMemFree");
  CUresult (*create)(CUcontext *, unsigned, CUdevice) =
      (CUresult(*)(CUcontext *, unsigned, CUdevice))dlsym(RTLD_DEFAULT, "cuCtxCreate");
  CUresult (*inst2)(CUgraphExec *, CUgraph, CUgraphNode *, char *, size_t) =
      (CUresult(*)(CUgraphExec *, CUgraph, CUgraphNode *, char *, size_t))dlsym(RTLD_DEFAULT, "cuGraphInstantiate_v2");
  unsigned f = 0, t = 0;
  if (info) {
    RC("mem_get_info", info(&f, &t));
    OUT("info.mem_get_info_values", "%u %u", f, t);
  }
  if (total) {
    RC("total_mem", total(&t, 0));
    OUT("info.total_mem_value", "%u", t);
  }
  if (alloc && mfree) {
    unsigned p = 0;
    RC("alloc", alloc(&p, 4096));
    OUT("alloc_nonzero", "%d", p != 0);
    RC("free", mfree(p));
  }
  if (create) {
    CUcontext c = NULL;
    RC("ctx_create", create(&c, 0, 0));
    if (c) cuCtxDestroy(c);
  }
  if (inst2) {
    CUgraph g;
    CUgraphExec e;
    cuGraphCreate(&g, 0);
    RC("graph_instantiate_v2", inst2(&e, g, NULL, NULL, 0));
  }
}

static const struct {
  const char *name;
  void (*fn)(void);
} sections[] = {
    {"preinit", s_preinit},
    {"initflags", s_initflags},
    {"device", s_device},
    {"ctx", s_ctx},
    {"ctx_double_destroy", s_ctx_double_destroy},
    {"primary_over_release", s_primary_over_release},
    {"primary_reset", s_primary_reset},
    {"limits", s_limits},
    {"mem", s_mem},
    {"mem_bogus", s_mem_bogus},
    {"double_free_host", s_double_free_host},
    {"stream", s_stream},
    {"vmm", s_vmm},
    {"vmm_double_release", s_vmm_double_release},
    {"array", s_array},
    {"graph", s_graph},
    {"module", s_module},
    {"event", s_event},
    {"capture", s_capture},
    {"coop", s_coop},
    {"graph_kernel", s_graph_kernel},
    {"library", s_library},
    {"errors", s_errors},
    {"v1", s_v1},
    {"symbols", s_symbols},
    {"procaddr", s_procaddr},
};

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: probe_driver list|SECTION\n");
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0); /* a crash keeps what came before */
  for (size_t i = 0; i < sizeof sections / sizeof sections[0]; i++) {
    if (strcmp(argv[1], "list") == 0) {
      printf("%s\n", sections[i].name);
    } else if (strcmp(argv[1], sections[i].name) == 0) {
      sec = sections[i].name;
      sections[i].fn();
      fflush(stdout);
      return 0;
    }
  }
  if (strcmp(argv[1], "list") == 0) return 0;
  fprintf(stderr, "probe_driver: no section '%s'\n", argv[1]);
  return 2;
}
