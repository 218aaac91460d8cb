/* mig/nvml.h: the few NVML calls the executor needs. NVML is loaded, and
 * its ABI declared, by tessera_device (device/nvml_abi.h). Private. */
#ifndef TESSERA_MIG_NVML_H
#define TESSERA_MIG_NVML_H

#include <stddef.h>

#include "tessera/status.h"

typedef struct tsr__nvml_s tsr__nvml_t;
typedef struct tsr__nvml_inst_s tsr__nvml_inst_t;

/* Refuses (PERMISSION_DENIED) unless running as root, then opens GPU
 * `gpu_index` of libnvidia-ml.so.1 as tsr_nvml_open_library does. Never
 * changes the MIG mode. */
TSR_MUST_USE tsr_status_t tsr_nvml_open(unsigned gpu_index, tsr__nvml_t **out_nvml);

/* tsr_nvml_open's work after the root check, on `library` (the tests' way
 * in, with their fake NVML): (UNAVAILABLE) when NVML cannot be loaded, lacks
 * a MIG call or the GPU is not found, (FAILED_PRECONDITION) when the GPU is
 * not already in MIG mode. */
TSR_MUST_USE tsr_status_t tsr_nvml_open_library(const char *library, unsigned gpu_index, tsr__nvml_t **out_nvml);

/* Creates a GPU instance of `size` slices placed at `first_slice` and one
 * compute instance spanning it; writes its UUID ("MIG-...") into uuid. */
TSR_MUST_USE tsr_status_t tsr_nvml_create(tsr__nvml_t *nv, int size, int first_slice, tsr__nvml_inst_t **out_inst,
                                          char *uuid, size_t cap);

/* Destroys the compute and the GPU instance; frees `inst`. */
TSR_MUST_USE tsr_status_t tsr_nvml_destroy(tsr__nvml_t *nv, tsr__nvml_inst_t *inst);

void tsr_nvml_close(tsr__nvml_t *nv);

#endif
