//! Request and reply bodies (postcard) and the checks a server applies to
//! what they carry before acting: names, distributions, list regions,
//! datatype accesses. A decoded message must re-encode to one that decodes
//! equal.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weft_dataloop::Dataloop;
use weft_proto::message::{self, ReplyResult, Request};

fuzz_target!(|data: &[u8]| {
    if let Ok(request) = message::decode::<Request>(data) {
        let again: Request = message::decode(&message::encode(&request)).expect("a re-encoded request decodes");
        assert_eq!(again, request);
        check(&request);
    }
    if let Ok(reply) = message::decode::<ReplyResult>(data) {
        let again: ReplyResult = message::decode(&message::encode(&reply)).expect("a re-encoded reply decodes");
        assert_eq!(again, reply);
    }
});

fn check(request: &Request) {
    match request {
        Request::ReadDatatype { access } | Request::WriteDatatype { access, .. } => {
            let _ = access.distribution.validate();
            if let Ok(dataloop) = Dataloop::decode(&access.dataloop) {
                let _ = weft_dataloop::Cursor::new(&dataloop, access.count, access.displacement);
            }
        }
        Request::Lookup { name, .. } | Request::CreateDirent { name, .. } | Request::RemoveDirent { name, .. } => {
            let _ = message::validate_name(name);
        }
        _ => {}
    }
}
