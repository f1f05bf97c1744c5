//! The row and Message layouts the decoder reads and writes: Message's fields (the slots it sets), their
//! indices, and a row's columns after the partition key (PARTITION_ROW_COLUMNS order).

/// Message's fields, by name (the slots decode writes); their order here is this module's own.
pub(crate) const FIELDS: [&str; 23] = [
    "tenant_id",
    "conversation_id",
    "seq_bucket",
    "conversation_seq",
    "message_id",
    "last_activity_id",
    "sender_id",
    "sender_device_id",
    "client_message_id",
    "message_type",
    "custom_type",
    "schema_version",
    "body",
    "e2ee",
    "media",
    "reply_to_conversation_seq",
    "mentions",
    "state",
    "recall_event_conversation_seq",
    "edited_at_activity_id",
    "created_at_ms",
    "retention_class",
    "dek_id",
];
pub(crate) const F_TENANT: usize = 0;
pub(crate) const F_CONVERSATION: usize = 1;
pub(crate) const F_BUCKET: usize = 2;
pub(crate) const F_SEQ: usize = 3;
pub(crate) const F_MESSAGE_ID: usize = 4;
pub(crate) const F_LAST_ACTIVITY: usize = 5;
pub(crate) const F_SENDER: usize = 6;
pub(crate) const F_DEVICE: usize = 7;
pub(crate) const F_CLIENT_MESSAGE_ID: usize = 8;
pub(crate) const F_TYPE: usize = 9;
pub(crate) const F_CUSTOM: usize = 10;
pub(crate) const F_SCHEMA: usize = 11;
pub(crate) const F_BODY: usize = 12;
pub(crate) const F_E2EE: usize = 13;
pub(crate) const F_MEDIA: usize = 14;
pub(crate) const F_REPLY: usize = 15;
pub(crate) const F_MENTIONS: usize = 16;
pub(crate) const F_STATE: usize = 17;
pub(crate) const F_RECALL: usize = 18;
pub(crate) const F_EDITED: usize = 19;
pub(crate) const F_CREATED: usize = 20;
pub(crate) const F_RETENTION: usize = 21;
pub(crate) const F_DEK_ID: usize = 22;

// a row's columns after the partition key (PARTITION_ROW_COLUMNS order)
pub(crate) const C_SEQ: isize = 0;
pub(crate) const C_MESSAGE_ID: isize = 1;
pub(crate) const C_LAST_ACTIVITY: isize = 2;
pub(crate) const C_SENDER: isize = 3;
pub(crate) const C_DEVICE: isize = 4;
pub(crate) const C_CLIENT_MESSAGE_ID: isize = 5;
pub(crate) const C_TYPE: isize = 6;
pub(crate) const C_CUSTOM: isize = 7;
pub(crate) const C_SCHEMA: isize = 8;
pub(crate) const C_PAYLOAD: isize = 9;
pub(crate) const C_MEDIA: isize = 10;
pub(crate) const C_REPLY: isize = 11;
pub(crate) const C_MENTIONS: isize = 12;
pub(crate) const C_STATE: isize = 13;
pub(crate) const C_RECALL: isize = 14;
pub(crate) const C_EDITED: isize = 15;
pub(crate) const C_CREATED: isize = 16;
pub(crate) const C_RETENTION: isize = 17;
pub(crate) const C_DEK: isize = 18;
pub(crate) const PARTITION_ROW_LEN: isize = 19;
pub(crate) const PARTITION_KEY_LEN: isize = 3;

/// A u128 id column: a 16-byte blob.
pub(crate) const U128_BYTES: isize = 16;
