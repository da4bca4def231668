package eosharness;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.Iterator;
import java.util.Map;

/**
 * The store protocol's JSON lines, read into and written from Jackson's tree nodes without Jackson's
 * {@code ObjectMapper}: a mapper's first use initialises its date formats, time zone and locale data, about
 * half of a store JVM's start (0.13 -> 0.07 CPU-s to its ready line), and every crash costs a JVM start.
 * {@link JsonNode#toString()} makes such a mapper too: nothing here calls it. What the harness sends is
 * JSON as Python's {@code json.dumps} writes it: objects, arrays, strings, integers, true, false, null.
 */
final class Json {
    private static final JsonNodeFactory NODES = JsonNodeFactory.instance;

    private final String text;
    private int at;

    private Json(String text) {
        this.text = text;
    }

    /** The JSON value of {@code text}; an {@link IllegalArgumentException} saying where it is not JSON. */
    static JsonNode parse(String text) {
        Json reader = new Json(text);
        JsonNode value = reader.value();
        reader.space();
        if (reader.at != text.length()) {
            throw reader.error("end of input");
        }
        return value;
    }

    /** {@code node} as one line of JSON. */
    static String write(JsonNode node) {
        StringBuilder out = new StringBuilder(64);
        write(node, out);
        return out.toString();
    }

    /** {@code value} as a JSON string (quoted and escaped). */
    static String quote(String value) {
        StringBuilder out = new StringBuilder(value.length() + 2);
        quote(value, out);
        return out.toString();
    }

    private static void write(JsonNode node, StringBuilder out) {
        if (node == null || node.isNull() || node.isMissingNode()) {
            out.append("null");
        } else if (node.isObject()) {
            out.append('{');
            boolean first = true;
            for (Iterator<Map.Entry<String, JsonNode>> it = node.fields(); it.hasNext(); ) {
                Map.Entry<String, JsonNode> field = it.next();
                if (!first) {
                    out.append(',');
                }
                first = false;
                quote(field.getKey(), out);
                out.append(':');
                write(field.getValue(), out);
            }
            out.append('}');
        } else if (node.isArray()) {
            out.append('[');
            for (int i = 0; i < node.size(); i++) {
                if (i > 0) {
                    out.append(',');
                }
                write(node.get(i), out);
            }
            out.append(']');
        } else if (node.isTextual()) {
            quote(node.textValue(), out);
        } else if (node.isBoolean()) {
            out.append(node.booleanValue());
        } else if (node.isIntegralNumber()) {
            out.append(node.bigIntegerValue());
        } else if (node.isNumber()) {
            out.append(node.doubleValue());
        } else {
            throw new IllegalArgumentException("cannot write a " + node.getNodeType() + " as JSON");
        }
    }

    private static void quote(String value, StringBuilder out) {
        out.append('"');
        for (int i = 0; i < value.length(); i++) {
            char c = value.charAt(i);
            switch (c) {
                case '"':
                    out.append("\\\"");
                    break;
                case '\\':
                    out.append("\\\\");
                    break;
                case '\n':
                    out.append("\\n");
                    break;
                case '\r':
                    out.append("\\r");
                    break;
                case '\t':
                    out.append("\\t");
                    break;
                default:
                    if (c < 0x20 || c == 0x2028 || c == 0x2029) {
                        out.append(String.format("\\u%04x", (int) c));
                    } else {
                        out.append(c);
                    }
            }
        }
        out.append('"');
    }

    private IllegalArgumentException error(String expected) {
        return new IllegalArgumentException("not JSON: expected " + expected + " at character " + at + " of "
                + (text.length() > 200 ? text.substring(0, 200) + "..." : text));
    }

    private void space() {
        while (at < text.length() && Character.isWhitespace(text.charAt(at))) {
            at++;
        }
    }

    private JsonNode value() {
        space();
        if (at >= text.length()) {
            throw error("a value");
        }
        char c = text.charAt(at);
        switch (c) {
            case '{':
                return object();
            case '[':
                return array();
            case '"':
                return NODES.textNode(string());
            case 't':
                return literal("true", NODES.booleanNode(true));
            case 'f':
                return literal("false", NODES.booleanNode(false));
            case 'n':
                return literal("null", NODES.nullNode());
            default:
                if (c == '-' || (c >= '0' && c <= '9')) {
                    return number();
                }
                throw error("a value");
        }
    }

    private JsonNode literal(String word, JsonNode node) {
        if (!text.startsWith(word, at)) {
            throw error(word);
        }
        at += word.length();
        return node;
    }

    private JsonNode number() {
        int start = at;
        boolean integral = true;
        if (text.charAt(at) == '-') {
            at++;
        }
        while (at < text.length()) {
            char c = text.charAt(at);
            if (c >= '0' && c <= '9') {
                at++;
            } else if (c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
                integral = false;
                at++;
            } else {
                break;
            }
        }
        String digits = text.substring(start, at);
        try {
            if (!integral) {
                return NODES.numberNode(Double.parseDouble(digits));
            }
            long value = Long.parseLong(digits);
            return value == (int) value ? NODES.numberNode((int) value) : NODES.numberNode(value);
        } catch (NumberFormatException notNumber) {
            if (integral) {
                try {
                    return NODES.numberNode(new java.math.BigInteger(digits));
                } catch (NumberFormatException ignored) {
                    // reported below
                }
            }
            at = start;
            throw error("a number");
        }
    }

    private String string() {
        at++; // the opening quote
        StringBuilder value = null;
        int start = at;
        while (at < text.length()) {
            char c = text.charAt(at);
            if (c == '"') {
                String s = value == null ? text.substring(start, at) : value.append(text, start, at).toString();
                at++;
                return s;
            }
            if (c == '\\') {
                if (value == null) {
                    value = new StringBuilder();
                }
                value.append(text, start, at);
                if (at + 1 >= text.length()) {
                    break;
                }
                char escaped = text.charAt(at + 1);
                at += 2;
                switch (escaped) {
                    case '"':
                    case '\\':
                    case '/':
                        value.append(escaped);
                        break;
                    case 'b':
                        value.append('\b');
                        break;
                    case 'f':
                        value.append('\f');
                        break;
                    case 'n':
                        value.append('\n');
                        break;
                    case 'r':
                        value.append('\r');
                        break;
                    case 't':
                        value.append('\t');
                        break;
                    case 'u':
                        if (at + 4 > text.length()) {
                            throw error("four hex digits");
                        }
                        try {
                            value.append((char) Integer.parseInt(text.substring(at, at + 4), 16));
                        } catch (NumberFormatException notHex) {
                            throw error("four hex digits");
                        }
                        at += 4;
                        break;
                    default:
                        at -= 1;
                        throw error("an escape");
                }
                start = at;
            } else {
                at++;
            }
        }
        throw error("the end of a string");
    }

    private JsonNode object() {
        at++;
        ObjectNode object = NODES.objectNode();
        space();
        if (at < text.length() && text.charAt(at) == '}') {
            at++;
            return object;
        }
        while (true) {
            space();
            if (at >= text.length() || text.charAt(at) != '"') {
                throw error("a field name");
            }
            String name = string();
            space();
            if (at >= text.length() || text.charAt(at) != ':') {
                throw error("':'");
            }
            at++;
            object.set(name, value());
            space();
            if (at < text.length() && text.charAt(at) == ',') {
                at++;
            } else if (at < text.length() && text.charAt(at) == '}') {
                at++;
                return object;
            } else {
                throw error("',' or '}'");
            }
        }
    }

    private JsonNode array() {
        at++;
        ArrayNode array = NODES.arrayNode();
        space();
        if (at < text.length() && text.charAt(at) == ']') {
            at++;
            return array;
        }
        while (true) {
            array.add(value());
            space();
            if (at < text.length() && text.charAt(at) == ',') {
                at++;
            } else if (at < text.length() && text.charAt(at) == ']') {
                at++;
                return array;
            } else {
                throw error("',' or ']'");
            }
        }
    }
}
