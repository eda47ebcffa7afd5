//! ACL: the users (`rules`), the permission check every command goes through (called by
//! `engine::call`, the one policy point), the ACL log (`log`), and the ACL file (ACL LOAD /
//! SAVE, `aclfile`) and `user` directives, as Redis 7.0's `acl.c` has them.
//!
//! Users live in a map by name behind a `RwLock`; a client names its user
//! (`ClientState::user`), so ACL SETUSER takes effect on the next command of every client
//! logged in as that user, as in Redis. The common case costs one atomic load per command:
//! while the default user allows everything (`+@all ~* &*`, as it starts), its clients skip
//! the check.

pub(crate) mod log;
pub(crate) mod rules;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use bytes::Bytes;

use crate::engine::CommandTable;
use crate::engine::args::glob_match;
use crate::engine::table::CommandEntry;
use rules::{Catalog, READ, RuleError, User, WRITE};

/// The default user's name.
pub(crate) const DEFAULT_USER: &[u8] = b"default";

/// Why a command was refused (Redis's `ACL_DENIED_*`, in the order it ranks them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Denied {
    /// The command or subcommand.
    Command,
    /// The key at this argument index.
    Key(usize),
    /// The channel at this argument index.
    Channel(usize),
}

impl Denied {
    fn rank(self) -> (u8, usize) {
        match self {
            Denied::Command => (1, 0),
            Denied::Key(i) => (2, i),
            Denied::Channel(i) => (4, i),
        }
    }

    /// The NOPERM error a client gets (Redis's `processCommand`).
    pub fn client_error(self, full_name: &str) -> String {
        match self {
            Denied::Command => {
                format!("NOPERM this user has no permissions to run the '{full_name}' command")
            }
            Denied::Key(_) => {
                "NOPERM this user has no permissions to access one of the keys used as arguments"
                    .into()
            }
            Denied::Channel(_) => {
                "NOPERM this user has no permissions to access one of the channels used as arguments"
                    .into()
            }
        }
    }

    /// Redis's `getAclErrorMessage` (scripts' errors).
    pub fn message(self) -> &'static str {
        match self {
            Denied::Command => "can't run this command or subcommand",
            Denied::Key(_) => {
                "can't access at least one of the keys mentioned in the command arguments"
            }
            Denied::Channel(_) => "can't publish to the channel mentioned in the command",
        }
    }

    /// EXEC's text when the rules changed after queueing (Redis's `execCommand`).
    pub fn exec_error(self) -> String {
        let reason = match self {
            Denied::Command => "no permission to execute the command or subcommand",
            Denied::Key(_) => "no permission to touch the specified keys",
            Denied::Channel(_) => "no permission to access one of the channels used as arguments",
        };
        format!(
            "NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: {reason}"
        )
    }
}

/// Which permissions a key of a command needs, from its key spec's flags (Redis's
/// `ACLSelectorCheckKey`); None for a `not_key` argument.
fn key_needs(flags: &[&str]) -> Option<u8> {
    let mut need = 0;
    for f in flags {
        match *f {
            "not_key" => return None,
            "access" => need |= READ,
            "insert" | "delete" | "update" => need |= WRITE,
            _ => {}
        }
    }
    Some(need)
}

fn check_selector(s: &rules::Selector, entry: &CommandEntry, args: &[&[u8]]) -> Result<(), Denied> {
    let spec = entry.spec;
    let first = if args.len() >= 2 { Some(args[1]) } else { None };
    if !s.allows_command(entry.id.0, spec.flags, first) {
        return Err(Denied::Command);
    }
    if !s.allkeys && !matches!(spec.keys, crate::engine::KeySpec::None) {
        for pos in spec.keys.positions(args) {
            let Some(need) = key_needs(spec.key_flags_at(args, pos)) else {
                continue;
            };
            let key = &args[pos];
            let ok = s
                .keys
                .iter()
                .any(|p| p.flags & need == need && glob_match(&p.pattern, key, false));
            if !ok {
                return Err(Denied::Key(pos));
            }
        }
    }
    if !s.allchannels {
        for (pos, pattern) in spec.channels.positions(args) {
            if !channel_allowed(&s.channels, args[pos], pattern) {
                return Err(Denied::Channel(pos));
            }
        }
    }
    Ok(())
}

/// A channel against a selector's channel patterns: a channel is matched as a glob, a
/// pattern (PSUBSCRIBE) only literally (Redis's `ACLCheckChannelAgainstList`).
fn channel_allowed(list: &[Bytes], channel: &[u8], is_pattern: bool) -> bool {
    list.iter().any(|p| {
        if is_pattern {
            &p[..] == channel
        } else {
            glob_match(p, channel, false)
        }
    })
}

/// Whether the changed user `new` may have lost channels `old` had (Redis's
/// `ACLKillPubsubClientsIfNeeded`): None if any selector allows every channel, or every
/// pattern `old` had is still among `new`'s; otherwise `new`'s patterns.
fn revoked_channels(old: &User, new: &User) -> Option<Vec<Bytes>> {
    if new.selectors.iter().any(|s| s.allchannels) {
        return None;
    }
    let upcoming: Vec<Bytes> = new
        .selectors
        .iter()
        .flat_map(|s| s.channels.iter().cloned())
        .collect();
    let kept = old
        .selectors
        .iter()
        .all(|s| !s.allchannels && s.channels.iter().all(|c| upcoming.contains(c)));
    (!kept).then_some(upcoming)
}

/// Whether a subscription (a channel, or a pattern taken literally) is still allowed by the
/// patterns `revoked_channels` returned.
pub(crate) fn channel_allowed_by(patterns: &[Bytes], name: &[u8], is_pattern: bool) -> bool {
    channel_allowed(patterns, name, is_pattern)
}

/// Whether `user` may run `entry` with `args` (Redis's `ACLCheckAllUserCommandPerm`): some
/// selector allows it, or the most relevant refusal.
pub(crate) fn check_user(user: &User, entry: &CommandEntry, args: &[&[u8]]) -> Result<(), Denied> {
    let mut relevant = Denied::Command;
    for s in &user.selectors {
        match check_selector(s, entry, args) {
            Ok(()) => return Ok(()),
            Err(d) if d.rank() > relevant.rank() => relevant = d,
            Err(_) => {}
        }
    }
    Err(relevant)
}

/// The users, the log, and what the check needs.
#[derive(Debug)]
pub struct Acl {
    catalog: Catalog,
    users: RwLock<BTreeMap<Bytes, Arc<User>>>,
    /// The default user allows everything: its clients skip the check.
    default_open: AtomicBool,
    /// The default user takes no password and is on: new connections start authenticated.
    default_nopass: AtomicBool,
    /// `acl-pubsub-default allchannels`.
    allchannels_default: AtomicBool,
    /// ACL LOG.
    pub log: log::AclLog,
}

/// The default user as Redis creates it: on, nopass, every command, key and channel.
fn default_user(catalog: &Catalog, table: &CommandTable) -> User {
    let mut u = User::new(Bytes::from_static(DEFAULT_USER), catalog.words, false);
    for op in ["+@all", "~*", "&*", "on", "nopass"] {
        let _ = u.apply(catalog, table, op.as_bytes(), false);
    }
    u
}

impl Acl {
    /// The default user only, with `requirepass` as its password if set.
    pub fn new(table: &CommandTable, requirepass: Option<&str>, allchannels: bool) -> Acl {
        let catalog = Catalog::new(table);
        let acl = Acl {
            users: RwLock::new(BTreeMap::new()),
            default_open: AtomicBool::new(true),
            default_nopass: AtomicBool::new(true),
            allchannels_default: AtomicBool::new(allchannels),
            log: log::AclLog::default(),
            catalog,
        };
        acl.install(BTreeMap::new(), table);
        acl.set_default_password(table, requirepass);
        acl
    }

    /// Replaces every user (adding the default one if missing) and refreshes the flags.
    fn install(&self, mut users: BTreeMap<Bytes, Arc<User>>, table: &CommandTable) {
        users
            .entry(Bytes::from_static(DEFAULT_USER))
            .or_insert_with(|| Arc::new(default_user(&self.catalog, table)));
        if let Ok(mut map) = self.users.write() {
            *map = users;
            self.refresh(&map);
        }
    }

    fn refresh(&self, map: &BTreeMap<Bytes, Arc<User>>) {
        let (open, nopass) = map.get(DEFAULT_USER).map_or((false, false), |u| {
            (
                u.selectors.iter().any(|s| s.unrestricted()),
                u.nopass && u.enabled,
            )
        });
        self.default_open.store(open, Ordering::Release);
        self.default_nopass.store(nopass, Ordering::Release);
    }

    /// `requirepass`: the default user's only password, or nopass (Redis's
    /// `ACLUpdateDefaultUserPassword`).
    pub fn set_default_password(&self, table: &CommandTable, password: Option<&str>) {
        let mut op = b">".to_vec();
        let ops: Vec<&[u8]> = match password {
            Some(p) => {
                op.extend_from_slice(p.as_bytes());
                vec![b"resetpass", &op]
            }
            None => vec![b"resetpass", b"nopass"],
        };
        self.modify_default(table, &ops);
    }

    fn modify_default(&self, table: &CommandTable, ops: &[&[u8]]) {
        let all = self.allchannels_default.load(Ordering::Relaxed);
        if let Ok(mut map) = self.users.write() {
            if let Some(u) = map.get_mut(DEFAULT_USER) {
                let mut next = (**u).clone();
                for op in ops {
                    let _ = next.apply(&self.catalog, table, op, all);
                }
                *u = Arc::new(next);
            }
            self.refresh(&map);
        }
    }

    /// Back to the users the server started with (TESTMODE RESET): the default user with
    /// `requirepass`, the `user` directives, an empty log. An ACL file is not read again.
    pub fn reset(&self, table: &CommandTable, config: &crate::config::Config) {
        self.configure(config.acllog_max_len, config.acl_pubsub_allchannels);
        self.install(BTreeMap::new(), table);
        self.set_default_password(table, config.requirepass.as_deref());
        let _ = self.load_configured(table, &config.users);
        self.log.reset();
    }

    /// Takes `acllog-max-len` and `acl-pubsub-default` from the configuration.
    pub fn configure(&self, max_len: usize, allchannels: bool) {
        self.log.set_max_len(max_len);
        self.allchannels_default
            .store(allchannels, Ordering::Relaxed);
    }

    /// Whether a new connection (or RESET) starts authenticated: the default user is on
    /// and takes no password.
    pub fn default_nopass(&self) -> bool {
        self.default_nopass.load(Ordering::Acquire)
    }

    /// The user named `name`.
    pub fn user(&self, name: &[u8]) -> Option<Arc<User>> {
        self.users.read().ok()?.get(name).cloned()
    }

    /// The command check for a client logged in as `user`.
    #[inline]
    pub fn check(&self, user: &[u8], entry: &CommandEntry, args: &[&[u8]]) -> Result<(), Denied> {
        // Inline: every command is checked, and the default user with every permission (no
        // ACL configured) is the common case.
        if self.unrestricted(user) {
            return Ok(());
        }
        self.check_user_named(user, entry, args)
    }

    /// Whether `user` may run every command on every key and channel (the default user
    /// as Redis creates it): [`check`](Self::check) then passes without looking.
    #[inline]
    pub fn unrestricted(&self, user: &[u8]) -> bool {
        user == DEFAULT_USER && self.default_open.load(Ordering::Acquire)
    }

    /// `check` against the user's rules.
    #[inline(never)]
    fn check_user_named(
        &self,
        user: &[u8],
        entry: &CommandEntry,
        args: &[&[u8]],
    ) -> Result<(), Denied> {
        match self.user(user) {
            Some(u) => check_user(&u, entry, args),
            // Deleted while connected: the connection is being closed.
            None => Err(Denied::Command),
        }
    }

    /// Logs a refusal (Redis's `addACLLogEntry`): the command's full name, or the key or
    /// channel refused.
    pub fn log_denied(
        &self,
        client: &crate::client::ClientState,
        entry: &CommandEntry,
        args: &[&[u8]],
        denied: Denied,
        context: log::Context,
        now_ms: u64,
    ) {
        let (reason, object) = match denied {
            Denied::Command => (
                log::Reason::Command,
                Bytes::from_static(entry.spec.name.as_bytes()),
            ),
            Denied::Key(i) => (
                log::Reason::Key,
                args.get(i)
                    .map(|a| Bytes::copy_from_slice(a))
                    .unwrap_or_default(),
            ),
            Denied::Channel(i) => (
                log::Reason::Channel,
                args.get(i)
                    .map(|a| Bytes::copy_from_slice(a))
                    .unwrap_or_default(),
            ),
        };
        self.log.add(log::AclLogEntry {
            count: 1,
            reason,
            context,
            object,
            username: client.user.clone(),
            ctime_ms: now_ms,
            client_info: client.info.render(),
        });
    }

    /// Logs a failed AUTH / HELLO AUTH: the user named, and the command's name as sent.
    pub fn log_auth_failure(
        &self,
        client: &crate::client::ClientState,
        command: &[u8],
        user: &[u8],
        now_ms: u64,
    ) {
        self.log.add(log::AclLogEntry {
            count: 1,
            reason: log::Reason::Auth,
            context: if client.multi.is_some() {
                log::Context::Multi
            } else {
                log::Context::Toplevel
            },
            object: Bytes::copy_from_slice(command),
            username: Bytes::copy_from_slice(user),
            ctime_ms: now_ms,
            client_info: client.info.render(),
        });
    }

    /// Whether a selector of `user` that allows `entry` may also read every key (Redis's
    /// `ACLUserCheckCmdWithUnrestrictedKeyAccess` for SORT's BY and GET).
    pub fn reads_every_key(&self, user: &[u8], entry: &CommandEntry) -> bool {
        if user == DEFAULT_USER && self.default_open.load(Ordering::Acquire) {
            return true;
        }
        self.user(user).is_some_and(|u| {
            u.selectors.iter().any(|s| {
                s.allows_command(entry.id.0, entry.spec.flags, None)
                    && (s.allkeys
                        || s.keys
                            .iter()
                            .any(|k| k.flags & READ != 0 && &k.pattern[..] == b"*"))
            })
        })
    }

    /// Checks credentials (Redis's `ACLCheckUserCredentials`): the user exists, is on, and
    /// the password is one of its own (or it takes any).
    pub fn authenticate(&self, name: &[u8], password: &[u8]) -> bool {
        self.user(name)
            .is_some_and(|u| u.enabled && u.password_matches(password))
    }

    /// ACL SETUSER: every rule is applied to a copy first, so a bad one changes nothing
    /// (Redis's `ACLStringSetUser`). `Err` is the reply's text; `Ok(Some(channels))` says
    /// the user lost channel permissions and lists the patterns it keeps, against which its
    /// subscribers are to be checked ([`channel_allowed_by`]).
    pub fn set_user(
        &self,
        table: &CommandTable,
        name: &[u8],
        ops: &[&[u8]],
    ) -> Result<Option<Vec<Bytes>>, String> {
        let merged =
            rules::merge_selectors(&crate::protocol::request::owned_args(ops)).map_err(|i| {
                format!(
                    "ERR Unmatched parenthesis in acl selector starting at '{}'.",
                    String::from_utf8_lossy(ops[i])
                )
            })?;
        let all = self.allchannels_default.load(Ordering::Relaxed);
        let Ok(mut map) = self.users.write() else {
            return Err("ERR ACL users are unavailable".into());
        };
        let mut user = match map.get(name) {
            Some(u) => (**u).clone(),
            None => User::new(Bytes::copy_from_slice(name), self.catalog.words, all),
        };
        for op in &merged {
            user.apply(&self.catalog, table, op, all).map_err(|e| {
                format!(
                    "ERR Error in ACL SETUSER modifier '{}': {}",
                    String::from_utf8_lossy(op),
                    e.text()
                )
            })?;
        }
        let revoked = map.get(name).and_then(|old| revoked_channels(old, &user));
        map.insert(Bytes::copy_from_slice(name), Arc::new(user));
        self.refresh(&map);
        Ok(revoked)
    }

    /// ACL DELUSER: removes the users named (never `default`); the number removed.
    pub fn delete_users(&self, names: &[&[u8]]) -> usize {
        let Ok(mut map) = self.users.write() else {
            return 0;
        };
        names
            .iter()
            .filter(|n| &n[..] != DEFAULT_USER && map.remove(&n[..]).is_some())
            .count()
    }

    /// The users, sorted by name.
    pub fn users(&self) -> Vec<Arc<User>> {
        self.users
            .read()
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default()
    }

    /// `user <name> <rules>` of each user, as ACL LIST and ACL SAVE write them.
    pub fn list(&self) -> Vec<Vec<u8>> {
        self.users()
            .iter()
            .map(|u| {
                let mut line = b"user ".to_vec();
                line.extend_from_slice(&u.name);
                line.push(b' ');
                line.extend_from_slice(&u.describe(&self.catalog));
                line
            })
            .collect()
    }

    /// The command table's view the rules use.
    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// Users from ACL file text (Redis's `ACLLoadFromFile`): every line checked, and nothing
    /// changed unless all are good. `Err` lists every problem, as Redis's reply does.
    pub fn load_text(
        &self,
        table: &CommandTable,
        filename: &str,
        text: &[u8],
    ) -> Result<(), String> {
        let all = self.allchannels_default.load(Ordering::Relaxed);
        let mut errors = String::new();
        let mut users: BTreeMap<Bytes, Arc<User>> = BTreeMap::new();
        for (i, raw) in text.split(|&b| b == b'\n').enumerate() {
            let linenum = i + 1;
            let line = trim(raw, b" \t\r\n");
            if line.is_empty() {
                continue;
            }
            let argv: Vec<Bytes> = line
                .split(|&b| b == b' ')
                .map(Bytes::copy_from_slice)
                .collect();
            if &argv[0][..] != b"user" || argv.len() < 2 {
                errors.push_str(&format!(
                    "{filename}:{linenum} should start with user keyword followed by the username. "
                ));
                continue;
            }
            if rules::has_spaces(&argv[1]) || argv[1].is_empty() {
                errors.push_str(&format!(
                    "'{filename}:{linenum}: username '{}' contains invalid characters. ",
                    String::from_utf8_lossy(&argv[1])
                ));
                continue;
            }
            if users.contains_key(&argv[1]) {
                errors.push_str(&format!(
                    "WARNING: Duplicate user '{}' found on line {linenum}. ",
                    String::from_utf8_lossy(&argv[1])
                ));
                continue;
            }
            let mut user = User::new(argv[1].clone(), self.catalog.words, all);
            let merged = match rules::merge_selectors(&argv[2..]) {
                Ok(m) => m,
                Err(_) => {
                    errors.push_str(&format!(
                        "{filename}:{linenum}: Unmatched parenthesis in selector definition."
                    ));
                    Vec::new()
                }
            };
            let mut syntax_error = false;
            for op in &merged {
                let op = trim(op, b"\t\r\n");
                if let Err(e) = user.apply(&self.catalog, table, op, all) {
                    if e == RuleError::UnknownCommand {
                        errors.push_str(&format!(
                            "{filename}:{linenum}: Error in applying operation '{}': {}. ",
                            String::from_utf8_lossy(op),
                            e.text()
                        ));
                    } else if !syntax_error {
                        errors.push_str(&format!("{filename}:{linenum}: {}. ", e.text()));
                        syntax_error = true;
                    }
                }
            }
            users.insert(argv[1].clone(), Arc::new(user));
        }
        if !errors.is_empty() {
            errors.push_str(
                "WARNING: ACL errors detected, no change to the previously active ACL rules was performed",
            );
            return Err(errors);
        }
        self.install(users, table);
        Ok(())
    }

    /// The ACL file's text (one `user` line per user, sorted by name).
    pub fn save_text(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for line in self.list() {
            out.extend_from_slice(&line);
            out.push(b'\n');
        }
        out
    }

    /// The `user` directives of the configuration (Redis's `ACLLoadConfiguredUsers`): each
    /// line's rules applied in order; the first bad rule is the error.
    pub fn load_configured(&self, table: &CommandTable, lines: &[String]) -> Result<(), String> {
        let all = self.allchannels_default.load(Ordering::Relaxed);
        let mut users: BTreeMap<Bytes, Arc<User>> = BTreeMap::new();
        for line in lines {
            let words: Vec<Bytes> = line
                .split(' ')
                .map(|w| Bytes::copy_from_slice(w.as_bytes()))
                .collect();
            let Some(name) = words.first().cloned() else {
                continue;
            };
            if rules::has_spaces(&name) || name.is_empty() {
                return Err("Spaces not allowed in ACL usernames".into());
            }
            if users.contains_key(&name) {
                return Err(format!(
                    "Error in user declaration '{}': Duplicate user found. A user can only be defined once in config files",
                    String::from_utf8_lossy(&name)
                ));
            }
            let mut user = match &name[..] {
                DEFAULT_USER => {
                    let mut u = default_user(&self.catalog, table);
                    let _ = u.apply(&self.catalog, table, b"reset", all);
                    u
                }
                _ => User::new(name.clone(), self.catalog.words, all),
            };
            let merged = rules::merge_selectors(&words[1..]).map_err(|i| {
                format!(
                    "Unmatched parenthesis in acl selector starting at '{}'.",
                    String::from_utf8_lossy(&words[1 + i])
                )
            })?;
            for op in &merged {
                user.apply(&self.catalog, table, op, all).map_err(|e| {
                    format!(
                        "Error loading ACL rule '{}' for the user named '{}': {}",
                        String::from_utf8_lossy(op),
                        String::from_utf8_lossy(&name),
                        e.text()
                    )
                })?;
            }
            users.insert(name, Arc::new(user));
        }
        if !users.is_empty() {
            // The default user keeps `requirepass` unless a line redefines it.
            if let Some(default) = self.user(DEFAULT_USER) {
                users
                    .entry(Bytes::from_static(DEFAULT_USER))
                    .or_insert(default);
            }
            self.install(users, table);
        }
        Ok(())
    }
}

fn trim<'a>(s: &'a [u8], set: &[u8]) -> &'a [u8] {
    let start = s.iter().position(|b| !set.contains(b)).unwrap_or(s.len());
    let end = s
        .iter()
        .rposition(|b| !set.contains(b))
        .map_or(start, |e| e + 1);
    &s[start..end.max(start)]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Vec<Bytes> {
        words.iter().map(|w| Bytes::from(w.to_string())).collect()
    }

    fn check(acl: &Acl, table: &CommandTable, user: &str, words: &[&str]) -> Result<(), Denied> {
        let a = args(words);
        let entry = table.get_entry(&a[0]).unwrap();
        let entry = match table.sub_entry(entry, a.get(1).map_or(&b""[..], |b| &b[..])) {
            Some(sub) => sub,
            None => entry,
        };
        acl.check(
            user.as_bytes(),
            entry,
            &crate::protocol::request::borrowed_args(&a),
        )
    }

    #[test]
    fn a_tenant_user_touches_only_its_keys() {
        let table = CommandTable::build();
        let acl = Acl::new(&table, None, false);
        acl.set_user(
            &table,
            b"t1",
            &crate::protocol::request::borrowed_args(&args(&[
                "on",
                ">pw",
                "~tenant1:*",
                "+@all",
                "-@dangerous",
                "&news.*",
            ])),
        )
        .unwrap();
        assert!(acl.authenticate(b"t1", b"pw"));
        assert!(!acl.authenticate(b"t1", b"nope"));
        assert_eq!(check(&acl, &table, "t1", &["get", "tenant1:a"]), Ok(()));
        assert_eq!(
            check(&acl, &table, "t1", &["mset", "tenant1:a", "1", "b", "2"]),
            Err(Denied::Key(3))
        );
        assert_eq!(
            check(&acl, &table, "t1", &["flushall"]),
            Err(Denied::Command)
        );
        assert_eq!(
            check(&acl, &table, "t1", &["publish", "other", "m"]),
            Err(Denied::Channel(1))
        );
        assert_eq!(
            check(&acl, &table, "t1", &["publish", "news.x", "m"]),
            Ok(())
        );
        assert_eq!(
            check(&acl, &table, "t1", &["eval", "return 1", "1", "k"]),
            Err(Denied::Key(3))
        );
    }

    #[test]
    fn read_and_write_patterns() {
        let table = CommandTable::build();
        let acl = Acl::new(&table, None, false);
        acl.set_user(
            &table,
            b"u",
            &crate::protocol::request::borrowed_args(&args(&["on", "+@all", "%R~r*", "%W~w*"])),
        )
        .unwrap();
        assert_eq!(check(&acl, &table, "u", &["get", "r1"]), Ok(()));
        assert_eq!(
            check(&acl, &table, "u", &["get", "w1"]),
            Err(Denied::Key(1))
        );
        assert_eq!(check(&acl, &table, "u", &["set", "w1", "v"]), Ok(()));
        assert_eq!(
            check(&acl, &table, "u", &["set", "r1", "v"]),
            Err(Denied::Key(1))
        );
        // INCR reads and writes.
        assert_eq!(
            check(&acl, &table, "u", &["incr", "w1"]),
            Err(Denied::Key(1))
        );
    }

    #[test]
    fn requirepass_is_the_default_users_password() {
        let table = CommandTable::build();
        let acl = Acl::new(&table, Some("secret"), false);
        assert!(!acl.default_nopass());
        assert!(acl.authenticate(b"default", b"secret"));
        acl.set_default_password(&table, None);
        assert!(acl.default_nopass());
    }

    #[test]
    fn an_acl_file_round_trips_and_a_bad_one_changes_nothing() {
        let table = CommandTable::build();
        let acl = Acl::new(&table, None, false);
        acl.set_user(
            &table,
            b"a",
            &crate::protocol::request::borrowed_args(&args(&[
                "on",
                ">x",
                "~k*",
                "+get",
                "(+set ~s*)",
            ])),
        )
        .unwrap();
        let text = acl.save_text();
        let other = Acl::new(&table, None, false);
        other.load_text(&table, "f.acl", &text).unwrap();
        assert_eq!(other.save_text(), text);
        let err = other
            .load_text(&table, "f.acl", b"user b on +nosuch\nfoo\n")
            .unwrap_err();
        assert!(
            err.contains("f.acl:1: Error in applying operation '+nosuch'"),
            "{err}"
        );
        assert!(
            err.contains("f.acl:2 should start with user keyword"),
            "{err}"
        );
        assert_eq!(other.save_text(), text);
    }
}
