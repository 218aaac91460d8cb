/* fake_cuda_state.h: what the fake driver's devices hold, seen from outside.
 *
 * The fake libcuda.so.1 (tests/fakes/cuda) keeps, per device, the bytes in
 * use and, per process, the bytes each one holds on each device. With
 * FAKE_CUDA_STATE=PATH these live in the file PATH, mapped MAP_SHARED by
 * every process that uses the fake, so cuMemGetInfo sees all of them and a
 * test (or a fake NVML standing in for nvmlDeviceGetComputeRunningProcesses)
 * reads the per-process table with the functions below. Without
 * FAKE_CUDA_STATE the same table lives in private memory of one process.
 *
 * Layout of the file (native endianness, 64-byte lines):
 *   header     magic "FAKECUDA", version, ready flag, device count, slot count
 *   devices    FAKE_CUDA_MAX_DEVICES entries: total (set once), used (atomic),
 *              one cache line each
 *   slots      FAKE_CUDA_SLOTS entries: pid (atomic; 0 free, -P being
 *              reclaimed by P), process start time, bytes per device
 *              (atomic)
 *
 * Protocol (no lock is ever held in the file; every loop is bounded):
 *   charge     CAS device used from u to u+n while u+n <= total, then add n
 *              to the caller's slot. Used is raised first, so a process that
 *              dies between the two leaks n in "used" but never drives it
 *              below what the slots hold.
 *   uncharge   subtract from the slot, then from used.
 *   reap       a slot whose pid is gone (kill(pid, 0) fails with ESRCH, the
 *              process is a zombie, or its start time differs: the pid was
 *              reused) is taken by CAS pid -> -self, its bytes are exchanged
 *              to zero and subtracted from used, and pid is set to 0. Only the
 *              CAS winner subtracts, so two reapers never both do.
 *   exit       a process that ends normally returns its slot (a destructor
 *              in the fake); one that is killed is reaped by the next
 *              process that attaches, allocates past the total, or asks
 *              cuMemGetInfo, or by fake_cuda_state_reap.
 *
 * Thread-safe: every function may be called from any thread of any process
 * that maps the file. Link the static library fake_cuda_state. */
#ifndef FAKE_CUDA_STATE_H
#define FAKE_CUDA_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FAKE_CUDA_MAX_DEVICES 16
#define FAKE_CUDA_SLOTS 512
#define FAKE_CUDA_DEVICE_NAME "NVIDIA H100 80GB HBM3"

typedef struct fake_cuda_state fake_cuda_state_t;

/* One row of the per-process table: what process `pid` holds on `device`. */
typedef struct {
  int32_t pid;
  int32_t device;
  uint64_t bytes;
} fake_cuda_proc_t;

/* Opens the state file `path`, creating it for `ndevices` devices of
 * `totals[i]` bytes if it does not exist yet. ndevices == 0 opens an
 * existing file only and takes its devices as they are (readers: tests, a
 * fake NVML). A file made for other devices, of another layout version, or
 * that is not a regular file is refused. Returns 0, or -1 with a one-line
 * reason in err (errlen bytes, may be 0). */
int fake_cuda_state_open(const char *path, int ndevices, const uint64_t *totals, fake_cuda_state_t **out_state,
                         char *err, size_t errlen);

/* The same table in this process's private memory (no file). NULL when out
 * of memory or ndevices is out of range. */
fake_cuda_state_t *fake_cuda_state_private(int ndevices, const uint64_t *totals);

/* Unmaps the table (the file stays). */
void fake_cuda_state_close(fake_cuda_state_t *state);

int fake_cuda_state_ndevices(const fake_cuda_state_t *state);
uint64_t fake_cuda_state_total(const fake_cuda_state_t *state, int device);
/* Bytes in use on `device`, by every process that maps the table. */
uint64_t fake_cuda_state_used(const fake_cuda_state_t *state, int device);

/* Takes a free slot for the calling process (reaping dead ones first).
 * Returns the slot index, or -1 when all FAKE_CUDA_SLOTS are taken by live
 * processes. */
int fake_cuda_state_attach(fake_cuda_state_t *state);
/* Gives back everything slot `slot` holds and frees it. */
void fake_cuda_state_detach(fake_cuda_state_t *state, int slot);

/* Admits `bytes` on `device` for slot `slot`: true and counted, or false
 * (nothing changed) when used + bytes would pass the device's total. */
bool fake_cuda_state_charge(fake_cuda_state_t *state, int slot, int device, uint64_t bytes);
/* Returns `bytes` that slot `slot` was charged on `device`. */
void fake_cuda_state_uncharge(fake_cuda_state_t *state, int slot, int device, uint64_t bytes);

/* Reclaims the slots of processes that are gone; returns how many. */
size_t fake_cuda_state_reap(fake_cuda_state_t *state);

/* Fills out[0..cap) with one row per (live slot, device) holding bytes > 0,
 * in slot order, and returns the number of such rows (which may exceed
 * cap). */
size_t fake_cuda_state_procs(const fake_cuda_state_t *state, fake_cuda_proc_t *out, size_t cap);

/* The bytes process `pid` holds on `device` (0 if none). */
uint64_t fake_cuda_state_pid_bytes(const fake_cuda_state_t *state, int32_t pid, int device);

/* The UUID the fake gives device `device`: bytes fa ce c0 da, then zeros,
 * the ordinal in the last byte; as text "GPU-facec0da-0000-0000-0000-0000000000NN"
 * (NN in hex), which is how nvidia-smi and NVML print a CUuuid. */
void fake_cuda_uuid(int device, unsigned char out[16]);
void fake_cuda_uuid_string(int device, char *buf, size_t len);

#endif
