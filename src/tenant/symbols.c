/* symbols.c: a loaded object's own definition of a function, found without
 * dlsym or dlvsym (tenant.h, tsr_tenant_object_symbol).
 *
 * The shims interpose both dlsym and dlvsym (tenant/dlsym.h), so a shim's
 * own call to either comes back to itself. This reads the object's dynamic
 * symbol table in memory instead, as the dynamic linker left it: the object
 * found by its file name with dl_iterate_phdr, its PT_DYNAMIC, the GNU (or
 * SysV) hash table for the name, and the version definitions for the
 * version. The shims use it for libc's dlvsym; benchmarks for the driver's
 * own entries, which every lookup through a shim now answers with hooks. */
#include <elf.h>
#include <link.h>
#include <stdint.h>
#include <string.h>

#include "tenant/tenant.h"

typedef struct {
  const char *object, *name, *version;
  void *found;
} tsr__want_t;

/* What one object's dynamic section gives. */
typedef struct {
  uintptr_t base;
  const ElfW(Sym) * symtab;
  const char *strtab;
  const uint32_t *gnu, *sysv;
  const ElfW(Half) * versym;
  const ElfW(Verdef) * verdef;
} tsr__dyn_t;

static uint32_t tsr__gnu_hash(const char *s) {
  uint32_t h = 5381;
  for (; *s; s++) h = h * 33 + (unsigned char)*s;
  return h;
}

static uint32_t tsr__sysv_hash(const char *s) {
  uint32_t h = 0;
  for (; *s; s++) {
    h = (h << 4) + (unsigned char)*s;
    uint32_t g = h & 0xf0000000u;
    if (g) h ^= g >> 24;
    h &= ~g;
  }
  return h;
}

/* Whether symbol i has the version asked for: named `version`, or, for
 * NULL, the default one (not hidden; any where the object has none). */
static bool tsr__version_ok(const tsr__dyn_t *d, uint32_t i, const char *version) {
  if (!version) return !d->versym || !(d->versym[i] & 0x8000);
  if (!d->versym || !d->verdef) return false;
  unsigned ndx = d->versym[i] & 0x7fff;
  const ElfW(Verdef) *vd = d->verdef;
  for (unsigned guard = 0; guard < 4096; guard++) {
    if (vd->vd_ndx == ndx) {
      const ElfW(Verdaux) *a = (const void *)((const char *)vd + vd->vd_aux);
      return strcmp(d->strtab + a->vda_name, version) == 0;
    }
    if (vd->vd_next == 0) break;
    vd = (const void *)((const char *)vd + vd->vd_next);
  }
  return false;
}

/* Whether symbol i is the function asked for. */
static bool tsr__is(const tsr__dyn_t *d, uint32_t i, const tsr__want_t *w) {
  const ElfW(Sym) *s = &d->symtab[i];
  return s->st_shndx != SHN_UNDEF && (s->st_info & 0xf) == STT_FUNC && strcmp(d->strtab + s->st_name, w->name) == 0 &&
         tsr__version_ok(d, i, w->version);
}

static void *tsr__lookup(const tsr__dyn_t *d, const tsr__want_t *w) {
  if (d->gnu && d->gnu[0]) {
    uint32_t nbuckets = d->gnu[0], symoffset = d->gnu[1], bloom_words = d->gnu[2];
    const uint32_t *buckets = (const void *)((const ElfW(Addr) *)(d->gnu + 4) + bloom_words);
    const uint32_t *chain = buckets + nbuckets;
    uint32_t h = tsr__gnu_hash(w->name);
    for (uint32_t i = buckets[h % nbuckets]; i >= symoffset; i++) {
      uint32_t c = chain[i - symoffset];
      if ((c | 1) == (h | 1) && tsr__is(d, i, w)) return (void *)(d->base + d->symtab[i].st_value);
      if (c & 1) break; /* the end of the bucket's chain */
    }
    return NULL;
  }
  if (d->sysv && d->sysv[0]) {
    uint32_t nbucket = d->sysv[0], nchain = d->sysv[1];
    const uint32_t *bucket = d->sysv + 2, *chain = bucket + nbucket;
    uint32_t guard = 0;
    for (uint32_t i = bucket[tsr__sysv_hash(w->name) % nbucket]; i != 0 && i < nchain && guard < nchain;
         i = chain[i], guard++)
      if (tsr__is(d, i, w)) return (void *)(d->base + d->symtab[i].st_value);
  }
  return NULL;
}

static int tsr__in_object(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  tsr__want_t *w = arg;
  const char *slash = info->dlpi_name ? strrchr(info->dlpi_name, '/') : NULL;
  const char *base = slash ? slash + 1 : info->dlpi_name;
  if (!base || strcmp(base, w->object) != 0) return 0;
  const ElfW(Dyn) *dyn = NULL;
  for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++)
    if (info->dlpi_phdr[i].p_type == PT_DYNAMIC) dyn = (const void *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
  tsr__dyn_t d = {.base = info->dlpi_addr};
  for (; dyn && dyn->d_tag != DT_NULL; dyn++) {
    /* the dynamic linker has relocated these addresses on x86-64 and
     * AArch64; where it has not, they are offsets from the load address */
    uintptr_t p = dyn->d_un.d_ptr;
    if (p < info->dlpi_addr) p += info->dlpi_addr;
    switch (dyn->d_tag) {
      case DT_SYMTAB: d.symtab = (const void *)p; break;
      case DT_STRTAB: d.strtab = (const void *)p; break;
      case DT_GNU_HASH: d.gnu = (const void *)p; break;
      case DT_HASH: d.sysv = (const void *)p; break;
      case DT_VERSYM: d.versym = (const void *)p; break;
      case DT_VERDEF: d.verdef = (const void *)p; break;
      default: break;
    }
  }
  if (d.symtab && d.strtab) w->found = tsr__lookup(&d, w);
  return 1;
}

void *tsr_tenant_object_symbol(const char *object, const char *name, const char *version) {
  if (!object || !name) return NULL;
  tsr__want_t w = {object, name, version, NULL};
  dl_iterate_phdr(tsr__in_object, &w);
  return w.found;
}
