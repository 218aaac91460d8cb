/* dlsym_probe.c: which object answers a program's and an old library's
 * dlsym (tests/integration/shim/dlsym-versions.sh). Linked with
 * libtsr_old_dlsym.so, whose dlsym is the old version; the program's own
 * is the new one. For each lookup prints "<who> <name> <object>", where
 * object is the file name of what answered (or "none"):
 *
 *   new|old cuMemAlloc_v2, cuGetProcAddress_v2   dlsym(libcuda.so.1, name)
 *   new|old clCreateBuffer                       dlsym(libOpenCL.so.1, name), where it loads
 *   old next-self                                dlsym(RTLD_NEXT, ...) from the old library:
 *                                                "none" when its caller is kept */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

void *tsr_old_lookup(void *handle, const char *name);
void *tsr_old_next_self(void);

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

int main(void) {
  void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!cuda) {
    fprintf(stderr, "dlsym_probe: libcuda.so.1: %s\n", dlerror());
    return 2;
  }
  probe(cuda, "cuMemAlloc_v2");
  probe(cuda, "cuGetProcAddress_v2");
  void *ocl = dlopen("libOpenCL.so.1", RTLD_NOW | RTLD_LOCAL);
  if (ocl) probe(ocl, "clCreateBuffer");
  printf("old next-self %s\n", object_of(tsr_old_next_self()));
  return 0;
}
