package eosharness;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.File;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.processor.StateStore;
import org.apache.kafka.streams.processor.StateStoreContext;
import org.apache.kafka.streams.processor.TaskId;
import org.apache.kafka.streams.processor.api.MockProcessorContext;
import org.apache.kafka.streams.processor.internals.InternalProcessorContext;
import org.apache.kafka.streams.processor.internals.ProcessorRecordContext;
import org.apache.kafka.streams.state.KeyValueBytesStoreSupplier;
import org.apache.kafka.streams.state.KeyValueIterator;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.ReadOnlyKeyValueStore;
import org.apache.kafka.streams.state.Stores;
import org.jboss.byteman.agent.Retransformer;
import org.jboss.byteman.modules.ModuleSystem;
import org.jboss.byteman.modules.NonModuleSystem;

/**
 * One of Kafka Streams' own key-value stores, opened through the public {@code Stores} suppliers and
 * builders and initialised with a real {@code StateStoreContext} (kafka-streams-test-utils'
 * {@code MockProcessorContext}), serving eos-harness's store protocol as JSON lines: one request per
 * line on stdin, one answer per line on stdout ({"ok": value} or {"raise": [kind, message]}).
 *
 * <p>The JVM is the store's process: it opens and closes stores as asked (one at a time) and halts,
 * leaving its store as a crash would, when its stdin ends. A crash point (a Byteman rule calling
 * {@link #reach}) asks the harness over the same pipe whether to go on ({"point": name}); the harness
 * kills this process there when the point is armed.
 */
public final class StoreServer {
    private static final Base64.Encoder B64 = Base64.getEncoder();
    private static final Base64.Decoder UNB64 = Base64.getDecoder();
    private static BufferedReader in;
    private static PrintStream out;
    /** Whether crash points are reported to the harness (its request names the points armed, or says true while they are traced). */
    private static volatile boolean reporting;
    /** The points the current request names (reported alone: another point whose rule is installed goes on at once), or null for every point (traced). */
    private static volatile Set<String> reported;

    private static KeyValueStore<Bytes, byte[]> store;
    private static ReadOnlyKeyValueStore<Bytes, byte[]> committedView;
    private static boolean transactional;
    /** The mutant of Kafka's code the open store runs with ("" for none): its Byteman rules test {@link #mutant}. */
    private static volatile String mutant = "";

    private StoreServer() {
    }

    public static void main(String[] args) throws Exception {
        in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8), 1 << 16);
        out = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), false, StandardCharsets.UTF_8);
        System.setOut(System.err); // whatever Kafka or RocksDB print goes to stderr, never into the protocol
        out.println("{\"ready\":true}");
        out.flush();
        while (true) {
            String line = in.readLine();
            if (line == null) {
                Runtime.getRuntime().halt(0); // the harness is gone: die as a crash would, the store not closed
            }
            JsonNode request = Json.parse(line);
            JsonNode asked = request.path("points");
            reporting = asked.isArray() ? asked.size() > 0 : asked.asBoolean(false);
            if (asked.isArray()) {
                Set<String> named = new HashSet<>();
                asked.forEach(name -> named.add(name.asText()));
                reported = named;
            } else {
                reported = null;
            }
            needRules(request); // before the request runs: a mutant's rules are in place
            ObjectNode answer = JsonNodeFactory.instance.objectNode();
            try {
                answer.set("ok", handle(request));
            } catch (Throwable error) { // every failure is the store's answer: the harness judges it
                ArrayNode raised = answer.putArray("raise");
                raised.add(error.getClass().getName());
                StringWriter trace = new StringWriter();
                error.printStackTrace(new PrintWriter(trace));
                raised.add(String.valueOf(error.getMessage()) + "\n" + trace);
            }
            out.println(Json.write(answer));
            out.flush();
        }
    }

    /** Byteman's retransformer, installed through this JVM's agent the first time a request needs a rule. */
    private static Retransformer byteman;
    /** Every rule of the script (the mutants'), by name, in the script's order. */
    private static Map<String, String> rules;
    /** The rules installed in this JVM (each once, for the JVM's life). */
    private static final Set<String> installed = new HashSet<>();

    /**
     * Install the rules of the mutant a request opens, unless this JVM has them already. Byteman's agent
     * itself is installed with the first (through {@link Agent}, no rule loaded at start), and each rule
     * retransforms the classes of Kafka's it names that are loaded already. A JVM that opens no mutant never
     * loads Byteman. (The crash points are no rules: they are woven into Kafka's classes, {@link Weave}.)
     */
    private static void needRules(JsonNode request) {
        List<String> names = new ArrayList<>();
        String opened = request.path("mutant").asText("");
        if (!opened.isEmpty()) {
            names.add("mutant." + opened);
        }
        if (!names.isEmpty()) {
            install(names);
        }
    }

    private static synchronized void install(List<String> names) {
        try {
            if (rules == null) {
                rules = parseRules(new String(java.nio.file.Files.readAllBytes(
                        java.nio.file.Paths.get(System.getProperty("eosharness.rules"))), StandardCharsets.UTF_8));
            }
            List<String> texts = new ArrayList<>();
            List<String> added = new ArrayList<>();
            rules.forEach((name, text) -> {
                // a mutant's rules: mutant.NAME and its further ones, mutant.NAME.2, ...
                boolean asked = names.contains(name) || names.stream().anyMatch(n -> name.startsWith(n + "."));
                if (asked && !installed.contains(name)) {
                    texts.add(text);
                    added.add(name);
                }
            });
            if (texts.isEmpty()) {
                return;
            }
            if (byteman == null) {
                java.lang.instrument.Instrumentation inst = Agent.instrumentation();
                if (inst == null) {
                    throw new IllegalStateException("the store JVM was started without its agent (-javaagent)");
                }
                ModuleSystem modules = new NonModuleSystem();
                modules.initialize("");
                Retransformer made = new Retransformer(inst, modules, new ArrayList<>(), new ArrayList<>(), true);
                inst.addTransformer(made, true);
                byteman = made;
            }
            StringWriter said = new StringWriter();
            byteman.installScript(texts, added, new PrintWriter(said));
            installed.addAll(added);
        } catch (Throwable error) { // the harness's failure, not the store's: the JVM ends, saying why on stderr
            System.err.println("eos-harness: could not install Byteman's rules " + names + ":");
            error.printStackTrace();
            System.err.flush();
            Runtime.getRuntime().halt(70);
        }
    }

    /** The rules of a Byteman script by name ("RULE name" ... "ENDRULE"), in order. */
    static Map<String, String> parseRules(String script) {
        Map<String, String> parsed = new LinkedHashMap<>();
        String name = null;
        StringBuilder text = new StringBuilder();
        for (String line : script.split("\n")) {
            if (line.startsWith("RULE ")) {
                name = line.substring(5).trim();
                text.setLength(0);
            }
            if (name != null) {
                text.append(line).append('\n');
                if (line.trim().equals("ENDRULE")) {
                    parsed.put(name, text.toString());
                    name = null;
                }
            }
        }
        return parsed;
    }

    /** Whether the harness asks for the crash points now (a rule's condition: unarmed, a rule does no more). */
    public static boolean reporting() {
        return reporting;
    }

    /** Called at each crash point (woven into Kafka's classes, {@link Weave}): ask the harness whether to go on
     * (a point the request does not name goes on at once). */
    public static void reach(String point) {
        Set<String> named = reported;
        if (!reporting || (named != null && !named.contains(point))) {
            return;
        }
        synchronized (StoreServer.class) {
            out.println("{\"point\":" + Json.quote(point) + "}");
            out.flush();
            try {
                String reply = in.readLine();
                if (reply != null && reply.contains("\"go\"")) {
                    return;
                }
            } catch (java.io.IOException ignored) {
                // the harness is gone
            }
            Runtime.getRuntime().halt(137); // killed at this point: nothing after it runs
        }
    }

    /** Whether the open store runs with the mutant {@code name} (a Byteman rule of a mutant acts only then). */
    public static boolean mutant(String name) {
        return name.equals(mutant);
    }

    /** A mutant's commit: each offset one less, the last record's offset instead of the next one to read. */
    public static Map<TopicPartition, Long> lastRecordOffsets(Map<TopicPartition, Long> offsets) {
        Map<TopicPartition, Long> last = new HashMap<>();
        offsets.forEach((partition, offset) -> last.put(partition, offset == null ? null : offset - 1));
        return last;
    }

    /** A mutant's flush (removals-lost-at-commit): the staged removals (empty values) taken out of a transaction
     * buffer's pending writes before they are applied. */
    public static void dropRemovals(Map<?, ?> pending) {
        pending.values().removeIf(staged -> staged instanceof java.util.Optional && ((java.util.Optional<?>) staged).isEmpty());
    }

    /** The open store, key-value, window or session (commit, committedOffset and close are every store's). */
    private static StateStore current() {
        if (store != null) {
            return store;
        }
        if (WindowStores.store != null) {
            return WindowStores.store;
        }
        if (SessionStores.store != null) {
            return SessionStores.store;
        }
        throw new IllegalStateException("no store is open");
    }

    private static JsonNode handle(JsonNode request) throws Exception {
        String op = request.path("op").asText();
        JsonNodeFactory nodes = JsonNodeFactory.instance;
        if (op.startsWith("w_")) {
            return SessionStores.store != null ? SessionStores.handle(op.substring(2), request)
                    : WindowStores.handle(op.substring(2), request);
        }
        switch (op) {
            case "open":
                return open(request);
            case "get":
                return bytes(store.get(key(request.path("key"))));
            case "put":
                store.put(key(request.path("key")), value(request.path("value")));
                return nodes.nullNode();
            case "put_all": {
                List<KeyValue<Bytes, byte[]>> entries = new ArrayList<>();
                for (JsonNode entry : request.path("entries")) {
                    entries.add(KeyValue.pair(key(entry.get(0)), value(entry.get(1))));
                }
                store.putAll(entries);
                return nodes.nullNode();
            }
            case "delete":
                return bytes(store.delete(key(request.path("key"))));
            case "range":
                return listing(store.range(key(request.path("lo")), key(request.path("hi"))));
            case "all":
                return listing(store.all());
            case "rc_get":
                return bytes(committedView.get(key(request.path("key"))));
            case "rc_range":
                return listing(committedView.range(key(request.path("lo")), key(request.path("hi"))));
            case "rc_all":
                return listing(committedView.all());
            case "commit": {
                Map<TopicPartition, Long> offsets = new HashMap<>();
                for (JsonNode entry : request.path("offsets")) {
                    offsets.put(new TopicPartition(entry.get(0).asText(), entry.get(1).asInt()), entry.get(2).asLong());
                }
                current().commit(offsets);
                return nodes.nullNode();
            }
            case "committed_offset": {
                Long offset = current().committedOffset(new TopicPartition(request.path("topic").asText(),
                        request.path("partition").asInt()));
                return offset == null ? nodes.nullNode() : nodes.numberNode(offset);
            }
            case "close":
                if (store == null) {
                    WindowStores.close();
                    SessionStores.close();
                    return nodes.nullNode();
                }
                store.close();
                store = null;
                committedView = null;
                return nodes.nullNode();
            case "idle": // whether no store is open (a JVM whose store's process ended goes back to its pool only then)
                return nodes.booleanNode(store == null && WindowStores.store == null && SessionStores.store == null);
            case "exit": // a normal exit (a class-data-sharing archive is written at it)
                out.println("{\"ok\":null}");
                out.flush();
                System.exit(0);
                return nodes.nullNode();
            default:
                throw new IllegalArgumentException("unknown operation " + op);
        }
    }

    /** A real {@code StateStoreContext} for a store opened under {@code request}'s settings. */
    static StateStoreContext context(JsonNode request) {
        transactional = request.path("transactional").asBoolean(false);
        mutant = request.path("mutant").asText("");
        Properties props = new Properties();
        props.put("application.id", request.path("application_id").asText("app"));
        props.put("bootstrap.servers", "127.0.0.1:9"); // never contacted: a MockProcessorContext sends nothing
        props.put("processing.guarantee", "exactly_once_v2");
        props.put("enable.transactional.statestores", String.valueOf(transactional)); // unknown to 4.3.1: ignored
        File stateDir = new File(request.path("state_dir").asText());
        stateDir.mkdirs(); // the task's directory, as the state directory of an application makes it
        MockProcessorContext<Object, Object> mock = new MockProcessorContext<>(props,
                TaskId.parse(request.path("task_id").asText("0_0")), stateDir);
        StateStoreContext context = mock.getStateStoreContext();
        if (context instanceof InternalProcessorContext) {
            // the change-logging layer reads the record context of each write (the mock's logChange sends nothing)
            ((InternalProcessorContext<?, ?>) context).setRecordContext(
                    new ProcessorRecordContext(0L, 0L, 0, "eos-harness-input", new RecordHeaders()));
        }
        return context;
    }

    static boolean transactional() {
        return transactional;
    }

    static String encode(byte[] value) {
        return B64.encodeToString(value);
    }

    static byte[] decode(String text) {
        return UNB64.decode(text);
    }

    private static JsonNode open(JsonNode request) throws Exception {
        if (store != null || WindowStores.store != null || SessionStores.store != null) {
            throw new IllegalStateException("a store is open already: close it first");
        }
        String name = request.path("name").asText("store");
        String kind = request.path("kind").asText();
        if (kind.endsWith("-window")) {
            return WindowStores.open(request, name, kind.substring(0, kind.length() - "-window".length()));
        }
        if (kind.endsWith("-session")) {
            return SessionStores.open(request, name, kind.substring(0, kind.length() - "-session".length()));
        }
        KeyValueBytesStoreSupplier supplier;
        KeyValueStore<Bytes, byte[]> userBuilt = null; // a user's StoreBuilder builds its own layers
        if (kind.equals("rocksdb")) {
            supplier = Stores.persistentKeyValueStore(name);
        } else if (kind.equals("memory")) {
            supplier = Stores.inMemoryKeyValueStore(name);
        } else if (kind.equals("user")) {
            Object made = UserStores.make(request.path("supplier").asText(), request.path("classpath").asText(), name);
            supplier = made instanceof KeyValueBytesStoreSupplier ? (KeyValueBytesStoreSupplier) made : null;
            userBuilt = supplier == null ? UserStores.build(made) : null;
        } else {
            throw new IllegalArgumentException("unknown store kind " + kind);
        }
        KeyValueStore<Bytes, byte[]> built = userBuilt != null ? userBuilt
                : Stores.keyValueStoreBuilder(supplier, Serdes.Bytes(), Serdes.ByteArray())
                .withLoggingEnabled(new HashMap<>())
                .withCachingDisabled()
                .build();
        StateStoreContext context = context(request);
        built.init(context, built);
        store = built;
        committedView = readCommitted((ReadOnlyKeyValueStore<Bytes, byte[]>) built, ReadOnlyKeyValueStore.class);
        return opened(built, committedView != built);
    }

    /** What the harness is told of a store it opened: persistent, managing its offsets, with a read-committed view. */
    static ObjectNode opened(StateStore built, boolean readCommittedView) {
        ObjectNode answer = JsonNodeFactory.instance.objectNode();
        answer.put("persistent", built.persistent());
        answer.put("manages_offsets", built.managesOffsets());
        answer.put("read_committed_view", readCommittedView);
        return answer;
    }

    /** Kafka's own read-committed view of {@code built} ({@code view.readOnly(IsolationLevel.READ_COMMITTED)},
     * KIP-892, 4.4.0 on; {@code view} the read-only interface of its kind: key-value, window, session); the store
     * itself where there is none (4.3.1) or the store is not transactional. */
    @SuppressWarnings("unchecked")
    static <V> V readCommitted(V built, Class<?> view) throws Exception {
        if (!transactional) {
            return built;
        }
        Class<?> isolation;
        Method readOnly;
        try {
            isolation = Class.forName("org.apache.kafka.common.IsolationLevel");
            readOnly = view.getMethod("readOnly", isolation);
        } catch (ClassNotFoundException | NoSuchMethodException absent) {
            return built;
        }
        return (V) readOnly.invoke(built, isolation.getField("READ_COMMITTED").get(null));
    }

    private static Bytes key(JsonNode node) {
        return Bytes.wrap(UNB64.decode(node.asText()));
    }

    private static byte[] value(JsonNode node) {
        return node == null || node.isNull() ? null : UNB64.decode(node.asText());
    }

    private static JsonNode bytes(byte[] value) {
        return value == null ? JsonNodeFactory.instance.nullNode() : JsonNodeFactory.instance.textNode(B64.encodeToString(value));
    }

    private static JsonNode listing(KeyValueIterator<Bytes, byte[]> iterator) {
        ArrayNode pairs = JsonNodeFactory.instance.arrayNode();
        try (KeyValueIterator<Bytes, byte[]> it = iterator) {
            while (it.hasNext()) {
                KeyValue<Bytes, byte[]> next = it.next();
                ArrayNode pair = pairs.addArray();
                pair.add(B64.encodeToString(next.key.get()));
                pair.add(B64.encodeToString(next.value));
            }
        }
        return pairs;
    }
}
