/* test_image.c - engine/image.c on images built here (a PNG writer over zlib, libjpeg's and
 * libwebp's encoders): the docs/model.md 5.1 size table and error cases, exact PNG/WebP decodes,
 * EXIF orientations 1-8, PIL's 16-bit and alpha rules, and hostile input (every prefix,
 * byte flips, huge and zero sizes, unknown formats) giving clean errors. Run it under
 * `make SAN=1 tests` as well: nothing may crash or leak. tests/test_image.sh compares with
 * PIL and the NumPy reference. */
#include <stdio.h> /* before jpeglib.h */
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <webp/encode.h>
#include <zlib.h>

#include "check.h"
#include "ge.h"
#include "rng.h"

/* ---- a minimal PNG writer: rows are given without filter bytes ---- */

typedef struct {
    uint8_t *p;
    size_t n;
} buf;

static void put(buf *b, const void *p, size_t n)
{
    if (n == 0)
        return;
    b->p = realloc(b->p, b->n + n);
    memcpy(b->p + b->n, p, n);
    b->n += n;
}

static void put32(buf *b, uint32_t v)
{
    uint8_t q[4] = {v >> 24, v >> 16, v >> 8, v};
    put(b, q, 4);
}

static void chunk(buf *b, const char *type, const uint8_t *data, size_t n)
{
    put32(b, (uint32_t)n);
    size_t at = b->n;
    put(b, type, 4);
    put(b, data, n);
    put32(b, (uint32_t)crc32(0, b->p + at, (uInt)(n + 4)));
}

/* raw: h rows of rowbytes each */
static buf make_png(uint32_t w, uint32_t h, int depth, int ctype, const uint8_t *raw,
                    size_t rowbytes, const uint8_t *plte, size_t nplte, const uint8_t *exif,
                    size_t nexif)
{
    buf b = {0};
    put(&b, "\x89PNG\r\n\x1a\n", 8);
    uint8_t ihdr[13] = {w >> 24, w >> 16, w >> 8, w, h >> 24, h >> 16, h >> 8, h, depth, ctype};
    chunk(&b, "IHDR", ihdr, 13);
    if (plte)
        chunk(&b, "PLTE", plte, nplte);
    if (exif)
        chunk(&b, "eXIf", exif, nexif);
    size_t fl = (rowbytes + 1) * h;
    uint8_t *f = calloc(fl ? fl : 1, 1);
    for (size_t y = 0; raw && y < h; y++)
        memcpy(f + y * (rowbytes + 1) + 1, raw + y * rowbytes, rowbytes);
    uLongf zl = compressBound(fl);
    uint8_t *z = malloc(zl);
    compress(z, &zl, f, fl);
    chunk(&b, "IDAT", z, zl);
    chunk(&b, "IEND", NULL, 0);
    free(f);
    free(z);
    return b;
}

/* ---- JPEG through libjpeg, with an optional EXIF orientation ---- */

static buf make_jpeg(const uint8_t *px, int w, int h, int comps, J_COLOR_SPACE cs, int orient)
{
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr e;
    c.err = jpeg_std_error(&e);
    jpeg_create_compress(&c);
    unsigned char *mem = NULL;
    unsigned long n = 0;
    jpeg_mem_dest(&c, &mem, &n);
    c.image_width = w;
    c.image_height = h;
    c.input_components = comps;
    c.in_color_space = cs;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, 95, TRUE);
    jpeg_start_compress(&c, TRUE);
    if (orient) { /* "Exif\0\0" + big-endian TIFF, IFD0 with one SHORT entry 0x0112 */
        uint8_t app[6 + 8 + 2 + 12 + 4] = {'E', 'x', 'i', 'f', 0, 0, 'M', 'M', 0, 42, 0, 0, 0, 8,
                                           0, 1, 0x01, 0x12, 0, 3, 0, 0, 0, 1, 0, (uint8_t)orient};
        jpeg_write_marker(&c, JPEG_APP0 + 1, app, sizeof app);
    }
    for (int y = 0; y < h; y++) {
        JSAMPROW r = (JSAMPROW)(px + (size_t)y * w * comps);
        jpeg_write_scanlines(&c, &r, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    buf b = {malloc(n), n};
    memcpy(b.p, mem, n);
    free(mem);
    return b;
}

static ge_status dec(const buf *b, uint64_t max, ge_image *img, ge_err *e)
{
    ge_image_limits lim = {max};
    return ge_image_decode(b->p, b->n, max ? &lim : NULL, img, e);
}

/* decode every proper prefix and some byte-flipped copies: only clean results allowed */
static void hostile(const char *name, const buf *b, size_t ok_from)
{
    int bad = 0, crashes_would_show = 0;
    for (size_t n = 0; n < b->n; n++) {
        ge_image img;
        ge_err e = {0};
        ge_status st = ge_image_decode(b->p, n, NULL, &img, &e);
        if (st == GE_OK) {
            if (n < ok_from)
                bad++;
            ge_image_free(&img);
        } else if (!e.msg[0] || img.rgb) {
            bad++;
        }
    }
    char nm[128];
    snprintf(nm, sizeof nm, "%s: every prefix is a clean error", name);
    check(bad == 0, nm, "%d prefixes decoded or gave no message", bad);
    uint8_t *c = malloc(b->n);
    int errors = 0;
    for (int t = 0; t < 400; t++) {
        memcpy(c, b->p, b->n);
        for (int k = 0; k < 1 + t % 4; k++)
            c[rnd() % b->n] ^= (uint8_t)(1 + rnd() % 255);
        ge_image img;
        ge_err e = {0};
        if (ge_image_decode(c, b->n, NULL, &img, &e) != GE_OK) {
            errors++;
            crashes_would_show += !e.msg[0];
        }
        ge_image_free(&img);
    }
    free(c);
    snprintf(nm, sizeof nm, "%s: 400 byte-flipped copies decode or fail cleanly (%d failed)", name,
             errors);
    check(crashes_would_show == 0, nm, "%d errors without a message", crashes_would_show);
}

static void test_plan(void)
{
    static const int table[3][2][5][2] = {
        /* H x W: {th, tw} for budgets 70, 140, 280, 560, 1120 (docs/model.md 5.1) */
        {{{480, 640}}, {{336, 432}, {480, 624}, {672, 912}, {960, 1296}, {1344, 1824}}},
        {{{1024, 1024}}, {{384, 384}, {528, 528}, {768, 768}, {1104, 1104}, {1584, 1584}}},
        {{{720, 1280}}, {{288, 528}, {384, 720}, {576, 1056}, {816, 1488}, {1200, 2112}}},
    };
    static const int tokens[3][5] = {{63, 130, 266, 540, 1064}, {64, 121, 256, 529, 1089},
                                     {66, 120, 264, 527, 1100}};
    static const int budgets[5] = {70, 140, 280, 560, 1120};
    int bad = 0;
    char detail[800] = "";
    for (int i = 0; i < 3; i++)
        for (int b = 0; b < 5; b++) {
            int th = -1, tw = -1, n = -1;
            ge_err e = {0};
            ge_status st = ge_image_plan(table[i][0][0][0], table[i][0][0][1], budgets[b], &th, &tw,
                                         &n, &e);
            if (st || th != table[i][1][b][0] || tw != table[i][1][b][1] || n != tokens[i][b]) {
                bad++;
                snprintf(detail, sizeof detail, "%dx%d budget %d: got %dx%d -> %d (%s)",
                         table[i][0][0][0], table[i][0][0][1], budgets[b], th, tw, n, e.msg);
            }
        }
    check(bad == 0, "plan: the docs/model.md 5.1 table (15 cases)", "%d wrong, last %s", bad,
          detail);
    /* any square, any 16:9 give the table's sizes */
    int th, tw, n;
    ge_err e = {0};
    check(!ge_image_plan(37, 37, 280, &th, &tw, &n, &e) && th == 768 && tw == 768 && n == 256,
          "plan: a 37x37 square is upscaled to 768x768", "%dx%d", th, tw);
    check(!ge_image_plan(1080, 1920, 140, &th, &tw, &n, &e) && th == 384 && tw == 720 && n == 120,
          "plan: 1080x1920 at 140 -> 384x720, 120 tokens", "%dx%d", th, tw);
    /* the zero cases: a very wide or tall strip gets one 48-pixel row, capped at budget*48 */
    check(!ge_image_plan(1, 100000, 280, &th, &tw, &n, &e) && th == 48 && tw == 280 * 48 && n == 280,
          "plan: 1x100000 -> 48 x 13440 (capped)", "%dx%d %d", th, tw, n);
    /* (a zero side means W/H > budget, so the cap always applies) */
    check(!ge_image_plan(1, 200, 70, &th, &tw, &n, &e) && th == 48 && tw == 70 * 48 && n == 70,
          "plan: 1x200 at 70 -> 48 x 3360", "%dx%d %d", th, tw, n);
    check(!ge_image_plan(3, 200, 70, &th, &tw, &n, &e) && th == 48 && tw == 3264 && n == 68,
          "plan: 3x200 at 70 -> 48 x 3264, 68 tokens (not a zero side)", "%dx%d %d", th, tw, n);
    check(!ge_image_plan(100000, 2, 70, &th, &tw, &n, &e) && tw == 48 && th == 70 * 48,
          "plan: 100000x2 -> 3360 x 48 (capped)", "%dx%d", th, tw);
    check(!ge_image_plan(768, 768, 280, &th, &tw, NULL, &e) && th == 768 && tw == 768,
          "plan: 768x768 at 280 keeps its size", "%dx%d", th, tw);
    const int wrong[] = {0, 69, 71, 100, 279, 281, 2240, -280};
    int ok = 1;
    for (size_t i = 0; i < sizeof wrong / sizeof *wrong; i++)
        ok &= ge_image_plan(480, 640, wrong[i], &th, &tw, &n, &e) == GE_E_USAGE;
    check(ok && strstr(e.msg, "70, 140, 280, 560, 1120"), "plan: budgets outside the five are usage errors",
          "%s", e.msg);
    check(ge_image_plan(0, 640, 280, &th, &tw, &n, &e) == GE_E_USAGE &&
              ge_image_plan(480, -1, 280, &th, &tw, &n, &e) == GE_E_USAGE,
          "plan: empty sizes are usage errors", "%s", e.msg);
    /* every plan fits its budget and is a multiple of 48 */
    int over = 0;
    for (int i = 0; i < 3000; i++) {
        int h = 1 + (int)(rnd() % 5000), w = 1 + (int)(rnd() % 5000);
        int b = budgets[rnd() % 5];
        if (ge_image_plan(h, w, b, &th, &tw, &n, &e) != GE_OK || th % 48 || tw % 48 ||
            th * tw > b * 9 * 256 || n > b || n < 1)
            over++;
    }
    check(over == 0, "plan: 3000 random sizes give multiples of 48 within the budget", "%d bad", over);
}

static void test_png(void)
{
    ge_image img;
    ge_err e = {0};
    /* RGB 8-bit: exact */
    uint8_t px[5 * 4 * 3];
    for (size_t i = 0; i < sizeof px; i++)
        px[i] = (uint8_t)(i * 37 + 11);
    buf b = make_png(5, 4, 8, 2, px, 15, NULL, 0, NULL, 0);
    check(!dec(&b, 0, &img, &e) && img.w == 5 && img.h == 4 && !memcmp(img.rgb, px, sizeof px) &&
              !strcmp(img.format, "png") && img.orientation == 1,
          "png: RGB 5x4 decodes exactly", "%s", e.msg);
    ge_image_free(&img);
    hostile("png RGB 5x4", &b, b.n - 12); /* the IEND chunk is not needed */
    check(dec(&b, 19, &img, &e) == GE_E_LIMIT && img.rgb == NULL && strstr(e.msg, "limit"),
          "png: 20 px over a 19 px limit is GE_E_LIMIT", "%s", e.msg);
    free(b.p);

    /* RGBA: alpha dropped, not composited; GA: grey replicated */
    uint8_t rgba[3 * 2 * 4], ga[3 * 2 * 2];
    for (size_t i = 0; i < sizeof rgba; i++)
        rgba[i] = (uint8_t)(i * 29 + 3);
    for (size_t i = 0; i < sizeof ga; i++)
        ga[i] = (uint8_t)(i * 41 + 5);
    b = make_png(3, 2, 8, 6, rgba, 12, NULL, 0, NULL, 0);
    int ok = !dec(&b, 0, &img, &e);
    for (int i = 0; ok && i < 6; i++)
        ok = img.rgb[i * 3] == rgba[i * 4] && img.rgb[i * 3 + 1] == rgba[i * 4 + 1] &&
             img.rgb[i * 3 + 2] == rgba[i * 4 + 2];
    check(ok, "png: RGBA drops alpha without compositing", "%s", e.msg);
    ge_image_free(&img);
    free(b.p);
    b = make_png(3, 2, 8, 4, ga, 6, NULL, 0, NULL, 0);
    ok = !dec(&b, 0, &img, &e);
    for (int i = 0; ok && i < 6; i++)
        ok = img.rgb[i * 3] == ga[i * 2] && img.rgb[i * 3 + 1] == ga[i * 2] &&
             img.rgb[i * 3 + 2] == ga[i * 2];
    check(ok, "png: grey+alpha replicates grey, drops alpha", "%s", e.msg);
    ge_image_free(&img);
    free(b.p);

    /* 16-bit: RGB keeps the high byte; grey clamps to 255 (PIL's mode I) */
    uint8_t r16[2 * 1 * 6] = {0x12, 0xff, 0x80, 0x01, 0xff, 0xfe, 0x00, 0x80, 0x7f, 0x7f, 0x01, 0x01};
    b = make_png(2, 1, 16, 2, r16, 12, NULL, 0, NULL, 0);
    check(!dec(&b, 0, &img, &e) && !memcmp(img.rgb, "\x12\x80\xff\x00\x7f\x01", 6),
          "png: 16-bit RGB keeps the high byte (PIL)", "%s", e.msg);
    ge_image_free(&img);
    free(b.p);
    uint8_t g16[4 * 2] = {0x00, 0x00, 0x00, 0xc8, 0x01, 0x00, 0xff, 0xff}; /* 0, 200, 256, 65535 */
    b = make_png(4, 1, 16, 0, g16, 8, NULL, 0, NULL, 0);
    check(!dec(&b, 0, &img, &e) &&
              !memcmp(img.rgb, "\x00\x00\x00\xc8\xc8\xc8\xff\xff\xff\xff\xff\xff", 12),
          "png: 16-bit grey clamps to 255 (PIL mode I)", "%s", e.msg);
    ge_image_free(&img);
    free(b.p);

    /* 2-bit palette: expanded */
    uint8_t plte[4 * 3] = {10, 20, 30, 40, 50, 60, 70, 80, 90, 200, 210, 220};
    uint8_t idx[1] = {0x1b}; /* 00 01 10 11 */
    b = make_png(4, 1, 2, 3, idx, 1, plte, 12, NULL, 0);
    check(!dec(&b, 0, &img, &e) && !memcmp(img.rgb, plte, 12), "png: a 2-bit palette expands",
          "%s", e.msg);
    ge_image_free(&img);
    free(b.p);

    /* eXIf orientation 6 (a quarter turn clockwise): 2x1 [A B] -> 1x2 [A; B] */
    uint8_t ab[6] = {1, 2, 3, 4, 5, 6};
    uint8_t ex[] = {'I', 'I', 42, 0, 8, 0, 0, 0, 1, 0, 0x12, 0x01, 3, 0, 1, 0, 0, 0, 6, 0, 0, 0};
    b = make_png(2, 1, 8, 2, ab, 6, NULL, 0, ex, sizeof ex);
    check(!dec(&b, 0, &img, &e) && img.w == 1 && img.h == 2 && img.orientation == 6 &&
              !memcmp(img.rgb, ab, 6),
          "png: eXIf orientation 6 rotates clockwise", "%s %dx%d o=%d", e.msg, img.w, img.h,
          img.orientation);
    ge_image_free(&img);
    free(b.p);

    /* huge and zero headers: the limit (or libpng) stops them before any pixel buffer */
    b = make_png(70000, 70000, 8, 2, NULL, 0, NULL, 0, NULL, 0);
    check(dec(&b, 0, &img, &e) == GE_E_LIMIT && strstr(e.msg, "70000x70000"),
          "png: a 70000x70000 header is GE_E_LIMIT", "%s", e.msg);
    free(b.p);
    b = make_png(0, 10, 8, 2, NULL, 0, NULL, 0, NULL, 0);
    check(dec(&b, 0, &img, &e) == GE_E_FORMAT && e.msg[0], "png: zero width is GE_E_FORMAT", "%s",
          e.msg);
    free(b.p);
}

/* pixel (y, x) of an image that should be src oriented by o */
static const uint8_t *oriented(const uint8_t *s, int w, int h, int o, int y, int x)
{
    int sy, sx;
    switch (o) {
    case 1: sy = y; sx = x; break;
    case 2: sy = y; sx = w - 1 - x; break;
    case 3: sy = h - 1 - y; sx = w - 1 - x; break;
    case 4: sy = h - 1 - y; sx = x; break;
    case 5: sy = x; sx = y; break;
    case 6: sy = h - 1 - x; sx = y; break;
    case 7: sy = h - 1 - x; sx = w - 1 - y; break;
    default: sy = x; sx = w - 1 - y; break;
    }
    return s + ((size_t)sy * w + sx) * 3;
}

static void test_jpeg(void)
{
    enum { W = 40, H = 24 };
    uint8_t px[W * H * 3];
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            px[(y * W + x) * 3] = (uint8_t)(x * 6);
            px[(y * W + x) * 3 + 1] = (uint8_t)(y * 10);
            px[(y * W + x) * 3 + 2] = (uint8_t)(128 + (x - y) * 2);
        }
    ge_image base, img;
    ge_err e = {0};
    buf b = make_jpeg(px, W, H, 3, JCS_RGB, 0);
    int maxd = 0;
    if (!dec(&b, 0, &base, &e))
        for (size_t i = 0; i < sizeof px; i++) {
            int d = abs(base.rgb[i] - px[i]);
            maxd = d > maxd ? d : maxd;
        }
    check(base.rgb && base.w == W && base.h == H && maxd <= 12 && !strcmp(base.format, "jpeg"),
          "jpeg: 40x24 RGB decodes close to the original", "%s max diff %d", e.msg, maxd);
    hostile("jpeg 40x24", &b, b.n - 2);
    check(dec(&b, 100, &img, &e) == GE_E_LIMIT, "jpeg: over the pixel limit is GE_E_LIMIT", "%s",
          e.msg);
    /* a SOF claiming 60000x60000: stopped by the limit after the header */
    buf big = {malloc(b.n), b.n};
    memcpy(big.p, b.p, b.n);
    int patched = 0;
    for (size_t i = 0; i + 9 < big.n; i++)
        if (big.p[i] == 0xff && (big.p[i + 1] == 0xc0 || big.p[i + 1] == 0xc2)) {
            big.p[i + 5] = 0xea, big.p[i + 6] = 0x60, big.p[i + 7] = 0xea, big.p[i + 8] = 0x60;
            patched = 1;
            break;
        }
    check(patched && dec(&big, 0, &img, &e) == GE_E_LIMIT && strstr(e.msg, "60000x60000"),
          "jpeg: a 60000x60000 SOF is GE_E_LIMIT", "%s", e.msg);
    free(big.p);
    free(b.p);

    /* EXIF orientations: the same scan data, so exact against the unrotated decode */
    for (int o = 1; o <= 8; o++) {
        b = make_jpeg(px, W, H, 3, JCS_RGB, o);
        int ok = !dec(&b, 0, &img, &e) && img.orientation == o;
        int sw = o >= 5 ? H : W, sh = o >= 5 ? W : H;
        ok = ok && img.w == sw && img.h == sh;
        for (int y = 0; ok && y < sh; y++)
            for (int x = 0; ok && x < sw; x++)
                ok = !memcmp(img.rgb + ((size_t)y * sw + x) * 3,
                             oriented(base.rgb, W, H, o, y, x), 3);
        char nm[64];
        snprintf(nm, sizeof nm, "jpeg: EXIF orientation %d", o);
        check(ok, nm, "%s (%dx%d, o=%d)", e.msg, img.w, img.h, img.orientation);
        ge_image_free(&img);
        free(b.p);
    }
    /* a broken Exif block (IFD offset and count past the end) is ignored, not read */
    b = make_jpeg(px, W, H, 3, JCS_RGB, 6);
    for (size_t i = 0; i + 14 < b.n; i++)
        if (!memcmp(b.p + i, "Exif\0\0MM", 8)) {
            b.p[i + 13] = 0xf0;           /* IFD0 offset 0xf0: outside the block */
            break;
        }
    check(!dec(&b, 0, &img, &e) && img.orientation == 1 && img.w == W,
          "jpeg: an Exif IFD offset out of bounds is ignored", "%s o=%d", e.msg, img.orientation);
    ge_image_free(&img);
    free(b.p);

    /* grey JPEG: replicated */
    uint8_t grey[W * H];
    for (int i = 0; i < W * H; i++)
        grey[i] = (uint8_t)(i % W * 6);
    b = make_jpeg(grey, W, H, 1, JCS_GRAYSCALE, 0);
    int ok = !dec(&b, 0, &img, &e);
    for (int i = 0; ok && i < W * H; i++)
        ok = img.rgb[i * 3] == img.rgb[i * 3 + 1] && img.rgb[i * 3] == img.rgb[i * 3 + 2] &&
             abs(img.rgb[i * 3] - grey[i]) <= 8;
    check(ok, "jpeg: greyscale is replicated to RGB", "%s", e.msg);
    ge_image_free(&img);
    free(b.p);

    /* CMYK JPEG (stored as written: libjpeg adds no inversion): PIL reads it as Adobe-inverted
     * CMYK, so stored (c, m, y, k) gives R = k - k*(255-c)/255 ~ c*k/255 */
    uint8_t cmyk[W * H * 4];
    for (int i = 0; i < W * H; i++) {
        cmyk[i * 4] = 255, cmyk[i * 4 + 1] = 128, cmyk[i * 4 + 2] = 0, cmyk[i * 4 + 3] = 255;
    }
    b = make_jpeg(cmyk, W, H, 4, JCS_CMYK, 0);
    ok = !dec(&b, 0, &img, &e);
    for (int i = 0; ok && i < W * H; i++)
        ok = abs(img.rgb[i * 3] - 255) <= 3 && abs(img.rgb[i * 3 + 1] - 128) <= 3 &&
             img.rgb[i * 3 + 2] <= 3;
    check(ok, "jpeg: CMYK converts as PIL does", "%s (%d %d %d)", e.msg, img.rgb ? img.rgb[0] : -1,
          img.rgb ? img.rgb[1] : -1, img.rgb ? img.rgb[2] : -1);
    ge_image_free(&img);
    free(b.p);
    ge_image_free(&base);
}

static void test_webp(void)
{
    enum { W = 17, H = 9 };
    uint8_t px[W * H * 4], rgb[W * H * 3];
    for (int i = 0; i < W * H; i++)
        for (int c = 0; c < 4; c++) {
            px[i * 4 + c] = (uint8_t)(rnd() & 255) | (c == 3); /* the encoder may change
                                                       the colour under alpha 0 */
            if (c < 3)
                rgb[i * 3 + c] = px[i * 4 + c];
        }
    uint8_t *out = NULL;
    size_t n = WebPEncodeLosslessRGBA(px, W, H, W * 4, &out);
    buf b = {malloc(n), n};
    memcpy(b.p, out, n);
    WebPFree(out);
    ge_image img;
    ge_err e = {0};
    check(n > 0 && !dec(&b, 0, &img, &e) && img.w == W && img.h == H &&
              !memcmp(img.rgb, rgb, sizeof rgb) && !strcmp(img.format, "webp"),
          "webp: lossless RGBA decodes exactly, alpha dropped", "%s", e.msg);
    ge_image_free(&img);
    hostile("webp lossless 17x9", &b, b.n);
    check(dec(&b, 100, &img, &e) == GE_E_LIMIT, "webp: over the pixel limit is GE_E_LIMIT", "%s",
          e.msg);
    free(b.p);
}

static void test_unsupported(void)
{
    ge_image img;
    ge_err e = {0};
    check(ge_image_decode(NULL, 0, NULL, &img, &e) == GE_E_FORMAT && img.rgb == NULL,
          "decode: empty input is GE_E_FORMAT", "%s", e.msg);
    /* each named by what it is (ge_media_sniff) */
    static const struct {
        const char *p;
        size_t n;
        ge_status st;
        const char *msg;
    } other[] = {
        {"GIF89a\x01\x00\x01\x00", 10, GE_E_UNSUPPORTED, "GIF image: not supported"},
        {"BM\x3a\0\0\0\0\0\0\0\x36\0\0\0\x28\0\0\0", 18, GE_E_UNSUPPORTED,
         "BMP image: not supported"},
        {"BM\x3a\0\0\0\0\0", 8, GE_E_UNSUPPORTED, "unsupported format"},
        {"\xff\xd8", 2, GE_E_FORMAT, "truncated"},
        {"RIFF\0\0\0\0WAVE", 12, GE_E_UNSUPPORTED, "WAV audio, not an image"},
        {"\0\0\0\x14" "ftypheic\0\0\0\0mif1", 20, GE_E_UNSUPPORTED, "HEIC image: not supported"}};
    int ok = 1;
    for (size_t i = 0; i < sizeof other / sizeof *other; i++) {
        ge_status st = ge_image_decode(other[i].p, other[i].n, NULL, &img, &e);
        ok &= st == other[i].st && img.rgb == NULL && strstr(e.msg, other[i].msg) != NULL;
    }
    check(ok, "decode: GIF, BMP, HEIC (named), WAV, a 2-byte JPEG, unknown bytes are errors",
          "%s", e.msg);
}

static void test_resize_patchify(void)
{
    ge_err e = {0};
    enum { H = 50, W = 70 };
    static uint8_t src[H * W * 3], dst[300 * 300 * 3];
    for (size_t i = 0; i < sizeof src; i++)
        src[i] = (uint8_t)rnd();
    check(!ge_image_resize(src, H, W, dst, H, W, &e) && !memcmp(src, dst, sizeof src),
          "resize: the same size copies", "%s", e.msg);
    /* a constant image stays constant, up and down, on one axis or both */
    const int sizes[][2] = {{48, 96}, {7, 3}, {H, 200}, {150, W}, {1, 1}, {299, 13}};
    int bad = 0;
    for (int v = 0; v < 256; v += 51) {
        memset(src, v, sizeof src);
        for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
            int th = sizes[s][0], tw = sizes[s][1];
            if (ge_image_resize(src, H, W, dst, th, tw, &e))
                bad++;
            for (int i = 0; i < th * tw * 3; i++)
                bad += dst[i] != v;
        }
    }
    check(bad == 0, "resize: constant images stay constant", "%d wrong values", bad);
    check(ge_image_resize(src, 0, W, dst, 48, 48, &e) == GE_E_USAGE &&
              ge_image_resize(src, H, W, dst, 48, 0, &e) == GE_E_USAGE,
          "resize: empty sizes are usage errors", "%s", e.msg);

    /* patchify: layout (yy, xx, c) inside a patch, row-major patches, (x, y) positions */
    enum { PH = 32, PW = 48 };
    static uint8_t im[PH * PW * 3];
    for (int y = 0; y < PH; y++)
        for (int x = 0; x < PW; x++)
            for (int c = 0; c < 3; c++)
                im[(y * PW + x) * 3 + c] = (uint8_t)(y * 7 + x * 3 + c * 100);
    float *p = malloc(sizeof(float) * 6 * 768);
    int32_t pos[12];
    int ok = !ge_image_patchify(im, PH, PW, p, pos, &e);
    const float k = (float)(1.0 / 255.0);
    for (int n = 0; ok && n < 6; n++) {
        int py = n / 3, px = n % 3;
        ok = pos[2 * n] == px && pos[2 * n + 1] == py;
        for (int yy = 0; ok && yy < 16; yy++)
            for (int xx = 0; ok && xx < 16; xx++)
                for (int c = 0; ok && c < 3; c++) {
                    uint8_t v = im[((py * 16 + yy) * PW + px * 16 + xx) * 3 + c];
                    ok = p[n * 768 + (yy * 16 + xx) * 3 + c] == (float)v * k;
                }
    }
    check(ok, "patchify: 48x32 -> 6 patches, (yy, xx, c) order, (x, y) positions", "%s", e.msg);
    check(p[767] <= 1.0f && ge_image_patchify(im, 30, PW, p, pos, &e) == GE_E_USAGE,
          "patchify: sides not multiples of 16 are usage errors", "%s", e.msg);
    free(p);
}

int main(void)
{
    test_plan();
    test_png();
    test_jpeg();
    test_webp();
    test_unsupported();
    test_resize_patchify();
    return check_done();
}
