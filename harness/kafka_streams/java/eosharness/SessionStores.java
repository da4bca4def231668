package eosharness;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.kstream.Windowed;
import org.apache.kafka.streams.kstream.internals.SessionWindow;
import org.apache.kafka.streams.state.KeyValueIterator;
import org.apache.kafka.streams.state.ReadOnlySessionStore;
import org.apache.kafka.streams.state.SessionBytesStoreSupplier;
import org.apache.kafka.streams.state.SessionStore;
import org.apache.kafka.streams.state.Stores;

/**
 * One of Kafka Streams' own session stores ({@code Stores.persistentSessionStore}, {@code Stores.inMemorySessionStore}),
 * built with {@code Stores.sessionStoreBuilder} (change logging on, caching off), serving the harness's window store
 * protocol (operations {@code w_*} of {@link StoreServer}) through zero-length sessions: the window starting at
 * {@code t} of a key is its session {@code [t, t]}. Every call is one of Kafka's session store methods:
 *
 * <ul>
 * <li>{@code put(key, value, t)}: {@code put(Windowed(key, SessionWindow(t, t)), value)} (a null value removes the
 * session, through the put path that observes stream time and drops expired sessions as a window store's put does);
 * <li>{@code fetch_window(key, t)}: {@code fetchSession(key, t, t)};
 * <li>{@code fetch(key, from, to)}: {@code findSessions(key, from, to)} (sessions ending at or after {@code from} and
 * starting at or before {@code to}: for a zero-length session, {@code from <= t <= to}), backward:
 * {@code backwardFindSessions};
 * <li>{@code fetch_range}/{@code fetch_all}: {@code findSessions(keyFrom, keyTo, from, to)} (null bounds: open);
 * <li>{@code all}: {@code fetch(null, null)}, backward: {@code backwardFetch(null, null)}.
 * </ul>
 *
 * A session store expires a session by its end as a window store expires a window by its start (both: at or before
 * stream time minus retention; stream time the greatest end, or start, put), so the window suite's retention
 * rules are the session store's for zero-length sessions. Merging sessions within the inactivity gap is the
 * processor's ({@code KStreamSessionWindowAggregate}: findSessions, then remove and put), not the store's.
 */
final class SessionStores {
    static SessionStore<Bytes, byte[]> store;
    private static ReadOnlySessionStore<Bytes, byte[]> committed;
    private static final Map<Integer, KeyValueIterator<Windowed<Bytes>, byte[]>> ITERATORS = new HashMap<>();
    private static final Map<Integer, Boolean> SINGLE = new HashMap<>(); // a single key's fetch: [start, value] items
    private static int iterators;

    private SessionStores() {
    }

    static JsonNode open(JsonNode request, String name, String kind) throws Exception {
        Duration retention = Duration.ofMillis(request.path("retention_period").asLong());
        SessionBytesStoreSupplier supplier;
        if (kind.equals("rocksdb")) {
            supplier = Stores.persistentSessionStore(name, retention);
        } else if (kind.equals("memory")) {
            supplier = Stores.inMemorySessionStore(name, retention);
        } else {
            throw new IllegalArgumentException("unknown session store kind " + kind);
        }
        SessionStore<Bytes, byte[]> built = Stores.sessionStoreBuilder(supplier, Serdes.Bytes(), Serdes.ByteArray())
                .withLoggingEnabled(new HashMap<>())
                .withCachingDisabled()
                .build();
        built.init(StoreServer.context(request), built);
        store = built;
        committed = StoreServer.readCommitted((ReadOnlySessionStore<Bytes, byte[]>) built, ReadOnlySessionStore.class);
        ObjectNode answer = StoreServer.opened(built, committed != built);
        answer.put("segment_interval", supplier.segmentIntervalMs());
        return answer;
    }

    static void close() {
        for (KeyValueIterator<Windowed<Bytes>, byte[]> it : ITERATORS.values()) {
            it.close();
        }
        ITERATORS.clear();
        SINGLE.clear();
        if (store != null) {
            store.close();
        }
        store = null;
        committed = null;
    }

    private static Windowed<Bytes> session(JsonNode key, long at) {
        return new Windowed<>(key(key), new SessionWindow(at, at));
    }

    static JsonNode handle(String op, JsonNode request) throws Exception {
        JsonNodeFactory nodes = JsonNodeFactory.instance;
        if (store == null) {
            throw new IllegalStateException("no session store is open");
        }
        switch (op) {
            case "put":
                store.put(session(request.path("key"), request.path("start").asLong()), value(request.path("value")));
                return nodes.nullNode();
            case "restore": {
                // The changelog replayed as Kafka's restore does (each record as a put), then committed.
                for (JsonNode record : request.path("records")) {
                    store.put(session(record.get(0), record.get(1).asLong()), value(record.get(2)));
                }
                store.commit(new HashMap<>());
                return nodes.nullNode();
            }
            case "fetch_window": {
                ReadOnlySessionStore<Bytes, byte[]> view = request.path("committed").asBoolean(false) ? committed : store;
                long at = request.path("start").asLong();
                byte[] found = view.fetchSession(key(request.path("key")), at, at);
                return found == null ? nodes.nullNode() : nodes.textNode(StoreServer.encode(found));
            }
            case "iter_open": {
                int number = ++iterators;
                ITERATORS.put(number, open(request));
                String method = request.path("method").asText();
                SINGLE.put(number, method.equals("fetch") || method.equals("backward_fetch"));
                return nodes.numberNode(number);
            }
            case "iter_next": {
                int number = request.path("id").asInt();
                KeyValueIterator<Windowed<Bytes>, byte[]> it = ITERATORS.get(number);
                if (it == null) {
                    return nodes.arrayNode();
                }
                return drain(it, request.path("n").asInt(), SINGLE.getOrDefault(number, false));
            }
            case "iter_close": {
                KeyValueIterator<Windowed<Bytes>, byte[]> it = ITERATORS.remove(request.path("id").asInt());
                SINGLE.remove(request.path("id").asInt());
                if (it != null) {
                    it.close();
                }
                return nodes.nullNode();
            }
            default:
                throw new IllegalArgumentException("unknown session operation " + op);
        }
    }

    /** The iterator of one of Kafka's session fetches ({@code method} named as the window protocol's). */
    private static KeyValueIterator<Windowed<Bytes>, byte[]> open(JsonNode request) {
        ReadOnlySessionStore<Bytes, byte[]> view = request.path("committed").asBoolean(false) ? committed : store;
        String method = request.path("method").asText();
        JsonNode args = request.path("args");
        switch (method) {
            case "fetch":
                return view.findSessions(key(args.get(0)), args.get(1).asLong(), args.get(2).asLong());
            case "backward_fetch":
                return view.backwardFindSessions(key(args.get(0)), args.get(1).asLong(), args.get(2).asLong());
            case "fetch_range":
                return view.findSessions(keyOrNull(args.get(0)), keyOrNull(args.get(1)), args.get(2).asLong(),
                        args.get(3).asLong());
            case "backward_fetch_range":
                return view.backwardFindSessions(keyOrNull(args.get(0)), keyOrNull(args.get(1)), args.get(2).asLong(),
                        args.get(3).asLong());
            case "fetch_all":
                return view.findSessions(null, null, args.get(0).asLong(), args.get(1).asLong());
            case "backward_fetch_all":
                return view.backwardFindSessions(null, null, args.get(0).asLong(), args.get(1).asLong());
            case "all":
                return view.fetch(null, null);
            case "backward_all":
                return view.backwardFetch(null, null);
            default:
                throw new IllegalArgumentException("unknown session fetch " + method);
        }
    }

    /** Up to {@code n} sessions: [start, value] of a single key's fetch ({@code single}), [key, start, value] of the
     * others (every session the harness puts is zero-length: its start is its end). */
    private static JsonNode drain(KeyValueIterator<Windowed<Bytes>, byte[]> it, int n, boolean single) {
        ArrayNode items = JsonNodeFactory.instance.arrayNode();
        int taken = 0;
        while (taken < n && it.hasNext()) {
            KeyValue<Windowed<Bytes>, byte[]> next = it.next();
            ArrayNode item = items.addArray();
            if (!single) {
                item.add(StoreServer.encode(next.key.key().get()));
            }
            item.add(next.key.window().start());
            item.add(StoreServer.encode(next.value));
            taken++;
        }
        if (taken < n) {
            it.close(); // exhausted: Kafka's iterator closed at once
        }
        return items;
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
