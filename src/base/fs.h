/* base/fs.h: files a privileged daemon can open without being tricked.
 *
 * tesserad runs as root and writes into its state directory. If another user
 * could write there (or into a parent), they could plant a symlink, a FIFO
 * or a hard link under a name the daemon is about to open, and make it
 * overwrite a root-owned file or hang. These helpers refuse such directories
 * and open files only as regular files, never through a symlink, never
 * blocking on a FIFO or device. Thread-safe, no global state. */
#ifndef TESSERA_BASE_FS_H
#define TESSERA_BASE_FS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "tessera/status.h"

/* Checks that `path` (absolute) is a directory that only this process's
 * user can change: owned by the effective uid, not writable by group or
 * others, and every ancestor owned by root or the effective uid and not
 * writable by group or others unless it is sticky (as /tmp is). `what`
 * names the directory in the message ("state directory").
 * TSR_FAILED_PRECONDITION says which component fails and why. */
TSR_MUST_USE tsr_status_t tsr_fs_check_private_dir(const char *path, const char *what);

/* Creates `path` (absolute) and any missing parents, each with `mode`
 * (umask applied), then checks it with tsr_fs_check_private_dir. An existing
 * directory is kept as it is (and checked). */
TSR_MUST_USE tsr_status_t tsr_fs_make_private_dir(const char *path, mode_t mode, const char *what);

/* openat(dirfd, name, flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, mode),
 * then fstat: anything but a regular file (a FIFO, a device, a directory)
 * is closed again and refused with TSR_FAILED_PRECONDITION; a symlink is
 * refused by O_NOFOLLOW (TSR_FAILED_PRECONDITION too). O_NONBLOCK only keeps
 * the open from waiting on a FIFO: it changes nothing for a regular file, so
 * it is left set. Use AT_FDCWD and an absolute path for a file outside any
 * directory descriptor. *out_stat (may be NULL) gets the file's fstat. */
TSR_MUST_USE tsr_status_t tsr_fs_open_regular(int dirfd, const char *name, int flags, mode_t mode, int *out_fd);
TSR_MUST_USE tsr_status_t tsr_fs_open_regular_stat(int dirfd, const char *name, int flags, mode_t mode, int *out_fd,
                                                   struct stat *out_stat);

/* Reads a whole regular file opened as tsr_fs_open_regular would, into a
 * new NUL-terminated buffer (*out_text, free() it), as tsr_fs_read_fd
 * reads it: a file of exactly `max` bytes is read, one of `max` + 1 is
 * TSR_DATA_LOSS. Messages name the file. */
TSR_MUST_USE tsr_status_t tsr_fs_read_file(int dirfd, const char *name, size_t max, char **out_text, size_t *out_len);

/* Reads the whole of the regular file open as `fd` (O_RDONLY or O_RDWR),
 * from offset 0 to its end, into a new NUL-terminated buffer (*out_text,
 * free() it; *out_len bytes before the NUL). It reads with pread: the
 * descriptor's offset is left where it was (a caller may peek at a file
 * it hands on, as the Slurm plugin peeks at sbatch's stdin), and `fd` is
 * not closed. The file's size is not trusted (/proc's files say 0): it is
 * read until end of file, the buffer growing as it goes.
 *   - at most `max` bytes: a file of exactly `max` bytes is read whole;
 *     one byte more is TSR_DATA_LOSS ("larger than <max> bytes"), so no
 *     caller ever acts on a cut file;
 *   - anything but a regular file (a FIFO, a terminal, a socket, a
 *     directory) is TSR_FAILED_PRECONDITION before any read, so a pipe is
 *     never waited on;
 *   - a read error is its errno's status.
 * *out_text is NULL and *out_len 0 on error. Messages do not name the file
 * (the caller knows it: annotate). */
TSR_MUST_USE tsr_status_t tsr_fs_read_fd(int fd, size_t max, char **out_text, size_t *out_len);

#endif
