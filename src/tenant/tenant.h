/* tenant/tenant.h: a governed process meets its leases, whatever API it uses.
 *
 * Both shims (libtessera-cuda.so over the CUDA driver, libtessera-opencl.so
 * over the OpenCL ICD loader) start the same way, and this module is that
 * start: which leases the process runs under, their regions mapped and a
 * slot claimed in each, the policy for devices without a lease. What
 * differs between the shims (how an API's device is matched to a lease,
 * what is charged) stays in the shim.
 *
 * TESSERA_LEASE=ID[,ID...] names the leases (one per device); their regions
 * are found in TESSERA_REGION_DIR (default /run/tessera/regions), opened
 * read-write without following links, and a slot is claimed in each under
 * (pid, start time). No daemon round trip and no node-wide lock: attaching
 * is a few opens and one CAS per region.
 *
 * Without TESSERA_LEASE (the node-wide mode: a shim listed in
 * /etc/ld.so.preload, a process started by ssh, cron or a new shell) the
 * process takes its own (real) user's active leases from the index the
 * daemon keeps, <region dir>/user-<uid>.leases, believed only when it is the
 * daemon's (the region directory's owner's) and nobody else can write it; a
 * user with no lease is not governed, unless the node's policy
 * (<region dir>/node.policy, written by the daemon) is `deny`: then every
 * allocation is refused. Root is never governed this way.
 *
 * In a secure-execution process (AT_SECURE: a set-user-ID or set-group-ID
 * program, one with file capabilities) nothing comes from the environment:
 * the shims read it through tsr_tenant_getenv, which answers nothing there,
 * so such a process takes the node-wide mode from the default region
 * directory and loads only the system's own libraries.
 *
 * A lease that cannot be attached (missing, another user's, another region
 * version, ended) is one line on stderr and the policy (TESSERA_POLICY:
 * `pass`, the default, lets the process allocate ungoverned on that device;
 * `deny` refuses its allocations with out-of-memory). Never a crash.
 *
 * One process may load both shims: each is its own shared object with its
 * own copy of this module, so each claims its own slot in a lease's region
 * (a region has 256) and each charges what passes through its own API. */
#ifndef TESSERA_TENANT_TENANT_H
#define TESSERA_TENANT_TENANT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "region/region.h"

#define TSR_TENANT_LEASES_MAX 16 /* leases named in TESSERA_LEASE (one per device) */

/* What a shim's "which lease governs this device" answers besides a lease's
 * index: nothing in the process is governed (pass everything through), or
 * the process is governed but the device has no lease (the policy says:
 * pass lets it allocate ungoverned, deny refuses). */
#define TSR_TENANT_UNGOVERNED (-2)
#define TSR_TENANT_NO_LEASE (-1)

/* One attached lease. */
typedef struct tsr_tenant_lease_s {
  uint64_t id;
  tsr_region_t *region;
  uint32_t slot;
  char uuid[64];                /* the device's UUID as the daemon knows it, or "" */
  char pci[16];                 /* its PCI bus id ("0000:01:00.0"), or "" */
  char opencl[48];              /* the OpenCL device name it answers to (a trailing '*': a prefix), or "" */
  uint32_t device;              /* the daemon's device index */
  tsr_region_compute_t compute; /* its SM share (0: launches not charged) */
} tsr_tenant_lease_t;

/* What the start-up found. */
typedef struct tsr_tenant_s {
  bool governed; /* a lease was named or found, or the node's policy is deny */
  bool deny;     /* a device without a lease gets out-of-memory */
  size_t nleases;
  tsr_tenant_lease_t leases[TSR_TENANT_LEASES_MAX];
} tsr_tenant_t;

/* getenv, except in a secure-execution process (AT_SECURE), where it is
 * NULL for every name: what the shims read from the environment. */
const char *tsr_tenant_getenv(const char *name);

/* Fills *t from the environment and the region directory (see above) and
 * attaches to every lease it names. Never fails: what cannot be used is
 * said once on stderr and left out. */
void tsr_tenant_attach(tsr_tenant_t *t);

/* At exit: gives every slot back (crediting what it holds). The mappings
 * stay, for hooks still running in other threads. t->nleases becomes 0
 * first, so nothing charges a lease from then on. */
void tsr_tenant_detach(tsr_tenant_t *t);

/* In a forked child: the parent's slots are the parent's. Unmaps without
 * detaching; t keeps no lease (its policy stays until it attaches anew). */
void tsr_tenant_forget(tsr_tenant_t *t);

/* The lease's view of a device: `*total` becomes at most the limit,
 * `*free_b` at most what the lease has left (0 once it has ended) and at
 * most *total. */
void tsr_tenant_view(const tsr_tenant_lease_t *l, uint64_t *total, uint64_t *free_b);

/* ---- charging (charge.c): one protocol for both shims ---------------- */

/* `bytes` rounded up to a multiple of `granule` (> 0): what an allocation
 * takes on the device. UINT64_MAX when that would overflow. */
uint64_t tsr_tenant_round(uint64_t bytes, uint64_t granule);

/* Charges `bytes` (already rounded) for a device whose lease is `lease`, an
 * index into t->leases or a sentinel: UNGOVERNED passes with nothing
 * charged; NO_LEASE, or an index the tenant no longer has (after exit),
 * follows the policy (deny refuses). Otherwise the lease's region is
 * charged (which first frees what gone processes held when the charge
 * does not fit); if that is refused and `retry` is not NULL, `retry` is
 * called once (the shim brings its own accounts up to date) and the
 * charge asked again. *out_charged: the index charged, -1 when nothing
 * was. False: refused, nothing charged. */
bool tsr_tenant_charge(const tsr_tenant_t *t, int lease, uint64_t bytes, void (*retry)(void), int *out_charged)
    __attribute__((warn_unused_result));

/* Gives back `bytes` that tsr_tenant_charge charged to `charged` (-1, or an
 * index the tenant no longer has: nothing). */
void tsr_tenant_credit(const tsr_tenant_t *t, int charged, uint64_t bytes);

/* The warnings a shim prints at most once each: one key apiece, for both
 * shims and this module, so that one warning never silences another (bare
 * numbers did: a lease not enforced at index 12 silenced "too many live
 * allocations"). */
typedef enum {
  TSR_WARN_LEASE_ENV = 1,          /* TESSERA_LEASE is not a list of ids */
  TSR_WARN_POLICY_ENV,             /* TESSERA_POLICY is neither pass nor deny */
  TSR_WARN_NO_MAP,                 /* the allocation map could not be reserved */
  TSR_WARN_LEASE_INDEX,            /* the region directory's lease index is unusable */
  TSR_WARN_DENY_WITHOUT_LEASE,     /* no lease under the policy deny */
  TSR_WARN_NO_DRIVER,              /* the CUDA driver could not be loaded */
  TSR_WARN_NO_ICD_LOADER,          /* the OpenCL ICD loader could not be loaded */
  TSR_WARN_TOO_MANY_ALLOCATIONS,   /* the allocation map is full */
  TSR_WARN_POOL_OVER,              /* a pool reserved more than the lease has left */
  TSR_WARN_TOO_MANY_POOLS,         /* the pool table is full */
  TSR_WARN_GRAPH_CACHE_OVER,       /* the graph memory cache holds more than the lease has left */
  TSR_WARN_TOO_MANY_CONTEXTS,      /* the context table is full */
  TSR_WARN_LIMIT_OVER,             /* a context limit reserved more than the lease has left */
  TSR_WARN_IMAGE_UNREAD,           /* a fatbin entry that cannot be read */
  TSR_WARN_GRAPH_TOO_DEEP,         /* child graphs nested too deep */
  TSR_WARN_GRAPH_TOO_MANY_DEVICES, /* a graph allocating on too many devices */
  TSR_WARN_TOO_MANY_GRAPHS,        /* the table of graph instances is full */
  TSR_WARN_LEGACY_ENTRY,           /* a CUDA 2.0 entry refused */
  TSR_WARN_GREEN_CONTEXT,          /* a green context refused */
  TSR_WARN_LEASE_NOT_ENFORCED,     /* + the lease's index in TESSERA_LEASE: one key per lease */
  TSR_WARN_END = TSR_WARN_LEASE_NOT_ENFORCED + TSR_TENANT_LEASES_MAX
} tsr_tenant_warning_t;
_Static_assert(TSR_WARN_END <= 64, "tsr_tenant_warn_once keeps one bit per key");

/* One line on stderr, prefixed "tessera: ", at most once per `key` in this
 * shared object. */
void tsr_tenant_warn_once(tsr_tenant_warning_t key, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A shim's start-up: once per process image, again in a forked child. */
typedef struct tsr_tenant_once_s {
  pthread_mutex_t lock;
  _Atomic bool done;
  bool registered; /* the fork and exit handlers (inherited by children) */
} tsr_tenant_once_t;
#define TSR_TENANT_ONCE_INIT \
  { PTHREAD_MUTEX_INITIALIZER, false, false }

void tsr_tenant_once_slow(tsr_tenant_once_t *o, void (*start)(void), void (*child)(void), void (*at_exit)(void));

/* Runs start() if it has not run in this process (other threads wait for
 * it); the first time in this image it also registers child() to run in a
 * forked child and at_exit() at exit. One atomic load once started. */
static inline void tsr_tenant_once(tsr_tenant_once_t *o, void (*start)(void), void (*child)(void),
                                   void (*at_exit)(void)) {
  if (atomic_load_explicit(&o->done, memory_order_acquire)) return;
  tsr_tenant_once_slow(o, start, child, at_exit);
}

/* From child(): the next tsr_tenant_once runs start() again. */
void tsr_tenant_once_again(tsr_tenant_once_t *o);

/* The dlsym and dlvsym after this shared object's in the search order
 * (libc's, or the other shim's, which forwards to it): what a shim that
 * interposes them calls. Looked up once each, by the version programs use
 * (GLIBC_2.34, else the architecture's first, TSR_TENANT_GLIBC_BASE in
 * tenant/dlsym.h, on a glibc before 2.34), with libc's own dlvsym
 * (tsr_tenant_object_symbol), since the shims interpose dlvsym too. NULL if
 * none. */
typedef void *(*tsr_tenant_dlsym_fn)(void *handle, const char *symbol);
typedef void *(*tsr_tenant_dlvsym_fn)(void *handle, const char *symbol, const char *version);
tsr_tenant_dlsym_fn tsr_tenant_next_dlsym(void);
tsr_tenant_dlvsym_fn tsr_tenant_next_dlvsym(void);

/* The address of the loaded object `object`'s own definition of the
 * function `name` (e.g. "libc.so.6", "dlvsym"), at version `version`
 * ("GLIBC_2.34"; NULL: the default, or an unversioned one), read from the
 * object's dynamic symbol table in memory (symbols.c); NULL if no object
 * of that file name is loaded or it has no such function. The one lookup
 * that cannot come back to a shim: it uses neither dlsym nor dlvsym. */
void *tsr_tenant_object_symbol(const char *object, const char *name, const char *version);

/* Whether an OpenCL device's name matches a lease's `opencl` pattern:
 * equal, or, for a pattern ending in '*', beginning with the rest. An
 * empty pattern matches nothing. */
bool tsr_tenant_opencl_name_matches(const char *pattern, const char *device_name);

#endif
