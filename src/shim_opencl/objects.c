/* objects.c: what each OpenCL object was charged, and the references the
 * program holds on it.
 *
 * OpenCL frees a memory object when its reference count reaches zero, and
 * a sub-buffer (or an image made over a buffer) holds a reference on its
 * parent, so a parent's memory lives until its last child is released too.
 * The table counts the program's references the same way (create 1, each
 * clRetainMemObject +1, each clReleaseMemObject -1, a child +1 on its
 * parent) and credits an object when its count reaches zero: at once, not
 * when the implementation gets round to calling a destructor callback
 * (NVIDIA's come long after the release, measured on the H100).
 *
 * One open-addressing table under one lock: the calls it serves cost the
 * implementation microseconds, and the lock is held for a few compares. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "shim_opencl/shim.h"

typedef struct {
  const void *key; /* NULL: empty; TSR__GONE: a removed entry */
  const void *parent;
  uint64_t bytes;
  uint32_t refs;
  int8_t kind;
  int8_t lease; /* -1: charged to nothing */
} tsr__entry_t;

#define TSR__GONE ((const void *)1)

static pthread_mutex_t tsr__lock = PTHREAD_MUTEX_INITIALIZER;
static tsr__entry_t *tsr__slots;
static size_t tsr__cap, tsr__used; /* used: live entries and tombstones */

static size_t tsr__hash(tsr_ocl_kind_t kind, const void *key) {
  uint64_t h = ((uint64_t)(uintptr_t)key ^ (uint64_t)kind) * UINT64_C(0x9e3779b97f4a7c15);
  return (size_t)(h >> 20);
}

static tsr__entry_t *tsr__find(tsr_ocl_kind_t kind, const void *key) {
  if (!tsr__cap) return NULL;
  for (size_t i = tsr__hash(kind, key) & (tsr__cap - 1), n = 0; n < tsr__cap; i = (i + 1) & (tsr__cap - 1), n++) {
    tsr__entry_t *e = &tsr__slots[i];
    if (!e->key) return NULL;
    if (e->key == key && e->kind == (int8_t)kind) return e;
  }
  return NULL;
}

static void tsr__place(tsr__entry_t *slots, size_t cap, const tsr__entry_t *e) {
  size_t i = tsr__hash((tsr_ocl_kind_t)e->kind, e->key) & (cap - 1);
  while (slots[i].key && slots[i].key != TSR__GONE) i = (i + 1) & (cap - 1);
  slots[i] = *e;
}

/* Room for one more entry: grows (and drops tombstones) past half full. */
static bool tsr__room(void) {
  if (tsr__cap && (tsr__used + 1) * 2 <= tsr__cap) return true;
  size_t live = 0;
  for (size_t i = 0; i < tsr__cap; i++)
    if (tsr__slots[i].key && tsr__slots[i].key != TSR__GONE) live++;
  size_t cap = tsr__cap ? tsr__cap : 256;
  while ((live + 1) * 4 > cap) cap *= 2;
  tsr__entry_t *slots = calloc(cap, sizeof(*slots));
  if (!slots) return false;
  for (size_t i = 0; i < tsr__cap; i++)
    if (tsr__slots[i].key && tsr__slots[i].key != TSR__GONE) tsr__place(slots, cap, &tsr__slots[i]);
  free(tsr__slots);
  tsr__slots = slots;
  tsr__cap = cap;
  tsr__used = live;
  return true;
}

bool tsr_ocl_objects_add(tsr_ocl_kind_t kind, const void *key, uint64_t bytes, int lease, const void *parent) {
  pthread_mutex_lock(&tsr__lock);
  if (parent && !bytes && !tsr__find(TSR_OCL_MEM, parent)) { /* a child of nothing charged */
    pthread_mutex_unlock(&tsr__lock);
    return true;
  }
  tsr__entry_t *old = tsr__find(kind, key);
  if (old) old->key = TSR__GONE; /* a stale record of an address the implementation reused */
  bool ok = tsr__room();
  if (ok) {
    tsr__entry_t e = {.key = key,
                      .parent = parent,
                      .bytes = bytes,
                      .refs = 1,
                      .kind = (int8_t)kind,
                      .lease = (int8_t)(lease < 0 ? -1 : lease)};
    tsr__entry_t *p = parent ? tsr__find(TSR_OCL_MEM, parent) : NULL;
    if (!p)
      e.parent = NULL; /* a parent the shim never charged */
    else if (p->refs < UINT32_MAX)
      p->refs++;
    tsr__place(tsr__slots, tsr__cap, &e);
    tsr__used++;
  }
  pthread_mutex_unlock(&tsr__lock);
  return ok;
}

void tsr_ocl_objects_retain(tsr_ocl_kind_t kind, const void *key) {
  pthread_mutex_lock(&tsr__lock);
  tsr__entry_t *e = tsr__find(kind, key);
  if (e && e->refs < UINT32_MAX) e->refs++;
  pthread_mutex_unlock(&tsr__lock);
}

bool tsr_ocl_objects_drop(tsr_ocl_kind_t kind, const void *key, tsr_ocl_drop_t *out) {
  memset(out, 0, sizeof(*out));
  pthread_mutex_lock(&tsr__lock);
  tsr__entry_t *e = tsr__find(kind, key);
  if (e) {
    out->bytes = e->bytes;
    out->lease = e->lease;
    out->parent = e->parent;
    if (--e->refs == 0) {
      out->last = true;
      e->key = TSR__GONE; /* gone before the implementation can reuse the address */
    }
  }
  pthread_mutex_unlock(&tsr__lock);
  return e != NULL;
}

/* A child's last release: the reference it held on its parent goes too.
 * Called with the lock held. True when that was the parent's last
 * reference: then *out has what it was charged and its own parent. */
static bool tsr__drop_parent(const void *parent, tsr_ocl_drop_t *out) {
  tsr__entry_t *p = tsr__find(TSR_OCL_MEM, parent);
  if (!p || --p->refs > 0) return false;
  p->key = TSR__GONE;
  *out = (tsr_ocl_drop_t){.last = true, .bytes = p->bytes, .lease = p->lease, .parent = p->parent};
  return true;
}

void tsr_ocl_objects_settle(tsr_ocl_kind_t kind, const void *key, const tsr_ocl_drop_t *d, bool released) {
  if (!released) { /* the implementation kept it: so does the table */
    pthread_mutex_lock(&tsr__lock);
    tsr__entry_t *e = d->last ? NULL : tsr__find(kind, key);
    if (e)
      e->refs++;
    else if (d->last && tsr__room()) {
      tsr__entry_t back = {.key = key,
                           .parent = d->parent,
                           .bytes = d->bytes,
                           .refs = 1,
                           .kind = (int8_t)kind,
                           .lease = (int8_t)d->lease};
      tsr__place(tsr__slots, tsr__cap, &back);
      tsr__used++;
    }
    pthread_mutex_unlock(&tsr__lock);
    return;
  }
  if (!d->last) return;
  tsr_ocl_credit(d->lease, d->bytes);
  /* up the chain of parents: an image over a sub-buffer over a buffer */
  tsr_ocl_drop_t up = *d;
  while (up.parent) {
    pthread_mutex_lock(&tsr__lock);
    bool freed = tsr__drop_parent(up.parent, &up);
    pthread_mutex_unlock(&tsr__lock);
    if (!freed) break;
    tsr_ocl_credit(up.lease, up.bytes);
  }
}

void tsr_ocl_objects_reset(void) {
  pthread_mutex_init(&tsr__lock, NULL);
  free(tsr__slots);
  tsr__slots = NULL;
  tsr__cap = tsr__used = 0;
}
