//! The client end of RFS: one pipelined connection per gateway per process
//! ([`Connection`]: requests carry ids, a reader thread hands each reply to
//! its waiter), and the per-file remote layer ([`RemoteFile`]) that opens
//! lazily (deferred open), piggybacks a new view on the next access, and
//! splits accesses into frames of at most `RFS_DATA_BYTES_MAX` bytes.
//!
//! When the gateway goes away (connection closed or reset), every waiting
//! and every later request on that connection fails with `Io`; a reply
//! that does not come within `WEFT_RFS_TIMEOUT_MS` (default
//! `RFS_REPLY_TIMEOUT_MS_DEFAULT`) fails with `TimedOut`. Nothing hangs
//! on a dead gateway.
//!
//! The key: the file named by `WEFT_RFS_KEY_FILE`, else the key file of
//! the configuration in `WEFT_CONFIG`; without either the client claims
//! its identity without proof (only a gateway without a key accepts that).

use std::collections::HashMap;
use std::io::{BufReader, BufWriter, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use weft_net::auth::{client_message, key_mac, process_credentials};
use weft_proto::limits::{RFS_AUTH_TIMEOUT_MS, RFS_DATA_BYTES_MAX, RFS_REPLY_TIMEOUT_MS_DEFAULT};
use weft_proto::ErrorCode;

use crate::layer::{Layer, Pending};
use crate::wire::{
    read_frame, write_frame, Answer, At, AuthProof, AuthReply, Body, ClientHello, Reply, Request, ServerHello,
    WireView, GATEWAY_AUTH_ID, PROTOCOL_VERSION,
};

/// A reply: the answer and the frame's data.
pub type Outcome = Result<(Answer, Vec<u8>), ErrorCode>;

/// A request sent and not yet answered.
pub struct Ticket {
    rx: Receiver<Outcome>,
    timeout: Duration,
}

impl Ticket {
    /// Waits for the reply.
    pub fn wait(self) -> Outcome {
        match self.rx.recv_timeout(self.timeout) {
            Ok(outcome) => outcome,
            Err(RecvTimeoutError::Timeout) => Err(ErrorCode::TimedOut),
            Err(RecvTimeoutError::Disconnected) => Err(ErrorCode::Io),
        }
    }
}

#[derive(Default)]
struct Waiters {
    next_id: u64,
    waiting: HashMap<u64, Sender<Outcome>>,
    dead: bool,
}

/// One authenticated stream to a gateway.
pub struct Connection {
    writer: Mutex<BufWriter<TcpStream>>,
    waiters: Arc<Mutex<Waiters>>,
    timeout: Duration,
}

fn reply_timeout() -> Duration {
    let ms = std::env::var("WEFT_RFS_TIMEOUT_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(RFS_REPLY_TIMEOUT_MS_DEFAULT as u64);
    Duration::from_millis(ms)
}

fn client_key() -> Option<Vec<u8>> {
    if let Some(path) = std::env::var_os("WEFT_RFS_KEY_FILE") {
        return weft_config::load_key(std::path::Path::new(&path)).ok();
    }
    let config = weft_config::Config::load(std::path::Path::new(&std::env::var_os("WEFT_CONFIG")?)).ok()?;
    weft_config::load_key(config.auth.key_file.as_deref()?).ok()
}

fn io(_: std::io::Error) -> ErrorCode {
    ErrorCode::Unreachable
}

impl Connection {
    /// Connects to `host:port` and authenticates (`Access` if refused).
    pub fn connect(host: &str, port: u16) -> Result<Arc<Connection>, ErrorCode> {
        let auth_timeout = Duration::from_millis(RFS_AUTH_TIMEOUT_MS as u64);
        let address = (host, port).to_socket_addrs().map_err(io)?.next().ok_or(ErrorCode::Unreachable)?;
        let stream = TcpStream::connect_timeout(&address, auth_timeout).map_err(io)?;
        stream.set_nodelay(true).map_err(io)?;
        stream.set_read_timeout(Some(auth_timeout)).map_err(io)?;
        let mut reader = BufReader::with_capacity(1 << 20, stream.try_clone().map_err(io)?);
        let mut writer = BufWriter::with_capacity(1 << 20, stream.try_clone().map_err(io)?);
        write_frame(&mut writer, &ClientHello { version: PROTOCOL_VERSION }, &[]).map_err(io)?;
        writer.flush().map_err(io)?;
        let (hello, _): (ServerHello, _) = read_frame(&mut reader).map_err(io)?;
        if hello.version != PROTOCOL_VERSION {
            return Err(ErrorCode::VersionMismatch);
        }
        let cred = process_credentials();
        let mac = client_key().map(|key| key_mac(&key, &client_message(GATEWAY_AUTH_ID, &hello.nonce, &cred)));
        write_frame(&mut writer, &AuthProof { cred, mac }, &[]).map_err(io)?;
        writer.flush().map_err(io)?;
        // A gateway that closes instead of answering refused us too.
        let (verdict, _): (AuthReply, _) = read_frame(&mut reader).map_err(|_| ErrorCode::Access)?;
        verdict.result?;
        stream.set_read_timeout(None).map_err(io)?;
        let waiters = Arc::new(Mutex::new(Waiters { next_id: 1, ..Waiters::default() }));
        let reader_waiters = waiters.clone();
        std::thread::Builder::new()
            .name("weft-rfs-reader".into())
            .spawn(move || read_replies(reader, reader_waiters))
            .map_err(|_| ErrorCode::Io)?;
        Ok(Arc::new(Connection { writer: Mutex::new(writer), waiters, timeout: reply_timeout() }))
    }

    /// Whether the gateway has gone away.
    pub fn is_dead(&self) -> bool {
        self.waiters.lock().map(|w| w.dead).unwrap_or(true)
    }

    /// Sends a request with data `parts`; the reply comes through the ticket.
    pub fn submit(&self, body: Body, parts: &[&[u8]]) -> Result<Ticket, ErrorCode> {
        let (tx, rx) = channel();
        // The writer lock orders ids and frames alike.
        let mut writer = self.writer.lock().map_err(|_| ErrorCode::Io)?;
        let id = {
            let mut waiters = self.waiters.lock().map_err(|_| ErrorCode::Io)?;
            if waiters.dead {
                return Err(ErrorCode::Io);
            }
            let id = waiters.next_id;
            waiters.next_id += 1;
            waiters.waiting.insert(id, tx);
            id
        };
        let sent = write_frame(&mut *writer, &Request { id, body }, parts).and_then(|()| writer.flush());
        if sent.is_err() {
            if let Ok(mut waiters) = self.waiters.lock() {
                waiters.waiting.remove(&id);
                waiters.dead = true;
            }
            return Err(ErrorCode::Io);
        }
        Ok(Ticket { rx, timeout: self.timeout })
    }

    /// Sends a request and waits for its reply.
    pub fn call(&self, body: Body, parts: &[&[u8]]) -> Outcome {
        self.submit(body, parts)?.wait()
    }
}

fn read_replies(mut reader: BufReader<TcpStream>, waiters: Arc<Mutex<Waiters>>) {
    loop {
        match read_frame::<Reply>(&mut reader) {
            Ok((reply, data)) => {
                let waiter = waiters.lock().ok().and_then(|mut w| w.waiting.remove(&reply.id));
                if let Some(tx) = waiter {
                    let _ = tx.send(reply.result.map(|answer| (answer, data)));
                }
            }
            Err(_) => {
                let mut waiters = waiters.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                waiters.dead = true;
                for (_, tx) in waiters.waiting.drain() {
                    let _ = tx.send(Err(ErrorCode::Io));
                }
                return;
            }
        }
    }
}

/// The process's data connection to `host:port` (a dead one is replaced).
pub fn connection(host: &str, port: u16) -> Result<Arc<Connection>, ErrorCode> {
    pooled(host, port, false)
}

/// The process's control connection to `host:port`: opens, deletes and
/// shared pointers, which must not wait behind megabytes of buffered
/// writes queued on the data connection (head-of-line blocking).
pub fn control_connection(host: &str, port: u16) -> Result<Arc<Connection>, ErrorCode> {
    pooled(host, port, true)
}

fn pooled(host: &str, port: u16, control: bool) -> Result<Arc<Connection>, ErrorCode> {
    type Pool = HashMap<(String, u16, bool), Arc<Connection>>;
    static POOL: Mutex<Option<Pool>> = Mutex::new(None);
    let mut pool = POOL.lock().map_err(|_| ErrorCode::Io)?;
    let pool = pool.get_or_insert_with(HashMap::new);
    let key = (host.to_string(), port, control);
    if let Some(conn) = pool.get(&key) {
        if !conn.is_dead() {
            return Ok(conn.clone());
        }
    }
    let conn = Connection::connect(host, port)?;
    pool.insert(key, conn.clone());
    Ok(conn)
}

/// A parsed `rfs:HOST:PORT:/path` name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteName {
    /// Gateway host.
    pub host: String,
    /// Gateway port.
    pub port: u16,
    /// Path at the gateway.
    pub path: String,
}

impl RemoteName {
    /// Parses `rfs:HOST:PORT:/path` (an IPv6 host in brackets); `None` if malformed.
    pub fn parse(name: &str) -> Option<RemoteName> {
        let rest = name.strip_prefix("rfs:")?;
        let (host, rest) = if let Some(bracketed) = rest.strip_prefix('[') {
            let (host, rest) = bracketed.split_once("]:")?;
            (host, rest)
        } else {
            rest.split_once(':')?
        };
        let (port, path) = rest.split_once(':')?;
        let port = port.parse().ok()?;
        if host.is_empty() || !path.starts_with('/') {
            return None;
        }
        Some(RemoteName { host: host.to_string(), port, path: path.to_string() })
    }
}

struct RemoteState {
    fh: Option<u64>,
    sent_view: Option<Arc<WireView>>,
}

/// A file at a gateway.
pub struct RemoteFile {
    conn: Arc<Connection>,
    path: String,
    flags: u32,
    state: Mutex<RemoteState>,
}

impl RemoteFile {
    /// A file at the gateway of `conn`, opened with `flags` now or, with
    /// `defer`, at its first access.
    pub fn open(conn: Arc<Connection>, path: &str, flags: u32, defer: bool) -> Result<RemoteFile, ErrorCode> {
        let file = RemoteFile {
            conn,
            path: path.to_string(),
            flags,
            state: Mutex::new(RemoteState { fh: None, sent_view: None }),
        };
        if !defer {
            let mut state = file.state.lock().map_err(|_| ErrorCode::Io)?;
            file.ensure_open(&mut state)?;
        }
        Ok(file)
    }

    fn ensure_open(&self, state: &mut RemoteState) -> Result<u64, ErrorCode> {
        if let Some(fh) = state.fh {
            return Ok(fh);
        }
        match self.conn.call(Body::Open { path: self.path.clone(), flags: self.flags }, &[])? {
            (Answer::Opened { fh }, _) => {
                state.fh = Some(fh);
                Ok(fh)
            }
            _ => Err(ErrorCode::Protocol),
        }
    }

    /// The view to piggyback: `Some` when it changed since last sent.
    fn view_to_send(state: &mut RemoteState, view: &Arc<WireView>) -> Option<WireView> {
        match &state.sent_view {
            Some(sent) if Arc::ptr_eq(sent, view) => None,
            _ => {
                state.sent_view = Some(view.clone());
                Some((**view).clone())
            }
        }
    }

    fn simple(&self, body: impl FnOnce(u64) -> Body) -> Outcome {
        let fh = {
            let mut state = self.state.lock().map_err(|_| ErrorCode::Io)?;
            self.ensure_open(&mut state)?
        };
        self.conn.call(body(fh), &[])
    }
}

/// Splits `parts` (total `len` bytes) into frames of at most `RFS_DATA_BYTES_MAX`.
fn frames<'a>(parts: &[&'a [u8]]) -> Vec<(u64, Vec<&'a [u8]>)> {
    let mut out: Vec<(u64, Vec<&'a [u8]>)> = Vec::new();
    let (mut start, mut current, mut current_len) = (0u64, Vec::new(), 0u64);
    for part in parts {
        let mut rest: &'a [u8] = part;
        while !rest.is_empty() {
            let room = (RFS_DATA_BYTES_MAX - current_len) as usize;
            let (head, tail) = rest.split_at(room.min(rest.len()));
            current.push(head);
            current_len += head.len() as u64;
            rest = tail;
            if current_len == RFS_DATA_BYTES_MAX {
                out.push((start, std::mem::take(&mut current)));
                start += current_len;
                current_len = 0;
            }
        }
    }
    if current_len > 0 {
        out.push((start, current));
    }
    out
}

impl Layer for RemoteFile {
    fn write(&self, view: &Arc<WireView>, at: &At, parts: &[&[u8]]) -> Result<Pending, ErrorCode> {
        let mut state = self.state.lock().map_err(|_| ErrorCode::Io)?;
        let fh = self.ensure_open(&mut state)?;
        let mut tickets = Vec::new();
        for (skip, frame) in frames(parts) {
            let len: u64 = frame.iter().map(|p| p.len() as u64).sum();
            let body = Body::Write { fh, view: Self::view_to_send(&mut state, view), at: at.split(skip, len) };
            tickets.push(self.conn.submit(body, &frame)?);
        }
        Ok(Pending::Tickets(tickets))
    }

    fn read(&self, view: &Arc<WireView>, at: &At, len: u64) -> Result<Vec<u8>, ErrorCode> {
        let mut state = self.state.lock().map_err(|_| ErrorCode::Io)?;
        let fh = self.ensure_open(&mut state)?;
        let mut tickets = Vec::new();
        let mut skip = 0;
        while skip < len {
            let n = (len - skip).min(RFS_DATA_BYTES_MAX);
            let body = Body::Read { fh, view: Self::view_to_send(&mut state, view), at: at.split(skip, n), len: n };
            tickets.push((n, self.conn.submit(body, &[])?));
            skip += n;
        }
        drop(state);
        let mut out = Vec::with_capacity(len as usize);
        let mut short = false;
        for (n, ticket) in tickets {
            let (_, data) = ticket.wait()?;
            if !short {
                short = (data.len() as u64) < n;
                out.extend_from_slice(&data);
            }
        }
        Ok(out)
    }

    fn size(&self) -> Result<u64, ErrorCode> {
        match self.simple(|fh| Body::Size { fh })? {
            (Answer::Size(size), _) => Ok(size),
            _ => Err(ErrorCode::Protocol),
        }
    }

    fn set_size(&self, size: u64) -> Result<(), ErrorCode> {
        self.simple(|fh| Body::SetSize { fh, size }).map(|_| ())
    }

    fn sync(&self) -> Result<(), ErrorCode> {
        self.simple(|fh| Body::Sync { fh }).map(|_| ())
    }

    fn close(&self) -> Result<(), ErrorCode> {
        let fh = self.state.lock().map_err(|_| ErrorCode::Io)?.fh.take();
        match fh {
            Some(fh) => self.conn.call(Body::Close { fh }, &[]).map(|_| ()),
            None => Ok(()),
        }
    }
}

/// Opens (creates) `name` once at the gateway and closes it: the
/// collective open's check on the opening rank.
pub fn open_check(name: &RemoteName, flags: u32) -> Result<(), ErrorCode> {
    let conn = control_connection(&name.host, name.port)?;
    let file = RemoteFile::open(conn, &name.path, flags, false)?;
    file.close()
}

/// An operation on the shared file pointer of `name` at its gateway; the old value.
pub fn shared(name: &RemoteName, op: crate::wire::SharedOp) -> Result<u64, ErrorCode> {
    let conn = control_connection(&name.host, name.port)?;
    match conn.call(Body::Shared { path: name.path.clone(), op }, &[])? {
        (Answer::Size(old), _) => Ok(old),
        _ => Err(ErrorCode::Protocol),
    }
}

/// Removes `name` at its gateway.
pub fn delete(name: &RemoteName) -> Result<(), ErrorCode> {
    let conn = control_connection(&name.host, name.port)?;
    conn.call(Body::Delete { path: name.path.clone() }, &[]).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        let name = RemoteName::parse("rfs:127.0.0.9:4000:/a/b").unwrap();
        assert_eq!((name.host.as_str(), name.port, name.path.as_str()), ("127.0.0.9", 4000, "/a/b"));
        assert_eq!(RemoteName::parse("rfs:[::1]:7:/x").unwrap().host, "::1");
        assert!(RemoteName::parse("rfs:host:notaport:/x").is_none());
        assert!(RemoteName::parse("rfs:host:1:relative").is_none());
        assert!(RemoteName::parse("weft:/x").is_none());
    }

    #[test]
    fn frames_split_across_parts() {
        let big = vec![0u8; RFS_DATA_BYTES_MAX as usize + 5];
        let split = frames(&[b"abc", &big]);
        assert_eq!(split.len(), 2);
        assert_eq!(split[0].0, 0);
        assert_eq!(split[0].1.iter().map(|p| p.len()).sum::<usize>(), RFS_DATA_BYTES_MAX as usize);
        assert_eq!((split[1].0, split[1].1.iter().map(|p| p.len()).sum::<usize>()), (RFS_DATA_BYTES_MAX, 8));
    }
}
