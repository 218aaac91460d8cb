/* client.c: one request to the daemon, with errors turned into exit codes. */
#include "cli/client.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The exit status of a reply whose "ok" is not true, after its one line. */
static int tsr__refusal(const tsr_cli_reply_t *r) {
  const tsr_json_member_t *e = tsr_json_find(r->members, r->count, "error");
  tsr_json_member_t em[16];
  size_t en = 0;
  tsr_json_error_t err;
  char code[64] = "", msg[1024] = "";
  if (e && e->type == TSR_JSON_OBJECT && tsr_json_scan_object(e->value, e->value_len, em, 16, &en, &err)) {
    if (!tsr_json_get_string(tsr_json_find(em, en, "code"), code, sizeof(code))) code[0] = '\0';
    if (!tsr_json_get_string(tsr_json_find(em, en, "message"), msg, sizeof(msg))) msg[0] = '\0';
  }
  if (!code[0]) {
    tsr_cli_error("the daemon refused without an error code%s%s", msg[0] ? ": " : "", msg);
    return TSR_EXIT_INTERNAL;
  }
  tsr_cli_error("%s", msg[0] ? msg : code);
  return tsr_cli_exit_for_code(code);
}

/* The reply line `text` (or the failure `st`, freed) into *r. */
static int tsr__take_reply(tsr_cli_reply_t *r, tsr_status_t st, const char *text, size_t n);

int tsr_cli_call(const tsr_cli_globals_t *g, const tsr_json_writer_t *w, tsr_cli_reply_t *r) {
  r->text = NULL;
  r->len = 0;
  r->count = 0;
  if (w->failed || !w->buf) {
    tsr_cli_reply_close(r);
    tsr_cli_error("out of memory");
    return TSR_EXIT_INTERNAL;
  }
  tsr_status_t st = NULL;
  if (!r->client) st = tsr_proto_client_connect(g->socket_path, &r->client);
  const char *text = NULL;
  size_t n = 0;
  if (!st) st = tsr_proto_client_call_line(r->client, w->buf, w->len, &text, &n);
  return tsr__take_reply(r, st, text, n);
}

int tsr_cli_next(tsr_cli_reply_t *r, const char *lost) {
  r->text = NULL;
  r->len = 0;
  r->count = 0;
  if (!r->client) {
    tsr_cli_error("no connection to read a reply from");
    return TSR_EXIT_INTERNAL;
  }
  const char *text = NULL;
  size_t n = 0;
  tsr_status_t st = tsr_proto_client_read_line(r->client, &text, &n);
  if (st && lost && tsr_status_code(st) != TSR_OUT_OF_MEMORY && tsr_status_code(st) != TSR_DATA_LOSS) {
    tsr_cli_error("%s (%s)", lost, tsr_status_message(st));
    tsr_status_free(st);
    tsr_cli_reply_close(r);
    return TSR_EXIT_UNREACHABLE;
  }
  return tsr__take_reply(r, st, text, n);
}

/* The reply line `text` (or the failure `st`, freed) into *r. */
static int tsr__take_reply(tsr_cli_reply_t *r, tsr_status_t st, const char *text, size_t n) {
  if (st) {
    /* Whatever errno said, a daemon that is not there or goes away is
     * unreachable; a socket path too long, a reply over the client's limit
     * or no memory are what the map says. */
    tsr_status_code_t code = tsr_status_code(st);
    bool own = code == TSR_INVALID_ARGUMENT || code == TSR_DATA_LOSS || code == TSR_OUT_OF_MEMORY;
    int rc = own ? tsr_cli_exit_for_status(st) : TSR_EXIT_UNREACHABLE;
    tsr_cli_error("%s", tsr_status_message(st));
    tsr_status_free(st);
    tsr_cli_reply_close(r);
    return rc;
  }
  tsr_json_error_t err;
  if (!tsr_json_scan_object(text, n, r->members, TSR_CLI_REPLY_MEMBERS_MAX, &r->count, &err)) {
    tsr_cli_error("the daemon sent a malformed reply: %s (byte %zu)", err.message, err.offset);
    tsr_cli_reply_close(r);
    return TSR_EXIT_INTERNAL;
  }
  bool ok = false;
  if (!tsr_json_get_bool(tsr_json_find(r->members, r->count, "ok"), &ok) || !ok) {
    int rc = tsr__refusal(r);
    tsr_cli_reply_close(r);
    return rc;
  }
  r->text = text;
  r->len = n;
  return TSR_EXIT_OK;
}

void tsr_cli_reply_close(tsr_cli_reply_t *r) {
  tsr_proto_client_close(r->client);
  memset(r, 0, sizeof(*r));
}

const tsr_json_member_t *tsr_cli_reply_member(const tsr_cli_reply_t *r, const char *key, tsr_json_type_t type) {
  const tsr_json_member_t *m = tsr_json_find(r->members, r->count, key);
  if (m && m->type == type) return m;
  tsr_cli_error("the daemon's reply carries no '%s' %s", key,
                type == TSR_JSON_ARRAY    ? "array"
                : type == TSR_JSON_OBJECT ? "object"
                                          : "value");
  return NULL;
}

int tsr_cli_print_json(const char *text, size_t len) {
  if (tsr_json_pretty(stdout, text, len, 2) && fflush(stdout) == 0) return TSR_EXIT_OK;
  tsr_cli_error("could not write the JSON output");
  return TSR_EXIT_INTERNAL;
}

/* ---- devices ------------------------------------------------------------------- */

/* proto's reader (the Slurm plugin reads devices with it too), into the
 * CLI's view of a device. */
_Static_assert(sizeof(((tsr_cli_device_t *)0)->name) == sizeof(((tsr_proto_device_t *)0)->name) &&
                   sizeof(((tsr_cli_device_t *)0)->mig) == sizeof(((tsr_proto_device_t *)0)->mig) &&
                   sizeof(((tsr_cli_device_t *)0)->source) == sizeof(((tsr_proto_device_t *)0)->source) &&
                   sizeof(((tsr_cli_device_t *)0)->kind) == sizeof(((tsr_proto_device_t *)0)->kind),
               "the CLI's device strings are proto's");
tsr_status_t tsr_cli_device_parse(const char *text, size_t len, tsr_cli_device_t *out) {
  tsr_proto_device_t p;
  TSR_RETURN_IF_ERROR(tsr_proto_device_parse(text, len, &p));
  tsr_cli_device_t d;
  memset(&d, 0, sizeof(d));
  d.index = p.index;
  memcpy(d.name, p.name, sizeof(d.name));
  d.memory_bytes = p.memory_bytes;
  d.available_bytes = p.available_bytes;
  d.sm_count = p.sm_count;
  d.sm_committed_ppm = p.sm_committed_ppm;
  d.leases = p.leases;
  memcpy(d.mig, p.mig, sizeof(d.mig));
  memcpy(d.source, p.source, sizeof(d.source));
  memcpy(d.kind, p.kind, sizeof(d.kind));
  *out = d;
  return NULL;
}

/* ---- options ------------------------------------------------------------------- */

int tsr_cli_option_error(int c, char **argv) {
  if (c == ':')
    tsr_cli_error("option '%s' needs a value (try --help)", argv[optind - 1]);
  else if (optopt)
    tsr_cli_error("unknown option '-%c' (try --help)", optopt);
  else
    tsr_cli_error("unknown option '%s' (try --help)", argv[optind - 1]);
  return TSR_EXIT_USAGE;
}

int tsr_cli_parse_flags(int argc, char **argv, const char *usage, int positionals, bool *out_json, bool *out_all) {
  static const struct option with_all[] = {{"json", no_argument, NULL, 'j'},
                                           {"help", no_argument, NULL, 'h'},
                                           {"all", no_argument, NULL, 'a'},
                                           {NULL, 0, NULL, 0}};
  struct option opts[4];
  memcpy(opts, with_all, sizeof(opts));
  if (!out_all) opts[2] = opts[3]; /* no --all */
  *out_json = false;
  if (out_all) *out_all = false;
  int c;
  opterr = 0;
  while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
    if (c == 'j') {
      *out_json = true;
    } else if (c == 'a' && out_all) { /* --all is offered only with out_all */
      *out_all = true;
    } else if (c == 'h') {
      printf("%s", usage);
      return -1;
    } else {
      return tsr_cli_option_error(c, argv);
    }
  }
  if (argc - optind != positionals) {
    if (positionals == 0)
      tsr_cli_error("unexpected argument '%s' (try --help)", argv[optind]);
    else
      tsr_cli_error("expected %d argument%s (try --help)", positionals, positionals == 1 ? "" : "s");
    return TSR_EXIT_USAGE;
  }
  return TSR_EXIT_OK;
}
