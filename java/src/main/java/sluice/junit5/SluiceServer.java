package sluice.junit5;

import java.io.BufferedInputStream;
import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/**
 * A sluice process on 127.0.0.1 and a free port, in test mode, in a private temporary
 * directory with persistence off, until {@link #close()}.
 *
 * <p>The binary is {@code $SLUICE_BIN}, else the system property {@code sluice.bin}, else
 * {@code sluice} on {@code PATH}. {@link Sluice} (the JUnit 5 extension) hands these to tests;
 * outside JUnit, {@code try (SluiceServer s = SluiceServer.start()) { … }}.
 *
 * <p>{@link #command(String...)} sends a command on the handle's own connection (RESP2) and
 * returns the reply: a {@code String} for simple and bulk strings, a {@code Long} for
 * integers, a {@code List<Object>} for arrays, {@code null} for nil; an error reply throws
 * {@link SluiceServer.ReplyError}.
 */
public final class SluiceServer implements AutoCloseable {
    private static final Pattern READY = Pattern.compile("sluice listening on ([\\d.]+):(\\d+)");
    private static final long START_TIMEOUT_MS = 10_000;

    private final Process process;
    private final Path dir;
    private final String host;
    private final int port;
    private final TestClock clock = new TestClock(this);
    private Socket socket;
    private InputStream in;
    private OutputStream out;

    /** An error reply ({@code -ERR …}) to a command sent with {@link #command(String...)}. */
    public static final class ReplyError extends RuntimeException {
        private static final long serialVersionUID = 1L;

        ReplyError(String line) {
            super(line);
        }
    }

    /** Started without arguments of the caller's: nothing to save, so close() kills it. */
    private final boolean disposable;

    private SluiceServer(Process process, Path dir, String host, int port, boolean disposable) {
        this.process = process;
        this.dir = dir;
        this.host = host;
        this.port = port;
        this.disposable = disposable;
    }

    /** The path of the sluice binary to run: $SLUICE_BIN, -Dsluice.bin, or sluice on PATH. */
    public static String binaryPath() {
        String explicit = System.getenv("SLUICE_BIN");
        if (explicit == null || explicit.isEmpty()) explicit = System.getProperty("sluice.bin");
        if (explicit != null && !explicit.isEmpty()) {
            if (!new File(explicit).canExecute()) {
                throw new IllegalStateException("SLUICE_BIN (or -Dsluice.bin) is " + explicit
                        + ", which is not an executable file: set SLUICE_BIN to the path of a sluice binary");
            }
            return explicit;
        }
        String path = System.getenv("PATH");
        if (path != null) {
            for (String d : path.split(File.pathSeparator)) {
                File f = new File(d.isEmpty() ? "." : d, "sluice");
                if (f.isFile() && f.canExecute()) return f.getPath();
            }
        }
        throw new IllegalStateException("no sluice binary: set SLUICE_BIN to the path of one (for example "
                + "target/release/sluice after `cargo build --release` in a sluice checkout), or put sluice on PATH");
    }

    /** Starts a server with {@code extraArgs} added to the command line. */
    public static SluiceServer start(String... extraArgs) throws IOException {
        Path dir = Files.createTempDirectory("sluice-junit5-");
        List<String> argv = new ArrayList<>(List.of(binaryPath(), "--port", "0", "--bind", "127.0.0.1",
                "--test-mode", "--save", "", "--dir", dir.toString()));
        argv.addAll(List.of(extraArgs));
        Process process = new ProcessBuilder(argv)
                .directory(dir.toFile())
                .redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null")))
                .redirectError(dir.resolve("sluice.log").toFile())
                .start();
        BufferedReader stdout = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
        CompletableFuture<String> first = CompletableFuture.supplyAsync(() -> {
            try {
                return stdout.readLine();
            } catch (IOException e) {
                return null;
            }
        });
        String line;
        try {
            line = first.get(START_TIMEOUT_MS, TimeUnit.MILLISECONDS);
        } catch (InterruptedException | ExecutionException | TimeoutException e) {
            line = null;
        }
        Matcher m = line == null ? null : READY.matcher(line);
        if (m == null || !m.find()) {
            process.destroyForcibly();
            String log = readQuietly(dir.resolve("sluice.log"));
            deleteQuietly(dir);
            throw new IOException("sluice (" + argv.get(0) + ") did not start within " + START_TIMEOUT_MS
                    + " ms; it printed " + (line == null ? "nothing" : "'" + line + "'") + "; its log: " + log);
        }
        // Keep draining stdout so the server never blocks on a full pipe.
        Thread drain = new Thread(() -> {
            try {
                while (stdout.readLine() != null) {
                    // discard
                }
            } catch (IOException ignored) {
                // the process ended
            }
        }, "sluice-stdout");
        drain.setDaemon(true);
        drain.start();
        return new SluiceServer(process, dir, m.group(1), Integer.parseInt(m.group(2)), extraArgs.length == 0);
    }

    /** The address the server listens on (127.0.0.1). */
    public String host() {
        return host;
    }

    /** The port the server picked. */
    public int port() {
        return port;
    }

    /** {@code redis://127.0.0.1:PORT}. */
    public String uri() {
        return "redis://" + host + ":" + port;
    }

    /** The server's private working directory (its {@code dir}), removed by {@link #close()}. */
    public Path dir() {
        return dir;
    }

    /** The handle that moves the server's clock (CLOCK FREEZE / ADVANCE / SET / RESUME / NOW). */
    public TestClock clock() {
        return clock;
    }

    /** Whether the process is still running. */
    public boolean isRunning() {
        return process.isAlive();
    }

    /** Sends one command on the handle's connection and returns its reply. */
    public synchronized Object command(String... args) {
        try {
            if (socket == null) {
                socket = new Socket();
                socket.connect(new InetSocketAddress(host, port), 5_000);
                socket.setSoTimeout(30_000);
                socket.setTcpNoDelay(true);
                in = new BufferedInputStream(socket.getInputStream());
                out = socket.getOutputStream();
            }
            ByteArrayOutputStream buf = new ByteArrayOutputStream();
            buf.write(("*" + args.length + "\r\n").getBytes(StandardCharsets.US_ASCII));
            for (String a : args) {
                byte[] b = a.getBytes(StandardCharsets.UTF_8);
                buf.write(("$" + b.length + "\r\n").getBytes(StandardCharsets.US_ASCII));
                buf.write(b);
                buf.write("\r\n".getBytes(StandardCharsets.US_ASCII));
            }
            out.write(buf.toByteArray());
            out.flush();
            return readReply();
        } catch (IOException e) {
            closeConnection();
            throw new IllegalStateException("sluice at " + host + ":" + port + ": " + e.getMessage(), e);
        }
    }

    private Object readReply() throws IOException {
        int type = in.read();
        if (type < 0) throw new IOException("connection closed");
        String line = readLine();
        switch (type) {
            case '+':
                return line;
            case '-':
                throw new ReplyError(line);
            case ':':
                return Long.parseLong(line);
            case '$': {
                int n = Integer.parseInt(line);
                if (n < 0) return null;
                byte[] data = in.readNBytes(n + 2);
                if (data.length != n + 2) throw new IOException("connection closed");
                return new String(data, 0, n, StandardCharsets.UTF_8);
            }
            case '*': {
                int n = Integer.parseInt(line);
                if (n < 0) return null;
                List<Object> items = new ArrayList<>(n);
                for (int i = 0; i < n; i++) {
                    try {
                        items.add(readReply());
                    } catch (ReplyError e) {
                        items.add(e);
                    }
                }
                return items;
            }
            default:
                throw new IOException("unexpected reply type '" + (char) type + "'");
        }
    }

    private String readLine() throws IOException {
        ByteArrayOutputStream line = new ByteArrayOutputStream();
        for (;;) {
            int c = in.read();
            if (c < 0) throw new IOException("connection closed");
            if (c == '\r') {
                if (in.read() != '\n') throw new IOException("malformed reply");
                return line.toString(StandardCharsets.UTF_8);
            }
            line.write(c);
        }
    }

    private synchronized void closeConnection() {
        if (socket != null) {
            try {
                socket.close();
            } catch (IOException ignored) {
                // closing anyway
            }
            socket = null;
        }
    }

    /**
     * Stops the server and removes its directory. A server started without extra arguments has
     * nothing to save (persistence is off) and is killed at once (SIGKILL); one started with
     * arguments of the caller's gets SIGTERM, to save what they ask for, then SIGKILL after 5 s.
     */
    @Override
    public void close() {
        closeConnection();
        if (disposable) {
            process.destroyForcibly();
        } else {
            process.destroy();
        }
        try {
            if (!process.waitFor(5, TimeUnit.SECONDS)) {
                process.destroyForcibly();
                process.waitFor(5, TimeUnit.SECONDS);
            }
        } catch (InterruptedException e) {
            process.destroyForcibly();
            Thread.currentThread().interrupt();
        }
        deleteQuietly(dir);
    }

    @Override
    public String toString() {
        return "sluice at " + host + ":" + port;
    }

    private static String readQuietly(Path file) {
        try {
            return Files.readString(file);
        } catch (IOException e) {
            return "(none)";
        }
    }

    private static void deleteQuietly(Path dir) {
        try (Stream<Path> paths = Files.walk(dir)) {
            paths.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        } catch (IOException ignored) {
            // a temporary directory left behind
        }
    }
}
