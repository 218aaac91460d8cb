/* tessera/status.h: the status type every cold-path function returns.
 *
 * A tsr_status_t is a pointer: NULL means success and costs nothing to test;
 * anything else is a heap-allocated error carrying a code and a formatted
 * message. The caller that receives a non-NULL status owns it and must pass it
 * to tsr_status_free() (or hand it on). Statuses are plain values with no
 * shared state: any thread may create, read and free its own.
 *
 * Hot paths (accounting, frontier comparisons) never return a status; they
 * return plain values. */
#ifndef TESSERA_STATUS_H
#define TESSERA_STATUS_H

#include <stdarg.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Error codes. Each has a stable snake_case name (tsr_status_code_name) used
 * on the wire and in logs; never renumber, only append. */
typedef enum tsr_status_code_e {
  TSR_OK = 0,
  TSR_INVALID_ARGUMENT = 1,    /* the caller's input is malformed or out of range */
  TSR_NOT_FOUND = 2,           /* the named object does not exist */
  TSR_ALREADY_EXISTS = 3,      /* the object to create is there already */
  TSR_PERMISSION_DENIED = 4,   /* the caller may not do this */
  TSR_RESOURCE_EXHAUSTED = 5,  /* not enough memory/capacity/slots for the request */
  TSR_FAILED_PRECONDITION = 6, /* the system is not in a state that allows this */
  TSR_CONFLICT = 7,            /* another owner holds a conflicting claim */
  TSR_UNAVAILABLE = 8,         /* a service or device cannot be reached now */
  TSR_IO_ERROR = 9,            /* a read, write or sync failed */
  TSR_DATA_LOSS = 10,          /* stored data is corrupt or unreadable */
  TSR_INTERNAL = 11,           /* a bug: an invariant did not hold */
  TSR_UNIMPLEMENTED = 12,      /* not supported by this build or platform */
  TSR_OUT_OF_MEMORY = 13,      /* malloc failed */
  TSR_STATUS_CODE_COUNT
} tsr_status_code_t;

typedef struct tsr_status_s *tsr_status_t;

/* On every function that returns a status: the caller must look at it
 * (and free it), or the compiler says so. */
#if defined(__GNUC__) || defined(__clang__)
#define TSR_MUST_USE __attribute__((warn_unused_result))
#else
#define TSR_MUST_USE
#endif

/* On the constructors below, which never return NULL: callers (and the
 * static analyser) may rely on it. */
#if defined(__GNUC__) || defined(__clang__)
#define TSR_NEVER_NULL __attribute__((returns_nonnull))
#else
#define TSR_NEVER_NULL
#endif

/* Makes an error status with a printf-style message. `code` must not be
 * TSR_OK. Never returns NULL: if allocation fails, a static out-of-memory
 * status is returned (tsr_status_free ignores it). */
TSR_MUST_USE TSR_NEVER_NULL tsr_status_t tsr_status_make(tsr_status_code_t code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
TSR_MUST_USE TSR_NEVER_NULL tsr_status_t tsr_status_makev(tsr_status_code_t code, const char *fmt, va_list ap);

/* Makes an error from an errno value: the code follows errno (ENOENT ->
 * NOT_FOUND, EACCES/EPERM -> PERMISSION_DENIED, ENOMEM -> OUT_OF_MEMORY, other
 * I/O errors -> IO_ERROR) and the message is "<fmt>: <strerror(err)>". */
TSR_MUST_USE TSR_NEVER_NULL tsr_status_t tsr_status_from_errno(int err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Prefixes the message with "<fmt>: ", keeping the code. Consumes `status`
 * and returns the annotated one; NULL stays NULL. */
TSR_MUST_USE tsr_status_t tsr_status_annotate(tsr_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The code of `status`; TSR_OK for NULL. */
tsr_status_code_t tsr_status_code(tsr_status_t status);

/* The message of `status` ("ok" for NULL). Valid until the status is freed. */
const char *tsr_status_message(tsr_status_t status);

/* The stable name of a code, e.g. "permission_denied"; "unknown" if out of range. */
const char *tsr_status_code_name(tsr_status_code_t code);

/* Parses a name made by tsr_status_code_name; false if unknown. */
bool tsr_status_code_from_name(const char *name, tsr_status_code_t *out_code);

/* Frees `status`; NULL and the static out-of-memory status are ignored. */
void tsr_status_free(tsr_status_t status);

static inline bool tsr_status_is_ok(tsr_status_t status) { return status == 0; }

/* Returns from the enclosing function with the status of `expr` if it failed. */
#define TSR_RETURN_IF_ERROR(expr)   \
  do {                              \
    tsr_status_t tsr__st_ = (expr); \
    if (tsr__st_) return tsr__st_;  \
  } while (0)

/* For the static analyser only (scripts/analyze.sh): clang-tidy 14 follows
 * neither returns_nonnull nor _Nonnull on a return, so it walks paths where
 * a made error is NULL, that is "success" after a failure, and reports what
 * it finds there. These wrappers tell it the constructors never return NULL.
 * No compiler build sees them. */
#if defined(__clang_analyzer__) && !defined(TSR_STATUS_DEFINING)
TSR_MUST_USE static inline tsr_status_t tsr__analyzer_never_null(tsr_status_t status) {
  if (!status) __builtin_unreachable();
  return status;
}
#define tsr_status_make(...) tsr__analyzer_never_null(tsr_status_make(__VA_ARGS__))
#define tsr_status_makev(...) tsr__analyzer_never_null(tsr_status_makev(__VA_ARGS__))
#define tsr_status_from_errno(...) tsr__analyzer_never_null(tsr_status_from_errno(__VA_ARGS__))
#endif

#ifdef __cplusplus
}
#endif
#endif /* TESSERA_STATUS_H */
