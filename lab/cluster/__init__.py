"""The cluster the lab measures on, whatever serves it.

    config       ClusterConfig: contact points, auth, TLS, keyspace, replication, consistency
    services     ServicesConfig: the outbox (local / Kafka: bootstrap, TLS, SASL) and the Redis hot window
    connection   the CQL session: request accounting, driver errors -> lab errors (one boundary)
    accounting   requests counted by table and kind (point / range / IN read, write, LWT)
    tracing      rows, tombstones and SSTables a traced request touched (both servers' texts)
    reactors     the driver's I/O reactor by name
    admin/       flush, compact, SSTable counts, disk bytes: one module per server
    embedded/    the servers the lab starts itself: Cassandra 5.0 node(s) (jars, process, TLS, roles),
                 the Kafka broker and Redis beside them
"""
