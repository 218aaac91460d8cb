/* mig/output.c: plans as JSON (written and read back with base/json: its
 * writer, and its scanner, span by span), text tables and SVG. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/fs.h"
#include "base/json.h"
#include "mig/internal.h"

static void tsr__slices_text(uint32_t mask, int nslices, char *buf, size_t cap) {
  int lo = -1, hi = -1;
  for (int s = 0; s < nslices; s++)
    if (mask >> s & 1u) {
      if (lo < 0) lo = s;
      hi = s;
    }
  if (lo == hi)
    snprintf(buf, cap, "%d", lo);
  else
    snprintf(buf, cap, "%d-%d", lo, hi);
}

/* ---- JSON --------------------------------------------------------------- */

tsr_status_t tsr_mig_plan_write_json(const tsr_mig_plan_t *p, const tsr_mig_tasks_t *T, FILE *out) {
  tsr_json_writer_t w = {0};
  tsr_json_object_begin(&w);
  tsr_json_key_string(&w, "gpu", p->model.name);
  tsr_json_key_string(&w, "algorithm", p->algorithm);
  tsr_json_key_bool(&w, "reconfig_free", p->reconfig_free);
  tsr_json_key_double(&w, "makespan_s", p->makespan);
  tsr_json_key_double(&w, "lower_bound_s", p->lower_bound);
  tsr_json_key_double(&w, "rho", p->lower_bound > 0 ? p->makespan / p->lower_bound : 0);
  tsr_json_key_i64(&w, "batches", p->nbatches);
  if (p->nallocations) {
    tsr_json_key(&w, "far");
    tsr_json_object_begin(&w);
    tsr_json_key_i64(&w, "allocations", p->nallocations);
    tsr_json_key_double(&w, "phase2_makespan_s", p->phase2_makespan);
    tsr_json_key_i64(&w, "moves", p->moves);
    tsr_json_key_i64(&w, "swaps", p->swaps);
    tsr_json_object_end(&w);
  }
  tsr_json_key(&w, "instances");
  tsr_json_array_begin(&w);
  for (int x = 0; x < p->ninstances; x++) {
    const tsr_mig_instance_t *in = &p->instances[x];
    tsr_json_object_begin(&w);
    tsr_json_key_i64(&w, "id", x);
    tsr_json_key_i64(&w, "node", in->node);
    tsr_json_key_i64(&w, "size", in->size);
    tsr_json_key(&w, "slices");
    tsr_json_array_begin(&w);
    for (int s = 0; s < p->model.nslices; s++)
      if (in->mask >> s & 1u) tsr_json_u64(&w, (uint64_t)s);
    tsr_json_array_end(&w);
    tsr_json_key_double(&w, "create_start_s", in->create_start);
    tsr_json_key_double(&w, "create_end_s", in->create_end);
    bool destroyed = in->destroy_start >= 0; /* else it outlives the plan: null */
    tsr_json_key_double(&w, "destroy_start_s", destroyed ? in->destroy_start : NAN);
    tsr_json_key_double(&w, "destroy_end_s", destroyed ? in->destroy_end : NAN);
    tsr_json_key_i64(&w, "batch", in->batch);
    tsr_json_object_end(&w);
  }
  tsr_json_array_end(&w);
  tsr_json_key(&w, "tasks");
  tsr_json_array_begin(&w);
  for (int i = 0; i < p->ntasks; i++) {
    const tsr_mig_placement_t *pl = &p->placements[i];
    tsr_json_object_begin(&w);
    tsr_json_key_string(&w, "name", T->names[i]);
    tsr_json_key(&w, "command");
    if (T->commands[i])
      tsr_json_string(&w, T->commands[i]);
    else
      tsr_json_null(&w);
    tsr_json_key_i64(&w, "instance", pl->instance);
    tsr_json_key_i64(&w, "size", pl->size);
    tsr_json_key_double(&w, "start_s", pl->start);
    tsr_json_key_double(&w, "end_s", pl->end);
    tsr_json_key_i64(&w, "batch", pl->batch);
    tsr_json_object_end(&w);
  }
  tsr_json_array_end(&w);
  tsr_json_object_end(&w);
  tsr_status_t st = tsr_json_writer_print(&w, out);
  tsr_json_writer_free(&w);
  return st ? tsr_status_annotate(st, "JSON plan") : NULL;
}

#define TSR__PLAN_FILE_MAX ((size_t)64 << 20)
#define TSR__PLAN_MEMBERS 32

/* A plan's object: its members scanned, or false with *st set. */
static bool tsr__scan(const char *path, const char *what, const char *text, size_t len, tsr_json_member_t *m, size_t *n,
                      tsr_status_t *st) {
  tsr_json_error_t err;
  if (tsr_json_scan_object(text, len, m, TSR__PLAN_MEMBERS, n, &err)) return true;
  *st = tsr_status_make(TSR_INVALID_ARGUMENT, "%s: %s: %s (at byte %zu)", path, what, err.message, err.offset);
  return false;
}

/* A number member: -1 for null (a time not set), its value for a number;
 * *ok false if missing or anything else. */
static double tsr__num(const tsr_json_member_t *m, size_t n, const char *key, bool *ok) {
  const tsr_json_member_t *v = tsr_json_find(m, n, key);
  if (v && v->type == TSR_JSON_NULL) return -1;
  if (!v || v->type != TSR_JSON_NUMBER) {
    *ok = false;
    return 0;
  }
  char buf[64];
  if (v->value_len >= sizeof(buf)) {
    *ok = false;
    return 0;
  }
  memcpy(buf, v->value, v->value_len);
  buf[v->value_len] = '\0';
  return strtod(buf, NULL); /* the scanner checked the number's grammar */
}

/* An integer member in [lo, hi]; `missing` if it is absent; *ok false if
 * it is anything but such an integer. */
static int tsr__int(const tsr_json_member_t *m, size_t n, const char *key, int lo, int hi, int missing, bool *ok) {
  const tsr_json_member_t *v = tsr_json_find(m, n, key);
  if (!v) return missing;
  char buf[32];
  if (v->type != TSR_JSON_NUMBER || v->value_len >= sizeof(buf)) {
    *ok = false;
    return 0;
  }
  memcpy(buf, v->value, v->value_len);
  buf[v->value_len] = '\0';
  char *end = NULL;
  errno = 0;
  long long x = strtoll(buf, &end, 10);
  if (errno || *end || x < lo || x > hi) {
    *ok = false;
    return 0;
  }
  return (int)x;
}

/* A string member, decoded into a new buffer (free() it); NULL if absent
 * or null, and *ok false if it is anything else (or memory ran out). */
static char *tsr__str(const tsr_json_member_t *m, size_t n, const char *key, bool *ok) {
  const tsr_json_member_t *v = tsr_json_find(m, n, key);
  if (!v || v->type == TSR_JSON_NULL) return NULL;
  char *dst = v->type == TSR_JSON_STRING ? malloc(v->value_len + 1) : NULL; /* decoded, never longer */
  if (!dst || !tsr_json_get_string(v, dst, v->value_len + 1)) {
    free(dst);
    *ok = false;
    return NULL;
  }
  return dst;
}

/* The number of elements of an array member (checked by the scanner). */
static size_t tsr__count(const tsr_json_member_t *array) {
  size_t cursor = 0, count = 0;
  tsr_json_member_t e;
  while (tsr_json_array_next(array->value, array->value_len, &cursor, &e)) count++;
  return count;
}

tsr_status_t tsr_mig_plan_read_json(const char *path, tsr_mig_plan_t **out_plan, tsr_mig_tasks_t **out_tasks) {
  *out_plan = NULL;
  *out_tasks = NULL;
  char *text = NULL;
  size_t len = 0;
  tsr_status_t st = tsr_fs_read_file(AT_FDCWD, path, TSR__PLAN_FILE_MAX, &text, &len);
  if (st) return st;
  tsr_mig_plan_t *p = NULL;
  tsr_mig_tasks_t *T = NULL;
  tsr_mig_model_t m;
  tsr_json_member_t root[TSR__PLAN_MEMBERS], o[TSR__PLAN_MEMBERS], e;
  size_t nroot = 0, no = 0, cursor;
  char *gpu = NULL, *algorithm = NULL, *task_name = NULL, *cmd = NULL;
  bool ok = true;
  if (!tsr__scan(path, "the plan", text, len, root, &nroot, &st)) goto out;
  const tsr_json_member_t *jt = tsr_json_find(root, nroot, "tasks"), *ji = tsr_json_find(root, nroot, "instances");
  gpu = tsr__str(root, nroot, "gpu", &ok);
  if (!gpu || !jt || jt->type != TSR_JSON_ARRAY || !ji || ji->type != TSR_JSON_ARRAY) {
    st = tsr_status_make(TSR_INVALID_ARGUMENT, "%s: not a tessera MIG plan (gpu, instances, tasks)", path);
    goto out;
  }
  algorithm = tsr__str(root, nroot, "algorithm", &ok);
  if ((st = tsr_mig_model_get(gpu, &m))) goto out;
  size_t count = tsr__count(jt);
  if (count > INT32_MAX) {
    st = tsr_status_make(TSR_INVALID_ARGUMENT, "%s: too many tasks", path);
    goto out;
  }
  int n = (int)count;
  if ((st = tsr_plan_new(&m, algorithm ? algorithm : "plan", n, &p))) goto out;
  if ((st = tsr_mig_tasks_create(&m, n, &T))) goto out;
  const tsr_json_member_t *rf = tsr_json_find(root, nroot, "reconfig_free");
  p->reconfig_free = rf && rf->type == TSR_JSON_TRUE;
  cursor = 0;
  for (size_t x = 0; tsr_json_array_next(ji->value, ji->value_len, &cursor, &e); x++) {
    if (e.type != TSR_JSON_OBJECT || !tsr__scan(path, "an instance", e.value, e.value_len, o, &no, &st)) {
      if (!st) st = tsr_status_make(TSR_INVALID_ARGUMENT, "%s: instance %zu is not an object", path, x);
      goto out;
    }
    tsr_mig_instance_t in = {0};
    bool node_ok = true;
    in.node = tsr__int(o, no, "node", 0, m.nnodes - 1, -1, &node_ok);
    if (!node_ok || in.node < 0) {
      st = tsr_status_make(TSR_INVALID_ARGUMENT, "%s: instance %zu: bad node", path, x);
      goto out;
    }
    in.size = m.nodes[in.node].size;
    in.mask = m.nodes[in.node].mask;
    in.create_start = tsr__num(o, no, "create_start_s", &ok);
    in.create_end = tsr__num(o, no, "create_end_s", &ok);
    in.destroy_start = tsr__num(o, no, "destroy_start_s", &ok);
    in.destroy_end = tsr__num(o, no, "destroy_end_s", &ok);
    in.batch = tsr__int(o, no, "batch", INT32_MIN, INT32_MAX, 0, &ok);
    if (tsr_plan_add_instance(p, &in) < 0) {
      st = tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
      goto out;
    }
  }
  cursor = 0;
  for (int i = 0; i < n && tsr_json_array_next(jt->value, jt->value_len, &cursor, &e); i++) {
    bool task_ok = e.type == TSR_JSON_OBJECT;
    if (task_ok && !tsr__scan(path, "a task", e.value, e.value_len, o, &no, &st)) goto out;
    free(task_name);
    free(cmd);
    task_name = task_ok ? tsr__str(o, no, "name", &task_ok) : NULL;
    cmd = task_ok ? tsr__str(o, no, "command", &task_ok) : NULL;
    tsr_mig_placement_t *pl = &p->placements[i];
    if (task_ok) {
      pl->instance = tsr__int(o, no, "instance", 0, INT32_MAX, -1, &task_ok);
      pl->size = tsr__int(o, no, "size", 0, INT32_MAX, 0, &task_ok);
      pl->start = tsr__num(o, no, "start_s", &ok);
      pl->end = tsr__num(o, no, "end_s", &ok);
      pl->batch = tsr__int(o, no, "batch", INT32_MIN, INT32_MAX, 0, &task_ok);
    }
    if (!task_ok || !task_name || pl->instance < 0 || pl->instance >= p->ninstances ||
        tsr_mig_model_size_index(&m, pl->size) < 0 || !ok) {
      st = tsr_status_make(TSR_INVALID_ARGUMENT, "%s: task %d is malformed", path, i);
      goto out;
    }
    if ((st = tsr_mig_tasks_set_name(T, i, task_name))) goto out;
    if ((st = tsr_mig_tasks_set_command(T, i, cmd))) goto out;
    if ((st = tsr_mig_tasks_set_time(T, i, pl->size, pl->end - pl->start))) goto out;
  }
  if (!ok) {
    st = tsr_status_make(TSR_INVALID_ARGUMENT, "%s: a time is not a number", path);
    goto out;
  }
  tsr_plan_finish(p, T);
  {
    bool lb_ok = true;
    double lb = tsr__num(root, nroot, "lower_bound_s", &lb_ok);
    if (lb_ok && lb >= 0) p->lower_bound = lb;
  }
  *out_plan = p;
  *out_tasks = T;
  p = NULL;
  T = NULL;
out:
  free(text);
  free(gpu);
  free(algorithm);
  free(task_name);
  free(cmd);
  tsr_mig_plan_free(p);
  tsr_mig_tasks_free(T);
  return st;
}

/* ---- text --------------------------------------------------------------- */

typedef struct {
  double start;
  int i;
} tsr__by_start_t;

static int tsr__cmp_start(const void *a, const void *b) {
  const tsr__by_start_t *x = a, *y = b;
  if (x->start != y->start) return x->start < y->start ? -1 : 1;
  return x->i - y->i;
}

tsr_status_t tsr_mig_plan_write_text(const tsr_mig_plan_t *p, const tsr_mig_tasks_t *T, FILE *out) {
  tsr__by_start_t *ord = malloc(sizeof(*ord) * (size_t)(p->ntasks ? p->ntasks : 1));
  if (!ord) return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  for (int i = 0; i < p->ntasks; i++) ord[i] = (tsr__by_start_t){p->placements[i].start, i};
  qsort(ord, (size_t)p->ntasks, sizeof(*ord), tsr__cmp_start);
  fprintf(out, "%s on %s: %d tasks, %d instances\n\n", p->algorithm, p->model.name, p->ntasks, p->ninstances);
  fprintf(out, "%-24s %5s %8s %6s %12s %12s %10s\n", "task", "size", "slices", "inst", "start_s", "end_s", "time_s");
  for (int q = 0; q < p->ntasks; q++) {
    const tsr_mig_placement_t *pl = &p->placements[ord[q].i];
    char sl[24]; /* "lo-hi" of two ints */
    tsr__slices_text(p->instances[pl->instance].mask, p->model.nslices, sl, sizeof(sl));
    fprintf(out, "%-24.24s %5d %8s %6d %12.3f %12.3f %10.3f\n", T->names[ord[q].i], pl->size, sl, pl->instance,
            pl->start, pl->end, pl->end - pl->start);
  }
  free(ord);
  fprintf(out, "\n%-6s %5s %8s %12s %12s %12s %12s\n", "inst", "size", "slices", "create_s", "ready_s", "destroy_s",
          "gone_s");
  for (int x = 0; x < p->ninstances; x++) {
    const tsr_mig_instance_t *in = &p->instances[x];
    char sl[24]; /* "lo-hi" of two ints */
    tsr__slices_text(in->mask, p->model.nslices, sl, sizeof(sl));
    if (in->destroy_start >= 0)
      fprintf(out, "%-6d %5d %8s %12.3f %12.3f %12.3f %12.3f\n", x, in->size, sl, in->create_start, in->create_end,
              in->destroy_start, in->destroy_end);
    else
      fprintf(out, "%-6d %5d %8s %12.3f %12.3f %12s %12s\n", x, in->size, sl, in->create_start, in->create_end, "-",
              "-");
  }
  fprintf(out, "\nmakespan %.3f s, lower bound %.3f s, rho %.4f\n", p->makespan, p->lower_bound,
          p->lower_bound > 0 ? p->makespan / p->lower_bound : 0);
  if (p->nallocations)
    fprintf(out, "FAR: %d allocations, phase 2 %.3f s, %d moves, %d swaps\n", p->nallocations, p->phase2_makespan,
            p->moves, p->swaps);
  return ferror(out) ? tsr_status_make(TSR_IO_ERROR, "write failed") : NULL;
}

/* ---- SVG ---------------------------------------------------------------- */

static void tsr__xml(FILE *out, const char *s) {
  for (; *s; s++) {
    switch (*s) {
      case '<': fputs("&lt;", out); break;
      case '>': fputs("&gt;", out); break;
      case '&': fputs("&amp;", out); break;
      case '"': fputs("&quot;", out); break;
      default: fputc(*s, out);
    }
  }
}

/* The length of the longest prefix of `s` of at most `n` bytes that does
 * not split a UTF-8 sequence (a label cut inside one is not valid XML). */
static size_t tsr__utf8_prefix(const char *s, size_t n) {
  size_t len = strnlen(s, n + 1);
  if (len <= n) return len;
  while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80) n--;
  return n;
}

tsr_status_t tsr_mig_plan_write_svg(const tsr_mig_plan_t *p, const tsr_mig_tasks_t *T, FILE *out) {
  const int left = 70, top = 50, lane = 34, width = 1000;
  int ns = p->model.nslices;
  double span = p->makespan;
  for (int x = 0; x < p->ninstances; x++)
    if (p->instances[x].destroy_end > span) span = p->instances[x].destroy_end;
  if (span <= 0) span = 1;
  double sx = width / span;
  int height = top + ns * lane + 90;
  static const char *palette[] = {"#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2",
                                  "#edc948", "#9c755f", "#e15759", "#bab0ac", "#ff9da7"};
  fprintf(out,
          "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
          "font-family=\"sans-serif\" font-size=\"11\">\n",
          left + width + 30, height);
  fprintf(out, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
  fprintf(out, "<text x=\"%d\" y=\"20\" font-size=\"14\" font-weight=\"bold\">", left);
  tsr__xml(out, p->algorithm);
  fprintf(out, " on %s: makespan %.2f s, lower bound %.2f s, rho %.3f</text>\n", p->model.name, p->makespan,
          p->lower_bound, p->lower_bound > 0 ? p->makespan / p->lower_bound : 0);
  /* lanes */
  for (int s = 0; s < ns; s++) {
    int y = top + s * lane;
    fprintf(out, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\"/>\n", left, y, width, lane,
            s % 2 ? "#f4f4f4" : "#fafafa");
    fprintf(out, "<text x=\"%d\" y=\"%d\">slice %d</text>\n", 10, y + lane / 2 + 4, s);
  }
  /* reconfigurations: creation green, destruction red, over the instance's slices */
  for (int x = 0; x < p->ninstances; x++) {
    const tsr_mig_instance_t *in = &p->instances[x];
    int lo = __builtin_ctz(in->mask), hi = 31 - __builtin_clz(in->mask);
    int y = top + lo * lane, h = (hi - lo + 1) * lane;
    if (in->create_end > in->create_start)
      fprintf(out,
              "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"#2ca02c\" "
              "opacity=\"0.8\"><title>create instance %d (%d slices): %.3f-%.3f s</title></rect>\n",
              left + in->create_start * sx, y, (in->create_end - in->create_start) * sx, h, x, in->size,
              in->create_start, in->create_end);
    if (in->destroy_start >= 0 && in->destroy_end > in->destroy_start)
      fprintf(out,
              "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"#d62728\" "
              "opacity=\"0.8\"><title>destroy instance %d (%d slices): %.3f-%.3f s</title></rect>\n",
              left + in->destroy_start * sx, y, (in->destroy_end - in->destroy_start) * sx, h, x, in->size,
              in->destroy_start, in->destroy_end);
  }
  /* tasks */
  for (int i = 0; i < p->ntasks; i++) {
    const tsr_mig_placement_t *pl = &p->placements[i];
    const tsr_mig_instance_t *in = &p->instances[pl->instance];
    int lo = __builtin_ctz(in->mask);
    int rows = pl->size; /* compute slices; a 3-slice instance on 0-3 leaves slice 3 blocked */
    double x0 = left + pl->start * sx, w = (pl->end - pl->start) * sx;
    int y = top + lo * lane + 3, h = rows * lane - 6;
    fprintf(out,
            "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"%s\" stroke=\"white\">"
            "<title>",
            x0, y, w > 0.5 ? w : 0.5, h, palette[i % 10]);
    tsr__xml(out, T->names[i]);
    fprintf(out, ": %d slices, %.3f-%.3f s</title></rect>\n", pl->size, pl->start, pl->end);
    if (w > 28) {
      fprintf(out, "<text x=\"%.2f\" y=\"%d\" fill=\"white\">", x0 + 3, y + h / 2 + 4);
      char name[40];
      size_t maxc = (size_t)(w / 6.5);
      size_t len = tsr__utf8_prefix(T->names[i], maxc < sizeof(name) - 1 ? maxc : sizeof(name) - 1);
      memcpy(name, T->names[i], len);
      name[len] = 0;
      tsr__xml(out, name);
      fprintf(out, "</text>\n");
    }
  }
  /* instance outlines, and the blocked slice of a 3-slice instance hatched */
  for (int x = 0; x < p->ninstances; x++) {
    const tsr_mig_instance_t *in = &p->instances[x];
    int lo = __builtin_ctz(in->mask), hi = 31 - __builtin_clz(in->mask);
    double end = in->destroy_end >= 0 ? in->destroy_end : p->makespan;
    fprintf(out,
            "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"none\" "
            "stroke=\"#222\" stroke-width=\"1.5\"><title>instance %d: %d slices</title></rect>\n",
            left + in->create_start * sx, top + lo * lane + 1, (end - in->create_start) * sx, (hi - lo + 1) * lane - 2,
            x, in->size);
    if (hi - lo + 1 > in->size)
      fprintf(out,
              "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"#999\" "
              "opacity=\"0.35\"><title>slice blocked by instance %d</title></rect>\n",
              left + in->create_end * sx, top + (lo + in->size) * lane + 3, (end - in->create_end) * sx,
              (hi - lo + 1 - in->size) * lane - 6, x);
  }
  /* axis */
  int ay = top + ns * lane + 15;
  fprintf(out, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#222\"/>\n", left, ay, left + width, ay);
  double step = pow(10, floor(log10(span / 5)));
  if (span / step > 10) step *= 2;
  if (span / step > 10) step *= 2.5;
  for (int i = 0; i * step <= span + 1e-9; i++) {
    double t = i * step;
    double x = left + t * sx;
    fprintf(out, "<line x1=\"%.2f\" y1=\"%d\" x2=\"%.2f\" y2=\"%d\" stroke=\"#222\"/>\n", x, ay, x, ay + 5);
    fprintf(out, "<text x=\"%.2f\" y=\"%d\" text-anchor=\"middle\">%g</text>\n", x, ay + 18, t);
  }
  fprintf(out, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">time (s)</text>\n", left + width, ay + 32);
  /* legend */
  int ly = ay + 40;
  fprintf(out,
          "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"#2ca02c\"/>"
          "<text x=\"%d\" y=\"%d\">instance creation</text>\n"
          "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"#d62728\"/>"
          "<text x=\"%d\" y=\"%d\">instance destruction</text>\n"
          "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"none\" stroke=\"#222\"/>"
          "<text x=\"%d\" y=\"%d\">instance lifetime (outline)</text>\n"
          "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"#999\" opacity=\"0.35\"/>"
          "<text x=\"%d\" y=\"%d\">slice blocked by a 3-slice instance</text>\n",
          left, ly, left + 16, ly + 10, left + 150, ly, left + 166, ly + 10, left + 310, ly, left + 326, ly + 10,
          left + 500, ly, left + 516, ly + 10);
  fprintf(out, "</svg>\n");
  return ferror(out) ? tsr_status_make(TSR_IO_ERROR, "write failed") : NULL;
}
