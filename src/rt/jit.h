/* rt/jit.h: JIT operators compiled by NVRTC.
 *
 * An operator is an expression over up to four float inputs (rt/expr.h).
 * Its CUDA source is the scalar functions (rt/scalar.h, embedded) and one
 * device function
 *     extern "C" __device__ float NAME(float a, float b, float c, float d)
 * returning the expression. NVRTC compiles it straight to SASS for the
 * device's architecture, relocatable (-rdc=true), the form that links into
 * a persistent kernel (ANCHORS.md: a PTX module's function "pointers" are
 * module-relative and fault). The compiled image is kept in the
 * compiled-operator cache (rt/cache.h), keyed by the source, the options,
 * the architecture and the driver version, so a second process pays no
 * compile.
 *
 * NVRTC is reached with dlopen (libnvrtc.so.13, then libnvrtc.so): a
 * machine without it still runs the builtin operators. It runs on the host
 * and needs no GPU, so CI compiles every operator the parser can emit.
 *
 * Threads: a tsr_rt_jit_t may be used by one thread at a time. */
#ifndef TESSERA_RT_JIT_H
#define TESSERA_RT_JIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rt/cache.h"
#include "rt/expr.h"
#include "tessera/status.h"

typedef struct tsr_rt_jit_s tsr_rt_jit_t;

/* Loads NVRTC (TSR_UNAVAILABLE, saying what was tried, when it is not
 * there). `cache` may be NULL (every compile then runs NVRTC); it is
 * borrowed, not owned, and must outlive the jit. */
TSR_MUST_USE tsr_status_t tsr_rt_jit_open(tsr_rt_cache_t *cache, tsr_rt_jit_t **out_jit);
void tsr_rt_jit_close(tsr_rt_jit_t *jit);

/* NVRTC's version, major * 1000 + minor * 10 (as CUDA numbers them). */
int tsr_rt_jit_nvrtc_version(const tsr_rt_jit_t *jit);

/* The CUDA source of `expr` as device function `name` (a C identifier of
 * at most 64 bytes); malloc'd, the caller frees. */
TSR_MUST_USE tsr_status_t tsr_rt_jit_source(const tsr_rt_expr_t *expr, const char *name, char **out_source);

typedef struct tsr_rt_jit_image_s {
  void *image; /* the relocatable cubin, malloc'd (tsr_rt_jit_image_free) */
  size_t bytes;
  bool from_cache;     /* found in the cache: NVRTC did not run */
  bool linked;         /* a kernel generation made by nvJitLink (else one compile) */
  bool prebuilt;       /* ... from the library's own relocatable kernel */
  uint64_t elapsed_ns; /* this call's time: the compile, or the cache lookup */
} tsr_rt_jit_image_t;

/* Compiles `source` for `arch` ("sm_90": a compute capability, checked)
 * with the runtime's fixed options, or takes it from the cache; a fresh
 * image is stored in the cache (a cache that cannot store is logged, not
 * an error). A source NVRTC refuses gives TSR_INVALID_ARGUMENT with NVRTC's
 * log in the message. `driver_version` is part of the cache key. */
TSR_MUST_USE tsr_status_t tsr_rt_jit_compile(tsr_rt_jit_t *jit, const char *source, const char *arch,
                                             int driver_version, tsr_rt_jit_image_t *out_image);
void tsr_rt_jit_image_free(tsr_rt_jit_image_t *image);

/* A generation of the persistent kernel: kernel.cu and its headers (all
 * embedded in the library) with `jit_ops`, the text of rt/jit_ops.h
 * (tsr_rt_jit_ops_header), as its operators; a complete cubin with the
 * entry tsr_rt_persistent. Where nvJitLink is (and TESSERA_RT_JIT_LINK is
 * not "0"), it is linked from two relocatable parts NVRTC compiles: the
 * kernel with tsr_rt_jit_dispatch external (the same for every generation,
 * compiled once per machine, then from the cache) and the operators alone
 * (small: a new operator costs their compile and a link of a few ms, not a
 * compile of the whole kernel); else it is one whole compile. Each part
 * goes through the cache. */
TSR_MUST_USE tsr_status_t tsr_rt_jit_compile_kernel(tsr_rt_jit_t *jit, const char *jit_ops, const char *arch,
                                                    int driver_version, tsr_rt_jit_image_t *out_image);

/* The text of rt/jit_ops.h for the operators `exprs[i]` in slots
 * `slots[i]` (i < count): one device function each and
 * tsr_rt_jit_dispatch(slot, a, b, c, d) over them; malloc'd. */
TSR_MUST_USE tsr_status_t tsr_rt_jit_ops_header(const tsr_rt_expr_t *const *exprs, const uint32_t *slots, size_t count,
                                                char **out_text);

/* A relocatable kernel built with the library (a fatbinary of nvcc's
 * cubins, -DTSR_RT_JIT_LINKED): linked generations take the kernel from it
 * for the architectures it holds instead of compiling it with NVRTC; a
 * link that fails (another toolkit's nvJitLink) falls back to the compile.
 * Borrowed: must outlive the jit. */
void tsr_rt_jit_set_prebuilt(tsr_rt_jit_t *jit, const void *fatbin, size_t bytes);

/* Whether kernel generations are linked (nvJitLink was found). */
bool tsr_rt_jit_links(const tsr_rt_jit_t *jit);

/* The options every operator is compiled with (for the record and tests). */
const char *tsr_rt_jit_options(void);

#endif
