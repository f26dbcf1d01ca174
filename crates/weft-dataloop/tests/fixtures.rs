//! Access patterns from the thesis' benchmarks, checked arithmetically.

use weft_dataloop::mpi_types::{darray, subarray};
use weft_dataloop::regions::zip_lists;
use weft_dataloop::{
    BatchLimits, Cursor, Dataloop, Distribution, DistributionArg, Order, Region, StripeCursor, StripeFilter,
};

/// `(region count, total bytes, distinct region lengths)` in batches of 4096,
/// never holding the whole list.
fn census(dataloop: &Dataloop) -> (u64, u64, Vec<u64>) {
    let mut cursor = Cursor::new(dataloop, 1, 0).unwrap();
    let (mut count, mut bytes, mut lengths) = (0u64, 0u64, Vec::new());
    let mut batch = Vec::new();
    loop {
        batch.clear();
        let got = cursor.next_batch(BatchLimits::regions(4096), &mut batch);
        if got == 0 {
            return (count, bytes, lengths);
        }
        count += batch.len() as u64;
        bytes += got;
        for region in &batch {
            if !lengths.contains(&region.length) {
                lengths.push(region.length);
            }
        }
    }
}

/// ROMIO coll_perf: a 600^3 array block-distributed over a p x p x p grid.
fn coll_perf_block(p: u64, rank: u64, element_bytes: u64) -> (Dataloop, Dataloop) {
    let element = Dataloop::bytes(element_bytes).unwrap();
    let side = 600 / p;
    let coords = [rank / (p * p), (rank / p) % p, rank % p];
    let starts: Vec<u64> = coords.iter().map(|c| c * side).collect();
    let sub = subarray(3, &[600; 3], &[side; 3], &starts, Order::C, &element).unwrap();
    let dar = darray(
        (p * p * p) as u32,
        rank as u32,
        3,
        &[600; 3],
        &[Distribution::Block; 3],
        &[DistributionArg::Default; 3],
        &[p; 3],
        Order::C,
        &element,
    )
    .unwrap();
    (sub, dar)
}

#[test]
fn coll_perf_regions_per_client() {
    // (procs per side, regions, bytes per region with 4-byte ints) from the thesis;
    // for 64 processes the arithmetic gives 600 B (the table's "300 B" is a typo).
    for (p, regions, region_bytes) in [(2u64, 90_000u64, 1200u64), (3, 40_000, 800), (4, 22_500, 600)] {
        let (sub, dar) = coll_perf_block(p, p * p * p - 1, 4);
        assert_eq!(sub.encode().len(), sub.encoded_bytes() as usize);
        for t in [&sub, &dar] {
            assert_eq!(t.size(), regions * region_bytes);
            assert_eq!(t.extent(), 600 * 600 * 600 * 4);
        }
        let (count, bytes, lengths) = census(&sub);
        assert_eq!((count, bytes, lengths), (regions, regions * region_bytes, vec![region_bytes]));
        assert_eq!(Cursor::new(&sub, 1, 0).unwrap().collect_all(), Cursor::new(&dar, 1, 0).unwrap().collect_all());
    }
    // 8 processes with doubles: each owns a 300^3 block of 2400-byte rows.
    let (sub, _) = coll_perf_block(2, 0, 8);
    assert_eq!(census(&sub), (90_000, 90_000 * 2400, vec![2400]));
    // The description stays tiny: a few nodes, no per-region entries.
    assert!(sub.encoded_bytes() < 200, "{}", sub.encoded_bytes());
}

#[test]
fn coll_perf_striped_over_16_servers_partitions_the_data() {
    let (sub, _) = coll_perf_block(2, 5, 4);
    let mut total = 0;
    for server in 0..16 {
        let filter = StripeFilter::new(64 << 10, 16, server).unwrap();
        let mut stripes = StripeCursor::new(Cursor::new(&sub, 1, 0).unwrap(), filter);
        let mut out = Vec::new();
        loop {
            out.clear();
            let got = stripes.next_batch(BatchLimits::regions(1024), &mut out);
            if got == 0 {
                break;
            }
            total += got;
        }
    }
    assert_eq!(total, sub.size());
}

/// FLASH memory: unk(24 vars, 16, 16, 16, 80 blocks) of doubles, Fortran order
/// (variables fastest), 8^3 interior cells after 4 guard cells per side.
fn flash_variable(variable: u64) -> Dataloop {
    let double = Dataloop::bytes(8).unwrap();
    let sizes = [24, 16, 16, 16, 80];
    let subsizes = [1, 8, 8, 8, 80];
    let starts = [variable, 4, 4, 4, 0];
    subarray(5, &sizes, &subsizes, &starts, Order::Fortran, &double).unwrap()
}

#[test]
fn flash_checkpoint_memory_layout() {
    let one = flash_variable(5);
    assert_eq!(census(&one), (40_960, 327_680, vec![8]));
    let first = Cursor::new(&one, 1, 0).unwrap().collect_all()[0];
    assert_eq!(first, Region::new((5 + 24 * (4 + 16 * (4 + 16 * 4))) * 8, 8));
    // All variables, variable-major: 983,040 POSIX writes, 7.5 MiB per process,
    // 15,360 list requests at 64 regions each.
    let all_vars: Vec<i64> = (0..24).map(|v| v * 8).collect();
    let memory = Dataloop::hindexed_block(1, &all_vars, &flash_variable(0)).unwrap();
    let (count, bytes, _) = census(&memory);
    assert_eq!((count, bytes), (983_040, 7_864_320));
    assert_eq!(count.div_ceil(64), 15_360);
    // File: variable-major, then every process' 80 blocks of 4096 bytes.
    let (processes, me) = (4i64, 1i64);
    let per_process = 80 * 4096;
    let file =
        Dataloop::hvector(24, 1, processes * per_process, &Dataloop::bytes(per_process as u64).unwrap()).unwrap();
    let file_regions = Cursor::new(&file, 1, me * per_process).unwrap().collect_all();
    assert_eq!(file_regions.len(), 24);
    let memory_regions = Cursor::new(&memory, 1, 0).unwrap().collect_all();
    let pieces = zip_lists(&memory_regions, &file_regions).unwrap();
    assert_eq!(pieces.len(), 983_040);
    let second_variable = pieces[40_960];
    assert_eq!(second_variable.file_offset, (processes * per_process + me * per_process) as u64);
    assert_eq!(second_variable.memory_offset, first.offset - 5 * 8 + 8);
}

/// Tile reader: a 3 x 2 wall of 1024 x 768 tiles of 3-byte pixels with overlap.
fn tile(column: u64, row: u64, overlap_x: u64, overlap_y: u64) -> (Dataloop, u64, u64) {
    let pixel = Dataloop::bytes(3).unwrap();
    let width = 3 * 1024 - 2 * overlap_x;
    let height = 2 * 768 - overlap_y;
    let starts = [row * (768 - overlap_y), column * (1024 - overlap_x)];
    let t = subarray(2, &[height, width], &[768, 1024], &starts, Order::C, &pixel).unwrap();
    (t, width, height)
}

#[test]
fn tile_reader_frames() {
    // The thesis' wall: 270 px horizontal and 128 px vertical overlap.
    let (t, width, height) = tile(1, 1, 270, 128);
    assert_eq!((width, height), (2532, 1408));
    assert_eq!(t.extent() as u64, 2532 * 1408 * 3); // ~10.2 MB per frame
    assert_eq!(census(&t), (768, 768 * 3072, vec![3072]));
    assert_eq!(768u64.div_ceil(64), 12); // list I/O requests; datatype I/O needs one
    let first = Cursor::new(&t, 1, 0).unwrap().collect_all()[0];
    assert_eq!(first.offset, (640 * 2532 + 754) * 3);
    // Overlap of 128 px horizontally and none vertically.
    let (t, width, _) = tile(2, 1, 128, 0);
    let regions = Cursor::new(&t, 1, 0).unwrap().collect_all();
    assert_eq!(regions.len(), 768);
    assert_eq!(regions[0].offset, (768 * width + 2 * 896) * 3);
    assert_eq!(regions[767].offset + regions[767].length, (1536 * width) * 3);
}

#[test]
fn hpio_default_vector_over_16_servers() {
    // 4096 regions of 8 B with 128 B spacing, 64 KiB strips on 16 servers.
    let region = Dataloop::bytes(8).unwrap();
    let pattern = Dataloop::hvector(4096, 1, 136, &region).unwrap();
    let mut total = 0;
    for server in 0..16 {
        let filter = StripeFilter::new(64 << 10, 16, server).unwrap();
        let pieces = StripeCursor::new(Cursor::new(&pattern, 1, 0).unwrap(), filter).collect_all();
        total += pieces.iter().map(|p| p.length).sum::<u64>();
    }
    assert_eq!(total, 32 << 10);
}
