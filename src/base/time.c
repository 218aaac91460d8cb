/* time.c: clocks and RFC 3339 formatting/parsing (see time.h). */
#include "base/time.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static uint64_t tsr__clock_ns(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (uint64_t)ts.tv_sec * TSR_NS_PER_S + (uint64_t)ts.tv_nsec;
}

uint64_t tsr_time_mono_ns(void) { return tsr__clock_ns(CLOCK_MONOTONIC); }
uint64_t tsr_time_wall_ns(void) { return tsr__clock_ns(CLOCK_REALTIME); }

bool tsr_time_format_rfc3339(uint64_t wall_ns, int digits, char *buf, size_t cap) {
  if (cap == 0) return false;
  buf[0] = '\0';
  if (digits < 0) digits = 0;
  if (digits > 9) digits = 9;
  time_t secs = (time_t)(wall_ns / TSR_NS_PER_S);
  uint64_t frac = wall_ns % TSR_NS_PER_S;
  struct tm tm;
  if (!gmtime_r(&secs, &tm)) return false;
  char date[32];
  strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S", &tm);
  int n;
  if (digits == 0) {
    n = snprintf(buf, cap, "%sZ", date);
  } else {
    for (int i = digits; i < 9; i++) frac /= 10;
    n = snprintf(buf, cap, "%s.%0*lluZ", date, digits, (unsigned long long)frac);
  }
  if (n < 0 || (size_t)n >= cap) {
    buf[0] = '\0';
    return false;
  }
  return true;
}

static bool tsr__digits(const char *s, int count, int *out) {
  int v = 0;
  for (int i = 0; i < count; i++) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + (s[i] - '0');
  }
  *out = v;
  return true;
}

bool tsr_time_parse_rfc3339(const char *text, uint64_t *out_wall_ns) {
  /* YYYY-MM-DDTHH:MM:SS */
  if (!text || strlen(text) < 20) return false;
  int y, mo, d, h, mi, s;
  if (!tsr__digits(text, 4, &y) || text[4] != '-' || !tsr__digits(text + 5, 2, &mo) || text[7] != '-' ||
      !tsr__digits(text + 8, 2, &d) || text[10] != 'T' || !tsr__digits(text + 11, 2, &h) || text[13] != ':' ||
      !tsr__digits(text + 14, 2, &mi) || text[16] != ':' || !tsr__digits(text + 17, 2, &s))
    return false;
  if (y < 1970 || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || s > 59) return false;
  const char *p = text + 19;
  uint64_t frac = 0;
  if (*p == '.') {
    p++;
    int n = 0;
    while (*p >= '0' && *p <= '9') {
      if (++n > 9) return false;
      frac = frac * 10 + (uint64_t)(*p - '0');
      p++;
    }
    if (n == 0) return false;
    for (; n < 9; n++) frac *= 10;
  }
  if (p[0] != 'Z' || p[1] != '\0') return false;
  struct tm tm = {0};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = s;
  time_t secs = timegm(&tm);
  if (secs < 0) return false;
  /* timegm normalises 31 Feb into March: reject dates that do not exist. */
  struct tm back;
  if (!gmtime_r(&secs, &back) || back.tm_mday != d || back.tm_mon != mo - 1) return false;
  if ((uint64_t)secs > (UINT64_MAX - frac) / TSR_NS_PER_S) return false;
  *out_wall_ns = (uint64_t)secs * TSR_NS_PER_S + frac;
  return true;
}

void tsr_time_format_duration(uint64_t ns, char *buf, size_t cap) {
  static const struct {
    const char *name;
    uint64_t ns;
  } units[] = {
      {"d", 86400 * TSR_NS_PER_S},
      {"h", 3600 * TSR_NS_PER_S},
      {"m", 60 * TSR_NS_PER_S},
      {"s", TSR_NS_PER_S},
      {"ms", TSR_NS_PER_MS},
      {"us", TSR_NS_PER_US},
      {"ns", 1},
  };
  if (ns == 0) {
    snprintf(buf, cap, "0s");
    return;
  }
  size_t i = 0;
  while (ns < units[i].ns) i++;
  uint64_t major = ns / units[i].ns;
  uint64_t rest = ns % units[i].ns;
  if (i >= 3) { /* seconds and below: one unit with up to one decimal */
    uint64_t tenth = rest * 10 / units[i].ns;
    if (tenth)
      snprintf(buf, cap, "%llu.%llu%s", (unsigned long long)major, (unsigned long long)tenth, units[i].name);
    else
      snprintf(buf, cap, "%llu%s", (unsigned long long)major, units[i].name);
    return;
  }
  uint64_t minor = rest / units[i + 1].ns;
  if (minor)
    snprintf(buf, cap, "%llu%s%llu%s", (unsigned long long)major, units[i].name, (unsigned long long)minor,
             units[i + 1].name);
  else
    snprintf(buf, cap, "%llu%s", (unsigned long long)major, units[i].name);
}
