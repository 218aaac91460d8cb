/* capture.c: stream capture. Between cuStreamBeginCapture and
 * cuStreamEndCapture, work submitted to a stream does not run: kernels
 * become kernel nodes and stream-ordered allocations and frees memory nodes
 * of the capture's graph, each depending on the node captured before it
 * (or, for the first, on the dependencies cuStreamBeginCaptureToGraph was
 * given). As on the real driver:
 *   - the legacy stream cannot capture (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
 *     the per-thread default stream can;
 *   - synchronizing or querying a capturing stream is
 *     CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates the capture;
 *     work submitted after that is CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, and
 *     cuStreamEndCapture gives a NULL graph and
 *     CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
 *   - while a blocking stream captures, the legacy stream of its context
 *     cannot be used: CUDA_ERROR_STREAM_CAPTURE_IMPLICIT (cuStreamIsCapturing
 *     included, which does not invalidate; other uses do: unconfirmed);
 *   - a capture not begun in CU_STREAM_CAPTURE_MODE_RELAXED must be ended by
 *     the thread that began it (CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD);
 *   - beginning twice, or ending a stream that does not capture, is
 *     CUDA_ERROR_ILLEGAL_STATE (unconfirmed);
 *   - an event recorded on a capturing stream adds no node (events.c).
 * Not emulated: cross-stream capture through events (cuStreamWaitEvent),
 * cuStreamGetCaptureInfo, cuThreadExchangeStreamCaptureMode and the
 * "potentially unsafe" calls a GLOBAL capture forbids in other threads. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

typedef struct fc_capture {
  struct fc_graph *graph; /* a reference */
  bool own;               /* made by cuStreamBeginCapture: handed out by a successful end */
  bool invalidated;
  CUstreamCaptureMode mode;
  uint64_t thread; /* fc_thread_id() of the thread that began it */
  uint64_t id;     /* never reused: events recorded in it name it */
  size_t *deps;    /* what the next node depends on: indexes in graph */
  size_t ndeps;
} fc_capture_t;

/* Ends capture `cap` without handing its graph out. */
static void fc_capture_drop(fc_capture_t *cap) {
  if (cap->own)
    fc_graph_discard(cap->graph);
  else
    fc_graph_unref(cap->graph);
  free(cap->deps);
  free(cap);
}

uint64_t fc_capture_id(const struct fc_capture *cap) { return cap->id; }

bool fc_capture_invalidate_id(uint64_t id) {
  for (size_t i = 0; i < g_fc.nobjs[FC_K_STREAM]; i++) {
    fc_stream_t *o = g_fc.objs[FC_K_STREAM][i];
    if (o->capture && o->capture->id == id) return o->capture->invalidated = true;
  }
  for (size_t i = 0; i < g_fc.nptstreams; i++) {
    fc_stream_t *o = g_fc.ptstreams[i];
    if (o->capture && o->capture->id == id) return o->capture->invalidated = true;
  }
  return false;
}

void fc_capture_release(fc_stream_t *s) {
  if (!s->capture) return;
  fc_capture_drop(s->capture);
  s->capture = NULL;
}

void fc_capture_invalidate(fc_stream_t *s) {
  if (s->capture) s->capture->invalidated = true;
}

/* Whether a blocking stream of context `c` captures (its legacy stream then
 * has an implicit dependency on the capture); `invalidate` marks those
 * captures invalidated. */
static bool fc_legacy_blocked(fc_ctx_t *c, bool invalidate) {
  bool blocked = false;
  for (size_t i = 0; i < g_fc.nobjs[FC_K_STREAM]; i++) {
    fc_stream_t *o = g_fc.objs[FC_K_STREAM][i];
    if (o->ctx != c || (o->flags & CU_STREAM_NON_BLOCKING) || !o->capture) continue;
    blocked = true;
    if (invalidate) o->capture->invalidated = true;
  }
  for (size_t i = 0; i < g_fc.nptstreams; i++) {
    fc_stream_t *o = g_fc.ptstreams[i];
    if (o->ctx != c || !o->capture) continue;
    blocked = true;
    if (invalidate) o->capture->invalidated = true;
  }
  return blocked;
}

CUresult fc_capture_submit(fc_stream_t *s, fc_capture_t **out_capture) {
  *out_capture = NULL;
  if (s->capture) {
    if (s->capture->invalidated) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    *out_capture = s->capture;
    return CUDA_SUCCESS;
  }
  if (s->skind == FC_S_LEGACY && fc_legacy_blocked(s->ctx, true)) return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
  return CUDA_SUCCESS;
}

CUresult fc_capture_sync_check(fc_stream_t *s) {
  if (s->capture) {
    s->capture->invalidated = true;
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  if (s->skind == FC_S_LEGACY && fc_legacy_blocked(s->ctx, true)) return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
  return CUDA_SUCCESS;
}

/* The node just added at `index` is what the next one depends on. */
static CUresult fc_capture_advance(fc_capture_t *cap, size_t index) {
  if (cap->ndeps != 1) {
    size_t *one = realloc(cap->deps, sizeof *one);
    if (!one) return CUDA_ERROR_OUT_OF_MEMORY;
    cap->deps = one;
    cap->ndeps = 1;
  }
  cap->deps[0] = index;
  return CUDA_SUCCESS;
}

CUresult fc_capture_kernel(fc_capture_t *cap, const fc_kparams_t *k) {
  size_t at;
  CUresult rc = fc_graph_add_kernel(cap->graph, cap->deps, cap->ndeps, k, &at);
  return rc != CUDA_SUCCESS ? rc : fc_capture_advance(cap, at);
}

CUresult fc_capture_alloc(fc_capture_t *cap, int dev, size_t bytes, CUdeviceptr *out_dptr) {
  if (bytes == 0) {
    *out_dptr = 0;
    return CUDA_SUCCESS;
  }
  size_t at;
  CUresult rc = fc_graph_add_alloc(cap->graph, cap->deps, cap->ndeps, dev, bytes, out_dptr, &at);
  return rc != CUDA_SUCCESS ? rc : fc_capture_advance(cap, at);
}

CUresult fc_capture_free(fc_capture_t *cap, CUdeviceptr dptr) {
  size_t at;
  CUresult rc = fc_graph_add_free(cap->graph, cap->deps, cap->ndeps, dptr, &at);
  return rc != CUDA_SUCCESS ? rc : fc_capture_advance(cap, at);
}

/* ---- the entries --------------------------------------------------------------------- */

/* Begins capture on `h`: into a new graph, or (to_graph) into `into` after
 * its nodes deps[0..ndeps). */
static CUresult fc_begin_capture(CUstream h, bool to_graph, CUgraph into, const CUgraphNode *deps,
                                 const CUgraphEdgeData *edges, size_t ndeps, CUstreamCaptureMode mode) {
  fc_stream_t *s;
  CUresult rc = fc_stream_get(h, &s);
  if (rc != CUDA_SUCCESS) return rc;
  /* "Capture may not be initiated if stream is CU_STREAM_LEGACY" */
  if (s->skind == FC_S_LEGACY) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if ((unsigned)mode > CU_STREAM_CAPTURE_MODE_RELAXED) return CUDA_ERROR_INVALID_VALUE;
  if (s->capture) return CUDA_ERROR_ILLEGAL_STATE;
  fc_capture_t *cap = calloc(1, sizeof *cap);
  if (!cap) return CUDA_ERROR_OUT_OF_MEMORY;
  cap->mode = mode;
  cap->thread = fc_thread_id();
  static uint64_t seq; /* under the fake's mutex */
  cap->id = ++seq;
  if (!to_graph) {
    if ((rc = fc_graph_new(&cap->graph)) != CUDA_SUCCESS) {
      free(cap);
      return rc;
    }
    cap->own = true;
  } else {
    cap->graph = fc_graph_find(into);
    if (!cap->graph || (ndeps > 0 && !deps) || ndeps > fc_graph_count(cap->graph)) {
      free(cap);
      return CUDA_ERROR_INVALID_VALUE;
    }
    if (ndeps > 0 && !(cap->deps = malloc(ndeps * sizeof *cap->deps))) {
      free(cap);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    for (size_t i = 0; i < ndeps; i++) {
      static const CUgraphEdgeData plain; /* full completion, no ports: all the fake knows */
      cap->deps[i] = fc_graph_node_index(cap->graph, deps[i]);
      if (cap->deps[i] == SIZE_MAX || (edges && memcmp(&edges[i], &plain, sizeof plain) != 0)) {
        free(cap->deps);
        free(cap);
        return CUDA_ERROR_INVALID_VALUE;
      }
    }
    cap->ndeps = ndeps;
    fc_graph_ref(cap->graph);
  }
  s->capture = cap;
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode) {
  FC_LOCKED(fc_begin_capture(hStream, false, NULL, NULL, NULL, 0, mode));
}
FC_EXPORT CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode) {
  FC_LOCKED(fc_begin_capture(fc_ptsz(hStream), false, NULL, NULL, NULL, 0, mode));
}
/* CUDA 10.0's entries, before capture modes: global. */
FC_EXPORT CUresult cuStreamBeginCapture(CUstream hStream) {
  FC_LOCKED(fc_begin_capture(hStream, false, NULL, NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_GLOBAL));
}
FC_EXPORT CUresult cuStreamBeginCapture_ptsz(CUstream hStream) {
  FC_LOCKED(fc_begin_capture(fc_ptsz(hStream), false, NULL, NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_GLOBAL));
}
FC_EXPORT CUresult cuStreamBeginCaptureToGraph(CUstream hStream, CUgraph hGraph, const CUgraphNode *dependencies,
                                               const CUgraphEdgeData *dependencyData, size_t numDependencies,
                                               CUstreamCaptureMode mode) {
  FC_LOCKED(fc_begin_capture(hStream, true, hGraph, dependencies, dependencyData, numDependencies, mode));
}
FC_EXPORT CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream hStream, CUgraph hGraph, const CUgraphNode *dependencies,
                                                    const CUgraphEdgeData *dependencyData, size_t numDependencies,
                                                    CUstreamCaptureMode mode) {
  FC_LOCKED(fc_begin_capture(fc_ptsz(hStream), true, hGraph, dependencies, dependencyData, numDependencies, mode));
}

static CUresult fc_end_capture(CUstream h, CUgraph *phGraph) {
  fc_stream_t *s;
  CUresult rc = fc_stream_get(h, &s);
  if (rc != CUDA_SUCCESS) return rc;
  if (!phGraph) return CUDA_ERROR_INVALID_VALUE;
  fc_capture_t *cap = s->capture;
  if (!cap) return CUDA_ERROR_ILLEGAL_STATE;
  if (cap->mode != CU_STREAM_CAPTURE_MODE_RELAXED && cap->thread != fc_thread_id())
    return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
  s->capture = NULL;
  if (cap->invalidated) {
    *phGraph = NULL; /* "If capture was invalidated ... a NULL graph will be returned" */
    fc_capture_drop(cap);
    return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  }
  *phGraph = (CUgraph)cap->graph;
  if (!cap->own) fc_graph_unref(cap->graph); /* the caller's graph: the capture's reference goes */
  free(cap->deps);
  free(cap);
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph) {
  FC_LOCKED(fc_end_capture(hStream, phGraph));
}
FC_EXPORT CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph) {
  FC_LOCKED(fc_end_capture(fc_ptsz(hStream), phGraph));
}

static CUresult fc_stream_is_capturing(CUstream h, CUstreamCaptureStatus *status) {
  if (!status) return CUDA_ERROR_INVALID_VALUE;
  fc_stream_t *s;
  CUresult rc = fc_stream_get(h, &s);
  if (rc != CUDA_SUCCESS) return rc;
  /* the legacy stream depends on a capturing blocking stream: "it will
   * return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT ... The blocking stream capture
   * is not invalidated" */
  if (s->skind == FC_S_LEGACY && fc_legacy_blocked(s->ctx, false)) return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
  *status = !s->capture               ? CU_STREAM_CAPTURE_STATUS_NONE
            : s->capture->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                                      : CU_STREAM_CAPTURE_STATUS_ACTIVE;
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus) {
  FC_LOCKED(fc_stream_is_capturing(hStream, captureStatus));
}
FC_EXPORT CUresult cuStreamIsCapturing_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus) {
  FC_LOCKED(fc_stream_is_capturing(fc_ptsz(hStream), captureStatus));
}
