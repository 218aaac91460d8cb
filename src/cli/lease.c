/* lease.c: `tessera lease create|release|list|show`. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/time.h"
#include "base/units.h"
#include "cli/cli.h"
#include "cli/client.h"
#include "proto/proto.h"

static void tsr__lease_usage(FILE *out) {
  fprintf(out,
          "usage: tessera lease <command> [options]\n"
          "\n"
          "commands:\n"
          "  create --device N --mem FRACTION --for DURATION [--sm FRACTION] [--user NAME]\n"
          "                     hold FRACTION of device N's memory for DURATION\n"
          "  release ID         end a lease early (its owner or an admin)\n"
          "  list [--all]       your active leases (--all: everyone's)\n"
          "  show ID            one lease, active or recently ended\n"
          "\n"
          "FRACTION is 0.25 or 25%%; DURATION is 90s, 15m, 2h, 1h30m, 1d.\n"
          "Every command takes --json (machine-readable output) and --help.\n");
}

/* ---- printing ------------------------------------------------------------ */

static void tsr__print_lease_line(const tsr_lease_t *l, uint64_t now) {
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
  printf("%-8llu %-6u %-10s %-9s %-9s %-12s %-8s %-9s %s\n", (unsigned long long)l->id, l->device,
         size, share, sm, l->owner, tsr_proto_lease_state_name(l->state), left, deadline);
}

static void tsr__print_header(void) {
  printf("%-8s %-6s %-10s %-9s %-9s %-12s %-8s %-9s %s\n", "ID", "DEVICE", "MEMORY", "FRACTION",
         "SM", "OWNER", "STATE", "ENDS IN", "DEADLINE (UTC)");
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

/* The CLI holds replies as jansson trees (it pretty-prints them for --json);
 * a lease is read back from its compact text by the protocol's one parser. */
static tsr_status_t tsr__lease_parse(const json_t *object, tsr_lease_t *out) {
  char *text = object ? json_dumps(object, JSON_COMPACT) : NULL;
  tsr_status_t st = tsr_proto_lease_parse(text, text ? strlen(text) : 0, out);
  free(text);
  return st;
}

static int tsr__lease_from_reply(json_t *reply, tsr_lease_t *out) {
  tsr_status_t st = tsr__lease_parse(json_object_get(reply, "lease"), out);
  if (st) {
    tsr_cli_error("%s", tsr_status_message(st));
    tsr_status_free(st);
    return TSR_EXIT_INTERNAL;
  }
  return TSR_EXIT_OK;
}

/* ---- argument helpers ------------------------------------------------------ */

static bool tsr__parse_id(const char *text, uint64_t *out) {
  tsr_status_t st = tsr_parse_u64(text, out);
  if (st || *out == 0) {
    tsr_status_free(st);
    tsr_cli_error("'%s' is not a lease id (a positive number, as `tessera lease list` shows)", text);
    return false;
  }
  return true;
}

/* Parses `--json`/`--help` and one positional ID for release and show;
 * -1 after --help. */
static int tsr__id_command(int argc, char **argv, const char *usage, uint64_t *out_id,
                           bool *out_json) {
  int rc = tsr_cli_parse_flags(argc, argv, usage, 1, out_json, NULL);
  if (rc) return rc;
  return tsr__parse_id(argv[optind], out_id) ? TSR_EXIT_OK : TSR_EXIT_USAGE;
}

/* ---- subcommands --------------------------------------------------------- */

/* The share of device `dev`'s memory that holds at least `bytes`, in ppm,
 * rounded up; asks the daemon for the device's size. */
static int tsr__fraction_of(const tsr_cli_globals_t *g, uint32_t dev, uint64_t bytes,
                            const char *text, uint32_t *out_ppm) {
  json_t *reply;
  int rc = tsr_cli_call(g, json_pack("{s:s}", "op", "devices"), &reply);
  if (rc) return rc;
  uint64_t total = 0;
  size_t i;
  json_t *d;
  json_array_foreach(json_object_get(reply, "devices"), i, d) {
    if (json_integer_value(json_object_get(d, "index")) == (json_int_t)dev)
      total = (uint64_t)json_integer_value(json_object_get(d, "memory_bytes"));
  }
  json_decref(reply);
  if (total == 0) {
    tsr_cli_error("no device %u on this node (see `tessera devices`)", dev);
    return TSR_EXIT_REFUSED;
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

static int tsr__create(const tsr_cli_globals_t *g, int argc, char **argv) {
  static const char usage[] =
      "usage: tessera lease create --device N --mem FRACTION|SIZE --for DURATION\n"
      "                            [--sm FRACTION] [--user NAME] [--json]\n"
      "\n"
      "  --device N         the GPU index (see `tessera devices`)\n"
      "  --mem FRACTION     share of the device's memory: 0.5 or 50%\n"
      "  --mem SIZE         or an amount: 40GiB, 512MiB (rounded up to whole\n"
      "                     millionths of the device, so the lease holds at least SIZE)\n"
      "  --for DURATION     how long: 90s, 15m, 2h, 1h30m, 1d\n"
      "  --sm FRACTION      share of the device's SMs (default: not limited)\n"
      "  --user NAME        create the lease for another user (admins only)\n"
      "  --json             print the lease as JSON\n";
  static const struct option opts[] = {
      {"device", required_argument, NULL, 'd'}, {"mem", required_argument, NULL, 'm'},
      {"for", required_argument, NULL, 'f'},    {"sm", required_argument, NULL, 's'},
      {"user", required_argument, NULL, 'u'},   {"json", no_argument, NULL, 'j'},
      {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0}};
  const char *device = NULL, *mem = NULL, *dur = NULL, *sm = NULL, *user = NULL;
  bool json = false;
  int c;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
      case 'd': device = optarg; break;
      case 'm': mem = optarg; break;
      case 'f': dur = optarg; break;
      case 's': sm = optarg; break;
      case 'u': user = optarg; break;
      case 'j': json = true; break;
      case 'h': printf("%s", usage); return TSR_EXIT_OK;
      default: fprintf(stderr, "%s", usage); return TSR_EXIT_USAGE;
    }
  }
  if (optind < argc) {
    tsr_cli_error("unexpected argument '%s' (try --help)", argv[optind]);
    return TSR_EXIT_USAGE;
  }
  if (!device || !mem || !dur) {
    tsr_cli_error("lease create needs --device, --mem and --for (try --help)");
    return TSR_EXIT_USAGE;
  }
  uint64_t dev = 0, ns = 0;
  uint32_t frac = 0, smp = 0;
  tsr_status_t st = tsr_parse_u64(device, &dev);
  if (!st && dev > UINT32_MAX) st = tsr_status_make(TSR_INVALID_ARGUMENT, "device index too large");
  if (st) st = tsr_status_annotate(st, "--device");
  uint64_t mem_bytes = 0; /* --mem as a size: converted once the device's memory is known */
  if (!st) {
    tsr_status_t fst = tsr_parse_fraction(mem, &frac);
    tsr_status_t sst = fst ? tsr_parse_size(mem, &mem_bytes) : NULL;
    if (fst && sst)
      st = tsr_status_make(TSR_INVALID_ARGUMENT,
                           "--mem: '%s' is neither a share (0.5, 50%%: %s) nor an amount (40GiB: %s)",
                           mem, tsr_status_message(fst), tsr_status_message(sst));
    tsr_status_free(fst);
    tsr_status_free(sst);
  }
  if (!st && frac == 0 && mem_bytes == 0) st = tsr_status_make(TSR_INVALID_ARGUMENT, "--mem must be more than 0");
  if (!st) st = tsr_status_annotate(tsr_parse_duration(dur, &ns), "--for");
  if (!st && ns == 0) st = tsr_status_make(TSR_INVALID_ARGUMENT, "--for must be more than 0s");
  if (!st && ns > (uint64_t)INT64_MAX) st = tsr_status_make(TSR_INVALID_ARGUMENT, "--for is too long");
  if (!st && sm) st = tsr_status_annotate(tsr_parse_fraction(sm, &smp), "--sm");
  if (!st && sm && smp == 0) st = tsr_status_make(TSR_INVALID_ARGUMENT, "--sm must be more than 0");
  if (st) {
    tsr_cli_error("%s", tsr_status_message(st));
    tsr_status_free(st);
    return TSR_EXIT_USAGE;
  }
  if (mem_bytes) {
    int rc = tsr__fraction_of(g, (uint32_t)dev, mem_bytes, mem, &frac);
    if (rc) return rc;
  }
  json_t *req = json_pack("{s:s, s:I, s:I, s:I}", "op", "lease.create", "device", (json_int_t)dev,
                          "fraction_ppm", (json_int_t)frac, "duration_ns", (json_int_t)ns);
  if (smp) json_object_set_new(req, "sm_ppm", json_integer(smp));
  if (user) json_object_set_new(req, "user", json_string(user));
  json_t *reply;
  int rc = tsr_cli_call(g, req, &reply);
  if (rc) return rc;
  tsr_lease_t l;
  rc = tsr__lease_from_reply(reply, &l);
  if (!rc) {
    if (json) {
      tsr_cli_print_json(json_object_get(reply, "lease"));
    } else {
      char size[32], share[16], left[32], t[48];
      tsr_format_size(l.bytes, size, sizeof(size));
      tsr_format_percent(l.fraction_ppm, share, sizeof(share));
      tsr_time_format_duration(tsr_time_sub_sat(l.deadline_wall_ns, l.start_wall_ns), left, sizeof(left));
      tsr_time_format_rfc3339(l.deadline_wall_ns, 0, t, sizeof(t));
      printf("lease %llu: device %u, %s (%s), owner %s, until %s (%s)\n",
             (unsigned long long)l.id, l.device, size, share, l.owner, t, left);
    }
  }
  json_decref(reply);
  return rc;
}

/* release and show: one lease id in, one lease out. */
static int tsr__lease_by_id(const tsr_cli_globals_t *g, int argc, char **argv, const char *usage,
                            const char *op, void (*print)(const tsr_lease_t *)) {
  uint64_t id;
  bool json;
  int rc = tsr__id_command(argc, argv, usage, &id, &json);
  if (rc) return rc < 0 ? TSR_EXIT_OK : rc;
  json_t *reply;
  rc = tsr_cli_call(g, json_pack("{s:s, s:I}", "op", op, "id", (json_int_t)id), &reply);
  if (rc) return rc;
  tsr_lease_t l;
  rc = tsr__lease_from_reply(reply, &l);
  if (!rc) {
    if (json)
      tsr_cli_print_json(json_object_get(reply, "lease"));
    else
      print(&l);
  }
  json_decref(reply);
  return rc;
}

static void tsr__print_released(const tsr_lease_t *l) {
  printf("lease %llu released\n", (unsigned long long)l->id);
}

static void tsr__print_shown(const tsr_lease_t *l) { tsr__print_lease_detail(l, tsr_time_wall_ns()); }

static int tsr__release(const tsr_cli_globals_t *g, int argc, char **argv) {
  static const char usage[] =
      "usage: tessera lease release ID [--json]\n"
      "\n"
      "Ends lease ID now and gives its memory back. Only its owner or an admin may.\n";
  return tsr__lease_by_id(g, argc, argv, usage, "lease.release", tsr__print_released);
}

static int tsr__list(const tsr_cli_globals_t *g, int argc, char **argv) {
  static const char usage[] =
      "usage: tessera lease list [--all] [--json]\n"
      "\n"
      "Lists your active leases; --all lists everyone's.\n";
  bool all, json;
  int parsed = tsr_cli_parse_flags(argc, argv, usage, 0, &json, &all);
  if (parsed) return parsed < 0 ? TSR_EXIT_OK : parsed;
  json_t *reply;
  int rc = tsr_cli_call(g, json_pack("{s:s, s:b}", "op", "lease.list", "all", all), &reply);
  if (rc) return rc;
  json_t *list = json_object_get(reply, "leases");
  if (json) {
    tsr_cli_print_json(list);
  } else if (json_array_size(list) == 0) {
    printf(all ? "no active leases\n" : "you hold no active leases (--all: everyone's)\n");
  } else {
    uint64_t now = tsr_time_wall_ns();
    tsr__print_header();
    size_t i;
    json_t *item;
    json_array_foreach(list, i, item) {
      tsr_lease_t l;
      tsr_status_t st = tsr__lease_parse(item, &l);
      if (st) {
        tsr_cli_error("%s", tsr_status_message(st));
        tsr_status_free(st);
        rc = TSR_EXIT_INTERNAL;
        break;
      }
      tsr__print_lease_line(&l, now);
    }
  }
  json_decref(reply);
  return rc;
}

static int tsr__show(const tsr_cli_globals_t *g, int argc, char **argv) {
  static const char usage[] =
      "usage: tessera lease show ID [--json]\n"
      "\n"
      "Shows lease ID: active, or ended recently (the daemon remembers the last 1024).\n";
  return tsr__lease_by_id(g, argc, argv, usage, "lease.show", tsr__print_shown);
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
  } cmds[] = {{"create", tsr__create}, {"release", tsr__release}, {"list", tsr__list}, {"show", tsr__show}};
  for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
    if (!strcmp(cmd, cmds[i].name)) {
      optind = 0;
      return cmds[i].fn(g, argc - 1, argv + 1);
    }
  }
  tsr_cli_error("unknown lease command '%s' (try 'tessera lease --help')", cmd);
  return TSR_EXIT_USAGE;
}
