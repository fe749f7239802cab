/* paths.c - read and written files against each other; outputs that name descriptors
 * (paths.h). */
#include "paths.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

/* ---- descriptors named by a path --------------------------------------------------------- */

/* The descriptor a path names by its spelling alone, or -1. */
static int spelled_descriptor(const char *p)
{
    static const char *const std[] = {"/dev/stdin", "/dev/stdout", "/dev/stderr"};
    for (int i = 0; i < 3; i++)
        if (strcmp(p, std[i]) == 0)
            return i;
    char self[64];
    snprintf(self, sizeof self, "/proc/%ld/fd/", (long)getpid());
    static const char *const dirs[] = {"/dev/fd/", "/proc/self/fd/", "/proc/thread-self/fd/"};
    const char *num = NULL;
    for (int i = 0; i < 3 && !num; i++)
        if (strncmp(p, dirs[i], strlen(dirs[i])) == 0)
            num = p + strlen(dirs[i]);
    if (!num && strncmp(p, self, strlen(self)) == 0)
        num = p + strlen(self);
    if (!num || !*num || strspn(num, "0123456789") != strlen(num) || strlen(num) > 9)
        return -1;
    return atoi(num);
}

int ge_path_descriptor(const char *path)
{
    char cur[PATH_MAX], link[PATH_MAX];
    if (strlen(path) >= sizeof cur)
        return -1;
    strcpy(cur, path);
    for (int hops = 0; hops < 40; hops++) { /* the kernel's own symlink limit */
        int fd = spelled_descriptor(cur);
        if (fd >= 0)
            return fd;
        ssize_t n = readlink(cur, link, sizeof link - 1);
        if (n < 0)
            return -1; /* not a symlink (or not there): names no descriptor */
        link[n] = 0;
        if (link[0] == '/') {
            strcpy(cur, link);
        } else { /* relative to the link's directory */
            char *slash = strrchr(cur, '/');
            size_t dl = slash ? (size_t)(slash - cur) + 1 : 0;
            if (dl + (size_t)n >= sizeof cur)
                return -1;
            memcpy(cur + dl, link, (size_t)n + 1);
        }
    }
    return -1;
}

FILE *ge_path_create(const char *path, ge_err *err)
{
    int named = ge_path_descriptor(path);
    FILE *f = NULL;
    if (named >= 0) {
        int fd = fcntl(named, F_DUPFD_CLOEXEC, 3);
        if (fd < 0) {
            ge_fail(err, GE_E_IO, "%s: names descriptor %d, which is not open", path, named);
            return NULL;
        }
        if (!(f = fdopen(fd, "wb"))) /* "w" on a descriptor does not truncate */
            close(fd);
    } else {
        f = fopen(path, "wbe");
    }
    if (!f)
        ge_fail(err, GE_E_IO, "%s: %s", path, strerror(errno));
    return f;
}

/* ---- identities ---------------------------------------------------------------------------- */

typedef struct {
    bool exists, regular, descriptor;
    dev_t dev;
    ino_t ino;
    char where[PATH_MAX]; /* not there yet: the path it would be created at, resolved */
} ident;

static void identify(const ge_path_use *u, ident *id)
{
    memset(id, 0, sizeof *id);
    struct stat sb;
    int fd = u->path ? ge_path_descriptor(u->path) : u->fd;
    id->descriptor = fd >= 0;
    if (fd >= 0 ? fstat(fd, &sb) == 0 : stat(u->path, &sb) == 0) {
        id->exists = true;
        id->regular = S_ISREG(sb.st_mode);
        id->dev = sb.st_dev;
        id->ino = sb.st_ino;
        return;
    }
    if (u->path && fd < 0)
        ge_path_resolve(u->path, id->where, sizeof id->where);
}

const char *ge_path_resolve(const char *path, char *buf, size_t n)
{
    char real[PATH_MAX], dir[PATH_MAX];
    if (realpath(path, real)) {
        snprintf(buf, n, "%s", real);
        return buf;
    }
    /* "out.npy" and "./dir/../out.npy" are one place before either exists */
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    size_t dl = slash ? (size_t)(slash - path) : 0;
    if (dl >= sizeof dir) {
        snprintf(buf, n, "%s", path);
        return buf;
    }
    memcpy(dir, path, dl);
    dir[dl] = 0;
    if (!realpath(slash ? (dl ? dir : "/") : ".", real))
        snprintf(buf, n, "%s", path);
    else
        snprintf(buf, n, "%s/%s", strcmp(real, "/") ? real : "", base);
    return buf;
}

static bool same(const ident *a, const ident *b)
{
    if (a->exists && b->exists)
        return a->regular && b->regular && a->dev == b->dev && a->ino == b->ino;
    return !a->exists && !b->exists && a->where[0] && strcmp(a->where, b->where) == 0;
}

static const char *shown(const ge_path_use *u)
{
    return u->path ? u->path : u->fd == 0 ? "<stdin>" : u->fd == 1 ? "<stdout>" : "<stderr>";
}

ge_status ge_paths_check(const ge_path_use *uses, size_t n, ge_err *err)
{
    ident *ids = calloc(n ? n : 1, sizeof *ids);
    if (!ids)
        return ge_fail(err, GE_E_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++)
        identify(&uses[i], &ids[i]);
    ge_status st = GE_OK;
    for (size_t i = 0; i < n && !st; i++) {
        for (size_t j = i + 1; j < n && !st; j++) {
            const ge_path_use *a = &uses[i], *b = &uses[j];
            if (!(a->write || b->write) || !same(&ids[i], &ids[j]))
                continue;
            if (a->write && b->write && ids[i].descriptor && ids[j].descriptor)
                continue; /* `>log 2>&1`: both append at one offset */
            const ge_path_use *w = a->write ? a : b, *other = w == a ? b : a;
            st = ge_fail(err, GE_E_USAGE, "%s %s is the same file as %s %s: refusing to %s",
                         w->role, shown(w), other->role, shown(other),
                         other->write ? "write both" : "overwrite what this run reads");
        }
    }
    free(ids);
    return st;
}

/* ---- content identity ------------------------------------------------------------------------ */

ge_status ge_file_digest(const char *path, unsigned long long *size, unsigned long long *hash,
                         ge_err *err)
{
    /* read() into one buffer, not mmap: 3-4x faster on a 300 MB model (no page faults; see
     * PERF.md), and a file cut short meanwhile is a short read, not a SIGBUS */
    int fd = ge_open_regular(path, err);
    if (fd < 0)
        return GE_E_IO;
    static char buf[1 << 20];
    XXH3_state_t *x = XXH3_createState();
    ge_status st = x ? GE_OK : ge_fail(err, GE_E_NOMEM, "out of memory");
    unsigned long long n = 0;
    ssize_t got = 0;
    if (x)
        XXH3_64bits_reset(x);
    while (x && (got = read(fd, buf, sizeof buf)) != 0) {
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            st = ge_fail(err, GE_E_IO, "%s: read error: %s", path, strerror(errno));
            break;
        }
        XXH3_64bits_update(x, buf, (size_t)got);
        n += (unsigned long long)got;
    }
    if (!st) {
        *size = n;
        *hash = XXH3_64bits_digest(x);
    }
    XXH3_freeState(x);
    close(fd);
    return st;
}
