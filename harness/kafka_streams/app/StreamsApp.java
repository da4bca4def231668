package eosharness.app;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.processor.StateRestoreListener;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.query.QueryResult;
import org.apache.kafka.streams.query.RangeQuery;
import org.apache.kafka.streams.query.StateQueryRequest;
import org.apache.kafka.streams.query.StateQueryResult;
import org.apache.kafka.streams.query.WindowRangeQuery;
import org.apache.kafka.streams.state.KeyValueIterator;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.RocksDBConfigSetter;
import org.apache.kafka.streams.state.Stores;
import org.apache.kafka.streams.state.KeyValueBytesStoreSupplier;
import org.apache.kafka.streams.state.ValueAndTimestamp;
import org.apache.kafka.streams.state.WindowStore;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.GlobalKTable;
import org.apache.kafka.streams.StoreQueryParameters;
import org.apache.kafka.streams.state.QueryableStoreTypes;
import org.apache.kafka.streams.state.ReadOnlyKeyValueStore;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Windowed;
import org.rocksdb.Options;

/**
 * The Kafka Streams application the harness kills: a key-value aggregate. Each input record (key, "SEQ,DELTA")
 * adds DELTA to the key's sum in the store "sums" (changelogged; RocksDB or in memory) and sends (key,
 * "SEQ,SUM") to the output topic. Run with KEY=VALUE arguments (bootstrap, app, input, output, state,
 * guarantee, tx, store, threads, commit_ms, memtable_kb, pad, instance).
 *
 * It speaks to the harness in lines: on stdout "STATE OLD NEW" (then "THREAD name" per stream thread once
 * RUNNING), "RESTORE_START store partition start end THREAD", "RESTORE_END store partition restored ms THREAD",
 * "POINT name hit THREAD" (a crash point reached: the thread then waits for the harness's SIGKILL),
 * "TASK_START task THREAD" / "TASK_CLOSE task THREAD" (the aggregate's processor of a task initialised or closed
 * on that stream thread), "STORE {json}" / "STORE_ERROR why" (the answer to QUERY), "CLOSED"; on stdin
 * "QUERY" (the store read with IsolationLevel.READ_COMMITTED, interactive queries v2), "ARM NAME@N" (the crash
 * point NAME fires at its Nth hit from now), "RELEASE" (the thread at a point goes on: a zombie resumed) and
 * "STOP" (a clean close; "STOP NAME@N": with the point NAME of the close armed first).
 */
public final class StreamsApp {
    static final String STORE = "sums";
    static final String RATES = "rates";  // the stream-table join's table
    static final PrintStream OUT = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), true,
                                                   StandardCharsets.UTF_8);

    static synchronized void say(String line) {
        OUT.println(line);
        OUT.flush();
    }

    /** A crash point, reached from a Byteman rule: the armed one (-Deosharness.arm=NAME@N) at its Nth hit
     *  says so and blocks its thread forever (the harness kills the JVM, or freezes it). */
    public static final class Points {
        static final Map<String, AtomicInteger> HITS = new ConcurrentHashMap<>();
        static volatile String armed = System.getProperty("eosharness.arm", "");

        /** Arm NAME@N from now on (hits counted afresh): the harness arms a commit's point with the input. */
        static void arm(String point) {
            HITS.clear();
            armed = point;
        }

        public static boolean reach(String name) {
            String now = armed;
            if (now.isEmpty() || !now.startsWith(name + "@")) return false;
            int hit = HITS.computeIfAbsent(name, n -> new AtomicInteger()).incrementAndGet();
            if (!now.equals(name + "@" + hit)) return false;
            say("POINT " + name + " " + hit + " " + Thread.currentThread().getName());
            while (!released) {  // until the harness kills the JVM, or froze it and lets it go on (a zombie)
                try { Thread.sleep(50); } catch (InterruptedException e) { /* keep waiting */ }
            }
            return false;
        }

        static volatile boolean released;
        static final java.util.concurrent.atomic.AtomicBoolean ZOMBIE_SAID = new java.util.concurrent.atomic.AtomicBoolean();

        /** Whether the harness let the thread at the point go on (RELEASE). */
        public static boolean released() {
            return released;
        }

        /** What the zombie's transaction came to, said once: ZOMBIE_COMMITTED or ZOMBIE_FENCED. */
        public static void zombie(String outcome, Object detail) {
            if (!ZOMBIE_SAID.compareAndSet(false, true)) return;
            StringBuilder text = new StringBuilder(String.valueOf(detail));
            for (Throwable cause = detail instanceof Throwable ? ((Throwable) detail).getCause() : null; cause != null;
                 cause = cause.getCause()) {
                text.append(" <- ").append(cause);
            }
            say(outcome + " " + text.toString().replace('\n', ' '));
        }
    }

    /** RocksDB with a small memtable (memtable_kb): it flushes to disk within a short run. */
    public static final class SmallMemtable implements RocksDBConfigSetter {
        public void setConfig(String storeName, Options options, Map<String, Object> configs) {
            long kb = Long.parseLong(String.valueOf(configs.getOrDefault("eosharness.memtable.kb", "0")));
            if (kb > 0) options.setWriteBufferSize(kb * 1024);
        }
        public void close(String storeName, Options options) { }
    }

    static final class Aggregate implements Processor<String, String, String, String> {
        final String pad;
        KeyValueStore<String, String> store;
        ProcessorContext<String, String> context;

        Aggregate(int pad) { this.pad = "x".repeat(pad); }

        public void init(ProcessorContext<String, String> context) {
            this.context = context;
            this.store = context.getStateStore(STORE);
            say("TASK_START " + context.taskId() + " " + Thread.currentThread().getName());
        }

        public void close() {
            say("TASK_CLOSE " + context.taskId() + " " + Thread.currentThread().getName());
        }

        public void process(Record<String, String> record) {
            String[] parts = record.value().split(",");
            String old = store.get(record.key());
            long sum = (old == null ? 0 : Long.parseLong(old.split(";")[0])) + Long.parseLong(parts[1]);
            store.put(record.key(), sum + ";" + pad);
            context.forward(record.withValue(parts[0] + "," + sum));
        }
    }

    /** The windowed aggregate: each record's delta added to its key's sum in its tumbling window of
     *  window_ms (by the record's timestamp) in the window store "sums"; ("SEQ,SUM") sent on. */
    static final class WindowedAggregate implements Processor<String, String, String, String> {
        final String pad;
        final long size;
        WindowStore<String, String> store;
        ProcessorContext<String, String> context;

        WindowedAggregate(int pad, long size) { this.pad = "x".repeat(pad); this.size = size; }

        public void init(ProcessorContext<String, String> context) {
            this.context = context;
            this.store = context.getStateStore(STORE);
            say("TASK_START " + context.taskId() + " " + Thread.currentThread().getName());
        }

        public void close() {
            say("TASK_CLOSE " + context.taskId() + " " + Thread.currentThread().getName());
        }

        public void process(Record<String, String> record) {
            String[] parts = record.value().split(",");
            long start = record.timestamp() - record.timestamp() % size;
            String old = store.fetch(record.key(), start);
            long sum = (old == null ? 0 : Long.parseLong(old.split(";")[0])) + Long.parseLong(parts[1]);
            store.put(record.key(), sum + ";" + pad, start);
            context.forward(record.withValue(parts[0] + "," + sum));
        }
    }

    static void queryWindows(KafkaStreams streams) {
        try {
            StateQueryRequest<KeyValueIterator<Windowed<String>, String>> request = StateQueryRequest.inStore(STORE)
                .withQuery(WindowRangeQuery.<String, String>withWindowStartRange(Instant.EPOCH, Instant.ofEpochMilli(Long.MAX_VALUE / 2)))
                .withIsolationLevel(IsolationLevel.READ_COMMITTED);
            StateQueryResult<KeyValueIterator<Windowed<String>, String>> result = streams.query(request);
            Map<String, String> all = new TreeMap<>();
            for (Map.Entry<Integer, QueryResult<KeyValueIterator<Windowed<String>, String>>> e : result.getPartitionResults().entrySet()) {
                QueryResult<KeyValueIterator<Windowed<String>, String>> part = e.getValue();
                if (part.isFailure()) {
                    say("STORE_ERROR partition " + e.getKey() + ": " + part.getFailureReason() + " " + part.getFailureMessage());
                    return;
                }
                try (KeyValueIterator<Windowed<String>, String> it = part.getResult()) {
                    while (it.hasNext()) {
                        KeyValue<Windowed<String>, String> kv = it.next();
                        all.put(kv.key.key() + "@" + kv.key.window().start(), kv.value.split(";")[0]);
                    }
                }
            }
            StringBuilder b = new StringBuilder("{");
            for (Map.Entry<String, String> e : all.entrySet()) {
                if (b.length() > 1) b.append(',');
                b.append(json(e.getKey())).append(':').append(e.getValue());
            }
            say("STORE " + result.getPartitionResults().keySet() + " " + b.append('}'));
        } catch (RuntimeException e) {
            say("STORE_ERROR " + e.getClass().getSimpleName() + ": " + String.valueOf(e.getMessage()).replace('\n', ' '));
        }
    }

    static String json(String s) {
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    /** The store STORE (and with the join the table RATES, as "rate:KEY"), read committed: "STORE [partitions] {json}". */
    static void query(KafkaStreams streams, boolean join, boolean global) {
        try {
            Map<String, String> all = new TreeMap<>();
            Object partitions = queryInto(streams, STORE, "", all);
            if (partitions == null) return;
            if (global) {  // a global store: interactive queries v1 (v2 does not query global stores)
                ReadOnlyKeyValueStore<String, String> rates = streams.store(
                    StoreQueryParameters.fromNameAndType(RATES, QueryableStoreTypes.<String, String>keyValueStore()));
                try (KeyValueIterator<String, String> it = rates.all()) {
                    while (it.hasNext()) {
                        KeyValue<String, String> kv = it.next();
                        all.put("rate:" + kv.key, kv.value.split(";")[0]);
                    }
                }
            } else if (join && queryInto(streams, RATES, "rate:", all) == null) return;
            StringBuilder b = new StringBuilder("{");
            for (Map.Entry<String, String> e : all.entrySet()) {
                if (b.length() > 1) b.append(',');
                b.append(json(e.getKey())).append(':').append(e.getValue());
            }
            say("STORE " + partitions + " " + b.append('}'));
        } catch (RuntimeException e) {
            say("STORE_ERROR " + e.getClass().getSimpleName() + ": " + String.valueOf(e.getMessage()).replace('\n', ' '));
        }
    }

    /** One key-value store's entries (a value's part before ';'; a table's value out of its ValueAndTimestamp)
     *  put into ``all`` under ``prefix``+key; the partitions that answered, or null (STORE_ERROR said). */
    @SuppressWarnings({"unchecked", "rawtypes"})
    static Object queryInto(KafkaStreams streams, String store, String prefix, Map<String, String> all) {
        StateQueryRequest<KeyValueIterator<String, Object>> request = StateQueryRequest.inStore(store)
            .withQuery((RangeQuery) RangeQuery.<String, Object>withNoBounds())
            .withIsolationLevel(IsolationLevel.READ_COMMITTED);
        StateQueryResult<KeyValueIterator<String, Object>> result = streams.query(request);
        for (Map.Entry<Integer, QueryResult<KeyValueIterator<String, Object>>> e : result.getPartitionResults().entrySet()) {
            QueryResult<KeyValueIterator<String, Object>> part = e.getValue();
            if (part.isFailure()) {
                say("STORE_ERROR " + store + " partition " + e.getKey() + ": " + part.getFailureReason() + " " + part.getFailureMessage());
                return null;
            }
            try (KeyValueIterator<String, Object> it = part.getResult()) {
                while (it.hasNext()) {
                    KeyValue<String, Object> kv = it.next();
                    Object v = kv.value instanceof ValueAndTimestamp ? ((ValueAndTimestamp) kv.value).value() : kv.value;
                    all.put(prefix + kv.key, String.valueOf(v).split(";")[0]);
                }
            }
        }
        return result.getPartitionResults().keySet();
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> a = new HashMap<>();
        for (String arg : args) {
            int eq = arg.indexOf('=');
            a.put(arg.substring(0, eq), arg.substring(eq + 1));
        }
        boolean memory = "memory".equals(a.get("store"));
        int pad = Integer.parseInt(a.getOrDefault("pad", "0"));
        long windowMs = Long.parseLong(a.getOrDefault("window_ms", "0"));
        boolean global = a.containsKey("global");  // the table a GlobalKTable of this topic
        boolean join = global || a.containsKey("table");
        Topology topology;
        if (join) {  // the stream-table join: the input left-joined with the KTable "rates" (its own changelog)
            StreamsBuilder builder = new StreamsBuilder();
            builder.addStateStore(Stores.keyValueStoreBuilder(
                memory ? Stores.inMemoryKeyValueStore(STORE) : Stores.persistentKeyValueStore(STORE),
                Serdes.String(), Serdes.String()).withCachingDisabled());
            KeyValueBytesStoreSupplier rates = memory ? Stores.inMemoryKeyValueStore(RATES)
                                                      : Stores.persistentTimestampedKeyValueStore(RATES);
            Materialized<String, String, KeyValueStore<org.apache.kafka.common.utils.Bytes, byte[]>> materialized =
                Materialized.<String, String>as(rates).withKeySerde(Serdes.String()).withValueSerde(Serdes.String())
                    .withCachingDisabled();
            org.apache.kafka.streams.kstream.ValueJoiner<String, String, String> times = (value, rate) -> {
                String[] parts = value.split(",");  // "SEQ,DELTA" -> "SEQ,DELTA*RATE" (rate 1 while none)
                return parts[0] + "," + Long.parseLong(parts[1]) * (rate == null ? 1 : Long.parseLong(rate.split(";")[0]));
            };
            org.apache.kafka.streams.kstream.KStream<String, String> input =
                builder.stream(a.get("input"), Consumed.with(Serdes.String(), Serdes.String()));
            org.apache.kafka.streams.kstream.KStream<String, String> joined;
            if (global) {
                GlobalKTable<String, String> table = builder.globalTable(a.get("global"),
                    Consumed.with(Serdes.String(), Serdes.String()), materialized);
                joined = input.leftJoin(table, (key, value) -> key, times);
            } else {
                KTable<String, String> table = builder.table(a.get("table"), Consumed.with(Serdes.String(), Serdes.String()),
                    materialized);
                joined = input.leftJoin(table, times);
            }
            joined.process(() -> new Aggregate(pad), STORE)
                .to(a.get("output"));
            topology = builder.build();
        } else {
            topology = new Topology();
            topology.addSource("input", a.get("input"));
            if (windowMs > 0) {  // the windowed aggregate: tumbling windows, kept retention_ms
                Duration retention = Duration.ofMillis(Long.parseLong(a.get("retention_ms"))), size = Duration.ofMillis(windowMs);
                topology.addProcessor("aggregate", () -> new WindowedAggregate(pad, windowMs), "input");
                topology.addStateStore(Stores.windowStoreBuilder(
                    memory ? Stores.inMemoryWindowStore(STORE, retention, size, false)
                           : Stores.persistentWindowStore(STORE, retention, size, false),
                    Serdes.String(), Serdes.String()).withCachingDisabled(), "aggregate");
            } else {
                topology.addProcessor("aggregate", () -> new Aggregate(pad), "input");
                topology.addStateStore(Stores.keyValueStoreBuilder(
                    memory ? Stores.inMemoryKeyValueStore(STORE) : Stores.persistentKeyValueStore(STORE),
                    Serdes.String(), Serdes.String()).withCachingDisabled(), "aggregate");
            }
            topology.addSink("output", a.get("output"), "aggregate");
        }

        Properties p = new Properties();
        p.put("application.id", a.get("app"));
        p.put("bootstrap.servers", a.get("bootstrap"));
        p.put("state.dir", a.get("state"));
        p.put("processing.guarantee", a.getOrDefault("guarantee", "exactly_once_v2"));
        p.put("enable.transactional.statestores", a.getOrDefault("tx", "true"));
        p.put("commit.interval.ms", a.getOrDefault("commit_ms", "100"));
        p.put("num.stream.threads", a.getOrDefault("threads", "1"));
        p.put("statestore.cache.max.bytes", "0");
        p.put("replication.factor", "1");
        p.put("default.key.serde", Serdes.StringSerde.class.getName());
        p.put("default.value.serde", Serdes.StringSerde.class.getName());
        p.put("rocksdb.config.setter", SmallMemtable.class.getName());
        p.put("eosharness.memtable.kb", a.getOrDefault("memtable_kb", "0"));
        // A restarted instance takes its place in the group at once (static membership), not after a session.
        p.put("main.consumer.group.instance.id", a.get("app") + "-" + a.getOrDefault("instance", "0"));
        p.put("main.consumer.session.timeout.ms", "10000");
        p.put("main.consumer.heartbeat.interval.ms", "1000");
        p.put("main.consumer.max.poll.records", a.getOrDefault("max_poll", "25"));
        p.put("producer.linger.ms", "5");
        if (a.containsKey("upgrade_from")) p.put("upgrade.from", a.get("upgrade_from"));  // a rolling upgrade

        KafkaStreams streams = new KafkaStreams(topology, p);
        streams.setStateListener((now, old) -> {
            say("STATE " + old + " " + now);
            if (now == KafkaStreams.State.RUNNING) {  // its threads' names: APP-PROCESSID-StreamThread-N, whose
                try {                                 // transactional id is APP-PROCESSID-N (exactly_once_v2)
                    for (org.apache.kafka.streams.ThreadMetadata t : streams.metadataForLocalThreads()) say("THREAD " + t.threadName());
                } catch (RuntimeException e) { /* not running any more */ }
            }
        });
        Map<TopicPartition, Long> restoreStarted = new ConcurrentHashMap<>();
        streams.setGlobalStateRestoreListener(new StateRestoreListener() {
            public void onRestoreStart(TopicPartition tp, String store, long start, long end) {
                restoreStarted.put(tp, System.nanoTime());
                say("RESTORE_START " + store + " " + tp.partition() + " " + start + " " + end + " " + Thread.currentThread().getName());
            }
            public void onBatchRestored(TopicPartition tp, String store, long batchEnd, long restored) { }
            public void onRestoreEnd(TopicPartition tp, String store, long restored) {
                Long t0 = restoreStarted.remove(tp);
                long ms = t0 == null ? -1 : (System.nanoTime() - t0) / 1_000_000;
                say("RESTORE_END " + store + " " + tp.partition() + " " + restored + " " + ms + " " + Thread.currentThread().getName());
            }
        });
        streams.setUncaughtExceptionHandler(e -> {
            StringBuilder text = new StringBuilder(e.toString());
            for (Throwable cause = e.getCause(); cause != null; cause = cause.getCause()) text.append(" <- ").append(cause);
            say("UNCAUGHT " + text.toString().replace('\n', ' '));
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        streams.start();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.equals("QUERY")) { if (windowMs > 0) queryWindows(streams); else query(streams, join, global); }
            else if (line.equals("RELEASE")) { Points.released = true; say("RELEASED"); }
            else if (line.startsWith("ARM ")) { Points.arm(line.substring(4).trim()); say("ARMED " + line.substring(4).trim()); }
            else if (line.startsWith("STOP")) {  // "STOP NAME@N": a close point armed, then the clean close
                String point = line.substring(4).trim();
                if (!point.isEmpty()) { Points.arm(point); say("ARMED " + point); }
                break;
            }
        }
        streams.close(Duration.ofSeconds(30));
        say("CLOSED");
        System.exit(0);
    }
}
