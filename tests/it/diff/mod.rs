//! The differential test: every `tests/diff/*.txt` transcript is sent, line by line, to a real
//! `redis-server` and to sluice, and the reply bytes must be identical; the file also records
//! what Redis answered, so it reads as documentation and `cargo test` can check sluice without
//! a redis-server.
//!
//! # Transcript format
//!
//! - Blank lines and lines starting with `#` are ignored.
//! - Lines starting with `<` are Redis's recorded replies to the command line above them, one
//!   reply a line, written as `render.rs` describes (`< +OK`, `< :3`, `< "value"`, `< (nil)`,
//!   `< ["a", "b"]`, `< {"f": "v"}`, `< -ERR …`), then `< (connection closed)` if Redis closed
//!   the connection. `< ` lines hold for both protocols; where RESP2 and RESP3 differ the file
//!   has `<2 ` lines and `<3 ` lines instead. A command without recorded lines is fine (it is
//!   only compared against a live redis-server).
//! - Every other line is a command, split into arguments by redis-cli's inline rules
//!   (whitespace separates; `"double quotes"` allow `\n \r \t \b \a \\ \" \xHH`;
//!   `'single quotes'` allow `\'`) and sent as a RESP multibulk request.
//! - Directives in square brackets may start a line, before the command:
//!   - `[sort]`: the reply is an array, set or map; its top-level elements (a map's
//!     key/value pairs) are sorted by their encoded bytes on both sides before comparing;
//!   - `[sortpairs]`: like `[sort]`, for a flat array of pairs (RESP2 HGETALL): sorts the
//!     (field, value) pairs;
//!   - `[any]`: only the reply's type byte (its first byte) is compared;
//!   - `[now]`: the reply depends on the wall clock (a TTL of an absolute expiry time): it
//!     is compared exactly with the live Redis, but by type only with the recorded reply;
//!   - `[sleep N]`: sleep N ms (N ≤ 300) before sending;
//!   - `[raw] text`: the rest of the line, after unescaping `\r \n \t \b \a \0 \\ \" \xHH`, is
//!     sent as raw bytes. All the replies that arrive are compared, and whether the server
//!     closed the connection (protocol errors do). If either side closed, both connections are
//!     reopened (with `HELLO 2` or `HELLO 3` as the run, without `FLUSHALL`) for the following
//!     lines. A `[raw]` line must provoke at least one reply (an empty line alone gets none:
//!     follow it by `PING\r\n`).
//!   - `[conn N]` (N from 1 to 8): the line goes to connection N instead of the main one
//!     (connection 1). Each is a pair of connections, one to each server, opened on first
//!     use with the run's protocol and equal client ids; `[raw]` lines stay on connection 1;
//!   - `[send]`: the command is sent without reading its reply (record nothing under it).
//!     The harness waits (at most 500 ms) until each server has answered it or counts one
//!     more blocked client (INFO `blocked_clients`, read on a control connection), so the
//!     next line runs after it took effect: `[conn 2] [send] BLPOP q 0`;
//!   - `[collect N]`, alone on its line: reads the next reply connection N has (a
//!     `[send]` line's), compared and recorded like a command's reply.
//! - Every command line must get exactly one reply within 2 s; no reply is a mismatch.
//!
//! # Runs
//!
//! Each file runs twice, in RESP2 and in RESP3: each run gets its own fresh `redis-server` and
//! sluice, one connection to each, and `HELLO 2` (or `HELLO 3`) + `FLUSHALL` (replies
//! discarded) before the first line. Client ids are kept equal on both sides and the same from
//! run to run (both sides reconnect until their ids are equal and at least `run::ID_FLOOR`), so
//! `CLIENT ID` and `HELLO` replies compare exactly and can be recorded. `QUIT` lines also wait
//! for the connection to close and reopen both.
//!
//! With a redis-server (the full test command always has one), sluice is compared with the live
//! Redis, and the recorded replies with what Redis says now: a recorded reply Redis no longer
//! gives fails the test as stale. Without one on `PATH` (or with `SLUICE_DIFF_OFFLINE=1`),
//! sluice is compared with the recorded replies, after the same `[sort]`/`[any]` treatment.
//!
//! - `SLUICE_DIFF_REGENERATE=1 cargo test --test it diff` rewrites every file's recorded
//!   replies from a live redis-server (run it after adding or changing lines, then review
//!   `git diff tests/diff`).
//! - `SLUICE_DIFF_VERBOSE=1 cargo test --test it diff::<file> -- --nocapture` prints every line
//!   with both replies, which helps when writing a transcript.
//!
//! # Transcripts of newer commands
//!
//! CI has Debian's redis-server 7.0.15, which lacks the commands Redis added later (hash-field
//! expiry in 7.4…). A transcript whose first lines include `# requires redis N` (N like `7.4`)
//! runs against its recorded replies only, unless `SLUICE_DIFF_NEWER_REDIS` names a
//! redis-server binary of version N or later, which then plays the live side (and
//! `SLUICE_DIFF_REGENERATE=1` rewrites the file from it). The header says where the replies
//! come from: a build of that Redis, or (for versions no server could be built of here) the
//! Redis source and command pages it cites.
//!
//! Each file named in `transcripts!` below is its own `#[test]`; `unlisted_transcripts` runs
//! every other file in the directory, so a new transcript is never silently skipped.

mod render;
mod run;
mod transcript;

use std::path::{Path, PathBuf};

use run::{Outcome, run_steps, run_steps_with};
use transcript::{Recorded, Step, parse_transcript};

macro_rules! transcripts {
    ($($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                run_files(&[transcript_dir().join(concat!(stringify!($name), ".txt"))]);
            }
        )*
        /// The transcripts that have their own test.
        const LISTED: &[&str] = &[$(concat!(stringify!($name), ".txt")),*];
    };
}

transcripts!(
    strings,
    keys,
    server,
    txn,
    protocol,
    types,
    hash,
    list,
    set,
    zset,
    hostile,
    string_ranges,
    bitmap,
    set_algebra,
    list_mpop,
    hyperloglog,
    keyspace,
    zsetops,
    sort,
    dump,
    pubsub,
    blocking,
    functions,
    persistence,
    notifications_strings,
    notifications_keys,
    notifications_agg,
    notifications_blocking,
    replication,
    hash_field_expiry,
    hash_field_expiry_8,
    hash_field_expiry_events,
    strings_8,
    valkey_9,
    geo,
    acl,
    stream,
);

/// Runs every transcript not listed above.
#[test]
fn unlisted_transcripts() {
    let files: Vec<PathBuf> = all_transcripts()
        .into_iter()
        .filter(|p| {
            !LISTED
                .iter()
                .any(|l| p.file_name().is_some_and(|n| n == *l))
        })
        .collect();
    run_files(&files);
}

fn transcript_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("diff")
}

fn all_transcripts() -> Vec<PathBuf> {
    let dir = transcript_dir();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    files.sort();
    files
}

/// What the replies are checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// A live redis-server; `regenerate` rewrites the recorded replies from it.
    Live { regenerate: bool },
    /// The recorded replies only.
    Offline,
}

fn mode() -> Mode {
    let set = |v: &str| std::env::var_os(v).is_some_and(|x| !x.is_empty() && x != "0");
    let regenerate = set("SLUICE_DIFF_REGENERATE");
    let have_redis = !set("SLUICE_DIFF_OFFLINE")
        && !matches!(
            std::process::Command::new("redis-server").arg("--version").output(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound
        );
    match (have_redis, regenerate) {
        (true, _) => Mode::Live { regenerate },
        (false, true) => panic!("SLUICE_DIFF_REGENERATE needs redis-server on PATH"),
        (false, false) => Mode::Offline,
    }
}

/// The Redis version a transcript requires (`# requires redis 7.4` among its first lines).
fn requires_newer(text: &str) -> Option<&str> {
    text.lines()
        .take(10)
        .find_map(|l| l.strip_prefix("# requires redis "))
        .map(str::trim)
}

/// Whether the redis-server at `bin` is at least version `need` (`7.4`, `8.0`…), from its
/// `--version` line (`Redis server v=7.4.1 …`).
fn version_at_least(bin: &Path, need: &str) -> bool {
    let parse = |v: &str| -> Vec<u32> { v.split('.').filter_map(|p| p.parse().ok()).collect() };
    let Ok(out) = std::process::Command::new(bin).arg("--version").output() else {
        return false;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let have = text
        .split_whitespace()
        .find_map(|w| w.strip_prefix("v="))
        .map(parse)
        .unwrap_or_default();
    have >= parse(need)
}

/// The newer redis-server named by `SLUICE_DIFF_NEWER_REDIS`, if any.
fn newer_redis() -> Option<PathBuf> {
    std::env::var_os("SLUICE_DIFF_NEWER_REDIS")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// Runs each file in RESP2 and RESP3; panics listing every mismatch of every file.
fn run_files(files: &[PathBuf]) {
    let mode = mode();
    let mut failures = Vec::new();
    for path in files {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let text = std::fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        let steps = match parse_transcript(&name, &text) {
            Ok(s) => s,
            Err(e) => {
                failures.push(e);
                continue;
            }
        };
        let (mode, binary) = match requires_newer(&text) {
            None => (mode, None),
            Some(need) => match newer_redis().filter(|bin| version_at_least(bin, need)) {
                Some(bin) => (mode, Some(bin)),
                None => (Mode::Offline, None),
            },
        };
        let two = run_steps_with(&name, &steps, 2, mode, binary.as_deref());
        let three = run_steps_with(&name, &steps, 3, mode, binary.as_deref());
        for run in [&two, &three] {
            if run.unchecked > 0 {
                eprintln!(
                    "{name} (RESP{}): {} line(s) have no recorded reply; without redis-server they are not checked",
                    run.proto, run.unchecked
                );
            }
        }
        failures.extend(two.mismatches);
        failures.extend(three.mismatches);
        if mode == (Mode::Live { regenerate: true }) {
            let fresh: Vec<[Option<Recorded>; 2]> = steps
                .iter()
                .zip(two.fresh.into_iter().zip(three.fresh))
                .map(|(step, (a, b))| settle(step, [a, b]))
                .collect();
            let new_text = transcript::rewrite(&text, &steps, &fresh);
            if new_text != text {
                std::fs::write(path, new_text)
                    .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
                eprintln!("{name}: recorded replies regenerated");
            }
        }
    }
    if !failures.is_empty() {
        let against = match mode {
            Mode::Offline => "the recorded replies (no redis-server)",
            Mode::Live { .. } => "redis-server",
        };
        panic!(
            "{} mismatch(es) between {against} and sluice:\n\n{}\n",
            failures.len(),
            failures.join("\n\n")
        );
    }
}

/// What regenerating writes for a step, given Redis's fresh outcomes: a recorded outcome
/// that still holds (after `[sort]`/`[any]`) is kept, so a reply that varies from run to run
/// does not churn the file; outcomes the same in both protocols are written once.
fn settle(step: &Step, fresh: [Option<Recorded>; 2]) -> [Option<Recorded>; 2] {
    let same = |a: &Recorded, b: &Recorded| {
        Outcome::recorded(a).normalized(step, true) == Outcome::recorded(b).normalized(step, true)
    };
    let [two, three] = [2, 3].map(|proto| {
        let new = fresh[usize::from(proto == 3)].clone()?;
        Some(match step.recorded(proto) {
            Some(old) if same(old, &new) => old.clone(),
            _ => new,
        })
    });
    match (two, three) {
        (Some(a), Some(b)) if same(&a, &b) => [Some(a.clone()), Some(a)],
        other => [other.0, other.1],
    }
}

#[test]
fn harness_reports_every_mismatch_with_its_line() {
    // CLIENT SETINFO exists in sluice but not in Redis 7.0; an empty line gets no reply from
    // either side. Both are reported, and the lines after them still run.
    let transcript = "PING\nCLIENT SETINFO lib-name x\n[raw] \\r\\n\nSET k v\n[any] CLIENT SETINFO lib-ver 1\nGET k\n";
    if mode() == Mode::Offline {
        eprintln!("no redis-server: the live harness self-test does not run");
        return;
    }
    let steps = parse_transcript("selftest.txt", transcript).expect("parses");
    let run = run_steps("selftest.txt", &steps, 2, Mode::Live { regenerate: false });
    let mismatches = run.mismatches;
    assert_eq!(mismatches.len(), 3, "{mismatches:#?}");
    assert!(mismatches[0].starts_with(
        "selftest.txt:2 (RESP2): CLIENT SETINFO lib-name x\n  redis:    -ERR unknown subcommand"
    ));
    assert!(mismatches[0].contains("\n  sluice:    +OK"));
    assert!(mismatches[1].starts_with("selftest.txt:3 (RESP2): [raw] \\r\\n\n"));
    assert!(mismatches[1].contains("no reply within"));
    assert!(mismatches[2].starts_with("selftest.txt:5 (RESP2): "));
}

#[test]
fn recorded_replies_are_checked() {
    // A stale recording fails a live run; offline, sluice is held to the recording, and a line
    // without one is counted as unchecked.
    let transcript = "SET k v\n< +OK\nGET k\n< \"other\"\nPING\n";
    let steps = parse_transcript("selftest.txt", transcript).expect("parses");
    let offline = run_steps("selftest.txt", &steps, 3, Mode::Offline);
    assert_eq!(offline.mismatches.len(), 1, "{:#?}", offline.mismatches);
    assert!(
        offline.mismatches[0].contains("recorded: \"other\"\n  sluice:    \"v\""),
        "{:#?}",
        offline.mismatches
    );
    assert_eq!(offline.unchecked, 1);
    if mode() == Mode::Offline {
        eprintln!("no redis-server: the live half of this self-test does not run");
        return;
    }
    let live = run_steps("selftest.txt", &steps, 3, Mode::Live { regenerate: false });
    assert_eq!(live.mismatches.len(), 1, "{:#?}", live.mismatches);
    assert!(live.mismatches[0].contains("stale"));
    assert_eq!(
        live.fresh[1],
        Some(Recorded {
            replies: vec![b"$1\r\nv\r\n".to_vec()],
            closed: false
        })
    );
}
