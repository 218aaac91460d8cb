/* client.c: one request to the daemon, with errors turned into exit codes. */
#include "cli/client.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/proto.h"

static int tsr__exit_for(const char *code) {
  if (!code) return TSR_EXIT_INTERNAL;
  if (!strcmp(code, "permission_denied") || !strcmp(code, "not_found") ||
      !strcmp(code, "conflict") || !strcmp(code, "resource_exhausted") ||
      !strcmp(code, "unknown_user") || !strcmp(code, "failed_precondition") ||
      !strcmp(code, "busy"))
    return TSR_EXIT_REFUSED;
  if (!strcmp(code, "invalid_argument")) return TSR_EXIT_USAGE;
  return TSR_EXIT_INTERNAL;
}

int tsr_cli_call(const tsr_cli_globals_t *g, json_t *request, json_t **out_reply) {
  *out_reply = NULL;
  char *line = json_dumps(request, JSON_COMPACT);
  json_decref(request);
  if (!line) {
    tsr_cli_error("out of memory");
    return TSR_EXIT_INTERNAL;
  }
  tsr_proto_client_t *c = NULL;
  tsr_status_t st = tsr_proto_client_connect(g->socket_path, &c);
  if (st) {
    tsr_cli_error("%s", tsr_status_message(st));
    int rc = tsr_status_code(st) == TSR_INVALID_ARGUMENT ? TSR_EXIT_USAGE : TSR_EXIT_UNREACHABLE;
    tsr_status_free(st);
    free(line);
    return rc;
  }
  const char *text = NULL;
  size_t n = 0;
  char code[64] = "";
  st = tsr_proto_client_call_line(c, line, strlen(line), &text, &n);
  free(line);
  int rc = TSR_EXIT_UNREACHABLE; /* no reply, or not one we can read */
  if (!st) {
    st = tsr_proto_reply_status(text, n, code, sizeof(code));
    if (st && code[0]) rc = tsr__exit_for(code); /* the daemon refused */
    else if (st && tsr_status_code(st) != TSR_DATA_LOSS) rc = TSR_EXIT_INTERNAL; /* refused, no code */
  }
  json_error_t jerr;
  json_t *reply = st ? NULL : json_loadb(text, n, 0, &jerr);
  tsr_proto_client_close(c);
  if (st) {
    tsr_cli_error("%s", tsr_status_message(st));
    tsr_status_free(st);
    return rc;
  }
  if (!reply) {
    tsr_cli_error("cannot read the daemon's reply: %s", jerr.text);
    return TSR_EXIT_INTERNAL;
  }
  *out_reply = reply;
  return TSR_EXIT_OK;
}

void tsr_cli_print_json(const json_t *value) {
  /* The daemon's only reals are shares in millionths: six significant
   * digits print them exactly (0.034925, not 0.034924999999999998). */
  char *s = json_dumps(value, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6));
  if (s) {
    puts(s);
    free(s);
  }
}

int tsr_cli_parse_flags(int argc, char **argv, const char *usage, int positionals,
                        bool *out_json, bool *out_all) {
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
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    if (c == 'j') {
      *out_json = true;
    } else if (c == 'a') {
      *out_all = true;
    } else if (c == 'h') {
      printf("%s", usage);
      return -1;
    } else {
      fprintf(stderr, "%s", usage);
      return TSR_EXIT_USAGE;
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
