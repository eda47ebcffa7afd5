//! ACL users and their rules, as Redis 7.0's `acl.c` defines them: a user's flags and
//! password hashes, and its selectors (the root one and those given in parentheses), each
//! with a command bitmap, key patterns (`~`, `%R~`, `%W~`) and channel patterns (`&`).
//!
//! Rules are applied one at a time ([`User::apply`]) with Redis's error for each bad one;
//! [`User::describe`] and [`Selector::describe_commands`] give them back in Redis's form
//! (ACL LIST, ACL GETUSER, the ACL file), including 7.0's choice of categories that best
//! approximate a command bitmap. The command table is reached through [`Catalog`], built
//! once from the table's rows: each command's id, its ACL categories (the ones COMMAND INFO
//! reports, one source) and its subcommands.

use bytes::Bytes;

use crate::engine::{CmdFlags, CommandTable};

/// Redis 7.0's ACL categories, in its order (ACL CAT, and the order rules are tried in).
pub(crate) const CATEGORIES: [&str; 21] = [
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
];

/// The bit of a category name (any case), or 0 for an unknown one.
pub(crate) fn category_bit(name: &[u8]) -> u32 {
    CATEGORIES
        .iter()
        .position(|c| c.as_bytes().eq_ignore_ascii_case(name))
        .map_or(0, |i| 1 << i)
}

/// One command of the catalog.
#[derive(Debug)]
pub struct CatCommand {
    /// Its id in the command table (the bit in a selector's bitmap).
    pub id: u32,
    /// Redis's full name (`config|get`).
    pub name: &'static str,
    /// Its ACL categories as bits of [`CATEGORIES`].
    pub cats: u32,
    /// Its subcommands.
    pub subs: Vec<CatCommand>,
    /// It is a subcommand.
    pub is_sub: bool,
    /// It has subcommands.
    pub has_subs: bool,
}

/// The commands ACL rules name: the table's top-level commands and their subcommands.
#[derive(Debug)]
pub struct Catalog {
    /// Top-level commands, sorted by name.
    pub commands: Vec<CatCommand>,
    /// Bitmap words needed for every table id.
    pub words: usize,
}

fn cats_of(acl: &[&str]) -> u32 {
    acl.iter()
        .map(|c| category_bit(c.trim_start_matches('@').as_bytes()))
        .fold(0, |a, b| a | b)
}

impl Catalog {
    /// Built once from the command table.
    pub fn new(table: &CommandTable) -> Catalog {
        let commands = table
            .top_entries()
            .into_iter()
            .map(|e| {
                let subs: Vec<CatCommand> = table
                    .sub_ids(e)
                    .filter_map(|id| table.entry(crate::engine::CmdId(id)))
                    .map(|s| CatCommand {
                        id: s.id.0,
                        name: s.spec.name,
                        cats: cats_of(s.spec.acl),
                        subs: Vec::new(),
                        is_sub: true,
                        has_subs: false,
                    })
                    .collect();
                CatCommand {
                    id: e.id.0,
                    name: e.spec.name,
                    cats: cats_of(e.spec.acl),
                    has_subs: !subs.is_empty(),
                    subs,
                    is_sub: false,
                }
            })
            .collect();
        Catalog {
            commands,
            words: table.entries().len().div_ceil(64).max(1),
        }
    }

    /// Every command and subcommand, parents before their subcommands.
    pub fn walk(&self) -> impl Iterator<Item = &CatCommand> {
        self.commands
            .iter()
            .flat_map(|c| std::iter::once(c).chain(c.subs.iter()))
    }

    fn find(&self, id: u32) -> Option<&CatCommand> {
        self.walk().find(|c| c.id == id)
    }
}

/// Read and write permission of a key pattern.
pub(crate) const READ: u8 = 1;
/// Write permission of a key pattern.
pub(crate) const WRITE: u8 = 2;

/// A key pattern with what it allows (`~` both, `%R~` read, `%W~` write).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyPattern {
    /// The glob pattern.
    pub pattern: Bytes,
    /// [`READ`] | [`WRITE`].
    pub flags: u8,
}

impl KeyPattern {
    fn describe(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(match self.flags {
            READ => b"%R~".as_slice(),
            WRITE => b"%W~",
            _ => b"~",
        });
        out.extend_from_slice(&self.pattern);
    }
}

/// What a refused rule was: Redis's `errno` values, each with its text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleError {
    /// ENOENT.
    UnknownCommand,
    /// EINVAL.
    Syntax,
    /// EEXIST.
    KeyAfterAll,
    /// EISDIR.
    ChannelAfterAll,
    /// ENODEV.
    NoSuchPassword,
    /// EBADMSG.
    BadHash,
    /// ECHILD.
    FirstArgOfSub,
}

impl RuleError {
    /// Redis's `ACLSetUserStringError` text.
    pub fn text(self) -> &'static str {
        match self {
            RuleError::UnknownCommand => "Unknown command or category name in ACL",
            RuleError::Syntax => "Syntax error",
            RuleError::KeyAfterAll => {
                "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns"
            }
            RuleError::ChannelAfterAll => {
                "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels"
            }
            RuleError::NoSuchPassword => {
                "The password you are trying to remove from the user does not exist"
            }
            RuleError::BadHash => {
                "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters"
            }
            RuleError::FirstArgOfSub => "Allowing first-arg of a subcommand is not supported",
        }
    }
}

/// Redis's `ACLStringHasSpaces`: white space or NUL.
pub(crate) fn has_spaces(s: &[u8]) -> bool {
    s.iter()
        .any(|&c| c == 0 || c == b' ' || (b'\t'..=b'\r').contains(&c))
}

/// A selector: which commands, keys and channels it allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector {
    /// The user's root selector (rules outside parentheses).
    pub root: bool,
    /// Any key (`allkeys`, `~*`).
    pub allkeys: bool,
    /// Any channel (`allchannels`, `&*`).
    pub allchannels: bool,
    /// Every command, without looking at the bitmap (`+@all` not narrowed since).
    pub allcommands: bool,
    /// Redis's reserved bit: set by `+@all`, cleared only by `-@all`; it decides whether a
    /// description starts from `+@all` or `-@all`.
    pub future: bool,
    /// Allowed commands by table id.
    bits: Vec<u64>,
    /// `+command|first-arg` of commands without subcommands: (id, first args).
    firstargs: Vec<(u32, Vec<Bytes>)>,
    /// Key patterns, in the order given.
    pub keys: Vec<KeyPattern>,
    /// Channel patterns, in the order given.
    pub channels: Vec<Bytes>,
}

impl Selector {
    /// An empty selector (`acl-pubsub-default allchannels` gives it every channel).
    pub fn new(words: usize, root: bool, allchannels: bool) -> Selector {
        Selector {
            root,
            allkeys: false,
            allchannels,
            allcommands: false,
            future: false,
            bits: vec![0; words],
            firstargs: Vec::new(),
            keys: Vec::new(),
            channels: Vec::new(),
        }
    }

    /// The command bit of `id`.
    pub fn bit(&self, id: u32) -> bool {
        self.bits
            .get(id as usize / 64)
            .is_some_and(|w| w & (1 << (id % 64)) != 0)
    }

    fn set_bit(&mut self, id: u32, on: bool) {
        if let Some(w) = self.bits.get_mut(id as usize / 64) {
            if on {
                *w |= 1 << (id % 64);
            } else {
                *w &= !(1 << (id % 64));
                self.allcommands = false;
            }
        }
    }

    /// Allows or forbids a command and its subcommands (Redis's `ACLChangeSelectorPerm`).
    fn change(&mut self, cmd: &CatCommand, allow: bool) {
        self.set_bit(cmd.id, allow);
        self.firstargs.retain(|(id, _)| *id != cmd.id);
        for sub in &cmd.subs {
            self.set_bit(sub.id, allow);
        }
    }

    fn set_category(&mut self, catalog: &Catalog, cat: u32, allow: bool) {
        for cmd in &catalog.commands {
            if cmd.cats & cat != 0 {
                self.change(cmd, allow);
            }
            for sub in &cmd.subs {
                if sub.cats & cat != 0 {
                    self.change(sub, allow);
                }
            }
        }
    }

    fn all(&mut self, allow: bool) {
        self.bits
            .iter_mut()
            .for_each(|w| *w = if allow { !0 } else { 0 });
        self.allcommands = allow;
        self.future = allow;
        self.firstargs.clear();
    }

    /// Whether the first argument `arg` is allowed for the command `id`.
    pub fn firstarg_allowed(&self, id: u32, arg: &[u8]) -> bool {
        self.firstargs
            .iter()
            .any(|(i, args)| *i == id && args.iter().any(|a| a.eq_ignore_ascii_case(arg)))
    }

    /// Applies one selector rule (Redis's `ACLSetSelector`).
    pub fn apply(
        &mut self,
        catalog: &Catalog,
        table: &CommandTable,
        op: &[u8],
    ) -> Result<(), RuleError> {
        let is = |w: &str| op.eq_ignore_ascii_case(w.as_bytes());
        if is("allkeys") || is("~*") {
            self.allkeys = true;
            self.keys.clear();
        } else if is("resetkeys") {
            self.allkeys = false;
            self.keys.clear();
        } else if is("allchannels") || is("&*") {
            self.allchannels = true;
            self.channels.clear();
        } else if is("resetchannels") {
            self.allchannels = false;
            self.channels.clear();
        } else if is("allcommands") || is("+@all") {
            self.all(true);
        } else if is("nocommands") || is("-@all") {
            self.all(false);
        } else if op[0] == b'~' || op[0] == b'%' {
            if self.allkeys {
                return Err(RuleError::KeyAfterAll);
            }
            let mut flags = 0;
            let mut offset = 1;
            if op[0] == b'%' {
                loop {
                    match op.get(offset).map(u8::to_ascii_uppercase) {
                        Some(b'R') if flags & READ == 0 => flags |= READ,
                        Some(b'W') if flags & WRITE == 0 => flags |= WRITE,
                        Some(b'~') => {
                            offset += 1;
                            break;
                        }
                        // Redis stops at the end of the rule as if `~` had come.
                        None => break,
                        _ => return Err(RuleError::Syntax),
                    }
                    offset += 1;
                }
                if flags == 0 {
                    return Err(RuleError::Syntax);
                }
            } else {
                flags = READ | WRITE;
            }
            let pattern = &op[offset.min(op.len())..];
            if has_spaces(pattern) {
                return Err(RuleError::Syntax);
            }
            match self.keys.iter_mut().find(|k| k.pattern == pattern) {
                Some(k) => k.flags |= flags,
                None => self.keys.push(KeyPattern {
                    pattern: Bytes::copy_from_slice(pattern),
                    flags,
                }),
            }
            self.allkeys = false;
        } else if op[0] == b'&' {
            if self.allchannels {
                return Err(RuleError::ChannelAfterAll);
            }
            let pattern = &op[1..];
            if has_spaces(pattern) {
                return Err(RuleError::Syntax);
            }
            if !self.channels.iter().any(|c| c == pattern) {
                self.channels.push(Bytes::copy_from_slice(pattern));
            }
            self.allchannels = false;
        } else if op[0] == b'+' && op.get(1) != Some(&b'@') {
            self.allow_command(catalog, table, &op[1..])?;
        } else if op[0] == b'-' && op.get(1) != Some(&b'@') {
            let entry = table
                .lookup_full_name(&op[1..])
                .ok_or(RuleError::UnknownCommand)?;
            let cmd = catalog.find(entry.id.0).ok_or(RuleError::UnknownCommand)?;
            self.change(cmd, false);
        } else if (op[0] == b'+' || op[0] == b'-') && op.get(1) == Some(&b'@') {
            let cat = category_bit(&op[2..]);
            if cat == 0 {
                return Err(RuleError::UnknownCommand);
            }
            self.set_category(catalog, cat, op[0] == b'+');
        } else {
            return Err(RuleError::Syntax);
        }
        Ok(())
    }

    /// `+command`, `+command|subcommand` or `+command|first-arg`.
    fn allow_command(
        &mut self,
        catalog: &Catalog,
        table: &CommandTable,
        name: &[u8],
    ) -> Result<(), RuleError> {
        let Some(bar) = name.iter().rposition(|&b| b == b'|') else {
            let entry = table
                .lookup_full_name(name)
                .ok_or(RuleError::UnknownCommand)?;
            let cmd = catalog.find(entry.id.0).ok_or(RuleError::UnknownCommand)?;
            self.change(cmd, true);
            return Ok(());
        };
        let (base, sub) = (&name[..bar], &name[bar + 1..]);
        let entry = table
            .lookup_full_name(base)
            .ok_or(RuleError::UnknownCommand)?;
        let cmd = catalog.find(entry.id.0).ok_or(RuleError::UnknownCommand)?;
        if cmd.is_sub {
            return Err(RuleError::FirstArgOfSub);
        }
        if sub.is_empty() {
            return Err(RuleError::Syntax);
        }
        if cmd.has_subs {
            let entry = table
                .lookup_full_name(name)
                .ok_or(RuleError::UnknownCommand)?;
            let sub = catalog.find(entry.id.0).ok_or(RuleError::UnknownCommand)?;
            self.change(sub, true);
        } else {
            let lower = Bytes::from(sub.to_ascii_lowercase());
            match self.firstargs.iter_mut().find(|(id, _)| *id == cmd.id) {
                Some((_, args)) => {
                    if !args.iter().any(|a| a.eq_ignore_ascii_case(sub)) {
                        args.push(lower);
                    }
                }
                None => self.firstargs.push((cmd.id, vec![lower])),
            }
        }
        Ok(())
    }

    /// How many commands of category `cat` the bitmap allows and forbids.
    fn count_category(&self, catalog: &Catalog, cat: u32) -> (u64, u64) {
        let (mut on, mut off) = (0, 0);
        for cmd in catalog.walk() {
            if cmd.cats & cat != 0 {
                if self.bit(cmd.id) {
                    on += 1;
                } else {
                    off += 1;
                }
            }
        }
        (on, off)
    }

    /// The command rules that rebuild this bitmap, as Redis 7.0's
    /// `ACLDescribeSelectorCommandRules` chooses them: `+@all` or `-@all`, then the categories
    /// that fit best, then single commands.
    pub fn describe_commands(&self, catalog: &Catalog) -> String {
        let additive = !self.future;
        let mut rules = String::from(if additive { "-@all " } else { "+@all " });
        let mut fake = Selector::new(self.bits.len(), false, false);
        fake.all(!additive);
        let mut temp = self.clone();
        let mut applied = [false; CATEGORIES.len()];
        loop {
            let mut best = None;
            let (mut mindiff, mut maxsame) = (u64::from(u32::MAX), 0);
            for (j, _) in CATEGORIES.iter().enumerate() {
                if applied[j] {
                    continue;
                }
                let (on, off) = temp.count_category(catalog, 1 << j);
                let (diff, same) = if additive { (off, on) } else { (on, off) };
                if same > diff && (diff < mindiff || (diff == mindiff && same > maxsame)) {
                    best = Some(j);
                    mindiff = diff;
                    maxsame = same;
                }
            }
            let Some(best) = best else { break };
            fake.set_category(catalog, 1 << best, additive);
            temp.set_category(catalog, 1 << best, !additive);
            rules.push_str(if additive { "+@" } else { "-@" });
            rules.push_str(CATEGORIES[best]);
            rules.push(' ');
            applied[best] = true;
        }
        for cmd in catalog.walk() {
            let userbit = self.bit(cmd.id);
            if userbit != fake.bit(cmd.id) {
                rules.push(if userbit { '+' } else { '-' });
                rules.push_str(cmd.name);
                rules.push(' ');
                fake.change(cmd, userbit);
            }
            if !userbit {
                for (_, args) in self.firstargs.iter().filter(|(id, _)| *id == cmd.id) {
                    for a in args {
                        rules.push('+');
                        rules.push_str(cmd.name);
                        rules.push('|');
                        rules.push_str(&String::from_utf8_lossy(a));
                        rules.push(' ');
                    }
                }
            }
        }
        rules.pop();
        rules
    }

    /// The key patterns as ACL GETUSER shows them.
    pub fn describe_keys(&self) -> Vec<u8> {
        if self.allkeys {
            return b"~*".to_vec();
        }
        let mut out = Vec::new();
        for (i, k) in self.keys.iter().enumerate() {
            if i > 0 {
                out.push(b' ');
            }
            k.describe(&mut out);
        }
        out
    }

    /// The channel patterns as ACL GETUSER shows them.
    pub fn describe_channels(&self) -> Vec<u8> {
        if self.allchannels {
            return b"&*".to_vec();
        }
        let mut out = Vec::new();
        for (i, c) in self.channels.iter().enumerate() {
            if i > 0 {
                out.push(b' ');
            }
            out.push(b'&');
            out.extend_from_slice(c);
        }
        out
    }

    /// The whole selector in rule form (Redis's `ACLDescribeSelector`).
    pub fn describe(&self, catalog: &Catalog) -> Vec<u8> {
        let mut out = Vec::new();
        if self.allkeys {
            out.extend_from_slice(b"~* ");
        } else {
            for k in &self.keys {
                k.describe(&mut out);
                out.push(b' ');
            }
        }
        if self.allchannels {
            out.extend_from_slice(b"&* ");
        } else {
            out.extend_from_slice(b"resetchannels ");
            for c in &self.channels {
                out.push(b'&');
                out.extend_from_slice(c);
                out.push(b' ');
            }
        }
        out.extend_from_slice(self.describe_commands(catalog).as_bytes());
        out
    }

    /// Whether it allows everything (the fast path skips checking it).
    pub fn unrestricted(&self) -> bool {
        self.allcommands && self.allkeys && self.allchannels
    }

    /// Whether the command `id` may run, by bitmap or first argument.
    pub fn allows_command(&self, id: u32, flags: CmdFlags, first_arg: Option<&[u8]>) -> bool {
        self.allcommands
            || flags.contains(CmdFlags::NO_AUTH)
            || self.bit(id)
            || first_arg.is_some_and(|a| self.firstarg_allowed(id, a))
    }
}

/// `skip-sanitize-payload` / `sanitize-payload`, when given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sanitize {
    /// Neither flag.
    Unset,
    /// `skip-sanitize-payload`.
    Skip,
    /// `sanitize-payload`.
    On,
}

/// One ACL user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    /// Its name.
    pub name: Bytes,
    /// `on` (else `off`, as a new user is).
    pub enabled: bool,
    /// `nopass`: any password works.
    pub nopass: bool,
    /// The payload sanitization flag.
    pub sanitize: Sanitize,
    /// SHA-256 hashes of its passwords, lowercase hex, in the order added.
    pub passwords: Vec<String>,
    /// The root selector first, then the others.
    pub selectors: Vec<Selector>,
}

/// Redis's `ACLHashPassword`: SHA-256, lowercase hex.
pub(crate) fn hash_password(password: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, password);
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

fn valid_hash(h: &[u8]) -> bool {
    h.len() == 64 && h.iter().all(|c| matches!(c, b'a'..=b'f' | b'0'..=b'9'))
}

impl User {
    /// A new user as Redis creates one: off, no password, no command, key or channel.
    pub fn new(name: Bytes, words: usize, allchannels_default: bool) -> User {
        User {
            name,
            enabled: false,
            nopass: false,
            sanitize: Sanitize::Unset,
            passwords: Vec::new(),
            selectors: vec![Selector::new(words, true, allchannels_default)],
        }
    }

    /// The root selector.
    pub fn root(&self) -> &Selector {
        &self.selectors[0]
    }

    /// Applies one rule (Redis's `ACLSetUser`). `allchannels_default` is
    /// `acl-pubsub-default allchannels`.
    pub fn apply(
        &mut self,
        catalog: &Catalog,
        table: &CommandTable,
        op: &[u8],
        allchannels_default: bool,
    ) -> Result<(), RuleError> {
        if op.is_empty() {
            return Ok(());
        }
        let is = |w: &str| op.eq_ignore_ascii_case(w.as_bytes());
        if is("on") {
            self.enabled = true;
        } else if is("off") {
            self.enabled = false;
        } else if is("skip-sanitize-payload") {
            self.sanitize = Sanitize::Skip;
        } else if is("sanitize-payload") {
            self.sanitize = Sanitize::On;
        } else if is("nopass") {
            self.nopass = true;
            self.passwords.clear();
        } else if is("resetpass") {
            self.nopass = false;
            self.passwords.clear();
        } else if op[0] == b'>' || op[0] == b'#' {
            let hash = if op[0] == b'>' {
                hash_password(&op[1..])
            } else if valid_hash(&op[1..]) {
                String::from_utf8_lossy(&op[1..]).into_owned()
            } else {
                return Err(RuleError::BadHash);
            };
            if !self.passwords.contains(&hash) {
                self.passwords.push(hash);
            }
            self.nopass = false;
        } else if op[0] == b'<' || op[0] == b'!' {
            let hash = if op[0] == b'<' {
                hash_password(&op[1..])
            } else if valid_hash(&op[1..]) {
                String::from_utf8_lossy(&op[1..]).into_owned()
            } else {
                return Err(RuleError::BadHash);
            };
            let at = self
                .passwords
                .iter()
                .position(|p| *p == hash)
                .ok_or(RuleError::NoSuchPassword)?;
            self.passwords.remove(at);
        } else if op[0] == b'(' && op[op.len() - 1] == b')' {
            let inner = &op[1..op.len() - 1];
            let words = crate::protocol::request::split_args(inner).ok_or(RuleError::Syntax)?;
            let mut selector = Selector::new(self.root().bits.len(), false, allchannels_default);
            for w in words {
                selector.apply(catalog, table, &w)?;
            }
            self.selectors.push(selector);
        } else if is("clearselectors") {
            self.selectors.truncate(1);
        } else if is("reset") {
            self.passwords.clear();
            self.nopass = false;
            let words = self.root().bits.len();
            self.selectors = vec![Selector::new(words, true, allchannels_default)];
            self.enabled = false;
            self.sanitize = Sanitize::On;
        } else {
            self.selectors[0].apply(catalog, table, op)?;
        }
        Ok(())
    }

    /// The user in rule form, as ACL LIST and the ACL file show it (Redis's
    /// `ACLDescribeUser`, without the leading `user <name> `).
    pub fn describe(&self, catalog: &Catalog) -> Vec<u8> {
        let mut out = Vec::new();
        for flag in self.flag_names() {
            out.extend_from_slice(flag.as_bytes());
            out.push(b' ');
        }
        for p in &self.passwords {
            out.push(b'#');
            out.extend_from_slice(p.as_bytes());
            out.push(b' ');
        }
        for s in &self.selectors {
            let d = s.describe(catalog);
            if s.root {
                out.extend_from_slice(&d);
            } else {
                out.extend_from_slice(b" (");
                out.extend_from_slice(&d);
                out.push(b')');
            }
        }
        out
    }

    /// Its flags in Redis's order (ACL GETUSER's `flags`).
    pub fn flag_names(&self) -> Vec<&'static str> {
        let mut v = vec![if self.enabled { "on" } else { "off" }];
        if self.nopass {
            v.push("nopass");
        }
        match self.sanitize {
            Sanitize::Skip => v.push("skip-sanitize-payload"),
            Sanitize::On => v.push("sanitize-payload"),
            Sanitize::Unset => {}
        }
        v
    }

    /// Whether `password` is one of its passwords (or it takes any), comparing SHA-256
    /// digests in constant time as Redis does.
    pub fn password_matches(&self, password: &[u8]) -> bool {
        use subtle::ConstantTimeEq;
        if self.nopass {
            return true;
        }
        let hashed = hash_password(password);
        let mut found = false;
        for p in &self.passwords {
            found |= bool::from(p.as_bytes().ct_eq(hashed.as_bytes()));
        }
        found
    }
}

/// Joins the arguments of a selector given over several words (Redis's
/// `ACLMergeSelectorArguments`): `(~a` `+get)` become `(~a +get)`. `Err` holds the index
/// of the word that opened a parenthesis never closed.
pub(crate) fn merge_selectors(args: &[Bytes]) -> Result<Vec<Bytes>, usize> {
    let mut out = Vec::with_capacity(args.len());
    let mut open: Option<(usize, Vec<u8>)> = None;
    for (j, op) in args.iter().enumerate() {
        if let Some((start, mut acc)) = open.take() {
            acc.push(b' ');
            acc.extend_from_slice(op);
            if op.last() == Some(&b')') {
                out.push(Bytes::from(acc));
            } else {
                open = Some((start, acc));
            }
            continue;
        }
        if op.first() == Some(&b'(') && op.last() != Some(&b')') {
            open = Some((j, op.to_vec()));
            continue;
        }
        out.push(op.clone());
    }
    match open {
        Some((start, _)) => Err(start),
        None => Ok(out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (CommandTable, Catalog) {
        let table = CommandTable::build();
        let catalog = Catalog::new(&table);
        (table, catalog)
    }

    fn user(rules: &[&str]) -> (User, Catalog, CommandTable) {
        let (table, catalog) = setup();
        let mut u = User::new(Bytes::from_static(b"u"), catalog.words, false);
        for r in rules {
            u.apply(&catalog, &table, r.as_bytes(), false).unwrap();
        }
        (u, catalog, table)
    }

    #[test]
    fn a_new_user_is_off_with_nothing() {
        let (u, catalog, _) = user(&[]);
        assert_eq!(
            String::from_utf8(u.describe(&catalog)).unwrap(),
            "off resetchannels -@all"
        );
    }

    #[test]
    fn passwords_are_hashed_deduplicated_and_removed() {
        let (mut u, catalog, table) = user(&["on", ">p1", ">p1", ">p2"]);
        assert_eq!(u.passwords.len(), 2);
        assert_eq!(u.passwords[0], hash_password(b"p1"));
        assert!(u.password_matches(b"p2"));
        assert!(!u.password_matches(b"p3"));
        u.apply(&catalog, &table, b"<p1", false).unwrap();
        assert_eq!(
            u.apply(&catalog, &table, b"<p1", false),
            Err(RuleError::NoSuchPassword)
        );
        assert_eq!(
            u.apply(&catalog, &table, b"#ABC", false),
            Err(RuleError::BadHash)
        );
        u.apply(&catalog, &table, b"nopass", false).unwrap();
        assert!(u.passwords.is_empty() && u.password_matches(b"anything"));
    }

    #[test]
    fn command_rules_and_their_description() {
        let (u, catalog, _) = user(&["+@all", "-@dangerous"]);
        assert_eq!(u.root().describe_commands(&catalog), "+@all -@dangerous");
        let (u, catalog, _) = user(&["+get", "+config|get"]);
        assert_eq!(
            u.root().describe_commands(&catalog),
            "-@all +config|get +get"
        );
        let (u, catalog, table) = user(&["+@all", "-config|set"]);
        let set = table.lookup_full_name(b"config|set").unwrap().id.0;
        let get = table.lookup_full_name(b"config|get").unwrap().id.0;
        assert!(!u.root().bit(set) && u.root().bit(get));
        assert!(!u.root().allcommands);
        assert_eq!(u.root().describe_commands(&catalog), "+@all -config|set");
    }

    #[test]
    fn rule_errors() {
        let (mut u, catalog, table) = user(&["allkeys"]);
        let mut err = |op: &str| u.apply(&catalog, &table, op.as_bytes(), false);
        assert_eq!(err("~foo"), Err(RuleError::KeyAfterAll));
        assert_eq!(err("+nosuchcommand"), Err(RuleError::UnknownCommand));
        assert_eq!(err("+@nosuchcat"), Err(RuleError::UnknownCommand));
        assert_eq!(err("+config|get|x"), Err(RuleError::FirstArgOfSub));
        assert_eq!(err("+config|nosuch"), Err(RuleError::UnknownCommand));
        assert_eq!(err("+select|"), Err(RuleError::Syntax));
        assert_eq!(err("bogus"), Err(RuleError::Syntax));
        assert_eq!(err("resetkeys"), Ok(()));
        assert_eq!(err("%X~a"), Err(RuleError::Syntax));
        assert_eq!(err("%RW~a"), Ok(()));
        assert_eq!(err("&*"), Ok(()));
        assert_eq!(err("&x"), Err(RuleError::ChannelAfterAll));
    }

    #[test]
    fn key_patterns_keep_their_permissions() {
        let (u, _, _) = user(&["%R~r:*", "%W~w:*", "~a", "%R~w:*"]);
        assert_eq!(u.root().describe_keys(), b"%R~r:* ~w:* ~a");
    }

    #[test]
    fn selectors_merge_and_describe() {
        let args: Vec<Bytes> = ["on", "(~a", "+get)", "(+set)"]
            .iter()
            .map(|s| Bytes::from(*s))
            .collect();
        let merged = merge_selectors(&args).unwrap();
        assert_eq!(merged[1], "(~a +get)");
        assert_eq!(merge_selectors(&args[..2]), Err(1));
        let (u, catalog, _) = user(&["on", "(~a +get)"]);
        assert_eq!(
            String::from_utf8(u.describe(&catalog)).unwrap(),
            "on resetchannels -@all (~a resetchannels -@all +get)"
        );
    }
}
