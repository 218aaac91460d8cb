/* shim/ptrmap.h: what each allocation of this process was charged (see
 * ptrmap.c). Lock-free; any thread may call any function at once. */
#ifndef TESSERA_SHIM_PTRMAP_H
#define TESSERA_SHIM_PTRMAP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What one allocation holds of a lease, and what it lives and dies with. */
typedef struct {
  uint64_t bytes; /* charged for it (rounded); a pool block: its size, which
                     its pool's account holds, not the block */
  uint32_t tag;   /* which lease (index into the shim's attached leases) */
  uint32_t ctx;   /* the context it ends with (context.c's id, never reused);
                     0: it outlives every context (VMM handles, libraries) */
  uint32_t pool;  /* a stream-ordered block: its pool (pools.c's id); 0: none */
} tsr_shim_ptrmap_val_t;

typedef struct {
  _Atomic uint64_t key;   /* pointer or handle; 0 empty, UINT64_MAX deleted */
  _Atomic uint64_t bytes; /* the value's fields, written before key is published */
  _Atomic uint32_t tag;
  _Atomic uint32_t ctx;
  _Atomic uint32_t pool;
  uint32_t pad;
} tsr_shim_ptrmap_cell_t;

typedef struct {
  tsr_shim_ptrmap_cell_t *cells;
  size_t mask; /* cells - 1 (a power of two) */
} tsr_shim_ptrmap_t;

/* Reserves `cells` (rounded up to a power of two) cells of address space;
 * pages are touched only as they are used. False if mmap fails. */
bool tsr_shim_ptrmap_init(tsr_shim_ptrmap_t *map, size_t cells);
void tsr_shim_ptrmap_free(tsr_shim_ptrmap_t *map);

/* Records `key` -> *val. False for key 0 or UINT64_MAX-1.. or when the
 * table is full. */
bool tsr_shim_ptrmap_put(tsr_shim_ptrmap_t *map, uint64_t key, const tsr_shim_ptrmap_val_t *val);

/* Removes `key`, giving its value in *out_val (may be NULL); false if it is
 * not there (not ours, or already taken by a racing free). */
bool tsr_shim_ptrmap_take(tsr_shim_ptrmap_t *map, uint64_t key, tsr_shim_ptrmap_val_t *out_val);

/* Removes every entry whose ctx is `ctx` (not 0), calling visit(arg, key,
 * val) for each one removed, and returns how many. Reads the whole table:
 * O(cells), meant for a context's end. Safe beside puts and takes: an entry
 * is removed by one CAS, so a racing take and this never both get it. */
size_t tsr_shim_ptrmap_take_ctx(tsr_shim_ptrmap_t *map, uint32_t ctx,
                                void (*visit)(void *arg, uint64_t key, const tsr_shim_ptrmap_val_t *val), void *arg);

#endif
