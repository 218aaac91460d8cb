/* contrib/slurm/slurm_gpus.h: what spank_tessera.c decides about a job's
 * GPUs, apart from Slurm's daemons and tesserad so that it can be tested
 * on its own (tests/integration/slurm/test_slurm_gpus.c).
 *
 * Four questions:
 *   - at submission: does the job ask Slurm for a GPU (a gpu or shard GRES,
 *     --gpus and its kin), and for whole GPUs or shards? The answer is read
 *     from what srun, sbatch and salloc read themselves: the command line,
 *     their input environment variables, #SBATCH lines.
 *   - in slurmstepd: which GPU is each of the step's? Slurm 22.05 numbers a
 *     node's GPUs by their place in its gres.conf (SLURM_STEP_GPUS,
 *     SLURM_JOB_GPUS), not by their device file; gres.conf says which file
 *     each place is, and the file's number is the tesserad device's minor.
 *   - how long the lease lasts: the job's time left, from slurmctld.
 *   - while the job runs: has its end moved (scontrol update TimeLimit=),
 *     and is a lease's deadline off the job's end, so that it must be
 *     renewed? And how often to ask (plugstack.conf's follow=).
 * Errors are statuses with a message meant for the job's user and the
 * admin; nothing here changes anything outside its arguments. */
#ifndef TESSERA_CONTRIB_SLURM_GPUS_H
#define TESSERA_CONTRIB_SLURM_GPUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tessera/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- at submission -------------------------------------------------------- */

/* What a job asks Slurm for, as far as tessera cares: a mask of these
 * bits, 0 when it asks for neither. --gpu-mem governs either; --gpu-sm
 * alone governs only shards (with whole GPUs it needs --gpu-mem). */
typedef enum tsr_slurm_asks_e {
  TSR_SLURM_ASKS_GPU = 1u << 0,   /* whole GPUs: a gpu GRES, --gpus and its kin */
  TSR_SLURM_ASKS_SHARD = 1u << 1, /* a shard GRES */
} tsr_slurm_asks_t;

/* The value of --gres (or SLURM_GRES, SBATCH_GRES, SALLOC_GRES): the bits
 * of its comma-separated GRES ("gpu", "gpu:2", "gpu:a100:2", "shard:1",
 * with or without Slurm's "gres:"/"gres/" prefix) that are a gpu or a
 * shard with a count above 0. "none" and other GRES add nothing. */
unsigned tsr_slurm_gres_spec_asks(const char *spec);

/* The value of --gpus, --gpus-per-node, --gpus-per-socket or
 * --gpus-per-task ("2", "a100:2", "a100:1,v100:1"): TSR_SLURM_ASKS_GPU when
 * a count is above 0. A value Slurm itself would refuse counts: Slurm
 * refuses the job then, and that is not this check's to say. */
unsigned tsr_slurm_gpus_spec_asks(const char *spec);

/* Command-line words (argv without argv[0], or the words of an #SBATCH
 * line): what --gres, --gpus, --gpus-per-node, --gpus-per-socket,
 * --gpus-per-task (with '=' or the value in the next word; as getopt takes
 * them, a long option may be abbreviated, e.g. --gpus-per-n) and -G (-G2,
 * -G 2) ask for, together. It stops at "--". Every word is looked at, not
 * only those before the command (telling them apart needs every option of
 * srun): a GPU option among the command's own arguments counts, and
 * slurmstepd's check catches that job. */
unsigned tsr_slurm_words_ask(int count, char *const words[]);

/* An sbatch script: what its #SBATCH lines (those before its first
 * command, as sbatch reads them) ask for. */
unsigned tsr_slurm_script_asks(const char *text, size_t len);

/* Which command the plugin runs in at submission: the input variables
 * differ (SLURM_*, SBATCH_*, SALLOC_*). */
typedef enum tsr_slurm_command_e {
  TSR_SLURM_SRUN = 0,
  TSR_SLURM_SBATCH = 1,
  TSR_SLURM_SALLOC = 2,
} tsr_slurm_command_t;

/* What `command`'s input environment variables for GPUs (<P>_GRES,
 * <P>_GPUS, <P>_GPUS_PER_NODE, <P>_GPUS_PER_SOCKET, <P>_GPUS_PER_TASK) ask
 * for. `get` reads a variable (getenv). */
unsigned tsr_slurm_env_asks(tsr_slurm_command_t command, const char *(*get)(const char *name));

/* A job's allocated TRES as slurmctld writes them (tres_alloc_str,
 * "cpu=1,mem=1M,node=1,gres/gpu=1" or "...,gres/shard=2"): the gpus and
 * shards it holds above 0. slurmctld lists there only the TRES its
 * accounting tracks (AccountingStorageTRES): the request's tres_per_job,
 * tres_per_node, ... ("gres:gpu:1") read with tsr_slurm_gres_spec_asks
 * say it whatever the accounting. */
unsigned tsr_slurm_tres_asks(const char *tres);

/* ---- in slurmstepd: the step's GPUs ---------------------------------------- */

#define TSR_SLURM_GPUS_MAX 64
#define TSR_SLURM_FILE_MAX 256

/* A node's GPUs as Slurm numbers them: gpu[i] is Slurm's GPU i. */
typedef struct tsr_slurm_gpus_s {
  size_t count;
  struct {
    char file[TSR_SLURM_FILE_MAX]; /* "/dev/nvidia3" */
    uint32_t dev_num;              /* the number that ends the file's name: 3 */
    uint32_t shards;               /* its gres/shard count; 0 when it has none */
  } gpu[TSR_SLURM_GPUS_MAX];
} tsr_slurm_gpus_t;

/* Reads gres.conf (`text`, NUL-terminated; `name` stands for it in
 * messages) for node `node` as slurmd 22.05 does without AutoDetect: the
 * Name=gpu records with File= (File=/dev/nvidia[0-3] is four GPUs) of the
 * lines without NodeName=, in order, then those of the NodeName= lines
 * that name `node`, in order; each file is one GPU, numbered from 0 in that
 * order. Shards: a Name=shard record's Count divided among its files, or
 * one record without File spread over the GPUs, as Slurm spreads it.
 * Keys are case-insensitive; '#' starts a comment; '\' at a line's end
 * continues it.
 * Refused (TSR_FAILED_PRECONDITION, saying why), so that no GPU is guessed:
 * AutoDetect other than off (Slurm then orders GPUs by PCI bus), a gpu
 * record with MultipleFiles=, GPUs of more than one Type (Slurm orders
 * them by slurm.conf's Gres= then), a gpu file whose name does not end
 * in a number, two GPUs with one number, Include lines, more than
 * TSR_SLURM_GPUS_MAX GPUs, more than one shard record without File=
 * (how Slurm spreads two is not followed). TSR_INVALID_ARGUMENT for a line
 * that does not read, a File= path of TSR_SLURM_FILE_MAX bytes or more,
 * shard records both with and without File= (Slurm refuses that too).
 * *out is untouched on error. */
TSR_MUST_USE tsr_status_t tsr_slurm_gres_conf_parse(const char *text, const char *name, const char *node,
                                                    tsr_slurm_gpus_t *out);

/* A list of Slurm's GPU indices ("0", "0,2"; SLURM_STEP_GPUS), at most
 * `cap`, no index twice. TSR_INVALID_ARGUMENT for anything else ("", "0,",
 * "a", "-1", a GPU unique id); *out_count is 0 then. */
TSR_MUST_USE tsr_status_t tsr_slurm_index_list_parse(const char *text, uint32_t *out, size_t cap, size_t *out_count);

/* One of tesserad's devices, as far as the mapping needs it. */
typedef struct tsr_slurm_device_s {
  uint32_t index; /* tesserad's device index: what leases name */
  bool has_minor;
  uint32_t minor; /* the N of its /dev/nvidiaN */
  uint64_t memory_bytes;
} tsr_slurm_device_t;

/* The tesserad device whose minor is `dev_num` (*out_device points into
 * `devices`). None, or more than one: TSR_NOT_FOUND or
 * TSR_FAILED_PRECONDITION, naming the number and the file (`file`, as
 * gres.conf gives it); *out_device is untouched then. */
TSR_MUST_USE tsr_status_t tsr_slurm_device_find(const tsr_slurm_device_t *devices, size_t count, uint32_t dev_num,
                                                const char *file, const tsr_slurm_device_t **out_device);

/* SLURM_SHARDS_ON_NODE, the step's shards on the node as Slurm's shard
 * plugin sets it: NULL or "" is 0 (not a shard step); else a whole number
 * up to UINT32_MAX. TSR_INVALID_ARGUMENT, naming the variable and the
 * value, for anything else ("lots", "-1", "2 "): no share of a GPU is
 * guessed from it. *out is untouched on error. */
TSR_MUST_USE tsr_status_t tsr_slurm_shards_parse(const char *text, uint32_t *out);

/* ---- the lease's deadline, and following the job's end ------------------------- */

/* What slurmctld said of the job's end. */
typedef struct tsr_slurm_job_time_s {
  bool answered;  /* slurmctld answered with the job */
  bool unlimited; /* the job has no time limit */
  int64_t end;    /* its end time (s since the epoch), with a limit */
} tsr_slurm_job_time_t;

/* The lease's deadline (wall clock, ns since the epoch) for a job whose
 * end slurmctld gave as `job`, at `now_ns`: the job's end, and at most
 * `max_ns` from now (a job without a limit gets that). TSR_UNAVAILABLE
 * when slurmctld did not answer (no lease may outlive a job whose end
 * nobody knows), TSR_FAILED_PRECONDITION when its end has passed; *out_ns
 * is untouched then. One rule for a new lease and a renewed one. */
TSR_MUST_USE tsr_status_t tsr_slurm_lease_deadline(const tsr_slurm_job_time_t *job, uint64_t now_ns, uint64_t max_ns,
                                                   uint64_t *out_ns);

/* The same as a duration from `now_ns` (what lease.create takes): the
 * deadline minus `now_ns` (more than 0 when `max_ns` is). Refusals and *out_ns as
 * tsr_slurm_lease_deadline. */
TSR_MUST_USE tsr_status_t tsr_slurm_lease_duration(const tsr_slurm_job_time_t *job, uint64_t now_ns, uint64_t max_ns,
                                                   uint64_t *out_ns);

/* Whether slurmctld's answer `now` moves the job's end from `before`: it
 * gained or lost its time limit, or its end changed (an admin's scontrol
 * update TimeLimit=, EndTime=). An unanswered `now` moves nothing; an
 * unanswered `before` (nobody knew the end) is moved by any answer. */
bool tsr_slurm_job_end_moved(const tsr_slurm_job_time_t *before, const tsr_slurm_job_time_t *now);

/* How far a lease's deadline may be from the job's before it is renewed:
 * a new lease's deadline is the job's end plus tesserad's time to answer. */
#define TSR_SLURM_DEADLINE_SLACK_NS 1000000000ull

/* Whether a lease with deadline `deadline_ns` must be renewed to
 * `target_ns`: they are more than TSR_SLURM_DEADLINE_SLACK_NS apart, either
 * way (a renewal moves a deadline earlier as well as later). */
bool tsr_slurm_deadline_off(uint64_t deadline_ns, uint64_t target_ns);

/* plugstack.conf's follow=: how often slurmstepd asks slurmctld for the
 * job's end while a step runs. "0" (or any zero duration, "0s") turns
 * following off: *out_ns is 0. Else a duration of 1s or more ("30s",
 * "2m"); TSR_INVALID_ARGUMENT, saying what it takes, for anything else
 * ("soon", "500ms", "30": a unit is required); *out_ns is untouched then. */
TSR_MUST_USE tsr_status_t tsr_slurm_follow_parse(const char *text, uint64_t *out_ns);

#ifdef __cplusplus
}
#endif
#endif
