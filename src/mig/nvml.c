/* mig/nvml.c: MIG instance creation and destruction through NVML (loaded,
 * and its ABI declared, by device/nvml_abi.h). Every call's result is
 * checked. Reviewed, small on purpose: it never enables or disables MIG
 * mode (device/nvml_abi.h does not even declare the call). Tested against
 * the fake NVML of tests/unit/device; the GPUs we reach must keep their MIG
 * mode, so the real driver is only reached by `tessera mig run --backend
 * nvml` on a GPU an administrator put in MIG mode. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device/nvml_abi.h"
#include "mig/nvml.h"

struct tsr__nvml_s {
  tsr_device_nvml_t *lib;
  tsr_nvml_device_t dev;
};

struct tsr__nvml_inst_s {
  tsr_nvml_gpu_instance_t gi;
  tsr_nvml_compute_instance_t ci;
};

/* NVML_GPU_INSTANCE_PROFILE_{1,2,3,4,7}_SLICE and the matching compute
 * instance profiles are 0, 1, 2, 3, 4. */
static int tsr__profile(int size) {
  switch (size) {
    case 1: return 0;
    case 2: return 1;
    case 3: return 2;
    case 4: return 3;
    case 7: return 4;
    default: return -1;
  }
}

tsr_status_t tsr_nvml_open(unsigned gpu_index, tsr__nvml_t **out_nvml) {
  *out_nvml = NULL;
  if (geteuid() != 0)
    return tsr_status_make(TSR_PERMISSION_DENIED,
                           "the nvml backend needs root to create MIG instances "
                           "(use --backend dry-run to rehearse the plan)");
  return tsr_nvml_open_library(NULL, gpu_index, out_nvml);
}

tsr_status_t tsr_nvml_open_library(const char *library, unsigned gpu_index, tsr__nvml_t **out_nvml) {
  *out_nvml = NULL;
  tsr__nvml_t *nv = calloc(1, sizeof(*nv));
  if (!nv) return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  tsr_status_t st = tsr_device_nvml_open(library, TSR_DEVICE_NVML_FOR_MIG, &nv->lib);
  if (st) {
    free(nv);
    return st;
  }
  const tsr_device_nvml_t *l = nv->lib;
  unsigned cur = 0, pending = 0;
  tsr_nvml_return_t r = l->device_handle(gpu_index, &nv->dev);
  if (r != TSR_NVML_SUCCESS) {
    st = tsr_status_make(TSR_UNAVAILABLE, "GPU %u: %s", gpu_index, tsr_device_nvml_error(l, r));
  } else if ((r = l->device_mig_mode(nv->dev, &cur, &pending)) != TSR_NVML_SUCCESS ||
             cur != TSR_NVML_DEVICE_MIG_ENABLE) {
    st = tsr_status_make(TSR_FAILED_PRECONDITION,
                         "GPU %u is not in MIG mode (%s); tessera never changes the MIG mode: an administrator "
                         "can enable it with 'nvidia-smi -i %u -mig 1' when the GPU is idle",
                         gpu_index, r ? tsr_device_nvml_error(l, r) : "MIG disabled", gpu_index);
  }
  if (st) {
    tsr_nvml_close(nv);
    return st;
  }
  *out_nvml = nv;
  return NULL;
}

tsr_status_t tsr_nvml_create(tsr__nvml_t *nv, int size, int first_slice, tsr__nvml_inst_t **out_inst, char *uuid,
                             size_t cap) {
  *out_inst = NULL;
  const tsr_device_nvml_t *l = nv->lib;
  int prof = tsr__profile(size);
  if (prof < 0) return tsr_status_make(TSR_INVALID_ARGUMENT, "no MIG profile for %d slices", size);
  tsr_nvml_gpu_instance_profile_info_t pi;
  memset(&pi, 0, sizeof(pi));
  tsr_nvml_return_t r = l->gpu_instance_profile_info(nv->dev, (unsigned)prof, &pi);
  if (r)
    return tsr_status_make(TSR_UNAVAILABLE, "%d-slice GPU instance profile: %s", size, tsr_device_nvml_error(l, r));
  tsr_nvml_gpu_instance_placement_t pl[16];
  unsigned count = 16;
  if ((r = l->gpu_instance_placements(nv->dev, pi.id, pl, &count)))
    return tsr_status_make(TSR_UNAVAILABLE, "placements of %d slices: %s", size, tsr_device_nvml_error(l, r));
  int chosen = -1;
  for (unsigned q = 0; q < count && q < 16; q++)
    if ((int)pl[q].start == first_slice) chosen = (int)q;
  if (chosen < 0)
    return tsr_status_make(TSR_FAILED_PRECONDITION, "no %d-slice placement starts at slice %d", size, first_slice);
  tsr__nvml_inst_t *in = calloc(1, sizeof(*in));
  if (!in) return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  if ((r = l->gpu_instance_create(nv->dev, pi.id, &pl[chosen], &in->gi))) {
    free(in);
    return tsr_status_make(TSR_UNAVAILABLE, "create %d-slice GPU instance at slice %d: %s", size, first_slice,
                           tsr_device_nvml_error(l, r));
  }
  tsr_nvml_compute_instance_profile_info_t ci;
  memset(&ci, 0, sizeof(ci));
  tsr_nvml_compute_instance_info_t info;
  memset(&info, 0, sizeof(info));
  if ((r = l->compute_instance_profile_info(in->gi, (unsigned)prof, 0, &ci)) ||
      (r = l->compute_instance_create(in->gi, ci.id, &in->ci)) || (r = l->compute_instance_info(in->ci, &info)) ||
      (r = l->device_uuid(info.device, uuid, (unsigned)cap))) {
    tsr_status_t st =
        tsr_status_make(TSR_UNAVAILABLE, "compute instance on %d slices: %s", size, tsr_device_nvml_error(l, r));
    if (in->ci) l->compute_instance_destroy(in->ci);
    l->gpu_instance_destroy(in->gi);
    free(in);
    return st;
  }
  *out_inst = in;
  return NULL;
}

tsr_status_t tsr_nvml_destroy(tsr__nvml_t *nv, tsr__nvml_inst_t *in) {
  if (!in) return NULL;
  const tsr_device_nvml_t *l = nv->lib;
  tsr_nvml_return_t r1 = in->ci ? l->compute_instance_destroy(in->ci) : 0;
  tsr_nvml_return_t r2 = l->gpu_instance_destroy(in->gi);
  free(in);
  if (r1 || r2)
    return tsr_status_make(TSR_UNAVAILABLE, "destroy MIG instance: %s", tsr_device_nvml_error(l, r1 ? r1 : r2));
  return NULL;
}

void tsr_nvml_close(tsr__nvml_t *nv) {
  if (!nv) return;
  tsr_device_nvml_close(nv->lib);
  free(nv);
}
