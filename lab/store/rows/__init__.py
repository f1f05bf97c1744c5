"""What a stored row is: its types, encodings and tables (design §1, §2, §3).

    records    Message and the message_record encode / decode (the sealed envelope)
    decode_paths  a sealed page and the three ways to decode it (``lab bench decode``)
    encoded    EncodedRecord: the row's CQL column values as typed fields, and its wire form
    ids        §1 encodings: message_id, u128 blobs, seq buckets, id checks
    media      MediaMetadata / MentionTargets (Protobuf, through proto/)
    model      the enums: MessageType, MessageState, RetentionClass, DedupState
    schema     the six tables of §2: create and check
    retention  retention class -> TTL (RetentionPolicy)
    proto/     the Protobuf definitions and their generated code
"""
