/* device/nvml_abi.h: the one place tessera declares NVML's ABI and loads it.
 *
 * The build machines have no nvml.h, so the few types and entry points
 * tessera uses are written here from NVML's documented ABI, and
 * libnvidia-ml.so.1 is loaded at run time with dlopen. GPU discovery
 * (device/nvml.c) and the MIG executor (mig/nvml.c) both load it through
 * tsr_device_nvml_open(), so a layout is declared once and a driver's
 * missing entry point is reported the same way everywhere. Private to
 * tessera's libraries (not installed).
 *
 * Threads: NVML itself is thread-safe once initialised; a loaded
 * tsr_device_nvml_t is read-only after tsr_device_nvml_open() and may be
 * shared. Opening and closing are not safe against other NVML users of the
 * same process (nvmlShutdown ends the library for all of them). */
#ifndef TESSERA_DEVICE_NVML_ABI_H
#define TESSERA_DEVICE_NVML_ABI_H

#include <stddef.h>
#include <stdint.h>

#include "device/device.h"
#include "tessera/status.h"

/* ---- the NVML ABI subset ---------------------------------------------------- */

typedef int tsr_nvml_return_t; /* nvmlReturn_t */
#define TSR_NVML_SUCCESS 0
#define TSR_NVML_ERROR_NOT_SUPPORTED 3
#define TSR_NVML_ERROR_NOT_FOUND 6                         /* a sample query: no sample in the window */
#define TSR_NVML_ERROR_INSUFFICIENT_SIZE 7                 /* a list call: *count says how many are needed */
#define TSR_NVML_VALUE_NOT_AVAILABLE 0xffffffffffffffffULL /* usedGpuMemory unknown */
#define TSR_NVML_DEVICE_MIG_ENABLE 1

typedef struct tsr_nvml_device_s *tsr_nvml_device_t;             /* nvmlDevice_t */
typedef struct tsr_nvml_gpu_instance_s *tsr_nvml_gpu_instance_t; /* nvmlGpuInstance_t */
typedef struct tsr_nvml_compute_instance_s *tsr_nvml_compute_instance_t;

typedef struct {
  unsigned long long total, free, used;
} tsr_nvml_memory_t; /* nvmlMemory_t */

typedef struct {
  unsigned int multiprocessorCount;
  unsigned int sharedCopyEngineCount, sharedDecoderCount, sharedEncoderCount;
  unsigned int sharedJpegCount, sharedOfaCount;
  unsigned int gpuInstanceSliceCount, computeInstanceSliceCount;
  unsigned long long memorySizeMB;
} tsr_nvml_attributes_t; /* nvmlDeviceAttributes_t */

typedef struct {
  unsigned int start, size;
} tsr_nvml_gpu_instance_placement_t; /* nvmlGpuInstancePlacement_t */

typedef struct {
  unsigned int id, isP2pSupported, sliceCount, instanceCount, multiprocessorCount, copyEngineCount, decoderCount,
      encoderCount, jpegCount, ofaCount;
  unsigned long long memorySizeMB;
} tsr_nvml_gpu_instance_profile_info_t; /* nvmlGpuInstanceProfileInfo_t */

typedef struct {
  unsigned int id, sliceCount, instanceCount, multiprocessorCount, sharedCopyEngineCount, sharedDecoderCount,
      sharedEncoderCount, sharedJpegCount, sharedOfaCount;
} tsr_nvml_compute_instance_profile_info_t; /* nvmlComputeInstanceProfileInfo_t */

typedef struct {
  tsr_nvml_device_t device;
  tsr_nvml_gpu_instance_t gpuInstance;
  unsigned int id, profileId;
  unsigned int placement_start, placement_size; /* newer drivers; room either way */
  unsigned int reserved[8];
} tsr_nvml_compute_instance_info_t; /* nvmlComputeInstanceInfo_t */

typedef struct {
  char busIdLegacy[16];
  unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];      /* "00000000:01:00.0" */
} tsr_nvml_pci_info_t; /* nvmlPciInfo_t, as nvmlDeviceGetPciInfo_v3 fills it */

typedef struct {
  unsigned int pid;                              /* host pid: NVML sees every process in the root PID namespace */
  unsigned long long usedGpuMemory;              /* bytes, or TSR_NVML_VALUE_NOT_AVAILABLE */
  unsigned int gpuInstanceId, computeInstanceId; /* MIG; 0xffffffff otherwise */
} tsr_nvml_process_info_t; /* nvmlProcessInfo_t (nvmlProcessInfo_v2_t), as the _v3 calls fill it */

typedef struct {
  unsigned int pid;             /* host pid */
  unsigned long long timeStamp; /* CPU time of the sample, us since the epoch */
  unsigned int smUtil;          /* percent of the sample period the SMs ran its kernels */
  unsigned int memUtil, encUtil, decUtil;
} tsr_nvml_process_utilization_t; /* nvmlProcessUtilizationSample_t */

/* ---- the loaded library ----------------------------------------------------- */

/* What a caller is going to do: tsr_device_nvml_open() refuses a library
 * that lacks an entry point the caller needs. */
enum {
  TSR_DEVICE_NVML_FOR_DISCOVERY = 1u << 0, /* list GPUs, their memory, SMs, MIG mode */
  TSR_DEVICE_NVML_FOR_MIG = 1u << 1,       /* create and destroy MIG instances */
};

/* libnvidia-ml, opened and initialised. Every entry point is NULL when the
 * library lacks it; those the caller's `needs` name are never NULL.
 * Names follow NVML's (nvmlDeviceGetName -> device_name). */
typedef struct tsr_device_nvml_s {
  void *lib;
  tsr_nvml_return_t (*init)(void);     /* nvmlInit_v2 */
  tsr_nvml_return_t (*shutdown)(void); /* nvmlShutdown */
  const char *(*error_string)(tsr_nvml_return_t);
  tsr_nvml_return_t (*device_count)(unsigned int *);
  tsr_nvml_return_t (*device_handle)(unsigned int, tsr_nvml_device_t *);
  tsr_nvml_return_t (*device_name)(tsr_nvml_device_t, char *, unsigned int);
  tsr_nvml_return_t (*device_uuid)(tsr_nvml_device_t, char *, unsigned int);
  tsr_nvml_return_t (*device_memory)(tsr_nvml_device_t, tsr_nvml_memory_t *);
  /* nvmlDeviceGetPciInfo_v3; optional (an OpenCL device is matched by it) */
  tsr_nvml_return_t (*device_pci)(tsr_nvml_device_t, tsr_nvml_pci_info_t *);
  tsr_nvml_return_t (*device_mig_mode)(tsr_nvml_device_t, unsigned int *, unsigned int *);
  tsr_nvml_return_t (*device_attributes)(tsr_nvml_device_t, tsr_nvml_attributes_t *);
  tsr_nvml_return_t (*device_cores)(tsr_nvml_device_t, unsigned int *);
  tsr_nvml_return_t (*device_compute_capability)(tsr_nvml_device_t, int *, int *);
  tsr_nvml_return_t (*gpu_instance_profile_info)(tsr_nvml_device_t, unsigned int,
                                                 tsr_nvml_gpu_instance_profile_info_t *);
  tsr_nvml_return_t (*gpu_instance_placements)(tsr_nvml_device_t, unsigned int, tsr_nvml_gpu_instance_placement_t *,
                                               unsigned int *);
  tsr_nvml_return_t (*gpu_instance_create)(tsr_nvml_device_t, unsigned int, const tsr_nvml_gpu_instance_placement_t *,
                                           tsr_nvml_gpu_instance_t *);
  tsr_nvml_return_t (*gpu_instance_destroy)(tsr_nvml_gpu_instance_t);
  tsr_nvml_return_t (*compute_instance_profile_info)(tsr_nvml_gpu_instance_t, unsigned int, unsigned int,
                                                     tsr_nvml_compute_instance_profile_info_t *);
  tsr_nvml_return_t (*compute_instance_create)(tsr_nvml_gpu_instance_t, unsigned int, tsr_nvml_compute_instance_t *);
  tsr_nvml_return_t (*compute_instance_destroy)(tsr_nvml_compute_instance_t);
  tsr_nvml_return_t (*compute_instance_info)(tsr_nvml_compute_instance_t, tsr_nvml_compute_instance_info_t *);
  /* nvmlDeviceGetComputeRunningProcesses_v3: fills up to *count entries and
   * sets *count; TSR_NVML_ERROR_INSUFFICIENT_SIZE with *count = the number
   * needed when they do not fit. Optional (the backstop's; drivers >= 510). */
  tsr_nvml_return_t (*device_compute_processes)(tsr_nvml_device_t, unsigned int *, tsr_nvml_process_info_t *);
  /* nvmlDeviceGetProcessUtilization: the samples taken after the given
   * timestamp (us; 0: all the driver keeps), up to *count of them; with a
   * NULL buffer, INSUFFICIENT_SIZE and *count = how many there are.
   * NOT_FOUND: no sample. Optional (`tessera top`; Maxwell and later). */
  tsr_nvml_return_t (*device_process_utilization)(tsr_nvml_device_t, tsr_nvml_process_utilization_t *, unsigned int *,
                                                  unsigned long long);
  /* nvmlDeviceGetMinorNumber: the N of the GPU's /dev/nvidiaN (Linux only);
   * NOT_SUPPORTED where the device has none. Optional: a library without
   * it (not Linux) still lists its GPUs, and GPU discovery (device/nvml.c)
   * gives a GPU whose minor NVML cannot tell none. */
  tsr_nvml_return_t (*device_minor)(tsr_nvml_device_t, unsigned int *);
} tsr_device_nvml_t;

/* Loads `library` (NULL: "libnvidia-ml.so.1"), resolves every entry point
 * above, and initialises NVML. `needs` is TSR_DEVICE_NVML_FOR_* bits.
 * TSR_UNAVAILABLE, saying which, when the library cannot be loaded, lacks an
 * entry point the caller needs, or does not initialise (no driver). Free
 * with tsr_device_nvml_close(). */
TSR_MUST_USE tsr_status_t tsr_device_nvml_open(const char *library, unsigned needs, tsr_device_nvml_t **out_nvml);

/* Shuts NVML down and unloads it. NULL is ignored. */
void tsr_device_nvml_close(tsr_device_nvml_t *nvml);

/* NVML's text for `r` ("Driver Not Loaded"), or "NVML error <r>" when the
 * library has no nvmlErrorString. */
const char *tsr_device_nvml_error(const tsr_device_nvml_t *nvml, tsr_nvml_return_t r);

#define TSR_DEVICE_UTIL_SAMPLES_MAX 65536 /* samples one query reads at most */

/* Device `device`'s SM utilisation per process over the samples NVML took
 * after `since_us` (its CPU timestamps: us since the epoch): one entry per
 * pid, the mean of its samples, in pid order, at most `cap` into `out`;
 * *out_count says how many. NOT_FOUND (no process ran kernels in the
 * window) is success with no entry: every process then ran at 0%.
 * Returns TSR_NVML_SUCCESS; TSR_NVML_ERROR_NOT_SUPPORTED when the library
 * lacks the call or the GPU cannot tell (then the utilisation is unknown,
 * not 0); another NVML error as NVML gave it. Allocates a scratch buffer
 * for the call (at most TSR_DEVICE_UTIL_SAMPLES_MAX samples). */
tsr_nvml_return_t tsr_device_nvml_process_sm(const tsr_device_nvml_t *nvml, tsr_nvml_device_t device, uint64_t since_us,
                                             tsr_device_proc_util_t *out, size_t cap, size_t *out_count);

#endif
