/* lease_wait.c: the CLI's side of creates that wait for capacity: the
 * notice while a create waits, a release that withdraws one, and `lease
 * list --queued` (docs/leases.md, "Waiting for capacity"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/array.h"
#include "base/time.h"
#include "base/units.h"
#include "cli/client.h"
#include "proto/requests.h"

/* The queued object a reply member holds; false (said) when it is bad. */
static bool tsr__queued_of(const tsr_json_member_t *m, tsr_proto_queued_t *out) {
  tsr_status_t st = tsr_proto_queued_parse(m->value, m->value_len, out);
  if (!st) return true;
  tsr_cli_error("%s", tsr_status_message(st));
  tsr_status_free(st);
  return false;
}

int tsr_cli_await_grant(tsr_cli_reply_t *r) {
  const tsr_json_member_t *m = tsr_json_find(r->members, r->count, "queued");
  if (!m || m->type != TSR_JSON_OBJECT || tsr_json_find(r->members, r->count, "lease")) return TSR_EXIT_OK;
  tsr_proto_queued_t q;
  if (!tsr__queued_of(m, &q)) return TSR_EXIT_INTERNAL;
  char size[32], share[16], wait[32];
  tsr_format_size(q.bytes, size, sizeof(size));
  tsr_format_percent(q.fraction_ppm, share, sizeof(share));
  tsr_time_format_duration(tsr_time_sub_sat(q.until_ns, q.queued_ns), wait, sizeof(wait));
  fprintf(stderr,
          "tessera: device %u has no room for %s (%s) now: request %llu waits, number %llu in the device's "
          "queue, for up to %s (Ctrl-C or `tessera lease release %llu` withdraws it)\n",
          q.device, size, share, (unsigned long long)q.id, (unsigned long long)q.position, wait,
          (unsigned long long)q.id);
  fflush(stderr);
  char lost[160];
  snprintf(lost, sizeof(lost),
           "tesserad went away while request %llu waited (it stopped or restarted): nothing was granted; ask again",
           (unsigned long long)q.id);
  return tsr_cli_next(r, lost);
}

bool tsr_cli_print_withdrawn(const tsr_cli_reply_t *r, bool json, int *out_rc) {
  const tsr_json_member_t *m = tsr_json_find(r->members, r->count, "withdrawn");
  if (!m || m->type != TSR_JSON_OBJECT) return false;
  tsr_proto_queued_t q;
  if (!tsr__queued_of(m, &q)) {
    *out_rc = TSR_EXIT_INTERNAL;
    return true;
  }
  if (json) {
    *out_rc = tsr_cli_print_json(m->value, m->value_len);
    return true;
  }
  char waited[32];
  tsr_time_format_duration(tsr_time_sub_sat(tsr_time_wall_ns(), q.queued_ns), waited, sizeof(waited));
  printf("request %llu withdrawn: it waited %s for device %u (number %llu in its queue); nothing was granted\n",
         (unsigned long long)q.id, waited, q.device, (unsigned long long)q.position);
  *out_rc = TSR_EXIT_OK;
  return true;
}

int tsr_cli_list_queued(const tsr_cli_globals_t *g, bool all, const char *job, bool json) {
  tsr_json_writer_t w = {0};
  tsr_proto_list_t lq = {.all = all, .queued = true};
  if (job) snprintf(lq.job, sizeof(lq.job), "%s", job);
  tsr_proto_list_write(&w, &lq);
  tsr_cli_reply_t r = {0};
  int rc = tsr_cli_call(g, &w, &r);
  tsr_json_writer_free(&w);
  const tsr_json_member_t *list = rc ? NULL : tsr_cli_reply_member(&r, "queued", TSR_JSON_ARRAY);
  if (!rc && !list) rc = TSR_EXIT_INTERNAL;
  if (!rc && json) {
    rc = tsr_cli_print_json(list->value, list->value_len);
  } else if (!rc) {
    uint64_t others = 0, now = tsr_time_wall_ns();
    if (!tsr_json_get_u64(tsr_json_find(r.members, r.count, "others"), &others)) others = 0;
    size_t cur = 0, n = 0;
    tsr_json_member_t item;
    while (!rc && tsr_json_array_next(list->value, list->value_len, &cur, &item)) {
      tsr_proto_queued_t q;
      if (!tsr__queued_of(&item, &q)) {
        rc = TSR_EXIT_INTERNAL;
        break;
      }
      if (n++ == 0)
        printf("%-8s %-6s %-8s %-10s %-9s %-9s %-12s %-9s %-9s %s\n", "ID", "DEVICE", "POSITION", "MEMORY", "FRACTION",
               "SM", "OWNER", "FOR", "WAITED", "GIVES UP IN");
      char size[32], share[16], sm[16], dur[32], waited[32], left[32];
      tsr_format_size(q.bytes, size, sizeof(size));
      tsr_format_percent(q.fraction_ppm, share, sizeof(share));
      if (q.sm_ppm)
        tsr_format_percent(q.sm_ppm, sm, sizeof(sm));
      else
        snprintf(sm, sizeof(sm), "-");
      tsr_time_format_duration(q.duration_ns, dur, sizeof(dur));
      tsr_time_format_duration(tsr_time_sub_sat(now, q.queued_ns), waited, sizeof(waited));
      tsr_time_format_duration(tsr_time_sub_sat(q.until_ns, now), left, sizeof(left));
      printf("%-8llu %-6u %-8llu %-10s %-9s %-9s %-12s %-9s %-9s %s\n", (unsigned long long)q.id, q.device,
             (unsigned long long)q.position, size, share, sm, q.owner, dur, waited, left);
    }
    if (!rc && n == 0 && !others) printf(all ? "no request waits for capacity\n" : "none of your requests waits\n");
    if (!rc && others)
      printf("%s%llu request%s of other users wait%s; their details are for admins\n", n ? "and " : "",
             (unsigned long long)others, others == 1 ? "" : "s", others == 1 ? "s" : "");
  }
  tsr_cli_reply_close(&r);
  return rc;
}
