//! `abandon_pending`, as a signal handler calls it mid-write: the new set's
//! temporary directory goes, the previous set stays, later writes fail.
//! Its own test binary, since abandoning is for the rest of the process.

use std::fs;
use std::io;
use std::path::Path;

use stormbreak_sim::output::{
    FileWriter, FsWriter, OutDir, OutputError, OutputSet, abandon_pending,
};

/// Writes normally, but after the `at`-th file a "signal" arrives.
struct SignalAfter {
    at: usize,
    written: usize,
    removed: Vec<std::path::PathBuf>,
}

impl FileWriter for SignalAfter {
    fn write_file(&mut self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        FsWriter.write_file(path, bytes)?;
        self.written += 1;
        if self.written == self.at {
            // From another thread, as ctrlc's handler runs.
            self.removed = std::thread::spawn(abandon_pending).join().unwrap();
        }
        Ok(())
    }
}

#[test]
fn a_signal_mid_write_removes_the_new_set_and_keeps_the_old() {
    let parent = Path::new(env!("CARGO_TARGET_TMPDIR")).join("outputs-abandon");
    let _ = fs::remove_dir_all(&parent);
    fs::create_dir_all(&parent).unwrap();
    let out = parent.join("out");
    let mut a = OutputSet::new();
    a.add("summary.json", "a");
    OutDir::prepare(&out).unwrap().write(&a).unwrap();

    let mut b = OutputSet::new();
    b.add("summary.json", "b").add("report.html", "b");
    let prepared = OutDir::prepare(&out).unwrap();
    let mut writer = SignalAfter {
        at: 2,
        written: 0,
        removed: Vec::new(),
    };
    let err = prepared.write_with(&b, &mut writer).unwrap_err();
    assert!(matches!(err, OutputError::Interrupted { .. }), "{err}");
    assert_eq!(writer.removed.len(), 1, "the staging directory");
    assert!(!writer.removed[0].exists());
    assert_eq!(fs::read_to_string(out.join("summary.json")).unwrap(), "a");
    let names: Vec<_> = fs::read_dir(&parent)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["out"]);
    // After a signal nothing more is started.
    let err = OutDir::prepare(&out).unwrap_err();
    assert!(matches!(err, OutputError::Interrupted { .. }), "{err}");
}
