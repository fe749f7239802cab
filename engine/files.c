/* files.c - opening the files the engine reads: regular files only, never a blocking open. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ge.h"

static const char *kind_of(mode_t m)
{
    return S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO" : S_ISSOCK(m) ? "a socket"
         : S_ISCHR(m) ? "a character device" : S_ISBLK(m) ? "a block device"
                      : "not a regular file";
}

int ge_open_regular(const char *path, ge_err *err)
{
    /* O_NONBLOCK: a FIFO opens at once instead of waiting for a writer; it is refused
     * below, and a regular file's reads ignore the flag (cleared all the same) */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return ge_fail(err, GE_E_IO, "%s: cannot open: %s", path, strerror(errno)), -1;
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return ge_fail(err, GE_E_IO, "%s: cannot stat: %s", path, strerror(e)), -1;
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return ge_fail(err, GE_E_IO, "%s: %s (only regular files are read)", path,
                       kind_of(sb.st_mode)), -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        int e = errno;
        close(fd);
        return ge_fail(err, GE_E_IO, "%s: cannot open: %s", path, strerror(e)), -1;
    }
    return fd;
}
