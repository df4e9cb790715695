package metastore.trinoclient;

import io.openlineage.client.OpenLineage;
import io.openlineage.client.OpenLineageClient;
import io.openlineage.client.OpenLineageClientUtils;
import io.openlineage.client.transports.HttpConfig;
import io.openlineage.client.transports.HttpSslContextConfig;
import io.openlineage.client.transports.HttpTransport;
import io.openlineage.client.transports.HttpTransportResponseException;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.ZoneOffset;
import java.time.ZonedDateTime;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Stream;

/**
 * Times OpenLineageClient.emit() with the client built exactly as Trino 476's openlineage event
 * listener builds it (OpenLineageHttpTransport.buildTransport and OpenLineageListenerModule.getClient):
 * new HttpTransport(new HttpConfig(url, endpoint, timeoutMs, tokenProvider, urlParams, headers, null,
 * new HttpSslContextConfig())), no circuit breaker, no disabled facets. TLS trust comes from the JVM's
 * default trust store (-Djavax.net.ssl.trustStore=...), as for Trino.
 *
 * <pre>
 * java -Djavax.net.ssl.trustStore=ts.p12 -Djavax.net.ssl.trustStorePassword=... -jar trino-client-bench.jar \
 *     --url https://localhost:8443 [--timeout-ms 5000] [--count N] EVENTS...
 * </pre>
 *
 * EVENTS are files (*.json: one event, possibly pretty-printed; anything else: one event per line) or
 * folders (their *.json files). Each emit sends the next event, cycling, with a fresh runId and
 * eventTime = now, so nothing is de-duplicated. Prints one JSON line per emit on stdout:
 * {"seq":..,"run_id":..,"event_type":..,"ms":..,"ok":..,"status":..,"error":..}.
 *
 * Without --count, commands are read from stdin, one per line: "emit N" emits N events in a row and
 * then prints {"done":N}; "emit N T" emits them from T threads at once through the one client (as
 * concurrent Trino queries do); "quit" (or end of input) exits. A first line {"ready":true} says the client
 * is built. This lets a runner keep one warm client (pooled connection, as in a running Trino) and
 * time emits while it applies and lifts faults.
 */
public final class EmitBench
{
    private EmitBench() {}

    public static void main(String[] args)
            throws Exception
    {
        String url = null;
        int timeoutMs = 5000; // openlineage-event-listener.transport.timeout default at 476
        Integer count = null;
        List<Path> inputs = new ArrayList<>();
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--url" -> url = args[++i];
                case "--timeout-ms" -> timeoutMs = Integer.parseInt(args[++i]);
                case "--count" -> count = Integer.parseInt(args[++i]);
                default -> inputs.add(Path.of(args[i]));
            }
        }
        if (url == null || inputs.isEmpty()) {
            System.err.println("usage: EmitBench --url URL [--timeout-ms MS] [--count N] EVENTS...");
            System.exit(2);
        }
        List<OpenLineage.RunEvent> events = load(inputs);
        if (events.isEmpty()) {
            System.err.println("no events in " + inputs);
            System.exit(2);
        }

        // As Trino 476: endpoint, api key, compression unset; headers and url params empty maps.
        Map<String, String> urlParams = new HashMap<>();
        Map<String, String> headers = new HashMap<>();
        HttpTransport transport = new HttpTransport(new HttpConfig(
                URI.create(url), null, timeoutMs, null, urlParams, headers, null, new HttpSslContextConfig()));
        OpenLineageClient client = OpenLineageClient.builder().transport(transport).disableFacets(new String[0]).build();

        PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
        Emitter emitter = new Emitter(client, events, out);
        if (count != null) {
            emitter.emit(count, 1);
        }
        else {
            out.println("{\"ready\":true}");
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            String line;
            while ((line = in.readLine()) != null) {
                String[] words = line.trim().split("\\s+");
                if (words[0].equals("quit")) {
                    break;
                }
                if (words[0].equals("emit") && (words.length == 2 || words.length == 3)) {
                    int n = Integer.parseInt(words[1]);
                    int threads = words.length == 3 ? Integer.parseInt(words[2]) : 1;
                    emitter.emit(n, threads);
                    out.println("{\"done\":" + n + "}");
                }
                else if (!words[0].isEmpty()) {
                    out.println("{\"error\":" + quote("unknown command: " + line) + "}");
                }
            }
        }
        client.close();
    }

    private static final class Emitter
    {
        private final OpenLineageClient client;
        private final List<OpenLineage.RunEvent> events;
        private final PrintStream out;
        private final AtomicLong seq = new AtomicLong();

        Emitter(OpenLineageClient client, List<OpenLineage.RunEvent> events, PrintStream out)
        {
            this.client = client;
            this.events = events;
            this.out = out;
        }

        void emit(int n, int threads)
                throws InterruptedException
        {
            if (threads <= 1) {
                for (int i = 0; i < n; i++) {
                    emitOne();
                }
                return;
            }
            ExecutorService pool = Executors.newFixedThreadPool(threads);
            for (int i = 0; i < n; i++) {
                pool.submit(this::emitOne);
            }
            pool.shutdown();
            pool.awaitTermination(1, TimeUnit.HOURS);
        }

        private void emitOne()
        {
            long mine = seq.getAndIncrement();
            OpenLineage.RunEvent template = events.get((int) (mine % events.size()));
            OpenLineage.RunEvent event = fresh(template);
            String error = null;
            Integer status = null;
            long start = System.nanoTime();
            try {
                client.emit(event);
            }
            catch (HttpTransportResponseException e) {
                status = e.getStatusCode();
                error = e.getClass().getSimpleName() + ": " + e.getMessage();
            }
            catch (RuntimeException e) {
                // Trino's EventListenerManager catches every Throwable and logs it.
                Throwable cause = e.getCause() != null ? e.getCause() : e;
                error = e.getClass().getSimpleName() + ": " + cause.getClass().getName() + ": " + cause.getMessage();
            }
            double ms = (System.nanoTime() - start) / 1e6;
            StringBuilder line = new StringBuilder(256);
            line.append("{\"seq\":").append(mine)
                    .append(",\"run_id\":").append(quote(event.getRun().getRunId().toString()))
                    .append(",\"event_type\":").append(quote(String.valueOf(event.getEventType())))
                    .append(",\"ms\":").append(String.format(Locale.ROOT, "%.3f", ms))
                    .append(",\"ok\":").append(error == null)
                    .append(",\"status\":").append(status == null ? "null" : status.toString())
                    .append(",\"error\":").append(error == null ? "null" : quote(truncate(error, 300)))
                    .append('}');
            synchronized (out) {
                out.println(line);
            }
        }
    }

    /** The template with a new runId and eventTime = now, built the way Trino builds its events. */
    private static OpenLineage.RunEvent fresh(OpenLineage.RunEvent template)
    {
        OpenLineage ol = new OpenLineage(template.getProducer());
        OpenLineage.Run run = ol.newRun(UUID.randomUUID(), template.getRun().getFacets());
        return ol.newRunEventBuilder()
                .eventType(template.getEventType())
                .eventTime(ZonedDateTime.now(ZoneOffset.UTC))
                .run(run)
                .job(template.getJob())
                .inputs(template.getInputs())
                .outputs(template.getOutputs())
                .build();
    }

    private static List<OpenLineage.RunEvent> load(List<Path> inputs)
            throws IOException
    {
        List<OpenLineage.RunEvent> events = new ArrayList<>();
        for (Path input : inputs) {
            if (Files.isDirectory(input)) {
                try (Stream<Path> files = Files.list(input)) {
                    for (Path file : files.filter(p -> p.toString().endsWith(".json")).sorted().toList()) {
                        events.add(OpenLineageClientUtils.runEventFromJson(Files.readString(file)));
                    }
                }
            }
            else if (input.toString().endsWith(".json")) {
                events.add(OpenLineageClientUtils.runEventFromJson(Files.readString(input)));
            }
            else {
                for (String line : Files.readAllLines(input, StandardCharsets.UTF_8)) {
                    if (!line.isBlank()) {
                        events.add(OpenLineageClientUtils.runEventFromJson(line));
                    }
                }
            }
        }
        return events;
    }

    private static String truncate(String s, int max)
    {
        return s.length() <= max ? s : s.substring(0, max) + "...";
    }

    private static String quote(String s)
    {
        StringBuilder b = new StringBuilder(s.length() + 2).append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                case '\n' -> b.append("\\n");
                case '\r' -> b.append("\\r");
                case '\t' -> b.append("\\t");
                default -> {
                    if (c < 0x20) {
                        b.append(String.format("\\u%04x", (int) c));
                    }
                    else {
                        b.append(c);
                    }
                }
            }
        }
        return b.append('"').toString();
    }
}
