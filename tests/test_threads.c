/* test_threads.c - CPU ordering on fake sysfs trees (hybrid, SMT, subsets, missing files) and
 * the worker pool (every task once, thread caps, many back-to-back calls). */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "threads.h"

static void put(const char *root, const char *rel, const char *text)
{
    char path[512], dir[512];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    strcpy(dir, path);
    for (char *s = dir + strlen(root) + 1; *s; s++)
        if (*s == '/') {
            *s = 0;
            mkdir(dir, 0755);
            *s = '/';
        }
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static void siblings(const char *root, int cpu, const char *list)
{
    char rel[128];
    snprintf(rel, sizeof rel, "devices/system/cpu/cpu%d/topology/thread_siblings_list", cpu);
    put(root, rel, list);
}

static bool order_is(const ge_topo *t, const int *want, int n)
{
    if (t->n != n)
        return false;
    for (int i = 0; i < n; i++)
        if (t->cpus[i] != want[i])
            return false;
    return true;
}

static void show(const char *name, const ge_topo *t, const int *want, int n, int pcore)
{
    char got[256] = "";
    for (int i = 0; i < t->n; i++)
        snprintf(got + strlen(got), sizeof got - strlen(got), "%d ", t->cpus[i]);
    check(order_is(t, want, n) && t->n_pcore == pcore, name, "order %s n_pcore %d", got,
          t->n_pcore);
}

typedef struct {
    _Atomic int64_t sum;
    _Atomic int hits[64];
    _Atomic int worker_seen[64];
} job;

static void task(void *ctx, int64_t i, int worker)
{
    job *j = ctx;
    atomic_fetch_add(&j->sum, i);
    if (i < 64)
        atomic_fetch_add(&j->hits[i], 1);
    atomic_store(&j->worker_seen[worker], 1);
}

typedef struct {
    ge_pool *p;
    job *j;
    int cpu;
    bool pinned;
} pin_arg;

static void *call_pool(void *v)
{
    pin_arg *a = v;
    ge_pool_run(a->p, 10, 0, task, a->j);
    cpu_set_t set;
    sched_getaffinity(0, sizeof set, &set);
    a->pinned = CPU_COUNT(&set) == 1 && CPU_ISSET(a->cpu, &set);
    return NULL;
}

int main(int argc, char **argv)
{
    const char *out = argc > 1 ? argv[1] : "build/test-out";
    char root[512];
    ge_err err;
    ge_topo t;

    /* hybrid: P-cores 0/1 and 2/3 (SMT pairs), E-cores 4..7 */
    snprintf(root, sizeof root, "%s/sysfs-hybrid", out);
    mkdir(root, 0755);
    put(root, "devices/cpu_core/cpus", "0-3\n");
    put(root, "devices/cpu_atom/cpus", "4-7\n");
    siblings(root, 0, "0-1\n"), siblings(root, 1, "0-1\n");
    siblings(root, 2, "2-3\n"), siblings(root, 3, "2-3\n");
    for (int c = 4; c < 8; c++) {
        char l[16];
        snprintf(l, sizeof l, "%d\n", c);
        siblings(root, c, l);
    }
    int all8[] = {0, 1, 2, 3, 4, 5, 6, 7};
    ge_topo_read(root, all8, 8, &t, &err);
    show("hybrid: P primaries, E-cores, then SMT siblings", &t, (int[]){0, 2, 4, 5, 6, 7, 1, 3},
         8, 2);
    check(t.hybrid && t.n_core == 6, "hybrid detected, 6 cores", "hybrid %d cores %d",
          t.hybrid, t.n_core);
    ge_topo_read(root, (int[]){1, 3, 5}, 3, &t, &err);
    show("hybrid subset: a lone SMT thread counts as its core's primary", &t,
         (int[]){1, 3, 5}, 3, 2);

    /* non-hybrid SMT: cores (0,2) and (1,3) */
    snprintf(root, sizeof root, "%s/sysfs-smt", out);
    mkdir(root, 0755);
    siblings(root, 0, "0,2\n"), siblings(root, 2, "0,2\n");
    siblings(root, 1, "1,3\n"), siblings(root, 3, "1,3\n");
    /* cpu 0's caches as a Zen 1 lists them (index order is not level order), cpu 1's as a
     * Zen 5 ("1M"); an unreadable level skipped */
    put(root, "devices/system/cpu/cpu0/cache/index0/level", "1\n");
    put(root, "devices/system/cpu/cpu0/cache/index0/size", "32K\n");
    put(root, "devices/system/cpu/cpu0/cache/index1/level", "3\n");
    put(root, "devices/system/cpu/cpu0/cache/index1/size", "8192K\n");
    put(root, "devices/system/cpu/cpu0/cache/index2/level", "2\n");
    put(root, "devices/system/cpu/cpu0/cache/index2/size", "512K\n");
    put(root, "devices/system/cpu/cpu0/cache/index3/level", "x\n");
    put(root, "devices/system/cpu/cpu0/cache/index3/size", "64M\n");
    put(root, "devices/system/cpu/cpu1/cache/index0/level", "2\n");
    put(root, "devices/system/cpu/cpu1/cache/index0/size", "1M\n");
    ge_topo_read(root, (int[]){0, 1, 2, 3}, 4, &t, &err);
    show("SMT: one thread per core first", &t, (int[]){0, 1, 2, 3}, 4, 2);
    check(!t.hybrid, "SMT machine is not hybrid", "hybrid");
    check(t.l2_bytes == 512 << 10 && t.llc_bytes == 8 << 20, "caches: the first CPU's L2 and L3",
          "l2 %zu llc %zu", t.l2_bytes, t.llc_bytes);
    ge_topo_read(root, (int[]){1, 3}, 2, &t, &err);
    check(t.l2_bytes == 1 << 20 && t.llc_bytes == 1 << 20, "caches: an L2 alone is the last level",
          "l2 %zu llc %zu", t.l2_bytes, t.llc_bytes);

    /* no sysfs at all */
    snprintf(root, sizeof root, "%s/sysfs-none", out);
    ge_topo_read(root, (int[]){3, 5}, 2, &t, &err);
    show("no topology files: allowed order kept", &t, (int[]){3, 5}, 2, 2);
    check(t.l2_bytes == 0 && t.llc_bytes == 0, "no cache files: sizes 0", "l2 %zu llc %zu",
          t.l2_bytes, t.llc_bytes);

    /* the real machine */
    int cpus[1024], n = ge_topo_allowed(cpus, 1024);
    check(n >= 1 && ge_topo_read("/sys", cpus, n, &t, &err) == GE_OK && t.n == n,
          "real topology reads", "%d cpus, %d listed", n, t.n);

    /* pool */
    ge_pool *p;
    if (!check(ge_pool_create(&p, 4, NULL, false, &err) == GE_OK, "pool of 4", "%s", err.msg))
        return check_done();
    job *j = calloc(1, sizeof *j);
    ge_pool_run(p, 1000, 0, task, j);
    int once = 1;
    for (int i = 0; i < 64; i++)
        once &= j->hits[i] == 1;
    check(j->sum == 999 * 1000 / 2 && once, "every task runs exactly once", "sum %lld",
          (long long)j->sum);
    memset(j, 0, sizeof *j);
    ge_pool_run(p, 1000, 2, task, j);
    int used = 0;
    for (int w = 0; w < 64; w++)
        used += j->worker_seen[w];
    check(j->worker_seen[2] == 0 && j->worker_seen[3] == 0 && used <= 2,
          "thread cap: at most 2 workers", "%d used", used);
    int bad = 0;
    for (int r = 0; r < 5000; r++) {
        memset(j, 0, sizeof *j);
        ge_pool_run(p, 1 + r % 7, 0, task, j);
        int64_t m = 1 + r % 7;
        bad += j->sum != m * (m - 1) / 2;
    }
    check(bad == 0, "5000 back-to-back small calls", "%d wrong", bad);
    ge_pool_free(p);

    /* more workers than cores and a different cap on every call: workers wake late, after
     * the call they were woken for has ended (this once hung one run in seven) */
    if (!check(ge_pool_create(&p, 8, NULL, false, &err) == GE_OK, "pool of 8", "%s", err.msg))
        return check_done();
    bad = 0;
    for (int r = 0; r < 20000; r++) {
        memset(j, 0, sizeof *j);
        int64_t m = 1 + r % 11;
        ge_pool_run(p, m, 1 + (r * 7) % 8, task, j);
        bad += j->sum != m * (m - 1) / 2;
    }
    check(bad == 0, "20000 calls with a changing thread cap", "%d wrong", bad);
    ge_pool_free(p);

    /* pinning (hybrid CPUs): the creating thread keeps its CPUs, the caller is pinned */
    cpu_set_t before, after;
    sched_getaffinity(0, sizeof before, &before);
    ge_topo_read("/sys", cpus, n, &t, &err);
    if (check(ge_pool_create(&p, 2, &t, true, &err) == GE_OK, "pinned pool", "%s", err.msg)) {
        sched_getaffinity(0, sizeof after, &after);
        check(CPU_EQUAL(&before, &after), "creating a pinned pool leaves the creator free",
              "%d CPUs now", CPU_COUNT(&after));
        pthread_t caller;
        pin_arg pa = {p, j, t.cpus[0], false};
        pthread_create(&caller, NULL, call_pool, &pa);
        pthread_join(caller, NULL);
        check(pa.pinned, "the thread that runs the pool is pinned to the first CPU", "cpu %d",
              t.cpus[0]);
        ge_pool_free(p);
    }
    free(j);
    return check_done();
}
