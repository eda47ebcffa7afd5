//! One row of the parameter table: a parameter's type and bounds, what sluice does with it,
//! its flags (immutable, protected, secret, listed…), and the check every value passes
//! before it is stored ([`Param::check`]). The table itself is `params::PARAMS`.

use super::check;
use crate::config::{Config, memtoull};

/// How a value is checked (Redis 7.0's config types).
#[derive(Debug, Clone, Copy)]
pub enum Type {
    /// `yes` or `no`, any case.
    Bool,
    /// An integer (Redis's strict `string2ll`) in `min..=max`.
    Int(i128, i128),
    /// A memory size (`memtoull`: digits and an optional unit) in `min..=max`.
    Mem(i128, i128),
    /// A memory size, or a percentage of `maxmemory` up to 100 (`maxmemory-clients`).
    MemOrPercent,
    /// Octal permission bits up to the given value (`unixsocketperm`).
    Octal(u32),
    /// One of these names, any case (shown lowercase).
    Enum(&'static [&'static str]),
    /// Text without control characters.
    Str,
    /// Any bytes (a password): never shown in messages.
    Secret,
    /// Checked (and normalised) by its own function.
    Special(fn(&str) -> Result<String, String>),
}

/// What sluice does with a parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Acted on: the value goes into `Config`.
    Acts,
    /// Accepted with a warning at start; the text says why it has no effect.
    Inert(&'static str),
    /// These values (lowercase, arguments joined by a space) are what sluice does anyway
    /// and are accepted silently; any other value is refused for the reason given.
    Only(&'static [&'static str], &'static str),
    /// These values are accepted silently; any other is accepted with the warning given.
    Quiet(&'static [&'static str], &'static str),
    /// Refused whatever its value (a file-only directive).
    Refused(&'static str),
}

/// Where a value being stored comes from (a few parameters differ: `save` lines in a file
/// add to each other, a CONFIG SET replaces them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// A conf file or the command line, at start.
    File,
    /// CONFIG SET, at run time.
    ConfigSet,
}

/// Reads a parameter's value from the configuration, as CONFIG GET shows it.
pub type Getter = fn(&Config) -> String;
/// Stores a value (already checked by [`Param::check`]) into the configuration.
pub type Setter = fn(&mut Config, &str, Source) -> Result<(), String>;

/// One parameter.
#[derive(Clone, Copy)]
pub struct Param {
    /// Redis's name (lowercase).
    pub name: &'static str,
    /// Its other name (`slaveof` for `replicaof`), if any.
    pub alias: Option<&'static str>,
    /// How values are checked.
    pub ty: Type,
    /// The default as CONFIG GET shows it (for a parameter sluice acts on, `Config`'s
    /// default is the one that counts).
    pub default: &'static str,
    pub(super) flags: u8,
    /// What sluice does with it.
    pub effect: Effect,
    pub(super) get: Option<Getter>,
    pub(super) set: Option<Setter>,
    pub(super) help: Option<(&'static str, &'static str)>,
}

impl std::fmt::Debug for Param {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Param")
            .field("name", &self.name)
            .field("ty", &self.ty)
            .field("effect", &self.effect)
            .finish_non_exhaustive()
    }
}

pub(super) const IMMUTABLE: u8 = 1;
pub(super) const PROTECTED: u8 = 1 << 1;
pub(super) const SECRET: u8 = 1 << 2;
pub(super) const LISTED: u8 = 1 << 3;
pub(super) const MULTI_ARG: u8 = 1 << 4;
pub(super) const NULLABLE: u8 = 1 << 5;
pub(super) const OWN: u8 = 1 << 6;
pub(super) const HIDDEN: u8 = 1 << 7;

pub(super) const fn p(name: &'static str, ty: Type, default: &'static str) -> Param {
    Param {
        name,
        alias: None,
        ty,
        default,
        flags: 0,
        effect: Effect::Acts,
        get: None,
        set: None,
        help: None,
    }
}

impl Param {
    pub(super) const fn alias(mut self, alias: &'static str) -> Self {
        self.alias = Some(alias);
        self
    }
    pub(super) const fn flag(mut self, f: u8) -> Self {
        self.flags |= f;
        self
    }
    pub(super) const fn immutable(self) -> Self {
        self.flag(IMMUTABLE)
    }
    pub(super) const fn protected(self) -> Self {
        self.flag(PROTECTED)
    }
    pub(super) const fn secret(self) -> Self {
        self.flag(SECRET)
    }
    pub(super) const fn listed(self) -> Self {
        self.flag(LISTED)
    }
    pub(super) const fn multi_arg(self) -> Self {
        self.flag(MULTI_ARG)
    }
    pub(super) const fn nullable(self) -> Self {
        self.flag(NULLABLE)
    }
    /// sluice's own, not Redis's.
    pub(super) const fn own(self) -> Self {
        self.flag(OWN)
    }
    /// Redis's HIDDEN_CONFIG: CONFIG GET shows it when named, never for a pattern.
    pub(super) const fn hidden(self) -> Self {
        self.flag(HIDDEN)
    }
    pub(super) const fn inert(mut self, why: &'static str) -> Self {
        self.effect = Effect::Inert(why);
        self
    }
    pub(super) const fn only(mut self, ok: &'static [&'static str], why: &'static str) -> Self {
        self.effect = Effect::Only(ok, why);
        self
    }
    pub(super) const fn quiet(mut self, ok: &'static [&'static str], why: &'static str) -> Self {
        self.effect = Effect::Quiet(ok, why);
        self
    }
    pub(super) const fn refused(mut self, why: &'static str) -> Self {
        self.effect = Effect::Refused(why);
        self
    }
    pub(super) const fn get(mut self, get: Getter) -> Self {
        self.get = Some(get);
        self
    }
    pub(super) const fn set(mut self, set: Setter) -> Self {
        self.set = Some(set);
        self
    }
    pub(super) const fn help(mut self, args: &'static str, text: &'static str) -> Self {
        self.help = Some((args, text));
        self
    }

    /// The value sluice runs with, as CONFIG GET shows it; None for a parameter sluice
    /// does not keep (CONFIG GET then shows what CONFIG SET recorded, or the default).
    pub fn value(&self, config: &Config) -> Option<String> {
        self.get.map(|get| get(config))
    }

    /// Stores a value (checked first); Ok(false) for a parameter sluice does not keep.
    pub fn store(&self, config: &mut Config, value: &str, from: Source) -> Result<bool, String> {
        let Some(set) = self.set else {
            return Ok(false);
        };
        let checked = self.check(value)?;
        set(config, &checked, from)?;
        Ok(true)
    }

    /// CONFIG SET refuses it with `can't set immutable config`.
    pub fn is_immutable(&self) -> bool {
        self.flags & IMMUTABLE != 0
    }
    /// CONFIG SET may change it only as `enable-protected-configs` allows.
    pub fn is_protected(&self) -> bool {
        self.flags & PROTECTED != 0
    }
    /// CONFIG GET shows it only when it is named, not for a pattern (Redis's debugging knobs).
    pub fn is_hidden(&self) -> bool {
        self.flags & HIDDEN != 0
    }
    /// Its value is hidden from messages (a password).
    pub fn is_secret(&self) -> bool {
        self.flags & SECRET != 0
    }
    /// CONFIG GET and CONFIG SET know it (under its name and its alias).
    pub fn is_listed(&self) -> bool {
        self.flags & LISTED != 0
    }
    /// A config file line may give it several words (`save 900 1`, `bind a b`).
    pub fn takes_several_words(&self) -> bool {
        self.flags & MULTI_ARG != 0
    }
    /// An empty string means "not set": CONFIG REWRITE then writes no line for it.
    pub fn empty_is_unset(&self) -> bool {
        self.flags & NULLABLE != 0
    }
    /// Its value is a string CONFIG REWRITE writes quoted.
    pub fn is_string(&self) -> bool {
        matches!(self.ty, Type::Str | Type::Secret)
    }

    /// Checks a value (a conf line's words joined by one space, or CONFIG SET's argument)
    /// against the row's type with Redis 7.0's texts, and returns it as CONFIG GET will show
    /// it (numbers normalised, names lowercase).
    pub fn check(&self, value: &str) -> Result<String, String> {
        let range = |n: i128, min: i128, max: i128| {
            if (min..=max).contains(&n) {
                Ok(n.to_string())
            } else {
                Err(format!(
                    "argument must be between {min} and {max} inclusive"
                ))
            }
        };
        match self.ty {
            Type::Bool => match value.to_ascii_lowercase().as_str() {
                v @ ("yes" | "no") => Ok(v.to_string()),
                _ => Err("argument must be 'yes' or 'no'".into()),
            },
            Type::Int(min, max) => {
                let n = crate::num::parse_i64(value.as_bytes())
                    .ok_or("argument couldn't be parsed into an integer")?;
                let shown = range(i128::from(n), min, max)?;
                // Redis stores `hz` clamped to what its timer can do.
                if self.name == "hz" {
                    return Ok(n.clamp(1, 500).to_string());
                }
                Ok(shown)
            }
            Type::Mem(min, max) => {
                let n = memtoull(value).ok_or("argument must be a memory value")?;
                range(i128::from(n), min, max)
            }
            Type::MemOrPercent => {
                if let Some(pct) = value.strip_suffix('%') {
                    let n = crate::num::parse_i64(pct.as_bytes())
                        .filter(|n| *n >= 0)
                        .ok_or("argument must be a memory or percent value")?;
                    if n > 100 {
                        return Err("percentage argument must be less or equal to 100".into());
                    }
                    return Ok(format!("{n}%"));
                }
                let n = memtoull(value).ok_or("argument must be a memory or percent value")?;
                range(i128::from(n), 0, i128::from(i64::MAX))
            }
            Type::Octal(max) => u32::from_str_radix(value, 8)
                .ok()
                .filter(|n| *n <= max)
                .map(|n| n.to_string())
                .ok_or_else(|| format!("argument must be between 0 and {max:o} inclusive")),
            Type::Enum(names) => {
                let words: Vec<String> = value.split(' ').map(|w| w.to_ascii_lowercase()).collect();
                let one_word = words.len() == 1 || !self.takes_several_words();
                if (one_word && words.len() != 1)
                    || words.iter().any(|w| !names.contains(&w.as_str()))
                {
                    return Err(format!(
                        "argument(s) must be one of the following: {}",
                        names.join(", ")
                    ));
                }
                Ok(words.join(" "))
            }
            Type::Str => {
                check::text(value)?;
                Ok(value.to_string())
            }
            Type::Secret => Ok(value.to_string()),
            Type::Special(f) => f(value),
        }
    }
}
