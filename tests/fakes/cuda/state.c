/* state.c: the fake driver's device totals and per-process table, in a
 * shared file or in private memory (see fake_cuda_state.h for the layout
 * and the protocol). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fake_cuda_state.h"

_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "64-bit atomics must be lock-free to be shared between processes");
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "32-bit atomics must be lock-free to be shared between processes");

#define FC_STATE_VERSION 1u
#define FC_READY_NONE 0u
#define FC_READY_BUSY 1u
#define FC_READY_DONE 2u
/* A charge that loses this many CAS races in a row is refused as out of
 * memory rather than spinning on. */
#define FC_CAS_TRIES 65536

typedef struct {
  uint64_t total;        /* bytes; written once by the file's creator */
  _Atomic uint64_t used; /* bytes charged by every process */
  char pad[48];
} fc_dev_t;

typedef struct {
  _Atomic int32_t pid; /* 0 free, > 0 owner, < 0 being reaped */
  uint32_t pad;
  _Atomic uint64_t start;                        /* owner's start time (clock ticks), 0 unknown */
  _Atomic uint64_t bytes[FAKE_CUDA_MAX_DEVICES]; /* what the owner holds */
  char pad2[48];
} fc_slot_t;

typedef struct {
  char magic[8]; /* "FAKECUDA" */
  uint32_t version;
  _Atomic uint32_t ready;
  uint32_t ndevices;
  uint32_t nslots;
  uint64_t size;
  char pad[32];
  fc_dev_t devs[FAKE_CUDA_MAX_DEVICES];
  fc_slot_t slots[FAKE_CUDA_SLOTS];
} fc_file_t;

_Static_assert(sizeof(fc_dev_t) == 64, "one device per cache line");
_Static_assert(sizeof(fc_slot_t) % 64 == 0, "slots on whole cache lines");

struct fake_cuda_state {
  fc_file_t *file;
  bool shared;
};

/* ---- named atomics: every memory order visible at the call site ---------- */

static inline uint64_t fc_load_acquire(_Atomic uint64_t *p) { return atomic_load_explicit(p, memory_order_acquire); }
static inline uint64_t fc_add_acq_rel(_Atomic uint64_t *p, uint64_t v) {
  return atomic_fetch_add_explicit(p, v, memory_order_acq_rel);
}
static inline uint64_t fc_exchange_acq_rel(_Atomic uint64_t *p, uint64_t v) {
  return atomic_exchange_explicit(p, v, memory_order_acq_rel);
}
static inline bool fc_cas_weak_acq_rel(_Atomic uint64_t *p, uint64_t *expected, uint64_t v) {
  return atomic_compare_exchange_weak_explicit(p, expected, v, memory_order_acq_rel, memory_order_acquire);
}
static inline int32_t fc_load32_acquire(_Atomic int32_t *p) { return atomic_load_explicit(p, memory_order_acquire); }
static inline void fc_store32_release(_Atomic int32_t *p, int32_t v) {
  atomic_store_explicit(p, v, memory_order_release);
}
static inline bool fc_cas32_strong_acq_rel(_Atomic int32_t *p, int32_t *expected, int32_t v) {
  return atomic_compare_exchange_strong_explicit(p, expected, v, memory_order_acq_rel, memory_order_acquire);
}

/* Subtracts v from *p without going below zero: a count that would is
 * corrupt (or was leaked into by a process killed mid-charge), and zero is
 * the safe reading. */
static void fc_sub_floor(_Atomic uint64_t *p, uint64_t v) {
  uint64_t cur = fc_load_acquire(p);
  for (int i = 0; i < FC_CAS_TRIES; i++) {
    uint64_t next = cur >= v ? cur - v : 0;
    if (fc_cas_weak_acq_rel(p, &cur, next)) return;
  }
}

/* ---- processes ------------------------------------------------------------ */

/* Field 3 (state) and field 22 (start time) of /proc/PID/stat; false if it
 * cannot be read. The command name (field 2) may hold spaces and ')', so
 * parsing starts after the last ')'. */
static bool fc_proc_stat(int32_t pid, char *out_state, uint64_t *out_start) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  char *p = strrchr(buf, ')');
  if (!p || p[1] != ' ') return false;
  p += 2;
  *out_state = *p;
  /* fields 3..21 come before the start time */
  for (int field = 3; field < 22; field++) {
    p = strchr(p, ' ');
    if (!p) return false;
    p++;
  }
  char *end;
  unsigned long long v = strtoull(p, &end, 10);
  if (end == p) return false;
  *out_start = v;
  return true;
}

static uint64_t fc_self_start(void) {
  char st;
  uint64_t start = 0;
  return fc_proc_stat(getpid(), &st, &start) ? start : 0;
}

/* Gone: no such process, a zombie, or the pid now names another process. */
static bool fc_proc_gone(int32_t pid, uint64_t start) {
  if (pid <= 0) return false;
  if (kill(pid, 0) != 0 && errno == ESRCH) return true;
  char st;
  uint64_t now_start;
  if (!fc_proc_stat(pid, &st, &now_start)) return false; /* alive as far as we can tell */
  if (st == 'Z' || st == 'X') return true;
  return start != 0 && now_start != start;
}

/* ---- the table ------------------------------------------------------------- */

static void fc_err(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void fc_err(char *err, size_t errlen, const char *fmt, ...) {
  if (!err || errlen == 0) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
}

static void fc_file_init(fc_file_t *f, int ndevices, const uint64_t *totals) {
  memcpy(f->magic, "FAKECUDA", 8);
  f->version = FC_STATE_VERSION;
  f->ndevices = (uint32_t)ndevices;
  f->nslots = FAKE_CUDA_SLOTS;
  f->size = sizeof(fc_file_t);
  for (int i = 0; i < ndevices; i++) f->devs[i].total = totals[i];
}

fake_cuda_state_t *fake_cuda_state_private(int ndevices, const uint64_t *totals) {
  if (ndevices < 1 || ndevices > FAKE_CUDA_MAX_DEVICES || !totals) return NULL;
  fake_cuda_state_t *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  void *m = mmap(NULL, sizeof(fc_file_t), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) {
    free(s);
    return NULL;
  }
  s->file = m;
  fc_file_init(s->file, ndevices, totals);
  atomic_store_explicit(&s->file->ready, FC_READY_DONE, memory_order_release);
  return s;
}

int fake_cuda_state_open(const char *path, int ndevices, const uint64_t *totals, fake_cuda_state_t **out_state,
                         char *err, size_t errlen) {
  *out_state = NULL;
  if (!path || !*path) {
    fc_err(err, errlen, "no state file named");
    return -1;
  }
  if (ndevices < 0 || ndevices > FAKE_CUDA_MAX_DEVICES || (ndevices > 0 && !totals)) {
    fc_err(err, errlen, "%d devices: must be 1 to %d", ndevices, FAKE_CUDA_MAX_DEVICES);
    return -1;
  }
  int flags = O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | (ndevices > 0 ? O_CREAT : 0);
  int fd = open(path, flags, 0600);
  if (fd < 0) {
    fc_err(err, errlen, "%s: %s", path, strerror(errno));
    return -1;
  }
  struct stat sb;
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    fc_err(err, errlen, "%s: not a regular file", path);
    close(fd);
    return -1;
  }
  /* A new file is extended with zeros (ready = NONE); extending a file of
   * the right size again is harmless, so racing creators need no lock. */
  if (sb.st_size == 0 && ndevices > 0 && ftruncate(fd, (off_t)sizeof(fc_file_t)) != 0) {
    fc_err(err, errlen, "%s: %s", path, strerror(errno));
    close(fd);
    return -1;
  }
  if (fstat(fd, &sb) != 0 || sb.st_size != (off_t)sizeof(fc_file_t)) {
    fc_err(err, errlen, "%s: %lld bytes, not a fake CUDA state file of version %u (%zu bytes)", path,
           (long long)sb.st_size, FC_STATE_VERSION, sizeof(fc_file_t));
    close(fd);
    return -1;
  }
  void *m = mmap(NULL, sizeof(fc_file_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (m == MAP_FAILED) {
    fc_err(err, errlen, "%s: mmap: %s", path, strerror(errno));
    return -1;
  }
  fc_file_t *f = m;
  uint32_t expected = FC_READY_NONE;
  if (ndevices > 0 && atomic_compare_exchange_strong_explicit(&f->ready, &expected, FC_READY_BUSY, memory_order_acq_rel,
                                                              memory_order_acquire)) {
    fc_file_init(f, ndevices, totals);
    atomic_store_explicit(&f->ready, FC_READY_DONE, memory_order_release);
  }
  /* Another process is writing the header: wait for it, at most 5 s. */
  uint32_t ready = atomic_load_explicit(&f->ready, memory_order_acquire);
  for (int i = 0; i < 5000 && (ready == FC_READY_NONE || ready == FC_READY_BUSY); i++) {
    nanosleep(&(struct timespec){0, 1000000}, NULL);
    ready = atomic_load_explicit(&f->ready, memory_order_acquire);
  }
  const char *why = NULL;
  if (ready == FC_READY_NONE || ready == FC_READY_BUSY)
    why = "its header was never completed (a creator died?); remove it";
  else if (ready != FC_READY_DONE)
    why = "not a fake CUDA state file of this version";
  else if (memcmp(f->magic, "FAKECUDA", 8) != 0 || f->version != FC_STATE_VERSION || f->nslots != FAKE_CUDA_SLOTS ||
           f->size != sizeof(fc_file_t) || f->ndevices < 1 || f->ndevices > FAKE_CUDA_MAX_DEVICES)
    why = "not a fake CUDA state file of this version";
  if (!why && ndevices > 0) {
    bool same = f->ndevices == (uint32_t)ndevices;
    for (int i = 0; same && i < ndevices; i++) same = f->devs[i].total == totals[i];
    if (!same) why = "made for other devices (FAKE_CUDA_DEVICES or FAKE_CUDA_TOTAL_MEM differ)";
  }
  if (why) {
    fc_err(err, errlen, "%s: %s", path, why);
    munmap(m, sizeof(fc_file_t));
    return -1;
  }
  fake_cuda_state_t *s = calloc(1, sizeof *s);
  if (!s) {
    fc_err(err, errlen, "out of memory");
    munmap(m, sizeof(fc_file_t));
    return -1;
  }
  s->file = f;
  s->shared = true;
  *out_state = s;
  return 0;
}

void fake_cuda_state_close(fake_cuda_state_t *state) {
  if (!state) return;
  munmap(state->file, sizeof(fc_file_t));
  free(state);
}

int fake_cuda_state_ndevices(const fake_cuda_state_t *state) { return (int)state->file->ndevices; }

static bool fc_dev_ok(const fake_cuda_state_t *state, int device) {
  return device >= 0 && (uint32_t)device < state->file->ndevices;
}

uint64_t fake_cuda_state_total(const fake_cuda_state_t *state, int device) {
  return fc_dev_ok(state, device) ? state->file->devs[device].total : 0;
}

uint64_t fake_cuda_state_used(const fake_cuda_state_t *state, int device) {
  return fc_dev_ok(state, device) ? fc_load_acquire(&state->file->devs[device].used) : 0;
}

/* Takes a dead slot by CAS (only the winner goes on), returns its bytes to
 * the devices, and frees it. */
static bool fc_reap_slot(fc_file_t *f, fc_slot_t *slot) {
  int32_t pid = fc_load32_acquire(&slot->pid);
  int32_t owner = pid > 0 ? pid : -pid; /* < 0: a reaper that may have died too */
  if (pid == 0 || owner == getpid()) return false;
  if (!fc_proc_gone(owner, pid > 0 ? fc_load_acquire(&slot->start) : 0)) return false;
  if (!fc_cas32_strong_acq_rel(&slot->pid, &pid, -(int32_t)getpid())) return false;
  for (uint32_t d = 0; d < f->ndevices; d++) {
    uint64_t b = fc_exchange_acq_rel(&slot->bytes[d], 0);
    if (b) fc_sub_floor(&f->devs[d].used, b);
  }
  atomic_store_explicit(&slot->start, 0, memory_order_relaxed);
  fc_store32_release(&slot->pid, 0);
  return true;
}

size_t fake_cuda_state_reap(fake_cuda_state_t *state) {
  if (!state->shared) return 0;
  size_t n = 0;
  for (uint32_t i = 0; i < FAKE_CUDA_SLOTS; i++) n += fc_reap_slot(state->file, &state->file->slots[i]);
  return n;
}

int fake_cuda_state_attach(fake_cuda_state_t *state) {
  fc_file_t *f = state->file;
  int32_t self = (int32_t)getpid();
  fake_cuda_state_reap(state);
  for (int i = 0; i < FAKE_CUDA_SLOTS; i++) {
    int32_t expected = 0;
    if (fc_cas32_strong_acq_rel(&f->slots[i].pid, &expected, self)) {
      atomic_store_explicit(&f->slots[i].start, fc_self_start(), memory_order_release);
      return i;
    }
  }
  return -1;
}

void fake_cuda_state_detach(fake_cuda_state_t *state, int slot) {
  if (slot < 0 || slot >= FAKE_CUDA_SLOTS) return;
  fc_file_t *f = state->file;
  fc_slot_t *s = &f->slots[slot];
  for (uint32_t d = 0; d < f->ndevices; d++) {
    uint64_t b = fc_exchange_acq_rel(&s->bytes[d], 0);
    if (b) fc_sub_floor(&f->devs[d].used, b);
  }
  atomic_store_explicit(&s->start, 0, memory_order_relaxed);
  fc_store32_release(&s->pid, 0);
}

bool fake_cuda_state_charge(fake_cuda_state_t *state, int slot, int device, uint64_t bytes) {
  if (!fc_dev_ok(state, device) || slot < 0 || slot >= FAKE_CUDA_SLOTS) return false;
  fc_dev_t *d = &state->file->devs[device];
  if (bytes > d->total) return false;
  uint64_t cur = fc_load_acquire(&d->used);
  for (int i = 0; i < FC_CAS_TRIES; i++) {
    if (cur > d->total - bytes) return false;
    if (fc_cas_weak_acq_rel(&d->used, &cur, cur + bytes)) {
      fc_add_acq_rel(&state->file->slots[slot].bytes[device], bytes);
      return true;
    }
  }
  return false;
}

void fake_cuda_state_uncharge(fake_cuda_state_t *state, int slot, int device, uint64_t bytes) {
  if (!fc_dev_ok(state, device) || slot < 0 || slot >= FAKE_CUDA_SLOTS || bytes == 0) return;
  fc_sub_floor(&state->file->slots[slot].bytes[device], bytes);
  fc_sub_floor(&state->file->devs[device].used, bytes);
}

size_t fake_cuda_state_procs(const fake_cuda_state_t *state, fake_cuda_proc_t *out, size_t cap) {
  fc_file_t *f = state->file;
  size_t n = 0;
  for (uint32_t i = 0; i < FAKE_CUDA_SLOTS; i++) {
    int32_t pid = fc_load32_acquire(&f->slots[i].pid);
    if (pid <= 0) continue;
    for (uint32_t d = 0; d < f->ndevices; d++) {
      uint64_t b = fc_load_acquire(&f->slots[i].bytes[d]);
      if (b == 0) continue;
      if (n < cap) out[n] = (fake_cuda_proc_t){pid, (int32_t)d, b};
      n++;
    }
  }
  return n;
}

uint64_t fake_cuda_state_pid_bytes(const fake_cuda_state_t *state, int32_t pid, int device) {
  if (!fc_dev_ok(state, device) || pid <= 0) return 0;
  uint64_t sum = 0;
  for (uint32_t i = 0; i < FAKE_CUDA_SLOTS; i++)
    if (fc_load32_acquire(&state->file->slots[i].pid) == pid)
      sum += fc_load_acquire(&state->file->slots[i].bytes[device]);
  return sum;
}

void fake_cuda_uuid(int device, unsigned char out[16]) {
  memset(out, 0, 16);
  out[0] = 0xfa;
  out[1] = 0xce;
  out[2] = 0xc0;
  out[3] = 0xda;
  out[15] = (unsigned char)device;
}

void fake_cuda_uuid_string(int device, char *buf, size_t len) {
  unsigned char u[16];
  fake_cuda_uuid(device, u);
  snprintf(buf, len, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1], u[2], u[3],
           u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
}
