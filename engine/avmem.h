/* avmem.h - what audio_decode.c and video_decode.c share to read a file held in memory with
 * FFmpeg's libavformat: a quiet log, the probe, the AVIOContext over the bytes, and error
 * text. Internal to engine/ (cli/ includes only ge.h). Nothing here prints. */
#ifndef GE_AVMEM_H
#define GE_AVMEM_H

#include <stddef.h>
#include <stdint.h>

#include <libavformat/avformat.h>

/* Once per process: FFmpeg's log goes to a callback that keeps the last error line of each
 * thread (for ge_av_why) and prints nothing. Also clears this thread's last line: call it at
 * the start of every decode. */
void ge_av_quiet(void);

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
