"""Private plumbing every store part shares; nothing here knows a table or a path.

    context      StoreContext: connection, keyspace, constants, encryptor, retention, alerts,
                 faults and the clock, in one typed object handed to every path
    wall_clock   the store's one clock (wall-clock milliseconds)
    alerts       counters of the store's alerts (ALERT_NAMES)
    faults       crash points (FaultPlan) for the crash tests
    sqlite_file  the local SQLite state files (WAL, busy timeout, group commit)
    group_submit concurrent callers' items in shared rounds (the outbox's group commit, the hot
                 window's pipelined puts)
    lanes        several group-submit rounds in flight at once, a caller taking the least loaded
                 lane (the hot window's puts, a Redis connection per lane)
    lru          bounded per-conversation memories
    handoff_lock a FIFO lock that threads and futures (a walk on the driver's loop) wait for alike
    steps        a path as a sans-IO walk and its two drivers: the calling thread, the driver's event loop
    writer_marks which writers of a state folder did not close (a crash: recover() at the next open)
"""
