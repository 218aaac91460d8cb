/* lease.c: `tessera lease create|release|renew|resize|list|show`. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/array.h"
#include "base/json.h"
#include "base/time.h"
#include "base/units.h"
#include "cli/cli.h"
#include "cli/client.h"
#include "proto/proto.h"
#include "proto/requests.h"

static void tsr__lease_usage(FILE *out) {
  fprintf(out,
          "usage: tessera lease <command> [options]\n"
          "\n"
          "commands:\n"
          "  create --device N --mem SHARE|SIZE --for DURATION [--sm SHARE] [--user NAME]\n"
          "         [--on-expiry revoke|signal] [--over-limit signal|log] [--job ID]\n"
          "         [--wait DURATION]\n"
          "                     hold SHARE (or SIZE) of device N's memory for DURATION\n"
          "  release ID         end a lease early (its owner or an admin)\n"
          "  renew ID --for DURATION | --until TIME\n"
          "                     move a lease's deadline (its owner or an admin)\n"
          "  resize ID [--mem SHARE|SIZE] [--sm SHARE] [--force]\n"
          "                     change a lease's memory or SM share while it runs\n"
          "  list [--all] [--job ID] [--queued]\n"
          "                     your active leases (--all: everyone's; --job: of one job;\n"
          "                     --queued: the creates waiting for capacity)\n"
          "  show ID            one lease, active or recently ended\n"
          "\n"
          "SHARE is 25%% or 0.25; SIZE 40GiB, 512MiB; DURATION 90s, 15m, 2h, 1h30m, 1d.\n"
          "Every command takes --json (machine-readable output) and --help.\n");
}

/* ---- printing ------------------------------------------------------------ */

/* "2026-11-22T16:30:00Z": the DEADLINE column's width when others follow. */
#define TSR__DEADLINE_WIDTH 20

/* Optional columns of `lease list`: each is shown only when a listed lease
 * has something to say in it. */
typedef struct {
  bool jobs;       /* JOB: a lease has a job label */
  bool over_limit; /* OVER LIMIT: a lease's over-limit action is log, not the default signal */
} tsr__columns_t;

static void tsr__print_lease_line(const tsr_lease_t *l, uint64_t now, tsr__columns_t cols) {
  char size[32], share[16], sm[16], left[32], deadline[48];
  tsr_format_size(l->bytes, size, sizeof(size));
  tsr_format_percent(l->fraction_ppm, share, sizeof(share));
  if (l->sm_ppm)
    tsr_format_percent(l->sm_ppm, sm, sizeof(sm));
  else
    snprintf(sm, sizeof(sm), "-");
  if (l->state == TSR_LEASE_ACTIVE)
    tsr_time_format_duration(tsr_time_sub_sat(l->deadline_wall_ns, now), left, sizeof(left));
  else
    snprintf(left, sizeof(left), "-");
  tsr_time_format_rfc3339(l->deadline_wall_ns, 0, deadline, sizeof(deadline));
  int wide = cols.over_limit || cols.jobs ? TSR__DEADLINE_WIDTH : 0; /* columns follow */
  printf("%-8llu %-6u %-10s %-9s %-9s %-12s %-8s %-9s %-*s", (unsigned long long)l->id, l->device, size, share, sm,
         l->owner, tsr_proto_lease_state_name(l->state), left, wide, deadline);
  if (cols.over_limit)
    printf("  %-10s", l->over_limit == TSR_LEASE_OVER_LIMIT_DEFAULT /* a daemon before it */
                          ? "-"
                          : tsr_lease_over_limit_name(l->over_limit));
  if (cols.jobs) printf("  %s", l->job[0] ? l->job : "-");
  printf("\n");
}

static void tsr__print_header(tsr__columns_t cols) {
  int wide = cols.over_limit || cols.jobs ? TSR__DEADLINE_WIDTH : 0;
  printf("%-8s %-6s %-10s %-9s %-9s %-12s %-8s %-9s %-*s%s%s\n", "ID", "DEVICE", "MEMORY", "FRACTION", "SM", "OWNER",
         "STATE", "ENDS IN", wide, "DEADLINE (UTC)", cols.over_limit ? "  OVER LIMIT" : "", cols.jobs ? "  JOB" : "");
}

static void tsr__print_lease_detail(const tsr_lease_t *l, uint64_t now) {
  char size[32], share[16], sm[16], t[48];
  tsr_format_size(l->bytes, size, sizeof(size));
  tsr_format_percent(l->fraction_ppm, share, sizeof(share));
  printf("lease      %llu\n", (unsigned long long)l->id);
  printf("state      %s\n", tsr_proto_lease_state_name(l->state));
  printf("device     %u\n", l->device);
  printf("memory     %s (%s, %llu bytes)\n", size, share, (unsigned long long)l->bytes);
  if (l->sm_ppm) {
    tsr_format_percent(l->sm_ppm, sm, sizeof(sm));
    printf("sm share   %s\n", sm);
  } else {
    printf("sm share   not limited\n");
  }
  printf("owner      %s (uid %u)\n", l->owner, l->owner_uid);
  if (l->creator_uid != l->owner_uid) printf("created by %s (uid %u)\n", l->creator, l->creator_uid);
  if (l->on_expiry != TSR_LEASE_ACTION_DEFAULT)
    printf("on expiry  %s\n", l->on_expiry == TSR_LEASE_ACTION_SIGNAL
                                  ? "signal (SIGTERM to its processes, SIGKILL after the grace)"
                                  : "revoke (allocations fail; processes are left alone)");
  if (l->over_limit != TSR_LEASE_OVER_LIMIT_DEFAULT)
    printf("over limit %s\n", l->over_limit == TSR_LEASE_OVER_LIMIT_SIGNAL
                                  ? "signal (the backstop SIGTERMs its processes when they hold "
                                    "more than the lease, SIGKILL after the grace)"
                                  : "log (the backstop logs and audits processes over the lease, "
                                    "nothing more)");
  if (l->job[0]) printf("job        %s\n", l->job);
  printf("host       %s\n", l->host);
  tsr_time_format_rfc3339(l->start_wall_ns, 3, t, sizeof(t));
  printf("start      %s\n", t);
  tsr_time_format_rfc3339(l->deadline_wall_ns, 3, t, sizeof(t));
  if (l->state == TSR_LEASE_ACTIVE) {
    char left[32];
    tsr_time_format_duration(tsr_time_sub_sat(l->deadline_wall_ns, now), left, sizeof(left));
    printf("deadline   %s (in %s)\n", t, left);
  } else {
    printf("deadline   %s\n", t);
    tsr_time_format_rfc3339(l->ended_wall_ns, 3, t, sizeof(t));
    printf("ended      %s\n", t);
  }
}

/* ---- talking to the daemon --------------------------------------------------------- */

/* The lease a reply carries, read from its span. */
static int tsr__lease_from_reply(const tsr_cli_reply_t *r, const tsr_json_member_t **out_member, tsr_lease_t *out) {
  const tsr_json_member_t *m = tsr_cli_reply_member(r, "lease", TSR_JSON_OBJECT);
  if (!m) return TSR_EXIT_INTERNAL;
  *out_member = m;
  return tsr_cli_fail(tsr_proto_lease_parse(m->value, m->value_len, out));
}

int tsr_cli_lease_fetch(const tsr_cli_globals_t *g, const tsr_json_writer_t *w, tsr_lease_t *out_lease,
                        tsr_proto_lease_usage_t *out_usage, bool *out_has_usage) {
  tsr_cli_reply_t r = {0};
  int rc = tsr_cli_call(g, w, &r);
  if (!rc) rc = tsr_cli_await_grant(&r);
  const tsr_json_member_t *m = NULL;
  if (!rc) rc = tsr__lease_from_reply(&r, &m, out_lease);
  bool has = !rc && tsr_proto_lease_usage_parse(m->value, m->value_len, out_usage);
  if (out_has_usage) *out_has_usage = has;
  tsr_cli_reply_close(&r);
  return rc;
}

/* Sends `w`'s request, whose reply carries a lease, and prints that lease:
 * as JSON, or with `print`. */
static int tsr__lease_call(const tsr_cli_globals_t *g, const tsr_json_writer_t *w, bool json,
                           void (*print)(const tsr_lease_t *, const tsr_proto_lease_usage_t *)) {
  tsr_cli_reply_t r = {0};
  int rc = tsr_cli_call(g, w, &r);
  if (!rc) rc = tsr_cli_await_grant(&r);
  if (!rc && tsr_cli_print_withdrawn(&r, json, &rc)) { /* a release of a waiting create */
    tsr_cli_reply_close(&r);
    return rc;
  }
  const tsr_json_member_t *m = NULL;
  tsr_lease_t l;
  if (!rc) rc = tsr__lease_from_reply(&r, &m, &l);
  tsr_proto_lease_usage_t usage;
  bool has_usage = !rc && tsr_proto_lease_usage_parse(m->value, m->value_len, &usage);
  if (!rc && json)
    rc = tsr_cli_print_json(m->value, m->value_len);
  else if (!rc)
    print(&l, has_usage ? &usage : NULL);
  tsr_cli_reply_close(&r);
  return rc;
}

/* ---- argument helpers ------------------------------------------------------ */

static bool tsr__all_digits(const char *text) { return *text && strspn(text, "0123456789") == strlen(text); }

TSR_MUST_USE static tsr_status_t tsr__parse_id(const char *text, uint64_t *out) {
  uint64_t v = 0;
  tsr_status_t st = tsr_parse_u64(text, &v);
  bool ok = st == NULL;
  tsr_status_free(st);
  /* all digits but past 2^64 is as much too large as past 2^63 */
  if (tsr__all_digits(text) && (!ok || v > TSR_LEASE_ID_MAX))
    return tsr_status_make(TSR_INVALID_ARGUMENT, "'%s' is not a lease id: the largest is %llu", text,
                           (unsigned long long)TSR_LEASE_ID_MAX);
  if (!ok || v == 0)
    return tsr_status_make(TSR_INVALID_ARGUMENT,
                           "'%s' is not a lease id (a number from 1, as `tessera lease list` shows)", text);
  *out = v;
  return NULL;
}

/* A name --user can send: what the daemon looks up (a user name, or a uid
 * in decimal). Checked here so that a name that cannot be sent is an error,
 * never a request for someone else. */
TSR_MUST_USE static tsr_status_t tsr__check_user(const char *name) {
  size_t n = strlen(name);
  if (n == 0 || n >= TSR_LEASE_NAME_MAX)
    return tsr_status_make(TSR_INVALID_ARGUMENT, "--user: a user name has 1 to %d bytes, not %zu",
                           TSR_LEASE_NAME_MAX - 1, n);
  if (!tsr_json_utf8_valid(name, n))
    return tsr_status_make(TSR_INVALID_ARGUMENT, "--user: the name is not valid UTF-8");
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)name[i];
    /* C0 controls, space, DEL, and the C1 controls U+0080..U+009F (C2 80..9F) */
    bool c1 = c == 0xC2 && (unsigned char)name[i + 1] >= 0x80 && (unsigned char)name[i + 1] <= 0x9F;
    if (c <= 0x20 || c == 0x7F || c1)
      return tsr_status_make(TSR_INVALID_ARGUMENT, "--user: a user name has no spaces or control characters");
  }
  return NULL;
}

/* Parses `--json`/`--help` and one positional ID for release and show;
 * -1 after --help. */
static int tsr__id_command(int argc, char **argv, const char *usage, uint64_t *out_id, bool *out_json) {
  int rc = tsr_cli_parse_flags(argc, argv, usage, 1, out_json, NULL);
  if (rc) return rc;
  return tsr_cli_fail(tsr__parse_id(argv[optind], out_id));
}

/* ---- subcommands --------------------------------------------------------- */

/* The share of device `dev`'s memory that holds at least `bytes`, in ppm,
 * rounded up; asks the daemon for the device's size. */
static int tsr__fraction_of(const tsr_cli_globals_t *g, uint32_t dev, uint64_t bytes, const char *text,
                            uint32_t *out_ppm) {
  tsr_cli_reply_t r = {0};
  const tsr_json_member_t *list = NULL;
  int rc = tsr_cli_devices_call(g, &r, &list);
  uint64_t total = 0;
  tsr_json_member_t item;
  for (size_t cur = 0; !rc && tsr_json_array_next(list->value, list->value_len, &cur, &item);) {
    tsr_cli_device_t d;
    rc = tsr_cli_fail(tsr_cli_device_parse(item.value, item.value_len, &d));
    if (!rc && d.index == dev) total = d.memory_bytes;
  }
  tsr_cli_reply_close(&r);
  if (rc) return rc;
  if (total == 0) {
    tsr_cli_error("no device %u on this node (see `tessera devices`)", dev);
    return tsr_cli_exit_for_code("not_found");
  }
  unsigned __int128 ppm = ((unsigned __int128)bytes * TSR_PPM_ONE + total - 1) / total;
  if (ppm > TSR_PPM_ONE) {
    char have[32];
    tsr_format_size(total, have, sizeof(have));
    tsr_cli_error("--mem %s is more than device %u has (%s)", text, dev, have);
    return TSR_EXIT_USAGE;
  }
  *out_ppm = (uint32_t)ppm;
  return TSR_EXIT_OK;
}

static void tsr__print_created(const tsr_lease_t *l, const tsr_proto_lease_usage_t *usage) {
  (void)usage;
  char size[32], share[16], left[32], t[48];
  tsr_format_size(l->bytes, size, sizeof(size));
  tsr_format_percent(l->fraction_ppm, share, sizeof(share));
  tsr_time_format_duration(tsr_time_sub_sat(l->deadline_wall_ns, l->start_wall_ns), left, sizeof(left));
  tsr_time_format_rfc3339(l->deadline_wall_ns, 0, t, sizeof(t));
  printf("lease %llu: device %u, %s (%s), owner %s, until %s (%s)\n", (unsigned long long)l->id, l->device, size, share,
         l->owner, t, left);
}

/* Parses and checks what `lease create` asks for, before anything is sent.
 * --mem given as a size leaves out->fraction_ppm 0 and sets *out_mem_bytes:
 * it becomes a share once the device's memory is known. */
TSR_MUST_USE static tsr_status_t tsr__create_parse(const tsr_cli_lease_options_t *o, tsr_proto_create_t *out,
                                                   uint64_t *out_mem_bytes) {
  const char *device = o->device, *mem = o->mem, *dur = o->dur, *sm = o->sm;
  uint64_t dev = 0;
  tsr_status_t st = tsr_parse_u64(device, &dev);
  if (st || dev > UINT32_MAX) {
    tsr_status_free(st);
    return tsr_status_make(TSR_INVALID_ARGUMENT,
                           "--device: '%s' is not a device index (0 to %u, as `tessera devices` shows)", device,
                           UINT32_MAX);
  }
  out->device = (uint32_t)dev;
  TSR_RETURN_IF_ERROR(tsr_status_annotate(tsr_parse_share_or_size(mem, &out->fraction_ppm, out_mem_bytes), "--mem"));
  if (out->fraction_ppm == 0 && *out_mem_bytes == 0)
    return tsr_status_make(TSR_INVALID_ARGUMENT, "--mem must be more than 0");
  TSR_RETURN_IF_ERROR(tsr_status_annotate(tsr_parse_duration(dur, &out->duration_ns), "--for"));
  if (out->duration_ns == 0) return tsr_status_make(TSR_INVALID_ARGUMENT, "--for must be more than 0s");
  if (out->duration_ns > (uint64_t)INT64_MAX) return tsr_status_make(TSR_INVALID_ARGUMENT, "--for is too long");
  if (sm) {
    TSR_RETURN_IF_ERROR(tsr_status_annotate(tsr_parse_share(sm, &out->sm_ppm), "--sm"));
    if (out->sm_ppm == 0) return tsr_status_make(TSR_INVALID_ARGUMENT, "--sm must be more than 0%%");
  }
  if (o->user) TSR_RETURN_IF_ERROR(tsr__check_user(o->user));
  if (o->on_expiry && !tsr_lease_action_parse(o->on_expiry, &out->on_expiry))
    return tsr_status_make(TSR_INVALID_ARGUMENT, "--on-expiry: '%s' is neither revoke nor signal", o->on_expiry);
  if (o->over_limit && !tsr_lease_over_limit_parse(o->over_limit, &out->over_limit))
    return tsr_status_make(TSR_INVALID_ARGUMENT, "--over-limit: '%s' is neither signal nor log", o->over_limit);
  if (o->job && !tsr_lease_job_ok(o->job))
    return tsr_status_make(TSR_INVALID_ARGUMENT,
                           "--job: '%s' is not a job id (1 to %d letters, digits and . _ : @ + -)", o->job,
                           TSR_LEASE_JOB_MAX - 1);
  out->has_user = o->user != NULL;
  if (o->user) snprintf(out->user, sizeof(out->user), "%s", o->user); /* both checked above: they fit */
  if (o->job) snprintf(out->job, sizeof(out->job), "%s", o->job);
  if (o->wait) {
    TSR_RETURN_IF_ERROR(tsr_status_annotate(tsr_parse_duration(o->wait, &out->wait_ns), "--wait"));
    if (out->wait_ns == 0) return tsr_status_make(TSR_INVALID_ARGUMENT, "--wait must be more than 0s");
    if (out->wait_ns > (uint64_t)INT64_MAX) return tsr_status_make(TSR_INVALID_ARGUMENT, "--wait is too long");
  }
  return NULL;
}

static int tsr__create(const tsr_cli_globals_t *g, int argc, char **argv) {
  static const char usage[] =
      "usage: tessera lease create --device N --mem SHARE|SIZE --for DURATION\n"
      "                            [--sm SHARE] [--user NAME] [--on-expiry revoke|signal]\n"
      "                            [--over-limit signal|log] [--job ID] [--wait DURATION]\n"
      "                            [--json]\n"
      "\n"
      "  --device N         the GPU index (see `tessera devices`)\n"
      "  --mem SHARE        share of the device's memory: 50% or 0.5 (a bare 1 or 50\n"
      "                     is refused: write 100% or 1.0)\n"
      "  --mem SIZE         or an amount with a unit: 40GiB, 512MiB, 1024B (rounded up\n"
      "                     to whole millionths of the device, so the lease holds at\n"
      "                     least SIZE)\n"
      "  --for DURATION     how long: 90s, 15m, 2h, 1h30m, 1d\n"
      "  --sm SHARE         share of the device's SMs: 30% or 0.3 (default: not limited)\n"
      "  --user NAME        create the lease for another user (admins only)\n"
      "  --job ID           label it with a scheduler's job id (admins only; `lease\n"
      "                     list --job ID` finds it): letters, digits, . _ : @ + -\n"
      "  --on-expiry A      what happens to its processes when it ends: revoke (their\n"
      "                     allocations fail) or signal (SIGTERM, then SIGKILL after\n"
      "                     the node's grace); default: the node's on_expiry\n"
      "  --over-limit A     what the daemon's backstop does when its processes hold\n"
      "                     more GPU memory than the lease (by any route, shim or\n"
      "                     not): signal (SIGTERM to each, SIGKILL after the node's\n"
      "                     grace) or log (logged and audited, nothing more);\n"
      "                     default: the node's over_limit (signal unless set)\n"
      "  --wait DURATION    if the device has no room for it now, wait up to DURATION\n"
      "                     for it (queued in arrival order; a request that fits and\n"
      "                     ends before the first in the queue is sure to fit may go\n"
      "                     ahead); its id and place are said on stderr, `lease list\n"
      "                     --queued` shows it, and Ctrl-C or `lease release ID`\n"
      "                     withdraws it. The lease's time starts when it is granted\n"
      "  --json             print the lease as JSON\n"
      "\n"
      "Shares are exact to one millionth (0.0001%); finer ones are refused.\n";
  static const struct option opts[] = {{"device", required_argument, NULL, 'd'},
                                       {"mem", required_argument, NULL, 'm'},
                                       {"for", required_argument, NULL, 'f'},
                                       {"sm", required_argument, NULL, 's'},
                                       {"user", required_argument, NULL, 'u'},
                                       {"json", no_argument, NULL, 'j'},
                                       {"on-expiry", required_argument, NULL, 'e'},
                                       {"job", required_argument, NULL, 'J'},
                                       {"over-limit", required_argument, NULL, 'o'},
                                       {"wait", required_argument, NULL, 'w'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  tsr_cli_lease_options_t o = {0};
  bool json = false;
  int c;
  opterr = 0;
  while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
    switch (c) {
      case 'd': o.device = optarg; break;
      case 'm': o.mem = optarg; break;
      case 'f': o.dur = optarg; break;
      case 's': o.sm = optarg; break;
      case 'u': o.user = optarg; break;
      case 'e': o.on_expiry = optarg; break;
      case 'o': o.over_limit = optarg; break;
      case 'J': o.job = optarg; break;
      case 'w': o.wait = optarg; break;
      case 'j': json = true; break;
      case 'h': printf("%s", usage); return TSR_EXIT_OK;
      default: return tsr_cli_option_error(c, argv);
    }
  }
  if (optind < argc) {
    tsr_cli_error("unexpected argument '%s' (try --help)", argv[optind]);
    return TSR_EXIT_USAGE;
  }
  if (!o.device || !o.mem || !o.dur) {
    tsr_cli_error("lease create needs --device, --mem and --for (try --help)");
    return TSR_EXIT_USAGE;
  }
  tsr_json_writer_t w = {0};
  int rc = tsr_cli_lease_create_request(g, &o, &w);
  if (!rc) rc = tsr__lease_call(g, &w, json, tsr__print_created);
  tsr_json_writer_free(&w);
  return rc;
}

int tsr_cli_lease_create_request(const tsr_cli_globals_t *g, const tsr_cli_lease_options_t *o, tsr_json_writer_t *w) {
  tsr_proto_create_t r = {0};
  uint64_t mem_bytes = 0;
  int rc = tsr_cli_fail(tsr__create_parse(o, &r, &mem_bytes));
  if (!rc && mem_bytes) rc = tsr__fraction_of(g, r.device, mem_bytes, o->mem, &r.fraction_ppm);
  if (rc) return rc;
  tsr_proto_create_write(w, &r);
  return TSR_EXIT_OK;
}

/* release and show: one lease id in, one lease out. */
static int tsr__lease_by_id(const tsr_cli_globals_t *g, int argc, char **argv, const char *usage, tsr_proto_op_t op,
                            void (*print)(const tsr_lease_t *, const tsr_proto_lease_usage_t *)) {
  uint64_t id = 0;
  bool json;
  int rc = tsr__id_command(argc, argv, usage, &id, &json);
  if (rc) return rc < 0 ? TSR_EXIT_OK : rc;
  tsr_json_writer_t w = {0};
  tsr_proto_id_write(&w, op, id);
  rc = tsr__lease_call(g, &w, json, print);
  tsr_json_writer_free(&w);
  return rc;
}

static void tsr__print_released(const tsr_lease_t *l, const tsr_proto_lease_usage_t *usage) {
  (void)usage;
  printf("lease %llu released\n", (unsigned long long)l->id);
}

static void tsr__print_shown(const tsr_lease_t *l, const tsr_proto_lease_usage_t *usage) {
  tsr__print_lease_detail(l, tsr_time_wall_ns());
  if (usage) {
    char used[32], peak[32];
    tsr_format_size(usage->used_bytes, used, sizeof(used));
    tsr_format_size(usage->peak_bytes, peak, sizeof(peak));
    printf(
        "in use     %s (%llu bytes), peak %s, %u process%s, %llu allocation%s denied (as its "
        "processes report it%s)\n",
        used, (unsigned long long)usage->used_bytes, peak, usage->processes, usage->processes == 1 ? "" : "es",
        (unsigned long long)usage->denied, usage->denied == 1 ? "" : "s",
        usage->tampered ? "; its region was tampered with: not trusted" : "");
    if (usage->gpu_known) {
      char gpu[32];
      tsr_format_size(usage->gpu_bytes, gpu, sizeof(gpu));
      printf("on the GPU %s (%llu bytes), as the driver counts its processes (NVML)\n", gpu,
             (unsigned long long)usage->gpu_bytes);
    }
    printf("region     %s%s\n", usage->region, usage->revoked ? " (revoked: new allocations are refused)" : "");
    if (l->sm_ppm || usage->launches || usage->bypassed)
      printf("compute    %llu launch%s charged %.3f s of GPU time, waited %.3f s; %llu NCCL launch%s passed\n",
             (unsigned long long)usage->launches, usage->launches == 1 ? "" : "es", (double)usage->gpu_ns / 1e9,
             (double)usage->throttled_ns / 1e9, (unsigned long long)usage->bypassed, usage->bypassed == 1 ? "" : "es");
    if (l->sm_ppm && usage->sm_now_ppm && usage->sm_now_ppm < l->sm_ppm) {
      char now[32];
      tsr_format_percent(usage->sm_now_ppm, now, sizeof(now));
      printf("share now  %s, while leases run together on the device (they share the cost of switching)\n", now);
    }
  }
}

static int tsr__release(const tsr_cli_globals_t *g, int argc, char **argv) {
  static const char usage[] =
      "usage: tessera lease release ID [--json]\n"
      "\n"
      "Ends lease ID now and gives its memory back. Only its owner or an admin may.\n"
      "An ID still waiting for capacity (lease create --wait) is withdrawn: its\n"
      "waiting create is told so, and nothing was granted.\n";
  return tsr__lease_by_id(g, argc, argv, usage, TSR_PROTO_LEASE_RELEASE, tsr__print_released);
}

static void tsr__print_renewed(const tsr_lease_t *l, const tsr_proto_lease_usage_t *usage) {
  (void)usage;
  char t[48], left[32];
  tsr_time_format_rfc3339(l->deadline_wall_ns, 0, t, sizeof(t));
  tsr_time_format_duration(tsr_time_sub_sat(l->deadline_wall_ns, tsr_time_wall_ns()), left, sizeof(left));
  printf("lease %llu renewed: until %s (%s)\n", (unsigned long long)l->id, t, left);
}

static int tsr__renew(const tsr_cli_globals_t *g, int argc, char **argv) {
  static const char usage[] =
      "usage: tessera lease renew ID (--for DURATION | --until TIME) [--json]\n"
      "\n"
      "Moves lease ID's deadline, later or earlier; its memory and share stay held\n"
      "throughout. Only its owner or an admin may. The new deadline is at most the\n"
      "node's max_lease from now.\n"
      "\n"
      "  --for DURATION     the lease ends DURATION from now: 90s, 15m, 2h, 1h30m, 1d\n"
      "  --until TIME       it ends at TIME (RFC 3339: 2026-11-28T18:00:00Z)\n"
      "  --json             print the lease as JSON\n";
  static const struct option opts[] = {{"for", required_argument, NULL, 'f'},
                                       {"until", required_argument, NULL, 'u'},
                                       {"json", no_argument, NULL, 'j'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  const char *dur = NULL, *until = NULL;
  bool json = false;
  int c;
  opterr = 0;
  while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
    switch (c) {
      case 'f': dur = optarg; break;
      case 'u': until = optarg; break;
      case 'j': json = true; break;
      case 'h': printf("%s", usage); return TSR_EXIT_OK;
      default: return tsr_cli_option_error(c, argv);
    }
  }
  if (optind >= argc) {
    tsr_cli_error("lease renew needs a lease ID (try --help)");
    return TSR_EXIT_USAGE;
  }
  if (optind + 1 < argc) {
    tsr_cli_error("unexpected argument '%s' (try --help)", argv[optind + 1]);
    return TSR_EXIT_USAGE;
  }
  if (!dur == !until) {
    tsr_cli_error("lease renew needs one of --for and --until (try --help)");
    return TSR_EXIT_USAGE;
  }
  tsr_proto_renew_t r = {0};
  int rc = tsr_cli_fail(tsr__parse_id(argv[optind], &r.id));
  if (rc) return rc;
  if (dur) {
    rc = tsr_cli_fail(tsr_status_annotate(tsr_parse_duration(dur, &r.duration_ns), "--for"));
    if (!rc && (r.duration_ns == 0 || r.duration_ns > (uint64_t)INT64_MAX))
      rc = tsr_cli_fail(tsr_status_make(TSR_INVALID_ARGUMENT, "--for must be more than 0s and less than 292 years"));
  } else if (!tsr_time_parse_rfc3339(until, &r.until_ns) || r.until_ns == 0 || r.until_ns > (uint64_t)INT64_MAX) {
    rc = tsr_cli_fail(
        tsr_status_make(TSR_INVALID_ARGUMENT, "--until: '%s' is not a time (RFC 3339: 2026-11-28T18:00:00Z)", until));
  }
  if (rc) return rc;
  tsr_json_writer_t w = {0};
  tsr_proto_renew_write(&w, &r);
  rc = tsr__lease_call(g, &w, json, tsr__print_renewed);
  tsr_json_writer_free(&w);
  return rc;
}

static void tsr__print_resized(const tsr_lease_t *l, const tsr_proto_lease_usage_t *usage) {
  (void)usage;
  char size[32], share[16], sm[16];
  tsr_format_size(l->bytes, size, sizeof(size));
  tsr_format_percent(l->fraction_ppm, share, sizeof(share));
  if (l->sm_ppm)
    tsr_format_percent(l->sm_ppm, sm, sizeof(sm));
  else
    snprintf(sm, sizeof(sm), "not limited");
  printf("lease %llu resized: %s (%s) of device %u, SM share %s\n", (unsigned long long)l->id, size, share, l->device,
         sm);
}

static int tsr__resize(const tsr_cli_globals_t *g, int argc, char **argv) {
  static const char usage[] =
      "usage: tessera lease resize ID [--mem SHARE|SIZE] [--sm SHARE] [--force] [--json]\n"
      "\n"
      "Changes lease ID's memory, its SM share, or both, while its processes run:\n"
      "their next allocation, memory query and launch see the new size. Only its\n"
      "owner or an admin may. Growing needs the room on the device (checked and\n"
      "taken at once); shrinking below what the lease's processes hold is refused,\n"
      "with what they hold in the message, unless --force.\n"
      "\n"
      "  --mem SHARE|SIZE   the new memory: 50% or 0.5 of the device, or 40GiB\n"
      "  --sm SHARE         the new SM share: 30% or 0.3 (a lease created with --sm\n"
      "                     only: a share can change, not be added or removed)\n"
      "  --force            shrink even below what the processes hold: the new limit\n"
      "                     applies (no allocation succeeds until they are under it)\n"
      "                     and the lease's over-limit action acts on the excess\n"
      "  --json             print the lease as JSON\n";
  static const struct option opts[] = {{"mem", required_argument, NULL, 'm'}, {"sm", required_argument, NULL, 's'},
                                       {"force", no_argument, NULL, 'f'},     {"json", no_argument, NULL, 'j'},
                                       {"help", no_argument, NULL, 'h'},      {NULL, 0, NULL, 0}};
  const char *mem = NULL, *sm = NULL;
  bool json = false;
  tsr_proto_resize_t r = {0};
  int c;
  opterr = 0;
  while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
    switch (c) {
      case 'm': mem = optarg; break;
      case 's': sm = optarg; break;
      case 'f': r.force = true; break;
      case 'j': json = true; break;
      case 'h': printf("%s", usage); return TSR_EXIT_OK;
      default: return tsr_cli_option_error(c, argv);
    }
  }
  if (optind >= argc) {
    tsr_cli_error("lease resize needs a lease ID (try --help)");
    return TSR_EXIT_USAGE;
  }
  if (optind + 1 < argc) {
    tsr_cli_error("unexpected argument '%s' (try --help)", argv[optind + 1]);
    return TSR_EXIT_USAGE;
  }
  if (!mem && !sm) {
    tsr_cli_error("lease resize needs --mem, --sm or both (try --help)");
    return TSR_EXIT_USAGE;
  }
  int rc = tsr_cli_fail(tsr__parse_id(argv[optind], &r.id));
  uint64_t mem_bytes = 0;
  if (!rc && mem) {
    rc = tsr_cli_fail(tsr_status_annotate(tsr_parse_share_or_size(mem, &r.fraction_ppm, &mem_bytes), "--mem"));
    if (!rc && !r.fraction_ppm && !mem_bytes)
      rc = tsr_cli_fail(tsr_status_make(TSR_INVALID_ARGUMENT, "--mem must be more than 0"));
  }
  if (!rc && sm) {
    r.has_sm = true;
    rc = tsr_cli_fail(tsr_status_annotate(tsr_parse_share(sm, &r.sm_ppm), "--sm"));
    if (!rc && r.sm_ppm == 0) rc = tsr_cli_fail(tsr_status_make(TSR_INVALID_ARGUMENT, "--sm must be more than 0%%"));
  }
  if (!rc && mem_bytes) { /* a size: of the lease's device, which the daemon knows */
    tsr_json_writer_t w = {0};
    tsr_proto_id_write(&w, TSR_PROTO_LEASE_SHOW, r.id);
    tsr_lease_t l;
    tsr_proto_lease_usage_t u;
    rc = tsr_cli_lease_fetch(g, &w, &l, &u, NULL);
    tsr_json_writer_free(&w);
    if (!rc) rc = tsr__fraction_of(g, l.device, mem_bytes, mem, &r.fraction_ppm);
  }
  if (rc) return rc;
  tsr_json_writer_t w = {0};
  tsr_proto_resize_write(&w, &r);
  rc = tsr__lease_call(g, &w, json, tsr__print_resized);
  tsr_json_writer_free(&w);
  return rc;
}

/* Every lease of a paged lease.list, in id order. */
typedef struct {
  tsr_lease_t *leases; /* parsed, for the table */
  size_t count, cap;
  tsr_json_writer_t json;        /* the same leases as the daemon wrote them, one JSON array */
  uint64_t others, others_bytes; /* other users' leases an ordinary user is told of */
} tsr__listing_t;

/* Adds one page's leases; *out_next is the reply's "next", 0 if none. */
static int tsr__listing_add(tsr__listing_t *ls, const tsr_cli_reply_t *r, uint64_t after, uint64_t *out_next) {
  *out_next = 0;
  const tsr_json_member_t *list = tsr_cli_reply_member(r, "leases", TSR_JSON_ARRAY);
  if (!list) return TSR_EXIT_INTERNAL;
  size_t cur = 0, on_page = 0;
  tsr_json_member_t item;
  while (tsr_json_array_next(list->value, list->value_len, &cur, &item)) {
    tsr_lease_t *grown = tsr_array_grow(ls->leases, &ls->cap, ls->count + 1, sizeof(*grown), 64);
    if (!grown) return tsr_cli_fail(tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory"));
    ls->leases = grown;
    int rc = tsr_cli_fail(tsr_proto_lease_parse(item.value, item.value_len, &ls->leases[ls->count]));
    if (rc) return rc;
    ls->count++;
    on_page++;
    tsr_json_raw(&ls->json, item.value, item.value_len);
  }
  const tsr_json_member_t *others = tsr_json_find(r->members, r->count, "others");
  if (others && others->type == TSR_JSON_OBJECT) {
    tsr_json_member_t o[4];
    size_t on = 0;
    tsr_json_error_t err;
    if (tsr_json_scan_object(others->value, others->value_len, o, 4, &on, &err)) {
      if (!tsr_json_get_u64(tsr_json_find(o, on, "leases"), &ls->others)) ls->others = 0;
      if (!tsr_json_get_u64(tsr_json_find(o, on, "bytes"), &ls->others_bytes)) ls->others_bytes = 0;
    }
  }
  const tsr_json_member_t *next = tsr_json_find(r->members, r->count, "next");
  if (!next) return TSR_EXIT_OK;
  /* Each page must move on, so a confused daemon cannot keep us here. */
  uint64_t id = 0;
  if (!tsr_json_get_u64(next, &id) || id <= after || id > TSR_LEASE_ID_MAX || on_page == 0) {
    tsr_cli_error("the daemon's lease list has a bad 'next' (%.*s after %llu)", (int)next->value_len, next->value,
                  (unsigned long long)after);
    return TSR_EXIT_INTERNAL;
  }
  *out_next = id;
  return TSR_EXIT_OK;
}

/* Follows lease.list's pages until a reply has no "next". */
static int tsr__listing_fetch(const tsr_cli_globals_t *g, bool all, const char *job, tsr__listing_t *ls) {
  tsr_cli_reply_t r = {0};
  tsr_json_writer_t w = {0};
  int rc = TSR_EXIT_OK;
  tsr_json_array_begin(&ls->json);
  for (uint64_t after = 0;;) {
    tsr_json_writer_reset(&w);
    /* "after" only past the first page (the writer leaves 0 out): a daemon
     * without pages refuses it as an unknown field, and never sends "next" */
    tsr_proto_list_t q = {.all = all, .after = after};
    if (job) snprintf(q.job, sizeof(q.job), "%s", job);
    tsr_proto_list_write(&w, &q);
    if ((rc = tsr_cli_call(g, &w, &r)) != TSR_EXIT_OK) break;
    if ((rc = tsr__listing_add(ls, &r, after, &after)) != TSR_EXIT_OK || after == 0) break;
  }
  tsr_json_array_end(&ls->json);
  if (!rc && ls->json.failed) rc = tsr_cli_fail(tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory"));
  tsr_cli_reply_close(&r);
  tsr_json_writer_free(&w);
  return rc;
}

static int tsr__list(const tsr_cli_globals_t *g, int argc, char **argv) {
  static const char usage[] =
      "usage: tessera lease list [--all] [--job ID] [--queued] [--json]\n"
      "\n"
      "Lists your active leases; --all lists everyone's (an admin sees each of\n"
      "them, anyone else their own and a count of the others'); --job ID only those\n"
      "labelled with a scheduler's job ID. However many there are, the daemon's\n"
      "pages are followed to the end and printed as one table (with --json, one\n"
      "array). --queued lists the creates waiting for capacity instead (lease\n"
      "create --wait), with each one's place in its device's queue.\n";
  static const struct option opts[] = {{"all", no_argument, NULL, 'a'},  {"queued", no_argument, NULL, 'q'},
                                       {"json", no_argument, NULL, 'j'}, {"job", required_argument, NULL, 'J'},
                                       {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
  bool all = false, json = false, queued = false;
  const char *job = NULL;
  int c;
  opterr = 0;
  while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
    switch (c) {
      case 'a': all = true; break;
      case 'q': queued = true; break;
      case 'j': json = true; break;
      case 'J': job = optarg; break;
      case 'h': printf("%s", usage); return TSR_EXIT_OK;
      default: return tsr_cli_option_error(c, argv);
    }
  }
  if (optind < argc) {
    tsr_cli_error("unexpected argument '%s' (try --help)", argv[optind]);
    return TSR_EXIT_USAGE;
  }
  if (job && !tsr_lease_job_ok(job)) {
    tsr_cli_error("--job: '%s' is not a job id (1 to %d letters, digits and . _ : @ + -)", job, TSR_LEASE_JOB_MAX - 1);
    return TSR_EXIT_USAGE;
  }
  if (queued) return tsr_cli_list_queued(g, all, job, json);
  tsr__listing_t ls = {0};
  int rc = tsr__listing_fetch(g, all, job, &ls);
  if (rc) {
    /* nothing printed: a list cut short by a failed page is not shown */
  } else if (json) {
    rc = tsr_cli_print_json(ls.json.buf, ls.json.len);
  } else if (ls.count == 0 && !ls.others) {
    if (job)
      printf("no active leases of job %s%s\n", job, all ? "" : " of yours (--all: everyone's)");
    else
      printf(all ? "no active leases\n" : "you hold no active leases (--all: everyone's)\n");
  } else {
    uint64_t now = tsr_time_wall_ns();
    tsr__columns_t cols = {false, false};
    for (size_t i = 0; i < ls.count; i++) {
      cols.jobs = cols.jobs || ls.leases[i].job[0];
      cols.over_limit = cols.over_limit || ls.leases[i].over_limit == TSR_LEASE_OVER_LIMIT_LOG;
    }
    if (ls.count) tsr__print_header(cols);
    for (size_t i = 0; i < ls.count; i++) tsr__print_lease_line(&ls.leases[i], now, cols);
    if (ls.others) {
      char size[32];
      tsr_format_size(ls.others_bytes, size, sizeof(size));
      printf("%s%llu lease%s of other users (%s); their details are for admins\n", ls.count ? "and " : "",
             (unsigned long long)ls.others, ls.others == 1 ? "" : "s", size);
    }
  }
  free(ls.leases);
  tsr_json_writer_free(&ls.json);
  return rc;
}

static int tsr__show(const tsr_cli_globals_t *g, int argc, char **argv) {
  static const char usage[] =
      "usage: tessera lease show ID [--json]\n"
      "\n"
      "Shows lease ID: active, or ended recently (the daemon remembers the last 1024).\n";
  return tsr__lease_by_id(g, argc, argv, usage, TSR_PROTO_LEASE_SHOW, tsr__print_shown);
}

int tsr_cli_lease_main(const tsr_cli_globals_t *g, int argc, char **argv) {
  if (argc < 2) {
    tsr__lease_usage(stderr);
    return TSR_EXIT_USAGE;
  }
  const char *cmd = argv[1];
  if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
    tsr__lease_usage(stdout);
    return TSR_EXIT_OK;
  }
  static const struct {
    const char *name;
    int (*fn)(const tsr_cli_globals_t *, int, char **);
  } cmds[] = {{"create", tsr__create}, {"release", tsr__release}, {"renew", tsr__renew},
              {"resize", tsr__resize}, {"list", tsr__list},       {"show", tsr__show}};
  for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
    if (!strcmp(cmd, cmds[i].name)) {
      optind = 0;
      return cmds[i].fn(g, argc - 1, argv + 1);
    }
  }
  tsr_cli_error("unknown lease command '%s' (try 'tessera lease --help')", cmd);
  return TSR_EXIT_USAGE;
}
