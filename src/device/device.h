/* device/device.h: the GPUs a node offers to leases.
 *
 * Devices come from NVML (the NVIDIA driver's management library, loaded at
 * run time with dlopen so that tessera builds and runs on machines without
 * it) or, when NVML or a GPU is absent, from the [device.N] sections of the
 * configuration file. A device list is a plain array owned by the caller. */
#ifndef TESSERA_DEVICE_H
#define TESSERA_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tessera/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TSR_DEVICE_NAME_MAX 96
#define TSR_DEVICE_UUID_MAX 96
#define TSR_DEVICE_PCI_MAX 16    /* "0000:01:00.0" and its NUL */
#define TSR_DEVICE_OPENCL_MAX 48 /* an OpenCL device name pattern and its NUL */
/* The largest device minor number (tsr_device_t.minor): Linux minors have
 * 20 bits. */
#define TSR_DEVICE_MINOR_MAX 1048575u

typedef enum tsr_device_mig_e {
  TSR_DEVICE_MIG_UNKNOWN = 0,     /* not reported (declared device, old driver) */
  TSR_DEVICE_MIG_UNSUPPORTED = 1, /* the GPU cannot be partitioned */
  TSR_DEVICE_MIG_DISABLED = 2,
  TSR_DEVICE_MIG_ENABLED = 3,
} tsr_device_mig_t;

typedef enum tsr_device_source_e {
  TSR_DEVICE_FROM_NVML = 0,
  TSR_DEVICE_FROM_CONFIG = 1,
} tsr_device_source_t;

/* Which API a device is reached through. A CUDA device (every GPU NVML
 * finds) can also be reached through NVIDIA's OpenCL platform, matched by
 * its PCI bus id; an OpenCL device is one only OpenCL reaches (an AMD or
 * Intel GPU, a CPU device), declared in the configuration. */
typedef enum tsr_device_kind_e {
  TSR_DEVICE_KIND_CUDA = 0,
  TSR_DEVICE_KIND_OPENCL = 1,
} tsr_device_kind_t;

/* One GPU. Plain value; copy freely. */
typedef struct tsr_device_s {
  uint32_t index;                 /* 0..count-1, the index leases name */
  char name[TSR_DEVICE_NAME_MAX]; /* "NVIDIA H100 80GB HBM3" */
  char uuid[TSR_DEVICE_UUID_MAX]; /* "GPU-...", or "" when not known */
  uint64_t total_bytes;           /* device memory in bytes (> 0) */
  uint32_t sm_count;              /* streaming multiprocessors; 0 when unknown */
  tsr_device_mig_t mig;
  tsr_device_source_t source;
  tsr_device_kind_t kind;
  char pci[TSR_DEVICE_PCI_MAX];       /* PCI bus id "dddd:bb:dd.f" (lower case), or "" */
  char opencl[TSR_DEVICE_OPENCL_MAX]; /* the OpenCL device name it answers to (a trailing
                                         '*': any name beginning so), or "" */
  /* The N of its device file /dev/nvidiaN (NVML's minor number, or the
   * configuration's `minor`): what ties it to the GPU a scheduler names by
   * its device file (Slurm's gres.conf). A flag rather than a -1, so that
   * a device built by zeroing reads "unknown", never "minor 0". */
  bool has_minor;
  uint32_t minor; /* meaningful only with has_minor; at most TSR_DEVICE_MINOR_MAX */
} tsr_device_t;

/* One process's use of a GPU's SMs over a window, from NVML's per-process
 * samples (nvmlDeviceGetProcessUtilization): the share of each sample
 * period in which a kernel of the process ran on the GPU, not how many SMs
 * it kept busy. Plain value. */
typedef struct tsr_device_proc_util_s {
  uint32_t pid;        /* host pid */
  uint32_t sm_percent; /* the mean of its samples in the window, 0..100 */
  uint32_t samples;    /* how many samples the mean is of */
} tsr_device_proc_util_t;

/* Discovers the GPUs through NVML. `library` is the shared object to load
 * (NULL: "libnvidia-ml.so.1"). On success *out_devices is a malloc'd array
 * the caller frees with free(), and *out_count >= 0 (0: NVML works but sees no
 * GPU). Fails with TSR_UNAVAILABLE when the library cannot be loaded or NVML
 * does not initialise (no driver), with a message that says which.
 * Not thread-safe against concurrent NVML users in the same process. */
TSR_MUST_USE tsr_status_t tsr_device_discover_nvml(const char *library, tsr_device_t **out_devices, size_t *out_count);

/* "cuda", "opencl". */
const char *tsr_device_kind_name(tsr_device_kind_t kind);

/* A PCI bus id as "dddd:bb:dd.f" (lower case) from the forms NVML, lspci
 * and nvidia-smi write ("00000000:01:00.0", "0000:01:00.0", "01:00.0";
 * either case). False, with out untouched, when `text` is not one or its
 * domain is past 0xffff. out needs TSR_DEVICE_PCI_MAX bytes. */
bool tsr_device_pci_normalize(const char *text, char *out);

/* "enabled", "disabled", "unsupported", "unknown". */
const char *tsr_device_mig_name(tsr_device_mig_t mig);

#ifdef __cplusplus
}
#endif
#endif
