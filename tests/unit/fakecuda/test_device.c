/* unit.fakecuda_device: cuInit and the environment, the devices, the
 * contexts and their per-thread stacks, launches and error strings. (The
 * error codes of every entry are compared with the real driver's by
 * unit.fakecuda_conformance.) */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fake_cuda_state.h"
#include "fc_test.h"

Test(device, nothing_before_cuinit) {
  int n;
  CU_EXPECT(CUDA_ERROR_NOT_INITIALIZED, cuDeviceGetCount(&n));
  CUdeviceptr p;
  CU_EXPECT(CUDA_ERROR_NOT_INITIALIZED, cuMemAlloc(&p, 1));
  CU_EXPECT(CUDA_ERROR_NOT_INITIALIZED, cuMemFree(0));
  int v;
  CU_OK(cuDriverGetVersion(&v)); /* these work before it */
  const char *s;
  CU_OK(cuGetErrorString(CUDA_ERROR_NOT_INITIALIZED, &s));
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuInit(1));
  CU_OK(cuInit(0));
  CU_OK(cuInit(0));
  CU_OK(cuDeviceGetCount(&n));
}

Test(device, defaults) {
  CU_OK(cuInit(0));
  int n = 0;
  CU_OK(cuDeviceGetCount(&n));
  cr_assert_eq(n, 1);
  CUdevice d;
  CU_OK(cuDeviceGet(&d, 0));
  char name[64];
  CU_OK(cuDeviceGetName(name, sizeof name, d));
  cr_assert_str_eq(name, "NVIDIA H100 80GB HBM3");
  size_t total = 0;
  CU_OK(cuDeviceTotalMem(&total, d));
  cr_assert_eq(total, 80 * GiB);
  int sms = 0, major = 0, minor = -1, warp = 0;
  CU_OK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d));
  CU_OK(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d));
  CU_OK(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d));
  CU_OK(cuDeviceGetAttribute(&warp, CU_DEVICE_ATTRIBUTE_WARP_SIZE, d));
  cr_assert_eq(sms, 132);
  cr_assert_eq(major, 9);
  cr_assert_eq(minor, 0);
  cr_assert_eq(warp, 32);
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuDeviceGetAttribute(&warp, CU_DEVICE_ATTRIBUTE_MAX, d));
  CUcontext c = fc_start(NULL, NULL);
  (void)c;
  size_t free_b, t;
  CU_OK(cuMemGetInfo(&free_b, &t));
  cr_assert_eq(t, 80 * GiB);
  cr_assert_eq(t - free_b, 512 * MiB, "the primary context's footprint");
}

Test(device, several_devices_with_uuids_and_bus_ids) {
  setenv("FAKE_CUDA_DEVICES", "4", 1);
  setenv("FAKE_CUDA_TOTAL_MEM", "40GiB", 1);
  CU_OK(cuInit(0));
  int n = 0;
  CU_OK(cuDeviceGetCount(&n));
  cr_assert_eq(n, 4);
  CU_EXPECT(CUDA_ERROR_INVALID_DEVICE, cuDeviceGet(&n, 4));
  char want[64], bus[16], prev_bus[16] = "";
  for (int i = 0; i < 4; i++) {
    CUuuid u, u1;
    CU_OK(cuDeviceGetUuid(&u, i));
    CU_OK(cuDeviceGetUuid_v2(&u1, i));
    cr_assert_arr_eq(u.bytes, u1.bytes, 16);
    unsigned char raw[16];
    fake_cuda_uuid(i, raw);
    cr_assert_arr_eq(u.bytes, raw, 16);
    fake_cuda_uuid_string(i, want, sizeof want);
    char got[64];
    const unsigned char *b = (const unsigned char *)u.bytes;
    snprintf(got, sizeof got, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
             b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
    cr_assert_str_eq(got, want);
    CU_OK(cuDeviceGetPCIBusId(bus, sizeof bus, i));
    cr_assert_eq(strlen(bus), 12);
    cr_assert_str_neq(bus, prev_bus, "each device has its own bus id");
    strcpy(prev_bus, bus);
    size_t total;
    CU_OK(cuDeviceTotalMem(&total, i));
    cr_assert_eq(total, 40 * GiB);
  }
  fake_cuda_uuid_string(3, want, sizeof want);
  cr_assert_str_eq(want, "GPU-facec0da-0000-0000-0000-000000000003");
  /* each device counts its own memory */
  CUcontext c0, c3;
  setenv("FAKE_CUDA_CTX_BYTES", "0", 1);
  CU_OK(cuCtxCreate(&c3, NULL, 0, 3));
  CUdeviceptr p;
  CU_OK(cuMemAlloc(&p, GiB));
  CU_OK(cuCtxCreate(&c0, NULL, 0, 0));
  CUdevice d;
  CU_OK(cuCtxGetDevice(&d));
  cr_assert_eq(d, 0);
  size_t free0, t;
  CU_OK(cuMemGetInfo(&free0, &t));
  CU_OK(cuCtxPopCurrent(NULL));
  size_t free3;
  CU_OK(cuMemGetInfo(&free3, &t));
  cr_assert_eq(free0 - free3, GiB);
}

Test(device, no_devices) {
  setenv("FAKE_CUDA_DEVICES", "0", 1);
  CU_EXPECT(CUDA_ERROR_NO_DEVICE, cuInit(0));
  int n;
  CU_EXPECT(CUDA_ERROR_NOT_INITIALIZED, cuDeviceGetCount(&n));
}

/* A bad variable: one line on stderr, cuInit fails, nothing changes. */
static void expect_refused(const char *var, const char *value, const char *says) {
  setenv(var, value, 1);
  fflush(stderr);
  char path[] = "/tmp/fakecuda_stderr_XXXXXX";
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  int saved = dup(2);
  dup2(fd, 2);
  CUresult rc = cuInit(0);
  dup2(saved, 2);
  close(saved);
  char buf[512] = {0};
  ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  close(fd);
  unlink(path);
  cr_assert_eq(rc, CUDA_ERROR_NOT_INITIALIZED, "%s=%s", var, value);
  cr_assert_gt(n, 0);
  cr_assert_not_null(strstr(buf, says), "stderr: %s", buf);
  cr_assert_eq(strchr(buf, '\n'), buf + n - 1, "one line: %s", buf);
  int count;
  CU_EXPECT(CUDA_ERROR_NOT_INITIALIZED, cuDeviceGetCount(&count));
  unsetenv(var);
  CU_OK(cuInit(0)); /* fixed, it works */
}
Test(device, bad_total) { expect_refused("FAKE_CUDA_TOTAL_MEM", "80 gigs", "FAKE_CUDA_TOTAL_MEM=80 gigs"); }
Test(device, zero_total) { expect_refused("FAKE_CUDA_TOTAL_MEM", "0", "more than 0"); }
Test(device, bad_devices) { expect_refused("FAKE_CUDA_DEVICES", "17", "FAKE_CUDA_DEVICES=17"); }
Test(device, negative_devices) { expect_refused("FAKE_CUDA_DEVICES", "-1", "FAKE_CUDA_DEVICES=-1"); }
Test(device, bad_ctx_bytes) { expect_refused("FAKE_CUDA_CTX_BYTES", "lots", "FAKE_CUDA_CTX_BYTES"); }
Test(device, bad_granule) { expect_refused("FAKE_CUDA_ALLOC_GRANULE", "0", "FAKE_CUDA_ALLOC_GRANULE"); }
Test(device, bad_kernel_us) { expect_refused("FAKE_CUDA_KERNEL_US", "2ms", "FAKE_CUDA_KERNEL_US=2ms"); }
Test(device, huge_kernel_us) {
  expect_refused("FAKE_CUDA_KERNEL_US", "99999999999999999", "FAKE_CUDA_KERNEL_US=99999999999999999");
}
Test(device, bad_state_file) { expect_refused("FAKE_CUDA_STATE", "/nonexistent-dir/state", "FAKE_CUDA_STATE"); }

Test(device, context_stack) {
  setenv("FAKE_CUDA_CTX_BYTES", "0", 1);
  CU_OK(cuInit(0));
  CUcontext cur = (CUcontext)1, a, b, popped;
  CU_OK(cuCtxGetCurrent(&cur));
  cr_assert_null(cur);
  CU_EXPECT(CUDA_ERROR_INVALID_CONTEXT, cuCtxSynchronize());
  CU_EXPECT(CUDA_ERROR_INVALID_CONTEXT, cuCtxPopCurrent(&popped));
  CU_OK(cuCtxCreate(&a, NULL, 0, 0));
  CU_OK(cuCtxCreate(&b, NULL, 0, 0));
  CU_OK(cuCtxGetCurrent(&cur));
  cr_assert_eq(cur, b);
  CU_OK(cuCtxPopCurrent(&popped));
  cr_assert_eq(popped, b);
  CU_OK(cuCtxGetCurrent(&cur));
  cr_assert_eq(cur, a);
  CU_OK(cuCtxPushCurrent(b));
  CU_OK(cuCtxSetCurrent(a)); /* replaces the top */
  CU_OK(cuCtxPopCurrent(&popped));
  cr_assert_eq(popped, a);
  CU_OK(cuCtxGetCurrent(&cur));
  cr_assert_eq(cur, a);
  CU_OK(cuCtxSetCurrent(NULL)); /* pops */
  CU_OK(cuCtxGetCurrent(&cur));
  cr_assert_null(cur);
  CU_OK(cuCtxDestroy(b));
  CU_EXPECT(CUDA_ERROR_CONTEXT_IS_DESTROYED, cuCtxDestroy(b));
  CU_EXPECT(CUDA_ERROR_CONTEXT_IS_DESTROYED, cuCtxPushCurrent(b));
  CU_EXPECT(CUDA_ERROR_INVALID_CONTEXT, cuCtxDestroy((CUcontext)&cur));
  CU_OK(cuCtxSetCurrent(a));
  CUdevice d = -1;
  CU_OK(cuCtxGetDevice(&d));
  cr_assert_eq(d, 0);
  CU_OK(cuCtxSynchronize());
}

/* Each thread has its own stack; a context destroyed by one thread is
 * CONTEXT_IS_DESTROYED for another that still has it current. */
static CUcontext shared_ctx;
static void *other_thread(void *arg) {
  (void)arg;
  CUcontext cur = (CUcontext)1;
  cuCtxGetCurrent(&cur);
  if (cur != NULL) return (void *)1;
  if (cuCtxSetCurrent(shared_ctx) != CUDA_SUCCESS) return (void *)2;
  CUdeviceptr p;
  if (cuMemAlloc(&p, 4096) != CUDA_SUCCESS) return (void *)3;
  if (cuMemFree(p) != CUDA_SUCCESS) return (void *)4;
  return NULL;
}
Test(device, contexts_are_per_thread) {
  fc_start(NULL, NULL);
  CU_OK(cuCtxCreate(&shared_ctx, NULL, 0, 0));
  pthread_t t;
  void *ret;
  pthread_create(&t, NULL, other_thread, NULL);
  pthread_join(t, &ret);
  cr_assert_null(ret, "thread step %p failed", ret);
}

/* A child forked after cuInit cannot use the parent's driver; one that
 * execs starts afresh. */
Test(device, forked_child) {
  fc_start(NULL, NULL);
  pid_t pid = fork();
  if (pid == 0) {
    CUdeviceptr p;
    int bad = cuMemAlloc(&p, 1) != CUDA_ERROR_NOT_INITIALIZED || cuInit(0) != CUDA_ERROR_NOT_INITIALIZED;
    _exit(bad);
  }
  int status;
  waitpid(pid, &status, 0);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  CUdeviceptr p;
  CU_OK(cuMemAlloc(&p, 1));
}

Test(device, modules_and_launches) {
  fc_start(NULL, NULL);
  static const char ptx[] = ".version 7.0\n.target sm_52\n.visible .entry kern()\n{\n  ret;\n}\n";
  CUmodule m;
  CU_OK(cuModuleLoadData(&m, ptx));
  CUfunction f;
  CU_OK(cuModuleGetFunction(&f, m, "kern"));
  CUfunction f2;
  CU_OK(cuModuleGetFunction(&f2, m, "kern"));
  cr_assert_eq(f, f2, "one handle per function");
  const char *name;
  CU_OK(cuFuncGetName(&name, f));
  cr_assert_str_eq(name, "kern");
  CUstream s;
  CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CU_OK(cuLaunchKernel(f, 65535, 1, 1, 1024, 1, 1, 49152, s, NULL, NULL));
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuLaunchKernel(f, 1, 1, 1, 1024, 2, 1, 0, s, NULL, NULL));
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 49153, s, NULL, NULL));
  CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, (CUstream)&s, NULL, NULL));
  CUlaunchConfig cfg = {4, 4, 4, 8, 8, 8, 0, s, NULL, 0};
  CU_OK(cuLaunchKernelEx(&cfg, f, NULL, NULL));
  CU_OK(cuStreamSynchronize(s));
  CU_OK(cuModuleUnload(m));
  CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
  CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuFuncGetName(&name, f));
  CU_OK(cuStreamDestroy(s));
  CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuStreamSynchronize(s));
  CU_EXPECT(CUDA_ERROR_INVALID_IMAGE, cuModuleLoadData(&m, "\x01\x02"));
  char path[] = "/tmp/fakecuda_ptx_XXXXXX";
  int fd = mkstemp(path);
  cr_assert_eq(write(fd, ptx, sizeof ptx - 1), (ssize_t)(sizeof ptx - 1));
  close(fd);
  CU_OK(cuModuleLoad(&m, path));
  unlink(path);
  CU_OK(cuModuleGetFunction(&f, m, "kern"));
  CU_EXPECT(CUDA_ERROR_FILE_NOT_FOUND, cuModuleLoad(&m, path));
}

Test(device, error_names_and_strings) {
  const char *s = NULL;
  CU_OK(cuGetErrorName(CUDA_ERROR_OUT_OF_MEMORY, &s));
  cr_assert_str_eq(s, "CUDA_ERROR_OUT_OF_MEMORY");
  CU_OK(cuGetErrorString(CUDA_ERROR_OUT_OF_MEMORY, &s));
  cr_assert_str_eq(s, "out of memory");
  CU_OK(cuGetErrorString(CUDA_ERROR_CONTEXT_IS_DESTROYED, &s));
  cr_assert_str_eq(s, "context is destroyed");
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuGetErrorName((CUresult)12345, &s));
  cr_assert_null(s);
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuGetErrorString(CUDA_SUCCESS, NULL));
}

/* The older entries that cuGetProcAddress hands out at older versions. */
Test(device, older_entries) {
  fc_start("8GiB", "0");
  CUresult (*create_v2)(CUcontext *, unsigned, CUdevice) =
      (CUresult(*)(CUcontext *, unsigned, CUdevice))dlsym(RTLD_DEFAULT, "cuCtxCreate_v2");
  CUresult (*create_v3)(CUcontext *, CUexecAffinityParam *, int, unsigned, CUdevice) =
      (CUresult(*)(CUcontext *, CUexecAffinityParam *, int, unsigned, CUdevice))dlsym(RTLD_DEFAULT, "cuCtxCreate_v3");
  CUresult (*array_v1)(CUarray *, const void *) =
      (CUresult(*)(CUarray *, const void *))dlsym(RTLD_DEFAULT, "cuArrayCreate");
  CUresult (*total_v1)(unsigned *, CUdevice) =
      (CUresult(*)(unsigned *, CUdevice))dlsym(RTLD_DEFAULT, "cuDeviceTotalMem");
  cr_assert(create_v2 && create_v3 && array_v1 && total_v1);
  CUcontext a, b;
  CU_OK(create_v2(&a, 0, 0));
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, create_v3(&b, NULL, 1, 0, 0));
  CU_OK(create_v3(&b, NULL, 0, 0, 0));
  CUcontext cur;
  CU_OK(cuCtxGetCurrent(&cur));
  cr_assert_eq(cur, b);
  struct {
    unsigned w, h;
    CUarray_format f;
    unsigned ch;
  } d1 = {256, 256, CU_AD_FORMAT_UNSIGNED_INT8, 4};
  CUarray arr;
  CU_OK(array_v1(&arr, &d1));
  cr_assert_eq(fc_used(), 256 * 256 * 4);
  CU_OK(cuArrayDestroy(arr));
  unsigned t = 0;
  CU_OK(total_v1(&t, 0));
  cr_assert_eq(t, 4294967295u, "8 GiB does not fit in 32 bits");
  CU_OK(cuCtxDestroy(b));
  CU_OK(cuCtxDestroy(a));
}
