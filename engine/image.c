/* image.c - image decoding (JPEG, PNG, WebP -> 8-bit RGB) and the Gemma 4 image processor's
 * steps (docs/model.md 5.1): target size, torchvision's uint8 antialiased bicubic resize, rescale
 * and patches.
 *
 * Decoding follows what Hugging Face's load_image hands the processor: PIL's Image.open,
 * then ImageOps.exif_transpose, then convert("RGB"). The codecs are the distribution's
 * libjpeg-turbo, libpng and libwebp; what PIL does on top of them is reproduced here:
 *   - alpha is dropped, never composited; grey is replicated; palettes are expanded (a tRNS
 *     chunk is ignored);
 *   - 16-bit PNG: RGB, RGBA and grey+alpha keep the high byte of each sample (PIL's
 *     "RGB;16B"/"RGBA;16B"/"LA;16B" raw modes), while 16-bit grey without alpha opens in
 *     PIL as mode I (or I;16) whose conversion to RGB clamps: min(v, 255), not v >> 8;
 *   - CMYK and YCCK JPEG: libjpeg gives CMYK, which PIL reads as Adobe-inverted ("CMYK;I")
 *     and converts with cmyk2rgb: R = nk - nk*C/255 (rounded), nk = 255 - K;
 *   - JPEG uses libjpeg's defaults (the islow IDCT, fancy upsampling), as PIL does, so the
 *     pixels are the same bytes when both link the same libjpeg-turbo;
 *   - a JPEG that ends before its last scanline is an error (PIL: "image file is
 *     truncated"); libjpeg's other warnings (extraneous bytes, ...) are ignored, as in PIL;
 *   - EXIF orientation: HF's load_image calls ImageOps.exif_transpose, so we apply tag
 *     0x0112 of IFD0 (values 1-8; anything else is ignored) from the first APP1 "Exif"
 *     block of a JPEG, a PNG eXIf chunk, or a WebP EXIF chunk. Not handled: an orientation
 *     only present in XMP or in a PNG "Raw profile type exif" text chunk (PIL reads those).
 * Animated WebP is GE_E_UNSUPPORTED (PIL would take the first composited frame).
 *
 * Library code: nothing is printed, no exit. libjpeg's and libpng's fatal errors longjmp back
 * here and become a ge_err naming the cause. */
#include <math.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdio.h> /* before jpeglib.h, which needs FILE and size_t */
#include <stdlib.h>
#include <string.h>

#include <jerror.h>
#include <jpeglib.h>
#include <png.h>
#include <webp/decode.h>
#include <webp/demux.h>

#include "ge.h"

/* ---- helpers ----------------------------------------------------------------------------- */

void ge_image_free(ge_image *img)
{
    if (!img)
        return;
    free(img->rgb);
    memset(img, 0, sizeof *img);
}

static uint64_t limit_of(const ge_image_limits *lim)
{
    return lim && lim->max_pixels ? lim->max_pixels : GE_IMAGE_MAX_PIXELS;
}

/* The pixel-count check every decoder runs on the header's size, before allocating. */
static ge_status check_size(const char *fmt, uint64_t w, uint64_t h, const ge_image_limits *lim,
                            ge_err *err)
{
    if (w == 0 || h == 0)
        return ge_fail(err, GE_E_FORMAT, "%s: zero-size image (%llux%llu)", fmt,
                       (unsigned long long)w, (unsigned long long)h);
    uint64_t max = limit_of(lim);
    if (w > max || h > max || w * h > max)
        return ge_fail(err, GE_E_LIMIT, "%s: the %llux%llu image is over the limit of %llu pixels",
                       fmt, (unsigned long long)w, (unsigned long long)h, (unsigned long long)max);
    if (w > (uint64_t)1 << 30 || h > (uint64_t)1 << 30)
        return ge_fail(err, GE_E_LIMIT, "%s: image side over 2^30 pixels", fmt);
    return GE_OK;
}

/* ---- EXIF orientation ---------------------------------------------------------------------
 * t[0..n) is a TIFF structure ("II*\0" or "MM\0*", offset of IFD0, then 12-byte entries).
 * Returns tag 0x0112 of IFD0 when it is 1..8, else 1. Every read is bounds-checked. */

static unsigned rd16(const uint8_t *p, int le)
{
    return le ? (unsigned)p[0] | (unsigned)p[1] << 8 : (unsigned)p[0] << 8 | (unsigned)p[1];
}

static uint32_t rd32(const uint8_t *p, int le)
{
    return le ? (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24
              : (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static int exif_orientation(const uint8_t *t, size_t n)
{
    if (n >= 6 && memcmp(t, "Exif\0\0", 6) == 0) { /* WebP EXIF chunks may carry the prefix */
        t += 6;
        n -= 6;
    }
    if (n < 8)
        return 1;
    int le;
    if (t[0] == 'I' && t[1] == 'I')
        le = 1;
    else if (t[0] == 'M' && t[1] == 'M')
        le = 0;
    else
        return 1;
    if (rd16(t + 2, le) != 42)
        return 1;
    uint32_t ifd = rd32(t + 4, le);
    if (ifd > n || n - ifd < 2)
        return 1;
    unsigned count = rd16(t + ifd, le);
    for (unsigned i = 0; i < count; i++) {
        size_t e = (size_t)ifd + 2 + (size_t)12 * i; /* ifd <= n, i < 65536: no overflow */
        if (e > n || n - e < 12)
            break;
        if (rd16(t + e, le) != 0x0112)
            continue;
        unsigned type = rd16(t + e + 2, le);
        uint32_t v;
        if (type == 3) /* SHORT */
            v = rd16(t + e + 8, le);
        else if (type == 4) /* LONG */
            v = rd32(t + e + 8, le);
        else
            return 1;
        return v >= 1 && v <= 8 ? (int)v : 1;
    }
    return 1;
}

/* Apply orientation o (1..8) to img in place, as PIL's exif_transpose does:
 * 2 FLIP_LEFT_RIGHT, 3 ROTATE_180, 4 FLIP_TOP_BOTTOM, 5 TRANSPOSE, 6 ROTATE_270 (a quarter
 * turn clockwise), 7 TRANSVERSE, 8 ROTATE_90. 5-8 swap the sides and need a second buffer. */
static ge_status orient(ge_image *img, int o, ge_err *err)
{
    int w = img->w, h = img->h;
    uint8_t *p = img->rgb;
    img->orientation = o;
    if (o == 2 || o == 3) { /* mirror each row */
        for (int y = 0; y < h; y++) {
            uint8_t *r = p + (size_t)y * w * 3;
            for (int a = 0, b = w - 1; a < b; a++, b--)
                for (int c = 0; c < 3; c++) {
                    uint8_t t = r[a * 3 + c];
                    r[a * 3 + c] = r[b * 3 + c];
                    r[b * 3 + c] = t;
                }
        }
    }
    if (o == 3 || o == 4) { /* swap rows top to bottom */
        size_t rb = (size_t)w * 3;
        for (int a = 0, b = h - 1; a < b; a++, b--) {
            uint8_t *ra = p + (size_t)a * rb, *rbp = p + (size_t)b * rb;
            for (size_t i = 0; i < rb; i++) {
                uint8_t t = ra[i];
                ra[i] = rbp[i];
                rbp[i] = t;
            }
        }
    }
    if (o <= 4)
        return GE_OK;
    /* output is w rows of h pixels; out(y, x) reads in(sy, sx) */
    uint8_t *q = malloc((size_t)w * h * 3);
    if (!q)
        return ge_fail(err, GE_E_NOMEM, "image: out of memory rotating %dx%d", w, h);
    for (int y = 0; y < w; y++) {
        uint8_t *d = q + (size_t)y * h * 3;
        for (int x = 0; x < h; x++) {
            int sy, sx;
            switch (o) {
            case 5: sy = x; sx = y; break;                 /* transpose */
            case 6: sy = h - 1 - x; sx = y; break;         /* clockwise */
            case 7: sy = h - 1 - x; sx = w - 1 - y; break; /* transverse */
            default: sy = x; sx = w - 1 - y; break;        /* 8: counter-clockwise */
            }
            const uint8_t *s = p + ((size_t)sy * w + sx) * 3;
            d[x * 3] = s[0];
            d[x * 3 + 1] = s[1];
            d[x * 3 + 2] = s[2];
        }
    }
    free(p);
    img->rgb = q;
    img->w = h;
    img->h = w;
    return GE_OK;
}

/* ---- JPEG (libjpeg-turbo) ------------------------------------------------------------------ */

typedef struct {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
    char msg[JMSG_LENGTH_MAX];
    int eof; /* the data ended early (libjpeg inserted a fake EOI) */
} jpeg_errmgr;

static void jpeg_on_error(j_common_ptr c)
{
    jpeg_errmgr *e = (jpeg_errmgr *)c->err;
    (*c->err->format_message)(c, e->msg);
    longjmp(e->jb, 1);
}

static void jpeg_on_message(j_common_ptr c, int level)
{
    if (level < 0 && c->err->msg_code == JWRN_JPEG_EOF)
        ((jpeg_errmgr *)c->err)->eof = 1;
    if (level < 0)
        c->err->num_warnings++;
}

static void jpeg_no_output(j_common_ptr c) { (void)c; }

/* PIL's MULDIV255: a*b/255 rounded, in integers */
static inline int muldiv255(int a, int b)
{
    int t = a * b + 128;
    return ((t >> 8) + t) >> 8;
}

static ge_status decode_jpeg(const uint8_t *data, size_t len, const ge_image_limits *lim,
                             ge_image *out, ge_err *err)
{
    struct jpeg_decompress_struct ci;
    jpeg_errmgr je;
    uint8_t *volatile rgb = NULL;
    uint8_t *volatile row4 = NULL; /* one CMYK row */
    volatile ge_status st = GE_OK;
    memset(&ci, 0, sizeof ci);
    ci.err = jpeg_std_error(&je.pub);
    je.pub.error_exit = jpeg_on_error;
    je.pub.emit_message = jpeg_on_message;
    je.pub.output_message = jpeg_no_output;
    je.eof = 0;
    je.msg[0] = 0;
    if (setjmp(je.jb)) {
        if (st == GE_OK)
            st = ge_fail(err, GE_E_FORMAT, "jpeg: %s: %s", je.eof ? "truncated" : "corrupt data",
                         je.msg);
        goto done;
    }
    jpeg_create_decompress(&ci);
    if (len > (unsigned long)-1) {
        st = ge_fail(err, GE_E_LIMIT, "jpeg: file too large");
        goto done;
    }
    jpeg_mem_src(&ci, data, (unsigned long)len);
    jpeg_save_markers(&ci, JPEG_APP0 + 1, 0xffff);
    jpeg_read_header(&ci, TRUE);
    if (je.eof) {
        st = ge_fail(err, GE_E_FORMAT, "jpeg: truncated (the file ends inside the header)");
        goto done;
    }
    if ((st = check_size("jpeg", ci.image_width, ci.image_height, lim, err)) != GE_OK)
        goto done;
    int cmyk = 0;
    switch (ci.jpeg_color_space) {
    case JCS_GRAYSCALE: case JCS_YCbCr: case JCS_RGB:
        ci.out_color_space = JCS_RGB;
        break;
    case JCS_CMYK: case JCS_YCCK:
        ci.out_color_space = JCS_CMYK;
        cmyk = 1;
        break;
    default:
        st = ge_fail(err, GE_E_UNSUPPORTED, "jpeg: unsupported colour space (%d components)",
                     ci.num_components);
        goto done;
    }
    int orientation = 1;
    for (jpeg_saved_marker_ptr m = ci.marker_list; m; m = m->next)
        if (m->marker == JPEG_APP0 + 1 && m->data_length >= 6 &&
            memcmp(m->data, "Exif\0\0", 6) == 0) {
            orientation = exif_orientation(m->data + 6, m->data_length - 6);
            break; /* PIL keeps the first Exif block */
        }
    jpeg_start_decompress(&ci);
    size_t w = ci.output_width, h = ci.output_height;
    if (ci.output_components != (cmyk ? 4 : 3) || w != ci.image_width || h != ci.image_height) {
        st = ge_fail(err, GE_E_INTERNAL, "jpeg: unexpected output layout");
        goto done;
    }
    rgb = malloc(w * h * 3);
    if (cmyk)
        row4 = malloc(w * 4);
    if (!rgb || (cmyk && !row4)) {
        st = ge_fail(err, GE_E_NOMEM, "jpeg: out of memory for %zux%zu pixels", w, h);
        goto done;
    }
    while (ci.output_scanline < h) {
        if (je.eof)
            break;
        size_t y = ci.output_scanline;
        JSAMPROW r = cmyk ? (JSAMPROW)row4 : (JSAMPROW)(rgb + y * w * 3);
        if (jpeg_read_scanlines(&ci, &r, 1) != 1)
            break;
        if (cmyk) { /* PIL: "CMYK;I" (inverted) then cmyk2rgb */
            const uint8_t *s = row4;
            uint8_t *d = rgb + y * w * 3;
            for (size_t x = 0; x < w; x++, s += 4, d += 3) {
                int nk = s[3]; /* 255 - (255 - stored K) */
                for (int c = 0; c < 3; c++) {
                    int v = nk - muldiv255(255 - s[c], nk);
                    d[c] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
                }
            }
        }
    }
    if (je.eof || ci.output_scanline < h) {
        st = ge_fail(err, GE_E_FORMAT, "jpeg: truncated (the data ends at scanline %u of %zu)",
                     ci.output_scanline, h);
        goto done;
    }
    /* no jpeg_finish_decompress: what follows the last scanline does not matter */
    out->w = (int)w;
    out->h = (int)h;
    out->rgb = rgb;
    out->format = "jpeg";
    rgb = NULL;
    st = orient(out, orientation, err);
done:
    jpeg_destroy_decompress(&ci);
    free(rgb);
    free(row4);
    return st;
}

/* ---- PNG (libpng) ---------------------------------------------------------------------------- */

typedef struct {
    const uint8_t *p;
    size_t n, at;
    char msg[200];
} png_src;

static void png_on_error(png_structp png, png_const_charp msg)
{
    png_src *s = png_get_error_ptr(png);
    snprintf(s->msg, sizeof s->msg, "%s", msg);
    png_longjmp(png, 1);
}

static void png_on_warning(png_structp png, png_const_charp msg) { (void)png; (void)msg; }

static void png_on_read(png_structp png, png_bytep dst, size_t n)
{
    png_src *s = png_get_io_ptr(png);
    if (n > s->n - s->at)
        png_error(png, "truncated (the file ends early)");
    memcpy(dst, s->p + s->at, n);
    s->at += n;
}

static ge_status decode_png(const uint8_t *data, size_t len, const ge_image_limits *lim,
                            ge_image *out, ge_err *err)
{
    png_src src = {data, len, 0, {0}};
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, png_on_error,
                                             png_on_warning);
    if (!png)
        return ge_fail(err, GE_E_NOMEM, "png: out of memory");
    png_infop info = png_create_info_struct(png);
    uint8_t *volatile rgb = NULL;
    png_bytep *volatile rows = NULL;
    volatile ge_status st = GE_OK;
    volatile int done_pixels = 0, orientation = 1;
    volatile png_uint_32 vw = 0, vh = 0; /* what the end needs, kept across a longjmp */
    volatile int vgrey16 = 0;
    if (!info) {
        st = ge_fail(err, GE_E_NOMEM, "png: out of memory");
        goto done;
    }
    if (setjmp(png_jmpbuf(png))) {
        if (!done_pixels && st == GE_OK)
            st = ge_fail(err, GE_E_FORMAT, "png: corrupt data: %s", src.msg);
        /* an error after the pixels (in chunks after IDAT) is ignored, as PIL does */
        goto finish;
    }
    png_set_read_fn(png, &src, png_on_read);
    png_set_user_limits(png, 0x7fffffff, 0x7fffffff); /* our pixel limit decides */
    png_read_info(png, info);
    png_uint_32 w, h;
    int depth, ctype, interlace;
    png_get_IHDR(png, info, &w, &h, &depth, &ctype, &interlace, NULL, NULL);
    if ((st = check_size("png", w, h, lim, err)) != GE_OK)
        goto done;
    /* 16-bit grey without alpha: PIL clamps to 255 instead of keeping the high byte */
    const int grey16 = depth == 16 && ctype == PNG_COLOR_TYPE_GRAY;
    vw = w;
    vh = h;
    vgrey16 = grey16;
    if (ctype == PNG_COLOR_TYPE_PALETTE)
        png_set_palette_to_rgb(png);
    if (ctype == PNG_COLOR_TYPE_GRAY && depth < 8)
        png_set_expand_gray_1_2_4_to_8(png);
    if (depth == 16 && !grey16)
        png_set_strip_16(png); /* the high byte */
    /* png_set_palette_to_rgb also turns a tRNS chunk into alpha: drop that too */
    if ((ctype & PNG_COLOR_MASK_ALPHA) || png_get_valid(png, info, PNG_INFO_tRNS))
        png_set_strip_alpha(png);
    if ((ctype == PNG_COLOR_TYPE_GRAY || ctype == PNG_COLOR_TYPE_GRAY_ALPHA) && !grey16)
        png_set_gray_to_rgb(png);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    size_t rowbytes = png_get_rowbytes(png, info), want = grey16 ? (size_t)w * 2 : (size_t)w * 3;
    if (rowbytes != want) {
        st = ge_fail(err, GE_E_INTERNAL, "png: unexpected row size %zu (want %zu)", rowbytes, want);
        goto done;
    }
    rgb = malloc((size_t)w * h * 3);
    rows = malloc(sizeof(png_bytep) * h);
    if (!rgb || !rows) {
        st = ge_fail(err, GE_E_NOMEM, "png: out of memory for %ux%u pixels", (unsigned)w,
                     (unsigned)h);
        goto done;
    }
    for (size_t y = 0; y < h; y++) /* grey16 rows are packed at 2w bytes, expanded below */
        rows[y] = rgb + y * want;
    png_read_image(png, rows);
    done_pixels = 1;
    png_read_end(png, info); /* for an eXIf chunk after the pixels */
finish:
    if (done_pixels) {
        png_bytep ex = NULL;
        png_uint_32 nex = 0;
        if (png_get_eXIf_1(png, info, &nex, &ex) && ex)
            orientation = exif_orientation(ex, nex);
    }
done:
    png_destroy_read_struct(&png, info ? &info : NULL, NULL);
    free(rows);
    if (st != GE_OK || !done_pixels) {
        free(rgb);
        return st;
    }
    if (vgrey16) /* in place, from the end: pixel i's source bytes 2i..2i+1 precede 3i */
        for (size_t i = (size_t)vw * vh; i-- > 0;) {
            unsigned v = (unsigned)rgb[2 * i] << 8 | rgb[2 * i + 1];
            uint8_t g = v > 255 ? 255 : (uint8_t)v;
            rgb[3 * i] = rgb[3 * i + 1] = rgb[3 * i + 2] = g;
        }
    out->w = (int)vw;
    out->h = (int)vh;
    out->rgb = rgb;
    out->format = "png";
    return orient(out, orientation, err);
}

/* ---- WebP (libwebp) ----------------------------------------------------------------------- */

static ge_status decode_webp(const uint8_t *data, size_t len, const ge_image_limits *lim,
                             ge_image *out, ge_err *err)
{
    WebPBitstreamFeatures f;
    VP8StatusCode vs = WebPGetFeatures(data, len, &f);
    if (vs == VP8_STATUS_NOT_ENOUGH_DATA)
        return ge_fail(err, GE_E_FORMAT, "webp: truncated (the file ends inside the header)");
    if (vs != VP8_STATUS_OK)
        return ge_fail(err, GE_E_FORMAT, "webp: corrupt header (libwebp status %d)", (int)vs);
    if (f.has_animation)
        return ge_fail(err, GE_E_UNSUPPORTED, "webp: animated WebP is not supported");
    ge_status st = check_size("webp", (uint64_t)(f.width < 0 ? 0 : f.width),
                              (uint64_t)(f.height < 0 ? 0 : f.height), lim, err);
    if (st != GE_OK)
        return st;
    size_t w = (size_t)f.width, h = (size_t)f.height;
    uint8_t *rgb = malloc(w * h * 3);
    if (!rgb)
        return ge_fail(err, GE_E_NOMEM, "webp: out of memory for %zux%zu pixels", w, h);
    if (!WebPDecodeRGBInto(data, len, rgb, w * h * 3, (int)(w * 3))) {
        free(rgb);
        return ge_fail(err, GE_E_FORMAT, "webp: corrupt or truncated image data");
    }
    int orientation = 1;
    WebPData wd = {data, len};
    WebPDemuxer *dmx = WebPDemux(&wd);
    if (dmx) {
        WebPChunkIterator it;
        if ((WebPDemuxGetI(dmx, WEBP_FF_FORMAT_FLAGS) & EXIF_FLAG) &&
            WebPDemuxGetChunk(dmx, "EXIF", 1, &it)) {
            orientation = exif_orientation(it.chunk.bytes, it.chunk.size);
            WebPDemuxReleaseChunkIterator(&it);
        }
        WebPDemuxDelete(dmx);
    }
    out->w = (int)w;
    out->h = (int)h;
    out->rgb = rgb;
    out->format = "webp";
    return orient(out, orientation, err);
}

/* ---- decode: dispatch on the magic bytes ------------------------------------------------- */

/* Bytes that are none of the three formats: name what they are when the signature says. */
static ge_status not_an_image(const uint8_t *p, size_t len, ge_err *err)
{
    ge_media_type t = ge_media_sniff(p, len < GE_SNIFF_BYTES ? len : GE_SNIFF_BYTES);
    if (t.truncated)
        return ge_fail(err, GE_E_FORMAT, "image: truncated: the file ends after %zu bytes, inside "
                       "the signature of %s", len, t.what);
    if (t.kind == GE_MEDIA_IMAGE)
        return ge_fail(err, GE_E_UNSUPPORTED, "%s image: not supported (JPEG, PNG, WebP are)",
                       t.name);
    if (t.kind != GE_MEDIA_NONE)
        return ge_fail(err, GE_E_UNSUPPORTED, "image: %s, not an image (JPEG, PNG, WebP are "
                       "read)", t.what);
    return ge_fail(err, GE_E_UNSUPPORTED,
                   "image: unsupported format (not JPEG, PNG or WebP by its first bytes)");
}

ge_status ge_image_decode(const void *bytes, size_t len, const ge_image_limits *lim,
                          ge_image *out, ge_err *err)
{
    const uint8_t *p = bytes;
    memset(out, 0, sizeof *out);
    if (!p || len == 0)
        return ge_fail(err, GE_E_FORMAT, "image: empty file");
    ge_status st;
    if (len >= 3 && p[0] == 0xff && p[1] == 0xd8 && p[2] == 0xff)
        st = decode_jpeg(p, len, lim, out, err);
    else if (len >= 8 && memcmp(p, "\x89PNG\r\n\x1a\n", 8) == 0)
        st = decode_png(p, len, lim, out, err);
    else if (len >= 12 && memcmp(p, "RIFF", 4) == 0 && memcmp(p + 8, "WEBP", 4) == 0)
        st = decode_webp(p, len, lim, out, err);
    else
        return not_an_image(p, len, err);
    if (st != GE_OK)
        ge_image_free(out);
    return st;
}

/* ---- plan: docs/model.md 5.1 step 2 (get_aspect_ratio_preserving_size) ------------------ */

ge_status ge_image_plan(int h, int w, int budget, int *th, int *tw, int *n_tokens, ge_err *err)
{
    char list[64];
    if (!ge_budget_valid(budget))
        return ge_fail(err, GE_E_USAGE, "image token budget %d: must be one of %s", budget,
                       ge_budget_list(", ", list, sizeof list));
    if (h < 1 || w < 1)
        return ge_fail(err, GE_E_USAGE, "image size %dx%d: must be at least 1x1", w, h);
    const int side = 48;                            /* patch 16 x pooling 3 */
    const double max_patches = (double)budget * 9; /* pooling 3x3 patches per soft token */
    const double target_px = max_patches * 256;
    /* the same double operations, in the same order, as the Python */
    double f = sqrt(target_px / ((double)h * (double)w));
    double ih = f * (double)h, iw = f * (double)w;
    double fh = floor(ih / side) * side, fw = floor(iw / side) * side;
    if (fh == 0 && fw == 0)
        return ge_fail(err, GE_E_INPUT, "image %dx%d: resizing would give a 0x0 image", w, h);
    double max_side = (double)budget * side;
    if (fh == 0) {
        fh = side;
        fw = fmin(floor((double)w / (double)h) * side, max_side);
    } else if (fw == 0) {
        fw = side;
        fh = fmin(floor((double)h / (double)w) * side, max_side);
    }
    if (fh * fw > target_px || fh < side || fw < side)
        return ge_fail(err, GE_E_INPUT,
                       "image %dx%d: the %.0fx%.0f target exceeds the %d-token budget", w, h, fw,
                       fh, budget);
    if (th)
        *th = (int)fh;
    if (tw)
        *tw = (int)fw;
    if (n_tokens)
        *n_tokens = (int)(fh / side) * (int)(fw / side);
    return GE_OK;
}

/* ---- resize: torchvision's uint8 antialiased bicubic ----------------------------------------
 * What aten's _upsample_bicubic2d_aa does for uint8 input (UpSampleKernel.cpp:
 * HelperInterpBase::_compute_indices_min_size_weights_aa and
 * _compute_index_ranges_int16_weights, basic_loop_aa_horizontal/vertical<uint8_t>; the AVX2
 * path in UpSampleKernelAVXAntialias.h computes the same numbers), per axis of in -> out:
 *   scale = in/out (double); support = 2*scale when scale >= 1 else 2 (the cubic's radius 2,
 *   stretched when downscaling); ksize = ceil(support)*2 + 1 taps at most;
 *   output i: center = scale*(i + 0.5), xmin = max(trunc(center - support + 0.5), 0),
 *   xsize = min(trunc(center + support + 0.5), in) - xmin, clamped to [0, ksize];
 *   tap j: Keys cubic (a = -0.5) at (xmin + j - center + 0.5) * (scale >= 1 ? 1/scale : 1),
 *   normalised by the taps' sum (when non-zero).
 *   Fixed point: one precision p per axis: p counts up from 0 and stops at the first p
 *   where (int)(0.5 + wmax * 2^(p+1)) >= 2^15 (or at 22), wmax being the axis's largest
 *   normalised weight, so wmax * 2^p still fits an int16; each weight becomes
 *   round-half-away-from-zero(w * 2^p).
 *   A sample is (2^(p-1) + sum pixel*weight) >> p, clamped to 0..255, in int32.
 * Width first, then height; an axis whose size does not change is skipped (its taps would
 * be the identity). PIL's resize is the same filter at 22-bit precision, and differs by a
 * level or two on a small share of values (tools/ref/imageproc.py measures it). */

typedef struct {
    int ksize, prec;
    int *xmin, *xsize; /* [out] */
    int16_t *w;        /* [out, ksize] */
} taps;

static double keys_cubic(double x)
{
    const double a = -0.5;
    x = fabs(x);
    if (x < 1.0)
        return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
    if (x < 2.0)
        return ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a;
    return 0.0;
}

/* Build the taps of one axis; wf is scratch of out*ksize doubles. */
static int make_taps(taps *t, int in, int out)
{
    double scale = (double)in / (double)out;
    double support = scale >= 1.0 ? 2.0 * scale : 2.0;
    double invscale = scale >= 1.0 ? 1.0 / scale : 1.0;
    int ks = (int)ceil(support) * 2 + 1;
    t->ksize = ks;
    t->xmin = malloc(sizeof(int) * (size_t)out * 2);
    t->w = malloc(sizeof(int16_t) * (size_t)out * ks);
    double *wf = malloc(sizeof(double) * (size_t)out * ks);
    if (!t->xmin || !t->w || !wf) {
        free(wf);
        return 0;
    }
    t->xsize = t->xmin + out;
    double wmax = 0;
    for (int i = 0; i < out; i++) {
        double center = scale * (i + 0.5);
        long long lo = (long long)(center - support + 0.5), hi = (long long)(center + support + 0.5);
        if (lo < 0)
            lo = 0;
        if (hi > in)
            hi = in;
        long long n = hi - lo;
        n = n < 0 ? 0 : n > ks ? ks : n;
        double *wi = wf + (size_t)i * ks, total = 0;
        for (int j = 0; j < n; j++) {
            wi[j] = keys_cubic(((double)(j + lo) - center + 0.5) * invscale);
            total += wi[j];
        }
        if (total != 0.0)
            for (int j = 0; j < n; j++) {
                wi[j] /= total;
                if (wi[j] > wmax)
                    wmax = wi[j];
            }
        for (int j = (int)n; j < ks; j++)
            wi[j] = 0;
        t->xmin[i] = (int)lo;
        t->xsize[i] = (int)n;
    }
    int p;
    for (p = 0; p < 22; p++)
        if ((int)(0.5 + wmax * (double)(1 << (p + 1))) >= (1 << 15))
            break;
    t->prec = p;
    for (size_t k = 0; k < (size_t)out * ks; k++) {
        double v = wf[k] * (double)(1 << p);
        t->w[k] = (int16_t)(v < 0 ? (int)(-0.5 + v) : (int)(0.5 + v));
    }
    free(wf);
    return 1;
}

static void free_taps(taps *t)
{
    free(t->xmin);
    free(t->w);
}

static inline uint8_t clamp_shift(int32_t acc, int prec)
{
    if (acc < 0)
        return 0;
    acc >>= prec;
    return (uint8_t)(acc > 255 ? 255 : acc);
}

/* The passes are written as fixed-length loops over blocks of lanes (int16 x int16 -> int32
 * multiply-adds) that the compiler vectorises with baseline SSE2 at -O2; no intrinsics. */
#define HROWS 8                /* rows the horizontal pass does at once */
#define HLANES (HROWS * 3)     /* = lanes of one tile column */
#define VLANES 48              /* lanes of one block of the vertical pass */

/* src [h, w, 3] -> dst [h, tw, 3], along x. tile is scratch of w*HLANES int16: the rows of
 * a block transposed, so the taps of all HROWS rows are one contiguous run of lanes. */
static void pass_h(const uint8_t *src, int h, int w, uint8_t *dst, int tw, const taps *t,
                   int16_t *tile)
{
    const int32_t half = t->prec ? (int32_t)1 << (t->prec - 1) : 0;
    for (int y0 = 0; y0 < h; y0 += HROWS) {
        int nr = h - y0 < HROWS ? h - y0 : HROWS;
        for (int r = 0; r < nr; r++) {
            const uint8_t *s = src + (size_t)(y0 + r) * w * 3;
            for (int x = 0; x < w; x++)
                for (int c = 0; c < 3; c++)
                    tile[(size_t)x * HLANES + r * 3 + c] = s[x * 3 + c];
        }
        for (int x = 0; x < tw; x++) {
            int32_t acc[HLANES];
            for (int i = 0; i < HLANES; i++)
                acc[i] = half;
            const int16_t *k = t->w + (size_t)x * t->ksize;
            const int16_t *p = tile + (size_t)t->xmin[x] * HLANES;
            for (int j = 0, n = t->xsize[x]; j < n; j++, p += HLANES) {
                const int16_t c = k[j];
                for (int i = 0; i < HLANES; i++)
                    acc[i] += (int32_t)p[i] * c;
            }
            for (int r = 0; r < nr; r++) {
                uint8_t *d = dst + ((size_t)(y0 + r) * tw + x) * 3;
                for (int c = 0; c < 3; c++)
                    d[c] = clamp_shift(acc[r * 3 + c], t->prec);
            }
        }
    }
}

/* src [h, w, 3] -> dst [th, w, 3], along y */
static void pass_v(const uint8_t *src, int w, uint8_t *dst, int th, const taps *t)
{
    const size_t rb = (size_t)w * 3;
    const int32_t half = t->prec ? (int32_t)1 << (t->prec - 1) : 0;
    for (int y = 0; y < th; y++) {
        const int16_t *k = t->w + (size_t)y * t->ksize;
        const uint8_t *s0 = src + (size_t)t->xmin[y] * rb;
        const int n = t->xsize[y];
        uint8_t *d = dst + (size_t)y * rb;
        size_t i0 = 0;
        for (; i0 + VLANES <= rb; i0 += VLANES) {
            int32_t acc[VLANES];
            for (int i = 0; i < VLANES; i++)
                acc[i] = half;
            for (int j = 0; j < n; j++) {
                const uint8_t *s = s0 + (size_t)j * rb + i0;
                const int16_t c = k[j];
                for (int i = 0; i < VLANES; i++)
                    acc[i] += (int32_t)(int16_t)s[i] * c;
            }
            for (int i = 0; i < VLANES; i++)
                d[i0 + i] = clamp_shift(acc[i], t->prec);
        }
        for (; i0 < rb; i0++) {
            int32_t a = half;
            for (int j = 0; j < n; j++)
                a += (int32_t)s0[(size_t)j * rb + i0] * k[j];
            d[i0] = clamp_shift(a, t->prec);
        }
    }
}

ge_status ge_image_resize(const uint8_t *src, int h, int w, uint8_t *dst, int th, int tw,
                          ge_err *err)
{
    if (h < 1 || w < 1 || th < 1 || tw < 1)
        return ge_fail(err, GE_E_USAGE, "image resize %dx%d -> %dx%d: sizes must be >= 1", w, h,
                       tw, th);
    if (h == th && w == tw) {
        memcpy(dst, src, (size_t)h * w * 3);
        return GE_OK;
    }
    taps tx = {0}, ty = {0};
    uint8_t *mid = NULL;
    int16_t *tile = NULL;
    ge_status st = GE_OK;
    int need_h = w != tw, need_v = h != th;
    if ((need_h && !make_taps(&tx, w, tw)) || (need_v && !make_taps(&ty, h, th)))
        goto nomem;
    if (need_h && need_v) {
        mid = malloc((size_t)h * tw * 3);
        if (!mid)
            goto nomem;
    }
    if (need_h && !(tile = calloc((size_t)w * HLANES, sizeof(int16_t))))
        goto nomem;
    if (need_h)
        pass_h(src, h, w, need_v ? mid : dst, tw, &tx, tile);
    if (need_v)
        pass_v(need_h ? mid : src, tw, dst, th, &ty);
    goto done;
nomem:
    st = ge_fail(err, GE_E_NOMEM, "image resize %dx%d -> %dx%d: out of memory", w, h, tw, th);
done:
    free_taps(&tx);
    free_taps(&ty);
    free(mid);
    free(tile);
    return st;
}

/* ---- patchify: docs/model.md 5.1 steps 4-5 ----------------------------------------------- */

ge_status ge_image_patchify(const uint8_t *rgb, int h, int w, float *patches, int32_t *pos,
                            ge_err *err)
{
    const int P = GE_IMAGE_PATCH;
    if (h < P || w < P || h % P || w % P)
        return ge_fail(err, GE_E_USAGE, "image %dx%d: patches need sides that are multiples of %d",
                       w, h, P);
    /* rescale as the torchvision backend does: float32(u8) * float32(1/255) */
    float lut[256];
    const float k = (float)(1.0 / 255.0);
    for (int v = 0; v < 256; v++)
        lut[v] = (float)v * k;
    int pw = w / P, ph = h / P;
    for (int py = 0; py < ph; py++)
        for (int px = 0; px < pw; px++) {
            size_t n = (size_t)py * pw + px;
            float *o = patches + n * GE_IMAGE_PATCH_DIM;
            for (int yy = 0; yy < P; yy++) {
                const uint8_t *s = rgb + ((size_t)(py * P + yy) * w + (size_t)px * P) * 3;
                for (int i = 0; i < P * 3; i++)
                    *o++ = lut[s[i]];
            }
            pos[2 * n] = px;
            pos[2 * n + 1] = py;
        }
    return GE_OK;
}
