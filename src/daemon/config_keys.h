/* daemon/config_keys.h: the keys of tesserad's configuration, one table per
 * section (config_keys.c), and what the file reader (config.c) asks of them.
 * Private to config*.c and their tests; config.h is the module's interface.
 *
 * Each key is one entry: its name, the kind of value it takes with that
 * kind's bounds, and the field of the section's struct it fills (tsr_config_t
 * for [daemon], tsr_device_t for [device.N]). A key whose value no kind reads
 * has a setter of its own (TSR_CONFIG_KIND_CUSTOM), which still names its field:
 * the reader finds keys by field for its checks across keys. */
#ifndef TESSERA_DAEMON_CONFIG_KEYS_H
#define TESSERA_DAEMON_CONFIG_KEYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tessera/status.h"

/* The most keys one section may have: the reader keeps a line number per
 * key in arrays of this size (static asserts hold the tables to it). */
#define TSR_CONFIG_DAEMON_KEYS_MAX 40
#define TSR_CONFIG_DEVICE_KEYS_MAX 12

typedef enum tsr_config_kind_e {
  TSR_CONFIG_KIND_PATH,              /* an absolute path, into a char array */
  TSR_CONFIG_KIND_TEXT,              /* any text but "", into a char array */
  TSR_CONFIG_KIND_COUNT,             /* a whole number from min to max */
  TSR_CONFIG_KIND_SIZE,              /* bytes, at least min; 0 too with zero_off */
  TSR_CONFIG_KIND_POSITIVE_DURATION, /* a duration above 0, in ns */
  TSR_CONFIG_KIND_DURATION,          /* a duration from min to max ns; "0" too with zero_off */
  TSR_CONFIG_KIND_CHOICE,            /* one of words: its value */
  TSR_CONFIG_KIND_CUSTOM             /* set() reads it */
} tsr_config_kind_t;

/* A word a CHOICE key takes, and what it stores. */
typedef struct tsr_config_word_s {
  const char *word;
  uint32_t value;
} tsr_config_word_t;

typedef struct tsr_config_key_s {
  const char *name;
  tsr_config_kind_t kind;
  size_t offset;                  /* its field in the section's struct (a CUSTOM key's first field) */
  size_t size;                    /* that field's bytes: numbers are stored at this width */
  uint64_t min;                   /* COUNT, SIZE, DURATION */
  uint64_t max;                   /* COUNT, DURATION */
  bool zero_off;                  /* SIZE, DURATION: 0 is taken too, and turns the feature off */
  const tsr_config_word_t *words; /* CHOICE: ends with {NULL} */
  /* CUSTOM: reads `value` into `section` (a tsr_config_t or tsr_device_t) */
  tsr_status_t (*set)(void *section, const char *value);
} tsr_config_key_t;

/* One section's keys, in the order messages list them. */
typedef struct tsr_config_keys_s {
  const tsr_config_key_t *key;
  size_t count;
} tsr_config_keys_t;

extern const tsr_config_keys_t tsr_config_daemon_keys; /* [daemon], into tsr_config_t */
extern const tsr_config_keys_t tsr_config_device_keys; /* [device.N], into tsr_device_t */

/* The index of the key named `name`; -1 when there is none. */
int tsr_config_key_find(const tsr_config_keys_t *keys, const char *name);

/* The index of the key that fills the field at `offset` of the section's
 * struct; -1 when none does. */
int tsr_config_key_of_field(const tsr_config_keys_t *keys, size_t offset);

/* The keys' names as a list ("name, memory, sms"), cut to fit `cap`. */
void tsr_config_key_names(const tsr_config_keys_t *keys, char *buf, size_t cap);

/* Reads `value` into key `index`'s field of `section` (a tsr_config_t for
 * tsr_config_daemon_keys, a tsr_device_t for tsr_config_device_keys), or
 * says what is wrong with it, leaving the section as it was; the caller
 * adds "<file>:<line>: bad value for <key>: ". */
TSR_MUST_USE tsr_status_t tsr_config_key_set(const tsr_config_keys_t *keys, int index, void *section,
                                             const char *value);

#endif
