// A long-lived JMX client for one Cassandra node: the lab's fast path for flush, compact and
// table metrics. nodetool starts a JVM with the whole server classpath per call (4-15 s on a
// busy 2-core machine); experiments that flush once per simulated interval need milliseconds.
// Plain javax.management only, so it compiles and starts without the Cassandra jars.
//
// Protocol: one request per stdin line, tab-separated; one JSON object per stdout line.
//   ping
//   flush    <keyspace> <table,table,...|empty for all>
//   compact  <keyspace> <table,table,...|empty for all>
//   stats    <keyspace> <table>
//   compactions [keyspace] -> {"pending": n, "active": n} (node-wide, or of one keyspace)
//   twcs     <keyspace> <table> -> {"live": n, "pending": n, "active": n, "buckets": [n, ...]}: the live
//            SSTables, the strategy's task estimate and SSTables per window as of its last background
//            check (newest window first; null: not TWCS), and the table's running compactions
//   cpu      -> {"process_cpu_ns": n} (the server JVM's CPU time, all threads)
//   threshold <Guardrail> [warn fail] -> {"warn": n, "fail": n}: a guardrail's thresholds (GuardrailsMBean
//            get<Guardrail>WarnThreshold/FailThreshold), set first (set<Guardrail>Threshold) when given
// Reply: {"ok":true,...} or {"ok":false,"error":"..."}. EOF on stdin ends the process.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import javax.management.MBeanServerConnection;
import javax.management.ObjectName;
import javax.management.remote.JMXConnector;
import javax.management.remote.JMXConnectorFactory;
import javax.management.remote.JMXServiceURL;

public class JmxShell {
    // nodetool tablestats reads the same metrics: sstable_count = LiveSSTableCount,
    // space_used_live = LiveDiskSpaceUsed, local_read_count = ReadLatency.Count, ...
    private static final String[][] METRICS = {
        {"sstable_count", "LiveSSTableCount", "Value"},
        {"live_disk_bytes", "LiveDiskSpaceUsed", "Count"},
        {"total_disk_bytes", "TotalDiskSpaceUsed", "Count"},
        {"local_reads", "ReadLatency", "Count"},
        {"local_writes", "WriteLatency", "Count"},
        {"compression_ratio", "CompressionRatio", "Value"},
        {"partitions_estimate", "EstimatedPartitionCount", "Value"},
        {"max_partition_bytes", "MaxPartitionSize", "Value"},
        {"mean_partition_bytes", "MeanPartitionSize", "Value"},
    };

    public static void main(String[] args) throws Exception {
        String url = "service:jmx:rmi:///jndi/rmi://" + args[0] + ":" + args[1] + "/jmxrmi";
        PrintStream out = System.out;
        JMXConnector connector;
        try {
            connector = JMXConnectorFactory.connect(new JMXServiceURL(url), null);
        } catch (Exception e) {
            out.println("{\"ok\":false,\"error\":" + quote("cannot connect to " + url + ": " + e) + "}");
            out.flush();
            return;
        }
        MBeanServerConnection mbs = connector.getMBeanServerConnection();
        ObjectName ss = new ObjectName("org.apache.cassandra.db:type=StorageService");
        out.println("{\"ok\":true,\"ready\":true}");
        out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            String[] p = line.split("\t", -1);
            String reply;
            try {
                switch (p[0]) {
                    case "ping":
                        reply = "{\"ok\":true}";
                        break;
                    case "flush":
                        mbs.invoke(ss, "forceKeyspaceFlush", new Object[] {p[1], tables(p)},
                                   new String[] {"java.lang.String", "[Ljava.lang.String;"});
                        reply = "{\"ok\":true}";
                        break;
                    case "compact":
                        mbs.invoke(ss, "forceKeyspaceCompaction", new Object[] {false, p[1], tables(p)},
                                   new String[] {"boolean", "java.lang.String", "[Ljava.lang.String;"});
                        reply = "{\"ok\":true}";
                        break;
                    case "nudge":
                        mbs.invoke(ss, "enableAutoCompaction", new Object[] {p[1], tables(p)},
                                   new String[] {"java.lang.String", "[Ljava.lang.String;"});
                        reply = "{\"ok\":true}";
                        break;
                    case "stats":
                        reply = stats(mbs, p[1], p[2]);
                        break;
                    case "compactions": {
                        // with a keyspace: that keyspace's estimate and its running compactions only
                        String ks = p.length > 1 && !p[1].isEmpty() ? p[1] : null;
                        Object pending = mbs.getAttribute(new ObjectName(ks == null
                            ? "org.apache.cassandra.metrics:type=Compaction,name=PendingTasks"
                            : "org.apache.cassandra.metrics:type=Keyspace,keyspace=" + ks + ",name=PendingCompactions"),
                            "Value");
                        Object active = mbs.getAttribute(new ObjectName(
                            "org.apache.cassandra.db:type=CompactionManager"), "Compactions");
                        int n = 0;
                        if (active instanceof java.util.Collection) {
                            for (Object c : (java.util.Collection<?>) active) {
                                if (ks == null || (c instanceof java.util.Map && ks.equals(((java.util.Map<?, ?>) c).get("keyspace")))) n++;
                            }
                        }
                        reply = "{\"ok\":true,\"pending\":" + pending + ",\"active\":" + n + "}";
                        break;
                    }
                    case "twcs":
                        reply = twcs(mbs, p[1], p[2]);
                        break;
                    case "cpu":
                        reply = "{\"ok\":true,\"process_cpu_ns\":" + mbs.getAttribute(
                            new ObjectName("java.lang:type=OperatingSystem"), "ProcessCpuTime") + "}";
                        break;
                    case "threshold": {
                        ObjectName g = new ObjectName("org.apache.cassandra.db:type=Guardrails");
                        if (p.length > 3) {
                            mbs.invoke(g, "set" + p[1] + "Threshold",
                                       new Object[] {Integer.parseInt(p[2]), Integer.parseInt(p[3])},
                                       new String[] {"int", "int"});
                        }
                        reply = "{\"ok\":true,\"warn\":" + mbs.getAttribute(g, p[1] + "WarnThreshold")
                            + ",\"fail\":" + mbs.getAttribute(g, p[1] + "FailThreshold") + "}";
                        break;
                    }
                    default:
                        reply = "{\"ok\":false,\"error\":" + quote("unknown command " + p[0]) + "}";
                }
            } catch (Exception e) {
                Throwable cause = e;
                while (cause.getCause() != null) cause = cause.getCause();
                reply = "{\"ok\":false,\"error\":" + quote(e + " / " + cause) + "}";
            }
            out.println(reply);
            out.flush();
        }
        connector.close();
    }

    private static String[] tables(String[] p) {
        return p.length > 2 && !p[2].isEmpty() ? p[2].split(",") : new String[0];
    }

    private static String stats(MBeanServerConnection mbs, String ks, String table) throws Exception {
        StringBuilder sb = new StringBuilder("{\"ok\":true");
        for (String[] m : METRICS) {
            ObjectName name = new ObjectName("org.apache.cassandra.metrics:type=Table,keyspace=" + ks
                                             + ",scope=" + table + ",name=" + m[1]);
            Object v = mbs.getAttribute(name, m[2]);
            String text = String.valueOf(v);
            if (v instanceof Double && (((Double) v).isNaN() || ((Double) v).isInfinite())) text = "-1";
            sb.append(",\"").append(m[0]).append("\":").append(text);
        }
        return sb.append("}").toString();
    }

    private static String twcs(MBeanServerConnection mbs, String ks, String table) throws Exception {
        // read in this order: the live count, then the windows of the last check, then its estimate
        // (TWCS sets the estimate just before the windows): windows that match the count read before
        // them come with that check's estimate or a later one's, never an older one's
        String metric = "org.apache.cassandra.metrics:type=Table,keyspace=" + ks + ",scope=" + table + ",name=";
        Object live = mbs.getAttribute(new ObjectName(metric + "LiveSSTableCount"), "Value");
        Object buckets = mbs.getAttribute(new ObjectName("org.apache.cassandra.db:type=Tables,keyspace=" + ks
                                                         + ",table=" + table), "SSTableCountPerTWCSBucket");
        Object pending = mbs.getAttribute(new ObjectName(metric + "PendingCompactions"), "Value");
        Object active = mbs.getAttribute(new ObjectName("org.apache.cassandra.db:type=CompactionManager"), "Compactions");
        int n = 0;
        if (active instanceof java.util.Collection) {
            for (Object c : (java.util.Collection<?>) active) {
                if (c instanceof java.util.Map && ks.equals(((java.util.Map<?, ?>) c).get("keyspace"))
                        && table.equals(((java.util.Map<?, ?>) c).get("columnfamily"))) n++;
            }
        }
        StringBuilder sb = new StringBuilder("{\"ok\":true,\"live\":" + live + ",\"pending\":" + pending
                                             + ",\"active\":" + n + ",\"buckets\":");
        if (buckets instanceof int[]) {
            sb.append('[');
            int[] b = (int[]) buckets;
            for (int i = 0; i < b.length; i++) sb.append(i == 0 ? "" : ",").append(b[i]);
            sb.append(']');
        } else {
            sb.append("null");
        }
        return sb.append('}').toString();
    }

    private static String quote(String s) {
        StringBuilder sb = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') sb.append('\\').append(c);
            else if (c < 0x20) sb.append(String.format("\\u%04x", (int) c));
            else sb.append(c);
        }
        return sb.append('"').toString();
    }
}
