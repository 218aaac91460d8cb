/* ini.c: strict INI reader (see ini.h). */
#include "base/ini.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TSR__INI_LINE_MAX 4096

static char *tsr__trim(char *s) {
  while (*s == ' ' || *s == '\t') s++;
  size_t n = strlen(s);
  while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r')) s[--n] = '\0';
  return s;
}

tsr_status_t tsr_ini_parse(const char *text, const char *name, tsr_ini_fn fn, void *ctx) {
  char section[256] = "";
  char line[TSR__INI_LINE_MAX];
  int lineno = 0;
  const char *p = text;
  while (*p) {
    lineno++;
    const char *nl = strchr(p, '\n');
    size_t len = nl ? (size_t)(nl - p) : strlen(p);
    if (len >= sizeof(line))
      return tsr_status_make(TSR_INVALID_ARGUMENT, "%s:%d: line longer than %d bytes", name,
                             lineno, TSR__INI_LINE_MAX - 1);
    memcpy(line, p, len);
    line[len] = '\0';
    p = nl ? nl + 1 : p + len;
    char *s = tsr__trim(line);
    if (*s == '\0' || *s == '#' || *s == ';') continue;
    tsr_status_t st = NULL;
    if (*s == '[') {
      size_t n = strlen(s);
      if (n < 3 || s[n - 1] != ']')
        return tsr_status_make(TSR_INVALID_ARGUMENT, "%s:%d: bad section header '%s'", name,
                               lineno, s);
      s[n - 1] = '\0';
      char *sec = tsr__trim(s + 1);
      if (strlen(sec) >= sizeof(section) || !*sec)
        return tsr_status_make(TSR_INVALID_ARGUMENT, "%s:%d: bad section name", name, lineno);
      snprintf(section, sizeof(section), "%s", sec);
      st = fn(ctx, section, NULL, NULL, lineno);
    } else {
      char *eq = strchr(s, '=');
      if (!eq)
        return tsr_status_make(TSR_INVALID_ARGUMENT,
                               "%s:%d: expected '[section]' or 'key = value', got '%s'", name,
                               lineno, s);
      *eq = '\0';
      char *key = tsr__trim(s), *value = tsr__trim(eq + 1);
      if (!*key)
        return tsr_status_make(TSR_INVALID_ARGUMENT, "%s:%d: missing key before '='", name,
                               lineno);
      st = fn(ctx, section, key, value, lineno);
    }
    if (st) return tsr_status_annotate(st, "%s:%d", name, lineno);
  }
  return NULL;
}

tsr_status_t tsr_ini_parse_file(const char *path, tsr_ini_fn fn, void *ctx) {
  FILE *f = fopen(path, "r");
  if (!f) return tsr_status_from_errno(errno, "config file %s", path);
  size_t cap = 1 << 20;
  char *buf = malloc(cap + 1);
  if (!buf) {
    fclose(f);
    return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory reading %s", path);
  }
  size_t n = fread(buf, 1, cap + 1, f);
  int err = ferror(f);
  fclose(f);
  if (err) {
    free(buf);
    return tsr_status_make(TSR_IO_ERROR, "cannot read %s", path);
  }
  if (n > cap) {
    free(buf);
    return tsr_status_make(TSR_INVALID_ARGUMENT, "%s is larger than 1 MiB", path);
  }
  buf[n] = '\0';
  if (memchr(buf, '\0', n)) {
    free(buf);
    return tsr_status_make(TSR_INVALID_ARGUMENT, "%s holds a NUL byte: not a text file", path);
  }
  tsr_status_t st = tsr_ini_parse(buf, path, fn, ctx);
  free(buf);
  return st;
}
