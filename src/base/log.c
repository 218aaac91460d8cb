/* log.c: single-write log lines (see log.h). */
#include "base/log.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/time.h"

static char tsr__log_program[32] = "tessera";
static tsr_log_level_t tsr__log_level = TSR_LOG_INFO;
static int tsr__log_fd = 2;

static const char *const tsr__level_names[] = {"error", "warn", "info", "debug"};

void tsr_log_init(const char *program, tsr_log_level_t level) {
  if (program) snprintf(tsr__log_program, sizeof(tsr__log_program), "%s", program);
  tsr__log_level = level;
}

void tsr_log_set_fd(int fd) { tsr__log_fd = fd; }

int tsr_log_level_parse(const char *name) {
  for (int i = 0; i < 4; i++)
    if (name && strcmp(name, tsr__level_names[i]) == 0) return i;
  return -1;
}

void tsr_log(tsr_log_level_t level, const char *fmt, ...) {
  if (level > tsr__log_level) return;
  char line[2048];
  char stamp[40];
  tsr_time_format_rfc3339(tsr_time_wall_ns(), 3, stamp, sizeof(stamp));
  int n =
      snprintf(line, sizeof(line), "%s %s[%d] %s: ", stamp, tsr__log_program, (int)getpid(), tsr__level_names[level]);
  if (n < 0) return;
  va_list ap;
  va_start(ap, fmt);
  int m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
  va_end(ap);
  size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
  if (len > sizeof(line) - 2) len = sizeof(line) - 2;
  line[len++] = '\n';
  ssize_t w = write(tsr__log_fd, line, len);
  (void)w;
}
