/* tessera/frontier.h: causal dependency tracking with vector-clock frontiers
 * (seed 001; docs/frontiers.md explains the model with the seed's examples).
 *
 * Pieces, in the order this header declares them:
 *   axes         64-bit, never-reused names of timelines (queues, collective
 *                channels, host threads, external sources)
 *   frontiers    sorted (axis, epoch) sets with a caller-chosen capacity:
 *                merge, dominates, compare, insert-or-raise, find-undominated,
 *                equality, and a compact wire encoding
 *   semaphores   timeline values carrying the frontier of each signal in a
 *                bounded history, with a taint watermark for external advances
 *   queues       an axis, an epoch and a knowledge frontier; submit decides
 *                which waits can be elided
 *   collectives  one shared axis for a group of queues
 *   buffers      death frontiers, can-reuse, and the minimal waits that close
 *                the gap ("try before you fence")
 *
 * The soundness rule (docs/frontiers.md, "Two roles"). A frontier is used in one of two
 * roles:
 *   knowledge    what a participant has observed: every entry (a, e) is a fact
 *                ("everything on axis a up to epoch e is in my causal past").
 *                Dropping an entry only loses facts, so a knowledge frontier
 *                that overflows evicts its smallest-epoch entry and is marked
 *                TAINTED (it may be missing entries of its causal past).
 *   requirement  what must have happened before something may proceed (a wait
 *                frontier, a buffer's death frontier). Dropping an entry would
 *                drop a condition, so a requirement frontier never evicts: an
 *                entry that does not fit is refused and the frontier is marked
 *                OVERFLOWED.
 * A frontier with either mark is "incomplete". Every predicate below is
 * conservative: it never says a requirement is satisfied unless it can prove
 * it. In particular tsr_frontier_dominates(have, need) is false whenever
 * `need` is incomplete, however many entries `have` holds; an incomplete `have`
 * is fine (its entries are still facts).
 *
 * Canonical form: entries are sorted by strictly increasing axis and every
 * epoch is at least 1 ((a, 0) says nothing, so it is never stored). Two
 * frontiers with the same entries and marks are equal byte for byte.
 *
 * Threads: frontiers, queues, collectives and death frontiers are plain values
 * owned by one thread at a time (no locks, no atomics). Semaphores are shared:
 * every tsr_semaphore_* function may be called from any thread at any time,
 * except create/destroy. Axis allocators are thread-safe.
 *
 * Allocation: only functions that return a tsr_status_t allocate (the error
 * status they return; tsr_frontier_create and tsr_semaphore_create also the
 * object they make). Every other function, hot paths included, works in
 * caller-provided storage, never allocates, and returns a plain value. */
#ifndef TESSERA_FRONTIER_H
#define TESSERA_FRONTIER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tessera/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ==== axes ================================================================ */

/* An axis names one timeline, globally and forever. Bit layout (most
 * significant first), so an axis printed in hex reads 0xMMDSSSSSOOOOOOOO:
 *
 *   63..56  machine   8 bits   machine index in the cluster (routing)
 *   55..52  domain    4 bits   tsr_axis_domain_t; 0 is never a valid domain,
 *                              so 0 is never a valid axis
 *   51..32  session  20 bits   one per process start on that machine, taken
 *                              from a durable counter (tsr_axis_session_next):
 *                              a restarted process never re-issues an axis of
 *                              an earlier run
 *   31..0   ordinal  32 bits   allocation order within (machine, domain,
 *                              session); never wraps (allocation fails instead)
 *
 * Sorting axes numerically groups them by machine, then domain. */
typedef uint64_t tsr_axis_t;

typedef enum tsr_axis_domain_e {
  TSR_AXIS_DOMAIN_QUEUE = 1,       /* a hardware queue: CUDA stream, CPU executor */
  TSR_AXIS_DOMAIN_COLLECTIVE = 2,  /* a collective channel shared by a group of queues */
  TSR_AXIS_DOMAIN_HOST_THREAD = 3, /* a host thread acting as a timeline */
  TSR_AXIS_DOMAIN_EXTERNAL = 4,    /* an external source (imported event, sync fd) */
} tsr_axis_domain_t;

#define TSR_AXIS_MACHINE_MAX UINT32_C(0xFF)
#define TSR_AXIS_SESSION_MAX UINT32_C(0xFFFFF)
#define TSR_AXIS_ORDINAL_MAX UINT64_C(0xFFFFFFFF)

/* Builds an axis from its fields. Returns 0 (never a valid axis) if a field is
 * out of range or the domain unknown. Pure; any thread. */
tsr_axis_t tsr_axis_make(uint32_t machine, tsr_axis_domain_t domain, uint32_t session, uint64_t ordinal);

/* Field accessors; pure, any thread. tsr_axis_domain returns the raw 4-bit
 * field (0 or an unknown value for an invalid axis). */
static inline uint32_t tsr_axis_machine(tsr_axis_t axis) { return (uint32_t)(axis >> 56); }
static inline tsr_axis_domain_t tsr_axis_domain(tsr_axis_t axis) { return (tsr_axis_domain_t)((axis >> 52) & 0xF); }
static inline uint32_t tsr_axis_session(tsr_axis_t axis) { return (uint32_t)((axis >> 32) & TSR_AXIS_SESSION_MAX); }
static inline uint64_t tsr_axis_ordinal(tsr_axis_t axis) { return axis & TSR_AXIS_ORDINAL_MAX; }

/* True if the domain field names a known domain (machine, session and ordinal
 * may take any value). */
static inline bool tsr_axis_is_valid(tsr_axis_t axis) {
  uint32_t d = (uint32_t)tsr_axis_domain(axis);
  return d >= TSR_AXIS_DOMAIN_QUEUE && d <= TSR_AXIS_DOMAIN_EXTERNAL;
}

/* Stable lower-case name of a domain ("queue", "collective", "host_thread",
 * "external"); "invalid" otherwise. Static string; any thread. */
const char *tsr_axis_domain_name(tsr_axis_domain_t domain);

/* Takes the next session number from the durable counter file at `path`
 * (created, mode 0600, if missing) and stores it back before returning, so two
 * process starts never get the same session. The file holds one decimal number
 * and is updated under an exclusive flock and fsync'd; concurrent callers in
 * several processes get distinct numbers. Errors: unreadable or corrupt file
 * (DATA_LOSS: the counter is never guessed), all 2^20 - 1 sessions used
 * (RESOURCE_EXHAUSTED), I/O errors. Sessions start at 1. Cold path. */
TSR_MUST_USE tsr_status_t tsr_axis_session_next(const char *path, uint32_t *out_session);

/* Hands out axes for one (machine, session). Each domain has its own ordinal
 * counter starting at 0. Thread-safe (one atomic counter per domain); the
 * struct is owned by its creator and must outlive every call. */
typedef struct tsr_axis_allocator_s {
  uint32_t machine;
  uint32_t session;
  _Atomic uint64_t next_ordinal[TSR_AXIS_DOMAIN_EXTERNAL + 1];
} tsr_axis_allocator_t;

/* Prepares `allocator`. INVALID_ARGUMENT if machine > TSR_AXIS_MACHINE_MAX or
 * session is 0 or > TSR_AXIS_SESSION_MAX. Not thread-safe (call before
 * sharing). */
TSR_MUST_USE tsr_status_t tsr_axis_allocator_init(tsr_axis_allocator_t *allocator, uint32_t machine, uint32_t session);

/* Allocates a fresh axis of `domain`. INVALID_ARGUMENT for an unknown domain;
 * RESOURCE_EXHAUSTED once 2^32 axes of that domain were handed out (the
 * counter never wraps, so no axis is ever issued twice). Thread-safe. */
TSR_MUST_USE tsr_status_t tsr_axis_allocator_next(tsr_axis_allocator_t *allocator, tsr_axis_domain_t domain,
                                                  tsr_axis_t *out_axis);

/* ==== frontiers =========================================================== */
/* For every tsr_frontier_* function below: the frontiers passed in are the
 * caller's (the library keeps no pointer to them after returning); there is
 * no internal locking, so a frontier may be read by several threads at once
 * but written by one thread with no concurrent reader. Functions that change
 * a frontier return a tsr_frontier_fit_t saying whether capacity forced an
 * eviction (knowledge) or a refusal (requirement); in both cases the
 * frontier is marked and every later predicate treats it conservatively. */

/* One entry: everything on `axis` up to and including `epoch` (>= 1). */
typedef struct tsr_frontier_entry_s {
  tsr_axis_t axis;
  uint64_t epoch;
} tsr_frontier_entry_t;

typedef enum tsr_frontier_kind_e {
  TSR_FRONTIER_KNOWLEDGE = 0,   /* overflow evicts the smallest epoch, marks TAINTED */
  TSR_FRONTIER_REQUIREMENT = 1, /* overflow refuses the entry, marks OVERFLOWED */
} tsr_frontier_kind_t;

/* Marks (tsr_frontier_t.flags). */
#define TSR_FRONTIER_TAINTED 0x1u    /* entries of the causal past may be missing */
#define TSR_FRONTIER_OVERFLOWED 0x2u /* a requirement could not record an entry */
#define TSR_FRONTIER_INCOMPLETE (TSR_FRONTIER_TAINTED | TSR_FRONTIER_OVERFLOWED)

/* Largest capacity a frontier may have. */
#define TSR_FRONTIER_MAX_CAPACITY 4096u

/* A frontier: a header followed by `capacity` entries of trailing storage.
 * Memory is the caller's (stack via TSR_FRONTIER_STORAGE, heap via
 * tsr_frontier_create, or any suitably aligned block of tsr_frontier_size
 * bytes). Read the fields through the accessors below; change them only
 * through the functions of this header, which keep the canonical form. A
 * frontier is a plain value: no thread-safety of its own; copying it by
 * memcpy of tsr_frontier_size(capacity) bytes is allowed. */
typedef struct tsr_frontier_s {
  uint16_t count;    /* entries in use, <= capacity */
  uint16_t capacity; /* entries of trailing storage, <= TSR_FRONTIER_MAX_CAPACITY */
  uint8_t kind;      /* tsr_frontier_kind_t */
  uint8_t flags;     /* TSR_FRONTIER_TAINTED | TSR_FRONTIER_OVERFLOWED */
  uint16_t reserved_;
  tsr_frontier_entry_t entries[];
} tsr_frontier_t;

/* A type with room for a frontier of `cap` entries, for stack or static
 * storage:
 *     TSR_FRONTIER_STORAGE(8) st;
 *     tsr_frontier_t *f = tsr_frontier_init(&st, 8, TSR_FRONTIER_KNOWLEDGE); */
#define TSR_FRONTIER_STORAGE(cap)                                                        \
  union {                                                                                \
    tsr_frontier_t frontier_;                                                            \
    unsigned char bytes_[sizeof(tsr_frontier_t) + (cap) * sizeof(tsr_frontier_entry_t)]; \
  }

/* Bytes needed for a frontier of `capacity` entries. */
static inline size_t tsr_frontier_size(uint32_t capacity) {
  return sizeof(tsr_frontier_t) + (size_t)capacity * sizeof(tsr_frontier_entry_t);
}

/* Makes `storage` (at least tsr_frontier_size(capacity) bytes, 8-byte aligned)
 * an empty, complete frontier of `kind` and returns it. Returns NULL if
 * storage is NULL, capacity > TSR_FRONTIER_MAX_CAPACITY or kind unknown.
 * Capacity 0 is allowed (an always-empty frontier). The caller keeps owning
 * the storage. */
tsr_frontier_t *tsr_frontier_init(void *storage, uint32_t capacity, tsr_frontier_kind_t kind);

/* Allocates and initialises a frontier on the heap; free with
 * tsr_frontier_free. INVALID_ARGUMENT for a bad capacity or kind,
 * OUT_OF_MEMORY. Cold path. */
TSR_MUST_USE tsr_status_t tsr_frontier_create(uint32_t capacity, tsr_frontier_kind_t kind,
                                              tsr_frontier_t **out_frontier);

/* Frees a frontier made by tsr_frontier_create; NULL is ignored. */
void tsr_frontier_free(tsr_frontier_t *frontier);

/* Empties `frontier` and clears its marks (kind and capacity stay): the
 * caller declares it a fresh, complete frontier. */
void tsr_frontier_clear(tsr_frontier_t *frontier);

static inline uint32_t tsr_frontier_count(const tsr_frontier_t *f) { return f->count; }
static inline uint32_t tsr_frontier_capacity(const tsr_frontier_t *f) { return f->capacity; }
static inline tsr_frontier_kind_t tsr_frontier_kind(const tsr_frontier_t *f) { return (tsr_frontier_kind_t)f->kind; }
static inline bool tsr_frontier_is_tainted(const tsr_frontier_t *f) { return (f->flags & TSR_FRONTIER_TAINTED) != 0; }
static inline bool tsr_frontier_is_overflowed(const tsr_frontier_t *f) {
  return (f->flags & TSR_FRONTIER_OVERFLOWED) != 0;
}
/* Complete = neither mark: the entries are the whole story. */
static inline bool tsr_frontier_is_complete(const tsr_frontier_t *f) {
  return (f->flags & TSR_FRONTIER_INCOMPLETE) == 0;
}

/* The epoch recorded for `axis`, 0 if absent (for an incomplete frontier, 0
 * may also mean "evicted": treat it as "not known", never as "not needed").
 * Binary search, no allocation. */
uint64_t tsr_frontier_get(const tsr_frontier_t *frontier, tsr_axis_t axis);

/* True if `frontier` is in canonical form: count <= capacity <= max, known
 * kind and marks, axes strictly increasing, epochs >= 1. For tests, fuzzing
 * and assertions; O(count). */
bool tsr_frontier_is_valid(const tsr_frontier_t *frontier);

/* What happened to capacity during a mutation. */
typedef enum tsr_frontier_fit_e {
  TSR_FRONTIER_FIT = 0,      /* every entry fitted; nothing lost */
  TSR_FRONTIER_EVICTED = 1,  /* knowledge: smallest-epoch entries evicted, now TAINTED */
  TSR_FRONTIER_OVERFLOW = 2, /* requirement: an entry was refused, now OVERFLOWED;
                                the caller must fall back to a real wait */
} tsr_frontier_fit_t;

/* Raises `axis` to at least `epoch` in `frontier`, inserting it if absent:
 *   insert_or_raise({A:5, B:3}, C, 4) = {A:5, B:3, C:4}
 *   insert_or_raise({A:5, B:3}, A, 8) = {A:8, B:3}
 * Never lowers an epoch; epoch 0 is a no-op. When a new axis does not fit: a
 * knowledge frontier evicts the entry with the smallest (epoch, axis) among
 * its entries and the new one (possibly the new one itself) and is marked
 * TAINTED; a requirement frontier stays as it was and is marked OVERFLOWED.
 * `axis` should be valid (tsr_axis_is_valid); the frontier layer treats it as
 * an opaque number but tsr_frontier_encode refuses invalid axes. Hot path: no
 * allocation, O(log n) search plus O(n) shift on insert. */
tsr_frontier_fit_t tsr_frontier_insert_or_raise(tsr_frontier_t *frontier, tsr_axis_t axis, uint64_t epoch);

/* dst = component-wise max(dst, src), in place:
 *   merge({A:5, B:3}, {A:2, B:7, C:4}) = {A:5, B:7, C:4}
 * Marks travel: a knowledge `dst` becomes TAINTED if `src` is incomplete (it
 * may now miss what src missed); a requirement `dst` takes src's marks. When
 * the union does not fit: knowledge keeps the entries with the largest
 * (epoch, axis) and is marked TAINTED; requirement raises the axes it already
 * holds, adds none, and is marked OVERFLOWED. `dst` and `src` may be the same
 * frontier. Hot path: no allocation; O(n + m); equal axis sets take a single
 * pass. Associative, commutative and idempotent on complete frontiers that fit. */
tsr_frontier_fit_t tsr_frontier_merge(tsr_frontier_t *dst, const tsr_frontier_t *src);

/* dst = src (entries and marks; dst keeps its kind and capacity). If src does
 * not fit, behaves as merge into an empty dst (evict or overflow). */
tsr_frontier_fit_t tsr_frontier_copy(tsr_frontier_t *dst, const tsr_frontier_t *src);

/* True iff `have` provably covers `need`: need is complete and for every
 * (a, e) in need, have holds a with epoch >= e.
 *   dominates({A:5, B:7, C:4}, {A:3, B:7}) = true
 *   dominates({A:5, B:7},      {A:3, C:4}) = false   (C missing from have)
 * Conservative: false when need is TAINTED or OVERFLOWED (it may not list all
 * its conditions). An incomplete `have` is used as is (its entries are facts).
 * An empty complete need is dominated by everything. Hot path: no allocation,
 * O(n + m). */
bool tsr_frontier_dominates(const tsr_frontier_t *have, const tsr_frontier_t *need);

/* Causal order of two frontiers. */
typedef enum tsr_frontier_order_e {
  TSR_FRONTIER_EQUAL = 0,      /* each dominates the other */
  TSR_FRONTIER_BEFORE = 1,     /* b dominates a, not the reverse: a happened before b */
  TSR_FRONTIER_AFTER = 2,      /* a dominates b, not the reverse */
  TSR_FRONTIER_CONCURRENT = 3, /* no order could be proven */
} tsr_frontier_order_t;

/* Four-way compare, consistent with tsr_frontier_dominates: AFTER implies
 * dominates(a, b), BEFORE implies dominates(b, a), EQUAL implies both.
 * Conservative: an incomplete frontier is never claimed to be dominated, so
 * with marks the answer degrades towards CONCURRENT, never towards an order
 * that may be false. Read CONCURRENT as "no order proven": when both inputs
 * are complete it is exact (the two histories are truly concurrent); when one
 * is incomplete it is not a proof of independence. Hot path: no allocation,
 * one pass; equal axis sets take a branch-light fast path. */
tsr_frontier_order_t tsr_frontier_compare(const tsr_frontier_t *a, const tsr_frontier_t *b);

/* Stable name of an order ("equal", "before", "after", "concurrent"). */
const char *tsr_frontier_order_name(tsr_frontier_order_t order);

/* Structural equality: same entries and same marks (kind and capacity are
 * ignored). This is value equality, not a causal claim: use compare or
 * dominates for decisions. */
bool tsr_frontier_equal(const tsr_frontier_t *a, const tsr_frontier_t *b);

/* Writes into `out_missing` (cleared first; its kind and capacity are the
 * caller's) the entries of `need` that `have` does not cover: axis absent from
 * have, or have's epoch smaller. `out_missing` also takes need's marks, so an
 * incomplete need gives an incomplete answer. Returns true iff `have`
 * dominates `need` (nothing missing and need complete); an empty out_missing
 * with a false return means "need is incomplete: issue a real wait". Give
 * out_missing the REQUIREMENT kind and capacity >= need's count: a smaller
 * one overflows (marked) rather than dropping silently. `out_missing` must not
 * alias have or need. Hot path: no allocation, O(n + m). */
bool tsr_frontier_find_undominated(const tsr_frontier_t *have, const tsr_frontier_t *need, tsr_frontier_t *out_missing);

/* ---- wire encoding ------------------------------------------------------ */
/* Format version 1, little-endian LEB128 varints, canonical (one encoding per
 * frontier, so encode(decode(bytes)) == bytes for every accepted input):
 *   u8      0x10 | marks        high nibble = version 1; bits 2-3 zero
 *   varint  count               <= TSR_FRONTIER_MAX_CAPACITY
 *   count x { varint axis delta (first entry: the axis itself; then the
 *             difference to the previous axis, >= 1), varint epoch (>= 1) }
 * Varints are minimal (no trailing 0x80..0x00 padding) and at most 10 bytes.
 * Every axis must be valid (tsr_axis_is_valid). The kind is not sent: the
 * receiver decides the role of what it decodes. */

/* Largest encoding of a frontier with `count` entries. */
static inline size_t tsr_frontier_wire_size_max(uint32_t count) { return 1 + 10 + (size_t)count * 20; }

/* Encodes `frontier` into `buf`; returns the bytes written, or 0 if `cap` is
 * too small or the frontier holds an invalid axis (nothing useful written).
 * No allocation; any thread for its own buffers. */
size_t tsr_frontier_encode(const tsr_frontier_t *frontier, uint8_t *buf, size_t cap);

typedef enum tsr_frontier_wire_error_e {
  TSR_WIRE_OK = 0,
  TSR_WIRE_TRUNCATED = 1,   /* the input ended inside the frontier */
  TSR_WIRE_BAD_VERSION = 2, /* unknown format version */
  TSR_WIRE_BAD_FLAGS = 3,   /* reserved header bits set */
  TSR_WIRE_BAD_VARINT = 4,  /* varint over 64 bits or not minimal */
  TSR_WIRE_TOO_LARGE = 5,   /* count above TSR_FRONTIER_MAX_CAPACITY */
  TSR_WIRE_CAPACITY = 6,    /* count above the destination's capacity */
  TSR_WIRE_UNSORTED = 7,    /* axis delta 0 (duplicate) or axis past 2^64 */
  TSR_WIRE_BAD_AXIS = 8,    /* an axis with an unknown domain */
  TSR_WIRE_ZERO_EPOCH = 9,  /* an entry with epoch 0 */
  TSR_WIRE_TRAILING = 10,   /* bytes after the last entry */
  TSR_WIRE_NULL = 11,       /* NULL argument */
} tsr_frontier_wire_error_t;

/* Decodes `size` bytes at `data` into `out_frontier` (initialised by the
 * caller; its kind and capacity are kept). Rejects every input that is not
 * exactly one canonical encoding. On success out_frontier holds the decoded
 * entries and marks. On any error out_frontier is left empty and marked
 * TAINTED | OVERFLOWED, so a caller that ignores the error still gets only
 * conservative answers (an empty *complete* requirement would be dominated by
 * everything). Returns a plain code, no allocation: this sits on the receive
 * path. Reads at most `size` bytes; `data` may be NULL when size is 0. */
tsr_frontier_wire_error_t tsr_frontier_decode(const uint8_t *data, size_t size, tsr_frontier_t *out_frontier);

/* Stable name of a wire error ("truncated", ...). */
const char *tsr_frontier_wire_error_name(tsr_frontier_wire_error_t error);

/* ==== semaphores ========================================================== */

/* A timeline semaphore: a monotonically increasing uint64 value plus, for each
 * value signalled, the frontier the signaller attached, kept in a ring of the
 * last `history_length` signals. Opaque, heap-allocated, thread-safe (one
 * mutex; the current value is also readable lock-free).
 *
 * Signals are recorded when they are issued with a known frontier (for a
 * device queue: at submission, before the device runs them), so that a
 * pipeline submitted all at once already sees the frontiers it waits on. The
 * model assumes what Vulkan requires of timeline semaphores: signals execute
 * in increasing value order, so S >= v on the device implies the signal that
 * first reached v has executed.
 *
 * Taint: values reached through tsr_semaphore_advance_external have no known
 * frontier. The watermark is the value of the last tracked signal; values above
 * it are tainted. A later tracked signal past the tainted range moves the
 * watermark and clears it. */
typedef struct tsr_semaphore_s tsr_semaphore_t;

typedef struct tsr_semaphore_options_s {
  uint64_t initial_value;     /* values <= this are satisfied from creation, with no
                                  dependencies */
  uint32_t history_length;    /* signals remembered, >= 1 */
  uint32_t frontier_capacity; /* entries per remembered frontier, 1..max; a larger
                                  signal frontier is stored evicted and TAINTED */
} tsr_semaphore_options_t;

/* Creates a semaphore; the caller owns it and frees it with
 * tsr_semaphore_destroy. INVALID_ARGUMENT for a zero history or a capacity
 * out of range, OUT_OF_MEMORY. Memory: one block of about history_length *
 * (frontier_capacity * 16 + 32) bytes plus the header. Cold path; not
 * thread-safe with respect to the new semaphore until it is shared. */
TSR_MUST_USE tsr_status_t tsr_semaphore_create(const tsr_semaphore_options_t *options, tsr_semaphore_t **out_semaphore);

/* Destroys a semaphore; NULL is ignored. No thread may use it any more (no
 * waiter may be blocked in it). */
void tsr_semaphore_destroy(tsr_semaphore_t *semaphore);

typedef enum tsr_semaphore_signal_e {
  TSR_SEMAPHORE_SIGNALLED = 0,     /* recorded; waiters woken */
  TSR_SEMAPHORE_NOT_MONOTONIC = 1, /* value <= current value: rejected, nothing changed */
  TSR_SEMAPHORE_NO_ORIGIN = 2,     /* frontier lacks the signaller's axis: rejected */
} tsr_semaphore_signal_t;

/* Tracked signal: advances the value to `value` and remembers `frontier` (the
 * signaller's causal frontier, copied) as the frontier of that value.
 * `origin` is the signaller's own axis; `frontier` must contain it (the
 * signal point (origin, frontier[origin]) is what a waiter's elision checks).
 * A tracked signal moves the taint watermark to `value`. The oldest remembered
 * signal is dropped when the history is full. Thread-safe; no allocation. */
tsr_semaphore_signal_t tsr_semaphore_signal(tsr_semaphore_t *semaphore, uint64_t value, tsr_axis_t origin,
                                            const tsr_frontier_t *frontier);

/* External advance: the value becomes `value` through work the scheduler did
 * not track (an imported event). Values above the watermark become tainted:
 * waits on them are never elided and import nothing. Returns
 * TSR_SEMAPHORE_NOT_MONOTONIC (nothing changed) if value <= current.
 * Thread-safe; no allocation. */
tsr_semaphore_signal_t tsr_semaphore_advance_external(tsr_semaphore_t *semaphore, uint64_t value);

/* Current value: the highest value signalled (tracked or external), which
 * for device queues is the highest value *submitted*, not necessarily reached
 * on the device. Lock-free (acquire load); any thread. */
uint64_t tsr_semaphore_value(const tsr_semaphore_t *semaphore);

/* Taint watermark: the last tracked value (or the initial value). Values at
 * or below it have a tracked signal at or above them. Thread-safe (locks). */
uint64_t tsr_semaphore_watermark(tsr_semaphore_t *semaphore);

/* True if `value` has been reached but lies above the watermark (reached
 * through an external advance and not yet passed by a tracked signal): a wait
 * on it is never elided and imports nothing. Thread-safe (locks). */
bool tsr_semaphore_is_tainted(tsr_semaphore_t *semaphore, uint64_t value);

typedef enum tsr_semaphore_import_e {
  TSR_SEMAPHORE_IMPORTED = 0,     /* merged the frontier of the signal that reached the
                                     value (nothing to merge for values <= initial) */
  TSR_SEMAPHORE_PENDING = 1,      /* not reached (yet / before the timeout) */
  TSR_SEMAPHORE_HISTORY_LOST = 2, /* reached, but that signal left the history:
                                     nothing merged (conservative) */
  TSR_SEMAPHORE_EXTERNAL = 3,     /* reached through an external advance: no frontier
                                     exists, nothing merged (conservative) */
} tsr_semaphore_import_t;

/* Non-blocking wait/import for S >= value: if reached, merges into `knowledge`
 * the frontier attached by the signal that first reached `value` -- not the
 * latest one (the seed's late waiter: after signals 1..5, a waiter on S >= 2
 * gets the frontier of 2). When that frontier is not known (history lost,
 * external) nothing is merged: the waiter knows less, which is safe. The
 * merge follows tsr_frontier_merge (knowledge may evict and taint).
 * `knowledge` is the caller's and may be NULL (query only). Thread-safe. */
tsr_semaphore_import_t tsr_semaphore_import(tsr_semaphore_t *semaphore, uint64_t value, tsr_frontier_t *knowledge);

/* Blocking host wait for S >= value, at most `timeout_ns` (UINT64_MAX: no
 * limit; 0: do not block), then imports as tsr_semaphore_import. Returns
 * TSR_SEMAPHORE_PENDING on timeout. Thread-safe; any number of waiters. */
tsr_semaphore_import_t tsr_semaphore_wait(tsr_semaphore_t *semaphore, uint64_t value, uint64_t timeout_ns,
                                          tsr_frontier_t *knowledge);

/* Elision predicate for a wait on S >= value: true iff `knowledge` proves the
 * semaphore has reached `value` on the device, i.e. it covers the signal point
 * (origin, epoch) of a tracked signal with value >= `value` that is still in
 * the history (the one that reached `value`, or when that one is external or
 * gone, the first later tracked one, a stricter condition). Values <= the
 * initial value are always covered. Conservative: false for values not yet
 * signalled, tainted values with no tracked signal above them, and values
 * whose covering signals left the history. Only the signal point is checked,
 * so the answer does not degrade when the signal's frontier was TAINTED (that
 * frontier's entries are all in the signal point's causal past). Thread-safe. */
bool tsr_semaphore_covers(tsr_semaphore_t *semaphore, uint64_t value, const tsr_frontier_t *knowledge);

/* ==== queues ============================================================== */

/* A queue's timeline as seen by its scheduler: its axis, the epoch of its last
 * submitted operation, and its knowledge frontier (caller storage, KNOWLEDGE
 * kind), which always contains (axis, epoch) once epoch >= 1. Owned by one
 * thread (the queue's submitter); not thread-safe. Host threads use the same
 * type with a host-thread axis. */
typedef struct tsr_queue_s {
  tsr_axis_t axis;
  uint64_t epoch;
  tsr_frontier_t *frontier;
} tsr_queue_t;

/* Prepares `queue` with its axis and an initialised KNOWLEDGE frontier of
 * capacity >= 1 that the caller owns and keeps alive (it is cleared).
 * INVALID_ARGUMENT for an invalid axis, a NULL or requirement frontier, or
 * capacity 0. Cold path; no allocation. */
TSR_MUST_USE tsr_status_t tsr_queue_init(tsr_queue_t *queue, tsr_axis_t axis, tsr_frontier_t *frontier);

/* The queue's knowledge frontier (the caller's storage). */
static inline const tsr_frontier_t *tsr_queue_frontier(const tsr_queue_t *queue) { return queue->frontier; }

/* One wait of an operation: S >= value. */
typedef struct tsr_queue_wait_s {
  tsr_semaphore_t *semaphore;
  uint64_t value;
} tsr_queue_wait_t;

#define TSR_QUEUE_MAX_WAITS 64u

/* Submits one operation that waits on `waits[0..wait_count)` (each with a
 * live, non-NULL semaphore; the array is only read). For each wait
 * in order: if the queue's frontier (including what earlier waits of this
 * operation imported) covers it (tsr_semaphore_covers) it is elided;
 * otherwise its bit is set in *out_issue_mask (bit i = waits[i] must be issued
 * as a device wait) and the frontier of the signal it waits for is imported
 * when known. Then the epoch advances by one and (axis, epoch) is raised in
 * the frontier; the queue's own entry is never evicted (other entries are, if
 * needed, and the frontier is then TAINTED). Returns the new epoch, or 0 (and
 * nothing changed) if wait_count > TSR_QUEUE_MAX_WAITS or waits is NULL with
 * a nonzero count, or the epoch would overflow. Hot path: no allocation; locks
 * each waited semaphore once. */
uint64_t tsr_queue_submit(tsr_queue_t *queue, const tsr_queue_wait_t *waits, uint32_t wait_count,
                          uint64_t *out_issue_mask);

/* Signals `semaphore` to `value` from the queue's last submitted operation,
 * attaching the queue's frontier (origin = the queue's axis). Call after
 * tsr_queue_submit; returns TSR_SEMAPHORE_NO_ORIGIN if nothing was submitted
 * yet. See tsr_semaphore_signal. */
tsr_semaphore_signal_t tsr_queue_signal(tsr_queue_t *queue, tsr_semaphore_t *semaphore, uint64_t value);

/* ==== collective channels ================================================= */

/* One shared axis for a group of queues taking part in collectives
 * (all-reduce, all-gather, broadcast). Collective number n is recorded as the
 * single entry (axis, n) in every member's frontier instead of one entry per
 * member, so the frontier cost of a collective is constant in the group size.
 * Sound because a member's part of a collective completes only once every
 * member has contributed, so (axis, n) in a member's frontier implies every
 * member's work before collective n. Plain value owned by the thread that
 * issues the collectives. */
typedef struct tsr_collective_s {
  tsr_axis_t axis;
  uint64_t sequence; /* last collective number handed out; 0 = none */
} tsr_collective_t;

/* Prepares a channel. INVALID_ARGUMENT unless `axis` is a valid
 * TSR_AXIS_DOMAIN_COLLECTIVE axis. */
TSR_MUST_USE tsr_status_t tsr_collective_init(tsr_collective_t *collective, tsr_axis_t axis);

/* Hands out the next collective number (1, 2, ...); 0 if exhausted. Not
 * thread-safe: one issuing thread per channel. */
uint64_t tsr_collective_next(tsr_collective_t *collective);

/* Submits member `queue`'s part of collective number `sequence` on channel
 * `collective`: as tsr_queue_submit, and the queue's frontier also raises
 * (collective->axis, sequence). Returns the queue's new epoch (0 on the same
 * errors as tsr_queue_submit, or sequence 0 / above the channel's). */
uint64_t tsr_queue_submit_collective(tsr_queue_t *queue, const tsr_collective_t *collective, uint64_t sequence,
                                     const tsr_queue_wait_t *waits, uint32_t wait_count, uint64_t *out_issue_mask);

/* ==== buffers ============================================================= */

/* Records a buffer's death frontier when it is freed: copies the freeing
 * participant's frontier (a queue's, after submitting the free) into `death`
 * (caller storage; give it the REQUIREMENT kind so it never drops an entry).
 * The marks travel: a TAINTED source gives a TAINTED death frontier, which
 * tsr_buffer_can_reuse then never accepts. Returns how it fitted (OVERFLOW:
 * `death` is marked and reuse will need a fence). */
tsr_frontier_fit_t tsr_buffer_record_death(const tsr_frontier_t *freeing_frontier, tsr_frontier_t *death);

/* True iff a queue whose frontier is `queue_frontier` may reuse the buffer now
 * with no synchronisation: tsr_frontier_dominates(queue_frontier, death).
 * Conservative: false for an incomplete death frontier. Hot path. */
bool tsr_buffer_can_reuse(const tsr_frontier_t *queue_frontier, const tsr_frontier_t *death);

/* One wait proposed by tsr_buffer_plan_reuse. */
typedef struct tsr_buffer_wait_s {
  tsr_semaphore_t *semaphore;
  uint64_t value;
} tsr_buffer_wait_t;

typedef enum tsr_buffer_reuse_e {
  TSR_BUFFER_REUSE_NOW = 0,         /* already dominated: no wait needed */
  TSR_BUFFER_REUSE_AFTER_WAITS = 1, /* issue the listed waits, import each
                                       (tsr_semaphore_import), re-test can_reuse */
  TSR_BUFFER_REUSE_FENCE = 2,       /* the histories cannot close the gap (or the death
                                 frontier is incomplete): use a full fence */
} tsr_buffer_reuse_t;

/* "Try before you fence": when can_reuse fails, finds waits, taken from the
 * histories of `semaphores[0..semaphore_count)`, whose frontiers together
 * cover every entry of `death` that `queue_frontier` lacks. Greedy set cover:
 * each step picks the remembered signal covering the most still-missing
 * entries (ties: the earliest value, then the first semaphore), so every wait
 * is at the earliest value that covers what it was picked for and the count
 * is minimal whenever one signal per missing axis is the best cover (in
 * general within a log factor of the minimum). Writes at most `max_waits`
 * waits and their number to *out_wait_count (0 unless AFTER_WAITS). Cold path
 * (locks each semaphore once per greedy step), no allocation. The histories
 * may move on meanwhile: after the waits, import and re-test can_reuse. */
tsr_buffer_reuse_t tsr_buffer_plan_reuse(const tsr_frontier_t *queue_frontier, const tsr_frontier_t *death,
                                         tsr_semaphore_t *const *semaphores, uint32_t semaphore_count,
                                         uint32_t max_waits, tsr_buffer_wait_t *out_waits, uint32_t *out_wait_count);

#ifdef __cplusplus
}
#endif
#endif /* TESSERA_FRONTIER_H */
