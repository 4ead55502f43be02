package org.shardopt;

/**
 * The order of each pipeline stage's forwards and backwards (docs/pipeline.md). ONE_F_ONE_B holds at most p
 * micro-batches per stage, GPIPE all of them; INTERLEAVED_1F1B gives each rank virtualStages model chunks
 * (chunks r, r + p, ...) for a bubble virtualStages times smaller. Codes are the C ABI's
 * shardopt_pipeline_schedule.
 */
public enum PipelineSchedule {
    ONE_F_ONE_B(0), GPIPE(1), INTERLEAVED_1F1B(2);

    final int code;

    PipelineSchedule(int code) { this.code = code; }
}
