/* ocl_tenant.c: an OpenCL program for libtessera-opencl.so's tests. It
 * runs on the first device of the platform whose name contains
 * $OCL_PLATFORM (default: the first platform), and checks what the lease's
 * region says after each step (REGION: its file). Prints "FAIL: ..." for
 * every check that does not hold and exits 1 if any did. REGION "env" is
 * the region of $TESSERA_LEASE in $TESSERA_REGION_DIR.
 *
 *   ocl_tenant name                 the device's name
 *   ocl_tenant paths REGION         every allocation path until refused
 *   ocl_tenant dlsym REGION         clCreateBuffer looked up with dlsym, until refused
 *   ocl_tenant refs REGION          retain/release counts, sub-buffers,
 *                                   an image over a buffer
 *   ocl_tenant context REGION       a context released with live buffers
 *   ocl_tenant hold REGION|- BYTES  one buffer of BYTES, written once,
 *                                   "ready", then waits for stdin to close
 *   ocl_tenant kernel               a kernel's results
 *   ocl_tenant view                 CL_DEVICE_GLOBAL_MEM_SIZE and _MAX_MEM_ALLOC_SIZE
 *   ocl_tenant bad                  calls with bad arguments: their codes */
#define CL_TARGET_OPENCL_VERSION 300
#define CL_USE_DEPRECATED_OPENCL_1_1_APIS
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>
#include <CL/cl_ext.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "region/region.h"

static int fails;
#define FAIL(...)        \
  do {                   \
    printf("FAIL: ");    \
    printf(__VA_ARGS__); \
    putchar('\n');       \
    fails++;             \
  } while (0)
#define CHECK(cond, ...)            \
  do {                              \
    if (!(cond)) FAIL(__VA_ARGS__); \
  } while (0)

static cl_platform_id platform;
static cl_device_id device;
static cl_context ctx;
static tsr_region_t *region;

static void pick(void) {
  cl_platform_id ps[16];
  cl_uint n = 0;
  if (clGetPlatformIDs(16, ps, &n) != CL_SUCCESS || n == 0) {
    printf("SKIP: no OpenCL platform\n");
    exit(77);
  }
  const char *want = getenv("OCL_PLATFORM");
  for (cl_uint i = 0; i < n && !platform; i++) {
    char name[256] = "";
    clGetPlatformInfo(ps[i], CL_PLATFORM_NAME, sizeof(name), name, NULL);
    if (!want || !*want || strstr(name, want)) platform = ps[i];
  }
  if (!platform || clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &device, NULL) != CL_SUCCESS) {
    printf("SKIP: no OpenCL platform named like '%s' with a device\n", want ? want : "");
    exit(77);
  }
}

static void make_context(void) {
  cl_int err = 0;
  ctx = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
  if (!ctx) {
    printf("FAIL: clCreateContext: %d\n", err);
    exit(1);
  }
}

static uint64_t used(void) {
  if (!region) return 0;
  tsr_region_stats_t s;
  tsr_region_stats(region, &s);
  return s.used_bytes;
}

static uint64_t limit(void) {
  tsr_region_stats_t s;
  tsr_region_stats(region, &s);
  return s.limit_bytes;
}

/* REGION "env": the one TESSERA_LEASE and TESSERA_REGION_DIR name (under
 * `tessera run`, which made the lease) */
static void open_region(const char *path) {
  char named[4200];
  const char *id = getenv("TESSERA_LEASE"), *dir = getenv("TESSERA_REGION_DIR");
  if (strcmp(path, "env") == 0 && id && dir) {
    snprintf(named, sizeof(named), "%s/lease-%s.region", dir, id);
    path = named;
  }
  tsr_status_t st = tsr_region_open(AT_FDCWD, path, 0, &region);
  if (st) {
    printf("FAIL: region %s: %s\n", path, tsr_status_message(st));
    exit(1);
  }
}

/* ---- the allocation paths ---- */

typedef void *(*usm_alloc_t)(cl_context, cl_device_id, const cl_mem_properties_intel *, size_t, cl_uint, cl_int *);
typedef cl_int (*usm_free_t)(cl_context, void *);
typedef cl_mem (*buffer_nv_t)(cl_context, cl_mem_flags, cl_bitfield, size_t, void *, cl_int *);

typedef enum {
  BUFFER,
  BUFFER_PROPS,
  IMAGE,
  IMAGE_PROPS,
  IMAGE2D,
  IMAGE3D,
  PIPE,
  SVM,
  USM_DEVICE,
  USM_SHARED,
  BUFFER_NV,
  PATHS
} path_t;
static const char *const path_names[PATHS] = {"clCreateBuffer",        "clCreateBufferWithProperties",
                                              "clCreateImage",         "clCreateImageWithProperties",
                                              "clCreateImage2D",       "clCreateImage3D",
                                              "clCreatePipe",          "clSVMAlloc",
                                              "clDeviceMemAllocINTEL", "clSharedMemAllocINTEL",
                                              "clCreateBufferNV"};

/* One allocation of about `bytes` through path p: the object (NULL when
 * refused) and the call's code. */
static void *alloc(path_t p, size_t bytes, cl_int *rc) {
  cl_image_format f = {CL_RGBA, CL_UNSIGNED_INT8};                        /* 4 bytes a pixel */
  size_t side = 8192, rows = bytes / 4 / side, depth = bytes / 4 / 65536; /* within every device's limits */
  if (rows == 0) rows = 1;
  if (depth == 0) depth = 1;
  cl_image_desc d;
  memset(&d, 0, sizeof(d));
  d.image_type = CL_MEM_OBJECT_IMAGE2D, d.image_width = side, d.image_height = rows;
  *rc = CL_SUCCESS;
  switch (p) {
    case BUFFER: return clCreateBuffer(ctx, CL_MEM_READ_WRITE, bytes, NULL, rc);
    case BUFFER_PROPS: return clCreateBufferWithProperties(ctx, NULL, CL_MEM_READ_WRITE, bytes, NULL, rc);
    case IMAGE: return clCreateImage(ctx, CL_MEM_READ_WRITE, &f, &d, NULL, rc);
    case IMAGE_PROPS: return clCreateImageWithProperties(ctx, NULL, CL_MEM_READ_WRITE, &f, &d, NULL, rc);
    case IMAGE2D: return clCreateImage2D(ctx, CL_MEM_READ_WRITE, &f, side, rows, 0, NULL, rc);
    case IMAGE3D: /* 256 x 256 x depth: within every device's 3D limits */
      return clCreateImage3D(ctx, CL_MEM_READ_WRITE, &f, 256, 256, depth, 0, 0, NULL, rc);
    case PIPE: return clCreatePipe(ctx, CL_MEM_READ_WRITE, 1024, (cl_uint)(bytes / 1024), NULL, rc);
    case SVM: {
      void *ptr = clSVMAlloc(ctx, CL_MEM_READ_WRITE, bytes, 0);
      *rc = ptr ? CL_SUCCESS : CL_MEM_OBJECT_ALLOCATION_FAILURE;
      return ptr;
    }
    case USM_DEVICE:
    case USM_SHARED: {
      usm_alloc_t fn = (usm_alloc_t)clGetExtensionFunctionAddressForPlatform(
          platform, p == USM_DEVICE ? "clDeviceMemAllocINTEL" : "clSharedMemAllocINTEL");
      return fn(ctx, device, NULL, bytes, 0, rc);
    }
    case BUFFER_NV: {
      buffer_nv_t fn = (buffer_nv_t)clGetExtensionFunctionAddressForPlatform(platform, "clCreateBufferNV");
      return fn(ctx, CL_MEM_READ_WRITE, 0, bytes, NULL, rc);
    }
    default: return NULL;
  }
}

static void release(path_t p, void *obj) {
  if (p == SVM) {
    clSVMFree(ctx, obj);
  } else if (p == USM_DEVICE || p == USM_SHARED) {
    usm_free_t fn = (usm_free_t)clGetExtensionFunctionAddressForPlatform(platform, "clMemBlockingFreeINTEL");
    if (fn(ctx, obj) != CL_SUCCESS) FAIL("clMemBlockingFreeINTEL");
  } else if (clReleaseMemObject(obj) != CL_SUCCESS) {
    FAIL("%s: release", path_names[p]);
  }
}

static bool supported(path_t p) {
  cl_int rc;
  if (p == USM_DEVICE || p == USM_SHARED)
    return clGetExtensionFunctionAddressForPlatform(
               platform, p == USM_DEVICE ? "clDeviceMemAllocINTEL" : "clSharedMemAllocINTEL") &&
           clGetExtensionFunctionAddressForPlatform(platform, "clMemBlockingFreeINTEL");
  if (p == BUFFER_NV) return clGetExtensionFunctionAddressForPlatform(platform, "clCreateBufferNV") != NULL;
  if (p == SVM) {
    cl_device_svm_capabilities caps = 0;
    return clGetDeviceInfo(device, CL_DEVICE_SVM_CAPABILITIES, sizeof(caps), &caps, NULL) == CL_SUCCESS && caps;
  }
  if (p == IMAGE || p == IMAGE_PROPS || p == IMAGE2D || p == IMAGE3D) {
    cl_bool images = CL_FALSE;
    clGetDeviceInfo(device, CL_DEVICE_IMAGE_SUPPORT, sizeof(images), &images, NULL);
    if (!images) return false;
  }
  void *probe = alloc(p, 64 * 1024, &rc);
  if (!probe) return false;
  release(p, probe);
  return true;
}

static int paths(void) {
  uint64_t lim = limit(), base = used(); /* the context's own charge (NVIDIA's) is in base */
  size_t chunk = (size_t)((lim - base) / 8);
  int tried = 0;
  for (int p = 0; p < PATHS; p++) {
    if (!supported((path_t)p)) {
      printf("%s: not supported here\n", path_names[p]);
      continue;
    }
    tried++;
    void *objs[64];
    int n = 0;
    cl_int rc = CL_SUCCESS;
    uint64_t before_refusal = 0;
    while (n < 64) {
      before_refusal = used();
      void *o = alloc((path_t)p, chunk, &rc);
      if (!o) break;
      objs[n++] = o;
      CHECK(used() <= lim, "%s: the lease holds %llu bytes past its limit %llu", path_names[p],
            (unsigned long long)used(), (unsigned long long)lim);
    }
    cl_int want = p == USM_DEVICE || p == USM_SHARED ? CL_OUT_OF_RESOURCES : CL_MEM_OBJECT_ALLOCATION_FAILURE;
    CHECK(n >= 4 && n <= 8, "%s: %d allocations of an eighth of the lease before a refusal", path_names[p], n);
    CHECK(rc == want, "%s: refused with %d, wanted %d", path_names[p], rc, want);
    CHECK(used() == before_refusal, "%s: the refused call changed the lease's bytes", path_names[p]);
    CHECK(used() >= base + (uint64_t)n * chunk, "%s: %d allocations of %zu charged only %llu", path_names[p], n, chunk,
          (unsigned long long)(used() - base));
    printf("%s: %d made, then refused with %d\n", path_names[p], n, rc);
    for (int i = 0; i < n; i++) release((path_t)p, objs[i]);
    CHECK(used() == base, "%s: %llu bytes still charged after every release", path_names[p],
          (unsigned long long)(used() - base));
  }
  CHECK(tried >= 4, "only %d paths could be tried", tried);
  return 0;
}

/* The loader's entries looked up with dlsym, as programs that open
 * libOpenCL.so.1 themselves do. */
static int by_dlsym(void) {
  void *lib = dlopen("libOpenCL.so.1", RTLD_NOW);
  cl_mem (*create)(cl_context, cl_mem_flags, size_t, void *, cl_int *) = NULL;
  cl_int (*release_fn)(cl_mem) = NULL;
  if (lib) {
    *(void **)&create = dlsym(lib, "clCreateBuffer");
    *(void **)&release_fn = dlsym(lib, "clReleaseMemObject");
  }
  if (!create || !release_fn) {
    FAIL("dlsym found no clCreateBuffer or clReleaseMemObject");
    return 1;
  }
  uint64_t lim = limit(), base = used();
  size_t chunk = (size_t)((lim - base) / 8);
  cl_mem objs[64];
  int n = 0;
  cl_int rc = CL_SUCCESS;
  while (n < 64 && (objs[n] = create(ctx, CL_MEM_READ_WRITE, chunk, NULL, &rc)) != NULL) n++;
  CHECK(n >= 4 && n <= 8 && rc == CL_MEM_OBJECT_ALLOCATION_FAILURE,
        "through dlsym: %d buffers of an eighth of the lease, then %d", n, rc);
  CHECK(used() <= lim && used() >= base + (uint64_t)n * chunk, "through dlsym: %llu charged",
        (unsigned long long)(used() - base));
  for (int i = 0; i < n; i++) release_fn(objs[i]);
  CHECK(used() == base, "through dlsym: %llu still charged after the releases", (unsigned long long)(used() - base));
  printf("dlsym: %d made, then refused with %d\n", n, rc);
  return 0;
}

static int refs(void) {
  uint64_t base = used();
  cl_int err;
  size_t mib = 1 << 20;
  cl_mem b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, mib, NULL, &err);
  uint64_t one = used() - base;
  CHECK(b && one >= mib, "a 1 MiB buffer charged %llu", (unsigned long long)one);
  clRetainMemObject(b);
  clRetainMemObject(b);
  clReleaseMemObject(b);
  clReleaseMemObject(b);
  CHECK(used() - base == one, "retained twice, released twice: %llu charged, wanted %llu",
        (unsigned long long)(used() - base), (unsigned long long)one);
  clReleaseMemObject(b);
  CHECK(used() == base, "the third release did not credit the buffer");
  /* a sub-buffer keeps its parent's memory */
  b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, mib, NULL, &err);
  cl_buffer_region r = {0, 4096};
  cl_mem s = clCreateSubBuffer(b, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &r, &err);
  CHECK(s && used() - base == one, "a sub-buffer charged %llu more", (unsigned long long)(used() - base - one));
  clReleaseMemObject(b);
  CHECK(used() - base == one, "the parent's memory was credited while its sub-buffer lives");
  clReleaseMemObject(s);
  CHECK(used() == base, "the sub-buffer's release did not credit its parent");
  /* an image over a buffer */
  cl_bool images = CL_FALSE;
  clGetDeviceInfo(device, CL_DEVICE_IMAGE_SUPPORT, sizeof(images), &images, NULL);
  if (images) {
    b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, mib, NULL, &err);
    cl_image_format f = {CL_RGBA, CL_UNSIGNED_INT8};
    cl_image_desc d;
    memset(&d, 0, sizeof(d));
    d.image_type = CL_MEM_OBJECT_IMAGE1D_BUFFER, d.image_width = mib / 4, d.mem_object = b;
    cl_mem im = clCreateImage(ctx, CL_MEM_READ_WRITE, &f, &d, NULL, &err);
    if (im) {
      CHECK(used() - base == one, "an image over a buffer charged %llu more",
            (unsigned long long)(used() - base - one));
      clReleaseMemObject(b);
      CHECK(used() - base == one, "the buffer was credited while an image over it lives");
      clReleaseMemObject(im);
    } else {
      printf("an image over a buffer: not made here (%d)\n", err);
      clReleaseMemObject(b);
    }
    CHECK(used() == base, "the image over a buffer left %llu charged", (unsigned long long)(used() - base));
  }
  /* releasing what is already gone is the implementation's error, and no credit */
  CHECK(clReleaseMemObject(NULL) == CL_INVALID_MEM_OBJECT, "clReleaseMemObject(NULL)");
  printf("refs: ok\n");
  return 0;
}

static int context_released_live(void) {
  uint64_t base = used();
  cl_int err;
  size_t mib = 1 << 20;
  cl_mem b[4];
  for (int i = 0; i < 4; i++) b[i] = clCreateBuffer(ctx, CL_MEM_READ_WRITE, mib, NULL, &err);
  uint64_t four = used() - base;
  CHECK(four >= 4 * mib, "four buffers charged %llu", (unsigned long long)four);
  cl_context c = ctx;
  CHECK(clReleaseContext(c) == CL_SUCCESS, "clReleaseContext");
  /* the buffers live on (they hold the context), and are charged */
  size_t size = 0;
  CHECK(clGetMemObjectInfo(b[0], CL_MEM_SIZE, sizeof(size), &size, NULL) == CL_SUCCESS && size == mib,
        "a buffer of a released context is gone");
  CHECK(used() - base >= four, "the context's release credited its live buffers");
  for (int i = 0; i < 4; i++) clReleaseMemObject(b[i]);
  CHECK(used() <= base, "%llu bytes charged after the buffers of a released context went",
        (unsigned long long)(used() - base));
  printf("context: ok\n");
  return 0;
}

static int hold(size_t bytes) {
  cl_int err;
  cl_mem b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, bytes, NULL, &err);
  if (b) { /* written once, so that an implementation that allocates lazily holds it now */
    cl_command_queue q = clCreateCommandQueueWithProperties(ctx, device, NULL, &err);
    unsigned char one = 1;
    if (!q || clEnqueueFillBuffer(q, b, &one, 1, 0, bytes, 0, NULL, NULL) != CL_SUCCESS || clFinish(q) != CL_SUCCESS)
      FAIL("the buffer could not be written");
    if (q) clReleaseCommandQueue(q);
  }
  printf(b ? "ready\n" : "refused %d\n", err);
  fflush(stdout);
  char c;
  while (read(0, &c, 1) > 0) {
  }
  if (b) clReleaseMemObject(b);
  return 0;
}

static const char *kernel_src =
    "__kernel void axpy(__global const float *x, __global float *y, float a) {\n"
    "  size_t i = get_global_id(0); y[i] = a * x[i] + y[i]; }\n";

static int kernel(void) {
  enum { N = 1 << 16 };
  static float x[N], y[N], out[N];
  for (int i = 0; i < N; i++) x[i] = (float)(i % 97) * 0.5f, y[i] = (float)(i % 13) - 6.0f;
  cl_int err;
  cl_command_queue q = clCreateCommandQueueWithProperties(ctx, device, NULL, &err);
  cl_mem bx = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, sizeof(x), x, &err);
  cl_mem by = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof(y), y, &err);
  cl_program prog = clCreateProgramWithSource(ctx, 1, &kernel_src, NULL, &err);
  if (clBuildProgram(prog, 1, &device, NULL, NULL, NULL) != CL_SUCCESS) {
    FAIL("the kernel did not build");
    return 1;
  }
  cl_kernel k = clCreateKernel(prog, "axpy", &err);
  float a = 3.0f;
  clSetKernelArg(k, 0, sizeof(bx), &bx);
  clSetKernelArg(k, 1, sizeof(by), &by);
  clSetKernelArg(k, 2, sizeof(a), &a);
  size_t global = N;
  CHECK(clEnqueueNDRangeKernel(q, k, 1, NULL, &global, NULL, 0, NULL, NULL) == CL_SUCCESS, "enqueue");
  CHECK(clEnqueueReadBuffer(q, by, CL_TRUE, 0, sizeof(out), out, 0, NULL, NULL) == CL_SUCCESS, "read");
  int wrong = 0;
  for (int i = 0; i < N; i++)
    if (out[i] != a * x[i] + y[i]) wrong++;
  CHECK(wrong == 0, "%d of %d results wrong", wrong, N);
  printf("kernel: %d results checked\n", N);
  clReleaseKernel(k);
  clReleaseProgram(prog);
  clReleaseMemObject(bx);
  clReleaseMemObject(by);
  clReleaseCommandQueue(q);
  return 0;
}

static int view(void) {
  cl_ulong global = 0, max = 0;
  clGetDeviceInfo(device, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof(global), &global, NULL);
  clGetDeviceInfo(device, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof(max), &max, NULL);
  printf("global=%llu max_alloc=%llu\n", (unsigned long long)global, (unsigned long long)max);
  return 0;
}

/* Codes only: the same lines with and without the shim. */
static int bad(void) {
  cl_int err = 0;
  clCreateBuffer(NULL, 0, 64, NULL, &err);
  printf("buffer without context: %d\n", err);
  clCreateBuffer(ctx, 0, 0, NULL, &err);
  printf("buffer of 0 bytes: %d\n", err);
  clCreateBuffer(ctx, (cl_mem_flags)1 << 40, 64, NULL, &err);
  printf("buffer with unknown flags: %d\n", err);
  clCreateBuffer(ctx, CL_MEM_USE_HOST_PTR, 64, NULL, &err);
  printf("buffer with USE_HOST_PTR and no pointer: %d\n", err);
  clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_WRITE_ONLY, 64, NULL, &err);
  printf("buffer with conflicting flags: %d\n", err);
  cl_image_desc d;
  memset(&d, 0, sizeof(d));
  d.image_type = CL_MEM_OBJECT_IMAGE2D, d.image_width = 16, d.image_height = 16;
  clCreateImage(ctx, 0, NULL, &d, NULL, &err);
  printf("image without format: %d\n", err);
  cl_image_format f = {CL_RGBA, CL_FLOAT};
  clCreateImage(ctx, 0, &f, NULL, NULL, &err);
  printf("image without description: %d\n", err);
  cl_buffer_region r = {0, 64};
  clCreateSubBuffer(NULL, 0, CL_BUFFER_CREATE_TYPE_REGION, &r, &err);
  printf("sub-buffer of nothing: %d\n", err);
  printf("svm of 0 bytes: %s\n", clSVMAlloc(ctx, 0, 0, 0) ? "a pointer" : "NULL");
  printf("release of NULL: %d\n", clReleaseMemObject(NULL));
  printf("retain of NULL: %d\n", clRetainMemObject(NULL));
  printf("context release of NULL: %d\n", clReleaseContext(NULL));
  clSVMFree(ctx, NULL);
  cl_device_id none = NULL;
  clCreateContext(NULL, 1, &none, NULL, NULL, &err);
  printf("context of a NULL device: %d\n", err);
  clCreateContext(NULL, 0, NULL, NULL, NULL, &err);
  printf("context of no device: %d\n", err);
  cl_ulong mem = 0;
  printf("memory of a NULL device: %d\n", clGetDeviceInfo(NULL, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof(mem), &mem, NULL));
  printf("memory into a short buffer: %d\n", clGetDeviceInfo(device, CL_DEVICE_GLOBAL_MEM_SIZE, 4, &mem, NULL));
  printf("extension that does not exist: %s\n",
         clGetExtensionFunctionAddressForPlatform(platform, "clNoSuchThingTSR") ? "found" : "NULL");
  return 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc < 2) {
    fprintf(stderr, "usage: ocl_tenant name|paths|dlsym|refs|context|hold|kernel|view|bad [REGION [BYTES]]\n");
    return 2;
  }
  pick();
  const char *mode = argv[1];
  if (strcmp(mode, "name") == 0) {
    char name[256] = "";
    clGetDeviceInfo(device, CL_DEVICE_NAME, sizeof(name), name, NULL);
    printf("%s\n", name);
    return 0;
  }
  make_context();
  bool wants_region = strcmp(mode, "paths") == 0 || strcmp(mode, "refs") == 0 || strcmp(mode, "dlsym") == 0 ||
                      strcmp(mode, "context") == 0 || strcmp(mode, "hold") == 0;
  if (wants_region) {
    if (argc < 3) {
      fprintf(stderr, "%s needs REGION (hold: or -, for none)\n", mode);
      return 2;
    }
    if (strcmp(argv[2], "-") != 0 || strcmp(mode, "hold") != 0) open_region(argv[2]);
  }
  if (strcmp(mode, "paths") == 0)
    paths();
  else if (strcmp(mode, "refs") == 0)
    refs();
  else if (strcmp(mode, "dlsym") == 0)
    by_dlsym();
  else if (strcmp(mode, "context") == 0)
    context_released_live();
  else if (strcmp(mode, "hold") == 0)
    hold(argc > 3 ? (size_t)strtoull(argv[3], NULL, 10) : 1 << 20);
  else if (strcmp(mode, "kernel") == 0)
    kernel();
  else if (strcmp(mode, "view") == 0)
    view();
  else if (strcmp(mode, "bad") == 0)
    bad();
  else {
    fprintf(stderr, "unknown mode %s\n", mode);
    return 2;
  }
  if (strcmp(mode, "context") != 0) clReleaseContext(ctx);
  return fails ? 1 : 0;
}
