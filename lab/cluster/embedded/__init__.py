"""The embedded Apache Cassandra 5.0 node(s) the lab starts and owns.

    node       resolve the jars with Maven, write the node's config, start, wait, stop by PID
    security   a local CA and node keystore for TLS, the lab's login role (``--secure``)
"""
