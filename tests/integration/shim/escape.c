/* escape.c: a tenant that takes the routes to device memory that escaped
 * the lease, as a program would, under
 * libtessera-cuda.so against the fake driver (linked with the fake
 * libcuda.so.1; escapes.sh preloads the shim). One mode per route; each
 * prints key=value lines, among them
 *   held=N     what the fake driver holds for this process on device 0
 *              (FAKE_CUDA_STATE): the truth the lease must bound
 *   charged=N  what the lease's region counts as used (REGION)
 * and escapes.sh compares them with the lease.
 *
 *   escape captured REGION CHUNK_MIB ROUNDS [FIRST]
 *       ROUNDS times, or until something is refused: two stream-ordered
 *       allocations of CHUNK_MIB captured from a stream, the graph
 *       instantiated, uploaded or launched, never freed. Each round takes
 *       other entries: the capture begun on a stream, into an existing
 *       graph, or on the per-thread stream (_ptsz); cuMemAllocAsync or
 *       cuMemAllocFromPoolAsync; cuGraphInstantiateWithFlags,
 *       WithParams with CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD, the CUDA 10
 *       cuGraphInstantiate found by dlsym, or its _v2 by cuGetProcAddress;
 *       cuGraphLaunch, cuGraphUpload then cuGraphLaunch, or the _ptsz
 *       launch; rounds are numbered from FIRST (default 0), which picks
 *       the ways. Prints "rounds=N step=WHERE rc=CODE" (the first refusal).
 *   escape v1 REGION
 *       the entries of the CUDA 2.0 ABI and the older versions of hooked
 *       entries, found by dlsym on libcuda.so.1 and by cuGetProcAddress at
 *       an old version: what each answers, and what the lease was charged
 *       or credited.
 *   escape green REGION CHUNK_MIB
 *       a green context made before any other context, by each route
 *       (linked, dlsym, cuGetProcAddress); then, current (or, if the green
 *       context was refused, the primary context), CHUNK_MIB allocations
 *       until refused. */
#include <cuda.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fake_cuda_state.h"
#include "region/region.h"

#define MIB ((size_t)1 << 20)

static const char *rc_name(CUresult rc) {
  const char *s = NULL;
  if (cuGetErrorName(rc, &s) != CUDA_SUCCESS || !s) return "CUDA_ERROR_UNKNOWN_CODE";
  return s;
}

static tsr_region_t *region;
static fake_cuda_state_t *fake;

/* Opens REGION and the fake's state (made by cuInit); false (and a line
 * saying why) if not. */
static bool open_views(const char *path) {
  CUresult rc = cuInit(0);
  if (rc != CUDA_SUCCESS) {
    printf("setup=%s\n", rc_name(rc));
    return false;
  }
  tsr_status_t st = tsr_region_open(AT_FDCWD, path, 0, &region);
  if (st) {
    printf("setup=%s\n", tsr_status_message(st));
    tsr_status_free(st);
    return false;
  }
  char err[256];
  const char *fpath = getenv("FAKE_CUDA_STATE");
  if (!fpath || fake_cuda_state_open(fpath, 0, NULL, &fake, err, sizeof err) != 0) {
    printf("setup=FAKE_CUDA_STATE %s\n", fpath ? err : "unset");
    return false;
  }
  return true;
}

static uint64_t charged(void) {
  tsr_region_stats_t s;
  tsr_region_stats(region, &s);
  return s.used_bytes;
}

static uint64_t held(void) { return fake_cuda_state_pid_bytes(fake, (int32_t)getpid(), 0); }

static void *libcuda(void) {
  static void *h;
  if (!h) h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!h) h = dlopen("libcuda.so.1", RTLD_NOW);
  return h;
}

/* `name` at CUDA version `version` through cuGetProcAddress_v2, with the
 * per-thread default stream flag if `ptds`; NULL if not found. */
static void *proc(const char *name, int version, bool ptds) {
  void *p = NULL;
  CUdriverProcAddressQueryResult st;
  cuuint64_t flags = ptds ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : CU_GET_PROC_ADDRESS_DEFAULT;
  if (cuGetProcAddress_v2(name, &p, version, flags, &st) != CUDA_SUCCESS) return NULL;
  return p;
}

/* ---- stream capture ------------------------------------------------------- */

typedef CUresult (*begin_ptsz_fn)(CUstream, CUstreamCaptureMode);
typedef CUresult (*end_fn)(CUstream, CUgraph *);
typedef CUresult (*alloc_async_fn)(CUdeviceptr *, size_t, CUstream);
typedef CUresult (*instantiate_v1_fn)(CUgraphExec *, CUgraph, CUgraphNode *, char *, size_t);
typedef CUresult (*exec_fn)(CUgraphExec, CUstream);

static int run_captured(int argc, char **argv) {
  if ((argc != 5 && argc != 6) || !open_views(argv[2])) return 2;
  size_t chunk = (size_t)strtoull(argv[3], NULL, 10) * MIB;
  int first = argc == 6 ? atoi(argv[5]) : 0;
  int rounds = first + atoi(argv[4]);
  CUcontext ctx;
  CUstream s;
  CUmemoryPool pool;
  CUresult rc;
  if ((rc = cuDevicePrimaryCtxRetain(&ctx, 0)) != CUDA_SUCCESS || (rc = cuCtxSetCurrent(ctx)) != CUDA_SUCCESS ||
      (rc = cuStreamCreate(&s, CU_STREAM_NON_BLOCKING)) != CUDA_SUCCESS ||
      (rc = cuDeviceGetDefaultMemPool(&pool, 0)) != CUDA_SUCCESS) {
    printf("setup=%s\n", rc_name(rc));
    return 1;
  }
  begin_ptsz_fn begin_pt = (begin_ptsz_fn)proc("cuStreamBeginCapture", 10010, true);
  end_fn end_pt = (end_fn)proc("cuStreamEndCapture", 10000, true);
  alloc_async_fn alloc_pt = (alloc_async_fn)proc("cuMemAllocAsync", 11020, true);
  instantiate_v1_fn inst_v1 = (instantiate_v1_fn)dlsym(libcuda(), "cuGraphInstantiate");
  instantiate_v1_fn inst_v2 = (instantiate_v1_fn)proc("cuGraphInstantiate", 11000, false);
  exec_fn launch_pt = (exec_fn)proc("cuGraphLaunch", 10000, true);
  if (!begin_pt || !end_pt || !alloc_pt || !inst_v1 || !inst_v2 || !launch_pt) {
    printf("setup=entries %d%d%d%d%d%d\n", !!begin_pt, !!end_pt, !!alloc_pt, !!inst_v1, !!inst_v2, !!launch_pt);
    return 1;
  }
  const char *step = "none";
  rc = CUDA_SUCCESS;
  int r = first;
  for (; r < rounds; r++) {
    bool per_thread = r % 3 == 2;
    CUstream cs = per_thread ? NULL : s; /* NULL through the _ptsz entries: the per-thread stream */
    CUgraph g = NULL;
    step = "begin";
    if (r % 3 == 1) {
      if ((rc = cuGraphCreate(&g, 0)) == CUDA_SUCCESS)
        rc = cuStreamBeginCaptureToGraph(s, g, NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_GLOBAL);
    } else {
      rc = per_thread ? begin_pt(NULL, CU_STREAM_CAPTURE_MODE_GLOBAL)
                      : cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    }
    if (rc != CUDA_SUCCESS) break;
    step = "alloc";
    for (int k = 0; k < 2 && rc == CUDA_SUCCESS; k++) {
      CUdeviceptr p;
      rc = per_thread ? alloc_pt(&p, chunk, NULL)
           : r % 2    ? cuMemAllocFromPoolAsync(&p, chunk, pool, cs)
                      : cuMemAllocAsync(&p, chunk, cs);
    }
    CUgraph got = NULL;
    CUresult erc = per_thread ? end_pt(NULL, &got) : cuStreamEndCapture(s, &got);
    if (rc != CUDA_SUCCESS) break;
    step = "end";
    if ((rc = erc) != CUDA_SUCCESS) break;
    if (!g) g = got;
    step = "instantiate";
    CUgraphExec e = NULL;
    CUDA_GRAPH_INSTANTIATE_PARAMS ip;
    switch (r % 4) {
      case 0: rc = cuGraphInstantiateWithFlags(&e, g, 0); break;
      case 1:
        memset(&ip, 0, sizeof ip);
        ip.flags = CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD;
        ip.hUploadStream = s;
        rc = cuGraphInstantiateWithParams(&e, g, &ip);
        break;
      case 2: rc = inst_v1(&e, g, NULL, NULL, 0); break;
      default: rc = inst_v2(&e, g, NULL, NULL, 0); break;
    }
    if (rc != CUDA_SUCCESS) break;
    switch (r % 3) {
      case 0:
        step = "launch";
        rc = cuGraphLaunch(e, s);
        break;
      case 1:
        step = "upload";
        if ((rc = cuGraphUpload(e, s)) != CUDA_SUCCESS) break;
        step = "launch";
        rc = cuGraphLaunch(e, s);
        break;
      default:
        step = "launch";
        rc = launch_pt(e, NULL);
        break;
    }
    if (rc != CUDA_SUCCESS) break;
    step = "none";
  }
  cuStreamSynchronize(s);
  printf("rounds=%d step=%s rc=%s\n", r - first, step, rc_name(rc));
  printf("held=%" PRIu64 " charged=%" PRIu64 "\n", held(), charged());
  fflush(stdout);
  return 0;
}

/* ---- the old entries ------------------------------------------------------- */

typedef CUresult (*alloc32_fn)(unsigned int *, unsigned int);
typedef CUresult (*pitch32_fn)(unsigned int *, unsigned int *, unsigned int, unsigned int, unsigned int);
typedef CUresult (*free32_fn)(unsigned int);
typedef CUresult (*info32_fn)(unsigned int *, unsigned int *);
typedef CUresult (*total32_fn)(unsigned int *, CUdevice);
typedef CUresult (*ctx_create_fn)(CUcontext *, unsigned int, CUdevice);
typedef CUresult (*ctx_destroy_fn)(CUcontext);
typedef CUresult (*primary_fn)(CUdevice);
typedef struct {
  unsigned int Width, Height;
  CUarray_format Format;
  unsigned int NumChannels;
} array_desc_v1_t;
typedef struct {
  unsigned int Width, Height, Depth;
  CUarray_format Format;
  unsigned int NumChannels, Flags;
} array3d_desc_v1_t;
typedef CUresult (*array_v1_fn)(CUarray *, const array_desc_v1_t *);
typedef CUresult (*array3d_v1_fn)(CUarray *, const array3d_desc_v1_t *);

/* `name` by dlsym on the driver, or by cuGetProcAddress_v2 at `version`,
 * or by the CUDA 11.3 cuGetProcAddress at `version`. */
typedef enum { BY_DLSYM, BY_PROC, BY_PROC_V1 } route_t;
static const char *route_name[] = {"dlsym", "procaddr", "procaddr_v1"};

static void *find(const char *name, route_t by, int version) {
  if (by == BY_DLSYM) return dlsym(libcuda(), name);
  if (by == BY_PROC) return proc(name, version, false);
  CUresult (*gpa)(const char *, void **, int, cuuint64_t) =
      (CUresult(*)(const char *, void **, int, cuuint64_t))dlsym(libcuda(), "cuGetProcAddress");
  void *p = NULL;
  return gpa && gpa(name, &p, version, 0) == CUDA_SUCCESS ? p : NULL;
}

static int run_v1(int argc, char **argv) {
  if (argc != 3 || !open_views(argv[2])) return 2;
  CUresult rc;
  CUcontext ctx;
  for (route_t by = BY_DLSYM; by <= BY_PROC_V1; by++) {
    const char *rn = route_name[by];
    /* contexts: the CUDA 7 primary-context entries and cuCtxDestroy of
     * CUDA 2.0 free what the shim charged */
    primary_fn release = (primary_fn)find("cuDevicePrimaryCtxRelease", by, 10000);
    primary_fn reset = (primary_fn)find("cuDevicePrimaryCtxReset", by, 10000);
    ctx_destroy_fn destroy = (ctx_destroy_fn)find("cuCtxDestroy", by, 3020);
    ctx_create_fn create = (ctx_create_fn)find("cuCtxCreate", by, 3000);
    if (!release || !reset || !destroy || !create) {
      printf("%s_setup=entries %d%d%d%d\n", rn, !!release, !!reset, !!destroy, !!create);
      return 1;
    }
    uint64_t before = charged();
    cuDevicePrimaryCtxRetain(&ctx, 0);
    uint64_t mid = charged();
    rc = release(0);
    printf("%s_primary_release=%s charged=%" PRIu64 " credited=%" PRIu64 "\n", rn, rc_name(rc), mid - before,
           mid - charged());
    cuDevicePrimaryCtxRetain(&ctx, 0);
    cuDevicePrimaryCtxRetain(&ctx, 0);
    mid = charged();
    rc = reset(0);
    printf("%s_primary_reset=%s credited=%" PRIu64 "\n", rn, rc_name(rc), mid - charged());
    CUcontext c2;
    before = charged();
    rc = cuCtxCreate(&c2, NULL, 0, 0);
    mid = charged();
    CUresult drc = rc == CUDA_SUCCESS ? destroy(c2) : rc;
    printf("%s_ctx_destroy=%s charged=%" PRIu64 " credited=%" PRIu64 "\n", rn, rc_name(drc), mid - before,
           mid - charged());
    c2 = NULL;
    before = charged();
    rc = create(&c2, 0, 0);
    printf("%s_ctx_create=%s charged=%" PRIu64 " held_ctx=%d\n", rn, rc_name(rc), charged() - before, c2 != NULL);
    if (rc == CUDA_SUCCESS && c2) cuCtxDestroy(c2);
  }
  /* the 32-bit memory entries, with the primary context current */
  cuDevicePrimaryCtxRetain(&ctx, 0);
  cuCtxSetCurrent(ctx);
  for (route_t by = BY_DLSYM; by <= BY_PROC_V1; by++) {
    const char *rn = route_name[by];
    alloc32_fn alloc = (alloc32_fn)find("cuMemAlloc", by, 3000);
    pitch32_fn pitch = (pitch32_fn)find("cuMemAllocPitch", by, 3000);
    free32_fn mfree = (free32_fn)find("cuMemFree", by, 3000);
    info32_fn info = (info32_fn)find("cuMemGetInfo", by, 3000);
    total32_fn total = (total32_fn)find("cuDeviceTotalMem", by, 3000);
    array_v1_fn array = (array_v1_fn)find("cuArrayCreate", by, 3000);
    array3d_v1_fn array3d = (array3d_v1_fn)find("cuArray3DCreate", by, 3000);
    if (!alloc || !pitch || !mfree || !info || !total || !array || !array3d) {
      printf("%s_setup=entries %d%d%d%d%d%d%d\n", rn, !!alloc, !!pitch, !!mfree, !!info, !!total, !!array, !!array3d);
      return 1;
    }
    unsigned int p32 = 0, pitch32 = 0, f32 = 0, t32 = 0;
    printf("%s_alloc=%s\n", rn, rc_name(alloc(&p32, 64 << 20)));
    printf("%s_pitch=%s\n", rn, rc_name(pitch(&p32, &pitch32, 1 << 20, 64, 4)));
    printf("%s_free=%s\n", rn, rc_name(mfree(p32)));
    rc = info(&f32, &t32);
    printf("%s_meminfo=%s\n", rn, rc_name(rc));
    rc = total(&t32, 0);
    printf("%s_total=%s total_value=%u\n", rn, rc_name(rc), t32);
    /* 64 MiB arrays until refused (at most 64: 4 GiB) */
    array_desc_v1_t d = {4096, 4096, CU_AD_FORMAT_FLOAT, 1};
    array3d_desc_v1_t d3 = {1024, 1024, 16, CU_AD_FORMAT_FLOAT, 1, 0};
    CUarray arrays[64];
    int n = 0, n3 = 0;
    CUresult arc = CUDA_SUCCESS, arc3 = CUDA_SUCCESS;
    while (n < 64 && (arc = array(&arrays[n], &d)) == CUDA_SUCCESS) n++;
    printf("%s_array=%s arrays=%d held=%" PRIu64 "\n", rn, rc_name(arc), n, held());
    for (int i = 0; i < n; i++) cuArrayDestroy(arrays[i]);
    while (n3 < 64 && (arc3 = array3d(&arrays[n3], &d3)) == CUDA_SUCCESS) n3++;
    printf("%s_array3d=%s arrays=%d held=%" PRIu64 "\n", rn, rc_name(arc3), n3, held());
    for (int i = 0; i < n3; i++) cuArrayDestroy(arrays[i]);
  }
  printf("held=%" PRIu64 " charged=%" PRIu64 "\n", held(), charged());
  fflush(stdout);
  return 0;
}

/* ---- green contexts ------------------------------------------------------- */

typedef CUresult (*green_fn)(CUgreenCtx *, CUdevResourceDesc, CUdevice, unsigned int);

static int run_green(int argc, char **argv) {
  if (argc != 4 || !open_views(argv[2])) return 2;
  size_t chunk = (size_t)strtoull(argv[3], NULL, 10) * MIB;
  CUdevResource res;
  CUdevResourceDesc desc;
  CUresult rc;
  if ((rc = cuDeviceGetDevResource(0, &res, CU_DEV_RESOURCE_TYPE_SM)) != CUDA_SUCCESS ||
      (rc = cuDevResourceGenerateDesc(&desc, &res, 1)) != CUDA_SUCCESS) {
    printf("setup=%s\n", rc_name(rc));
    return 1;
  }
  green_fn routes[3] = {cuGreenCtxCreate, (green_fn)dlsym(libcuda(), "cuGreenCtxCreate"),
                        (green_fn)proc("cuGreenCtxCreate", 12040, false)};
  static const char *names[3] = {"linked", "dlsym", "procaddr"};
  CUgreenCtx green = NULL;
  for (int i = 0; i < 3; i++) {
    CUgreenCtx g = NULL;
    rc = routes[i] ? routes[i](&g, desc, 0, CU_GREEN_CTX_DEFAULT_STREAM) : CUDA_ERROR_NOT_FOUND;
    printf("green_%s=%s held=%" PRIu64 " charged=%" PRIu64 "\n", names[i], rc_name(rc), held(), charged());
    if (rc == CUDA_SUCCESS && !green)
      green = g;
    else if (rc == CUDA_SUCCESS)
      cuGreenCtxDestroy(g);
  }
  CUcontext ctx = NULL;
  if (green)
    rc = cuCtxFromGreenCtx(&ctx, green);
  else
    rc = cuDevicePrimaryCtxRetain(&ctx, 0);
  if (rc != CUDA_SUCCESS || (rc = cuCtxSetCurrent(ctx)) != CUDA_SUCCESS) {
    printf("setup=%s\n", rc_name(rc));
    return 1;
  }
  int n = 0;
  CUdeviceptr p;
  while (n < 256 && (rc = cuMemAlloc(&p, chunk)) == CUDA_SUCCESS) n++;
  printf("chunks=%d rc=%s in_green=%d\n", n, rc_name(rc), green != NULL);
  printf("held=%" PRIu64 " charged=%" PRIu64 "\n", held(), charged());
  fflush(stdout);
  return 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc >= 2 && strcmp(argv[1], "captured") == 0) return run_captured(argc, argv);
  if (argc >= 2 && strcmp(argv[1], "v1") == 0) return run_v1(argc, argv);
  if (argc >= 2 && strcmp(argv[1], "green") == 0) return run_green(argc, argv);
  fprintf(stderr, "usage: escape captured|v1|green REGION ...\n");
  return 2;
}
