//! redis.conf and redis-server's command line → `Config`.
//!
//! Owns the start-up reading of configuration: the command line (`sluice [file] [--name
//! value …]`, as redis-server's), conf files (with `include`), and what sluice does with every
//! directive of Redis 7.0's redis.conf. Uses `config` only; the binary acts on the result.
//!
//! Each directive is first checked against its row of [`params`] (its type, with Redis's
//! error texts), then, by the row's effect, one of:
//! - acted on (`Config::apply`), or matching what sluice always does (`syslog-enabled no`);
//! - accepted without effect, with one warning naming it and where it was (`hz 10` tunes
//!   something sluice does not have), so an operator's existing file works;
//! - refused, when it asks for behaviour sluice cannot provide (`daemonize yes`,
//!   `rename-command`): starting anyway would silently break what the operator relies on.
//!
//! Like redis-server, command-line options are read after the file, so they override it; a
//! refusal is judged on the final value, so `--daemonize no` rescues a file saying `yes`.
//! Every problem is reported in one run, each with its file and line.

use std::collections::HashMap;
use std::fmt;

use super::params::{self, Effect};
use crate::config::{Config, split_conf_line};

/// How deep `include` may nest (a file including itself stops here).
const MAX_INCLUDE_DEPTH: usize = 16;

/// Where a directive came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A conf file and its 1-based line number.
    File(String, usize),
    /// The command line.
    CommandLine,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::File(path, line) => write!(f, "{path}:{line}"),
            Origin::CommandLine => f.write_str("command line"),
        }
    }
}

/// A configuration ready to start with, and the warnings to log once logging is set up.
#[derive(Debug)]
pub struct Loaded {
    /// The configuration.
    pub config: Config,
    /// One line per directive accepted without effect.
    pub warnings: Vec<String>,
}

/// What the command line asks for.
#[derive(Debug)]
pub enum Invocation {
    /// Serve with this configuration.
    Run(Box<Loaded>),
    /// Print the version and exit.
    Version,
    /// Print the usage and exit.
    Help,
}

/// Every problem found, each a line naming the directive and where it was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problems(pub Vec<String>);

impl fmt::Display for Problems {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0.len();
        writeln!(
            f,
            "sluice: cannot start: {n} configuration problem{}:",
            if n == 1 { "" } else { "s" }
        )?;
        for p in &self.0 {
            writeln!(f, "  {p}")?;
        }
        Ok(())
    }
}

/// The command line's words, split as redis-server does: an optional config file first (or
/// `-` for standard input), then `--name [args…]` groups.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct CommandLine {
    /// The config file, if one was named.
    pub file: Option<String>,
    /// The directives given as options, in order.
    pub options: Vec<(String, Vec<String>)>,
}

/// Parses the arguments (without the program name).
pub fn parse_args(args: &[String]) -> Result<Result<CommandLine, Invocation>, Problems> {
    let mut cl = CommandLine::default();
    let mut rest = args;
    let mut problems = Vec::new();
    if let Some(first) = rest.first() {
        match first.as_str() {
            "-v" | "--version" => return Ok(Err(Invocation::Version)),
            "-h" | "--help" => return Ok(Err(Invocation::Help)),
            f if f == "-" || !f.starts_with('-') => {
                cl.file = Some(f.to_string());
                rest = &rest[1..];
            }
            // `-p 7385`: blame the option, not its value (which would otherwise be taken
            // for a word without an option), and skip its values.
            f if !f.starts_with("--") => {
                problems.push(format!(
                    "command line: '{f}' is not an option: options are redis.conf directives after two dashes (--port 6380), and only -v and -h have one"
                ));
                let values = rest[1..]
                    .iter()
                    .take_while(|w| !w.starts_with("--"))
                    .count();
                rest = &rest[1 + values..];
            }
            _ => {}
        }
    }
    for word in rest {
        if let Some(name) = word.strip_prefix("--") {
            match name {
                "version" => return Ok(Err(Invocation::Version)),
                "help" => return Ok(Err(Invocation::Help)),
                "" => problems.push("command line: '--' names no option".to_string()),
                _ => cl.options.push((name.to_ascii_lowercase(), Vec::new())),
            }
        } else if let Some((_, args)) = cl.options.last_mut() {
            args.push(word.clone());
        } else {
            problems.push(format!(
                "command line: '{word}' is not an option (options start with --, and only the first argument may be a config file)"
            ));
        }
    }
    for (name, args) in &mut cl.options {
        // Flags given without a value, as redis-server allows for `--save`.
        if args.is_empty() {
            match name.as_str() {
                "save" => args.push(String::new()),
                "test-mode" => args.push("yes".into()),
                _ => {}
            }
        }
    }
    if problems.is_empty() {
        Ok(Ok(cl))
    } else {
        Err(Problems(problems))
    }
}

/// Whether a config file line may start with `name` (lowercase): a directive of Redis 7.0
/// or sluice, or one of Redis's file-only ones (`include`, `sentinel`…). CONFIG REWRITE keeps
/// other lines only as comments, as Redis does.
pub fn is_directive(name: &str) -> bool {
    matches!(name, "include" | "sentinel") || params::find(name).is_some()
}

/// The real name of one of Redis 7.0's alias directives (`slaveof` → `replicaof`), None for
/// any other name.
pub fn canonical(name: &str) -> Option<&'static str> {
    params::find(name)
        .filter(|p| p.alias == Some(name))
        .map(|p| p.name)
}

/// Reads the command line (and the files it names) into a configuration, or every problem.
pub fn from_args(args: &[String]) -> Result<Invocation, Problems> {
    let cl = match parse_args(args)? {
        Ok(cl) => cl,
        Err(other) => return Ok(other),
    };
    let mut loader = Loader::default();
    if let Some(file) = &cl.file {
        if file == "-" {
            let mut text = String::new();
            match std::io::Read::read_to_string(&mut std::io::stdin(), &mut text) {
                Ok(_) => loader.text("(standard input)", &text, 0),
                Err(e) => loader.problems.push(format!(
                    "cannot read the configuration from standard input: {e}"
                )),
            }
        } else {
            loader.file(file, None, 0);
            // Absolute, as Redis keeps it: `dir` changes the working directory later.
            loader.config.config_file = std::path::absolute(file)
                .ok()
                .map(|p| p.display().to_string());
        }
    }
    for (name, args) in &cl.options {
        loader.depth = 0;
        loader.directive(name, args, Origin::CommandLine);
    }
    loader.finish().map(|l| Invocation::Run(Box::new(l)))
}

/// Reads conf text, as if it were a file named `name`, and nothing else.
pub fn from_text(name: &str, text: &str) -> Result<Loaded, Problems> {
    let mut loader = Loader::default();
    loader.text(name, text, 0);
    loader.finish()
}

/// Accumulates directives, warnings and problems.
#[derive(Debug, Default)]
struct Loader {
    config: Config,
    warnings: Vec<String>,
    problems: Vec<String>,
    /// Refusals that depend on a directive's final value (`daemonize yes` may be overridden
    /// later), by directive name.
    pending: HashMap<String, String>,
    /// How many `include`s deep the directive being read is.
    depth: usize,
}

impl Loader {
    fn file(&mut self, path: &str, from: Option<&Origin>, depth: usize) {
        match std::fs::read_to_string(path) {
            Ok(text) => self.text(path, &text, depth),
            Err(e) => {
                let at = from.map(|o| format!("{o}: ")).unwrap_or_default();
                self.problems
                    .push(format!("{at}cannot read config file '{path}': {e}"));
            }
        }
    }

    fn text(&mut self, path: &str, text: &str, depth: usize) {
        for (n, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let origin = Origin::File(path.to_string(), n + 1);
            let Some(words) = split_conf_line(line) else {
                self.problems
                    .push(format!("{origin}: unbalanced quotes in '{line}'"));
                continue;
            };
            let Some((name, args)) = words.split_first() else {
                continue;
            };
            let name = name.to_ascii_lowercase();
            self.depth = depth;
            self.directive(&name, args, origin);
        }
    }

    fn directive(&mut self, name: &str, args: &[String], origin: Origin) {
        let shown = show(name, args);
        if name == "include" {
            let depth = self.depth;
            match args {
                [file] if depth < MAX_INCLUDE_DEPTH => self.file(file, Some(&origin), depth + 1),
                [_] => self.problems.push(format!(
                    "{origin}: 'include' nests more than {MAX_INCLUDE_DEPTH} files deep (a file including itself?)"
                )),
                _ => self
                    .problems
                    .push(format!("{origin}: 'include' takes one file name")),
            }
            self.depth = depth;
            return;
        }
        let Some(param) = params::find(name) else {
            self.problems.push(format!(
                "{origin}: '{shown}': unknown directive (not one of Redis 7.0's or sluice's)"
            ));
            return;
        };
        if args.len() != 1 && !param.takes_several_words() {
            self.problems
                .push(format!("{origin}: '{shown}': wrong number of arguments"));
            return;
        }
        // The value is checked as CONFIG SET checks it, whatever is done with it next.
        if let Err(e) = param.check(&args.join(" ")) {
            self.problems
                .push(format!("{origin}: '{shown}': bad value for '{name}': {e}"));
            return;
        }
        let value = args.join(" ").to_ascii_lowercase();
        match param.effect {
            Effect::Acts => {
                if let Err(e) = self.config.apply(name, args) {
                    self.problems.push(format!("{origin}: '{shown}': {e}"));
                    return;
                }
                // Asked for behaviour sluice lacks, unless a later line changes it back.
                if name == "daemonize" && self.config.daemonize {
                    self.pending.insert(
                        name.into(),
                        format!(
                            "{origin}: '{shown}': sluice does not fork into the background; run it in the foreground under a supervisor (systemd: --supervised systemd, see deploy/sluice.service) or set daemonize no"
                        ),
                    );
                } else {
                    self.pending.remove(name);
                }
            }
            Effect::Inert(why) => self.warn(&origin, &shown, why),
            Effect::Quiet(ok, why) => {
                if !ok.contains(&value.as_str()) {
                    self.warn(&origin, &shown, why);
                }
            }
            Effect::Only(ok, why) => {
                if ok.contains(&value.as_str()) {
                    self.pending.remove(name);
                } else {
                    self.pending
                        .insert(name.into(), format!("{origin}: '{shown}': {why}"));
                }
            }
            Effect::Refused(why) => self.problems.push(format!("{origin}: '{shown}': {why}")),
        }
    }

    fn warn(&mut self, origin: &Origin, shown: &str, why: &str) {
        self.warnings.push(format!(
            "{origin}: '{shown}' accepted without effect: {why}"
        ));
    }

    fn finish(mut self) -> Result<Loaded, Problems> {
        let mut pending: Vec<String> = self.pending.into_values().collect();
        pending.sort();
        self.problems.extend(pending);
        if let Err(e) = self.config.validate() {
            self.problems.push(e.to_string());
        }
        if self.problems.is_empty() {
            Ok(Loaded {
                config: self.config,
                warnings: self.warnings,
            })
        } else {
            Err(Problems(self.problems))
        }
    }
}

/// A directive as the operator wrote it (passwords hidden), for messages.
fn show(name: &str, args: &[String]) -> String {
    if params::find(name).is_some_and(|p| p.is_secret()) || name.ends_with("-pass") {
        return format!("{name} (value hidden)");
    }
    let mut s = name.to_string();
    for a in args {
        s.push(' ');
        if a.is_empty() || a.contains(char::is_whitespace) {
            s.push('"');
            s.push_str(a);
            s.push('"');
        } else {
            s.push_str(a);
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &[&str]) -> Vec<String> {
        s.iter().map(|a| a.to_string()).collect()
    }

    #[test]
    fn command_line_splits_like_redis_server() {
        let Ok(Ok(cl)) = parse_args(&args(&[
            "redis.conf",
            "--port",
            "7000",
            "--save",
            "--bind",
            "127.0.0.1",
            "::1",
            "--test-mode",
        ])) else {
            panic!("parse failed");
        };
        assert_eq!(cl.file.as_deref(), Some("redis.conf"));
        assert_eq!(
            cl.options,
            vec![
                ("port".into(), args(&["7000"])),
                ("save".into(), args(&[""])),
                ("bind".into(), args(&["127.0.0.1", "::1"])),
                ("test-mode".into(), args(&["yes"])),
            ]
        );
        assert!(matches!(
            parse_args(&args(&["-v"])),
            Ok(Err(Invocation::Version))
        ));
        assert!(matches!(
            parse_args(&args(&["--port", "1", "--version"])),
            Ok(Err(Invocation::Version))
        ));
        assert!(parse_args(&args(&["--port", "1", "stray", "file"])).is_ok());
        assert!(parse_args(&args(&["a.conf", "b.conf"])).is_err());
        // A one-dash option is blamed itself, once, not its value.
        let Err(Problems(p)) = parse_args(&args(&["-p", "7385", "--port", "1"])) else {
            panic!("-p must be refused");
        };
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(
            p[0].starts_with("command line: '-p' is not an option"),
            "{p:?}"
        );
        assert!(!p[0].contains("7385"), "{p:?}");
    }

    #[test]
    fn every_problem_at_once_with_line_numbers() {
        let text = "port 7000\nhz 10\nfrobnicate yes\ndaemonize yes\nrename-command FLUSHALL \"\"\nport notanumber\nsyslog-enabled yes\n";
        let Err(Problems(p)) = from_text("r.conf", text) else {
            panic!("should fail");
        };
        assert_eq!(p.len(), 5, "{p:?}");
        assert!(p[0].starts_with("r.conf:3: 'frobnicate yes': unknown directive"));
        assert!(p[1].starts_with("r.conf:5: 'rename-command FLUSHALL \"\"'"));
        assert!(p[2].starts_with("r.conf:6: 'port notanumber'"));
        assert!(
            p.iter()
                .any(|l| l.starts_with("r.conf:4: 'daemonize yes': sluice does not fork"))
        );
        assert!(
            p.iter()
                .any(|l| l.starts_with("r.conf:7: 'syslog-enabled yes'"))
        );
    }

    #[test]
    fn warnings_name_directive_and_line() {
        let loaded = from_text(
            "r.conf",
            "# c\n\nhz 10\nsave \"\"\nsave 900 1\naof-timestamp-enabled no\nappendonly no\nsave \"60 100\"\n",
        )
        .unwrap();
        assert_eq!(
            loaded.warnings,
            vec![
                "r.conf:3: 'hz 10' accepted without effect: sluice's expiry reaper has its own schedule".to_string(),
                "r.conf:6: 'aof-timestamp-enabled no' accepted without effect: sluice's append-only file does not have this knob".to_string(),
            ]
        );
        assert_eq!(loaded.config.save, vec![(900, 1), (60, 100)]);
    }

    #[test]
    fn notify_keyspace_events_is_read_with_redis_letters() {
        let loaded = from_text("r.conf", "notify-keyspace-events \"Ex\"\n").unwrap();
        assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
        assert_eq!(
            loaded.config.param("notify-keyspace-events").as_deref(),
            Some("xE")
        );
        let Err(Problems(p)) = from_text("r.conf", "\nnotify-keyspace-events KEq\n") else {
            panic!("should fail");
        };
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(
            p[0].starts_with("r.conf:2: 'notify-keyspace-events KEq'")
                && p[0].contains("Invalid event class character"),
            "{p:?}"
        );
    }

    #[test]
    fn a_later_value_overrides_a_refused_one() {
        let loaded = from_text(
            "r.conf",
            "daemonize yes\ndaemonize no\nsyslog-enabled yes\nsyslog-enabled no\n",
        );
        assert!(loaded.is_ok(), "{loaded:?}");
    }

    #[test]
    fn include_nests_with_a_limit() {
        let dir = std::env::temp_dir().join(format!("sluice-conf-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let a = dir.join("a.conf");
        let b = dir.join("b.conf");
        std::fs::write(&a, format!("include {}\nport 7001\n", b.display())).unwrap();
        std::fs::write(&b, "port 7002\nmaxclients 7\n").unwrap();
        let loaded = from_text("main", &format!("include {}", a.display())).unwrap();
        assert_eq!((loaded.config.port, loaded.config.maxclients), (7001, 7));
        std::fs::write(&b, format!("include {}\n", b.display())).unwrap();
        let Err(Problems(p)) = from_text("main", &format!("include {}", a.display())) else {
            panic!("a self-including file must fail");
        };
        assert_eq!(p.len(), 1);
        assert!(p[0].contains("nests more than 16"), "{p:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn passwords_stay_out_of_messages() {
        let Err(Problems(p)) = from_text("r.conf", "requirepass a b\n") else {
            panic!()
        };
        assert!(!p[0].contains(" a b"), "{p:?}");
    }

    #[test]
    fn every_acted_on_directive_is_handled_by_config_apply() {
        for p in params::PARAMS {
            if p.effect == Effect::Acts {
                let r = Config::default().apply(p.name, &[]);
                assert!(
                    !matches!(r, Err(crate::config::ConfigError::Unsupported(_))),
                    "{} acts but Config::apply does not know it",
                    p.name
                );
            }
        }
    }

    #[test]
    fn values_are_typed_in_files_as_in_config_set() {
        let Err(Problems(p)) = from_text(
            "r.conf",
            "maxmemory-clients \"0\\ndir /tmp\"\nhll-sparse-max-bytes x\nport 70000\nhz\n",
        ) else {
            panic!("should fail");
        };
        assert_eq!(p.len(), 4, "{p:?}");
        assert!(
            p[0].ends_with("argument must be a memory or percent value"),
            "{p:?}"
        );
        assert!(p[1].ends_with("argument must be a memory value"), "{p:?}");
        assert!(
            p[2].ends_with("argument must be between 0 and 65535 inclusive"),
            "{p:?}"
        );
        assert!(p[3].ends_with("wrong number of arguments"), "{p:?}");
    }
}
