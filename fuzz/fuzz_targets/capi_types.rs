//! The C API's datatype constructors, called as a C program would: a
//! sequence of constructor calls with fuzzer-chosen counts, arrays,
//! strides, orders and handles (earlier results, freed ones, forged
//! pointers), then size and extent queries and frees. Every return is 0 or
//! a documented `-errno`; a panic inside (which the boundary would turn
//! into `-EIO`) aborts the fuzzer through libFuzzer's panic hook, and an
//! `-EIO` is a failure too.
#![no_main]

use arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use weft::types::weft_type_t;

/// Largest array a call gets (bounded work per input).
const ARRAY_MAX: usize = 48;

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let mut live: Vec<*mut weft_type_t> = Vec::new();
    let mut freed: Vec<*mut weft_type_t> = Vec::new();
    for _ in 0..32 {
        if u.is_empty() {
            break;
        }
        let Ok(()) = step(&mut u, &mut live, &mut freed) else { break };
    }
    for handle in live {
        // SAFETY: any value may be passed; these are live handles.
        assert_eq!(unsafe { weft::weft_type_free(handle) }, 0, "a live type frees");
    }
});

fn number(u: &mut Unstructured) -> Result<u64> {
    Ok(match u.int_in_range(0u8..=9)? {
        0..=5 => u.int_in_range(0u64..=16)?,
        6 => u.int_in_range(0u64..=4096)?,
        7 => *u.choose(&[u64::MAX, i64::MAX as u64, 1 << 32, 1 << 62, (1 << 63) + 1])?,
        _ => u.arbitrary()?,
    })
}

fn signed(u: &mut Unstructured) -> Result<i64> {
    let magnitude = number(u)? as i64;
    Ok(if u.arbitrary::<bool>()? { magnitude.wrapping_neg() } else { magnitude })
}

fn numbers(u: &mut Unstructured, count: usize) -> Result<Vec<u64>> {
    (0..count).map(|_| number(u)).collect()
}

fn signeds(u: &mut Unstructured, count: usize) -> Result<Vec<i64>> {
    (0..count).map(|_| signed(u)).collect()
}

fn handle(u: &mut Unstructured, live: &[*mut weft_type_t], freed: &[*mut weft_type_t]) -> Result<*mut weft_type_t> {
    Ok(match u.int_in_range(0u8..=15)? {
        0 => std::ptr::null_mut(),
        1 if !freed.is_empty() => *u.choose(freed)?,
        2 => u.arbitrary::<usize>()? as *mut weft_type_t,
        _ if !live.is_empty() => *u.choose(live)?,
        _ => std::ptr::null_mut(),
    })
}

/// A NULL array stands for an empty one only when the count is 0.
fn ptr<T>(values: &[T]) -> *const T {
    if values.is_empty() {
        std::ptr::null()
    } else {
        values.as_ptr()
    }
}

fn step(u: &mut Unstructured, live: &mut Vec<*mut weft_type_t>, freed: &mut Vec<*mut weft_type_t>) -> Result<()> {
    let mut out: *mut weft_type_t = std::ptr::null_mut();
    let n = u.int_in_range(0..=ARRAY_MAX)?;
    let child = handle(u, live, freed)?;
    // SAFETY (every call below): arrays hold at least the count passed,
    // `out` is a valid pointer, and type handles may be any value.
    let rc = unsafe {
        match u.int_in_range(0u8..=15)? {
            0 => weft::weft_type_bytes(number(u)?, &mut out),
            1 => weft::weft_type_contiguous(number(u)?, child, &mut out),
            2 => weft::weft_type_vector(number(u)?, number(u)?, signed(u)?, child, &mut out),
            3 => weft::weft_type_hvector(number(u)?, number(u)?, signed(u)?, child, &mut out),
            4 => {
                let (lengths, displacements) = (numbers(u, n)?, signeds(u, n)?);
                weft::weft_type_indexed(n, ptr(&lengths), ptr(&displacements), child, &mut out)
            }
            5 => {
                let (lengths, displacements) = (numbers(u, n)?, signeds(u, n)?);
                weft::weft_type_hindexed(n, ptr(&lengths), ptr(&displacements), child, &mut out)
            }
            6 => weft::weft_type_indexed_block(n, number(u)?, ptr(&signeds(u, n)?), child, &mut out),
            7 => weft::weft_type_hindexed_block(n, number(u)?, ptr(&signeds(u, n)?), child, &mut out),
            8 => {
                let (lengths, displacements) = (numbers(u, n)?, signeds(u, n)?);
                let children = (0..n)
                    .map(|_| handle(u, live, freed).map(|h| h as *const weft_type_t))
                    .collect::<Result<Vec<_>>>()?;
                weft::weft_type_struct(n, ptr(&lengths), ptr(&displacements), ptr(&children), &mut out)
            }
            9 => weft::weft_type_resized(child, signed(u)?, signed(u)?, &mut out),
            10 => {
                let dims = n % 8;
                let (sizes, subsizes, starts) = (numbers(u, dims)?, numbers(u, dims)?, numbers(u, dims)?);
                let order = u.int_in_range(-1..=2)?;
                weft::weft_type_subarray(dims as u32, ptr(&sizes), ptr(&subsizes), ptr(&starts), order, child, &mut out)
            }
            11 => {
                let dims = n % 8;
                let size = u.int_in_range(0u32..=64)?;
                let rank = u.int_in_range(0u32..=65)?;
                let gsizes = numbers(u, dims)?;
                let distributions = (0..dims).map(|_| u.int_in_range(-1..=3)).collect::<Result<Vec<i32>>>()?;
                let null_dargs: bool = u.arbitrary()?;
                let dargs = (0..dims)
                    .map(|_| Ok(if u.arbitrary()? { -1 } else { signed(u)? }))
                    .collect::<Result<Vec<i64>>>()?;
                let psizes = numbers(u, dims)?;
                let order = u.int_in_range(-1..=2)?;
                weft::weft_type_darray(
                    size,
                    rank,
                    dims as u32,
                    ptr(&gsizes),
                    ptr(&distributions),
                    if null_dargs { std::ptr::null() } else { ptr(&dargs) },
                    ptr(&psizes),
                    order,
                    child,
                    &mut out,
                )
            }
            12 => {
                let mut size = 0u64;
                let (mut lb, mut extent) = (0i64, 0i64);
                let a = weft::weft_type_size(child, &mut size);
                let b = weft::weft_type_extent(child, &mut lb, &mut extent);
                assert_eq!(a, b, "size and extent agree on the handle's validity");
                a
            }
            13 if !live.is_empty() => {
                let index = u.choose_index(live.len())?;
                let victim = live.swap_remove(index);
                freed.push(victim);
                weft::weft_type_free(victim)
            }
            _ => {
                let victim = handle(u, live, freed)?;
                let rc = weft::weft_type_free(victim);
                if rc == 0 {
                    live.retain(|h| *h != victim);
                    freed.push(victim);
                }
                rc
            }
        }
    };
    assert!(
        [0, -libc_einval(), -libc_eoverflow(), -libc_ebadf()].contains(&rc),
        "a constructor returned {rc} (a caught panic is -EIO)"
    );
    if rc == 0 && !out.is_null() {
        live.push(out);
    }
    Ok(())
}

fn libc_einval() -> i32 {
    22
}
fn libc_eoverflow() -> i32 {
    75
}
fn libc_ebadf() -> i32 {
    9
}
