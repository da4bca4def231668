package eosharness;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.time.Duration;
import java.time.Instant;
import java.util.HashMap;
import java.util.Iterator;
import java.util.Map;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.kstream.Windowed;
import org.apache.kafka.streams.state.KeyValueIterator;
import org.apache.kafka.streams.state.ReadOnlyWindowStore;
import org.apache.kafka.streams.state.Stores;
import org.apache.kafka.streams.state.WindowBytesStoreSupplier;
import org.apache.kafka.streams.state.WindowStore;
import org.apache.kafka.streams.state.WindowStoreIterator;

/**
 * One of Kafka Streams' own window stores ({@code Stores.persistentWindowStore}, {@code Stores.inMemoryWindowStore},
 * no duplicates), built with {@code Stores.windowStoreBuilder} (change logging on, caching off), serving the
 * harness's window store protocol (operations {@code w_*} of {@link StoreServer}). Reads go through Kafka's own
 * methods; the read-committed ones through Kafka's {@code readOnly(IsolationLevel.READ_COMMITTED)} (KIP-892, 4.4.0)
 * where the store is transactional. An iterator can stay open across calls (opened by {@code w_iter_open},
 * read by {@code w_iter_next}), as the harness holds one open across expiry.
 */
final class WindowStores {
    static WindowStore<Bytes, byte[]> store;
    private static ReadOnlyWindowStore<Bytes, byte[]> committed;
    private static final Map<Integer, Iterator<?>> ITERATORS = new HashMap<>();
    private static int iterators;

    private WindowStores() {
    }

    static JsonNode open(JsonNode request, String name, String kind) throws Exception {
        Duration retention = Duration.ofMillis(request.path("retention_period").asLong());
        Duration size = Duration.ofMillis(request.path("window_size").asLong());
        WindowBytesStoreSupplier supplier;
        if (kind.equals("rocksdb")) {
            supplier = Stores.persistentWindowStore(name, retention, size, false);
        } else if (kind.equals("memory")) {
            supplier = Stores.inMemoryWindowStore(name, retention, size, false);
        } else {
            throw new IllegalArgumentException("unknown window store kind " + kind);
        }
        WindowStore<Bytes, byte[]> built = Stores.windowStoreBuilder(supplier, Serdes.Bytes(), Serdes.ByteArray())
                .withLoggingEnabled(new HashMap<>())
                .withCachingDisabled()
                .build();
        built.init(StoreServer.context(request), built);
        store = built;
        committed = StoreServer.readCommitted((ReadOnlyWindowStore<Bytes, byte[]>) built, ReadOnlyWindowStore.class);
        ObjectNode answer = StoreServer.opened(built, committed != built);
        answer.put("segment_interval", supplier.segmentIntervalMs());
        return answer;
    }

    static void close() {
        for (Iterator<?> it : ITERATORS.values()) {
            closeQuietly(it);
        }
        ITERATORS.clear();
        if (store != null) {
            store.close();
        }
        store = null;
        committed = null;
    }

    private static void closeQuietly(Iterator<?> it) {
        if (it instanceof KeyValueIterator) {
            ((KeyValueIterator<?, ?>) it).close();
        }
    }

    static JsonNode handle(String op, JsonNode request) throws Exception {
        JsonNodeFactory nodes = JsonNodeFactory.instance;
        if (store == null) {
            throw new IllegalStateException("no window store is open");
        }
        switch (op) {
            case "put":
                store.put(key(request.path("key")), value(request.path("value")), request.path("start").asLong());
                return nodes.nullNode();
            case "restore": {
                // The changelog replayed as Kafka's restore does (each record as a put: expired ones dropped, stream
                // time rebuilt), then committed: restored records are committed ones. The offsets are the store's own.
                for (JsonNode record : request.path("records")) {
                    store.put(key(record.get(0)), value(record.get(2)), record.get(1).asLong());
                }
                store.commit(new HashMap<>());
                return nodes.nullNode();
            }
            case "fetch_window": {
                ReadOnlyWindowStore<Bytes, byte[]> view = request.path("committed").asBoolean(false) ? committed : store;
                byte[] found = view.fetch(key(request.path("key")), request.path("start").asLong());
                return found == null ? nodes.nullNode() : nodes.textNode(StoreServer.encode(found));
            }
            case "read":
                return drain(open(request), Integer.MAX_VALUE);
            case "iter_open": {
                int number = ++iterators;
                ITERATORS.put(number, open(request));
                return nodes.numberNode(number);
            }
            case "iter_next": {
                int number = request.path("id").asInt();
                Iterator<?> it = ITERATORS.get(number);
                if (it == null) {
                    return nodes.arrayNode();
                }
                return drain(it, request.path("n").asInt());
            }
            case "iter_close": {
                Iterator<?> it = ITERATORS.remove(request.path("id").asInt());
                if (it != null) {
                    closeQuietly(it);
                }
                return nodes.nullNode();
            }
            default:
                throw new IllegalArgumentException("unknown window operation " + op);
        }
    }

    /** The iterator of one of Kafka's fetches: {@code method} of the store (or of its read-committed view). */
    private static Iterator<?> open(JsonNode request) {
        ReadOnlyWindowStore<Bytes, byte[]> view = request.path("committed").asBoolean(false) ? committed : store;
        String method = request.path("method").asText();
        JsonNode args = request.path("args");
        switch (method) {
            case "fetch":
                return view.fetch(key(args.get(0)), at(args.get(1)), at(args.get(2)));
            case "backward_fetch":
                return view.backwardFetch(key(args.get(0)), at(args.get(1)), at(args.get(2)));
            case "fetch_range":
                return view.fetch(keyOrNull(args.get(0)), keyOrNull(args.get(1)), at(args.get(2)), at(args.get(3)));
            case "backward_fetch_range":
                return view.backwardFetch(keyOrNull(args.get(0)), keyOrNull(args.get(1)), at(args.get(2)), at(args.get(3)));
            case "fetch_all":
                return view.fetchAll(at(args.get(0)), at(args.get(1)));
            case "backward_fetch_all":
                return view.backwardFetchAll(at(args.get(0)), at(args.get(1)));
            case "all":
                return view.all();
            case "backward_all":
                return view.backwardAll();
            default:
                throw new IllegalArgumentException("unknown window fetch " + method);
        }
    }

    /** Up to {@code n} items: [start, value] of a single key's fetch, [key, start, value] of the others. */
    @SuppressWarnings("unchecked")
    private static JsonNode drain(Iterator<?> it, int n) {
        ArrayNode items = JsonNodeFactory.instance.arrayNode();
        int taken = 0;
        while (taken < n && it.hasNext()) {
            Object next = it.next();
            ArrayNode item = items.addArray();
            KeyValue<?, byte[]> pair = (KeyValue<?, byte[]>) next;
            if (pair.key instanceof Windowed) {
                Windowed<Bytes> windowed = (Windowed<Bytes>) pair.key;
                item.add(StoreServer.encode(windowed.key().get()));
                item.add(windowed.window().start());
            } else {
                item.add((Long) pair.key);
            }
            item.add(StoreServer.encode(pair.value));
            taken++;
        }
        if (taken < n && it instanceof KeyValueIterator) {
            ((KeyValueIterator<?, ?>) it).close(); // exhausted: Kafka's iterator closed at once
        }
        return items;
    }

    private static Instant at(JsonNode millis) {
        return Instant.ofEpochMilli(millis.asLong());
    }

    private static Bytes key(JsonNode node) {
        return Bytes.wrap(StoreServer.decode(node.asText()));
    }

    private static Bytes keyOrNull(JsonNode node) {
        return node == null || node.isNull() ? null : key(node);
    }

    private static byte[] value(JsonNode node) {
        return node == null || node.isNull() ? null : StoreServer.decode(node.asText());
    }
}
