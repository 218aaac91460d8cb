/* The numbers `tessera top` takes from NVML: per-process SM utilisation
 * (tsr_device_nvml_process_sm) against the fake NVML's
 * nvmlDeviceGetProcessUtilization, fed by the file FAKE_NVML_UTIL names. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "device/nvml_abi.h"

static tsr_device_nvml_t *nv;
static tsr_nvml_device_t dev0, dev1;
static char util_path[] = "/tmp/tsr-top-util-XXXXXX";

static void setup(void) {
  int fd = mkstemp(util_path);
  cr_assert_geq(fd, 0);
  close(fd);
  setenv("FAKE_NVML_MODE", "two", 1);
  setenv("FAKE_NVML_UTIL", util_path, 1);
  tsr_status_t st = tsr_device_nvml_open(FAKE_NVML_PATH, TSR_DEVICE_NVML_FOR_DISCOVERY, &nv);
  cr_assert_null(st, "%s", tsr_status_message(st));
  cr_assert_not_null(nv->device_process_utilization);
  cr_assert_eq(nv->device_handle(0, &dev0), TSR_NVML_SUCCESS);
  cr_assert_eq(nv->device_handle(1, &dev1), TSR_NVML_SUCCESS);
}

static void teardown(void) {
  tsr_device_nvml_close(nv);
  unlink(util_path);
}

static void samples(const char *text) {
  FILE *f = fopen(util_path, "w");
  cr_assert_not_null(f);
  fputs(text, f);
  fclose(f);
}

static uint64_t an_hour_ago_us(void) {
  struct timeval tv;
  gettimeofday(&tv, NULL);
  return (uint64_t)tv.tv_sec * 1000000u - 3600ull * 1000000u;
}

TestSuite(top_nvml, .init = setup, .fini = teardown);

Test(top_nvml, mean_per_process_in_pid_order) {
  samples("300 50\n100 20\n100 41\nnot a line\n-4 3\n7 8 9 10\n200 7\n100\n");
  tsr_device_proc_util_t out[8];
  size_t n = 99;
  cr_assert_eq(tsr_device_nvml_process_sm(nv, dev0, an_hour_ago_us(), out, 8, &n), TSR_NVML_SUCCESS);
  cr_assert_eq(n, 3);
  cr_assert_eq(out[0].pid, 100);
  cr_assert_eq(out[0].sm_percent, 31); /* (20 + 41) / 2, rounded */
  cr_assert_eq(out[0].samples, 2);
  cr_assert_eq(out[1].pid, 200);
  cr_assert_eq(out[1].sm_percent, 7);
  cr_assert_eq(out[2].pid, 300);
  cr_assert_eq(out[2].sm_percent, 50);
}

Test(top_nvml, samples_of_one_device_only) {
  samples("100 20 0\n200 30 1\n300 40\n");
  tsr_device_proc_util_t out[8];
  size_t n = 0;
  cr_assert_eq(tsr_device_nvml_process_sm(nv, dev1, an_hour_ago_us(), out, 8, &n), TSR_NVML_SUCCESS);
  cr_assert_eq(n, 2);
  cr_assert_eq(out[0].pid, 200);
  cr_assert_eq(out[1].pid, 300);
}

Test(top_nvml, no_sample_is_zero_not_unknown) {
  samples("");
  tsr_device_proc_util_t out[4];
  size_t n = 99;
  cr_assert_eq(tsr_device_nvml_process_sm(nv, dev0, an_hour_ago_us(), out, 4, &n), TSR_NVML_SUCCESS);
  cr_assert_eq(n, 0);
  unsetenv("FAKE_NVML_UTIL"); /* NOT_FOUND from the fake */
  cr_assert_eq(tsr_device_nvml_process_sm(nv, dev0, an_hour_ago_us(), out, 4, &n), TSR_NVML_SUCCESS);
  cr_assert_eq(n, 0);
}

Test(top_nvml, only_samples_after_the_timestamp) {
  samples("100 20\n");
  tsr_device_proc_util_t out[4];
  size_t n = 99;
  cr_assert_eq(tsr_device_nvml_process_sm(nv, dev0, an_hour_ago_us() + 7200ull * 1000000u, out, 4, &n),
               TSR_NVML_SUCCESS);
  cr_assert_eq(n, 0);
}

Test(top_nvml, clamped_and_capped) {
  samples("100 150\n200 1\n300 2\n400 3\n");
  tsr_device_proc_util_t out[2];
  size_t n = 0;
  cr_assert_eq(tsr_device_nvml_process_sm(nv, dev0, an_hour_ago_us(), out, 2, &n), TSR_NVML_SUCCESS);
  cr_assert_eq(n, 2);
  cr_assert_eq(out[0].sm_percent, 100); /* a driver's 150% is 100% */
  cr_assert_eq(out[1].pid, 200);
}

Test(top_nvml, unsupported_is_unknown) {
  samples("100 20\n");
  setenv("FAKE_NVML_MODE", "util_unsupported", 1);
  tsr_device_proc_util_t out[4];
  size_t n = 99;
  cr_assert_eq(tsr_device_nvml_process_sm(nv, dev0, 0, out, 4, &n), TSR_NVML_ERROR_NOT_SUPPORTED);
  cr_assert_eq(n, 0);
  tsr_device_nvml_t without = *nv; /* a library without the entry point */
  without.device_process_utilization = NULL;
  cr_assert_eq(tsr_device_nvml_process_sm(&without, dev0, 0, out, 4, &n), TSR_NVML_ERROR_NOT_SUPPORTED);
}

Test(top_nvml, many_lines_and_long_ones_do_not_break_it) {
  FILE *f = fopen(util_path, "w");
  cr_assert_not_null(f);
  for (int i = 1; i <= 3000; i++) fprintf(f, "%d %d\n", i, i % 101);
  for (int i = 0; i < 600; i++) fputc('9', f);
  fputc('\n', f);
  fclose(f);
  tsr_device_proc_util_t *out = calloc(4096, sizeof(*out));
  size_t n = 0;
  cr_assert_eq(tsr_device_nvml_process_sm(nv, dev0, an_hour_ago_us(), out, 4096, &n), TSR_NVML_SUCCESS);
  cr_assert_eq(n, 1024); /* the fake's rows */
  cr_assert_eq(out[99].pid, 100);
  cr_assert_eq(out[99].sm_percent, 100 % 101);
  free(out);
}
