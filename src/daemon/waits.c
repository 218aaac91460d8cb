/* waits.c: tesserad's side of waiting for capacity (waits.h). */
#include "daemon/waits.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/array.h"
#include "base/log.h"
#include "base/time.h"
#include "base/units.h"
#include "daemon/audit.h"
#include "daemon/daemon.h"
#include "daemon/handlers.h"
#include "proto/proto.h"

const double tsr_wait_buckets[TSR_WAIT_BUCKETS] = {0.005, 0.05, 0.5, 5, 30, 300, 1800, 7200, 86400};

struct tsr__wait_tag_s {
  uint64_t id;
  char *tag; /* raw JSON, NULL: none */
  size_t len;
};

bool tsr_waits_init(tsr_waits_t *ws, uint32_t per_user_max) {
  memset(ws, 0, sizeof(*ws));
  ws->queue = tsr_lease_queue_new(per_user_max);
  return ws->queue != NULL;
}

static void tsr__answers_clear(tsr_waits_t *ws) {
  for (size_t i = 0; i < ws->nanswers; i++) free(ws->answers[i].line);
  ws->nanswers = 0;
}

void tsr_waits_free(tsr_waits_t *ws) {
  tsr_lease_queue_free(ws->queue);
  for (size_t i = 0; i < ws->ntags; i++) free(ws->tags[i].tag);
  free(ws->tags);
  tsr__answers_clear(ws);
  free(ws->answers);
  memset(ws, 0, sizeof(*ws));
}

static tsr_identity_t tsr__who(const tsr_lease_wait_t *w) {
  tsr_identity_t who = {.uid = w->actor.uid, .pid = w->actor.pid, .admin = w->actor.admin};
  snprintf(who.user, sizeof(who.user), "%s", w->actor_name);
  return who;
}

/* Takes request `id`'s "req" out of the table; *out_tag must be freed. */
static void tsr__take_tag(tsr_waits_t *ws, uint64_t id, char **out_tag, size_t *out_len) {
  *out_tag = NULL;
  *out_len = 0;
  for (size_t i = 0; i < ws->ntags; i++) {
    if (ws->tags[i].id != id) continue;
    *out_tag = ws->tags[i].tag;
    *out_len = ws->tags[i].len;
    ws->tags[i] = ws->tags[--ws->ntags];
    return;
  }
}

/* Queues the second reply of request `id`, written by `w` (an open object
 * with its members), closing it with the request's "req". */
static void tsr__answer(tsr_waits_t *ws, uint64_t id, tsr_json_writer_t *w, uint64_t granted) {
  char *tag;
  size_t tag_len;
  tsr__take_tag(ws, id, &tag, &tag_len);
  if (tag) {
    tsr_json_key(w, "req");
    tsr_json_raw(w, tag, tag_len);
  }
  free(tag);
  tsr_json_object_end(w);
  tsr_wait_answer_t *grown = tsr_array_grow(ws->answers, &ws->answers_cap, ws->nanswers + 1, sizeof(*grown), 8);
  char *line = w->failed ? NULL : malloc(w->len + 1);
  if (!grown || !line) {
    /* the waiter's connection stays waiting until it gives up; a granted
     * lease is its owner's all the same (lease list shows it) */
    tsr_log_error("request %llu: out of memory answering it", (unsigned long long)id);
    free(line);
    if (grown) ws->answers = grown;
    tsr_json_writer_free(w);
    return;
  }
  ws->answers = grown;
  memcpy(line, w->buf, w->len + 1);
  ws->answers[ws->nanswers++] = (tsr_wait_answer_t){.id = id, .line = line, .len = w->len, .granted = granted};
  tsr_json_writer_free(w);
}

/* An error second reply, audited as a refusal of the create. */
static void tsr__answer_error(tsr_daemon_t *d, const tsr_lease_wait_t *wait, const char *code, const char *message) {
  tsr_identity_t who = tsr__who(wait);
  tsr_audit_deny(d->audit, &who, "lease.create", code, message, tsr_time_mono_ns());
  tsr_json_writer_t w = {0};
  tsr_json_object_begin(&w);
  tsr_proto_error_write(&w, code, "%s", message);
  tsr__answer(&d->waits, wait->id, &w, 0);
}

void tsr_daemon_waits_write(const tsr_daemon_t *d, tsr_json_writer_t *w, const tsr_lease_wait_t *wait) {
  const tsr_lease_table_t *t = tsr_lease_service_table(d->leases);
  const tsr_device_t *dev = tsr_lease_table_device(t, wait->request.device);
  tsr_proto_queued_t q = {
      .id = wait->id,
      .device = wait->request.device,
      .fraction_ppm = wait->request.fraction_ppm,
      .bytes = dev ? tsr_units_scale_ppm(dev->total_bytes, wait->request.fraction_ppm) : 0,
      .sm_ppm = wait->request.sm_ppm,
      .duration_ns = wait->request.duration_ns,
      .position = tsr_lease_queue_position(d->waits.queue, wait->id),
      .queued_ns = wait->queued_wall_ns,
      .until_ns = wait->until_wall_ns,
  };
  snprintf(q.owner, sizeof(q.owner), "%s",
           wait->request.has_target && wait->request.target_name ? wait->request.target_name : wait->actor_name);
  if (wait->request.job) snprintf(q.job, sizeof(q.job), "%s", wait->request.job);
  tsr_proto_queued_write(w, &q);
}

tsr_status_t tsr_daemon_waits_add(tsr_daemon_t *d, const tsr_lease_wait_t *wait, const char *tag, size_t tag_len,
                                  tsr_json_writer_t *w) {
  tsr_waits_t *ws = &d->waits;
  struct tsr__wait_tag_s *tags = tsr_array_grow(ws->tags, &ws->tags_cap, ws->ntags + 1, sizeof(*tags), 8);
  if (!tags) return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory queueing a request");
  ws->tags = tags;
  char *copy = NULL;
  if (tag && !(copy = malloc(tag_len + 1))) return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  tsr_status_t st = tsr_lease_queue_add(ws->queue, wait);
  if (st) {
    free(copy);
    ws->refused++;
    return st;
  }
  if (copy) {
    memcpy(copy, tag, tag_len);
    copy[tag_len] = '\0';
  }
  ws->tags[ws->ntags++] = (struct tsr__wait_tag_s){wait->id, copy, tag_len};
  ws->deferred = wait->id;
  ws->stale = true;
  const tsr_lease_wait_t *queued = tsr_lease_queue_find(ws->queue, wait->id);
  tsr_log_info("request %llu of %s waits for device %u (position %zu, up to %.0f s)", (unsigned long long)wait->id,
               queued->actor_name, wait->request.device, tsr_lease_queue_position(ws->queue, wait->id),
               (double)(wait->until_mono_ns - wait->queued_mono_ns) / 1e9);
  tsr_json_key_bool(w, "ok", true);
  tsr_json_key(w, "queued");
  tsr_daemon_waits_write(d, w, queued);
  return NULL;
}

/* The requests whose time is up: answered resource_exhausted. */
static void tsr__time_out(tsr_daemon_t *d, uint64_t now_mono) {
  tsr_waits_t *ws = &d->waits;
  for (size_t i = 0; i < tsr_lease_queue_count(ws->queue);) {
    const tsr_lease_wait_t *w = tsr_lease_queue_at(ws->queue, i);
    if (w->until_mono_ns > now_mono) {
      i++;
      continue;
    }
    size_t pos = tsr_lease_queue_position(ws->queue, w->id);
    tsr_lease_wait_t gone;
    if (!tsr_lease_queue_remove(ws->queue, w->id, &gone)) break;
    char waited[32], msg[256];
    tsr_time_format_duration(gone.until_mono_ns - gone.queued_mono_ns, waited, sizeof(waited));
    snprintf(msg, sizeof(msg),
             "not granted within %s: device %u had no room for it (it was number %zu in the device's queue)", waited,
             gone.request.device, pos);
    tsr__answer_error(d, &gone, "resource_exhausted", msg);
    ws->timed_out++;
  }
}

static void tsr__observe_wait(tsr_waits_t *ws, uint64_t ns) {
  ws->wait_sum_ns += ns;
  for (size_t b = 0; b < TSR_WAIT_BUCKETS; b++)
    if ((double)ns / 1e9 <= tsr_wait_buckets[b]) ws->wait_bucket[b]++;
}

void tsr_daemon_waits_run(tsr_daemon_t *d) {
  tsr_waits_t *ws = &d->waits;
  if (!tsr_lease_queue_count(ws->queue)) return;
  tsr_lease_now_t now = {tsr_time_mono_ns(), tsr_time_wall_ns()};
  /* the rule's answer moves only with the leases, the queue or the clock's
   * passing a give-up time: each round of the loop runs it, most for nothing */
  uint64_t due = UINT64_MAX, changes = tsr_lease_table_changes(tsr_lease_service_table(d->leases));
  tsr_lease_queue_next_due(ws->queue, &due);
  if (!ws->stale && changes == ws->seen && due > now.mono_ns) return;
  tsr__time_out(d, now.mono_ns);
  tsr_lease_pick_t p;
  while (tsr_lease_queue_pick(ws->queue, tsr_lease_service_table(d->leases), now, &p)) {
    tsr_lease_wait_t w;
    if (!tsr_lease_queue_remove(ws->queue, p.id, &w)) break;
    tsr_lease_t lease;
    tsr_status_t st = tsr_lease_service_create_as(d->leases, w.id, &w.request, &w.actor, now, &lease);
    if (st) { /* a lock file or region it could not make: the waiter is told */
      tsr__answer_error(d, &w, tsr_status_code_name(tsr_status_code(st)), tsr_status_message(st));
      tsr_status_free(st);
      continue;
    }
    ws->granted++;
    tsr__observe_wait(ws, now.mono_ns - w.queued_mono_ns);
    tsr_log_info("request %llu of %s granted after %.3f s%s: lease %llu", (unsigned long long)w.id, w.actor_name,
                 (double)(now.mono_ns - w.queued_mono_ns) / 1e9, p.backfill ? " (backfilled)" : "",
                 (unsigned long long)lease.id);
    tsr_json_writer_t out = {0};
    tsr_json_object_begin(&out);
    tsr_json_key_bool(&out, "ok", true);
    tsr_json_key(&out, "lease");
    tsr_daemon_lease_write(d, &out, &lease, now.wall_ns);
    tsr__answer(ws, w.id, &out, lease.id);
  }
  ws->stale = false;
  ws->seen = tsr_lease_table_changes(tsr_lease_service_table(d->leases));
}

bool tsr_daemon_waits_withdraw(tsr_daemon_t *d, uint64_t id, const tsr_identity_t *by) {
  tsr_waits_t *ws = &d->waits;
  tsr_lease_wait_t w;
  if (!tsr_lease_queue_remove(ws->queue, id, &w)) return false;
  ws->withdrawn++;
  ws->stale = true; /* a head withdrawn lets the next one go, or a backfill */
  if (!by) {        /* its connection closed: nobody to tell */
    char *tag;
    size_t len;
    tsr__take_tag(ws, id, &tag, &len);
    free(tag);
    tsr_log_info("request %llu of %s withdrawn: its connection closed", (unsigned long long)id, w.actor_name);
    return true;
  }
  char msg[160];
  snprintf(msg, sizeof(msg), "request %llu was withdrawn by %s (lease release)", (unsigned long long)id, by->user);
  tsr_log_info("%s", msg);
  tsr_json_writer_t out = {0};
  tsr_json_object_begin(&out);
  tsr_proto_error_write(&out, TSR_PROTO_ERR_CANCELLED, "%s", msg);
  tsr__answer(ws, id, &out, 0);
  return true;
}

void tsr_daemon_waits_stop(tsr_daemon_t *d) {
  tsr_waits_t *ws = &d->waits;
  while (tsr_lease_queue_count(ws->queue)) {
    tsr_lease_wait_t w;
    if (!tsr_lease_queue_remove(ws->queue, tsr_lease_queue_at(ws->queue, 0)->id, &w)) break;
    tsr_json_writer_t out = {0};
    tsr_json_object_begin(&out);
    tsr_proto_error_write(&out, "unavailable",
                          "tesserad is stopping: request %llu was not granted (waiting requests are not kept "
                          "across a restart; ask again)",
                          (unsigned long long)w.id);
    tsr__answer(ws, w.id, &out, 0);
  }
}

bool tsr_daemon_waits_next_due(const tsr_daemon_t *d, uint64_t *out_mono_ns) {
  return tsr_lease_queue_next_due(d->waits.queue, out_mono_ns);
}

tsr_status_t tsr_daemon_waits_create(tsr_daemon_t *d, const tsr_lease_request_t *r, const tsr_lease_actor_t *actor,
                                     uint64_t wait_ns, const char *tag, size_t tag_len, tsr_json_writer_t *w,
                                     bool *out_queued, tsr_lease_t *out_lease) {
  *out_queued = false;
  tsr_daemon_waits_run(d); /* what waits goes first */
  tsr_waits_t *ws = &d->waits;
  tsr_lease_now_t now = {tsr_time_mono_ns(), tsr_time_wall_ns()};
  if (wait_ns > d->config.max_lease_ns) {
    char lim[32];
    tsr_time_format_duration(d->config.max_lease_ns, lim, sizeof(lim));
    return tsr_status_make(TSR_INVALID_ARGUMENT, "a create waits at most max_lease (%s)", lim);
  }
  bool others_wait = r->device < tsr_lease_table_device_count(tsr_lease_service_table(d->leases)) &&
                     tsr_lease_queue_count_on(ws->queue, r->device) > 0;
  /* an admin's create that does not wait is not held behind the queue: a
   * scheduler's plugin (root) has already given the job its GPU, and a job
   * must not fail because someone waits for that GPU's room */
  if ((!others_wait || actor->admin) && !wait_ns) return tsr_lease_service_create(d->leases, r, actor, now, out_lease);
  uint64_t id;
  TSR_RETURN_IF_ERROR(tsr_lease_service_reserve_id(d->leases, &id));
  tsr_lease_wait_t wait = {.id = id,
                           .request = *r,
                           .actor = *actor,
                           .owner_uid = r->has_target ? r->target_uid : actor->uid,
                           .queued_mono_ns = now.mono_ns,
                           .queued_wall_ns = now.wall_ns,
                           .until_mono_ns = tsr_time_add_sat(now.mono_ns, wait_ns),
                           .until_wall_ns = tsr_time_add_sat(now.wall_ns, wait_ns)};
  const tsr_lease_table_t *t = tsr_lease_service_table(d->leases);
  if (!others_wait || tsr_lease_queue_may_go_first(ws->queue, t, now, &wait)) {
    tsr_status_t st = tsr_lease_service_create_as(d->leases, id, r, actor, now, out_lease);
    /* what cannot fit now but may later waits, when it asked to */
    bool may_wait = st && (tsr_status_code(st) == TSR_RESOURCE_EXHAUSTED || tsr_status_code(st) == TSR_CONFLICT);
    if (!may_wait || !wait_ns) return st;
    tsr_status_free(st);
  } else {
    /* it would go ahead of what waits: is it one that could ever be granted? */
    tsr_status_t st = tsr_lease_table_check_create(t, r, actor, now, id, NULL);
    if (st && tsr_status_code(st) != TSR_RESOURCE_EXHAUSTED && tsr_status_code(st) != TSR_CONFLICT) return st;
    tsr_status_free(st);
    if (!wait_ns) {
      size_t n = tsr_lease_queue_count_on(ws->queue, r->device);
      return tsr_status_make(TSR_RESOURCE_EXHAUSTED,
                             "device %u has %zu request%s waiting for its room ahead of this one; ask with "
                             "--wait DURATION to queue behind them",
                             r->device, n, n == 1 ? "" : "s");
    }
  }
  uint64_t at;
  if (!tsr_lease_table_room_at(t, r->device, r->fraction_ppm, r->sm_ppm, now.mono_ns, &at))
    return tsr_status_make(TSR_RESOURCE_EXHAUSTED, "device %u could not hold this lease even empty", r->device);
  TSR_RETURN_IF_ERROR(tsr_daemon_waits_add(d, &wait, tag, tag_len, w));
  *out_queued = true;
  return NULL;
}

void tsr_daemon_waits_list(const tsr_daemon_t *d, const tsr_identity_t *who, bool everyone, const char *job,
                           tsr_json_writer_t *w) {
  const tsr_lease_queue_t *q = d->waits.queue;
  tsr_json_key_bool(w, "ok", true);
  tsr_json_key(w, "queued");
  tsr_json_array_begin(w);
  uint64_t others = 0;
  for (size_t i = 0; i < tsr_lease_queue_count(q); i++) {
    const tsr_lease_wait_t *wait = tsr_lease_queue_at(q, i);
    if (job[0] && (!wait->request.job || strcmp(wait->request.job, job) != 0)) continue;
    bool mine = wait->owner_uid == who->uid || wait->actor.uid == who->uid;
    if (!mine && !(everyone && who->admin)) {
      others++;
      continue;
    }
    tsr_daemon_waits_write(d, w, wait);
  }
  tsr_json_array_end(w);
  /* an ordinary user sees her own requests; of others', how many wait */
  if (everyone && !who->admin) tsr_json_key_u64(w, "others", others);
}
