/* daemon/config.h: tesserad's configuration (INI, /etc/tessera/tessera.conf).
 *
 *   [daemon]
 *   state_dir = /var/lib/tessera        # lock files, id counter, audit log
 *   socket = /run/tessera/tessera.sock
 *   socket_mode = 0666                   # who may connect (identity is checked per request)
 *   admin_group = tessera-admin          # members are admins (uid 0 always is)
 *   devices = auto                       # auto: NVML, else [device.N]; nvml; config
 *   sync = full                          # full: fsync every change; none: atomic rename only
 *   max_lease = 30d                      # longest lease a user may ask for
 *   client_timeout = 30s                 # a connection idle this long is closed
 *   max_clients = 1024                   # connections in all, 1..65536
 *   max_clients_per_user = 64            # connections of one uid (admins exempt); 0 = no limit,
 *                                        # at most 65536
 *   admin_reserved_clients = 16          # of max_clients, only admins may take these;
 *                                        # must be less than max_clients
 *   max_queued_bytes = 256MiB            # unsent replies, all clients together; >= 1MiB
 *   max_queued_bytes_per_user = 32MiB    # unsent replies of one uid's clients; >= 1MiB and
 *                                        # at most max_queued_bytes
 *   max_leases_per_user = 64             # active leases one owner may hold (admins exempt);
 *                                        # 0 = no limit
 *   max_queued_per_user = 8              # creates of one owner waiting for capacity
 *                                        # (lease create --wait; admins exempt); 0 = no limit
 *   min_lease = 0.1%                     # smallest lease: a share (0.1%, 0.001) or a size
 *                                        # (256MiB); 0 = no minimum. A bare number (256) is
 *                                        # refused: it could mean either.
 *   audit_max_size = 64MiB               # audit.log is rotated (audit.log.1, ...) past this;
 *                                        # 0 = never rotate, else at least 64KiB
 *   audit_keep = 4                       # rotated files kept, at most 1000; 0 = keep every one
 *   audit_deny_rate = 5                  # refusals per user per second written in full;
 *                                        # the rest are counted in one line per second
 *                                        # (0: count every one)
 *   busy_poll = 50us                     # after serving, poll this long before sleeping;
 *                                        # 0 = never, at most 10ms
 *   log_level = info                     # error, warn, info or debug
 *   on_expiry = revoke                   # what ends a lease's processes at expiry and
 *                                        # release: revoke (the region is ended:
 *                                        # allocations fail) or signal (then SIGTERM, and
 *                                        # SIGKILL after expiry_grace); a lease may name
 *                                        # its own (lease create --on-expiry)
 *   over_limit = signal                  # what the backstop does when a lease's processes
 *                                        # use more than the lease (NVML), shim or no
 *                                        # shim: signal (SIGTERM to every one of them,
 *                                        # SIGKILL after expiry_grace) or log (a log
 *                                        # line and an audit line only); a lease may name
 *                                        # its own (lease create --over-limit), one that
 *                                        # does not follows this key as it is now
 *   expiry_grace = 10s                   # SIGTERM to SIGKILL; at least 1ms, at most 1h
 *   backstop_period = 500ms              # how often NVML's per-process memory is checked
 *                                        # against the leases; 0 = never (at most 1h).
 *                                        # A process over its lease gets SIGTERM within
 *                                        # one period (plus NVML's own delay)
 *   share_burst = 50ms                   # idle time that a lease with an SM share may
 *                                        # make up for at once (the token bucket's depth;
 *                                        # at most 10s)
 *   stream_share = 100%                  # the most of a lease's SM share one stream
 *                                        # may take
 *   share_switch_cost = 6%               # device time lost switching between leases
 *                                        # that run together; while they do and their
 *                                        # shares add up to more than 100% less this,
 *                                        # each is scaled down in proportion (0% to 50%;
 *                                        # 0 = never)
 *   policy = pass                        # deny: an ordinary user's process on a GPU where
 *                                        # that user holds no lease is signalled
 *                                        # (by the backstop)
 *   audit_log = <state_dir>/audit.log
 *   region_dir = /run/tessera/regions    # one shared region per lease (tmpfs: the
 *                                        # counters are memory, not data); when
 *                                        # --state-dir is given and this is not,
 *                                        # <state_dir>/regions
 *   metrics = 127.0.0.1:9464             # /metrics' HOST:PORT, or off
 *   metrics_request_timeout = 5s         # a /metrics connection that has not sent its whole
 *                                        # request this long after its accept is closed
 *                                        # (100ms to 1m)
 *   metrics_group = prometheus           # members see every lease's series on /metrics, as
 *                                        # admins do; default none
 *   metrics_remote = counts              # what a scraper on another host sees: counts (the
 *                                        # node-wide series) or full (everything)
 *
 *   [device.0]                           # one per GPU, numbered 0..N-1
 *   name = NVIDIA H100 80GB HBM3
 *   memory = 80GiB
 *   sms = 132
 *   uuid = GPU-...                       # optional
 *   minor = 0                            # optional, CUDA devices only: the N of its
 *                                        # /dev/nvidiaN (0 to TSR_DEVICE_MINOR_MAX, one
 *                                        # device each), which Slurm's plugin matches
 *                                        # to gres.conf's File=
 *
 * (The '#' notes above document; a real file puts comments on lines of
 * their own, see below.)
 *
 * Syntax. inih (Debian's libinih) splits lines into sections, keys and
 * values; config.c puts every line through a gate first, so that the file
 * keeps the strict rules it always had:
 *   - one item per line: a blank line, a comment line starting with '#' or
 *     ';', "[section]", or "key = value" (only '=': inih's "key: value" is
 *     refused); whitespace around names and values is trimmed, and
 *     indentation means nothing (never a continuation of the value above:
 *     inih's multi-line values are off);
 *   - comments take whole lines: '#' or ';' after whitespace inside a line
 *     is refused (Debian's inih would cut a value at " ;" without a word),
 *     while a value may hold '#' or ';' otherwise ("gpu#admins");
 *   - a line holds at most 4093 bytes (config.c raises Debian's inih line
 *     buffer, 200 bytes, to 4096, so that a 255-byte path fits);
 *   - a UTF-8 byte-order mark before the first line is skipped;
 *   - an unknown section (even one with no keys) or key, a bad value, a
 *     duplicate key, a key outside a section, or a gap in device numbers is
 *     an error naming the file and the line.
 * Checks that involve two keys (admin_reserved_clients < max_clients,
 * max_queued_bytes_per_user <= max_queued_bytes) run after the whole file,
 * since keys come in any order; they name the line of the later key. */
#ifndef TESSERA_DAEMON_CONFIG_H
#define TESSERA_DAEMON_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "device/device.h"
#include "lease/lease.h"
#include "tessera/status.h"

#define TSR_DEFAULT_CONFIG "/etc/tessera/tessera.conf"
#define TSR_DEFAULT_STATE_DIR "/var/lib/tessera"
#define TSR_METRICS_DEFAULT "127.0.0.1:9464"         /* the [daemon] metrics key's default */
#define TSR_METRICS_REQUEST_TIMEOUT_NS 5000000000ull /* metrics_request_timeout's default */
#define TSR_DEFAULT_REGION_DIR "/run/tessera/regions"
#define TSR_CONFIG_MAX_DEVICES 64
#define TSR_CONFIG_BUSY_POLL_MAX_NS 10000000ull /* 10 ms */

typedef enum tsr_devices_from_e {
  TSR_DEVICES_AUTO = 0,  /* NVML if it finds a GPU, else the config */
  TSR_DEVICES_NVML = 1,  /* NVML only: no GPU is an error */
  TSR_DEVICES_CONFIG = 2 /* [device.N] only */
} tsr_devices_from_t;

typedef struct tsr_config_s {
  char state_dir[256];
  char socket[108]; /* sun_path limit */
  uint32_t socket_mode;
  char admin_group[64];
  tsr_devices_from_t devices_from;
  tsr_lease_sync_t sync;
  uint64_t max_lease_ns;
  uint64_t client_timeout_ns;
  uint32_t max_clients;
  uint32_t max_clients_per_user;   /* 0 = no per-user limit */
  uint32_t admin_reserved_clients; /* < max_clients */
  uint64_t max_queued_bytes;
  uint64_t max_queued_bytes_per_user;
  uint32_t max_leases_per_user; /* 0 = no limit */
  uint32_t max_queued_per_user; /* 0 = no limit */
  uint32_t min_lease_ppm;       /* min_lease given as a share; 0 if given as a size */
  uint64_t min_lease_bytes;     /* min_lease given as a size; 0 if given as a share */
  uint64_t audit_max_bytes;     /* 0 = never rotate */
  uint32_t audit_keep;          /* 0 = keep every rotated file */
  uint32_t audit_deny_rate;     /* 0 = coalesce every refusal */
  uint64_t busy_poll_ns;        /* 0: block in epoll_wait at once */
  int log_level;
  char audit_log[256];                 /* "" = <state_dir>/audit.log */
  char region_dir[256];                /* "" = TSR_DEFAULT_REGION_DIR, or <state_dir>/regions (see main.c) */
  char metrics[80];                    /* /metrics' HOST:PORT, or "off" */
  uint64_t metrics_request_timeout_ns; /* a /metrics request must be whole this long after its accept */
  char metrics_group[64];              /* members see everything on /metrics; "" = none */
  bool metrics_remote_full;            /* metrics_remote = full: remote scrapers see everything */
  tsr_lease_action_t on_expiry;        /* REVOKE or SIGNAL, never DEFAULT */
  tsr_lease_over_limit_t over_limit;   /* SIGNAL or LOG, never DEFAULT */
  uint64_t expiry_grace_ns;            /* SIGTERM to SIGKILL */
  uint64_t backstop_period_ns;         /* 0: no backstop */
  bool policy_deny;                    /* policy = deny */
  uint64_t share_burst_ns;             /* the compute bucket's burst */
  uint32_t stream_share_ppm;           /* one stream's part of a lease's SM share */
  uint32_t share_switch_cost_ppm;      /* the switching reserve (regions.c) */
  tsr_device_t devices[TSR_CONFIG_MAX_DEVICES];
  size_t device_count;
} tsr_config_t;

/* "HOST:PORT" (an IPv4 address, localhost, or [IPv6]) into a socket
 * address: the `metrics` key's syntax. */
TSR_MUST_USE tsr_status_t tsr_config_parse_listen(const char *text, struct sockaddr_storage *out, socklen_t *out_len);

/* The defaults above, no devices. */
void tsr_config_defaults(tsr_config_t *out_config);

/* Reads `path` over the values already in *config. The path may be a
 * symbolic link (it is resolved); what it names must be a regular file of
 * at most 1 MiB: a FIFO or a device is refused at once
 * (TSR_FAILED_PRECONDITION), never waited on. A missing file is
 * TSR_NOT_FOUND (callers decide whether that matters). On error *config may
 * be partly changed: load into a copy if that matters. Thread-safe. */
TSR_MUST_USE tsr_status_t tsr_config_load(const char *path, tsr_config_t *config);

/* Same, from a NUL-terminated string (`name` stands for the file in
 * messages: "<name>:<line>: ..."). */
TSR_MUST_USE tsr_status_t tsr_config_parse(const char *text, const char *name, tsr_config_t *config);

#endif
