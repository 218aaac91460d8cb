/* dlsym_probe.c: which object answers a program's and an old library's
 * dlsym (tests/integration/shim/dlsym-versions.sh). Linked with
 * libtsr_old_dlsym.so, whose dlsym is the old version; the program's own
 * is the new one. For each lookup prints "<who> <name> <object>", where
 * object is the file name of what answered (or "none"):
 *
 *   new|old cuMemAlloc_v2, cuGetProcAddress_v2   dlsym(libcuda.so.1, name)
 *   new|old clCreateBuffer                       dlsym(libOpenCL.so.1, name), where it loads
 *   old next-self                                dlsym(RTLD_NEXT, ...) from the old library:
 *                                                "none" when its caller is kept
 *   new|old vclCreateBuffer                      dlvsym(libOpenCL.so.1, name, "OPENCL_1.0")
 *   new|old libc-dlsym, libc-dlvsym              dlsym(libc.so.6, "dlsym"), and of "dlvsym"
 *   new|old vlibc-dlsym, vlibc-dlvsym            dlvsym(libc.so.6, "dlsym", <first version>), ...
 *   new|old via-libc-dlsym                       that dlsym, called on (libcuda.so.1,
 *                                                "cuMemAlloc_v2"): what a program that
 *                                                fetches libc's dlsym itself gets
 * (the first version: GLIBC_2.2.5 on x86-64, GLIBC_2.17 on AArch64) */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

void *tsr_old_lookup(void *handle, const char *name);
void *tsr_old_next_self(void);
void *tsr_old_vlookup(void *handle, const char *name, const char *version);

#if defined(__aarch64__)
#define FIRST_VERSION "GLIBC_2.17"
#else
#define FIRST_VERSION "GLIBC_2.2.5"
#endif

typedef void *(*dlsym_fn)(void *, const char *);

static const char *object_of(void *p) {
  Dl_info info;
  if (!p) return "none";
  if (!dladdr(p, &info) || !info.dli_fname) return "unknown";
  const char *slash = strrchr(info.dli_fname, '/');
  return slash ? slash + 1 : info.dli_fname;
}

static void probe(void *handle, const char *name) {
  printf("new %s %s\n", name, object_of(dlsym(handle, name)));
  printf("old %s %s\n", name, object_of(tsr_old_lookup(handle, name)));
}

/* the lookups of dlsym and dlvsym themselves, and a call of the dlsym so
 * found */
static void probe_dl(void *libc, void *cuda) {
  const char *names[] = {"dlsym", "dlvsym"};
  for (int i = 0; i < 2; i++) {
    printf("new libc-%s %s\n", names[i], object_of(dlsym(libc, names[i])));
    printf("old libc-%s %s\n", names[i], object_of(tsr_old_lookup(libc, names[i])));
    printf("new vlibc-%s %s\n", names[i], object_of(dlvsym(libc, names[i], FIRST_VERSION)));
    printf("old vlibc-%s %s\n", names[i], object_of(tsr_old_vlookup(libc, names[i], FIRST_VERSION)));
  }
  dlsym_fn f;
  void *p = dlvsym(libc, "dlsym", FIRST_VERSION);
  memcpy(&f, &p, sizeof(f));
  printf("new via-libc-dlsym %s\n", object_of(f ? f(cuda, "cuMemAlloc_v2") : NULL));
  p = tsr_old_vlookup(libc, "dlsym", FIRST_VERSION);
  memcpy(&f, &p, sizeof(f));
  printf("old via-libc-dlsym %s\n", object_of(f ? f(cuda, "cuMemAlloc_v2") : NULL));
}

int main(void) {
  void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!cuda) {
    fprintf(stderr, "dlsym_probe: libcuda.so.1: %s\n", dlerror());
    return 2;
  }
  probe(cuda, "cuMemAlloc_v2");
  probe(cuda, "cuGetProcAddress_v2");
  void *ocl = dlopen("libOpenCL.so.1", RTLD_NOW | RTLD_LOCAL);
  if (ocl) {
    probe(ocl, "clCreateBuffer");
    printf("new vclCreateBuffer %s\n", object_of(dlvsym(ocl, "clCreateBuffer", "OPENCL_1.0")));
    printf("old vclCreateBuffer %s\n", object_of(tsr_old_vlookup(ocl, "clCreateBuffer", "OPENCL_1.0")));
  }
  void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  if (!libc) {
    fprintf(stderr, "dlsym_probe: libc.so.6: %s\n", dlerror());
    return 2;
  }
  probe_dl(libc, cuda);
  printf("old next-self %s\n", object_of(tsr_old_next_self()));
  return 0;
}
