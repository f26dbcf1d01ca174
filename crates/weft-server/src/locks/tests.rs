//! The lock service alone (no sockets): grant order, partial grants,
//! partial release, blocked requests retried on release, leases, fences,
//! escalation and datatype descriptions.

use weft_dataloop::Dataloop;
use weft_proto::message::DatatypeAccess;

use super::*;

fn datafile() -> Handle {
    Handle::new(0, 9).unwrap()
}

/// Two stripes of 16 bytes: datafile 0 holds file bytes 0..16, 32..48, ...
fn dist() -> Distribution {
    Distribution { strip_bytes: 16, stripe_count: 2 }
}

fn ranges(ranges: &[(u64, u64)]) -> LockDescription {
    LockDescription::Ranges { handle: datafile(), distribution: dist(), stripe_index: 0, ranges: ranges.to_vec() }
}

fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f)
}

#[test]
fn grants_in_file_order_up_to_the_first_conflict() {
    block_on(async {
        let dlm = Dlm::default();
        // Owner 1 holds local byte 20 (file byte 36).
        let a = dlm.acquire(1, 0, true, &ranges(&[(20, 1)]), u64::MAX, false, 0).await.unwrap();
        assert_eq!((a.last, a.next), (37, u64::MAX));
        // Owner 2 wants local 0, 20, 40 (file 0, 36, 72): gets file 0 only.
        let b = dlm.acquire(2, 0, true, &ranges(&[(40, 1), (0, 1), (20, 1)]), u64::MAX, false, 0).await.unwrap();
        assert_eq!((b.last, b.next), (1, 36));
        // Readers share with readers, not with the writer.
        let c = dlm.acquire(3, 0, false, &ranges(&[(1, 2)]), u64::MAX, false, 0).await.unwrap();
        assert_eq!(c.next, u64::MAX);
        let d = dlm.acquire(4, 0, false, &ranges(&[(1, 1), (20, 1)]), u64::MAX, false, 0).await.unwrap();
        assert_eq!((d.last, d.next), (2, 36));
        // `until` stops granting: registration grants nothing.
        let e = dlm.acquire(5, 0, true, &ranges(&[(60, 4)]), 0, false, 0).await.unwrap();
        assert_eq!((e.last, e.next), (0, 108));
        // Release of owner 1 lets owner 2 continue to the end.
        dlm.release(1, a.request, None).unwrap();
        let b2 = dlm.resume(2, b.request, u64::MAX, false, 0).await.unwrap();
        assert_eq!((b2.last, b2.next), (73, u64::MAX));
        // Partial release from file offset 36 keeps byte 0 only.
        let b3 = dlm.release(2, b.request, Some(36)).unwrap();
        assert_eq!((b3.last, b3.next), (1, 36));
        assert_eq!(dlm.release(3, b.request, None), Err(ErrorCode::Stale), "another owner's request");
        // A partial release from offset 0 gives back everything but keeps the request.
        let b4 = dlm.release(2, b.request, Some(0)).unwrap();
        assert_eq!((b4.last, b4.next), (0, 0));
        let b5 = dlm.resume(2, b.request, u64::MAX, false, 0).await.unwrap();
        assert_eq!(b5.next, u64::MAX);
    });
}

#[test]
fn blocked_request_is_granted_on_release() {
    block_on(async {
        let dlm = std::sync::Arc::new(Dlm::default());
        let held = dlm.acquire(1, 0, true, &ranges(&[(4, 4)]), u64::MAX, false, 0).await.unwrap();
        let waiting = {
            let dlm = dlm.clone();
            tokio::spawn(async move { dlm.acquire(2, 0, false, &ranges(&[(0, 8)]), u64::MAX, true, 10_000).await })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished());
        dlm.release(1, held.request, None).unwrap();
        let granted = waiting.await.unwrap().unwrap();
        assert_eq!(granted.next, u64::MAX);
        // A wait that times out answers the state as it stands.
        let short = dlm.acquire(3, 0, true, &ranges(&[(2, 1)]), u64::MAX, true, 150).await.unwrap();
        assert_eq!((short.last, short.next), (0, 2));
    });
}

#[test]
fn expired_owner_releases_and_fences_fail() {
    block_on(async {
        let dlm = std::sync::Arc::new(Dlm::default());
        let held = dlm.acquire(1, LEASE_MS_MIN, true, &ranges(&[(0, 8)]), u64::MAX, false, 0).await.unwrap();
        let fence = Fence { owner: 1, epoch: dlm.epoch(), requests: vec![held.request] };
        dlm.check_fence(&fence, datafile()).unwrap();
        assert_eq!(
            dlm.check_fence(&Fence { epoch: dlm.epoch() ^ 1, ..fence.clone() }, datafile()),
            Err(ErrorCode::Stale)
        );
        assert_eq!(dlm.check_fence(&fence, Handle::new(0, 10).unwrap()), Err(ErrorCode::Stale));
        // Owner 2 blocks; owner 1 goes silent and its lease lapses.
        let granted = dlm.acquire(2, 0, true, &ranges(&[(0, 1)]), u64::MAX, true, 5_000).await.unwrap();
        assert_eq!(granted.next, u64::MAX);
        assert_eq!(dlm.check_fence(&fence, datafile()), Err(ErrorCode::Stale));
        assert_eq!(dlm.renew(1), Err(ErrorCode::Stale));
    });
}

#[test]
fn a_partial_grant_does_not_pass_a_fence() {
    block_on(async {
        let dlm = Dlm::default();
        dlm.acquire(1, 0, true, &ranges(&[(8, 1)]), u64::MAX, false, 0).await.unwrap();
        let part = dlm.acquire(2, 0, true, &ranges(&[(0, 1), (8, 1)]), u64::MAX, false, 0).await.unwrap();
        let fence = Fence { owner: 2, epoch: dlm.epoch(), requests: vec![part.request] };
        assert_eq!(dlm.check_fence(&fence, datafile()), Err(ErrorCode::Stale));
        let read = dlm.acquire(2, 0, false, &ranges(&[(100, 1)]), u64::MAX, false, 0).await.unwrap();
        let fence = Fence { owner: 2, epoch: dlm.epoch(), requests: vec![read.request] };
        assert_eq!(dlm.check_fence(&fence, datafile()), Err(ErrorCode::Stale), "a read lock does not fence a write");
    });
}

#[test]
fn escalation_covers_the_span() {
    let sink_ranges: Vec<(u64, u64)> = (0..10).map(|i| (i * 4, 1)).collect();
    let (_, pieces) = pieces_of(&ranges(&sink_ranges), 3).unwrap();
    assert_eq!(pieces, vec![Piece { file: 0, local: 0, length: 37 }]);
    let (_, pieces) = pieces_of(&ranges(&sink_ranges), 100).unwrap();
    assert_eq!(pieces.len(), 10);
    // A local range crossing a strip boundary is two pieces, far apart in the file.
    let (_, pieces) = pieces_of(&ranges(&[(14, 4)]), 100).unwrap();
    assert_eq!(pieces, vec![Piece { file: 14, local: 14, length: 2 }, Piece { file: 32, local: 16, length: 2 }]);
}

#[test]
fn datatype_lock_walks_only_own_pieces() {
    // One byte every 8 bytes, 16 of them: file bytes 0, 8, ..., 120.
    let dataloop = Dataloop::hvector(16, 1, 8, &Dataloop::bytes(1).unwrap()).unwrap();
    let access = |stripe_index| DatatypeAccess {
        handle: datafile(),
        dataloop: dataloop.encode(),
        count: 1,
        displacement: 0,
        stream_start: 0,
        stream_length: 16,
        distribution: dist(),
        stripe_index,
    };
    let (_, mine) = pieces_of(&LockDescription::Datatype(access(0)), 100).unwrap();
    let files: Vec<u64> = mine.iter().map(|p| p.file).collect();
    assert_eq!(files, vec![0, 8, 32, 40, 64, 72, 96, 104]);
    let locals: Vec<u64> = mine.iter().map(|p| p.local).collect();
    assert_eq!(locals, vec![0, 8, 16, 24, 32, 40, 48, 56]);
    let (_, theirs) = pieces_of(&LockDescription::Datatype(access(1)), 100).unwrap();
    assert_eq!(theirs.iter().map(|p| p.file).collect::<Vec<_>>(), vec![16, 24, 48, 56, 80, 88, 112, 120]);
}

#[test]
fn an_owners_requests_never_conflict_and_one_stripe_is_one_piece() {
    block_on(async {
        let dlm = Dlm::default();
        let whole = |range: (u64, u64)| LockDescription::Ranges {
            handle: datafile(),
            distribution: Distribution { strip_bytes: 16, stripe_count: 1 },
            stripe_index: 0,
            ranges: vec![range],
        };
        // A whole-file lock (to FILE_BYTES_MAX) of one stripe: one piece, granted at once.
        let all = dlm.acquire(1, 0, false, &whole((0, FILE_BYTES_MAX)), u64::MAX, false, 0).await.unwrap();
        assert_eq!((all.last, all.next), (FILE_BYTES_MAX, u64::MAX));
        // The same owner upgrades part of it to exclusive while holding the shared lock...
        let part = dlm.acquire(1, 0, true, &whole((100, 50)), u64::MAX, false, 0).await.unwrap();
        assert_eq!(part.next, u64::MAX, "an owner's own locks do not block it");
        // ...and another owner is refused both, then gets the rest once 1 gives back its shared lock.
        let other = dlm.acquire(2, 0, false, &whole((120, 1)), u64::MAX, false, 0).await.unwrap();
        assert_eq!(other.next, 120);
        let beyond = dlm.acquire(2, 0, true, &whole((1 << 40, 1)), u64::MAX, false, 0).await.unwrap();
        assert_eq!(beyond.next, 1 << 40);
        dlm.release(1, all.request, None).unwrap();
        assert_eq!(dlm.resume(2, beyond.request, u64::MAX, false, 0).await.unwrap().next, u64::MAX);
        assert_eq!(dlm.resume(2, other.request, u64::MAX, false, 0).await.unwrap().next, 120, "still excluded");
        dlm.release(1, part.request, None).unwrap();
        assert_eq!(dlm.resume(2, other.request, u64::MAX, false, 0).await.unwrap().next, u64::MAX);
    });
}
