/* slurm_gpus.c: a job's GPUs as Slurm gives them (see slurm_gpus.h). */
#include "slurm_gpus.h"

#include <ctype.h>
#include <inttypes.h>
#include <slurm/slurm.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/time.h"
#include "base/units.h"

/* ---- at submission -------------------------------------------------------- */

/* A count as Slurm reads one: digits and an optional k, m or g (times
 * 1024 each). False when it is not one, or is past UINT32_MAX. */
static bool tsr__count(const char *s, size_t len, uint64_t *out) {
  uint64_t mult = 1;
  if (len > 1 && strchr("kKmMgG", s[len - 1])) {
    char u = (char)tolower((unsigned char)s[len - 1]);
    mult = u == 'k' ? 1024ull : u == 'm' ? 1048576ull : 1073741824ull;
    len--;
  }
  if (len == 0 || len > 10) return false;
  uint64_t v = 0;
  for (size_t i = 0; i < len; i++) {
    if (!isdigit((unsigned char)s[i])) return false;
    v = v * 10 + (uint64_t)(s[i] - '0');
  }
  if (v > UINT32_MAX / mult) return false;
  *out = v * mult;
  return true;
}

/* What a GRES name is to tessera: one test for every place a gpu or a
 * shard is told apart from other GRES (--gres, slurmctld's TRES,
 * gres.conf's Name=). Names are case-sensitive, as Slurm's are. */
static unsigned tsr__gres_name_asks(const char *name, size_t len) {
  if (len == 3 && strncmp(name, "gpu", 3) == 0) return TSR_SLURM_ASKS_GPU;
  if (len == 5 && strncmp(name, "shard", 5) == 0) return TSR_SLURM_ASKS_SHARD;
  return 0;
}

/* What the elements of `spec` (separated by ',', or ';' as slurm.h says
 * slurmctld's TRES lists are) ask for, each read by `each`, together. */
static unsigned tsr__each_element(const char *spec, unsigned (*each)(const char *, size_t)) {
  unsigned asks = 0;
  if (!spec) return 0;
  for (const char *p = spec;;) {
    size_t len = strcspn(p, ",;");
    if (len) asks |= each(p, len);
    if (!p[len]) return asks;
    p += len + 1;
  }
}

/* One --gpus element: [type:]count. */
static unsigned tsr__gpus_element_asks(const char *e, size_t len) {
  const char *last = e + len;
  while (last > e && last[-1] != ':') last--;
  uint64_t n = 0;
  if (tsr__count(last, (size_t)(e + len - last), &n)) return n > 0 ? TSR_SLURM_ASKS_GPU : 0;
  return TSR_SLURM_ASKS_GPU; /* not a count: Slurm refuses it, not this check */
}

/* One GRES: [gres:|gres/]name[:type][:count]. What follows the name reads
 * as a --gpus element ("gpu:a100": one of that type), and counts as the
 * name's kind. */
static unsigned tsr__gres_element_asks(const char *e, size_t len) {
  if (len > 5 && (strncasecmp(e, "gres:", 5) == 0 || strncasecmp(e, "gres/", 5) == 0)) e += 5, len -= 5;
  const char *colon = memchr(e, ':', len);
  unsigned kind = tsr__gres_name_asks(e, colon ? (size_t)(colon - e) : len);
  if (!kind || !colon) return kind; /* "gpu": one */
  return tsr__gpus_element_asks(colon + 1, (size_t)(e + len - colon - 1)) ? kind : 0;
}

unsigned tsr_slurm_gres_spec_asks(const char *spec) { return tsr__each_element(spec, tsr__gres_element_asks); }

unsigned tsr_slurm_gpus_spec_asks(const char *spec) { return tsr__each_element(spec, tsr__gpus_element_asks); }

/* The long options that allocate GPUs, and how their values read. */
static const struct {
  const char *name;
  bool gres; /* --gres's syntax, else --gpus's */
} tsr__gpu_options[] = {
    {"gres", true}, {"gpus", false}, {"gpus-per-node", false}, {"gpus-per-socket", false}, {"gpus-per-task", false},
};

unsigned tsr_slurm_words_ask(int count, char *const words[]) {
  unsigned asks = 0;
  for (int i = 0; i < count; i++) {
    const char *w = words[i];
    if (!w) continue;
    if (strcmp(w, "--") == 0) break;
    const char *value = NULL;
    bool gres = false, matched = false;
    if (strncmp(w, "--", 2) == 0) {
      const char *name = w + 2;
      const char *eq = strchr(name, '=');
      size_t len = eq ? (size_t)(eq - name) : strlen(name);
      /* getopt_long takes a prefix of a long option; one that is a prefix
       * of several is an error srun reports itself, so any prefix of three
       * letters or more counts */
      for (size_t k = 0; len >= 3 && k < sizeof(tsr__gpu_options) / sizeof(tsr__gpu_options[0]); k++)
        if (len <= strlen(tsr__gpu_options[k].name) && strncmp(name, tsr__gpu_options[k].name, len) == 0) {
          matched = true;
          gres = tsr__gpu_options[k].gres;
          /* the exact name decides between --gres and --gres-flags-like prefixes */
          if (len == strlen(tsr__gpu_options[k].name)) break;
        }
      if (!matched) continue;
      value = eq ? eq + 1 : (i + 1 < count ? words[i + 1] : NULL);
    } else if (strncmp(w, "-G", 2) == 0) {
      matched = true;
      value = w[2] ? w + 2 : (i + 1 < count ? words[i + 1] : NULL);
    }
    if (!matched || !value) continue;
    asks |= gres ? tsr_slurm_gres_spec_asks(value) : tsr_slurm_gpus_spec_asks(value);
  }
  return asks;
}

/* Splits one #SBATCH line's options into words (whitespace, with '...' and
 * "..." quoting, as sbatch splits them) and looks at them. */
static unsigned tsr__sbatch_line_asks(const char *s, size_t len) {
  char buf[4096] = {0};
  char *words[128];
  int n = 0;
  size_t o = 0;
  for (size_t i = 0; i < len && n < 128;) {
    while (i < len && isspace((unsigned char)s[i])) i++;
    if (i >= len || s[i] == '#') break; /* a comment after the options */
    words[n++] = buf + o;
    char quote = 0;
    for (; i < len && (quote || !isspace((unsigned char)s[i])); i++) {
      if (!quote && (s[i] == '"' || s[i] == '\''))
        quote = s[i];
      else if (quote && s[i] == quote)
        quote = 0;
      else if (o + 1 < sizeof(buf))
        buf[o++] = s[i];
    }
    buf[o++] = '\0';             /* the copy above leaves room for it */
    if (o >= sizeof(buf)) break; /* full: the words after are not looked at */
  }
  return tsr_slurm_words_ask(n, words);
}

unsigned tsr_slurm_script_asks(const char *text, size_t len) {
  unsigned asks = 0;
  size_t i = 0;
  while (i < len) {
    const char *line = text + i;
    const char *nl = memchr(line, '\n', len - i);
    size_t n = nl ? (size_t)(nl - line) : len - i;
    i += n + (nl ? 1 : 0);
    size_t k = 0;
    while (k < n && isspace((unsigned char)line[k])) k++;
    if (k == n) continue;            /* blank */
    if (line[k] != '#') return asks; /* the first command: sbatch reads no further */
    if (n - k >= 7 && strncmp(line + k, "#SBATCH", 7) == 0) asks |= tsr__sbatch_line_asks(line + k + 7, n - k - 7);
  }
  return asks;
}

unsigned tsr_slurm_env_asks(tsr_slurm_command_t command, const char *(*get)(const char *name)) {
  static const char *const prefix[] = {"SLURM", "SBATCH", "SALLOC"};
  static const char *const gpus[] = {"GPUS", "GPUS_PER_NODE", "GPUS_PER_SOCKET", "GPUS_PER_TASK"};
  if ((unsigned)command > TSR_SLURM_SALLOC) return 0;
  char name[64];
  snprintf(name, sizeof(name), "%s_GRES", prefix[command]);
  const char *v = get(name);
  unsigned asks = v && *v ? tsr_slurm_gres_spec_asks(v) : 0;
  for (size_t k = 0; k < sizeof(gpus) / sizeof(gpus[0]); k++) {
    snprintf(name, sizeof(name), "%s_%s", prefix[command], gpus[k]);
    v = get(name);
    if (v && *v) asks |= tsr_slurm_gpus_spec_asks(v);
  }
  return asks;
}

/* One TRES: gres/gpu=1, gres/gpu:a100=1, gres/shard=2. */
static unsigned tsr__tres_element_asks(const char *e, size_t len) {
  const char *eq = memchr(e, '=', len);
  if (!eq || (size_t)(eq - e) < 8 || strncmp(e, "gres/", 5) != 0) return 0;
  const char *name = e + 5;
  size_t nlen = (size_t)(eq - name);
  const char *colon = memchr(name, ':', nlen);
  if (colon) nlen = (size_t)(colon - name);
  uint64_t n = 0;
  unsigned kind = tsr__gres_name_asks(name, nlen);
  return kind && tsr__count(eq + 1, (size_t)(e + len - eq - 1), &n) && n > 0 ? kind : 0;
}

unsigned tsr_slurm_tres_asks(const char *tres) { return tsr__each_element(tres, tsr__tres_element_asks); }

/* ---- gres.conf ------------------------------------------------------------------ */

/* One key=value of a gres.conf line (both within `line`'s copy). */
typedef struct {
  const char *key, *value;
} tsr__kv_t;

#define TSR__KV_MAX 32

/* Splits a logical line (comments gone) into key=value words. False, with
 * `why` set, for a word without '=' or too many words. */
static bool tsr__split_line(char *line, tsr__kv_t *kv, size_t *n, char *why, size_t cap) {
  *n = 0;
  for (char *p = line;;) {
    while (*p && isspace((unsigned char)*p)) p++;
    if (!*p) return true;
    if (*n == TSR__KV_MAX) {
      snprintf(why, cap, "more than %d key=value words on a line", TSR__KV_MAX);
      return false;
    }
    char *word = p;
    char *eq = NULL;
    char quote = 0;
    char *o = p;
    for (; *p && (quote || !isspace((unsigned char)*p)); p++) {
      if (!quote && *p == '"')
        quote = '"';
      else if (quote && *p == '"')
        quote = 0;
      else {
        if (!eq && !quote && *p == '=') eq = o;
        *o++ = *p;
      }
    }
    bool end = !*p;
    *o = '\0';
    if (!eq || eq == word) {
      snprintf(why, cap, "'%.40s' is not key=value", word);
      return false;
    }
    *eq = '\0';
    kv[*n].key = word;
    kv[*n].value = eq + 1;
    (*n)++;
    if (end) return true;
    p++;
  }
}

static const char *tsr__get(const tsr__kv_t *kv, size_t n, const char *key) {
  for (size_t i = 0; i < n; i++)
    if (strcasecmp(kv[i].key, key) == 0) return kv[i].value;
  return NULL;
}

/* A shard record, kept until the GPUs are all known. */
typedef struct {
  char file[TSR_SLURM_FILE_MAX]; /* as a GPU's; "" for a record without File= */
  uint64_t count;
} tsr__shard_rec_t;

#define TSR__SHARD_RECS_MAX 64

typedef struct {
  const char *name; /* the file, for messages */
  const char *node;
  tsr_slurm_gpus_t gpus;
  tsr__shard_rec_t shards[TSR__SHARD_RECS_MAX];
  size_t nshards;
  char type[64]; /* the GPUs' Type= ("" none yet) */
  bool typed;    /* a gpu record was seen, and type says its Type */
  /* AutoDetect= of the lines without NodeName= and of the node's (which
   * wins), each if given: other than off, for this node, is refused */
  bool has_global_ad, has_node_ad;
  bool global_ad, node_ad;
} tsr__gres_parse_t;

static bool tsr__autodetect_on(const char *v) { return strcasecmp(v, "off") != 0; }

/* The number that ends `file` ("/dev/nvidia12": 12); false when none. */
static bool tsr__dev_num(const char *file, uint32_t *out) {
  size_t len = strlen(file), i = len;
  while (i > 0 && isdigit((unsigned char)file[i - 1])) i--;
  if (i == len || len - i > 7) return false;
  *out = (uint32_t)strtoul(file + i, NULL, 10);
  return true;
}

/* One Name=gpu record: its files become the next GPUs. */
TSR_MUST_USE static tsr_status_t tsr__gpu_record(tsr__gres_parse_t *p, const tsr__kv_t *kv, size_t n, int line) {
  if (tsr__get(kv, n, "MultipleFiles"))
    return tsr_status_make(TSR_FAILED_PRECONDITION,
                           "%s:%d: a gpu with MultipleFiles= is one GPU of several files; tessera "
                           "cannot tell which /dev/nvidiaN it is",
                           p->name, line);
  const char *type = tsr__get(kv, n, "Type");
  if (!type) type = "";
  if (!p->typed) {
    snprintf(p->type, sizeof(p->type), "%s", type);
    p->typed = true;
  } else if (strcmp(p->type, type) != 0) {
    return tsr_status_make(TSR_FAILED_PRECONDITION,
                           "%s:%d: GPUs of two types ('%s', '%s'): Slurm then numbers them in "
                           "slurm.conf's Gres= order, which tessera does not follow",
                           p->name, line, p->type, type);
  }
  const char *file = tsr__get(kv, n, "File");
  if (!file) file = tsr__get(kv, n, "Files");
  if (!file) return NULL; /* a count only: Slurm gives no device index to it */
  hostlist_t hl = slurm_hostlist_create(file);
  if (!hl) return tsr_status_make(TSR_INVALID_ARGUMENT, "%s:%d: File=%s does not read", p->name, line, file);
  tsr_status_t st = NULL;
  char *one;
  while (!st && (one = slurm_hostlist_shift(hl)) != NULL) {
    tsr_slurm_gpus_t *g = &p->gpus;
    uint32_t num = 0;
    if (g->count == TSR_SLURM_GPUS_MAX)
      st = tsr_status_make(TSR_FAILED_PRECONDITION, "%s:%d: more than %d GPUs", p->name, line, TSR_SLURM_GPUS_MAX);
    else if (strlen(one) >= TSR_SLURM_FILE_MAX)
      st = tsr_status_make(TSR_INVALID_ARGUMENT, "%s:%d: a File= path is over %d bytes", p->name, line,
                           TSR_SLURM_FILE_MAX - 1);
    else if (!tsr__dev_num(one, &num))
      st = tsr_status_make(TSR_FAILED_PRECONDITION,
                           "%s:%d: gpu File=%s does not end in its device number (/dev/nvidiaN)", p->name, line, one);
    for (size_t k = 0; !st && k < g->count; k++)
      if (g->gpu[k].dev_num == num)
        st = tsr_status_make(TSR_FAILED_PRECONDITION,
                             "%s:%d: gpu File=%s has the number of %s: which GPU is which cannot be told", p->name,
                             line, one, g->gpu[k].file);
    if (!st) {
      snprintf(g->gpu[g->count].file, TSR_SLURM_FILE_MAX, "%s", one);
      g->gpu[g->count].dev_num = num;
      g->gpu[g->count].shards = 0;
      g->count++;
    }
    free(one);
  }
  slurm_hostlist_destroy(hl);
  return st;
}

/* One Name=shard record: its Count, per file or for all GPUs. */
TSR_MUST_USE static tsr_status_t tsr__shard_record(tsr__gres_parse_t *p, const tsr__kv_t *kv, size_t n, int line) {
  const char *c = tsr__get(kv, n, "Count");
  uint64_t count = 1;
  if (c && !tsr__count(c, strlen(c), &count))
    return tsr_status_make(TSR_INVALID_ARGUMENT, "%s:%d: shard Count=%s is not a count", p->name, line, c);
  const char *file = tsr__get(kv, n, "File");
  if (!file) file = tsr__get(kv, n, "Files");
  if (!file) {
    if (p->nshards == TSR__SHARD_RECS_MAX)
      return tsr_status_make(TSR_FAILED_PRECONDITION, "%s:%d: too many shard records", p->name, line);
    p->shards[p->nshards].file[0] = '\0';
    p->shards[p->nshards++].count = count;
    return NULL;
  }
  hostlist_t hl = slurm_hostlist_create(file);
  if (!hl) return tsr_status_make(TSR_INVALID_ARGUMENT, "%s:%d: File=%s does not read", p->name, line, file);
  int files = slurm_hostlist_count(hl);
  tsr_status_t st = NULL;
  char *one;
  while ((one = slurm_hostlist_shift(hl)) != NULL) {
    if (!st && p->nshards == TSR__SHARD_RECS_MAX)
      st = tsr_status_make(TSR_FAILED_PRECONDITION, "%s:%d: too many shard records", p->name, line);
    else if (!st && strlen(one) >= TSR_SLURM_FILE_MAX) /* cut, it would match no GPU: no shards */
      st = tsr_status_make(TSR_INVALID_ARGUMENT, "%s:%d: a File= path is over %d bytes", p->name, line,
                           TSR_SLURM_FILE_MAX - 1);
    if (!st) {
      snprintf(p->shards[p->nshards].file, sizeof(p->shards[0].file), "%s", one);
      p->shards[p->nshards++].count = files > 0 ? count / (uint64_t)files : 0;
    }
    free(one);
  }
  slurm_hostlist_destroy(hl);
  return st;
}

/* Does NodeName=`value` name the node? */
static bool tsr__names_node(const char *value, const char *node) {
  hostlist_t hl = slurm_hostlist_create(value);
  if (!hl) return false;
  bool found = node && slurm_hostlist_find(hl, node) >= 0;
  slurm_hostlist_destroy(hl);
  return found;
}

/* One logical line; `pass` 0 reads the lines without NodeName=, 1 those
 * with (slurmd lists those after these). */
TSR_MUST_USE static tsr_status_t tsr__gres_line(tsr__gres_parse_t *p, char *text, int line, int pass) {
  tsr__kv_t kv[TSR__KV_MAX];
  size_t n = 0;
  char why[160];
  const char *t = text;
  while (isspace((unsigned char)*t)) t++;
  if (strncasecmp(t, "include", 7) == 0 && (isspace((unsigned char)t[7]) || t[7] == '='))
    return tsr_status_make(TSR_FAILED_PRECONDITION, "%s:%d: Include is not followed by tessera", p->name, line);
  if (!tsr__split_line(text, kv, &n, why, sizeof(why)))
    return tsr_status_make(TSR_INVALID_ARGUMENT, "%s:%d: %s", p->name, line, why);
  if (n == 0) return NULL;
  size_t at = 0;
  bool node_line = false;
  if (strcasecmp(kv[0].key, "NodeName") == 0) {
    if (pass != 1 || !tsr__names_node(kv[0].value, p->node)) return NULL;
    node_line = true;
    at = 1;
  } else if (pass != 0) {
    return NULL;
  }
  const char *ad = tsr__get(kv + at, n - at, "AutoDetect");
  if (ad && node_line)
    p->has_node_ad = true, p->node_ad = tsr__autodetect_on(ad);
  else if (ad)
    p->has_global_ad = true, p->global_ad = tsr__autodetect_on(ad);
  const char *name = tsr__get(kv + at, n - at, "Name");
  switch (name ? tsr__gres_name_asks(name, strlen(name)) : 0) {
    case TSR_SLURM_ASKS_GPU: return tsr__gpu_record(p, kv + at, n - at, line);
    case TSR_SLURM_ASKS_SHARD: return tsr__shard_record(p, kv + at, n - at, line);
    default: return NULL; /* another GRES */
  }
}

/* Each logical line of `text` in turn: comments cut, '\'-newline joined. */
TSR_MUST_USE static tsr_status_t tsr__gres_lines(tsr__gres_parse_t *p, const char *text, int pass) {
  size_t cap = strlen(text) + 1;
  char *buf = calloc(cap, 1);
  if (!buf) return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory reading %s", p->name);
  tsr_status_t st = NULL;
  int line = 1;
  for (const char *s = text; !st && *s;) {
    size_t o = 0;
    int first = line;
    bool comment = false;
    for (; *s; s++) {
      if (*s == '\\' && s[1] == '\n') { /* continued */
        s++;
        line++;
        continue;
      }
      if (*s == '\n') {
        s++;
        line++;
        break;
      }
      if (*s == '\\' && s[1] == '#') { /* an escaped '#' is one */
        if (!comment) buf[o++] = '#';
        s++;
        continue;
      }
      if (*s == '#') comment = true;
      if (!comment) buf[o++] = *s;
    }
    buf[o] = '\0';
    st = tsr__gres_line(p, buf, first, pass);
  }
  free(buf);
  return st;
}

tsr_status_t tsr_slurm_gres_conf_parse(const char *text, const char *name, const char *node, tsr_slurm_gpus_t *out) {
  tsr__gres_parse_t *p = calloc(1, sizeof(*p));
  if (!p) return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory reading %s", name);
  p->name = name;
  p->node = node;
  tsr_status_t st = tsr__gres_lines(p, text, 0);
  if (!st) st = tsr__gres_lines(p, text, 1);
  bool autodetect = p->has_node_ad ? p->node_ad : p->has_global_ad && p->global_ad;
  if (!st && autodetect)
    st = tsr_status_make(TSR_FAILED_PRECONDITION,
                         "%s: AutoDetect is on: Slurm then numbers GPUs by their PCI bus, which "
                         "tessera does not follow (list them with File= and AutoDetect=off)",
                         name);
  if (!st) {
    tsr_slurm_gpus_t *g = &p->gpus;
    size_t nofile = 0;
    for (size_t r = 0; r < p->nshards; r++) nofile += !p->shards[r].file[0];
    if (nofile && nofile != p->nshards)
      st = tsr_status_make(TSR_INVALID_ARGUMENT, "%s: shard records both with and without File= (Slurm refuses it)",
                           name);
    else if (nofile > 1)
      st = tsr_status_make(TSR_FAILED_PRECONDITION,
                           "%s: %zu shard records without File=: how Slurm spreads more than one over "
                           "the GPUs is not followed by tessera (give each GPU's with File=, or one "
                           "record, or shards_per_gpu=N in plugstack.conf)",
                           name, nofile);
    if (!st && nofile == 1) { /* spread over the GPUs, as Slurm spreads it */
      uint64_t left = p->shards[0].count;
      for (size_t k = 0; k < g->count; k++) {
        uint64_t each = left / (g->count - k);
        g->gpu[k].shards = (uint32_t)each;
        left -= each;
      }
    }
    for (size_t r = 0; !st && !nofile && r < p->nshards; r++)
      for (size_t k = 0; k < g->count; k++)
        if (strcmp(g->gpu[k].file, p->shards[r].file) == 0) {
          g->gpu[k].shards = (uint32_t)p->shards[r].count;
          break;
        }
  }
  if (!st) *out = p->gpus;
  free(p);
  return st;
}

/* ---- the step's GPUs ------------------------------------------------------------ */

tsr_status_t tsr_slurm_index_list_parse(const char *text, uint32_t *out, size_t cap, size_t *out_count) {
  *out_count = 0;
  size_t n = 0;
  for (const char *p = text ? text : "";;) {
    if (!isdigit((unsigned char)*p))
      return tsr_status_make(TSR_INVALID_ARGUMENT, "'%s' is not a list of GPU indices", text ? text : "");
    char *end = NULL;
    unsigned long v = strtoul(p, &end, 10);
    if (v >= TSR_SLURM_GPUS_MAX || (*end && *end != ','))
      return tsr_status_make(TSR_INVALID_ARGUMENT, "'%s' is not a list of GPU indices", text);
    if (n == cap) return tsr_status_make(TSR_INVALID_ARGUMENT, "'%s' has more than %zu GPUs", text, cap);
    for (size_t k = 0; k < n; k++)
      if (out[k] == v) return tsr_status_make(TSR_INVALID_ARGUMENT, "'%s' names GPU %lu twice", text, v);
    out[n++] = (uint32_t)v;
    if (!*end) break;
    p = end + 1;
  }
  *out_count = n;
  return NULL;
}

tsr_status_t tsr_slurm_device_find(const tsr_slurm_device_t *devices, size_t count, uint32_t dev_num, const char *file,
                                   const tsr_slurm_device_t **out_device) {
  size_t found = count;
  for (size_t i = 0; i < count; i++) {
    if (!devices[i].has_minor || devices[i].minor != dev_num) continue;
    if (found != count)
      return tsr_status_make(TSR_FAILED_PRECONDITION,
                             "tesserad's devices %" PRIu32 " and %" PRIu32 " both have minor %" PRIu32
                             " (%s): which is the job's cannot be told",
                             devices[found].index, devices[i].index, dev_num, file);
    found = i;
  }
  if (found == count)
    return tsr_status_make(TSR_NOT_FOUND,
                           "no tesserad device has minor %" PRIu32
                           " (%s, the GPU Slurm gave the job): "
                           "declare minor = %" PRIu32 " on its [device.N], or let NVML find it",
                           dev_num, file, dev_num);
  *out_device = &devices[found];
  return NULL;
}

tsr_status_t tsr_slurm_shards_parse(const char *text, uint32_t *out) {
  if (!text || !*text) {
    *out = 0;
    return NULL;
  }
  uint64_t n = 0;
  tsr_status_t st = tsr_parse_u64(text, &n);
  if (st || n > UINT32_MAX) {
    tsr_status_free(st);
    return tsr_status_make(TSR_INVALID_ARGUMENT,
                           "SLURM_SHARDS_ON_NODE='%.40s' is not a count of shards: the step's share "
                           "of the GPU cannot be told",
                           text);
  }
  *out = (uint32_t)n;
  return NULL;
}

/* ---- the lease's deadline, and following the job's end ------------------------- */

tsr_status_t tsr_slurm_lease_deadline(const tsr_slurm_job_time_t *job, uint64_t now_ns, uint64_t max_ns,
                                      uint64_t *out_ns) {
  if (!job->answered)
    return tsr_status_make(TSR_UNAVAILABLE,
                           "slurmctld did not answer with the job's end time: no lease may outlive "
                           "the job");
  uint64_t longest = tsr_time_add_sat(now_ns, max_ns);
  if (job->unlimited) {
    *out_ns = longest;
    return NULL;
  }
  /* an end past what ns since the epoch hold is later than any lease */
  uint64_t end_ns = job->end <= 0                                    ? 0
                    : (uint64_t)job->end > UINT64_MAX / TSR_NS_PER_S ? UINT64_MAX
                                                                     : (uint64_t)job->end * TSR_NS_PER_S;
  if (end_ns <= now_ns) return tsr_status_make(TSR_FAILED_PRECONDITION, "the job's time limit has passed");
  *out_ns = end_ns < longest ? end_ns : longest;
  return NULL;
}

tsr_status_t tsr_slurm_lease_duration(const tsr_slurm_job_time_t *job, uint64_t now_ns, uint64_t max_ns,
                                      uint64_t *out_ns) {
  uint64_t deadline = 0;
  TSR_RETURN_IF_ERROR(tsr_slurm_lease_deadline(job, now_ns, max_ns, &deadline));
  *out_ns = deadline - now_ns;
  return NULL;
}

bool tsr_slurm_job_end_moved(const tsr_slurm_job_time_t *before, const tsr_slurm_job_time_t *now) {
  if (!now->answered) return false;
  if (!before->answered || before->unlimited != now->unlimited) return true;
  return !now->unlimited && before->end != now->end;
}

bool tsr_slurm_deadline_off(uint64_t deadline_ns, uint64_t target_ns) {
  uint64_t apart = deadline_ns > target_ns ? deadline_ns - target_ns : target_ns - deadline_ns;
  return apart > TSR_SLURM_DEADLINE_SLACK_NS;
}

tsr_status_t tsr_slurm_follow_parse(const char *text, uint64_t *out_ns) {
  uint64_t ns = 0;
  if (!text || strcmp(text, "0") != 0) {
    tsr_status_t st = text ? tsr_parse_duration(text, &ns) : tsr_status_make(TSR_INVALID_ARGUMENT, "empty");
    /* more often than once a second is load on slurmctld for nothing: a
     * lease's deadline is kept to the second */
    if (!st && ns && ns < TSR_NS_PER_S) st = tsr_status_make(TSR_INVALID_ARGUMENT, "it must be 0 (off) or 1s or more");
    if (st) return st;
  }
  *out_ns = ns;
  return NULL;
}
