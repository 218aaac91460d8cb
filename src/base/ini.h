/* base/ini.h: a strict reader for INI files.
 *
 * Syntax, one item per line: blank lines; comments starting with '#' or ';'
 * (whole lines only: a value may contain '#'); "[section]"; "key = value".
 * Whitespace around names and values is trimmed. Anything else is an error
 * naming the line. Thread-safe, no global state. */
#ifndef TESSERA_BASE_INI_H
#define TESSERA_BASE_INI_H

#include "tessera/status.h"

/* Called for every section header (key and value NULL) and every key.
 * `section` is "" before the first header. Return non-NULL to stop; the
 * status is passed back to the caller of tsr_ini_parse prefixed with
 * "<name>:<line>: ". */
typedef tsr_status_t (*tsr_ini_fn)(void *ctx, const char *section, const char *key,
                                   const char *value, int line);

/* Parses NUL-terminated `text`; `name` (a file name) prefixes messages. */
tsr_status_t tsr_ini_parse(const char *text, const char *name, tsr_ini_fn fn, void *ctx);

/* Reads the file at `path` (at most 1 MiB) and parses it. */
tsr_status_t tsr_ini_parse_file(const char *path, tsr_ini_fn fn, void *ctx);

#endif
