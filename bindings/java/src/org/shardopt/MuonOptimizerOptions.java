package org.shardopt;

/** MuonOptimizer's options: the library's defaults for it (SHARDOPT_PRESET_MUON: torch.optim's). */
public class MuonOptimizerOptions<T, TInput, TOutput> extends OptimizerOptions<T, TInput, TOutput> {
    public MuonOptimizerOptions() { super(org.shardopt.internal.shardopt_optimizer_preset.SHARDOPT_PRESET_MUON); }
}
