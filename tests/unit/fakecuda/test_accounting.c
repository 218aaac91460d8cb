/* unit.fakecuda_accounting: every path that takes device memory is charged
 * what the fake says it is, and every path that frees gives back exactly
 * that, down to zero; an allocation that does not fit takes nothing. */
#include <string.h>

#include "fc_test.h"

static const char ptx_64m[] =
    ".version 7.0\n.target sm_52\n.address_size 64\n"
    ".visible .global .align 4 .b8 big[67108864];\n"
    ".visible .global .align 8 .u64 table[4][8];\n"
    ".visible .entry k1()\n{\n  ret;\n}\n"
    ".visible .entry k2(.param .u64 p)\n{\n  ret;\n}\n";

Test(accounting, mem_alloc_and_free) {
  fc_start("8GiB", "0");
  cr_assert_eq(fc_used(), 0);
  CUdeviceptr a, b;
  CU_OK(cuMemAlloc(&a, 3 * MiB + 5));
  cr_assert_eq(fc_used(), 3 * MiB + 5, "exact bytes by default");
  CU_OK(cuMemAlloc(&b, 1 * GiB));
  cr_assert_eq(fc_used(), GiB + 3 * MiB + 5);
  CU_OK(cuMemFree(a));
  CU_OK(cuMemFree(b));
  cr_assert_eq(fc_used(), 0);
}

Test(accounting, granule_rounds_each_allocation) {
  setenv("FAKE_CUDA_ALLOC_GRANULE", "2MiB", 1);
  fc_start("8GiB", "0");
  CUdeviceptr a, b;
  CU_OK(cuMemAlloc(&a, 1));
  CU_OK(cuMemAlloc(&b, 2 * MiB + 1));
  cr_assert_eq(fc_used(), 2 * MiB + 4 * MiB);
  CU_OK(cuMemFree(a));
  CU_OK(cuMemFree(b));
  cr_assert_eq(fc_used(), 0);
}

Test(accounting, pitch_managed_and_host) {
  fc_start("8GiB", "0");
  CUdeviceptr p, m;
  size_t pitch = 0;
  CU_OK(cuMemAllocPitch(&p, &pitch, 1000, 3, 16));
  cr_assert_eq(pitch, 1024, "rows padded to 512 bytes");
  cr_assert_eq(fc_used(), 3 * 1024);
  CU_OK(cuMemAllocManaged(&m, 64 * MiB, CU_MEM_ATTACH_GLOBAL));
  cr_assert_eq(fc_used(), 3 * 1024 + 64 * MiB, "managed memory is charged in full");
  void *h;
  CU_OK(cuMemAllocHost(&h, 64 * MiB));
  cr_assert_eq(fc_used(), 3 * 1024 + 64 * MiB, "pinned host memory is not device memory");
  memset(h, 1, 4096);
  CU_OK(cuMemFreeHost(h));
  CU_OK(cuMemFree(p));
  CU_OK(cuMemFree(m));
  cr_assert_eq(fc_used(), 0);
}

Test(accounting, context_footprint) {
  CUcontext primary = fc_start("8GiB", "512MiB");
  cr_assert_eq(fc_used(), 512 * MiB, "the primary context");
  CUcontext c2;
  CU_OK(cuCtxCreate(&c2, NULL, 0, 0));
  cr_assert_eq(fc_used(), 1024 * MiB, "a second context takes another footprint");
  CU_OK(cuCtxDestroy(c2));
  CUcontext cur;
  CU_OK(cuCtxGetCurrent(&cur));
  cr_assert_eq(cur, primary, "destroying the current context pops it off the stack");
  cr_assert_eq(fc_used(), 512 * MiB);
}

Test(accounting, context_destroy_frees_everything_it_holds) {
  CUcontext primary = fc_start("8GiB", "0");
  CUcontext c;
  CU_OK(cuCtxCreate(&c, NULL, 0, 0));
  CUdeviceptr d, m, a;
  size_t pitch;
  CU_OK(cuMemAlloc(&d, 10 * MiB));
  CU_OK(cuMemAllocPitch(&d, &pitch, 512, 1024, 4));
  CU_OK(cuMemAllocManaged(&m, 10 * MiB, CU_MEM_ATTACH_GLOBAL));
  CU_OK(cuMemAllocAsync(&a, 10 * MiB, NULL));
  CUarray arr;
  CUDA_ARRAY_DESCRIPTOR ad = {1024, 1024, CU_AD_FORMAT_FLOAT, 1};
  CU_OK(cuArrayCreate(&arr, &ad));
  CUmodule mod;
  CU_OK(cuModuleLoadData(&mod, ptx_64m));
  CU_OK(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 72 * MiB));
  size_t used = fc_used();
  cr_assert_eq(used, 10 * MiB + 512 * 1024 + 10 * MiB + 10 * MiB + 4 * MiB + 64 * MiB + 256 + 64 * MiB);
  CU_OK(cuCtxDestroy(c));
  CU_OK(cuCtxSetCurrent(primary));
  cr_assert_eq(fc_used(), 0, "a destroyed context gives back every byte");
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemFree(d));
  CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuArrayDestroy(arr));
  CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuModuleUnload(mod));
}

Test(accounting, primary_release_and_reset) {
  setenv("FAKE_CUDA_CTX_BYTES", "512MiB", 1);
  CU_OK(cuInit(0));
  CUcontext p, c2;
  CU_OK(cuDevicePrimaryCtxRetain(&p, 0));
  CU_OK(cuCtxSetCurrent(p));
  CUdeviceptr d;
  CU_OK(cuMemAlloc(&d, 100 * MiB));
  CU_OK(cuCtxCreate(&c2, NULL, 0, 0)); /* a second context to look through */
  cr_assert_eq(fc_used(), 1124 * MiB);
  CU_OK(cuDevicePrimaryCtxRelease(0));
  cr_assert_eq(fc_used(), 512 * MiB, "the last release destroys the primary context");
  int active = 1;
  unsigned flags;
  CU_OK(cuDevicePrimaryCtxGetState(0, &flags, &active));
  cr_assert_eq(active, 0);
  CU_OK(cuDevicePrimaryCtxRetain(&p, 0));
  CU_OK(cuDevicePrimaryCtxRetain(&p, 0));
  CU_OK(cuCtxPushCurrent(p));
  CU_OK(cuMemAlloc(&d, 100 * MiB));
  CU_OK(cuCtxPopCurrent(NULL));
  cr_assert_eq(fc_used(), 1124 * MiB);
  CU_OK(cuDevicePrimaryCtxReset(0));
  cr_assert_eq(fc_used(), 512 * MiB, "a reset destroys it whatever the retain count");
  CU_OK(cuCtxSetCurrent(p));
  CU_EXPECT(CUDA_ERROR_CONTEXT_IS_DESTROYED, cuMemAlloc(&d, 1));
  CU_EXPECT(CUDA_ERROR_INVALID_CONTEXT, cuDevicePrimaryCtxRelease(0));
}

Test(accounting, stream_ordered_paths) {
  fc_start("8GiB", "0");
  CUstream s;
  CU_OK(cuStreamCreate(&s, 0));
  CUdeviceptr a, b, c;
  CU_OK(cuMemAllocAsync(&a, 64 * MiB, s));
  cr_assert_eq(fc_used(), 64 * MiB);
  CU_OK(cuMemFreeAsync(a, s));
  cr_assert_eq(fc_used(), 64 * MiB, "freed memory stays in the pool until a synchronize");
  CU_OK(cuStreamSynchronize(s));
  cr_assert_eq(fc_used(), 0, "release threshold 0: all of it goes back");

  /* a cuMemAlloc pointer freed stream-ordered, an async one freed by cuMemFree */
  CU_OK(cuMemAlloc(&b, 32 * MiB));
  CU_OK(cuMemFreeAsync(b, s));
  cr_assert_eq(fc_used(), 0);
  CU_OK(cuMemAllocAsync(&c, 16 * MiB, CU_STREAM_PER_THREAD));
  CU_OK(cuMemFree(c));
  CU_OK(cuCtxSynchronize());
  cr_assert_eq(fc_used(), 0);

  /* a pool that keeps what it is given back, until it is trimmed */
  CUmemoryPool dp;
  CU_OK(cuDeviceGetDefaultMemPool(&dp, 0));
  cuuint64_t keep = UINT64_MAX, v = 0;
  CU_OK(cuMemPoolSetAttribute(dp, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep));
  CU_OK(cuMemAllocAsync(&a, 64 * MiB, s));
  CU_OK(cuMemFreeAsync(a, s));
  CU_OK(cuStreamSynchronize(s));
  cr_assert_eq(fc_used(), 64 * MiB);
  CU_OK(cuMemPoolGetAttribute(dp, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &v));
  cr_assert_eq(v, 64 * MiB);
  CU_OK(cuMemPoolGetAttribute(dp, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &v));
  /* the H100 (driver 580) never takes a pool pointer freed by cuMemFree (c,
   * above) off "used"; cuMemFreeAsync (a) it does */
  cr_assert_eq(v, 16 * MiB);
  CU_OK(cuMemAllocAsync(&a, 48 * MiB, s));
  cr_assert_eq(fc_used(), 64 * MiB, "an allocation reuses what the pool holds");
  CU_OK(cuMemPoolTrimTo(dp, 0));
  cr_assert_eq(fc_used(), 48 * MiB, "a trim keeps what is in use");
  CU_OK(cuMemFreeAsync(a, s));
  CU_OK(cuMemPoolTrimTo(dp, 0));
  cr_assert_eq(fc_used(), 0);
  CU_OK(cuStreamDestroy(s));
}

Test(accounting, user_pool_and_its_destruction) {
  fc_start("8GiB", "0");
  CUmemPoolProps pp;
  memset(&pp, 0, sizeof pp);
  pp.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  pp.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  CUmemoryPool up;
  CU_OK(cuMemPoolCreate(&up, &pp));
  CUdeviceptr a, b;
  CU_OK(cuMemAllocFromPoolAsync(&a, 100 * MiB, up, NULL));
  CU_OK(cuMemAllocFromPoolAsync(&b, 28 * MiB, up, NULL));
  cr_assert_eq(fc_used(), 128 * MiB);
  CU_OK(cuMemPoolDestroy(up));
  cr_assert_eq(fc_used(), 128 * MiB, "a destroyed pool lives while its allocations do");
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemAllocFromPoolAsync(&a, 1, up, NULL));
  CU_OK(cuMemFreeAsync(b, NULL));
  cr_assert_eq(fc_used(), 100 * MiB, "and gives back each one at once");
  CU_OK(cuMemFree(a));
  cr_assert_eq(fc_used(), 0);
}

Test(accounting, vmm) {
  fc_start("8GiB", "0");
  CUmemAllocationProp ap;
  memset(&ap, 0, sizeof ap);
  ap.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  ap.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  size_t g = 0;
  CU_OK(cuMemGetAllocationGranularity(&g, &ap, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  cr_assert_eq(g, 2 * MiB);
  CUmemGenericAllocationHandle h1, h2;
  CU_OK(cuMemCreate(&h1, 64 * MiB, &ap, 0));
  cr_assert_eq(fc_used(), 64 * MiB, "cuMemCreate takes the memory");
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemCreate(&h2, 3 * MiB, &ap, 0));
  cr_assert_eq(fc_used(), 64 * MiB);
  CUdeviceptr va;
  CU_OK(cuMemAddressReserve(&va, 128 * MiB, 0, 0, 0));
  cr_assert_eq(fc_used(), 64 * MiB, "address space is not memory");
  CU_OK(cuMemMap(va, 64 * MiB, 0, h1, 0));
  CU_OK(cuMemMap(va + 64 * MiB, 32 * MiB, 32 * MiB, h1, 0)); /* the second half again */
  CUmemAccessDesc acc = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  CU_OK(cuMemSetAccess(va, 96 * MiB, &acc, 1));
  /* both mappings of one handle are the same memory */
  unsigned char in[16] = {7, 7, 7}, out[16] = {0};
  CU_OK(cuMemcpyHtoD(va + 64 * MiB, in, sizeof in));
  CU_OK(cuMemcpyDtoH(out, va + 32 * MiB, sizeof out));
  cr_assert_arr_eq(in, out, sizeof in);
  cr_assert_eq(((unsigned char *)(uintptr_t)va)[32 * MiB], 7);
  CU_OK(cuMemRelease(h1));
  cr_assert_eq(fc_used(), 64 * MiB, "a released handle lives while it is mapped");
  CU_OK(cuMemUnmap(va, 64 * MiB));
  cr_assert_eq(fc_used(), 64 * MiB);
  CU_OK(cuMemUnmap(va + 64 * MiB, 32 * MiB));
  cr_assert_eq(fc_used(), 0, "its last unmap gives it back");
  CU_OK(cuMemAddressFree(va, 128 * MiB));
}

Test(accounting, arrays) {
  fc_start("8GiB", "0");
  CUarray a, b, c;
  CUDA_ARRAY_DESCRIPTOR d2 = {4096, 4096, CU_AD_FORMAT_FLOAT, 4};
  CU_OK(cuArrayCreate(&a, &d2));
  cr_assert_eq(fc_used(), 256 * MiB);
  CUDA_ARRAY3D_DESCRIPTOR d3 = {1024, 1024, 64, CU_AD_FORMAT_UNSIGNED_INT8, 4, 0};
  CU_OK(cuArray3DCreate(&b, &d3));
  cr_assert_eq(fc_used(), 512 * MiB);
  CUDA_ARRAY_DESCRIPTOR d1 = {1000, 0, CU_AD_FORMAT_HALF, 2};
  CU_OK(cuArrayCreate(&c, &d1));
  cr_assert_eq(fc_used(), 512 * MiB + 4000, "a 1D array: height 0 counts as 1");
  CUmipmappedArray m;
  CUDA_ARRAY3D_DESCRIPTOR dm = {1024, 512, 0, CU_AD_FORMAT_SIGNED_INT32, 1, 0};
  CU_OK(cuMipmappedArrayCreate(&m, &dm, 99)); /* clamped to 11 levels */
  size_t mip = 0;
  for (int l = 0; l < 11; l++) {
    size_t w = 1024 >> l, h = 512 >> l;
    mip += (w ? w : 1) * (h ? h : 1) * 4;
  }
  cr_assert_eq(fc_used(), 512 * MiB + 4000 + mip);
  CU_OK(cuMipmappedArrayDestroy(m));
  CU_OK(cuArrayDestroy(c));
  CU_OK(cuArrayDestroy(b));
  CU_OK(cuArrayDestroy(a));
  cr_assert_eq(fc_used(), 0);
}

static CUgraph alloc_graph(size_t bytes, bool with_free, CUdeviceptr *out_ptr) {
  CUgraph g;
  CU_OK(cuGraphCreate(&g, 0));
  CUDA_MEM_ALLOC_NODE_PARAMS p;
  memset(&p, 0, sizeof p);
  p.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.bytesize = bytes;
  CUgraphNode an, fn;
  CU_OK(cuGraphAddMemAllocNode(&an, g, NULL, 0, &p));
  cr_assert_neq(p.dptr, 0);
  if (with_free) CU_OK(cuGraphAddMemFreeNode(&fn, g, &an, 1, p.dptr));
  *out_ptr = p.dptr;
  return g;
}

Test(accounting, graph_memory_nodes) {
  fc_start("8GiB", "0");
  CUstream s;
  CU_OK(cuStreamCreate(&s, 0));
  CUdeviceptr p;
  CUgraph g = alloc_graph(64 * MiB, true, &p);
  cr_assert_eq(fc_used(), 0, "adding nodes takes nothing");
  CUgraphExec e;
  CU_OK(cuGraphInstantiate(&e, g, 0));
  cr_assert_eq(fc_used(), 0, "nor does instantiating");
  CU_OK(cuGraphLaunch(e, s));
  CU_OK(cuStreamSynchronize(s));
  cr_assert_eq(fc_used(), 64 * MiB, "the graph cache keeps what the free node gave back");
  CU_OK(cuGraphLaunch(e, s));
  cr_assert_eq(fc_used(), 64 * MiB, "a second launch reuses it");
  CU_OK(cuDeviceGraphMemTrim(0));
  cr_assert_eq(fc_used(), 0);
  CU_OK(cuGraphExecDestroy(e));
  CU_OK(cuGraphDestroy(g));

  /* no free node: the allocation outlives the launch, holds data, and is
   * freed by cuMemFreeAsync, cuMemFree, or a free node of another graph */
  g = alloc_graph(32 * MiB, false, &p);
  CU_OK(cuGraphInstantiate(&e, g, 0));
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemcpyHtoD(p, "x", 1)); /* not allocated yet */
  CU_OK(cuGraphLaunch(e, s));
  cr_assert_eq(fc_used(), 32 * MiB);
  CU_OK(cuMemcpyHtoD(p + 100, "abc", 4));
  cr_assert_str_eq((char *)(uintptr_t)(p + 100), "abc");
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuGraphLaunch(e, s));
  CU_OK(cuMemFreeAsync(p, s));
  CU_OK(cuStreamSynchronize(s));
  cr_assert_eq(fc_used(), 32 * MiB, "a synchronize does not trim the graph cache");
  CU_OK(cuDeviceGraphMemTrim(0));
  cr_assert_eq(fc_used(), 0);
  CU_OK(cuGraphLaunch(e, s));
  CU_OK(cuMemFree(p));
  CU_OK(cuDeviceGraphMemTrim(0));
  cr_assert_eq(fc_used(), 0);

  CUgraph g2;
  CU_OK(cuGraphCreate(&g2, 0));
  CUgraphNode fn;
  CU_OK(cuGraphAddMemFreeNode(&fn, g2, NULL, 0, p));
  CUgraphExec e2;
  CU_OK(cuGraphInstantiateWithFlags(&e2, g2, 0));
  CU_OK(cuGraphLaunch(e, s));
  /* the owning graph goes; its live allocation stays until freed */
  CU_OK(cuGraphExecDestroy(e));
  CU_OK(cuGraphDestroy(g));
  cr_assert_eq(fc_used(), 32 * MiB);
  CU_OK(cuGraphLaunch(e2, s));
  CU_OK(cuDeviceGraphMemTrim(0));
  cr_assert_eq(fc_used(), 0);
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemFree(p));
  CU_OK(cuGraphExecDestroy(e2));
  CU_OK(cuGraphDestroy(g2));
}

Test(accounting, graph_auto_free_on_launch) {
  fc_start("8GiB", "0");
  CUdeviceptr p;
  CUgraph g = alloc_graph(16 * MiB, false, &p);
  CUgraphExec e;
  CU_OK(cuGraphInstantiateWithFlags(&e, g, CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH));
  CU_OK(cuGraphLaunch(e, NULL));
  CU_OK(cuGraphLaunch(e, NULL));
  cr_assert_eq(fc_used(), 16 * MiB);
  CU_OK(cuMemFree(p));
  CU_OK(cuDeviceGraphMemTrim(0));
  cr_assert_eq(fc_used(), 0);
}

Test(accounting, modules_static_data) {
  setenv("FAKE_CUDA_MODULE_BYTES", "1MiB", 1);
  fc_start("8GiB", "0");
  CUmodule m;
  CU_OK(cuModuleLoadData(&m, ptx_64m));
  cr_assert_eq(fc_used(), 64 * MiB + 4 * 8 * 8 + MiB, ".global arrays plus the per-module bytes");
  CUfunction f;
  CU_OK(cuModuleGetFunction(&f, m, "k2"));
  CU_EXPECT(CUDA_ERROR_NOT_FOUND, cuModuleGetFunction(&f, m, "k3"));
  CU_OK(cuModuleUnload(m));
  cr_assert_eq(fc_used(), 0);
  static const unsigned char cubin[64] = {0x7f, 'E', 'L', 'F', 2, 1, 1};
  CU_OK(cuModuleLoadData(&m, cubin));
  cr_assert_eq(fc_used(), MiB);
  CU_OK(cuModuleGetFunction(&f, m, "any_name"));
  CU_OK(cuModuleUnload(m));
  cr_assert_eq(fc_used(), 0);
}

Test(accounting, limits) {
  fc_start("80GiB", "0");
  size_t v;
  CU_OK(cuCtxGetLimit(&v, CU_LIMIT_STACK_SIZE));
  cr_assert_eq(v, 1024);
  CU_OK(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 64 * 1024));
  cr_assert_eq(fc_used(), (size_t)(64 * 1024 - 1024) * 2048 * 132, "every thread's stack: 16.5 GiB");
  CU_OK(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 1000));
  CU_OK(cuCtxGetLimit(&v, CU_LIMIT_STACK_SIZE));
  cr_assert_eq(v, 1008, "rounded up to 16 bytes");
  cr_assert_eq(fc_used(), 0);
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 512 * 1024));
  CU_OK(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, GiB));
  CU_OK(cuCtxSetLimit(CU_LIMIT_PRINTF_FIFO_SIZE, 8650752 + MiB));
  cr_assert_eq(fc_used(), GiB - 8 * MiB + MiB, "what passes the defaults");
  CU_EXPECT(CUDA_ERROR_OUT_OF_MEMORY, cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 100 * GiB));
  CU_OK(cuCtxGetLimit(&v, CU_LIMIT_MALLOC_HEAP_SIZE));
  cr_assert_eq(v, GiB, "a refused limit changes nothing");
  cr_assert_eq(fc_used(), GiB - 8 * MiB + MiB);
  CU_OK(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 0));
  CU_OK(cuCtxSetLimit(CU_LIMIT_PRINTF_FIFO_SIZE, 0));
  cr_assert_eq(fc_used(), 0);
  CU_EXPECT(CUDA_ERROR_UNSUPPORTED_LIMIT, cuCtxSetLimit(CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH, 4));
}

Test(accounting, stack_limit_that_does_not_fit) {
  fc_start("16GiB", "0");
  CU_EXPECT(CUDA_ERROR_OUT_OF_MEMORY, cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 64 * 1024));
  size_t v;
  CU_OK(cuCtxGetLimit(&v, CU_LIMIT_STACK_SIZE));
  cr_assert_eq(v, 1024);
  cr_assert_eq(fc_used(), 0);
}

/* ---- out of memory: nothing taken, nothing changed --------------------------- */

Test(accounting, out_of_memory_takes_nothing) {
  fc_start("1GiB", "0");
  CUdeviceptr keep, p = 0;
  CU_OK(cuMemAlloc(&keep, 900 * MiB));
  size_t before = fc_used();
  size_t pitch = 0;
  CUstream s;
  CU_OK(cuStreamCreate(&s, 0));
  CU_EXPECT(CUDA_ERROR_OUT_OF_MEMORY, cuMemAlloc(&p, 200 * MiB));
  CU_EXPECT(CUDA_ERROR_OUT_OF_MEMORY, cuMemAlloc(&p, SIZE_MAX));
  CU_EXPECT(CUDA_ERROR_OUT_OF_MEMORY, cuMemAllocPitch(&p, &pitch, 1 << 20, 200, 4));
  CU_EXPECT(CUDA_ERROR_OUT_OF_MEMORY, cuMemAllocPitch(&p, &pitch, SIZE_MAX - 10, 2, 4));
  CU_EXPECT(CUDA_ERROR_OUT_OF_MEMORY, cuMemAllocManaged(&p, 200 * MiB, CU_MEM_ATTACH_GLOBAL));
  CU_EXPECT(CUDA_ERROR_OUT_OF_MEMORY, cuMemAllocAsync(&p, 200 * MiB, s));
  CU_EXPECT(CUDA_ERROR_OUT_OF_MEMORY, cuMemAllocAsync(&p, SIZE_MAX, s));
  CUmemPoolProps pp;
  memset(&pp, 0, sizeof pp);
  pp.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  pp.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  CUmemoryPool up;
  CU_OK(cuMemPoolCreate(&up, &pp));
  CU_EXPECT(CUDA_ERROR_OUT_OF_MEMORY, cuMemAllocFromPoolAsync(&p, 200 * MiB, up, s));
  CUmemAllocationProp ap;
  memset(&ap, 0, sizeof ap);
  ap.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  ap.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  CUmemGenericAllocationHandle h;
  CU_EXPECT(CUDA_ERROR_OUT_OF_MEMORY, cuMemCreate(&h, 200 * MiB, &ap, 0));
  CUarray a;
  CUDA_ARRAY_DESCRIPTOR d2 = {8192, 8192, CU_AD_FORMAT_FLOAT, 1};
  CU_EXPECT(CUDA_ERROR_OUT_OF_MEMORY, cuArrayCreate(&a, &d2));
  CUDA_ARRAY3D_DESCRIPTOR d3 = {SIZE_MAX / 2, 4096, 4096, CU_AD_FORMAT_FLOAT, 4, 0};
  CU_EXPECT(CUDA_ERROR_OUT_OF_MEMORY, cuArray3DCreate(&a, &d3));
  CUmipmappedArray m;
  CU_EXPECT(CUDA_ERROR_OUT_OF_MEMORY, cuMipmappedArrayCreate(&m, &d3, 4));
  CUmodule mod;
  CU_EXPECT(CUDA_ERROR_OUT_OF_MEMORY, cuModuleLoadData(&mod, ".version 7.0\n.global .b8 x[1073741824];\n"));
  CU_EXPECT(CUDA_ERROR_OUT_OF_MEMORY, cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 300 * MiB));
  CU_EXPECT(CUDA_ERROR_OUT_OF_MEMORY, cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 2048));
  cr_assert_eq(fc_used(), before, "no refused request took anything");
  CUcontext c2;
  setenv("FAKE_CUDA_CTX_BYTES", "1", 1); /* read at cuInit only: still 0 */
  CU_OK(cuCtxCreate(&c2, NULL, 0, 0));
  CU_OK(cuCtxPopCurrent(NULL));
  /* a graph whose allocation does not fit fails at launch, holding nothing */
  CUgraph g;
  CU_OK(cuGraphCreate(&g, 0));
  CUDA_MEM_ALLOC_NODE_PARAMS gp;
  memset(&gp, 0, sizeof gp);
  gp.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  gp.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  gp.bytesize = 100 * MiB;
  CUgraphNode n1, n2;
  CU_OK(cuGraphAddMemAllocNode(&n1, g, NULL, 0, &gp));
  gp.bytesize = 100 * MiB;
  CU_OK(cuGraphAddMemAllocNode(&n2, g, &n1, 1, &gp));
  CUgraphExec e;
  CU_OK(cuGraphInstantiate(&e, g, 0));
  CU_OK(cuMemFree(keep));
  CU_OK(cuMemAlloc(&keep, 850 * MiB));
  CU_EXPECT(CUDA_ERROR_OUT_OF_MEMORY, cuGraphLaunch(e, s));
  CU_OK(cuDeviceGraphMemTrim(0));
  cr_assert_eq(fc_used(), 850 * MiB, "a failed launch gives back what it took");
  CU_OK(cuMemFree(keep));
  CU_OK(cuGraphLaunch(e, s));
  cr_assert_eq(fc_used(), 200 * MiB);
}

Test(accounting, out_of_memory_for_a_context) {
  fc_start("1GiB", "600MiB");
  CUcontext c2;
  CU_EXPECT(CUDA_ERROR_OUT_OF_MEMORY, cuCtxCreate(&c2, NULL, 0, 0));
  CUcontext cur;
  CU_OK(cuCtxGetCurrent(&cur));
  CUcontext p;
  CU_OK(cuDevicePrimaryCtxRetain(&p, 0));
  cr_assert_eq(cur, p, "a context that could not be made is not pushed");
  cr_assert_eq(fc_used(), 600 * MiB);
}

Test(accounting, many_gib_without_ram) {
  fc_start("1TiB", "0");
  CUdeviceptr p;
  CU_OK(cuMemAlloc(&p, 64 * GiB));
  unsigned char *b = (unsigned char *)(uintptr_t)p;
  b[0] = 1;
  b[64 * GiB - 1] = 2;
  unsigned char out = 0;
  CU_OK(cuMemcpyDtoH(&out, p + 64 * GiB - 1, 1));
  cr_assert_eq(out, 2);
  CU_OK(cuMemFree(p));
  cr_assert_eq(fc_used(), 0);
}

Test(accounting, data_round_trips) {
  fc_start("8GiB", "0");
  unsigned char in[8192], out[8192];
  for (size_t i = 0; i < sizeof in; i++) in[i] = (unsigned char)(i * 31 + 7);
  CUdeviceptr p;
  CU_OK(cuMemAlloc(&p, sizeof in));
  CU_OK(cuMemcpyHtoD(p, in, sizeof in));
  CU_OK(cuMemcpyDtoH(out, p, sizeof out));
  cr_assert_arr_eq(in, out, sizeof in);
  CU_OK(cuMemsetD8(p + 100, 0xab, 50));
  CU_OK(cuMemcpyDtoH(out, p, sizeof out));
  cr_assert_eq(out[99], in[99]);
  cr_assert_eq(out[100], 0xab);
  cr_assert_eq(out[149], 0xab);
  cr_assert_eq(out[150], in[150]);
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemcpyHtoD(p + 8000, in, 200)); /* overruns it */
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemsetD8(p + 8192, 0, 1));
  CU_OK(cuMemFree(p));
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemcpyDtoH(out, p, 1));
  /* a pool allocation and a pitched one hold data too */
  size_t pitch;
  CU_OK(cuMemAllocPitch(&p, &pitch, 100, 4, 4));
  CU_OK(cuMemcpyHtoD(p + 3 * pitch, in, 100));
  CU_OK(cuMemcpyDtoH(out, p + 3 * pitch, 100));
  cr_assert_arr_eq(in, out, 100);
  CU_OK(cuMemAllocAsync(&p, 1000, NULL));
  CU_OK(cuMemcpyHtoD(p, in, 1000));
  CU_OK(cuMemcpyDtoH(out, p, 1000));
  cr_assert_arr_eq(in, out, 1000);
}
