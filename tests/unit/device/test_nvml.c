#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "device/nvml_abi.h"
#include "device/device.h"

static tsr_device_t *devs;
static size_t count;

static void discover(const char *mode, tsr_status_code_t want) {
  setenv("FAKE_NVML_MODE", mode, 1);
  tsr_status_t st = tsr_device_discover_nvml(FAKE_NVML_PATH, &devs, &count);
  cr_assert_eq(tsr_status_code(st), want, "%s: %s", mode, tsr_status_message(st));
  tsr_status_free(st);
}

Test(device_nvml, two_gpus) {
  discover("two", TSR_OK);
  cr_assert_eq(count, 2);
  cr_assert_str_eq(devs[0].name, "NVIDIA H100 80GB HBM3");
  cr_assert_str_eq(devs[0].uuid, "GPU-00000000-1111-2222-3333-444444444444");
  cr_assert_eq(devs[0].total_bytes, 85520809984ULL);
  cr_assert_eq(devs[0].sm_count, 132);
  cr_assert_eq(devs[0].mig, TSR_DEVICE_MIG_DISABLED);
  cr_assert_eq(devs[0].source, TSR_DEVICE_FROM_NVML);
  cr_assert_eq(devs[1].index, 1);
  cr_assert_eq(devs[1].mig, TSR_DEVICE_MIG_ENABLED);
  cr_assert_eq(devs[1].sm_count, 108);
  /* the PCI bus id NVML writes with an 8-digit domain, in the short form */
  cr_assert_str_eq(devs[0].pci, "0000:01:00.0");
  cr_assert_str_eq(devs[1].pci, "0000:02:00.0");
  cr_assert_eq(devs[0].kind, TSR_DEVICE_KIND_CUDA);
  /* the minor numbers are NVML's, not the indices (the fake's are crossed) */
  cr_assert(devs[0].has_minor);
  cr_assert_eq(devs[0].minor, 1);
  cr_assert(devs[1].has_minor);
  cr_assert_eq(devs[1].minor, 0);
  free(devs);
}

/* A driver that cannot tell a GPU's minor still lists it, with none. */
Test(device_nvml, minor_unknown_when_unsupported) {
  discover("minor_unsupported", TSR_OK);
  cr_assert_eq(count, 2);
  cr_assert(!devs[0].has_minor);
  cr_assert(!devs[1].has_minor);
  cr_assert_eq(devs[0].total_bytes, 85520809984ULL, "the rest is discovered as before");
  free(devs);
}

/* One GPU whose minor NVML cannot tell, beside one whose it can: each is
 * reported as NVML answered for it, and neither loses the rest. */
Test(device_nvml, minor_known_for_one_gpu_unknown_for_the_other) {
  discover("minor_mixed", TSR_OK);
  cr_assert_eq(count, 2, "a GPU without a minor is still offered");
  cr_assert(devs[0].has_minor);
  cr_assert_eq(devs[0].minor, 1, "NVML's minor, not the index");
  cr_assert(!devs[1].has_minor, "NOT_SUPPORTED: no minor, never 0");
  cr_assert_eq(devs[1].minor, 0, "left as zeroed: meaningless without has_minor");
  cr_assert_eq(devs[1].total_bytes, 42949672960ULL, "the rest of GPU 1 is discovered as before");
  cr_assert_eq(devs[1].sm_count, 108);
  cr_assert_str_eq(devs[1].pci, "0000:02:00.0");
  free(devs);
}

Test(device_pci, normalize_accepts_the_usual_forms) {
  char out[TSR_DEVICE_PCI_MAX];
  cr_assert(tsr_device_pci_normalize("00000000:3B:00.0", out));
  cr_assert_str_eq(out, "0000:3b:00.0");
  cr_assert(tsr_device_pci_normalize("0000:c1:1f.7", out));
  cr_assert_str_eq(out, "0000:c1:1f.7");
  cr_assert(tsr_device_pci_normalize("01:00.1", out));
  cr_assert_str_eq(out, "0000:01:00.1");
  cr_assert(tsr_device_pci_normalize("ffff:ff:1f.7", out));
  cr_assert_str_eq(out, "ffff:ff:1f.7");
}

Test(device_pci, normalize_refuses_what_is_not_a_bus_id) {
  static const char *const bad[] = {"",
                                    "0000",
                                    "0000:01:00",
                                    "0000:01:00.",
                                    "0000:01:00.8",
                                    "0000:01:20.0",
                                    "0001ffff:01:00.0",
                                    "0000:100:00.0",
                                    "0000:01:00.0 ",
                                    "x0000:01:00.0",
                                    "0000:01:00.0.0",
                                    "123:00.0",
                                    "0000:01.00:0",
                                    NULL};
  for (size_t i = 0; bad[i]; i++) {
    char out[TSR_DEVICE_PCI_MAX] = "untouched";
    cr_assert(!tsr_device_pci_normalize(bad[i], out), "accepted '%s'", bad[i]);
    cr_assert_str_eq(out, "untouched");
  }
  cr_assert(!tsr_device_pci_normalize(NULL, NULL));
}

Test(device_pci, kind_names) {
  cr_assert_str_eq(tsr_device_kind_name(TSR_DEVICE_KIND_CUDA), "cuda");
  cr_assert_str_eq(tsr_device_kind_name(TSR_DEVICE_KIND_OPENCL), "opencl");
}

Test(device_nvml, sm_count_from_cores_when_attributes_unsupported) {
  discover("no_attr", TSR_OK);
  cr_assert_eq(devs[0].sm_count, 132); /* 16896 cores / 128 per SM (9.0) */
  cr_assert_eq(devs[1].sm_count, 108); /* 6912 / 64 (8.0) */
  free(devs);
}

Test(device_nvml, no_gpu_is_an_empty_list) {
  discover("none", TSR_OK);
  cr_assert_eq(count, 0);
  free(devs);
}

Test(device_nvml, init_failure_is_unavailable) {
  setenv("FAKE_NVML_MODE", "init_fail", 1);
  tsr_status_t st = tsr_device_discover_nvml(FAKE_NVML_PATH, &devs, &count);
  cr_assert_eq(tsr_status_code(st), TSR_UNAVAILABLE);
  cr_assert(strstr(tsr_status_message(st), "Driver Not Loaded"));
  cr_assert_null(devs);
  cr_assert_eq(count, 0);
  tsr_status_free(st);
}

Test(device_nvml, memory_failure_fails_whole_discovery) {
  discover("memory_fail", TSR_UNAVAILABLE);
  cr_assert_null(devs);
}

Test(device_nvml, missing_library_is_unavailable) {
  tsr_status_t st = tsr_device_discover_nvml("/nonexistent/libnvidia-ml.so.1", &devs, &count);
  cr_assert_eq(tsr_status_code(st), TSR_UNAVAILABLE);
  cr_assert(strstr(tsr_status_message(st), "cannot load NVML"));
  tsr_status_free(st);
}

Test(device_nvml, mig_names) {
  cr_assert_str_eq(tsr_device_mig_name(TSR_DEVICE_MIG_ENABLED), "enabled");
  cr_assert_str_eq(tsr_device_mig_name(TSR_DEVICE_MIG_UNKNOWN), "unknown");
}

Test(device_nvml, loader_refuses_a_library_without_what_is_needed) {
  /* libc has none of NVML's entry points */
  tsr_device_nvml_t *nv;
  tsr_status_t st = tsr_device_nvml_open("libc.so.6", TSR_DEVICE_NVML_FOR_DISCOVERY, &nv);
  cr_assert_eq(tsr_status_code(st), TSR_UNAVAILABLE);
  cr_assert(strstr(tsr_status_message(st), "lacks nvmlInit_v2"), "%s", tsr_status_message(st));
  cr_assert_null(nv);
  tsr_status_free(st);
}

Test(device_nvml, loader_resolves_what_each_user_needs) {
  setenv("FAKE_NVML_MODE", "two", 1);
  tsr_device_nvml_t *nv;
  unsigned both = TSR_DEVICE_NVML_FOR_DISCOVERY | TSR_DEVICE_NVML_FOR_MIG;
  tsr_status_t st = tsr_device_nvml_open(FAKE_NVML_PATH, both, &nv);
  cr_assert_null(st, "%s", tsr_status_message(st));
  cr_assert_not_null(nv->gpu_instance_create);
  cr_assert_not_null(nv->compute_instance_info);
  cr_assert_not_null(nv->device_count);
  /* optional entry points come from the same table: the minor too */
  cr_assert_not_null(nv->device_minor, "nvmlDeviceGetMinorNumber resolved by the loader");
  cr_assert_not_null(nv->device_pci);
  cr_assert_str_eq(tsr_device_nvml_error(nv, 9), "Driver Not Loaded");
  tsr_device_nvml_close(nv);
  cr_assert_str_eq(tsr_device_nvml_error(NULL, 42), "NVML error 42");
}

/* nvmlDeviceGetComputeRunningProcesses_v3, as the backstop loads it. */
Test(device_nvml, running_processes_entry_point) {
  setenv("FAKE_NVML_MODE", "two", 1);
  unsetenv("FAKE_NVML_CUDA_STATE");
  tsr_device_nvml_t *nv = NULL;
  tsr_status_t st = tsr_device_nvml_open(FAKE_NVML_PATH, TSR_DEVICE_NVML_FOR_DISCOVERY, &nv);
  cr_assert_null(st, "%s", tsr_status_message(st));
  cr_assert_not_null(nv->device_compute_processes);
  tsr_nvml_device_t h = NULL;
  cr_assert_eq(nv->device_handle(0, &h), TSR_NVML_SUCCESS);
  tsr_nvml_process_info_t info[4];
  unsigned int n = 4;
  cr_assert_eq(nv->device_compute_processes(h, &n, info), TSR_NVML_SUCCESS);
  cr_assert_eq(n, 0, "without the driver double's state no process runs");
  setenv("FAKE_NVML_MODE", "procs_unsupported", 1);
  n = 4;
  cr_assert_eq(nv->device_compute_processes(h, &n, info), TSR_NVML_ERROR_NOT_SUPPORTED);
  tsr_device_nvml_close(nv);
}
