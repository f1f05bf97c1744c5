//! `uuid_from_bytes(*, bytes)`: the driver's UUID cells (lab.cluster.row_factory installs it as the
//! driver's deserializers' `UUID`). For an exact `bytes` of 16 it makes the `uuid.UUID` that
//! `uuid.UUID(bytes=...)` makes without a Python-level call: the instance allocated as `object.__new__`
//! does (the type's tp_alloc), its `int` slot the 16 bytes read big-endian, its `is_safe` slot
//! `SafeUUID.unknown`. Anything else is handed to `uuid.UUID(bytes=...)`, which returns or raises what it does.
//!
//! The slots' offsets come from the class's member descriptors when the module is imported; a `uuid.UUID`
//! whose slots are not exactly `int`, `is_safe` and `__weakref__` on a plain `object` base (another Python)
//! turns the direct path off (`UUID_FAST_PATH` False) and every call goes to the constructor.

use std::ptr;

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::{PyDict, PyString, PyTuple, PyType};

use crate::pyref::*;

/// `uuid.UUID`'s slots, in `__slots__` order: the two the constructor sets, and the weak reference list
/// (left empty, as tp_alloc leaves it).
const UUID_SLOTS: [&str; 3] = ["int", "is_safe", "__weakref__"];

struct Direct {
    alloc: ffi::allocfunc,
    int_offset: isize,
    is_safe_offset: isize,
    unknown: PyObject,
}

struct Maker {
    uuid_type: Py<PyType>,
    bytes_name: Py<PyString>,
    direct: Option<Direct>,
}

static MAKER: GILOnceCell<Maker> = GILOnceCell::new();

/// Reads `uuid.UUID`'s layout (once, at import); whether the direct path is on.
pub(crate) fn init(py: Python<'_>) -> PyResult<bool> {
    let module = py.import("uuid")?;
    let uuid_type = module.getattr("UUID")?.downcast_into::<PyType>()?;
    let unknown = module.getattr("SafeUUID")?.getattr("unknown")?.unbind();
    let direct = direct_layout(&uuid_type)?.map(|(alloc, int_offset, is_safe_offset)| Direct {
        alloc,
        int_offset,
        is_safe_offset,
        unknown,
    });
    let on = direct.is_some();
    let maker = Maker {
        uuid_type: uuid_type.unbind(),
        bytes_name: PyString::intern(py, "bytes").unbind(),
        direct,
    };
    // a second import of the module (another interpreter state) keeps the first one's maker
    let _ = MAKER.set(py, maker);
    Ok(on)
}

/// The class's tp_alloc and its `int` and `is_safe` slot offsets, or None when the class is not laid out as
/// this module expects.
fn direct_layout(uuid_type: &Bound<'_, PyType>) -> PyResult<Option<(ffi::allocfunc, isize, isize)>> {
    let tp = uuid_type.as_ptr() as *mut ffi::PyTypeObject;
    let expected = PyTuple::new(uuid_type.py(), UUID_SLOTS)?;
    let (plain, alloc) = unsafe {
        let plain = (*tp).tp_base == ptr::addr_of_mut!(ffi::PyBaseObject_Type)
            && (*tp).tp_dictoffset == 0
            && (*tp).tp_flags & ffi::Py_TPFLAGS_IS_ABSTRACT == 0;
        (plain, (*tp).tp_alloc)
    };
    let (Some(alloc), Ok(slots)) = (alloc, uuid_type.getattr("__slots__")) else {
        return Ok(None);
    };
    if !plain || !slots.eq(expected)? {
        return Ok(None);
    }
    let dict = uuid_type.getattr("__dict__")?;
    let offset = |name: &str| {
        dict.get_item(name).ok().and_then(|descr| object_slot_offset(uuid_type, &descr, name).ok())
    };
    match (offset(UUID_SLOTS[0]), offset(UUID_SLOTS[1])) {
        (Some(int_offset), Some(is_safe_offset)) if int_offset != is_safe_offset => {
            Ok(Some((alloc, int_offset, is_safe_offset)))
        }
        _ => Ok(None),
    }
}

/// `direct_layout` of any class: its `int` and `is_safe` offsets, or None where the direct path would stay off
/// (tests hold the refusals to the classes they should refuse).
#[pyfunction]
pub(crate) fn _uuid_slot_offsets(cls: &Bound<'_, PyType>) -> PyResult<Option<(isize, isize)>> {
    Ok(direct_layout(cls)?.map(|(_, int_offset, is_safe_offset)| (int_offset, is_safe_offset)))
}

impl Direct {
    /// A new reference to the UUID of 16 bytes (`o`, an exact bytes object of that length), or null with
    /// the error set (out of memory).
    unsafe fn make(&self, tp: *mut ffi::PyTypeObject, o: *mut ffi::PyObject) -> *mut ffi::PyObject {
        let int = Owned(u128_of(o));
        if int.0.is_null() {
            return ptr::null_mut();
        }
        // zeroed, GC-tracked, holding a reference to its (heap) type: what object.__new__ returns
        let made = (self.alloc)(tp, 0);
        if made.is_null() {
            return ptr::null_mut();
        }
        let base = made as *mut u8;
        *(base.offset(self.int_offset) as *mut *mut ffi::PyObject) = int.release();
        *(base.offset(self.is_safe_offset) as *mut *mut ffi::PyObject) = new_ref(self.unknown.as_ptr());
        made
    }
}

/// ``uuid.UUID(bytes=bytes)``: built directly for an exact bytes object of 16 bytes, by the constructor
/// (its value or its error) for anything else.
#[pyfunction]
#[pyo3(signature = (*, bytes))]
pub(crate) fn uuid_from_bytes(py: Python<'_>, bytes: &Bound<'_, PyAny>) -> PyResult<PyObject> {
    let maker = MAKER.get(py).expect("lab_native's module init reads uuid.UUID");
    if let Some(direct) = &maker.direct {
        let o = bytes.as_ptr();
        if unsafe { bytes16(o) } {
            let made = unsafe { direct.make(maker.uuid_type.as_ptr() as *mut ffi::PyTypeObject, o) };
            if made.is_null() {
                return Err(PyErr::fetch(py));
            }
            return Ok(unsafe { PyObject::from_owned_ptr(py, made) });
        }
    }
    let kwargs = PyDict::new(py);
    kwargs.set_item(maker.bytes_name.bind(py), bytes)?;
    Ok(maker.uuid_type.bind(py).call((), Some(&kwargs))?.unbind())
}
