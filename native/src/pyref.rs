//! CPython object helpers of the decoder and the UUID constructor: an owned reference released on drop,
//! the checks and conversions of one column value (bytes, None, 16-byte ids), and a class's slot offsets.

use std::ptr;

use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyType;

use crate::layout::U128_BYTES;

/// An owned reference, released on drop (the bail-out paths leak nothing).
pub(crate) struct Owned(pub(crate) *mut ffi::PyObject);

impl Owned {
    pub(crate) fn release(mut self) -> *mut ffi::PyObject {
        std::mem::replace(&mut self.0, ptr::null_mut())
    }
}

impl Drop for Owned {
    fn drop(&mut self) {
        if !self.0.is_null() {
            unsafe { ffi::Py_DECREF(self.0) }
        }
    }
}

#[inline]
pub(crate) unsafe fn bytes_size(o: *mut ffi::PyObject) -> isize {
    ffi::Py_SIZE(o)
}

#[inline]
pub(crate) unsafe fn bytes_ptr(o: *mut ffi::PyObject) -> *const u8 {
    ptr::addr_of!((*(o as *mut ffi::PyBytesObject)).ob_sval) as *const u8
}

#[inline]
pub(crate) unsafe fn is_none(o: *mut ffi::PyObject) -> bool {
    o == ffi::Py_None()
}

#[inline]
pub(crate) unsafe fn bytes16(o: *mut ffi::PyObject) -> bool {
    ffi::PyBytes_CheckExact(o) != 0 && bytes_size(o) == U128_BYTES
}

#[inline]
pub(crate) unsafe fn u128_of(o: *mut ffi::PyObject) -> *mut ffi::PyObject {
    ffi::_PyLong_FromByteArray(bytes_ptr(o), U128_BYTES as usize, 0, 0)
}

#[inline]
pub(crate) unsafe fn new_ref(o: *mut ffi::PyObject) -> *mut ffi::PyObject {
    ffi::Py_INCREF(o);
    o
}

#[inline]
pub(crate) unsafe fn bytes_of<'a>(o: *mut ffi::PyObject) -> &'a [u8] {
    std::slice::from_raw_parts(bytes_ptr(o), bytes_size(o) as usize)
}

/// The offset of `owner`'s own object slot `name` (`descr`, its entry in the class's `__dict__`): checked to
/// be a member descriptor of `owner` itself holding an object and lying inside the instance, so that a
/// reference written there is what `object.__setattr__` would have stored.
pub(crate) fn object_slot_offset(owner: &Bound<'_, PyType>, descr: &Bound<'_, PyAny>, name: &str) -> PyResult<isize> {
    let tp = owner.as_ptr() as *mut ffi::PyTypeObject;
    let what = format!("{}.{name}", owner.name()?);
    unsafe {
        if ffi::Py_TYPE(descr.as_ptr()) != ptr::addr_of_mut!(ffi::PyMemberDescr_Type) {
            return Err(PyTypeError::new_err(format!("{what} is not a slot")));
        }
        let member_descr = descr.as_ptr() as *mut ffi::PyMemberDescrObject;
        if (*member_descr).d_common.d_type != tp {
            return Err(PyTypeError::new_err(format!("{what} is not the class's own slot")));
        }
        let member = (*member_descr).d_member as *mut ffi::PyMemberDef;
        let offset = (*member).offset;
        if (*member).type_code != ffi::Py_T_OBJECT_EX
            || offset < std::mem::size_of::<ffi::PyObject>() as isize
            || offset + std::mem::size_of::<*mut ffi::PyObject>() as isize > (*tp).tp_basicsize
        {
            return Err(PyTypeError::new_err(format!("{what} is not an object slot")));
        }
        Ok(offset)
    }
}
