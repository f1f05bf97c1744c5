"""The write side of the store (design §5): every module that changes a row or the log.

    send         the send path (§5.1): validate, allocate, dedup reserve, record + index, outbox,
                 COMMITTED, ack; the commit path's statements (``record_statements``)
    sequence     conversation_seq reservation windows (the local SQLite allocator)
    head         the conversation_head row (§2.4): HeadUpdate, read_head, the sealed preview
    head_writer  its asynchronous monotonic writer (§5.1 step 7): read, compare, write; the failover form
    head_requests  the writer's reads and writes of one batch in groups (an IN per tenant, unlogged batches)
    fencing      the conversations this writer lost to a higher epoch: Fenced before anything is written
    recall       recall / edit (§5.3): CONTROL event first, then the row; one recall event per message
    recovery     recover(): logged recall / edit events their rows lack (S-7), and every head, from the log
    earliest     the earliest_available_conversation_seq (E) advancer (§9)
    archiver     archiver mode (§2.1 note): the log into message_record + message_index
    seeding      rows written as these paths write them, without send (``store.seeding``)
"""
