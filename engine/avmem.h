/* avmem.h - what audio_decode.c and video_decode.c share to read a file held in memory with
 * FFmpeg's libavformat: a quiet log, the probe, the AVIOContext over the bytes, and error
 * text. Internal to engine/ (cli/ includes only ge.h). Nothing here prints. */
#ifndef GE_AVMEM_H
#define GE_AVMEM_H

#include <stddef.h>
#include <stdint.h>

/* every FFmpeg header the engine uses: the redirections below must follow them all */
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/display.h>
#include <libavutil/log.h>
#include <libavutil/pixdesc.h>
#include <libswscale/swscale.h>

#include "ge.h"

/* FFmpeg's libraries are loaded on the first media decode (dlopen of the sonames these
 * headers were built for), not at process start: linked, they pulled in 120 more shared
 * objects (codecs, X11, cairo...) whose relocation cost every run 40 ms, texts and
 * --version included. The functions the engine calls, by library: */
#define GE_AV_FUNCS(X)                                                                     \
    X(avutil, av_dict_get) X(avutil, av_display_rotation_get) X(avutil, av_frame_alloc)    \
    X(avutil, av_frame_free) X(avutil, av_frame_unref) X(avutil, av_free)                  \
    X(avutil, av_freep) X(avutil, av_get_packed_sample_fmt) X(avutil, av_get_pix_fmt_name) \
    X(avutil, av_get_sample_fmt_name) X(avutil, av_log_set_callback) X(avutil, av_malloc)  \
    X(avutil, av_mallocz) X(avutil, av_sample_fmt_is_planar) X(avutil, av_strerror)        \
    X(avcodec, av_packet_alloc) X(avcodec, av_packet_free) X(avcodec, av_packet_unref)     \
    X(avcodec, avcodec_alloc_context3) X(avcodec, avcodec_find_decoder)                    \
    X(avcodec, avcodec_flush_buffers) X(avcodec, avcodec_free_context)                     \
    X(avcodec, avcodec_get_name) X(avcodec, avcodec_open2)                                 \
    X(avcodec, avcodec_parameters_to_context) X(avcodec, avcodec_receive_frame)            \
    X(avcodec, avcodec_send_packet) X(avformat, av_find_best_stream)                       \
    X(avformat, av_probe_input_format3) X(avformat, av_read_frame)                         \
    X(avformat, av_seek_frame) X(avformat, av_stream_get_side_data)                        \
    X(avformat, avformat_alloc_context) X(avformat, avformat_close_input)                  \
    X(avformat, avformat_find_stream_info) X(avformat, avformat_open_input)                \
    X(avformat, avio_alloc_context) X(avformat, avio_context_free)                         \
    X(swscale, sws_freeContext) X(swscale, sws_getCachedContext)                           \
    X(swscale, sws_getCoefficients) X(swscale, sws_getColorspaceDetails)                   \
    X(swscale, sws_scale) X(swscale, sws_setColorspaceDetails)

#define GE_AV_MEMBER(lib, f) __typeof__(f) *f;
struct ge_av_api {
    GE_AV_FUNCS(GE_AV_MEMBER)
};
#undef GE_AV_MEMBER
extern struct ge_av_api ge_av; /* filled by ge_av_quiet before any decode */

/* From here on the engine's calls go through the table (same names, same arguments). A name
 * listed above but not here would reach the unlinked library (a link error); one here but
 * not above, a missing member (a compile error). */
#define av_dict_get ge_av.av_dict_get
#define av_display_rotation_get ge_av.av_display_rotation_get
#define av_frame_alloc ge_av.av_frame_alloc
#define av_frame_free ge_av.av_frame_free
#define av_frame_unref ge_av.av_frame_unref
#define av_free ge_av.av_free
#define av_freep ge_av.av_freep
#define av_get_packed_sample_fmt ge_av.av_get_packed_sample_fmt
#define av_get_pix_fmt_name ge_av.av_get_pix_fmt_name
#define av_get_sample_fmt_name ge_av.av_get_sample_fmt_name
#define av_log_set_callback ge_av.av_log_set_callback
#define av_malloc ge_av.av_malloc
#define av_mallocz ge_av.av_mallocz
#define av_sample_fmt_is_planar ge_av.av_sample_fmt_is_planar
#define av_strerror ge_av.av_strerror
#define av_packet_alloc ge_av.av_packet_alloc
#define av_packet_free ge_av.av_packet_free
#define av_packet_unref ge_av.av_packet_unref
#define avcodec_alloc_context3 ge_av.avcodec_alloc_context3
#define avcodec_find_decoder ge_av.avcodec_find_decoder
#define avcodec_flush_buffers ge_av.avcodec_flush_buffers
#define avcodec_free_context ge_av.avcodec_free_context
#define avcodec_get_name ge_av.avcodec_get_name
#define avcodec_open2 ge_av.avcodec_open2
#define avcodec_parameters_to_context ge_av.avcodec_parameters_to_context
#define avcodec_receive_frame ge_av.avcodec_receive_frame
#define avcodec_send_packet ge_av.avcodec_send_packet
#define av_find_best_stream ge_av.av_find_best_stream
#define av_probe_input_format3 ge_av.av_probe_input_format3
#define av_read_frame ge_av.av_read_frame
#define av_seek_frame ge_av.av_seek_frame
#define av_stream_get_side_data ge_av.av_stream_get_side_data
#define avformat_alloc_context ge_av.avformat_alloc_context
#define avformat_close_input ge_av.avformat_close_input
#define avformat_find_stream_info ge_av.avformat_find_stream_info
#define avformat_open_input ge_av.avformat_open_input
#define avio_alloc_context ge_av.avio_alloc_context
#define avio_context_free ge_av.avio_context_free
#define sws_freeContext ge_av.sws_freeContext
#define sws_getCachedContext ge_av.sws_getCachedContext
#define sws_getCoefficients ge_av.sws_getCoefficients
#define sws_getColorspaceDetails ge_av.sws_getColorspaceDetails
#define sws_scale ge_av.sws_scale
#define sws_setColorspaceDetails ge_av.sws_setColorspaceDetails

/* Once per process: load the libraries and route FFmpeg's log to a callback that keeps the
 * last error line of each thread (for ge_av_why) and prints nothing. Also clears this
 * thread's last line. Call it at the start of every decode; GE_OK, or GE_E_UNSUPPORTED
 * naming the library that could not be loaded (what: "video", "audio", "media"). */
ge_status ge_av_quiet(const char *what, ge_err *err);

/* The demuxer FFmpeg's probe picks for the first MiB of p[0..len), and its score in *score
 * (NULL when nothing matches; *score 0). */
const AVInputFormat *ge_av_probe(const uint8_t *p, size_t len, int *score);

/* An input read from memory: the bytes, the read position, and the demuxer over them. The
 * struct must stay where it is while open (the AVIOContext points at it). */
typedef struct {
    const uint8_t *p;
    size_t n, at;
    AVIOContext *io;
    AVFormatContext *fc; /* NULL until ge_av_open succeeds */
} ge_av_input;

/* Open p[0..len) with demuxer ifmt (NULL: probe) through a custom AVIOContext; a demuxer
 * that tries to open another file or URL (playlists, references) is refused. Returns 0 or a
 * negative AVERROR; on failure everything is released. ge_av_close accepts a closed input. */
int ge_av_open(ge_av_input *in, const uint8_t *p, size_t len, const AVInputFormat *ifmt);
void ge_av_close(ge_av_input *in);

/* "<av_strerror(ret)>; FFmpeg: <the last error line FFmpeg logged on this thread>" (or the
 * first part alone) in buf[0..n), returned. */
const char *ge_av_why(char *buf, size_t n, int ret);

#endif
