//! CPython object helpers of the decoder: an owned reference released on drop, and the checks and
//! conversions of one column value (bytes, None, 16-byte ids).

use std::ptr;

use pyo3::ffi;

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
