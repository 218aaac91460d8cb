/* unit.fakecuda_visible: CUDA_VISIBLE_DEVICES. The devices a process sees,
 * in which order (ordinals, UUIDs, UUID prefixes; the list stops at the
 * first bad entry; empty or a repeat: none), and that every entry taking a
 * CUDA ordinal works on the physical device behind it, which is where the
 * state file (what a fake NVML reads) counts the bytes. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fake_cuda_state.h"
#include "fc_test.h"

#define U0 "GPU-facec0da-0000-0000-0000-000000000000"
#define U1 "GPU-facec0da-0000-0000-0000-000000000001"
#define U2 "GPU-facec0da-0000-0000-0000-000000000002"
#define U3 "GPU-facec0da-0000-0000-0000-000000000003"

/* cuInit on `ndevices` physical devices with CUDA_VISIBLE_DEVICES=`cvd`
 * (NULL: unset); returns cuDeviceGetCount. */
static int visible(const char *ndevices, const char *cvd) {
  setenv("FAKE_CUDA_DEVICES", ndevices, 1);
  if (cvd)
    setenv("CUDA_VISIBLE_DEVICES", cvd, 1);
  else
    unsetenv("CUDA_VISIBLE_DEVICES");
  CU_OK(cuInit(0));
  int n = -1;
  CU_OK(cuDeviceGetCount(&n));
  return n;
}

/* The physical device behind CUDA device `ordinal`, by its UUID. */
static int phys_of(int ordinal) {
  CUdevice d;
  CU_OK(cuDeviceGet(&d, ordinal));
  cr_assert_eq(d, ordinal, "a CUdevice is the CUDA ordinal");
  CUuuid u;
  CU_OK(cuDeviceGetUuid(&u, d));
  unsigned char want[16];
  fake_cuda_uuid(u.bytes[15], want);
  cr_assert_arr_eq(u.bytes, want, 16, "a fake UUID");
  return (unsigned char)u.bytes[15];
}

/* cuInit answers `want` (the H100: CUDA_ERROR_NO_DEVICE when no device is
 * visible, CUDA_ERROR_INVALID_DEVICE when one is named twice), and the
 * driver stays uninitialized until the variable is fixed. */
static void refused(CUresult want, const char *ndevices, const char *cvd) {
  setenv("FAKE_CUDA_DEVICES", ndevices, 1);
  setenv("CUDA_VISIBLE_DEVICES", cvd, 1);
  CU_EXPECT(want, cuInit(0));
  CU_EXPECT(want, cuInit(0));
  int n;
  CU_EXPECT(CUDA_ERROR_NOT_INITIALIZED, cuDeviceGetCount(&n));
  unsetenv("CUDA_VISIBLE_DEVICES");
  CU_OK(cuInit(0)); /* read again at the next cuInit */
  CU_OK(cuDeviceGetCount(&n));
  cr_assert_eq(n, atoi(ndevices));
}

Test(visible, unset_is_every_device_in_order) {
  cr_assert_eq(visible("3", NULL), 3);
  for (int i = 0; i < 3; i++) cr_assert_eq(phys_of(i), i);
  CUdevice d;
  CU_EXPECT(CUDA_ERROR_INVALID_DEVICE, cuDeviceGet(&d, 3));
}

Test(visible, ordinals_in_any_order) {
  cr_assert_eq(visible("4", "3,1"), 2);
  cr_assert_eq(phys_of(0), 3);
  cr_assert_eq(phys_of(1), 1);
  CUdevice d;
  CU_EXPECT(CUDA_ERROR_INVALID_DEVICE, cuDeviceGet(&d, 2));
  CU_EXPECT(CUDA_ERROR_INVALID_DEVICE, cuDeviceGet(&d, -1));
  /* the device's other answers are the physical one's too */
  char bus[16];
  CU_OK(cuDeviceGetPCIBusId(bus, sizeof bus, 0));
  cr_assert_str_eq(bus, "0000:13:00.0");
  int busid = 0;
  CU_OK(cuDeviceGetAttribute(&busid, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, 1));
  cr_assert_eq(busid, 0x11);
}

Test(visible, blanks_and_strtoul) {
  cr_assert_eq(visible("2", " 1 , 0 "), 2);
  cr_assert_eq(phys_of(0), 1);
  cr_assert_eq(phys_of(1), 0);
}

Test(visible, an_ordinal_is_read_as_strtoul_reads_it) {
  cr_assert_eq(visible("3", "2gpu,+1,-0"), 3);
  cr_assert_eq(phys_of(0), 2);
  cr_assert_eq(phys_of(1), 1);
  cr_assert_eq(phys_of(2), 0);
}

Test(visible, full_uuids) {
  cr_assert_eq(visible("4", U2 "," U0), 2);
  cr_assert_eq(phys_of(0), 2);
  cr_assert_eq(phys_of(1), 0);
}

/* The first entry says what the list holds: a UUID after ordinals, or an
 * ordinal after UUIDs, ends it (so "0,<UUID of 0>" is no repeat). */
Test(visible, a_uuid_after_ordinals_ends_the_list) {
  cr_assert_eq(visible("4", "3," U1 ",0"), 1);
  cr_assert_eq(phys_of(0), 3);
}
Test(visible, an_ordinal_after_uuids_ends_the_list) {
  cr_assert_eq(visible("4", U1 ",0," U2), 1);
  cr_assert_eq(phys_of(0), 1);
}
Test(visible, a_device_by_ordinal_then_uuid_is_no_repeat) {
  cr_assert_eq(visible("2", "0," U0), 1);
  cr_assert_eq(phys_of(0), 0);
}

/* The fake's UUIDs differ only in their last digit, so a shorter prefix is
 * unique on one device and ambiguous on several. */
Test(visible, a_unique_prefix) {
  cr_assert_eq(visible("1", "GPU-face"), 1);
  cr_assert_eq(phys_of(0), 0);
}
Test(visible, uuid_digits_in_either_case_dashes_anywhere) {
  cr_assert_eq(visible("3", "GPU-FACEC0DA00000000-00000000-000000-02,GPU-fa-ce-C0"), 1);
  cr_assert_eq(phys_of(0), 2, "the second entry is a prefix of all three");
}
Test(visible, text_after_a_whole_uuid_is_ignored) {
  cr_assert_eq(visible("2", U1 "0x," U0), 2);
  cr_assert_eq(phys_of(0), 1);
  cr_assert_eq(phys_of(1), 0);
}
Test(visible, an_ambiguous_prefix_stops_the_list) {
  cr_assert_eq(visible("3", U2 ",GPU-facec0da," U0), 1);
  cr_assert_eq(phys_of(0), 2);
}
Test(visible, a_bad_character_in_a_uuid_stops_the_list) {
  cr_assert_eq(visible("2", U1 ",GPU-facec0da-0000-0000-0000-00000000000 ," U0), 1);
  cr_assert_eq(phys_of(0), 1);
}

Test(visible, the_list_stops_at_the_first_invalid_entry) {
  /* the Programming Guide's example */
  cr_assert_eq(visible("4", "0,2,-1,1"), 2);
  cr_assert_eq(phys_of(0), 0);
  cr_assert_eq(phys_of(1), 2);
}

Test(visible, stops_at_an_ordinal_out_of_range) {
  cr_assert_eq(visible("2", "1,2,0"), 1);
  cr_assert_eq(phys_of(0), 1);
}

Test(visible, stops_at_a_uuid_of_no_device) {
  cr_assert_eq(visible("4", U3 ",GPU-deadbeef-0000-0000-0000-000000000000," U0), 1);
  cr_assert_eq(phys_of(0), 3);
}

Test(visible, stops_at_a_mig_entry) {
  cr_assert_eq(visible("2", "1,MIG-facec0da-0000-0000-0000-000000000000,0"), 1);
  cr_assert_eq(phys_of(0), 1);
}

Test(visible, stops_at_an_empty_entry) {
  cr_assert_eq(visible("2", "1,,0"), 1);
  cr_assert_eq(phys_of(0), 1);
}

Test(visible, empty_is_no_device) { refused(CUDA_ERROR_NO_DEVICE, "2", ""); }
Test(visible, blank_is_no_device) { refused(CUDA_ERROR_NO_DEVICE, "2", " "); }
Test(visible, minus_one_is_no_device) { refused(CUDA_ERROR_NO_DEVICE, "2", "-1"); }
Test(visible, a_first_entry_out_of_range_is_no_device) { refused(CUDA_ERROR_NO_DEVICE, "2", "2,0"); }
Test(visible, a_first_entry_empty_is_no_device) { refused(CUDA_ERROR_NO_DEVICE, "2", ",0"); }
Test(visible, gpu_dash_alone_is_no_device) { refused(CUDA_ERROR_NO_DEVICE, "1", "GPU-"); }
Test(visible, a_blank_before_a_uuid_is_no_device) { refused(CUDA_ERROR_NO_DEVICE, "1", " " U0); }
Test(visible, lower_case_gpu_is_no_device) { refused(CUDA_ERROR_NO_DEVICE, "1", "gpu-facec0da"); }
Test(visible, mig_is_no_device) { refused(CUDA_ERROR_NO_DEVICE, "2", "MIG-facec0da-0000-0000-0000-000000000000"); }
Test(visible, a_repeated_ordinal_is_invalid) { refused(CUDA_ERROR_INVALID_DEVICE, "3", "0,1,0"); }
Test(visible, a_repeat_spelled_otherwise_is_invalid) { refused(CUDA_ERROR_INVALID_DEVICE, "2", "1,+1"); }
Test(visible, a_repeated_uuid_is_invalid) {
  refused(CUDA_ERROR_INVALID_DEVICE, "2", U1 ",GPU-facec0da000000000000000000000001");
}
Test(visible, a_repeat_after_the_stop_is_harmless) {
  cr_assert_eq(visible("2", "1,-1,1"), 1);
  cr_assert_eq(phys_of(0), 1);
}

/* Every entry that takes a CUdevice works on the physical device behind
 * it; what is hidden is an invalid device. */
Test(visible, a_hidden_device_is_invalid) {
  cr_assert_eq(visible("2", "1"), 1);
  CUdevice d;
  CUcontext c;
  char name[64];
  size_t total;
  int v;
  unsigned flags;
  CUmemoryPool pool;
  CU_EXPECT(CUDA_ERROR_INVALID_DEVICE, cuDeviceGet(&d, 1));
  CU_EXPECT(CUDA_ERROR_INVALID_DEVICE, cuDeviceGetName(name, sizeof name, 1));
  CU_EXPECT(CUDA_ERROR_INVALID_DEVICE, cuDeviceTotalMem(&total, 1));
  CU_EXPECT(CUDA_ERROR_INVALID_DEVICE, cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 1));
  CU_EXPECT(CUDA_ERROR_INVALID_DEVICE, cuDevicePrimaryCtxRetain(&c, 1));
  CU_EXPECT(CUDA_ERROR_INVALID_DEVICE, cuDevicePrimaryCtxGetState(1, &flags, &v));
  CU_EXPECT(CUDA_ERROR_INVALID_DEVICE, cuDevicePrimaryCtxSetFlags(1, 0));
  CU_EXPECT(CUDA_ERROR_INVALID_DEVICE, cuDevicePrimaryCtxRelease(1));
  CU_EXPECT(CUDA_ERROR_INVALID_DEVICE, cuDevicePrimaryCtxReset(1));
  CU_EXPECT(CUDA_ERROR_INVALID_DEVICE, cuCtxCreate(&c, NULL, 0, 1));
  CU_EXPECT(CUDA_ERROR_INVALID_DEVICE, cuDeviceGetDefaultMemPool(&pool, 1));
  CU_EXPECT(CUDA_ERROR_INVALID_DEVICE, cuDeviceGetMemPool(&pool, 1));
  CU_EXPECT(CUDA_ERROR_INVALID_DEVICE, cuDeviceGraphMemTrim(1));
  cuuint64_t u64;
  CU_EXPECT(CUDA_ERROR_INVALID_DEVICE, cuDeviceGetGraphMemAttribute(1, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &u64));
  CU_OK(cuDevicePrimaryCtxRetain(&c, 0));
  CU_OK(cuCtxSetCurrent(c));
  CUmemPoolProps pp = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED, .location = {CU_MEM_LOCATION_TYPE_DEVICE, 1}};
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemPoolCreate(&pool, &pp)); /* as for any bad ordinal */
  CUmemAllocationProp ap = {.type = CU_MEM_ALLOCATION_TYPE_PINNED, .location = {CU_MEM_LOCATION_TYPE_DEVICE, 1}};
  CUmemGenericAllocationHandle h;
  CU_EXPECT(CUDA_ERROR_INVALID_DEVICE, cuMemCreate(&h, 2 * MiB, &ap, 0));
  CUgraph g;
  CU_OK(cuGraphCreate(&g, 0));
  CUDA_MEM_ALLOC_NODE_PARAMS np;
  memset(&np, 0, sizeof np);
  np.poolProps = pp;
  np.bytesize = MiB;
  CUgraphNode n;
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuGraphAddMemAllocNode(&n, g, NULL, 0, &np));
  CU_OK(cuGraphDestroy(g));
}

/* The primary context of each CUDA device is that of its physical device:
 * retaining CUDA device 0 under "1,0" makes device 1 active, not 0. */
Test(visible, primary_contexts_follow_the_map) {
  setenv("FAKE_CUDA_CTX_BYTES", "0", 1);
  cr_assert_eq(visible("2", "1,0"), 2);
  CUcontext c0, c1;
  unsigned flags;
  int active;
  CU_OK(cuDevicePrimaryCtxSetFlags(1, CU_CTX_SCHED_YIELD));
  CU_OK(cuDevicePrimaryCtxRetain(&c0, 0));
  CU_OK(cuDevicePrimaryCtxGetState(0, &flags, &active));
  cr_assert(active && flags == 0);
  CU_OK(cuDevicePrimaryCtxGetState(1, &flags, &active));
  cr_assert(!active && flags == CU_CTX_SCHED_YIELD);
  CU_OK(cuDevicePrimaryCtxRetain(&c1, 1));
  cr_assert_neq(c0, c1);
  CU_OK(cuCtxSetCurrent(c1));
  CUdevice d = -1;
  CU_OK(cuCtxGetDevice(&d));
  cr_assert_eq(d, 1, "cuCtxGetDevice answers the CUDA ordinal");
  CU_OK(cuCtxGetDevice_v2(&d, c0));
  cr_assert_eq(d, 0);
  /* the CUDA 7 entry refuses an active context, the CUDA 11 one does not */
  CUresult (*set_v1)(CUdevice, unsigned) =
      (CUresult(*)(CUdevice, unsigned))dlsym(RTLD_DEFAULT, "cuDevicePrimaryCtxSetFlags");
  cr_assert_not_null(set_v1);
  CU_EXPECT(CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE, set_v1(1, 0));
  CU_OK(cuDevicePrimaryCtxSetFlags_v2(1, CU_CTX_SCHED_SPIN));
  CU_OK(cuDevicePrimaryCtxGetState(1, &flags, &active));
  cr_assert_eq(flags, CU_CTX_SCHED_SPIN);
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuDevicePrimaryCtxSetFlags_v2(1, 0x100000));
  CU_OK(cuDevicePrimaryCtxReset(0));
  CU_OK(cuDevicePrimaryCtxGetState(0, &flags, &active));
  cr_assert(!active);
  CU_OK(cuDevicePrimaryCtxGetState(1, &flags, &active));
  cr_assert(active, "a reset of CUDA device 0 leaves device 1 alone");
  CU_OK(set_v1(0, CU_CTX_SCHED_BLOCKING_SYNC)); /* inactive now */
  CU_OK(cuDevicePrimaryCtxGetState(0, &flags, &active));
  cr_assert_eq(flags, CU_CTX_SCHED_BLOCKING_SYNC);
}

/* Under "1,0" every allocation path on CUDA device 0 lands on physical
 * device 1 in the state file, and one on CUDA device 1 on physical 0. */
Test(visible, allocations_land_on_the_physical_device) {
  char path[] = "/tmp/fakecuda_visible_XXXXXX";
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  close(fd);
  unlink(path); /* the fake makes it */
  setenv("FAKE_CUDA_STATE", path, 1);
  setenv("FAKE_CUDA_CTX_BYTES", "0", 1);
  setenv("FAKE_CUDA_TOTAL_MEM", "8GiB", 1);
  cr_assert_eq(visible("2", "1,0"), 2);
  fake_cuda_state_t *st = NULL;
  char err[256];
  cr_assert_eq(fake_cuda_state_open(path, 0, NULL, &st, err, sizeof err), 0, "%s", err);
  unlink(path);
  int32_t pid = (int32_t)getpid();
#define ON(phys) fake_cuda_state_pid_bytes(st, pid, (phys))

  CUcontext c;
  CU_OK(cuCtxCreate(&c, NULL, 0, 0));
  CUdeviceptr p;
  CU_OK(cuMemAlloc(&p, 64 * MiB));
  cr_assert_eq(ON(1), 64 * MiB, "cuMemAlloc on CUDA device 0");
  cr_assert_eq(ON(0), 0);
  size_t free_b, total;
  CU_OK(cuMemGetInfo(&free_b, &total));
  cr_assert_eq(total - free_b, 64 * MiB, "cuMemGetInfo is the physical device's");

  CUmemoryPool dp;
  CU_OK(cuDeviceGetDefaultMemPool(&dp, 0));
  CUmemoryPool cur;
  CU_OK(cuDeviceGetMemPool(&cur, 0));
  cr_assert_eq(cur, dp);
  CUdeviceptr a;
  CU_OK(cuMemAllocFromPoolAsync(&a, 16 * MiB, dp, NULL));
  cr_assert_eq(ON(1), 80 * MiB, "the default pool of CUDA device 0");
  CU_OK(cuMemFreeAsync(a, NULL));
  CU_OK(cuMemPoolTrimTo(dp, 0));
  cr_assert_eq(ON(1), 64 * MiB);

  CUmemPoolProps pp = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED, .location = {CU_MEM_LOCATION_TYPE_DEVICE, 0}};
  CUmemoryPool up;
  CU_OK(cuMemPoolCreate(&up, &pp));
  CU_OK(cuMemAllocFromPoolAsync(&a, 8 * MiB, up, NULL));
  cr_assert_eq(ON(1), 72 * MiB, "a pool made for location.id 0");
  CU_OK(cuMemFreeAsync(a, NULL));
  CU_OK(cuMemPoolDestroy(up));
  cr_assert_eq(ON(1), 64 * MiB);

  CUmemAllocationProp ap = {.type = CU_MEM_ALLOCATION_TYPE_PINNED, .location = {CU_MEM_LOCATION_TYPE_DEVICE, 0}};
  size_t gran = 0;
  CU_OK(cuMemGetAllocationGranularity(&gran, &ap, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  CUmemGenericAllocationHandle h;
  CU_OK(cuMemCreate(&h, 2 * gran, &ap, 0));
  cr_assert_eq(ON(1), 64 * MiB + 2 * gran, "cuMemCreate on location.id 0");
  CUdeviceptr va;
  CU_OK(cuMemAddressReserve(&va, 2 * gran, 0, 0, 0));
  CU_OK(cuMemMap(va, 2 * gran, 0, h, 0));
  CUmemAccessDesc acc = {{CU_MEM_LOCATION_TYPE_DEVICE, 1}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  CU_OK(cuMemSetAccess(va, 2 * gran, &acc, 1));
  acc.location.id = 2;
  CU_EXPECT(CUDA_ERROR_INVALID_DEVICE, cuMemSetAccess(va, 2 * gran, &acc, 1));
  CU_OK(cuMemUnmap(va, 2 * gran));
  CU_OK(cuMemAddressFree(va, 2 * gran));
  CU_OK(cuMemRelease(h));
  cr_assert_eq(ON(1), 64 * MiB);

  CUgraph g;
  CU_OK(cuGraphCreate(&g, 0));
  CUDA_MEM_ALLOC_NODE_PARAMS np;
  memset(&np, 0, sizeof np);
  np.poolProps = pp;
  np.bytesize = 32 * MiB;
  CUgraphNode an, fn;
  CU_OK(cuGraphAddMemAllocNode(&an, g, NULL, 0, &np));
  CU_OK(cuGraphAddMemFreeNode(&fn, g, &an, 1, np.dptr));
  CUgraphExec e;
  CU_OK(cuGraphInstantiate(&e, g, 0));
  CU_OK(cuGraphLaunch(e, NULL));
  cr_assert_eq(ON(1), 96 * MiB, "a graph allocation node for location.id 0");
  cuuint64_t reserved = 0;
  CU_OK(cuDeviceGetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &reserved));
  cr_assert_eq(reserved, 32 * MiB);
  CU_OK(cuDeviceGetGraphMemAttribute(1, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &reserved));
  cr_assert_eq(reserved, 0);
  CU_OK(cuDeviceGraphMemTrim(1));
  cr_assert_eq(ON(1), 96 * MiB, "trimming CUDA device 1 leaves physical device 1 alone");
  CU_OK(cuDeviceGraphMemTrim(0));
  cr_assert_eq(ON(1), 64 * MiB);
  CU_OK(cuGraphExecDestroy(e));
  CU_OK(cuGraphDestroy(g));

  /* CUDA device 1 is physical device 0 */
  CUcontext c1;
  CU_OK(cuDevicePrimaryCtxRetain(&c1, 1));
  CU_OK(cuCtxPushCurrent(c1));
  CUdeviceptr q;
  CU_OK(cuMemAlloc(&q, 128 * MiB));
  cr_assert_eq(ON(0), 128 * MiB, "cuMemAlloc on CUDA device 1");
  cr_assert_eq(ON(1), 64 * MiB);
  cr_assert_eq(fake_cuda_state_used(st, 0), 128 * MiB);
  cr_assert_eq(fake_cuda_state_used(st, 1), 64 * MiB);
  CU_OK(cuMemFree(q));
  CU_OK(cuCtxPopCurrent(NULL));
  CU_OK(cuMemFree(p));
  cr_assert_eq(ON(0) + ON(1), 0);
#undef ON
  fake_cuda_state_close(st);
}
