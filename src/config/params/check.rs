//! The checks of the `Special` types: values with a syntax of their own.

use crate::config::{EvictionPolicy, IoBackend, keyspace_events, parse_save};

/// Text: no control characters (they would end a config file's line or a reply's).
pub(crate) fn text(value: &str) -> Result<(), String> {
    if value.bytes().any(|b| b < 0x20 || b == 0x7f) {
        return Err("argument must not contain control characters".into());
    }
    Ok(())
}

/// File-only directives: checked by whoever reads them.
pub(crate) fn anything(value: &str) -> Result<String, String> {
    Ok(value.to_string())
}

/// Words of text (`bind`).
pub(crate) fn words(value: &str) -> Result<String, String> {
    text(value)?;
    Ok(value.to_string())
}

/// `save`: pairs of seconds and changes, or `""`.
pub(crate) fn save(value: &str) -> Result<String, String> {
    parse_save(value).map(|points| super::super::format_save(&points))
}

/// `client-output-buffer-limit`: `<class> <hard> <soft> <seconds>` repeated.
pub(crate) fn output_buffer_limit(value: &str) -> Result<String, String> {
    let mut c = super::super::Config::default();
    c.set_output_buffer_limit(value)?;
    Ok(value.to_string())
}

/// `notify-keyspace-events`: Redis's class letters (kept as given: the normalised
/// form CONFIG GET shows loses `n` beside `A`).
pub(crate) fn keyspace_events(value: &str) -> Result<String, String> {
    keyspace_events::parse(value)
        .map(|_| value.to_string())
        .ok_or_else(|| keyspace_events::INVALID.to_string())
}

/// `replicaof`: `host port` or `no one`.
pub(crate) fn replicaof(value: &str) -> Result<String, String> {
    text(value)?;
    let words: Vec<&str> = value.split(' ').collect();
    match words.as_slice() {
        [h, p] if h.eq_ignore_ascii_case("no") && p.eq_ignore_ascii_case("one") => {
            Ok(String::new())
        }
        [h, p] if !h.is_empty() => {
            let port = crate::num::parse_i64(p.as_bytes())
                .filter(|n| (0..=65535).contains(n))
                .ok_or("Invalid master port")?;
            Ok(format!("{h} {port}"))
        }
        _ => Err("wrong number of arguments".into()),
    }
}

/// `oom-score-adj-values`: three integers from -2000 to 2000.
pub(crate) fn oom_score_adj_values(value: &str) -> Result<String, String> {
    let words: Vec<&str> = value.split(' ').collect();
    let ok = words.len() == 3
        && words.iter().all(|w| {
            crate::num::parse_i64(w.as_bytes()).is_some_and(|n| (-2000..=2000).contains(&n))
        });
    if !ok {
        return Err("Invalid oom-score-adj-values".into());
    }
    Ok(value.to_string())
}

/// `latency-tracking-info-percentiles`: numbers from 0 to 100, or `""`.
pub(crate) fn percentiles(value: &str) -> Result<String, String> {
    if value.is_empty() {
        return Ok(String::new());
    }
    for w in value.split(' ') {
        let ok = crate::num::parse_f64(w.as_bytes()).is_some_and(|n| (0.0..=100.0).contains(&n));
        if !ok {
            return Err(
                "latency-tracking-info-percentiles: percentile must be between 0.0 and 100.0"
                    .into(),
            );
        }
    }
    Ok(value.to_string())
}

/// `loglevel`: Redis 7.0's levels, and `nothing` (Redis 7.2's); the error lists 7.0's.
pub(crate) fn loglevel(value: &str) -> Result<String, String> {
    let v = value.to_ascii_lowercase();
    if matches!(
        v.as_str(),
        "debug" | "verbose" | "notice" | "warning" | "nothing"
    ) {
        Ok(v)
    } else {
        Err("argument(s) must be one of the following: debug, verbose, notice, warning".into())
    }
}

/// `maxmemory-policy`: the policies sluice has (the LFU ones are refused by name).
pub(crate) fn maxmemory_policy(value: &str) -> Result<String, String> {
    EvictionPolicy::parse(value).map(|p| p.name().to_string())
}

/// `io-backend`: epoll, uring or auto.
pub(crate) fn io_backend(value: &str) -> Result<String, String> {
    IoBackend::parse(value).map(|b| b.name().to_string())
}
