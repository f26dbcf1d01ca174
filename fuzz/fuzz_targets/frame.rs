//! Frames as a server reads them from a socket: the fixed header's checks,
//! then whole frames back to back (bounded allocation by the declared
//! lengths' limits), and each request body decoded as the server would.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weft_proto::frame::{read_frame, FrameHeader, FrameKind};
use weft_proto::limits::FRAME_HEADER_BYTES;
use weft_proto::message::{self, Request};

fuzz_target!(|data: &[u8]| {
    if let Some(fixed) = data.get(..FRAME_HEADER_BYTES) {
        if let Ok(header) = FrameHeader::decode(fixed.try_into().expect("32 bytes")) {
            let again = FrameHeader::decode(&header.encode()).expect("an encoded header decodes");
            assert_eq!(again, header);
        }
    }
    let mut reader = data;
    futures::executor::block_on(async {
        // Each frame consumes at least its 32 header bytes: bounded.
        while let Ok(Some(frame)) = read_frame(&mut reader).await {
            if frame.header.kind == FrameKind::Request {
                let _ = message::decode::<Request>(&frame.body);
            }
        }
    });
});
