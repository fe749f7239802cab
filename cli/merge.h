/* merge.h - `gemmaembed merge -o OUT PART...`: the outputs of the --shard i/n runs of one job
 * rebuilt as the output of one run, in input order.
 *
 * Each part is found by its run description (PART.meta.json): every part must be complete,
 * of the same identity (model files, prompt, options), format, precision and width, over the
 * same number of input records, and the shards 0..n-1 of one n must each be there once.
 * Record k of the input is the next record of shard k mod n; its records map
 * (PART.records) says how many units of the part it took (lines of jsonl and openai-batch,
 * rows of npy, f32 and npz, with their ids). Every part must be used up exactly. The output
 * gets its own run description (shard null, complete) and, for npy and f32, its ids
 * sidecar; the shards' errors files are left as they are. */
#ifndef GE_CLI_MERGE_H
#define GE_CLI_MERGE_H

/* argv[0] is "merge". Returns the process exit status (msg.h). */
int ge_merge_main(int argc, char **argv);

#endif
