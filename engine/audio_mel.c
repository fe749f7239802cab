/* audio_mel.c - the audio tower's input: log-mel features of 16 kHz mono audio (docs/model.md 6.1,
 * Hugging Face's Gemma4AudioFeatureExtractor), in double precision.
 *
 * For n samples x[0..n), with the frame count and valid frames of ge_audio_frames:
 *   - padded signal xp[t] = x[t - 160] (160 zeros in front, the "semicausal" padding; zeros
 *     past the end stand for both HF's right padding to a multiple of 128 and llama.cpp's);
 *   - frame i: xp[160 i + j] * w[j] for j < 320, zero-padded to 512 (HF unfolds 321 samples
 *     and drops the last, as preemphasis is 0); w is the periodic Hann window
 *     0.5 - 0.5 cos(2 pi j / 320) rounded to float32, and the product is rounded to float32
 *     as in HF (a float32 waveform times a float32 window) before everything turns double;
 *   - |X_k|, k = 0..256, of the 512-point DFT (magnitude, not power);
 *   - mel_m = sum_k |X_k| M[k, m]: 128 HTK triangles (no area normalisation) whose 130 edges
 *     are equally spaced in mel from 0 to 8000 Hz, on bins F_k = k * 31.25 Hz;
 *   - official: ln(mel + 0.001), then rounded to float32; the frames past the valid ones are
 *     zeros (HF multiplies them by the mask);
 *     llamacpp: ln(max(mel, 0.001)) (mtmd-audio.cpp's gemma4a preprocessor), every frame.
 * The FFT is ours: the 512 real inputs are packed into 256 complex ones, transformed by an
 * iterative radix-2 FFT and split into the 257 bins. The window, twiddles and filterbank are
 * tables computed once. Frames are independent: blocks of them are tasks, and each output
 * value is computed by the same operations whichever thread runs its block. */
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "ge.h"

#define FRAME 320  /* samples per frame (20 ms) */
#define PAD 160    /* semicausal padding: FRAME / 2 */
#define NFFT 512
#define NBIN (NFFT / 2 + 1) /* 257 */
#define NHALF (NFFT / 2)    /* the complex FFT's size */
#define BLOCK_FRAMES 64     /* frames per task */

static const double pi = 3.14159265358979323846;

/* ---- tables ------------------------------------------------------------------------------ */

static struct {
    double win[FRAME];             /* float32-rounded periodic Hann */
    double tw_re[NHALF], tw_im[NHALF]; /* exp(-2 pi i k / 512), k < 256 */
    int rev[NHALF];                /* 8-bit bit reversal */
    int lo[GE_AUDIO_MEL], cnt[GE_AUDIO_MEL]; /* band m: bins lo .. lo + cnt - 1 */
    int off[GE_AUDIO_MEL];         /* its weights start at w[off[m]] */
    double w[2 * NBIN + GE_AUDIO_MEL];
} T;

static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static double hz_to_mel(double f) { return 2595.0 * log10(1.0 + f / 700.0); }
static double mel_to_hz(double m) { return 700.0 * (pow(10.0, m / 2595.0) - 1.0); }

static void make_tables(void)
{
    for (int j = 0; j < FRAME; j++)
        T.win[j] = (float)(0.5 - 0.5 * cos(2.0 * pi * j / FRAME));
    for (int k = 0; k < NHALF; k++) {
        T.tw_re[k] = cos(2.0 * pi * k / NFFT);
        T.tw_im[k] = -sin(2.0 * pi * k / NFFT);
        int r = 0;
        for (int b = 0; b < 8; b++)
            r |= ((k >> b) & 1) << (7 - b);
        T.rev[k] = r;
    }
    /* docs/model.md 6.1 step 6, as HF's mel_filter_bank(norm=None, mel_scale="htk") computes it:
     * edges from linspace in mel (i * step, the last one exactly m(8000)), bins from
     * linspace(0, 8000, 257) (k * 31.25, exact) */
    double f[GE_AUDIO_MEL + 2];
    const double mmax = hz_to_mel(8000.0), step = mmax / (GE_AUDIO_MEL + 1);
    for (int i = 0; i < GE_AUDIO_MEL + 2; i++)
        f[i] = mel_to_hz(i == GE_AUDIO_MEL + 1 ? mmax : i * step);
    int at = 0;
    for (int m = 0; m < GE_AUDIO_MEL; m++) {
        T.off[m] = at;
        T.lo[m] = 0;
        T.cnt[m] = 0;
        for (int k = 0; k < NBIN; k++) {
            double fk = k * (8000.0 / (NBIN - 1));
            double down = (fk - f[m]) / (f[m + 1] - f[m]);
            double up = (f[m + 2] - fk) / (f[m + 2] - f[m + 1]);
            double v = fmax(0.0, fmin(down, up));
            if (v > 0) {
                if (T.cnt[m] == 0)
                    T.lo[m] = k;
                /* the triangles are convex: the non-zero bins are one run */
                T.w[at + (k - T.lo[m])] = v;
                T.cnt[m] = k - T.lo[m] + 1;
            }
        }
        at += T.cnt[m];
    }
}

/* ---- frame counts ------------------------------------------------------------------------ */

int64_t ge_audio_frames(int64_t n, ge_semantics sem, int64_t *n_valid)
{
    int64_t frames = 0, valid = 0;
    if (sem == GE_SEM_LLAMACPP) {
        if (n >= 2)
            frames = valid = n >= PAD + 1 ? (n - 1) / GE_AUDIO_HOP : 1;
    } else if (n > 0) {
        int64_t padded = (n + 127) / 128 * 128 + PAD;
        if (padded >= FRAME + 1)
            frames = (padded - (FRAME + 1)) / GE_AUDIO_HOP + 1;
        valid = n >= PAD + 1 ? (n - 1) / GE_AUDIO_HOP : 0;
    }
    if (n_valid)
        *n_valid = valid;
    return frames;
}

/* ---- one frame ----------------------------------------------------------------------------- */

/* |X_k| for k <= 256 of frame i of pcm[0..n) */
static void magnitude(const float *pcm, int64_t n, int64_t i, double mag[NBIN])
{
    double re[NHALF], im[NHALF];
    /* xp[t] = pcm[t - PAD]; the frame's j-th sample is xp[160 i + j] */
    int64_t t0 = i * GE_AUDIO_HOP - PAD;
    double x[NFFT];
    for (int j = 0; j < FRAME; j++) {
        int64_t t = t0 + j;
        x[j] = t >= 0 && t < n ? (double)(pcm[t] * (float)T.win[j]) : 0.0;
    }
    for (int j = FRAME; j < NFFT; j++)
        x[j] = 0.0;
    /* z[k] = x[2k] + i x[2k+1], in bit-reversed order for the in-place FFT */
    for (int k = 0; k < NHALF; k++) {
        re[T.rev[k]] = x[2 * k];
        im[T.rev[k]] = x[2 * k + 1];
    }
    for (int len = 2; len <= NHALF; len *= 2) {
        int half = len / 2, stride = NFFT / len; /* twiddle exp(-2 pi i j / len) */
        for (int s = 0; s < NHALF; s += len)
            for (int j = 0; j < half; j++) {
                double wr = T.tw_re[j * stride], wi = T.tw_im[j * stride];
                int a = s + j, b = a + half;
                double br = re[b] * wr - im[b] * wi, bi = re[b] * wi + im[b] * wr;
                re[b] = re[a] - br;
                im[b] = im[a] - bi;
                re[a] += br;
                im[a] += bi;
            }
    }
    /* split: E_k = (Z_k + conj Z_{256-k}) / 2 (even samples), O_k = (Z_k - conj Z_{256-k}) /
     * 2i (odd samples); X_k = E_k + W^k O_k, W = exp(-2 pi i / 512); X_256 = E_0 - O_0 */
    mag[0] = fabs(re[0] + im[0]);
    mag[NHALF] = fabs(re[0] - im[0]);
    for (int k = 1; k < NHALF; k++) {
        double ar = re[k], ai = im[k], br = re[NHALF - k], bi = -im[NHALF - k];
        double er = 0.5 * (ar + br), ei = 0.5 * (ai + bi);
        double or_ = 0.5 * (ai - bi), oi = -0.5 * (ar - br);
        double wr = T.tw_re[k], wi = T.tw_im[k];
        double xr = er + or_ * wr - oi * wi, xi = ei + or_ * wi + oi * wr;
        mag[k] = sqrt(xr * xr + xi * xi);
    }
}

typedef struct {
    const float *pcm;
    int64_t n, frames, valid;
    ge_semantics sem;
    float *feat;
} job;

static void run_block(void *ctx, int64_t task, int worker)
{
    (void)worker;
    const job *jb = ctx;
    int64_t i0 = task * BLOCK_FRAMES, i1 = i0 + BLOCK_FRAMES;
    if (i1 > jb->frames)
        i1 = jb->frames;
    for (int64_t i = i0; i < i1; i++) {
        float *o = jb->feat + i * GE_AUDIO_MEL;
        if (i >= jb->valid) { /* official: past the real audio */
            memset(o, 0, GE_AUDIO_MEL * sizeof *o);
            continue;
        }
        double mag[NBIN];
        magnitude(jb->pcm, jb->n, i, mag);
        for (int m = 0; m < GE_AUDIO_MEL; m++) {
            const double *w = T.w + T.off[m], *a = mag + T.lo[m];
            double mel = 0.0;
            for (int k = 0; k < T.cnt[m]; k++)
                mel += a[k] * w[k];
            o[m] = (float)(jb->sem == GE_SEM_LLAMACPP ? log(fmax(mel, 0.001)) : log(mel + 0.001));
        }
    }
}

ge_status ge_audio_features(const float *pcm, int64_t n, ge_semantics sem, float *feat,
                            const ge_runner *runner, ge_err *err)
{
    if (n < 0 || (n > 0 && !pcm) || !feat)
        return ge_fail(err, GE_E_USAGE, "audio features: bad arguments (%lld samples)",
                       (long long)n);
    if (n > (int64_t)(GE_AUDIO_SECONDS_CAP * GE_AUDIO_RATE))
        return ge_fail(err, GE_E_LIMIT, "audio features: %lld samples is over %g s", (long long)n,
                       GE_AUDIO_SECONDS_CAP);
    pthread_once(&tables_once, make_tables);
    job jb = {pcm, n, 0, 0, sem, feat};
    jb.frames = ge_audio_frames(n, sem, &jb.valid);
    int64_t tasks = (jb.frames + BLOCK_FRAMES - 1) / BLOCK_FRAMES;
    if (runner && runner->run && tasks > 1) {
        runner->run(runner->pool, tasks, run_block, &jb);
    } else {
        for (int64_t t = 0; t < tasks; t++)
            run_block(&jb, t, 0);
    }
    return GE_OK;
}
