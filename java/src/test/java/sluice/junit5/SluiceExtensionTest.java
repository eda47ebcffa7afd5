package sluice.junit5;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.extension.ExtendWith;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.commands.ProtocolCommand;
import redis.clients.jedis.util.SafeEncoder;

/** The extension as a Jedis user's test suite would use it. */
@ExtendWith(Sluice.class)
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class SluiceExtensionTest {
    /** CL.THROTTLE, a command Jedis has no method for. */
    private static final ProtocolCommand CL_THROTTLE = () -> SafeEncoder.encode("CL.THROTTLE");

    /** What the first test saw, for the second to compare with. */
    private static int firstPort;
    private static boolean firstServerResets;

    private Jedis jedis;

    @BeforeEach
    void connect(SluiceServer sluice) {
        jedis = new Jedis(sluice.host(), sluice.port());
    }

    @AfterEach
    void disconnect() {
        jedis.close();
    }

    @Test
    @Order(1)
    void aTestGetsAServerOnAFreePortWithItsClockFrozen(SluiceServer sluice) {
        assertNotEquals(6379, sluice.port());
        assertEquals("PONG", jedis.ping());
        assertEquals(0, jedis.dbSize());
        long frozen = sluice.clock().freeze();
        jedis.set("left:behind", "1");
        jedis.configSet("maxmemory", "1mb");
        assertEquals(frozen + 1500, sluice.clock().advance(1500));
        firstPort = sluice.port();
        // Whether the server answers TESTMODE RESET decides how the next test gets a fresh one.
        try {
            sluice.command("TESTMODE", "RESET");
            firstServerResets = true;
            jedis.set("left:behind", "1");
            jedis.configSet("maxmemory", "1mb");
            sluice.clock().freeze();
        } catch (SluiceServer.ReplyError e) {
            assertTrue(e.getMessage().startsWith("ERR unknown command"), e.getMessage());
            firstServerResets = false;
        }
    }

    @Test
    @Order(2)
    void theNextTestStartsOnAFreshServer(SluiceServer sluice) throws InterruptedException {
        // The same process reset, or a new one where the server cannot reset.
        if (firstServerResets) {
            assertEquals(firstPort, sluice.port());
        } else {
            assertNotEquals(firstPort, sluice.port());
        }
        assertEquals(0, jedis.dbSize());
        assertFalse(jedis.exists("left:behind"));
        assertEquals("0", jedis.configGet("maxmemory").get("maxmemory"));
        // The clock runs again: two reads 20 ms apart differ.
        long before = sluice.clock().now();
        Thread.sleep(20);
        assertTrue(sluice.clock().now() > before);
    }

    @Test
    @Order(3)
    void aFixedWindowResetsWhenTheClockMoves(SluiceServer sluice) {
        sluice.clock().freeze();
        for (int i = 1; i <= 5; i++) {
            assertEquals(i, jedis.incr("rate:u1"));
            jedis.expire("rate:u1", 60);
        }
        assertEquals(60_000, jedis.pttl("rate:u1"));
        sluice.clock().advance(Duration.ofSeconds(60).plusMillis(1)); // instead of sleeping a minute
        assertNull(jedis.get("rate:u1"));
    }

    @Test
    @Order(4)
    void clThrottleRefillsAfterTheClockMoves(SluiceServer sluice) {
        sluice.clock().freeze();
        int allowed = 0;
        for (int i = 0; i < 20; i++) {
            List<?> reply = (List<?>) jedis.sendCommand(CL_THROTTLE, "laoqian:reply", "15", "30", "60", "1");
            if ((Long) reply.get(0) == 0) allowed++;
        }
        assertEquals(16, allowed);
        sluice.clock().advance(2000);
        List<?> reply = (List<?>) jedis.sendCommand(CL_THROTTLE, "laoqian:reply", "15", "30", "60", "1");
        assertEquals(0L, reply.get(0));
    }

    @Test
    @Order(5)
    void theClockRefusesToGoBackwards(SluiceServer sluice) {
        long now = sluice.clock().freeze();
        assertEquals(now + 10, sluice.clock().set(now + 10));
        SluiceServer.ReplyError e = assertThrows(SluiceServer.ReplyError.class, () -> sluice.clock().set(now));
        assertTrue(e.getMessage().startsWith("ERR"), e.getMessage());
        sluice.clock().resume();
        assertTrue(sluice.clock().now() >= now + 10);
    }

    @Test
    @Order(6)
    void aDumpFileInTheWorkingDirectoryChangesNothing(SluiceServer sluice) throws Exception {
        // A dump.rdb with a key, saved by this server into its own directory, then put where
        // the tests run; the next server starts empty all the same.
        jedis.set("saved", "1");
        assertEquals("OK", jedis.save());
        Path cwd = Paths.get("").toAbsolutePath();
        Path stray = cwd.resolve("dump.rdb");
        Files.copy(sluice.dir().resolve("dump.rdb"), stray, StandardCopyOption.REPLACE_EXISTING);
        try (SluiceServer other = SluiceServer.start(); Jedis j = new Jedis(other.host(), other.port())) {
            assertNotEquals(cwd, other.dir());
            assertEquals(0, j.dbSize());
        } finally {
            Files.delete(stray);
        }
        assertEquals("OK", jedis.flushAll());
    }

    /** The shared server's port, seen by the test before the fresh one. */
    private static int sharedPort;
    private static SluiceServer ownServer;

    @Test
    @Order(8)
    void theSharedServerBeforeAFreshOne(SluiceServer sluice) {
        sharedPort = sluice.port();
        jedis.set("shared", "1");
    }

    @Test
    @Order(9)
    @SluiceFresh
    void aFreshTestGetsAProcessOfItsOwn(SluiceServer sluice) {
        assertNotEquals(sharedPort, sluice.port());
        assertEquals(0, jedis.dbSize());
        assertTrue(sluice.isRunning());
        ownServer = sluice;
    }

    @Test
    @Order(10)
    void afterAFreshTestItsProcessIsGoneAndTheSharedOneServesAgain(SluiceServer sluice) {
        assertFalse(ownServer.isRunning());
        assertFalse(Files.exists(ownServer.dir()));
        assertEquals(sharedPort, sluice.port());
        assertEquals(0, jedis.dbSize());
    }

    @Test
    @Order(7)
    void aServerStopsWhenClosedAndRemovesItsDirectory() throws Exception {
        SluiceServer server = SluiceServer.start();
        Path dir = server.dir();
        assertTrue(Files.isDirectory(dir));
        server.close();
        assertFalse(server.isRunning());
        assertFalse(Files.exists(dir));
    }
}
