/* mig/model.c: GPU models as data tables, reconfiguration times, partitions. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "mig/internal.h"

/* ---- the built-in tables ------------------------------------------------ */

/* One row per node: size, mask, parent. Parents come before children. */
typedef struct {
  int size;
  uint32_t mask;
  int parent;
} tsr__node_row_t;

/* A30: {0-3} -> {0,1},{2,3}; each 2-slice node -> two 1-slice leaves. */
static const tsr__node_row_t tsr__a30_tree[] = {
    {4, 0x0F, -1}, {2, 0x03, 0}, {2, 0x0C, 0}, {1, 0x01, 1}, {1, 0x02, 1}, {1, 0x04, 2}, {1, 0x08, 2},
};

/* 7-slice family: {0-6} -> {0-3},{4,5,6}; {0-3} -> the 3-slice instance on
 * slices 0-2, which also blocks slice 3 (mask 0x0F); that one -> {0,1},{2,3};
 * {4,5,6} -> {4,5},{6}; each 2-slice node -> two 1-slice leaves. */
static const tsr__node_row_t tsr__a100_tree[] = {
    {7, 0x7F, -1}, {4, 0x0F, 0}, {3, 0x70, 0}, {3, 0x0F, 1}, {2, 0x30, 2}, {1, 0x40, 2}, {2, 0x03, 3},
    {2, 0x0C, 3},  {1, 0x10, 4}, {1, 0x20, 4}, {1, 0x01, 6}, {1, 0x02, 6}, {1, 0x04, 7}, {1, 0x08, 7},
};

typedef struct {
  const char *name;
  int nslices;
  const tsr__node_row_t *tree;
  int nnodes;
  int nsizes;
  int sizes[TSR_MIG_MAX_SIZES];
  double create_s[TSR_MIG_MAX_SIZES];
  double destroy_s[TSR_MIG_MAX_SIZES];
} tsr__model_row_t;

#define TSR__N(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* The seven-slice tree and its five instance sizes: A100, H100 and after. */
#define TSR__SEVEN_SLICES \
  7, tsr__a100_tree, TSR__N(tsr__a100_tree), 5, { 1, 2, 3, 4, 7 }

/* Reconfiguration times: the paper's Table 1 (also data/far/reconfig_times.csv). */
static const tsr__model_row_t tsr__models[] = {
    {"A30", 4, tsr__a30_tree, TSR__N(tsr__a30_tree), 3, {1, 2, 4}, {0.11, 0.12, 0.13}, {0.10, 0.10, 0.10}},
    {"A100", TSR__SEVEN_SLICES, {0.16, 0.17, 0.20, 0.21, 0.24}, {0.20, 0.20, 0.21, 0.21, 0.22}},
    {"H100", TSR__SEVEN_SLICES, {0.16, 0.21, 0.33, 0.38, 0.42}, {0.21, 0.23, 0.25, 0.26, 0.26}},
};

/* Models whose times are not measured yet: they take a measured model's
 * (the same slice tree) under their own name. */
static const struct { const char *name, *times_of; } tsr__model_aliases[] = {{"H200", "H100"}, {"B200", "H100"}};

static const char *const tsr__model_names[] = {"A30", "A100", "H100", "H200", "B200", NULL};

const char *const *tsr_mig_model_names(void) { return tsr__model_names; }

tsr_status_t tsr_mig_model_get(const char *name, tsr_mig_model_t *out_model) {
  memset(out_model, 0, sizeof(*out_model));
  if (!name) return tsr_status_make(TSR_INVALID_ARGUMENT, "no GPU model given");
  const char *shown = NULL; /* the model's own name, as the table spells it */
  for (int a = 0; a < TSR__N(tsr__model_aliases); a++)
    if (strcasecmp(tsr__model_aliases[a].name, name) == 0) {
      shown = tsr__model_aliases[a].name;
      name = tsr__model_aliases[a].times_of;
    }
  for (int m = 0; m < TSR__N(tsr__models); m++) {
    const tsr__model_row_t *r = &tsr__models[m];
    if (strcasecmp(r->name, name) != 0) continue;
    snprintf(out_model->name, sizeof(out_model->name), "%s", shown ? shown : r->name);
    out_model->nslices = r->nslices;
    out_model->nsizes = r->nsizes;
    for (int k = 0; k < r->nsizes; k++) {
      out_model->sizes[k] = r->sizes[k];
      out_model->create_s[k] = r->create_s[k];
      out_model->destroy_s[k] = r->destroy_s[k];
    }
    out_model->nnodes = r->nnodes;
    for (int i = 0; i < r->nnodes; i++) {
      tsr_mig_node_t *n = &out_model->nodes[i];
      n->size = r->tree[i].size;
      n->mask = r->tree[i].mask;
      n->parent = r->tree[i].parent;
      n->first_slice = __builtin_ctz(n->mask);
    }
    return NULL;
  }
  return tsr_status_make(TSR_INVALID_ARGUMENT, "unknown GPU model '%s' (known: A30, A100, H100, H200, B200)", name);
}

int tsr_mig_model_size_index(const tsr_mig_model_t *model, int size) {
  for (int k = 0; k < model->nsizes; k++)
    if (model->sizes[k] == size) return k;
  return -1;
}

bool tsr_model_known(const char *name) {
  for (int m = 0; tsr__model_names[m]; m++)
    if (strcasecmp(tsr__model_names[m], name) == 0) return true;
  return false;
}

/* ---- reconfiguration times from CSV ------------------------------------- */

tsr_status_t tsr_mig_model_load_reconfig_csv(tsr_mig_model_t *model, const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return tsr_status_from_errno(errno, "%s", path);
  char *line = NULL; /* getline: a line of any length is read whole */
  size_t line_cap = 0;
  int lineno = 0;
  bool header = false;
  double create[TSR_MIG_MAX_SIZES], destroy[TSR_MIG_MAX_SIZES];
  bool seen_own[TSR_MIG_MAX_SIZES] = {0}, seen_h100[TSR_MIG_MAX_SIZES] = {0};
  double create_h[TSR_MIG_MAX_SIZES], destroy_h[TSR_MIG_MAX_SIZES];
  tsr_status_t st = NULL;
  while (getline(&line, &line_cap, f) >= 0) {
    lineno++;
    if (tsr_csv_comment(line)) continue;
    char *fields[8];
    int nf = 0;
    st = tsr_csv_split(line, fields, 8, &nf);
    if (st) {
      st = tsr_status_annotate(st, "%s:%d", path, lineno);
      break;
    }
    if (nf == 0 || (nf == 1 && fields[0][0] == 0)) continue;
    if (!header) {
      if (nf != 4 || strcasecmp(fields[0], "gpu") || strcasecmp(fields[1], "size") ||
          strcasecmp(fields[2], "create_s") || strcasecmp(fields[3], "destroy_s")) {
        st =
            tsr_status_make(TSR_INVALID_ARGUMENT, "%s:%d: expected header 'gpu,size,create_s,destroy_s'", path, lineno);
        break;
      }
      header = true;
      continue;
    }
    if ((st = tsr_csv_gpu_row(path, lineno, fields, nf))) break;
    double size_d, c, d;
    if (!tsr_parse_double(fields[1], &size_d) || size_d != floor(size_d) || size_d < 1 ||
        size_d > 1024) { /* no GPU has more slices; and (int) of more is undefined */
      st = tsr_status_make(TSR_INVALID_ARGUMENT, "%s:%d: bad size '%s'", path, lineno, fields[1]);
      break;
    }
    if (!tsr_parse_double(fields[2], &c) || !tsr_parse_double(fields[3], &d) || c < 0 || d < 0 || !isfinite(c) ||
        !isfinite(d)) {
      st = tsr_status_make(TSR_INVALID_ARGUMENT, "%s:%d: create/destroy times must be finite seconds >= 0", path,
                           lineno);
      break;
    }
    bool own = strcasecmp(fields[0], model->name) == 0;
    bool h100 = strcasecmp(fields[0], "H100") == 0;
    if (!own && !h100) continue;
    int k = tsr_mig_model_size_index(model, (int)size_d);
    if (k < 0) {
      st = tsr_status_make(TSR_INVALID_ARGUMENT, "%s:%d: %s has no instance size %d", path, lineno, fields[0],
                           (int)size_d);
      break;
    }
    if (own) {
      seen_own[k] = true;
      create[k] = c;
      destroy[k] = d;
    }
    if (h100) {
      seen_h100[k] = true;
      create_h[k] = c;
      destroy_h[k] = d;
    }
  }
  int read_errno = feof(f) ? 0 : errno; /* getline stopped before the end: ENOMEM or EIO */
  free(line);
  fclose(f);
  if (st) return st;
  if (read_errno) return tsr_status_from_errno(read_errno, "%s:%d", path, lineno + 1);
  if (!header)
    return tsr_status_make(TSR_INVALID_ARGUMENT, "%s:%d: the file ends before its header 'gpu,size,create_s,destroy_s'",
                           path, lineno + 1);
  bool any_own = false;
  for (int k = 0; k < model->nsizes; k++) any_own |= seen_own[k];
  bool borrow = !any_own && (strcasecmp(model->name, "H200") == 0 || strcasecmp(model->name, "B200") == 0);
  for (int k = 0; k < model->nsizes; k++) {
    if (borrow && seen_h100[k]) {
      model->create_s[k] = create_h[k];
      model->destroy_s[k] = destroy_h[k];
    } else if (seen_own[k]) {
      model->create_s[k] = create[k];
      model->destroy_s[k] = destroy[k];
    }
  }
  return NULL;
}

/* ---- partitions --------------------------------------------------------- */

/* All ways to cover node `i`'s slices with disjoint nodes of its subtree. */
static int tsr__covers(const tsr_mig_model_t *m, int i, uint32_t *out, int cap) {
  int n = 0;
  if (n < cap) out[n] = 1u << i;
  n++;
  /* children of i */
  int kids[TSR_MIG_MAX_NODES], nk = 0;
  uint32_t kid_mask = 0;
  for (int j = 0; j < m->nnodes; j++)
    if (m->nodes[j].parent == i) {
      kids[nk++] = j;
      kid_mask |= m->nodes[j].mask;
    }
  if (nk == 0 || kid_mask != m->nodes[i].mask) return n;
  /* cartesian product of the children's covers */
  uint32_t acc[512];
  int nacc = 1;
  acc[0] = 0;
  for (int c = 0; c < nk; c++) {
    uint32_t opts[512];
    int no = tsr__covers(m, kids[c], opts, 512);
    if (no > 512) no = 512;
    uint32_t next[512];
    int nn = 0;
    for (int a = 0; a < nacc; a++)
      for (int o = 0; o < no; o++)
        if (nn < 512) next[nn++] = acc[a] | opts[o];
    memcpy(acc, next, sizeof(uint32_t) * (size_t)nn);
    nacc = nn;
  }
  for (int a = 0; a < nacc; a++) {
    if (n < cap) out[n] = acc[a];
    n++;
  }
  return n;
}

int tsr_mig_model_partitions(const tsr_mig_model_t *model, uint32_t *out_sets, int cap) {
  if (model->nnodes == 0) return 0;
  return tsr__covers(model, 0, out_sets, cap);
}

tsr_status_t tsr_mig_model_parse_partition(const tsr_mig_model_t *model, const char *text, uint32_t *out_set) {
  *out_set = 0;
  uint32_t used = 0, set = 0;
  const char *p = text;
  while (*p) {
    char *end;
    long size = strtol(p, &end, 10);
    if (end == p || size <= 0)
      return tsr_status_make(TSR_INVALID_ARGUMENT, "bad partition '%s': expected sizes like 4,2,1", text);
    int slice = 0;
    while (slice < model->nslices && (used >> slice & 1u)) slice++;
    int found = -1;
    for (int i = 0; i < model->nnodes; i++)
      if (model->nodes[i].size == size && model->nodes[i].first_slice == slice && !(model->nodes[i].mask & used)) {
        found = i;
        break;
      }
    if (found < 0)
      return tsr_status_make(TSR_INVALID_ARGUMENT,
                             "partition '%s' is not valid on %s: no %ld-slice instance at slice %d", text, model->name,
                             size, slice);
    used |= model->nodes[found].mask;
    set |= 1u << found;
    p = end;
    if (*p == ',')
      p++;
    else if (*p)
      return tsr_status_make(TSR_INVALID_ARGUMENT, "bad partition '%s': expected sizes like 4,2,1", text);
  }
  uint32_t full = (model->nslices >= 32) ? 0xFFFFFFFFu : ((1u << model->nslices) - 1);
  if (used != full)
    return tsr_status_make(TSR_INVALID_ARGUMENT, "partition '%s' does not cover all %d slices of %s", text,
                           model->nslices, model->name);
  *out_set = set;
  return NULL;
}

void tsr_mig_model_format_partition(const tsr_mig_model_t *model, uint32_t set, char *buf, size_t cap) {
  size_t len = 0;
  buf[0] = 0;
  for (int s = 0; s < model->nslices; s++)
    for (int i = 0; i < model->nnodes; i++)
      if ((set >> i & 1u) && model->nodes[i].first_slice == s) {
        int w = snprintf(buf + len, cap > len ? cap - len : 0, "%s%d", len ? "," : "", model->nodes[i].size);
        if (w > 0) len += (size_t)w;
        if (len >= cap) {
          buf[cap - 1] = 0;
          return;
        }
      }
}
