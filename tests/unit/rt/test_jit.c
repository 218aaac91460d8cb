/* JIT operators through NVRTC (rt/jit.h): the source of an expression,
 * its compile to a relocatable sm_90 cubin, every function the parser can
 * emit, refusals with NVRTC's log, and the compiled-operator cache: a hit
 * gives the same bytes without NVRTC, a damaged entry is compiled again.
 * NVRTC runs on the host: no GPU needed. Skipped (with the reason) where
 * NVRTC is not installed. */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rt/jit.h"

/* Compiles of the whole persistent kernel (a generation compiled as one
 * program, the relocatable kernel NVRTC makes where the library's own does
 * not serve) take minutes on a small machine. Since operators are
 * interpreted by default (rt/prog.h), no user's path makes one; they run
 * only with TESSERA_TEST_KERNEL_COMPILES=1 (ctest: unit.rt_jit_kernels,
 * configured with -DTSR_TEST_KERNEL_COMPILES=ON). */
static bool kernel_compiles(void) {
  const char *v = getenv("TESSERA_TEST_KERNEL_COMPILES");
  return v && strcmp(v, "1") == 0;
}
#define TSR_NEEDS_KERNEL_COMPILES()                                                                    \
  do {                                                                                                 \
    if (!kernel_compiles()) cr_skip_test("compiles the whole kernel: TESSERA_TEST_KERNEL_COMPILES=1"); \
  } while (0)

static tsr_rt_jit_t *open_jit(tsr_rt_cache_t *cache) {
  tsr_rt_jit_t *j = NULL;
  tsr_status_t st = tsr_rt_jit_open(cache, &j);
  if (st) {
    cr_log_warn("skipped: %s", tsr_status_message(st));
    tsr_status_free(st);
    cr_skip_test("NVRTC is not installed");
  }
  return j;
}

static char *source_of(const char *text, const char *name) {
  tsr_rt_expr_t *e = NULL;
  tsr_status_t st = tsr_rt_expr_parse(text, &e);
  cr_assert_null(st, "%s", tsr_status_message(st));
  char *src = NULL;
  st = tsr_rt_jit_source(e, name, &src);
  cr_assert_null(st, "%s", tsr_status_message(st));
  tsr_rt_expr_free(e);
  return src;
}

static bool is_elf(const tsr_rt_jit_image_t *img) {
  return img->bytes > 4 && memcmp(img->image,
                                  "\x7f"
                                  "ELF",
                                  4) == 0;
}

Test(rt_jit, an_expression_compiles_to_a_relocatable_cubin) {
  tsr_rt_jit_t *j = open_jit(NULL);
  char *src = source_of("A * B + C", "tsr_op_fma");
  cr_assert(strstr(src, "extern \"C\" __device__ float tsr_op_fma(float a, float b, float c, float d)"), "%s", src);
  cr_assert(strstr(src, "tsr_rt_f_clamp"), "the scalar functions come first");
  tsr_rt_jit_image_t img;
  tsr_status_t st = tsr_rt_jit_compile(j, src, "sm_90", 13000, &img);
  cr_assert_null(st, "%s", tsr_status_message(st));
  cr_assert(is_elf(&img), "not a cubin (%zu bytes)", img.bytes);
  cr_assert_not(img.from_cache);
  cr_log_info("NVRTC %d: A * B + C for sm_90 in %.1f ms, %zu bytes", tsr_rt_jit_nvrtc_version(j), img.elapsed_ns / 1e6,
              img.bytes);
  tsr_rt_jit_image_free(&img);
  free(src);
  tsr_rt_jit_close(j);
}

Test(rt_jit, every_function_the_parser_emits_compiles) {
  tsr_rt_jit_t *j = open_jit(NULL);
  char *src = source_of(
      "relu(A) + sigmoid(B) + tanh(C) + exp(D) + log(A) + sqrt(B) + abs(C) + sin(D) + cos(A)"
      " + gelu(B) + hardsigmoid(C) + hardswish(D) + softplus(A) + maximum(A, B) + min(C, D)"
      " + pow(A, B) + leaky_relu(A, 0.1) + elu(B, 1) + clamp_min(C, 0) + clamp_max(D, 1)"
      " + clamp(A, -1, 1) + hardtanh(B, -1, 1) + neg(C) - A / B ** 2",
      "tsr_op_all");
  tsr_rt_jit_image_t img;
  tsr_status_t st = tsr_rt_jit_compile(j, src, "sm_90", 13000, &img);
  cr_assert_null(st, "%s\n%s", tsr_status_message(st), src);
  cr_assert(is_elf(&img));
  tsr_rt_jit_image_free(&img);
  free(src);
  tsr_rt_jit_close(j);
}

Test(rt_jit, refusals) {
  tsr_rt_jit_t *j = open_jit(NULL);
  tsr_rt_jit_image_t img;
  tsr_status_t st = tsr_rt_jit_compile(j, "extern \"C\" __device__ float f(float a) { return a +; }", "sm_90", 1, &img);
  cr_assert_not_null(st);
  cr_assert(strstr(tsr_status_message(st), "NVRTC refused") && strstr(tsr_status_message(st), "error"), "%s",
            tsr_status_message(st));
  tsr_status_free(st);
  const char *bad_arch[] = {"sm_9", "compute_90", "sm_90x", "", "sm_1000"};
  for (size_t i = 0; i < sizeof(bad_arch) / sizeof(bad_arch[0]); i++) {
    st = tsr_rt_jit_compile(j, "extern \"C\" __device__ float f(float a) { return a; }", bad_arch[i], 1, &img);
    cr_assert_not_null(st, "arch '%s' accepted", bad_arch[i]);
    tsr_status_free(st);
  }
  st = tsr_rt_jit_compile(j, "", "sm_90", 1, &img);
  cr_assert_not_null(st);
  tsr_status_free(st);
  tsr_rt_expr_t *e = NULL;
  cr_assert_null(tsr_rt_expr_parse("A", &e));
  char *src = NULL;
  const char *bad_name[] = {"", "1abc", "a-b", "a b"};
  for (size_t i = 0; i < 4; i++) {
    st = tsr_rt_jit_source(e, bad_name[i], &src);
    cr_assert_not_null(st, "name '%s' accepted", bad_name[i]);
    cr_assert_null(src);
    tsr_status_free(st);
  }
  tsr_rt_expr_free(e);
  tsr_rt_jit_close(j);
}

static char cache_dir[] = "/tmp/tsr-jit-XXXXXX";

/* every regular file of the cache directory gets one byte flipped */
static int damage_entries(void) {
  DIR *d = opendir(cache_dir);
  cr_assert_not_null(d);
  struct dirent *ent;
  int n = 0;
  while ((ent = readdir(d)) != NULL) {
    if (ent->d_name[0] == '.') continue;
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", cache_dir, ent->d_name);
    int fd = open(path, O_RDWR);
    cr_assert_geq(fd, 0);
    off_t size = lseek(fd, 0, SEEK_END);
    unsigned char b;
    cr_assert_eq(pread(fd, &b, 1, size / 2), 1);
    b ^= 0x5a;
    cr_assert_eq(pwrite(fd, &b, 1, size / 2), 1);
    close(fd);
    n++;
  }
  closedir(d);
  return n;
}

Test(rt_jit, the_cache_serves_the_second_compile_and_never_a_damaged_one) {
  cr_assert_not_null(mkdtemp(cache_dir));
  cr_assert_eq(chmod(cache_dir, 0700), 0);
  tsr_rt_cache_t *cache = NULL;
  tsr_status_t st = tsr_rt_cache_open(cache_dir, &cache);
  cr_assert_null(st, "%s", tsr_status_message(st));
  tsr_rt_jit_t *j = open_jit(cache);
  char *src = source_of("sigmoid(A) * (B - 0.5)", "tsr_op_gate");
  tsr_rt_jit_image_t cold, warm, again;
  cr_assert_null(tsr_rt_jit_compile(j, src, "sm_90", 13000, &cold));
  cr_assert_null(tsr_rt_jit_compile(j, src, "sm_90", 13000, &warm));
  cr_assert_not(cold.from_cache);
  cr_assert(warm.from_cache, "the second compile ran NVRTC again");
  cr_assert_eq(warm.bytes, cold.bytes);
  cr_assert_eq(memcmp(warm.image, cold.image, cold.bytes), 0);
  cr_log_info("cold compile %.1f ms, from the cache %.3f ms", cold.elapsed_ns / 1e6, warm.elapsed_ns / 1e6);
  /* another driver version or architecture is another entry */
  tsr_rt_jit_image_t other;
  cr_assert_null(tsr_rt_jit_compile(j, src, "sm_90", 13010, &other));
  cr_assert_not(other.from_cache);
  tsr_rt_jit_image_free(&other);
  /* a damaged entry is compiled again, and the bytes are right */
  cr_assert_geq(damage_entries(), 1);
  cr_assert_null(tsr_rt_jit_compile(j, src, "sm_90", 13000, &again));
  cr_assert_not(again.from_cache, "a damaged entry was trusted");
  cr_assert_eq(again.bytes, cold.bytes);
  cr_assert_eq(memcmp(again.image, cold.image, cold.bytes), 0);
  tsr_rt_jit_image_free(&cold);
  tsr_rt_jit_image_free(&warm);
  tsr_rt_jit_image_free(&again);
  free(src);
  tsr_rt_jit_close(j);
  tsr_rt_cache_close(cache);
  char cmd[128];
  snprintf(cmd, sizeof(cmd), "rm -rf %s", cache_dir);
  cr_assert_eq(system(cmd), 0);
}

/* Both ways of making a generation: linked from the relocatable kernel
 * and the operators (nvJitLink), and one whole compile. */
static void generation(bool link) {
  if (link)
    unsetenv("TESSERA_RT_JIT_LINK");
  else
    setenv("TESSERA_RT_JIT_LINK", "0", 1);
  tsr_rt_jit_t *j = open_jit(NULL);
  if (link && !tsr_rt_jit_links(j)) {
    cr_log_warn("no nvJitLink here: the linked generation is not tested");
    tsr_rt_jit_close(j);
    return;
  }
  cr_assert_eq(tsr_rt_jit_links(j), link);
  const char *texts[] = {"A * B + C", "sigmoid(A) - D", "clamp(A, -1, 1)"};
  tsr_rt_expr_t *e[3];
  uint32_t slots[3] = {0, 7, 255};
  for (int i = 0; i < 3; i++) cr_assert_null(tsr_rt_expr_parse(texts[i], &e[i]));
  char *ops = NULL;
  tsr_status_t st = tsr_rt_jit_ops_header((const tsr_rt_expr_t *const *)e, slots, 3, &ops);
  cr_assert_null(st, "%s", tsr_status_message(st));
  cr_assert(strstr(ops, "case 255: return tsr_rt_jit_op_255(a, b, c, d);"), "%s", ops);
  tsr_rt_jit_image_t img;
  st = tsr_rt_jit_compile_kernel(j, ops, "sm_90", 13000, &img);
  cr_assert_null(st, "%s", tsr_status_message(st));
  cr_assert(is_elf(&img));
  cr_assert_eq(img.linked, link);
  /* the entry the CUDA backend looks up is in it */
  bool found = false;
  for (size_t i = 0; i + 17 <= img.bytes && !found; i++)
    found = memcmp((char *)img.image + i, "tsr_rt_persistent", 17) == 0;
  cr_assert(found, "no tsr_rt_persistent in the generation's cubin");
  cr_log_info("a kernel generation with 3 operators (%s): %.0f ms, %zu bytes", link ? "linked" : "whole",
              img.elapsed_ns / 1e6, img.bytes);
  tsr_rt_jit_image_free(&img);
  /* a bad operator text is NVRTC's refusal, with its log */
  st = tsr_rt_jit_compile_kernel(j, "static __device__ float tsr_rt_jit_dispatch(unsigned s) { return s +; }", "sm_90",
                                 13000, &img);
  cr_assert_not_null(st);
  cr_assert(strstr(tsr_status_message(st), "NVRTC refused the") &&
                strstr(tsr_status_message(st), "kernel generation") &&
                strstr(tsr_status_message(st), "expected an expression"),
            "%s", tsr_status_message(st));
  tsr_status_free(st);
  free(ops);
  for (int i = 0; i < 3; i++) tsr_rt_expr_free(e[i]);
  tsr_rt_jit_close(j);
  unsetenv("TESSERA_RT_JIT_LINK");
}

Test(rt_jit, a_generation_of_the_persistent_kernel_compiles_as_one_program) {
  TSR_NEEDS_KERNEL_COMPILES();
  generation(false);
}
Test(rt_jit, a_generation_of_the_persistent_kernel_links_from_two_parts) {
  TSR_NEEDS_KERNEL_COMPILES();
  generation(true);
}

static int files_in(const char *dir) {
  char cmd[128];
  snprintf(cmd, sizeof(cmd), "find %s -type f | wc -l", dir);
  FILE *p = popen(cmd, "r");
  int n = -1;
  if (p && fscanf(p, "%d", &n) != 1) n = -1;
  if (p) pclose(p);
  return n;
}

/* A compiled-operator cache in a fresh folder (dir: a mkdtemp template). */
static tsr_rt_cache_t *fresh_cache(char *dir) {
  cr_assert_not_null(mkdtemp(dir));
  tsr_rt_cache_t *cache = NULL;
  cr_assert_null(tsr_rt_cache_open(dir, &cache));
  return cache;
}

static void drop_cache(tsr_rt_cache_t *cache, const char *dir) {
  tsr_rt_cache_close(cache);
  char cmd[64];
  snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
  cr_assert_eq(system(cmd), 0);
}

/* The operators' source of one expression in physical slot `slot`. */
static char *ops_for(const char *text, uint32_t slot) {
  tsr_rt_expr_t *e = NULL;
  cr_assert_null(tsr_rt_expr_parse(text, &e));
  char *ops = NULL;
  cr_assert_null(tsr_rt_jit_ops_header((const tsr_rt_expr_t *const *)&e, &slot, 1, &ops));
  tsr_rt_expr_free(e);
  return ops;
}

Test(rt_jit, a_new_operator_set_in_a_linked_generation_reuses_the_kernel_from_the_cache) {
  TSR_NEEDS_KERNEL_COMPILES();
  char dir[] = "/tmp/tsr-jit-gen-XXXXXX";
  tsr_rt_cache_t *cache = fresh_cache(dir);
  tsr_rt_jit_t *j = open_jit(cache);
  if (!tsr_rt_jit_links(j)) {
    cr_log_warn("no nvJitLink here: skipped");
  } else {
    const char *texts[] = {"A + 1", "A * 2"};
    uint64_t ns[2];
    int entries[2];
    for (int k = 0; k < 2; k++) {
      char *ops = ops_for(texts[k], 0);
      tsr_rt_jit_image_t img;
      tsr_status_t st = tsr_rt_jit_compile_kernel(j, ops, "sm_90", 13000, &img);
      cr_assert_null(st, "%s", tsr_status_message(st));
      cr_assert(!img.from_cache, "operators never compiled cannot come from the cache");
      ns[k] = img.elapsed_ns;
      entries[k] = files_in(dir);
      tsr_rt_jit_image_free(&img);
      free(ops);
    }
    /* the first stored the relocatable kernel and its operators; the
     * second only its operators: the kernel came from the cache */
    cr_log_info("first generation %.0f ms, second %.0f ms", ns[0] / 1e6, ns[1] / 1e6);
    cr_assert_eq(entries[0], 2, "%d entries after the first generation", entries[0]);
    cr_assert_eq(entries[1], 3, "%d entries after the second (the kernel compiled again?)", entries[1]);
  }
  tsr_rt_jit_close(j);
  drop_cache(cache, dir);
}

/* the library's relocatable kernel, built by nvcc with it (CMake defines
 * TSR_RT_TEST_PREBUILT where nvcc was found) */
#ifdef TSR_RT_TEST_PREBUILT
extern const unsigned char tsr_rt_kernel_rdc_image[];
extern const size_t tsr_rt_kernel_rdc_image_bytes;
static const unsigned char *prebuilt_image(void) { return tsr_rt_kernel_rdc_image; }
static size_t prebuilt_bytes(void) { return tsr_rt_kernel_rdc_image_bytes; }
#else
static const unsigned char *prebuilt_image(void) { return NULL; }
static size_t prebuilt_bytes(void) { return 0; }
#endif

Test(rt_jit, a_linked_generation_takes_the_librarys_own_kernel_and_compiles_one_it_lacks) {
  if (!prebuilt_image()) cr_skip_test("the library was built without nvcc");
  char dir[] = "/tmp/tsr-jit-pre-XXXXXX";
  tsr_rt_cache_t *cache = fresh_cache(dir);
  tsr_rt_jit_t *j = open_jit(cache);
  if (!tsr_rt_jit_links(j)) {
    cr_log_warn("no nvJitLink here: skipped");
  } else {
    tsr_rt_jit_set_prebuilt(j, prebuilt_image(), prebuilt_bytes());
    char *ops = ops_for("A * 3 - B", 4);
    /* sm_90 is in the library's fatbinary: only the operators compile */
    tsr_rt_jit_image_t img;
    tsr_status_t st = tsr_rt_jit_compile_kernel(j, ops, "sm_90", 13000, &img);
    cr_assert_null(st, "%s", tsr_status_message(st));
    cr_assert(img.linked && img.prebuilt && is_elf(&img));
    bool found = false;
    for (size_t i = 0; i + 17 <= img.bytes && !found; i++)
      found = memcmp((char *)img.image + i, "tsr_rt_persistent", 17) == 0;
    cr_assert(found, "no tsr_rt_persistent in the linked generation");
    cr_assert_eq(files_in(dir), 1, "%d cache entries: the kernel was compiled?", files_in(dir));
    cr_log_info("a generation from the library's kernel: %.0f ms", img.elapsed_ns / 1e6);
    tsr_rt_jit_image_free(&img);
    /* sm_75 is not: the link fails and the kernel is compiled for it */
    if (kernel_compiles()) {
      st = tsr_rt_jit_compile_kernel(j, ops, "sm_75", 13000, &img);
      cr_assert_null(st, "%s", tsr_status_message(st));
      cr_assert(img.linked && !img.prebuilt && is_elf(&img));
      cr_assert_eq(files_in(dir), 3, "%d cache entries after sm_75 (its operators and its kernel)", files_in(dir));
      tsr_rt_jit_image_free(&img);
    }
    free(ops);
  }
  tsr_rt_jit_close(j);
  drop_cache(cache, dir);
}
