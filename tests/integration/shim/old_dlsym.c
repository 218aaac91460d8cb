/* old_dlsym.c: libtsr_old_dlsym.so, a library bound to dlsym's and
 * dlvsym's first version (@GLIBC_2.2.5 on x86-64, @GLIBC_2.17 on
 * AArch64), as every library linked against a glibc before 2.34 is: CUDA's
 * own libraries in the PyTorch wheels (libcudart.so.13, cuBLAS, NCCL's)
 * find the driver this way. dlsym_probe calls it. */
#include <dlfcn.h>

/* The probe program finds these with its own declarations (dlsym_probe.c). */
#pragma GCC diagnostic ignored "-Wmissing-prototypes"

#if defined(__x86_64__)
__asm__(".symver dlsym, dlsym@GLIBC_2.2.5");
__asm__(".symver dlvsym, dlvsym@GLIBC_2.2.5");
#elif defined(__aarch64__)
__asm__(".symver dlsym, dlsym@GLIBC_2.17");
__asm__(".symver dlvsym, dlvsym@GLIBC_2.17");
#else
#error "no old dlsym version known for this architecture"
#endif

/* dlsym(handle, name), through the old version */
__attribute__((visibility("default"))) void *tsr_old_lookup(void *handle, const char *name) {
  return dlsym(handle, name);
}

/* dlvsym(handle, name, version), through the old version */
__attribute__((visibility("default"))) void *tsr_old_vlookup(void *handle, const char *name, const char *version) {
  return dlvsym(handle, name, version);
}

/* dlsym(RTLD_NEXT, "tsr_old_lookup") from this library: NULL when the
 * caller is kept (no object after this one defines it); this library's
 * own function when the lookup is answered as if a shim, loaded before
 * it, had made it. */
__attribute__((visibility("default"))) void *tsr_old_next_self(void) {
  void *p = dlsym(RTLD_NEXT, "tsr_old_lookup");
  __asm__ volatile("" ::: "memory"); /* no tail call: the caller must be this library */
  return p;
}
