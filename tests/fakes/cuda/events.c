/* events.c: events, what the shim times kernels with.
 *
 * An event belongs to the context current when it was made. Recorded on a
 * stream, it completes where the work queued on that stream so far ends on
 * the timeline (timeline.c), or at once if the stream is idle; queries
 * answer CUDA_ERROR_NOT_READY before that, cuEventSynchronize sleeps until
 * then (the lock released), and cuEventElapsedTime gives the time between
 * two completions in milliseconds. As the reference says (the probe asks the
 * H100 the same): an event never recorded is complete; elapsed time needs
 * both events recorded (else CUDA_ERROR_INVALID_HANDLE), both with timing
 * (else CUDA_ERROR_INVALID_HANDLE) and both complete (else
 * CUDA_ERROR_NOT_READY); an event and a stream of different contexts are
 * CUDA_ERROR_INVALID_HANDLE; CU_EVENT_INTERPROCESS needs
 * CU_EVENT_DISABLE_TIMING. An event recorded on a capturing stream is part
 * of the capture (no node is added): querying, synchronizing or timing it is
 * CUDA_ERROR_CAPTURED_EVENT until it is recorded again outside capture.
 * CU_EVENT_RECORD_EXTERNAL (an event record node) is not emulated:
 * CUDA_ERROR_NOT_SUPPORTED in capture (unconfirmed), CUDA_ERROR_INVALID_VALUE
 * outside it ("invalid outside of stream capture"). */
#include <stdlib.h>

#include "internal.h"

typedef enum { FC_E_NEVER, FC_E_RECORDED, FC_E_CAPTURED } fc_estate_t;

typedef struct {
  fc_obj_t hdr;
  fc_ctx_t *ctx;
  unsigned flags; /* CU_EVENT_* */
  fc_estate_t state;
  uint64_t capture_id; /* FC_E_CAPTURED: the capture it was recorded in */
  uint64_t at_ns;      /* FC_E_RECORDED: when it completes (CLOCK_MONOTONIC) */
} fc_event_t;

static CUresult fc_event_create(CUevent *phEvent, unsigned int flags) {
  fc_ctx_t *c;
  CUresult rc = fc_current(&c);
  if (rc != CUDA_SUCCESS) return rc;
  const unsigned known = CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS;
  if (!phEvent || (flags & ~known)) return CUDA_ERROR_INVALID_VALUE;
  /* "CU_EVENT_INTERPROCESS must be specified along with CU_EVENT_DISABLE_TIMING" */
  if ((flags & CU_EVENT_INTERPROCESS) && !(flags & CU_EVENT_DISABLE_TIMING)) return CUDA_ERROR_INVALID_VALUE;
  fc_event_t *e = fc_obj_new(FC_K_EVENT, sizeof *e);
  if (!e) return CUDA_ERROR_OUT_OF_MEMORY;
  e->ctx = c;
  e->flags = flags;
  *phEvent = (CUevent)e;
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags) { FC_LOCKED(fc_event_create(phEvent, Flags)); }

/* A destroyed event's pending completion needs nothing from it. */
static CUresult fc_event_destroy(CUevent h) {
  fc_event_t *e = fc_obj_find(FC_K_EVENT, h);
  if (!e) return CUDA_ERROR_INVALID_HANDLE;
  fc_obj_remove(FC_K_EVENT, e);
  free(e);
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuEventDestroy_v2(CUevent hEvent) { FC_LOCKED(fc_event_destroy(hEvent)); }
FC_EXPORT CUresult cuEventDestroy(CUevent hEvent) { FC_LOCKED(fc_event_destroy(hEvent)); }

void fc_events_release(fc_ctx_t *ctx) {
  for (size_t i = g_fc.nobjs[FC_K_EVENT]; i-- > 0;) {
    fc_event_t *e = g_fc.objs[FC_K_EVENT][i];
    if (e->ctx == ctx) fc_event_destroy((CUevent)e);
  }
}

static CUresult fc_event_record(CUevent h, CUstream hs, unsigned int flags) {
  fc_event_t *e = fc_obj_find(FC_K_EVENT, h);
  if (!e) return CUDA_ERROR_INVALID_HANDLE;
  fc_stream_t *s;
  CUresult rc = fc_stream_get(hs, &s);
  if (rc != CUDA_SUCCESS) return rc;
  if (flags & ~(unsigned)CU_EVENT_RECORD_EXTERNAL) return CUDA_ERROR_INVALID_VALUE;
  /* "hEvent and hStream must be from the same context otherwise
   * CUDA_ERROR_INVALID_HANDLE is returned" */
  if (s->ctx != e->ctx) return CUDA_ERROR_INVALID_HANDLE;
  /* outside a capture CUDA_ERROR_ILLEGAL_STATE (the H100) */
  if (flags & CU_EVENT_RECORD_EXTERNAL) return s->capture ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_ILLEGAL_STATE;
  struct fc_capture *cap;
  if ((rc = fc_capture_submit(s, &cap)) != CUDA_SUCCESS) return rc;
  if (cap) {
    e->state = FC_E_CAPTURED;
    e->capture_id = fc_capture_id(cap);
    return CUDA_SUCCESS;
  }
  uint64_t now = fc_now_ns(), at = fc_stream_position(s);
  e->state = FC_E_RECORDED;
  e->at_ns = at > now ? at : now;
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuEventRecord(CUevent hEvent, CUstream hStream) { FC_LOCKED(fc_event_record(hEvent, hStream, 0)); }
FC_EXPORT CUresult cuEventRecord_ptsz(CUevent hEvent, CUstream hStream) {
  FC_LOCKED(fc_event_record(hEvent, fc_ptsz(hStream), 0));
}
FC_EXPORT CUresult cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int flags) {
  FC_LOCKED(fc_event_record(hEvent, hStream, flags));
}
FC_EXPORT CUresult cuEventRecordWithFlags_ptsz(CUevent hEvent, CUstream hStream, unsigned int flags) {
  FC_LOCKED(fc_event_record(hEvent, fc_ptsz(hStream), flags));
}

/* "Before the first call to cuEventRecord(), an event represents an empty
 * set of work, so for example cuEventQuery() would return CUDA_SUCCESS" */
/* What using an event last recorded in a capture answers: while that
 * capture lasts CUDA_ERROR_CAPTURED_EVENT, and the capture is invalidated
 * (the H100: the capture's end then fails with
 * CUDA_ERROR_STREAM_CAPTURE_INVALIDATED); after it ended,
 * CUDA_ERROR_INVALID_VALUE. Synchronizing and timing it are taken to
 * answer as a query does (unconfirmed). */
static CUresult fc_event_captured(const fc_event_t *e) {
  return fc_capture_invalidate_id(e->capture_id) ? CUDA_ERROR_CAPTURED_EVENT : CUDA_ERROR_INVALID_VALUE;
}

static CUresult fc_event_query(CUevent h) {
  fc_event_t *e = fc_obj_find(FC_K_EVENT, h);
  if (!e) return CUDA_ERROR_INVALID_HANDLE;
  if (e->state == FC_E_CAPTURED) return fc_event_captured(e);
  return e->state == FC_E_NEVER || fc_now_ns() >= e->at_ns ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
FC_EXPORT CUresult cuEventQuery(CUevent hEvent) { FC_LOCKED(fc_event_query(hEvent)); }

static CUresult fc_event_sync(CUevent h) {
  fc_event_t *e = fc_obj_find(FC_K_EVENT, h);
  if (!e) return CUDA_ERROR_INVALID_HANDLE;
  if (e->state == FC_E_CAPTURED) return fc_event_captured(e);
  if (e->state == FC_E_RECORDED) fc_sleep_until(e->at_ns);
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuEventSynchronize(CUevent hEvent) { FC_LOCKED(fc_event_sync(hEvent)); }

static CUresult fc_event_elapsed(float *ms, CUevent hStart, CUevent hEnd) {
  if (!ms) return CUDA_ERROR_INVALID_HANDLE; /* the H100 */
  fc_event_t *a = fc_obj_find(FC_K_EVENT, hStart), *b = fc_obj_find(FC_K_EVENT, hEnd);
  if (!a || !b) return CUDA_ERROR_INVALID_HANDLE;
  if ((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING) return CUDA_ERROR_INVALID_HANDLE;
  if (a->state == FC_E_NEVER || b->state == FC_E_NEVER) return CUDA_ERROR_INVALID_HANDLE;
  if (a->state == FC_E_CAPTURED) return fc_event_captured(a);
  if (b->state == FC_E_CAPTURED) return fc_event_captured(b);
  uint64_t now = fc_now_ns();
  if (now < a->at_ns || now < b->at_ns) return CUDA_ERROR_NOT_READY;
  /* negative when the end completed first, as on the real driver */
  double ns = b->at_ns >= a->at_ns ? (double)(b->at_ns - a->at_ns) : -(double)(a->at_ns - b->at_ns);
  *ms = (float)(ns / 1e6);
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuEventElapsedTime_v2(float *pMilliseconds, CUevent hStart, CUevent hEnd) {
  FC_LOCKED(fc_event_elapsed(pMilliseconds, hStart, hEnd));
}
/* The CUDA 2.0 entry: the same answers (it may also report errors of
 * pending work, which the fake has none of). */
FC_EXPORT CUresult cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd) {
  FC_LOCKED(fc_event_elapsed(pMilliseconds, hStart, hEnd));
}
