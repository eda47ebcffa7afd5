//! CLIENT TRACKING, CACHING, GETREDIR and TRACKINGINFO: a connection's client-side caching
//! mode (the tables and the messages are `client::tracking`'s).

use bytes::Bytes;

use crate::client::tracking::{Options, Tracking};
use crate::engine::{ArgCursor, Command, Ctx};
use crate::error::{CmdError, CmdResult};
use crate::num::parse_i64;
use crate::protocol::Reply;

/// CLIENT TRACKING ON|OFF [REDIRECT id] [BCAST] [PREFIX p]... [OPTIN] [OPTOUT] [NOLOOP]
#[derive(Debug)]
pub(super) struct ClientTracking {
    on: Bytes,
    opts: Options,
}

impl Command<'_> for ClientTracking {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        let on = a.next_owned()?;
        let mut opts = Options::default();
        let mut redirect_given = false;
        // Redis's order: every option is read (and REDIRECT checked) before ON/OFF.
        while a.remaining() > 0 {
            let more = a.remaining() > 1;
            let opt = a.next()?.to_ascii_lowercase();
            match &opt[..] {
                b"redirect" if more => {
                    if redirect_given {
                        return Err(CmdError::msg(
                            "ERR A client can only redirect to a single other client",
                        ));
                    }
                    let id = parse_i64(a.next()?).ok_or(CmdError::NotInteger)?;
                    redirect_given = id != 0;
                    opts.redirect = id as u64;
                    // Checked against the registry in `apply`, in this order.
                    if id <= 0 {
                        return Err(no_such_client());
                    }
                }
                b"bcast" => opts.bcast = true,
                b"optin" => opts.optin = true,
                b"optout" => opts.optout = true,
                b"noloop" => opts.noloop = true,
                b"prefix" if more => opts.prefixes.push(a.next_owned()?),
                _ => return Err(CmdError::Syntax),
            }
        }
        Ok(ClientTracking { on, opts })
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let tracking = ctx.shared.keyspace.tracking().clone();
        let opts = self.opts;
        let target = match opts.redirect {
            0 => None,
            id => Some(ctx.shared.clients.get(id).ok_or_else(no_such_client)?),
        };
        if self.on.eq_ignore_ascii_case(b"off") {
            tracking.disable(&ctx.client.info);
            ctx.client.tracking = false;
            ctx.client.caching = false;
            return Ok(Reply::ok());
        }
        if !self.on.eq_ignore_ascii_case(b"on") {
            return Err(CmdError::Syntax);
        }
        if !opts.bcast && !opts.prefixes.is_empty() {
            return Err(CmdError::msg(
                "ERR PREFIX option requires BCAST mode to be enabled",
            ));
        }
        let mode = ctx
            .client
            .info
            .tracking
            .lock()
            .map(|m| m.clone())
            .unwrap_or_default();
        if mode.on && mode.bcast != opts.bcast {
            return Err(CmdError::msg(
                "ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.",
            ));
        }
        if opts.bcast && (opts.optin || opts.optout) {
            return Err(CmdError::msg(
                "ERR OPTIN and OPTOUT are not compatible with BCAST",
            ));
        }
        if opts.optin && opts.optout {
            return Err(CmdError::msg(
                "ERR You can't specify both OPTIN mode and OPTOUT mode",
            ));
        }
        if (opts.optin && mode.optout) || (opts.optout && mode.optin) {
            return Err(CmdError::msg(
                "ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.",
            ));
        }
        if opts.bcast {
            Tracking::check_prefixes(&mode, &opts.prefixes).map_err(CmdError::owned)?;
        }
        // Invalidations reach the connection through its push queue, also while it idles.
        ctx.client.subscriptions();
        if let Some(target) = &target
            && target.id != ctx.client.id()
        {
            Tracking::offer_queue(target);
        }
        tracking.enable(&ctx.client.info, opts);
        ctx.client.tracking = true;
        Ok(Reply::ok())
    }
}

fn no_such_client() -> CmdError {
    CmdError::msg("ERR The client ID you want redirect to does not exist")
}

/// CLIENT CACHING YES|NO: whether the next command's reads are tracked (OPTIN / OPTOUT).
#[derive(Debug)]
pub(super) struct ClientCaching(Bytes);

impl Command<'_> for ClientCaching {
    fn parse(a: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(ClientCaching(a.next_owned()?))
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let mode = ctx
            .client
            .info
            .tracking
            .lock()
            .map(|m| m.clone())
            .unwrap_or_default();
        if !mode.on {
            return Err(CmdError::msg(
                "ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled",
            ));
        }
        if self.0.eq_ignore_ascii_case(b"yes") {
            if !mode.optin {
                return Err(CmdError::msg(
                    "ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.",
                ));
            }
        } else if self.0.eq_ignore_ascii_case(b"no") {
            if !mode.optout {
                return Err(CmdError::msg(
                    "ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.",
                ));
            }
        } else {
            return Err(CmdError::Syntax);
        }
        ctx.client.caching = true;
        Ok(Reply::ok())
    }
}

/// CLIENT GETREDIR: the client this one's invalidations go to (0: itself, -1: not tracking).
#[derive(Debug)]
pub(super) struct ClientGetRedir;

impl Command<'_> for ClientGetRedir {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(ClientGetRedir)
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let mode = ctx.client.info.tracking.lock().map(|m| m.clone());
        Ok(Reply::Int(match mode {
            Ok(m) if m.on => m.redirect as i64,
            _ => -1,
        }))
    }
}

/// CLIENT TRACKINGINFO: flags, redirect and prefixes, as Redis reports them.
#[derive(Debug)]
pub(super) struct ClientTrackingInfo;

impl Command<'_> for ClientTrackingInfo {
    fn parse(_: &mut ArgCursor<'_>) -> CmdResult<Self> {
        Ok(ClientTrackingInfo)
    }

    fn apply(self, ctx: &mut Ctx<'_>) -> CmdResult<Reply> {
        let m = ctx
            .client
            .info
            .tracking
            .lock()
            .map(|m| m.clone())
            .unwrap_or_default();
        let caching = ctx.client.caching;
        let mut flags = vec![if m.on { "on" } else { "off" }];
        if m.bcast {
            flags.push("bcast");
        }
        if m.optin {
            flags.push("optin");
            if caching {
                flags.push("caching-yes");
            }
        }
        if m.optout {
            flags.push("optout");
            if caching {
                flags.push("caching-no");
            }
        }
        if m.noloop {
            flags.push("noloop");
        }
        if m.broken_redirect {
            flags.push("broken_redirect");
        }
        let redirect = if m.on { m.redirect as i64 } else { -1 };
        Ok(Reply::Map(vec![
            (
                Reply::bulk(b"flags"),
                Reply::Set(
                    flags
                        .into_iter()
                        .map(|f| Reply::bulk(f.as_bytes()))
                        .collect(),
                ),
            ),
            (Reply::bulk(b"redirect"), Reply::Int(redirect)),
            (
                Reply::bulk(b"prefixes"),
                Reply::Array(m.prefixes.into_iter().map(Reply::Bulk).collect()),
            ),
        ]))
    }
}
