/* The nvml backend (mig/nvml.c) against the fake libnvidia-ml of
 * tests/unit/device: MIG instances are created where asked and destroyed
 * again, failures clean up, and a GPU that is not in MIG mode is refused
 * (its mode is never touched: the fake has no call that could change it). */
#include <dlfcn.h>

#include "common.h"
#include "mig/nvml.h"

static void (*fake_live)(int *, int *);
static void *fake;

static void setup(void) {
  setenv("FAKE_NVML_MODE", "two", 1);
  fake = dlopen(FAKE_NVML_PATH, RTLD_NOW | RTLD_LOCAL); /* the same copy mig/nvml.c loads */
  cr_assert_not_null(fake, "%s", dlerror());
  *(void **)&fake_live = dlsym(fake, "fake_nvml_live");
  cr_assert_not_null(fake_live);
}

static void teardown(void) { dlclose(fake); }

TestSuite(mig_nvml, .init = setup, .fini = teardown);

static void assert_live(int gpu_instances, int compute_instances) {
  int g, c;
  fake_live(&g, &c);
  cr_assert_eq(g, gpu_instances, "%d GPU instances alive, not %d", g, gpu_instances);
  cr_assert_eq(c, compute_instances, "%d compute instances alive, not %d", c, compute_instances);
}

static tsr__nvml_t *open_gpu(unsigned index) {
  tsr__nvml_t *nv;
  tsr_status_t st = tsr_nvml_open_library(FAKE_NVML_PATH, index, &nv);
  cr_assert_null(st, "%s", tsr_status_message(st));
  return nv;
}

/* Creating `size` slices at `slice` fails with `code` and a message with
 * `needle`, and leaves no instance behind. */
static void expect_create_error(tsr__nvml_t *nv, int size, int slice, tsr_status_code_t code, const char *needle) {
  tsr__nvml_inst_t *in;
  char uuid[96];
  tsr_status_t st = tsr_nvml_create(nv, size, slice, &in, uuid, sizeof(uuid));
  cr_assert_eq(tsr_status_code(st), code, "%s", tsr_status_message(st));
  cr_assert(strstr(tsr_status_message(st), needle), "'%s' lacks '%s'", tsr_status_message(st), needle);
  cr_assert_null(in);
  tsr_status_free(st);
}

Test(mig_nvml, create_and_destroy) {
  tsr__nvml_t *nv = open_gpu(1);
  tsr__nvml_inst_t *a, *b;
  char ua[96], ub[96];
  cr_assert_null(tsr_nvml_create(nv, 3, 4, &a, ua, sizeof(ua)));
  cr_assert_str_eq(ua, "MIG-fake-4-3");
  cr_assert_null(tsr_nvml_create(nv, 2, 0, &b, ub, sizeof(ub)));
  cr_assert_str_eq(ub, "MIG-fake-0-2");
  assert_live(2, 2);
  /* the slices are taken: the driver's refusal is passed on */
  expect_create_error(nv, 1, 5, TSR_UNAVAILABLE, "Insufficient Resources");
  assert_live(2, 2);
  cr_assert_null(tsr_nvml_destroy(nv, a));
  cr_assert_null(tsr_nvml_destroy(nv, b));
  assert_live(0, 0);
  tsr_nvml_close(nv);
}

Test(mig_nvml, every_size_at_its_first_slice) {
  tsr__nvml_t *nv = open_gpu(1);
  int sizes[] = {1, 2, 3, 4, 7};
  for (int k = 0; k < 5; k++) {
    tsr__nvml_inst_t *in;
    char uuid[96], want[32];
    tsr_status_t st = tsr_nvml_create(nv, sizes[k], 0, &in, uuid, sizeof(uuid));
    cr_assert_null(st, "%d slices: %s", sizes[k], tsr_status_message(st));
    snprintf(want, sizeof(want), "MIG-fake-0-%d", sizes[k]);
    cr_assert_str_eq(uuid, want);
    cr_assert_null(tsr_nvml_destroy(nv, in));
  }
  assert_live(0, 0);
  tsr_nvml_close(nv);
}

Test(mig_nvml, no_placement_there) {
  tsr__nvml_t *nv = open_gpu(1);
  expect_create_error(nv, 2, 1, TSR_FAILED_PRECONDITION, "no 2-slice placement starts at slice 1");
  expect_create_error(nv, 5, 0, TSR_INVALID_ARGUMENT, "no MIG profile for 5 slices");
  assert_live(0, 0);
  tsr_nvml_close(nv);
}

Test(mig_nvml, compute_instance_failure_leaves_nothing_behind) {
  setenv("FAKE_NVML_MODE", "ci_fail", 1);
  tsr__nvml_t *nv = open_gpu(1);
  expect_create_error(nv, 4, 0, TSR_UNAVAILABLE, "compute instance on 4 slices");
  assert_live(0, 0); /* the GPU instance made before it is gone again */
  tsr_nvml_close(nv);
}

Test(mig_nvml, refusals) {
  tsr__nvml_t *nv;
  tsr_status_t st = tsr_nvml_open_library(FAKE_NVML_PATH, 0, &nv); /* the H100: MIG off */
  cr_assert_eq(tsr_status_code(st), TSR_FAILED_PRECONDITION);
  cr_assert(strstr(tsr_status_message(st), "GPU 0 is not in MIG mode"));
  cr_assert(strstr(tsr_status_message(st), "never changes the MIG mode"));
  cr_assert_null(nv);
  tsr_status_free(st);
  st = tsr_nvml_open_library(FAKE_NVML_PATH, 7, &nv);
  cr_assert_eq(tsr_status_code(st), TSR_UNAVAILABLE);
  cr_assert(strstr(tsr_status_message(st), "GPU 7"));
  tsr_status_free(st);
  setenv("FAKE_NVML_MODE", "init_fail", 1);
  st = tsr_nvml_open_library(FAKE_NVML_PATH, 1, &nv);
  cr_assert_eq(tsr_status_code(st), TSR_UNAVAILABLE);
  cr_assert(strstr(tsr_status_message(st), "Driver Not Loaded"));
  tsr_status_free(st);
  st = tsr_nvml_open_library("/nonexistent/libnvidia-ml.so.1", 1, &nv);
  cr_assert_eq(tsr_status_code(st), TSR_UNAVAILABLE);
  cr_assert(strstr(tsr_status_message(st), "cannot load NVML"));
  tsr_status_free(st);
}

Test(mig_nvml, needs_root) {
  if (geteuid() == 0) cr_skip_test("running as root: the refusal cannot be seen");
  tsr__nvml_t *nv;
  tsr_status_t st = tsr_nvml_open(1, &nv);
  cr_assert_eq(tsr_status_code(st), TSR_PERMISSION_DENIED);
  cr_assert(strstr(tsr_status_message(st), "needs root"));
  tsr_status_free(st);
}
