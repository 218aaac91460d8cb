/* jit.c: JIT operators through NVRTC, with the compiled-operator cache
 * (rt/jit.h). */
#include <ctype.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/time.h"
#include "rt/jit.h"

extern const unsigned char tsr_rt_scalar_text[];
extern const size_t tsr_rt_scalar_text_bytes;
extern const unsigned char tsr_rt_text_kernel[], tsr_rt_text_desc[], tsr_rt_text_ops[], tsr_rt_text_rt_h[],
    tsr_rt_text_status_h[];

/* NVRTC's C API, as nvrtc.h declares it (the header is not needed to build:
 * the few calls are declared here, resolved with dlsym). */
typedef int tsr__nvrtc_result_t; /* NVRTC_SUCCESS = 0 */
typedef struct tsr__nvrtc_program_s *tsr__nvrtc_program_t;

struct tsr_rt_jit_s {
  void *lib;
  tsr_rt_cache_t *cache;
  int version;
  const char *(*GetErrorString)(tsr__nvrtc_result_t);
  tsr__nvrtc_result_t (*Version)(int *, int *);
  tsr__nvrtc_result_t (*CreateProgram)(tsr__nvrtc_program_t *, const char *, const char *, int, const char *const *,
                                       const char *const *);
  tsr__nvrtc_result_t (*DestroyProgram)(tsr__nvrtc_program_t *);
  tsr__nvrtc_result_t (*CompileProgram)(tsr__nvrtc_program_t, int, const char *const *);
  tsr__nvrtc_result_t (*GetCUBINSize)(tsr__nvrtc_program_t, size_t *);
  tsr__nvrtc_result_t (*GetCUBIN)(tsr__nvrtc_program_t, char *);
  tsr__nvrtc_result_t (*GetProgramLogSize)(tsr__nvrtc_program_t, size_t *);
  tsr__nvrtc_result_t (*GetProgramLog)(tsr__nvrtc_program_t, char *);
  /* nvJitLink (optional: without it a generation is one whole compile) */
  void *link_lib;
  const void *prebuilt; /* tsr_rt_jit_set_prebuilt */
  size_t prebuilt_bytes;
  int (*LinkCreate)(void **, uint32_t, const char **);
  int (*LinkDestroy)(void **);
  int (*LinkAddData)(void *, int, const void *, size_t, const char *);
  int (*LinkComplete)(void *);
  int (*LinkGetLinkedCubinSize)(void *, size_t *);
  int (*LinkGetLinkedCubin)(void *, void *);
  int (*LinkGetErrorLogSize)(void *, size_t *);
  int (*LinkGetErrorLog)(void *, char *);
};

#define TSR__NVJITLINK_INPUT_CUBIN 1 /* nvJitLinkInputType, nvJitLink.h */
#define TSR__NVJITLINK_INPUT_FATBIN 4

/* -rdc: relocatable, the form that links into the persistent kernel;
 * fmad off: a JIT operator rounds as the builtin ones and the CPU backend */
static const char *const tsr__opts[] = {"-rdc=true", "--std=c++17", "--fmad=false", "-default-device"};
#define TSR__NOPTS (sizeof(tsr__opts) / sizeof(tsr__opts[0]))

const char *tsr_rt_jit_options(void) { return "-rdc=true --std=c++17 --fmad=false -default-device"; }

/* nvJitLink, when it is there and TESSERA_RT_JIT_LINK is not "0". */
static void tsr__link_open(tsr_rt_jit_t *j) {
  const char *env = getenv("TESSERA_RT_JIT_LINK");
  if (env && strcmp(env, "0") == 0) return;
  if (env && env[0] && strcmp(env, "1") != 0)
    tsr_log_warn("TESSERA_RT_JIT_LINK='%.20s' is neither 0 nor 1: linking kernel generations where nvJitLink is", env);
  const char *names[] = {"libnvJitLink.so.13", "libnvJitLink.so", "/usr/local/cuda/lib64/libnvJitLink.so.13"};
  void *lib = NULL;
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && !lib; i++) lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  if (!lib) return;
  *(void **)&j->LinkCreate = dlsym(lib, "nvJitLinkCreate");
  *(void **)&j->LinkDestroy = dlsym(lib, "nvJitLinkDestroy");
  *(void **)&j->LinkAddData = dlsym(lib, "nvJitLinkAddData");
  *(void **)&j->LinkComplete = dlsym(lib, "nvJitLinkComplete");
  *(void **)&j->LinkGetLinkedCubinSize = dlsym(lib, "nvJitLinkGetLinkedCubinSize");
  *(void **)&j->LinkGetLinkedCubin = dlsym(lib, "nvJitLinkGetLinkedCubin");
  *(void **)&j->LinkGetErrorLogSize = dlsym(lib, "nvJitLinkGetErrorLogSize");
  *(void **)&j->LinkGetErrorLog = dlsym(lib, "nvJitLinkGetErrorLog");
  if (!j->LinkCreate || !j->LinkDestroy || !j->LinkAddData || !j->LinkComplete || !j->LinkGetLinkedCubinSize ||
      !j->LinkGetLinkedCubin || !j->LinkGetErrorLogSize || !j->LinkGetErrorLog) {
    dlclose(lib);
    return;
  }
  j->link_lib = lib;
}

tsr_status_t tsr_rt_jit_open(tsr_rt_cache_t *cache, tsr_rt_jit_t **out) {
  *out = NULL;
  const char *names[] = {"libnvrtc.so.13", "libnvrtc.so", "/usr/local/cuda/lib64/libnvrtc.so.13"};
  void *lib = NULL;
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && !lib; i++) lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  if (!lib)
    return tsr_status_make(TSR_UNAVAILABLE,
                           "NVRTC not found (tried libnvrtc.so.13, libnvrtc.so and "
                           "/usr/local/cuda/lib64): JIT operators need it");
  tsr_rt_jit_t *j = calloc(1, sizeof(*j));
  if (!j) {
    dlclose(lib);
    return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  }
  j->lib = lib;
  j->cache = cache;
#define TSR__SYM(field)                                                       \
  do {                                                                        \
    *(void **)&j->field = dlsym(lib, "nvrtc" #field);                         \
    if (!j->field) {                                                          \
      tsr_rt_jit_close(j);                                                    \
      return tsr_status_make(TSR_UNAVAILABLE, "NVRTC lacks nvrtc%s", #field); \
    }                                                                         \
  } while (0)
  TSR__SYM(GetErrorString);
  TSR__SYM(Version);
  TSR__SYM(CreateProgram);
  TSR__SYM(DestroyProgram);
  TSR__SYM(CompileProgram);
  TSR__SYM(GetCUBINSize);
  TSR__SYM(GetCUBIN);
  TSR__SYM(GetProgramLogSize);
  TSR__SYM(GetProgramLog);
#undef TSR__SYM
  int major = 0, minor = 0;
  j->Version(&major, &minor);
  j->version = major * 1000 + minor * 10;
  tsr__link_open(j);
  *out = j;
  return NULL;
}

void tsr_rt_jit_close(tsr_rt_jit_t *j) {
  if (!j) return;
  if (j->link_lib) dlclose(j->link_lib);
  dlclose(j->lib);
  free(j);
}

bool tsr_rt_jit_links(const tsr_rt_jit_t *j) { return j->link_lib != NULL; }

void tsr_rt_jit_set_prebuilt(tsr_rt_jit_t *j, const void *fatbin, size_t bytes) {
  j->prebuilt = fatbin;
  j->prebuilt_bytes = bytes;
}

int tsr_rt_jit_nvrtc_version(const tsr_rt_jit_t *j) { return j->version; }

static bool tsr__identifier(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > 64 || !(isalpha((unsigned char)s[0]) || s[0] == '_')) return false;
  for (size_t i = 1; i < n; i++)
    if (!(isalnum((unsigned char)s[i]) || s[i] == '_')) return false;
  return true;
}

tsr_status_t tsr_rt_jit_source(const tsr_rt_expr_t *e, const char *name, char **out) {
  *out = NULL;
  if (!name || !tsr__identifier(name))
    return tsr_status_make(TSR_INVALID_ARGUMENT, "'%s' is not a C identifier of at most 64 bytes", name ? name : "");
  size_t need = tsr_rt_expr_cuda(e, NULL, 0);
  char *body = malloc(need + 1);
  if (!body) return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  tsr_rt_expr_cuda(e, body, need + 1);
  static const char head[] = "/* a tessera JIT operator */\n#define TSR_RT_FN static __device__ __forceinline__\n";
  size_t cap = sizeof(head) + tsr_rt_scalar_text_bytes + strlen(name) + need + 160;
  char *src = malloc(cap);
  if (!src) {
    free(body);
    return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  }
  snprintf(src, cap,
           "%s%s\nextern \"C\" __device__ float %s(float a, float b, float c, float d) {\n"
           "  (void)a, (void)b, (void)c, (void)d;\n  return %s;\n}\n",
           head, (const char *)tsr_rt_scalar_text, name, body);
  free(body);
  *out = src;
  return NULL;
}

static bool tsr__arch_ok(const char *arch) {
  /* sm_XY or sm_XYZ, with an optional a/f suffix (sm_90a) */
  if (!arch || strncmp(arch, "sm_", 3) != 0) return false;
  size_t i = 3, digits = 0;
  while (isdigit((unsigned char)arch[i])) i++, digits++;
  if (digits < 2 || digits > 3) return false;
  if (arch[i] == 'a' || arch[i] == 'f') i++;
  return arch[i] == '\0';
}

/* Compiles `prog` with `opts`, then takes its cubin (or NVRTC's log, in the
 * error, for `what` it refused), and destroys the program. */
TSR_MUST_USE static tsr_status_t tsr__nvrtc_run(tsr_rt_jit_t *j, tsr__nvrtc_program_t prog, const char *const *opts,
                                                int nopts, const char *what, void **out_img, size_t *out_bytes) {
  tsr__nvrtc_result_t r = j->CompileProgram(prog, nopts, opts);
  tsr_status_t st = NULL;
  if (r) {
    size_t n = 0;
    char *log = NULL;
    if (j->GetProgramLogSize(prog, &n) == 0 && n > 0 && (log = malloc(n + 1)) != NULL) {
      if (j->GetProgramLog(prog, log) != 0) log[0] = '\0';
      log[n] = '\0';
    }
    st = tsr_status_make(TSR_INVALID_ARGUMENT, "NVRTC refused the %s (%s): %.2000s", what, j->GetErrorString(r),
                         log && log[0] ? log : "no log");
    free(log);
  } else {
    size_t n = 0;
    char *img = NULL;
    if (j->GetCUBINSize(prog, &n) != 0 || n == 0 || !(img = malloc(n)) || j->GetCUBIN(prog, img) != 0) {
      free(img);
      st = tsr_status_make(TSR_INTERNAL, "NVRTC compiled the %s but gave no cubin", what);
    } else {
      *out_img = img;
      *out_bytes = n;
    }
  }
  j->DestroyProgram(&prog);
  return st;
}

TSR_MUST_USE static tsr_status_t tsr__nvrtc(tsr_rt_jit_t *j, const char *source, const char *arch, void **out_img,
                                            size_t *out_bytes) {
  tsr__nvrtc_program_t prog = NULL;
  tsr__nvrtc_result_t r = j->CreateProgram(&prog, source, "tessera_op.cu", 0, NULL, NULL);
  if (r) return tsr_status_make(TSR_UNAVAILABLE, "nvrtcCreateProgram: %s", j->GetErrorString(r));
  char archopt[48];
  snprintf(archopt, sizeof(archopt), "--gpu-architecture=%s", arch);
  const char *opts[TSR__NOPTS + 1];
  opts[0] = archopt;
  for (size_t i = 0; i < TSR__NOPTS; i++) opts[i + 1] = tsr__opts[i];
  return tsr__nvrtc_run(j, prog, opts, (int)(TSR__NOPTS + 1), "operator", out_img, out_bytes);
}

tsr_status_t tsr_rt_jit_compile(tsr_rt_jit_t *j, const char *source, const char *arch, int driver_version,
                                tsr_rt_jit_image_t *out) {
  memset(out, 0, sizeof(*out));
  if (!source || !source[0]) return tsr_status_make(TSR_INVALID_ARGUMENT, "an empty operator source");
  if (!tsr__arch_ok(arch))
    return tsr_status_make(TSR_INVALID_ARGUMENT, "'%s' is not a GPU architecture (sm_80, sm_90, ...)",
                           arch ? arch : "");
  uint64_t t0 = tsr_time_mono_ns();
  tsr_rt_cache_key_t key = {
      .source = source, .options = tsr_rt_jit_options(), .arch = arch, .driver_version = driver_version};
  if (j->cache && tsr_rt_cache_lookup(j->cache, &key, &out->image, &out->bytes)) {
    out->from_cache = true;
    out->elapsed_ns = tsr_time_mono_ns() - t0;
    return NULL;
  }
  TSR_RETURN_IF_ERROR(tsr__nvrtc(j, source, arch, &out->image, &out->bytes));
  out->elapsed_ns = tsr_time_mono_ns() - t0;
  if (j->cache) {
    tsr_status_t st = tsr_rt_cache_store(j->cache, &key, out->image, out->bytes);
    if (st) {
      tsr_log_warn("compiled-operator cache: %s", tsr_status_message(st));
      tsr_status_free(st);
    }
  }
  return NULL;
}

void tsr_rt_jit_image_free(tsr_rt_jit_image_t *img) {
  if (!img) return;
  free(img->image);
  img->image = NULL;
  img->bytes = 0;
}

/* ---- generations of the persistent kernel ---------------------------------- */

/* What NVRTC lacks of the C library headers the kernel's includes name:
 * the fixed-width integers (its builtin header has size_t, ptrdiff_t and
 * va_list, the math functions and memcpy); the rest are empty. */
static const char tsr__shim_stdint[] =
    "#pragma once\n"
    "typedef signed char int8_t; typedef short int16_t; typedef int int32_t; typedef long long int64_t;\n"
    "typedef unsigned char uint8_t; typedef unsigned short uint16_t; typedef unsigned int uint32_t;\n"
    "typedef unsigned long long uint64_t; typedef unsigned long long uintptr_t; typedef long long intptr_t;\n"
    "#define INT64_C(x) x##LL\n#define UINT64_C(x) x##ULL\n#define UINT32_C(x) x##U\n"
    "#define INT64_MAX 9223372036854775807LL\n#define UINT64_MAX 18446744073709551615ULL\n"
    "#define UINT32_MAX 4294967295U\n";
static const char tsr__shim_empty[] = "#pragma once\n";

tsr_status_t tsr_rt_jit_ops_header(const tsr_rt_expr_t *const *exprs, const uint32_t *slots, size_t count, char **out) {
  *out = NULL;
  size_t cap = 512, len = 0;
  for (size_t i = 0; i < count; i++) cap += tsr_rt_expr_cuda(exprs[i], NULL, 0) + 200;
  char *t = malloc(cap);
  if (!t) return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  len += (size_t)snprintf(t + len, cap - len, "/* the JIT operators of this generation */\n#pragma once\n");
  for (size_t i = 0; i < count; i++) {
    size_t need = tsr_rt_expr_cuda(exprs[i], NULL, 0);
    len += (size_t)snprintf(t + len, cap - len,
                            "static __device__ __forceinline__ float tsr_rt_jit_op_%u(float a, float b, float c, "
                            "float d) {\n  (void)a, (void)b, (void)c, (void)d;\n  return ",
                            slots[i]);
    tsr_rt_expr_cuda(exprs[i], t + len, need + 1);
    len += need;
    len += (size_t)snprintf(t + len, cap - len, ";\n}\n");
  }
  /* static in a whole generation; linked into one (rt/jit.h), extern */
  len += (size_t)snprintf(t + len, cap - len,
                          "#ifdef TSR_RT_JIT_LINKED\nextern \"C\"\n#else\nstatic\n#endif\n"
                          "__device__ float tsr_rt_jit_dispatch(unsigned slot, float a, float b, float c, "
                          "float d) {\n  switch (slot) {\n");
  for (size_t i = 0; i < count; i++)
    len +=
        (size_t)snprintf(t + len, cap - len, "  case %u: return tsr_rt_jit_op_%u(a, b, c, d);\n", slots[i], slots[i]);
  snprintf(t + len, cap - len, "  default: return __int_as_float(0x7fc00000);\n  }\n}\n");
  *out = t;
  return NULL;
}

/* The three programs a generation is made of: the whole kernel with its
 * operators (one compile, without nvJitLink), or the kernel relocatable
 * with tsr_rt_jit_dispatch left external, and the operators alone,
 * relocatable, linked together (rt/jit.h). */
typedef enum { TSR__GEN_WHOLE, TSR__GEN_RDC_KERNEL, TSR__GEN_OPS } tsr__gen_part_t;

static const char *tsr__gen_options(tsr__gen_part_t part) {
  switch (part) {
    case TSR__GEN_WHOLE: return "kernel --std=c++17 -DTSR_RT_JIT=1 -default-device";
    case TSR__GEN_RDC_KERNEL: return "kernel --std=c++17 -DTSR_RT_JIT_LINKED=1 -rdc=true -default-device";
    default: return "operators --std=c++17 -rdc=true -default-device";
  }
}

TSR_MUST_USE static tsr_status_t tsr__nvrtc_gen(tsr_rt_jit_t *j, tsr__gen_part_t part, const char *jit_ops,
                                                const char *arch, void **out_img, size_t *out_bytes) {
  char archopt[48];
  snprintf(archopt, sizeof(archopt), "--gpu-architecture=%s", arch);
  tsr__nvrtc_program_t prog = NULL;
  tsr__nvrtc_result_t r;
  if (part == TSR__GEN_OPS) {
    /* the scalar functions, then the operators and their dispatch */
    static const char head[] = "#define TSR_RT_FN static __device__ __forceinline__\n";
    static const char mid[] = "\n#define TSR_RT_JIT_LINKED 1\n";
    size_t n = sizeof(head) + tsr_rt_scalar_text_bytes + sizeof(mid) + strlen(jit_ops) + 1;
    char *src = malloc(n);
    if (!src) return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
    snprintf(src, n, "%s%s%s%s", head, (const char *)tsr_rt_scalar_text, mid, jit_ops);
    r = j->CreateProgram(&prog, src, "tessera_operators.cu", 0, NULL, NULL);
    free(src);
    if (r) return tsr_status_make(TSR_UNAVAILABLE, "nvrtcCreateProgram: %s", j->GetErrorString(r));
    /* 177: the scalar functions an operator does not use */
    const char *opts[] = {archopt, "--std=c++17", "-rdc=true", "-default-device", "-diag-suppress=177"};
    return tsr__nvrtc_run(j, prog, opts, 5, "operators of a kernel generation", out_img, out_bytes);
  }
  const char *names[] = {"rt/jit_ops.h", "rt/desc.h", "rt/ops.h",  "rt/scalar.h", "tessera/rt.h", "tessera/status.h",
                         "stdint.h",     "stddef.h",  "stdbool.h", "stdarg.h",    "math.h",       "string.h"};
  const char *texts[] = {jit_ops,
                         (const char *)tsr_rt_text_desc,
                         (const char *)tsr_rt_text_ops,
                         (const char *)tsr_rt_scalar_text,
                         (const char *)tsr_rt_text_rt_h,
                         (const char *)tsr_rt_text_status_h,
                         tsr__shim_stdint,
                         tsr__shim_empty,
                         tsr__shim_empty,
                         tsr__shim_empty,
                         tsr__shim_empty,
                         tsr__shim_empty};
  int nh = (int)(sizeof(names) / sizeof(names[0]));
  r = j->CreateProgram(&prog, (const char *)tsr_rt_text_kernel, "tessera_kernel.cu", nh, texts, names);
  if (r) return tsr_status_make(TSR_UNAVAILABLE, "nvrtcCreateProgram: %s", j->GetErrorString(r));
  if (part == TSR__GEN_WHOLE) {
    const char *opts[] = {archopt, "--std=c++17", "-DTSR_RT_JIT=1", "-default-device"};
    return tsr__nvrtc_run(j, prog, opts, 4, "kernel generation", out_img, out_bytes);
  }
  const char *opts[] = {archopt, "--std=c++17", "-DTSR_RT_JIT_LINKED=1", "-rdc=true", "-default-device"};
  return tsr__nvrtc_run(j, prog, opts, 5, "relocatable kernel", out_img, out_bytes);
}

/* One part through the cache: the key is every text it is compiled from
 * (a library whose descriptor or operators changed must not load an old
 * part), its options, the architecture and the driver. *hit says whether
 * NVRTC did not run. */
TSR_MUST_USE static tsr_status_t tsr__gen_part(tsr_rt_jit_t *j, tsr__gen_part_t part, const char *jit_ops,
                                               const char *arch, int driver_version, void **out_img, size_t *out_bytes,
                                               bool *hit) {
  const char *parts[] = {part == TSR__GEN_RDC_KERNEL ? "" : jit_ops,
                         part == TSR__GEN_OPS ? "" : (const char *)tsr_rt_text_kernel,
                         part == TSR__GEN_OPS ? "" : (const char *)tsr_rt_text_desc,
                         part == TSR__GEN_OPS ? "" : (const char *)tsr_rt_text_ops,
                         (const char *)tsr_rt_scalar_text,
                         part == TSR__GEN_OPS ? "" : (const char *)tsr_rt_text_rt_h,
                         part == TSR__GEN_OPS ? "" : (const char *)tsr_rt_text_status_h};
  size_t klen = 0;
  for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) klen += strlen(parts[i]) + 1;
  char *keysrc = malloc(klen + 1);
  if (!keysrc) return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  size_t at = 0;
  for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
    size_t l = strlen(parts[i]);
    memcpy(keysrc + at, parts[i], l);
    at += l;
    keysrc[at++] = '\n';
  }
  keysrc[at] = '\0';
  tsr_rt_cache_key_t key = {
      .source = keysrc, .options = tsr__gen_options(part), .arch = arch, .driver_version = driver_version};
  tsr_status_t st = NULL;
  *hit = j->cache && tsr_rt_cache_lookup(j->cache, &key, out_img, out_bytes);
  if (!*hit) {
    st = tsr__nvrtc_gen(j, part, part == TSR__GEN_RDC_KERNEL ? "" : jit_ops, arch, out_img, out_bytes);
    if (!st && j->cache) {
      tsr_status_t cs = tsr_rt_cache_store(j->cache, &key, *out_img, *out_bytes);
      if (cs) {
        tsr_log_warn("compiled-operator cache: %s", tsr_status_message(cs));
        tsr_status_free(cs);
      }
    }
  }
  free(keysrc);
  return st;
}

/* The relocatable kernel and operators linked into a complete cubin. */
TSR_MUST_USE static tsr_status_t tsr__link(tsr_rt_jit_t *j, const char *arch, int kernel_type, const void *kernel,
                                           size_t kernel_bytes, const void *ops, size_t ops_bytes, void **out_img,
                                           size_t *out_bytes) {
  char archopt[48];
  snprintf(archopt, sizeof(archopt), "-arch=%s", arch);
  const char *opts[] = {archopt};
  void *h = NULL;
  int r = j->LinkCreate(&h, 1, opts);
  if (r) return tsr_status_make(TSR_UNAVAILABLE, "nvJitLinkCreate failed (%d)", r);
  tsr_status_t st = NULL;
  r = j->LinkAddData(h, kernel_type, kernel, kernel_bytes, "tessera_kernel");
  if (!r) r = j->LinkAddData(h, TSR__NVJITLINK_INPUT_CUBIN, ops, ops_bytes, "tessera_operators");
  if (!r) r = j->LinkComplete(h);
  size_t n = 0;
  char *img = NULL;
  if (!r) r = j->LinkGetLinkedCubinSize(h, &n);
  if (!r && (n == 0 || !(img = malloc(n)))) st = tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory for a cubin");
  if (!r && !st) r = j->LinkGetLinkedCubin(h, img);
  if (r) {
    size_t ln = 0;
    char *log = NULL;
    if (j->LinkGetErrorLogSize(h, &ln) == 0 && ln > 0 && (log = malloc(ln + 1)) != NULL) {
      if (j->LinkGetErrorLog(h, log) != 0) log[0] = '\0';
      log[ln] = '\0';
    }
    st = tsr_status_make(TSR_INTERNAL, "nvJitLink could not link the kernel generation (%d): %.1000s", r,
                         log && log[0] ? log : "no log");
    free(log);
  }
  j->LinkDestroy(&h);
  if (st) {
    free(img);
    return st;
  }
  *out_img = img;
  *out_bytes = n;
  return NULL;
}

tsr_status_t tsr_rt_jit_compile_kernel(tsr_rt_jit_t *j, const char *jit_ops, const char *arch, int driver_version,
                                       tsr_rt_jit_image_t *out) {
  memset(out, 0, sizeof(*out));
  if (!jit_ops) return tsr_status_make(TSR_INVALID_ARGUMENT, "no operators");
  if (!tsr__arch_ok(arch))
    return tsr_status_make(TSR_INVALID_ARGUMENT, "'%s' is not a GPU architecture (sm_80, sm_90, ...)",
                           arch ? arch : "");
  uint64_t t0 = tsr_time_mono_ns();
  tsr_status_t st;
  if (!j->link_lib) {
    st = tsr__gen_part(j, TSR__GEN_WHOLE, jit_ops, arch, driver_version, &out->image, &out->bytes, &out->from_cache);
  } else {
    void *k = NULL, *o = NULL;
    size_t kb = 0, ob = 0;
    bool khit = false, ohit = false;
    st = tsr__gen_part(j, TSR__GEN_OPS, jit_ops, arch, driver_version, &o, &ob, &ohit);
    /* the library's own kernel where it holds this architecture */
    if (!st && j->prebuilt) {
      tsr_status_t ls = tsr__link(j, arch, TSR__NVJITLINK_INPUT_FATBIN, j->prebuilt, j->prebuilt_bytes, o, ob,
                                  &out->image, &out->bytes);
      if (!ls) {
        out->prebuilt = true;
        khit = true;
      } else {
        tsr_log_debug("the library's relocatable kernel did not link for %s (%s): compiling it", arch,
                      tsr_status_message(ls));
        tsr_status_free(ls);
      }
    }
    if (!st && !out->prebuilt) {
      st = tsr__gen_part(j, TSR__GEN_RDC_KERNEL, jit_ops, arch, driver_version, &k, &kb, &khit);
      if (!st) st = tsr__link(j, arch, TSR__NVJITLINK_INPUT_CUBIN, k, kb, o, ob, &out->image, &out->bytes);
    }
    free(k);
    free(o);
    out->from_cache = khit && ohit;
    out->linked = true;
  }
  out->elapsed_ns = tsr_time_mono_ns() - t0;
  return st;
}
