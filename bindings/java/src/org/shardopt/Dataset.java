package org.shardopt;

/** Which set a model call is about (shardopt_dataset): training, validation or test. */
public enum Dataset { TRAINING, VALIDATION, TEST }
