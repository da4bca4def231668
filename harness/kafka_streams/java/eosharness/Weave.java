package eosharness;

import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.FileOutputStream;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.jar.JarEntry;
import java.util.jar.JarFile;
import java.util.jar.JarOutputStream;
import org.jboss.byteman.objectweb.asm.ClassReader;
import org.jboss.byteman.objectweb.asm.ClassVisitor;
import org.jboss.byteman.objectweb.asm.ClassWriter;
import org.jboss.byteman.objectweb.asm.MethodVisitor;
import org.jboss.byteman.objectweb.asm.Opcodes;

/**
 * The crash points woven into copies of Kafka's classes when the store server is built (the ASM that Byteman
 * ships, at the places a Byteman rule's location names them), so that a store JVM starts with every point in
 * place and no rule is installed when a point is armed: installing one (Byteman's agent set up, the rule
 * parsed, Kafka's class parsed and rewritten, all in code no JIT has compiled yet) was 0.17 CPU-s of each JVM
 * life that armed a point, two fifths of it, and every crash is a JVM life.
 *
 * <p>{@code java eosharness.Weave OUT.jar SPEC JAR...}: each line of {@code SPEC} is a point, tab-separated:
 * its name, the class (binary name), the method's name (optionally with its parameter types in parentheses,
 * as Byteman's METHOD) and its location, one of Byteman's: {@code AT ENTRY}, {@code AT EXIT} (before each
 * return), {@code AT INVOKE m} or {@code AFTER INVOKE m} (the first call of {@code m} in the method's code,
 * {@code m} a method's name, optionally after its owner's binary name and a dot, optionally followed by
 * {@code ()} for no parameters). Every method of that name gets the point. The code woven is
 * {@code StoreServer.reach(name)}, which does nothing unless the harness asks about that point. The classes
 * are read from the {@code JAR}s (the first that has each) and written to {@code OUT.jar}, which goes before
 * them on the class path. Prints each point's name and how many places it was woven at (0: the class or
 * method is not in this version of Kafka, and the point is never reached).
 */
public final class Weave {
    private static final String REACH_OWNER = "eosharness/StoreServer";

    private Weave() {
    }

    /** One point: where it is woven. */
    static final class Point {
        final String name;
        final String className;
        final String method;
        final String parameters; // null: any
        final String where; // "ENTRY", "EXIT", "INVOKE", "AFTER"
        final String calledOwner; // internal name, or null for any owner
        final String calledName;
        final boolean calledNoArgs;
        int woven;

        Point(String line) {
            String[] fields = line.split("\t");
            if (fields.length != 4) {
                throw new IllegalArgumentException("not a point: " + line);
            }
            name = fields[0];
            className = fields[1];
            int paren = fields[2].indexOf('(');
            method = paren < 0 ? fields[2] : fields[2].substring(0, paren);
            parameters = paren < 0 ? null : fields[2].substring(paren);
            String location = fields[3].trim();
            if (location.equals("AT ENTRY")) {
                where = "ENTRY";
            } else if (location.equals("AT EXIT")) {
                where = "EXIT";
            } else if (location.startsWith("AT INVOKE ") || location.startsWith("AFTER INVOKE ")) {
                where = location.startsWith("AT ") ? "INVOKE" : "AFTER";
                String called = location.substring(location.indexOf("INVOKE ") + 7).trim();
                calledNoArgs = called.endsWith("()");
                if (calledNoArgs) {
                    called = called.substring(0, called.length() - 2);
                } else if (called.contains("(")) {
                    throw new IllegalArgumentException("parameter types of a called method are not supported: " + line);
                }
                int dot = called.lastIndexOf('.');
                calledOwner = dot < 0 ? null : called.substring(0, dot).replace('.', '/');
                calledName = called.substring(dot + 1);
                return;
            } else {
                throw new IllegalArgumentException("unknown location " + location + ": " + line);
            }
            calledOwner = null;
            calledName = null;
            calledNoArgs = false;
        }

        boolean matches(String methodName, String descriptor) {
            return methodName.equals(method) && (parameters == null || parametersMatch(descriptor));
        }

        private boolean parametersMatch(String descriptor) {
            String inside = parameters.substring(1, parameters.length() - 1).trim();
            List<String> wanted = new ArrayList<>();
            for (String type : inside.isEmpty() ? new String[0] : inside.split(",")) {
                wanted.add(type.trim());
            }
            org.jboss.byteman.objectweb.asm.Type[] actual = org.jboss.byteman.objectweb.asm.Type.getArgumentTypes(descriptor);
            if (actual.length != wanted.size()) {
                return false;
            }
            for (int i = 0; i < actual.length; i++) {
                String name = actual[i].getClassName();
                String want = wanted.get(i);
                if (!name.equals(want) && !name.endsWith("." + want)) {
                    return false;
                }
            }
            return true;
        }

        boolean isCall(String owner, String calledMethod, String descriptor) {
            return calledMethod.equals(calledName) && (calledOwner == null || calledOwner.equals(owner))
                    && (!calledNoArgs || descriptor.startsWith("()"));
        }
    }

    public static void main(String[] args) throws Exception {
        List<Point> points = new ArrayList<>();
        try (BufferedReader spec = Files.newBufferedReader(Paths.get(args[1]), StandardCharsets.UTF_8)) {
            for (String line = spec.readLine(); line != null; line = spec.readLine()) {
                if (!line.isBlank()) {
                    points.add(new Point(line));
                }
            }
        }
        Map<String, List<Point>> byClass = new LinkedHashMap<>();
        for (Point point : points) {
            byClass.computeIfAbsent(point.className, c -> new ArrayList<>()).add(point);
        }
        try (JarOutputStream out = new JarOutputStream(new FileOutputStream(args[0]))) {
            for (Map.Entry<String, List<Point>> entry : new java.util.TreeMap<>(byClass).entrySet()) {
                byte[] original = find(entry.getKey().replace('.', '/') + ".class", args);
                if (original == null) {
                    continue; // not in this version
                }
                byte[] woven = weave(original, entry.getValue());
                JarEntry file = new JarEntry(entry.getKey().replace('.', '/') + ".class");
                file.setTime(0L); // the same bytes for the same input: builds beside each other agree
                out.putNextEntry(file);
                out.write(woven);
                out.closeEntry();
            }
        }
        TreeSet<String> report = new TreeSet<>();
        for (Point point : points) {
            report.add(point.name + "\t" + point.woven);
        }
        report.forEach(System.out::println);
    }

    private static byte[] find(String entry, String[] args) throws Exception {
        for (int i = 2; i < args.length; i++) {
            try (JarFile jar = new JarFile(args[i])) {
                JarEntry found = jar.getJarEntry(entry);
                if (found != null) {
                    try (InputStream in = jar.getInputStream(found)) {
                        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
                        in.transferTo(bytes);
                        return bytes.toByteArray();
                    }
                }
            }
        }
        return null;
    }

    static byte[] weave(byte[] original, List<Point> points) {
        ClassReader reader = new ClassReader(original);
        // COMPUTE_MAXS: the woven call needs one more slot of operand stack; its frames stay valid (no branch
        // is added, and the stack and locals after the call are those before it)
        ClassWriter writer = new ClassWriter(reader, ClassWriter.COMPUTE_MAXS);
        reader.accept(new ClassVisitor(Opcodes.ASM9, writer) {
            @Override
            public MethodVisitor visitMethod(int access, String name, String descriptor, String signature,
                                             String[] exceptions) {
                MethodVisitor next = super.visitMethod(access, name, descriptor, signature, exceptions);
                if ((access & (Opcodes.ACC_ABSTRACT | Opcodes.ACC_NATIVE)) != 0) {
                    return next;
                }
                List<Point> here = new ArrayList<>();
                for (Point point : points) {
                    if (point.matches(name, descriptor)) {
                        here.add(point);
                    }
                }
                return here.isEmpty() ? next : new PointsAdapter(next, here);
            }
        }, 0);
        return writer.toByteArray();
    }

    /** Weaves the points of one method; each call point at its first matching call only (Byteman's count 1). */
    private static final class PointsAdapter extends MethodVisitor {
        private final List<Point> points;
        private final boolean[] called;

        PointsAdapter(MethodVisitor next, List<Point> points) {
            super(Opcodes.ASM9, next);
            this.points = points;
            this.called = new boolean[points.size()];
        }

        private void reach(Point point) {
            super.visitLdcInsn(point.name);
            super.visitMethodInsn(Opcodes.INVOKESTATIC, REACH_OWNER, "reach", "(Ljava/lang/String;)V", false);
            point.woven++;
        }

        @Override
        public void visitCode() {
            super.visitCode();
            for (Point point : points) {
                if (point.where.equals("ENTRY")) {
                    reach(point);
                }
            }
        }

        @Override
        public void visitInsn(int opcode) {
            if (opcode >= Opcodes.IRETURN && opcode <= Opcodes.RETURN) {
                for (Point point : points) {
                    if (point.where.equals("EXIT")) {
                        reach(point);
                    }
                }
            }
            super.visitInsn(opcode);
        }

        @Override
        public void visitMethodInsn(int opcode, String owner, String name, String descriptor, boolean isInterface) {
            List<Point> after = new ArrayList<>();
            for (int i = 0; i < points.size(); i++) {
                Point point = points.get(i);
                if (!called[i] && !point.where.equals("ENTRY") && !point.where.equals("EXIT")
                        && point.isCall(owner, name, descriptor)) {
                    called[i] = true;
                    if (point.where.equals("INVOKE")) {
                        reach(point);
                    } else {
                        after.add(point);
                    }
                }
            }
            super.visitMethodInsn(opcode, owner, name, descriptor, isInterface);
            after.forEach(this::reach);
        }
    }
}
