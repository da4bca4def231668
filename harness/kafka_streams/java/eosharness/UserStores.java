package eosharness;

import java.io.File;
import java.lang.reflect.Constructor;
import java.net.URL;
import java.net.URLClassLoader;
import java.util.HashMap;
import java.util.Map;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.processor.StateStore;
import org.apache.kafka.streams.state.KeyValueBytesStoreSupplier;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.StoreBuilder;

/**
 * A user's own key-value store ({@code eos-harness verify jvm:CLASS@PATH}): the class {@code CLASS}, loaded
 * from {@code PATH} (a jar or a folder of classes) over Kafka's own jars, is a {@code KeyValueBytesStoreSupplier}
 * (opened as Kafka's suppliers are: {@code Stores.keyValueStoreBuilder}, change logging on, caching off) or a
 * {@code StoreBuilder} of a {@code KeyValueStore<Bytes, byte[]>} (built as it is). Made with a public
 * constructor taking the store's name, else a public one taking nothing.
 */
final class UserStores {
    private static final Map<String, ClassLoader> LOADERS = new HashMap<>(); // one per classpath, kept for the JVM

    private UserStores() {
    }

    static Object make(String className, String classpath, String name) throws Exception {
        ClassLoader loader = LOADERS.get(classpath);
        if (loader == null) {
            loader = new URLClassLoader(new URL[] {new File(classpath).toURI().toURL()}, StoreServer.class.getClassLoader());
            LOADERS.put(classpath, loader);
        }
        Class<?> type = Class.forName(className, true, loader);
        if (!KeyValueBytesStoreSupplier.class.isAssignableFrom(type) && !StoreBuilder.class.isAssignableFrom(type)) {
            throw new IllegalArgumentException(className + " is neither a KeyValueBytesStoreSupplier nor a StoreBuilder "
                    + "(org.apache.kafka.streams.state)");
        }
        try {
            Constructor<?> named = type.getConstructor(String.class);
            return named.newInstance(name);
        } catch (NoSuchMethodException none) {
            return type.getConstructor().newInstance();
        }
    }

    @SuppressWarnings("unchecked")
    static KeyValueStore<Bytes, byte[]> build(Object builder) {
        StateStore built = ((StoreBuilder<? extends StateStore>) builder).build();
        if (!(built instanceof KeyValueStore)) {
            throw new IllegalArgumentException(builder.getClass().getName() + " built a " + built.getClass().getName()
                    + ", not a KeyValueStore<Bytes, byte[]>");
        }
        return (KeyValueStore<Bytes, byte[]>) built;
    }
}
