/* daemon.c: `tessera daemon`: runs tesserad, the program beside tessera.
 *
 * tessera does not carry the daemon's code: it execs the tesserad installed
 * with it, so there is one daemon binary to update, audit and restart. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"

/* dir[0..dir_len) + "/tesserad" into out, if that is an executable file. */
static bool tsr__tesserad_in(const char *dir, size_t dir_len, char *out, size_t cap) {
  if (dir_len == 0) { /* an empty PATH entry is the current directory */
    dir = ".";
    dir_len = 1;
  }
  int n = snprintf(out, cap, "%.*s/tesserad", (int)dir_len, dir);
  struct stat st;
  return n > 0 && (size_t)n < cap && stat(out, &st) == 0 && S_ISREG(st.st_mode) && access(out, X_OK) == 0;
}

int tsr_cli_find_tesserad(char *out, size_t cap) {
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n > 0) {
    self[n] = '\0';
    const char *slash = strrchr(self, '/');
    if (slash && tsr__tesserad_in(self, (size_t)(slash - self), out, cap)) return TSR_EXIT_OK;
  }
  const char *path = getenv("PATH");
  for (const char *p = path; p && *p;) {
    size_t len = strcspn(p, ":");
    if (tsr__tesserad_in(p, len, out, cap)) return TSR_EXIT_OK;
    p += len;
    if (*p == ':') p++;
  }
  tsr_cli_error("cannot find tesserad: it is neither beside %s nor on PATH (install it with tessera)",
                n > 0 ? self : "tessera");
  return TSR_EXIT_INTERNAL;
}

int tsr_cli_daemon_main(const tsr_cli_globals_t *g, int argc, char **argv) {
  (void)g; /* the daemon takes its own --socket */
  (void)argc;
  char path[PATH_MAX];
  int rc = tsr_cli_find_tesserad(path, sizeof(path));
  if (rc) return rc;
  argv[0] = (char *)"tesserad"; /* its name in its own messages; the arguments pass through */
  fflush(NULL);
  execv(path, argv);
  tsr_cli_error("cannot run %s: %s", path, strerror(errno));
  return TSR_EXIT_INTERNAL;
}
