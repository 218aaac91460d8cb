/* status.c: heap-allocated error statuses (see include/tessera/status.h). */
/* status.c defines the constructors the analyser-only wrappers name. */
#define TSR_STATUS_DEFINING
#include "tessera/status.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tsr_status_s {
  tsr_status_code_t code;
  char message[]; /* NUL-terminated */
};

/* Returned when allocating a status fails; never freed. */
static struct {
  tsr_status_code_t code;
  char message[16];
} tsr__status_oom = {TSR_OUT_OF_MEMORY, "out of memory"};

static const char *const tsr__code_names[TSR_STATUS_CODE_COUNT] = {
    [TSR_OK] = "ok",
    [TSR_INVALID_ARGUMENT] = "invalid_argument",
    [TSR_NOT_FOUND] = "not_found",
    [TSR_ALREADY_EXISTS] = "already_exists",
    [TSR_PERMISSION_DENIED] = "permission_denied",
    [TSR_RESOURCE_EXHAUSTED] = "resource_exhausted",
    [TSR_FAILED_PRECONDITION] = "failed_precondition",
    [TSR_CONFLICT] = "conflict",
    [TSR_UNAVAILABLE] = "unavailable",
    [TSR_IO_ERROR] = "io_error",
    [TSR_DATA_LOSS] = "data_loss",
    [TSR_INTERNAL] = "internal",
    [TSR_UNIMPLEMENTED] = "unimplemented",
    [TSR_OUT_OF_MEMORY] = "out_of_memory",
};

tsr_status_t tsr_status_makev(tsr_status_code_t code, const char *fmt, va_list ap) {
  if (code == TSR_OK || code >= TSR_STATUS_CODE_COUNT) code = TSR_INTERNAL;
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  if (n < 0) n = 0;
  struct tsr_status_s *st = malloc(sizeof(*st) + (size_t)n + 1);
  if (!st) return (tsr_status_t)&tsr__status_oom;
  st->code = code;
  vsnprintf(st->message, (size_t)n + 1, fmt, ap);
  return st;
}

tsr_status_t tsr_status_make(tsr_status_code_t code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  tsr_status_t st = tsr_status_makev(code, fmt, ap);
  va_end(ap);
  return st;
}

static tsr_status_code_t tsr__code_from_errno(int err) {
  switch (err) {
    case ENOENT:
    case ENOTDIR: return TSR_NOT_FOUND;
    case EACCES:
    case EPERM:
    case EROFS: return TSR_PERMISSION_DENIED;
    case EEXIST: return TSR_ALREADY_EXISTS;
    case ENOMEM: return TSR_OUT_OF_MEMORY;
    case EINVAL: return TSR_INVALID_ARGUMENT;
    case ENOSPC:
    case EDQUOT:
    case EMFILE:
    case ENFILE: return TSR_RESOURCE_EXHAUSTED;
    case ECONNREFUSED:
    case EAGAIN:
    case ETIMEDOUT: return TSR_UNAVAILABLE;
    default: return TSR_IO_ERROR;
  }
}

tsr_status_t tsr_status_from_errno(int err, const char *fmt, ...) {
  char prefix[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof(prefix), fmt, ap);
  va_end(ap);
  return tsr_status_make(tsr__code_from_errno(err), "%s: %s", prefix, strerror(err));
}

tsr_status_t tsr_status_annotate(tsr_status_t status, const char *fmt, ...) {
  if (!status) return NULL;
  if (status == (tsr_status_t)&tsr__status_oom) return status;
  char prefix[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof(prefix), fmt, ap);
  va_end(ap);
  tsr_status_t out = tsr_status_make(status->code, "%s: %s", prefix, status->message);
  tsr_status_free(status);
  return out;
}

tsr_status_code_t tsr_status_code(tsr_status_t status) { return status ? status->code : TSR_OK; }

const char *tsr_status_message(tsr_status_t status) { return status ? status->message : "ok"; }

const char *tsr_status_code_name(tsr_status_code_t code) {
  if ((unsigned)code >= TSR_STATUS_CODE_COUNT) return "unknown";
  return tsr__code_names[code];
}

bool tsr_status_code_from_name(const char *name, tsr_status_code_t *out_code) {
  for (int i = 0; i < TSR_STATUS_CODE_COUNT; i++) {
    if (name && strcmp(name, tsr__code_names[i]) == 0) {
      *out_code = (tsr_status_code_t)i;
      return true;
    }
  }
  return false;
}

void tsr_status_free(tsr_status_t status) {
  if (!status || status == (tsr_status_t)&tsr__status_oom) return;
  free(status);
}
