/* modality.c - one home per kind of record item: how each enters the token sequence (its
 * pieces), its soft-token budgets and defaults (docs/model.md 2.3-2.4). The tokenizer and the
 * image planner read it; item.c holds each media kind's decode, layout and encode. A new
 * modality is a row here, a row of item.c's entry points and its record key in cli/input.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ge.h"

static const ge_modality TABLE[GE_KIND_COUNT] = {
    [GE_KIND_TEXT] = {"text", "texts", NULL, NULL, NULL, NULL, 0},
    [GE_KIND_IMAGE] = {"image", "images", "<|image|>", "<|image>", "<image|>",
                       "images need a vision tower", GE_IMAGE_TOKENS},
    [GE_KIND_AUDIO] = {"audio", "audio clips", "<|audio|>", "<|audio>", "<audio|>",
                       "audio needs an audio tower", 0},
    [GE_KIND_VIDEO] = {"video", "videos", "<|video|>", "<|image>", "<image|>",
                       "video needs a vision tower", GE_VIDEO_TOKENS},
};

const ge_modality *ge_modality_of(ge_kind kind) { return &TABLE[kind]; }

/* the budgets are GE_BUDGETS, one list for the engine, --help and the option checks */
int ge_budget(int i)
{
    const char *p = GE_BUDGETS;
    for (; i > 0 && p; i--) {
        const char *bar = strchr(p, '|');
        p = bar ? bar + 1 : NULL;
    }
    return p && i == 0 ? atoi(p) : 0;
}

bool ge_budget_valid(int n)
{
    for (int i = 0; ge_budget(i); i++)
        if (ge_budget(i) == n)
            return true;
    return false;
}

const char *ge_budget_list(const char *sep, char *buf, size_t n)
{
    size_t at = 0;
    buf[0] = '\0';
    for (int i = 0; ge_budget(i) && at < n; i++)
        at += (size_t)snprintf(buf + at, n - at, "%s%d", i ? sep : "", ge_budget(i));
    return buf;
}
