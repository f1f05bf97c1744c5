"""Deterministic workload datasets: message profiles, conversation shapes, seq holes.

    profiles     what a message population looks like (``profiles/<name>.toml``, package data)
    synthesis    (profile, size, seed) -> messages, conversations and holes tables
    files        Parquet files + manifest.json (sha256 of each file): save, load, ensure
    materialise  a row -> body, media metadata, mentions; -> Message or SendRequest

More: docs/load-internals.md.
"""
from lab.workload.files import DEFAULT_OUT_DIR, TABLES, dataset_dir, ensure, load, save
from lab.workload.synthesis import GENERATOR_VERSION, TYPE_ORDER, Workload, generate
from lab.workload.materialise import body_for, media_for, mentions_for, messages_of, send_requests, to_message, to_send_request
from lab.workload.profiles import (PROFILE_DIRS, PROFILES_DIR, RETENTION_ORDER, SIZES, USER_PROFILES_DIR,
                                   ConversationShape, HoleModel, MessageMix, Profile, load_profile, profile_from_mapping,
                                   profile_names, profile_path, profile_source)

__all__ = ["DEFAULT_OUT_DIR", "GENERATOR_VERSION", "PROFILE_DIRS", "PROFILES_DIR", "RETENTION_ORDER", "SIZES", "TABLES",
           "TYPE_ORDER", "USER_PROFILES_DIR", "ConversationShape", "HoleModel", "MessageMix", "Profile", "Workload", "body_for", "dataset_dir", "ensure",
           "generate", "load", "load_profile", "media_for", "mentions_for", "messages_of", "profile_from_mapping",
           "profile_names", "profile_path", "profile_source", "save", "send_requests", "to_message", "to_send_request"]
