//! COMMAND: the command table as clients see it (COUNT, LIST, INFO, DOCS, GETKEYS); the
//! replies are built from `engine::table` and `engine::docs`, never kept apart from them.

use bytes::Bytes;

use crate::commands::server::Help;
use crate::engine::{
    ArgCursor, Command, CommandSpec as C, Ctx, KeySpec, VariantCommand, run_sub, run_sub_as,
};
use crate::error::{CmdError, CmdResult};
use crate::num::parse_i64;
use crate::protocol::Reply;

pub(super) static COMMAND: &[C] = &[
    C::new(
        "command|count",
        2,
        &["loading", "stale"],
        KeySpec::None,
        run_sub::<CommandCount>,
    )
    .with_acl(&["@slow", "@connection"]),
    C::new(
        "command|info",
        -2,
        &["loading", "stale"],
        KeySpec::None,
        run_sub::<CommandInfo>,
    )
    .with_acl(&["@slow", "@connection"])
    .with_tips(&["nondeterministic_output_order"]),
    C::new(
        "command|docs",
        -2,
        &["loading", "stale"],
        KeySpec::None,
        run_sub::<CommandDocs>,
    )
    .with_acl(&["@slow", "@connection"])
    .with_tips(&["nondeterministic_output_order"]),
    C::new(
        "command|list",
        -2,
        &["loading", "stale"],
        KeySpec::None,
        |c, a| run_sub_as::<CommandList>(c, a, CommandListing::Names),
    )
    .with_acl(&["@slow", "@connection"])
    .with_tips(&["nondeterministic_output_order"]),
    C::new(
        "command|help",
        2,
        &["loading", "stale"],
        KeySpec::None,
        run_sub::<Help>,
    )
    .with_acl(&["@slow", "@connection"]),
    C::new(
        "command|getkeys",
        -4,
        &["loading", "stale"],
        KeySpec::None,
        |c, a| run_sub_as::<CommandGetKeys>(c, a, false),
    )
    .with_acl(&["@slow", "@connection"]),
    C::new(
        "command|getkeysandflags",
        -4,
        &["loading", "stale"],
        KeySpec::None,
        |c, a| run_sub_as::<CommandGetKeys>(c, a, true),
    )
    .with_acl(&["@slow", "@connection"]),
];

/// COMMAND GETKEYS command [arg …]: the keys the table finds in a request;
/// COMMAND GETKEYSANDFLAGS: each with its key spec's flags.
#[derive(Debug)]
pub(super) struct CommandGetKeys {
    args: Vec<Bytes>,
    with_flags: bool,
}

impl VariantCommand<'_> for CommandGetKeys {
    type Variant = bool;

    fn parse(a: &mut ArgCursor<'_>, with_flags: bool) -> CmdResult<Self> {
        Ok(CommandGetKeys {
            args: crate::engine::args::owned(a.rest()),
            with_flags,
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let spec = match crate::engine::lookup(
            &ctx.shared.table,
            &crate::engine::args::borrowed(&self.args),
        ) {
            crate::engine::Lookup::Found(entry) => entry.spec,
            crate::engine::Lookup::Error(CmdError::WrongArity(_), _) => {
                return Err(CmdError::msg(
                    "ERR Invalid number of arguments specified for command",
                ));
            }
            crate::engine::Lookup::Error(..) => {
                return Err(CmdError::msg("ERR Invalid command specified"));
            }
        };
        if matches!(spec.keys, KeySpec::None) {
            return Err(CmdError::msg("ERR The command has no key arguments"));
        }
        if !keynums_fit(spec, &crate::engine::args::borrowed(&self.args)) {
            // Redis falls back on the command's own key finder, which finds no key when the
            // count is not one the arguments hold.
            if spec.has(crate::engine::CmdFlags::NO_MANDATORY_KEYS) {
                return Ok(Reply::Array(Vec::new()));
            }
            return Err(CmdError::msg("ERR Invalid arguments specified for command"));
        }
        Ok(Reply::Array(
            spec.keys
                .positions(&crate::engine::args::borrowed(&self.args))
                .map(|i| {
                    let key = Reply::Bulk(self.args[i].clone());
                    if self.with_flags {
                        Reply::Array(vec![
                            key,
                            status_set(
                                spec.key_flags_at(&crate::engine::args::borrowed(&self.args), i),
                            ),
                        ])
                    } else {
                        key
                    }
                })
                .collect(),
        ))
    }
}

/// Whether every numkeys-counted key spec of `spec` finds a count the arguments hold: at
/// least one key and none past the end (Redis's key-spec search calls anything else invalid).
fn keynums_fit(spec: &C, args: &[&[u8]]) -> bool {
    let fits = |begin: i64, keynumidx: i64, firstkey: i64, step: i64| {
        let count = usize::try_from(begin + keynumidx)
            .ok()
            .and_then(|i| args.get(i))
            .and_then(|b| parse_i64(b));
        count.is_some_and(|c| {
            c >= 1
                && (begin + firstkey).saturating_add((c - 1).saturating_mul(step.max(1)))
                    < args.len() as i64
        })
    };
    if let KeySpec::Keynum {
        begin,
        keynumidx,
        firstkey,
        step,
        ..
    } = spec.keys
        && !fits(begin.into(), keynumidx.into(), firstkey.into(), step.into())
    {
        return false;
    }
    spec.key_specs.iter().all(|d| match (d.begin, d.find) {
        (Some(begin), crate::engine::FindKeys::Keynum(keynumidx, firstkey, step)) => {
            fits(begin, keynumidx, firstkey, step)
        }
        _ => true,
    })
}

fn status_set(items: &[&'static str]) -> Reply {
    Reply::Set(items.iter().map(|f| Reply::status(f)).collect())
}

/// The fields of one COMMAND INFO key spec: its flags, an `index` begin_search at `begin`,
/// and a find_keys of `find_type` with the given spec fields.
fn key_spec_fields(
    flags: &[&'static str],
    begin: i64,
    find_type: &'static str,
    find_spec: &[(&'static str, i64)],
) -> Vec<(Reply, Reply)> {
    let field = |name: &'static str, value: Reply| (Reply::bulk(name.as_bytes()), value);
    vec![
        field("flags", status_set(flags)),
        field(
            "begin_search",
            Reply::Map(vec![
                field("type", Reply::bulk(b"index")),
                field("spec", Reply::Map(vec![field("index", Reply::Int(begin))])),
            ]),
        ),
        field(
            "find_keys",
            Reply::Map(vec![
                field("type", Reply::bulk(find_type.as_bytes())),
                field(
                    "spec",
                    Reply::Map(
                        find_spec
                            .iter()
                            .map(|&(k, v)| field(k, Reply::Int(v)))
                            .collect(),
                    ),
                ),
            ]),
        ),
    ]
}

/// One key spec given explicitly in the table.
fn key_spec_doc(d: &crate::engine::KeySpecDoc) -> Reply {
    use crate::engine::FindKeys;
    let field = |name: &'static str, value: Reply| (Reply::bulk(name.as_bytes()), value);
    let ints = |pairs: &[(&'static str, i64)]| {
        Reply::Map(
            pairs
                .iter()
                .map(|&(k, v)| field(k, Reply::Int(v)))
                .collect(),
        )
    };
    let mut fields = Vec::with_capacity(4);
    if let Some(notes) = d.notes {
        fields.push(field("notes", Reply::bulk(notes.as_bytes())));
    }
    fields.push(field("flags", status_set(d.flags)));
    let begin = match (d.begin, d.keyword) {
        (Some(i), Some(keyword)) => Reply::Map(vec![
            field("type", Reply::bulk(b"keyword")),
            field(
                "spec",
                Reply::Map(vec![
                    field("keyword", Reply::bulk(keyword.as_bytes())),
                    field("startfrom", Reply::Int(i)),
                ]),
            ),
        ]),
        (Some(i), None) => Reply::Map(vec![
            field("type", Reply::bulk(b"index")),
            field("spec", ints(&[("index", i)])),
        ]),
        (None, _) => Reply::Map(vec![
            field("type", Reply::bulk(b"unknown")),
            field("spec", Reply::Map(vec![])),
        ]),
    };
    fields.push(field("begin_search", begin));
    let (kind, spec) = match d.find {
        FindKeys::Range(last, step, limit) => (
            "range",
            ints(&[("lastkey", last), ("keystep", step), ("limit", limit)]),
        ),
        FindKeys::Keynum(idx, first, step) => (
            "keynum",
            ints(&[("keynumidx", idx), ("firstkey", first), ("keystep", step)]),
        ),
        FindKeys::Unknown => ("unknown", Reply::Map(vec![])),
    };
    fields.push(field(
        "find_keys",
        Reply::Map(vec![
            field("type", Reply::bulk(kind.as_bytes())),
            field("spec", spec),
        ]),
    ));
    Reply::Map(fields)
}

/// The COMMAND INFO entry of one command, as Redis 7 shapes it.
pub(super) fn command_info(spec: &C) -> Reply {
    let (first, last, step) = spec.keys.triple();
    let key_specs = if !spec.key_specs.is_empty() {
        spec.key_specs.iter().map(key_spec_doc).collect()
    } else if let KeySpec::Keynum {
        begin,
        keynumidx,
        firstkey,
        step,
        flags,
        notes,
    } = spec.keys
    {
        let mut fields = Vec::with_capacity(4);
        if let Some(notes) = notes {
            fields.push((Reply::bulk(b"notes"), Reply::bulk(notes.as_bytes())));
        }
        fields.extend(key_spec_fields(
            flags,
            begin as i64,
            "keynum",
            &[
                ("keynumidx", keynumidx as i64),
                ("firstkey", firstkey as i64),
                ("keystep", step as i64),
            ],
        ));
        vec![Reply::Map(fields)]
    } else if first > 0 {
        let flags: &[&'static str] = match spec.key_flags {
            Some(flags) => flags,
            None if spec.has(crate::engine::table::CmdFlags::WRITE) => &["RW", "update"],
            None => &["RO", "access"],
        };
        let lastkey = if last < 0 { last } else { last - first };
        let mut fields = Vec::with_capacity(4);
        if let Some(notes) = spec.key_notes {
            fields.push((Reply::bulk(b"notes"), Reply::bulk(notes.as_bytes())));
        }
        fields.extend(key_spec_fields(
            flags,
            first as i64,
            "range",
            &[
                ("lastkey", lastkey as i64),
                ("keystep", step as i64),
                ("limit", 0),
            ],
        ));
        vec![Reply::Map(fields)]
    } else {
        vec![]
    };
    Reply::Array(vec![
        Reply::bulk(spec.name.as_bytes()),
        Reply::Int(spec.reported_arity.unwrap_or(spec.arity) as i64),
        status_set(&spec.flags.names()),
        Reply::Int(first as i64),
        Reply::Int(last as i64),
        Reply::Int(step as i64),
        status_set(spec.acl),
        Reply::Set(
            spec.tips
                .iter()
                .map(|t| Reply::bulk(t.as_bytes()))
                .collect(),
        ),
        // As Redis 7.0 sends them (sets and arrays differ in RESP3 only): the key specs as a
        // set; the subcommands as an array, or an empty set when there are none.
        Reply::Set(key_specs),
        if spec.subcommands.is_empty() {
            Reply::Set(Vec::new())
        } else {
            Reply::Array(spec.subcommands.iter().map(command_info).collect())
        },
    ])
}

/// What a whole-table COMMAND listing gives per command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CommandListing {
    /// COMMAND: every command's full info.
    Infos,
    /// COMMAND LIST: the names.
    Names,
}

/// COMMAND LIST's `FILTERBY`.
#[derive(Debug)]
enum ListFilter {
    /// `MODULE name`: sluice has no modules, so nothing.
    Module,
    /// `ACLCAT category`: the commands and subcommands in it.
    AclCat(Bytes),
    /// `PATTERN glob`: the names (`client|list` for a subcommand) that match, ignoring case.
    Pattern(Bytes),
}

impl ListFilter {
    fn keeps(&self, spec: &C) -> bool {
        match self {
            ListFilter::Module => false,
            ListFilter::AclCat(cat) => spec.acl.iter().any(|a| {
                a.strip_prefix('@')
                    .is_some_and(|a| a.as_bytes().eq_ignore_ascii_case(cat))
            }),
            ListFilter::Pattern(p) => {
                crate::engine::args::glob_match(p, spec.name.as_bytes(), true)
            }
        }
    }
}

/// COMMAND (all infos) / COMMAND LIST [FILTERBY MODULE|ACLCAT|PATTERN value] (names)
#[derive(Debug)]
pub(super) struct CommandList(CommandListing, Option<ListFilter>);

impl VariantCommand<'_> for CommandList {
    type Variant = CommandListing;

    fn parse(a: &mut ArgCursor<'_>, listing: CommandListing) -> CmdResult<Self> {
        let mut filter = None;
        if listing == CommandListing::Names && a.remaining() > 0 {
            // Redis takes exactly FILTERBY <type> <value>, anything else is a syntax error.
            if a.remaining() != 3 || !a.next_bytes()?.eq_ignore_ascii_case(b"filterby") {
                return Err(CmdError::Syntax);
            }
            let kind = a.next_bytes()?;
            let value = a.next_owned()?;
            filter = Some(if kind.eq_ignore_ascii_case(b"module") {
                ListFilter::Module
            } else if kind.eq_ignore_ascii_case(b"aclcat") {
                ListFilter::AclCat(value)
            } else if kind.eq_ignore_ascii_case(b"pattern") {
                ListFilter::Pattern(value)
            } else {
                return Err(CmdError::Syntax);
            });
        }
        Ok(CommandList(listing, filter))
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let all = ctx.shared.table.commands();
        Ok(Reply::Array(match (self.0, self.1) {
            // Subcommands are listed too, each after its command, as in Redis.
            (CommandListing::Names, filter) => all
                .iter()
                .flat_map(|c| std::iter::once(*c).chain(c.subcommands.iter()))
                .filter(|c| filter.as_ref().is_none_or(|f| f.keeps(c)))
                .map(|c| Reply::bulk(c.name.as_bytes()))
                .collect(),
            (CommandListing::Infos, _) => all.iter().map(|c| command_info(c)).collect(),
        }))
    }
}

/// COMMAND COUNT
#[derive(Debug)]
pub(super) struct CommandCount;

impl Command<'_> for CommandCount {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(CommandCount)
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        Ok(Reply::Int(ctx.shared.table.commands().len() as i64))
    }
}

fn find_spec(ctx: &Ctx<'_>, name: &[u8]) -> Option<&'static C> {
    let lower = name.to_ascii_lowercase();
    match lower.iter().position(|&c| c == b'|') {
        None => ctx.shared.table.get(&lower),
        Some(p) => ctx
            .shared
            .table
            .get(&lower[..p])?
            .subcommands
            .iter()
            .find(|s| s.name.as_bytes() == &lower[..]),
    }
}

/// COMMAND INFO [name …]
#[derive(Debug)]
pub(super) struct CommandInfo {
    names: Vec<Bytes>,
}

impl Command<'_> for CommandInfo {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(CommandInfo {
            names: crate::engine::args::owned(a.rest()),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        if self.names.is_empty() {
            return VariantCommand::apply(CommandList(CommandListing::Infos, None), ctx);
        }
        Ok(Reply::Array(
            self.names
                .iter()
                .map(|n| find_spec(ctx, n).map_or(Reply::Null, command_info))
                .collect(),
        ))
    }
}

/// COMMAND DOCS [name …]: each command's documentation (`engine::docs`); a name sluice does not
/// know is left out of the map, as in Redis.
#[derive(Debug)]
pub(super) struct CommandDocs {
    names: Vec<Bytes>,
}

impl Command<'_> for CommandDocs {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(CommandDocs {
            names: crate::engine::args::owned(a.rest()),
        })
    }
    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let specs: Vec<&C> = if self.names.is_empty() {
            ctx.shared.table.commands()
        } else {
            self.names
                .iter()
                .filter_map(|n| find_spec(ctx, n))
                .collect()
        };
        Ok(Reply::Map(
            specs
                .into_iter()
                .map(|s| {
                    let subs: Vec<&str> = s.subcommands.iter().map(|c| c.name).collect();
                    (
                        Reply::bulk(s.name.as_bytes()),
                        crate::engine::docs::docs_reply(s.name, &subs),
                    )
                })
                .collect(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::table::CommandTable;

    /// The key specs COMMAND INFO reports and the positions locking uses come from one place
    /// in the table but are written apart where Redis gives several specs: on a request
    /// with every count argument 2, the specs with a known start find exactly the keys the
    /// table locks (apart from keys only an `unknown` spec finds).
    #[test]
    fn reported_key_specs_find_the_locked_keys() {
        let table = CommandTable::build();
        for entry in table.entries() {
            let spec = entry.spec;
            let args: Vec<Bytes> = std::iter::once(Bytes::from_static(spec.name.as_bytes()))
                .chain(std::iter::repeat_n(Bytes::from_static(b"2"), 9))
                .collect();
            let locked: Vec<usize> = spec
                .keys
                .positions(&crate::engine::args::borrowed(&args))
                .collect();
            let has_unknown = spec.key_specs.iter().any(|d| d.begin.is_none());
            for pos in 1..args.len() {
                let reported = spec
                    .key_specs
                    .iter()
                    .any(|d| d.finds(&crate::engine::args::borrowed(&args), pos));
                if spec.key_specs.is_empty() {
                    continue;
                }
                assert!(
                    !reported || locked.contains(&pos),
                    "{}: a key spec finds argument {pos}, locking does not ({locked:?})",
                    spec.name
                );
                assert!(
                    reported || has_unknown || !locked.contains(&pos),
                    "{}: locking takes argument {pos}, no key spec finds it",
                    spec.name
                );
            }
            // Flags for the derived spec only make sense where there is one.
            assert!(
                spec.key_flags.is_none() || matches!(spec.keys, KeySpec::Range { .. }),
                "{}: key flags without a range of keys",
                spec.name
            );
        }
    }
}
