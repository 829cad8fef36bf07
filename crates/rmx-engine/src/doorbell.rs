//! Wakes the ranks that follow rank 0 without a spinning wait.
//!
//! MLX's ring polls its sockets while a collective waits, so a follower waiting for rank 0's
//! next turn or control word uses most of a core (measured under `rmx launch -- rmx serve`:
//! 4–5 s of CPU in 5 s of an idle daemon). A served model is idle most of the time. So where
//! `rmx launch` starts every rank on one machine, rank 0 also holds a Unix-socket stream to
//! each follower: before it idles it says so in a turn (mirror.rs), and a follower then blocks
//! reading its stream until rank 0 writes a byte, just before the next collective. Between
//! models a follower waits for its bell before every control word (group.rs). No data crosses
//! here: the turns and words still cross by MLX's collectives.
//!
//! Process-wide, as MLX's group is. Without a bell (ranks on several machines, the engine's
//! own tests) every wait is the collective itself, as before.

use std::io::{self, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

enum Bell {
    /// Rank 0: a stream to each follower.
    Lead(Mutex<Vec<UnixStream>>),
    /// Another rank: its stream from rank 0.
    Follow(Mutex<UnixStream>),
}

static BELL: OnceLock<Bell> = OnceLock::new();

/// Whether this rank's group has a bell (then rank 0 rings before each collective that may
/// follow a wait, and the followers wait for it).
pub fn is_on() -> bool {
    BELL.get().is_some()
}

/// Rank 0: listens at `path` until `followers` ranks connected (within `timeout`).
pub fn lead(path: &Path, followers: usize, timeout: Duration) -> io::Result<()> {
    let _ = std::fs::remove_file(path);
    let listener = UnixListener::bind(path)?;
    listener.set_nonblocking(true)?;
    let deadline = Instant::now() + timeout;
    let mut streams = Vec::with_capacity(followers);
    while streams.len() < followers {
        match listener.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false)?;
                streams.push(s);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "{} of {followers} ranks rang in at {} within {} s",
                        streams.len(),
                        path.display(),
                        timeout.as_secs()
                    ),
                ))
            }
            Err(e) => return Err(e),
        }
    }
    let _ = std::fs::remove_file(path);
    set(Bell::Lead(Mutex::new(streams)))
}

/// A follower: connects to rank 0's bell at `path` (retrying until rank 0 listens, within
/// `timeout`).
pub fn follow(path: &Path, timeout: Duration) -> io::Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        match UnixStream::connect(path) {
            Ok(s) => return set(Bell::Follow(Mutex::new(s))),
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => return Err(e),
        }
    }
}

fn set(bell: Bell) -> io::Result<()> {
    BELL.set(bell)
        .map_err(|_| io::Error::other("this process already has a doorbell"))
}

/// Rank 0: wakes every follower. A follower that is gone is the group's failure, which the
/// next collective (or `rmx launch`) reports.
pub(crate) fn ring() {
    if let Some(Bell::Lead(streams)) = BELL.get() {
        for s in streams.lock().unwrap_or_else(|p| p.into_inner()).iter_mut() {
            let _ = s.write_all(&[1]);
        }
    }
}

/// A follower: blocks until rank 0 rings; an error when rank 0 is gone (its end closed),
/// which says so.
pub(crate) fn wait() -> crate::error::Result<()> {
    if let Some(Bell::Follow(s)) = BELL.get() {
        let mut byte = [0u8; 1];
        s.lock()
            .unwrap_or_else(|p| p.into_inner())
            .read_exact(&mut byte)
            .map_err(|e| {
                crate::error::EngineError::Group(if e.kind() == io::ErrorKind::UnexpectedEof {
                    "rank 0 has ended (its doorbell closed)".to_string()
                } else {
                    format!("rank 0's doorbell: {e}")
                })
            })?;
    }
    Ok(())
}
