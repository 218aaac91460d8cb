/* ocl_bench.c: what libtessera-opencl.so adds to clCreateBuffer and
 * clReleaseMemObject, measured call by call in one process.
 *
 *   ocl_bench [ROUNDS [BYTES]]   (defaults 20000 rounds of 4096 bytes)
 *
 * On the first device of the platform whose name contains $OCL_PLATFORM,
 * each round makes and releases one buffer twice: once through the linked
 * symbols (the shim's hooks when it is preloaded, the ICD loader's
 * otherwise) and once through the loader's own entries (read from
 * libOpenCL.so.1's symbol table: the shim answers dlsym and dlvsym of
 * them with its hooks), alternating which goes first. Every call is timed alone. It prints
 * whether the baseline is the hook (it must not be, under the shim). The loader's series is the baseline measured beside the shim in
 * the same process, so the implementation's drift from process to process
 * cancels out; without the shim both series are the loader (the floor).
 * Prints one line per series: "create_hooked p50=.. p90=.. p99=.." (ns). */
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tenant/tenant.h"

static long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int cmp(const void *a, const void *b) {
  long long x = *(const long long *)a, y = *(const long long *)b;
  return x < y ? -1 : x > y;
}

static void report(const char *name, long long *v, size_t n) {
  qsort(v, n, sizeof(*v), cmp);
  printf("%s p50=%lld p90=%lld p99=%lld\n", name, v[n / 2], v[n * 9 / 10], v[n * 99 / 100]);
}

int main(int argc, char **argv) {
  size_t rounds = argc > 1 ? strtoul(argv[1], NULL, 10) : 20000, bytes = argc > 2 ? strtoul(argv[2], NULL, 10) : 4096;
  if (rounds < 100) rounds = 100;
  /* the loader's own entries, read from its symbol table: the shim answers
   * dlsym and dlvsym of them with its hooks (tenant/dlsym.h) */
  void *lib = dlopen("libOpenCL.so.1", RTLD_NOW);
  __typeof__(clCreateBuffer) *create = NULL;
  __typeof__(clReleaseMemObject) *release = NULL;
  if (lib) {
    *(void **)&create = tsr_tenant_object_symbol("libOpenCL.so.1", "clCreateBuffer", "OPENCL_1.0");
    *(void **)&release = tsr_tenant_object_symbol("libOpenCL.so.1", "clReleaseMemObject", "OPENCL_1.0");
  }
  if (!create || !release) {
    printf("SKIP: no ICD loader with versioned symbols (OPENCL_1.0)\n");
    return 77;
  }
  void *hooked_create = (void *)clCreateBuffer;
  printf("baseline_is_hooked=%d\n", (void *)create == hooked_create);
  cl_platform_id ps[16], platform = NULL;
  cl_uint n = 0;
  if (clGetPlatformIDs(16, ps, &n) != CL_SUCCESS) n = 0;
  const char *want = getenv("OCL_PLATFORM");
  char pname[256] = "", dname[256] = "";
  for (cl_uint i = 0; i < n && !platform; i++) {
    clGetPlatformInfo(ps[i], CL_PLATFORM_NAME, sizeof(pname), pname, NULL);
    if (!want || !*want || strstr(pname, want)) platform = ps[i];
  }
  cl_device_id dev;
  if (!platform || clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &dev, NULL) != CL_SUCCESS) {
    printf("SKIP: no OpenCL platform named like '%s'\n", want ? want : "");
    return 77;
  }
  clGetDeviceInfo(dev, CL_DEVICE_NAME, sizeof(dname), dname, NULL);
  cl_int err;
  cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
  if (!ctx) {
    printf("FAIL: clCreateContext %d\n", err);
    return 1;
  }
  long long *t[4];
  for (int k = 0; k < 4; k++) t[k] = calloc(rounds, sizeof(long long));
  for (size_t r = 0; r < rounds + 200; r++) { /* 200 rounds of warm-up */
    for (int side = 0; side < 2; side++) {
      int which = (int)((r + (size_t)side) & 1); /* 0: hooked, 1: the loader's own */
      long long a = now_ns();
      cl_mem m = which ? create(ctx, CL_MEM_READ_WRITE, bytes, NULL, &err)
                       : clCreateBuffer(ctx, CL_MEM_READ_WRITE, bytes, NULL, &err);
      long long b = now_ns();
      if (!m) {
        printf("FAIL: clCreateBuffer %d in round %zu\n", err, r);
        return 1;
      }
      cl_int rc = which ? release(m) : clReleaseMemObject(m);
      long long c = now_ns();
      if (rc != CL_SUCCESS) {
        printf("FAIL: clReleaseMemObject %d\n", rc);
        return 1;
      }
      if (r >= 200) {
        t[which * 2][r - 200] = b - a;
        t[which * 2 + 1][r - 200] = c - b;
      }
    }
  }
  printf("platform=%s device=%s rounds=%zu bytes=%zu\n", pname, dname, rounds, bytes);
  report("create_hooked", t[0], rounds);
  report("release_hooked", t[1], rounds);
  report("create_loader", t[2], rounds);
  report("release_loader", t[3], rounds);
  clReleaseContext(ctx);
  return 0;
}
