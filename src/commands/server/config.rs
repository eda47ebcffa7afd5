//! CONFIG GET/SET/RESETSTAT/REWRITE: the runtime parameters of `crate::config` as Redis
//! names and formats them.

use bytes::Bytes;

use crate::commands::server::Help;
use crate::config::params::{self, Effect, Param};
use crate::engine::args::glob_match;
use crate::engine::{ArgCursor, Command, CommandSpec as C, Ctx, KeySpec, run_sub};
use crate::error::{CmdError, CmdResult};
use crate::protocol::Reply;

pub(super) static CONFIG: &[C] = &[
    C::new(
        "config|get",
        -3,
        &["admin", "noscript", "loading", "stale"],
        KeySpec::None,
        run_sub::<ConfigGet>,
    )
    .with_acl(&["@admin", "@slow", "@dangerous"]),
    C::new(
        "config|set",
        -4,
        &["admin", "noscript", "loading", "stale"],
        KeySpec::None,
        run_sub::<ConfigSet>,
    )
    .with_redaction(crate::services::monitor::Redaction::ConfigSecrets)
    .with_acl(&["@admin", "@slow", "@dangerous"])
    .with_tips(&["request_policy:all_nodes", "response_policy:all_succeeded"]),
    C::new(
        "config|resetstat",
        2,
        &["admin", "noscript", "loading", "stale"],
        KeySpec::None,
        run_sub::<ConfigResetStat>,
    )
    .with_roles(crate::engine::Roles::LOCKS_ITSELF)
    .whole_keyspace()
    .with_acl(&["@admin", "@slow", "@dangerous"]),
    C::new(
        "config|rewrite",
        2,
        &["admin", "noscript", "loading", "stale"],
        KeySpec::None,
        run_sub::<ConfigRewrite>,
    )
    .with_acl(&["@admin", "@slow", "@dangerous"]),
    C::new(
        "config|help",
        2,
        &["loading", "stale"],
        KeySpec::None,
        run_sub::<Help>,
    )
    .with_acl(&["@slow"]),
];

/// CONFIG GET pattern [pattern …]
#[derive(Debug)]
pub(super) struct ConfigGet {
    patterns: Vec<Bytes>,
}

impl Command<'_> for ConfigGet {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(ConfigGet {
            patterns: crate::engine::args::owned(a.rest()),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let cfg = ctx.shared.config();
        let overrides = ctx
            .shared
            .params
            .lock()
            .map(|p| p.clone())
            .unwrap_or_default();
        // As Redis 7.0: a name without glob characters is answered under the spelling the
        // client used; a pattern under the names (and aliases) it matches; each name once.
        let mut found: Vec<(Bytes, &'static Param)> = Vec::new();
        let mut add = |shown: Bytes, param: &'static Param| {
            if !found.iter().any(|(s, _)| s.eq_ignore_ascii_case(&shown)) {
                found.push((shown, param));
            }
        };
        for p in &self.patterns {
            let literal = !p.iter().any(|c| matches!(c, b'*' | b'?' | b'['));
            if literal {
                if let Some(param) = params::find_listed(&String::from_utf8_lossy(p)) {
                    add(p.clone(), param);
                }
                continue;
            }
            let pattern = p.to_ascii_lowercase();
            for param in params::PARAMS
                .iter()
                .filter(|p| p.is_listed() && !p.is_hidden())
            {
                for name in std::iter::once(param.name).chain(param.alias) {
                    if glob_match(&pattern, name.as_bytes(), true) {
                        add(Bytes::from_static(name.as_bytes()), param);
                    }
                }
            }
        }
        let out = found
            .into_iter()
            .map(|(shown, param)| {
                let value = cfg
                    .param(param.name)
                    .or_else(|| overrides.get(param.name).cloned())
                    .unwrap_or_else(|| param.default.to_string());
                (Reply::Bulk(shown), Reply::Bulk(Bytes::from(value)))
            })
            .collect();
        Ok(Reply::Map(out))
    }
}

/// CONFIG SET name value [name value …]
///
/// As Redis 7.0: every name is looked up first (the first unknown, immutable or repeated
/// name fails the whole call), then every value is checked and applied to a copy, which
/// replaces the configuration only if all of them pass.
#[derive(Debug)]
pub(super) struct ConfigSet {
    pairs: Vec<(Bytes, Bytes)>,
}

impl Command<'_> for ConfigSet {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let rest = a.rest();
        if !rest.len().is_multiple_of(2) {
            return Err(CmdError::Syntax);
        }
        Ok(ConfigSet {
            pairs: rest
                .chunks_exact(2)
                .map(|c| (Bytes::copy_from_slice(c[0]), Bytes::copy_from_slice(c[1])))
                .collect(),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let failed = |name: &[u8], why: &str| {
            CmdError::owned(format!(
                "ERR CONFIG SET failed (possibly related to argument '{}') - {why}",
                crate::engine::printable(name, 128)
            ))
        };
        let local = ctx.client.info.is_local();
        let protected_ok = ctx.shared.config().enable_protected_configs.admits(local);
        let mut found: Vec<&'static Param> = Vec::with_capacity(self.pairs.len());
        for (typed, _) in &self.pairs {
            let Some(param) = params::find_listed(&String::from_utf8_lossy(typed)) else {
                return Err(CmdError::owned(format!(
                    "ERR Unknown option or number of arguments for CONFIG SET - '{}'",
                    crate::engine::printable(typed, 128)
                )));
            };
            if param.is_immutable() {
                return Err(failed(typed, "can't set immutable config"));
            }
            if param.is_protected() && !protected_ok {
                return Err(failed(typed, "can't set protected config"));
            }
            if found.iter().any(|p| p.name == param.name) {
                return Err(failed(typed, "duplicate parameter"));
            }
            found.push(param);
        }
        let Ok(mut cfg) = ctx.shared.config.write() else {
            return Err(CmdError::msg("ERR configuration is unavailable"));
        };
        let mut next = cfg.clone();
        let mut recorded = Vec::new();
        for (param, (typed, value)) in found.iter().zip(&self.pairs) {
            let value = String::from_utf8_lossy(value);
            let checked = param
                .check(&value)
                .and_then(|v| effect_allows(param, &v).map(|()| v))
                .and_then(|v| next.set_param(param.name, &v).map(|acted| (v, acted)));
            match checked {
                Ok((_, true)) => {}
                Ok((v, false)) => recorded.push((param.name.to_string(), v)),
                // Redis names the parameter as matched here, lowercase.
                Err(why) => return Err(failed(&typed.to_ascii_lowercase(), &why)),
            }
        }
        // Redis's apply step for port and bind: new listeners, or an error and nothing
        // changed.
        // (A server started on port 0 listens on the one it was given: that is no change.)
        let listening = ctx.shared.port.load(std::sync::atomic::Ordering::Relaxed);
        let port_changed = next.port != cfg.port && next.port != listening;
        if port_changed || next.bind != cfg.bind {
            let typed = self
                .pairs
                .iter()
                .zip(&found)
                .find(|(_, p)| p.name == if port_changed { "port" } else { "bind" })
                .map(|((t, _), _)| t.to_ascii_lowercase())
                .unwrap_or_default();
            // New addresses keep the port listened on (`port 0` picked one at start).
            let port = if port_changed { next.port } else { listening };
            match ctx.shared.relisten.change(&next.bind, port, port_changed) {
                Ok(port) => ctx
                    .shared
                    .port
                    .store(port, std::sync::atomic::Ordering::Relaxed),
                Err(why) => return Err(failed(&typed, why)),
            }
        }
        ctx.shared.live.store(&next);
        // Redis's updateGoodSlaves: the good replicas are counted again with the new lag.
        ctx.shared
            .repl
            .refresh_good_replicas(next.repl.min_replicas_max_lag);
        // `requirepass` is the default user's password (Redis's ACLUpdateDefaultUserPassword).
        if found.iter().any(|p| p.name == "requirepass") {
            ctx.shared
                .acl
                .set_default_password(&ctx.shared.table, next.requirepass.as_deref());
        }
        ctx.shared
            .acl
            .configure(next.acllog_max_len, next.acl_pubsub_allchannels);
        let backlog = next.repl.backlog_size;
        crate::commands::cluster_bus::configured(ctx.shared, &next);
        *cfg = next;
        drop(cfg);
        ctx.shared.configure_notifications();
        ctx.shared.repl.feed().resize(backlog);
        crate::services::aof::configured(ctx.shared);
        if let Ok(mut params) = ctx.shared.params.lock() {
            params.extend(recorded);
        }
        // A lower maxmemory evicts at once, as Redis's updateMaxmemory does (inside EXEC the
        // transaction holds shards: the next command evicts).
        if !ctx.in_exec && found.iter().any(|p| p.name == "maxmemory") {
            crate::services::maxmemory::evict_now(ctx.shared);
        }
        Ok(Reply::ok())
    }
}

/// A value sluice cannot honour is refused, not recorded: the start-up reader would refuse
/// it in the file CONFIG REWRITE writes (`appendonly yes`), so the server could not restart.
fn effect_allows(param: &Param, value: &str) -> Result<(), String> {
    match param.effect {
        Effect::Only(ok, why) if !ok.contains(&value.to_ascii_lowercase().as_str()) => {
            Err(why.to_string())
        }
        Effect::Refused(why) => Err(why.to_string()),
        _ => Ok(()),
    }
}

/// CONFIG RESETSTAT
#[derive(Debug)]
pub(super) struct ConfigResetStat;

impl Command<'_> for ConfigResetStat {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(ConfigResetStat)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        ctx.shared.table.reset_stats();
        ctx.shared.errors.reset();
        ctx.shared.stats.reset();
        ctx.store.reset_stats();
        ctx.shared.lazyfree.reset_stats();
        Ok(Reply::ok())
    }
}

/// CONFIG REWRITE: the config file the server started from gets the configuration it
/// runs with now (`crate::config::rewrite` has Redis's rules), replaced atomically.
#[derive(Debug)]
pub(super) struct ConfigRewrite;

/// One rewrite at a time: each reads the file the previous one wrote.
static REWRITING: std::sync::Mutex<()> = std::sync::Mutex::new(());

impl Command<'_> for ConfigRewrite {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(ConfigRewrite)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let shared = ctx.shared;
        let config = shared.config().clone();
        let Some(path) = config.config_file.clone() else {
            return Err(CmdError::msg(
                "ERR The server is running without a config file",
            ));
        };
        let overrides = shared.params.lock().map(|p| p.clone()).unwrap_or_default();
        let dir = config.rdb_dir().display().to_string();
        let rt = crate::config::rewrite::Runtime {
            overrides: &overrides,
            replicaof: shared.repl.link().map(|l| (l.host, l.port)),
            dir,
            users: config.aclfile.is_none().then(|| {
                shared
                    .acl
                    .list()
                    .into_iter()
                    .map(|l| String::from_utf8_lossy(&l).into_owned())
                    .collect()
            }),
        };
        let options = crate::config::rewrite::options(&config, &rt);
        let _one = REWRITING.lock().unwrap_or_else(|e| e.into_inner());
        let path = std::path::Path::new(&path);
        let old = match std::fs::read(path) {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(rewrite_failed(&e)),
        };
        let content = crate::config::rewrite::rewrite(&old, &options);
        crate::config::rewrite::overwrite(path, &content).map_err(|e| rewrite_failed(&e))?;
        tracing::info!("CONFIG REWRITE executed with success.");
        Ok(Reply::ok())
    }
}

fn rewrite_failed(e: &std::io::Error) -> CmdError {
    let why = crate::config::rewrite::strerror(e);
    tracing::warn!("CONFIG REWRITE failed: {why}");
    CmdError::owned(format!("ERR Rewriting config file: {why}"))
}
