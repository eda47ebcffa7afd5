package sluice.junit5;

import java.time.Duration;

/**
 * A sluice server's clock, moved over the wire with the test-mode CLOCK commands: a test
 * advances it instead of sleeping. Every method returns the server's time in Unix
 * milliseconds after the move ({@link #resume()} excepted). Expiry, TTL, TIME and CL.THROTTLE all follow it.
 */
public final class TestClock {
    private final SluiceServer server;

    TestClock(SluiceServer server) {
        this.server = server;
    }

    private long clock(String... args) {
        String[] argv = new String[args.length + 1];
        argv[0] = "CLOCK";
        System.arraycopy(args, 0, argv, 1, args.length);
        Object reply = server.command(argv);
        return reply instanceof Long ? (Long) reply : Long.parseLong(String.valueOf(reply));
    }

    /** Stops time (CLOCK FREEZE). */
    public long freeze() {
        return clock("FREEZE");
    }

    /** Moves frozen time forward by {@code ms} (freezing it first); expired keys are reaped first. */
    public long advance(long ms) {
        return clock("ADVANCE", Long.toString(ms));
    }

    /** Moves frozen time forward by {@code d}, in whole milliseconds. */
    public long advance(Duration d) {
        return advance(d.toMillis());
    }

    /** Sets frozen time to {@code unixMs} (moving it backwards is refused). */
    public long set(long unixMs) {
        return clock("SET", Long.toString(unixMs));
    }

    /** Lets time run again from where it stands (CLOCK RESUME). */
    public void resume() {
        server.command("CLOCK", "RESUME");
    }

    /** The server's time (CLOCK NOW). */
    public long now() {
        return clock("NOW");
    }
}
