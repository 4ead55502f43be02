package org.shardopt.tests;

import org.shardopt.*;

/** RankAgreementTest.ucxSingleProcessWorldWhenAskedExplicitly: a UCX world of one, asked for explicitly. */
public final class UcxSingleWorker {
    public static void main(String[] args) {
        try (UcxCommunicationBackend<Double> b = UcxCommunicationBackend.singleProcess()) {
            double[] d = {2.5};
            b.allReduce(d, ReductionOperation.SUM);
            if (d[0] != 2.5) throw new AssertionError("allreduce over one rank changed the data");
            System.out.println("single ok rank " + b.getRank() + " of " + b.getWorldSize());
        }
    }
}
