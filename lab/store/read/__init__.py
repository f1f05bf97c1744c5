"""The read side of the store (design §4): every module that answers a read.

    history    one page of history (§4.1): bucket walk, empty-bucket stop, the latest page; sync and async
    bucket     one partition read as a value (BucketQuery), its S-4 bound and partial rows
    batch      grouped batch read of bodies plus reaction summaries (§4.3, §4.4)
    body_cache the batch read's body LRU and its coherence rule (a token per read, a bounded lifetime)
    reactions  reactions and their summaries (§2.5)
    lookup     admin / moderation lookup through message_index (§2.2)
"""
