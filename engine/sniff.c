/* sniff.c - what a media file is, from its first bytes (ge_media_sniff, ge.h).
 *
 * One table of signatures serves the CLI's --input files (which item a path becomes) and the
 * three decoders (an AVIF handed to the video decoder is named, not left to libavformat's
 * "moov atom not found"). Only the signatures are ours; every decoding is the libraries'.
 *
 * ISO BMFF (the "ftyp" box: MP4, MOV, 3GP, M4A, AVIF, HEIC, ...) is told by its brands: the
 * major brand decides when we know it, else the compatible brands (a still-image brand and no
 * video brand: an image; an audio brand and no video brand: audio), else, brands unknown, it
 * is a container whose streams decide (GE_MEDIA_AV), as for Matroska/WebM and AVI, which can
 * hold video, sound or both. */
#include <stdbool.h>
#include <string.h>

#include "ge.h"

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static ge_media_type type(ge_media_kind kind, const char *name, const char *what, int supported)
{
    return (ge_media_type){kind, name, what, supported, 0};
}

/* ---- ISO BMFF brands ------------------------------------------------------------------------ */

enum { B_NONE, B_IMAGE, B_AUDIO, B_VIDEO };

/* still images and image sequences (HEIF, ISO/IEC 23008-12; AVIF; Canon CR3; JPEG 2000) */
static const char *const IMAGE_BRANDS[] = {
    "avif", "avis", "avio", "MA1A", "MA1B",                         /* AVIF */
    "heic", "heix", "heim", "heis", "hevc", "hevx", "hevm", "hevs", /* HEIC */
    "mif1", "mif2", "msf1", "miaf", "heif", "avci", "avcs", "jpeg", "jpgs", "vvic", "vvis",
    "crx ", "jp2 ", "jpx ", "jpm "};
static const char *const AUDIO_BRANDS[] = {"M4A ", "M4B ", "M4P ", "F4A ", "F4B "};
/* whole brands; the prefixes iso*, mp4*, 3gp*, 3g2*, 3ge*, 3gg*, 3gr*, 3gs*, cmf* too */
static const char *const VIDEO_BRANDS[] = {
    "avc1", "M4V ", "M4VH", "M4VP", "qt  ", "dash", "msdh", "msix", "mmp4", "f4v ", "F4V ",
    "F4P ", "av01", "dby1", "mjp2", "mj2s", "XAVC", "MSNV", "NDAS", "NDSC", "NDSH", "NDSM",
    "NDSP", "NDSS", "NDXC", "NDXH", "NDXM", "NDXP", "NDXS", "KDDI", "kddi", "nvr1", "CAEP",
    "ROSS", "mqt ", "sdv ", "mp71"};

static bool in_list(const uint8_t *b, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!memcmp(b, list[i], 4))
            return true;
    return false;
}

static int brand_kind(const uint8_t *b)
{
    static const char *const PREFIX[] = {"iso", "mp4", "3gp", "3g2", "3ge", "3gg", "3gr", "3gs",
                                         "cmf"};
    if (in_list(b, IMAGE_BRANDS, sizeof IMAGE_BRANDS / sizeof *IMAGE_BRANDS))
        return B_IMAGE;
    if (in_list(b, AUDIO_BRANDS, sizeof AUDIO_BRANDS / sizeof *AUDIO_BRANDS))
        return B_AUDIO;
    if (in_list(b, VIDEO_BRANDS, sizeof VIDEO_BRANDS / sizeof *VIDEO_BRANDS))
        return B_VIDEO;
    for (size_t i = 0; i < sizeof PREFIX / sizeof *PREFIX; i++)
        if (!memcmp(b, PREFIX[i], 3))
            return B_VIDEO;
    return B_NONE;
}

/* An image's format from all its brands: AVIF or HEIC when a brand says so, else HEIF. */
static ge_media_type image_brands(const uint8_t *brands, size_t n)
{
    static const struct {
        const char *brand, *name, *what;
    } BY[] = {{"avif", "AVIF", "an AVIF image"}, {"avis", "AVIF", "an AVIF image sequence"},
              {"avio", "AVIF", "an AVIF image"}, {"MA1A", "AVIF", "an AVIF image"},
              {"MA1B", "AVIF", "an AVIF image"}, {"heic", "HEIC", "a HEIC image"},
              {"heix", "HEIC", "a HEIC image"},  {"heim", "HEIC", "a HEIC image"},
              {"heis", "HEIC", "a HEIC image"},  {"hevc", "HEIC", "a HEIC image sequence"},
              {"hevx", "HEIC", "a HEIC image sequence"}, {"hevm", "HEIC", "a HEIC image sequence"},
              {"hevs", "HEIC", "a HEIC image sequence"}, {"crx ", "CR3", "a Canon CR3 raw image"},
              {"jp2 ", "JPEG 2000", "a JPEG 2000 image"},
              {"jpx ", "JPEG 2000", "a JPEG 2000 image"},
              {"jpm ", "JPEG 2000", "a JPEG 2000 image"}};
    for (size_t k = 0; k < sizeof BY / sizeof *BY; k++)
        for (size_t i = 0; i + 4 <= n; i += 4)
            if (!memcmp(brands + i, BY[k].brand, 4))
                return type(GE_MEDIA_IMAGE, BY[k].name, BY[k].what, 0);
    return type(GE_MEDIA_IMAGE, "HEIF", "a HEIF image", 0);
}

/* b[0..n) starts with an "ftyp" box (n >= 12). */
static ge_media_type iso_bmff(const uint8_t *b, size_t n)
{
    uint64_t size = be32(b);
    size_t at = 8;
    if (size == 1) { /* a 64-bit size follows the type */
        if (n < 16)
            return (ge_media_type){GE_MEDIA_AV, "MP4", "an MP4 file", 1, 1};
        size = (uint64_t)be32(b + 8) << 32 | be32(b + 12);
        at = 16;
    }
    size_t end = size == 0 || size > n ? n : (size_t)size; /* the brands we hold */
    if (n < at + 4) /* the file ends before the major brand */
        return (ge_media_type){GE_MEDIA_AV, "MP4", "an MP4 file", 1, 1};
    if (end < at + 4) /* a box too short for its brand: FFmpeg judges */
        return type(GE_MEDIA_AV, "MP4", "an MP4 file", 1);
    const uint8_t *major = b + at;
    /* the compatible brands follow the minor version; major first in the list we search */
    uint8_t brands[4 * 64];
    size_t nb = 0;
    memcpy(brands, major, 4), nb = 4;
    for (size_t i = at + 8; i + 4 <= end && nb < sizeof brands; i += 4)
        memcpy(brands + nb, b + i, 4), nb += 4;
    int kind = brand_kind(major);
    if (kind == B_NONE) { /* unknown major brand: the compatible ones */
        bool img = false, aud = false, vid = false;
        for (size_t i = 4; i < nb; i += 4) {
            int k = brand_kind(brands + i);
            img |= k == B_IMAGE, aud |= k == B_AUDIO, vid |= k == B_VIDEO;
        }
        kind = vid ? B_VIDEO : img ? B_IMAGE : aud ? B_AUDIO : B_NONE;
    }
    if (kind == B_IMAGE)
        return image_brands(brands, nb);
    if (kind == B_AUDIO)
        return type(GE_MEDIA_AUDIO, "M4A", "M4A audio", 1);
    if (!memcmp(major, "qt  ", 4))
        return type(GE_MEDIA_AV, "QuickTime", "a QuickTime file", 1);
    if (!memcmp(major, "3g", 2))
        return type(GE_MEDIA_AV, "3GP", "a 3GP file", 1);
    return type(GE_MEDIA_AV, "MP4", "an MP4 file", 1); /* known video brands and unknown ones */
}

/* ---- the other signatures ------------------------------------------------------------------ */

/* Fixed signatures at offset 0 (sig[0..siglen)), for the files that end before the `need`
 * bytes that tell them (a truncated header). */
static const struct {
    const char *sig;
    size_t siglen, need;
    ge_media_kind kind;
    const char *name, *what;
} PREFIXES[] = {
    {"\x89PNG\r\n\x1a\n", 8, 8, GE_MEDIA_IMAGE, "PNG", "a PNG image"},
    {"\xff\xd8\xff", 3, 3, GE_MEDIA_IMAGE, "JPEG", "a JPEG image"},
    {"GIF8", 4, 6, GE_MEDIA_IMAGE, "GIF", "a GIF image"},
    {"\0\0\0\x0cJXL \r\n\x87\n", 12, 12, GE_MEDIA_IMAGE, "JPEG XL", "a JPEG XL image"},
    {"\0\0\0\x0cjP  \r\n\x87\n", 12, 12, GE_MEDIA_IMAGE, "JPEG 2000", "a JPEG 2000 image"},
    {"fLaC", 4, 4, GE_MEDIA_AUDIO, "FLAC", "FLAC audio"},
    {"OggS", 4, 4, GE_MEDIA_AUDIO, "Ogg", "Ogg audio"},
    {"\x1a\x45\xdf\xa3", 4, 4, GE_MEDIA_AV, "Matroska", "a Matroska file"},
    {"RIFF", 4, 12, GE_MEDIA_NONE, "RIFF", "a RIFF file (WAV, WebP or AVI)"},
};

static bool is_svg(const uint8_t *b, size_t n)
{
    size_t i = n >= 3 && !memcmp(b, "\xef\xbb\xbf", 3) ? 3 : 0;
    while (i < n && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n'))
        i++;
    if (n - i < 4 || b[i] != '<')
        return false;
    if (!memcmp(b + i, "<svg", 4))
        return true;
    if (n - i < 5 || (memcmp(b + i, "<?xml", 5) && memcmp(b + i, "<!--", 4) &&
                      memcmp(b + i, "<!DOC", 5)))
        return false;
    for (size_t k = i; k + 4 <= n; k++) /* an XML prolog or comment, then the svg element */
        if (!memcmp(b + k, "<svg", 4))
            return true;
    return false;
}

ge_media_type ge_media_sniff(const void *bytes, size_t n)
{
    const uint8_t *b = bytes;
    if (!b || n == 0)
        return type(GE_MEDIA_NONE, NULL, NULL, 0);
    /* images: the three we decode, then the ones we name */
    if (n >= 3 && b[0] == 0xff && b[1] == 0xd8 && b[2] == 0xff)
        return type(GE_MEDIA_IMAGE, "JPEG", "a JPEG image", 1);
    if (n >= 8 && !memcmp(b, "\x89PNG\r\n\x1a\n", 8))
        return type(GE_MEDIA_IMAGE, "PNG", "a PNG image", 1);
    if (n >= 12 && !memcmp(b, "RIFF", 4) && !memcmp(b + 8, "WEBP", 4))
        return type(GE_MEDIA_IMAGE, "WebP", "a WebP image", 1);
    /* ISO BMFF and QuickTime (before the short signatures below) */
    if (n >= 12 && !memcmp(b + 4, "ftyp", 4))
        return iso_bmff(b, n);
    if (n >= 8 && n < 12 && !memcmp(b + 4, "ftyp", 4))
        return (ge_media_type){GE_MEDIA_AV, "MP4", "an MP4 file", 1, 1};
    if (n >= 8 && (!memcmp(b + 4, "moov", 4) || !memcmp(b + 4, "mdat", 4) ||
                   !memcmp(b + 4, "wide", 4)))
        return type(GE_MEDIA_AV, "QuickTime", "a QuickTime file", 1);
    if (n >= 6 && (!memcmp(b, "GIF87a", 6) || !memcmp(b, "GIF89a", 6)))
        return type(GE_MEDIA_IMAGE, "GIF", "a GIF image", 0);
    if (n >= 18 && b[0] == 'B' && b[1] == 'M') { /* BITMAPFILEHEADER, then a DIB header size */
        uint32_t dib = le32(b + 14);
        if (dib == 12 || dib == 16 || dib == 40 || dib == 52 || dib == 56 || dib == 64 ||
            dib == 108 || dib == 124)
            return type(GE_MEDIA_IMAGE, "BMP", "a BMP image", 0);
    }
    if (n >= 4 && (!memcmp(b, "II*\0", 4) || !memcmp(b, "MM\0*", 4) || !memcmp(b, "II+\0", 4) ||
                   !memcmp(b, "MM\0+", 4)))
        return type(GE_MEDIA_IMAGE, "TIFF", "a TIFF image", 0);
    if (n >= 6 && b[0] == 0 && b[1] == 0 && (b[2] == 1 || b[2] == 2) && b[3] == 0 &&
        (b[4] | b[5]) != 0 && (n < 10 || b[9] == 0)) /* ICONDIR, the first entry's reserved 0 */
        return b[2] == 1 ? type(GE_MEDIA_IMAGE, "ICO", "an ICO image", 0)
                         : type(GE_MEDIA_IMAGE, "CUR", "a CUR image", 0);
    if (n >= 2 && b[0] == 0xff && b[1] == 0x0a)
        return type(GE_MEDIA_IMAGE, "JPEG XL", "a JPEG XL image", 0);
    if (n >= 12 && !memcmp(b, "\0\0\0\x0cJXL \r\n\x87\n", 12))
        return type(GE_MEDIA_IMAGE, "JPEG XL", "a JPEG XL image", 0);
    if ((n >= 12 && !memcmp(b, "\0\0\0\x0cjP  \r\n\x87\n", 12)) ||
        (n >= 4 && !memcmp(b, "\xff\x4f\xff\x51", 4)))
        return type(GE_MEDIA_IMAGE, "JPEG 2000", "a JPEG 2000 image", 0);
    if (n >= 4 && !memcmp(b, "8BPS", 4))
        return type(GE_MEDIA_IMAGE, "PSD", "a Photoshop image", 0);
    if (n >= 4 && !memcmp(b, "qoif", 4))
        return type(GE_MEDIA_IMAGE, "QOI", "a QOI image", 0);
    if (n >= 4 && !memcmp(b, "\x76\x2f\x31\x01", 4))
        return type(GE_MEDIA_IMAGE, "OpenEXR", "an OpenEXR image", 0);
    if (is_svg(b, n))
        return type(GE_MEDIA_IMAGE, "SVG", "an SVG image", 0);
    /* audio */
    if (n >= 12 && (!memcmp(b, "RIFF", 4) || !memcmp(b, "RIFX", 4) || !memcmp(b, "RF64", 4)) &&
        !memcmp(b + 8, "WAVE", 4))
        return type(GE_MEDIA_AUDIO, "WAV", "WAV audio", 1);
    if (n >= 12 && !memcmp(b, "FORM", 4) &&
        (!memcmp(b + 8, "AIFF", 4) || !memcmp(b + 8, "AIFC", 4)))
        return type(GE_MEDIA_AUDIO, "AIFF", "AIFF audio", 1);
    if (n >= 4 && !memcmp(b, "fLaC", 4))
        return type(GE_MEDIA_AUDIO, "FLAC", "FLAC audio", 1);
    if (n >= 27 && !memcmp(b, "OggS", 4)) { /* the first page's first packet: Theora is video */
        size_t at = 27 + (size_t)b[26];
        if (n >= at + 7 && !memcmp(b + at, "\x80theora", 7))
            return type(GE_MEDIA_AV, "Ogg", "an Ogg video (Theora)", 1);
    }
    if (n >= 4 && !memcmp(b, "OggS", 4))
        return type(GE_MEDIA_AUDIO, "Ogg", "Ogg audio", 1);
    if (n >= 3 && !memcmp(b, "ID3", 3))
        return type(GE_MEDIA_AUDIO, "MP3", "MP3 audio", 1); /* an ID3v2 tag first */
    if (n >= 3 && b[0] == 0xFF && (b[1] & 0xE0) == 0xE0 && (b[1] & 0x06) != 0 &&
        (b[1] & 0x18) != 0x08 && b[1] < 0xFE && (b[2] >> 4) != 15 && ((b[2] >> 2) & 3) != 3)
        return type(GE_MEDIA_AUDIO, "MP3", "MP3 audio", 1); /* an MPEG audio frame header (not
                                                             * a UTF-16 byte order mark) */
    if (n >= 3 && b[0] == 0xFF && (b[1] & 0xF6) == 0xF0 && ((b[2] >> 2) & 15) < 13)
        return type(GE_MEDIA_AUDIO, "AAC", "AAC audio (ADTS)", 1);
    if (n >= 4 && !memcmp(b, "caff", 4))
        return type(GE_MEDIA_AUDIO, "CAF", "CAF audio", 1);
    if (n >= 4 && !memcmp(b, ".snd", 4))
        return type(GE_MEDIA_AUDIO, "AU", "AU audio", 1);
    if (n >= 5 && !memcmp(b, "#!AMR", 5))
        return type(GE_MEDIA_AUDIO, "AMR", "AMR audio", 1);
    if (n >= 4 && !memcmp(b, "wvpk", 4))
        return type(GE_MEDIA_AUDIO, "WavPack", "WavPack audio", 1);
    if (n >= 4 && !memcmp(b, "MAC ", 4))
        return type(GE_MEDIA_AUDIO, "APE", "Monkey's Audio", 1);
    /* containers of video, sound or both */
    if (n >= 4 && !memcmp(b, "\x1a\x45\xdf\xa3", 4)) {
        for (size_t i = 4; i + 4 <= n && i < 64; i++) /* the EBML header's DocType */
            if (!memcmp(b + i, "webm", 4))
                return type(GE_MEDIA_AV, "WebM", "a WebM file", 1);
        return type(GE_MEDIA_AV, "Matroska", "a Matroska file", 1);
    }
    if (n >= 12 && !memcmp(b, "RIFF", 4) && !memcmp(b + 8, "AVI ", 4))
        return type(GE_MEDIA_AV, "AVI", "an AVI file", 1);
    if (n >= 16 && !memcmp(b, "\x30\x26\xb2\x75\x8e\x66\xcf\x11\xa6\xd9\x00\xaa\x00\x62\xce\x6c",
                           16))
        return type(GE_MEDIA_AV, "ASF", "an ASF (WMA/WMV) file", 1);
    /* a file that ends inside a signature */
    for (size_t i = 0; i < sizeof PREFIXES / sizeof *PREFIXES; i++)
        if (n >= 2 && n < PREFIXES[i].need &&
            !memcmp(b, PREFIXES[i].sig, n < PREFIXES[i].siglen ? n : PREFIXES[i].siglen))
            return (ge_media_type){PREFIXES[i].kind, PREFIXES[i].name, PREFIXES[i].what, 1, 1};
    return type(GE_MEDIA_NONE, NULL, NULL, 0);
}
