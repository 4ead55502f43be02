package org.shardopt;

/** Whether the native memory behind a {@link NativeView} is still there: invalidated when its owner is
 * closed (an optimizer), released (an FSDP unit from gather) or returns (a model callback's buffers). */
final class Lifetime {
    private volatile String closedBy;
    private final String owner;

    Lifetime(String owner) { this.owner = owner; }

    void invalidate(String why) { if (closedBy == null) closedBy = why; }
    boolean isValid() { return closedBy == null; }

    void check() {
        String c = closedBy;
        if (c != null) throw new IllegalStateException("this view of " + owner + " is no longer valid: " + c);
    }
}
