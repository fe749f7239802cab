/* vision_dump.c - test helper (not a test itself): one image's soft tokens through the C vision
 * tower, for tests/vision_check.py to compare with the NumPy reference.
 *
 *   vision_dump TEXT.gguf MMPROJ.gguf PATCHES.f32 PW PH fast|ref OUT.f32 [switches...]
 *
 * PATCHES.f32 holds PW*PH rows of 768 float32 in row-major grid order; OUT.f32 gets the
 * (PW/3)*(PH/3) soft tokens. Exit 0, or 1 with the error on stderr. With VISION_DUMP_REPEAT=N
 * the image is encoded N more times after a warm-up (repacking, workspace) and the median
 * tower time goes to stderr (for PERF.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dump_util.h"
#include "model.h"
#include "vision.h"

int main(int argc, char **argv)
{
    if (argc < 8) {
        fprintf(stderr, "usage: vision_dump TEXT MMPROJ PATCHES PW PH fast|ref OUT [switches]\n");
        return 2;
    }
    int pw = atoi(argv[4]), ph = atoi(argv[5]), n = pw * ph;
    bool fast = strcmp(argv[6], "fast") == 0;
    ge_config cfg;
    ge_err err = {0};
    if (parse_switches(&cfg, 8, argc, argv))
        return 2;
    ge_model *m = NULL;
    ge_vision *v = NULL;
    if (ge_model_open(&m, argv[1], &cfg, &err) ||
        ge_vision_open(&v, argv[2], ge_model_hidden(m), &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    const int in_w = ge_vision_patch(v) * ge_vision_patch(v) * 3;
    float *patches = malloc((size_t)n * in_w * sizeof *patches);
    int32_t *pos = malloc((size_t)n * 2 * sizeof *pos);
    int n_img = (pw / 3) * (ph / 3);
    float *out = malloc((size_t)n_img * ge_model_hidden(m) * sizeof *out);
    FILE *f = fopen(argv[3], "rb");
    if (!f || fread(patches, sizeof *patches, (size_t)n * in_w, f) != (size_t)n * in_w) {
        fprintf(stderr, "%s: cannot read %d patches\n", argv[3], n);
        return 1;
    }
    fclose(f);
    for (int t = 0; t < n; t++)
        pos[2 * t] = t % pw, pos[2 * t + 1] = t / pw;
    const char *rep = getenv("VISION_DUMP_REPEAT");
    int reps = rep ? atoi(rep) : 0;
    double times[64];
    for (int r = -1; r < (reps < 64 ? reps : 64); r++) {
        double t0 = ge_now();
        if (ge_vision_encode(&m->cx, v, fast, patches, pos, n, pw, ph, out, NULL, &err)) {
            fprintf(stderr, "%s\n", err.msg);
            return 1;
        }
        if (r >= 0)
            times[r] = ge_now() - t0;
        if (r < 0 && !reps)
            break;
    }
    if (reps > 0) {
        reps = reps < 64 ? reps : 64;
        const double med = median(times, reps);
        fprintf(stderr, "%dx%d patches: median %.3f s over %d (min %.3f, max %.3f)\n", pw, ph,
                med, reps, times[0], times[reps - 1]);
    }
    f = fopen(argv[7], "wb");
    if (!f || fwrite(out, sizeof *out, (size_t)n_img * ge_model_hidden(m), f) !=
                  (size_t)n_img * ge_model_hidden(m) || fclose(f)) {
        fprintf(stderr, "%s: write failed\n", argv[7]);
        return 1;
    }
    free(patches), free(pos), free(out);
    ge_vision_free(v);
    ge_model_free(m);
    return 0;
}
