/* modules.c: modules and libraries, charged for the static device memory
 * their images declare (image.h).
 *
 * The image is loaded first (the driver checks it, and the shim reads only
 * an image the driver accepted), then its static bytes are charged to the
 * lease of the current device; if the lease cannot take them the module is
 * unloaded again and the load fails with out-of-memory. cuModuleUnload and
 * cuLibraryUnload credit them. A library (cuLibraryLoad*) is charged once,
 * however many contexts it is later loaded into, and stays charged until
 * cuLibraryUnload; a module is loaded into the current context and ends
 * with it (context.c). A file (cuModuleLoad, cuLibraryLoadFromFile) is
 * read again here, up to 1 GiB. */
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shim/image.h"
#include "shim/shim.h"

#define TSR_EXPORT __attribute__((visibility("default")))
#define TSR__FILE_MAX ((size_t)1 << 30)

static CUresult tsr__undo_module(uint64_t m) { return tsr_real.cuModuleUnload((CUmodule)(uintptr_t)m); }
static CUresult tsr__undo_library(uint64_t l) { return tsr_real.cuLibraryUnload((CUlibrary)(uintptr_t)l); }

/* Charges `bytes` for the loaded `handle` for `life` (a module is its
 * context's, a library the process's); undoes the load if refused. */
static CUresult tsr__charge_loaded(uint64_t handle, uint64_t bytes, bool unknown, tsr_shim_life_t life,
                                   CUresult (*undo)(uint64_t)) {
  if (unknown)
    tsr_shim_warn_once(TSR_WARN_IMAGE_UNREAD,
                       "a module image has a fatbin entry that cannot be read (damaged, compressed in a way "
                       "not known here, or over 1 GiB unpacked): what it declares is not charged here");
  if (bytes == 0) return CUDA_SUCCESS;
  int charged;
  if (!tsr_shim_charge(tsr_shim_current_lease(), bytes, &charged)) {
    undo(handle);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return tsr_shim_record(charged, TSR_KEY_MODULE(handle), handle, bytes, life, undo);
}

/* The compute capability of the current context's device (90 for 9.0), the
 * architecture whose fatbin entries the driver loads; 0 if not known (then
 * every entry is read). A library is charged to the current device's lease
 * too, so its architecture is that device's. */
static unsigned tsr__current_arch(void) {
  CUdevice dev;
  int major = 0, minor = 0;
  if (!tsr_real.cuCtxGetDevice || !tsr_real.cuDeviceGetAttribute || tsr_real.cuCtxGetDevice(&dev) != CUDA_SUCCESS ||
      tsr_real.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) != CUDA_SUCCESS ||
      tsr_real.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev) != CUDA_SUCCESS ||
      major <= 0 || major > 99 || minor < 0 || minor > 9)
    return 0;
  return (unsigned)(major * 10 + minor);
}

/* What the process may unpack of compressed fatbin entries, in all (image.h):
 * enough for any module a program loads itself (a module declaring
 * gigabytes of statics is a few KiB), not for the thousands of kernels of
 * a library such as cuBLASLt (360 MiB for sm_90, seconds to unpack), which
 * the runtime registers at start-up and which declare next to nothing.
 * Past it, entries are left to the backstop, without a warning: every
 * PyTorch process would print one. */
#define TSR__UNPACK_BUDGET ((uint64_t)16 << 20)
static _Atomic uint64_t tsr__unpack_left = TSR__UNPACK_BUDGET;

static uint64_t tsr__static_bytes(const void *image, size_t len, bool *unknown) {
  uint64_t before = atomic_load(&tsr__unpack_left), left = before;
  uint64_t bytes = tsr_shim_image_static_bytes(image, len, tsr__current_arch(), &left, unknown);
  uint64_t spent = before - left, now = atomic_load(&tsr__unpack_left);
  while (spent && !atomic_compare_exchange_weak(&tsr__unpack_left, &now, now > spent ? now - spent : 0)) {
  }
  return bytes;
}

static uint64_t tsr__file_static(const char *path, bool *unknown) {
  *unknown = false;
  int fd = path ? open(path, O_RDONLY | O_CLOEXEC) : -1;
  if (fd < 0) return 0;
  struct stat st;
  uint64_t bytes = 0;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 && (size_t)st.st_size <= TSR__FILE_MAX) {
    size_t n = (size_t)st.st_size;
    char *buf = malloc(n + 1);
    size_t got = 0;
    while (buf && got < n) {
      ssize_t r = read(fd, buf + got, n - got);
      if (r <= 0) break;
      got += (size_t)r;
    }
    if (buf && got == n) {
      buf[n] = '\0';
      bytes = tsr__static_bytes(buf, n, unknown);
    }
    free(buf);
  }
  close(fd);
  return bytes;
}

#define TSR__LIFE_module TSR_SHIM_LIFE_CONTEXT /* loaded into the current context */
#define TSR__LIFE_library TSR_SHIM_LIFE_PROCESS

#define TSR__LOADED(kind, rc, handle, bytes_expr, undo)                                                    \
  do {                                                                                                     \
    if ((rc) != CUDA_SUCCESS || !tsr_shim.tenant.governed || !(handle)) return (rc);                       \
    bool unknown_ = false;                                                                                 \
    uint64_t bytes_ = (bytes_expr);                                                                        \
    return tsr__charge_loaded((uint64_t)(uintptr_t) * (handle), bytes_, unknown_, TSR__LIFE_##kind, undo); \
  } while (0)

TSR_EXPORT CUresult cuModuleLoad(CUmodule *module, const char *fname) {
  tsr_shim_ready();
  if (!tsr_real.cuModuleLoad) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = tsr_real.cuModuleLoad(module, fname);
  TSR__LOADED(module, rc, module, tsr__file_static(fname, &unknown_), tsr__undo_module);
}

TSR_EXPORT CUresult cuModuleLoadData(CUmodule *module, const void *image) {
  tsr_shim_ready();
  if (!tsr_real.cuModuleLoadData) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = tsr_real.cuModuleLoadData(module, image);
  TSR__LOADED(module, rc, module, tsr__static_bytes(image, SIZE_MAX, &unknown_), tsr__undo_module);
}

TSR_EXPORT CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int n, void *options,
                                       void **values) {
  tsr_shim_ready();
  if (!tsr_real.cuModuleLoadDataEx) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = tsr_real.cuModuleLoadDataEx(module, image, n, options, values);
  TSR__LOADED(module, rc, module, tsr__static_bytes(image, SIZE_MAX, &unknown_), tsr__undo_module);
}

TSR_EXPORT CUresult cuModuleLoadFatBinary(CUmodule *module, const void *fatbin) {
  tsr_shim_ready();
  if (!tsr_real.cuModuleLoadFatBinary) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = tsr_real.cuModuleLoadFatBinary(module, fatbin);
  TSR__LOADED(module, rc, module, tsr__static_bytes(fatbin, SIZE_MAX, &unknown_), tsr__undo_module);
}

TSR_EXPORT CUresult cuModuleUnload(CUmodule module) {
  tsr_shim_ready();
  if (!tsr_real.cuModuleUnload) return CUDA_ERROR_NOT_INITIALIZED;
  uint64_t raw = (uint64_t)(uintptr_t)module;
  CUresult rc = tsr_shim_free(TSR_KEY_MODULE(raw), tsr__undo_module, raw);
  if (rc == CUDA_SUCCESS) tsr_shim_launch_forget(); /* its functions' handles may come back */
  return rc;
}

TSR_EXPORT CUresult cuLibraryLoadData(CUlibrary *library, const void *code, void *jit_options, void **jit_values,
                                      unsigned int njit, void *lib_options, void **lib_values, unsigned int nlib) {
  tsr_shim_ready();
  if (!tsr_real.cuLibraryLoadData) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = tsr_real.cuLibraryLoadData(library, code, jit_options, jit_values, njit, lib_options, lib_values, nlib);
  TSR__LOADED(library, rc, library, tsr__static_bytes(code, SIZE_MAX, &unknown_), tsr__undo_library);
}

TSR_EXPORT CUresult cuLibraryLoadFromFile(CUlibrary *library, const char *fname, void *jit_options, void **jit_values,
                                          unsigned int njit, void *lib_options, void **lib_values, unsigned int nlib) {
  tsr_shim_ready();
  if (!tsr_real.cuLibraryLoadFromFile) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc =
      tsr_real.cuLibraryLoadFromFile(library, fname, jit_options, jit_values, njit, lib_options, lib_values, nlib);
  TSR__LOADED(library, rc, library, tsr__file_static(fname, &unknown_), tsr__undo_library);
}

TSR_EXPORT CUresult cuLibraryUnload(CUlibrary library) {
  tsr_shim_ready();
  if (!tsr_real.cuLibraryUnload) return CUDA_ERROR_NOT_INITIALIZED;
  uint64_t raw = (uint64_t)(uintptr_t)library;
  CUresult rc = tsr_shim_free(TSR_KEY_MODULE(raw), tsr__undo_library, raw);
  if (rc == CUDA_SUCCESS) tsr_shim_launch_forget();
  return rc;
}
