/* bench_record.c: one JSON line a record, appended to $TSR_BENCH_JSON (see
 * bench_record.h). The fields around the figures are the process's: the
 * source tree's commit (read once), the host, the date of the row; the
 * device is "cpu", as every C benchmark measures the host. */
#include "bench_record.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "base/json.h"
#include "base/time.h"

struct tsr_bench_record_s {
  tsr_json_writer_t json; /* the line so far: open at "figures":{ */
};

/* TSR_BENCH_COMMIT when set (a copy of built files has no git tree beside
 * it), else `git describe --always --dirty` of the sources this was built
 * from (TESSERA_SOURCE_DIR overrides where they are), else "unknown". */
static const char *tsr__commit(void) {
  static char commit[128];
  if (commit[0]) return commit;
  snprintf(commit, sizeof(commit), "unknown");
  const char *env = getenv("TSR_BENCH_COMMIT");
  if (env && *env) {
    snprintf(commit, sizeof(commit), "%s", env);
    return commit;
  }
  const char *dir = getenv("TESSERA_SOURCE_DIR");
  if (!dir || !*dir) dir = TSR_BENCH_SOURCE_DIR;
  char cmd[4200];
  int n = snprintf(cmd, sizeof(cmd), "git -C '%s' describe --always --dirty 2>/dev/null", dir);
  if (n < 0 || n >= (int)sizeof(cmd) || strchr(dir, '\'')) return commit; /* no quoting games in a shell line */
  FILE *p = popen(cmd, "r");
  if (!p) return commit;
  char line[128] = "";
  bool got = fgets(line, sizeof(line), p) != NULL;
  line[strcspn(line, "\n")] = '\0';
  if (pclose(p) == 0 && got && line[0]) snprintf(commit, sizeof(commit), "%s", line);
  return commit;
}

tsr_bench_record_t *tsr_bench_record_begin(const char *bench, const char *case_format, ...) {
  const char *path = getenv("TSR_BENCH_JSON");
  if (!path || !*path) return NULL;
  tsr_bench_record_t *r = calloc(1, sizeof(*r));
  if (!r) return NULL;
  char name[512], host[256] = "unknown", date[40];
  va_list ap;
  va_start(ap, case_format);
  vsnprintf(name, sizeof(name), case_format, ap);
  va_end(ap);
  if (gethostname(host, sizeof(host)) != 0) snprintf(host, sizeof(host), "unknown");
  host[sizeof(host) - 1] = '\0';
  tsr_time_format_rfc3339(tsr_time_wall_ns(), 0, date, sizeof(date));
  tsr_json_writer_t *w = &r->json;
  tsr_json_object_begin(w);
  tsr_json_key_string(w, "bench", bench);
  tsr_json_key_string(w, "commit", tsr__commit());
  tsr_json_key_string(w, "date", date);
  tsr_json_key_string(w, "host", host);
  tsr_json_key_string(w, "device", "cpu");
  tsr_json_key(w, "driver");
  tsr_json_null(w);
  tsr_json_key_string(w, "case", name);
  tsr_json_key(w, "figures");
  tsr_json_object_begin(w);
  return r;
}

void tsr_bench_record_figure(tsr_bench_record_t *record, double value, const char *name_format, ...) {
  if (!record) return;
  char name[128];
  va_list ap;
  va_start(ap, name_format);
  vsnprintf(name, sizeof(name), name_format, ap);
  va_end(ap);
  tsr_json_key_double(&record->json, name, value);
}

void tsr_bench_record_end(tsr_bench_record_t *record, const char *target, const char *verdict) {
  if (!record) return;
  static bool said; /* one complaint a run, not one a row */
  tsr_json_writer_t *w = &record->json;
  tsr_json_object_end(w);
  if (target) tsr_json_key_string(w, "target", target);
  if (verdict) tsr_json_key_string(w, "verdict", verdict);
  tsr_json_object_end(w);
  const char *path = getenv("TSR_BENCH_JSON");
  /* one write of line and newline: records of processes appending to the
   * same file at once do not interleave */
  int fd = w->failed || !path ? -1 : open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  struct iovec iov[2] = {{w->buf, w->len}, {"\n", 1}};
  bool ok = fd >= 0 && writev(fd, iov, 2) == (ssize_t)(w->len + 1);
  if (fd >= 0 && close(fd) != 0) ok = false;
  if (!ok && !said) {
    said = true;
    fprintf(stderr, "bench: could not append a record to TSR_BENCH_JSON=%s\n", path ? path : "");
  }
  tsr_json_writer_free(w);
  free(record);
}
