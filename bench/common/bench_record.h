/* bench_record.h: the benchmarks' machine-readable results (bench/README.md).
 *
 * A benchmark that prints a row of its table also records it: when the
 * environment variable TSR_BENCH_JSON names a file, each record is appended
 * to it as one JSON object on a line of its own,
 *
 *   {"bench":..,"commit":..,"date":..,"host":..,"device":"cpu","driver":null,
 *    "case":..,"figures":{"p50_ns":812,..},"target":..,"verdict":..}
 *
 * the format scripts/bench_record.py writes for the scripts and
 * scripts/bench_table.py reads. Without TSR_BENCH_JSON every call is a
 * no-op (begin returns NULL, which the other calls accept). Nothing is
 * printed on stdout, so the human tables stay exactly as they were; a file
 * that cannot be written is said once on stderr and the run goes on.
 *
 *   tsr_bench_record_t *r = tsr_bench_record_begin("region", "%d threads", n);
 *   tsr_bench_record_figure(r, ns, "charge_credit_ns");
 *   tsr_bench_record_end(r, "<= 500 ns", NULL);
 *
 * Call it outside timed code: begin allocates, and the first begin of a
 * process runs `git describe` for the commit. Main thread only. */
#ifndef TESSERA_BENCH_RECORD_H
#define TESSERA_BENCH_RECORD_H

typedef struct tsr_bench_record_s tsr_bench_record_t;

/* A record of benchmark `bench` for the row named by `case_format` (printf);
 * NULL when TSR_BENCH_JSON is unset or empty, or out of memory. */
tsr_bench_record_t *tsr_bench_record_begin(const char *bench, const char *case_format, ...)
    __attribute__((format(printf, 2, 3)));

/* Adds one figure: `value` under the name made by `name_format` (printf),
 * its unit in the name (p50_ns, pairs_per_s, ratio). A value that is not
 * finite is written as null. */
void tsr_bench_record_figure(tsr_bench_record_t *record, double value, const char *name_format, ...)
    __attribute__((format(printf, 3, 4)));

/* Adds `target` and `verdict` (each left out when NULL), appends the line
 * to the file with one write, and frees the record. */
void tsr_bench_record_end(tsr_bench_record_t *record, const char *target, const char *verdict);

#endif
