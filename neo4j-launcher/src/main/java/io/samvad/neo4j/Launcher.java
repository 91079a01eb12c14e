package io.samvad.neo4j;

import java.io.DataInputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;

import org.neo4j.configuration.GraphDatabaseInternalSettings;
import org.neo4j.configuration.GraphDatabaseSettings;
import org.neo4j.configuration.connectors.BoltConnector;
import org.neo4j.configuration.helpers.SocketAddress;
import org.neo4j.dbms.api.DatabaseManagementService;
import org.neo4j.dbms.api.DatabaseManagementServiceBuilder;
import org.neo4j.graphdb.GraphDatabaseService;
import org.neo4j.io.ByteUnit;

/**
 * Runs an embedded Neo4j Community DBMS with the Bolt connector on loopback, for
 * development and CI.
 *
 * <p>Usage: {@code java -jar target/neo4j-launcher.jar [--port P] [--data DIR]} (the manifest
 * holds the classpath, {@code target/lib}, and the {@code Add-Opens} Neo4j wants).
 * The environment variables {@code NEO4J_PORT} and {@code NEO4J_DATA_DIR} are used
 * when the options are absent (defaults: 7687 and {@code var/neo4j}).
 *
 * <p>The data directory is the Neo4j home directory: the store lives in
 * {@code DIR/data}, Neo4j's own logs in {@code DIR/logs}. It persists between runs.
 *
 * <p>Prints exactly one {@code NEO4J READY bolt://127.0.0.1:P} line on stdout once
 * a Bolt handshake succeeds, and {@code NEO4J STOPPED} after a clean shutdown
 * (SIGTERM or SIGINT). On a start-up failure it prints {@code NEO4J FAILED ...}
 * on stderr and exits with status 1; bad arguments exit with status 2.
 */
public final class Launcher {

    private static final String HOST = "127.0.0.1";
    private static final int DEFAULT_PORT = 7687;
    private static final String DEFAULT_DATA_DIR = "var/neo4j";
    private static final Duration READY_TIMEOUT = Duration.ofSeconds(120);

    private Launcher() {
    }

    public static void main(String[] args) {
        int port;
        Path dataDir;
        try {
            String portText = envOr("NEO4J_PORT", Integer.toString(DEFAULT_PORT));
            String dataText = envOr("NEO4J_DATA_DIR", DEFAULT_DATA_DIR);
            for (int i = 0; i < args.length; i++) {
                switch (args[i]) {
                    case "--port":
                        portText = value(args, ++i, "--port");
                        break;
                    case "--data":
                        dataText = value(args, ++i, "--data");
                        break;
                    case "-h":
                    case "--help":
                        System.out.println("usage: Launcher [--port P] [--data DIR]"
                                + "  (env NEO4J_PORT, NEO4J_DATA_DIR)");
                        return;
                    default:
                        throw new IllegalArgumentException("unknown argument: " + args[i]);
                }
            }
            port = parsePort(portText);
            dataDir = Path.of(dataText).toAbsolutePath().normalize();
        } catch (IllegalArgumentException e) {
            System.err.println("NEO4J FAILED " + e.getMessage());
            System.exit(2);
            return;
        }

        AtomicReference<DatabaseManagementService> service = new AtomicReference<>();
        AtomicBoolean stopping = new AtomicBoolean();
        CountDownLatch built = new CountDownLatch(1);
        CountDownLatch stopped = new CountDownLatch(1);
        PrintStream out = System.out;
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            stopping.set(true);
            try {
                // A signal during start-up: let build() finish so the stores are shut down
                // properly instead of the JVM halting halfway through.
                built.await(READY_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            DatabaseManagementService dbms = service.getAndSet(null);
            if (dbms != null) {
                out.println("NEO4J STOPPING");
                out.flush();
                try {
                    dbms.shutdown();
                    out.println("NEO4J STOPPED");
                } catch (RuntimeException e) {
                    out.println("NEO4J STOP FAILED " + e);
                }
                out.flush();
            }
            stopped.countDown();
        }, "neo4j-launcher-shutdown"));

        long started = System.nanoTime();
        try {
            Files.createDirectories(dataDir);
            DatabaseManagementService dbms = new DatabaseManagementServiceBuilder(dataDir)
                    // Bolt on loopback only; no auth (development / CI).
                    .setConfig(BoltConnector.enabled, true)
                    .setConfig(BoltConnector.listen_address, new SocketAddress(HOST, port))
                    .setConfig(BoltConnector.advertised_address, new SocketAddress(HOST, port))
                    .setConfig(GraphDatabaseSettings.default_listen_address, new SocketAddress(HOST))
                    .setConfig(GraphDatabaseSettings.auth_enabled, false)
                    // Keep the footprint small: the machine also runs the app, bots and a browser.
                    .setConfig(GraphDatabaseSettings.pagecache_memory, ByteUnit.mebiBytes(128))
                    .setConfig(GraphDatabaseSettings.keep_logical_logs, "2 files")
                    .setConfig(GraphDatabaseSettings.logical_log_rotation_threshold, ByteUnit.mebiBytes(16))
                    // Bolt's Netty event loops otherwise wait a 5 s quiet period (twice) on
                    // shutdown; the databases are already stopped by then.
                    .setConfig(GraphDatabaseInternalSettings.netty_server_shutdown_quiet_period, 0)
                    .setConfig(GraphDatabaseInternalSettings.netty_server_shutdown_timeout, Duration.ofSeconds(5))
                    .build();
            service.set(dbms);
            built.countDown();

            GraphDatabaseService db = dbms.database(GraphDatabaseSettings.DEFAULT_DATABASE_NAME);
            long deadline = started + READY_TIMEOUT.toNanos();
            while (!db.isAvailable(1_000)) {
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("default database not available after " + READY_TIMEOUT);
                }
            }
            awaitBolt(port, deadline);
        } catch (Throwable e) {
            built.countDown();
            if (stopping.get()) {
                return; // signalled during start-up; the shutdown hook owns the exit
            }
            System.err.println("NEO4J FAILED " + e);
            e.printStackTrace(System.err);
            System.err.flush();
            // build() cleans up after itself when it throws; if it returned, the shutdown
            // hook stops the DBMS.
            System.exit(1);
            return;
        }

        if (stopping.get()) {
            return;
        }
        long millis = Duration.ofNanos(System.nanoTime() - started).toMillis();
        out.println("NEO4J READY bolt://" + HOST + ":" + port);
        out.flush();
        System.err.println("neo4j-launcher: data " + dataDir + ", ready in " + millis + " ms");
        System.err.flush();

        try {
            stopped.await();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** Connects to the Bolt port and performs a version handshake, retrying until the deadline. */
    private static void awaitBolt(int port, long deadlineNanos) throws IOException, InterruptedException {
        IOException last = null;
        while (System.nanoTime() < deadlineNanos) {
            try (Socket socket = new Socket()) {
                socket.connect(new InetSocketAddress(HOST, port), 1_000);
                socket.setSoTimeout(5_000);
                OutputStream os = socket.getOutputStream();
                os.write(new byte[] {
                    (byte) 0x60, (byte) 0x60, (byte) 0xB0, (byte) 0x17, // Bolt magic preamble
                    0, 4, 4, 5, // 5.4 down to 5.0
                    0, 0, 4, 4, // 4.4
                    0, 0, 0, 0,
                    0, 0, 0, 0,
                });
                os.flush();
                int agreed = new DataInputStream(socket.getInputStream()).readInt();
                if (agreed != 0) {
                    return;
                }
                last = new IOException("Bolt handshake refused all proposed versions");
            } catch (IOException e) {
                last = e;
            }
            Thread.sleep(200);
        }
        throw new IOException("Bolt port " + port + " not answering", last);
    }

    private static String envOr(String name, String fallback) {
        String value = System.getenv(name);
        return value == null || value.isBlank() ? fallback : value;
    }

    private static String value(String[] args, int i, String option) {
        if (i >= args.length) {
            throw new IllegalArgumentException(option + " needs a value");
        }
        return args[i];
    }

    private static int parsePort(String text) {
        try {
            int port = Integer.parseInt(text.trim());
            if (port < 1 || port > 65535) {
                throw new NumberFormatException();
            }
            return port;
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("invalid port: " + text);
        }
    }
}
