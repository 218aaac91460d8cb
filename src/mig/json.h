/* mig/json.h: what libtessera-mig and `tessera mig` add to base/json's
 * writer for the JSON they print. Private; the CLI shares it so that every
 * JSON text of the MIG family goes through the one writer.
 *
 * base/json writes integers and millionths; plans are seconds held as
 * double. If base/json gains a writer for doubles, these go. */
#ifndef TESSERA_MIG_JSON_H
#define TESSERA_MIG_JSON_H

#include <stdint.h>
#include <stdio.h>

#include "base/json.h"
#include "tessera/status.h"

/* A finite double as the shortest of %.15g, %.16g, %.17g that reads back
 * as the same double ("0.25", "12.61", "1e+20"); null when not finite (a
 * task that cannot run on a size), since JSON has no infinity. */
void tsr_mig_json_double(tsr_json_writer_t *w, double value);
void tsr_mig_json_key_double(tsr_json_writer_t *w, const char *key, double value);

/* A signed integer member (counts, indices, exit statuses). */
void tsr_mig_json_key_int(tsr_json_writer_t *w, const char *key, int64_t value);

/* Writes the writer's text and a newline to `out`. OUT_OF_MEMORY when the
 * writer ran out of memory (the text is incomplete: nothing is written),
 * IO_ERROR when the stream reports an error. */
tsr_status_t tsr_mig_json_write(const tsr_json_writer_t *w, FILE *out);

#endif
