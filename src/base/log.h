/* base/log.h: one-line log messages on stderr.
 *
 * Format: "2026-11-22T10:00:00.123Z tesserad[4242] warn: message". Each message
 * is written with a single write(2), so lines from several threads or
 * processes sharing the stream never interleave. Thread-safe. */
#ifndef TESSERA_BASE_LOG_H
#define TESSERA_BASE_LOG_H

#include <stdarg.h>

typedef enum tsr_log_level_e {
  TSR_LOG_ERROR = 0,
  TSR_LOG_WARN = 1,
  TSR_LOG_INFO = 2,
  TSR_LOG_DEBUG = 3,
} tsr_log_level_t;

/* Sets the program name shown in each line and the most verbose level printed
 * (default "tessera", TSR_LOG_INFO). Call once at start, before threads. */
void tsr_log_init(const char *program, tsr_log_level_t level);

/* Sends lines to `fd` instead of stderr (2). */
void tsr_log_set_fd(int fd);

/* Parses "error", "warn", "info" or "debug"; returns -1 if unknown. */
int tsr_log_level_parse(const char *name);

void tsr_log(tsr_log_level_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define tsr_log_error(...) tsr_log(TSR_LOG_ERROR, __VA_ARGS__)
#define tsr_log_warn(...) tsr_log(TSR_LOG_WARN, __VA_ARGS__)
#define tsr_log_info(...) tsr_log(TSR_LOG_INFO, __VA_ARGS__)
#define tsr_log_debug(...) tsr_log(TSR_LOG_DEBUG, __VA_ARGS__)

#endif
