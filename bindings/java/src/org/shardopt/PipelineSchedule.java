package org.shardopt;

/** The order of each pipeline stage's forwards and backwards (shardopt_pipeline_schedule, in its order; docs/pipeline.md):
 *  ONE_F_ONE_B holds at most p micro-batches per stage, GPIPE all; INTERLEAVED_1F1B gives each rank virtualStages chunks. */
public enum PipelineSchedule { ONE_F_ONE_B, GPIPE, INTERLEAVED_1F1B }
