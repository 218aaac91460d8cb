/* cli/client.h: talking to the daemon from a subcommand.
 *
 * A request is built with the project's JSON writer; the reply line is
 * scanned once (base/json.h) and its members are read where they lie:
 * leases by tsr_proto_lease_parse, devices by tsr_cli_device_parse, --json
 * output by printing a member's span with tsr_json_pretty, so numbers come
 * out exactly as the daemon wrote them. */
#ifndef TESSERA_CLI_CLIENT_H
#define TESSERA_CLI_CLIENT_H

#include <stdbool.h>
#include <stdint.h>

#include "base/json.h"
#include "cli/cli.h"
#include "proto/proto.h"

/* Top-level members a reply may have; more is a malformed reply. Replies
 * have a handful, and a client must allow fields it does not know. */
#define TSR_CLI_REPLY_MEMBERS_MAX 32

/* A reply the daemon accepted ("ok": true). Start from {0}; each
 * tsr_cli_call reuses the connection of the one before (lease list's
 * pages), and text and members are valid until the next call or
 * tsr_cli_reply_close. */
typedef struct tsr_cli_reply_s {
  const char *text; /* the reply line, without its newline; owned by `client` */
  size_t len;
  tsr_json_member_t members[TSR_CLI_REPLY_MEMBERS_MAX];
  size_t count;
  tsr_proto_client_t *client; /* the open connection, or NULL */
} tsr_cli_reply_t;

/* Sends the request `w` wrote and reads the reply into *reply. Returns
 * TSR_EXIT_OK when the daemon accepted it; otherwise prints one line on
 * stderr and returns the exit status to use: the daemon's refusal by its
 * code (tsr_cli_exit_for_code), 3 when the daemon cannot be reached or goes
 * away, 4 for a reply that cannot be read. The connection is closed after
 * a failure. */
int tsr_cli_call(const tsr_cli_globals_t *g, const tsr_json_writer_t *w, tsr_cli_reply_t *reply);

/* A create that waits for capacity (lease create --wait): when `reply`
 * says the request is queued, says so on stderr (its id, its place, how long
 * it may wait, how to withdraw it) and reads the outcome into `reply`.
 * Anything else is left as it is. Exit status as tsr_cli_call's
 * (lease_wait.c). */
int tsr_cli_await_grant(tsr_cli_reply_t *reply);

/* Prints a release's reply that withdrew a waiting create (its "withdrawn"
 * object): as JSON, or one line. False when the reply has none. */
bool tsr_cli_print_withdrawn(const tsr_cli_reply_t *reply, bool json, int *out_rc);

/* `lease list --queued`: the waiting creates the caller may see, as a table
 * or JSON. */
int tsr_cli_list_queued(const tsr_cli_globals_t *g, bool all, const char *job, bool json);

/* Reads the next reply on reply's connection without sending anything (the
 * outcome of a create that waits for capacity). Exit status as
 * tsr_cli_call's; a connection lost on the way is said with `lost` (may be
 * NULL: the library's words), exit 3. */
int tsr_cli_next(tsr_cli_reply_t *reply, const char *lost);

/* Closes the connection; *reply may be used again from there. */
void tsr_cli_reply_close(tsr_cli_reply_t *reply);

/* The member `key` of the reply if it has that type; else NULL, after one
 * line on stderr (a reply without it cannot be read: exit 4). */
const tsr_json_member_t *tsr_cli_reply_member(const tsr_cli_reply_t *reply, const char *key, tsr_json_type_t type);

/* Prints a value's text (a member's span) as indented JSON on stdout.
 * TSR_EXIT_OK, or TSR_EXIT_INTERNAL with one line on stderr. */
int tsr_cli_print_json(const char *text, size_t len);

/* One device object of a "devices" reply, as docs/protocol.md gives it. */
typedef struct tsr_cli_device_s {
  uint32_t index;
  char name[TSR_DEVICE_NAME_MAX];
  uint64_t memory_bytes, available_bytes;
  uint32_t sm_count; /* 0 when the daemon does not know it (null) */
  uint32_t sm_committed_ppm;
  uint32_t leases;
  char mig[16];    /* "enabled", "disabled", "unsupported", "unknown" */
  char source[16]; /* "nvml" or "config" */
  char kind[16];   /* "cuda" or "opencl" ("cuda" from a daemon that does not say) */
} tsr_cli_device_t;

/* Asks the daemon for its devices: *reply holds the reply (close it) and
 * *out_list its "devices" array. Exit status as tsr_cli_call's. */
int tsr_cli_devices_call(const tsr_cli_globals_t *g, tsr_cli_reply_t *reply, const tsr_json_member_t **out_list);

/* Reads one device object from its text (an element of "devices").
 * TSR_DATA_LOSS if it lacks a field or has one out of range. */
TSR_MUST_USE tsr_status_t tsr_cli_device_parse(const char *text, size_t len, tsr_cli_device_t *out_device);

/* For getopt_long run with opterr = 0 and an optstring that starts with
 * ':': one line for the option it refused (c is '?' or ':'), and
 * TSR_EXIT_USAGE. */
int tsr_cli_option_error(int c, char **argv);

/* Options of the commands that take only flags and positionals: --json,
 * --help and, when `out_all` is not NULL, --all. Exactly `positionals`
 * arguments must remain; they are at argv[optind...] afterwards. Returns -1
 * after printing `usage` for --help, TSR_EXIT_USAGE (with a message) on a bad
 * option or argument count, else TSR_EXIT_OK. */
int tsr_cli_parse_flags(int argc, char **argv, const char *usage, int positionals, bool *out_json, bool *out_all);

/* ---- leases, for commands other than `lease` (lease.c) ---- */

/* The options that make a lease, as `lease create` (and `run`, which
 * takes some of them) were given them: the text of each, NULL where it was
 * not given. device, mem and dur are required. The caller owns the strings. */
typedef struct tsr_cli_lease_options_s {
  const char *device;     /* --device N */
  const char *mem;        /* --mem SHARE|SIZE */
  const char *dur;        /* --for DURATION */
  const char *sm;         /* --sm SHARE */
  const char *user;       /* --user NAME */
  const char *on_expiry;  /* --on-expiry revoke|signal */
  const char *over_limit; /* --over-limit signal|log */
  const char *job;        /* --job ID */
  const char *wait;       /* --wait DURATION */
} tsr_cli_lease_options_t;

/* Builds the lease.create request from `options`, checked as `lease create`
 * checks them (a --mem SIZE asks the daemon for the device's size: a share
 * does not); prints one line and returns the exit status on a bad value
 * (TSR_EXIT_USAGE for a value no daemon could take). */
int tsr_cli_lease_create_request(const tsr_cli_globals_t *g, const tsr_cli_lease_options_t *options,
                                 tsr_json_writer_t *w);

/* Sends `w` (an op whose reply carries a lease) and reads the lease and,
 * when the daemon gives it, its usage (region). Errors are printed; returns
 * the exit status. */
int tsr_cli_lease_fetch(const tsr_cli_globals_t *g, const tsr_json_writer_t *w, tsr_lease_t *out_lease,
                        tsr_proto_lease_usage_t *out_usage, bool *out_has_usage);

#endif
