/* ge.h - the public API of the gemmaembed engine: the only engine header cli/ includes.
 *
 * The engine loads an EmbeddingGemma 2 GGUF file, tokenizes text and computes sentence
 * embeddings. It never prints, exits or reads the environment: every failure comes back as
 * a ge_status plus a one-line message in a caller-provided ge_err. */
#ifndef GE_H
#define GE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- status ---------------------------------------------------------------------------- */

typedef enum {
    GE_OK = 0,
    GE_E_USAGE,       /* bad argument from the caller */
    GE_E_IO,          /* open/read/map failed */
    GE_E_FORMAT,      /* malformed file or record */
    GE_E_UNSUPPORTED, /* valid but not handled (tensor type, architecture) */
    GE_E_LIMIT,       /* over a size limit (context length, counts) */
    GE_E_INPUT,       /* bad input record content */
    GE_E_NOMEM,
    GE_E_INTERNAL
} ge_status;

typedef struct {
    ge_status code;
    char msg[512]; /* one line, no trailing newline */
} ge_err;

/* Record `code` and a printf-style message in err (err may be NULL); returns code, so a
 * failure is one line: return ge_fail(err, GE_E_FORMAT, "%s: ...", path). */
ge_status ge_fail(ge_err *err, ge_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Prefix err->msg with "prefix: " (adds context such as a file name or record line). */
void ge_err_prefix(ge_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Short stable name of a status ("format", "limit", ...), for error records. */
const char *ge_status_name(ge_status code);

/* ---- files the engine reads (files.c) -------------------------------------------------------
 * Model files and media files must be regular files: a FIFO, a device or a socket could block
 * an open() or read() forever (a writer that never comes) or change under the reader. */

/* Open path for reading (O_CLOEXEC) without ever blocking in open(): a descriptor >= 0, or
 * -1 with GE_E_IO naming the path and what it is ("a FIFO", "a directory", ...). */
int ge_open_regular(const char *path, ge_err *err);

/* For the caller's SIGBUS handler (async-signal-safe): when addr lies in a mapped model file
 * that was cut short on disk (truncated, or overwritten in place, while in use), replace
 * that mapping by zero pages so the faulting read can go on, mark the model damaged
 * (ge_model_files_check) and return true; false when addr is not in a model file. */
bool ge_mapping_fault(const void *addr);

/* ---- what a media file is (sniff.c, avmem.c) -------------------------------------------------
 * The file's first bytes name its format; --input files picks the item from them and each
 * decoder refuses, by name, what is not its kind (an AVIF given as a video). */

typedef enum {
    GE_MEDIA_NONE,  /* no signature we know */
    GE_MEDIA_IMAGE,
    GE_MEDIA_AUDIO,
    GE_MEDIA_AV,    /* a container of video, sound or both (MP4/MOV/3GP with a video or unknown
                     * brand, Matroska/WebM, AVI, ASF): its streams decide (ge_media_streams) */
} ge_media_kind;

typedef struct {
    ge_media_kind kind;
    const char *name;  /* "JPEG", "AVIF", "WAV", "MP4", ... (static; NULL for GE_MEDIA_NONE) */
    const char *what;  /* the same for a message: "an AVIF image", "WAV audio", "an MP4 file" */
    int supported;     /* an image: 1 for JPEG, PNG and WebP, 0 for the formats only named (GIF,
                        * BMP, TIFF, ICO, SVG, JPEG XL, JPEG 2000, AVIF, HEIC, HEIF, ...);
                        * audio and containers: 1 (a decoder may still refuse the codec) */
    int truncated;     /* 1: the bytes end inside the signature (or the ftyp box's brands) */
} ge_media_type;

/* The bytes ge_media_sniff looks at: give it the first GE_SNIFF_BYTES of a file (or all of a
 * shorter one). ISO BMFF: the major brand decides when known, else the compatible brands
 * (image or audio brands without a video brand), else it is GE_MEDIA_AV (unknown brands). */
#define GE_SNIFF_BYTES 512
ge_media_type ge_media_sniff(const void *bytes, size_t n);

/* The video and audio streams of the container file held in bytes[0..len), from its header
 * (libavformat; cover art is not video). GE_E_FORMAT when no demuxer can open it. */
ge_status ge_media_streams(const void *bytes, size_t len, int *video, int *audio, ge_err *err);

/* ---- UTF-8 ------------------------------------------------------------------------------ */

/* Length of the valid UTF-8 sequence at s[0..n) (shortest form, no surrogates, at most
 * U+10FFFF), or 0 when it is not one. n must be >= 1. */
size_t ge_utf8_seq(const char *s, size_t n);
/* Byte offset of the first invalid UTF-8 sequence in s[0..len), or len when s is valid. */
size_t ge_utf8_check(const char *s, size_t len);
/* The code points of valid UTF-8 s[0..len) (its bytes other than continuation bytes). */
size_t ge_utf8_chars(const char *s, size_t len);

/* ---- engine switches (config.c) ------------------------------------------------------------
 * One table describes every switch: its flag, the environment variable of the engine it
 * descends from (EI_GEMMA2_CPU_*), default, range and help. The CLI builds its flags, help
 * and --print-config from it; the engine only ever sees the resulting ge_config. */

typedef enum { GE_SRC_DEFAULT = 0, GE_SRC_ENV, GE_SRC_FLAG } ge_source;

typedef enum {
    GE_CFG_THREADS, GE_CFG_THREAD_CAP, GE_CFG_CPU_TIER, GE_CFG_HYBRID, GE_CFG_HYBRID_TOKENS,
    GE_CFG_FLASH, GE_CFG_VNNI256, GE_CFG_VNNI256_SHORT, GE_CFG_SGEMM, GE_CFG_RELEASE_WEIGHTS,
    GE_CFG_PREPACK, GE_CFG_WAVE_TOKENS, GE_CFG_MEDIA_FAST, GE_CFG_MEDIA_Q8_WIDE, GE_CFG_YIELD, GE_CFG_SEMANTICS,
    GE_CFG_VIDEO_TIMESTAMPS, GE_CFG_COUNT
} ge_cfg_id;

/* GE_CFG_SEMANTICS: whose numerics where they differ (docs/model.md 8): Hugging Face's
 * reference, or llama.cpp's (vision MLP quick-GELU), to match indexes built with it. */
typedef enum { GE_SEM_OFFICIAL, GE_SEM_LLAMACPP } ge_semantics;

typedef struct {
    int v[GE_CFG_COUNT];       /* values; booleans are 0/1; cpu tier: -1 auto, else ge_tier;
                                * a choice: its index in the switch's arg list */
    ge_source src[GE_CFG_COUNT];
} ge_config;

/* GE_SW_CHOICE: one of the '|'-separated names of the switch's arg, stored as its index */
typedef enum { GE_SW_BOOL, GE_SW_INT, GE_SW_TIER, GE_SW_CHOICE } ge_sw_kind;

typedef struct {
    ge_cfg_id id;
    const char *flag; /* long flag without "--"; a bool also has "--no-<flag>" */
    char short_flag;  /* or 0 */
    const char *env;  /* environment variable, or NULL */
    ge_sw_kind kind;
    int def, min, max;
    const char *arg;  /* placeholder in help ("N", "NAME") */
    const char *def_text; /* default as shown in help */
    const char *help;
    int changes_rows; /* 1: the vectors depend on it (a resumed output must not mix them) */
} ge_switch;

/* The switch table (n entries, in help order). */
const ge_switch *ge_config_switches(size_t *n);
void ge_config_defaults(ge_config *c);
/* Parse value for switch s (for a bool: NULL = on; "0/1/on/off/true/false/yes/no"), strict:
 * the whole string must parse and be in range, else GE_E_USAGE naming the switch. */
ge_status ge_config_set(ge_config *c, const ge_switch *s, const char *value, ge_source src,
                        ge_err *err);
/* Apply every switch's environment variable found by lookup (the CLI passes getenv). */
ge_status ge_config_from_env(ge_config *c, char *(*lookup)(const char *name), ge_err *err);
/* The value of switch s as text ("on", "8", "auto", "avx512"). */
const char *ge_config_value_text(const ge_config *c, const ge_switch *s, char *buf, size_t n);

/* ---- images (image.c; docs/model.md 5.1) ------------------------------------------------
 * Decoding (JPEG, PNG, WebP through the distribution's libjpeg-turbo, libpng and libwebp) to
 * 8-bit RGB as Hugging Face's load_image does it (PIL open, ImageOps.exif_transpose,
 * convert("RGB")), and the Gemma 4 image processor's steps: target size from the soft-token
 * budget, torchvision's uint8 antialiased bicubic resize, rescale to [0, 1] and 16x16
 * patches. A caller runs decode, then plan + resize + patchify; nothing here needs a model. */

#define GE_IMAGE_MAX_PIXELS ((uint64_t)64 << 20) /* default decode limit: 64 Mpx */
#define GE_IMAGE_PATCH 16                        /* patch side */
#define GE_IMAGE_PATCH_DIM (GE_IMAGE_PATCH * GE_IMAGE_PATCH * 3) /* 768 values per patch */

typedef struct {
    /* width x height over this (as stored in the file) is GE_E_LIMIT, found from the header
     * before any pixel buffer exists (decompression bombs); 0 means GE_IMAGE_MAX_PIXELS */
    uint64_t max_pixels;
} ge_image_limits;

typedef struct {
    int w, h;            /* after the EXIF orientation */
    uint8_t *rgb;        /* [h, w, 3], row-major; owned, ge_image_free releases it */
    const char *format;  /* "jpeg", "png" or "webp" (static string) */
    int orientation;     /* the EXIF orientation applied: 1 (none) .. 8 */
} ge_image;

/* Decode a whole JPEG, PNG or WebP file held in bytes[0..len) (the format comes from its
 * magic bytes) into out->rgb, PIL's convert("RGB") semantics: alpha dropped (not
 * composited), grey replicated, palette expanded, 16-bit samples reduced as PIL does (see
 * image.c), CMYK/YCCK JPEG converted as PIL does; then the EXIF orientation (tags 1-8) is
 * applied as ImageOps.exif_transpose does. lim may be NULL (defaults). Errors (out zeroed,
 * nothing leaked): GE_E_UNSUPPORTED (not one of the three formats, animated WebP, JPEG colour
 * spaces other than grey/YCbCr/RGB/CMYK/YCCK), GE_E_LIMIT (too many pixels), GE_E_FORMAT
 * (corrupt, truncated, zero-size), GE_E_NOMEM; the message names the format and cause. */
ge_status ge_image_decode(const void *bytes, size_t len, const ge_image_limits *lim,
                          ge_image *out, ge_err *err);
void ge_image_free(ge_image *img); /* frees img->rgb and zeroes img; accepts NULL */

/* docs/model.md 5.1 step 2: the resize target (th, tw) (multiples of 48) of an h x w image for a
 * soft-token budget (70, 140, 280, 560 or 1120; anything else is GE_E_USAGE), and the image's
 * soft-token count (th/48)*(tw/48). GE_E_INPUT when the image cannot be sized (a 0x0 target,
 * or more pixels than the budget allows), GE_E_USAGE when h or w < 1. Any of th, tw,
 * n_tokens may be NULL. */
ge_status ge_image_plan(int h, int w, int budget, int *th, int *tw, int *n_tokens,
                        ge_err *err);

/* Resize src [h, w, 3] into dst [th, tw, 3] exactly as torchvision's resize(...,
 * InterpolationMode.BICUBIC, antialias=True) does on a uint8 tensor (separable Keys cubic,
 * a = -0.5, int16 fixed-point taps, horizontal pass then vertical pass, each rounded and
 * clamped to uint8); a same-size axis is copied. Allocates one scratch buffer and the tap
 * tables per call (GE_E_NOMEM); GE_E_USAGE for sizes < 1. src and dst must not overlap. */
ge_status ge_image_resize(const uint8_t *src, int h, int w, uint8_t *dst, int th, int tw,
                          ge_err *err);

/* docs/model.md 5.1 steps 4-5: cut rgb [h, w, 3] (h, w multiples of 16, else GE_E_USAGE) into
 * N = (h/16)*(w/16) patches in row-major patch order: patches [N, 768] with element
 * (yy*16 + xx)*3 + c = rgb/255 in fp32, and pos [N, 2] = (x = patch column, y = patch row). */
ge_status ge_image_patchify(const uint8_t *rgb, int h, int w, float *patches, int32_t *pos,
                            ge_err *err);

/* ---- audio (audio_decode.c, audio_mel.c; docs/model.md 6.1) ---------------------------------
 * Decoding (WAV, FLAC, Ogg Vorbis/Opus, AIFF through the distribution's libsndfile, MP3
 * through libmpg123 as libsndfile uses it, AAC/M4A and WebM/Matroska audio through FFmpeg's
 * libavformat/libavcodec) to the waveform the Gemma 4 feature extractor takes, as Hugging
 * Face's load_audio gets it (librosa.load(path, sr=16000): float32 samples as libsndfile
 * scales them, channels averaged, then libsoxr at its HQ setting), cut to a maximum duration;
 * and the log-mel front end (docs/model.md 6.1) that turns it into the audio tower's input. Nothing
 * here needs a model. */

#define GE_AUDIO_RATE 16000         /* the front end's sample rate */
#define GE_AUDIO_MEL 128            /* mel bands per frame */
#define GE_AUDIO_HOP 160            /* samples between frames (10 ms) */
#define GE_AUDIO_MAX_SECONDS 30.0   /* default cut (HF's max_length = 480,000 samples) */
#define GE_AUDIO_SECONDS_CAP 3600.0 /* the largest max_seconds accepted */
#define GE_AUDIO_MAX_CHANNELS 64
#define GE_AUDIO_MIN_RATE 1000      /* sample rates outside [min, max] are GE_E_UNSUPPORTED */
#define GE_AUDIO_MAX_RATE 768000

typedef struct {
    /* keep the first max_seconds of audio: round(max_seconds * 16000) samples at 16 kHz (the
     * CLI's --audio-max-seconds); 0 means GE_AUDIO_MAX_SECONDS; over GE_AUDIO_SECONDS_CAP or
     * negative is GE_E_USAGE */
    double max_seconds;
} ge_audio_limits;

typedef struct {
    float *pcm;         /* [n] mono at 16 kHz; owned, ge_audio_free releases it */
    int64_t n;          /* >= 1 */
    const char *format; /* container: "wav", "aiff", "flac", "ogg", "mp3", "mp4", "matroska",
                         * ... (static string) */
    const char *codec;  /* "pcm_s16", "float", "vorbis", "opus", "mp3", "aac", ... (static) */
    int rate, channels; /* as stored in the file */
    int truncated;      /* 1: the audio was longer than max_seconds and was cut there */
} ge_audio;

/* Decode a whole audio file held in bytes[0..len) into out->pcm: 16 kHz mono float.
 * The reader comes from the magic bytes: MP4/M4A/MOV, Matroska/WebM and ADTS AAC go to FFmpeg,
 * MPEG audio (MP3) to libmpg123 set up as libsndfile sets it up, everything else to
 * libsndfile, and what libsndfile cannot open to FFmpeg when it is confidently one of FFmpeg's
 * audio formats. Samples are float32 as libsndfile gives them (integers scaled by
 * 2^-(bits-1), 8-bit unsigned centred first), the
 * channels averaged, and, unless the file is at 16 kHz already, resampled with libsoxr
 * (SOXR_HQ) to ceil(frames * 16000 / rate) samples (librosa's length). Only the part within
 * lim->max_seconds is decoded. lim may be NULL (defaults). Errors (out zeroed, nothing
 * leaked, nothing printed): GE_E_FORMAT (corrupt, truncated -- the header promises more data
 * than the file holds -- empty, no samples, a non-finite sample), GE_E_UNSUPPORTED (not an
 * audio format read here, no audio stream, no decoder for the codec, a sample rate outside
 * [GE_AUDIO_MIN_RATE, GE_AUDIO_MAX_RATE] or changing mid-stream), GE_E_LIMIT (more than
 * GE_AUDIO_MAX_CHANNELS channels), GE_E_USAGE (bad lim), GE_E_NOMEM; the message names the
 * format and the cause. Thread-safe: files may be decoded on several threads at once. */
ge_status ge_audio_decode(const void *bytes, size_t len, const ge_audio_limits *lim,
                          ge_audio *out, ge_err *err);
void ge_audio_free(ge_audio *a); /* frees a->pcm and zeroes a; accepts NULL */

/* docs/model.md 6.1: the number of feature frames of n samples, and in *n_valid (may be NULL) how
 * many of them are real audio (the rest are zeros, masked out). With P = n rounded up to a
 * multiple of 128:
 *   official: (P + 160 - 321) / 160 + 1 frames when P + 160 >= 321, else 0 (HF's unfold gives
 *             none); valid (n - 1) / 160 when n >= 161, else 0. So a clip of 128 samples
 *             (8 ms) or less has no frame, 129..160 samples one frame that is masked out,
 *             1 s = 99 frames (all valid), 7.3 s = 730 (729 valid), 30 s = 2999 (all valid).
 *   llamacpp: llama.cpp's count (no padding to 128, no mask): (n - 1) / 160 frames when
 *             n >= 161; one frame for 2..160 samples (the clip zero-padded); none for 0 or 1
 *             (llama.cpp rejects those); all valid.
 * Integer division; n < 0 gives 0. */
int64_t ge_audio_frames(int64_t n, ge_semantics sem, int64_t *n_valid);

/* Something that runs fn(ctx, task, worker) for every task < n_tasks, on any number of
 * threads, and returns when all are done (a pool's parallel-for). */
typedef void (*ge_task_fn)(void *ctx, int64_t task, int worker);
typedef struct {
    void (*run)(void *pool, int64_t n_tasks, ge_task_fn fn, void *ctx);
    void *pool;
} ge_runner;

/* The log-mel features of pcm[0..n) (16 kHz mono, used as given: truncation is the
 * decoder's job) into feat [ge_audio_frames(n, sem)][128], float32 (docs/model.md 6.1): 160 zeros
 * in front (semicausal), 320-sample frames at hop 160 times a periodic Hann window, 512-point
 * FFT magnitude, 128 HTK mel bands over 0-8000 Hz, in double precision;
 *   official: ln(mel + 0.001), the frames past the valid ones (see ge_audio_frames) zeros;
 *   llamacpp: ln(max(mel, 0.001)), every frame computed.
 * (llama.cpp also cuts audio longer than 30 s into 30 s chunks and runs the front end on each
 * one: a caller that wants that calls this once per chunk.) Frames are computed in blocks
 * through runner (NULL: on this thread); the output is the same bytes whatever the runner or
 * its thread count. GE_E_USAGE for n < 0 or a NULL pointer; GE_E_LIMIT for more than
 * GE_AUDIO_SECONDS_CAP seconds. No allocation. */
ge_status ge_audio_features(const float *pcm, int64_t n, ge_semantics sem, float *feat,
                            const ge_runner *runner, ge_err *err);

/* ---- video (video_decode.c; docs/model.md 7) ---------------------------------------------
 * Decoding (MP4/MOV, Matroska/WebM, AVI through FFmpeg's libavformat/libavcodec, frames to
 * RGB24 through libswscale), the reference's frame sampling (1 fps, at most 32 frames chosen
 * uniformly) and the per-frame preprocessing of images (docs/model.md 5.1) at one target size
 * computed once per video. Nothing here needs a model. */

#define GE_VIDEO_FPS 1.0             /* default sampling rate (--video-fps) */
#define GE_VIDEO_MAX_FRAMES 32       /* default frame cap (--video-frames) */
#define GE_VIDEO_FRAMES_CAP 1024     /* the largest max_frames accepted */
#define GE_VIDEO_TOKENS 140          /* default soft-token budget per frame (--video-tokens) */
#define GE_VIDEO_MAX_SIDE 16384      /* a frame wider or taller is GE_E_LIMIT */
/* a frame with more pixels is GE_E_LIMIT: the images' limit (a decoded picture either way;
 * an 80 Mpx frame took 17 s in the instrumented fuzzer) */
#define GE_VIDEO_MAX_PIXELS ((int64_t)GE_IMAGE_MAX_PIXELS)

typedef enum {
    GE_VIDEO_SEEK_AUTO = 0, /* seek to a keyframe when one lies between the last decoded frame
                             * and the next wanted one, else decode forward */
    GE_VIDEO_SEEK_NEVER,    /* decode every frame from the start (the tests' reference) */
    GE_VIDEO_SEEK_ALWAYS,   /* seek before every wanted frame (tests) */
} ge_video_seek;

struct ge_video;
typedef struct {
    double fps;     /* frames sampled per second of video; 0 means GE_VIDEO_FPS; (0, 1000] */
    int max_frames; /* 0 means GE_VIDEO_MAX_FRAMES; 1..GE_VIDEO_FRAMES_CAP */
    int tokens;     /* soft-token budget per frame: 70, 140, 280, 560, 1120; 0 means
                     * GE_VIDEO_TOKENS */
    int seek;       /* ge_video_seek: how frames are reached; the frames are the same */
    int raw;        /* 1: frames at the source size, not resized (tests; th, tw = h, w) */
    /* Called with the plan (n, index, seconds, the source h x w and th, tw, n_soft) before
     * any memory for the frames exists: once from the frame size in the stream's header (when
     * it gives one) before any frame is decoded, and again from the first decoded frame. A
     * status other than GE_OK ends the decode with it (the message is the check's). NULL: no
     * check. The CLI refuses there a video that cannot fit the model's context. */
    ge_status (*check)(void *ctx, const struct ge_video *plan, ge_err *err);
    void *check_ctx;
    int plan_only;  /* 1: stop once the plan is known (the first frame decoded for its size):
                     * everything but rgb, which stays NULL (--tokenize) */
} ge_video_limits;

typedef struct ge_video {
    int n;                /* sampled frames, 1..max_frames */
    int th, tw;           /* frame size after the resize (multiples of 48 unless raw) */
    int n_soft;           /* soft tokens per frame: (th/48)*(tw/48) (0 when raw) */
    uint8_t *rgb;         /* [n][th][tw][3]; owned */
    int64_t *index;       /* [n] frame index of each sampled frame (presentation order) */
    double *seconds;      /* [n] its timestamp, index / fps (HF's metadata.timestamps; the
                           * "MM:SS " prefixes of docs/model.md 2.3) */
    int h, w;             /* source frame size (as decoded: the rotation is not applied) */
    double fps;           /* source frame rate F: frames / duration */
    double duration;      /* D in seconds: from the first frame's start to the last one's end */
    int64_t frames;       /* total frames in the stream */
    int rotation;         /* the stream's display rotation, counterclockwise degrees as
                           * ffprobe reports it (0, 90, 180, 270), not applied (see
                           * video_decode.c) */
    const char *format;   /* "mp4", "mov", "matroska", "webm", "avi" (static) */
    const char *codec;    /* "h264", "vp9", "mpeg4", ... (static) */
} ge_video;

/* The reference's frame choice (HF EmbeddingGemma2VideoProcessor.sample_frames, docs/model.md 7):
 * n = max(1, floor(duration * fps)); idx_i = min(frames - 1, floor(i * (src_fps / fps)));
 * when n > max_frames, idx[floor(linspace(0, n - 1, max_frames))]. Writes min(n, max_frames)
 * indices to idx (room for max_frames) and returns how many; -1 for a bad argument (frames
 * < 1, fps or src_fps not > 0, duration not finite or < 0, max_frames < 1). */
int ge_video_sample(double duration, double src_fps, int64_t frames, double fps, int max_frames,
                    int64_t *idx);

/* Decode the video file held in bytes[0..len): its first video stream's metadata, the
 * sampled frames (ge_video_sample on that metadata) converted to RGB24 and resized as images
 * are (ge_image_plan at lim->tokens for the source size, then ge_image_resize). lim may be
 * NULL (defaults). Errors (out zeroed, nothing leaked, nothing printed): GE_E_FORMAT (empty,
 * corrupt, truncated, no frames, zero duration, a sampled frame that does not decode),
 * GE_E_UNSUPPORTED (not one of the containers, no video stream, no decoder, the frame size
 * changes), GE_E_LIMIT (a side over GE_VIDEO_MAX_SIDE or more than GE_VIDEO_MAX_PIXELS
 * pixels), GE_E_INPUT (a frame shape ge_image_plan cannot size), GE_E_USAGE (bad
 * lim), GE_E_NOMEM; the message names the format and the cause.
 * Thread-safe; FFmpeg decodes on the calling thread only. */
ge_status ge_video_decode(const void *bytes, size_t len, const ge_video_limits *lim,
                          ge_video *out, ge_err *err);
void ge_video_free(ge_video *v); /* frees v's arrays and zeroes v; accepts NULL */

/* ---- model ----------------------------------------------------------------------------- */

typedef struct ge_model ge_model;

/* Open and validate a gemma-embedding2 GGUF text model (mmap, read-only, zero-copy).
 * Every hyperparameter comes from metadata; every tensor's name, type and shape is
 * checked. cfg (NULL = defaults) selects threads, kernel tier and fast paths; a forced tier
 * the CPU cannot run is GE_E_USAGE. On failure *out is NULL and err names the file, the
 * tensor and the cause. */
ge_status ge_model_open(ge_model **out, const char *path, const ge_config *cfg, ge_err *err);
/* What cfg selects on this machine, without a model (for --print-config): the kernel tier
 * name, the pool size, and one line on the CPU (features, topology) in cpu[0..n). A forced
 * tier the CPU cannot run is GE_E_USAGE. */
ge_status ge_compute_plan(const ge_config *cfg, const char **tier, int *threads, char *cpu,
                          size_t n, ge_err *err);
void ge_model_free(ge_model *m); /* accepts NULL */
/* GE_E_IO naming the file when one of the model's files was cut short on disk while in use
 * (see ge_mapping_fault): results computed since then must not be written. */
ge_status ge_model_files_check(const ge_model *m, ge_err *err);

int ge_model_dim(const ge_model *m);         /* output width E (768 for the real model) */
int ge_model_max_tokens(const ge_model *m);  /* context limit per record (8192) */
const char *ge_model_describe(const ge_model *m); /* one line: layers, widths, vocab, types */

/* ---- prompts (docs/model.md 2.2) ------------------------------------------------------- */

/* The prefix string of a prompt name ("query", "document", "STS", ...; case-insensitive),
 * or NULL when the name is unknown. */
const char *ge_prompt_find(const char *name);
/* NULL-terminated list of the canonical prompt names, for --help. */
const char *const *ge_prompt_names(void);

/* ---- modalities (modality.c): one row per kind of record item ----------------------------- */

typedef enum { GE_KIND_TEXT, GE_KIND_IMAGE, GE_KIND_AUDIO, GE_KIND_VIDEO, GE_KIND_COUNT } ge_kind;

/* How a kind of item enters the token sequence (docs/model.md 2.3-2.4): a media item is one block,
 * open + soft x n_soft + close, per image, clip or video frame. */
typedef struct {
    const char *name;   /* "image": its record key and content item type */
    const char *plural; /* "images" */
    const char *soft;   /* the soft token's placeholder piece ("<|image|>"); NULL for text */
    const char *open, *close; /* the pieces around a block */
    const char *tower;  /* what an item needs without --mmproj ("images need a vision tower") */
    int budget;         /* default soft tokens per image or frame (0: set by the clip's length) */
} ge_modality;
const ge_modality *ge_modality_of(ge_kind kind); /* kind < GE_KIND_COUNT */

/* Soft-token budgets an image or a video frame may take (the Gemma 4 image processor's
 * max_soft_tokens), and the image default (a video frame's is GE_VIDEO_TOKENS): ge_budget(i)
 * for i = 0, 1, ... until it returns 0; ge_budget_list writes them joined by sep. */
#define GE_BUDGETS "70|140|280|560|1120"
#define GE_IMAGE_TOKENS 280
int ge_budget(int i);
bool ge_budget_valid(int n);
const char *ge_budget_list(const char *sep, char *buf, size_t n);

/* ---- tokenizer ------------------------------------------------------------------------- */

typedef struct {
    int32_t *ids;
    size_t n, cap;
} ge_tokens;

/* Tokenize prefix+text (prefix may be NULL) exactly as the encoder sees it: <bos> and <eos>
 * added when the model's metadata asks for them. text must be valid UTF-8, and the result
 * must hold no media placeholder (<|image|>, <|audio|>, <|video|>): GE_E_INPUT otherwise,
 * with out unchanged. Appends to out (which starts zeroed or cleared with out->n = 0). */
ge_status ge_tokenize(const ge_model *m, const char *prefix, const char *text, size_t len,
                      ge_tokens *out, ge_err *err);
/* ge_tokenize's tokens of prefix+text (with <bos> and <eos>) into out (emptied first), and
 * for each token i
 * the byte of the joined string prefix+text where it ends in (*ends)[i] (malloc'd; the <bos>
 * ends at 0, the <eos> at the string's end) and (*mid)[i], true when that end falls inside a
 * character (a byte piece). The arrays are freed by the caller. */
ge_status ge_tokenize_spans(const ge_model *m, const char *prefix, const char *text, size_t len,
                            ge_tokens *out, size_t **ends, bool **mid, ge_err *err);

/* The tokens ge_tokenize adds around a record: 1 or 0 for <bos> (first) and <eos> (last). */
void ge_tokens_frame(const ge_model *m, size_t *bos, size_t *eos);

/* A passage of a long text (--chunk, --late-chunk): tokens [tok_lo, tok_hi) of the text's
 * own tokens and the bytes [lo, hi) of the text they cover. */
typedef struct {
    size_t tok_lo, tok_hi, lo, hi;
} ge_passage;

/* The passages of a text of n tokens ending at ends[i] (bytes of text; mid[i]: inside a
 * character): windows of at most budget tokens, overlapping by overlap tokens, each cut at the
 * last sentence end in its last tenth, else its last whitespace there, else its last token
 * end, never inside a character (engine/chunk.c). *out is malloc'd. GE_E_USAGE when overlap
 * >= budget, GE_E_NOMEM. */
ge_status ge_chunk_plan(const char *text, size_t len, const size_t *ends, const bool *mid,
                        size_t n, size_t budget, size_t overlap, ge_passage **out,
                        size_t *n_out);

/* A window of a long text's tokens [lo, hi) for --late-chunk: one pass of the model. */
typedef struct {
    size_t lo, hi;
} ge_window;

/* --late-chunk: the windows of at most `room` tokens that the passages p[0..np) of a text of
 * n tokens are pooled from, and for each passage its window (window_of[i], room for np): one
 * window when the text fits; else windows every room - L tokens (L: the longest passage), so
 * that each passage lies whole in one, or, when that step is under a quarter of the room, one
 * window per passage centred on it; each passage takes the window that holds it with the
 * most context on its shorter side (the text's own ends count as unlimited; ties: the first).
 * *out is malloc'd. GE_E_USAGE when a passage is longer than room, GE_E_NOMEM. */
ge_status ge_chunk_windows(size_t n, size_t room, const ge_passage *p, size_t np,
                           ge_window **out, size_t *n_out, size_t *window_of);

/* One part of a record with media, in order: a text, or a media block of n_soft soft tokens
 * (GE_KIND_VIDEO: one frame of a video). */
typedef struct {
    ge_kind kind;
    const char *text; /* GE_KIND_TEXT: UTF-8 */
    size_t len;
    int n_soft;       /* media: its soft-token count */
} ge_part;

/* Tokenize a record of parts as the Sentence Transformers template lays it out (docs/model.md 2.3):
 * <bos>, prefix and the parts in order as one string (adjacent texts merge under BPE), each
 * media item as its block: <|image> + <|image|> x n_soft + <image|> (audio: <|audio> ...
 * <audio|>; a video frame: <|image> + <|video|> x n_soft + <image|>), then <eos>. The texts
 * themselves may hold no media placeholder (GE_E_INPUT). Appends to out. */
ge_status ge_tokenize_parts(const ge_model *m, const char *prefix, const ge_part *parts,
                            size_t n, ge_tokens *out, ge_err *err);
/* Cut a tokenized record to at most max tokens, keeping the final <eos> when present. */
void ge_tokens_truncate(const ge_model *m, ge_tokens *t, size_t max);
void ge_tokens_free(ge_tokens *t); /* frees ids; accepts NULL */

/* ---- embedding ------------------------------------------------------------------------- */

/* Embed one token sequence: out receives the L2-normalised [ge_model_dim] vector.
 * GE_E_LIMIT when n > ge_model_max_tokens; GE_E_INPUT for an id outside the vocabulary. */
ge_status ge_embed(ge_model *m, const int32_t *ids, size_t n, float *out, ge_err *err);

/* Embed n token sequences (ids[i] of lens[i] tokens) into out [n][ge_model_dim]; short ones
 * share packed waves (--wave-tokens). The vectors equal those of n ge_embed calls, bit for
 * bit. On failure err names the sequence. */
ge_status ge_embed_batch(ge_model *m, const int32_t *const *ids, const size_t *lens, size_t n,
                         float *out, ge_err *err);

/* Media soft tokens of one sequence: rows [n][ge_model_hidden] that replace its media
 * placeholder tokens (<|image|>, <|audio|>, <|video|>), in sequence order, as they are
 * (text rows are scaled by sqrt(hidden); media rows are not, docs/model.md 2.4). */
typedef struct {
    const float *rows;
    size_t n;
} ge_media_rows;

/* ge_embed_batch for sequences that may hold media placeholders: media[i] (or media == NULL
 * for none) gives sequence i's rows. GE_E_INPUT when a sequence's placeholder count differs
 * from its row count (ge_embed_batch: when it has any placeholder). */
ge_status ge_embed_batch_media(ge_model *m, const int32_t *const *ids, const size_t *lens,
                               const ge_media_rows *media, size_t n, float *out, ge_err *err);
/* A span of tokens [lo, hi) of sequence seq, pooled into a vector of its own. */
typedef struct {
    size_t seq, lo, hi;
} ge_span;
/* ge_embed_batch_media, but out [n_spans][ge_model_dim] receives for each span the
 * L2-normalised mean of the sequence's per-token outputs over it (after the final norm and
 * the output projection; --late-chunk), in one pass over each sequence. spans must be in
 * sequence order; spans NULL means every sequence whole (n_spans = n: ge_embed_batch_media,
 * bit for bit). GE_E_USAGE for an empty span or one out of its sequence. */
ge_status ge_embed_spans(ge_model *m, const int32_t *const *ids, const size_t *lens,
                         const ge_media_rows *media, size_t n, const ge_span *spans,
                         size_t n_spans, float *out, ge_err *err);
/* The text model's hidden width (the width of media rows). */
int ge_model_hidden(const ge_model *m);

/* ---- media towers (mmproj files) --------------------------------------------------------- */

/* Take the media towers from the mmproj files paths[0..n) (n <= 2): the vision tower is
 * opened and checked when the first image needs it, from the first file that has one (a
 * combined vision + audio file, or a vision file beside an audio file in either order; a
 * failure then fails every image record with the same message), or now with --prepack (which
 * fails only for a damaged file: with no vision encoder at all, image records fail). */
ge_status ge_model_set_mmproj(ge_model *m, const char *const *paths, int n, ge_err *err);
/* Soft tokens of one preprocessed image (see ge_image_patchify): patches [pw * ph][768] in
 * [0, 1], positions pos[2 t] = x, pos[2 t + 1] = y; rows gets (pw / 3) * (ph / 3) rows of
 * ge_model_hidden values. --media-fast picks the fast tower, else the reference tower.
 * GE_E_USAGE when no mmproj was given. */
ge_status ge_model_encode_image(ge_model *m, const float *patches, const int32_t *pos, int pw,
                                int ph, float *rows, ge_err *err);
/* With --yield, an image's tower calls fn(ctx) between its layers; fn may embed text on the
 * same model (ge_embed_batch_media) but not encode another image. fn NULL: no calls. */
typedef struct {
    void (*fn)(void *ctx);
    void *ctx;
} ge_yield;
void ge_model_set_yield(ge_model *m, ge_yield y);
/* ge_audio_features on the model's compute pool, with the model's --semantics. */
ge_status ge_model_audio_features(ge_model *m, const float *pcm, int64_t n, float *feat,
                                  ge_err *err);
/* Soft tokens of an audio clip of n samples (16 kHz mono) under the model's --semantics:
 * (L + 3) / 4 for its L valid feature frames (docs/model.md 6.1, ge_audio_frames). 0 when the clip
 * is too short for one valid frame (officially under 161 samples, about 10 ms): such a clip
 * is an error record, not an empty audio block. */
int64_t ge_model_audio_tokens(const ge_model *m, int64_t n);
/* The most samples (0..cap) of a clip whose soft tokens fit in `tokens`. */
int64_t ge_model_audio_fit(const ge_model *m, int64_t tokens, int64_t cap);
/* GE_OK when a clip of n samples gives at least one soft token, else GE_E_INPUT "too short"
 * naming the shortest clip that would (under the model's --semantics). */
ge_status ge_model_audio_check(const ge_model *m, int64_t n, ge_err *err);
/* Soft tokens of one clip pcm[0..n) (16 kHz mono, already cut to --audio-max-seconds): the
 * front end on the pool, then the audio tower of the first mmproj that has one (--media-fast:
 * the fast path, else the reference), with the --yield hook between its layers. rows gets
 * ge_model_audio_tokens(m, n) rows of ge_model_hidden values. GE_E_USAGE without --mmproj;
 * GE_E_UNSUPPORTED with GE_NO_AUDIO_ENCODER in the message when no mmproj has an audio tower;
 * GE_E_INPUT for a clip too short for one token. */
ge_status ge_model_encode_audio(ge_model *m, const float *pcm, int64_t n, float *rows,
                                ge_err *err);
#define GE_NO_AUDIO_ENCODER "no audio encoder"
/* Free the media towers' workspaces (kept between items; the next item grows them again). */
void ge_model_trim(ge_model *m);

/* Where the time went, for --bench: per phase (the text encoder, the vision tower, the audio
 * tower) and kind of operation, the wall time since the last reset and the
 * multiply-accumulates done. A text wave run between two tower layers (--yield) counts
 * under text. */
typedef enum {
    GE_OP_Q8_GEMM, GE_OP_KQ_GEMM, GE_OP_SGEMM, GE_OP_LINEAR_REF, GE_OP_QUANTIZE, GE_OP_ATTENTION,
    GE_OP_NORM, GE_OP_OTHER, GE_OP_COUNT
} ge_op;
typedef enum { GE_PHASE_TEXT, GE_PHASE_VISION, GE_PHASE_AUDIO, GE_PHASE_COUNT } ge_phase;
typedef struct {
    double seconds[GE_OP_COUNT];
    double macs[GE_OP_COUNT];
    unsigned long long calls[GE_OP_COUNT];
} ge_op_stats;
typedef struct {
    ge_op_stats ops[GE_PHASE_COUNT];
    double forward_seconds; /* all of ge_embed / ge_embed_batch */
    double pool_seconds;    /* of which the head: final norm, mean pooling, projection, L2 */
    unsigned long long tokens, sequences, waves;
    double vision_seconds;      /* ge_model_encode_image, less the text it yielded to */
    unsigned long long images;
    double audio_seconds;       /* ge_model_encode_audio (front end + tower), less yields */
    unsigned long long clips;
    double audio_in_seconds;    /* duration of the audio encoded (samples / 16000) */
} ge_stats;
const char *ge_op_name(ge_op op);
/* Monotonic seconds: the clock of the stats (and of the CLI's timings, so both agree). */
double ge_now(void);
void ge_model_stats(const ge_model *m, ge_stats *out);
void ge_model_stats_reset(ge_model *m);
/* This machine's measured peak for the model's tier, one thread, in GMAC/s: the int8 dot
 * instruction (0 when the tier has none) and fp32 FMA, each the best of three runs of
 * seconds / 3. Takes about 2 x seconds. */
void ge_model_peak(const ge_model *m, double seconds, double *int8, double *fp32);
/* The weight types of one model file (the text model's or an mmproj's): per type its
 * matrices (tensors of 2 or more dims) and their bytes, and the kernel that multiplies by
 * such a matrix on m's tier and switches; vectors (norms, scales) under type F32 with no
 * kernel. *n entries are written (at most max), in order of first appearance. */
typedef struct {
    uint32_t type;
    const char *name;  /* "Q4_K" */
    int matrices, vectors;
    uint64_t bytes;
    char kernel[64];   /* "" for vectors only */
} ge_weight_type;
ge_status ge_model_file_types(const ge_model *m, const char *path, ge_weight_type *out,
                              int max, int *n, ge_err *err);
/* The kernel tier in use and the pool size. */
const char *ge_model_tier(const ge_model *m);
int ge_model_threads(const ge_model *m);

/* ---- media items (item.c): decode and plan, lay out, encode ------------------------------
 * A record's image, audio clip or video, in the three steps a pipeline runs on it: decode
 * (bytes to pixels or samples, sized for its soft-token count, checked against the context
 * before the big buffers exist), its parts for ge_tokenize_parts, and the tower's rows. */

typedef struct {
    ge_kind kind;
    int n_soft;        /* soft tokens per block (image, clip or frame) */
    int n_frames;      /* blocks: a video's sampled frames, else 1 */
    int th, tw;        /* image, frames: the size they were resized to */
    uint8_t *rgb;      /* [n_frames][th][tw][3] (NULL with counts_only) */
    float *pcm;        /* [n_pcm] the clip, 16 kHz mono (NULL with counts_only) */
    int64_t n_pcm;
    double *seconds;   /* [n_frames] a video frame's timestamp */
} ge_item;

typedef struct {
    int image_tokens;         /* soft-token budget per image (ge_budget_valid) */
    double audio_max_seconds; /* a clip is cut there, as Hugging Face's extractor cuts it */
    ge_video_limits video;    /* sampling and budget per frame (check, plan_only: set here) */
    bool counts_only;         /* plan the counts, keep no pixels or samples (--tokenize) */
    bool timestamps;          /* video: "MM:SS " before each frame's block */
} ge_item_opts;

/* The caller's context check, called once an item's size is known (a video: before any
 * frame memory exists) with its tokens (blocks and their pieces); it returns GE_OK or the
 * error that fails the item. over: the item cannot fit whatever its size (a clip cut short
 * at the room below). room: tokens the item may still take; SIZE_MAX for no limit. */
typedef struct {
    size_t room;
    ge_status (*spend)(void *ctx, size_t tokens, bool over, ge_err *err);
    void *ctx;
} ge_item_budget;

/* Decode bytes[0..len) as an item of it->kind (image, audio or video), resize or cut it and
 * count its soft tokens (the model's audio front end sets a clip's). by_streams: a container
 * whose kind comes from its streams (a video item with only sound becomes an audio item).
 * On error the item holds what was counted (for the caller's message) and no buffers. */
ge_status ge_item_decode(const ge_model *m, ge_item *it, const void *bytes, size_t len,
                         bool by_streams, const ge_item_opts *o, const ge_item_budget *b,
                         ge_err *err);
/* The item's parts for ge_tokenize_parts, written to parts (room for ge_item_parts(it, o,
 * NULL, NULL)) with the text of a timestamp part i in ts + 9 i (room for 9 bytes a part);
 * returns how many. */
size_t ge_item_parts(const ge_item *it, const ge_item_opts *o, ge_part *parts, char *ts);
size_t ge_item_rows(const ge_item *it);  /* soft-token rows it adds to the record */
size_t ge_item_bytes(const ge_item *it); /* bytes of pixels and samples it holds */
/* Its soft tokens through the towers into rows [ge_item_rows][ge_model_hidden]; on an error
 * *frame gets the 1-based frame of a video that failed (else 0). Frees the pixels and
 * samples (the item keeps its counts). */
ge_status ge_item_encode(ge_model *m, ge_item *it, float *rows, int *frame, ge_err *err);
void ge_item_free(ge_item *it); /* buffers freed, counts kept; accepts NULL */

/* Matryoshka: keep the first dim entries of an embedding and L2-normalise them again. */
void ge_matryoshka(float *v, int dim);

/* float32 to binary16, rounded to nearest, ties to even, and back (exact) (kernels/dtype.c;
 * the outputs' --precision float16). */
uint16_t ge_fp32_to_fp16(float f);
float ge_fp16_to_fp32(uint16_t h);

#endif
