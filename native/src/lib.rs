//! lab_native: the compiled decode of the common message_record row, and the driver's UUID constructor.
//!
//! `Decoder.decode` does what `lab.store.rows.records.decode_rows` does for a page whose every row has
//! the common shape (the store's own SELECT, whole, a sealed blob that opens, known enum values) and
//! returns None at the first row that is anything else, or at any error: the caller then decodes the
//! whole page with the Python code, which raises what it raises. So this path never raises a decode
//! error of its own and never decides what an unusual row means.
//!
//! `AesGcmKey` is a DEK's AES-256-GCM key schedule (RustCrypto aes-gcm; AES-NI and CLMUL detected at
//! run time), built once per cached key (lab.store.crypto.dek_cache). It never hands its key back.
//!
//!     key       AesGcmKey and the AES-GCM open of one blob
//!     layout    Message's fields and a row's columns, by index
//!     pyref     CPython object helpers: an owned reference, bytes / None / 16-byte id checks
//!     decoder   Decoder: the common-row loop (decode_rows' compiled path)
//!     uuid      uuid_from_bytes: uuid.UUID(bytes=...) without a Python-level call (the driver's UUID cells)

mod decoder;
mod key;
mod layout;
mod pyref;
mod uuid;

use pyo3::prelude::*;

use decoder::Decoder;
use key::AesGcmKey;
use layout::FIELDS;

#[pymodule]
fn lab_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<AesGcmKey>()?;
    m.add_class::<Decoder>()?;
    m.add("FIELDS", FIELDS.to_vec())?;
    m.add("UUID_FAST_PATH", uuid::init(m.py())?)?;
    m.add_function(wrap_pyfunction!(uuid::uuid_from_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(uuid::_uuid_slot_offsets, m)?)?;
    Ok(())
}
