//! The datatype and noncontiguous I/O calls of the C API, called directly
//! from Rust: NULL and forged arguments, freed type handles, bad
//! constructor arguments (`-EINVAL`) and overflow (`-EOVERFLOW`),
//! mismatched list totals, pieces outside the buffer, and that refused
//! arguments do not mark a file as failed.

use std::ffi::CStr;
use std::ptr::{null, null_mut};

use weft::*;
use weft_testkit::{Cluster, ClusterOptions};

const EINVAL: i32 = -libc::EINVAL;
const EBADF: i32 = -libc::EBADF;
const EOVERFLOW: i32 = -libc::EOVERFLOW;
const WEFT_ORDER_C: i32 = 0;
const WEFT_DISTRIBUTE_BLOCK: i32 = 1;
const WEFT_IO_DATATYPE: i32 = 1;
const WEFT_IO_LIST: i32 = 2;
const WEFT_IO_POSIX: i32 = 3;

fn forged<T>() -> *mut T {
    0xdead_0000usize as *mut T
}

/// A new type from a constructor that must succeed.
fn built(construct: impl FnOnce(*mut *mut weft_type_t) -> i32) -> *mut weft_type_t {
    let mut out = null_mut();
    assert_eq!(construct(&mut out), 0);
    assert!(!out.is_null());
    out
}

/// The result of a constructor that must fail, checking `*out` is NULL.
fn refused(construct: impl FnOnce(*mut *mut weft_type_t) -> i32) -> i32 {
    let mut out = forged();
    let result = construct(&mut out);
    assert!(out.is_null(), "failed constructor must leave *out NULL");
    result
}

fn bytes(size: u64) -> *mut weft_type_t {
    // SAFETY: valid out pointer.
    built(|out| unsafe { weft_type_bytes(size, out) })
}

#[test]
fn type_handles_are_checked() {
    let element = bytes(3);
    // SAFETY: NULL, forged (never dereferenced) or live handles; valid out pointers.
    unsafe {
        assert_eq!(weft_type_bytes(8, null_mut()), EINVAL);
        assert_eq!(refused(|out| weft_type_contiguous(2, null(), out)), EINVAL);
        assert_eq!(refused(|out| weft_type_contiguous(2, forged(), out)), EBADF);
        let mut size = 0u64;
        assert_eq!(weft_type_size(element, null_mut()), EINVAL);
        assert_eq!(weft_type_size(forged(), &mut size), EBADF);
        assert_eq!(weft_close(element.cast()), EBADF, "a type is not a file");

        let freed = bytes(4);
        assert_eq!(weft_type_free(freed), 0);
        assert_eq!(weft_type_free(freed), EBADF);
        assert_eq!(weft_type_free(null_mut()), EINVAL);
        assert_eq!(weft_type_size(freed, &mut size), EBADF);
        assert_eq!(refused(|out| weft_type_vector(2, 1, 2, freed, out)), EBADF);
        assert_eq!(refused(|out| weft_type_resized(freed, 0, 8, out)), EBADF);
        let children = [element as *const weft_type_t, freed as *const weft_type_t];
        let (lengths, displacements) = ([1u64, 1], [0i64, 16]);
        let construct = |out| weft_type_struct(2, lengths.as_ptr(), displacements.as_ptr(), children.as_ptr(), out);
        assert_eq!(refused(construct), EBADF);
        assert_eq!(weft_type_free(element), 0);
    }
}

#[test]
fn constructors_compute_size_and_extent() {
    let element = bytes(3);
    // SAFETY: live handles, valid arrays and out pointers.
    unsafe {
        let vector = built(|out| weft_type_vector(4, 2, 5, element, out));
        let child_may_go = weft_type_free(element);
        assert_eq!(child_may_go, 0, "a type outlives its children's handles");
        let (mut size, mut lb, mut extent) = (0u64, -1i64, -1i64);
        assert_eq!(weft_type_size(vector, &mut size), 0);
        assert_eq!(weft_type_extent(vector, &mut lb, &mut extent), 0);
        assert_eq!((size, lb, extent), (24, 0, (3 * 5 + 2) * 3));
        let resized = built(|out| weft_type_resized(vector, -8, 100, out));
        assert_eq!(weft_type_extent(resized, &mut lb, &mut extent), 0);
        assert_eq!((lb, extent), (-8, 100));
        let (lengths, displacements) = ([2u64, 1], [0i64, 40]);
        let children = [vector as *const weft_type_t, resized as *const weft_type_t];
        let mixed = built(|out| weft_type_struct(2, lengths.as_ptr(), displacements.as_ptr(), children.as_ptr(), out));
        assert_eq!(weft_type_size(mixed, &mut size), 0);
        assert_eq!(size, 3 * 24);
        for handle in [vector, resized, mixed] {
            assert_eq!(weft_type_free(handle), 0);
        }
    }
}

#[test]
fn bad_constructor_arguments_are_refused() {
    let element = bytes(4);
    let (sizes, subsizes, starts) = ([10u64, 10], [5u64, 5], [0u64, 6]);
    let (lengths, displacements) = ([1u64, 2], [0i64, 4]);
    // SAFETY: live handles; arrays hold the counts given, or are NULL.
    unsafe {
        // Overflow: sizes and strides beyond 64 bits.
        assert_eq!(refused(|out| weft_type_bytes(u64::MAX, out)), EOVERFLOW);
        assert_eq!(refused(|out| weft_type_vector(4, 1, i64::MAX, element, out)), EOVERFLOW);
        assert_eq!(refused(|out| weft_type_contiguous(u64::MAX / 2, element, out)), EOVERFLOW);
        let huge = [u64::MAX / 2, 2];
        let subarray =
            |out| weft_type_subarray(2, huge.as_ptr(), huge.as_ptr(), [0u64, 0].as_ptr(), WEFT_ORDER_C, element, out);
        assert!(matches!(refused(subarray), EOVERFLOW | EINVAL));
        // NULL arrays with a non-zero count.
        assert_eq!(refused(|out| weft_type_indexed(2, null(), displacements.as_ptr(), element, out)), EINVAL);
        assert_eq!(refused(|out| weft_type_hindexed(2, lengths.as_ptr(), null(), element, out)), EINVAL);
        assert_eq!(refused(|out| weft_type_indexed_block(2, 1, null(), element, out)), EINVAL);
        assert_eq!(refused(|out| weft_type_struct(1, lengths.as_ptr(), displacements.as_ptr(), null(), out)), EINVAL);
        // Subarray: out of bounds, zero dimensions, unknown order.
        let subarray = |ndims, order, out| {
            weft_type_subarray(ndims, sizes.as_ptr(), subsizes.as_ptr(), starts.as_ptr(), order, element, out)
        };
        assert_eq!(refused(|out| subarray(2, WEFT_ORDER_C, out)), EINVAL);
        assert_eq!(refused(|out| subarray(0, WEFT_ORDER_C, out)), EINVAL);
        assert_eq!(refused(|out| subarray(1, 7, out)), EINVAL);
        let fine = built(|out| subarray(1, 1, out)); // one dimension, Fortran order
        assert_eq!(weft_type_free(fine), 0);
        // Darray: bad grid, bad distribution, zero or negative darg.
        let (gsizes, psizes) = ([8u64, 8], [2u64, 2]);
        let darray = |size, distributions: [i32; 2], dargs: *const i64, out| {
            weft_type_darray(
                size,
                0,
                2,
                gsizes.as_ptr(),
                distributions.as_ptr(),
                dargs,
                psizes.as_ptr(),
                WEFT_ORDER_C,
                element,
                out,
            )
        };
        let block = [WEFT_DISTRIBUTE_BLOCK; 2];
        assert_eq!(refused(|out| darray(3, block, null(), out)), EINVAL);
        assert_eq!(refused(|out| darray(4, [WEFT_DISTRIBUTE_BLOCK, 9], null(), out)), EINVAL);
        assert_eq!(refused(|out| darray(4, block, [0i64, 4].as_ptr(), out)), EINVAL);
        assert_eq!(refused(|out| darray(4, block, [-5i64, 4].as_ptr(), out)), EINVAL);
        assert_eq!(refused(|out| darray(4, block, [1i64, 4].as_ptr(), out)), EINVAL, "block too small");
        let fine = built(|out| darray(4, block, [-1i64, 4].as_ptr(), out));
        assert_eq!(weft_type_free(fine), 0);
        assert_eq!(weft_type_free(element), 0);
    }
}

fn connect(cluster: &Cluster) -> *mut weft_fs_t {
    let path = std::ffi::CString::new(cluster.config_path.to_str().unwrap()).unwrap();
    let mut fs = null_mut();
    // SAFETY: valid string and out pointer.
    assert_eq!(unsafe { weft_connect(path.as_ptr(), &mut fs) }, 0);
    fs
}

fn open(fs: *mut weft_fs_t, path: &CStr, flags: i32) -> *mut weft_file_t {
    let mut file = null_mut();
    // SAFETY: valid string and out pointer.
    assert_eq!(unsafe { weft_create(fs, path.as_ptr(), flags, 0o644, 64, 3, &mut file) }, 0);
    file
}

/// `weft_pwrite_list`/`weft_pread_list` over slices.
struct Lists<'a> {
    memory_offsets: &'a [u64],
    memory_lengths: &'a [u64],
    file_offsets: &'a [i64],
    file_lengths: &'a [u64],
}

impl Lists<'_> {
    fn write(&self, file: *mut weft_file_t, buffer: &[u8]) -> isize {
        // SAFETY: the slices are valid for their lengths.
        unsafe {
            weft_pwrite_list(
                file,
                buffer.as_ptr().cast(),
                buffer.len(),
                self.memory_offsets.len(),
                self.memory_offsets.as_ptr(),
                self.memory_lengths.as_ptr(),
                self.file_offsets.len(),
                self.file_offsets.as_ptr(),
                self.file_lengths.as_ptr(),
            )
        }
    }

    fn read(&self, file: *mut weft_file_t, buffer: &mut [u8]) -> isize {
        // SAFETY: the slices are valid for their lengths.
        unsafe {
            weft_pread_list(
                file,
                buffer.as_mut_ptr().cast(),
                buffer.len(),
                self.memory_offsets.len(),
                self.memory_offsets.as_ptr(),
                self.memory_lengths.as_ptr(),
                self.file_offsets.len(),
                self.file_offsets.as_ptr(),
                self.file_lengths.as_ptr(),
            )
        }
    }
}

/// Lists whose totals match: 2 memory pieces of 6, 3 file regions of 4.
const MEMORY_OFFSETS: [u64; 2] = [0, 10];
const MEMORY_LENGTHS: [u64; 2] = [6, 6];
const FILE_OFFSETS: [i64; 3] = [0, 100, 200];
const FILE_LENGTHS: [u64; 3] = [4, 4, 4];

fn good_lists() -> Lists<'static> {
    Lists {
        memory_offsets: &MEMORY_OFFSETS,
        memory_lengths: &MEMORY_LENGTHS,
        file_offsets: &FILE_OFFSETS,
        file_lengths: &FILE_LENGTHS,
    }
}

fn check_list_arguments(file: *mut weft_file_t) {
    let buffer: Vec<u8> = (0..16u8).collect();
    let good = good_lists();
    let longer = [4u64, 4, 5];
    let mismatched = Lists { file_lengths: &longer, ..good_lists() };
    assert_eq!(mismatched.write(file, &buffer), EINVAL as isize, "totals differ");
    let outside = [0u64, 11];
    assert_eq!(Lists { memory_offsets: &outside, ..good_lists() }.write(file, &buffer), EINVAL as isize);
    let negative = [0i64, -100, 200];
    assert_eq!(Lists { file_offsets: &negative, ..good_lists() }.write(file, &buffer), EINVAL as isize);
    assert_eq!(good.write(file, &buffer[..15]), EINVAL as isize, "buffer too short");
    // SAFETY: NULL arrays with non-zero counts are refused before use.
    unsafe {
        let null_arrays = weft_pwrite_list(file, buffer.as_ptr().cast(), 16, 2, null(), null(), 3, null(), null());
        assert_eq!(null_arrays, EINVAL as isize);
        let null_buffer = weft_pread_list(
            file,
            null_mut(),
            16,
            2,
            MEMORY_OFFSETS.as_ptr(),
            MEMORY_LENGTHS.as_ptr(),
            3,
            FILE_OFFSETS.as_ptr(),
            FILE_LENGTHS.as_ptr(),
        );
        assert_eq!(null_buffer, EINVAL as isize);
        assert_eq!(
            weft_pwrite_list(forged(), buffer.as_ptr().cast(), 0, 0, null(), null(), 0, null(), null()),
            EBADF as isize
        );
    }
    // Refused arguments did not mark the file as failed.
    assert_eq!(good.write(file, &buffer), 12);
    let mut back = vec![0xEEu8; 16];
    assert_eq!(good.read(file, &mut back), 12);
    assert_eq!(&back[..6], &buffer[..6]);
    assert_eq!(&back[6..10], &[0xEE; 4], "bytes outside the pieces are unchanged");
    assert_eq!(&back[10..16], &buffer[10..16]);
}

fn check_dtype_arguments(file: *mut weft_file_t) {
    let element = bytes(4);
    let strided = {
        // SAFETY: live handle, valid out pointer.
        built(|out| unsafe { weft_type_hvector(3, 1, 10, element, out) })
    };
    let empty = {
        // SAFETY: live handle, valid out pointer.
        built(|out| unsafe { weft_type_contiguous(0, element, out) })
    };
    let data: Vec<u8> = (0..24u8).collect();
    let mut back = vec![0u8; 24];
    // SAFETY: buffers valid for the lengths given; handles live, NULL or freed.
    unsafe {
        let write = |buffer: &[u8], memory, count, file_type| {
            weft_write_dtype(file, buffer.as_ptr().cast(), buffer.len(), memory, count, 0, 0, file_type)
        };
        assert_eq!(write(&data, null(), 1, strided), EINVAL as isize);
        assert_eq!(write(&data, strided, 1, null()), EINVAL as isize);
        assert_eq!(write(&data[..23], strided, 1, strided), EINVAL as isize, "memory type past the buffer");
        assert_eq!(write(&data, element, 1, empty), EINVAL as isize, "file type without data");
        assert_eq!(write(&data, strided, 1, strided), 12);
        assert_eq!(weft_set_io_method(file, WEFT_IO_POSIX, 1), EINVAL);
        assert_eq!(weft_set_io_method(file, WEFT_IO_LIST, 65_537), EINVAL);
        assert_eq!(weft_set_io_method(forged(), WEFT_IO_LIST, 4), EBADF);
        for (method, regions) in [(WEFT_IO_LIST, 1), (WEFT_IO_POSIX, 0), (WEFT_IO_DATATYPE, 0)] {
            assert_eq!(weft_set_io_method(file, method, regions), 0);
            back.fill(0);
            let read = weft_read_dtype(file, back.as_mut_ptr().cast(), 24, element, 3, 0, 0, strided);
            assert_eq!(read, 12, "method {method}");
            let expected: Vec<u8> = [0u8, 1, 2, 3, 10, 11, 12, 13, 20, 21, 22, 23].to_vec();
            assert_eq!(&back[..12], &expected[..], "method {method}");
        }
        assert_eq!(weft_type_free(strided), 0);
        let freed = weft_read_dtype(file, back.as_mut_ptr().cast(), 24, element, 3, 0, 0, strided);
        assert_eq!(freed, EBADF as isize, "freed file type");
        for handle in [element, empty] {
            assert_eq!(weft_type_free(handle), 0);
        }
    }
}

fn check_access_modes(fs: *mut weft_fs_t) {
    let buffer = [7u8; 16];
    let reader = open(fs, c"/nc.bin", libc::O_RDONLY);
    assert_eq!(good_lists().write(reader, &buffer), EBADF as isize, "read-only file");
    let appender = open(fs, c"/nc.bin", libc::O_WRONLY | libc::O_APPEND);
    assert_eq!(good_lists().write(appender, &buffer), EINVAL as isize, "O_APPEND");
    let writer = open(fs, c"/nc.bin", libc::O_WRONLY);
    let mut back = [0u8; 16];
    assert_eq!(good_lists().read(writer, &mut back), EBADF as isize, "write-only file");
    // SAFETY: live handles.
    unsafe {
        for file in [reader, appender, writer] {
            assert_eq!(weft_close(file), 0);
        }
    }
}

#[test]
fn noncontiguous_calls_on_a_live_connection() {
    let cluster = Cluster::start(ClusterOptions { servers: 3, ..ClusterOptions::default() });
    let fs = connect(&cluster);
    let file = open(fs, c"/nc.bin", libc::O_RDWR | libc::O_EXCL);
    check_list_arguments(file);
    check_dtype_arguments(file);
    check_access_modes(fs);
    // SAFETY: live handles.
    unsafe {
        assert_eq!(weft_close(file), 0);
        assert_eq!(weft_disconnect(fs), 0);
    }
}
