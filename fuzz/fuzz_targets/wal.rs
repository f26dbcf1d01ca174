//! Metadata log replay: the header and record checks over a whole log
//! image, the decoding of each batch and of the object records it carries,
//! and applying the batches to a store as start-up replay does (redb in
//! memory).
//!
//! Input: first byte even → the rest is a raw log image (reaches the
//! header and record checks); odd → the rest is a list of payloads
//! (`length u16, bytes`) wrapped into records with valid checksums behind
//! a valid header (reaches the batch decoder and the apply path).
#![no_main]

use libfuzzer_sys::fuzz_target;
use redb::backends::InMemoryBackend;
use redb::Database;
use weft_server::store::Writer;
use weft_server::wal::{self, Mutation};

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    let image = if mode % 2 == 0 { rest.to_vec() } else { wrap(rest) };
    let Ok((batches, tail)) = wal::decode_image(&image) else { return };
    assert!(tail as usize <= image.len().max(wal::HEADER_BYTES as usize));
    if batches.is_empty() {
        return;
    }
    let db = Database::builder().create_with_backend(InMemoryBackend::new()).expect("in-memory redb");
    let txn = db.begin_write().expect("write transaction");
    {
        let writer = Writer::new(&txn);
        for batch in batches {
            for mutation in batch {
                if let Mutation::PutObject(_, bytes) = &mutation {
                    let _ = weft_server::store::ObjectRecord::decode(bytes);
                }
                let _ = writer.apply(mutation);
            }
        }
    }
    txn.commit().expect("commit in memory");
});

fn wrap(mut rest: &[u8]) -> Vec<u8> {
    let generation = 7;
    let mut image = wal::encode_header(generation).to_vec();
    while rest.len() >= 2 {
        let length = (u16::from_le_bytes([rest[0], rest[1]]) as usize).min(rest.len() - 2);
        image.extend_from_slice(&wal::encode_record(generation, &rest[2..2 + length]));
        rest = &rest[2 + length..];
    }
    image.extend_from_slice(&[0u8; 16]);
    image
}
