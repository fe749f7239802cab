/* prompts.c - task prompt names and their prefix strings (docs/model.md 2.2, from the model's
 * config_sentence_transformers.json), plus the short aliases our CLI documents. */
#include <stddef.h>
#include <strings.h>

#include "ge.h"

static const struct {
    const char *name, *prefix;
} prompts[] = {
    /* canonical names first: ge_prompt_names lists these */
    {"query", "task: search result | query: "},
    {"document", "title: none | text: "},
    {"classification", "task: classification | query: "},
    {"clustering", "task: clustering | query: "},
    {"code", "task: code retrieval | query: "},
    {"qa", "task: question answering | query: "},
    {"fact", "task: fact checking | query: "},
    {"sts", "task: sentence similarity | query: "},
    /* the model config's own names (matched case-insensitively) */
    {"Retrieval-query", "task: search result | query: "},
    {"Retrieval", "task: search result | query: "},
    {"Reranking", "task: search result | query: "},
    {"BitextMining", "task: search result | query: "},
    {"SearchQuery", "task: search result | query: "},
    {"Retrieval-document", "title: none | text: "},
    {"MultilabelClassification", "task: classification | query: "},
    {"CodeRetrieval", "task: code retrieval | query: "},
    {"InstructionRetrieval", "task: code retrieval | query: "},
    {"FactChecking", "task: fact checking | query: "},
    {"QuestionAnswering", "task: question answering | query: "},
    {"SentenceSimilarity", "task: sentence similarity | query: "},
    {"PairClassification", "task: sentence similarity | query: "},
    {"Summarization", "task: sentence similarity | query: "},
};

static const char *const canonical[] = {"query", "document", "classification", "clustering",
                                        "code", "qa", "fact", "sts", NULL};

const char *ge_prompt_find(const char *name)
{
    for (size_t i = 0; i < sizeof prompts / sizeof prompts[0]; i++)
        if (strcasecmp(prompts[i].name, name) == 0)
            return prompts[i].prefix;
    return NULL;
}

const char *const *ge_prompt_names(void) { return canonical; }
