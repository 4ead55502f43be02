package org.shardopt;

/** Muon's learning-rate scale for a rows x cols matrix (the C ABI's shardopt_muon_lr_adjust, in its order; torch.optim.Muon's
 *  adjust_lr_fn): ORIGINAL sqrt(max(1, rows / cols)), MATCH_RMS_ADAMW 0.2 sqrt(max(rows, cols)), SPECTRAL_UNCLAMPED
 *  sqrt(rows / cols). */
public enum MuonLearningRateAdjustment { ORIGINAL, MATCH_RMS_ADAMW, SPECTRAL_UNCLAMPED }
