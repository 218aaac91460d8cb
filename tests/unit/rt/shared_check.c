/* libtessera-rt.so as a program outside the tree uses it: dlopen, the
 * public functions by name, one task on the CPU backend, and none of the
 * library's insides exported.
 *
 *   shared_check PATH/libtessera-rt.so     exit 0 ok, 1 a check failed */
#include <dlfcn.h>
#include <stdio.h>

#include "tessera/rt.h"

#define SYM(name) __typeof__(&name) p_##name = (__typeof__(&name))dlsym(lib, #name)

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: shared_check LIBTESSERA_RT\n");
    return 2;
  }
  void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    printf("FAIL: dlopen: %s\n", dlerror());
    return 1;
  }
  SYM(tsr_rt_create);
  SYM(tsr_rt_submit);
  SYM(tsr_rt_flush);
  SYM(tsr_rt_destroy);
  SYM(tsr_rt_tensor_contiguous);
  SYM(tsr_status_message);
  if (!p_tsr_rt_create || !p_tsr_rt_submit || !p_tsr_rt_flush || !p_tsr_rt_destroy || !p_tsr_rt_tensor_contiguous ||
      !p_tsr_status_message) {
    printf("FAIL: a public function is not exported\n");
    return 1;
  }
  const char *inside[] = {"tsr_rt_deps_find",  "tsr_array_grow",  "tsr_log_warn",      "tsr_rt_cpu",
                          "tsr_rt_expr_parse", "tsr_rt_jit_open", "tsr_rt_cache_open", "tsr_rt_text_kernel"};
  for (size_t i = 0; i < sizeof(inside) / sizeof(inside[0]); i++)
    if (dlsym(lib, inside[i])) {
      printf("FAIL: %s is exported\n", inside[i]);
      return 1;
    }
  tsr_rt_options_t o = {.backend = TSR_RT_BACKEND_CPU, .lanes = 2};
  tsr_rt_t *rt = NULL;
  tsr_status_t st = p_tsr_rt_create(&o, &rt);
  if (st) {
    printf("FAIL: create: %s\n", p_tsr_status_message(st));
    return 1;
  }
  float a[3] = {1, 2, 3}, b[3] = {10, 20, 30}, c[3] = {0};
  int64_t n = 3;
  tsr_rt_task_t t = {.op = TSR_RT_OP_ADD};
  p_tsr_rt_tensor_contiguous(&t.out, c, TSR_RT_F32, 1, &n);
  p_tsr_rt_tensor_contiguous(&t.in[0], a, TSR_RT_F32, 1, &n);
  p_tsr_rt_tensor_contiguous(&t.in[1], b, TSR_RT_F32, 1, &n);
  st = p_tsr_rt_submit(rt, &t, 1, NULL);
  if (!st) st = p_tsr_rt_flush(rt);
  if (!st) st = p_tsr_rt_destroy(rt);
  if (st) {
    printf("FAIL: %s\n", p_tsr_status_message(st));
    return 1;
  }
  if (c[0] != 11 || c[1] != 22 || c[2] != 33) {
    printf("FAIL: 1+10, 2+20, 3+30 gave %g %g %g\n", c[0], c[1], c[2]);
    return 1;
  }
  printf("ok: libtessera-rt.so runs a task; its insides are not exported\n");
  return 0;
}
