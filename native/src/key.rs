//! `AesGcmKey`: one DEK's AES-256-GCM key schedule (RustCrypto aes-gcm; AES-NI and CLMUL detected at run
//! time), built once per cached key (lab.store.crypto.dek_cache). It never hands its key back.

use aes_gcm::aead::{AeadInPlace, KeyInit};
use aes_gcm::{Aes256Gcm, Nonce, Tag};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

pub(crate) const NONCE_BYTES: usize = 12;
pub(crate) const TAG_BYTES: usize = 16;
pub(crate) const KEY_BYTES: usize = 32;

/// AES-256-GCM with one DEK. `open(blob, aad)`: the plaintext of `nonce || ciphertext || tag`, or None.
#[pyclass(frozen, module = "lab_native")]
pub(crate) struct AesGcmKey {
    pub(crate) cipher: Aes256Gcm,
}

#[pymethods]
impl AesGcmKey {
    #[new]
    fn new(key: &[u8]) -> PyResult<Self> {
        if key.len() != KEY_BYTES {
            return Err(PyValueError::new_err("an AES-256-GCM key is 32 bytes"));
        }
        let cipher = Aes256Gcm::new_from_slice(key).map_err(|_| PyValueError::new_err("bad key length"))?;
        Ok(Self { cipher })
    }

    fn open<'py>(&self, py: Python<'py>, blob: &[u8], aad: &[u8]) -> Option<Bound<'py, PyBytes>> {
        let mut buf = Vec::new();
        if open_into(&self.cipher, blob, aad, &mut buf) {
            Some(PyBytes::new(py, &buf))
        } else {
            None
        }
    }
}

pub(crate) fn open_into(cipher: &Aes256Gcm, blob: &[u8], aad: &[u8], buf: &mut Vec<u8>) -> bool {
    if blob.len() < NONCE_BYTES + TAG_BYTES {
        return false;
    }
    let end = blob.len() - TAG_BYTES;
    buf.clear();
    buf.extend_from_slice(&blob[NONCE_BYTES..end]);
    cipher
        .decrypt_in_place_detached(Nonce::from_slice(&blob[..NONCE_BYTES]), aad, buf, Tag::from_slice(&blob[end..]))
        .is_ok()
}
