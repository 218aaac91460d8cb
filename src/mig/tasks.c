/* mig/tasks.c: task sets, CSV loading (wide and long form), the lower bound. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/array.h"
#include "mig/internal.h"

/* ---- small parsers ------------------------------------------------------ */

bool tsr_parse_double(const char *s, double *out) {
  if (!s || !*s) return false;
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (end == s || *end || errno == ERANGE) return false;
  *out = v;
  return true;
}

bool tsr_csv_comment(const char *line) {
  while (*line == ' ' || *line == '\t') line++;
  return *line == '#';
}

static char *tsr__trim(char *s) {
  while (*s == ' ' || *s == '\t') s++;
  size_t n = strlen(s);
  while (n && (s[n - 1] == ' ' || s[n - 1] == '\t')) s[--n] = 0;
  return s;
}

tsr_status_t tsr_csv_split(char *line, char **fields, int cap, int *out_n) {
  *out_n = 0;
  size_t len = strlen(line);
  while (len && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
  int n = 0;
  char *p = line;
  for (;;) {
    while (*p == ' ' || *p == '\t') p++;
    char *field;
    if (*p == '"') {
      /* quoted: unescape "" in place */
      char *w = ++p;
      field = w;
      for (;;) {
        if (!*p) return tsr_status_make(TSR_INVALID_ARGUMENT, "unterminated quoted field");
        if (*p == '"') {
          if (p[1] == '"') {
            *w++ = '"';
            p += 2;
            continue;
          }
          p++;
          break;
        }
        *w++ = *p++;
      }
      *w = 0;
      while (*p == ' ' || *p == '\t') p++;
      if (*p && *p != ',') return tsr_status_make(TSR_INVALID_ARGUMENT, "text after a quoted field");
    } else {
      field = p;
      while (*p && *p != ',') p++;
    }
    char sep = *p;
    if (sep == ',') *p++ = 0;
    if (n >= cap) return tsr_status_make(TSR_INVALID_ARGUMENT, "more than %d fields", cap);
    fields[n++] = tsr__trim(field);
    if (sep != ',') break;
  }
  *out_n = n;
  return NULL;
}

tsr_status_t tsr_csv_gpu_row(const char *path, int line, char *const *fields, int nf) {
  if (nf != 4) return tsr_status_make(TSR_INVALID_ARGUMENT, "%s:%d: expected 4 fields, found %d", path, line, nf);
  if (!tsr_model_known(fields[0]))
    return tsr_status_make(TSR_INVALID_ARGUMENT, "%s:%d: unknown GPU model '%s'", path, line, fields[0]);
  return NULL;
}

/* ---- task sets ---------------------------------------------------------- */

tsr_status_t tsr_mig_tasks_create(const tsr_mig_model_t *model, int n, tsr_mig_tasks_t **out_tasks) {
  *out_tasks = NULL;
  if (n < 0) return tsr_status_make(TSR_INVALID_ARGUMENT, "negative task count");
  tsr_mig_tasks_t *t = calloc(1, sizeof(*t));
  if (!t) return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  t->n = n;
  t->nsizes = model->nsizes;
  memcpy(t->sizes, model->sizes, sizeof(t->sizes));
  size_t cnt = n ? (size_t)n : 1;
  t->names = calloc(cnt, sizeof(char *));
  t->commands = calloc(cnt, sizeof(char *));
  t->times = malloc(cnt * (size_t)model->nsizes * sizeof(double));
  if (!t->names || !t->commands || !t->times) {
    tsr_mig_tasks_free(t);
    return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  }
  for (int i = 0; i < n; i++) {
    char buf[24];
    snprintf(buf, sizeof(buf), "t%d", i);
    t->names[i] = strdup(buf);
    if (!t->names[i]) {
      tsr_mig_tasks_free(t);
      return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
    }
    for (int k = 0; k < model->nsizes; k++) t->times[(size_t)i * model->nsizes + k] = INFINITY;
  }
  *out_tasks = t;
  return NULL;
}

void tsr_mig_tasks_free(tsr_mig_tasks_t *t) {
  if (!t) return;
  for (int i = 0; i < t->n; i++) {
    if (t->names) free(t->names[i]);
    if (t->commands) free(t->commands[i]);
  }
  free(t->names);
  free(t->commands);
  free(t->times);
  free(t);
}

static int tsr__size_index(const tsr_mig_tasks_t *t, int size) {
  for (int k = 0; k < t->nsizes; k++)
    if (t->sizes[k] == size) return k;
  return -1;
}

tsr_status_t tsr_mig_tasks_set_time(tsr_mig_tasks_t *tasks, int i, int size, double seconds) {
  if (i < 0 || i >= tasks->n) return tsr_status_make(TSR_INVALID_ARGUMENT, "no task %d", i);
  int k = tsr__size_index(tasks, size);
  if (k < 0) return tsr_status_make(TSR_INVALID_ARGUMENT, "no instance size %d", size);
  if (isnan(seconds) || seconds < 0)
    return tsr_status_make(TSR_INVALID_ARGUMENT, "time must be >= 0 seconds or infinite");
  tasks->times[(size_t)i * tasks->nsizes + k] = seconds;
  return NULL;
}

tsr_status_t tsr_mig_tasks_set_name(tsr_mig_tasks_t *tasks, int i, const char *name) {
  if (i < 0 || i >= tasks->n || !name) return tsr_status_make(TSR_INVALID_ARGUMENT, "bad task or name");
  char *c = strdup(name);
  if (!c) return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  free(tasks->names[i]);
  tasks->names[i] = c;
  return NULL;
}

tsr_status_t tsr_mig_tasks_set_command(tsr_mig_tasks_t *tasks, int i, const char *command) {
  if (i < 0 || i >= tasks->n) return tsr_status_make(TSR_INVALID_ARGUMENT, "no task %d", i);
  char *c = NULL;
  if (command && !(c = strdup(command))) return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  free(tasks->commands[i]);
  tasks->commands[i] = c;
  return NULL;
}

tsr_status_t tsr_mig_tasks_concat(const tsr_mig_tasks_t *a, const tsr_mig_tasks_t *b, tsr_mig_tasks_t **out_tasks) {
  *out_tasks = NULL;
  if (b && (a->nsizes != b->nsizes || memcmp(a->sizes, b->sizes, sizeof(a->sizes))))
    return tsr_status_make(TSR_INVALID_ARGUMENT, "task sets of different GPU models");
  tsr_mig_model_t m;
  memset(&m, 0, sizeof(m));
  m.nsizes = a->nsizes;
  memcpy(m.sizes, a->sizes, sizeof(m.sizes));
  int nb = b ? b->n : 0;
  tsr_mig_tasks_t *t;
  TSR_RETURN_IF_ERROR(tsr_mig_tasks_create(&m, a->n + nb, &t));
  for (int i = 0; i < a->n + nb; i++) {
    const tsr_mig_tasks_t *src = i < a->n ? a : b;
    int j = i < a->n ? i : i - a->n;
    tsr_status_t st = tsr_mig_tasks_set_name(t, i, src->names[j]);
    if (!st) st = tsr_mig_tasks_set_command(t, i, src->commands[j]);
    if (st) {
      tsr_mig_tasks_free(t);
      return st;
    }
    memcpy(&t->times[(size_t)i * t->nsizes], &src->times[(size_t)j * src->nsizes], sizeof(double) * (size_t)t->nsizes);
  }
  *out_tasks = t;
  return NULL;
}

double tsr_mig_lower_bound(const tsr_mig_model_t *model, const tsr_mig_tasks_t *tasks) {
  double area = 0;
  for (int i = 0; i < tasks->n; i++) {
    double best = INFINITY;
    for (int k = 0; k < tasks->nsizes; k++) {
      double a = tasks->sizes[k] * tsr_mig_tasks_time(tasks, i, k);
      if (a < best) best = a;
    }
    area += best;
  }
  return area / model->nslices;
}

/* ---- CSV ---------------------------------------------------------------- */

#define TSR__MAX_FIELDS 64

/* One task of the list being loaded. */
typedef struct {
  char *name;
  char *command; /* NULL when none */
  int first_line;
} tsr__tl_row_t;

/* A growable task list used while loading: rows[i] and times[i * nsizes..]
 * (INFINITY where the task cannot run). */
typedef struct {
  int n, nsizes;
  tsr__tl_row_t *rows;
  double *times;
  size_t cap_rows, cap_times; /* in tasks */
} tsr__tl_t;

static void tsr__tl_free(tsr__tl_t *l) {
  for (int i = 0; i < l->n; i++) {
    free(l->rows[i].name);
    free(l->rows[i].command);
  }
  free(l->rows);
  free(l->times);
}

static int tsr__tl_add(tsr__tl_t *l, const char *name, int line) {
  size_t need = (size_t)l->n + 1;
  tsr__tl_row_t *rows = tsr_array_grow(l->rows, &l->cap_rows, need, sizeof(*rows), 16);
  if (!rows) return -1;
  l->rows = rows;
  double *times = tsr_array_grow(l->times, &l->cap_times, need, sizeof(double) * (size_t)l->nsizes, 16);
  if (!times) return -1;
  l->times = times;
  int i = l->n;
  char *copy = strdup(name);
  if (!copy) return -1;
  l->rows[i] = (tsr__tl_row_t){copy, NULL, line};
  for (int k = 0; k < l->nsizes; k++) l->times[(size_t)i * l->nsizes + k] = INFINITY;
  l->n++;
  return i;
}

static int tsr__tl_find(const tsr__tl_t *l, const char *name) {
  for (int i = l->n - 1; i >= 0; i--)
    if (strcmp(l->rows[i].name, name) == 0) return i;
  return -1;
}

/* Parses a time cell: finite, >= 0. */
TSR_MUST_USE static tsr_status_t tsr__parse_time(const char *path, int line, const char *cell, double *out) {
  double v;
  if (!tsr_parse_double(cell, &v))
    return tsr_status_make(TSR_INVALID_ARGUMENT, "%s:%d: '%s' is not a number of seconds", path, line, cell);
  if (isnan(v)) return tsr_status_make(TSR_INVALID_ARGUMENT, "%s:%d: time is NaN", path, line);
  if (v < 0) return tsr_status_make(TSR_INVALID_ARGUMENT, "%s:%d: negative time %s", path, line, cell);
  if (!isfinite(v))
    return tsr_status_make(TSR_INVALID_ARGUMENT, "%s:%d: infinite time (leave the cell empty instead)", path, line);
  *out = v;
  return NULL;
}

tsr_status_t tsr_mig_tasks_load_csv(const tsr_mig_model_t *model, const char *path, tsr_mig_tasks_t **out_tasks) {
  *out_tasks = NULL;
  FILE *f = fopen(path, "r");
  if (!f) return tsr_status_from_errno(errno, "%s", path);
  tsr__tl_t l = {0};
  l.nsizes = model->nsizes;
  tsr_status_t st = NULL;
  int lineno = 0, header_line = 0;
  enum { NONE, WIDE, LONG } form = NONE;
  int ncols = 0, name_col = -1, cmd_col = -1;
  int col_size[TSR__MAX_FIELDS]; /* size index per column, -1 otherwise */
  bool long_rows = false;
  char *line = NULL;
  size_t cap = 0;
  while (getline(&line, &cap, f) >= 0) {
    lineno++;
    if (tsr_csv_comment(line)) continue;
    char *fields[TSR__MAX_FIELDS];
    int nf = 0;
    st = tsr_csv_split(line, fields, TSR__MAX_FIELDS, &nf);
    if (st) {
      st = tsr_status_annotate(st, "%s:%d", path, lineno);
      break;
    }
    if (nf == 0 || (nf == 1 && !fields[0][0])) continue;
    if (form == NONE) {
      header_line = lineno;
      ncols = nf;
      if (nf == 4 && !strcasecmp(fields[0], "gpu") && !strcasecmp(fields[1], "kernel") &&
          !strcasecmp(fields[2], "slices") && !strcasecmp(fields[3], "seconds")) {
        form = LONG;
        continue;
      }
      form = WIDE;
      for (int c = 0; c < nf; c++) {
        col_size[c] = -1;
        const char *h = fields[c];
        if (!strcasecmp(h, "name") || !strcasecmp(h, "task") || !strcasecmp(h, "kernel")) {
          if (name_col >= 0) {
            st = tsr_status_make(TSR_INVALID_ARGUMENT, "%s:%d: two name columns", path, lineno);
            break;
          }
          name_col = c;
        } else if (!strcasecmp(h, "command")) {
          cmd_col = c;
        } else {
          /* a size: "4", "s4", "t4" or "4g" */
          const char *d = h;
          if (*d == 's' || *d == 'S' || *d == 't' || *d == 'T') d++;
          char *end;
          long size = strtol(d, &end, 10);
          if (end == d || (*end && strcasecmp(end, "g"))) {
            st = tsr_status_make(TSR_INVALID_ARGUMENT,
                                 "%s:%d: unknown column '%s' (expected name, instance sizes, "
                                 "command; or the long form gpu,kernel,slices,seconds)",
                                 path, lineno, h);
            break;
          }
          int k = size >= 1 && size <= 1024 ? tsr_mig_model_size_index(model, (int)size) : -1;
          if (k < 0) {
            st = tsr_status_make(TSR_INVALID_ARGUMENT, "%s:%d: %s has no instance size %ld", path, lineno, model->name,
                                 size);
            break;
          }
          for (int c2 = 0; c2 < c; c2++)
            if (col_size[c2] == k) {
              st = tsr_status_make(TSR_INVALID_ARGUMENT, "%s:%d: size %ld given twice", path, lineno, size);
              break;
            }
          if (st) break;
          col_size[c] = k;
        }
      }
      if (st) break;
      if (name_col < 0) {
        st = tsr_status_make(TSR_INVALID_ARGUMENT, "%s:%d: no 'name' column in the header", path, lineno);
        break;
      }
      continue;
    }
    if (form == LONG) {
      if ((st = tsr_csv_gpu_row(path, lineno, fields, nf))) break;
      if (!fields[1][0]) {
        st = tsr_status_make(TSR_INVALID_ARGUMENT, "%s:%d: empty kernel name", path, lineno);
        break;
      }
      char *end;
      long size = strtol(fields[2], &end, 10);
      if (end == fields[2] || *end || size <= 0) {
        st = tsr_status_make(TSR_INVALID_ARGUMENT, "%s:%d: bad slice count '%s'", path, lineno, fields[2]);
        break;
      }
      double v;
      if ((st = tsr__parse_time(path, lineno, fields[3], &v))) break;
      if (strcasecmp(fields[0], model->name) != 0) continue;
      long_rows = true;
      int k = size >= 1 && size <= 1024 ? tsr_mig_model_size_index(model, (int)size) : -1;
      if (k < 0) {
        st = tsr_status_make(TSR_INVALID_ARGUMENT, "%s:%d: %s has no instance size %ld", path, lineno, model->name,
                             size);
        break;
      }
      int i = tsr__tl_find(&l, fields[1]);
      if (i < 0 && (i = tsr__tl_add(&l, fields[1], lineno)) < 0) {
        st = tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
        break;
      }
      double *slot = &l.times[(size_t)i * l.nsizes + k];
      if (!isinf(*slot)) {
        st = tsr_status_make(TSR_INVALID_ARGUMENT, "%s:%d: second time for %s on %ld slices", path, lineno, fields[1],
                             size);
        break;
      }
      *slot = v;
      continue;
    }
    /* wide row */
    if (nf != ncols) {
      st = tsr_status_make(TSR_INVALID_ARGUMENT, "%s:%d: expected %d fields, found %d", path, lineno, ncols, nf);
      break;
    }
    if (!fields[name_col][0]) {
      st = tsr_status_make(TSR_INVALID_ARGUMENT, "%s:%d: empty task name", path, lineno);
      break;
    }
    if (tsr__tl_find(&l, fields[name_col]) >= 0) {
      st = tsr_status_make(TSR_INVALID_ARGUMENT, "%s:%d: task '%s' listed twice", path, lineno, fields[name_col]);
      break;
    }
    int i = tsr__tl_add(&l, fields[name_col], lineno);
    if (i < 0) {
      st = tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
      break;
    }
    bool feasible = false;
    for (int c = 0; c < nf && !st; c++) {
      if (col_size[c] < 0 || !fields[c][0]) continue;
      double v;
      if ((st = tsr__parse_time(path, lineno, fields[c], &v))) break;
      l.times[(size_t)i * l.nsizes + col_size[c]] = v;
      feasible = true;
    }
    if (st) break;
    if (!feasible) {
      st = tsr_status_make(TSR_INVALID_ARGUMENT, "%s:%d: task '%s' is feasible on no size", path, lineno,
                           fields[name_col]);
      break;
    }
    if (cmd_col >= 0 && fields[cmd_col][0] && !(l.rows[i].command = strdup(fields[cmd_col]))) {
      st = tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
      break;
    }
  }
  int read_errno = (st || feof(f)) ? 0 : errno; /* getline stopped before the end */
  free(line);
  fclose(f);
  if (!st && read_errno) st = tsr_status_from_errno(read_errno, "%s:%d", path, lineno + 1);
  if (!st && form == NONE) st = tsr_status_make(TSR_INVALID_ARGUMENT, "%s: no header", path);
  if (!st && form == LONG && !long_rows)
    st = tsr_status_make(TSR_INVALID_ARGUMENT, "%s:%d: no rows for GPU %s", path, header_line, model->name);
  if (!st && l.n == 0) st = tsr_status_make(TSR_INVALID_ARGUMENT, "%s: no tasks", path);
  if (!st && form == LONG) {
    for (int i = 0; i < l.n && !st; i++) {
      bool feasible = false;
      for (int k = 0; k < l.nsizes; k++) feasible |= !isinf(l.times[(size_t)i * l.nsizes + k]);
      if (!feasible)
        st = tsr_status_make(TSR_INVALID_ARGUMENT, "%s:%d: task '%s' is feasible on no size", path,
                             l.rows[i].first_line, l.rows[i].name);
    }
  }
  if (st) {
    tsr__tl_free(&l);
    return st;
  }
  tsr_mig_tasks_t *t;
  st = tsr_mig_tasks_create(model, l.n, &t);
  if (st) {
    tsr__tl_free(&l);
    return st;
  }
  for (int i = 0; i < l.n; i++) {
    free(t->names[i]);
    t->names[i] = l.rows[i].name;
    t->commands[i] = l.rows[i].command;
    l.rows[i].name = NULL;
    l.rows[i].command = NULL;
  }
  memcpy(t->times, l.times, sizeof(double) * (size_t)l.n * (size_t)l.nsizes);
  tsr__tl_free(&l);
  *out_tasks = t;
  return NULL;
}

/* A cell, quoted where it would not read back as itself: a separator, a
 * quote, blanks (trimmed when read), a line break, or a leading '#' (a
 * comment line when it starts one). */
static void tsr__csv_cell(FILE *out, const char *s) {
  if (!strpbrk(s, ",\"\n\r \t") && s[0] != '#') {
    fputs(s, out);
    return;
  }
  fputc('"', out);
  for (; *s; s++) {
    if (*s == '"') fputc('"', out);
    fputc(*s, out);
  }
  fputc('"', out);
}

tsr_status_t tsr_mig_tasks_write_csv(const tsr_mig_tasks_t *tasks, FILE *out) {
  bool cmds = false;
  for (int i = 0; i < tasks->n; i++) cmds |= tasks->commands[i] != NULL;
  fputs("name", out);
  for (int k = 0; k < tasks->nsizes; k++) fprintf(out, ",%d", tasks->sizes[k]);
  if (cmds) fputs(",command", out);
  fputc('\n', out);
  for (int i = 0; i < tasks->n; i++) {
    tsr__csv_cell(out, tasks->names[i]);
    for (int k = 0; k < tasks->nsizes; k++) {
      double v = tsr_mig_tasks_time(tasks, i, k);
      if (isinf(v))
        fputs(",", out);
      else
        fprintf(out, ",%.17g", v);
    }
    if (cmds) {
      fputc(',', out);
      if (tasks->commands[i]) tsr__csv_cell(out, tasks->commands[i]);
    }
    fputc('\n', out);
  }
  return ferror(out) ? tsr_status_make(TSR_IO_ERROR, "write failed") : NULL;
}
