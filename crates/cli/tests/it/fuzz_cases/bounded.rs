//! Runs the real `stormbreak` binary bounded in memory and wall time, and
//! judges how it ended. Shared by `tests/fuzz.rs` and `tests/hostile.rs`
//! (each includes it with `#[path]`; cargo does not build it as a test of
//! its own because it is not at the top of `tests/`).
//!
//! The bounds make a runaway input a test failure instead of a CI machine
//! brought down: `ulimit -v` (about 2 GB of address space) turns unbounded
//! allocation into an allocation failure (SIGABRT) or a kill, and a
//! wall-clock hang guard kills a run that does not finish. The guard is not
//! a timing assertion: it is ten or more times what the inputs need, and
//! only a run that would not end on its own reaches it.

#![allow(dead_code)] // Each including test file uses a different subset.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Address-space bound of one run, in KiB (`ulimit -v`): about 2 GB.
pub const MEMORY_LIMIT_KIB: u64 = 2_000_000;

/// Wall-clock bound of one run: a hang guard, not a timing assertion.
pub const HANG_GUARD: Duration = Duration::from_secs(20);

/// How much of stdout/stderr a [`Run`] keeps (the tail): enough for any
/// error message, bounded if a run prints without end.
const KEEP_BYTES: u64 = 64 * 1024;

/// The binary under test.
pub fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_stormbreak")
}

/// How a bounded run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// The process exited with this status code.
    Exited(i32),
    /// The process died of this signal (SIGKILL from the kernel's OOM
    /// killer, SIGABRT from "memory allocation failed", SIGSEGV, …).
    Signalled(i32),
    /// The hang guard killed it.
    HangGuard,
}

/// The outcome of one bounded run.
#[derive(Debug, Clone)]
pub struct Run {
    pub ending: Ending,
    pub stdout: String,
    pub stderr: String,
    /// Wall time, for the summary line only (never asserted on).
    pub elapsed: Duration,
}

/// How an acceptable run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Exit 0: the run finished.
    Ran,
    /// A non-zero exit with a clean error naming the scenario file.
    Refused,
}

/// Kills and reaps the child when dropped, so no test (not even a failing
/// or panicking one) leaves a process behind.
struct ChildGuard(Option<Child>);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Runs `stormbreak ARGS…` under `ulimit -v` with the hang guard. `work` is
/// an existing directory for the captured stdout/stderr (files rather than
/// pipes: no reader threads, and a child that floods its output cannot
/// block on a full pipe and look hung).
pub fn run_bounded<S: AsRef<OsStr>>(args: &[S], work: &Path, guard: Duration) -> Run {
    let out_path = work.join("stdout.txt");
    let err_path = work.join("stderr.txt");
    let stdout = File::create(&out_path).expect("create stdout capture");
    let stderr = File::create(&err_path).expect("create stderr capture");
    // `exec` replaces the shell, so the pid we hold (and kill) is the
    // binary's own. A shell that cannot set the limit exits 125 with its
    // own message, which names no scenario file: the case fails rather
    // than run unbounded.
    let script = format!("ulimit -v {MEMORY_LIMIT_KIB} || exit 125; exec \"$0\" \"$@\"");
    let started = Instant::now();
    let child = Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg(binary())
        .args(args)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        // A panic message is what we look for; a backtrace would only
        // lengthen it, and an inherited RUST_BACKTRACE must not change it.
        .env_remove("RUST_BACKTRACE")
        .env_remove("RUST_LIB_BACKTRACE")
        .spawn()
        .expect("spawn sh");
    let mut guard_child = ChildGuard(Some(child));
    let status = wait_with_guard(&mut guard_child, guard);
    let elapsed = started.elapsed();
    drop(guard_child); // reaps (or kills and reaps) now
    let ending = match status {
        None => Ending::HangGuard,
        Some(s) => ending_of(s),
    };
    Run {
        ending,
        stdout: tail(&out_path),
        stderr: tail(&err_path),
        elapsed,
    }
}

fn wait_with_guard(child: &mut ChildGuard, guard: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + guard;
    let mut nap = Duration::from_millis(2);
    let c = child.0.as_mut().expect("child present");
    loop {
        match c.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) => {}
            Err(e) => panic!("waiting for the child: {e}"),
        }
        if Instant::now() >= deadline {
            return None; // the guard's Drop kills and reaps it
        }
        std::thread::sleep(nap);
        nap = (nap * 2).min(Duration::from_millis(25));
    }
}

fn ending_of(status: ExitStatus) -> Ending {
    match (status.code(), status.signal()) {
        (Some(code), _) => Ending::Exited(code),
        (None, Some(sig)) => Ending::Signalled(sig),
        (None, None) => unreachable!("an exit status has a code or a signal"),
    }
}

fn tail(path: &Path) -> String {
    let Ok(mut f) = File::open(path) else {
        return String::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = f.seek(SeekFrom::Start(len.saturating_sub(KEEP_BYTES)));
    let mut bytes = Vec::new();
    let _ = f.read_to_end(&mut bytes);
    String::from_utf8_lossy(&bytes).into_owned()
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        6 => "SIGABRT (an abort, e.g. \"memory allocation failed\" under the memory bound)",
        9 => "SIGKILL (the memory bound or the OOM killer)",
        11 => "SIGSEGV (e.g. a stack overflow)",
        7 => "SIGBUS",
        8 => "SIGFPE",
        4 => "SIGILL",
        _ => "a signal",
    }
}

impl Run {
    /// "Clear error or bounded run, never a panic/abort/hang": `Ok` when the
    /// run finished, or stopped with an error that is not a panic and names
    /// `file` (every scenario error names its file — docs/scenarios.md);
    /// `Err` says what went wrong.
    pub fn judge(&self, file: &Path) -> Result<Verdict, String> {
        let code = match self.ending {
            Ending::HangGuard => {
                return Err(format!(
                    "killed by the hang guard after {} s (the run did not end on its own)",
                    HANG_GUARD.as_secs()
                ));
            }
            Ending::Signalled(sig) => {
                return Err(format!("died of signal {sig}: {}", signal_name(sig)));
            }
            Ending::Exited(code) => code,
        };
        // A panic is a failure whatever the exit code (a panic in a thread
        // could still end in exit 0 or 1).
        for bad in ["panicked", "RUST_BACKTRACE", "memory allocation of"] {
            if self.stderr.contains(bad) {
                return Err(format!("exit {code} with {bad:?} on stderr"));
            }
        }
        if code == 0 {
            return Ok(Verdict::Ran);
        }
        let name = file.display().to_string();
        if self.stderr.contains(&name) {
            Ok(Verdict::Refused)
        } else {
            Err(format!(
                "exit {code} with an error that does not name the scenario file {name}"
            ))
        }
    }

    /// The last `lines` lines of stderr, for failure messages.
    pub fn stderr_tail(&self, lines: usize) -> String {
        let all: Vec<&str> = self.stderr.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}

/// A fresh directory removed on drop (also when the test fails).
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(label: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("stormbreak-{label}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create temp dir");
        TempDir(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
