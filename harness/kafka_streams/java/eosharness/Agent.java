package eosharness;

import java.lang.instrument.Instrumentation;

/**
 * The store JVM's own Java agent ({@code -javaagent} on the store server's jar): it keeps the JVM's
 * {@link Instrumentation} and does nothing else, so a JVM starts with no class transformer (its classes
 * load from the class-data archive untouched). Byteman's agent, with a mutant's rules, is installed through
 * it only when a mutant of Kafka's code is opened (the crash points are woven into Kafka's classes when the
 * store server is built, {@link Weave}).
 */
public final class Agent {
    private static volatile Instrumentation instrumentation;

    private Agent() {
    }

    public static void premain(String args, Instrumentation inst) {
        instrumentation = inst;
    }

    public static void agentmain(String args, Instrumentation inst) {
        instrumentation = inst;
    }

    static Instrumentation instrumentation() {
        return instrumentation;
    }
}
