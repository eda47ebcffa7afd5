//! The Dockerfile builds, without a Docker engine: its build stage's context is rebuilt from
//! exactly the files it COPYs (checked against `.dockerignore`) in a scratch directory, and
//! its RUN steps are run there (offline, debug profile, reusing a target directory kept in
//! `target/` so later runs only compile sluice). A source file the Dockerfile forgets to
//! copy fails here. The HEALTHCHECK command is run against a live server.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::proc::SluiceProcess;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The Dockerfile's instructions, continuation lines joined, comments dropped.
fn instructions(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if current.is_empty() && (trimmed.is_empty() || trimmed.starts_with('#')) {
            continue;
        }
        if let Some(part) = trimmed.strip_suffix('\\') {
            current.push_str(part);
            current.push(' ');
            continue;
        }
        current.push_str(trimmed);
        let (op, rest) = current.split_once(' ').unwrap_or((&current, ""));
        out.push((op.to_ascii_uppercase(), rest.trim().to_string()));
        current.clear();
    }
    out
}

/// Does a `.dockerignore` pattern exclude `path` (relative, `/`-separated)? Only the pattern
/// forms our `.dockerignore` uses are understood; another form fails the test.
fn ignored(pattern: &str, path: &str) -> bool {
    if let Some(name) = pattern.strip_prefix("**/") {
        return path.split('/').any(|c| c == name);
    }
    if let Some(ext) = pattern.strip_prefix("*.") {
        return !path.contains('/') && path.ends_with(&format!(".{ext}"));
    }
    assert!(
        !pattern.contains(['*', '?', '[', '!']),
        "tests/it/dockerfile.rs does not understand the .dockerignore pattern {pattern:?}"
    );
    path == pattern || path.starts_with(&format!("{pattern}/"))
}

/// Every file under `src` (a file or a directory), relative to the repository root.
fn files_under(src: &Path, rel: &str, out: &mut Vec<String>) {
    if src.is_dir() {
        let mut entries: Vec<_> = std::fs::read_dir(src)
            .unwrap()
            .map(|e| e.unwrap())
            .collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let name = e.file_name().to_string_lossy().into_owned();
            files_under(&e.path(), &format!("{rel}/{name}"), out);
        }
    } else {
        out.push(rel.to_string());
    }
}

/// Applies one COPY (Docker's rules for the forms used: files into a directory ending in
/// `/`, or one directory's contents into a directory).
fn copy(args: &str, context: &Path, patterns: &[String]) -> Vec<String> {
    let words: Vec<&str> = args.split_whitespace().collect();
    let (dest, sources) = words.split_last().expect("COPY needs a destination");
    let dest = dest.trim_start_matches("./");
    let mut copied = Vec::new();
    for src in sources {
        let from = Path::new(ROOT).join(src);
        assert!(
            from.exists(),
            "the Dockerfile COPYs {src}, which does not exist"
        );
        let mut files = Vec::new();
        files_under(&from, src, &mut files);
        for file in files {
            if let Some(p) = patterns.iter().find(|p| ignored(p, &file)) {
                panic!("the Dockerfile COPYs {file}, but .dockerignore excludes it ({p})");
            }
            let inner = file
                .strip_prefix(*src)
                .unwrap_or("")
                .trim_start_matches('/');
            let target = if from.is_dir() {
                context.join(dest).join(inner)
            } else if dest.is_empty() || dest.ends_with('/') {
                context
                    .join(dest)
                    .join(Path::new(&file).file_name().unwrap())
            } else {
                context.join(dest)
            };
            std::fs::create_dir_all(target.parent().unwrap()).unwrap();
            std::fs::copy(Path::new(ROOT).join(&file), &target).unwrap();
            copied.push(file);
        }
    }
    copied
}

#[test]
fn dockerfile_build_stage_builds_from_exactly_what_it_copies() {
    let text = std::fs::read_to_string(Path::new(ROOT).join("Dockerfile")).unwrap();
    let patterns: Vec<String> = std::fs::read_to_string(Path::new(ROOT).join(".dockerignore"))
        .expect(".dockerignore")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(String::from)
        .collect();
    let all = instructions(&text);
    // The build stage: from the first FROM to the next.
    let stages: Vec<usize> = all
        .iter()
        .enumerate()
        .filter(|(_, (op, _))| op == "FROM")
        .map(|(i, _)| i)
        .collect();
    assert!(
        stages.len() >= 2,
        "expected a build stage and a runtime stage"
    );
    let build = &all[stages[0] + 1..stages[1]];
    let runtime = &all[stages[1] + 1..];

    // A fixed place under target/, so a second run reuses the compiled dependencies.
    let base = Path::new(ROOT).join("target").join("dockerfile-check");
    let context = base.join("context");
    let _ = std::fs::remove_dir_all(&context);
    std::fs::create_dir_all(&context).unwrap();
    let target = base.join("target");
    std::fs::create_dir_all(&target).unwrap();
    std::os::unix::fs::symlink(&target, context.join("target")).unwrap();

    let mut copied = Vec::new();
    let mut cargo_builds = 0;
    for (op, args) in build {
        match op.as_str() {
            "WORKDIR" | "ENV" | "ARG" => {}
            "COPY" => {
                assert!(
                    !args.starts_with("--from"),
                    "build stage COPY --from: {args}"
                );
                copied.extend(copy(args, &context, &patterns));
            }
            "RUN" => {
                // The same steps, in the debug profile and offline.
                let script = args
                    .replace("--release", "")
                    .replace("target/release/", "target/debug/");
                cargo_builds += script.matches("cargo build").count();
                let out = Command::new("sh")
                    .args(["-ec", &script])
                    .current_dir(&context)
                    .env("CARGO_NET_OFFLINE", "true")
                    .env_remove("CARGO_TARGET_DIR")
                    .env_remove("CARGO_BUILD_TARGET_DIR")
                    .output()
                    .unwrap();
                assert!(
                    out.status.success(),
                    "Dockerfile step failed in the rebuilt context ({} files copied: {copied:?}):\nRUN {script}\n{}",
                    copied.len(),
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            other => panic!("tests/it/dockerfile.rs does not handle {other} in the build stage"),
        }
    }
    assert!(
        cargo_builds >= 2,
        "expected a dependency build and the real build"
    );
    assert!(
        build
            .iter()
            .any(|(op, a)| op == "RUN" && a.contains("--locked")),
        "cargo build --locked"
    );
    let binary: PathBuf = context.join("target/debug/sluice");
    let out = Command::new(&binary).arg("--version").output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("sluice v="));

    // The runtime stage: non-root, a stripped binary, a health check that works.
    assert!(
        runtime
            .iter()
            .any(|(op, a)| op == "USER" && a != "root" && a != "0"),
        "the image runs as a non-root user"
    );
    assert!(text.contains("strip target/release/sluice"));
    let health = runtime
        .iter()
        .find(|(op, _)| op == "HEALTHCHECK")
        .map(|(_, a)| a.clone())
        .expect("a HEALTHCHECK");
    let cmd_json = health.split_once("CMD ").expect("HEALTHCHECK CMD [...]").1;
    let argv = parse_json_strings(cmd_json);
    let server = SluiceProcess::start(&[]);
    let port = server.addr().port().to_string();
    let argv: Vec<String> = argv.iter().map(|a| a.replace("6379", &port)).collect();
    let status = Command::new(&argv[0]).args(&argv[1..]).status().unwrap();
    assert!(
        status.success(),
        "the HEALTHCHECK command fails against a live sluice: {argv:?}"
    );
    drop(server);
    let status = Command::new(&argv[0]).args(&argv[1..]).status().unwrap();
    assert!(
        !status.success(),
        "the HEALTHCHECK command passes with no server"
    );
    let _ = std::fs::remove_dir_all(&context);
}

/// The strings of a JSON array of strings (as in `CMD ["a", "b"]`), with `\\` and `\"`.
fn parse_json_strings(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = text.trim().trim_start_matches('[').chars();
    while let Some(c) = chars.next() {
        if c != '"' {
            continue;
        }
        let mut s = String::new();
        while let Some(c) = chars.next() {
            match c {
                '"' => break,
                '\\' => match chars.next() {
                    Some('n') => s.push('\n'),
                    Some(o) => s.push(o),
                    None => break,
                },
                o => s.push(o),
            }
        }
        out.push(s);
    }
    out
}
