/* paths.c: a CUDA driver-API program that allocates through every path the
 * shim hooks until the driver (or the shim) says out of memory, frees
 * through the other paths, and prints one "key=value" line per step for
 * shim.sh to check. Built against the real driver (-lcuda). */
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHECK(x)                          \
  do {                                    \
    CUresult r_ = (x);                    \
    if (r_ != CUDA_SUCCESS) {             \
      const char *s_ = "?";               \
      cuGetErrorName(r_, &s_);            \
      printf("error=%s at=%s\n", s_, #x); \
      return 1;                           \
    }                                     \
  } while (0)

/* Plain 256 MiB allocations until refused, all freed again: how many. */
static int count_plain(CUdeviceptr *p, int max, size_t chunk) {
  int n = 0;
  while (n < max && cuMemAlloc(&p[n], chunk) == CUDA_SUCCESS) n++;
  for (int i = 0; i < n; i++) cuMemFree(p[i]);
  return n;
}

int main(int argc, char **argv) {
  CUdevice dev;
  CUcontext ctx;
  CHECK(cuInit(0));
  CHECK(cuDeviceGet(&dev, 0));
  CHECK(cuCtxCreate(&ctx, NULL, 0, dev));
  size_t free_b = 0, total_b = 0;
  CHECK(cuMemGetInfo(&free_b, &total_b));
  if (argc > 1 && strcmp(argv[1], "exec-child") == 0) { /* the same process after an exec */
    printf("exec_child_free=%zu\n", free_b);
    return 0;
  }
  printf("meminfo_free=%zu meminfo_total=%zu\n", free_b, total_b);
  size_t dtotal = 0;
  CHECK(cuDeviceTotalMem(&dtotal, dev));
  printf("device_total=%zu\n", dtotal);
  /* plain allocations of 256 MiB until refused */
  enum { MAXP = 4096 };
  static CUdeviceptr p[MAXP];
  int n = 0;
  CUresult last = CUDA_SUCCESS;
  const size_t chunk = (size_t)256 << 20;
  while (n < MAXP && (last = cuMemAlloc(&p[n], chunk)) == CUDA_SUCCESS) n++;
  const char *name = "?";
  cuGetErrorName(last, &name);
  printf("plain_chunks=%d plain_bytes=%zu stopped_by=%s\n", n, (size_t)n * chunk, name);
  /* write into the memory: the allocations are real */
  if (n > 0) CHECK(cuMemsetD8(p[0], 7, chunk));
  /* free half of them through cuMemFreeAsync, half through cuMemFree */
  CUstream s;
  CHECK(cuStreamCreate(&s, 0));
  for (int i = 0; i < n; i++) {
    if (i % 2)
      CHECK(cuMemFreeAsync(p[i], s));
    else
      CHECK(cuMemFree(p[i]));
  }
  CHECK(cuStreamSynchronize(s));
  /* again, through the async allocator, after 20 rounds of mixed frees */
  int again = 0;
  for (int round = 0; round < 20; round++) {
    int m = 0;
    while (m < MAXP && cuMemAllocAsync(&p[m], chunk, s) == CUDA_SUCCESS) m++;
    CHECK(cuStreamSynchronize(s));
    for (int i = 0; i < m; i++) {
      if (i % 2)
        CHECK(cuMemFreeAsync(p[i], s));
      else
        CHECK(cuMemFree(p[i]));
    }
    CHECK(cuStreamSynchronize(s));
    again = m;
  }
  printf("async_chunks_after_20_rounds=%d\n", again);
  /* pitch and managed */
  CUdeviceptr q;
  size_t pitch = 0;
  CUresult pr = cuMemAllocPitch(&q, &pitch, (size_t)1 << 20, 512, 4);
  printf("pitch_512MiB=%s\n", pr == CUDA_SUCCESS ? "ok" : "refused");
  if (pr == CUDA_SUCCESS) CHECK(cuMemFree(q));
  int mchunks = 0;
  /* at most 32 (8 GiB): never ask for more managed memory than the card has */
  while (mchunks < 32 && cuMemAllocManaged(&p[mchunks], chunk, CU_MEM_ATTACH_GLOBAL) == CUDA_SUCCESS) mchunks++;
  printf("managed_chunks=%d\n", mchunks);
  for (int i = 0; i < mchunks; i++) CHECK(cuMemFree(p[i]));
  /* virtual memory: physical allocations until refused, then released */
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  static CUmemGenericAllocationHandle h[MAXP];
  int vchunks = 0;
  while (vchunks < MAXP && cuMemCreate(&h[vchunks], chunk, &prop, 0) == CUDA_SUCCESS) vchunks++;
  printf("vmm_chunks=%d\n", vchunks);
  for (int i = 0; i < vchunks; i++) CHECK(cuMemRelease(h[i]));
  /* a pool that keeps what is freed: its memory stays taken after the frees */
  CUmemPoolProps pp;
  memset(&pp, 0, sizeof pp);
  pp.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  pp.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  pp.location.id = 0;
  CUmemoryPool pool;
  CHECK(cuMemPoolCreate(&pool, &pp));
  cuuint64_t keep_all = ~(cuuint64_t)0;
  CHECK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep_all));
  int pchunks = 0;
  while (pchunks < MAXP && cuMemAllocFromPoolAsync(&p[pchunks], chunk, pool, s) == CUDA_SUCCESS) pchunks++;
  for (int i = 0; i < pchunks; i++) CHECK(cuMemFreeAsync(p[i], s));
  CHECK(cuStreamSynchronize(s));
  int after_pool = count_plain(p, MAXP, chunk);
  CHECK(cuMemPoolTrimTo(pool, 0));
  int after_trim = count_plain(p, MAXP, chunk);
  CHECK(cuMemPoolDestroy(pool));
  printf("pool_chunks=%d plain_while_pool_keeps=%d plain_after_trim=%d\n", pchunks, after_pool, after_trim);
  /* arrays: 4096 x 4096 float4, 1024 x 1024 x 64 uchar4 (256 MiB each) and
   * 13 mip levels of 4096 x 4096 float4 (342 MiB) */
  static CUarray arr[MAXP];
  CUDA_ARRAY_DESCRIPTOR ad = {4096, 4096, CU_AD_FORMAT_FLOAT, 4};
  int achunks = 0;
  while (achunks < MAXP && cuArrayCreate(&arr[achunks], &ad) == CUDA_SUCCESS) achunks++;
  for (int i = 0; i < achunks; i++) CHECK(cuArrayDestroy(arr[i]));
  CUDA_ARRAY3D_DESCRIPTOR a3 = {1024, 1024, 64, CU_AD_FORMAT_UNSIGNED_INT8, 4, 0};
  int a3chunks = 0;
  while (a3chunks < MAXP && cuArray3DCreate(&arr[a3chunks], &a3) == CUDA_SUCCESS) a3chunks++;
  for (int i = 0; i < a3chunks; i++) CHECK(cuArrayDestroy(arr[i]));
  static CUmipmappedArray mip[MAXP];
  CUDA_ARRAY3D_DESCRIPTOR md = {4096, 4096, 0, CU_AD_FORMAT_FLOAT, 4, 0};
  int mchunks2 = 0;
  while (mchunks2 < MAXP && cuMipmappedArrayCreate(&mip[mchunks2], &md, 13) == CUDA_SUCCESS) mchunks2++;
  for (int i = 0; i < mchunks2; i++) CHECK(cuMipmappedArrayDestroy(mip[i]));
  printf("array_chunks=%d array3d_chunks=%d mipmap_342MiB=%d plain_after_arrays=%d\n", achunks, a3chunks, mchunks2,
         count_plain(p, MAXP, chunk));
  /* graphs: one 256 MiB allocation node each, launched and not freed */
  static CUgraph g[MAXP];
  static CUgraphExec ge[MAXP];
  int gchunks = 0;
  CUresult gr = CUDA_SUCCESS;
  while (gchunks < MAXP) {
    CUDA_MEM_ALLOC_NODE_PARAMS np;
    memset(&np, 0, sizeof np);
    np.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    np.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    np.poolProps.location.id = 0;
    np.bytesize = chunk;
    CUgraphNode node;
    CHECK(cuGraphCreate(&g[gchunks], 0));
    gr = cuGraphAddMemAllocNode(&node, g[gchunks], NULL, 0, &np);
    if (gr == CUDA_SUCCESS) gr = cuGraphInstantiate(&ge[gchunks], g[gchunks], 0);
    if (gr == CUDA_SUCCESS) {
      gr = cuGraphLaunch(ge[gchunks], s);
      if (gr != CUDA_SUCCESS) cuGraphExecDestroy(ge[gchunks]);
    }
    if (gr != CUDA_SUCCESS) {
      cuGraphDestroy(g[gchunks]);
      break;
    }
    p[gchunks] = np.dptr;
    gchunks++;
  }
  CHECK(cuStreamSynchronize(s));
  cuGetErrorName(gr, &name);
  int plain_while_graphs = count_plain(p + gchunks, MAXP - gchunks, chunk);
  for (int i = 0; i < gchunks; i++) {
    CHECK(cuMemFreeAsync(p[i], s));
    CHECK(cuGraphExecDestroy(ge[i]));
    CHECK(cuGraphDestroy(g[i]));
  }
  CHECK(cuStreamSynchronize(s));
  CHECK(cuDeviceGraphMemTrim(dev));
  printf("graph_chunks=%d graph_stopped_by=%s plain_while_graphs=%d plain_after_graph_trim=%d\n", gchunks, name,
         plain_while_graphs, count_plain(p, MAXP, chunk));
  /* graphs captured from a stream: two 128 MiB stream-ordered allocations
   * each, instantiated (every other one uploading), launched (every other
   * one uploaded first), never freed */
  static CUgraph cg[MAXP / 2];
  static CUgraphExec ce[MAXP / 2];
  int cchunks = 0;
  const char *cstep = "none";
  CUresult cr = CUDA_SUCCESS;
  while (cchunks < MAXP / 2) {
    int k = cchunks;
    cstep = "begin";
    if ((cr = cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL)) != CUDA_SUCCESS) break;
    cstep = "alloc";
    CUresult ar = cuMemAllocAsync(&p[2 * k], chunk / 2, s);
    if (ar == CUDA_SUCCESS) ar = cuMemAllocAsync(&p[2 * k + 1], chunk / 2, s);
    cr = cuStreamEndCapture(s, &cg[k]);
    if (ar != CUDA_SUCCESS) cr = ar;
    if (cr != CUDA_SUCCESS) {
      if (cg[k]) cuGraphDestroy(cg[k]);
      break;
    }
    cstep = "instantiate";
    if (k % 2) {
      CUDA_GRAPH_INSTANTIATE_PARAMS ip;
      memset(&ip, 0, sizeof ip);
      ip.flags = CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD;
      ip.hUploadStream = s;
      cr = cuGraphInstantiateWithParams(&ce[k], cg[k], &ip);
    } else {
      cr = cuGraphInstantiate(&ce[k], cg[k], 0);
    }
    if (cr == CUDA_SUCCESS && k % 4 >= 2) {
      cstep = "upload";
      cr = cuGraphUpload(ce[k], s);
    }
    if (cr == CUDA_SUCCESS) {
      cstep = "launch";
      cr = cuGraphLaunch(ce[k], s);
    }
    if (cr != CUDA_SUCCESS) {
      cuGraphExecDestroy(ce[k]);
      cuGraphDestroy(cg[k]);
      break;
    }
    cchunks++;
  }
  CHECK(cuStreamSynchronize(s));
  cuGetErrorName(cr, &name);
  int plain_while_captured = count_plain(p + 2 * cchunks, MAXP - 2 * cchunks, chunk);
  for (int i = 0; i < cchunks; i++) {
    CHECK(cuMemFreeAsync(p[2 * i], s));
    CHECK(cuMemFreeAsync(p[2 * i + 1], s));
    CHECK(cuGraphExecDestroy(ce[i]));
    CHECK(cuGraphDestroy(cg[i]));
  }
  CHECK(cuStreamSynchronize(s));
  CHECK(cuDeviceGraphMemTrim(dev));
  printf(
      "captured_chunks=%d captured_step=%s captured_stopped_by=%s plain_while_captured=%d "
      "plain_after_captured_trim=%d\n",
      cchunks, cstep, name, plain_while_captured, count_plain(p, MAXP, chunk));
  /* the entries of the CUDA 2.0 ABI (32-bit sizes and pointers) and the
   * older versions of hooked entries, found by dlsym on the driver and by
   * cuGetProcAddress at an old version */
  void *lib = dlopen("libcuda.so.1", RTLD_NOW);
  typedef CUresult (*alloc32_fn)(unsigned int *, unsigned int);
  typedef CUresult (*ctx32_fn)(CUcontext *, unsigned int, CUdevice);
  typedef CUresult (*total32_fn)(unsigned int *, CUdevice);
  typedef CUresult (*destroy1_fn)(CUcontext);
  typedef CUresult (*release1_fn)(CUdevice);
  typedef struct {
    unsigned int Width, Height;
    CUarray_format Format;
    unsigned int NumChannels;
  } desc1_t;
  typedef CUresult (*array1_fn)(CUarray *, const desc1_t *);
  void *f1 = NULL;
  CUdriverProcAddressQueryResult qs;
  alloc32_fn alloc1 = lib ? (alloc32_fn)dlsym(lib, "cuMemAlloc") : NULL;
  alloc32_fn alloc1p = cuGetProcAddress("cuMemAlloc", &f1, 3000, 0, &qs) == CUDA_SUCCESS ? (alloc32_fn)f1 : NULL;
  ctx32_fn create1 = lib ? (ctx32_fn)dlsym(lib, "cuCtxCreate") : NULL;
  total32_fn total1 = lib ? (total32_fn)dlsym(lib, "cuDeviceTotalMem") : NULL;
  destroy1_fn destroy1 = lib ? (destroy1_fn)dlsym(lib, "cuCtxDestroy") : NULL;
  release1_fn release1 =
      cuGetProcAddress("cuDevicePrimaryCtxRelease", &f1, 10000, 0, &qs) == CUDA_SUCCESS ? (release1_fn)f1 : NULL;
  array1_fn array1 = cuGetProcAddress("cuArrayCreate", &f1, 3000, 0, &qs) == CUDA_SUCCESS ? (array1_fn)f1 : NULL;
  unsigned int p32 = 0, t32 = 0;
  const char *n1 = "absent", *n2 = "absent", *n3 = "absent", *n4 = "absent";
  if (alloc1) cuGetErrorName(alloc1(&p32, 64 << 20), &n1);
  if (alloc1p) cuGetErrorName(alloc1p(&p32, 64 << 20), &n2);
  CUcontext c1 = NULL;
  if (create1) cuGetErrorName(create1(&c1, 0, dev), &n3);
  if (create1 && c1) cuCtxDestroy(c1);
  if (total1) cuGetErrorName(total1(&t32, dev), &n4);
  printf("v1_alloc_dlsym=%s v1_alloc_procaddr=%s v1_ctx_create=%s v1_total=%s v1_total_value=%u\n", n1, n2, n3, n4,
         t32);
  /* 256 MiB arrays through the CUDA 2.0 entry */
  desc1_t d1 = {8192, 8192, CU_AD_FORMAT_FLOAT, 1};
  int a1 = 0;
  CUresult a1r = CUDA_ERROR_NOT_FOUND;
  while (array1 && a1 < MAXP && (a1r = array1(&arr[a1], &d1)) == CUDA_SUCCESS) a1++;
  cuGetErrorName(a1r, &name);
  printf("v1_array_chunks=%d v1_array_stopped_by=%s\n", a1, name);
  for (int i = 0; i < a1; i++) CHECK(cuArrayDestroy(arr[i]));
  /* contexts given back through the old entries: 4 primary contexts
   * released by CUDA 7's entry, 4 contexts destroyed by CUDA 2.0's; what
   * they were charged must come back */
  CUresult rr = CUDA_ERROR_NOT_FOUND, dr = CUDA_ERROR_NOT_FOUND;
  for (int i = 0; i < 4 && release1 && destroy1; i++) {
    CUcontext pc, cc;
    CHECK(cuDevicePrimaryCtxRetain(&pc, dev));
    rr = release1(dev);
    CHECK(cuCtxCreate(&cc, NULL, 0, dev));
    dr = destroy1(cc);
  }
  CHECK(cuCtxSetCurrent(ctx));
  const char *rn = "?", *dn = "?";
  cuGetErrorName(rr, &rn);
  cuGetErrorName(dr, &dn);
  printf("v1_primary_release=%s v1_ctx_destroy=%s plain_after_v1_contexts=%d\n", rn, dn, count_plain(p, MAXP, chunk));
#if CUDA_VERSION >= 12040
  /* a green context: a context the driver makes from the primary one */
  CUdevResource res;
  CUdevResourceDesc rdesc;
  CUgreenCtx green = NULL;
  CUresult grc = cuDeviceGetDevResource(dev, &res, CU_DEV_RESOURCE_TYPE_SM);
  if (grc == CUDA_SUCCESS) grc = cuDevResourceGenerateDesc(&rdesc, &res, 1);
  if (grc == CUDA_SUCCESS) grc = cuGreenCtxCreate(&green, rdesc, dev, CU_GREEN_CTX_DEFAULT_STREAM);
  cuGetErrorName(grc, &name);
  printf("green_ctx=%s\n", name);
  if (grc == CUDA_SUCCESS) CHECK(cuGreenCtxDestroy(green));
#endif
  /* limits: a 64 KiB stack for every thread the device holds (16.5 GiB on
   * an H100), a 1 GiB malloc heap */
  CUresult sr = cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 65536);
  cuGetErrorName(sr, &name);
  printf("stack_64KiB=%s\n", name);
  if (sr == CUDA_SUCCESS) CHECK(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 1024));
  CUresult hr = cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, (size_t)1 << 30);
  cuGetErrorName(hr, &name);
  printf("heap_1GiB=%s plain_with_heap=%d\n", name, count_plain(p, MAXP, chunk));
  if (hr == CUDA_SUCCESS) CHECK(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, (size_t)8 << 20));
  /* contexts: each takes about half a GiB; at most 12 more */
  static CUcontext extra[12];
  int nctx = 0;
  while (nctx < 12 && cuCtxCreate(&extra[nctx], NULL, 0, dev) == CUDA_SUCCESS) {
    CUcontext popped;
    CHECK(cuCtxPopCurrent(&popped));
    nctx++;
  }
  for (int i = 0; i < nctx; i++) CHECK(cuCtxDestroy(extra[i]));
  printf("extra_contexts=%d plain_after_contexts=%d\n", nctx, count_plain(p, MAXP, chunk));
  /* modules: static data declared by the image, 1 GiB each, at most 16 */
  static const char ptx[] =
      ".version 8.0\n.target sm_90\n.address_size 64\n"
      ".visible .global .align 8 .b8 big[1073741824];\n"
      ".visible .entry touch() { ret; }\n";
  static CUmodule mods[16];
  int nmod = 0;
  while (nmod < 16 && cuModuleLoadData(&mods[nmod], ptx) == CUDA_SUCCESS) nmod++;
  int plain_while_modules = count_plain(p, MAXP, chunk);
  for (int i = 0; i < nmod; i++) CHECK(cuModuleUnload(mods[i]));
  static CUlibrary libs[16];
  int nlib = 0;
  while (nlib < 16 && cuLibraryLoadData(&libs[nlib], ptx, NULL, NULL, 0, NULL, NULL, 0) == CUDA_SUCCESS) {
    CUkernel k; /* a library's data is taken when it is used in a context */
    if (cuLibraryGetKernel(&k, libs[nlib], "touch") != CUDA_SUCCESS) break;
    CUfunction f;
    if (cuKernelGetFunction(&f, k) != CUDA_SUCCESS) break;
    nlib++;
  }
  for (int i = 0; i < nlib; i++) CHECK(cuLibraryUnload(libs[i]));
  printf("modules_1GiB=%d plain_while_modules=%d libraries_1GiB=%d plain_after_modules=%d\n", nmod, plain_while_modules,
         nlib, count_plain(p, MAXP, chunk));
  /* the same from a zstd-compressed fatbin (nvcc 13's default), named by
   * TSR_PATHS_FATBIN: statics.cu, made with
   *   nvcc -fatbin -Xfatbin -compress-all -gencode arch=compute_80,code=sm_80 \
   *     -gencode 'arch=compute_90,code=[sm_90,compute_90]' -o statics_zstd.fatbin statics.cu
   * 1 GiB in the sm_90 code, 256 MiB in the sm_80 code */
  const char *fatbin_path = getenv("TSR_PATHS_FATBIN");
  FILE *ff = fatbin_path ? fopen(fatbin_path, "rb") : NULL;
  if (ff) {
    static char fatbin[1 << 16];
    size_t fn = fread(fatbin, 1, sizeof(fatbin), ff);
    fclose(ff);
    int nfat = 0, nfile = 0;
    while (fn > 0 && nfat < 16 && cuModuleLoadData(&mods[nfat], fatbin) == CUDA_SUCCESS) nfat++;
    int plain_while_fatbins = count_plain(p, MAXP, chunk);
    for (int i = 0; i < nfat; i++) CHECK(cuModuleUnload(mods[i]));
    while (nfile < 16 && cuModuleLoad(&mods[nfile], fatbin_path) == CUDA_SUCCESS) nfile++;
    for (int i = 0; i < nfile; i++) CHECK(cuModuleUnload(mods[i]));
    printf("fatbin_modules_1GiB=%d plain_while_fatbins=%d fatbin_files_1GiB=%d plain_after_fatbins=%d\n", nfat,
           plain_while_fatbins, nfile, count_plain(p, MAXP, chunk));
  }
  /* what ends with a context or a pool. The primary
   * context reset with chunks held: the lease is whole again, and frees of
   * the old pointers are not credited twice. */
  static CUdeviceptr held[MAXP];
  CUcontext prim;
  CHECK(cuDevicePrimaryCtxRetain(&prim, dev));
  CHECK(cuCtxSetCurrent(prim));
  int reset_held = 0;
  while (reset_held < MAXP && cuMemAlloc(&held[reset_held], chunk) == CUDA_SUCCESS) reset_held++;
  CHECK(cuDevicePrimaryCtxReset(dev));
  CHECK(cuDevicePrimaryCtxRetain(&prim, dev));
  CHECK(cuCtxSetCurrent(prim));
  for (int i = 0; i < reset_held; i++) cuMemFree(held[i]); /* freed by the reset already */
  int reset_after = count_plain(p, MAXP, chunk);
  CHECK(cuDevicePrimaryCtxRelease(dev));
  CHECK(cuCtxSetCurrent(ctx));
  printf("reset_held=%d reset_after=%d\n", reset_held, reset_after);
  /* a created context destroyed with chunks held */
  CUcontext doomed;
  CHECK(cuCtxCreate(&doomed, NULL, 0, dev));
  int destroy_held = 0;
  while (destroy_held < MAXP && cuMemAlloc(&held[destroy_held], chunk) == CUDA_SUCCESS) destroy_held++;
  CHECK(cuCtxDestroy(doomed));
  CHECK(cuCtxSetCurrent(ctx));
  for (int i = 0; i < destroy_held; i++) cuMemFree(held[i]); /* freed by the destroy already */
  printf("destroy_held=%d destroy_after=%d\n", destroy_held, count_plain(p, MAXP, chunk));
  /* a pool destroyed while its blocks are alive: they stay charged until freed */
  CHECK(cuMemPoolCreate(&pool, &pp));
  int live_blocks = 0;
  while (live_blocks < MAXP && cuMemAllocFromPoolAsync(&held[live_blocks], chunk, pool, s) == CUDA_SUCCESS)
    live_blocks++;
  CHECK(cuStreamSynchronize(s));
  CHECK(cuMemPoolDestroy(pool));
  int plain_beside_blocks = count_plain(p, MAXP, chunk);
  for (int i = 0; i < live_blocks; i++) CHECK(cuMemFreeAsync(held[i], s));
  CHECK(cuStreamSynchronize(s));
  printf("pool_live_blocks=%d plain_beside_destroyed_pool=%d plain_after_blocks_freed=%d\n", live_blocks,
         plain_beside_blocks, count_plain(p, MAXP, chunk));
  CHECK(cuMemGetInfo(&free_b, &total_b));
  printf("end_meminfo_free=%zu\n", free_b);
  CHECK(cuStreamDestroy(s));
  CHECK(cuCtxDestroy(ctx));
  printf("done=1\n");
  /* exec with 256 MiB and a context held: the new image must see them back */
  CHECK(cuCtxCreate(&ctx, NULL, 0, dev));
  CHECK(cuMemAlloc(&p[0], chunk));
  fflush(stdout);
  execl("/proc/self/exe", argv[0], "exec-child", (char *)NULL);
  printf("error=exec\n");
  return 1;
}
