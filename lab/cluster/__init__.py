"""The cluster the lab measures on, whatever serves it.

    config       ClusterConfig: contact points, auth, TLS, keyspace, replication, consistency, Scylla REST map
    services     ServicesConfig: the outbox (local / Kafka: bootstrap, TLS, SASL) and the Redis hot window
    settings     how both are filled: flags > LAB_* > a TOML table > defaults (read, layer, coerce; a bad
                 value names its variable, flag or section)
    connection   the CQL session: request accounting, the dialect
    rtt_proxy    an emulated round trip: toxiproxy in front of the CQL port, the driver kept on it
    probe        is a CQL server at a contact point? (one OPTIONS request before the driver waits 20 s)
    driver_errors  driver exceptions -> lab errors (the one boundary), the retry policy that heeds the dialect
    dialect/     how Cassandra and ScyllaDB differ: keyspace/table option text, traces, errors (one module each)
    accounting   requests counted by table and kind (point / range / IN read, write, LWT)
    row_factory  the sessions' row factory: the driver's named tuples, one class per column list
    tracing      rows, tombstones and SSTables a traced request touched (parsed by the dialect)
    preflight    `lab preflight`: what would stop a long run, with a fix for each
    reactors     the driver's I/O reactor by name
    admin/       flush, compact, SSTable counts, disk bytes per replica: one module per server
    embedded/    the servers the lab starts itself: Cassandra 5.0 node(s) (jars, java, process, config
                 templates, TLS), the Kafka broker and Redis beside them
"""
