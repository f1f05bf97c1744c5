"""The embedded servers the lab starts and owns: Apache Cassandra 5.0 node(s), and beside them
a Kafka broker and a Redis.

    node         the cluster's lifecycle: start, wait for CQL, record PIDs, stop/kill/restart, nodetool
    node_config  one node's cassandra.yaml and logback.xml, rendered from templates/
    jars         Maven resolution of group:artifact:version into a folder (cassandra-all; reusable)
    java         which ``java`` (JDK 11/17) and the JVM flags the server and its tools need
    process      spawn with a log, find our processes by PID + command-line marker, stop only those
    security     a local CA and node keystore for TLS, the lab's login role (``--secure``)
    kafka_broker Apache Kafka 4.x in KRaft mode from Maven Central: resolve, format, start, stop by PID
    redis_server Debian's redis-server on its own port and folder: start, wait for PING, stop by PID
    sidecars     the broker and Redis together, for ``lab node start / status / stop``
    templates/   cassandra.yaml and its fragments, logback.xml, the Maven POM (package data)
"""
