/* unit.fakecuda_dlopen: the shim loads the driver with
 * dlopen("libcuda.so.1"); with LD_LIBRARY_PATH naming <build>/tests/fakes
 * (set by ctest) that finds the fake, whose entries then work through
 * dlsym. This program is not linked with the fake. */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <link.h>
#include <string.h>

typedef int (*init_fn)(unsigned);
typedef int (*count_fn)(int *);
typedef int (*procaddr_fn)(const char *, void **, int, unsigned long long, int *);

Test(dlopen, finds_the_fake_by_its_soname) {
  cr_assert_null(dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD), "not loaded before");
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  cr_assert_not_null(h, "dlopen: %s (LD_LIBRARY_PATH=%s)", dlerror(), getenv("LD_LIBRARY_PATH"));
  struct link_map *lm = NULL;
  cr_assert_eq(dlinfo(h, RTLD_DI_LINKMAP, &lm), 0);
  cr_assert_not_null(strstr(lm->l_name, "tests/fakes/libcuda.so.1"), "loaded %s", lm->l_name);
  init_fn init = (init_fn)dlsym(h, "cuInit");
  count_fn count = (count_fn)dlsym(h, "cuDeviceGetCount");
  procaddr_fn pa = (procaddr_fn)dlsym(h, "cuGetProcAddress_v2");
  cr_assert(init && count && pa);
  cr_assert_null(dlsym(h, "tsr_parse_size"), "tessera's own functions stay local");
  cr_assert_null(dlsym(h, "fake_cuda_state_open"), "so does the state table");
  cr_assert_eq(init(0), 0);
  int n = 0;
  cr_assert_eq(count(&n), 0);
  cr_assert_eq(n, 1);
  void *fn = NULL;
  int st = -1;
  cr_assert_eq(pa("cuDeviceGetCount", &fn, 13000, 0, &st), 0);
  cr_assert_eq(fn, (void *)count);
  cr_assert_eq(st, 0);
  dlclose(h);
}
