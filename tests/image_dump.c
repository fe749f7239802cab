/* image_dump.c - a helper for tests/test_image.sh (not a test itself: tests/run only runs
 * test_* binaries). It exposes engine/image.c on files:
 *   image_dump decode IMAGE OUT.rgb            decode; print "W H ORIENTATION FORMAT"
 *   image_dump prep IMAGE BUDGET PREFIX        decode, plan, resize, patchify; write
 *                                              PREFIX.rgb (decoded), PREFIX.resized (u8),
 *                                              PREFIX.patches (f32 [N,768]), PREFIX.pos
 *                                              (int32 [N,2]); print "W H TH TW N"
 *   image_dump resize IN.rgb H W TH TW OUT.rgb resize raw RGB
 *   image_dump bench IMAGE BUDGET [REPEAT]     time decode and resize, one thread
 * Errors print "error: STATUS: MESSAGE" and exit 1. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dump_util.h"
#include "ge.h"

int main(int argc, char **argv)
{
    ge_err e = {0};
    ge_image img;
    if (argc == 4 && !strcmp(argv[1], "decode")) {
        size_t len;
        void *b = slurp(argv[2], &len);
        ge_status st = ge_image_decode(b, len, NULL, &img, &e);
        free(b);
        if (st)
            return die(&e);
        spit(argv[3], img.rgb, (size_t)img.w * img.h * 3);
        printf("%d %d %d %s\n", img.w, img.h, img.orientation, img.format);
        ge_image_free(&img);
        return 0;
    }
    if (argc == 5 && !strcmp(argv[1], "prep")) {
        size_t len;
        void *b = slurp(argv[2], &len);
        ge_status st = ge_image_decode(b, len, NULL, &img, &e);
        free(b);
        if (st)
            return die(&e);
        int th, tw, n;
        if (ge_image_plan(img.h, img.w, atoi(argv[3]), &th, &tw, &n, &e))
            return die(&e);
        size_t np = (size_t)(th / 16) * (tw / 16);
        uint8_t *r = malloc((size_t)th * tw * 3);
        float *patches = malloc(np * GE_IMAGE_PATCH_DIM * sizeof(float));
        int32_t *pos = malloc(np * 2 * sizeof(int32_t));
        if (ge_image_resize(img.rgb, img.h, img.w, r, th, tw, &e) ||
            ge_image_patchify(r, th, tw, patches, pos, &e))
            return die(&e);
        char path[4096];
        snprintf(path, sizeof path, "%s.rgb", argv[4]);
        spit(path, img.rgb, (size_t)img.w * img.h * 3);
        snprintf(path, sizeof path, "%s.resized", argv[4]);
        spit(path, r, (size_t)th * tw * 3);
        snprintf(path, sizeof path, "%s.patches", argv[4]);
        spit(path, patches, np * GE_IMAGE_PATCH_DIM * sizeof(float));
        snprintf(path, sizeof path, "%s.pos", argv[4]);
        spit(path, pos, np * 2 * sizeof(int32_t));
        printf("%d %d %d %d %d\n", img.w, img.h, th, tw, n);
        ge_image_free(&img);
        free(r);
        free(patches);
        free(pos);
        return 0;
    }
    if (argc == 8 && !strcmp(argv[1], "resize")) {
        size_t len;
        uint8_t *src = slurp(argv[2], &len);
        int h = atoi(argv[3]), w = atoi(argv[4]), th = atoi(argv[5]), tw = atoi(argv[6]);
        if (h < 1 || w < 1 || th < 1 || tw < 1 || len != (size_t)h * w * 3) {
            fprintf(stderr, "resize: %zu bytes is not %dx%dx3\n", len, h, w);
            return 2;
        }
        uint8_t *dst = malloc((size_t)th * tw * 3);
        if (ge_image_resize(src, h, w, dst, th, tw, &e))
            return die(&e);
        spit(argv[7], dst, (size_t)th * tw * 3);
        free(src);
        free(dst);
        return 0;
    }
    if ((argc == 4 || argc == 5) && !strcmp(argv[1], "bench")) {
        size_t len;
        void *b = slurp(argv[2], &len);
        int reps = argc == 5 ? atoi(argv[4]) : 5, th = 0, tw = 0;
        double best_dec = 1e9, best_rs = 1e9;
        for (int i = 0; i < reps; i++) {
            double t0 = now();
            if (ge_image_decode(b, len, NULL, &img, &e))
                return die(&e);
            double t1 = now();
            if (ge_image_plan(img.h, img.w, atoi(argv[3]), &th, &tw, NULL, &e))
                return die(&e);
            uint8_t *r = malloc((size_t)th * tw * 3);
            double t2 = now();
            if (ge_image_resize(img.rgb, img.h, img.w, r, th, tw, &e))
                return die(&e);
            double t3 = now();
            best_dec = t1 - t0 < best_dec ? t1 - t0 : best_dec;
            best_rs = t3 - t2 < best_rs ? t3 - t2 : best_rs;
            if (i == reps - 1)
                printf("%dx%d %s -> %dx%d: decode %.1f ms, resize %.1f ms (best of %d)\n", img.w,
                       img.h, img.format, tw, th, best_dec * 1e3, best_rs * 1e3, reps);
            free(r);
            ge_image_free(&img);
        }
        free(b);
        return 0;
    }
    fprintf(stderr, "usage: image_dump decode|prep|resize|bench ... (see tests/image_dump.c)\n");
    return 2;
}
