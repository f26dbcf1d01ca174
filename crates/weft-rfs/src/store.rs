//! What the gateway performs requests against: a local directory (the
//! paper's single-server setting) or a Weft file system, behind one small
//! trait, [`Store`]. Accesses arrive as file regions in stream order (the
//! gateway resolves views first).

use std::collections::HashMap;
use std::fs::OpenOptions;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

use weft_client::{BlockingClient, ClientOptions, CreateOptions, FileAccess, IoMethod, MemoryLayout, Region};
use weft_proto::message::Credentials;
use weft_proto::ErrorCode;

use crate::wire::open_flags;

/// One open file of a [`Store`].
pub trait StoreFile: Send {
    /// Writes `data` to `regions`, one after the other.
    fn write(&mut self, regions: &[(u64, u64)], data: &[u8]) -> Result<(), ErrorCode>;
    /// Reads `regions` into `out` (their total length); bytes past end of
    /// file read as zeros. Returns how many stream bytes lie before end of file.
    fn read(&mut self, regions: &[(u64, u64)], out: &mut [u8]) -> Result<u64, ErrorCode>;
    /// Size in bytes.
    fn size(&mut self) -> Result<u64, ErrorCode>;
    /// Sets the size.
    fn set_size(&mut self, size: u64) -> Result<(), ErrorCode>;
    /// Makes the data durable.
    fn sync(&mut self) -> Result<(), ErrorCode>;
}

/// Where files live, as seen by one (mapped) user.
pub trait Store: Send + Sync {
    /// Opens `path` with [`open_flags`].
    fn open(&self, path: &str, flags: u32) -> Result<Box<dyn StoreFile>, ErrorCode>;
    /// Removes `path`.
    fn delete(&self, path: &str) -> Result<(), ErrorCode>;
}

/// How many stream bytes of `regions` lie before `size`.
fn before_eof(regions: &[(u64, u64)], size: u64) -> u64 {
    let mut before = 0;
    for &(offset, length) in regions {
        if offset >= size {
            break;
        }
        before += length.min(size - offset);
        if offset + length > size {
            break;
        }
    }
    before
}

fn io_code(error: &std::io::Error) -> ErrorCode {
    match error.raw_os_error() {
        Some(libc::ENOENT) => ErrorCode::NoEntry,
        Some(libc::EEXIST) => ErrorCode::Exists,
        Some(libc::EACCES) => ErrorCode::Access,
        Some(libc::EPERM) => ErrorCode::Perm,
        Some(libc::ENOSPC) | Some(libc::EDQUOT) => ErrorCode::NoSpace,
        Some(libc::EISDIR) => ErrorCode::IsDir,
        Some(libc::ENOTDIR) => ErrorCode::NotDir,
        Some(libc::ENAMETOOLONG) => ErrorCode::NameTooLong,
        Some(libc::EINVAL) => ErrorCode::Invalid,
        _ => ErrorCode::Io,
    }
}

/// Files under a local directory; the path must stay inside it.
pub struct LocalStore {
    root: PathBuf,
}

impl LocalStore {
    /// A store rooted at `root`.
    pub fn new(root: PathBuf) -> LocalStore {
        LocalStore { root }
    }

    fn resolve(&self, path: &str) -> Result<PathBuf, ErrorCode> {
        let mut out = self.root.clone();
        for component in Path::new(path).components() {
            match component {
                Component::RootDir | Component::CurDir => {}
                Component::Normal(name) => out.push(name),
                Component::ParentDir | Component::Prefix(_) => return Err(ErrorCode::Access),
            }
        }
        if out == self.root {
            return Err(ErrorCode::IsDir);
        }
        Ok(out)
    }
}

struct LocalFile(std::fs::File);

impl StoreFile for LocalFile {
    fn write(&mut self, regions: &[(u64, u64)], data: &[u8]) -> Result<(), ErrorCode> {
        let mut at = 0usize;
        for &(offset, length) in regions {
            let length = length as usize;
            let piece = data.get(at..at + length).ok_or(ErrorCode::Invalid)?;
            self.0.write_all_at(piece, offset).map_err(|e| io_code(&e))?;
            at += length;
        }
        Ok(())
    }

    fn read(&mut self, regions: &[(u64, u64)], out: &mut [u8]) -> Result<u64, ErrorCode> {
        let size = self.size()?;
        let mut at = 0usize;
        for &(offset, length) in regions {
            let length = length as usize;
            let piece = out.get_mut(at..at + length).ok_or(ErrorCode::Invalid)?;
            let mut done = 0;
            while done < length {
                match self.0.read_at(&mut piece[done..], offset + done as u64) {
                    Ok(0) => break,
                    Ok(n) => done += n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(io_code(&e)),
                }
            }
            piece[done..].fill(0);
            at += length;
        }
        Ok(before_eof(regions, size))
    }

    fn size(&mut self) -> Result<u64, ErrorCode> {
        Ok(self.0.metadata().map_err(|e| io_code(&e))?.len())
    }

    fn set_size(&mut self, size: u64) -> Result<(), ErrorCode> {
        self.0.set_len(size).map_err(|e| io_code(&e))
    }

    fn sync(&mut self) -> Result<(), ErrorCode> {
        self.0.sync_data().map_err(|e| io_code(&e))
    }
}

impl Store for LocalStore {
    fn open(&self, path: &str, flags: u32) -> Result<Box<dyn StoreFile>, ErrorCode> {
        let full = self.resolve(path)?;
        let mut options = OpenOptions::new();
        // Always readable when the mode allows: the gateway reads to answer
        // size and EOF questions even for write-only MPI opens.
        options.read(flags & open_flags::READ != 0).write(flags & open_flags::WRITE != 0).mode(0o644);
        if flags & open_flags::CREATE != 0 {
            options.write(true);
            if flags & open_flags::EXCL != 0 {
                options.create_new(true);
            } else {
                options.create(true);
            }
        }
        let file = options.open(&full).map_err(|e| io_code(&e))?;
        if file.metadata().map_err(|e| io_code(&e))?.is_dir() {
            return Err(ErrorCode::IsDir);
        }
        Ok(Box::new(LocalFile(file)))
    }

    fn delete(&self, path: &str) -> Result<(), ErrorCode> {
        std::fs::remove_file(self.resolve(path)?).map_err(|e| io_code(&e))
    }
}

/// Files in a Weft file system, one client per mapped identity.
pub struct WeftStore {
    config: weft_config::Config,
    clients: Mutex<HashMap<u32, Arc<BlockingClient>>>,
}

/// Worker threads of each Weft client the gateway starts.
const WEFT_CLIENT_THREADS: usize = 2;

impl WeftStore {
    /// A store on the file system of `config`.
    pub fn new(config: weft_config::Config) -> WeftStore {
        WeftStore { config, clients: Mutex::new(HashMap::new()) }
    }

    /// The view of this store for `cred` (the mapped local identity).
    pub fn for_identity(self: &Arc<Self>, cred: Credentials) -> Result<WeftUserStore, ErrorCode> {
        let mut clients = self.clients.lock().map_err(|_| ErrorCode::Io)?;
        let client = match clients.get(&cred.uid) {
            Some(client) => client.clone(),
            None => {
                let options = ClientOptions { credentials: cred.clone(), ..ClientOptions::default() };
                let client = Arc::new(BlockingClient::new(self.config.clone(), options, WEFT_CLIENT_THREADS)?);
                clients.insert(cred.uid, client.clone());
                client
            }
        };
        Ok(WeftUserStore { client })
    }
}

/// A [`WeftStore`] acting as one user.
pub struct WeftUserStore {
    client: Arc<BlockingClient>,
}

struct WeftFile {
    client: Arc<BlockingClient>,
    file: weft_client::File,
}

impl StoreFile for WeftFile {
    fn write(&mut self, regions: &[(u64, u64)], data: &[u8]) -> Result<(), ErrorCode> {
        match regions {
            [] => Ok(()),
            [(offset, _)] => self.client.write_at(&self.file, *offset, data),
            _ => {
                let file: Vec<Region> = regions.iter().map(|&(o, l)| Region::new(o, l)).collect();
                self.client.write_noncontig(
                    &self.file,
                    IoMethod::LIST_DEFAULT,
                    data,
                    MemoryLayout::Contiguous,
                    FileAccess::List(&file),
                )
            }
        }
    }

    fn read(&mut self, regions: &[(u64, u64)], out: &mut [u8]) -> Result<u64, ErrorCode> {
        let size = self.client.file_size(&self.file)?;
        let before = before_eof(regions, size);
        out.fill(0);
        // Only the bytes before end of file go over the wire.
        let mut clipped = Vec::new();
        let mut left = before;
        for &(offset, length) in regions {
            if left == 0 {
                break;
            }
            let n = length.min(left);
            clipped.push(Region::new(offset, n));
            left -= n;
        }
        let target = &mut out[..before as usize];
        match clipped.as_slice() {
            [] => {}
            [one] => {
                self.client.read_at(&self.file, one.offset, target)?;
            }
            _ => self.client.read_noncontig(
                &self.file,
                IoMethod::LIST_DEFAULT,
                target,
                MemoryLayout::Contiguous,
                FileAccess::List(&clipped),
            )?,
        }
        Ok(before)
    }

    fn size(&mut self) -> Result<u64, ErrorCode> {
        self.client.file_size(&self.file)
    }

    fn set_size(&mut self, size: u64) -> Result<(), ErrorCode> {
        self.client.truncate_file(&self.file, size)
    }

    fn sync(&mut self) -> Result<(), ErrorCode> {
        self.client.fsync(&self.file)
    }
}

impl Store for WeftUserStore {
    fn open(&self, path: &str, flags: u32) -> Result<Box<dyn StoreFile>, ErrorCode> {
        let mut wanted = 0;
        if flags & open_flags::READ != 0 {
            wanted |= weft_client::access::READ;
        }
        if flags & open_flags::WRITE != 0 {
            wanted |= weft_client::access::WRITE;
        }
        let file = if flags & open_flags::CREATE != 0 {
            let exclusive = flags & open_flags::EXCL != 0;
            let options = CreateOptions { mode: None, strip_bytes: None, stripe_count: None, exclusive };
            match self.client.create(path, options) {
                Err(ErrorCode::Exists) if !exclusive => self.client.open(path, wanted)?,
                other => other?,
            }
        } else {
            self.client.open(path, wanted)?
        };
        Ok(Box::new(WeftFile { client: self.client.clone(), file }))
    }

    fn delete(&self, path: &str) -> Result<(), ErrorCode> {
        self.client.unlink(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_store_regions_and_eof() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::new(dir.path().to_path_buf());
        let mut file = store.open("/a", open_flags::CREATE | open_flags::READ | open_flags::WRITE).unwrap();
        file.write(&[(4, 2), (0, 2)], b"xyab").unwrap();
        assert_eq!(std::fs::read(dir.path().join("a")).unwrap(), b"ab\0\0xy");
        let mut out = [9u8; 6];
        assert_eq!(file.read(&[(4, 4), (0, 2)], &mut out).unwrap(), 2);
        assert_eq!(&out, b"xy\0\0ab");
        assert_eq!(store.open("/../etc/passwd", open_flags::READ).err(), Some(ErrorCode::Access));
        assert_eq!(store.open("/a", open_flags::CREATE | open_flags::EXCL).err(), Some(ErrorCode::Exists));
        store.delete("/a").unwrap();
        assert_eq!(store.delete("/a").err(), Some(ErrorCode::NoEntry));
    }
}
