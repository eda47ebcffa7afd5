package sluice.junit5;

import java.io.IOException;
import java.io.UncheckedIOException;
import org.junit.jupiter.api.extension.BeforeEachCallback;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.ExtensionContext.Namespace;
import org.junit.jupiter.api.extension.ParameterContext;
import org.junit.jupiter.api.extension.ParameterResolutionException;
import org.junit.jupiter.api.extension.ParameterResolver;

/**
 * The JUnit 5 extension: {@code @ExtendWith(Sluice.class)} gives each test a fresh sluice
 * server (127.0.0.1, a free port, test mode, a private temporary directory, persistence off)
 * as a {@link SluiceServer} parameter of the test method or of its {@code @BeforeEach} /
 * {@code @AfterEach} methods, with {@link SluiceServer#clock()} to move its time.
 *
 * <pre>{@code
 * @ExtendWith(Sluice.class)
 * class LimiterTest {
 *     @Test
 *     void windowResets(SluiceServer sluice) {
 *         try (Jedis jedis = new Jedis(sluice.host(), sluice.port())) {
 *             sluice.clock().freeze();
 *             jedis.incr("rate:u1");
 *             jedis.expire("rate:u1", 60);
 *             sluice.clock().advance(Duration.ofSeconds(61));   // instead of sleeping
 *             assertNull(jedis.get("rate:u1"));
 *         }
 *     }
 * }
 * }</pre>
 *
 * <p>"Fresh" costs one server per test class where the server can reset itself: the class's
 * tests share one process, and before every test after the first the extension sends
 * {@code TESTMODE RESET} (one round trip), which returns the whole server to its state at
 * start (data, config, clock, faults). A server that does not answer it (a sluice older than
 * the command) is replaced by a new process instead, so each test still starts on an empty
 * server. The process is stopped when the class's tests are done.
 *
 * <p>A test (or class) annotated {@link SluiceFresh} gets a process of its own instead,
 * started before the test and killed after it: a few milliseconds per test.
 */
public final class Sluice implements BeforeEachCallback, ParameterResolver {
    private static final Namespace NAMESPACE = Namespace.create(Sluice.class);

    /** The server a test class's tests share, stopped with the class's context. */
    private static final class Shared implements ExtensionContext.Store.CloseableResource {
        SluiceServer server;
        /** Null until the server was asked to reset: whether it can. */
        Boolean resets;

        SluiceServer fresh() throws IOException {
            if (server != null && server.isRunning() && resets != Boolean.FALSE) {
                try {
                    server.command("TESTMODE", "RESET");
                    resets = Boolean.TRUE;
                    return server;
                } catch (SluiceServer.ReplyError e) {
                    resets = Boolean.FALSE; // no such command: a new process per test from now on
                }
            }
            close();
            server = SluiceServer.start();
            return server;
        }

        @Override
        public void close() {
            if (server != null) {
                server.close();
                server = null;
            }
        }
    }

    /** A test's own server ({@link SluiceFresh}), killed when the test's context closes. */
    private static final class Own implements ExtensionContext.Store.CloseableResource {
        final SluiceServer server;

        Own(SluiceServer server) {
            this.server = server;
        }

        @Override
        public void close() {
            server.close();
        }
    }

    private static boolean wantsFresh(ExtensionContext context) {
        return context.getTestMethod().map(m -> m.isAnnotationPresent(SluiceFresh.class)).orElse(false)
                || context.getTestClass().map(c -> c.isAnnotationPresent(SluiceFresh.class)).orElse(false);
    }

    @Override
    public void beforeEach(ExtensionContext context) {
        if (wantsFresh(context)) {
            try {
                Own own = new Own(SluiceServer.start());
                context.getStore(NAMESPACE).put(Own.class, own);
                context.getStore(NAMESPACE).put(SluiceServer.class, own.server);
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
            return;
        }
        // The class-level context (a @Nested class has its own) keeps the process; the test's
        // own context records the server this test gets.
        ExtensionContext owner = context.getParent().orElse(context);
        Shared shared = owner.getStore(NAMESPACE).getOrComputeIfAbsent(Shared.class, k -> new Shared(), Shared.class);
        try {
            context.getStore(NAMESPACE).put(SluiceServer.class, shared.fresh());
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    @Override
    public boolean supportsParameter(ParameterContext parameter, ExtensionContext context) {
        return parameter.getParameter().getType() == SluiceServer.class;
    }

    @Override
    public Object resolveParameter(ParameterContext parameter, ExtensionContext context) {
        SluiceServer server = context.getTestMethod().isPresent()
                ? context.getStore(NAMESPACE).get(SluiceServer.class, SluiceServer.class)
                : null;
        if (server == null) {
            throw new ParameterResolutionException("a SluiceServer is given to test methods and their "
                    + "@BeforeEach/@AfterEach methods, not to constructors or @BeforeAll/@AfterAll methods");
        }
        return server;
    }
}
