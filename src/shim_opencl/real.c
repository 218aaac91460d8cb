/* real.c: the real ICD loader, and dlsym.
 *
 * The loader is opened with dlopen("libOpenCL.so.1") ($TESSERA_REAL_LIBOPENCL
 * overrides the name, for tests); dlsym on that handle finds the loader's
 * own definitions even though the shim, preloaded, defines the same names
 * in the global scope. A program that never loaded OpenCL gets it loaded
 * here on its first call, as linking it would have.
 *
 * A program that opens the loader itself and looks its entries up with
 * dlsym (hashcat, and others that run without OpenCL installed) would pass
 * the shim by: the shim interposes dlsym, and hands out its hook wherever
 * the loader's own entry of a hooked name would have come back. With
 * libtessera-cuda.so preloaded first, whose dlsym forwards to the next
 * dlsym in the search order, the two chain: each maps its own API's names.
 * The shim's own lookups use the next dlsym directly. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "shim_opencl/shim.h"

tsr_ocl_real_t tsr_ocl_real;

#define TSR__LOAD(name) memcpy(&tsr_ocl_real.name, (void *[]){next(lib, #name)}, sizeof(void *));

static pthread_once_t tsr__load_once = PTHREAD_ONCE_INIT;
static bool tsr__loaded;

static void tsr__load(void) {
  tsr_tenant_dlsym_fn next = tsr_tenant_next_dlsym();
  const char *name = tsr_tenant_getenv("TESSERA_REAL_LIBOPENCL");
  void *lib = next ? dlopen(name && *name ? name : "libOpenCL.so.1", RTLD_NOW | RTLD_GLOBAL) : NULL;
  if (!lib) return;
  TSR_OCL_HOOKED(TSR__LOAD)
  TSR_OCL_USED(TSR__LOAD)
  tsr__loaded = tsr_ocl_real.clGetPlatformIDs != NULL;
}

bool tsr_ocl_real_load(void) {
  pthread_once(&tsr__load_once, tsr__load);
  return tsr__loaded;
}

/* Each hooked name, its real entry and its hook. */
#define TSR__HOOK(name) {#name, &tsr_ocl_real.name, (void *)name},
static const struct {
  const char *name;
  const void *real; /* points at the tsr_ocl_real field */
  void *hook;
} tsr__hooks[] = {TSR_OCL_HOOKED(TSR__HOOK)};

/* The hook of `symbol`'s entry in the table, or -1. */
static ptrdiff_t tsr__hook_index(const char *symbol) {
  if (!symbol || symbol[0] != 'c' || symbol[1] != 'l') return -1;
  for (size_t i = 0; i < sizeof(tsr__hooks) / sizeof(tsr__hooks[0]); i++)
    if (strcmp(symbol, tsr__hooks[i].name) == 0) return (ptrdiff_t)i;
  return -1;
}

/* The shim's own dlsym, for the names it hooks. Only those load the ICD
 * loader (to compare entries): a process that looks up "close" or
 * "clock_gettime" never does. */
static void *tsr__dlsym_hooked(void *handle, const char *symbol) {
  tsr_tenant_dlsym_fn next = tsr_tenant_next_dlsym();
  void *p = next ? next(handle, symbol) : NULL;
  ptrdiff_t i = tsr__hook_index(symbol);
  if (!p || i < 0) return p;
  void *real = NULL;
  if (tsr_ocl_real_load()) memcpy(&real, tsr__hooks[i].real, sizeof(real));
  return real == p ? tsr__hooks[i].hook : p;
}

tsr_tenant_dlsym_fn tsr_ocl_dlsym_hook(const char *symbol) {
  return tsr__hook_index(symbol) >= 0 ? tsr__dlsym_hooked : NULL;
}
