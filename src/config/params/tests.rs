//! The table's own checks: names, types, setters and `--help`.

use super::*;

#[test]
fn each_name_and_alias_once() {
    let mut names: Vec<&str> = PARAMS
        .iter()
        .flat_map(|p| std::iter::once(p.name).chain(p.alias))
        .collect();
    names.sort_unstable();
    let before = names.len();
    names.dedup();
    assert_eq!(before, names.len());
}

#[test]
fn acting_rows_store_and_show_their_value() {
    for p in PARAMS {
        if p.effect == Effect::Acts && !matches!(p.name, "rename-command" | "user" | "loadmodule") {
            assert!(p.set.is_some(), "{} acts but has no setter", p.name);
        }
        if p.effect == Effect::Acts && p.is_listed() {
            assert!(
                p.get.is_some()
                    || p.name == "tls-auth-clients"
                    || p.name == "enable-module-command",
                "{} is listed but has no getter",
                p.name
            );
        }
    }
    let mut c = Config::default();
    for (name, value, shown) in [
        ("maxclients", "7", "7"),
        ("slave-priority", "5", "5"),
        ("unixsocketperm", "770", "504"),
        ("maxmemory", "1kb", "1024"),
        ("replicaof", "h 7000", "h 7000"),
        ("replicaof", "no one", ""),
        ("notify-keyspace-events", "KEA", "AKE"),
    ] {
        let p = find(name).unwrap();
        assert_eq!(p.store(&mut c, value, Source::File), Ok(true), "{name}");
        assert_eq!(p.value(&c).as_deref(), Some(shown), "{name}");
    }
    assert_eq!(
        find("hz").unwrap().store(&mut c, "10", Source::File),
        Ok(false)
    );
    let save = find("save").unwrap();
    save.store(&mut c, "900 1", Source::File).unwrap();
    save.store(&mut c, "60 100", Source::File).unwrap();
    assert_eq!(c.save, vec![(900, 1), (60, 100)]);
    save.store(&mut c, "10 1", Source::ConfigSet).unwrap();
    assert_eq!(c.save, vec![(10, 1)]);
}

#[test]
fn help_lists_what_sluice_acts_on_and_refuses_only_what_it_refuses() {
    let help = help_text();
    assert!(help.contains("  --port N"), "{help}");
    assert!(help.contains("--replicaof HOST PORT"), "{help}");
    let refused = help.split("refused when they").nth(1).unwrap_or_default();
    assert!(!refused.contains("replicaof"), "{refused}");
    assert!(refused.contains("rename-command"), "{refused}");
}

#[test]
fn types_refuse_with_redis_texts() {
    let get = |n: &str| find(n).unwrap();
    assert_eq!(
        get("maxmemory-clients").check("0\ndir /tmp"),
        Err("argument must be a memory or percent value".into())
    );
    assert_eq!(
        get("hll-sparse-max-bytes").check("abc"),
        Err("argument must be a memory value".into())
    );
    assert_eq!(get("maxmemory-clients").check("50%"), Ok("50%".into()));
    assert_eq!(
        get("maxmemory-clients").check("101%"),
        Err("percentage argument must be less or equal to 100".into())
    );
    assert_eq!(
        get("port").check("70000"),
        Err("argument must be between 0 and 65535 inclusive".into())
    );
    assert_eq!(get("hz").check("1000"), Ok("500".into()));
    assert_eq!(get("appendonly").check("YES"), Ok("yes".into()));
    assert_eq!(
        get("appendfsync").check("sometimes"),
        Err("argument(s) must be one of the following: everysec, always, no".into())
    );
    assert!(get("replica-announce-ip").check("a\nb").is_err());
    assert_eq!(get("requirepass").check("a\nb"), Ok("a\nb".into()));
    assert_eq!(get("unixsocketperm").check("770"), Ok("504".into()));
    assert_eq!(get("slaveof").name, "replicaof");
    assert_eq!(get("replicaof").check("NO ONE"), Ok("".into()));
    assert!(get("replicaof").check("h\nx 1").is_err());
    assert_eq!(
        get("shutdown-on-sigint").check("save now"),
        Ok("save now".into())
    );
}

#[test]
fn what_sluice_reads_only_at_start_is_immutable() {
    for name in [
        "tls-port",
        "tls-cert-file",
        "tls-key-file",
        "tls-auth-clients",
        "databases",
        "unixsocket",
        "supervised",
        "daemonize",
        "logfile",
        "pidfile",
        "cluster-enabled",
        "replicaof",
        "enable-debug-command",
        "enable-protected-configs",
    ] {
        assert!(find(name).unwrap().is_immutable(), "{name}");
    }
    // CONFIG SET listens anew (`server::relisten`).
    assert!(!find("port").unwrap().is_immutable());
    assert!(!find("bind").unwrap().is_immutable());
    assert!(find("dir").unwrap().is_protected());
    assert!(find("dbfilename").unwrap().is_protected());
}

/// A parameter sluice acts on keeps its value in a `Config` field, whose default is the one
/// that counts; the row's default is Redis 7.0.15's (what CONFIG GET shows for the others,
/// and what CONFIG REWRITE compares with). They must agree, so a setting's default is one
/// fact however it is read, except where sluice departs from Redis on purpose, listed here.
#[test]
fn rows_and_config_agree_on_defaults() {
    const ON_PURPOSE: &[(&str, &str)] = &[
        (
            "dir",
            "the directory the server starts in, as redis-server's CONFIG GET shows it",
        ),
        (
            "save",
            "a test double takes no automatic snapshots unless asked",
        ),
    ];
    let defaults = Config::default();
    let mut differ = Vec::new();
    for p in PARAMS {
        let skip = p.effect != Effect::Acts || p.get.is_none() || p.set.is_none();
        if skip || ON_PURPOSE.iter().any(|(name, _)| *name == p.name) {
            continue;
        }
        let from_config = p.value(&defaults);
        if from_config.as_deref() == Some(p.default) {
            continue;
        }
        let mut c = Config::default();
        let stored = p.store(&mut c, p.default, Source::File);
        let from_row = p.value(&c);
        if stored.is_err() || from_row != from_config {
            differ.push(format!(
                "{}: row {:?} ({stored:?}) shows {from_row:?}, Config::default() {from_config:?}",
                p.name, p.default
            ));
        }
    }
    assert!(
        differ.is_empty(),
        "defaults that differ:\n  {}",
        differ.join("\n  ")
    );
}
