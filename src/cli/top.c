/* top.c: `tessera top`: the node at a glance, refreshed in place.
 *
 *   tessera top [--interval SECONDS] [--once] [--json]
 *
 * One `top` request per refresh (docs/top.md): per device its leases, each
 * with a memory bar, its SM share against what NVML measured, the time its
 * launches waited for tokens, the time left, and its processes; then the
 * GPU processes of no lease. The live view draws with plain ANSI sequences
 * (the alternate screen, home, clear to the end of line and of screen), so
 * nothing beyond libc is needed; the terminal is put in non-canonical mode
 * without echo so that `q` quits at once, and put back however it ends
 * (q, SIGINT, SIGTERM, SIGHUP, an error). What the command writes on stderr
 * while the live view owns the screen is held and shown after it.
 *
 * The frames themselves are drawn by top_render.c. */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "base/array.h"
#include "base/json.h"
#include "base/time.h"
#include "base/units.h"
#include "cli/cli.h"
#include "cli/client.h"
#include "proto/requests.h"

#define TSR__INTERVAL_MIN (50 * TSR_NS_PER_MS)
#define TSR__INTERVAL_MAX (3600 * TSR_NS_PER_S)

/* ---- talking to the daemon -------------------------------------------------------- */

/* One `top` request; *out_top is the reply's "top" object (valid until r
 * is used again). Errors are printed; returns the exit status. */
static int tsr__fetch(const tsr_cli_globals_t *g, tsr_cli_reply_t *r, const tsr_json_member_t **out_top) {
  *out_top = NULL;
  tsr_json_writer_t w = {0};
  tsr_proto_plain_write(&w, TSR_PROTO_TOP);
  int rc = tsr_cli_call(g, &w, r);
  tsr_json_writer_free(&w);
  if (rc) return rc;
  *out_top = tsr_cli_reply_member(r, "top", TSR_JSON_OBJECT);
  return *out_top ? TSR_EXIT_OK : TSR_EXIT_INTERNAL;
}

/* "tessera top  15:40:01 UTC": the time of the daemon's snapshot. */
static void tsr__title(const tsr_json_member_t *top, const char *extra, char *buf, size_t cap) {
  tsr_json_member_t m[8];
  size_t n;
  tsr_json_error_t err;
  char now[48] = "";
  if (tsr_json_scan_object(top->value, top->value_len, m, 8, &n, &err) &&
      tsr_json_get_string(tsr_json_find(m, n, "now"), now, sizeof(now)) && strlen(now) >= 19)
    snprintf(buf, cap, "tessera top  %.8s UTC%s", now + 11, extra);
  else
    snprintf(buf, cap, "tessera top%s", extra);
}

static int tsr__once(const tsr_cli_globals_t *g, bool json) {
  tsr_cli_reply_t r = {0};
  const tsr_json_member_t *top = NULL;
  int rc = tsr__fetch(g, &r, &top);
  if (!rc && json) {
    rc = tsr_cli_print_json(top->value, top->value_len);
  } else if (!rc) {
    char title[96], *text = NULL;
    tsr__title(top, "", title, sizeof(title));
    rc = tsr_cli_fail(tsr_cli_top_render(top->value, top->value_len, title, 80, NULL, 0, &text));
    if (!rc && (fputs(text, stdout) == EOF || fflush(stdout) != 0)) {
      tsr_cli_error("could not write the output");
      rc = TSR_EXIT_INTERNAL;
    }
    free(text);
  }
  tsr_cli_reply_close(&r);
  return rc;
}

/* ---- the live view ------------------------------------------------------------------ */

/* What the live view changed, to put back. One per process: the signal
 * handler reads it. */
typedef struct {
  bool raw; /* stdin's terminal mode changed */
  struct termios saved;
  bool screen;         /* the alternate screen is on */
  int saved_err;       /* stderr while it is held, or -1 */
  FILE *held_err;      /* what was written on stderr meanwhile */
  sigset_t saved_mask; /* the signal mask before */
  sigset_t stops;      /* SIGINT, SIGTERM, SIGHUP, SIGWINCH */
  struct sigaction old[4];
} tsr__term_t;

static const int tsr__sigs[4] = {SIGINT, SIGTERM, SIGHUP, SIGWINCH};
static tsr__term_t tsr__term;
static volatile sig_atomic_t tsr__stop_sig; /* SIGINT, SIGTERM or SIGHUP received */
static volatile sig_atomic_t tsr__resized;
static volatile sig_atomic_t tsr__busy; /* in a request, which may not return soon */

static void tsr__write_all(int fd, const char *s, size_t n) {
  while (n > 0) {
    ssize_t k = write(fd, s, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return;
    s += k;
    n -= (size_t)k;
  }
}

static const char tsr__screen_on[] = "\033[?1049h\033[?25l"; /* alternate screen, no cursor */
static const char tsr__screen_off[] = "\033[?25h\033[?1049l";

/* The signals are held (blocked) except while a request runs and in the
 * wait between frames (ppoll). In the wait, a stop signal ends the loop,
 * which puts the terminal back. In a request, which may block on a daemon
 * that does not answer, the handler itself puts it back (write, tcsetattr
 * and dup2 are async-signal-safe) and ends the process by the signal. */
static void tsr__on_signal(int sig) {
  if (sig == SIGWINCH) {
    tsr__resized = 1;
    return;
  }
  tsr__stop_sig = sig;
  if (!tsr__busy) return;
  tsr__term_t *t = &tsr__term;
  if (t->screen) tsr__write_all(STDOUT_FILENO, tsr__screen_off, sizeof(tsr__screen_off) - 1);
  if (t->raw) tcsetattr(STDIN_FILENO, TCSANOW, &t->saved);
  if (t->saved_err >= 0) dup2(t->saved_err, STDERR_FILENO);
  struct sigaction dfl;
  memset(&dfl, 0, sizeof(dfl));
  dfl.sa_handler = SIG_DFL;
  sigaction(sig, &dfl, NULL);
  raise(sig); /* delivered as the handler returns: the default action, the end */
}

static void tsr__term_enter(tsr__term_t *t) {
  memset(t, 0, sizeof(*t));
  t->saved_err = -1;
  sigemptyset(&t->stops);
  for (int i = 0; i < 4; i++) sigaddset(&t->stops, tsr__sigs[i]);
  sigprocmask(SIG_BLOCK, &t->stops, &t->saved_mask);
  if (isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &t->saved) == 0) {
    struct termios raw = t->saved;
    raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO); /* keys at once, unseen; ^C stays a signal */
    raw.c_cc[VMIN] = 1;
    raw.c_cc[VTIME] = 0;
    t->raw = tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
  }
  fflush(stderr);
  t->held_err = tmpfile();
  if (t->held_err) {
    t->saved_err = dup(STDERR_FILENO);
    if (t->saved_err < 0 || dup2(fileno(t->held_err), STDERR_FILENO) < 0) {
      if (t->saved_err >= 0) close(t->saved_err);
      t->saved_err = -1;
      fclose(t->held_err);
      t->held_err = NULL;
    }
  }
  tsr__write_all(STDOUT_FILENO, tsr__screen_on, sizeof(tsr__screen_on) - 1);
  t->screen = true;
  for (int i = 0; i < 4; i++) { /* last: the handler finds everything it may put back */
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = tsr__on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(tsr__sigs[i], &sa, &t->old[i]);
  }
}

/* Puts everything back (signals still held); then shows what stderr held,
 * unless `quiet`. */
static void tsr__term_leave(tsr__term_t *t, bool quiet) {
  for (int i = 0; i < 4; i++) sigaction(tsr__sigs[i], &t->old[i], NULL);
  if (t->screen) tsr__write_all(STDOUT_FILENO, tsr__screen_off, sizeof(tsr__screen_off) - 1);
  t->screen = false;
  if (t->raw) tcsetattr(STDIN_FILENO, TCSANOW, &t->saved);
  t->raw = false;
  if (t->held_err) {
    fflush(stderr);
    dup2(t->saved_err, STDERR_FILENO);
    close(t->saved_err);
    t->saved_err = -1;
    if (!quiet) {
      char buf[4096];
      size_t n;
      rewind(t->held_err);
      while ((n = fread(buf, 1, sizeof(buf), t->held_err)) > 0) tsr__write_all(STDERR_FILENO, buf, n);
    }
    fclose(t->held_err);
    t->held_err = NULL;
  }
}

/* One request with the stop signals let through: a daemon that does not
 * answer cannot keep Ctrl-C from working. */
static int tsr__fetch_live(const tsr_cli_globals_t *g, tsr_cli_reply_t *r, const tsr_json_member_t **out_top) {
  tsr__busy = 1;
  sigprocmask(SIG_SETMASK, &tsr__term.saved_mask, NULL);
  int rc = tsr__fetch(g, r, out_top);
  sigprocmask(SIG_BLOCK, &tsr__term.stops, NULL);
  tsr__busy = 0;
  return rc;
}

/* Draws `text` (lines, each ending in a newline) from the top left, each
 * line cleared to its end and the rest of the screen cleared; at most
 * `rows` lines, the last of them then saying how many did not fit. No
 * newline after the last line: the screen never scrolls. */
static void tsr__draw(const char *text, size_t rows) {
  size_t total = 0;
  for (const char *p = text; *p; p++) total += *p == '\n';
  size_t shown = total <= rows ? total : rows - 1;
  char more[80] = "";
  if (shown < total) snprintf(more, sizeof(more), "(%zu more lines: a taller terminal shows them)", total - shown);
  size_t cap = 0;
  char *out = tsr_array_grow(NULL, &cap, strlen(text) + 4 * (total + 1) + sizeof(more) + 8, 1, 4096);
  if (!out) return;
  size_t len = 0;
  memcpy(out, "\033[H", 3);
  len += 3;
  const char *p = text;
  for (size_t i = 0; i <= shown; i++) {
    const char *line = i < shown ? p : more;
    size_t n = i < shown ? (size_t)(strchr(p, '\n') - p) : strlen(more);
    if (i == shown && !more[0]) break;
    if (i) out[len++] = '\n'; /* ends the line before */
    memcpy(out + len, line, n);
    len += n;
    memcpy(out + len, "\033[K", 3);
    len += 3;
    if (i < shown) p += n + 1;
  }
  memcpy(out + len, "\033[J", 3);
  len += 3;
  tsr__write_all(STDOUT_FILENO, out, len);
  free(out);
}

static void tsr__term_size(size_t *out_cols, size_t *out_rows) {
  struct winsize ws;
  *out_cols = 80;
  *out_rows = 24;
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 && ws.ws_row > 0) {
    *out_cols = ws.ws_col;
    *out_rows = ws.ws_row;
  }
}

/* Waits until `deadline` (monotonic ns) for a key, the signals let through
 * only in ppoll. True if it was q. */
static bool tsr__wait_keys(uint64_t deadline, bool *stdin_open) {
  for (;;) {
    uint64_t now = tsr_time_mono_ns();
    if (now >= deadline || tsr__stop_sig || tsr__resized) return false;
    uint64_t left = deadline - now;
    struct timespec ts = {(time_t)(left / TSR_NS_PER_S), (long)(left % TSR_NS_PER_S)};
    struct pollfd pfd = {.fd = STDIN_FILENO, .events = POLLIN};
    int n = ppoll(&pfd, *stdin_open ? 1 : 0, &ts, &tsr__term.saved_mask);
    if (n <= 0) continue; /* a signal (its flag is checked above), or the time */
    char keys[64];
    ssize_t k = read(STDIN_FILENO, keys, sizeof(keys));
    if (k <= 0) {
      if (k == 0 || (errno != EINTR && errno != EAGAIN)) *stdin_open = false; /* no more keys */
      continue;
    }
    if (memchr(keys, 'q', (size_t)k) || memchr(keys, 'Q', (size_t)k)) return true;
  }
}

static int tsr__live(const tsr_cli_globals_t *g, uint64_t interval_ns) {
  if (!isatty(STDOUT_FILENO)) {
    tsr_cli_error("top: standard output is not a terminal (--once or --json print one snapshot)");
    return TSR_EXIT_USAGE;
  }
  /* the first answer before the screen is taken: a daemon that is not
   * there is one line in the terminal as it was */
  tsr_cli_reply_t r = {0};
  const tsr_json_member_t *top = NULL;
  int rc = tsr__fetch(g, &r, &top);
  if (rc) return rc;
  char every[32], extra[64], title[128];
  tsr_time_format_duration(interval_ns, every, sizeof(every));
  snprintf(extra, sizeof(extra), "  every %s  q quits", every);
  tsr_cli_top_history_t history = {0};
  tsr__stop_sig = 0;
  tsr__resized = 0;
  tsr__term_enter(&tsr__term);
  bool stdin_open = true; /* until it reads as closed */
  bool quit = false;
  while (!quit && !tsr__stop_sig) {
    uint64_t started = tsr_time_mono_ns();
    if (!top) rc = tsr__fetch_live(g, &r, &top);
    if (rc || tsr__stop_sig) break;
    size_t cols, rows;
    tsr__term_size(&cols, &rows);
    char *text = NULL;
    tsr__title(top, extra, title, sizeof(title));
    tsr_status_t st = tsr_cli_top_render(top->value, top->value_len, title, cols, &history, started, &text);
    if (st) {
      rc = tsr_cli_fail(st);
      break;
    }
    tsr__draw(text, rows);
    free(text);
    top = NULL; /* the next frame asks again, on the same connection */
    tsr__resized = 0;
    quit = tsr__wait_keys(started + interval_ns, &stdin_open);
  }
  int sig = tsr__stop_sig;
  tsr__term_leave(&tsr__term, sig != 0);
  tsr_cli_top_history_free(&history);
  tsr_cli_reply_close(&r);
  if (sig) { /* end as the signal ends a process, the terminal put back */
    signal(sig, SIG_DFL);
    raise(sig); /* held: delivered when the mask is put back */
  }
  sigprocmask(SIG_SETMASK, &tsr__term.saved_mask, NULL);
  return sig ? 128 + sig : rc;
}

/* ---- the command ----------------------------------------------------------------- */

/* "0.5", "2" (seconds) or a duration with its unit ("200ms"). */
TSR_MUST_USE static tsr_status_t tsr__parse_interval(const char *text, uint64_t *out_ns) {
  char with_unit[64];
  const char *given = text;
  bool bare = *text && strspn(text, "0123456789.") == strlen(text);
  if (bare && strlen(text) < sizeof(with_unit) - 1) {
    snprintf(with_unit, sizeof(with_unit), "%ss", text);
    text = with_unit;
  }
  uint64_t ns = 0;
  tsr_status_t st = tsr_parse_duration(text, &ns);
  if (st || ns < TSR__INTERVAL_MIN || ns > TSR__INTERVAL_MAX) {
    tsr_status_free(st);
    return tsr_status_make(TSR_INVALID_ARGUMENT,
                           "--interval: '%s' is not a time from 0.05 to 3600 seconds (0.5, 2, 200ms)", given);
  }
  *out_ns = ns;
  return NULL;
}

int tsr_cli_top_main(const tsr_cli_globals_t *g, int argc, char **argv) {
  static const char usage[] =
      "usage: tessera top [--interval SECONDS] [--once] [--json]\n"
      "\n"
      "The node at a glance: for each GPU its leases (owner, memory used against the\n"
      "limit, SM share set against what NVML measured, time its launches waited for\n"
      "their share, time left) with their processes, and the GPU processes of no\n"
      "lease. Refreshed in place; q quits. See docs/top.md for every column.\n"
      "\n"
      "  --interval T  seconds between refreshes (default 1; 0.05 to 3600, or 200ms)\n"
      "  --once        print one snapshot and exit (no terminal needed)\n"
      "  --json        print the daemon's snapshot as JSON and exit\n";
  static const struct option opts[] = {{"interval", required_argument, NULL, 'i'},
                                       {"once", no_argument, NULL, 'o'},
                                       {"json", no_argument, NULL, 'j'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  uint64_t interval = TSR_NS_PER_S;
  bool once = false, json = false;
  int c;
  opterr = 0;
  while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
    if (c == 'i') {
      int rc = tsr_cli_fail(tsr__parse_interval(optarg, &interval));
      if (rc) return rc;
    } else if (c == 'o') {
      once = true;
    } else if (c == 'j') {
      json = true;
    } else if (c == 'h') {
      printf("%s", usage);
      return TSR_EXIT_OK;
    } else {
      return tsr_cli_option_error(c, argv);
    }
  }
  if (optind < argc) {
    tsr_cli_error("unexpected argument '%s' (try --help)", argv[optind]);
    return TSR_EXIT_USAGE;
  }
  if (once || json) return tsr__once(g, json);
  return tsr__live(g, interval);
}
