package org.shardopt.tests;

import org.shardopt.*;

/** RankAgreementTest.ucxWorldSizeDisagreementFailsAtRendezvous: prints how the rendezvous failed. */
public final class UcxWorldSizeWorker {
    public static void main(String[] args) {
        try (UcxCommunicationBackend<Double> b = new UcxCommunicationBackend<>()) {
            System.out.println("rendezvous succeeded on rank " + b.getRank() + " of " + b.getWorldSize());
            System.exit(3);
        } catch (RuntimeException e) {
            System.out.println("rendezvous failed: " + e.getClass().getName() + ": " + e.getMessage());
        }
    }
}
