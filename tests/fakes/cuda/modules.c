/* modules.c: modules, functions and kernel launches.
 *
 * A module takes device memory for its static data from the moment it is
 * loaded until it is unloaded (the H100: 64 MiB for a PTX image declaring a
 * 64 MiB .global array, given back by cuModuleUnload). The fake charges the
 * .global arrays a PTX image declares plus FAKE_CUDA_MODULE_BYTES for every
 * module (cubin and fatbin images are not parsed: only
 * FAKE_CUDA_MODULE_BYTES). Images are recognized by their start: ELF (a
 * cubin), a fatbin, or PTX text (".version", ".target" or ".entry");
 * anything else is CUDA_ERROR_INVALID_IMAGE, as "this is not a module" was
 * on the H100. A PTX module knows its .entry names and cuModuleGetFunction
 * answers CUDA_ERROR_NOT_FOUND for others; a binary module gives a handle
 * for any name. Launches check their configuration and the handle, then
 * queue the kernel's simulated duration on the stream's timeline
 * (timeline.c: a name ending in _<N>us runs N us per wave), or, on a
 * capturing stream, add a kernel node to the capture's graph (capture.c).
 * A library kernel (CUkernel) is the same handle as its function, so it may
 * be launched as one, as CUDA 12 runtimes do. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "base/array.h"
#include "base/fs.h"
#include "internal.h"

#define FC_MODULE_FILE_MAX ((size_t)256 << 20)

typedef struct fc_func fc_func_t;

typedef struct {
  fc_obj_t hdr;
  fc_ctx_t *ctx;
  int dev;
  uint64_t charged;
  bool ptx;
  char **entries; /* PTX: the kernels it defines */
  size_t nentries, capentries;
} fc_module_t;

struct fc_func {
  fc_obj_t hdr;
  fc_module_t *module;
  char *name;
  uint64_t wave_ns; /* simulated time of one wave (timeline.c) */
};

/* ---- reading an image ------------------------------------------------------- */

static bool fc_is_ident(char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' || ch == '$' ||
         ch == '.';
}

static bool fc_module_add_entry(fc_module_t *m, const char *name, size_t len) {
  char **grown = tsr_array_grow(m->entries, &m->capentries, m->nentries + 1, sizeof(char *), 4);
  if (!grown) return false;
  m->entries = grown;
  char *copy = strndup(name, len);
  if (!copy) return false;
  m->entries[m->nentries++] = copy;
  return true;
}

/* The size of one element of a PTX type (.b8 .u16 .f32 .s64 ...), 0 if none. */
static uint64_t fc_ptx_elem(const char *t, size_t len) {
  if (len < 3 || t[0] != '.' || !strchr("busf", t[1])) return 0;
  long bits = strtol(t + 2, NULL, 10);
  return bits == 8 || bits == 16 || bits == 32 || bits == 64 ? (uint64_t)bits / 8 : 0;
}

/* Static bytes of one ".global ... ;" declaration starting at `p`. */
static uint64_t fc_ptx_global(const char *p, const char *end) {
  uint64_t elem = 0, count = 1;
  while (p < end) {
    while (p < end && (*p == ' ' || *p == '\t')) p++;
    const char *tok = p;
    while (p < end && fc_is_ident(*p)) p++;
    if (p > tok && elem == 0) elem = fc_ptx_elem(tok, (size_t)(p - tok));
    if (p < end && *p == '[') {
      char *stop;
      unsigned long long n = strtoull(p + 1, &stop, 10);
      count = n != 0 && count > UINT64_MAX / n ? UINT64_MAX : count * n;
      p = stop;
    }
    if (p == tok) p++; /* punctuation */
  }
  return elem != 0 && count > UINT64_MAX / elem ? UINT64_MAX : elem * count;
}

/* Reads a PTX text: its kernels' names and its static data. */
static bool fc_ptx_read(fc_module_t *m, const char *text, uint64_t *out_static) {
  uint64_t bytes = 0;
  for (const char *p = text; (p = strchr(p, '.')) != NULL; p++) {
    if (strncmp(p, ".entry", 6) == 0 && !fc_is_ident(p[6])) {
      const char *q = p + 6;
      while (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r') q++;
      const char *name = q;
      while (fc_is_ident(*q)) q++;
      if (q > name && !fc_module_add_entry(m, name, (size_t)(q - name))) return false;
    } else if (strncmp(p, ".global", 7) == 0 && !fc_is_ident(p[7])) {
      const char *end = strchr(p, ';');
      if (!end) break;
      uint64_t b = fc_ptx_global(p + 7, end);
      bytes = b > UINT64_MAX - bytes ? UINT64_MAX : bytes + b;
    }
  }
  *out_static = bytes;
  return true;
}

static void fc_module_free(fc_module_t *m) {
  for (size_t i = g_fc.nobjs[FC_K_FUNC]; i-- > 0;) {
    fc_func_t *f = g_fc.objs[FC_K_FUNC][i];
    if (f->module != m) continue;
    fc_obj_remove(FC_K_FUNC, f);
    free(f->name);
    free(f);
  }
  for (size_t i = 0; i < m->nentries; i++) free(m->entries[i]);
  free(m->entries);
  free(m);
}

static CUresult fc_module_load_data(CUmodule *module, const void *image) {
  fc_ctx_t *c;
  CUresult rc = fc_current(&c);
  if (rc != CUDA_SUCCESS) return rc;
  if (!module || !image) return CUDA_ERROR_INVALID_VALUE;
  fc_module_t *m = calloc(1, sizeof *m);
  if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
  m->hdr.kind = FC_K_MODULE;
  const unsigned char *b = image;
  uint64_t bytes = 0;
  /* byte by byte, so a short text image is never read past its end */
  bool elf = b[0] == 0x7f && b[1] == 'E' && b[2] == 'L' && b[3] == 'F';
  bool fatbin = b[0] == 0x50 && b[1] == 0xed && b[2] == 0x55 && b[3] == 0xba;  /* 0xBA55ED50 */
  bool wrapper = b[0] == 0xb1 && b[1] == 0x43 && b[2] == 0x62 && b[3] == 0x46; /* 0x466243B1 */
  if (elf || fatbin || wrapper) {
    m->ptx = false; /* cubin, fatbin, fatbin wrapper */
  } else if (strstr(image, ".version") || strstr(image, ".target") || strstr(image, ".entry")) {
    m->ptx = true;
    if (!fc_ptx_read(m, image, &bytes)) {
      fc_module_free(m);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
  } else {
    fc_module_free(m);
    return CUDA_ERROR_INVALID_IMAGE;
  }
  bytes = bytes > UINT64_MAX - g_fc.cfg.module_bytes ? UINT64_MAX : bytes + g_fc.cfg.module_bytes;
  if (bytes > fake_cuda_state_total(g_fc.state, c->dev) || (rc = fc_charge(c->dev, bytes)) != CUDA_SUCCESS) {
    fc_module_free(m);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (!fc_obj_add(FC_K_MODULE, m)) {
    fc_uncharge(c->dev, bytes);
    fc_module_free(m);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  m->ctx = c;
  m->dev = c->dev;
  m->charged = bytes;
  *module = (CUmodule)m;
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuModuleLoadData(CUmodule *module, const void *image) {
  FC_LOCKED(fc_module_load_data(module, image));
}

static CUresult fc_module_load(CUmodule *module, const char *fname) {
  fc_ctx_t *c;
  CUresult rc = fc_current(&c);
  if (rc != CUDA_SUCCESS) return rc;
  if (!module || !fname) return CUDA_ERROR_INVALID_VALUE;
  char *text = NULL;
  size_t len = 0;
  tsr_status_t st = tsr_fs_read_file(AT_FDCWD, fname, FC_MODULE_FILE_MAX, &text, &len);
  if (st) {
    /* a missing file: CUDA_ERROR_FILE_NOT_FOUND (the H100); other failures
     * to read are answered so too (unconfirmed) */
    tsr_status_free(st);
    return CUDA_ERROR_FILE_NOT_FOUND;
  }
  rc = len < 4 ? CUDA_ERROR_INVALID_IMAGE : fc_module_load_data(module, text);
  free(text);
  return rc;
}
FC_EXPORT CUresult cuModuleLoad(CUmodule *module, const char *fname) { FC_LOCKED(fc_module_load(module, fname)); }

static CUresult fc_module_unload(CUmodule hmod) {
  fc_module_t *m = fc_obj_find(FC_K_MODULE, hmod);
  if (!m) return CUDA_ERROR_INVALID_HANDLE; /* NULL too (the H100) */
  fc_uncharge(m->dev, m->charged);
  fc_obj_remove(FC_K_MODULE, m);
  fc_module_free(m);
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuModuleUnload(CUmodule hmod) { FC_LOCKED(fc_module_unload(hmod)); }

void fc_modules_release(fc_ctx_t *ctx) {
  for (size_t i = g_fc.nobjs[FC_K_MODULE]; i-- > 0;) {
    fc_module_t *m = g_fc.objs[FC_K_MODULE][i];
    if (m->ctx == ctx) fc_module_unload((CUmodule)m);
  }
}

static CUresult fc_module_get_function(CUfunction *hfunc, CUmodule hmod, const char *name) {
  fc_module_t *m = fc_obj_find(FC_K_MODULE, hmod);
  if (!m) return CUDA_ERROR_INVALID_HANDLE;
  if (!hfunc || !name) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < g_fc.nobjs[FC_K_FUNC]; i++) {
    fc_func_t *f = g_fc.objs[FC_K_FUNC][i];
    if (f->module == m && strcmp(f->name, name) == 0) {
      *hfunc = (CUfunction)f;
      return CUDA_SUCCESS;
    }
  }
  if (m->ptx) {
    bool known = false;
    for (size_t i = 0; i < m->nentries && !known; i++) known = strcmp(m->entries[i], name) == 0;
    if (!known) return CUDA_ERROR_NOT_FOUND; /* "named symbol not found" */
  }
  fc_func_t *f = calloc(1, sizeof *f);
  if (!f) return CUDA_ERROR_OUT_OF_MEMORY;
  f->hdr.kind = FC_K_FUNC;
  f->module = m;
  f->name = strdup(name);
  f->wave_ns = fc_wave_ns(name);
  if (!f->name || !fc_obj_add(FC_K_FUNC, f)) {
    free(f->name);
    free(f);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *hfunc = (CUfunction)f;
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name) {
  FC_LOCKED(fc_module_get_function(hfunc, hmod, name));
}

static CUresult fc_func_get_name(const char **name, CUfunction hfunc) {
  if (!name || !hfunc) return CUDA_ERROR_INVALID_VALUE; /* both (the H100) */
  fc_func_t *f = fc_obj_find(FC_K_FUNC, hfunc);
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  *name = f->name;
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuFuncGetName(const char **name, CUfunction hfunc) { FC_LOCKED(fc_func_get_name(name, hfunc)); }
/* A library's kernel is its function's handle (cuLibraryGetKernel). */
FC_EXPORT CUresult cuKernelGetName(const char **name, CUkernel hfunc) {
  FC_LOCKED(fc_func_get_name(name, (CUfunction)hfunc));
}

/* ---- launches ----------------------------------------------------------------- */

/* The H100's limits (cuDeviceGetAttribute): 1024 threads a block, block
 * 1024 x 1024 x 64, grid 2^31-1 x 65535 x 65535, 48 KiB of dynamic shared
 * memory without opting in. A zero dimension is CUDA_ERROR_INVALID_VALUE,
 * as are too many threads (the H100: 2048). */
CUresult fc_kernel_config(CUfunction f, const unsigned grid[3], const unsigned block[3], unsigned shmem,
                          fc_kparams_t *out_k) {
  fc_func_t *fn = fc_obj_find(FC_K_FUNC, f);
  if (!fn) return CUDA_ERROR_INVALID_HANDLE; /* NULL too (the H100) */
  for (int i = 0; i < 3; i++)
    if (grid[i] == 0 || block[i] == 0) return CUDA_ERROR_INVALID_VALUE;
  if (grid[0] > 2147483647u || grid[1] > 65535 || grid[2] > 65535 || block[0] > 1024 || block[1] > 1024 ||
      block[2] > 64 || (uint64_t)block[0] * block[1] * block[2] > 1024 || shmem > 49152)
    return CUDA_ERROR_INVALID_VALUE;
  uint64_t blocks = (uint64_t)grid[0] * grid[1] * grid[2]; /* < 2^63 */
  uint64_t threads = (uint64_t)block[0] * block[1] * block[2];
  *out_k = (fc_kparams_t){.func = f,
                          .grid = {grid[0], grid[1], grid[2]},
                          .block = {block[0], block[1], block[2]},
                          .shmem = shmem,
                          .ns = fc_kernel_ns(fn->wave_ns, blocks, threads)};
  return CUDA_SUCCESS;
}

/* A cooperative launch must fit on the device at once: "too many blocks in
 * cooperative launch" past one wave (132 SMs x min(32, 2048 / threads); the
 * real limit also counts registers and shared memory). */
static CUresult fc_launch(CUfunction f, const unsigned grid[3], const unsigned block[3], unsigned shmem, CUstream h,
                          void **params, void **extra, bool cooperative) {
  fc_stream_t *s;
  CUresult rc = fc_stream_get(h, &s);
  if (rc != CUDA_SUCCESS) return rc;
  fc_kparams_t k;
  if ((rc = fc_kernel_config(f, grid, block, shmem, &k)) != CUDA_SUCCESS) return rc;
  /* "kernelParams and extra ... both non-NULL: CUDA_ERROR_INVALID_VALUE";
   * "CUDA_ERROR_INVALID_VALUE will be returned if extra is used for a
   * cooperative kernel" */
  if ((params && extra) || (cooperative && extra)) return CUDA_ERROR_INVALID_VALUE;
  k.cooperative = cooperative;
  if (cooperative && (uint64_t)grid[0] * grid[1] * grid[2] > fc_wave_blocks((uint64_t)block[0] * block[1] * block[2]))
    return CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
  struct fc_capture *cap;
  if ((rc = fc_capture_submit(s, &cap)) != CUDA_SUCCESS) return rc;
  if (cap) return fc_capture_kernel(cap, &k);
  fc_timeline_run(s, k.ns);
  return CUDA_SUCCESS;
}

FC_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                                  unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
                                  unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra) {
  unsigned grid[3] = {gridDimX, gridDimY, gridDimZ}, block[3] = {blockDimX, blockDimY, blockDimZ};
  FC_LOCKED(fc_launch(f, grid, block, sharedMemBytes, hStream, kernelParams, extra, false));
}
FC_EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                       unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                                       unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                                       void **kernelParams, void **extra) {
  unsigned grid[3] = {gridDimX, gridDimY, gridDimZ}, block[3] = {blockDimX, blockDimY, blockDimZ};
  FC_LOCKED(fc_launch(f, grid, block, sharedMemBytes, fc_ptsz(hStream), kernelParams, extra, false));
}

FC_EXPORT CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                             unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                                             unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                                             void **kernelParams) {
  unsigned grid[3] = {gridDimX, gridDimY, gridDimZ}, block[3] = {blockDimX, blockDimY, blockDimZ};
  FC_LOCKED(fc_launch(f, grid, block, sharedMemBytes, hStream, kernelParams, NULL, true));
}
FC_EXPORT CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                                  unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                                                  unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                                                  void **kernelParams) {
  unsigned grid[3] = {gridDimX, gridDimY, gridDimZ}, block[3] = {blockDimX, blockDimY, blockDimZ};
  FC_LOCKED(fc_launch(f, grid, block, sharedMemBytes, fc_ptsz(hStream), kernelParams, NULL, true));
}

/* The launch attribute CU_LAUNCH_ATTRIBUTE_COOPERATIVE makes it a
 * cooperative launch; the others are accepted and ignored. */
static CUresult fc_launch_ex(const CUlaunchConfig *config, CUfunction f, void **params, void **extra, bool ptsz) {
  if (!config) return CUDA_ERROR_INVALID_VALUE; /* the H100 */
  if (config->numAttrs > 0 && !config->attrs) return CUDA_ERROR_INVALID_VALUE;
  bool cooperative = false;
  for (unsigned i = 0; i < config->numAttrs; i++)
    if (config->attrs[i].id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE) cooperative = config->attrs[i].value.cooperative != 0;
  unsigned grid[3] = {config->gridDimX, config->gridDimY, config->gridDimZ};
  unsigned block[3] = {config->blockDimX, config->blockDimY, config->blockDimZ};
  return fc_launch(f, grid, block, config->sharedMemBytes, ptsz ? fc_ptsz(config->hStream) : config->hStream, params,
                   extra, cooperative);
}
FC_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra) {
  FC_LOCKED(fc_launch_ex(config, f, kernelParams, extra, false));
}
FC_EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
                                         void **extra) {
  FC_LOCKED(fc_launch_ex(config, f, kernelParams, extra, true));
}

/* ---- libraries ----------------------------------------------------------------
 * A library is context-independent on the real driver and is loaded into
 * each context lazily; here it is a module loaded into the context current
 * at cuLibraryLoad*, so its static data is charged at once, and a kernel is
 * that module's function. */
FC_EXPORT CUresult cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jitOptions,
                                     void **jitOptionsValues, unsigned int numJitOptions,
                                     CUlibraryOption *libraryOptions, void **libraryOptionValues,
                                     unsigned int numLibraryOptions) {
  (void)jitOptions, (void)jitOptionsValues, (void)numJitOptions;
  (void)libraryOptions, (void)libraryOptionValues, (void)numLibraryOptions;
  if (!library) return CUDA_ERROR_INVALID_VALUE;
  FC_LOCKED(fc_module_load_data((CUmodule *)library, code));
}
FC_EXPORT CUresult cuLibraryLoadFromFile(CUlibrary *library, const char *fileName, CUjit_option *jitOptions,
                                         void **jitOptionsValues, unsigned int numJitOptions,
                                         CUlibraryOption *libraryOptions, void **libraryOptionValues,
                                         unsigned int numLibraryOptions) {
  (void)jitOptions, (void)jitOptionsValues, (void)numJitOptions;
  (void)libraryOptions, (void)libraryOptionValues, (void)numLibraryOptions;
  if (!library) return CUDA_ERROR_INVALID_VALUE;
  FC_LOCKED(fc_module_load((CUmodule *)library, fileName));
}
FC_EXPORT CUresult cuLibraryUnload(CUlibrary library) { FC_LOCKED(fc_module_unload((CUmodule)library)); }
FC_EXPORT CUresult cuLibraryGetKernel(CUkernel *kernel, CUlibrary library, const char *name) {
  FC_LOCKED(fc_module_get_function((CUfunction *)kernel, (CUmodule)library, name));
}
static CUresult fc_kernel_get_function(CUfunction *func, CUkernel kernel) {
  if (!func || !kernel) return CUDA_ERROR_INVALID_VALUE;
  if (!fc_obj_find(FC_K_FUNC, kernel)) return CUDA_ERROR_INVALID_HANDLE; /* unconfirmed */
  *func = (CUfunction)kernel;
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuKernelGetFunction(CUfunction *func, CUkernel kernel) {
  FC_LOCKED(fc_kernel_get_function(func, kernel));
}

/* Resident blocks of `blockSize` threads per SM: the H100's 2048 threads
 * and 32 blocks an SM (registers and shared memory of the fake's kernels
 * never bind). */
static CUresult fc_occupancy(int *numBlocks, CUfunction func, int blockSize, size_t dynSmem) {
  if (!numBlocks || blockSize <= 0 || blockSize > 1024) return CUDA_ERROR_INVALID_VALUE;
  if (!fc_obj_find(FC_K_FUNC, func)) return CUDA_ERROR_INVALID_HANDLE;
  if (dynSmem > 228 * 1024) {
    *numBlocks = 0;
    return CUDA_SUCCESS;
  }
  int n = 2048 / blockSize;
  *numBlocks = n > 32 ? 32 : n;
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks, CUfunction func, int blockSize,
                                                               size_t dynamicSMemSize) {
  FC_LOCKED(fc_occupancy(numBlocks, func, blockSize, dynamicSMemSize));
}
