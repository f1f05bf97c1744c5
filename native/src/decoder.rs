//! `Decoder`: builds Messages of the common row shape (see the crate doc); constructed once per process
//! (lab.store.rows.records) with Message and the lookups decode_rows uses.

use std::ptr;

use aes_gcm::Aes256Gcm;
use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PySet, PyString, PyType};

use crate::key::{open_into, AesGcmKey, NONCE_BYTES, TAG_BYTES};
use crate::layout::*;
use crate::pyref::*;

/// Builds Messages of the common row shape; see the module doc. Constructed once per process
/// (lab.store.rows.records) with Message and the lookups decode_rows uses.
#[pyclass(frozen, module = "lab_native")]
pub(crate) struct Decoder {
    message_type: Py<PyType>,
    offsets: [isize; 23],
    types: Py<PyDict>,
    states: Py<PyDict>,
    classes: Py<PyDict>,
    normal: PyObject,
    recalled: PyObject,
    default_class: PyObject,
    schema_default: PyObject,
    empty_str: PyObject,
    zero: PyObject,
    media_decode: PyObject,
    mentions_decode: PyObject,
    uuid_type: Py<PyType>,
    ordered: Py<PySet>,
    int_name: Py<PyString>,
    // Message's member descriptors' `__set__`, bound, in FIELDS order: how the safe path sets each slot
    setters: Vec<PyObject>,
    new_name: Py<PyString>,
}

#[pymethods]
impl Decoder {
    #[new]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        message_type: Bound<'_, PyType>,
        types: Bound<'_, PyDict>,
        states: Bound<'_, PyDict>,
        classes: Bound<'_, PyDict>,
        normal: PyObject,
        recalled: PyObject,
        default_class: PyObject,
        schema_default: PyObject,
        media_decode: PyObject,
        mentions_decode: PyObject,
        uuid_type: Bound<'_, PyType>,
        ordered: Bound<'_, PySet>,
    ) -> PyResult<Self> {
        let slots = message_type.getattr("__slots__")?;
        if slots.len()? != FIELDS.len() {
            return Err(PyTypeError::new_err("Message's slots are not the fields this decoder sets"));
        }
        let dict = message_type.getattr("__dict__")?;
        let mut offsets = [0isize; 23];
        let mut setters = Vec::with_capacity(FIELDS.len());
        for (i, name) in FIELDS.iter().enumerate() {
            let descr = dict.get_item(name)?;
            offsets[i] = object_slot_offset(&message_type, &descr, name)?;
            setters.push(descr.getattr("__set__")?.unbind());
        }
        Ok(Self {
            message_type: message_type.unbind(),
            offsets,
            types: types.unbind(),
            states: states.unbind(),
            classes: classes.unbind(),
            normal,
            recalled,
            default_class,
            schema_default,
            empty_str: PyString::new(py, "").into_any().unbind(),
            zero: 0i64.into_pyobject(py)?.into_any().unbind(),
            media_decode,
            mentions_decode,
            uuid_type: uuid_type.unbind(),
            ordered: ordered.unbind(),
            int_name: PyString::intern(py, "int").unbind(),
            setters,
            new_name: PyString::intern(py, "__new__").unbind(),
        })
    }

    /// The page's Messages (None for a row not in ``wanted``; partial rows left out when
    /// ``skip_partial``), or None when any row is not of the common shape or does not open.
    /// ``safe``: each Message made by ``Message.__new__`` and its slots set through their member
    /// descriptors (PyO3's safe calls) instead of written at the slots' offsets: the measured alternative.
    #[pyo3(signature = (rows, partition, key_for, wanted, skip_partial, safe=false))]
    #[allow(clippy::too_many_arguments)]
    fn decode(
        &self,
        py: Python<'_>,
        rows: &Bound<'_, PyAny>,
        partition: &Bound<'_, PyAny>,
        key_for: &Bound<'_, PyAny>,
        wanted: &Bound<'_, PyAny>,
        skip_partial: bool,
        safe: bool,
    ) -> PyObject {
        let out = unsafe {
            self.decode_raw(py, rows.as_ptr(), partition.as_ptr(), key_for, wanted.as_ptr(), skip_partial, safe)
        };
        match out {
            Some(list) => unsafe { PyObject::from_owned_ptr(py, list) },
            None => {
                unsafe { ffi::PyErr_Clear() };
                py.None()
            }
        }
    }
}

impl Decoder {
    /// `enum_by_value.get(value)` for an int value whose member is truthy (what decode_rows' `or` keeps).
    unsafe fn member(&self, table: *mut ffi::PyObject, value: *mut ffi::PyObject) -> Option<*mut ffi::PyObject> {
        if ffi::PyLong_CheckExact(value) == 0 {
            return None;
        }
        let found = ffi::PyDict_GetItemWithError(table, value);
        if found.is_null() || ffi::PyObject_IsTrue(found) != 1 {
            return None;
        }
        Some(new_ref(found))
    }

    unsafe fn or_default(&self, value: *mut ffi::PyObject, default: &PyObject) -> Option<*mut ffi::PyObject> {
        match ffi::PyObject_IsTrue(value) {
            1 => Some(new_ref(value)),
            0 => Some(new_ref(default.as_ptr())),
            _ => None,
        }
    }

    unsafe fn call1(&self, py: Python<'_>, f: &PyObject, arg: *mut ffi::PyObject) -> Option<*mut ffi::PyObject> {
        f.bind(py).call1((Bound::from_borrowed_ptr(py, arg),)).ok().map(|o| o.into_ptr())
    }

    #[allow(clippy::too_many_arguments)]
    unsafe fn decode_raw(
        &self,
        py: Python<'_>,
        rows: *mut ffi::PyObject,
        partition: *mut ffi::PyObject,
        key_for: &Bound<'_, PyAny>,
        wanted: *mut ffi::PyObject,
        skip_partial: bool,
        safe: bool,
    ) -> Option<*mut ffi::PyObject> {
        if ffi::PyList_CheckExact(rows) == 0 {
            return None;
        }
        let uuid_type = self.uuid_type.as_ptr() as *mut ffi::PyTypeObject;
        let keyless = !is_none(partition);
        let (mut tenant, mut conversation, mut bucket) = (ptr::null_mut(), ptr::null_mut(), ptr::null_mut());
        if keyless {
            if ffi::PyTuple_CheckExact(partition) == 0 || ffi::PyTuple_GET_SIZE(partition) != PARTITION_KEY_LEN {
                return None;
            }
            (tenant, conversation, bucket) = partition_key(partition, uuid_type)?;
        }
        let wanted = if is_none(wanted) {
            None
        } else if ffi::PyDict_CheckExact(wanted) != 0 {
            Some(wanted)
        } else {
            return None;
        };
        let ordered = self.ordered.as_ptr();
        let message_tp = self.message_type.as_ptr() as *mut ffi::PyTypeObject;
        let alloc = (*message_tp).tp_alloc?;
        let (types, states, classes) = (self.types.as_ptr(), self.states.as_ptr(), self.classes.as_ptr());
        let out = Owned(ffi::PyList_New(0));
        if out.0.is_null() {
            return None;
        }
        // the key in use and what it was for (rows of one read mostly share one key)
        let mut last_dek = Owned(ptr::null_mut());
        let mut last_tenant_int = Owned(ptr::null_mut());
        let mut last_conversation_int = Owned(ptr::null_mut());
        // key_for's tuple (native, prefix, version, dek_id): kept while `cipher` and `dek_id` point into it
        let mut _key = Owned(ptr::null_mut());
        let mut cipher: Option<&Aes256Gcm> = None;
        let mut dek_id: *mut ffi::PyObject = ptr::null_mut(); // borrowed from `key`
        let mut aad: Vec<u8> = Vec::with_capacity(64);
        let mut aad_prefix = 0usize;
        let mut version: [u8; 4] = [0; 4];
        let mut plain: Vec<u8> = Vec::with_capacity(1024);
        let mut i = 0;
        // every reference this loop keeps across a call into Python is its own (a row, the last dek):
        // nothing the list holds can go away under it
        while i < ffi::PyList_GET_SIZE(rows) {
            let row = ffi::PyList_GET_ITEM(rows, i);
            i += 1;
            let _row = Owned(new_ref(row));
            if ffi::PyTuple_Check(row) == 0 {
                return None;
            }
            let base: isize;
            if keyless {
                if ffi::PyTuple_GET_SIZE(row) != PARTITION_ROW_LEN {
                    return None;
                }
                base = 0;
            } else {
                if ffi::PyTuple_GET_SIZE(row) != PARTITION_ROW_LEN + PARTITION_KEY_LEN
                    || ffi::PySet_Contains(ordered, ffi::Py_TYPE(row) as *mut ffi::PyObject) != 1
                {
                    return None;
                }
                (tenant, conversation, bucket) = partition_key(row, uuid_type)?;
                base = PARTITION_KEY_LEN;
            }
            let col = |c: isize| ffi::PyTuple_GET_ITEM(row, base + c);
            let seq = col(C_SEQ);
            let message_id = col(C_MESSAGE_ID);
            if is_none(message_id) {
                if skip_partial {
                    continue;
                }
                return None;
            }
            if !bytes16(message_id) || ffi::PyLong_CheckExact(seq) == 0 {
                return None;
            }
            let mut overflow = 0;
            let seq_value = ffi::PyLong_AsLongLongAndOverflow(seq, &mut overflow);
            if overflow != 0 || seq_value < 0 {  // 0 <= seq < 2**63: a non-negative i64
                return None;
            }
            let mid = Owned(u128_of(message_id));
            if mid.0.is_null() {
                return None;
            }
            if let Some(wanted) = wanted {
                let asked = ffi::PyDict_GetItemWithError(wanted, seq);
                if asked.is_null() {
                    if !ffi::PyErr_Occurred().is_null() {
                        return None;
                    }
                    if ffi::PyList_Append(out.0, ffi::Py_None()) != 0 {
                        return None;
                    }
                    continue;
                }
                match ffi::PyObject_RichCompareBool(asked, mid.0, ffi::Py_EQ) {
                    1 => {}
                    0 => {
                        if ffi::PyList_Append(out.0, ffi::Py_None()) != 0 {
                            return None;
                        }
                        continue;
                    }
                    _ => return None,
                }
            }
            let last_activity = col(C_LAST_ACTIVITY);
            let payload = col(C_PAYLOAD);
            let dek = col(C_DEK);
            if !bytes16(last_activity)
                || ffi::PyBytes_CheckExact(payload) == 0
                || (bytes_size(payload) as usize) < NONCE_BYTES + TAG_BYTES
                || ffi::PyTuple_CheckExact(dek) == 0
            {
                return None;
            }
            // the key: looked up again when the dek (or, rows with their key, the conversation) changes
            let mut same = !last_dek.0.is_null() && {
                let eq = ffi::PyObject_RichCompareBool(dek, last_dek.0, ffi::Py_EQ);
                if eq < 0 {
                    return None;
                }
                eq == 1
            };
            let (mut tenant_int, mut conversation_int) = (Owned(ptr::null_mut()), Owned(ptr::null_mut()));
            if !keyless {
                tenant_int = Owned(ffi::PyObject_GetAttr(tenant, self.int_name.as_ptr()));
                conversation_int = Owned(ffi::PyObject_GetAttr(conversation, self.int_name.as_ptr()));
                if tenant_int.0.is_null() || conversation_int.0.is_null() {
                    return None;
                }
                if same {
                    let a = ffi::PyObject_RichCompareBool(tenant_int.0, last_tenant_int.0, ffi::Py_EQ);
                    let b = ffi::PyObject_RichCompareBool(conversation_int.0, last_conversation_int.0, ffi::Py_EQ);
                    if a < 0 || b < 0 {
                        return None;
                    }
                    same = a == 1 && b == 1;
                }
            }
            if !same {
                let found = key_for
                    .call1((
                        Bound::from_borrowed_ptr(py, tenant),
                        Bound::from_borrowed_ptr(py, conversation),
                        Bound::from_borrowed_ptr(py, dek),
                    ))
                    .ok()?;
                if ffi::PyTuple_CheckExact(found.as_ptr()) == 0 || ffi::PyTuple_GET_SIZE(found.as_ptr()) != 4 {
                    return None; // None: the key failed (destroyed, moved row): the Python path raises or skips
                }
                let native = found.get_item(0).ok()?;
                let native = native.downcast::<AesGcmKey>().ok()?;
                let prefix = ffi::PyTuple_GET_ITEM(found.as_ptr(), 1);
                let suffix = ffi::PyTuple_GET_ITEM(found.as_ptr(), 2);
                if ffi::PyBytes_CheckExact(prefix) == 0
                    || ffi::PyBytes_CheckExact(suffix) == 0
                    || bytes_size(suffix) != 4
                {
                    return None;
                }
                // the key object lives in `key` (the tuple) until it is replaced: the reference stays valid
                cipher = Some(&*(ptr::addr_of!(native.get().cipher)));
                aad.clear();
                aad.extend_from_slice(bytes_of(prefix));
                aad_prefix = aad.len();
                version.copy_from_slice(bytes_of(suffix));
                dek_id = ffi::PyTuple_GET_ITEM(found.as_ptr(), 3);
                _key = Owned(found.into_ptr());
                last_dek = Owned(new_ref(dek));
                last_tenant_int = tenant_int;
                last_conversation_int = conversation_int;
            }
            aad.truncate(aad_prefix);
            aad.extend_from_slice(&seq_value.to_be_bytes());
            aad.extend_from_slice(&version);
            if !open_into(cipher?, bytes_of(payload), &aad, &mut plain) || plain.is_empty() {
                return None;
            }
            let e2ee = match plain[0] {
                0 => ffi::Py_False(),
                1 => ffi::Py_True(),
                _ => return None,
            };
            // the Message: allocated empty, every slot set once (a bail-out frees it with what it has)
            let message = if safe {
                let made = self.message_type.bind(py).call_method1(self.new_name.bind(py), (self.message_type.bind(py),)).ok()?;
                Owned(made.into_ptr())
            } else {
                Owned(alloc(message_tp, 0))
            };
            if message.0.is_null() {
                return None;
            }
            let base_ptr = message.0 as *mut u8;
            let offsets = &self.offsets;
            let message_obj = Bound::from_borrowed_ptr(py, message.0);
            let set_failed = std::cell::Cell::new(false);
            let set = |field: usize, value: *mut ffi::PyObject| {
                if safe {
                    // the value's reference moves into the call's arguments; the slot takes its own
                    let value = Bound::from_owned_ptr(py, value);
                    if self.setters[field].bind(py).call1((&message_obj, value)).is_err() {
                        set_failed.set(true);
                    }
                } else {
                    *(base_ptr.offset(offsets[field]) as *mut *mut ffi::PyObject) = value;
                }
            };
            set(F_TENANT, new_ref(tenant));
            set(F_CONVERSATION, new_ref(conversation));
            set(F_BUCKET, new_ref(bucket));
            set(F_SEQ, new_ref(seq));
            set(F_MESSAGE_ID, mid.release());
            let value = u128_of(last_activity);
            if value.is_null() {
                return None;
            }
            set(F_LAST_ACTIVITY, value);
            set(F_SENDER, new_ref(col(C_SENDER)));
            set(F_DEVICE, new_ref(col(C_DEVICE)));
            set(F_CLIENT_MESSAGE_ID, self.or_default(col(C_CLIENT_MESSAGE_ID), &self.empty_str)?);
            set(F_TYPE, self.member(types, col(C_TYPE))?);
            set(F_CUSTOM, new_ref(col(C_CUSTOM)));
            set(F_SCHEMA, self.or_default(col(C_SCHEMA), &self.schema_default)?);
            let body = ffi::PyBytes_FromStringAndSize(plain[1..].as_ptr() as *const _, (plain.len() - 1) as isize);
            if body.is_null() {
                return None;
            }
            set(F_BODY, body);
            set(F_E2EE, new_ref(e2ee));
            let media = col(C_MEDIA);
            set(F_MEDIA, if is_none(media) { new_ref(media) } else { self.call1(py, &self.media_decode, media)? });
            set(F_REPLY, new_ref(col(C_REPLY)));
            let mentions = col(C_MENTIONS);
            set(
                F_MENTIONS,
                if is_none(mentions) { new_ref(mentions) } else { self.call1(py, &self.mentions_decode, mentions)? },
            );
            let recall = col(C_RECALL);
            let state = col(C_STATE);
            set(
                F_STATE,
                if !is_none(recall) {
                    new_ref(self.recalled.as_ptr())
                } else {
                    match ffi::PyObject_IsTrue(state) {
                        0 => new_ref(self.normal.as_ptr()),
                        1 => self.member(states, state)?,
                        _ => return None,
                    }
                },
            );
            set(F_RECALL, new_ref(recall));
            let edited = col(C_EDITED);
            set(
                F_EDITED,
                if is_none(edited) {
                    new_ref(edited)
                } else if bytes16(edited) {
                    let value = u128_of(edited);
                    if value.is_null() {
                        return None;
                    }
                    value
                } else {
                    return None;
                },
            );
            set(F_CREATED, self.or_default(col(C_CREATED), &self.zero)?);
            let retention = col(C_RETENTION);
            set(
                F_RETENTION,
                match ffi::PyObject_IsTrue(retention) {
                    0 => new_ref(self.default_class.as_ptr()),
                    1 => self.member(classes, retention)?,
                    _ => return None,
                },
            );
            set(F_DEK_ID, new_ref(dek_id));
            if set_failed.get() {
                return None;
            }
            if ffi::PyList_Append(out.0, message.0) != 0 {
                return None;
            }
        }
        Some(out.release())
    }
}

/// The partition key at the start of a tuple (the read's partition, or a row that carries its key):
/// (tenant_id, conversation_id, seq_bucket) borrowed from it, or None unless both ids are UUIDs and the
/// bucket is set. The caller has checked the tuple's length.
#[inline]
unsafe fn partition_key(
    t: *mut ffi::PyObject,
    uuid_type: *mut ffi::PyTypeObject,
) -> Option<(*mut ffi::PyObject, *mut ffi::PyObject, *mut ffi::PyObject)> {
    let (tenant, conversation, bucket) =
        (ffi::PyTuple_GET_ITEM(t, 0), ffi::PyTuple_GET_ITEM(t, 1), ffi::PyTuple_GET_ITEM(t, 2));
    if ffi::Py_TYPE(tenant) != uuid_type || ffi::Py_TYPE(conversation) != uuid_type || is_none(bucket) {
        return None;
    }
    Some((tenant, conversation, bucket))
}
